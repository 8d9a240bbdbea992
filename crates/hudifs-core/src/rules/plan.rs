//! Planning a view (SEMANTICS.md §2–§3): validate its time against the timeline and work out
//! what it selects, before any data file is listed.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::ops::Bound::{Included, Unbounded};
use std::sync::Arc;

use super::{incremental, ArchivedFacts, Context};
use crate::error::{Error, Result};
use crate::ids::FileGroupId;
use crate::instant_time::InstantTime;
use crate::timeline::InstantMetadata;
use crate::viewkey::ViewKey;

/// The archived timeline as the I/O layer could read it for a view.
#[derive(Debug, Clone)]
pub enum Archived {
    /// Not read: the view does not reach before the active timeline ([`needs_archive`]).
    NotNeeded,
    Read(Arc<ArchivedFacts>),
    /// Unreadable or damaged: views that need it are refused.
    Damaged(String),
}

/// What a view needs decided before any data file is listed: its time, the groups it hides or
/// is restricted to, and what it tells about itself. Cheap: no listing is read.
#[derive(Debug, Clone)]
pub struct Plan {
    pub key: ViewKey,
    /// Snapshot time the files are chosen at; `None` for a view with no files.
    pub t: Option<InstantTime>,
    pub read_optimized: bool,
    /// Groups replaced as of `t` by archived replacecommits (the active timeline's are asked of
    /// the context).
    pub(crate) archived_replaced: HashSet<FileGroupId>,
    /// Incremental views: the only file groups listed.
    pub(crate) only: Option<BTreeSet<FileGroupId>>,
    /// The archived facts, when the view reaches before the active timeline.
    pub(crate) archive: Option<Arc<ArchivedFacts>>,
    /// Snapshot views: the instant the view shows (for `latest/`, the newest completed write).
    pub instant: Option<InstantTime>,
    /// Incremental views: the requested times of the selected instants, ascending.
    pub selected: Vec<InstantTime>,
    /// Incremental views: the end of the window after the BLOCK cut.
    pub effective_end: Option<InstantTime>,
    /// Incremental views: the selected writes in the order they committed (by the time that
    /// selects them), with the groups each touched (the change feed, `cdc/`).
    pub writes: Vec<WindowWrite>,
}

/// What a write does to records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// Inserts, updates, deletes, overwrites: it changes records.
    Data,
    /// A compaction: rewrites a slice, records keep their commit times.
    Compaction,
    /// A log compaction: rewrites log blocks into one (the records it writes may carry its own
    /// commit time), changing no record.
    LogCompaction,
    /// A clustering: rewrites file groups into others, records keep their commit times.
    Clustering,
}

impl Plan {
    /// Incremental views: the groups that can hold a record the window's row filter keeps,
    /// following the writes in commit order: a data write or log compaction adds the groups it
    /// wrote records to (inserts or updates; not those it only deleted from), a write that
    /// replaces groups removes them, and a clustering that replaced such a group adds the groups
    /// it wrote (the records moved there, commit times kept). Compactions change nothing. A
    /// group outside holds no record of the window's writes.
    pub fn groups_written(&self) -> BTreeSet<FileGroupId> {
        let mut live: BTreeSet<FileGroupId> = BTreeSet::new();
        for w in &self.writes {
            match w.kind {
                WriteKind::Data | WriteKind::LogCompaction => {
                    live.extend(w.written.iter().cloned());
                }
                WriteKind::Clustering => {
                    if w.replaced.iter().any(|g| live.contains(g)) {
                        live.extend(w.touched.iter().cloned());
                    }
                }
                WriteKind::Compaction => {}
            }
            for g in &w.replaced {
                live.remove(g);
            }
        }
        live
    }
}

/// One write an incremental window selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowWrite {
    /// Its requested time: the `_hoodie_commit_time` of the records it wrote.
    pub requested: InstantTime,
    /// The time that selects it (requested on v6, completion on v8+).
    pub at: InstantTime,
    pub kind: WriteKind,
    /// The file groups its write stats name.
    pub touched: BTreeSet<FileGroupId>,
    /// The touched groups it wrote records to (inserts or updates; a stat without counts
    /// counts): not those it only deleted from or copied.
    pub written: BTreeSet<FileGroupId>,
    /// The file groups it replaced (insert overwrite; clustering).
    pub replaced: BTreeSet<FileGroupId>,
    /// The CDC log files it wrote, by group (`cdcStats`, tables with CDC enabled): path, size.
    pub cdc_files: BTreeMap<FileGroupId, Vec<(String, u64)>>,
}

impl Plan {
    /// Whether the view can have files in `partition` (incremental views touch few).
    pub fn may_list(&self, partition: &str) -> bool {
        self.t.is_some()
            && self
                .only
                .as_ref()
                .is_none_or(|o| o.iter().any(|g| g.partition == partition))
    }
}

/// Whether planning `key` needs the archived timeline (the caller reads it first).
pub fn needs_archive(ctx: &Context, key: &ViewKey) -> bool {
    let tl = &ctx.timeline;
    match key {
        ViewKey::Latest => false,
        ViewKey::AsOf(t) => ctx.needs_archive(t),
        ViewKey::Incremental { start, .. } => {
            tl.archive_nonempty
                && match (start, tl.active_start.as_ref()) {
                    (None, _) => true,
                    (Some(s), Some(a)) => s < a,
                    (Some(_), None) => false,
                }
        }
    }
}

/// Whether views would tell more of their files with the archived timeline, though they can
/// do without it: on table version 6 merge-on-read (and tables upgraded from it) a log file carries no writer in its name, so
/// a log that no active write names is shown as written by an archived writer unless an
/// archived rollback names it (its write failed) or, while a pending deltacommit (or unreadable
/// metadata) leaves open that it is the pending write's, unless an archived write names it. The
/// caller reads the archive if it can and plans without it if it cannot.
pub fn wants_archive(ctx: &Context) -> bool {
    ctx.cfg.attributes_logs() && ctx.timeline.archive_nonempty
}

impl Context {
    /// The archived facts for a view at `t` that reaches before the active timeline (`None`
    /// when it does not); a refusal when they could not be read.
    pub(crate) fn archive_for(&self, archived: &Archived) -> Result<Option<Arc<ArchivedFacts>>> {
        match archived {
            Archived::NotNeeded => Ok(None),
            Archived::Read(a) => Ok(Some(a.clone())),
            Archived::Damaged(e) => Err(Error::Refused(format!(
                "{e} (needed for history before {})",
                self.timeline
                    .active_start
                    .as_deref()
                    .unwrap_or("the active timeline")
            ))),
        }
    }

    /// The groups replaced as of `t` that only the archive knows of; an unreadable
    /// replacecommit at or before `t` refuses. The active timeline's replaced groups are asked
    /// per group ([`Context::replaced_at`]). Archived replacecommits count when `t` itself is
    /// archived (never for `latest/`).
    fn check_replaced_as_of(
        &self,
        t: &str,
        archive: Option<&ArchivedFacts>,
    ) -> Result<HashSet<FileGroupId>> {
        let unreadable = |r: &str, e: &dyn std::fmt::Display| {
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
        if let Some(a) = archive.filter(|_| self.needs_archive(t)) {
            for (r, (_, m)) in a.writes.range::<str, _>((Unbounded, Included(t))) {
                match m {
                    Ok(m) => out.extend(m.replaced.iter().cloned()),
                    Err(e) => return Err(unreadable(r, e)),
                }
            }
        }
        Ok(out)
    }

    /// The clean guard (SEMANTICS.md §5.3): `t` must not be older than what the cleaner
    /// retains unless it is a savepoint.
    pub(crate) fn check_history(
        &self,
        t: &str,
        what: &str,
        archive: Option<&ArchivedFacts>,
    ) -> Result<()> {
        let bound = self
            .retention_bound()
            .cloned()
            .or_else(|| archive.and_then(|a| a.retention_bound.clone()));
        let savepoint =
            self.savepoints().contains(t) || archive.is_some_and(|a| a.savepoints.contains(t));
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

/// Decide a view: validate its time against the timeline and work out what it selects.
/// `archived` is what the I/O layer read of the archived timeline for it ([`needs_archive`]).
pub fn plan(
    ctx: &Context,
    meta: &InstantMetadata,
    archived: &Archived,
    key: &ViewKey,
    read_optimized: bool,
) -> Result<Plan> {
    let mut p = Plan {
        key: key.clone(),
        t: None,
        read_optimized,
        archived_replaced: HashSet::new(),
        only: None,
        archive: None,
        instant: None,
        selected: Vec::new(),
        effective_end: None,
        writes: Vec::new(),
    };
    // Read for log attribution only (`wants_archive`): used if it could be read.
    let helpful = match archived {
        Archived::Read(a) => Some(a.clone()),
        _ => None,
    };
    match key {
        ViewKey::Latest => {
            p.instant = ctx.timeline.latest_completed().cloned();
            p.t = ctx.timeline.latest.clone();
            p.archive = helpful;
        }
        ViewKey::AsOf(t) => {
            let archive = if ctx.needs_archive(t) {
                ctx.archive_for(archived)?
            } else {
                helpful
            };
            ctx.check_history(t, "as-of time", archive.as_deref())?;
            p.archive = archive;
            p.instant = Some(t.clone());
            p.t = Some(t.clone());
        }
        ViewKey::Incremental { start, end } => {
            p.read_optimized = false;
            let archive = if needs_archive(ctx, key) {
                ctx.archive_for(archived)?
            } else {
                helpful
            };
            incremental::plan_window(
                ctx,
                meta,
                archive.as_deref(),
                &mut p,
                start.as_deref(),
                end.as_deref(),
            )?;
            p.archive = archive;
        }
    }
    if let Some(t) = p.t.clone() {
        p.archived_replaced = ctx.check_replaced_as_of(&t, p.archive.as_deref())?;
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(f: &str) -> FileGroupId {
        FileGroupId::new("p", f)
    }

    fn write(
        kind: WriteKind,
        written: &[&str],
        touched: &[&str],
        replaced: &[&str],
    ) -> WindowWrite {
        let set = |v: &[&str]| v.iter().map(|f| g(f)).collect::<BTreeSet<_>>();
        WindowWrite {
            requested: InstantTime::parse("20240101000000000").unwrap(),
            at: InstantTime::parse("20240101000000000").unwrap(),
            kind,
            touched: set(touched).union(&set(written)).cloned().collect(),
            written: set(written),
            replaced: set(replaced),
            cdc_files: BTreeMap::new(),
        }
    }

    fn groups(writes: Vec<WindowWrite>) -> Vec<String> {
        let mut p = Plan {
            key: ViewKey::Latest,
            t: None,
            read_optimized: false,
            archived_replaced: HashSet::new(),
            only: None,
            archive: None,
            instant: None,
            selected: Vec::new(),
            effective_end: None,
            writes: Vec::new(),
        };
        p.writes = writes;
        p.groups_written().into_iter().map(|g| g.file_id).collect()
    }

    #[test]
    fn groups_a_window_can_hold_records_of() {
        use WriteKind::*;
        // A data write's groups; not those it only deleted from (touched, not written).
        assert_eq!(groups(vec![write(Data, &["a"], &["b"], &[])]), ["a"]);
        // A compaction or a clustering of groups the window did not write adds nothing.
        assert!(groups(vec![write(Compaction, &["a"], &[], &[])]).is_empty());
        assert!(groups(vec![write(Clustering, &["c"], &[], &["a"])]).is_empty());
        // A clustering of a written group carries its records to the groups it wrote.
        assert_eq!(
            groups(vec![
                write(Data, &["a"], &[], &[]),
                write(Clustering, &["c", "d"], &[], &["a"]),
            ]),
            ["c", "d"]
        );
        // An insert overwrite replaces what the window wrote before it.
        assert_eq!(
            groups(vec![
                write(Data, &["a"], &[], &[]),
                write(Data, &["e"], &[], &["a"]),
            ]),
            ["e"]
        );
        // A log compaction's block carries its own commit time.
        assert_eq!(groups(vec![write(LogCompaction, &["a"], &[], &[])]), ["a"]);
    }
}
