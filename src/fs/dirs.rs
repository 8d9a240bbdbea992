//! The directory side of the file system: opening a directory (its entries fixed for the life
//! of the handle, what the kernel may cache of them), `readdir` through that handle, releasing
//! it (and the stale `latest/` listings a switch left in the kernel), and whether listing or
//! looking up needs the storage. The entries themselves are built here too: the root's, the
//! history folders', `timeline/`'s and a view directory's (subdirectories, then the files or
//! merged slices of the partition there).

use std::sync::Arc;
use std::time::Duration;

use hudifs_core::error::{Error, Result};
use hudifs_core::viewkey::{self, ViewKey};

use super::inode::Node;
use super::kernel_cache::DirCache;
use super::{join, DirEntry, Entry, HudiFs, Kind, OpenDir, TTL_FRESH};

const ROOT_NAMES: [&str; 8] = [
    "latest",
    "as_of",
    "incremental",
    "timeline",
    "merged",
    "cdc",
    "delta",
    "iceberg",
];

/// How a lake renumbers the inodes of one of its tables (`lake/inode.rs`).
pub type InoMap = Arc<dyn Fn(u64) -> u64 + Send + Sync>;

/// The entries of an open directory handle, as `readdir` hands them out.
pub struct DirListing {
    entries: Arc<Vec<DirEntry>>,
    /// The longest TTL any entry may be given now.
    ttl_cap: Duration,
    /// The inode numbers the entries get where this table is one of a lake's.
    ino_map: Option<InoMap>,
    /// Whether files are answered with their attributes (`stat_demand.rs`); directories
    /// always are.
    file_attrs: bool,
}

impl DirListing {
    /// A listing of fixed entries (a lake's own directories).
    pub fn fixed(entries: Arc<Vec<DirEntry>>) -> DirListing {
        DirListing {
            entries,
            ttl_cap: Duration::MAX,
            ino_map: None,
            file_attrs: true,
        }
    }

    /// Whether a `readdirplus` answer gives the kernel the attributes of the files listed
    /// (directories always get theirs): only while callers stat what they list
    /// (`stat_demand.rs`).
    pub fn file_attrs(&self) -> bool {
        self.file_attrs
    }

    /// The same listing with every inode number passed through `map`.
    pub fn map_inodes(mut self, map: InoMap) -> DirListing {
        self.ino_map = Some(map);
        self
    }

    /// The entries with the TTLs to give them now.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Entry)> + '_ {
        self.entries.iter().map(|e| {
            let mut entry = e.entry;
            entry.ttl = entry.ttl.min(self.ttl_cap);
            if let Some(map) = &self.ino_map {
                entry.attr.ino = map(entry.attr.ino);
            }
            (&*e.name, entry)
        })
    }
}

/// What `opendir` gives the adapter.
#[derive(Debug, Clone, Copy)]
pub struct OpenedDir {
    pub fh: u64,
    pub cache: DirCache,
}

/// A released handle of a `latest/` directory that outlived a switch: the kernel's cached
/// listing of `ino` must be dropped, then [`HudiFs::stale_dir_dropped`] called.
#[derive(Debug, Clone, Copy)]
pub struct StaleDir {
    pub ino: u64,
    dir: u32,
    generation: u64,
}

impl StaleDir {
    /// The same directory under another inode number (a lake renumbers its tables' inodes).
    pub fn renumbered(self, ino: u64) -> StaleDir {
        StaleDir { ino, ..self }
    }
}

impl HudiFs {
    /// The entries of a directory (without `.` and `..`), with their attributes.
    pub fn readdir_entries(&self, ino: u64) -> Result<Vec<DirEntry>> {
        let snap = self.snapshot();
        let dir = |name: &str, node: Node, ttl: Duration| DirEntry {
            name: Arc::from(name),
            entry: self.dir_entry(node.ino(), ttl),
        };
        Ok(match Self::node(ino)? {
            Node::Root => {
                let mut out = Vec::new();
                for n in ROOT_NAMES {
                    out.push(dir(n, self.root_child(n)?, TTL_FRESH));
                }
                out
            }
            Node::AsOfDir | Node::MergedAsOfDir => {
                let merged = matches!(Self::node(ino)?, Node::MergedAsOfDir);
                let names = snap.as_of_names();
                let mut out = Vec::with_capacity(names.len());
                for t in names {
                    let name = t.to_string();
                    let node = self.view_root(ViewKey::AsOf(t), merged)?;
                    out.push(dir(&name, node, TTL_FRESH));
                }
                out
            }
            Node::MergedDir => vec![
                dir("as_of", Node::MergedAsOfDir, TTL_FRESH),
                dir("incremental", Node::MergedIncrementalDir, TTL_FRESH),
                dir("latest", self.view_root(ViewKey::Latest, true)?, TTL_FRESH),
            ],
            Node::IncrementalDir | Node::MergedIncrementalDir | Node::CdcDir => {
                let node = Self::node(ino)?;
                let names = snap.window_names();
                let zone = self.zone(&snap);
                let mut out = Vec::with_capacity(names.len());
                for w in &names {
                    let key = viewkey::parse_window(w, &zone, None)?;
                    let root = match node {
                        Node::CdcDir => self.cdc_root(key)?,
                        _ => self.view_root(key, node == Node::MergedIncrementalDir)?,
                    };
                    out.push(dir(w, root, TTL_FRESH));
                }
                out
            }
            Node::TimelineDir => self.timeline_entries(&snap),
            Node::DeltaDir => self.delta_entries()?,
            Node::DeltaLogDir => self.delta_log_entries()?,
            Node::DeltaChangesDir => self.delta_changes_entries()?,
            Node::IcebergDir => self.iceberg_entries()?,
            Node::IcebergMetaDir => self.iceberg_meta_entries()?,
            Node::ViewDir { view, dir: dir_id } => {
                let v = self.view(view)?;
                let path = self.dir_path(dir_id)?;
                let mut out = Vec::new();
                let subdirs = self.subdir_names(&v, &path)?;
                if view == 0 {
                    for s in &subdirs {
                        self.kernel.handed_subdir(dir_id, &Arc::from(s.as_str()));
                    }
                }
                for s in subdirs {
                    let child = join(&path, &s);
                    let id = self
                        .inodes
                        .dirs
                        .id(&Arc::from(child.as_str()))
                        .ok_or_else(|| Error::NotFound(child.clone()))?;
                    out.push(dir(&s, Node::ViewDir { view, dir: id }, v.ttl()));
                }
                // Files of the partition at `path`: of a merged view, its slices.
                if let Some(i) = v.partition_index(&path).filter(|_| v.merged.is_some()) {
                    out.extend(self.merged_entries(view, &v, i)?);
                } else if let Some(i) = v.partition_index(&path) {
                    let pv = self.views.part(&v, i)?;
                    if view == 0 {
                        self.kernel.handed_files(dir_id, v.snap.generation, &pv);
                    }
                    // Files listed by name are stated only while callers stat what they list
                    // (`stat_demand.rs`): a walk for names never states them.
                    if self.views.wants_file_attrs() {
                        hudifs_core::listing::stat_files(&*self.store, &pv.listing.files);
                    }
                    for c in &pv.choice.files {
                        let f = &pv.listing.files[c.index as usize];
                        let node = Node::ViewFile {
                            view,
                            file: pv.listing.ids[c.index as usize],
                        };
                        let id = pv.listing.ids[c.index as usize];
                        let entry = self.listed_file_entry(node.ino(), id, f, v.ttl());
                        out.push(DirEntry {
                            name: Arc::from(f.name()),
                            entry,
                        });
                    }
                }
                if self.is_iceberg_view(view) {
                    // Files of `iceberg/<instant>/` have field ids in their footers.
                    for e in &mut out {
                        if e.entry.attr.kind == Kind::File {
                            e.entry = self.iceberg_entry(view, e.entry)?;
                        }
                    }
                }
                if out.is_empty() && !path.is_empty() && !self.dir_exists(&v, &path)? {
                    return Err(Error::NotFound(path.to_string()));
                }
                out
            }
            Node::ViewFile { .. }
            | Node::TimelineFile { .. }
            | Node::MergedFile { .. }
            | Node::DeltaLogFile { .. }
            | Node::IcebergMetaFile { .. } => return Err(Error::Invalid("not a directory".into())),
        })
    }

    /// `timeline/` entries: every instant file, with its rendered size; an unreadable instant
    /// file is still listed (reading it fails).
    fn timeline_entries(&self, snap: &hudifs_core::snapshot::Snapshot) -> Vec<DirEntry> {
        let mut out = Vec::new();
        for n in &snap.timeline_names() {
            let Some(id) = self.inodes.timeline_names.id(&Arc::from(n.as_str())) else {
                continue;
            };
            let ino = Node::TimelineFile { name: id }.ino();
            let entry = self
                .getattr(ino)
                .unwrap_or_else(|_| self.owner.rendered_file(ino, 0, None, TTL_FRESH));
            out.push(DirEntry {
                name: Arc::from(n.as_str()),
                entry,
            });
        }
        out
    }

    /// Open a directory: its entries are fixed for the life of the handle. Listings of views
    /// that can no longer change are cached by the kernel; those of `latest/` too, as far as
    /// the switches allow (`kernel_cache.rs`).
    pub fn opendir(&self, ino: u64) -> Result<OpenedDir> {
        let generation = self.snapshot().generation;
        let entries = Arc::new(self.readdir_entries(ino)?);
        let (cache, latest) = match Node::from_ino(ino) {
            Some(Node::ViewDir { view: 0, dir }) => {
                (self.kernel.open(dir, generation), Some((dir, generation)))
            }
            Some(Node::ViewDir { view, .. }) if self.view(view).is_ok_and(|v| v.is_final) => {
                (DirCache::Reuse, None)
            }
            _ => (DirCache::Off, None),
        };
        let fh = self.handles.add_dir(OpenDir {
            entries,
            latest,
            cached: cache != DirCache::Off,
            stated: Arc::default(),
        });
        Ok(OpenedDir { fh, cache })
    }

    /// Entries of open directory handle `fh` of directory `ino`, also of a handle a previous
    /// daemon of this mount opened: listed again under its number. A handle of `latest/` that
    /// outlived a switch gives its names short timeouts: the switch's invalidations may have
    /// missed them.
    pub fn readdir(&self, ino: u64, fh: u64) -> Result<DirListing> {
        if self.handles.dir(fh).is_none() && self.handles.inherited(fh) {
            let entries = Arc::new(self.readdir_entries(ino)?);
            self.handles.adopt_dir(
                fh,
                OpenDir {
                    entries,
                    latest: None,
                    cached: false,
                    stated: Arc::default(),
                },
            );
        }
        let OpenDir {
            entries,
            latest,
            stated,
            ..
        } = self
            .handles
            .dir(fh)
            .ok_or_else(|| Error::NotFound(format!("directory handle {fh}")))?;
        let ttl_cap = match latest {
            Some((_, generation)) if generation < self.snapshot().generation => TTL_FRESH,
            _ => Duration::MAX,
        };
        // A listing is handed out a page at a time: whether its files are stated is worked
        // out once per handle.
        let file_attrs =
            self.views.wants_file_attrs() && *stated.get_or_init(|| self.entries_stated(&entries));
        Ok(DirListing {
            entries,
            ttl_cap,
            ino_map: None,
            file_attrs,
        })
    }

    /// Release a directory handle. A handle of `latest/` that outlived a switch of its directory
    /// may have filled the kernel's cached listing with the old snapshot: the caller drops that
    /// (invalidates the inode) and then calls [`HudiFs::stale_dir_dropped`].
    pub fn releasedir(&self, fh: u64) -> Option<StaleDir> {
        let d = self.handles.release_dir(fh)?;
        let (dir, generation) = d.latest.filter(|_| d.cached)?;
        if self.kernel.outlived_a_switch(dir, generation) {
            return Some(StaleDir {
                ino: Node::ViewDir { view: 0, dir }.ino(),
                dir,
                generation,
            });
        }
        self.kernel.released(dir, generation);
        None
    }

    /// The kernel's cached listing of a stale handle's directory was dropped.
    pub fn stale_dir_dropped(&self, s: StaleDir) {
        self.kernel.released(s.dir, s.generation);
    }

    /// Whether every file of a listing has its attributes (a listing made while no caller
    /// statted names its files only, `stat_demand.rs`).
    fn entries_stated(&self, entries: &[DirEntry]) -> bool {
        entries
            .iter()
            .all(|e| match Node::from_ino(e.entry.attr.ino) {
                Some(Node::ViewFile { file, .. }) => {
                    self.views.file(file).is_none_or(|f| f.is_stated())
                }
                _ => true,
            })
    }
}
