//! Partition listings for the mount: read lazily, only for the partitions a caller walks into,
//! kept across snapshots while the directory does not change, and registered so that every table
//! file has a stable id (the item of its inode number).
//!
//! A listing is re-read when the timeline says an instant touched the partition
//! ([`PartitionCache::invalidate`]); where the storage keeps directory modification times (local
//! disks), also when its directory's mtime changed, or when it was taken within [`RACY_WINDOW`]
//! of the directory's last change (directory mtimes come from a coarse clock, so a file created
//! in the same tick as the listing could otherwise go unseen). Where it has none (object
//! stores) a listing stays good until an instant touches its partition.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime};

use hudifs_core::error::{Error, Result};
use hudifs_core::listing::{partition_dir, DataFile};
use hudifs_core::snapshot::Snapshot;

use crate::journal::{FilesRecord, Record, RestartJournal};

/// How close to a directory's last change a listing must not trust the directory's mtime.
pub const RACY_WINDOW: Duration = Duration::from_secs(2);

/// A table file by partition and name.
type FileKey = (Arc<str>, Box<str>);

/// Every table file the mount has seen, by stable id. Append-only: an id never changes meaning.
#[derive(Default)]
pub struct FileRegistry {
    files: RwLock<Vec<DataFile>>,
    /// Where new ids are recorded before anyone hears of them (`journal/`).
    journal: OnceLock<Arc<RestartJournal>>,
    /// After a restart: the ids the previous daemons gave, by partition and name, so that a
    /// file listed again keeps its number (empty otherwise).
    recovered: Mutex<HashMap<FileKey, u64>>,
}

impl FileRegistry {
    pub fn get(&self, id: u64) -> Option<DataFile> {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        files.get(usize::try_from(id).ok()?).cloned()
    }

    fn push_all(&self, new: Vec<DataFile>) -> std::ops::Range<u64> {
        let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
        if let (Some(journal), false) = (self.journal.get(), new.is_empty()) {
            journal.append(&Record::Files(FilesRecord::of(&new)));
        }
        let start = files.len() as u64;
        files.extend(new);
        start..files.len() as u64
    }

    /// Take over the files a previous daemon of this mount registered (in the order of
    /// `records`), then record every new one in `journal`. `exts` are the table's base file
    /// extensions.
    pub fn resume(
        &self,
        records: &[Record],
        exts: &[String],
        journal: &Arc<RestartJournal>,
    ) -> std::result::Result<(), String> {
        let mut recovered = self.recovered.lock().unwrap_or_else(|e| e.into_inner());
        for r in records {
            let Record::Files(files) = r else {
                continue;
            };
            let files = files.data_files(exts).ok_or_else(|| {
                format!(
                    "a Files record of the restart journal names a file that is no data file                      of this table (in {:?})",
                    files.partition
                )
            })?;
            let range = self.push_all(files);
            let files = self.files.read().unwrap_or_else(|e| e.into_inner());
            for id in range {
                let f = &files[id as usize];
                recovered.insert((f.partition.clone(), f.name().into()), id);
            }
        }
        let _ = self.journal.set(journal.clone());
        Ok(())
    }

    /// Whether a previous daemon's files are being taken over (see [`FileRegistry::resume`]).
    fn recovering(&self) -> bool {
        !self
            .recovered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    /// The id a previous daemon gave `file`, if it is the same file (name, size, time).
    fn recovered_id(&self, file: &DataFile) -> Option<(DataFile, u64)> {
        let recovered = self.recovered.lock().unwrap_or_else(|e| e.into_inner());
        if recovered.is_empty() {
            return None;
        }
        let id = *recovered.get(&(file.partition.clone(), Box::<str>::from(file.name())))?;
        let old = self.get(id)?;
        same_file(&old, file).then_some((old, id))
    }
}

/// Whether a file listed again is the file listed before under its name: the same size and
/// time. The new listing states the files whose old ones were stated
/// ([`PartitionCache::listing`]); a file never stated before (listed by name, its attributes
/// never asked for) has nothing to compare and is taken as the same, as a file whose size and
/// time did not change is.
fn same_file(old: &DataFile, new: &DataFile) -> bool {
    !old.is_stated() || !new.is_stated() || (old.size() == new.size() && old.mtime() == new.mtime())
}

/// What keeps a listing good after the snapshot it was taken for.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Trust {
    /// Nothing: list again.
    #[default]
    None,
    /// The directory's mtime, while it has not moved.
    Mtime(SystemTime),
    /// The storage keeps no directory times: good until an instant touches the partition.
    UntilTouched,
}

/// The data files of one partition, sorted by name, with their registry ids.
#[derive(Debug, Default)]
pub struct PartitionListing {
    pub files: Vec<DataFile>,
    pub ids: Vec<u64>,
    /// Why the listing can be reused for a later snapshot without reading the directory.
    trust: Trust,
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
    /// Counts invalidations (of any partition): a listing during which one happened may have
    /// been taken before the change that caused it, so it is not trusted beyond the snapshot
    /// it was taken for.
    epoch: AtomicU64,
}

impl PartitionCache {
    /// The listing of `partition`, good for snapshot `snap`.
    pub fn listing(&self, snap: &Snapshot, partition: &Arc<str>) -> Result<Arc<PartitionListing>> {
        let generation = snap.generation;
        let store = &*snap.store;
        let epoch = self.epoch.load(Ordering::SeqCst);
        let cached = self.lock().get(partition).cloned();
        let dir = partition_dir(partition)?;
        // An object store has no directory times: asking would cost requests for nothing.
        let dir_mtime = || {
            if store.is_object_store() {
                return Ok(None);
            }
            match store.stat(&dir) {
                Ok(m) => Ok(m.mtime),
                // A partition deleted since discovery is empty.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::io(store.describe(&dir), e)),
            }
        };
        if let Some(c) = &cached {
            if c.checked >= generation {
                return Ok(c.clone());
            }
            let still_good = match c.trust {
                Trust::None => false,
                Trust::UntilTouched => true,
                Trust::Mtime(t) => dir_mtime().ok().flatten() == Some(t),
            };
            if still_good {
                let fresh = Arc::new(PartitionListing {
                    files: c.files.clone(),
                    ids: c.ids.clone(),
                    trust: c.trust,
                    checked: generation,
                });
                let mut listings = self.lock();
                // Not over an invalidation made since `cached` was read.
                if self.epoch.load(Ordering::SeqCst) == epoch {
                    listings.insert(partition.clone(), fresh.clone());
                }
                return Ok(fresh);
            }
        }
        let before = dir_mtime()?;
        let files = match snap.list_partition_names(partition) {
            Ok(f) => f,
            // A partition deleted since discovery is empty.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        // Files known before with their attributes are stated now, to tell a file replaced
        // under its name (`same_file`); after a restart, all of them.
        if self.registry.recovering() {
            hudifs_core::listing::stat_files(store, &files);
        } else if let Some(c) = cached.as_deref() {
            let known: Vec<DataFile> = files
                .iter()
                .filter(|f| c.position(f.name()).is_some_and(|i| c.files[i].is_stated()))
                .cloned()
                .collect();
            hudifs_core::listing::stat_files(store, &known);
        }
        let trust = match before {
            None => Trust::UntilTouched,
            Some(t) => {
                let racy = SystemTime::now()
                    .duration_since(t)
                    .map(|d| d < RACY_WINDOW)
                    .unwrap_or(true);
                if racy {
                    Trust::None
                } else {
                    Trust::Mtime(t)
                }
            }
        };
        let listing = self.register(files, cached.as_deref());
        let mut listings = self.lock();
        // An instant touched a partition while this one was listed (a follower installing the
        // next snapshot): the listing may predate the change, so it is good for `snap` only.
        // Checked under the lock `invalidate` takes, so no invalidation is overwritten.
        let trust = if self.epoch.load(Ordering::SeqCst) == epoch {
            trust
        } else {
            Trust::None
        };
        let listing = Arc::new(PartitionListing {
            trust,
            checked: generation,
            ..listing
        });
        listings.insert(partition.clone(), listing.clone());
        Ok(listing)
    }

    /// State the files of `partition`'s listing that were listed by name only
    /// (`DataFile::unstatted`): once for the whole partition, when something first asks for
    /// the attributes of one of its files.
    pub fn stat_partition(&self, store: &dyn hudifs_storage::Storage, partition: &str) {
        let listing = self.lock().get(partition).cloned();
        if let Some(l) = listing {
            hudifs_core::listing::stat_files(store, &l.files);
        }
    }

    /// Forget what is known about a partition (an instant touched it).
    pub fn invalidate(&self, partition: &str) {
        let mut listings = self.lock();
        self.epoch.fetch_add(1, Ordering::SeqCst);
        if let Some(v) = listings.get_mut(partition) {
            *v = Arc::new(PartitionListing {
                files: v.files.clone(),
                ids: v.ids.clone(),
                trust: Trust::None,
                checked: 0,
            });
        }
    }

    /// Forget what is known about every partition.
    pub fn invalidate_all(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
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
        // Kept as long as the listing: no room to grow into (a million files' worth adds up).
        let mut out = PartitionListing {
            files: Vec::with_capacity(files.len()),
            ids: Vec::with_capacity(files.len()),
            ..Default::default()
        };
        let mut new_files = Vec::new();
        let mut new_slots = Vec::new();
        for f in files {
            let known = previous
                .and_then(|p| {
                    let i = p.position(f.name())?;
                    let old = &p.files[i];
                    same_file(old, &f).then(|| (old.clone(), p.ids[i]))
                })
                .or_else(|| self.registry.recovered_id(&f));
            match known {
                Some((file, id)) => {
                    out.files.push(file);
                    out.ids.push(id);
                }
                None => {
                    new_slots.push(out.files.len());
                    out.files.push(f.clone());
                    out.ids.push(0);
                    new_files.push(f);
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
