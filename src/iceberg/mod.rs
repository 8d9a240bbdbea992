//! `iceberg/`: the table as an Iceberg v2 table, for engines that read Iceberg but not Hudi
//! (docs/SEMANTICS.md §12). Plain logic, no file system: the table's snapshots, schemas and
//! manifests (`table`), Iceberg schemas with field ids from Parquet schemas (`schema`), the
//! manifests' Avro (`manifest`, `avro`), what an entry takes of a file's statistics
//! (`entry_stats`) and data files' footers with field ids (`footer`).
//! The file system builds the table from `delta/`'s versions (`fs/iceberg.rs`): both formats
//! show the same snapshots of the same files.

pub mod avro;
pub mod entry_stats;
pub mod footer;
pub mod manifest;
pub mod schema;
pub mod table;

pub use table::{IcebergTable, MetaFile};
