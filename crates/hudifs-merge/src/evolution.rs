//! Schema-on-read (`hoodie.schema.on.read.enable`): columns matched by field id, not by name
//! (SEMANTICS §10.2), as Java's `InternalSchemaMerger` reads an older file in a newer schema.
//!
//! A table written with schema-on-read records an `InternalSchema` (fields with ids) in every
//! commit's `extraMetadata.latestSchema` (`SerDeHelper.LATEST_SCHEMA`) and the history of all
//! its versions in `.hoodie/.schema/<instant>.schemacommit` (`FileBasedInternalSchemaStorageManager`,
//! JSON `{"schemas": [newest, …]}`, each with its `version-id`: the instant that made it). The
//! schema a file was written in is found as `InternalSchemaCache.searchSchemaAndCache` finds
//! it: the `latestSchema` of the commit whose requested time is the file's instant (a base
//! file's, a log block's `INSTANT_TIME`), else the history's version at or before that instant
//! (`InternalSchemaUtils.searchSchema`). A file column is then served under the view's name of
//! the same id (a rename); a view column whose id the file lacks is null, even where the file
//! has a column of that name (dropped and added again: a new id, `InternalSchemaMerger`'s
//! `suffix` rename); a file column whose id the view lacks is not served. A type change is
//! served where hudifs promotes it and Hudi allows it (`SchemaChangeUtils.isTypeUpdateAllow`);
//! any other change, and a rename inside a struct, is refused, never served by name.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::{Array, ArrayRef, RecordBatch, RecordBatchOptions, StructArray};
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use serde_json::Value;

use crate::error::MergeError;

/// A type of an `InternalSchema` (`Types` in Java), as `SerDeHelper` writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InternalType {
    /// A primitive, by its `Type.toString()` (lower case): `int`, `long`, `decimal(10, 2)`, …
    Primitive(String),
    Record(Vec<InternalField>),
    Array {
        element_id: i64,
        element: Box<InternalType>,
    },
    Map {
        key_id: i64,
        key: Box<InternalType>,
        value_id: i64,
        value: Box<InternalType>,
    },
}

/// A field of an `InternalSchema` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalField {
    pub id: i64,
    pub name: String,
    pub optional: bool,
    pub ty: InternalType,
}

/// One version of a table's `InternalSchema`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalSchema {
    /// `version-id`: the instant that made this version (absent in some commits).
    pub version: Option<i64>,
    pub fields: Vec<InternalField>,
}

fn field_of<'a>(v: &'a Value, key: &str) -> Result<&'a Value, String> {
    v.get(key)
        .ok_or_else(|| format!("no \"{key}\" in {}", short(v)))
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 80 {
        format!(
            "{}…",
            &s[..s.char_indices().nth(80).map_or(s.len(), |(i, _)| i)]
        )
    } else {
        s
    }
}

fn int_of(v: &Value, key: &str) -> Result<i64, String> {
    let x = field_of(v, key)?;
    x.as_i64()
        .or_else(|| x.as_str().and_then(|s| s.parse().ok()))
        .ok_or_else(|| format!("\"{key}\" is not a number: {}", short(x)))
}

/// A primitive type's name, normalised as `SerDeHelper.parserTypeFromJson` reads it (lower
/// case; `decimal(p,s)` with any spacing).
fn primitive(name: &str) -> Result<String, String> {
    let t = name.trim().to_ascii_lowercase();
    if let Some(inner) = t.strip_prefix("decimal(").and_then(|r| r.strip_suffix(')')) {
        let (p, s) = inner
            .split_once(',')
            .ok_or_else(|| format!("not a decimal type: {name:?}"))?;
        let (p, s): (u32, u32) = (
            p.trim()
                .parse()
                .map_err(|_| format!("bad precision: {name:?}"))?,
            s.trim()
                .parse()
                .map_err(|_| format!("bad scale: {name:?}"))?,
        );
        return Ok(format!("decimal({p}, {s})"));
    }
    if t.is_empty()
        || !t
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_[]".contains(c))
    {
        return Err(format!("not a type: {name:?}"));
    }
    Ok(t)
}

fn type_of(v: &Value) -> Result<InternalType, String> {
    if let Some(s) = v.as_str() {
        return Ok(InternalType::Primitive(primitive(s)?));
    }
    let kind = field_of(v, "type")?
        .as_str()
        .ok_or_else(|| format!("\"type\" is not a string: {}", short(v)))?;
    match kind {
        "record" => {
            let fields = field_of(v, "fields")?
                .as_array()
                .ok_or_else(|| format!("\"fields\" is not a list: {}", short(v)))?;
            let fields = fields
                .iter()
                .map(|f| {
                    Ok(InternalField {
                        id: int_of(f, "id")?,
                        name: field_of(f, "name")?
                            .as_str()
                            .ok_or_else(|| format!("\"name\" is not a string: {}", short(f)))?
                            .to_string(),
                        optional: f.get("optional").and_then(Value::as_bool).unwrap_or(true),
                        ty: type_of(field_of(f, "type")?)?,
                    })
                })
                .collect::<Result<Vec<_>, String>>()?;
            Ok(InternalType::Record(fields))
        }
        "array" => Ok(InternalType::Array {
            element_id: int_of(v, "element-id")?,
            element: Box::new(type_of(field_of(v, "element")?)?),
        }),
        "map" => Ok(InternalType::Map {
            key_id: int_of(v, "key-id")?,
            key: Box::new(type_of(field_of(v, "key")?)?),
            value_id: int_of(v, "value-id")?,
            value: Box::new(type_of(field_of(v, "value")?)?),
        }),
        other => Err(format!("unknown type {other:?}")),
    }
}

impl InternalSchema {
    /// One schema as `SerDeHelper.toJson(InternalSchema)` writes it (`latestSchema`).
    pub fn parse(text: &str) -> Result<InternalSchema, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        InternalSchema::from_json(&v)
    }

    fn from_json(v: &Value) -> Result<InternalSchema, String> {
        let version = match v.get("version-id") {
            None | Some(Value::Null) => None,
            Some(_) => Some(int_of(v, "version-id")?),
        };
        match type_of(v)? {
            InternalType::Record(fields) => Ok(InternalSchema { version, fields }),
            _ => Err("not a record schema".into()),
        }
    }

    fn by_id(&self, id: i64) -> Option<&InternalField> {
        self.fields.iter().find(|f| f.id == id)
    }
}

/// The schema history of a `.schemacommit` file (`SerDeHelper.parseSchemas`): every version
/// by its `version-id`.
pub fn parse_history(text: &str) -> Result<BTreeMap<i64, InternalSchema>, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let schemas = field_of(&v, "schemas")?
        .as_array()
        .ok_or("\"schemas\" is not a list")?;
    let mut out = BTreeMap::new();
    for s in schemas {
        let schema = InternalSchema::from_json(s)?;
        let id = schema
            .version
            .ok_or_else(|| format!("a schema without \"version-id\": {}", short(s)))?;
        out.insert(id, schema);
    }
    Ok(out)
}

/// The version in force at `version` (`InternalSchemaUtils.searchSchema`): that version, else
/// the newest one before it.
pub fn search(history: &BTreeMap<i64, InternalSchema>, version: i64) -> Option<&InternalSchema> {
    history.range(..=version).next_back().map(|(_, s)| s)
}

/// The requested time of a `.hoodie/.schema/` file name (`<T>.schemacommit`,
/// `<T>_<C>.schemacommit`, or a pending `<T>.schemacommit.requested` / `.inflight`), and
/// whether it is a completed one (`FileBasedInternalSchemaStorageManager` reads those only).
pub fn schema_file_instant(name: &str) -> Option<(&str, bool)> {
    let (stem, completed) = match name.strip_suffix(".schemacommit") {
        Some(stem) => (stem, true),
        None => (name.split_once(".schemacommit.")?.0, false),
    };
    let t = stem.split('_').next()?;
    (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())).then_some((t, completed))
}

/// The schemas a view's files are read in under schema-on-read: the view's own (the query
/// schema) and, per instant, the schema its files were written in.
#[derive(Debug)]
pub struct SchemaOnRead {
    /// The view's `InternalSchema` (`latestSchema` of its newest write that recorded one).
    pub query: InternalSchema,
    /// Each completed write's `latestSchema`, by requested time (an error names the instant
    /// file it could not be read from).
    pub commits: BTreeMap<String, Result<Arc<InternalSchema>, String>>,
    /// The history of the newest completed `.schemacommit` file (empty where there is none; an
    /// error names the file).
    pub history: Result<BTreeMap<i64, InternalSchema>, String>,
    /// Names the query schema in cache claims (its files' schemas never change once written).
    pub id: String,
}

impl PartialEq for SchemaOnRead {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for SchemaOnRead {}

impl SchemaOnRead {
    /// `query_text`: the view's `latestSchema` text.
    pub fn new(
        query_text: &str,
        commits: BTreeMap<String, Result<Arc<InternalSchema>, String>>,
        history: Result<BTreeMap<i64, InternalSchema>, String>,
    ) -> Result<SchemaOnRead, String> {
        Ok(SchemaOnRead {
            query: InternalSchema::parse(query_text)?,
            commits,
            history,
            id: crate::cache::hash_hex(query_text.as_bytes()),
        })
    }

    /// A view whose own schema cannot be read: every file of it with another schema is
    /// refused with `reason` (serving its columns by name could serve a renamed column wrong).
    pub fn broken(reason: String) -> SchemaOnRead {
        SchemaOnRead {
            query: InternalSchema {
                version: None,
                fields: Vec::new(),
            },
            commits: BTreeMap::new(),
            id: crate::cache::hash_hex(reason.as_bytes()),
            history: Err(reason),
        }
    }

    /// The schema the files of `instant` were written in; `None` where none is known (their
    /// columns are then matched by name, as Java matches them against an empty schema).
    pub fn file_schema(&self, instant: &str) -> Result<Option<&InternalSchema>, String> {
        if let Some(c) = self.commits.get(instant) {
            return c.as_deref().map(Some).map_err(Clone::clone);
        }
        let Ok(version) = instant.parse::<i64>() else {
            return Ok(None);
        };
        match &self.history {
            Ok(h) => Ok(search(h, version)),
            Err(e) => Err(e.clone()),
        }
    }

    /// How the columns of a file written at `instant` are served in the view: a schema that
    /// cannot be read is corrupt input (`EIO`), a change hudifs does not serve a refusal
    /// (`EOPNOTSUPP`).
    pub fn columns(&self, instant: &str) -> crate::error::Result<ColumnMap> {
        match self.file_schema(instant).map_err(MergeError::corrupt)? {
            None => Ok(ColumnMap::default()),
            Some(file) => column_map(file, &self.query).map_err(MergeError::unsupported),
        }
    }
}

/// How a file's top-level columns are served in a view: renamed, or not served.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColumnMap {
    /// File column name → the view's name for it; `None`: not a column of the view.
    changes: Vec<(String, Option<String>)>,
}

/// What a file column the view does not serve is called while a merge carries it (no view
/// column has such a name; the view's schema leaves it out of what is written).
const NOT_SERVED: &str = "\u{0}hudifs-not-served:";

impl ColumnMap {
    pub fn is_identity(&self) -> bool {
        self.changes.is_empty()
    }

    fn renamed(&self, name: &str) -> Option<String> {
        self.changes
            .iter()
            .find(|(from, _)| from == name)
            .map(|(from, to)| match to {
                Some(to) => to.clone(),
                None => format!("{NOT_SERVED}{from}"),
            })
    }

    /// `schema` with the view's names (same columns, same order).
    pub fn apply_schema(&self, schema: &SchemaRef) -> SchemaRef {
        if self.is_identity() {
            return schema.clone();
        }
        Arc::new(Schema::new_with_metadata(
            self.apply_fields(schema.fields()),
            schema.metadata().clone(),
        ))
    }

    /// `fields` (a file's top-level columns, or a CDC log image's) with the view's names.
    pub fn apply_fields(&self, fields: &Fields) -> Fields {
        fields
            .iter()
            .map(|f| match self.renamed(f.name()) {
                Some(n) => f.as_ref().clone().with_name(n).with_nullable(true),
                None => f.as_ref().clone(),
            })
            .collect()
    }

    /// A CDC log record batch with its `before` / `after` images' fields under the view's
    /// names (the images are the write's record schema without meta fields).
    pub fn apply_images(&self, batch: RecordBatch) -> Result<RecordBatch, String> {
        if self.is_identity() {
            return Ok(batch);
        }
        let schema = batch.schema();
        let mut fields = Vec::with_capacity(schema.fields().len());
        let mut columns = Vec::with_capacity(schema.fields().len());
        for (f, c) in schema.fields().iter().zip(batch.columns()) {
            match (f.name().as_str(), c.as_any().downcast_ref::<StructArray>()) {
                ("before" | "after", Some(st)) => {
                    let renamed = self.apply_fields(st.fields());
                    let st = StructArray::try_new(
                        renamed.clone(),
                        st.columns().to_vec(),
                        st.nulls().cloned(),
                    )
                    .map_err(|e| e.to_string())?;
                    fields.push(Field::new(f.name(), DataType::Struct(renamed), true));
                    columns.push(Arc::new(st) as ArrayRef);
                }
                _ => {
                    fields.push(f.as_ref().clone());
                    columns.push(c.clone());
                }
            }
        }
        RecordBatch::try_new_with_options(
            Arc::new(Schema::new(fields)),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )
        .map_err(|e| e.to_string())
    }

    /// `batch` with the view's names.
    pub fn apply(&self, batch: RecordBatch) -> Result<RecordBatch, String> {
        if self.is_identity() {
            return Ok(batch);
        }
        let schema = self.apply_schema(&batch.schema());
        let rows = batch.num_rows();
        RecordBatch::try_new_with_options(
            schema,
            batch.columns().to_vec(),
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(|e| e.to_string())
    }
}

/// Hudi's meta columns are never renamed.
fn is_meta(name: &str) -> bool {
    name.starts_with("_hoodie_")
}

/// The column map of a file written in `file` read in `query` (`InternalSchemaMerger`, top
/// level; nested fields must keep their names and ids).
pub fn column_map(file: &InternalSchema, query: &InternalSchema) -> Result<ColumnMap, String> {
    let mut changes = Vec::new();
    let mut served = Vec::new();
    for q in query.fields.iter().filter(|q| !is_meta(&q.name)) {
        if let Some(f) = file.by_id(q.id) {
            check_type(&f.ty, &q.ty, &q.name)?;
            if f.name != q.name {
                changes.push((f.name.clone(), Some(q.name.clone())));
            }
            served.push(f.id);
        }
    }
    for f in file.fields.iter().filter(|f| !is_meta(&f.name)) {
        if !served.contains(&f.id) {
            changes.push((f.name.clone(), None));
        }
    }
    Ok(ColumnMap { changes })
}

fn decimal(t: &str) -> Option<(u32, u32)> {
    let inner = t.strip_prefix("decimal(")?.strip_suffix(')')?;
    let (p, s) = inner.split_once(',')?;
    Some((p.trim().parse().ok()?, s.trim().parse().ok()?))
}

/// Whether a value written as `from` is served as `to`: the same type, or a promotion both
/// Hudi (`SchemaChangeUtils.isTypeUpdateAllow`) and hudifs's writer make (int → long, float,
/// double; long → float, double; float → double; a decimal no narrower).
fn promotes(from: &str, to: &str) -> bool {
    if from == to {
        return true;
    }
    match (from, to) {
        ("int", "long" | "float" | "double") => true,
        ("long", "float" | "double") => true,
        ("float", "double") => true,
        _ => match (decimal(from), decimal(to)) {
            (Some((p1, s1)), Some((p2, s2))) => s2 >= s1 && p2 - s2.min(p2) >= p1 - s1.min(p1),
            _ => false,
        },
    }
}

fn check_type(file: &InternalType, query: &InternalType, path: &str) -> Result<(), String> {
    use InternalType::*;
    match (file, query) {
        (Primitive(a), Primitive(b)) => {
            if promotes(a, b) {
                Ok(())
            } else {
                Err(format!(
                    "column {path} changed type from {a} to {b} (schema-on-read): hudifs serves \
                     only the changes int → long/float/double, long → float/double, float → \
                     double and a wider decimal"
                ))
            }
        }
        (Record(fs), Record(qs)) => {
            for q in qs {
                let p = format!("{path}.{}", q.name);
                match fs.iter().find(|f| f.id == q.id) {
                    Some(f) if f.name != q.name => {
                        return Err(format!(
                            "nested field {path}.{} was renamed to {} (schema-on-read): renames \
                             inside a struct are not served",
                            f.name, q.name
                        ))
                    }
                    Some(f) => check_type(&f.ty, &q.ty, &p)?,
                    None if fs.iter().any(|f| f.name.eq_ignore_ascii_case(&q.name)) => {
                        return Err(format!(
                            "nested field {p} was dropped and added again (schema-on-read): \
                             not served inside a struct"
                        ))
                    }
                    None => {}
                }
            }
            Ok(())
        }
        (Array { element: a, .. }, Array { element: b, .. }) => {
            check_type(a, b, &format!("{path}.element"))
        }
        (
            Map {
                key: ka, value: va, ..
            },
            Map {
                key: kb, value: vb, ..
            },
        ) => {
            check_type(ka, kb, &format!("{path}.key"))?;
            check_type(va, vb, &format!("{path}.value"))
        }
        _ => Err(format!(
            "column {path} changed its kind of type (schema-on-read): not served"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(version: i64, fields: &[(i64, &str, &str)]) -> String {
        let fields: Vec<Value> = fields
            .iter()
            .map(|(id, name, t)| serde_json::json!({"id": id, "name": name, "optional": true, "type": t}))
            .collect();
        serde_json::json!({"max_column_id": 9, "version-id": version, "type": "record", "fields": fields})
            .to_string()
    }

    #[test]
    fn a_renamed_column_is_served_under_its_new_name_and_a_re_added_one_is_not_the_old() {
        let old = InternalSchema::parse(&schema(
            1,
            &[(0, "id", "long"), (1, "fare", "int"), (2, "tip", "long")],
        ))
        .unwrap();
        let new = InternalSchema::parse(&schema(
            3,
            &[(0, "id", "long"), (1, "price", "long"), (3, "tip", "long")],
        ))
        .unwrap();
        let m = column_map(&old, &new).unwrap();
        assert_eq!(
            m.changes,
            vec![
                ("fare".to_string(), Some("price".to_string())),
                ("tip".to_string(), None)
            ]
        );
        let s = Arc::new(Schema::new(vec![
            Field::new("id", arrow_schema::DataType::Int64, false),
            Field::new("fare", arrow_schema::DataType::Int32, true),
            Field::new("tip", arrow_schema::DataType::Int64, true),
        ]));
        let names: Vec<String> = m
            .apply_schema(&s)
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect();
        assert_eq!(names[..2], ["id".to_string(), "price".to_string()]);
        assert!(names[2].starts_with(NOT_SERVED));
        assert!(column_map(&new, &new).unwrap().is_identity());
    }

    #[test]
    fn a_type_change_hudi_allows_but_hudifs_does_not_convert_is_refused() {
        let old = InternalSchema::parse(&schema(1, &[(1, "fare", "int")])).unwrap();
        let new = InternalSchema::parse(&schema(2, &[(1, "fare", "string")])).unwrap();
        let e = column_map(&old, &new).unwrap_err();
        assert!(e.contains("fare changed type from int to string"), "{e}");
        let d1 = InternalSchema::parse(&schema(1, &[(1, "d", "decimal(10, 2)")])).unwrap();
        let d2 = InternalSchema::parse(&schema(2, &[(1, "d", "decimal(12,4)")])).unwrap();
        assert!(column_map(&d1, &d2).is_ok());
        assert!(column_map(&d2, &d1).is_err());
    }

    #[test]
    fn history_versions_are_found_at_or_before_an_instant() {
        let text = format!(
            "{{\"schemas\":[{},{}]}}",
            schema(20, &[(1, "b", "int")]),
            schema(10, &[(1, "a", "int")])
        );
        let h = parse_history(&text).unwrap();
        assert!(search(&h, 9).is_none());
        assert_eq!(search(&h, 15).unwrap().fields[0].name, "a");
        assert_eq!(search(&h, 20).unwrap().fields[0].name, "b");
        assert!(parse_history("{\"schemas\": [{\"type\": \"record\"}]}").is_err());
        assert!(parse_history("{").is_err());
        assert!(parse_history("{}").is_err());
        assert_eq!(
            schema_file_instant("20260101000000000_20260101000001000.schemacommit"),
            Some(("20260101000000000", true))
        );
        assert_eq!(
            schema_file_instant("20260101000000000.schemacommit.inflight"),
            Some(("20260101000000000", false))
        );
        assert_eq!(schema_file_instant("x.schemacommit"), None);
    }

    #[test]
    fn a_damaged_history_is_an_error_never_a_panic() {
        let nested = serde_json::json!({"schemas": [{"version-id": 5, "type": "record", "fields": [
            {"id": 1, "name": "m", "optional": true, "type": {"type": "map", "key-id": 2,
             "key": "string", "value-id": 3, "value": {"type": "array", "element-id": 4,
             "element": "decimal(10, 2)", "element_optional": true}, "value_optional": true}}]}]})
        .to_string();
        assert!(parse_history(&nested).is_ok());
        for end in 0..nested.len() {
            if nested.is_char_boundary(end) {
                assert!(parse_history(&nested[..end]).is_err(), "{}", &nested[..end]);
            }
        }
        let bad_types = [
            r#"{"schemas":[{"version-id":1,"type":"record","fields":[{"id":1,"name":"a","type":"decimal(x, 2)"}]}]}"#,
            r#"{"schemas":[{"version-id":1,"type":"record","fields":[{"id":"z","name":"a","type":"int"}]}]}"#,
            r#"{"schemas":[{"version-id":1,"type":"record","fields":[{"id":1,"name":"a","type":{"type":"set"}}]}]}"#,
            r#"{"schemas":[{"type":"record","fields":[]}]}"#,
            r#"{"schemas":{}}"#,
        ];
        for b in bad_types {
            assert!(parse_history(b).is_err(), "{b}");
        }
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(parse_history(&deep).is_err());
    }
}
