//! The buffers that ranged GETs' bodies are gathered into, reused.
//!
//! A sequential read of a large object fetches it in GETs of up to 8 MiB, hundreds a second.
//! Gathered into a fresh allocation each, every byte read also costs a page fault and a page
//! cleared by the kernel, and every free an `munmap` (the daemon has glibc return large
//! buffers at once, to keep its memory near the prefetch budget): measured with `perf` on a
//! `cat` of a 1 GiB object, page faults and unmapping took more than half of the daemon's CPU.
//! Buffers of 64 KiB and more are taken from here instead and come back when the last
//! [`Bytes`] of them is dropped. Idle buffers are kept up to [`IDLE_MAX`] bytes in all; the
//! rest are freed.
//!
//! Idle buffers hold their bytes of the memory ceiling (`hudifs_storage::ceiling`), and give
//! them all back when a take there has to wait: idle buffers nobody asks for must never keep a
//! reader or a merge waiting.

use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use hudifs_storage::ceiling::{Lease, MemoryCeiling, Reclaim};

/// The smallest buffer worth keeping: smaller bodies (footers, metadata) are allocated as
/// usual.
const MIN_POOLED: usize = 64 << 10;
/// The largest buffer kept: larger bodies are allocated as usual.
const MAX_POOLED: usize = 16 << 20;
/// Idle buffers kept, in bytes, all sizes together.
pub const IDLE_MAX: usize = 32 << 20;

/// Idle buffers by size class: class `k` holds buffers of capacity `MIN_POOLED << k`.
struct Pool {
    idle: Vec<Vec<Vec<u8>>>,
    idle_bytes: usize,
    idle_max: usize,
    /// The idle bytes, held of the process's memory ceiling: a buffer that does not fit under
    /// it is freed instead of kept.
    held: Option<Lease>,
    /// What gives the idle buffers back to the ceiling, once registered with it.
    reclaimer: Option<Arc<dyn Reclaim>>,
}

impl Pool {
    fn new(idle_max: usize) -> Pool {
        Pool {
            idle: Vec::new(),
            idle_bytes: 0,
            idle_max,
            held: None,
            reclaimer: None,
        }
    }
}

type Shared = Mutex<Pool>;

fn global() -> &'static Shared {
    static POOL: OnceLock<Shared> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new(Pool::new(IDLE_MAX)))
}

/// The idle buffers of a pool, given back when the ceiling asks.
struct Idle(&'static Shared);

impl Reclaim for Idle {
    fn reclaim(&self) -> u64 {
        let (bufs, held) = {
            let mut p = lock(self.0);
            p.idle_bytes = 0;
            (std::mem::take(&mut p.idle), p.held.take())
        };
        // Freed outside the pool's lock.
        drop(bufs);
        held.map_or(0, |l| l.bytes())
    }
}

/// The memory a body of `n` bytes takes in a buffer of the pool (its size class's capacity:
/// a reused buffer is resident to its capacity).
pub fn footprint(n: u64) -> u64 {
    match usize::try_from(n).ok().and_then(class) {
        Some(k) => (MIN_POOLED << k) as u64,
        None => n,
    }
}

fn lock(p: &Shared) -> std::sync::MutexGuard<'_, Pool> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// The size class of a buffer for `n` bytes, if it is pooled.
fn class(n: usize) -> Option<usize> {
    if !(MIN_POOLED..=MAX_POOLED).contains(&n) {
        return None;
    }
    let cap = n.next_power_of_two();
    Some((cap / MIN_POOLED).trailing_zeros() as usize)
}

/// An empty buffer that can hold `n` bytes without growing.
pub fn take(n: usize) -> Vec<u8> {
    take_from(global(), n)
}

/// The bytes of `b` as [`Bytes`]; its buffer returns to the pool when they are dropped.
pub fn freeze(b: Vec<u8>) -> Bytes {
    freeze_into(global(), b)
}

fn take_from(pool: &Shared, n: usize) -> Vec<u8> {
    let Some(k) = class(n) else {
        return Vec::with_capacity(n);
    };
    let mut p = lock(pool);
    if let Some(mut b) = p.idle.get_mut(k).and_then(Vec::pop) {
        p.idle_bytes -= b.capacity();
        if let Some(h) = p.held.as_mut() {
            // The taker holds it now (a prefetch lease of its footprint).
            drop(h.split(b.capacity() as u64));
        }
        b.clear();
        return b;
    }
    drop(p);
    Vec::with_capacity(MIN_POOLED << k)
}

/// A buffer handed back: kept if it is of a pooled size and the pool has room under the
/// process's memory ceiling.
fn give_back(pool: &'static Shared, b: Vec<u8>) {
    give_back_within(pool, b, &hudifs_storage::ceiling::process());
}

fn give_back_within(pool: &'static Shared, b: Vec<u8>, ceiling: &Arc<MemoryCeiling>) {
    let cap = b.capacity();
    // Only buffers of exactly a class's capacity (a body longer than announced grew its own).
    let Some(k) = class(cap).filter(|k| MIN_POOLED << k == cap) else {
        return;
    };
    let mut p = lock(pool);
    if p.idle_bytes + cap > p.idle_max {
        return;
    }
    let Some(l) = ceiling.try_take(cap as u64) else {
        return;
    };
    if p.reclaimer.is_none() {
        let r: Arc<dyn Reclaim> = Arc::new(Idle(pool));
        ceiling.register(Arc::downgrade(&r));
        p.reclaimer = Some(r);
    }
    p.held = Some(match p.held.take() {
        Some(h) => h.join(l),
        None => l,
    });
    if p.idle.len() <= k {
        p.idle.resize_with(k + 1, Vec::new);
    }
    p.idle_bytes += cap;
    p.idle[k].push(b);
}

/// A buffer lent to [`Bytes`]: back to its pool when the last of them is dropped.
struct Lent {
    buf: Vec<u8>,
    pool: &'static Shared,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        give_back(self.pool, std::mem::take(&mut self.buf));
    }
}

fn freeze_into(pool: &'static Shared, buf: Vec<u8>) -> Bytes {
    if class(buf.capacity()).is_none() {
        return Bytes::from(buf);
    }
    Bytes::from_owner(Lent { buf, pool })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(idle_max: usize) -> &'static Shared {
        Box::leak(Box::new(Mutex::new(Pool::new(idle_max))))
    }

    /// Idle buffers never keep a take waiting: one that does not fit beside them has them
    /// freed. (A merge once waited for ever on a daemon whose only other lease was the pool's.)
    #[test]
    fn a_take_that_waits_has_the_idle_buffers_freed() {
        let c = MemoryCeiling::fixed(10 << 20);
        let p = pool(IDLE_MAX);
        for _ in 0..6 {
            give_back_within(p, Vec::with_capacity(1 << 20), &c);
        }
        assert_eq!((lock(p).idle_bytes, c.used()), (6 << 20, 6 << 20));
        let (tx, rx) = std::sync::mpsc::channel();
        let c2 = c.clone();
        std::thread::spawn(move || tx.send(c2.take_blocking(8 << 20)));
        let l = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the take still waits with only idle buffers held");
        assert_eq!(l.bytes(), 8 << 20);
        assert_eq!((lock(p).idle_bytes, c.used()), (0, 8 << 20));
        // Kept again once there is room.
        drop(l);
        give_back_within(p, Vec::with_capacity(1 << 20), &c);
        assert_eq!((lock(p).idle_bytes, c.used()), (1 << 20, 1 << 20));
    }

    #[test]
    fn a_buffer_comes_back_when_its_last_bytes_go_and_is_reused_empty() {
        let p = pool(IDLE_MAX);
        let mut b = take_from(p, 1 << 20);
        assert_eq!(b.capacity(), 1 << 20);
        b.extend_from_slice(&[7u8; 1000]);
        let ptr = b.as_ptr();
        let bytes = freeze_into(p, b);
        let part = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(lock(p).idle_bytes, 0, "a slice keeps the buffer lent");
        assert_eq!(&part[..], &[7u8; 10][..]);
        drop(part);
        assert_eq!(lock(p).idle_bytes, 1 << 20);
        let again = take_from(p, 700 << 10);
        assert_eq!(
            again.as_ptr(),
            ptr,
            "the same buffer, of the same size class"
        );
        assert!(again.is_empty());
        assert_eq!(lock(p).idle_bytes, 0);
        // A take of another class leaves it idle.
        let p2 = pool(IDLE_MAX);
        drop(freeze_into(p2, take_from(p2, 1 << 20)));
        let big = take_from(p2, 4 << 20);
        assert_eq!(big.capacity(), 4 << 20);
        assert_eq!(
            lock(p2).idle_bytes,
            1 << 20,
            "the 1 MiB buffer is still idle"
        );
    }

    #[test]
    fn small_and_huge_bodies_are_not_pooled() {
        let p = pool(IDLE_MAX);
        assert_eq!(class(100), None);
        assert_eq!(class(64 << 20), None);
        let small = freeze_into(p, vec![1, 2, 3]);
        assert_eq!(&small[..], &[1, 2, 3]);
        drop(small);
        drop(freeze_into(p, Vec::with_capacity(64 << 20)));
        assert_eq!(lock(p).idle_bytes, 0);
    }

    #[test]
    fn the_pool_keeps_at_most_its_idle_bytes() {
        let p = pool(3 << 20);
        let bufs: Vec<Bytes> = (0..8)
            .map(|_| {
                let mut b = take_from(p, 1 << 20);
                b.push(1);
                freeze_into(p, b)
            })
            .collect();
        drop(bufs);
        assert_eq!(lock(p).idle_bytes, 3 << 20);
        // A buffer that grew past its class's capacity is not kept.
        let p = pool(IDLE_MAX);
        let mut b = take_from(p, 64 << 10);
        b.extend_from_slice(&vec![0u8; 200 << 10]);
        drop(freeze_into(p, b));
        assert_eq!(lock(p).idle_bytes, 0);
    }
}
