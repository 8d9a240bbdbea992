//! What the kernel may hold of `latest/`, so that it can cache `latest/` as it caches history
//! and still never show a snapshot that has moved on (SEMANTICS.md §6.2, §6.5).
//!
//! `latest/` changes whenever a writer commits. Rather than short timeouts, the kernel gets long
//! ones for the names, attributes and directory listings of `latest/`, and is told what changed
//! at each switch:
//!
//! - **Names.** Every directory of `latest/` remembers what it handed to the kernel (by lookup or
//!   listing): the partition's files as of the newest snapshot that handed them, and its
//!   sub-directory names. At a switch, the names that left are invalidated, and the directory's
//!   attributes and cached listing dropped. A lookup answered just before a switch may reach the
//!   kernel just after that invalidation, so the names that left are invalidated once more a
//!   little later (the caller's [`Deferred`] queue).
//! - **Cached listings** (`FOPEN_CACHE_DIR`). The kernel keeps one cached listing per directory,
//!   shared by every handle opened with that flag, and positions in it are the offsets the
//!   daemon handed out. A handle whose cached stream changes under it continues in the new one
//!   at its offset: if the two listings differ, it shows some names twice and misses others. So
//!   every handle that may use the cache must have the same listing:
//!   - a handle opened before a switch holds the old listing: while it is open, nobody else
//!     opens with the flag (they read from the daemon), and when it is released the cache it
//!     may have filled is dropped, before it stops counting as open;
//!   - an opener with an old listing never uses the cache;
//!   - an open may reuse what the cache holds only while no switch is being applied to the
//!     directory (before that, the cache may hold the old listing); otherwise it drops it.
//!
//! This module holds the bookkeeping; `fs/mod.rs` decides what the names are, and `switch.rs`
//! (on a switch of `latest/`, as `follow.rs` installs it) and the FUSE adapter (`fuse/mod.rs`)
//! send the invalidations.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the kernel may cache the listing of an opened directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirCache {
    /// Not at all: read it from the daemon every time.
    Off,
    /// Cache what this handle reads, dropping what was cached before.
    Fill,
    /// Reuse the cached listing (and cache what is read).
    Reuse,
}

/// What one directory of `latest/` has handed to the kernel and who has it open.
struct DirState<T> {
    /// The partition's files as handed out: `(snapshot generation, files)`.
    files: Option<(u64, T)>,
    /// Sub-directory names handed out.
    subdirs: BTreeSet<Arc<str>>,
    /// The generation of the snapshot whose switch last changed this directory.
    content_gen: u64,
    /// Generations of the open handles that may use the kernel's listing cache.
    open: Vec<u64>,
    /// A switch is being applied: its invalidations are not all sent yet.
    switching: bool,
}

impl<T> Default for DirState<T> {
    fn default() -> Self {
        DirState {
            files: None,
            subdirs: BTreeSet::new(),
            content_gen: 0,
            open: Vec::new(),
            switching: false,
        }
    }
}

/// What a directory handed to the kernel before a switch: the files (if a partition) and the
/// sub-directory names.
pub struct Handed<T> {
    pub files: Option<T>,
    pub subdirs: BTreeSet<Arc<str>>,
}

/// The bookkeeping of the directories of `latest/`, by interned directory id.
pub struct KernelCache<T> {
    dirs: Mutex<HashMap<u32, DirState<T>>>,
}

impl<T: Clone> Default for KernelCache<T> {
    fn default() -> Self {
        KernelCache {
            dirs: Mutex::new(HashMap::new()),
        }
    }
}

impl<T: Clone> KernelCache<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, DirState<T>>> {
        self.dirs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The kernel got (some of) the files of directory `dir` as of snapshot `generation`.
    pub fn handed_files(&self, dir: u32, generation: u64, files: &T) {
        let mut dirs = self.lock();
        let d = dirs.entry(dir).or_default();
        if d.files.as_ref().is_none_or(|(g, _)| *g < generation) {
            d.files = Some((generation, files.clone()));
        }
    }

    /// The kernel got the sub-directory `name` of directory `dir`.
    pub fn handed_subdir(&self, dir: u32, name: &Arc<str>) {
        let mut dirs = self.lock();
        let d = dirs.entry(dir).or_default();
        if !d.subdirs.contains(name) {
            d.subdirs.insert(name.clone());
        }
    }

    /// A handle on `dir` opens with the listing of snapshot `generation`: how it may use the
    /// kernel's cached listing. A handle given [`DirCache::Off`] does not count as open here.
    pub fn open(&self, dir: u32, generation: u64) -> DirCache {
        let mut dirs = self.lock();
        let d = dirs.entry(dir).or_default();
        let content = d.content_gen;
        if generation < content || d.open.iter().any(|g| *g < content) {
            // Another listing may be in the cache or go into it: stay out of it.
            return DirCache::Off;
        }
        d.open.push(generation);
        if d.switching {
            DirCache::Fill
        } else {
            DirCache::Reuse
        }
    }

    /// Whether a handle of snapshot `generation` on `dir` outlived a switch that changed the
    /// directory: then whatever it put in the kernel's listing cache must be dropped before
    /// [`KernelCache::released`].
    pub fn outlived_a_switch(&self, dir: u32, generation: u64) -> bool {
        self.lock()
            .get(&dir)
            .is_some_and(|d| generation < d.content_gen)
    }

    /// A handle of snapshot `generation` on `dir` that was not given [`DirCache::Off`] was
    /// released.
    pub fn released(&self, dir: u32, generation: u64) {
        let mut dirs = self.lock();
        if let Some(d) = dirs.get_mut(&dir) {
            if let Some(i) = d.open.iter().position(|g| *g == generation) {
                d.open.swap_remove(i);
            }
        }
    }

    /// Directories that handed anything to the kernel.
    pub fn known_dirs(&self) -> Vec<u32> {
        self.lock().keys().copied().collect()
    }

    /// Snapshot `generation` changes directory `dir`: from now until [`KernelCache::switched`]
    /// no open reuses its cached listing. Returns what the directory handed out before.
    pub fn begin_switch(&self, dir: u32, generation: u64) -> Handed<T> {
        let mut dirs = self.lock();
        let d = dirs.entry(dir).or_default();
        d.content_gen = d.content_gen.max(generation);
        d.switching = true;
        Handed {
            files: d.files.as_ref().map(|(_, f)| f.clone()),
            subdirs: d.subdirs.clone(),
        }
    }

    /// After the switch's invalidations are decided: what the kernel can still hold of `dir` is
    /// at most `files` (the new snapshot's, if a partition) and the sub-directories `subdirs`.
    pub fn replace_handed(
        &self,
        dir: u32,
        generation: u64,
        files: Option<T>,
        subdirs: BTreeSet<Arc<str>>,
    ) {
        let mut dirs = self.lock();
        let d = dirs.entry(dir).or_default();
        d.files = files.map(|f| (generation, f));
        d.subdirs = subdirs;
    }

    /// The switch's invalidations of `dir` were sent.
    pub fn switched(&self, dir: u32) {
        if let Some(d) = self.lock().get_mut(&dir) {
            d.switching = false;
        }
    }
}

/// Invalidations to send again later (for lookups answered just before a switch that reach the
/// kernel after it): `(when, parent inode, name)`.
#[derive(Default)]
pub struct Deferred {
    queue: Vec<(Instant, u64, String)>,
}

/// When names that left `latest/` are invalidated again after a switch.
pub const AGAIN: [Duration; 2] = [Duration::from_millis(100), Duration::from_secs(2)];

impl Deferred {
    /// Send `entries` again after each delay of [`AGAIN`].
    pub fn push(&mut self, now: Instant, entries: &[(u64, String)]) {
        for delay in AGAIN {
            for (parent, name) in entries {
                self.queue.push((now + delay, *parent, name.clone()));
            }
        }
    }

    /// The entries due at `now`, removed from the queue.
    pub fn due(&mut self, now: Instant) -> Vec<(u64, String)> {
        let (due, later): (Vec<_>, Vec<_>) = self.queue.drain(..).partition(|(t, _, _)| *t <= now);
        self.queue = later;
        due.into_iter().map(|(_, p, n)| (p, n)).collect()
    }

    /// How long until the next entry is due.
    pub fn next_in(&self, now: Instant) -> Option<Duration> {
        self.queue
            .iter()
            .map(|(t, _, _)| t.saturating_duration_since(now))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_handles_with_the_same_listing_share_the_cache() {
        let k: KernelCache<u32> = KernelCache::default();
        assert_eq!(k.open(7, 1), DirCache::Reuse, "nothing happened yet");
        k.released(7, 1);
        // A handle opens at generation 1; generation 2 changes the directory.
        assert_eq!(k.open(7, 1), DirCache::Reuse);
        let _ = k.begin_switch(7, 2);
        assert_eq!(
            k.open(7, 2),
            DirCache::Off,
            "the old handle may fill the cache with its listing"
        );
        k.switched(7);
        assert_eq!(k.open(7, 2), DirCache::Off, "the old handle is still open");
        assert_eq!(k.open(7, 1), DirCache::Off, "an old listing never uses it");
        assert!(k.outlived_a_switch(7, 1));
        k.released(7, 1);
        assert_eq!(
            k.open(7, 2),
            DirCache::Reuse,
            "every handle is current again"
        );
        assert!(!k.outlived_a_switch(7, 2));
        // A switch under way with only current handles: the cache is dropped, then refilled.
        let _ = k.begin_switch(7, 3);
        assert_eq!(
            k.open(7, 3),
            DirCache::Off,
            "the generation-2 handle is stale"
        );
        k.released(7, 2);
        assert_eq!(
            k.open(7, 3),
            DirCache::Fill,
            "the switch's invalidations are not sent yet"
        );
        k.switched(7);
        assert_eq!(k.open(7, 3), DirCache::Reuse);
    }

    #[test]
    fn handed_files_keep_the_newest_snapshot() {
        let k: KernelCache<u32> = KernelCache::default();
        k.handed_files(3, 5, &50);
        k.handed_files(3, 4, &40);
        k.handed_subdir(3, &Arc::from("x"));
        let h = k.begin_switch(3, 6);
        assert_eq!(h.files, Some(50));
        assert_eq!(h.subdirs.len(), 1);
        k.replace_handed(3, 6, None, BTreeSet::new());
        let h = k.begin_switch(3, 7);
        assert_eq!((h.files, h.subdirs.len()), (None, 0));
    }

    #[test]
    fn deferred_entries_come_due_twice() {
        let mut d = Deferred::default();
        let t0 = Instant::now();
        d.push(t0, &[(9, "f".into())]);
        assert_eq!(d.next_in(t0), Some(AGAIN[0]));
        assert!(d.due(t0).is_empty());
        assert_eq!(d.due(t0 + AGAIN[0]), [(9, "f".to_string())]);
        assert_eq!(d.due(t0 + AGAIN[1]), [(9, "f".to_string())]);
        assert_eq!(d.next_in(t0), None);
    }
}
