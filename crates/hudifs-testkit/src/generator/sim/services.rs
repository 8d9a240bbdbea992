//! The simulation's table services: rollbacks, cleans (with the commit they retain and the
//! files they may delete), insert-overwrites, compactions, savepoints and archival.

use std::collections::BTreeMap;
use std::io::Write;

use serde_json::json;

use super::{state_name, Sim, MAX_SAVEPOINTS};
use crate::generator::rel_path;
use hudifs_core::error::Result;
use hudifs_core::timeline::{Action, State};

impl<L: Write> Sim<L> {
    pub(super) fn rollback_oldest(&mut self) -> Result<()> {
        let Some(failed) = self.w.pending_writes().into_iter().next() else {
            return Ok(());
        };
        let r = self.w.rollback(&failed)?;
        self.flush_published()?;
        let e = self
            .w
            .events()
            .iter()
            .rev()
            .find(|e| e.instant == r && e.action == Action::Rollback)
            .cloned();
        let (deleted, written) = e.map(|e| (e.deleted, e.written)).unwrap_or_default();
        self.emit(
            json!({"ev": "rollback", "instant": r, "rolled_back": failed,
                         "deleted": deleted, "written": written}),
        )
    }

    /// The commit to retain: the `k`-th newest completed write, never at or after a pending
    /// instant and never older than the last clean's.
    fn retained_commit(&mut self) -> Option<String> {
        let k = 2 + self.rand(4) as usize;
        let completed: Vec<String> = self.w.completed_writes().keys().cloned().collect();
        if completed.len() < k {
            return None;
        }
        let mut bound = completed[completed.len() - k].clone();
        let oldest_pending = self
            .w
            .pending_writes()
            .into_iter()
            .chain(self.w.pending_compactions())
            .min();
        if let Some(p) = oldest_pending {
            if p <= bound {
                bound = completed.iter().rev().find(|c| **c < p)?.clone();
            }
        }
        if self.last_retained.as_ref().is_some_and(|l| *l > bound) {
            return None;
        }
        Some(bound)
    }

    /// Files of slices no view at or after `retain` needs, except savepointed slices and groups
    /// with a pending compaction: `(partition, file name)`.
    fn clean_plan(&self, retain: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for ((p, _), g) in &self.w.groups {
            if g.slices.iter().any(|s| s.pending_compaction) {
                continue;
            }
            let replaced = g.replaced_by.as_deref().is_some_and(|r| r <= retain);
            let keep_from = if replaced {
                g.slices.len()
            } else {
                match g
                    .slices
                    .iter()
                    .rposition(|s| s.base_instant.as_str() <= retain)
                {
                    Some(i) => i,
                    None => continue,
                }
            };
            for s in &g.slices[..keep_from] {
                let files: Vec<&String> = s
                    .base_file
                    .iter()
                    .chain(s.logs.iter().map(|l| &l.name))
                    .collect();
                if files
                    .iter()
                    .any(|f| self.savepointed.contains(&rel_path(p, f)))
                {
                    continue;
                }
                out.extend(files.into_iter().map(|f| (p.clone(), f.clone())));
            }
        }
        out
    }

    pub(super) fn clean(&mut self) -> Result<()> {
        // Failed writes are rolled back first, as Hudi's cleaner does with the lazy
        // failed-writes policy.
        while !self.w.pending_writes().is_empty() {
            self.rollback_oldest()?;
        }
        let Some(retain) = self.retained_commit() else {
            return self.emit(json!({"ev": "clean_skipped"}));
        };
        let plan = self.clean_plan(&retain);
        let c = self.w.clean(&retain, &plan)?;
        self.last_retained = Some(retain.clone());
        let mut published = None;
        for p in self.w.take_published() {
            if p.state == State::Completed {
                published = Some(p.before_ms);
            }
            self.emit(json!({
                "ev": "timeline", "file": p.name, "instant": p.requested,
                "action": p.action.name(), "state": state_name(p.state),
                "before": p.before_ms, "after": p.after_ms,
            }))?;
        }
        let deleted = self
            .w
            .events()
            .iter()
            .rev()
            .find(|e| e.instant == c && e.action == Action::Clean)
            .map(|e| e.deleted.clone())
            .unwrap_or_default();
        self.emit(
            json!({"ev": "clean", "instant": c, "earliest_commit_to_retain": retain,
                         "deleted": deleted, "published": published}),
        )
    }

    /// Partitions whose live groups can all be replaced (none has a pending compaction).
    pub(super) fn replaceable_partitions(&self) -> Vec<String> {
        let mut by_partition: BTreeMap<&str, bool> = BTreeMap::new();
        for ((p, _), g) in &self.w.groups {
            if g.replaced_by.is_some() {
                continue;
            }
            let ok = !g.slices.iter().any(|s| s.pending_compaction);
            let e = by_partition.entry(p).or_insert(true);
            *e &= ok;
        }
        by_partition
            .into_iter()
            .filter(|(_, ok)| *ok)
            .map(|(p, _)| p.to_string())
            .collect()
    }

    pub(super) fn replace(&mut self) -> Result<()> {
        let parts = self.replaceable_partitions();
        if parts.is_empty() {
            return self.write(false, false, false);
        }
        let p = parts[self.rand(parts.len() as u64) as usize].clone();
        let groups: Vec<String> = self
            .w
            .file_groups()
            .into_iter()
            .filter(|(gp, _)| *gp == p)
            .map(|(_, f)| f)
            .collect();
        let k = 1 + self.rand(2);
        let mut new_rows = Vec::new();
        for _ in 0..k {
            new_rows.push(self.new_rows());
        }
        let mut txn = self.w.begin(Action::ReplaceCommit)?;
        let instant = txn.instant().to_string();
        for f in &groups {
            txn.replace_group(&p, f)?;
        }
        for rows in &new_rows {
            txn.insert(&p, rows)?;
        }
        txn.complete()?;
        self.flush_published()?;
        let replaced: Vec<String> = groups.iter().map(|f| rel_path(&p, f)).collect();
        self.log_commit(&instant, Action::ReplaceCommit, &replaced)
    }

    /// Groups a compaction could take: live, with committed logs in their newest slice, no
    /// pending compaction.
    pub(super) fn compactable(&self) -> Vec<(String, String)> {
        self.w
            .groups
            .iter()
            .filter(|(_, g)| {
                g.replaced_by.is_none()
                    && g.slices.last().is_some_and(|s| {
                        !s.pending_compaction
                            && s.base_file.is_some()
                            && s.logs.iter().any(|l| l.committed)
                    })
            })
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub(super) fn compaction(&mut self) -> Result<()> {
        if let Some(c) = self.w.pending_compactions().into_iter().next() {
            let inflight = self
                .w
                .compactions
                .get(&c)
                .is_some_and(|x| x.state == State::Inflight);
            let complete = inflight || self.rand(3) != 0;
            self.w.run_compaction(&c, complete)?;
            self.flush_published()?;
            if complete {
                return self.log_commit(&c, Action::Compaction, &[]);
            }
            return self.emit(json!({"ev": "compaction_inflight", "instant": c}));
        }
        let mut candidates = self.compactable();
        let k = (1 + self.rand(3)) as usize;
        let mut groups = Vec::new();
        while groups.len() < k && !candidates.is_empty() {
            let i = self.rand(candidates.len() as u64) as usize;
            groups.push(candidates.remove(i));
        }
        if groups.is_empty() {
            return self.write(true, false, false);
        }
        let c = self.w.schedule_compaction(&groups)?;
        self.flush_published()?;
        let names: Vec<String> = groups.iter().map(|(p, f)| rel_path(p, f)).collect();
        self.emit(json!({"ev": "compaction_scheduled", "instant": c, "groups": names}))
    }

    pub(super) fn can_savepoint(&self) -> bool {
        self.w.savepoints().len() < MAX_SAVEPOINTS
            && self
                .w
                .completed_writes()
                .keys()
                .next_back()
                .is_some_and(|t| !self.w.savepoints().contains(t))
    }

    pub(super) fn savepoint(&mut self) -> Result<()> {
        // A savepoint pins the slices of its time; with a compaction pending, the slice its
        // view needs would change, so the compaction is finished first.
        while let Some(c) = self.w.pending_compactions().into_iter().next() {
            self.w.run_compaction(&c, true)?;
            self.flush_published()?;
            self.log_commit(&c, Action::Compaction, &[])?;
            // The compaction changed latest/ when it completed, before the savepoint.
            self.after_op()?;
        }
        if !self.can_savepoint() {
            return self.write(false, false, false);
        }
        let Some(t) = self.w.completed_writes().keys().next_back().cloned() else {
            return Ok(());
        };
        let files: Vec<String> = self
            .w
            .expected_view(Some(&t))
            .into_iter()
            .map(|f| f.path)
            .collect();
        self.w.savepoint(&t)?;
        self.savepointed.extend(files.iter().cloned());
        self.flush_published()?;
        self.emit(json!({"ev": "savepoint", "instant": t, "files": files}))
    }

    /// The newest instant archival may reach: older than the newest few completed writes, than
    /// every pending write and compaction and every savepoint (Hudi's archiver stops there), and
    /// than every replacecommit whose replaced groups still have files (Hudi keeps those on the
    /// active timeline until the cleaner removed the groups: `latest/` needs them).
    pub(super) fn archive_bound(&self) -> Option<String> {
        const KEEP: usize = 3;
        let completed: Vec<&String> = self.w.completed_writes().keys().collect();
        if completed.len() <= KEEP {
            return None;
        }
        let mut stops: Vec<String> = self
            .w
            .pending_writes()
            .into_iter()
            .chain(self.w.pending_compactions())
            .chain(self.w.savepoints().iter().cloned())
            .collect();
        for g in self.w.groups.values() {
            if let Some(r) = &g.replaced_by {
                let has_files = g
                    .slices
                    .iter()
                    .any(|s| s.base_file.is_some() || !s.logs.is_empty());
                if has_files {
                    stops.push(r.clone());
                }
            }
        }
        let limit = completed[completed.len() - KEEP].clone();
        let stop = stops.into_iter().min();
        // Archived instants lie wholly before the active timeline: each completed before the
        // first instant kept was requested (a compaction requested early and completed late
        // stays, as Hudi 1.x archives in completion order).
        let completions = self.w.completed_writes();
        completed
            .iter()
            .rev()
            .filter(|c| ***c < limit && stop.as_ref().is_none_or(|s| **c < s))
            .find(|c| {
                let c: &str = c.as_str();
                let first_kept = completed
                    .iter()
                    .map(|k| k.as_str())
                    .find(|k| *k > c)
                    .into_iter()
                    .chain(stop.as_deref())
                    .min();
                let last_completion = completions
                    .range::<str, _>((std::ops::Bound::Unbounded, std::ops::Bound::Included(c)))
                    .map(|(_, done)| done.as_str())
                    .max();
                match (first_kept, last_completion) {
                    (Some(k), Some(done)) => done < k,
                    _ => true,
                }
            })
            .map(|c| (*c).clone())
    }

    pub(super) fn archive(&mut self) -> Result<()> {
        let Some(bound) = self.archive_bound() else {
            return self.write(true, false, false);
        };
        let archived = self.w.archive(&bound)?;
        let instants: Vec<&String> = archived.iter().map(|(t, _)| t).collect();
        self.emit(json!({"ev": "archive", "up_to": bound, "instants": instants}))
    }
}
