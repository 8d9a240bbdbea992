//! The bootstrap index of a metadata-only bootstrapped table (Java's `HFileBootstrapIndex`):
//! which source file under `hoodie.bootstrap.base.path` holds the data of each skeleton file
//! group.
//!
//! - Two HFiles under `.hoodie/.aux/.bootstrap/`: `.partitions/` (key `part=<partition>`, value
//!   a `HoodieBootstrapPartitionMetadata`) and `.fileids/` (key
//!   `part=<partition>;fileid=<file id>`, value a `HoodieBootstrapFilePartitionInfo`), both named
//!   `00000000-0000-0000-0000-000000000000-0_1-0-1_00000000000001.hfile`
//!   (`FSUtils.makeBootstrapIndexFileName`). Each value is an Avro object container holding one
//!   record (`TimelineMetadataUtils.serializeAvroMetadata`); the file info `INDEX_INFO` holds a
//!   `HoodieBootstrapIndexInfo` with the bootstrap base path.
//! - Java 0.x (table version 6 and before) wrote them with HBase's writer (comparator
//!   `HFileBootstrapIndex$HoodieKVComparator`), 1.x with Hudi's own `HFileWriterImpl`: the cell
//!   key's row is the same string in both, so one reader serves both.
//! - hudifs reads the file-id index only (Java's read path, `getSourceFileMappingForFileIds`):
//!   the source file is the `uri` of the entry's `bootstrapFileStatus.path` (`HoodiePath`).

use std::collections::HashMap;

use hudifs_hfile::HFileReader;
use hudifs_storage::{Storage, TablePath};
use serde_json::Value;

/// Where the file-id index is, relative to the table root (`HoodieTableMetaClient`'s
/// `BOOTSTRAP_INDEX_BY_FILE_ID_FOLDER_PATH` and `makeBootstrapIndexFileName`).
pub const FILE_ID_INDEX: &str =
    ".hoodie/.aux/.bootstrap/.fileids/00000000-0000-0000-0000-000000000000-0_1-0-1_00000000000001.hfile";
/// Where the partition index is.
pub const PARTITION_INDEX: &str =
    ".hoodie/.aux/.bootstrap/.partitions/00000000-0000-0000-0000-000000000000-0_1-0-1_00000000000001.hfile";
/// The file info entry holding the `HoodieBootstrapIndexInfo`.
pub const INDEX_INFO_KEY: &str = "INDEX_INFO";

/// The key of a file group in the file-id index (`HFileBootstrapIndex.getFileGroupKey`).
pub fn file_group_key(partition: &str, file_id: &str) -> String {
    format!("part={partition};fileid={file_id}")
}

/// The key of a partition in the partition index (`HFileBootstrapIndex.getPartitionKey`).
pub fn partition_key(partition: &str) -> String {
    format!("part={partition}")
}

/// The source file of one bootstrapped file group (Java's `BootstrapFileMapping`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// The source file's full location as the index states it (`HoodiePath.uri`).
    pub uri: String,
    /// Its length when the index states one.
    pub length: Option<u64>,
    /// The source partition it is in (relative to the bootstrap base path).
    pub source_partition: String,
}

/// The file-id index of a table, read once.
#[derive(Debug, Clone, Default)]
pub struct BootstrapIndex {
    /// `HoodieBootstrapIndexInfo.bootstrapBasePath` of the file-id index.
    pub base_path: Option<String>,
    /// By (partition, file id).
    pub groups: HashMap<(String, String), SourceFile>,
}

/// Why the index cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bootstrap index {file}: {reason}")]
pub struct IndexError {
    pub file: String,
    pub reason: String,
}

fn str_field<'a>(v: &'a Value, name: &str) -> Option<&'a str> {
    let f = v.get(name)?;
    // A union may be rendered wrapped (`{"string": …}`).
    f.as_str()
        .or_else(|| f.get("string").and_then(Value::as_str))
}

fn record_field<'a>(v: &'a Value, name: &str, record: &str) -> Option<&'a Value> {
    let f = v.get(name)?;
    if f.is_null() {
        return None;
    }
    Some(
        f.get(record)
            .or_else(|| f.get(format!("org.apache.hudi.avro.model.{record}")))
            .unwrap_or(f),
    )
}

fn long_field(v: &Value, name: &str) -> Option<u64> {
    let f = v.get(name)?;
    f.as_u64().or_else(|| f.get("long").and_then(Value::as_u64))
}

/// Parse one file-id index entry: key `part=<p>;fileid=<id>`, value a
/// `HoodieBootstrapFilePartitionInfo` container.
pub fn parse_entry(key: &[u8], value: &[u8]) -> Result<((String, String), SourceFile), String> {
    let key = std::str::from_utf8(key).map_err(|_| "a key that is not UTF-8".to_string())?;
    let (part, file) = key
        .split_once(';')
        .ok_or_else(|| format!("key {key:?} is not part=…;fileid=…"))?;
    let partition = part
        .strip_prefix("part=")
        .ok_or_else(|| format!("key {key:?} does not start with part="))?;
    let file_id = file
        .strip_prefix("fileid=")
        .ok_or_else(|| format!("key {key:?} has no fileid="))?;
    let v = crate::metadata::decode(value).map_err(|e| format!("entry {key}: {e}"))?;
    let status = record_field(&v, "bootstrapFileStatus", "HoodieFileStatus")
        .ok_or_else(|| format!("entry {key}: no bootstrapFileStatus"))?;
    let uri = record_field(status, "path", "HoodiePath")
        .and_then(|p| str_field(p, "uri"))
        .ok_or_else(|| format!("entry {key}: its file status has no path"))?;
    Ok((
        (partition.to_string(), file_id.to_string()),
        SourceFile {
            uri: uri.to_string(),
            length: long_field(status, "length"),
            source_partition: str_field(&v, "bootstrapPartitionPath")
                .unwrap_or("")
                .to_string(),
        },
    ))
}

impl BootstrapIndex {
    /// Read the file-id index of the table in `store`.
    pub fn load(store: &dyn Storage) -> Result<BootstrapIndex, IndexError> {
        let path = TablePath::new(FILE_ID_INDEX).unwrap_or_default();
        let file = store.describe(&path);
        let err = |reason: String| IndexError {
            file: file.clone(),
            reason,
        };
        let bytes = store.read(&path).map_err(|e| err(e.to_string()))?;
        Self::parse(bytes).map_err(err)
    }

    /// Parse the bytes of a file-id index.
    pub fn parse(bytes: Vec<u8>) -> Result<BootstrapIndex, String> {
        let reader = HFileReader::open(bytes).map_err(|e| e.to_string())?;
        let base_path = reader
            .file_info(INDEX_INFO_KEY.as_bytes())
            .and_then(|b| crate::metadata::decode(b).ok())
            .and_then(|v| str_field(&v, "bootstrapBasePath").map(str::to_string));
        let mut groups = HashMap::new();
        for kv in reader.scan() {
            let (k, v) = kv.map_err(|e| e.to_string())?;
            let (id, source) = parse_entry(&k, &v)?;
            groups.insert(id, source);
        }
        Ok(BootstrapIndex { base_path, groups })
    }

    /// The source file of file group `file_id` of `partition`.
    pub fn source(&self, partition: &str, file_id: &str) -> Option<&SourceFile> {
        self.groups
            .get(&(partition.to_string(), file_id.to_string()))
    }
}

/// Where a source URI lies relative to a bootstrap base path: the path below it, or `None`
/// when the URI is not under it. Schemes `file:` and the S3 variants (`s3`, `s3a`, `s3n`) are
/// compared as one (Hadoop names one bucket by all three).
pub fn relative_to_base(uri: &str, base: &str) -> Option<String> {
    let (u, b) = (normalise(uri), normalise(base));
    let b = b.trim_end_matches('/');
    let rest = u.strip_prefix(b)?;
    let rest = rest.strip_prefix('/')?;
    (!rest.is_empty()).then(|| rest.to_string())
}

/// A location with `file:` prefixes, and `s3a://`/`s3n://` spelled `s3://`.
pub fn normalise(loc: &str) -> String {
    for p in ["s3a://", "s3n://"] {
        if let Some(rest) = loc.strip_prefix(p) {
            return format!("s3://{rest}");
        }
    }
    if let Some(rest) = loc.strip_prefix("file://") {
        return rest.to_string();
    }
    if let Some(rest) = loc.strip_prefix("file:") {
        return rest.to_string();
    }
    loc.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_as_java_forms_them() {
        assert_eq!(
            file_group_key("2020/03/18", "f-0"),
            "part=2020/03/18;fileid=f-0"
        );
        assert_eq!(partition_key(""), "part=");
    }

    #[test]
    fn sources_resolve_below_the_base_path() {
        assert_eq!(
            relative_to_base("file:/data/src/a/x.parquet", "/data/src").as_deref(),
            Some("a/x.parquet")
        );
        assert_eq!(
            relative_to_base("s3a://b/src/x.parquet", "s3://b/src/").as_deref(),
            Some("x.parquet")
        );
        assert_eq!(relative_to_base("/data/other/x.parquet", "/data/src"), None);
        assert_eq!(relative_to_base("/data/srcx/x.parquet", "/data/src"), None);
    }
}
