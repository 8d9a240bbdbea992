//! A Parquet schema as an Iceberg schema (the spec's JSON form), with field ids that keep their
//! meaning across the table's history: a column is known by its path of names, and a path gets
//! an id the first time a snapshot's schema holds it. The same walk gives each element of a
//! file's footer its id ([`element_ids`]), so the ids in the files and in the metadata agree.

use std::collections::HashMap;

use parquet::basic::{ConvertedType, LogicalType, Repetition, TimeUnit, Type as PhysicalType};
use parquet::schema::types::Type;
use serde_json::{json, Value};

/// The field ids handed out so far, by path of names (a list's element is `<path>.element`, a
/// map's key and value `<path>.key` and `<path>.value`).
#[derive(Debug, Clone, Default)]
pub struct FieldIds {
    ids: HashMap<String, i32>,
    pub last: i32,
}

impl FieldIds {
    fn get(&mut self, path: &str, assign: bool) -> Option<i32> {
        if let Some(id) = self.ids.get(path) {
            return Some(*id);
        }
        if !assign {
            return None;
        }
        self.last += 1;
        self.ids.insert(path.to_string(), self.last);
        Some(self.last)
    }

    /// The id of a top-level column.
    pub fn column(&self, name: &str) -> Option<i32> {
        self.ids.get(name).copied()
    }

    /// Every id handed out, by path, in the order of the paths.
    pub fn sorted(&self) -> Vec<(&str, i32)> {
        let mut out: Vec<(&str, i32)> = self.ids.iter().map(|(p, i)| (p.as_str(), *i)).collect();
        out.sort_unstable();
        out
    }
}

/// What a top-level column's bounds are written as (`lower_bounds`/`upper_bounds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundKind {
    Int,
    Long,
    String,
}

/// An Iceberg schema made from a Parquet schema.
#[derive(Debug, Clone, PartialEq)]
pub struct IcebergSchema {
    /// The `fields` of the schema's JSON.
    pub fields: Value,
    /// The name mapping (`schema.name-mapping.default`) of these fields.
    pub mapping: Value,
    /// Top-level primitive columns whose bounds can be written: (id, kind).
    pub bounded: HashMap<String, (i32, BoundKind)>,
}

/// The Iceberg schema of `root` (a Parquet file's schema), handing out ids to new paths.
pub fn iceberg_schema(root: &Type, ids: &mut FieldIds) -> Result<IcebergSchema, String> {
    let mut w = Walk {
        ids,
        assign: true,
        order: Vec::new(),
    };
    w.order.push(None);
    let mut fields = Vec::new();
    let mut mapping = Vec::new();
    let mut bounded = HashMap::new();
    for f in root.get_fields() {
        let (v, m) = w.field(f, f.name())?;
        if let (Some(id), Some(kind)) = (v["id"].as_i64(), bound_kind(f)) {
            bounded.insert(f.name().to_string(), (id as i32, kind));
        }
        fields.push(v);
        mapping.push(m);
    }
    Ok(IcebergSchema {
        fields: Value::Array(fields),
        mapping: Value::Array(mapping),
        bounded,
    })
}

/// The field id of each element of a file's footer schema `root` (depth first, the root
/// first), from the ids handed out so far; a path without one (a column no snapshot's schema
/// holds) gets none. `None` when the schema has a type without an Iceberg counterpart.
pub fn element_ids(root: &Type, ids: &FieldIds) -> Result<Vec<Option<i32>>, String> {
    let mut copy = ids.clone();
    let mut w = Walk {
        ids: &mut copy,
        assign: false,
        order: vec![None],
    };
    for f in root.get_fields() {
        w.field(f, f.name())?;
    }
    Ok(w.order)
}

struct Walk<'a> {
    ids: &'a mut FieldIds,
    assign: bool,
    /// Each element's id, in the footer's order.
    order: Vec<Option<i32>>,
}

impl Walk<'_> {
    /// A named field: its JSON and its name-mapping entry. Pushes its id, then its children's.
    fn field(&mut self, t: &Type, path: &str) -> Result<(Value, Value), String> {
        let id = self.ids.get(path, self.assign);
        self.order.push(id);
        let info = t.get_basic_info();
        if info.has_repetition() && info.repetition() == Repetition::REPEATED {
            return Err(format!("column {path}: a repeated field outside a list"));
        }
        let (ty, nested) = self.type_of(t, path)?;
        let required = info.has_repetition() && info.repetition() == Repetition::REQUIRED;
        let mut m = json!({"names": [t.name()]});
        if let Some(id) = id {
            m["field-id"] = json!(id);
        }
        if !nested.is_empty() {
            m["fields"] = Value::Array(nested);
        }
        Ok((
            json!({"id": id.unwrap_or(0), "name": t.name(), "required": required, "type": ty}),
            m,
        ))
    }

    /// The Iceberg type of node `t` (whose own id is pushed already), and the name mapping of
    /// what it nests.
    fn type_of(&mut self, t: &Type, path: &str) -> Result<(Value, Vec<Value>), String> {
        if t.is_primitive() {
            return Ok((
                Value::String(primitive(t).map_err(|e| format!("column {path}: {e}"))?),
                Vec::new(),
            ));
        }
        let info = t.get_basic_info();
        let logical = info.logical_type_ref();
        let converted = info.converted_type();
        if matches!(logical, Some(LogicalType::List)) || converted == ConvertedType::LIST {
            return self.list(t, path);
        }
        if matches!(logical, Some(LogicalType::Map))
            || matches!(converted, ConvertedType::MAP | ConvertedType::MAP_KEY_VALUE)
        {
            return self.map(t, path);
        }
        let mut fields = Vec::new();
        let mut mapping = Vec::new();
        for c in t.get_fields() {
            let (v, m) = self.field(c, &format!("{path}.{}", c.name()))?;
            fields.push(v);
            mapping.push(m);
        }
        Ok((json!({"type": "struct", "fields": fields}), mapping))
    }

    /// A `LIST` group: three levels (`<list> repeated group list { <element> }`) or the two of
    /// older writers (the repeated node is the element), told apart as Parquet's compatibility
    /// rules tell them.
    fn list(&mut self, t: &Type, path: &str) -> Result<(Value, Vec<Value>), String> {
        let [r] = t.get_fields() else {
            return Err(format!(
                "column {path}: a list group without one repeated child"
            ));
        };
        let epath = format!("{path}.element");
        let two_level = r.is_primitive()
            || r.get_fields().len() != 1
            || r.name() == "array"
            || r.name() == format!("{}_tuple", t.name());
        let (id, required, ty, nested) = if two_level {
            let id = self.ids.get(&epath, self.assign);
            self.order.push(id);
            let (ty, nested) = self.type_of(r, &epath)?;
            (id, true, ty, nested)
        } else {
            self.order.push(None);
            let e = &r.get_fields()[0];
            let id = self.ids.get(&epath, self.assign);
            self.order.push(id);
            let info = e.get_basic_info();
            if info.has_repetition() && info.repetition() == Repetition::REPEATED {
                return Err(format!("column {path}: a repeated list element"));
            }
            let required = info.has_repetition() && info.repetition() == Repetition::REQUIRED;
            let (ty, nested) = self.type_of(e, &epath)?;
            (id, required, ty, nested)
        };
        let mut m = json!({"names": ["element"]});
        if let Some(id) = id {
            m["field-id"] = json!(id);
        }
        if !nested.is_empty() {
            m["fields"] = Value::Array(nested);
        }
        Ok((
            json!({"type": "list", "element-id": id.unwrap_or(0), "element": ty,
                   "element-required": required}),
            vec![m],
        ))
    }

    /// A `MAP` group: `repeated group key_value { key; value }`.
    fn map(&mut self, t: &Type, path: &str) -> Result<(Value, Vec<Value>), String> {
        let bad = || format!("column {path}: a map group not of a repeated key and value");
        let [kv] = t.get_fields() else {
            return Err(bad());
        };
        if kv.is_primitive() {
            return Err(bad());
        }
        let [k, v] = kv.get_fields() else {
            return Err(bad());
        };
        self.order.push(None);
        let mut part = |node: &Type, name: &str| -> Result<_, String> {
            let p = format!("{path}.{name}");
            let id = self.ids.get(&p, self.assign);
            self.order.push(id);
            let (ty, nested) = self.type_of(node, &p)?;
            let info = node.get_basic_info();
            let required = info.has_repetition() && info.repetition() == Repetition::REQUIRED;
            let mut m = json!({"names": [node.name()]});
            if let Some(id) = id {
                m["field-id"] = json!(id);
            }
            if !nested.is_empty() {
                m["fields"] = Value::Array(nested);
            }
            Ok((id.unwrap_or(0), required, ty, m))
        };
        let (kid, _, kty, km) = part(k, "key")?;
        let (vid, vreq, vty, vm) = part(v, "value")?;
        Ok((
            json!({"type": "map", "key-id": kid, "key": kty, "value-id": vid, "value": vty,
                   "value-required": vreq}),
            vec![km, vm],
        ))
    }
}

/// The Iceberg type of a primitive Parquet node.
fn primitive(t: &Type) -> Result<String, String> {
    let info = t.get_basic_info();
    let physical = t.get_physical_type();
    let decimal = |p: i32, s: i32| format!("decimal({p}, {s})");
    if let Some(l) = info.logical_type_ref() {
        return Ok(match l {
            LogicalType::String | LogicalType::Enum | LogicalType::Json => "string".into(),
            LogicalType::Uuid => "uuid".into(),
            LogicalType::Date => "date".into(),
            LogicalType::Decimal { scale, precision } => decimal(*precision, *scale),
            LogicalType::Integer {
                bit_width,
                is_signed: true,
            } => {
                if *bit_width <= 32 {
                    "int".into()
                } else {
                    "long".into()
                }
            }
            LogicalType::Timestamp {
                is_adjusted_to_u_t_c,
                unit: TimeUnit::MILLIS | TimeUnit::MICROS,
            } => {
                if *is_adjusted_to_u_t_c {
                    "timestamptz".into()
                } else {
                    "timestamp".into()
                }
            }
            LogicalType::Time {
                unit: TimeUnit::MICROS,
                ..
            } => "time".into(),
            other => return Err(format!("{other:?} has no Iceberg type")),
        });
    }
    Ok(match info.converted_type() {
        ConvertedType::UTF8 | ConvertedType::ENUM | ConvertedType::JSON => "string".into(),
        ConvertedType::DATE => "date".into(),
        ConvertedType::DECIMAL => decimal(t.get_precision(), t.get_scale()),
        ConvertedType::INT_8 | ConvertedType::INT_16 | ConvertedType::INT_32 => "int".into(),
        ConvertedType::INT_64 => "long".into(),
        ConvertedType::TIMESTAMP_MILLIS | ConvertedType::TIMESTAMP_MICROS => "timestamptz".into(),
        ConvertedType::TIME_MICROS => "time".into(),
        ConvertedType::NONE => match physical {
            PhysicalType::BOOLEAN => "boolean".into(),
            PhysicalType::INT32 => "int".into(),
            PhysicalType::INT64 => "long".into(),
            PhysicalType::FLOAT => "float".into(),
            PhysicalType::DOUBLE => "double".into(),
            PhysicalType::BYTE_ARRAY => "binary".into(),
            PhysicalType::FIXED_LEN_BYTE_ARRAY => match t {
                Type::PrimitiveType { type_length, .. } => format!("fixed[{type_length}]"),
                Type::GroupType { .. } => return Err("a group is not a fixed".into()),
            },
            PhysicalType::INT96 => return Err("INT96 timestamps have no Iceberg type".into()),
        },
        other => return Err(format!("{other} has no Iceberg type")),
    })
}

/// The primitive types of a schema's fields (its JSON `fields`), nested ones included, by id.
pub fn leaf_types(fields: &Value) -> HashMap<i64, String> {
    fn ty(id: i64, t: &Value, out: &mut HashMap<i64, String>) {
        match t {
            Value::String(s) => {
                out.insert(id, s.clone());
            }
            Value::Object(o) => match o.get("type").and_then(Value::as_str) {
                Some("struct") => walk(&t["fields"], out),
                Some("list") => ty(t["element-id"].as_i64().unwrap_or(0), &t["element"], out),
                Some("map") => {
                    ty(t["key-id"].as_i64().unwrap_or(0), &t["key"], out);
                    ty(t["value-id"].as_i64().unwrap_or(0), &t["value"], out);
                }
                _ => {}
            },
            _ => {}
        }
    }
    fn walk(fields: &Value, out: &mut HashMap<i64, String>) {
        for f in fields.as_array().into_iter().flatten() {
            ty(f["id"].as_i64().unwrap_or(0), &f["type"], out);
        }
    }
    let mut out = HashMap::new();
    walk(fields, &mut out);
    out
}

/// Whether a reader of a column of type `to` reads a file's column of type `from`: the same
/// type, or one of Iceberg's type promotions (int to long, float to double, a decimal to a
/// wider one of the same scale).
pub fn reads_as(from: &str, to: &str) -> bool {
    let decimal = |s: &str| -> Option<(u32, u32)> {
        let (p, s) = s
            .strip_prefix("decimal(")?
            .strip_suffix(')')?
            .split_once(',')?;
        Some((p.trim().parse().ok()?, s.trim().parse().ok()?))
    };
    from == to
        || matches!((from, to), ("int", "long") | ("float", "double"))
        || matches!((decimal(from), decimal(to)), (Some((p, s)), Some((q, t))) if s == t && p <= q)
}

/// The bounds a top-level column can have written: those of plain integers and UTF-8
/// strings, the ones the file statistics give exactly (`delta::stats`).
fn bound_kind(t: &Type) -> Option<BoundKind> {
    if !t.is_primitive() {
        return None;
    }
    let info = t.get_basic_info();
    match (
        info.logical_type_ref(),
        info.converted_type(),
        t.get_physical_type(),
    ) {
        (None, ConvertedType::NONE, PhysicalType::INT32) => Some(BoundKind::Int),
        (None, ConvertedType::NONE, PhysicalType::INT64) => Some(BoundKind::Long),
        (
            Some(LogicalType::Integer {
                is_signed: true, ..
            }),
            _,
            PhysicalType::INT32,
        ) => Some(BoundKind::Int),
        (
            Some(LogicalType::Integer {
                is_signed: true, ..
            }),
            _,
            PhysicalType::INT64,
        ) => Some(BoundKind::Long),
        (Some(LogicalType::String), _, PhysicalType::BYTE_ARRAY)
        | (None, ConvertedType::UTF8, PhysicalType::BYTE_ARRAY) => Some(BoundKind::String),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::schema::parser::parse_message_type;

    #[test]
    fn ids_follow_names_across_schemas_and_reach_every_element() {
        let a = parse_message_type(
            "message m { required int64 id; optional binary name (UTF8);
               optional group tags (LIST) { repeated group list { optional binary element (UTF8); } }
               optional group props (MAP) { repeated group key_value {
                 required binary key (UTF8); optional int32 value; } }
               optional group loc { optional double lat; optional double lon; } }",
        )
        .unwrap();
        let mut ids = FieldIds::default();
        let s = iceberg_schema(&a, &mut ids).unwrap();
        let f = &s.fields;
        assert_eq!(f[0]["id"], 1);
        assert_eq!(f[0]["type"], "long");
        assert_eq!(f[0]["required"], true);
        assert_eq!(f[1]["type"], "string");
        assert_eq!(f[2]["type"]["type"], "list");
        assert_eq!(f[2]["type"]["element-id"], 4);
        assert_eq!(f[3]["type"]["key-id"], 6);
        assert_eq!(f[3]["type"]["value-id"], 7);
        assert_eq!(f[4]["type"]["fields"][1]["id"], 10);
        assert_eq!(ids.last, 10);
        assert_eq!(s.bounded["id"], (1, BoundKind::Long));
        assert_eq!(s.bounded["name"], (2, BoundKind::String));
        // Footer elements: root, id, name, tags, list, element, props, key_value, key, value,
        // loc, lat, lon.
        assert_eq!(
            element_ids(&a, &ids).unwrap(),
            vec![
                None,
                Some(1),
                Some(2),
                Some(3),
                None,
                Some(4),
                Some(5),
                None,
                Some(6),
                Some(7),
                Some(8),
                Some(9),
                Some(10)
            ]
        );
        // A later schema: a column dropped, one added; old names keep their ids.
        let b = parse_message_type(
            "message m { optional binary name (UTF8); required int64 id; optional int64 added; }",
        )
        .unwrap();
        let s = iceberg_schema(&b, &mut ids).unwrap();
        assert_eq!(s.fields[0]["id"], 2);
        assert_eq!(s.fields[1]["id"], 1);
        assert_eq!(s.fields[2]["id"], 11);
        assert_eq!(s.mapping[2]["field-id"], 11);
        // A file with a column no schema holds: no id for it, none handed out.
        let c =
            parse_message_type("message m { required int64 id; optional int32 other; }").unwrap();
        assert_eq!(element_ids(&c, &ids).unwrap(), vec![None, Some(1), None]);
        assert_eq!(ids.last, 11);
    }

    #[test]
    fn leaf_types_and_promotions() {
        let a = parse_message_type(
            "message m { required int32 a; optional group l (LIST) { repeated group list {
               optional group element { optional float f; } } } }",
        )
        .unwrap();
        let s = iceberg_schema(&a, &mut FieldIds::default()).unwrap();
        let t = leaf_types(&s.fields);
        assert_eq!(t[&1], "int");
        assert_eq!(t[&4], "float");
        assert_eq!(t.len(), 2);
        assert!(reads_as("int", "long") && reads_as("float", "double"));
        assert!(reads_as("decimal(10, 2)", "decimal(12, 2)"));
        assert!(!reads_as("decimal(10, 2)", "decimal(12, 3)"));
        assert!(!reads_as("long", "string") && !reads_as("long", "int"));
    }

    #[test]
    fn two_level_lists_and_types_without_a_counterpart() {
        let a = parse_message_type(
            "message m { optional group xs (LIST) { repeated int32 array; }
               optional int64 ts (TIMESTAMP(MICROS,false)); optional int32 d (DATE);
               optional fixed_len_byte_array(5) dec (DECIMAL(10,2)); }",
        )
        .unwrap();
        let mut ids = FieldIds::default();
        let s = iceberg_schema(&a, &mut ids).unwrap();
        assert_eq!(s.fields[0]["type"]["element"], "int");
        assert_eq!(s.fields[0]["type"]["element-required"], true);
        assert_eq!(s.fields[1]["type"], "timestamp");
        assert_eq!(s.fields[2]["type"], "date");
        assert_eq!(s.fields[3]["type"], "decimal(10, 2)");
        assert_eq!(element_ids(&a, &ids).unwrap().len(), 6);
        for bad in [
            "message m { optional int32 u (INTEGER(32,false)); }",
            "message m { optional int96 t; }",
            "message m { repeated int32 r; }",
        ] {
            let t = parse_message_type(bad).unwrap();
            assert!(
                iceberg_schema(&t, &mut FieldIds::default()).is_err(),
                "{bad}"
            );
        }
    }
}
