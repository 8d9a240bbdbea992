//! [`ObjectStorage`]: the hudifs storage seam over an `object_store` client, with one tokio
//! runtime owned by the store; every call blocks the calling thread on it (the daemon calls
//! from worker threads, never from the FUSE session loop). LIST with delimiter and tree
//! listings, the ETags and sizes they recorded for opens to pin to, HEAD, whole and ranged
//! GETs with their retries, the startup check. The client itself (credentials, endpoints,
//! retries and timeouts) is built in `client.rs`.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
#[cfg(any(test, feature = "write"))]
use hudifs_storage::StorageWrite;
use hudifs_storage::{Entry, Kind, Meta, OpenFile, Storage, TablePath};
use object_store::list::{PaginatedListOptions, PaginatedListResult, PaginatedListStore};
use object_store::path::Path as ObjPath;
use object_store::ObjectStore;
#[cfg(any(test, feature = "write"))]
use object_store::PutPayload;

use crate::cache::DataCache;
use crate::client::{build_client, what_to_check};
use crate::counters::{Counters, RequestCounts};
use crate::prefetch::{Budget, PrefetchConfig};
use crate::remote::{self, Pinned, Reads, RemoteFile};
use crate::url::{StoreOptions, StoreUrl};

/// How many times a whole-file read whose body came back short is tried again (the client
/// library already retries 5xx, resets and timeouts with backoff before giving up).
const BODY_RETRIES: usize = 3;

/// A table on an object store.
pub struct ObjectStorage {
    url: StoreUrl,
    store: Arc<dyn ObjectStore>,
    /// The same client's single-page listings (S3, GCS and Azure; not a test's in-memory
    /// store), for listings that stop after the page they need.
    pages: Option<Arc<dyn PaginatedListStore>>,
    runtime: Arc<tokio::runtime::Runtime>,
    /// Prefetch windows, memory budget and data cache of open files.
    reads: Reads,
    counters: Arc<Counters>,
    /// What the last listing of each directory said about its objects (size, ETag): an open
    /// pins its GETs to it instead of asking with a HEAD (docs/SEMANTICS.md §9).
    listed: Mutex<HashMap<String, HashMap<String, Listed>>>,
    /// The table's `hoodie.properties` as [`ObjectStorage::check`] fetched it, for the first
    /// read of it (which loads the table's configuration right after): one request, not two.
    checked: Mutex<Option<(ObjPath, Bytes)>>,
}

/// An object as a listing showed it.
#[derive(Debug, Clone)]
struct Listed {
    size: u64,
    etag: Box<str>,
    modified: std::time::SystemTime,
}

impl Listed {
    /// What a listing says of `o`, if it gives an ETag (every store hudifs reaches does).
    fn of(o: &object_store::ObjectMeta) -> Option<Listed> {
        Some(Listed {
            size: o.size,
            etag: o.e_tag.as_deref()?.into(),
            modified: o.last_modified.into(),
        })
    }
}

impl std::fmt::Debug for ObjectStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the client: its configuration holds credentials.
        f.debug_struct("ObjectStorage")
            .field("url", &self.url.to_string())
            .finish()
    }
}

/// Keys a LIST page holds (S3, GCS and Azure alike).
const PAGE: usize = 1000;

fn to_io(what: &str, e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::NotFound { .. } => {
            io::Error::new(io::ErrorKind::NotFound, format!("{what}: not found"))
        }
        e => io::Error::other(format!("{what}: {e}")),
    }
}

impl ObjectStorage {
    /// A store for the table at `url`. Builds the client only: [`ObjectStorage::check`] makes
    /// the first request.
    pub fn new(url: StoreUrl, opts: &StoreOptions) -> io::Result<ObjectStorage> {
        let (store, pages) = build_client(&url, opts)?;
        let mut s = Self::with_client(url, store)?;
        s.pages = Some(pages);
        Ok(s)
    }

    /// A store over an existing client (tests wrap clients).
    pub fn with_client(url: StoreUrl, store: Arc<dyn ObjectStore>) -> io::Result<ObjectStorage> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("hudifs-objstore")
            .enable_all()
            .build()?;
        Ok(ObjectStorage {
            url,
            store,
            pages: None,
            runtime: Arc::new(runtime),
            reads: Reads::default(),
            counters: Arc::default(),
            listed: Mutex::default(),
            checked: Mutex::default(),
        })
    }

    /// Keep the bytes of files read in a local data cache in `dir`, of at most `max_bytes`
    /// (`--cache`, `--max-cache-size`).
    pub fn with_cache(mut self, dir: &std::path::Path, max_bytes: u64) -> io::Result<Self> {
        self.reads.cache = Some(DataCache::open(dir, max_bytes)?);
        Ok(self)
    }

    /// Other prefetch windows and memory budget (tests, benchmarks).
    pub fn with_prefetch(mut self, cfg: PrefetchConfig, budget: Arc<Budget>) -> Self {
        self.reads.prefetch = cfg;
        self.reads.budget = budget;
        self
    }

    /// The memory budget shared by the prefetchers of this store's open files.
    pub fn prefetch_budget(&self) -> &Arc<Budget> {
        &self.reads.budget
    }

    /// The requests this store (and the files opened from it) made so far.
    pub fn requests(&self) -> RequestCounts {
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        RequestCounts {
            list: get(&c.list),
            head: get(&c.head),
            get: get(&c.get),
            put: get(&c.put),
            delete: get(&c.delete),
        }
    }

    /// `list_with_delimiter` of `prefix`, counted; a response cut off mid-body (a generic
    /// error after the client's own retries) is asked again a few times.
    fn list_delimited(
        &self,
        prefix: Option<&ObjPath>,
    ) -> Result<object_store::ListResult, object_store::Error> {
        let mut tries = 0;
        loop {
            let timed = Counters::start(&self.counters.list, "LIST");
            let r = self.block(self.store.list_with_delimiter(prefix));
            timed.done(&r);
            match r {
                Err(object_store::Error::Generic { source, .. }) if tries < BODY_RETRIES => {
                    log::debug!("LIST {prefix:?} failed: {source}; again");
                    tries += 1;
                }
                r => return r,
            }
        }
    }

    /// The objects under `base` (a key prefix ending in `/`, or empty for the bucket's root)
    /// whose keys sort before `skip_from`, with the requests it took. The top level is read
    /// a page of names at a time (a delimiter listing: directories come as one name each),
    /// up to the page that reaches `skip_from`; each top-level directory before it is then
    /// listed whole. A table's root sorts `.hoodie/` among its first names, so this is
    /// usually one short request, where a listing of keys would return a full page of
    /// 1,000 (the timeline's and the first partitions'). A store without single-page
    /// listings (a test's in-memory one) gives its whole delimiter listing as one page.
    async fn keys_before(
        &self,
        base: &str,
        skip_from: &str,
    ) -> Result<(Vec<object_store::ObjectMeta>, usize), object_store::Error> {
        use futures::StreamExt;
        let (mut out, mut dirs, mut requests) = (Vec::new(), Vec::new(), 0);
        let mut token = None;
        loop {
            let page = match &self.pages {
                Some(pages) => {
                    let opts = PaginatedListOptions {
                        delimiter: Some("/".into()),
                        page_token: token.take(),
                        ..Default::default()
                    };
                    pages
                        .list_paginated((!base.is_empty()).then_some(base), opts)
                        .await?
                }
                None => PaginatedListResult {
                    result: self
                        .store
                        .list_with_delimiter(base.strip_suffix('/').map(ObjPath::from).as_ref())
                        .await?,
                    page_token: None,
                },
            };
            requests += 1;
            let mut reached = false;
            for o in page.result.objects {
                if o.location.as_ref() < skip_from {
                    out.push(o);
                } else {
                    reached = true;
                }
            }
            for d in page.result.common_prefixes {
                if format!("{d}/").as_str() < skip_from {
                    dirs.push(d);
                } else {
                    reached = true;
                }
            }
            match page.page_token {
                Some(t) if !reached => token = Some(t),
                _ => break,
            }
        }
        for d in dirs {
            let mut keys = self.store.list(Some(&d));
            let mut n = 0;
            while let Some(o) = keys.next().await {
                out.push(o?);
                n += 1;
            }
            requests += 1 + n / PAGE;
        }
        out.sort_by(|a, b| a.location.cmp(&b.location));
        Ok((out, requests))
    }

    /// HEAD of `key`, counted.
    /// A HEAD that returns an object version shows a versioned bucket: opens then ask for the
    /// version (a listing has none) so that a file deleted while open reads to its end.
    fn head(&self, key: &ObjPath) -> Result<object_store::ObjectMeta, object_store::Error> {
        let timed = Counters::start(&self.counters.head, "HEAD");
        let r = self.block(self.store.head(key));
        timed.done(&r);
        let m = r?;
        if m.version.is_some() {
            self.reads.versioned.store(true, Ordering::Relaxed);
        }
        Ok(m)
    }

    /// What the last listing of `key`'s directory said about it, if it has an ETag.
    fn listed(&self, key: &ObjPath) -> Option<Listed> {
        let (dir, name) = key.as_ref().rsplit_once('/').unwrap_or(("", key.as_ref()));
        let listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        listed.get(dir)?.get(name).cloned()
    }

    /// A store in memory (object_store's, which keeps ETags and honours If-Match): tests of
    /// everything above the client without a server.
    pub fn in_memory(url: StoreUrl) -> io::Result<ObjectStorage> {
        Self::with_client(url, Arc::new(object_store::memory::InMemory::new()))
    }

    pub fn url(&self) -> &StoreUrl {
        &self.url
    }

    /// One request to see that the store answers and the table is there: a clear message
    /// naming what to check (endpoint, credentials, bucket) when not. The request is a GET of
    /// `hoodie.properties`, whose bytes then serve the first read of it.
    pub fn check(&self) -> io::Result<()> {
        let key = ObjPath::from(self.url.key(".hoodie/hoodie.properties"));
        let timed = Counters::start(&self.counters.get, "GET");
        let got = self.block(async {
            let r = self.store.get(&key).await?;
            let meta = r.meta.clone();
            // The store answered; a body cut off on the way is left for the read to fetch again.
            Ok::<_, object_store::Error>((meta, r.bytes().await.ok()))
        });
        timed.done(&got);
        match got {
            Ok((meta, bytes)) => {
                if meta.version.is_some() {
                    self.reads.versioned.store(true, Ordering::Relaxed);
                }
                if let Some(bytes) = bytes.filter(|b| b.len() as u64 == meta.size) {
                    *self.checked.lock().unwrap_or_else(|e| e.into_inner()) = Some((key, bytes));
                }
                Ok(())
            }
            Err(object_store::Error::NotFound { .. }) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{}: is not a Hudi table: no .hoodie/hoodie.properties",
                    self.url
                ),
            )),
            Err(e) => Err(io::Error::other(format!(
                "the store did not answer ({e}); check {}",
                what_to_check(&self.url)
            ))),
        }
    }

    fn obj(&self, path: &TablePath) -> ObjPath {
        ObjPath::from(self.url.key(path.as_str()))
    }

    fn block<F: std::future::Future>(&self, f: F) -> F::Output {
        self.runtime.block_on(f)
    }

    fn meta_of(m: &object_store::ObjectMeta) -> Meta {
        Meta {
            kind: Kind::File,
            size: m.size,
            mtime: Some(m.last_modified.into()),
            mode: 0o644,
            version: m.version.clone().or_else(|| m.e_tag.clone()),
        }
    }

    fn dir_meta() -> Meta {
        Meta {
            kind: Kind::Dir,
            size: 0,
            mtime: None,
            mode: 0o755,
            version: None,
        }
    }
}

impl Storage for ObjectStorage {
    fn describe(&self, path: &TablePath) -> String {
        if path.is_root() {
            self.url.to_string()
        } else {
            format!("{}/{}", self.url, path.as_str())
        }
    }

    fn list(&self, dir: &TablePath) -> io::Result<Vec<Entry>> {
        let key = self.url.key(dir.as_str());
        let prefix = (!key.is_empty()).then(|| ObjPath::from(key));
        let dir_key = prefix
            .as_ref()
            .map_or(String::new(), |p| p.as_ref().to_string());
        let res = self
            .list_delimited(prefix.as_ref())
            .map_err(|e| to_io(&self.describe(dir), e))?;
        let mut out = Vec::with_capacity(res.objects.len() + res.common_prefixes.len());
        for p in &res.common_prefixes {
            if let Some(name) = p.filename() {
                out.push(Entry {
                    name: name.to_string(),
                    meta: Self::dir_meta(),
                });
            }
        }
        let mut listed = HashMap::new();
        for o in &res.objects {
            if let Some(name) = o.location.filename() {
                out.push(Entry {
                    name: name.to_string(),
                    meta: Self::meta_of(o),
                });
                if let Some(l) = Listed::of(o) {
                    listed.insert(name.to_string(), l);
                }
            }
        }
        // What this listing says replaces what the last one of the directory said.
        let mut all = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        if listed.is_empty() {
            all.remove(dir_key.as_str());
        } else {
            all.insert(dir_key, listed);
        }
        drop(all);
        // A store has no empty directories (a table uploaded from a disk loses them, e.g. the
        // empty .hoodie/timeline of a new 1.x table): a prefix without keys lists as empty.
        Ok(out)
    }

    fn list_tree(
        &self,
        dir: &TablePath,
        skip: &str,
        go_on: &dyn Fn(hudifs_storage::TreeProgress) -> bool,
    ) -> Option<Vec<(String, Meta)>> {
        use futures::StreamExt;
        // Keys sort byte-wise: those below `skip/` lie between `skip/` and `skip0` ('0' follows
        // '/'), so the tree is the keys before `skip/` (rarely any: found from the root's
        // names), then the keys after `skip0`.
        let key = self.url.key(dir.as_str());
        let base = if key.is_empty() {
            String::new()
        } else {
            format!("{key}/")
        };
        let prefix = (!key.is_empty()).then(|| ObjPath::from(key.as_str()));
        let (skip_from, skip_to) = (format!("{base}{skip}/"), format!("{base}{skip}0"));
        let abandoned_at = std::cell::Cell::new(0usize);
        // The two listings run side by side: the keys before `skip/` (usually none, one short
        // request) and the pages after it.
        let before = self.keys_before(&base, &skip_from);
        let after = async {
            let mut out: Vec<object_store::ObjectMeta> = Vec::new();
            // Directories seen: the keys come sorted, so a new parent is a new directory.
            let mut dirs = 0usize;
            let parent = |o: &object_store::ObjectMeta| {
                let k = o.location.as_ref();
                k.rsplit_once('/')
                    .map_or(String::new(), |(d, _)| d.to_string())
            };
            let mut last_parent: Option<String> = None;
            let mut after = self
                .store
                .list_with_offset(prefix.as_ref(), &ObjPath::from(skip_to.as_str()));
            while let Some(o) = after.next().await {
                let o = o?;
                if !out.is_empty() && out.len().is_multiple_of(PAGE) {
                    let progress = hudifs_storage::TreeProgress {
                        keys: out.len(),
                        dirs,
                    };
                    if !go_on(progress) {
                        abandoned_at.set(out.len());
                        return Ok(None);
                    }
                }
                let p = parent(&o);
                if last_parent.as_ref() != Some(&p) {
                    dirs += 1;
                    last_parent = Some(p);
                }
                out.push(o);
            }
            Ok::<_, object_store::Error>(Some(out))
        };
        let started = std::time::Instant::now();
        let got = self.block(async {
            let (before, after) = futures::future::join(before, after).await;
            let (mut out, before_requests) = before?;
            Ok::<_, object_store::Error>(after?.map(|a| {
                // The client pages on its own: one page per 1,000 keys after `skip/`.
                let pages = before_requests + 1 + a.len() / PAGE;
                out.extend(a);
                (out, pages)
            }))
        });
        let (objects, pages) = match got {
            Ok(Some(o)) => o,
            Ok(None) => {
                // The pages listed before the listing was abandoned.
                let pages = 2 + abandoned_at.get() / PAGE;
                for _ in 0..pages {
                    Counters::add(&self.counters.list);
                }
                report_pages(pages, "ok", started);
                log::debug!(
                    "{}: a tree listing does not pay: listed by directory",
                    self.url
                );
                return None;
            }
            Err(e) => {
                report_pages(1, "error", started);
                log::debug!(
                    "{}: tree listing failed ({e}): listed by directory",
                    self.url
                );
                return None;
            }
        };
        for _ in 0..pages {
            Counters::add(&self.counters.list);
        }
        report_pages(pages, "ok", started);
        // Each directory's ETags, as its own listing would have recorded them.
        let mut by_dir: HashMap<String, HashMap<String, Listed>> = HashMap::new();
        let mut out = Vec::with_capacity(objects.len());
        for o in &objects {
            let Some(rel) = o.location.as_ref().strip_prefix(base.as_str()) else {
                continue;
            };
            if let (Some(l), Some((d, name))) =
                (Listed::of(o), o.location.as_ref().rsplit_once('/'))
            {
                by_dir
                    .entry(d.to_string())
                    .or_default()
                    .insert(name.to_string(), l);
            }
            out.push((rel.to_string(), Self::meta_of(o)));
        }
        self.listed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(by_dir);
        Some(out)
    }

    fn stat(&self, path: &TablePath) -> io::Result<Meta> {
        if path.is_root() {
            return Ok(Self::dir_meta());
        }
        match self.head(&self.obj(path)) {
            Ok(m) => Ok(Self::meta_of(&m)),
            Err(object_store::Error::NotFound { .. }) => {
                // Directories exist only as key prefixes.
                let prefix = self.obj(path);
                let res = self
                    .list_delimited(Some(&prefix))
                    .map_err(|e| to_io(&self.describe(path), e))?;
                if res.objects.is_empty() && res.common_prefixes.is_empty() {
                    Err(hudifs_storage::not_found(self.describe(path)))
                } else {
                    Ok(Self::dir_meta())
                }
            }
            // Some servers over a file system (s3s-fs) answer a HEAD of a key that is a
            // directory there with a 500: a prefix with keys below it is still a directory.
            Err(e) => {
                let prefix = self.obj(path);
                match self.block(self.store.list_with_delimiter(Some(&prefix))) {
                    Ok(res) if !res.objects.is_empty() || !res.common_prefixes.is_empty() => {
                        Ok(Self::dir_meta())
                    }
                    _ => Err(to_io(&self.describe(path), e)),
                }
            }
        }
    }

    fn read(&self, path: &TablePath) -> io::Result<Vec<u8>> {
        let key = self.obj(path);
        {
            let mut checked = self.checked.lock().unwrap_or_else(|e| e.into_inner());
            if checked.as_ref().is_some_and(|(k, _)| *k == key) {
                if let Some((_, bytes)) = checked.take() {
                    return Ok(bytes.to_vec());
                }
            }
        }
        let what = self.describe(path);
        for _ in 0..=BODY_RETRIES {
            let timed = Counters::start(&self.counters.get, "GET");
            let res = self.block(async {
                let r = self.store.get(&key).await?;
                let size = r.meta.size;
                let b = r.bytes().await?;
                Ok::<_, object_store::Error>((size, b))
            });
            timed.done(&res);
            match res {
                Ok((size, b)) if b.len() as u64 == size => return Ok(b.to_vec()),
                Ok(_) | Err(object_store::Error::Generic { .. }) => continue,
                Err(e) => return Err(to_io(&what, e)),
            }
        }
        log::warn!("{what}: read failed after retries (short or cut-off bodies)");
        Err(io::Error::other(format!(
            "{what}: short body after retries"
        )))
    }

    fn read_range(&self, path: &TablePath, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let meta = self.stat(path)?;
        if offset >= meta.size || len == 0 {
            return Ok(Vec::new());
        }
        let end = (offset + len as u64).min(meta.size);
        let key = self.obj(path);
        self.block(remote::fetch_range(
            &self.store,
            &self.counters,
            &key,
            offset,
            end,
            None,
            None,
        ))
        .map(|(b, _)| b.to_vec())
        .map_err(|e| to_io(&self.describe(path), e))
    }

    fn is_object_store(&self) -> bool {
        true
    }

    /// On the runtime's blocking threads (as many as are waiting, up to tokio's bound of 512):
    /// their store calls block on the runtime from there, as a FUSE thread would, but FUSE
    /// threads stay free for requests answered from memory (docs/SEMANTICS.md §9).
    fn run_blocking(&self, job: hudifs_storage::Job) {
        drop(self.runtime.spawn_blocking(job));
    }

    /// What the directory's last listing said of the file, as a HEAD would say it.
    fn known_meta(&self, path: &TablePath) -> Option<Meta> {
        let l = self.listed(&self.obj(path))?;
        Some(Meta {
            kind: Kind::File,
            size: l.size,
            mtime: Some(l.modified),
            mode: 0o644,
            version: Some(l.etag.into()),
        })
    }

    /// Opens with what the directory's last listing said (size, ETag), without a request: a
    /// file replaced since then reads as ESTALE, one deleted since then as EIO. On a versioned
    /// bucket (a listing has no versions), and for a file no listing showed, a HEAD.
    fn open(&self, path: &TablePath) -> io::Result<Arc<dyn OpenFile>> {
        let key = self.obj(path);
        let listed = if self.reads.versioned.load(Ordering::Relaxed) {
            None
        } else {
            self.listed(&key)
        };
        let m = match listed {
            Some(l) => Pinned {
                size: l.size,
                etag: Some(l.etag.into()),
                version: None,
            },
            None => {
                let m = self
                    .head(&key)
                    .map_err(|e| to_io(&self.describe(path), e))?;
                Pinned {
                    size: m.size,
                    etag: m.e_tag,
                    version: m.version,
                }
            }
        };
        Ok(Arc::new(RemoteFile::new(
            self.store.clone(),
            self.runtime.clone(),
            &self.reads,
            self.counters.clone(),
            key,
            self.describe(path),
            m,
        )))
    }
}

/// The pages of a tree listing for the metrics: the client pages on its own, so each page is
/// reported with an equal share of the listing's time.
fn report_pages(pages: usize, outcome: &'static str, started: std::time::Instant) {
    let each = started.elapsed().as_secs_f64() / pages.max(1) as f64;
    for _ in 0..pages {
        hudifs_storage::observe::store_request_took("LIST", outcome, each);
    }
}

#[cfg(any(test, feature = "write"))]
impl StorageWrite for ObjectStorage {
    fn put(&self, path: &TablePath, bytes: &[u8]) -> io::Result<()> {
        let payload = PutPayload::from(Bytes::copy_from_slice(bytes));
        Counters::add(&self.counters.put);
        self.block(self.store.put(&self.obj(path), payload))
            .map(|_| ())
            .map_err(|e| to_io(&self.describe(path), e))
    }

    /// Object PUTs are atomic: the staging directory is not needed.
    fn put_atomic(&self, path: &TablePath, bytes: &[u8], _staging: &TablePath) -> io::Result<()> {
        self.put(path, bytes)
    }

    /// Copy then delete: not atomic on a store (the writer only renames its own staging files).
    fn rename(&self, from: &TablePath, to: &TablePath) -> io::Result<()> {
        Counters::add(&self.counters.put);
        Counters::add(&self.counters.delete);
        self.block(self.store.rename(&self.obj(from), &self.obj(to)))
            .map_err(|e| to_io(&self.describe(from), e))
    }

    fn delete(&self, path: &TablePath) -> io::Result<bool> {
        let key = self.obj(path);
        match self.head(&key) {
            Err(object_store::Error::NotFound { .. }) => return Ok(false),
            Err(e) => return Err(to_io(&self.describe(path), e)),
            Ok(_) => {}
        }
        Counters::add(&self.counters.delete);
        self.block(self.store.delete(&key))
            .map(|_| true)
            .map_err(|e| to_io(&self.describe(path), e))
    }

    fn delete_dir_all(&self, dir: &TablePath) -> io::Result<()> {
        use futures::TryStreamExt;
        let key = self.url.key(dir.as_str());
        let prefix = (!key.is_empty()).then(|| ObjPath::from(key));
        Counters::add(&self.counters.list);
        let objs: Vec<_> = self
            .block(self.store.list(prefix.as_ref()).try_collect::<Vec<_>>())
            .map_err(|e| to_io(&self.describe(dir), e))?;
        for o in objs {
            Counters::add(&self.counters.delete);
            match self.block(self.store.delete(&o.location)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(to_io(&self.describe(dir), e)),
            }
        }
        Ok(())
    }

    fn create_dir_all(&self, _dir: &TablePath) -> io::Result<()> {
        Ok(())
    }

    fn truncate(&self, path: &TablePath, len: u64) -> io::Result<()> {
        let mut bytes = self.read(path)?;
        bytes.truncate(len as usize);
        self.put(path, &bytes)
    }
}

#[cfg(test)]
impl ObjectStorage {
    pub(crate) fn runtime_block_for_test<F: std::future::Future>(&self, f: F) -> F::Output {
        self.block(f)
    }
}
