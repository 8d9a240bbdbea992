//! The torture test: mount a table while `hudifs-writer` commits to it, and read the mount with
//! several reader threads at once — walk `latest/` and `as_of/<T>/`, open and read every file
//! to the end, hold files open across the cleaner — then check everything any reader saw
//! against the writer's log:
//!
//! 1. every listed file belongs to a write whose completed instant file was renamed into place
//!    before the listing ended (so never a file of an inflight, crashed or rolled-back write);
//! 2. every file read is complete: the bytes, their hash, and for base files the Parquet
//!    footer's row count are those the writer logged;
//! 3. one walk of `latest/` shows the file set of exactly one snapshot the writer logged, the
//!    one `user.hudi.instant` names (or, when the walk crossed a switch, each directory shows
//!    one snapshot between the xattrs read before and after);
//! 4. `as_of/<T>` of an instant older than every pending one lists the same files every time
//!    (the writer's final view of T), or is refused once a clean retained only newer commits;
//! 5. files held open read to the end, intact, after the cleaner deleted them on disk;
//! 6. `as_of/` lists only completed instants; `timeline/` files always decode;
//! 7. the daemon answers throughout (a watchdog; no reader stuck) and is alive at the end.
//!
//! `torture_short` runs in the suite (about 20 s); `scripts/torture` runs `torture_long`
//! (`TORTURE_SECONDS`, `TORTURE_SEED`, `TORTURE_VARIANT`, `TORTURE_READERS`) and prints the counts.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

/// How long after the writer logged an `as_of` view as final a reader must see it so.
const FINAL_SLACK_MS: i64 = 3000;
/// How far `latest/` may lag behind the writer before it counts as a violation.
const STALE_LIMIT_MS: i64 = 10_000;
/// A thread making no progress for this long means the daemon hangs.
const HANG_MS: i64 = 20_000;
/// Most files the holder keeps open at once.
const MAX_HELD: usize = 200;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

fn fnv1a(bytes: &[u8]) -> String {
    hudifs_testkit::generator::sim::file_hash(bytes)
}

/// Rows in a Parquet file's footer.
fn parquet_rows(bytes: &[u8]) -> Result<u64, String> {
    let n = bytes.len();
    if n < 12 || &bytes[..4] != b"PAR1" || &bytes[n - 4..] != b"PAR1" {
        return Err(format!("not a complete Parquet file ({n} bytes)"));
    }
    let len = u32::from_le_bytes([bytes[n - 8], bytes[n - 7], bytes[n - 6], bytes[n - 5]]) as usize;
    if len + 12 > n {
        return Err(format!("footer length {len} exceeds the file"));
    }
    parquet::file::metadata::ParquetMetaDataReader::decode_metadata(&bytes[n - 8 - len..n - 8])
        .map(|m| m.file_metadata().num_rows() as u64)
        .map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------------
// What the readers saw.

#[derive(Debug, Clone)]
enum DirList {
    Names(Vec<String>),
    Err(i32),
}

/// One walk of a view root: its top-level entries and each subdirectory's files.
#[derive(Debug, Clone)]
struct Walk {
    start: i64,
    end: i64,
    x1: Option<String>,
    x2: Option<String>,
    /// `Err` when the view root itself could not be read.
    top: Result<Vec<String>, i32>,
    /// Partition path → its listing.
    dirs: BTreeMap<String, DirList>,
}

impl Walk {
    fn files(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (p, l) in &self.dirs {
            if let DirList::Names(n) = l {
                out.extend(n.iter().map(|f| format!("{p}/{f}")));
            }
        }
        out
    }
}

/// What a read of a whole file gave (the bytes themselves are not kept).
#[derive(Debug, Clone, PartialEq)]
struct Content {
    len: u64,
    hash: String,
    /// The Parquet footer's row count, for base files.
    rows: Option<Result<u64, String>>,
}

impl Content {
    fn of(path: &str, bytes: &[u8]) -> Content {
        let is_base = !path.rsplit('/').next().unwrap_or_default().starts_with('.');
        Content {
            len: bytes.len() as u64,
            hash: fnv1a(bytes),
            rows: is_base.then(|| parquet_rows(bytes)),
        }
    }
}

#[derive(Debug, Clone)]
enum Seen {
    Latest(Walk),
    AsOf {
        t: String,
        walk: Walk,
    },
    AsOfDir {
        end: i64,
        names: Vec<String>,
    },
    Read {
        /// `None` for latest/, else the as_of time.
        as_of: Option<String>,
        path: String,
        listed_start: i64,
        open_start: i64,
        end: i64,
        result: Result<Content, (bool, i32)>,
        xattr_instant: Option<String>,
    },
    Held {
        path: String,
        opened: i64,
        read_at: i64,
        deleted: bool,
        result: Result<Content, i32>,
    },
    Timeline {
        name: String,
        result: Result<usize, i32>,
    },
}

/// Shared state of the reader threads.
struct Shared {
    mnt: PathBuf,
    table: PathBuf,
    stop: AtomicBool,
    seen: Mutex<Vec<Seen>>,
}

struct Progress {
    name: String,
    last: AtomicI64,
}

impl Progress {
    fn tick(&self) {
        self.last.store(now_ms(), Ordering::Relaxed);
    }
}

/// `user.hudi.instant` of a path (copied: `common::xattr` returns a 64 KiB buffer, and the
/// readers keep hundreds of thousands of these).
fn instant_xattr(p: &Path) -> Option<String> {
    common::xattr(p, "user.hudi.instant").map(|s| s.as_str().to_owned())
}

fn list_dir(p: &Path) -> Result<Vec<(String, bool)>, i32> {
    let rd = std::fs::read_dir(p).map_err(|e| errno(&e))?;
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| errno(&e))?;
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        out.push((e.file_name().to_string_lossy().to_string(), is_dir));
    }
    out.sort();
    Ok(out)
}

fn walk(root: &Path, prog: &Progress) -> Walk {
    let start = now_ms();
    let x1 = instant_xattr(root);
    let mut dirs = BTreeMap::new();
    let top = list_dir(root).map(|entries| {
        for (name, is_dir) in &entries {
            prog.tick();
            if !*is_dir {
                continue;
            }
            let l = match list_dir(&root.join(name)) {
                Ok(v) => DirList::Names(v.into_iter().map(|(n, _)| n).collect()),
                Err(e) => DirList::Err(e),
            };
            dirs.insert(name.clone(), l);
        }
        entries.into_iter().map(|(n, _)| n).collect()
    });
    let x2 = instant_xattr(root);
    Walk {
        start,
        end: now_ms(),
        x1,
        x2,
        top,
        dirs,
    }
}

/// The whole file, or `(whether it was opened, errno)`.
fn read_all(p: &Path) -> Result<Vec<u8>, (bool, i32)> {
    let mut f = std::fs::File::open(p).map_err(|e| (false, errno(&e)))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).map_err(|e| (true, errno(&e)))?;
    Ok(buf)
}

/// A tiny PRNG for the readers' choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        if n == 0 {
            0
        } else {
            self.0 % n
        }
    }
}

fn read_view_files(
    sh: &Shared,
    prog: &Progress,
    view_root: &Path,
    as_of: Option<&str>,
    w: &Walk,
    out: &mut Vec<Seen>,
) {
    for path in w.files() {
        if sh.stop.load(Ordering::Relaxed) {
            return;
        }
        prog.tick();
        let p = view_root.join(&path);
        let open_start = now_ms();
        let result = read_all(&p).map(|b| Content::of(&path, &b));
        let end = now_ms();
        let xattr_instant = if result.is_ok() {
            instant_xattr(&p)
        } else {
            None
        };
        out.push(Seen::Read {
            as_of: as_of.map(str::to_string),
            path,
            listed_start: w.start,
            open_start,
            end,
            result,
            xattr_instant,
        });
    }
}

fn reader(sh: Arc<Shared>, prog: Arc<Progress>, seed: u64) {
    let mut rng = Rng(seed | 1);
    let latest = sh.mnt.join("latest");
    while !sh.stop.load(Ordering::Relaxed) {
        prog.tick();
        let mut out = Vec::new();
        match rng.next(10) {
            0..=4 => {
                let w = walk(&latest, &prog);
                if rng.next(2) == 0 {
                    read_view_files(&sh, &prog, &latest, None, &w, &mut out);
                }
                out.push(Seen::Latest(w));
            }
            5..=8 => {
                let dir = sh.mnt.join("as_of");
                if let Ok(entries) = list_dir(&dir) {
                    let names: Vec<String> = entries.into_iter().map(|(n, _)| n).collect();
                    out.push(Seen::AsOfDir {
                        end: now_ms(),
                        names: names.clone(),
                    });
                    if !names.is_empty() {
                        let i = match rng.next(3) {
                            0 => 0,
                            1 => rng.next(names.len() as u64) as usize,
                            _ => names.len() - 1 - rng.next(names.len().min(5) as u64) as usize,
                        };
                        let t = names[i].clone();
                        let root = dir.join(&t);
                        let w = walk(&root, &prog);
                        if rng.next(2) == 0 {
                            read_view_files(&sh, &prog, &root, Some(&t), &w, &mut out);
                        }
                        out.push(Seen::AsOf { t, walk: w });
                    }
                }
            }
            _ => {
                let dir = sh.mnt.join("timeline");
                if let Ok(entries) = list_dir(&dir) {
                    if !entries.is_empty() {
                        let (name, _) = &entries[rng.next(entries.len() as u64) as usize];
                        prog.tick();
                        let result = read_all(&dir.join(name)).map(|b| b.len()).map_err(|e| e.1);
                        out.push(Seen::Timeline {
                            name: name.clone(),
                            result,
                        });
                    }
                }
            }
        }
        sh.seen.lock().unwrap().extend(out);
    }
}

/// Keeps files of `latest/` open and reads each to the end once the cleaner deleted it on disk
/// (and the rest when stopping).
fn holder(sh: Arc<Shared>, prog: Arc<Progress>) {
    let latest = sh.mnt.join("latest");
    let mut held: BTreeMap<String, (std::fs::File, i64)> = BTreeMap::new();
    let read_held = |f: &mut std::fs::File, path: &str| -> Result<Content, i32> {
        f.rewind().map_err(|e| errno(&e))?;
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).map_err(|e| errno(&e))?;
        Ok(Content::of(path, &buf))
    };
    while !sh.stop.load(Ordering::Relaxed) {
        prog.tick();
        let w = walk(&latest, &prog);
        for path in w.files() {
            if held.len() >= MAX_HELD {
                break;
            }
            if held.contains_key(&path) {
                continue;
            }
            if let Ok(f) = std::fs::File::open(latest.join(&path)) {
                held.insert(path, (f, now_ms()));
            }
        }
        let mut out = vec![Seen::Latest(w)];
        let gone: Vec<String> = held
            .keys()
            .filter(|p| !sh.table.join(p).exists())
            .cloned()
            .collect();
        for path in gone {
            prog.tick();
            if let Some((mut f, opened)) = held.remove(&path) {
                let read_at = now_ms();
                let result = read_held(&mut f, &path);
                out.push(Seen::Held {
                    path,
                    opened,
                    read_at,
                    deleted: true,
                    result,
                });
            }
        }
        sh.seen.lock().unwrap().extend(out);
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut out = Vec::new();
    for (path, (mut f, opened)) in held {
        prog.tick();
        let deleted = !sh.table.join(&path).exists();
        let read_at = now_ms();
        let result = read_held(&mut f, &path);
        out.push(Seen::Held {
            path,
            opened,
            read_at,
            deleted,
            result,
        });
    }
    sh.seen.lock().unwrap().extend(out);
}

/// Asks the mount something cheap every 100 ms; returns the slowest answer in ms.
fn watchdog(sh: Arc<Shared>, prog: Arc<Progress>, slowest: Arc<AtomicI64>) {
    while !sh.stop.load(Ordering::Relaxed) {
        let t0 = now_ms();
        let _ = instant_xattr(&sh.mnt.join("latest"));
        let _ = std::fs::metadata(sh.mnt.join("as_of"));
        let dt = now_ms() - t0;
        slowest.fetch_max(dt, Ordering::Relaxed);
        prog.tick();
        std::thread::sleep(Duration::from_millis(100));
    }
}

// ---------------------------------------------------------------------------------------------
// The writer's log.

struct FileInfo {
    writer: String,
    published: i64,
    rows: Option<u64>,
    size: u64,
    hash: String,
    base: bool,
}

struct Snapshot {
    instant: Option<String>,
    published: i64,
    files: BTreeSet<String>,
}

impl Snapshot {
    fn partitions(&self) -> BTreeSet<String> {
        self.files
            .iter()
            .filter_map(|f| f.rsplit_once('/').map(|(p, _)| p.to_string()))
            .collect()
    }
    fn in_partition(&self, p: &str) -> Vec<String> {
        self.files
            .iter()
            .filter_map(|f| f.rsplit_once('/'))
            .filter(|(fp, _)| *fp == p)
            .map(|(_, n)| n.to_string())
            .collect()
    }
}

struct Clean {
    retain: String,
    /// When its requested file was renamed in: from then on it may delete what it does not
    /// retain, and the daemon refuses time travel before `retain`.
    requested: i64,
    completed: i64,
}

#[derive(Default)]
struct Log {
    files: HashMap<String, FileInfo>,
    snapshots: Vec<Snapshot>,
    /// T → (when the writer logged it final, its files).
    finals: HashMap<String, (i64, BTreeSet<String>)>,
    cleans: Vec<Clean>,
    savepoints: BTreeSet<String>,
    /// Completed write instants and savepoints → when their completed file was renamed.
    as_of_names: HashMap<String, i64>,
    /// Deleted files → when their deleting instant completed.
    deleted: HashMap<String, i64>,
    ops: u64,
    counts: BTreeMap<String, u64>,
    end_seen: bool,
}

fn parse_log(text: &str) -> Log {
    let mut log = Log::default();
    // (instant, action, state) → ms before the rename.
    let mut renames: HashMap<(String, String, String), i64> = HashMap::new();
    let evs: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    for e in &evs {
        match e["ev"].as_str().unwrap_or_default() {
            "timeline" => {
                let key = (s(&e["instant"]), s(&e["action"]), s(&e["state"]));
                let before = e["before"].as_i64().unwrap_or(0);
                if key.2 == "completed"
                    && ["commit", "deltacommit", "replacecommit", "savepoint"]
                        .contains(&key.1.as_str())
                {
                    log.as_of_names.entry(key.0.clone()).or_insert(before);
                }
                renames.insert(key, before);
            }
            "commit" => {
                let published = e["published"].as_i64().unwrap_or(0);
                for f in e["files"].as_array().into_iter().flatten() {
                    log.files.insert(
                        s(&f["path"]),
                        FileInfo {
                            writer: s(&e["instant"]),
                            published,
                            rows: f["rows"].as_u64(),
                            size: f["size"].as_u64().unwrap_or(0),
                            hash: s(&f["hash"]),
                            base: f["kind"] == "base",
                        },
                    );
                }
            }
            "snapshot" => log.snapshots.push(Snapshot {
                instant: e["instant"].as_str().map(str::to_string),
                published: e["published"].as_i64().unwrap_or(0),
                files: e["files"].as_array().into_iter().flatten().map(s).collect(),
            }),
            "final" => {
                log.finals.insert(
                    s(&e["instant"]),
                    (
                        e["t"].as_i64().unwrap_or(0),
                        e["files"].as_array().into_iter().flatten().map(s).collect(),
                    ),
                );
            }
            "clean" => {
                let completed = e["published"].as_i64().unwrap_or(0);
                let key = (s(&e["instant"]), "clean".into(), "requested".into());
                log.cleans.push(Clean {
                    retain: s(&e["earliest_commit_to_retain"]),
                    requested: renames.get(&key).copied().unwrap_or(completed),
                    completed,
                });
                for f in e["deleted"].as_array().into_iter().flatten() {
                    log.deleted.insert(s(f), completed);
                }
            }
            "rollback" => {
                let key = (s(&e["instant"]), "rollback".into(), "completed".into());
                let completed = renames.get(&key).copied().unwrap_or(0);
                for f in e["deleted"].as_array().into_iter().flatten() {
                    log.deleted.insert(s(f), completed);
                }
            }
            "savepoint" => {
                log.savepoints.insert(s(&e["instant"]));
            }
            "end" => {
                log.end_seen = true;
                log.ops = e["ops"].as_u64().unwrap_or(0);
                if let Some(c) = e["counts"].as_object() {
                    for (k, v) in c {
                        log.counts.insert(k.clone(), v.as_u64().unwrap_or(0));
                    }
                }
            }
            _ => {}
        }
    }
    log
}

// ---------------------------------------------------------------------------------------------
// The checks.

#[derive(Default)]
struct Report {
    latest_walks: u64,
    latest_spanning: u64,
    as_of_walks: u64,
    as_of_final: u64,
    as_of_refused: u64,
    /// Final as_of walks that listed less while a clean not retaining them was under way.
    as_of_clean_races: u64,
    as_of_dirs: u64,
    timeline_reads: u64,
    dirs_read: u64,
    files_opened: u64,
    bytes_read: u64,
    gone_before_open: u64,
    held_read_after_delete: u64,
    /// ... and read back intact.
    held_intact_after_delete: u64,
    held_read: u64,
    max_stale_ms: i64,
    slowest_watchdog_ms: i64,
    /// (kind, what happened).
    violations: Vec<(&'static str, String)>,
}

impl Report {
    fn bad(&mut self, kind: &'static str, msg: String) {
        self.violations.push((kind, msg));
    }

    /// Violations by kind.
    fn kinds(&self) -> BTreeMap<&'static str, Vec<&str>> {
        let mut out: BTreeMap<&'static str, Vec<&str>> = BTreeMap::new();
        for (k, m) in &self.violations {
            out.entry(k).or_default().push(m);
        }
        out
    }
}

/// The newest clean completed at or before `at` retains only commits at or after its bound;
/// `T` older than that (and not a savepoint) is refused.
fn refused_by_clean(log: &Log, t: &str, at: i64) -> bool {
    clean_not_retaining(log, t, at, |c| c.completed)
}

/// A clean that does not retain `T` was requested at or before `at`: from then on it may be
/// deleting files of `T`'s snapshot, and the daemon may refuse `as_of/T` (it does as soon as it
/// sees the clean's plan) — or, in the moment before it sees it, list what is left.
fn clean_under_way(log: &Log, t: &str, at: i64) -> bool {
    clean_not_retaining(log, t, at, |c| c.requested)
}

/// Whether a clean that does not retain `T` (not a savepoint) had reached, by `at`, the moment
/// `when` tells.
fn clean_not_retaining(log: &Log, t: &str, at: i64, when: fn(&Clean) -> i64) -> bool {
    !log.savepoints.contains(t)
        && log
            .cleans
            .iter()
            .any(|c| when(c) > 0 && when(c) <= at && t < c.retain.as_str())
}

fn check_listed(log: &Log, rep: &mut Report, what: &str, files: &BTreeSet<String>, end: i64) {
    for f in files {
        match log.files.get(f) {
            None => rep.bad("uncommitted-file-listed", format!(
                "{what} listed {f}, which no completed write wrote (inflight, crashed, rolled back or not a data file)"
            )),
            Some(i) if i.published > end => rep.bad("file-listed-before-commit", format!(
                "{what} listed {f} by {} before its completed instant file was renamed into place ({} ms early)",
                i.writer,
                i.published - end
            )),
            Some(_) => {}
        }
    }
}

fn check_latest(log: &Log, rep: &mut Report, w: &Walk) {
    rep.latest_walks += 1;
    rep.dirs_read += 1 + w.dirs.len() as u64;
    let top = match &w.top {
        Ok(t) => t,
        Err(e) => {
            return rep.bad(
                "latest-unreadable",
                format!("latest/ could not be listed: errno {e}"),
            )
        }
    };
    let files = w.files();
    check_listed(log, rep, "latest/", &files, w.end);
    if w.x1 > w.x2 {
        return rep.bad(
            "latest-xattr-backwards",
            format!(
                "user.hudi.instant of latest/ went backwards during a walk: {:?} then {:?}",
                w.x1, w.x2
            ),
        );
    }
    let cands: Vec<(usize, &Snapshot)> = log
        .snapshots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.published <= w.end && s.instant >= w.x1 && s.instant <= w.x2)
        .collect();
    let exact = cands
        .iter()
        .rev()
        .find(|(_, s)| s.files == files && (w.x1 != w.x2 || s.instant == w.x1));
    if let Some((i, _)) = exact {
        if let Some(next) = log.snapshots.get(i + 1) {
            if next.published < w.start {
                let stale = w.start - next.published;
                rep.max_stale_ms = rep.max_stale_ms.max(stale);
                if stale > STALE_LIMIT_MS {
                    rep.bad("latest-stale", format!(
                        "latest/ showed a snapshot {stale} ms after the writer replaced it (instant {:?})",
                        w.x1
                    ));
                }
            }
        }
        return;
    }
    // No single snapshot: the walk crossed a switch. Each directory must still show one.
    let distinct: BTreeSet<&BTreeSet<String>> = cands.iter().map(|(_, s)| &s.files).collect();
    let crossed = w.x1 != w.x2 || distinct.len() > 1;
    let top_dirs: BTreeSet<String> = top.iter().cloned().collect();
    let mut ok = crossed && cands.iter().any(|(_, s)| s.partitions() == top_dirs);
    for (p, l) in &w.dirs {
        if let DirList::Err(e) = l {
            if *e != libc::ENOENT {
                rep.bad(
                    "latest-unreadable",
                    format!("latest/{p} could not be listed: errno {e}"),
                );
            }
        }
        ok &= match l {
            DirList::Names(n) if !n.is_empty() => {
                cands.iter().any(|(_, s)| s.in_partition(p) == *n)
            }
            _ => cands.iter().any(|(_, s)| !s.partitions().contains(p)),
        };
    }
    if ok {
        rep.latest_spanning += 1;
        return;
    }
    let nearest = cands
        .iter()
        .min_by_key(|(_, s)| s.files.symmetric_difference(&files).count())
        .map(|(_, s)| s);
    let diff = nearest
        .map(|s| {
            format!(
                "nearest snapshot {:?}: missing {:?}, extra {:?}",
                s.instant,
                s.files.difference(&files).take(4).collect::<Vec<_>>(),
                files.difference(&s.files).take(4).collect::<Vec<_>>()
            )
        })
        .unwrap_or_else(|| "no snapshot published yet".into());
    rep.bad("latest-mixes-snapshots", format!(
        "a walk of latest/ ({}..{} ms, user.hudi.instant {:?} then {:?}) matches no snapshot the writer logged: {diff}",
        w.start, w.end, w.x1, w.x2
    ));
}

fn check_as_of(log: &Log, rep: &mut Report, t: &str, w: &Walk) {
    rep.as_of_walks += 1;
    rep.dirs_read += 1 + w.dirs.len() as u64;
    let final_view = log
        .finals
        .get(t)
        .filter(|(at, _)| w.start >= at + FINAL_SLACK_MS);
    match &w.top {
        Err(e) => {
            rep.as_of_refused += 1;
            // Refused: only when a clean retained newer commits (or the time is not final yet
            // and vanished, which a completed instant never does).
            if !clean_under_way(log, t, w.end) {
                rep.bad(
                    "as-of-refused",
                    format!("as_of/{t} was refused (errno {e}) though no clean had moved past it"),
                );
            }
        }
        Ok(_) => {
            let files = w.files();
            check_listed(log, rep, &format!("as_of/{t}"), &files, w.end);
            if w.x1.as_deref() != Some(t) && w.x1.is_some() {
                rep.bad("as-of-xattr", format!("as_of/{t} names instant {:?}", w.x1));
            }
            if let Some((_, expected)) = final_view {
                rep.as_of_final += 1;
                if refused_by_clean(log, t, w.start - FINAL_SLACK_MS) {
                    rep.bad("as-of-served-after-clean", format!(
                        "as_of/{t} was still listed {} ms after a clean retained only newer commits (guarantee 5: it must be refused; its files may be gone)",
                        w.start
                            - log
                                .cleans
                                .iter()
                                .filter(|c| t < c.retain.as_str())
                                .map(|c| c.completed)
                                .min()
                                .unwrap_or(w.start)
                    ));
                } else if files != *expected && clean_under_way(log, t, w.end) {
                    rep.as_of_clean_races += 1;
                } else if files != *expected {
                    rep.bad("as-of-changed", format!(
                        "as_of/{t}, final since the writer logged it, changed: missing {:?}, extra {:?}",
                        expected.difference(&files).take(4).collect::<Vec<_>>(),
                        files.difference(expected).take(4).collect::<Vec<_>>()
                    ));
                }
            }
        }
    }
}

fn check_content(log: &Log, rep: &mut Report, what: &str, path: &str, c: &Content) {
    rep.files_opened += 1;
    rep.bytes_read += c.len;
    let Some(info) = log.files.get(path) else {
        return; // reported by the listing checks
    };
    if c.len != info.size || c.hash != info.hash {
        return rep.bad(
            "file-content",
            format!(
                "{what} {path}: read {} bytes (hash {}), the writer wrote {} (hash {})",
                c.len, c.hash, info.size, info.hash
            ),
        );
    }
    if info.base {
        match &c.rows {
            Some(Ok(n)) if Some(*n) == info.rows => {}
            Some(Ok(n)) => rep.bad(
                "file-content",
                format!(
                    "{what} {path}: footer says {n} rows, the write recorded {:?}",
                    info.rows
                ),
            ),
            Some(Err(e)) => rep.bad("file-content", format!("{what} {path}: {e}")),
            None => rep.bad(
                "file-content",
                format!("{what} {path}: not read as a base file"),
            ),
        }
    }
}

fn analyse(log: &Log, seen: &[Seen], rep: &mut Report) {
    for s in seen {
        match s {
            Seen::Latest(w) => check_latest(log, rep, w),
            Seen::AsOf { t, walk } => check_as_of(log, rep, t, walk),
            Seen::AsOfDir { end, names } => {
                rep.as_of_dirs += 1;
                for n in names {
                    match log.as_of_names.get(n) {
                        Some(at) if *at <= *end => {}
                        Some(at) => rep.bad(
                            "as-of-dir",
                            format!("as_of/ listed {n} {} ms before it completed", at - end),
                        ),
                        None => rep.bad(
                            "as-of-dir",
                            format!("as_of/ listed {n}, which is no completed write or savepoint"),
                        ),
                    }
                }
            }
            Seen::Read {
                as_of,
                path,
                listed_start,
                open_start,
                end,
                result,
                xattr_instant,
            } => {
                let what = match as_of {
                    None => "latest/".to_string(),
                    Some(t) => format!("as_of/{t}/"),
                };
                // A view that could still change may drop a file between listing and open.
                let final_listing = as_of.as_ref().is_some_and(|t| {
                    log.finals
                        .get(t)
                        .is_some_and(|(at, _)| *listed_start >= at + FINAL_SLACK_MS)
                });
                match result {
                    Ok(c) => {
                        check_content(log, rep, &format!("reading {what}"), path, c);
                        if let (Some(x), Some(info)) = (xattr_instant, log.files.get(path)) {
                            if *x != info.writer {
                                rep.bad(
                                    "file-xattr",
                                    format!(
                                        "{what}{path}: user.hudi.instant {x}, written by {}",
                                        info.writer
                                    ),
                                );
                            }
                        }
                    }
                    Err((true, e)) => rep.bad(
                        if *e == libc::ENOENT {
                            "open-file-enoent"
                        } else {
                            "read-error"
                        },
                        format!("{what}{path}: opened, then reading failed with errno {e}"),
                    ),
                    Err((false, e)) if *e == libc::ENOENT => {
                        // Legitimate when the view moved on before the open: latest/ switched
                        // to a snapshot without the file, or the file was deleted (cleaned) and
                        // the as_of view is no longer served.
                        let written = log.files.get(path).map_or(i64::MAX, |i| i.published);
                        let switched = match as_of {
                            Some(_) => !final_listing,
                            None => log.snapshots.iter().any(|s| {
                                s.published >= written
                                    && s.published <= *end
                                    && !s.files.contains(path)
                            }),
                        };
                        // An as_of view may be refused once a clean retains only newer commits:
                        // legitimate between listing and open, a violation when the listing
                        // itself came after the clean.
                        let refused_at = |at: i64| {
                            as_of
                                .as_deref()
                                .is_some_and(|t| refused_by_clean(log, t, at))
                        };
                        let may_be_refused_at = |at: i64| {
                            as_of
                                .as_deref()
                                .is_some_and(|t| clean_under_way(log, t, at))
                        };
                        let cleaned = log.deleted.get(path).is_some_and(|d| *d <= *end);
                        let when = format!("listed at {listed_start}, opened at {open_start}");
                        if switched {
                            rep.gone_before_open += 1;
                        } else if refused_at(*listed_start - FINAL_SLACK_MS) {
                            rep.bad(
                                "as-of-served-after-clean",
                                format!(
                                    "{what}{path} was listed after a clean retained only newer commits ({when}: ENOENT, deleted on disk: {cleaned})"
                                ),
                            );
                        } else if may_be_refused_at(*end) || cleaned {
                            rep.gone_before_open += 1;
                        } else {
                            rep.bad(
                                "listed-file-missing",
                                format!(
                                    "{what}{path}: open failed with ENOENT though the file is in the view and on disk ({when})"
                                ),
                            );
                        }
                    }
                    Err((false, e)) => rep.bad(
                        "read-error",
                        format!("{what}{path}: open failed with errno {e}"),
                    ),
                }
            }
            Seen::Held {
                path,
                opened,
                read_at,
                deleted,
                result,
            } => {
                rep.held_read += 1;
                if *deleted {
                    rep.held_read_after_delete += 1;
                }
                match result {
                    Ok(c) => {
                        let before = rep.violations.len();
                        check_content(log, rep, "held open", path, c);
                        if *deleted && rep.violations.len() == before {
                            rep.held_intact_after_delete += 1;
                        }
                    }
                    Err(e) => rep.bad(if *e == libc::ENOENT { "open-file-enoent" } else { "open-file-unreadable" }, format!(
                        "{path}: opened at {opened}, reading at {read_at} (deleted on disk: {deleted}) failed with errno {e}"
                    )),
                }
            }
            Seen::Timeline { name, result } => {
                rep.timeline_reads += 1;
                match result {
                    Ok(_) => {}
                    // Rollbacks delete the inflight files of failed writes.
                    Err(e) if *e == libc::ENOENT => {}
                    Err(e) => rep.bad(
                        "timeline-unreadable",
                        format!("timeline/{name}: read failed with errno {e}"),
                    ),
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The run.

#[derive(Debug, Clone)]
struct Config {
    seconds: u64,
    seed: u64,
    version: u32,
    cow: bool,
    readers: usize,
    ops_per_sec: f64,
}

impl Config {
    fn variant(&self) -> String {
        format!("v{}-{}", self.version, if self.cow { "cow" } else { "mor" })
    }
}

fn pid_alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    !stat.is_empty() && !stat.contains(") Z ")
}

fn kill(pid: u32) {
    let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
}

fn stuck(progress: &[Arc<Progress>]) -> Option<String> {
    let now = now_ms();
    progress
        .iter()
        .find(|p| now - p.last.load(Ordering::Relaxed) > HANG_MS)
        .map(|p| {
            format!(
                "{} made no progress for {} ms: the daemon hangs",
                p.name,
                now - p.last.load(Ordering::Relaxed)
            )
        })
}

fn spawn_writer(cfg: &Config, table: &Path, log: &Path) -> Child {
    let mut cmd = Command::new(hudifs_testkit::mount::binary("hudifs-writer"));
    cmd.arg("--table")
        .arg(table)
        .arg("--log")
        .arg(log)
        .arg("--seed")
        .arg(cfg.seed.to_string())
        .arg("--duration-ms")
        .arg((cfg.seconds * 1000).to_string())
        .arg("--version")
        .arg(cfg.version.to_string())
        .arg("--ops-per-sec")
        .arg(cfg.ops_per_sec.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if cfg.cow {
        cmd.arg("--cow");
    }
    cmd.spawn().unwrap()
}

/// Run one torture round; `None` when FUSE is not available here.
fn torture(cfg: &Config) -> Option<Report> {
    if !common::fuse_available() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let table = dir.path().join("table");
    let log_path = dir.path().join("writer.log");
    let mut rep = Report::default();
    let mut writer = spawn_writer(cfg, &table, &log_path);
    let t0 = Instant::now();
    while !table.join(".hoodie/hoodie.properties").exists() {
        if t0.elapsed() > Duration::from_secs(30) || writer.try_wait().unwrap().is_some() {
            let _ = writer.kill();
            panic!("hudifs-writer did not create the table");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let guard = common::MountGuard::mount(&table, &["--poll-interval", "50"]);
    let pid = guard.pid.expect("the daemon's pid");
    let shared = Arc::new(Shared {
        mnt: guard.path().to_path_buf(),
        table: table.clone(),
        stop: AtomicBool::new(false),
        seen: Mutex::new(Vec::new()),
    });
    let mut progress = Vec::new();
    let mut threads = Vec::new();
    let new_progress = |name: String| {
        Arc::new(Progress {
            name,
            last: AtomicI64::new(now_ms()),
        })
    };
    for i in 0..cfg.readers {
        let p = new_progress(format!("reader {i}"));
        progress.push(p.clone());
        let sh = shared.clone();
        let seed = cfg.seed.wrapping_mul(31).wrapping_add(i as u64 + 1);
        threads.push(std::thread::spawn(move || reader(sh, p, seed)));
    }
    let p = new_progress("holder".into());
    progress.push(p.clone());
    let sh = shared.clone();
    threads.push(std::thread::spawn(move || holder(sh, p)));
    let p = new_progress("watchdog".into());
    progress.push(p.clone());
    let sh = shared.clone();
    let slowest = Arc::new(AtomicI64::new(0));
    let sl = slowest.clone();
    threads.push(std::thread::spawn(move || watchdog(sh, p, sl)));

    // Run while the writer writes, then one more round against the final state.
    let deadline = Instant::now() + Duration::from_secs(cfg.seconds + 120);
    let mut hang = None;
    let status = loop {
        if let Some(s) = writer.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = writer.kill();
            rep.bad("writer", "hudifs-writer did not finish in time".into());
            break None;
        }
        if hang.is_none() {
            hang = stuck(&progress);
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    if let Some(s) = status {
        if !s.success() {
            let mut err = String::new();
            if let Some(mut e) = writer.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            rep.bad("writer", format!("hudifs-writer failed ({s}): {err}"));
        }
    }
    let end = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < end && hang.is_none() {
        hang = stuck(&progress);
        std::thread::sleep(Duration::from_millis(100));
    }
    shared.stop.store(true, Ordering::SeqCst);
    let join_deadline = Instant::now() + Duration::from_millis(HANG_MS as u64);
    while !threads.iter().all(|t| t.is_finished()) {
        if hang.is_none() {
            hang = stuck(&progress);
        }
        if hang.is_some() || Instant::now() > join_deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let alive = pid_alive(pid);
    if let Some(h) = &hang {
        rep.bad("daemon-hang", h.clone());
    }
    if !threads.iter().all(|t| t.is_finished()) {
        if hang.is_none() {
            rep.bad(
                "daemon-hang",
                "reader threads did not stop: the daemon hangs".into(),
            );
        }
        // Unblock them: a dead daemon aborts the connection.
        kill(pid);
    }
    for t in threads {
        let _ = t.join();
    }
    if !alive {
        rep.bad(
            "daemon-died",
            format!("the daemon (pid {pid}) died: {}", guard.log_text()),
        );
    }
    if guard.log_text().contains("panicked") {
        rep.bad(
            "daemon-panicked",
            format!("the daemon panicked: {}", guard.log_text()),
        );
    }
    rep.slowest_watchdog_ms = slowest.load(Ordering::Relaxed);

    let log = parse_log(&std::fs::read_to_string(&log_path).unwrap_or_default());
    if !log.end_seen {
        rep.bad("writer", "the writer's log has no end".into());
    }
    let seen = std::mem::take(&mut *shared.seen.lock().unwrap());
    analyse(&log, &seen, &mut rep);
    drop(guard);
    print_report(cfg, &log, &rep);
    if unexcused(&rep, "known") > 0 {
        // Keep the evidence.
        let keep = std::env::temp_dir().join(format!(
            "hudifs-torture-{}-seed{}-{}.log",
            cfg.variant(),
            cfg.seed,
            std::process::id()
        ));
        if std::fs::copy(&log_path, &keep).is_ok() {
            eprintln!("writer log kept at {}", keep.display());
        }
    }
    Some(rep)
}

fn print_report(cfg: &Config, log: &Log, rep: &Report) {
    let counts: Vec<String> = log.counts.iter().map(|(k, v)| format!("{k} {v}")).collect();
    println!(
        "torture {} seed {}: {} s of writes, {} operations ({}), {} readers + holder + watchdog",
        cfg.variant(),
        cfg.seed,
        cfg.seconds,
        log.ops,
        counts.join(", "),
        cfg.readers
    );
    println!(
        "  listings: {} (latest/ {} of which {} across a switch, as_of {} of which {} final, {} refused and {} caught by a clean under way, as_of/ {}); directories read {}",
        rep.latest_walks + rep.as_of_walks + rep.as_of_dirs,
        rep.latest_walks,
        rep.latest_spanning,
        rep.as_of_walks,
        rep.as_of_final,
        rep.as_of_refused,
        rep.as_of_clean_races,
        rep.as_of_dirs,
        rep.dirs_read
    );
    println!(
        "  files opened and read: {} ({} bytes); gone before open: {}; timeline files read: {}",
        rep.files_opened, rep.bytes_read, rep.gone_before_open, rep.timeline_reads
    );
    println!(
        "  held open: {} read, {} of them after the cleaner deleted them ({} intact)",
        rep.held_read, rep.held_read_after_delete, rep.held_intact_after_delete
    );
    println!(
        "  latest/ lag behind the writer at most {} ms; slowest watchdog call {} ms",
        rep.max_stale_ms, rep.slowest_watchdog_ms
    );
    println!("  violations: {}", rep.violations.len());
    for (kind, msgs) in rep.kinds() {
        let known = if KNOWN_DAEMON_BUGS.contains(&kind) {
            " (known daemon bug, reported)"
        } else {
            ""
        };
        println!("    {kind}{known}: {}", msgs.len());
        for m in msgs.iter().take(3) {
            println!("      {m}");
        }
    }
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Daemon bugs this test found, reported and not fixed yet (see the `repro` tests below, which
/// are ignored until then). `torture_short` prints them but fails only on other kinds;
/// `scripts/torture` counts them unless `TORTURE_ALLOW=known`. Empty this list once fixed.
///
/// - `open-file-enoent`: a file opened through `latest/` fails to read (ENOENT) once `latest/`
///   moved on: the kernel's GETATTR during the read is answered from the current snapshot, which
///   no longer has the file (guarantee 4).
/// - `as-of-served-after-clean`: `as_of/<T>` cached as final keeps being listed after a clean
///   retained only newer commits, with files the cleaner deleted (guarantee 5).
/// - `latest-mixes-snapshots`: rarely (about once in a 2-minute run), `latest/` shows a timeline
///   state that never existed — a compaction that completed after a write, without the write
///   (named by `user.hudi.instant` as the write before). The daemon lists the timeline
///   directory while the writer renames completed instant files into it, and one readdir can
///   miss an earlier rename and see a later one (ext4 htree order); the next poll repairs it.
const KNOWN_DAEMON_BUGS: &[&str] = &[];

/// Violations not excused by `allow` (`known` stands for [`KNOWN_DAEMON_BUGS`]).
fn unexcused(rep: &Report, allow: &str) -> usize {
    let allowed: BTreeSet<&str> = allow
        .split(',')
        .flat_map(|a| match a.trim() {
            "known" => KNOWN_DAEMON_BUGS.to_vec(),
            "" => Vec::new(),
            k => vec![k],
        })
        .collect();
    rep.violations
        .iter()
        .filter(|(k, _)| !allowed.contains(k))
        .count()
}

/// The short form in the suite: merge-on-read on both timeline layouts, about 10 s each.
#[test]
fn torture_short() {
    for (version, seed) in [(9, 1), (6, 2)] {
        let cfg = Config {
            seconds: 9,
            seed,
            version,
            cow: false,
            readers: 3,
            ops_per_sec: 8.0,
        };
        let Some(rep) = torture(&cfg) else { return };
        let bad = unexcused(&rep, &env_or("TORTURE_ALLOW", "known".to_string()));
        assert_eq!(bad, 0, "violations (see the report above)");
        assert!(
            rep.latest_walks > 10 && rep.as_of_walks > 5 && rep.files_opened > 50,
            "the readers hardly read anything"
        );
    }
}

/// The long form: `scripts/torture [SECONDS] [SEED] [VARIANT|all]`.
#[test]
#[ignore]
fn torture_long() {
    let seed: u64 = env_or("TORTURE_SEED", 1);
    let variants = ["v9-mor", "v6-mor", "v8-mor", "v6-cow", "v9-cow"];
    let chosen: String = env_or("TORTURE_VARIANT", String::new());
    let chosen: Vec<&str> = match chosen.as_str() {
        "" => vec![variants[(seed % variants.len() as u64) as usize]],
        "all" => variants.to_vec(),
        v => v.split(',').collect(),
    };
    let allow: String = env_or("TORTURE_ALLOW", String::new());
    let mut bad = 0;
    for v in chosen {
        let (version, cow) = match v {
            "v6-mor" => (6, false),
            "v8-mor" => (8, false),
            "v9-mor" => (9, false),
            "v6-cow" => (6, true),
            "v9-cow" => (9, true),
            other => {
                panic!("unknown variant {other} (v6-mor, v8-mor, v9-mor, v6-cow, v9-cow, all)")
            }
        };
        let cfg = Config {
            seconds: env_or("TORTURE_SECONDS", 120),
            seed,
            version,
            cow,
            readers: env_or("TORTURE_READERS", 4),
            ops_per_sec: env_or("TORTURE_OPS_PER_SEC", 5.0),
        };
        let Some(rep) = torture(&cfg) else { return };
        bad += unexcused(&rep, &allow);
    }
    assert_eq!(bad, 0, "violations (see the report above)");
}

// ---------------------------------------------------------------------------------------------
// Minimal reproducers of what the torture test found, on tables written step by step.

mod repro {
    use super::*;
    use hudifs_core::table::TableType;
    use hudifs_core::timeline::Action;
    use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};

    const START: i64 = hudifs_testkit::generator::DEMO_CLOCK_START_MS;

    /// A copy-on-write table with one file group written at `t1` and updated at `t2`; returns
    /// the writer, the partition, the group, and the file names of t1 and t2.
    fn two_versions(root: &Path) -> (TableWriter, String, String, String) {
        let spec =
            TableSpec::new("repro", TableType::CopyOnWrite, 9).partitioned_by(&["city"], true);
        let mut w = TableWriter::create(root, spec, START).unwrap();
        let p = w.partition_path(&["paris"]).unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        let f = t.insert(&p, &rows(1, 50)).unwrap();
        t.complete().unwrap();
        let first = w.group_files(&p, &f)[0].clone();
        (w, p, f, first)
    }

    /// Guarantee 4: a file opened through latest/ reads to the end after latest/ moved on and
    /// the cleaner deleted it.
    pub fn open_file_outlives_latest(root: &Path) -> Result<(), String> {
        let (mut w, p, f, first) = two_versions(root);
        let m = common::MountGuard::mount(root, &["--poll-interval", "50"]);
        let path = m.path().join("latest").join(&p).join(&first);
        let expected = std::fs::read(root.join(&p).join(&first)).unwrap();
        let mut file = std::fs::File::open(&path).map_err(|e| format!("open: {e}"))?;
        let mut t = w.begin(Action::Commit).unwrap();
        t.update(&p, &f, &rows_with_ids(2, &[1000])).unwrap();
        let t2 = t.complete().unwrap();
        w.clean(&t2, &[(p.as_str(), first.as_str())]).unwrap();
        assert!(!root.join(&p).join(&first).exists());
        // The daemon sees the new snapshot; the kernel's attributes of the file expire (1 s).
        std::thread::sleep(Duration::from_millis(1500));
        let mut got = Vec::new();
        file.read_to_end(&mut got).map_err(|e| {
            format!(
                "reading {first} after latest/ moved on and the cleaner deleted it: {e}\n\
                 daemon log:\n{}",
                m.log_text()
            )
        })?;
        if got != expected {
            return Err(format!(
                "read {} bytes, expected {}",
                got.len(),
                expected.len()
            ));
        }
        Ok(())
    }

    /// Guarantee 5: as_of/<t1> is refused once a clean retains only commits from t2 on — also
    /// when it was listed (and cached as final) before the clean.
    pub fn as_of_refused_after_clean(root: &Path) -> Result<(), String> {
        let (mut w, p, f, first) = two_versions(root);
        let t1 = w.completed_writes().keys().next().unwrap().clone();
        let mut t = w.begin(Action::Commit).unwrap();
        t.update(&p, &f, &rows_with_ids(2, &[1000])).unwrap();
        let t2 = t.complete().unwrap();
        let m = common::MountGuard::mount(root, &["--poll-interval", "50"]);
        let view = m.path().join("as_of").join(&t1);
        let before = common::walk_files(&view).map_err(|e| format!("as_of/{t1}: {e}"))?;
        assert_eq!(before, vec![format!("{p}/{first}")]);
        w.clean(&t2, &[(p.as_str(), first.as_str())]).unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        match common::walk_files(&view) {
            Err(_) => Ok(()),
            Ok(files) => {
                let readable = files
                    .iter()
                    .map(|f| (f, std::fs::read(view.join(f)).map(|b| b.len())))
                    .map(|(f, r)| format!("{f}: {r:?}"))
                    .collect::<Vec<_>>();
                Err(format!(
                    "as_of/{t1} still lists {readable:?} after clean retained {t2} (on disk: {})",
                    root.join(&p).join(&first).exists()
                ))
            }
        }
    }
}

#[test]
fn open_file_reads_to_the_end_after_latest_moves_on_and_the_cleaner_deletes_it() {
    if !common::fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    if let Err(e) = repro::open_file_outlives_latest(dir.path()) {
        panic!("{e}");
    }
}

#[test]
fn as_of_listed_before_a_clean_is_refused_after_it() {
    if !common::fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    if let Err(e) = repro::as_of_refused_after_clean(dir.path()) {
        panic!("{e}");
    }
}

/// Each check fires on what it guards against (synthetic observations against a synthetic
/// writer log), and stays quiet on legitimate ones.
#[test]
fn the_checks_catch_violations() {
    let bytes = b"log file bytes".to_vec();
    let hash = fnv1a(&bytes);
    let info = |writer: &str, published: i64| FileInfo {
        writer: writer.into(),
        published,
        rows: None,
        size: bytes.len() as u64,
        hash: hash.clone(),
        base: false,
    };
    let mut log = Log::default();
    log.files
        .insert("p/.a_1.log.1_0-1-1".into(), info("1", 100));
    log.files
        .insert("p/.b_2.log.1_0-1-2".into(), info("2", 200));
    log.files
        .insert("q/.c_3.log.1_0-1-3".into(), info("3", 300));
    let snap = |instant: &str, published: i64, files: &[&str]| Snapshot {
        instant: Some(instant.into()),
        published,
        files: files.iter().map(|f| f.to_string()).collect(),
    };
    log.snapshots = vec![
        snap("1", 100, &["p/.a_1.log.1_0-1-1"]),
        snap("2", 200, &["p/.a_1.log.1_0-1-1", "p/.b_2.log.1_0-1-2"]),
        snap("3", 300, &["q/.c_3.log.1_0-1-3"]),
    ];
    log.finals.insert(
        "2".into(),
        (
            250,
            ["p/.a_1.log.1_0-1-1", "p/.b_2.log.1_0-1-2"]
                .map(String::from)
                .into(),
        ),
    );
    log.cleans.push(Clean {
        retain: "3".into(),
        requested: 9_000,
        completed: 10_000,
    });
    log.deleted.insert("p/.a_1.log.1_0-1-1".into(), 10_000);
    log.as_of_names = [
        ("1".to_string(), 100),
        ("2".to_string(), 200),
        ("3".to_string(), 300),
    ]
    .into();

    let walk = |start: i64, x1: &str, x2: &str, dirs: &[(&str, &[&str])]| Walk {
        start,
        end: start + 10,
        x1: Some(x1.into()),
        x2: Some(x2.into()),
        top: Ok(dirs.iter().map(|(d, _)| d.to_string()).collect()),
        dirs: dirs
            .iter()
            .map(|(d, n)| {
                (
                    d.to_string(),
                    DirList::Names(n.iter().map(|s| s.to_string()).collect()),
                )
            })
            .collect(),
    };
    let kinds = |seen: Vec<Seen>| -> Vec<&'static str> {
        let mut rep = Report::default();
        analyse(&log, &seen, &mut rep);
        rep.violations.iter().map(|(k, _)| *k).collect()
    };
    let read =
        |as_of: Option<&str>, path: &str, listed: i64, result: Result<Vec<u8>, (bool, i32)>| {
            let result = result.map(|b| Content::of(path, &b));
            Seen::Read {
                as_of: as_of.map(String::from),
                path: path.into(),
                listed_start: listed,
                open_start: listed + 20,
                end: listed + 30,
                result,
                xattr_instant: None,
            }
        };
    let ab: &[&str] = &[".a_1.log.1_0-1-1", ".b_2.log.1_0-1-2"];

    // Legitimate: one snapshot, a walk across the switch from 2 to 3, a read, a refusal after
    // the clean, an ENOENT after latest/ moved on.
    assert_eq!(
        kinds(vec![Seen::Latest(walk(250, "2", "2", &[("p", ab)]))]),
        Vec::<&str>::new()
    );
    // (p listed at root under snapshot 2, gone by the time it is opened under snapshot 3.)
    let mut across = walk(290, "2", "3", &[("p", ab)]);
    across.dirs.insert("p".into(), DirList::Err(libc::ENOENT));
    assert_eq!(kinds(vec![Seen::Latest(across)]), Vec::<&str>::new());
    assert_eq!(
        kinds(vec![read(
            None,
            "p/.b_2.log.1_0-1-2",
            250,
            Ok(bytes.clone())
        )]),
        Vec::<&str>::new()
    );
    let mut refused = walk(20_000, "2", "2", &[]);
    refused.top = Err(libc::ENOENT);
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: refused.clone()
        }]),
        Vec::<&str>::new()
    );
    assert_eq!(
        kinds(vec![read(
            None,
            "p/.b_2.log.1_0-1-2",
            290,
            Err((false, libc::ENOENT))
        )]),
        Vec::<&str>::new()
    );
    // While the clean is under way (requested, not completed), as_of/2 may be refused, or list
    // what the cleaner left in the moment before the daemon saw the clean's plan.
    let mut during = walk(9_500, "2", "2", &[]);
    during.top = Err(libc::ENOENT);
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: during
        }]),
        Vec::<&str>::new()
    );
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: walk(9_500, "2", "2", &[("p", &[".b_2.log.1_0-1-2"])])
        }]),
        Vec::<&str>::new()
    );
    // ... and a file listed in it just before may then fail to open.
    assert_eq!(
        kinds(vec![read(
            Some("2"),
            "p/.b_2.log.1_0-1-2",
            8_990,
            Err((false, libc::ENOENT))
        )]),
        Vec::<&str>::new()
    );
    assert_eq!(
        kinds(vec![read(
            Some("2"),
            "p/.b_2.log.1_0-1-2",
            5_000,
            Err((false, libc::ENOENT))
        )]),
        ["listed-file-missing"]
    );

    // Violations.
    assert_eq!(
        kinds(vec![Seen::Latest(walk(
            250,
            "2",
            "2",
            &[("p", &[".a_1.log.1_0-1-1", ".x_9.log.1_0-1-9"])]
        ))]),
        ["uncommitted-file-listed", "latest-mixes-snapshots"]
    );
    assert_eq!(
        kinds(vec![Seen::Latest(walk(150, "1", "1", &[("p", ab)]))]),
        ["file-listed-before-commit", "latest-mixes-snapshots"]
    );
    // Files of snapshot 2 and 3 in one walk whose xattr stayed at 3.
    assert_eq!(
        kinds(vec![Seen::Latest(walk(
            350,
            "3",
            "3",
            &[("p", ab), ("q", &[".c_3.log.1_0-1-3"])]
        ))]),
        ["latest-mixes-snapshots"]
    );
    assert_eq!(
        kinds(vec![Seen::Latest(walk(30_000, "2", "2", &[("p", ab)]))]),
        ["latest-stale"]
    );
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: walk(5_000, "2", "2", &[("p", &[".a_1.log.1_0-1-1"])])
        }]),
        ["as-of-changed"]
    );
    let mut early_refusal = refused;
    early_refusal.start = 5_000;
    early_refusal.end = 5_010;
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: early_refusal
        }]),
        ["as-of-refused"]
    );
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: walk(20_000, "2", "2", &[("p", ab)])
        }]),
        ["as-of-served-after-clean"]
    );
    let mut corrupt = bytes.clone();
    corrupt[0] ^= 1;
    assert_eq!(
        kinds(vec![read(None, "p/.b_2.log.1_0-1-2", 250, Ok(corrupt))]),
        ["file-content"]
    );
    assert_eq!(
        kinds(vec![read(
            None,
            "p/.b_2.log.1_0-1-2",
            250,
            Ok(bytes[..4].to_vec())
        )]),
        ["file-content"]
    );
    assert_eq!(
        kinds(vec![read(
            None,
            "q/.c_3.log.1_0-1-3",
            350,
            Err((false, libc::ENOENT))
        )]),
        ["listed-file-missing"]
    );
    assert_eq!(
        kinds(vec![read(
            None,
            "q/.c_3.log.1_0-1-3",
            350,
            Err((true, libc::EIO))
        )]),
        ["read-error"]
    );
    assert_eq!(
        kinds(vec![Seen::Held {
            path: "p/.a_1.log.1_0-1-1".into(),
            opened: 150,
            read_at: 11_000,
            deleted: true,
            result: Err(libc::ENOENT),
        }]),
        ["open-file-enoent"]
    );
    assert_eq!(
        kinds(vec![Seen::AsOfDir {
            end: 250,
            names: vec!["1".into(), "3".into(), "7".into()]
        }]),
        ["as-of-dir", "as-of-dir"]
    );
    assert_eq!(
        kinds(vec![Seen::Timeline {
            name: "2.deltacommit".into(),
            result: Err(libc::EIO)
        }]),
        ["timeline-unreadable"]
    );
}
