//! Signals handled by waiting: a daemon blocks the signals it handles in every thread (the mask
//! is set before its threads start, which inherit it) and one thread waits for them.

use std::time::Duration;

/// The signals that stop a daemon: a terminal's Ctrl-C, `kill`, a closed terminal.
pub const STOP: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// A child exited (a keeper's serving daemon).
pub const CHILD: libc::c_int = libc::SIGCHLD;

/// A set of signals blocked in the calling thread, to be waited for with [`Blocked::wait`].
#[derive(Clone, Copy)]
pub struct Blocked(libc::sigset_t);

impl Blocked {
    /// Block `signals` in the calling thread and in every thread it starts from here on.
    pub fn block(signals: &[libc::c_int]) -> Blocked {
        // SAFETY: plain libc signal-set manipulation on a local set.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for s in signals {
                libc::sigaddset(&mut set, *s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Blocked(set)
        }
    }

    /// Wait for one of the signals; which one came.
    pub fn wait(&self) -> libc::c_int {
        let mut sig: libc::c_int = 0;
        // SAFETY: the set holds signals blocked above; `sig` is a valid out-pointer.
        unsafe { libc::sigwait(&self.0, &mut sig) };
        sig
    }

    /// Wait for one of the signals for at most `left`; which one came, if one did.
    pub fn wait_for(&self, left: Duration) -> Option<libc::c_int> {
        let ts = libc::timespec {
            tv_sec: left.as_secs() as libc::time_t,
            tv_nsec: left.subsec_nanos() as libc::c_long,
        };
        // SAFETY: the set holds blocked signals; a null info pointer is allowed.
        let sig = unsafe { libc::sigtimedwait(&self.0, std::ptr::null_mut(), &ts) };
        (sig > 0).then_some(sig)
    }
}

/// Unblock every signal in the calling thread. Async-signal-safe: for a child between fork and
/// exec, which must not inherit its parent's blocked signals.
pub fn unblock_all() {
    // SAFETY: plain libc signal-set manipulation on a local set.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_UNBLOCK, &all, std::ptr::null_mut());
    }
}
