//! Merging a slice when it is first asked for (into the merge cache, once however many ask), and
//! opening the merged file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hudifs_core::error::{Error, Result};
use hudifs_core::snapshot::Snapshot;
use hudifs_merge::{
    snapshot_visibility, window_visibility, CacheOptions, Ensured, MergeCache, MergeConfig,
    MergeError, MergeOptions, Refusal,
};
use hudifs_storage::sync::lock;
use hudifs_storage::Storage;

use super::slices::{Done, MergedNode, MergedPartition, MergedSlice, SliceState};
use crate::fs::{HudiFs, ViewState};

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
                let dir = self.opts.merge.dir();
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

    /// Merges ahead of readers running now (at most [`HudiFs::ahead_depth`]'s; a thread
    /// resolving a partition ahead of a reader counts as one).
    pub fn merges_ahead(&self) -> usize {
        self.merged.ahead().load(Ordering::Acquire)
    }

    /// Merge slice `ms` if it is not merged yet (once, however many ask): what to serve.
    pub(super) fn materialise(&self, ms: &MergedSlice) -> Result<Materialised> {
        self.merge_job()?.materialise(ms)
    }

    /// How far merges run ahead of a reader: on a local disk a merge keeps a core busy, and two
    /// at a time keep both of this machine's; on an object store a merge mostly waits on its
    /// requests, and more at a time hide their latency from a lone reader (issue 34, item 7:
    /// `scripts/bench --only s3merged`, one file after another at +20 ms per request).
    fn ahead_depth(&self) -> Depth {
        if self.store.is_object_store() {
            Depth {
                slices: READ_AHEAD_STORE,
                running: READ_AHEAD_RUNNING_STORE,
            }
        } else {
            Depth {
                slices: READ_AHEAD,
                running: READ_AHEAD_RUNNING,
            }
        }
    }

    /// A reader going through the view in order (the slice a walk visits before `name` is
    /// merged already, and `name`, in partition `i` of view `v`, was just asked for) will ask
    /// for the slices after it next: start merging the next few ([`HudiFs::ahead_depth`]) in
    /// walk order not merged yet (each once), each on a thread of its own, at most a few at a
    /// time in the mount (SEMANTICS.md §10.6). Where the partition ends first, the read-ahead
    /// goes on into the partitions a walk visits next (at most [`READ_AHEAD_PARTITIONS`] of
    /// them), one not built yet resolved on such a thread too, never holding up the caller. A
    /// reader that skips around starts none.
    pub(super) fn read_ahead(
        &self,
        v: &Arc<ViewState>,
        i: usize,
        part: &MergedPartition,
        name: &str,
    ) {
        let Some(m) = v.merged.as_ref() else {
            return;
        };
        let slices = slice_ids(part);
        let Some(MergedNode::Slice(this)) = part.find(name) else {
            return;
        };
        let Some(k) = slices.iter().position(|s| *s == this) else {
            return;
        };
        // The slice a walk visits before: in the partition, or the last of the partition
        // visited before it (if that was built at all).
        let prev = match k.checked_sub(1) {
            Some(p) => Some(slices[p]),
            None => m
                .walk_before(&v.snap, i)
                .and_then(|j| m.built(j))
                .and_then(|p| slice_ids(&p).last().copied()),
        };
        let in_order = prev
            .and_then(|p| self.merged.get(p))
            .is_some_and(|prev| prev.state() == SliceState::Merged);
        if !in_order {
            return;
        }
        let Ok(job) = self.merge_job() else {
            return;
        };
        let running = self.merged.ahead();
        let depth = self.ahead_depth();
        let mut want = depth.slices;
        for id in slices.iter().skip(k + 1).take(depth.slices) {
            want -= 1;
            if let Some(ms) = self.merged.get(*id) {
                if start_ahead(&job, &running, depth.running, ms) == Ahead::Full {
                    return;
                }
            }
        }
        // The partitions a walk visits next: built ones here, the first one not built on a
        // thread of its own.
        let mut at = i;
        for looked in 0..READ_AHEAD_PARTITIONS {
            if want == 0 {
                return;
            }
            let Some(next) = m.walk_after(&v.snap, at) else {
                return;
            };
            at = next;
            let Some(p) = m.built(next) else {
                let ahead = (want, depth.running);
                self.resolve_ahead(v, next, READ_AHEAD_PARTITIONS - looked, ahead, job, running);
                return;
            };
            for id in slice_ids(&p).into_iter().take(want) {
                want -= 1;
                if let Some(ms) = self.merged.get(id) {
                    if start_ahead(&job, &running, depth.running, ms) == Ahead::Full {
                        return;
                    }
                }
            }
        }
    }

    /// Go on ahead of a reader into partition `first` of view `v`, not built yet, and up to
    /// `partitions` partitions from it in walk order: on a thread of its own (one of the
    /// `limit` running ahead), build each and merge the first `want` slices in them, the first
    /// on this thread, the others each on a thread of its own. Only a shared mount
    /// ([`HudiFs::shared`]) can. `(want, limit)` is `ahead`.
    fn resolve_ahead(
        &self,
        v: &Arc<ViewState>,
        first: usize,
        partitions: usize,
        ahead: (usize, usize),
        job: MergeJob,
        running: Arc<AtomicUsize>,
    ) {
        let (want, limit) = ahead;
        let Some(fs) = self.this.upgrade() else {
            return;
        };
        if running.fetch_add(1, Ordering::AcqRel) >= limit {
            running.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        let (v, slot) = (v.clone(), running.clone());
        let body = move || {
            let mut want = want;
            let mut own: Option<Arc<MergedSlice>> = None;
            let mut at = Some(first);
            for _ in 0..partitions {
                let Some(j) = at.filter(|_| want > 0) else {
                    break;
                };
                // A view of an earlier snapshot is not walked any further.
                if fs.snapshot().generation != v.snap.generation {
                    break;
                }
                let Ok(p) = fs.merged_part(&v, j) else {
                    break;
                };
                for id in slice_ids(&p).into_iter().take(want) {
                    want -= 1;
                    let Some(ms) = fs.merged.get(id) else {
                        continue;
                    };
                    if own.is_none() {
                        if claim(&ms) {
                            own = Some(ms);
                        }
                    } else if start_ahead(&job, &running, limit, ms) == Ahead::Full {
                        want = 0;
                    }
                }
                at = v.merged.as_ref().and_then(|m| m.walk_after(&v.snap, j));
            }
            // The merge needs only the job: the mount is not held up by it.
            drop(fs);
            if let Some(ms) = own {
                let _ = job.materialise(&ms);
            }
            slot.fetch_sub(1, Ordering::AcqRel);
        };
        if std::thread::Builder::new()
            .name("hudifs-ahead".into())
            .spawn(body)
            .is_err()
        {
            self.merged.ahead().fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// The change data file (`delta/_change_data/`, docs/SEMANTICS.md §11.4) of change feed
    /// `ms` in table schema `schema`: its path in the merge cache and its size. Written on first
    /// use from the feed file (merged now if need be), a batch at a time, into the merge cache,
    /// where it is an entry derived from the feed's.
    pub(in crate::fs) fn change_data(
        &self,
        ms: &MergedSlice,
        schema: &Arc<arrow_schema::Schema>,
    ) -> Result<(PathBuf, u64)> {
        if let Some(done) = lock(&ms.progress.change_data).clone() {
            return Ok(done);
        }
        let what = || crate::fs::join(&ms.partition, &ms.name);
        let Materialised::Merged { path: feed, .. } = self.materialise(ms)? else {
            return Err(Error::Corrupt(format!(
                "change feed {}: no feed file",
                what()
            )));
        };
        let table = self.store.describe(&Default::default());
        let variant = hudifs_storage::fnv::fnv1a_wide_hex(
            format!("{:?}", schema.fields()).into_bytes(),
            0x6368_616e_6765_7321,
        );
        let write = |out: std::io::BufWriter<&std::fs::File>| {
            let file = open_no_follow(&feed)
                .map_err(|e| MergeError::corrupt(format!("{}: {e}", feed.display())))?;
            crate::delta::changes::write_change_data(file, schema, out)
                .map(|(size, _)| size)
                .map_err(|e| match e {
                    crate::delta::changes::ChangeError::Uncastable(e) => MergeError::unsupported(e),
                    crate::delta::changes::ChangeError::Unreadable(e) => MergeError::corrupt(e),
                })
        };
        let format = crate::delta::changes::FORMAT;
        let ensured = self
            .merge_cache()?
            .derive(&table, &feed, format, &variant, write)
            .map_err(|e| refusal(e.in_slice(&what())))?;
        let Ensured::Merged { path, size, .. } = ensured else {
            return Err(Error::Corrupt(format!(
                "change data {}: not written",
                what()
            )));
        };
        *lock(&ms.progress.change_data) = Some((path.clone(), size));
        Ok((path, size))
    }

    /// Open the change data file of change feed `ms` in table schema `schema` for reading:
    /// written again if the cache evicted it since (its bytes are a pure function of the feed's).
    pub(in crate::fs) fn open_change_data(
        &self,
        ms: &MergedSlice,
        schema: &Arc<arrow_schema::Schema>,
    ) -> Result<std::fs::File> {
        for _ in 0..2 {
            let (path, size) = self.change_data(ms, schema)?;
            match open_no_follow(&path) {
                Ok(f) if f.metadata().is_ok_and(|m| m.len() == size) => return Ok(f),
                Ok(_) | Err(_) => *lock(&ms.progress.change_data) = None,
            }
        }
        Err(Error::Corrupt(format!(
            "change data {}: written again to a different file",
            crate::fs::join(&ms.partition, &ms.name)
        )))
    }

    /// Open the merged file of `ms` for reading: the cached file, merged again if the cache
    /// evicted it since (the bytes are a pure function of the inputs, so they are the same).
    pub(super) fn open_merged(
        &self,
        ms: &MergedSlice,
        path: &PathBuf,
        size: u64,
    ) -> Result<std::fs::File> {
        let open = |p: &PathBuf| open_no_follow(p);
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

/// Open a file of the merge cache for reading, not following a symbolic link.
fn open_no_follow(p: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(p)
}

/// Slices merged ahead of a reader going through a view in order, on a local disk.
pub(super) const READ_AHEAD: usize = 2;
/// The most merges ahead of readers running at once in a mount on a local disk (a thread
/// resolving a partition ahead of a reader counts as one).
const READ_AHEAD_RUNNING: usize = 2;
/// The same on an object store, where a merge mostly waits on its requests.
const READ_AHEAD_STORE: usize = 4;
const READ_AHEAD_RUNNING_STORE: usize = 4;

/// How far merges run ahead of readers ([`HudiFs::ahead_depth`]).
struct Depth {
    /// Slices merged ahead of a reader.
    slices: usize,
    /// Merges ahead running at once in the mount.
    running: usize,
}
/// The most partitions after the reader's that a read-ahead looks into (partitions without a
/// slice to merge hold it up no further).
const READ_AHEAD_PARTITIONS: usize = 4;

/// The slices (to merge) of a merged partition, in order.
fn slice_ids(part: &MergedPartition) -> Vec<u64> {
    part.entries
        .iter()
        .filter_map(|(_, n)| match n {
            MergedNode::Slice(id) => Some(*id),
            MergedNode::Base(_) => None,
        })
        .collect()
}

/// Take slice `ms` for a merge ahead of a reader: it is not merged (nor merging, nor refused)
/// and no merge ahead was started for it before.
fn claim(ms: &MergedSlice) -> bool {
    ms.state() == SliceState::NotMerged && !ms.progress.ahead.swap(true, Ordering::AcqRel)
}

/// What [`start_ahead`] did.
#[derive(Debug, PartialEq, Eq)]
enum Ahead {
    Started,
    /// Merged, merging, refused, or started ahead before.
    Skipped,
    /// As many merges ahead as the limit are running already.
    Full,
}

/// Start merging `ms` ahead of a reader on a thread of its own, if it can be claimed and fewer
/// than `limit` merges ahead are running (`running` counts them).
fn start_ahead(
    job: &MergeJob,
    running: &Arc<AtomicUsize>,
    limit: usize,
    ms: Arc<MergedSlice>,
) -> Ahead {
    if !claim(&ms) {
        return Ahead::Skipped;
    }
    if running.fetch_add(1, Ordering::AcqRel) >= limit {
        running.fetch_sub(1, Ordering::AcqRel);
        ms.progress.ahead.store(false, Ordering::Release);
        return Ahead::Full;
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
        return Ahead::Skipped;
    }
    Ahead::Started
}

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

#[cfg(test)]
mod tests {
    use super::super::walk_cmp;

    #[test]
    fn partitions_in_the_order_a_walk_visits_them() {
        let mut p = vec!["a-c/x", "a/b", "a", "a/b/c", "b", "a/a", "", "a-c"];
        p.sort_by(|x, y| walk_cmp(x, y));
        // Depth first, sub-directories (by name) before a directory's own files.
        assert_eq!(p, ["a/a", "a/b/c", "a/b", "a", "a-c/x", "a-c", "b", ""]);
    }
}
