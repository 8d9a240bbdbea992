//! Bind mounts of a shared mount's view into a pod's volume directory, read-only.

use std::path::Path;

use crate::sys::mount::{bind, remount_bind_read_only, unmount as unmount_as, Unmount};

/// `e` with what was being done before it.
fn saying(what: String) -> impl FnOnce(std::io::Error) -> std::io::Error {
    move |e| std::io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// Bind `source` at `target`, then make that bind read-only, nosuid and nodev (a bind mount
/// takes its flags from a remount, not from the first call).
pub fn bind_read_only(source: &Path, target: &Path) -> std::io::Result<()> {
    bind(source, target).map_err(saying(format!(
        "bind {} at {}",
        source.display(),
        target.display()
    )))?;
    if let Err(e) =
        remount_bind_read_only(target).map_err(saying(format!("read-only {}", target.display())))
    {
        let _ = unmount(target);
        return Err(e);
    }
    Ok(())
}

/// Unmount the bind at `target`: at once when nothing uses it, else detached (kubelet calls
/// unpublish once the pod's containers are gone, so a user left is a straggler).
pub fn unmount(target: &Path) -> std::io::Result<()> {
    let Err(e) = unmount_as(target, Unmount::Now) else {
        return Ok(());
    };
    match e.raw_os_error() {
        // Not a mount point (any more).
        Some(libc::EINVAL) => Ok(()),
        Some(libc::EBUSY) => unmount_as(target, Unmount::Detach)
            .map_err(saying(format!("unmount {}", target.display()))),
        _ => Err(std::io::Error::new(
            e.kind(),
            format!("unmount {}: {e}", target.display()),
        )),
    }
}
