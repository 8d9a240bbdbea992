//! The directory structure a view shows: the views by id ([`HudiFs::view`], planned and kept
//! by the view cache, `view_cache.rs`), which directories of a view exist (partition paths and
//! the directories above them, with a file at or below them), their sub-directories, and the
//! roots of the views.

use std::collections::BTreeSet;
use std::sync::Arc;

use hudifs_core::error::{Error, Result};
use hudifs_core::viewkey::ViewKey;

use super::inode::{Node, ViewName};
use super::{HudiFs, ViewState};

impl HudiFs {
    /// The view with id `view`, planned against the current snapshot (or kept from an older one
    /// if it can no longer change).
    pub(super) fn view(&self, view: u32) -> Result<Arc<ViewState>> {
        self.views.view(view, || self.inodes.views.get(view))
    }

    /// Whether listing directory `ino` needs nothing from the storage: a directory of a plain
    /// view planned against the current snapshot whose partitions at and below it are all
    /// resolved, with the files of the partition there stated while listings carry attributes
    /// (`ViewCache::dir_resolved`). Anything else may list, read metadata or merge.
    pub(super) fn dir_resolved(&self, ino: u64) -> bool {
        match Node::from_ino(ino) {
            Some(Node::ViewDir { view, dir }) => self
                .dir_path(dir)
                .is_ok_and(|path| self.views.dir_resolved(view, &path)),
            _ => false,
        }
    }

    /// Whether looking `name` up in directory `parent` needs nothing from the storage: a stated
    /// file of a resolved partition, or a directory whose partitions are all resolved, in a
    /// plain view planned against the current snapshot (`ViewCache::lookup_resolved`).
    pub(super) fn lookup_resolved(&self, parent: u64, name: &std::ffi::OsStr) -> bool {
        match (Node::from_ino(parent), name.to_str()) {
            (Some(Node::ViewDir { view, dir }), Some(name)) => self
                .dir_path(dir)
                .is_ok_and(|path| self.views.lookup_resolved(view, &path, name)),
            _ => false,
        }
    }

    /// Whether partition `i` of a view shows any file. A merged view can show fewer slices than
    /// the plain view has files (`merged/incremental/` drops the groups no write of the window
    /// wrote to).
    fn partition_shown(&self, v: &ViewState, i: usize) -> Result<bool> {
        Ok(match &v.merged {
            Some(_) => !self.merged_part(v, i)?.entries.is_empty(),
            None => !self.views.part(v, i)?.choice.files.is_empty(),
        })
    }

    /// Whether directory `path` of a view has any file at or below it.
    pub(super) fn dir_exists(&self, v: &ViewState, path: &str) -> Result<bool> {
        if path.is_empty() {
            return Ok(true);
        }
        for i in v.snap.partitions_under(path) {
            let p = &v.snap.partitions[i];
            if !(&**p == path || p.starts_with(&format!("{path}/"))) {
                continue;
            }
            if self.partition_shown(v, i)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The names of the sub-directories of directory `path` of a view that have a file at or
    /// below them: the next path component of every non-empty partition below.
    pub(super) fn subdir_names(&self, v: &ViewState, path: &str) -> Result<BTreeSet<String>> {
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
        // side (listing a partition is mostly waiting for the storage).
        let mut firsts: Vec<usize> = Vec::new();
        for (k, (i, first)) in below.iter().enumerate() {
            if k == 0 || below[k - 1].1 != *first {
                firsts.push(*i);
            }
        }
        self.views.resolve_parts(v, &firsts);
        let mut subdirs = BTreeSet::new();
        for (i, first) in below {
            if subdirs.contains(first) {
                continue;
            }
            if self.partition_shown(v, i)? {
                subdirs.insert(first.to_string());
            }
        }
        Ok(subdirs)
    }

    /// The root directory node of the view `key`, plain or merged.
    pub(super) fn view_root(&self, key: ViewKey, merged: bool) -> Result<Node> {
        self.view_root_of(ViewName {
            key,
            merged,
            cdc: false,
            delta: false,
            iceberg: false,
        })
    }

    /// The root of the change feed of window `key` (`cdc/<w>/`).
    pub(super) fn cdc_root(&self, key: ViewKey) -> Result<Node> {
        self.view_root_of(ViewName {
            key,
            merged: true,
            cdc: true,
            delta: false,
            iceberg: false,
        })
    }

    /// The data directory of `delta/` for completed write `t` (`delta/<t>/`): the snapshot as
    /// of `t`, merged for a merge-on-read table.
    pub(super) fn delta_root(
        &self,
        t: hudifs_core::instant_time::InstantTime,
        merged: bool,
    ) -> Result<Node> {
        self.view_root_of(ViewName {
            key: ViewKey::AsOf(t),
            merged,
            cdc: false,
            delta: true,
            iceberg: false,
        })
    }

    pub(super) fn view_root_of(&self, name: ViewName) -> Result<Node> {
        let view = self
            .inodes
            .views
            .id(&Arc::new(name))
            .ok_or_else(|| Error::NotFound("too many distinct views".into()))?;
        Ok(Node::ViewDir { view, dir: 0 })
    }

    pub(super) fn dir_path(&self, dir: u32) -> Result<Arc<str>> {
        self.inodes
            .dirs
            .get(dir)
            .ok_or_else(|| Error::NotFound(format!("directory {dir}")))
    }
}
