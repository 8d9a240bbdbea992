//! Archival: moving old completed instants out of the active timeline into the archived
//! timeline, in the format of the table's timeline layout, as Hudi's archiver does.
//!
//! - Layout 1 (`TimelineArchiverV1`, Hudi 0.14/0.15): every timeline file of an archived
//!   instant (requested, inflight, completed) becomes one `HoodieArchivedMetaEntry` record, with
//!   the file's content converted as `MetadataConversionUtils.createMetaWrapper` does (commit
//!   metadata JSON → the Avro `HoodieCommitMetadata` model with `extraMetadata.ROLLING_STAT = ""`
//!   and operation type `COMPACT` for compactions; plans and clean/rollback metadata as their
//!   Avro models). Records go into Avro data blocks of at most `hoodie.commits.archival.batch`
//!   (10) records, whose header holds the writer schema only, in a new archive log file
//!   `.commits_.archive.<N>_1-0-1` per archival run (what Hudi does on storage without append:
//!   local file systems and object stores; on HDFS it appends to the last file instead).
//! - Layout 2 (`TimelineArchiverV2` + `LSMTimelineWriter`, Hudi 1.x): one
//!   `HoodieLSMTimelineInstant` row per archived instant (completed action, completion time,
//!   the completed file's bytes as `metadata`, the plan's bytes as `plan`) in a level-0 Parquet
//!   file `<min>_<max>_0.parquet`, committed by writing `manifest_<N+1>` and then `_version_`.
//!   When a level holds `hoodie.timeline.compaction.batch.size` (10) files, the oldest 10 are
//!   merged into one file of the next level, and old manifests beyond
//!   `hoodie.timeline.manifest.retained.versions` (3) plus the levels compacted are cleaned with
//!   the data files only they referenced.
//!
//! Then the archived instants' files are deleted from the active timeline: pending state files
//! first, completed files last in ascending order (HUDI-7207).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hudifs_storage::{StorageWrite, TablePath};

use ::parquet::basic::{Compression, GzipLevel};
use ::parquet::data_type::{ByteArray, ByteArrayType, Int32Type};
use ::parquet::file::metadata::KeyValue;
use ::parquet::file::properties::WriterProperties;
use ::parquet::file::writer::SerializedFileWriter;
use ::parquet::schema::parser::parse_message_type;
use serde_json::{json, Value as Json};

use super::{avro, encode_err, join, logfile, TableWriter};
use hudifs_core::archive::{self as reader, LsmRow};
use hudifs_core::error::{Error, Result};
use hudifs_core::metadata;
use hudifs_core::timeline::{self, Action, InstantFile, Layout, State};

/// Records per Avro data block of a layout-1 archive file (`hoodie.commits.archival.batch`).
const ARCHIVAL_BATCH: usize = 10;
/// Files of one LSM level that trigger a compaction into the next level
/// (`hoodie.timeline.compaction.batch.size`).
const LSM_COMPACTION_BATCH: usize = 10;
/// Manifest versions the LSM cleaner keeps (`hoodie.timeline.manifest.retained.versions`).
const LSM_RETAINED_VERSIONS: usize = 3;

/// One archived instant: all timeline files of one requested time and action family.
struct Group {
    requested: String,
    /// The completed action.
    action: Action,
    completion: Option<String>,
    /// Files in state order (requested, inflight, completed).
    files: Vec<InstantFile>,
}

impl Group {
    fn file(&self, state: State) -> Option<&InstantFile> {
        self.files.iter().find(|f| f.state == state)
    }
    /// Java's `ActiveAction.getPendingInstant`: the requested file, else the inflight one.
    fn pending(&self) -> Option<&InstantFile> {
        self.file(State::Requested)
            .or_else(|| self.file(State::Inflight))
    }
}

fn io_err<'a>(
    store: &'a dyn StorageWrite,
    path: &'a TablePath,
) -> impl Fn(std::io::Error) -> Error + 'a {
    move |e| Error::io(store.describe(path), e)
}

fn pq_err(path: &TablePath) -> impl Fn(::parquet::errors::ParquetError) -> Error + '_ {
    move |e| {
        Error::io(
            path.as_str(),
            std::io::Error::other(format!("Parquet: {e}")),
        )
    }
}

fn bad_file(store: &dyn StorageWrite, path: &TablePath, reason: impl std::fmt::Display) -> Error {
    Error::Invalid(format!("{}: {reason}", store.describe(path)))
}

/// File names in a directory, sorted (empty when it does not exist).
pub(super) fn file_names(store: &dyn StorageWrite, dir: &TablePath) -> Result<Vec<String>> {
    let entries = match store.list_names(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(store.describe(dir), e)),
    };
    let mut names: Vec<String> = entries
        .into_iter()
        .filter(|(_, k)| *k == hudifs_storage::Kind::File)
        .map(|(n, _)| n)
        .collect();
    names.sort();
    Ok(names)
}

impl TableWriter {
    /// The archived timeline's directory: `.hoodie/archived` (layout 1) or
    /// `.hoodie/timeline/history` (layout 2).
    pub fn archive_dir(&self) -> TablePath {
        let dir = if self.layout == Layout::V2 {
            join(&self.timeline_dir, "history")
        } else {
            TablePath::new(".hoodie/archived").map_err(|e| Error::Invalid(e.to_string()))
        };
        dir.unwrap_or_default()
    }

    /// Archive every completed commit, deltacommit, replacecommit (compactions and clusterings
    /// included), clean and rollback requested at or before `up_to`: write them to the archived
    /// timeline and delete their files from the active timeline. Returns the archived
    /// `(requested time, completed action)`, oldest first; nothing is written when there is
    /// nothing to archive.
    ///
    /// Refused, as Hudi's archiver never does it: archiving at or past a pending write,
    /// compaction or clustering, or at or past a savepoint (`hoodie.archive.beyond.savepoint` is
    /// false by default). Not enforced: Hudi's rule that keeps a replacecommit on the active
    /// timeline until the file groups it replaced are cleaned, so that tests can build the
    /// archived-replacecommit case of SEMANTICS.md §6.8.
    pub fn archive(&mut self, up_to: &str) -> Result<Vec<(String, Action)>> {
        let groups = self.archivable(up_to)?;
        if groups.is_empty() {
            return Ok(Vec::new());
        }
        if self.layout == Layout::V2 {
            self.write_lsm_archive(&groups)?;
        } else {
            self.write_log_archive(&groups)?;
        }
        for g in &groups {
            for f in g.files.iter().filter(|f| f.state != State::Completed) {
                self.delete(&join(&self.timeline_dir, &f.name)?)?;
            }
        }
        for g in &groups {
            for f in g.files.iter().filter(|f| f.state == State::Completed) {
                self.delete(&join(&self.timeline_dir, &f.name)?)?;
            }
        }
        Ok(groups
            .into_iter()
            .map(|g| (g.requested, g.action))
            .collect())
    }

    /// The instants `archive(up_to)` moves, read from the active timeline on disk.
    fn archivable(&self, up_to: &str) -> Result<Vec<Group>> {
        let mut by_instant: BTreeMap<(String, Action), Vec<InstantFile>> = BTreeMap::new();
        for name in file_names(&*self.store, &self.timeline_dir)? {
            if let Some(f) = timeline::parse_instant_file_name(&name, self.layout) {
                by_instant
                    .entry((f.requested.to_string(), f.action.completes_as()))
                    .or_default()
                    .push(f);
            }
        }
        let mut out = Vec::new();
        for ((requested, family), mut files) in by_instant {
            if requested.as_str() > up_to {
                continue;
            }
            files.sort_by_key(|f| f.state);
            let completed = files.iter().find(|f| f.state == State::Completed).cloned();
            match completed {
                None if family.is_write() => {
                    return Err(Error::Usage(format!(
                        "cannot archive up to {up_to}: {requested} ({}) is pending, and Hudi never \
                         archives at or past the earliest pending write",
                        files[0].action.name()
                    )))
                }
                None => {}
                Some(c) if c.action == Action::Savepoint => {
                    return Err(Error::Usage(format!(
                        "cannot archive up to {up_to}: savepoint {requested} stops Hudi's archiver"
                    )))
                }
                Some(c)
                    if matches!(
                        c.action,
                        Action::Commit
                            | Action::DeltaCommit
                            | Action::ReplaceCommit
                            | Action::Clean
                            | Action::Rollback
                    ) =>
                {
                    out.push(Group {
                        requested,
                        action: c.action,
                        completion: c.completion.as_ref().map(|c| c.to_string()),
                        files,
                    });
                }
                Some(_) => {}
            }
        }
        Ok(out)
    }

    fn read_timeline_file(&self, f: &InstantFile) -> Result<Vec<u8>> {
        self.read(&join(&self.timeline_dir, &f.name)?)
    }

    // -----------------------------------------------------------------------------------------
    // Layout 1.

    fn write_log_archive(&self, groups: &[Group]) -> Result<()> {
        let schema = avro::archived_meta_entry();
        let mut records = Vec::new();
        for g in groups {
            for f in &g.files {
                let entry = self.archived_meta_entry(g, f)?;
                records.push(avro::datum(&schema, &entry).map_err(encode_err(&f.name))?);
            }
        }
        let dir = self.archive_dir();
        let next = file_names(&*self.store, &dir)?
            .iter()
            .filter_map(|n| reader::archive_log_version(n))
            .max()
            .unwrap_or(0)
            + 1;
        let name = format!(".commits_.archive.{next}_{}", logfile::UNKNOWN_WRITE_TOKEN);
        let text = schema.to_text();
        let mut bytes = Vec::new();
        for chunk in records.chunks(ARCHIVAL_BATCH) {
            bytes.extend(logfile::archive_data_block(&text, chunk));
        }
        self.put(&join(&dir, &name)?, &bytes)
    }

    /// The `HoodieArchivedMetaEntry` of one timeline file (`createMetaWrapper`).
    fn archived_meta_entry(&self, g: &Group, f: &InstantFile) -> Result<Json> {
        let bytes = self.read_timeline_file(f)?;
        let decoded = if bytes.is_empty() {
            None
        } else {
            Some(metadata::decode(&bytes).map_err(|reason| {
                bad_file(
                    &*self.store,
                    &join(&self.timeline_dir, &f.name).unwrap_or_default(),
                    reason,
                )
            })?)
        };
        let state = match f.state {
            State::Requested => "REQUESTED",
            State::Inflight => "INFLIGHT",
            State::Completed => "COMPLETED",
        };
        // Hudi 0.14+ records the file's modification time here; the generator's logical clock
        // stands in for it.
        let transition = match f.state {
            State::Completed => self
                .completed
                .get(&g.requested)
                .cloned()
                .unwrap_or_else(|| g.requested.clone()),
            _ => g.requested.clone(),
        };
        let mut o = serde_json::Map::new();
        o.insert("commitTime".into(), json!(g.requested));
        o.insert("actionState".into(), json!(state));
        o.insert("stateTransitionTime".into(), json!(transition));
        o.insert("actionType".into(), json!(f.action.name()));
        o.insert("version".into(), Json::Null);
        if f.state == State::Completed && decoded.is_none() {
            // `createMetaWrapperForEmptyInstant`: an empty completed file archives no metadata.
            return Ok(Json::Object(o));
        }
        let completed = f.state == State::Completed;
        match (f.action, decoded) {
            (Action::Clean, Some(v)) if completed => {
                o.insert("hoodieCleanMetadata".into(), v);
            }
            (Action::Clean, Some(v)) => {
                o.insert("hoodieCleanerPlan".into(), v);
            }
            (Action::Commit | Action::DeltaCommit, v) => {
                o.insert(
                    "hoodieCommitMetadata".into(),
                    convert_commit_metadata(v, false),
                );
            }
            (Action::ReplaceCommit, Some(v)) if completed => {
                o.insert(
                    "hoodieReplaceCommitMetadata".into(),
                    convert_commit_metadata(Some(v), true),
                );
            }
            (Action::ReplaceCommit, Some(v)) if f.state == State::Inflight => {
                o.insert(
                    "HoodieInflightReplaceMetadata".into(),
                    convert_commit_metadata(Some(v), false),
                );
            }
            (Action::ReplaceCommit, Some(v)) => {
                o.insert("hoodieRequestedReplaceMetadata".into(), v);
            }
            (Action::Rollback, Some(v)) if completed => {
                o.insert("hoodieRollbackMetadata".into(), v);
            }
            (Action::Compaction | Action::LogCompaction, Some(v))
                if f.state == State::Requested =>
            {
                o.insert("hoodieCompactionPlan".into(), v);
            }
            _ => {}
        }
        Ok(Json::Object(o))
    }

    // -----------------------------------------------------------------------------------------
    // Layout 2.

    fn write_lsm_archive(&self, groups: &[Group]) -> Result<()> {
        let mut rows = Vec::new();
        for g in groups {
            rows.push(self.lsm_row(g)?);
        }
        write_lsm_rows(&*self.store, &self.archive_dir(), &rows)
    }
    /// `MetadataConversionUtils.createLSMTimelineInstant`.
    fn lsm_row(&self, g: &Group) -> Result<LsmRow> {
        let non_empty = |b: Vec<u8>| (!b.is_empty()).then_some(b);
        let completed = g
            .file(State::Completed)
            .ok_or_else(|| Error::Usage(format!("{} is not completed", g.requested)))?;
        let metadata = non_empty(self.read_timeline_file(completed)?);
        let read = |f: Option<&InstantFile>| -> Result<Option<Vec<u8>>> {
            Ok(match f {
                Some(f) => non_empty(self.read_timeline_file(f)?),
                None => None,
            })
        };
        let plan = match g.pending().map(|f| f.action) {
            Some(Action::Clean) => read(g.pending())?,
            Some(Action::ReplaceCommit | Action::Clustering) => {
                // The inflight file's workload profile, if any, wins over the requested plan.
                read(g.file(State::Inflight))?.or(read(g.file(State::Requested))?)
            }
            Some(Action::Compaction | Action::LogCompaction) => read(g.file(State::Requested))?,
            _ => None,
        };
        Ok(LsmRow {
            instant_time: Some(g.requested.clone()),
            completion_time: Some(g.completion.clone().unwrap_or_else(|| g.requested.clone())),
            action: Some(g.action.name().to_string()),
            metadata,
            plan,
            version: Some(1),
        })
    }
}

/// Write `rows` as one level-0 LSM file `<first>_<last>_0.parquet` of history `dir`, commit it
/// in a new manifest, and compact and clean the levels (`LSMTimelineWriter.write` and
/// `compactAndClean`); nothing when the manifest holds that file already.
pub(super) fn write_lsm_rows(
    store: &dyn StorageWrite,
    dir: &TablePath,
    rows: &[LsmRow],
) -> Result<()> {
    let first = rows.first().and_then(|r| r.instant_time.clone());
    let last = rows.last().and_then(|r| r.instant_time.clone());
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(());
    };
    let name = format!("{first}_{last}_0.parquet");
    let (_, files) = latest_manifest(store, dir)?;
    if !files.iter().any(|(n, _)| *n == name) {
        write_lsm_file(store, &join(dir, &name)?, rows)?;
        update_manifest(store, dir, &[], &name)?;
    }
    compact_and_clean(store, dir)
}

/// Commit metadata as `MetadataConversionUtils.convertCommitMetadata` hands it to the Avro model:
/// the Java object's defaults filled in (an empty requested file is an empty
/// `HoodieCommitMetadata`), `ROLLING_STAT` blanked in `extraMetadata`, `COMPACT` as the operation
/// of a compaction.
fn convert_commit_metadata(v: Option<Json>, replace: bool) -> Json {
    let mut o = match v {
        Some(Json::Object(o)) => o,
        _ => serde_json::Map::new(),
    };
    let compacted = o.get("compacted").and_then(Json::as_bool).unwrap_or(false);
    if !o.get("partitionToWriteStats").is_some_and(Json::is_object) {
        o.insert("partitionToWriteStats".into(), json!({}));
    }
    o.insert("compacted".into(), json!(compacted));
    let mut extra = o
        .get("extraMetadata")
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default();
    extra.insert("ROLLING_STAT".into(), json!(""));
    o.insert("extraMetadata".into(), Json::Object(extra));
    o.insert("version".into(), Json::Null);
    let operation = if compacted {
        "COMPACT".to_string()
    } else {
        o.get("operationType")
            .and_then(Json::as_str)
            .unwrap_or("UNKNOWN")
            .to_string()
    };
    o.insert("operationType".into(), json!(operation));
    if replace
        && !o
            .get("partitionToReplaceFileIds")
            .is_some_and(Json::is_object)
    {
        o.insert("partitionToReplaceFileIds".into(), json!({}));
    }
    Json::Object(o)
}

/// A manifest's entries: `(file name, length)`.
type ManifestFiles = Vec<(String, u64)>;

/// The current LSM snapshot: its version and entries.
fn latest_manifest(
    store: &dyn StorageWrite,
    dir: &TablePath,
) -> Result<(Option<u64>, ManifestFiles)> {
    let names = file_names(store, dir)?;
    let version = store
        .read(&join(dir, "_version_")?)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.trim().parse::<u64>().ok())
        .or_else(|| {
            names
                .iter()
                .filter_map(|n| reader::manifest_version(n))
                .max()
        });
    let Some(version) = version else {
        return Ok((None, Vec::new()));
    };
    Ok((Some(version), read_manifest(store, dir, version)?))
}

fn read_manifest(store: &dyn StorageWrite, dir: &TablePath, version: u64) -> Result<ManifestFiles> {
    let path = join(dir, &format!("manifest_{version}"))?;
    let bytes = store.read(&path).map_err(io_err(store, &path))?;
    let bad = |reason: String| bad_file(store, &path, reason);
    let v: Json = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
    let files = v.get("files").and_then(Json::as_array).cloned();
    files
        .unwrap_or_default()
        .iter()
        .map(|f| {
            let name = f.get("fileName").and_then(Json::as_str);
            let len = f.get("fileLen").and_then(Json::as_u64);
            match (name, len) {
                (Some(n), Some(l)) => Ok((n.to_string(), l)),
                _ => Err(bad(format!("bad manifest entry {f}"))),
            }
        })
        .collect()
}

/// A manifest as Jackson's default pretty printer writes `HoodieLSMTimelineManifest`.
fn manifest_text(files: &[(String, u64)]) -> String {
    if files.is_empty() {
        return "{\n  \"files\" : [ ]\n}".to_string();
    }
    let entries: Vec<String> = files
        .iter()
        .map(|(n, l)| {
            format!(
                "{{\n    \"fileName\" : {},\n    \"fileLen\" : {l}\n  }}",
                Json::from(n.as_str())
            )
        })
        .collect();
    format!("{{\n  \"files\" : [ {} ]\n}}", entries.join(", "))
}

/// `LSMTimelineWriter.updateManifest`: the current snapshot's files minus `remove` plus `add`
/// as `manifest_<N+1>`, then `_version_` = N+1.
fn update_manifest(
    store: &dyn StorageWrite,
    dir: &TablePath,
    remove: &[String],
    add: &str,
) -> Result<()> {
    let (version, mut files) = latest_manifest(store, dir)?;
    files.retain(|(n, _)| !remove.contains(n));
    let path = join(dir, add)?;
    let len = store.stat(&path).map_err(io_err(store, &path))?.size;
    files.push((add.to_string(), len));
    let next = version.map_or(1, |v| v + 1);
    let manifest = join(dir, &format!("manifest_{next}"))?;
    store
        .put(&manifest, manifest_text(&files).as_bytes())
        .map_err(io_err(store, &manifest))?;
    let version_file = join(dir, "_version_")?;
    store
        .delete(&version_file)
        .map_err(io_err(store, &version_file))?;
    store
        .put(&version_file, next.to_string().as_bytes())
        .map_err(io_err(store, &version_file))
}

/// `LSMTimelineWriter.compactAndClean`.
fn compact_and_clean(store: &dyn StorageWrite, dir: &TablePath) -> Result<()> {
    let mut layer = 0;
    loop {
        let (_, files) = latest_manifest(store, dir)?;
        let mut in_layer: Vec<String> = files
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| reader::lsm_file_name_parts(n).is_some_and(|(_, _, l)| l == layer))
            .collect();
        if in_layer.len() < LSM_COMPACTION_BATCH {
            break;
        }
        in_layer.sort();
        in_layer.truncate(LSM_COMPACTION_BATCH);
        let parts: Vec<(String, String, u32)> = in_layer
            .iter()
            .filter_map(|n| reader::lsm_file_name_parts(n))
            .collect();
        let min = parts
            .iter()
            .map(|p| &p.0)
            .min()
            .cloned()
            .unwrap_or_default();
        let max = parts
            .iter()
            .map(|p| &p.1)
            .max()
            .cloned()
            .unwrap_or_default();
        let compacted = format!("{min}_{max}_{}.parquet", layer + 1);
        let mut rows = Vec::new();
        for n in &in_layer {
            let path = join(dir, n)?;
            let bytes = store.read(&path).map_err(io_err(store, &path))?;
            let (r, failure) =
                reader::read_lsm_file(bytes).map_err(|reason| bad_file(store, &path, reason))?;
            if let Some(reason) = failure {
                return Err(bad_file(store, &path, reason));
            }
            rows.extend(r);
        }
        write_lsm_file(store, &join(dir, &compacted)?, &rows)?;
        update_manifest(store, dir, &in_layer, &compacted)?;
        layer += 1;
    }
    clean_lsm(store, dir, LSM_RETAINED_VERSIONS + layer as usize)
}

/// `LSMTimelineWriter.clean`: keep the newest `keep` manifests and the data files they list.
fn clean_lsm(store: &dyn StorageWrite, dir: &TablePath, keep: usize) -> Result<()> {
    let names = file_names(store, dir)?;
    let mut versions: Vec<u64> = names
        .iter()
        .filter_map(|n| reader::manifest_version(n))
        .collect();
    if versions.len() <= keep {
        return Ok(());
    }
    versions.sort_unstable_by(|a, b| b.cmp(a));
    let (kept, dropped) = versions.split_at(keep);
    let mut live = BTreeSet::new();
    for v in kept {
        live.extend(read_manifest(store, dir, *v)?.into_iter().map(|(n, _)| n));
    }
    let delete = |name: &str| -> Result<()> {
        let path = join(dir, name)?;
        store.delete(&path).map_err(io_err(store, &path))?;
        Ok(())
    };
    for v in dropped {
        delete(&format!("manifest_{v}"))?;
    }
    for n in names
        .iter()
        .filter(|n| n.ends_with(".parquet") && !live.contains(*n))
    {
        delete(n)?;
    }
    Ok(())
}

/// Write `HoodieLSMTimelineInstant` rows as parquet-avro would: the Avro schema's Parquet
/// translation (`string` → `binary (STRING)`, `bytes` → `binary`, unions with null → optional),
/// the Avro schema in the footer, GZIP compression (`hoodie.parquet.compression.codec`'s
/// default).
fn write_lsm_file(store: &dyn StorageWrite, path: &TablePath, rows: &[LsmRow]) -> Result<()> {
    let message = "message org.apache.hudi.avro.model.HoodieLSMTimelineInstant {\n  \
                   optional binary instantTime (STRING);\n  \
                   optional binary completionTime (STRING);\n  \
                   optional binary action (STRING);\n  \
                   optional binary metadata;\n  \
                   optional binary plan;\n  \
                   required int32 version;\n}\n";
    let schema = Arc::new(parse_message_type(message).map_err(pq_err(path))?);
    let kv = vec![
        KeyValue::new(
            "parquet.avro.schema".to_string(),
            avro::lsm_timeline_instant_schema_text(),
        ),
        KeyValue::new("writer.model.name".to_string(), "avro".to_string()),
    ];
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::GZIP(GzipLevel::default()))
            .set_key_value_metadata(Some(kv))
            .build(),
    );
    let mut writer = SerializedFileWriter::new(Vec::new(), schema, props).map_err(pq_err(path))?;
    let mut rg = writer.next_row_group().map_err(pq_err(path))?;
    let optional = |get: &dyn Fn(&LsmRow) -> Option<Vec<u8>>| -> (Vec<ByteArray>, Vec<i16>) {
        let mut values = Vec::new();
        let mut levels = Vec::new();
        for r in rows {
            match get(r) {
                Some(b) => {
                    values.push(ByteArray::from(b));
                    levels.push(1);
                }
                None => levels.push(0),
            }
        }
        (values, levels)
    };
    let columns = [
        optional(&|r| r.instant_time.clone().map(String::into_bytes)),
        optional(&|r| r.completion_time.clone().map(String::into_bytes)),
        optional(&|r| r.action.clone().map(String::into_bytes)),
        optional(&|r| r.metadata.clone()),
        optional(&|r| r.plan.clone()),
    ];
    let versions: Vec<i32> = rows.iter().map(|r| r.version.unwrap_or(1)).collect();
    let mut index = 0;
    while let Some(mut col) = rg.next_column().map_err(pq_err(path))? {
        match columns.get(index) {
            Some((values, levels)) => {
                col.typed::<ByteArrayType>()
                    .write_batch(values, Some(levels), None)
            }
            None => col.typed::<Int32Type>().write_batch(&versions, None, None),
        }
        .map_err(pq_err(path))?;
        col.close().map_err(pq_err(path))?;
        index += 1;
    }
    rg.close().map_err(pq_err(path))?;
    let bytes = writer.into_inner().map_err(pq_err(path))?;
    store.put(path, &bytes).map_err(io_err(store, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_text_is_what_jackson_prints() {
        assert_eq!(manifest_text(&[]), "{\n  \"files\" : [ ]\n}");
        let text = manifest_text(&[("a_b_0.parquet".into(), 12), ("c_d_0.parquet".into(), 3)]);
        assert_eq!(
            text,
            "{\n  \"files\" : [ {\n    \"fileName\" : \"a_b_0.parquet\",\n    \"fileLen\" : 12\n  \
             }, {\n    \"fileName\" : \"c_d_0.parquet\",\n    \"fileLen\" : 3\n  } ]\n}"
        );
        assert_eq!(
            reader::parse_manifest(text.as_bytes()).unwrap(),
            vec!["a_b_0.parquet", "c_d_0.parquet"]
        );
    }

    #[test]
    fn converted_commit_metadata_has_java_defaults() {
        let v = convert_commit_metadata(None, false);
        assert_eq!(
            v,
            json!({"partitionToWriteStats": {}, "compacted": false,
                   "extraMetadata": {"ROLLING_STAT": ""}, "version": null,
                   "operationType": "UNKNOWN"})
        );
        let v = convert_commit_metadata(
            Some(json!({"compacted": true, "operationType": "UPSERT",
                        "extraMetadata": {"schema": "s"}})),
            true,
        );
        assert_eq!(v["operationType"], "COMPACT");
        assert_eq!(v["extraMetadata"]["schema"], "s");
        assert_eq!(v["partitionToReplaceFileIds"], json!({}));
    }
}
