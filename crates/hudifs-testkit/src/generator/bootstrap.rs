//! A metadata-only bootstrap, as Java's `MetadataBootstrapHandler` and `HFileBootstrapIndex`
//! leave a table: the first write at instant `00000000000001` (`METADATA_BOOTSTRAP_INSTANT_TS`,
//! operation `bootstrap`), whose base files are skeletons holding the five meta columns in the
//! source rows' order; the rows' data in plain Parquet source files under the bootstrap base
//! path (another directory, or another prefix of the same store); and the bootstrap index, two
//! HFiles under `.hoodie/.aux/.bootstrap/` mapping each file group to its source file.
//!
//! The table's properties must say it is bootstrapped: [`TableSpec::bootstrapped`].

use std::io::{Seek, Write};
use std::sync::Arc;

use ::parquet::basic::{Repetition, Type as PhysicalType};
use ::parquet::data_type::{ByteArray, ByteArrayType, DoubleType, Int64Type};
use ::parquet::file::metadata::KeyValue;
use ::parquet::file::properties::WriterProperties;
use ::parquet::file::reader::{FileReader, SerializedFileReader};
use ::parquet::file::writer::SerializedFileWriter;
use ::parquet::record::Field as PqField;
use ::parquet::schema::types::Type;
use hudifs_core::bootstrap::{
    file_group_key, partition_key, FILE_ID_INDEX, INDEX_INFO_KEY, PARTITION_INDEX,
};
use hudifs_core::error::{Error, Result};
use hudifs_core::table::METADATA_BOOTSTRAP_INSTANT;
use hudifs_storage::{StorageWrite, TablePath};
use serde_json::{json, Value as Json};

use super::avro::{self, Schema};
use super::{Row, TableSpec, TableWriter};

/// One bootstrapped file group.
#[derive(Debug, Clone)]
pub struct BootstrappedGroup {
    pub partition: String,
    pub file_id: String,
    /// The skeleton file, relative to the table root.
    pub skeleton: String,
    /// The source file, relative to the bootstrap base path.
    pub source: String,
    /// The rows, in the order both files hold them.
    pub rows: Vec<Row>,
}

impl TableSpec {
    /// The properties Java sets on a metadata-only bootstrapped table: the source base path
    /// and the index (`hoodie.bootstrap.index.class` up to 0.x, `hoodie.bootstrap.index.type`
    /// from 1.0).
    pub fn bootstrapped(self, base_path: &str) -> TableSpec {
        let v = self.version;
        let s = self.with_property("hoodie.bootstrap.base.path", base_path);
        if v >= 8 {
            s.with_property("hoodie.bootstrap.index.enable", "true")
                .with_property("hoodie.bootstrap.index.type", "HFILE")
        } else {
            s.with_property(
                "hoodie.bootstrap.index.class",
                "org.apache.hudi.common.bootstrap.index.HFileBootstrapIndex",
            )
        }
    }
}

fn io(what: &str, e: impl std::fmt::Display) -> Error {
    Error::io(what, std::io::Error::other(e.to_string()))
}

fn file_status(uri: &str, length: u64, mtime_ms: i64) -> Json {
    json!({
        "version": 1,
        "path": {"version": 1, "uri": uri},
        "length": length,
        "isDir": false,
        "blockReplication": 1,
        "blockSize": 33_554_432i64,
        "modificationTime": mtime_ms,
        "accessTime": mtime_ms,
        "permission": {"version": 1, "userAction": "ALL", "groupAction": "READ_EXECUTE",
                       "otherAction": "READ_EXECUTE", "stickyBit": false},
        "owner": "hudi",
        "group": "hudi",
        "symlink": null,
    })
}

/// A Parquet file of some of the columns of `file` (a flat file: every column a leaf of the
/// root), in row order, with the key-value metadata `kv`.
fn columns_of(
    reader: &SerializedFileReader<std::fs::File>,
    keep: &dyn Fn(&str) -> bool,
    kv: Vec<KeyValue>,
) -> Result<Vec<u8>> {
    let root = reader.metadata().file_metadata().schema();
    let fields: Vec<Arc<Type>> = root
        .get_fields()
        .iter()
        .filter(|f| keep(f.name()))
        .cloned()
        .collect();
    let names: Vec<String> = fields.iter().map(|f| f.name().to_string()).collect();
    let schema = Type::group_type_builder(root.name())
        .with_fields(fields.clone())
        .build()
        .map_err(|e| io("parquet schema", e))?;
    let mut columns: Vec<Vec<PqField>> = vec![Vec::new(); names.len()];
    for row in reader
        .get_row_iter(None)
        .map_err(|e| io("parquet rows", e))?
    {
        let row = row.map_err(|e| io("parquet row", e))?;
        for (name, v) in row.get_column_iter() {
            if let Some(i) = names.iter().position(|n| n == name) {
                columns[i].push(v.clone());
            }
        }
    }
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(::parquet::basic::Compression::SNAPPY)
            .set_key_value_metadata(Some(kv))
            .build(),
    );
    let mut w = SerializedFileWriter::new(Vec::new(), Arc::new(schema), props)
        .map_err(|e| io("parquet writer", e))?;
    let mut rg = w.next_row_group().map_err(|e| io("row group", e))?;
    let mut i = 0;
    while let Some(mut col) = rg.next_column().map_err(|e| io("column", e))? {
        let (f, values) = (&fields[i], &columns[i]);
        let optional = f.get_basic_info().repetition() == Repetition::OPTIONAL;
        let levels: Vec<i16> = values
            .iter()
            .map(|v| i16::from(!matches!(v, PqField::Null)))
            .collect();
        let levels = optional.then_some(levels.as_slice());
        let r = match f.get_physical_type() {
            PhysicalType::BYTE_ARRAY => {
                let vals: Vec<ByteArray> = values
                    .iter()
                    .filter_map(|v| match v {
                        PqField::Str(s) => Some(ByteArray::from(s.as_bytes().to_vec())),
                        _ => None,
                    })
                    .collect();
                col.typed::<ByteArrayType>()
                    .write_batch(&vals, levels, None)
            }
            PhysicalType::INT64 => {
                let vals: Vec<i64> = values
                    .iter()
                    .filter_map(|v| match v {
                        PqField::Long(n) => Some(*n),
                        _ => None,
                    })
                    .collect();
                col.typed::<Int64Type>().write_batch(&vals, levels, None)
            }
            PhysicalType::DOUBLE => {
                let vals: Vec<f64> = values
                    .iter()
                    .filter_map(|v| match v {
                        PqField::Double(n) => Some(*n),
                        _ => None,
                    })
                    .collect();
                col.typed::<DoubleType>().write_batch(&vals, levels, None)
            }
            t => {
                return Err(io(
                    "bootstrap split",
                    format!("column type {t} not handled"),
                ))
            }
        };
        r.map_err(|e| io("parquet column", e))?;
        col.close().map_err(|e| io("parquet column", e))?;
        i += 1;
    }
    rg.close().map_err(|e| io("row group", e))?;
    w.into_inner().map_err(|e| io("parquet close", e))
}

/// The skeleton (meta columns, with Hudi's key-range footer) and the source file (the other
/// columns) of a base file the writer wrote whole.
fn split(bytes: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut tmp = tempfile::tempfile().map_err(|e| io("temporary file", e))?;
    tmp.write_all(bytes).map_err(|e| io("temporary file", e))?;
    tmp.rewind().map_err(|e| io("temporary file", e))?;
    let reader = SerializedFileReader::new(tmp).map_err(|e| io("parquet", e))?;
    let hudi_kv: Vec<KeyValue> = reader
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .into_iter()
        .flatten()
        .filter(|k| k.key.starts_with("hoodie") || k.key.starts_with("org.apache.hudi"))
        .cloned()
        .collect();
    let skeleton = columns_of(&reader, &|n| n.starts_with("_hoodie_"), hudi_kv)?;
    let source = columns_of(&reader, &|n| !n.starts_with("_hoodie_"), Vec::new())?;
    Ok((skeleton, source))
}

/// `HoodieBootstrapFilePartitionInfo`.
fn file_partition_info() -> Schema {
    avro::bootstrap_schemas().0
}

/// `HoodieBootstrapPartitionMetadata`.
fn partition_metadata() -> Schema {
    avro::bootstrap_schemas().1
}

/// `HoodieBootstrapIndexInfo`.
fn index_info() -> Schema {
    avro::bootstrap_schemas().2
}

impl TableWriter {
    /// Bootstrap the (new, empty) table from `partitions` (partition path → rows) the way a
    /// metadata-only bootstrap does: each partition's rows become one file group whose base file
    /// is a skeleton, and whose data is a source file written to `source` (the storage of the
    /// bootstrap base path) at `<partition>/part-<k>.parquet`; `base_uri` is how the index
    /// names that base path (`file:/…`, `s3a://bucket/…`, as Java's `Path.toUri` prints it).
    /// Later writes go on top with [`TableWriter::begin`] as usual.
    pub fn bootstrap_metadata_only(
        &mut self,
        source: &dyn StorageWrite,
        base_uri: &str,
        partitions: &[(&str, Vec<Row>)],
    ) -> Result<Vec<BootstrappedGroup>> {
        self.next_instant = Some(METADATA_BOOTSTRAP_INSTANT.to_string());
        let mut t = self.begin(self.write_action())?;
        t.set_operation("bootstrap")?;
        let mut groups = Vec::new();
        for (partition, rows) in partitions {
            let file_id = t.insert(partition, rows)?;
            groups.push((partition.to_string(), file_id));
        }
        t.complete()?;
        let base_uri = base_uri.trim_end_matches('/');
        let mtime = self.clock_ms();
        let mut out = Vec::new();
        for (k, (partition, file_id)) in groups.iter().enumerate() {
            let name = self
                .group_files(partition, file_id)
                .into_iter()
                .next()
                .ok_or_else(|| Error::Invalid(format!("no base file for {file_id}")))?;
            let rel = if name.contains('/') || partition.is_empty() {
                name.clone()
            } else {
                format!("{partition}/{name}")
            };
            let path = TablePath::new(&rel).map_err(|e| Error::Invalid(e.to_string()))?;
            let (skeleton, data) = split(&self.read(&path)?)?;
            self.put(&path, &skeleton)?;
            let src_rel = match partition.is_empty() {
                true => format!("part-{k:05}.parquet"),
                false => format!("{partition}/part-{k:05}.parquet"),
            };
            let src_path = TablePath::new(&src_rel).map_err(|e| Error::Invalid(e.to_string()))?;
            if let Some(parent) = src_path.parent().filter(|p| !p.is_root()) {
                source
                    .create_dir_all(&parent)
                    .map_err(|e| Error::io(source.describe(&parent), e))?;
            }
            source
                .put(&src_path, &data)
                .map_err(|e| Error::io(source.describe(&src_path), e))?;
            let mut rows = self.group_rows(partition, file_id).unwrap_or_default();
            rows.sort_by_key(|r| r.id);
            out.push(BootstrappedGroup {
                partition: partition.clone(),
                file_id: file_id.clone(),
                skeleton: rel,
                source: src_rel.clone(),
                rows,
            });
        }
        self.write_bootstrap_index(source, base_uri, &out, mtime)?;
        Ok(out)
    }

    /// The two index HFiles, as `HFileBootstrapIndexWriter` writes them: partitions in sorted
    /// order, file groups sorted by key, each value an Avro container of one record, and
    /// `INDEX_INFO` in the file info. (Public so that tests can write an index that lacks
    /// groups.)
    pub fn write_bootstrap_index(
        &self,
        source: &dyn StorageWrite,
        base_uri: &str,
        groups: &[BootstrappedGroup],
        mtime: i64,
    ) -> Result<()> {
        use hudifs_hfile::writer::{Options, Writer};
        let hf = |e: hudifs_hfile::HFileError| Error::Invalid(format!("bootstrap index: {e}"));
        let av = |e: String| Error::Invalid(format!("bootstrap index: {e}"));
        let status = |g: &BootstrappedGroup| -> Result<Json> {
            let p = TablePath::new(&g.source).map_err(|e| Error::Invalid(e.to_string()))?;
            let len = source
                .stat(&p)
                .map_err(|e| Error::io(source.describe(&p), e))?
                .size;
            Ok(file_status(&format!("{base_uri}/{}", g.source), len, mtime))
        };
        let new_writer = || -> Result<Writer> {
            let mut w = Writer::new(Options {
                codec: hudifs_hfile::Codec::None,
                create_time_ms: mtime,
                ..Options::default()
            })
            .map_err(hf)?;
            if self.spec().version < 8 {
                // Hudi 0.x wrote the index with HBase's writer and its own comparator.
                w.set_comparator(
                    "org.apache.hudi.common.bootstrap.index.HFileBootstrapIndex$HoodieKVComparator",
                );
            }
            Ok(w)
        };
        let source_partition = |g: &BootstrappedGroup| g.partition.clone();
        // By partition.
        let mut parts = std::collections::BTreeMap::<String, Vec<&BootstrappedGroup>>::new();
        for g in groups {
            parts.entry(g.partition.clone()).or_default().push(g);
        }
        let mut pw = new_writer()?;
        let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
        for (p, gs) in &parts {
            let mut map = serde_json::Map::new();
            for g in gs {
                map.insert(g.file_id.clone(), status(g)?);
            }
            let v = json!({"version": 1, "bootstrapPartitionPath": source_partition(gs[0]),
                           "partitionPath": p, "fileIdToBootstrapFile": Json::Object(map)});
            let bytes = avro::container(&partition_metadata(), &[v], p).map_err(av)?;
            entries.push((partition_key(p), bytes));
        }
        entries.sort();
        for (k, v) in &entries {
            pw.append(k.as_bytes(), v).map_err(hf)?;
        }
        let info = |n: usize| {
            avro::container(
                &index_info(),
                &[json!({"version": 1, "bootstrapBasePath": base_uri,
                         "createdTimestamp": mtime, "numKeys": n})],
                "INDEX_INFO",
            )
            .map_err(av)
        };
        pw.add_file_info(INDEX_INFO_KEY, info(entries.len())?);
        // By file group.
        let mut fw = new_writer()?;
        let mut entries: Vec<(String, Vec<u8>)> = Vec::new();
        for g in groups {
            let v = json!({"version": 1, "bootstrapPartitionPath": source_partition(g),
                           "bootstrapFileStatus": status(g)?, "partitionPath": g.partition});
            let bytes = avro::container(&file_partition_info(), &[v], &g.file_id).map_err(av)?;
            entries.push((file_group_key(&g.partition, &g.file_id), bytes));
        }
        entries.sort();
        for (k, v) in &entries {
            fw.append(k.as_bytes(), v).map_err(hf)?;
        }
        fw.add_file_info(INDEX_INFO_KEY, info(entries.len())?);
        for (path, w) in [(PARTITION_INDEX, pw), (FILE_ID_INDEX, fw)] {
            let p = TablePath::new(path).map_err(|e| Error::Invalid(e.to_string()))?;
            if let Some(parent) = p.parent() {
                self.store()
                    .create_dir_all(&parent)
                    .map_err(|e| Error::io(path, e))?;
            }
            self.put(&p, &w.finish().map_err(hf)?)?;
        }
        Ok(())
    }
}

/// The columns of a stitched row of a table [`bootstrapped_table`] writes: the five meta
/// columns, then the source's.
pub const STITCHED_COLUMNS: [&str; 10] = [
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
    "id",
    "name",
    "value",
    "ts",
    "city",
];

/// A table partitioned by `city` (hive style) bootstrapped from a source directory `source`:
/// `city=a` (20 rows) and `city=b` (15 rows), one file group each, the index naming the source
/// files under `base_uri` (e.g. `file:<source>`). Later writes go on top with the writer.
pub fn bootstrapped_table(
    root: &std::path::Path,
    source: &dyn StorageWrite,
    base_uri: &str,
    table_type: hudifs_core::table::TableType,
    version: u32,
) -> Result<(TableWriter, Vec<BootstrappedGroup>)> {
    let spec = TableSpec::new("boot", table_type, version)
        .partitioned_by(&["city"], true)
        .bootstrapped(base_uri);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000)?;
    let groups = w.bootstrap_metadata_only(
        source,
        base_uri,
        &[
            ("city=a", super::rows(1, 20)),
            ("city=b", super::rows(2, 15)),
        ],
    )?;
    Ok((w, groups))
}

/// The rows a stitched skeleton of `g` holds, as [`crate::support::parquet_rows`] renders them
/// (sorted by record key), from what was written: the bootstrap's meta values and the source
/// rows. The sequence number is given as `*` (compare it with [`seqno_matches`]).
pub fn stitched_rows(g: &BootstrappedGroup) -> Vec<Vec<String>> {
    use ::parquet::record::Field;
    let city = g.partition.trim_start_matches("city=").to_string();
    let name = g.skeleton.rsplit('/').next().unwrap_or("").to_string();
    let mut rows: Vec<Vec<String>> = g
        .rows
        .iter()
        .map(|r| {
            vec![
                METADATA_BOOTSTRAP_INSTANT.to_string(),
                "*".to_string(),
                r.id.to_string(),
                g.partition.clone(),
                name.clone(),
                Field::Long(r.id).to_string(),
                r.name.clone(),
                Field::Double(r.value).to_string(),
                Field::Long(r.ts).to_string(),
                city.clone(),
            ]
        })
        .collect();
    rows.sort_by(|a, b| a[2].cmp(&b[2]));
    rows
}

/// Whether rows read back equal `expected` ([`stitched_rows`]), the sequence numbers being the
/// bootstrap's (`00000000000001_…`).
pub fn seqno_matches(got: &[Vec<String>], expected: &[Vec<String>]) -> bool {
    let mut got = got.to_vec();
    got.sort_by(|a, b| a[2].cmp(&b[2]));
    got.len() == expected.len()
        && got.iter().zip(expected).all(|(g, e)| {
            g.len() == e.len()
                && g.iter().zip(e).all(|(a, b)| {
                    if b == "*" {
                        a.starts_with(&format!("{METADATA_BOOTSTRAP_INSTANT}_"))
                    } else {
                        a == b
                    }
                })
        })
}
