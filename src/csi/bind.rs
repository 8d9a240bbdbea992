//! Bind mounts of a shared mount's view into a pod's volume directory, read-only.

use std::ffi::CString;
use std::path::Path;

fn c_path(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: contains a NUL byte", p.display()),
        )
    })
}

fn check(rc: libc::c_int, what: &str) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        Err(std::io::Error::new(e.kind(), format!("{what}: {e}")))
    }
}

/// Bind `source` at `target`, then make that bind read-only, nosuid and nodev (a bind mount
/// takes its flags from a remount, not from the first call).
pub fn bind_read_only(source: &Path, target: &Path) -> std::io::Result<()> {
    let (s, t) = (c_path(source)?, c_path(target)?);
    // SAFETY: valid C strings; null file system type and data are allowed for a bind mount.
    let rc = unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        )
    };
    check(
        rc,
        &format!("bind {} at {}", source.display(), target.display()),
    )?;
    let flags =
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV;
    // SAFETY: as above.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            t.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        )
    };
    if let Err(e) = check(rc, &format!("read-only {}", target.display())) {
        let _ = unmount(target);
        return Err(e);
    }
    Ok(())
}

/// Unmount the bind at `target`: at once when nothing uses it, else detached (kubelet calls
/// unpublish once the pod's containers are gone, so a user left is a straggler).
pub fn unmount(target: &Path) -> std::io::Result<()> {
    let t = c_path(target)?;
    // SAFETY: a valid C string.
    if unsafe { libc::umount2(t.as_ptr(), 0) } == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        // Not a mount point (any more).
        Some(libc::EINVAL) => Ok(()),
        // SAFETY: as above.
        Some(libc::EBUSY) => check(
            unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) },
            &format!("unmount {}", target.display()),
        ),
        _ => Err(std::io::Error::new(
            e.kind(),
            format!("unmount {}: {e}", target.display()),
        )),
    }
}
