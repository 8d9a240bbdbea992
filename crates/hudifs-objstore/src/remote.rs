//! A file opened on an object store (docs/SEMANTICS.md §9): every GET pinned to the ETag (and
//! version) seen at open, reads answered from the store's runtime through the file's
//! [`Prefetcher`], and from the local data cache when there is one ([`crate::cache`]).

use std::io;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::future::{BoxFuture, FutureExt};
use futures::StreamExt;
use hudifs_storage::{OpenFile, ReadDone};
use object_store::path::Path as ObjPath;
use object_store::{GetOptions, GetRange, ObjectStore};

use crate::cache::{Cached, DataCache, Fill, FillWriter, Lookup};
use crate::counters::Counters;
use crate::prefetch::{Budget, PrefetchConfig, Prefetcher, RangeSource};

/// How many times a read whose body came back short is tried again (the client library
/// already retries 5xx, resets and timeouts with backoff before giving up).
const BODY_RETRIES: usize = 3;

/// A read this far beyond what a cache fill has written waits for the fill rather than
/// fetching the bytes a second time.
const FILL_WAIT: u64 = 16 << 20;

/// How the files of one store are read: prefetch windows, the memory budget shared by all
/// open files, the data cache.
#[derive(Debug, Clone)]
pub struct Reads {
    pub prefetch: PrefetchConfig,
    pub budget: Arc<Budget>,
    pub cache: Option<Arc<DataCache>>,
    /// Set once the store answered with an object version (a versioned bucket): opens then
    /// ask for the version at open (docs/SEMANTICS.md §9).
    pub versioned: Arc<AtomicBool>,
}

impl Default for Reads {
    fn default() -> Self {
        Reads {
            prefetch: PrefetchConfig::default(),
            budget: Budget::within(
                crate::prefetch::DEFAULT_BUDGET,
                hudifs_storage::ceiling::process(),
            ),
            cache: None,
            versioned: Arc::default(),
        }
    }
}

/// A ranged GET of `start..end` of `key`, pinned to `etag`/`version` when given, its body
/// checked for length; short or cut-off bodies are tried again, then an error. With the
/// bytes, the object version the store answered with (a versioned bucket's).
pub(crate) async fn fetch_range(
    store: &Arc<dyn ObjectStore>,
    counters: &Counters,
    key: &ObjPath,
    start: u64,
    end: u64,
    etag: Option<&str>,
    version: Option<&str>,
) -> Result<(Bytes, Option<String>), object_store::Error> {
    let want = (end - start) as usize;
    let mut last_short = 0;
    for _ in 0..=BODY_RETRIES {
        let opts = GetOptions {
            if_match: etag.map(str::to_string),
            version: version.map(str::to_string),
            range: Some(GetRange::Bounded(start..end)),
            ..Default::default()
        };
        let timed = Counters::start(&counters.get, "GET");
        let res = async {
            let r = store.get_opts(key, opts).await?;
            let version = r.meta.version.clone();
            // Gathered into a reused buffer (`bufpool`): no page faults per byte read.
            let mut body = crate::bufpool::take(want);
            let mut parts = r.into_stream();
            while let Some(part) = parts.next().await {
                body.extend_from_slice(&part?);
            }
            Ok::<_, object_store::Error>((crate::bufpool::freeze(body), version))
        }
        .await;
        timed.done(&res);
        match res {
            Ok((b, v)) if b.len() == want => return Ok((b, v)),
            Ok((b, _)) => last_short = b.len(),
            Err(object_store::Error::Generic { source, .. }) => {
                // A body cut off mid-stream surfaces as a generic error; try again.
                log::debug!("{key}: read {start}..{end} failed: {source}");
            }
            Err(e) => return Err(e),
        }
    }
    Err(object_store::Error::Generic {
        store: "hudifs",
        source: format!(
            "{key}: bytes {start}..{end}: body short or cut off after {} tries (last {last_short} of {want} bytes)",
            BODY_RETRIES + 1
        )
        .into(),
    })
}

/// What every GET of one open file is pinned to, and the log lines it gives once.
struct Pin {
    store: Arc<dyn ObjectStore>,
    counters: Arc<Counters>,
    key: ObjPath,
    what: String,
    etag: Option<String>,
    /// The object version: from the HEAD at open, or else from the first GET's answer (pinned
    /// by the ETag to the same bytes), so that on a versioned bucket a file deleted after its
    /// first read reads to its end.
    version: OnceLock<String>,
    /// Set when the store answers with versions: later opens ask for the version at open.
    versioned: Arc<AtomicBool>,
    stale_logged: AtomicBool,
    gone_logged: AtomicBool,
}

impl Pin {
    /// The errno of a failed GET, logged once per file for a change or a deletion. A version
    /// that is gone while the object is still there was replaced, not deleted: GCS answers a
    /// GET of a replaced generation with 404, as a versioned bucket would answer a version
    /// removed for good (one HEAD tells them apart).
    async fn error(&self, e: object_store::Error, range: &Range<u64>) -> io::Error {
        match e {
            object_store::Error::Precondition { .. } => self.stale(),
            object_store::Error::NotFound { .. } if self.replaced().await => self.stale(),
            object_store::Error::NotFound { .. } => {
                if !self.gone_logged.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "{}: deleted while open (the cleaner removed it; without a versioned \
                         bucket or --cache the rest cannot be read): EIO",
                        self.what
                    );
                }
                io::Error::from_raw_os_error(libc::EIO)
            }
            e => {
                log::warn!(
                    "{}: read {}..{} failed after retries: {e}",
                    self.what,
                    range.start,
                    range.end
                );
                io::Error::from_raw_os_error(libc::EIO)
            }
        }
    }

    /// Whether a GET pinned to a version found none because the object was replaced: the
    /// object is still there, under another version or ETag.
    async fn replaced(&self) -> bool {
        let Some(version) = self.version.get() else {
            return false;
        };
        let timed = Counters::start(&self.counters.head, "HEAD");
        let r = self.store.head(&self.key).await;
        timed.done(&r);
        match r {
            Ok(m) => m.version.as_ref() != Some(version) || m.e_tag != self.etag,
            Err(_) => false,
        }
    }

    /// ESTALE for an object changed since it was opened, logged once.
    fn stale(&self) -> io::Error {
        if !self.stale_logged.swap(true, Ordering::Relaxed) {
            log::warn!(
                "{}: changed since it was opened (ETag {:?} no longer matches): ESTALE",
                self.what,
                self.etag
            );
        }
        io::Error::from_raw_os_error(libc::ESTALE)
    }
}

struct PinnedSource(Arc<Pin>);

impl RangeSource for PinnedSource {
    fn fetch(&self, range: Range<u64>) -> BoxFuture<'static, io::Result<Bytes>> {
        let pin = self.0.clone();
        async move {
            let fetched = fetch_range(
                &pin.store,
                &pin.counters,
                &pin.key,
                range.start,
                range.end,
                pin.etag.as_deref(),
                pin.version.get().map(String::as_str),
            )
            .await;
            let (bytes, version) = match fetched {
                Ok(f) => f,
                Err(e) => return Err(pin.error(e, &range).await),
            };
            if let Some(v) = version {
                if pin.version.set(v).is_ok() {
                    pin.versioned.store(true, Ordering::Relaxed);
                }
            }
            Ok(bytes)
        }
        .boxed()
    }
}

/// What every GET of an open file is pinned to: its size, ETag and (on a versioned bucket)
/// version, from a listing or a HEAD.
#[derive(Debug, Clone)]
pub(crate) struct Pinned {
    pub size: u64,
    pub etag: Option<String>,
    pub version: Option<String>,
}

/// What the data cache has of an open file.
enum CacheUse {
    Cached(Arc<Cached>),
    Filling(Arc<Fill>),
}

/// A read answered now (local bytes) or later (from the store).
enum ReadNow {
    Ready(io::Result<Bytes>),
    Later(BoxFuture<'static, io::Result<Bytes>>),
}

/// A file opened on an object store.
pub(crate) struct RemoteFile {
    pin: Arc<Pin>,
    size: u64,
    prefetch: Arc<Prefetcher>,
    runtime: Arc<tokio::runtime::Runtime>,
    cache: Option<(Arc<DataCache>, CacheUse)>,
    /// What the cache knows this object by: its version at open, else its ETag.
    cache_id: Option<String>,
    cache_bad: AtomicBool,
}

impl RemoteFile {
    /// A handle on `key`, as `meta` says it is (a listing or a HEAD); with a data cache, the
    /// object is served from it or filled into it.
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        runtime: Arc<tokio::runtime::Runtime>,
        reads: &Reads,
        counters: Arc<Counters>,
        key: ObjPath,
        what: String,
        meta: Pinned,
    ) -> RemoteFile {
        let version = OnceLock::new();
        if let Some(v) = meta.version {
            let _ = version.set(v);
        }
        let pin = Arc::new(Pin {
            store,
            counters,
            key,
            what,
            etag: meta.etag,
            version,
            versioned: reads.versioned.clone(),
            stale_logged: AtomicBool::new(false),
            gone_logged: AtomicBool::new(false),
        });
        let size = meta.size;
        let prefetch = Arc::new(Prefetcher::new(
            Arc::new(PinnedSource(pin.clone())),
            size,
            reads.prefetch,
            reads.budget.clone(),
            runtime.handle().clone(),
        ));
        let cache_id = pin.version.get().or(pin.etag.as_ref()).cloned();
        let cache = reads.cache.as_ref().and_then(|c| {
            let id = cache_id.as_ref()?;
            let (found, writer) = c.lookup(pin.key.as_ref(), id, size);
            if let Some(w) = writer {
                runtime.spawn(fill(pin.clone(), w));
            }
            match found {
                Lookup::Cached(c2) => Some((c.clone(), CacheUse::Cached(c2))),
                Lookup::Filling(f) => Some((c.clone(), CacheUse::Filling(f))),
                Lookup::No => None,
            }
        });
        RemoteFile {
            pin,
            size,
            prefetch,
            runtime,
            cache,
            cache_id,
            cache_bad: AtomicBool::new(false),
        }
    }

    fn read_now(&self, offset: u64, len: usize) -> ReadNow {
        let end = offset.saturating_add(len as u64).min(self.size);
        if offset >= end {
            return ReadNow::Ready(Ok(Bytes::new()));
        }
        let mut fill = None;
        match &self.cache {
            Some((cache, CacheUse::Cached(c))) if !self.cache_bad.load(Ordering::Relaxed) => {
                match c.read(offset, end) {
                    Ok(v) => {
                        hudifs_storage::observe::cache_lookup("data", true, v.len() as u64);
                        return ReadNow::Ready(Ok(Bytes::from(v)));
                    }
                    Err(e) => {
                        self.cache_bad.store(true, Ordering::Relaxed);
                        let id = self.cache_id.as_deref().unwrap_or("");
                        cache.damaged(self.pin.key.as_ref(), id, &e);
                    }
                }
            }
            Some((_, CacheUse::Filling(f))) => {
                if let Some(Ok(v)) = f.read(offset, end) {
                    hudifs_storage::observe::cache_lookup("data", true, v.len() as u64);
                    return ReadNow::Ready(Ok(Bytes::from(v)));
                }
                fill = Some(f.clone());
            }
            _ => {}
        }
        if self.cache.is_some() {
            hudifs_storage::observe::cache_lookup("data", false, 0);
        }
        let Some(f) = fill else {
            return ReadNow::Later(self.prefetch.read(offset, len));
        };
        // Close behind the fill: wait for it rather than fetching the bytes twice. Far ahead
        // (a footer): from the store, and from the fill if the store no longer has the object.
        let ahead = f.filled_to() + FILL_WAIT >= end;
        let net = (!ahead).then(|| self.prefetch.read(offset, len));
        let prefetch = self.prefetch.clone();
        ReadNow::Later(
            async move {
                if let Some(net) = net {
                    match net.await {
                        Ok(b) => return Ok(b),
                        Err(e) => {
                            return match f.wait(offset, end).await {
                                Some(r) => r.map(Bytes::from),
                                None => Err(e),
                            }
                        }
                    }
                }
                match f.wait(offset, end).await {
                    Some(r) => r.map(Bytes::from),
                    // The fill failed: the store, as without a cache.
                    None => prefetch.read(offset, len).await,
                }
            }
            .boxed(),
        )
    }
}

/// Fill the cache with the whole object, one GET pinned like the reads.
async fn fill(pin: Arc<Pin>, mut w: FillWriter) {
    let opts = GetOptions {
        if_match: pin.etag.clone(),
        version: pin.version.get().cloned(),
        ..Default::default()
    };
    let timed = Counters::start(&pin.counters.get, "GET");
    let res = match pin.store.get_opts(&pin.key, opts).await {
        Ok(r) => {
            let mut body = r.into_stream();
            let mut out = Ok(());
            while let Some(part) = body.next().await {
                match part {
                    Ok(b) => {
                        if let Err(e) = w.write(&b) {
                            out = Err(e.to_string());
                            break;
                        }
                    }
                    Err(e) => {
                        out = Err(e.to_string());
                        break;
                    }
                }
            }
            out
        }
        Err(e) => Err(e.to_string()),
    };
    timed.ended(res.is_ok());
    match res {
        Ok(()) => {
            if let Err(e) = w.finish() {
                log::warn!("{}: not cached: {e}", pin.what);
            }
        }
        Err(e) => {
            log::warn!("{}: not cached: {e}", pin.what);
            w.fail(&e);
        }
    }
}

impl OpenFile for RemoteFile {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let b = match self.read_now(offset, buf.len()) {
            ReadNow::Ready(r) => r?,
            ReadNow::Later(f) => self.runtime.block_on(f)?,
        };
        buf[..b.len()].copy_from_slice(&b);
        Ok(b.len())
    }

    /// One GET of exactly these bytes, pinned as every read of the handle, past the
    /// prefetcher; a read like any other where the data cache holds or fills the object.
    fn read_exact_random(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let end = offset.saturating_add(buf.len() as u64);
        if end > self.size {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if buf.is_empty() {
            return Ok(());
        }
        if self.cache.is_some() {
            return hudifs_storage::fill_at(self, buf, offset);
        }
        let b = self
            .runtime
            .block_on(PinnedSource(self.pin.clone()).fetch(offset..end))?;
        if b.len() != buf.len() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.copy_from_slice(&b);
        Ok(())
    }

    fn read(&self, offset: u64, len: usize, done: ReadDone) {
        match self.read_now(offset, len) {
            ReadNow::Ready(Ok(b)) => done(Ok(&b)),
            ReadNow::Ready(Err(e)) => done(Err(e)),
            ReadNow::Later(f) => {
                self.runtime.spawn(async move {
                    match f.await {
                        Ok(b) => done(Ok(&b)),
                        Err(e) => done(Err(e)),
                    }
                });
            }
        }
    }
}
