//! The prefetcher of one open file on an object store (docs/SEMANTICS.md §9), as Mountpoint for
//! S3 does it: sequential reads are detected and answered from ranged GETs started ahead of the
//! reader, over a window that starts small and grows with what was read in sequence; a jump
//! resets it, and small random reads (a Parquet footer, column chunks) fetch only what they
//! ask for.
//!
//! - The window ahead of the reader is twice what the current sequential stream has read, at
//!   least [`PrefetchConfig::first_request`] and at most [`PrefetchConfig::max_ahead`]; it is
//!   cut into GETs of half the window (at most [`PrefetchConfig::max_request`]), so several are
//!   in flight at once.
//! - Reads that land within [`PrefetchConfig::slack`] of the window (the kernel sends its
//!   read-ahead in parallel, not always in order) continue the stream; anything else is a
//!   jump: the window is dropped and the read is one GET of its range, at least
//!   [`PrefetchConfig::first_request`] (256 KiB), which starts a new stream.
//! - Memory: per file at most the window, the slack behind the reader and one request; across
//!   files a shared [`Budget`]: read-ahead is started only while the budget allows, so readers
//!   beyond it fetch what they ask for and no more until others release memory.
//! - A failed GET (an error or a short body, which the source reports as an error) drops the
//!   whole window: nothing from it is served later.

use std::collections::VecDeque;
use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use futures::future::{BoxFuture, FutureExt, Shared};

/// Where a prefetcher gets bytes from: one ranged request per call.
pub trait RangeSource: Send + Sync + 'static {
    /// Exactly the bytes of `range` (a short or failed response is an error, never fewer
    /// bytes).
    fn fetch(&self, range: Range<u64>) -> BoxFuture<'static, io::Result<Bytes>>;
}

/// The window sizes of a prefetcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefetchConfig {
    /// The first read-ahead of a sequential stream, and the smallest GET of one.
    pub first_request: u64,
    /// The largest single GET.
    pub max_request: u64,
    /// The most bytes fetched ahead of a sequential reader.
    pub max_ahead: u64,
    /// How far outside the window a read may land and still continue the stream; fetched
    /// chunks are kept this long behind the reader.
    pub slack: u64,
}

impl Default for PrefetchConfig {
    /// 256 KiB first, GETs up to 8 MiB, up to 64 MiB ahead (measured in `scripts/bench`,
    /// figure `s3read`), 2 MiB of slack (twice the kernel's largest read-ahead request).
    fn default() -> Self {
        PrefetchConfig {
            first_request: 256 << 10,
            max_request: 8 << 20,
            max_ahead: 64 << 20,
            slack: 2 << 20,
        }
    }
}

/// The bytes all prefetchers of a store may hold at once (default 256 MiB).
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: AtomicU64,
    peak: AtomicU64,
}

pub const DEFAULT_BUDGET: u64 = 256 << 20;

impl Budget {
    pub fn new(limit: u64) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            used: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        })
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// The most bytes held at once.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// `n` bytes of read-ahead if the budget has room.
    fn try_take(self: &Arc<Self>, n: u64) -> Option<Lease> {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            if cur + n > self.limit {
                return None;
            }
            match self
                .used
                .compare_exchange_weak(cur, cur + n, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.peak.fetch_max(cur + n, Ordering::Relaxed);
                    return Some(Lease {
                        budget: self.clone(),
                        n,
                    });
                }
                Err(now) => cur = now,
            }
        }
    }

    /// `n` bytes a reader is waiting for: taken even over the limit (a read is never refused;
    /// it is read-ahead that waits).
    fn take(self: &Arc<Self>, n: u64) -> Lease {
        let now = self.used.fetch_add(n, Ordering::AcqRel) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Lease {
            budget: self.clone(),
            n,
        }
    }
}

/// Bytes of the budget held by one chunk.
struct Lease {
    budget: Arc<Budget>,
    n: u64,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.n, Ordering::AcqRel);
    }
}

type Fetched = Shared<BoxFuture<'static, Result<Bytes, Arc<io::Error>>>>;

/// One GET of the window, started ahead of the reader.
struct Chunk {
    range: Range<u64>,
    data: Fetched,
    _lease: Lease,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // A reader still waiting on it drives it itself.
        self.driver.abort();
    }
}

#[derive(Default)]
struct State {
    /// Contiguous, in file order.
    chunks: VecDeque<Chunk>,
    /// Where the next chunk of the window starts.
    sched_end: u64,
    /// Where the current sequential stream started, and where its last read ended.
    stream: Option<(u64, u64)>,
}

/// The prefetcher of one open file.
pub struct Prefetcher {
    source: Arc<dyn RangeSource>,
    size: u64,
    cfg: PrefetchConfig,
    budget: Arc<Budget>,
    runtime: tokio::runtime::Handle,
    state: Arc<Mutex<State>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// An `io::Error` shared by the readers of one chunk, as each reader's own.
fn unshare(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// A piece of a read: a part of a chunk, or a GET of its own.
enum Piece {
    Chunk(Fetched, Range<usize>),
    Direct(BoxFuture<'static, io::Result<Bytes>>),
}

impl Prefetcher {
    pub fn new(
        source: Arc<dyn RangeSource>,
        size: u64,
        cfg: PrefetchConfig,
        budget: Arc<Budget>,
        runtime: tokio::runtime::Handle,
    ) -> Prefetcher {
        Prefetcher {
            source,
            size,
            cfg,
            budget,
            runtime,
            state: Arc::new(Mutex::new(State::default())),
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Start a GET of `range` as a chunk of the window.
    fn chunk(&self, range: Range<u64>, lease: Lease) -> Chunk {
        let data: Fetched = self
            .source
            .fetch(range.clone())
            .map(|r| r.map_err(Arc::new))
            .boxed()
            .shared();
        let driven = data.clone();
        let driver = self.runtime.spawn(async move {
            let _ = driven.await;
        });
        Chunk {
            range,
            data,
            _lease: lease,
            driver,
        }
    }

    /// Up to `len` bytes at `offset` (fewer only at the end of the file).
    pub fn read(&self, offset: u64, len: usize) -> BoxFuture<'static, io::Result<Bytes>> {
        let end = offset.saturating_add(len as u64).min(self.size);
        if offset >= end {
            return futures::future::ready(Ok(Bytes::new())).boxed();
        }
        let cfg = self.cfg;
        let mut st = lock(&self.state);
        let continues = match st.stream {
            // Within the window (or just outside it), or on from the last read.
            Some((_, last)) => match st.chunks.front() {
                Some(c) => {
                    offset + cfg.slack >= c.range.start && offset <= st.sched_end + cfg.slack
                }
                None => offset >= last && offset <= last + cfg.slack,
            },
            // A first read at the start of the file begins a stream (cat, cp, a scan).
            None => offset == 0,
        };
        if !continues {
            // A jump: drop the window and start a new stream here with one GET of what is
            // asked, at least the first request (a small read costs no more than a few bytes
            // in time on a store, and the kernel's next reads of a column chunk are in it).
            st.chunks.clear();
            st.stream = None;
            let e = (offset + (end - offset).max(cfg.first_request)).min(self.size);
            let lease = self.budget.take(e - offset);
            let c = self.chunk(offset..e, lease);
            let data = c.data.clone();
            st.chunks.push_back(c);
            st.sched_end = e;
            st.stream = Some((offset, end));
            drop(st);
            let want = 0..(end - offset) as usize;
            let state = self.state.clone();
            return async move {
                match data.await {
                    Ok(b) => Ok(b.slice(want)),
                    Err(e) => {
                        let mut st = lock(&state);
                        st.chunks.clear();
                        st.stream = None;
                        Err(unshare(&e))
                    }
                }
            }
            .boxed();
        }
        let (start, last) = st.stream.unwrap_or((offset, offset));
        let last = last.max(end);
        st.stream = Some((start, last));
        // Chunks the reader is well past are released.
        while st
            .chunks
            .front()
            .is_some_and(|c| c.range.end + cfg.slack <= offset)
        {
            st.chunks.pop_front();
        }
        if st.chunks.is_empty() {
            st.sched_end = offset;
        }
        // The window: twice what the stream has read, within the bounds.
        let ahead = (2 * (last - start)).clamp(cfg.first_request, cfg.max_ahead);
        let request = (ahead / 2).clamp(cfg.first_request, cfg.max_request);
        let target = (end + ahead).min(self.size);
        while st.sched_end < target {
            let s = st.sched_end;
            let e = (s + request).min(self.size);
            let lease = if s < end {
                // The reader waits for it.
                self.budget.take(e - s)
            } else {
                match self.budget.try_take(e - s) {
                    Some(l) => l,
                    None => break,
                }
            };
            let c = self.chunk(s..e, lease);
            st.chunks.push_back(c);
            st.sched_end = e;
        }
        // The pieces of [offset, end): before the window, a GET of its own; then chunks.
        let mut pieces = Vec::new();
        let front = st.chunks.front().map_or(end, |c| c.range.start);
        if offset < front {
            pieces.push(Piece::Direct(self.source.fetch(offset..end.min(front))));
        }
        for c in &st.chunks {
            if c.range.end <= offset || c.range.start >= end {
                continue;
            }
            let a = (offset.max(c.range.start) - c.range.start) as usize;
            let b = (end.min(c.range.end) - c.range.start) as usize;
            pieces.push(Piece::Chunk(c.data.clone(), a..b));
        }
        drop(st);
        let state = self.state.clone();
        async move {
            let mut parts = Vec::with_capacity(pieces.len());
            let mut failed = None;
            for p in pieces {
                let r = match p {
                    Piece::Chunk(f, r) => f.await.map(|b| b.slice(r)).map_err(|e| unshare(&e)),
                    Piece::Direct(f) => f.await,
                };
                match r {
                    Ok(b) => parts.push(b),
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            if let Some(e) = failed {
                // Nothing of a failed window is served again.
                let mut st = lock(&state);
                st.chunks.clear();
                st.stream = None;
                return Err(e);
            }
            let got: usize = parts.iter().map(Bytes::len).sum();
            if got as u64 != end - offset {
                return Err(io::Error::other(format!(
                    "read {offset}..{end}: {got} bytes assembled"
                )));
            }
            Ok(match parts.len() {
                1 => parts.pop().unwrap_or_default(),
                _ => {
                    let mut all = BytesMut::with_capacity(got);
                    for p in parts {
                        all.extend_from_slice(&p);
                    }
                    all.freeze()
                }
            })
        }
        .boxed()
    }

    /// Bytes this file's window holds now (tests).
    pub fn held(&self) -> u64 {
        lock(&self.state)
            .chunks
            .iter()
            .map(|c| c.range.end - c.range.start)
            .sum()
    }
}

#[cfg(test)]
#[path = "prefetch_tests.rs"]
mod tests;
