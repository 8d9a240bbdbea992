//! The change feed of one file group over an incremental window (`cdc/<t1>..<t2>/`, SEMANTICS
//! §10.10): one change record per key per write of the window that changed it, in the shape of
//! Hudi's CDC query (RFC-51), inferred from the group's merged states.
//!
//! For each data write W of the window that touched the group, the group's state just before W
//! (the slice `as_of(W − 1 ms)` shows, its blocks up to then) and just after it (`as_of(W)`) are
//! merged in memory ([`crate::Prepared::batches`]) and compared by record key:
//! - a key only after, whose record carries W's commit time: `i` (after image);
//! - a key in both whose after record carries W's commit time: `u` (before and after images),
//!   even when the data is identical;
//! - a key only before: `d` (before image).
//!
//! A key whose after record carries another commit time did not change at W (under event-time
//! ordering a late record can lose). Writes that change no record (compactions, clusterings,
//! log compactions) are not steps: the caller gives data writes only.
//!
//! Output columns: `op` (`i`, `u`, `d`), `ts_ms` (W's commit time), `_hoodie_record_key`,
//! `_hoodie_partition_path`, and `before` / `after`: structs of the table's data columns (the
//! meta columns left out; the newest state's types), null where there is no image. Rows: steps
//! in commit order; in a step,
//! inserts and updates in the after state's order, then deletes in the before state's order.
//! The bytes are a pure function of the inputs, as for merged files.
//!
//! - `infer`: what changed between the states (or what the CDC log files say changed);
//! - `assemble`: the change records' images assembled and the feed written.

mod assemble;
mod infer;

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use hudifs_storage::Storage;

use crate::avro::AvroToArrow;
use crate::config::MergeConfig;
use crate::engine::{prepare, quick_inputs, Prepared, Slice};
use crate::error::{MergeError, Result};
use crate::logread::cdc_log_records;
use crate::materialise::{
    identity, read_counted, BlockVisibility, Identity, InputFile, Materialise, MergeOptions, Quick,
    Ready,
};
use crate::schema::ViewSchema;

/// The `created_by` of every change-feed file.
pub const CDC_CREATED_BY: &str = "hudifs-cdc version 2";

/// One state of a group: the slice a snapshot view shows for it and the view's time (blocks
/// up to it count).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupState {
    pub slice: Slice,
    pub t: String,
}

/// One write of the window that touched the group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdcStep {
    /// The write's requested time: the commit time of the records it wrote (`ts_ms`).
    pub instant: String,
    /// The group's state just before the write; `None` when the group did not exist.
    pub before: Option<GroupState>,
    /// Just after it; `None` when the write replaced the group (insert overwrite).
    pub after: Option<GroupState>,
    /// The CDC log files the write wrote for the group (tables with CDC enabled: its write
    /// stat's `cdcStats`): when readable, the change records come from them, their images
    /// completed from the states where the supplemental logging mode leaves them out.
    pub cdc_logs: Vec<InputFile>,
}

/// The change feed of one file group over a window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdcGroup {
    pub partition: String,
    pub file_id: String,
    /// In commit order; not empty.
    pub steps: Vec<CdcStep>,
    /// The window's table schema the images are written in (SEMANTICS §10.10), where the
    /// table's schema changed; `None`: the images take the states' own schemas.
    pub schema: Option<Arc<ViewSchema>>,
}

/// A step's missing state in a feed's claim.
const NO_STATE: &str = "-";

impl GroupState {
    /// The slice as this state is read (without a row filter), and which blocks count in it:
    /// those committed and not after the state's time.
    fn view<'a>(
        &'a self,
        committed: &'a dyn BlockVisibility,
    ) -> (Slice, impl Fn(&str) -> bool + Sync + 'a) {
        let mut slice = self.slice.clone();
        slice.keep_commits = None;
        let t = self.t.as_str();
        (slice, move |i: &str| i <= t && committed.is_visible(i))
    }

    /// This state's part of a feed's claim: its time and the instants of its counting blocks.
    fn claim_mark(&self, instants: &[String]) -> String {
        format!("{}:{}", self.t, instants.join(","))
    }
}

impl CdcGroup {
    /// `<fileId>_<first write>_<last write>.cdc.parquet`.
    pub fn file_name(&self) -> String {
        let first = self.steps.first().map_or("", |s| s.instant.as_str());
        let last = self.steps.last().map_or("", |s| s.instant.as_str());
        format!("{}_{first}_{last}.cdc.parquet", self.file_id)
    }

    /// `partition/fileId@first..last`, as messages name it (after "the change feed of").
    pub fn id(&self) -> String {
        let first = self.steps.first().map_or("", |s| s.instant.as_str());
        let last = self.steps.last().map_or("", |s| s.instant.as_str());
        if self.partition.is_empty() {
            format!("{}@{first}..{last}", self.file_id)
        } else {
            format!(
                "{}/{}@{first}..{last} (change feed)",
                self.partition, self.file_id
            )
        }
    }

    /// Names the schema the feed is written in (cache claims, registry keys): the window's,
    /// and under schema-on-read the mapping its states are read with.
    pub fn schema_id(&self) -> Option<String> {
        let states = self
            .steps
            .iter()
            .flat_map(|s| s.before.iter().chain(&s.after));
        states
            .filter_map(|st| st.slice.schema.as_ref())
            .map(|s| s.claim_id())
            .next()
            .or_else(|| self.schema.as_ref().map(|s| s.id.clone()))
    }

    /// Every table file read, once each (base files first in each state).
    pub fn inputs(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for s in &self.steps {
            let states = s.before.iter().chain(&s.after);
            let files = states
                .flat_map(|st| st.slice.base.iter().chain(&st.slice.logs))
                .chain(&s.cdc_logs);
            for f in files {
                let p = f.path.as_str().to_string();
                if !out.contains(&p) {
                    out.push(p);
                }
            }
        }
        out
    }
}

/// A group's states read (log files read, blocks chosen, base files opened), ready to be
/// compared and written.
pub struct PreparedCdc {
    cfg: MergeConfig,
    group: CdcGroup,
    /// Per step: before and after.
    states: Vec<(Option<Prepared>, Option<Prepared>)>,
    /// Per step: the records of its CDC log files, when it has readable ones.
    logged: Vec<Option<Vec<RecordBatch>>>,
    identities: Vec<Identity>,
    blocks: Vec<String>,
}

/// Read the states of every step of `group`. `committed` tells whether a block's instant is
/// committed (the caller's timeline); a block counts when it is and is not after its state's
/// time.
pub fn prepare_cdc(
    storage: &dyn Storage,
    cfg: &MergeConfig,
    group: &CdcGroup,
    committed: &dyn BlockVisibility,
    opts: &MergeOptions,
) -> Result<PreparedCdc> {
    let mut states = Vec::with_capacity(group.steps.len());
    let mut identities = Vec::new();
    let mut blocks = Vec::new();
    let mut prep = |st: &Option<GroupState>| -> Result<Option<Prepared>> {
        let Some(st) = st else {
            blocks.push(NO_STATE.to_string());
            return Ok(None);
        };
        let (slice, visible) = st.view(committed);
        let p = prepare(storage, cfg, &slice, &visible, opts)?;
        identities.extend(p.identities().iter().cloned());
        blocks.push(st.claim_mark(p.block_instants()));
        Ok(Some(p))
    };
    for s in &group.steps {
        let before = prep(&s.before)?;
        let after = prep(&s.after)?;
        states.push((before, after));
    }
    let mut logged = Vec::with_capacity(group.steps.len());
    let mut schemas = HashMap::new();
    let mut held = 0u64;
    for s in &group.steps {
        let records = read_cdc_logs(
            storage,
            &s.cdc_logs,
            &mut schemas,
            &mut identities,
            &mut held,
            opts,
        )?;
        // Schema-on-read: the images were written in the write's schema; their columns are
        // matched to the window's by field id, as the states' are.
        let states = s.before.iter().chain(&s.after);
        let mut e = states.filter_map(|st| st.slice.schema.as_ref()?.evolution.as_ref());
        let records = match (records, e.next()) {
            (Some(batches), Some(e)) => {
                let m = e.columns(&s.instant)?;
                let renamed = batches
                    .into_iter()
                    .map(|b| m.apply_images(b))
                    .collect::<std::result::Result<Vec<_>, String>>()
                    .map_err(|e| {
                        MergeError::corrupt(format!("the CDC logs of write {}: {e}", s.instant))
                    })?;
                Some(renamed)
            }
            (records, _) => records,
        };
        logged.push(records);
    }
    Ok(PreparedCdc {
        cfg: cfg.clone(),
        group: group.clone(),
        states,
        logged,
        identities,
        blocks,
    })
}

/// What a cached change feed of `group` is recognised by ([`prepare_cdc`]'s identities and
/// block instants), from the states' log block headers and the CDC logs' identities alone
/// (`engine::quick_inputs`); `None` where that cannot be done cheaply, and
/// [`prepare_cdc`] decides.
pub(crate) fn quick_cdc_inputs(
    storage: &dyn Storage,
    group: &CdcGroup,
    committed: &dyn BlockVisibility,
) -> Option<(Vec<Identity>, Vec<String>)> {
    let (mut identities, mut blocks) = (Vec::new(), Vec::new());
    for s in &group.steps {
        for st in [&s.before, &s.after] {
            let Some(st) = st else {
                blocks.push(NO_STATE.to_string());
                continue;
            };
            let (slice, visible) = st.view(committed);
            let (ids, instants, _) = quick_inputs(storage, &slice, &visible)?;
            identities.extend(ids);
            blocks.push(st.claim_mark(&instants));
        }
    }
    for s in &group.steps {
        for f in &s.cdc_logs {
            identities.push(identity(storage, f).ok()?);
        }
    }
    Some((identities, blocks))
}

/// The records of a step's CDC log files; `None` when it has none, or when one is gone (the
/// cleaner removed it: the step's changes are inferred from the states instead).
fn read_cdc_logs(
    storage: &dyn Storage,
    files: &[InputFile],
    schemas: &mut HashMap<String, Arc<AvroToArrow>>,
    identities: &mut Vec<Identity>,
    held: &mut u64,
    opts: &MergeOptions,
) -> Result<Option<Vec<RecordBatch>>> {
    if files.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for f in files {
        let name = storage.describe(&f.path);
        let id = match identity(storage, f) {
            Ok(id) => id,
            Err(e) if matches!(storage.stat(&f.path), Err(ref x) if x.kind() == std::io::ErrorKind::NotFound) =>
            {
                log::info!("{name}: CDC log gone ({e}); changes inferred from the merged states");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let data = read_counted(storage, f, &name, &id, held, opts.memory_cap, "CDC logs")?;
        identities.push(id);
        out.extend(cdc_log_records(&Bytes::from(data), &name, schemas)?);
    }
    Ok(Some(out))
}

/// A group's change feed, as the cache materialises it (the caller's visibility tells which
/// block instants are committed; each state adds its own time).
impl Materialise for CdcGroup {
    type Prepared = PreparedCdc;

    fn format(&self) -> &'static str {
        CDC_CREATED_BY
    }

    fn id(&self) -> String {
        CdcGroup::id(self)
    }

    fn describe(&self) -> String {
        format!("the change feed of {}", CdcGroup::id(self))
    }

    fn flight(&self) -> String {
        CdcGroup::id(self)
    }

    fn keep_commits(&self) -> Option<Vec<String>> {
        Some(self.steps.iter().map(|s| s.instant.clone()).collect())
    }

    fn schema_id(&self) -> Option<String> {
        CdcGroup::schema_id(self)
    }

    fn quick(&self, storage: &dyn Storage, committed: &dyn BlockVisibility) -> Option<Quick> {
        let (identities, blocks) = quick_cdc_inputs(storage, self, committed)?;
        Some(Quick::Inputs { identities, blocks })
    }

    fn prepare(
        &self,
        storage: &dyn Storage,
        cfg: &MergeConfig,
        committed: &dyn BlockVisibility,
        opts: &MergeOptions,
    ) -> Result<Option<PreparedCdc>> {
        prepare_cdc(storage, cfg, self, committed, opts).map(Some)
    }
}

impl PreparedCdc {
    pub fn group(&self) -> &CdcGroup {
        &self.group
    }
}

impl Ready for PreparedCdc {
    fn identities(&self) -> &[Identity] {
        &self.identities
    }

    /// Per state, its time and the instants of the blocks that count.
    fn block_instants(&self) -> &[String] {
        &self.blocks
    }

    /// Compare the states and write the change records to `out`; the bytes written.
    fn write_to<W: Write + Send>(self, out: W) -> Result<u64> {
        let id = self.group.id();
        MergeError::guarded(&id, || {
            let found = infer::changes(&self.cfg, &self.group, self.states, self.logged)?;
            assemble::write_feed(&self.group, found, out)
        })
    }
}
