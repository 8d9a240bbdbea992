//! Iceberg v2 manifests and manifest lists (the spec's "Manifests" and "Manifest Lists"), as
//! Avro container files whose schemas carry the spec's field ids.

use super::avro::{container, Enc};

/// `manifest_entry` for format version 2, an unpartitioned table.
const MANIFEST_SCHEMA: &str = r#"{"type":"record","name":"manifest_entry","fields":[
{"name":"status","type":"int","field-id":0},
{"name":"snapshot_id","type":["null","long"],"default":null,"field-id":1},
{"name":"sequence_number","type":["null","long"],"default":null,"field-id":3},
{"name":"file_sequence_number","type":["null","long"],"default":null,"field-id":4},
{"name":"data_file","type":{"type":"record","name":"r2","fields":[
 {"name":"content","type":"int","doc":"Contents of the file: 0=data, 1=position deletes, 2=equality deletes","field-id":134},
 {"name":"file_path","type":"string","doc":"Location URI with FS scheme","field-id":100},
 {"name":"file_format","type":"string","doc":"File format name: avro, orc, or parquet","field-id":101},
 {"name":"partition","type":{"type":"record","name":"r102","fields":[]},"doc":"Partition data tuple, schema based on the partition spec","field-id":102},
 {"name":"record_count","type":"long","doc":"Number of records in the file","field-id":103},
 {"name":"file_size_in_bytes","type":"long","doc":"Total file size in bytes","field-id":104},
 {"name":"column_sizes","type":["null",{"type":"array","items":{"type":"record","name":"k117_v118","fields":[{"name":"key","type":"int","field-id":117},{"name":"value","type":"long","field-id":118}]},"logicalType":"map"}],"default":null,"field-id":108},
 {"name":"value_counts","type":["null",{"type":"array","items":{"type":"record","name":"k119_v120","fields":[{"name":"key","type":"int","field-id":119},{"name":"value","type":"long","field-id":120}]},"logicalType":"map"}],"default":null,"field-id":109},
 {"name":"null_value_counts","type":["null",{"type":"array","items":{"type":"record","name":"k121_v122","fields":[{"name":"key","type":"int","field-id":121},{"name":"value","type":"long","field-id":122}]},"logicalType":"map"}],"default":null,"field-id":110},
 {"name":"nan_value_counts","type":["null",{"type":"array","items":{"type":"record","name":"k138_v139","fields":[{"name":"key","type":"int","field-id":138},{"name":"value","type":"long","field-id":139}]},"logicalType":"map"}],"default":null,"field-id":137},
 {"name":"lower_bounds","type":["null",{"type":"array","items":{"type":"record","name":"k126_v127","fields":[{"name":"key","type":"int","field-id":126},{"name":"value","type":"bytes","field-id":127}]},"logicalType":"map"}],"default":null,"field-id":125},
 {"name":"upper_bounds","type":["null",{"type":"array","items":{"type":"record","name":"k129_v130","fields":[{"name":"key","type":"int","field-id":129},{"name":"value","type":"bytes","field-id":130}]},"logicalType":"map"}],"default":null,"field-id":128},
 {"name":"key_metadata","type":["null","bytes"],"default":null,"field-id":131},
 {"name":"split_offsets","type":["null",{"type":"array","items":"long","element-id":133}],"default":null,"field-id":132},
 {"name":"equality_ids","type":["null",{"type":"array","items":"int","element-id":136}],"default":null,"field-id":135},
 {"name":"sort_order_id","type":["null","int"],"default":null,"field-id":140}
]},"field-id":2}]}"#;

/// `manifest_file` for format version 2.
const LIST_SCHEMA: &str = r#"{"type":"record","name":"manifest_file","fields":[
{"name":"manifest_path","type":"string","field-id":500},
{"name":"manifest_length","type":"long","field-id":501},
{"name":"partition_spec_id","type":"int","field-id":502},
{"name":"content","type":"int","field-id":517},
{"name":"sequence_number","type":"long","field-id":515},
{"name":"min_sequence_number","type":"long","field-id":516},
{"name":"added_snapshot_id","type":"long","field-id":503},
{"name":"added_files_count","type":"int","field-id":504},
{"name":"existing_files_count","type":"int","field-id":505},
{"name":"deleted_files_count","type":"int","field-id":506},
{"name":"added_rows_count","type":"long","field-id":512},
{"name":"existing_rows_count","type":"long","field-id":513},
{"name":"deleted_rows_count","type":"long","field-id":514},
{"name":"partitions","type":["null",{"type":"array","items":{"type":"record","name":"r508","fields":[
 {"name":"contains_null","type":"boolean","field-id":509},
 {"name":"contains_nan","type":["null","boolean"],"default":null,"field-id":518},
 {"name":"lower_bound","type":["null","bytes"],"default":null,"field-id":510},
 {"name":"upper_bound","type":["null","bytes"],"default":null,"field-id":511}]},"element-id":508}],"default":null,"field-id":507},
{"name":"key_metadata","type":["null","bytes"],"default":null,"field-id":519}]}"#;

/// A manifest entry's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Existing = 0,
    Added = 1,
    Deleted = 2,
}

/// What a manifest says of one data file.
#[derive(Debug, Clone, PartialEq)]
pub struct DataFileEntry {
    pub status: Status,
    /// The snapshot that added the file (for a deleted entry: the one that deleted it).
    pub snapshot_id: i64,
    /// The data sequence number of the snapshot that added it.
    pub sequence_number: i64,
    /// Absolute.
    pub path: String,
    pub record_count: i64,
    pub size: u64,
    pub value_counts: Vec<(i32, i64)>,
    pub null_counts: Vec<(i32, i64)>,
    pub lower: Vec<(i32, Vec<u8>)>,
    pub upper: Vec<(i32, Vec<u8>)>,
}

/// A manifest file: its entries, with the table schema (JSON) and schema id it was written
/// under.
pub fn manifest(schema_json: &str, schema_id: i32, entries: &[DataFileEntry]) -> Vec<u8> {
    let mut e = Enc::default();
    for d in entries {
        e.int(d.status as i32);
        e.some();
        e.long(d.snapshot_id);
        e.some();
        e.long(d.sequence_number);
        e.some();
        e.long(d.sequence_number);
        e.int(0);
        e.string(&d.path);
        e.string("PARQUET");
        e.long(d.record_count);
        e.long(i64::try_from(d.size).unwrap_or(i64::MAX));
        e.null();
        e.int_long_map(&d.value_counts);
        e.int_long_map(&d.null_counts);
        e.null();
        e.int_bytes_map(&d.lower);
        e.int_bytes_map(&d.upper);
        e.null();
        e.null();
        e.null();
        e.null();
    }
    container(
        MANIFEST_SCHEMA,
        &[
            ("schema", schema_json.to_string()),
            ("schema-id", schema_id.to_string()),
            ("partition-spec", "[]".into()),
            ("partition-spec-id", "0".into()),
            ("format-version", "2".into()),
            ("content", "data".into()),
        ],
        entries.len(),
        &e.buf,
    )
}

/// What a manifest list says of one manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestRef {
    /// Absolute.
    pub path: String,
    pub length: u64,
    /// The sequence number and id of the snapshot that wrote it.
    pub sequence_number: i64,
    pub snapshot_id: i64,
    pub min_sequence_number: i64,
    pub added: (i32, i64),
    pub existing: (i32, i64),
    pub deleted: (i32, i64),
}

impl ManifestRef {
    /// The counts of `entries` (files and rows by status).
    pub fn count(&mut self, entries: &[DataFileEntry]) {
        for d in entries {
            let slot = match d.status {
                Status::Added => &mut self.added,
                Status::Existing => &mut self.existing,
                Status::Deleted => &mut self.deleted,
            };
            slot.0 += 1;
            slot.1 += d.record_count;
        }
        self.min_sequence_number = entries
            .iter()
            .filter(|d| d.status != Status::Deleted)
            .map(|d| d.sequence_number)
            .min()
            .unwrap_or(self.sequence_number);
    }
}

/// A manifest list: the manifests of snapshot `snapshot_id`.
pub fn manifest_list(
    snapshot_id: i64,
    parent: Option<i64>,
    sequence_number: i64,
    manifests: &[ManifestRef],
) -> Vec<u8> {
    let mut e = Enc::default();
    for m in manifests {
        e.string(&m.path);
        e.long(i64::try_from(m.length).unwrap_or(i64::MAX));
        e.int(0);
        e.int(0);
        e.long(m.sequence_number);
        e.long(m.min_sequence_number);
        e.long(m.snapshot_id);
        e.int(m.added.0);
        e.int(m.existing.0);
        e.int(m.deleted.0);
        e.long(m.added.1);
        e.long(m.existing.1);
        e.long(m.deleted.1);
        // Unpartitioned: no partition summaries.
        e.some();
        e.long(0);
        e.null();
    }
    container(
        LIST_SCHEMA,
        &[
            ("snapshot-id", snapshot_id.to_string()),
            (
                "parent-snapshot-id",
                parent.map_or("null".into(), |p| p.to_string()),
            ),
            ("sequence-number", sequence_number.to_string()),
            ("format-version", "2".into()),
        ],
        manifests.len(),
        &e.buf,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use apache_avro::types::Value;

    fn field<'a>(v: &'a Value, name: &str) -> &'a Value {
        let Value::Record(f) = v else { panic!("{v:?}") };
        &f.iter().find(|(n, _)| n == name).unwrap().1
    }

    #[test]
    fn manifests_and_lists_read_back_by_their_schemas() {
        let entry = DataFileEntry {
            status: Status::Added,
            snapshot_id: 7,
            sequence_number: 3,
            path: "/mnt/t/iceberg/1/p/a.parquet".into(),
            record_count: 10,
            size: 1234,
            value_counts: vec![(1, 10)],
            null_counts: vec![(1, 0), (2, 4)],
            lower: vec![(1, 5i64.to_le_bytes().to_vec())],
            upper: vec![(1, 9i64.to_le_bytes().to_vec())],
        };
        let deleted = DataFileEntry {
            status: Status::Deleted,
            lower: vec![],
            upper: vec![],
            ..entry.clone()
        };
        let m = manifest("{}", 0, &[entry.clone(), deleted.clone()]);
        let r = apache_avro::Reader::new(&m[..]).unwrap();
        assert_eq!(r.user_metadata()["content"], b"data");
        let rows: Vec<Value> = r.map(|v| v.unwrap()).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(field(&rows[0], "status"), &Value::Int(1));
        let df = field(&rows[0], "data_file");
        assert_eq!(field(df, "file_path"), &Value::String(entry.path.clone()));
        assert_eq!(field(df, "file_size_in_bytes"), &Value::Long(1234));
        assert_eq!(field(&rows[1], "status"), &Value::Int(2));

        let mut mr = ManifestRef {
            path: "/mnt/t/iceberg/metadata/m.avro".into(),
            length: m.len() as u64,
            sequence_number: 3,
            snapshot_id: 7,
            min_sequence_number: 0,
            added: (0, 0),
            existing: (0, 0),
            deleted: (0, 0),
        };
        mr.count(&[entry, deleted]);
        assert_eq!(
            (mr.added, mr.deleted, mr.min_sequence_number),
            ((1, 10), (1, 10), 3)
        );
        let l = manifest_list(7, None, 3, &[mr]);
        let r = apache_avro::Reader::new(&l[..]).unwrap();
        assert_eq!(r.user_metadata()["parent-snapshot-id"], b"null");
        let rows: Vec<Value> = r.map(|v| v.unwrap()).collect();
        assert_eq!(field(&rows[0], "added_snapshot_id"), &Value::Long(7));
    }
}
