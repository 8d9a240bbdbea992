//! A serving daemon of a kept mount (`keeper.rs`, docs/SEMANTICS.md §7.11): it gets the
//! mount's connection and restart journal from its keeper, opens the table, takes over the inode
//! numbers, handles and backing files the daemons before it handed out, and serves until the
//! mount goes away. It has no signal handling of its own: a signal that ends it ends only this
//! daemon, and the keeper starts another.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::follow::Follower;
use crate::fs::{HudiFs, Served};
use crate::journal::{Record, RestartJournal};
use crate::mount_config::MountConfig;
use hudifs_core::table::TableConfig;
use hudifs_storage::TablePath;

use super::launch::report_ready;
use super::open_store_checked;
use super::session::return_large_buffers_at_free;

const FD_ENV: &str = "HUDIFS_KEPT_FD";
const JOURNAL_ENV: &str = "HUDIFS_KEPT_JOURNAL";
const PASSTHROUGH_ENV: &str = "HUDIFS_KEPT_PASSTHROUGH";
const RESUMED_ENV: &str = "HUDIFS_KEPT_RESUMED";
const METRICS_ENV: &str = "HUDIFS_KEPT_METRICS";

/// What a keeper hands a serving daemon (in its environment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Handoff {
    /// The mount's connection (`/dev/fuse`), INIT answered.
    pub fd: RawFd,
    /// The restart journal (`journal/`).
    pub journal: RawFd,
    /// Whether the kernel granted passthrough at INIT.
    pub passthrough: bool,
    /// A daemon served the mount before this one.
    pub resumed: bool,
    /// The listening socket of `--metrics` (the keeper's: it stays open across restarts).
    pub metrics: Option<RawFd>,
}

impl Handoff {
    pub fn to_env(self) -> Vec<(&'static str, String)> {
        let mut env = vec![
            (FD_ENV, self.fd.to_string()),
            (JOURNAL_ENV, self.journal.to_string()),
            (PASSTHROUGH_ENV, u8::from(self.passthrough).to_string()),
            (RESUMED_ENV, u8::from(self.resumed).to_string()),
        ];
        if let Some(m) = self.metrics {
            env.push((METRICS_ENV, m.to_string()));
        }
        env
    }

    /// The handoff of this process, if a keeper started it (taken out of the environment, so
    /// that nothing this daemon starts inherits it); an error if it is garbled.
    pub fn from_env() -> Result<Option<Handoff>> {
        let h = Handoff::from_vars(|k| std::env::var_os(k))?;
        for k in [
            FD_ENV,
            JOURNAL_ENV,
            PASSTHROUGH_ENV,
            RESUMED_ENV,
            METRICS_ENV,
        ] {
            std::env::remove_var(k);
        }
        Ok(h)
    }

    /// The handoff that the variables `var` gives say ([`Handoff::to_env`]'s).
    fn from_vars(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Result<Option<Handoff>> {
        if var(FD_ENV).is_none() {
            return Ok(None);
        }
        let num = |k: &str| -> Result<i32> {
            var(k)
                .and_then(|v| v.to_str()?.parse().ok())
                .ok_or_else(|| Error::Usage(format!("{k}: not a number from a hudifs keeper")))
        };
        Ok(Some(Handoff {
            fd: num(FD_ENV)?,
            journal: num(JOURNAL_ENV)?,
            passthrough: num(PASSTHROUGH_ENV)? == 1,
            resumed: num(RESUMED_ENV)? == 1,
            metrics: match var(METRICS_ENV) {
                Some(_) => Some(num(METRICS_ENV)?),
                None => None,
            },
        }))
    }
}

/// Serve the kept mount of `cfg` on the connection `h` names, until the mount goes away.
pub(super) fn serve(cfg: &MountConfig, h: Handoff) -> Result<()> {
    // SAFETY: the keeper passed these descriptors to this process alone, under these numbers.
    let (fd, journal) = unsafe {
        (
            OwnedFd::from_raw_fd(h.fd),
            Arc::new(RestartJournal::from_raw_fd(h.journal)),
        )
    };
    // SAFETY: as above.
    let listener = h
        .metrics
        .map(|fd| unsafe { std::net::TcpListener::from(OwnedFd::from_raw_fd(fd)) });
    for raw in [Some(h.fd), Some(h.journal), h.metrics]
        .into_iter()
        .flatten()
    {
        // SAFETY: fcntl on a descriptor this process owns: not inherited by what it starts.
        unsafe { libc::fcntl(raw, libc::F_SETFD, libc::FD_CLOEXEC) };
    }
    if cfg.is_remote() {
        return_large_buffers_at_free();
    }
    let started = std::time::Instant::now();
    // Installed first: the requests that open the table count too.
    let metrics = crate::metrics::global();
    // Read once: the table's configuration, the ids behind inode numbers, backing files.
    let records = journal
        .records()
        .map_err(|e| Error::io("the restart journal", e))?;
    // The first daemon takes the table's configuration as its keeper read it (the keeper
    // checked the store too); one that takes over reads it again (the table may have been
    // upgraded since).
    let given = if h.resumed {
        None
    } else {
        records.iter().find_map(|r| match r {
            Record::TableConfig(props) => Some(props.clone()),
            _ => None,
        })
    };
    let store = open_store_checked(cfg, given.is_none())?;
    let table_cfg = match given {
        Some(props) => TableConfig::from_properties(
            &store.describe(&TablePath::new(".hoodie/hoodie.properties").unwrap_or_default()),
            props,
        )?,
        None => TableConfig::load(&*store)?,
    };
    let fs = Arc::new(HudiFs::with_config(store, table_cfg, cfg.fs_options())?);
    let latest = fs.clone();
    metrics.set_latest(Box::new(move || latest.latest_instant()));
    if let Some(l) = listener {
        crate::metrics::serve(l, metrics.clone()).map_err(|e| Error::io("metrics thread", e))?;
    }
    fs.resume_from(&journal, &records)?;
    let table = fs.store().describe(&Default::default());
    let session = crate::fuse::serve_kept(
        fs.clone() as Arc<dyn Served>,
        fd,
        cfg,
        &table,
        h.passthrough,
        journal,
        h.resumed.then_some(&records[..]),
    );
    drop(records);
    if h.resumed {
        log::info!(
            "took over the mount of {table} at {} in {} ms (latest instant {})",
            cfg.mountpoint.display(),
            started.elapsed().as_millis(),
            fs.latest_instant().unwrap_or_else(|| "none".into())
        );
    } else {
        log::info!(
            "serving {table} at {} (latest instant {})",
            cfg.mountpoint.display(),
            fs.latest_instant().unwrap_or_else(|| "none".into())
        );
    }
    let poll = cfg.poll_period();
    let notifier = session.notifier();
    if h.resumed {
        // What the kernel holds of latest/ may predate a switch the dead daemon never told it
        // about. From a thread: an invalidation can wait on a read that only this daemon,
        // once serving, answers.
        let (dirs, n) = (fs.inherited_latest_dirs(), notifier.clone());
        std::thread::spawn(move || {
            for ino in dirs {
                n.inval_inode(ino);
            }
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stop_follow = stop.clone();
    let fs_follow = fs.clone();
    std::thread::Builder::new()
        .name("hudifs-follow".into())
        .spawn(move || Follower::new().run(fs_follow, Some(notifier), poll, stop_follow))
        .map_err(|e| Error::io("follow thread", e))?;
    report_ready();
    let result = session.run();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    result.map_err(|e| Error::io(cfg.mountpoint.display().to_string(), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handoff_survives_the_environment() {
        let read = |h: Handoff| {
            let env: std::collections::HashMap<&str, String> = h.to_env().into_iter().collect();
            Handoff::from_vars(|k| env.get(k).map(Into::into)).unwrap()
        };
        for h in [
            Handoff {
                fd: 7,
                journal: 9,
                passthrough: true,
                resumed: false,
                metrics: Some(11),
            },
            Handoff {
                fd: 3,
                journal: 4,
                passthrough: false,
                resumed: true,
                metrics: None,
            },
        ] {
            assert_eq!(read(h), Some(h));
        }
        assert_eq!(
            Handoff::from_vars(|_| None).unwrap(),
            None,
            "not started by a keeper"
        );
        let garbled = |k: &str| (k == FD_ENV).then(|| "x".into());
        assert!(Handoff::from_vars(garbled).is_err());
    }
}
