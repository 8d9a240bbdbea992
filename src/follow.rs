//! Following writers (SEMANTICS.md §6.7): the timeline directory is watched with inotify where
//! the table is on a local disk (or polled where inotify cannot see the writers: network and
//! FUSE file systems, object stores), what changed is applied to the current snapshot
//! incrementally, the new snapshot is installed in the file system, and the kernel is told which
//! cached entries of `latest/` went stale.
//!
//! The [`Follower`] owns everything about watching: the watch, the last poll's stamp, the names
//! it ignores. The file system only installs snapshots ([`HudiFs::install`]).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as Clock, SystemTime};

use hudifs_core::error::{Error, Result};
use hudifs_core::snapshot::Snapshot;
use hudifs_core::table::PROPERTIES;
use hudifs_core::timeline::{self, InstantFile};
use hudifs_storage::{network_file_system, Kind, Watch, WatchEvents};

use crate::fs::{Deferred, HudiFs, Invalidations, KernelNotifier};

/// A timeline file modified more recently than this may still be being written: the polling
/// path waits for the next round before reading it (inotify waits for close-write instead).
pub const SETTLE: Duration = Duration::from_millis(50);
/// With inotify working, a full rescan of the directory still runs this often, as a safety net.
const RESCAN: Duration = Duration::from_secs(30);
/// After inotify's names of a change fail to apply, the directory is listed again this soon
/// (then twice as late after each failure in a row, up to [`RESCAN`]).
const RELIST_FIRST: Duration = Duration::from_millis(100);
/// How long after a directory's mtime was first seen a listing of it is trusted to show every
/// change that mtime stands for: a change made in the same tick of the file system's clock as
/// an earlier one leaves the mtime as it was (1 s covers the coarsest clocks in use).
const TRUST_MTIME_AFTER: Duration = Duration::from_secs(1);

/// What a poll of the timeline directory saw.
#[derive(Debug, Clone)]
struct PollStamp {
    /// The directory's mtime before the listing.
    mtime: SystemTime,
    /// When that mtime was first seen.
    first_seen: Clock,
    /// The listing began long enough after `first_seen` to have seen every change it covers.
    trusted: bool,
    /// Files too young to read, left for the next poll: until they are read (or an event
    /// announces them written), no later change is applied before them.
    deferred: BTreeSet<String>,
    /// The poll before left the same files: they stay young (an mtime in the future?).
    stuck: bool,
    /// The snapshot the listing was applied to (a change applied by inotify in between, or a
    /// failed apply, makes the next poll list again).
    generation: u64,
}

/// Follows one table's timeline for one mounted file system.
#[derive(Default)]
pub struct Follower {
    stamp: Option<PollStamp>,
    /// Timeline names that are not instant files, so that they are reported once.
    ignored: BTreeSet<String>,
}

impl Follower {
    pub fn new() -> Follower {
        Follower::default()
    }

    /// Re-read the timeline directory, and apply names that appeared or vanished. New files
    /// modified less than `settle` ago wait for the next round.
    ///
    /// A poll lists the directory once; only when that shows a change is it listed until two
    /// listings agree (see `timeline::stable_listing`). Where the storage keeps directory
    /// modification times, a directory whose mtime has not moved since a trusted listing holds
    /// the same names: an idle poll costs one stat, not a listing. On an object store (no
    /// directory times; a stat of a prefix would cost two requests) an idle poll is one LIST,
    /// and new files are read at once (a PUT appears whole).
    pub fn poll_once(&mut self, fs: &HudiFs, settle: Duration) -> Result<Option<Invalidations>> {
        let snap = fs.snapshot();
        let store = &*snap.store;
        let dir = snap.cfg.timeline_dir.clone();
        let tl = snap.timeline();
        let started = Clock::now();
        let object_store = store.is_object_store();
        let mtime = if object_store {
            None
        } else {
            store.stat(&dir).ok().and_then(|m| m.mtime)
        };
        if let (Some(st), Some(m)) = (&self.stamp, mtime) {
            if st.mtime == m
                && st.trusted
                && st.deferred.is_empty()
                && st.generation == snap.generation
            {
                return Ok(None);
            }
        }
        let first_seen = match (&self.stamp, mtime) {
            (Some(st), Some(m)) if st.mtime == m => st.first_seen,
            _ => started,
        };
        let remember =
            |stamp: &mut Option<PollStamp>, deferred: BTreeSet<String>, generation: u64| {
                if let Some(m) = mtime {
                    let stuck = !deferred.is_empty()
                        && stamp.as_ref().is_some_and(|st| st.deferred == deferred);
                    *stamp = Some(PollStamp {
                        mtime: m,
                        first_seen,
                        trusted: started.duration_since(first_seen) >= TRUST_MTIME_AFTER,
                        deferred,
                        stuck,
                        generation,
                    });
                }
            };
        let is_new = |n: &str, ignored: &BTreeSet<String>| {
            !tl.has_file(n) && !ignored.contains(n) && !n.starts_with(PROPERTIES)
        };
        let mut first = timeline::list_files(store, &dir)?;
        let known_seen = first.iter().filter(|n| tl.has_file(n)).count();
        if known_seen == tl.file_count() && !first.iter().any(|n| is_new(n, &self.ignored)) {
            remember(&mut self.stamp, BTreeSet::new(), snap.generation);
            return Ok(None);
        }
        first.sort_unstable();
        let seen = timeline::stabilize(store, &dir, first)?;
        let mut changed = BTreeSet::new();
        let mut deferred = BTreeSet::new();
        let now = SystemTime::now();
        for name in seen.iter().filter(|n| is_new(n, &self.ignored)) {
            if object_store {
                changed.insert(name.clone());
                continue;
            }
            // The configuration is re-read on inotify events only (it changes with upgrades).
            let mtime = dir
                .child(name)
                .ok()
                .and_then(|p| store.stat(&p).ok())
                .and_then(|m| m.mtime);
            let young = mtime.is_some_and(|m| now.duration_since(m).unwrap_or_default() < settle);
            if young {
                deferred.insert(name.clone());
            } else {
                changed.insert(name.clone());
            }
        }
        let mut removed = BTreeSet::new();
        if seen.iter().filter(|n| tl.has_file(n)).count() < tl.file_count() {
            removed.extend(
                tl.file_names()
                    .filter(|n| seen.binary_search_by(|s| s.as_str().cmp(n)).is_err())
                    .map(str::to_string),
            );
        }
        let applied = self.apply(fs, changed, removed)?;
        remember(&mut self.stamp, deferred, fs.snapshot().generation);
        Ok(applied)
    }

    /// Apply timeline files that appeared or changed (`changed`) and vanished (`removed`):
    /// install the new snapshot and return what the kernel must drop (then the caller sends it
    /// and calls [`HudiFs::switched`]). `None` when nothing visible changed.
    pub fn apply(
        &mut self,
        fs: &HudiFs,
        changed: BTreeSet<String>,
        removed: BTreeSet<String>,
    ) -> Result<Option<Invalidations>> {
        let previous = fs.snapshot();
        if changed
            .iter()
            .chain(&removed)
            .any(|n| n.starts_with(PROPERTIES))
        {
            // The table's configuration changed (an upgrade?): read everything again.
            let store = previous.store.clone();
            let cfg = hudifs_core::table::TableConfig::load(&*store)?;
            let next = Snapshot::open_with_config(store, cfg, previous.listing_mode())?
                .with_generation(previous.generation + 1);
            return Ok(Some(fs.install(next, None)));
        }
        let store = &*previous.store;
        let cfg = &previous.cfg;
        let tl = previous.timeline();
        let mut added: Vec<InstantFile> = Vec::new();
        let mut gone: BTreeSet<String> = removed;
        for name in changed {
            match timeline::parse_timeline_name(store, cfg, &name) {
                Some(f) => {
                    // A name an object store lists is an object (a file).
                    let is_file = store.is_object_store()
                        || cfg
                            .timeline_dir
                            .child(&name)
                            .ok()
                            .and_then(|p| store.stat(&p).ok())
                            .is_some_and(|m| m.kind == Kind::File);
                    if is_file {
                        added.push(f);
                    } else if tl.has_file(&name) {
                        gone.insert(name);
                    }
                }
                None => {
                    self.ignored.insert(name);
                }
            }
        }
        Ok(previous
            .apply(added, &gone)?
            .map(|(next, touched)| fs.install(next, touched)))
    }

    /// Apply the names inotify announced. While files a poll left for later (too young to
    /// read) are still missing from the snapshot and no event has announced them written, the
    /// directory is polled instead: a poll reads files in the order they were written (by
    /// age), so a commit never shows before an earlier one it left waiting (SEMANTICS.md §6.7).
    pub fn on_events(&mut self, fs: &HudiFs, ev: WatchEvents) -> Result<Option<Invalidations>> {
        let snap = fs.snapshot();
        let tl = snap.timeline();
        let waiting = self.stamp.as_mut().is_some_and(|st| {
            st.deferred
                .retain(|n| !ev.changed.contains(n) && !ev.removed.contains(n) && !tl.has_file(n));
            !st.deferred.is_empty()
        });
        if waiting {
            return self.poll_once(fs, SETTLE);
        }
        self.apply(fs, ev.changed, ev.removed)
    }

    /// Whether a poll left files for later that the snapshot still lacks, and whether the poll
    /// before left the same ones.
    fn waiting(&self) -> (bool, bool) {
        self.stamp
            .as_ref()
            .map_or((false, false), |st| (!st.deferred.is_empty(), st.stuck))
    }

    /// Whether any of `created` (names inotify saw appear but not written) is a timeline file
    /// the snapshot does not have: one linked into place whole, which no close-write event
    /// will announce (or one still being written, which the listing's settle rule waits for).
    fn linked(&self, fs: &HudiFs, created: &BTreeSet<String>) -> bool {
        let snap = fs.snapshot();
        let tl = snap.timeline();
        created.iter().any(|n| {
            !tl.has_file(n)
                && !n.starts_with(PROPERTIES)
                && timeline::parse_timeline_name(&*snap.store, &snap.cfg, n).is_some()
        })
    }

    /// Follow the table until `stop` is set: apply changes as they come and tell the kernel
    /// which cached entries of `latest/` went stale.
    pub fn run(
        mut self,
        fs: Arc<HudiFs>,
        notifier: Option<Arc<dyn KernelNotifier>>,
        poll_interval: Duration,
        stop: Arc<AtomicBool>,
    ) {
        let watch = watch(&fs, poll_interval);
        let mut last_rescan = Clock::now();
        let mut last_poll = Clock::now();
        // An apply of inotify's names failed: those names are consumed, so the directory is
        // listed again soon (a busy writer may leave no idle moment for the rescan), later after
        // each failure in a row.
        // Also once at the start: a commit that completed between the mount's snapshot and the
        // watch's start made no event the watch could see.
        let mut relist: Option<Clock> = watch.as_ref().map(|_| Clock::now());
        let mut backoff = RELIST_FIRST;
        // Names that left latest/, to invalidate once more (see kernel_cache.rs).
        let mut again = Deferred::default();
        while !stop.load(Ordering::SeqCst) {
            let due_in = again.next_in(Clock::now()).unwrap_or(Duration::MAX);
            let relisting = watch.is_some() && relist.is_some_and(|at| at <= Clock::now());
            // A panic while applying a change (malformed input reaching a library) must not
            // stop the mount from following the table: log it, keep the previous snapshot, go
            // on.
            // A timeline file that appeared without a close-write (linked into place): listed
            // again once it has settled.
            let mut linked = false;
            let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &watch {
                Some(_) if relisting => self.poll_once(&fs, SETTLE),
                Some(w) => {
                    let relist_in = relist.map_or(Duration::MAX, |at| {
                        at.saturating_duration_since(Clock::now())
                    });
                    let timeout = poll_interval
                        .min(Duration::from_millis(500))
                        .min(due_in)
                        .min(relist_in);
                    match w.wait(timeout) {
                        Ok(Some(ev)) if !ev.rescan => {
                            linked = self.linked(&fs, &ev.created);
                            self.on_events(&fs, ev)
                        }
                        Ok(Some(_)) => self.poll_once(&fs, SETTLE),
                        Ok(None) if last_rescan.elapsed() >= RESCAN => {
                            last_rescan = Clock::now();
                            self.poll_once(&fs, SETTLE)
                        }
                        Ok(None) => Ok(None),
                        Err(e) => {
                            log::warn!("inotify failed ({e}); rescanning");
                            std::thread::sleep(poll_interval);
                            self.poll_once(&fs, SETTLE)
                        }
                    }
                }
                None => {
                    let next_poll = poll_interval.saturating_sub(last_poll.elapsed());
                    std::thread::sleep(next_poll.min(due_in));
                    if last_poll.elapsed() < poll_interval {
                        return Ok(None);
                    }
                    last_poll = Clock::now();
                    self.poll_once(&fs, SETTLE)
                }
            }));
            let result = step.unwrap_or_else(|_| {
                Err(Error::Refused(
                    "internal error while applying a timeline change".into(),
                ))
            });
            if linked {
                let at = Clock::now() + SETTLE;
                relist = Some(relist.map_or(at, |r| r.min(at)));
            }
            // (A watched timeline is local: its polls always leave a stamp.) Files left for
            // later are read as soon as they have settled; a file that stays young (an mtime in
            // the future) is listed ever less often.
            let (waiting, stuck) = self.waiting();
            if watch.is_some() && result.is_ok() && waiting {
                if relisting && stuck {
                    relist = Some(Clock::now() + backoff);
                    backoff = (backoff * 2).min(RESCAN);
                } else if relisting || relist.is_none() {
                    relist = Some(Clock::now() + SETTLE);
                    if !stuck {
                        backoff = RELIST_FIRST;
                    }
                }
            } else if relisting && result.is_ok() {
                relist = None;
                backoff = RELIST_FIRST;
            } else if relisting {
                backoff = (backoff * 2).min(RESCAN);
                relist = Some(Clock::now() + backoff);
            } else if result.is_err() && watch.is_some() && relist.is_none() {
                relist = Some(Clock::now() + backoff);
            }
            if result.is_ok() {
                hudifs_storage::observe::followed();
            }
            match result {
                Ok(Some(inv)) => {
                    log::debug!(
                        "timeline changed; latest is now {}",
                        fs.latest_instant().unwrap_or_default()
                    );
                    if let Some(n) = &notifier {
                        inv.send(&**n);
                        again.push(Clock::now(), &inv.entries);
                    }
                    fs.switched(&inv);
                }
                Ok(None) => {}
                Err(e) => log::warn!("refresh failed, keeping the previous snapshot: {e}"),
            }
            if let Some(n) = &notifier {
                for (parent, name) in again.due(Clock::now()) {
                    n.inval_entry(parent, &name);
                }
            }
        }
    }
}

/// An inotify watch on the timeline, where one can see the writers: the table is on this
/// machine's local file system and `HUDIFS_NO_INOTIFY=1` (which forces polling, to test and
/// measure that path) is not set.
fn watch(fs: &HudiFs, poll_interval: Duration) -> Option<Watch> {
    let snap = fs.snapshot();
    let dir = &snap.cfg.timeline_dir;
    let shown = fs.store().describe(dir);
    let watch = match fs.store().local() {
        None => Err(std::io::Error::other(
            "the table is on an object store, which has no change notifications",
        )),
        Some(_) if std::env::var("HUDIFS_NO_INOTIFY").as_deref() == Ok("1") => {
            Err(std::io::Error::other("disabled by HUDIFS_NO_INOTIFY"))
        }
        Some(local) => match network_file_system(&local.path(dir)) {
            // inotify only sees changes made through this kernel: writers on other machines
            // would go unseen until the next rescan.
            Some(name) => Err(std::io::Error::other(format!(
                "the timeline is on {name}, where inotify does not see writers on other machines"
            ))),
            None => local.watch(dir),
        },
    };
    match watch {
        Ok(w) => {
            log::info!("following {shown} with inotify");
            Some(w)
        }
        Err(e) => {
            log::info!(
                "inotify unavailable for {shown} ({e}); polling every {} ms",
                poll_interval.as_millis()
            );
            None
        }
    }
}
