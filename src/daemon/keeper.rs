//! The keeper of a table's mount (docs/SEMANTICS.md §7.11): the process that mounts, answers the
//! kernel's INIT and then only holds the connection's descriptor, while a serving daemon
//! (`takeover.rs`) answers requests. When the serving daemon dies (a crash, an OOM kill, a
//! `kill`), the mount stays: the kernel keeps what it was asked and what the daemon had read, the
//! keeper starts a new daemon on the same descriptor, and that one asks the kernel to send again
//! what the dead one never answered. Processes reading the mount see a pause, not an error.
//!
//! The keeper is one thread: it waits for a signal (stop: unmount; child: a daemon exited) and
//! does nothing else. A daemon that exits 0 saw its session end (the mount is gone); one that
//! dies any other way is replaced: at once, unless daemons keep dying before they serve (a crash
//! loop: the table cannot be read now), then after a pause that doubles up to 30 s.
//! `HUDIFS_KEEPER=0` serves the mount without a keeper, in one process, as a lake's always is.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::fuse::Kept;
use crate::journal::{Record, RestartJournal};
use crate::mount_config::MountConfig;
use crate::sys::signals::{self, Blocked};
use crate::sys::spawn::{describe_status, exit_code, keep_fds, kill, try_wait, wait, Detach};

use super::launch::{daemon_argv, log_name, READY_FD_ENV};
use super::mountpoint::{match_read_ahead, set_store_read_ahead, unmount_busy};
use super::serving::announce_live;
use super::takeover::Handoff;
use super::{bind_metrics, mount_failure, Table};
use crate::status::log_path;
use crate::sys::mountinfo::is_mount_point;

/// Whether table mounts are kept (`HUDIFS_KEEPER=0` turns it off).
pub(super) fn wanted() -> bool {
    std::env::var("HUDIFS_KEEPER").map_or(true, |v| v != "0")
}

/// The longest pause between restarts in a crash loop.
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// The signals the keeper waits for: stop, and a serving daemon exited.
fn keeper_signals() -> Blocked {
    let [int, term, hup] = signals::STOP;
    Blocked::block(&[int, term, hup, signals::CHILD])
}

/// Mount the table of `cfg` and keep the mount until it is unmounted or the keeper is told to
/// stop.
pub(super) fn run(cfg: &MountConfig, table: Table) -> Result<()> {
    let sigset = keeper_signals();
    let (store, table_cfg) = table;
    let described = store.describe(&Default::default());
    let local = store.local().cloned();
    drop(store);
    // Held here, so that scrapes wait through a restart instead of being refused.
    let metrics = bind_metrics(cfg)?;
    let mount_path = cfg.mountpoint.canonicalize().ok();
    let mp = mount_path.clone().unwrap_or_else(|| cfg.mountpoint.clone());
    let journal =
        Arc::new(RestartJournal::create().map_err(|e| Error::io("the restart journal", e))?);
    // Read once here: the first daemon takes it from the journal (one GET fewer on a store).
    journal.append(&Record::TableConfig(table_cfg.properties.clone()));
    let mut kept = crate::fuse::mount_kept(cfg, &described).map_err(mount_failure)?;
    match &local {
        Some(local) => match_read_ahead(local, &mp),
        None => set_store_read_ahead(&mp),
    }
    let mut keeper = Keeper {
        cfg,
        kept: &kept,
        journal,
        metrics: metrics.as_ref().map(|l| l.as_raw_fd()),
        restarts: 0,
    };
    let (first, ready) = keeper.start(false)?;
    // The first daemon fails before serving (the table cannot be read now): it said why on
    // the standard error this keeper shares with it. Unmount and exit as it did.
    if !ready {
        let status = wait(first.id());
        drop(kept);
        std::process::exit(exit_code(status).unwrap_or(1).max(1));
    }
    let log = log_path(&cfg.mountpoint);
    let state_path = crate::status::state_path(&log);
    let state = |pid: u32, restarts: u32| crate::status::State {
        mountpoint: mp.clone(),
        table: described.clone(),
        lake: false,
        pid,
        keeper_pid: Some(std::process::id()),
        restarts,
        log: log_name(&log),
    };
    let mut state_file = state(first.id(), 0)
        .write(&state_path)
        .map_err(|e| log::warn!("no state file for hudifs status: {e}"))
        .ok();
    log::info!(
        "mounted {described} at {} (serving daemon pid {}, keeper pid {})",
        cfg.mountpoint.display(),
        first.id(),
        std::process::id()
    );
    announce_live(cfg, &described);

    let mut child = first;
    let mut started = Instant::now();
    // Daemons in a row that died before they served.
    let mut crash_loop = 0u32;
    loop {
        let sig = sigset.wait();
        if sig != signals::CHILD {
            unmount_on(sig, &mut kept, &mp);
            stop(&mut child);
            return Ok(());
        }
        let Some(status) = try_wait(child.id()) else {
            continue;
        };
        if exit_code(status) == Some(0) || !is_mount_point(&mp) {
            // The session ended: unmounted from outside.
            log::info!("{} was unmounted", mp.display());
            kept.ended();
            return Ok(());
        }
        if !kept.can_resend() {
            // Requests the dead daemon had read would never be answered: end the mount as a
            // daemon without a keeper does (callers get "Transport endpoint is not connected",
            // `hudifs umount` clears it), leaving it mounted for that.
            log::error!(
                "the serving daemon (pid {}) died ({}); this kernel cannot resend what it had \
                 read (FUSE_NOTIFY_RESEND, Linux 6.9): the mount ends",
                child.id(),
                describe_status(status)
            );
            std::process::exit(1);
        }
        let lived = started.elapsed();
        crash_loop = if child.served() { 0 } else { crash_loop + 1 };
        log::warn!(
            "the serving daemon (pid {}) died ({}) after {:.1} s: starting another",
            child.id(),
            describe_status(status),
            lived.as_secs_f64()
        );
        if crash_loop >= 3 {
            let pause =
                (Duration::from_millis(100) * 2u32.saturating_pow(crash_loop - 3)).min(MAX_PAUSE);
            log::warn!(
                "{crash_loop} daemons in a row died before serving: waiting {:.1} s",
                pause.as_secs_f64()
            );
            // Waited out while still answering a stop signal (there is no daemon to stop).
            let deadline = Instant::now() + pause;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let sig = sigset.wait_for(left);
                if let Some(sig) = sig.filter(|s| *s != signals::CHILD) {
                    unmount_on(sig, &mut kept, &mp);
                    return Ok(());
                }
                if Instant::now() >= deadline {
                    break;
                }
            }
        }
        keeper.restarts += 1;
        let (next, _) = keeper.start(true)?;
        child = next;
        started = Instant::now();
        // Rewritten, not removed in between: `hudifs status` always finds one.
        let restarts = keeper.restarts;
        if let Some(f) = state_file.as_mut() {
            if let Err(e) = state(child.id(), restarts).rewrite(f) {
                log::warn!("state file for hudifs status: {e}");
            }
        }
    }
}

/// What the keeper needs to start a serving daemon.
struct Keeper<'a> {
    cfg: &'a MountConfig,
    kept: &'a Kept,
    journal: Arc<RestartJournal>,
    /// The `--metrics` listening socket.
    metrics: Option<i32>,
    restarts: u32,
}

/// A started serving daemon, with the read end of the pipe it reports on once it serves.
struct Child {
    pid: u32,
    ready: Option<std::fs::File>,
}

impl Child {
    fn id(&self) -> u32 {
        self.pid
    }

    /// Whether it reported that it served (also after it died: the report stays in the pipe).
    fn served(&mut self) -> bool {
        let Some(f) = self.ready.as_mut() else {
            return true;
        };
        crate::sys::fds::set_nonblocking(&*f);
        let mut buf = [0u8; 1];
        let served = matches!(f.read(&mut buf), Ok(1) if buf[0] == b'R');
        if served {
            self.ready = None;
        }
        served
    }
}

impl Keeper<'_> {
    /// Start a serving daemon on the kept connection; with it, whether it reported that it
    /// serves (waited for only for the first daemon: `resumed` ones are not waited for, so that
    /// a slow start of one never holds up the keeper's signals; [`Child::served`] asks later).
    fn start(&self, resumed: bool) -> Result<(Child, bool)> {
        let exe = std::env::current_exe().map_err(|e| Error::io("current executable", e))?;
        let fd = self
            .kept
            .fd()
            .map_err(|e| Error::io("the mount's connection", e))?;
        let journal_fd = self.journal.raw_fd();
        let (ready_read, ready_write) =
            crate::sys::fds::pipe().map_err(|e| Error::io("pipe", e))?;
        let handoff = Handoff {
            fd: fd.as_raw_fd(),
            journal: journal_fd,
            passthrough: self.kept.passthrough(),
            resumed,
            metrics: self.metrics,
        };
        let mut cmd = std::process::Command::new(exe);
        let wfd = ready_write.as_raw_fd();
        let keep = vec![fd.as_raw_fd(), journal_fd, wfd, self.metrics.unwrap_or(-1)];
        cmd.args(daemon_argv(self.cfg))
            .envs(handoff.to_env())
            .env(READY_FD_ENV, wfd.to_string())
            .env_remove("NOTIFY_SOCKET")
            .stdin(std::process::Stdio::null());
        // The keeper's blocked signals are not the daemon's; a terminal's Ctrl-C is the
        // keeper's to handle (it unmounts), not the daemon's.
        keep_fds(&mut cmd, keep, Detach::Group);
        let child = cmd.spawn().map_err(|e| Error::io("spawn daemon", e))?;
        drop(ready_write);
        drop(fd);
        let pid = child.id();
        // The std handle is not kept: the keeper reaps with waitpid itself.
        drop(child);
        let mut child = Child {
            pid,
            ready: Some(std::fs::File::from(ready_read)),
        };
        if resumed {
            return Ok((child, true));
        }
        // The first daemon is waited for: the mount is live once it serves.
        let mut buf = [0u8; 1];
        let reader = child.ready.as_mut().expect("just set");
        let ready = matches!(reader.read(&mut buf), Ok(1) if buf[0] == b'R');
        child.ready = None;
        Ok((child, ready))
    }
}

/// A stop signal: unmount (detaching a busy mount, as a daemon without a keeper does).
fn unmount_on(sig: libc::c_int, kept: &mut Kept, mp: &std::path::Path) {
    log::info!("signal {sig}: unmounting {}", mp.display());
    crate::notify::stopping();
    if let Err(e) = kept.unmounter().unmount() {
        log::info!("unmount of {} failed: {e}", mp.display());
        unmount_busy(mp);
    }
}

/// After the unmount: the serving daemon's session ends by itself; one that does not within the
/// grace period is killed.
fn stop(child: &mut Child) {
    let deadline = Instant::now() + super::mountpoint::STOP_GRACE;
    while Instant::now() < deadline {
        if try_wait(child.id()).is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(child.id());
    wait(child.id());
}
