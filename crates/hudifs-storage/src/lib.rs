//! The storage seam of hudifs: the few things hudifs needs of a table's storage, behind one small
//! synchronous trait, so that the table format, the visibility rules and the file system above
//! them never touch `std::fs` or a path themselves.
//!
//! - [`Storage`]: list a directory (names, kinds, sizes, times), stat, read a whole file, read a
//!   range, open a file for reading (a handle pinned to what was opened). Every location is a
//!   [`TablePath`], relative to the table root.
//! - `StorageWrite` (feature `write`): what the project's own table writer needs (the test kit,
//!   tests, benchmarks); the daemon, which only reads, is built without it.
//! - [`LocalStore`]: a table on a local (or mounted network) file system, with what only such
//!   a file system has: a file descriptor for kernel passthrough and `fadvise`, inotify, whether
//!   other machines' writes can be seen.
//! - `MemStore` (feature `write`: it is filled through `StorageWrite`): a table in memory, for
//!   fast tests of the logic above.
//! - [`FaultyStore`]: a wrapper that injects failures and latency.
//! - [`ceiling`]: the daemon's memory ceiling, shared by read windows and merges.
//! - [`scoped`]: a directory of a storage as a storage of its own (a table of a lake).
//! - [`sync::lock`]: a lock that outlives a panic; [`fnv`]: the stable hash of names on disk.

pub mod ceiling;
mod faulty;
pub mod fnv;
mod local;
#[cfg(any(test, feature = "write"))]
mod memory;
pub mod observe;
mod path;
mod scoped;
pub mod sync;

use std::io;
use std::sync::Arc;
use std::time::SystemTime;

pub use ceiling::{Lease, MemoryCeiling, Reclaim};
pub use faulty::{Fault, FaultyStore, Op, Rule};
pub use local::{local_file_handle, network_file_system, FsStats, LocalStore, Watch, WatchEvents};
#[cfg(any(test, feature = "write"))]
pub use memory::MemStore;
pub use path::{InvalidPath, TablePath};
pub use scoped::{scoped, Scoped};

/// What a directory entry is. Symbolic links and special files are [`Kind::Other`]: hudifs
/// neither shows nor follows them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    File,
    Dir,
    Other,
}

/// What the storage says about a file or directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    /// Size in bytes (0 for directories).
    pub size: u64,
    /// Last modification, where the storage keeps one (object stores have none for
    /// directories, which do not exist there).
    pub mtime: Option<SystemTime>,
    /// Permission bits.
    pub mode: u32,
    /// An identity of this version of the file where the storage has one (an ETag or object
    /// version): a handle opened on it never reads another version's bytes.
    pub version: Option<String>,
}

impl Meta {
    pub fn is_file(&self) -> bool {
        self.kind == Kind::File
    }
    pub fn is_dir(&self) -> bool {
        self.kind == Kind::Dir
    }
}

/// One entry of a directory listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The name inside the directory (one path component, valid UTF-8: other names are left
    /// out of listings, as no Hudi table writes them).
    pub name: String,
    pub meta: Meta,
}

/// Where a read ([`OpenFile::read`]) delivers its bytes: called once, from whatever thread the
/// storage answers on, with up to the length asked (fewer only at the end of the file) or the
/// error.
pub type ReadDone = Box<dyn FnOnce(io::Result<&[u8]>) + Send>;

/// Work handed to [`Storage::run_blocking`]: it may wait on the storage, and answers for itself.
pub type Job = Box<dyn FnOnce() + Send>;

/// A file opened for reading. Reads see the file as it was when opened: a local file keeps
/// its descriptor (so it reads to its end even after the cleaner deletes it), an object store
/// pins the version it opened.
pub trait OpenFile: Send + Sync {
    /// The size of what was opened.
    fn size(&self) -> u64;
    /// Read up to `buf.len()` bytes at `offset`; fewer only at the end of the file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    /// Read up to `len` bytes at `offset` and hand them to `done`, each storage in its own
    /// way: a handle that reads locally answers in place, on the calling thread, from a buffer
    /// that thread keeps (a read allocates nothing); one whose reads wait on a remote store
    /// starts the read and answers from the store's runtime, so the caller never waits on the
    /// network (possibly before returning, when the bytes are already local).
    fn read(&self, offset: u64, len: usize, done: ReadDone) {
        thread_local! {
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BUF.with(|cell| {
            let mut buf = cell.borrow_mut();
            if buf.len() < len {
                buf.resize(len, 0);
            }
            match self.read_at(&mut buf[..len], offset) {
                Ok(n) => done(Ok(&buf[..n])),
                Err(e) => done(Err(e)),
            }
        })
    }
    /// Fill `buf` with the bytes at `offset` as one random access (an error where the file
    /// ends first): on an object store one ranged request of exactly these bytes, outside the
    /// handle's read-ahead. A reader that jumps through a file's structure (a scan of log block
    /// headers) would otherwise look sequential to it and have everything between fetched.
    fn read_exact_random(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        fill_at(self, buf, offset)
    }
    /// The local file behind the handle, for kernel passthrough.
    fn as_file(&self) -> Option<&std::fs::File> {
        None
    }
}

/// How far a listing of a whole tree ([`Storage::list_tree`]) has come: the keys listed and
/// the directories holding them (keys come sorted, so a directory's keys are contiguous; the
/// last directory may be partly listed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeProgress {
    pub keys: usize,
    pub dirs: usize,
}

/// What hudifs needs of a table's storage.
pub trait Storage: Send + Sync + std::fmt::Debug {
    /// How to name `path` in messages and logs: a local path or a URL, never a credential.
    fn describe(&self, path: &TablePath) -> String;

    /// The entries of directory `dir`, in no particular order. `NotFound` if it does not exist.
    fn list(&self, dir: &TablePath) -> io::Result<Vec<Entry>>;

    /// The names and kinds of the entries of `dir`: what `list` gives without sizes and times,
    /// which cost a `stat` per entry on a local disk.
    fn list_names(&self, dir: &TablePath) -> io::Result<Vec<(String, Kind)>> {
        Ok(self
            .list(dir)?
            .into_iter()
            .map(|e| (e.name, e.meta.kind))
            .collect())
    }

    /// Every file below `dir` at any depth, by path relative to `dir` (`/`-separated), except
    /// those below its sub-directory `skip`. An object store lists keys without a delimiter,
    /// 1000 a page: for a small table far fewer requests than one LIST per directory (the keys
    /// sorting before `skip/` come from `dir`'s own names, a delimiter listing). Each
    /// time a page's worth of keys is in and more follow, `go_on` is asked with the progress so
    /// far whether the rest is worth listing this way. `None` where the storage cannot, `go_on`
    /// said no, or the listing failed: the caller lists directory by directory instead.
    fn list_tree(
        &self,
        _dir: &TablePath,
        _skip: &str,
        _go_on: &dyn Fn(TreeProgress) -> bool,
    ) -> Option<Vec<(String, Meta)>> {
        None
    }

    /// What the storage already knows of file `path` without asking: on an object store, what
    /// the last listing of its directory said (size, time, ETag). `None`: [`Storage::stat`]
    /// must ask. For callers that may trust a listing (e.g. of the timeline, which is listed at
    /// every poll); `stat` itself always asks.
    fn known_meta(&self, _path: &TablePath) -> Option<Meta> {
        None
    }

    /// What the storage says about `path` (not following symbolic links).
    fn stat(&self, path: &TablePath) -> io::Result<Meta>;

    /// [`Storage::stat`] of entries `names` of directory `dir`, in order. A local disk answers
    /// them relative to the directory: one path walk, not one per name.
    fn stat_names(&self, dir: &TablePath, names: &[&str]) -> Vec<io::Result<Meta>> {
        names
            .iter()
            .map(|n| {
                dir.child(n)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))
                    .and_then(|p| self.stat(&p))
            })
            .collect()
    }

    /// The whole content of file `path`.
    fn read(&self, path: &TablePath) -> io::Result<Vec<u8>>;

    /// Up to `len` bytes of file `path` at `offset` (fewer only at the end of the file).
    fn read_range(&self, path: &TablePath, offset: u64, len: usize) -> io::Result<Vec<u8>>;

    /// Open file `path` for reading.
    fn open(&self, path: &TablePath) -> io::Result<Arc<dyn OpenFile>>;

    /// The local file system behind this storage, for what only local disks offer
    /// (passthrough, inotify, `statfs`).
    fn local(&self) -> Option<&LocalStore> {
        None
    }

    /// Whether this is an object store: directories are key prefixes without modification
    /// times (a `stat` of one costs requests and says nothing about changes), and a file
    /// appears whole once it is listed (a PUT is atomic). Callers then trust a listing until
    /// the timeline says it changed, and read new files without waiting for them to settle.
    fn is_object_store(&self) -> bool {
        false
    }

    /// Run `job`, which may wait on this storage (listings, metadata, timeline reads), where
    /// waiting holds no thread the caller needs: a storage that waits on a network runs it on
    /// threads of its own; a local one runs it in place (a local wait is short, and running in
    /// place keeps the path as it was).
    fn run_blocking(&self, job: Job) {
        job()
    }
}

/// What the project's own table writer needs of a storage (feature `write`).
#[cfg(any(test, feature = "write"))]
pub trait StorageWrite: Storage {
    /// Write a whole file, replacing what was there. On a local disk the file is written in
    /// place (a reader may see it grow, as with Hudi's own writers); on stores whose writes are
    /// atomic it appears whole.
    fn put(&self, path: &TablePath, bytes: &[u8]) -> io::Result<()>;

    /// Write a whole file so that readers see either nothing or all of it: on a local disk,
    /// written under `staging` (a directory on the same file system) and renamed into place.
    fn put_atomic(&self, path: &TablePath, bytes: &[u8], staging: &TablePath) -> io::Result<()>;

    /// Rename a file (atomic on a local disk and in memory).
    fn rename(&self, from: &TablePath, to: &TablePath) -> io::Result<()>;

    /// Delete a file; `Ok(false)` if it was not there.
    fn delete(&self, path: &TablePath) -> io::Result<bool>;

    /// Delete a directory and everything below it; `Ok(())` if it was not there.
    fn delete_dir_all(&self, dir: &TablePath) -> io::Result<()>;

    /// Create a directory and its parents (nothing to do where directories are implicit).
    fn create_dir_all(&self, dir: &TablePath) -> io::Result<()>;

    /// Cut a file to `len` bytes (a crashed writer's torn file).
    fn truncate(&self, path: &TablePath, len: u64) -> io::Result<()>;

    /// Make `to` a file with the content of `from`: a hard link where the storage has them
    /// (benchmark tables of a million files), else a copy.
    fn link_or_copy(&self, from: &TablePath, to: &TablePath) -> io::Result<()> {
        let bytes = self.read(from)?;
        self.put(to, &bytes)
    }
}

/// Fill `buf` with the bytes of `file` at `offset` through [`OpenFile::read_at`] (on an object
/// store, through the handle's read-ahead); `UnexpectedEof` where the file ends first.
pub fn fill_at<F: OpenFile + ?Sized>(file: &F, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => done += n,
        }
    }
    Ok(())
}

/// An `io::Error` of kind `NotFound` naming what is missing.
pub fn not_found(what: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, format!("{what}: not found"))
}
