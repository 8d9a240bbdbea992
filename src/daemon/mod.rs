//! `hudifs mount` and `hudifs umount`. A table's mount is held by a keeper process
//! (`keeper.rs`) and served by daemons it starts, each taking the mount over from the one before
//! if it dies (`takeover.rs`); a lake's daemon serves its mount itself (`session.rs`). The
//! background launch is in `launch.rs`, the mount point's checks and unmounting in
//! `mountpoint.rs`.

mod keeper;
mod launch;
mod mountpoint;
mod session;
mod takeover;

use std::sync::Arc;

use hudifs_storage::{Storage, TablePath};

use crate::cli::MountArgs;
use crate::error::{Error, Result};
use crate::fs::FsOptions;
use crate::fuse::MountConfig;

pub use launch::log_path;
pub use mountpoint::{is_mount_point, umount};

/// `hudifs mount`.
pub fn mount(args: &MountArgs) -> Result<()> {
    // `-o` options become flags; what is left of them goes to the kernel (options.rs).
    let resolved = crate::options::resolve(args)?;
    let args = &resolved;
    if args.threads == 0 {
        return Err(Error::Usage("--threads must be at least 1".into()));
    }
    if let Some(z) = &args.timezone {
        crate::cli::zone(Some(z), None)?;
    }
    // A daemon started by a keeper to serve its mount: mounted and checked already.
    if let Some(handoff) = takeover::Handoff::from_env()? {
        return takeover::serve(args, handoff);
    }
    // Refuse a location that is neither a table nor a lake before touching the mount point.
    if args.foreground {
        // Before the table's storage is opened (and reused by the mount): a store client's
        // runtime threads must inherit the mask too.
        session::block_signals();
    }
    let table = table_or_lake(args)?;
    mountpoint::check_mountpoint(&args.mountpoint)?;
    if !args.foreground {
        return launch::launch_background(args);
    }
    match table {
        Some(table) if keeper::wanted() => keeper::run(args, table),
        table => session::run_foreground(args, table),
    }
}

/// The storage and configuration of `args.table` when it is a table (opened, checked and read:
/// the mount reuses them, on a store a client and three requests fewer), `None` when it is a lake
/// (not a table, but tables below it within `--lake-depth`); an error when it is neither, or a
/// table that cannot be read.
fn table_or_lake(args: &MountArgs) -> Result<Option<Table>> {
    let not_a_table = match open_store(args)
        .and_then(|s| Ok(hudifs_core::table::TableConfig::load(&*s).map(|cfg| (s, cfg))?))
    {
        Ok(t) => return Ok(Some(t)),
        Err(e @ Error::Table(hudifs_core::error::Error::NotATable(_))) => e,
        Err(e) => return Err(e),
    };
    let store = crate::store::open_root(&args.table, &args.store)?;
    match crate::lake::discover(&*store, &TablePath::root(), args.lake_depth) {
        Ok(found) if !found.is_empty() => Ok(None),
        _ => Err(not_a_table),
    }
}

/// A table's storage and configuration, as read to tell it from a lake.
type Table = (Arc<dyn Storage>, hudifs_core::table::TableConfig);

fn fs_options(args: &MountArgs) -> Result<FsOptions> {
    Ok(FsOptions {
        read_optimized: args.read_optimized,
        zone: match &args.timezone {
            Some(z) => Some(crate::cli::zone(Some(z), None)?),
            None => None,
        },
        merge: crate::fs::MergeSettings {
            cache_dir: args.merge_cache.clone(),
            cache_bytes: args.merge_cache_size,
            memory_cap: args.merge_memory,
        },
        access: args.access(),
        listing: args.store.listing,
    })
}

/// A failed mount as the command's error: bad options are usage errors.
fn mount_failure(e: crate::fuse::MountFailure) -> Error {
    match e {
        crate::fuse::MountFailure::Usage(m) => Error::Usage(m),
        crate::fuse::MountFailure::Kernel(m) => Error::Mount(m),
    }
}

/// The listening socket of `--metrics`, if asked for: bound before the mount is made, so that
/// an address in use fails the mount.
fn bind_metrics(args: &MountArgs) -> Result<Option<std::net::TcpListener>> {
    args.metrics
        .as_deref()
        .map(|addr| {
            crate::metrics::bind(addr)
                .map_err(|e| Error::Mount(format!("--metrics: cannot listen on {e}")))
        })
        .transpose()
}

/// The storage of the table of `args`.
fn open_store(args: &MountArgs) -> Result<Arc<dyn Storage>> {
    open_store_checked(args, true)
}

/// [`open_store`], without the check request when `check` is false (a keeper checked).
fn open_store_checked(args: &MountArgs, check: bool) -> Result<Arc<dyn Storage>> {
    let cache = args.cache.as_deref().map(|d| (d, args.max_cache_size));
    crate::store::open_store_checked(&args.table, &args.store, cache, check)
}

fn mount_config(args: &MountArgs, table: &str) -> MountConfig {
    let allow_other = args.allow_other
        || args
            .options
            .iter()
            .any(|g| g.split(',').any(|o| o.trim() == "allow_other"));
    let mut options = args.options.clone();
    if args.kernel_checks_permissions() {
        options.push("default_permissions".into());
    }
    MountConfig {
        fsname: format!("hudifs:{table}"),
        options,
        allow_other,
        threads: args.threads,
        // Remote files have no descriptor to pass through: read through the daemon.
        passthrough: !args.no_passthrough && !crate::store::is_remote(&args.table),
    }
}
