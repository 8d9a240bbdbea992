//! Which log records are deletes, as Hudi 1.x's file group reader decides it
//! (`RecordContext.isDeleteRecord`, with what `DeleteContext` read from the table's merge
//! properties; SEMANTICS.md §10.4). A log data record is a delete when:
//!
//! - its `_hoodie_is_deleted` is true (`isBuiltInDeleteRecord`);
//! - its `_hoodie_operation` is `D` or `-U` (`isDeleteHoodieOperation`: Flink's changelog
//!   tables keep the operation of each record; `-U` is an update's before image);
//! - the table declares a custom delete marker (`hoodie.payload.delete.field` and
//!   `hoodie.payload.delete.marker` among its merge properties, as Hudi 1.1's upgrade writes
//!   them for `AWSDmsAvroPayload` tables) and the record's value of that field, printed as Java
//!   prints it (`toString`), equals the marker (`isCustomDeleteRecord`).
//!
//! A record without the field is no delete by that rule, as in Java. Base-file records are never
//! checked (Java reads a base record as a live record). A delete that wins the merge drops the
//! key (`merger.rs`).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef, BooleanArray, RecordBatch};
use arrow_schema::DataType;

use crate::config::{DeleteMarker, MergeConfig};
use crate::error::{MergeError, Result};
use crate::order::column_by_path;

/// Per row of a log data batch, whether the record is a delete; `None` when no rule applies to
/// the batch (none of its columns exist).
pub(crate) fn delete_flags(batch: &RecordBatch, cfg: &MergeConfig) -> Result<Option<BooleanArray>> {
    let column = |name: &str| column_by_path(batch.schema().fields(), batch.columns(), name);
    let mut rules: Vec<Vec<bool>> = Vec::new();
    if let Some(c) = column("_hoodie_is_deleted") {
        if let Ok(b) = arrow_cast::cast(&c, &DataType::Boolean) {
            let b = b.as_boolean();
            rules.push((0..b.len()).map(|r| b.is_valid(r) && b.value(r)).collect());
        }
    }
    if let Some(c) = column("_hoodie_operation") {
        rules.push(operation_deletes(&c)?);
    }
    if let Some(m) = &cfg.delete_marker {
        if let Some(c) = column(&m.field) {
            rules.push(marker_deletes(&c, m)?);
        }
    }
    if rules.is_empty() {
        return Ok(None);
    }
    let rows = batch.num_rows();
    Ok(Some(BooleanArray::from(
        (0..rows)
            .map(|r| rules.iter().any(|rule| rule[r]))
            .collect::<Vec<bool>>(),
    )))
}

/// `_hoodie_operation` as Java's `HoodieOperation.fromName` reads it: `I`, `U`, `-U`, `D`; any
/// other value fails the read there, so it is refused here.
fn operation_deletes(c: &ArrayRef) -> Result<Vec<bool>> {
    let s = arrow_cast::cast(c, &DataType::Utf8).map_err(|e| {
        MergeError::unsupported(format!("_hoodie_operation of type {}: {e}", c.data_type()))
    })?;
    let s = s.as_string::<i32>();
    (0..s.len())
        .map(|r| {
            if s.is_null(r) {
                return Ok(false);
            }
            match s.value(r) {
                "I" | "U" => Ok(false),
                "D" | "-U" => Ok(true),
                other => Err(MergeError::unsupported(format!(
                    "_hoodie_operation {other:?} is no operation Hudi knows (I, U, -U, D)"
                ))),
            }
        })
        .collect()
}

/// Whether each value of the custom delete field, as Java's `toString` prints it, equals the
/// marker. Only types whose printing is the same here and in Java are compared: strings,
/// integers, booleans; a marker on another type is refused rather than guessed.
fn marker_deletes(c: &ArrayRef, m: &DeleteMarker) -> Result<Vec<bool>> {
    fn ints<T: arrow_array::ArrowPrimitiveType>(c: &ArrayRef, m: &DeleteMarker) -> Vec<bool>
    where
        T::Native: std::fmt::Display,
    {
        let a = c.as_primitive::<T>();
        (0..a.len())
            .map(|r| a.is_valid(r) && m.matches(&a.value(r).to_string()))
            .collect()
    }
    let field = &m.field;
    Ok(match c.data_type() {
        DataType::Int8 => ints::<Int8Type>(c, m),
        DataType::Int16 => ints::<Int16Type>(c, m),
        DataType::Int32 => ints::<Int32Type>(c, m),
        DataType::Int64 => ints::<Int64Type>(c, m),
        DataType::UInt8 => ints::<UInt8Type>(c, m),
        DataType::UInt16 => ints::<UInt16Type>(c, m),
        DataType::UInt32 => ints::<UInt32Type>(c, m),
        DataType::UInt64 => ints::<UInt64Type>(c, m),
        DataType::Boolean => {
            let a = c.as_boolean();
            (0..a.len())
                .map(|r| a.is_valid(r) && m.matches(&a.value(r).to_string()))
                .collect()
        }
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(_, _)
            if arrow_cast::can_cast_types(c.data_type(), &DataType::Utf8) =>
        {
            let s = arrow_cast::cast(c, &DataType::Utf8).map_err(|e| {
                MergeError::unsupported(format!("delete marker field {field}: {e}"))
            })?;
            let s = s.as_string::<i32>();
            (0..s.len())
                .map(|r| s.is_valid(r) && m.matches(s.value(r)))
                .collect()
        }
        other => {
            return Err(MergeError::unsupported(format!(
                "delete marker field {field} is of type {other}: only string, integer and \
                 boolean fields are compared with the marker as Java prints them"
            )))
        }
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use arrow_array::{Float64Array, Int32Array, StringArray};
    use arrow_schema::{Field, Schema};

    use super::*;

    fn cfg(marker: Option<(&str, &str)>) -> MergeConfig {
        let mut p: BTreeMap<String, String> = [("hoodie.table.version", "9")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        if let Some((f, m)) = marker {
            p.insert(
                "hoodie.record.merge.property.hoodie.payload.delete.field".into(),
                f.into(),
            );
            p.insert(
                "hoodie.record.merge.property.hoodie.payload.delete.marker".into(),
                m.into(),
            );
        }
        MergeConfig::from_properties(&p).unwrap()
    }

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        let fields: Vec<Field> = cols
            .iter()
            .map(|(n, c)| Field::new(*n, c.data_type().clone(), true))
            .collect();
        RecordBatch::try_new(
            Arc::new(Schema::new(fields)),
            cols.into_iter().map(|(_, c)| c).collect(),
        )
        .unwrap()
    }

    fn flags(b: &RecordBatch, c: &MergeConfig) -> Option<Vec<bool>> {
        delete_flags(b, c)
            .unwrap()
            .map(|a| (0..a.len()).map(|r| a.value(r)).collect())
    }

    #[test]
    fn each_rule_marks_its_records_and_any_of_them_deletes() {
        let b = batch(vec![
            (
                "Op",
                Arc::new(StringArray::from(vec![
                    Some("D"),
                    Some("U"),
                    None,
                    Some("I"),
                ])) as _,
            ),
            (
                "_hoodie_is_deleted",
                Arc::new(arrow_array::BooleanArray::from(vec![
                    Some(false),
                    Some(true),
                    None,
                    Some(false),
                ])) as _,
            ),
            (
                "_hoodie_operation",
                Arc::new(StringArray::from(vec![
                    Some("I"),
                    Some("U"),
                    Some("-U"),
                    None,
                ])) as _,
            ),
        ]);
        assert_eq!(
            flags(&b, &cfg(Some(("Op", "D")))),
            Some(vec![true, true, true, false])
        );
        assert_eq!(flags(&b, &cfg(None)), Some(vec![false, true, true, false]));
        // A marker on a field the records do not have deletes nothing by that rule.
        assert_eq!(
            flags(&b, &cfg(Some(("gone", "D")))),
            Some(vec![false, true, true, false])
        );
        let plain = batch(vec![("id", Arc::new(Int32Array::from(vec![1, 2])) as _)]);
        assert_eq!(flags(&plain, &cfg(None)), None);
    }

    #[test]
    fn markers_compare_as_java_prints_the_value() {
        let b = batch(vec![
            (
                "n",
                Arc::new(Int32Array::from(vec![Some(7), Some(70), None])) as _,
            ),
            (
                "f",
                Arc::new(Float64Array::from(vec![Some(1.0), None, None])) as _,
            ),
        ]);
        assert_eq!(
            flags(&b, &cfg(Some(("n", "7")))),
            Some(vec![true, false, false])
        );
        // Java prints a double as "1.0", a decimal or a date otherwise than Arrow: refused.
        let e = delete_flags(&b, &cfg(Some(("f", "1.0")))).unwrap_err();
        assert_eq!(e.errno(), libc::EOPNOTSUPP);
        assert!(e.to_string().contains("delete marker field f"), "{e}");
    }

    #[test]
    fn an_unknown_operation_is_refused() {
        let b = batch(vec![(
            "_hoodie_operation",
            Arc::new(StringArray::from(vec!["X"])) as _,
        )]);
        let e = delete_flags(&b, &cfg(None)).unwrap_err();
        assert_eq!(e.errno(), libc::EOPNOTSUPP);
    }
}
