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

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::cast::AsArray;
use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch, StructArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use bytes::Bytes;
use hudifs_storage::Storage;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};

use crate::avro::AvroToArrow;
use crate::chunks::Counting;
use crate::config::MergeConfig;
use crate::engine::{
    identity, prepare, quick_inputs, read_counted, Identity, InputFile, MergeOptions, Prepared,
    Slice,
};
use crate::error::{MergeError, Result};
use crate::logread::cdc_log_records;
use crate::merger::built_keys;
use crate::schema::{conform_batch, output_schema};

/// The `created_by` of every change-feed file.
pub const CDC_CREATED_BY: &str = "hudifs-cdc version 1";

/// Hudi's meta columns: not part of the before/after images.
const META: [&str; 5] = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
];

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
}

/// A step's missing state in a feed's claim.
const NO_STATE: &str = "-";

impl GroupState {
    /// The slice as this state is read (without a row filter), and which blocks count in it:
    /// those committed and not after the state's time.
    fn view<'a>(
        &'a self,
        committed: &'a (dyn Fn(&str) -> bool + Sync),
    ) -> (Slice, impl Fn(&str) -> bool + Sync + 'a) {
        let mut slice = self.slice.clone();
        slice.keep_commits = None;
        let t = self.t.as_str();
        (slice, move |i: &str| i <= t && committed(i))
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
    committed: &(dyn Fn(&str) -> bool + Sync),
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
        logged.push(read_cdc_logs(
            storage,
            &s.cdc_logs,
            &mut schemas,
            &mut identities,
            &mut held,
            opts,
        )?);
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
    committed: &(dyn Fn(&str) -> bool + Sync),
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

/// The hasher of record-key maps: keys come from the data, so seeded; fast on short keys.
type KeyHash = foldhash::fast::RandomState;

/// Record key → place (batch, row) in a state.
type Places<'a> = HashMap<&'a str, (usize, usize), KeyHash>;

/// One state merged in memory: its batches, and each record key's position.
struct State {
    batches: Vec<RecordBatch>,
    /// Per batch, `_hoodie_record_key` as strings (a state of log images may have none).
    keys: Vec<Option<ArrayRef>>,
    /// Per batch, `_hoodie_commit_time` and `_hoodie_partition_path` as strings (cast once).
    commit: Vec<Option<ArrayRef>>,
    partition: Vec<Option<ArrayRef>>,
}

impl State {
    fn of(batches: Vec<RecordBatch>, keyed: bool) -> Result<State> {
        let (mut keys, mut commit, mut partition) = (Vec::new(), Vec::new(), Vec::new());
        for batch in &batches {
            let key = string_column(batch, "_hoodie_record_key")?;
            if keyed && key.is_none() {
                return Err(MergeError::unsupported(
                    "no _hoodie_record_key: the change feed needs Hudi's meta fields",
                ));
            }
            keys.push(key);
            commit.push(string_column(batch, "_hoodie_commit_time")?);
            partition.push(string_column(batch, "_hoodie_partition_path")?);
        }
        Ok(State {
            batches,
            keys,
            commit,
            partition,
        })
    }

    /// Every row's record key with its place (batch, row), in order.
    fn rows(&self) -> impl Iterator<Item = (&str, (usize, usize))> + '_ {
        self.keys.iter().enumerate().flat_map(|(b, k)| {
            let a = k.as_ref().map(|k| k.as_string::<i32>());
            (0..a.map_or(0, |a| a.len())).filter_map(move |r| {
                let a = a?;
                Some((if a.is_valid(r) { a.value(r) } else { "" }, (b, r)))
            })
        })
    }

    /// Rows in all.
    fn len(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// The first place of each record key (borrowing the key columns).
    fn by_key(&self) -> Places<'_> {
        let mut m = Places::with_capacity_and_hasher(self.len(), KeyHash::default());
        for (k, at) in self.rows() {
            m.entry(k).or_insert(at);
        }
        m
    }

    /// The string at row `r` of batch `b` of one of the cast columns.
    fn text(col: &[Option<ArrayRef>], b: usize, r: usize) -> Option<&str> {
        let a = col.get(b)?.as_ref()?.as_string::<i32>();
        (r < a.len() && a.is_valid(r)).then(|| a.value(r))
    }
}

/// The string at row `r` of a string column.
fn text_at(col: &ArrayRef, r: usize) -> Option<&str> {
    let a = col.as_string::<i32>();
    (r < a.len() && a.is_valid(r)).then(|| a.value(r))
}

fn string_column(batch: &RecordBatch, name: &str) -> Result<Option<ArrayRef>> {
    let Ok(i) = batch.schema().index_of(name) else {
        return Ok(None);
    };
    arrow_cast::cast(batch.column(i), &DataType::Utf8)
        .map(Some)
        .map_err(|e| MergeError::unsupported(format!("{name} is not a string: {e}")))
}

fn state(p: Prepared) -> Result<(SchemaRef, State)> {
    let (schema, batches, _) = p.batches()?;
    Ok((schema, State::of(batches, true)?))
}

/// Where an image is: state index, batch, row.
type At = (usize, usize, usize);

/// One change record: the op, the step, and where its images are.
struct Change {
    op: &'static str,
    ts: usize,
    key: String,
    partition: Option<String>,
    before: Option<At>,
    after: Option<At>,
}

/// The partition path of an image's row, where its state has the column.
fn partition_at(states: &[State], at: Option<At>) -> Result<Option<String>> {
    let Some((s, b, r)) = at else { return Ok(None) };
    Ok(states
        .get(s)
        .and_then(|st| State::text(&st.partition, b, r))
        .map(String::from))
}

/// The change records of step `ts` inferred from its states before (`b`) and after (`a`).
fn infer(
    states: &[State],
    b: Option<usize>,
    a: Option<usize>,
    instant: &str,
    ts: usize,
    changes: &mut Vec<Change>,
) -> Result<()> {
    let before_keys = b.map(|b| states[b].by_key()).unwrap_or_default();
    let mut seen: std::collections::HashSet<&str, KeyHash> =
        std::collections::HashSet::with_capacity_and_hasher(
            a.map_or(0, |a| states[a].len()),
            KeyHash::default(),
        );
    if let Some(a) = a {
        let st = &states[a];
        for (k, (bi, r)) in st.rows() {
            // One record per key per write: of duplicate keys (a base file can hold them), the
            // first row, the one a log record updates.
            if !seen.insert(k) {
                continue;
            }
            if State::text(&st.commit, bi, r) != Some(instant) {
                continue;
            }
            let before = before_keys.get(k).map(|(x, y)| (b.unwrap_or(0), *x, *y));
            let after = Some((a, bi, r));
            changes.push(Change {
                op: if before.is_some() { "u" } else { "i" },
                ts,
                key: k.to_string(),
                partition: partition_at(states, after)?,
                before,
                after,
            });
        }
    }
    if let Some(b) = b {
        for (k, at) in states[b].rows() {
            if before_keys.get(k) != Some(&at) || !seen.insert(k) {
                continue;
            }
            let before = Some((b, at.0, at.1));
            changes.push(Change {
                op: "d",
                ts,
                key: k.to_string(),
                partition: partition_at(states, before)?,
                before,
                after: None,
            });
        }
    }
    Ok(())
}

/// An image column of a CDC log's records (`before` / `after`) as a state of its own (its rows
/// are the log's records; validity says where there is an image).
fn image_state(batch: &RecordBatch, column: &str) -> Result<Option<(State, NullBuffer)>> {
    let Some(col) = batch.column_by_name(column) else {
        return Ok(None);
    };
    let Some(st) = col.as_struct_opt() else {
        return Err(MergeError::unsupported(format!(
            "the CDC log's {column} image is not a record"
        )));
    };
    let valid = st
        .nulls()
        .cloned()
        .unwrap_or_else(|| NullBuffer::new_valid(st.len()));
    let fields: Vec<Field> = st
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let images = RecordBatch::try_new(Arc::new(Schema::new(fields)), st.columns().to_vec())
        .map_err(|e| MergeError::corrupt(format!("the CDC log's {column} images: {e}")))?;
    Ok(Some((State::of(vec![images], false)?, valid)))
}

/// The change records of step `ts` from its CDC log records: the op and key of each, its
/// images from the log where the supplemental logging mode keeps them (`before` in
/// `data_before`, both in `data_before_after`), else from the states before (`b`) and after
/// (`a`) the write.
fn from_log(
    cfg: &MergeConfig,
    states: &mut Vec<State>,
    b: Option<usize>,
    a: Option<usize>,
    batches: &[RecordBatch],
    ts: usize,
    changes: &mut Vec<Change>,
) -> Result<()> {
    for batch in batches {
        let op = string_column(batch, "op")?
            .ok_or_else(|| MergeError::unsupported("a CDC log record without op"))?;
        let logged_before = image_state(batch, "before")?;
        let logged_after = image_state(batch, "after")?;
        // The key: record_key (op_key_only, data_before), else the images' record key.
        // The images' record keys, where the log keeps images: Hudi writes the images without
        // meta fields, so the key is rebuilt from the record key fields as the table's key
        // generator builds it.
        let keys_of = |which: &Option<(State, NullBuffer)>| -> Result<Option<Vec<Option<String>>>> {
            let Some((st, valid)) = which else {
                return Ok(None);
            };
            let batch = &st.batches[0];
            let keys: Vec<String> = match string_column(batch, "_hoodie_record_key")? {
                Some(c) => (0..batch.num_rows())
                    .map(|r| text_at(&c, r).unwrap_or_default().to_string())
                    .collect(),
                None if cfg.record_key_fields.is_empty() || cfg.rebuilt_key_gen.is_none() => {
                    return Err(MergeError::unsupported(
                        "CDC log images without meta fields, and a key generator whose keys \
                         cannot be rebuilt from hoodie.table.recordkey.fields",
                    ))
                }
                None => built_keys(cfg.rebuilt_key_gen, &cfg.record_key_fields, batch)?,
            };
            Ok(Some(
                keys.into_iter()
                    .enumerate()
                    .map(|(r, k)| valid.is_valid(r).then_some(k))
                    .collect(),
            ))
        };
        let (keys_before, keys_after) = (keys_of(&logged_before)?, keys_of(&logged_after)?);
        let image_key = |keys: &Option<Vec<Option<String>>>, r: usize| {
            keys.as_ref().and_then(|k| k.get(r).cloned().flatten())
        };
        let record_key = string_column(batch, "record_key")?;
        let mut place = |st: Option<(State, NullBuffer)>| {
            st.map(|(s, valid)| {
                states.push(s);
                (states.len() - 1, valid)
            })
        };
        let mut rows = Vec::with_capacity(batch.num_rows());
        for r in 0..batch.num_rows() {
            let key = match &record_key {
                Some(c) => text_at(c, r).map(String::from),
                None => image_key(&keys_after, r).or_else(|| image_key(&keys_before, r)),
            };
            let key = key
                .ok_or_else(|| MergeError::unsupported("a CDC log record without a record key"))?;
            let op = match text_at(&op, r) {
                Some("i") => "i",
                Some("u") => "u",
                Some("d") => "d",
                other => {
                    return Err(MergeError::corrupt(format!(
                        "a CDC log record of op {other:?}"
                    )))
                }
            };
            rows.push((op, key));
        }
        let lb = place(logged_before);
        let la = place(logged_after);
        let states: &[State] = states;
        let maps: HashMap<usize, Places<'_>> = [b, a]
            .into_iter()
            .flatten()
            .map(|s| (s, states[s].by_key()))
            .collect();
        for (r, (op, key)) in rows.into_iter().enumerate() {
            let from_state = |s: Option<usize>| {
                s.and_then(|s| maps.get(&s)?.get(key.as_str()).map(|(x, y)| (s, *x, *y)))
            };
            let before = match &lb {
                Some((s, valid)) => valid.is_valid(r).then_some((*s, 0, r)),
                None if op != "i" => from_state(b),
                None => None,
            };
            let after = match &la {
                Some((s, valid)) => valid.is_valid(r).then_some((*s, 0, r)),
                None if op != "d" => from_state(a),
                None => None,
            };
            let partition = match partition_at(states, after.or(before))? {
                Some(p) => Some(p),
                None => partition_at(states, from_state(a).or(from_state(b)))?,
            };
            changes.push(Change {
                op,
                ts,
                key,
                partition,
                before,
                after,
            });
        }
    }
    Ok(())
}

impl PreparedCdc {
    /// The inputs as read: what a cached result must match.
    pub fn identities(&self) -> &[Identity] {
        &self.identities
    }

    /// Per state, its time and the instants of the blocks that count.
    pub fn block_instants(&self) -> &[String] {
        &self.blocks
    }

    pub fn group(&self) -> &CdcGroup {
        &self.group
    }

    /// Compare the states and write the change records to `out`; the bytes written.
    pub fn write_to<W: Write + Send>(self, out: W) -> Result<u64> {
        let id = self.group.id();
        let run = std::panic::AssertUnwindSafe(|| self.write_inner(out));
        match std::panic::catch_unwind(run) {
            Ok(r) => r.map_err(|e| e.in_slice(&id)),
            Err(_) => {
                Err(MergeError::corrupt("the decoder gave up on malformed input").in_slice(&id))
            }
        }
    }

    fn write_inner<W: Write + Send>(self, out: W) -> Result<u64> {
        let partition = self.group.partition.clone();
        // Every state merged, in order; the schema of the images: all states' data columns,
        // later ones extending and promoting earlier ones.
        let mut states: Vec<State> = Vec::new();
        let mut schemas: Vec<SchemaRef> = Vec::new();
        let mut changes: Vec<Change> = Vec::new();
        for (ts, ((before, after), logged)) in self.states.into_iter().zip(self.logged).enumerate()
        {
            let instant = self.group.steps[ts].instant.clone();
            let mut index = |p: Option<Prepared>| -> Result<Option<usize>> {
                let Some(p) = p else { return Ok(None) };
                let (s, st) = state(p)?;
                schemas.push(s);
                states.push(st);
                Ok(Some(states.len() - 1))
            };
            let b = index(before)?;
            let a = index(after)?;
            match logged {
                Some(batches) => {
                    from_log(&self.cfg, &mut states, b, a, &batches, ts, &mut changes)?
                }
                None => infer(&states, b, a, &instant, ts, &mut changes)?,
            }
        }
        // The images' schema: the newest state's columns and types, then the columns only
        // older states have (a column whose type changed takes the newest type).
        let full = schemas
            .iter()
            .rev()
            .fold(None::<SchemaRef>, |acc, s| {
                Some(match acc {
                    None => s.clone(),
                    Some(newer) => output_schema(Some(&newer), Some(s)),
                })
            })
            .unwrap_or_else(|| Arc::new(Schema::empty()));
        let data_fields: Vec<Field> = full
            .fields()
            .iter()
            .filter(|f| !META.contains(&f.name().as_str()))
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        let data_schema = Arc::new(Schema::new(data_fields.clone()));
        // Every state's batches conformed to the images' schema, then one all-null row.
        let mut arrays: Vec<Vec<ArrayRef>> = vec![Vec::new(); data_fields.len()];
        let mut offsets = Vec::with_capacity(states.len());
        let mut n = 0usize;
        for st in &states {
            offsets.push(n);
            for batch in &st.batches {
                let (c, _) = conform_batch(batch, &data_schema).map_err(|e| {
                    MergeError::unsupported(format!("states do not share a schema: {e}"))
                })?;
                for (i, col) in c.columns().iter().enumerate() {
                    arrays[i].push(col.clone());
                }
                n += 1;
            }
        }
        let null_batch = n;
        for (i, f) in data_fields.iter().enumerate() {
            arrays[i].push(new_null_array(f.data_type(), 1));
        }
        let image = |which: &dyn Fn(&Change) -> Option<At>| -> Result<ArrayRef> {
            let idx: Vec<(usize, usize)> = changes
                .iter()
                .map(|c| match which(c) {
                    Some((s, b, r)) => (offsets[s] + b, r),
                    None => (null_batch, 0),
                })
                .collect();
            let children = arrays
                .iter()
                .map(|col| {
                    let refs: Vec<&dyn Array> = col.iter().map(|a| a.as_ref()).collect();
                    arrow_select::interleave::interleave(&refs, &idx)
                })
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| MergeError::corrupt(format!("assembling change images: {e}")))?;
            let nulls = NullBuffer::from(
                changes
                    .iter()
                    .map(|c| which(c).is_some())
                    .collect::<Vec<_>>(),
            );
            let fields: Fields = data_fields.clone().into();
            if fields.is_empty() {
                return Ok(Arc::new(StructArray::new_empty_fields(
                    changes.len(),
                    Some(nulls),
                )));
            }
            StructArray::try_new(fields, children, Some(nulls))
                .map(|s| Arc::new(s) as ArrayRef)
                .map_err(|e| MergeError::corrupt(format!("assembling change images: {e}")))
        };
        let before = image(&|c| c.before)?;
        let after = image(&|c| c.after)?;
        let strings = |f: &dyn Fn(&Change) -> Option<String>| -> ArrayRef {
            let mut b = StringBuilder::new();
            for c in &changes {
                b.append_option(f(c));
            }
            Arc::new(b.finish())
        };
        let steps = &self.group.steps;
        let columns = vec![
            strings(&|c| Some(c.op.to_string())),
            strings(&|c| Some(steps[c.ts].instant.clone())),
            strings(&|c| Some(c.key.clone())),
            strings(&|c| Some(c.partition.clone().unwrap_or_else(|| partition.clone()))),
            before,
            after,
        ];
        let struct_type = DataType::Struct(data_fields.clone().into());
        let out_schema = Arc::new(Schema::new(vec![
            Field::new("op", DataType::Utf8, false),
            Field::new("ts_ms", DataType::Utf8, false),
            Field::new("_hoodie_record_key", DataType::Utf8, false),
            Field::new("_hoodie_partition_path", DataType::Utf8, false),
            Field::new("before", struct_type.clone(), true),
            Field::new("after", struct_type, true),
        ]));
        let batch = RecordBatch::try_new(out_schema.clone(), columns)
            .map_err(|e| MergeError::corrupt(format!("assembling change records: {e}")))?;
        let props = WriterProperties::builder()
            .set_created_by(CDC_CREATED_BY.to_string())
            .set_writer_version(WriterVersion::PARQUET_1_0)
            .set_compression(Compression::SNAPPY)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_key_value_metadata(Some(vec![KeyValue::new(
                "hudifs.cdc.group".to_string(),
                self.group.id(),
            )]))
            .build();
        let options = ArrowWriterOptions::new()
            .with_properties(props)
            .with_skip_arrow_metadata(true);
        let counting = Counting { inner: out, n: 0 };
        let write_err = |e: parquet::errors::ParquetError| {
            MergeError::corrupt(format!("writing the change feed: {e}"))
        };
        let mut w =
            ArrowWriter::try_new_with_options(counting, out_schema, options).map_err(|e| {
                MergeError::unsupported(format!("cannot write the change feed's schema: {e}"))
            })?;
        w.write(&batch).map_err(write_err)?;
        let counting = w.into_inner().map_err(write_err)?;
        let n = counting.n;
        let mut inner = counting.inner;
        inner
            .flush()
            .map_err(|e| MergeError::corrupt(format!("writing the change feed: {e}")))?;
        Ok(n)
    }
}
