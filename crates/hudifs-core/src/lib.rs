//! hudifs-core: the Hudi table format as hudifs reads it, and the visibility rules. Every read
//! goes through the storage seam (`hudifs_storage::Storage`); nothing here knows FUSE.
//!
//! Data flows top to bottom through these modules:
//!
//! - `table` (with `properties`): `hoodie.properties` → `TableConfig`;
//! - `timeline`: instant file names → `Instant`s and the derived sets;
//! - `metadata`: instant files → JSON (0.x JSON, 1.x Avro) → the facts the rules use;
//! - `archive` (with `logblock`): the archived timeline;
//! - `listing`: partitions and data-file names → `DataFile`, through the storage;
//! - `metadata_table`: Hudi's manifest of the table's files (read with `hudifs_hfile`), and
//!   `listing_source`, which lists a table from it or from the storage;
//! - `bootstrap`: the bootstrap index of a metadata-only bootstrapped table (which source file
//!   holds a skeleton group's data);
//! - `rules`: the visibility rules, pure: a view is a function of a timeline snapshot, the
//!   archived facts, a listing and a view key;
//! - `timefmt`, `viewkey`: time spellings and view names;
//! - `snapshot`: one state of the table read through the storage, and the I/O around the rules.

pub mod archive;
pub mod bootstrap;
pub mod error;
pub mod ids;
pub mod instant_time;
pub mod listing;
pub mod listing_source;
pub mod logblock;
pub mod metadata;
pub mod metadata_table;
pub mod properties;
pub mod rules;
pub mod side_by_side;
pub mod snapshot;
pub mod table;
pub mod timefmt;
pub mod timeline;
pub mod viewkey;
