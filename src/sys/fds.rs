//! File descriptors: pipes, close-on-exec, the standard streams of a detached daemon.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A pipe, both ends closed on exec: (read end, write end).
pub fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid two-element array for pipe2.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Close descriptor `fd` on exec (`true`) or keep it across exec (`false`). Async-signal-safe:
/// also for a child between fork and exec. A descriptor that is not open is left alone.
pub fn close_on_exec(fd: RawFd, close: bool) {
    let flags = if close { libc::FD_CLOEXEC } else { 0 };
    // SAFETY: fcntl(F_SETFD) only sets a descriptor flag; a bad descriptor fails with EBADF.
    unsafe { libc::fcntl(fd, libc::F_SETFD, flags) };
}

/// Make reads of `fd` return at once when nothing is there.
pub fn set_nonblocking(fd: &impl AsRawFd) {
    // SAFETY: fcntl(F_SETFL) on a descriptor the caller holds open.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
}

/// Point standard input and output at /dev/null (a detached daemon's, once it is live).
pub fn stdin_stdout_to_null() {
    // SAFETY: open of a C string; dup2 and close on the descriptor it returned.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
}
