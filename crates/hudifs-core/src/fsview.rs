//! View resolution: the visibility rules of spec §4–§5, as a pure function of a timeline, a
//! listing and a view key. No caching, no FUSE; the only I/O is the lazy decoding of instant
//! metadata the timeline already owns.
//!
//! - `latest/` and `as_of/<T>/`: per file group the newest usable file slice at or before `T`
//!   (requested times), with pending-compaction merge, replaced groups hidden, strict logs.
//! - `incremental/<t1>..<t2>/`: the instants selected by requested time (v6, with the BLOCK
//!   policy for hollow commits) or completion time (v8+), listed merge-ready as of `L`.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::listing::{DataFile, Listing};
use crate::metadata;
use crate::table::TableConfig;
use crate::timeline::{Action, Instant, State, Timeline, TimelineDelta};

/// The lower bound hudi-rs and the fixtures use for "from the beginning".
pub const EARLIEST: &str = "19700101000000000";

/// Which view of the table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ViewKey {
    Latest,
    AsOf(String),
    /// The half-open window `(start, end]`; `None` means earliest / latest.
    Incremental {
        start: Option<String>,
        end: Option<String>,
    },
}

/// A file a view shows.
#[derive(Debug, Clone)]
pub struct VisibleFile {
    pub file: DataFile,
    /// The instant that wrote this file, where the timeline tells.
    pub writer: Option<String>,
    /// Base instant of the file slice the file belongs to.
    pub slice: String,
}

impl VisibleFile {
    pub fn rel_path(&self) -> String {
        self.file.rel_path()
    }
}

/// A resolved view.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Sorted by table-relative path.
    pub files: Vec<VisibleFile>,
    /// Snapshot views: the instant the view shows (for `latest/`, the newest completed write).
    pub instant: Option<String>,
    /// Incremental views: the requested times of the selected instants, ascending.
    pub selected: Vec<String>,
    /// Incremental views: the end of the window after the BLOCK cut.
    pub effective_end: Option<String>,
}

impl View {
    pub fn paths(&self) -> Vec<String> {
        self.files.iter().map(VisibleFile::rel_path).collect()
    }
}

/// A file group: `(partition path, fileId)`.
pub type GroupKey = (String, String);

/// A file placed in a slice: the file and the slice's base instant.
type Placed<'f> = (&'f DataFile, &'f str);

/// Facts derived from a timeline snapshot that the rules need again and again.
///
/// The facts that grow with the history (replaced groups, v6 log attribution) are kept in
/// persistent maps and updated by difference when the timeline changes ([`Context::apply`]), so
/// a commit costs what it adds; the few that depend on pending instants are derived afresh.
pub struct Context {
    pub cfg: Arc<TableConfig>,
    pub timeline: Arc<Timeline>,
    /// File group → requested times of the completed replacecommits that replaced it, ascending.
    replaced_by: imbl::HashMap<GroupKey, Arc<[String]>>,
    /// Completed replacecommits whose metadata cannot be read: requested time → why.
    unreadable_replacecommits: imbl::OrdMap<String, String>,
    /// Pending compaction instant → groups its plan covers.
    pending_compaction_groups: BTreeMap<String, BTreeSet<(String, String)>>,
    /// v6 strict logs: `(partition, file name)` → requested times (ascending) of completed
    /// writes whose write stats name it as `path`.
    log_writers: imbl::HashMap<(String, String), Arc<[String]>>,
    /// v6: logs a rollback wrote or found from a failed commit, `(partition, file name)` → how
    /// many completed rollbacks name it.
    rollback_logs: imbl::HashMap<(String, String), u32>,
    /// v6: groups pending deltacommits target; `None` in the set = unknown (unreadable).
    pending_delta_groups: HashSet<(String, String)>,
    pending_delta_unknown: bool,
    /// v6: requested times of completed writes with unreadable metadata, and of completed
    /// rollbacks with unreadable metadata.
    unreadable_writes: imbl::OrdSet<String>,
    unreadable_rollbacks: imbl::OrdSet<String>,
    retention_bound: Option<String>,
    savepoints: BTreeSet<String>,
    /// The archived timeline, read the first time a view reaches before the active timeline.
    archive: OnceLock<std::result::Result<Arc<ArchivedFacts>, String>>,
}

/// What the views need from the archived timeline (spec §2.7).
#[derive(Debug, Default)]
pub struct ArchivedFacts {
    /// Archived completed writes: requested time → (completion time, commit metadata).
    pub writes: BTreeMap<
        String,
        (
            String,
            std::result::Result<metadata::CommitMetadata, String>,
        ),
    >,
    /// Requested times of archived savepoints.
    pub savepoints: BTreeSet<String>,
    /// The last archived clean's retention bound.
    pub retention_bound: Option<String>,
    /// v6 strict logs: `(partition, log file name)` → archived writes naming it as `path`.
    pub log_writers: HashMap<(String, String), Vec<String>>,
}

/// Add `t` to (or take it from) the ascending list of times kept for `key`.
fn update_times<K: std::hash::Hash + Eq + Clone>(
    map: &mut imbl::HashMap<K, Arc<[String]>>,
    key: K,
    t: &str,
    add: bool,
) {
    let mut times: Vec<String> = map.get(&key).map(|v| v.to_vec()).unwrap_or_default();
    match (times.binary_search_by(|x| x.as_str().cmp(t)), add) {
        (Err(i), true) => times.insert(i, t.to_string()),
        (Ok(i), false) => {
            times.remove(i);
        }
        _ => return,
    }
    if times.is_empty() {
        map.remove(&key);
    } else {
        map.insert(key, times.into());
    }
}

impl Context {
    /// Derive every fact from `timeline`.
    pub fn new(cfg: Arc<TableConfig>, timeline: Arc<Timeline>) -> Context {
        let mut ctx = Context {
            cfg,
            timeline: timeline.clone(),
            replaced_by: imbl::HashMap::new(),
            unreadable_replacecommits: imbl::OrdMap::new(),
            pending_compaction_groups: BTreeMap::new(),
            log_writers: imbl::HashMap::new(),
            rollback_logs: imbl::HashMap::new(),
            pending_delta_groups: HashSet::new(),
            pending_delta_unknown: false,
            unreadable_writes: imbl::OrdSet::new(),
            unreadable_rollbacks: imbl::OrdSet::new(),
            retention_bound: None,
            savepoints: BTreeSet::new(),
            archive: OnceLock::new(),
        };
        for inst in timeline.completed.values() {
            ctx.account(inst, true);
        }
        for inst in timeline.completed_of(Action::Rollback) {
            ctx.account(inst, true);
        }
        ctx.derive_pending();
        ctx
    }

    /// The facts of `timeline`, which is this context's timeline changed by `delta`: the
    /// history-long facts are updated by difference, the rest derived afresh. Equal to
    /// `Context::new(cfg, timeline)`.
    pub fn apply(&self, timeline: Arc<Timeline>, delta: &TimelineDelta) -> Context {
        let mut ctx = Context {
            cfg: self.cfg.clone(),
            timeline: timeline.clone(),
            replaced_by: self.replaced_by.clone(),
            unreadable_replacecommits: self.unreadable_replacecommits.clone(),
            pending_compaction_groups: BTreeMap::new(),
            log_writers: self.log_writers.clone(),
            rollback_logs: self.rollback_logs.clone(),
            pending_delta_groups: HashSet::new(),
            pending_delta_unknown: false,
            unreadable_writes: self.unreadable_writes.clone(),
            unreadable_rollbacks: self.unreadable_rollbacks.clone(),
            retention_bound: None,
            savepoints: BTreeSet::new(),
            archive: OnceLock::new(),
        };
        for inst in &delta.removed {
            ctx.account(inst, false);
        }
        for inst in &delta.added {
            ctx.account(inst, true);
        }
        // Nothing was archived (the active timeline starts where it did): the archive read for
        // the previous snapshot still holds.
        if timeline.active_start == self.timeline.active_start
            && timeline.archive_nonempty == self.timeline.archive_nonempty
        {
            if let Some(a) = self.archive.get() {
                let _ = ctx.archive.set(a.clone());
            }
        }
        ctx.derive_pending();
        ctx
    }

    /// Add (or take away) what a completed instant contributes to the history-long facts.
    fn account(&mut self, inst: &Instant, add: bool) {
        if !inst.is_completed() {
            return;
        }
        let v6_mor = self.cfg.has_v6_logs();
        let t = inst.requested.as_str();
        if inst.is_completed_write() {
            // Only replacecommits (and on v6 merge-on-read every write) have facts here: other
            // writes' metadata is decoded when a view needs it, not at mount.
            if inst.action != Action::ReplaceCommit && !v6_mor {
                return;
            }
            let meta = inst.commit_metadata();
            if inst.action == Action::ReplaceCommit {
                match &meta {
                    Ok(m) => {
                        for g in &m.replaced {
                            update_times(&mut self.replaced_by, g.clone(), t, add);
                        }
                    }
                    Err(e) if add => {
                        self.unreadable_replacecommits
                            .insert(t.to_string(), e.clone());
                    }
                    Err(_) => {
                        self.unreadable_replacecommits.remove(t);
                    }
                }
            }
            if v6_mor {
                match &meta {
                    Ok(m) => {
                        for s in &m.write_stats {
                            if let Some(name) = s.file_name().filter(|n| n.starts_with('.')) {
                                let key = (s.partition.clone(), name.to_string());
                                update_times(&mut self.log_writers, key, t, add);
                            }
                        }
                    }
                    Err(e) if add => {
                        log::warn!("{e}");
                        self.unreadable_writes.insert(t.to_string());
                    }
                    Err(_) => {
                        self.unreadable_writes.remove(t);
                    }
                }
            }
        } else if inst.action == Action::Rollback && v6_mor {
            match inst.json() {
                Ok(v) => {
                    for key in metadata::rollback_files(&v) {
                        let n = self.rollback_logs.get(&key).copied().unwrap_or(0);
                        let n = if add { n + 1 } else { n.saturating_sub(1) };
                        if n == 0 {
                            self.rollback_logs.remove(&key);
                        } else {
                            self.rollback_logs.insert(key, n);
                        }
                    }
                }
                Err(e) if add => {
                    log::warn!("unreadable rollback metadata: {e}");
                    self.unreadable_rollbacks.insert(t.to_string());
                }
                Err(_) => {
                    self.unreadable_rollbacks.remove(t);
                }
            }
        }
    }

    /// The facts that depend on pending instants, savepoints and the last clean: few, so
    /// derived afresh for every snapshot.
    fn derive_pending(&mut self) {
        let timeline = self.timeline.clone();
        self.pending_compaction_groups = timeline.pending_compaction_groups();
        self.retention_bound = timeline.retention_bound();
        self.savepoints = timeline.savepoints();
        if !self.cfg.has_v6_logs() {
            return;
        }
        for inst in timeline.pending() {
            if inst.action != Action::DeltaCommit {
                continue;
            }
            let profile = if inst.file(State::Inflight).is_some() {
                inst.commit_metadata()
            } else {
                Err("no inflight file yet".to_string())
            };
            match profile {
                Ok(m) if !m.write_stats.is_empty() => self.pending_delta_groups.extend(
                    m.write_stats
                        .iter()
                        .map(|s| (s.partition.clone(), s.file_id.clone())),
                ),
                // An empty or unreadable profile could target any group.
                _ => self.pending_delta_unknown = true,
            }
        }
    }

    /// Every derived fact in a comparable form (for tests: incremental equals fresh).
    pub fn facts(&self) -> serde_json::Value {
        let sorted =
            |m: &imbl::HashMap<(String, String), Arc<[String]>>| -> BTreeMap<String, Vec<String>> {
                m.iter()
                    .map(|((p, n), v)| (format!("{p}/{n}"), v.to_vec()))
                    .collect()
            };
        serde_json::json!({
            "replaced_by": sorted(&self.replaced_by),
            "unreadable_replacecommits": self.unreadable_replacecommits.keys().collect::<Vec<_>>(),
            "pending_compaction_groups": self.pending_compaction_groups,
            "log_writers": sorted(&self.log_writers),
            "rollback_logs": self.rollback_logs.iter().map(|((p, n), c)| (format!("{p}/{n}"), *c)).collect::<BTreeMap<_, _>>(),
            "pending_delta_groups": self.pending_delta_groups.iter().cloned().collect::<BTreeSet<_>>(),
            "pending_delta_unknown": self.pending_delta_unknown,
            "unreadable_writes": self.unreadable_writes.iter().collect::<Vec<_>>(),
            "unreadable_rollbacks": self.unreadable_rollbacks.iter().collect::<Vec<_>>(),
            "retention_bound": self.retention_bound,
            "savepoints": self.savepoints,
            "active_start": self.timeline.active_start,
            "latest": self.timeline.latest,
            "completed": self.timeline.completed.keys().collect::<Vec<_>>(),
            "pending": self.timeline.pending().map(|i| (i.requested.clone(), i.action.name())).collect::<Vec<_>>(),
            "files": self.timeline.file_names().collect::<BTreeSet<_>>(),
        })
    }

    /// The cleaner's retention bound, if a clean happened.
    pub fn retention_bound(&self) -> Option<&str> {
        self.retention_bound.as_deref()
    }

    pub fn savepoints(&self) -> &BTreeSet<String> {
        &self.savepoints
    }

    /// Pending write instants that cut v6 incremental windows (BLOCK policy, decision 4):
    /// commits, deltacommits and replacecommits that are not clusterings.
    pub fn hollow_blockers(&self) -> Vec<String> {
        if self.cfg.has_completion_times() {
            return Vec::new();
        }
        self.timeline
            .pending()
            .filter(|i| match i.action {
                Action::Commit | Action::DeltaCommit => true,
                Action::ReplaceCommit => !i
                    .plan_json()
                    .map(|v| metadata::is_clustering_request(&v))
                    .unwrap_or(false),
                _ => false,
            })
            .map(|i| i.requested.clone())
            .collect()
    }

    /// The archived timeline's facts, read once. A damaged archive is refused as a whole: a view
    /// that needs it cannot tell which archived instants it lacks.
    pub fn archive(&self) -> Result<Arc<ArchivedFacts>> {
        let r = self.archive.get_or_init(|| {
            // The archive is untrusted input read by a third-party Avro/Parquet decoder: a panic
            // in there is one more way for it to be unreadable.
            let cfg = &self.cfg;
            let a = std::panic::catch_unwind(|| crate::archive::load_archive(cfg))
                .map_err(|_| "the archived timeline could not be decoded".to_string())?
                .map_err(|e| e.to_string())?;
            if !a.is_complete() {
                let problems: Vec<String> = a.problems.iter().map(|p| p.to_string()).collect();
                return Err(format!(
                    "the archived timeline is damaged: {}",
                    problems.join("; ")
                ));
            }
            let mut facts = ArchivedFacts::default();
            for i in &a.instants {
                if i.is_write() {
                    let m = i.commit_metadata();
                    if let Ok(m) = &m {
                        for s in &m.write_stats {
                            if let Some(name) = s.file_name().filter(|n| n.starts_with('.')) {
                                facts
                                    .log_writers
                                    .entry((s.partition.clone(), name.to_string()))
                                    .or_default()
                                    .push(i.requested.clone());
                            }
                        }
                    }
                    facts
                        .writes
                        .insert(i.requested.clone(), (i.completion.clone(), m));
                } else if i.action == Action::Savepoint {
                    facts.savepoints.insert(i.requested.clone());
                } else if i.action == Action::Clean {
                    if let Ok(v) = &i.metadata {
                        facts.retention_bound =
                            metadata::clean_earliest_to_retain(v).or(facts.retention_bound.take());
                    }
                }
            }
            Ok(Arc::new(facts))
        });
        r.clone().map_err(|e| {
            log::warn!("{}: {e}", self.cfg.archive_dir.display());
            Error::Refused(format!(
                "{e} (needed for history before {})",
                self.active_start_text()
            ))
        })
    }

    fn active_start_text(&self) -> String {
        self.timeline
            .active_start
            .clone()
            .unwrap_or_else(|| "?".into())
    }

    /// Whether a view at `t` reaches before the active timeline into a non-empty archive.
    fn needs_archive(&self, t: &str) -> bool {
        self.timeline.archive_nonempty && self.timeline.is_archived(t)
    }

    /// The groups replaced as of `t` (S2) that only the archive knows of; an unreadable
    /// replacecommit at or before `t` refuses. The active timeline's replaced groups are asked
    /// per group ([`Context::replaced_at`]). Archived replacecommits count when `t` itself is
    /// archived (spec §2.7: never for latest).
    fn check_replaced_as_of(&self, t: &str) -> Result<HashSet<(String, String)>> {
        let unreadable = |r: &str, e: &str| {
            Error::Refused(format!(
                "replacecommit {r} has unreadable metadata, so the file groups it replaced are \
                 unknown for every snapshot at or after it: {e}"
            ))
        };
        if let Some((r, e)) = self
            .unreadable_replacecommits
            .range::<_, str>((Unbounded, Included(t)))
            .next()
        {
            return Err(unreadable(r, e));
        }
        let mut out = HashSet::new();
        if self.needs_archive(t) {
            let a = self.archive()?;
            for (r, (_, m)) in a.writes.range::<str, _>((Unbounded, Included(t))) {
                match m {
                    Ok(m) => out.extend(m.replaced.iter().cloned()),
                    Err(e) => return Err(unreadable(r, e)),
                }
            }
        }
        Ok(out)
    }

    /// Whether a completed replacecommit of the active timeline at or before `t` replaced the
    /// group.
    fn replaced_at(&self, g: &GroupKey, t: &str) -> bool {
        self.replaced_by
            .get(g)
            .and_then(|times| times.first())
            .is_some_and(|r| r.as_str() <= t)
    }

    /// The clean guard (spec §4.6): `t` must not be older than what the cleaner retains unless
    /// it is a savepoint. A time before the active timeline needs a readable archive.
    fn check_history(&self, t: &str, what: &str) -> Result<()> {
        let archived = if self.needs_archive(t) {
            Some(self.archive()?)
        } else {
            None
        };
        let bound = self
            .retention_bound()
            .map(str::to_string)
            .or_else(|| archived.as_ref().and_then(|a| a.retention_bound.clone()));
        let savepoint = self.savepoints.contains(t)
            || archived.as_ref().is_some_and(|a| a.savepoints.contains(t));
        if let Some(bound) = bound {
            if t < bound.as_str() && !savepoint {
                return Err(Error::Refused(format!(
                    "{what} {t} is older than what the cleaner retains (earliest commit to retain: \
                     {bound}); its files may be gone. Use a time at or after {bound}, or a savepoint"
                )));
            }
        }
        Ok(())
    }
}

/// What a view needs decided before any data file is listed: its time, the groups it hides or
/// is restricted to, and what it tells about itself. Cheap: no listing is read.
#[derive(Debug, Clone)]
pub struct Plan {
    pub key: ViewKey,
    /// Snapshot time the files are chosen at; `None` for a view with no files.
    pub t: Option<String>,
    pub read_optimized: bool,
    /// Groups replaced as of `t` by archived replacecommits (the active timeline's are asked of
    /// the context).
    archived_replaced: HashSet<GroupKey>,
    /// Incremental views: the only file groups listed.
    only: Option<BTreeSet<GroupKey>>,
    /// Snapshot views: the instant the view shows (for `latest/`, the newest completed write).
    pub instant: Option<String>,
    /// Incremental views: the requested times of the selected instants, ascending.
    pub selected: Vec<String>,
    /// Incremental views: the end of the window after the BLOCK cut.
    pub effective_end: Option<String>,
}

impl Plan {
    /// Whether the view can have files in `partition` (incremental views touch few).
    pub fn may_list(&self, partition: &str) -> bool {
        self.t.is_some()
            && self
                .only
                .as_ref()
                .is_none_or(|o| o.iter().any(|(p, _)| p == partition))
    }
}

/// Decide a view: validate its time against the timeline and work out what it selects.
pub fn plan(ctx: &Context, key: &ViewKey, read_optimized: bool) -> Result<Plan> {
    let mut p = Plan {
        key: key.clone(),
        t: None,
        read_optimized,
        archived_replaced: HashSet::new(),
        only: None,
        instant: None,
        selected: Vec::new(),
        effective_end: None,
    };
    match key {
        ViewKey::Latest => {
            p.instant = ctx.timeline.completed.keys().next_back().cloned();
            p.t = ctx.timeline.latest.clone();
        }
        ViewKey::AsOf(t) => {
            ctx.check_history(t, "as-of time")?;
            p.instant = Some(t.clone());
            p.t = Some(t.clone());
        }
        ViewKey::Incremental { start, end } => {
            p.read_optimized = false;
            incremental(ctx, &mut p, start.as_deref(), end.as_deref())?;
        }
    }
    if let Some(t) = &p.t {
        p.archived_replaced = ctx.check_replaced_as_of(t)?;
    }
    Ok(p)
}

/// A file a view shows in one partition: its index in the partition's listing, and indexes into
/// [`PartitionView::instants`] for the instant that wrote it and its slice's base instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chosen {
    pub index: u32,
    /// `u32::MAX` when the writer is not known (a log of an archived writer).
    pub writer: u32,
    pub slice: u32,
}

/// The files a view shows in one partition.
#[derive(Debug, Clone, Default)]
pub struct PartitionView {
    /// Sorted by listing index (the listing is sorted by name).
    pub files: Vec<Chosen>,
    pub instants: Vec<Arc<str>>,
}

impl PartitionView {
    pub fn writer(&self, c: &Chosen) -> Option<&str> {
        self.instants.get(c.writer as usize).map(|s| &**s)
    }
    pub fn slice(&self, c: &Chosen) -> &str {
        self.instants
            .get(c.slice as usize)
            .map(|s| &**s)
            .unwrap_or("")
    }
}

/// Interns instant strings into a [`PartitionView`]'s table while it is built (a partition can
/// hold one instant per file: a linear search made resolving it quadratic).
#[derive(Default)]
struct Interner {
    ids: HashMap<String, u32>,
}

impl Interner {
    fn intern(&mut self, out: &mut PartitionView, s: String) -> u32 {
        if let Some(id) = self.ids.get(&s) {
            return *id;
        }
        let id = out.instants.len() as u32;
        out.instants.push(shared_instant(&s));
        self.ids.insert(s, id);
        id
    }
}

/// One allocation per distinct instant for the whole process: every partition view of every
/// snapshot shares it (a partition written by one instant per file would otherwise hold a copy
/// of each instant per file, about 50 bytes a file). Instants no view holds any more are
/// dropped whenever the set has doubled since the last sweep, so it follows the views, not the
/// history.
fn shared_instant(s: &str) -> Arc<str> {
    #[derive(Default)]
    struct Shared {
        set: HashSet<Arc<str>>,
        swept_at: usize,
    }
    static SHARED: OnceLock<std::sync::Mutex<Shared>> = OnceLock::new();
    let mut shared = SHARED
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(a) = shared.set.get(s) {
        return a.clone();
    }
    if shared.set.len() >= 2 * shared.swept_at.max(1024) {
        shared.set.retain(|a| Arc::strong_count(a) > 1);
        shared.swept_at = shared.set.len();
    }
    let a: Arc<str> = Arc::from(s);
    shared.set.insert(a.clone());
    a
}

/// Choose the files of one partition (spec §4.2 S3–S9) for a planned view. `files` is the
/// partition's listing, sorted by name.
pub fn resolve_partition<F: std::borrow::Borrow<DataFile>>(
    ctx: &Context,
    plan: &Plan,
    files: &[F],
) -> PartitionView {
    let mut out = PartitionView::default();
    let Some(t) = plan.t.as_deref() else {
        return out;
    };
    let Some(first) = files.first().map(|f| f.borrow()) else {
        return out;
    };
    if !plan.may_list(&first.partition) {
        return out;
    }
    let partition = first.partition.to_string();
    let mut groups: BTreeMap<&str, Vec<(u32, &DataFile)>> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        let f: &DataFile = f.borrow();
        groups.entry(f.file_id()).or_default().push((i as u32, f));
    }
    let mut chosen: Vec<(u32, Option<String>, String)> = Vec::new();
    for (fid, gfiles) in groups {
        let gkey = (partition.clone(), fid.to_string());
        if ctx.replaced_at(&gkey, t)
            || plan.archived_replaced.contains(&gkey)
            || plan.only.as_ref().is_some_and(|o| !o.contains(&gkey))
        {
            continue;
        }
        resolve_group(ctx, &gkey, &gfiles, t, plan.read_optimized, &mut chosen);
    }
    chosen.sort_by_key(|c| c.0);
    let mut interner = Interner::default();
    for (index, writer, slice) in chosen {
        let writer = match writer {
            Some(w) => interner.intern(&mut out, w),
            None => u32::MAX,
        };
        let slice = interner.intern(&mut out, slice);
        out.files.push(Chosen {
            index,
            writer,
            slice,
        });
    }
    out
}

/// Resolve a whole view at once (for `hudifs ls` and tests; the mount resolves partitions
/// lazily with [`plan`] and [`resolve_partition`]).
pub fn resolve(
    ctx: &Context,
    listing: &Listing,
    key: &ViewKey,
    read_optimized: bool,
) -> Result<View> {
    let plan = plan(ctx, key, read_optimized)?;
    let mut files = Vec::new();
    for pfiles in listing.partitions.values() {
        let pv = resolve_partition(ctx, &plan, pfiles);
        for c in &pv.files {
            files.push(VisibleFile {
                file: pfiles[c.index as usize].clone(),
                writer: pv.writer(c).map(str::to_string),
                slice: pv.slice(c).to_string(),
            });
        }
    }
    files.sort_by_key(|f| f.rel_path());
    Ok(View {
        files,
        instant: plan.instant,
        selected: plan.selected,
        effective_end: plan.effective_end,
    })
}

#[derive(Default)]
struct Slice<'f> {
    base: Option<&'f DataFile>,
    logs: Vec<&'f DataFile>,
}

/// S5–S9 for one file group.
fn resolve_group(
    ctx: &Context,
    gkey: &(String, String),
    files: &[(u32, &DataFile)],
    t: &str,
    read_optimized: bool,
    out: &mut Vec<(u32, Option<String>, String)>,
) {
    let tl = &ctx.timeline;
    let index_of: HashMap<*const DataFile, u32> = files
        .iter()
        .map(|(i, f)| (*f as *const DataFile, *i))
        .collect();
    let idx = |f: &DataFile| index_of.get(&(f as *const DataFile)).copied().unwrap_or(0);
    let files: Vec<&DataFile> = files.iter().map(|(_, f)| *f).collect();
    let v8 = ctx.cfg.has_completion_times();
    let mut slices: BTreeMap<String, Slice> = BTreeMap::new();

    // Base files of committed instants; duplicates of one instant resolved by metadata path.
    let mut bases: BTreeMap<&str, Vec<&DataFile>> = BTreeMap::new();
    for f in files.iter().filter(|f| f.is_base()) {
        if tl.is_committed(f.instant()) {
            bases.entry(f.instant()).or_default().push(f);
        }
    }
    for (instant, candidates) in bases {
        let chosen = if candidates.len() == 1 {
            Some(candidates[0])
        } else {
            pick_duplicate(ctx, instant, &candidates)
        };
        if let Some(b) = chosen {
            slices.entry(instant.to_string()).or_default().base = Some(b);
        }
    }
    // Pending compactions covering this group open an (empty) slice.
    let pending_here: BTreeSet<&str> = ctx
        .pending_compaction_groups
        .iter()
        .filter(|(_, groups)| groups.contains(gkey))
        .map(|(c, _)| c.as_str())
        .collect();
    for c in &pending_here {
        slices.entry(c.to_string()).or_default();
    }
    // Log files.
    let mut logs: Vec<&DataFile> = files.iter().filter(|f| !f.is_base()).copied().collect();
    if v8 {
        logs.retain(|l| tl.is_committed(l.instant()));
        logs.sort_by(|a, b| {
            let key = |f: &DataFile| {
                (
                    tl.completion(f.instant()).to_string(),
                    f.log_version(),
                    f.write_token().to_string(),
                )
            };
            key(a).cmp(&key(b))
        });
        for l in logs {
            let c = tl.completion(l.instant());
            let slice_key = slices
                .range::<str, _>((Unbounded, Included(c)))
                .next_back()
                .map(|(k, _)| k.clone())
                .unwrap_or_else(|| l.instant().to_string());
            slices.entry(slice_key).or_default().logs.push(l);
        }
    } else {
        for l in logs {
            slices
                .entry(l.instant().to_string())
                .or_default()
                .logs
                .push(l);
        }
    }

    // Usable slices (S5) and the pick (S6).
    let Some(latest) = tl.latest.as_deref() else {
        return;
    };
    let usable = |k: &str| {
        k <= latest
            && (tl.completed.contains_key(k) || pending_here.contains(k) || tl.is_archived(k))
    };
    let Some(picked) = slices
        .range::<str, _>((Unbounded, Included(t)))
        .rev()
        .map(|(k, _)| k.as_str())
        .find(|k| usable(k))
    else {
        return;
    };
    // S7: merge a still-pending compaction slice into the previous usable slice.
    let (base, slice_logs): (Option<Placed>, Vec<Placed>) = if pending_here.contains(picked) {
        let previous = slices
            .range::<str, _>((Unbounded, Excluded(picked)))
            .rev()
            .map(|(k, _)| k.as_str())
            .find(|k| usable(k));
        let mut logs = Vec::new();
        let mut base = None;
        if let Some(p) = previous {
            base = slices[p].base.map(|b| (b, p));
            logs.extend(slices[p].logs.iter().map(|l| (*l, p)));
        }
        logs.extend(slices[picked].logs.iter().map(|l| (*l, picked)));
        (base, logs)
    } else {
        let s = &slices[picked];
        (
            s.base.map(|b| (b, picked)),
            s.logs.iter().map(|l| (*l, picked)).collect(),
        )
    };

    if let Some((b, k)) = base {
        out.push((idx(b), Some(b.instant().to_string()), k.to_string()));
    }
    if read_optimized {
        return;
    }
    // S8: strict logs.
    for (l, k) in slice_logs {
        let writer = if v8 {
            (l.instant() <= t).then(|| l.instant().to_string())
        } else {
            v6_log_writer(ctx, l, t)
        };
        if let Some(w) = writer {
            let w = (!w.is_empty()).then_some(w);
            out.push((idx(l), w, k.to_string()));
        }
    }
}

/// Two committed base files of one (fileId, instant): keep the one the commit names as `path`;
/// otherwise hide both (spec §3.1, P25).
fn pick_duplicate<'f>(
    ctx: &Context,
    instant: &str,
    candidates: &[&'f DataFile],
) -> Option<&'f DataFile> {
    let named: Option<BTreeSet<String>> = ctx
        .timeline
        .completed
        .get(instant)
        .and_then(|i| i.commit_metadata().ok())
        .map(|m| {
            m.write_stats
                .iter()
                .filter_map(|s| s.file_name().map(str::to_string))
                .collect()
        });
    let hit: Vec<&&DataFile> = match &named {
        Some(n) => candidates.iter().filter(|c| n.contains(c.name())).collect(),
        None => Vec::new(),
    };
    if hit.len() == 1 {
        return Some(*hit[0]);
    }
    log::warn!(
        "{}: {} base files of file group {} at instant {instant} and the commit metadata does not \
         tell which one it wrote; all hidden",
        ctx.cfg
            .root
            .join(candidates[0].partition.as_ref())
            .display(),
        candidates.len(),
        candidates[0].file_id(),
    );
    None
}

/// v6 strict log rule (spec §4.5): the instant that wrote log `l`, if it is committed and at or
/// before `t`; `Some("")` for a log of an archived (hence committed) writer; `None` to hide.
fn v6_log_writer(ctx: &Context, l: &DataFile, t: &str) -> Option<String> {
    let key = (l.partition.to_string(), l.name().to_string());
    // (a) attributed by a completed write's `path` (an archived one when `t` is archived).
    if let Some(writers) = ctx.log_writers.get(&key) {
        return writers.iter().find(|w| w.as_str() <= t).cloned();
    }
    if ctx.needs_archive(t) {
        let a = ctx.archive().ok()?;
        return a
            .log_writers
            .get(&key)?
            .iter()
            .find(|w| w.as_str() <= t)
            .cloned();
    }
    // (b) an archived writer.
    let group = (l.partition.to_string(), l.file_id().to_string());
    let archived_writer_possible = !ctx.rollback_logs.contains_key(&key)
        && !ctx.pending_delta_unknown
        && !ctx.pending_delta_groups.contains(&group)
        && ctx.unreadable_rollbacks.is_empty()
        && ctx.unreadable_writes.range(l.instant().to_string()..).next().is_none()
        && ctx.timeline.active_start.as_deref().is_some_and(|s| t >= s)
        // The writer of an unattributed log must precede the active timeline; its slice does too.
        && ctx.timeline.is_archived(l.instant());
    archived_writer_possible.then(String::new)
}

/// An incremental window (spec §5).
fn incremental(
    ctx: &Context,
    plan: &mut Plan,
    start: Option<&str>,
    end: Option<&str>,
) -> Result<()> {
    if !ctx.cfg.populate_meta_fields {
        return Err(Error::Refused(
            "hoodie.populate.meta.fields=false: no _hoodie_commit_time, incremental queries \
             impossible (spec 5.1, decision 7)"
                .into(),
        ));
    }
    let tl = &ctx.timeline;
    // A window starting before the active timeline reaches into the archive.
    let archived = match (start, tl.active_start.as_deref()) {
        _ if !tl.archive_nonempty => None,
        (None, _) => Some(ctx.archive()?),
        (Some(s), Some(a)) if s < a => Some(ctx.archive()?),
        _ => None,
    };
    let by_completion = ctx.cfg.has_completion_times();
    let mut window_end: Option<String> = end.map(str::to_string);
    if !by_completion {
        // BLOCK: the oldest pending write instant inside the window cuts it just before itself.
        let blocker = ctx
            .hollow_blockers()
            .into_iter()
            .filter(|p| start.is_none_or(|s| p.as_str() > s) && end.is_none_or(|e| p.as_str() <= e))
            .min();
        if let Some(p) = blocker {
            window_end = Some(crate::timefmt::minus_one_ms(&p).unwrap_or_else(|| p.clone()));
        }
    }
    let in_window =
        |x: &str| start.is_none_or(|s| x > s) && window_end.as_deref().is_none_or(|e| x <= e);
    // (requested time, commit metadata) of every selected instant.
    let mut selected: Vec<(
        String,
        std::result::Result<Arc<metadata::CommitMetadata>, String>,
    )> = Vec::new();
    if let Some(a) = &archived {
        for (r, (completion, m)) in &a.writes {
            let x = if by_completion { completion } else { r };
            if in_window(x) && !tl.completed.contains_key(r) {
                selected.push((r.clone(), m.clone().map(Arc::new)));
            }
        }
    }
    // Completed writes by the time that selects them (completion time; requested time on v6,
    // where the two are the same): only those in the window are visited.
    let from = start.map_or(Unbounded, |s| Included((s.to_string(), String::new())));
    for (_, r) in tl
        .completed_by_completion((from, Unbounded))
        .skip_while(|(c, _)| start.is_some_and(|s| c.as_str() <= s))
        .take_while(|(c, _)| window_end.as_deref().is_none_or(|e| c.as_str() <= e))
    {
        if let Some(i) = tl.completed.get(r) {
            selected.push((i.requested.clone(), i.commit_metadata()));
        }
    }
    selected.sort_by(|a, b| a.0.cmp(&b.0));
    plan.effective_end = window_end.or_else(|| tl.latest_completion().map(str::to_string));
    plan.selected = selected.iter().map(|i| i.0.clone()).collect();
    let Some(l) = plan.selected.iter().max().cloned() else {
        return Ok(());
    };
    let archived_savepoint = archived.as_ref().is_some_and(|a| a.savepoints.contains(&l));
    let bound = ctx
        .retention_bound()
        .map(str::to_string)
        .or_else(|| archived.as_ref().and_then(|a| a.retention_bound.clone()));
    if let Some(bound) = bound {
        if l < bound && !ctx.savepoints.contains(&l) && !archived_savepoint {
            return Err(Error::Refused(format!(
                "the newest instant this window selects ({l}) is older than what the cleaner \
                 retains (earliest commit to retain: {bound}); its files may be gone"
            )));
        }
    }
    let mut touched = BTreeSet::new();
    let mut replaced = BTreeSet::new();
    for (r, m) in &selected {
        let m = m.as_ref().map_err(|e| {
            Error::Refused(format!(
                "instant {r} in this window has unreadable metadata: {e}"
            ))
        })?;
        touched.extend(
            m.write_stats
                .iter()
                .map(|s| (s.partition.clone(), s.file_id.clone())),
        );
        replaced.extend(m.replaced.iter().cloned());
    }
    plan.only = Some(touched.difference(&replaced).cloned().collect());
    plan.t = Some(l);
    Ok(())
}

/// The window keys of `incremental/`: one window per completed write instant, from the previous
/// one (or [`EARLIEST`]) to it, over the time that selects instants.
pub fn incremental_windows(ctx: &Context) -> Vec<(String, String)> {
    let mut prev = EARLIEST.to_string();
    let mut out = Vec::new();
    for (t, _) in ctx.timeline.completed_by_completion(..) {
        out.push((prev, t.clone()));
        prev = t.clone();
    }
    out
}

/// Facts the views rest on, for `hudifs timeline` and the conformance tests.
pub fn model(ctx: &Context) -> serde_json::Value {
    serde_json::json!({
        "active_start": ctx.timeline.active_start,
        "archive_nonempty": ctx.timeline.archive_nonempty,
        "hollow_blockers": ctx.hollow_blockers(),
        "incremental_window_time": if ctx.cfg.has_completion_times() { "completion" } else { "requested" },
        "latest_instant": ctx.timeline.latest,
        "pending_compactions": ctx.timeline.pending_compactions.keys().collect::<Vec<_>>(),
        "populate_meta_fields": ctx.cfg.populate_meta_fields,
        "retention_bound": ctx.retention_bound(),
        "savepoints": ctx.savepoints.iter().collect::<Vec<_>>(),
        "unreadable_metadata": ctx.timeline.unreadable_metadata(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_shared_and_swept_when_no_view_holds_them() {
        let a = shared_instant("20990101000000000");
        let b = shared_instant("20990101000000000");
        assert!(Arc::ptr_eq(&a, &b));
        drop((a, b));
        let kept = shared_instant("20970101000000000");
        // Enough distinct instants, held by no one, to force sweeps.
        for i in 0..10_000 {
            drop(shared_instant(&format!("2098{i:013}")));
        }
        let again = shared_instant("20970101000000000");
        assert!(Arc::ptr_eq(&kept, &again), "a held instant survives sweeps");
    }
}
