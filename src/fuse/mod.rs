//! The FUSE adapter, and the only module that knows `fuser`: the `impl fuser::Filesystem`
//! (each method calls the plain logic in `fs`, turns `Ok` into a reply and `Err` into an errno,
//! and logs the error once: lookups of missing names at debug level, everything else as a
//! warning), the errno of each error, the mount options in FUSE terms, and the session with its
//! notifier (`session.rs`), kernel passthrough (`passthrough.rs`). No file-system decision is
//! made here.

mod passthrough;
mod session;

pub use session::{mount, mount_kept, serve_kept, Kept, MountFailure, Mounted, Unmounter};

use std::ffi::OsStr;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Instant, SystemTime};

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileAttr, FileHandle, FileType,
    Filesystem, FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner, OpenAccMode,
    OpenFlags, RenameFlags, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow,
    WriteFlags,
};

use crate::fs::{Attr, DirCache, DirListing, Kind, ReadAnswer, Served, XATTR_PREFIX};
use hudifs_core::error::Error;
use passthrough::Passthrough;

struct FuseAdapter {
    /// One table, or a lake of them.
    fs: Arc<dyn Served>,
    /// Kernel passthrough and its backing files (shared with requests answered off the FUSE
    /// thread).
    pass: Arc<Passthrough>,
    /// Tells the kernel what to drop from its caches (set once the session exists).
    notifier: Arc<OnceLock<fuser::Notifier>>,
}

impl FuseAdapter {
    fn new(
        fs: Arc<dyn Served>,
        pass: Passthrough,
        notifier: Arc<OnceLock<fuser::Notifier>>,
    ) -> FuseAdapter {
        FuseAdapter {
            fs,
            pass: Arc::new(pass),
            notifier,
        }
    }

    /// Whether this mount reads through kernel passthrough.
    pub fn uses_passthrough(&self) -> bool {
        self.pass.on()
    }

    /// Answer a request that may wait on the storage (`f` replies): on an object store from the
    /// store's threads, so that this FUSE thread goes back to the kernel at once and a slow
    /// listing never holds up requests answered from memory; on a local disk in place
    /// (docs/SEMANTICS.md §9). Lookup, opendir, readdir and read decide this themselves: they
    /// answer in place what needs nothing from the storage.
    fn later(&self, f: impl FnOnce(&dyn Served, &Passthrough) + Send + 'static) {
        let (fs, pass) = (self.fs.clone(), self.pass.clone());
        self.fs.run_blocking(Box::new(move || f(&*fs, &pass)));
    }
}

fn errno(op: &str, what: &dyn std::fmt::Display, e: &Error) -> Errno {
    if e.is_routine() {
        log::debug!("{op} {what}: {e}");
    } else {
        log::warn!("{op} {what}: {e}");
    }
    Errno::from_i32(errno_of(e))
}

/// The errno a FUSE caller gets for an error.
pub fn errno_of(e: &Error) -> i32 {
    match e {
        Error::NotFound(_) => libc::ENOENT,
        // A time that is not a time: the name is invalid, not merely absent.
        Error::BadTime(_) => libc::EINVAL,
        // The snapshot asked for cannot be served (cleaned, unreadable, ...): as far as the
        // caller is concerned it does not exist; the log line says why.
        Error::Refused(_) => libc::ENOENT,
        Error::Usage(_) | Error::Invalid(_) => libc::EINVAL,
        Error::Unsupported(_) => libc::EOPNOTSUPP,
        Error::TooBig(_) => libc::EFBIG,
        Error::Corrupt(_) => libc::EIO,
        // Storage without errno (an object store) still tells a missing file apart.
        Error::Io { source, .. } => source.raw_os_error().unwrap_or(match source.kind() {
            std::io::ErrorKind::NotFound => libc::ENOENT,
            _ => libc::EIO,
        }),
        Error::NotATable(_) | Error::BadTableConfig { .. } | Error::BadMetadata { .. } => libc::EIO,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    let blocks = a.size.div_ceil(512);
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks,
        atime: a.mtime,
        mtime: a.mtime,
        ctime: a.mtime,
        crtime: a.mtime,
        kind: match a.kind {
            Kind::Dir => FileType::Directory,
            Kind::File => FileType::RegularFile,
        },
        perm: a.perm,
        nlink: match a.kind {
            Kind::Dir => 2,
            Kind::File => 1,
        },
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: a.blksize,
        flags: 0,
    }
}

fn kind(k: Kind) -> FileType {
    match k {
        Kind::Dir => FileType::Directory,
        Kind::File => FileType::RegularFile,
    }
}

/// Answer a `readdir` of directory `ino` from entry `offset` on, with the entries of its handle.
fn readdir(
    entries: hudifs_core::error::Result<DirListing>,
    ino: INodeNo,
    offset: u64,
    mut reply: ReplyDirectory,
    t: Timed,
) {
    t.end(entries.is_ok());
    let entries = match entries {
        Ok(e) => e,
        Err(e) => return reply.error(errno("readdir", &ino.0, &e)),
    };
    // Offsets: 1 = ".", 2 = "..", 3.. = entries.
    let dots = [(ino.0, ".", Kind::Dir), (ino.0, "..", Kind::Dir)];
    let all = dots.iter().map(|(i, n, k)| (*i, *n, *k)).chain(
        entries
            .iter()
            .map(|(name, e)| (e.attr.ino, name, e.attr.kind)),
    );
    for (i, (eino, name, k)) in all.enumerate().skip(offset as usize) {
        if reply.add(INodeNo(eino), (i + 1) as u64, kind(k), name) {
            break;
        }
    }
    reply.ok();
}

/// Answer a `readdirplus`: entries with their attributes, as [`readdir`].
fn readdirplus(
    entries: hudifs_core::error::Result<DirListing>,
    ino: INodeNo,
    offset: u64,
    mut reply: ReplyDirectoryPlus,
    t: Timed,
) {
    t.end(entries.is_ok());
    let entries = match entries {
        Ok(e) => e,
        Err(e) => return reply.error(errno("readdirplus", &ino.0, &e)),
    };
    // "." and ".." go name only: Linux keeps no attributes of them from a readdirplus
    // (`fuse_direntplus_link` skips them), so the listing needs nothing but the handle's.
    for (i, name) in [".", ".."].into_iter().enumerate().skip(offset as usize) {
        if reply.add_name_only(ino, (i + 1) as u64, FileType::Directory, name) {
            return reply.ok();
        }
    }
    for (i, (name, e)) in entries
        .iter()
        .enumerate()
        .skip((offset as usize).saturating_sub(2))
    {
        let i = i + 2;
        // Files without attributes unless callers stat what they list (`stat_demand.rs`).
        let full = e.attr.kind != Kind::File || entries.file_attrs();
        let attr = file_attr(&e.attr);
        let over = if full {
            reply.add(attr.ino, (i + 1) as u64, name, &e.ttl, &attr, Generation(0))
        } else {
            reply.add_name_only(attr.ino, (i + 1) as u64, kind(e.attr.kind), name)
        };
        if over {
            break;
        }
    }
    reply.ok();
}

/// Answer `getxattr` (`name` given) or `listxattr` (`name` none) of inode `ino` for a buffer
/// of `size` bytes (0: how many are needed).
fn xattr(
    fs: &dyn Served,
    ino: INodeNo,
    name: Option<&OsStr>,
    size: u32,
    reply: ReplyXattr,
    t: Timed,
) {
    let attrs = fs.xattrs(ino.0);
    t.end(attrs.is_ok());
    let attrs = match attrs {
        Ok(a) => a,
        Err(e) => return reply.error(errno(xattr_op(name), &ino.0, &e)),
    };
    let bytes = match name {
        Some(name) => match attrs.iter().find(|(n, _)| OsStr::new(n) == name) {
            Some((_, value)) => value.as_bytes().to_vec(),
            None => return reply.error(Errno::NO_XATTR),
        },
        None => attrs
            .iter()
            .flat_map(|(n, _)| n.as_bytes().iter().copied().chain([0]))
            .collect(),
    };
    if size == 0 {
        reply.size(bytes.len() as u32);
    } else if (size as usize) < bytes.len() {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(&bytes);
    }
}

/// A request being answered, timed for the metrics (`hudifs_storage::observe`): reported with
/// its outcome just before the reply goes out, so that whoever got the reply and then asks for
/// the metrics finds it counted.
struct Timed {
    op: &'static str,
    started: Instant,
}

impl Timed {
    fn start(op: &'static str) -> Timed {
        Timed {
            op,
            started: Instant::now(),
        }
    }

    fn end(self, ok: bool) {
        hudifs_storage::observe::fuse_request(self.op, ok, self.started);
    }
}

/// The operation an `xattr` answer is for.
fn xattr_op(name: Option<&OsStr>) -> &'static str {
    if name.is_some() {
        "getxattr"
    } else {
        "listxattr"
    }
}

/// Answer the kernel's INIT of a mount: the capabilities every hudifs mount asks for, and
/// passthrough if `passthrough` (whether it was granted).
fn negotiate(config: &mut KernelConfig, passthrough: bool) -> bool {
    // Large requests for sequential reads of big Parquet files.
    let _ = config.set_max_readahead(1 << 20);
    // `ls -l` and `find` get names and attributes in one round trip.
    let _ = config.add_capabilities(InitFlags::FUSE_DO_READDIRPLUS);
    let _ = config.add_capabilities(InitFlags::FUSE_PARALLEL_DIROPS);
    // Files opened with FOPEN_DIRECT_IO (an object store's) can still be mapped (Linux 6.6+;
    // older kernels refuse mmap of them with ENODEV).
    let _ = config.add_capabilities(InitFlags::FUSE_DIRECT_IO_ALLOW_MMAP);
    // A large read of such a file reaches the daemon as several requests at once, not one
    // after another (each a round trip to the store).
    let _ = config.add_capabilities(InitFlags::FUSE_ASYNC_DIO);
    let granted = passthrough
        && config.add_capabilities(InitFlags::FUSE_PASSTHROUGH).is_ok()
        && config.set_max_stack_depth(1).is_ok();
    if granted {
        log::info!("data path: kernel passthrough (reads go straight to the table files)");
    } else {
        log::info!("data path: reads through the daemon (passthrough off or unsupported)");
    }
    granted
}

/// Methods of `Filesystem` that would change the table, each answering `EROFS`: the names, the
/// arguments after the request, and the reply.
macro_rules! read_only {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $reply:ty;)*) => {
        $(
            fn $name(&self, _req: &Request, $($arg: $ty,)* reply: $reply) {
                reply.error(Errno::EROFS);
            }
        )*
    };
}

impl Filesystem for FuseAdapter {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        if !negotiate(config, self.uses_passthrough()) {
            self.pass.turn_off();
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        // Answered in place when it needs nothing from the storage, else from the store's
        // threads (`Served::lookup`).
        let t = Timed::start("lookup");
        let owned = name.to_os_string();
        let answer = Box::new(move |r: hudifs_core::error::Result<crate::fs::Entry>| {
            t.end(r.is_ok());
            match r {
                Ok(e) => reply.entry(&e.ttl, &file_attr(&e.attr), Generation(0)),
                Err(e) => reply.error(errno("lookup", &Path::new(&owned).display(), &e)),
            }
        });
        self.fs.clone().lookup(parent.0, name, answer)
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        let t = Timed::start("getattr");
        self.later(move |fs, _| {
            let r = fs.getattr(ino.0);
            t.end(r.is_ok());
            match r {
                Ok(e) => reply.attr(&e.ttl, &file_attr(&e.attr)),
                Err(e) => reply.error(errno("getattr", &ino.0, &e)),
            }
        })
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        if flags.acc_mode() != OpenAccMode::O_RDONLY {
            return reply.error(Errno::EROFS);
        }
        let t = Timed::start("open");
        self.later(move |fs, pass| {
            let r = fs.open(ino.0);
            t.end(r.is_ok());
            match r {
                Ok(o) => {
                    let mut flags = if o.keep_cache {
                        FopenFlags::FOPEN_KEEP_CACHE
                    } else {
                        FopenFlags::empty()
                    };
                    if o.direct_io {
                        // Maps still work: FUSE_DIRECT_IO_ALLOW_MMAP (init).
                        flags |= FopenFlags::FOPEN_DIRECT_IO;
                    }
                    match o.backing.as_ref().and_then(|b| b.as_file()) {
                        // The kernel refuses FOPEN_KEEP_CACHE with passthrough (the open fails with
                        // EIO): page caching is the backing file's business then.
                        Some(file) if pass.on() => {
                            pass.open(ino.0, o.fh, file, FopenFlags::empty(), reply)
                        }
                        _ => reply.opened(FileHandle(o.fh), flags),
                    }
                }
                Err(e) => reply.error(errno("open", &ino.0, &e)),
            }
        })
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        // Files on an object store are answered from the store's runtime: this thread goes
        // back to the kernel at once (docs/SEMANTICS.md §9).
        let t = Timed::start("read");
        let answer: ReadAnswer = Box::new(move |r| {
            t.end(r.is_ok());
            match r {
                Ok(data) => reply.data(data),
                Err(e) => reply.error(errno("read", &ino.0, &e)),
            }
        });
        self.fs.read(ino.0, fh.0, offset, size, answer);
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        let t = Timed::start("release");
        self.fs.release(fh.0);
        self.pass.release(fh.0);
        t.end(true);
        reply.ok();
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let t = Timed::start("opendir");
        let answer = Box::new(move |r: hudifs_core::error::Result<crate::fs::OpenedDir>| {
            t.end(r.is_ok());
            match r {
                Ok(d) => {
                    let flags = match d.cache {
                        DirCache::Off => FopenFlags::empty(),
                        DirCache::Fill => FopenFlags::FOPEN_CACHE_DIR,
                        DirCache::Reuse => {
                            FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE
                        }
                    };
                    reply.opened(FileHandle(d.fh), flags)
                }
                Err(e) => reply.error(errno("opendir", &ino.0, &e)),
            }
        });
        self.fs.clone().opendir(ino.0, answer)
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectory,
    ) {
        let t = Timed::start("readdir");
        let answer = Box::new(move |r| readdir(r, ino, offset, reply, t));
        self.fs.clone().readdir(ino.0, fh.0, answer)
    }

    fn readdirplus(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        reply: ReplyDirectoryPlus,
    ) {
        let t = Timed::start("readdirplus");
        let answer = Box::new(move |r| readdirplus(r, ino, offset, reply, t));
        self.fs.clone().readdir(ino.0, fh.0, answer)
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        let t = Timed::start("releasedir");
        if let Some(stale) = self.fs.releasedir(fh.0) {
            // Drop what the handle may have put in the kernel's cached listing, then let other
            // handles reuse that cache again.
            if let Some(n) = self.notifier.get() {
                let _ = n.inval_inode(INodeNo(stale.ino), 0, 0);
            }
            self.fs.stale_dir_dropped(stale);
        }
        t.end(true);
        reply.ok();
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let t = Timed::start("statfs");
        let st = self.fs.statvfs();
        t.end(true);
        match st {
            Some(st) => reply.statfs(
                st.blocks, st.bfree, st.bavail, st.files, st.ffree, st.bsize, 255, st.frsize,
            ),
            None => reply.statfs(0, 0, 0, 0, 0, 4096, 255, 4096),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        let t = Timed::start("getxattr");
        // Only `user.hudi*` names are ever there: any other (`ls -l` asks every file for
        // `security.selinux` and `system.posix_acl_access`) is answered at once, without
        // working out the node's attributes or a hop to an object store's threads.
        if !std::os::unix::ffi::OsStrExt::as_bytes(name).starts_with(XATTR_PREFIX.as_bytes()) {
            t.end(true);
            return reply.error(Errno::NO_XATTR);
        }
        let name = name.to_os_string();
        self.later(move |fs, _| xattr(fs, ino, Some(&name), size, reply, t))
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        let t = Timed::start("listxattr");
        self.later(move |fs, _| xattr(fs, ino, None, size, reply, t))
    }

    fn access(&self, _req: &Request, ino: INodeNo, mask: AccessFlags, reply: ReplyEmpty) {
        if mask.contains(AccessFlags::W_OK) {
            return reply.error(Errno::EROFS);
        }
        let t = Timed::start("access");
        self.later(move |fs, _| {
            let r = fs.getattr(ino.0);
            t.end(r.is_ok());
            match r {
                Ok(_) => reply.ok(),
                Err(e) => reply.error(errno("access", &ino.0, &e)),
            }
        })
    }

    // Everything that would change the table fails with EROFS.
    read_only! {
        fn setattr(
            _ino: INodeNo,
            _mode: Option<u32>,
            _uid: Option<u32>,
            _gid: Option<u32>,
            _size: Option<u64>,
            _atime: Option<TimeOrNow>,
            _mtime: Option<TimeOrNow>,
            _ctime: Option<SystemTime>,
            _fh: Option<FileHandle>,
            _crtime: Option<SystemTime>,
            _chgtime: Option<SystemTime>,
            _bkuptime: Option<SystemTime>,
            _flags: Option<BsdFileFlags>,
        ) -> ReplyAttr;
        fn mknod(
            _parent: INodeNo,
            _name: &OsStr,
            _mode: u32,
            _umask: u32,
            _rdev: u32,
        ) -> ReplyEntry;
        fn mkdir(_parent: INodeNo, _name: &OsStr, _mode: u32, _umask: u32) -> ReplyEntry;
        fn unlink(_parent: INodeNo, _name: &OsStr) -> ReplyEmpty;
        fn rmdir(_parent: INodeNo, _name: &OsStr) -> ReplyEmpty;
        fn symlink(_parent: INodeNo, _link_name: &OsStr, _target: &Path) -> ReplyEntry;
        fn rename(
            _parent: INodeNo,
            _name: &OsStr,
            _newparent: INodeNo,
            _newname: &OsStr,
            _flags: RenameFlags,
        ) -> ReplyEmpty;
        fn link(_ino: INodeNo, _newparent: INodeNo, _newname: &OsStr) -> ReplyEntry;
        fn write(
            _ino: INodeNo,
            _fh: FileHandle,
            _offset: u64,
            _data: &[u8],
            _write_flags: WriteFlags,
            _flags: OpenFlags,
            _lock_owner: Option<LockOwner>,
        ) -> ReplyWrite;
        fn create(
            _parent: INodeNo,
            _name: &OsStr,
            _mode: u32,
            _umask: u32,
            _flags: i32,
        ) -> ReplyCreate;
        fn setxattr(
            _ino: INodeNo,
            _name: &OsStr,
            _value: &[u8],
            _flags: i32,
            _position: u32,
        ) -> ReplyEmpty;
        fn removexattr(_ino: INodeNo, _name: &OsStr) -> ReplyEmpty;
        fn fallocate(
            _ino: INodeNo,
            _fh: FileHandle,
            _offset: u64,
            _length: u64,
            _mode: i32,
        ) -> ReplyEmpty;
        fn copy_file_range(
            _ino_in: INodeNo,
            _fh_in: FileHandle,
            _offset_in: u64,
            _ino_out: INodeNo,
            _fh_out: FileHandle,
            _offset_out: u64,
            _len: u64,
            _flags: CopyFileRangeFlags,
        ) -> ReplyWrite;
    }
}

// ---------------------------------------------------------------------------------------------
