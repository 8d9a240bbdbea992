//! The generator's rows: a small fixed schema, deterministic row generation, and base files
//! written as real Parquet with the low-level `parquet` writer API.
//!
//! Columns: Hudi's five meta columns (`_hoodie_commit_time`, `_hoodie_commit_seqno`,
//! `_hoodie_record_key`, `_hoodie_partition_path`, `_hoodie_file_name`; optional strings, left
//! out when the table does not populate meta fields), then `id INT64`, `name BYTE_ARRAY UTF8`,
//! `value DOUBLE`, `ts INT64` (required), then one required UTF8 column per partition field
//! holding the file's partition value (as a Spark writer keeps the partition columns in the
//! data; readers such as hudi-rs require every `hoodie.table.partition.fields` entry to be a
//! field of the table schema). The footer carries Hudi's `hoodie_min_record_key` /
//! `hoodie_max_record_key` and the Avro schema as `parquet.avro.schema`, like a file written by
//! Hudi's parquet-avro writer; the bloom filter Hudi also stores there is not written.

use hudifs_storage::TablePath;
use std::sync::Arc;

use ::parquet::basic::Compression;
use ::parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use ::parquet::file::metadata::KeyValue;
use ::parquet::file::properties::WriterProperties;
use ::parquet::file::writer::SerializedFileWriter;
use ::parquet::schema::parser::parse_message_type;
use serde_json::{json, Value as Json};

use super::avro::{self, Field, Record, Schema};
use super::ExtraColumn;
use super::SplitMix64;
use super::TableWriter;
use hudifs_core::error::{Error, Result};

/// One data row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub id: i64,
    pub name: String,
    pub value: f64,
    pub ts: i64,
    /// Values of the table's extra string columns (`TableSpec::with_string_columns`), in
    /// order; a missing one is null.
    pub extra: Vec<Option<String>>,
}

impl Row {
    /// The row with the values of the table's extra string columns.
    pub fn with_extra(mut self, values: &[Option<&str>]) -> Row {
        self.extra = values.iter().map(|v| v.map(str::to_string)).collect();
        self
    }

    fn extra_value(&self, i: usize) -> Option<&str> {
        self.extra.get(i).and_then(|v| v.as_deref())
    }
}

/// `n` deterministic rows with ids `seed * 1000 .. seed * 1000 + n` (so distinct seeds below
/// about 9·10^15 give disjoint keys as long as `n <= 1000`).
pub fn rows(seed: u64, n: usize) -> Vec<Row> {
    let base = (seed as i64).wrapping_mul(1000);
    let ids: Vec<i64> = (0..n as i64).map(|i| base + i).collect();
    rows_with_ids(seed, &ids)
}

/// Deterministic rows for the given ids (e.g. new versions of existing rows for an update).
pub fn rows_with_ids(seed: u64, ids: &[i64]) -> Vec<Row> {
    const NAMES: [&str; 8] = [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
    ];
    let mut rng = SplitMix64::new(seed ^ 0x005e_ed0f_da7a);
    ids.iter()
        .map(|&id| {
            let r = rng.next_u64();
            Row {
                id,
                name: format!("{}-{}", NAMES[(r % 8) as usize], (r >> 3) % 1000),
                // Multiples of 1/100 are exact enough to compare after a round trip.
                value: ((r >> 13) % 100_000) as f64 / 100.0,
                ts: 1_700_000_000_000 + ((r >> 40) % 1_000_000_000) as i64,
                extra: Vec::new(),
            }
        })
        .collect()
}

/// A row as stored in a file: with the commit time and sequence number it was written with.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct StoredRow {
    pub row: Row,
    pub commit_time: String,
    pub seqno: String,
}

pub(crate) const META_FIELDS: [&str; 5] = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
];

/// An Avro-safe record name from a table name.
fn avro_name(table: &str) -> String {
    let mut s: String = table
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    s
}

/// The table's Avro schema; `with_meta` adds Hudi's meta fields in front (the writer schema of
/// log blocks and Parquet files), without them it is the table schema of `extraMetadata`. The
/// extra string columns (nullable) follow the data fields, then the partition fields, as
/// strings.
pub(crate) fn data_schema(
    table: &str,
    with_meta: bool,
    extra: &[ExtraColumn],
    partition_fields: &[String],
) -> Schema {
    let n = avro_name(table);
    let mut fields = Vec::new();
    if with_meta {
        for f in META_FIELDS {
            fields.push(Field {
                name: f.into(),
                schema: Schema::Union(vec![Schema::Null, Schema::String]),
                default: Some(Json::Null),
            });
        }
    }
    for (name, schema) in [
        ("id", Schema::Long),
        ("name", Schema::String),
        ("value", Schema::Double),
        ("ts", Schema::Long),
    ] {
        fields.push(Field {
            name: name.into(),
            schema,
            default: None,
        });
    }
    for c in extra {
        let t = if c.long { Schema::Long } else { Schema::String };
        fields.push(Field {
            name: c.name.clone().into(),
            schema: Schema::Union(vec![Schema::Null, t]),
            default: Some(Json::Null),
        });
    }
    for name in partition_fields {
        fields.push(Field {
            name: name.clone().into(),
            schema: Schema::String,
            default: None,
        });
    }
    Schema::Record(Record {
        name: format!("hoodie.{n}.{n}_record"),
        fields,
    })
}

/// The values of a file's partition columns: `(field, value)` in partition-field order.
pub(crate) type PartitionValues = [(String, String)];

/// The value of a long extra column, from the decimal number `Row::extra` holds.
fn long_value(column: &str, v: &str) -> i64 {
    v.parse()
        .unwrap_or_else(|_| panic!("column {column} is a long column: {v:?} is not a number"))
}

/// The JSON form of a stored row, for Avro encoding under [`data_schema`].
pub(crate) fn row_json(
    r: &StoredRow,
    partition: &str,
    file_name: &str,
    with_meta: bool,
    extra: &[ExtraColumn],
    partition_values: &PartitionValues,
) -> Json {
    let mut o = serde_json::Map::new();
    if with_meta {
        o.insert("_hoodie_commit_time".into(), json!(r.commit_time));
        o.insert("_hoodie_commit_seqno".into(), json!(r.seqno));
        o.insert("_hoodie_record_key".into(), json!(r.row.id.to_string()));
        o.insert("_hoodie_partition_path".into(), json!(partition));
        o.insert("_hoodie_file_name".into(), json!(file_name));
    }
    o.insert("id".into(), json!(r.row.id));
    o.insert("name".into(), json!(r.row.name));
    o.insert("value".into(), json!(r.row.value));
    o.insert("ts".into(), json!(r.row.ts));
    for (i, c) in extra.iter().enumerate() {
        let v = r.row.extra_value(i);
        let v = match v {
            Some(v) if c.long => json!(long_value(&c.name, v)),
            v => json!(v),
        };
        o.insert(c.name.clone(), v);
    }
    for (field, value) in partition_values {
        o.insert(field.clone(), json!(value));
    }
    Json::Object(o)
}

/// Avro-encode rows for a log data block.
pub(crate) fn encode_rows(
    schema: &Schema,
    rows: &[StoredRow],
    partition: &str,
    file_name: &str,
    with_meta: bool,
    extra: &[ExtraColumn],
    partition_values: &PartitionValues,
) -> Result<Vec<Vec<u8>>, String> {
    rows.iter()
        .map(|r| {
            let v = row_json(r, partition, file_name, with_meta, extra, partition_values);
            avro::datum(schema, &v)
        })
        .collect()
}

/// Where and how to write one base file.
pub(crate) struct BaseFile<'a> {
    pub path: &'a TablePath,
    pub file_name: &'a str,
    pub partition: &'a str,
    pub table: &'a str,
    pub with_meta: bool,
    /// The table's extra columns.
    pub extra: &'a [ExtraColumn],
    pub partition_values: &'a PartitionValues,
}

fn pq_err(path: &TablePath, e: impl std::fmt::Display) -> Error {
    Error::io(
        path.as_str(),
        std::io::Error::other(format!("writing Parquet: {e}")),
    )
}

/// A Parquet base file being written, one row group per [`BaseWriter::write_group`].
pub(crate) struct BaseWriter<'a> {
    f: &'a BaseFile<'a>,
    writer: SerializedFileWriter<Vec<u8>>,
}

impl<'a> BaseWriter<'a> {
    /// Create the file.
    pub fn create(f: &'a BaseFile<'a>) -> Result<Self> {
        let path = f.path;
        let mut message = format!("message {}_record {{\n", avro_name(f.table));
        if f.with_meta {
            for m in META_FIELDS {
                message.push_str(&format!("  optional binary {m} (UTF8);\n"));
            }
        }
        message.push_str(
            "  required int64 id;\n  required binary name (UTF8);\n  required double value;\n  \
             required int64 ts;\n",
        );
        for c in f.extra {
            match c.long {
                true => message.push_str(&format!("  optional int64 {};\n", c.name)),
                false => message.push_str(&format!("  optional binary {} (UTF8);\n", c.name)),
            }
        }
        for (field, _) in f.partition_values {
            message.push_str(&format!("  required binary {field} (UTF8);\n"));
        }
        message.push_str("}\n");
        let schema = Arc::new(parse_message_type(&message).map_err(|e| pq_err(path, e))?);
        let fields: Vec<String> = f.partition_values.iter().map(|(k, _)| k.clone()).collect();
        let kv = vec![
            KeyValue::new(
                "parquet.avro.schema".to_string(),
                data_schema(f.table, f.with_meta, f.extra, &fields).to_text(),
            ),
            KeyValue::new("writer.model.name".to_string(), "avro".to_string()),
        ];
        let props = Arc::new(
            WriterProperties::builder()
                .set_compression(Compression::SNAPPY)
                .set_key_value_metadata(Some(kv))
                .build(),
        );
        let writer =
            SerializedFileWriter::new(Vec::new(), schema, props).map_err(|e| pq_err(path, e))?;
        Ok(BaseWriter { f, writer })
    }

    /// Bytes written so far (row groups flushed; the footer comes on close).
    pub fn bytes_written(&self) -> usize {
        self.writer.bytes_written()
    }

    /// Write `rows` as one row group.
    pub fn write_group(&mut self, rows: &[StoredRow]) -> Result<()> {
        let (f, path) = (self.f, self.f.path);
        let mut rg = self.writer.next_row_group().map_err(|e| pq_err(path, e))?;
        let n = rows.len();
        let strings = |f: &dyn Fn(&StoredRow) -> String| -> Vec<ByteArray> {
            rows.iter()
                .map(|r| ByteArray::from(f(r).into_bytes()))
                .collect()
        };
        let mut string_columns: Vec<Vec<ByteArray>> = Vec::new();
        if f.with_meta {
            string_columns.push(strings(&|r| r.commit_time.clone()));
            string_columns.push(strings(&|r| r.seqno.clone()));
            string_columns.push(strings(&|r| r.row.id.to_string()));
            string_columns.push(strings(&|_| f.partition.to_string()));
            string_columns.push(strings(&|_| f.file_name.to_string()));
        }
        let defined = vec![1i16; n];
        let ids: Vec<i64> = rows.iter().map(|r| r.row.id).collect();
        let names = strings(&|r| r.row.name.clone());
        let values: Vec<f64> = rows.iter().map(|r| r.row.value).collect();
        let ts: Vec<i64> = rows.iter().map(|r| r.row.ts).collect();
        // Extra columns: their non-null values (as strings or longs) and definition levels.
        let extra_columns: Vec<(Vec<ByteArray>, Vec<i64>, Vec<i16>)> = f
            .extra
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let set = || rows.iter().filter_map(|r| r.row.extra_value(i));
                let (strings, longs) = match c.long {
                    true => (Vec::new(), set().map(|v| long_value(&c.name, v)).collect()),
                    false => (
                        set()
                            .map(|v| ByteArray::from(v.as_bytes().to_vec()))
                            .collect(),
                        Vec::new(),
                    ),
                };
                let levels = rows
                    .iter()
                    .map(|r| i16::from(r.row.extra_value(i).is_some()))
                    .collect();
                (strings, longs, levels)
            })
            .collect();
        let partition_columns: Vec<Vec<ByteArray>> = f
            .partition_values
            .iter()
            .map(|(_, v)| vec![ByteArray::from(v.as_bytes().to_vec()); n])
            .collect();

        let mut index = 0;
        while let Some(mut col) = rg.next_column().map_err(|e| pq_err(path, e))? {
            let meta_cols = string_columns.len();
            let res = if index < meta_cols {
                col.typed::<ByteArrayType>().write_batch(
                    &string_columns[index],
                    Some(&defined),
                    None,
                )
            } else {
                match index - meta_cols {
                    0 => col.typed::<Int64Type>().write_batch(&ids, None, None),
                    1 => col.typed::<ByteArrayType>().write_batch(&names, None, None),
                    2 => col.typed::<DoubleType>().write_batch(&values, None, None),
                    3 => col.typed::<Int64Type>().write_batch(&ts, None, None),
                    k if k - 4 < extra_columns.len() => {
                        let (strings, longs, levels) = &extra_columns[k - 4];
                        match f.extra[k - 4].long {
                            true => col
                                .typed::<Int64Type>()
                                .write_batch(longs, Some(levels), None),
                            false => col.typed::<ByteArrayType>().write_batch(
                                strings,
                                Some(levels),
                                None,
                            ),
                        }
                    }
                    k => col.typed::<ByteArrayType>().write_batch(
                        partition_columns
                            .get(k - 4 - extra_columns.len())
                            .map(Vec::as_slice)
                            .unwrap_or(&[]),
                        None,
                        None,
                    ),
                }
            };
            res.map_err(|e| pq_err(path, e))?;
            col.close().map_err(|e| pq_err(path, e))?;
            index += 1;
        }
        rg.close().map_err(|e| pq_err(path, e))?;
        Ok(())
    }

    /// Write the footer, with Hudi's smallest and largest record key (as strings, in string
    /// order) when given, and the file to the table; returns the file's size in bytes.
    pub fn close(mut self, w: &TableWriter, key_range: Option<(String, String)>) -> Result<u64> {
        let path = self.f.path;
        let bloom = w.spec.bloom_filter_bytes;
        if bloom > 0 {
            // Base64-like text of the filter's size (the content is never read).
            let text: String = (0..bloom)
                .map(|i| {
                    char::from(
                        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
                            [(i * 7 + i / 64) % 64],
                    )
                })
                .collect();
            self.writer.append_key_value_metadata(KeyValue::new(
                "org.apache.hudi.bloomfilter".into(),
                text,
            ));
            self.writer.append_key_value_metadata(KeyValue::new(
                "hoodie_bloom_filter_type_code".into(),
                "DYNAMIC_V0".to_string(),
            ));
        }
        if let Some((min, max)) = key_range {
            self.writer
                .append_key_value_metadata(KeyValue::new("hoodie_min_record_key".into(), min));
            self.writer
                .append_key_value_metadata(KeyValue::new("hoodie_max_record_key".into(), max));
        }
        let bytes = self.writer.into_inner().map_err(|e| pq_err(path, e))?;
        w.put(path, &bytes)?;
        Ok(bytes.len() as u64)
    }
}

/// Write `rows` (sorted by record key) as a Parquet file; returns its size in bytes.
pub(crate) fn write_base_file(
    w: &TableWriter,
    f: &BaseFile<'_>,
    rows: &[StoredRow],
) -> Result<u64> {
    let mut keys: Vec<String> = rows.iter().map(|r| r.row.id.to_string()).collect();
    keys.sort();
    let range = match (keys.first(), keys.last()) {
        (Some(min), Some(max)) => Some((min.clone(), max.clone())),
        _ => None,
    };
    let mut writer = BaseWriter::create(f)?;
    writer.write_group(rows)?;
    writer.close(w, range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_deterministic() {
        assert_eq!(rows(7, 5), rows(7, 5));
        assert_ne!(rows(7, 5), rows(8, 5));
        assert_eq!(
            rows(7, 3).iter().map(|r| r.id).collect::<Vec<_>>(),
            [7000, 7001, 7002]
        );
        let u = rows_with_ids(9, &[7000, 7001]);
        assert_eq!(u[1].id, 7001);
    }
}
