//! Table services and other non-write actions: compaction, clean, rollback, savepoint.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value as Json};

use super::parquet::{self, BaseFile, StoredRow};
use super::{
    avro, data_path, logfile, metadata_table, rel_path, Compaction, CompactionOp, Event, LogEntry,
    Slice, Stat, TableWriter, BASE_EXT, CLOCK_STEP_MS,
};
use hudifs_core::error::{Error, Result};
use hudifs_core::listing;
use hudifs_core::timeline::{Action, Layout, State};

impl TableWriter {
    /// Schedule a compaction of the given file groups `(partition, fileId)` of a merge-on-read
    /// table: writes `T.compaction.requested` with the plan. Returns `T`.
    pub fn schedule_compaction(
        &mut self,
        groups: &[(impl AsRef<str>, impl AsRef<str>)],
    ) -> Result<String> {
        if !self.spec.is_mor() {
            return Err(Error::Usage(
                "compaction needs a merge-on-read table".into(),
            ));
        }
        if groups.is_empty() {
            return Err(Error::Usage(
                "a compaction plan needs at least one file group".into(),
            ));
        }
        let mut ops = Vec::new();
        for (p, f) in groups {
            let key = (p.as_ref().to_string(), f.as_ref().to_string());
            let g = self
                .groups
                .get(&key)
                .ok_or_else(|| Error::Usage(format!("no file group {key:?}")))?;
            if g.replaced_by.is_some() {
                return Err(Error::Usage(format!("file group {key:?} was replaced")));
            }
            if g.opaque {
                return Err(Error::Usage(format!(
                    "file group {key:?} was bulk-inserted; its rows are not tracked"
                )));
            }
            let slice = g
                .slices
                .last()
                .ok_or_else(|| Error::Usage(format!("{key:?} has no slice")))?;
            if slice.pending_compaction {
                return Err(Error::Usage(format!(
                    "file group {key:?} already has a pending compaction"
                )));
            }
            // v6 file-system views list every log of the slice; 1.x ones only committed logs.
            let deltas: Vec<&LogEntry> = slice
                .logs
                .iter()
                .filter(|l| self.layout == Layout::V1 || l.committed)
                .collect();
            ops.push(CompactionOp {
                partition: key.0.clone(),
                file_id: key.1.clone(),
                base_instant: slice.base_instant.clone(),
                base_file: slice.base_file.clone(),
                delta_files: deltas.iter().map(|l| l.name.clone()).collect(),
                delta_size: deltas.iter().map(|l| l.size).sum(),
                rows: g.rows.clone(),
                num_inserts: slice.log_ids.difference(&slice.base_ids).count(),
                num_updates: slice.log_ids.intersection(&slice.base_ids).count(),
                log_records: slice.log_records,
                written: None,
            });
        }
        let instant = self.next_time()?;
        let operations: Vec<Json> = ops
            .iter()
            .map(|op| {
                json!({
                    "baseInstantTime": op.base_instant,
                    "deltaFilePaths": op.delta_files,
                    "dataFilePath": op.base_file,
                    "fileId": op.file_id,
                    "partitionPath": op.partition,
                    "metrics": {
                        "TOTAL_LOG_FILES": op.delta_files.len() as f64,
                        "TOTAL_LOG_FILES_SIZE": op.delta_size as f64,
                    },
                    "bootstrapFilePath": null,
                })
            })
            .collect();
        let plan = json!({"operations": operations, "extraMetadata": {}, "version": 2,
                          "preserveHoodieMetadata": false, "missingSchedulePartitions": []});
        let path = self.instant_path(&instant, None, Action::Compaction, State::Requested);
        self.write_instant(&path, Some((&avro::compaction_plan(), &plan, false)))?;
        for op in &ops {
            if let Some(g) = self
                .groups
                .get_mut(&(op.partition.clone(), op.file_id.clone()))
            {
                let mut s = Slice::new(&instant, None);
                s.pending_compaction = true;
                g.slices.push(s);
            }
        }
        self.compactions.insert(
            instant.clone(),
            Compaction {
                ops,
                state: State::Requested,
            },
        );
        self.events.push(Event {
            instant: instant.clone(),
            action: Action::Compaction,
            state: State::Requested,
            completion: None,
            written: Vec::new(),
            deleted: Vec::new(),
            replaced: Vec::new(),
            rolled_back_by: None,
        });
        Ok(instant)
    }

    /// Run a scheduled compaction: `.compaction.inflight`, one new base file per group (named
    /// with the compaction instant), and — when `complete` — the completed `commit` with
    /// operation type COMPACT. With `complete = false` it stays pending (inflight, its base
    /// files on disk); a later call with `complete = true` completes it.
    pub fn run_compaction(&mut self, instant: &str, complete: bool) -> Result<()> {
        let Some(mut c) = self.compactions.get(instant).cloned() else {
            return Err(Error::Usage(format!(
                "no compaction scheduled at {instant}"
            )));
        };
        match c.state {
            State::Completed => {
                return Err(Error::Usage(format!(
                    "compaction {instant} is already complete"
                )))
            }
            State::Requested => {
                let path = self.instant_path(instant, None, Action::Compaction, State::Inflight);
                self.write_instant(&path, None)?;
                self.stage += 1;
                let stage = self.stage;
                let with_meta = self.spec.populate_meta_fields;
                let mut written = Vec::new();
                for (task, op) in c.ops.iter_mut().enumerate() {
                    let token = self.write_token(task as u32, stage);
                    let name = listing::base_file_name(&op.file_id, &token, instant, BASE_EXT);
                    let rows: Vec<StoredRow> = op.rows.values().cloned().collect();
                    let path = data_path(&op.partition, &name)?;
                    let partition_values = self.partition_values(&op.partition);
                    let size = parquet::write_base_file(
                        self,
                        &BaseFile {
                            path: &path,
                            file_name: &name,
                            partition: &op.partition,
                            table: &self.spec.name,
                            with_meta,
                            extra: &self.spec.extra_columns,
                            partition_values: &partition_values,
                        },
                        &rows,
                    )?;
                    written.push(rel_path(&op.partition, &name));
                    self.record_written(&op.partition, &name, instant, rows.len(), size);
                    op.written = Some((name, size));
                }
                c.state = State::Inflight;
                if let Some(e) = self.event_mut(instant, Action::Compaction) {
                    e.state = State::Inflight;
                    e.written = written;
                }
            }
            State::Inflight => {}
        }
        if complete {
            let completion = self.next_time()?;
            let stats: Vec<Stat> = c
                .ops
                .iter()
                .map(|op| {
                    let (name, size) = op.written.clone().unwrap_or_default();
                    Stat {
                        partition: op.partition.clone(),
                        file_id: op.file_id.clone(),
                        path: rel_path(&op.partition, &name),
                        prev_commit: op.base_instant.clone(),
                        num_writes: op.rows.len(),
                        num_update_writes: op.num_updates,
                        num_inserts: op.num_inserts,
                        num_deletes: 0,
                        size,
                        log: None,
                        prev_base_file: op.base_file.clone(),
                        compaction: Some((
                            op.log_records,
                            op.delta_files.len(),
                            op.delta_size,
                            op.num_updates + op.num_inserts,
                        )),
                        // Compaction of a CDC-enabled table writes no CDC log file here (not
                        // modelled).
                        cdc_stats: None,
                    }
                })
                .collect();
            let records = metadata_table::commit_records(&metadata_table::stat_files(&stats));
            self.mdt_deltacommit(instant, records, true)?;
            let meta = self.commit_json(&stats, &[], false, true, "COMPACT");
            let path = self.instant_path(
                instant,
                Some(&completion),
                Action::Compaction,
                State::Completed,
            );
            self.write_instant(&path, Some((&avro::commit_metadata(), &meta, true)))?;
            for op in &c.ops {
                let Some(g) = self
                    .groups
                    .get_mut(&(op.partition.clone(), op.file_id.clone()))
                else {
                    continue;
                };
                if let Some(s) = g.slices.iter_mut().find(|s| s.base_instant == instant) {
                    s.pending_compaction = false;
                    s.base_file = op.written.as_ref().map(|(n, _)| n.clone());
                    s.base_ids = op.rows.keys().copied().collect();
                }
            }
            c.state = State::Completed;
            self.completed
                .insert(instant.to_string(), completion.clone());
            let layout = self.layout;
            if let Some(e) = self.event_mut(instant, Action::Compaction) {
                e.state = State::Completed;
                e.completion = Some(if layout == Layout::V2 {
                    completion
                } else {
                    instant.to_string()
                });
            }
        }
        self.compactions.insert(instant.to_string(), c);
        Ok(())
    }

    /// Clean: delete `files_to_delete` (`(partition, file name)`), recording
    /// `earliest_commit_to_retain` as the retention bound. Writes `.clean.requested` and
    /// `.clean.inflight` (the cleaner plan) and the completed clean (`HoodieCleanMetadata`).
    /// Returns the clean's instant.
    pub fn clean(
        &mut self,
        earliest_commit_to_retain: &str,
        files_to_delete: &[(impl AsRef<str>, impl AsRef<str>)],
    ) -> Result<String> {
        let instant = self.next_time()?;
        let mut by_partition: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (p, n) in files_to_delete {
            self.check_partition(p.as_ref())?;
            by_partition
                .entry(p.as_ref().to_string())
                .or_default()
                .push(n.as_ref().to_string());
        }
        let last_completed = self
            .completed
            .keys()
            .next_back()
            .cloned()
            .unwrap_or_default();
        let policy = "KEEP_LATEST_COMMITS";
        // File paths are written relative to the table root (Java writes absolute paths;
        // readers use only the file name).
        let plan_files: BTreeMap<&String, Vec<Json>> = by_partition
            .iter()
            .map(|(p, names)| {
                let v = names
                    .iter()
                    .map(|n| json!({"filePath": rel_path(p, n), "isBootstrapBaseFile": false}))
                    .collect();
                (p, v)
            })
            .collect();
        let plan = json!({
            "earliestInstantToRetain": {"timestamp": earliest_commit_to_retain,
                                        "action": "commit", "state": "COMPLETED"},
            "lastCompletedCommitTimestamp": last_completed,
            "policy": policy,
            "filesToBeDeletedPerPartition": null,
            "version": 2,
            "filePathsToBeDeletedPerPartition": plan_files,
            "partitionsToBeDeleted": [],
        });
        let schema = avro::cleaner_plan();
        for state in [State::Requested, State::Inflight] {
            let path = self.instant_path(&instant, None, Action::Clean, state);
            self.write_instant(&path, Some((&schema, &plan, false)))?;
        }
        let mut partition_meta = serde_json::Map::new();
        let mut deleted = Vec::new();
        let mut total = 0;
        for (p, names) in &by_partition {
            let (mut ok, mut failed) = (Vec::new(), Vec::new());
            for n in names {
                if self.delete(&data_path(p, n)?)? {
                    ok.push(rel_path(p, n));
                    deleted.push(rel_path(p, n));
                    total += 1;
                } else {
                    failed.push(rel_path(p, n));
                }
            }
            partition_meta.insert(
                p.clone(),
                json!({"partitionPath": p, "policy": policy, "deletePathPatterns": names,
                       "successDeleteFiles": ok, "failedDeleteFiles": failed,
                       "isPartitionDeleted": false}),
            );
            self.forget_files(p, names);
        }
        self.mdt_deltacommit(
            &instant,
            metadata_table::deletion_records(&by_partition),
            true,
        )?;
        let completion = self.next_time()?;
        let meta = json!({
            "policy": policy,
            "startCleanTime": instant,
            "timeTakenInMillis": CLOCK_STEP_MS,
            "totalFilesDeleted": total,
            "earliestCommitToRetain": earliest_commit_to_retain,
            "lastCompletedCommitTimestamp": last_completed,
            "partitionMetadata": partition_meta,
            "version": 2,
        });
        let path = self.instant_path(&instant, Some(&completion), Action::Clean, State::Completed);
        self.write_instant(&path, Some((&avro::clean_metadata(), &meta, false)))?;
        self.events.push(Event {
            instant: instant.clone(),
            action: Action::Clean,
            state: State::Completed,
            completion: Some(if self.layout == Layout::V2 {
                completion
            } else {
                instant.clone()
            }),
            written: Vec::new(),
            deleted,
            replaced: Vec::new(),
            rolled_back_by: None,
        });
        Ok(instant)
    }

    /// Drop deleted files from the writer's model.
    fn forget_files(&mut self, partition: &str, names: &[String]) {
        for ((p, _), g) in self.groups.iter_mut() {
            if p != partition {
                continue;
            }
            for s in &mut g.slices {
                if s.base_file.as_ref().is_some_and(|b| names.contains(b)) {
                    s.base_file = None;
                }
                s.logs.retain(|l| !names.contains(&l.name));
            }
            g.slices
                .retain(|s| s.base_file.is_some() || !s.logs.is_empty() || s.pending_compaction);
        }
        self.groups.retain(|_, g| !g.slices.is_empty());
    }

    /// Roll back a write left in flight (an abandoned transaction): deletes its base files —
    /// in layout 2 also its log files; in layout 1 each of its log files gets a rollback
    /// command block in a new log file of the same slice instead — then deletes the write's
    /// `.requested`/`.inflight` and completes the rollback (`HoodieRollbackMetadata`).
    /// Returns the rollback's instant.
    pub fn rollback(&mut self, instant: &str) -> Result<String> {
        let Some(failed) = self.pending.get(instant).cloned() else {
            return Err(Error::Usage(format!(
                "{instant} is not a write in flight (only abandoned writes can be rolled back)"
            )));
        };
        let rollback = self.next_time()?;
        let layout = self.layout;
        // Plan: one request per partition for files to delete, and (layout 1) one per log
        // file group whose blocks must be rolled back.
        let mut requests = Vec::new();
        let mut partitions: BTreeSet<&str> = BTreeSet::new();
        for f in &failed.files {
            partitions.insert(&f.partition);
        }
        for p in &partitions {
            let to_delete: Vec<String> = failed
                .files
                .iter()
                .filter(|f| f.partition == *p && (!f.is_log || layout == Layout::V2))
                .map(|f| rel_path(&f.partition, &f.name))
                .collect();
            if !to_delete.is_empty() {
                requests.push(
                    json!({"partitionPath": p, "fileId": "", "latestBaseInstant": "",
                                     "filesToBeDeleted": to_delete, "logBlocksToBeDeleted": {}}),
                );
            }
        }
        if layout == Layout::V1 {
            for f in failed.files.iter().filter(|f| f.is_log) {
                let base = logfile_base_instant(&f.name);
                requests.push(json!({"partitionPath": f.partition, "fileId": f.file_id,
                                     "latestBaseInstant": base, "filesToBeDeleted": [],
                                     "logBlocksToBeDeleted": {rel_path(&f.partition, &f.name): f.size}}));
            }
        }
        let plan = json!({
            "instantToRollback": {"commitTime": instant, "action": failed.action.name()},
            "RollbackRequests": requests,
            "version": 1,
        });
        let path = self.instant_path(&rollback, None, Action::Rollback, State::Requested);
        self.write_instant(&path, Some((&avro::rollback_plan(), &plan, false)))?;
        let path = self.instant_path(&rollback, None, Action::Rollback, State::Inflight);
        self.write_instant(&path, None)?;

        #[derive(Default)]
        struct PartitionResult {
            ok: Vec<String>,
            failed: Vec<String>,
            rollback_logs: BTreeMap<String, u64>,
            failed_logs: BTreeMap<String, u64>,
        }
        let mut results: BTreeMap<String, PartitionResult> = BTreeMap::new();
        let mut deleted = Vec::new();
        let mut written = Vec::new();
        // Log files the rollback leaves on disk (layout 1), for the metadata table.
        let mut listed_logs: Vec<(String, String, u64)> = Vec::new();
        for f in &failed.files {
            let r = results.entry(f.partition.clone()).or_default();
            let rel = rel_path(&f.partition, &f.name);
            let path = data_path(&f.partition, &f.name)?;
            if f.is_log && layout == Layout::V1 {
                // The log may hold blocks of committed writes too (on storage that appends),
                // so Hudi 0.x never deletes it: a command block tells readers to skip the
                // failed instant's blocks.
                r.failed_logs.insert(rel, f.size);
                listed_logs.push((f.partition.clone(), f.name.clone(), f.size));
                let key = (f.partition.clone(), f.file_id.clone());
                let base = logfile_base_instant(&f.name);
                let Some(g) = self.groups.get_mut(&key) else {
                    continue;
                };
                let Some(slice) = g.slices.iter_mut().find(|s| s.base_instant == base) else {
                    continue;
                };
                let version = slice.logs.iter().map(|l| l.version).max().unwrap_or(0) + 1;
                let name = listing::log_file_name(
                    &f.file_id,
                    &base,
                    version,
                    logfile::UNKNOWN_WRITE_TOKEN,
                );
                let bytes = logfile::rollback_command_block(&rollback, instant);
                let lpath = data_path(&f.partition, &name)?;
                self.store
                    .put(&lpath, &bytes)
                    .map_err(|e| Error::io(self.store.describe(&lpath), e))?;
                let size = bytes.len() as u64;
                slice.logs.push(LogEntry {
                    name: name.clone(),
                    writer: rollback.clone(),
                    version,
                    committed: false,
                    size: bytes.len() as u64,
                });
                let r = results.entry(f.partition.clone()).or_default();
                r.rollback_logs
                    .insert(rel_path(&f.partition, &name), bytes.len() as u64);
                written.push(rel_path(&f.partition, &name));
                listed_logs.push((f.partition.clone(), name.clone(), size));
                self.record_written(&f.partition, &name, &rollback, 0, size);
            } else if self.delete(&path)? {
                r.ok.push(rel.clone());
                deleted.push(rel);
            } else {
                r.failed.push(rel);
            }
        }
        if layout == Layout::V2 {
            for f in failed.files.iter().filter(|f| f.is_log) {
                if let Some(g) = self
                    .groups
                    .get_mut(&(f.partition.clone(), f.file_id.clone()))
                {
                    for s in &mut g.slices {
                        s.logs.retain(|l| l.name != f.name);
                    }
                }
            }
        }
        self.mdt_on_data_rollback(&rollback, instant, &listed_logs)?;
        // The failed instant disappears from the timeline.
        for state in [State::Requested, State::Inflight] {
            self.delete(&self.instant_path(instant, None, failed.action, state))?;
        }
        let total: usize = results.values().map(|r| r.ok.len()).sum();
        let partition_meta: serde_json::Map<String, Json> = results
            .into_iter()
            .map(|(p, r)| {
                let v = json!({"partitionPath": p, "successDeleteFiles": r.ok,
                               "failedDeleteFiles": r.failed, "rollbackLogFiles": r.rollback_logs,
                               "logFilesFromFailedCommit": r.failed_logs});
                (p, v)
            })
            .collect();
        let completion = self.next_time()?;
        let meta = json!({
            "startRollbackTime": rollback,
            "timeTakenInMillis": CLOCK_STEP_MS,
            "totalFilesDeleted": total,
            "commitsRollback": [instant],
            "partitionMetadata": partition_meta,
            "version": 1,
            "instantsRollback": [{"commitTime": instant, "action": failed.action.name()}],
        });
        let path = self.instant_path(
            &rollback,
            Some(&completion),
            Action::Rollback,
            State::Completed,
        );
        self.write_instant(&path, Some((&avro::rollback_metadata(), &meta, false)))?;
        self.pending.remove(instant);
        if let Some(e) = self.event_mut(instant, failed.action) {
            e.rolled_back_by = Some(rollback.clone());
        }
        self.events.push(Event {
            instant: rollback.clone(),
            action: Action::Rollback,
            state: State::Completed,
            completion: Some(if layout == Layout::V2 {
                completion
            } else {
                rollback.clone()
            }),
            written,
            deleted,
            replaced: Vec::new(),
            rolled_back_by: None,
        });
        Ok(rollback)
    }

    /// Savepoint a completed write: `T.savepoint.inflight` and the completed savepoint (same
    /// requested time `T` as the commit it pins; `T_C.savepoint` in layout 2) with
    /// `HoodieSavepointMetadata` listing the files of the table as of `T`.
    pub fn savepoint(&mut self, instant: &str) -> Result<()> {
        if !self.completed.contains_key(instant) {
            return Err(Error::Usage(format!("{instant} is not a completed write")));
        }
        if self.savepoints.contains(instant) {
            return Err(Error::Usage(format!("{instant} is already savepointed")));
        }
        let mut partition_meta: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for ((p, _), g) in &self.groups {
            if g.replaced_by.as_deref().is_some_and(|r| r <= instant) {
                continue;
            }
            let slice = g.slices.iter().rev().find(|s| {
                s.base_instant.as_str() <= instant
                    && !s.pending_compaction
                    && (s.base_file.is_some() || !s.logs.is_empty())
            });
            let Some(slice) = slice else { continue };
            let files = partition_meta.entry(p.clone()).or_default();
            files.extend(slice.base_file.iter().cloned());
            files.extend(
                slice
                    .logs
                    .iter()
                    .filter(|l| l.committed && l.writer.as_str() <= instant)
                    .map(|l| l.name.clone()),
            );
        }
        let partition_meta: serde_json::Map<String, Json> = partition_meta
            .into_iter()
            .map(|(p, files)| {
                let v = json!({"partitionPath": p, "savepointDataFile": files});
                (p, v)
            })
            .collect();
        let path = self.instant_path(instant, None, Action::Savepoint, State::Inflight);
        self.write_instant(&path, None)?;
        let completion = self.next_time()?;
        let meta = json!({
            "savepointedBy": "hudifs-gen",
            "savepointedAt": self.clock_ms / 1000,
            "comments": "",
            "partitionMetadata": partition_meta,
            "version": 1,
        });
        let path = self.instant_path(
            instant,
            Some(&completion),
            Action::Savepoint,
            State::Completed,
        );
        self.write_instant(&path, Some((&avro::savepoint_metadata(), &meta, false)))?;
        self.savepoints.insert(instant.to_string());
        self.events.push(Event {
            instant: instant.to_string(),
            action: Action::Savepoint,
            state: State::Completed,
            completion: Some(if self.layout == Layout::V2 {
                completion
            } else {
                instant.to_string()
            }),
            written: Vec::new(),
            deleted: Vec::new(),
            replaced: Vec::new(),
            rolled_back_by: None,
        });
        Ok(())
    }
}

/// The instant in a log file name (the writer made the name, so it parses).
fn logfile_base_instant(name: &str) -> String {
    listing::parse_log_name(name)
        .map(|l| l.instant)
        .unwrap_or_default()
}
