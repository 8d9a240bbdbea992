//! Fencing: which metadata-table writes count (Java's
//! `HoodieTableMetadataUtil.getValidInstantTimestamps`, used by `HoodieBackedTableMetadata`).
//!
//! A writer updates the MDT before it completes its data instant, so the MDT can hold blocks of
//! a data write that failed, is still in flight, or was rolled back. A block counts only if its
//! instant is
//! - the requested time of a completed instant of the data timeline (any action: cleans and
//!   rollbacks update the MDT too);
//! - an instant rolled back by a completed rollback or restore of the data table (the
//!   rollback's own MDT update, which deletes the files, needs the listing it corrects);
//! - one of the MDT's own completed bookkeeping instants: its initialisation (`00000000000000…`,
//!   and version 6's suffixed instants such as `<instant>010`), log compactions, rollbacks and
//!   restores.
//!
//! And the other way round: a completed data instant with no MDT instant of its own, newer than
//! the MDT's initialisation, is one the MDT is *behind* on; the partitions it touched are listed
//! from storage.

use std::cell::Cell;
use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;

use serde_json::Value;

use super::{err, MdtError};
use crate::rules::Context;
use crate::table::Layout;
use crate::timeline::{Action, Instant, InstantMetadata, Timeline, TimelineDelta};

/// The start of the MDT's bootstrap instants (`HoodieTimeline.INIT_INSTANT_TS` and Java's
/// `SOLO_COMMIT_TIMESTAMP`): fourteen zeros.
const SOLO_PREFIX: &str = "00000000000000";
/// The instant that initialises the `files` partition on layout 2.
const FILES_INIT_V2: &str = "00000000000000000";
/// The suffix of the instant that initialises the `files` partition on layout 1.
const FILES_INIT_SUFFIX_V1: &str = "010";
/// The length of a millisecond instant; version 6 MDT instants with an operation suffix are
/// longer.
const INSTANT_LEN: usize = 17;

pub struct Fence {
    /// Instants whose MDT blocks count, but for those rolled back (`rolled_back`).
    valid: HashSet<String>,
    /// The data table's completed rollbacks and restores, and what reads their metadata.
    rollbacks: Vec<Arc<Instant>>,
    meta: InstantMetadata,
    /// The instants they rolled back: read the first time a block is not otherwise trusted
    /// (a mount whose MDT holds no such block reads no rollback metadata).
    rolled_back: std::cell::OnceCell<HashSet<String>>,
    /// Completed data instants that change files (so must have left a `files` block).
    changes_files: HashSet<String>,
    /// Completed MDT instants that stand for no data instant (bookkeeping).
    mdt_services: HashSet<String>,
    /// Every completed MDT instant's requested time.
    mdt_completed: HashSet<String>,
    /// Data instants completed up to here (by completion time on layout 2, requested time on
    /// layout 1) are covered by the MDT's initialisation.
    covered_until: Option<String>,
    /// Blocks left out so far.
    fenced: Cell<usize>,
}

/// Whether a completed data instant of `action` changes files. Savepoints change none; an
/// indexing instant's MDT counterpart builds other MDT partitions (its `files` side is their
/// initialisation); schema commits change no file.
fn changes_files_action(action: Action) -> bool {
    !matches!(
        action,
        Action::Savepoint | Action::Indexing | Action::SchemaCommit
    )
}

/// Whether an MDT instant stands for no data instant.
fn is_bookkeeping(inst: &Instant) -> bool {
    let t = inst.requested.as_str();
    t.starts_with(SOLO_PREFIX)
        || t.len() > INSTANT_LEN
        || matches!(
            inst.action,
            Action::LogCompaction | Action::Rollback | Action::Restore
        )
}

/// The instants a completed rollback or restore rolled back (`commitsRollback`,
/// `instantsRollback`, `instantsToRollback`, and a restore's nested rollbacks).
fn rolled_back(v: &Value, out: &mut HashSet<String>) {
    let times = |arr: Option<&Value>, out: &mut HashSet<String>| {
        for x in arr.and_then(Value::as_array).into_iter().flatten() {
            match x {
                Value::String(s) => {
                    out.insert(s.clone());
                }
                Value::Object(o) => {
                    if let Some(t) = o.get("commitTime").and_then(Value::as_str) {
                        out.insert(t.to_string());
                    }
                }
                _ => {}
            }
        }
    };
    times(v.get("commitsRollback"), out);
    times(v.get("instantsRollback"), out);
    times(v.get("instantsToRollback"), out);
    if let Some(nested) = v.get("hoodieRestoreMetadata").and_then(Value::as_object) {
        for list in nested.values() {
            for rb in list.as_array().into_iter().flatten() {
                rolled_back(rb, out);
            }
        }
    }
}

impl Fence {
    pub fn new(data: &Context, meta: &InstantMetadata, mdt: &Timeline) -> Fence {
        let mut valid = HashSet::new();
        let mut changes_files = HashSet::new();
        let mut rollbacks = Vec::new();
        for inst in data.timeline.instants().filter(|i| i.is_completed()) {
            valid.insert(inst.requested.as_str().to_string());
            if changes_files_action(inst.action) {
                changes_files.insert(inst.requested.as_str().to_string());
            }
            if matches!(inst.action, Action::Rollback | Action::Restore) {
                rollbacks.push(inst.clone());
            }
        }
        let mut mdt_services = HashSet::new();
        let mut mdt_completed = HashSet::new();
        let mut covered_until: Option<String> = None;
        for inst in mdt.instants().filter(|i| i.is_completed()) {
            let t = inst.requested.as_str();
            mdt_completed.insert(t.to_string());
            if is_bookkeeping(inst) {
                mdt_services.insert(t.to_string());
                valid.insert(t.to_string());
            }
            if inst.action == Action::DeltaCommit || inst.action == Action::Commit {
                // The initialisation of the files partition lists the table as it was: on
                // layout 2 the instant `00000000000000000` (other MDT partitions take `…001`,
                // `…002`, ...), on layout 1 `<latest data instant>010` (other partitions
                // `011`, ...; `00000000000000010` on a table without instants).
                let init = match mdt.layout {
                    Layout::V2 if t == FILES_INIT_V2 => {
                        inst.completion.as_ref().map(|c| c.as_str().to_string())
                    }
                    Layout::V1
                        if t.len() == INSTANT_LEN + 3 && t.ends_with(FILES_INIT_SUFFIX_V1) =>
                    {
                        Some(t[..INSTANT_LEN].to_string())
                    }
                    _ => None,
                };
                if let Some(i) = init {
                    if covered_until.as_ref().is_none_or(|c| &i > c) {
                        covered_until = Some(i);
                    }
                }
            }
        }
        Fence {
            valid,
            rollbacks,
            meta: meta.clone(),
            rolled_back: std::cell::OnceCell::new(),
            changes_files,
            mdt_services,
            mdt_completed,
            covered_until,
            fenced: Cell::new(0),
        }
    }

    /// Whether `t` is one of the MDT's own bookkeeping instants.
    pub fn is_mdt_service(&self, t: &str) -> bool {
        self.mdt_services.contains(t)
    }

    /// Whether `t` is a completed data instant that changes files: its MDT write must have
    /// left a block in the `files` partition.
    pub fn changes_files(&self, t: &str) -> bool {
        self.changes_files.contains(t)
    }

    /// Whether a block of instant `t` counts (counting those that do not).
    pub fn admits(&self, t: &str) -> bool {
        let ok = self.valid.contains(t) || self.rolled_back().contains(t);
        if !ok {
            self.fenced.set(self.fenced.get() + 1);
            log::debug!("metadata table: a block of instant {t} is fenced out");
        }
        ok
    }

    /// The instants the data table's completed rollbacks and restores rolled back.
    fn rolled_back(&self) -> &HashSet<String> {
        self.rolled_back.get_or_init(|| {
            let mut out = HashSet::new();
            for inst in &self.rollbacks {
                match self.meta.json(inst) {
                    Ok(v) => rolled_back(&v, &mut out),
                    Err(e) => log::debug!("metadata table fencing: {e}"),
                }
            }
            out
        })
    }

    /// How many blocks [`Fence::admits`] refused.
    pub fn fenced(&self) -> usize {
        self.fenced.get()
    }

    /// Whether `inst` is a layout 2 rollback or restore with nothing to do in the MDT: Hudi 1.x
    /// rolls an MDT deltacommit back under the data rollback's time, and does nothing when the
    /// instants it rolled back never completed an MDT write (whose files the MDT then never
    /// listed).
    fn rollback_without_mdt_write(
        &self,
        inst: &Instant,
        layout: Layout,
        meta: &InstantMetadata,
    ) -> bool {
        if layout != Layout::V2 || !matches!(inst.action, Action::Rollback | Action::Restore) {
            return false;
        }
        let Ok(v) = meta.json(inst) else {
            return false;
        };
        let mut targets = HashSet::new();
        rolled_back(&v, &mut targets);
        !targets.is_empty() && !targets.iter().any(|t| self.mdt_completed.contains(t))
    }

    /// The partitions touched by completed data instants the MDT does not cover.
    pub fn behind(
        &self,
        data: &Context,
        meta: &InstantMetadata,
    ) -> Result<BTreeSet<String>, MdtError> {
        let layout = data.timeline.layout;
        let uncovered: Vec<Arc<Instant>> = data
            .timeline
            .instants()
            .filter(|i| i.is_completed() && changes_files_action(i.action))
            .filter(|i| !self.mdt_completed.contains(i.requested.as_str()))
            .filter(|i| !self.rollback_without_mdt_write(i, layout, meta))
            .filter(|i| {
                let at = match layout {
                    Layout::V2 => i.completion.as_ref().unwrap_or(&i.requested).as_str(),
                    Layout::V1 => i.requested.as_str(),
                };
                self.covered_until.as_deref().is_none_or(|c| at > c)
            })
            .cloned()
            .collect();
        if uncovered.is_empty() {
            return Ok(BTreeSet::new());
        }
        let names: Vec<&str> = uncovered.iter().map(|i| i.requested.as_str()).collect();
        log::info!(
            "metadata table is behind the data timeline on {} instant(s) ({}{}); their partitions are listed from storage",
            names.len(),
            names.iter().take(3).copied().collect::<Vec<_>>().join(", "),
            if names.len() > 3 { ", ..." } else { "" }
        );
        let delta = TimelineDelta {
            removed: Vec::new(),
            added: uncovered,
        };
        crate::rules::touched_partitions(data, meta, &delta).ok_or_else(|| {
            err("the partitions that data instants the metadata table is behind on touched cannot be told")
        })
    }
}
