//! Layout 1 (table version 6): Hudi log files of `HoodieArchivedMetaEntry` records under
//! `.hoodie/archived/`.

use std::collections::{BTreeMap, HashMap};

use hudifs_storage::{Storage, TablePath};
use serde_json::Value;

use super::{
    child, list_dir, parse_action, planned_from_operation, sort_and_dedup, Archive, ArchiveError,
    ArchivedInstant,
};
use crate::instant_time::InstantTime;
use crate::logblock::{block_type::AVRO_DATA_BLOCK, header::SCHEMA as HEADER_SCHEMA, Cursor};
use crate::metadata;
use crate::timeline::Action;

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

/// The records of an Avro data block (`HoodieAvroDataBlock`): i32 block version, i32 record
/// count, then per record an i32 length and the record's Avro binary encoding under `schema`.
/// A record that does not decode is reported and skipped (the lengths allow it).
pub fn decode_avro_block(
    content: &[u8],
    schema: &apache_avro::Schema,
) -> (Vec<Value>, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let mut c = Cursor::new(content);
    let header = (|| -> Result<usize, String> {
        let version = c.i32().map_err(|e| e.to_string())?;
        if !(1..=3).contains(&version) {
            return Err(format!(
                "Avro data block version {version} is not supported"
            ));
        }
        c.len32().map_err(|e| e.to_string())
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
    if c.pos() != content.len() {
        problems.push(format!(
            "{} bytes after the last record",
            content.len() - c.pos()
        ));
    }
    (out, problems)
}

/// One `HoodieArchivedMetaEntry` record.
#[derive(Debug, Clone)]
struct ArchiveRecord {
    time: InstantTime,
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
    let (blocks, skipped) = crate::logblock::scan_log_blocks(bytes);
    let mut problems: Vec<String> = skipped.iter().map(ToString::to_string).collect();
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
            match (
                s("commitTime").and_then(|t| InstantTime::parse(&t)),
                s("actionType"),
            ) {
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
fn merge_plan_target(store: &dyn Storage, dir: &TablePath) -> Option<String> {
    let bytes = store.read(&dir.child(MERGE_ARCHIVE_PLAN).ok()?).ok()?;
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
    let mut groups: BTreeMap<(InstantTime, Action), Vec<ArchiveRecord>> = BTreeMap::new();
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
pub fn load_log_archive(store: &dyn Storage, dir: &TablePath) -> Result<Archive, ArchiveError> {
    let Some(names) = list_dir(store, dir)? else {
        return Ok(Archive::default());
    };
    let mut files: Vec<(u64, String)> = names
        .into_iter()
        .filter_map(|n| archive_log_version(&n).map(|v| (v, n)))
        .collect();
    files.sort();
    let merging = merge_plan_target(store, dir);
    let mut records = Vec::new();
    let mut problems = Vec::new();
    for (_, name) in files {
        let path = child(dir, &name)?;
        let shown = store.describe(&path);
        let bytes = match store.read(&path) {
            Ok(b) => b,
            Err(e) => {
                problems.push(ArchiveError::new(shown, format!("cannot read: {e}")));
                continue;
            }
        };
        let (recs, errs) = read_archive_log(&bytes, &name);
        records.extend(recs);
        if !errs.is_empty() && merging.as_deref() == Some(name.as_str()) {
            // Java ignores an unfinished merged file: its sources are still there.
            log::warn!(
                "{shown}: unfinished merge of archive files (see {MERGE_ARCHIVE_PLAN}); its damage \
                 is ignored: {}",
                errs.join("; ")
            );
            continue;
        }
        problems.extend(
            errs.into_iter()
                .map(|e| ArchiveError::new(shown.clone(), e)),
        );
    }
    Ok(Archive {
        instants: sort_and_dedup(assemble_log_records(records)),
        problems,
    })
}
