//! The mounted file system as plain logic: lookup, getattr, readdir, open, read, xattrs on inode
//! numbers, returning plain values and [`Error`]. The FUSE adapter (`fuse.rs`) only maps these to
//! kernel replies, so everything here is tested without a kernel.
//!
//! ```text
//! /                       latest/  as_of/  incremental/  timeline/
//! latest/                 the snapshot at the newest completed write (moves with the table)
//! as_of/<T>/              the snapshot as of T; lists completed write instants and savepoints
//! incremental/<t1>..<t2>/ merge-ready files of the writes in (t1, t2]
//! timeline/<instant file> the instant's metadata as pretty JSON
//! ```
//!
//! A view is planned against one table snapshot ([`Snapshot`]) and its partitions are resolved
//! only when a caller walks into them. A directory handle holds the entries it was opened with,
//! so one `readdir` never mixes two snapshots; an open file holds its descriptor, so it reads to
//! the end even if the cleaner deletes it.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::num::NonZeroUsize;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, SystemTime};

use lru::LruCache;

use crate::inode::{InodeTable, Node};
use crate::kernel_cache::KernelCache;
use crate::partitions::{PartitionCache, PartitionListing};
use hudifs_core::error::{Error, Result};
use hudifs_core::fsview::{self, Context, PartitionView, Plan, ViewKey};
use hudifs_core::listing::{self, partition_dir, DataFile};
use hudifs_core::table::TableConfig;
use hudifs_core::timefmt::TimelineZone;
use hudifs_core::timeline::Timeline;
use hudifs_core::viewkey;

/// How long the kernel may keep names and attributes of views that can no longer change
/// (`as_of` times and windows older than every pending instant): their files are immutable.
pub const TTL_FINAL: Duration = Duration::from_secs(24 * 3600);
/// ... and of everything that can change (`latest/`, the listings of `as_of/`, `incremental/`,
/// `timeline/`, views a pending instant could still change). Not zero: Linux answers a zero TTL
/// with a getattr for every entry after each readdir.
pub const TTL_FRESH: Duration = Duration::from_secs(1);

const ROOT_NAMES: [&str; 4] = ["latest", "as_of", "incremental", "timeline"];
const MAX_NAME: usize = 255;
/// Threads that resolve the partitions of one directory listing side by side.
const RESOLVE_THREADS: usize = 4;
/// Resolved views kept (each holds a few bytes per file it shows).
const VIEW_CACHE: usize = 32;

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

#[derive(Debug, Clone)]
pub struct DirEntry {
    pub name: Arc<str>,
    pub entry: Entry,
}

/// What `open` gives the adapter.
#[derive(Debug, Clone)]
pub struct Opened {
    pub fh: u64,
    /// The content can never change: the kernel may keep its page cache across opens.
    pub keep_cache: bool,
    /// The table file behind a data file, for kernel passthrough.
    pub backing: Option<Arc<std::fs::File>>,
}

/// Mount-wide options.
#[derive(Debug, Clone)]
pub struct FsOptions {
    pub read_optimized: bool,
    /// Zone of naive times in paths; `None`: the table's, else UTC.
    pub zone: Option<TimelineZone>,
}

/// One snapshot of the table's timeline. Partitions are listed lazily through the
/// [`PartitionCache`]; the listings of `as_of/`, `incremental/` and `timeline/` are derived
/// when read, so taking a snapshot costs what changed, not the length of the history.
pub struct Snapshot {
    pub generation: u64,
    pub ctx: Arc<Context>,
    /// Every partition path, sorted.
    pub partitions: Arc<Vec<Arc<str>>>,
    pub zone: TimelineZone,
    /// Newest time that selects instants in windows (for a `latest` start).
    pub latest_window_time: Option<String>,
    /// Oldest pending instant of any action: views before it can no longer change.
    pub oldest_pending: Option<String>,
}

impl Snapshot {
    /// Read the timeline and discover the partitions of the table at `root`.
    pub fn read(root: &Path, opts: &FsOptions, generation: u64) -> Result<Snapshot> {
        let cfg = Arc::new(TableConfig::load(root)?);
        let timeline = Arc::new(Timeline::load(&cfg)?);
        let partitions = listing::discover_partitions(&cfg)?
            .into_iter()
            .map(|p| Arc::from(p.as_str()))
            .collect();
        Ok(Snapshot::new(
            Arc::new(Context::new(cfg, timeline)),
            Arc::new(partitions),
            opts,
            generation,
        ))
    }

    pub fn new(
        ctx: Arc<Context>,
        partitions: Arc<Vec<Arc<str>>>,
        opts: &FsOptions,
        generation: u64,
    ) -> Snapshot {
        let zone = opts
            .zone
            .clone()
            .or_else(|| ctx.cfg.timeline_zone.clone())
            .unwrap_or(TimelineZone::Utc);
        let tl = &ctx.timeline;
        let latest_window_time = tl.latest_completion().map(str::to_string);
        let oldest_pending = tl.oldest_pending().map(str::to_string);
        Snapshot {
            generation,
            ctx,
            partitions,
            zone,
            latest_window_time,
            oldest_pending,
        }
    }

    /// `as_of/` listing: completed write instants and savepoints.
    pub fn as_of_names(&self) -> Vec<String> {
        let mut as_of: BTreeSet<String> = self.ctx.timeline.completed.keys().cloned().collect();
        as_of.extend(self.ctx.savepoints().iter().cloned());
        as_of.into_iter().collect()
    }

    /// `incremental/` listing: one window per completed write instant.
    pub fn window_names(&self) -> Vec<String> {
        fsview::incremental_windows(&self.ctx)
            .iter()
            .map(|(a, b)| viewkey::window_name(Some(a), Some(b)))
            .collect()
    }

    /// `timeline/` listing: every instant file, sorted.
    pub fn timeline_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.ctx.timeline.file_names().map(str::to_string).collect();
        names.sort();
        names
    }

    pub fn cfg(&self) -> &TableConfig {
        &self.ctx.cfg
    }

    /// Whether no pending or future instant can change a planned view.
    fn is_final(&self, plan: &Plan) -> bool {
        let latest = self.ctx.timeline.completed.keys().next_back();
        let before_pending = |t: &str| self.oldest_pending.as_deref().is_none_or(|p| t < p);
        match &plan.key {
            ViewKey::Latest => false,
            ViewKey::AsOf(t) => latest.is_some_and(|l| t <= l) && before_pending(t),
            ViewKey::Incremental { end: Some(e), .. } => {
                let end = plan.effective_end.as_deref().unwrap_or(e);
                self.latest_window_time.as_deref().is_some_and(|l| end <= l) && before_pending(end)
            }
            ViewKey::Incremental { end: None, .. } => false,
        }
    }

    /// Index range of the partitions whose path starts with `dir` (callers keep those equal to
    /// it or below it: `dir/...`). Paths with a common prefix are contiguous when sorted.
    fn partitions_under(&self, dir: &str) -> std::ops::Range<usize> {
        let start = self.partitions.partition_point(|p| &**p < dir);
        let len = self.partitions[start..]
            .iter()
            .take_while(|p| p.starts_with(dir))
            .count();
        start..start + len
    }
}

/// Kernel cache entries to drop: inodes (attributes and cached pages) and `(parent, name)`
/// directory entries.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Invalidations {
    pub inodes: Vec<u64>,
    pub entries: Vec<(u64, String)>,
    /// Directories of `latest/` being switched (see [`HudiFs::switched`]).
    switching: Vec<u32>,
}

/// A resolved partition of a view.
pub struct PartView {
    listing: Arc<PartitionListing>,
    chosen: PartitionView,
}

impl PartView {
    /// The names the view shows in this partition, with their file ids.
    fn names(&self) -> impl Iterator<Item = (&str, u64)> + '_ {
        self.chosen.files.iter().map(|c| {
            let i = c.index as usize;
            (self.listing.files[i].name(), self.listing.ids[i])
        })
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.chosen
            .files
            .binary_search_by(|c| self.listing.files[c.index as usize].name().cmp(name))
            .ok()
    }
}

/// A view planned against one snapshot, its partitions resolved on demand.
pub struct ViewState {
    snap: Arc<Snapshot>,
    pub plan: Plan,
    parts: Vec<OnceLock<std::result::Result<Arc<PartView>, String>>>,
    pub is_final: bool,
}

impl ViewState {
    /// How long the kernel may keep this view's names and attributes: for good if it can no
    /// longer change, or if it is `latest/`, whose changes the kernel is told of at every switch
    /// (`kernel_cache.rs`); briefly otherwise.
    fn ttl(&self) -> Duration {
        if self.is_final || self.plan.key == ViewKey::Latest {
            TTL_FINAL
        } else {
            TTL_FRESH
        }
    }
}

/// An open directory handle: the entries it was opened with, and for `latest/` the directory
/// and snapshot generation (for the kernel's listing cache).
struct OpenDir {
    entries: Arc<Vec<DirEntry>>,
    latest: Option<(u32, u64)>,
}

/// How the kernel may cache the listing of an opened directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirCache {
    /// Not at all: read it from the daemon every time.
    Off,
    /// Cache what this handle reads, dropping what was cached before.
    Fill,
    /// Reuse the cached listing (and cache what is read).
    Reuse,
}

/// The entries of an open directory handle, as `readdir` hands them out.
pub struct Listing {
    entries: Arc<Vec<DirEntry>>,
    /// The longest TTL any entry may be given now.
    ttl_cap: Duration,
}

impl Listing {
    /// The entries with the TTLs to give them now.
    pub fn iter(&self) -> impl Iterator<Item = (&str, Entry)> + '_ {
        self.entries.iter().map(|e| {
            let mut entry = e.entry;
            entry.ttl = entry.ttl.min(self.ttl_cap);
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

enum OpenFile {
    Data(Arc<std::fs::File>),
    Bytes(Arc<Vec<u8>>),
}

/// A timeline file as rendered: its name, length and mtime on disk.
type RenderKey = (String, u64, SystemTime);

/// The file system.
pub struct HudiFs {
    root: PathBuf,
    opts: FsOptions,
    snapshot: RwLock<Arc<Snapshot>>,
    partitions: PartitionCache,
    views: Mutex<LruCache<u32, Arc<ViewState>>>,
    rendered: Mutex<LruCache<RenderKey, Arc<Vec<u8>>>>,
    inodes: InodeTable,
    open_files: Mutex<HashMap<u64, Arc<OpenFile>>>,
    open_dirs: Mutex<HashMap<u64, OpenDir>>,
    /// What the kernel holds of `latest/` (names handed out, who may fill its cached listings).
    kernel: KernelCache<Arc<PartView>>,
    next_fh: AtomicU64,
    /// Timeline names that are not instant files, so that they are reported once.
    ignored: Mutex<BTreeSet<String>>,
    /// What the last poll of the timeline directory saw (see `live::poll_once`).
    pub(crate) last_poll: Mutex<Option<crate::live::PollStamp>>,
    /// Owner and times of synthetic directories: those of the table root.
    uid: u32,
    gid: u32,
    root_mtime: SystemTime,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

impl HudiFs {
    /// Open the table at `root`.
    pub fn new(root: &Path, opts: FsOptions) -> Result<HudiFs> {
        let root = root.canonicalize().map_err(|e| Error::io(root, e))?;
        let snap = Snapshot::read(&root, &opts, 1)?;
        let md = std::fs::metadata(&root).map_err(|e| Error::io(&root, e))?;
        Ok(HudiFs {
            opts,
            snapshot: RwLock::new(Arc::new(snap)),
            partitions: PartitionCache::default(),
            views: Mutex::new(LruCache::new(
                NonZeroUsize::new(VIEW_CACHE).unwrap_or(NonZeroUsize::MIN),
            )),
            rendered: Mutex::new(LruCache::new(
                NonZeroUsize::new(1024).unwrap_or(NonZeroUsize::MIN),
            )),
            inodes: InodeTable::new(),
            open_files: Mutex::new(HashMap::new()),
            open_dirs: Mutex::new(HashMap::new()),
            kernel: KernelCache::default(),
            next_fh: AtomicU64::new(1),
            ignored: Mutex::new(BTreeSet::new()),
            last_poll: Mutex::new(None),
            uid: md.uid(),
            gid: md.gid(),
            root_mtime: md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            root,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn options(&self) -> &FsOptions {
        &self.opts
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Make `next` the current snapshot. The switch is atomic: readers hold either the old
    /// snapshot or the new one. Partitions the new instants touched are re-listed on next use.
    pub fn install(&self, next: Snapshot, touched: &BTreeSet<String>) {
        touched.iter().for_each(|p| self.partitions.invalidate(p));
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
    }

    /// Forget every partition listing (the timeline changed in a way that may touch them all).
    pub fn invalidate_all_listings(&self) {
        self.partitions.invalidate_all();
    }

    pub(crate) fn is_ignored(&self, name: &str) -> bool {
        lock(&self.ignored).contains(name)
    }

    pub(crate) fn ignore(&self, name: String) {
        lock(&self.ignored).insert(name);
    }

    /// The kernel cache entries of `latest/` that a change made stale, decided against what the
    /// kernel was handed (`kernel_cache.rs`): for every directory of `latest/` the change touched
    /// (every one the kernel knows when the change cannot tell), the names that left it or now
    /// name another file, and the directory's inode (attributes and cached listing). Until
    /// [`HudiFs::switched`] is called with the result, those directories' cached listings are
    /// not reused. Resolving the new `latest/` here also warms it.
    pub fn latest_invalidations(&self, change: &crate::live::Change) -> Invalidations {
        let mut inv = Invalidations::default();
        let root = Node::ViewDir { view: 0, dir: 0 }.ino();
        inv.inodes.push(root);
        // A refused latest/ (unreadable replacecommit metadata) has nothing in it.
        let new = self.view(0).ok();
        let generation = self.snapshot().generation;
        let dirs = self.switched_dirs(change.touched.as_ref(), new.is_none());
        for d in dirs {
            let Ok(path) = self.dir_path(d) else { continue };
            let ino = Node::ViewDir { view: 0, dir: d }.ino();
            let handed = self.kernel.begin_switch(d, generation);
            inv.switching.push(d);
            inv.inodes.push(ino);
            let files = new.as_ref().and_then(|v| {
                let i = self.partition_index(v, &path)?;
                self.part(v, i).ok()
            });
            if let Some(old) = &handed.files {
                let now: HashMap<&str, u64> = files
                    .as_ref()
                    .map(|pv| pv.names().collect())
                    .unwrap_or_default();
                for (name, id) in old.names() {
                    if now.get(name) != Some(&id) {
                        inv.entries.push((ino, name.to_string()));
                    }
                }
            }
            // A sub-directory handed out leaves only if a touched partition lies below it and
            // nothing below it shows a file any more.
            let mut kept = BTreeSet::new();
            for s in handed.subdirs {
                let child = join(&path, &s);
                let below = format!("{child}/");
                let may_change = change
                    .touched
                    .as_ref()
                    .is_none_or(|t| t.iter().any(|p| *p == child || p.starts_with(&below)));
                let stays = !may_change
                    || new
                        .as_ref()
                        .is_some_and(|v| self.dir_exists(v, &child).unwrap_or(false));
                if stays {
                    kept.insert(s);
                } else {
                    inv.entries.push((ino, s.to_string()));
                }
            }
            self.kernel.replace_handed(d, generation, files, kept);
        }
        // A clean that moved the retention bound refuses cached history: drop its names.
        let snap = self.snapshot();
        if change.previous.ctx.retention_bound() != snap.ctx.retention_bound() {
            let cached: Vec<(u32, Arc<ViewState>)> = lock(&self.views)
                .iter()
                .map(|(k, v)| (*k, v.clone()))
                .collect();
            for (id, v) in cached {
                let refused =
                    fsview::plan(&snap.ctx, &v.plan.key, self.opts.read_optimized).is_err();
                let name = match &v.plan.key {
                    ViewKey::AsOf(t) => (crate::inode::AS_OF_INO, t.clone()),
                    ViewKey::Incremental { start, end } => (
                        crate::inode::INCREMENTAL_INO,
                        viewkey::window_name(start.as_deref(), end.as_deref()),
                    ),
                    ViewKey::Latest => continue,
                };
                if refused {
                    inv.entries.push(name);
                    inv.inodes.push(Node::ViewDir { view: id, dir: 0 }.ino());
                    lock(&self.views).pop(&id);
                }
            }
        }
        inv.inodes.sort();
        inv.inodes.dedup();
        inv
    }

    /// The directories of `latest/` whose entries a change of the touched partitions (`None`:
    /// possibly all) can change: the partition directories and their ancestors, as far as the
    /// kernel was ever shown them (a directory's id is interned before it is handed out); every
    /// directory the kernel knows when the change cannot tell or `latest/` is refused.
    fn switched_dirs(&self, touched: Option<&BTreeSet<String>>, refused: bool) -> BTreeSet<u32> {
        let mut dirs = BTreeSet::new();
        match touched {
            Some(touched) if !refused => {
                for p in touched {
                    dirs.insert(0);
                    let mut path = String::new();
                    for comp in p.split('/').filter(|c| !c.is_empty()) {
                        path = join(&path, comp);
                        match self.inodes.dirs.find(path.as_str()) {
                            Some(id) => dirs.insert(id),
                            None => break,
                        };
                    }
                }
            }
            _ => dirs.extend(self.kernel.known_dirs()),
        }
        dirs
    }

    /// A switch to snapshot `generation` is about to be installed: from now until
    /// [`HudiFs::switched`], no open of the directories it changes reuses the kernel's cached
    /// listing (an open between the install and the invalidation would read the old one).
    pub fn begin_switch(&self, touched: Option<&BTreeSet<String>>, generation: u64) {
        for d in self.switched_dirs(touched, false) {
            let _ = self.kernel.begin_switch(d, generation);
        }
    }

    /// The invalidations of a switch were sent: the directories' cached listings may be reused
    /// again (by handles of the new snapshot).
    pub fn switched(&self, inv: &Invalidations) {
        for d in &inv.switching {
            self.kernel.switched(*d);
        }
    }

    /// Re-read the timeline directory and apply what changed (the polling path; the watcher in
    /// `live.rs` applies inotify events directly). Returns whether a new snapshot was taken.
    pub fn refresh(&self) -> Result<bool> {
        crate::live::poll_once(self, Duration::ZERO).map(|c| c.is_some())
    }

    /// The instant `latest/` shows.
    pub fn latest_instant(&self) -> Option<String> {
        self.snapshot()
            .ctx
            .timeline
            .completed
            .keys()
            .next_back()
            .cloned()
    }

    /// The view with id `view`, planned against the current snapshot (or kept from an older one
    /// if it can no longer change).
    fn view(&self, view: u32) -> Result<Arc<ViewState>> {
        let snap = self.snapshot();
        let cached = lock(&self.views).get(&view).cloned();
        if let Some(v) = &cached {
            if v.snap.generation == snap.generation {
                return Ok(v.clone());
            }
        }
        let key = self
            .inodes
            .views
            .get(view)
            .ok_or_else(|| Error::NotFound(format!("view {view}")))?;
        // Planning is cheap and always against the current snapshot: a view that can no longer
        // change keeps its files, but a clean can still make it refused (guarantee 5).
        let plan = fsview::plan(&snap.ctx, &key, self.opts.read_optimized)?;
        if let Some(v) = cached.filter(|v| v.is_final) {
            return Ok(v);
        }
        let is_final = snap.is_final(&plan);
        let state = Arc::new(ViewState {
            parts: (0..snap.partitions.len())
                .map(|_| OnceLock::new())
                .collect(),
            snap,
            plan,
            is_final,
        });
        lock(&self.views).put(view, state.clone());
        Ok(state)
    }

    /// The TTL of a name just handed out from view `v`: its own, unless `v` is a `latest/` of a
    /// snapshot that has since moved on (the switch's invalidations may have missed the name, see
    /// `kernel_cache.rs`). Asked after the name was recorded as handed out.
    fn answer_ttl(&self, v: &ViewState) -> Duration {
        if v.plan.key == ViewKey::Latest && v.snap.generation < self.snapshot().generation {
            TTL_FRESH
        } else {
            v.ttl()
        }
    }

    /// The resolved partition `i` of a view.
    fn part(&self, v: &ViewState, i: usize) -> Result<Arc<PartView>> {
        let slot = v
            .parts
            .get(i)
            .ok_or_else(|| Error::NotFound(format!("partition {i}")))?;
        let r = slot.get_or_init(|| {
            let partition = &v.snap.partitions[i];
            if !v.plan.may_list(partition) {
                return Ok(Arc::new(PartView {
                    listing: Arc::default(),
                    chosen: PartitionView::default(),
                }));
            }
            let listing = self
                .partitions
                .listing(v.snap.cfg(), partition, v.snap.generation)
                .map_err(|e| e.to_string())?;
            let chosen = fsview::resolve_partition(&v.snap.ctx, &v.plan, &listing.files);
            Ok(Arc::new(PartView { listing, chosen }))
        });
        r.clone()
            .map_err(|e| Error::io(&self.root, std::io::Error::other(e)))
    }

    fn partition_index(&self, v: &ViewState, partition: &str) -> Option<usize> {
        v.snap
            .partitions
            .binary_search_by(|p| (**p).cmp(partition))
            .ok()
    }

    fn dir_entry(&self, ino: u64, ttl: Duration) -> Entry {
        Entry {
            attr: Attr {
                ino,
                kind: Kind::Dir,
                size: 0,
                mtime: self.root_mtime,
                perm: 0o555,
                uid: self.uid,
                gid: self.gid,
            },
            ttl,
        }
    }

    fn file_entry(&self, ino: u64, f: &DataFile, ttl: Duration) -> Entry {
        Entry {
            attr: Attr {
                ino,
                kind: Kind::File,
                size: f.size,
                mtime: f.mtime(),
                perm: f.mode & 0o555,
                uid: self.uid,
                gid: self.gid,
            },
            ttl,
        }
    }

    fn view_root(&self, key: ViewKey) -> Result<Node> {
        let view = self
            .inodes
            .views
            .id(&Arc::new(key))
            .ok_or_else(|| Error::NotFound("too many distinct views".into()))?;
        Ok(Node::ViewDir { view, dir: 0 })
    }

    /// The node a name at the mount root stands for.
    fn root_child(&self, name: &str) -> Result<Node> {
        match name {
            "latest" => self.view_root(ViewKey::Latest),
            "as_of" => Ok(Node::AsOfDir),
            "incremental" => Ok(Node::IncrementalDir),
            "timeline" => Ok(Node::TimelineDir),
            _ => Err(Error::NotFound(name.to_string())),
        }
    }

    /// Attributes and TTL of a node.
    pub fn getattr(&self, ino: u64) -> Result<Entry> {
        let node = Node::from_ino(ino).ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        match node {
            Node::Root | Node::AsOfDir | Node::IncrementalDir | Node::TimelineDir => {
                Ok(self.dir_entry(ino, TTL_FRESH))
            }
            Node::ViewDir { view, dir } => {
                let v = self.view(view)?;
                let path = self.dir_path(dir)?;
                if !self.dir_exists(&v, &path)? {
                    return Err(Error::NotFound(path.to_string()));
                }
                Ok(self.dir_entry(ino, v.ttl()))
            }
            Node::ViewFile { view, file } => {
                // Table files never change: their attributes do not depend on the view.
                let f = self
                    .partitions
                    .registry
                    .get(file)
                    .ok_or_else(|| Error::NotFound(format!("file {file}")))?;
                let ttl = self.view(view).map(|v| v.ttl()).unwrap_or(TTL_FRESH);
                Ok(self.file_entry(ino, &f, ttl))
            }
            Node::TimelineFile { name } => {
                let name = self
                    .inodes
                    .timeline_names
                    .get(name)
                    .ok_or_else(|| Error::NotFound(format!("timeline file {name}")))?;
                let bytes = self.render_timeline_file(&name)?;
                let mut e = self.dir_entry(ino, TTL_FRESH);
                e.attr.kind = Kind::File;
                e.attr.size = bytes.len() as u64;
                e.attr.perm = 0o444;
                e.attr.mtime = self.timeline_file_mtime(&name);
                Ok(e)
            }
        }
    }

    fn dir_path(&self, dir: u32) -> Result<Arc<str>> {
        self.inodes
            .dirs
            .get(dir)
            .ok_or_else(|| Error::NotFound(format!("directory {dir}")))
    }

    /// Whether directory `path` of a view has any file at or below it.
    fn dir_exists(&self, v: &ViewState, path: &str) -> Result<bool> {
        if path.is_empty() {
            return Ok(true);
        }
        for i in v.snap.partitions_under(path) {
            let p = &v.snap.partitions[i];
            if (&**p == path || p.starts_with(&format!("{path}/")))
                && !self.part(v, i)?.chosen.files.is_empty()
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Look `name` up in directory `parent`.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Entry> {
        let name = name
            .to_str()
            .filter(|n| !n.is_empty() && n.len() <= MAX_NAME && *n != "." && *n != "..")
            .ok_or_else(|| Error::NotFound(format!("{name:?}")))?;
        let parent =
            Node::from_ino(parent).ok_or_else(|| Error::NotFound(format!("inode {parent}")))?;
        let node = match parent {
            Node::Root => self.root_child(name)?,
            Node::AsOfDir => {
                let snap = self.snapshot();
                self.view_root(viewkey::parse_as_of(name, &snap.zone)?)?
            }
            Node::IncrementalDir => {
                let snap = self.snapshot();
                let key =
                    viewkey::parse_window(name, &snap.zone, snap.latest_window_time.as_deref())?;
                self.view_root(key)?
            }
            Node::TimelineDir => {
                let snap = self.snapshot();
                if !snap.ctx.timeline.has_file(name) {
                    return Err(Error::NotFound(format!("timeline/{name}")));
                }
                let id = self
                    .inodes
                    .timeline_names
                    .id(&Arc::from(name))
                    .ok_or_else(|| Error::NotFound(name.to_string()))?;
                Node::TimelineFile { name: id }
            }
            Node::ViewDir { view, dir } => {
                let v = self.view(view)?;
                let path = self.dir_path(dir)?;
                // A file of the partition at `path`?
                if let Some(i) = self.partition_index(&v, &path) {
                    let pv = self.part(&v, i)?;
                    if let Some(pos) = pv.position(name) {
                        if view == 0 {
                            self.kernel.handed_files(dir, v.snap.generation, &pv);
                        }
                        let c = pv.chosen.files[pos];
                        let node = Node::ViewFile {
                            view,
                            file: pv.listing.ids[c.index as usize],
                        };
                        let f = &pv.listing.files[c.index as usize];
                        return Ok(self.file_entry(node.ino(), f, self.answer_ttl(&v)));
                    }
                }
                let child = join(&path, name);
                if !self.dir_exists(&v, &child)? {
                    return Err(Error::NotFound(child));
                }
                let child_dir = self
                    .inodes
                    .dirs
                    .id(&Arc::from(child.as_str()))
                    .ok_or_else(|| Error::NotFound(child.clone()))?;
                if view == 0 {
                    self.kernel.handed_subdir(dir, &Arc::from(name));
                }
                let node = Node::ViewDir {
                    view,
                    dir: child_dir,
                };
                return Ok(self.dir_entry(node.ino(), self.answer_ttl(&v)));
            }
            Node::ViewFile { .. } | Node::TimelineFile { .. } => {
                return Err(Error::NotFound(format!(
                    "{name}: parent is not a directory"
                )))
            }
        };
        // Views refuse here (cleaned history, unreadable metadata): check before answering.
        if let Node::ViewDir { view, .. } = node {
            let v = self.view(view)?;
            return Ok(self.dir_entry(node.ino(), v.ttl()));
        }
        self.getattr(node.ino())
    }

    /// The entries of a directory (without `.` and `..`), with their attributes.
    pub fn readdir_entries(&self, ino: u64) -> Result<Vec<DirEntry>> {
        let node = Node::from_ino(ino).ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        let snap = self.snapshot();
        let dir = |name: &str, node: Node, ttl: Duration| DirEntry {
            name: Arc::from(name),
            entry: self.dir_entry(node.ino(), ttl),
        };
        Ok(match node {
            Node::Root => {
                let mut out = Vec::new();
                for n in ROOT_NAMES {
                    out.push(dir(n, self.root_child(n)?, TTL_FRESH));
                }
                out
            }
            Node::AsOfDir => {
                let names = snap.as_of_names();
                let mut out = Vec::with_capacity(names.len());
                for t in &names {
                    let node = self.view_root(ViewKey::AsOf(t.clone()))?;
                    out.push(dir(t, node, TTL_FRESH));
                }
                out
            }
            Node::IncrementalDir => {
                let names = snap.window_names();
                let mut out = Vec::with_capacity(names.len());
                for w in &names {
                    let key = viewkey::parse_window(w, &snap.zone, None)?;
                    out.push(dir(w, self.view_root(key)?, TTL_FRESH));
                }
                out
            }
            Node::TimelineDir => {
                let mut out = Vec::new();
                for n in &snap.timeline_names() {
                    let Some(id) = self.inodes.timeline_names.id(&Arc::from(n.as_str())) else {
                        continue;
                    };
                    let ino = Node::TimelineFile { name: id }.ino();
                    match self.getattr(ino) {
                        Ok(entry) => out.push(DirEntry {
                            name: Arc::from(n.as_str()),
                            entry,
                        }),
                        // An unreadable instant file is still listed; reading it fails.
                        Err(_) => {
                            let mut entry = self.dir_entry(ino, TTL_FRESH);
                            entry.attr.kind = Kind::File;
                            entry.attr.perm = 0o444;
                            out.push(DirEntry {
                                name: Arc::from(n.as_str()),
                                entry,
                            });
                        }
                    }
                }
                out
            }
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
                // Files of the partition at `path`.
                if let Some(i) = self.partition_index(&v, &path) {
                    let pv = self.part(&v, i)?;
                    if view == 0 {
                        self.kernel.handed_files(dir_id, v.snap.generation, &pv);
                    }
                    for c in &pv.chosen.files {
                        let f = &pv.listing.files[c.index as usize];
                        let node = Node::ViewFile {
                            view,
                            file: pv.listing.ids[c.index as usize],
                        };
                        out.push(DirEntry {
                            name: Arc::from(f.name()),
                            entry: self.file_entry(node.ino(), f, v.ttl()),
                        });
                    }
                }
                if out.is_empty() && !path.is_empty() && !self.dir_exists(&v, &path)? {
                    return Err(Error::NotFound(path.to_string()));
                }
                out
            }
            Node::ViewFile { .. } | Node::TimelineFile { .. } => {
                return Err(Error::Usage("not a directory".into()))
            }
        })
    }

    /// The names of the sub-directories of directory `path` of a view that have a file at or
    /// below them: the next path component of every non-empty partition below.
    fn subdir_names(&self, v: &ViewState, path: &str) -> Result<BTreeSet<String>> {
        // The partitions below, with the sub-directory each lies in.
        let below: Vec<(usize, &str)> = v
            .snap
            .partitions_under(path)
            .filter_map(|i| {
                let p = &v.snap.partitions[i];
                let rest = if path.is_empty() {
                    Some(&**p)
                } else {
                    p.strip_prefix(path).and_then(|r| r.strip_prefix('/'))
                };
                let rest = rest.filter(|r| !r.is_empty())?;
                Some((i, rest.split('/').next().unwrap_or(rest)))
            })
            .collect();
        // The first partition of each sub-directory usually decides it: resolve those side by
        // side (listing a partition is mostly waiting for the file system).
        let mut firsts: Vec<usize> = Vec::new();
        for (k, (i, first)) in below.iter().enumerate() {
            if k == 0 || below[k - 1].1 != *first {
                firsts.push(*i);
            }
        }
        self.resolve_parts(v, &firsts);
        let mut subdirs = BTreeSet::new();
        for (i, first) in below {
            if subdirs.contains(first) {
                continue;
            }
            if !self.part(v, i)?.chosen.files.is_empty() {
                subdirs.insert(first.to_string());
            }
        }
        Ok(subdirs)
    }

    /// Resolve partitions `indexes` of a view on several threads (errors are kept in the
    /// partitions' slots, where the callers meet them).
    fn resolve_parts(&self, v: &ViewState, indexes: &[usize]) {
        let todo: Vec<usize> = indexes
            .iter()
            .copied()
            .filter(|i| v.parts.get(*i).is_some_and(|s| s.get().is_none()))
            .collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(RESOLVE_THREADS)
            .min(todo.len() / 4);
        if threads < 2 {
            return;
        }
        let next = AtomicU64::new(0);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::Relaxed) as usize;
                    let Some(i) = todo.get(k) else { break };
                    let _ = self.part(v, *i);
                });
            }
        });
    }

    /// Open a directory: its entries are fixed for the life of the handle. Listings of views
    /// that can no longer change are cached by the kernel; those of `latest/` too, as far as
    /// the switches allow (`kernel_cache.rs`).
    pub fn opendir(&self, ino: u64) -> Result<OpenedDir> {
        let generation = self.snapshot().generation;
        let entries = Arc::new(self.readdir_entries(ino)?);
        let (cache, latest) = match Node::from_ino(ino) {
            Some(Node::ViewDir { view: 0, dir }) => {
                let cache = if self.kernel.open(dir, generation) {
                    DirCache::Reuse
                } else {
                    DirCache::Fill
                };
                (cache, Some((dir, generation)))
            }
            Some(Node::ViewDir { view, .. }) if self.view(view).is_ok_and(|v| v.is_final) => {
                (DirCache::Reuse, None)
            }
            _ => (DirCache::Off, None),
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.open_dirs).insert(fh, OpenDir { entries, latest });
        Ok(OpenedDir { fh, cache })
    }

    /// Entries of an open directory handle. A handle of `latest/` that outlived a switch gives
    /// its names short timeouts: the switch's invalidations may have missed them.
    pub fn readdir(&self, fh: u64) -> Result<Listing> {
        let (entries, latest) = {
            let dirs = lock(&self.open_dirs);
            let d = dirs
                .get(&fh)
                .ok_or_else(|| Error::NotFound(format!("directory handle {fh}")))?;
            (d.entries.clone(), d.latest)
        };
        let ttl_cap = match latest {
            Some((_, generation)) if generation < self.snapshot().generation => TTL_FRESH,
            _ => Duration::MAX,
        };
        Ok(Listing { entries, ttl_cap })
    }

    /// Release a directory handle. A handle of `latest/` that outlived a switch of its directory
    /// may have filled the kernel's cached listing with the old snapshot: the caller drops that
    /// (invalidates the inode) and then calls [`HudiFs::stale_dir_dropped`].
    pub fn releasedir(&self, fh: u64) -> Option<StaleDir> {
        let (dir, generation) = lock(&self.open_dirs).remove(&fh)?.latest?;
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

    /// The view's partition view and position of file `file`, if the view shows it.
    fn find_in_view(&self, v: &ViewState, file: u64) -> Result<(Arc<PartView>, usize)> {
        let f = self
            .partitions
            .registry
            .get(file)
            .ok_or_else(|| Error::NotFound(format!("file {file}")))?;
        let missing = || Error::NotFound(format!("{} is not in this view", f.rel_path()));
        let i = self.partition_index(v, &f.partition).ok_or_else(missing)?;
        let pv = self.part(v, i)?;
        let pos = pv.position(f.name()).ok_or_else(missing)?;
        let c = pv.chosen.files[pos];
        if pv.listing.ids[c.index as usize] != file {
            return Err(missing());
        }
        Ok((pv, pos))
    }

    /// Open a file for reading.
    pub fn open(&self, ino: u64) -> Result<Opened> {
        let node = Node::from_ino(ino).ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        let (file, keep_cache, backing) = match node {
            Node::ViewFile { view: _, file } => {
                // Visibility was decided when the name was looked up (a listing of one snapshot);
                // a file that left the view since keeps opening for whoever listed it, as in a
                // Hudi reader working from its listing. Lookups no longer find it.
                let f = self
                    .partitions
                    .registry
                    .get(file)
                    .ok_or_else(|| Error::NotFound(format!("file {file}")))?;
                let p = partition_dir(&self.root, &f.partition).join(f.name());
                let file = std::fs::File::open(&p).map_err(|e| Error::io(&p, e))?;
                // Readers of table files read them whole, front to back: let the kernel read
                // ahead as far as it goes for sequential access (the daemon's worker threads
                // split one reader's stream, which would otherwise look less sequential).
                // SAFETY: a valid descriptor; advice only.
                unsafe {
                    use std::os::fd::AsRawFd;
                    libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_SEQUENTIAL);
                }
                let file = Arc::new(file);
                // A data file's name carries its instant and write token: its bytes never change.
                (OpenFile::Data(file.clone()), true, Some(file))
            }
            Node::TimelineFile { name } => {
                let name = self
                    .inodes
                    .timeline_names
                    .get(name)
                    .ok_or_else(|| Error::NotFound(format!("timeline file {name}")))?;
                (
                    OpenFile::Bytes(self.render_timeline_file(&name)?),
                    false,
                    None,
                )
            }
            _ => return Err(Error::Usage("is a directory".into())),
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.open_files).insert(fh, Arc::new(file));
        Ok(Opened {
            fh,
            keep_cache,
            backing,
        })
    }

    /// Read up to `size` bytes at `offset` of an open file.
    pub fn read(&self, fh: u64, offset: u64, size: u32) -> Result<Vec<u8>> {
        self.read_with(fh, offset, size, <[u8]>::to_vec)
    }

    /// Read up to `size` bytes at `offset` of an open file and hand them to `f`. Table files are
    /// read into a buffer each thread keeps, so a read allocates and clears nothing.
    pub fn read_with<R>(
        &self,
        fh: u64,
        offset: u64,
        size: u32,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R> {
        thread_local! {
            static BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let file = lock(&self.open_files)
            .get(&fh)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("file handle {fh}")))?;
        match &*file {
            OpenFile::Data(file) => BUF.with(|cell| {
                let mut buf = cell.borrow_mut();
                if buf.len() < size as usize {
                    buf.resize(size as usize, 0);
                }
                let buf = &mut buf[..size as usize];
                let mut filled = 0;
                while filled < buf.len() {
                    match file.read_at(&mut buf[filled..], offset + filled as u64) {
                        Ok(0) => break,
                        Ok(n) => filled += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(Error::io(format!("file handle {fh}"), e)),
                    }
                }
                Ok(f(&buf[..filled]))
            }),
            OpenFile::Bytes(b) => {
                let start = (offset as usize).min(b.len());
                let end = start.saturating_add(size as usize).min(b.len());
                Ok(f(&b[start..end]))
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
        let dir = self.snapshot().cfg().timeline_dir.clone();
        std::fs::metadata(dir.join(name))
            .and_then(|m| m.modified())
            .unwrap_or(self.root_mtime)
    }

    /// The instant file `name` decoded to pretty JSON.
    fn render_timeline_file(&self, name: &str) -> Result<Arc<Vec<u8>>> {
        let dir = self.snapshot().cfg().timeline_dir.clone();
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
        let json = hudifs_core::metadata::decode(&bytes).map_err(|reason| Error::BadMetadata {
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
        let node = Node::from_ino(ino).ok_or_else(|| Error::NotFound(format!("inode {ino}")))?;
        let mut out = Vec::new();
        match node {
            Node::ViewDir { view, dir: 0 } => {
                let v = self.view(view)?;
                let p = &v.plan;
                match &p.key {
                    ViewKey::Latest | ViewKey::AsOf(_) => {
                        if let Some(i) = &p.instant {
                            out.push(("user.hudi.instant".into(), i.clone()));
                        }
                        let mode = if self.opts.read_optimized {
                            "read_optimized"
                        } else {
                            "snapshot"
                        };
                        out.push(("user.hudi.mode".into(), mode.into()));
                    }
                    ViewKey::Incremental { start, .. } => {
                        out.push(("user.hudi.commit_times".into(), p.selected.join(",")));
                        let end = p.effective_end.clone().unwrap_or_default();
                        out.push(("user.hudi.effective_end".into(), end.clone()));
                        out.push((
                            "user.hudi.window".into(),
                            format!("{}..{end}", start.as_deref().unwrap_or(fsview::EARLIEST)),
                        ));
                        out.push(("user.hudi.listing".into(), "merge-ready".into()));
                    }
                }
            }
            Node::ViewFile { view, file } => {
                let v = self.view(view)?;
                let (pv, pos) = self.find_in_view(&v, file)?;
                let c = pv.chosen.files[pos];
                let f = &pv.listing.files[c.index as usize];
                if let Some(w) = pv.chosen.writer(&c) {
                    out.push(("user.hudi.instant".into(), w.to_string()));
                }
                out.push(("user.hudi.file_id".into(), f.file_id().to_string()));
                out.push(("user.hudi.partition".into(), f.partition.to_string()));
                out.push(("user.hudi.slice".into(), pv.chosen.slice(&c).to_string()));
            }
            _ => {}
        }
        Ok(out)
    }
}

/// The inode number of the mount root.
pub const ROOT: u64 = crate::inode::ROOT_INO;
