//! Following writers: the timeline directory is watched with inotify (or polled where inotify is
//! unavailable), what changed is applied to the current snapshot incrementally, and the kernel's
//! cached entries of `latest/` are invalidated when it moves (PRODUCT.md §4).
//!
//! Applying a change parses only the new or changed instant files; instants none of whose files
//! changed are shared with the previous snapshot, decoded metadata included. Partitions an
//! instant touched are re-listed on next use; the others keep their listings.

use std::collections::BTreeSet;
use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant as Clock, SystemTime};

use crate::fs::{HudiFs, Snapshot};
use crate::kernel_cache::Deferred;
use hudifs_core::error::{Error, Result};
use hudifs_core::fsview::Context;
use hudifs_core::metadata;
use hudifs_core::timeline::{self, Action, InstantFile, State, TimelineDelta};

/// A timeline file modified more recently than this may still be being written: the polling
/// path waits for the next round before reading it (inotify waits for close-write instead).
pub const SETTLE: Duration = Duration::from_millis(50);
/// With inotify working, a full rescan of the directory still runs this often, as a safety net.
const RESCAN: Duration = Duration::from_secs(30);

/// What one applied change did.
pub struct Change {
    /// The snapshot before the change.
    pub previous: Arc<Snapshot>,
    /// Partitions whose visible files may have changed; `None`: possibly all.
    pub touched: Option<BTreeSet<String>>,
}

/// Re-read the timeline directory, and apply names that appeared or vanished. New files
/// modified less than `settle` ago wait for the next round.
///
/// A poll reads the directory once; only when that shows a change is it read until two
/// listings agree (see [`stable_listing`]).
pub fn poll_once(fs: &HudiFs, settle: Duration) -> Result<Option<Change>> {
    let snap = fs.snapshot();
    let dir = snap.cfg().timeline_dir.clone();
    let tl = &snap.ctx.timeline;
    // A directory whose mtime has not moved since a trusted listing holds the same names: an
    // idle poll costs one stat, not a read of the whole timeline.
    let started = Clock::now();
    let mtime = std::fs::metadata(&dir).and_then(|m| m.modified()).ok();
    let stamp = lock_poll(fs).clone();
    if let (Some(st), Some(m)) = (&stamp, mtime) {
        if st.mtime == m && st.trusted && !st.deferred && st.generation == snap.generation {
            return Ok(None);
        }
    }
    let first_seen = match (&stamp, mtime) {
        (Some(st), Some(m)) if st.mtime == m => st.first_seen,
        _ => started,
    };
    let remember = |deferred: bool, generation: u64| {
        if let Some(m) = mtime {
            *lock_poll(fs) = Some(PollStamp {
                mtime: m,
                first_seen,
                trusted: started.duration_since(first_seen) >= TRUST_MTIME_AFTER,
                deferred,
                generation,
            });
        }
    };
    let is_new =
        |n: &str| !tl.has_file(n) && !fs.is_ignored(n) && !n.starts_with("hoodie.properties");
    let mut first = timeline::list_files(&dir)?;
    let known_seen = first.iter().filter(|n| tl.has_file(n)).count();
    if known_seen == tl.file_count() && !first.iter().any(|n| is_new(n)) {
        remember(false, snap.generation);
        return Ok(None);
    }
    first.sort_unstable();
    let seen = timeline::stabilize(&dir, first)?;
    let mut changed = BTreeSet::new();
    let mut deferred = false;
    let now = SystemTime::now();
    for name in seen.iter().filter(|n| is_new(n)) {
        // The configuration is re-read on inotify events only (it changes with upgrades).
        let mtime = std::fs::metadata(dir.join(name)).and_then(|m| m.modified());
        let young = mtime.is_ok_and(|m| now.duration_since(m).unwrap_or_default() < settle);
        if young {
            deferred = true;
        } else {
            changed.insert(name.clone());
        }
    }
    let mut removed = BTreeSet::new();
    if seen.iter().filter(|n| tl.has_file(n)).count() < tl.file_count() {
        removed.extend(
            tl.file_names()
                .filter(|n| seen.binary_search_by(|s| s.as_str().cmp(n)).is_err())
                .map(str::to_string),
        );
    }
    let change = apply(fs, changed, removed)?;
    remember(deferred, fs.snapshot().generation);
    Ok(change)
}

/// How long after a directory's mtime was first seen a listing of it is trusted to show every
/// change that mtime stands for: a change made in the same tick of the file system's clock as
/// an earlier one leaves the mtime as it was (1 s covers the coarsest clocks in use).
const TRUST_MTIME_AFTER: Duration = Duration::from_secs(1);

/// What a poll of the timeline directory saw.
#[derive(Debug, Clone)]
pub(crate) struct PollStamp {
    /// The directory's mtime before the listing.
    mtime: SystemTime,
    /// When that mtime was first seen.
    first_seen: Clock,
    /// The listing began long enough after `first_seen` to have seen every change it covers.
    trusted: bool,
    /// Files too young to read were left for the next poll.
    deferred: bool,
    /// The snapshot the listing was applied to (a change applied by inotify in between, or a
    /// failed apply, makes the next poll list again).
    generation: u64,
}

fn lock_poll(fs: &HudiFs) -> std::sync::MutexGuard<'_, Option<PollStamp>> {
    fs.last_poll.lock().unwrap_or_else(|e| e.into_inner())
}

/// Apply timeline files that appeared or changed (`changed`) and vanished (`removed`).
pub fn apply(
    fs: &HudiFs,
    changed: BTreeSet<String>,
    removed: BTreeSet<String>,
) -> Result<Option<Change>> {
    let previous = fs.snapshot();
    let cfg = previous.ctx.cfg.clone();
    if changed
        .iter()
        .chain(&removed)
        .any(|n| n.starts_with("hoodie.properties"))
    {
        // The table's configuration changed (an upgrade?): read everything again.
        let next = Snapshot::read(fs.root(), fs.options(), previous.generation + 1)?;
        fs.begin_switch(None, next.generation);
        fs.install(next, &BTreeSet::new());
        return Ok(Some(Change {
            previous,
            touched: None,
        }));
    }
    let dir = &cfg.timeline_dir;
    let tl = &previous.ctx.timeline;
    let mut added: Vec<InstantFile> = Vec::new();
    let mut gone: BTreeSet<String> = BTreeSet::new();
    for name in changed {
        match timeline::parse_instant_file_name(&name, cfg.layout) {
            Some(f) if dir.join(&name).is_file() => added.push(f),
            Some(_) => {
                if tl.has_file(&name) {
                    gone.insert(name);
                }
            }
            None => {
                if timeline::looks_like_instant(&name) {
                    log::warn!(
                        "{}: not a timeline file name hudifs understands (layout {}); ignored",
                        dir.join(&name).display(),
                        cfg.layout
                    );
                }
                fs.ignore(name);
            }
        }
    }
    gone.extend(removed.into_iter().filter(|n| tl.has_file(n)));
    if added.is_empty() && gone.is_empty() {
        return Ok(None);
    }
    let (timeline, delta) = tl.apply(added, &gone, timeline::archive_has_files(&cfg));
    let ctx = Arc::new(previous.ctx.apply(Arc::new(timeline), &delta));
    let touched = if ctx.timeline.active_start != previous.ctx.timeline.active_start {
        None
    } else {
        touched_partitions(&ctx, &delta)
    };
    let partitions = match &touched {
        None => Arc::new(
            hudifs_core::listing::discover_partitions(&cfg)?
                .into_iter()
                .map(|p| Arc::from(p.as_str()))
                .collect(),
        ),
        Some(t) => with_new_partitions(&previous.partitions, t, &cfg.root),
    };
    let next = Snapshot::new(ctx, partitions, fs.options(), previous.generation + 1);
    fs.begin_switch(touched.as_ref(), next.generation);
    let all = BTreeSet::new();
    fs.install(next, touched.as_ref().unwrap_or(&all));
    if touched.is_none() {
        fs.invalidate_all_listings();
    }
    Ok(Some(Change { previous, touched }))
}

/// Partitions whose visible files a change of the timeline can change; `None` when that cannot
/// be told (unreadable metadata). The instants that came or changed count, and of those that
/// left or changed, completed writes and pending compactions (a compaction rolled back stops
/// merging its groups). Other instants that vanished changed nothing visible, and completed
/// writes that were archived move the active timeline's start, which the caller handles.
fn touched_partitions(ctx: &Context, delta: &TimelineDelta) -> Option<BTreeSet<String>> {
    let v6_mor = ctx.cfg.has_v6_logs();
    let mut out = BTreeSet::new();
    let left = delta.removed.iter().filter(|i| {
        i.is_completed_write()
            || (!i.is_completed() && matches!(i.action, Action::Compaction | Action::LogCompaction))
    });
    for inst in delta.added.iter().chain(left) {
        match (inst.state, inst.action.completes_as()) {
            (State::Completed, Action::Commit | Action::DeltaCommit | Action::ReplaceCommit) => {
                let m = inst.commit_metadata().ok()?;
                out.extend(m.write_stats.iter().map(|s| s.partition.clone()));
                out.extend(m.replaced.iter().map(|(p, _)| p.clone()));
            }
            (State::Completed, Action::Clean | Action::Rollback | Action::Restore) => {
                let v = inst.json().ok()?;
                if let Some(parts) = v.get("partitionMetadata").and_then(|p| p.as_object()) {
                    out.extend(parts.keys().cloned());
                }
            }
            (State::Completed, _) => {}
            // A pending compaction merges slices of the groups its plan covers.
            (_, _) if matches!(inst.action, Action::Compaction | Action::LogCompaction) => {
                let v = inst.plan_json().ok()?;
                let groups = metadata::compaction_plan_groups(&v).ok()?;
                out.extend(groups.into_iter().map(|(p, _)| p));
            }
            // A pending v6 deltacommit can hide logs of archived writers in the groups it targets.
            (_, Action::DeltaCommit) if v6_mor => match inst.commit_metadata() {
                Ok(m) if !m.write_stats.is_empty() => {
                    out.extend(m.write_stats.iter().map(|s| s.partition.clone()))
                }
                _ => return None,
            },
            _ => {}
        }
    }
    Some(out)
}

/// The partition list with the touched partitions that are new partition directories added.
fn with_new_partitions(
    current: &Arc<Vec<Arc<str>>>,
    touched: &BTreeSet<String>,
    root: &Path,
) -> Arc<Vec<Arc<str>>> {
    let new: Vec<&String> = touched
        .iter()
        .filter(|p| current.binary_search_by(|c| (**c).cmp(p.as_str())).is_err())
        .filter(|p| crate::partitions::is_partition_dir(root, p))
        .collect();
    if new.is_empty() {
        return current.clone();
    }
    let mut all: Vec<Arc<str>> = current.iter().cloned().collect();
    all.extend(new.into_iter().map(|p| Arc::from(p.as_str())));
    all.sort();
    all.dedup();
    Arc::new(all)
}

/// The name of the file system `dir` is on when that is a network or FUSE file system, whose
/// changes made elsewhere inotify does not report.
pub fn shared_file_system(dir: &Path) -> Option<&'static str> {
    let path = CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: a valid C string and a zeroed out-parameter of the right type.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(path.as_ptr(), &mut st) } != 0 {
        return None;
    }
    // Magic numbers from linux/magic.h and the file systems' sources.
    let name = match st.f_type as u64 {
        0x6969 => "NFS",
        0x517b => "SMB",
        0xfe53_4d42 => "SMB2",
        0xff53_4d42 => "CIFS",
        0x6573_5546 => "a FUSE file system",
        0x00c3_6400 => "CephFS",
        0x0102_1997 => "9P",
        0x5346_414f => "AFS",
        0x7375_7245 => "Coda",
        0x0116_1970 => "GFS2",
        0x7461_636f => "OCFS2",
        0x0bd0_0bd0 => "Lustre",
        0x4750_4653 => "GPFS",
        _ => return None,
    };
    Some(name)
}

/// An inotify watch on one directory.
struct Watch {
    fd: std::os::fd::OwnedFd,
}

impl Watch {
    fn new(dir: &Path) -> std::io::Result<Watch> {
        use std::os::fd::FromRawFd;
        // SAFETY: plain syscalls; the fd is owned from here on.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let fd = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let path = CString::new(dir.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::other("NUL in path"))?;
        let mask = libc::IN_CLOSE_WRITE
            | libc::IN_MOVED_TO
            | libc::IN_MOVED_FROM
            | libc::IN_DELETE
            | libc::IN_DELETE_SELF
            | libc::IN_MOVE_SELF;
        use std::os::fd::AsRawFd;
        // SAFETY: valid fd and C string.
        if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), mask) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Watch { fd })
    }

    /// Wait up to `timeout` for events; returns (changed names, removed names, rescan needed).
    fn wait(&self, timeout: Duration) -> std::io::Result<Option<Events>> {
        use std::os::fd::AsRawFd;
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            return if e.kind() == std::io::ErrorKind::Interrupted {
                Ok(None)
            } else {
                Err(e)
            };
        }
        if n == 0 {
            return Ok(None);
        }
        let (mut changed, mut removed, mut rescan) = (BTreeSet::new(), BTreeSet::new(), false);
        // Drain what is queued, then once more after a moment: a commit is several files.
        for round in 0..2 {
            if round == 1 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let mut buf = [0u8; 64 * 1024];
            loop {
                // SAFETY: reading into a buffer of the stated length.
                let len =
                    unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if len <= 0 {
                    break;
                }
                let mut off = 0usize;
                let header = std::mem::size_of::<libc::inotify_event>();
                while off + header <= len as usize {
                    // SAFETY: the kernel wrote a whole event at `off`.
                    let ev: libc::inotify_event =
                        unsafe { std::ptr::read_unaligned(buf[off..].as_ptr().cast()) };
                    let name_bytes = &buf[off + header..off + header + ev.len as usize];
                    let name = name_bytes.split(|b| *b == 0).next().unwrap_or(&[]);
                    let name = OsStr::from_bytes(name).to_string_lossy().to_string();
                    if ev.mask
                        & (libc::IN_Q_OVERFLOW
                            | libc::IN_DELETE_SELF
                            | libc::IN_MOVE_SELF
                            | libc::IN_IGNORED)
                        != 0
                    {
                        rescan = true;
                    } else if ev.mask & (libc::IN_DELETE | libc::IN_MOVED_FROM) != 0 {
                        changed.remove(&name);
                        removed.insert(name);
                    } else if !name.is_empty() {
                        removed.remove(&name);
                        changed.insert(name);
                    }
                    off += header + ev.len as usize;
                }
            }
        }
        Ok(Some(Events {
            changed,
            removed,
            rescan,
        }))
    }
}

/// What one wake-up of the watch saw.
struct Events {
    /// Names that appeared or were written.
    changed: BTreeSet<String>,
    /// Names that vanished.
    removed: BTreeSet<String>,
    /// The kernel's queue overflowed or the directory moved: rescan it.
    rescan: bool,
}

/// Follow the table until `stop` is set: apply changes as they come and tell the kernel which
/// cached entries of `latest/` went stale.
pub fn follow(
    fs: Arc<HudiFs>,
    notifier: Option<fuser::Notifier>,
    poll_interval: Duration,
    stop: Arc<AtomicBool>,
) {
    let dir = fs.snapshot().cfg().timeline_dir.clone();
    // HUDIFS_NO_INOTIFY=1 forces polling (to test and measure that path).
    let inotify = if std::env::var("HUDIFS_NO_INOTIFY").as_deref() == Ok("1") {
        Err(std::io::Error::other("disabled by HUDIFS_NO_INOTIFY"))
    } else if let Some(fs_name) = shared_file_system(&dir) {
        // inotify only sees changes made through this kernel: writers on other machines would
        // go unseen until the next rescan.
        Err(std::io::Error::other(format!(
            "the timeline is on {fs_name}, where inotify does not see writers on other machines"
        )))
    } else {
        Watch::new(&dir)
    };
    let watch = match inotify {
        Ok(w) => {
            log::info!("following {} with inotify", dir.display());
            Some(w)
        }
        Err(e) => {
            log::info!(
                "inotify unavailable for {} ({e}); polling every {} ms",
                dir.display(),
                poll_interval.as_millis()
            );
            None
        }
    };
    let mut last_rescan = Clock::now();
    let mut last_poll = Clock::now();
    // Names that left latest/, to invalidate once more (see kernel_cache.rs).
    let mut again = Deferred::default();
    while !stop.load(Ordering::SeqCst) {
        let due_in = again.next_in(Clock::now()).unwrap_or(Duration::MAX);
        // A panic while applying a change (malformed input reaching a library) must not stop
        // the mount from following the table: log it, keep the previous snapshot, go on.
        let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match &watch {
            Some(w) => match w.wait(poll_interval.min(Duration::from_millis(500)).min(due_in)) {
                Ok(Some(ev)) if !ev.rescan => apply(&fs, ev.changed, ev.removed),
                Ok(Some(_)) => poll_once(&fs, SETTLE),
                Ok(None) if last_rescan.elapsed() >= RESCAN => {
                    last_rescan = Clock::now();
                    poll_once(&fs, SETTLE)
                }
                Ok(None) => Ok(None),
                Err(e) => {
                    log::warn!("inotify failed ({e}); rescanning");
                    std::thread::sleep(poll_interval);
                    poll_once(&fs, SETTLE)
                }
            },
            None => {
                let next_poll = poll_interval.saturating_sub(last_poll.elapsed());
                std::thread::sleep(next_poll.min(due_in));
                if last_poll.elapsed() < poll_interval {
                    return Ok(None);
                }
                last_poll = Clock::now();
                poll_once(&fs, SETTLE)
            }
        }));
        let result = step.unwrap_or_else(|_| {
            Err(Error::Refused(
                "internal error while applying a timeline change".into(),
            ))
        });
        match result {
            Ok(Some(change)) => {
                log::debug!(
                    "timeline changed; latest is now {}",
                    fs.latest_instant().unwrap_or_default()
                );
                let inv = fs.latest_invalidations(&change);
                if let Some(n) = &notifier {
                    for (parent, name) in &inv.entries {
                        let _ = n.inval_entry(fuser::INodeNo(*parent), OsStr::new(name));
                    }
                    for ino in &inv.inodes {
                        let _ = n.inval_inode(fuser::INodeNo(*ino), 0, 0);
                    }
                    again.push(Clock::now(), &inv.entries);
                }
                fs.switched(&inv);
            }
            Ok(None) => {}
            Err(e) => log::warn!("refresh failed, keeping the previous snapshot: {e}"),
        }
        if let Some(n) = &notifier {
            for (parent, name) in again.due(Clock::now()) {
                let _ = n.inval_entry(fuser::INodeNo(parent), OsStr::new(&name));
            }
        }
    }
}
