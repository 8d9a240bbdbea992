//! Hudi's metadata table (MDT, `.hoodie/metadata/`) as the listing of a data table: the
//! `files` partition names every partition and the files of each, so a mount reads a few
//! files instead of listing the store directory by directory (SEMANTICS.md §1.10).
//!
//! The MDT is a merge-on-read table of its own, read here with the same rules as any table:
//! its timeline, the newest slice of the `files` file group (an HFile base file and log files
//! whose blocks are HFiles), blocks chosen as a data log's are. On top of that, *fencing*
//! (`fence`): a block counts only if its instant is one Java Hudi's readers trust, a completed
//! instant of the data timeline (or the MDT's own bookkeeping), because a writer updates the
//! MDT before it completes its data instant. Data instants the MDT has not caught up with are
//! reported as [`MdtListing::behind`]: the caller lists their partitions from storage.
//!
//! Anything unexpected is an [`MdtError`]; the caller then lists the storage instead.

mod fence;
mod files;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use hudifs_hfile::HFileReader;
use hudifs_storage::{Storage, TablePath};

use crate::listing::{self, parse_data_name, DataName};
use crate::logblock::{block_type, choose_blocks, header};
use crate::metadata::AvroDecoder;
use crate::rules::{self, Archived, Context};
use crate::table::TableConfig;
use crate::timeline::{InstantMetadata, Timeline};
use crate::viewkey::ViewKey;

pub use files::{FileInfo, FilesRecords, ALL_PARTITIONS_KEY, NON_PARTITIONED_KEY};

/// Where the metadata table lives, relative to the data table's root.
pub const MDT_DIR: &str = ".hoodie/metadata";
/// The MDT partition that lists files.
pub const FILES_PARTITION: &str = "files";
/// The largest MDT file read (a `files` partition of a million data files is a few tens of MB).
const MAX_MDT_FILE: u64 = 512 << 20;

/// Java's order of a file group's log files: instant, version, write token.
type LogOrder = (String, u32, String);

/// A file group of the `files` partition: its base file and its logs.
type Group = (Option<(TablePath, u64)>, Vec<(LogOrder, TablePath, u64)>);

/// Why the metadata table cannot serve as the listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MdtError(pub String);

impl fmt::Display for MdtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for MdtError {}

fn err(s: impl Into<String>) -> MdtError {
    MdtError(s.into())
}

/// Whether the data table's configuration says its MDT has a `files` partition
/// (`hoodie.table.metadata.partitions`).
pub fn is_enabled(cfg: &TableConfig) -> bool {
    cfg.properties
        .get("hoodie.table.metadata.partitions")
        .is_some_and(|v| v.split(',').any(|p| p.trim() == FILES_PARTITION))
}

/// The data table's listing as its metadata table gives it.
#[derive(Debug, Clone)]
pub struct MdtListing {
    /// The newest completed instant of the MDT (the listing's version).
    pub instant: String,
    /// Every partition the MDT lists, sorted, with its files (name, size), sorted by name.
    pub partitions: BTreeMap<String, Vec<(String, u64)>>,
    /// Partitions that completed data instants the MDT does not cover touched: their files
    /// come from storage (some may be new partitions, absent from `partitions`).
    pub behind: BTreeSet<String>,
    /// How many MDT blocks fencing left out (instants the data timeline does not trust).
    pub fenced_blocks: usize,
}

/// Read the `files` partition of the metadata table of the data table in `store`, whose
/// active timeline is `data` (with `meta` reading its instant files).
pub fn read(
    store: &Arc<dyn Storage>,
    data: &Context,
    meta: &InstantMetadata,
) -> Result<MdtListing, MdtError> {
    let dir = TablePath::new(MDT_DIR).map_err(|e| err(e.to_string()))?;
    let mstore = hudifs_storage::scoped(store, &dir)
        .map_err(|e| err(format!("{}: {e}", store.describe(&dir))))?;
    let mcfg = TableConfig::load(&*mstore).map_err(|e| err(format!("no metadata table: {e}")))?;
    if mcfg.table_type != crate::table::TableType::MergeOnRead {
        return Err(err(format!(
            "{}: the metadata table is not a merge-on-read table",
            mstore.describe(&TablePath::root())
        )));
    }
    let mcfg = Arc::new(mcfg);
    let mtl = Timeline::load(&*mstore, &mcfg).map_err(|e| err(format!("metadata table: {e}")))?;
    let mmeta = InstantMetadata::new(mstore.clone(), mcfg.timeline_dir.clone());
    let mctx = Context::new(mcfg.clone(), Arc::new(mtl), &mmeta);
    let mtl = &*mctx.timeline;
    let instant = mtl
        .latest_completed()
        .ok_or_else(|| err("the metadata table has no completed instant"))?
        .to_string();
    let fence = fence::Fence::new(data, meta, mtl);
    // The newest slice of the `files` file group, by the rules of any merge-on-read table.
    let plan = rules::plan(&mctx, &mmeta, &Archived::NotNeeded, &ViewKey::Latest, false)
        .map_err(|e| err(format!("metadata table: {e}")))?;
    let listed = listing::list_partition(&*mstore, &mcfg, FILES_PARTITION)
        .map_err(|e| err(format!("metadata table: {e}")))?;
    let choice = rules::resolve_partition(
        &mctx,
        &mmeta,
        &plan,
        &listed,
        &rules::InstantInterner::default(),
    );
    if choice.files.is_empty() {
        return Err(err("the metadata table's files partition has no file"));
    }
    // File groups, each its base file then its logs in Java's order.
    let mut groups: BTreeMap<String, Group> = BTreeMap::new();
    for c in &choice.files {
        let f = &listed[c.index as usize];
        let path = TablePath::new(&f.rel_path()).map_err(|e| err(e.to_string()))?;
        let g = groups.entry(f.file_id().to_string()).or_default();
        match parse_data_name(f.name(), &mcfg.base_extensions) {
            Some(DataName::Base(_)) => g.0 = Some((path, f.size())),
            Some(DataName::Log(l)) => {
                g.1.push(((l.instant, l.version, l.write_token), path, f.size()))
            }
            None => {}
        }
    }
    let mut records = FilesRecords::default();
    for (_, (base, mut logs)) in groups {
        let mut base_instant = None;
        if let Some((base, size)) = base {
            read_base(&*mstore, &base, size, &mut records)?;
            if let Some(DataName::Base(b)) = parse_data_name(base.name(), &mcfg.base_extensions) {
                base_instant = Some(b.instant);
            }
        }
        logs.sort();
        let mut bytes = Vec::with_capacity(logs.len());
        let mut names = Vec::with_capacity(logs.len());
        let mut present = BTreeSet::new();
        let to_read: Vec<(&TablePath, u64)> = logs.iter().map(|(_, p, size)| (p, *size)).collect();
        let read = read_files(&*mstore, &to_read);
        for ((_, path, _), b) in logs.iter().zip(read) {
            let b = b?;
            let name = mstore.describe(path);
            present.extend(block_instants(&b, &name)?);
            bytes.push(b);
            names.push(name);
        }
        // Every completed MDT write of a data instant after the slice's base must have left a
        // block here: one that is missing (a log lost or torn) would lose the files it lists.
        let base_instant = base_instant.unwrap_or_default();
        for inst in mtl.completed.values() {
            let t = inst.requested.as_str();
            if inst.action == crate::timeline::Action::DeltaCommit
                && t > base_instant.as_str()
                && !fence.is_mdt_service(t)
                && fence.changes_files(t)
                && !present.contains(t)
            {
                // A write that changed no listing writes no block: its commit metadata says
                // whether it wrote to the files partition.
                let wrote = match mmeta.commit(inst) {
                    Ok(m) => m.write_stats.iter().any(|w| w.partition == FILES_PARTITION),
                    Err(_) => true,
                };
                if wrote {
                    return Err(err(format!(
                        "the files partition holds no block of its completed instant {t}"
                    )));
                }
            }
        }
        // A block counts when its instant completed in the MDT (or is the MDT's own service)
        // and fencing trusts it.
        let visible = |t: &str| (mtl.is_committed(t) || fence.is_mdt_service(t)) && fence.admits(t);
        let blocks = choose_blocks(&bytes, &names, &visible)
            .map_err(|e| err(format!("metadata table: {e}")))?;
        for b in blocks {
            let content = &bytes[b.file][b.content.clone()];
            let at = || format!("{} block at byte {}", names[b.file], b.offset);
            match b.block_type {
                block_type::HFILE_DATA_BLOCK => {
                    let schema = b
                        .header
                        .get(&header::SCHEMA)
                        .ok_or_else(|| err(format!("{}: no schema", at())))?;
                    read_hfile(content, schema, &mut records)
                        .map_err(|e| err(format!("{}: {e}", at())))?;
                }
                block_type::DELETE_BLOCK => {
                    for key in delete_keys(content).map_err(|e| err(format!("{}: {e}", at())))? {
                        records.delete(&key);
                    }
                }
                other => {
                    return Err(err(format!(
                        "{}: a block of type {other} in the files partition is not read here",
                        at()
                    )))
                }
            }
        }
    }
    let behind = fence.behind(data, meta)?;
    let names = match records.partitions() {
        Some(p) => p,
        None => records.listed_partitions(),
    };
    let partitions = names
        .into_iter()
        .map(|p| {
            let files = records.files(&p);
            (p, files)
        })
        .collect();
    Ok(MdtListing {
        instant,
        partitions,
        behind,
        fenced_blocks: fence.fenced(),
    })
}

/// A whole MDT file of `size` bytes (as listed), refused past [`MAX_MDT_FILE`].
fn read_file(store: &dyn Storage, path: &TablePath, size: u64) -> Result<Vec<u8>, MdtError> {
    let name = store.describe(path);
    if size > MAX_MDT_FILE {
        return Err(err(format!(
            "{name}: {size} bytes, more than the {MAX_MDT_FILE} read from a metadata table file"
        )));
    }
    store.read(path).map_err(|e| err(format!("{name}: {e}")))
}

/// How many MDT files are read at once (on an object store a read is mostly waiting).
const PARALLEL_READS: usize = 8;

/// Whole files, read side by side on an object store, in the order given.
fn read_files(store: &dyn Storage, files: &[(&TablePath, u64)]) -> Vec<Result<Vec<u8>, MdtError>> {
    let threads = if store.is_object_store() {
        PARALLEL_READS
    } else {
        1
    };
    crate::side_by_side::map(files, threads, |(path, size)| read_file(store, path, *size))
}

/// Merge the records of the base HFile at `path` (its writer schema is in its file info).
fn read_base(
    store: &dyn Storage,
    path: &TablePath,
    size: u64,
    records: &mut FilesRecords,
) -> Result<(), MdtError> {
    let name = store.describe(path);
    let bytes = read_file(store, path, size)?;
    let reader = HFileReader::open(bytes).map_err(|e| err(format!("{name}: {e}")))?;
    let schema = reader
        .file_info(b"schema")
        .ok_or_else(|| err(format!("{name}: no schema in the file info")))?;
    let schema =
        std::str::from_utf8(schema).map_err(|_| err(format!("{name}: schema is not UTF-8")))?;
    merge_cells(&reader, schema, records).map_err(|e| err(format!("{name}: {e}")))
}

/// Merge the records of an HFile data block, in the block header's schema.
fn read_hfile(content: &[u8], schema: &str, records: &mut FilesRecords) -> Result<(), String> {
    let reader = HFileReader::open(content).map_err(|e| e.to_string())?;
    merge_cells(&reader, schema, records)
}

fn merge_cells<R: hudifs_hfile::RangeRead>(
    reader: &HFileReader<R>,
    schema: &str,
    records: &mut FilesRecords,
) -> Result<(), String> {
    let schema = apache_avro::Schema::parse_str(schema).map_err(|e| format!("bad schema: {e}"))?;
    let decoder = AvroDecoder::new(&schema).map_err(|e| e.to_string())?;
    for cell in reader.scan() {
        let (k, v) = cell.map_err(|e| e.to_string())?;
        let key = String::from_utf8(k).map_err(|_| "a key is not UTF-8".to_string())?;
        if let Some((key, entries)) = files::decode_record(&decoder, &key, &v)? {
            records.merge(&key, entries);
        }
    }
    Ok(())
}

/// `HoodieDeleteRecordList`, the Avro content of a version 3 delete block.
const DELETE_RECORDS_SCHEMA: &str = r#"{"type":"record","name":"HoodieDeleteRecordList","namespace":"org.apache.hudi.avro.model","fields":[{"name":"deleteRecordList","type":{"type":"array","items":{"type":"record","name":"HoodieDeleteRecord","fields":[{"name":"recordKey","type":["null","string"],"default":null},{"name":"partitionPath","type":["null","string"],"default":null},{"name":"orderingVal","type":["null","boolean","int","long","float","double","bytes","string",{"type":"int","logicalType":"date"},{"type":"bytes","logicalType":"decimal","precision":30,"scale":15},{"type":"long","logicalType":"timestamp-millis"},{"type":"long","logicalType":"timestamp-micros"}],"default":null}]}}}]}"#;

/// The record keys a delete block deletes (content version 3: version, length, Avro).
fn delete_keys(content: &[u8]) -> Result<Vec<String>, String> {
    let int = |at: usize| -> Option<i32> {
        Some(i32::from_be_bytes(
            content.get(at..at + 4)?.try_into().ok()?,
        ))
    };
    let version = int(0).ok_or("no content version")?;
    if version < 3 {
        return Err(format!(
            "a delete block of version {version} (Kryo-serialized) is not read"
        ));
    }
    let len = int(4).ok_or("no length")?;
    let len = usize::try_from(len).map_err(|_| format!("length {len}"))?;
    let body = content
        .get(8..8usize.saturating_add(len))
        .ok_or_else(|| format!("length {len} runs past the block"))?;
    let schema =
        apache_avro::Schema::parse_str(DELETE_RECORDS_SCHEMA).map_err(|e| e.to_string())?;
    let decoder = AvroDecoder::new(&schema).map_err(|e| e.to_string())?;
    let v = decoder.decode_datum(body).map_err(|e| e.to_string())?;
    let mut keys = Vec::new();
    for r in v
        .get("deleteRecordList")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
    {
        match r.get("recordKey").and_then(serde_json::Value::as_str) {
            Some(k) => keys.push(k.to_string()),
            None => return Err("a delete record without a record key".into()),
        }
    }
    Ok(keys)
}

/// The instants of the blocks of an MDT log file. Java's reader skips a corrupt stretch;
/// skipping one here could lose the files a block lists, so that is an error (the storage is
/// listed instead). Only a torn tail (a writer that failed while appending, whose instant never
/// completed) is skipped.
fn block_instants(bytes: &[u8], name: &str) -> Result<BTreeSet<String>, MdtError> {
    use crate::logblock::{scan_log_blocks, Skipped};
    let (blocks, problems) = scan_log_blocks(bytes);
    let last = blocks.last().map(|b| b.offset);
    for p in problems {
        let at = match p {
            Skipped::NotABlock { from, .. } => from,
            Skipped::Corrupt { at, .. } => at,
        };
        if last.is_some_and(|l| at < l) {
            return Err(err(format!("{name}: {p}")));
        }
        log::info!("{name}: {p} (a torn tail, skipped)");
    }
    Ok(blocks
        .iter()
        .filter_map(|b| b.header.get(&header::INSTANT_TIME).cloned())
        .collect())
}
