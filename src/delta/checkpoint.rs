//! Delta checkpoints: a version's whole state in one Parquet file
//! (`_delta_log/<version>.checkpoint.parquet`, the protocol's classic single-file checkpoint),
//! so a reader starts there instead of replaying every log file, and `_last_checkpoint`, which
//! points readers at the newest one.
//!
//! The rows are the log's own JSON actions (`protocol`, `metaData`, one `add` per file) decoded
//! into the checkpoint schema, one action per row.

use std::sync::Arc;

use arrow_array::{
    new_empty_array, new_null_array, ArrayRef, BooleanArray, Int64Array, MapArray, RecordBatch,
    StringArray, StructArray,
};
use arrow_schema::{DataType, Field, Fields, Schema};
use serde_json::{json, Value};

use super::log::{self, DeltaFile, TableFacts, Version};

/// Delta writers make a checkpoint every this many versions (`delta.checkpointInterval`).
pub const INTERVAL: u64 = 10;

fn string_map() -> DataType {
    let entries = Field::new(
        "key_value",
        DataType::Struct(Fields::from(vec![
            Field::new("key", DataType::Utf8, false),
            Field::new("value", DataType::Utf8, true),
        ])),
        false,
    );
    DataType::Map(Arc::new(entries), false)
}

fn strings() -> DataType {
    DataType::List(Arc::new(Field::new("element", DataType::Utf8, true)))
}

fn st(fields: Vec<Field>) -> DataType {
    DataType::Struct(Fields::from(fields))
}

/// The checkpoint schema of the Delta protocol, for the actions hudifs writes.
pub fn schema() -> Schema {
    Schema::new(vec![
        Field::new(
            "txn",
            st(vec![
                Field::new("appId", DataType::Utf8, true),
                Field::new("version", DataType::Int64, true),
                Field::new("lastUpdated", DataType::Int64, true),
            ]),
            true,
        ),
        Field::new(
            "add",
            st(vec![
                Field::new("path", DataType::Utf8, true),
                Field::new("partitionValues", string_map(), true),
                Field::new("size", DataType::Int64, true),
                Field::new("modificationTime", DataType::Int64, true),
                Field::new("dataChange", DataType::Boolean, true),
                Field::new("stats", DataType::Utf8, true),
                Field::new("tags", string_map(), true),
            ]),
            true,
        ),
        Field::new(
            "remove",
            st(vec![
                Field::new("path", DataType::Utf8, true),
                Field::new("deletionTimestamp", DataType::Int64, true),
                Field::new("dataChange", DataType::Boolean, true),
                Field::new("extendedFileMetadata", DataType::Boolean, true),
                Field::new("partitionValues", string_map(), true),
                Field::new("size", DataType::Int64, true),
            ]),
            true,
        ),
        Field::new(
            "metaData",
            st(vec![
                Field::new("id", DataType::Utf8, true),
                Field::new("name", DataType::Utf8, true),
                Field::new("description", DataType::Utf8, true),
                Field::new(
                    "format",
                    st(vec![
                        Field::new("provider", DataType::Utf8, true),
                        Field::new("options", string_map(), true),
                    ]),
                    true,
                ),
                Field::new("schemaString", DataType::Utf8, true),
                Field::new("partitionColumns", strings(), true),
                Field::new("configuration", string_map(), true),
                Field::new("createdTime", DataType::Int64, true),
            ]),
            true,
        ),
        Field::new(
            "protocol",
            st(vec![
                Field::new("minReaderVersion", DataType::Int32, true),
                Field::new("minWriterVersion", DataType::Int32, true),
                Field::new("readerFeatures", strings(), true),
                Field::new("writerFeatures", strings(), true),
            ]),
            true,
        ),
    ])
}

/// The actions of version `v`'s checkpoint, one per row.
pub fn actions(table: &TableFacts, v: &Version) -> Vec<Value> {
    let mut out = vec![log::protocol(table, v), log::metadata(table, v)];
    out.extend(v.files.values().map(|f| log::add(f)));
    out
}

/// How many actions version `v`'s checkpoint holds (without rendering them).
pub fn action_count(v: &Version) -> usize {
    2 + v.files.len()
}

/// The checkpoint of version `v` as Parquet bytes, and its number of actions: the rows of
/// [`actions`], in that order. The protocol and `metaData` rows are decoded from their JSON;
/// the `add` rows, one per file (a hundred thousand in a big table), are built as columns
/// straight from the files (`add_rows`): the same values, without a JSON value per file.
pub fn write(table: &TableFacts, v: &Version) -> Result<(Vec<u8>, usize), String> {
    let schema = Arc::new(schema());
    let head = [log::protocol(table, v), log::metadata(table, v)];
    let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
        .build_decoder()
        .map_err(|e| e.to_string())?;
    decoder.serialize(&head).map_err(|e| e.to_string())?;
    let head = decoder
        .flush()
        .map_err(|e| e.to_string())?
        .ok_or("a checkpoint without rows")?;
    let files: Vec<&DeltaFile> = v.files.values().map(|f| &**f).collect();
    let adds = add_rows(&schema, &files)?;
    let mut out = Vec::new();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_created_by(concat!("hudifs ", env!("CARGO_PKG_VERSION")).to_string())
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, Some(props))
        .map_err(|e| e.to_string())?;
    w.write(&head).map_err(|e| e.to_string())?;
    if adds.num_rows() > 0 {
        w.write(&adds).map_err(|e| e.to_string())?;
    }
    w.close().map_err(|e| e.to_string())?;
    Ok((out, head.num_rows() + adds.num_rows()))
}

/// One checkpoint row per file, an `add` action each (every other action column null): what
/// [`log::add`] says of each file, as columns of the checkpoint schema.
fn add_rows(schema: &Arc<Schema>, files: &[&DeltaFile]) -> Result<RecordBatch, String> {
    let n = files.len();
    let Some(add_field) = schema.fields().find("add").map(|(_, f)| f.clone()) else {
        return Err("the checkpoint schema has no add column".into());
    };
    let DataType::Struct(add_fields) = add_field.data_type() else {
        return Err("the checkpoint's add column is not a struct".into());
    };
    let column = |name: &str| -> Result<ArrayRef, String> {
        let Some((_, f)) = add_fields.find(name) else {
            return Err(format!("the checkpoint's add has no {name}"));
        };
        Ok(match name {
            "path" => Arc::new(StringArray::from_iter_values(
                files.iter().map(|f| f.path.as_str()),
            )),
            "partitionValues" => empty_maps(f.data_type(), n)?,
            "size" => Arc::new(Int64Array::from_iter_values(
                files.iter().map(|f| f.size as i64),
            )),
            "modificationTime" => Arc::new(Int64Array::from_iter_values(
                files.iter().map(|f| f.modified_ms),
            )),
            "dataChange" => Arc::new(BooleanArray::from_iter(
                files.iter().map(|f| Some(f.data_change)),
            )),
            "stats" => Arc::new(StringArray::from_iter(
                files.iter().map(|f| f.stats.as_deref()),
            )),
            _ => new_null_array(f.data_type(), n),
        })
    };
    let add = StructArray::try_new(
        add_fields.clone(),
        add_fields
            .iter()
            .map(|f| column(f.name()))
            .collect::<Result<_, _>>()?,
        None,
    )
    .map_err(|e| e.to_string())?;
    let columns = schema
        .fields()
        .iter()
        .map(|f| -> ArrayRef {
            if f.name() == "add" {
                Arc::new(add.clone())
            } else {
                new_null_array(f.data_type(), n)
            }
        })
        .collect();
    RecordBatch::try_new(schema.clone(), columns).map_err(|e| e.to_string())
}

/// `n` empty maps (not null) of map type `map`: `add.partitionValues` of an unpartitioned
/// table.
fn empty_maps(map: &DataType, n: usize) -> Result<ArrayRef, String> {
    let DataType::Map(entries, sorted) = map else {
        return Err(format!("{map} is not a map"));
    };
    let DataType::Struct(kv) = entries.data_type() else {
        return Err(format!("{map}'s entries are not a struct"));
    };
    let empty = StructArray::try_new(
        kv.clone(),
        kv.iter().map(|f| new_empty_array(f.data_type())).collect(),
        None,
    )
    .map_err(|e| e.to_string())?;
    let offsets = arrow_buffer::OffsetBuffer::new(vec![0i32; n + 1].into());
    MapArray::try_new(entries.clone(), offsets, empty, None, *sorted)
        .map(|m| Arc::new(m) as ArrayRef)
        .map_err(|e| e.to_string())
}

/// `_last_checkpoint`: the newest checkpoint's version and number of actions.
pub fn last_checkpoint(version: u64, size: usize, files: usize) -> Vec<u8> {
    let mut v = json!({"version": version, "size": size, "numOfAddFiles": files}).to_string();
    v.push('\n');
    v.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delta::{schema::DeltaSchema, DeltaFile};
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use std::io::Write;

    /// A version of files `files` (by path in the table), nothing worked out of its changes.
    fn version(
        number: u64,
        schema: Option<DeltaSchema>,
        files: Vec<(&str, Arc<DeltaFile>)>,
        data_change: bool,
    ) -> Version {
        Version {
            number,
            instant: "20240101000000000".into(),
            completion: None,
            action: "commit".into(),
            timestamp_ms: 5,
            schema,
            files: files
                .into_iter()
                .map(|(k, f)| (Arc::<str>::from(k), f))
                .collect(),
            removed: Vec::new(),
            added: Vec::new(),
            data_change,
            wants_changes: false,
            changes: Default::default(),
            arrow: None,
        }
    }

    #[test]
    fn a_checkpoint_holds_protocol_metadata_and_one_add_per_file() {
        let table = TableFacts {
            id: log::table_id("t"),
            name: "t".into(),
            change_feed: true,
        };
        let f = |p: &str| {
            Arc::new(DeltaFile {
                path: p.into(),
                size: 10,
                modified_ms: 2,
                stats: Some(r#"{"numRecords":3}"#.into()),
                data_change: true,
            })
        };
        let v = version(
            10,
            Some(DeltaSchema {
                string: r#"{"type":"struct","fields":[]}"#.into(),
                timestamp_ntz: false,
            }),
            vec![("a", f("i/a")), ("b", f("i/b"))],
            true,
        );
        let (bytes, n) = write(&table, &v).unwrap();
        assert_eq!(n, 4);
        assert_eq!(action_count(&v), n);
        let mut tmp = tempfile::tempfile().unwrap();
        tmp.write_all(&bytes).unwrap();
        let r = SerializedFileReader::new(tmp).unwrap();
        assert_eq!(r.metadata().file_metadata().num_rows(), 4);
        let cols: Vec<String> = r
            .metadata()
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .map(|c| c.path().string())
            .collect();
        for want in [
            "add.path",
            "add.stats",
            "metaData.schemaString",
            "protocol.minReaderVersion",
        ] {
            assert!(cols.iter().any(|c| c == want), "{want} in {cols:?}");
        }
        let last: Value = serde_json::from_slice(&last_checkpoint(10, n, 2)).unwrap();
        assert_eq!(last["version"], 10);
    }

    /// The rows of a checkpoint, read back as the log's JSON actions (nulls left out).
    fn rows(bytes: &[u8]) -> Vec<Value> {
        let mut tmp = tempfile::tempfile().unwrap();
        tmp.write_all(bytes).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(tmp)
            .unwrap()
            .build()
            .unwrap();
        let mut out = Vec::new();
        let mut w = arrow_json::LineDelimitedWriter::new(&mut out);
        for batch in reader {
            w.write(&batch.unwrap()).unwrap();
        }
        w.finish().unwrap();
        out.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    #[test]
    fn a_checkpoint_reads_back_as_the_actions_of_its_version() {
        let file = |p: &str, size: u64, stats: Option<&str>, data_change: bool| {
            Arc::new(DeltaFile {
                path: p.into(),
                size,
                modified_ms: size as i64 * 1000,
                stats: stats.map(Arc::from),
                data_change,
            })
        };
        for (change_feed, ntz) in [(false, false), (true, false), (true, true)] {
            let table = TableFacts {
                id: log::table_id("t"),
                name: "t".into(),
                change_feed,
            };
            let v = version(
                20,
                Some(DeltaSchema {
                    string: r#"{"type":"struct","fields":[{"name":"a","type":"long","nullable":true,"metadata":{}}]}"#.into(),
                    timestamp_ntz: ntz,
                }),
                vec![
                    ("p=1/a", file("i1/p%3D1/a", 10, Some(r#"{"numRecords":3}"#), true)),
                    ("p=1/b", file("i2/p%3D1/b", 11, None, false)),
                    ("p=2/c \u{e9}", file("i3/p%3D2/c%20%C3%A9", 12, Some("{}"), true)),
                ],
                false,
            );
            let (bytes, n) = write(&table, &v).unwrap();
            assert_eq!(n, 5);
            assert_eq!(rows(&bytes), actions(&table, &v));
        }
        // A version without files: the protocol and metaData alone.
        let table = TableFacts {
            id: log::table_id("t"),
            name: "t".into(),
            change_feed: false,
        };
        let v = version(0, None, Vec::new(), true);
        let (bytes, n) = write(&table, &v).unwrap();
        assert_eq!((n, rows(&bytes)), (2, actions(&table, &v)));
    }
}
