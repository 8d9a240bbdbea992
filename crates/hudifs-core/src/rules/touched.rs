//! Which partitions a change of the timeline touched: those whose visible files it can change
//! (following writers re-lists only those, SEMANTICS.md §6.7; the metadata table's listing is
//! completed from storage for them, §1.10).

use std::collections::BTreeSet;

use super::Context;
use crate::metadata;
use crate::timeline::{Action, InstantMetadata, State, TimelineDelta};

/// Partitions whose visible files a change of the timeline can change; `None` when that cannot
/// be told (unreadable metadata). The instants that came or changed count, and of those that
/// left or changed, completed writes and pending compactions (a compaction rolled back stops
/// merging its groups). Other instants that vanished changed nothing visible, and completed
/// writes that were archived move the active timeline's start, which the caller handles.
pub fn touched_partitions(
    ctx: &Context,
    meta: &InstantMetadata,
    delta: &TimelineDelta,
) -> Option<BTreeSet<String>> {
    let v6_mor = ctx.cfg.has_v6_logs();
    let mut out = BTreeSet::new();
    let left = delta.removed.iter().filter(|i| {
        i.is_completed_write()
            || (!i.is_completed() && matches!(i.action, Action::Compaction | Action::LogCompaction))
    });
    for inst in delta.added.iter().chain(left) {
        match (inst.state, inst.action.completes_as()) {
            (State::Completed, Action::Commit | Action::DeltaCommit | Action::ReplaceCommit) => {
                let m = meta.commit(inst).ok()?;
                out.extend(m.write_stats.iter().map(|s| s.partition.clone()));
                out.extend(m.replaced.iter().map(|g| g.partition.clone()));
            }
            (State::Completed, Action::Clean | Action::Rollback | Action::Restore) => {
                let v = meta.json(inst).ok()?;
                if let Some(parts) = v.get("partitionMetadata").and_then(|p| p.as_object()) {
                    out.extend(parts.keys().cloned());
                }
            }
            (State::Completed, _) => {}
            // A pending compaction merges slices of the groups its plan covers.
            (_, _) if matches!(inst.action, Action::Compaction | Action::LogCompaction) => {
                let v = meta.plan(inst).ok()?;
                let groups = metadata::compaction_plan_groups(&v).ok()?;
                out.extend(groups.into_iter().map(|g| g.partition));
            }
            // A pending v6 deltacommit can hide logs of archived writers in the groups it
            // targets.
            (_, Action::DeltaCommit) if v6_mor => match meta.commit(inst) {
                Ok(m) if !m.write_stats.is_empty() => {
                    out.extend(m.write_stats.iter().map(|s| s.partition.clone()))
                }
                _ => return None,
            },
            _ => {}
        }
    }
    Some(out)
}
