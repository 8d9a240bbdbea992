//! `hudifs mount` and `hudifs umount`: checks before mounting, the foreground session with its
//! signal handling and timeline polling, and the background launch that returns only once the
//! mount is live.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hudifs_storage::{LocalStore, Storage, TablePath};

use crate::cli::MountArgs;
use crate::error::{Error, Result};
use crate::follow::Follower;
use crate::fs::{FsOptions, HudiFs, Served};
use crate::fuse::{MountConfig, MountFailure};
use crate::lake::{LakeFs, LakeOptions};

/// Environment variable through which a background launch tells the daemon which fd to report
/// readiness on.
const READY_FD_ENV: &str = "HUDIFS_READY_FD";

/// Set for a daemon started by a background launch.
const DAEMON_ENV: &str = "HUDIFS_DAEMON";

/// Where a background daemon's log goes, as the launcher decided: the log file, or `journal`.
const LOG_ENV: &str = "HUDIFS_LOG";

/// Where a background daemon logs: one file per mount point, under the temp directory, so that
/// remounting the same place reuses (truncates) the same file.
pub fn log_path(mountpoint: &Path) -> std::path::PathBuf {
    let abs = std::path::absolute(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    let name: String = abs
        .to_string_lossy()
        .trim_start_matches('/')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir()
        .join(format!("hudifs-{uid}"))
        .join(format!("{name}.log"))
}

/// Whether `path` is a mount point (listed in /proc/self/mountinfo).
pub fn is_mount_point(path: &Path) -> bool {
    let Ok(canon) = path.canonicalize().or_else(|_| std::path::absolute(path)) else {
        return false;
    };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    let target = canon.to_string_lossy();
    info.lines().any(|l| {
        l.split(' ')
            .nth(4)
            .map(unescape_mountinfo)
            .is_some_and(|p| p == target)
    })
}

fn unescape_mountinfo(s: &str) -> String {
    s.replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Refuse a mount point that is missing, not a directory, not empty or already mounted.
fn check_mountpoint(mp: &Path) -> Result<()> {
    let md = std::fs::metadata(mp).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::Mount(format!(
            "mount point {} does not exist: create an empty directory first",
            mp.display()
        )),
        std::io::ErrorKind::NotConnected => Error::Mount(format!(
            "{} is a dead hudifs mount: run `hudifs umount {}` first",
            mp.display(),
            mp.display()
        )),
        _ => Error::io(mp.display().to_string(), e),
    })?;
    if !md.is_dir() {
        return Err(Error::Mount(format!(
            "mount point {} is not a directory",
            mp.display()
        )));
    }
    if is_mount_point(mp) {
        return Err(Error::Mount(format!(
            "{} is already a mount point: unmount it first",
            mp.display()
        )));
    }
    let mut entries = std::fs::read_dir(mp).map_err(|e| Error::io(mp.display().to_string(), e))?;
    if entries.next().is_some() {
        return Err(Error::Mount(format!(
            "mount point {} is not empty: mount on an empty directory",
            mp.display()
        )));
    }
    Ok(())
}

/// `hudifs mount`.
pub fn mount(args: &MountArgs) -> Result<()> {
    // `-o` options become flags; what is left of them goes to the kernel (options.rs).
    let resolved = crate::options::resolve(args)?;
    let args = &resolved;
    if args.threads == 0 {
        return Err(Error::Usage("--threads must be at least 1".into()));
    }
    if let Some(z) = &args.timezone {
        crate::cli::zone(Some(z), None)?;
    }
    // Refuse a location that is neither a table nor a lake before touching the mount point.
    if args.foreground {
        // Before the table's storage is opened (and reused by the mount): a store client's
        // runtime threads must inherit the mask too.
        block_signals();
    }
    let table = table_or_lake(args)?;
    check_mountpoint(&args.mountpoint)?;
    if args.foreground {
        run_foreground(args, table)
    } else {
        launch_background(args)
    }
}

/// The storage and configuration of `args.table` when it is a table (opened, checked and read:
/// the mount reuses them, on a store a client and three requests fewer), `None` when it is a lake
/// (not a table, but tables below it within `--lake-depth`); an error when it is neither, or a
/// table that cannot be read.
fn table_or_lake(args: &MountArgs) -> Result<Option<Table>> {
    let not_a_table = match open_store(args)
        .and_then(|s| Ok(hudifs_core::table::TableConfig::load(&*s).map(|cfg| (s, cfg))?))
    {
        Ok(t) => return Ok(Some(t)),
        Err(e @ Error::Table(hudifs_core::error::Error::NotATable(_))) => e,
        Err(e) => return Err(e),
    };
    let store = crate::store::open_root(&args.table, &args.store)?;
    match crate::lake::discover(&*store, &TablePath::root(), args.lake_depth) {
        Ok(found) if !found.is_empty() => Ok(None),
        _ => Err(not_a_table),
    }
}

/// A table's storage and configuration, as read to tell it from a lake.
type Table = (Arc<dyn Storage>, hudifs_core::table::TableConfig);

/// What a daemon serves: one table, or a lake of them.
enum Serving {
    Table(Arc<HudiFs>),
    Lake(Arc<LakeFs>),
}

fn fs_options(args: &MountArgs) -> Result<FsOptions> {
    Ok(FsOptions {
        read_optimized: args.read_optimized,
        zone: match &args.timezone {
            Some(z) => Some(crate::cli::zone(Some(z), None)?),
            None => None,
        },
        merge: crate::fs::MergeSettings {
            cache_dir: args.merge_cache.clone(),
            cache_bytes: args.merge_cache_size,
            memory_cap: args.merge_memory,
        },
        access: args.access(),
        listing: args.store.listing,
    })
}

/// The storage of the table of `args`.
fn open_store(args: &MountArgs) -> Result<Arc<dyn Storage>> {
    let cache = args.cache.as_deref().map(|d| (d, args.max_cache_size));
    crate::store::open_store_cached(&args.table, &args.store, cache)
}

fn mount_config(args: &MountArgs, table: &str) -> MountConfig {
    let allow_other = args.allow_other
        || args
            .options
            .iter()
            .any(|g| g.split(',').any(|o| o.trim() == "allow_other"));
    let mut options = args.options.clone();
    if args.kernel_checks_permissions() {
        options.push("default_permissions".into());
    }
    MountConfig {
        fsname: format!("hudifs:{table}"),
        options,
        allow_other,
        threads: args.threads,
        // Remote files have no descriptor to pass through: read through the daemon.
        passthrough: !args.no_passthrough && !crate::store::is_remote(&args.table),
    }
}

fn block_signals() -> libc::sigset_t {
    // SAFETY: plain libc signal-set manipulation on a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Free large buffers straight back to the system. A read from a store holds its bytes in
/// buffers of up to 8 MiB, many a second, across the runtime's threads; after the first such
/// free glibc raises its mmap threshold above them and serves later ones from per-thread arenas
/// that keep what they once held. Measured with `scripts/bench` figure 7 (`s3read-memory`): a
/// fresh daemon reading 8 files at once grew by 398 to 469 MiB against a prefetch budget of
/// 256 MiB, and by 244 to 310 MiB with the threshold fixed at 1 MiB.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn return_large_buffers_at_free() {
    // SAFETY: mallopt only sets an allocator parameter; glibc serialises it with allocation.
    if unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) } != 1 {
        log::debug!("mallopt(M_MMAP_THRESHOLD) refused");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn return_large_buffers_at_free() {}

/// Mount and serve until unmounted or signalled.
fn run_foreground(args: &MountArgs, table: Option<Table>) -> Result<()> {
    if crate::store::is_remote(&args.table) {
        return_large_buffers_at_free();
    }
    // Signals are handled by one thread; every thread started from here inherits the mask.
    let sigset = block_signals();
    let poll = Duration::from_millis(args.poll_interval.max(10));
    let serving = if let Some((store, cfg)) = table {
        Serving::Table(Arc::new(HudiFs::with_config(
            store,
            cfg,
            fs_options(args)?,
        )?))
    } else {
        let options = LakeOptions {
            depth: args.lake_depth,
            poll_interval: poll,
            follow: true,
        };
        let root = crate::store::open_root(&args.table, &args.store)?;
        Serving::Lake(Arc::new(LakeFs::open(root, fs_options(args)?, options)?))
    };
    let (served, table, local): (Arc<dyn Served>, String, Option<LocalStore>) = match &serving {
        Serving::Table(fs) => (
            fs.clone(),
            fs.store().describe(&Default::default()),
            fs.store().local().cloned(),
        ),
        Serving::Lake(l) => (l.clone(), l.describe(), l.local().cloned()),
    };
    // Resolved before the mount: once it is live, a stat of it from here would wait for this
    // very daemon to answer.
    let mount_path = args.mountpoint.canonicalize().ok();
    let mut session = crate::fuse::mount(served, &args.mountpoint, &mount_config(args, &table))
        .map_err(|e| match e {
            MountFailure::Usage(m) => Error::Usage(m),
            MountFailure::Kernel(m) => Error::Mount(m),
        })?;
    if let Some(mp) = &mount_path {
        match &local {
            Some(local) => match_read_ahead(local, mp),
            None => set_store_read_ahead(mp),
        }
    }
    match &serving {
        Serving::Table(fs) => log::info!(
            "mounted {table} at {} (latest instant {})",
            args.mountpoint.display(),
            fs.latest_instant().unwrap_or_else(|| "none".into())
        ),
        Serving::Lake(l) => {
            l.set_notifier(session.notifier());
            log::info!(
                "mounted the lake {table} at {} ({} tables, each read on first use)",
                args.mountpoint.display(),
                l.tables().len()
            );
        }
    }
    // Beside the log, for `hudifs status`, before anyone hears the mount is live; removed when
    // this function returns.
    let log = log_path(&args.mountpoint);
    let _state = crate::status::State {
        mountpoint: mount_path
            .clone()
            .unwrap_or_else(|| args.mountpoint.clone()),
        table: table.clone(),
        lake: matches!(serving, Serving::Lake(_)),
        pid: std::process::id(),
        log: if std::env::var_os(DAEMON_ENV).is_some() {
            std::env::var(LOG_ENV).unwrap_or_else(|_| log.display().to_string())
        } else if crate::notify::stderr_is_journal() {
            "journal".into()
        } else {
            "stderr".into()
        },
    }
    .write(&crate::status::state_path(&log))
    .map_err(|e| log::warn!("no state file for hudifs status: {e}"))
    .ok();
    report_ready();
    crate::notify::ready(
        std::process::id(),
        &format!("mounted {table} at {}", args.mountpoint.display()),
    );

    let stop = Arc::new(AtomicBool::new(false));
    let served = Arc::new(AtomicBool::new(false));
    let mut unmounter = session.unmounter();
    let mp = mount_path
        .clone()
        .unwrap_or_else(|| args.mountpoint.clone());
    let stop_sig = stop.clone();
    let served_sig = served.clone();
    let state_file = crate::status::state_path(&log);
    std::thread::Builder::new()
        .name("hudifs-signals".into())
        .spawn(move || {
            let mut sig: libc::c_int = 0;
            // SAFETY: `sigset` holds the signals blocked above; `sig` is a valid out-pointer.
            unsafe { libc::sigwait(&sigset, &mut sig) };
            log::info!("signal {sig}: unmounting {}", mp.display());
            crate::notify::stopping();
            stop_sig.store(true, Ordering::SeqCst);
            if let Err(e) = unmounter.unmount() {
                log::info!("unmount of {} failed: {e}", mp.display());
            }
            if unmount_busy(&mp) {
                // Detached, but a process still holds it: the session would serve it for as
                // long as that lasts. Stopping means stopping, as for libfuse daemons: exit,
                // and the kernel fails what is left with ENOTCONN.
                let deadline = std::time::Instant::now() + STOP_GRACE;
                while !served_sig.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if !served_sig.load(Ordering::SeqCst) {
                    let _ = std::fs::remove_file(&state_file);
                    log::info!("exiting with the detached mount still in use");
                    std::process::exit(0);
                }
            }
        })
        .map_err(|e| Error::io("signal thread", e))?;

    let stop_follow = stop.clone();
    match &serving {
        Serving::Table(fs) => {
            let fs_follow = fs.clone();
            let notifier = session.notifier();
            std::thread::Builder::new()
                .name("hudifs-follow".into())
                .spawn(move || Follower::new().run(fs_follow, Some(notifier), poll, stop_follow))
        }
        // Each table is followed from its first use on (lake_fs.rs); this thread finds tables
        // that come and go.
        Serving::Lake(l) => {
            let lake = l.clone();
            std::thread::Builder::new()
                .name("hudifs-lake".into())
                .spawn(move || lake.follow_lake(&stop_follow))
        }
    }
    .map_err(|e| Error::io("follow thread", e))?;

    let result = session.run();
    served.store(true, Ordering::SeqCst);
    stop.store(true, Ordering::SeqCst);
    if let Serving::Lake(l) = &serving {
        l.stop();
    }
    // A background daemon's log that stayed empty is not worth keeping.
    let log = log_path(&args.mountpoint);
    if std::env::var_os(DAEMON_ENV).is_some() && std::fs::metadata(&log).is_ok_and(|m| m.len() == 0)
    {
        let _ = std::fs::remove_file(&log);
    }
    result.map_err(|e| Error::io(args.mountpoint.display().to_string(), e))
}

/// How long a stopping daemon waits for its session to end once the mount is detached.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// After a failed unmount on a stop signal: the mount at `mp` is busy (a process has its working
/// directory or a file in it, or a path lookup such as a `hudifs status` is passing through).
/// Retry for a moment, since a passing lookup ends at once, then detach it lazily as libfuse
/// daemons do, so that a stop never leaves the daemon running. Whether it was still in use when
/// detached (false: unmounted, or not mounted any more).
fn unmount_busy(mp: &Path) -> bool {
    if !is_mount_point(mp) {
        return false;
    }
    let Ok(c) = std::ffi::CString::new(mp.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    let deadline = std::time::Instant::now() + STOP_GRACE;
    loop {
        // SAFETY: `c` is a valid C string.
        if unsafe { libc::umount2(c.as_ptr(), 0) } == 0 {
            return false;
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EBUSY) {
            log::warn!("unmount of {} failed: {err}", mp.display());
            break;
        }
        if std::time::Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    log::warn!(
        "{} is busy (see `fuser -m {}`): detaching it; what still uses it gets \
         \"Transport endpoint is not connected\"",
        mp.display(),
        mp.display()
    );
    // SAFETY: `c` is a valid C string.
    if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } != 0 {
        log::warn!(
            "detaching {} failed: {}",
            mp.display(),
            std::io::Error::last_os_error()
        );
    }
    true
}

/// The kernel reads ahead only 128 KiB on a new FUSE mount (its INIT offers no more), while the
/// disk under the table typically reads ahead megabytes: reads through the daemon (no
/// passthrough) then run at a fraction of the disk's speed when cold. Give the mount the read-ahead
/// of the table's device (at least 1 MiB, at most 16 MiB). Needs root; otherwise logged and left.
fn match_read_ahead(table: &LocalStore, mountpoint: &Path) {
    let Some(dev) = table.device() else {
        return;
    };
    let table_dev = format!("{}:{}", libc::major(dev), libc::minor(dev));
    let table_kb = read_kb(format!("/sys/class/bdi/{table_dev}/read_ahead_kb"))
        .or_else(|| read_kb(format!("/sys/dev/block/{table_dev}/queue/read_ahead_kb")))
        .or_else(|| read_kb(format!("/sys/dev/block/{table_dev}/../queue/read_ahead_kb")))
        .unwrap_or(0);
    let want = table_kb.clamp(1024, 16 * 1024);
    raise_read_ahead(mountpoint, want, &format!("table device: {table_kb} KiB"));
}

/// The read-ahead of a mount of a table on an object store (docs/SEMANTICS.md §9). With the
/// kernel's 128 KiB, a read larger than that is "oversized": the kernel splits it into 128 KiB
/// requests sent a few at a time, so a 1 MiB column chunk costs several round trips to the store.
/// With a read-ahead above the largest read, the kernel sends a random read as it is (in
/// requests of up to 1 MiB, FUSE's largest) and reads ahead only of sequential readers, several
/// requests in flight; the prefetcher (`hudifs-objstore`'s `prefetch.rs`, whose reach matches
/// this) decides what is fetched from the store.
const STORE_READ_AHEAD_KB: u64 = 16 * 1024;

fn set_store_read_ahead(mountpoint: &Path) {
    raise_read_ahead(mountpoint, STORE_READ_AHEAD_KB, "table on an object store");
}

fn read_kb(p: String) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Raise the read-ahead of the FUSE mount at `mountpoint` to `want` KiB (its bdi's
/// `read_ahead_kb`). Needs root; otherwise logged and left.
fn raise_read_ahead(mountpoint: &Path, want: u64, why: &str) {
    // The mount's device from the mount table, not from a stat of the mount point, which would
    // wait for this daemon (it does not serve requests yet).
    let target = mountpoint.to_string_lossy();
    let Some(mount_dev) = std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .rfind(|l| l.split(' ').nth(4).map(unescape_mountinfo).as_deref() == Some(&target))
                .and_then(|l| l.split(' ').nth(2).map(str::to_string))
        })
    else {
        return;
    };
    let knob = format!("/sys/class/bdi/{mount_dev}/read_ahead_kb");
    if read_kb(knob.clone()).is_some_and(|now| now >= want) {
        return;
    }
    match std::fs::write(&knob, format!("{want}\n")) {
        Ok(()) => log::info!("read-ahead of the mount set to {want} KiB ({why})"),
        Err(e) => log::info!(
            "could not raise the mount's read-ahead to {want} KiB ({knob}: {e}); reads through \
             the daemon read ahead 128 KiB"
        ),
    }
}

/// Tell a waiting background launcher that the mount is live.
fn report_ready() {
    let Some(fd) = std::env::var(READY_FD_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    // SAFETY: the launcher passed us the write end of its pipe under this number.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut f = std::fs::File::from(owned);
    let _ = std::io::Write::write_all(&mut f, b"R");
    std::env::remove_var(READY_FD_ENV);
    // SAFETY: redirect stdio of the detached daemon to /dev/null now that it is live.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
}

/// Start the daemon in the background and wait until the mount is live or the daemon failed.
fn launch_background(args: &MountArgs) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| Error::io("current executable", e))?;
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid two-element array for pipe2.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::io("pipe", std::io::Error::last_os_error()));
    }
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let log_path = log_path(&args.mountpoint);
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    }
    // Under systemd (a .mount unit runs mount(8), which runs us) standard error is the journal:
    // the daemon keeps it rather than writing a file nobody reads.
    let journal = crate::notify::stderr_is_journal();
    let log = if journal {
        std::process::Stdio::inherit()
    } else {
        std::fs::File::create(&log_path)
            .map_err(|e| Error::io(log_path.display().to_string(), e))?
            .into()
    };
    let log_name = if journal {
        "journal".to_string()
    } else {
        log_path.display().to_string()
    };

    let child_args = daemon_argv(args);
    let wfd = write_end.as_raw_fd();
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&child_args)
        .env(READY_FD_ENV, wfd.to_string())
        .env(DAEMON_ENV, "1")
        .env(LOG_ENV, &log_name)
        // The launcher tells systemd, naming the daemon as the main process.
        .env_remove("NOTIFY_SOCKET")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            libc::fcntl(wfd, libc::F_SETFD, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| Error::io("spawn daemon", e))?;
    drop(write_end);
    let mut reader = std::fs::File::from(read_end);
    let mut buf = [0u8; 1];
    let got = reader.read(&mut buf).unwrap_or(0);
    if got == 1 && buf[0] == b'R' {
        println!(
            "hudifs: mounted {} at {} (daemon pid {}, log {})",
            args.table.display(),
            args.mountpoint.display(),
            child.id(),
            log_name
        );
        crate::notify::ready(
            child.id(),
            &format!(
                "mounted {} at {}",
                args.table.display(),
                args.mountpoint.display()
            ),
        );
        return Ok(());
    }
    let status = child.wait().ok();
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let _ = std::fs::remove_file(&log_path);
    let msg = text
        .lines()
        .rev()
        .find(|l| l.starts_with("hudifs: "))
        .map(|l| l.trim_start_matches("hudifs: ").to_string())
        .unwrap_or_else(|| {
            if journal {
                format!(
                    "the daemon exited ({status:?}) before the mount was live (see the journal)"
                )
            } else {
                format!("the daemon exited ({status:?}) before the mount was live: {text}")
            }
        });
    Err(Error::Mount(msg))
}

/// `hudifs umount`: unmount, also when the daemon died ("Transport endpoint is not connected").
pub fn umount(mountpoint: &Path) -> Result<()> {
    let abs = std::path::absolute(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    if !is_mount_point(&abs) {
        return Err(Error::Mount(format!("{} is not mounted", abs.display())));
    }
    let c = std::ffi::CString::new(abs.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Usage("mount point contains a NUL byte".into()))?;
    // SAFETY: `c` is a valid C string.
    let rc = unsafe { libc::umount2(c.as_ptr(), 0) };
    // A daemon that died left its state file behind (a live one removes its own on exit).
    let forget = || {
        let _ = std::fs::remove_file(crate::status::state_path(&log_path(&abs)));
    };
    if rc == 0 {
        forget();
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EBUSY) => Err(Error::io(
            abs.display().to_string(),
            std::io::Error::new(
                err.kind(),
                "busy: a process still uses the mount (see `fuser -m`), close it and retry",
            ),
        )),
        Some(libc::EPERM) => fusermount_unmount(&abs),
        _ => {
            // A dead daemon's mount: detach it.
            // SAFETY: `c` is a valid C string.
            if unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) } == 0 {
                forget();
                Ok(())
            } else {
                Err(Error::io(abs.display().to_string(), err))
            }
        }
    }
}

fn fusermount_unmount(mp: &Path) -> Result<()> {
    for bin in ["fusermount3", "fusermount"] {
        if let Ok(status) = std::process::Command::new(bin).arg("-u").arg(mp).status() {
            if status.success() {
                return Ok(());
            }
        }
    }
    Err(Error::Mount(format!(
        "cannot unmount {}: permission denied and no working fusermount3",
        mp.display()
    )))
}

/// The command line of the daemon a background launch starts: `mount -f` with every option of
/// `args` (paths made absolute: the daemon does not share the caller's directory). A test parses
/// it back and checks nothing is lost.
fn daemon_argv(args: &MountArgs) -> Vec<OsString> {
    let mut child_args: Vec<OsString> = vec!["mount".into(), "-f".into()];
    child_args.push(args.table.clone().into());
    child_args.push(
        std::path::absolute(&args.mountpoint)
            .unwrap_or_else(|_| args.mountpoint.clone())
            .into(),
    );
    if args.read_optimized {
        child_args.push("--read-optimized".into());
    }
    if args.allow_other {
        child_args.push("--allow-other".into());
    }
    if args.no_passthrough {
        child_args.push("--no-passthrough".into());
    }
    if let Some(z) = &args.timezone {
        child_args.push("--timezone".into());
        child_args.push(z.into());
    }
    child_args.push(format!("--poll-interval={}", args.poll_interval).into());
    child_args.push(format!("--threads={}", args.threads).into());
    child_args.push(format!("--lake-depth={}", args.lake_depth).into());
    if let Some(dir) = &args.merge_cache {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        let mut a = OsString::from("--merge-cache=");
        a.push(dir);
        child_args.push(a);
    }
    child_args.push(format!("--merge-cache-size={}", args.merge_cache_size).into());
    child_args.push(format!("--merge-memory={}", args.merge_memory).into());
    if let Some(dir) = &args.cache {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        let mut a = OsString::from("--cache=");
        a.push(dir);
        child_args.push(a);
    }
    child_args.push(format!("--max-cache-size={}", args.max_cache_size).into());
    for a in args.store.to_args() {
        child_args.push(a.into());
    }
    for o in &args.options {
        child_args.push(format!("-o{o}").into());
    }
    if let Some(uid) = args.uid {
        child_args.push(format!("--uid={uid}").into());
    }
    if let Some(gid) = args.gid {
        child_args.push(format!("--gid={gid}").into());
    }
    if let Some(mode) = args.file_mode {
        child_args.push(format!("--file-mode={mode:o}").into());
    }
    if let Some(mode) = args.dir_mode {
        child_args.push(format!("--dir-mode={mode:o}").into());
    }
    if args.default_permissions {
        child_args.push("--default-permissions".into());
    }
    child_args
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(argv: &[OsString]) -> MountArgs {
        let mut full = vec![OsString::from("hudifs")];
        full.extend(argv.iter().cloned());
        match Cli::try_parse_from(full).unwrap().command {
            Command::Mount(m) => m,
            c => panic!("not a mount: {c:?}"),
        }
    }

    #[test]
    fn the_daemon_gets_every_option_of_a_background_launch() {
        let given = parse(
            &[
                "mount",
                "/t",
                "/m",
                "--read-optimized",
                "--allow-other",
                "--no-passthrough",
                "--timezone",
                "UTC",
                "--poll-interval",
                "250",
                "--threads",
                "7",
                "--lake-depth",
                "2",
                "--merge-cache",
                "/c",
                "--merge-cache-size",
                "3G",
                "--merge-memory",
                "64M",
                "-o",
                "fsname=x",
                "--uid",
                "12",
                "--gid",
                "34",
                "--file-mode",
                "0440",
                "--dir-mode",
                "0550",
                "--default-permissions",
                "--endpoint-url",
                "http://127.0.0.1:9000",
                "--region",
                "eu-west-3",
                "--force-path-style",
                "--no-sign-request",
                "--profile",
                "dev",
                "--allow-http",
            ]
            .map(OsString::from),
        );
        let mut got = parse(&daemon_argv(&given));
        assert!(got.foreground);
        got.foreground = given.foreground;
        assert_eq!(format!("{got:?}"), format!("{given:?}"));
    }
}
