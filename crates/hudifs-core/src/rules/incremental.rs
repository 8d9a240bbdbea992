//! Incremental windows (SEMANTICS.md §2.4): the instants a window `(start, end]` selects — by
//! requested time on table version 6, with the BLOCK cut for hollow commits, by completion time
//! on 8/9 — and the file groups they touched, listed merge-ready as of the newest one.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{ArchivedFacts, Context, Plan, WindowWrite, WriteKind};
use crate::error::{Error, Result};
use crate::instant_time::{InstantTime, EARLIEST};
use crate::metadata::{CommitMetadata, MetadataError};
use crate::timeline::Action;
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
    // (requested time, commit metadata) of every selected instant, with the time that selects
    // it and whether it can change records.
    let mut selected: Vec<Selected> = Vec::new();
    if let Some(a) = archived {
        for (r, (completion, m)) in &a.writes {
            let x = if by_completion { completion } else { r };
            if in_window(x) && !tl.completed.contains_key(r) {
                let m = m.clone().map(Arc::new);
                let kind = write_kind(None, m.as_deref().ok());
                selected.push((r.clone(), m, x.clone(), kind));
            }
        }
    }
    // Completed writes by the time that selects them: only those in the window are visited.
    for c in tl
        .completed_after(start)
        .take_while(|c| window_end.as_deref().is_none_or(|e| c.at.as_str() <= e))
    {
        if let Some(i) = tl.completed.get(&c.requested) {
            let m = meta.commit(i);
            let kind = write_kind(i.planned, m.as_deref().ok());
            selected.push((i.requested.clone(), m, c.at.clone(), kind));
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
    for (r, m, at, kind) in &selected {
        let m = m.as_ref().map_err(|e| {
            Error::Refused(format!(
                "instant {r} in this window has unreadable metadata: {e}"
            ))
        })?;
        let write = WindowWrite {
            requested: r.clone(),
            at: at.clone(),
            kind: *kind,
            touched: m.write_stats.iter().map(|s| s.group()).collect(),
            written: m
                .write_stats
                .iter()
                .filter(|s| s.written != Some(0))
                .map(|s| s.group())
                .collect(),
            replaced: m.replaced.iter().cloned().collect(),
            cdc_files: m
                .write_stats
                .iter()
                .filter(|s| !s.cdc_files.is_empty())
                .fold(BTreeMap::new(), |mut acc, s| {
                    acc.entry(s.group())
                        .or_insert_with(Vec::new)
                        .extend(s.cdc_files.iter().cloned());
                    acc
                }),
        };
        touched.extend(write.touched.iter().cloned());
        replaced.extend(write.replaced.iter().cloned());
        plan.writes.push(write);
    }
    plan.writes
        .sort_by(|a, b| (&a.at, &a.requested).cmp(&(&b.at, &b.requested)));
    plan.only = Some(touched.difference(&replaced).cloned().collect());
    plan.t = Some(l);
    Ok(())
}

/// A selected write: requested time, commit metadata, the time that selects it, and what it
/// does to records.
type Selected = (
    InstantTime,
    Result<Arc<CommitMetadata>, MetadataError>,
    InstantTime,
    WriteKind,
);

/// What a write does to records: by the action it was planned as (compaction, log compaction,
/// clustering), else by its operation type (archived writes).
pub fn write_kind(planned: Option<Action>, m: Option<&CommitMetadata>) -> WriteKind {
    let op = m.and_then(|m| m.operation_type.as_deref());
    match (planned, op) {
        (Some(Action::Compaction), _) | (_, Some("COMPACT")) => WriteKind::Compaction,
        (Some(Action::LogCompaction), _) | (_, Some("LOG_COMPACT")) => WriteKind::LogCompaction,
        (Some(Action::Clustering), _) | (_, Some("CLUSTER")) => WriteKind::Clustering,
        _ => WriteKind::Data,
    }
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
