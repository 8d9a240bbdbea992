//! Mounting and unmounting: bind mounts, and unmounting at once or detached.

use std::path::Path;

use super::{c_path, check};

/// How to unmount.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Unmount {
    /// Only if nothing uses the mount (fails with EBUSY otherwise).
    Now,
    /// Detach it at once; it goes away when the last user lets go (`MNT_DETACH`).
    Detach,
}

/// Unmount `target` as `how` says.
pub fn unmount(target: &Path, how: Unmount) -> std::io::Result<()> {
    let t = c_path(target)?;
    let flags = match how {
        Unmount::Now => 0,
        Unmount::Detach => libc::MNT_DETACH,
    };
    // SAFETY: a valid C string.
    check(unsafe { libc::umount2(t.as_ptr(), flags) })
}

/// Bind `source` at `target`.
pub fn bind(source: &Path, target: &Path) -> std::io::Result<()> {
    let (s, t) = (c_path(source)?, c_path(target)?);
    // SAFETY: valid C strings; null file system type and data are allowed for a bind mount.
    check(unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    })
}

/// Make the bind mount at `target` read-only, nosuid and nodev (a bind mount takes its flags
/// from a remount, not from the first call).
pub fn remount_bind_read_only(target: &Path) -> std::io::Result<()> {
    let t = c_path(target)?;
    let flags =
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    // SAFETY: a valid C string; null source, file system type and data are allowed here.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            t.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    })
}
