//! The first build of a copy-on-write table's log, worked ahead: a version after the first
//! resolves the file groups its write touched and reads the footers of the files it adds, and
//! neither needs the version before it. So while the build goes through the versions in
//! order (each keeping the files of the one before), workers resolve the versions after it,
//! side by side, and read their new files' footers into the facts the build takes them from.
//!
//! What a worker works out is only ever a head start: the build uses a version's resolved
//! groups where the worker finished them, and resolves them itself where the worker failed or
//! has not started; a footer a worker could not read is read again by the build, which reports
//! the error as it would have.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use hudifs_core::error::Result;
use hudifs_core::instant_time::InstantTime;
use hudifs_core::snapshot::Snapshot;
use hudifs_core::timeline::Instant;
use hudifs_storage::sync::lock;

use super::{touched_groups, Node};
use crate::delta;
use crate::fs::{join, HudiFs, ViewState};

/// The files a version's touched groups resolve to, as (path in the view, inode).
pub(super) type Walked = Vec<(String, u64)>;

/// One version's head start: not begun, being worked on, or done (none where the worker
/// could not resolve it).
enum Slot {
    Waiting,
    Working,
    Done(Option<Walked>),
}

/// The versions being worked ahead of a build.
pub(super) struct Ahead<'a> {
    writes: Vec<(&'a InstantTime, &'a Instant)>,
    slots: Mutex<Vec<Slot>>,
    done: Condvar,
    next: AtomicUsize,
    stop: AtomicBool,
}

impl<'a> Ahead<'a> {
    /// Work ahead on `writes` (the table's completed writes, in order; the first is built
    /// whole by the build, so it is not worked on).
    pub(super) fn new(writes: Vec<(&'a InstantTime, &'a Instant)>) -> Self {
        let slots = writes.iter().map(|_| Slot::Waiting).collect();
        Ahead {
            writes,
            slots: Mutex::new(slots),
            done: Condvar::new(),
            next: AtomicUsize::new(1),
            stop: AtomicBool::new(false),
        }
    }

    /// Resolve versions one after another until every one is taken or the build is over; at
    /// a lower priority than the build, which takes the versions in order and so should never
    /// wait for a core while a worker runs ahead of it.
    pub(super) fn work(&self, fs: &HudiFs, snap: &Snapshot) {
        crate::sys::priority::lower_this_thread();
        while !self.stop.load(Ordering::Relaxed) {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            let Some(&(t, inst)) = self.writes.get(i) else {
                return;
            };
            {
                let mut slots = lock(&self.slots);
                if !matches!(slots[i], Slot::Waiting) {
                    continue;
                }
                slots[i] = Slot::Working;
            }
            let walked = fs.resolve_write(snap, t, inst).ok().flatten();
            if let Some(w) = &walked {
                fs.read_new_footers(t, w);
            }
            lock(&self.slots)[i] = Slot::Done(walked);
            self.done.notify_all();
        }
    }

    /// Version `i`'s resolved groups, waiting for a worker that is on it; none where no worker
    /// began it (the build resolves it itself) or could not resolve it.
    pub(super) fn take(&self, i: usize) -> Option<Walked> {
        let mut slots = lock(&self.slots);
        loop {
            match slots.get_mut(i)? {
                Slot::Waiting => {
                    // Not begun: the build does it, and no worker will.
                    slots[i] = Slot::Done(None);
                    return None;
                }
                Slot::Working => {
                    slots = self.done.wait(slots).unwrap_or_else(|e| e.into_inner());
                }
                Slot::Done(w) => return w.take(),
            }
        }
    }

    /// The build is over (or stopped at a version that failed): the workers stop.
    pub(super) fn finish(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl HudiFs {
    /// The files the groups write `inst` touched resolve to in instant `t`'s snapshot (sorted);
    /// none where its metadata does not say which groups (the build then walks partitions).
    pub(super) fn resolve_write(
        &self,
        snap: &Snapshot,
        t: &InstantTime,
        inst: &Instant,
    ) -> Result<Option<Walked>> {
        let Some(groups) = touched_groups(snap, inst) else {
            return Ok(None);
        };
        let Node::ViewDir { view, .. } = self.delta_root(t.clone(), false)? else {
            return Ok(None);
        };
        let v = self.view(view)?;
        self.resolve_groups_of(view, &v, &groups).map(Some)
    }

    /// The files groups `groups` (by partition) resolve to in view `view` (`v`), sorted.
    pub(super) fn resolve_groups_of(
        &self,
        view: u32,
        v: &ViewState,
        groups: &BTreeMap<String, BTreeSet<String>>,
    ) -> Result<Walked> {
        let mut walked = Vec::new();
        for (part, fids) in groups {
            let fids: BTreeSet<&str> = fids.iter().map(|f| f.as_str()).collect();
            if let Some((listing, choice)) = self.views.resolve_groups(v, part, &fids)? {
                for c in &choice.files {
                    let i = c.index as usize;
                    let node = Node::ViewFile {
                        view,
                        file: listing.ids[i],
                    };
                    walked.push((join(part, listing.files[i].name()), node.ino()));
                }
            }
        }
        walked.sort();
        Ok(walked)
    }

    /// Read the footers of the Parquet files `walked` of version `t`, one after another, into
    /// the facts the build takes (an error is left for the build to meet again).
    fn read_new_footers(&self, t: &InstantTime, walked: &Walked) {
        for (rel, ino) in walked {
            if !rel.ends_with(".parquet") {
                continue;
            }
            let path = delta::log::encode_path(&join(t.as_str(), rel));
            let _ = self.delta_facts(&path, *ino);
        }
    }
}
