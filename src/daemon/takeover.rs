//! A serving daemon of a kept mount (`keeper.rs`, docs/SEMANTICS.md §7.11): it gets the
//! mount's connection and restart journal from its keeper, opens the table, takes over the inode
//! numbers, handles and backing files the daemons before it handed out, and serves until the
//! mount goes away. It has no signal handling of its own: a signal that ends it ends only this
//! daemon, and the keeper starts another.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::HudiFs;
use crate::journal::{Record, RestartJournal};
use crate::mount_config::MountConfig;
use hudifs_core::table::TableConfig;
use hudifs_storage::TablePath;

use super::open_store_checked;
use super::serving::{self, KeptConnection, Serving, Session};

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
    let kept = adopt(h)?;
    // The first daemon takes the table's configuration as its keeper read it (the keeper
    // checked the store too); one that takes over reads it again (the table may have been
    // upgraded since).
    let given = if h.resumed {
        None
    } else {
        kept.records.iter().find_map(|r| match r {
            Record::TableConfig(props) => Some(props.clone()),
            _ => None,
        })
    };
    serving::serve(cfg, Session::Kept(kept), || {
        let store = open_store_checked(cfg, given.is_none())?;
        let table_cfg = match given {
            Some(props) => TableConfig::from_properties(
                &store.describe(&TablePath::new(".hoodie/hoodie.properties").unwrap_or_default()),
                props,
            )?,
            None => TableConfig::load(&*store)?,
        };
        let fs = HudiFs::with_config(store, table_cfg, cfg.fs_options())?;
        Ok(Serving::Table(fs.shared()))
    })
}

/// Take over the descriptors of the handoff `h` (closed on exec: nothing this daemon starts
/// inherits them) and read the restart journal once: the table's configuration, the ids behind
/// inode numbers, backing files.
fn adopt(h: Handoff) -> Result<KeptConnection> {
    let started = std::time::Instant::now();
    // SAFETY: the keeper passed these descriptors to this process alone, under these numbers.
    let (fd, journal) = unsafe {
        (
            OwnedFd::from_raw_fd(h.fd),
            Arc::new(RestartJournal::from_raw_fd(h.journal)),
        )
    };
    // SAFETY: as above.
    let metrics = h
        .metrics
        .map(|fd| unsafe { std::net::TcpListener::from(OwnedFd::from_raw_fd(fd)) });
    for raw in [Some(h.fd), Some(h.journal), h.metrics]
        .into_iter()
        .flatten()
    {
        crate::sys::fds::close_on_exec(raw, true);
    }
    let records = journal
        .records()
        .map_err(|e| Error::io("the restart journal", e))?;
    Ok(KeptConnection {
        fd,
        journal,
        records,
        passthrough: h.passthrough,
        resumed: h.resumed,
        metrics,
        started,
    })
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
