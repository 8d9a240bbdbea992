//! The file-system operations on names and files: lookup, getattr, open, read, release, and
//! the entries of table files and merged slices they answer with. Directories (opendir,
//! readdir through their handles, releasedir) are in `dirs.rs`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

use hudifs_core::error::{Error, Result};
use hudifs_core::listing::{partition_dir, DataFile};
use hudifs_core::viewkey::{self, ViewKey};

use super::inode::{Node, AS_OF_INO, CDC_INO, MERGED_AS_OF_INO, MERGED_INCREMENTAL_INO};
use super::merged::{Materialised, MergedNode, MergedSlice};
use super::views::{ResolvedPartition, ViewState};
use super::{join, Entry, HudiFs, Kind, OpenHandle, Opened, ReadAnswer, TTL_FRESH};

const MAX_NAME: usize = 255;

/// An opened file's handle, whether its pages may be kept, and its backing file.
type OpenedParts = (OpenHandle, bool, Option<Arc<dyn hudifs_storage::OpenFile>>);

impl HudiFs {
    /// The entry of a directory node.
    pub(super) fn dir_entry(&self, ino: u64, ttl: Duration) -> Entry {
        self.owner.dir(ino, ttl)
    }

    /// The entry of a table file, stated first if it was listed by name only.
    pub(super) fn file_entry(&self, ino: u64, f: &DataFile, ttl: Duration) -> Result<Entry> {
        self.stated(f)?;
        Ok(self.owner.table_file(ino, f, ttl))
    }

    /// Make sure `f`'s size, time and mode are known: a file listed by name only is stated
    /// with the rest of its partition (whoever asks for one file's attributes usually asks for
    /// its neighbours' next), else alone. A file gone since the listing is not found.
    pub(super) fn stated(&self, f: &DataFile) -> Result<()> {
        if f.is_stated() {
            return Ok(());
        }
        self.partitions.stat_partition(&*self.store, &f.partition);
        if !f.is_stated() {
            hudifs_core::listing::stat_files(&*self.store, std::slice::from_ref(f));
        }
        if f.is_stated() {
            Ok(())
        } else {
            Err(Error::NotFound(f.rel_path()))
        }
    }

    /// The node a name at the mount root stands for.
    pub(super) fn root_child(&self, name: &str) -> Result<Node> {
        match name {
            "latest" => self.view_root(ViewKey::Latest, false),
            "as_of" => Ok(Node::AsOfDir),
            "merged" => Ok(Node::MergedDir),
            "cdc" => Ok(Node::CdcDir),
            "incremental" => Ok(Node::IncrementalDir),
            "timeline" => Ok(Node::TimelineDir),
            _ => Err(Error::NotFound(name.to_string())),
        }
    }

    pub(super) fn node(ino: u64) -> Result<Node> {
        Node::from_ino(ino).ok_or_else(|| Error::NotFound(format!("inode {ino}")))
    }

    /// Attributes and TTL of a node.
    pub fn getattr(&self, ino: u64) -> Result<Entry> {
        match Self::node(ino)? {
            Node::Root
            | Node::AsOfDir
            | Node::IncrementalDir
            | Node::TimelineDir
            | Node::MergedDir
            | Node::MergedAsOfDir
            | Node::MergedIncrementalDir
            | Node::CdcDir => Ok(self.dir_entry(ino, TTL_FRESH)),
            Node::MergedFile { view, slice } => {
                let ms = self.merged_slice(view, slice)?;
                let ttl = self.view(view).map(|v| v.ttl()).unwrap_or(TTL_FRESH);
                self.merged_entry(ino, &ms, ttl)
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
                self.file_entry(ino, &f, ttl)
            }
            Node::TimelineFile { name } => {
                let name = self.timeline_name(name)?;
                let (bytes, mtime) = self.render_timeline_file(&name)?;
                Ok(self
                    .owner
                    .rendered_file(ino, bytes.len() as u64, mtime, TTL_FRESH))
            }
        }
    }

    /// Look `name` up in directory `parent`.
    pub fn lookup(&self, parent: u64, name: &OsStr) -> Result<Entry> {
        let e = self.lookup_name(parent, name)?;
        if e.attr.kind == Kind::File {
            // The kernel had no entry for this file: a caller stats what it lists.
            self.stat_demand.file_looked_up();
        }
        Ok(e)
    }

    fn lookup_name(&self, parent: u64, name: &OsStr) -> Result<Entry> {
        let name = name
            .to_str()
            .filter(|n| !n.is_empty() && n.len() <= MAX_NAME && *n != "." && *n != "..")
            .ok_or_else(|| Error::NotFound(format!("{name:?}")))?;
        let node = match Self::node(parent)? {
            Node::Root => self.root_child(name)?,
            Node::AsOfDir => {
                let snap = self.snapshot();
                self.view_root(viewkey::parse_as_of(name, &self.zone(&snap))?, false)?
            }
            Node::IncrementalDir | Node::MergedIncrementalDir => {
                let merged = matches!(Self::node(parent)?, Node::MergedIncrementalDir);
                let snap = self.snapshot();
                self.view_root(snap.parse_window(name, &self.zone(&snap))?, merged)?
            }
            Node::CdcDir => {
                let snap = self.snapshot();
                self.cdc_root(snap.parse_window(name, &self.zone(&snap))?)?
            }
            Node::MergedDir => match name {
                "latest" => self.view_root(ViewKey::Latest, true)?,
                "as_of" => Node::MergedAsOfDir,
                "incremental" => Node::MergedIncrementalDir,
                _ => return Err(Error::NotFound(format!("merged/{name}"))),
            },
            Node::MergedAsOfDir => {
                let snap = self.snapshot();
                self.view_root(viewkey::parse_as_of(name, &self.zone(&snap))?, true)?
            }
            Node::TimelineDir => {
                let snap = self.snapshot();
                if !snap.timeline().has_file(name) {
                    return Err(Error::NotFound(format!("timeline/{name}")));
                }
                let id = self
                    .inodes
                    .timeline_names
                    .id(&Arc::from(name))
                    .ok_or_else(|| Error::NotFound(name.to_string()))?;
                Node::TimelineFile { name: id }
            }
            Node::ViewDir { view, dir } => return self.lookup_in_view(view, dir, name),
            Node::ViewFile { .. } | Node::TimelineFile { .. } | Node::MergedFile { .. } => {
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

    /// Look `name` up in directory `dir` of view `view`: a file of the partition there, or a
    /// directory with files below it.
    fn lookup_in_view(&self, view: u32, dir: u32, name: &str) -> Result<Entry> {
        let v = self.view(view)?;
        let path = self.dir_path(dir)?;
        if let Some(i) = self.partition_index(&v, &path).filter(|_| v.merged) {
            if let Some(node) = self.merged_part(&v, i)?.find(name) {
                let ttl = v.ttl();
                return match node {
                    MergedNode::Base(file) => {
                        let f = self.registered(file)?;
                        self.file_entry(Node::ViewFile { view, file }.ino(), &f, ttl)
                    }
                    MergedNode::Slice(slice) => {
                        let ms = self.merged_slice(view, slice)?;
                        self.merged_entry(Node::MergedFile { view, slice }.ino(), &ms, ttl)
                    }
                };
            }
        } else if let Some(i) = self.partition_index(&v, &path) {
            let pv = self.part(&v, i)?;
            if let Some(pos) = pv.position(name) {
                if view == 0 {
                    self.kernel.handed_files(dir, v.snap.generation, &pv);
                }
                let c = pv.choice.files[pos];
                let node = Node::ViewFile {
                    view,
                    file: pv.listing.ids[c.index as usize],
                };
                let f = &pv.listing.files[c.index as usize];
                return self.file_entry(node.ino(), f, self.answer_ttl(&v));
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
        Ok(self.dir_entry(node.ino(), self.answer_ttl(&v)))
    }

    /// The view's resolved partition and position of file `file`, if the view shows it.
    pub(super) fn find_in_view(
        &self,
        v: &ViewState,
        file: u64,
    ) -> Result<(Arc<ResolvedPartition>, usize)> {
        let f = self
            .partitions
            .registry
            .get(file)
            .ok_or_else(|| Error::NotFound(format!("file {file}")))?;
        let missing = || Error::NotFound(format!("{} is not in this view", f.rel_path()));
        let i = self.partition_index(v, &f.partition).ok_or_else(missing)?;
        let pv = self.part(v, i)?;
        let pos = pv.position(f.name()).ok_or_else(missing)?;
        let c = pv.choice.files[pos];
        if pv.listing.ids[c.index as usize] != file {
            return Err(missing());
        }
        Ok((pv, pos))
    }

    /// Open a file for reading.
    pub fn open(&self, ino: u64) -> Result<Opened> {
        let (file, keep_cache, backing) = self.open_parts(ino)?;
        // A table file on an object store: the kernel's page cache would cost more than it
        // saves on a sequential read (its read-ahead keeps a dozen 1 MiB requests in flight;
        // measured in scripts/bench figure 10: 200-240 MiB/s through it, 320-365 without).
        let direct_io = matches!(file, OpenHandle::Data(_))
            && backing.is_none()
            && self.store.is_object_store();
        let fh = self.handles.add_file(file);
        Ok(Opened {
            fh,
            keep_cache,
            backing,
            direct_io,
        })
    }

    /// What opening `ino` holds: the handle, whether the kernel may keep its cached pages, and
    /// the local file to pass through.
    fn open_parts(&self, ino: u64) -> Result<OpenedParts> {
        Ok(match Self::node(ino)? {
            // Visibility was decided when the name was looked up (a listing of one snapshot); a
            // file that left the view since keeps opening for whoever listed it, as in a Hudi
            // reader working from its listing. Lookups no longer find it.
            Node::ViewFile { view: _, file } => self.open_table_file(file)?,
            Node::MergedFile { view, slice } => {
                let ms = self.merged_slice(view, slice)?;
                match self.materialise(&ms)? {
                    Materialised::Base(file) => self.open_table_file(file)?,
                    Materialised::Merged { path, size } => {
                        let f = self.open_merged(&ms, &path, size)?;
                        let handle = hudifs_storage::local_file_handle(f)
                            .map_err(|e| Error::io(path.display().to_string(), e))?;
                        // The bytes of a merged slice are fixed by its inputs (the inode's key).
                        (OpenHandle::Data(handle.clone()), true, Some(handle))
                    }
                }
            }
            Node::TimelineFile { name } => {
                let name = self.timeline_name(name)?;
                (
                    OpenHandle::Bytes(self.render_timeline_file(&name)?.0),
                    false,
                    None,
                )
            }
            _ => return Err(Error::Invalid("is a directory".into())),
        })
    }

    /// The open file of handle `fh` of inode `ino`. A handle of a previous daemon of this mount
    /// (the kernel kept using it across a restart) is opened again under its number.
    fn file_handle(&self, ino: u64, fh: u64) -> Option<Arc<OpenHandle>> {
        if let Some(f) = self.handles.file(fh) {
            return Some(f);
        }
        if !self.handles.inherited(fh) {
            return None;
        }
        match self.open_parts(ino) {
            Ok((file, _, _)) => Some(self.handles.adopt_file(fh, Arc::new(file))),
            Err(e) => {
                log::info!("handle {fh} of a previous daemon (inode {ino:#x}): {e}");
                None
            }
        }
    }

    /// A table file by registry id, opened through the storage.
    fn open_table_file(&self, file: u64) -> Result<OpenedParts> {
        let f = self.registered(file)?;
        // The cheap name test first: the snapshot is asked only for a bootstrap-instant file.
        if f.is_base()
            && f.instant() == hudifs_core::table::METADATA_BOOTSTRAP_INSTANT
            && self.snapshot().cfg.is_bootstrap_skeleton(f.instant())
        {
            // Its bytes are the meta columns alone: a reader would get none of the data.
            let e = Error::Unsupported(format!(
                "{}: a metadata-only bootstrap skeleton (its data is in the source file under \
                 hoodie.bootstrap.base.path, which hudifs does not join to it yet)",
                super::join(&f.partition, f.name())
            ));
            log::warn!("{e}");
            return Err(e);
        }
        let path = partition_dir(&f.partition)?
            .child(f.name())
            .map_err(|e| Error::NotFound(e.to_string()))?;
        let handle = self
            .store
            .open(&path)
            .map_err(|e| Error::io(self.store.describe(&path), e))?;
        // A data file's name carries its instant and write token: its bytes never change.
        let backing = handle.as_file().is_some().then(|| handle.clone());
        Ok((OpenHandle::Data(handle), true, backing))
    }

    /// A table file of the registry.
    pub(super) fn registered(&self, file: u64) -> Result<DataFile> {
        self.partitions
            .registry
            .get(file)
            .ok_or_else(|| Error::NotFound(format!("file {file}")))
    }

    /// A merged slice of the registry, in view `view`. One that a previous daemon of this mount
    /// handed out (docs/SEMANTICS.md §7.11) is found again by its partition and name in the view.
    pub(super) fn merged_slice(&self, view: u32, slice: u64) -> Result<Arc<MergedSlice>> {
        if let Some(ms) = self.merged.get(slice) {
            return Ok(ms);
        }
        let missing = || Error::NotFound(format!("merged slice {slice}"));
        let (partition, name) = self.merged.inherited(slice).ok_or_else(missing)?;
        let dir = self.inodes.dirs.find(&*partition).ok_or_else(missing)?;
        let entry = self.lookup(
            Node::ViewDir { view, dir }.ino(),
            std::ffi::OsStr::new(&*name),
        )?;
        let Some(Node::MergedFile { slice: now, .. }) = Node::from_ino(entry.attr.ino) else {
            return Err(missing());
        };
        let ms = self.merged.get(now).ok_or_else(missing)?;
        self.merged.found_again(slice, ms.clone());
        Ok(ms)
    }

    /// The entry of a merged slice: merged now if it is not yet.
    fn merged_entry(&self, ino: u64, ms: &MergedSlice, ttl: Duration) -> Result<Entry> {
        let size = match self.materialise(ms)? {
            Materialised::Base(file) => {
                let f = self.registered(file)?;
                self.stated(&f)?;
                f.size()
            }
            Materialised::Merged { size, .. } => size,
        };
        Ok(self.merged_attr(ino, ms, size, ttl))
    }

    /// The entry of a merged slice in a listing: without merging. One not merged yet shows
    /// size 0 with a zero TTL, so that the kernel asks (and the slice is merged) on `stat`.
    pub(super) fn merged_listed(&self, ino: u64, ms: &MergedSlice, ttl: Duration) -> Entry {
        let size_of = |id| {
            let f = self.partitions.registry.get(id)?;
            f.is_stated().then(|| f.size())
        };
        match ms.size_if_known(size_of) {
            Some(size) => self.merged_attr(ino, ms, size, ttl),
            None => self.merged_attr(ino, ms, 0, Duration::ZERO),
        }
    }

    fn merged_attr(&self, ino: u64, ms: &MergedSlice, size: u64, ttl: Duration) -> Entry {
        self.owner.merged_file(ino, size, ms.mtime, ttl)
    }

    /// Read up to `size` bytes at `offset` of open file `fh` and hand them, or the error, to
    /// `done`, as the handle answers: a table file as its storage reads (in place on a local
    /// disk, from the store's runtime on an object store, so the calling FUSE thread never waits
    /// on the network), a rendered timeline file from memory. `ino` is the handle's inode: a
    /// daemon that took the mount over after a crash reopens a handle of the one before it by
    /// its inode (0 where the handle is known to be this daemon's).
    pub fn read(&self, ino: u64, fh: u64, offset: u64, size: u32, done: ReadAnswer) {
        let file = self.file_handle(ino, fh);
        match file.as_deref() {
            None => done(Err(Error::NotFound(format!("file handle {fh}")))),
            Some(OpenHandle::Data(file)) => file.read(
                offset,
                size as usize,
                Box::new(move |r| done(r.map_err(|e| Error::io(format!("file handle {fh}"), e)))),
            ),
            Some(OpenHandle::Bytes(b)) => {
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(b.len());
                let end = start.saturating_add(size as usize).min(b.len());
                done(Ok(&b[start..end]))
            }
        }
    }

    pub fn release(&self, fh: u64) {
        self.handles.release_file(fh);
    }

    /// Where the root of a view of `as_of/`, `incremental/`, `merged/as_of/`,
    /// `merged/incremental/` or `cdc/` lies: the parent directory and the name it has there.
    pub(super) fn history_name(key: &ViewKey, merged: bool, cdc: bool) -> Option<(u64, String)> {
        match key {
            ViewKey::Incremental { start, end } if cdc => Some((
                CDC_INO,
                viewkey::window_name(start.as_deref(), end.as_deref()),
            )),
            ViewKey::AsOf(t) if merged => Some((MERGED_AS_OF_INO, t.to_string())),
            ViewKey::AsOf(t) => Some((AS_OF_INO, t.to_string())),
            ViewKey::Incremental { start, end } => Some((
                if merged {
                    MERGED_INCREMENTAL_INO
                } else {
                    super::inode::INCREMENTAL_INO
                },
                viewkey::window_name(start.as_deref(), end.as_deref()),
            )),
            ViewKey::Latest => None,
        }
    }
}

/// Names handed out per partition, for comparing two snapshots of `latest/`.
pub(super) fn names_of(pv: Option<&Arc<ResolvedPartition>>) -> HashMap<&str, u64> {
    pv.map(|pv| pv.names().collect()).unwrap_or_default()
}
