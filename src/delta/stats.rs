//! What the Delta log says of one data file, from its Parquet footer alone: the record count,
//! per-column null counts, minimums and maximums (`add.stats`), and the file's schema.

use std::sync::Arc;

use arrow_schema::Schema;
use parquet::basic::{ColumnOrder, ConvertedType, LogicalType, SortOrder, Type as PhysicalType};
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::statistics::Statistics;
use serde_json::{Map, Value};

use hudifs_storage::OpenFile;

/// The footer facts of one data file.
#[derive(Debug, Clone)]
pub struct FileFacts {
    /// `add.stats`: `numRecords`, `nullCount`, `minValues`, `maxValues`.
    pub stats: String,
    pub num_records: i64,
    pub schema: Arc<Schema>,
    /// The Parquet schema (for `iceberg/`'s field ids): files of one table share it.
    pub parquet: Arc<parquet::schema::types::Type>,
}

/// Read the footer of `file` (two reads: its length, then the footer) and take its facts.
pub fn read_facts(file: &dyn OpenFile) -> Result<FileFacts, String> {
    let size = file.size();
    if size < 12 {
        return Err(format!("{size} bytes is too short for a Parquet file"));
    }
    let mut tail = [0u8; 8];
    file.read_exact_random(&mut tail, size - 8)
        .map_err(|e| e.to_string())?;
    if &tail[4..] != b"PAR1" {
        return Err("not a Parquet file (no PAR1 at its end)".into());
    }
    let len = u64::from(u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]));
    if len + 12 > size {
        return Err(format!("a footer of {len} bytes in a file of {size}"));
    }
    let mut footer = vec![0u8; len as usize];
    file.read_exact_random(&mut footer, size - 8 - len)
        .map_err(|e| e.to_string())?;
    let md = ParquetMetaDataReader::decode_metadata(&footer).map_err(|e| e.to_string())?;
    facts(&md)
}

/// The facts of a decoded footer.
pub fn facts(md: &ParquetMetaData) -> Result<FileFacts, String> {
    let fmd = md.file_metadata();
    let schema =
        parquet::arrow::parquet_to_arrow_schema(fmd.schema_descr(), fmd.key_value_metadata())
            .map_err(|e| e.to_string())?;
    let num_records: i64 = md.row_groups().iter().map(|rg| rg.num_rows()).sum();
    let mut nulls = Map::new();
    let mut mins = Map::new();
    let mut maxs = Map::new();
    let descr = fmd.schema_descr();
    for (i, col) in descr.columns().iter().enumerate() {
        // Top-level primitive columns only: a nested leaf's nulls are not its column's.
        if col.path().parts().len() != 1 || col.max_rep_level() > 0 {
            continue;
        }
        let name = col.name().to_string();
        let chunks: Vec<Option<&Statistics>> = md
            .row_groups()
            .iter()
            .map(|rg| rg.column(i).statistics())
            .collect();
        if chunks
            .iter()
            .all(|s| s.and_then(|s| s.null_count_opt()).is_some())
        {
            let n: u64 = chunks
                .iter()
                .filter_map(|s| s.and_then(|s| s.null_count_opt()))
                .sum();
            nulls.insert(name.clone(), Value::from(n));
        }
        let order = fmd.column_order(i);
        if let Some((lo, hi)) = bounds(
            col.physical_type(),
            col.logical_type_ref(),
            col.converted_type(),
            order,
            &chunks,
        ) {
            mins.insert(name.clone(), lo);
            maxs.insert(name, hi);
        }
    }
    let mut stats = Map::new();
    stats.insert("numRecords".into(), Value::from(num_records));
    stats.insert("minValues".into(), Value::Object(mins));
    stats.insert("maxValues".into(), Value::Object(maxs));
    stats.insert("nullCount".into(), Value::Object(nulls));
    Ok(FileFacts {
        stats: Value::Object(stats).to_string(),
        num_records,
        schema: Arc::new(schema),
        parquet: fmd.schema_descr().root_schema_ptr(),
    })
}

/// A column's minimum and maximum over every row group, where each has exact bounds and the
/// type is one whose bounds compare as Delta compares them: plain integers, and UTF-8 strings
/// ordered as unsigned bytes. Every other column gets none (readers then do not prune on it).
fn bounds(
    physical: PhysicalType,
    logical: Option<&LogicalType>,
    converted: ConvertedType,
    order: ColumnOrder,
    chunks: &[Option<&Statistics>],
) -> Option<(Value, Value)> {
    if chunks.is_empty() {
        return None;
    }
    let plain_int = match logical {
        None => matches!(converted, ConvertedType::NONE),
        Some(LogicalType::Integer { is_signed, .. }) => *is_signed,
        _ => false,
    };
    let string =
        matches!(logical, Some(LogicalType::String)) || matches!(converted, ConvertedType::UTF8);
    let mut lo: Option<Value> = None;
    let mut hi: Option<Value> = None;
    for s in chunks {
        let s = (*s)?;
        // A chunk of only nulls has no bounds and changes none.
        if s.min_bytes_opt().is_none() && s.max_bytes_opt().is_none() {
            if s.null_count_opt().is_some() {
                continue;
            }
            return None;
        }
        if !s.min_is_exact() || !s.max_is_exact() {
            return None;
        }
        let (a, b) = match (physical, s) {
            (PhysicalType::INT32, Statistics::Int32(v)) if plain_int => {
                (Value::from(*v.min_opt()?), Value::from(*v.max_opt()?))
            }
            (PhysicalType::INT64, Statistics::Int64(v)) if plain_int => {
                (Value::from(*v.min_opt()?), Value::from(*v.max_opt()?))
            }
            (PhysicalType::BYTE_ARRAY, Statistics::ByteArray(v))
                if string && order == ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::UNSIGNED) =>
            {
                (
                    Value::from(std::str::from_utf8(v.min_opt()?.data()).ok()?),
                    Value::from(std::str::from_utf8(v.max_opt()?.data()).ok()?),
                )
            }
            _ => return None,
        };
        lo = Some(match lo {
            Some(x) if less(&x, &a) => x,
            _ => a,
        });
        hi = Some(match hi {
            Some(x) if less(&b, &x) => x,
            _ => b,
        });
    }
    Some((lo?, hi?))
}

fn less(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_i64() < y.as_i64(),
        (Value::String(x), Value::String(y)) => x.as_bytes() < y.as_bytes(),
        _ => false,
    }
}
