//! The output schema of a merged slice and the conversion of log records to it.
//!
//! The output keeps the base file's schema: its columns, in its order, with its Arrow types
//! (as parquet's Arrow reader gives them) and, where the writer can write them, its exact
//! Parquet types (logical annotations, decimal encodings, list layouts). Schema evolution as
//! Hudi does it: a column that the newest log schema adds is appended; a column the newest log
//! schema promotes (int → long/float/double, long → float/double, float → double,
//! string ↔ bytes, a wider decimal) takes the promoted type. A log-only slice takes the newest
//! log block's schema.

use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, ListArray, MapArray, RecordBatch, StructArray};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef};
use parquet::arrow::ArrowSchemaConverter;
use parquet::basic::Type as PhysicalType;
use parquet::schema::types::{SchemaDescriptor, Type};

use crate::avro::field_index;

/// Hudi's meta columns (`HoodieRecord.HOODIE_META_COLUMNS_NAME_TO_POS`).
pub const META_COLUMNS: [&str; 5] = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
];

fn is_promotion(from: &DataType, to: &DataType) -> bool {
    use DataType::*;
    match (from, to) {
        (Int8 | Int16 | Int32, Int64 | Float32 | Float64) => true,
        (Int64, Float32 | Float64) => true,
        (Float32, Float64) => true,
        (Utf8, Binary) | (Binary, Utf8) => true,
        (Decimal128(p1, s1), Decimal128(p2, s2)) => {
            p2 >= p1 && s2 >= s1 && (p2 - p1) as i16 >= (*s2 - *s1) as i16 && (p1, s1) != (p2, s2)
        }
        _ => false,
    }
}

/// The output schema: the base schema (or the newest log schema when there is no base),
/// extended and promoted by the newest log schema.
pub fn output_schema(base: Option<&SchemaRef>, newest_log: Option<&SchemaRef>) -> SchemaRef {
    let Some(base) = base else {
        return newest_log
            .cloned()
            .unwrap_or_else(|| Arc::new(Schema::empty()));
    };
    let Some(log) = newest_log else {
        return base.clone();
    };
    let mut fields: Vec<FieldRef> = base.fields().iter().cloned().collect();
    for f in fields.iter_mut() {
        if let Some(i) = field_index(log.fields(), f.name()) {
            let lf = &log.fields()[i];
            if is_promotion(f.data_type(), lf.data_type()) {
                *f = Arc::new(f.as_ref().clone().with_data_type(lf.data_type().clone()));
            }
        }
    }
    for lf in log.fields() {
        if field_index(base.fields(), lf.name()).is_none() {
            fields.push(Arc::new(lf.as_ref().clone().with_nullable(true)));
        }
    }
    Arc::new(Schema::new_with_metadata(fields, base.metadata().clone()))
}

/// The schema every slice of a view is written in where the table's schema changed (SEMANTICS
/// §10.3): the table schema of the view's instant (the newest write's at or before it), as
/// Arrow. Built once per view and shared by its slices.
#[derive(Debug, PartialEq, Eq)]
pub struct ViewSchema {
    /// The data columns (Hudi's meta columns are never part of a writer schema).
    pub arrow: SchemaRef,
    /// Names the schema in the merge cache's claims (a hash of the Avro text).
    pub id: String,
}

impl ViewSchema {
    /// The view schema of the Avro schema text `avro` (a commit's `extraMetadata.schema`),
    /// without the columns in `skip` (partition columns a table does not store in its files).
    pub fn from_avro(avro: &str, skip: &[String]) -> Result<ViewSchema, String> {
        let arrow = crate::avro::AvroToArrow::new(avro).map_err(|e| format!("{e:?}"))?;
        let fields: Vec<FieldRef> = arrow
            .schema()
            .fields()
            .iter()
            .filter(|f| !META_COLUMNS.contains(&f.name().as_str()))
            .filter(|f| !skip.iter().any(|s| s.eq_ignore_ascii_case(f.name())))
            .cloned()
            .collect();
        Ok(ViewSchema {
            arrow: Arc::new(Schema::new(fields)),
            id: crate::cache::hash_hex(avro.as_bytes()),
        })
    }
}

/// How a slice is written in its view's schema: set on a slice whose files were written under
/// another table schema than the view's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceSchema {
    pub view: Arc<ViewSchema>,
    /// The slice's base file itself is not in the view's schema: a slice without logs is
    /// rewritten, not served as it is.
    pub rewrite_base: bool,
    /// Schema-on-read: each file's columns are matched to the view's by field id
    /// ([`crate::evolution`]); `None`: by name.
    pub evolution: Option<Arc<crate::evolution::SchemaOnRead>>,
}

impl SliceSchema {
    /// Names the schema the slice is written in, in cache claims and registry keys.
    pub fn claim_id(&self) -> String {
        match &self.evolution {
            Some(e) => format!("{}+{}", self.view.id, e.id),
            None => self.view.id.clone(),
        }
    }
}

/// `slice` (a merge's output schema) in the view's schema `view`: the meta columns the slice
/// has, then the view's columns in its order, each the slice's own field where it has one (of
/// the view's type where that promotes it), else the view's (nullable, filled with nulls).
/// Columns the view does not have are dropped.
pub fn aligned(slice: &SchemaRef, view: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<FieldRef> = slice
        .fields()
        .iter()
        .filter(|f| META_COLUMNS.contains(&f.name().as_str()))
        .cloned()
        .collect();
    for vf in view.fields() {
        let f = match field_index(slice.fields(), vf.name()) {
            Some(i) => {
                let sf = &slice.fields()[i];
                if is_promotion(sf.data_type(), vf.data_type()) {
                    Arc::new(sf.as_ref().clone().with_data_type(vf.data_type().clone()))
                } else {
                    sf.clone()
                }
            }
            None => Arc::new(vf.as_ref().clone().with_nullable(true)),
        };
        fields.push(f);
    }
    Arc::new(Schema::new_with_metadata(fields, slice.metadata().clone()))
}

/// Convert `array` to `target` (fields matched by name, missing ones null, types cast).
pub fn conform_array(array: &ArrayRef, target: &DataType) -> Result<ArrayRef, String> {
    if array.data_type() == target {
        return Ok(array.clone());
    }
    let len = array.len();
    match (array.data_type(), target) {
        (DataType::Null, t) => Ok(new_null_array(t, len)),
        (DataType::Struct(_), DataType::Struct(tf)) => {
            let s = array
                .as_any()
                .downcast_ref::<StructArray>()
                .ok_or("not a struct")?;
            let DataType::Struct(sf) = s.data_type() else {
                return Err("not a struct".into());
            };
            let children = tf
                .iter()
                .map(|f| match field_index(sf, f.name()) {
                    Some(i) => conform_array(s.column(i), f.data_type()),
                    None => Ok(new_null_array(f.data_type(), len)),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let tf = relax(tf, &children);
            Ok(Arc::new(
                StructArray::try_new_with_length(tf, children, s.nulls().cloned(), len)
                    .map_err(|e| e.to_string())?,
            ))
        }
        (DataType::List(_), DataType::List(tf)) => {
            let l = array
                .as_any()
                .downcast_ref::<ListArray>()
                .ok_or("not a list")?;
            let values = conform_array(l.values(), tf.data_type())?;
            let tf = if !tf.is_nullable() && values.null_count() > 0 {
                Arc::new(tf.as_ref().clone().with_nullable(true))
            } else {
                tf.clone()
            };
            Ok(Arc::new(
                ListArray::try_new(tf, l.offsets().clone(), values, l.nulls().cloned())
                    .map_err(|e| e.to_string())?,
            ))
        }
        (DataType::Map(_, _), DataType::Map(te, sorted)) => {
            let m = array
                .as_any()
                .downcast_ref::<MapArray>()
                .ok_or("not a map")?;
            let entries: ArrayRef = Arc::new(m.entries().clone());
            let entries = conform_array(&entries, te.data_type())?;
            let entries = entries
                .as_any()
                .downcast_ref::<StructArray>()
                .ok_or("map entries")?
                .clone();
            Ok(Arc::new(
                MapArray::try_new(
                    te.clone(),
                    m.offsets().clone(),
                    entries,
                    m.nulls().cloned(),
                    *sorted,
                )
                .map_err(|e| e.to_string())?,
            ))
        }
        (_, t) => {
            let opts = arrow_cast::CastOptions {
                safe: false,
                ..Default::default()
            };
            arrow_cast::cast_with_options(array, t, &opts)
                .map_err(|e| format!("{} cannot be read as {t}: {e}", array.data_type()))
        }
    }
}

/// Fields made nullable where a child has nulls the target does not allow (a column the log
/// record lacks).
fn relax(fields: &Fields, children: &[ArrayRef]) -> Fields {
    fields
        .iter()
        .zip(children)
        .map(|(f, c)| {
            if !f.is_nullable() && c.null_count() > 0 {
                Arc::new(f.as_ref().clone().with_nullable(true))
            } else {
                f.clone()
            }
        })
        .collect()
}

/// A batch converted to `schema` (columns by name; absent ones null). Returns the batch and,
/// per output column, whether the input had it.
pub fn conform_batch(
    batch: &RecordBatch,
    schema: &SchemaRef,
) -> Result<(RecordBatch, Vec<bool>), String> {
    let src = batch.schema();
    let mut present = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        match field_index(src.fields(), f.name()) {
            Some(i) => {
                present.push(true);
                columns.push(conform_array(batch.column(i), f.data_type())?);
            }
            None => {
                present.push(false);
                columns.push(new_null_array(f.data_type(), batch.num_rows()));
            }
        }
    }
    let fields: Fields = schema
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| {
            let f = if !f.is_nullable() && c.null_count() > 0 {
                Arc::new(f.as_ref().clone().with_nullable(true))
            } else {
                f.clone()
            };
            // Nested field names and nullability follow the data (conform keeps the
            // target's where it can).
            if f.data_type() != c.data_type() {
                Arc::new(Field::new(f.name(), c.data_type().clone(), true))
            } else {
                f
            }
        })
        .collect();
    let out = RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
    )
    .map_err(|e| e.to_string())?;
    Ok((out, present))
}

/// The Parquet schema to write: the base file's own type for every top-level column the
/// writer can write under it unchanged (same leaves, physical types, lengths and levels as it
/// would choose, or a decimal it can encode in the base's fixed length), the writer's own
/// choice for the others (INT96 timestamps, promoted and added columns, log-only slices).
pub fn parquet_schema(
    output: &SchemaRef,
    base_arrow: Option<&SchemaRef>,
    base: Option<&SchemaDescriptor>,
) -> Result<SchemaDescriptor, String> {
    let converter = ArrowSchemaConverter::new();
    let converted = converter.convert(output).map_err(|e| e.to_string())?;
    let (Some(base), Some(base_arrow)) = (base, base_arrow) else {
        return Ok(converted);
    };
    let conv_root = converted.root_schema();
    let base_root = base.root_schema();
    let mut fields: Vec<Arc<Type>> = Vec::new();
    for (i, f) in output.fields().iter().enumerate() {
        let conv = conv_root.get_fields()[i].clone();
        // (A column renamed through schema-on-read takes the writer's own type: the base's
        // carries the old name.)
        let from_base = field_index(base_arrow.fields(), f.name())
            .filter(|&j| base_arrow.field(j).data_type() == f.data_type())
            .and_then(|j| Some((j, base_root.get_fields().get(j).cloned()?)))
            .filter(|(j, b)| b.name() == base_arrow.field(*j).name().as_str())
            .map(|(_, b)| b)
            .filter(|b| compatible(b, &conv));
        fields.push(from_base.unwrap_or(conv));
    }
    let root = Type::group_type_builder(base_root.name())
        .with_fields(fields)
        .build()
        .map_err(|e| e.to_string())?;
    Ok(SchemaDescriptor::new(Arc::new(root)))
}

fn leaves(t: &Type, def: i16, rep: i16, out: &mut Vec<(PhysicalType, i32, i16, i16)>) {
    use parquet::basic::Repetition;
    let (def, rep) = match t
        .get_basic_info()
        .has_repetition()
        .then(|| t.get_basic_info().repetition())
    {
        Some(Repetition::OPTIONAL) => (def + 1, rep),
        Some(Repetition::REPEATED) => (def + 1, rep + 1),
        _ => (def, rep),
    };
    match t {
        Type::PrimitiveType {
            physical_type,
            type_length,
            ..
        } => out.push((*physical_type, *type_length, def, rep)),
        Type::GroupType { fields, .. } => {
            for f in fields {
                leaves(f, def, rep, out);
            }
        }
    }
}

fn compatible(base: &Type, conv: &Type) -> bool {
    let (mut a, mut b) = (Vec::new(), Vec::new());
    leaves(base, 0, 0, &mut a);
    leaves(conv, 0, 0, &mut b);
    a.len() == b.len()
        && a.iter().zip(&b).all(|(x, y)| {
            x == y
                || (x.0 == PhysicalType::FIXED_LEN_BYTE_ARRAY
                    && matches!(
                        y.0,
                        PhysicalType::INT32
                            | PhysicalType::INT64
                            | PhysicalType::FIXED_LEN_BYTE_ARRAY
                    )
                    && base_is_decimal_of_len(base, x.1)
                    && (x.2, x.3) == (y.2, y.3))
        })
}

fn base_is_decimal_of_len(t: &Type, len: i32) -> bool {
    match t {
        Type::PrimitiveType {
            basic_info,
            precision,
            ..
        } => {
            matches!(
                basic_info.logical_type_ref(),
                Some(parquet::basic::LogicalType::Decimal { .. })
            ) && decimal_len(*precision) == len
        }
        Type::GroupType { .. } => false,
    }
}

/// The bytes parquet's writer gives a decimal of `precision` digits in a fixed-length column.
fn decimal_len(precision: i32) -> i32 {
    (((10f64.powi(precision) + 1.0).log2() + 1.0) / 8.0).ceil() as i32
}
