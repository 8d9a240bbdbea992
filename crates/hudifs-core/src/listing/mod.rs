//! Data files of a table: the name grammars (`names`), the compact [`DataFile`] of a listing
//! (`data_file`), and partition discovery and listing through the storage (`walk`).

mod data_file;
mod names;
mod walk;

pub use data_file::DataFile;
pub use names::{
    base_file_name, log_file_name, parse_base_name, parse_data_name, parse_log_name, BaseName,
    DataName, LogName, PARTITION_METAFILE,
};
pub use walk::{discover_partitions, is_partition_dir, list_partition, partition_dir};

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

#[cfg(test)]
mod tests;
