//! The reader threads: readers that walk `latest/` and `as_of/<T>/` and read their files, a
//! holder that keeps files of `latest/` open across the cleaner, and a watchdog.

use std::collections::BTreeMap;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::seen::{Content, DirList, Seen, Walk};
use hudifs_testkit::support;

/// Most files the holder keeps open at once.
const MAX_HELD: usize = 200;

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn errno(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(-1)
}

/// Whether a table file (path relative to the table) is in the table's storage.
pub type Exists = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// Shared state of the reader threads.
pub struct Shared {
    pub mnt: PathBuf,
    /// Whether a table file (path relative to the table) is still in the table's storage.
    pub exists: Exists,
    pub stop: AtomicBool,
    pub seen: Mutex<Vec<Seen>>,
}

pub struct Progress {
    pub name: String,
    pub last: AtomicI64,
    /// The thread's id, to tell where it waits if it stops making progress.
    pub tid: AtomicI64,
}

impl Progress {
    fn tick(&self) {
        self.last.store(now_ms(), Ordering::Relaxed);
    }

    /// The thread is done: it waits on nothing any more, so no stall is counted for it (a
    /// reader that stopped while the holder still reads its held files made "no progress").
    pub fn finished(&self) {
        self.last.store(i64::MAX, Ordering::Relaxed);
    }

    /// Record the calling thread as this one's.
    pub fn here(&self) {
        // SAFETY: gettid has no preconditions.
        self.tid
            .store(i64::from(unsafe { libc::gettid() }), Ordering::Relaxed);
    }
}

/// `user.hudi.instant` of a path (copied: `support::xattr` returns a 64 KiB buffer, and the
/// readers keep hundreds of thousands of these).
fn instant_xattr(p: &Path) -> Option<String> {
    support::xattr(p, "user.hudi.instant").map(|s| s.as_str().to_owned())
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

pub fn reader(sh: Arc<Shared>, prog: Arc<Progress>, seed: u64) {
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
pub fn holder(sh: Arc<Shared>, prog: Arc<Progress>) {
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
        // Each check asks the table's storage itself (on a store, a HEAD to the server from
        // this process): time spent there is not the daemon's, so each is progress.
        let gone: Vec<String> = held
            .keys()
            .filter(|p| {
                prog.tick();
                !(sh.exists)(p)
            })
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
        let deleted = !(sh.exists)(&path);
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
pub fn watchdog(sh: Arc<Shared>, prog: Arc<Progress>, slowest: Arc<AtomicI64>) {
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
