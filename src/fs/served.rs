//! What the FUSE adapter serves, as one trait: a single table ([`HudiFs`]) or a lake of tables
//! (`crate::lake::LakeFs`, which routes each request to one table's `HudiFs`). Inode numbers and
//! handles are the implementor's; the adapter only passes them on.

use std::ffi::OsStr;

use hudifs_core::error::Result;
use hudifs_storage::{FsStats, Job};

use super::{DirListing, Entry, HudiFs, Opened, OpenedDir, ReadAnswer, StaleDir};

/// The file-system operations the FUSE adapter calls (see [`HudiFs`] for what each does).
pub trait Served: Send + Sync {
    fn lookup(&self, parent: u64, name: &OsStr) -> Result<Entry>;
    fn getattr(&self, ino: u64) -> Result<Entry>;
    fn open(&self, ino: u64) -> Result<Opened>;
    /// Read up to `size` bytes at `offset` of an open file and hand them, or the error, to
    /// `done` (once): in place, or later from an object store's runtime ([`HudiFs::read`]).
    /// `ino` is the handle's inode: a daemon that took the mount over after a crash reopens a
    /// handle of the one before it by its inode.
    fn read(&self, ino: u64, fh: u64, offset: u64, size: u32, done: ReadAnswer);
    fn release(&self, fh: u64);
    fn opendir(&self, ino: u64) -> Result<OpenedDir>;
    fn readdir(&self, ino: u64, fh: u64) -> Result<DirListing>;
    fn releasedir(&self, fh: u64) -> Option<StaleDir>;
    fn stale_dir_dropped(&self, s: StaleDir);
    fn xattrs(&self, ino: u64) -> Result<Vec<(String, String)>>;
    /// What `statfs` answers: the local file system under the mount, if any.
    fn statvfs(&self) -> Option<FsStats>;
    /// Run `job` (a request that may wait on the storage, with its reply) where waiting holds
    /// no FUSE thread: on an object store's threads, in place on a local disk (see
    /// `Storage::run_blocking`).
    fn run_blocking(&self, job: Job);
    /// Whether request `q` may skip [`Self::run_blocking`] and be answered on the FUSE thread:
    /// on an object store, when its answer is in memory and asks the storage nothing. Always
    /// false on a local disk, where `run_blocking` answers in place anyway (nothing is worked
    /// out there).
    fn in_memory(&self, q: InMemory<'_>) -> bool;
}

/// A request that an object-store mount may answer from memory (`Served::in_memory`).
#[derive(Debug, Clone, Copy)]
pub enum InMemory<'a> {
    /// `opendir` of a directory: [`HudiFs::dir_resolved`].
    OpenDir(u64),
    /// `lookup` of a name in a directory: [`HudiFs::lookup_resolved`].
    Lookup(u64, &'a OsStr),
    /// `readdir` of an open directory handle: one this daemon opened holds its listing (one a
    /// previous daemon of the mount opened is listed again on first use).
    ReadDir(u64),
}

impl Served for HudiFs {
    fn lookup(&self, parent: u64, name: &OsStr) -> Result<Entry> {
        HudiFs::lookup(self, parent, name)
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
    fn opendir(&self, ino: u64) -> Result<OpenedDir> {
        HudiFs::opendir(self, ino)
    }
    fn readdir(&self, ino: u64, fh: u64) -> Result<DirListing> {
        HudiFs::readdir_node(self, ino, fh)
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
    fn in_memory(&self, q: InMemory<'_>) -> bool {
        self.store().is_object_store()
            && match q {
                InMemory::OpenDir(ino) => self.dir_resolved(ino),
                InMemory::Lookup(parent, name) => self.lookup_resolved(parent, name),
                InMemory::ReadDir(fh) => self.handles.has_dir(fh),
            }
    }
}
