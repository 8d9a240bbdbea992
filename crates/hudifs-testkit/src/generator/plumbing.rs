//! What the writer's actions and transactions share: the clock, file ids and write tokens,
//! instant files, partitions and their metafiles, commit metadata, template files.

use super::*;

impl TableWriter {
    pub(super) fn next_time(&mut self) -> Result<String> {
        if let Some(t) = self.next_instant.take() {
            return Ok(t);
        }
        if self.wall_clock {
            let ms = now_ms().max(self.clock_ms);
            let t = instant_time(ms)?;
            self.clock_ms = ms + 1;
            return Ok(t);
        }
        let t = instant_time(self.clock_ms)?;
        self.clock_ms += CLOCK_STEP_MS;
        Ok(t)
    }

    pub(super) fn new_file_id(&mut self) -> String {
        let mut rng = SplitMix64::new(self.rng_state);
        let (a, b) = (rng.next_u64(), rng.next_u64());
        self.rng_state = rng.0;
        format!(
            "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}-0",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xfff,
            ((b >> 48) & 0x3fff) | 0x8000,
            b & 0xffff_ffff_ffff
        )
    }

    /// A write token `<task>-<stage>-<attempt>` (Spark's task partition, stage and attempt).
    pub(super) fn write_token(&mut self, task: u32, stage: u32) -> String {
        self.attempt += 1;
        format!("{task}-{stage}-{}", self.attempt)
    }

    pub(super) fn instant_path(
        &self,
        requested: &str,
        completion: Option<&str>,
        action: Action,
        state: State,
    ) -> TablePath {
        let name = timeline::instant_file_name(requested, completion, action, state, self.layout);
        join(&self.timeline_dir, &name).unwrap_or_default()
    }

    /// Write a timeline file; `content` is JSON metadata (written as JSON in layout 1 when
    /// `json_in_layout1`, else as an Avro container with `schema`), or nothing. The file is
    /// written under a temporary name and renamed into place.
    pub(super) fn write_instant(
        &mut self,
        path: &TablePath,
        content: Option<(&avro::Schema, &Json, bool)>,
    ) -> Result<()> {
        let bytes = match content {
            None => Vec::new(),
            Some((_, v, true)) if self.layout == Layout::V1 => {
                serde_json::to_vec_pretty(v).map_err(|e| encode_err("json")(e.to_string()))?
            }
            Some((schema, v, _)) => {
                let name = path.name();
                avro::container(schema, std::slice::from_ref(v), name).map_err(encode_err(name))?
            }
        };
        let (before_ms, after_ms) = self.put_atomic(path, &bytes)?;
        let name = path.name().to_string();
        let parsed = timeline::parse_instant_file_name(&name, self.layout);
        if parsed.as_ref().is_some_and(|f| f.state == State::Completed) {
            self.stamp_completion(path)?;
        }
        if let Some(f) = parsed {
            self.published.push(Published {
                name,
                requested: f.requested.to_string(),
                action: f.action,
                state: f.state,
                before_ms,
                after_ms,
            });
        }
        Ok(())
    }

    /// Give a completed layout-1 timeline file its logical completion time (the clock's last
    /// time) as modification time: what Hudi 1.x's upgrade takes as its completion time
    /// (`upgrade.rs`). Only on this machine's file system, with the logical clock.
    fn stamp_completion(&self, path: &TablePath) -> Result<()> {
        if self.layout != Layout::V1 || self.wall_clock || self.store.local().is_none() {
            return Ok(());
        }
        let when = std::time::UNIX_EPOCH
            + std::time::Duration::from_millis((self.clock_ms - CLOCK_STEP_MS).max(0) as u64);
        let file = std::fs::File::options()
            .write(true)
            .open(self.local_path(path))
            .and_then(|f| f.set_modified(when).map(|()| f));
        file.map(drop)
            .map_err(|e| Error::io(self.store.describe(path), e))
    }

    pub(super) fn ensure_partition(&mut self, partition: &str, instant: &str) -> Result<()> {
        if self.partitions.contains(partition) {
            return Ok(());
        }
        let depth = if partition.is_empty() {
            0
        } else {
            partition.split('/').count()
        };
        let text = format!(
            "#partition metadata\n#{}\ncommitTime={instant}\npartitionDepth={depth}\n",
            java_date(self.clock_ms)?
        );
        self.put_atomic(&data_path(partition, PARTITION_METAFILE)?, text.as_bytes())?;
        self.partitions.insert(partition.to_string());
        Ok(())
    }

    pub(super) fn check_partition(&self, partition: &str) -> Result<()> {
        let fields = &self.spec.partition_fields;
        let segs: Vec<&str> = if partition.is_empty() {
            Vec::new()
        } else {
            partition.split('/').collect()
        };
        let ok = segs.len() == fields.len()
            && segs.iter().all(|s| !s.is_empty() && !s.starts_with('.'))
            && (!self.spec.hive_style
                || segs.iter().zip(fields).all(|(s, f)| {
                    s.strip_prefix(f.as_str())
                        .is_some_and(|r| r.starts_with('='))
                }));
        if ok {
            Ok(())
        } else {
            Err(Error::Usage(format!(
                "{partition:?} is not a partition path of this table (fields {fields:?}, hive-style {})",
                self.spec.hive_style
            )))
        }
    }

    pub(super) fn table_schema_text(&self) -> String {
        parquet::data_schema(
            &self.spec.name,
            false,
            &self.spec.extra_columns,
            &self.spec.partition_fields,
        )
        .to_text()
    }

    /// The partition columns' values of the files of `partition` (a checked partition path):
    /// `(field, value)` per partition field.
    pub(super) fn partition_values(&self, partition: &str) -> Vec<(String, String)> {
        if partition.is_empty() {
            return Vec::new();
        }
        self.spec
            .partition_fields
            .iter()
            .zip(partition.split('/'))
            .map(|(f, seg)| {
                let v = if self.spec.hive_style {
                    seg.strip_prefix(f.as_str())
                        .and_then(|r| r.strip_prefix('='))
                        .unwrap_or(seg)
                } else {
                    seg
                };
                (f.clone(), v.to_string())
            })
            .collect()
    }

    pub(super) fn commit_json(
        &self,
        stats: &[Stat],
        replaced: &[(String, String)],
        is_replace: bool,
        compacted: bool,
        operation: &str,
    ) -> Json {
        let mut by_partition: BTreeMap<&str, Vec<Json>> = BTreeMap::new();
        for s in stats {
            by_partition
                .entry(&s.partition)
                .or_default()
                .push(s.to_json(self.layout));
        }
        let mut o = serde_json::Map::new();
        o.insert("partitionToWriteStats".into(), json!(by_partition));
        o.insert("compacted".into(), json!(compacted));
        let mut extra = json!({"schema": self.table_schema_text()});
        if let Some(latest) = self.latest_schema_text() {
            extra["latestSchema"] = json!(latest);
        }
        o.insert("extraMetadata".into(), extra);
        o.insert("operationType".into(), json!(operation));
        if is_replace {
            let mut m: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (p, f) in replaced {
                m.entry(p).or_default().push(f);
            }
            o.insert("partitionToReplaceFileIds".into(), json!(m));
        }
        Json::Object(o)
    }

    pub(super) fn event_mut(&mut self, instant: &str, action: Action) -> Option<&mut Event> {
        self.events
            .iter_mut()
            .rev()
            .find(|e| e.instant == instant && e.action == action)
    }

    /// Where [`Txn::insert_linked`] keeps its template files (Hudi's own scratch directory).
    pub(super) fn template_dir(&self) -> TablePath {
        TablePath::new(".hoodie/.temp/hudifs-gen").unwrap_or_default()
    }

    /// Remove the template files of [`Txn::insert_linked`] (the linked base files keep their
    /// content). Also done when the writer is dropped.
    pub fn remove_templates(&mut self) -> Result<()> {
        self.templates.clear();
        let dir = self.template_dir();
        self.store.delete_dir_all(&dir).map_err(self.io_err(&dir))
    }
}
