//! Layout 2 (table versions 8 and 9): the LSM timeline under `.hoodie/timeline/history/`.

use hudifs_storage::{Storage, TablePath};
use serde_json::Value;

use super::{
    child, decode, list_dir, parse_action, planned_from_operation, sort_and_dedup, Archive,
    ArchiveError, ArchivedInstant,
};
use crate::instant_time::InstantTime;
use crate::metadata;
use crate::timeline::Action;

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
fn lsm_snapshot_version(store: &dyn Storage, dir: &TablePath, names: &[String]) -> Option<u64> {
    let from_file = store
        .read(&dir.child(VERSION_FILE).ok()?)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.trim().parse::<u64>().ok());
    if from_file.is_none() && names.iter().any(|n| n == VERSION_FILE) {
        log::warn!(
            "{}/{VERSION_FILE}: unreadable; using the greatest manifest",
            store.describe(dir)
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
pub fn read_lsm_file(bytes: Vec<u8>) -> Result<(Vec<LsmRow>, Option<String>), String> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use parquet::record::Field;
    let reader = SerializedFileReader::new(bytes::Bytes::from(bytes))
        .map_err(|e| format!("not Parquet: {e}"))?;
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
    let Some(requested) = row.instant_time.as_deref().and_then(InstantTime::parse) else {
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
    let completion = match row.completion_time.as_deref().and_then(InstantTime::parse) {
        Some(c) => c,
        None => {
            problems.push(format!(
                "row {index} ({requested}) has no completionTime; its requested time is used"
            ));
            requested.clone()
        }
    };
    let decode = |what: &str, bytes: &[u8]| {
        decode(bytes, || format!("{file} (archived {what} of {requested})"))
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
pub fn load_lsm_timeline(store: &dyn Storage, dir: &TablePath) -> Result<Archive, ArchiveError> {
    let Some(names) = list_dir(store, dir)? else {
        return Ok(Archive::default());
    };
    let Some(version) = lsm_snapshot_version(store, dir, &names) else {
        if names.iter().any(|n| n.ends_with(".parquet")) {
            log::info!(
                "{}: data files but no manifest (an archiving that did not commit); ignored",
                store.describe(dir)
            );
        }
        return Ok(Archive::default());
    };
    let manifest_path = child(dir, &format!("{MANIFEST_PREFIX}{version}"))?;
    let shown = store.describe(&manifest_path);
    let bytes = store.read(&manifest_path).map_err(|e| {
        ArchiveError::new(
            shown.clone(),
            format!("cannot read the manifest of snapshot {version}: {e}"),
        )
    })?;
    let mut files = parse_manifest(&bytes)
        .map_err(|e| ArchiveError::new(shown.clone(), format!("unreadable manifest: {e}")))?;
    files.sort();
    files.dedup();
    let mut instants = Vec::new();
    let mut problems = Vec::new();
    for name in files {
        let covers = lsm_file_name_parts(&name).map(|(min, max, _)| (min, max));
        let Ok(path) = dir.child(&name) else {
            problems.push(ArchiveError {
                path: format!("{}/{name}", store.describe(dir)),
                reason: "not a file name of the history directory".into(),
                covers,
            });
            continue;
        };
        let shown = store.describe(&path);
        let problem = |reason: String| ArchiveError {
            path: shown.clone(),
            reason,
            covers: covers.clone(),
        };
        let read = store
            .read(&path)
            .map_err(|e| format!("cannot open: {e}"))
            .and_then(read_lsm_file);
        let (rows, failure) = match read {
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
            path: shown.clone(),
            reason: r,
            covers: None,
        }));
    }
    Ok(Archive {
        instants: sort_and_dedup(instants),
        problems,
    })
}
