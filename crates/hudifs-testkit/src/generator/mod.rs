//! The table generator: a deterministic writer of real Hudi tables (table versions 6, 8 and 9,
//! copy-on-write and merge-on-read) for tests and demos.
//!
//! It follows Hudi's three-phase protocol — every action writes `.requested`, then `.inflight`,
//! then its completed instant file — and writes real files: `hoodie.properties`, partition
//! metafiles, Parquet base files, Hudi log files (Avro data blocks, rollback command blocks),
//! commit metadata (JSON in layout 1, Avro in layout 2) and Avro plans and metadata for
//! compaction, clean, rollback and savepoint. [`TableWriter::archive`] moves old completed
//! instants into the archived timeline as Hudi's archiver does (a layout-1 archive log file, or
//! the layout-2 LSM timeline with its manifests and level compaction).
//!
//! With [`TableSpec::with_cdc`] the table has change data capture enabled (RFC-51): every
//! copy-on-write write that rewrites an existing file group ([`Txn::update`], [`Txn::delete`],
//! [`Txn::merge`]) also writes the group's CDC log file (one CDC data block in the mode's
//! schema) and names it in the write stat's `cdcStats`, as Hudi's merge handle does
//! ([`TableWriter::cdc_files`] lists them); `cdc.rs` says what is modelled.
//!
//! With [`TableSpec::with_metadata_table`] the table has a metadata table whose `files`
//! partition every action keeps up to date before its own instant completes, as Java Hudi
//! does (an MDT deltacommit at the action's instant, HFile data blocks of
//! `HoodieMetadataRecord`s; rollbacks and MDT compaction with Hudi 0.14's and 1.x's rules);
//! `metadata_table.rs` says what is written, and its knobs leave the MDT behind, ahead
//! ([`Txn::abandon_after_metadata`]), rolled back or corrupt. [`build_wide_table`] writes a
//! table of thousands of partitions with an MDT in seconds.
//!
//! Every name goes through [`listing::base_file_name`], [`listing::log_file_name`] and
//! [`timeline::instant_file_name`], so the writer cannot drift from the reader's grammar.
//!
//! Time comes from a logical clock (a start in epoch milliseconds, advancing one second per
//! instant or completion), file ids from a PRNG seeded by the table name and the clock start:
//! the same calls give the same names and, except for the Parquet `created_by` string of a
//! different `parquet` crate version, the same bytes. A live writer ([`Clock::Wall`]) takes
//! instants from the wall clock instead (UTC, strictly increasing) and seeds file ids with a
//! given seed, so the same calls still give the same file ids and data.
//!
//! Timeline files are written to a temporary name under `.hoodie/.temp/` and renamed into
//! place, so a reader never sees a half-written instant file; each rename is recorded
//! ([`TableWriter::take_published`]) with the wall-clock time around it.
//!
//! For benchmark tables, [`Txn::insert_linked`] writes many file groups fast (hard links to one
//! template Parquet file per partition) and [`Txn::insert_sized`] one large base file; the
//! writer does not track the rows of those groups.
//!
//! ```no_run
//! # use hudifs_testkit::generator::*; use hudifs_core::table::TableType; use hudifs_core::timeline::Action;
//! # fn main() -> hudifs_core::error::Result<()> {
//! let spec = TableSpec::new("t", TableType::MergeOnRead, 9).partitioned_by(&["city"], true);
//! let mut w = TableWriter::create("/tmp/t".as_ref(), spec, 1_767_225_600_000)?;
//! let mut txn = w.begin(Action::DeltaCommit)?;
//! let fid = txn.insert("city=paris", &rows(1, 10))?;
//! txn.complete()?;
//! let mut txn = w.begin(Action::DeltaCommit)?;
//! txn.update("city=paris", &fid, &rows_with_ids(2, &[1000, 1001]))?; // a log file
//! txn.abandon(); // stays in flight
//! # Ok(()) }
//! ```

mod actions;
mod archiver;
mod avro;
mod bootstrap;
mod bulk;
mod cdc;
mod create;
mod demo;
mod evolution;
mod expect;
mod history;
mod logfile;
mod metadata_table;
#[cfg(test)]
mod metadata_table_tests;
mod parquet;
mod plumbing;
pub mod sim;
#[cfg(test)]
mod tests;
mod txn;
mod upgrade;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use hudifs_storage::{LocalStore, StorageWrite, TablePath};

use serde_json::{json, Value as Json};

use self::parquet::StoredRow;
use hudifs_core::error::{Error, Result};
use hudifs_core::listing::PARTITION_METAFILE;
use hudifs_core::table::TableType;
use hudifs_core::timeline::{self, Action, Layout, State};

pub use self::bootstrap::{
    bootstrapped_table, seqno_matches, stitched_rows, BootstrappedGroup, STITCHED_COLUMNS,
};
pub use self::bulk::build_wide_table;
pub use self::cdc::CdcMode;
pub use self::demo::{build_demo, DEMO_CLOCK_START_MS};
pub use self::evolution::build_renamed;
pub use self::expect::ExpectedFile;
pub use self::history::build_cleaned_and_archived;
pub use self::logfile::{blocks, read_blocks, ReadBlock};
pub use self::metadata_table::{
    decode_files_record, merge_file_info, merge_records, partition_key, record_partitions,
    record_schema, FileInfo, FilesRecord, MdtCommitState, MetadataTableInfo, ALL_PARTITIONS_KEY,
    FILES_PARTITION_DIR, NON_PARTITIONED_KEY, TYPE_FILE_LIST, TYPE_PARTITION_LIST,
};
pub use self::parquet::{rows, rows_with_ids, Row};
pub use self::txn::{StagedCompletion, Txn};
pub use self::upgrade::{build_upgraded, Upgraded, UPGRADE_CLOCK_START_MS};

/// Milliseconds the logical clock advances per timestamp it hands out.
const CLOCK_STEP_MS: i64 = 1000;
const BASE_EXT: &str = "parquet";

/// What table to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    pub name: String,
    pub table_type: TableType,
    /// 6 (timeline layout 1), 8 or 9 (layout 2).
    pub version: u32,
    /// Partition fields; empty for a non-partitioned table.
    pub partition_fields: Vec<String>,
    /// Partition directories named `field=value`.
    pub hive_style: bool,
    pub populate_meta_fields: bool,
    /// `hoodie.properties` entries that replace (or add to) the generated ones, e.g. a v6
    /// table's `hoodie.compaction.payload.class` or a v9 table's `hoodie.record.merge.mode`.
    pub properties: Vec<(String, String)>,
    /// Change data capture (`hoodie.table.cdc.enabled`) and its supplemental logging mode: a
    /// copy-on-write write that rewrites a file group also writes a CDC log file for it.
    pub cdc: Option<CdcMode>,
    /// The table has a metadata table (its `files` partition), kept up to date by every action.
    pub metadata_table: bool,
    /// Nullable columns after the fixed data columns (`Row::extra` holds their values): what
    /// the payload classes read (`Op`, `_event_seq`, `_change_operation_type`,
    /// `_hoodie_operation`, `_event_lsn`).
    pub extra_columns: Vec<ExtraColumn>,
    /// Bytes of the bloom filter each base file keeps in its footer's key-value metadata
    /// (`org.apache.hudi.bloomfilter`, as Hudi writes it: about 430,000 for its default of
    /// 60,000 entries); none when 0.
    pub bloom_filter_bytes: usize,
}

/// A nullable column after the fixed data columns: a string, or a long (its values in
/// `Row::extra` are written as the numbers they spell).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraColumn {
    pub name: String,
    pub long: bool,
}

impl TableSpec {
    /// A non-partitioned table that populates meta fields.
    pub fn new(name: &str, table_type: TableType, version: u32) -> TableSpec {
        TableSpec {
            name: name.to_string(),
            table_type,
            version,
            partition_fields: Vec::new(),
            hive_style: false,
            populate_meta_fields: true,
            properties: Vec::new(),
            cdc: None,
            metadata_table: false,
            extra_columns: Vec::new(),
            bloom_filter_bytes: 0,
        }
    }

    /// Write a bloom filter of `bytes` bytes into every base file's footer, as Hudi does (its
    /// content is not a real filter: nothing here reads it).
    pub fn with_bloom_filter(mut self, bytes: usize) -> TableSpec {
        self.bloom_filter_bytes = bytes;
        self
    }

    /// Give the table a metadata table, as Java Hudi writes it (`metadata_table.rs`): created
    /// with the table (`hoodie.table.metadata.partitions=files`), its `files` partition
    /// updated by an MDT deltacommit at the instant of every write, clean, rollback and
    /// compaction before the data instant completes.
    pub fn with_metadata_table(mut self) -> TableSpec {
        self.metadata_table = true;
        self
    }

    /// Enable change data capture with the given supplemental logging mode:
    /// `hoodie.table.cdc.enabled=true` and `hoodie.table.cdc.supplemental.logging.mode` in
    /// `hoodie.properties`. On copy-on-write tables every write that rewrites an existing file
    /// group (an update, a delete, an insert into the group) then also writes one CDC log file
    /// for the group (see [`TableWriter::cdc_files`]); merge-on-read deltacommits write none
    /// (Hudi infers their changes from the logs).
    pub fn with_cdc(mut self, mode: CdcMode) -> TableSpec {
        self.cdc = Some(mode);
        self
    }

    /// Add nullable string columns after the fixed ones and those added before
    /// (`Row::with_extra` gives their values).
    pub fn with_string_columns(self, names: &[&str]) -> TableSpec {
        self.with_extra_columns(names, false)
    }

    /// Add nullable long columns after the fixed ones and those added before
    /// (`Row::with_extra` gives their values, as decimal numbers).
    pub fn with_long_columns(self, names: &[&str]) -> TableSpec {
        self.with_extra_columns(names, true)
    }

    fn with_extra_columns(mut self, names: &[&str], long: bool) -> TableSpec {
        let added = names.iter().map(|n| ExtraColumn {
            name: n.to_string(),
            long,
        });
        self.extra_columns.extend(added);
        self
    }

    /// Set (or add) one `hoodie.properties` entry.
    pub fn with_property(mut self, key: &str, value: &str) -> TableSpec {
        self.properties.retain(|(k, _)| k != key);
        self.properties.push((key.to_string(), value.to_string()));
        self
    }

    /// Whether readers merge by event time (the `ts` ordering field, ties to the later
    /// write): `hoodie.record.merge.mode=EVENT_TIME_ORDERING` on layout 2 tables (the default
    /// here), the Default/EventTime payloads on v6. The writer's row model follows it.
    pub fn event_time_ordering(&self) -> bool {
        let prop = |k: &str| {
            self.properties
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.as_str())
        };
        if self.version >= 8 {
            prop("hoodie.record.merge.mode").unwrap_or("EVENT_TIME_ORDERING")
                == "EVENT_TIME_ORDERING"
        } else {
            prop("hoodie.compaction.payload.class").is_some_and(|c| {
                c.ends_with(".DefaultHoodieRecordPayload") || c.ends_with(".EventTimeAvroPayload")
            })
        }
    }

    pub fn partitioned_by(mut self, fields: &[&str], hive_style: bool) -> TableSpec {
        self.partition_fields = fields.iter().map(|f| f.to_string()).collect();
        self.hive_style = hive_style;
        self
    }

    pub fn without_meta_fields(mut self) -> TableSpec {
        self.populate_meta_fields = false;
        self
    }

    fn is_mor(&self) -> bool {
        self.table_type == TableType::MergeOnRead
    }
}

/// One step of the table's history, for summaries and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub instant: String,
    /// The action as begun (`compaction` for a compaction, even once it completed as a commit).
    pub action: Action,
    pub state: State,
    /// The completion time (layout 2 name; equal to `instant` in layout 1).
    pub completion: Option<String>,
    /// Data and log files written, relative to the table root.
    pub written: Vec<String>,
    /// Data and log files deleted, relative to the table root.
    pub deleted: Vec<String>,
    /// File groups a replacecommit replaced, as `partition/fileId`.
    pub replaced: Vec<String>,
    /// The rollback that undid this write, if any.
    pub rolled_back_by: Option<String>,
}

/// Where the writer's instants come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// A logical clock starting at the given epoch milliseconds and advancing one second per
    /// timestamp handed out; file ids are seeded by the table name and the start.
    Logical { start_ms: i64 },
    /// The wall clock (UTC), strictly increasing by at least one millisecond per timestamp
    /// handed out; file ids are seeded by the table name and `seed`.
    Wall { seed: u64 },
}

/// A timeline file renamed into place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// The file name in the timeline directory.
    pub name: String,
    pub requested: String,
    pub action: Action,
    pub state: State,
    /// Wall-clock epoch milliseconds just before and just after the rename.
    pub before_ms: i64,
    pub after_ms: i64,
}

/// A data or log file the writer wrote (committed or not).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenFile {
    /// Relative to the table root.
    pub path: String,
    /// The instant that wrote it (a write, a compaction, or a rollback for a command block).
    pub writer: String,
    /// Rows in a base file; records in a log file's data block (0 for a command block).
    pub rows: usize,
    pub size: u64,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

// ---------------------------------------------------------------------------------------------
// Deterministic helpers.

/// SplitMix64: a tiny, good-enough PRNG.
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    hudifs_storage::fnv::fnv1a(bytes.iter().copied())
}

fn datetime(ms: i64) -> Result<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp_millis(ms)
        .ok_or_else(|| Error::Usage(format!("clock {ms} ms is out of range")))
}

/// `yyyyMMddHHmmssSSS` in UTC.
fn instant_time(ms: i64) -> Result<String> {
    let s = datetime(ms)?.format("%Y%m%d%H%M%S%3f").to_string();
    if s.len() != 17 {
        return Err(Error::Usage(format!(
            "clock {ms} ms does not give a 17-digit instant ({s})"
        )));
    }
    Ok(s)
}

/// What `java.util.Date.toString()` prints, for the comment lines of properties files.
fn java_date(ms: i64) -> Result<String> {
    Ok(datetime(ms)?.format("%a %b %d %H:%M:%S UTC %Y").to_string())
}

/// Escape a value for a Java properties file.
fn escape_property(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for (i, c) in v.chars().enumerate() {
        match c {
            ':' | '=' | '\\' | '#' | '!' => {
                out.push('\\');
                out.push(c);
            }
            ' ' if i == 0 => out.push_str("\\ "),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                out.push_str(&format!("\\u{:04X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

fn rel_path(partition: &str, name: &str) -> String {
    if partition.is_empty() {
        name.to_string()
    } else {
        format!("{partition}/{name}")
    }
}

fn encode_err(what: &str) -> impl Fn(String) -> Error + '_ {
    move |reason| Error::Invalid(format!("{what}: cannot encode: {reason}"))
}

/// `dir/name` as a table path (names the generator makes are always valid components).
fn join(dir: &TablePath, name: &str) -> Result<TablePath> {
    dir.child(name)
        .map_err(|e| Error::Invalid(format!("generator: {e}")))
}

/// `partition/name` as a table path.
fn data_path(partition: &str, name: &str) -> Result<TablePath> {
    let dir = TablePath::new(partition).map_err(|e| Error::Invalid(format!("generator: {e}")))?;
    join(&dir, name)
}

// ---------------------------------------------------------------------------------------------
// The writer's model of the table.

#[derive(Debug, Clone)]
struct LogEntry {
    name: String,
    /// The instant that wrote it (a deltacommit, or the rollback for a command block).
    writer: String,
    version: u32,
    /// The writing instant completed (rollback command blocks never count as committed).
    committed: bool,
    size: u64,
}

#[derive(Debug, Clone)]
struct Slice {
    base_instant: String,
    base_file: Option<String>,
    /// The slice of a compaction that is scheduled but not complete (no committed base yet).
    pending_compaction: bool,
    base_ids: BTreeSet<i64>,
    logs: Vec<LogEntry>,
    /// Record keys and record count of the committed log blocks of this slice.
    log_ids: BTreeSet<i64>,
    log_records: usize,
}

impl Slice {
    fn new(base_instant: &str, base_file: Option<String>) -> Slice {
        Slice {
            base_instant: base_instant.to_string(),
            base_file,
            pending_compaction: false,
            base_ids: BTreeSet::new(),
            logs: Vec::new(),
            log_ids: BTreeSet::new(),
            log_records: 0,
        }
    }
}

#[derive(Debug, Clone)]
struct Group {
    slices: Vec<Slice>,
    /// The group's committed rows (base merged with committed logs), by record key.
    rows: BTreeMap<i64, StoredRow>,
    replaced_by: Option<String>,
    /// Written by a bulk insert ([`Txn::insert_linked`], [`Txn::insert_sized`]): its rows are
    /// not tracked, so it cannot be updated or compacted.
    opaque: bool,
}

/// A data or log file written by a write that has not completed.
#[derive(Debug, Clone)]
struct PendingFile {
    partition: String,
    file_id: String,
    name: String,
    is_log: bool,
    size: u64,
}

#[derive(Debug, Clone)]
struct PendingWrite {
    action: Action,
    files: Vec<PendingFile>,
}

#[derive(Debug, Clone)]
struct CompactionOp {
    partition: String,
    file_id: String,
    base_instant: String,
    base_file: Option<String>,
    delta_files: Vec<String>,
    delta_size: u64,
    rows: BTreeMap<i64, StoredRow>,
    num_inserts: usize,
    num_updates: usize,
    log_records: usize,
    written: Option<(String, u64)>,
}

#[derive(Debug, Clone)]
struct Compaction {
    ops: Vec<CompactionOp>,
    state: State,
}

/// Write statistics of one file, rendered as Hudi's `HoodieWriteStat` / `HoodieDeltaWriteStat`.
#[derive(Debug, Clone, Default)]
struct Stat {
    partition: String,
    file_id: String,
    path: String,
    prev_commit: String,
    num_writes: usize,
    num_update_writes: usize,
    num_inserts: usize,
    num_deletes: usize,
    size: u64,
    /// Log writes: (version, base file name or "", log files).
    log: Option<(u32, String, Vec<String>)>,
    prev_base_file: Option<String>,
    /// Compaction: (log records, log files compacted, log bytes compacted, distinct keys).
    compaction: Option<(usize, usize, u64, usize)>,
    /// `cdcStats`: the CDC log files the write produced for the group (path relative to the
    /// table root, size in bytes).
    cdc_stats: Option<Vec<(String, u64)>>,
}

impl Stat {
    fn to_json(&self, layout: Layout) -> Json {
        let mut o = serde_json::Map::new();
        o.insert("fileId".into(), json!(self.file_id));
        o.insert("path".into(), json!(self.path));
        o.insert("prevCommit".into(), json!(self.prev_commit));
        o.insert("numWrites".into(), json!(self.num_writes));
        o.insert("numDeletes".into(), json!(self.num_deletes));
        o.insert("numUpdateWrites".into(), json!(self.num_update_writes));
        o.insert("numInserts".into(), json!(self.num_inserts));
        o.insert("totalWriteBytes".into(), json!(self.size));
        o.insert("totalWriteErrors".into(), json!(0));
        o.insert("partitionPath".into(), json!(self.partition));
        let (records, files, bytes, keys) = self.compaction.unwrap_or_default();
        o.insert("totalLogRecords".into(), json!(records));
        o.insert("totalLogFilesCompacted".into(), json!(files));
        o.insert("totalLogSizeCompacted".into(), json!(bytes));
        o.insert("totalUpdatedRecordsCompacted".into(), json!(keys));
        o.insert("totalLogBlocks".into(), json!(files));
        o.insert("totalCorruptLogBlock".into(), json!(0));
        o.insert("totalRollbackBlocks".into(), json!(0));
        o.insert("fileSizeInBytes".into(), json!(self.size));
        if let Some((version, base_file, log_files)) = &self.log {
            o.insert("logVersion".into(), json!(version));
            o.insert("logOffset".into(), json!(0));
            o.insert("baseFile".into(), json!(base_file));
            o.insert("logFiles".into(), json!(log_files));
        }
        if let Some(cdc) = &self.cdc_stats {
            let m: serde_json::Map<String, Json> =
                cdc.iter().map(|(p, n)| (p.clone(), json!(n))).collect();
            o.insert("cdcStats".into(), Json::Object(m));
        }
        // `prevBaseFile` exists in Hudi 1.x's model only.
        if layout == Layout::V2 {
            if let Some(p) = &self.prev_base_file {
                o.insert("prevBaseFile".into(), json!(p));
            }
        }
        Json::Object(o)
    }
}

/// The generator: creates a table and writes its history one action at a time.
#[derive(Debug)]
pub struct TableWriter {
    store: Arc<dyn StorageWrite>,
    spec: TableSpec,
    layout: Layout,
    timeline_dir: TablePath,
    clock_ms: i64,
    rng_state: u64,
    stage: u32,
    attempt: u32,
    groups: BTreeMap<(String, String), Group>,
    partitions: BTreeSet<String>,
    pending: BTreeMap<String, PendingWrite>,
    compactions: BTreeMap<String, Compaction>,
    /// Completed write instants (commit, deltacommit, replacecommit, compaction) → completion.
    completed: BTreeMap<String, String>,
    savepoints: BTreeSet<String>,
    events: Vec<Event>,
    /// Instants come from the wall clock (`clock_ms` is then the earliest next one).
    wall_clock: bool,
    /// The instant the next write takes instead of the clock's (a bootstrap's).
    next_instant: Option<String>,
    /// Timeline files renamed into place since the last [`TableWriter::take_published`].
    published: Vec<Published>,
    /// Every data and log file written, by path relative to the root.
    written: BTreeMap<String, WrittenFile>,
    /// Template base files of [`Txn::insert_linked`] by partition: path, size and links made
    /// to it.
    templates: BTreeMap<String, (TablePath, u64, u32)>,
    template_count: u32,
    /// CDC log files written, by the requested time of the write that wrote them (paths
    /// relative to the root).
    cdc: BTreeMap<String, Vec<String>>,
    /// The metadata table, when the table has one.
    mdt: Option<metadata_table::MetadataTable>,
    /// Schema-on-read ([`TableWriter::enable_schema_on_read`]).
    sor: Option<evolution::WriterSchemas>,
}

impl TableWriter {
    /// The storage the table is written to.
    pub fn store(&self) -> &Arc<dyn StorageWrite> {
        &self.store
    }

    /// The table root, for a table written to this machine's file system (panics otherwise:
    /// for tests and tools that write local tables).
    pub fn root(&self) -> &Path {
        self.store
            .local()
            .map(LocalStore::root)
            .expect("a table on this machine's file system")
    }

    /// The file-system path of a table path, for a table on this machine's file system.
    pub fn local_path(&self, p: &TablePath) -> std::path::PathBuf {
        let root = self.root();
        if p.is_root() {
            root.to_path_buf()
        } else {
            root.join(p.as_str())
        }
    }

    /// How the storage names the table root (a path or a URL).
    pub fn describe_root(&self) -> String {
        self.store.describe(&TablePath::root())
    }

    fn io_err<'p>(&'p self, path: &'p TablePath) -> impl Fn(std::io::Error) -> Error + 'p {
        move |e| Error::io(self.store.describe(path), e)
    }

    /// Write a whole file (in place on a local disk).
    pub(crate) fn put(&self, path: &TablePath, bytes: &[u8]) -> Result<()> {
        self.store.put(path, bytes).map_err(self.io_err(path))
    }

    /// Write a whole file so that readers see nothing or all of it (staged under
    /// `.hoodie/.temp`); returns the wall-clock times around the moment it appears.
    pub(crate) fn put_atomic(&self, path: &TablePath, bytes: &[u8]) -> Result<(i64, i64)> {
        let before = now_ms();
        self.store
            .put_atomic(path, bytes, &self.tmp_dir())
            .map_err(self.io_err(path))?;
        Ok((before, now_ms()))
    }

    /// Delete a file; `false` if it was not there.
    pub(crate) fn delete(&self, path: &TablePath) -> Result<bool> {
        self.store.delete(path).map_err(self.io_err(path))
    }

    /// Read a whole file of the table.
    pub fn read(&self, path: &TablePath) -> Result<Vec<u8>> {
        self.store.read(path).map_err(self.io_err(path))
    }

    /// Seed the file ids with `seed` (and the table name) instead of what the clock gave.
    pub fn seed_file_ids(&mut self, seed: u64) {
        self.rng_state = fnv1a(self.spec.name.as_bytes()) ^ seed;
    }

    /// Where timeline files are written before they are renamed into place.
    fn tmp_dir(&self) -> TablePath {
        TablePath::new(".hoodie/.temp").unwrap_or_default()
    }

    /// The timeline files renamed into place since the last call, in order.
    pub fn take_published(&mut self) -> Vec<Published> {
        std::mem::take(&mut self.published)
    }

    /// The CDC log files the write `instant` produced (committed or not, and still there
    /// unless a rollback or clean deleted them), relative to the table root, sorted.
    pub fn cdc_files(&self, instant: &str) -> Vec<String> {
        self.cdc.get(instant).cloned().unwrap_or_default()
    }

    /// A data or log file this writer wrote, by path relative to the root.
    pub fn written_file(&self, path: &str) -> Option<&WrittenFile> {
        self.written.get(path)
    }

    fn record_written(
        &mut self,
        partition: &str,
        name: &str,
        writer: &str,
        rows: usize,
        size: u64,
    ) {
        let path = rel_path(partition, name);
        self.written.insert(
            path.clone(),
            WrittenFile {
                path,
                writer: writer.to_string(),
                rows,
                size,
            },
        );
    }

    /// Completed write instants (commits, deltacommits, replacecommits, compactions) and their
    /// completion times (equal to the requested time in layout 1).
    pub fn completed_writes(&self) -> &BTreeMap<String, String> {
        &self.completed
    }

    /// Savepointed instants.
    pub fn savepoints(&self) -> &BTreeSet<String> {
        &self.savepoints
    }

    /// Writes left in flight (abandoned and not rolled back), by requested time.
    pub fn pending_writes(&self) -> Vec<String> {
        self.pending.keys().cloned().collect()
    }

    /// Compactions scheduled and not completed, by requested time.
    pub fn pending_compactions(&self) -> Vec<String> {
        self.compactions
            .iter()
            .filter(|(_, c)| c.state != State::Completed)
            .map(|(t, _)| t.clone())
            .collect()
    }

    pub fn spec(&self) -> &TableSpec {
        &self.spec
    }

    /// Evolve the table's schema as a writer with a wider schema does: later writes (their
    /// base files, log blocks and the schema in their commit metadata) have the nullable
    /// column `name` after the table's extra columns, a long if `long`, else a string; files
    /// written before keep the schema they were written in.
    pub fn add_column(&mut self, name: &str, long: bool) {
        self.spec.extra_columns.push(ExtraColumn {
            name: name.to_string(),
            long,
        });
    }

    /// Layout 1 for table version 6, 2 for 8 and 9.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub fn timeline_dir(&self) -> &TablePath {
        &self.timeline_dir
    }

    /// The action a plain write takes: `commit` on copy-on-write, `deltacommit` on merge-on-read.
    pub fn write_action(&self) -> Action {
        if self.spec.is_mor() {
            Action::DeltaCommit
        } else {
            Action::Commit
        }
    }

    /// The partition path for the given partition values (`city=paris` hive-style, `paris`
    /// otherwise; `""` for a non-partitioned table).
    pub fn partition_path(&self, values: &[&str]) -> Result<String> {
        if values.len() != self.spec.partition_fields.len() {
            return Err(Error::Usage(format!(
                "{} partition values for {} partition fields",
                values.len(),
                self.spec.partition_fields.len()
            )));
        }
        let segs: Vec<String> = self
            .spec
            .partition_fields
            .iter()
            .zip(values)
            .map(|(f, v)| {
                if self.spec.hive_style {
                    format!("{f}={v}")
                } else {
                    v.to_string()
                }
            })
            .collect();
        Ok(segs.join("/"))
    }

    /// The time the clock will hand out next.
    pub fn clock_ms(&self) -> i64 {
        self.clock_ms
    }

    /// Move the clock forward (e.g. to leave a gap between instants).
    pub fn advance_clock(&mut self, ms: i64) {
        self.clock_ms += ms.max(0);
    }

    /// Every step written so far.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// Live (not replaced) file groups as `(partition, fileId)`.
    pub fn file_groups(&self) -> Vec<(String, String)> {
        self.groups
            .iter()
            .filter(|(_, g)| g.replaced_by.is_none())
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The committed row count of a file group (base merged with committed logs).
    pub fn group_row_count(&self, partition: &str, file_id: &str) -> Option<usize> {
        self.groups
            .get(&(partition.to_string(), file_id.to_string()))
            .map(|g| g.rows.len())
    }

    /// The committed rows of a file group, by record key.
    pub fn group_rows(&self, partition: &str, file_id: &str) -> Option<Vec<Row>> {
        self.groups
            .get(&(partition.to_string(), file_id.to_string()))
            .map(|g| g.rows.values().map(|r| r.row.clone()).collect())
    }

    /// Files of a file group the writer knows of (bases and logs of every slice, committed or
    /// not, that are still on disk), relative to the partition.
    pub fn group_files(&self, partition: &str, file_id: &str) -> Vec<String> {
        let Some(g) = self
            .groups
            .get(&(partition.to_string(), file_id.to_string()))
        else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for s in &g.slices {
            out.extend(s.base_file.iter().cloned());
            out.extend(s.logs.iter().map(|l| l.name.clone()));
        }
        out
    }
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        if !self.templates.is_empty() {
            let _ = self.remove_templates();
        }
    }
}
