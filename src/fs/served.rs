//! What the FUSE adapter serves, as one trait: a single table ([`HudiFs`]) or a lake of tables
//! (`crate::lake::LakeFs`, which routes each request to one table's `HudiFs`). Inode numbers and
//! handles are the implementor's; the adapter only passes them on. Each operation decides where
//! it is answered (in place, or on the store's threads), as `read` does.

use std::ffi::OsStr;
use std::sync::Arc;

use hudifs_core::error::Result;
use hudifs_storage::{FsStats, Job};

use super::{Answer, DirListing, Entry, HudiFs, Opened, OpenedDir, ReadAnswer, StaleDir};

/// The file-system operations the FUSE adapter calls (see [`HudiFs`] for what each does).
///
/// The operations that may wait on the storage take a `done` callback and answer it once: in
/// place, on the calling (FUSE) thread, when the answer needs nothing from the storage, else
/// from where waiting holds no FUSE thread ([`Self::run_blocking`]: an object store's threads).
/// On a local disk everything is answered in place.
pub trait Served: Send + Sync {
    /// Look `name` up in directory `parent`; the entry, or the error, to `done`.
    fn lookup(self: Arc<Self>, parent: u64, name: &OsStr, done: Answer<Entry>);
    fn getattr(&self, ino: u64) -> Result<Entry>;
    fn open(&self, ino: u64) -> Result<Opened>;
    /// Read up to `size` bytes at `offset` of an open file and hand them, or the error, to
    /// `done` (once): in place, or later from an object store's runtime ([`HudiFs::read`]).
    /// `ino` is the handle's inode: a daemon that took the mount over after a crash reopens a
    /// handle of the one before it by its inode.
    fn read(&self, ino: u64, fh: u64, offset: u64, size: u32, done: ReadAnswer);
    fn release(&self, fh: u64);
    /// Open directory `ino`; its handle, or the error, to `done`.
    fn opendir(self: Arc<Self>, ino: u64, done: Answer<OpenedDir>);
    /// The entries of open directory handle `fh` (of directory `ino`), or the error, to `done`.
    fn readdir(self: Arc<Self>, ino: u64, fh: u64, done: Answer<DirListing>);
    fn releasedir(&self, fh: u64) -> Option<StaleDir>;
    fn stale_dir_dropped(&self, s: StaleDir);
    fn xattrs(&self, ino: u64) -> Result<Vec<(String, String)>>;
    /// What `statfs` answers: the local file system under the mount, if any.
    fn statvfs(&self) -> Option<FsStats>;
    /// Run `job` (a request that may wait on the storage, with its reply) where waiting holds
    /// no FUSE thread: on an object store's threads, in place on a local disk (see
    /// `Storage::run_blocking`).
    fn run_blocking(&self, job: Job);
}

impl HudiFs {
    /// Answer `op` to `done`: here if `in_place` (it asks the storage nothing), else where
    /// waiting holds no FUSE thread (`Storage::run_blocking`: an object store's threads, in
    /// place on a local disk).
    fn answer<T: 'static>(
        self: Arc<Self>,
        in_place: bool,
        op: impl FnOnce(&HudiFs) -> Result<T> + Send + 'static,
        done: Answer<T>,
    ) {
        if in_place {
            done(op(&self))
        } else {
            let store = self.store.clone();
            store.run_blocking(Box::new(move || done(op(&self))))
        }
    }

    /// Whether request answers are worked out in place only where they need nothing from the
    /// storage: on an object store. On a local disk `run_blocking` answers in place anyway.
    fn picks_in_place(&self) -> bool {
        self.store.is_object_store()
    }
}

impl Served for HudiFs {
    /// In place on an object store when the name is a stated file of a resolved partition, or
    /// a directory whose partitions are all resolved, of a plain view
    /// ([`HudiFs::lookup_resolved`]).
    fn lookup(self: Arc<Self>, parent: u64, name: &OsStr, done: Answer<Entry>) {
        let in_place = self.picks_in_place() && self.lookup_resolved(parent, name);
        let name = name.to_os_string();
        self.answer(in_place, move |fs| HudiFs::lookup(fs, parent, &name), done)
    }
    fn getattr(&self, ino: u64) -> Result<Entry> {
        HudiFs::getattr(self, ino)
    }
    fn open(&self, ino: u64) -> Result<Opened> {
        HudiFs::open(self, ino)
    }
    fn read(&self, ino: u64, fh: u64, offset: u64, size: u32, done: ReadAnswer) {
        HudiFs::read(self, ino, fh, offset, size, done)
    }
    fn release(&self, fh: u64) {
        HudiFs::release(self, fh)
    }
    /// In place on an object store when the directory's partitions are all resolved
    /// ([`HudiFs::dir_resolved`]: a walk's directories once the view's root is listed).
    fn opendir(self: Arc<Self>, ino: u64, done: Answer<OpenedDir>) {
        let in_place = self.picks_in_place() && self.dir_resolved(ino);
        self.answer(in_place, move |fs| HudiFs::opendir(fs, ino), done)
    }
    /// In place on an object store when this daemon opened the handle: it holds its listing
    /// (one a previous daemon of the mount opened is listed again on first use).
    fn readdir(self: Arc<Self>, ino: u64, fh: u64, done: Answer<DirListing>) {
        let in_place = self.picks_in_place() && self.handles.has_dir(fh);
        self.answer(in_place, move |fs| HudiFs::readdir(fs, ino, fh), done)
    }
    fn releasedir(&self, fh: u64) -> Option<StaleDir> {
        HudiFs::releasedir(self, fh)
    }
    fn stale_dir_dropped(&self, s: StaleDir) {
        HudiFs::stale_dir_dropped(self, s)
    }
    fn xattrs(&self, ino: u64) -> Result<Vec<(String, String)>> {
        HudiFs::xattrs(self, ino)
    }
    fn statvfs(&self) -> Option<FsStats> {
        self.store().local().and_then(|l| l.statvfs())
    }
    fn run_blocking(&self, job: Job) {
        self.store().run_blocking(job)
    }
}
