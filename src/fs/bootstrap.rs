//! Metadata-only bootstrapped file groups (SEMANTICS.md §10.11): a skeleton base file (instant
//! `00000000000001`, the meta columns only) is never served as it is. Its source file is found
//! in the bootstrap index (`hudifs_core::bootstrap`) under `hoodie.bootstrap.base.path`, on local
//! disk or the table's store, and the two are joined row by row into the merge cache
//! (`hudifs_merge`'s stitch), like a merged slice. Slices with later logs of such a group merge
//! over the stitched rows: their [`Slice`] carries the source.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use hudifs_core::bootstrap::{normalise, relative_to_base, BootstrapIndex};
use hudifs_core::error::{Error, Result};
use hudifs_core::listing::DataFile;
use hudifs_core::table::METADATA_BOOTSTRAP_INSTANT;
use hudifs_merge::{BootstrapSource, Ensured, InputFile, MergeConfig, MergeOptions, Slice};
use hudifs_storage::sync::lock;
use hudifs_storage::{LocalStore, Storage, TablePath};

use super::HudiFs;

/// A source base path's storage, or why it cannot be opened.
type Opened = std::result::Result<Arc<dyn Storage>, String>;

/// What the mount knows of its table's bootstrap: the index (read once: Java writes it once,
/// when the table is bootstrapped), the storages of source base paths, and the stitched files
/// of skeletons asked for.
#[derive(Default)]
pub(super) struct Bootstrap {
    index: OnceLock<std::result::Result<Arc<BootstrapIndex>, String>>,
    stores: Mutex<HashMap<String, Opened>>,
    /// Registry id of a skeleton → its stitched file in the merge cache and its size.
    stitched: Mutex<HashMap<u64, (PathBuf, u64)>>,
}

impl HudiFs {
    /// Whether table file `f` is a metadata-only bootstrap skeleton (served stitched).
    pub(super) fn is_skeleton(&self, f: &DataFile) -> bool {
        f.is_base()
            && f.instant() == METADATA_BOOTSTRAP_INSTANT
            && self.snapshot().cfg.is_bootstrap_skeleton(f.instant())
    }

    fn bootstrap_index(&self) -> Result<Arc<BootstrapIndex>> {
        self.bootstrap
            .index
            .get_or_init(|| {
                BootstrapIndex::load(&*self.store)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(Error::Corrupt)
    }

    /// The storage of source base path `base` (a local directory, `file:` URL or store URL).
    fn source_store(&self, base: &str) -> Result<Arc<dyn Storage>> {
        let loc = normalise(base);
        let mut stores = lock(&self.bootstrap.stores);
        let made = stores
            .entry(loc.clone())
            .or_insert_with(|| {
                if hudifs_objstore::is_store_url(&loc) {
                    crate::store::open_store_checked(
                        Path::new(&loc),
                        &self.opts.sources,
                        None,
                        false,
                    )
                    .map_err(|e| e.to_string())
                } else if loc.starts_with('/') {
                    LocalStore::new(Path::new(&loc))
                        .map(|s| Arc::new(s) as Arc<dyn Storage>)
                        .map_err(|e| format!("{loc}: {e}"))
                } else {
                    Err(format!(
                        "{base}: not a location hudifs can read source files from"
                    ))
                }
            })
            .clone();
        made.map_err(|e| {
            Error::Unsupported(format!("the bootstrap base path cannot be opened: {e}"))
        })
    }

    /// The source file of bootstrapped file group `file_id` of `partition`, as the bootstrap
    /// index maps it (Java's `getSourceFileMappingForFileIds`).
    pub(super) fn bootstrap_source(
        &self,
        partition: &str,
        file_id: &str,
    ) -> Result<BootstrapSource> {
        let snap = self.snapshot();
        let index = self.bootstrap_index()?;
        let src = index.source(partition, file_id).ok_or_else(|| {
            Error::Corrupt(format!(
                "the bootstrap index ({}) has no entry for file group {file_id} of partition \
                 {partition:?}",
                hudifs_core::bootstrap::FILE_ID_INDEX
            ))
        })?;
        let bases = snap
            .cfg
            .bootstrap_base_path()
            .map(str::to_string)
            .into_iter()
            .chain(index.base_path.clone());
        for base in bases {
            let Some(rel) = relative_to_base(&src.uri, &base) else {
                continue;
            };
            let path = TablePath::new(&rel)
                .map_err(|e| Error::Unsupported(format!("source file {}: {e}", src.uri)))?;
            let store = self.source_store(&base)?;
            return Ok(BootstrapSource::new(store, path, src.length));
        }
        Err(Error::Unsupported(format!(
            "source file {} of file group {file_id} is not under the bootstrap base path",
            src.uri
        )))
    }

    /// Give `slice` its source file when its base file is a bootstrap skeleton; where that
    /// fails the slice stays without one, and the merge refuses it with this reason logged.
    pub(super) fn attach_source(&self, slice: &mut Slice) {
        if slice.source.is_some()
            || slice.base.is_none()
            || !self.snapshot().cfg.is_bootstrap_skeleton(&slice.instant)
        {
            return;
        }
        match self.bootstrap_source(&slice.partition, &slice.file_id) {
            Ok(s) => slice.source = Some(s),
            Err(e) => log::warn!("slice {}: {e}", slice.id()),
        }
    }

    /// The stitched file of skeleton `f` (registry id `id`): made in the merge cache on first
    /// use, then kept. The opened file comes with it when it was just made.
    pub(super) fn stitched(&self, id: u64, f: &DataFile) -> Result<(PathBuf, u64)> {
        if let Some(known) = lock(&self.bootstrap.stitched).get(&id) {
            return Ok(known.clone());
        }
        let r = self.stitch_now(f);
        match &r {
            Ok(done) => {
                lock(&self.bootstrap.stitched).insert(id, done.clone());
            }
            Err(e) => log::warn!(
                "{}: a metadata-only bootstrap skeleton, not served: {e}",
                f.rel_path()
            ),
        }
        r
    }

    /// Forget the stitched file of `id` (the cache evicted it): the next use stitches again.
    pub(super) fn forget_stitched(&self, id: u64) {
        lock(&self.bootstrap.stitched).remove(&id);
    }

    /// The entry of table file `f` (registry id `id`, inode `ino`) in a listing: a skeleton is
    /// not stitched by a listing, and until it is it shows size 0 with a zero attribute
    /// timeout, so that the kernel asks (and it is stitched) on `stat`.
    pub(super) fn listed_file_entry(
        &self,
        ino: u64,
        id: u64,
        f: &DataFile,
        ttl: std::time::Duration,
    ) -> super::Entry {
        if !self.is_skeleton(f) {
            return self.owner.table_file(ino, f, ttl);
        }
        match lock(&self.bootstrap.stitched).get(&id).map(|k| k.1) {
            Some(size) => self.owner.merged_file(ino, size, f.mtime(), ttl),
            None => self
                .owner
                .merged_file(ino, 0, f.mtime(), std::time::Duration::ZERO),
        }
    }

    fn stitch_now(&self, f: &DataFile) -> Result<(PathBuf, u64)> {
        let snap = self.snapshot();
        let source = self.bootstrap_source(&f.partition, f.file_id())?;
        let base = TablePath::new(&f.rel_path()).map_err(|e| Error::NotFound(e.to_string()))?;
        let slice = Slice {
            partition: f.partition.to_string(),
            file_id: f.file_id().to_string(),
            instant: f.instant().to_string(),
            base: Some(InputFile::new(base, Some(f.size()))),
            logs: Vec::new(),
            keep_commits: None,
            schema: None,
            source: Some(source),
        };
        let refusal = |e: hudifs_merge::MergeError| super::merged::refusal(e);
        let cfg = MergeConfig::from_properties(&snap.cfg.properties).map_err(refusal)?;
        let opts = MergeOptions {
            memory_cap: self.opts.merge.memory_cap,
            ..MergeOptions::default()
        };
        let table = self.store.describe(&Default::default());
        let all = |_: &str| true;
        match self
            .merge_cache()?
            .ensure(&*self.store, &table, &cfg, &slice, &all, &opts)
            .map_err(refusal)?
        {
            Ensured::Merged { path, size, .. } => Ok((path, size)),
            Ensured::Base => Err(Error::Corrupt(format!(
                "{}: the skeleton was not stitched",
                f.rel_path()
            ))),
        }
    }

    /// Open the stitched file of skeleton `f` (registry id `id`), stitched again if the cache
    /// evicted it (its bytes are a pure function of the skeleton and the source).
    pub(super) fn open_stitched(&self, id: u64, f: &DataFile) -> Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        let open = |p: &PathBuf| {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(p)
        };
        let (path, size) = self.stitched(id, f)?;
        if let Ok(file) = open(&path) {
            if file.metadata().is_ok_and(|m| m.len() == size) {
                return Ok(file);
            }
        }
        self.forget_stitched(id);
        let (p, s) = self.stitched(id, f)?;
        if s != size {
            return Err(Error::Corrupt(format!(
                "{}: stitched again to a different file",
                f.rel_path()
            )));
        }
        open(&p).map_err(|e| Error::io(p.display().to_string(), e))
    }
}
