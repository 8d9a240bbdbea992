//! [`LocalStore`]: a table on a local file system (or a network file system mounted here), and
//! what only such a file system offers: a descriptor for kernel passthrough and `fadvise`,
//! inotify ([`Watch`]), and whether other machines' writes reach this kernel
//! ([`network_file_system`]).

use std::collections::BTreeSet;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::{Entry, Kind, Meta, OpenFile, Storage, TablePath};

/// A table rooted at a directory of this machine's file system.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
}

impl LocalStore {
    /// The table at `root` (made absolute and canonical, so that a later `cd` or a rename of a
    /// symbolic link on the way does not move it).
    pub fn new(root: &Path) -> io::Result<LocalStore> {
        let root = root.canonicalize()?;
        Ok(LocalStore { root })
    }

    /// The table root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file system path of `p`.
    pub fn path(&self, p: &TablePath) -> PathBuf {
        if p.is_root() {
            self.root.clone()
        } else {
            self.root.join(p.as_str())
        }
    }

    /// Watch directory `dir` with inotify.
    pub fn watch(&self, dir: &TablePath) -> io::Result<Watch> {
        Watch::new(&self.path(dir))
    }

    /// What `statfs` says of the file system the table is on: `(f_type, statvfs)`.
    pub fn statvfs(&self) -> Option<FsStats> {
        let path = CString::new(self.root.as_os_str().as_bytes()).ok()?;
        // SAFETY: a valid C string and a zeroed out-parameter of the right type.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return None;
        }
        Some(FsStats {
            blocks: st.f_blocks,
            bfree: st.f_bfree,
            bavail: st.f_bavail,
            files: st.f_files,
            ffree: st.f_ffree,
            bsize: st.f_bsize as u32,
            frsize: st.f_frsize as u32,
        })
    }

    fn meta(md: &std::fs::Metadata) -> Meta {
        raw_meta(md.mode(), md.size(), md.mtime(), md.mtime_nsec())
    }
}

/// What the storage says of a file from its `stat` fields (`st_mode`, `st_size`, `st_mtime`,
/// `st_mtime_nsec`): [`LocalStore::meta`] and [`Storage::stat_names`] alike.
fn raw_meta(mode: u32, size: u64, mtime: i64, mtime_nsec: i64) -> Meta {
    let kind = match mode & libc::S_IFMT {
        libc::S_IFREG => Kind::File,
        libc::S_IFDIR => Kind::Dir,
        _ => Kind::Other,
    };
    let mtime = if mtime >= 0 {
        std::time::UNIX_EPOCH.checked_add(std::time::Duration::new(mtime as u64, mtime_nsec as u32))
    } else {
        std::time::UNIX_EPOCH.checked_sub(std::time::Duration::from_secs(mtime.unsigned_abs()))
    };
    Meta {
        kind,
        size: if kind == Kind::File { size } else { 0 },
        mtime,
        mode,
        version: None,
    }
}

/// Capacity figures of the file system under a table.
#[derive(Debug, Clone, Copy)]
pub struct FsStats {
    pub blocks: u64,
    pub bfree: u64,
    pub bavail: u64,
    pub files: u64,
    pub ffree: u64,
    pub bsize: u32,
    pub frsize: u32,
}

struct LocalFile {
    file: std::fs::File,
    size: u64,
}

/// A handle on a local file opened by the caller (a file of a disk cache, say), read like a
/// table file and usable for kernel passthrough.
pub fn local_file_handle(file: std::fs::File) -> io::Result<Arc<dyn OpenFile>> {
    let size = file.metadata()?.len();
    Ok(Arc::new(LocalFile { file, size }))
}

impl OpenFile for LocalFile {
    fn size(&self) -> u64 {
        self.size
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut filled = 0;
        while filled < buf.len() {
            match self
                .file
                .read_at(&mut buf[filled..], offset + filled as u64)
            {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(filled)
    }
    fn as_file(&self) -> Option<&std::fs::File> {
        Some(&self.file)
    }
}

impl Storage for LocalStore {
    fn describe(&self, path: &TablePath) -> String {
        self.path(path).display().to_string()
    }

    fn list(&self, dir: &TablePath) -> io::Result<Vec<Entry>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.path(dir))? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // `DirEntry::metadata` does not follow symbolic links. An entry deleted between
            // the listing and the stat is left out.
            let Ok(md) = entry.metadata() else { continue };
            out.push(Entry {
                name,
                meta: LocalStore::meta(&md),
            });
        }
        Ok(out)
    }

    fn list_names(&self, dir: &TablePath) -> io::Result<Vec<(String, Kind)>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.path(dir))? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            // From the directory entry itself on most file systems: no stat.
            let Ok(ft) = entry.file_type() else { continue };
            let kind = if ft.is_file() {
                Kind::File
            } else if ft.is_dir() {
                Kind::Dir
            } else {
                Kind::Other
            };
            out.push((name, kind));
        }
        Ok(out)
    }

    fn stat(&self, path: &TablePath) -> io::Result<Meta> {
        Ok(LocalStore::meta(&std::fs::symlink_metadata(
            self.path(path),
        )?))
    }

    fn stat_names(&self, dir: &TablePath, names: &[&str]) -> Vec<io::Result<Meta>> {
        use std::os::fd::AsRawFd;
        let d = match std::fs::File::open(self.path(dir)) {
            Ok(d) => d,
            Err(e) => {
                return names
                    .iter()
                    .map(|_| Err(io::Error::from(e.kind())))
                    .collect()
            }
        };
        names
            .iter()
            .map(|name| {
                if !crate::path::valid_component(name) {
                    return Err(io::Error::new(io::ErrorKind::InvalidInput, *name));
                }
                let c = std::ffi::CString::new(*name)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
                // SAFETY: an all-zero `stat` is a valid value to be overwritten.
                let mut st: libc::stat = unsafe { std::mem::zeroed() };
                // SAFETY: `d` is an open directory, `c` a NUL-terminated name, `st` writable.
                let r = unsafe {
                    libc::fstatat(
                        d.as_raw_fd(),
                        c.as_ptr(),
                        &mut st,
                        libc::AT_SYMLINK_NOFOLLOW,
                    )
                };
                if r != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(raw_meta(
                    st.st_mode,
                    st.st_size as u64,
                    st.st_mtime,
                    st.st_mtime_nsec,
                ))
            })
            .collect()
    }

    fn read(&self, path: &TablePath) -> io::Result<Vec<u8>> {
        std::fs::read(self.path(path))
    }

    fn read_range(&self, path: &TablePath, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let file = std::fs::File::open(self.path(path))?;
        let f = LocalFile { file, size: 0 };
        let mut buf = vec![0u8; len];
        let n = f.read_at(&mut buf, offset)?;
        buf.truncate(n);
        Ok(buf)
    }

    fn open(&self, path: &TablePath) -> io::Result<Arc<dyn OpenFile>> {
        let file = std::fs::File::open(self.path(path))?;
        let size = file.metadata()?.len();
        // Readers of table files read them whole, front to back: let the kernel read ahead as
        // far as it goes for sequential access (a FUSE daemon's worker threads split one
        // reader's stream, which would otherwise look less sequential).
        // SAFETY: a valid descriptor; advice only.
        unsafe {
            use std::os::fd::AsRawFd;
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
        }
        Ok(Arc::new(LocalFile { file, size }))
    }

    fn local(&self) -> Option<&LocalStore> {
        Some(self)
    }
}

#[cfg(any(test, feature = "write"))]
impl crate::StorageWrite for LocalStore {
    fn put(&self, path: &TablePath, bytes: &[u8]) -> io::Result<()> {
        let p = self.path(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, bytes)
    }

    fn put_atomic(&self, path: &TablePath, bytes: &[u8], staging: &TablePath) -> io::Result<()> {
        let dir = self.path(staging);
        std::fs::create_dir_all(&dir)?;
        let target = self.path(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let tmp = dir.join(format!(".{}.{}.tmp", path.name(), std::process::id()));
        std::fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, target)
    }

    fn rename(&self, from: &TablePath, to: &TablePath) -> io::Result<()> {
        std::fs::rename(self.path(from), self.path(to))
    }

    fn delete(&self, path: &TablePath) -> io::Result<bool> {
        match std::fs::remove_file(self.path(path)) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn delete_dir_all(&self, dir: &TablePath) -> io::Result<()> {
        match std::fs::remove_dir_all(self.path(dir)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn create_dir_all(&self, dir: &TablePath) -> io::Result<()> {
        std::fs::create_dir_all(self.path(dir))
    }

    fn truncate(&self, path: &TablePath, len: u64) -> io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(self.path(path))?
            .set_len(len)
    }

    fn link_or_copy(&self, from: &TablePath, to: &TablePath) -> io::Result<()> {
        let (from, to) = (self.path(from), self.path(to));
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match std::fs::hard_link(&from, &to) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(e),
            Err(_) => std::fs::copy(&from, &to).map(|_| ()),
        }
    }
}

/// The name of the file system `dir` is on when that is a network or FUSE file system, whose
/// changes made elsewhere inotify does not report.
pub fn network_file_system(dir: &Path) -> Option<&'static str> {
    let path = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid C string and a zeroed out-parameter of the right type.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // Magic numbers from linux/magic.h and the file systems' sources.
    let name = match st.f_type as u64 {
        0x6969 => "NFS",
        0x517b => "SMB",
        0xfe53_4d42 => "SMB2",
        0xff53_4d42 => "CIFS",
        0x6573_5546 => "a FUSE file system",
        0x00c3_6400 => "CephFS",
        0x0102_1997 => "9P",
        0x5346_414f => "AFS",
        0x7375_7245 => "Coda",
        0x0116_1970 => "GFS2",
        0x7461_636f => "OCFS2",
        0x0bd0_0bd0 => "Lustre",
        0x4750_4653 => "GPFS",
        _ => return None,
    };
    Some(name)
}

impl LocalStore {
    /// The device number of the file system the table is on (for matching read-ahead).
    pub fn device(&self) -> Option<u64> {
        std::fs::metadata(&self.root).ok().map(|m| m.dev())
    }

    /// The owner of the table root: `(uid, gid)`.
    pub fn owner(&self) -> Option<(u32, u32)> {
        std::fs::metadata(&self.root)
            .ok()
            .map(|m| (m.uid(), m.gid()))
    }
}

/// An inotify watch on one directory.
pub struct Watch {
    fd: std::os::fd::OwnedFd,
}

/// What one wake-up of a [`Watch`] saw.
#[derive(Debug, Default)]
pub struct WatchEvents {
    /// Names that appeared or were written.
    pub changed: BTreeSet<String>,
    /// Names that vanished.
    pub removed: BTreeSet<String>,
    /// Names that appeared without being written here (yet): a file created and not closed
    /// yet, or one linked into place whole (`link(2)`, as object_store's local store commits a
    /// file it must not overwrite), which no close-write will follow. Not in `changed`.
    pub created: BTreeSet<String>,
    /// The kernel's queue overflowed or the directory moved: list it again.
    pub rescan: bool,
}

impl Watch {
    fn new(dir: &Path) -> io::Result<Watch> {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: plain syscalls; the fd is owned from here on.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let path = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| io::Error::other("NUL in path"))?;
        let mask = libc::IN_CLOSE_WRITE
            | libc::IN_CREATE
            | libc::IN_MOVED_TO
            | libc::IN_MOVED_FROM
            | libc::IN_DELETE
            | libc::IN_DELETE_SELF
            | libc::IN_MOVE_SELF;
        // SAFETY: valid fd and C string.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Watch { fd })
    }

    /// Wait up to `timeout` for events; `None` when nothing happened.
    pub fn wait(&self, timeout: Duration) -> io::Result<Option<WatchEvents>> {
        use std::os::fd::AsRawFd;
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(e)
            };
        }
        if n == 0 {
            return Ok(None);
        }
        let mut ev = WatchEvents::default();
        // Drain what is queued, then once more after a moment: a commit is several files.
        for round in 0..2 {
            if round == 1 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let mut buf = [0u8; 64 * 1024];
            loop {
                // SAFETY: reading into a buffer of the stated length.
                let len =
                    unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if len <= 0 {
                    break;
                }
                let mut off = 0usize;
                let header = std::mem::size_of::<libc::inotify_event>();
                while off + header <= len as usize {
                    // SAFETY: the kernel wrote a whole event at `off`.
                    let raw: libc::inotify_event =
                        unsafe { std::ptr::read_unaligned(buf[off..].as_ptr().cast()) };
                    let end = (off + header + raw.len as usize).min(len as usize);
                    let name_bytes = &buf[off + header..end];
                    let name = name_bytes.split(|b| *b == 0).next().unwrap_or(&[]);
                    let name = OsStr::from_bytes(name).to_string_lossy().to_string();
                    if raw.mask
                        & (libc::IN_Q_OVERFLOW
                            | libc::IN_DELETE_SELF
                            | libc::IN_MOVE_SELF
                            | libc::IN_IGNORED)
                        != 0
                    {
                        ev.rescan = true;
                    } else if raw.mask & (libc::IN_DELETE | libc::IN_MOVED_FROM) != 0 {
                        ev.changed.remove(&name);
                        ev.created.remove(&name);
                        ev.removed.insert(name);
                    } else if raw.mask & libc::IN_CREATE != 0 {
                        if !name.is_empty() {
                            ev.created.insert(name);
                        }
                    } else if !name.is_empty() {
                        ev.created.remove(&name);
                        ev.removed.remove(&name);
                        ev.changed.insert(name);
                    }
                    off += header + raw.len as usize;
                }
            }
        }
        Ok(Some(ev))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StorageWrite;

    #[test]
    fn reads_writes_and_lists_without_following_links() {
        let dir = std::env::temp_dir().join(format!("hudifs-storage-local-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let s = LocalStore::new(&dir).unwrap();
        let p = TablePath::new("a/b.txt").unwrap();
        s.put(&p, b"hello").unwrap();
        s.put_atomic(
            &TablePath::new("a/c.txt").unwrap(),
            b"world",
            &TablePath::new(".tmp").unwrap(),
        )
        .unwrap();
        std::os::unix::fs::symlink("/etc", dir.join("a/link")).unwrap();
        let mut names: Vec<(String, Kind)> = s
            .list(&TablePath::new("a").unwrap())
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.meta.kind))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                ("b.txt".into(), Kind::File),
                ("c.txt".into(), Kind::File),
                ("link".into(), Kind::Other)
            ]
        );
        assert_eq!(s.read_range(&p, 1, 3).unwrap(), b"ell");
        assert_eq!(s.read_range(&p, 3, 10).unwrap(), b"lo");
        let f = s.open(&p).unwrap();
        assert!(s.delete(&p).unwrap());
        let mut buf = [0u8; 5];
        assert_eq!(
            f.read_at(&mut buf, 0).unwrap(),
            5,
            "an open file outlives its deletion"
        );
        assert_eq!(s.read(&p).unwrap_err().kind(), io::ErrorKind::NotFound);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
