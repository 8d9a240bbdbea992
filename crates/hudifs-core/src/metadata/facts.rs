//! The facts of decoded instant metadata the views use (SEMANTICS.md §1.9): write stats,
//! replaced file groups, compaction plans, the cleaner's retention bound, rollbacks.

use serde_json::Value;

use super::DecodeError;
use crate::ids::{FileGroupId, FileRef};
use crate::instant_time::InstantTime;

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// A count of a write stat: a number, or an Avro union's `{"long": n}` as decoded.
fn num_field(v: &Value, key: &str) -> Option<u64> {
    match v.get(key)? {
        Value::Object(m) => m.values().next().and_then(Value::as_u64),
        n => n.as_u64(),
    }
}

/// `cdcStats` of a write stat: a map of CDC log paths to sizes (an Avro union's `{"map": …}`
/// as decoded, or a plain object); anything else is none.
fn cdc_stats(v: &Value) -> Vec<(String, u64)> {
    let m = match v.get("cdcStats") {
        Some(Value::Object(m)) if m.len() == 1 && m.contains_key("map") => m.get("map"),
        other => other,
    };
    let Some(Value::Object(m)) = m else {
        return Vec::new();
    };
    let mut out: Vec<(String, u64)> = m
        .iter()
        .filter(|(k, _)| !k.is_empty())
        .map(|(k, n)| {
            let size = match n {
                Value::Object(u) => u.values().next().and_then(Value::as_u64),
                n => n.as_u64(),
            };
            (k.clone(), size.unwrap_or(0))
        })
        .collect();
    out.sort();
    out
}

/// One write stat of a commit: the file group it wrote and the file it wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteStat {
    pub partition: String,
    pub file_id: String,
    /// The file this instant wrote, relative to the table root (absent in inflight profiles).
    pub path: Option<String>,
    /// Records it inserted and updated (`numInserts` + `numUpdateWrites`), where the stat says:
    /// 0 for a write that only deleted (or copied) records of the group.
    pub written: Option<u64>,
    /// The CDC log files it wrote for the group (`cdcStats`: table-relative path and size), on
    /// tables with `hoodie.table.cdc.enabled`.
    pub cdc_files: Vec<(String, u64)>,
}

impl WriteStat {
    /// The file group written.
    pub fn group(&self) -> FileGroupId {
        FileGroupId::new(&self.partition, &self.file_id)
    }

    /// The file written, by partition and file name.
    pub fn file(&self) -> Option<FileRef> {
        self.file_name().map(|n| FileRef::new(&self.partition, n))
    }

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
    /// Every file group a replacecommit replaced.
    pub replaced: Vec<FileGroupId>,
    /// The table schema the write wrote under (`extraMetadata.schema`, Avro JSON text), where
    /// it recorded one.
    pub schema: Option<std::sync::Arc<str>>,
    /// Schema-on-read: the `InternalSchema` the write wrote under
    /// (`extraMetadata.latestSchema`, Java's `SerDeHelper.LATEST_SCHEMA`), where it recorded
    /// one.
    pub internal_schema: Option<std::sync::Arc<str>>,
}

impl CommitMetadata {
    pub fn from_json(v: &Value) -> Result<CommitMetadata, DecodeError> {
        if !v.is_object() {
            return Err(DecodeError::Shape(
                "commit metadata is not an object".into(),
            ));
        }
        let mut out = CommitMetadata {
            operation_type: str_field(v, "operationType").map(str::to_string),
            schema: v
                .get("extraMetadata")
                .and_then(|e| e.get("schema"))
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(std::sync::Arc::from),
            internal_schema: v
                .get("extraMetadata")
                .and_then(|e| e.get("latestSchema"))
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(std::sync::Arc::from),
            ..Default::default()
        };
        match v.get("partitionToWriteStats") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (partition, stats) in m {
                    let Some(stats) = stats.as_array() else {
                        return Err(DecodeError::Shape(format!(
                            "write stats of partition {partition:?} are not a list"
                        )));
                    };
                    for s in stats {
                        let Some(file_id) = str_field(s, "fileId") else {
                            continue;
                        };
                        let inserts = num_field(s, "numInserts");
                        let updates = num_field(s, "numUpdateWrites");
                        out.write_stats.push(WriteStat {
                            partition: partition.clone(),
                            file_id: file_id.to_string(),
                            path: str_field(s, "path").map(str::to_string),
                            written: inserts.zip(updates).map(|(i, u)| i.saturating_add(u)),
                            cdc_files: cdc_stats(s),
                        });
                    }
                }
            }
            Some(_) => {
                return Err(DecodeError::Shape(
                    "partitionToWriteStats is not a map".into(),
                ))
            }
        }
        match v.get("partitionToReplaceFileIds") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (partition, ids) in m {
                    let Some(ids) = ids.as_array() else {
                        return Err(DecodeError::Shape(format!(
                            "replaced file ids of partition {partition:?} are not a list"
                        )));
                    };
                    for id in ids.iter().filter_map(Value::as_str) {
                        out.replaced.push(FileGroupId::new(partition, id));
                    }
                }
            }
            Some(_) => {
                return Err(DecodeError::Shape(
                    "partitionToReplaceFileIds is not a map".into(),
                ))
            }
        }
        Ok(out)
    }
}

/// The file group of every operation of a compaction plan (`HoodieCompactionPlan`).
pub fn compaction_plan_groups(v: &Value) -> Result<Vec<FileGroupId>, DecodeError> {
    let mut out = Vec::new();
    match v.get("operations") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ops)) => {
            for op in ops {
                let (Some(p), Some(f)) = (
                    op.get("partitionPath").and_then(Value::as_str),
                    str_field(op, "fileId"),
                ) else {
                    return Err(DecodeError::Shape(
                        "compaction operation without partitionPath/fileId".into(),
                    ));
                };
                out.push(FileGroupId::new(p, f));
            }
        }
        Some(_) => {
            return Err(DecodeError::Shape(
                "compaction plan operations are not a list".into(),
            ))
        }
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
pub fn clean_earliest_to_retain(v: &Value) -> Option<InstantTime> {
    // Clean metadata names the instant; a cleaner plan gives it as a HoodieActionInstant record.
    str_field(v, "earliestCommitToRetain")
        .or_else(|| str_field(v, "earliestInstantToRetain"))
        .or_else(|| {
            v.get("earliestInstantToRetain")
                .and_then(|i| str_field(i, "timestamp"))
        })
        .and_then(InstantTime::parse)
}

/// Files a rollback deleted or wrote (command-block logs), and the logs of the failed commit.
pub fn rollback_files(v: &Value) -> Vec<FileRef> {
    let mut out = Vec::new();
    let Some(parts) = v.get("partitionMetadata").and_then(Value::as_object) else {
        return out;
    };
    let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    let file = |partition: &str, p: &str| FileRef {
        partition: partition.to_string(),
        name: name(p),
    };
    for (partition, pm) in parts {
        for key in ["rollbackLogFiles", "logFilesFromFailedCommit"] {
            match pm.get(key) {
                Some(Value::Object(m)) => {
                    out.extend(m.keys().map(|k| file(partition, k)));
                }
                Some(Value::Array(a)) => {
                    out.extend(
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(|k| file(partition, k)),
                    );
                }
                _ => {}
            }
        }
    }
    out
}
