//! The merged view (`merged/latest/`, `merged/as_of/<T>/`, SEMANTICS.md §10): the same
//! snapshots as `latest/` and `as_of/`, each file slice shown as one Parquet file.
//!
//! - A view's partition is resolved exactly as in the plain view; its files are grouped into
//!   slices (`hudifs_merge::slices_of_view`). A slice without logs is its base file: the same
//!   table file node as in the plain view (its bytes, passthrough). Any other slice is a
//!   [`MergedSlice`] in the registry, whose id is the item of its inode number.
//! - Names and inode numbers come from the listing alone: nothing is merged by `readdir`. A
//!   slice is merged on its first `lookup` or `getattr` (its size is known only then), into the
//!   disk cache (`hudifs_merge::MergeCache`: private, checked, LRU by bytes, one merge per slice
//!   at a time), and its path and size are kept here, so a later `stat` costs nothing.
//! - A registered slice is keyed by what decides its bytes: its partition and name, each input
//!   file (registry id: name, size and mtime) with the instant the view attributes it to, and
//!   the instants still pending before its newest one (a block of such an instant counts once
//!   it completes), and on layout 1 the newest completed write up to the view time when it is
//!   newer than the slice's files (a v6 log can hold blocks appended by later writes). The same key in another view or a later snapshot is the same inode, so
//!   `merged/latest/` keeps the numbers (and the kernel's pages) of slices a commit did not
//!   touch.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::SystemTime;

use hudifs_core::error::{Error, Result};
use hudifs_core::ids::FileGroupId;
use hudifs_core::instant_time::InstantTime;
use hudifs_core::listing::DataFile;
use hudifs_core::rules::{PartitionChoice, Plan, VisibleFile};
use hudifs_core::snapshot::Snapshot;
use hudifs_core::timeline::Layout;
use hudifs_core::viewkey::ViewKey;
use hudifs_merge::{
    slices_of_view, slices_of_window, snapshot_visibility, window_visibility, CacheOptions,
    CdcGroup, Ensured, MergeCache, MergeConfig, MergeError, MergeOptions, Refusal, Slice,
};

use super::partitions::PartitionListing;
use super::{lock, HudiFs};
use crate::journal::{Record, RestartJournal};

/// Default size of the merge cache.
pub const DEFAULT_CACHE_BYTES: u64 = 4 << 30;
/// Default cap on the log records of one slice held in memory while it is merged.
pub const DEFAULT_MEMORY_CAP: u64 = 1 << 30;

/// Where merged files are cached and how much a merge may use.
#[derive(Debug, Clone, PartialEq)]
pub struct MergeSettings {
    /// The cache directory; `None`: [`default_cache_dir`].
    pub cache_dir: Option<PathBuf>,
    pub cache_bytes: u64,
    pub memory_cap: u64,
}

impl Default for MergeSettings {
    fn default() -> Self {
        MergeSettings {
            cache_dir: None,
            cache_bytes: DEFAULT_CACHE_BYTES,
            memory_cap: DEFAULT_MEMORY_CAP,
        }
    }
}

/// The merge cache directory when none is given: `$XDG_CACHE_HOME/hudifs/merge`, else
/// `$HOME/.cache/hudifs/merge`, else `/var/tmp/hudifs-<uid>/merge`. (Not `/tmp`: another user
/// could plant the directory there first; the cache refuses a directory it does not own.)
pub fn default_cache_dir() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(x) = env("XDG_CACHE_HOME") {
        return x.join("hudifs/merge");
    }
    if let Some(h) = env("HOME") {
        return h.join(".cache/hudifs/merge");
    }
    let uid = crate::sys::ids::euid();
    PathBuf::from(format!("/var/tmp/hudifs-{uid}/merge"))
}

/// What a merge gave for a slice.
#[derive(Debug, Clone)]
enum Done {
    /// No block counts: the slice is its base file (registry id).
    Base(u64),
    /// The merged file in the cache.
    Merged { path: PathBuf, size: u64 },
}

/// What the kernel sees of a merged slice once it is materialised.
#[derive(Debug, Clone)]
pub enum Materialised {
    /// Serve the base file with this registry id.
    Base(u64),
    /// Serve this file of the merge cache.
    Merged { path: PathBuf, size: u64 },
}

/// One slice of a merged view that needs merging.
pub struct MergedSlice {
    pub partition: Arc<str>,
    pub name: Arc<str>,
    pub slice: Slice,
    /// Registry id of the base file (if any), as the view listed it.
    pub base: Option<u64>,
    /// The newest instant the slice's files hold (`user.hudi.instant`).
    pub newest: String,
    /// The view time blocks are admitted up to.
    t: String,
    /// `merged/incremental/`: the window's effective end (blocks completed after it do not
    /// count, on timelines with completion times); `None` for snapshot views.
    window_end: Option<Option<String>>,
    /// `cdc/`: the change feed this file is (its `slice` then only names the group).
    pub cdc: Option<CdcGroup>,
    /// The newest modification time of the inputs: the merged file's mtime.
    pub mtime: SystemTime,
    done: Mutex<Option<Done>>,
    /// A refusal that the same inputs always give (EOPNOTSUPP, EFBIG): answered again without
    /// reading the logs.
    refused: Mutex<Option<Error>>,
    /// A refusal was logged (one log line per slice).
    logged: AtomicBool,
}

impl MergedSlice {
    /// Size, if merged already.
    pub fn size_if_known(&self, base_size: impl Fn(u64) -> Option<u64>) -> Option<u64> {
        match &*lock(&self.done) {
            None => None,
            Some(Done::Base(id)) => base_size(*id),
            Some(Done::Merged { size, .. }) => Some(*size),
        }
    }

    /// The table paths merged in: base first, then logs (of every state, for a change feed).
    pub fn inputs(&self) -> Vec<String> {
        if let Some(g) = &self.cdc {
            return g.inputs();
        }
        self.slice
            .base
            .iter()
            .chain(&self.slice.logs)
            .map(|i| i.path.as_str().to_string())
            .collect()
    }
}

/// What decides a merged slice's bytes (see the module comment).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SliceKey {
    partition: Arc<str>,
    name: Arc<str>,
    inputs: Vec<(u64, Option<InstantTime>)>,
    pending: Vec<InstantTime>,
    /// Layout 1 only, where a log file can hold blocks of writes after the one it is attributed
    /// to (appended): the newest completed write up to the view time, when it is newer than the
    /// slice's newest instant (blocks up to it may count). Without it, `as_of/<T>` of a later
    /// T would reuse the merge of an earlier T and miss the blocks appended in between.
    admitted: Option<InstantTime>,
    /// `merged/incremental/`: the instants whose records are kept and the window's effective
    /// end; the same slice in a snapshot view or another window holds other rows.
    window: Option<(Vec<InstantTime>, Option<InstantTime>)>,
    /// `cdc/`: the states compared, each by its time and input files (registry ids).
    cdc: Option<Vec<(String, String, Vec<u64>)>>,
}

/// A partition and a name in it.
type PlacedName = (Arc<str>, Arc<str>);

/// Every merged slice the mount has handed out, by stable id (append-only: an id never changes
/// meaning). The restart journal records each id with the partition and name it was handed out
/// under; after a restart such an id is found again by that name in its view, on first use
/// (`HudiFs::merged_slice`).
#[derive(Default)]
pub struct MergedRegistry {
    slices: RwLock<Vec<Option<Arc<MergedSlice>>>>,
    index: Mutex<HashMap<SliceKey, u64>>,
    journal: OnceLock<Arc<RestartJournal>>,
    /// Ids a previous daemon of the mount handed out and this one has not found again: their
    /// partition and name.
    inherited: Mutex<HashMap<u64, PlacedName>>,
}

impl MergedRegistry {
    pub fn get(&self, id: u64) -> Option<Arc<MergedSlice>> {
        let s = self.slices.read().unwrap_or_else(|e| e.into_inner());
        s.get(usize::try_from(id).ok()?).cloned().flatten()
    }

    fn register(&self, key: SliceKey, make: impl FnOnce() -> MergedSlice) -> u64 {
        let mut index = lock(&self.index);
        if let Some(id) = index.get(&key) {
            return *id;
        }
        let mut s = self.slices.write().unwrap_or_else(|e| e.into_inner());
        let id = s.len() as u64;
        if let Some(journal) = self.journal.get() {
            journal.append(&Record::MergedSlice {
                partition: key.partition.clone(),
                name: key.name.clone(),
            });
        }
        s.push(Some(Arc::new(make())));
        index.insert(key, id);
        id
    }

    /// Keep the ids a previous daemon of this mount handed out, to be found again by name, then
    /// record every new one in `journal`.
    pub fn resume(&self, records: &[Record], journal: &Arc<RestartJournal>) {
        let mut s = self.slices.write().unwrap_or_else(|e| e.into_inner());
        let mut inherited = lock(&self.inherited);
        for r in records {
            if let Record::MergedSlice { partition, name } = r {
                inherited.insert(s.len() as u64, (partition.clone(), name.clone()));
                s.push(None);
            }
        }
        let _ = self.journal.set(journal.clone());
    }

    /// The partition and name of an id a previous daemon handed out, not found again yet.
    pub fn inherited(&self, id: u64) -> Option<PlacedName> {
        lock(&self.inherited).get(&id).cloned()
    }

    /// An id of a previous daemon found again: it names `slice` from now on.
    pub fn found_again(&self, id: u64, slice: Arc<MergedSlice>) {
        let mut s = self.slices.write().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = usize::try_from(id).ok().and_then(|i| s.get_mut(i)) {
            slot.get_or_insert(slice);
        }
        lock(&self.inherited).remove(&id);
    }
}

/// One entry of a merged partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergedNode {
    /// A slice without logs: the base file (registry id), as in the plain view.
    Base(u64),
    /// A slice to merge (merged registry id).
    Slice(u64),
}

/// A partition of a merged view: one entry per slice, sorted by name.
#[derive(Default)]
pub struct MergedPartition {
    pub entries: Vec<(Arc<str>, MergedNode)>,
}

impl MergedPartition {
    pub fn find(&self, name: &str) -> Option<MergedNode> {
        self.entries
            .binary_search_by(|(n, _)| (**n).cmp(name))
            .ok()
            .map(|i| self.entries[i].1)
    }
}

fn refusal(e: MergeError) -> Error {
    let msg = e.to_string();
    match e.kind {
        Refusal::Unsupported => Error::Unsupported(msg),
        Refusal::TooBig => Error::TooBig(msg),
        Refusal::Corrupt => Error::Corrupt(msg),
    }
}

impl HudiFs {
    /// The merged partition of a partition's listing and the files the view planned as `plan`
    /// against snapshot `snap` chose from it. An incremental plan (`merged/incremental/`)
    /// filters each slice's rows to the window's writes and shows only the groups in `written`
    /// (`Plan::groups_written`) (SEMANTICS.md §10.9).
    pub(super) fn merged_partition(
        &self,
        snap: &Snapshot,
        plan: &Plan,
        written: &BTreeSet<FileGroupId>,
        listing: &PartitionListing,
        choice: &PartitionChoice,
    ) -> MergedPartition {
        let t = plan.t.as_ref().map_or("", |t| t.as_str());
        let window = matches!(plan.key, ViewKey::Incremental { .. })
            .then(|| (plan.selected.clone(), plan.effective_end.clone()));
        let mut ids: HashMap<String, u64> = HashMap::new();
        let mut mtimes: HashMap<String, SystemTime> = HashMap::new();
        let mut files = Vec::with_capacity(choice.files.len());
        for c in &choice.files {
            let i = c.index as usize;
            let f = &listing.files[i];
            ids.insert(f.rel_path(), listing.ids[i]);
            mtimes.insert(f.rel_path(), f.mtime());
            files.push(VisibleFile {
                file: f.clone(),
                writer: choice.writer(c).cloned(),
                slice: choice.slice(c).to_string(),
            });
        }
        let writer_of: HashMap<String, Option<InstantTime>> = files
            .iter()
            .map(|f| (f.rel_path(), f.writer.clone()))
            .collect();
        let newest_write = (snap.timeline().layout == Layout::V1)
            .then(|| {
                snap.timeline()
                    .completed
                    .keys()
                    .rev()
                    .find(|r| r.as_str() <= t)
                    .cloned()
            })
            .flatten();
        let mut entries = Vec::new();
        let slices = match &window {
            Some((selected, _)) => slices_of_window(&files, selected, written),
            None => slices_of_view(&files),
        };
        for vs in slices {
            let name: Arc<str> = Arc::from(vs.file_name());
            let id_of = |p: &str| ids.get(p).copied();
            if !vs.slice.needs_merge() {
                if let Some(id) = vs.slice.base.as_ref().and_then(|b| id_of(b.path.as_str())) {
                    entries.push((name, MergedNode::Base(id)));
                }
                continue;
            }
            let base = vs.slice.base.as_ref().and_then(|b| id_of(b.path.as_str()));
            let mut inputs: Vec<(u64, Option<InstantTime>)> = vs
                .slice
                .base
                .iter()
                .chain(&vs.slice.logs)
                .filter_map(|i| {
                    let p = i.path.as_str();
                    Some((id_of(p)?, writer_of.get(p).cloned().flatten()))
                })
                .collect();
            inputs.sort();
            let pending: Vec<InstantTime> = snap
                .timeline()
                .pending()
                .map(|i| i.requested.clone())
                .filter(|r| r.as_str() < vs.newest_instant.as_str())
                .collect();
            let mtime = vs
                .slice
                .base
                .iter()
                .chain(&vs.slice.logs)
                .filter_map(|i| mtimes.get(i.path.as_str()).copied())
                .max()
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let key = SliceKey {
                partition: Arc::from(vs.slice.partition.as_str()),
                name: name.clone(),
                inputs,
                pending,
                admitted: newest_write
                    .clone()
                    .filter(|w| w.as_str() > vs.newest_instant.as_str()),
                window: window.clone(),
                cdc: None,
            };
            let id = self.merged.register(key, || MergedSlice {
                partition: Arc::from(vs.slice.partition.as_str()),
                name: name.clone(),
                newest: vs.newest_instant.clone(),
                slice: vs.slice.clone(),
                base,
                t: t.to_string(),
                window_end: window
                    .as_ref()
                    .map(|(_, end)| end.as_ref().map(|e| e.to_string())),
                cdc: None,
                mtime,
                done: Mutex::new(None),
                refused: Mutex::new(None),
                logged: AtomicBool::new(false),
            });
            entries.push((name, MergedNode::Slice(id)));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        MergedPartition { entries }
    }

    /// The change feeds of a partition of window `plan` (`cdc/`): one file per file group a data
    /// write of the window touched, named and registered from the timeline and the listing
    /// alone (nothing is merged).
    pub(super) fn cdc_partition(
        &self,
        snap: &Snapshot,
        plan: &Plan,
        partition: &str,
        listing: &PartitionListing,
    ) -> Result<MergedPartition> {
        let files: Vec<DataFile> = listing.files.to_vec();
        let mut ids: HashMap<String, (u64, SystemTime)> = HashMap::new();
        for (f, id) in listing.files.iter().zip(&listing.ids) {
            ids.insert(f.rel_path(), (*id, f.mtime()));
        }
        let mut entries = Vec::new();
        for group in hudifs_merge::cdc_groups(snap, plan, partition, &files)? {
            let name: Arc<str> = Arc::from(group.file_name());
            let mut mtime = SystemTime::UNIX_EPOCH;
            let states: Vec<(String, String, Vec<u64>)> = group
                .steps
                .iter()
                .flat_map(|s| {
                    [("b", &s.before), ("a", &s.after)]
                        .into_iter()
                        .map(|(side, st)| {
                            let t = st.as_ref().map(|st| st.t.clone()).unwrap_or_default();
                            let inputs = st
                                .iter()
                                .flat_map(|st| st.slice.base.iter().chain(&st.slice.logs))
                                .filter_map(|i| ids.get(i.path.as_str()))
                                .map(|(id, m)| {
                                    mtime = mtime.max(*m);
                                    *id
                                })
                                .collect();
                            (side.to_string(), t, inputs)
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            let newest = group
                .steps
                .last()
                .map(|s| s.instant.clone())
                .unwrap_or_default();
            let key = SliceKey {
                partition: Arc::from(partition),
                name: name.clone(),
                inputs: Vec::new(),
                pending: Vec::new(),
                admitted: None,
                window: None,
                cdc: Some(states),
            };
            let id = self.merged.register(key, || MergedSlice {
                partition: Arc::from(partition),
                name: name.clone(),
                newest: newest.clone(),
                slice: Slice {
                    partition: partition.to_string(),
                    file_id: group.file_id.clone(),
                    instant: group
                        .steps
                        .first()
                        .map(|s| s.instant.clone())
                        .unwrap_or_default(),
                    base: None,
                    logs: Vec::new(),
                    keep_commits: None,
                    schema: None,
                },
                base: None,
                t: newest.clone(),
                window_end: None,
                cdc: Some(group.clone()),
                mtime,
                done: Mutex::new(None),
                refused: Mutex::new(None),
                logged: AtomicBool::new(false),
            });
            entries.push((name, MergedNode::Slice(id)));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        Ok(MergedPartition { entries })
    }

    /// The merge cache, opened on first use (a mount that never shows `merged/` creates none).
    fn merge_cache(&self) -> Result<Arc<MergeCache>> {
        self.merge_cache
            .get_or_init(|| {
                let dir = self
                    .opts
                    .merge
                    .cache_dir
                    .clone()
                    .unwrap_or_else(default_cache_dir);
                let c = MergeCache::open(&CacheOptions {
                    dir: dir.clone(),
                    max_bytes: self.opts.merge.cache_bytes,
                })
                .map_err(|e| e.to_string())?;
                log::info!(
                    "merge cache {} ({} bytes at most)",
                    dir.display(),
                    self.opts.merge.cache_bytes
                );
                Ok(Arc::new(c))
            })
            .clone()
            .map_err(|e| Error::Corrupt(format!("the merge cache cannot be used: {e}")))
    }

    /// Merges run by this mount (cache misses).
    pub fn merges_run(&self) -> u64 {
        self.merge_cache
            .get()
            .and_then(|c| c.as_ref().ok())
            .map_or(0, |c| c.merges())
    }

    /// Merge slice `ms` if it is not merged yet (once, however many ask): what to serve.
    pub(super) fn materialise(&self, ms: &MergedSlice) -> Result<Materialised> {
        let mut done = lock(&ms.done);
        if let Some(d) = &*done {
            return Ok(match d {
                Done::Base(id) => Materialised::Base(*id),
                Done::Merged { path, size } => Materialised::Merged {
                    path: path.clone(),
                    size: *size,
                },
            });
        }
        if let Some(e) = &*lock(&ms.refused) {
            return Err(e.clone());
        }
        let started = std::time::Instant::now();
        let before = self.merges_run();
        let r = self.merge_now(ms);
        let outcome = match &r {
            Ok(Done::Base(_)) => "base",
            Ok(Done::Merged { .. }) if self.merges_run() > before => "merged",
            Ok(Done::Merged { .. }) => "cached",
            Err(Error::Unsupported(_) | Error::TooBig(_)) => "refused",
            Err(_) => "failed",
        };
        let written = match &r {
            Ok(Done::Merged { size, .. }) if outcome == "merged" => *size,
            _ => 0,
        };
        hudifs_storage::observe::merge(outcome, started, written);
        match r {
            Ok(d) => {
                *done = Some(d.clone());
                Ok(match d {
                    Done::Base(id) => Materialised::Base(id),
                    Done::Merged { path, size } => Materialised::Merged { path, size },
                })
            }
            Err(e) => {
                if matches!(e, Error::Unsupported(_) | Error::TooBig(_)) {
                    *lock(&ms.refused) = Some(e.clone());
                }
                if !ms.logged.swap(true, Ordering::Relaxed) {
                    log::warn!("merged file {}: {e}", super::join(&ms.partition, &ms.name));
                }
                Err(e)
            }
        }
    }

    fn merge_now(&self, ms: &MergedSlice) -> Result<Done> {
        let cache = self.merge_cache()?;
        let snap = self.snapshot();
        let cfg = MergeConfig::from_properties(&snap.cfg.properties)
            .map_err(|e| refusal(e.in_slice(&ms.slice.id())))?;
        let opts = MergeOptions {
            memory_cap: self.opts.merge.memory_cap,
            ..MergeOptions::default()
        };
        let table = self.store.describe(&Default::default());
        let ensured = match (&ms.cdc, &ms.window_end) {
            (Some(group), _) => {
                let tl = snap.timeline();
                let committed = |i: &str| tl.is_committed(i);
                cache.ensure(&*self.store, &table, &cfg, group, &committed, &opts)
            }
            (None, None) => {
                let visible = snapshot_visibility(snap.timeline(), &ms.t);
                cache.ensure(&*self.store, &table, &cfg, &ms.slice, &visible, &opts)
            }
            (None, Some(end)) => {
                let visible = window_visibility(snap.timeline(), &ms.t, end.as_deref());
                cache.ensure(&*self.store, &table, &cfg, &ms.slice, &visible, &opts)
            }
        };
        match ensured.map_err(refusal)? {
            Ensured::Base => match ms.base {
                Some(id) => Ok(Done::Base(id)),
                None => Err(Error::Corrupt(format!(
                    "slice {} has no base file to serve",
                    ms.slice.id()
                ))),
            },
            Ensured::Merged { path, size, .. } => Ok(Done::Merged { path, size }),
        }
    }

    /// Open the merged file of `ms` for reading: the cached file, merged again if the cache
    /// evicted it since (the bytes are a pure function of the inputs, so they are the same).
    pub(super) fn open_merged(
        &self,
        ms: &MergedSlice,
        path: &PathBuf,
        size: u64,
    ) -> Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        let open = |p: &PathBuf| {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(p)
        };
        match open(path) {
            Ok(f) if f.metadata().is_ok_and(|m| m.len() == size) => return Ok(f),
            Ok(_) | Err(_) => {}
        }
        // Evicted (or replaced): merge again.
        *lock(&ms.done) = None;
        match self.materialise(ms)? {
            Materialised::Merged { path: p, size: s } if s == size => {
                open(&p).map_err(|e| Error::io(p.display().to_string(), e))
            }
            _ => Err(Error::Corrupt(format!(
                "merged file {}: merged again to a different file",
                super::join(&ms.partition, &ms.name)
            ))),
        }
    }
}
