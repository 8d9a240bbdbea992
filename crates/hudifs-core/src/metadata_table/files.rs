//! The records of the metadata table's `files` partition and how they merge
//! (`HoodieMetadataPayload`): each record is keyed by a data partition path (`.` for the root of
//! a non-partitioned table) and maps file names to their size and a deletion flag; the record
//! keyed `__all_partitions__` maps the partition paths the same way.
//!
//! Records merge per key in instant order: a newer entry for a name takes the greater of the two
//! sizes (file sizes only grow: log files are appended to), and a deletion removes the name (a
//! deletion of a name never listed is kept, as Java keeps it, until a later entry lists it
//! again). The files of a partition are the names left that are not deleted.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::metadata::AvroDecoder;

/// The key of the record that lists the partitions.
pub const ALL_PARTITIONS_KEY: &str = "__all_partitions__";
/// The key of a non-partitioned table's root.
pub const NON_PARTITIONED_KEY: &str = ".";

/// `HoodieMetadataPayload` record types.
const TYPE_PARTITION_LIST: i64 = 1;
const TYPE_FILE_LIST: i64 = 2;

/// One name of a `filesystemMetadata` map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileInfo {
    pub size: u64,
    pub deleted: bool,
}

/// The merged `files` partition: every key's map.
#[derive(Debug, Default, Clone)]
pub struct FilesRecords {
    records: BTreeMap<String, BTreeMap<String, FileInfo>>,
}

impl FilesRecords {
    /// Merge one record, newer than every record merged so far.
    pub fn merge(&mut self, key: &str, entries: BTreeMap<String, FileInfo>) {
        let merged = self.records.entry(key.to_string()).or_default();
        for (name, new) in entries {
            match merged.get(&name).copied() {
                None => {
                    merged.insert(name, new);
                }
                Some(old) if new.deleted => {
                    if old.deleted {
                        merged.insert(name, new);
                    } else {
                        merged.remove(&name);
                    }
                }
                Some(old) => {
                    merged.insert(
                        name,
                        FileInfo {
                            size: old.size.max(new.size),
                            deleted: false,
                        },
                    );
                }
            }
        }
    }

    /// Drop a key's record (a delete block named it).
    pub fn delete(&mut self, key: &str) {
        self.records.remove(key);
    }

    /// The partitions the `__all_partitions__` record lists, with `.` as `""`; `None` when
    /// there is no such record.
    pub fn partitions(&self) -> Option<Vec<String>> {
        let all = self.records.get(ALL_PARTITIONS_KEY)?;
        Some(
            all.iter()
                .filter(|(_, i)| !i.deleted)
                .map(|(p, _)| data_partition(p))
                .collect(),
        )
    }

    /// The files of data partition `partition` (`""` for the root) and their sizes.
    pub fn files(&self, partition: &str) -> Vec<(String, u64)> {
        let key = if partition.is_empty() {
            NON_PARTITIONED_KEY
        } else {
            partition
        };
        self.records
            .get(key)
            .map(|m| {
                m.iter()
                    .filter(|(_, i)| !i.deleted)
                    .map(|(n, i)| (n.clone(), i.size))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every key with a file list (partition paths, `.` as `""`).
    pub fn listed_partitions(&self) -> Vec<String> {
        self.records
            .keys()
            .filter(|k| k.as_str() != ALL_PARTITIONS_KEY)
            .map(|k| data_partition(k))
            .collect()
    }
}

/// A `files` key as the data partition path it names.
fn data_partition(key: &str) -> String {
    if key == NON_PARTITIONED_KEY {
        String::new()
    } else {
        key.to_string()
    }
}

/// A record's key and its map.
pub type Record = (String, BTreeMap<String, FileInfo>);

/// Decode one `HoodieMetadataRecord` (Avro binary in the writer schema of `decoder`) stored
/// under HFile key `key`: the key it merges under and its map, or `None` for a record of
/// another type (the `files` partition holds only partition and file lists).
pub fn decode_record(
    decoder: &AvroDecoder,
    key: &str,
    value: &[u8],
) -> Result<Option<Record>, String> {
    let v = decoder.decode_datum(value).map_err(|e| e.to_string())?;
    // Java's HFile writer blanks the `key` field (the HFile key holds it).
    let rec_key = match v.get("key").and_then(Value::as_str) {
        Some(k) if !k.is_empty() => k.to_string(),
        _ => key.to_string(),
    };
    if rec_key != key {
        return Err(format!(
            "record stored under key {key:?} names key {rec_key:?}"
        ));
    }
    let ty = v
        .get("type")
        .and_then(Value::as_i64)
        .ok_or_else(|| format!("record {key:?} has no type"))?;
    if ty != TYPE_PARTITION_LIST && ty != TYPE_FILE_LIST {
        return Ok(None);
    }
    let mut out = BTreeMap::new();
    match v.get("filesystemMetadata") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            for (name, info) in map {
                let size = info.get("size").and_then(Value::as_i64).unwrap_or(0);
                let deleted = info
                    .get("isDeleted")
                    .and_then(Value::as_bool)
                    .ok_or_else(|| format!("record {key:?}: {name:?} has no isDeleted"))?;
                let bad = if ty == TYPE_FILE_LIST {
                    name.is_empty() || name.contains('/') || name == "." || name == ".."
                } else {
                    name != NON_PARTITIONED_KEY
                        && hudifs_storage::TablePath::new(name).map_or(true, |p| p.is_root())
                };
                if bad {
                    return Err(format!("record {key:?} lists a bad name {name:?}"));
                }
                out.insert(
                    name.clone(),
                    FileInfo {
                        size: u64::try_from(size).unwrap_or(0),
                        deleted,
                    },
                );
            }
        }
        Some(other) => {
            return Err(format!(
                "record {key:?}: filesystemMetadata is not a map: {}",
                truncate(&other.to_string())
            ))
        }
    }
    Ok(Some((rec_key, out)))
}

fn truncate(s: &str) -> &str {
    match s.char_indices().nth(80) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(size: u64, deleted: bool) -> FileInfo {
        FileInfo { size, deleted }
    }

    #[test]
    fn newer_entries_grow_sizes_and_deletions_remove() {
        let mut r = FilesRecords::default();
        r.merge(
            "p",
            BTreeMap::from([("a".into(), info(10, false)), ("b".into(), info(5, false))]),
        );
        r.merge(
            "p",
            BTreeMap::from([("a".into(), info(7, false)), ("b".into(), info(0, true))]),
        );
        assert_eq!(r.files("p"), vec![("a".to_string(), 10)]);
        // A deletion of a name never listed is kept until the name is listed again.
        r.merge("p", BTreeMap::from([("c".into(), info(0, true))]));
        assert_eq!(r.files("p").len(), 1);
        r.merge("p", BTreeMap::from([("c".into(), info(3, false))]));
        assert_eq!(r.files("p").len(), 2);
        r.delete("p");
        assert!(r.files("p").is_empty());
    }

    #[test]
    fn the_root_of_a_non_partitioned_table_is_dot() {
        let mut r = FilesRecords::default();
        r.merge(".", BTreeMap::from([("a".into(), info(1, false))]));
        r.merge(
            ALL_PARTITIONS_KEY,
            BTreeMap::from([(".".into(), info(0, false))]),
        );
        assert_eq!(r.files(""), vec![("a".to_string(), 1)]);
        assert_eq!(r.partitions(), Some(vec![String::new()]));
        assert_eq!(r.listed_partitions(), vec![String::new()]);
    }
}
