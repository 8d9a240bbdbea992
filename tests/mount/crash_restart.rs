//! A serving daemon that dies is replaced without readers noticing (docs/SEMANTICS.md §7.11),
//! through a real mount of a table the project's generator writes: readers stream Parquet files
//! and loops list the tree while the daemon serving the mount is killed with SIGKILL again and
//! again. Every system call must succeed, every read must return the table's bytes, and the
//! mount must answer again within a second of each kill. The same when the kernel's OOM
//! killer kills it: the serving daemon alone is put in a memory cgroup limited a little above
//! its usage and made to merge a `merged/` slice whose log records need far more.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hudifs_core::table::TableType;
use hudifs_testkit::generator::{rows_with_ids, TableSpec, TableWriter};
use hudifs_testkit::mount::{fuse_available, MountGuard};

/// A table of `files` Parquet base files of about `bytes` each, in two partitions and two
/// commits; the relative paths of its files.
fn table(root: &Path, files: usize, bytes: u64) -> Vec<String> {
    table_of(root, TableType::CopyOnWrite, files, bytes).1
}

/// [`table`] of either type: its writer (to write more) and the relative paths of its files.
fn table_of(
    root: &Path,
    table_type: TableType,
    files: usize,
    bytes: u64,
) -> (TableWriter, Vec<String>) {
    let spec = TableSpec::new("crash", table_type, 9).partitioned_by(&["part"], true);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let mut out = Vec::new();
    for _ in 0..2 {
        let action = w.write_action();
        let mut t = w.begin(action).unwrap();
        for i in 0..files / 2 {
            t.insert_sized(if i % 2 == 0 { "part=a" } else { "part=b" }, bytes)
                .unwrap();
        }
        t.complete().unwrap();
        out.extend(w.events().last().unwrap().written.clone());
    }
    out.retain(|p| p.ends_with(".parquet"));
    (w, out)
}

/// `hudifs status --json` of one mount: (serving pid, keeper pid, restarts).
fn status(m: &MountGuard) -> Option<(u64, u64, u64)> {
    let out = Command::new(env!("CARGO_BIN_EXE_hudifs"))
        .args(["status", "--json"])
        .arg(m.path())
        .output()
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let row = &v["mounts"][0];
    Some((
        row["pid"].as_u64()?,
        row["keeper_pid"].as_u64()?,
        row["restarts"].as_u64()?,
    ))
}

/// What the workers saw.
#[derive(Default)]
struct Seen {
    errors: Mutex<Vec<String>>,
    reads: AtomicU64,
    listings: AtomicU64,
}

impl Seen {
    fn fail(&self, what: String) {
        let mut e = self.errors.lock().unwrap();
        if e.len() < 20 {
            e.push(what);
        }
    }
}

/// Read a file of the mount from the start to the end in 256 KiB reads, its cached pages
/// dropped first so that every read reaches the daemon (without passthrough).
fn read_through(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    // SAFETY: a plain advice call on an open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// `ls -lR`: every directory listed, every entry stat'ed.
fn walk(dir: &Path, seen: &Seen) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => return seen.fail(format!("read_dir {}: {e}", dir.display())),
    };
    for e in entries {
        let e = match e {
            Ok(e) => e,
            Err(e) => return seen.fail(format!("readdir {}: {e}", dir.display())),
        };
        let p = e.path();
        match std::fs::symlink_metadata(&p) {
            Ok(md) if md.is_dir() => walk(&p, seen),
            Ok(_) => {}
            Err(e) => seen.fail(format!("stat {}: {e}", p.display())),
        }
    }
}

/// 8 readers streaming `files` (table-relative) through `m` and 2 loops listing its plain views,
/// with every file also held open from the start to the end.
struct Workers {
    want: Arc<Vec<(PathBuf, Vec<u8>)>>,
    held: Vec<std::fs::File>,
    stop: Arc<AtomicBool>,
    seen: Arc<Seen>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Workers {
    fn start(m: &MountGuard, root: &Path, files: &[String]) -> Workers {
        let want: Arc<Vec<(PathBuf, Vec<u8>)>> = Arc::new(
            files
                .iter()
                .map(|rel| {
                    (
                        m.path().join("latest").join(rel),
                        std::fs::read(root.join(rel)).unwrap(),
                    )
                })
                .collect(),
        );
        // Opened before the first kill and read after the last: handles of a daemon long dead.
        let held: Vec<std::fs::File> = want
            .iter()
            .map(|(p, _)| std::fs::File::open(p).unwrap())
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Seen::default());
        let mut threads = Vec::new();
        for r in 0..8 {
            let (want, stop, seen) = (want.clone(), stop.clone(), seen.clone());
            threads.push(std::thread::spawn(move || {
                let mut i = r;
                while !stop.load(Ordering::SeqCst) {
                    let (path, bytes) = &want[i % want.len()];
                    match read_through(path) {
                        Ok(got) if got == *bytes => {
                            seen.reads.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(got) => seen.fail(format!(
                            "{}: {} bytes read, not the table's {}",
                            path.display(),
                            got.len(),
                            bytes.len()
                        )),
                        Err(e) => seen.fail(format!("read {}: {e}", path.display())),
                    }
                    i += 1;
                }
            }));
        }
        for _ in 0..2 {
            let (mnt, stop, seen) = (m.path().to_path_buf(), stop.clone(), seen.clone());
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    for sub in ["latest", "as_of", "incremental", "timeline"] {
                        walk(&mnt.join(sub), &seen);
                    }
                    seen.listings.fetch_add(1, Ordering::SeqCst);
                }
            }));
        }
        Workers {
            want,
            held,
            stop,
            seen,
            threads,
        }
    }

    /// Stop the workers and check what they saw: no hung call, no failed call, the table's
    /// bytes from every read and from every file held open. Returns (whole-file reads,
    /// listings).
    fn finish(self) -> (u64, u64) {
        std::thread::sleep(Duration::from_millis(500));
        self.stop.store(true, Ordering::SeqCst);
        // A request that a dead daemon read and nobody answered would hang its caller for good.
        let t0 = Instant::now();
        while !self.threads.iter().all(|w| w.is_finished()) {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "workers hung: requests a killed daemon had read were never answered"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        for w in self.threads {
            w.join().unwrap();
        }
        for (mut f, (path, bytes)) in self.held.into_iter().zip(self.want.iter()) {
            let mut got = Vec::new();
            f.read_to_end(&mut got)
                .unwrap_or_else(|e| panic!("{} held open: {e}", path.display()));
            assert!(got == *bytes, "{} held open: other bytes", path.display());
        }
        let errors = self.seen.errors.lock().unwrap().clone();
        assert!(
            errors.is_empty(),
            "failed calls or wrong bytes: {errors:#?}"
        );
        (
            self.seen.reads.load(Ordering::SeqCst),
            self.seen.listings.load(Ordering::SeqCst),
        )
    }
}

/// 8 readers and 2 listing loops on the mount of `root` (made with `extra`) while its serving
/// daemon is killed `kills` times.
fn survive_kills(root: &Path, files: &[String], extra: &[&str], kills: usize) {
    let m = MountGuard::mount(root, extra);
    let workers = Workers::start(&m, root, files);
    let mut back_within = Vec::new();
    for k in 0..kills {
        std::thread::sleep(Duration::from_millis(700));
        let (pid, keeper, restarts) = status(&m).expect("hudifs status of the mount");
        assert_eq!(restarts, k as u64);
        assert_eq!(Some(keeper), m.pid.map(u64::from), "the keeper stays");
        let t0 = Instant::now();
        // SAFETY: a signal to the serving daemon this test's mount started.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
        back_within.push(probe_answered(&m, &format!("probe-{k}"), t0));
        wait_for_new_daemon(&m, pid);
    }
    let (reads, listings) = workers.finish();
    let slowest = back_within.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{extra:?}: {kills} kills, {reads} whole-file reads, {listings} listings, slowest \
         return {} ms",
        slowest.as_millis()
    );
    assert!(reads >= kills as u64);
    assert!(listings >= 2);
    assert!(
        slowest < Duration::from_secs(1),
        "service came back after {slowest:?}"
    );
    assert_eq!(status(&m).map(|s| s.2), Some(kills as u64));
}

/// Look up a name nobody looked up before (only a live daemon answers it): the time from `t0`
/// until it is answered.
fn probe_answered(m: &MountGuard, name: &str, t0: Instant) -> Duration {
    let probe = m.path().join("latest").join(name);
    match std::fs::metadata(&probe) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        other => panic!("{}: {other:?}", probe.display()),
    }
    t0.elapsed()
}

/// Wait until `hudifs status` names a serving daemon other than `pid`.
fn wait_for_new_daemon(m: &MountGuard, pid: u64) {
    let t1 = Instant::now();
    while status(m).is_none_or(|(p, _, _)| p == pid) {
        assert!(t1.elapsed() < Duration::from_secs(10), "no new daemon");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn readers_through_the_daemon_see_nothing_of_twenty_kills() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let files = table(&root, 8, 3 << 20);
    assert_eq!(files.len(), 8, "{files:?}");
    survive_kills(&root, &files, &["--no-passthrough"], 20);
}

#[test]
fn passthrough_files_stay_open_across_kills() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let files = table(&root, 4, 1 << 20);
    // Files held open across every kill and opened again by the readers meanwhile: the daemon
    // that takes over reuses their backing files (the kernel refuses a second one, EBUSY).
    survive_kills(&root, &files, &[], 6);
}

/// The restart journal of the mount that `keeper` holds (its memfd): its length, and the bytes
/// of it held in memory.
fn journal_size(keeper: u64) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    for e in std::fs::read_dir(format!("/proc/{keeper}/fd")).unwrap() {
        let p = e.unwrap().path();
        let named = std::fs::read_link(&p).is_ok_and(|l| {
            l.to_string_lossy()
                .starts_with("/memfd:hudifs-restart-journal")
        });
        if named {
            let md = std::fs::metadata(&p).unwrap();
            return (md.len(), md.blocks() * 512);
        }
    }
    panic!("no restart journal among the descriptors of keeper {keeper}");
}

#[test]
fn passthrough_opens_by_the_hundred_thousand_keep_the_journal_small() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let files = table(&root, 4, 64 << 10);
    let m = MountGuard::mount(&root, &[]);
    let paths: Arc<Vec<PathBuf>> = Arc::new(
        files
            .iter()
            .map(|rel| m.path().join("latest").join(rel))
            .collect(),
    );
    let want: Vec<Vec<u8>> = files
        .iter()
        .map(|rel| std::fs::read(root.join(rel)).unwrap())
        .collect();
    // Three files held open across it all; the fourth opened and closed only.
    let held: Vec<std::fs::File> = paths[..3]
        .iter()
        .map(|p| std::fs::File::open(p).unwrap())
        .collect();
    let (pid, keeper, _) = status(&m).unwrap();
    let before = journal_size(keeper);
    // Each open and release is a record (29 and 13 bytes): without compaction the journal
    // would grow by 42 bytes per open.
    let opens = 150_000u64;
    let t0 = Instant::now();
    let workers: Vec<_> = (0..2)
        .map(|w| {
            let paths = paths.clone();
            std::thread::spawn(move || {
                for i in 0..opens / 2 {
                    let p = &paths[(i as usize * 2 + w) % paths.len()];
                    drop(std::fs::File::open(p).unwrap());
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let took = t0.elapsed();
    // Releases reach the daemon after close returns.
    std::thread::sleep(Duration::from_millis(1000));
    let after = journal_size(keeper);
    eprintln!(
        "{opens} passthrough opens in {} ms: journal {} bytes long, {} held before; {} bytes \
         long, {} held after",
        took.as_millis(),
        before.0,
        before.1,
        after.0,
        after.1
    );
    let log = m.log_text();
    assert!(log.contains("restart journal: compacted"), "{log}");
    assert!(after.0 >= opens * 42, "every open recorded: {after:?}");
    // What stays: the records since the last compaction (at most 65,536 and 4 per open handle)
    // and the live state.
    assert!(after.1 < 65_600 * 29 + (256 << 10), "{after:?}");
    // SAFETY: a signal to the serving daemon this test's mount started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let t1 = Instant::now();
    while status(&m).is_none_or(|(p, _, _)| p == pid) {
        assert!(t1.elapsed() < Duration::from_secs(10), "no new daemon");
        std::thread::sleep(Duration::from_millis(20));
    }
    for (i, mut f) in held.into_iter().enumerate() {
        let mut got = Vec::new();
        f.read_to_end(&mut got).unwrap();
        assert!(got == want[i], "{} held open: other bytes", files[i]);
    }
    assert!(std::fs::read(&paths[3]).unwrap() == want[3]);
    let log = m.log_text();
    assert!(
        log.contains("took over 3 passthrough backing files"),
        "{log}"
    );
}

#[test]
fn daemons_that_cannot_open_the_table_are_retried_until_one_can() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let files = table(&root, 2, 64 << 10);
    let m = MountGuard::mount(&root, &["--no-passthrough"]);
    let path = m.path().join("latest").join(&files[0]);
    let want = std::fs::read(root.join(&files[0])).unwrap();
    assert!(std::fs::read(&path).unwrap() == want);
    // The table cannot be opened for a while: every daemon started meanwhile dies before it
    // serves, and the keeper waits longer between them.
    let props = root.join(".hoodie/hoodie.properties");
    let aside = root.join("hoodie.properties.aside");
    std::fs::rename(&props, &aside).unwrap();
    let (pid, _, _) = status(&m).unwrap();
    // SAFETY: a signal to the serving daemon this test's mount started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let reader = {
        let path = path.clone();
        // Waits for a daemon, then reads.
        std::thread::spawn(move || std::fs::metadata(path.with_file_name("probe")).err())
    };
    std::thread::sleep(Duration::from_millis(1500));
    assert!(!reader.is_finished(), "answered without a daemon");
    std::fs::rename(&aside, &props).unwrap();
    let t0 = Instant::now();
    let err = reader.join().unwrap().expect("the probe is not there");
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound, "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "back {:?} after the table was",
        t0.elapsed()
    );
    let (_, _, restarts) = status(&m).unwrap();
    assert!(restarts >= 4, "{restarts} restarts");
    assert!(
        m.log_text().contains("died before serving"),
        "{}",
        m.log_text()
    );
    assert!(std::fs::read(&path).unwrap() == want);
}

#[test]
fn a_commit_the_dead_daemon_never_saw_shows_after_the_takeover() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let spec = TableSpec::new("crash", TableType::CopyOnWrite, 9).partitioned_by(&["part"], true);
    let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
    let action = w.write_action();
    let mut t = w.begin(action).unwrap();
    t.insert_sized("part=a", 64 << 10).unwrap();
    t.complete().unwrap();
    let m = MountGuard::mount(&root, &[]);
    let dir = m.path().join("latest/part=a");
    let names = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    };
    // Listed twice: the kernel keeps the listing of latest/ directories.
    let before = names();
    assert_eq!(names(), before);
    assert_eq!(before.len(), 1);
    // The serving daemon stops following (stopped), the table moves on, the daemon dies: the
    // one that takes over opens the new state, while the kernel holds the old listing.
    let (pid, _, _) = status(&m).unwrap();
    // SAFETY: signals to the serving daemon this test's mount started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGSTOP) }, 0);
    let action = w.write_action();
    let mut t = w.begin(action).unwrap();
    t.insert_sized("part=a", 64 << 10).unwrap();
    t.complete().unwrap();
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let t0 = Instant::now();
    loop {
        let now = names();
        if now.len() == 2 {
            assert!(now.contains(&before[0]), "{now:?}");
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "latest/part=a still lists {now:?} after the takeover"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The memory controller of this machine's cgroups: v1 (`/sys/fs/cgroup/memory/`) or v2
/// (`/sys/fs/cgroup/` with `memory` in `cgroup.controllers`).
#[derive(Clone, Copy, PartialEq, Debug)]
enum CgroupLayout {
    V1,
    V2,
}

impl CgroupLayout {
    /// The mount of the memory hierarchy.
    fn root(self) -> &'static Path {
        match self {
            CgroupLayout::V1 => Path::new("/sys/fs/cgroup/memory"),
            CgroupLayout::V2 => Path::new("/sys/fs/cgroup"),
        }
    }

    /// The files of (limit, usage).
    fn files(self) -> (&'static str, &'static str) {
        match self {
            CgroupLayout::V1 => ("memory.limit_in_bytes", "memory.usage_in_bytes"),
            CgroupLayout::V2 => ("memory.max", "memory.current"),
        }
    }
}

/// The memory controller when this machine lets the test make memory cgroups; prints the
/// reason when it does not. With `HUDIFS_REQUIRE_FUSE=1` and a memory controller present, a
/// cgroup that cannot be made is a failure (a panic) instead.
fn memory_cgroups() -> Option<CgroupLayout> {
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
        .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
    let layout = if v2 {
        Some(CgroupLayout::V2)
    } else if Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists() {
        Some(CgroupLayout::V1)
    } else {
        None
    };
    let reason = match layout {
        None => "no memory cgroup controller (neither /sys/fs/cgroup/memory/ nor memory in \
                 /sys/fs/cgroup/cgroup.controllers)"
            .to_string(),
        Some(l) => {
            let probe = l
                .root()
                .join(format!("hudifs-oom-probe-{}", std::process::id()));
            match std::fs::create_dir(&probe) {
                Err(e) => format!("cannot make a memory cgroup in {}: {e}", l.root().display()),
                Ok(()) => {
                    let has_limit = probe.join(l.files().0).exists();
                    let _ = std::fs::remove_dir(&probe);
                    if has_limit {
                        return layout;
                    }
                    format!(
                        "cgroups made in {} have no {} (memory not in cgroup.subtree_control)",
                        l.root().display(),
                        l.files().0
                    )
                }
            }
        }
    };
    if layout.is_some() && std::env::var("HUDIFS_REQUIRE_FUSE").as_deref() == Ok("1") {
        panic!("{reason} and HUDIFS_REQUIRE_FUSE=1");
    }
    eprintln!("SKIP: {reason}");
    None
}

/// A memory cgroup this test made, removed on drop (also when the test fails): a process still
/// in it is moved back to the cgroup it came from first.
struct MemoryCgroup {
    layout: CgroupLayout,
    dir: PathBuf,
    /// The processes moved in, with the cgroup each came from.
    moved: Vec<(u32, PathBuf)>,
}

impl MemoryCgroup {
    fn create(layout: CgroupLayout, name: &str) -> MemoryCgroup {
        let dir = layout.root().join(name);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        MemoryCgroup {
            layout,
            dir,
            moved: Vec::new(),
        }
    }

    fn write(&self, file: &str, value: &str) -> std::io::Result<()> {
        std::fs::write(self.dir.join(file), value)
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.dir.join(file)).unwrap_or_default()
    }

    /// The value of `key` in a flat-keyed file (`memory.oom_control`, `memory.events`).
    fn keyed(&self, file: &str, key: &str) -> u64 {
        self.read(file)
            .lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or(0)
    }

    fn usage(&self) -> u64 {
        self.read(self.layout.files().1).trim().parse().unwrap_or(0)
    }

    /// Limit the group's memory to `bytes`, swap included.
    fn limit(&self, bytes: u64) {
        let (limit, _) = self.layout.files();
        self.write(limit, &bytes.to_string())
            .unwrap_or_else(|e| panic!("{limit}: {e}"));
        // Where there is swap, the group must not swap out of its limit (best effort: the
        // file is there only with swap accounting).
        let _ = match self.layout {
            CgroupLayout::V1 => self.write("memory.memsw.limit_in_bytes", &bytes.to_string()),
            CgroupLayout::V2 => self.write("memory.swap.max", "0"),
        };
    }

    /// Processes the OOM killer killed in the group.
    fn oom_kills(&self) -> u64 {
        match self.layout {
            CgroupLayout::V1 => self.keyed("memory.oom_control", "oom_kill"),
            CgroupLayout::V2 => self.keyed("memory.events", "oom_kill"),
        }
    }

    /// Times the group hit its limit.
    fn limit_hits(&self) -> u64 {
        match self.layout {
            CgroupLayout::V1 => self.read("memory.failcnt").trim().parse().unwrap_or(0),
            CgroupLayout::V2 => self.keyed("memory.events", "max"),
        }
    }

    /// The cgroup directory of `pid` in this hierarchy.
    fn cgroup_of(&self, pid: u32) -> PathBuf {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let rel = text.lines().find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, controllers, path) = (f.next()?, f.next()?, f.next()?);
            let ours = match self.layout {
                CgroupLayout::V1 => controllers.split(',').any(|c| c == "memory"),
                CgroupLayout::V2 => controllers.is_empty(),
            };
            ours.then(|| path.trim_start_matches('/').to_string())
        });
        self.layout.root().join(rel.unwrap_or_default())
    }

    /// Move process `pid` (all its threads) into the group.
    fn enter(&mut self, pid: u32) {
        let from = self.cgroup_of(pid);
        self.moved.push((pid, from));
        self.write("cgroup.procs", &pid.to_string())
            .unwrap_or_else(|e| panic!("moving {pid} into {}: {e}", self.dir.display()));
    }

    fn procs(&self) -> Vec<u32> {
        self.read("cgroup.procs")
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        // A process dies out of its group; one that lives goes back where it came from.
        for pid in self.procs() {
            let back = self
                .moved
                .iter()
                .find(|(p, _)| *p == pid)
                .map(|(_, from)| from.clone())
                .unwrap_or_else(|| self.layout.root().to_path_buf());
            if std::fs::write(back.join("cgroup.procs"), pid.to_string()).is_err() {
                let _ = std::fs::write(self.layout.root().join("cgroup.procs"), pid.to_string());
            }
        }
        // A process being killed leaves its group a moment after it is signalled.
        for _ in 0..250 {
            match std::fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        eprintln!("could not remove {}", self.dir.display());
    }
}

/// The resident memory of process `pid` in bytes.
fn rss(pid: u64) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb << 10)
}

/// A descriptor that becomes readable when process `pid` exits (pidfd).
fn pidfd(pid: u64) -> std::os::fd::OwnedFd {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    assert!(
        fd >= 0,
        "pidfd_open {pid}: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a descriptor just returned to us and owned by nobody else.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }
}

/// Whether the process behind `fd` exited within `timeout`.
fn exited(fd: &std::os::fd::OwnedFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut p, 1, timeout.as_millis() as libc::c_int) == 1 }
}

/// Rounds of the OOM test: one log-only file group (one merged slice) each.
const OOM_ROUNDS: usize = 3;
/// Records in each round's log: its merge holds them all in memory.
const OOM_LOG_ROWS: usize = 400_000;
/// How far above its usage the serving daemon's cgroup is limited.
const OOM_HEADROOM: u64 = 48 << 20;

#[test]
fn a_daemon_killed_by_the_oom_killer_is_replaced_without_a_failed_call() {
    if !fuse_available() {
        return;
    }
    let Some(layout) = memory_cgroups() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let (mut w, files) = table_of(&root, TableType::MergeOnRead, 8, 2 << 20);
    assert_eq!(files.len(), 8, "{files:?}");
    // Log-only file groups of `part=m`, one per round: merging one holds its log records in
    // memory, far more than the headroom.
    let mut t = w.begin(w.write_action()).unwrap();
    for r in 0..OOM_ROUNDS {
        let start = 10_000_000 * (r as i64 + 1);
        let ids: Vec<i64> = (start..start + OOM_LOG_ROWS as i64).collect();
        t.insert_log("part=m", &rows_with_ids(r as u64, &ids))
            .unwrap();
    }
    t.complete().unwrap();
    let log_bytes: u64 = std::fs::read_dir(root.join("part=m"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(
        &root,
        &["--no-passthrough", "--merge-cache", cache.to_str().unwrap()],
    );
    let merged_dir = m.path().join("merged/latest/part=m");
    // Listing merges nothing.
    let mut slices: Vec<String> = std::fs::read_dir(&merged_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    slices.sort();
    assert_eq!(slices.len(), OOM_ROUNDS, "{slices:?}");
    let workers = Workers::start(&m, &root, &files);
    let mut back_within = Vec::new();
    for (k, slice) in slices.iter().enumerate() {
        std::thread::sleep(Duration::from_millis(700));
        let (pid, keeper, restarts) = status(&m).expect("hudifs status of the mount");
        assert_eq!(restarts, k as u64);
        assert_eq!(Some(keeper), m.pid.map(u64::from), "the keeper stays");
        let dying = pidfd(pid);
        let rss_before = rss(pid);
        let mut cg =
            MemoryCgroup::create(layout, &format!("hudifs-oom-{}-{k}", std::process::id()));
        // What the daemon holds stays charged where it was (v2 never moves charges; recent
        // kernels refuse v1's memory.move_charge_at_immigrate): the group counts what it
        // allocates from now on.
        cg.enter(pid as u32);
        let usage = cg.usage();
        let limit = usage + OOM_HEADROOM;
        cg.limit(limit);
        // The first stat of a merged slice merges it: the daemon reads the slice's logs and
        // decodes their records into memory, past its limit.
        let trigger = {
            let path = merged_dir.join(slice);
            std::thread::spawn(move || std::fs::metadata(path))
        };
        let t = Instant::now();
        while !exited(&dying, Duration::from_millis(50)) {
            assert!(
                !trigger.is_finished(),
                "{slice} merged within {limit} bytes ({usage} used before): no OOM kill"
            );
            assert!(
                t.elapsed() < Duration::from_secs(120),
                "the daemon lives on"
            );
        }
        let t0 = Instant::now();
        back_within.push(probe_answered(&m, &format!("probe-oom-{k}"), t0));
        wait_for_new_daemon(&m, pid);
        let (new_pid, _, restarts) = status(&m).unwrap();
        assert_eq!(restarts, k as u64 + 1);
        let (oom_kills, hits) = (cg.oom_kills(), cg.limit_hits());
        assert!(
            oom_kills >= 1,
            "the daemon died, but the OOM killer of {} killed nothing ({hits} limit hits)",
            cg.dir.display()
        );
        assert!(
            m.log_text()
                .contains(&format!("(pid {pid}) died (signal {})", libc::SIGKILL)),
            "{}",
            m.log_text()
        );
        // The new daemon is the keeper's child, not in the group: it merges the slice the
        // killed one was merging and answers the stat that was in flight.
        assert!(!cg.procs().contains(&(new_pid as u32)));
        let md = trigger
            .join()
            .unwrap()
            .expect("the stat of the merged slice");
        assert!(md.len() > 0, "{slice}: empty");
        eprintln!(
            "round {k}: daemon {pid} RSS {} MiB, cgroup usage {} MiB, limit {} MiB, oom_kill \
             {oom_kills}, limit hits {hits}, back within {} ms; merged {slice}: {} MiB",
            rss_before >> 20,
            usage >> 20,
            limit >> 20,
            back_within[k].as_millis(),
            md.len() >> 20
        );
        drop(cg);
    }
    let (reads, listings) = workers.finish();
    let slowest = back_within.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{OOM_ROUNDS} OOM kills (logs of {} MiB), {reads} whole-file reads, {listings} \
         listings, slowest return {} ms",
        log_bytes >> 20,
        slowest.as_millis()
    );
    assert!(reads >= OOM_ROUNDS as u64);
    assert!(listings >= 2);
    assert!(
        slowest < Duration::from_secs(1),
        "service came back after {slowest:?}"
    );
    assert_eq!(status(&m).map(|s| s.2), Some(OOM_ROUNDS as u64));
    // What the daemons that took over merged is what a fresh mount merges.
    let fresh_cache = tmp.path().join("fresh-cache");
    let fresh = MountGuard::mount(
        &root,
        &[
            "--no-passthrough",
            "--merge-cache",
            fresh_cache.to_str().unwrap(),
        ],
    );
    for slice in &slices {
        let got = std::fs::read(merged_dir.join(slice)).unwrap();
        let want = std::fs::read(fresh.path().join("merged/latest/part=m").join(slice)).unwrap();
        assert!(got == want, "{slice}: other bytes than a fresh mount's");
    }
}
