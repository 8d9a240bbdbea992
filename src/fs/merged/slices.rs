//! The slices of merged views and the change feeds of `cdc/` as the mount names them: a
//! partition's entries ([`MergedPartition`]), built from the view's listing and plan without
//! merging, and every slice handed out, by stable id ([`MergedRegistry`]).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize};
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
use hudifs_merge::schema::SliceSchema;
use hudifs_merge::{apply_view_schema, slices_of_view, slices_of_window, CdcGroup, Slice};
use hudifs_storage::sync::lock;

use crate::fs::partitions::PartitionListing;
use crate::fs::HudiFs;
use crate::journal::{Record, RestartJournal};

/// What a merge gave for a slice.
#[derive(Debug, Clone)]
pub(super) enum Done {
    /// No block counts: the slice is its base file (registry id).
    Base(u64),
    /// The merged file in the cache.
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
    pub(super) t: String,
    /// `merged/incremental/`: the window's effective end (blocks completed after it do not
    /// count, on timelines with completion times); `None` for snapshot views.
    pub(super) window_end: Option<Option<String>>,
    /// `cdc/`: the change feed this file is (its `slice` then only names the group).
    pub cdc: Option<CdcGroup>,
    /// The newest modification time of the inputs: the merged file's mtime.
    pub mtime: SystemTime,
    /// How far its merge got (`HudiFs::materialise`).
    pub(super) progress: Progress,
}

/// How far a merged slice's merge got: one value for every slice a view hands out.
#[derive(Default)]
pub(super) struct Progress {
    pub done: Mutex<Option<Done>>,
    /// A refusal that the same inputs always give (EOPNOTSUPP, EFBIG): answered again without
    /// reading the logs.
    pub refused: Mutex<Option<Error>>,
    /// A refusal was logged (one log line per slice).
    pub logged: AtomicBool,
    /// A merge ahead of a reader was started for it (`HudiFs::read_ahead`: once).
    pub ahead: AtomicBool,
    /// A change feed's change data file (`delta/_change_data/`), once written: its path in the
    /// merge cache and its size. (A feed is one window's, and a window's change data is in one
    /// version's schema.)
    pub change_data: Mutex<Option<(PathBuf, u64)>>,
}

/// Where a merged slice stands, asked without waiting for a merge in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SliceState {
    NotMerged,
    Merging,
    Merged,
    Refused,
}

impl MergedSlice {
    /// Where the slice stands now.
    pub(super) fn state(&self) -> SliceState {
        match self.progress.done.try_lock() {
            Err(std::sync::TryLockError::WouldBlock) => SliceState::Merging,
            Err(std::sync::TryLockError::Poisoned(g)) if g.get_ref().is_some() => {
                SliceState::Merged
            }
            Ok(g) if g.is_some() => SliceState::Merged,
            _ if lock(&self.progress.refused).is_some() => SliceState::Refused,
            _ => SliceState::NotMerged,
        }
    }

    /// Size, if merged already.
    pub fn size_if_known(&self, base_size: impl Fn(u64) -> Option<u64>) -> Option<u64> {
        match &*lock(&self.progress.done) {
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
            .chain(self.slice.source.iter().map(|s| s.describe()))
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
    /// The view schema the slice is written in, where not its own (`ViewSchema::id`).
    schema: Option<String>,
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
    /// Slices being merged ahead of a reader (`HudiFs::read_ahead`).
    ahead: Arc<AtomicUsize>,
}

impl MergedRegistry {
    /// The count of slices being merged ahead of a reader.
    pub(super) fn ahead(&self) -> Arc<AtomicUsize> {
        self.ahead.clone()
    }

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
        schema: Option<&super::ViewSchemaText>,
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
        let mut slices = match &window {
            Some((selected, _)) => slices_of_window(&files, selected, written),
            None => slices_of_view(&files),
        };
        if let Some(vs) = schema {
            let schema_of = |instant: &str| vs.writers.get(instant).cloned().flatten();
            apply_view_schema(
                &mut slices,
                &vs.arrow,
                &vs.text,
                schema_of,
                vs.evolution.as_ref(),
            );
        }
        for mut vs in slices {
            // A skeleton slice with logs merges over its stitched rows; one without is served
            // as its base file (stitched, as in the plain view).
            if vs.slice.needs_merge() {
                self.attach_source(&mut vs.slice);
            }
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
                schema: vs.slice.schema.as_ref().map(|s| s.view.id.clone()),
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
                progress: Progress::default(),
            });
            entries.push((name, MergedNode::Slice(id)));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        MergedPartition { entries }
    }

    /// The change feeds of a partition of window `plan` (`cdc/`): one file per file group a data
    /// write of the window touched, named and registered from the timeline and the listing
    /// alone (nothing is merged). `schema`: the window's table schema, where the table's
    /// schema changed, which every feed's images are written in (SEMANTICS.md §10.10).
    pub(super) fn cdc_partition(
        &self,
        snap: &Snapshot,
        plan: &Plan,
        partition: &str,
        listing: &PartitionListing,
        schema: Option<&super::ViewSchemaText>,
    ) -> Result<MergedPartition> {
        let files: Vec<DataFile> = listing.files.to_vec();
        let mut ids: HashMap<String, (u64, SystemTime)> = HashMap::new();
        for (f, id) in listing.files.iter().zip(&listing.ids) {
            ids.insert(f.rel_path(), (*id, f.mtime()));
        }
        let mut entries = Vec::new();
        for mut group in hudifs_merge::cdc_groups(snap, plan, partition, &files)? {
            group.schema = schema.map(|s| s.arrow.clone());
            // Schema-on-read: every state's files are read with their columns matched to
            // the window's by field id.
            let evolution = schema.and_then(|s| s.evolution.as_ref());
            if let (Some(e), Some(view)) = (evolution, group.schema.clone()) {
                for st in group
                    .steps
                    .iter_mut()
                    .flat_map(|s| [&mut s.before, &mut s.after])
                    .flatten()
                {
                    st.slice.schema = Some(SliceSchema {
                        view: view.clone(),
                        rewrite_base: true,
                        evolution: Some(e.clone()),
                    });
                }
            }
            // States of a bootstrapped group hold its stitched rows.
            for step in &mut group.steps {
                for st in [&mut step.before, &mut step.after].into_iter().flatten() {
                    self.attach_source(&mut st.slice);
                }
            }
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
                schema: group.schema_id(),
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
                    source: None,
                },
                base: None,
                t: newest.clone(),
                window_end: None,
                cdc: Some(group.clone()),
                mtime,
                progress: Progress::default(),
            });
            entries.push((name, MergedNode::Slice(id)));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        Ok(MergedPartition { entries })
    }
}
