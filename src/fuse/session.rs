//! The FUSE session: the mount options in kernel terms, mounting, and the session with its
//! notifier. Two ways to serve a mount: [`mount`] mounts and answers the kernel's INIT in this
//! process; [`mount_kept`] mounts and answers INIT for a keeper (`daemon/keeper.rs`), which holds
//! the connection while serving daemons take it over one after another ([`serve_kept`]), the
//! first at once and each next one after the one before died (docs/SEMANTICS.md §7.11).

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use fuser::{Filesystem, INodeNo, InitFlags, KernelConfig, MountOption, Request, SessionACL};

use super::passthrough::Passthrough;
use super::{negotiate, FuseAdapter};
use crate::fs::{KernelNotifier, Served};
use crate::journal::{Record, RestartJournal};
use crate::mount_config::MountConfig;

/// The kernel's mount options and the session's configuration for a mount of `cfg`, whose
/// table is described as `table` (the default file-system name).
fn fuser_config(cfg: &MountConfig, table: &str) -> fuser::Config {
    let mut opts = vec![
        MountOption::RO,
        MountOption::NoDev,
        MountOption::NoSuid,
        MountOption::FSName(cfg.fsname_for(table)),
        MountOption::Subtype("hudifs".into()),
    ];
    if cfg.noexec {
        opts.push(MountOption::NoExec);
    }
    if cfg.kernel_checks_permissions() {
        opts.push(MountOption::DefaultPermissions);
    }
    let mut config = fuser::Config::default();
    config.mount_options = opts;
    config.acl = if cfg.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(cfg.threads);
    config.clone_fd = true;
    config
}

/// Why a mount failed: the kernel said no (the message names the mount point and what to
/// check).
#[derive(Debug)]
pub struct MountFailure(pub String);

/// A live FUSE session: serve it with [`Mounted::run`].
pub struct Mounted {
    session: fuser::Session<FuseAdapter>,
}

/// Unmounts a live session from another thread (a signal handler).
pub struct Unmounter(fuser::SessionUnmounter);

impl Unmounter {
    pub fn unmount(&mut self) -> std::io::Result<()> {
        self.0.unmount()
    }
}

/// The session's notifier as the file system's sink for invalidations.
struct Notifier(fuser::Notifier);

impl KernelNotifier for Notifier {
    fn inval_entry(&self, parent: u64, name: &str) {
        let _ = self.0.inval_entry(INodeNo(parent), OsStr::new(name));
    }
    fn inval_inode(&self, ino: u64) {
        let _ = self.0.inval_inode(INodeNo(ino), 0, 0);
    }
}

/// Mount `fs` (a table or a lake, described as `table`) as `cfg` says.
pub fn mount(fs: Arc<dyn Served>, cfg: &MountConfig, table: &str) -> Result<Mounted, MountFailure> {
    let config = fuser_config(cfg, table);
    let notifier = Arc::new(OnceLock::new());
    let session = fuser::Session::new(
        FuseAdapter::new(
            fs,
            Passthrough::new(cfg.wants_passthrough(), None),
            notifier.clone(),
        ),
        &cfg.mountpoint,
        &config,
    )
    .map_err(|e| MountFailure(mount_error(&cfg.mountpoint, e)))?;
    let _ = notifier.set(session.notifier());
    Ok(Mounted { session })
}

impl Mounted {
    /// Where the file system sends invalidations of the kernel's caches.
    pub fn notifier(&self) -> Arc<dyn KernelNotifier> {
        Arc::new(Notifier(self.session.notifier()))
    }

    pub fn unmounter(&mut self) -> Unmounter {
        Unmounter(self.session.unmount_callable())
    }

    /// Serve requests until unmounted.
    pub fn run(self) -> std::io::Result<()> {
        self.session.run()
    }
}

fn mount_error(mp: &Path, e: std::io::Error) -> String {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            " (mounting needs root, or fusermount3 from the fuse3 package)"
        }
        Some(libc::ENOENT) if !Path::new("/dev/fuse").exists() => {
            " (/dev/fuse is missing: load the fuse module with `modprobe fuse`)"
        }
        _ => "",
    };
    format!("cannot mount at {}: {e}{hint}", mp.display())
}

/// Answers the kernel's INIT for a keeper: what every mount asks for (`negotiate`), nothing else.
struct Handshake {
    passthrough: bool,
    granted: Arc<AtomicBool>,
    /// Whether the kernel can send again what a dead daemon had read (`FUSE_HAS_RESEND`).
    resend: Arc<AtomicBool>,
}

impl Filesystem for Handshake {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> std::io::Result<()> {
        self.resend.store(
            config.capabilities().contains(InitFlags::FUSE_HAS_RESEND),
            Ordering::SeqCst,
        );
        self.granted
            .store(negotiate(config, self.passthrough), Ordering::SeqCst);
        Ok(())
    }
}

/// A mount held by a keeper: mounted, INIT answered, the connection's descriptor kept open for
/// as long as this lives. Dropping it unmounts.
pub struct Kept {
    session: fuser::Session<Handshake>,
    passthrough: bool,
    resend: bool,
}

impl Kept {
    /// A descriptor of the connection for a serving daemon (the same open file: requests that
    /// a dying daemon read stay with the connection, to be sent again).
    pub fn fd(&self) -> std::io::Result<OwnedFd> {
        self.session.as_fd().try_clone_to_owned()
    }

    /// Whether the kernel granted passthrough.
    pub fn passthrough(&self) -> bool {
        self.passthrough
    }

    /// Whether the kernel resends what a dead daemon had read (Linux 6.9+): without it, callers
    /// waiting on a dead daemon's requests would wait for good under a new daemon.
    pub fn can_resend(&self) -> bool {
        self.resend
    }

    pub fn unmounter(&mut self) -> Unmounter {
        Unmounter(self.session.unmount_callable())
    }

    /// The mount was unmounted from outside: let go of it without unmounting by path (a new
    /// mount at the same path, made right after, stays).
    pub fn ended(mut self) {
        self.session.forget_mount();
    }
}

/// Mount as `cfg` says (the table described as `table`) for a keeper and answer the kernel's
/// INIT.
pub fn mount_kept(cfg: &MountConfig, table: &str) -> Result<Kept, MountFailure> {
    let config = fuser_config(cfg, table);
    let granted = Arc::new(AtomicBool::new(false));
    let resend = Arc::new(AtomicBool::new(false));
    let hs = Handshake {
        passthrough: cfg.wants_passthrough(),
        granted: granted.clone(),
        resend: resend.clone(),
    };
    let session = fuser::Session::new(hs, &cfg.mountpoint, &config)
        .map_err(|e| MountFailure(mount_error(&cfg.mountpoint, e)))?;
    Ok(Kept {
        session,
        passthrough: granted.load(Ordering::SeqCst),
        resend: resend.load(Ordering::SeqCst),
    })
}

/// `FUSE_NOTIFY_RESEND` (Linux 6.9): the kernel queues again every request a daemon read but
/// did not answer.
const FUSE_NOTIFY_RESEND: i32 = 7;

/// Serve the kept mount of `cfg` (the table described as `table`) whose connection is `fd` (a
/// keeper's, see [`Kept::fd`]), as INIT decided (`passthrough`: granted). `journal` is the mount's restart journal; a daemon that
/// takes over from one that died passes its `inherited` records: it takes over the backing
/// files they name and asks the kernel to send again what the dead one had read but not
/// answered.
pub fn serve_kept(
    fs: Arc<dyn Served>,
    fd: OwnedFd,
    cfg: &MountConfig,
    table: &str,
    passthrough: bool,
    journal: Arc<RestartJournal>,
    inherited: Option<&[Record]>,
) -> Mounted {
    let mut config = fuser_config(cfg, table);
    // Every thread reads the keeper's open file. A cloned descriptor (FUSE_DEV_IOC_CLONE) is a
    // file of this process: the kernel fails what was read through it when this process dies,
    // instead of keeping it to send again.
    config.clone_fd = false;
    let pass = Passthrough::new(passthrough, Some(journal));
    if let Some(records) = inherited {
        pass.resume(records, fd.as_raw_fd());
    }
    let raw = fd.as_raw_fd();
    let notifier = Arc::new(OnceLock::new());
    let session = fuser::Session::from_fd_initialized(
        FuseAdapter::new(fs, pass, notifier.clone()),
        fd,
        config.acl,
        config,
    );
    let _ = notifier.set(session.notifier());
    if inherited.is_some() {
        let mut msg = [0u8; 16];
        msg[0..4].copy_from_slice(&16u32.to_le_bytes());
        msg[4..8].copy_from_slice(&FUSE_NOTIFY_RESEND.to_le_bytes());
        // SAFETY: a write of a local buffer to the session's open descriptor.
        let n = unsafe { libc::write(raw, msg.as_ptr().cast(), msg.len()) };
        if n != msg.len() as isize {
            log::warn!(
                "the kernel did not take FUSE_NOTIFY_RESEND ({}): requests the previous daemon \
                 had read fail",
                std::io::Error::last_os_error()
            );
        }
    }
    Mounted { session }
}
