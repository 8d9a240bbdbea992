//! Creating a table: `hoodie.properties` and the timeline directories, in a store or on this
//! machine's file system.

use super::*;

impl TableWriter {
    /// Create a new table in directory `root` of this machine (created if missing; it must
    /// not hold a table yet): `hoodie.properties` and the timeline directories. The logical
    /// clock starts at `clock_start_epoch_ms`.
    pub fn create(root: &Path, spec: TableSpec, clock_start_epoch_ms: i64) -> Result<TableWriter> {
        TableWriter::create_with(
            root,
            spec,
            Clock::Logical {
                start_ms: clock_start_epoch_ms,
            },
        )
    }

    /// Create a new table in directory `root` with the given clock (see [`Clock`]).
    pub fn create_with(root: &Path, spec: TableSpec, clock: Clock) -> Result<TableWriter> {
        std::fs::create_dir_all(root).map_err(|e| Error::io(root.display().to_string(), e))?;
        let store = LocalStore::new(root).map_err(|e| Error::io(root.display().to_string(), e))?;
        TableWriter::create_in(Arc::new(store), spec, clock)
    }

    /// Create a new table in `store` (which must not hold a table yet) with the given clock.
    pub fn create_in(
        store: Arc<dyn StorageWrite>,
        spec: TableSpec,
        clock: Clock,
    ) -> Result<TableWriter> {
        let (clock_start_epoch_ms, wall_clock, seed_part) = match clock {
            Clock::Logical { start_ms } => (start_ms, false, start_ms as u64),
            Clock::Wall { seed } => (now_ms(), true, seed),
        };
        if !matches!(spec.version, 6 | 8 | 9) {
            return Err(Error::Usage(format!(
                "table version {} is not one the generator writes (6, 8, 9)",
                spec.version
            )));
        }
        if spec.name.is_empty() || spec.partition_fields.iter().any(|f| f.is_empty()) {
            return Err(Error::Usage(
                "table name and partition fields must not be empty".into(),
            ));
        }
        instant_time(clock_start_epoch_ms)?;
        let hoodie = TablePath::new(".hoodie").unwrap_or_default();
        if store.stat(&hoodie).is_ok() {
            return Err(Error::Usage(format!(
                "{} already holds a Hudi table",
                store.describe(&TablePath::root())
            )));
        }
        let layout = if spec.version >= 8 {
            Layout::V2
        } else {
            Layout::V1
        };
        let timeline_dir = match layout {
            Layout::V2 => join(&hoodie, "timeline")?,
            Layout::V1 => hoodie.clone(),
        };
        let mut dirs = vec![
            timeline_dir.clone(),
            join(&hoodie, ".aux")?,
            join(&hoodie, ".temp")?,
            join(&hoodie, ".schema")?,
        ];
        dirs.push(match layout {
            Layout::V2 => join(&timeline_dir, "history")?,
            Layout::V1 => join(&hoodie, "archived")?,
        });
        for d in &dirs {
            store
                .create_dir_all(d)
                .map_err(|e| Error::io(store.describe(d), e))?;
        }
        let seed = fnv1a(spec.name.as_bytes()) ^ seed_part;
        let w = TableWriter {
            store,
            layout,
            timeline_dir,
            clock_ms: clock_start_epoch_ms,
            rng_state: seed,
            stage: 0,
            attempt: 0,
            groups: BTreeMap::new(),
            partitions: BTreeSet::new(),
            pending: BTreeMap::new(),
            compactions: BTreeMap::new(),
            completed: BTreeMap::new(),
            savepoints: BTreeSet::new(),
            events: Vec::new(),
            wall_clock,
            next_instant: None,
            published: Vec::new(),
            written: BTreeMap::new(),
            templates: BTreeMap::new(),
            template_count: 0,
            cdc: BTreeMap::new(),
            mdt: None,
            sor: None,
            spec,
        };
        let props = w.properties_text()?;
        w.put_atomic(&join(&hoodie, "hoodie.properties")?, props.as_bytes())?;
        let mut w = w;
        if w.spec.metadata_table {
            w.enable_metadata_table()?;
        }
        Ok(w)
    }

    pub(super) fn properties_text(&self) -> Result<String> {
        let s = &self.spec;
        let mut p: Vec<(&str, String)> = vec![
            ("hoodie.table.name", s.name.clone()),
            (
                "hoodie.table.type",
                match s.table_type {
                    TableType::CopyOnWrite => "COPY_ON_WRITE",
                    TableType::MergeOnRead => "MERGE_ON_READ",
                }
                .to_string(),
            ),
            ("hoodie.table.version", s.version.to_string()),
            (
                "hoodie.timeline.layout.version",
                self.layout.number().to_string(),
            ),
            ("hoodie.table.base.file.format", "PARQUET".into()),
            ("hoodie.table.recordkey.fields", "id".into()),
        ];
        if !s.partition_fields.is_empty() {
            p.push((
                "hoodie.table.partition.fields",
                s.partition_fields.join(","),
            ));
        }
        let (class, kind) = match s.partition_fields.len() {
            0 => ("NonpartitionedKeyGenerator", "NON_PARTITION"),
            1 => ("SimpleKeyGenerator", "SIMPLE"),
            _ => ("ComplexKeyGenerator", "COMPLEX"),
        };
        if self.layout == Layout::V2 {
            p.push(("hoodie.table.keygenerator.type", kind.into()));
        } else {
            p.push((
                "hoodie.table.keygenerator.class",
                format!("org.apache.hudi.keygen.{class}"),
            ));
        }
        p.push((
            "hoodie.datasource.write.hive_style_partitioning",
            s.hive_style.to_string(),
        ));
        p.push((
            "hoodie.datasource.write.partitionpath.urlencode",
            "false".into(),
        ));
        p.push(("hoodie.table.timeline.timezone", "UTC".into()));
        p.push((
            "hoodie.populate.meta.fields",
            s.populate_meta_fields.to_string(),
        ));
        if let Some(mode) = s.cdc {
            p.push(("hoodie.table.cdc.enabled", "true".into()));
            p.push((
                "hoodie.table.cdc.supplemental.logging.mode",
                mode.property_value(s.version),
            ));
        }
        p.push(("hoodie.archivelog.folder", "archived".into()));
        if s.version >= 9 {
            p.push(("hoodie.table.ordering.fields", "ts".into()));
        } else {
            p.push(("hoodie.table.precombine.field", "ts".into()));
        }
        if self.layout == Layout::V2 {
            p.push(("hoodie.record.merge.mode", "EVENT_TIME_ORDERING".into()));
            p.push(("hoodie.timeline.path", "timeline".into()));
            p.push(("hoodie.timeline.history.path", "history".into()));
            p.push(("hoodie.table.initial.version", s.version.to_string()));
        } else {
            p.push((
                "hoodie.compaction.payload.class",
                "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload".into(),
            ));
        }
        p.push((
            "hoodie.table.create.schema",
            parquet::data_schema(&s.name, false, &s.extra_columns, &s.partition_fields).to_text(),
        ));
        for (k, v) in &s.properties {
            match p.iter_mut().find(|(key, _)| key == k) {
                Some(e) => e.1 = v.clone(),
                None => p.push((k.as_str(), v.clone())),
            }
        }
        if self.mdt.is_some() {
            p.push(("hoodie.table.metadata.partitions", "files".into()));
            p.push(("hoodie.table.metadata.partitions.inflight", String::new()));
        }
        // No `hoodie.table.checksum`: Java validates it only when present.
        let date = datetime(self.clock_ms)?;
        let mut text = format!(
            "#Updated at {}\n#{}\n",
            date.format("%Y-%m-%dT%H:%M:%S%.3fZ"),
            java_date(self.clock_ms)?
        );
        for (k, v) in p {
            text.push_str(&format!("{k}={}\n", escape_property(&v)));
        }
        Ok(text)
    }
}
