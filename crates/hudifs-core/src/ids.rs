//! Identifiers of a table's data files: [`FileGroupId`] (a file group) and [`FileRef`] (one
//! file), each by partition path.

/// A file group: a file id inside a partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct FileGroupId {
    /// Partition path relative to the table root (`""` for non-partitioned tables).
    pub partition: String,
    pub file_id: String,
}

impl FileGroupId {
    pub fn new(partition: &str, file_id: &str) -> FileGroupId {
        FileGroupId {
            partition: partition.to_string(),
            file_id: file_id.to_string(),
        }
    }
}

/// A data file named by its partition and file name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileRef {
    pub partition: String,
    pub name: String,
}

impl FileRef {
    pub fn new(partition: &str, name: &str) -> FileRef {
        FileRef {
            partition: partition.to_string(),
            name: name.to_string(),
        }
    }
}
