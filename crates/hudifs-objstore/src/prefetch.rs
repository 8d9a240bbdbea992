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
use hudifs_storage::ceiling::{self, MemoryCeiling, Reclaim};
use hudifs_storage::sync::lock;

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

/// The bytes all prefetchers of a store may read ahead at once (default 256 MiB), within the
/// daemon's memory ceiling ([`MemoryCeiling`], `--max-memory`), which the bytes readers wait
/// for also count against.
#[derive(Debug)]
pub struct Budget {
    limit: u64,
    used: AtomicU64,
    peak: AtomicU64,
    ceiling: Arc<MemoryCeiling>,
}

pub const DEFAULT_BUDGET: u64 = 256 << 20;

/// How many times a read waits for memory before it takes what it needs regardless.
const WAITS: u32 = 3;

impl Budget {
    /// A read-ahead budget of `limit` bytes without a memory ceiling (tests, benchmarks).
    pub fn new(limit: u64) -> Arc<Budget> {
        Self::within(limit, MemoryCeiling::fixed(u64::MAX >> 2))
    }

    /// A read-ahead budget of `limit` bytes within `ceiling`.
    pub fn within(limit: u64, ceiling: Arc<MemoryCeiling>) -> Arc<Budget> {
        Arc::new(Budget {
            limit,
            used: AtomicU64::new(0),
            peak: AtomicU64::new(0),
            ceiling,
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

    /// The memory ceiling the budget lies within.
    pub fn ceiling(&self) -> &Arc<MemoryCeiling> {
        &self.ceiling
    }

    fn lease(self: &Arc<Self>, held: ceiling::Lease) -> Lease {
        let n = held.bytes();
        let now = self.used.fetch_add(n, Ordering::AcqRel) + n;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Lease {
            budget: self.clone(),
            n,
            _held: held,
        }
    }

    /// `n` bytes of read-ahead if the budget and the ceiling have room (read-ahead leaves the
    /// ceiling's reserve for readers).
    fn try_take(self: &Arc<Self>, n: u64) -> Option<Lease> {
        let n = crate::bufpool::footprint(n);
        if self.used() + n > self.limit {
            return None;
        }
        self.ceiling.try_take_spare(n).map(|h| self.lease(h))
    }

    /// `n` bytes a reader waits for, from `granted` (what it waited for) or if they fit now.
    ///
    /// A read that waited (`granted` is `Some`) takes from what it waited for first. Bytes
    /// that can never fit (a single read larger than all the room the ceiling leaves) are taken
    /// regardless: such a read must not wait for ever.
    fn try_take_demanded(
        self: &Arc<Self>,
        n: u64,
        granted: &mut Option<ceiling::Lease>,
        force: bool,
    ) -> Option<Lease> {
        let n = crate::bufpool::footprint(n);
        if let Some(g) = granted.as_mut() {
            if g.bytes() >= n {
                return Some(self.lease(g.split(n)));
            }
            let more = n - g.bytes();
            let more = match self.ceiling.try_take(more) {
                Some(l) => l,
                None if force || !self.ceiling.can_fit(n) => self.ceiling.force(more),
                None => return None,
            };
            let rest = g.split(g.bytes());
            return Some(self.lease(rest.join(more)));
        }
        if force || !self.ceiling.can_fit(n) {
            if let Some(l) = self.ceiling.try_take(n) {
                return Some(self.lease(l));
            }
            return Some(self.lease(self.ceiling.force(n)));
        }
        self.ceiling.try_take(n).map(|h| self.lease(h))
    }
}

/// Bytes of the budget held by one chunk (or one read's GET of its own).
struct Lease {
    budget: Arc<Budget>,
    n: u64,
    _held: ceiling::Lease,
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
    /// What the memory ceiling asks to give read-ahead back (registered weakly: it goes with
    /// the file).
    _window: Arc<dyn Reclaim>,
}

/// A file's window as the memory ceiling sees it: chunks no reader waits for can be dropped
/// when a reader elsewhere waits for memory.
struct Window(Arc<Mutex<State>>);

impl Reclaim for Window {
    fn reclaim(&self) -> u64 {
        // Never wait here: the caller may be this file's own reader.
        let Ok(mut st) = self.0.try_lock() else {
            return 0;
        };
        let before: u64 = st.chunks.iter().map(Chunk::len).sum();
        // Read-ahead no read has asked for, and chunks already fetched (a reader awaiting one
        // holds its bytes itself).
        st.chunks
            .retain(|c| c.served > 0 && c.data.peek().is_none());
        // The stream's fetched bytes now end where the window does.
        let last = st.stream.map_or(0, |s| s.last);
        st.fetched_to = st.chunks.back().map_or(last, |c| c.range.end.max(last));
        let after: u64 = st.chunks.iter().map(Chunk::len).sum();
        before - after
    }
}

/// An `io::Error` shared by the readers of one chunk, as each reader's own.
fn unshare(e: &io::Error) -> io::Error {
    match e.raw_os_error() {
        Some(code) => io::Error::from_raw_os_error(code),
        None => io::Error::new(e.kind(), e.to_string()),
    }
}

/// A piece of a read: a part of a chunk, or a GET of its own (with the bytes it holds).
enum Piece {
    Chunk(Fetched, Range<usize>),
    Direct(BoxFuture<'static, io::Result<Bytes>>, Lease),
}

impl Chunk {
    fn len(&self) -> u64 {
        self.range.end - self.range.start
    }
}

impl Prefetcher {
    pub fn new(
        source: Arc<dyn RangeSource>,
        size: u64,
        cfg: PrefetchConfig,
        budget: Arc<Budget>,
        runtime: tokio::runtime::Handle,
    ) -> Prefetcher {
        let state = Arc::new(Mutex::new(State::default()));
        let window: Arc<dyn Reclaim> = Arc::new(Window(state.clone()));
        budget.ceiling.register(Arc::downgrade(&window));
        Prefetcher {
            source,
            size,
            cfg,
            budget,
            runtime,
            state,
            _window: window,
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

    /// Up to `len` bytes at `offset` (fewer only at the end of the file). The bytes the read
    /// waits for count against the memory ceiling: when they do not fit, the read waits for
    /// them (holding nothing) and then starts over.
    pub fn read(
        self: &Arc<Self>,
        offset: u64,
        len: usize,
    ) -> BoxFuture<'static, io::Result<Bytes>> {
        self.read_granted(offset, len, None, 0)
    }

    /// The read, `waited` times started over for memory with `granted` the last wait's bytes.
    /// After [`WAITS`] waits what it needs is taken regardless (the room shrank below what one
    /// read needs while it waited): a read must not wait for ever.
    fn read_granted(
        self: &Arc<Self>,
        offset: u64,
        len: usize,
        mut granted: Option<ceiling::Lease>,
        waited: u32,
    ) -> BoxFuture<'static, io::Result<Bytes>> {
        let end = offset.saturating_add(len as u64).min(self.size);
        if offset >= end {
            return futures::future::ready(Ok(Bytes::new())).boxed();
        }
        let cfg = self.cfg;
        // After WAITS waits, what the read waits for is taken regardless: it never comes short.
        let force = waited >= WAITS;
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
        // The chunks to start: those the reader waits for must all have memory, or none is
        // started and the read waits; read-ahead stops where the budget does.
        let mut new_chunks = Vec::new();
        let mut s = from;
        let mut short = None;
        while s < target {
            let e = if stream.sequential {
                (s + request).min(self.size)
            } else {
                (s + request).min(target)
            };
            let lease = if s < end || !stream.sequential {
                match self.budget.try_take_demanded(e - s, &mut granted, force) {
                    Some(l) => l,
                    None => {
                        short = Some(());
                        break;
                    }
                }
            } else {
                match self.budget.try_take(e - s) {
                    Some(l) => l,
                    None => break,
                }
            };
            new_chunks.push((s..e, lease));
            s = e;
        }
        // Bytes of [offset, end) that neither a chunk nor a new one holds: GETs of their own,
        // whose bytes the read holds while it runs.
        let mut directs = Vec::new();
        // A read of several pieces is copied into one buffer: its bytes are held too.
        let mut assembly = None;
        if short.is_none() {
            let mut gaps = Vec::new();
            let mut at = offset;
            let mut overlapping = 0;
            let covered = st
                .chunks
                .iter()
                .map(|c| c.range.clone())
                .chain(new_chunks.iter().map(|(r, _)| r.clone()));
            for r in covered {
                if r.end <= offset || r.start >= end {
                    continue;
                }
                overlapping += 1;
                if r.start > at {
                    gaps.push(at..r.start);
                }
                at = at.max(r.end.min(end));
            }
            if at < end {
                gaps.push(at..end);
            }
            if overlapping + gaps.len() > 1 {
                match self
                    .budget
                    .try_take_demanded(end - offset, &mut granted, force)
                {
                    Some(l) => assembly = Some(l),
                    None => short = Some(()),
                }
            }
            for r in gaps.into_iter().filter(|_| short.is_none()) {
                match self
                    .budget
                    .try_take_demanded(r.end - r.start, &mut granted, force)
                {
                    Some(l) => directs.push((r, l)),
                    None => {
                        short = Some(());
                        break;
                    }
                }
            }
        }
        if short.is_some() {
            // Memory the reader waits for is not there: give back what this attempt took, wait
            // for enough for all it waits for (holding nothing), and start over with it.
            let span = if stream.sequential {
                end.saturating_sub(from) + request
            } else {
                target.saturating_sub(from)
            };
            // Bytes are counted as buffer footprints: up to twice their number.
            let need = 2 * (span + 2 * (end - offset));
            drop(new_chunks);
            drop(directs);
            drop(assembly);
            drop(granted);
            drop(st);
            let this = self.clone();
            let ceiling = self.budget.ceiling.clone();
            return async move {
                let got = ceiling.take(need).await;
                this.read_granted(offset, len, Some(got), waited + 1).await
            }
            .boxed();
        }
        for (r, lease) in new_chunks {
            let c = self.chunk(r.clone(), lease);
            st.chunks.push_back(c);
            st.fetched_to = r.end;
        }
        // The pieces of [offset, end), in order.
        let mut pieces: Vec<(u64, Piece)> = Vec::new();
        for c in st.chunks.iter_mut() {
            if c.range.end <= offset || c.range.start >= end {
                continue;
            }
            let from = offset.max(c.range.start);
            let upto = end.min(c.range.end);
            let a = (from - c.range.start) as usize;
            let b = (upto - c.range.start) as usize;
            c.served += upto - from;
            pieces.push((from, Piece::Chunk(c.data.clone(), a..b)));
        }
        for (r, lease) in directs {
            pieces.push((r.start, Piece::Direct(self.source.fetch(r), lease)));
        }
        pieces.sort_by_key(|(at, _)| *at);
        st.fetched_to = st.fetched_to.max(end);
        drop(st);
        drop(granted);
        let state = self.state.clone();
        async move {
            let _assembly = assembly;
            let mut parts = Vec::with_capacity(pieces.len());
            let mut failed = None;
            let mut held = Vec::new();
            for (_, p) in pieces {
                let r = match p {
                    Piece::Chunk(f, r) => f.await.map(|b| b.slice(r)).map_err(|e| unshare(&e)),
                    Piece::Direct(f, lease) => {
                        held.push(lease);
                        f.await
                    }
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
