//! Reading the log files of one slice: which blocks count (block-level filtering), and their
//! records as Arrow batches or delete keys.
//!
//! The blocks are found by `hudifs_core::logblock::scan_log_blocks`, the project's one parser of
//! the Hudi log format (a corrupt stretch is skipped and reading resumes at the next magic, as
//! Java's `HoodieLogFileReader` turns it into a corrupt block that the record reader skips).
//! Then, in the order of the log files (Java's log-file comparator: instant, version, write
//! token) and of the blocks in each file:
//!
//! - a rollback command block removes the blocks read before it whose instant is its target
//!   (v6 appends the blocks of several instants, and rollbacks of failed ones, to one file);
//! - a data or delete block counts only when the caller's visibility predicate admits its
//!   instant (committed and not after the view's time);
//! - a block with `COMPACTED_BLOCK_TIMES` (log compaction) replaces the blocks of the instants
//!   it lists, taking the place of the first of them, so later writes still override it;
//! - CDC blocks that count are refused (unsupported), as are data blocks of content versions
//!   below 3 and Kryo delete blocks.
//!
//! HFile data blocks (`HFILE_DATA_BLOCK`) hold an HFile v3 (read by `hudifs_hfile`, bounded as
//! the Avro decoder is) whose keys are record keys and whose values are Avro records in the
//! block header's schema, decoded like an Avro block's. Java Hudi's writer blanks a top-level
//! string field named `key` (when the schema has one) to save space and its reader puts the
//! HFile key back where it finds it empty; so does this one.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use hudifs_core::logblock::block_type::{
    AVRO_DATA_BLOCK, CDC_DATA_BLOCK, DELETE_BLOCK, HFILE_DATA_BLOCK, PARQUET_DATA_BLOCK,
};
use hudifs_core::logblock::header::{INSTANT_TIME, IS_PARTIAL, SCHEMA};
use hudifs_core::logblock::scan_log_blocks;
pub use hudifs_core::logblock::Chosen;
use hudifs_hfile::{HFileError, HFileReader};

use crate::avro::{decimal_from_be, AvroCursor, AvroToArrow, SchemaProblem, VALUE_SLACK};
use crate::error::{MergeError, Result};
use crate::order::{Cls, OrdVal};

/// Choose the blocks that count, in merge order (`hudifs_core::logblock::choose_blocks`); a
/// counting block this reader cannot merge is refused as unsupported.
pub fn choose_blocks(
    files: &[Bytes],
    names: &[String],
    visible: &dyn Fn(&str) -> bool,
) -> Result<Vec<Chosen>> {
    hudifs_core::logblock::choose_blocks(files, names, visible).map_err(MergeError::unsupported)
}

/// What one counting block holds.
pub enum BlockRecords {
    Data {
        batch: RecordBatch,
        partial: bool,
        instant: String,
    },
    Deletes {
        keys: Vec<String>,
        ordering: Vec<OrdVal>,
        instant: String,
    },
}

fn be_i32(c: &[u8], at: usize) -> Option<i32> {
    let b = c.get(at..at + 4)?;
    Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// Decode one chosen block. `schemas` caches compiled writer schemas by their text.
pub fn decode_block(
    block: &Chosen,
    bytes: &Bytes,
    name: &str,
    schemas: &mut HashMap<String, Arc<AvroToArrow>>,
) -> Result<BlockRecords> {
    let content = &bytes[block.content.clone()];
    let at = |e: String| {
        MergeError::corrupt(format!(
            "{name}: block at byte {} (instant {}) does not decode: {e}",
            block.offset, block.instant
        ))
    };
    let partial = block
        .header
        .get(&IS_PARTIAL)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    match block.block_type {
        AVRO_DATA_BLOCK => {
            let version = be_i32(content, 0).ok_or_else(|| at("no content version".into()))?;
            if version < 3 {
                return Err(MergeError::unsupported(format!(
                    "{name}: Avro data block at byte {} has content version {version} (only \
                     version 3 is merged)",
                    block.offset
                )));
            }
            if version > 3 {
                return Err(at(format!("unknown content version {version}")));
            }
            let count = be_i32(content, 4).ok_or_else(|| at("no record count".into()))?;
            let count = usize::try_from(count).map_err(|_| at(format!("record count {count}")))?;
            let decoder = writer_schema(block, name, schemas)?;
            // The records: i32 length then the bytes, each checked against what is left.
            let mut records = Vec::new();
            let mut pos = 8usize;
            for i in 0..count {
                let len = be_i32(content, pos)
                    .ok_or_else(|| at(format!("record {i} of {count}: truncated")))?;
                let len = usize::try_from(len).map_err(|_| at(format!("record length {len}")))?;
                let start = pos + 4;
                let end = start
                    .checked_add(len)
                    .filter(|&e| e <= content.len())
                    .ok_or_else(|| at(format!("record {i} of {count} runs past the block")))?;
                records.push(&content[start..end]);
                pos = end;
            }
            if pos != content.len() {
                return Err(at(format!(
                    "{} bytes after the last record",
                    content.len() - pos
                )));
            }
            let batch = decoder
                .decode(records.into_iter(), content.len() + VALUE_SLACK)
                .map_err(at)?;
            Ok(BlockRecords::Data {
                batch,
                partial,
                instant: block.instant.clone(),
            })
        }
        HFILE_DATA_BLOCK => {
            let decoder = writer_schema(block, name, schemas)?;
            let cells = hfile_cells(content).map_err(|e| match e {
                HFileError::Unsupported(s) => MergeError::unsupported(format!(
                    "{name}: HFile data block at byte {} (instant {}): {s}",
                    block.offset, block.instant
                )),
                HFileError::TooLarge(s) => MergeError::too_big(format!(
                    "{name}: HFile data block at byte {} (instant {}): {s}",
                    block.offset, block.instant
                )),
                other => at(other.to_string()),
            })?;
            let values: usize = cells.iter().map(|(_, v)| v.len()).sum();
            let batch = decoder
                .decode(
                    cells.iter().map(|(_, v)| v.as_slice()),
                    values.saturating_add(VALUE_SLACK),
                )
                .map_err(at)?;
            let batch = restore_blanked_keys(batch, &cells).map_err(at)?;
            Ok(BlockRecords::Data {
                batch,
                partial,
                instant: block.instant.clone(),
            })
        }
        PARQUET_DATA_BLOCK => {
            let data = bytes.slice(block.content.clone());
            let meta =
                parquet::file::metadata::ParquetMetaDataReader::new().parse_and_finish(&data);
            if let Some(c) = meta.ok().as_ref().and_then(crate::codecs::unreadable) {
                let what = format!("{name}: Parquet data block at byte {}", block.offset);
                return Err(crate::codecs::refusal(&what, c));
            }
            let batch = std::panic::catch_unwind(|| read_parquet_block(data))
                .map_err(|_| at("the Parquet decoder gave up".into()))?
                .map_err(at)?;
            Ok(BlockRecords::Data {
                batch,
                partial,
                instant: block.instant.clone(),
            })
        }
        DELETE_BLOCK => {
            let version = be_i32(content, 0).ok_or_else(|| at("no content version".into()))?;
            if version < 3 {
                return Err(MergeError::unsupported(format!(
                    "{name}: delete block at byte {} is of version {version}, Kryo-serialized \
                     (only version 3, Avro, is merged)",
                    block.offset
                )));
            }
            let len = be_i32(content, 4).ok_or_else(|| at("no length".into()))?;
            let len = usize::try_from(len).map_err(|_| at(format!("length {len}")))?;
            let body = content
                .get(8..8usize.saturating_add(len))
                .ok_or_else(|| at(format!("length {len} runs past the block")))?;
            let (keys, ordering) = decode_delete_records(body).map_err(at)?;
            Ok(BlockRecords::Deletes {
                keys,
                ordering,
                instant: block.instant.clone(),
            })
        }
        other => Err(at(format!("block type {other} holds no records"))),
    }
}

/// The compiled writer schema of a data block's header, from `schemas` or compiled into it.
fn writer_schema(
    block: &Chosen,
    name: &str,
    schemas: &mut HashMap<String, Arc<AvroToArrow>>,
) -> Result<Arc<AvroToArrow>> {
    let text = block.header.get(&SCHEMA).ok_or_else(|| {
        MergeError::corrupt(format!(
            "{name}: block at byte {} (instant {}) does not decode: no schema in the block header",
            block.offset, block.instant
        ))
    })?;
    if let Some(d) = schemas.get(text) {
        return Ok(d.clone());
    }
    let d = Arc::new(AvroToArrow::new(text).map_err(|p| match p {
        SchemaProblem::Unsupported(s) => {
            MergeError::unsupported(format!("{name}: block at byte {}: {s}", block.offset))
        }
        SchemaProblem::Malformed(s) => MergeError::corrupt(format!(
            "{name}: block at byte {} (instant {}) does not decode: {s}",
            block.offset, block.instant
        )),
    })?);
    schemas.insert(text.clone(), d.clone());
    Ok(d)
}

/// Most bytes of keys and values one HFile data block may hold once decompressed (the
/// engine's memory cap is checked only after a block is decoded; this bounds what a small,
/// highly compressed block can make it allocate first).
const MAX_HFILE_BLOCK_CELLS: usize = 1 << 30;

/// An HFile's (key, value) cells.
type Cells = Vec<(Vec<u8>, Vec<u8>)>;

/// The (key, value) cells of an HFile data block's content, in key order.
fn hfile_cells(content: &[u8]) -> std::result::Result<Cells, HFileError> {
    let reader = HFileReader::open(content)?;
    let mut cells = Vec::new();
    let mut total = 0usize;
    for kv in reader.scan() {
        let (k, v) = kv?;
        total = total.saturating_add(k.len() + v.len());
        if total > MAX_HFILE_BLOCK_CELLS {
            return Err(HFileError::TooLarge(format!(
                "its cells hold more than {MAX_HFILE_BLOCK_CELLS} bytes"
            )));
        }
        cells.push((k, v));
    }
    Ok(cells)
}

/// Java Hudi's HFile blocks store a top-level field named `key` as an empty string (the HFile
/// key holds it) and its reader restores it when it reads it empty
/// (`HoodieAvroHFileReaderImplBase.deserialize`): put the HFile keys back the same way.
fn restore_blanked_keys(
    batch: RecordBatch,
    cells: &[(Vec<u8>, Vec<u8>)],
) -> Result<RecordBatch, String> {
    use arrow_array::{Array, StringArray};
    let schema = batch.schema();
    let Some((i, field)) = schema.column_with_name("key") else {
        return Ok(batch);
    };
    if field.data_type() != &arrow_schema::DataType::Utf8 {
        return Ok(batch);
    }
    let Some(col) = batch.column(i).as_any().downcast_ref::<StringArray>() else {
        return Ok(batch);
    };
    if !col.iter().any(|v| v == Some("")) {
        return Ok(batch);
    }
    let mut restored = Vec::with_capacity(col.len());
    for (row, v) in col.iter().enumerate() {
        restored.push(match v {
            Some("") => {
                let key = &cells[row].0;
                Some(
                    std::str::from_utf8(key)
                        .map_err(|_| format!("HFile key of record {row} is not UTF-8"))?,
                )
            }
            other => other,
        });
    }
    let mut columns = batch.columns().to_vec();
    columns[i] = Arc::new(StringArray::from(restored));
    RecordBatch::try_new(schema, columns).map_err(|e| e.to_string())
}

fn read_parquet_block(data: Bytes) -> Result<RecordBatch, String> {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let builder = ParquetRecordBatchReaderBuilder::try_new(data).map_err(|e| e.to_string())?;
    let schema = builder.schema().clone();
    let reader = builder
        .with_batch_size(8192)
        .build()
        .map_err(|e| e.to_string())?;
    let mut batches = Vec::new();
    for b in reader {
        batches.push(b.map_err(|e| e.to_string())?);
    }
    arrow_select::concat::concat_batches(&schema, &batches).map_err(|e| e.to_string())
}

/// The records of an Avro `HoodieDeleteRecordList` (`{deleteRecordList: [HoodieDeleteRecord]}`
/// with `recordKey`, `partitionPath` and the `orderingVal` union of wrapper records), decoded
/// by hand: the schema is fixed and not in the block.
pub fn decode_delete_records(body: &[u8]) -> Result<(Vec<String>, Vec<OrdVal>), String> {
    let mut input = AvroCursor::new(body);
    let mut keys = Vec::new();
    let mut ords = Vec::new();
    let opt_string = |input: &mut AvroCursor| -> Result<Option<String>, String> {
        match input.long()? {
            0 => Ok(None),
            1 => {
                let b = input.bytes()?;
                Ok(Some(
                    std::str::from_utf8(b)
                        .map_err(|_| "record key is not UTF-8".to_string())?
                        .to_string(),
                ))
            }
            i => Err(format!("union index {i} of a nullable string")),
        }
    };
    loop {
        let count = input.block_count()?;
        if count == 0 {
            break;
        }
        for _ in 0..count {
            // Each record takes at least three bytes (three union indexes), so a count past
            // the input ends in an error before it can allocate much.
            let key = opt_string(&mut input)?;
            let _partition = opt_string(&mut input)?;
            let ord = match input.long()? {
                0 => OrdVal::Default,
                1 => match input.byte()? {
                    0 => OrdVal::Bool(false),
                    1 => OrdVal::Bool(true),
                    b => return Err(format!("boolean byte {b}")),
                },
                2 => OrdVal::int(input.int()? as i64, Cls::Int),
                3 => OrdVal::int(input.long()?, Cls::Long),
                4 => {
                    let b = input.take(4)?;
                    OrdVal::Float(
                        f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64,
                        Cls::Float,
                    )
                }
                5 => {
                    let b = input.take(8)?;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(b);
                    OrdVal::Float(f64::from_le_bytes(a), Cls::Double)
                }
                6 => OrdVal::Bytes(input.bytes()?.to_vec()),
                7 => OrdVal::Str(input.bytes()?.to_vec()),
                8 => OrdVal::int(input.int()? as i64, Cls::Date),
                9 => OrdVal::Dec(decimal_from_be(input.bytes()?)?, 15),
                10 | 11 => OrdVal::int(input.long()?, Cls::Long),
                i => return Err(format!("union index {i} of orderingVal")),
            };
            let key = key.ok_or("a delete record without a record key")?;
            keys.push(key);
            ords.push(ord);
        }
    }
    if input.left() != 0 {
        return Err(format!("{} bytes after the delete records", input.left()));
    }
    Ok((keys, ords))
}

/// The records of a CDC log file's CDC data blocks (`cdc/` on tables with CDC enabled): each
/// block is laid out as an Avro data block, its records in the block header's CDC schema
/// (`op`, `record_key`, `before`, `after`, `ts_ms`, by supplemental logging mode). Blocks of
/// other types are ignored; a CDC block that does not decode is an error.
pub fn cdc_log_records(
    bytes: &Bytes,
    name: &str,
    schemas: &mut HashMap<String, Arc<AvroToArrow>>,
) -> Result<Vec<RecordBatch>> {
    let (blocks, problems) = scan_log_blocks(bytes);
    for p in problems {
        log::info!("{name}: {p} (a corrupt block; skipped)");
    }
    let mut out = Vec::new();
    for b in blocks
        .into_iter()
        .filter(|b| b.block_type == CDC_DATA_BLOCK)
    {
        let start = b.content.as_ptr() as usize - bytes.as_ptr() as usize;
        let chosen = Chosen {
            file: 0,
            offset: b.offset,
            block_type: AVRO_DATA_BLOCK,
            instant: b.header.get(&INSTANT_TIME).cloned().unwrap_or_default(),
            content: start..start + b.content.len(),
            header: b.header,
        };
        if let BlockRecords::Data { batch, .. } = decode_block(&chosen, bytes, name, schemas)? {
            out.push(batch);
        }
    }
    Ok(out)
}
