//! The foreground session of a daemon that serves its mount itself (a lake; a table whose
//! mount is kept by a keeper is served by `takeover.rs`): mount, serve, follow the timeline,
//! and unmount on a stop signal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hudifs_storage::LocalStore;

use crate::error::{Error, Result};
use crate::follow::Follower;
use crate::fs::{HudiFs, Served};
use crate::lake::LakeFs;
use crate::mount_config::MountConfig;

use super::launch::{log_name, log_path, report_ready, DAEMON_ENV};
use super::mountpoint::{match_read_ahead, set_store_read_ahead, unmount_busy, STOP_GRACE};
use super::{bind_metrics, mount_failure, Table};

/// What a daemon serves: one table, or a lake of them.
enum Serving {
    Table(Arc<HudiFs>),
    Lake(Arc<LakeFs>),
}

pub(super) fn block_signals() -> libc::sigset_t {
    // SAFETY: plain libc signal-set manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Free large buffers straight back to the system. A read from a store holds its bytes in
/// buffers of up to 8 MiB, many a second, across the runtime's threads; after the first such
/// free glibc raises its mmap threshold above them and serves later ones from per-thread arenas
/// that keep what they once held. Measured with `scripts/bench` figure 7 (`s3read-memory`): a
/// fresh daemon reading 8 files at once grew by 398 to 469 MiB against a prefetch budget of
/// 256 MiB, and by 244 to 310 MiB with the threshold fixed at 1 MiB.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(super) fn return_large_buffers_at_free() {
    // SAFETY: mallopt only sets an allocator parameter; glibc serialises it with allocation.
    if unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) } != 1 {
        log::debug!("mallopt(M_MMAP_THRESHOLD) refused");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(super) fn return_large_buffers_at_free() {}

/// Mount and serve until unmounted or signalled.
pub(super) fn run_foreground(cfg: &MountConfig, table: Option<Table>) -> Result<()> {
    if cfg.is_remote() {
        return_large_buffers_at_free();
    }
    // Signals are handled by one thread; every thread started from here inherits the mask.
    let sigset = block_signals();
    // Installed first: the requests that open the table count too.
    let metrics = crate::metrics::global();
    let poll = cfg.poll_period();
    let serving = if let Some((store, table_cfg)) = table {
        Serving::Table(Arc::new(HudiFs::with_config(
            store,
            table_cfg,
            cfg.fs_options(),
        )?))
    } else {
        let root = crate::store::open_root(&cfg.table, &cfg.store)?;
        Serving::Lake(Arc::new(LakeFs::open(
            root,
            cfg.fs_options(),
            cfg.lake_options(),
        )?))
    };
    let (served, table, local): (Arc<dyn Served>, String, Option<LocalStore>) = match &serving {
        Serving::Table(fs) => (
            fs.clone(),
            fs.store().describe(&Default::default()),
            fs.store().local().cloned(),
        ),
        Serving::Lake(l) => (l.clone(), l.describe(), l.local().cloned()),
    };
    if let Serving::Table(fs) = &serving {
        let latest = fs.clone();
        metrics.set_latest(Box::new(move || latest.latest_instant()));
    }
    if let Some(l) = bind_metrics(cfg)? {
        crate::metrics::serve(l, metrics.clone()).map_err(|e| Error::io("metrics thread", e))?;
    }
    // Resolved before the mount: once it is live, a stat of it from here would wait for this
    // very daemon to answer.
    let mount_path = cfg.mountpoint.canonicalize().ok();
    let mut session = crate::fuse::mount(served, cfg, &table).map_err(mount_failure)?;
    if let Some(mp) = &mount_path {
        match &local {
            Some(local) => match_read_ahead(local, mp),
            None => set_store_read_ahead(mp),
        }
    }
    match &serving {
        Serving::Table(fs) => log::info!(
            "mounted {table} at {} (latest instant {})",
            cfg.mountpoint.display(),
            fs.latest_instant().unwrap_or_else(|| "none".into())
        ),
        Serving::Lake(l) => {
            l.set_notifier(session.notifier());
            log::info!(
                "mounted the lake {table} at {} ({} tables, each read on first use)",
                cfg.mountpoint.display(),
                l.tables().len()
            );
        }
    }
    // Beside the log, for `hudifs status`, before anyone hears the mount is live; removed when
    // this function returns.
    let log = log_path(&cfg.mountpoint);
    let _state = crate::status::State {
        mountpoint: mount_path.clone().unwrap_or_else(|| cfg.mountpoint.clone()),
        table: table.clone(),
        lake: matches!(serving, Serving::Lake(_)),
        pid: std::process::id(),
        keeper_pid: None,
        restarts: 0,
        log: log_name(&log),
    }
    .write(&crate::status::state_path(&log))
    .map_err(|e| log::warn!("no state file for hudifs status: {e}"))
    .ok();
    report_ready();
    crate::notify::ready(
        std::process::id(),
        &format!("mounted {table} at {}", cfg.mountpoint.display()),
    );

    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicBool::new(false));
    let mut unmounter = session.unmounter();
    let mp = mount_path.clone().unwrap_or_else(|| cfg.mountpoint.clone());
    let stop_sig = stop.clone();
    let served_sig = served.clone();
    let state_file = crate::status::state_path(&log);
    std::thread::Builder::new()
        .name("hudifs-signals".into())
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: `sigset` holds the signals blocked above; `sig` is a valid out-pointer.
            unsafe { libc::sigwait(&sigset, &mut sig) };
            log::info!("signal {sig}: unmounting {}", mp.display());
            crate::notify::stopping();
            stop_sig.store(true, Ordering::SeqCst);
            if let Err(e) = unmounter.unmount() {
                log::info!("unmount of {} failed: {e}", mp.display());
            }
            if unmount_busy(&mp) {
                // Detached, but a process still holds it: the session would serve it for as
                // long as that lasts. Stopping means stopping, as for libfuse daemons: exit,
                // and the kernel fails what is left with ENOTCONN.
                let deadline = std::time::Instant::now() + STOP_GRACE;
                while !served_sig.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if !served_sig.load(Ordering::SeqCst) {
                    let _ = std::fs::remove_file(&state_file);
                    log::info!("exiting with the detached mount still in use");
                    std::process::exit(0);
                }
            }
        })
        .map_err(|e| Error::io("signal thread", e))?;

    let stop_follow = stop.clone();
    match &serving {
        Serving::Table(fs) => {
            let fs_follow = fs.clone();
            let notifier = session.notifier();
            std::thread::Builder::new()
                .name("hudifs-follow".into())
                .spawn(move || Follower::new().run(fs_follow, Some(notifier), poll, stop_follow))
        }
        // Each table is followed from its first use on (lake_fs.rs); this thread finds tables
        // that come and go.
        Serving::Lake(l) => {
            let lake = l.clone();
            std::thread::Builder::new()
                .name("hudifs-lake".into())
                .spawn(move || lake.follow_lake(&stop_follow))
        }
    }
    .map_err(|e| Error::io("follow thread", e))?;

    let result = session.run();
    served.store(true, Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    if let Serving::Lake(l) = &serving {
        l.stop();
    }
    // A background daemon's log that stayed empty is not worth keeping.
    let log = log_path(&cfg.mountpoint);
    if std::env::var_os(DAEMON_ENV).is_some() && std::fs::metadata(&log).is_ok_and(|m| m.len() == 0)
    {
        let _ = std::fs::remove_file(&log);
    }
    result.map_err(|e| Error::io(cfg.mountpoint.display().to_string(), e))
}
