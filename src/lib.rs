//! hudifs: mount an Apache Hudi table read-only and see exactly the files its timeline makes
//! visible.
//!
//! Data flows top to bottom through these modules (see README.md):
//! `table` (hoodie.properties) → `timeline` (instants, derived sets; `metadata` decodes instant
//! files) → `listing` (partitions and data-file names) → `fsview` (the pure visibility rules:
//! a view is a function of a timeline, a listing and a view key) → `timefmt` (time spellings).
//! `archive` reads the archived timeline (instants older than the active one).

pub mod archive;
pub mod cli;
pub mod daemon;
pub mod error;
pub mod fs;
pub mod fsview;
pub mod fuse;
pub mod generator;
pub mod inode;
pub mod kernel_cache;
pub mod listing;
pub mod live;
pub mod metadata;
pub mod partitions;
pub mod snapshot;
pub mod table;
pub mod timefmt;
pub mod timeline;
pub mod viewkey;
