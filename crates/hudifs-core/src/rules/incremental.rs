//! Incremental windows (SEMANTICS.md §2.4): the instants a window `(start, end]` selects — by
//! requested time on table version 6, with the BLOCK cut for hollow commits, by completion time
//! on 8/9 — and the file groups they touched, listed merge-ready as of the newest one.

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{ArchivedFacts, Context, Plan};
use crate::error::{Error, Result};
use crate::instant_time::{InstantTime, EARLIEST};
use crate::metadata::{CommitMetadata, MetadataError};
use crate::timeline::InstantMetadata;

/// Work out what the window `(start, end]` selects into `plan`.
pub(crate) fn plan_window(
    ctx: &Context,
    meta: &InstantMetadata,
    archived: Option<&ArchivedFacts>,
    plan: &mut Plan,
    start: Option<&str>,
    end: Option<&str>,
) -> Result<()> {
    if !ctx.cfg.populate_meta_fields {
        return Err(Error::Refused(
            "hoodie.populate.meta.fields=false: no _hoodie_commit_time, incremental queries \
             impossible (SEMANTICS.md §5.5)"
                .into(),
        ));
    }
    let tl = &ctx.timeline;
    let by_completion = ctx.cfg.has_completion_times();
    let mut window_end: Option<InstantTime> = end.and_then(InstantTime::parse);
    if !by_completion {
        // BLOCK: the oldest pending write instant inside the window cuts it just before itself.
        let blocker = ctx
            .hollow_blockers()
            .iter()
            .filter(|p| start.is_none_or(|s| p.as_str() > s) && end.is_none_or(|e| p.as_str() <= e))
            .min();
        if let Some(p) = blocker {
            window_end = Some(
                crate::timefmt::minus_one_ms(p)
                    .and_then(|t| InstantTime::parse(&t))
                    .unwrap_or_else(|| p.clone()),
            );
        }
    }
    let in_window =
        |x: &str| start.is_none_or(|s| x > s) && window_end.as_deref().is_none_or(|e| x <= e);
    // (requested time, commit metadata) of every selected instant.
    let mut selected: Vec<(InstantTime, Result<Arc<CommitMetadata>, MetadataError>)> = Vec::new();
    if let Some(a) = archived {
        for (r, (completion, m)) in &a.writes {
            let x = if by_completion { completion } else { r };
            if in_window(x) && !tl.completed.contains_key(r) {
                selected.push((r.clone(), m.clone().map(Arc::new)));
            }
        }
    }
    // Completed writes by the time that selects them: only those in the window are visited.
    for c in tl
        .completed_after(start)
        .take_while(|c| window_end.as_deref().is_none_or(|e| c.at.as_str() <= e))
    {
        if let Some(i) = tl.completed.get(&c.requested) {
            selected.push((i.requested.clone(), meta.commit(i)));
        }
    }
    selected.sort_by(|a, b| a.0.cmp(&b.0));
    plan.effective_end = window_end.or_else(|| tl.latest_completion().cloned());
    plan.selected = selected.iter().map(|i| i.0.clone()).collect();
    let Some(l) = plan.selected.iter().max().cloned() else {
        return Ok(());
    };
    let archived_savepoint = archived.is_some_and(|a| a.savepoints.contains(&l));
    let bound = ctx
        .retention_bound()
        .cloned()
        .or_else(|| archived.and_then(|a| a.retention_bound.clone()));
    if let Some(bound) = bound {
        if l < bound && !ctx.savepoints().contains(&l) && !archived_savepoint {
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
        touched.extend(m.write_stats.iter().map(|s| s.group()));
        replaced.extend(m.replaced.iter().cloned());
    }
    plan.only = Some(touched.difference(&replaced).cloned().collect());
    plan.t = Some(l);
    Ok(())
}

/// The windows `incremental/` lists: one per completed write instant, from the previous one (or
/// [`EARLIEST`]) to it, over the time that selects instants.
pub fn incremental_windows(ctx: &Context) -> Vec<(InstantTime, InstantTime)> {
    let mut prev = InstantTime::earliest();
    debug_assert_eq!(prev.as_str(), EARLIEST);
    let mut out = Vec::new();
    for c in ctx.timeline.completed_after(None) {
        out.push((prev, c.at.clone()));
        prev = c.at.clone();
    }
    out
}
