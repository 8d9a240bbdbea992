//! The disk cache of merged files (`--merge-cache DIR`, `--merge-cache-size BYTES`).
//!
//! - The directory is created private (0700) and must be a real directory owned by this user;
//!   a symbolic link in its place, or another owner, is refused. Files in it are opened with
//!   `O_NOFOLLOW` and must be regular files owned by this user: a planted symbolic link or
//!   foreign file is never followed or trusted.
//! - An entry is `<key>.parquet` and `<key>.json`. The JSON is the claim: the table, the
//!   slice, every input's identity (path, size, modification time, version) and the block
//!   instants merged, plus the merged file's size. The key is a hash of the claim, and an entry
//!   is reused only when its claim equals the one just computed from the inputs and the file
//!   has the claimed size and ends like a Parquet file. Anything else is a miss (and removed).
//! - Files are written under a temporary name and renamed into place (the Parquet file first,
//!   then its claim), so a crash never leaves an entry that passes the check half-written.
//! - LRU by bytes: after each new entry, the least recently used others are removed until the
//!   total fits `max_bytes` (an entry larger than the whole cache is still served).
//! - Side files: what a mount keeps of a table between mounts besides merged files (`delta/`'s
//!   log), one per name (`side-<name>`), written and checked as the entries are, replaced
//!   whole, and not counted against `max_bytes` (one per table, a few megabytes each).
//! - One merge per slice at a time: concurrent requests for a slice wait for the first, then
//!   find its result (or its error: a failure is remembered for the same inputs).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hudifs_storage::Storage;

use crate::config::MergeConfig;
use crate::error::{MergeError, Result};
use crate::materialise::{BlockVisibility, Identity, Materialise, MergeOptions, Quick, Ready};

/// Where and how big.
#[derive(Debug, Clone)]
pub struct CacheOptions {
    pub dir: PathBuf,
    pub max_bytes: u64,
}

/// What [`MergeCache::ensure`] gives.
#[derive(Debug)]
pub enum Ensured {
    /// The merged file is the base file unchanged (no logs, or no block counts): serve the
    /// base file itself.
    Base,
    /// The merged file, opened (so an eviction cannot take it away), with its path and size.
    Merged {
        file: File,
        path: PathBuf,
        size: u64,
    },
}

#[derive(serde::Serialize, serde::Deserialize, PartialEq, Eq, Debug, Clone)]
struct Claim {
    format: String,
    table: String,
    slice: String,
    inputs: Vec<Identity>,
    blocks: Vec<String>,
    /// The row filter of an incremental view (absent for snapshot views, whose claims keep
    /// the form they had before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_commits: Option<Vec<String>>,
    /// Which records are deletes ([`MergeConfig::rules`]; empty in claims of hudifs before
    /// delete markers, which therefore miss).
    #[serde(default)]
    rules: String,
    /// The view schema it is written in ([`Materialise::schema_id`]; absent where the slice is
    /// written in its own, so such claims keep the form they had before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    schema: Option<String>,
    size: Option<u64>,
}

impl Claim {
    /// The claim of `item` of `table` made from these inputs and block instants.
    fn of<M: Materialise + ?Sized>(
        table: &str,
        cfg: &MergeConfig,
        item: &M,
        inputs: Vec<Identity>,
        blocks: Vec<String>,
    ) -> Claim {
        Claim {
            format: item.format().to_string(),
            table: table.to_string(),
            slice: item.id(),
            inputs,
            blocks,
            keep_commits: item.keep_commits(),
            rules: cfg.rules(),
            schema: item.schema_id(),
            size: None,
        }
    }
}

/// The name of a claim's entry in the cache.
fn claim_key(claim: &Claim) -> String {
    hash_hex(&serde_json::to_vec(claim).unwrap_or_default())
}

struct Entry {
    size: u64,
    last_use: u64,
}

struct State {
    entries: HashMap<String, Entry>,
    total: u64,
    tick: u64,
}

/// The lock of one slice and how many callers hold or await it.
type Flight = (Arc<Mutex<()>>, usize);

/// The cache.
pub struct MergeCache {
    dir: PathBuf,
    max_bytes: u64,
    state: Mutex<State>,
    /// One lock per slice being asked for, with the number of callers holding or awaiting it.
    flights: Mutex<HashMap<String, Flight>>,
    /// Failures by key (the key names the inputs, so the same key fails the same way).
    failures: Mutex<HashMap<String, MergeError>>,
    seq: AtomicU64,
    merges: AtomicU64,
}

const MAX_FAILURES: usize = 4096;

fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

fn io(what: &str, path: &Path, e: std::io::Error) -> MergeError {
    MergeError::corrupt(format!("merge cache {}: {what}: {e}", path.display()))
}

/// Two FNV-1a 64-bit hashes with different offsets: a stable name for a claim (the claim
/// itself is checked on reuse, so a collision is a miss, never wrong data).
pub(crate) fn hash_hex(data: &[u8]) -> String {
    hudifs_storage::fnv::fnv1a_wide_hex(data.iter().copied(), 0x8422_2325_cbf2_9ce4)
}

/// Whether the process that named temporary file `name` (`tmp-…-<pid>-<n>`, `.json` for a
/// claim) still runs: several daemons may share a cache, and one opening it must not remove what
/// another is writing.
fn writer_alive(name: &str) -> bool {
    let stem = name.strip_suffix(".json").unwrap_or(name);
    let mut parts = stem.rsplit('-');
    let (_, pid) = (parts.next(), parts.next());
    pid.and_then(|p| p.parse::<u32>().ok())
        .is_some_and(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
}

/// Create a new file of the cache, private to this user, without following a symbolic link.
fn create_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Open a file in the cache without following a symbolic link; it must be a regular file of
/// ours.
fn open_private(path: &Path) -> std::io::Result<File> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    let m = f.metadata()?;
    if !m.is_file() || m.uid() != uid() {
        return Err(std::io::Error::other("not a regular file of this user"));
    }
    Ok(f)
}

/// Side file `name` of the cache in `dir` (letters, digits, `-`, `_` and `.`).
fn side_path(dir: &Path, name: &str) -> Option<PathBuf> {
    let fine = !name.is_empty()
        && name.len() <= 200
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    fine.then(|| dir.join(format!("side-{name}")))
}

/// Whether the cache in `dir` (opened or not) has side file `name`.
pub fn has_side_in(dir: &Path, name: &str) -> bool {
    side_path(dir, name).is_some_and(|p| p.is_file())
}

/// The bytes of side file `name` of the cache in `dir`, opened or not (as a table opens, before
/// its cache is): only from a real directory of this user, and a regular file of this user.
pub fn read_side_in(dir: &Path, name: &str) -> Option<Vec<u8>> {
    let d = std::fs::symlink_metadata(dir).ok()?;
    if !d.file_type().is_dir() || d.uid() != uid() {
        return None;
    }
    let mut f = open_private(&side_path(dir, name)?).ok()?;
    let len = f.metadata().ok()?.len();
    let mut out = Vec::with_capacity(usize::try_from(len).ok()?);
    f.read_to_end(&mut out).ok()?;
    Some(out)
}

impl MergeCache {
    /// Open (creating it private if missing) the cache directory and index what is in it.
    pub fn open(opts: &CacheOptions) -> Result<MergeCache> {
        let dir = &opts.dir;
        match std::fs::symlink_metadata(dir) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(parent) = dir.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| io("create parent", dir, e))?;
                }
                // Another daemon may create it first: what is there is checked below.
                match std::fs::DirBuilder::new().mode(0o700).create(dir) {
                    Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                        return Err(io("create", dir, e));
                    }
                    _ => {}
                }
            }
            Err(e) => return Err(io("stat", dir, e)),
            Ok(_) => {}
        }
        let m = std::fs::symlink_metadata(dir).map_err(|e| io("stat", dir, e))?;
        if !m.file_type().is_dir() {
            return Err(MergeError::corrupt(format!(
                "merge cache {}: not a directory (a symbolic link is not followed)",
                dir.display()
            )));
        }
        if m.uid() != uid() {
            return Err(MergeError::corrupt(format!(
                "merge cache {}: owned by uid {}, not by this user",
                dir.display(),
                m.uid()
            )));
        }
        if m.mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| io("chmod 0700", dir, e))?;
        }
        let mut state = State {
            entries: HashMap::new(),
            total: 0,
            tick: 0,
        };
        let mut found: Vec<(std::time::SystemTime, String, u64)> = Vec::new();
        for e in std::fs::read_dir(dir)
            .map_err(|e| io("list", dir, e))?
            .flatten()
        {
            let name = e.file_name().to_string_lossy().to_string();
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if name.starts_with("tmp-") {
                // Left by a crash; not one another daemon on this cache is writing now.
                if !writer_alive(&name) {
                    let _ = std::fs::remove_file(e.path());
                }
                continue;
            }
            if let Some(key) = name.strip_suffix(".parquet") {
                if m.file_type().is_file() && dir.join(format!("{key}.json")).is_file() {
                    found.push((
                        m.modified().unwrap_or(std::time::UNIX_EPOCH),
                        key.to_string(),
                        m.len(),
                    ));
                }
            }
        }
        found.sort();
        for (_, key, size) in found {
            state.tick += 1;
            state.total += size;
            state.entries.insert(
                key,
                Entry {
                    size,
                    last_use: state.tick,
                },
            );
        }
        Ok(MergeCache {
            dir: dir.clone(),
            max_bytes: opts.max_bytes,
            state: Mutex::new(state),
            flights: Mutex::new(HashMap::new()),
            failures: Mutex::new(HashMap::new()),
            seq: AtomicU64::new(0),
            merges: AtomicU64::new(0),
        })
    }

    /// Bytes the cache holds.
    pub fn total_bytes(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).total
    }

    /// Merges run so far (cache misses that merged).
    pub fn merges(&self) -> u64 {
        self.merges.load(Ordering::Relaxed)
    }

    /// The file of `item` (a merged slice, a change feed) for a view whose block visibility
    /// is `visible`: from the cache when an entry matches the inputs, else materialised now
    /// (once, however many ask at the same time). `table` names the table (e.g. its root or
    /// URL) so that one cache can serve several tables.
    pub fn ensure<M: Materialise + ?Sized>(
        &self,
        storage: &dyn Storage,
        table: &str,
        cfg: &MergeConfig,
        item: &M,
        visible: &dyn BlockVisibility,
        opts: &MergeOptions,
    ) -> Result<Ensured> {
        if item.served_as_is() {
            return Ok(Ensured::Base);
        }
        let id = format!("{table}\0{}", item.flight());
        self.in_flight(&id, || {
            if let Some(hit) = self.cached(storage, table, cfg, item, visible) {
                return Ok(hit);
            }
            crate::memory::with_memory(&opts.ceiling, |m| {
                self.ensure_in(storage, table, cfg, item, visible, &opts.with_memory(m))
            })
        })
    }

    /// The cached file of `item`, recognised from its inputs' identities and its log blocks'
    /// headers without reading a log record ([`Materialise::quick`]), if there is one. The
    /// claim is the one [`MergeCache::ensure_in`] makes from the whole inputs, so a hit here
    /// is the entry a full reading would find; anything else is left to that reading.
    fn cached<M: Materialise + ?Sized>(
        &self,
        storage: &dyn Storage,
        table: &str,
        cfg: &MergeConfig,
        item: &M,
        visible: &dyn BlockVisibility,
    ) -> Option<Ensured> {
        match item.quick(storage, visible)? {
            Quick::AsIs => Some(Ensured::Base),
            Quick::Inputs { identities, blocks } => {
                let claim = Claim::of(table, cfg, item, identities, blocks);
                self.lookup(&claim_key(&claim), &claim)
            }
        }
    }

    /// [`MergeCache::ensure`], one attempt within the memory of `opts`.
    fn ensure_in<M: Materialise + ?Sized>(
        &self,
        storage: &dyn Storage,
        table: &str,
        cfg: &MergeConfig,
        item: &M,
        visible: &dyn BlockVisibility,
        opts: &MergeOptions,
    ) -> Result<Ensured> {
        let started = std::time::Instant::now();
        let Some(prepared) = item.prepare(storage, cfg, visible, opts)? else {
            return Ok(Ensured::Base);
        };
        let prepared_ms = started.elapsed().as_millis();
        let claim = Claim::of(
            table,
            cfg,
            item,
            prepared.identities().to_vec(),
            prepared.block_instants().to_vec(),
        );
        let what = format!("{} (prepared in {prepared_ms} ms)", item.describe());
        self.materialise(claim, &what, |out| prepared.write_to(out))
    }

    /// A file derived from another entry of the cache (`source`, the path
    /// [`MergeCache::ensure`] gave): from the cache when one was derived from the same entry the
    /// same way (`format` names the rewriting, `variant` what else decides its bytes, such as
    /// the schema it is written in), else written now by `write` (once, however many ask). The
    /// source entry's name is the hash of its whole claim, so the derived file's claim names its
    /// inputs through it.
    pub fn derive(
        &self,
        table: &str,
        source: &Path,
        format: &str,
        variant: &str,
        write: impl FnOnce(BufWriter<&File>) -> Result<u64>,
    ) -> Result<Ensured> {
        let from = source
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|_| source.parent() == Some(self.dir.as_path()))
            .ok_or_else(|| {
                MergeError::corrupt(format!(
                    "merge cache {}: {} is not one of its entries",
                    self.dir.display(),
                    source.display()
                ))
            })?;
        let claim = Claim {
            format: format.to_string(),
            table: table.to_string(),
            slice: from.to_string(),
            inputs: Vec::new(),
            blocks: Vec::new(),
            keep_commits: None,
            rules: String::new(),
            schema: Some(variant.to_string()),
            size: None,
        };
        let id = format!("{table}\0{format}\0{from}\0{variant}");
        let what = format!("{format} of {from}");
        self.in_flight(&id, || self.materialise(claim, &what, write))
    }

    /// Run `f` holding the lock of `id`: one merge per slice at a time.
    fn in_flight(&self, id: &str, f: impl FnOnce() -> Result<Ensured>) -> Result<Ensured> {
        let flight = {
            let mut f = self.flights.lock().unwrap_or_else(|e| e.into_inner());
            let e = f.entry(id.to_string()).or_default();
            e.1 += 1;
            e.0.clone()
        };
        let guard = flight.lock().unwrap_or_else(|e| e.into_inner());
        let result = f();
        drop(guard);
        let mut f = self.flights.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = f.get_mut(id) {
            e.1 -= 1;
            if e.1 == 0 {
                f.remove(id);
            }
        }
        result
    }

    /// The cached file of `claim`, or the one `write` produces now (into a temporary file,
    /// renamed into place with its claim). `what` names it in the log.
    fn materialise(
        &self,
        mut claim: Claim,
        what: &str,
        write: impl FnOnce(BufWriter<&File>) -> Result<u64>,
    ) -> Result<Ensured> {
        let key = claim_key(&claim);
        if let Some(e) = self
            .failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return Err(e.clone());
        }
        if let Some(hit) = self.lookup(&key, &claim) {
            return Ok(hit);
        }
        // A miss: merge into a temporary file, then rename into place.
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let tmp = self
            .dir
            .join(format!("tmp-{key}-{}-{n}", std::process::id()));
        let file = create_private(&tmp).map_err(|e| io("create", &tmp, e))?;
        self.merges.fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let written = write(BufWriter::new(&file));
        let bytes = match written {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                // A merge stopped for want of memory is started again, not remembered.
                if e.needed == 0 {
                    let mut f = self.failures.lock().unwrap_or_else(|e| e.into_inner());
                    if f.len() >= MAX_FAILURES {
                        f.clear();
                    }
                    f.insert(key, e.clone());
                }
                return Err(e);
            }
        };
        claim.size = Some(bytes);
        log::info!(
            "merged {what} ({bytes} bytes, written in {} ms)",
            started.elapsed().as_millis()
        );
        let path = self.dir.join(format!("{key}.parquet"));
        let claim_path = self.dir.join(format!("{key}.json"));
        let claim_tmp = self
            .dir
            .join(format!("tmp-{key}-{}-{n}.json", std::process::id()));
        let finish = || -> std::io::Result<()> {
            file.sync_data()?;
            std::fs::rename(&tmp, &path)?;
            let mut c = create_private(&claim_tmp)?;
            c.write_all(&serde_json::to_vec(&claim).unwrap_or_default())?;
            c.sync_data()?;
            std::fs::rename(&claim_tmp, &claim_path)
        };
        if let Err(e) = finish() {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_file(&claim_tmp);
            return Err(io("write", &path, e));
        }
        drop(file);
        let opened = open_private(&path).map_err(|e| io("open", &path, e))?;
        self.admit(&key, bytes);
        Ok(Ensured::Merged {
            file: opened,
            path,
            size: bytes,
        })
    }

    /// A matching entry, opened; a mismatching one is removed.
    fn lookup(&self, key: &str, claim: &Claim) -> Option<Ensured> {
        let path = self.dir.join(format!("{key}.parquet"));
        let claim_path = self.dir.join(format!("{key}.json"));
        let stored: Option<Claim> = open_private(&claim_path).ok().and_then(|mut f| {
            let mut text = Vec::new();
            Read::by_ref(&mut f)
                .take(1 << 20)
                .read_to_end(&mut text)
                .ok()?;
            serde_json::from_slice(&text).ok()
        });
        let stored = stored?;
        let size = stored.size;
        let expected = Claim {
            size,
            ..claim.clone()
        };
        let ok = (stored == expected)
            .then(|| open_private(&path).ok())
            .flatten()
            .and_then(|mut f| {
                let len = f.metadata().ok()?.len();
                if Some(len) != size || len < 12 {
                    return None;
                }
                let mut tail = [0u8; 4];
                f.seek(SeekFrom::End(-4)).ok()?;
                f.read_exact(&mut tail).ok()?;
                f.seek(SeekFrom::Start(0)).ok()?;
                (&tail == b"PAR1").then_some((f, len))
            });
        match ok {
            Some((file, len)) => {
                let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
                s.tick += 1;
                let tick = s.tick;
                match s.entries.get_mut(key) {
                    Some(e) => e.last_use = tick,
                    None => {
                        s.total += len;
                        s.entries.insert(
                            key.to_string(),
                            Entry {
                                size: len,
                                last_use: tick,
                            },
                        );
                    }
                }
                Some(Ensured::Merged {
                    file,
                    path,
                    size: len,
                })
            }
            None => {
                log::info!("merge cache: entry {key} does not match its inputs; removed");
                self.remove(key);
                None
            }
        }
    }

    fn remove(&self, key: &str) {
        let _ = std::fs::remove_file(self.dir.join(format!("{key}.json")));
        let _ = std::fs::remove_file(self.dir.join(format!("{key}.parquet")));
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = s.entries.remove(key) {
            s.total = s.total.saturating_sub(e.size);
        }
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the cache has side file `name`.
    pub fn has_side(&self, name: &str) -> bool {
        has_side_in(&self.dir, name)
    }

    /// The bytes of side file `name` (letters, digits, `-`, `_` and `.`), if the cache has it.
    pub fn read_side(&self, name: &str) -> Option<Vec<u8>> {
        read_side_in(&self.dir, name)
    }

    /// Write side file `name`: under a temporary name, then renamed into place (a crash
    /// leaves the one before or none, never half of one).
    pub fn write_side(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let path = self
            .side_path(name)
            .ok_or_else(|| MergeError::corrupt(format!("merge cache: side file name {name:?}")))?;
        let n = self.seq.fetch_add(1, Ordering::Relaxed);
        let tmp = self
            .dir
            .join(format!("tmp-side-{name}-{}-{n}", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = create_private(&tmp)?;
            f.write_all(bytes)?;
            f.sync_data()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io("write", &path, e)
        })
    }

    fn side_path(&self, name: &str) -> Option<PathBuf> {
        side_path(&self.dir, name)
    }

    /// Account a new entry and evict the least recently used others beyond the size.
    fn admit(&self, key: &str, size: u64) {
        let mut victims = Vec::new();
        {
            let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
            s.tick += 1;
            let tick = s.tick;
            if let Some(old) = s.entries.insert(
                key.to_string(),
                Entry {
                    size,
                    last_use: tick,
                },
            ) {
                s.total = s.total.saturating_sub(old.size);
            }
            s.total += size;
            while s.total > self.max_bytes {
                let Some(oldest) = s
                    .entries
                    .iter()
                    .filter(|(k, _)| k.as_str() != key)
                    .min_by_key(|(_, e)| e.last_use)
                    .map(|(k, _)| k.clone())
                else {
                    break;
                };
                if let Some(e) = s.entries.remove(&oldest) {
                    s.total = s.total.saturating_sub(e.size);
                }
                victims.push(oldest);
            }
        }
        for k in victims {
            let _ = std::fs::remove_file(self.dir.join(format!("{k}.json")));
            let _ = std::fs::remove_file(self.dir.join(format!("{k}.parquet")));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opening_keeps_what_a_live_daemon_writes_and_removes_a_crashs_leftovers() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("cache");
        let opts = CacheOptions {
            dir: dir.clone(),
            max_bytes: 1 << 20,
        };
        let c = MergeCache::open(&opts).unwrap();
        let me = std::process::id();
        let live = [
            format!("tmp-k-{me}-0"),
            format!("tmp-k-{me}-1.json"),
            format!("tmp-side-delta-x.log-{me}-2"),
        ];
        let dead = ["tmp-k-999999999-0", "tmp-k-999999999-1.json", "tmp-junk"];
        for n in live.iter().map(String::as_str).chain(dead) {
            std::fs::write(dir.join(n), b"x").unwrap();
        }
        c.write_side("delta-x.log", b"saved").unwrap();
        drop(c);
        let c = MergeCache::open(&opts).unwrap();
        for n in &live {
            assert!(dir.join(n).exists(), "{n}: another daemon's, being written");
        }
        for n in dead {
            assert!(!dir.join(n).exists(), "{n}: a crash's");
        }
        assert_eq!(c.read_side("delta-x.log").as_deref(), Some(&b"saved"[..]));
        assert!(c.has_side("delta-x.log"));
        assert!(!c.has_side("../escape"));
        assert!(c.read_side("delta-y.log").is_none());
    }

    /// A Parquet-like file: it ends with `PAR1`, which is what a lookup checks.
    fn write_parquet_like(mut out: BufWriter<&File>, body: &[u8]) -> Result<u64> {
        out.write_all(body)
            .and_then(|_| out.write_all(b"PAR1"))
            .and_then(|_| out.flush())
            .map_err(|e| MergeError::corrupt(e.to_string()))?;
        Ok(body.len() as u64 + 4)
    }

    #[test]
    fn a_derived_file_is_written_once_per_source_and_variant() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = MergeCache::open(&CacheOptions {
            dir: tmp.path().join("c"),
            max_bytes: 1 << 20,
        })
        .unwrap();
        let source = tmp.path().join("c/0123.parquet");
        let derive = |variant: &str, body: &'static [u8]| match cache
            .derive("t", &source, "f", variant, |o| write_parquet_like(o, body))
            .unwrap()
        {
            Ensured::Merged { path, size, .. } => (path, size),
            Ensured::Base => panic!("a derived file is never the base"),
        };
        let (a, size) = derive("s1", b"twelve bytes");
        assert_eq!(size, 16);
        assert_eq!(derive("s1", b"other").0, a, "found again, not written");
        assert_eq!(cache.merges(), 1);
        assert_ne!(derive("s2", b"other").0, a);
        assert_eq!(cache.merges(), 2);
        // Only an entry of this cache can be derived from.
        let outside = tmp.path().join("0123.parquet");
        assert!(cache
            .derive("t", &outside, "f", "s1", |o| write_parquet_like(o, b"x"))
            .is_err());
    }

    #[test]
    fn claim_names_are_the_ones_earlier_builds_gave() {
        // Computed by the hash as it was written here before hudifs_storage::fnv: entries
        // written by an earlier build are found again.
        assert_eq!(
            super::hash_hex(br#"{"claim":1}"#),
            "40df85c1fb64cfa267bcb87db2ca3fce"
        );
    }
}
