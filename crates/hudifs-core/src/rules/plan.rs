//! Planning a view (SEMANTICS.md §2–§3): validate its time against the timeline and work out
//! what it selects, before any data file is listed.

use std::collections::{BTreeSet, HashSet};
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
/// do without it: on table version 6 merge-on-read a log file carries no writer in its name, so
/// a log that no active write names is shown as written by an archived writer unless an
/// archived rollback names it (its write failed) or, while a pending deltacommit (or unreadable
/// metadata) leaves open that it is the pending write's, unless an archived write names it. The
/// caller reads the archive if it can and plans without it if it cannot.
pub fn wants_archive(ctx: &Context) -> bool {
    ctx.cfg.has_v6_logs() && ctx.timeline.archive_nonempty
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
