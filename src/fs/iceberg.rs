//! `iceberg/`: the table as an Iceberg v2 table (docs/SEMANTICS.md §12). Its snapshots are the
//! versions of `delta/` (one per completed write instant, the same files: §11), so both formats
//! show the same history; `iceberg/metadata/` holds the table metadata, manifest lists and
//! manifests, rendered from them, and `iceberg/<instant>/` the snapshot's files under inode
//! numbers of their own, served with Iceberg field ids in their footers.

use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use hudifs_core::error::{Error, Result};
use hudifs_core::instant_time::InstantTime;
use hudifs_core::viewkey::{ViewKey, ViewName};
use hudifs_storage::sync::lock;
use hudifs_storage::OpenFile as _;
use serde_json::{json, Map};

use crate::delta::{stats::FileFacts, DeltaFile, Version};
use crate::iceberg::footer::WithIds;
use crate::iceberg::schema::element_ids;
use crate::iceberg::{IcebergTable, MetaFile};

use super::handles::OpenedParts;
use super::inode::Node;
use super::{join, DirEntry, Entry, HudiFs, OpenHandle, TTL_FRESH};

/// The name of the metadata directory in `iceberg/`.
pub const META_DIR: &str = "metadata";

/// What `iceberg/` keeps: the table of the newest snapshot it was asked for.
#[derive(Default)]
pub(super) struct IcebergCache {
    built: Mutex<Option<Arc<Built>>>,
    /// Held while a table is built.
    building: Mutex<()>,
    /// How many metadata files the first build took from what the last mount saved.
    taken: std::sync::atomic::AtomicUsize,
    /// The current manifests the last mount saved, being read and unpacked since the table
    /// was opened: their name, and the thread.
    preload: Mutex<Option<(String, std::thread::JoinHandle<Option<Unpacked>>)>>,
}

/// A saved file unpacked, or why it cannot be.
type Unpacked = std::result::Result<Vec<u8>, String>;

impl IcebergCache {
    /// What `iceberg/` keeps of table `cfg` in `store`: the current manifests the last mount
    /// saved (SEMANTICS §11.5), if there are any, already being read on a thread of its own at
    /// a low priority while the timeline loads.
    pub(super) fn opening(
        store: &dyn hudifs_storage::Storage,
        cfg: &hudifs_core::table::TableConfig,
        opts: &super::FsOptions,
    ) -> IcebergCache {
        let cache = IcebergCache::default();
        if let Some((name, _)) = super::delta::manifests_saved_name(store, cfg, opts) {
            *lock(&cache.preload) =
                super::delta::preload(opts, "iceberg-preload", name, |dir, name| {
                    let packed = hudifs_merge::cache::read_side_in(dir, name)?;
                    Some(crate::saved_form::unpack(&packed))
                });
        }
        cache
    }
}

/// A table as far as it could be built, as `delta/`'s log.
struct Built {
    generation: u64,
    table: IcebergTable,
    /// The first version that failed, and why: its metadata file, and every later one, fail
    /// to read with this error.
    failed: Option<(u64, Error)>,
    /// Every version's number, built or not.
    numbers: Vec<u64>,
    /// The metadata file rendered last (readers read one a few times).
    rendered: Mutex<Option<(MetaFile, Arc<Vec<u8>>)>>,
    /// Whether the current snapshot's manifests are saved for the next mount, or were taken
    /// from what the last one saved (SEMANTICS §11.5).
    saved: std::sync::atomic::AtomicBool,
}

impl Built {
    /// What `metadata/` lists: the files of the built snapshots, then a metadata file for each
    /// version that could not be built (so a reader fails on it).
    fn listed(&self) -> Vec<MetaFile> {
        let mut out = self.table.files();
        out.retain(|f| *f != MetaFile::Hint);
        if let Some((first, _)) = &self.failed {
            out.extend(
                self.numbers
                    .iter()
                    .filter(|n| *n >= first)
                    .map(|n| MetaFile::Metadata(*n)),
            );
        }
        if !self.numbers.is_empty() {
            out.push(MetaFile::Hint);
        }
        out
    }
}

impl HudiFs {
    /// How many metadata files (the current manifest list and its manifests) the first build
    /// of `iceberg/` took from what the last mount of the table saved (SEMANTICS §11.5).
    pub fn iceberg_files_taken(&self) -> usize {
        self.iceberg
            .taken
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether view `view` is a data directory of `iceberg/`.
    pub(super) fn is_iceberg_view(&self, view: u32) -> bool {
        self.inodes.views.get(view).is_some_and(|n| n.iceberg)
    }

    /// The data directory of `iceberg/` for completed write `t` (`iceberg/<t>/`).
    fn iceberg_root(&self, t: InstantTime, merged: bool) -> Result<Node> {
        let name = Arc::new(ViewName {
            key: ViewKey::AsOf(t),
            merged,
            cdc: false,
            delta: false,
            iceberg: true,
        });
        let view = self
            .inodes
            .views
            .id(&name)
            .ok_or_else(|| Error::NotFound("too many distinct views".into()))?;
        Ok(Node::ViewDir { view, dir: 0 })
    }

    /// The node a name in `iceberg/` stands for.
    pub(super) fn iceberg_child(&self, name: &str) -> Result<Node> {
        if name == META_DIR {
            return Ok(Node::IcebergMetaDir);
        }
        let snap = self.snapshot();
        let t = InstantTime::parse(name)
            .filter(|t| snap.timeline().completed.contains_key(t) && t.as_str() == name)
            .ok_or_else(|| Error::NotFound(format!("iceberg/{name}")))?;
        self.iceberg_root(t, snap.cfg.is_mor())
    }

    /// The entries of `iceberg/`: the metadata directory and the data directory of every
    /// snapshot.
    pub(super) fn iceberg_entries(&self) -> Result<Vec<DirEntry>> {
        let merged = self.snapshot().cfg.is_mor();
        let mut out = vec![DirEntry {
            name: Arc::from(META_DIR),
            entry: self.dir_entry(Node::IcebergMetaDir.ino(), TTL_FRESH),
        }];
        let built = self.iceberg()?;
        for s in &built.table.snapshots {
            let t = InstantTime::parse(&s.version.instant)
                .ok_or_else(|| Error::Invalid(format!("instant {}", s.version.instant)))?;
            out.push(DirEntry {
                name: Arc::from(s.version.instant.as_str()),
                entry: self.dir_entry(self.iceberg_root(t, merged)?.ino(), TTL_FRESH),
            });
        }
        Ok(out)
    }

    /// The node of a name in `iceberg/metadata/`.
    pub(super) fn iceberg_meta_child(&self, name: &str) -> Result<Node> {
        let missing = || Error::NotFound(format!("iceberg/{META_DIR}/{name}"));
        let f = MetaFile::parse(name).ok_or_else(missing)?;
        if !self.iceberg()?.listed().contains(&f) {
            return Err(missing());
        }
        Ok(Node::IcebergMetaFile { file: f.id() })
    }

    /// The entries of `iceberg/metadata/`. Sizes are known once a file is rendered: on `stat`.
    pub(super) fn iceberg_meta_entries(&self) -> Result<Vec<DirEntry>> {
        let built = self.iceberg()?;
        Ok(built
            .listed()
            .into_iter()
            .map(|f| DirEntry {
                name: Arc::from(f.name()),
                entry: self.owner.rendered_file(
                    Node::IcebergMetaFile { file: f.id() }.ino(),
                    0,
                    None,
                    Duration::ZERO,
                ),
            })
            .collect())
    }

    /// The entry of metadata file `id`.
    pub(super) fn iceberg_meta_entry(&self, id: u64) -> Result<Entry> {
        let (bytes, ms) = self.iceberg_meta_bytes(id)?;
        let mtime = ms.map(|ms| UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0)));
        Ok(self.owner.rendered_file(
            Node::IcebergMetaFile { file: id }.ino(),
            bytes.len() as u64,
            mtime,
            TTL_FRESH,
        ))
    }

    /// What opening metadata file `id` holds.
    pub(super) fn open_iceberg_meta(&self, id: u64) -> Result<OpenHandle> {
        Ok(OpenHandle::Bytes(self.iceberg_meta_bytes(id)?.0))
    }

    /// The bytes of metadata file `id`, and when the snapshot it belongs to was written (ms).
    fn iceberg_meta_bytes(&self, id: u64) -> Result<(Arc<Vec<u8>>, Option<i64>)> {
        let f = MetaFile::from_id(id)
            .ok_or_else(|| Error::NotFound(format!("iceberg/{META_DIR} file {id}")))?;
        let built = self.iceberg()?;
        let missing = || Error::NotFound(format!("iceberg/{META_DIR}/{}", f.name()));
        if let (Some((first, e)), MetaFile::Metadata(n)) = (&built.failed, f) {
            if n >= *first && built.numbers.contains(&n) {
                return Err(e.clone());
            }
        }
        if f == MetaFile::Hint {
            // The newest version, built or not: a reader of a table whose newest write cannot
            // be given fails rather than read an older snapshot as the current one.
            let n = built.numbers.last().ok_or_else(missing)?;
            let ms = built.table.snapshots.last().map(|s| s.version.timestamp_ms);
            return Ok((Arc::new(format!("{}", n + 1).into_bytes()), ms));
        }
        let ms = Some(built.table.version_of(f).ok_or_else(missing)?.timestamp_ms);
        if let Some((g, b)) = lock(&built.rendered).as_ref() {
            if *g == f {
                return Ok((b.clone(), ms));
            }
        }
        let facts = |d: &DeltaFile| self.delta_cached_facts(&d.path);
        let bytes = built.table.bytes(f, &facts).map_err(|e| {
            let e = Error::Corrupt(format!("iceberg/{META_DIR}/{}: {e}", f.name()));
            log::warn!("{e}");
            e
        })?;
        *lock(&built.rendered) = Some((f, bytes.clone()));
        if let MetaFile::List(n) = f {
            if built.table.snapshots.last().map(|s| s.version.number) == Some(n) {
                self.save_iceberg(&built);
            }
        }
        Ok((bytes, ms))
    }

    /// Save the current snapshot's manifest list and manifests, just rendered, for the next
    /// mount (SEMANTICS §11.5): once per table, on a thread of its own where the mount is
    /// shared.
    fn save_iceberg(&self, built: &Arc<Built>) {
        if built.saved.swap(true, std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let Some((name, key)) = self.iceberg_saved_name() else {
            return;
        };
        let write = move |fs: &HudiFs, built: &Built| {
            let Ok(cache) = fs.merge_cache() else {
                return;
            };
            let started = std::time::Instant::now();
            let Some(bytes) = built.table.save_current(&key) else {
                return;
            };
            let bytes = crate::saved_form::pack(&bytes);
            match cache.write_side(&name, &bytes) {
                Ok(()) => log::info!(
                    "iceberg/: the current manifests saved in {name} ({} bytes, {} ms)",
                    bytes.len(),
                    started.elapsed().as_millis()
                ),
                Err(e) => log::info!("iceberg/: the current manifests are not saved: {e}"),
            }
        };
        match self.this.upgrade() {
            Some(fs) => {
                let built = built.clone();
                super::delta::spawn_save(move || write(&fs, &built));
            }
            None => write(self, built),
        }
    }

    /// Whether the current manifests the last mount saved are being read (a mount before read
    /// `iceberg/`), not yet taken by a build.
    pub(super) fn iceberg_preloaded(&self) -> bool {
        lock(&self.iceberg.preload).is_some()
    }

    /// Let go of the current manifests the last mount saved, read as the table opened (a first
    /// build of `iceberg/` reads them again).
    pub(super) fn forget_iceberg_preload(&self) {
        lock(&self.iceberg.preload).take();
    }

    /// Take back the manifests the last mount saved of `table` (built afresh), where they are
    /// what `table` has; whether its current manifest list was among them.
    fn take_back_iceberg(&self, table: &IcebergTable) -> bool {
        let (Some((name, key)), Ok(cache)) = (self.iceberg_saved_name(), self.merge_cache()) else {
            return false;
        };
        let started = std::time::Instant::now();
        // Read while the table was opened, else now.
        let preloaded = lock(&self.iceberg.preload)
            .take()
            .and_then(|(for_name, h)| {
                (for_name == name)
                    .then(|| h.join().ok().flatten())
                    .flatten()
            });
        let unpacked = match preloaded {
            Some(u) => u,
            None => match cache.read_side(&name) {
                Some(packed) => crate::saved_form::unpack(&packed),
                None => return false,
            },
        };
        let taken = unpacked.and_then(|b| table.take_back(&key, &b));
        match taken {
            Ok(n) => {
                self.iceberg
                    .taken
                    .store(n, std::sync::atomic::Ordering::Relaxed);
                log::info!(
                    "iceberg/: {n} files taken from the saved manifests in {} ms",
                    started.elapsed().as_millis()
                )
            }
            Err(e) => log::info!("iceberg/: the saved manifests {name} are not used: {e}"),
        }
        table.current_list_rendered()
    }

    /// Build the table now, and render its current snapshot's metadata file, manifest list
    /// and manifests (what a reader of the current snapshot reads): ahead of a reader, on a
    /// remount of a table a mount before read through `iceberg/` (SEMANTICS §11.5).
    pub(super) fn warm_iceberg(&self) {
        let warmed = self.iceberg().and_then(|b| {
            let Some(n) = b.table.snapshots.last().map(|s| s.version.number) else {
                return Ok(());
            };
            self.iceberg_meta_bytes(MetaFile::Metadata(n).id())?;
            self.iceberg_meta_bytes(MetaFile::List(n).id())?;
            Ok(())
        });
        if let Err(e) = warmed {
            log::info!("iceberg/: not built ahead: {e}");
        }
    }

    /// The table of the current snapshot, built on first use after each change of the table.
    fn iceberg(&self) -> Result<Arc<Built>> {
        let delta = self.delta_log()?;
        let old = lock(&self.iceberg.built).clone();
        if let Some(b) = &old {
            if b.generation == delta.log.generation {
                return Ok(b.clone());
            }
        }
        // One build at a time (a reader and the build ahead): the second finds the first's.
        let _building = lock(&self.iceberg.building);
        let old = lock(&self.iceberg.built).clone();
        if let Some(b) = &old {
            if b.generation == delta.log.generation {
                return Ok(b.clone());
            }
        }
        let location = self
            .opts
            .location
            .as_ref()
            .map(|l| format!("{l}/iceberg"))
            .ok_or_else(|| {
                Error::Unsupported("iceberg/: where readers see the mount is not known".into())
            })?;
        let snap = self.snapshot();
        let uuid = crate::delta::log::table_id(&format!("hudi-iceberg:{}", snap.cfg.name));
        let mut properties = Map::new();
        properties.insert("hudi.table.name".into(), json!(snap.cfg.name));
        properties.insert(
            "hudi.table.type".into(),
            json!(if snap.cfg.is_mor() {
                "MERGE_ON_READ"
            } else {
                "COPY_ON_WRITE"
            }),
        );
        let facts = |d: &DeltaFile| -> Option<Arc<FileFacts>> { self.delta_cached_facts(&d.path) };
        let versions = &delta.log.versions;
        let mut failed = delta.failed.clone();
        let table = match IcebergTable::new(
            location.clone(),
            uuid.clone(),
            versions,
            &facts,
            old.as_ref().map(|o| &o.table),
            properties.clone(),
        ) {
            Ok(t) => t,
            Err((n, why)) => {
                // The snapshots before the one that failed, and that one refused.
                log::warn!("iceberg/: version {n} refused: {why}");
                let upto: Vec<Arc<Version>> = versions
                    .iter()
                    .take_while(|v| v.number < n)
                    .cloned()
                    .collect();
                if failed.as_ref().is_none_or(|(f, _)| n < *f) {
                    failed = Some((
                        n,
                        Error::Unsupported(format!("iceberg/: version {n}: {why}")),
                    ));
                }
                IcebergTable::new(
                    location,
                    uuid,
                    &upto,
                    &facts,
                    old.as_ref().map(|o| &o.table),
                    properties,
                )
                .map_err(|(_, why)| Error::Unsupported(format!("iceberg/: {why}")))?
            }
        };
        // A first build takes back what the last mount saved.
        let taken = old.is_none() && self.take_back_iceberg(&table);
        let built = Arc::new(Built {
            generation: delta.log.generation,
            table,
            failed,
            numbers: delta.numbers.clone(),
            rendered: Mutex::new(None),
            saved: taken.into(),
        });
        *lock(&self.iceberg.built) = Some(built.clone());
        Ok(built)
    }

    /// The version of the data directory of view `view` and the path of node `node` (a file of
    /// it) in the view.
    fn iceberg_file(&self, view: u32, node: Node) -> Result<(Arc<Built>, Arc<DeltaFile>)> {
        let name = self
            .inodes
            .views
            .get(view)
            .ok_or_else(|| Error::NotFound(format!("view {view}")))?;
        let ViewKey::AsOf(t) = &name.key else {
            return Err(Error::NotFound(format!("view {view}")));
        };
        let rel = match node {
            Node::ViewFile { file, .. } => self.views.registered(file)?.rel_path(),
            Node::MergedFile { view, slice } => {
                let ms = self.merged_slice(view, slice)?;
                join(&ms.partition, &ms.name)
            }
            _ => return Err(Error::Invalid("not a data file".into())),
        };
        let built = self.iceberg()?;
        let missing = || Error::NotFound(format!("iceberg/{t}/{rel}"));
        let s = built.table.snapshot_at(t.as_str()).ok_or_else(missing)?;
        let f = s
            .version
            .files
            .get(rel.as_str())
            .ok_or_else(missing)?
            .clone();
        Ok((built, f))
    }

    /// The size file `node` of data directory `view` has as `iceberg/` serves it: with field
    /// ids in its footer.
    fn iceberg_size(&self, view: u32, node: Node) -> Result<u64> {
        let (built, f) = self.iceberg_file(view, node)?;
        let facts = self
            .delta_cached_facts(&f.path)
            .ok_or_else(|| Error::NotFound(format!("iceberg/{}", f.path)))?;
        built
            .table
            .served(&facts.parquet, f.size)
            .map(|s| s.size)
            .map_err(|e| Error::Corrupt(format!("iceberg/{}: {e}", f.path)))
    }

    /// `e`, the entry of a file of data directory `view`, with the size `iceberg/` serves.
    pub(super) fn iceberg_entry(&self, view: u32, mut e: Entry) -> Result<Entry> {
        let node = Self::node(e.attr.ino)?;
        e.attr.size = self.iceberg_size(view, node)?;
        Ok(e)
    }

    /// Open file `node` of data directory `view`: its bytes, with field ids in its footer.
    pub(super) fn open_iceberg_file(&self, view: u32, node: Node) -> Result<OpenedParts> {
        let (handle, keep, _) = match node {
            Node::ViewFile { file, .. } => self.open_table_file(file)?,
            Node::MergedFile { view, slice } => self.open_merged_slice(view, slice)?,
            _ => return Err(Error::Invalid("not a data file".into())),
        };
        let OpenHandle::Data(inner) = handle else {
            return Err(Error::Invalid("not a data file".into()));
        };
        let (built, f) = self.iceberg_file(view, node)?;
        let ids = |root: &parquet::schema::types::Type| element_ids(root, &built.table.ids);
        let file = WithIds::open(inner, &ids, self.footer_guess()).map_err(|e| {
            let e = Error::Corrupt(format!("iceberg/{}: {e}", f.path));
            log::warn!("{e}");
            e
        })?;
        let want = self.iceberg_size(view, node)?;
        if file.size() != want {
            let e = Error::Corrupt(format!(
                "iceberg/{}: {} bytes with field ids, {want} expected",
                f.path,
                file.size()
            ));
            log::warn!("{e}");
            return Err(e);
        }
        Ok((OpenHandle::Data(Arc::new(file)), keep, None))
    }
}
