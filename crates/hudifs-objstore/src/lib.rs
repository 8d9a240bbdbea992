//! Hudi tables on object stores: `s3://`, `gs://`, `az://` locations behind the synchronous
//! hudifs storage seam ([`hudifs_storage::Storage`] and [`hudifs_storage::StorageWrite`]).
//!
//! - [`StoreUrl`] / [`StoreOptions`]: where the table is and how to reach the store.
//! - [`azure`]: Azure connection strings and emulator endpoints, which the client library
//!   does not read.
//! - [`gcs`]: `--endpoint-url` on `gs://` (an emulator), which the client library takes only
//!   inside a service-account key.
//! - [`profile`]: the AWS CLI's shared config and credentials files (profiles), which the
//!   client library does not read.
//! - [`ObjectStorage`]: LIST with delimiter (all pages), ranged GETs, open files pinned to the
//!   ETag seen at open (`ESTALE` when it changed, `EIO` naming the cleaner when it vanished),
//!   retries with backoff and body-length checks; `client`: the `object_store` client it is
//!   built on (credentials, endpoints, retries and timeouts).
//! - [`prefetch`]: the read-ahead window of each open file and the memory budget of all;
//!   `remote` (the open file: pinned GETs answered from the store's runtime) and [`cache`]
//!   (the local data cache, `--cache`); `counters`: the requests made, by kind; `bufpool`:
//!   the buffers GET bodies are gathered into, reused.

pub mod azure;
mod bufpool;
pub mod cache;
mod client;
mod counters;
pub mod gcs;
pub mod prefetch;
pub mod profile;
mod remote;
mod store;
mod url;

#[cfg(test)]
mod tests;

pub use counters::RequestCounts;
pub use remote::Reads;
pub use store::ObjectStorage;
pub use url::{is_store_url, Scheme, StoreOptions, StoreUrl};
