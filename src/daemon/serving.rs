//! One serving assembly: what a daemon serves ([`Serving`]: one table, or a lake of them), how it
//! gets its session ([`Session`]: it mounts itself, or takes its keeper's connection over), and
//! [`serve`], which does for either what every daemon does: allocator tuning, metrics, read-ahead,
//! the state file, readiness, the follower thread, the stop signal and the clean-up.

use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hudifs_storage::LocalStore;

use crate::error::{Error, Result};
use crate::follow::Follower;
use crate::fs::{HudiFs, KernelNotifier, Served};
use crate::fuse::{Mounted, Unmounter};
use crate::journal::{Record, RestartJournal};
use crate::lake::LakeFs;
use crate::mount_config::MountConfig;
use crate::sys::signals::{self, Blocked};

use super::launch::{log_name, report_ready, DAEMON_ENV};
use super::mountpoint::{match_read_ahead, set_store_read_ahead, unmount_busy, STOP_GRACE};
use super::{bind_metrics, mount_failure, Table};
use crate::status::log_path;

/// What a daemon serves: one table, or a lake of them.
pub(super) enum Serving {
    Table(Arc<HudiFs>),
    Lake(Arc<LakeFs>),
}

/// How a daemon gets its session.
pub(super) enum Session {
    /// It mounts the mount point itself, and unmounts it on a stop signal (a lake; a table
    /// without a keeper).
    Own,
    /// Its keeper mounted, and hands it the connection (`takeover.rs`).
    Kept(KeptConnection),
}

/// What a serving daemon takes from its keeper: the mount's connection and what the daemons
/// before it handed out.
pub(super) struct KeptConnection {
    /// The mount's connection (`/dev/fuse`), INIT answered.
    pub fd: OwnedFd,
    /// The restart journal, and its records as read once at the start.
    pub journal: Arc<RestartJournal>,
    pub records: Vec<Record>,
    /// Whether the kernel granted passthrough at INIT.
    pub passthrough: bool,
    /// A daemon served the mount before this one.
    pub resumed: bool,
    /// The keeper's `--metrics` listening socket.
    pub metrics: Option<TcpListener>,
    /// When this daemon started, for the log of a takeover.
    pub started: Instant,
}

impl Serving {
    /// The table `table_or_lake` opened and read, or else the lake at the table location of
    /// `cfg`.
    pub(super) fn open(cfg: &MountConfig, table: Option<Table>) -> Result<Serving> {
        Ok(match table {
            Some((store, table_cfg)) => {
                Serving::Table(HudiFs::with_config(store, table_cfg, cfg.fs_options())?.shared())
            }
            None => {
                let root = crate::store::open_root(&cfg.table, &cfg.store)?;
                Serving::Lake(Arc::new(LakeFs::open(
                    root,
                    cfg.fs_options(),
                    cfg.lake_options(),
                )?))
            }
        })
    }

    fn served(&self) -> Arc<dyn Served> {
        match self {
            Serving::Table(fs) => fs.clone(),
            Serving::Lake(l) => l.clone(),
        }
    }

    /// Where it lives, as logs and the state file name it.
    fn describe(&self) -> String {
        match self {
            Serving::Table(fs) => fs.store().describe(&Default::default()),
            Serving::Lake(l) => l.describe(),
        }
    }

    /// The local directory it lives in, if it is not on an object store.
    fn local(&self) -> Option<LocalStore> {
        match self {
            Serving::Table(fs) => fs.store().local().cloned(),
            Serving::Lake(l) => l.local().cloned(),
        }
    }

    /// Start following what writers change until `stop`: a table's timeline, or the tables that
    /// come and go in a lake.
    fn follow(
        &self,
        notifier: Arc<dyn KernelNotifier>,
        poll: Duration,
        stop: Arc<AtomicBool>,
    ) -> Result<()> {
        match self {
            Serving::Table(fs) => {
                let fs = fs.clone();
                std::thread::Builder::new()
                    .name("hudifs-follow".into())
                    .spawn(move || Follower::new().run(fs, Some(notifier), poll, stop))
            }
            // Each table is followed from its first use on (lake_fs.rs); this thread finds
            // tables that come and go.
            Serving::Lake(l) => {
                let lake = l.clone();
                std::thread::Builder::new()
                    .name("hudifs-lake".into())
                    .spawn(move || lake.follow_lake(&stop))
            }
        }
        .map(drop)
        .map_err(|e| Error::io("follow thread", e))
    }
}

/// Serve what `open` opens, on the session `session` says, until the session ends: the mount is
/// unmounted (from outside, or on a stop signal for a session of its [own](Session::Own)).
/// `open` runs once the allocator is tuned and metrics count the requests it makes.
pub(super) fn serve(
    cfg: &MountConfig,
    mut session: Session,
    open: impl FnOnce() -> Result<Serving>,
) -> Result<()> {
    if cfg.is_remote() {
        crate::sys::alloc::return_large_buffers_at_free();
    }
    // Signals are handled by one thread; every thread started from here inherits the mask. A
    // kept session's daemon has no signal handling: a signal that ends it ends only it.
    let signals = matches!(session, Session::Own).then(|| Blocked::block(&signals::STOP));
    // Installed first: the requests that open the table count too.
    let metrics = crate::metrics::global();
    let serving = open()?;
    if let Serving::Table(fs) = &serving {
        let latest = fs.clone();
        metrics.set_latest(Box::new(move || latest.latest_instant()));
        fs.warm_delta();
    }
    let listener = match &mut session {
        Session::Own => bind_metrics(cfg)?,
        Session::Kept(k) => k.metrics.take(),
    };
    if let Some(l) = listener {
        crate::metrics::serve(l, metrics.clone()).map_err(|e| Error::io("metrics thread", e))?;
    }
    let table = serving.describe();
    let poll = cfg.poll_period();
    let stop = Arc::new(AtomicBool::new(false));
    // Whether the session ended (the mount is gone).
    let ended = Arc::new(AtomicBool::new(false));
    let (mounted, _state) = match session {
        Session::Own => {
            let signals = signals.expect("blocked for an own session");
            let (mut mounted, mp) = mount_own(cfg, &serving, &table)?;
            // Beside the log, for `hudifs status`, before anyone hears the mount is live;
            // removed when this function returns.
            let log = log_path(&cfg.mountpoint);
            let state = crate::status::State {
                mountpoint: mp.clone(),
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
            announce_live(cfg, &table);
            let unmounter = mounted.unmounter();
            let state_file = crate::status::state_path(&log);
            let (stop_sig, ended_sig) = (stop.clone(), ended.clone());
            std::thread::Builder::new()
                .name("hudifs-signals".into())
                .spawn(move || {
                    stop_on_signal(signals, unmounter, &mp, &state_file, stop_sig, ended_sig)
                })
                .map_err(|e| Error::io("signal thread", e))?;
            serving.follow(mounted.notifier(), poll, stop.clone())?;
            (mounted, state)
        }
        Session::Kept(k) => {
            let mounted = take_kept(cfg, &serving, &table, k)?;
            serving.follow(mounted.notifier(), poll, stop.clone())?;
            report_ready();
            (mounted, None)
        }
    };
    let result = mounted.run();
    ended.store(true, Ordering::SeqCst);
    // What `delta/` saves for the next mount of its table (SEMANTICS §11.5) ends first.
    crate::fs::wait_for_saves(SAVE_GRACE);
    stop.store(true, Ordering::SeqCst);
    if let Serving::Lake(l) = &serving {
        l.stop();
    }
    if signals.is_some() {
        forget_empty_log(cfg);
    }
    result.map_err(|e| Error::io(cfg.mountpoint.display().to_string(), e))
}

/// Mount `serving` (described as `table`) at the mount point of `cfg`, with the read-ahead its
/// storage wants; the session, and the mount point as resolved before it was mounted.
fn mount_own(cfg: &MountConfig, serving: &Serving, table: &str) -> Result<(Mounted, PathBuf)> {
    // Resolved before the mount: once it is live, a stat of it from here would wait for this
    // very daemon to answer.
    let mount_path = cfg.mountpoint.canonicalize().ok();
    let mounted = crate::fuse::mount(serving.served(), cfg, table).map_err(mount_failure)?;
    if let Some(mp) = &mount_path {
        match &serving.local() {
            Some(local) => match_read_ahead(local, mp),
            None => set_store_read_ahead(mp),
        }
    }
    match serving {
        Serving::Table(fs) => log::info!(
            "mounted {table} at {} (latest instant {})",
            cfg.mountpoint.display(),
            fs.latest_instant().unwrap_or_else(|| "none".into())
        ),
        Serving::Lake(l) => {
            l.set_notifier(mounted.notifier());
            log::info!(
                "mounted the lake {table} at {} ({} tables, each read on first use)",
                cfg.mountpoint.display(),
                l.tables().len()
            );
        }
    }
    Ok((
        mounted,
        mount_path.unwrap_or_else(|| cfg.mountpoint.clone()),
    ))
}

/// Serve the table of `serving` on the keeper's connection `k`, taking over the inode numbers,
/// handles and backing files the daemons before this one handed out.
fn take_kept(
    cfg: &MountConfig,
    serving: &Serving,
    table: &str,
    k: KeptConnection,
) -> Result<Mounted> {
    let Serving::Table(fs) = serving else {
        return Err(Error::Usage(
            "a keeper keeps a table's mount, not a lake's".into(),
        ));
    };
    fs.resume_from(&k.journal, &k.records)?;
    let mounted = crate::fuse::serve_kept(
        fs.clone() as Arc<dyn Served>,
        k.fd,
        cfg,
        table,
        k.passthrough,
        k.journal,
        k.resumed.then_some(&k.records[..]),
    );
    drop(k.records);
    let latest = fs.latest_instant().unwrap_or_else(|| "none".into());
    if k.resumed {
        log::info!(
            "took over the mount of {table} at {} in {} ms (latest instant {latest})",
            cfg.mountpoint.display(),
            k.started.elapsed().as_millis(),
        );
        // What the kernel holds of latest/ may predate a switch the dead daemon never told it
        // about. From a thread: an invalidation can wait on a read that only this daemon,
        // once serving, answers.
        let (dirs, n) = (fs.inherited_latest_dirs(), mounted.notifier());
        std::thread::spawn(move || {
            for ino in dirs {
                n.inval_inode(ino);
            }
        });
    } else {
        log::info!(
            "serving {table} at {} (latest instant {latest})",
            cfg.mountpoint.display(),
        );
    }
    Ok(mounted)
}

/// How long an exiting daemon waits for `delta/`'s saves.
const SAVE_GRACE: std::time::Duration = std::time::Duration::from_secs(20);

/// The signal thread of a daemon serving its own mount: on a stop signal, unmount `mp` and
/// stop; if a process still holds the detached mount, exit once the grace period is over
/// unless the session `ended` by then (removing the `state_file` that would otherwise stay).
fn stop_on_signal(
    signals: Blocked,
    mut unmounter: Unmounter,
    mp: &Path,
    state_file: &Path,
    stop: Arc<AtomicBool>,
    ended: Arc<AtomicBool>,
) {
    let sig = signals.wait();
    log::info!("signal {sig}: unmounting {}", mp.display());
    crate::notify::stopping();
    stop.store(true, Ordering::SeqCst);
    if let Err(e) = unmounter.unmount() {
        log::info!("unmount of {} failed: {e}", mp.display());
    }
    if unmount_busy(mp) {
        // Detached, but a process still holds it: the session would serve it for as long as
        // that lasts. Stopping means stopping, as for libfuse daemons: exit, and the kernel
        // fails what is left with ENOTCONN.
        let deadline = Instant::now() + STOP_GRACE;
        while !ended.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !ended.load(Ordering::SeqCst) {
            let _ = std::fs::remove_file(state_file);
            log::info!("exiting with the detached mount still in use");
            std::process::exit(0);
        }
    }
}

/// Tell whoever waits for the mount of `cfg` (of `table`) that it is live: a background
/// launcher, and systemd (`READY=1`).
pub(super) fn announce_live(cfg: &MountConfig, table: &str) {
    report_ready();
    crate::notify::ready(
        std::process::id(),
        &format!("mounted {table} at {}", cfg.mountpoint.display()),
    );
}

/// A background daemon's log that stayed empty is not worth keeping.
fn forget_empty_log(cfg: &MountConfig) {
    let log = log_path(&cfg.mountpoint);
    if std::env::var_os(DAEMON_ENV).is_some() && std::fs::metadata(&log).is_ok_and(|m| m.len() == 0)
    {
        let _ = std::fs::remove_file(&log);
    }
}
