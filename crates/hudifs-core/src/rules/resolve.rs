//! Choosing the files of one partition for a planned view (SEMANTICS.md §3): per file group
//! the newest usable slice at or before the view's time, a pending compaction's slice merged
//! into the one before it, replaced groups hidden, strict logs, duplicate base files.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Bound::{Excluded, Included, Unbounded};
use std::sync::Mutex;

use super::{Context, Plan};
use crate::ids::{FileGroupId, FileRef};
use crate::instant_time::InstantTime;
use crate::listing::DataFile;
use crate::timeline::InstantMetadata;

/// A file a view shows in one partition: its index in the partition's listing, and indexes into
/// [`PartitionChoice::instants`] for the instant that wrote it and its slice's base instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chosen {
    pub index: u32,
    /// `u32::MAX` when the writer is not known (a log of an archived writer).
    pub writer: u32,
    pub slice: u32,
}

/// The files a view shows in one partition, as indexes into the partition's listing.
#[derive(Debug, Clone, Default)]
pub struct PartitionChoice {
    /// Sorted by listing index (the listing is sorted by name).
    pub files: Vec<Chosen>,
    pub instants: Vec<InstantTime>,
}

impl PartitionChoice {
    pub fn writer(&self, c: &Chosen) -> Option<&InstantTime> {
        self.instants.get(c.writer as usize)
    }
    pub fn slice(&self, c: &Chosen) -> &str {
        self.instants
            .get(c.slice as usize)
            .map(|s| s.as_str())
            .unwrap_or("")
    }
}

/// One allocation per distinct instant for everything that resolves partitions with it: every
/// partition choice of every snapshot shares it (a partition written by one instant per file
/// would otherwise hold a copy of each instant per file, about 50 bytes a file). Instants no
/// choice holds any more are dropped whenever the set has doubled since the last sweep, so it
/// follows the views, not the history. Owned by the caller (the mount, or one `hudifs ls`).
#[derive(Default)]
pub struct InstantInterner {
    shared: Mutex<Interned>,
}

#[derive(Default)]
struct Interned {
    set: HashSet<InstantTime, foldhash::fast::RandomState>,
    swept_at: usize,
}

impl InstantInterner {
    /// The shared copy of `s`.
    pub fn intern(&self, s: &str) -> InstantTime {
        let mut shared = self.shared.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = shared.set.get(s) {
            return a.clone();
        }
        if shared.set.len() >= 2 * shared.swept_at.max(1024) {
            shared.set.retain(|a| a.is_shared());
            shared.swept_at = shared.set.len();
        }
        let a = InstantTime::parse(s).unwrap_or_else(InstantTime::earliest);
        shared.set.insert(a.clone());
        a
    }
}

/// Interns instants into a [`PartitionChoice`]'s table while it is built (a partition can hold
/// one instant per file: a linear search made resolving it quadratic).
struct ChoiceTable<'i, 'f> {
    interner: &'i InstantInterner,
    ids: HashMap<&'f str, u32, foldhash::fast::RandomState>,
}

impl<'f> ChoiceTable<'_, 'f> {
    fn id(&mut self, out: &mut PartitionChoice, s: &'f str) -> u32 {
        if let Some(id) = self.ids.get(s) {
            return *id;
        }
        let id = out.instants.len() as u32;
        out.instants.push(self.interner.intern(s));
        self.ids.insert(s, id);
        id
    }
}

/// Choose the files of one partition for a planned view. `files` is the partition's listing,
/// sorted by name.
pub fn resolve_partition<F: std::borrow::Borrow<DataFile>>(
    ctx: &Context,
    meta: &InstantMetadata,
    plan: &Plan,
    files: &[F],
    interner: &InstantInterner,
) -> PartitionChoice {
    resolve_grouped(ctx, meta, plan, files, interner, |files| {
        let mut groups: BTreeMap<&str, Vec<Listed>> = BTreeMap::new();
        for (i, f) in files.iter().enumerate() {
            let f: &DataFile = f.borrow();
            groups.entry(f.file_id()).or_default().push((i as u32, f));
        }
        groups
    })
}

/// What a view shows of the file groups `group` sorts out of one partition's listing (each
/// group's files in listing order): nothing where the view has no time or cannot have files in
/// the partition.
fn resolve_grouped<'f, F: std::borrow::Borrow<DataFile>>(
    ctx: &Context,
    meta: &InstantMetadata,
    plan: &Plan,
    files: &'f [F],
    interner: &InstantInterner,
    group: impl FnOnce(&'f [F]) -> BTreeMap<&'f str, Vec<Listed<'f>>>,
) -> PartitionChoice {
    let (Some(t), Some(first)) = (plan.t.as_deref(), files.first().map(|f| f.borrow())) else {
        return PartitionChoice::default();
    };
    if !plan.may_list(&first.partition) {
        return PartitionChoice::default();
    }
    choose(ctx, meta, plan, t, &first.partition, group(files), interner)
}

/// Choose, for a planned view, the files of only the file groups `fids` of one partition's
/// listing (`files`, sorted by name): what [`resolve_partition`] chooses in those groups, found
/// by name (a group's base files are named `<fileId>_…`, its logs `.<fileId>_…`) without a look
/// at the partition's other files. For a caller that knows which groups changed between two
/// views (a Delta version is the version before plus the groups its write touched).
pub fn resolve_groups<F: std::borrow::Borrow<DataFile>>(
    ctx: &Context,
    meta: &InstantMetadata,
    plan: &Plan,
    files: &[F],
    fids: &BTreeSet<&str>,
    interner: &InstantInterner,
) -> PartitionChoice {
    resolve_grouped(ctx, meta, plan, files, interner, |files| {
        // Log names start with a dot: where no name does, no group has a log to look for.
        let dot = files.partition_point(|f| f.borrow().name() < ".");
        let logs = files
            .get(dot)
            .is_some_and(|f| f.borrow().name().starts_with('.'));
        let mut groups: BTreeMap<&str, Vec<Listed>> = BTreeMap::new();
        for fid in fids {
            let log_prefix = logs.then(|| format!(".{fid}"));
            for prefix in std::iter::once(fid.to_string()).chain(log_prefix) {
                let start = files.partition_point(|f| f.borrow().name() < prefix.as_str());
                for (i, f) in files.iter().enumerate().skip(start) {
                    let f: &DataFile = f.borrow();
                    if !f.name().starts_with(prefix.as_str()) {
                        break;
                    }
                    if f.file_id() == *fid {
                        groups.entry(f.file_id()).or_default().push((i as u32, f));
                    }
                }
            }
        }
        for g in groups.values_mut() {
            g.sort_by_key(|(i, _)| *i);
        }
        groups
    })
}

/// The files a view shows of the file groups `groups` (each group's files in listing order) of
/// one partition: [`resolve_group`] on each, as a [`PartitionChoice`].
fn choose<'f>(
    ctx: &'f Context,
    meta: &InstantMetadata,
    plan: &'f Plan,
    t: &'f str,
    partition: &str,
    groups: BTreeMap<&'f str, Vec<Listed<'f>>>,
    interner: &InstantInterner,
) -> PartitionChoice {
    let mut out = PartitionChoice::default();
    let mut chosen: Vec<Picked> = Vec::new();
    // Most tables have no replaced groups, pending compactions or group filter: their groups
    // need no id (two strings each).
    let group_facts = !ctx.replaced_by.is_empty()
        || !plan.archived_replaced.is_empty()
        || plan.only.is_some()
        || !ctx.pending_compaction_groups.is_empty();
    for (fid, gfiles) in groups {
        let g = group_facts.then(|| FileGroupId::new(partition, fid));
        if let Some(g) = &g {
            if ctx.replaced_at(g, t)
                || plan.archived_replaced.contains(g)
                || plan.only.as_ref().is_some_and(|o| !o.contains(g))
            {
                continue;
            }
        }
        resolve_group(ctx, meta, plan, g.as_ref(), &gfiles, t, &mut chosen);
    }
    chosen.sort_by_key(|c| c.index);
    let mut table = ChoiceTable {
        interner,
        ids: HashMap::default(),
    };
    // Kept as long as the view: no room to grow into (a million files' worth adds up).
    out.files.reserve_exact(chosen.len());
    for c in chosen {
        let writer = match c.writer {
            Some(w) => table.id(&mut out, w),
            None => u32::MAX,
        };
        let slice = table.id(&mut out, c.slice);
        out.files.push(Chosen {
            index: c.index,
            writer,
            slice,
        });
    }
    out.instants.shrink_to_fit();
    out
}

/// A file chosen for the view: listing index, writer (where known), slice base instant.
struct Picked<'f> {
    index: u32,
    writer: Option<&'f str>,
    slice: &'f str,
}

/// A file of the partition's listing and its index there.
type Listed<'f> = (u32, &'f DataFile);

#[derive(Default)]
struct Slice<'f> {
    base: Option<Listed<'f>>,
    logs: Vec<Listed<'f>>,
    /// Whether the slice's instant is known committed (`Timeline::is_committed`).
    committed: bool,
}

/// A file placed in a slice: the file and the slice's base instant.
type Placed<'f> = (Listed<'f>, &'f str);

/// The rules for one file group: slices (base files of committed instants, pending
/// compactions, logs by name instant or completion time), the usable slice picked at `t`, the
/// pending-compaction merge, strict logs. `g` is the group's id, `None` when the table has no
/// fact about groups (no replaced group, pending compaction or group filter).
fn resolve_group<'f>(
    ctx: &'f Context,
    meta: &InstantMetadata,
    plan: &'f Plan,
    g: Option<&FileGroupId>,
    files: &[Listed<'f>],
    t: &'f str,
    out: &mut Vec<Picked<'f>>,
) {
    let tl = &ctx.timeline;
    let completion_times = ctx.cfg.has_completion_times();
    let mut slices: BTreeMap<&'f str, Slice<'f>> = BTreeMap::new();

    // Base files of committed instants; duplicates of one instant resolved by metadata path.
    let mut bases: BTreeMap<&'f str, Vec<Listed<'f>>> = BTreeMap::new();
    for &(i, f) in files.iter().filter(|(_, f)| f.is_base()) {
        if tl.is_committed(f.instant()) {
            bases.entry(f.instant()).or_default().push((i, f));
        }
    }
    for (instant, candidates) in bases {
        let chosen = if candidates.len() == 1 {
            Some(candidates[0])
        } else {
            pick_duplicate(ctx, meta, instant, &candidates)
        };
        if let Some(b) = chosen {
            let s = slices.entry(instant).or_default();
            s.base = Some(b);
            s.committed = true;
        }
    }
    // Pending compactions covering this group open an (empty) slice.
    let pending_here: BTreeSet<&'f str> = ctx
        .pending_compaction_groups
        .iter()
        .filter(|(_, groups)| g.is_some_and(|g| groups.contains(g)))
        .map(|(c, _)| c.as_str())
        .collect();
    for c in &pending_here {
        slices.entry(c).or_default();
    }
    // Log files.
    let mut logs: Vec<Listed<'f>> = files
        .iter()
        .filter(|(_, f)| !f.is_base())
        .copied()
        .collect();
    if completion_times {
        logs.retain(|(_, l)| tl.is_committed(l.instant()));
        // Each log's completion looked up once, not at every comparison (stable, as before).
        logs.sort_by_cached_key(|(_, f)| {
            (tl.completion(f.instant()), f.log_version(), f.write_token())
        });
        for l in logs {
            let c = tl.completion(l.1.instant());
            let slice_key = slices
                .range::<&str, _>((Unbounded, Included(c)))
                .next_back()
                .map(|(k, _)| *k);
            match slice_key {
                Some(k) => slices.entry(k).or_default().logs.push(l),
                None => {
                    // A committed log's own instant.
                    let s = slices.entry(l.1.instant()).or_default();
                    s.logs.push(l);
                    s.committed = true;
                }
            }
        }
    } else {
        for l in logs {
            slices.entry(l.1.instant()).or_default().logs.push(l);
        }
    }

    // Usable slices and the pick.
    let Some(latest) = tl.latest.as_deref() else {
        return;
    };
    // A slice known committed (its base's or a committed log's instant) is not looked up again.
    let usable = |k: &str, s: &Slice| {
        k <= latest
            && (s.committed
                || tl.completed.contains_key(k)
                || pending_here.contains(k)
                || tl.is_archived(k))
    };
    let Some(picked) = slices
        .range::<&str, _>((Unbounded, Included(t)))
        .rev()
        .find(|(k, s)| usable(k, s))
        .map(|(k, _)| *k)
    else {
        return;
    };
    // A still-pending compaction's slice is merged into the previous usable slice.
    let (base, slice_logs): (Option<Placed>, Vec<Placed>) = if pending_here.contains(picked) {
        let previous = slices
            .range::<&str, _>((Unbounded, Excluded(picked)))
            .rev()
            .find(|(k, s)| usable(k, s))
            .map(|(k, _)| *k);
        let mut logs = Vec::new();
        let mut base = None;
        if let Some(p) = previous {
            base = slices[p].base.map(|b| (b, p));
            logs.extend(slices[p].logs.iter().map(|l| (*l, p)));
        }
        logs.extend(slices[picked].logs.iter().map(|l| (*l, picked)));
        (base, logs)
    } else {
        let s = &slices[picked];
        (
            s.base.map(|b| (b, picked)),
            s.logs.iter().map(|l| (*l, picked)).collect(),
        )
    };

    if let Some(((index, b), k)) = base {
        out.push(Picked {
            index,
            writer: Some(b.instant()),
            slice: k,
        });
    }
    if plan.read_optimized {
        return;
    }
    // Strict logs.
    for ((index, l), k) in slice_logs {
        let writer = if completion_times && ctx.cfg.has_pre_upgrade_logs() {
            upgraded_log_writer(ctx, plan, l, t)
        } else if completion_times {
            (l.instant() <= t).then_some(Some(l.instant()))
        } else {
            v6_log_writer(ctx, plan, l, t)
        };
        if let Some(w) = writer {
            out.push(Picked {
                index,
                writer: w,
                slice: k,
            });
        }
    }
}

/// Two committed base files of one (fileId, instant): keep the one the commit names as `path`;
/// otherwise hide both (SEMANTICS.md §3.8).
fn pick_duplicate<'f>(
    ctx: &Context,
    meta: &InstantMetadata,
    instant: &str,
    candidates: &[Listed<'f>],
) -> Option<Listed<'f>> {
    let named: Option<BTreeSet<String>> = ctx
        .timeline
        .completed
        .get(instant)
        .and_then(|i| meta.commit(i).ok())
        .map(|m| {
            m.write_stats
                .iter()
                .filter_map(|s| s.file_name().map(str::to_string))
                .collect()
        });
    let hit: Vec<&Listed> = match &named {
        Some(n) => candidates
            .iter()
            .filter(|c| n.contains(c.1.name()))
            .collect(),
        None => Vec::new(),
    };
    if hit.len() == 1 {
        return Some(*hit[0]);
    }
    log::warn!(
        "partition {:?}: {} base files of file group {} at instant {instant} and the commit \
         metadata does not tell which one it wrote; all hidden",
        &*candidates[0].1.partition,
        candidates.len(),
        candidates[0].1.file_id(),
    );
    None
}

/// The writer of log `l` of a table upgraded from 0.x (SEMANTICS.md §8), if committed and at or
/// before `t`: the completed write whose metadata names it (a pre-upgrade log's name carries
/// its slice's base instant, a later log's its deltacommit, which names it too); `None` for a
/// log no write names, as a failed write's (or a rollback's command block). Only where the
/// names cannot be known (the writer archived and the archive not read for this view, or
/// unreadable metadata) does its name's instant stand for the writer.
fn upgraded_log_writer<'f>(
    ctx: &'f Context,
    plan: &'f Plan,
    l: &'f DataFile,
    t: &str,
) -> Option<Option<&'f str>> {
    let key = FileRef::new(&l.partition, l.name());
    let archived = plan.archive.as_ref();
    let named = ctx.log_writers.get(&key).map(|w| &w[..]).or_else(|| {
        archived
            .and_then(|a| a.log_writers.get(&key))
            .map(|w| &w[..])
    });
    if let Some(writers) = named {
        return writers
            .iter()
            .find(|w| w.as_str() <= t)
            .map(|w| Some(w.as_str()));
    }
    let unknowable = (archived.is_none() && ctx.timeline.is_archived(l.instant()))
        || ctx
            .unreadable_writes
            .range::<_, str>((Included(l.instant()), Unbounded))
            .next()
            .is_some();
    (unknowable && l.instant() <= t).then_some(Some(l.instant()))
}

/// The v6 strict log rule (SEMANTICS.md §3.7): the instant that wrote log `l`, if it is
/// committed and at or before `t`; `Some(None)` for a log of an archived (hence committed)
/// writer the active timeline cannot name; `None` to hide the log.
fn v6_log_writer<'f>(
    ctx: &'f Context,
    plan: &'f Plan,
    l: &DataFile,
    t: &str,
) -> Option<Option<&'f str>> {
    let key = FileRef::new(&l.partition, l.name());
    // (a) attributed by a completed write's `path` (an archived one when `t` is archived).
    if let Some(writers) = ctx.log_writers.get(&key) {
        return writers
            .iter()
            .find(|w| w.as_str() <= t)
            .map(|w| Some(w.as_str()));
    }
    // ... by an archived write's `path`, where the archive was read for this view.
    if let Some(a) = plan.archive.as_ref() {
        let archived = a.log_writers.get(&key);
        if archived.is_some() || ctx.needs_archive(t) {
            return archived?
                .iter()
                .find(|w| w.as_str() <= t)
                .map(|w| Some(w.as_str()));
        }
    } else if ctx.needs_archive(t) {
        return None;
    }
    // (b) an archived writer.
    let group = FileGroupId::new(&l.partition, l.file_id());
    let archived_writer_possible = !ctx.rollback_logs.contains_key(&key)
        && !plan
            .archive
            .as_ref()
            .is_some_and(|a| a.rollback_logs.contains(&key))
        && !ctx.pending_delta_unknown
        && !ctx.pending_delta_groups.contains(&group)
        && ctx.unreadable_rollbacks.is_empty()
        && ctx
            .unreadable_writes
            .range::<_, str>((Included(l.instant()), Unbounded))
            .next()
            .is_none()
        && ctx.timeline.active_start.as_deref().is_some_and(|s| t >= s)
        // The writer of an unattributed log must precede the active timeline; its slice does too.
        && ctx.timeline.is_archived(l.instant());
    archived_writer_possible.then_some(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_are_shared_and_swept_when_no_choice_holds_them() {
        let i = InstantInterner::default();
        let a = i.intern("20990101000000000");
        let b = i.intern("20990101000000000");
        assert!(a.shares_with(&b));
        drop((a, b));
        let kept = i.intern("20970101000000000");
        // Enough distinct instants, held by no one, to force sweeps.
        for n in 0..10_000 {
            drop(i.intern(&format!("2098{n:013}")));
        }
        let again = i.intern("20970101000000000");
        assert!(kept.shares_with(&again), "a held instant survives sweeps");
        assert!(
            i.shared.lock().unwrap().set.len() < 5_000,
            "sweeps drop the unheld"
        );
    }
}
