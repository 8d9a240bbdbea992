//! [`Snapshot`]: one state of a table, read through the storage — configuration, active
//! timeline, derived facts, partitions — and the I/O around the pure rules: reading the
//! archived timeline when a view needs it, listing partitions, applying timeline changes.
//! Views are resolved against one snapshot, so one answer never mixes two states of the table.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};

use hudifs_storage::Storage;

use crate::archive;
use crate::error::{Error, Result};
use crate::instant_time::InstantTime;
use crate::listing::{self, DataFile};
use crate::listing_source::{self, ListingMode};
use crate::rules::{
    self, Archived, ArchivedFacts, Context, InstantInterner, PartitionChoice, Plan, View,
    VisibleFile,
};
use crate::table::TableConfig;
use crate::timeline::InstantMetadata;
use crate::timeline::{self, InstantFile, Timeline};
use crate::viewkey::{self, ViewKey};

/// One state of a table.
pub struct Snapshot {
    /// Counts the snapshots of one mount (1 for the first).
    pub generation: u64,
    pub store: Arc<dyn Storage>,
    pub cfg: Arc<TableConfig>,
    pub meta: InstantMetadata,
    pub ctx: Arc<Context>,
    /// Every partition path, sorted.
    pub partitions: Partitions,
    /// The archived timeline's facts, read the first time a view reaches before the active
    /// timeline (and kept by the next snapshot while nothing is archived).
    archive: Arc<OnceLock<Archived>>,
    /// The partition listings the discovery of this snapshot took (after its timeline was
    /// read: an object store's listing, or the metadata table's), each handed out once as that
    /// partition's first listing.
    prelisted: Mutex<listing::Prelisted>,
    /// How partitions are listed, and where this snapshot's listing came from (`storage` or
    /// `metadata-table@<instant>`).
    listing: Listing,
}

/// Every partition path of a snapshot, sorted.
pub type Partitions = Arc<Vec<Arc<str>>>;

/// How a snapshot's partitions are listed, and where its listing came from.
type Listing = Arc<(ListingMode, String)>;

/// A change that touched more partitions than this is listed again from the metadata table
/// (where the snapshot was listed from it): reading the table's few files costs less than a
/// LIST per partition, 16 side by side, from about here.
const MDT_RELIST_MIN: usize = 16;

/// What applying a timeline change did to the partitions: those whose visible files may have
/// changed; `None` when possibly all (the active timeline's start moved, or metadata that would
/// tell is unreadable).
pub type Touched = Option<BTreeSet<String>>;

impl Snapshot {
    /// Read the table in `store`, listing it as [`ListingMode::Auto`] says. The timeline is
    /// read before the partitions, so every data file a completed instant names is already
    /// there when a partition is listed.
    pub fn open(store: Arc<dyn Storage>) -> Result<Snapshot> {
        let cfg = TableConfig::load(&*store)?;
        Snapshot::open_with_config(store, cfg, ListingMode::Auto)
    }

    /// [`Snapshot::open`] with the table's configuration already read from `store`, listing
    /// the table as `mode` says.
    pub fn open_with_config(
        store: Arc<dyn Storage>,
        cfg: TableConfig,
        mode: ListingMode,
    ) -> Result<Snapshot> {
        let cfg = Arc::new(cfg);
        let timeline = Arc::new(Timeline::load(&*store, &cfg)?);
        let meta = InstantMetadata::new(store.clone(), cfg.timeline_dir.clone());
        let ctx = Arc::new(Context::new(cfg.clone(), timeline, &meta));
        store_faults_since(&meta, 0, &cfg)?;
        let d = listing_source::discover(&store, &cfg, &ctx, &meta, mode)?;
        let partitions = d
            .partitions
            .into_iter()
            .map(|p| Arc::from(p.as_str()))
            .collect();
        Ok(Snapshot {
            generation: 1,
            store,
            cfg,
            meta,
            ctx,
            partitions: Arc::new(partitions),
            archive: Arc::new(OnceLock::new()),
            prelisted: Mutex::new(d.prelisted),
            listing: Arc::new((mode, d.source)),
        })
    }

    /// How this snapshot's partitions are listed.
    pub fn listing_mode(&self) -> ListingMode {
        self.listing.0
    }

    /// Where this snapshot's listing came from: `storage`, or `metadata-table@<instant>`
    /// (partitions the metadata table was behind on, and any listed again since, come from
    /// storage either way).
    pub fn listing_source(&self) -> &str {
        &self.listing.1
    }

    pub fn timeline(&self) -> &Timeline {
        &self.ctx.timeline
    }

    /// The archived timeline's facts, read on first use. On an object store a failure to read
    /// it is not kept (it may be the store's fault, not damage): the next use reads it again.
    fn archived(&self) -> Archived {
        if let Some(a) = self.archive.get() {
            return a.clone();
        }
        // The archive is untrusted input read by a third-party Avro/Parquet decoder: a panic in
        // there is one more way for it to be unreadable.
        let store = &*self.store;
        let cfg = &self.cfg;
        // On an object store a failed read may be the store's fault (5xx, resets after the
        // client's retries), which the archive's errors do not tell from damage.
        let mut transient = false;
        let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            archive::load_archive(store, cfg)
        }))
        .map_err(|_| "the archived timeline could not be decoded".to_string())
        .and_then(|r| {
            r.map_err(|e| {
                transient = store.is_object_store();
                e.to_string()
            })
        })
        .and_then(|a| ArchivedFacts::from_archive(&a));
        let got = match read {
            Ok(f) => Archived::Read(Arc::new(f)),
            Err(e) => {
                log::warn!("{}: {e}", store.describe(&cfg.archive_dir));
                Archived::Damaged(e)
            }
        };
        if transient {
            return got;
        }
        self.archive.get_or_init(|| got).clone()
    }

    /// How many completed writes the archived timeline holds (read on first use): what the
    /// active timeline's first write is preceded by. A damaged archive refuses.
    pub fn archived_write_count(&self) -> Result<usize> {
        if !self.timeline().archive_nonempty {
            return Ok(0);
        }
        match self.archived() {
            Archived::Read(f) => Ok(f.writes.len()),
            Archived::Damaged(e) => Err(Error::Refused(format!("the archived timeline: {e}"))),
            Archived::NotNeeded => Ok(0),
        }
    }

    /// Decide a view (reading the archived timeline first if the view reaches into it).
    pub fn plan(&self, key: &ViewKey, read_optimized: bool) -> Result<Plan> {
        let archived = if rules::needs_archive(&self.ctx, key) {
            self.archived()
        } else if rules::wants_archive(&self.ctx) {
            // Without it, logs are told by the active timeline alone.
            match self.archived() {
                a @ Archived::Read(_) => a,
                _ => Archived::NotNeeded,
            }
        } else {
            Archived::NotNeeded
        };
        rules::plan(&self.ctx, &self.meta, &archived, key, read_optimized)
    }

    /// Choose the files of one partition's listing for a planned view.
    pub fn resolve_partition<F: std::borrow::Borrow<DataFile>>(
        &self,
        plan: &Plan,
        files: &[F],
        interner: &InstantInterner,
    ) -> PartitionChoice {
        rules::resolve_partition(&self.ctx, &self.meta, plan, files, interner)
    }

    /// What [`Snapshot::resolve_partition`] chooses in the file groups `fids` alone, found by
    /// name in the partition's listing without a look at its other files.
    pub fn resolve_groups<F: std::borrow::Borrow<DataFile>>(
        &self,
        plan: &Plan,
        files: &[F],
        fids: &std::collections::BTreeSet<&str>,
        interner: &InstantInterner,
    ) -> PartitionChoice {
        rules::resolve_groups(&self.ctx, &self.meta, plan, files, fids, interner)
    }

    /// The data files of a partition, as the storage lists them now (or, the first time on an
    /// object store, as the discovery of this snapshot listed them).
    pub fn list_partition(&self, partition: &str) -> Result<Vec<DataFile>> {
        match self.take_prelisted(partition) {
            Some(files) => Ok(files),
            None => listing::list_partition(&*self.store, &self.cfg, partition),
        }
    }

    /// [`Snapshot::list_partition`], by names alone where that saves a `stat` per file
    /// ([`listing::list_partition_names`]): for the mount, which states files when their
    /// attributes are asked for.
    pub fn list_partition_names(&self, partition: &str) -> Result<Vec<DataFile>> {
        match self.take_prelisted(partition) {
            Some(files) => Ok(files),
            None => listing::list_partition_names(&*self.store, &self.cfg, partition),
        }
    }

    /// The files of the discovery's listing of `partition`, the first time only.
    fn take_prelisted(&self, partition: &str) -> Option<Vec<DataFile>> {
        let entries = self
            .prelisted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(partition)?;
        Some(listing::partition_files(&self.cfg, partition, entries))
    }

    /// Resolve a whole view at once, listing every partition it may have files in (for
    /// `hudifs ls` and tests; the mount resolves partitions lazily).
    pub fn resolve(&self, key: &ViewKey, read_optimized: bool) -> Result<View> {
        let plan = self.plan(key, read_optimized)?;
        let interner = InstantInterner::default();
        let mut files = Vec::new();
        for p in self.partitions.iter().filter(|p| plan.may_list(p)) {
            let pfiles = self.list_partition(p)?;
            let choice = self.resolve_partition(&plan, &pfiles, &interner);
            for c in &choice.files {
                files.push(VisibleFile {
                    file: pfiles[c.index as usize].clone(),
                    writer: choice.writer(c).cloned(),
                    slice: choice.slice(c).to_string(),
                });
            }
        }
        files.sort_by_key(|f| f.rel_path());
        Ok(View {
            files,
            groups_written: plan.groups_written(),
            instant: plan.instant,
            selected: plan.selected,
            effective_end: plan.effective_end,
        })
    }

    /// The view key an `incremental/` name or `--incremental` option stands for.
    pub fn parse_window(&self, s: &str, zone: &crate::timefmt::TimelineZone) -> Result<ViewKey> {
        viewkey::parse_window(s, zone, self.timeline().latest_completion())
    }

    /// The window of `incremental/` that selects completed write `t` alone: from the time that
    /// selects the write before it (or the earliest) to `t`'s, as `incremental/` lists it.
    pub fn write_window(&self, t: &InstantTime) -> Option<ViewKey> {
        let tl = self.timeline();
        let at = tl.completion(t.as_str());
        let mut start = InstantTime::earliest();
        for c in tl.completed_after(None) {
            if c.at.as_str() == at {
                return Some(ViewKey::Incremental {
                    start: Some(start),
                    end: Some(c.at.clone()),
                });
            }
            start = c.at.clone();
        }
        None
    }

    /// `as_of/` listing: completed write instants and savepoints.
    pub fn as_of_names(&self) -> Vec<InstantTime> {
        let mut as_of: BTreeSet<InstantTime> = self.timeline().completed.keys().cloned().collect();
        as_of.extend(self.ctx.savepoints().iter().cloned());
        as_of.into_iter().collect()
    }

    /// `incremental/` listing: one window per completed write instant.
    pub fn window_names(&self) -> Vec<String> {
        rules::incremental_windows(&self.ctx)
            .iter()
            .map(|(a, b)| viewkey::window_name(Some(a), Some(b)))
            .collect()
    }

    /// `timeline/` listing: every instant file, sorted.
    pub fn timeline_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.timeline().file_names().map(str::to_string).collect();
        names.sort();
        names
    }

    /// Whether no pending or future instant can change a planned view: it shows the same files
    /// for as long as the cleaner keeps them (SEMANTICS.md §6.3).
    pub fn is_final(&self, plan: &Plan) -> bool {
        let tl = self.timeline();
        let before_pending = |t: &str| tl.oldest_pending().is_none_or(|p| t < p.as_str());
        match &plan.key {
            ViewKey::Latest => false,
            ViewKey::AsOf(t) => tl.latest_completed().is_some_and(|l| t <= l) && before_pending(t),
            // The window as asked, not as cut: a pending write that cuts a version-6 window
            // (BLOCK) changes it when it completes or is rolled back.
            ViewKey::Incremental { end: Some(e), .. } => {
                tl.latest_completion().is_some_and(|l| e <= l) && before_pending(e)
            }
            ViewKey::Incremental { end: None, .. } => false,
        }
    }

    /// Index range of the partitions whose path starts with `dir` (callers keep those equal to
    /// it or below it: `dir/...`). Paths with a common prefix are contiguous when sorted.
    pub fn partitions_under(&self, dir: &str) -> std::ops::Range<usize> {
        let start = self.partitions.partition_point(|p| &**p < dir);
        let len = self.partitions[start..]
            .iter()
            .take_while(|p| p.starts_with(dir))
            .count();
        start..start + len
    }

    /// The snapshot after timeline files appeared or changed (`added`) and vanished
    /// (`removed`, by name), and the partitions that may have changed; `None` if nothing did.
    /// Only the new or changed instant files are parsed and decoded; partitions are discovered
    /// again only when the change can touch any of them.
    pub fn apply(
        &self,
        added: Vec<InstantFile>,
        removed: &BTreeSet<String>,
    ) -> Result<Option<(Snapshot, Touched)>> {
        let tl = self.timeline();
        let gone: BTreeSet<String> = removed.iter().filter(|n| tl.has_file(n)).cloned().collect();
        if added.is_empty() && gone.is_empty() {
            return Ok(None);
        }
        let archive_nonempty = timeline::archive_has_files(&*self.store, &self.cfg)?;
        let (timeline, delta) = tl.apply(added, &gone, archive_nonempty);
        let faults = self.meta.store_faults();
        let ctx = Arc::new(self.ctx.apply(Arc::new(timeline), &delta, &self.meta));
        let archive_moved = ctx.timeline.active_start != tl.active_start
            || ctx.timeline.archive_nonempty != tl.archive_nonempty;
        let touched = if archive_moved {
            None
        } else {
            rules::touched_partitions(&ctx, &self.meta, &delta)
        };
        store_faults_since(&self.meta, faults, &self.cfg)?;
        let (partitions, prelisted, listing) = match &touched {
            None => {
                let mode = self.listing.0;
                let d = listing_source::discover(&self.store, &self.cfg, &ctx, &self.meta, mode)?;
                self.listed_by(d)
            }
            Some(t) => match self.relist_from_metadata_table(t, &ctx) {
                Some(d) => self.listed_by(d),
                None => (
                    self.with_new_partitions(t),
                    Default::default(),
                    self.listing.clone(),
                ),
            },
        };
        let next = Snapshot {
            generation: self.generation + 1,
            store: self.store.clone(),
            cfg: self.cfg.clone(),
            meta: self.meta.clone(),
            ctx,
            partitions,
            // Nothing was archived: the archive read for this snapshot still holds.
            archive: if archive_moved {
                Arc::new(OnceLock::new())
            } else {
                self.archive.clone()
            },
            prelisted: Mutex::new(prelisted),
            listing,
        };
        Ok(Some((next, touched)))
    }

    /// A discovery's partitions, first listings and source, under this snapshot's mode.
    fn listed_by(
        &self,
        d: listing_source::Discovered,
    ) -> (Partitions, listing::Prelisted, Listing) {
        (
            Arc::new(d.partitions.iter().map(|p| Arc::from(p.as_str())).collect()),
            d.prelisted,
            Arc::new((self.listing.0, d.source)),
        )
    }

    /// Where this snapshot was listed from the metadata table and a change touched more
    /// partitions than LISTs of them would cost to read the metadata table again: the listing
    /// from the metadata table, with first listings of the touched partitions only (the others
    /// keep what they have). `None`: list the touched partitions from storage.
    fn relist_from_metadata_table(
        &self,
        touched: &BTreeSet<String>,
        ctx: &Context,
    ) -> Option<listing_source::Discovered> {
        if touched.len() <= MDT_RELIST_MIN || !self.listing.1.starts_with("metadata-table@") {
            return None;
        }
        match listing_source::from_metadata_table(&self.store, &self.cfg, ctx, &self.meta) {
            Ok(mut d) => {
                d.prelisted.retain(|p, _| touched.contains(p));
                Some(d)
            }
            Err(e) => {
                log::info!(
                    "{}: the metadata table cannot be read again ({e}); the {} partitions a change touched are listed from storage",
                    self.store.describe(&hudifs_storage::TablePath::root()),
                    touched.len()
                );
                None
            }
        }
    }

    /// The partition list with the touched partitions that are new partition directories.
    fn with_new_partitions(&self, touched: &BTreeSet<String>) -> Arc<Vec<Arc<str>>> {
        let current = &self.partitions;
        let new: Vec<&String> = touched
            .iter()
            .filter(|p| current.binary_search_by(|c| (**c).cmp(p.as_str())).is_err())
            .filter(|p| listing::is_partition_dir(&*self.store, p))
            .collect();
        if new.is_empty() {
            return current.clone();
        }
        let mut all: Vec<Arc<str>> = current.iter().cloned().collect();
        all.extend(new.into_iter().map(|p| Arc::from(p.as_str())));
        all.sort();
        all.dedup();
        Arc::new(all)
    }

    /// The same snapshot under another generation number.
    pub fn with_generation(mut self, generation: u64) -> Snapshot {
        self.generation = generation;
        self
    }
}

/// An error if the object store failed reads of instant files since `before` (see
/// [`InstantMetadata::store_faults`]): what was derived meanwhile would take a store's fault
/// for unreadable metadata, so the caller keeps the previous snapshot (or fails the mount).
fn store_faults_since(meta: &InstantMetadata, before: u64, cfg: &TableConfig) -> Result<()> {
    let now = meta.store_faults();
    if now == before {
        return Ok(());
    }
    Err(crate::error::Error::io(
        meta.describe(""),
        std::io::Error::other(format!(
            "{} instant file(s) of {} could not be read from the store (after retries)",
            now - before,
            cfg.timeline_dir
        )),
    ))
}
