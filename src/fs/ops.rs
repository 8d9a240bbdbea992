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

use super::handles::OpenedParts;
use super::inode::{
    Node, ViewName, AS_OF_INO, CDC_INO, DELTA_CHANGES_INO, DELTA_INO, ICEBERG_INO,
    MERGED_AS_OF_INO, MERGED_INCREMENTAL_INO,
};
use super::{
    join, Entry, HudiFs, Kind, OpenHandle, Opened, ReadAnswer, ResolvedPartition, ViewState,
    TTL_FRESH,
};

const MAX_NAME: usize = 255;

impl HudiFs {
    /// The entry of a directory node.
    pub(super) fn dir_entry(&self, ino: u64, ttl: Duration) -> Entry {
        self.owner.dir(ino, ttl)
    }

    /// The entry of a table file, stated first if it was listed by name only.
    pub(super) fn file_entry(&self, ino: u64, f: &DataFile, ttl: Duration) -> Result<Entry> {
        self.views.stated(f)?;
        if let Some(Node::ViewFile { file: id, .. }) =
            Node::from_ino(ino).filter(|_| self.is_skeleton(f))
        {
            // Its size is the stitched file's (stitched now if it is not yet).
            let (_, size) = self.stitched(id, f)?;
            return Ok(self.owner.merged_file(ino, size, f.mtime(), ttl));
        }
        Ok(self.owner.table_file(ino, f, ttl))
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
            "delta" => Ok(Node::DeltaDir),
            "iceberg" => Ok(Node::IcebergDir),
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
            | Node::CdcDir
            | Node::DeltaDir
            | Node::DeltaLogDir
            | Node::DeltaChangesDir
            | Node::IcebergDir
            | Node::IcebergMetaDir => Ok(self.dir_entry(ino, TTL_FRESH)),
            Node::DeltaLogFile { file } => self.delta_log_file_entry(file),
            Node::IcebergMetaFile { file } => self.iceberg_meta_entry(file),
            Node::MergedFile { view, slice } => {
                let ttl = self.view(view).map(|v| v.ttl()).unwrap_or(TTL_FRESH);
                let e = self.merged_file_entry(ino, view, slice, ttl)?;
                if self.is_iceberg_view(view) {
                    return self.iceberg_entry(view, e);
                }
                Ok(e)
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
                let f = self.views.registered(file)?;
                let ttl = self.view(view).map(|v| v.ttl()).unwrap_or(TTL_FRESH);
                let e = self.file_entry(ino, &f, ttl)?;
                if self.is_iceberg_view(view) {
                    return self.iceberg_entry(view, e);
                }
                Ok(e)
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
            self.views.file_looked_up();
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
            Node::DeltaDir => self.delta_child(name)?,
            Node::DeltaLogDir => self.delta_log_child(name)?,
            Node::DeltaChangesDir => self.delta_changes_child(name)?,
            Node::IcebergDir => self.iceberg_child(name)?,
            Node::IcebergMetaDir => self.iceberg_meta_child(name)?,
            Node::ViewDir { view, dir } => {
                let e = self.lookup_in_view(view, dir, name)?;
                if e.attr.kind == Kind::File && self.is_iceberg_view(view) {
                    return self.iceberg_entry(view, e);
                }
                return Ok(e);
            }
            Node::ViewFile { .. }
            | Node::TimelineFile { .. }
            | Node::MergedFile { .. }
            | Node::DeltaLogFile { .. }
            | Node::IcebergMetaFile { .. } => {
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
        if let Some(i) = v.partition_index(&path).filter(|_| v.merged.is_some()) {
            if let Some(entry) = self.lookup_merged(view, &v, i, name)? {
                return Ok(entry);
            }
        } else if let Some(i) = v.partition_index(&path) {
            let pv = self.views.part(&v, i)?;
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
                return self.file_entry(node.ino(), f, self.views.answer_ttl(&v));
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
        Ok(self.dir_entry(node.ino(), self.views.answer_ttl(&v)))
    }

    /// The view's resolved partition and position of file `file`, if the view shows it.
    pub(super) fn find_in_view(
        &self,
        v: &ViewState,
        file: u64,
    ) -> Result<(Arc<ResolvedPartition>, usize)> {
        let f = self.views.registered(file)?;
        let missing = || Error::NotFound(format!("{} is not in this view", f.rel_path()));
        let i = v.partition_index(&f.partition).ok_or_else(missing)?;
        let pv = self.views.part(v, i)?;
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
    pub(super) fn open_parts(&self, ino: u64) -> Result<OpenedParts> {
        let node = Self::node(ino)?;
        if let Node::ViewFile { view, .. } | Node::MergedFile { view, .. } = node {
            if self.is_iceberg_view(view) {
                return self.open_iceberg_file(view, node);
            }
        }
        Ok(match node {
            // Visibility was decided when the name was looked up (a listing of one snapshot); a
            // file that left the view since keeps opening for whoever listed it, as in a Hudi
            // reader working from its listing. Lookups no longer find it.
            Node::ViewFile { view: _, file } => self.open_table_file(file)?,
            Node::MergedFile { view, slice } => self.open_merged_slice(view, slice)?,
            Node::TimelineFile { name } => {
                let name = self.timeline_name(name)?;
                (
                    OpenHandle::Bytes(self.render_timeline_file(&name)?.0),
                    false,
                    None,
                )
            }
            Node::DeltaLogFile { file } => (self.open_delta_log_file(file)?, false, None),
            Node::IcebergMetaFile { file } => (self.open_iceberg_meta(file)?, false, None),
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
    pub(super) fn open_table_file(&self, file: u64) -> Result<OpenedParts> {
        let f = self.views.registered(file)?;
        // A metadata-only bootstrap skeleton holds the meta columns alone: it is served
        // stitched with its source file, never as it is (SEMANTICS.md §10.11).
        if self.is_skeleton(&f) {
            let stitched = self.open_stitched(file, &f)?;
            let handle = hudifs_storage::local_file_handle(stitched)
                .map_err(|e| Error::io(f.rel_path(), e))?;
            return Ok((OpenHandle::Data(handle.clone()), true, Some(handle)));
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
    /// `merged/incremental/`, `cdc/` or `delta/` lies: the parent directory and the name it has
    /// there.
    pub(super) fn history_name(name: &ViewName) -> Option<(u64, String)> {
        let (merged, cdc) = (name.merged, name.cdc);
        match &name.key {
            ViewKey::AsOf(t) if name.delta && cdc => Some((DELTA_CHANGES_INO, t.to_string())),
            ViewKey::AsOf(t) if name.delta => Some((DELTA_INO, t.to_string())),
            ViewKey::AsOf(t) if name.iceberg => Some((ICEBERG_INO, t.to_string())),
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
