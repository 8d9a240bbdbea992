//! Tier 2: the same answers through the kernel: `hudifs mount` on a local disk, plain
//! file-system calls, real readers.
//!
//! One test binary; each file is a module, its tests named `file::test`. What each proves:
//! tests/mount/README.md.

mod merge;

mod bootstrap;
mod cdc;
mod crash_restart;
mod delta;
mod demo;
mod hudi_rs_written;
mod iceberg;
mod lake_mount;
mod lifecycle;
mod merged_deletes;
mod merged_fixtures;
mod merged_generated;
mod merged_incremental;
mod merged_refusals;
mod merged_schema;
mod metrics;
mod mount_conformance;
mod permissions;
mod real_client;
mod system;
mod upgraded;
