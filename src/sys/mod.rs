//! The raw OS calls of the daemon and its commands, in one place, each behind a safe function:
//! signals.rs (blocking the stop signals and waiting for them on one thread), spawn.rs (children
//! that keep descriptors, their exit statuses), fds.rs (pipes, close-on-exec, standard streams,
//! memory files), mount.rs (bind mounts, unmounting), mountinfo.rs (the mount table), xattr.rs
//! (reading an extended attribute), ids.rs (the process's user and group, ids by name),
//! alloc.rs (the allocator's tuning), priority.rs (a background thread's priority). What needs `fuser`'s types or the FUSE connection (its
//! ioctls, the resend notification) stays in `fuse/`; taking ownership of an inherited
//! descriptor stays `unsafe` where it is inherited (`daemon/`, `journal/`).

pub mod alloc;
pub mod fds;
pub mod ids;
pub mod mount;
pub mod mountinfo;
pub mod priority;
pub mod signals;
pub mod spawn;
pub mod xattr;

use std::ffi::CString;
use std::path::Path;

/// `p` as a C string, refused if it holds a NUL byte.
fn c_path(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_encoded_bytes()).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: contains a NUL byte", p.display()),
        )
    })
}

/// The result of a call that returns 0 on success and sets errno otherwise.
fn check(rc: libc::c_int) -> std::io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}
