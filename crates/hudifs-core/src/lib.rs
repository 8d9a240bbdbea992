//! hudifs-core: the Hudi table format as hudifs reads it, and the visibility rules.
//!
//! Data flows top to bottom through these modules: `table` (hoodie.properties) → `timeline`
//! (instants, derived sets; `metadata` decodes instant files) → `listing` (partitions and
//! data-file names) → `fsview` (the visibility rules: a view is a function of a timeline, a
//! listing and a view key) → `timefmt` and `viewkey` (time spellings and view names).
//! `archive` reads the archived timeline (instants older than the active one).

pub mod archive;
pub mod error;
pub mod fsview;
pub mod listing;
pub mod metadata;
pub mod snapshot;
pub mod table;
pub mod timefmt;
pub mod timeline;
pub mod viewkey;
