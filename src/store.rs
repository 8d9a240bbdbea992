//! Where a table lives: a local directory (or `file://` URL) or an object store (`s3://`,
//! `gs://`, `az://`), and the command-line options that say how to reach a store.

use std::path::Path;
use std::sync::Arc;

use hudifs_core::listing_source::ListingMode;
use hudifs_objstore::{is_store_url, ObjectStorage, StoreOptions, StoreUrl};
use hudifs_storage::{LocalStore, Storage};

use crate::error::{Error, Result};

/// How to reach an object store (ignored for local tables). Holds no secret.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct StoreArgs {
    /// The store's endpoint instead of the provider's: an S3-compatible server, an Azure blob
    /// endpoint (an emulator's names the account: http://127.0.0.1:10000/devstoreaccount1), a GCS
    /// emulator (no OAuth). Plain HTTP only when it says http://.
    #[arg(long, value_name = "URL", help_heading = "Object stores")]
    pub endpoint_url: Option<String>,
    /// Region of the bucket (default: AWS_REGION, the profile's, else us-east-1).
    #[arg(long, value_name = "REGION", help_heading = "Object stores")]
    pub region: Option<String>,
    /// Path-style requests (http://endpoint/bucket/key), as most S3-compatible servers need.
    #[arg(long, help_heading = "Object stores")]
    pub force_path_style: bool,
    /// Anonymous requests (public buckets): no credentials are looked up.
    #[arg(long, help_heading = "Object stores")]
    pub no_sign_request: bool,
    /// AWS shared-config profile (default: AWS_PROFILE, else default).
    #[arg(long, value_name = "NAME", help_heading = "Object stores")]
    pub profile: Option<String>,
    /// Allow plain HTTP even when the endpoint does not say http://.
    #[arg(long, help_heading = "Object stores")]
    pub allow_http: bool,
    /// Where the table's listing comes from: auto (the metadata table where the table has one
    /// and it reads cleanly, else storage), metadata (or fail), storage, or verify (both,
    /// storage served, differences logged).
    #[arg(long, value_name = "MODE", default_value_t = ListingMode::Auto)]
    pub listing: ListingMode,
}

impl StoreArgs {
    pub fn options(&self) -> StoreOptions {
        StoreOptions {
            endpoint_url: self.endpoint_url.clone(),
            region: self.region.clone(),
            force_path_style: self.force_path_style,
            no_sign_request: self.no_sign_request,
            profile: self.profile.clone(),
            allow_http: self.allow_http,
        }
    }
}

/// Whether `table` names an object store.
pub fn is_remote(table: &Path) -> bool {
    table.to_str().is_some_and(is_store_url)
}

/// The storage of the location `root` (a lake's root: no table is expected there).
pub fn open_root(root: &Path, args: &StoreArgs) -> Result<Arc<dyn Storage>> {
    if let Some(s) = root.to_str().filter(|s| is_store_url(s)) {
        let url = StoreUrl::parse(s).map_err(Error::Usage)?;
        let store = ObjectStorage::new(url, &args.options()).map_err(|e| Error::io(s, e))?;
        return Ok(Arc::new(store));
    }
    open_store(root, args)
}

/// The storage of the table at `table`. For a store, one request checks that it answers and
/// that the table is there, with a message saying what to check when not.
pub fn open_store(table: &Path, args: &StoreArgs) -> Result<Arc<dyn Storage>> {
    open_store_cached(table, args, None)
}

/// [`open_store`], with a local data cache of store files (`--cache DIR`, of at most the
/// given bytes) where the table is on a store.
pub fn open_store_cached(
    table: &Path,
    args: &StoreArgs,
    cache: Option<(&Path, u64)>,
) -> Result<Arc<dyn Storage>> {
    open_store_checked(table, args, cache, true)
}

/// [`open_store_cached`]; without the check request when `check` is false (the table was
/// checked by the process that started this one: a keeper, docs/SEMANTICS.md §7.11).
pub fn open_store_checked(
    table: &Path,
    args: &StoreArgs,
    cache: Option<(&Path, u64)>,
    check: bool,
) -> Result<Arc<dyn Storage>> {
    if let Some(s) = table.to_str().filter(|s| is_store_url(s)) {
        let url = StoreUrl::parse(s).map_err(Error::Usage)?;
        let mut store = ObjectStorage::new(url, &args.options()).map_err(|e| Error::io(s, e))?;
        if let Some((dir, max)) = cache {
            store = store
                .with_cache(dir, max)
                .map_err(|e| Error::io(dir.display().to_string(), e))?;
        }
        if !check {
            return Ok(Arc::new(store));
        }
        match store.check() {
            Ok(()) => return Ok(Arc::new(store)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::Table(hudifs_core::error::Error::NotATable(
                    store.url().to_string(),
                )))
            }
            Err(e) => return Err(Error::io(s, e)),
        }
    }
    let local = match table.to_str().and_then(|s| s.strip_prefix("file://")) {
        Some(p) => Path::new(p),
        None => table,
    };
    match LocalStore::new(local) {
        Ok(s) => Ok(Arc::new(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Error::Table(hudifs_core::error::Error::NotATable(format!(
                "{} (no such directory)",
                local.display()
            ))))
        }
        Err(e) => Err(Error::io(local.display().to_string(), e)),
    }
}

/// A table location without user information or query (where credentials could be).
pub fn redact(table: &str) -> String {
    let Some((scheme, rest)) = table.split_once("://") else {
        return table.to_string();
    };
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = match rest.find('/') {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let host = authority
        .rsplit_once('@')
        .map(|(_, h)| h)
        .unwrap_or(authority);
    format!("{scheme}://{host}{path}")
}
