//! The open file and directory handles of a mount: what each handle number holds, handed out
//! by `open`/`opendir` and dropped by `release`/`releasedir`. One owner for the three pieces
//! of state (the two tables and the counter) that the operations in `ops.rs` and `dirs.rs`
//! would otherwise reach into directly. Generic over what a handle holds: a table's
//! ([`OpenHandle`], [`OpenDir`]), or a lake's (`crate::lake`: which table's handle it is).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use hudifs_storage::sync::lock;
use hudifs_storage::OpenFile;

use super::DirEntry;
use crate::journal::{Record, RestartJournal};

/// Handle numbers are reserved in the restart journal this many at a time.
const RESERVE: u64 = 1 << 16;

/// An open file: a table file's storage handle, or the bytes of a rendered timeline file.
pub(super) enum OpenHandle {
    Data(Arc<dyn OpenFile>),
    Bytes(Arc<Vec<u8>>),
}

/// What opening a file holds: its handle, whether the kernel may keep its cached pages, and the
/// local file to pass through.
pub(super) type OpenedParts = (OpenHandle, bool, Option<Arc<dyn OpenFile>>);

/// A directory of `latest/` and the snapshot generation it was listed from.
pub(super) type LatestDir = (u32, u64);

/// An open directory handle: the entries it was opened with, and for `latest/` the directory
/// and snapshot generation (for the kernel's listing cache). Cheap to clone.
#[derive(Clone)]
pub(super) struct OpenDir {
    pub entries: Arc<Vec<DirEntry>>,
    pub latest: Option<LatestDir>,
    /// The handle may read and fill the kernel's cached listing (`kernel_cache.rs`).
    pub cached: bool,
    /// Whether every file listed has its attributes (worked out once, when first asked).
    pub stated: Arc<OnceLock<bool>>,
}

/// The handles of a mount: open files holding an `F`, open directories a `D`. File and
/// directory handles share one number space.
pub(crate) struct Handles<F, D> {
    files: Mutex<HashMap<u64, Arc<F>>>,
    dirs: Mutex<HashMap<u64, D>>,
    next: AtomicU64,
    /// After a restart: the first number this daemon hands out. Numbers below it are the
    /// previous daemons' handles, which the kernel may still use (0: no previous daemon).
    first: AtomicU64,
    /// Where handle numbers are reserved before they are handed out (`journal/`).
    journal: OnceLock<Arc<RestartJournal>>,
}

impl<F, D> Default for Handles<F, D> {
    fn default() -> Self {
        Handles {
            files: Mutex::default(),
            dirs: Mutex::default(),
            next: AtomicU64::new(1),
            first: AtomicU64::new(0),
            journal: OnceLock::new(),
        }
    }
}

impl<F, D: Clone> Handles<F, D> {
    /// Start above every handle number the previous daemons of this mount may have handed out,
    /// and reserve numbers in `journal` from now on.
    pub fn resume(&self, records: &[Record], journal: &Arc<RestartJournal>) {
        let reserved = records
            .iter()
            .filter_map(|r| match r {
                Record::Handles(n) => Some(*n),
                _ => None,
            })
            .max();
        if let Some(limit) = reserved {
            self.next.store(limit, Ordering::SeqCst);
            self.first.store(limit, Ordering::SeqCst);
        }
        let next = self.next.load(Ordering::SeqCst);
        journal.append(&Record::Handles(next + 2 * RESERVE));
        let _ = self.journal.set(journal.clone());
    }

    /// Whether `fh` is a handle of a previous daemon of this mount.
    pub fn inherited(&self, fh: u64) -> bool {
        fh < self.first.load(Ordering::Relaxed)
    }

    fn next_number(&self) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed);
        if fh.is_multiple_of(RESERVE) {
            if let Some(journal) = self.journal.get() {
                journal.append(&Record::Handles(fh + 2 * RESERVE));
            }
        }
        fh
    }

    /// Hold an opened file; its handle number.
    pub fn add_file(&self, file: F) -> u64 {
        let fh = self.next_number();
        lock(&self.files).insert(fh, Arc::new(file));
        fh
    }

    /// Hold a file reopened for a handle of a previous daemon, under that handle's number.
    pub fn adopt_file(&self, fh: u64, file: Arc<F>) -> Arc<F> {
        lock(&self.files).entry(fh).or_insert(file).clone()
    }

    /// Hold a directory reopened for a handle of a previous daemon, under its number.
    pub fn adopt_dir(&self, fh: u64, dir: D) {
        lock(&self.dirs).entry(fh).or_insert(dir);
    }

    pub fn file(&self, fh: u64) -> Option<Arc<F>> {
        lock(&self.files).get(&fh).cloned()
    }

    /// Drop an open file; what it held.
    pub fn release_file(&self, fh: u64) -> Option<Arc<F>> {
        lock(&self.files).remove(&fh)
    }

    pub fn file_count(&self) -> usize {
        lock(&self.files).len()
    }

    /// Hold an opened directory; its handle number.
    pub fn add_dir(&self, dir: D) -> u64 {
        let fh = self.next_number();
        lock(&self.dirs).insert(fh, dir);
        fh
    }

    /// An open directory (its entries and state shared with the handle).
    pub fn dir(&self, fh: u64) -> Option<D> {
        lock(&self.dirs).get(&fh).cloned()
    }

    pub fn has_dir(&self, fh: u64) -> bool {
        lock(&self.dirs).contains_key(&fh)
    }

    pub fn release_dir(&self, fh: u64) -> Option<D> {
        lock(&self.dirs).remove(&fh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_and_directories_share_one_number_space_and_go_away_on_release() {
        let h = Handles::<OpenHandle, OpenDir>::default();
        let f = h.add_file(OpenHandle::Bytes(Arc::new(vec![1, 2])));
        let d = h.add_dir(OpenDir {
            entries: Arc::new(Vec::new()),
            latest: Some((3, 4)),
            cached: true,
            stated: Arc::default(),
        });
        assert_ne!(f, d);
        assert_eq!(h.file_count(), 1);
        assert!(matches!(h.file(f).as_deref(), Some(OpenHandle::Bytes(b)) if **b == [1, 2]));
        assert!(h.file(d).is_none(), "a directory handle is not a file");
        assert_eq!(h.dir(d).map(|o| o.latest), Some(Some((3, 4))));
        assert!(h.release_file(f).is_some());
        assert_eq!(h.file_count(), 0);
        assert!(h.release_dir(d).is_some_and(|o| o.cached));
        assert!(h.dir(d).is_none());
    }
}
