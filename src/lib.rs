//! hudifs: mount an Apache Hudi table read-only and see exactly the files its timeline makes
//! visible. The table format and the visibility rules are in `hudifs-core`, the storage seam in
//! `hudifs-storage`; this crate is what sits on top:
//!
//! - `fs`: the file system as plain logic (views, inodes, kernel-cache policy, `timeline/`,
//!   xattrs), tested without a kernel;
//! - `follow`: following writers (inotify or polling) and installing new snapshots;
//! - `fuse`: the FUSE adapter, the only module that knows `fuser`;
//! - `daemon`: mount and umount, background launch, signals;
//! - `journal`: the restart journal, what a serving daemon hands the one that takes its mount
//!   over: typed records in an anonymous memory file;
//! - `cli`: the command line; `error`: its errors and exit codes;
//! - `mount_config`: one mount's configuration, typed and checked, from flags and `-o`;
//! - `options`: `-o` options as mount(8) and fstab give them; `access`: owner and modes;
//! - `notify`: systemd readiness; `status`: `hudifs status` and the daemon's state file;
//! - `manual`: completions and the man page; `lake`: a lake (a root holding many tables) in one
//!   mount;
//! - `delta`, `iceberg`: the table as Delta Lake and Iceberg metadata, as plain values;
//!   `saved_form`: the binary form of what they keep across mounts; `thrift_compact`: the
//!   Thrift of Parquet footers, read.

/// `hudifs --version`: the package version and the build's git revision (`build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (git ",
    env!("HUDIFS_GIT_REV"),
    ")"
);

pub mod access;
pub mod cli;
pub mod csi;
pub mod daemon;
pub mod delta;
pub mod error;
pub mod follow;
pub mod fs;
pub mod fuse;
pub mod iceberg;
pub mod journal;
pub mod lake;
pub mod manual;
pub mod metrics;
pub mod mount_config;
pub mod notify;
pub mod options;
pub mod saved_form;
pub mod status;
pub mod store;
pub mod sys;
pub mod thrift_compact;
