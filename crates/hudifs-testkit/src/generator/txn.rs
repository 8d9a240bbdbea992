//! Writes: a [`Txn`] begun with [`TableWriter::begin`](super::TableWriter::begin) — inserts,
//! updates and replaced file groups, then complete (or staged) or abandon. The bulk inserts of
//! benchmark tables are in `bulk.rs`.

use std::collections::BTreeMap;
use std::sync::Arc;

use hudifs_storage::{StorageWrite, TablePath};

use serde_json::{json, Value as Json};

use super::cdc::{self, CdcMode, CdcOp};
use super::parquet::{self, BaseFile, StoredRow};
use super::{
    avro, data_path, encode_err, join, logfile, metadata_table, rel_path, Event, Group, LogEntry,
    PendingFile, PendingWrite, Row, Slice, Stat, TableWriter, BASE_EXT,
};
use hudifs_core::error::{Error, Result};
use hudifs_core::listing;
use hudifs_core::timeline::{Action, Layout, State};

impl TableWriter {
    /// Start a write: `commit`, `deltacommit` or `replacecommit`. Writes `.requested` and
    /// `.inflight`; the returned transaction writes data files and completes or abandons.
    pub fn begin(&mut self, action: Action) -> Result<Txn<'_>> {
        if !matches!(
            action,
            Action::Commit | Action::DeltaCommit | Action::ReplaceCommit
        ) {
            return Err(Error::Usage(format!(
                "begin() starts commit, deltacommit or replacecommit, not {}",
                action.name()
            )));
        }
        let instant = self.next_time()?;
        self.stage += 1;
        let stage = self.stage;
        let requested = self.instant_path(&instant, None, action, State::Requested);
        if action == Action::ReplaceCommit {
            // `HoodieRequestedReplaceMetadata` of an insert-overwrite: no clustering plan.
            let v = json!({"operationType": null, "clusteringPlan": null, "extraMetadata": null,
                           "version": null});
            self.write_instant(
                &requested,
                Some((&avro::requested_replace_metadata(), &v, false)),
            )?;
        } else {
            self.write_instant(&requested, None)?;
        }
        self.pending.insert(
            instant.clone(),
            PendingWrite {
                action,
                files: Vec::new(),
            },
        );
        self.events.push(Event {
            instant: instant.clone(),
            action,
            state: State::Inflight,
            completion: None,
            written: Vec::new(),
            deleted: Vec::new(),
            replaced: Vec::new(),
            rolled_back_by: None,
        });
        let mut txn = Txn {
            w: self,
            instant,
            action,
            operation: None,
            profile: Vec::new(),
            ops: Vec::new(),
            replaced: Vec::new(),
            task: 0,
            stage,
            skip_metadata: false,
        };
        txn.write_inflight()?;
        Ok(txn)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OpKind {
    /// A new file group (a new base file).
    Insert,
    /// A new base file version of an existing group (copy-on-write update or delete).
    Rewrite,
    /// A new log file of an existing group (merge-on-read update).
    Log,
    /// A new log file of delete records (merge-on-read delete).
    Delete,
}

/// What a merge changed in a file group, for its CDC records.
struct CdcChanges<'a> {
    /// The group's rows before the write.
    old: &'a BTreeMap<i64, StoredRow>,
    /// Rows upserted (sorted by id).
    upserts: &'a [StoredRow],
    /// Ids deleted that the group held.
    deleted: &'a [i64],
}

#[derive(Debug)]
pub(super) struct Op {
    pub(super) kind: OpKind,
    pub(super) stat: Stat,
    /// Rows this op wrote (log records), or the full content of the base file.
    pub(super) rows: Vec<StoredRow>,
    /// A bulk insert whose rows are not tracked.
    pub(super) opaque: bool,
}

/// A write completed by [`Txn::complete_staged`]: its completed instant file waits in the
/// staging directory until renamed to `timeline_path`.
#[derive(Clone)]
pub struct StagedCompletion {
    /// The requested time of the write.
    pub instant: String,
    pub staged: TablePath,
    pub timeline_path: TablePath,
    store: Arc<dyn StorageWrite>,
}

impl std::fmt::Debug for StagedCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "StagedCompletion({} → {})",
            self.staged, self.timeline_path
        )
    }
}

impl StagedCompletion {
    /// Rename the completed instant file into the timeline: the write is now complete.
    pub fn publish(&self) -> Result<()> {
        self.store
            .rename(&self.staged, &self.timeline_path)
            .map_err(|e| Error::io(self.store.describe(&self.timeline_path), e))
    }
}

/// A write in progress. Data files are written as soon as an operation is called; the write
/// becomes visible only with [`Txn::complete`]. Dropping it (or [`Txn::abandon`]) leaves the
/// instant in flight with its files on disk — a failed write.
#[derive(Debug)]
pub struct Txn<'a> {
    pub(super) w: &'a mut TableWriter,
    pub(super) instant: String,
    action: Action,
    operation: Option<String>,
    /// Workload profile entries (fileId or "" for inserts, prevCommit, inserts, updates).
    pub(super) profile: Vec<(String, String, String, usize, usize)>,
    pub(super) ops: Vec<Op>,
    replaced: Vec<(String, String)>,
    pub(super) task: u32,
    pub(super) stage: u32,
    /// Complete without the MDT deltacommit ([`Txn::skip_metadata_update`]).
    skip_metadata: bool,
}

impl Txn<'_> {
    /// The requested time of this write.
    pub fn instant(&self) -> &str {
        &self.instant
    }

    /// Set the operation type recorded in the metadata (default: `INSERT` when the write only
    /// inserts, `UPSERT` otherwise, `INSERT_OVERWRITE` for a replacecommit).
    pub fn set_operation(&mut self, operation: &str) -> Result<()> {
        self.operation = Some(operation.to_string());
        self.write_inflight()
    }

    fn operation(&self) -> String {
        if let Some(op) = &self.operation {
            return op.clone();
        }
        if self.action == Action::ReplaceCommit {
            "INSERT_OVERWRITE".into()
        } else if self.profile.iter().any(|(_, fid, _, _, _)| !fid.is_empty()) {
            "UPSERT".into()
        } else {
            "INSERT".into()
        }
    }

    /// Rewrite the `.inflight` with the workload profile so far (as Hudi does before writing
    /// data files): one stat per targeted group, fileId "" for inserts.
    pub(super) fn write_inflight(&mut self) -> Result<()> {
        let mut by_partition: BTreeMap<&str, Vec<Json>> = BTreeMap::new();
        for (p, fid, prev, inserts, updates) in &self.profile {
            by_partition.entry(p).or_default().push(json!({
                "fileId": fid, "path": null, "prevCommit": prev, "numWrites": 0,
                "numDeletes": 0, "numUpdateWrites": updates, "numInserts": inserts,
                "totalWriteBytes": 0, "totalWriteErrors": 0, "partitionPath": null,
                "fileSizeInBytes": 0,
            }));
        }
        let v = json!({"partitionToWriteStats": by_partition, "compacted": false,
                       "extraMetadata": {}, "operationType": self.operation()});
        let path = self
            .w
            .instant_path(&self.instant, None, self.action, State::Inflight);
        self.w
            .write_instant(&path, Some((&avro::commit_metadata(), &v, true)))
    }

    /// A committed group this write may rewrite (not yet written by it, not replaced, its rows
    /// tracked): its key, the group, and its newest slice.
    fn writable_group(
        &self,
        partition: &str,
        file_id: &str,
    ) -> Result<((String, String), &Group, &super::Slice)> {
        self.check_fresh(partition, file_id)?;
        let key = (partition.to_string(), file_id.to_string());
        let g = self.w.groups.get(&key).ok_or_else(|| {
            Error::Usage(format!("no committed file group {partition}/{file_id}"))
        })?;
        if let Some(r) = &g.replaced_by {
            return Err(Error::Usage(format!(
                "file group {partition}/{file_id} was replaced by {r}"
            )));
        }
        if g.opaque {
            return Err(Error::Usage(format!(
                "file group {partition}/{file_id} was bulk-inserted; its rows are not tracked"
            )));
        }
        let slice = g
            .slices
            .last()
            .ok_or_else(|| Error::Usage(format!("{partition}/{file_id} has no slice")))?;
        Ok((key.clone(), g, slice))
    }

    fn check_fresh(&self, partition: &str, file_id: &str) -> Result<()> {
        if self
            .ops
            .iter()
            .any(|o| o.stat.partition == partition && o.stat.file_id == file_id)
            || self
                .replaced
                .iter()
                .any(|(p, f)| p == partition && f == file_id)
        {
            return Err(Error::Usage(format!(
                "file group {partition}/{file_id} is already written by {}",
                self.instant
            )));
        }
        Ok(())
    }

    pub(super) fn stamp(&self, rows: &[Row], task: u32) -> Vec<StoredRow> {
        rows.iter()
            .enumerate()
            .map(|(i, r)| StoredRow {
                row: r.clone(),
                commit_time: self.instant.clone(),
                seqno: format!("{}_{task}_{}", self.instant, i + 1),
            })
            .collect()
    }

    pub(super) fn record_pending(
        &mut self,
        partition: &str,
        file_id: &str,
        name: &str,
        is_log: bool,
        size: u64,
    ) {
        if let Some(p) = self.w.pending.get_mut(&self.instant) {
            p.files.push(PendingFile {
                partition: partition.to_string(),
                file_id: file_id.to_string(),
                name: name.to_string(),
                is_log,
                size,
            });
        }
        let rel = rel_path(partition, name);
        let (instant, action) = (self.instant.clone(), self.action);
        if let Some(e) = self.w.event_mut(&instant, action) {
            e.written.push(rel);
        }
    }

    fn write_base(
        &mut self,
        partition: &str,
        file_id: &str,
        rows: &[StoredRow],
    ) -> Result<(String, u64)> {
        let task = self.task;
        let token = self.w.write_token(task, self.stage);
        self.write_base_with_token(partition, file_id, rows, &token)
    }

    fn write_base_with_token(
        &mut self,
        partition: &str,
        file_id: &str,
        rows: &[StoredRow],
        token: &str,
    ) -> Result<(String, u64)> {
        let name = listing::base_file_name(file_id, token, &self.instant, BASE_EXT);
        let path = data_path(partition, &name)?;
        let partition_values = self.w.partition_values(partition);
        let size = parquet::write_base_file(
            self.w,
            &BaseFile {
                path: &path,
                file_name: &name,
                partition,
                table: &self.w.spec.name,
                with_meta: self.w.spec.populate_meta_fields,
                extra: &self.w.spec.extra_columns,
                partition_values: &partition_values,
            },
            rows,
        )?;
        self.record_pending(partition, file_id, &name, false, size);
        let instant = self.instant.clone();
        self.w
            .record_written(partition, &name, &instant, rows.len(), size);
        Ok((name, size))
    }

    /// Insert `rows` as a new file group in `partition`; returns its file id.
    pub fn insert(&mut self, partition: &str, rows: &[Row]) -> Result<String> {
        self.w.check_partition(partition)?;
        if rows.is_empty() {
            return Err(Error::Usage("an insert needs at least one row".into()));
        }
        let file_id = self.w.new_file_id();
        self.profile.push((
            partition.to_string(),
            String::new(),
            "null".into(),
            rows.len(),
            0,
        ));
        self.write_inflight()?;
        self.w.ensure_partition(partition, &self.instant)?;
        let mut stored = self.stamp(rows, self.task);
        stored.sort_by_key(|r| r.row.id);
        stored.dedup_by_key(|r| r.row.id);
        let (name, size) = self.write_base(partition, &file_id, &stored)?;
        self.task += 1;
        self.ops.push(Op {
            kind: OpKind::Insert,
            stat: Stat {
                partition: partition.to_string(),
                file_id: file_id.clone(),
                path: rel_path(partition, &name),
                prev_commit: "null".into(),
                num_writes: stored.len(),
                num_inserts: stored.len(),
                size,
                ..Stat::default()
            },
            rows: stored,
            opaque: false,
        });
        Ok(file_id)
    }

    /// Update (upsert) `rows` into an existing file group. Copy-on-write: a new base file of
    /// the group, named with this write's instant, holding the old rows merged with `rows` by
    /// id ([`Txn::merge`] without deletes; on a CDC table also the group's CDC log file).
    /// Merge-on-read: a new log file with one Avro data block of `rows` — named in layout 1
    /// with the slice's base instant and the next version for that (fileId, base instant), in
    /// layout 2 with this write's instant and version 1. Returns the written file's name.
    pub fn update(&mut self, partition: &str, file_id: &str, rows: &[Row]) -> Result<String> {
        if self.w.spec.is_mor() {
            self.append(partition, file_id, rows, false)
        } else if rows.is_empty() {
            Err(Error::Usage("an update needs at least one row".into()))
        } else {
            self.merge(partition, file_id, rows, &[])
        }
    }

    /// Insert `rows` as a new merge-on-read file group that has no base file, only a log file
    /// (as Hudi writes inserts with an index that can route them to logs): its first slice's
    /// base instant is this write, the log is version 1. The group is in the writer's model
    /// from now on (without rows until the write completes). Returns its file id.
    pub fn insert_log(&mut self, partition: &str, rows: &[Row]) -> Result<String> {
        if !self.w.spec.is_mor() {
            return Err(Error::Usage(
                "log-only file groups exist in merge-on-read tables only".into(),
            ));
        }
        self.w.check_partition(partition)?;
        if rows.is_empty() {
            return Err(Error::Usage("an insert needs at least one row".into()));
        }
        let file_id = self.w.new_file_id();
        self.w.ensure_partition(partition, &self.instant)?;
        self.w.groups.insert(
            (partition.to_string(), file_id.clone()),
            Group {
                slices: vec![Slice::new(&self.instant, None)],
                rows: BTreeMap::new(),
                replaced_by: None,
                opaque: false,
            },
        );
        self.append(partition, &file_id, rows, false)?;
        Ok(file_id)
    }

    /// Layout 1 only: upsert `rows` into a file group by appending one Avro data block of this
    /// write to the slice's newest committed log file (as Hudi 0.x does on storage that
    /// appends), so that one log file holds blocks of several instants. Returns the log's name.
    pub fn append_to_log(
        &mut self,
        partition: &str,
        file_id: &str,
        rows: &[Row],
    ) -> Result<String> {
        if !self.w.spec.is_mor() || self.w.layout != Layout::V1 {
            return Err(Error::Usage(
                "only layout 1 merge-on-read writers append to log files".into(),
            ));
        }
        self.check_fresh(partition, file_id)?;
        let key = (partition.to_string(), file_id.to_string());
        let g = self.w.groups.get(&key).ok_or_else(|| {
            Error::Usage(format!("no committed file group {partition}/{file_id}"))
        })?;
        let slice = g
            .slices
            .last()
            .ok_or_else(|| Error::Usage("no slice".into()))?;
        let log = slice
            .logs
            .iter()
            .filter(|l| l.committed)
            .max_by_key(|l| l.version)
            .ok_or_else(|| Error::Usage(format!("{partition}/{file_id} has no committed log")))?;
        let (name, version) = (log.name.clone(), log.version);
        let base_file = slice.base_file.clone().unwrap_or_default();
        let slice_base = slice.base_instant.clone();
        let mut slice_logs: Vec<String> = slice.logs.iter().map(|l| l.name.clone()).collect();
        slice_logs.sort();
        let mut stored = self.stamp(rows, self.task);
        stored.sort_by_key(|r| r.row.id);
        stored.dedup_by_key(|r| r.row.id);
        let updates = stored
            .iter()
            .filter(|r| g.rows.contains_key(&r.row.id))
            .count();
        self.write_inflight()?;
        let spec = &self.w.spec;
        let schema = parquet::data_schema(
            &spec.name,
            spec.populate_meta_fields,
            &spec.extra_columns,
            &spec.partition_fields,
        );
        let records = parquet::encode_rows(
            &schema,
            &stored,
            partition,
            file_id,
            spec.populate_meta_fields,
            &spec.extra_columns,
            &self.w.partition_values(partition),
        )
        .map_err(encode_err(&name))?;
        let path = data_path(partition, &name)?;
        let mut bytes = self.w.read(&path)?;
        bytes.extend(logfile::avro_data_block(
            &self.instant,
            &schema.to_text(),
            &records,
        ));
        self.w.put(&path, &bytes)?;
        let size = bytes.len() as u64;
        if let Some(l) = self
            .w
            .groups
            .get_mut(&key)
            .and_then(|g| g.slices.last_mut())
            .and_then(|s| s.logs.iter_mut().find(|l| l.name == name))
        {
            l.size = size;
        }
        self.record_pending(partition, file_id, &name, true, size);
        self.task += 1;
        self.ops.push(Op {
            kind: OpKind::Log,
            stat: Stat {
                partition: partition.to_string(),
                file_id: file_id.to_string(),
                path: rel_path(partition, &name),
                prev_commit: slice_base,
                num_writes: stored.len(),
                num_update_writes: updates,
                num_inserts: stored.len() - updates,
                size,
                log: Some((version, base_file, slice_logs)),
                ..Stat::default()
            },
            rows: stored,
            opaque: false,
        });
        Ok(name)
    }

    /// Delete the rows with these ids from a file group. Merge-on-read: a new log file (named
    /// as [`Txn::update`] names it) with one Avro delete block (`HoodieDeleteRecordList`, no
    /// ordering value, so the delete wins whatever the ordering field says); ids the group does
    /// not hold are written too (Hudi's reader ignores them). Copy-on-write: the group is
    /// rewritten without those rows ([`Txn::merge`]). Returns the written file's name.
    pub fn delete(&mut self, partition: &str, file_id: &str, ids: &[i64]) -> Result<String> {
        if !self.w.spec.is_mor() {
            if ids.is_empty() {
                return Err(Error::Usage("a delete needs at least one id".into()));
            }
            return self.merge(partition, file_id, &[], ids);
        }
        self.append(partition, file_id, &parquet::rows_with_ids(0, ids), true)
    }

    /// Copy-on-write: rewrite a file group as Hudi's merge handle does — a new base file of the
    /// group, named with this write's instant, holding its committed rows with `rows` upserted
    /// by id (ids the group does not hold are inserted into it) and the rows whose ids are in
    /// `delete_ids` left out (ids the group does not hold are ignored). Rows not changed keep
    /// their commit time and sequence number. On a table with CDC enabled
    /// ([`TableSpec::with_cdc`](super::TableSpec::with_cdc)) the write also produces the
    /// group's CDC log file and records it in the write stat's `cdcStats`. Returns the base
    /// file's name.
    pub fn merge(
        &mut self,
        partition: &str,
        file_id: &str,
        rows: &[Row],
        delete_ids: &[i64],
    ) -> Result<String> {
        if self.w.spec.is_mor() {
            return Err(Error::Usage(
                "merge rewrites copy-on-write file groups; merge-on-read writes log files \
                 (update, delete)"
                    .into(),
            ));
        }
        if self.action == Action::ReplaceCommit {
            return Err(Error::Usage(
                "a replacecommit inserts and replaces file groups; it does not update".into(),
            ));
        }
        if rows.is_empty() && delete_ids.is_empty() {
            return Err(Error::Usage(
                "a merge needs rows to upsert or ids to delete".into(),
            ));
        }
        if let Some(r) = rows.iter().find(|r| delete_ids.contains(&r.id)) {
            return Err(Error::Usage(format!(
                "id {} is both upserted and deleted",
                r.id
            )));
        }
        let (key, g, slice) = self.writable_group(partition, file_id)?;
        let slice_base = slice.base_instant.clone();
        let slice_base_file = slice.base_file.clone();
        let old = g.rows.clone();
        let task = self.task;
        let mut stored = self.stamp(rows, task);
        stored.sort_by_key(|r| r.row.id);
        stored.dedup_by_key(|r| r.row.id);
        let updates = stored
            .iter()
            .filter(|r| old.contains_key(&r.row.id))
            .count();
        let inserts = stored.len() - updates;
        let mut deleted: Vec<i64> = delete_ids
            .iter()
            .copied()
            .filter(|id| old.contains_key(id))
            .collect();
        deleted.sort_unstable();
        deleted.dedup();

        let mut merged = old.clone();
        for id in &deleted {
            merged.remove(id);
        }
        for r in &stored {
            merged.insert(r.row.id, r.clone());
        }
        self.profile.push((
            key.0.clone(),
            key.1.clone(),
            slice_base.clone(),
            inserts,
            updates,
        ));
        self.write_inflight()?;
        let content: Vec<StoredRow> = merged.into_values().collect();
        let token = self.w.write_token(task, self.stage);
        let (name, size) = self.write_base_with_token(partition, file_id, &content, &token)?;
        // Hudi's merge handle writes no CDC file when the new base file is empty or holds only
        // inserted records (readers infer those changes from the base files).
        let cdc_stats = match self.w.spec.cdc {
            Some(mode) if !content.is_empty() && content.len() != inserts => {
                let changes = CdcChanges {
                    old: &old,
                    upserts: &stored,
                    deleted: &deleted,
                };
                Some(vec![
                    self.write_cdc(partition, file_id, &token, mode, &changes)?
                ])
            }
            _ => None,
        };
        self.task += 1;
        self.ops.push(Op {
            kind: OpKind::Rewrite,
            stat: Stat {
                partition: partition.to_string(),
                file_id: file_id.to_string(),
                path: rel_path(partition, &name),
                prev_commit: slice_base,
                num_writes: content.len(),
                num_update_writes: updates,
                num_inserts: inserts,
                num_deletes: deleted.len(),
                size,
                prev_base_file: slice_base_file,
                cdc_stats,
                ..Stat::default()
            },
            rows: content,
            opaque: false,
        });
        Ok(name)
    }

    /// Write the CDC log file of a merged file group (see `cdc.rs`): one CDC data block with a
    /// record per changed key, in key order. Returns its path relative to the root and size.
    fn write_cdc(
        &mut self,
        partition: &str,
        file_id: &str,
        token: &str,
        mode: CdcMode,
        changes: &CdcChanges<'_>,
    ) -> Result<(String, u64)> {
        let spec = &self.w.spec;
        let version = spec.version;
        let name = format!(
            "{}{}",
            listing::log_file_name(file_id, &self.instant, 1, token),
            cdc::log_suffix(version)
        );
        let image = parquet::data_schema(
            &spec.name,
            false,
            &spec.extra_columns,
            &spec.partition_fields,
        );
        let schema = cdc::schema(mode, version, &image);
        let partition_values = self.w.partition_values(partition);
        let extra = &spec.extra_columns;
        let json =
            |r: &StoredRow| parquet::row_json(r, partition, "", false, extra, &partition_values);
        let mut by_key: BTreeMap<i64, (CdcOp, Option<Json>, Option<Json>)> = BTreeMap::new();
        for id in changes.deleted {
            by_key.insert(*id, (CdcOp::Delete, changes.old.get(id).map(json), None));
        }
        for r in changes.upserts {
            let before = changes.old.get(&r.row.id).map(json);
            let op = if before.is_some() {
                CdcOp::Update
            } else {
                CdcOp::Insert
            };
            by_key.insert(r.row.id, (op, before, Some(json(r))));
        }
        let records = by_key
            .into_iter()
            .map(|(id, (op, before, after))| {
                let v = cdc::record(mode, op, &id.to_string(), &self.instant, before, after);
                avro::datum(&schema, &v)
            })
            .collect::<std::result::Result<Vec<_>, String>>()
            .map_err(encode_err(&name))?;
        let bytes = logfile::cdc_data_block(&self.instant, &schema.to_text(), &records);
        let path = data_path(partition, &name)?;
        self.w.put(&path, &bytes)?;
        let size = bytes.len() as u64;
        // A new file of the write, deleted with its base file if the write is rolled back.
        self.record_pending(partition, file_id, &name, false, size);
        let instant = self.instant.clone();
        self.w
            .record_written(partition, &name, &instant, records.len(), size);
        let rel = rel_path(partition, &name);
        self.w.cdc.entry(instant).or_default().push(rel.clone());
        Ok((rel, size))
    }

    fn append(
        &mut self,
        partition: &str,
        file_id: &str,
        rows: &[Row],
        delete: bool,
    ) -> Result<String> {
        if self.action == Action::ReplaceCommit {
            return Err(Error::Usage(
                "a replacecommit inserts and replaces file groups; it does not update".into(),
            ));
        }
        if rows.is_empty() {
            return Err(Error::Usage("an update needs at least one row".into()));
        }
        let (key, g, slice) = self.writable_group(partition, file_id)?;
        let slice_base = slice.base_instant.clone();
        let slice_base_file = slice.base_file.clone();
        let task = self.task;
        let mut stored = self.stamp(rows, task);
        stored.sort_by_key(|r| r.row.id);
        stored.dedup_by_key(|r| r.row.id);
        let updates = stored
            .iter()
            .filter(|r| g.rows.contains_key(&r.row.id))
            .count();
        let inserts = stored.len() - updates;

        if self.w.spec.is_mor() {
            let layout = self.w.layout;
            let (name_instant, version) = if layout == Layout::V1 {
                let v = slice.logs.iter().map(|l| l.version).max().unwrap_or(0) + 1;
                (slice_base.clone(), v)
            } else {
                (self.instant.clone(), 1)
            };
            let mut slice_logs: Vec<String> = slice.logs.iter().map(|l| l.name.clone()).collect();
            self.profile.push((
                key.0.clone(),
                key.1.clone(),
                slice_base.clone(),
                inserts,
                updates,
            ));
            self.write_inflight()?;
            let token = self.w.write_token(task, self.stage);
            let name = listing::log_file_name(file_id, &name_instant, version, &token);
            let spec = &self.w.spec;
            let schema = parquet::data_schema(
                &spec.name,
                spec.populate_meta_fields,
                &spec.extra_columns,
                &spec.partition_fields,
            );
            let partition_values = self.w.partition_values(partition);
            // Hudi's append handle puts the file id in `_hoodie_file_name` of log records.
            let records = parquet::encode_rows(
                &schema,
                &stored,
                partition,
                file_id,
                self.w.spec.populate_meta_fields,
                &self.w.spec.extra_columns,
                &partition_values,
            )
            .map_err(encode_err(&name))?;
            let bytes = if delete {
                let keys: Vec<String> = stored.iter().map(|r| r.row.id.to_string()).collect();
                let deletes: Vec<_> = keys
                    .iter()
                    .map(|k| (k.as_str(), partition, logfile::blocks::DeleteOrdering::None))
                    .collect();
                logfile::blocks::delete(&self.instant, &schema.to_text(), &deletes)
            } else {
                logfile::avro_data_block(&self.instant, &schema.to_text(), &records)
            };
            let path = data_path(partition, &name)?;
            self.w.put(&path, &bytes)?;
            let size = bytes.len() as u64;
            if let Some(s) = self
                .w
                .groups
                .get_mut(&key)
                .and_then(|g| g.slices.last_mut())
            {
                s.logs.push(LogEntry {
                    name: name.clone(),
                    writer: self.instant.clone(),
                    version,
                    committed: false,
                    size,
                });
            }
            self.record_pending(partition, file_id, &name, true, size);
            let instant = self.instant.clone();
            self.w
                .record_written(partition, &name, &instant, stored.len(), size);
            // Layout 1 write stats list every log of the slice (as Hudi 0.x does) and name the
            // slice's base instant as prevCommit; Hudi 1.x lists only the new log, leaves
            // `baseFile` empty and records the writing instant as prevCommit (as observed in
            // Spark-written v9 tables).
            let (prev_commit, base_file, log_files) = if layout == Layout::V1 {
                slice_logs.push(name.clone());
                slice_logs.sort();
                (slice_base, slice_base_file.unwrap_or_default(), slice_logs)
            } else {
                (self.instant.clone(), String::new(), vec![name.clone()])
            };
            self.task += 1;
            let (num_writes, updates, inserts, num_deletes) = if delete {
                (0, 0, 0, updates)
            } else {
                (stored.len(), updates, inserts, 0)
            };
            self.ops.push(Op {
                kind: if delete { OpKind::Delete } else { OpKind::Log },
                stat: Stat {
                    partition: partition.to_string(),
                    file_id: file_id.to_string(),
                    path: rel_path(partition, &name),
                    prev_commit,
                    num_writes,
                    num_update_writes: updates,
                    num_inserts: inserts,
                    num_deletes,
                    size,
                    log: Some((version, base_file, log_files)),
                    ..Stat::default()
                },
                rows: stored,
                opaque: false,
            });
            Ok(name)
        } else {
            Err(Error::Usage(
                "copy-on-write file groups are rewritten (Txn::merge), not appended to".into(),
            ))
        }
    }

    /// Replace a file group (replacecommit only): it goes to `partitionToReplaceFileIds`.
    pub fn replace_group(&mut self, partition: &str, file_id: &str) -> Result<()> {
        if self.action != Action::ReplaceCommit {
            return Err(Error::Usage(
                "only a replacecommit replaces file groups".into(),
            ));
        }
        self.check_fresh(partition, file_id)?;
        let key = (partition.to_string(), file_id.to_string());
        match self.w.groups.get(&key) {
            None => Err(Error::Usage(format!("no file group {partition}/{file_id}"))),
            Some(g) if g.replaced_by.is_some() => Err(Error::Usage(format!(
                "file group {partition}/{file_id} is already replaced"
            ))),
            Some(_) => {
                self.replaced.push(key);
                Ok(())
            }
        }
    }

    /// Complete the write: the completed instant file with its commit metadata. Returns the
    /// requested time.
    pub fn complete(self) -> Result<String> {
        self.finish(None).map(|(instant, _)| instant)
    }

    /// Complete the write, but write the completed instant file into `staging` (a directory on
    /// the same file system, outside the timeline) instead of the timeline directory: the
    /// write completes when the caller renames the file to the returned path. The writer's
    /// model counts the write as complete already. For measuring how fast a reader sees a
    /// commit: the completed instant file appears atomically, as with Hudi's own rename on
    /// storage that supports it.
    pub fn complete_staged(self, staging: &TablePath) -> Result<StagedCompletion> {
        let store = self.w.store.clone();
        let (instant, paths) = self.finish(Some(staging))?;
        let (staged, timeline_path) = paths
            .ok_or_else(|| Error::Usage("a staged completion gives a staged file".to_string()))?;
        Ok(StagedCompletion {
            instant,
            staged,
            timeline_path,
            store,
        })
    }

    #[allow(clippy::type_complexity)]
    fn finish(
        self,
        staging: Option<&TablePath>,
    ) -> Result<(String, Option<(TablePath, TablePath)>)> {
        let operation = self.operation();
        let w = self.w;
        let stats: Vec<Stat> = self.ops.iter().map(|o| o.stat.clone()).collect();
        // Hudi updates the metadata table before the data instant completes.
        if !self.skip_metadata {
            let records = metadata_table::commit_records(&metadata_table::stat_files(&stats));
            w.mdt_deltacommit(&self.instant, records, true)?;
        }
        // Schema-on-read: the history persisted before the write completes.
        w.persist_schema_history(&self.instant)?;
        let completion = w.next_time()?;
        let is_replace = self.action == Action::ReplaceCommit;
        let meta = w.commit_json(&stats, &self.replaced, is_replace, false, &operation);
        let schema = if is_replace {
            avro::replace_commit_metadata()
        } else {
            avro::commit_metadata()
        };
        let path = w.instant_path(
            &self.instant,
            Some(&completion),
            self.action,
            State::Completed,
        );
        let staged = match staging {
            None => {
                w.write_instant(&path, Some((&schema, &meta, true)))?;
                None
            }
            Some(dir) => {
                let staged = join(dir, path.name())?;
                w.write_instant(&staged, Some((&schema, &meta, true)))?;
                Some((staged, path))
            }
        };

        // The write is durable: fold it into the writer's model.
        for op in self.ops {
            let key = (op.stat.partition.clone(), op.stat.file_id.clone());
            let base_name = op.stat.path.rsplit('/').next().unwrap_or("").to_string();
            match op.kind {
                OpKind::Insert | OpKind::Rewrite => {
                    let mut s = Slice::new(&self.instant, Some(base_name));
                    s.base_ids = op.rows.iter().map(|r| r.row.id).collect();
                    let rows = op.rows.into_iter().map(|r| (r.row.id, r)).collect();
                    let g = w.groups.entry(key).or_insert_with(|| Group {
                        slices: Vec::new(),
                        rows: BTreeMap::new(),
                        replaced_by: None,
                        opaque: op.opaque,
                    });
                    g.slices.push(s);
                    g.rows = rows;
                }
                OpKind::Log | OpKind::Delete => {
                    let event_time = w.spec.event_time_ordering();
                    let Some(g) = w.groups.get_mut(&key) else {
                        continue;
                    };
                    if let Some(s) = g
                        .slices
                        .iter_mut()
                        .find(|s| s.logs.iter().any(|l| l.name == base_name))
                    {
                        for l in s.logs.iter_mut().filter(|l| l.name == base_name) {
                            l.committed = true;
                        }
                        s.log_ids.extend(op.rows.iter().map(|r| r.row.id));
                        s.log_records += op.rows.len();
                    }
                    for r in op.rows {
                        if op.kind == OpKind::Delete {
                            g.rows.remove(&r.row.id);
                        } else if event_time
                            && g.rows
                                .get(&r.row.id)
                                .is_some_and(|old| old.row.ts > r.row.ts)
                        {
                            // Event-time ordering: an older record loses (a tie goes to the
                            // later write).
                        } else {
                            g.rows.insert(r.row.id, r);
                        }
                    }
                }
            }
        }
        for key in &self.replaced {
            if let Some(g) = w.groups.get_mut(key) {
                g.replaced_by = Some(self.instant.clone());
            }
        }
        w.pending.remove(&self.instant);
        w.completed.insert(self.instant.clone(), completion.clone());
        let layout = w.layout;
        let replaced = self.replaced.iter().map(|(p, f)| rel_path(p, f)).collect();
        if let Some(e) = w.event_mut(&self.instant, self.action) {
            e.replaced = replaced;
            e.state = State::Completed;
            e.completion = Some(if layout == Layout::V2 {
                completion
            } else {
                self.instant.clone()
            });
        }
        Ok((self.instant, staged))
    }

    /// Leave the write in flight (its data files stay on disk; the timeline has only its
    /// `.requested` and `.inflight`). Returns the requested time.
    pub fn abandon(self) -> String {
        self.instant
    }

    /// Complete this write without updating the metadata table (as a writer with the MDT
    /// disabled would): the data timeline has the completed instant, the MDT has no
    /// deltacommit for it and lists none of its files — the MDT is behind the data timeline.
    /// No effect on a table without a metadata table.
    pub fn skip_metadata_update(&mut self) {
        self.skip_metadata = true;
    }

    /// Fail this write after (or while) updating the metadata table: the MDT deltacommit of
    /// this instant is written — completed when `mdt_completed`, else left inflight with its
    /// log file on disk — and the data write is left in flight, as when a writer dies between
    /// the MDT commit and its own. A completed MDT deltacommit then names files of an
    /// uncommitted write; [`TableWriter::rollback`] of the write rolls it back in the MDT too.
    /// Returns the requested time.
    pub fn abandon_after_metadata(self, mdt_completed: bool) -> Result<String> {
        let stats: Vec<Stat> = self.ops.iter().map(|o| o.stat.clone()).collect();
        let records = metadata_table::commit_records(&metadata_table::stat_files(&stats));
        self.w
            .mdt_deltacommit(&self.instant, records, mdt_completed)?;
        Ok(self.instant)
    }
}
