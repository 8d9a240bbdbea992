//! The scheduling priority of a thread.

/// How much lower than the daemon's a background thread runs (`nice` adds this).
const BACKGROUND_NICE: libc::c_int = 10;

/// Lower the calling thread's priority, for work no reader waits for (Linux schedules each
/// thread by its own nice value). A failure leaves it as it was.
pub fn lower_this_thread() {
    // SAFETY: gettid and setpriority take plain values and touch no memory of ours.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid);
        if let Ok(tid) = libc::id_t::try_from(tid) {
            let now = libc::getpriority(libc::PRIO_PROCESS, tid);
            let _ = libc::setpriority(libc::PRIO_PROCESS, tid, now.saturating_add(BACKGROUND_NICE));
        }
    }
}
