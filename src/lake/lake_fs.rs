//! A lake as one mounted file system (SEMANTICS.md §7.1.1): the lake's own directories lead to
//! its tables, and every request under a table is routed to that table's [`HudiFs`], loaded on
//! first use and followed on its own from then on. The FUSE adapter serves a [`LakeFs`] as it
//! serves a single table (both are [`Served`]).
//!
//! - Mounting reads no table: discovery lists directories and stats candidate
//!   `hoodie.properties` files. A table is read (configuration, timeline) the first time a
//!   request goes inside its directory: a lookup in it, or opening it as a directory. Listing
//!   the lake's directories, or a `stat` of a table's directory, reads nothing of the table.
//! - [`LakeFs::refresh`] discovers the tables again: new ones appear, dropped ones disappear
//!   (the kernel is told to forget their names). A dropped table's open files keep reading.
//! - A table that cannot be loaded (bad `hoodie.properties`, unreadable timeline) fails the
//!   requests under it with the error a single mount of it would give; it is tried again at
//!   most once per poll interval. Every other table is unaffected.
//! - Inode numbers: each table has its own space (`inode.rs`).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant, SystemTime};

use hudifs_core::error::{Error, Result};
use hudifs_storage::sync::lock;
use hudifs_storage::{scoped, FsStats, Storage, TablePath};

use super::inode::{LakeInodes, LakeNode};
use super::tree::{Child, Tree, TreeChange};
use crate::follow::Follower;
use crate::fs::{
    Answer, DirCache, DirEntry, DirListing, Entry, FsOptions, Handles, HudiFs, KernelNotifier,
    Opened, OpenedDir, Owner, ReadAnswer, Served, StaleDir, ROOT, TTL_FRESH,
};

/// How a lake is mounted.
#[derive(Debug, Clone)]
pub struct LakeOptions {
    /// How many levels below the root discovery looks (`super::DEFAULT_DEPTH`).
    pub depth: usize,
    /// How often the root is searched again for tables, and how soon a table that failed to
    /// load is tried again; also each loaded table's poll interval where it is polled.
    pub poll_interval: Duration,
    /// Whether a loaded table gets its follower thread (tests of the logic apply changes
    /// themselves).
    pub follow: bool,
}

/// One table of the lake.
struct Table {
    /// Its inode space (`inode.rs`); never reused, also when a table comes back at a path.
    id: u32,
    path: TablePath,
    slot: Mutex<Slot>,
    /// Stops its follower.
    stop: Arc<AtomicBool>,
    /// No longer in the lake: nothing new is looked up in it; open handles still read.
    dropped: AtomicBool,
}

enum Slot {
    Unloaded,
    Loaded(Arc<HudiFs>),
    Broken { error: Error, since: Instant },
}

impl Table {
    fn loaded(&self) -> Option<Arc<HudiFs>> {
        match &*lock(&self.slot) {
            Slot::Loaded(fs) => Some(fs.clone()),
            _ => None,
        }
    }

    /// Like [`Table::loaded`], but `None` rather than waiting while the table is being loaded
    /// (listing the lake never waits for a table's first read).
    fn loaded_now(&self) -> Option<Arc<HudiFs>> {
        let slot = match self.slot.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        match &*slot {
            Slot::Loaded(fs) => Some(fs.clone()),
            _ => None,
        }
    }
}

/// A handle of a table, in the lake's numbers: the table and the handle's number there.
#[derive(Clone)]
struct TableHandle {
    table: Arc<Table>,
    fh: u64,
}

/// An open directory: one of the lake's own (its entries), or a table's.
#[derive(Clone)]
enum LakeDir {
    Own(Arc<Vec<DirEntry>>),
    Table(TableHandle),
}

/// The tables of the lake now, and their numbers.
#[derive(Default)]
struct Current {
    tree: Tree,
    by_path: HashMap<TablePath, Arc<Table>>,
}

/// A lake mounted as one file system.
pub struct LakeFs {
    store: Arc<dyn Storage>,
    opts: FsOptions,
    lake: LakeOptions,
    inodes: Arc<LakeInodes>,
    current: RwLock<Current>,
    /// Every table by number: those of the lake, and dropped ones that were loaded (their open
    /// handles and inodes still route to them).
    by_id: RwLock<HashMap<u32, Arc<Table>>>,
    next_table: AtomicU32,
    /// The lake's own directories: path ↔ id (the root is 1).
    dirs: Mutex<(HashMap<TablePath, u64>, Vec<TablePath>)>,
    /// Open files (each a table's) and directories (the lake's own, or a table's); a lake is
    /// never taken over by a new daemon (`daemon/keeper.rs`), so they are all its own.
    handles: Handles<TableHandle, LakeDir>,
    notifier: OnceLock<Arc<dyn KernelNotifier>>,
    /// Tables loaded so far (for tests and the log).
    loads: AtomicU64,
    /// Owner, modes and times of the lake's own directories.
    owner: Owner,
}

/// Tells the kernel about one table's inodes in the lake's numbering.
struct TableNotifier {
    inodes: Arc<LakeInodes>,
    table: u32,
    sink: Arc<dyn KernelNotifier>,
}

impl KernelNotifier for TableNotifier {
    fn inval_entry(&self, parent: u64, name: &str) {
        self.sink
            .inval_entry(self.inodes.outer(self.table, parent), name);
    }
    fn inval_inode(&self, ino: u64) {
        self.sink.inval_inode(self.inodes.outer(self.table, ino));
    }
}

impl LakeFs {
    /// The lake at the root of `store`: its tables are discovered (listings only, no table is
    /// read). Fails when the root cannot be listed.
    pub fn open(store: Arc<dyn Storage>, opts: FsOptions, lake: LakeOptions) -> Result<LakeFs> {
        let root = TablePath::root();
        let found = super::discover(&*store, &root, lake.depth)
            .map_err(|e| Error::io(store.describe(&root), e))?;
        let meta = store
            .stat(&root)
            .map_err(|e| Error::io(store.describe(&root), e))?;
        let owner = Owner::of_store(
            &*store,
            meta.mtime.unwrap_or(SystemTime::UNIX_EPOCH),
            opts.access,
        );
        let fs = LakeFs {
            owner,
            store,
            opts,
            lake,
            inodes: Arc::new(LakeInodes::default()),
            current: RwLock::new(Current::default()),
            by_id: RwLock::new(HashMap::new()),
            next_table: AtomicU32::new(1),
            dirs: Mutex::new((HashMap::new(), Vec::new())),
            handles: Handles::default(),
            notifier: OnceLock::new(),
            loads: AtomicU64::new(0),
        };
        fs.dir_id(&root);
        fs.apply(Tree::new(found));
        Ok(fs)
    }

    /// How the lake root is named in messages.
    pub fn describe(&self) -> String {
        self.store.describe(&TablePath::root())
    }

    /// The lake root's local file system, if it is on one.
    pub fn local(&self) -> Option<&hudifs_storage::LocalStore> {
        self.store.local()
    }

    /// The tables of the lake now, sorted.
    pub fn tables(&self) -> Vec<TablePath> {
        self.read_current().tree.tables().cloned().collect()
    }

    /// How many tables were loaded (read) since the mount.
    pub fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    /// The loaded file system of the table at `path`, if it was loaded (tests).
    pub fn loaded_table(&self, path: &TablePath) -> Option<Arc<HudiFs>> {
        self.read_current().by_path.get(path)?.loaded()
    }

    /// Where invalidations of the kernel's caches go (set once the session exists).
    pub fn set_notifier(&self, n: Arc<dyn KernelNotifier>) {
        let _ = self.notifier.set(n);
    }

    fn read_current(&self) -> std::sync::RwLockReadGuard<'_, Current> {
        self.current.read().unwrap_or_else(|e| e.into_inner())
    }

    fn dir_id(&self, p: &TablePath) -> u64 {
        let mut g = lock(&self.dirs);
        if let Some(&id) = g.0.get(p) {
            return id;
        }
        g.1.push(p.clone());
        let id = g.1.len() as u64;
        g.0.insert(p.clone(), id);
        id
    }

    fn dir_path(&self, id: u64) -> Option<TablePath> {
        let g = lock(&self.dirs);
        g.1.get((id as usize).checked_sub(1)?).cloned()
    }

    /// Make `next` the lake's tables: what changed (the tables that came get numbers).
    fn apply(&self, next: Tree) -> TreeChange {
        let mut cur = self.current.write().unwrap_or_else(|e| e.into_inner());
        let change = cur.tree.diff(&next);
        let mut by_id = self.by_id.write().unwrap_or_else(|e| e.into_inner());
        for p in &change.came {
            let t = Arc::new(Table {
                id: self.next_table.fetch_add(1, Ordering::Relaxed),
                path: p.clone(),
                slot: Mutex::new(Slot::Unloaded),
                stop: Arc::new(AtomicBool::new(false)),
                dropped: AtomicBool::new(false),
            });
            by_id.insert(t.id, t.clone());
            cur.by_path.insert(p.clone(), t);
        }
        for p in &change.gone {
            if let Some(t) = cur.by_path.remove(p) {
                t.dropped.store(true, Ordering::SeqCst);
                t.stop.store(true, Ordering::SeqCst);
                if t.loaded().is_none() {
                    by_id.remove(&t.id);
                }
            }
        }
        cur.tree = next;
        change
    }

    /// Discover the lake's tables again: tables that came appear, tables that were dropped
    /// disappear, and the kernel is told to forget the names that left. Fails (and changes
    /// nothing) when the root cannot be listed.
    pub fn refresh(&self) -> Result<TreeChange> {
        let root = TablePath::root();
        let found = super::discover(&*self.store, &root, self.lake.depth)
            .map_err(|e| Error::io(self.store.describe(&root), e))?;
        let change = self.apply(Tree::new(found));
        for p in &change.came {
            log::info!("lake: table {p} appeared");
        }
        for p in &change.gone {
            log::info!("lake: table {p} was dropped");
        }
        if let Some(n) = self.notifier.get() {
            let known = |p: &TablePath| lock(&self.dirs).0.get(p).copied();
            for p in change.gone.iter().chain(&change.dirs_gone) {
                if let Some(parent) = p.parent().as_ref().and_then(known) {
                    n.inval_entry(LakeInodes::dir(parent), p.name());
                }
            }
            for p in change.gone.iter().chain(&change.came) {
                if let Some(parent) = p.parent().as_ref().and_then(known) {
                    n.inval_inode(LakeInodes::dir(parent));
                }
            }
        }
        Ok(change)
    }

    /// Rediscover every poll interval until `stop` is set; then stop every table's follower.
    pub fn follow_lake(&self, stop: &AtomicBool) {
        let step = Duration::from_millis(100).min(self.lake.poll_interval);
        let mut last_error = None;
        while !stop.load(Ordering::SeqCst) {
            let started = Instant::now();
            while started.elapsed() < self.lake.poll_interval && !stop.load(Ordering::SeqCst) {
                std::thread::sleep(step);
            }
            if stop.load(Ordering::SeqCst) {
                break;
            }
            match self.refresh() {
                Ok(_) => last_error = None,
                Err(e) => {
                    let msg = e.to_string();
                    if last_error.as_ref() != Some(&msg) {
                        log::warn!("lake: rediscovery failed, keeping the tables known: {msg}");
                    }
                    last_error = Some(msg);
                }
            }
        }
        self.stop();
    }

    /// Stop every table's follower.
    pub fn stop(&self) {
        for t in self
            .by_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            t.stop.store(true, Ordering::SeqCst);
        }
    }

    /// Table number `id`, dropped or not.
    fn table(&self, id: u32) -> Result<Arc<Table>> {
        self.by_id
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
            .cloned()
            .ok_or_else(|| Error::NotFound(format!("table {id} of the lake")))
    }

    /// The table that node `ino` lies in, its loaded file system, and the node's number there;
    /// `None` for the lake's own directories, dropped tables and tables not loaded yet.
    fn loaded_table_node(&self, ino: u64) -> Option<(Arc<Table>, Arc<HudiFs>, u64)> {
        match self.node(ino).ok()? {
            LakeNode::Table { table, ino } => {
                let t = self.live_table(table).ok()?;
                let fs = t.loaded()?;
                Some((t, fs, ino))
            }
            LakeNode::Dir(_) => None,
        }
    }

    /// Answer `op` to `done` where waiting holds no FUSE thread (`Storage::run_blocking`): a
    /// request on the lake's own directories, or one that loads a table.
    fn later<T: 'static>(
        self: Arc<Self>,
        op: impl FnOnce(&LakeFs) -> Result<T> + Send + 'static,
        done: Answer<T>,
    ) {
        let store = self.store.clone();
        store.run_blocking(Box::new(move || done(op(&self))))
    }

    /// Table number `id` if it is still in the lake.
    fn live_table(&self, id: u32) -> Result<Arc<Table>> {
        let t = self.table(id)?;
        if t.dropped.load(Ordering::SeqCst) {
            return Err(Error::NotFound(format!(
                "{}: the table was dropped",
                t.path
            )));
        }
        Ok(t)
    }

    /// The table's file system, loading it on first use (and again after a failure, at most
    /// once per poll interval).
    fn load(&self, t: &Table) -> Result<Arc<HudiFs>> {
        let mut slot = lock(&t.slot);
        match &*slot {
            Slot::Loaded(fs) => return Ok(fs.clone()),
            Slot::Broken { error, since } if since.elapsed() < self.lake.poll_interval => {
                return Err(error.clone())
            }
            _ => {}
        }
        let loaded = scoped(&self.store, &t.path)
            .map_err(|e| Error::io(self.store.describe(&t.path), e))
            .and_then(|store| {
                // `iceberg/` names its files where readers see this table: below the lake.
                let mut opts = self.opts.clone();
                opts.location = opts.location.map(|l| format!("{l}/{}", t.path));
                HudiFs::with_store(store, opts)
            });
        match loaded {
            Ok(fs) => {
                let fs = fs.shared();
                self.loads.fetch_add(1, Ordering::Relaxed);
                log::info!(
                    "lake: loaded table {} (latest instant {})",
                    t.path,
                    fs.latest_instant().unwrap_or_else(|| "none".into())
                );
                self.start_follower(t, &fs);
                *slot = Slot::Loaded(fs.clone());
                Ok(fs)
            }
            Err(error) => {
                // The adapter logs the failed request with this error, which names the table's
                // file: one line per request, none here.
                log::debug!("lake: table {} cannot be read: {error}", t.path);
                let e = error.clone();
                *slot = Slot::Broken {
                    error,
                    since: Instant::now(),
                };
                Err(e)
            }
        }
    }

    fn start_follower(&self, t: &Table, fs: &Arc<HudiFs>) {
        if !self.lake.follow {
            return;
        }
        let notifier = self.notifier.get().map(|sink| {
            Arc::new(TableNotifier {
                inodes: self.inodes.clone(),
                table: t.id,
                sink: sink.clone(),
            }) as Arc<dyn KernelNotifier>
        });
        let (fs, stop, poll) = (fs.clone(), t.stop.clone(), self.lake.poll_interval);
        let spawned = std::thread::Builder::new()
            .name(format!("hudifs-follow-{}", t.id))
            .spawn(move || Follower::new().run(fs, notifier, poll, stop));
        if let Err(e) = spawned {
            log::warn!("lake: table {} is not followed: {e}", t.path);
        }
    }

    /// The entry of one of the lake's own directories.
    fn dir_entry(&self, ino: u64) -> Entry {
        self.owner.dir(ino, TTL_FRESH)
    }

    /// `entry` of table `id` in the lake's numbering.
    fn outer(&self, id: u32, mut entry: Entry) -> Entry {
        entry.attr.ino = self.inodes.outer(id, entry.attr.ino);
        entry
    }

    /// A table's root directory: as the table shows it once loaded, else the lake's (so that
    /// listing the lake reads no table).
    fn table_root(&self, t: &Table) -> Entry {
        match t.loaded_now().map(|fs| fs.getattr(ROOT)) {
            Some(Ok(e)) => self.outer(t.id, e),
            _ => self.dir_entry(self.inodes.outer(t.id, ROOT)),
        }
    }

    /// The entry of `child` of a lake directory.
    fn child_entry(&self, child: &Child) -> Result<Entry> {
        match child {
            Child::Dir(p) => Ok(self.dir_entry(LakeInodes::dir(self.dir_id(p)))),
            Child::Table(p) => {
                let t = self
                    .read_current()
                    .by_path
                    .get(p)
                    .cloned()
                    .ok_or_else(|| Error::NotFound(p.to_string()))?;
                Ok(self.table_root(&t))
            }
        }
    }

    /// The path of the lake directory `id`, if it still leads to a table.
    fn lake_dir(&self, id: u64) -> Result<TablePath> {
        let p = self
            .dir_path(id)
            .ok_or_else(|| Error::NotFound(format!("inode {id}")))?;
        if !self.read_current().tree.is_dir(&p) {
            return Err(Error::NotFound(format!("{p}: no table below it any more")));
        }
        Ok(p)
    }

    fn node(&self, ino: u64) -> Result<LakeNode> {
        self.inodes
            .inner(ino)
            .ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    /// The table file system and its handle behind lake file handle `fh`.
    fn table_file(&self, fh: u64) -> Result<(Arc<HudiFs>, u64)> {
        let missing = || Error::NotFound(format!("file handle {fh}"));
        let h = self.handles.file(fh).ok_or_else(missing)?;
        let fs = h.table.loaded().ok_or_else(missing)?;
        Ok((fs, h.fh))
    }
}

impl LakeFs {
    /// Look `name` up in directory `parent`, waiting for the table to load if it must.
    fn lookup_blocking(&self, parent: u64, name: &OsStr) -> Result<Entry> {
        match self.node(parent)? {
            LakeNode::Dir(id) => {
                let dir = self.lake_dir(id)?;
                let name = name
                    .to_str()
                    .ok_or_else(|| Error::NotFound(format!("{name:?}")))?;
                let child = self
                    .read_current()
                    .tree
                    .child(&dir, name)
                    .ok_or_else(|| Error::NotFound(format!("{dir}/{name}")))?;
                self.child_entry(&child)
            }
            LakeNode::Table { table, ino } => {
                let t = self.live_table(table)?;
                let fs = self.load(&t)?;
                Ok(self.outer(table, HudiFs::lookup(&fs, ino, name)?))
            }
        }
    }

    /// Open directory `ino`, waiting for the table to load if it must.
    fn opendir_blocking(&self, ino: u64) -> Result<OpenedDir> {
        match self.node(ino)? {
            LakeNode::Dir(id) => {
                let dir = self.lake_dir(id)?;
                let children = self
                    .read_current()
                    .tree
                    .children(&dir)
                    .ok_or_else(|| Error::NotFound(dir.to_string()))?;
                let mut entries = Vec::with_capacity(children.len());
                for (name, child) in children {
                    // A table dropped in between is left out.
                    if let Ok(entry) = self.child_entry(&child) {
                        entries.push(DirEntry {
                            name: Arc::from(name.as_str()),
                            entry,
                        });
                    }
                }
                let fh = self.handles.add_dir(LakeDir::Own(Arc::new(entries)));
                Ok(OpenedDir {
                    fh,
                    cache: DirCache::Off,
                })
            }
            LakeNode::Table { table, ino } => {
                let t = self.live_table(table)?;
                let fs = self.load(&t)?;
                let d = HudiFs::opendir(&fs, ino)?;
                let fh = self
                    .handles
                    .add_dir(LakeDir::Table(TableHandle { table: t, fh: d.fh }));
                Ok(OpenedDir { fh, cache: d.cache })
            }
        }
    }
}

impl Served for LakeFs {
    /// A table's lookups are its own, in its numbers: answered in place where it needs nothing
    /// from the storage (`HudiFs`'s `Served::lookup`). The lake's own directories, and a table
    /// not loaded yet (loading reads it), are answered from the store's threads.
    fn lookup(self: Arc<Self>, parent: u64, name: &OsStr, done: Answer<Entry>) {
        if let Some((t, fs, inner)) = self.loaded_table_node(parent) {
            let (inodes, id) = (self.inodes.clone(), t.id);
            return fs.lookup(
                inner,
                name,
                Box::new(move |r| {
                    done(r.map(|mut e| {
                        e.attr.ino = inodes.outer(id, e.attr.ino);
                        e
                    }))
                }),
            );
        }
        let name = name.to_os_string();
        self.later(move |lake| lake.lookup_blocking(parent, &name), done)
    }

    /// As [`Served::lookup`] of a lake: a loaded table's directories open as it decides.
    fn opendir(self: Arc<Self>, ino: u64, done: Answer<OpenedDir>) {
        if let Some((t, fs, inner)) = self.loaded_table_node(ino) {
            let lake = self.clone();
            return fs.opendir(
                inner,
                Box::new(move |r| {
                    done(r.map(|d| {
                        OpenedDir {
                            fh: lake
                                .handles
                                .add_dir(LakeDir::Table(TableHandle { table: t, fh: d.fh })),
                            cache: d.cache,
                        }
                    }))
                }),
            );
        }
        self.later(move |lake| lake.opendir_blocking(ino), done)
    }

    /// The lake's own directory handles hold their entries: answered in place. A table's
    /// handle is answered as the table decides.
    fn readdir(self: Arc<Self>, _ino: u64, fh: u64, done: Answer<DirListing>) {
        let handle = match self.handles.dir(fh) {
            Some(LakeDir::Own(entries)) => return done(Ok(DirListing::fixed(entries))),
            Some(LakeDir::Table(h)) => h.table.loaded().map(|fs| (h.table.id, fs, h.fh)),
            None => None,
        };
        let Some((id, fs, inner)) = handle else {
            return self.later(
                move |_| Err(Error::NotFound(format!("directory handle {fh}"))),
                done,
            );
        };
        let inodes = self.inodes.clone();
        fs.readdir(
            0,
            inner,
            Box::new(move |r| {
                done(r.map(|l| l.map_inodes(Arc::new(move |ino| inodes.outer(id, ino)))))
            }),
        )
    }

    fn getattr(&self, ino: u64) -> Result<Entry> {
        match self.node(ino)? {
            LakeNode::Dir(id) => {
                self.lake_dir(id)?;
                Ok(self.dir_entry(ino))
            }
            LakeNode::Table { table, ino: inner } => {
                let t = self.table(table)?;
                let dropped = t.dropped.load(Ordering::SeqCst);
                if inner == ROOT && !dropped {
                    return Ok(self.table_root(&t));
                }
                // A dropped table answers for what its open handles name.
                let fs = match dropped {
                    true => t
                        .loaded()
                        .ok_or_else(|| Error::NotFound(t.path.to_string()))?,
                    false => self.load(&t)?,
                };
                Ok(self.outer(table, fs.getattr(inner)?))
            }
        }
    }

    fn open(&self, ino: u64) -> Result<Opened> {
        match self.node(ino)? {
            LakeNode::Dir(_) => Err(Error::Invalid("a directory".into())),
            LakeNode::Table { table, ino } => {
                let t = self.table(table)?;
                // As on a single mount, a file looked up before its table left keeps opening.
                let fs = match t.dropped.load(Ordering::SeqCst) {
                    true => t
                        .loaded()
                        .ok_or_else(|| Error::NotFound(t.path.to_string()))?,
                    false => self.load(&t)?,
                };
                let o = fs.open(ino)?;
                let fh = self.handles.add_file(TableHandle { table: t, fh: o.fh });
                Ok(Opened { fh, ..o })
            }
        }
    }

    // A lake is never taken over by a new daemon (`daemon/keeper.rs`): its handles are all its
    // own, and the inode is not needed.
    fn read(&self, _ino: u64, fh: u64, offset: u64, size: u32, done: ReadAnswer) {
        match self.table_file(fh) {
            Ok((fs, inner)) => fs.read(0, inner, offset, size, done),
            Err(e) => done(Err(e)),
        }
    }

    fn release(&self, fh: u64) {
        if let Some(h) = self.handles.release_file(fh) {
            if let Some(fs) = h.table.loaded() {
                fs.release(h.fh);
            }
        }
    }

    fn releasedir(&self, fh: u64) -> Option<StaleDir> {
        let LakeDir::Table(h) = self.handles.release_dir(fh)? else {
            return None;
        };
        let stale = h.table.loaded()?.releasedir(h.fh)?;
        Some(stale.renumbered(self.inodes.outer(h.table.id, stale.ino)))
    }

    fn stale_dir_dropped(&self, s: StaleDir) {
        if let Some(LakeNode::Table { table, ino }) = self.inodes.inner(s.ino) {
            if let Some(fs) = self.table(table).ok().and_then(|t| t.loaded()) {
                fs.stale_dir_dropped(s.renumbered(ino));
            }
        }
    }

    fn xattrs(&self, ino: u64) -> Result<Vec<(String, String)>> {
        match self.node(ino)? {
            LakeNode::Dir(id) => self.lake_dir(id).map(|_| Vec::new()),
            LakeNode::Table { table, ino: inner } => {
                let t = self.table(table)?;
                match t.loaded() {
                    Some(fs) => fs.xattrs(inner),
                    None if inner == ROOT => Ok(Vec::new()),
                    None => self.load(&t)?.xattrs(inner),
                }
            }
        }
    }

    fn statvfs(&self) -> Option<FsStats> {
        self.store.local().and_then(|l| l.statvfs())
    }
    fn run_blocking(&self, job: hudifs_storage::Job) {
        self.store.run_blocking(job)
    }
}
