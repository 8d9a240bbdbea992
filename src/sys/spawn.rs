//! Starting children that keep some of this process's descriptors, and their exit statuses.

use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use super::fds::close_on_exec;
use super::signals::unblock_all;

/// How a child is detached from its parent's terminal and process group.
#[derive(Clone, Copy)]
pub enum Detach {
    /// A session of its own (`setsid`): a background daemon, gone from the terminal.
    Session,
    /// A process group of its own (`setpgid`), with every signal unblocked: a keeper's serving
    /// daemon, which does not get a terminal's Ctrl-C (the keeper handles it) nor the keeper's
    /// blocked signals.
    Group,
}

/// Have `cmd` start its child detached as `detach` says, with the descriptors `keep` (negative
/// ones ignored) open across exec.
pub fn keep_fds(cmd: &mut Command, keep: Vec<RawFd>, detach: Detach) {
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if let Detach::Session = detach {
                libc::setsid();
            }
            for fd in keep.iter().copied().filter(|fd| *fd >= 0) {
                close_on_exec(fd, false);
            }
            if let Detach::Group = detach {
                unblock_all();
                libc::setpgid(0, 0);
            }
            Ok(())
        });
    }
}

/// The status of child `pid` once it exited (waits).
pub fn wait(pid: u32) -> libc::c_int {
    let mut status = 0;
    // SAFETY: waitpid on our own child with a valid out-pointer.
    while unsafe { libc::waitpid(pid as i32, &mut status, 0) } < 0
        && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR)
    {}
    status
}

/// The status of child `pid` if it exited (does not wait).
pub fn try_wait(pid: u32) -> Option<libc::c_int> {
    let mut status = 0;
    // SAFETY: waitpid on our own child with a valid out-pointer.
    let r = unsafe { libc::waitpid(pid as i32, &mut status, libc::WNOHANG) };
    (r == pid as i32).then_some(status)
}

/// The exit code in a wait status, if the child exited (rather than died of a signal).
pub fn exit_code(status: libc::c_int) -> Option<i32> {
    libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status))
}

/// A wait status as the log says it: `signal N` or `exit status N`.
pub fn describe_status(status: libc::c_int) -> String {
    if libc::WIFSIGNALED(status) {
        format!("signal {}", libc::WTERMSIG(status))
    } else {
        format!("exit status {}", libc::WEXITSTATUS(status))
    }
}

/// Kill child `pid` (SIGKILL).
pub fn kill(pid: u32) {
    // SAFETY: a signal to a process id; no memory is involved.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
}

/// Whether process `pid` runs (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s.is_empty() && !s.contains(") Z "))
}
