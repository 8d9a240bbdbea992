//! The facts the views rest on, as `hudifs timeline --json` reports them.

use super::{unreadable_metadata, Context};
use crate::timeline::InstantMetadata;

/// Facts the views rest on, for `hudifs timeline` and the conformance tests.
pub fn model(ctx: &Context, meta: &InstantMetadata) -> serde_json::Value {
    serde_json::json!({
        "active_start": ctx.timeline.active_start,
        "archive_nonempty": ctx.timeline.archive_nonempty,
        "hollow_blockers": ctx.hollow_blockers(),
        "incremental_window_time": if ctx.cfg.has_completion_times() { "completion" } else { "requested" },
        "latest_instant": ctx.timeline.latest,
        "pending_compactions": ctx.timeline.pending_compactions.keys().collect::<Vec<_>>(),
        "populate_meta_fields": ctx.cfg.populate_meta_fields,
        "retention_bound": ctx.retention_bound(),
        "savepoints": ctx.savepoints().iter().collect::<Vec<_>>(),
        "unreadable_metadata": unreadable_metadata(&ctx.timeline, meta),
    })
}
