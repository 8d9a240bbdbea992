//! Bulk writes for benchmark tables: [`Txn::insert_linked`] (many file groups at once, hard
//! links to one template Parquet file per partition) and [`Txn::insert_sized`] (one large base
//! file). The writer keeps no rows for these file groups.

use hudifs_storage::TablePath;

use super::parquet::{self, BaseFile, StoredRow};
use super::txn::{Op, OpKind};
use super::{data_path, join, rel_path, Stat, Txn, BASE_EXT};
use hudifs_core::error::Result;
use hudifs_core::listing;

/// Links made to one template file before a new one is written (ext4 allows 65,000 links).
const LINKS_PER_TEMPLATE: u32 = 60_000;
/// Rows per row group of [`Txn::insert_sized`].
const SIZED_GROUP_ROWS: usize = 1 << 16;
/// Record keys of [`Txn::insert_sized`] start here (13 digits, so string order = numeric).
const SIZED_KEY_BASE: i64 = 1_000_000_000_000;

/// Bulk inserts for benchmark tables: names, write statistics and the timeline are those of
/// real inserts, but the writer keeps no rows for these file groups (they cannot be updated or
/// compacted) and the content is not per file.
impl Txn<'_> {
    /// Insert new file groups at once: `count` groups into each `(partition, count)` of
    /// `groups`. The `.inflight` is written once (not once per group), and every base file is a
    /// hard link to a template Parquet file of its partition — one row, written on first use
    /// under `.hoodie/.temp/hudifs-gen/` (removed by [`TableWriter::remove_templates`] or when
    /// the writer is dropped) — so the files of a partition all hold the same row. Returns the
    /// new file ids, in order.
    pub fn insert_linked(&mut self, groups: &[(&str, usize)]) -> Result<Vec<String>> {
        self.insert_linked_with(groups, false)
    }

    /// [`Txn::insert_linked`] with one template file for every partition (written with the
    /// first partition's values): many partitions cost one Parquet file, not one each. The
    /// partition column values inside the files are then those of the first partition.
    pub fn insert_linked_shared(&mut self, groups: &[(&str, usize)]) -> Result<Vec<String>> {
        self.insert_linked_with(groups, true)
    }

    fn insert_linked_with(
        &mut self,
        groups: &[(&str, usize)],
        shared: bool,
    ) -> Result<Vec<String>> {
        for (partition, _) in groups {
            self.w.check_partition(partition)?;
        }
        let total: usize = groups.iter().map(|(_, n)| n).sum();
        if total == 0 {
            return Ok(Vec::new());
        }
        for (partition, count) in groups {
            for _ in 0..*count {
                self.profile
                    .push((partition.to_string(), String::new(), "null".into(), 1, 0));
            }
        }
        self.write_inflight()?;
        let mut file_ids = Vec::with_capacity(total);
        for (partition, count) in groups {
            self.w.ensure_partition(partition, &self.instant)?;
            for _ in 0..*count {
                let file_id = self.w.new_file_id();
                let (template, size) = self.template(partition, shared)?;
                let token = self.w.write_token(self.task, self.stage);
                let name = listing::base_file_name(&file_id, &token, &self.instant, BASE_EXT);
                let path = data_path(partition, &name)?;
                self.w
                    .store
                    .link_or_copy(&template, &path)
                    .map_err(self.w.io_err(&path))?;
                self.record_pending(partition, &file_id, &name, false, size);
                let instant = self.instant.clone();
                self.w.record_written(partition, &name, &instant, 1, size);
                self.task += 1;
                self.ops.push(Op {
                    kind: OpKind::Insert,
                    stat: Stat {
                        partition: partition.to_string(),
                        file_id: file_id.clone(),
                        path: rel_path(partition, &name),
                        prev_commit: "null".into(),
                        num_writes: 1,
                        num_inserts: 1,
                        size,
                        ..Stat::default()
                    },
                    rows: Vec::new(),
                    opaque: true,
                });
                file_ids.push(file_id);
            }
        }
        Ok(file_ids)
    }

    /// The template of `partition` to link next (path, size), written when missing or full.
    fn template(&mut self, partition: &str, shared: bool) -> Result<(TablePath, u64)> {
        // Partition paths never start with a NUL: the shared template cannot collide.
        let key = if shared { "\0shared" } else { partition };
        if let Some((path, size, links)) = self.w.templates.get_mut(key) {
            if *links < LINKS_PER_TEMPLATE {
                *links += 1;
                return Ok((path.clone(), *size));
            }
        }
        self.w.template_count += 1;
        let name = format!("template-{}.parquet", self.w.template_count);
        let path = join(&self.w.template_dir(), &name)?;
        let rows = self.stamp(&super::rows(0, 1), 0);
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
            &rows,
        )?;
        self.w
            .templates
            .insert(key.to_string(), (path.clone(), size, 1));
        Ok((path, size))
    }

    /// Insert one new file group whose base file is a real Parquet file of at least `bytes`
    /// bytes (deterministic rows with 13-digit keys, written in row groups of 65,536 rows and
    /// not kept in memory). Returns the file id.
    pub fn insert_sized(&mut self, partition: &str, bytes: u64) -> Result<String> {
        self.w.check_partition(partition)?;
        let file_id = self.w.new_file_id();
        self.profile
            .push((partition.to_string(), String::new(), "null".into(), 0, 0));
        self.write_inflight()?;
        self.w.ensure_partition(partition, &self.instant)?;
        let token = self.w.write_token(self.task, self.stage);
        let name = listing::base_file_name(&file_id, &token, &self.instant, BASE_EXT);
        let path = data_path(partition, &name)?;
        let partition_values = self.w.partition_values(partition);
        let target = BaseFile {
            path: &path,
            file_name: &name,
            partition,
            table: &self.w.spec.name,
            with_meta: self.w.spec.populate_meta_fields,
            extra: &self.w.spec.extra_columns,
            partition_values: &partition_values,
        };
        let mut writer = parquet::BaseWriter::create(&target)?;
        let mut written = 0usize;
        let mut chunk = 0u64;
        while (writer.bytes_written() as u64) < bytes {
            let start = SIZED_KEY_BASE + written as i64;
            let ids: Vec<i64> = (start..start + SIZED_GROUP_ROWS as i64).collect();
            let rows = super::rows_with_ids(chunk, &ids);
            let stored: Vec<StoredRow> = rows
                .into_iter()
                .enumerate()
                .map(|(i, row)| StoredRow {
                    row,
                    commit_time: self.instant.clone(),
                    seqno: format!("{}_{}_{}", self.instant, self.task, written + i + 1),
                })
                .collect();
            writer.write_group(&stored)?;
            written += stored.len();
            chunk += 1;
        }
        let range = (written > 0).then(|| {
            (
                SIZED_KEY_BASE.to_string(),
                (SIZED_KEY_BASE + written as i64 - 1).to_string(),
            )
        });
        let size = writer.close(self.w, range)?;
        self.record_pending(partition, &file_id, &name, false, size);
        let instant = self.instant.clone();
        self.w
            .record_written(partition, &name, &instant, written, size);
        self.task += 1;
        self.ops.push(Op {
            kind: OpKind::Insert,
            stat: Stat {
                partition: partition.to_string(),
                file_id: file_id.clone(),
                path: rel_path(partition, &name),
                prev_commit: "null".into(),
                num_writes: written,
                num_inserts: written,
                size,
                ..Stat::default()
            },
            rows: Vec::new(),
            opaque: true,
        });
        if let Some(p) = self.profile.last_mut() {
            p.3 = written;
        }
        Ok(file_id)
    }
}

/// A wide table for tests and benchmarks: `partitions` partitions (`part=00000`, ...,
/// hive-style) with one file group each, and a metadata table; written by one bulk commit
/// ([`Txn::insert_linked_shared`]: every base file is a hard link to one template), so that it
/// takes seconds. The MDT holds the init base file and one deltacommit whose HFile data block
/// lists every partition.
pub fn build_wide_table(
    root: &std::path::Path,
    version: u32,
    table_type: hudifs_core::table::TableType,
    partitions: usize,
    clock_start_ms: i64,
) -> Result<super::TableWriter> {
    let spec = super::TableSpec::new("wide", table_type, version)
        .partitioned_by(&["part"], true)
        .with_metadata_table();
    let mut w = super::TableWriter::create(root, spec, clock_start_ms)?;
    let names: Vec<String> = (0..partitions).map(|i| format!("part={i:05}")).collect();
    let groups: Vec<(&str, usize)> = names.iter().map(|n| (n.as_str(), 1)).collect();
    let action = w.write_action();
    let mut txn = w.begin(action)?;
    txn.insert_linked_shared(&groups)?;
    txn.complete()?;
    w.remove_templates()?;
    Ok(w)
}
