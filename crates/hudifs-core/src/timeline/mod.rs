//! The active timeline (SEMANTICS.md §1.3–§1.4): instant file names of both layouts →
//! [`Instant`]s, and the derived sets the views rest on: completed writes, pending instants and
//! compactions, `ACTIVE_START`, `LATEST`, completion order.
//!
//! - `grammar`: actions, states, layouts and the file-name grammar;
//! - `instant`: one instant as a value (it never reads its own files);
//! - `metadata`: [`InstantMetadata`], which reads and decodes instant files through the storage;
//! - `load`: reading the timeline directory through the storage.

mod grammar;
mod instant;
mod load;
mod metadata;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use imbl::{OrdMap, OrdSet};

pub use crate::table::Layout;
pub use grammar::{
    instant_file_name, looks_like_instant, parse_instant_file_name, Action, InstantFile, State,
};
pub use instant::{Decoded, Instant, InstantKey};
pub use load::{archive_has_files, list_files, parse_timeline_name, stabilize, stable_listing};
pub use metadata::InstantMetadata;

use crate::instant_time::InstantTime;

fn key_of(f: &InstantFile) -> InstantKey {
    (f.requested.clone(), f.action.completes_as())
}

/// A completed write by the time that selects it in incremental windows: its completion time
/// (layout 2; the requested time on layout 1, where the two are the same), then its requested
/// time.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Completion {
    pub at: InstantTime,
    pub requested: InstantTime,
}

/// A parsed active timeline with its derived sets.
///
/// Every collection is persistent (`imbl`): a timeline after a change shares all unchanged parts
/// with the one before, so applying a commit costs `O(log n)` in the length of the history, not
/// `O(n)`.
#[derive(Debug, Clone)]
pub struct Timeline {
    pub layout: Layout,
    /// Every instant by (requested time, action family).
    instants: OrdMap<InstantKey, Arc<Instant>>,
    /// Completed commit/deltacommit/replacecommit instants by requested time.
    pub completed: OrdMap<InstantTime, Arc<Instant>>,
    /// Pending compaction and log-compaction instants by requested time.
    pub pending_compactions: OrdMap<InstantTime, Arc<Instant>>,
    /// Instants of any action without a completed file.
    pending: OrdMap<InstantKey, Arc<Instant>>,
    /// Completed instants of the other actions (clean, rollback, savepoint, ...) by action and
    /// requested time.
    services: OrdMap<Action, OrdMap<InstantTime, Arc<Instant>>>,
    /// Every timeline file name → the key of its instant.
    files: imbl::HashMap<String, InstantKey>,
    /// Completed writes in completion order.
    completions: OrdSet<Completion>,
    /// Smallest requested time over completed or pending write/compaction/clustering instants.
    pub active_start: Option<InstantTime>,
    /// Greatest requested time of a completed write or pending compaction.
    pub latest: Option<InstantTime>,
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
    fn empty(layout: Layout, archive_nonempty: bool) -> Timeline {
        Timeline {
            layout,
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
    pub fn from_files(layout: Layout, files: Vec<InstantFile>, archive_nonempty: bool) -> Timeline {
        let mut t = Timeline::empty(layout, archive_nonempty);
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

    fn completion_entry(inst: &Instant) -> Completion {
        Completion {
            at: inst.completion_or_requested().clone(),
            requested: inst.requested.clone(),
        }
    }

    fn insert_instant(&mut self, inst: Arc<Instant>) {
        let key = inst.key();
        for f in &inst.files {
            self.files.insert(f.name.clone(), key.clone());
        }
        if inst.is_completed_write() {
            self.completed.insert(inst.requested.clone(), inst.clone());
            self.completions.insert(Self::completion_entry(&inst));
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
            self.completions.remove(&Self::completion_entry(&inst));
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

    /// Names of every timeline file this timeline was built from, in no particular order.
    pub fn file_names(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }

    /// The newest completed write instant: what `latest/` shows.
    pub fn latest_completed(&self) -> Option<&InstantTime> {
        self.completed.keys().next_back()
    }

    /// The newest time that selects instants in incremental windows: the greatest completion
    /// time of a completed write (layout 2; requested times on layout 1, where they are the
    /// same).
    pub fn latest_completion(&self) -> Option<&InstantTime> {
        self.completions.get_max().map(|c| &c.at)
    }

    /// Completed writes in completion order, from the first whose completion time is after
    /// `after` (all if `None`).
    pub fn completed_after<'a>(
        &'a self,
        after: Option<&str>,
    ) -> impl Iterator<Item = &'a Completion> + 'a {
        let from = after.map(|s| Completion {
            at: InstantTime::parse(s).unwrap_or_else(InstantTime::earliest),
            requested: InstantTime::earliest(),
        });
        let after = after.map(str::to_string);
        let iter: Box<dyn Iterator<Item = &Completion>> = match from {
            Some(f) => Box::new(self.completions.range(f..)),
            None => Box::new(self.completions.iter()),
        };
        iter.skip_while(move |c| after.as_deref().is_some_and(|s| c.at.as_str() <= s))
    }

    /// The oldest requested time of a pending instant of any action.
    pub fn oldest_pending(&self) -> Option<&InstantTime> {
        self.pending.keys().next().map(|(r, _)| r)
    }

    /// `is_committed(t)` (SEMANTICS.md §1.4): a completed write, or older than the active
    /// timeline (archived, hence completed).
    pub fn is_committed(&self, t: &str) -> bool {
        self.completed.contains_key(t) || self.is_archived(t)
    }

    /// Whether `t` precedes the active timeline (its instant was archived).
    pub fn is_archived(&self, t: &str) -> bool {
        self.active_start.as_deref().is_some_and(|s| t < s)
    }

    /// `completion(t)`: layout 2 the completion time from the name (archived: `t`); layout 1:
    /// `t`.
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
    pub fn savepoints(&self) -> BTreeSet<InstantTime> {
        self.completed_of(Action::Savepoint)
            .map(|i| i.requested.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(names: &[&str], layout: Layout) -> Vec<InstantFile> {
        names
            .iter()
            .map(|n| parse_instant_file_name(n, layout).unwrap())
            .collect()
    }

    fn tl(names: &[&str], layout: Layout) -> Timeline {
        Timeline::from_files(layout, parse(names, layout), false)
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
        let full = tl(&all, Layout::V1);
        let start = tl(&all[..3], Layout::V1);
        let (step, delta) = start.apply(parse(&all[3..], Layout::V1), &BTreeSet::new(), false);
        assert!(delta.removed.is_empty());
        assert_eq!(delta.added.len(), 3);
        let summary = |t: &Timeline| -> Vec<(InstantTime, Action, State, usize)> {
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
        let (next, delta) = step.apply(parse(&["002.deltacommit"], Layout::V1), &removed, true);
        let keys = |v: &[Arc<Instant>]| -> Vec<(String, State)> {
            v.iter()
                .map(|i| (i.requested.to_string(), i.state))
                .collect()
        };
        assert_eq!(
            keys(&delta.removed),
            [
                ("001".into(), State::Completed),
                ("002".into(), State::Inflight)
            ]
        );
        assert_eq!(keys(&delta.added), [("002".into(), State::Completed)]);
        assert_eq!(
            next.completed
                .keys()
                .map(|k| k.as_str())
                .collect::<Vec<_>>(),
            ["002"]
        );
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
            Layout::V1,
        );
        assert_eq!(t.active_start.as_deref(), Some("001"));
        assert_eq!(
            t.completed.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["002", "003", "005"]
        );
        assert_eq!(t.completed["003"].planned, Some(Action::Compaction));
        assert_eq!(
            t.pending_compactions
                .keys()
                .map(|k| k.as_str())
                .collect::<Vec<_>>(),
            ["004"]
        );
        assert_eq!(t.latest.as_deref(), Some("005"));
        assert!(!t.is_committed("001"));
        assert!(t.is_committed("000"));
        assert!(t.savepoints().iter().any(|s| s == "005"));
        assert_eq!(t.pending().count(), 3);
        assert_eq!(
            t.completed_after(Some("002"))
                .map(|c| c.requested.as_str())
                .collect::<Vec<_>>(),
            ["003", "005"]
        );
    }
}
