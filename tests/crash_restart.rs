//! A serving daemon that dies is replaced without readers noticing (docs/SEMANTICS.md §7.11),
//! through a real mount of a table the project's generator writes: readers stream Parquet files
//! and loops list the tree while the daemon serving the mount is killed with SIGKILL again and
//! again. Every system call must succeed, every read must return the table's bytes, and the
//! mount must answer again within a second of each kill.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hudifs_core::table::TableType;
use hudifs_testkit::generator::{TableSpec, TableWriter};
use hudifs_testkit::mount::{fuse_available, MountGuard};

/// A table of `files` Parquet base files of about `bytes` each, in two partitions and two
/// commits; the relative paths of its files.
fn table(root: &Path, files: usize, bytes: u64) -> Vec<String> {
    let spec = TableSpec::new("crash", TableType::CopyOnWrite, 9).partitioned_by(&["part"], true);
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
    out
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

/// 8 readers and 2 listing loops on the mount of `root` (made with `extra`) while its serving
/// daemon is killed `kills` times.
fn survive_kills(root: &Path, files: &[String], extra: &[&str], kills: usize) {
    let m = MountGuard::mount(root, extra);
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
    let mut workers = Vec::new();
    for r in 0..8 {
        let (want, stop, seen) = (want.clone(), stop.clone(), seen.clone());
        workers.push(std::thread::spawn(move || {
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
        workers.push(std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                for sub in ["latest", "as_of", "incremental", "timeline"] {
                    walk(&mnt.join(sub), &seen);
                }
                seen.listings.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    let mut back_within = Vec::new();
    for k in 0..kills {
        std::thread::sleep(Duration::from_millis(700));
        let (pid, keeper, restarts) = status(&m).expect("hudifs status of the mount");
        assert_eq!(restarts, k as u64);
        assert_eq!(Some(keeper), m.pid.map(u64::from), "the keeper stays");
        let t0 = Instant::now();
        // SAFETY: a signal to the serving daemon this test's mount started.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
        // A name nobody looked up before: only a live daemon answers it.
        let probe = m.path().join("latest").join(format!("probe-{k}"));
        match std::fs::metadata(&probe) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            other => panic!("{}: {other:?}", probe.display()),
        }
        back_within.push(t0.elapsed());
        let t1 = Instant::now();
        while status(&m).is_none_or(|(p, _, _)| p == pid) {
            assert!(t1.elapsed() < Duration::from_secs(10), "no new daemon");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::SeqCst);
    // A request that a dead daemon read and nobody answered would hang its caller for good.
    let t0 = Instant::now();
    while !workers.iter().all(|w| w.is_finished()) {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "workers hung: requests a killed daemon had read were never answered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for w in workers {
        w.join().unwrap();
    }
    for (mut f, (path, bytes)) in held.into_iter().zip(want.iter()) {
        let mut got = Vec::new();
        f.read_to_end(&mut got)
            .unwrap_or_else(|e| panic!("{} held open: {e}", path.display()));
        assert!(got == *bytes, "{} held open: other bytes", path.display());
    }
    let errors = seen.errors.lock().unwrap().clone();
    let slowest = back_within.iter().max().copied().unwrap_or_default();
    eprintln!(
        "{extra:?}: {kills} kills, {} whole-file reads, {} listings, slowest return {} ms",
        seen.reads.load(Ordering::SeqCst),
        seen.listings.load(Ordering::SeqCst),
        slowest.as_millis()
    );
    assert!(
        errors.is_empty(),
        "failed calls or wrong bytes: {errors:#?}"
    );
    assert!(seen.reads.load(Ordering::SeqCst) >= kills as u64);
    assert!(seen.listings.load(Ordering::SeqCst) >= 2);
    assert!(
        slowest < Duration::from_secs(1),
        "service came back after {slowest:?}"
    );
    assert_eq!(status(&m).map(|s| s.2), Some(kills as u64));
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
