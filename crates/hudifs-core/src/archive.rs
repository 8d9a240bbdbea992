//! The archived timeline (spec §2.7): completed instants that Hudi's archiver moved out of the
//! active timeline, read back so that `as_of/` and `incremental/` can reach them.
//!
//! Two formats, one per timeline layout:
//!
//! - **Layout 1 (table version 6, Hudi 0.x)**: `.hoodie/archived/.commits_.archive.<N>_<token>`,
//!   Hudi log files (`HoodieLogFormat`) whose Avro data blocks hold `HoodieArchivedMetaEntry`
//!   records, one per *state file* of an archived instant (`actionState` REQUESTED, INFLIGHT or
//!   COMPLETED), with the instant's metadata as a nested Avro record (`hoodieCommitMetadata`,
//!   `hoodieReplaceCommitMetadata`, `hoodieCleanMetadata`, ...). Written by
//!   `HoodieTimelineArchiver`/`TimelineArchiverV1` through `MetadataConversionUtils`, read by
//!   `HoodieArchivedTimeline`/`ArchivedTimelineV1`. The writer schema is in each block's header.
//! - **Layout 2 (table versions 8 and 9, Hudi 1.x)**: the LSM timeline under
//!   `.hoodie/timeline/history/` (`LSMTimeline`, `LSMTimelineWriter`): `_version_` holds the
//!   current snapshot number N, `manifest_N` (JSON, `{"files": [{"fileName", "fileLen"}]}`) lists
//!   the valid data files, and each `<minInstant>_<maxInstant>_<level>.parquet` holds one
//!   `HoodieLSMTimelineInstant` row per completed instant: `instantTime`, `completionTime`,
//!   `action` (the completed action), `metadata` (the bytes of the completed instant file) and
//!   `plan` (the bytes of the requested plan, if any). Files not in the manifest are leftovers
//!   of a failed or superseded write and are ignored, as Java's `ArchivedTimelineLoaderV2` does.
//!
//! The reader is pure: it lists and reads files and returns values. Every unreadable piece is
//! reported with its file name; what could be read is kept (a corrupt log block is skipped and
//! reading resumes at the next block magic, as Java's `HoodieLogFileReader` does). Completion
//! time is the record's on layout 2 and the requested time on layout 1 (spec §2.4).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::metadata::{self, CommitMetadata};
use crate::table::TableConfig;
use crate::timeline::Action;

/// One completed archived instant.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedInstant {
    pub requested: String,
    /// Layout 2: the archived completion time. Layout 1: the requested time.
    pub completion: String,
    /// The completed action (`commit` for a compaction, `replacecommit` for a clustering).
    pub action: Action,
    /// The action the instant was planned as (compaction, log compaction, clustering), when the
    /// archive tells.
    pub planned: Option<Action>,
    /// The completed instant's metadata as JSON (commit, replace-commit, clean, rollback, ...
    /// metadata); an empty object for an instant archived without metadata (an empty completed
    /// file). An error when its bytes cannot be decoded.
    pub metadata: Result<Value, String>,
    /// The plan archived with the instant (compaction plan, requested replace metadata, cleaner
    /// plan), if any.
    pub plan: Option<Result<Value, String>>,
    /// The archive file it was read from.
    pub file: String,
}

impl ArchivedInstant {
    /// Completed commit, deltacommit or replacecommit.
    pub fn is_write(&self) -> bool {
        self.action.is_write()
    }

    /// The commit metadata of an archived write.
    pub fn commit_metadata(&self) -> Result<CommitMetadata, String> {
        let v = self.metadata.as_ref().map_err(Clone::clone)?;
        CommitMetadata::from_json(v).map_err(|e| {
            format!(
                "archived {} {} ({}): {e}",
                self.action.name(),
                self.requested,
                self.file
            )
        })
    }
}

/// An archive file (or a piece of one) that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveError {
    pub path: PathBuf,
    pub reason: String,
    /// The requested-time range `(min, max)` of the instants the unreadable piece held, when the
    /// file name tells it (LSM data files).
    pub covers: Option<(String, String)>,
}

impl ArchiveError {
    fn new(path: &Path, reason: impl Into<String>) -> ArchiveError {
        ArchiveError {
            path: path.to_path_buf(),
            reason: reason.into(),
            covers: None,
        }
    }
}

impl fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)?;
        if let Some((min, max)) = &self.covers {
            write!(f, " (archived instants {min}..{max} unknown)")?;
        }
        Ok(())
    }
}

impl std::error::Error for ArchiveError {}

/// What the archive holds, as far as it could be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Archive {
    /// Completed archived instants, ordered by (requested time, action).
    pub instants: Vec<ArchivedInstant>,
    /// Pieces that could not be read; when not empty, archived instants may be missing.
    pub problems: Vec<ArchiveError>,
}

impl Archive {
    /// Whether every archive file was read in full.
    pub fn is_complete(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Read the archived timeline of a table (layout 1 or 2 as its configuration says). A missing
/// or empty archive directory gives an empty archive. `Err` only when nothing can be trusted:
/// the directory cannot be listed, or (layout 2) the manifest of the current snapshot cannot be
/// read.
pub fn load_archive(cfg: &TableConfig) -> Result<Archive, ArchiveError> {
    if cfg.layout == 2 {
        load_lsm_timeline(&cfg.archive_dir)
    } else {
        load_log_archive(&cfg.archive_dir)
    }
}

/// File names in `dir`, or `None` when it does not exist.
fn list_dir(dir: &Path) -> Result<Option<Vec<String>>, ArchiveError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ArchiveError::new(dir, format!("cannot list: {e}"))),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| ArchiveError::new(dir, format!("cannot list: {e}")))?;
        if entry.file_type().map(|t| t.is_file()).unwrap_or(false) {
            if let Some(n) = entry.file_name().to_str() {
                names.push(n.to_string());
            }
        }
    }
    names.sort();
    Ok(Some(names))
}

/// The action named in an archive record, as the completed action and the planned one.
fn parse_action(name: &str) -> Option<(Action, Option<Action>)> {
    let a = Action::from_name(name)?;
    let planned = matches!(
        a,
        Action::Compaction | Action::LogCompaction | Action::Clustering
    )
    .then_some(a);
    Some((a.completes_as(), planned))
}

/// A planned action told by the completed metadata's operation type.
fn planned_from_operation(action: Action, metadata: &Result<Value, String>) -> Option<Action> {
    let op = metadata.as_ref().ok()?.get("operationType")?.as_str()?;
    match (action, op.to_ascii_uppercase().as_str()) {
        (Action::Commit, "COMPACT") => Some(Action::Compaction),
        (Action::DeltaCommit, "LOG_COMPACT") => Some(Action::LogCompaction),
        (Action::ReplaceCommit, "CLUSTER") => Some(Action::Clustering),
        _ => None,
    }
}

fn sort_and_dedup(mut instants: Vec<ArchivedInstant>) -> Vec<ArchivedInstant> {
    // Stable: of duplicates (a merged archive file beside its sources, an instant in two LSM
    // files) the first read is kept.
    instants.sort_by(|a, b| (&a.requested, a.action).cmp(&(&b.requested, b.action)));
    instants.dedup_by(|b, a| a.requested == b.requested && a.action == b.action);
    instants
}

// ---------------------------------------------------------------------------------------------
// Layout 1: Hudi log files of HoodieArchivedMetaEntry records.

const LOG_MAGIC: &[u8; 6] = b"#HUDI#";
/// `HoodieLogFormat.CURRENT_VERSION`.
const LOG_FORMAT_VERSION: i32 = 1;
/// `HoodieLogBlockType.AVRO_DATA_BLOCK`.
const AVRO_DATA_BLOCK: i32 = 3;
/// `HeaderMetadataType.SCHEMA`.
const HEADER_SCHEMA: i32 = 2;
/// Written by the archiver while it merges small archive files (`hoodie.archive.merge.enable`).
const MERGE_ARCHIVE_PLAN: &str = "mergeArchivePlan";
const ARCHIVE_FILE_PREFIX: &str = ".commits_.archive.";

/// The version `N` of an archive log file name `.commits_.archive.N[_token]` (Java's
/// `^\.commits_\.archive\.([0-9]+).*`).
pub fn archive_log_version(name: &str) -> Option<u64> {
    let rest = name.strip_prefix(ARCHIVE_FILE_PREFIX)?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// One block of a Hudi log file, as found in the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBlock<'a> {
    /// Offset of the block's magic in the file.
    pub offset: usize,
    pub block_type: i32,
    pub header: BTreeMap<i32, String>,
    pub content: &'a [u8],
}

struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let stop = self
            .pos
            .checked_add(n)
            .filter(|&s| s <= self.end)
            .ok_or_else(|| format!("truncated at byte {}", self.pos))?;
        let s = &self.bytes[self.pos..stop];
        self.pos = stop;
        Ok(s)
    }
    fn i32(&mut self) -> Result<i32, String> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Result<i64, String> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }
    fn len32(&mut self) -> Result<usize, String> {
        let n = self.i32()?;
        usize::try_from(n).map_err(|_| format!("negative length {n}"))
    }
    fn len64(&mut self) -> Result<usize, String> {
        let n = self.i64()?;
        usize::try_from(n).map_err(|_| format!("negative length {n}"))
    }
    /// A header or footer: i32 count, then (i32 key, i32 length, UTF-8 value) entries.
    fn metadata(&mut self) -> Result<BTreeMap<i32, String>, String> {
        let n = self.len32()?;
        let mut out = BTreeMap::new();
        for _ in 0..n {
            let key = self.i32()?;
            let len = self.len32()?;
            let value = std::str::from_utf8(self.take(len)?)
                .map_err(|e| format!("header value is not UTF-8: {e}"))?;
            out.insert(key, value.to_string());
        }
        Ok(out)
    }
}

/// Parse the block whose magic is at `start`; returns it and the offset after it.
fn parse_block(bytes: &[u8], start: usize) -> Result<(LogBlock<'_>, usize), String> {
    let mut c = Cursor {
        bytes,
        pos: start + LOG_MAGIC.len(),
        end: bytes.len(),
    };
    let size = c.len64()?;
    let body_start = c.pos;
    let body_end = body_start
        .checked_add(size)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| {
            format!(
                "block size {size} runs past the end of the file ({} bytes)",
                bytes.len()
            )
        })?;
    c.end = body_end;
    let version = c.i32()?;
    if version != LOG_FORMAT_VERSION {
        return Err(format!(
            "log format version {version} is not supported (only {LOG_FORMAT_VERSION})"
        ));
    }
    let block_type = c.i32()?;
    let header = c.metadata()?;
    let content_len = c.len64()?;
    let content = c.take(content_len)?;
    let _footer = c.metadata()?;
    let trailing = c.i64()?;
    if c.pos != body_end {
        return Err(format!(
            "block size {size} disagrees with its contents ({} bytes)",
            c.pos - body_start
        ));
    }
    if trailing != (body_end - 8 - start) as i64 {
        return Err(format!(
            "trailing block length {trailing} disagrees with the block ({} bytes)",
            body_end - 8 - start
        ));
    }
    Ok((
        LogBlock {
            offset: start,
            block_type,
            header,
            content,
        },
        body_end,
    ))
}

fn find_magic(bytes: &[u8], from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(LOG_MAGIC.len())
        .position(|w| w == LOG_MAGIC)
        .map(|p| p + from)
}

/// The blocks of a Hudi log file. A block that is truncated or inconsistent is reported and
/// skipped, and reading resumes at the next block magic (Java turns such a stretch into a
/// `HoodieCorruptBlock` the same way).
pub fn scan_log_blocks(bytes: &[u8]) -> (Vec<LogBlock<'_>>, Vec<String>) {
    let mut blocks = Vec::new();
    let mut problems = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        if !bytes[pos..].starts_with(LOG_MAGIC) {
            let next = find_magic(bytes, pos + 1);
            problems.push(match next {
                Some(n) => format!("bytes {pos}..{n} are not a log block; skipped"),
                None => format!(
                    "bytes {pos}..{} are not a log block (truncated tail?); skipped",
                    bytes.len()
                ),
            });
            pos = next.unwrap_or(bytes.len());
            continue;
        }
        match parse_block(bytes, pos) {
            Ok((block, next)) => {
                blocks.push(block);
                pos = next;
            }
            Err(e) => {
                let next = find_magic(bytes, pos + 1).unwrap_or(bytes.len());
                problems.push(format!("corrupt block at byte {pos}: {e}; skipped"));
                pos = next;
            }
        }
    }
    (blocks, problems)
}

/// The records of an Avro data block (`HoodieAvroDataBlock`): i32 block version, i32 record
/// count, then per record an i32 length and the record's Avro binary encoding under `schema`.
/// A record that does not decode is reported and skipped (the lengths allow it).
pub fn decode_avro_block(
    content: &[u8],
    schema: &apache_avro::Schema,
) -> (Vec<Value>, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let mut c = Cursor {
        bytes: content,
        pos: 0,
        end: content.len(),
    };
    let header = (|| -> Result<usize, String> {
        let version = c.i32()?;
        if !(1..=3).contains(&version) {
            return Err(format!(
                "Avro data block version {version} is not supported"
            ));
        }
        c.len32()
    })();
    let count = match header {
        Ok(n) => n,
        Err(e) => {
            problems.push(e);
            return (out, problems);
        }
    };
    // Decoded with the bounded decoder of instant metadata: a crafted count or length cannot
    // make it allocate more than a small multiple of the record's size.
    let decoder = match metadata::AvroDecoder::new(schema) {
        Ok(d) => d,
        Err(e) => {
            problems.push(format!("unusable record schema: {e}"));
            return (out, problems);
        }
    };
    for i in 0..count {
        let record = match c.len32().and_then(|len| c.take(len)) {
            Ok(r) => r,
            Err(e) => {
                problems.push(format!("record {i} of {count}: {e}"));
                break;
            }
        };
        match decoder.decode_datum(record) {
            Ok(v) => out.push(v),
            Err(e) => problems.push(format!("record {i} of {count} does not decode: {e}")),
        }
    }
    if c.pos != content.len() {
        problems.push(format!(
            "{} bytes after the last record",
            content.len() - c.pos
        ));
    }
    (out, problems)
}

/// One `HoodieArchivedMetaEntry` record.
#[derive(Debug, Clone)]
struct ArchiveRecord {
    time: String,
    action_type: String,
    /// `actionState`; absent in archives written before Hudi archived pending states (they
    /// held completed instants only).
    state: Option<String>,
    value: Value,
    file: String,
}

impl ArchiveRecord {
    fn is_completed(&self) -> bool {
        self.state.as_deref().is_none_or(|s| s == "COMPLETED")
    }
    fn field(&self, key: &str) -> Option<&Value> {
        self.value.get(key).filter(|v| !v.is_null())
    }
}

/// Records of one archive log file.
fn read_archive_log(bytes: &[u8], file: &str) -> (Vec<ArchiveRecord>, Vec<String>) {
    let (blocks, mut problems) = scan_log_blocks(bytes);
    let mut records = Vec::new();
    let mut schemas: HashMap<String, Result<apache_avro::Schema, String>> = HashMap::new();
    for block in blocks {
        if block.block_type != AVRO_DATA_BLOCK {
            log::debug!(
                "{file}: block at byte {} has type {}, not an Avro data block; skipped",
                block.offset,
                block.block_type
            );
            continue;
        }
        let Some(text) = block.header.get(&HEADER_SCHEMA) else {
            problems.push(format!(
                "Avro data block at byte {} has no schema in its header",
                block.offset
            ));
            continue;
        };
        let schema = schemas
            .entry(text.clone())
            .or_insert_with(|| apache_avro::Schema::parse_str(text).map_err(|e| e.to_string()));
        let schema = match schema {
            Ok(s) => s,
            Err(e) => {
                problems.push(format!(
                    "Avro data block at byte {}: unreadable schema: {e}",
                    block.offset
                ));
                continue;
            }
        };
        let (values, errs) = decode_avro_block(block.content, schema);
        problems.extend(
            errs.into_iter()
                .map(|e| format!("Avro data block at byte {}: {e}", block.offset)),
        );
        for v in values {
            let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
            match (s("commitTime"), s("actionType")) {
                (Some(time), Some(action_type)) => records.push(ArchiveRecord {
                    time,
                    action_type,
                    state: s("actionState"),
                    file: file.to_string(),
                    value: v,
                }),
                _ => problems.push(format!(
                    "Avro data block at byte {}: a record without commitTime or actionType",
                    block.offset
                )),
            }
        }
    }
    (records, problems)
}

/// The archived file named by a leftover merge plan (`HoodieMergeArchiveFilePlan`), if any.
fn merge_plan_target(dir: &Path) -> Option<String> {
    let bytes = std::fs::read(dir.join(MERGE_ARCHIVE_PLAN)).ok()?;
    let v = metadata::decode(&bytes).ok()?;
    v.get("mergedArchiveFileName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The field of `HoodieArchivedMetaEntry` holding a completed instant's metadata
/// (`HoodieArchivedTimeline.getMetadataKey`).
fn metadata_key(action_type: &str) -> Option<&'static str> {
    Some(match action_type {
        "commit" | "deltacommit" => "hoodieCommitMetadata",
        "replacecommit" => "hoodieReplaceCommitMetadata",
        "clean" => "hoodieCleanMetadata",
        "rollback" => "hoodieRollbackMetadata",
        "savepoint" => "hoodieSavePointMetadata",
        "indexing" => "hoodieIndexCommitMetadata",
        _ => return None,
    })
}

/// Completed instants from the records of every archive file.
fn assemble_log_records(records: Vec<ArchiveRecord>) -> Vec<ArchivedInstant> {
    let mut groups: BTreeMap<(String, Action), Vec<ArchiveRecord>> = BTreeMap::new();
    for r in records {
        match parse_action(&r.action_type) {
            Some((action, _)) => groups.entry((r.time.clone(), action)).or_default().push(r),
            None => log::warn!(
                "{}: archived instant {} has unknown action {:?}; ignored",
                r.file,
                r.time,
                r.action_type
            ),
        }
    }
    let mut out = Vec::new();
    for ((time, action), recs) in groups {
        let Some(done) = recs.iter().find(|r| r.is_completed()) else {
            // Only pending states archived: not a completed instant.
            continue;
        };
        let mut planned = recs
            .iter()
            .find_map(|r| parse_action(&r.action_type).and_then(|(_, p)| p));
        let (metadata, mut plan) = match metadata_key(&done.action_type) {
            Some(key) => (
                Ok(done
                    .field(key)
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Default::default()))),
                None,
            ),
            // A completed record of a planned action (compaction, ...) carries its plan.
            None => (
                Ok(Value::Object(Default::default())),
                done.field("hoodieCompactionPlan").cloned().map(Ok),
            ),
        };
        let plan_key = match action {
            Action::Commit | Action::DeltaCommit => "hoodieCompactionPlan",
            Action::ReplaceCommit => "hoodieRequestedReplaceMetadata",
            Action::Clean => "hoodieCleanerPlan",
            _ => "",
        };
        if plan.is_none() && !plan_key.is_empty() {
            plan = recs
                .iter()
                .filter(|r| !r.is_completed())
                .find_map(|r| r.field(plan_key))
                .cloned()
                .map(Ok);
        }
        if planned.is_none() && action == Action::ReplaceCommit {
            if let Some(Ok(p)) = &plan {
                if metadata::is_clustering_request(p) {
                    planned = Some(Action::Clustering);
                }
            }
        }
        let planned = planned.or_else(|| planned_from_operation(action, &metadata));
        out.push(ArchivedInstant {
            completion: time.clone(),
            requested: time,
            action,
            planned,
            metadata,
            plan,
            file: done.file.clone(),
        });
    }
    out
}

/// Read a layout-1 archive directory (`.hoodie/archived`).
pub fn load_log_archive(dir: &Path) -> Result<Archive, ArchiveError> {
    let Some(names) = list_dir(dir)? else {
        return Ok(Archive::default());
    };
    let mut files: Vec<(u64, String)> = names
        .into_iter()
        .filter_map(|n| archive_log_version(&n).map(|v| (v, n)))
        .collect();
    files.sort();
    let merging = merge_plan_target(dir);
    let mut records = Vec::new();
    let mut problems = Vec::new();
    for (_, name) in files {
        let path = dir.join(&name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                problems.push(ArchiveError::new(&path, format!("cannot read: {e}")));
                continue;
            }
        };
        let (recs, errs) = read_archive_log(&bytes, &name);
        records.extend(recs);
        if !errs.is_empty() && merging.as_deref() == Some(name.as_str()) {
            // Java ignores an unfinished merged file: its sources are still there.
            log::warn!(
                "{}: unfinished merge of archive files (see {MERGE_ARCHIVE_PLAN}); its damage \
                 is ignored: {}",
                path.display(),
                errs.join("; ")
            );
            continue;
        }
        problems.extend(errs.into_iter().map(|e| ArchiveError::new(&path, e)));
    }
    Ok(Archive {
        instants: sort_and_dedup(assemble_log_records(records)),
        problems,
    })
}

// ---------------------------------------------------------------------------------------------
// Layout 2: the LSM timeline.

const VERSION_FILE: &str = "_version_";
const MANIFEST_PREFIX: &str = "manifest_";

/// `N` of a manifest file name `manifest_N`.
pub fn manifest_version(name: &str) -> Option<u64> {
    let n = name.strip_prefix(MANIFEST_PREFIX)?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        .then(|| n.parse().ok())
        .flatten()
}

/// `(min instant, max instant, level)` of an LSM data file name `<min>_<max>_<level>.parquet`.
pub fn lsm_file_name_parts(name: &str) -> Option<(String, String, u32)> {
    let stem = name.strip_suffix(".parquet")?;
    let mut parts = stem.split('_');
    let (min, max, level) = (parts.next()?, parts.next()?, parts.next()?);
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if parts.next().is_some() || !digits(min) || !digits(max) || !digits(level) {
        return None;
    }
    Some((min.to_string(), max.to_string(), level.parse().ok()?))
}

/// The file names listed by a manifest (`HoodieLSMTimelineManifest` as JSON).
pub fn parse_manifest(bytes: &[u8]) -> Result<Vec<String>, String> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        // Java reads an empty manifest as one without files.
        return Ok(Vec::new());
    }
    let v: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let files = match v.get("files") {
        None => return Ok(Vec::new()),
        Some(Value::Array(a)) => a,
        Some(_) => return Err("\"files\" is not a list".into()),
    };
    files
        .iter()
        .map(|f| {
            f.get("fileName")
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("manifest entry without fileName: {f}"))
        })
        .collect()
}

/// The snapshot version the LSM timeline is at: `_version_`, or (when that is missing or
/// unreadable, as after a crash between the two writes) the greatest manifest, as Java's
/// `LSMTimeline.latestSnapshotVersion` does.
fn lsm_snapshot_version(dir: &Path, names: &[String]) -> Option<u64> {
    let from_file = std::fs::read(dir.join(VERSION_FILE))
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.trim().parse::<u64>().ok());
    if from_file.is_none() && names.iter().any(|n| n == VERSION_FILE) {
        log::warn!(
            "{}: unreadable; using the greatest manifest",
            dir.join(VERSION_FILE).display()
        );
    }
    from_file.or_else(|| names.iter().filter_map(|n| manifest_version(n)).max())
}

/// One `HoodieLSMTimelineInstant` row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LsmRow {
    pub instant_time: Option<String>,
    pub completion_time: Option<String>,
    pub action: Option<String>,
    pub metadata: Option<Vec<u8>>,
    pub plan: Option<Vec<u8>>,
    pub version: Option<i32>,
}

fn field_string(f: &parquet::record::Field) -> Option<String> {
    use parquet::record::Field;
    match f {
        Field::Str(s) => Some(s.clone()),
        Field::Bytes(b) => std::str::from_utf8(b.data()).ok().map(str::to_string),
        _ => None,
    }
}

fn field_bytes(f: &parquet::record::Field) -> Option<Vec<u8>> {
    use parquet::record::Field;
    match f {
        Field::Bytes(b) => Some(b.data().to_vec()),
        Field::Str(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

/// The rows of one LSM data file. `Err` when the file cannot be opened as Parquet; rows read
/// before a failure are returned with the failure.
pub fn read_lsm_file(path: &Path) -> Result<(Vec<LsmRow>, Option<String>), String> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot open: {e}"))?;
    let reader = SerializedFileReader::new(file).map_err(|e| format!("not Parquet: {e}"))?;
    let iter = reader
        .get_row_iter(None)
        .map_err(|e| format!("cannot read rows: {e}"))?;
    let mut rows = Vec::new();
    for (i, row) in iter.enumerate() {
        let row = match row {
            Ok(r) => r,
            Err(e) => return Ok((rows, Some(format!("row {i}: {e}")))),
        };
        let mut r = LsmRow::default();
        for (name, f) in row.get_column_iter() {
            match name.as_str() {
                "instantTime" => r.instant_time = field_string(f),
                "completionTime" => r.completion_time = field_string(f),
                "action" => r.action = field_string(f),
                "metadata" => r.metadata = field_bytes(f),
                "plan" => r.plan = field_bytes(f),
                "version" => {
                    r.version = match f {
                        Field::Int(v) => Some(*v),
                        _ => None,
                    }
                }
                _ => {}
            }
        }
        rows.push(r);
    }
    Ok((rows, None))
}

/// A completed instant from an LSM row.
fn lsm_instant(
    row: LsmRow,
    file: &str,
    problems: &mut Vec<String>,
    index: usize,
) -> Option<ArchivedInstant> {
    let Some(requested) = row.instant_time.filter(|t| !t.is_empty()) else {
        problems.push(format!("row {index} has no instantTime"));
        return None;
    };
    let Some(action_name) = row.action else {
        problems.push(format!("row {index} ({requested}) has no action"));
        return None;
    };
    let Some((action, mut planned)) = parse_action(&action_name) else {
        log::warn!(
            "{file}: archived instant {requested} has unknown action {action_name:?}; ignored"
        );
        return None;
    };
    let completion = match row.completion_time.filter(|t| !t.is_empty()) {
        Some(c) => c,
        None => {
            problems.push(format!(
                "row {index} ({requested}) has no completionTime; its requested time is used"
            ));
            requested.clone()
        }
    };
    let decode = |what: &str, bytes: &[u8]| {
        metadata::decode(bytes).map_err(|e| format!("{file}: archived {what} of {requested}: {e}"))
    };
    let metadata = match &row.metadata {
        None => Ok(Value::Object(Default::default())),
        Some(b) => decode("metadata", b),
    };
    let plan = row.plan.as_deref().map(|b| decode("plan", b));
    if planned.is_none() {
        planned = match (action, &plan) {
            // `LSMTimelineWriter` stores a plan for a commit only when it was a compaction, and
            // for a deltacommit only when it was a log compaction.
            (Action::Commit, Some(_)) => Some(Action::Compaction),
            (Action::DeltaCommit, Some(_)) => Some(Action::LogCompaction),
            (Action::ReplaceCommit, Some(Ok(p))) if metadata::is_clustering_request(p) => {
                Some(Action::Clustering)
            }
            _ => None,
        }
        .or_else(|| planned_from_operation(action, &metadata));
    }
    Some(ArchivedInstant {
        requested,
        completion,
        action,
        planned,
        metadata,
        plan,
        file: file.to_string(),
    })
}

/// Read a layout-2 LSM timeline directory (`.hoodie/timeline/history`).
pub fn load_lsm_timeline(dir: &Path) -> Result<Archive, ArchiveError> {
    let Some(names) = list_dir(dir)? else {
        return Ok(Archive::default());
    };
    let Some(version) = lsm_snapshot_version(dir, &names) else {
        if names.iter().any(|n| n.ends_with(".parquet")) {
            log::info!(
                "{}: data files but no manifest (an archiving that did not commit); ignored",
                dir.display()
            );
        }
        return Ok(Archive::default());
    };
    let manifest_path = dir.join(format!("{MANIFEST_PREFIX}{version}"));
    let bytes = std::fs::read(&manifest_path).map_err(|e| {
        ArchiveError::new(
            &manifest_path,
            format!("cannot read the manifest of snapshot {version}: {e}"),
        )
    })?;
    let mut files = parse_manifest(&bytes)
        .map_err(|e| ArchiveError::new(&manifest_path, format!("unreadable manifest: {e}")))?;
    files.sort();
    files.dedup();
    let mut instants = Vec::new();
    let mut problems = Vec::new();
    for name in files {
        let path = dir.join(&name);
        let covers = lsm_file_name_parts(&name).map(|(min, max, _)| (min, max));
        let problem = |reason: String| ArchiveError {
            path: path.clone(),
            reason,
            covers: covers.clone(),
        };
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            problems.push(problem("not a file name of the history directory".into()));
            continue;
        }
        let (rows, failure) = match read_lsm_file(&path) {
            Ok(r) => r,
            Err(e) => {
                problems.push(problem(e));
                continue;
            }
        };
        if let Some(e) = failure {
            problems.push(problem(e));
        }
        let mut row_problems = Vec::new();
        for (i, row) in rows.into_iter().enumerate() {
            if let Some(inst) = lsm_instant(row, &name, &mut row_problems, i) {
                instants.push(inst);
            }
        }
        problems.extend(row_problems.into_iter().map(|r| ArchiveError {
            path: path.clone(),
            reason: r,
            covers: None,
        }));
    }
    Ok(Archive {
        instants: sort_and_dedup(instants),
        problems,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names() {
        assert_eq!(archive_log_version(".commits_.archive.1_1-0-1"), Some(1));
        assert_eq!(archive_log_version(".commits_.archive.12"), Some(12));
        assert_eq!(archive_log_version(".commits_.archive._1-0-1"), None);
        assert_eq!(archive_log_version("..commits_.archive.1_1-0-1.crc"), None);
        assert_eq!(archive_log_version("mergeArchivePlan"), None);
        assert_eq!(manifest_version("manifest_3"), Some(3));
        assert_eq!(manifest_version("manifest_"), None);
        assert_eq!(manifest_version("manifest_3.crc"), None);
        assert_eq!(
            lsm_file_name_parts("20240101000000000_20240101000009000_0.parquet"),
            Some(("20240101000000000".into(), "20240101000009000".into(), 0))
        );
        assert_eq!(lsm_file_name_parts("a_b_0.parquet"), None);
        assert_eq!(lsm_file_name_parts("1_2_0_3.parquet"), None);
    }

    #[test]
    fn manifests() {
        let text = br#"{
  "files" : [ {
    "fileName" : "1_2_0.parquet",
    "fileLen" : 10
  }, {
    "fileName" : "3_4_0.parquet",
    "fileLen" : 11
  } ]
}"#;
        assert_eq!(
            parse_manifest(text).unwrap(),
            vec!["1_2_0.parquet", "3_4_0.parquet"]
        );
        assert_eq!(parse_manifest(b"").unwrap(), Vec::<String>::new());
        assert_eq!(parse_manifest(b"{}").unwrap(), Vec::<String>::new());
        assert!(parse_manifest(b"{\"files\": [{}]}").is_err());
        assert!(parse_manifest(b"{\"files\": 3}").is_err());
        assert!(parse_manifest(b"{\"fil").is_err());
    }

    #[test]
    fn garbage_log_bytes_do_not_panic() {
        for bytes in [
            &b""[..],
            b"#HUDI#",
            b"#HUDI#\x7f\xff\xff\xff\xff\xff\xff\xff",
            b"#HUDI#\xff\xff\xff\xff\xff\xff\xff\xff",
            b"#HUDI#\0\0\0\0\0\0\0\x04\0\0\0\x01",
            b"xx#HUDI##HUDI#",
        ] {
            let (blocks, problems) = scan_log_blocks(bytes);
            assert!(blocks.is_empty());
            assert_eq!(problems.is_empty(), bytes.is_empty(), "{bytes:?}");
        }
        let schema = apache_avro::Schema::parse_str("\"string\"").unwrap();
        for content in [
            &b""[..],
            b"\0\0\0\x03\x7f\xff\xff\xff",
            b"\0\0\0\x09\0\0\0\x01",
            b"\0\0\0\x03\0\0\0\x02\0\0\0\x02\x02a\0\0\0\x09",
        ] {
            let (_, problems) = decode_avro_block(content, &schema);
            assert!(!problems.is_empty(), "{content:?}");
        }
        let (v, problems) = decode_avro_block(b"\0\0\0\x03\0\0\0\x01\0\0\0\x02\x02a", &schema);
        assert_eq!((v, problems), (vec![Value::from("a")], vec![]));
        // A record of five bytes announcing 2^25 nulls (each decodes from no bytes at all) is
        // refused by the value budget instead of being built.
        let nulls = apache_avro::Schema::parse_str(r#"{"type":"array","items":"null"}"#).unwrap();
        let mut bomb = b"\0\0\0\x03\0\0\0\x01\0\0\0\x05".to_vec();
        bomb.extend([0x80, 0x80, 0x80, 0x20, 0x00]);
        let started = std::time::Instant::now();
        let (v, problems) = decode_avro_block(&bomb, &nulls);
        assert!(v.is_empty() && problems.len() == 1, "{problems:?}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }
}
