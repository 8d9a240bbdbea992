//! A Parquet file's Arrow schema as a Delta Lake schema (`metaData.schemaString`, the Delta
//! protocol's "Schema Serialization Format"), and the reader features its types need.

use arrow_schema::{DataType, Field, Schema, TimeUnit};
use serde_json::{json, Value};

/// A Delta schema: its serialized string, and whether it holds a timestamp without a time zone
/// (the `timestampNtz` reader feature).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaSchema {
    pub string: String,
    pub timestamp_ntz: bool,
}

/// The Delta schema of `schema`, or why a type has no Delta counterpart.
pub fn delta_schema(schema: &Schema) -> Result<DeltaSchema, String> {
    let mut ntz = false;
    let fields: Vec<Value> = schema
        .fields()
        .iter()
        .map(|f| field(f, &mut ntz))
        .collect::<Result<_, _>>()?;
    let v = json!({"type": "struct", "fields": fields});
    Ok(DeltaSchema {
        string: v.to_string(),
        timestamp_ntz: ntz,
    })
}

fn field(f: &Field, ntz: &mut bool) -> Result<Value, String> {
    Ok(json!({
        "name": f.name(),
        "type": data_type(f.data_type(), ntz).map_err(|e| format!("column {}: {e}", f.name()))?,
        "nullable": f.is_nullable(),
        "metadata": {},
    }))
}

fn data_type(t: &DataType, ntz: &mut bool) -> Result<Value, String> {
    let prim = |s: &str| Ok(Value::String(s.to_string()));
    match t {
        DataType::Boolean => prim("boolean"),
        DataType::Int8 => prim("byte"),
        DataType::Int16 => prim("short"),
        DataType::Int32 => prim("integer"),
        DataType::Int64 => prim("long"),
        DataType::Float32 => prim("float"),
        DataType::Float64 => prim("double"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => prim("string"),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => prim("binary"),
        DataType::Date32 => prim("date"),
        // Delta timestamps are microseconds; readers read the Parquet unit they find.
        DataType::Timestamp(
            TimeUnit::Millisecond | TimeUnit::Microsecond | TimeUnit::Nanosecond,
            tz,
        ) => {
            if tz.is_some() {
                prim("timestamp")
            } else {
                *ntz = true;
                prim("timestamp_ntz")
            }
        }
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) if *p <= 38 && *s >= 0 => {
            prim(&format!("decimal({p},{s})"))
        }
        DataType::List(e) | DataType::LargeList(e) | DataType::FixedSizeList(e, _) => Ok(json!({
            "type": "array",
            "elementType": data_type(e.data_type(), ntz)?,
            "containsNull": e.is_nullable(),
        })),
        DataType::Struct(fields) => {
            let fields: Vec<Value> = fields
                .iter()
                .map(|f| field(f, ntz))
                .collect::<Result<_, _>>()?;
            Ok(json!({"type": "struct", "fields": fields}))
        }
        DataType::Map(entries, _) => {
            let DataType::Struct(kv) = entries.data_type() else {
                return Err(format!("a map whose entries are {}", entries.data_type()));
            };
            if kv.len() != 2 {
                return Err("a map whose entries are not key and value".into());
            }
            Ok(json!({
                "type": "map",
                "keyType": data_type(kv[0].data_type(), ntz)?,
                "valueType": data_type(kv[1].data_type(), ntz)?,
                "valueContainsNull": kv[1].is_nullable(),
            }))
        }
        other => Err(format!("type {other} has no Delta Lake counterpart")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn types_map_as_the_delta_protocol_names_them() {
        let schema = Schema::new(vec![
            Field::new("_hoodie_commit_time", DataType::Utf8, true),
            Field::new("id", DataType::Int32, false),
            Field::new("price", DataType::Decimal128(10, 2), true),
            Field::new(
                "ts",
                DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
                true,
            ),
            Field::new(
                "tags",
                DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))),
                true,
            ),
        ]);
        let d = delta_schema(&schema).unwrap();
        assert!(!d.timestamp_ntz);
        let v: Value = serde_json::from_str(&d.string).unwrap();
        let types: Vec<&Value> = v["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| &f["type"])
            .collect();
        assert_eq!(types[0], "string");
        assert_eq!(types[1], "integer");
        assert_eq!(types[2], "decimal(10,2)");
        assert_eq!(types[3], "timestamp");
        assert_eq!(types[4]["type"], "array");
        assert_eq!(types[4]["elementType"], "string");
        assert_eq!(v["fields"][1]["nullable"], false);
    }

    #[test]
    fn a_timestamp_without_zone_needs_the_ntz_feature_and_odd_types_are_refused() {
        let s = Schema::new(vec![Field::new(
            "t",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            true,
        )]);
        assert!(delta_schema(&s).unwrap().timestamp_ntz);
        let s = Schema::new(vec![Field::new("u", DataType::UInt64, true)]);
        let e = delta_schema(&s).unwrap_err();
        assert!(e.contains("column u"), "{e}");
    }
}
