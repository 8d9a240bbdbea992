//! `delta/`: the table as a Delta Lake table (docs/SEMANTICS.md §11). `delta/_delta_log/`
//! holds one version per completed write instant, rendered from the snapshot views this file
//! system already serves; `delta/<instant>/` is the snapshot of that instant (`as_of/<instant>/`,
//! or `merged/as_of/<instant>/` for a merge-on-read table) under its own inode numbers, and a
//! version's `add` actions name the files there: each file under the instant of the version
//! that added it, so an unchanged file keeps its path from version to version.
//! `delta/_change_data/<instant>/` is the change feed of a data write (`cdc/` of the window that
//! selects it alone, under its own inode numbers), each feed file served as a change data file
//! in its version's schema; the version's `cdc` actions name them (§11.4): `delta/changes.rs`.
//! The log saved for the next mount, read back and built ahead (§11.5): `delta/saved.rs`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use hudifs_core::error::{Error, Result};
use hudifs_core::instant_time::InstantTime;
use hudifs_core::rules::{write_kind, WriteKind};
use hudifs_core::snapshot::Snapshot;
use hudifs_storage::sync::lock;

use crate::delta::{self, stats::FileFacts, DeltaFile, DeltaLog, LogFile, Version};

use super::inode::Node;

mod ahead;
mod changes;
mod saved;

use super::{join, DirEntry, Entry, HudiFs, Kind, OpenHandle, TTL_FRESH};
pub use saved::wait_for_saves;
pub(super) use saved::{manifests_saved_name, preload, spawn_save};
use saved::{table_facts, Preload, SavedFacts, Saving};

/// A new file's size and footer facts.
type Sized = (u64, Arc<FileFacts>);

/// Footers read side by side while a version is built.
const FOOTER_READERS: usize = 8;
/// The same on an object store, where a read is a request that mostly waits.
const FOOTER_READERS_REMOTE: usize = 32;

/// The name of the log directory in `delta/`.
pub const LOG_DIR: &str = "_delta_log";

/// The name of the change data directory in `delta/`.
pub const CHANGES_DIR: &str = "_change_data";

/// What `delta/` keeps: the log of the newest snapshot it was asked for and the footer facts of
/// every file a version named.
#[derive(Default)]
pub(super) struct DeltaCache {
    log: Mutex<Option<Arc<Built>>>,
    facts: Mutex<HashMap<String, Arc<FileFacts>>>,
    /// The distinct schemas of the files read (a table's files share a few).
    schemas: Mutex<Schemas>,
    /// How much of a file's end one footer read takes: for the facts (a footer without its
    /// bloom filter), and for `iceberg/`'s whole footers.
    tail: delta::stats::TailGuess,
    whole_tail: delta::stats::TailGuess,
    /// The Arrow schemas of the files' Parquet schemas, each converted once.
    arrow: delta::stats::ArrowSchemas,
    /// Saving the log for the next mount (`delta/saved.rs`).
    saving: Mutex<Saving>,
    /// How many versions the first build took from the log the last mount saved.
    taken: std::sync::atomic::AtomicUsize,
    /// Held while a log is built.
    building: Mutex<()>,
    /// The saved log, being read since the table was opened.
    preload: Mutex<Option<Preload>>,
}

/// The footer of a file of each Parquet schema (saved with the log: `delta/saved.rs`); the
/// schemas themselves are held once by `DeltaCache::arrow`.
#[derive(Default)]
struct Schemas {
    footers: Vec<(Arc<parquet::schema::types::Type>, Arc<Vec<u8>>)>,
}

/// A log as far as it could be built: the versions before the first that failed, and why that
/// one failed (its log file and every later one fail to read with this error).
pub(super) struct Built {
    pub log: DeltaLog,
    /// The number of the first version that failed, and the error that stopped it.
    pub failed: Option<(u64, Error)>,
    /// Every version's number, built or not: the log files `_delta_log/` lists.
    pub numbers: Vec<u64>,
}

impl Built {
    /// What `_delta_log/` lists: a log file per version, built or not, then the checkpoints.
    fn listed(&self) -> Vec<LogFile> {
        let mut out: Vec<LogFile> = self.numbers.iter().map(|n| LogFile::Json(*n)).collect();
        out.extend(
            self.log
                .files()
                .into_iter()
                .filter(|f| !matches!(f, LogFile::Json(_))),
        );
        out
    }
}

/// The file groups write `inst` changed, by partition: those its write stats name and those it
/// replaced; `None` when its metadata cannot be read or a stat names no group.
fn touched_groups(
    snap: &Snapshot,
    inst: &hudifs_core::timeline::Instant,
) -> Option<BTreeMap<String, BTreeSet<String>>> {
    let m = snap.meta.commit(inst).ok()?;
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let groups = m
        .write_stats
        .iter()
        .map(|w| (&w.partition, &w.file_id))
        .chain(m.replaced.iter().map(|g| (&g.partition, &g.file_id)));
    for (partition, fid) in groups {
        if fid.is_empty() {
            return None;
        }
        out.entry(partition.clone())
            .or_default()
            .insert(fid.clone());
    }
    Some(out)
}

/// Whether version `v` has change data files (worked out or not).
fn has_changes(v: &Arc<Version>) -> bool {
    v.wants_changes
}

/// The files of a version's map.
type Files = imbl::OrdMap<Arc<str>, Arc<DeltaFile>>;

/// Move the files of `files` whose path starts with `prefix` and lies in partition `part` to
/// `to`.
fn move_files(files: &mut Files, to: &mut Files, prefix: &str, part: &str) {
    let keys: Vec<Arc<str>> = files
        .range::<_, str>((
            std::ops::Bound::Included(prefix),
            std::ops::Bound::Unbounded,
        ))
        .take_while(|(k, _)| k.starts_with(prefix))
        .filter(|(k, _)| partition_of(k) == part)
        .map(|(k, _)| k.clone())
        .collect();
    for k in keys {
        if let Some(f) = files.remove(&*k) {
            to.insert(k, f);
        }
    }
}

/// The partition of a file's path in a view.
fn partition_of(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(p, _)| p)
}

fn epoch_ms(instant: &str) -> i64 {
    hudifs_core::timefmt::instant_as_utc(instant)
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl HudiFs {
    /// The node a name in `delta/` stands for: the log directory, or the data directory of a
    /// completed write instant.
    pub(super) fn delta_child(&self, name: &str) -> Result<Node> {
        if name == LOG_DIR {
            return Ok(Node::DeltaLogDir);
        }
        if name == CHANGES_DIR && self.delta_log()?.log.versions.iter().any(has_changes) {
            return Ok(Node::DeltaChangesDir);
        }
        let snap = self.snapshot();
        let t = InstantTime::parse(name)
            .filter(|t| snap.timeline().completed.contains_key(t) && t.as_str() == name)
            .ok_or_else(|| Error::NotFound(format!("delta/{name}")))?;
        self.delta_root(t, snap.cfg.is_mor())
    }

    /// The entries of `delta/`: the log directory and the data directory of every version in
    /// the log.
    pub(super) fn delta_entries(&self) -> Result<Vec<DirEntry>> {
        let snap = self.snapshot();
        let mut out = vec![DirEntry {
            name: Arc::from(LOG_DIR),
            entry: self.dir_entry(Node::DeltaLogDir.ino(), TTL_FRESH),
        }];
        // The data directories of the versions the log has (not those of history the cleaner
        // removed, whose views refuse).
        let built = self.delta_log()?;
        if built.log.versions.iter().any(has_changes) {
            out.push(DirEntry {
                name: Arc::from(CHANGES_DIR),
                entry: self.dir_entry(Node::DeltaChangesDir.ino(), TTL_FRESH),
            });
        }
        for v in &built.log.versions {
            let t = InstantTime::parse(&v.instant)
                .ok_or_else(|| Error::Invalid(format!("instant {}", v.instant)))?;
            let node = self.delta_root(t, snap.cfg.is_mor())?;
            out.push(DirEntry {
                name: Arc::from(v.instant.as_str()),
                entry: self.dir_entry(node.ino(), TTL_FRESH),
            });
        }
        Ok(out)
    }

    /// The node of a name in `delta/_delta_log/`.
    pub(super) fn delta_log_child(&self, name: &str) -> Result<Node> {
        let missing = || Error::NotFound(format!("delta/{LOG_DIR}/{name}"));
        let f = LogFile::parse(name).ok_or_else(missing)?;
        let built = self.delta_log()?;
        if !built.listed().contains(&f) {
            return Err(missing());
        }
        Ok(Node::DeltaLogFile { file: f.id() })
    }

    /// The entries of `delta/_delta_log/`: every version, built or not (a version that could
    /// not be built is listed, so a reader fails on it rather than taking an older version for
    /// the newest), the checkpoints and `_last_checkpoint`.
    pub(super) fn delta_log_entries(&self) -> Result<Vec<DirEntry>> {
        let built = self.delta_log()?;
        Ok(built
            .listed()
            .into_iter()
            .map(|f| {
                let ino = Node::DeltaLogFile { file: f.id() }.ino();
                // A checkpoint's size is known once it is written, a version's log file with
                // change data once they are worked out: on `stat`.
                let entry = match (built.log.version_of(f), built.log.known_len(f)) {
                    (Some(v), Some(len)) => self.delta_log_entry(ino, v, len),
                    _ => self.owner.rendered_file(ino, 0, None, Duration::ZERO),
                };
                DirEntry {
                    name: Arc::from(f.name()),
                    entry,
                }
            })
            .collect())
    }

    fn delta_log_entry(&self, ino: u64, v: &Version, len: usize) -> Entry {
        let mtime = UNIX_EPOCH + Duration::from_millis(u64::try_from(v.timestamp_ms).unwrap_or(0));
        self.owner
            .rendered_file(ino, len as u64, Some(mtime), TTL_FRESH)
    }

    /// The entry of log file `id`.
    pub(super) fn delta_log_file_entry(&self, id: u64) -> Result<Entry> {
        let (bytes, v) = self.delta_log_bytes(id)?;
        let ino = Node::DeltaLogFile { file: id }.ino();
        Ok(self.delta_log_entry(ino, &v, bytes.len()))
    }

    /// What opening log file `id` holds.
    pub(super) fn open_delta_log_file(&self, id: u64) -> Result<OpenHandle> {
        Ok(OpenHandle::Bytes(self.delta_log_bytes(id)?.0))
    }

    fn delta_log_bytes(&self, id: u64) -> Result<(Arc<Vec<u8>>, Arc<Version>)> {
        let f = LogFile::from_id(id)
            .ok_or_else(|| Error::NotFound(format!("delta/{LOG_DIR} file {id}")))?;
        let built = self.delta_log()?;
        let missing = || match (&built.failed, f) {
            (Some((first, e)), LogFile::Json(n) | LogFile::Checkpoint(n)) if n >= *first => {
                e.clone()
            }
            _ => Error::NotFound(format!("delta/{LOG_DIR}/{}", f.name())),
        };
        let v = built.log.version_of(f).ok_or_else(missing)?.clone();
        if let LogFile::Json(_) = f {
            self.ensure_changes(&v)?;
        }
        // A checkpoint written now is saved with the log, for the next mount.
        let new_checkpoint =
            matches!(f, LogFile::Checkpoint(_)) && built.log.known_len(f).is_none();
        let bytes = built.log.bytes(f).ok_or_else(missing)?.map_err(|e| {
            let e = Error::Corrupt(format!("delta/{LOG_DIR}/{}: {e}", f.name()));
            log::warn!("{e}");
            e
        })?;
        if new_checkpoint {
            self.save_delta_checkpoint(&built, f, &v, &bytes);
        }
        Ok((bytes, v))
    }

    /// The log of the current snapshot, built on first use after each change of the table.
    pub(super) fn delta_log(&self) -> Result<Arc<Built>> {
        let snap = self.snapshot();
        if let Some(b) = lock(&self.delta.log).as_ref() {
            if b.log.generation == snap.generation {
                return Ok(b.clone());
            }
        }
        // One build at a time (a reader and the build ahead, `warm_delta`): the second finds
        // the first's.
        let _building = lock(&self.delta.building);
        if let Some(b) = lock(&self.delta.log).as_ref() {
            if b.log.generation == snap.generation {
                return Ok(b.clone());
            }
        }
        let (built, changed) = self.build_delta_log(&snap)?;
        let built = Arc::new(built);
        *lock(&self.delta.log) = Some(built.clone());
        if changed {
            self.save_delta_log(built.clone());
        }
        Ok(built)
    }

    /// The log of `snap`, and whether it has versions the log before it (or the one saved by
    /// the last mount) did not.
    fn build_delta_log(&self, snap: &Arc<Snapshot>) -> Result<(Built, bool)> {
        let tl = snap.timeline();
        // Version numbers count every write since the table began, archived ones included.
        let offset = snap.archived_write_count().inspect_err(|e| {
            log::warn!("delta/: {e}");
        })? as u64;
        let merged = snap.cfg.is_mor();
        let table = table_facts(&snap.cfg, &self.opts);
        let mut numbers: Vec<u64> = Vec::new();
        let mut versions: Vec<Arc<Version>> = Vec::new();
        let mut failed = None;
        let cleaned = snap.ctx.retention_bound();
        let pending = tl.oldest_pending();
        let mut old = lock(&self.delta.log).clone();
        // A first build starts from the log the last mount saved, if there is one.
        let mut saved_facts: Option<SavedFacts> = None;
        if old.is_none() {
            if let Some((o, f)) = self.load_saved_delta(snap, &table) {
                old = Some(o);
                saved_facts = Some(f);
            }
        }
        let mut changed = false;
        // Every write's commit metadata, decoded side by side first (each version reads it; a
        // table of a thousand writes spends most of a first build decoding them one by one).
        // A later build keeps the versions it can and decodes only the new writes'.
        if old.is_none() {
            let writes: Vec<&Arc<hudifs_core::timeline::Instant>> = tl
                .completed
                .iter()
                .filter(|(t, _)| cleaned.is_none_or(|b| *t >= b))
                .map(|(_, i)| i)
                .collect();
            hudifs_core::side_by_side::map(&writes, hudifs_core::side_by_side::cores(), |inst| {
                let _ = snap.meta.commit(inst);
            });
        }
        // A first build of a copy-on-write table: the versions after the first are resolved
        // ahead, side by side (`ahead.rs`).
        let ahead = (old.is_none() && !merged)
            .then(|| ahead::Ahead::new(tl.completed.iter().map(|(t, i)| (t, &**i)).collect()));
        // On an object store a worker mostly waits for the store; on a local disk there is one
        // per core.
        let workers = if self.store.is_object_store() {
            FOOTER_READERS_REMOTE
        } else {
            hudifs_core::side_by_side::cores()
        };
        std::thread::scope(|scope| {
            if let Some(a) = &ahead {
                for _ in 0..workers {
                    scope.spawn(|| a.work(self, snap));
                }
            }
            for (i, (t, inst)) in tl.completed.iter().enumerate() {
                let n = offset + i as u64;
                if failed.is_some() {
                    numbers.push(n);
                    continue;
                }
                // A version the last build made is kept while nothing can change it: no pending
                // instant before it, not cleaned since, the versions before it kept as well.
                let kept = old.as_ref().and_then(|o| {
                    let v = o.log.version_of(LogFile::Json(n))?;
                    let chained = match versions.last() {
                        Some(l) => o
                            .log
                            .version_of(LogFile::Json(n.checked_sub(1)?))
                            .is_some_and(|p| Arc::ptr_eq(p, l)),
                        None => o.log.versions.first().is_some_and(|f| f.number == n),
                    };
                    let stable = pending.is_none_or(|p| t < p) && cleaned.is_none_or(|b| t >= b);
                    // The same write: its instant, action and completion time.
                    let completion = inst
                        .completion
                        .as_ref()
                        .filter(|_| snap.cfg.version >= 8)
                        .map(|c| c.to_string());
                    let same = v.instant == t.as_str()
                        && v.action == inst.action.name()
                        && v.completion == completion;
                    (same && chained && stable).then(|| v.clone())
                });
                if let Some(v) = kept {
                    if let Some(saved) = &saved_facts {
                        self.adopt_saved_facts(&v, saved);
                    }
                    numbers.push(n);
                    versions.push(v);
                    continue;
                }
                let resolved = ahead.as_ref().and_then(|a| a.take(i));
                match self.delta_version(snap, n, t, inst, versions.last(), resolved) {
                    Ok(v) => {
                        changed = true;
                        numbers.push(n);
                        versions.push(Arc::new(v));
                    }
                    // History the cleaner removed (§5.3): the log starts after it, at a
                    // checkpoint, and a savepoint before it is not a version.
                    Err(Error::Refused(why)) if cleaned.is_some_and(|b| t < b) => {
                        log::debug!("delta/: version {n} (instant {t}) not served: {why}");
                        versions.clear();
                        numbers.clear();
                    }
                    Err(e) => {
                        log::warn!("delta/: version {n} (instant {t}) refused: {e}");
                        numbers.push(n);
                        failed = Some((n, e));
                    }
                }
            }
            if let Some(a) = &ahead {
                a.finish();
            }
        });
        if saved_facts.is_some() {
            let from_saved = |v: &Arc<Version>| {
                old.as_ref().is_some_and(|o| {
                    o.log
                        .version_of(LogFile::Json(v.number))
                        .is_some_and(|w| Arc::ptr_eq(w, v))
                })
            };
            let taken = versions.iter().filter(|v| from_saved(v)).count();
            self.delta
                .taken
                .store(taken, std::sync::atomic::Ordering::Relaxed);
            log::info!(
                "delta/: {taken} of {} versions taken from the saved log",
                numbers.len()
            );
        }
        let built = Built {
            log: DeltaLog::new(
                snap.generation,
                table,
                versions,
                old.as_ref().map(|o| &o.log),
            ),
            failed,
            numbers,
        };
        Ok((built, changed))
    }

    /// Version `n`: the files of instant `t`'s snapshot, each under the version that added it.
    /// After the first, only the partitions the write changed are walked (its commit metadata
    /// says which); every other keeps the files of the version before.
    fn delta_version(
        &self,
        snap: &Arc<Snapshot>,
        n: u64,
        t: &InstantTime,
        inst: &hudifs_core::timeline::Instant,
        prev: Option<&Arc<Version>>,
        resolved: Option<ahead::Walked>,
    ) -> Result<Version> {
        let merged = snap.cfg.is_mor();
        let completion = inst.completion.as_ref().map(|c| c.to_string());
        let timestamp_ms = epoch_ms(completion.as_deref().unwrap_or(t.as_str()));
        let root = self.delta_root(t.clone(), merged)?;
        // A view that refuses (cleaned history, unreadable metadata) refuses the version.
        let view = match root {
            Node::ViewDir { view, .. } => Some((view, self.view(view)?)),
            _ => None,
        };
        // The previous version's files, less those of the partitions walked again (`dropped`):
        // what the walk finds again with the same name stays as it was.
        let mut files = prev.map(|p| p.files.clone()).unwrap_or_default();
        let mut dropped = Files::new();
        let mut walked = Vec::new();
        // A copy-on-write table's version: only the groups the write touched are resolved again
        // (a version of a big table touches a few groups of many partitions).
        let groups = prev.and_then(|_| touched_groups(snap, inst));
        if let (Some(groups), Some((view, v)), false) = (&groups, &view, merged) {
            for (part, fids) in groups {
                for fid in fids {
                    let prefix = join(part, &format!("{fid}_"));
                    move_files(&mut files, &mut dropped, &prefix, part);
                }
            }
            walked = match resolved {
                Some(w) => w,
                None => self.resolve_groups_of(*view, v, groups)?,
            };
        } else {
            match groups {
                Some(touched) => {
                    for part in touched.keys() {
                        let prefix = if part.is_empty() {
                            String::new()
                        } else {
                            format!("{part}/")
                        };
                        move_files(&mut files, &mut dropped, &prefix, part);
                        self.delta_walk(root, part, false, &mut walked)?;
                    }
                }
                None => {
                    dropped = std::mem::take(&mut files);
                    self.delta_walk(root, "", true, &mut walked)?;
                }
            }
        }
        walked.sort();
        let mut new = Vec::new();
        for (rel, ino) in walked {
            match dropped.remove_with_key(rel.as_str()) {
                Some((k, f)) => {
                    files.insert(k, f);
                }
                None => new.push((rel, ino)),
            }
        }
        let meta = snap.meta.commit(inst).ok();
        let data_change = write_kind(inst.planned, meta.as_deref()) == WriteKind::Data;
        let mut added = Vec::new();
        let mut schema = None;
        let mut arrow = None;
        for (rel, (size, facts)) in self.delta_new_files(t, &new)? {
            let path = delta::log::encode_path(&join(t.as_str(), &rel));
            if schema.is_none() {
                schema = Some(
                    delta::schema::delta_schema(&facts.schema)
                        .map_err(|e| Error::Unsupported(format!("{rel}: {e}")))?,
                );
                arrow = Some(facts.schema.clone());
            }
            let f = Arc::new(DeltaFile {
                path,
                size,
                modified_ms: timestamp_ms,
                stats: Some(facts.stats.clone()),
                data_change,
            });
            added.push(f.clone());
            files.insert(Arc::from(rel), f);
        }
        let arrow = arrow.or_else(|| prev.and_then(|p| p.arrow.clone()));
        Ok(Version {
            // Without meta fields Hudi has no change feed (§5.5).
            wants_changes: self.opts.delta_change_data
                && snap.cfg.populate_meta_fields
                && data_change
                && arrow.is_some(),
            number: n,
            instant: t.to_string(),
            completion: completion.filter(|_| snap.cfg.version >= 8),
            action: inst.action.name().to_string(),
            timestamp_ms,
            schema: schema.or_else(|| prev.and_then(|p| p.schema.clone())),
            arrow,
            files,
            removed: dropped.values().cloned().collect(),
            added,
            data_change,
            changes: Default::default(),
        })
    }

    /// The size and footer facts of the files version `t` adds (`(path in the view, inode)`, in
    /// order), read side by side: a version of a big write adds thousands, each a read of its
    /// end (two when its footer is bigger than the footers before it) and a footer to decode (a
    /// merged slice is merged for its size).
    fn delta_new_files(
        &self,
        t: &InstantTime,
        new: &[(String, u64)],
    ) -> Result<Vec<(String, Sized)>> {
        let one = |rel: &str, ino: u64| -> Result<Sized> {
            if !rel.ends_with(".parquet") {
                // A Lance or ORC base file: Delta tables hold Parquet files only.
                return Err(Error::Unsupported(format!(
                    "{rel}: Delta tables hold Parquet data files only"
                )));
            }
            let size = self.getattr(ino)?.attr.size;
            let path = delta::log::encode_path(&join(t.as_str(), rel));
            Ok((size, self.delta_facts(&path, ino)?))
        };
        // On an object store a footer read is mostly waiting for the store. Footers read
        // already (by the workers ahead of a first build) are taken in place.
        let cached = {
            let facts = lock(&self.delta.facts);
            new.iter().all(|(rel, _)| {
                facts.contains_key(&delta::log::encode_path(&join(t.as_str(), rel)))
            })
        };
        let threads = if cached {
            1
        } else if self.store.is_object_store() {
            FOOTER_READERS_REMOTE
        } else {
            FOOTER_READERS
        };
        hudifs_core::side_by_side::map(new, threads, |(rel, ino)| {
            Ok((rel.clone(), one(rel, *ino)?))
        })
        .into_iter()
        .collect()
    }

    /// The files of directory `dir` of the view whose root is `root` (and of every directory
    /// below it when `deep`), as (path in the view, inode); none when the view has no such
    /// directory.
    fn delta_walk(
        &self,
        root: Node,
        dir: &str,
        deep: bool,
        out: &mut Vec<(String, u64)>,
    ) -> Result<()> {
        let mut ino = root.ino();
        if !dir.is_empty() {
            for c in dir.split('/') {
                match self.lookup(ino, std::ffi::OsStr::new(c)) {
                    Ok(e) if e.attr.kind == Kind::Dir => ino = e.attr.ino,
                    Ok(_) | Err(Error::NotFound(_)) => return Ok(()),
                    Err(e) => return Err(e),
                }
            }
        }
        let mut stack = vec![(ino, dir.to_string())];
        while let Some((ino, path)) = stack.pop() {
            for e in self.readdir_entries(ino)? {
                let rel = join(&path, &e.name);
                match e.entry.attr.kind {
                    Kind::Dir if deep => stack.push((e.entry.attr.ino, rel)),
                    Kind::Dir => {}
                    Kind::File => out.push((rel, e.entry.attr.ino)),
                }
            }
        }
        Ok(())
    }

    /// How much of a data file's end one read of its whole footer takes (`iceberg/`'s footers
    /// with field ids; learnt from the footers read).
    pub(super) fn footer_guess(&self) -> &delta::stats::TailGuess {
        &self.delta.whole_tail
    }

    /// The footer facts of the file at `path` in `delta/`, if a version read them.
    pub(super) fn delta_cached_facts(&self, path: &str) -> Option<Arc<FileFacts>> {
        lock(&self.delta.facts).get(path).cloned()
    }

    /// The footer facts of the file at `path` in `delta/` (inode `ino`), read once.
    fn delta_facts(&self, path: &str, ino: u64) -> Result<Arc<FileFacts>> {
        if let Some(f) = lock(&self.delta.facts).get(path) {
            return Ok(f.clone());
        }
        let (handle, _, _) = self.open_parts(ino)?;
        let OpenHandle::Data(file) = handle else {
            return Err(Error::Invalid(format!("delta/{path}: not a data file")));
        };
        let corrupt = |e: String| Error::Corrupt(format!("delta/{path}: {e}"));
        let footer =
            delta::lean_footer::read_lean_footer(&*file, &self.delta.tail).map_err(corrupt)?;
        let facts = self.footer_facts(footer.bytes).map_err(corrupt)?;
        lock(&self.delta.facts).insert(path.to_string(), facts.clone());
        Ok(facts)
    }

    /// The facts of a file's footer (Parquet's `FileMetaData`), its schemas shared with the
    /// files before; the footer is kept where its schema is new (`Schemas::footers`).
    pub(super) fn footer_facts(
        &self,
        footer: Vec<u8>,
    ) -> std::result::Result<Arc<FileFacts>, String> {
        let facts = delta::stats::footer_facts(&footer, &self.delta.arrow)?;
        let mut s = lock(&self.delta.schemas);
        if !s
            .footers
            .iter()
            .any(|(p, _)| Arc::ptr_eq(p, &facts.parquet))
        {
            s.footers.push((facts.parquet.clone(), Arc::new(footer)));
        }
        Ok(Arc::new(facts))
    }

    /// The footer kept of a file of schema `facts.parquet`.
    pub(super) fn schema_footer(&self, facts: &FileFacts) -> Option<Arc<Vec<u8>>> {
        lock(&self.delta.schemas)
            .footers
            .iter()
            .find(|(p, _)| Arc::ptr_eq(p, &facts.parquet))
            .map(|(_, f)| f.clone())
    }
}
