//! `hudifs mount` and `hudifs umount`. A table's mount is held by a keeper process
//! (`keeper.rs`) and served by daemons it starts, each taking the mount over from the one before
//! if it dies (`takeover.rs`); a lake's daemon serves its mount itself ([`run_foreground`]).
//! Either daemon is assembled by `serving.rs`. The background launch is in `launch.rs`, the
//! mount point's checks and unmounting in `mountpoint.rs`.

mod keeper;
mod launch;
mod mountpoint;
mod serving;
mod takeover;

use std::sync::Arc;

use hudifs_storage::{Storage, TablePath};

use crate::error::{Error, Result};
use crate::mount_config::MountConfig;

pub use crate::status::log_path;
pub use crate::sys::mountinfo::is_mount_point;
pub use mountpoint::umount;

/// `hudifs mount` of the configuration `cfg` (`MountConfig::from_args` of its command line).
pub fn mount(cfg: &MountConfig) -> Result<()> {
    // Before anything is opened: stores' read windows and merges count against it.
    install_memory_ceiling(cfg)?;
    // A daemon started by a keeper to serve its mount: mounted and checked already.
    if let Some(handoff) = takeover::Handoff::from_env()? {
        return takeover::serve(cfg, handoff);
    }
    // Refuse a location that is neither a table nor a lake before touching the mount point.
    if cfg.foreground {
        // Before the table's storage is opened (and reused by the mount): a store client's
        // runtime threads must inherit the mask too.
        crate::sys::signals::Blocked::block(&crate::sys::signals::STOP);
    }
    let table = table_or_lake(cfg)?;
    mountpoint::check_mountpoint(&cfg.mountpoint)?;
    if !cfg.foreground {
        return launch::launch_background(cfg);
    }
    match table {
        Some(table) if keeper::wanted() => keeper::run(cfg, table),
        table => run_foreground(cfg, table),
    }
}

/// Mount the table or lake of `cfg` (`table`: the table `table_or_lake` read, `None` for a lake)
/// and serve it in this process until unmounted or signalled.
fn run_foreground(cfg: &MountConfig, table: Option<Table>) -> Result<()> {
    serving::serve(cfg, serving::Session::Own, || {
        serving::Serving::open(cfg, table)
    })
}

/// Install the process's memory ceiling (`--max-memory`, docs/SEMANTICS.md §9.9, "Memory
/// ceiling"), refusing one that leaves too little for reads above what the daemon holds already.
fn install_memory_ceiling(cfg: &MountConfig) -> Result<()> {
    use hudifs_storage::ceiling::{self, MemoryCeiling, MIN_DATA};
    let given = cfg.max_memory;
    let c = MemoryCeiling::new(given.unwrap_or_else(ceiling::default_ceiling));
    if c.room() < MIN_DATA {
        return Err(Error::Usage(format!(
            "--max-memory {} MiB is too small: the daemon holds {} MiB itself and needs at least {} MiB more for reads",
            c.ceiling() >> 20,
            c.outside() >> 20,
            MIN_DATA >> 20
        )));
    }
    log::info!(
        "memory ceiling {} MiB{} ({} MiB held at start)",
        c.ceiling() >> 20,
        if given.is_some() {
            ""
        } else {
            " (half of the memory available)"
        },
        c.outside() >> 20
    );
    ceiling::install(c);
    Ok(())
}

/// The storage and configuration of `cfg.table` when it is a table (opened, checked and read:
/// the mount reuses them, on a store a client and three requests fewer), `None` when it is a lake
/// (not a table, but tables below it within `--lake-depth`); an error when it is neither, or a
/// table that cannot be read.
fn table_or_lake(cfg: &MountConfig) -> Result<Option<Table>> {
    let not_a_table = match open_store(cfg)
        .and_then(|s| Ok(hudifs_core::table::TableConfig::load(&*s).map(|c| (s, c))?))
    {
        Ok(t) => return Ok(Some(t)),
        Err(e @ Error::Table(hudifs_core::error::Error::NotATable(_))) => e,
        Err(e) => return Err(e),
    };
    let store = crate::store::open_root(&cfg.table, &cfg.store)?;
    match crate::lake::discover(&*store, &TablePath::root(), cfg.lake_depth) {
        Ok(found) if !found.is_empty() => Ok(None),
        _ => Err(not_a_table),
    }
}

/// A table's storage and configuration, as read to tell it from a lake.
type Table = (Arc<dyn Storage>, hudifs_core::table::TableConfig);

/// A failed mount as the command's error.
fn mount_failure(e: crate::fuse::MountFailure) -> Error {
    Error::Mount(e.0)
}

/// The listening socket of `--metrics`, if asked for: bound before the mount is made, so that
/// an address in use fails the mount.
fn bind_metrics(cfg: &MountConfig) -> Result<Option<std::net::TcpListener>> {
    cfg.metrics
        .as_deref()
        .map(|addr| {
            crate::metrics::bind(addr)
                .map_err(|e| Error::Mount(format!("--metrics: cannot listen on {e}")))
        })
        .transpose()
}

/// The storage of the table of `cfg`.
fn open_store(cfg: &MountConfig) -> Result<Arc<dyn Storage>> {
    open_store_checked(cfg, true)
}

/// [`open_store`], without the check request when `check` is false (a keeper checked).
fn open_store_checked(cfg: &MountConfig, check: bool) -> Result<Arc<dyn Storage>> {
    crate::store::open_store_checked(&cfg.table, &cfg.store, cfg.data_cache(), check)
}
