//! What the views of a mount are planned and resolved against, with its locks: the current table
//! snapshot, the views planned lately (an LRU of [`ViewState`], each with its partitions resolved
//! on demand, [`ResolvedPartition`]), the partition listings and the registry of table files
//! (`partitions`), the instants interned for them, and whether listings carry file attributes
//! now (`stat_demand`). It also answers the in-place questions: whether listing or looking up a
//! directory of a view needs nothing from the storage, so that the operation answers on the
//! calling thread (SEMANTICS.md §9).

use std::collections::BTreeSet;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use hudifs_core::error::{Error, Result};
use hudifs_core::listing::DataFile;
use hudifs_core::rules::{InstantInterner, PartitionChoice, Plan};
use hudifs_core::snapshot::Snapshot;
use hudifs_core::viewkey::{ViewKey, ViewName};
use hudifs_storage::sync::lock;
use hudifs_storage::Storage;
use lru::LruCache;

use super::merged::MergedView;
use super::partitions::{PartitionCache, PartitionListing};
use super::stat_demand::StatDemand;
use super::{join, TTL_FINAL, TTL_FRESH};
use crate::journal::{Record, RestartJournal};

/// The key view `name` is planned as: its own, but for the change data of a write
/// (`delta/_change_data/<t>/`: a change feed with the `delta` mark, keyed by the write) the
/// window of `cdc/` that selects write `t` alone (docs/SEMANTICS.md §11.4).
fn planned_key(snap: &Snapshot, name: &ViewName) -> Result<ViewKey> {
    match &name.key {
        ViewKey::AsOf(t) if name.cdc && name.delta => snap.write_window(t).ok_or_else(|| {
            Error::NotFound(format!("delta/_change_data/{t}: not a completed write"))
        }),
        k => Ok(k.clone()),
    }
}

/// The change data of write `t` (`name`, planned as `plan`) must be the change feed of `t`: a
/// window cut short before it (a pending write inside it, §2.4.3) is refused rather than given
/// without `t`'s records.
fn change_data_window(name: &ViewName, plan: &Plan) -> Result<()> {
    match &name.key {
        ViewKey::AsOf(t) if name.cdc && name.delta && !plan.selected.contains(t) => {
            Err(Error::Refused(format!(
                "delta/_change_data/{t}: the window of the write is cut short before it by a \
                 pending write"
            )))
        }
        _ => Ok(()),
    }
}

/// Resolved views kept (each holds a few bytes per file it shows).
const VIEW_CACHE: usize = 32;

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
    /// A `merged/` view (or a `cdc/` one): its slices or change feeds (`merged.rs`).
    pub merged: Option<MergedView>,
    pub is_final: bool,
}

impl ViewState {
    /// How long the kernel may keep this view's names and attributes: for good if it can no
    /// longer change, or if it is `latest/`, whose changes the kernel is told of at every switch
    /// (`kernel_cache.rs`); briefly otherwise (`merged/latest/` too: its switch drops what the
    /// kernel holds, but without the bookkeeping of `latest/`, SEMANTICS.md §10).
    pub fn ttl(&self) -> Duration {
        if self.is_final || (self.plan.key == ViewKey::Latest && self.merged.is_none()) {
            TTL_FINAL
        } else {
            TTL_FRESH
        }
    }

    /// A `cdc/` view.
    pub fn is_cdc(&self) -> bool {
        self.merged.as_ref().is_some_and(|m| m.cdc)
    }

    /// The index of `partition` in the view's snapshot.
    pub fn partition_index(&self, partition: &str) -> Option<usize> {
        self.snap
            .partitions
            .binary_search_by(|p| (**p).cmp(partition))
            .ok()
    }

    /// Whether every partition at or below `path` is resolved.
    fn resolved_under(&self, path: &str) -> bool {
        self.snap
            .partitions_under(path)
            .all(|i| self.parts.get(i).is_some_and(|s| s.get().is_some()))
    }
}

/// The snapshot, the views planned against it, and what resolving them keeps (module comment).
pub(super) struct ViewCache {
    store: Arc<dyn Storage>,
    read_optimized: bool,
    snapshot: RwLock<Arc<Snapshot>>,
    views: Mutex<LruCache<u32, Arc<ViewState>>>,
    partitions: PartitionCache,
    /// One allocation per instant shown, shared by every resolved partition.
    interner: InstantInterner,
    /// Whether listings carry their files' attributes now (`stat_demand.rs`).
    stat_demand: StatDemand,
}

impl ViewCache {
    /// The views of the table in `store`, planned against `snap` (plain views read-optimized if
    /// `read_optimized`).
    pub fn new(store: Arc<dyn Storage>, snap: Snapshot, read_optimized: bool) -> ViewCache {
        ViewCache {
            store,
            read_optimized,
            snapshot: RwLock::new(Arc::new(snap)),
            views: Mutex::new(LruCache::new(
                NonZeroUsize::new(VIEW_CACHE).unwrap_or(NonZeroUsize::MIN),
            )),
            partitions: PartitionCache::default(),
            interner: InstantInterner::default(),
            stat_demand: StatDemand::default(),
        }
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Make `next` the current snapshot: the partitions the change touched (`None`: possibly
    /// all) are listed again on next use.
    pub fn replace(&self, next: Snapshot, touched: Option<&BTreeSet<String>>) {
        match touched {
            Some(t) => t.iter().for_each(|p| self.partitions.invalidate(p)),
            None => self.partitions.invalidate_all(),
        }
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
    }

    /// Take over the file ids a previous daemon of the mount handed out (`records`), and
    /// record every new one in `journal`.
    pub fn resume(&self, records: &[Record], journal: &Arc<RestartJournal>) -> Result<()> {
        let exts = self.snapshot().cfg.base_extensions.clone();
        self.partitions
            .registry
            .resume(records, &exts, journal)
            .map_err(Error::Corrupt)
    }

    /// The view with id `view`, named `name()`, planned against the current snapshot (or kept
    /// from an older one if it can no longer change).
    pub fn view(
        &self,
        view: u32,
        name: impl FnOnce() -> Option<Arc<ViewName>>,
    ) -> Result<Arc<ViewState>> {
        let snap = self.snapshot();
        let cached = lock(&self.views).get(&view).cloned();
        if let Some(v) = &cached {
            if v.snap.generation == snap.generation {
                return Ok(v.clone());
            }
        }
        let name = name().ok_or_else(|| Error::NotFound(format!("view {view}")))?;
        // Planning is cheap and always against the current snapshot: a view that can no longer
        // change keeps its files, but a clean can still make it refused. A merged view is a
        // snapshot view whatever the mount's read-optimized option says.
        let plan = snap.plan(
            &planned_key(&snap, &name)?,
            self.read_optimized && !name.merged,
        )?;
        change_data_window(&name, &plan)?;
        if name.merged {
            MergedView::check(name.cdc, &snap, &plan)?;
        }
        if let Some(v) = cached.filter(|v| v.is_final) {
            return Ok(v);
        }
        let is_final = snap.is_final(&plan);
        let count = snap.partitions.len();
        let state = Arc::new(ViewState {
            parts: (0..count).map(|_| OnceLock::new()).collect(),
            merged: name.merged.then(|| MergedView::new(name.cdc, count)),
            snap,
            plan,
            is_final,
        });
        lock(&self.views).put(view, state.clone());
        Ok(state)
    }

    /// View `view` if it is cached, without touching the LRU order.
    pub fn peek(&self, view: u32) -> Option<Arc<ViewState>> {
        lock(&self.views).peek(&view).cloned()
    }

    /// Cached views, with their ids.
    pub fn cached(&self) -> Vec<(u32, Arc<ViewState>)> {
        lock(&self.views)
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }

    pub fn forget(&self, view: u32) {
        lock(&self.views).pop(&view);
    }

    /// The TTL of a name just handed out from view `v`: its own, unless `v` is a `latest/` of a
    /// snapshot that has since moved on (the switch's invalidations may have missed the name, see
    /// `kernel_cache.rs`). Asked after the name was recorded as handed out.
    pub fn answer_ttl(&self, v: &ViewState) -> Duration {
        if v.plan.key == ViewKey::Latest && v.snap.generation < self.snapshot().generation {
            TTL_FRESH
        } else {
            v.ttl()
        }
    }

    /// The resolved partition `i` of a view.
    pub fn part(&self, v: &ViewState, i: usize) -> Result<Arc<ResolvedPartition>> {
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

    /// What view `v` shows of the file groups `fids` of `partition` alone (found by name, the
    /// partition's other groups not resolved), with the partition's listing; `None` when the
    /// view's snapshot has no such partition.
    pub fn resolve_groups(
        &self,
        v: &ViewState,
        partition: &str,
        fids: &BTreeSet<&str>,
    ) -> Result<Option<(Arc<PartitionListing>, PartitionChoice)>> {
        let Some(i) = v.partition_index(partition) else {
            return Ok(None);
        };
        let partition = &v.snap.partitions[i];
        if !v.plan.may_list(partition) {
            return Ok(Some((Arc::default(), PartitionChoice::default())));
        }
        let listing = self.listing_of(v, partition)?;
        let choice = v
            .snap
            .resolve_groups(&v.plan, &listing.files, fids, &self.interner);
        Ok(Some((listing, choice)))
    }

    /// The listing of `partition` for view `v`'s snapshot (a store's fault is EIO).
    pub fn listing_of(&self, v: &ViewState, partition: &Arc<str>) -> Result<Arc<PartitionListing>> {
        let listing = self.partitions.listing(&v.snap, partition).map_err(|e| {
            Error::io(
                self.store.describe(&Default::default()),
                std::io::Error::other(e.to_string()),
            )
        })?;
        // A merged view and a change feed key their slices by their inputs' sizes and times.
        if v.merged.is_some() {
            hudifs_core::listing::stat_files(&*self.store, &listing.files);
        }
        Ok(listing)
    }

    /// Resolve partitions `indexes` of a view on several threads (errors are kept in the
    /// partitions' slots, where the callers meet them).
    pub fn resolve_parts(&self, v: &ViewState, indexes: &[usize]) {
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

    /// A table file of the registry, if it has id `file`.
    pub fn file(&self, file: u64) -> Option<DataFile> {
        self.partitions.registry.get(file)
    }

    /// A table file of the registry.
    pub fn registered(&self, file: u64) -> Result<DataFile> {
        self.file(file)
            .ok_or_else(|| Error::NotFound(format!("file {file}")))
    }

    /// Make sure `f`'s size, time and mode are known: a file listed by name only is stated
    /// with the rest of its partition (whoever asks for one file's attributes usually asks for
    /// its neighbours' next), else alone. A file gone since the listing is not found.
    pub fn stated(&self, f: &DataFile) -> Result<()> {
        if f.is_stated() {
            return Ok(());
        }
        self.partitions.stat_partition(&*self.store, &f.partition);
        if !f.is_stated() {
            hudifs_core::listing::stat_files(&*self.store, std::slice::from_ref(f));
        }
        if f.is_stated() {
            Ok(())
        } else {
            Err(Error::NotFound(f.rel_path()))
        }
    }

    /// A file was looked up by name (`stat_demand.rs`).
    pub fn file_looked_up(&self) {
        self.stat_demand.file_looked_up();
    }

    /// Whether a listing made now carries its files' attributes (`stat_demand.rs`).
    pub fn wants_file_attrs(&self) -> bool {
        self.stat_demand.wants_file_attrs()
    }

    /// View `view` if it is cached, planned against the current snapshot and plain (a merged
    /// view may merge): what an answer from memory starts from.
    fn in_memory(&self, view: u32) -> Option<Arc<ViewState>> {
        let generation = self.snapshot().generation;
        let v = self.peek(view)?;
        (v.snap.generation == generation && v.merged.is_none()).then_some(v)
    }

    /// Whether listing directory `path` of view `view` needs nothing from the storage: the view
    /// is in memory, every partition at or below `path` is resolved (a walk of `latest/`
    /// resolves them all when it lists `latest/`), and while listings carry attributes, the
    /// files of the partition at `path` are stated.
    pub fn dir_resolved(&self, view: u32, path: &str) -> bool {
        let Some(v) = self.in_memory(view) else {
            return false;
        };
        if !v.resolved_under(path) {
            return false;
        }
        !self.wants_file_attrs()
            || v.partition_index(path)
                .and_then(|i| v.parts[i].get())
                .is_none_or(|p| p.listing.files.iter().all(|f| f.is_stated()))
    }

    /// Whether looking `name` up in directory `path` of view `view` needs nothing from the
    /// storage: the view is in memory, and `name` is a stated file of the resolved partition at
    /// `path`, or else every partition below `path/name` is resolved (what deciding a directory
    /// takes).
    pub fn lookup_resolved(&self, view: u32, path: &str, name: &str) -> bool {
        let Some(v) = self.in_memory(view) else {
            return false;
        };
        if let Some(i) = v.partition_index(path) {
            let Some(p) = v.parts[i].get() else {
                return false;
            };
            if let Some(pos) = p.position(name) {
                let c = p.choice.files[pos];
                return p.listing.files[c.index as usize].is_stated();
            }
        }
        v.resolved_under(&join(path, name))
    }
}
