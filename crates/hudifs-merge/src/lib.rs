//! hudifs-merge: the merged view of a merge-on-read slice.
//!
//! - [`materialise`]: the protocol of what the cache materialises ([`Materialise`]: a merged
//!   slice, a change feed): named, recognised by its inputs' identities and the block instants
//!   that count ([`Quick`], [`Ready`]), prepared, then written; [`BlockVisibility`] and the
//!   limits ([`MergeOptions`]) every one of them takes.
//! - [`engine`]: one file slice (base file + committed log blocks) → one Parquet file holding
//!   the rows a Hudi snapshot query returns for it ([`prepare`], [`Prepared::write_to`],
//!   [`merge_slice`], [`merged_file_name`]): `engine/plan` (the slice, what its cached merge is
//!   recognised by), `engine/merge` (the merge), `engine/sinks` (the Parquet file or memory,
//!   and the writer properties of every file written).
//!   The key map it merges log records in lives in `merger`, the parquet adapters in `chunks`.
//! - [`cache`]: the disk cache of merged files (LRU by bytes, private, checked before reuse,
//!   one materialisation per item at a time): [`MergeCache::ensure`] gives path and size.
//! - [`cdc`]: the change feed of a file group over a window (`cdc/`), inferred from its merged
//!   states before and after each write (`cdc/infer`) and written (`cdc/assemble`)
//!   ([`prepare_cdc`], [`Ready::write_to`]).
//! - [`logread`], [`avro`]: which log blocks count and their records (the log format, its
//!   constants and the bounded Avro cursor are `hudifs_core`'s).
//! - [`config`]: the table configuration the merge depends on ([`MergeConfig`]); `deletes`:
//!   which log records are deletes (built-in flag, Flink's operation, a custom marker).
//! - [`MergeError`]: the typed refusals (`EOPNOTSUPP`, `EIO`, `EFBIG`).
//!
//! Everything is read through `hudifs_storage::Storage`; the engine is pure: which block
//! instants count is the caller's [`BlockVisibility`].

pub mod avro;
pub mod cache;
pub mod cdc;
mod chunks;
mod codecs;
pub mod config;
mod deletes;
pub mod engine;
mod error;
pub mod evolution;
pub mod logread;
pub mod materialise;
pub mod memory;
mod merger;
pub mod order;
pub mod schema;
pub mod view;

pub use cache::{CacheOptions, Ensured, MergeCache};
pub use cdc::{prepare_cdc, CdcGroup, CdcStep, GroupState, PreparedCdc};
pub use config::{DeleteMarker, KeyGen, MergeConfig, MergeMode};
pub use engine::{
    merge_slice, merged_file_name, prepare, BootstrapSource, MergeStats, Plan, Prepared, Slice,
    CREATED_BY,
};
pub use error::{MergeError, Refusal, Result};
pub use materialise::{
    BlockVisibility, Identity, InputFile, Materialise, MergeOptions, Quick, Ready,
};
pub use memory::MergeMemory;
pub use view::{
    apply_view_schema, cdc_check, cdc_groups, slices_of_view, slices_of_window,
    snapshot_visibility, window_visibility, ViewSlice,
};
