//! Hudi tables on object stores: `s3://`, `gs://`, `az://` locations behind the synchronous
//! hudifs storage seam ([`hudifs_storage::Storage`] and [`hudifs_storage::StorageWrite`]).
//!
//! - [`StoreUrl`] / [`StoreOptions`]: where the table is and how to reach the store.
//! - [`profile`]: the AWS CLI's shared config and credentials files (profiles), which the
//!   client library does not read.
//! - [`ObjectStorage`]: LIST with delimiter (all pages), ranged GETs, open files pinned to the
//!   ETag seen at open (`ESTALE` when it changed, `EIO` naming the cleaner when it vanished),
//!   retries with backoff and body-length checks.

pub mod profile;
mod store;
mod url;

#[cfg(test)]
mod tests;

pub use store::{build_client, ObjectStorage, RequestCounts};
pub use url::{is_store_url, Scheme, StoreOptions, StoreUrl};
