//! [`ArchivedFacts`]: what the views need from the archived timeline, derived from an
//! [`Archive`] that the I/O layer read (the rules never read it themselves).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::archive::Archive;
use crate::ids::FileRef;
use crate::instant_time::InstantTime;
use crate::metadata::{self, CommitMetadata, MetadataError};
use crate::timeline::Action;

/// What the views need from the archived timeline (SEMANTICS.md §6.8).
#[derive(Debug, Default)]
pub struct ArchivedFacts {
    /// Archived completed writes: requested time → (completion time, commit metadata).
    pub writes: BTreeMap<InstantTime, (InstantTime, Result<CommitMetadata, MetadataError>)>,
    /// Requested times of archived savepoints.
    pub savepoints: BTreeSet<InstantTime>,
    /// The last archived clean's retention bound.
    pub retention_bound: Option<InstantTime>,
    /// v6 strict logs: log file → archived writes naming it as `path`.
    pub log_writers: HashMap<FileRef, Vec<InstantTime>>,
    /// v6: logs archived rollbacks wrote (command blocks) or found from the failed commit.
    pub rollback_logs: HashSet<FileRef>,
}

impl ArchivedFacts {
    /// The facts of an archive, or why it cannot be used: a damaged archive is refused as a
    /// whole, since a view that needs it cannot tell which archived instants it lacks.
    pub fn from_archive(a: &Archive) -> Result<ArchivedFacts, String> {
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
                        if let Some(f) = s.file().filter(|f| f.name.starts_with('.')) {
                            facts
                                .log_writers
                                .entry(f)
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
            } else if i.action == Action::Rollback {
                if let Ok(v) = &i.metadata {
                    facts.rollback_logs.extend(metadata::rollback_files(v));
                }
            } else if i.action == Action::Clean {
                if let Ok(v) = &i.metadata {
                    facts.retention_bound =
                        metadata::clean_earliest_to_retain(v).or(facts.retention_bound.take());
                }
            }
        }
        Ok(facts)
    }
}
