//! Data files of a table: the name grammars (`names`), the compact [`DataFile`] of a listing
//! (`data_file`), and partition discovery and listing through the storage (`walk`).

mod data_file;
mod names;
mod walk;

pub use data_file::{DataFile, DataFileFields};
pub use names::{
    base_file_name, log_file_name, parse_base_name, parse_data_name, parse_log_name, BaseName,
    DataName, LogName, PARTITION_METAFILE,
};
pub use walk::{
    discover_partitions, discover_partitions_listed, discover_partitions_within, is_partition_dir,
    list_partition, list_partition_names, partition_dir, partition_files, stat_files, Prelisted,
};

#[cfg(test)]
mod tests;
