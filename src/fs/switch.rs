//! The switch of `latest/` from one snapshot to the next, as the kernel must see it: which
//! cached names and listings went stale (decided against what the kernel was handed,
//! `kernel_cache.rs`), and the sink the FUSE adapter implements to drop them
//! ([`KernelNotifier`]). SEMANTICS.md §6.2, §6.5.

use std::collections::BTreeSet;

use hudifs_core::snapshot::Snapshot;

use super::inode::{Node, LATEST_VIEW};
use super::ops::names_of;
use super::{join, HudiFs};

/// Where invalidations of the kernel's caches go: implemented by the FUSE adapter (`fuse/mod.rs`)
/// for the live session; tests may record them.
pub trait KernelNotifier: Send + Sync {
    /// Drop the cached name `name` in directory `parent`.
    fn inval_entry(&self, parent: u64, name: &str);
    /// Drop the cached attributes, pages and listing of `ino`.
    fn inval_inode(&self, ino: u64);
}

/// Kernel cache entries to drop: inodes (attributes and cached pages) and `(parent, name)`
/// directory entries.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Invalidations {
    /// The partitions the change touched (`None`: possibly all).
    pub touched: Option<BTreeSet<String>>,
    pub inodes: Vec<u64>,
    pub entries: Vec<(u64, String)>,
    /// Directories of `latest/` being switched (see [`HudiFs::switched`]).
    switching: Vec<u32>,
}

impl Invalidations {
    /// Send them to the kernel.
    pub fn send(&self, to: &dyn KernelNotifier) {
        for (parent, name) in &self.entries {
            to.inval_entry(*parent, name);
        }
        for ino in &self.inodes {
            to.inval_inode(*ino);
        }
    }
}

impl HudiFs {
    /// The kernel cache entries of `latest/` that the change from `previous` to the current
    /// snapshot made stale: for every directory of `latest/` the change touched (every one the
    /// kernel knows when the change cannot tell), the names that left it or now name another
    /// file, and the directory's inode (attributes and cached listing). Until
    /// [`HudiFs::switched`] is called with the result, those directories' cached listings are
    /// not reused. Resolving the new `latest/` here also warms it.
    pub(super) fn latest_invalidations(
        &self,
        previous: &Snapshot,
        touched: Option<&BTreeSet<String>>,
    ) -> Invalidations {
        let mut inv = Invalidations {
            touched: touched.cloned(),
            ..Invalidations::default()
        };
        let root = Node::ViewDir {
            view: LATEST_VIEW,
            dir: 0,
        }
        .ino();
        inv.inodes.push(root);
        // A refused latest/ (unreadable replacecommit metadata) has nothing in it.
        let new = self.view(0).ok();
        let snap = self.snapshot();
        let generation = snap.generation;
        for d in self.switched_dirs(touched, new.is_none()) {
            let Ok(path) = self.dir_path(d) else { continue };
            let ino = Node::ViewDir {
                view: LATEST_VIEW,
                dir: d,
            }
            .ino();
            let handed = self.kernel.begin_switch(d, generation);
            inv.switching.push(d);
            inv.inodes.push(ino);
            let files = new.as_ref().and_then(|v| {
                let i = v.partition_index(&path)?;
                self.views.part(v, i).ok()
            });
            if let Some(old) = &handed.files {
                let now = names_of(files.as_ref());
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
                let may_change =
                    touched.is_none_or(|t| t.iter().any(|p| *p == child || p.starts_with(&below)));
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
        if previous.ctx.retention_bound() != snap.ctx.retention_bound() {
            for (id, v) in self.views.cached() {
                let Some(name) = self
                    .inodes
                    .views
                    .get(id)
                    .and_then(|n| HudiFs::history_name(&n))
                else {
                    continue;
                };
                if snap.plan(&v.plan.key, self.opts.read_optimized).is_err() {
                    inv.entries.push(name);
                    inv.inodes.push(Node::ViewDir { view: id, dir: 0 }.ino());
                    self.views.forget(id);
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
    pub(super) fn begin_switch(&self, touched: Option<&BTreeSet<String>>, generation: u64) {
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
}
