//! Schema-on-read (`hoodie.schema.on.read.enable=true`) as Java's writer keeps it:
//! - every commit records the table's `InternalSchema` (fields with ids) in
//!   `extraMetadata.latestSchema` (`SerDeHelper.LATEST_SCHEMA`, written by `SerDeHelper.toJson`:
//!   `max_column_id`, `version-id`, `type`, `fields` of `id`, `name`, `optional`, `type`), and a
//!   compaction records it too (`RunCompactionActionExecutor`);
//! - every data write and every `ALTER TABLE` persists the whole history, newest version first
//!   (`SerDeHelper.inheritSchemas`), as the completed schema commit of its own instant in
//!   `.hoodie/.schema/` (`FileBasedInternalSchemaStorageManager.persistHistorySchemaStr`:
//!   `<T>.schemacommit.requested`, `.inflight`, then `<T>.schemacommit` on layout 1 or
//!   `<T>_<C>.schemacommit` on layout 2, `InstantFileNameGeneratorV2`);
//! - a version's id is the instant that made it: the first write with schema-on-read
//!   (`AvroInternalSchemaConverter.convert`: ids in field order), a write whose schema adds a
//!   column (`AvroSchemaEvolutionUtils.reconcileSchema`: the next id), or an `ALTER TABLE …
//!   RENAME COLUMN` / `DROP COLUMN` (`AlterTableCommand.commitWithSchema`: an empty commit of
//!   operation `ALTER_SCHEMA` whose `latestSchema` is the new version). A renamed column keeps
//!   its id; a column dropped and added again gets a new one.

use super::parquet::{rows, rows_with_ids, Row};
use super::*;
use hudifs_core::table::TableType;

/// An `InternalSchema`'s fields: id, name, optional, type.
type Fields = Vec<(i64, String, bool, String)>;

/// The writer's schema-on-read state.
#[derive(Debug, Clone, Default)]
pub(super) struct WriterSchemas {
    /// Field id of each current column, by name.
    ids: BTreeMap<String, i64>,
    max_column_id: i64,
    /// Every version, newest first: its id, its `max_column_id` and its fields (id, name,
    /// optional, type).
    versions: Vec<(String, i64, Fields)>,
}

/// The `SerDeHelper.toJson` form of one version.
fn version_json(max: i64, version: &str, fields: &[(i64, String, bool, String)]) -> Json {
    let fields: Vec<Json> = fields
        .iter()
        .map(|(id, name, optional, t)| json!({"id": id, "name": name, "optional": optional, "type": t}))
        .collect();
    let version: i64 = version.parse().unwrap_or_default();
    json!({"max_column_id": max, "version-id": version, "type": "record", "fields": fields})
}

impl TableWriter {
    /// Write with schema-on-read from now on: every commit records the table's
    /// `InternalSchema`, every write persists its history under `.hoodie/.schema/`.
    pub fn enable_schema_on_read(&mut self) {
        self.sor.get_or_insert_with(|| WriterSchemas {
            max_column_id: -1,
            ..Default::default()
        });
    }

    /// `ALTER TABLE … RENAME COLUMN old TO new` on an extra column (schema-on-read): an
    /// `ALTER_SCHEMA` commit; files written before keep the old name, later ones the new one.
    /// Returns the commit's requested time.
    pub fn rename_column(&mut self, old: &str, new: &str) -> Result<String> {
        // A table without a version yet: its schema converted, ids in field order (what
        // `AlterTableCommand` starts from, `AvroInternalSchemaConverter.convert`).
        self.internal_fields();
        let sor = self.sor_mut()?;
        let id = sor
            .ids
            .remove(old)
            .ok_or_else(|| Error::Usage(format!("no column {old}")))?;
        sor.ids.insert(new.to_string(), id);
        let c = self
            .spec
            .extra_columns
            .iter_mut()
            .find(|c| c.name == old)
            .ok_or_else(|| Error::Usage(format!("{old} is not an extra column")))?;
        c.name = new.to_string();
        self.alter_schema()
    }

    /// `ALTER TABLE … DROP COLUMN name` on an extra column (schema-on-read): an `ALTER_SCHEMA`
    /// commit; the values it held are gone from the table (a column added later under the
    /// same name is another column). Returns the commit's requested time.
    pub fn drop_column(&mut self, name: &str) -> Result<String> {
        self.internal_fields();
        let sor = self.sor_mut()?;
        sor.ids.remove(name);
        let i = self
            .spec
            .extra_columns
            .iter()
            .position(|c| c.name == name)
            .ok_or_else(|| Error::Usage(format!("{name} is not an extra column")))?;
        self.spec.extra_columns.remove(i);
        let drop_value = |r: &mut StoredRow| {
            if i < r.row.extra.len() {
                r.row.extra.remove(i);
            }
        };
        for g in self.groups.values_mut() {
            g.rows.values_mut().for_each(drop_value);
        }
        for c in self.compactions.values_mut() {
            for op in &mut c.ops {
                op.rows.values_mut().for_each(drop_value);
            }
        }
        self.alter_schema()
    }

    /// `ALTER TABLE … ALTER COLUMN name TYPE …` on an extra column (schema-on-read): a long
    /// column becomes a string one or back (`SchemaChangeUtils` allows long → string); files
    /// written before keep their type. Returns the commit's requested time.
    pub fn change_column_type(&mut self, name: &str, long: bool) -> Result<String> {
        self.sor_mut()?;
        let c = self
            .spec
            .extra_columns
            .iter_mut()
            .find(|c| c.name == name)
            .ok_or_else(|| Error::Usage(format!("{name} is not an extra column")))?;
        c.long = long;
        self.alter_schema()
    }

    /// Replace the content of the newest completed schema commit of `.hoodie/.schema/`
    /// (to test a damaged history). Returns its name.
    pub fn damage_schema_history(&mut self, content: &[u8]) -> Result<String> {
        let dir = self.schema_dir();
        let mut names: Vec<String> = self
            .store
            .list_names(&dir)
            .map_err(|e| Error::io(self.describe_root(), e))?
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| n.ends_with(".schemacommit"))
            .collect();
        names.sort();
        let name = names
            .pop()
            .ok_or_else(|| Error::Usage("no schema commit".into()))?;
        self.put(&join(&dir, &name)?, content)?;
        Ok(name)
    }

    fn sor_mut(&mut self) -> Result<&mut WriterSchemas> {
        self.sor
            .as_mut()
            .ok_or_else(|| Error::Usage("schema-on-read is not enabled".into()))
    }

    /// The empty commit `AlterTableCommand.commitWithSchema` makes.
    fn alter_schema(&mut self) -> Result<String> {
        let action = self.write_action();
        let mut t = self.begin(action)?;
        t.set_operation("ALTER_SCHEMA")?;
        t.complete()
    }

    /// The current columns with their ids (a new id for a column not seen before), in the
    /// table schema's order, meta fields first.
    fn internal_fields(&mut self) -> Fields {
        let schema = parquet::data_schema(
            &self.spec.name,
            true,
            &self.spec.extra_columns,
            &self.spec.partition_fields,
        );
        let avro::Schema::Record(r) = schema else {
            return Vec::new();
        };
        let Some(sor) = self.sor.as_mut() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for f in &r.fields {
            let (optional, t) = match &f.schema {
                avro::Schema::Union(b) => {
                    (true, b.iter().find(|s| !matches!(s, avro::Schema::Null)))
                }
                s => (false, Some(s)),
            };
            let t = match t {
                Some(avro::Schema::Long) => "long",
                Some(avro::Schema::Int) => "int",
                Some(avro::Schema::Double) => "double",
                Some(avro::Schema::Boolean) => "boolean",
                _ => "string",
            };
            let id = match sor.ids.get(f.name.as_ref()) {
                Some(id) => *id,
                None => {
                    sor.max_column_id += 1;
                    sor.ids.insert(f.name.to_string(), sor.max_column_id);
                    sor.max_column_id
                }
            };
            out.push((id, f.name.to_string(), optional, t.to_string()));
        }
        out
    }

    /// Before write `instant` completes (schema-on-read): a new version if the columns
    /// changed, and the history persisted as the schema commit of `instant`.
    pub(super) fn persist_schema_history(&mut self, instant: &str) -> Result<()> {
        if self.sor.is_none() {
            return Ok(());
        }
        let fields = self.internal_fields();
        let Some(sor) = self.sor.as_mut() else {
            return Ok(());
        };
        if sor.versions.first().is_none_or(|(_, _, f)| *f != fields) {
            let max = sor.max_column_id;
            sor.versions.insert(0, (instant.to_string(), max, fields));
        }
        let schemas: Vec<Json> = sor
            .versions
            .iter()
            .map(|(v, max, f)| version_json(*max, v, f))
            .collect();
        let history = serde_json::to_vec(&json!({ "schemas": schemas }))
            .map_err(|e| encode_err("schema history")(e.to_string()))?;
        let dir = self.schema_dir();
        self.put(
            &join(&dir, &format!("{instant}.schemacommit.requested"))?,
            b"",
        )?;
        self.put(
            &join(&dir, &format!("{instant}.schemacommit.inflight"))?,
            b"",
        )?;
        let name = match self.layout {
            Layout::V1 => format!("{instant}.schemacommit"),
            Layout::V2 => format!("{instant}_{}.schemacommit", self.next_time()?),
        };
        self.put(&join(&dir, &name)?, &history)
    }

    /// `.hoodie/.schema`.
    fn schema_dir(&self) -> TablePath {
        TablePath::new(".hoodie/.schema").unwrap_or_default()
    }

    /// `extraMetadata.latestSchema` of a commit now (schema-on-read): the current version.
    pub(super) fn latest_schema_text(&self) -> Option<String> {
        let sor = self.sor.as_ref()?;
        let (v, max, f) = sor.versions.first()?;
        Some(version_json(*max, v, f).to_string())
    }
}

/// A schema-on-read table (Java's layout: `latestSchema` in every commit, the history in
/// `.hoodie/.schema/`): long columns `fare` and `tip`; the first write inserts city=a
/// (1000..1019) and city=b (2000..2009) with fare id·3 and tip id; then `fare` is renamed to
/// `price`, `tip` dropped and added again (a new field id); the last write updates 1000 and
/// 1001 (a log under the new names on a base under the old ones on merge-on-read) and inserts
/// city=c (5000..5004), with price id·5 and tip id·11. Returns the writer, the first write and
/// the last.
pub fn build_renamed(
    root: &Path,
    table_type: TableType,
    version: u32,
) -> Result<(TableWriter, String, String)> {
    let spec = TableSpec::new("renamed", table_type, version)
        .partitioned_by(&["city"], true)
        .with_long_columns(&["fare", "tip"]);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000)?;
    w.enable_schema_on_read();
    let write = w.write_action();
    let valued = |r: Row, a: i64, b: i64| {
        let (a, b) = ((r.id * a).to_string(), (r.id * b).to_string());
        r.with_extra(&[Some(&a), Some(&b)])
    };
    let mut t = w.begin(write)?;
    let a: Vec<_> = rows(1, 20).into_iter().map(|r| valued(r, 3, 1)).collect();
    let b: Vec<_> = rows(2, 10).into_iter().map(|r| valued(r, 3, 1)).collect();
    let ga = t.insert("city=a", &a)?;
    t.insert("city=b", &b)?;
    let first = t.complete()?;
    w.rename_column("fare", "price")?;
    w.drop_column("tip")?;
    w.add_column("tip", true);
    let mut t = w.begin(write)?;
    let upd: Vec<_> = rows_with_ids(3, &[1000, 1001])
        .into_iter()
        .map(|mut r| {
            r.ts = 1_800_000_000_000 + r.id;
            valued(r, 5, 11)
        })
        .collect();
    t.update("city=a", &ga, &upd)?;
    let c: Vec<_> = rows(5, 5).into_iter().map(|r| valued(r, 5, 11)).collect();
    t.insert("city=c", &c)?;
    let last = t.complete()?;
    Ok((w, first, last))
}
