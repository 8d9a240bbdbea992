//! Merging a slice when it is first asked for (into the merge cache, once however many ask), and
//! opening the merged file.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use hudifs_core::error::{Error, Result};
use hudifs_core::snapshot::Snapshot;
use hudifs_merge::{
    snapshot_visibility, window_visibility, CacheOptions, Ensured, MergeCache, MergeConfig,
    MergeError, MergeOptions, Refusal,
};
use hudifs_storage::sync::lock;
use hudifs_storage::Storage;

use super::default_cache_dir;
use super::slices::{Done, MergedNode, MergedPartition, MergedSlice, SliceState};
use crate::fs::HudiFs;

/// What the kernel sees of a merged slice once it is materialised.
#[derive(Debug, Clone)]
pub enum Materialised {
    /// Serve the base file with this registry id.
    Base(u64),
    /// Serve this file of the merge cache.
    Merged { path: PathBuf, size: u64 },
}

pub(in crate::fs) fn refusal(e: MergeError) -> Error {
    let msg = e.to_string();
    match e.kind {
        Refusal::Unsupported => Error::Unsupported(msg),
        Refusal::TooBig => Error::TooBig(msg),
        Refusal::Corrupt => Error::Corrupt(msg),
    }
}

impl HudiFs {
    /// The merge cache, opened on first use (a mount that never shows `merged/` creates none).
    pub(in crate::fs) fn merge_cache(&self) -> Result<Arc<MergeCache>> {
        self.merge_cache
            .get_or_init(|| {
                let dir = self
                    .opts
                    .merge
                    .cache_dir
                    .clone()
                    .unwrap_or_else(default_cache_dir);
                let c = MergeCache::open(&CacheOptions {
                    dir: dir.clone(),
                    max_bytes: self.opts.merge.cache_bytes,
                })
                .map_err(|e| e.to_string())?;
                log::info!(
                    "merge cache {} ({} bytes at most)",
                    dir.display(),
                    self.opts.merge.cache_bytes
                );
                Ok(Arc::new(c))
            })
            .clone()
            .map_err(|e| Error::Corrupt(format!("the merge cache cannot be used: {e}")))
    }

    /// Merges run by this mount (cache misses).
    pub fn merges_run(&self) -> u64 {
        self.merge_cache
            .get()
            .and_then(|c| c.as_ref().ok())
            .map_or(0, |c| c.merges())
    }

    /// What merging a slice of the current snapshot needs.
    fn merge_job(&self) -> Result<MergeJob> {
        Ok(MergeJob {
            cache: self.merge_cache()?,
            store: self.store.clone(),
            snap: self.snapshot(),
            memory_cap: self.opts.merge.memory_cap,
        })
    }

    /// Merge slice `ms` if it is not merged yet (once, however many ask): what to serve.
    pub(super) fn materialise(&self, ms: &MergedSlice) -> Result<Materialised> {
        self.merge_job()?.materialise(ms)
    }

    /// A reader going through partition `part` in order (the slice before `name` is merged
    /// already, and `name` was just asked for) will ask for the slices after it next: start
    /// merging the next [`READ_AHEAD`] not merged yet (each once), each on a thread of its own,
    /// at most [`READ_AHEAD_RUNNING`] at a time in the mount (SEMANTICS.md §10.6). A reader that
    /// skips around starts none.
    pub(super) fn read_ahead(&self, part: &MergedPartition, name: &str) {
        let slices: Vec<u64> = part
            .entries
            .iter()
            .filter_map(|(_, n)| match n {
                MergedNode::Slice(id) => Some(*id),
                MergedNode::Base(_) => None,
            })
            .collect();
        let Ok(at) = part.entries.binary_search_by(|(n, _)| (**n).cmp(name)) else {
            return;
        };
        let MergedNode::Slice(this) = part.entries[at].1 else {
            return;
        };
        let Some(k) = slices.iter().position(|s| *s == this) else {
            return;
        };
        let in_order = k
            .checked_sub(1)
            .and_then(|p| self.merged.get(slices[p]))
            .is_some_and(|prev| prev.state() == SliceState::Merged);
        if !in_order {
            return;
        }
        let Ok(job) = self.merge_job() else {
            return;
        };
        let running = self.merged.ahead();
        for id in slices.iter().skip(k + 1).take(READ_AHEAD) {
            let Some(ms) = self.merged.get(*id) else {
                continue;
            };
            if ms.state() != SliceState::NotMerged || ms.progress.ahead.swap(true, Ordering::AcqRel)
            {
                continue;
            }
            if running.fetch_add(1, Ordering::AcqRel) >= READ_AHEAD_RUNNING {
                running.fetch_sub(1, Ordering::AcqRel);
                ms.progress.ahead.store(false, Ordering::Release);
                return;
            }
            let (job, done) = (job.clone(), running.clone());
            let spawned = std::thread::Builder::new()
                .name("hudifs-ahead".into())
                .spawn(move || {
                    let _ = job.materialise(&ms);
                    done.fetch_sub(1, Ordering::AcqRel);
                });
            if spawned.is_err() {
                running.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Open the merged file of `ms` for reading: the cached file, merged again if the cache
    /// evicted it since (the bytes are a pure function of the inputs, so they are the same).
    pub(super) fn open_merged(
        &self,
        ms: &MergedSlice,
        path: &PathBuf,
        size: u64,
    ) -> Result<std::fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        let open = |p: &PathBuf| {
            std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                .open(p)
        };
        match open(path) {
            Ok(f) if f.metadata().is_ok_and(|m| m.len() == size) => return Ok(f),
            Ok(_) | Err(_) => {}
        }
        // Evicted (or replaced): merge again.
        *lock(&ms.progress.done) = None;
        match self.materialise(ms)? {
            Materialised::Merged { path: p, size: s } if s == size => {
                open(&p).map_err(|e| Error::io(p.display().to_string(), e))
            }
            _ => Err(Error::Corrupt(format!(
                "merged file {}: merged again to a different file",
                crate::fs::join(&ms.partition, &ms.name)
            ))),
        }
    }
}

/// Slices merged ahead of a reader going through a directory in order.
pub(super) const READ_AHEAD: usize = 2;
/// The most merges ahead of readers running at once in a mount.
const READ_AHEAD_RUNNING: usize = 2;

/// What merging a slice needs, taken from the mount, so that a merge can run on a thread of its
/// own (read-ahead) as well as on the thread that asked.
#[derive(Clone)]
pub(super) struct MergeJob {
    cache: Arc<MergeCache>,
    store: Arc<dyn Storage>,
    snap: Arc<Snapshot>,
    memory_cap: u64,
}

impl MergeJob {
    /// Merge slice `ms` if it is not merged yet (once, however many ask): what to serve.
    fn materialise(&self, ms: &MergedSlice) -> Result<Materialised> {
        let mut done = lock(&ms.progress.done);
        if let Some(d) = &*done {
            return Ok(match d {
                Done::Base(id) => Materialised::Base(*id),
                Done::Merged { path, size } => Materialised::Merged {
                    path: path.clone(),
                    size: *size,
                },
            });
        }
        if let Some(e) = &*lock(&ms.progress.refused) {
            return Err(e.clone());
        }
        let started = std::time::Instant::now();
        let before = self.cache.merges();
        let r = self.merge_now(ms);
        let outcome = match &r {
            Ok(Done::Base(_)) => "base",
            Ok(Done::Merged { .. }) if self.cache.merges() > before => "merged",
            Ok(Done::Merged { .. }) => "cached",
            Err(Error::Unsupported(_) | Error::TooBig(_)) => "refused",
            Err(_) => "failed",
        };
        let written = match &r {
            Ok(Done::Merged { size, .. }) if outcome == "merged" => *size,
            _ => 0,
        };
        hudifs_storage::observe::merge(outcome, started, written);
        match r {
            Ok(d) => {
                *done = Some(d.clone());
                Ok(match d {
                    Done::Base(id) => Materialised::Base(id),
                    Done::Merged { path, size } => Materialised::Merged { path, size },
                })
            }
            Err(e) => {
                if matches!(e, Error::Unsupported(_) | Error::TooBig(_)) {
                    *lock(&ms.progress.refused) = Some(e.clone());
                }
                if !ms.progress.logged.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "merged file {}: {e}",
                        crate::fs::join(&ms.partition, &ms.name)
                    );
                }
                Err(e)
            }
        }
    }

    fn merge_now(&self, ms: &MergedSlice) -> Result<Done> {
        let (cache, snap) = (&self.cache, &self.snap);
        let cfg = MergeConfig::from_properties(&snap.cfg.properties)
            .map_err(|e| refusal(e.in_slice(&ms.slice.id())))?;
        let opts = MergeOptions {
            memory_cap: self.memory_cap,
            ..MergeOptions::default()
        };
        let table = self.store.describe(&Default::default());
        let ensured = match (&ms.cdc, &ms.window_end) {
            (Some(group), _) => {
                let tl = snap.timeline();
                let committed = |i: &str| tl.is_committed(i);
                cache.ensure(&*self.store, &table, &cfg, group, &committed, &opts)
            }
            (None, None) => {
                let visible = snapshot_visibility(snap.timeline(), &ms.t);
                cache.ensure(&*self.store, &table, &cfg, &ms.slice, &visible, &opts)
            }
            (None, Some(end)) => {
                let visible = window_visibility(snap.timeline(), &ms.t, end.as_deref());
                cache.ensure(&*self.store, &table, &cfg, &ms.slice, &visible, &opts)
            }
        };
        match ensured.map_err(refusal)? {
            Ensured::Base => match ms.base {
                Some(id) => Ok(Done::Base(id)),
                None => Err(Error::Corrupt(format!(
                    "slice {} has no base file to serve",
                    ms.slice.id()
                ))),
            },
            Ensured::Merged { path, size, .. } => Ok(Done::Merged { path, size }),
        }
    }
}
