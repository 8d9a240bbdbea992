//! hudifs-merge: the merged view of a merge-on-read slice.
//!
//! - [`engine`]: one file slice (base file + committed log blocks) → one Parquet file holding
//!   the rows a Hudi snapshot query returns for it ([`prepare`], [`Prepared::write_to`],
//!   [`merge_slice`], [`merged_file_name`]).
//!   The key map it merges log records in lives in `merger`, the parquet adapters in `chunks`.
//! - [`cache`]: the disk cache of merged files (LRU by bytes, private, checked before reuse,
//!   one merge per slice at a time): [`MergeCache::ensure`] gives path and size.
//! - [`cdc`]: the change feed of a file group over a window (`cdc/`), inferred from its merged
//!   states before and after each write ([`prepare_cdc`], [`PreparedCdc::write_to`]).
//! - [`config`]: the table configuration the merge depends on ([`MergeConfig`]).
//! - [`MergeError`]: the typed refusals (`EOPNOTSUPP`, `EIO`, `EFBIG`).
//!
//! Everything is read through `hudifs_storage::Storage`; the engine is pure: which block
//! instants count is the caller's [`BlockVisibility`].

pub mod avro;
pub mod cache;
pub mod cdc;
mod chunks;
pub mod config;
pub mod engine;
mod error;
pub mod logread;
pub mod memory;
mod merger;
pub mod order;
pub mod schema;
pub mod view;

pub use cache::{CacheOptions, Ensured, MergeCache};
pub use cdc::{prepare_cdc, CdcGroup, CdcStep, GroupState, PreparedCdc};
pub use config::{KeyGen, MergeConfig, MergeMode};
pub use engine::{
    merge_slice, merged_file_name, prepare, BlockVisibility, Identity, InputFile, MergeOptions,
    MergeStats, Plan, Prepared, Slice, CREATED_BY,
};
pub use error::{MergeError, Refusal, Result};
pub use memory::MergeMemory;
pub use view::{
    cdc_check, cdc_groups, slices_of_view, slices_of_window, snapshot_visibility,
    window_visibility, ViewSlice,
};
