//! The local data cache of store mounts (`--cache DIR`, `--max-cache-size SIZE`;
//! docs/SEMANTICS.md §9). Hudi data files never change, so an object's bytes, keyed by its
//! path and ETag (or version), can be kept on local disk:
//!
//! - An object opened with the cache on is filled in the background by one GET of the whole
//!   object, pinned like every GET of an open file; reads are served from the fill as soon as
//!   their bytes are there (before, they go to the store as without a cache). The fill goes to a
//!   temporary file, renamed into place when complete and checked for length; then its
//!   checksum file (a CRC-32 per 256 KiB block) is written the same way. A failed fill keeps
//!   nothing.
//! - A later open of the same object and ETag reads the cached file and makes no GET; every
//!   block a read touches is checked against its checksum first, and a damaged file is dropped
//!   (the read goes to the store), never served.
//! - Least recently used entries leave when the cache holds more than its size; an object
//!   larger than the whole cache is not cached.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hudifs_storage::sync::lock;

/// Bytes per checksummed block.
pub const BLOCK: u64 = 256 << 10;
const MAGIC: &str = "hudifs-cache 1";

/// The cache file name of an object version: a 128-bit FNV-1a hash of key and version (the
/// checksum file repeats both and is compared, so a collision is never served).
fn file_name(key: &str, version: &str) -> String {
    let bytes = key.bytes().chain([0u8]).chain(version.bytes());
    hudifs_storage::fnv::fnv1a_wide_hex(bytes, 0x6c62_272e_07bb_0142)
}

struct Indexed {
    size: u64,
    used: u64,
}

/// The cache directory and its index (least recently used first out).
pub struct DataCache {
    dir: PathBuf,
    max_bytes: u64,
    state: Mutex<Index>,
}

#[derive(Default)]
struct Index {
    entries: HashMap<String, Indexed>,
    total: u64,
    tick: u64,
    /// Fills in progress, by file name: one per object version.
    filling: HashMap<String, Arc<Fill>>,
}

impl std::fmt::Debug for DataCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DataCache")
            .field("dir", &self.dir)
            .field("max_bytes", &self.max_bytes)
            .finish()
    }
}

/// A complete cached object, opened.
pub struct Cached {
    file: File,
    size: u64,
    sums: Vec<u32>,
}

/// An object being filled into the cache.
pub struct Fill {
    file: File,
    size: u64,
    /// Bytes written so far (from the start).
    filled: AtomicU64,
    /// Set once: Ok when the whole object is in, Err when the fill failed.
    outcome: Mutex<Option<Result<(), String>>>,
    changed: tokio::sync::Notify,
}

impl Fill {
    /// The bytes of `offset..end` if the fill has them.
    pub fn read(&self, offset: u64, end: u64) -> Option<io::Result<Vec<u8>>> {
        if self.filled.load(Ordering::Acquire) < end {
            return None;
        }
        let mut buf = vec![0; (end - offset) as usize];
        Some(self.file.read_exact_at(&mut buf, offset).map(|_| buf))
    }

    /// Wait until the fill has `..end` or failed: the bytes, or `None` if it failed.
    pub async fn wait(&self, offset: u64, end: u64) -> Option<io::Result<Vec<u8>>> {
        loop {
            let notified = self.changed.notified();
            if let Some(r) = self.read(offset, end) {
                return Some(r);
            }
            if lock(&self.outcome).as_ref().is_some_and(|o| o.is_err()) {
                return None;
            }
            notified.await;
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes written so far.
    pub fn filled_to(&self) -> u64 {
        self.filled.load(Ordering::Acquire)
    }
}

impl Cached {
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The bytes of `offset..end`, every block they touch checked against its checksum.
    pub fn read(&self, offset: u64, end: u64) -> io::Result<Vec<u8>> {
        let end = end.min(self.size);
        if offset >= end {
            return Ok(Vec::new());
        }
        let first = offset / BLOCK;
        let last = (end - 1) / BLOCK;
        let span_start = first * BLOCK;
        let span_end = ((last + 1) * BLOCK).min(self.size);
        let mut buf = vec![0; (span_end - span_start) as usize];
        self.file.read_exact_at(&mut buf, span_start)?;
        for (i, block) in buf.chunks(BLOCK as usize).enumerate() {
            let want = self.sums.get(first as usize + i).copied();
            if want != Some(crc32fast::hash(block)) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("block {} fails its checksum", first as usize + i),
                ));
            }
        }
        let a = (offset - span_start) as usize;
        let b = (end - span_start) as usize;
        buf.truncate(b);
        buf.drain(..a);
        Ok(buf)
    }
}

/// What a cache has of an object version at open.
pub enum Lookup {
    Cached(Arc<Cached>),
    /// Being filled (by this open or an earlier one): serve from it as it grows.
    Filling(Arc<Fill>),
    /// Not cached and not to be (too large, or the cache directory fails).
    No,
}

/// Writes one fill: its temporary file, the checksums so far.
pub struct FillWriter {
    cache: Arc<DataCache>,
    name: String,
    key: String,
    version: String,
    fill: Arc<Fill>,
    tmp: PathBuf,
    sums: Vec<u32>,
    hasher: crc32fast::Hasher,
    in_block: u64,
}

impl DataCache {
    /// A cache in `dir` (created private) of at most `max_bytes`: entries of earlier runs are
    /// indexed, leftovers of interrupted fills removed.
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Arc<DataCache>> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let mut index = Index::default();
        let mut names = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            names.push(name);
        }
        for name in &names {
            let path = dir.join(name);
            if name.starts_with('.') && name.ends_with(".tmp") {
                let _ = std::fs::remove_file(&path);
            } else if let Some(stem) = name.strip_suffix(".data") {
                match std::fs::metadata(dir.join(format!("{stem}.sum"))) {
                    Ok(_) => {
                        let size = e_size(&path);
                        index.tick += 1;
                        index.total += size;
                        index.entries.insert(
                            stem.to_string(),
                            Indexed {
                                size,
                                used: index.tick,
                            },
                        );
                    }
                    Err(_) => {
                        let _ = std::fs::remove_file(&path);
                    }
                }
            }
        }
        let cache = Arc::new(DataCache {
            dir: dir.to_path_buf(),
            max_bytes,
            state: Mutex::new(index),
        });
        cache.evict();
        Ok(cache)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Bytes held by complete entries.
    pub fn total(&self) -> u64 {
        lock(&self.state).total
    }

    fn data_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.data"))
    }

    fn sum_path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.sum"))
    }

    /// Forget and delete an entry (damaged, or evicted).
    fn drop_entry(&self, name: &str) {
        let mut st = lock(&self.state);
        if let Some(e) = st.entries.remove(name) {
            st.total -= e.size;
        }
        drop(st);
        let _ = std::fs::remove_file(self.sum_path(name));
        let _ = std::fs::remove_file(self.data_path(name));
    }

    /// Least recently used entries out until the cache fits.
    fn evict(&self) {
        loop {
            let victim = {
                let st = lock(&self.state);
                if st.total <= self.max_bytes {
                    return;
                }
                match st.entries.iter().min_by_key(|(_, e)| e.used) {
                    Some((n, _)) => n.clone(),
                    None => return,
                }
            };
            log::debug!("data cache: evicting {victim}");
            self.drop_entry(&victim);
        }
    }

    /// The complete cached file of `key` at `version`, checked against its checksum file.
    fn open_cached(&self, name: &str, key: &str, version: &str, size: u64) -> Option<Cached> {
        let sums = std::fs::read_to_string(self.sum_path(name)).ok()?;
        let mut lines = sums.lines();
        let header_ok = lines.next() == Some(MAGIC)
            && lines.next() == Some(key)
            && lines.next() == Some(version)
            && lines.next().and_then(|s| s.parse::<u64>().ok()) == Some(size);
        let sums: Option<Vec<u32>> = lines.map(|l| u32::from_str_radix(l, 16).ok()).collect();
        let file = File::open(self.data_path(name)).ok()?;
        let len = file.metadata().ok()?.len();
        match sums {
            Some(sums) if header_ok && len == size && sums.len() as u64 == size.div_ceil(BLOCK) => {
                Some(Cached { file, size, sums })
            }
            _ => None,
        }
    }

    /// What the cache has of `key` at `version` (`size` bytes); when nothing, a fill is begun
    /// and its writer returned for the caller to feed.
    pub fn lookup(
        self: &Arc<Self>,
        key: &str,
        version: &str,
        size: u64,
    ) -> (Lookup, Option<FillWriter>) {
        if size > self.max_bytes {
            return (Lookup::No, None);
        }
        let name = file_name(key, version);
        {
            let mut st = lock(&self.state);
            if let Some(f) = st.filling.get(&name) {
                return (Lookup::Filling(f.clone()), None);
            }
            st.tick += 1;
            let tick = st.tick;
            if let Some(e) = st.entries.get_mut(&name) {
                e.used = tick;
                drop(st);
                if let Some(c) = self.open_cached(&name, key, version, size) {
                    return (Lookup::Cached(Arc::new(c)), None);
                }
                log::warn!(
                    "data cache: {}: damaged or incomplete entry for {key}, dropped",
                    self.data_path(&name).display()
                );
                self.drop_entry(&name);
            }
        }
        let tmp = self.dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
        {
            Ok(f) => f,
            Err(e) => {
                log::warn!("data cache: {}: {e}; not caching", tmp.display());
                return (Lookup::No, None);
            }
        };
        let fill = Arc::new(Fill {
            file,
            size,
            filled: AtomicU64::new(0),
            outcome: Mutex::new(None),
            changed: tokio::sync::Notify::new(),
        });
        lock(&self.state).filling.insert(name.clone(), fill.clone());
        let w = FillWriter {
            cache: self.clone(),
            name,
            key: key.to_string(),
            version: version.to_string(),
            fill: fill.clone(),
            tmp,
            sums: Vec::new(),
            hasher: crc32fast::Hasher::new(),
            in_block: 0,
        };
        (Lookup::Filling(fill), Some(w))
    }

    /// A damaged cached file was found while reading: drop it.
    pub fn damaged(&self, key: &str, version: &str, why: &io::Error) {
        let name = file_name(key, version);
        log::warn!(
            "data cache: {}: {why}; dropped, reading from the store",
            self.data_path(&name).display()
        );
        self.drop_entry(&name);
    }
}

fn e_size(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

impl FillWriter {
    /// Append the next bytes of the object.
    pub fn write(&mut self, mut bytes: &[u8]) -> io::Result<()> {
        let at = self.fill.filled.load(Ordering::Relaxed);
        let len = bytes.len() as u64;
        if at + len > self.fill.size {
            return Err(io::Error::other("more bytes than the object's size"));
        }
        self.fill.file.write_all_at(bytes, at)?;
        while !bytes.is_empty() {
            let n = ((BLOCK - self.in_block) as usize).min(bytes.len());
            self.hasher.update(&bytes[..n]);
            self.in_block += n as u64;
            bytes = &bytes[n..];
            if self.in_block == BLOCK {
                let h = std::mem::take(&mut self.hasher);
                self.sums.push(h.finalize());
                self.in_block = 0;
            }
        }
        self.fill.filled.store(at + len, Ordering::Release);
        self.fill.changed.notify_waiters();
        Ok(())
    }

    /// The whole object is in: rename the file into place, write its checksums, index it.
    pub fn finish(mut self) -> io::Result<()> {
        let r = self.complete();
        if let Err(e) = &r {
            self.fail(&e.to_string());
        }
        r
    }

    fn complete(&mut self) -> io::Result<()> {
        let size = self.fill.filled.load(Ordering::Acquire);
        if size != self.fill.size {
            return Err(io::Error::other(format!(
                "fill ended at {size} of {} bytes",
                self.fill.size
            )));
        }
        if self.in_block > 0 {
            let h = std::mem::take(&mut self.hasher);
            self.sums.push(h.finalize());
            self.in_block = 0;
        }
        let c = &self.cache;
        c.ensure_room(size);
        self.fill.file.sync_data()?;
        std::fs::rename(&self.tmp, c.data_path(&self.name))?;
        let mut text = format!("{MAGIC}\n{}\n{}\n{size}\n", self.key, self.version);
        for s in &self.sums {
            text.push_str(&format!("{s:08x}\n"));
        }
        let sum_tmp = c.dir.join(format!(".{}.sum.tmp", self.name));
        let mut f = File::create(&sum_tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_data()?;
        std::fs::rename(&sum_tmp, c.sum_path(&self.name))?;
        {
            let mut st = lock(&c.state);
            st.tick += 1;
            let used = st.tick;
            st.total += size;
            st.entries.insert(self.name.clone(), Indexed { size, used });
            st.filling.remove(&self.name);
        }
        *lock(&self.fill.outcome) = Some(Ok(()));
        self.fill.changed.notify_waiters();
        c.evict();
        Ok(())
    }

    /// The fill failed: nothing of it is kept.
    pub fn fail(&mut self, why: &str) {
        let _ = std::fs::remove_file(&self.tmp);
        lock(&self.cache.state).filling.remove(&self.name);
        let mut o = lock(&self.fill.outcome);
        if o.is_none() {
            *o = Some(Err(why.to_string()));
        }
        drop(o);
        self.fill.changed.notify_waiters();
    }
}

impl DataCache {
    /// Evict until `incoming` more bytes fit.
    fn ensure_room(&self, incoming: u64) {
        loop {
            let victim = {
                let st = lock(&self.state);
                if st.total + incoming <= self.max_bytes {
                    return;
                }
                match st.entries.iter().min_by_key(|(_, e)| e.used) {
                    Some((n, _)) => n.clone(),
                    None => return,
                }
            };
            self.drop_entry(&victim);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_the_ones_earlier_builds_gave() {
        // Computed by the hash as it was written here before hudifs_storage::fnv: a cache
        // filled by an earlier build is found again.
        assert_eq!(
            file_name("a/b.parquet", "v1"),
            "b1f682263aa8649420de73c1e8fb077f"
        );
    }

    fn fill(c: &Arc<DataCache>, key: &str, bytes: &[u8]) {
        let (l, w) = c.lookup(key, "e1", bytes.len() as u64);
        assert!(matches!(l, Lookup::Filling(_)));
        let mut w = w.unwrap();
        for part in bytes.chunks(100_000) {
            w.write(part).unwrap();
        }
        w.finish().unwrap();
    }

    #[test]
    fn filled_entries_are_served_checked_and_evicted_lru() {
        let dir = tempfile::tempdir().unwrap();
        let c = DataCache::open(dir.path(), 2_000_000).unwrap();
        let a: Vec<u8> = (0..700_000u32).map(|i| (i % 251) as u8).collect();
        fill(&c, "t/a.parquet", &a);
        let Lookup::Cached(got) = c.lookup("t/a.parquet", "e1", a.len() as u64).0 else {
            panic!("not cached")
        };
        assert_eq!(got.read(0, a.len() as u64).unwrap(), a);
        assert_eq!(got.read(300_000, 300_010).unwrap(), &a[300_000..300_010]);
        // Another version of the same key is another entry.
        assert!(matches!(
            c.lookup("t/a.parquet", "e2", a.len() as u64).0,
            Lookup::Filling(_)
        ));
        // Damage a byte: the block's read fails, never the wrong bytes.
        let data = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|x| x == "data"))
            .unwrap();
        let f = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
        f.write_all_at(&[a[400_000] ^ 1], 400_000).unwrap();
        assert!(got.read(390_000, 410_000).is_err());
        assert_eq!(got.read(0, 1000).unwrap(), &a[..1000]);
        // Reopened: indexed again; two more objects push the least recently used out.
        drop(c);
        let c = DataCache::open(dir.path(), 2_000_000).unwrap();
        assert_eq!(c.total(), a.len() as u64);
        fill(&c, "t/b.parquet", &a);
        fill(&c, "t/c.parquet", &a);
        assert!(c.total() <= 2_000_000);
        assert!(matches!(
            c.lookup("t/c.parquet", "e1", a.len() as u64).0,
            Lookup::Cached(_)
        ));
        // Too large for the whole cache: not cached.
        assert!(matches!(c.lookup("t/big", "e1", 3_000_000).0, Lookup::No));
    }

    #[test]
    fn a_failed_fill_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let c = DataCache::open(dir.path(), 1 << 20).unwrap();
        let (_, w) = c.lookup("k", "e", 1000);
        let mut w = w.unwrap();
        w.write(&[1; 500]).unwrap();
        assert!(w.finish().is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert!(matches!(c.lookup("k", "e", 1000).0, Lookup::Filling(_)));
    }
}
