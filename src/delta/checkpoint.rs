//! Delta checkpoints: a version's whole state in one Parquet file
//! (`_delta_log/<version>.checkpoint.parquet`, the protocol's classic single-file checkpoint),
//! so a reader starts there instead of replaying every log file, and `_last_checkpoint`, which
//! points readers at the newest one.
//!
//! The rows are the log's own JSON actions (`protocol`, `metaData`, one `add` per file) decoded
//! into the checkpoint schema, one action per row.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema};
use serde_json::{json, Value};

use super::log::{self, TableFacts, Version};

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

/// The checkpoint of version `v` as Parquet bytes, and its number of actions.
pub fn write(table: &TableFacts, v: &Version) -> Result<(Vec<u8>, usize), String> {
    let rows = actions(table, v);
    let schema = Arc::new(schema());
    let mut decoder = arrow_json::ReaderBuilder::new(schema.clone())
        .build_decoder()
        .map_err(|e| e.to_string())?;
    decoder.serialize(&rows).map_err(|e| e.to_string())?;
    let batch = decoder
        .flush()
        .map_err(|e| e.to_string())?
        .ok_or("a checkpoint without rows")?;
    let mut out = Vec::new();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_created_by(concat!("hudifs ", env!("CARGO_PKG_VERSION")).to_string())
        .build();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, Some(props))
        .map_err(|e| e.to_string())?;
    w.write(&batch).map_err(|e| e.to_string())?;
    w.close().map_err(|e| e.to_string())?;
    Ok((out, rows.len()))
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
        let v = Version {
            number: 10,
            instant: "20240101000000000".into(),
            completion: None,
            action: "commit".into(),
            timestamp_ms: 5,
            schema: Some(DeltaSchema {
                string: r#"{"type":"struct","fields":[]}"#.into(),
                timestamp_ntz: false,
            }),
            files: [("a".to_string(), f("i/a")), ("b".to_string(), f("i/b"))]
                .into_iter()
                .collect(),
            removed: Vec::new(),
            added: Vec::new(),
            data_change: true,
            wants_changes: false,
            changes: Default::default(),
            arrow: None,
        };
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
}
