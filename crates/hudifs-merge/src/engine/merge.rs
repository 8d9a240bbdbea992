//! The merge of one prepared slice: its log files read and its blocks chosen ([`prepare`]),
//! then the delta merge of the log records, the final merge of the base rows and the rows
//! assembled into a sink ([`Prepared::write_to`], [`Prepared::batches`]).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{BooleanArray, RecordBatch};
use arrow_schema::{DataType, SchemaRef};
use bytes::Bytes;
use hudifs_storage::{OpenFile, Storage};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::KeyValue;

use super::plan::{logs_in_order, Plan, Slice};
use super::sinks::{dictionary_columns, MemorySink, ParquetSink, Sink, WRITER_FLUSH};
use crate::chunks::StorageChunks;
use crate::config::{non_null_default, MergeConfig, Placeholder};
use crate::error::{MergeError, Result};
use crate::logread::{choose_blocks, decode_block, BlockRecords, Chosen};
use crate::materialise::{
    identity, io_error, read_counted, BlockVisibility, Identity, MergeOptions, Ready,
};
use crate::memory::MergeMemory;
use crate::merger::Merger;
use crate::schema::{aligned, conform_batch, output_schema, parquet_schema};
use hudifs_core::logblock::header::SCHEMA;

/// What a merge counts for the batches it has in hand (read, merged, being written).
const BATCH_ALLOWANCE: u64 = 8 << 20;

/// A slice's base file, opened.
struct Base {
    file: Arc<dyn OpenFile>,
    name: String,
    /// On an object store: read a row group's column chunks at a time (`StorageChunks`).
    by_row_group: bool,
    /// A bootstrap skeleton's source file (its data columns), opened, and its name.
    source: Option<(Arc<dyn OpenFile>, String, bool)>,
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
    let skeleton = cfg.bootstrapped
        && slice.base.is_some()
        && slice.instant == hudifs_core::table::METADATA_BOOTSTRAP_INSTANT;
    if skeleton && slice.source.is_none() {
        return Err(MergeError::corrupt(
            "its base file is a metadata-only bootstrap skeleton and no source file was found \
             for it (the bootstrap index or base path; the log says which)",
        ));
    }
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
            let source = match slice.source.as_ref().filter(|_| skeleton) {
                None => None,
                Some(src) => {
                    let sname = src.describe();
                    let mut sid = identity(&*src.storage, &src.file)?;
                    sid.path = sname.clone();
                    let sfile = src
                        .storage
                        .open(&src.file.path)
                        .map_err(|e| io_error("open", &sname, e))?;
                    identities.push(sid);
                    Some((sfile, sname, src.storage.is_object_store()))
                }
            };
            Some(Base {
                file,
                name,
                by_row_group: on_store,
                source,
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

impl Ready for Prepared {
    fn identities(&self) -> &[Identity] {
        &self.identities
    }

    /// The instants of the blocks that count, in merge order.
    fn block_instants(&self) -> &[String] {
        &self.block_instants
    }

    fn write_to<W: Write + Send>(self, out: W) -> Result<u64> {
        Prepared::write_to(self, out).map(|s| s.bytes)
    }
}

impl Prepared {
    pub fn plan(&self) -> Plan {
        Plan::of(&self.slice, self.blocks.is_empty())
    }

    pub fn slice(&self) -> &Slice {
        &self.slice
    }

    /// Write the merged file to `out`. On an error what was written is garbage: the caller
    /// must not serve it (the cache writes to a temporary file and drops it).
    pub fn write_to<W: Write + Send>(self, out: W) -> Result<MergeStats> {
        let mut sink = ParquetSink::new(out);
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
        MergeError::guarded(&id, || self.merge_into(sink))
    }

    /// Where null values stand for "keep the other record's" (`Placeholder::Null`), a block
    /// whose schema gives a top-level field another default is refused: Java compares values
    /// with those defaults in ways hudifs does not reproduce.
    fn check_defaults(&self, schema: Option<&str>, place: impl FnOnce() -> String) -> Result<()> {
        let null_marks = self
            .cfg
            .unavailable
            .as_ref()
            .is_some_and(|u| u.value == Placeholder::Null);
        match schema.filter(|_| null_marks).and_then(non_null_default) {
            None => Ok(()),
            Some((field, default)) => Err(MergeError::unsupported(format!(
                "{}: its schema gives field {field} the default {default}: values equal to a \
                 non-null default are not merged (only null defaults are)",
                place()
            ))),
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
            // A schema is checked once: `schemas` holds the ones decoded already.
            let fresh = b.header.get(&SCHEMA).filter(|s| !schemas.contains_key(*s));
            self.check_defaults(fresh.map(String::as_str), || {
                format!("{}: block at byte {}", self.log_names[b.file], b.offset)
            })?;
            let r = decode_block(b, &self.logs[b.file], &self.log_names[b.file], &mut schemas)?;
            // Schema-on-read: the block's columns under the view's names (by field id).
            let r = match (r, self.evolution()) {
                (
                    BlockRecords::Data {
                        batch,
                        partial,
                        instant,
                    },
                    Some(e),
                ) => {
                    let place =
                        || format!("{}: block at byte {}", self.log_names[b.file], b.offset);
                    let batch = e
                        .columns(&instant)
                        .and_then(|m| m.apply(batch).map_err(MergeError::corrupt))
                        .map_err(|e| e.prefixed(&place()))?;
                    BlockRecords::Data {
                        batch,
                        partial,
                        instant,
                    }
                }
                (r, _) => r,
            };
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
        // 2. The base file (with a bootstrap skeleton's source file beside it).
        let (base_reader, source_reader) = match &self.base {
            None => (None, None),
            Some(Base {
                file,
                name,
                by_row_group,
                source,
            }) => {
                let base = self.open_parquet(file, name, *by_row_group)?;
                let source = match source {
                    None => None,
                    Some((sfile, sname, on_store)) => {
                        let src = self.open_parquet(sfile, sname, *on_store)?;
                        let (a, b) = (
                            base.metadata().file_metadata().num_rows(),
                            src.metadata().file_metadata().num_rows(),
                        );
                        if a != b {
                            return Err(MergeError::corrupt(format!(
                                "skeleton {name} holds {a} rows, its source {sname} {b}: they \
                                 cannot be joined row by row"
                            )));
                        }
                        Some(src)
                    }
                };
                (Some(base), source)
            }
        };
        // Schema-on-read: the base file's columns under the view's names (by field id).
        let base_map = match (self.evolution(), &self.base) {
            (Some(e), Some(Base { name, .. })) => {
                let instant = self
                    .slice
                    .base
                    .as_ref()
                    .and_then(|b| {
                        hudifs_core::listing::parse_base_name(
                            b.path.name(),
                            &[String::from("parquet")],
                        )
                    })
                    .map(|n| n.instant)
                    .unwrap_or_default();
                Some(e.columns(&instant).map_err(|e| e.prefixed(name))?)
            }
            _ => None,
        };
        let base_arrow = match (&base_reader, &source_reader) {
            (Some(b), Some(s)) => Some(super::stitch::stitched_schema(b.schema(), s.schema())),
            (b, _) => b.as_ref().map(|b| b.schema().clone()),
        };
        let base_arrow = base_arrow.map(|a| match &base_map {
            Some(m) => m.apply_schema(&a),
            None => a,
        });
        // A stitched base has no one file's Parquet schema or metadata to keep.
        let base_descr = base_reader
            .as_ref()
            .filter(|_| source_reader.is_none())
            .map(|b| b.metadata().file_metadata().schema_descr().clone());
        let mut dictionary = base_reader
            .as_ref()
            .map(|b| dictionary_columns(b.metadata()))
            .unwrap_or_default();
        if let Some(s) = &source_reader {
            dictionary.extend(dictionary_columns(s.metadata()));
        }
        let base_kv = base_reader
            .as_ref()
            .filter(|_| source_reader.is_none())
            .and_then(|b| b.metadata().file_metadata().key_value_metadata().cloned())
            .unwrap_or_default();
        // Only where log records merge with the base records.
        let base_avro = base_kv
            .iter()
            .find(|k| k.key == "parquet.avro.schema")
            .filter(|_| !items.is_empty());
        self.check_defaults(base_avro.and_then(|k| k.value.as_deref()), || {
            "the base file".to_string()
        })?;
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
        let schema = match &self.slice.schema {
            Some(s) => aligned(&schema, &s.view.arrow),
            None => schema,
        };
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
                    // Read before conforming: the output schema need not have the columns.
                    let deleted = crate::deletes::delete_flags(&batch, &self.cfg)?;
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
                    merger.add_deletes(keys, ordering)?;
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
            let rows = self.opts.batch_rows.max(1);
            let build = |b: ParquetRecordBatchReaderBuilder<StorageChunks>, n: &str| {
                b.with_batch_size(rows)
                    .build()
                    .map_err(|e| MergeError::corrupt(format!("{n}: {e}")))
            };
            let skeleton = build(builder, name)?;
            let reader: Box<dyn Iterator<Item = Result<RecordBatch>>> = match (
                source_reader,
                self.base.as_ref().and_then(|b| b.source.as_ref()),
            ) {
                (Some(src), Some((_, sname, _))) => Box::new(super::stitch::Stitched::new(
                    skeleton,
                    build(src, sname)?,
                    (name.clone(), sname.clone()),
                )),
                _ => Box::new(
                    skeleton.map(|b| b.map_err(|e| MergeError::corrupt(format!("{name}: {e}")))),
                ),
            };
            for batch in reader {
                let batch = batch?;
                let batch = match &base_map {
                    Some(m) => m
                        .apply(batch)
                        .map_err(|e| MergeError::corrupt(format!("{name}: {e}")))?,
                    None => batch,
                };
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
    /// The schema-on-read mapping of the slice's view, where it has one.
    fn evolution(&self) -> Option<&crate::evolution::SchemaOnRead> {
        self.slice.schema.as_ref()?.evolution.as_deref()
    }

    /// A reader of Parquet file `file` (named `name`), its memory counted; a codec that cannot
    /// be read is refused by name.
    fn open_parquet(
        &self,
        file: &Arc<dyn OpenFile>,
        name: &str,
        by_row_group: bool,
    ) -> Result<ParquetRecordBatchReaderBuilder<StorageChunks>> {
        let corrupt = |e: parquet::errors::ParquetError| {
            MergeError::corrupt(format!("{name}: not a readable Parquet file: {e}"))
        };
        let footer = StorageChunks::direct(file.clone());
        let meta = ArrowReaderMetadata::load(&footer, Default::default()).map_err(corrupt)?;
        if let Some(c) = crate::codecs::unreadable(meta.metadata()) {
            return Err(crate::codecs::refusal(name, c));
        }
        let chunks = match by_row_group {
            true => StorageChunks::by_row_group(file.clone(), meta.metadata()),
            false => footer,
        };
        // The reader holds a row group's column chunks at a time, and a batch.
        let rg = meta.metadata().row_groups().iter();
        let largest = rg.map(|g| g.compressed_size().max(0) as u64).max();
        let largest = largest.unwrap_or(0).max(chunks.largest_held());
        self.memory.count(largest + BATCH_ALLOWANCE)?;
        Ok(ParquetRecordBatchReaderBuilder::new_with_metadata(
            chunks, meta,
        ))
    }

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
