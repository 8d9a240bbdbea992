//! The daemon's memory ceiling (`--max-memory`, docs/SEMANTICS.md §9.9, "Memory ceiling"): the
//! most memory it may hold, shared by everything whose memory grows with what is read (object
//! stores' read windows and the reads waiting on them, merges), the rest of its memory measured.
//!
//! - What the ceiling leaves for data is the ceiling less the daemon's other memory: its
//!   resident size less the bytes leased here, sampled from `/proc/self/statm` when a lease does
//!   not fit (at most every [`SAMPLE_EVERY`]) and at start, the largest seen (a lease taken but
//!   not yet filled makes the difference look smaller than it is). The file tree, listings and
//!   caches of names are not refused: they take room from data instead.
//! - A [`Lease`] holds bytes until it is dropped. [`MemoryCeiling::try_take`] takes bytes only
//!   if they fit now; [`MemoryCeiling::take`] (async) and [`MemoryCeiling::take_blocking`] wait
//!   until they fit, first asking the registered [`Reclaim`]ers (read-ahead windows) to give
//!   back what no reader waits for. A caller must not wait while holding a lease it could be
//!   waiting on itself: the read path waits holding nothing, merges take all they need at once
//!   (`hudifs_merge`).
//! - [`MemoryCeiling::try_take_spare`] is for read-ahead: it leaves [`READ_RESERVE`] free, so
//!   that read-ahead never fills what a reader that waits needs.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How often the resident size is sampled at most.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// What read-ahead leaves free for reads that wait.
pub const READ_RESERVE: u64 = 16 << 20;
/// The least the ceiling must leave for data above the daemon's memory at start.
pub const MIN_DATA: u64 = 64 << 20;

/// What a measured ceiling keeps free of leases for memory nobody counts (allocator slack,
/// request and reply buffers in flight): an eighth of it, at least 12 MiB. (A sixteenth, at
/// least 8 MiB, let eight store readers and a merge under `--max-memory 112M` peak at 115 MiB
/// in 2 of 9 runs, `store::store_reads::eight_readers_and_a_merge_stay_under_the_memory_ceiling`.)
pub fn headroom(ceiling: u64) -> u64 {
    (ceiling / 8).max(12 << 20)
}

/// Something that holds leases it can give back at once (read-ahead no reader waits for).
pub trait Reclaim: Send + Sync {
    /// Drop what can be dropped; the bytes freed.
    fn reclaim(&self) -> u64;
}

/// Where the memory that is not leased comes from.
enum Other {
    /// Measured: the resident size less what is leased, sampled.
    Measured,
    /// Fixed (tests).
    Fixed(u64),
}

struct State {
    used: u64,
    /// Async waiters, woken when bytes are released.
    wakers: VecDeque<Waker>,
    last_sample: Option<Instant>,
}

/// The daemon's memory ceiling. Cheap to share (`Arc`).
pub struct MemoryCeiling {
    ceiling: u64,
    other: Other,
    /// The daemon's memory outside leases at the last sample.
    outside: AtomicU64,
    peak: AtomicU64,
    waits: AtomicU64,
    /// Takes waiting now: read-ahead takes nothing while one does.
    waiting: Arc<AtomicU64>,
    state: Mutex<State>,
    released: Condvar,
    reclaimers: Mutex<Vec<Weak<dyn Reclaim>>>,
}

impl std::fmt::Debug for MemoryCeiling {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryCeiling")
            .field("ceiling", &self.ceiling)
            .field("room", &self.room())
            .field("used", &self.used())
            .finish()
    }
}

/// Bytes held of a [`MemoryCeiling`] until dropped.
#[derive(Debug)]
pub struct Lease {
    ceiling: Arc<MemoryCeiling>,
    n: u64,
}

impl Lease {
    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.n
    }

    /// Hold `n` more bytes if they fit now.
    pub fn try_grow(&mut self, n: u64) -> bool {
        if self.ceiling.try_add(n, 0) {
            self.n += n;
            true
        } else {
            false
        }
    }

    /// One lease of the bytes of both (of the same ceiling).
    pub fn join(mut self, mut other: Lease) -> Lease {
        self.n += std::mem::take(&mut other.n);
        self
    }

    /// Split `n` bytes off into a lease of their own (at most what is held).
    pub fn split(&mut self, n: u64) -> Lease {
        let n = n.min(self.n);
        self.n -= n;
        Lease {
            ceiling: self.ceiling.clone(),
            n,
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.n > 0 {
            self.ceiling.release(self.n);
        }
    }
}

/// The resident size of this process in bytes, from `/proc/self/statm`.
pub fn resident_bytes() -> Option<u64> {
    resident().map(|r| r.anon + r.file)
}

/// What this process holds in memory, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Resident {
    /// Anonymous memory: the heap, stacks, buffers (where leased bytes live).
    anon: u64,
    /// Pages of mapped files and shared memory: mostly the program's own code, which grows as
    /// more of it runs (the first read of a store, the first merge).
    file: u64,
}

/// [`Resident`] of this process, from `/proc/self/statm` (resident and shared pages).
fn resident() -> Option<Resident> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let mut f = s.split_whitespace().skip(1);
    let resident: u64 = f.next()?.parse().ok()?;
    let shared: u64 = f.next()?.parse().ok()?;
    // SAFETY: a plain getter without preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = u64::try_from(page).ok().filter(|&p| p > 0).unwrap_or(4096);
    Some(Resident {
        anon: resident.saturating_sub(shared) * page,
        file: shared.min(resident) * page,
    })
}

/// The memory outside leases that `r` shows while `used` bytes are leased. Leases hold
/// anonymous memory only, and part of it unfilled at any moment (a buffer taken before its bytes
/// arrive): they are taken off the anonymous part alone, so that they never hide the growth of
/// the program's mapped code.
fn outside_of(r: Resident, used: u64) -> u64 {
    r.file + r.anon.saturating_sub(used)
}

/// The memory this process may use: the smaller of the machine's memory and its cgroup's
/// limit (v2 `memory.max`, v1 `memory.limit_in_bytes`).
pub fn available_memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .map(|kb| kb * 1024)
        })?;
    Some(cgroup_limit().map_or(total, |l| l.min(total)))
}

fn cgroup_limit() -> Option<u64> {
    let cg = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in cg.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let file = if controllers.is_empty() {
            format!("/sys/fs/cgroup{path}/memory.max")
        } else if controllers.split(',').any(|c| c == "memory") {
            format!("/sys/fs/cgroup/memory{path}/memory.limit_in_bytes")
        } else {
            continue;
        };
        if let Some(v) = std::fs::read_to_string(file)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
        {
            return Some(v);
        }
    }
    None
}

/// The default ceiling: half of [`available_memory`], at least 512 MiB (1 GiB when it cannot
/// be told).
pub fn default_ceiling() -> u64 {
    available_memory().map_or(1 << 30, |m| (m / 2).max(512 << 20))
}

static PROCESS: std::sync::OnceLock<Arc<MemoryCeiling>> = std::sync::OnceLock::new();

/// Make `c` the ceiling of this process (once: `false` if one was installed before). What is
/// opened afterwards (stores' read windows, merges) counts against it.
pub fn install(c: Arc<MemoryCeiling>) -> bool {
    PROCESS.set(c).is_ok()
}

/// The ceiling of this process: the one installed, else one without a limit.
pub fn process() -> Arc<MemoryCeiling> {
    PROCESS
        .get_or_init(|| MemoryCeiling::fixed(u64::MAX >> 2))
        .clone()
}

impl MemoryCeiling {
    /// A ceiling of `ceiling` bytes for this process, its other memory measured.
    pub fn new(ceiling: u64) -> Arc<MemoryCeiling> {
        let c = Self::build(ceiling, Other::Measured);
        c.sample(true);
        c
    }

    /// A ceiling whose data may take `room` bytes, whatever the process holds (tests, and the
    /// parts of the program that run without a daemon).
    pub fn fixed(room: u64) -> Arc<MemoryCeiling> {
        Self::build(room, Other::Fixed(0))
    }

    fn build(ceiling: u64, other: Other) -> Arc<MemoryCeiling> {
        let outside = match other {
            Other::Fixed(n) => n,
            Other::Measured => 0,
        };
        Arc::new(MemoryCeiling {
            ceiling,
            other,
            outside: AtomicU64::new(outside),
            peak: AtomicU64::new(0),
            waits: AtomicU64::new(0),
            waiting: Arc::new(AtomicU64::new(0)),
            state: Mutex::new(State {
                used: 0,
                wakers: VecDeque::new(),
                last_sample: None,
            }),
            released: Condvar::new(),
            reclaimers: Mutex::new(Vec::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The ceiling in bytes.
    pub fn ceiling(&self) -> u64 {
        self.ceiling
    }

    /// What the ceiling leaves for data now: the ceiling less the daemon's other memory and
    /// the [`headroom`] (measured ceilings only).
    pub fn room(&self) -> u64 {
        let headroom = match self.other {
            Other::Measured => headroom(self.ceiling),
            Other::Fixed(_) => 0,
        };
        self.ceiling
            .saturating_sub(self.outside.load(Ordering::Relaxed))
            .saturating_sub(headroom)
    }

    /// The daemon's memory outside leases at the last sample.
    pub fn outside(&self) -> u64 {
        self.outside.load(Ordering::Relaxed)
    }

    /// Bytes leased now.
    pub fn used(&self) -> u64 {
        self.lock().used
    }

    /// The most bytes leased at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// How many takes had to wait.
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }

    /// Sample the resident size (at most every [`SAMPLE_EVERY`] unless `now`).
    fn sample(&self, now: bool) {
        if !matches!(self.other, Other::Measured) {
            return;
        }
        let used = {
            let mut st = self.lock();
            let due = st.last_sample.is_none_or(|t| t.elapsed() >= SAMPLE_EVERY);
            if !(now || due) {
                return;
            }
            st.last_sample = Some(Instant::now());
            st.used
        };
        if let Some(r) = resident() {
            // Never less than before: leases taken but not filled yet make the difference
            // small at times, and the ceiling must not trust those moments.
            self.outside
                .fetch_max(outside_of(r, used), Ordering::Relaxed);
            log::debug!(
                "memory: resident {} MiB ({} MiB of files), {} MiB of it counted, room for data {} MiB of {} MiB",
                (r.anon + r.file) >> 20,
                r.file >> 20,
                used >> 20,
                self.room() >> 20,
                self.ceiling >> 20
            );
        }
    }

    /// Add `n` to what is used if it fits below the room less `keep_free`.
    fn try_add(&self, n: u64, keep_free: u64) -> bool {
        let mut st = self.lock();
        if st.used + n + keep_free > self.room() {
            return false;
        }
        st.used += n;
        self.peak.fetch_max(st.used, Ordering::Relaxed);
        true
    }

    fn release(&self, n: u64) {
        let wakers = {
            let mut st = self.lock();
            st.used = st.used.saturating_sub(n);
            std::mem::take(&mut st.wakers)
        };
        self.released.notify_all();
        for w in wakers {
            w.wake();
        }
    }

    /// Whether `n` bytes can ever fit (the room, with nothing leased).
    pub fn can_fit(&self, n: u64) -> bool {
        n <= self.room()
    }

    /// `n` bytes if they fit now.
    pub fn try_take(self: &Arc<Self>, n: u64) -> Option<Lease> {
        self.try_add(n, 0).then(|| Lease {
            ceiling: self.clone(),
            n,
        })
    }

    /// `n` bytes of read-ahead if they fit now, leave [`READ_RESERVE`] free, and no take is
    /// waiting (readers and merges that wait come first).
    pub fn try_take_spare(self: &Arc<Self>, n: u64) -> Option<Lease> {
        if self.waiting.load(Ordering::Relaxed) > 0 {
            return None;
        }
        self.try_add(n, READ_RESERVE).then(|| Lease {
            ceiling: self.clone(),
            n,
        })
    }

    /// `n` bytes whether they fit or not: for what must go on beyond the ceiling rather than
    /// wait for ever (a single read larger than all the room).
    pub fn force(self: &Arc<Self>, n: u64) -> Lease {
        let mut st = self.lock();
        st.used += n;
        self.peak.fetch_max(st.used, Ordering::Relaxed);
        Lease {
            ceiling: self.clone(),
            n,
        }
    }

    /// Register what can give leases back when a take must wait.
    pub fn register(&self, r: Weak<dyn Reclaim>) {
        let mut all = self.reclaimers.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(r);
    }

    /// Ask every registered reclaimer to give back what it can; the bytes freed.
    pub fn reclaim(&self) -> u64 {
        let all: Vec<Arc<dyn Reclaim>> = {
            let mut all = self.reclaimers.lock().unwrap_or_else(|e| e.into_inner());
            all.retain(|w| w.strong_count() > 0);
            all.iter().filter_map(Weak::upgrade).collect()
        };
        all.iter().map(|r| r.reclaim()).sum()
    }

    /// A take that does not fit now: sample, reclaim, and try once more.
    fn try_hard(self: &Arc<Self>, n: u64) -> Option<Lease> {
        self.sample(false);
        if let Some(l) = self.try_take(n) {
            return Some(l);
        }
        self.reclaim();
        self.try_take(n)
    }

    /// `n` bytes, waiting (this thread) until they fit. `n` larger than the room is taken as
    /// the room: the caller checks [`MemoryCeiling::can_fit`] first where that matters.
    pub fn take_blocking(self: &Arc<Self>, n: u64) -> Lease {
        if let Some(l) = self.try_take(n) {
            return l;
        }
        self.waits.fetch_add(1, Ordering::Relaxed);
        let _waiting = Waiting::new(&self.waiting);
        loop {
            let n = n.min(self.room());
            if let Some(l) = self.try_hard(n) {
                return l;
            }
            let st = self.lock();
            if st.used + n <= self.room() {
                continue;
            }
            // Woken by a release, or again after a while (the room can grow without one: the
            // daemon's other memory shrinks).
            let _ = self
                .released
                .wait_timeout(st, SAMPLE_EVERY)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// `n` bytes, waiting (this task) until they fit; as [`MemoryCeiling::take_blocking`].
    pub fn take(self: &Arc<Self>, n: u64) -> Take {
        Take {
            ceiling: self.clone(),
            n,
            waited: None,
            timer: None,
        }
    }
}

/// One take waiting, counted while it lives.
struct Waiting(Arc<AtomicU64>);

impl Waiting {
    fn new(n: &Arc<AtomicU64>) -> Waiting {
        n.fetch_add(1, Ordering::Relaxed);
        Waiting(n.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The future of [`MemoryCeiling::take`].
pub struct Take {
    ceiling: Arc<MemoryCeiling>,
    n: u64,
    /// Set once the take waits.
    waited: Option<Waiting>,
    /// A thread that wakes the task after [`SAMPLE_EVERY`] in case nothing is released.
    timer: Option<Instant>,
}

impl Future for Take {
    type Output = Lease;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Lease> {
        let c = self.ceiling.clone();
        let n = self.n.min(c.room());
        let first = self.waited.is_none();
        let got = if first { c.try_take(n) } else { c.try_hard(n) };
        if let Some(l) = got {
            self.waited = None;
            return Poll::Ready(l);
        }
        if first {
            self.waited = Some(Waiting::new(&c.waiting));
            c.waits.fetch_add(1, Ordering::Relaxed);
            if let Some(l) = c.try_hard(n) {
                self.waited = None;
                return Poll::Ready(l);
            }
        }
        let mut st = c.lock();
        if st.used + n <= c.room() {
            drop(st);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        st.wakers.push_back(cx.waker().clone());
        drop(st);
        // Woken by a release; and, in case the room grows without one, after a while.
        let due = self.timer.is_none_or(|t| t.elapsed() >= SAMPLE_EVERY);
        if due {
            self.timer = Some(Instant::now());
            let w = cx.waker().clone();
            std::thread::spawn(move || {
                std::thread::sleep(SAMPLE_EVERY);
                w.wake();
            });
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    const M: u64 = 1 << 20;

    #[test]
    fn takes_fit_or_fail_and_leases_give_back() {
        let c = MemoryCeiling::fixed(100 * M);
        let a = c.try_take(60 * M).unwrap();
        assert!(c.try_take(41 * M).is_none());
        let mut b = c.try_take(40 * M).unwrap();
        assert_eq!(c.used(), 100 * M);
        assert!(!b.try_grow(1));
        drop(a);
        assert!(b.try_grow(10 * M));
        let part = b.split(20 * M);
        assert_eq!(
            (b.bytes(), part.bytes(), c.used()),
            (30 * M, 20 * M, 50 * M)
        );
        drop((b, part));
        assert_eq!(c.used(), 0);
        assert_eq!(c.peak(), 100 * M);
    }

    #[test]
    fn read_ahead_leaves_the_reserve_free() {
        let c = MemoryCeiling::fixed(100 * M);
        let _a = c.try_take_spare(100 * M - READ_RESERVE).unwrap();
        assert!(c.try_take_spare(1).is_none());
        assert!(c.try_take(READ_RESERVE).is_some(), "a reader still fits");
    }

    #[test]
    fn a_blocked_take_waits_for_a_release_and_never_exceeds() {
        let c = MemoryCeiling::fixed(10 * M);
        let held = c.try_take(8 * M).unwrap();
        let c2 = c.clone();
        let got = Arc::new(AtomicBool::new(false));
        let g2 = got.clone();
        let t = std::thread::spawn(move || {
            let l = c2.take_blocking(5 * M);
            g2.store(true, Ordering::SeqCst);
            l.bytes()
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!got.load(Ordering::SeqCst), "waits while it does not fit");
        drop(held);
        assert_eq!(t.join().unwrap(), 5 * M);
        assert!(c.peak() <= 10 * M);
        assert_eq!(c.waits(), 1);
    }

    struct Window {
        lease: Mutex<Option<Lease>>,
    }

    impl Reclaim for Window {
        fn reclaim(&self) -> u64 {
            self.lease.lock().unwrap().take().map_or(0, |l| l.bytes())
        }
    }

    #[test]
    fn a_waiting_take_reclaims_read_ahead() {
        let c = MemoryCeiling::fixed(10 * M);
        let w: Arc<Window> = Arc::new(Window {
            lease: Mutex::new(c.try_take(9 * M)),
        });
        let dynw: Arc<dyn Reclaim> = w.clone();
        c.register(Arc::downgrade(&dynw));
        let l = c.take_blocking(4 * M);
        assert_eq!(l.bytes(), 4 * M);
        assert!(
            w.lease.lock().unwrap().is_none(),
            "the window gave its bytes back"
        );
    }

    #[test]
    fn an_async_take_is_woken_by_a_release() {
        let c = MemoryCeiling::fixed(10 * M);
        let held = c.try_take(10 * M).unwrap();
        let c2 = c.clone();
        let t = std::thread::spawn(move || block_on(c2.take(3 * M)).bytes());
        std::thread::sleep(Duration::from_millis(80));
        drop(held);
        assert_eq!(t.join().unwrap(), 3 * M);
        assert_eq!(c.used(), 0);
    }

    /// A minimal executor: poll, park until woken.
    fn block_on<F: Future>(f: F) -> F::Output {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut f = std::pin::pin!(f);
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
            std::thread::park();
        }
    }

    /// Leases filled only in part (buffers taken before their bytes come) make the anonymous
    /// memory look smaller than what is leased; the program's mapped code must still count.
    #[test]
    fn leases_never_hide_the_mapped_code() {
        let r = Resident {
            anon: 50 * M,
            file: 20 * M,
        };
        assert_eq!(outside_of(r, 80 * M), 20 * M);
        assert_eq!(outside_of(r, 30 * M), 40 * M);
        let now = resident().unwrap();
        assert!(now.file > 0 && now.anon > 0, "{now:?}");
    }

    #[test]
    fn a_measured_ceiling_counts_the_process() {
        let rss = resident_bytes().unwrap();
        let ceiling = rss + 200 * M;
        let c = MemoryCeiling::new(ceiling);
        // Sampled at creation, nothing leased: the process (other tests' threads make it move
        // meanwhile) and the headroom are off the room.
        assert!(c.outside() > 0);
        assert_eq!(
            c.room(),
            ceiling
                .saturating_sub(c.outside())
                .saturating_sub(headroom(ceiling))
        );
        assert!(c.room() < ceiling - headroom(ceiling));
        assert!(available_memory().unwrap() > 0);
        assert!(default_ceiling() >= 512 << 20);
    }
}
