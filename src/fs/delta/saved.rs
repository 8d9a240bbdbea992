//! `delta/`'s log kept across mounts (docs/SEMANTICS.md §11.5), on the file system's side: the
//! saved log's name and key, reading it as the table opens, taking it back in the first build,
//! building the log (and `iceberg/`) ahead of the first reader, and saving the log and its newest
//! checkpoint for the next mount. The saved form itself is `delta/saved.rs`.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, UNIX_EPOCH};

use hudifs_core::snapshot::Snapshot;
use hudifs_storage::sync::lock;

use crate::delta::{self, stats::FileFacts, DeltaLog, LogFile, TableFacts, Version};

use super::{Built, DeltaCache};
use crate::fs::HudiFs;

/// Whether a save of the log runs, and the log to save once it ends.
#[derive(Default)]
pub(super) struct Saving {
    running: bool,
    next: Option<Arc<Built>>,
}

/// What tells this build of hudifs apart from another: its version, and the size and time of
/// its executable (a saved log is reused only by the build that saved it). `None` where the
/// executable cannot be read (no log is saved or read).
fn build_id() -> Option<&'static str> {
    static ID: OnceLock<Option<String>> = OnceLock::new();
    ID.get_or_init(|| {
        let exe = std::env::current_exe().ok()?;
        let m = std::fs::metadata(&exe).ok()?;
        let t = m.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
        Some(format!(
            "hudifs {} {} {} {}",
            env!("CARGO_PKG_VERSION"),
            exe.display(),
            m.len(),
            t.as_nanos()
        ))
    })
    .as_deref()
}

/// What every version of the log of table `cfg` shares.
pub(super) fn table_facts(
    cfg: &hudifs_core::table::TableConfig,
    opts: &crate::fs::FsOptions,
) -> TableFacts {
    TableFacts {
        id: delta::log::table_id(&format!("hudi:{}", cfg.name)),
        name: cfg.name.clone(),
        // Without meta fields Hudi has no change feed (§5.5).
        change_feed: opts.delta_change_data && cfg.populate_meta_fields,
    }
}

/// The name of the saved log of table `cfg` in `store` in the merge cache, and the key it is
/// saved under: the build of hudifs, the table and everything else that decides a version's
/// bytes.
fn saved_name(
    store: &dyn hudifs_storage::Storage,
    cfg: &hudifs_core::table::TableConfig,
    opts: &crate::fs::FsOptions,
) -> Option<(String, String)> {
    let table = table_facts(cfg, opts);
    let key = format!(
        "{}\n{}\n{} {} {}\n{:?}\nread_optimized={} change_data={} zone={:?}",
        build_id()?,
        store.describe(&hudifs_storage::TablePath::root()),
        table.id,
        table.name,
        table.change_feed,
        cfg,
        opts.read_optimized,
        opts.delta_change_data,
        opts.zone,
    );
    let name = format!(
        "delta-{}.log",
        hudifs_storage::fnv::fnv1a_wide_hex(key.bytes(), 0x5bd1_e995_0f0e_0d0c)
    );
    Some((name, key))
}

/// The name `iceberg/`'s current manifests of table `cfg` in `store` are saved under in the
/// merge cache (`iceberg/table/saved.rs`), and the key: those of `delta/`'s saved log.
pub(in crate::fs) fn manifests_saved_name(
    store: &dyn hudifs_storage::Storage,
    cfg: &hudifs_core::table::TableConfig,
    opts: &crate::fs::FsOptions,
) -> Option<(String, String)> {
    let (name, key) = saved_name(store, cfg, opts)?;
    Some((manifests_name(&name), key))
}

/// The saved log `name` in merge cache directory `dir`, decoded under `key`: `None` where there
/// is none, else the log or why it cannot be used.
fn read_saved(
    dir: &std::path::Path,
    name: &str,
    key: &str,
) -> Option<std::result::Result<delta::saved::Saved, String>> {
    let started = std::time::Instant::now();
    let bytes = hudifs_merge::cache::read_side_in(dir, name)?;
    let read = crate::saved_form::unpack(&bytes).and_then(|b| delta::saved::decode(key, &b));
    log::debug!(
        "delta/: {name} read and decoded in {} ms",
        started.elapsed().as_millis()
    );
    Some(read)
}

/// The saved log of a table being opened, read and decoded on a thread of its own while the
/// table's timeline loads (only where there is one): its name, and the thread.
pub(super) type Preload = (
    String,
    std::thread::JoinHandle<Option<std::result::Result<delta::saved::Saved, String>>>,
);

/// Read the file `name` saved in the merge cache directory for the next mount, where there is
/// one, with `read`, on a thread called `thread` at a low priority (behind the work of opening
/// the table and serving what else is read): its name, and the thread.
pub(in crate::fs) fn preload<T: Send + 'static>(
    opts: &crate::fs::FsOptions,
    thread: &str,
    name: String,
    read: impl FnOnce(&std::path::Path, &str) -> T + Send + 'static,
) -> Option<(String, std::thread::JoinHandle<T>)> {
    let dir = opts.merge.dir();
    if !hudifs_merge::cache::has_side_in(&dir, &name) {
        return None;
    }
    let n = name.clone();
    let h = std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            crate::sys::priority::lower_this_thread();
            read(&dir, &n)
        })
        .ok()?;
    Some((name, h))
}

impl DeltaCache {
    /// What `delta/` keeps of table `cfg` in `store`, its saved log (SEMANTICS §11.5), if
    /// there is one, already being read.
    pub(in crate::fs) fn opening(
        store: &dyn hudifs_storage::Storage,
        cfg: &hudifs_core::table::TableConfig,
        opts: &crate::fs::FsOptions,
    ) -> DeltaCache {
        let cache = DeltaCache::default();
        if let Some((name, key)) = saved_name(store, cfg, opts) {
            *lock(&cache.preload) = preload(opts, "delta-preload", name, move |dir, name| {
                read_saved(dir, name, &key)
            });
        }
        cache
    }
}

/// The saves running on threads of their own, and how their ends are heard of.
static SAVES: (Mutex<usize>, std::sync::Condvar) = (Mutex::new(0), std::sync::Condvar::new());

/// Run `save` on a thread of its own, at a low priority (it must not slow the readers it
/// saves for); counted until it ends, for [`wait_for_saves`]. False when no thread could be
/// started.
pub(in crate::fs) fn spawn_save(save: impl FnOnce() + Send + 'static) -> bool {
    *lock(&SAVES.0) += 1;
    let spawned = std::thread::Builder::new()
        .name("delta-save".into())
        .spawn(move || {
            struct Done;
            impl Drop for Done {
                fn drop(&mut self) {
                    *lock(&SAVES.0) -= 1;
                    SAVES.1.notify_all();
                }
            }
            let _done = Done;
            crate::sys::priority::lower_this_thread();
            save();
        });
    if spawned.is_err() {
        *lock(&SAVES.0) -= 1;
    }
    spawned.is_ok()
}

/// Wait until the saves of `delta/`'s log for the next mount end (at most `limit`): a daemon
/// about to exit lets them finish.
pub fn wait_for_saves(limit: Duration) {
    let until = std::time::Instant::now() + limit;
    let mut running = lock(&SAVES.0);
    while *running > 0 {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            log::info!("delta/: {} saves cut short at exit", *running);
            return;
        }
        running = SAVES
            .1
            .wait_timeout(running, left)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// The name of `iceberg/`'s current manifests saved beside the saved log `log`.
fn manifests_name(log: &str) -> String {
    format!("{}.manifests", log.strip_suffix(".log").unwrap_or(log))
}

/// The name of the newest checkpoint saved beside the saved log `log`.
fn checkpoint_name(log: &str) -> String {
    format!("{}.checkpoint", log.strip_suffix(".log").unwrap_or(log))
}

/// A saved log's facts not yet handed to the versions taken back: for each version from the
/// first saved, each file it adds' record count and schema (what
/// [`delta::saved::Saved::added_facts`] has), and the schemas (the footer facts of a file of
/// each).
pub(super) struct SavedFacts {
    first: u64,
    added: Vec<Vec<Option<(i64, usize)>>>,
    schemas: Vec<Arc<FileFacts>>,
}

impl HudiFs {
    /// Build `delta/`'s log now, on a thread of its own at a low priority, if the last mount of
    /// the table saved one (SEMANTICS §11.5): a table read through `delta/` or `iceberg/` before
    /// is likely read so again, and its first reader then finds the log built, or being built.
    /// A table never read so costs nothing.
    pub fn warm_delta(self: &Arc<Self>) {
        let fs = self.clone();
        let _ = std::thread::Builder::new()
            .name("delta-warm".into())
            .spawn(move || {
                crate::sys::priority::lower_this_thread();
                let snap = fs.snapshot();
                let Some((name, _)) = fs.delta_saved_name(&snap) else {
                    return;
                };
                // Looked for without opening the cache (a mount that never reads `merged/`,
                // `delta/` or `iceberg/` opens none).
                let dir = fs.opts.merge.dir();
                let saved = hudifs_merge::cache::has_side_in(&dir, &name);
                if saved {
                    match fs.delta_log() {
                        // `iceberg/` too, where a mount before read it (and saved its current
                        // manifests, being read since the table opened).
                        Ok(_) if fs.iceberg_preloaded() => {
                            fs.warm_iceberg();
                            return;
                        }
                        Ok(_) => {}
                        Err(e) => log::info!("delta/: the log is not built ahead: {e}"),
                    }
                }
                // The saved manifests of `iceberg/` are not held for a reader that may never come.
                fs.forget_iceberg_preload();
            });
    }

    /// How many versions the first build of `delta/`'s log took from the log the last mount of
    /// the table saved (SEMANTICS §11.5).
    pub fn delta_versions_taken(&self) -> usize {
        self.delta.taken.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The name `iceberg/`'s current manifests are saved under in the merge cache, and the key
    /// (`iceberg/table/saved.rs`): those of `delta/`'s saved log.
    pub(in crate::fs) fn iceberg_saved_name(&self) -> Option<(String, String)> {
        manifests_saved_name(&*self.store, &self.snapshot().cfg, &self.opts)
    }

    fn delta_saved_name(&self, snap: &Snapshot) -> Option<(String, String)> {
        saved_name(&*self.store, &snap.cfg, &self.opts)
    }

    /// The log the last mount of this table saved, as the log of an earlier snapshot (what
    /// [`HudiFs::build_delta_log`] keeps of it is what it would keep of its own), with the facts
    /// of its files; `None` where there is none, or it cannot be used (logged).
    pub(super) fn load_saved_delta(
        &self,
        snap: &Snapshot,
        table: &TableFacts,
    ) -> Option<(Arc<Built>, SavedFacts)> {
        let (name, key) = self.delta_saved_name(snap)?;
        let cache = self.merge_cache().ok()?;
        let started = std::time::Instant::now();
        // Read while the table was opened (`Preload`), else now.
        let preloaded = lock(&self.delta.preload).take().and_then(|p| {
            let (for_name, h) = p;
            (for_name == name).then(|| h.join().ok()).flatten()
        });
        let read = match preloaded {
            Some(r) => r,
            None => read_saved(cache.dir(), &name, &key),
        };
        let mut saved = match read {
            Some(Ok(s)) => s,
            Some(Err(e)) => {
                log::info!("delta/: the saved log {name} is not used: {e}");
                return None;
            }
            None => return None,
        };
        // The schemas, from the footer of a file of each, saved with it.
        let mut schemas = Vec::new();
        for (p, footer) in saved.samples.iter().zip(std::mem::take(&mut saved.footers)) {
            match self.footer_facts(footer) {
                Ok(f) => schemas.push(f),
                Err(e) => {
                    log::info!("delta/: the saved log {name} is not used: {p}: {e}");
                    return None;
                }
            }
        }
        let added = std::mem::take(&mut saved.added_facts);
        let count = saved.len();
        let versions = saved.versions(&schemas)?;
        let first = versions.first().map_or(0, |v| v.number);
        let log = DeltaLog::new(u64::MAX, table.clone(), versions, None);
        // The newest checkpoint written, if it is one of this log's versions as it is now.
        let ck = checkpoint_name(&name);
        if let Some(bytes) = cache.read_side(&ck) {
            let taken = log.checkpoint_versions().iter().rev().find_map(|n| {
                let v = log.version_of(LogFile::Checkpoint(*n))?;
                delta::saved::decode_checkpoint(&key, table, v, &bytes)
                    .ok()
                    .map(|b| (*n, b))
            });
            match taken {
                Some((n, b)) => log.adopt_checkpoint(n, Arc::new(b)),
                None => log::info!("delta/: the saved checkpoint {ck} is not used"),
            }
        }
        log::info!(
            "delta/: the saved log {name}: {count} versions read in {} ms",
            started.elapsed().as_millis()
        );
        let built = Built {
            log,
            failed: None,
            numbers: Vec::new(),
        };
        let facts = SavedFacts {
            first,
            added,
            schemas,
        };
        Some((Arc::new(built), facts))
    }

    /// Save `built` for the next mount of the table, on a thread of its own where the mount is
    /// shared (else now); a save asked for while one runs follows it with the newest log.
    pub(super) fn save_delta_log(&self, built: Arc<Built>) {
        let Some(fs) = self.this.upgrade() else {
            self.write_saved_delta(&built);
            return;
        };
        {
            let mut s = lock(&self.delta.saving);
            s.next = Some(built);
            if s.running {
                return;
            }
            s.running = true;
        }
        let spawned = spawn_save(move || loop {
            let next = {
                let mut s = lock(&fs.delta.saving);
                let n = s.next.take();
                if n.is_none() {
                    s.running = false;
                }
                n
            };
            match next {
                Some(b) => fs.write_saved_delta(&b),
                None => break,
            }
        });
        if !spawned {
            lock(&self.delta.saving).running = false;
        }
    }

    /// Save checkpoint `f` (of version `v`, just written) for the next mount, where it is the
    /// newest of the log: on a thread of its own where the mount is shared.
    pub(super) fn save_delta_checkpoint(
        &self,
        built: &Built,
        f: LogFile,
        v: &Arc<Version>,
        bytes: &Arc<Vec<u8>>,
    ) {
        if built.log.version_of(LogFile::Last).map(|l| l.number) != Some(v.number) {
            return;
        }
        let snap = self.snapshot();
        let Some((name, key)) = self.delta_saved_name(&snap) else {
            return;
        };
        let (table, v, bytes) = (built.log.table().clone(), v.clone(), bytes.clone());
        let write = move |fs: &HudiFs| {
            let Ok(cache) = fs.merge_cache() else {
                return;
            };
            let saved = delta::saved::encode_checkpoint(&key, &table, &v, &bytes);
            let ck = checkpoint_name(&name);
            match cache.write_side(&ck, &saved) {
                Ok(()) => log::info!("delta/: {} saved in {ck}", f.name()),
                Err(e) => log::info!("delta/: {} is not saved: {e}", f.name()),
            }
        };
        match self.this.upgrade() {
            Some(fs) => {
                spawn_save(move || write(&fs));
            }
            None => write(self),
        }
    }

    /// Write `built`'s versions, their files' facts and its checkpoints to the merge cache.
    fn write_saved_delta(&self, built: &Built) {
        let snap = self.snapshot();
        let Some((name, key)) = self.delta_saved_name(&snap) else {
            return;
        };
        let Ok(cache) = self.merge_cache() else {
            return;
        };
        let started = std::time::Instant::now();
        let facts = |p: &str| lock(&self.delta.facts).get(p).cloned();
        let footer = |f: &FileFacts| self.schema_footer(f);
        let Some(bytes) = delta::saved::encode(&key, &built.log.versions, &facts, &footer) else {
            log::debug!("delta/: the log is not saved: a file without footer facts");
            return;
        };
        let bytes = crate::saved_form::pack(&bytes);
        match cache.write_side(&name, &bytes) {
            Ok(()) => log::info!(
                "delta/: {} versions saved in {name} ({} bytes, {} ms)",
                built.log.versions.len(),
                bytes.len(),
                started.elapsed().as_millis()
            ),
            Err(e) => log::info!("delta/: the log is not saved: {e}"),
        }
    }

    /// The footer facts of the files version `v` (taken from the saved log) adds, from what the
    /// log saved of them (each file's record count and schema; its statistics are its `add`'s).
    pub(super) fn adopt_saved_facts(&self, v: &Version, saved: &SavedFacts) {
        let Some(added) = v
            .number
            .checked_sub(saved.first)
            .and_then(|i| saved.added.get(usize::try_from(i).ok()?))
        else {
            return;
        };
        let mut facts = lock(&self.delta.facts);
        for (f, ff) in v.added.iter().zip(added) {
            let (Some(ff), Some(stats)) = (ff, &f.stats) else {
                continue;
            };
            if facts.contains_key(&f.path) {
                continue;
            }
            if let Some(ff) = delta::saved::facts_of(stats, *ff, &saved.schemas) {
                facts.insert(f.path.clone(), Arc::new(ff));
            }
        }
    }
}
