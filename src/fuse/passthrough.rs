//! Kernel passthrough of table files: whether reads use it, and the backing files registered
//! with the kernel for it (one per inode while it is open, as the kernel allows one backing file
//! per inode).
//!
//! Backing files are the connection's, not the daemon's: they outlive a daemon that dies. Each
//! passthrough open and release is recorded in the restart journal (`journal/`),
//! so that the daemon that takes the mount over reuses the backing id of an inode still open
//! (the kernel refuses a second one with `EBUSY`) and closes it with the last handle.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};

use fuser::{BackingId, FileHandle, FopenFlags, ReplyOpen};
use hudifs_storage::sync::lock;

use crate::journal::{open_passthrough, PassOpen, Record, RestartJournal};

/// `FUSE_DEV_IOC_BACKING_CLOSE`: `_IOW(229, 2, uint32_t)`.
const FUSE_DEV_IOC_BACKING_CLOSE: libc::c_ulong = 0x4004_E502;

/// A backing file of an inode.
enum Backing {
    /// Registered by this daemon: closed in the kernel when dropped.
    Own(BackingId),
    /// Registered by a previous daemon of the mount, by number.
    Inherited(u32),
}

pub(super) struct Passthrough {
    /// Whether reads go through kernel passthrough (asked for, and granted by the kernel).
    on: AtomicBool,
    /// Backing files by inode, with the number of open handles using each.
    backing: Mutex<HashMap<u64, (Backing, usize)>>,
    /// Inode of each open passthrough handle.
    handle_inode: Mutex<HashMap<u64, u64>>,
    /// Where opens and releases are recorded (a mount that outlives its daemon).
    journal: Option<Arc<RestartJournal>>,
    /// The connection's descriptor, to close inherited backing files (-1: none).
    dev_fd: AtomicI32,
}

impl Passthrough {
    pub fn new(on: bool, journal: Option<Arc<RestartJournal>>) -> Passthrough {
        Passthrough {
            on: AtomicBool::new(on),
            backing: Mutex::new(HashMap::new()),
            handle_inode: Mutex::new(HashMap::new()),
            journal,
            dev_fd: AtomicI32::new(-1),
        }
    }

    pub fn on(&self) -> bool {
        self.on.load(Ordering::Relaxed)
    }

    pub fn turn_off(&self) {
        self.on.store(false, Ordering::Relaxed);
    }

    /// Take over the backing files that the previous daemons of the mount left open, as the
    /// journal records them, on connection `dev_fd`.
    pub fn resume(&self, records: &[Record], dev_fd: RawFd) {
        self.dev_fd.store(dev_fd, Ordering::Relaxed);
        let mut backing = lock(&self.backing);
        let mut handle_inode = lock(&self.handle_inode);
        for h in open_passthrough(records) {
            let PassOpen {
                fh,
                ino,
                backing_id: id,
            } = h.open;
            handle_inode.insert(fh, ino);
            backing.entry(ino).or_insert((Backing::Inherited(id), 0)).1 += 1;
        }
        if !backing.is_empty() {
            log::info!(
                "took over {} passthrough backing files of the previous daemon",
                backing.len()
            );
        }
    }

    fn record(&self, record: Record) {
        if let Some(j) = &self.journal {
            j.append(&record);
        }
    }

    fn record_open(&self, fh: u64, ino: u64, backing_id: u32) {
        self.record(Record::PassOpen(PassOpen {
            fh,
            ino,
            backing_id,
        }));
    }

    /// Reply to an open with passthrough to the table file, reusing the inode's backing id.
    pub fn open(
        &self,
        ino: u64,
        fh: u64,
        file: &std::fs::File,
        flags: FopenFlags,
        reply: ReplyOpen,
    ) {
        let mut backing = lock(&self.backing);
        if let Some((b, count)) = backing.get_mut(&ino) {
            if let Backing::Inherited(raw) = *b {
                // SAFETY: the previous daemon registered `raw` on this connection and did not
                // close it (the journal says a handle still uses it); from now on only this
                // wrapper closes it.
                *b = Backing::Own(unsafe { reply.wrap_backing(raw) });
            }
            let Backing::Own(id) = &*b else {
                unreachable!("made Own above")
            };
            *count += 1;
            lock(&self.handle_inode).insert(fh, ino);
            self.record_open(fh, ino, id.raw());
            return reply.opened_passthrough(FileHandle(fh), flags, id);
        }
        match reply.open_backing(file) {
            Ok(id) => {
                // Recorded before the kernel hears of the handle.
                self.record_open(fh, ino, id.raw());
                // Known before the reply: a release may follow it at once, on another thread.
                lock(&self.handle_inode).insert(fh, ino);
                backing.insert(ino, (Backing::Own(id), 1));
                let Some((Backing::Own(id), _)) = backing.get(&ino) else {
                    unreachable!("inserted above")
                };
                reply.opened_passthrough(FileHandle(fh), flags, id);
            }
            Err(e) => {
                log::warn!(
                    "kernel passthrough refused ({e}); reading through the daemon from now on"
                );
                self.turn_off();
                reply.opened(FileHandle(fh), flags);
            }
        }
    }

    /// A handle is released: drop its inode's backing file with the last handle using it.
    pub fn release(&self, fh: u64) {
        let ino = lock(&self.handle_inode).remove(&fh);
        let Some(ino) = ino else {
            return;
        };
        self.record(Record::PassRelease { fh });
        // Lock order: `backing`, then `handle_inode` (as in open); never both here.
        let mut backing = lock(&self.backing);
        let Some((_, count)) = backing.get_mut(&ino) else {
            return;
        };
        *count -= 1;
        if *count > 0 {
            return;
        }
        match backing.remove(&ino) {
            // Dropping the id closes the backing file in the kernel.
            Some((Backing::Own(id), _)) => drop(id),
            Some((Backing::Inherited(raw), _)) => self.close_inherited(raw),
            None => {}
        }
    }

    fn close_inherited(&self, raw: u32) {
        let fd = self.dev_fd.load(Ordering::Relaxed);
        if fd < 0 {
            return;
        }
        // SAFETY: an ioctl on the connection's descriptor with a pointer to a local u32.
        let rc = unsafe { libc::ioctl(fd, FUSE_DEV_IOC_BACKING_CLOSE as _, &raw) };
        if rc != 0 {
            log::debug!(
                "closing backing file {raw} of a previous daemon: {}",
                std::io::Error::last_os_error()
            );
        }
    }
}
