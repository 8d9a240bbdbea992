//! From a resolved view (hudifs-core's `Snapshot::resolve`) to the slices to merge, and the block
//! visibility of a view: what the mount (and tests) need to drive the engine.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hudifs_core::ids::FileGroupId;

use hudifs_core::error::Error;
use hudifs_core::instant_time::InstantTime;
use hudifs_core::listing::DataFile;
use hudifs_core::rules::{InstantInterner, Plan, VisibleFile, WriteKind};
use hudifs_core::snapshot::Snapshot;
use hudifs_core::timeline::Timeline;
use hudifs_core::viewkey::ViewKey;
use hudifs_storage::TablePath;

use crate::cdc::{CdcGroup, CdcStep, GroupState};
use crate::engine::Slice;
use crate::materialise::InputFile;
use crate::schema::{SliceSchema, ViewSchema};

/// A slice of a view and the newest instant its files hold (for [`crate::merged_file_name`]).
#[derive(Debug, Clone)]
pub struct ViewSlice {
    pub slice: Slice,
    pub newest_instant: String,
}

impl ViewSlice {
    pub fn file_name(&self) -> String {
        crate::merged_file_name(&self.slice, &self.newest_instant)
    }
}

/// Group the files of a view into slices, one per file group, in the order of (partition,
/// file id). A view shows one slice per group, but while a compaction is pending it adds the
/// logs of the compaction's slice to the previous one (SEMANTICS §3.3): they are merged
/// together, and the slice is named after its base file's slice (or the oldest slice of a
/// group of logs only).
pub fn slices_of_view(files: &[VisibleFile]) -> Vec<ViewSlice> {
    let mut groups: BTreeMap<(String, String), ViewSlice> = BTreeMap::new();
    for f in files {
        let key = (f.file.partition.to_string(), f.file.file_id().to_string());
        let entry = groups.entry(key.clone()).or_insert_with(|| ViewSlice {
            slice: Slice {
                partition: key.0.clone(),
                file_id: key.1.clone(),
                instant: f.slice.clone(),
                base: None,
                logs: Vec::new(),
                keep_commits: None,
                schema: None,
                source: None,
            },
            newest_instant: f.slice.clone(),
        });
        if f.file.is_base() || (entry.slice.base.is_none() && f.slice < entry.slice.instant) {
            entry.slice.instant = f.slice.clone();
        }
        let Ok(path) = TablePath::new(&f.rel_path()) else {
            continue;
        };
        let input = InputFile::new(path, Some(f.file.size()));
        if f.file.is_base() {
            entry.slice.base = Some(input);
        } else {
            entry.slice.logs.push(input);
        }
        let instant = f.writer.as_deref().unwrap_or(f.file.instant());
        if instant > entry.newest_instant.as_str() {
            entry.newest_instant = instant.to_string();
        }
    }
    groups.into_values().collect()
}

/// Put the slices of a view in the view's table schema where the table's schema changed
/// (SEMANTICS §10.3). `view_text` is the view's schema (the newest write's at or before the
/// view's instant) and `view` its Arrow form; `schema_of` gives the schema a write (by
/// requested time) wrote under, `None` where it recorded none. A slice whose base file or
/// newest write was written under another schema text is written in the view's; one without
/// logs whose base file was is rewritten instead of served as it is. Slices whose writes
/// recorded no schema keep their own.
///
/// Under schema-on-read (`evolution`) every slice with logs is written in the view's schema
/// (each log block's columns matched by id), and so is a slice whose base file's columns are
/// not the view's by name (renamed, dropped, or a file schema that cannot be read: its merge
/// then fails with the reason).
pub fn apply_view_schema(
    slices: &mut [ViewSlice],
    view: &Arc<ViewSchema>,
    view_text: &str,
    schema_of: impl Fn(&str) -> Option<Arc<str>>,
    evolution: Option<&Arc<crate::evolution::SchemaOnRead>>,
) {
    let differs = |instant: &str| schema_of(instant).is_some_and(|s| &*s != view_text);
    for vs in slices {
        let base_instant = vs.slice.base.as_ref().and_then(|b| {
            let exts = [b.path.name().rsplit('.').next().unwrap_or("").to_string()];
            hudifs_core::listing::parse_base_name(b.path.name(), &exts).map(|n| n.instant)
        });
        let renamed = evolution.is_some_and(|e| {
            base_instant
                .as_deref()
                .is_some_and(|i| e.columns(i).map_or(true, |m| !m.is_identity()))
        });
        let base_differs = renamed || base_instant.as_deref().is_some_and(differs);
        let newest_differs =
            !vs.slice.logs.is_empty() && (evolution.is_some() || differs(&vs.newest_instant));
        if base_differs || newest_differs {
            vs.slice.schema = Some(SliceSchema {
                view: view.clone(),
                rewrite_base: base_differs,
                evolution: evolution.cloned(),
            });
        }
    }
}

/// The slices of an incremental window's files (`merged/incremental/`): [`slices_of_view`]
/// of the groups the window's writes wrote records to (`written`: `Plan::groups_written`;
/// a group only compacted, clustered or deleted from holds no record of the window), each
/// keeping only the records of the window's writes (`selected`: their requested times).
pub fn slices_of_window(
    files: &[VisibleFile],
    selected: &[impl AsRef<str>],
    written: &BTreeSet<FileGroupId>,
) -> Vec<ViewSlice> {
    let keep: Vec<String> = selected.iter().map(|s| s.as_ref().to_string()).collect();
    let mut slices = slices_of_view(files);
    slices.retain(|vs| written.contains(&FileGroupId::new(&vs.slice.partition, &vs.slice.file_id)));
    for vs in &mut slices {
        vs.slice.keep_commits = Some(keep.clone());
    }
    slices
}

/// The block visibility of a snapshot view taken at `t`: a block counts when its instant is
/// committed (a completed write on the active timeline, or older than the active timeline)
/// and not after `t`.
pub fn snapshot_visibility<'a>(
    timeline: &'a Timeline,
    t: &'a str,
) -> impl Fn(&str) -> bool + Sync + 'a {
    move |instant: &str| instant <= t && timeline.is_committed(instant)
}

/// The block visibility of an incremental window (`merged/incremental/`, SEMANTICS §10.9): the
/// state of the window's touched groups as of its effective end. A block counts when its
/// instant is committed, not after `l` (the newest requested time the window selects) and, on
/// a timeline with completion times, completed by `effective_end`: a write requested before
/// `l` but completed after the window is not part of the state the window ends with.
pub fn window_visibility<'a>(
    timeline: &'a Timeline,
    l: &'a str,
    effective_end: Option<&'a str>,
) -> impl Fn(&str) -> bool + Sync + 'a {
    let by_completion = timeline.layout.has_completion_times();
    move |instant: &str| {
        instant <= l
            && timeline.is_committed(instant)
            && (!by_completion || effective_end.is_none_or(|e| timeline.completion(instant) <= e))
    }
}

/// The change feeds of one partition of a window (`cdc/`, SEMANTICS §10.10): per file group its
/// data writes touched or replaced, the group's state just before and just after each, as the
/// snapshot views `as_of(W − 1 ms)` and `as_of(W)` choose them from `files` (the partition's
/// listing). Writes that change no record (compactions, clusterings, log compactions) are no
/// steps. Nothing is read but the timeline: planning and choosing files only. A state the
/// timeline can no longer answer (cleaned history) refuses the window.
pub fn cdc_groups(
    snap: &Snapshot,
    plan: &Plan,
    partition: &str,
    files: &[DataFile],
) -> Result<Vec<CdcGroup>, Error> {
    let interner = InstantInterner::default();
    // The slices of this partition at time t, by file id.
    let mut at: BTreeMap<String, BTreeMap<String, Slice>> = BTreeMap::new();
    let mut slices_at = |t: &str| -> Result<BTreeMap<String, Slice>, Error> {
        if let Some(s) = at.get(t) {
            return Ok(s.clone());
        }
        let time = InstantTime::parse(t)
            .ok_or_else(|| Error::Refused(format!("{t} is not an instant time")))?;
        let p = snap.plan(&ViewKey::AsOf(time), false)?;
        let choice = snap.resolve_partition(&p, files, &interner);
        let visible: Vec<VisibleFile> = choice
            .files
            .iter()
            .map(|c| VisibleFile {
                file: files[c.index as usize].clone(),
                writer: choice.writer(c).cloned(),
                slice: choice.slice(c).to_string(),
            })
            .collect();
        let by_group: BTreeMap<String, Slice> = slices_of_view(&visible)
            .into_iter()
            .map(|vs| (vs.slice.file_id.clone(), vs.slice))
            .collect();
        at.insert(t.to_string(), by_group.clone());
        Ok(by_group)
    };
    let mut groups: BTreeMap<String, Vec<CdcStep>> = BTreeMap::new();
    for w in plan.writes.iter().filter(|w| w.kind == WriteKind::Data) {
        let ids: BTreeSet<&str> = w
            .touched
            .iter()
            .chain(&w.replaced)
            .filter(|g| g.partition == partition)
            .map(|g| g.file_id.as_str())
            .collect();
        if ids.is_empty() {
            continue;
        }
        let t = w.requested.as_str();
        let before_t = hudifs_core::timefmt::minus_one_ms(t).ok_or_else(|| {
            Error::Refused(format!(
                "{t}: no time just before it (not a 17-digit instant)"
            ))
        })?;
        let before = slices_at(&before_t)?;
        let after = slices_at(t)?;
        for id in ids {
            let state = |m: &BTreeMap<String, Slice>, t: &str| {
                m.get(id).map(|s| GroupState {
                    slice: s.clone(),
                    t: t.to_string(),
                })
            };
            let cdc_logs = w
                .cdc_files
                .get(&FileGroupId::new(partition, id))
                .map(|files| {
                    files
                        .iter()
                        .filter_map(|(p, size)| {
                            Some(InputFile::new(TablePath::new(p).ok()?, Some(*size)))
                        })
                        .collect()
                })
                .unwrap_or_default();
            let step = CdcStep {
                instant: t.to_string(),
                before: state(&before, &before_t),
                after: state(&after, t),
                cdc_logs,
            };
            if step.before.is_some() || step.after.is_some() {
                groups.entry(id.to_string()).or_default().push(step);
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|(file_id, steps)| CdcGroup {
            partition: partition.to_string(),
            file_id,
            steps,
            schema: None,
        })
        .collect())
}

/// Whether the change feed of a window can be answered: the state just before its oldest data
/// write must still be there (a window reaching before the cleaner's retention is refused, as
/// `as_of/` of that time is, SEMANTICS §10.10).
pub fn cdc_check(snap: &Snapshot, plan: &Plan) -> Result<(), Error> {
    let Some(first) = plan
        .writes
        .iter()
        .filter(|w| w.kind == WriteKind::Data)
        .map(|w| &w.requested)
        .min()
    else {
        return Ok(());
    };
    let before = hudifs_core::timefmt::minus_one_ms(first)
        .and_then(|t| InstantTime::parse(&t))
        .ok_or_else(|| Error::Refused(format!("{first}: no time just before it")))?;
    snap.plan(&ViewKey::AsOf(before), false)
        .map(|_| ())
        .map_err(|e| {
            Error::Refused(format!(
                "the change feed needs the table as it was just before {first}: {e}"
            ))
        })
}
