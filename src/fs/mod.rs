//! The mounted file system as plain logic: lookup, getattr, readdir, open, read, xattrs on inode
//! numbers, returning plain values and [`Error`]. The FUSE adapter (`fuse/mod.rs`) only maps
//! these to kernel replies, so everything here is tested without a kernel.
//!
//! ```text
//! /                       latest/  as_of/  incremental/  timeline/  merged/  cdc/
//! latest/                 the snapshot at the newest completed write (moves with the table)
//! as_of/<T>/              the snapshot as of T; lists completed write instants and savepoints
//! incremental/<t1>..<t2>/ merge-ready files of the writes in (t1, t2]
//! timeline/<instant file> the instant's metadata as pretty JSON
//! merged/latest/, merged/as_of/<T>/   the same snapshots, one merged Parquet file per slice
//! merged/incremental/<t1>..<t2>/      the window's groups merged, filtered to its writes' records
//! cdc/<t1>..<t2>/         the window's change records, one Parquet file per file group
//! delta/                  a Delta Lake table: _delta_log/ (a version per write), <instant>/ its files
//! iceberg/                an Iceberg table: metadata/ (a snapshot per write), <instant>/ its files
//! ```
//!
//! A view is planned against one table snapshot and its partitions are resolved only when a
//! caller walks into them: the snapshot, the views and what resolving them keeps have one owner
//! (`view_cache`), which also says when a request can be answered in place; the directories a
//! view shows are in `views`. A directory handle holds the entries it was opened with, so one
//! `readdir` never mixes two snapshots (`dirs`); an open file holds its storage handle, so it
//! reads to the end even if the cleaner deletes it (`ops`, the handles in `handles`). What the
//! kernel may cache of `latest/` and what a switch invalidates is in `kernel_cache` and `switch`,
//! and whether listings carry file attributes in `stat_demand`; `timeline/` files are rendered in
//! `timeline_files`, extended attributes in `xattr`, inode numbers in `inode`, every node's
//! owner, modes and times in `owner`, partition listings in `partitions`, the merged and `cdc/`
//! views (their partitions, slices and change feeds, lookups, listings, what a switch drops, and
//! merging) in `merged` (SEMANTICS.md §2, §6, §10). `served` is what the FUSE adapter calls: one
//! table, or a lake of them (`crate::lake`).

mod bootstrap;
mod delta;
mod dirs;
mod handles;
mod iceberg;
mod inode;
mod kernel_cache;
mod merged;
mod ops;
mod owner;
mod partitions;
mod served;
mod stat_demand;
mod switch;
mod timeline_files;
mod view_cache;
mod views;
mod xattr;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use hudifs_core::error::{Error, Result};
use hudifs_core::snapshot::{Snapshot, Touched};
use hudifs_core::table::TableConfig;
use hudifs_core::timefmt::TimelineZone;
use hudifs_merge::MergeCache;
use hudifs_storage::{LocalStore, OpenFile, Storage, TablePath};

use crate::journal::{Record, RestartJournal};

pub use delta::wait_for_saves;
pub use dirs::{DirListing, InoMap, OpenedDir, StaleDir};
pub use inode::{
    ino_fields, ino_of_fields, Node, AS_OF_INO, INCREMENTAL_INO, ROOT_INO, TIMELINE_INO,
};
pub use kernel_cache::{Deferred, DirCache, AGAIN};
pub use merged::{default_cache_dir, MergeSettings, DEFAULT_CACHE_BYTES, DEFAULT_MEMORY_CAP};
pub(crate) use merged::{view_schema, ViewSchemaText};
pub use owner::{PAGE_BLKSIZE, STORE_BLKSIZE};
pub use served::Served;
pub use switch::{Invalidations, KernelNotifier};
pub use xattr::XATTR_PREFIX;

pub(crate) use handles::Handles;
use handles::{OpenDir, OpenHandle};
use inode::InodeTable;
use kernel_cache::KernelCache;
use merged::MergedRegistry;
pub(crate) use owner::Owner;
use timeline_files::Rendered;
use view_cache::{ResolvedPartition, ViewCache, ViewState};

/// How long the kernel may keep names and attributes of views that can no longer change
/// (`as_of` times and windows older than every pending instant): their files are immutable.
pub const TTL_FINAL: Duration = Duration::from_secs(24 * 3600);
/// ... and of everything that can change (`latest/`, the listings of `as_of/`, `incremental/`,
/// `timeline/`, views a pending instant could still change). Not zero: Linux answers a zero TTL
/// with a getattr for every entry after each readdir.
pub const TTL_FRESH: Duration = Duration::from_secs(1);

/// The inode number of the mount root.
pub const ROOT: u64 = ROOT_INO;

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
    /// The preferred I/O size (`st_blksize`): what `cat`, `cp` and Python's buffered files
    /// read at once.
    pub blksize: u32,
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
#[derive(Clone)]
pub struct Opened {
    pub fh: u64,
    /// The content can never change: the kernel may keep its page cache across opens.
    pub keep_cache: bool,
    /// The table file behind a data file, for kernel passthrough (local disks only).
    pub backing: Option<Arc<dyn OpenFile>>,
    /// Reads bypass the kernel's page cache (`FOPEN_DIRECT_IO`): data files on an object
    /// store, whose reads the daemon answers from its prefetch window (docs/SEMANTICS.md §9).
    pub direct_io: bool,
}

/// Where a read ([`HudiFs::read`]) delivers its bytes or its error: once, from the calling
/// thread (a local disk, a rendered timeline file) or from the store's runtime.
pub type ReadAnswer = Box<dyn FnOnce(Result<&[u8]>) + Send>;

/// Where an operation of [`Served`] that may wait on the storage (lookup, opendir, readdir)
/// delivers its answer: once, from the calling thread when it needs nothing from the storage,
/// else from the store's threads.
pub type Answer<T> = Box<dyn FnOnce(Result<T>) + Send>;

/// Mount-wide options.
#[derive(Debug, Clone, Default)]
pub struct FsOptions {
    pub read_optimized: bool,
    /// Zone of naive times in paths; `None`: the table's, else UTC.
    pub zone: Option<TimelineZone>,
    /// The merged view's cache and limits.
    pub merge: MergeSettings,
    /// Owner and permission bits shown on every node (`--uid`, `--gid`, `--file-mode`,
    /// `--dir-mode`); unset parts keep the defaults (`owner.rs`).
    pub access: crate::access::Access,
    /// Where the table's listing comes from (`--listing`).
    pub listing: hudifs_core::listing_source::ListingMode,
    /// How to reach the store a bootstrapped table's source files are on (the table's own
    /// store options; SEMANTICS.md §10.11).
    pub sources: crate::store::StoreArgs,
    /// `delta/` has a change data feed (`--delta-change-data`, SEMANTICS §11.4).
    pub delta_change_data: bool,
    /// Where readers see the table's root (the mount point, or `--iceberg-prefix`; a lake's
    /// table below it): `iceberg/` metadata names its data files under it. `None`: not known
    /// (not mounted), and `iceberg/` refuses.
    pub location: Option<String>,
}

/// The file system.
pub struct HudiFs {
    store: Arc<dyn Storage>,
    opts: FsOptions,
    /// The snapshot, the views planned against it and what resolving them keeps
    /// (`view_cache.rs`).
    views: ViewCache,
    /// `timeline/` files rendered lately (`timeline_files.rs`).
    rendered: Rendered,
    inodes: InodeTable,
    /// The merged slices handed out, and the cache they are merged into (opened on first use).
    merged: MergedRegistry,
    merge_cache: OnceLock<std::result::Result<Arc<MergeCache>, String>>,
    /// The open file and directory handles.
    handles: Handles<OpenHandle, OpenDir>,
    /// What the kernel holds of `latest/` (names handed out, who may fill its cached listings).
    kernel: KernelCache<Arc<ResolvedPartition>>,
    /// Owner, modes and times of every node.
    owner: Owner,
    /// The Delta log of `delta/` and what building it keeps (`delta.rs`).
    delta: delta::DeltaCache,
    /// The Iceberg table of `iceberg/` (`iceberg.rs`).
    iceberg: iceberg::IcebergCache,
    /// A metadata-only bootstrap's index, source stores and stitched skeletons.
    bootstrap: bootstrap::Bootstrap,
    /// The mount itself, once shared ([`HudiFs::shared`]): what a merge ahead of a reader
    /// resolves the view's next partition through, on a thread of its own.
    this: std::sync::Weak<HudiFs>,
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

impl HudiFs {
    /// Open the table in directory `root` of this machine.
    pub fn new(root: &Path, opts: FsOptions) -> Result<HudiFs> {
        let store = LocalStore::new(root).map_err(|e| Error::io(root.display().to_string(), e))?;
        HudiFs::with_store(Arc::new(store), opts)
    }

    /// Open the table in `store`.
    pub fn with_store(store: Arc<dyn Storage>, opts: FsOptions) -> Result<HudiFs> {
        let cfg = TableConfig::load(&*store)?;
        HudiFs::with_config(store, cfg, opts)
    }

    /// Open the table in `store`, whose configuration `cfg` was read already.
    pub fn with_config(
        store: Arc<dyn Storage>,
        cfg: TableConfig,
        opts: FsOptions,
    ) -> Result<HudiFs> {
        // The saved log of `delta/` and the manifests of `iceberg/`, if any, are read while the
        // timeline loads.
        let delta = delta::DeltaCache::opening(&*store, &cfg, &opts);
        let iceberg = iceberg::IcebergCache::opening(&*store, &cfg, &opts);
        let snap = Snapshot::open_with_config(store.clone(), cfg, opts.listing)?;
        let root = store
            .stat(&TablePath::root())
            .map_err(|e| Error::io(store.describe(&TablePath::root()), e))?;
        let owner = Owner::of_store(
            &*store,
            root.mtime.unwrap_or(SystemTime::UNIX_EPOCH),
            opts.access,
        );
        Ok(HudiFs {
            views: ViewCache::new(store.clone(), snap, opts.read_optimized),
            store,
            opts,
            rendered: Rendered::default(),
            inodes: InodeTable::new(),
            merged: MergedRegistry::default(),
            merge_cache: OnceLock::new(),
            handles: Handles::default(),
            kernel: KernelCache::default(),
            owner,
            delta,
            iceberg,
            bootstrap: Default::default(),
            this: std::sync::Weak::new(),
        })
    }

    /// The mount, shared between threads. Only a shared mount merges ahead of a reader across
    /// a partition's end (SEMANTICS.md §10.6): the next partition is resolved on a thread of
    /// its own, which needs the mount.
    pub fn shared(self) -> Arc<HudiFs> {
        Arc::new_cyclic(|this| HudiFs {
            this: this.clone(),
            ..self
        })
    }

    /// Serve a mount that may outlive this daemon (docs/SEMANTICS.md §7.11): take over the
    /// inode numbers and handles that the previous daemons of the mount handed out, as
    /// `records` (read from `journal`) say, and record every new one in `journal`. Call before
    /// serving.
    pub fn resume_from(&self, journal: &Arc<RestartJournal>, records: &[Record]) -> Result<()> {
        self.inodes
            .resume(records, journal)
            .map_err(Error::Corrupt)?;
        self.views.resume(records, journal)?;
        self.merged.resume(records, journal);
        self.handles.resume(records, journal);
        Ok(())
    }

    /// The directories of `latest/` and `merged/latest/` the kernel may hold listings or
    /// attributes of from a previous daemon of this mount (every interned directory): a daemon
    /// that takes over has the kernel drop them, since it cannot tell what a switch of
    /// `latest/` made stale before it started.
    pub fn inherited_latest_dirs(&self) -> Vec<u64> {
        let mut out = vec![ROOT_INO];
        for dir in 0..self.inodes.dirs.count() {
            for view in [inode::LATEST_VIEW, inode::MERGED_LATEST_VIEW] {
                out.push(Node::ViewDir { view, dir }.ino());
            }
        }
        out
    }

    /// The storage the table is read from.
    pub fn store(&self) -> &Arc<dyn Storage> {
        &self.store
    }

    pub fn options(&self) -> &FsOptions {
        &self.opts
    }

    /// The current snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.views.snapshot()
    }

    /// The zone naive times in paths are read in.
    fn zone(&self, snap: &Snapshot) -> TimelineZone {
        self.opts
            .zone
            .clone()
            .or_else(|| snap.cfg.timeline_zone.clone())
            .unwrap_or(TimelineZone::Utc)
    }

    /// Make `next` the current snapshot, and say what the kernel must drop of `latest/`. The
    /// switch is atomic: readers hold either the old snapshot or the new one. Partitions the
    /// change touched (`None`: possibly all) are listed again on next use. The caller sends the
    /// returned invalidations to the kernel and then calls [`HudiFs::switched`].
    pub fn install(&self, next: Snapshot, touched: Touched) -> Invalidations {
        let previous = self.snapshot();
        // What `merged/latest/` showed before (its resolved partitions are what the kernel may
        // hold).
        let merged_before = self.views.peek(inode::MERGED_LATEST_VIEW);
        // From here until `switched`, no open of the directories the change touches reuses the
        // kernel's cached listing (an open between install and invalidation would read the old
        // one).
        self.begin_switch(touched.as_ref(), next.generation);
        self.views.replace(next, touched.as_ref());
        let mut inv = self.latest_invalidations(&previous, touched.as_ref());
        self.merged_latest_invalidations(merged_before.as_deref(), touched.as_ref(), &mut inv);
        inv
    }

    /// The instant `latest/` shows.
    pub fn latest_instant(&self) -> Option<String> {
        self.snapshot()
            .timeline()
            .latest_completed()
            .map(|t| t.to_string())
    }

    /// Number of open file handles (for tests).
    pub fn open_file_count(&self) -> usize {
        self.handles.file_count()
    }
}

/// Partitions as a set, for callers that pass touched partitions around.
pub type PartitionSet = BTreeSet<String>;
