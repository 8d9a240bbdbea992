//! hudifs: mount an Apache Hudi table read-only and see exactly the files its timeline makes
//! visible. The table format and the visibility rules are in `hudifs-core`; this crate is the
//! file system on top of them (`fs`), following writers (`live`), the FUSE adapter (`fuse`),
//! the daemon and the command line.

pub mod cli;
pub mod daemon;
pub mod fs;
pub mod fuse;
pub mod inode;
pub mod kernel_cache;
pub mod live;
pub mod partitions;
