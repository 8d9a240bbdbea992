//! Partition listings for the mount: read lazily, only for the partitions a caller walks into,
//! kept across snapshots while the directory does not change, and registered so that every table
//! file has a stable id (the item of its inode number).
//!
//! A listing is re-read when its directory's mtime changed, when the timeline says an instant
//! touched the partition ([`PartitionCache::invalidate`]), or when it was taken within
//! [`RACY_WINDOW`] of the directory's last change (directory mtimes come from a coarse clock, so a
//! file created in the same tick as the listing could otherwise go unseen).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use hudifs_core::error::{Error, Result};
use hudifs_core::listing::{self, DataFile};
use hudifs_core::table::TableConfig;

/// How close to a directory's last change a listing must not trust the directory's mtime.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// Every table file the mount has seen, by stable id. Append-only: an id never changes meaning.
#[derive(Default)]
pub struct FileRegistry {
    files: RwLock<Vec<Arc<DataFile>>>,
}

impl FileRegistry {
    pub fn get(&self, id: u64) -> Option<Arc<DataFile>> {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        files.get(usize::try_from(id).ok()?).cloned()
    }

    fn push_all(&self, new: Vec<Arc<DataFile>>) -> std::ops::Range<u64> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        let start = files.len() as u64;
        files.extend(new);
        start..files.len() as u64
    }

    pub fn len(&self) -> usize {
        self.files.read().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The data files of one partition, sorted by name, with their registry ids.
#[derive(Debug, Default)]
pub struct PartitionListing {
    pub files: Vec<Arc<DataFile>>,
    pub ids: Vec<u64>,
    /// The directory's mtime when listed, unless the listing was racy.
    trusted_mtime: Option<SystemTime>,
    /// The snapshot generation this listing is known good for.
    checked: u64,
}

impl PartitionListing {
    /// Position of the file named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.files.binary_search_by(|f| f.name().cmp(name)).ok()
    }
}

/// Listings by partition path.
#[derive(Default)]
pub struct PartitionCache {
    pub registry: FileRegistry,
    listings: Mutex<HashMap<Arc<str>, Arc<PartitionListing>>>,
}

impl PartitionCache {
    /// The listing of `partition`, good for snapshot `generation`.
    pub fn listing(
        &self,
        cfg: &TableConfig,
        partition: &Arc<str>,
        generation: u64,
    ) -> Result<Arc<PartitionListing>> {
        let cached = self.lock().get(partition).cloned();
        let dir = listing::partition_dir(&cfg.root, partition);
        if let Some(c) = &cached {
            if c.checked >= generation {
                return Ok(c.clone());
            }
            let mtime = std::fs::metadata(&dir).and_then(|m| m.modified()).ok();
            if c.trusted_mtime.is_some() && c.trusted_mtime == mtime {
                let fresh = Arc::new(PartitionListing {
                    files: c.files.clone(),
                    ids: c.ids.clone(),
                    trusted_mtime: c.trusted_mtime,
                    checked: generation,
                });
                self.lock().insert(partition.clone(), fresh.clone());
                return Ok(fresh);
            }
        }
        let before = std::fs::metadata(&dir)
            .and_then(|m| m.modified())
            .map_err(|e| Error::io(&dir, e))?;
        let files = match listing::list_partition(cfg, partition) {
            Ok(f) => f,
            // A partition deleted since discovery is empty.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        let racy = SystemTime::now()
            .duration_since(before)
            .map(|d| d < RACY_WINDOW)
            .unwrap_or(true);
        let listing = self.register(files, cached.as_deref());
        let listing = Arc::new(PartitionListing {
            trusted_mtime: (!racy).then_some(before),
            checked: generation,
            ..listing
        });
        self.lock().insert(partition.clone(), listing.clone());
        Ok(listing)
    }

    /// Forget what is known about a partition (an instant touched it).
    pub fn invalidate(&self, partition: &str) {
        if let Some(v) = self.lock().get_mut(partition) {
            *v = Arc::new(PartitionListing {
                files: v.files.clone(),
                ids: v.ids.clone(),
                trusted_mtime: None,
                checked: 0,
            });
        }
    }

    /// Forget what is known about every partition.
    pub fn invalidate_all(&self) {
        let keys: Vec<Arc<str>> = self.lock().keys().cloned().collect();
        for k in keys {
            self.invalidate(&k);
        }
    }

    /// Give the files of a fresh listing their ids: a file already known under the same name,
    /// size and mtime keeps its id; others get new ones.
    fn register(
        &self,
        files: Vec<DataFile>,
        previous: Option<&PartitionListing>,
    ) -> PartitionListing {
        let mut out = PartitionListing::default();
        let mut new_files = Vec::new();
        let mut new_slots = Vec::new();
        for f in files {
            let known = previous.and_then(|p| {
                let i = p.position(f.name())?;
                let old = &p.files[i];
                (old.size == f.size && old.mtime() == f.mtime()).then(|| (old.clone(), p.ids[i]))
            });
            match known {
                Some((file, id)) => {
                    out.files.push(file);
                    out.ids.push(id);
                }
                None => {
                    let file = Arc::new(f);
                    new_slots.push(out.files.len());
                    out.files.push(file.clone());
                    out.ids.push(0);
                    new_files.push(file);
                }
            }
        }
        let range = self.registry.push_all(new_files);
        for (slot, id) in new_slots.into_iter().zip(range) {
            out.ids[slot] = id;
        }
        out
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Arc<PartitionListing>>> {
        self.listings.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether `path` is a partition directory (holds a partition metafile).
pub fn is_partition_dir(root: &Path, partition: &str) -> bool {
    let dir = listing::partition_dir(root, partition);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(listing::PARTITION_METAFILE))
            && e.file_type().is_ok_and(|t| t.is_file())
    })
}
