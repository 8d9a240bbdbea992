//! The mounted file system as plain logic: lookup, getattr, readdir, open, read, getxattr on
//! inode numbers, returning plain values and [`Error`]. The FUSE adapter (`fuse.rs`) only maps
//! these to kernel replies, so everything here is tested without a kernel.
//!
//! ```text
//! /                       latest/  as_of/  incremental/  timeline/
//! latest/                 the snapshot at the newest completed write (moves with the table)
//! as_of/<T>/              the snapshot as of T; lists completed write instants and savepoints
//! incremental/<t1>..<t2>/ merge-ready files of the writes in (t1, t2]
//! timeline/<instant file> the instant's metadata as pretty JSON
//! ```
//!
//! Each view is resolved against one table snapshot into a [`ViewTree`]; a directory handle
//! holds the entries it was opened with, so one `readdir` never mixes two snapshots. An open file
//! holds its file descriptor, so it reads to the end even if the cleaner deletes it.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::num::NonZeroUsize;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use lru::LruCache;

use crate::error::{Error, Result};
use crate::fsview::{self, View, ViewKey};
use crate::inode::{InodeTable, Node, ROOT_INO};
use crate::listing::partition_dir;
use crate::snapshot::TableSnapshot;
use crate::timefmt::TimelineZone;
use crate::viewkey;

/// How long the kernel may keep names and attributes of views that can no longer change
/// (`as_of` times and windows older than every pending instant). Their files are immutable.
pub const TTL_FINAL: Duration = Duration::from_secs(3600);
/// ... and of everything that can change (`latest/`, the listings of `as_of/`, `incremental/`,
/// `timeline/`, views a pending instant could still change). Not zero: Linux answers a zero TTL
/// with a getattr for every entry after each readdir.
pub const TTL_FRESH: Duration = Duration::from_secs(1);

const ROOT_NAMES: [&str; 4] = ["latest", "as_of", "incremental", "timeline"];
const MAX_NAME: usize = 255;
const VIEW_CACHE: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
}

/// Attributes of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: Kind,
    pub size: u64,
    pub mtime: SystemTime,
    /// Permission bits (never any write bit).
    pub perm: u16,
    pub uid: u32,
    pub gid: u32,
}

/// A looked-up node with how long the kernel may cache it.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    pub attr: Attr,
    pub ttl: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub ino: u64,
    pub name: String,
    pub kind: Kind,
}

/// What `open` gives the adapter.
#[derive(Debug, Clone, Copy)]
pub struct Opened {
    pub fh: u64,
    /// The content can never change: the kernel may keep its page cache across opens.
    pub keep_cache: bool,
}

/// Mount-wide options.
#[derive(Debug, Clone)]
pub struct FsOptions {
    pub read_optimized: bool,
    /// Zone of naive times in paths; `None`: the table's, else UTC.
    pub zone: Option<TimelineZone>,
}

/// A resolved view laid out as a tree.
pub struct ViewTree {
    pub view: View,
    /// Directory path (`""` = view root) → sorted children `(name, kind)`.
    dirs: HashMap<Arc<str>, Vec<(Arc<str>, Kind)>>,
    /// Table-relative path → index in `view.files`.
    files: HashMap<Arc<str>, usize>,
    /// Whether no pending or future instant can change this view.
    pub is_final: bool,
}

impl ViewTree {
    pub fn new(view: View, is_final: bool) -> ViewTree {
        let mut dirs: HashMap<Arc<str>, BTreeSet<(Arc<str>, bool)>> = HashMap::new();
        dirs.entry(Arc::from("")).or_default();
        let mut files = HashMap::new();
        for (i, f) in view.files.iter().enumerate() {
            let rel = f.rel_path();
            let mut parent = String::new();
            let parts: Vec<&str> = rel.split('/').collect();
            for (n, part) in parts.iter().enumerate() {
                let is_file = n + 1 == parts.len();
                dirs.entry(Arc::from(parent.as_str()))
                    .or_default()
                    .insert((Arc::from(*part), is_file));
                if !is_file {
                    if !parent.is_empty() {
                        parent.push('/');
                    }
                    parent.push_str(part);
                    dirs.entry(Arc::from(parent.as_str())).or_default();
                }
            }
            files.insert(Arc::from(rel.as_str()), i);
        }
        let dirs = dirs
            .into_iter()
            .map(|(k, v)| {
                let children = v
                    .into_iter()
                    .map(|(n, is_file)| (n, if is_file { Kind::File } else { Kind::Dir }))
                    .collect();
                (k, children)
            })
            .collect();
        ViewTree {
            view,
            dirs,
            files,
            is_final,
        }
    }

    pub fn file(&self, path: &str) -> Option<&fsview::VisibleFile> {
        self.files.get(path).map(|&i| &self.view.files[i])
    }

    pub fn dir(&self, path: &str) -> Option<&[(Arc<str>, Kind)]> {
        self.dirs.get(path).map(Vec::as_slice)
    }
}

/// One table snapshot with what the root listings need.
struct Loaded {
    snap: TableSnapshot,
    zone: TimelineZone,
    /// `as_of/` listing: completed write instants and savepoints.
    as_of_names: Vec<String>,
    /// `incremental/` listing: one window per completed write instant.
    window_names: Vec<String>,
    /// Newest time that selects instants in windows (for a `latest` start).
    latest_window_time: Option<String>,
    /// Oldest pending instant of any action: views before it can no longer change.
    oldest_pending: Option<String>,
    /// The timeline directory's names when this snapshot was read.
    timeline_names: Vec<String>,
    generation: u64,
}

impl Loaded {
    fn read(root: &Path, opts: &FsOptions, generation: u64) -> Result<Loaded> {
        let cfg = crate::table::TableConfig::load(root)?;
        let timeline_names = timeline_names(&cfg.timeline_dir)?;
        let snap = TableSnapshot::open(root)?;
        let zone = opts
            .zone
            .clone()
            .or_else(|| snap.cfg.timeline_zone.clone())
            .unwrap_or(TimelineZone::Utc);
        let ctx = snap.context();
        let windows = fsview::incremental_windows(&ctx);
        let window_names = windows
            .iter()
            .map(|(a, b)| viewkey::window_name(Some(a), Some(b)))
            .collect();
        let latest_window_time = windows.last().map(|w| w.1.clone());
        let mut as_of: BTreeSet<String> = snap.timeline.completed.keys().cloned().collect();
        as_of.extend(snap.timeline.savepoints());
        let oldest_pending = snap.timeline.pending().map(|i| i.requested.clone()).min();
        drop(ctx);
        Ok(Loaded {
            snap,
            zone,
            as_of_names: as_of.into_iter().collect(),
            window_names,
            latest_window_time,
            oldest_pending,
            timeline_names,
            generation,
        })
    }

    /// Whether no pending or future instant can change the view of `key`.
    fn is_final(&self, key: &ViewKey, view: &View) -> bool {
        let latest = self.snap.timeline.completed.keys().next_back();
        let before_pending = |t: &str| self.oldest_pending.as_deref().is_none_or(|p| t < p);
        match key {
            ViewKey::Latest => false,
            ViewKey::AsOf(t) => latest.is_some_and(|l| t <= l) && before_pending(t),
            ViewKey::Incremental { end: Some(e), .. } => {
                let end = view.effective_end.as_deref().unwrap_or(e);
                self.latest_window_time.as_deref().is_some_and(|l| end <= l) && before_pending(end)
            }
            ViewKey::Incremental { end: None, .. } => false,
        }
    }
}

fn timeline_names(dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| Error::io(dir, e))?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    Ok(names)
}

/// A timeline file as rendered: its name, length and mtime on disk.
type RenderKey = (String, u64, SystemTime);

enum OpenFile {
    Data(std::fs::File),
    Bytes(Arc<Vec<u8>>),
}

/// The file system.
pub struct HudiFs {
    root: PathBuf,
    opts: FsOptions,
    loaded: RwLock<Arc<Loaded>>,
    views: Mutex<LruCache<ViewKey, (u64, Arc<ViewTree>)>>,
    rendered: Mutex<LruCache<RenderKey, Arc<Vec<u8>>>>,
    inodes: InodeTable,
    open_files: Mutex<HashMap<u64, Arc<OpenFile>>>,
    open_dirs: Mutex<HashMap<u64, Arc<Vec<DirEntry>>>>,
    next_fh: AtomicU64,
    /// Owner and times of synthetic directories: those of the table root.
    uid: u32,
    gid: u32,
    root_mtime: SystemTime,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl HudiFs {
    /// Open the table at `root`.
    pub fn new(root: &Path, opts: FsOptions) -> Result<HudiFs> {
        let root = root.canonicalize().map_err(|e| Error::io(root, e))?;
        let loaded = Loaded::read(&root, &opts, 1)?;
        let md = std::fs::metadata(&root).map_err(|e| Error::io(&root, e))?;
        Ok(HudiFs {
            opts,
            loaded: RwLock::new(Arc::new(loaded)),
            views: Mutex::new(LruCache::new(
                NonZeroUsize::new(VIEW_CACHE).unwrap_or(NonZeroUsize::MIN),
            )),
            rendered: Mutex::new(LruCache::new(
                NonZeroUsize::new(1024).unwrap_or(NonZeroUsize::MIN),
            )),
            inodes: InodeTable::new(),
            open_files: Mutex::new(HashMap::new()),
            open_dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            uid: md.uid(),
            gid: md.gid(),
            root_mtime: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            root,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn loaded(&self) -> Arc<Loaded> {
        self.loaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Re-read the table if its timeline changed. Returns whether a new snapshot was taken.
    /// The switch is atomic: readers hold either the old snapshot or the new one.
    pub fn refresh(&self) -> Result<bool> {
        let current = self.loaded();
        let names = timeline_names(&current.snap.cfg.timeline_dir)?;
        if names == current.timeline_names {
            return Ok(false);
        }
        let next = Loaded::read(&self.root, &self.opts, current.generation + 1)?;
        *self.loaded.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
        Ok(true)
    }

    /// The latest view's instant (for logs and tests).
    pub fn latest_instant(&self) -> Option<String> {
        self.loaded()
            .snap
            .timeline
            .completed
            .keys()
            .next_back()
            .cloned()
    }

    /// Resolve (or fetch from the cache) the tree of a view.
    pub fn view(&self, key: &ViewKey) -> Result<Arc<ViewTree>> {
        let loaded = self.loaded();
        if let Some((generation, tree)) = lock(&self.views).get(key) {
            if *generation == loaded.generation || tree.is_final {
                return Ok(tree.clone());
            }
        }
        let ctx = loaded.snap.context();
        let view = fsview::resolve(&ctx, &loaded.snap.listing, key, self.opts.read_optimized)?;
        let is_final = loaded.is_final(key, &view);
        let tree = Arc::new(ViewTree::new(view, is_final));
        lock(&self.views).put(key.clone(), (loaded.generation, tree.clone()));
        Ok(tree)
    }

    fn dir_attr(&self, ino: u64) -> Attr {
        Attr {
            ino,
            kind: Kind::Dir,
            size: 0,
            mtime: self.root_mtime,
            perm: 0o555,
            uid: self.uid,
            gid: self.gid,
        }
    }

    fn node(&self, ino: u64) -> Result<Node> {
        self.inodes
            .node(ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    /// Attributes and TTL of a node.
    pub fn getattr(&self, ino: u64) -> Result<Entry> {
        let node = self.node(ino)?;
        self.entry_for(ino, &node)
    }

    fn entry_for(&self, ino: u64, node: &Node) -> Result<Entry> {
        match node {
            Node::Root | Node::AsOfDir | Node::IncrementalDir | Node::TimelineDir => Ok(Entry {
                attr: self.dir_attr(ino),
                ttl: TTL_FRESH,
            }),
            Node::ViewDir { view, path } => {
                let tree = self.view(view)?;
                if tree.dir(path).is_none() {
                    return Err(Error::NotFound(format!("{path} in view {view:?}")));
                }
                Ok(Entry {
                    attr: self.dir_attr(ino),
                    ttl: ttl(&tree),
                })
            }
            Node::ViewFile { view, path } => {
                let tree = self.view(view)?;
                let f = tree
                    .file(path)
                    .ok_or_else(|| Error::NotFound(format!("{path} in view {view:?}")))?;
                Ok(Entry {
                    attr: Attr {
                        ino,
                        kind: Kind::File,
                        size: f.file.size,
                        mtime: f.file.mtime(),
                        perm: f.file.mode & 0o555,
                        uid: self.uid,
                        gid: self.gid,
                    },
                    ttl: ttl(&tree),
                })
            }
            Node::TimelineFile { name } => {
                let bytes = self.render_timeline_file(name)?;
                Ok(Entry {
                    attr: Attr {
                        ino,
                        kind: Kind::File,
                        size: bytes.len() as u64,
                        mtime: self.timeline_file_mtime(name),
                        perm: 0o444,
                        uid: self.uid,
                        gid: self.gid,
                    },
                    ttl: TTL_FRESH,
                })
            }
        }
    }

    /// Look `name` up in directory `parent`.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Entry> {
        let name = name
            .to_str()
            .filter(|n| !n.is_empty() && n.len() <= MAX_NAME && *n != "." && *n != "..")
            .ok_or_else(|| Error::NotFound(format!("{name:?}")))?;
        let parent_node = self.node(parent)?;
        let node = match &parent_node {
            Node::Root => match name {
                "latest" => Node::ViewDir {
                    view: Arc::new(ViewKey::Latest),
                    path: Arc::from(""),
                },
                "as_of" => Node::AsOfDir,
                "incremental" => Node::IncrementalDir,
                "timeline" => Node::TimelineDir,
                _ => return Err(Error::NotFound(name.to_string())),
            },
            Node::AsOfDir => {
                let loaded = self.loaded();
                Node::ViewDir {
                    view: Arc::new(viewkey::parse_as_of(name, &loaded.zone)?),
                    path: Arc::from(""),
                }
            }
            Node::IncrementalDir => {
                let loaded = self.loaded();
                let key = viewkey::parse_window(
                    name,
                    &loaded.zone,
                    loaded.latest_window_time.as_deref(),
                )?;
                Node::ViewDir {
                    view: Arc::new(key),
                    path: Arc::from(""),
                }
            }
            Node::TimelineDir => {
                if !self.loaded().timeline_names.iter().any(|n| n == name)
                    || !self.is_instant_file(name)
                {
                    return Err(Error::NotFound(format!("timeline/{name}")));
                }
                Node::TimelineFile {
                    name: Arc::from(name),
                }
            }
            Node::ViewDir { view, path } => {
                let child: Arc<str> = if path.is_empty() {
                    Arc::from(name)
                } else {
                    Arc::from(format!("{path}/{name}").as_str())
                };
                let tree = self.view(view)?;
                if tree.file(&child).is_some() {
                    Node::ViewFile {
                        view: view.clone(),
                        path: child,
                    }
                } else if tree.dir(&child).is_some() {
                    Node::ViewDir {
                        view: view.clone(),
                        path: child,
                    }
                } else {
                    return Err(Error::NotFound(child.to_string()));
                }
            }
            Node::ViewFile { .. } | Node::TimelineFile { .. } => {
                return Err(Error::NotFound(format!(
                    "{name}: parent is not a directory"
                )))
            }
        };
        let ino = self.inodes.ino(&node);
        self.entry_for(ino, &node)
    }

    fn is_instant_file(&self, name: &str) -> bool {
        let loaded = self.loaded();
        crate::timeline::parse_instant_file_name(name, loaded.snap.cfg.layout).is_some()
    }

    /// The entries of a directory (without `.` and `..`).
    pub fn readdir_entries(&self, ino: u64) -> Result<Vec<DirEntry>> {
        let node = self.node(ino)?;
        let dir = |name: &str, node: Node| DirEntry {
            ino: self.inodes.ino(&node),
            name: name.to_string(),
            kind: Kind::Dir,
        };
        let loaded = self.loaded();
        Ok(match node {
            Node::Root => ROOT_NAMES
                .iter()
                .map(|n| {
                    let node = match *n {
                        "latest" => Node::ViewDir {
                            view: Arc::new(ViewKey::Latest),
                            path: Arc::from(""),
                        },
                        "as_of" => Node::AsOfDir,
                        "incremental" => Node::IncrementalDir,
                        _ => Node::TimelineDir,
                    };
                    dir(n, node)
                })
                .collect(),
            Node::AsOfDir => loaded
                .as_of_names
                .iter()
                .map(|t| {
                    dir(
                        t,
                        Node::ViewDir {
                            view: Arc::new(ViewKey::AsOf(t.clone())),
                            path: Arc::from(""),
                        },
                    )
                })
                .collect(),
            Node::IncrementalDir => loaded
                .window_names
                .iter()
                .filter_map(|w| {
                    let key = viewkey::parse_window(w, &loaded.zone, None).ok()?;
                    Some(dir(
                        w,
                        Node::ViewDir {
                            view: Arc::new(key),
                            path: Arc::from(""),
                        },
                    ))
                })
                .collect(),
            Node::TimelineDir => loaded
                .timeline_names
                .iter()
                .filter(|n| {
                    crate::timeline::parse_instant_file_name(n, loaded.snap.cfg.layout).is_some()
                })
                .map(|n| DirEntry {
                    ino: self.inodes.ino(&Node::TimelineFile {
                        name: Arc::from(n.as_str()),
                    }),
                    name: n.clone(),
                    kind: Kind::File,
                })
                .collect(),
            Node::ViewDir { view, path } => {
                let tree = self.view(&view)?;
                let children = tree
                    .dir(&path)
                    .ok_or_else(|| Error::NotFound(path.to_string()))?;
                children
                    .iter()
                    .map(|(name, kind)| {
                        let child: Arc<str> = if path.is_empty() {
                            name.clone()
                        } else {
                            Arc::from(format!("{path}/{name}").as_str())
                        };
                        let node = match kind {
                            Kind::Dir => Node::ViewDir {
                                view: view.clone(),
                                path: child,
                            },
                            Kind::File => Node::ViewFile {
                                view: view.clone(),
                                path: child,
                            },
                        };
                        DirEntry {
                            ino: self.inodes.ino(&node),
                            name: name.to_string(),
                            kind: *kind,
                        }
                    })
                    .collect()
            }
            Node::ViewFile { .. } | Node::TimelineFile { .. } => {
                return Err(Error::Usage("not a directory".into()))
            }
        })
    }

    /// Open a directory: its entries are fixed for the life of the handle.
    pub fn opendir(&self, ino: u64) -> Result<u64> {
        let entries = Arc::new(self.readdir_entries(ino)?);
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.open_dirs).insert(fh, entries);
        Ok(fh)
    }

    /// Entries of an open directory handle from `offset` on.
    pub fn readdir(&self, fh: u64) -> Result<Arc<Vec<DirEntry>>> {
        lock(&self.open_dirs)
            .get(&fh)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("directory handle {fh}")))
    }

    pub fn releasedir(&self, fh: u64) {
        lock(&self.open_dirs).remove(&fh);
    }

    /// Open a file for reading.
    pub fn open(&self, ino: u64) -> Result<Opened> {
        let node = self.node(ino)?;
        let (file, keep_cache) = match &node {
            Node::ViewFile { view, path } => {
                let tree = self.view(view)?;
                let f = tree
                    .file(path)
                    .ok_or_else(|| Error::NotFound(path.to_string()))?;
                let p = partition_dir(&self.root, &f.file.partition).join(f.file.name());
                let file = std::fs::File::open(&p).map_err(|e| Error::io(&p, e))?;
                // A data file's name carries its instant and write token: its bytes never change.
                (OpenFile::Data(file), true)
            }
            Node::TimelineFile { name } => {
                (OpenFile::Bytes(self.render_timeline_file(name)?), false)
            }
            _ => return Err(Error::Usage("is a directory".into())),
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.open_files).insert(fh, Arc::new(file));
        Ok(Opened { fh, keep_cache })
    }

    /// Read up to `size` bytes at `offset` of an open file.
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        let file = lock(&self.open_files)
            .get(&fh)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("file handle {fh}")))?;
        match &*file {
            OpenFile::Data(f) => {
                let mut buf = vec![0u8; size as usize];
                let mut filled = 0;
                while filled < buf.len() {
                    match f.read_at(&mut buf[filled..], offset + filled as u64) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(Error::io(format!("file handle {fh}"), e)),
                    }
                }
                buf.truncate(filled);
                Ok(buf)
            }
            OpenFile::Bytes(b) => {
                let start = (offset as usize).min(b.len());
                let end = start.saturating_add(size as usize).min(b.len());
                Ok(b[start..end].to_vec())
            }
        }
    }

    pub fn release(&self, fh: u64) {
        lock(&self.open_files).remove(&fh);
    }

    /// Number of open file handles (for tests).
    pub fn open_file_count(&self) -> usize {
        lock(&self.open_files).len()
    }

    fn timeline_file_mtime(&self, name: &str) -> SystemTime {
        let dir = self.loaded().snap.cfg.timeline_dir.clone();
        std::fs::metadata(dir.join(name))
            .and_then(|m| m.modified())
            .unwrap_or(self.root_mtime)
    }

    /// The instant file `name` decoded to pretty JSON.
    fn render_timeline_file(&self, name: &str) -> Result<Arc<Vec<u8>>> {
        let dir = self.loaded().snap.cfg.timeline_dir.clone();
        let path = dir.join(name);
        let md = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        let key = (
            name.to_string(),
            md.len(),
            md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
        );
        if let Some(b) = lock(&self.rendered).get(&key) {
            return Ok(b.clone());
        }
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        let json = crate::metadata::decode(&bytes).map_err(|reason| Error::BadMetadata {
            path: path.clone(),
            reason,
        })?;
        let mut out = serde_json::to_vec_pretty(&json).map_err(|e| Error::BadMetadata {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        out.push(b'\n');
        let out = Arc::new(out);
        lock(&self.rendered).put(key, out.clone());
        Ok(out)
    }

    /// Extended attributes of a node: `(name, value)`.
    pub fn xattrs(&self, ino: u64) -> Result<Vec<(String, String)>> {
        let node = self.node(ino)?;
        let mut out = Vec::new();
        match &node {
            Node::ViewDir { view, path } if path.is_empty() => {
                let tree = self.view(view)?;
                let v = &tree.view;
                match &**view {
                    ViewKey::Latest | ViewKey::AsOf(_) => {
                        if let Some(i) = &v.instant {
                            out.push(("user.hudi.instant".into(), i.clone()));
                        }
                        out.push((
                            "user.hudi.mode".into(),
                            if self.opts.read_optimized {
                                "read_optimized"
                            } else {
                                "snapshot"
                            }
                            .into(),
                        ));
                    }
                    ViewKey::Incremental { start, .. } => {
                        out.push(("user.hudi.commit_times".into(), v.selected.join(",")));
                        let end = v.effective_end.clone().unwrap_or_default();
                        out.push(("user.hudi.effective_end".into(), end.clone()));
                        out.push((
                            "user.hudi.window".into(),
                            format!("{}..{end}", start.as_deref().unwrap_or(fsview::EARLIEST)),
                        ));
                        out.push(("user.hudi.listing".into(), "merge-ready".into()));
                    }
                }
            }
            Node::ViewFile { view, path } => {
                let tree = self.view(view)?;
                let f = tree
                    .file(path)
                    .ok_or_else(|| Error::NotFound(path.to_string()))?;
                if let Some(w) = &f.writer {
                    out.push(("user.hudi.instant".into(), w.clone()));
                }
                out.push(("user.hudi.file_id".into(), f.file.file_id().to_string()));
                out.push(("user.hudi.partition".into(), f.file.partition.to_string()));
                out.push(("user.hudi.slice".into(), f.slice.clone()));
            }
            _ => {}
        }
        Ok(out)
    }
}

fn ttl(tree: &ViewTree) -> Duration {
    if tree.is_final {
        TTL_FINAL
    } else {
        TTL_FRESH
    }
}

/// The inode number of the mount root.
pub const ROOT: u64 = ROOT_INO;
