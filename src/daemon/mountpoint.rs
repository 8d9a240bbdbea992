//! The mount point: checks before mounting, whether a path is mounted, unmounting (also a busy
//! or dead mount), and the read-ahead the kernel uses for the mount.

use std::path::Path;
use std::time::Duration;

use hudifs_storage::LocalStore;

use crate::error::{Error, Result};
use crate::status::log_path;
use crate::sys::mount::{unmount, Unmount};
use crate::sys::mountinfo::is_mount_point;

/// Refuse a mount point that is missing, not a directory, not empty or already mounted.
pub(super) fn check_mountpoint(mp: &Path) -> Result<()> {
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

/// How long a stopping daemon waits for its session to end once the mount is detached.
pub(super) const STOP_GRACE: Duration = Duration::from_secs(2);

/// After a failed unmount on a stop signal: the mount at `mp` is busy (a process has its working
/// directory or a file in it, or a path lookup such as a `hudifs status` is passing through).
/// Retry for a moment, since a passing lookup ends at once, then detach it lazily as libfuse
/// daemons do, so that a stop never leaves the daemon running. Whether it was still in use when
/// detached (false: unmounted, or not mounted any more).
pub(super) fn unmount_busy(mp: &Path) -> bool {
    if !is_mount_point(mp) {
        return false;
    }
    if mp.as_os_str().as_encoded_bytes().contains(&0) {
        return false;
    }
    let deadline = std::time::Instant::now() + STOP_GRACE;
    loop {
        let Err(err) = unmount(mp, Unmount::Now) else {
            return false;
        };
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
    if let Err(e) = unmount(mp, Unmount::Detach) {
        log::warn!("detaching {} failed: {e}", mp.display());
    }
    true
}

/// The kernel reads ahead only 128 KiB on a new FUSE mount (its INIT offers no more), while the
/// disk under the table typically reads ahead megabytes: reads through the daemon (no
/// passthrough) then run at a fraction of the disk's speed when cold. Give the mount the read-ahead
/// of the table's device (at least 1 MiB, at most 16 MiB). Needs root; otherwise logged and left.
pub(super) fn match_read_ahead(table: &LocalStore, mountpoint: &Path) {
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

pub(super) fn set_store_read_ahead(mountpoint: &Path) {
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
    let Some(mount_dev) = crate::sys::mountinfo::device_of(mountpoint) else {
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

/// How long `hudifs umount` tries again while the mount is busy before it says so.
const UMOUNT_BUSY_FOR: Duration = Duration::from_secs(1);

/// `hudifs umount`: unmount, also when the daemon died ("Transport endpoint is not connected"),
/// and also when something used the mount for a moment (a busy mount is tried again for up to
/// [`UMOUNT_BUSY_FOR`]).
pub fn umount(mountpoint: &Path) -> Result<()> {
    let abs = std::path::absolute(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    if !is_mount_point(&abs) {
        return Err(Error::Mount(format!("{} is not mounted", abs.display())));
    }
    if abs.as_os_str().as_encoded_bytes().contains(&0) {
        return Err(Error::Usage("mount point contains a NUL byte".into()));
    }
    // A mount is busy for the moment of any request through it (a `hudifs status` reading its
    // attributes, a file manager's stat): tried again for a while before it counts as in use.
    let started = std::time::Instant::now();
    let outcome = loop {
        let outcome = unmount(&abs, Unmount::Now);
        let busy = matches!(&outcome, Err(e) if e.raw_os_error() == Some(libc::EBUSY));
        if !busy || started.elapsed() >= UMOUNT_BUSY_FOR {
            break outcome;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // A daemon that died left its state file behind (a live one removes its own on exit).
    let forget = || {
        let _ = std::fs::remove_file(crate::status::state_path(&log_path(&abs)));
    };
    let Err(err) = outcome else {
        forget();
        return Ok(());
    };
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
            if unmount(&abs, Unmount::Detach).is_ok() {
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
