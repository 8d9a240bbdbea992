//! Instant metadata: the bytes of a timeline file → JSON (0.x commit metadata is JSON; every
//! Hudi 1.x file and every plan is an Avro object container file), and the few facts the views
//! need from it (spec §2.6).

use serde_json::Value;

/// Decode an instant file's bytes to JSON. An empty file is a legal empty instant and decodes to
/// an empty object.
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Value::Object(Default::default()));
    }
    if bytes.starts_with(b"Obj\x01") {
        return decode_avro(bytes);
    }
    serde_json::from_slice(bytes).map_err(|e| format!("not JSON and not Avro: {e}"))
}

/// The largest length an Avro length prefix or item count may announce (apache-avro checks
/// both against it before allocating). Instant metadata blocks are far smaller; a corrupt or
/// crafted length must not make the daemon reserve unbounded memory. A count is of values, so
/// one crafted count can still reserve this many values' worth of address space (a few GB for
/// a map's hash table), most of it never touched; a lower cap would refuse real commits whose
/// metadata record is tens of MB.
const AVRO_MAX_ALLOCATION: usize = 32 << 20;

fn decode_avro(bytes: &[u8]) -> Result<Value, String> {
    apache_avro::max_allocation_bytes(AVRO_MAX_ALLOCATION);
    // The Avro library can panic on some malformed inputs; bad input must never take the
    // daemon down, so a panic is one more way of being unreadable.
    std::panic::catch_unwind(|| decode_avro_unguarded(bytes))
        .unwrap_or_else(|_| Err("malformed Avro (the decoder gave up)".to_string()))
}

/// An instant file holds one record; a container announcing more (a corrupt block count can
/// announce `usize::MAX` records that decode from zero bytes) is not an instant file.
const AVRO_MAX_RECORDS: usize = 64;

/// Whether a schema refers to a record type from inside that type (decoding such a schema
/// recurses once per nesting level of the data, so crafted data overflows the stack).
fn is_recursive(schema: &apache_avro::Schema) -> bool {
    use apache_avro::Schema as S;
    fn walk(s: &apache_avro::Schema, path: &mut Vec<String>) -> bool {
        match s {
            S::Ref { name } => path.contains(&name.fullname(None)),
            S::Record(r) => {
                path.push(r.name.fullname(None));
                let rec = r.fields.iter().any(|f| walk(&f.schema, path));
                path.pop();
                rec
            }
            S::Array(a) => walk(&a.items, path),
            S::Map(m) => walk(&m.types, path),
            S::Union(u) => u.variants().iter().any(|v| walk(v, path)),
            _ => false,
        }
    }
    walk(schema, &mut Vec::new())
}

fn decode_avro_unguarded(bytes: &[u8]) -> Result<Value, String> {
    let reader = apache_avro::Reader::new(bytes).map_err(|e| format!("bad Avro container: {e}"))?;
    if is_recursive(reader.writer_schema()) {
        return Err("recursive Avro schema (no Hudi instant metadata is recursive)".to_string());
    }
    let mut records = Vec::new();
    for value in reader {
        if records.len() >= AVRO_MAX_RECORDS {
            return Err(format!("more than {AVRO_MAX_RECORDS} Avro records"));
        }
        let value = value.map_err(|e| format!("bad Avro record: {e}"))?;
        records.push(avro_to_json(value)?);
    }
    match records.len() {
        0 => Ok(Value::Object(Default::default())),
        1 => Ok(records.pop().unwrap_or(Value::Null)),
        _ => Ok(Value::Array(records)),
    }
}

/// An Avro value as JSON, in the shape Java's `GenericRecord.toString()` gives: unions are
/// flattened to their value, records and maps become objects (map keys sorted, so that the
/// result does not depend on hash order), enums become their symbol.
pub fn avro_to_json(v: apache_avro::types::Value) -> Result<Value, String> {
    use apache_avro::types::Value as A;
    Ok(match v {
        A::Null => Value::Null,
        A::Boolean(b) => Value::Bool(b),
        A::Int(i) | A::Date(i) | A::TimeMillis(i) => Value::from(i),
        A::Long(i)
        | A::TimeMicros(i)
        | A::TimestampMillis(i)
        | A::TimestampMicros(i)
        | A::TimestampNanos(i)
        | A::LocalTimestampMillis(i)
        | A::LocalTimestampMicros(i)
        | A::LocalTimestampNanos(i) => Value::from(i),
        A::Float(f) => serde_json::Number::from_f64(f as f64)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        A::Double(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        A::String(s) | A::Enum(_, s) => Value::String(s),
        A::Uuid(u) => Value::String(u.to_string()),
        A::Bytes(b) | A::Fixed(_, b) => Value::Array(b.into_iter().map(Value::from).collect()),
        A::Union(_, inner) => avro_to_json(*inner)?,
        A::Array(items) => Value::Array(
            items
                .into_iter()
                .map(avro_to_json)
                .collect::<Result<_, _>>()?,
        ),
        A::Map(m) => {
            let mut entries: Vec<_> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| Ok((k, avro_to_json(v)?)))
                    .collect::<Result<_, String>>()?,
            )
        }
        A::Record(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| Ok((k, avro_to_json(v)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => Value::String(format!("{other:?}")),
    })
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// One write stat of a commit: the file group it wrote and the file it wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteStat {
    pub partition: String,
    pub file_id: String,
    /// The file this instant wrote, relative to the table root (absent in inflight profiles).
    pub path: Option<String>,
}

impl WriteStat {
    /// The file name of `path` (its last component).
    pub fn file_name(&self) -> Option<&str> {
        self.path
            .as_deref()
            .map(|p| p.rsplit('/').next().unwrap_or(p))
    }
}

/// The facts of `HoodieCommitMetadata` / `HoodieReplaceCommitMetadata` the views use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitMetadata {
    pub operation_type: Option<String>,
    pub write_stats: Vec<WriteStat>,
    /// `(partition, fileId)` of every file group a replacecommit replaced.
    pub replaced: Vec<(String, String)>,
}

impl CommitMetadata {
    pub fn from_json(v: &Value) -> Result<CommitMetadata, String> {
        if !v.is_object() {
            return Err("commit metadata is not an object".into());
        }
        let mut out = CommitMetadata {
            operation_type: str_field(v, "operationType").map(str::to_string),
            ..Default::default()
        };
        match v.get("partitionToWriteStats") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (partition, stats) in m {
                    let Some(stats) = stats.as_array() else {
                        return Err(format!(
                            "write stats of partition {partition:?} are not a list"
                        ));
                    };
                    for s in stats {
                        let Some(file_id) = str_field(s, "fileId") else {
                            continue;
                        };
                        out.write_stats.push(WriteStat {
                            partition: partition.clone(),
                            file_id: file_id.to_string(),
                            path: str_field(s, "path").map(str::to_string),
                        });
                    }
                }
            }
            Some(_) => return Err("partitionToWriteStats is not a map".into()),
        }
        match v.get("partitionToReplaceFileIds") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (partition, ids) in m {
                    let Some(ids) = ids.as_array() else {
                        return Err(format!(
                            "replaced file ids of partition {partition:?} are not a list"
                        ));
                    };
                    for id in ids.iter().filter_map(Value::as_str) {
                        out.replaced.push((partition.clone(), id.to_string()));
                    }
                }
            }
            Some(_) => return Err("partitionToReplaceFileIds is not a map".into()),
        }
        Ok(out)
    }
}

/// `(partition, fileId)` of every operation of a compaction plan (`HoodieCompactionPlan`).
pub fn compaction_plan_groups(v: &Value) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    match v.get("operations") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ops)) => {
            for op in ops {
                let (Some(p), Some(f)) = (
                    op.get("partitionPath").and_then(Value::as_str),
                    str_field(op, "fileId"),
                ) else {
                    return Err("compaction operation without partitionPath/fileId".into());
                };
                out.push((p.to_string(), f.to_string()));
            }
        }
        Some(_) => return Err("compaction plan operations are not a list".into()),
    }
    Ok(out)
}

/// Whether a requested replacecommit/clustering file holds a clustering plan.
pub fn is_clustering_request(v: &Value) -> bool {
    str_field(v, "operationType") == Some("CLUSTER")
        || v.get("clusteringPlan").is_some_and(|p| !p.is_null())
}

/// The cleaner's retention bound of a completed clean (`earliestCommitToRetain`); `None` when
/// the field is empty (file-versions policy).
pub fn clean_earliest_to_retain(v: &Value) -> Option<String> {
    // Clean metadata names the instant; a cleaner plan gives it as a HoodieActionInstant record.
    str_field(v, "earliestCommitToRetain")
        .or_else(|| str_field(v, "earliestInstantToRetain"))
        .or_else(|| {
            v.get("earliestInstantToRetain")
                .and_then(|i| str_field(i, "timestamp"))
        })
        .map(str::to_string)
}

/// Files a rollback deleted or wrote (command-block logs), and the logs of the failed commit, as
/// `(partition, file name)`.
pub fn rollback_files(v: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(parts) = v.get("partitionMetadata").and_then(Value::as_object) else {
        return out;
    };
    let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    for (partition, pm) in parts {
        for key in ["rollbackLogFiles", "logFilesFromFailedCommit"] {
            match pm.get(key) {
                Some(Value::Object(m)) => {
                    out.extend(m.keys().map(|k| (partition.clone(), name(k))));
                }
                Some(Value::Array(a)) => {
                    out.extend(
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(|k| (partition.clone(), name(k))),
                    );
                }
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_json() {
        assert_eq!(decode(b"").unwrap(), serde_json::json!({}));
        let v = decode(
            br#"{"partitionToWriteStats":{"10":[{"fileId":"f1","path":"10/f1_0-1-2_1.parquet"},{"fileId":""}]},
                 "partitionToReplaceFileIds":{"20":["g1"]},"operationType":"INSERT_OVERWRITE"}"#,
        )
        .unwrap();
        let m = CommitMetadata::from_json(&v).unwrap();
        assert_eq!(m.operation_type.as_deref(), Some("INSERT_OVERWRITE"));
        assert_eq!(m.write_stats.len(), 1);
        assert_eq!(m.write_stats[0].file_name(), Some("f1_0-1-2_1.parquet"));
        assert_eq!(m.replaced, vec![("20".to_string(), "g1".to_string())]);
        assert!(decode(b"{\"partitionToWriteSta").is_err());
        assert!(decode(b"Obj\x01garbage").is_err());
        // Found by fuzzing: a block count of -1 over records that decode from zero bytes (an
        // endless loop), and a recursive schema with deeply nested data (a stack overflow).
        let hex = |h: &str| -> Vec<u8> {
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
                .collect()
        };
        let endless = hex("4f626a0102166176726f2e736368656d610c226e756c6c220053535353535353535353535353535353010053535353535353535353535353535353");
        assert!(decode(&endless).is_err());
        let mut deep = hex("4f626a0102166176726f2e736368656d61a2017b2274797065223a20227265636f7264222c20226e616d65223a20226e222c20226669656c6473223a205b7b226e616d65223a202278222c202274797065223a205b226e756c6c222c20226e225d7d5d7d00");
        deep.extend(std::iter::repeat_n(0x53u8, 16));
        deep.extend(hex("02a21f"));
        deep.extend(std::iter::repeat_n(0x02u8, 2000));
        deep.push(0);
        deep.extend(std::iter::repeat_n(0x53u8, 16));
        assert!(decode(&deep).unwrap_err().contains("recursive"));
        assert!(CommitMetadata::from_json(&serde_json::json!([1])).is_err());
        assert!(
            CommitMetadata::from_json(&serde_json::json!({"partitionToWriteStats": 3})).is_err()
        );
    }
}
