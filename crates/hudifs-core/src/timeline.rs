//! The active timeline: instant file names of both layouts (spec §2.2–§2.3) → [`Instant`]s, and
//! the derived sets the views rest on (spec §2.8): completed writes, pending compactions,
//! `ACTIVE_START`, `LATEST`, the cleaner's retention bound, savepoints.
//!
//! Instant metadata is decoded on first use and kept with the instant (instant files never
//! change once written), so a view only pays for the metadata it needs.

use std::collections::{BTreeMap, BTreeSet};

use imbl::{OrdMap, OrdSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::error::Result;
use crate::metadata::{self, CommitMetadata};
use crate::table::TableConfig;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    Commit,
    DeltaCommit,
    ReplaceCommit,
    Clustering,
    Compaction,
    LogCompaction,
    Clean,
    Rollback,
    Savepoint,
    Restore,
    Indexing,
    SchemaCommit,
}

impl Action {
    pub const ALL: [Action; 12] = [
        Action::Commit,
        Action::DeltaCommit,
        Action::ReplaceCommit,
        Action::Clustering,
        Action::Compaction,
        Action::LogCompaction,
        Action::Clean,
        Action::Rollback,
        Action::Savepoint,
        Action::Restore,
        Action::Indexing,
        Action::SchemaCommit,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Action::Commit => "commit",
            Action::DeltaCommit => "deltacommit",
            Action::ReplaceCommit => "replacecommit",
            Action::Clustering => "clustering",
            Action::Compaction => "compaction",
            Action::LogCompaction => "logcompaction",
            Action::Clean => "clean",
            Action::Rollback => "rollback",
            Action::Savepoint => "savepoint",
            Action::Restore => "restore",
            Action::Indexing => "indexing",
            Action::SchemaCommit => "schemacommit",
        }
    }

    pub fn from_name(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == s)
    }

    /// The action a pending action completes as (compaction → commit, ...).
    pub fn completes_as(self) -> Action {
        match self {
            Action::Compaction => Action::Commit,
            Action::LogCompaction => Action::DeltaCommit,
            Action::Clustering => Action::ReplaceCommit,
            a => a,
        }
    }

    /// Whether a completed instant of this action can make data files visible.
    pub fn is_write(self) -> bool {
        matches!(
            self.completes_as(),
            Action::Commit | Action::DeltaCommit | Action::ReplaceCommit
        )
    }

    /// Actions that may appear as a completed file name.
    fn can_complete(self) -> bool {
        !matches!(
            self,
            Action::Compaction | Action::LogCompaction | Action::Clustering
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    Requested,
    Inflight,
    Completed,
}

/// One file of the timeline, parsed from its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstantFile {
    pub requested: String,
    /// Completion time (layout 2 completed files only).
    pub completion: Option<String>,
    pub action: Action,
    pub state: State,
    pub name: String,
}

fn is_ts(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_digit())
}

/// Parse a timeline file name by the grammar of spec §2.3 for the given layout. Names outside
/// the grammar (including a layout-2 name in a layout-1 timeline and a completed layout-2 name
/// without completion time) give `None`.
pub fn parse_instant_file_name(name: &str, layout: u32) -> Option<InstantFile> {
    let mut parts = name.split('.');
    let stamp = parts.next()?;
    let second = parts.next()?;
    let third = parts.next();
    if parts.next().is_some() {
        return None;
    }
    let (requested, completion) = match stamp.split_once('_') {
        Some((r, c)) if layout == 2 && is_ts(r) && is_ts(c) => (r, Some(c)),
        Some(_) => return None,
        None if is_ts(stamp) => (stamp, None),
        None => return None,
    };
    let (action, state) = match (second, third) {
        // The legacy inflight spelling of a commit has no action word.
        ("inflight", None) => (Action::Commit, State::Inflight),
        (a, None) => (Action::from_name(a)?, State::Completed),
        (a, Some("requested")) => (Action::from_name(a)?, State::Requested),
        (a, Some("inflight")) => (Action::from_name(a)?, State::Inflight),
        _ => return None,
    };
    match state {
        State::Completed => {
            if !action.can_complete() || (layout == 2) != completion.is_some() {
                return None;
            }
        }
        _ => {
            if completion.is_some() {
                return None;
            }
        }
    }
    Some(InstantFile {
        requested: requested.to_string(),
        completion: completion.map(str::to_string),
        action,
        state,
        name: name.to_string(),
    })
}

/// Format a timeline file name (used by the table generator).
pub fn instant_file_name(
    requested: &str,
    completion: Option<&str>,
    action: Action,
    state: State,
    layout: u32,
) -> String {
    match state {
        State::Requested => format!("{requested}.{}.requested", action.name()),
        State::Inflight if action == Action::Commit => format!("{requested}.inflight"),
        State::Inflight => format!("{requested}.{}.inflight", action.name()),
        State::Completed => {
            let action = action.completes_as();
            match (layout, completion) {
                (2, Some(c)) => format!("{requested}_{c}.{}", action.name()),
                (2, None) => format!("{requested}_{requested}.{}", action.name()),
                _ => format!("{requested}.{}", action.name()),
            }
        }
    }
}

/// Decoded metadata of one instant file, or why it could not be decoded.
pub type Decoded<T> = std::result::Result<Arc<T>, String>;

/// One instant: every file of one requested time and one action family.
#[derive(Debug)]
pub struct Instant {
    pub requested: String,
    /// Layout 2: from the completed file name. Layout 1: the requested time (spec §2.4).
    pub completion: Option<String>,
    /// The action of the completed file, or of the pending files.
    pub action: Action,
    /// The action the plan was requested as (compaction, clustering, logcompaction) if any.
    pub planned: Option<Action>,
    pub state: State,
    /// All files of this instant, in state order.
    pub files: Vec<InstantFile>,
    dir: PathBuf,
    commit_meta: OnceLock<Decoded<CommitMetadata>>,
    json: OnceLock<Decoded<Value>>,
    plan_json: OnceLock<Decoded<Value>>,
}

impl Instant {
    pub fn is_completed(&self) -> bool {
        self.state == State::Completed
    }

    /// Completed commit, deltacommit or replacecommit.
    pub fn is_completed_write(&self) -> bool {
        self.is_completed() && self.action.is_write()
    }

    pub fn file(&self, state: State) -> Option<&InstantFile> {
        self.files.iter().find(|f| f.state == state)
    }

    /// Path of the file of the given state.
    pub fn path(&self, state: State) -> Option<PathBuf> {
        self.file(state).map(|f| self.dir.join(&f.name))
    }

    fn read_json(&self, state: State) -> Decoded<Value> {
        let Some(path) = self.path(state) else {
            return Err(format!("no {state:?} file"));
        };
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        metadata::decode(&bytes)
            .map(Arc::new)
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The decoded JSON of the completed file (or of the most advanced file if pending).
    pub fn json(&self) -> Decoded<Value> {
        self.json
            .get_or_init(|| {
                let state = self
                    .files
                    .last()
                    .map(|f| f.state)
                    .unwrap_or(State::Requested);
                self.read_json(state)
            })
            .clone()
    }

    /// The decoded plan in the requested file (compaction/clustering plans).
    pub fn plan_json(&self) -> Decoded<Value> {
        self.plan_json
            .get_or_init(|| self.read_json(State::Requested))
            .clone()
    }

    /// Whether the commit metadata was decoded already (it is decoded on first use).
    pub fn metadata_decoded(&self) -> bool {
        self.commit_meta.get().is_some()
    }

    /// Commit metadata of a completed write instant (or the workload profile of an inflight one).
    pub fn commit_metadata(&self) -> Decoded<CommitMetadata> {
        self.commit_meta
            .get_or_init(|| {
                let v = self.json()?;
                let m = CommitMetadata::from_json(&v).map_err(|e| {
                    let name = self.files.last().map(|f| f.name.as_str()).unwrap_or("");
                    format!("{}: {e}", self.dir.join(name).display())
                })?;
                Ok(Arc::new(m))
            })
            .clone()
    }
}

/// Key of an instant: its requested time and action family (erratum 9: a savepoint shares its
/// time with the commit it pins).
pub type InstantKey = (String, Action);

fn key_of(f: &InstantFile) -> InstantKey {
    (f.requested.clone(), f.action.completes_as())
}

impl Instant {
    /// The instant made of `files`, all of one requested time and action family.
    fn from_files(
        requested: String,
        family: Action,
        mut files: Vec<InstantFile>,
        layout: u32,
        dir: &Path,
    ) -> Instant {
        files.sort_by_key(|f| f.state);
        let state = files.last().map(|f| f.state).unwrap_or(State::Requested);
        let completed = files.iter().find(|f| f.state == State::Completed);
        let planned = files.iter().map(|f| f.action).find(|a| {
            matches!(
                a,
                Action::Compaction | Action::LogCompaction | Action::Clustering
            )
        });
        let action = match completed {
            Some(c) => c.action,
            None => planned.unwrap_or(family),
        };
        let completion = match completed {
            Some(c) if layout == 2 => c.completion.clone(),
            Some(_) => Some(requested.clone()),
            None => None,
        };
        Instant {
            requested,
            completion,
            action,
            planned,
            state,
            files,
            dir: dir.to_path_buf(),
            commit_meta: OnceLock::new(),
            json: OnceLock::new(),
            plan_json: OnceLock::new(),
        }
    }

    fn key(&self) -> InstantKey {
        (self.requested.clone(), self.action.completes_as())
    }
}

/// A parsed active timeline with its derived sets.
///
/// Every collection is persistent (`imbl`): a timeline after a change shares all unchanged parts
/// with the one before, so applying a commit costs `O(log n)` in the length of the history, not
/// `O(n)` (PRODUCT.md §4).
#[derive(Debug, Clone)]
pub struct Timeline {
    pub layout: u32,
    pub dir: PathBuf,
    /// Every instant by (requested time, action family).
    instants: OrdMap<InstantKey, Arc<Instant>>,
    /// Completed commit/deltacommit/replacecommit instants by requested time.
    pub completed: OrdMap<String, Arc<Instant>>,
    /// Pending compaction and log-compaction instants by requested time.
    pub pending_compactions: OrdMap<String, Arc<Instant>>,
    /// Instants of any action without a completed file.
    pending: OrdMap<InstantKey, Arc<Instant>>,
    /// Completed instants of the other actions (clean, rollback, savepoint, ...) by action and
    /// requested time.
    services: OrdMap<Action, OrdMap<String, Arc<Instant>>>,
    /// Every timeline file name → the key of its instant.
    files: imbl::HashMap<String, InstantKey>,
    /// (completion time, requested time) of completed writes.
    completions: OrdSet<(String, String)>,
    /// Smallest requested time over completed or pending write/compaction/clustering instants.
    pub active_start: Option<String>,
    /// Greatest requested time of a completed write or pending compaction.
    pub latest: Option<String>,
    /// Whether the archived timeline holds any file.
    pub archive_nonempty: bool,
}

/// What [`Timeline::apply`] replaced: the instants that left (or changed) and those that came
/// (or changed), so that facts derived from instants can be updated by difference.
#[derive(Debug, Default)]
pub struct TimelineDelta {
    pub removed: Vec<Arc<Instant>>,
    pub added: Vec<Arc<Instant>>,
}

impl Timeline {
    /// Read the active timeline of a table.
    pub fn load(cfg: &TableConfig) -> Result<Timeline> {
        // Two listings in a row that agree: see `stable_listing`.
        let mut files = Vec::new();
        for name in stable_listing(&cfg.timeline_dir)? {
            match parse_instant_file_name(&name, cfg.layout) {
                Some(f) => files.push(f),
                None => {
                    if looks_like_instant(&name) {
                        log::warn!(
                            "{}: not a timeline file name hudifs understands (layout {}); ignored",
                            cfg.timeline_dir.join(&name).display(),
                            cfg.layout
                        );
                    }
                }
            }
        }
        let archive_nonempty = archive_has_files(cfg);
        Ok(Timeline::from_files(
            cfg.layout,
            &cfg.timeline_dir,
            files,
            archive_nonempty,
        ))
    }

    fn empty(layout: u32, dir: &Path, archive_nonempty: bool) -> Timeline {
        Timeline {
            layout,
            dir: dir.to_path_buf(),
            instants: OrdMap::new(),
            completed: OrdMap::new(),
            pending_compactions: OrdMap::new(),
            pending: OrdMap::new(),
            services: OrdMap::new(),
            files: imbl::HashMap::new(),
            completions: OrdSet::new(),
            active_start: None,
            latest: None,
            archive_nonempty,
        }
    }

    /// Build a timeline from parsed file names.
    pub fn from_files(
        layout: u32,
        dir: &Path,
        files: Vec<InstantFile>,
        archive_nonempty: bool,
    ) -> Timeline {
        let mut t = Timeline::empty(layout, dir, archive_nonempty);
        t.apply_in_place(files, &BTreeSet::new());
        t
    }

    /// The timeline after some of its files appeared (`added`, or changed in place) and others
    /// vanished (`removed`, by name), with the instants that changed. Instants none of whose
    /// files changed are shared with this timeline, metadata already decoded included, so
    /// applying a commit costs what is new.
    pub fn apply(
        &self,
        added: Vec<InstantFile>,
        removed: &BTreeSet<String>,
        archive_nonempty: bool,
    ) -> (Timeline, TimelineDelta) {
        let mut next = self.clone();
        next.archive_nonempty = archive_nonempty;
        let delta = next.apply_in_place(added, removed);
        (next, delta)
    }

    fn apply_in_place(
        &mut self,
        added: Vec<InstantFile>,
        removed: &BTreeSet<String>,
    ) -> TimelineDelta {
        // The files of every instant that changed, by key.
        let mut changed: BTreeMap<InstantKey, Vec<InstantFile>> = BTreeMap::new();
        for name in removed {
            if let Some(k) = self.files.get(name) {
                changed.entry(k.clone()).or_default();
            }
        }
        let mut new_files: BTreeMap<InstantKey, Vec<InstantFile>> = BTreeMap::new();
        for f in added {
            changed.entry(key_of(&f)).or_default();
            new_files.entry(key_of(&f)).or_default().push(f);
        }
        let mut delta = TimelineDelta::default();
        for (key, files) in changed.iter_mut() {
            let fresh = new_files.remove(key).unwrap_or_default();
            if let Some(old) = self.remove_instant(key) {
                files.extend(
                    old.files
                        .iter()
                        .filter(|f| {
                            !removed.contains(&f.name) && !fresh.iter().any(|n| n.name == f.name)
                        })
                        .cloned(),
                );
                delta.removed.push(old);
            }
            files.extend(fresh);
            if files.is_empty() {
                continue;
            }
            let inst = Arc::new(Instant::from_files(
                key.0.clone(),
                key.1,
                std::mem::take(files),
                self.layout,
                &self.dir,
            ));
            self.insert_instant(inst.clone());
            delta.added.push(inst);
        }
        let first_pending_write = self
            .pending
            .values()
            .find(|i| i.action.is_write())
            .map(|i| &i.requested);
        self.active_start = match (self.completed.keys().next(), first_pending_write) {
            (Some(a), Some(b)) => Some(a.min(b).clone()),
            (a, b) => a.or(b).cloned(),
        };
        self.latest = match (
            self.completed.keys().next_back(),
            self.pending_compactions.keys().next_back(),
        ) {
            (Some(a), Some(b)) => Some(a.max(b).clone()),
            (a, b) => a.or(b).cloned(),
        };
        delta
    }

    fn insert_instant(&mut self, inst: Arc<Instant>) {
        let key = inst.key();
        for f in &inst.files {
            self.files.insert(f.name.clone(), key.clone());
        }
        if inst.is_completed_write() {
            self.completed.insert(inst.requested.clone(), inst.clone());
            let completion = inst
                .completion
                .clone()
                .unwrap_or_else(|| inst.requested.clone());
            self.completions
                .insert((completion, inst.requested.clone()));
        } else if inst.is_completed() {
            let mut of_action = self.services.get(&inst.action).cloned().unwrap_or_default();
            of_action.insert(inst.requested.clone(), inst.clone());
            self.services.insert(inst.action, of_action);
        } else {
            self.pending.insert(key.clone(), inst.clone());
            if matches!(inst.action, Action::Compaction | Action::LogCompaction) {
                self.pending_compactions
                    .insert(inst.requested.clone(), inst.clone());
            }
        }
        self.instants.insert(key, inst);
    }

    fn remove_instant(&mut self, key: &InstantKey) -> Option<Arc<Instant>> {
        let inst = self.instants.remove(key)?;
        for f in &inst.files {
            self.files.remove(&f.name);
        }
        if inst.is_completed_write() {
            self.completed.remove(&inst.requested);
            let completion = inst
                .completion
                .clone()
                .unwrap_or_else(|| inst.requested.clone());
            self.completions
                .remove(&(completion, inst.requested.clone()));
        } else if inst.is_completed() {
            if let Some(mut of_action) = self.services.get(&inst.action).cloned() {
                of_action.remove(&inst.requested);
                self.services.insert(inst.action, of_action);
            }
        } else {
            self.pending.remove(key);
            if matches!(inst.action, Action::Compaction | Action::LogCompaction) {
                self.pending_compactions.remove(&inst.requested);
            }
        }
        Some(inst)
    }

    /// Every instant, ordered by (requested time, action family).
    pub fn instants(&self) -> impl DoubleEndedIterator<Item = &Arc<Instant>> + '_ {
        self.instants.values()
    }

    /// How many files this timeline was built from.
    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// Whether `name` is one of the files this timeline was built from.
    pub fn has_file(&self, name: &str) -> bool {
        self.files.contains_key(name)
    }

    /// The newest time that selects instants in incremental windows: the greatest completion
    /// time of a completed write (v8+; requested times on v6, where they are the same).
    pub fn latest_completion(&self) -> Option<&str> {
        self.completions.get_max().map(|(c, _)| c.as_str())
    }

    /// Completed writes whose completion time lies in `range`, as (completion, requested).
    pub fn completed_by_completion<R: std::ops::RangeBounds<(String, String)>>(
        &self,
        range: R,
    ) -> impl Iterator<Item = &(String, String)> + '_ {
        self.completions.range(range)
    }

    /// The oldest requested time of a pending instant of any action.
    pub fn oldest_pending(&self) -> Option<&str> {
        self.pending.keys().next().map(|(r, _)| r.as_str())
    }

    /// Names of every timeline file this timeline was built from.
    /// In no particular order.
    pub fn file_names(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// `is_committed(t)` of spec §2.8.
    pub fn is_committed(&self, t: &str) -> bool {
        self.completed.contains_key(t) || self.active_start.as_deref().is_some_and(|s| t < s)
    }

    /// Whether `t` precedes the active timeline (its instant was archived).
    pub fn is_archived(&self, t: &str) -> bool {
        self.active_start.as_deref().is_some_and(|s| t < s)
    }

    /// `completion(t)`: v8+ the completion time from the name (archived: `t`); v6: `t`.
    pub fn completion<'a>(&'a self, t: &'a str) -> &'a str {
        self.completed
            .get(t)
            .and_then(|i| i.completion.as_deref())
            .unwrap_or(t)
    }

    /// Pending instants of any action.
    pub fn pending(&self) -> impl Iterator<Item = &Arc<Instant>> {
        self.pending.values()
    }

    /// Completed instants of one action that is not a write (clean, rollback, savepoint, ...),
    /// by requested time.
    pub fn completed_of(&self, action: Action) -> impl DoubleEndedIterator<Item = &Arc<Instant>> {
        self.services
            .get(&action)
            .into_iter()
            .flat_map(|m| m.values())
    }

    /// Requested times of completed savepoints.
    pub fn savepoints(&self) -> BTreeSet<String> {
        self.completed_of(Action::Savepoint)
            .map(|i| i.requested.clone())
            .collect()
    }

    /// The cleaner's retention bound (spec §4.6, decision 5 and 10): the last completed clean's
    /// `earliestCommitToRetain`, or the first completed write when that is empty; for an
    /// unreadable clean, the last completed write before it. A clean still in flight counts
    /// too, by its plan's `earliestInstantToRetain`: it is already deleting what it does not
    /// retain, so time travel before that would list a snapshot losing files (guarantee 5).
    /// The greatest of these; `None` without any clean.
    pub fn retention_bound(&self) -> Option<String> {
        let bound_of = |clean: &Instant, meta: Decoded<Value>| match meta {
            Ok(v) => metadata::clean_earliest_to_retain(&v)
                .or_else(|| self.completed.keys().next().cloned()),
            Err(e) => {
                log::warn!("unreadable clean metadata, bounding time travel conservatively: {e}");
                self.completed
                    .range(..clean.requested.clone())
                    .next_back()
                    .map(|(k, _)| k.clone())
            }
        };
        let completed = self
            .completed_of(Action::Clean)
            .next_back()
            .and_then(|c| bound_of(c, c.json()));
        let in_flight = self
            .pending()
            .filter(|i| i.action == Action::Clean)
            .filter_map(|c| {
                let plan = if c.file(State::Requested).is_some() {
                    c.plan_json()
                } else {
                    c.json()
                };
                bound_of(c, plan)
            });
        completed.into_iter().chain(in_flight).max()
    }

    /// The `(partition, fileId)` groups each pending compaction covers; an unreadable plan
    /// covers nothing (and is logged).
    pub fn pending_compaction_groups(&self) -> BTreeMap<String, BTreeSet<(String, String)>> {
        let mut out = BTreeMap::new();
        for (t, inst) in &self.pending_compactions {
            let groups = match inst
                .plan_json()
                .and_then(|v| metadata::compaction_plan_groups(&v))
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

    /// Completed write instants whose metadata cannot be read.
    pub fn unreadable_metadata(&self) -> Vec<String> {
        self.completed
            .values()
            .filter(|i| i.commit_metadata().is_err())
            .map(|i| i.requested.clone())
            .collect()
    }
}

/// The names of the regular files of a directory, in directory order.
pub fn list_files(dir: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)
        .map_err(|e| crate::error::Error::io(dir, e))?
        .flatten()
    {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        if e.file_type().is_ok_and(|t| t.is_file()) {
            out.push(name);
        }
    }
    Ok(out)
}

/// The names of the regular files of a directory, sorted, read until two listings in a row
/// agree: a listing taken while files are renamed in can show a later rename and miss an earlier
/// one (directory order is hash order), which would show a state of the table that never existed.
pub fn stable_listing(dir: &Path) -> Result<Vec<String>> {
    let mut first = list_files(dir)?;
    first.sort_unstable();
    stabilize(dir, first)
}

/// Read `dir` again until a listing agrees with the one before, starting from `last` (sorted).
pub fn stabilize(dir: &Path, mut last: Vec<String>) -> Result<Vec<String>> {
    let once = || -> Result<Vec<String>> {
        let mut names = list_files(dir)?;
        names.sort_unstable();
        Ok(names)
    };
    for _ in 0..20 {
        let next = once()?;
        if next == last {
            return Ok(next);
        }
        last = next;
    }
    Ok(last)
}

/// Whether the archived timeline of a table holds any file.
pub fn archive_has_files(cfg: &TableConfig) -> bool {
    dir_has_files(&cfg.archive_dir, 3)
}

/// Whether a name that failed the grammar still looks like it was meant as an instant file
/// (starts with a digit), so that it deserves a log line.
pub fn looks_like_instant(name: &str) -> bool {
    name.as_bytes().first().is_some_and(u8::is_ascii_digit)
}

fn dir_has_files(dir: &Path, depth: u32) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| match e.file_type() {
        Ok(ft) if ft.is_file() => !e.file_name().to_string_lossy().ends_with(".crc"),
        Ok(ft) if ft.is_dir() && depth > 0 => dir_has_files(&e.path(), depth - 1),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_both_layouts() {
        let f = parse_instant_file_name("20250126040823628.deltacommit", 1).unwrap();
        assert_eq!((f.action, f.state), (Action::DeltaCommit, State::Completed));
        let f = parse_instant_file_name("20250713010535797.inflight", 1).unwrap();
        assert_eq!((f.action, f.state), (Action::Commit, State::Inflight));
        let f = parse_instant_file_name("20260307162614221_20260307162615208.replacecommit", 2)
            .unwrap();
        assert_eq!(f.completion.as_deref(), Some("20260307162615208"));
        assert_eq!(f.requested, "20260307162614221");
        let f = parse_instant_file_name("20251220210129235.compaction.requested", 2).unwrap();
        assert_eq!((f.action, f.state), (Action::Compaction, State::Requested));
        for (bad, layout) in [
            ("20260307162614221_20260307162615208.replacecommit", 1),
            ("20260307162614221.replacecommit", 2),
            ("20260307162614221.compaction", 1),
            ("20260307162614221.frobnicate", 1),
            ("hoodie.properties", 1),
            ("2026x.commit", 1),
            ("20260307162614221.commit.crc", 1),
            ("20260307162614221_1.commit.requested", 2),
            (".20260307162614221.commit", 1),
            ("", 1),
        ] {
            assert_eq!(parse_instant_file_name(bad, layout), None, "{bad}");
        }
    }

    #[test]
    fn names_round_trip() {
        for layout in [1, 2] {
            for action in Action::ALL {
                for state in [State::Requested, State::Inflight, State::Completed] {
                    let name = instant_file_name(
                        "20240101000000000",
                        Some("20240101000000123"),
                        action,
                        state,
                        layout,
                    );
                    let f =
                        parse_instant_file_name(&name, layout).unwrap_or_else(|| panic!("{name}"));
                    assert_eq!(f.requested, "20240101000000000");
                    assert_eq!(f.state, state);
                    if state == State::Completed {
                        assert_eq!(f.action, action.completes_as());
                    } else {
                        assert_eq!(f.action, action);
                    }
                }
            }
        }
    }

    fn tl(names: &[&str], layout: u32) -> Timeline {
        let files = names
            .iter()
            .map(|n| parse_instant_file_name(n, layout).unwrap())
            .collect();
        Timeline::from_files(layout, Path::new("/nonexistent"), files, false)
    }

    #[test]
    fn apply_equals_a_fresh_parse_and_shares_unchanged_instants() {
        let all = [
            "001.commit.requested",
            "001.inflight",
            "001.commit",
            "002.deltacommit.requested",
            "002.deltacommit.inflight",
            "003.compaction.requested",
            "004.clean.requested",
            "004.clean",
        ];
        let full = tl(&all, 1);
        let start = tl(&all[..3], 1);
        let parse = |names: &[&str]| -> Vec<InstantFile> {
            names
                .iter()
                .map(|n| parse_instant_file_name(n, 1).unwrap())
                .collect()
        };
        let (step, delta) = start.apply(parse(&all[3..]), &BTreeSet::new(), false);
        assert!(delta.removed.is_empty());
        assert_eq!(delta.added.len(), 3);
        let summary = |t: &Timeline| -> Vec<(String, Action, State, usize)> {
            t.instants()
                .map(|i| (i.requested.clone(), i.action, i.state, i.files.len()))
                .collect()
        };
        assert_eq!(summary(&step), summary(&full));
        assert_eq!(step.latest, full.latest);
        assert_eq!(step.active_start, full.active_start);
        assert!(
            Arc::ptr_eq(
                start.instants().next().unwrap(),
                step.instants().next().unwrap()
            ),
            "001 is shared"
        );
        // 002 completes; 001 is archived away.
        let removed: BTreeSet<String> = ["001.commit.requested", "001.inflight", "001.commit"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (next, delta) = step.apply(parse(&["002.deltacommit"]), &removed, true);
        let keys = |v: &[Arc<Instant>]| -> Vec<(String, State)> {
            v.iter().map(|i| (i.requested.clone(), i.state)).collect()
        };
        assert_eq!(
            keys(&delta.removed),
            [
                ("001".into(), State::Completed),
                ("002".into(), State::Inflight)
            ]
        );
        assert_eq!(keys(&delta.added), [("002".into(), State::Completed)]);
        assert_eq!(next.completed.keys().collect::<Vec<_>>(), ["002"]);
        assert_eq!(next.active_start.as_deref(), Some("002"));
        assert!(next.archive_nonempty);
        assert_eq!(next.file_names().count(), all.len() - 3 + 1);
    }

    #[test]
    fn derived_sets() {
        let t = tl(
            &[
                "001.inflight",
                "002.commit.requested",
                "002.inflight",
                "002.commit",
                "003.compaction.requested",
                "003.compaction.inflight",
                "003.commit",
                "004.compaction.requested",
                "005.commit",
                "005.savepoint.inflight",
                "005.savepoint",
                "006.deltacommit.requested",
            ],
            1,
        );
        assert_eq!(t.active_start.as_deref(), Some("001"));
        assert_eq!(
            t.completed.keys().collect::<Vec<_>>(),
            ["002", "003", "005"]
        );
        assert_eq!(t.completed["003"].planned, Some(Action::Compaction));
        assert_eq!(t.pending_compactions.keys().collect::<Vec<_>>(), ["004"]);
        assert_eq!(t.latest.as_deref(), Some("005"));
        assert!(!t.is_committed("001"));
        assert!(t.is_committed("000"));
        assert!(t.savepoints().contains("005"));
        assert_eq!(t.pending().count(), 3);
    }
}
