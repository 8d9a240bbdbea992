//! The metadata table (MDT) of a table written with
//! [`TableSpec::with_metadata_table`](super::TableSpec::with_metadata_table): its
//! `files` partition, written as Java Hudi writes it (`HoodieBackedTableMetadataWriter`,
//! `HoodieTableMetadataUtil`, `HoodieMetadataPayload`, `HoodieHFileDataBlock`).
//!
//! # On disk
//!
//! ```text
//! .hoodie/metadata/.hoodie/hoodie.properties     MERGE_ON_READ, HFILE base files, payload
//!                                                HoodieMetadataPayload, no meta fields
//! .hoodie/metadata/.hoodie/                      v6: the MDT timeline (layout 1)
//! .hoodie/metadata/.hoodie/timeline/             v8/v9: the MDT timeline (layout 2)
//! .hoodie/metadata/files/.hoodie_partition_metadata
//! .hoodie/metadata/files/<fg>_<token>_<init>.hfile       the initial base file
//! .hoodie/metadata/files/.<fg>_<init>.log.1_0-0-0        an empty delete block (initializeFileGroups)
//! .hoodie/metadata/files/.<fg>_<t>.log.<v>_<token>       one HFILE_DATA block per deltacommit
//! ```
//!
//! The file group is `files-0000` in table version 6 (Hudi 0.14's `getFileIDForFileGroup`) and
//! `files-0000-0` in 1.x. Log files are named, as data logs are, with the slice's base instant
//! and the next version in layout 1 (`.files-0000_<base>.log.<v>_<token>`), with the writing
//! instant and version 1 in layout 2 (`.files-0000-0_<t>.log.1_<token>`).
//!
//! # Instants
//!
//! - Initialization: `<latest completed data instant or 00000000000000>010` in v6
//!   (`createIndexInitTimestamp` over 0.x's 14-digit `SOLO_COMMIT_TIMESTAMP`, files is partition
//!   offset 0); in 1.x the latest completed data instant (of any action), or
//!   `00000000000000000` on a table with none. A
//!   deltacommit (`BULK_INSERT_PREPPED`) whose base HFile holds the table's committed files.
//! - Every data write, clean and compaction: an MDT deltacommit (`UPSERT_PREPPED`) with the
//!   **same instant time**, completed before the data instant completes.
//! - A data rollback: v6 writes an MDT deltacommit at the rollback's instant that adds the
//!   rollback's log files and the failed write's log files (`convertMetadataToRollbackRecords`,
//!   `reAddLogFilesFromRollbackPlan`), then, when the MDT holds a deltacommit of the failed
//!   write, rolls it back at `<rollback instant>006` (`OperationSuffix.ROLLBACK`) by appending a
//!   rollback command block in a new log file (`1-0-1`) — a completed one only (0.14's
//!   `HoodieBackedTableMetadataWriter.update(HoodieRollbackMetadata)`). 1.x writes no
//!   deltacommit: it rolls back the MDT deltacommit of the failed write (completed or inflight)
//!   at the data rollback's instant time, deleting its log file (as
//!   `v9_nonpartitioned_rollback` shows).
//! - MDT compaction ([`TableWriter::compact_metadata`]): `compaction.requested` / `.inflight`
//!   and a completed `commit`; v6 instant `<latest MDT deltacommit>001`
//!   (`createCompactionTimestamp`), 1.x a fresh instant.
//!
//! # Records
//!
//! `HoodieMetadataRecord` under the writer schema Java uses: the record schema with the five
//! Hudi meta fields in front (`HoodieAvroUtils.addMetadataFields`; null, as the MDT does not
//! populate them). The v9 and v8 schemas are the ones in the SCHEMA headers of the fixtures'
//! log blocks (`metadata_record_schema_v9.json` from `v9_nonpartitioned_rollback`,
//! `metadata_record_schema_v8.json` from `v8_trips_8i3u1d`: data copied from the fixtures); the
//! v6 one is derived from the v8 one by dropping what 1.0 added to 0.14's
//! `HoodieMetadata.avsc` (the `SecondaryIndexMetadata` field, column stats' `isTightBound`,
//! record index `position`) — an approximation: no 0.14-written MDT was at hand to copy. As Java does for the MDT, the `key` field of the value is the empty string (the
//! key is the HFile cell key). Type 1, key `__all_partitions__`: the partitions a commit touched
//! (size 0). Type 2, key the partition path (`.` for a non-partitioned table): file name →
//! `{size, isDeleted}`; a commit adds its written files (base, log and CDC files, with their
//! sizes), a clean marks its deleted files `isDeleted`. Merging ([`merge_file_info`]) follows
//! `HoodieMetadataPayload.combineFileSystemMetadata`: later records win per file name, a
//! deletion removes the file (or stays as a tombstone when the file is unknown), sizes take the
//! maximum.
//!
//! HFiles: GZIP, cells in key order; the log block's HFile carries file info `schema`, a base
//! file also `minRecordKey` / `maxRecordKey`. Not written: the base file's bloom filter meta
//! block (`bloomFilterTypeCode`), which readers of the `files` partition do not need.

use std::collections::{BTreeMap, BTreeSet};

use hudifs_storage::TablePath;
use serde_json::{json, Value as Json};

use super::{
    avro, escape_property, java_date, join, logfile, rel_path, Stat, TableWriter, CLOCK_STEP_MS,
};
use hudifs_core::error::{Error, Result};
use hudifs_core::listing;
use hudifs_core::timeline::{self, Action, Layout, State};

/// `HoodieMetadataRecord` as Hudi 1.1 (table version 9) and 1.0 (table version 8) write it
/// into MDT HFiles (with meta fields), copied from the SCHEMA header of Spark-written log
/// blocks (`v9_nonpartitioned_rollback`, `v8_trips_8i3u1d`).
const SCHEMA_V9: &str = include_str!("metadata_record_schema_v9.json");
const SCHEMA_V8: &str = include_str!("metadata_record_schema_v8.json");

/// The key of the partition list record (`HoodieTableMetadata.RECORDKEY_PARTITION_LIST`).
pub const ALL_PARTITIONS_KEY: &str = "__all_partitions__";
/// The partition key of a non-partitioned table (`NON_PARTITIONED_NAME`).
pub const NON_PARTITIONED_KEY: &str = ".";
/// Record type of the partition list (`METADATA_TYPE_PARTITION_LIST`).
pub const TYPE_PARTITION_LIST: i32 = 1;
/// Record type of a partition's files (`METADATA_TYPE_FILE_LIST`).
pub const TYPE_FILE_LIST: i32 = 2;
/// The Hudi meta fields in front of the writer schema.
const META_FIELDS: usize = 5;
/// The MDT's `files` partition directory, relative to the table root.
pub const FILES_PARTITION_DIR: &str = ".hoodie/metadata/files";
/// The write token of the files Hudi writes outside Spark tasks (`DEFAULT_WRITE_TOKEN`).
const INIT_LOG_TOKEN: &str = "0-0-0";
/// HFile block sizes: base files and HFile data blocks.
const BASE_BLOCK_SIZE: usize = 64 * 1024;
const LOG_BLOCK_SIZE: usize = 1024 * 1024;

/// One file of a `files` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    pub size: u64,
    pub is_deleted: bool,
}

/// One `HoodieMetadataRecord` of the `files` partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilesRecord {
    pub key: String,
    /// [`TYPE_PARTITION_LIST`] or [`TYPE_FILE_LIST`].
    pub record_type: i32,
    pub files: BTreeMap<String, FileInfo>,
}

/// Merge a newer record's files into an older one's, as `HoodieMetadataPayload` does: a newer
/// deletion removes a known file (and is kept as a tombstone for an unknown one), a newer
/// addition wins with the larger of the two sizes.
pub fn merge_file_info(older: &mut BTreeMap<String, FileInfo>, newer: &BTreeMap<String, FileInfo>) {
    for (name, info) in newer {
        match older.get(name).copied() {
            Some(old) if info.is_deleted => {
                if old.is_deleted {
                    older.insert(name.clone(), *info);
                } else {
                    older.remove(name);
                }
            }
            Some(old) => {
                older.insert(
                    name.clone(),
                    FileInfo {
                        size: old.size.max(info.size),
                        is_deleted: false,
                    },
                );
            }
            None => {
                older.insert(name.clone(), *info);
            }
        }
    }
}

/// Merge records in the order given (oldest first) into one record per key.
pub fn merge_records<'a>(
    records: impl IntoIterator<Item = &'a FilesRecord>,
) -> BTreeMap<String, FilesRecord> {
    let mut out: BTreeMap<String, FilesRecord> = BTreeMap::new();
    for r in records {
        match out.get_mut(&r.key) {
            Some(old) => merge_file_info(&mut old.files, &r.files),
            None => {
                out.insert(r.key.clone(), r.clone());
            }
        }
    }
    out
}

/// The MDT partition key of a data partition path.
pub fn partition_key(partition: &str) -> &str {
    if partition.is_empty() {
        NON_PARTITIONED_KEY
    } else {
        partition
    }
}

/// The writer schema (with meta fields) of MDT records for a table version, as the text Java
/// writes into HFile file info and log block headers.
pub fn record_schema(version: u32) -> Result<String> {
    match version {
        9 => Ok(SCHEMA_V9.trim_end().to_string()),
        8 => Ok(SCHEMA_V8.trim_end().to_string()),
        _ => {
            let mut v: Json = serde_json::from_str(SCHEMA_V8)
                .map_err(|e| Error::Invalid(format!("metadata record schema: {e}")))?;
            drop_fields(&mut v, "HoodieMetadataRecord", &["SecondaryIndexMetadata"]);
            drop_fields(&mut v, "HoodieMetadataColumnStats", &["isTightBound"]);
            drop_fields(&mut v, "HoodieRecordIndexInfo", &["position"]);
            Ok(v.to_string())
        }
    }
}

/// Remove fields from the record named `record` wherever it is defined in `v`.
fn drop_fields(v: &mut Json, record: &str, fields: &[&str]) {
    match v {
        Json::Object(o) => {
            if o.get("type").and_then(Json::as_str) == Some("record")
                && o.get("name").and_then(Json::as_str) == Some(record)
            {
                if let Some(Json::Array(fs)) = o.get_mut("fields") {
                    fs.retain(|f| {
                        !f.get("name")
                            .and_then(Json::as_str)
                            .is_some_and(|n| fields.contains(&n))
                    });
                }
            }
            for (_, child) in o.iter_mut() {
                drop_fields(child, record, fields);
            }
        }
        Json::Array(a) => a.iter_mut().for_each(|c| drop_fields(c, record, fields)),
        _ => {}
    }
}

/// The record schema without the meta fields (the `schema` of the MDT's commit metadata).
fn write_schema(schema: &str) -> Result<String> {
    let mut v: Json = serde_json::from_str(schema)
        .map_err(|e| Error::Invalid(format!("metadata record schema: {e}")))?;
    if let Some(Json::Array(fs)) = v.get_mut("fields") {
        fs.retain(|f| {
            !f.get("name")
                .and_then(Json::as_str)
                .is_some_and(|n| n.starts_with("_hoodie_"))
        });
    }
    Ok(v.to_string())
}

/// How many nullable fields follow `filesystemMetadata` in the writer schema (each written as
/// null); an error if the schema does not have the shape the encoder writes.
fn trailing_nulls(schema: &str) -> Result<usize> {
    let v: Json = serde_json::from_str(schema)
        .map_err(|e| Error::Invalid(format!("metadata record schema: {e}")))?;
    let fields = v
        .get("fields")
        .and_then(Json::as_array)
        .ok_or_else(|| Error::Invalid("metadata record schema has no fields".into()))?;
    let names: Vec<&str> = fields
        .iter()
        .map(|f| f.get("name").and_then(Json::as_str).unwrap_or(""))
        .collect();
    let expected_head = [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
        "_hoodie_partition_path",
        "_hoodie_file_name",
        "key",
        "type",
        "filesystemMetadata",
    ];
    if names.len() < expected_head.len() || names[..expected_head.len()] != expected_head {
        return Err(Error::Invalid(format!(
            "metadata record schema fields {names:?} do not start with {expected_head:?}"
        )));
    }
    let rest = &fields[expected_head.len()..];
    for f in rest {
        let nullable_first = f
            .get("type")
            .and_then(Json::as_array)
            .and_then(|b| b.first())
            .and_then(Json::as_str)
            == Some("null");
        if !nullable_first {
            return Err(Error::Invalid(format!(
                "metadata record schema field {f} is not a union with null first"
            )));
        }
    }
    Ok(rest.len())
}

fn write_long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    write_long(out, s.len() as i64);
    out.extend_from_slice(s.as_bytes());
}

/// The Avro binary value of a record under the writer schema: meta fields null, `key` empty
/// (the HFile key holds it), `type`, `filesystemMetadata`, then `trailing` null fields.
fn encode_value(r: &FilesRecord, trailing: usize) -> Vec<u8> {
    let mut out = vec![0u8; META_FIELDS];
    write_str(&mut out, "");
    write_long(&mut out, i64::from(r.record_type));
    write_long(&mut out, 1); // union branch: the map
    if !r.files.is_empty() {
        write_long(&mut out, r.files.len() as i64);
        for (name, info) in &r.files {
            write_str(&mut out, name);
            write_long(&mut out, info.size as i64);
            out.push(u8::from(info.is_deleted));
        }
    }
    write_long(&mut out, 0);
    out.resize(out.len() + trailing, 0);
    out
}

/// Decode a `files` record read from an MDT HFile (cell key and value) with the writer
/// `schema` (the file info's or the log block header's), with `apache_avro`.
pub fn decode_files_record(key: &[u8], value: &[u8], schema: &str) -> Result<FilesRecord> {
    use apache_avro::types::Value;
    let bad = |what: String| Error::Invalid(format!("metadata record: {what}"));
    let schema = apache_avro::Schema::parse_str(schema).map_err(|e| bad(e.to_string()))?;
    let mut reader = value;
    let v =
        apache_avro::from_avro_datum(&schema, &mut reader, None).map_err(|e| bad(e.to_string()))?;
    if !reader.is_empty() {
        return Err(bad(format!("{} bytes after the record", reader.len())));
    }
    let Value::Record(fields) = v else {
        return Err(bad("not a record".into()));
    };
    let field = |name: &str| fields.iter().find(|(n, _)| n == name).map(|(_, v)| v);
    let record_type = match field("type") {
        Some(Value::Int(t)) => *t,
        other => return Err(bad(format!("type {other:?}"))),
    };
    let key = String::from_utf8(key.to_vec()).map_err(|e| bad(e.to_string()))?;
    let mut files = BTreeMap::new();
    match field("filesystemMetadata") {
        Some(Value::Union(_, inner)) => match inner.as_ref() {
            Value::Null => {}
            Value::Map(m) => {
                for (name, info) in m {
                    let Value::Record(f) = info else {
                        return Err(bad(format!("file info of {name}")));
                    };
                    let size = match f.iter().find(|(n, _)| n == "size") {
                        Some((_, Value::Long(s))) => {
                            u64::try_from(*s).map_err(|e| bad(e.to_string()))?
                        }
                        other => return Err(bad(format!("size {other:?}"))),
                    };
                    let is_deleted = match f.iter().find(|(n, _)| n == "isDeleted") {
                        Some((_, Value::Boolean(b))) => *b,
                        other => return Err(bad(format!("isDeleted {other:?}"))),
                    };
                    files.insert(name.clone(), FileInfo { size, is_deleted });
                }
            }
            other => return Err(bad(format!("filesystemMetadata {other:?}"))),
        },
        other => return Err(bad(format!("filesystemMetadata {other:?}"))),
    }
    Ok(FilesRecord {
        key,
        record_type,
        files,
    })
}

/// An HFile of `records` (one cell per key, in key order).
fn records_hfile(
    records: &BTreeMap<String, FilesRecord>,
    schema: &str,
    trailing: usize,
    base: bool,
    create_time_ms: i64,
) -> Result<Vec<u8>> {
    use hudifs_hfile::writer::{Options, Writer};
    let err = |e: hudifs_hfile::HFileError| Error::Invalid(format!("metadata HFile: {e}"));
    let mut w = Writer::new(Options {
        codec: hudifs_hfile::Codec::Gzip,
        block_size: if base {
            BASE_BLOCK_SIZE
        } else {
            LOG_BLOCK_SIZE
        },
        index_fanout: None,
        create_time_ms,
    })
    .map_err(err)?;
    w.add_file_info("schema", schema.as_bytes());
    if base {
        if let (Some(min), Some(max)) = (records.keys().next(), records.keys().next_back()) {
            w.add_file_info("minRecordKey", min.as_bytes());
            w.add_file_info("maxRecordKey", max.as_bytes());
        }
    }
    for (key, r) in records {
        w.append(key.as_bytes(), &encode_value(r, trailing))
            .map_err(err)?;
    }
    w.finish().map_err(err)
}

/// The `files` records of a commit: the partition list of every partition it touched and one
/// record per partition of the files it wrote (`convertMetadataToFilesPartitionRecords`).
pub(super) fn commit_records(files: &BTreeMap<String, Vec<(String, u64)>>) -> Vec<FilesRecord> {
    let mut out = vec![FilesRecord {
        key: ALL_PARTITIONS_KEY.into(),
        record_type: TYPE_PARTITION_LIST,
        files: files
            .keys()
            .map(|p| {
                (
                    partition_key(p).to_string(),
                    FileInfo {
                        size: 0,
                        is_deleted: false,
                    },
                )
            })
            .collect(),
    }];
    for (p, names) in files {
        let mut m: BTreeMap<String, FileInfo> = BTreeMap::new();
        for (n, size) in names {
            let e = m.entry(n.clone()).or_insert(FileInfo {
                size: 0,
                is_deleted: false,
            });
            e.size = e.size.max(*size);
        }
        out.push(FilesRecord {
            key: partition_key(p).to_string(),
            record_type: TYPE_FILE_LIST,
            files: m,
        });
    }
    out
}

/// The `files` records of a clean: per partition, its deleted files marked `isDeleted`.
pub(super) fn deletion_records(deleted: &BTreeMap<String, Vec<String>>) -> Vec<FilesRecord> {
    deleted
        .iter()
        .map(|(p, names)| FilesRecord {
            key: partition_key(p).to_string(),
            record_type: TYPE_FILE_LIST,
            files: names
                .iter()
                .map(|n| {
                    (
                        n.clone(),
                        FileInfo {
                            size: 0,
                            is_deleted: true,
                        },
                    )
                })
                .collect(),
        })
        .collect()
}

/// State of an MDT deltacommit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MdtCommitState {
    Inflight,
    Completed,
    RolledBack,
}

#[derive(Debug, Clone)]
struct MdtLog {
    name: String,
    /// The MDT instant that wrote it.
    instant: String,
    /// The base instant of the slice it belongs to.
    slice: String,
    version: u32,
    size: u64,
    /// The data block's records (empty for the init log and command blocks).
    records: Vec<FilesRecord>,
}

#[derive(Debug, Clone)]
struct MdtCompaction {
    instant: String,
    /// The records of the new base file (merged when scheduled).
    records: BTreeMap<String, FilesRecord>,
    /// Logs folded into the new base.
    delta_files: Vec<String>,
    written: Option<(String, u64)>,
    state: State,
}

/// The writer's model of the metadata table.
#[derive(Debug, Clone)]
pub(super) struct MetadataTable {
    schema: String,
    write_schema: String,
    trailing: usize,
    file_id: String,
    layout: Layout,
    version: u32,
    timeline_dir: TablePath,
    init_instant: String,
    /// The completed base file: base instant, name, size, records.
    base: (String, String, u64, BTreeMap<String, FilesRecord>),
    /// Logs since the completed base, oldest first.
    logs: Vec<MdtLog>,
    commits: BTreeMap<String, MdtCommitState>,
    compaction: Option<MdtCompaction>,
    /// Completed compactions (instant → completion).
    compactions_done: BTreeMap<String, String>,
    /// Write token counter of MDT files.
    attempt: u32,
}

impl MetadataTable {
    fn files_dir(&self) -> TablePath {
        TablePath::new(FILES_PARTITION_DIR).unwrap_or_default()
    }

    fn token(&mut self) -> String {
        self.attempt += 1;
        format!("0-{}-{}", self.attempt, self.attempt)
    }

    /// The base instant new logs belong to: a scheduled compaction's, else the base's.
    fn current_slice(&self) -> String {
        match &self.compaction {
            Some(c) => c.instant.clone(),
            None => self.base.0.clone(),
        }
    }

    fn instant_path(
        &self,
        requested: &str,
        completion: Option<&str>,
        action: Action,
        state: State,
    ) -> TablePath {
        let name = timeline::instant_file_name(requested, completion, action, state, self.layout);
        join(&self.timeline_dir, &name).unwrap_or_default()
    }

    /// The records of committed data blocks merged over the completed base, oldest first.
    fn merged(&self) -> BTreeMap<String, FilesRecord> {
        let mut all: Vec<&FilesRecord> = self.base.3.values().collect();
        let mut logs: Vec<&MdtLog> = self
            .logs
            .iter()
            .filter(|l| self.commits.get(&l.instant) == Some(&MdtCommitState::Completed))
            .collect();
        logs.sort_by(|a, b| a.instant.cmp(&b.instant));
        for l in logs {
            all.extend(l.records.iter());
        }
        merge_records(all)
    }
}

/// What the MDT holds, for tests and tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataTableInfo {
    /// The initialization instant.
    pub init_instant: String,
    /// The `files` file group id (`files-0000` or `files-0000-0`).
    pub file_id: String,
    /// The completed base file's name.
    pub base_file: String,
    /// Log files since the completed base (names, oldest first).
    pub log_files: Vec<String>,
    /// MDT deltacommits and their state.
    pub deltacommits: BTreeMap<String, MdtCommitState>,
    /// A scheduled MDT compaction not yet complete.
    pub pending_compaction: Option<String>,
    /// Completed MDT compactions.
    pub compactions: Vec<String>,
}

impl TableWriter {
    /// Whether the table has a metadata table.
    pub fn has_metadata_table(&self) -> bool {
        self.mdt.is_some()
    }

    /// The state of the metadata table, if any.
    pub fn metadata_table(&self) -> Option<MetadataTableInfo> {
        let m = self.mdt.as_ref()?;
        Some(MetadataTableInfo {
            init_instant: m.init_instant.clone(),
            file_id: m.file_id.clone(),
            base_file: m.base.1.clone(),
            log_files: m.logs.iter().map(|l| l.name.clone()).collect(),
            deltacommits: m.commits.clone(),
            pending_compaction: m.compaction.as_ref().map(|c| c.instant.clone()),
            compactions: m.compactions_done.keys().cloned().collect(),
        })
    }

    /// The `files` records the MDT's committed blocks give, merged (what a reader of the MDT
    /// should see), by key.
    pub fn metadata_records(&self) -> BTreeMap<String, FilesRecord> {
        self.mdt.as_ref().map(|m| m.merged()).unwrap_or_default()
    }

    /// The data and log files of committed writes still on disk, by partition key (`.` for a
    /// non-partitioned table) — what the MDT's `files` partition must list. Computed from the
    /// writer's own model (file groups, their slices and committed logs), not from the MDT.
    pub fn committed_files(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        let mut out: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for p in &self.partitions {
            out.entry(partition_key(p).to_string()).or_default();
        }
        let size_of = |p: &str, n: &str| {
            self.written
                .get(&rel_path(p, n))
                .map(|w| w.size)
                .unwrap_or_default()
        };
        // Layout 1 rollbacks leave the failed write's logs and the command block logs on disk,
        // and Hudi 0.x's rollback adds them to the MDT (`reAddLogFilesFromRollbackPlan`).
        let rolled_back: BTreeSet<&str> = self
            .events
            .iter()
            .filter(|e| e.rolled_back_by.is_some() || e.action == Action::Rollback)
            .map(|e| e.instant.as_str())
            .collect();
        for ((p, _), g) in &self.groups {
            let files = out.entry(partition_key(p).to_string()).or_default();
            for s in &g.slices {
                if let Some(b) = &s.base_file {
                    files.insert(b.clone(), size_of(p, b));
                }
                for l in &s.logs {
                    let listed = l.committed
                        || (self.layout == Layout::V1 && rolled_back.contains(l.writer.as_str()));
                    if listed {
                        files.insert(l.name.clone(), l.size);
                    }
                }
            }
        }
        for files in self
            .cdc
            .iter()
            .filter(|(t, _)| self.completed.contains_key(*t))
        {
            for rel in files.1 {
                let (p, n) = match rel.rsplit_once('/') {
                    Some((p, n)) => (p, n),
                    None => ("", rel.as_str()),
                };
                if self
                    .store
                    .stat(&super::data_path(p, n).unwrap_or_default())
                    .is_ok()
                {
                    out.entry(partition_key(p).to_string())
                        .or_default()
                        .insert(n.to_string(), size_of(p, n));
                }
            }
        }
        out
    }

    /// Create the metadata table now (its `files` partition), initialized from the table's
    /// committed files, and record `hoodie.table.metadata.partitions=files` in
    /// `hoodie.properties`. Called by [`TableWriter::create`] for a spec with
    /// [`TableSpec::with_metadata_table`](super::TableSpec::with_metadata_table); on an
    /// existing table it is Hudi enabling the MDT later (no write may be in flight, as Hudi
    /// requires).
    pub fn enable_metadata_table(&mut self) -> Result<()> {
        if self.mdt.is_some() {
            return Err(Error::Usage(
                "the table already has a metadata table".into(),
            ));
        }
        if !self.pending.is_empty() || !self.pending_compactions().is_empty() {
            return Err(Error::Usage(
                "cannot initialize the metadata table while actions are in flight".into(),
            ));
        }
        let version = self.spec.version;
        let layout = self.layout;
        // The latest completed action of any kind (`filterCompletedInstants().lastInstant()`).
        let latest = self
            .events
            .iter()
            .filter(|e| e.state == State::Completed)
            .map(|e| e.instant.clone())
            .max();
        let init = if layout == Layout::V1 {
            format!("{}010", latest.as_deref().map_or("00000000000000", |t| t))
        } else {
            latest.unwrap_or_else(|| "00000000000000000".to_string())
        };
        let file_id = if layout == Layout::V1 {
            "files-0000".to_string()
        } else {
            "files-0000-0".to_string()
        };
        let schema = record_schema(version)?;
        let mdt_root = TablePath::new(".hoodie/metadata/.hoodie").unwrap_or_default();
        let timeline_dir = match layout {
            Layout::V1 => mdt_root.clone(),
            Layout::V2 => join(&mdt_root, "timeline")?,
        };
        let mut dirs = vec![timeline_dir.clone(), join(&mdt_root, ".schema")?];
        dirs.push(match layout {
            Layout::V1 => join(&mdt_root, "archived")?,
            Layout::V2 => join(&timeline_dir, "history")?,
        });
        for d in &dirs {
            self.store
                .create_dir_all(d)
                .map_err(|e| Error::io(self.store.describe(d), e))?;
        }
        let mut m = MetadataTable {
            write_schema: write_schema(&schema)?,
            trailing: trailing_nulls(&schema)?,
            schema,
            file_id: file_id.clone(),
            layout,
            version,
            timeline_dir,
            init_instant: init.clone(),
            base: (init.clone(), String::new(), 0, BTreeMap::new()),
            logs: Vec::new(),
            commits: BTreeMap::new(),
            compaction: None,
            compactions_done: BTreeMap::new(),
            attempt: 0,
        };
        let props = self.mdt_properties_text(&m)?;
        self.put_atomic(&join(&mdt_root, "hoodie.properties")?, props.as_bytes())?;
        let files_dir = m.files_dir();
        let meta = format!(
            "#partition metadata\n#{}\ncommitTime={init}\npartitionDepth=1\n",
            java_date(self.clock_ms)?
        );
        self.put_atomic(
            &join(&files_dir, listing::PARTITION_METAFILE)?,
            meta.as_bytes(),
        )?;

        // The records of the table as it is: every partition, the committed files of each.
        let committed = self.committed_files();
        let mut records = vec![FilesRecord {
            key: ALL_PARTITIONS_KEY.into(),
            record_type: TYPE_PARTITION_LIST,
            files: committed
                .keys()
                .map(|k| {
                    (
                        k.clone(),
                        FileInfo {
                            size: 0,
                            is_deleted: false,
                        },
                    )
                })
                .collect(),
        }];
        for (k, files) in &committed {
            records.push(FilesRecord {
                key: k.clone(),
                record_type: TYPE_FILE_LIST,
                files: files
                    .iter()
                    .map(|(n, s)| {
                        (
                            n.clone(),
                            FileInfo {
                                size: *s,
                                is_deleted: false,
                            },
                        )
                    })
                    .collect(),
            });
        }
        let records = merge_records(&records);

        // The init deltacommit: requested, inflight, the empty log of initializeFileGroups,
        // the base file (bulk insert), completed.
        let requested = m.instant_path(&init, None, Action::DeltaCommit, State::Requested);
        self.put_atomic(&requested, b"")?;
        let inflight = m.instant_path(&init, None, Action::DeltaCommit, State::Inflight);
        self.put_atomic(&inflight, b"")?;
        let log_name = listing::log_file_name(&file_id, &init, 1, INIT_LOG_TOKEN);
        let delete_block = empty_delete_block(&init);
        self.put(&join(&files_dir, &log_name)?, &delete_block)?;
        m.logs.push(MdtLog {
            name: log_name,
            instant: init.clone(),
            slice: init.clone(),
            version: 1,
            size: delete_block.len() as u64,
            records: Vec::new(),
        });
        let token = m.token();
        let base_name = listing::base_file_name(&file_id, &token, &init, "hfile");
        let bytes = records_hfile(&records, &m.schema, m.trailing, true, self.clock_ms)?;
        self.put(&join(&files_dir, &base_name)?, &bytes)?;
        let size = bytes.len() as u64;
        let stat = Stat {
            partition: "files".into(),
            file_id: file_id.clone(),
            path: format!("files/{base_name}"),
            prev_commit: "null".into(),
            num_writes: records.len(),
            num_inserts: records.len(),
            size,
            ..Stat::default()
        };
        let completion = self.next_time()?;
        let meta = self.mdt_commit_json(&m, &[stat], "BULK_INSERT_PREPPED", false);
        let path = m.instant_path(
            &init,
            Some(&completion),
            Action::DeltaCommit,
            State::Completed,
        );
        self.mdt_write_instant(&path, &avro::commit_metadata(), &meta, true)?;
        m.base = (init.clone(), base_name, size, records);
        // The init log was written by the init instant and holds no records: fold it into the
        // base slice.
        m.commits.insert(init, MdtCommitState::Completed);
        self.mdt = Some(m);
        let props = self.properties_text()?;
        self.put_atomic(
            &TablePath::new(".hoodie/hoodie.properties").unwrap_or_default(),
            props.as_bytes(),
        )?;
        Ok(())
    }

    fn mdt_properties_text(&self, m: &MetadataTable) -> Result<String> {
        let name = format!("{}_metadata", self.spec.name);
        let version = m.version.to_string();
        let mut p: Vec<(&str, String)> = vec![
            ("hoodie.table.name", name),
            ("hoodie.table.type", "MERGE_ON_READ".into()),
            ("hoodie.table.version", version.clone()),
            (
                "hoodie.timeline.layout.version",
                m.layout.number().to_string(),
            ),
            ("hoodie.table.base.file.format", "HFILE".into()),
            ("hoodie.table.recordkey.fields", "key".into()),
            ("hoodie.populate.meta.fields", "false".into()),
            (
                "hoodie.compaction.payload.class",
                "org.apache.hudi.metadata.HoodieMetadataPayload".into(),
            ),
            (
                "hoodie.datasource.write.drop.partition.columns",
                "false".into(),
            ),
        ];
        if m.layout == Layout::V2 {
            p.push((
                "hoodie.table.keygenerator.type",
                "HOODIE_TABLE_METADATA".into(),
            ));
            p.push(("hoodie.archivelog.folder", "history".into()));
            p.push(("hoodie.timeline.path", "timeline".into()));
            p.push(("hoodie.timeline.history.path", "history".into()));
            p.push(("hoodie.table.initial.version", version));
            p.push(("hoodie.record.merge.mode", "CUSTOM".into()));
            p.push((
                "hoodie.record.merge.strategy.id",
                "00000000-0000-0000-0000-000000000000".into(),
            ));
        } else {
            p.push((
                "hoodie.table.keygenerator.class",
                "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator".into(),
            ));
            p.push(("hoodie.archivelog.folder", "archived".into()));
        }
        let saved = super::datetime(self.clock_ms)?.format("%Y-%m-%dT%H:%M:%S%.3fZ");
        let mut text = format!(
            "#Properties saved on {saved}\n#{}\n",
            java_date(self.clock_ms)?
        );
        for (k, v) in p {
            text.push_str(&format!("{k}={}\n", escape_property(&v)));
        }
        Ok(text)
    }

    /// Write an MDT timeline file (JSON in layout 1 when `json_in_layout1`, else an Avro
    /// container), under a temporary name renamed into place. Not recorded as published: the
    /// MDT timeline is not the data timeline.
    fn mdt_write_instant(
        &self,
        path: &TablePath,
        schema: &avro::Schema,
        v: &Json,
        json_in_layout1: bool,
    ) -> Result<()> {
        let bytes = if json_in_layout1 && self.layout == Layout::V1 {
            serde_json::to_vec_pretty(v).map_err(|e| Error::Invalid(e.to_string()))?
        } else {
            avro::container(schema, std::slice::from_ref(v), path.name())
                .map_err(|e| Error::Invalid(format!("{}: {e}", path.name())))?
        };
        self.put_atomic(path, &bytes).map(|_| ())
    }

    fn mdt_commit_json(
        &self,
        m: &MetadataTable,
        stats: &[Stat],
        operation: &str,
        compacted: bool,
    ) -> Json {
        let stats: Vec<Json> = stats.iter().map(|s| s.to_json(self.layout)).collect();
        let by_partition = if stats.is_empty() {
            json!({})
        } else {
            json!({ "files": stats })
        };
        json!({
            "partitionToWriteStats": by_partition,
            "compacted": compacted,
            "extraMetadata": {"schema": m.write_schema},
            "operationType": operation,
        })
    }

    /// Write an MDT deltacommit at `instant` holding `records` in one HFile data block of a new
    /// log file of the `files` group; completed when `complete` (else left inflight with its
    /// log on disk). Does nothing on a table without a metadata table.
    pub(super) fn mdt_deltacommit(
        &mut self,
        instant: &str,
        records: Vec<FilesRecord>,
        complete: bool,
    ) -> Result<()> {
        let Some(mut m) = self.mdt.take() else {
            return Ok(());
        };
        let r = self.mdt_deltacommit_in(&mut m, instant, records, complete);
        self.mdt = Some(m);
        r
    }

    fn mdt_deltacommit_in(
        &mut self,
        m: &mut MetadataTable,
        instant: &str,
        records: Vec<FilesRecord>,
        complete: bool,
    ) -> Result<()> {
        if m.commits.contains_key(instant) {
            return Err(Error::Usage(format!(
                "the metadata table already has a deltacommit at {instant}"
            )));
        }
        let records = merge_records(&records);
        let slice = m.current_slice();
        let requested = m.instant_path(instant, None, Action::DeltaCommit, State::Requested);
        self.put_atomic(&requested, b"")?;
        let workload = json!({
            "partitionToWriteStats": {"files": [{
                "fileId": m.file_id, "path": null, "prevCommit": slice, "numWrites": 0,
                "numDeletes": 0, "numUpdateWrites": records.len(), "numInserts": 0,
                "totalWriteBytes": 0, "totalWriteErrors": 0, "partitionPath": null,
                "fileSizeInBytes": 0}]},
            "compacted": false, "extraMetadata": {}, "operationType": "UPSERT_PREPPED"});
        let inflight = m.instant_path(instant, None, Action::DeltaCommit, State::Inflight);
        self.mdt_write_instant(&inflight, &avro::commit_metadata(), &workload, true)?;
        m.commits
            .insert(instant.to_string(), MdtCommitState::Inflight);

        let mut stats = Vec::new();
        if !records.is_empty() {
            let token = m.token();
            let (name_instant, version) = if m.layout == Layout::V1 {
                let v = m
                    .logs
                    .iter()
                    .filter(|l| l.slice == slice)
                    .map(|l| l.version)
                    .max()
                    .unwrap_or(0)
                    + 1;
                (slice.clone(), v)
            } else {
                (instant.to_string(), 1)
            };
            let name = listing::log_file_name(&m.file_id, &name_instant, version, &token);
            let hfile = records_hfile(&records, &m.schema, m.trailing, false, self.clock_ms)?;
            let block = logfile::blocks::raw(
                logfile::blocks::HFILE_DATA,
                &[
                    (logfile::blocks::INSTANT_TIME, instant),
                    (logfile::blocks::SCHEMA, &m.schema),
                ],
                &hfile,
            );
            self.put(&join(&m.files_dir(), &name)?, &block)?;
            let size = block.len() as u64;
            let log_files = if m.layout == Layout::V1 {
                let mut v: Vec<String> = m
                    .logs
                    .iter()
                    .filter(|l| l.slice == slice)
                    .map(|l| l.name.clone())
                    .collect();
                v.push(name.clone());
                v
            } else {
                vec![name.clone()]
            };
            let base_file = if m.layout == Layout::V1 && slice == m.base.0 {
                m.base.1.clone()
            } else {
                String::new()
            };
            stats.push(Stat {
                partition: "files".into(),
                file_id: m.file_id.clone(),
                path: format!("files/{name}"),
                prev_commit: if m.layout == Layout::V1 {
                    slice.clone()
                } else {
                    instant.to_string()
                },
                num_writes: records.len(),
                num_update_writes: records.len(),
                size,
                log: Some((version, base_file, log_files)),
                ..Stat::default()
            });
            m.logs.push(MdtLog {
                name,
                instant: instant.to_string(),
                slice,
                version,
                size,
                records: records.into_values().collect(),
            });
        }
        if complete {
            let completion = self.next_time()?;
            let meta = self.mdt_commit_json(m, &stats, "UPSERT_PREPPED", false);
            let path = m.instant_path(
                instant,
                Some(&completion),
                Action::DeltaCommit,
                State::Completed,
            );
            self.mdt_write_instant(&path, &avro::commit_metadata(), &meta, true)?;
            m.commits
                .insert(instant.to_string(), MdtCommitState::Completed);
        }
        Ok(())
    }

    /// Roll back the MDT deltacommit `target` (completed or inflight) with an MDT rollback at
    /// `rollback`: layout 1 appends a rollback command block in a new log file of the slice
    /// (token `1-0-1`), layout 2 deletes the deltacommit's log file; the deltacommit's instant
    /// files are deleted and the rollback completes (`HoodieRollbackMetadata`).
    pub(super) fn mdt_rollback(&mut self, rollback: &str, target: &str) -> Result<()> {
        let Some(mut m) = self.mdt.take() else {
            return Ok(());
        };
        let r = self.mdt_rollback_in(&mut m, rollback, target);
        self.mdt = Some(m);
        r
    }

    fn mdt_rollback_in(
        &mut self,
        m: &mut MetadataTable,
        rollback: &str,
        target: &str,
    ) -> Result<()> {
        match m.commits.get(target) {
            Some(MdtCommitState::Inflight | MdtCommitState::Completed) => {}
            _ => {
                return Err(Error::Usage(format!(
                    "the metadata table has no deltacommit {target} to roll back"
                )))
            }
        }
        let was_completed = m.commits.get(target) == Some(&MdtCommitState::Completed);
        let files_dir = m.files_dir();
        let target_logs: Vec<MdtLog> = m
            .logs
            .iter()
            .filter(|l| l.instant == target)
            .cloned()
            .collect();
        let mut requests = Vec::new();
        for l in &target_logs {
            let rel = format!("{FILES_PARTITION_DIR}/{}", l.name);
            if m.layout == Layout::V2 {
                requests.push(json!({"partitionPath": "files", "fileId": "",
                    "latestBaseInstant": "", "filesToBeDeleted": [rel],
                    "logBlocksToBeDeleted": {}}));
            } else {
                requests.push(json!({"partitionPath": "files", "fileId": m.file_id,
                    "latestBaseInstant": l.slice, "filesToBeDeleted": [],
                    "logBlocksToBeDeleted": {rel: l.size}}));
            }
        }
        let plan = json!({
            "instantToRollback": {"commitTime": target, "action": "deltacommit"},
            "RollbackRequests": requests,
            "version": 1,
        });
        let path = m.instant_path(rollback, None, Action::Rollback, State::Requested);
        self.mdt_write_instant(&path, &avro::rollback_plan(), &plan, false)?;
        let path = m.instant_path(rollback, None, Action::Rollback, State::Inflight);
        self.put_atomic(&path, b"")?;
        let (mut ok, mut rollback_logs, mut failed_logs) =
            (Vec::new(), serde_json::Map::new(), serde_json::Map::new());
        for l in &target_logs {
            let rel = format!("{FILES_PARTITION_DIR}/{}", l.name);
            if m.layout == Layout::V2 {
                if self.delete(&join(&files_dir, &l.name)?)? {
                    ok.push(rel);
                }
                m.logs.retain(|x| x.name != l.name);
            } else {
                failed_logs.insert(rel, json!(l.size));
                let version = m
                    .logs
                    .iter()
                    .filter(|x| x.slice == l.slice)
                    .map(|x| x.version)
                    .max()
                    .unwrap_or(0)
                    + 1;
                let name = listing::log_file_name(
                    &m.file_id,
                    &l.slice,
                    version,
                    logfile::UNKNOWN_WRITE_TOKEN,
                );
                let bytes = logfile::rollback_command_block(rollback, target);
                self.put(&join(&files_dir, &name)?, &bytes)?;
                rollback_logs.insert(format!("{FILES_PARTITION_DIR}/{name}"), json!(bytes.len()));
                m.logs.push(MdtLog {
                    name,
                    instant: rollback.to_string(),
                    slice: l.slice.clone(),
                    version,
                    size: bytes.len() as u64,
                    records: Vec::new(),
                });
            }
        }
        // The rolled-back instant disappears from the MDT timeline (the completed file first,
        // as Hudi deletes it before the requested and inflight ones).
        if was_completed {
            let completed: Vec<String> = self
                .store
                .list_names(&m.timeline_dir)
                .map_err(|e| Error::io(self.store.describe(&m.timeline_dir), e))?
                .into_iter()
                .map(|(n, _)| n)
                .filter(|n| {
                    timeline::parse_instant_file_name(n, m.layout).is_some_and(|f| {
                        f.requested == target
                            && f.state == State::Completed
                            && f.action == Action::DeltaCommit
                    })
                })
                .collect();
            for n in completed {
                self.delete(&join(&m.timeline_dir, &n)?)?;
            }
        }
        for state in [State::Inflight, State::Requested] {
            self.delete(&m.instant_path(target, None, Action::DeltaCommit, state))?;
        }
        let total = ok.len();
        let meta = json!({
            "startRollbackTime": rollback,
            "timeTakenInMillis": CLOCK_STEP_MS,
            "totalFilesDeleted": total,
            "commitsRollback": [target],
            "partitionMetadata": {"files": {"partitionPath": "files", "successDeleteFiles": ok,
                "failedDeleteFiles": [], "rollbackLogFiles": rollback_logs,
                "logFilesFromFailedCommit": failed_logs}},
            "version": 1,
            "instantsRollback": [{"commitTime": target, "action": "deltacommit"}],
        });
        let completion = self.next_time()?;
        let path = m.instant_path(
            rollback,
            Some(&completion),
            Action::Rollback,
            State::Completed,
        );
        self.mdt_write_instant(&path, &avro::rollback_metadata(), &meta, false)?;
        m.commits
            .insert(target.to_string(), MdtCommitState::RolledBack);
        Ok(())
    }

    /// The MDT side of a data rollback of `failed` at `rollback` (see the module doc):
    /// `listed_logs` are the log files (partition, name, size) the data rollback leaves on disk
    /// (layout 1: the failed write's logs and the command block logs).
    pub(super) fn mdt_on_data_rollback(
        &mut self,
        rollback: &str,
        failed: &str,
        listed_logs: &[(String, String, u64)],
    ) -> Result<()> {
        let Some(m) = &self.mdt else {
            return Ok(());
        };
        // Hudi 0.14 rolls back a completed MDT deltacommit only (an inflight one is left to
        // the MDT writer's own cleaning of failed writes); 1.x one in any state.
        let has_target = match m.commits.get(failed) {
            Some(MdtCommitState::Completed) => true,
            Some(MdtCommitState::Inflight) => self.layout == Layout::V2,
            _ => false,
        };
        if self.layout == Layout::V1 {
            let mut files: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
            for (p, n, s) in listed_logs {
                files.entry(p.clone()).or_default().push((n.clone(), *s));
            }
            // convertFilesToFilesPartitionRecords with no deletions: partition records only.
            let records: Vec<FilesRecord> = commit_records(&files)
                .into_iter()
                .filter(|r| r.record_type == TYPE_FILE_LIST)
                .collect();
            self.mdt_deltacommit(rollback, records, true)?;
            if has_target {
                self.mdt_rollback(&format!("{rollback}006"), failed)?;
            }
        } else if has_target {
            self.mdt_rollback(rollback, failed)?;
        }
        Ok(())
    }

    /// Roll back, in the metadata table alone, its deltacommit `instant` (completed or left
    /// inflight), as Hudi's MDT write client does with a failed MDT write before its next one
    /// (eager cleaning of failed writes). The rollback takes a fresh instant. Leaves the MDT
    /// without that
    /// deltacommit's records: if the data write `instant` completed, the MDT is then behind
    /// the data timeline. Returns the MDT rollback's instant.
    pub fn rollback_metadata_deltacommit(&mut self, instant: &str) -> Result<String> {
        if self.mdt.is_none() {
            return Err(Error::Usage("the table has no metadata table".into()));
        }
        let rollback = self.next_time()?;
        self.mdt_rollback(&rollback, instant)?;
        Ok(rollback)
    }

    /// Compact the metadata table: schedule (`compaction.requested` with the plan) and run
    /// ([`TableWriter::run_metadata_compaction`]) a compaction of the `files` group into a new
    /// base HFile holding the merged records, completed as an MDT `commit`. The instant is
    /// `<latest MDT deltacommit>001` in v6, a fresh one in 1.x. Returns it.
    pub fn compact_metadata(&mut self) -> Result<String> {
        let t = self.schedule_metadata_compaction()?;
        self.run_metadata_compaction(&t, true)?;
        Ok(t)
    }

    /// Schedule an MDT compaction (`<t>.compaction.requested`): the plan folds every committed
    /// log since the base. Refused while a data write is in flight (Hudi compacts the MDT only
    /// when no data instant is pending) or another MDT compaction is pending. From now on new
    /// MDT logs belong to the new slice (in v6 they are named with `<t>`), so the `files`
    /// partition has two slices until the compaction completes. Returns `t`.
    pub fn schedule_metadata_compaction(&mut self) -> Result<String> {
        let Some(m) = &self.mdt else {
            return Err(Error::Usage("the table has no metadata table".into()));
        };
        if m.compaction.is_some() {
            return Err(Error::Usage(
                "a metadata table compaction is already pending".into(),
            ));
        }
        if !self.pending.is_empty() {
            return Err(Error::Usage(
                "the metadata table is not compacted while data writes are in flight".into(),
            ));
        }
        let latest = m
            .commits
            .iter()
            .filter(|(_, s)| **s == MdtCommitState::Completed)
            .map(|(t, _)| t.clone())
            .next_back()
            .unwrap_or_else(|| m.init_instant.clone());
        let instant = if self.layout == Layout::V1 {
            let t = format!("{latest}001");
            if m.compactions_done.contains_key(&t) {
                return Err(Error::Usage(format!(
                    "no metadata table deltacommit since its compaction {t}"
                )));
            }
            t
        } else {
            self.next_time()?
        };
        let Some(mut m) = self.mdt.take() else {
            return Ok(instant);
        };
        let records = m.merged();
        let deltas: Vec<&MdtLog> = m.logs.iter().filter(|l| l.slice == m.base.0).collect();
        let delta_files: Vec<String> = deltas.iter().map(|l| l.name.clone()).collect();
        let delta_size: u64 = deltas.iter().map(|l| l.size).sum();
        let plan = json!({
            "operations": [{
                "baseInstantTime": m.base.0,
                "deltaFilePaths": delta_files,
                "dataFilePath": m.base.1,
                "fileId": m.file_id,
                "partitionPath": "files",
                "metrics": {"TOTAL_LOG_FILES": delta_files.len() as f64,
                            "TOTAL_LOG_FILES_SIZE": delta_size as f64},
                "bootstrapFilePath": null,
            }],
            "extraMetadata": {}, "version": 2, "preserveHoodieMetadata": false,
            "missingSchedulePartitions": [],
        });
        let path = m.instant_path(&instant, None, Action::Compaction, State::Requested);
        let r = self.mdt_write_instant(&path, &avro::compaction_plan(), &plan, false);
        m.compaction = Some(MdtCompaction {
            instant: instant.clone(),
            records,
            delta_files,
            written: None,
            state: State::Requested,
        });
        self.mdt = Some(m);
        r.map(|_| instant)
    }

    /// Run the scheduled MDT compaction `instant`: `.compaction.inflight` and the new base
    /// file `<fg>_<token>_<instant>.hfile`; with `complete` also the completed `commit`
    /// (operation COMPACT). With `complete = false` it stays inflight with its base file on
    /// disk (not yet part of the MDT); a later call with `complete = true` completes it.
    pub fn run_metadata_compaction(&mut self, instant: &str, complete: bool) -> Result<()> {
        let Some(mut m) = self.mdt.take() else {
            return Err(Error::Usage("the table has no metadata table".into()));
        };
        let r = self.run_metadata_compaction_in(&mut m, instant, complete);
        self.mdt = Some(m);
        r
    }

    fn run_metadata_compaction_in(
        &mut self,
        m: &mut MetadataTable,
        instant: &str,
        complete: bool,
    ) -> Result<()> {
        let Some(mut c) = m.compaction.clone().filter(|c| c.instant == instant) else {
            return Err(Error::Usage(format!(
                "no metadata table compaction pending at {instant}"
            )));
        };
        if c.state == State::Requested {
            let path = m.instant_path(instant, None, Action::Compaction, State::Inflight);
            self.put_atomic(&path, b"")?;
            let token = m.token();
            let name = listing::base_file_name(&m.file_id, &token, instant, "hfile");
            let bytes = records_hfile(&c.records, &m.schema, m.trailing, true, self.clock_ms)?;
            self.put(&join(&m.files_dir(), &name)?, &bytes)?;
            c.written = Some((name, bytes.len() as u64));
            c.state = State::Inflight;
        }
        if complete {
            let (name, size) = c.written.clone().unwrap_or_default();
            let delta_size: u64 = m
                .logs
                .iter()
                .filter(|l| c.delta_files.contains(&l.name))
                .map(|l| l.size)
                .sum();
            let stat = Stat {
                partition: "files".into(),
                file_id: m.file_id.clone(),
                path: format!("files/{name}"),
                prev_commit: m.base.0.clone(),
                num_writes: c.records.len(),
                num_update_writes: c.records.len(),
                size,
                prev_base_file: Some(m.base.1.clone()),
                compaction: Some((
                    c.records.len(),
                    c.delta_files.len(),
                    delta_size,
                    c.records.len(),
                )),
                ..Stat::default()
            };
            let completion = self.next_time()?;
            let meta = self.mdt_commit_json(m, &[stat], "COMPACT", true);
            let path = m.instant_path(
                instant,
                Some(&completion),
                Action::Compaction,
                State::Completed,
            );
            self.mdt_write_instant(&path, &avro::commit_metadata(), &meta, true)?;
            let old_slice = m.base.0.clone();
            m.logs.retain(|l| l.slice != old_slice);
            m.base = (instant.to_string(), name, size, c.records.clone());
            m.compactions_done.insert(instant.to_string(), completion);
            m.compaction = None;
        } else {
            m.compaction = Some(c);
        }
        Ok(())
    }

    /// Truncate a file of the MDT's `files` partition (a name from
    /// [`TableWriter::metadata_table`]: the base file or a log) to `len` bytes, leaving a
    /// corrupt MDT file (a torn log block or an HFile without its trailer).
    pub fn truncate_metadata_file(&self, name: &str, len: u64) -> Result<()> {
        let dir = TablePath::new(FILES_PARTITION_DIR).unwrap_or_default();
        let path = join(&dir, name)?;
        self.store
            .truncate(&path, len)
            .map_err(|e| Error::io(self.store.describe(&path), e))
    }

    /// The paths (relative to the root) of MDT files the writer wrote, for tests.
    pub fn metadata_file_paths(&self) -> Vec<String> {
        let Some(m) = &self.mdt else {
            return Vec::new();
        };
        let mut out = vec![format!("{FILES_PARTITION_DIR}/{}", m.base.1)];
        out.extend(
            m.logs
                .iter()
                .map(|l| format!("{FILES_PARTITION_DIR}/{}", l.name)),
        );
        out
    }
}

/// An empty delete block (`HoodieDeleteBlock` of no records, content version 3), the block
/// `initializeFileGroups` writes so that every file group has a log file. Its header holds the
/// instant only.
fn empty_delete_block(instant: &str) -> Vec<u8> {
    let mut content = Vec::new();
    content.extend_from_slice(&3i32.to_be_bytes());
    content.extend_from_slice(&1i32.to_be_bytes());
    content.push(0); // an empty HoodieDeleteRecordList array
    logfile::blocks::raw(
        logfile::blocks::DELETE,
        &[(logfile::blocks::INSTANT_TIME, instant)],
        &content,
    )
}

/// Partition → committed files of the write stats (and CDC files) of a commit, for its MDT
/// records.
pub(super) fn stat_files(stats: &[Stat]) -> BTreeMap<String, Vec<(String, u64)>> {
    let mut out: BTreeMap<String, Vec<(String, u64)>> = BTreeMap::new();
    for s in stats {
        let name = s.path.rsplit('/').next().unwrap_or("").to_string();
        let e = out.entry(s.partition.clone()).or_default();
        if !name.is_empty() {
            e.push((name, s.size));
        }
        for (rel, size) in s.cdc_stats.iter().flatten() {
            let n = rel.rsplit('/').next().unwrap_or("").to_string();
            e.push((n, *size));
        }
    }
    out
}

/// Names of partitions of the records (for tests).
pub fn record_partitions(records: &BTreeMap<String, FilesRecord>) -> BTreeSet<String> {
    records
        .get(ALL_PARTITIONS_KEY)
        .map(|r| {
            r.files
                .iter()
                .filter(|(_, i)| !i.is_deleted)
                .map(|(k, _)| k.clone())
                .collect()
        })
        .unwrap_or_default()
}
