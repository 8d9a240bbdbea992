//! [`Context`]: the facts derived from one timeline snapshot that the rules ask again and again
//! (replaced groups, v6 log attribution, pending compactions, the retention bound, savepoints,
//! hollow-commit blockers). Built by decoding the instant metadata they rest on; pure after that.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use crate::ids::{FileGroupId, FileRef};
use crate::instant_time::InstantTime;
use crate::metadata::{self, MetadataError};
use crate::table::TableConfig;
use crate::timeline::{Action, Decoded, Instant, InstantMetadata, State, Timeline, TimelineDelta};

/// Facts derived from a timeline snapshot.
///
/// The facts that grow with the history (replaced groups, v6 log attribution) are kept in
/// persistent maps and updated by difference when the timeline changes ([`Context::apply`]), so
/// a commit costs what it adds; the few that depend on pending instants are derived afresh.
pub struct Context {
    pub cfg: Arc<TableConfig>,
    pub timeline: Arc<Timeline>,
    /// File group → requested times of the completed replacecommits that replaced it, ascending.
    pub(crate) replaced_by: imbl::HashMap<FileGroupId, Arc<[InstantTime]>>,
    /// Completed replacecommits whose metadata cannot be read: requested time → why.
    pub(crate) unreadable_replacecommits: imbl::OrdMap<InstantTime, MetadataError>,
    /// Pending compaction instant → groups its plan covers.
    pub(crate) pending_compaction_groups: BTreeMap<InstantTime, BTreeSet<FileGroupId>>,
    /// v6 strict logs: log file → requested times (ascending) of completed writes whose write
    /// stats name it as `path`.
    pub(crate) log_writers: imbl::HashMap<FileRef, Arc<[InstantTime]>>,
    /// v6: logs a rollback wrote or found from a failed commit → how many completed rollbacks
    /// name it.
    pub(crate) rollback_logs: imbl::HashMap<FileRef, u32>,
    /// v6: groups pending deltacommits target, and whether one targets unknown groups
    /// (unreadable or empty profile).
    pub(crate) pending_delta_groups: HashSet<FileGroupId>,
    pub(crate) pending_delta_unknown: bool,
    /// v6: requested times of completed writes with unreadable metadata, and of completed
    /// rollbacks with unreadable metadata.
    pub(crate) unreadable_writes: imbl::OrdSet<InstantTime>,
    pub(crate) unreadable_rollbacks: imbl::OrdSet<InstantTime>,
    retention_bound: Option<InstantTime>,
    savepoints: BTreeSet<InstantTime>,
    hollow_blockers: Vec<InstantTime>,
}

/// Add `t` to (or take it from) the ascending list of times kept for `key`.
fn update_times<K: std::hash::Hash + Eq + Clone>(
    map: &mut imbl::HashMap<K, Arc<[InstantTime]>>,
    key: K,
    t: &InstantTime,
    add: bool,
) {
    let mut times: Vec<InstantTime> = map.get(&key).map(|v| v.to_vec()).unwrap_or_default();
    match (times.binary_search(t), add) {
        (Err(i), true) => times.insert(i, t.clone()),
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
    /// Derive every fact from `timeline`, decoding the metadata they need through `meta`.
    pub fn new(cfg: Arc<TableConfig>, timeline: Arc<Timeline>, meta: &InstantMetadata) -> Context {
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
            hollow_blockers: Vec::new(),
        };
        for inst in timeline.completed.values() {
            ctx.account(inst, true, meta);
        }
        for inst in timeline.completed_of(Action::Rollback) {
            ctx.account(inst, true, meta);
        }
        ctx.derive_pending(meta);
        ctx
    }

    /// The facts of `timeline`, which is this context's timeline changed by `delta`: the
    /// history-long facts are updated by difference, the rest derived afresh. Equal to
    /// `Context::new(cfg, timeline, meta)`.
    pub fn apply(
        &self,
        timeline: Arc<Timeline>,
        delta: &TimelineDelta,
        meta: &InstantMetadata,
    ) -> Context {
        let mut ctx = Context {
            cfg: self.cfg.clone(),
            timeline,
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
            hollow_blockers: Vec::new(),
        };
        for inst in &delta.removed {
            ctx.account(inst, false, meta);
        }
        for inst in &delta.added {
            ctx.account(inst, true, meta);
        }
        ctx.derive_pending(meta);
        ctx
    }

    /// Add (or take away) what a completed instant contributes to the history-long facts.
    fn account(&mut self, inst: &Instant, add: bool, meta: &InstantMetadata) {
        if !inst.is_completed() {
            return;
        }
        let v6_mor = self.cfg.attributes_logs();
        let t = &inst.requested;
        if inst.is_completed_write() {
            // Only replacecommits (and on v6 merge-on-read every write) have facts here: other
            // writes' metadata is decoded when a view needs it, not at mount.
            if inst.action != Action::ReplaceCommit && !v6_mor {
                return;
            }
            let m = meta.commit(inst);
            if inst.action == Action::ReplaceCommit {
                match &m {
                    Ok(m) => {
                        for g in &m.replaced {
                            update_times(&mut self.replaced_by, g.clone(), t, add);
                        }
                    }
                    Err(e) if add => {
                        self.unreadable_replacecommits.insert(t.clone(), e.clone());
                    }
                    Err(_) => {
                        self.unreadable_replacecommits.remove(t);
                    }
                }
            }
            if v6_mor {
                match &m {
                    Ok(m) => {
                        for s in &m.write_stats {
                            if let Some(f) = s.file().filter(|f| f.name.starts_with('.')) {
                                update_times(&mut self.log_writers, f, t, add);
                            }
                        }
                    }
                    Err(e) if add => {
                        log::warn!("{e}");
                        self.unreadable_writes.insert(t.clone());
                    }
                    Err(_) => {
                        self.unreadable_writes.remove(t);
                    }
                }
            }
        } else if inst.action == Action::Rollback && v6_mor {
            match meta.json(inst) {
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
                    self.unreadable_rollbacks.insert(t.clone());
                }
                Err(_) => {
                    self.unreadable_rollbacks.remove(t);
                }
            }
        }
    }

    /// The facts that depend on pending instants, savepoints and the last clean: few, so
    /// derived afresh for every snapshot.
    fn derive_pending(&mut self, meta: &InstantMetadata) {
        let timeline = self.timeline.clone();
        self.pending_compaction_groups = pending_compaction_groups(&timeline, meta);
        self.retention_bound = retention_bound(&timeline, meta);
        self.savepoints = timeline.savepoints();
        self.hollow_blockers = if self.cfg.has_completion_times() {
            Vec::new()
        } else {
            hollow_blockers(&timeline, meta)
        };
        if !self.cfg.has_v6_logs() {
            return;
        }
        for inst in timeline.pending() {
            if inst.action != Action::DeltaCommit {
                continue;
            }
            let profile = if inst.file(State::Inflight).is_some() {
                meta.commit(inst).ok()
            } else {
                None
            };
            match profile {
                Some(m) if !m.write_stats.is_empty() => self
                    .pending_delta_groups
                    .extend(m.write_stats.iter().map(|s| s.group())),
                // An empty or unreadable profile could target any group.
                _ => self.pending_delta_unknown = true,
            }
        }
    }

    /// The cleaner's retention bound, if a clean happened.
    pub fn retention_bound(&self) -> Option<&InstantTime> {
        self.retention_bound.as_ref()
    }

    /// The groups each pending compaction's plan covers.
    pub fn pending_compaction_groups(&self) -> &BTreeMap<InstantTime, BTreeSet<FileGroupId>> {
        &self.pending_compaction_groups
    }

    pub fn savepoints(&self) -> &BTreeSet<InstantTime> {
        &self.savepoints
    }

    /// Pending write instants that cut v6 incremental windows (the BLOCK policy, SEMANTICS.md
    /// §2.4.3): commits, deltacommits and replacecommits that are not clusterings. None on
    /// tables with completion times.
    pub fn hollow_blockers(&self) -> &[InstantTime] {
        &self.hollow_blockers
    }

    /// Whether a completed replacecommit of the active timeline at or before `t` replaced the
    /// group.
    pub(crate) fn replaced_at(&self, g: &FileGroupId, t: &str) -> bool {
        self.replaced_by
            .get(g)
            .and_then(|times| times.first())
            .is_some_and(|r| r.as_str() <= t)
    }

    /// Whether a view at `t` reaches before the active timeline into a non-empty archive.
    pub fn needs_archive(&self, t: &str) -> bool {
        self.timeline.archive_nonempty && self.timeline.is_archived(t)
    }

    /// Every derived fact in a comparable form (for tests: incremental equals fresh).
    pub fn facts(&self) -> serde_json::Value {
        let sorted =
            |m: &imbl::HashMap<FileRef, Arc<[InstantTime]>>| -> BTreeMap<String, Vec<InstantTime>> {
                m.iter()
                    .map(|(f, v)| (format!("{}/{}", f.partition, f.name), v.to_vec()))
                    .collect()
            };
        serde_json::json!({
            "replaced_by": self.replaced_by.iter().map(|(g, v)| (format!("{}/{}", g.partition, g.file_id), v.to_vec())).collect::<BTreeMap<_, _>>(),
            "unreadable_replacecommits": self.unreadable_replacecommits.keys().collect::<Vec<_>>(),
            "pending_compaction_groups": self.pending_compaction_groups,
            "log_writers": sorted(&self.log_writers),
            "rollback_logs": self.rollback_logs.iter().map(|(f, c)| (format!("{}/{}", f.partition, f.name), *c)).collect::<BTreeMap<_, _>>(),
            "pending_delta_groups": self.pending_delta_groups.iter().cloned().collect::<BTreeSet<_>>(),
            "pending_delta_unknown": self.pending_delta_unknown,
            "unreadable_writes": self.unreadable_writes.iter().collect::<Vec<_>>(),
            "unreadable_rollbacks": self.unreadable_rollbacks.iter().collect::<Vec<_>>(),
            "retention_bound": self.retention_bound,
            "savepoints": self.savepoints,
            "hollow_blockers": self.hollow_blockers,
            "active_start": self.timeline.active_start,
            "latest": self.timeline.latest,
            "completed": self.timeline.completed.keys().collect::<Vec<_>>(),
            "pending": self.timeline.pending().map(|i| (i.requested.clone(), i.action.name())).collect::<Vec<_>>(),
            "files": self.timeline.file_names().collect::<BTreeSet<_>>(),
        })
    }
}

/// The cleaner's retention bound (SEMANTICS.md §5.3): the last completed clean's
/// `earliestCommitToRetain`, or the first completed write when that is empty; for an
/// unreadable clean, the last completed write before it. A clean still in flight counts too,
/// by its plan's `earliestInstantToRetain`: it is already deleting what it does not retain, so
/// time travel before that would list a snapshot losing files. The greatest of these; `None`
/// without any clean.
fn retention_bound(tl: &Timeline, meta: &InstantMetadata) -> Option<InstantTime> {
    let bound_of = |clean: &Instant, m: Decoded<serde_json::Value>| match m {
        Ok(v) => {
            metadata::clean_earliest_to_retain(&v).or_else(|| tl.completed.keys().next().cloned())
        }
        Err(e) => {
            log::warn!("unreadable clean metadata, bounding time travel conservatively: {e}");
            tl.completed
                .range(..clean.requested.clone())
                .next_back()
                .map(|(k, _)| k.clone())
        }
    };
    let completed = tl
        .completed_of(Action::Clean)
        .next_back()
        .and_then(|c| bound_of(c, meta.json(c)));
    let in_flight = tl
        .pending()
        .filter(|i| i.action == Action::Clean)
        .filter_map(|c| {
            let plan = if c.file(State::Requested).is_some() {
                meta.plan(c)
            } else {
                meta.json(c)
            };
            bound_of(c, plan)
        });
    completed.into_iter().chain(in_flight).max()
}

/// The groups each pending compaction covers; an unreadable plan covers nothing (and is
/// logged).
fn pending_compaction_groups(
    tl: &Timeline,
    meta: &InstantMetadata,
) -> BTreeMap<InstantTime, BTreeSet<FileGroupId>> {
    let mut out = BTreeMap::new();
    for (t, inst) in &tl.pending_compactions {
        let groups = match meta
            .plan(inst)
            .map_err(|e| e.to_string())
            .and_then(|v| metadata::compaction_plan_groups(&v).map_err(|e| e.to_string()))
        {
            Ok(g) => g.into_iter().collect(),
            Err(e) => {
                log::warn!("pending compaction {t}: unreadable plan, ignored: {e}");
                BTreeSet::new()
            }
        };
        out.insert(t.clone(), groups);
    }
    out
}

/// Pending commits, deltacommits and replacecommits that are not clusterings.
fn hollow_blockers(tl: &Timeline, meta: &InstantMetadata) -> Vec<InstantTime> {
    tl.pending()
        .filter(|i| match i.action {
            Action::Commit | Action::DeltaCommit => true,
            Action::ReplaceCommit => !meta
                .plan(i)
                .map(|v| metadata::is_clustering_request(&v))
                .unwrap_or(false),
            _ => false,
        })
        .map(|i| i.requested.clone())
        .collect()
}

/// Completed write instants whose metadata cannot be read (decodes every commit's metadata:
/// for `hudifs timeline`, not for the mount).
pub fn unreadable_metadata(tl: &Timeline, meta: &InstantMetadata) -> Vec<InstantTime> {
    tl.completed
        .values()
        .filter(|i| meta.commit(i).is_err())
        .map(|i| i.requested.clone())
        .collect()
}
