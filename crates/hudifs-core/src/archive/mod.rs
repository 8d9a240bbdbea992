//! The archived timeline (SEMANTICS.md §6.8): completed instants that Hudi's archiver moved out of the
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
//! time is the record's on layout 2 and the requested time on layout 1 (SEMANTICS.md §1.4).
//!
//! - `log_archive`: layout 1; `lsm`: layout 2.

mod log_archive;
mod lsm;

use std::fmt;

use hudifs_storage::{Kind, Storage, TablePath};
use serde_json::Value;

pub use log_archive::{archive_log_version, decode_avro_block, load_log_archive};
pub use lsm::{
    load_lsm_timeline, lsm_file_name_parts, manifest_version, parse_manifest, read_lsm_file, LsmRow,
};

use crate::instant_time::InstantTime;
use crate::metadata::{CommitMetadata, DecodeError, MetadataError};
use crate::table::TableConfig;
use crate::timeline::{Action, Layout};

/// One completed archived instant.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivedInstant {
    pub requested: InstantTime,
    /// Layout 2: the archived completion time. Layout 1: the requested time.
    pub completion: InstantTime,
    /// The completed action (`commit` for a compaction, `replacecommit` for a clustering).
    pub action: Action,
    /// The action the instant was planned as (compaction, log compaction, clustering), when the
    /// archive tells.
    pub planned: Option<Action>,
    /// The completed instant's metadata as JSON (commit, replace-commit, clean, rollback, ...
    /// metadata); an empty object for an instant archived without metadata (an empty completed
    /// file). An error when its bytes cannot be decoded.
    pub metadata: Result<Value, MetadataError>,
    /// The plan archived with the instant (compaction plan, requested replace metadata, cleaner
    /// plan), if any.
    pub plan: Option<Result<Value, MetadataError>>,
    /// The archive file it was read from.
    pub file: String,
}

impl ArchivedInstant {
    /// Completed commit, deltacommit or replacecommit.
    pub fn is_write(&self) -> bool {
        self.action.is_write()
    }

    /// The commit metadata of an archived write.
    pub fn commit_metadata(&self) -> Result<CommitMetadata, MetadataError> {
        let v = self.metadata.as_ref().map_err(Clone::clone)?;
        CommitMetadata::from_json(v).map_err(|error| MetadataError {
            file: format!(
                "{} (archived {} {})",
                self.file,
                self.action.name(),
                self.requested
            ),
            error,
        })
    }
}

/// An archive file (or a piece of one) that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArchiveError {
    /// The file or directory, as the storage names it.
    pub path: String,
    pub reason: String,
    /// The requested-time range `(min, max)` of the instants the unreadable piece held, when the
    /// file name tells it (LSM data files).
    pub covers: Option<(String, String)>,
}

impl ArchiveError {
    fn new(path: String, reason: impl Into<String>) -> ArchiveError {
        ArchiveError {
            path,
            reason: reason.into(),
            covers: None,
        }
    }
}

impl fmt::Display for ArchiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)?;
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
pub fn load_archive(store: &dyn Storage, cfg: &TableConfig) -> Result<Archive, ArchiveError> {
    match cfg.layout {
        Layout::V2 => {
            let lsm = load_lsm_timeline(store, &cfg.archive_dir)?;
            match cfg.legacy_archive_dir() {
                Some(dir) => Ok(with_legacy(lsm, load_log_archive(store, &dir))),
                None => Ok(lsm),
            }
        }
        Layout::V1 => load_log_archive(store, &cfg.archive_dir),
    }
}

/// The LSM history of a table upgraded from 0.x together with the archive its 0.x writer left
/// (`TableConfig::legacy_archive_dir`): the instants the upgrade's copy holds as the LSM
/// history has them (with their completion times), the others as the old archive has them
/// (completion time = requested time, as on layout 1).
fn with_legacy(mut lsm: Archive, legacy: Result<Archive, ArchiveError>) -> Archive {
    match legacy {
        Ok(legacy) => {
            lsm.instants.extend(legacy.instants);
            lsm.instants = sort_and_dedup(std::mem::take(&mut lsm.instants));
            lsm.problems.extend(legacy.problems);
        }
        Err(e) => lsm.problems.push(e),
    }
    lsm
}

/// File names in `dir`, sorted, or `None` when it does not exist.
fn list_dir(store: &dyn Storage, dir: &TablePath) -> Result<Option<Vec<String>>, ArchiveError> {
    let entries = match store.list_names(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ArchiveError::new(
                store.describe(dir),
                format!("cannot list: {e}"),
            ))
        }
    };
    let mut names: Vec<String> = entries
        .into_iter()
        .filter(|(_, kind)| *kind == Kind::File)
        .map(|(name, _)| name)
        .collect();
    names.sort();
    Ok(Some(names))
}

/// A file of the archive directory.
fn child(dir: &TablePath, name: &str) -> Result<TablePath, ArchiveError> {
    dir.child(name)
        .map_err(|e| ArchiveError::new(name.to_string(), e.to_string()))
}

/// Decode archived instant-file bytes, naming what they are on failure.
fn decode(bytes: &[u8], file: impl FnOnce() -> String) -> Result<Value, MetadataError> {
    crate::metadata::decode(bytes).map_err(|error: DecodeError| MetadataError {
        file: file(),
        error,
    })
}

/// The action named in an archive record, as the completed action and the planned one.
fn parse_action(name: &str) -> Option<(Action, Option<Action>)> {
    let a = Action::from_name(name)?;
    let planned = a.is_planned().then_some(a);
    Some((a.completes_as(), planned))
}

/// A planned action told by the completed metadata's operation type.
fn planned_from_operation(
    action: Action,
    metadata: &Result<Value, MetadataError>,
) -> Option<Action> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An upgraded table's two archives: an instant in both is taken as the LSM history has it
    /// (its completion time), the others from whichever holds them, in order; the old
    /// archive's problems are kept.
    #[test]
    fn the_lsm_history_wins_over_the_legacy_archive() {
        let at = |requested: &str, completion: &str, file: &str| ArchivedInstant {
            requested: InstantTime::parse(requested).unwrap(),
            completion: InstantTime::parse(completion).unwrap(),
            action: Action::Commit,
            planned: None,
            metadata: Ok(Value::Object(Default::default())),
            plan: None,
            file: file.into(),
        };
        let lsm = Archive {
            instants: vec![
                at("20250101000002000", "20250101000002500", "lsm"),
                at("20250101000003000", "20250101000003500", "lsm"),
            ],
            problems: Vec::new(),
        };
        let legacy = Archive {
            instants: vec![
                at("20250101000001000", "20250101000001000", "old"),
                at("20250101000002000", "20250101000002000", "old"),
            ],
            problems: vec![ArchiveError::new("old.2".into(), "truncated")],
        };
        let both = with_legacy(lsm.clone(), Ok(legacy));
        let got: Vec<(&str, &str, &str)> = both
            .instants
            .iter()
            .map(|i| (i.requested.as_str(), i.completion.as_str(), i.file.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("20250101000001000", "20250101000001000", "old"),
                ("20250101000002000", "20250101000002500", "lsm"),
                ("20250101000003000", "20250101000003500", "lsm"),
            ]
        );
        assert_eq!(both.problems.len(), 1);
        let unreadable = with_legacy(lsm.clone(), Err(ArchiveError::new("old".into(), "x")));
        assert_eq!(unreadable.instants, lsm.instants);
        assert!(!unreadable.is_complete());
    }

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
    fn garbage_avro_blocks_do_not_panic() {
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
        assert_eq!(v, vec![Value::from("a")]);
        assert!(problems.is_empty());
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
