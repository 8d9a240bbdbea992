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
use crate::fs::{JournalTag, KernelNotifier, RestartJournal, Served};

/// A mount's options, in the daemon's terms.
#[derive(Debug, Clone)]
pub struct MountConfig {
    /// What `mount` shows as the source (`hudifs:<table>` unless `-o fsname=` says otherwise).
    pub fsname: String,
    /// `-o` options as given (comma-separated groups).
    pub options: Vec<String>,
    pub allow_other: bool,
    /// FUSE worker threads.
    pub threads: usize,
    /// Ask the kernel for passthrough of table files.
    pub passthrough: bool,
}

impl MountConfig {
    /// The kernel's mount options and the session's configuration.
    fn fuser_config(&self) -> Result<fuser::Config, String> {
        let mut opts = vec![
            MountOption::RO,
            MountOption::NoDev,
            MountOption::NoSuid,
            MountOption::FSName(self.fsname.clone()),
            MountOption::Subtype("hudifs".into()),
        ];
        let mut allow_other = self.allow_other;
        for group in &self.options {
            for o in group.split(',').map(str::trim).filter(|o| !o.is_empty()) {
                let opt = match o {
                    "rw" => return Err("-o rw: hudifs mounts are always read-only".into()),
                    "ro" => MountOption::RO,
                    "default_permissions" => MountOption::DefaultPermissions,
                    "noexec" => MountOption::NoExec,
                    "allow_other" => {
                        allow_other = true;
                        continue;
                    }
                    o => match o.split_once('=') {
                        Some(("fsname", v)) => {
                            // Replaces the default: the mount takes the first name given.
                            opts.retain(|o| !matches!(o, MountOption::FSName(_)));
                            MountOption::FSName(v.to_string())
                        }
                        _ => MountOption::CUSTOM(o.to_string()),
                    },
                };
                if !opts.contains(&opt) {
                    opts.push(opt);
                }
            }
        }
        let mut cfg = fuser::Config::default();
        cfg.mount_options = opts;
        cfg.acl = if allow_other {
            SessionACL::All
        } else {
            SessionACL::Owner
        };
        cfg.n_threads = Some(self.threads);
        cfg.clone_fd = true;
        Ok(cfg)
    }
}

/// Why a mount failed: bad options, or the kernel said no.
#[derive(Debug)]
pub enum MountFailure {
    Usage(String),
    Kernel(String),
}

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

/// Mount `fs` (a table or a lake) at `mountpoint`.
pub fn mount(
    fs: Arc<dyn Served>,
    mountpoint: &Path,
    cfg: &MountConfig,
) -> Result<Mounted, MountFailure> {
    let config = cfg.fuser_config().map_err(MountFailure::Usage)?;
    let notifier = Arc::new(OnceLock::new());
    let session = fuser::Session::new(
        FuseAdapter::new(
            fs,
            Passthrough::new(cfg.passthrough, None),
            notifier.clone(),
        ),
        mountpoint,
        &config,
    )
    .map_err(|e| MountFailure::Kernel(mount_error(mountpoint, e)))?;
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
}

/// Mount at `mountpoint` for a keeper and answer the kernel's INIT.
pub fn mount_kept(mountpoint: &Path, cfg: &MountConfig) -> Result<Kept, MountFailure> {
    let config = cfg.fuser_config().map_err(MountFailure::Usage)?;
    let granted = Arc::new(AtomicBool::new(false));
    let resend = Arc::new(AtomicBool::new(false));
    let hs = Handshake {
        passthrough: cfg.passthrough,
        granted: granted.clone(),
        resend: resend.clone(),
    };
    let session = fuser::Session::new(hs, mountpoint, &config)
        .map_err(|e| MountFailure::Kernel(mount_error(mountpoint, e)))?;
    Ok(Kept {
        session,
        passthrough: granted.load(Ordering::SeqCst),
        resend: resend.load(Ordering::SeqCst),
    })
}

/// `FUSE_NOTIFY_RESEND` (Linux 6.9): the kernel queues again every request a daemon read but
/// did not answer.
const FUSE_NOTIFY_RESEND: i32 = 7;

/// Serve the kept mount whose connection is `fd` (a keeper's, see [`Kept::fd`]), as INIT
/// decided (`passthrough`: granted). `journal` is the mount's restart journal; a daemon that
/// takes over from one that died passes its `inherited` records: it takes over the backing
/// files they name and asks the kernel to send again what the dead one had read but not
/// answered.
pub fn serve_kept(
    fs: Arc<dyn Served>,
    fd: OwnedFd,
    cfg: &MountConfig,
    passthrough: bool,
    journal: Arc<RestartJournal>,
    inherited: Option<&[(JournalTag, Vec<u8>)]>,
) -> Result<Mounted, MountFailure> {
    let mut config = cfg.fuser_config().map_err(MountFailure::Usage)?;
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
    Ok(Mounted { session })
}
