//! What readers should see: the writer's own model of the table's views, independent of the
//! reading half of hudifs (`hudifs_core::rules`), for tests that compare the two.
//!
//! The rules are those of SEMANTICS.md §3 applied to what the writer knows:
//! per live file group the newest slice at or before `T` (a pending compaction's slice merged
//! into the one before it), its base file and the logs of completed writes at or before `T`.
//! Slices exist in the model only once committed (or for a pending compaction), and a log's
//! slice is the one the writer appended it to — the same slice a reader derives from the log's
//! name (v6) or completion time (v8+) as long as writes do not overlap, which holds for a single
//! writer whose writes run one after the other.

use super::{rel_path, TableWriter};
use hudifs_core::timeline::State;

/// A file a view should show.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ExpectedFile {
    /// Relative to the table root.
    pub path: String,
    /// The completed instant that wrote it.
    pub writer: String,
    /// The base instant of the file slice it belongs to.
    pub slice: String,
}

impl TableWriter {
    /// The newest requested time among completed writes and pending compactions (SEMANTICS.md §1.4
    /// `LATEST`), if any.
    fn latest_key(&self) -> Option<String> {
        let pending_compaction = self
            .compactions
            .iter()
            .filter(|(_, c)| c.state != State::Completed)
            .map(|(t, _)| t);
        self.completed
            .keys()
            .chain(pending_compaction)
            .max()
            .cloned()
    }

    /// The files `as_of/<t>` should show (`latest/` for `None`), sorted by path. Only valid
    /// for times the cleaner has not moved past (the model forgets cleaned files).
    pub fn expected_view(&self, t: Option<&str>) -> Vec<ExpectedFile> {
        let Some(latest) = self.latest_key() else {
            return Vec::new();
        };
        if self.completed.is_empty() {
            return Vec::new();
        }
        let t = t.unwrap_or(&latest);
        let mut out = Vec::new();
        for ((partition, _), g) in &self.groups {
            if g.replaced_by.as_deref().is_some_and(|r| r <= t) {
                continue;
            }
            let Some(i) = g
                .slices
                .iter()
                .rposition(|s| s.base_instant.as_str() <= t && s.base_instant <= latest)
            else {
                continue;
            };
            let picked = &g.slices[i];
            let mut parts = Vec::new();
            if picked.pending_compaction {
                if let Some(prev) = g.slices[..i].last() {
                    parts.push(prev);
                }
                parts.push(picked);
            } else {
                parts.push(picked);
            }
            if let Some(base) = parts[0].base_file.as_ref() {
                out.push(ExpectedFile {
                    path: rel_path(partition, base),
                    writer: parts[0].base_instant.clone(),
                    slice: parts[0].base_instant.clone(),
                });
            }
            for s in parts {
                for l in &s.logs {
                    if l.committed && l.writer.as_str() <= t {
                        out.push(ExpectedFile {
                            path: rel_path(partition, &l.name),
                            writer: l.writer.clone(),
                            slice: s.base_instant.clone(),
                        });
                    }
                }
            }
        }
        out.sort();
        out
    }
}
