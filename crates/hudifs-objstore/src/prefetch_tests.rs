//! The prefetcher against a request-counting in-memory source.

use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use super::*;
use hudifs_storage::MemoryCeiling;

/// An object in memory that counts and records its GETs; optionally slow, optionally failing
/// the GETs that cover one offset.
struct Counting {
    bytes: Bytes,
    gets: Mutex<Vec<Range<u64>>>,
    delay: Duration,
    fail_at: Mutex<Option<u64>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

impl Counting {
    fn new(size: usize, delay: Duration) -> Arc<Counting> {
        let bytes: Vec<u8> = (0..size).map(|i| (i * 7 + i / 4099) as u8).collect();
        Arc::new(Counting {
            bytes: Bytes::from(bytes),
            gets: Mutex::new(Vec::new()),
            delay,
            fail_at: Mutex::new(None),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        })
    }
    fn gets(&self) -> Vec<Range<u64>> {
        lock(&self.gets).clone()
    }
}

struct Src(Arc<Counting>);

impl RangeSource for Src {
    fn fetch(&self, range: Range<u64>) -> BoxFuture<'static, io::Result<Bytes>> {
        let c = self.0.clone();
        lock(&c.gets).push(range.clone());
        async move {
            let n = c.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            c.max_in_flight.fetch_max(n, Ordering::SeqCst);
            if !c.delay.is_zero() {
                tokio::time::sleep(c.delay).await;
            }
            c.in_flight.fetch_sub(1, Ordering::SeqCst);
            let fail = lock(&c.fail_at).is_some_and(|o| range.contains(&o));
            if fail {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            Ok(c.bytes.slice(range.start as usize..range.end as usize))
        }
        .boxed()
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn prefetcher(
    rt: &tokio::runtime::Runtime,
    c: &Arc<Counting>,
    cfg: PrefetchConfig,
    budget: &Arc<Budget>,
) -> Arc<Prefetcher> {
    Arc::new(Prefetcher::new(
        Arc::new(Src(c.clone())),
        c.bytes.len() as u64,
        cfg,
        budget.clone(),
        rt.handle().clone(),
    ))
}

const K: u64 = 1024;
const M: u64 = 1024 * 1024;

/// Read `len` at `offset` and check the bytes against the object.
fn read_exact(
    rt: &tokio::runtime::Runtime,
    p: &Arc<Prefetcher>,
    c: &Counting,
    offset: u64,
    len: usize,
) {
    let got = rt.block_on(p.read(offset, len)).unwrap();
    let end = (offset as usize + len).min(c.bytes.len());
    assert!(
        got[..] == c.bytes[offset as usize..end],
        "bytes at {offset}"
    );
}

#[test]
fn a_sequential_reader_grows_the_window_to_its_bounds() {
    let rt = runtime();
    let c = Counting::new((40 * M) as usize, Duration::ZERO);
    let budget = Budget::new(256 * M);
    let p = prefetcher(&rt, &c, PrefetchConfig::default(), &budget);
    let mut off = 0;
    while off < 40 * M {
        read_exact(&rt, &p, &c, off, 128 * K as usize);
        off += 128 * K;
    }
    let gets = c.gets();
    // Small first, doubling, never over the largest request; every byte fetched once.
    assert_eq!(gets[0], 0..256 * K);
    let sizes: Vec<u64> = gets.iter().map(|r| r.end - r.start).collect();
    assert!(sizes.iter().all(|&s| s <= 8 * M), "{sizes:?}");
    assert!(sizes.contains(&(8 * M)), "{sizes:?}");
    for w in gets.windows(2) {
        assert_eq!(w[0].end, w[1].start, "contiguous: {gets:?}");
    }
    assert_eq!(gets.last().unwrap().end, 40 * M);
    // 320 kernel-sized reads, far fewer GETs.
    assert!(gets.len() < 20, "{} GETs: {sizes:?}", gets.len());
    drop(p);
    assert_eq!(budget.used(), 0, "everything released with the file");
}

#[test]
fn a_jump_resets_the_window_and_costs_one_get_of_its_range() {
    let rt = runtime();
    let c = Counting::new((64 * M) as usize, Duration::ZERO);
    let budget = Budget::new(256 * M);
    let p = prefetcher(&rt, &c, PrefetchConfig::default(), &budget);
    for i in 0..64 {
        read_exact(&rt, &p, &c, i * 128 * K, 128 * K as usize);
    }
    assert!(p.held() > M);
    let before = c.gets().len();
    read_exact(&rt, &p, &c, 50 * M, 100_000);
    let gets = c.gets();
    assert_eq!(gets.len(), before + 1);
    assert_eq!(gets[before], 50 * M..50 * M + 256 * K);
    assert_eq!(p.held(), 256 * K, "the old window is dropped");
    // Reading on from there starts a small window again.
    read_exact(&rt, &p, &c, 50 * M + 100_000, 128 * K as usize);
    let gets = c.gets();
    assert!(
        gets[before + 1..]
            .iter()
            .all(|r| r.end - r.start <= 256 * K),
        "{gets:?}"
    );
}

#[test]
fn a_parquet_footer_and_column_chunks_fetch_about_what_they_ask() {
    let rt = runtime();
    let size = 100 * M;
    let c = Counting::new(size as usize, Duration::ZERO);
    let budget = Budget::new(256 * M);
    let p = prefetcher(&rt, &c, PrefetchConfig::default(), &budget);
    // The footer's length and magic: one GET of the file's last 256 KiB, which holds the
    // footer read next.
    read_exact(&rt, &p, &c, size - 8, 8);
    assert_eq!(c.gets(), vec![size - 256 * K..size]);
    read_exact(&rt, &p, &c, size - 8 - 40_000, 40_000);
    assert_eq!(c.gets().len(), 1, "the footer came with the first GET");
    // Two column chunks of 1 MiB, read as the kernel sends them (128 KiB at a time).
    for start in [10 * M, 70 * M] {
        for i in 0..8 {
            read_exact(&rt, &p, &c, start + i * 128 * K, 128 * K as usize);
        }
    }
    let fetched: u64 = c.gets().iter().map(|r| r.end - r.start).sum();
    assert!(
        fetched < 8 * M,
        "{fetched} bytes fetched for 2 MiB of chunks"
    );
    assert!(fetched >= 2 * M + 256 * K);
}

/// Windows small enough for a test's objects.
fn small_windows() -> PrefetchConfig {
    PrefetchConfig {
        first_request: 64 * K,
        max_request: M,
        max_ahead: 8 * M,
        slack: 512 * K,
        reach: 2 * M,
    }
}

/// Eight objects of 24 MiB read in 128 KiB reads at once, every byte checked; their
/// prefetchers (still open).
fn eight_readers(
    rt: &tokio::runtime::Runtime,
    cfg: PrefetchConfig,
    budget: &Arc<Budget>,
) -> Vec<Arc<Prefetcher>> {
    let files: Vec<_> = (0..8)
        .map(|_| Counting::new((24 * M) as usize, Duration::from_millis(2)))
        .collect();
    let ps: Vec<_> = files
        .iter()
        .map(|c| prefetcher(rt, c, cfg, budget))
        .collect();
    let mut readers = Vec::new();
    for (c, p) in files.iter().zip(&ps) {
        let (c, p) = (c.clone(), p.clone());
        readers.push(rt.spawn(async move {
            let mut off = 0;
            while off < 24 * M {
                let got = p.read(off, 128 * 1024).await.unwrap();
                assert!(got[..] == c.bytes[off as usize..off as usize + got.len()]);
                off += got.len() as u64;
            }
        }));
    }
    for r in readers {
        rt.block_on(r).unwrap();
    }
    ps
}

#[test]
fn eight_readers_stay_within_the_memory_budget() {
    let rt = runtime();
    let cfg = small_windows();
    let budget = Budget::new(12 * M);
    let ps = eight_readers(&rt, cfg, &budget);
    // Read-ahead stops at the budget; only what readers wait for may pass it (one request
    // each).
    assert!(
        budget.peak() <= budget.limit() + 8 * cfg.max_request,
        "peak {} of {}",
        budget.peak(),
        budget.limit()
    );
    assert!(budget.peak() > 8 * cfg.first_request, "read-ahead happened");
    drop(ps);
    assert_eq!(budget.used(), 0);
}

/// Eight sequential readers under a memory ceiling smaller than their read-ahead budget: the
/// bytes they wait for wait for room instead of passing it, and every byte is right.
#[test]
fn under_a_ceiling_readers_wait_instead_of_exceeding_it() {
    let rt = runtime();
    let cfg = small_windows();
    let ceiling = MemoryCeiling::fixed(20 * M);
    let budget = Budget::within(64 * M, ceiling.clone());
    let ps = eight_readers(&rt, cfg, &budget);
    assert!(
        ceiling.peak() <= 20 * M,
        "peak {} over the ceiling",
        ceiling.peak()
    );
    assert!(budget.peak() > 8 * cfg.first_request, "read-ahead happened");
    drop(ps);
    assert_eq!((budget.used(), ceiling.used()), (0, 0));
}

/// A reader that finds no room takes back the read-ahead of a file nobody reads any more
/// rather than waiting for it to be closed.
#[test]
fn a_waiting_reader_takes_back_an_idle_files_read_ahead() {
    let rt = runtime();
    let cfg = small_windows();
    let ceiling = MemoryCeiling::fixed(24 * M);
    let budget = Budget::within(64 * M, ceiling.clone());
    let a = Counting::new((24 * M) as usize, Duration::ZERO);
    let b = Counting::new((24 * M) as usize, Duration::ZERO);
    let pa = prefetcher(&rt, &a, cfg, &budget);
    let pb = prefetcher(&rt, &b, cfg, &budget);
    // A reads 4 MiB in order and stops: its window runs ahead.
    for i in 0..32 {
        read_exact(&rt, &pa, &a, i * 128 * K, 128 * 1024);
    }
    let held = pa.held();
    assert!(held > M, "A reads ahead ({held} bytes)");
    // Something else takes all the rest.
    let hog = ceiling.try_take(ceiling.room() - ceiling.used()).unwrap();
    // B's read waits for room: A's window gives it back.
    let t = std::time::Instant::now();
    read_exact(&rt, &pb, &b, 5 * M, 128 * 1024);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(pa.held() < held, "A's unread read-ahead was taken back");
    assert!(ceiling.peak() <= 24 * M);
    drop(hog);
}

#[test]
fn several_gets_are_in_flight_ahead_of_a_reader() {
    let rt = runtime();
    let c = Counting::new((64 * M) as usize, Duration::from_millis(5));
    let budget = Budget::new(256 * M);
    let p = prefetcher(&rt, &c, PrefetchConfig::default(), &budget);
    let mut off = 0;
    while off < 64 * M {
        read_exact(&rt, &p, &c, off, M as usize);
        off += M;
    }
    assert!(c.max_in_flight.load(Ordering::SeqCst) >= 3);
}

#[test]
fn nothing_of_a_failed_get_is_served_later() {
    let rt = runtime();
    let c = Counting::new((16 * M) as usize, Duration::ZERO);
    let budget = Budget::new(256 * M);
    let p = prefetcher(&rt, &c, PrefetchConfig::default(), &budget);
    *lock(&c.fail_at) = Some(3 * M);
    let mut off = 0;
    let mut failed = 0;
    while off < 16 * M {
        match rt.block_on(p.read(off, 128 * 1024)) {
            Ok(b) => assert!(b[..] == c.bytes[off as usize..off as usize + b.len()]),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO));
                failed += 1;
                // The store recovers: the same read now gives the bytes.
                *lock(&c.fail_at) = None;
                read_exact(&rt, &p, &c, off, 128 * K as usize);
            }
        }
        off += 128 * K;
    }
    assert_eq!(failed, 1);
}

/// Every byte of `0..size` fetched exactly once: the GETs, sorted, are contiguous.
fn fetched_once(gets: &[Range<u64>], size: u64) {
    let mut g = gets.to_vec();
    g.sort_by_key(|r| r.start);
    assert_eq!(g.first().map(|r| r.start), Some(0), "{g:?}");
    for w in g.windows(2) {
        assert_eq!(w[0].end, w[1].start, "a gap or a byte fetched twice: {g:?}");
    }
    assert_eq!(g.last().map(|r| r.end), Some(size), "{g:?}");
}

#[test]
fn a_column_chunk_read_in_one_request_costs_one_get_of_exactly_it() {
    // With the store mount's read-ahead, the kernel sends a 1 MiB read as one request and reads
    // ahead one more: two GETs of 1 MiB, nothing more, and nothing held for a next chunk.
    let rt = runtime();
    let size = 100 * M;
    let c = Counting::new(size as usize, Duration::ZERO);
    let budget = Budget::new(256 * M);
    let p = prefetcher(&rt, &c, PrefetchConfig::default(), &budget);
    read_exact(&rt, &p, &c, size - 8, 8);
    read_exact(&rt, &p, &c, size - 8 - (64 * K), 64 * K as usize);
    let before = c.gets().len();
    for k in 1..=4 {
        let at = size / 5 * k;
        read_exact(&rt, &p, &c, at, M as usize);
        read_exact(&rt, &p, &c, at + M, M as usize);
    }
    let gets = &c.gets()[before..];
    let want: Vec<_> = (1..=4)
        .flat_map(|k| {
            [
                size / 5 * k..size / 5 * k + M,
                size / 5 * k + M..size / 5 * k + 2 * M,
            ]
        })
        .collect();
    assert_eq!(gets, &want[..]);
}

#[test]
fn kernel_requests_out_of_order_keep_the_stream_and_fetch_each_byte_once() {
    // The kernel's read-ahead arrives as 1 MiB requests handled by several threads: within a
    // batch of eight, in any order. The stream is never reset, and no byte is fetched twice.
    let rt = runtime();
    let size = 96 * M;
    let c = Counting::new(size as usize, Duration::ZERO);
    let budget = Budget::new(256 * M);
    let p = prefetcher(&rt, &c, PrefetchConfig::default(), &budget);
    let order = [3u64, 0, 1, 7, 2, 5, 4, 6];
    for batch in 0..size / (8 * M) {
        for i in order {
            read_exact(&rt, &p, &c, (batch * 8 + i) * M, M as usize);
        }
    }
    let gets = c.gets();
    fetched_once(&gets, size);
    assert!(gets.len() <= 24, "{} GETs: {gets:?}", gets.len());
    assert!(gets.iter().any(|r| r.end - r.start == 8 * M), "{gets:?}");
}

#[test]
fn chunks_read_whole_are_released_at_once() {
    // A sequential reader holds at most the window ahead (and what it is reading), not the
    // bytes it has read.
    let rt = runtime();
    let size = 200 * M;
    let c = Counting::new(size as usize, Duration::ZERO);
    let budget = Budget::new(256 * M);
    let cfg = PrefetchConfig::default();
    let p = prefetcher(&rt, &c, cfg, &budget);
    let mut off = 0;
    while off < size {
        read_exact(&rt, &p, &c, off, M as usize);
        off += M;
        assert!(
            p.held() <= cfg.max_ahead + 2 * cfg.max_request,
            "{} held at {off}",
            p.held()
        );
    }
    fetched_once(&c.gets(), size);
    drop(p);
    assert_eq!(budget.used(), 0);
}
