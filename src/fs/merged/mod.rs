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

mod materialise;
mod slices;

pub(super) use materialise::refusal;
pub use materialise::Materialised;
pub use slices::{MergedNode, MergedPartition, MergedRegistry, MergedSlice};

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hudifs_core::error::{Error, Result};
use hudifs_core::ids::FileGroupId;
use hudifs_core::rules::WriteKind;

use crate::fs::handles::{OpenHandle, OpenedParts};
use crate::fs::inode::{Node, MERGED_LATEST_VIEW};
use crate::fs::{DirEntry, Entry, HudiFs, Invalidations, ViewState};
use std::collections::HashMap;

use hudifs_core::instant_time::InstantTime;
use hudifs_core::snapshot::Snapshot;
use hudifs_core::timeline::Instant;
use hudifs_merge::evolution::{self, InternalSchema, SchemaOnRead};
use hudifs_merge::schema::ViewSchema;
use hudifs_storage::sync::lock;
use hudifs_storage::{Storage, TablePath};
use std::collections::BTreeMap;

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

impl MergeSettings {
    /// The cache directory: the one given, else [`default_cache_dir`].
    pub fn dir(&self) -> PathBuf {
        self.cache_dir.clone().unwrap_or_else(default_cache_dir)
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

/// What a `merged/` or `cdc/` view adds to the plain view it is planned as: each partition's
/// slices (or change feeds), built on demand from the plain partition (or its listing).
pub struct MergedView {
    /// A `cdc/` view: each partition's change feeds, one per file group.
    pub cdc: bool,
    /// A `merged/incremental/` view: the groups its writes wrote records to
    /// (`Plan::groups_written`), worked out once for all its partitions.
    groups_written: OnceLock<BTreeSet<FileGroupId>>,
    /// The table schema every slice of the view is written in (`view_schema`), worked out
    /// once for all its partitions.
    schema: OnceLock<Option<ViewSchemaText>>,
    parts: Vec<OnceLock<Arc<MergedPartition>>>,
    /// The partitions in the order a walk of the view visits them, and each partition's place
    /// in it (`walk_cmp`), worked out on first use (a merge ahead of a reader).
    walk: OnceLock<(Vec<usize>, Vec<usize>)>,
}

impl MergedView {
    /// A merged view (a change feed if `cdc`) of a snapshot of `partitions` partitions.
    pub fn new(cdc: bool, partitions: usize) -> MergedView {
        MergedView {
            cdc,
            groups_written: OnceLock::new(),
            schema: OnceLock::new(),
            parts: (0..partitions).map(|_| OnceLock::new()).collect(),
            walk: OnceLock::new(),
        }
    }

    /// Whether a merged view (a change feed if `cdc`) of `plan` can be served at all: a change
    /// feed needs what `hudifs_merge::cdc_check` asks (SEMANTICS.md §10.10).
    pub fn check(cdc: bool, snap: &Snapshot, plan: &hudifs_core::rules::Plan) -> Result<()> {
        if cdc {
            hudifs_merge::cdc_check(snap, plan)?;
        }
        Ok(())
    }

    /// Partition `i` if it was built (handed to the kernel).
    fn built(&self, i: usize) -> Option<Arc<MergedPartition>> {
        self.parts.get(i).and_then(|s| s.get()).cloned()
    }

    /// The partitions of `snap` (this view's snapshot) in walk order, and each one's place.
    fn walk(&self, snap: &Snapshot) -> &(Vec<usize>, Vec<usize>) {
        self.walk.get_or_init(|| {
            let mut order: Vec<usize> = (0..snap.partitions.len()).collect();
            order.sort_by(|a, b| walk_cmp(&snap.partitions[*a], &snap.partitions[*b]));
            let mut place = vec![0; order.len()];
            for (k, i) in order.iter().enumerate() {
                place[*i] = k;
            }
            (order, place)
        })
    }

    /// The partition a walk of the view visits after partition `i`.
    fn walk_after(&self, snap: &Snapshot, i: usize) -> Option<usize> {
        let (order, place) = self.walk(snap);
        order.get(place.get(i)? + 1).copied()
    }

    /// The partition a walk of the view visits before partition `i`.
    fn walk_before(&self, snap: &Snapshot, i: usize) -> Option<usize> {
        let (order, place) = self.walk(snap);
        order.get(place.get(i)?.checked_sub(1)?).copied()
    }
}

/// The order in which a walk of a view (`find`, `cp -r`: depth first, each directory in the
/// order it lists) visits the files of partitions `a` and `b`: a view directory lists its
/// sub-directories (by name) before its files (`HudiFs::readdir_entries`), so the partitions
/// compare by path component, and a partition below another comes before it.
pub(crate) fn walk_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let (mut a, mut b) = (
        a.split('/').filter(|c| !c.is_empty()),
        b.split('/').filter(|c| !c.is_empty()),
    );
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) => match x.cmp(y) {
                Equal => continue,
                o => return o,
            },
            (Some(_), None) => return Less,
            (None, Some(_)) => return Greater,
            (None, None) => return Equal,
        }
    }
}

/// A view's table schema: its Avro text and its Arrow form.
pub(crate) struct ViewSchemaText {
    pub text: Arc<str>,
    pub arrow: Arc<ViewSchema>,
    /// The schema each completed write at or before the view's time recorded, by requested
    /// time (`None`: none recorded, or its metadata unreadable): what its files were written
    /// under.
    pub writers: HashMap<InstantTime, Option<Arc<str>>>,
    /// Schema-on-read: the view's `InternalSchema` and its files' (columns matched by field
    /// id); `None` where the view's writes recorded none.
    pub evolution: Option<Arc<SchemaOnRead>>,
}

impl ViewSchemaText {
    /// Whether a write up to the view's time recorded another schema than the view's: the
    /// table's schema changed.
    pub fn changed(&self) -> bool {
        self.evolution.is_some() || self.writers.values().flatten().any(|s| **s != *self.text)
    }
}

/// Threads that read the commit metadata of a view's writes side by side.
const SCHEMA_READERS: usize = 8;

/// What a write recorded of its schema: `extraMetadata.schema` and, under schema-on-read,
/// `extraMetadata.latestSchema`.
type Recorded = (Option<Arc<str>>, Option<Arc<str>>);

/// The schemas each of `writes` recorded, read side by side (each instant's metadata is read
/// once per mount and kept with it; on an object store each read is a GET).
fn writer_schemas(snap: &Snapshot, writes: &[Arc<Instant>]) -> HashMap<InstantTime, Recorded> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found = std::sync::Mutex::new(HashMap::with_capacity(writes.len()));
    std::thread::scope(|s| {
        for _ in 0..SCHEMA_READERS.min(writes.len()) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(i) = writes.get(k) else { break };
                let recorded = snap
                    .meta
                    .commit(i)
                    .ok()
                    .map(|m| (m.schema.clone(), m.internal_schema.clone()))
                    .unwrap_or_default();
                lock(&found).insert(i.requested.clone(), recorded);
            });
        }
    });
    found.into_inner().unwrap_or_else(|e| e.into_inner())
}

/// The schema history of the table (`.hoodie/.schema/`), as Java's
/// `FileBasedInternalSchemaStorageManager.getHistorySchemaStr` reads it: the completed
/// `.schemacommit` file of the greatest name whose requested time is a completed write's.
/// Empty where there is none; an error names the file that cannot be read.
fn schema_history(
    store: &dyn Storage,
    snap: &Snapshot,
) -> std::result::Result<BTreeMap<i64, InternalSchema>, String> {
    let Ok(dir) = TablePath::new(".hoodie/.schema") else {
        return Ok(BTreeMap::new());
    };
    let names = match store.list_names(&dir) {
        Ok(n) => n,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(format!("{}: cannot be listed: {e}", store.describe(&dir))),
    };
    let tl = snap.timeline();
    let newest = names
        .into_iter()
        .map(|(n, _)| n)
        .filter(|n| {
            evolution::schema_file_instant(n).is_some_and(|(t, done)| {
                done && tl
                    .completed
                    .iter()
                    .any(|(r, i)| r.as_str() == t && i.is_completed_write())
            })
        })
        .max();
    let Some(name) = newest else {
        return Ok(BTreeMap::new());
    };
    let path = dir.child(&name).map_err(|e| format!("{name}: {e:?}"))?;
    let what = store.describe(&path);
    let bytes = store
        .read(&path)
        .map_err(|e| format!("schema history {what} cannot be read: {e}"))?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("schema history {what} is not UTF-8 text"))?;
    evolution::parse_history(&text).map_err(|e| format!("schema history {what} is malformed: {e}"))
}

/// Schema-on-read of a view whose newest write that recorded one has `latestSchema` `query`
/// (SEMANTICS.md §10.2): every write's own, and the table's schema history.
fn schema_on_read(
    store: &dyn Storage,
    snap: &Snapshot,
    writes: &[Arc<Instant>],
    recorded: &HashMap<InstantTime, Recorded>,
    query: &str,
) -> SchemaOnRead {
    // Most writes record the same version: each text is parsed once.
    let mut parsed: HashMap<Arc<str>, Result<Arc<InternalSchema>, String>> = HashMap::new();
    let commits = writes
        .iter()
        .filter_map(|i| {
            let text = recorded.get(&i.requested)?.1.as_ref()?;
            let schema = parsed
                .entry(text.clone())
                .or_insert_with(|| InternalSchema::parse(text).map(Arc::new))
                .clone()
                .map_err(|e| {
                    format!(
                        "extraMetadata.latestSchema of instant {} ({:?}) is malformed: {e}",
                        i.requested, i.action
                    )
                });
            Some((i.requested.to_string(), schema))
        })
        .collect();
    let history = schema_history(store, snap);
    SchemaOnRead::new(query, commits, history).unwrap_or_else(|e| {
        SchemaOnRead::broken(format!(
            "the view's schema (extraMetadata.latestSchema) is malformed: {e}"
        ))
    })
}

/// The table schema of view `plan` (SEMANTICS.md §10.2): the schema the newest completed write
/// at or before the view's time recorded in its commit metadata, as Hudi's
/// `TableSchemaResolver` takes it; `None` where no write recorded one (or it cannot be read as
/// a schema: each slice then keeps its own). Partition columns a table does not store in its
/// files (`hoodie.datasource.write.drop.partition.columns`) are left out.
pub(crate) fn view_schema(
    store: &dyn Storage,
    snap: &Snapshot,
    plan: &hudifs_core::rules::Plan,
) -> Option<ViewSchemaText> {
    let tl = snap.timeline();
    let t = plan.t.as_ref().map(|t| t.as_str());
    let writes: Vec<Arc<Instant>> = tl
        .completed
        .iter()
        .filter(|(r, i)| t.is_none_or(|t| r.as_str() <= t) && i.is_completed_write())
        .map(|(_, i)| i.clone())
        .collect();
    let recorded = writer_schemas(snap, &writes);
    let text = writes
        .iter()
        .rev()
        .find_map(|i| recorded.get(&i.requested)?.0.clone())?;
    let query = writes
        .iter()
        .rev()
        .find_map(|i| recorded.get(&i.requested)?.1.clone());
    let evolution = query.map(|q| Arc::new(schema_on_read(store, snap, &writes, &recorded, &q)));
    let writers = recorded
        .into_iter()
        .map(|(k, (schema, _))| (k, schema))
        .collect();
    let dropped = snap
        .cfg
        .properties
        .get("hoodie.datasource.write.drop.partition.columns")
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    let skip = if dropped {
        snap.cfg.partition_fields.clone()
    } else {
        Vec::new()
    };
    match ViewSchema::from_avro(&text, &skip) {
        Ok(arrow) => Some(ViewSchemaText {
            text,
            arrow: Arc::new(arrow),
            writers,
            evolution,
        }),
        Err(e) => {
            log::warn!("the table schema of a view cannot be read ({e}): each slice keeps its own");
            None
        }
    }
}

impl HudiFs {
    /// The merged partition `i` of merged view `v`.
    pub(super) fn merged_part(&self, v: &ViewState, i: usize) -> Result<Arc<MergedPartition>> {
        let missing = || Error::NotFound(format!("merged partition {i}"));
        let m = v.merged.as_ref().ok_or_else(missing)?;
        let slot = m.parts.get(i).ok_or_else(missing)?;
        if let Some(p) = slot.get() {
            return Ok(p.clone());
        }
        let built = if m.cdc {
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
                let listing = self.views.listing_of(v, partition)?;
                let schema = m
                    .schema
                    .get_or_init(|| view_schema(&*self.store, &v.snap, &v.plan));
                let window = schema.as_ref().filter(|s| s.changed());
                self.cdc_partition(&v.snap, &v.plan, partition, &listing, window)?
            } else {
                MergedPartition::default()
            }
        } else {
            let pv = self.views.part(v, i)?;
            let written = m.groups_written.get_or_init(|| v.plan.groups_written());
            let schema = m
                .schema
                .get_or_init(|| view_schema(&*self.store, &v.snap, &v.plan));
            self.merged_partition(
                &v.snap,
                &v.plan,
                written,
                schema.as_ref(),
                &pv.listing,
                &pv.choice,
            )
        };
        Ok(slot.get_or_init(|| Arc::new(built)).clone())
    }

    /// Look `name` up in partition `i` of merged view `v` (id `view`): its entry, merged now if
    /// it is a slice not merged yet; `None` if the partition has no such file.
    pub(super) fn lookup_merged(
        &self,
        view: u32,
        v: &Arc<ViewState>,
        i: usize,
        name: &str,
    ) -> Result<Option<Entry>> {
        let part = self.merged_part(v, i)?;
        let Some(node) = part.find(name) else {
            return Ok(None);
        };
        let ttl = v.ttl();
        Ok(Some(match node {
            MergedNode::Base(file) => {
                let f = self.views.registered(file)?;
                self.file_entry(Node::ViewFile { view, file }.ino(), &f, ttl)?
            }
            MergedNode::Slice(slice) => {
                let ms = self.merged_slice(view, slice)?;
                let ino = Node::MergedFile { view, slice }.ino();
                let entry = self.merged_entry(view, ino, &ms, ttl)?;
                self.read_ahead(v, i, &part, name);
                entry
            }
        }))
    }

    /// The entries of partition `i` of merged view `v` (id `view`): its slices, named, not
    /// merged (a slice not merged yet gets attributes the kernel must not keep).
    pub(super) fn merged_entries(
        &self,
        view: u32,
        v: &ViewState,
        i: usize,
    ) -> Result<Vec<DirEntry>> {
        let part = self.merged_part(v, i)?;
        let mut out = Vec::with_capacity(part.entries.len());
        for (name, node) in &part.entries {
            let entry = match *node {
                MergedNode::Base(file) => {
                    let f = self.views.registered(file)?;
                    let ino = Node::ViewFile { view, file }.ino();
                    if self.is_skeleton(&f) {
                        // Stitched on `stat`, not by the listing.
                        self.listed_file_entry(ino, file, &f, v.ttl())
                    } else {
                        self.file_entry(ino, &f, v.ttl())?
                    }
                }
                MergedNode::Slice(slice) => {
                    let ms = self.merged_slice(view, slice)?;
                    let ino = Node::MergedFile { view, slice }.ino();
                    self.merged_listed(view, ino, &ms, v.ttl())
                }
            };
            out.push(DirEntry {
                name: name.clone(),
                entry,
            });
        }
        Ok(out)
    }

    /// A merged slice of the registry, in view `view`. One that a previous daemon of this mount
    /// handed out (docs/SEMANTICS.md §7.11) is found again by its partition and name in the view.
    pub(super) fn merged_slice(&self, view: u32, slice: u64) -> Result<Arc<MergedSlice>> {
        if let Some(ms) = self.merged.get(slice) {
            return Ok(ms);
        }
        let missing = || Error::NotFound(format!("merged slice {slice}"));
        let (partition, name) = self.merged.inherited(slice).ok_or_else(missing)?;
        let dir = self.inodes.dirs.find(&*partition).ok_or_else(missing)?;
        let entry = self.lookup(
            Node::ViewDir { view, dir }.ino(),
            std::ffi::OsStr::new(&*name),
        )?;
        let Some(Node::MergedFile { slice: now, .. }) = Node::from_ino(entry.attr.ino) else {
            return Err(missing());
        };
        let ms = self.merged.get(now).ok_or_else(missing)?;
        self.merged.found_again(slice, ms.clone());
        Ok(ms)
    }

    /// The entry of merged slice `slice` of view `view` (inode `ino`): merged now if it is not
    /// yet.
    pub(super) fn merged_file_entry(
        &self,
        ino: u64,
        view: u32,
        slice: u64,
        ttl: Duration,
    ) -> Result<Entry> {
        let ms = self.merged_slice(view, slice)?;
        self.merged_entry(view, ino, &ms, ttl)
    }

    /// The write whose change data view `view` is (`delta/_change_data/<t>/`: a change feed
    /// shown as Delta change data files), if it is one.
    pub(super) fn change_data_of(&self, view: u32) -> Option<InstantTime> {
        let name = self.inodes.views.get(view)?;
        match &name.key {
            hudifs_core::viewkey::ViewKey::AsOf(t) if name.cdc && name.delta => Some(t.clone()),
            _ => None,
        }
    }

    /// The entry of a merged slice of view `view`: merged now if it is not yet (in a change
    /// data view, the change data file of the feed, written now if it is not yet).
    fn merged_entry(&self, view: u32, ino: u64, ms: &MergedSlice, ttl: Duration) -> Result<Entry> {
        if let Some(t) = self.change_data_of(view) {
            let schema = self.change_data_schema(&t)?;
            let (_, size) = self.change_data(ms, &schema)?;
            return Ok(self.owner.merged_file(ino, size, ms.mtime, ttl));
        }
        let size = match self.materialise(ms)? {
            Materialised::Base(file) => {
                let f = self.views.registered(file)?;
                self.views.stated(&f)?;
                f.size()
            }
            Materialised::Merged { size, .. } => size,
        };
        Ok(self.owner.merged_file(ino, size, ms.mtime, ttl))
    }

    /// The entry of a merged slice in a listing: without merging. One not merged yet shows
    /// size 0 with a zero TTL, so that the kernel asks (and the slice is merged) on `stat`.
    fn merged_listed(&self, view: u32, ino: u64, ms: &MergedSlice, ttl: Duration) -> Entry {
        if self.change_data_of(view).is_some() {
            return match lock(&ms.progress.change_data).as_ref() {
                Some((_, size)) => self.owner.merged_file(ino, *size, ms.mtime, ttl),
                None => self.owner.merged_file(ino, 0, ms.mtime, Duration::ZERO),
            };
        }
        let size_of = |id| {
            let f = self.views.file(id)?;
            f.is_stated().then(|| f.size())
        };
        match ms.size_if_known(size_of) {
            Some(size) => self.owner.merged_file(ino, size, ms.mtime, ttl),
            None => self.owner.merged_file(ino, 0, ms.mtime, Duration::ZERO),
        }
    }

    /// What opening merged slice `slice` of view `view` holds: its base file, or the merged
    /// file (merged now if it is not yet), whose bytes are fixed by its inputs.
    pub(super) fn open_merged_slice(&self, view: u32, slice: u64) -> Result<OpenedParts> {
        let ms = self.merged_slice(view, slice)?;
        if let Some(t) = self.change_data_of(view) {
            let schema = self.change_data_schema(&t)?;
            let f = self.open_change_data(&ms, &schema)?;
            let handle = hudifs_storage::local_file_handle(f)
                .map_err(|e| Error::io(format!("change data {}", ms.name), e))?;
            // Its bytes are fixed by the feed's and the version's schema.
            return Ok((OpenHandle::Data(handle.clone()), true, Some(handle)));
        }
        match self.materialise(&ms)? {
            Materialised::Base(file) => self.open_table_file(file),
            Materialised::Merged { path, size } => {
                let f = self.open_merged(&ms, &path, size)?;
                let handle = hudifs_storage::local_file_handle(f)
                    .map_err(|e| Error::io(path.display().to_string(), e))?;
                // The bytes of a merged slice are fixed by its inputs (the inode's key).
                Ok((OpenHandle::Data(handle.clone()), true, Some(handle)))
            }
        }
    }

    /// What the kernel must drop of `merged/latest/` after a switch: for each partition the
    /// previous `merged/latest/` had built (handed out) that the change touched, the names that
    /// left or now name another slice, the directory's attributes and listing, and those of the
    /// directories above it; the root always. Names of `merged/latest/` have short TTLs, so
    /// whatever this misses is gone within [`crate::fs::TTL_FRESH`] (SEMANTICS.md §10).
    pub(super) fn merged_latest_invalidations(
        &self,
        before: Option<&ViewState>,
        touched: Option<&BTreeSet<String>>,
        inv: &mut Invalidations,
    ) {
        let view = MERGED_LATEST_VIEW;
        inv.inodes.push(Node::ViewDir { view, dir: 0 }.ino());
        let Some(before) = before else { return };
        let now = self.view(view).ok();
        for (i, p) in before.snap.partitions.iter().enumerate() {
            if touched.is_some_and(|t| !t.contains(&**p)) {
                continue;
            }
            let Some(old) = before.merged.as_ref().and_then(|m| m.built(i)) else {
                continue;
            };
            let Some(dir) = self.inodes.dirs.find(&**p) else {
                continue;
            };
            let new = now.as_ref().and_then(|v| {
                let j = v.partition_index(p)?;
                self.merged_part(v, j).ok()
            });
            let ino = Node::ViewDir { view, dir }.ino();
            for (name, node) in &old.entries {
                if new.as_ref().and_then(|n| n.find(name)) != Some(*node) {
                    inv.entries.push((ino, name.to_string()));
                }
            }
            // The directory and those above it; a directory left empty leaves its parent.
            let mut path = p.to_string();
            let mut child = ino;
            loop {
                inv.inodes.push(child);
                let Some((parent, last)) = path.rsplit_once('/') else {
                    if now
                        .as_ref()
                        .is_none_or(|v| !self.dir_exists(v, &path).unwrap_or(true))
                    {
                        inv.entries
                            .push((Node::ViewDir { view, dir: 0 }.ino(), path.clone()));
                    }
                    break;
                };
                let Some(pdir) = self.inodes.dirs.find(parent) else {
                    break;
                };
                let pino = Node::ViewDir { view, dir: pdir }.ino();
                if now
                    .as_ref()
                    .is_none_or(|v| !self.dir_exists(v, &path).unwrap_or(true))
                {
                    inv.entries.push((pino, last.to_string()));
                }
                path = parent.to_string();
                child = pino;
            }
        }
        inv.inodes.sort();
        inv.inodes.dedup();
    }
}
