//! Who owns what a mount shows, and with which permission bits and times: the table root's
//! owner (or the serving user's on a store) unless `--uid`/`--gid` say otherwise, and the
//! `--file-mode`/`--dir-mode` overrides (SEMANTICS.md §7.3). Every node's attributes are
//! built here, so the rules live in one place.

use std::time::{Duration, SystemTime};

use hudifs_core::listing::DataFile;
use hudifs_storage::Storage;

use super::{Attr, Entry, Kind};
use crate::access::Access;

/// The owner and modes of a mount's nodes (a table's, or a lake's own directories).
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    uid: u32,
    gid: u32,
    /// The time of synthetic directories and of timeline files without one: the table root's.
    root_mtime: SystemTime,
    access: Access,
    /// `st_blksize` of table files: see [`STORE_BLKSIZE`].
    table_blksize: u32,
}

/// The preferred I/O size of a page (synthetic files, files on a local disk).
pub const PAGE_BLKSIZE: u32 = 4096;

/// The preferred I/O size of a table file on an object store: 1 MiB, the largest request the
/// kernel sends the daemon (its read-ahead window). Each read of such a file is a round trip
/// to the daemon (`FOPEN_DIRECT_IO`), so a reader that sizes its reads from `st_blksize`
/// (`cat`, `cp`, Python's buffered files) makes 1/8 of the requests it makes at 128 KiB;
/// network file systems say the same of themselves (NFS its `rsize`, CephFS its object size).
pub const STORE_BLKSIZE: u32 = 1 << 20;

impl Owner {
    /// The owner of a mount of `store`, whose root has time `root_mtime`: the root's owner where
    /// the storage has owners (a local disk), else the user serving the mount.
    pub fn of_store(store: &dyn Storage, root_mtime: SystemTime, access: Access) -> Owner {
        let (uid, gid) = match store.local().and_then(|l| l.owner()) {
            Some(owner) => owner,
            None => (crate::sys::ids::uid(), crate::sys::ids::gid()),
        };
        Owner::new(uid, gid, root_mtime, access, store.is_object_store())
    }

    /// `uid`/`gid`: the table root's owner (or the serving user's); `--uid`/`--gid` win.
    /// `object_store`: the table lies on an object store (see [`STORE_BLKSIZE`]).
    fn new(
        uid: u32,
        gid: u32,
        root_mtime: SystemTime,
        access: Access,
        object_store: bool,
    ) -> Owner {
        Owner {
            uid: access.uid.unwrap_or(uid),
            gid: access.gid.unwrap_or(gid),
            root_mtime,
            access,
            table_blksize: if object_store {
                STORE_BLKSIZE
            } else {
                PAGE_BLKSIZE
            },
        }
    }

    fn attr(&self, ino: u64, kind: Kind, size: u64, mtime: SystemTime, perm: u16) -> Attr {
        Attr {
            ino,
            kind,
            size,
            mtime,
            perm,
            uid: self.uid,
            gid: self.gid,
            blksize: PAGE_BLKSIZE,
        }
    }

    /// A directory (every directory is synthetic: the table root's time).
    pub fn dir(&self, ino: u64, ttl: Duration) -> Entry {
        let perm = self.access.dir_mode.unwrap_or(0o555);
        Entry {
            attr: self.attr(ino, Kind::Dir, 0, self.root_mtime, perm),
            ttl,
        }
    }

    /// A table file: its size and time, its own permission bits without write bits (a file
    /// not stated yet reads size 0: the caller states it first where the attributes count).
    pub fn table_file(&self, ino: u64, f: &DataFile, ttl: Duration) -> Entry {
        let perm = self.access.file_mode.unwrap_or(f.mode() & 0o555);
        let attr = Attr {
            blksize: self.table_blksize,
            ..self.attr(ino, Kind::File, f.size(), f.mtime(), perm)
        };
        Entry { attr, ttl }
    }

    /// A file the daemon renders (a `timeline/` file): read-only to all unless overridden;
    /// `mtime` none: the table root's.
    pub fn rendered_file(
        &self,
        ino: u64,
        size: u64,
        mtime: Option<SystemTime>,
        ttl: Duration,
    ) -> Entry {
        let perm = self.access.file_mode.unwrap_or(0o444);
        let mtime = mtime.unwrap_or(self.root_mtime);
        Entry {
            attr: self.attr(ino, Kind::File, size, mtime, perm),
            ttl,
        }
    }

    /// A merged slice: read-only to all.
    pub fn merged_file(&self, ino: u64, size: u64, mtime: SystemTime, ttl: Duration) -> Entry {
        Entry {
            attr: self.attr(ino, Kind::File, size, mtime, 0o444),
            ttl,
        }
    }
}
