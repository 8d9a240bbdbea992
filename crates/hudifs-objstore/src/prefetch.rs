//! The prefetcher of one open file on an object store (docs/SEMANTICS.md §9), as Mountpoint for
//! S3 does it: sequential reads are detected and answered from ranged GETs started ahead of the
//! reader, over a window that starts small and grows with what was read in sequence; a jump
//! resets it, and small random reads (a Parquet footer, column chunks) fetch only what they
//! ask for.
//!
//! - A read that lands within [`PrefetchConfig::reach`] of the current stream (ahead of it or
//!   behind it: the kernel sends its read-ahead as several requests at once, answered by several
//!   threads, so they arrive out of order) continues the stream; anything else is a jump: the
//!   window is dropped and the read starts a new stream.
//! - A stream is read ahead of only once it is known to be sequential: it started at the
//!   beginning of the file, or it went on beyond twice its first read (further than the
//!   kernel's own read-ahead of one random read goes). Until then each read costs one GET of
//!   what it asks, at least [`PrefetchConfig::first_request`] (256 KiB), extended backwards
//!   where the file ends first: a Parquet footer's length and the footer before it cost one
//!   GET, a column chunk one GET of about its bytes, and nothing is fetched for a next read
//!   that does not come.
//! - The window ahead of a sequential reader is twice what the stream has read, at least
//!   [`PrefetchConfig::first_request`] and at most [`PrefetchConfig::max_ahead`]; it is cut into
//!   GETs of half the window (at most [`PrefetchConfig::max_request`]), several in flight, each
//!   starting where the stream's fetched bytes end (no byte is fetched twice).
//! - Memory: a chunk is released as soon as its bytes have all been read, or once the stream is
//!   [`PrefetchConfig::slack`] plus the reach past it; per file at most the window, one request
//!   and what the kernel's requests in flight still read; across files a shared [`Budget`]:
//!   read-ahead is started only while the budget allows, so readers beyond it fetch what they
//!   ask for and no more until others release memory.
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
    /// The smallest GET of a read that starts a stream (a small read costs no more than a few
    /// bytes in time on a store, and the kernel's next requests of the same range are in it),
    /// and the first read-ahead of a sequential stream.
    pub first_request: u64,
    /// The largest single GET.
    pub max_request: u64,
    /// The most bytes fetched ahead of a sequential reader.
    pub max_ahead: u64,
    /// How far behind the window a read may land and still continue the stream; fetched
    /// chunks are kept this long behind the reader.
    pub slack: u64,
    /// How far ahead of the stream a read may land and still continue it: the kernel sends its
    /// read-ahead (up to the mount's read-ahead window) as several requests at once, handled
    /// by several threads, so they arrive ahead of each other.
    pub reach: u64,
}

impl Default for PrefetchConfig {
    /// 256 KiB first, GETs up to 8 MiB, up to 64 MiB ahead (measured in `scripts/bench`,
    /// figure `s3read`), 2 MiB of slack behind, 16 MiB of reach ahead (the read-ahead the daemon
    /// gives a store mount).
    fn default() -> Self {
        PrefetchConfig {
            first_request: 256 << 10,
            max_request: 8 << 20,
            max_ahead: 64 << 20,
            slack: 2 << 20,
            reach: 16 << 20,
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
    /// Bytes of it handed to reads so far: a chunk read whole is released at once.
    served: u64,
    _lease: Lease,
    driver: tokio::task::JoinHandle<()>,
}

impl Drop for Chunk {
    fn drop(&mut self) {
        // A reader still waiting on it drives it itself.
        self.driver.abort();
    }
}

/// The sequential stream a prefetcher follows.
#[derive(Debug, Clone, Copy)]
struct Stream {
    /// Where it started.
    start: u64,
    /// The furthest end of a read of it.
    last: u64,
    /// The length of the read that started it.
    first_len: u64,
    /// Read far enough in order to be worth reading ahead of: it started at the beginning of
    /// the file (cat, cp, a scan), or went on beyond what the kernel's own read-ahead of one
    /// random read asks (twice the read).
    sequential: bool,
}

#[derive(Default)]
struct State {
    /// In file order, not overlapping (gaps where nothing was fetched).
    chunks: VecDeque<Chunk>,
    stream: Option<Stream>,
    /// How far the stream's bytes were fetched (in chunks or by reads of their own): new chunks
    /// start here.
    fetched_to: u64,
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
            served: 0,
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
        let continues = st.stream.is_some_and(|s| {
            // Within the window, or behind or ahead of it within the kernel's reach.
            let low = st
                .chunks
                .front()
                .map_or(s.last, |c| c.range.start.min(s.last));
            let high = st.fetched_to.max(s.last);
            offset + cfg.reach >= low && offset <= high + cfg.reach
        });
        let stream = if continues {
            let Some(mut s) = st.stream else {
                unreachable!("continues only a stream")
            };
            s.last = s.last.max(end);
            s.sequential |= s.last - s.start > 2 * s.first_len;
            s
        } else {
            // A jump (or the first read): drop the window and start a new stream here.
            st.chunks.clear();
            st.fetched_to = offset;
            Stream {
                start: offset,
                last: end,
                first_len: end - offset,
                sequential: offset == 0,
            }
        };
        st.stream = Some(stream);
        // Chunks read whole, or that the stream is well past, are released.
        st.chunks.retain(|c| {
            c.served < c.range.end - c.range.start
                && c.range.end + cfg.slack + cfg.reach > stream.last
        });
        // What to fetch, from where the stream's fetched bytes end: for a stream not known to be
        // sequential, what the read asks (at least the first request); for a sequential one, a
        // window of twice what it has read, in GETs of half the window (a gap that the
        // kernel's requests jumped is filled: those requests are on their way).
        let (from, target, request) = if stream.sequential {
            let ahead = (2 * (stream.last - stream.start)).clamp(cfg.first_request, cfg.max_ahead);
            let request = (ahead / 2).clamp(cfg.first_request, cfg.max_request);
            (st.fetched_to, (end + ahead).min(self.size), request)
        } else {
            let target = end.max(offset + cfg.first_request).min(self.size);
            // A new stream the end of the file cuts short (a Parquet reader's footer length)
            // fetches the bytes before it instead, up to the first request: the footer, read
            // next, is there. Through the page cache the kernel's read-ahead did this.
            let from = if !continues && offset + cfg.first_request > self.size {
                self.size.saturating_sub(cfg.first_request).min(offset)
            } else {
                st.fetched_to.max(offset)
            };
            (from, target, cfg.max_request)
        };
        let mut s = from;
        while s < target {
            let e = if stream.sequential {
                (s + request).min(self.size)
            } else {
                (s + request).min(target)
            };
            let lease = if s < end || !stream.sequential {
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
            s = e;
            st.fetched_to = e;
        }
        // The pieces of [offset, end): parts of chunks, and GETs of their own where no chunk
        // has the bytes.
        let mut pieces = Vec::new();
        let mut at = offset;
        for c in st.chunks.iter_mut() {
            if c.range.end <= at || c.range.start >= end {
                continue;
            }
            if c.range.start > at {
                pieces.push(Piece::Direct(self.source.fetch(at..c.range.start)));
                at = c.range.start;
            }
            let upto = end.min(c.range.end);
            let a = (at - c.range.start) as usize;
            let b = (upto - c.range.start) as usize;
            c.served += upto - at;
            pieces.push(Piece::Chunk(c.data.clone(), a..b));
            at = upto;
        }
        if at < end {
            pieces.push(Piece::Direct(self.source.fetch(at..end)));
        }
        st.fetched_to = st.fetched_to.max(end);
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
