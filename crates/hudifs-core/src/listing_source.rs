//! Where a snapshot's listing comes from (SEMANTICS.md §1.10): the storage, directory by
//! directory, or the table's metadata table (`crate::metadata_table`), chosen by
//! [`ListingMode`]. Either way the views are the same function of the timeline and the listing.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::SystemTime;

use hudifs_storage::{Entry, Kind, Meta, Storage};

use crate::error::{Error, Result};
use crate::listing::{
    self, discover_partitions_listed, is_partition_dir, parse_data_name, DataName, Prelisted,
};
use crate::metadata_table::{self, MdtListing};
use crate::rules::Context;
use crate::table::TableConfig;
use crate::timeline::InstantMetadata;

/// How a mount lists the table (`--listing`, `-o listing=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListingMode {
    /// The metadata table where `hoodie.table.metadata.partitions` names `files` and it reads
    /// cleanly, else the storage.
    #[default]
    Auto,
    /// The metadata table, or fail.
    Metadata,
    /// The storage.
    Storage,
    /// Both: the storage is served, every difference is logged.
    Verify,
}

impl FromStr for ListingMode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "auto" => Ok(ListingMode::Auto),
            "metadata" => Ok(ListingMode::Metadata),
            "storage" => Ok(ListingMode::Storage),
            "verify" => Ok(ListingMode::Verify),
            other => Err(format!(
                "listing {other:?} is not one of auto, metadata, storage, verify"
            )),
        }
    }
}

impl fmt::Display for ListingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ListingMode::Auto => "auto",
            ListingMode::Metadata => "metadata",
            ListingMode::Storage => "storage",
            ListingMode::Verify => "verify",
        })
    }
}

/// The partitions of a table, their first listings where the discovery took them, and the
/// source (`storage`, or `metadata-table@<instant>`).
pub struct Discovered {
    pub partitions: Vec<String>,
    pub prelisted: Prelisted,
    pub source: String,
}

/// The source name of a storage listing.
const STORAGE_SOURCE: &str = "storage";

/// List the table in `store` as `mode` says.
pub fn discover(
    store: &Arc<dyn Storage>,
    cfg: &TableConfig,
    ctx: &Context,
    meta: &InstantMetadata,
    mode: ListingMode,
) -> Result<Discovered> {
    let storage = || -> Result<Discovered> {
        let (partitions, prelisted) = discover_partitions_listed(&**store)?;
        Ok(Discovered {
            partitions,
            prelisted,
            source: STORAGE_SOURCE.to_string(),
        })
    };
    let root = store.describe(&hudifs_storage::TablePath::root());
    match mode {
        ListingMode::Storage => storage(),
        ListingMode::Auto if !metadata_table::is_enabled(cfg) => {
            log::info!(
                "{root}: listing from storage: hoodie.table.metadata.partitions does not name files (no metadata table to list from)"
            );
            storage()
        }
        ListingMode::Auto => match from_metadata_table(store, cfg, ctx, meta) {
            Ok(d) => Ok(d),
            Err(e) => {
                log::warn!("{root}: listing from storage, the metadata table cannot be used: {e}");
                storage()
            }
        },
        ListingMode::Metadata => from_metadata_table(store, cfg, ctx, meta).map_err(|e| {
            Error::Refused(format!(
                "{root}: --listing metadata, but the metadata table cannot be used: {e}"
            ))
        }),
        ListingMode::Verify => {
            let served = storage()?;
            match metadata_table::read(store, ctx, meta) {
                Ok(mdt) => {
                    let n = log_differences(&**store, cfg, &served, &mdt, ctx);
                    let level = if n == 0 {
                        log::Level::Info
                    } else {
                        log::Level::Warn
                    };
                    log::log!(
                        level,
                        "{root}: --listing verify: {n} difference(s) between storage and metadata-table@{}",
                        mdt.instant
                    );
                }
                Err(e) => {
                    log::warn!("{root}: --listing verify: the metadata table cannot be used: {e}")
                }
            }
            Ok(served)
        }
    }
}

/// The listing the metadata table gives, completed from storage where it is behind.
pub fn from_metadata_table(
    store: &Arc<dyn Storage>,
    cfg: &TableConfig,
    ctx: &Context,
    meta: &InstantMetadata,
) -> std::result::Result<Discovered, metadata_table::MdtError> {
    let mdt = metadata_table::read(store, ctx, meta)?;
    let mut partitions: Vec<String> = mdt.partitions.keys().cloned().collect();
    for p in &mdt.behind {
        if !mdt.partitions.contains_key(p) && is_partition_dir(&**store, p) {
            partitions.push(p.clone());
        }
    }
    partitions.sort();
    let mut prelisted = Prelisted::new();
    for (p, files) in &mdt.partitions {
        if mdt.behind.contains(p) {
            continue;
        }
        let entries = files
            .iter()
            .map(|(name, size)| Entry {
                name: name.clone(),
                meta: Meta {
                    kind: Kind::File,
                    size: *size,
                    mtime: Some(file_time(cfg, name)),
                    mode: 0o644,
                    version: None,
                },
            })
            .collect();
        prelisted.insert(p.clone(), entries);
    }
    if mdt.fenced_blocks > 0 {
        log::info!(
            "metadata table: {} block(s) of instants the data timeline does not trust were left out",
            mdt.fenced_blocks
        );
    }
    Ok(Discovered {
        partitions,
        prelisted,
        source: format!("metadata-table@{}", mdt.instant),
    })
}

/// The modification time a file listed by the metadata table shows (the MDT keeps sizes
/// only): the time its name's instant stands for, read as UTC; the epoch if none.
fn file_time(cfg: &TableConfig, name: &str) -> SystemTime {
    let instant = match parse_data_name(name, &cfg.base_extensions) {
        Some(DataName::Base(b)) => b.instant,
        Some(DataName::Log(l)) => l.instant,
        None => return SystemTime::UNIX_EPOCH,
    };
    crate::timefmt::instant_as_utc(&instant).unwrap_or(SystemTime::UNIX_EPOCH)
}

/// Log every difference between the storage's listing and the metadata table's; the number of
/// differences. Storage files of instants that did not complete are expected to be missing
/// from the MDT and are logged at debug level only.
fn log_differences(
    store: &dyn Storage,
    cfg: &TableConfig,
    storage: &Discovered,
    mdt: &MdtListing,
    ctx: &Context,
) -> usize {
    let root = store.describe(&hudifs_storage::TablePath::root());
    let mut n = 0;
    let committed = |name: &str| match parse_data_name(name, &cfg.base_extensions) {
        Some(DataName::Base(b)) => ctx.timeline.is_committed(&b.instant),
        // A log's name carries its base's instant (v6) or its own (v8+): a v6 log may hold
        // blocks of a pending write; compare it whatever its name says.
        Some(DataName::Log(_)) => true,
        None => false,
    };
    for p in &storage.partitions {
        if !mdt.partitions.contains_key(p) && !mdt.behind.contains(p) {
            log::warn!("{root}: verify: partition {p:?} is in storage, not in the metadata table");
            n += 1;
        }
    }
    for p in mdt.partitions.keys() {
        if storage.partitions.binary_search(p).is_err() {
            log::warn!("{root}: verify: partition {p:?} is in the metadata table, not in storage");
            n += 1;
        }
    }
    for p in &storage.partitions {
        if mdt.behind.contains(p) {
            continue;
        }
        let Some(listed) = mdt.partitions.get(p) else {
            continue;
        };
        let stored: BTreeMap<String, u64> = match storage.prelisted.get(p) {
            Some(entries) => entries
                .iter()
                .filter(|e| e.meta.kind == Kind::File)
                .map(|e| (e.name.clone(), e.meta.size))
                .collect(),
            None => match listing::list_partition(store, cfg, p) {
                Ok(files) => files
                    .iter()
                    .map(|f| (f.name().to_string(), f.size()))
                    .collect(),
                Err(e) => {
                    log::warn!("{root}: verify: cannot list {p:?}: {e}");
                    n += 1;
                    continue;
                }
            },
        };
        let listed: BTreeMap<&str, u64> = listed.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        for (name, size) in &stored {
            if parse_data_name(name, &cfg.base_extensions).is_none() {
                continue;
            }
            match listed.get(name.as_str()) {
                None if committed(name) => {
                    log::warn!(
                        "{root}: verify: {p}/{name} is in storage, not in the metadata table"
                    );
                    n += 1;
                }
                None => log::debug!(
                    "{root}: verify: {p}/{name} (a pending write's) is not in the metadata table"
                ),
                Some(s) if s != size => {
                    log::warn!(
                        "{root}: verify: {p}/{name} is {size} bytes in storage, {s} in the metadata table"
                    );
                    n += 1;
                }
                Some(_) => {}
            }
        }
        for name in listed.keys() {
            if !stored.contains_key(*name) {
                log::warn!("{root}: verify: {p}/{name} is in the metadata table, not in storage");
                n += 1;
            }
        }
    }
    n
}
