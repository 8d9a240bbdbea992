//! The merge of one file slice: its base file (if any) and the blocks of its log files that
//! count, into one Parquet file of the rows a Hudi snapshot query returns for the slice.
//!
//! Java Hudi's file-group reader (`HoodieFileGroupReader` with its key-based record buffer and
//! `BufferedRecordMergerFactory`) is the reference:
//!
//! 1. The log records are read block by block, in merge order (`logread`), into a map from
//!    record key to the merged log record ("delta merge"): commit-time ordering keeps the later
//!    record; event-time ordering keeps the greater ordering value, ties to the later record,
//!    and a delete carrying the default ordering value (none, or the integer 0) wins
//!    unconditionally; a delete with an ordering value loses to a record with a greater one of
//!    the same class. Partial-update blocks (`IS_PARTIAL`) set only their columns; the others
//!    keep the older record's values. `_hoodie_is_deleted = true` makes a record a delete.
//! 2. The base file is read batch by batch; a row whose key has a log record is merged with it
//!    ("final merge", same rules, the base row being the older record) and the log record is
//!    used up: a second base row with the same key (duplicate keys) stays as it is.
//! 3. Log records no base row used (inserts into logs, log-only slices) follow the base rows
//!    in the order their keys first appeared in the logs; deletes of keys only in logs drop
//!    them.
//!
//! Output rows are assembled column by column with Arrow's `interleave` kernel from the base
//! batch and the decoded log batches: no per-row conversion beyond the key lookup.

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::DataType;
use arrow_schema::SchemaRef;
use bytes::Bytes;
use hudifs_storage::ceiling::MemoryCeiling;
use hudifs_storage::{OpenFile, Storage, TablePath};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::{ColumnPath, SchemaDescriptor};

use crate::chunks::{Counting, StorageChunks};
use crate::config::MergeConfig;
use crate::error::{MergeError, Result};
use crate::logread::{choose_blocks, decode_block, BlockRecords, Chosen};
use crate::memory::MergeMemory;
use crate::merger::Merger;
use crate::schema::{conform_batch, output_schema, parquet_schema};

/// The `created_by` of every merged file: fixed, so that bytes do not depend on the build.
pub const CREATED_BY: &str = "hudifs-merge version 1";

/// One input file of a slice, as the view listed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    pub path: TablePath,
    /// The size the listing saw, when known: a file of another size has changed since.
    pub size: Option<u64>,
}

impl InputFile {
    pub fn new(path: TablePath, size: Option<u64>) -> InputFile {
        InputFile { path, size }
    }
}

/// One file slice as the view resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    /// Partition path (`""` for a non-partitioned table).
    pub partition: String,
    pub file_id: String,
    /// The slice's base instant (`user.hudi.slice`).
    pub instant: String,
    /// The base file; `None` for a log-only slice.
    pub base: Option<InputFile>,
    /// The log files the view shows for the slice (chosen at file level by the visibility
    /// rules), in any order.
    pub logs: Vec<InputFile>,
    /// Incremental views (`merged/incremental/`): keep only the merged records whose
    /// `_hoodie_commit_time` is one of these instants (sorted), the row filter of an incremental
    /// query. `None` keeps every record (a snapshot view).
    pub keep_commits: Option<Vec<String>>,
}

impl Slice {
    /// `partition/fileId@instant`, as messages name the slice.
    pub fn id(&self) -> String {
        if self.partition.is_empty() {
            format!("{}@{}", self.file_id, self.instant)
        } else {
            format!("{}/{}@{}", self.partition, self.file_id, self.instant)
        }
    }

    /// Whether the slice needs merging: a slice without log files is its base file, served
    /// as it is (the caller serves the base file itself), unless its rows are filtered.
    /// A base file that is not Parquet always goes through the engine, which refuses it.
    pub fn needs_merge(&self) -> bool {
        if self.keep_commits.is_some() {
            return true;
        }
        let parquet_base = self.base.as_ref().is_some_and(|b| {
            b.path
                .name()
                .rsplit('.')
                .next()
                .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
        });
        !self.logs.is_empty() || !parquet_base
    }
}

/// The name of the merged file of a slice in `merged/`: the base file's own name for a slice
/// that needs no merge (a Parquet base file without logs: it is that file), else
/// `<fileId>_<slice instant>_<newest instant>.merged.parquet`, where the newest instant is the
/// newest write the slice's files hold (the base instant or the newest log writer the view
/// attributes). A slice of a base file in another format is named like a merged one, so that a
/// `*.parquet` glob meets it and fails (EOPNOTSUPP) instead of silently skipping it.
pub fn merged_file_name(slice: &Slice, newest_instant: &str) -> String {
    match &slice.base {
        Some(b) if !slice.needs_merge() => b.path.name().to_string(),
        _ => format!(
            "{}_{}_{}.merged.parquet",
            slice.file_id, slice.instant, newest_instant
        ),
    }
}

/// Which block instants the view admits: committed and not after the view's time. Supplied by
/// the caller (the engine knows no timeline).
pub trait BlockVisibility: Sync {
    fn is_visible(&self, instant: &str) -> bool;
}

impl<F: Fn(&str) -> bool + Sync> BlockVisibility for F {
    fn is_visible(&self, instant: &str) -> bool {
        self(instant)
    }
}

/// Limits of one merge.
#[derive(Debug, Clone)]
pub struct MergeOptions {
    /// Bytes the log records of one slice may take in memory (file bytes and decoded
    /// records); more is refused with [`crate::Refusal::TooBig`] (`EFBIG`).
    pub memory_cap: u64,
    /// Rows per batch read from the base file.
    pub batch_rows: usize,
    /// Rows per row group written (a row group is also closed once its encoded bytes reach
    /// [`WRITER_FLUSH`]).
    pub row_group_rows: usize,
    /// The memory ceiling merges count against (`--max-memory`).
    pub ceiling: Arc<MemoryCeiling>,
    /// What this merge holds of it (set per attempt by [`crate::memory::with_memory`]; a
    /// merge without one counts in a fresh one).
    pub memory: Option<MergeMemory>,
}

/// The encoded bytes of a row group the writer holds before it closes it.
pub const WRITER_FLUSH: u64 = 32 << 20;
/// What a merge counts for the batches it has in hand (read, merged, being written).
const BATCH_ALLOWANCE: u64 = 8 << 20;

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions {
            memory_cap: 1 << 30,
            batch_rows: 8192,
            row_group_rows: 1 << 20,
            ceiling: hudifs_storage::ceiling::process(),
            memory: None,
        }
    }
}

impl MergeOptions {
    /// These options, counting in `m`.
    pub fn with_memory(&self, m: MergeMemory) -> MergeOptions {
        MergeOptions {
            memory: Some(m),
            ..self.clone()
        }
    }

    /// The memory this merge counts in.
    pub(crate) fn memory(&self) -> Result<MergeMemory> {
        match &self.memory {
            Some(m) => Ok(m.clone()),
            None => MergeMemory::within(&self.ceiling, 0),
        }
    }
}

/// What an input file was when the merge read it: what a cached result is checked against.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    pub path: String,
    pub size: u64,
    /// Modification time in nanoseconds since the epoch, where the storage keeps one.
    pub mtime_ns: Option<i64>,
    /// The storage's version of the file (ETag, object version), where it has one.
    pub version: Option<String>,
}

/// What a merge needs to do, known after reading the log files and before reading the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// No block of the logs counts for this view: the merged file is the base file,
    /// unchanged; serve the base file itself.
    BaseUnchanged,
    /// Blocks count: the merged file must be written.
    Merge,
}

impl Plan {
    /// The plan for `slice` when `no_blocks` count: its base file unchanged if it has one and
    /// no row filter applies.
    fn of(slice: &Slice, no_blocks: bool) -> Plan {
        if no_blocks && slice.base.is_some() && slice.keep_commits.is_none() {
            Plan::BaseUnchanged
        } else {
            Plan::Merge
        }
    }
}

/// A slice's base file, opened.
struct Base {
    file: Arc<dyn OpenFile>,
    name: String,
    /// On an object store: read a row group's column chunks at a time (`StorageChunks`).
    by_row_group: bool,
}

/// A slice with its log files read and its blocks chosen.
pub struct Prepared {
    cfg: MergeConfig,
    slice: Slice,
    opts: MergeOptions,
    base: Option<Base>,
    logs: Vec<Bytes>,
    log_names: Vec<String>,
    blocks: Vec<Chosen>,
    identities: Vec<Identity>,
    block_instants: Vec<String>,
    /// What the merge holds of the memory ceiling.
    memory: MergeMemory,
}

/// Counts of one merge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeStats {
    pub base_rows: u64,
    pub log_records: u64,
    pub deletes: u64,
    pub rows: u64,
    pub blocks: usize,
    pub bytes: u64,
    /// The newest instant among the base file's and the blocks merged.
    pub newest_instant: String,
}

fn io_error(what: &str, name: &str, e: std::io::Error) -> MergeError {
    if e.kind() == std::io::ErrorKind::NotFound {
        MergeError::corrupt(format!("{name}: vanished while merging ({what}): {e}"))
    } else {
        MergeError::corrupt(format!("{name}: cannot {what}: {e}"))
    }
}

pub(crate) fn identity(storage: &dyn Storage, f: &InputFile) -> Result<Identity> {
    let name = storage.describe(&f.path);
    let meta = storage
        .stat(&f.path)
        .map_err(|e| io_error("stat", &name, e))?;
    if !meta.is_file() {
        return Err(MergeError::corrupt(format!("{name}: not a regular file")));
    }
    if let Some(expected) = f.size {
        if expected != meta.size {
            return Err(MergeError::corrupt(format!(
                "{name}: {} bytes, the view listed {expected}: it changed since",
                meta.size
            )));
        }
    }
    Ok(Identity {
        path: f.path.as_str().to_string(),
        size: meta.size,
        mtime_ns: meta.mtime.and_then(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .ok()
                .and_then(|d| i64::try_from(d.as_nanos()).ok())
        }),
        version: meta.version,
    })
}

/// Read input `f` whole (its identity `id` just taken), adding its size to `total`: more than
/// `cap` is refused (EFBIG, naming `what` the files are), a file whose size changed is EIO.
pub(crate) fn read_counted(
    storage: &dyn Storage,
    f: &InputFile,
    name: &str,
    id: &Identity,
    total: &mut u64,
    cap: u64,
    what: &str,
) -> Result<Vec<u8>> {
    *total += id.size;
    if *total > cap {
        return Err(MergeError::too_big(format!(
            "its {what} hold more than the memory cap of {cap} bytes"
        )));
    }
    let data = storage
        .read(&f.path)
        .map_err(|e| io_error("read", name, e))?;
    if data.len() as u64 != id.size {
        return Err(MergeError::corrupt(format!(
            "{name}: changed while being read ({} bytes, then {})",
            id.size,
            data.len()
        )));
    }
    Ok(data)
}

/// The slice's log files in merge order ([`log_order`]).
fn logs_in_order(slice: &Slice) -> Vec<&InputFile> {
    let mut logs: Vec<&InputFile> = slice.logs.iter().collect();
    logs.sort_by_key(|f| log_order(&f.path));
    logs
}

/// Java's log-file order: instant in the name, version, write token.
fn log_order(path: &TablePath) -> (String, u32, String, String) {
    match hudifs_core::listing::parse_log_name(path.name()) {
        Some(n) => (
            n.instant,
            n.version,
            n.write_token,
            path.as_str().to_string(),
        ),
        None => (String::new(), 0, String::new(), path.as_str().to_string()),
    }
}

/// What a cached merge of `slice` is recognised by, worked out from the log blocks' headers
/// alone: the inputs' identities and the instants of the blocks that count
/// (`Prepared::identities`, `Prepared::block_instants`), and whether the slice reads as its
/// base file unchanged (`Plan::BaseUnchanged`). A cache hit then reads no log record: a fresh
/// mount's first `ls -l` or open of a merged file no longer reads every log whole (on an object
/// store, a GET of each log whole; now a few ranged GETs of its blocks' fronts and backs).
///
/// `None` where that is not sure, and the merge's own reading decides: a log that is not a
/// clean run of blocks, a base file that is not Parquet, an input that cannot be read now.
pub(crate) fn quick_inputs(
    storage: &dyn Storage,
    slice: &Slice,
    visible: &dyn BlockVisibility,
) -> Option<(Vec<Identity>, Vec<String>, Plan)> {
    let mut identities = Vec::new();
    if let Some(b) = &slice.base {
        let ext = b.path.name().rsplit('.').next().unwrap_or("");
        if !ext.eq_ignore_ascii_case("parquet") {
            return None;
        }
        identities.push(identity(storage, b).ok()?);
    }
    let logs = logs_in_order(slice);
    let (mut scans, mut names) = (Vec::new(), Vec::new());
    for f in logs {
        let id = identity(storage, f).ok()?;
        let file = storage.open(&f.path).ok()?;
        if file.size() != id.size {
            return None;
        }
        let len = usize::try_from(id.size).ok()?;
        let blocks = hudifs_core::logblock::scan_block_headers(len, &mut |at, buf| {
            file.read_exact_random(buf, at)
        })
        .ok()??;
        scans.push((blocks, Vec::new()));
        names.push(storage.describe(&f.path));
        identities.push(id);
    }
    let blocks =
        hudifs_core::logblock::choose_scanned(scans, &names, &|i| visible.is_visible(i)).ok()?;
    let mut instants: Vec<String> = blocks.iter().map(|b| b.instant.clone()).collect();
    instants.dedup();
    Some((identities, instants, Plan::of(slice, blocks.is_empty())))
}

/// Read the slice's log files and choose the blocks that count. The base file is opened
/// (and so pinned: a cleaner deleting it later does not disturb the merge).
pub fn prepare(
    storage: &dyn Storage,
    cfg: &MergeConfig,
    slice: &Slice,
    visible: &dyn BlockVisibility,
    opts: &MergeOptions,
) -> Result<Prepared> {
    prepare_inner(storage, cfg, slice, visible, opts).map_err(|e| e.in_slice(&slice.id()))
}

fn prepare_inner(
    storage: &dyn Storage,
    cfg: &MergeConfig,
    slice: &Slice,
    visible: &dyn BlockVisibility,
    opts: &MergeOptions,
) -> Result<Prepared> {
    let memory = opts.memory()?;
    let on_store = storage.is_object_store();
    if on_store {
        memory.give_back_when_done();
    }
    let mut identities = Vec::new();
    let base = match &slice.base {
        None => None,
        Some(b) => {
            let name = storage.describe(&b.path);
            let ext = b.path.name().rsplit('.').next().unwrap_or("");
            if !ext.eq_ignore_ascii_case("parquet") {
                return Err(MergeError::unsupported(format!(
                    "{name}: base file format {ext:?} (only Parquet base files are merged)"
                )));
            }
            let id = identity(storage, b)?;
            let file = storage
                .open(&b.path)
                .map_err(|e| io_error("open", &name, e))?;
            if file.size() != id.size {
                return Err(MergeError::corrupt(format!(
                    "{name}: changed while being opened ({} bytes, then {})",
                    id.size,
                    file.size()
                )));
            }
            identities.push(id);
            Some(Base {
                file,
                name,
                by_row_group: on_store,
            })
        }
    };
    let logs = logs_in_order(slice);
    let mut bytes = Vec::new();
    let mut names = Vec::new();
    let mut total = 0u64;
    for f in logs {
        let name = storage.describe(&f.path);
        let id = identity(storage, f)?;
        if total + id.size <= opts.memory_cap {
            memory.count(id.size)?;
        }
        let data = read_counted(
            storage,
            f,
            &name,
            &id,
            &mut total,
            opts.memory_cap,
            "log files",
        )?;
        identities.push(id);
        bytes.push(Bytes::from(data));
        names.push(name);
    }
    let blocks = choose_blocks(&bytes, &names, &|i| visible.is_visible(i))?;
    let mut block_instants: Vec<String> = blocks.iter().map(|b| b.instant.clone()).collect();
    block_instants.dedup();
    Ok(Prepared {
        cfg: cfg.clone(),
        slice: slice.clone(),
        opts: opts.clone(),
        base,
        logs: bytes,
        log_names: names,
        blocks,
        identities,
        block_instants,
        memory,
    })
}

impl Prepared {
    pub fn plan(&self) -> Plan {
        Plan::of(&self.slice, self.blocks.is_empty())
    }

    /// The inputs as read: what a cached result must match.
    pub fn identities(&self) -> &[Identity] {
        &self.identities
    }

    /// The instants of the blocks that count, in merge order.
    pub fn block_instants(&self) -> &[String] {
        &self.block_instants
    }

    pub fn slice(&self) -> &Slice {
        &self.slice
    }

    /// Write the merged file to `out`. On an error what was written is garbage: the caller
    /// must not serve it (the cache writes to a temporary file and drops it).
    pub fn write_to<W: Write + Send>(self, out: W) -> Result<MergeStats> {
        let mut sink = ParquetSink {
            out: Some(out),
            writer: None,
            bytes: 0,
        };
        let mut stats = self.run(&mut sink)?;
        stats.bytes = sink.bytes;
        Ok(stats)
    }

    /// The merged rows in memory, in the order the merged file holds them, with their schema
    /// (what the change feed compares; the memory cap applies to the log records as for a
    /// written merge).
    pub fn batches(self) -> Result<(SchemaRef, Vec<RecordBatch>, MergeStats)> {
        let mut sink = MemorySink {
            memory: Some(self.memory.clone()),
            ..MemorySink::default()
        };
        let stats = self.run(&mut sink)?;
        let schema = sink
            .schema
            .ok_or_else(|| MergeError::corrupt("the merge produced no schema"))?;
        Ok((schema, sink.batches, stats))
    }

    fn run<S: Sink>(self, sink: &mut S) -> Result<MergeStats> {
        let id = self.slice.id();
        let run = std::panic::AssertUnwindSafe(|| self.merge_into(sink));
        match std::panic::catch_unwind(run) {
            Ok(r) => r.map_err(|e| e.in_slice(&id)),
            Err(_) => {
                Err(MergeError::corrupt("the decoder gave up on malformed input").in_slice(&id))
            }
        }
    }

    fn merge_into<S: Sink>(self, sink: &mut S) -> Result<MergeStats> {
        let mut stats = MergeStats {
            blocks: self.blocks.len(),
            ..Default::default()
        };
        // 1. The records of the blocks that count.
        let mut schemas = HashMap::new();
        let mut items = Vec::with_capacity(self.blocks.len());
        let mut held = self.logs.iter().map(|b| b.len() as u64).sum::<u64>();
        for b in &self.blocks {
            let r = decode_block(b, &self.logs[b.file], &self.log_names[b.file], &mut schemas)?;
            held += match &r {
                BlockRecords::Data { batch, .. } => batch.get_array_memory_size() as u64,
                BlockRecords::Deletes { keys, .. } => {
                    keys.iter().map(|k| k.len() as u64 + 64).sum::<u64>()
                }
            };
            if held > self.opts.memory_cap {
                return Err(MergeError::too_big(format!(
                    "its log records take more than the memory cap of {} bytes",
                    self.opts.memory_cap
                )));
            }
            self.memory.count(match &r {
                BlockRecords::Data { batch, .. } => batch.get_array_memory_size() as u64,
                BlockRecords::Deletes { keys, .. } => {
                    keys.iter().map(|k| k.len() as u64 + 64).sum::<u64>()
                }
            })?;
            items.push(r);
        }
        // 2. The base file.
        let base_reader = match &self.base {
            None => None,
            Some(Base {
                file,
                name,
                by_row_group,
            }) => {
                let corrupt = |e: parquet::errors::ParquetError| {
                    MergeError::corrupt(format!("{name}: not a readable Parquet file: {e}"))
                };
                let footer = StorageChunks::direct(file.clone());
                let meta =
                    ArrowReaderMetadata::load(&footer, Default::default()).map_err(corrupt)?;
                let chunks = match by_row_group {
                    true => StorageChunks::by_row_group(file.clone(), meta.metadata()),
                    false => footer,
                };
                // The reader holds a row group's column chunks at a time, and a batch.
                let rg = meta.metadata().row_groups().iter();
                let largest = rg.map(|g| g.compressed_size().max(0) as u64).max();
                let largest = largest.unwrap_or(0).max(chunks.largest_held());
                self.memory.count(largest + BATCH_ALLOWANCE)?;
                Some(ParquetRecordBatchReaderBuilder::new_with_metadata(
                    chunks, meta,
                ))
            }
        };
        let base_arrow = base_reader.as_ref().map(|b| b.schema().clone());
        let base_descr = base_reader
            .as_ref()
            .map(|b| b.metadata().file_metadata().schema_descr().clone());
        let dictionary = base_reader
            .as_ref()
            .map(|b| dictionary_columns(b.metadata()))
            .unwrap_or_default();
        let base_kv = base_reader
            .as_ref()
            .and_then(|b| b.metadata().file_metadata().key_value_metadata().cloned())
            .unwrap_or_default();
        let newest_log = items.iter().rev().find_map(|i| match i {
            BlockRecords::Data { batch, .. } => Some(batch.schema()),
            _ => None,
        });
        if base_arrow.is_none() && newest_log.is_none() {
            return Err(MergeError::corrupt(
                "a log-only slice without any data block that counts: no schema to write",
            ));
        }
        let schema = output_schema(base_arrow.as_ref(), newest_log.as_ref());
        let descr =
            parquet_schema(&schema, base_arrow.as_ref(), base_descr.as_ref()).map_err(|e| {
                MergeError::unsupported(format!("no Parquet schema for the output: {e}"))
            })?;

        // 3. Log records into the key map (delta merge).
        let mut merger = Merger::new(&self.cfg, &schema);
        for item in items {
            match item {
                BlockRecords::Data {
                    batch,
                    partial,
                    instant,
                } => {
                    // Read before conforming: the output schema need not have the column.
                    let deleted = batch
                        .schema()
                        .index_of("_hoodie_is_deleted")
                        .ok()
                        .and_then(|i| arrow_cast::cast(batch.column(i), &DataType::Boolean).ok())
                        .map(|c| c.as_boolean().clone());
                    let (conformed, present) = conform_batch(&batch, &schema).map_err(|e| {
                        MergeError::unsupported(format!(
                            "records of instant {instant} do not fit the slice's schema: {e}"
                        ))
                    })?;
                    drop(batch);
                    stats.log_records += conformed.num_rows() as u64;
                    newest(&mut stats.newest_instant, &instant);
                    merger.add_batch(conformed, partial.then_some(present), deleted)?;
                }
                BlockRecords::Deletes {
                    keys,
                    ordering,
                    instant,
                } => {
                    stats.deletes += keys.len() as u64;
                    newest(&mut stats.newest_instant, &instant);
                    merger.add_deletes(keys, ordering);
                }
            }
        }

        // 4. The writer.
        let mut kv = vec![KeyValue::new(
            "hudifs.merged.slice".to_string(),
            self.slice.id(),
        )];
        if base_arrow
            .as_ref()
            .is_some_and(|b| b.fields() == schema.fields())
        {
            for k in [
                "org.apache.spark.sql.parquet.row.metadata",
                "parquet.avro.schema",
            ] {
                if let Some(v) = base_kv.iter().find(|e| e.key == k) {
                    kv.push(v.clone());
                }
            }
        }
        // The writer's row group (closed at WRITER_FLUSH bytes, or smaller with the inputs).
        if !sink.holds_rows() {
            let inputs = self.identities.iter().map(|i| i.size).sum::<u64>();
            self.memory
                .count(WRITER_FLUSH.min(inputs) + BATCH_ALLOWANCE)?;
        }
        sink.start(&schema, descr, kv, dictionary, &self.opts)?;

        // 5. The base rows, merged.
        if let (Some(builder), Some(Base { name, .. })) = (base_reader, &self.base) {
            if let Some(inst) = self.slice.base.as_ref().and_then(|b| {
                hudifs_core::listing::parse_base_name(b.path.name(), &[String::from("parquet")])
            }) {
                newest(&mut stats.newest_instant, &inst.instant);
            }
            let reader = builder
                .with_batch_size(self.opts.batch_rows.max(1))
                .build()
                .map_err(|e| MergeError::corrupt(format!("{name}: {e}")))?;
            for batch in reader {
                let batch = batch.map_err(|e| MergeError::corrupt(format!("{name}: {e}")))?;
                stats.base_rows += batch.num_rows() as u64;
                let out = merger
                    .merge_base_batch(&batch, &schema)
                    .map_err(|e| e.prefixed(name))?;
                let out = out.map(|b| self.keep(b)).transpose()?;
                if let Some(out) = out.filter(|b| b.num_rows() > 0) {
                    stats.rows += out.num_rows() as u64;
                    sink.write(&out)?;
                }
            }
        }
        // 6. Log records no base row used.
        for out in merger.remaining(&schema, self.opts.batch_rows.max(1))? {
            let out = self.keep(out)?;
            if out.num_rows() == 0 {
                continue;
            }
            stats.rows += out.num_rows() as u64;
            sink.write(&out)?;
        }
        sink.finish()?;
        Ok(stats)
    }
}

impl Prepared {
    /// The rows of `batch` the slice's row filter keeps (all without one): those whose
    /// `_hoodie_commit_time` is one of the kept instants. A batch without the column keeps none
    /// (incremental views are refused on tables without meta fields before they get here).
    fn keep(&self, batch: RecordBatch) -> Result<RecordBatch> {
        let Some(keep) = &self.slice.keep_commits else {
            return Ok(batch);
        };
        let Ok(i) = batch.schema().index_of("_hoodie_commit_time") else {
            return Ok(batch.slice(0, 0));
        };
        let col = arrow_cast::cast(batch.column(i), &DataType::Utf8).map_err(|e| {
            MergeError::unsupported(format!("_hoodie_commit_time is not a string: {e}"))
        })?;
        let col = col.as_string::<i32>();
        let mask: BooleanArray = col
            .iter()
            .map(|v| Some(v.is_some_and(|v| keep.binary_search_by(|k| k.as_str().cmp(v)).is_ok())))
            .collect();
        arrow_select::filter::filter_record_batch(&batch, &mask)
            .map_err(|e| MergeError::corrupt(format!("filtering the merged rows: {e}")))
    }
}

/// Where a merge's rows go: a Parquet file, or memory.
trait Sink {
    fn start(
        &mut self,
        schema: &SchemaRef,
        descr: SchemaDescriptor,
        kv: Vec<KeyValue>,
        dictionary: Vec<(ColumnPath, bool)>,
        opts: &MergeOptions,
    ) -> Result<()>;
    fn write(&mut self, batch: &RecordBatch) -> Result<()>;
    fn finish(&mut self) -> Result<()>;
    /// Whether the rows stay in memory (then each batch is counted as it comes).
    fn holds_rows(&self) -> bool {
        false
    }
}

fn write_err(e: parquet::errors::ParquetError) -> MergeError {
    MergeError::corrupt(format!("writing the merged file: {e}"))
}

/// The merged file, written with fixed properties (deterministic bytes).
struct ParquetSink<W: Write + Send> {
    out: Option<W>,
    writer: Option<ArrowWriter<Counting<W>>>,
    bytes: u64,
}

impl<W: Write + Send> Sink for ParquetSink<W> {
    fn start(
        &mut self,
        schema: &SchemaRef,
        descr: SchemaDescriptor,
        kv: Vec<KeyValue>,
        dictionary: Vec<(ColumnPath, bool)>,
        opts: &MergeOptions,
    ) -> Result<()> {
        let mut props = WriterProperties::builder()
            .set_created_by(CREATED_BY.to_string())
            .set_writer_version(WriterVersion::PARQUET_1_0)
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_size(opts.row_group_rows.max(1))
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_key_value_metadata(Some(kv));
        // Dictionary-encode the columns the base file's writer kept dictionary-encoded: for the
        // others (unique keys, sequence numbers) building a dictionary only to give it up
        // doubled the time of writing.
        for (path, dict) in dictionary {
            props = props.set_column_dictionary_enabled(path, dict);
        }
        let options = ArrowWriterOptions::new()
            .with_properties(props.build())
            .with_skip_arrow_metadata(true)
            .with_parquet_schema(descr);
        let out = self
            .out
            .take()
            .ok_or_else(|| MergeError::corrupt("the merged file was started twice"))?;
        let counting = Counting { inner: out, n: 0 };
        self.writer = Some(
            ArrowWriter::try_new_with_options(counting, schema.clone(), options).map_err(|e| {
                MergeError::unsupported(format!("cannot write the output schema: {e}"))
            })?,
        );
        Ok(())
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match &mut self.writer {
            Some(w) => {
                w.write(batch).map_err(write_err)?;
                // A row group is closed once it holds WRITER_FLUSH encoded bytes (what the
                // merge counted for it), whatever its rows.
                if w.in_progress_size() as u64 >= WRITER_FLUSH {
                    w.flush().map_err(write_err)?;
                }
                Ok(())
            }
            None => Err(MergeError::corrupt("a merged batch before the schema")),
        }
    }

    fn finish(&mut self) -> Result<()> {
        let w = self
            .writer
            .take()
            .ok_or_else(|| MergeError::corrupt("the merged file was never started"))?;
        let counting = w.into_inner().map_err(write_err)?;
        self.bytes = counting.n;
        let mut inner = counting.inner;
        inner
            .flush()
            .map_err(|e| MergeError::corrupt(format!("writing the merged file: {e}")))
    }
}

/// The merged rows, kept in memory.
#[derive(Default)]
struct MemorySink {
    schema: Option<SchemaRef>,
    batches: Vec<RecordBatch>,
    memory: Option<MergeMemory>,
}

impl Sink for MemorySink {
    fn start(
        &mut self,
        schema: &SchemaRef,
        _: SchemaDescriptor,
        _: Vec<KeyValue>,
        _: Vec<(ColumnPath, bool)>,
        _: &MergeOptions,
    ) -> Result<()> {
        self.schema = Some(schema.clone());
        Ok(())
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if let Some(m) = &self.memory {
            m.count(batch.get_array_memory_size() as u64)?;
        }
        self.batches.push(batch.clone());
        Ok(())
    }

    fn holds_rows(&self) -> bool {
        true
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Per column of the base file's first row group: whether all its data pages were
/// dictionary-encoded (a column its writer had to fall back to plain encoding for is not worth
/// a dictionary). Columns without page encoding statistics keep the default (dictionary on).
fn dictionary_columns(meta: &parquet::file::metadata::ParquetMetaData) -> Vec<(ColumnPath, bool)> {
    use parquet::basic::{Encoding, PageType};
    let Some(rg) = meta.row_groups().first() else {
        return Vec::new();
    };
    rg.columns()
        .iter()
        .filter_map(|c| {
            let stats = c.page_encoding_stats()?;
            let dict = c.dictionary_page_offset().is_some()
                && stats
                    .iter()
                    .filter(|s| matches!(s.page_type, PageType::DATA_PAGE | PageType::DATA_PAGE_V2))
                    .all(|s| {
                        matches!(
                            s.encoding,
                            Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY
                        )
                    });
            Some((c.column_path().clone(), dict))
        })
        .collect()
}

fn newest(acc: &mut String, instant: &str) {
    if instant > acc.as_str() {
        *acc = instant.to_string();
    }
}

impl MergeError {
    fn prefixed(mut self, what: &str) -> MergeError {
        if !self.reason.starts_with(what) {
            self.reason = format!("{what}: {}", self.reason);
        }
        self
    }
}

/// Prepare and write in one go; `Ok(None)` when the slice needs no merge or no block counts
/// (serve the base file itself).
pub fn merge_slice<W: Write + Send>(
    storage: &dyn Storage,
    cfg: &MergeConfig,
    slice: &Slice,
    visible: &dyn BlockVisibility,
    opts: &MergeOptions,
    out: W,
) -> Result<Option<MergeStats>> {
    if !slice.needs_merge() {
        return Ok(None);
    }
    let p = prepare(storage, cfg, slice, visible, opts)?;
    if p.plan() == Plan::BaseUnchanged {
        return Ok(None);
    }
    p.write_to(out).map(Some)
}
