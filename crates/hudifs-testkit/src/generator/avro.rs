//! A tiny Avro writer for the generator: a schema model just rich enough for Hudi's timeline
//! records and the generator's data rows, a binary encoder driven by JSON values, and an object
//! container writer.
//!
//! Why not `apache_avro::Writer`: it draws a random sync marker and writes the header metadata
//! and every Avro `map` from a `HashMap`, so two runs would produce different bytes. Here maps
//! are encoded in the order of the JSON object (insertion order; callers build them sorted) and
//! the sync marker is derived from the file name, so the same table spec gives byte-identical
//! files. Readers (Java, `apache_avro`, fastavro) see an ordinary container file.
//!
//! The schemas mirror the Avro models of `org.apache.hudi.avro.model` (field names, types and
//! nullable unions as Hudi declares them); where a model has many fields the generator never
//! fills, a faithful subset is declared — Avro schema resolution gives a Java reader its
//! defaults for the rest.

use serde_json::{json, Value as Json};

/// The Avro types the generator needs.
#[derive(Debug, Clone)]
pub(crate) enum Schema {
    Null,
    Boolean,
    Int,
    Long,
    Double,
    String,
    Array(Box<Schema>),
    Map(Box<Schema>),
    Union(Vec<Schema>),
    Record(Record),
}

#[derive(Debug, Clone)]
pub(crate) struct Record {
    /// Full name, e.g. `org.apache.hudi.avro.model.HoodieCommitMetadata`.
    pub name: String,
    pub fields: Vec<Field>,
}

#[derive(Debug, Clone)]
pub(crate) struct Field {
    pub name: std::borrow::Cow<'static, str>,
    pub schema: Schema,
    pub default: Option<Json>,
}

const NS: &str = "org.apache.hudi.avro.model";

fn record(name: &str, fields: Vec<Field>) -> Schema {
    let name = if name.contains('.') {
        name.to_string()
    } else {
        format!("{NS}.{name}")
    };
    Schema::Record(Record { name, fields })
}

/// A required field.
fn req(name: &'static str, schema: Schema) -> Field {
    Field {
        name: name.into(),
        schema,
        default: None,
    }
}

/// A field of type `["null", schema]` with default null (Hudi's usual optional field).
fn opt(name: &'static str, schema: Schema) -> Field {
    Field {
        name: name.into(),
        schema: Schema::Union(vec![Schema::Null, schema]),
        default: Some(Json::Null),
    }
}

/// A field with a default value.
fn def(name: &'static str, schema: Schema, default: Json) -> Field {
    Field {
        name: name.into(),
        schema,
        default: Some(default),
    }
}

fn array(s: Schema) -> Schema {
    Schema::Array(Box::new(s))
}

fn map(s: Schema) -> Schema {
    Schema::Map(Box::new(s))
}

/// `"version": ["int", "null"], default 1` — every Hudi model carries it.
fn version_field() -> Field {
    def(
        "version",
        Schema::Union(vec![Schema::Int, Schema::Null]),
        json!(1),
    )
}

impl Schema {
    /// The schema as Avro JSON. A named record used more than once is defined at its first use
    /// and referred to by name afterwards, as Avro requires (and Java's `Schema.toString()`
    /// prints).
    pub fn to_json(&self) -> Json {
        self.to_json_named(&mut std::collections::BTreeSet::new())
    }

    fn to_json_named(&self, defined: &mut std::collections::BTreeSet<String>) -> Json {
        match self {
            Schema::Null => json!("null"),
            Schema::Boolean => json!("boolean"),
            Schema::Int => json!("int"),
            Schema::Long => json!("long"),
            Schema::Double => json!("double"),
            Schema::String => json!("string"),
            Schema::Array(items) => {
                json!({"type": "array", "items": items.to_json_named(defined)})
            }
            Schema::Map(values) => json!({"type": "map", "values": values.to_json_named(defined)}),
            Schema::Union(branches) => {
                Json::Array(branches.iter().map(|b| b.to_json_named(defined)).collect())
            }
            Schema::Record(r) if defined.contains(&r.name) => json!(r.name),
            Schema::Record(r) => {
                defined.insert(r.name.clone());
                let fields: Vec<Json> = r
                    .fields
                    .iter()
                    .map(|f| {
                        let mut o = serde_json::Map::new();
                        o.insert("name".into(), json!(f.name));
                        o.insert("type".into(), f.schema.to_json_named(defined));
                        if let Some(d) = &f.default {
                            o.insert("default".into(), d.clone());
                        }
                        Json::Object(o)
                    })
                    .collect();
                json!({"type": "record", "name": r.name, "fields": fields})
            }
        }
    }

    /// The schema as the compact JSON text that goes into file headers.
    pub fn to_text(&self) -> String {
        self.to_json().to_string()
    }

    /// Whether a JSON value can be encoded with this schema (used to pick a union branch).
    fn accepts(&self, v: &Json) -> bool {
        match self {
            Schema::Null => v.is_null(),
            Schema::Boolean => v.is_boolean(),
            Schema::Int => v.as_i64().is_some_and(|n| i32::try_from(n).is_ok()),
            Schema::Long => v.is_i64() || v.is_u64(),
            Schema::Double => v.is_number(),
            Schema::String => v.is_string(),
            Schema::Array(_) => v.is_array(),
            Schema::Map(_) | Schema::Record(_) => v.is_object(),
            Schema::Union(b) => b.iter().any(|s| s.accepts(v)),
        }
    }

    /// Append the Avro binary encoding of `v` to `out`.
    pub fn encode(&self, v: &Json, out: &mut Vec<u8>) -> Result<(), String> {
        let mismatch = || format!("value {v} does not match Avro type {}", self.to_json());
        match self {
            Schema::Null => {
                if !v.is_null() {
                    return Err(mismatch());
                }
            }
            Schema::Boolean => out.push(u8::from(v.as_bool().ok_or_else(mismatch)?)),
            Schema::Int | Schema::Long => {
                if !self.accepts(v) {
                    return Err(mismatch());
                }
                write_long(out, v.as_i64().ok_or_else(mismatch)?);
            }
            Schema::Double => {
                out.extend_from_slice(&v.as_f64().ok_or_else(mismatch)?.to_le_bytes())
            }
            Schema::String => write_bytes(out, v.as_str().ok_or_else(mismatch)?.as_bytes()),
            Schema::Array(items) => {
                let a = v.as_array().ok_or_else(mismatch)?;
                if !a.is_empty() {
                    write_long(out, a.len() as i64);
                    for item in a {
                        items.encode(item, out)?;
                    }
                }
                write_long(out, 0);
            }
            Schema::Map(values) => {
                let m = v.as_object().ok_or_else(mismatch)?;
                if !m.is_empty() {
                    write_long(out, m.len() as i64);
                    for (k, item) in m {
                        write_bytes(out, k.as_bytes());
                        values.encode(item, out)?;
                    }
                }
                write_long(out, 0);
            }
            Schema::Union(branches) => {
                let (i, s) = branches
                    .iter()
                    .enumerate()
                    .find(|(_, s)| s.accepts(v))
                    .ok_or_else(mismatch)?;
                write_long(out, i as i64);
                s.encode(v, out)?;
            }
            Schema::Record(r) => {
                let o = v.as_object().ok_or_else(mismatch)?;
                for f in &r.fields {
                    let fv = match (o.get(&*f.name), &f.default) {
                        (Some(x), _) => x,
                        (None, Some(d)) => d,
                        (None, None) => {
                            return Err(format!("{}: required field {} missing", r.name, f.name))
                        }
                    };
                    f.schema
                        .encode(fv, out)
                        .map_err(|e| format!("{}.{}: {e}", r.name, f.name))?;
                }
            }
        }
        Ok(())
    }
}

/// Zig-zag varint, as Avro encodes `int` and `long`.
fn write_long(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn write_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_long(out, b.len() as i64);
    out.extend_from_slice(b);
}

/// Encode one datum (no container): what a Hudi log data block holds per record.
pub(crate) fn datum(schema: &Schema, v: &Json) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    schema.encode(v, &mut out)?;
    Ok(out)
}

/// An Avro object container file holding the given records, uncompressed (codec `null`), with
/// a sync marker derived from `seed` (e.g. the file name).
pub(crate) fn container(schema: &Schema, records: &[Json], seed: &str) -> Result<Vec<u8>, String> {
    let mut out = b"Obj\x01".to_vec();
    // File metadata: a map of bytes. Keys in a fixed order.
    write_long(&mut out, 2);
    write_bytes(&mut out, b"avro.schema");
    write_bytes(&mut out, schema.to_text().as_bytes());
    write_bytes(&mut out, b"avro.codec");
    write_bytes(&mut out, b"null");
    write_long(&mut out, 0);
    let marker = sync_marker(seed);
    out.extend_from_slice(&marker);
    if !records.is_empty() {
        let mut block = Vec::new();
        for r in records {
            schema.encode(r, &mut block)?;
        }
        write_long(&mut out, records.len() as i64);
        write_long(&mut out, block.len() as i64);
        out.extend_from_slice(&block);
        out.extend_from_slice(&marker);
    }
    Ok(out)
}

fn sync_marker(seed: &str) -> [u8; 16] {
    let mut rng = super::SplitMix64::new(super::fnv1a(seed.as_bytes()));
    let mut m = [0u8; 16];
    m[..8].copy_from_slice(&rng.next_u64().to_be_bytes());
    m[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
    m
}

// ---------------------------------------------------------------------------------------------
// Hudi's timeline models.

/// `HoodieWriteStat`, all fields Hudi 1.x declares except `runtimeStats` (`cdcStats` is
/// declared where Hudi's `HoodieCommitMetadata.avsc` has it: after `logFiles`, a nullable map of
/// long).
fn write_stat() -> Schema {
    let s = || Schema::String;
    let l = || Schema::Long;
    record(
        "HoodieWriteStat",
        vec![
            opt("fileId", s()),
            opt("path", s()),
            opt("prevCommit", s()),
            opt("numWrites", l()),
            opt("numDeletes", l()),
            opt("numUpdateWrites", l()),
            opt("totalWriteBytes", l()),
            opt("totalWriteErrors", l()),
            opt("partitionPath", s()),
            opt("totalLogRecords", l()),
            opt("totalLogFiles", l()),
            opt("totalUpdatedRecordsCompacted", l()),
            opt("numInserts", l()),
            opt("totalLogBlocks", l()),
            opt("totalCorruptLogBlock", l()),
            opt("totalRollbackBlocks", l()),
            opt("fileSizeInBytes", l()),
            opt("logVersion", Schema::Int),
            opt("logOffset", l()),
            opt("baseFile", s()),
            opt("logFiles", array(s())),
            opt("cdcStats", map(l())),
            opt("prevBaseFile", s()),
            opt("minEventTime", l()),
            opt("maxEventTime", l()),
            opt("totalLogFilesCompacted", l()),
            opt("totalLogReadTimeMs", l()),
            opt("totalLogSizeCompacted", l()),
            opt("tempPath", s()),
            opt("numUpdates", l()),
        ],
    )
}

fn commit_fields() -> Vec<Field> {
    vec![
        opt("partitionToWriteStats", map(array(write_stat()))),
        opt("compacted", Schema::Boolean),
        opt("extraMetadata", map(Schema::String)),
        version_field(),
        opt("operationType", Schema::String),
    ]
}

/// `HoodieCommitMetadata` (completed commit/deltacommit in layout 2, and every inflight
/// workload profile of layout 2).
pub(crate) fn commit_metadata() -> Schema {
    record("HoodieCommitMetadata", commit_fields())
}

/// `HoodieReplaceCommitMetadata`: the commit fields plus `partitionToReplaceFileIds`.
pub(crate) fn replace_commit_metadata() -> Schema {
    let mut fields = commit_fields();
    fields.push(opt("partitionToReplaceFileIds", map(array(Schema::String))));
    record("HoodieReplaceCommitMetadata", fields)
}

/// `HoodieRequestedReplaceMetadata` (the `.replacecommit.requested` of an insert-overwrite).
/// The clustering plan is declared with a subset of its fields; the generator always writes
/// null there (it is not a clustering).
pub(crate) fn requested_replace_metadata() -> Schema {
    let plan = record(
        "HoodieClusteringPlan",
        vec![opt("extraMetadata", map(Schema::String)), version_field()],
    );
    record(
        "HoodieRequestedReplaceMetadata",
        vec![
            opt("operationType", Schema::String),
            opt("clusteringPlan", plan),
            opt("extraMetadata", map(Schema::String)),
            version_field(),
        ],
    )
}

/// `HoodieCompactionPlan` with `HoodieCompactionOperation`s.
pub(crate) fn compaction_plan() -> Schema {
    let s = || Schema::String;
    let op = record(
        "HoodieCompactionOperation",
        vec![
            req("baseInstantTime", Schema::Union(vec![Schema::Null, s()])),
            opt("deltaFilePaths", array(s())),
            opt("dataFilePath", s()),
            req("fileId", Schema::Union(vec![Schema::Null, s()])),
            opt("partitionPath", s()),
            opt("metrics", map(Schema::Double)),
            opt("bootstrapFilePath", s()),
        ],
    );
    record(
        "HoodieCompactionPlan",
        vec![
            opt("operations", array(op)),
            opt("extraMetadata", map(s())),
            version_field(),
            def(
                "preserveHoodieMetadata",
                Schema::Union(vec![Schema::Boolean, Schema::Null]),
                json!(false),
            ),
            opt("missingSchedulePartitions", array(s())),
        ],
    )
}

/// `HoodieCleanerPlan` (`.clean.requested` / `.clean.inflight`).
pub(crate) fn cleaner_plan() -> Schema {
    let s = || Schema::String;
    let action_instant = record(
        "HoodieActionInstant",
        vec![req("timestamp", s()), req("action", s()), req("state", s())],
    );
    let file_info = record(
        "HoodieCleanFileInfo",
        vec![
            opt("filePath", s()),
            opt("isBootstrapBaseFile", Schema::Boolean),
        ],
    );
    record(
        "HoodieCleanerPlan",
        vec![
            opt("earliestInstantToRetain", action_instant),
            def("lastCompletedCommitTimestamp", s(), json!("")),
            req("policy", s()),
            opt("filesToBeDeletedPerPartition", map(array(s()))),
            version_field(),
            opt("filePathsToBeDeletedPerPartition", map(array(file_info))),
            opt("partitionsToBeDeleted", array(s())),
        ],
    )
}

/// `HoodieCleanMetadata` with `HoodieCleanPartitionMetadata` (completed clean).
pub(crate) fn clean_metadata() -> Schema {
    let s = || Schema::String;
    let part = record(
        "HoodieCleanPartitionMetadata",
        vec![
            req("partitionPath", s()),
            req("policy", s()),
            req("deletePathPatterns", array(s())),
            req("successDeleteFiles", array(s())),
            req("failedDeleteFiles", array(s())),
            opt("isPartitionDeleted", Schema::Boolean),
        ],
    );
    record(
        "HoodieCleanMetadata",
        vec![
            def("policy", s(), json!("")),
            req("startCleanTime", s()),
            req("timeTakenInMillis", Schema::Long),
            req("totalFilesDeleted", Schema::Int),
            req("earliestCommitToRetain", s()),
            def("lastCompletedCommitTimestamp", s(), json!("")),
            req("partitionMetadata", map(part)),
            version_field(),
        ],
    )
}

fn instant_info() -> Schema {
    record(
        "HoodieInstantInfo",
        vec![
            req("commitTime", Schema::String),
            req("action", Schema::String),
        ],
    )
}

/// `HoodieRollbackPlan` (`.rollback.requested`).
pub(crate) fn rollback_plan() -> Schema {
    let s = || Schema::String;
    let request = record(
        "HoodieRollbackRequest",
        vec![
            req("partitionPath", s()),
            opt("fileId", s()),
            opt("latestBaseInstant", s()),
            def("filesToBeDeleted", array(s()), json!([])),
            opt("logBlocksToBeDeleted", map(Schema::Long)),
        ],
    );
    record(
        "HoodieRollbackPlan",
        vec![
            opt("instantToRollback", instant_info()),
            opt("RollbackRequests", array(request)),
            version_field(),
        ],
    )
}

/// `HoodieRollbackMetadata` with `HoodieRollbackPartitionMetadata` (completed rollback).
pub(crate) fn rollback_metadata() -> Schema {
    let s = || Schema::String;
    let part = record(
        "HoodieRollbackPartitionMetadata",
        vec![
            req("partitionPath", s()),
            req("successDeleteFiles", array(s())),
            req("failedDeleteFiles", array(s())),
            opt("rollbackLogFiles", map(Schema::Long)),
            opt("logFilesFromFailedCommit", map(Schema::Long)),
        ],
    );
    record(
        "HoodieRollbackMetadata",
        vec![
            req("startRollbackTime", s()),
            req("timeTakenInMillis", Schema::Long),
            req("totalFilesDeleted", Schema::Int),
            req("commitsRollback", array(s())),
            req("partitionMetadata", map(part)),
            version_field(),
            def("instantsRollback", array(instant_info()), json!([])),
        ],
    )
}

/// `HoodieSavepointMetadata` with `HoodieSavepointPartitionMetadata`.
pub(crate) fn savepoint_metadata() -> Schema {
    let s = || Schema::String;
    let part = record(
        "HoodieSavepointPartitionMetadata",
        vec![
            req("partitionPath", s()),
            req("savepointDataFile", array(s())),
        ],
    );
    record(
        "HoodieSavepointMetadata",
        vec![
            req("savepointedBy", s()),
            req("savepointedAt", Schema::Long),
            req("comments", s()),
            req("partitionMetadata", map(part)),
            version_field(),
        ],
    )
}

/// `HoodieArchivedMetaEntry`: one record per archived timeline file of a layout-1 table (what
/// `MetadataConversionUtils.createMetaWrapper` of Hudi 0.14/0.15 fills), with the nested models
/// above. Left out, as a reader's schema resolution defaults them to null:
/// `hoodieCompactionMetadata` (deprecated, never written) and `hoodieIndexCommitMetadata`
/// (async indexing, which the generator does not do).
pub(crate) fn archived_meta_entry() -> Schema {
    let s = || Schema::String;
    record(
        "HoodieArchivedMetaEntry",
        vec![
            opt("hoodieCommitMetadata", commit_metadata()),
            opt("hoodieCleanMetadata", clean_metadata()),
            opt("hoodieRollbackMetadata", rollback_metadata()),
            opt("hoodieSavePointMetadata", savepoint_metadata()),
            opt("commitTime", s()),
            opt("actionType", s()),
            version_field(),
            opt("hoodieCompactionPlan", compaction_plan()),
            opt("hoodieCleanerPlan", cleaner_plan()),
            opt("actionState", s()),
            opt("hoodieReplaceCommitMetadata", replace_commit_metadata()),
            opt(
                "hoodieRequestedReplaceMetadata",
                requested_replace_metadata(),
            ),
            opt("HoodieInflightReplaceMetadata", commit_metadata()),
            opt("stateTransitionTime", s()),
        ],
    )
}

/// `HoodieLSMTimelineInstant`: a row of the layout-2 LSM timeline (the Avro schema parquet-avro
/// stores in the Parquet footer; `bytes` fields are written as Parquet binary columns).
pub(crate) fn lsm_timeline_instant_schema_text() -> String {
    json!({
        "type": "record",
        "name": "HoodieLSMTimelineInstant",
        "namespace": NS,
        "fields": [
            {"name": "instantTime", "type": ["null", "string"], "default": null},
            {"name": "completionTime", "type": ["null", "string"], "default": null},
            {"name": "action", "type": ["null", "string"], "default": null},
            {"name": "metadata", "type": ["null", "bytes"], "default": null},
            {"name": "plan", "type": ["null", "bytes"], "default": null},
            {"name": "version", "type": "int", "default": 1},
        ]
    })
    .to_string()
}

/// `HoodiePath`, `HoodieFSPermission` and `HoodieFileStatus` as the bootstrap index's models
/// use them, and the three models: `HoodieBootstrapFilePartitionInfo` (the file-id index's
/// values), `HoodieBootstrapPartitionMetadata` (the partition index's) and
/// `HoodieBootstrapIndexInfo` (both files' `INDEX_INFO`).
pub(crate) fn bootstrap_schemas() -> (Schema, Schema, Schema) {
    let s = || Schema::String;
    let path = || record("HoodiePath", vec![version_field(), opt("uri", s())]);
    let permission = record(
        "HoodieFSPermission",
        vec![
            version_field(),
            opt("userAction", s()),
            opt("groupAction", s()),
            opt("otherAction", s()),
            opt("stickyBit", Schema::Boolean),
        ],
    );
    let status = record(
        "HoodieFileStatus",
        vec![
            version_field(),
            opt("path", path()),
            opt("length", Schema::Long),
            opt("isDir", Schema::Boolean),
            opt("blockReplication", Schema::Int),
            opt("blockSize", Schema::Long),
            opt("modificationTime", Schema::Long),
            opt("accessTime", Schema::Long),
            opt("permission", permission),
            opt("owner", s()),
            opt("group", s()),
            opt("symlink", path()),
        ],
    );
    let file_info = record(
        "HoodieBootstrapFilePartitionInfo",
        vec![
            version_field(),
            opt("bootstrapPartitionPath", s()),
            opt("bootstrapFileStatus", status.clone()),
            opt("partitionPath", s()),
        ],
    );
    let partition = record(
        "HoodieBootstrapPartitionMetadata",
        vec![
            version_field(),
            opt("bootstrapPartitionPath", s()),
            opt("partitionPath", s()),
            opt("fileIdToBootstrapFile", map(status)),
        ],
    );
    let info = record(
        "HoodieBootstrapIndexInfo",
        vec![
            version_field(),
            opt("bootstrapBasePath", s()),
            opt("createdTimestamp", Schema::Long),
            opt("numKeys", Schema::Int),
        ],
    );
    (file_info, partition, info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag() {
        for (n, bytes) in [
            (0i64, vec![0u8]),
            (-1, vec![1]),
            (1, vec![2]),
            (-64, vec![0x7f]),
            (64, vec![0x80, 0x01]),
        ] {
            let mut out = Vec::new();
            write_long(&mut out, n);
            assert_eq!(out, bytes, "{n}");
        }
    }

    #[test]
    fn containers_read_back_with_apache_avro() {
        for (schema, value) in [
            (
                commit_metadata(),
                json!({"partitionToWriteStats": {"p": [{"fileId": "f", "numWrites": 3,
                       "logFiles": ["a", "b"]}]}, "compacted": false, "operationType": "UPSERT"}),
            ),
            (
                clean_metadata(),
                json!({"startCleanTime": "1", "timeTakenInMillis": 0, "totalFilesDeleted": 0,
                       "earliestCommitToRetain": "0", "partitionMetadata": {}}),
            ),
            (rollback_plan(), json!({"instantToRollback": null})),
            (requested_replace_metadata(), json!({})),
        ] {
            let bytes = container(&schema, std::slice::from_ref(&value), "x").unwrap();
            let reader = apache_avro::Reader::new(&bytes[..]).unwrap();
            let records: Vec<_> = reader.collect::<Result<_, _>>().unwrap();
            assert_eq!(records.len(), 1);
            // And through the reading half of hudifs.
            let v = hudifs_core::metadata::decode(&bytes).unwrap();
            assert!(v.is_object(), "{v}");
        }
        assert!(datum(&commit_metadata(), &json!({"compacted": 3})).is_err());
        assert!(datum(&clean_metadata(), &json!({})).is_err());
    }
}
