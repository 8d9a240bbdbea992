//! File descriptors: pipes, close-on-exec, the standard streams of a detached daemon, memory
//! files.

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

/// The device and inode of what standard error is open on.
pub fn stderr_dev_ino() -> Option<(u64, u64)> {
    // SAFETY: fstat of fd 2 into a zeroed stat buffer.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        (libc::fstat(2, &mut st) == 0).then_some((st.st_dev, st.st_ino))
    }
}

/// A new anonymous memory file named `name` (`memfd_create`), not closed on exec.
pub fn memfd(name: &std::ffi::CStr) -> std::io::Result<std::fs::File> {
    // SAFETY: a valid C string and flags; the result is checked.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: memfd_create returned a fresh descriptor we own.
    Ok(std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// Free the memory or disk behind `len` bytes of `file` from `offset` on, keeping its size
/// (they read as zeros).
pub fn punch_hole(file: &std::fs::File, offset: u64, len: u64) -> std::io::Result<()> {
    // SAFETY: fallocate on a descriptor the caller holds open.
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset as libc::off_t,
            len as libc::off_t,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
