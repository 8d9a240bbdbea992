//! Views of the mount: a view key planned against one snapshot ([`ViewState`]), its
//! partitions resolved on demand ([`ResolvedPartition`]) and kept in an LRU of recent views,
//! and the directory structure a view shows (partition paths and the directories above them).

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hudifs_core::error::{Error, Result};
use hudifs_core::rules::{PartitionChoice, Plan, WriteKind};
use hudifs_core::snapshot::Snapshot;
use hudifs_core::viewkey::ViewKey;

use super::inode::{Node, ViewName};
use super::merged::MergedPartition;
use super::partitions::PartitionListing;
use super::{lock, HudiFs, TTL_FINAL, TTL_FRESH};

/// Threads that resolve the partitions of one directory listing side by side.
const RESOLVE_THREADS: usize = 4;

/// A partition of a view: its listing and the files the view chose from it.
pub struct ResolvedPartition {
    pub listing: Arc<PartitionListing>,
    pub choice: PartitionChoice,
}

impl ResolvedPartition {
    /// The names the view shows in this partition, with their file ids.
    pub fn names(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.choice.files.iter().map(|c| {
            let i = c.index as usize;
            (self.listing.files[i].name(), self.listing.ids[i])
        })
    }

    /// Position in `choice.files` of the file named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.choice
            .files
            .binary_search_by(|c| self.listing.files[c.index as usize].name().cmp(name))
            .ok()
    }
}

/// A view planned against one snapshot, its partitions resolved on demand.
pub struct ViewState {
    pub snap: Arc<Snapshot>,
    pub plan: Plan,
    /// Resolved partitions; a listing that failed (a store's fault) is not kept, so the next
    /// caller lists again.
    parts: Vec<OnceLock<Arc<ResolvedPartition>>>,
    /// A `merged/` view (or a `cdc/` one): each partition's slices, built from `parts` on demand.
    pub merged: bool,
    /// A `cdc/` view: each partition's change feeds, one per file group.
    pub cdc: bool,
    /// A `merged/incremental/` view: the groups its writes wrote records to
    /// (`Plan::groups_written`), worked out once for all its partitions.
    pub groups_written: OnceLock<std::collections::BTreeSet<hudifs_core::ids::FileGroupId>>,
    merged_parts: Vec<OnceLock<Arc<MergedPartition>>>,
    pub is_final: bool,
}

impl ViewState {
    /// How long the kernel may keep this view's names and attributes: for good if it can no
    /// longer change, or if it is `latest/`, whose changes the kernel is told of at every switch
    /// (`kernel_cache.rs`); briefly otherwise (`merged/latest/` too: its switch drops what the
    /// kernel holds, but without the bookkeeping of `latest/`, SEMANTICS.md §10).
    pub fn ttl(&self) -> Duration {
        if self.is_final || (self.plan.key == ViewKey::Latest && !self.merged) {
            TTL_FINAL
        } else {
            TTL_FRESH
        }
    }
}

impl HudiFs {
    /// The view with id `view`, planned against the current snapshot (or kept from an older one
    /// if it can no longer change).
    pub(super) fn view(&self, view: u32) -> Result<Arc<ViewState>> {
        let snap = self.snapshot();
        let cached = lock(&self.views).get(&view).cloned();
        if let Some(v) = &cached {
            if v.snap.generation == snap.generation {
                return Ok(v.clone());
            }
        }
        let name = self
            .inodes
            .views
            .get(view)
            .ok_or_else(|| Error::NotFound(format!("view {view}")))?;
        // Planning is cheap and always against the current snapshot: a view that can no longer
        // change keeps its files, but a clean can still make it refused. A merged view is a
        // snapshot view whatever the mount's read-optimized option says.
        let plan = snap.plan(&name.key, self.opts.read_optimized && !name.merged)?;
        if name.cdc {
            hudifs_merge::cdc_check(&snap, &plan)?;
        }
        if let Some(v) = cached.filter(|v| v.is_final) {
            return Ok(v);
        }
        let is_final = snap.is_final(&plan);
        let state = Arc::new(ViewState {
            parts: (0..snap.partitions.len())
                .map(|_| OnceLock::new())
                .collect(),
            merged: name.merged,
            cdc: name.cdc,
            groups_written: OnceLock::new(),
            merged_parts: if name.merged {
                (0..snap.partitions.len())
                    .map(|_| OnceLock::new())
                    .collect()
            } else {
                Vec::new()
            },
            snap,
            plan,
            is_final,
        });
        lock(&self.views).put(view, state.clone());
        Ok(state)
    }

    /// View `view` and the path of its directory `dir`, if the view is cached, planned against
    /// the current snapshot and plain (a merged view may merge): what an answer from memory
    /// starts from.
    fn view_in_memory(&self, view: u32, dir: u32) -> Option<(Arc<ViewState>, Arc<str>)> {
        let generation = self.snapshot().generation;
        let v = lock(&self.views).peek(&view).cloned()?;
        if v.snap.generation != generation || v.merged || v.cdc {
            return None;
        }
        Some((v, self.dir_path(dir).ok()?))
    }

    /// Whether every partition of `v` at or below `path` is resolved.
    fn resolved_under(v: &ViewState, path: &str) -> bool {
        v.snap
            .partitions_under(path)
            .all(|i| v.parts.get(i).is_some_and(|s| s.get().is_some()))
    }

    /// Whether listing directory `dir` of view `view` needs nothing from the storage: the view
    /// is in memory, every partition at or below `dir` is resolved, and if `stated`, the files
    /// of the partition at `dir` are stated.
    pub(super) fn view_dir_resolved(&self, view: u32, dir: u32, stated: bool) -> bool {
        let Some((v, path)) = self.view_in_memory(view, dir) else {
            return false;
        };
        if !Self::resolved_under(&v, &path) {
            return false;
        }
        !stated
            || self
                .partition_index(&v, &path)
                .and_then(|i| v.parts[i].get())
                .is_none_or(|p| p.listing.files.iter().all(|f| f.is_stated()))
    }

    /// Whether looking `name` up in directory `dir` of view `view` needs nothing from the
    /// storage: the view is in memory, and `name` is a stated file of the resolved partition at
    /// `dir`, or else every partition below `dir/name` is resolved (what deciding a directory
    /// takes).
    pub(super) fn view_lookup_resolved(&self, view: u32, dir: u32, name: &str) -> bool {
        let Some((v, path)) = self.view_in_memory(view, dir) else {
            return false;
        };
        if let Some(i) = self.partition_index(&v, &path) {
            let Some(p) = v.parts[i].get() else {
                return false;
            };
            if let Some(pos) = p.position(name) {
                let c = p.choice.files[pos];
                return p.listing.files[c.index as usize].is_stated();
            }
        }
        Self::resolved_under(&v, &super::join(&path, name))
    }

    /// Cached views, with their ids.
    pub(super) fn cached_views(&self) -> Vec<(u32, Arc<ViewState>)> {
        lock(&self.views)
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    pub(super) fn forget_view(&self, id: u32) {
        lock(&self.views).pop(&id);
    }

    /// The TTL of a name just handed out from view `v`: its own, unless `v` is a `latest/` of a
    /// snapshot that has since moved on (the switch's invalidations may have missed the name, see
    /// `kernel_cache.rs`). Asked after the name was recorded as handed out.
    pub(super) fn answer_ttl(&self, v: &ViewState) -> Duration {
        if v.plan.key == ViewKey::Latest && v.snap.generation < self.snapshot().generation {
            TTL_FRESH
        } else {
            v.ttl()
        }
    }

    /// The resolved partition `i` of a view.
    pub(super) fn part(&self, v: &ViewState, i: usize) -> Result<Arc<ResolvedPartition>> {
        let slot = v
            .parts
            .get(i)
            .ok_or_else(|| Error::NotFound(format!("partition {i}")))?;
        if let Some(r) = slot.get() {
            return Ok(r.clone());
        }
        let partition = &v.snap.partitions[i];
        let resolved = if !v.plan.may_list(partition) {
            ResolvedPartition {
                listing: Arc::default(),
                choice: PartitionChoice::default(),
            }
        } else {
            let listing = self.listing_of(v, partition)?;
            let choice = v
                .snap
                .resolve_partition(&v.plan, &listing.files, &self.interner);
            ResolvedPartition { listing, choice }
        };
        // Two callers racing keep the first answer (both listed the same snapshot).
        Ok(slot.get_or_init(|| Arc::new(resolved)).clone())
    }

    /// The listing of `partition` for view `v`'s snapshot (a store's fault is EIO).
    fn listing_of(&self, v: &ViewState, partition: &Arc<str>) -> Result<Arc<PartitionListing>> {
        let listing = self.partitions.listing(&v.snap, partition).map_err(|e| {
            Error::io(
                self.store.describe(&Default::default()),
                std::io::Error::other(e.to_string()),
            )
        })?;
        // A merged view and a change feed key their slices by their inputs' sizes and times.
        if v.merged || v.cdc {
            hudifs_core::listing::stat_files(&*self.store, &listing.files);
        }
        Ok(listing)
    }

    /// The merged partition `i` of a merged view if it was built (handed to the kernel).
    pub(super) fn merged_part_if_built(v: &ViewState, i: usize) -> Option<Arc<MergedPartition>> {
        v.merged_parts.get(i).and_then(|s| s.get()).cloned()
    }

    /// The merged partition `i` of a merged view.
    pub(super) fn merged_part(&self, v: &ViewState, i: usize) -> Result<Arc<MergedPartition>> {
        let slot = v
            .merged_parts
            .get(i)
            .ok_or_else(|| Error::NotFound(format!("merged partition {i}")))?;
        if let Some(m) = slot.get() {
            return Ok(m.clone());
        }
        let built = if v.cdc {
            // The groups of a change feed include those its writes replaced, which the plain
            // window does not list: the partition is listed when a data write touched it.
            let partition = &v.snap.partitions[i];
            let touched = v.plan.writes.iter().any(|w| {
                w.kind == WriteKind::Data
                    && w.touched
                        .iter()
                        .chain(&w.replaced)
                        .any(|g| g.partition == **partition)
            });
            if touched {
                let listing = self.listing_of(v, partition)?;
                self.cdc_partition(&v.snap, &v.plan, partition, &listing)?
            } else {
                MergedPartition::default()
            }
        } else {
            let pv = self.part(v, i)?;
            let written = v.groups_written.get_or_init(|| v.plan.groups_written());
            self.merged_partition(&v.snap, &v.plan, written, &pv.listing, &pv.choice)
        };
        Ok(slot.get_or_init(|| Arc::new(built)).clone())
    }

    pub(super) fn partition_index(&self, v: &ViewState, partition: &str) -> Option<usize> {
        v.snap
            .partitions
            .binary_search_by(|p| (**p).cmp(partition))
            .ok()
    }

    /// Whether partition `i` of a view shows any file. A merged view can show fewer slices than
    /// the plain view has files (`merged/incremental/` drops the groups no write of the window
    /// wrote to).
    fn partition_shown(&self, v: &ViewState, i: usize) -> Result<bool> {
        Ok(if v.merged {
            !self.merged_part(v, i)?.entries.is_empty()
        } else {
            !self.part(v, i)?.choice.files.is_empty()
        })
    }

    /// Whether directory `path` of a view has any file at or below it.
    pub(super) fn dir_exists(&self, v: &ViewState, path: &str) -> Result<bool> {
        if path.is_empty() {
            return Ok(true);
        }
        for i in v.snap.partitions_under(path) {
            let p = &v.snap.partitions[i];
            if !(&**p == path || p.starts_with(&format!("{path}/"))) {
                continue;
            }
            if self.partition_shown(v, i)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The names of the sub-directories of directory `path` of a view that have a file at or
    /// below them: the next path component of every non-empty partition below.
    pub(super) fn subdir_names(&self, v: &ViewState, path: &str) -> Result<BTreeSet<String>> {
        // The partitions below, with the sub-directory each lies in.
        let below: Vec<(usize, &str)> = v
            .snap
            .partitions_under(path)
            .filter_map(|i| {
                let p = &v.snap.partitions[i];
                let rest = if path.is_empty() {
                    Some(&**p)
                } else {
                    p.strip_prefix(path).and_then(|r| r.strip_prefix('/'))
                };
                let rest = rest.filter(|r| !r.is_empty())?;
                Some((i, rest.split('/').next().unwrap_or(rest)))
            })
            .collect();
        // The first partition of each sub-directory usually decides it: resolve those side by
        // side (listing a partition is mostly waiting for the storage).
        let mut firsts: Vec<usize> = Vec::new();
        for (k, (i, first)) in below.iter().enumerate() {
            if k == 0 || below[k - 1].1 != *first {
                firsts.push(*i);
            }
        }
        self.resolve_parts(v, &firsts);
        let mut subdirs = BTreeSet::new();
        for (i, first) in below {
            if subdirs.contains(first) {
                continue;
            }
            if self.partition_shown(v, i)? {
                subdirs.insert(first.to_string());
            }
        }
        Ok(subdirs)
    }

    /// Resolve partitions `indexes` of a view on several threads (errors are kept in the
    /// partitions' slots, where the callers meet them).
    fn resolve_parts(&self, v: &ViewState, indexes: &[usize]) {
        let todo: Vec<usize> = indexes
            .iter()
            .copied()
            .filter(|i| v.parts.get(*i).is_some_and(|s| s.get().is_none()))
            .collect();
        let threads = hudifs_core::side_by_side::cores()
            .min(RESOLVE_THREADS)
            .min(todo.len() / 4);
        if threads < 2 {
            return;
        }
        hudifs_core::side_by_side::map(&todo, threads, |i| {
            let _ = self.part(v, *i);
        });
    }

    /// The root directory node of the view `key`, plain or merged.
    pub(super) fn view_root(&self, key: ViewKey, merged: bool) -> Result<Node> {
        self.view_root_of(ViewName {
            key,
            merged,
            cdc: false,
        })
    }

    /// The root of the change feed of window `key` (`cdc/<w>/`).
    pub(super) fn cdc_root(&self, key: ViewKey) -> Result<Node> {
        self.view_root_of(ViewName {
            key,
            merged: true,
            cdc: true,
        })
    }

    fn view_root_of(&self, name: ViewName) -> Result<Node> {
        let view = self
            .inodes
            .views
            .id(&Arc::new(name))
            .ok_or_else(|| Error::NotFound("too many distinct views".into()))?;
        Ok(Node::ViewDir { view, dir: 0 })
    }

    pub(super) fn dir_path(&self, dir: u32) -> Result<Arc<str>> {
        self.inodes
            .dirs
            .get(dir)
            .ok_or_else(|| Error::NotFound(format!("directory {dir}")))
    }
}
