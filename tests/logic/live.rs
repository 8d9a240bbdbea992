//! Following writers: the snapshot a mount builds incrementally, change after change, equals
//! what a fresh read of the table gives; and a real mount shows new commits in latest/ without
//! a remount, with inotify and with polling.

use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

use hudifs::follow::Follower;
use hudifs::fs::{FsOptions, HudiFs, Kind, ROOT};
use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};

const START: i64 = 1_767_225_600_000;

/// A version-9 copy-on-write table under `dir`, partitioned by `p`, and its partition `p=a`.
fn cow_table(dir: &Path) -> (TableWriter, String) {
    let spec = TableSpec::new("t", TableType::CopyOnWrite, 9).partitioned_by(&["p"], true);
    let w = TableWriter::create(&dir.join("t"), spec, START).unwrap();
    let a = w.partition_path(&["a"]).unwrap();
    (w, a)
}

fn opts() -> FsOptions {
    FsOptions::default()
}

/// Every view a caller can list: latest, each as_of, each window, with their files.
fn everything(fs: &HudiFs) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    fn walk(fs: &HudiFs, ino: u64, prefix: &str, out: &mut Vec<String>) -> Result<(), i32> {
        for e in fs
            .readdir_entries(ino)
            .map_err(|e| hudifs::fuse::errno_of(&e))?
        {
            let path = format!("{prefix}/{}", e.name);
            match e.entry.attr.kind {
                Kind::Dir => walk(fs, e.entry.attr.ino, &path, out)?,
                Kind::File => out.push(path),
            }
        }
        Ok(())
    }
    for top in ["latest", "as_of", "incremental"] {
        let looked_up = fs.lookup(ROOT, OsStr::new(top)).map(|e| e.attr.ino);
        if top == "latest" {
            let mut files = Vec::new();
            let r = looked_up
                .map_err(|e| hudifs::fuse::errno_of(&e))
                .and_then(|ino| walk(fs, ino, "", &mut files));
            out.insert(
                "latest".to_string(),
                r.map(|_| files)
                    .unwrap_or_else(|e| vec![format!("errno {e}")]),
            );
            continue;
        }
        let ino = looked_up.unwrap();
        for e in fs.readdir_entries(ino).unwrap() {
            let mut files = Vec::new();
            let r = fs
                .lookup(ino, OsStr::new(&*e.name))
                .map_err(|e| hudifs::fuse::errno_of(&e))
                .and_then(|v| walk(fs, v.attr.ino, "", &mut files));
            let key = format!("{top}/{}", e.name);
            out.insert(
                key,
                r.map(|_| files)
                    .unwrap_or_else(|e| vec![format!("errno {e}")]),
            );
        }
    }
    out
}

/// Apply what changed in the table's timeline, as a poll of the follower does.
fn refresh(fs: &HudiFs) -> bool {
    let inv = Follower::new().poll_once(fs, Duration::ZERO).unwrap();
    if let Some(inv) = &inv {
        fs.switched(inv);
    }
    inv.is_some()
}

fn check_same(live: &HudiFs, root: &Path, step: &str) {
    refresh(live);
    check_same_as_fresh(live, root, step);
}

fn check_same_as_fresh(live: &HudiFs, root: &Path, step: &str) {
    let fresh = HudiFs::new(root, opts()).unwrap();
    // The derived facts, updated by difference, equal those derived from scratch...
    assert_eq!(
        live.snapshot().ctx.facts(),
        fresh.snapshot().ctx.facts(),
        "{step}: incrementally derived facts differ from a fresh read"
    );
    // ... and so does every view.
    let (a, b) = (everything(live), everything(&fresh));
    assert_eq!(
        a, b,
        "{step}: incremental snapshot differs from a fresh read"
    );
}

/// Overwrite a completed instant file in place (as a writer that is not atomic would) and
/// apply it as the watcher does on close-write.
fn rewrite_instant(live: &HudiFs, w: &TableWriter, name: &str, bytes: &[u8]) {
    std::fs::write(w.local_path(w.timeline_dir()).join(name), bytes).unwrap();
    let inv = Follower::new()
        .apply(live, [name.to_string()].into(), Default::default())
        .unwrap();
    if let Some(inv) = &inv {
        live.switched(inv);
    }
}

#[test]
fn incremental_snapshots_equal_fresh_reads() {
    for (version, table_type) in [
        (6, TableType::MergeOnRead),
        (9, TableType::MergeOnRead),
        (9, TableType::CopyOnWrite),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let spec = TableSpec::new("t", table_type, version).partitioned_by(&["p"], true);
        let mut w = TableWriter::create(&dir.path().join("t"), spec, START).unwrap();
        let root = w.root().to_path_buf();
        let live = HudiFs::new(&root, opts()).unwrap();
        let write = w.write_action();
        let a = w.partition_path(&["a"]).unwrap();
        let b = w.partition_path(&["b"]).unwrap();
        let tag = format!("v{version} {table_type:?}");

        let mut t = w.begin(write).unwrap();
        let f = t.insert(&a, &rows(1, 4)).unwrap();
        let t1 = t.complete().unwrap();
        check_same(&live, &root, &format!("{tag}: first commit"));
        let mut t = w.begin(write).unwrap();
        let g = t.insert(&b, &rows(2, 3)).unwrap();
        t.update(&a, &f, &rows_with_ids(3, &[1000])).unwrap();
        t.complete().unwrap();
        check_same(&live, &root, &format!("{tag}: new partition and an update"));
        let mut t = w.begin(write).unwrap();
        t.update(&a, &f, &rows_with_ids(4, &[1001])).unwrap();
        let failed = t.abandon();
        check_same(&live, &root, &format!("{tag}: a write in flight"));
        w.rollback(&failed).unwrap();
        check_same(&live, &root, &format!("{tag}: its rollback"));
        if table_type == TableType::MergeOnRead {
            let c = w.schedule_compaction(&[(a.as_str(), f.as_str())]).unwrap();
            check_same(&live, &root, &format!("{tag}: compaction scheduled"));
            let mut t = w.begin(write).unwrap();
            t.update(&a, &f, &rows_with_ids(6, &[1002])).unwrap();
            t.complete().unwrap();
            check_same(
                &live,
                &root,
                &format!("{tag}: a write while the compaction is pending"),
            );
            w.run_compaction(&c, false).unwrap();
            check_same(&live, &root, &format!("{tag}: compaction running"));
            w.run_compaction(&c, true).unwrap();
            check_same(&live, &root, &format!("{tag}: compaction done"));
        }
        let mut t = w.begin(Action::ReplaceCommit).unwrap();
        t.replace_group(&b, &g).unwrap();
        t.insert(&b, &rows(5, 2)).unwrap();
        let r = t.complete().unwrap();
        check_same(&live, &root, &format!("{tag}: insert overwrite"));
        // Its metadata turns unreadable, then readable again.
        let name = w
            .take_published()
            .into_iter()
            .map(|p| p.name)
            .rfind(|n| n.starts_with(&r) && n.ends_with(".replacecommit"))
            .unwrap();
        let good = std::fs::read(w.local_path(w.timeline_dir()).join(&name)).unwrap();
        rewrite_instant(&live, &w, &name, b"{ not metadata");
        check_same_as_fresh(&live, &root, &format!("{tag}: unreadable replacecommit"));
        rewrite_instant(&live, &w, &name, &good);
        check_same_as_fresh(&live, &root, &format!("{tag}: readable again"));
        w.savepoint(&r).unwrap();
        let old: Vec<String> = w.group_files(&b, &g);
        let old: Vec<(&str, &str)> = old
            .iter()
            .map(|p| (b.as_str(), p.rsplit('/').next().unwrap()))
            .collect();
        w.clean(&r, &old).unwrap();
        check_same(&live, &root, &format!("{tag}: savepoint and clean"));
        w.archive(&t1).unwrap();
        check_same(&live, &root, &format!("{tag}: archival"));
        assert_eq!(
            live.latest_instant(),
            HudiFs::new(&root, opts()).unwrap().latest_instant()
        );
    }
}

fn wait_for(what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    start.elapsed()
}

/// Mounting decodes no commit metadata that no view needs yet: on a copy-on-write table only
/// replacecommits say something every snapshot needs (which groups they replaced). Decoding
/// every commit at mount cost 8.6 KB per file at 1,000,000 files (scripts/bench, figure 4).
#[test]
fn mounting_decodes_only_the_metadata_views_need() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, a) = cow_table(dir.path());
    let mut t = w.begin(Action::Commit).unwrap();
    let f = t.insert(&a, &rows(1, 2)).unwrap();
    t.complete().unwrap();
    let mut t = w.begin(Action::ReplaceCommit).unwrap();
    t.replace_group(&a, &f).unwrap();
    t.insert(&a, &rows(2, 2)).unwrap();
    let r = t.complete().unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(3, 2)).unwrap();
    t.complete().unwrap();
    let fs = HudiFs::new(w.root(), opts()).unwrap();
    let decoded: Vec<(String, bool)> = fs
        .snapshot()
        .ctx
        .timeline
        .completed
        .values()
        .map(|i| (i.requested.to_string(), i.metadata_decoded()))
        .collect();
    for (t, d) in &decoded {
        assert_eq!(*d, *t == r, "{t}: {decoded:?}");
    }
}

/// An idle poll costs one stat of the timeline directory: once a listing is trusted (taken a
/// second after its mtime was first seen), the directory is not read again until its mtime moves.
#[test]
fn idle_polls_read_the_timeline_only_when_its_mtime_moves() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, a) = cow_table(dir.path());
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(1, 2)).unwrap();
    t.complete().unwrap();
    let fs = HudiFs::new(w.root(), opts()).unwrap();
    let mut follower = Follower::new();
    let mut poll = || follower.poll_once(&fs, Duration::ZERO).unwrap().is_some();
    assert!(!poll());
    std::thread::sleep(Duration::from_millis(1100));
    assert!(!poll(), "this listing is trusted");
    // A commit whose renames leave the directory's mtime where it was (set back by hand) is
    // not seen: the poll did not read the directory.
    let timeline = w.local_path(w.timeline_dir());
    let mtime = std::fs::metadata(&timeline).unwrap().modified().unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(2, 2)).unwrap();
    let c2 = t.complete().unwrap();
    std::fs::File::open(&timeline)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    assert!(!poll(), "an unchanged mtime is not read");
    // The mtime moves: the commit is seen.
    std::fs::File::open(&timeline)
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    assert!(poll());
    assert_eq!(fs.latest_instant().as_deref(), Some(c2.as_str()));
}

#[test]
fn tables_on_network_or_fuse_file_systems_are_polled() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(hudifs_storage::network_file_system(dir.path()), None);
    if !support::fuse_available() {
        return;
    }
    let spec = TableSpec::new("t", TableType::CopyOnWrite, 9);
    let mut w = TableWriter::create(&dir.path().join("t"), spec, START).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert("", &rows(1, 1)).unwrap();
    t.complete().unwrap();
    let m = support::MountGuard::mount(w.root(), &[]);
    assert_eq!(
        hudifs_storage::network_file_system(&m.path().join("latest")),
        Some("a FUSE file system")
    );
}

#[test]
fn a_mount_follows_commits_without_remounting() {
    if !support::fuse_available() {
        return;
    }
    for (mode, env) in [("inotify", None), ("polling", Some("1"))] {
        let dir = tempfile::tempdir().unwrap();
        let (mut w, a) = cow_table(dir.path());
        let mut t = w.begin(Action::Commit).unwrap();
        let f = t.insert(&a, &rows(1, 4)).unwrap();
        t.complete().unwrap();
        let root = w.root().to_path_buf();
        // The daemon's own environment: setting this process's would reach the daemons other
        // tests of this binary start meanwhile.
        let env: Vec<(&str, &str)> = env.map(|v| ("HUDIFS_NO_INOTIFY", v)).into_iter().collect();
        let m = support::MountGuard::mount_with_env(&root, &["--poll-interval", "100"], &env);
        let latest = m.path().join("latest");
        assert_eq!(support::walk_files(&latest).unwrap().len(), 1);

        // A commit rewrites the file group: latest moves to it, as a whole.
        let mut t = w.begin(Action::Commit).unwrap();
        let newer = t.update(&a, &f, &rows_with_ids(2, &[1000])).unwrap();
        let c2 = t.complete().unwrap();
        let took = wait_for("latest to show the new commit", || {
            support::xattr(&latest, "user.hudi.instant").as_deref() == Some(c2.as_str())
        });
        let files = support::walk_files(&latest).unwrap();
        assert_eq!(files, vec![format!("{a}/{newer}")], "{mode}");
        // A new partition appears too.
        let b = w.partition_path(&["b"]).unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(&b, &rows(3, 2)).unwrap();
        t.complete().unwrap();
        wait_for("the new partition", || {
            std::fs::read_dir(&latest).map(|d| d.count()).unwrap_or(0) == 2
        });
        // A write in flight stays invisible.
        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(&b, &rows(4, 2)).unwrap();
        let _pending = t.abandon();
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(support::walk_files(&latest).unwrap().len(), 2, "{mode}");
        assert!(
            m.log_text().contains(if mode == "inotify" {
                "with inotify"
            } else {
                "polling every"
            }),
            "{}",
            m.log_text()
        );
        eprintln!("{mode}: latest showed the new commit after {took:?}");
    }
}

/// Every file below `root`, relative to it.
fn tree(root: &Path) -> std::collections::BTreeSet<std::path::PathBuf> {
    let mut out = std::collections::BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path().strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    out
}

/// Writers that put a timeline file in place whole rather than writing it where it ends up:
/// a temporary name beside it renamed into place (`<name>#1`, object_store's local store
/// overwriting), one in `.hoodie/.temp/` or outside the watched directory renamed, and a
/// temporary name linked into place and removed (object_store's local store creating a file,
/// as hudi-rs's writer does; the link makes no close-write event). Each commit moves latest/
/// as a direct write does, not at the 30-second safety rescan.
#[test]
fn commits_put_in_place_by_rename_or_link_move_latest() {
    if !support::fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // The writer writes each commit in `source`; the mounted copy gets its files the way the
    // writer under test would put them.
    let (mut w, a) = cow_table(&dir.path().join("source"));
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(1, 4)).unwrap();
    t.complete().unwrap();
    let source = w.root().to_path_buf();
    let mounted = dir.path().join("mounted");
    let copy = |rel: &Path| {
        let to = mounted.join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(source.join(rel), to).unwrap();
    };
    for rel in tree(&source) {
        copy(&rel);
    }
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let m = support::MountGuard::mount(&mounted, &["--poll-interval", "100"]);
    let latest = m.path().join("latest");
    for (round, way) in ["rename #1", "rename .temp", "rename outside", "link"]
        .into_iter()
        .enumerate()
    {
        let before = tree(&source);
        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(&a, &rows(10 + round as u64, 2)).unwrap();
        let instant = t.complete().unwrap();
        let new: Vec<_> = tree(&source).difference(&before).cloned().collect();
        // Data files and the requested and inflight states first, as a writer writes them.
        let completed: Vec<_> = new
            .iter()
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                p.starts_with(".hoodie")
                    && !name.ends_with(".requested")
                    && !name.ends_with(".inflight")
                    && name.contains(instant.as_str())
            })
            .cloned()
            .collect();
        assert_eq!(completed.len(), 1, "{new:?}");
        for rel in new.iter().filter(|p| !completed.contains(p)) {
            copy(rel);
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_ne!(
            support::xattr(&latest, "user.hudi.instant").as_deref(),
            Some(instant.as_str())
        );
        let rel = &completed[0];
        let to = mounted.join(rel);
        let bytes = std::fs::read(source.join(rel)).unwrap();
        let temp = match way {
            "rename #1" | "link" => {
                to.with_file_name(format!("{}#1", to.file_name().unwrap().to_string_lossy()))
            }
            "rename .temp" => {
                let t = mounted.join(".hoodie/.temp");
                std::fs::create_dir_all(&t).unwrap();
                t.join(format!("{round}.tmp"))
            }
            _ => outside.join(format!("{round}.tmp")),
        };
        std::fs::write(&temp, &bytes).unwrap();
        if way == "link" {
            std::fs::hard_link(&temp, &to).unwrap();
            std::fs::remove_file(&temp).unwrap();
        } else {
            std::fs::rename(&temp, &to).unwrap();
        }
        let took = wait_for(
            &format!("latest to show the commit put in place by {way}"),
            || support::xattr(&latest, "user.hudi.instant").as_deref() == Some(instant.as_str()),
        );
        eprintln!("{way}: latest showed the commit after {took:?}");
    }
    assert_eq!(
        support::walk_files(&latest).unwrap().len(),
        5,
        "{}",
        m.log_text()
    );
}

/// What the kernel is told after latest/ moves: the view root and the touched partition's
/// directory go stale, and so does the name of the file that left the view.
#[test]
fn invalidations_name_what_left_latest() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, a) = cow_table(dir.path());
    let b = w.partition_path(&["b"]).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    let f = t.insert(&a, &rows(1, 4)).unwrap();
    t.insert(&b, &rows(2, 4)).unwrap();
    t.complete().unwrap();
    let root = w.root().to_path_buf();
    let fs = HudiFs::new(&root, opts()).unwrap();
    let latest = fs.lookup(ROOT, OsStr::new("latest")).unwrap().attr.ino;
    let part = fs.lookup(latest, OsStr::new(&a)).unwrap().attr.ino;
    let old_name = fs.readdir_entries(part).unwrap()[0].name.to_string();
    fs.lookup(latest, OsStr::new(&b)).unwrap();

    let mut t = w.begin(Action::Commit).unwrap();
    t.update(&a, &f, &rows_with_ids(3, &[1000])).unwrap();
    t.complete().unwrap();
    let inv = Follower::new()
        .poll_once(&fs, Duration::ZERO)
        .unwrap()
        .unwrap();
    assert_eq!(
        inv.touched.as_ref().unwrap().iter().collect::<Vec<_>>(),
        [&a]
    );
    assert!(
        inv.inodes.contains(&latest) && inv.inodes.contains(&part),
        "{inv:?}"
    );
    assert!(inv.entries.contains(&(part, old_name.clone())), "{inv:?}");
    assert!(!inv.entries.iter().any(|(p, _)| *p == part
        && fs
            .readdir_entries(part)
            .unwrap()
            .iter()
            .any(|e| *e.name == *old_name)));
    // The untouched partition is left alone.
    let other = fs.lookup(latest, OsStr::new(&b)).unwrap().attr.ino;
    assert!(!inv.inodes.contains(&other), "{inv:?}");
}

/// Whether instants were archived decides what the timeline shows: a listing of the archive that
/// fails does not count as an empty archive. The change is not applied (the previous snapshot is
/// served), and it is once the storage answers again, equal to a fresh read.
#[test]
fn a_failed_archive_listing_keeps_the_previous_snapshot() {
    use hudifs_storage::{Fault, FaultyStore, LocalStore, Op, Rule};
    use std::sync::Arc;
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let spec =
            TableSpec::new("t", TableType::CopyOnWrite, version).partitioned_by(&["p"], true);
        let mut w = TableWriter::create(&dir.path().join("t"), spec, START).unwrap();
        let root = w.root().to_path_buf();
        let a = w.partition_path(&["a"]).unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(&a, &rows(1, 4)).unwrap();
        t.complete().unwrap();
        let faulty = Arc::new(FaultyStore::new(
            Arc::new(LocalStore::new(&root).unwrap()),
            1,
        ));
        let live = HudiFs::with_store(faulty.clone(), opts()).unwrap();
        let before = live.latest_instant();

        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(&a, &rows(2, 3)).unwrap();
        t.complete().unwrap();
        let archive = live.snapshot().cfg.archive_dir.as_str().to_string();
        faulty.add(
            Rule::new(Fault::Error(std::io::ErrorKind::ConnectionReset))
                .on(&[Op::List])
                .matching(&archive),
        );
        let failed = Follower::new().poll_once(&live, Duration::ZERO);
        assert!(
            failed.is_err(),
            "v{version}: a change applied over a failed archive listing"
        );
        assert_eq!(live.latest_instant(), before, "v{version}: latest/ moved");
        assert!(
            faulty.injected() > 0,
            "v{version}: the archive was not listed"
        );
        faulty.clear();
        assert!(
            refresh(&live),
            "v{version}: the change once the store answers"
        );
        assert_ne!(live.latest_instant(), before);
        check_same_as_fresh(
            &live,
            &root,
            &format!("v{version}: after the failed listing"),
        );
    }
}

/// Names of directory `dir` read with `getdents64` into a buffer of `buf` bytes per call (a
/// small one makes a listing take many calls, with a switch of `latest/` between them).
fn getdents_names(dir: &Path, buf: usize) -> std::io::Result<Vec<String>> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
    // SAFETY: a valid C string; the descriptor is closed below.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut b = vec![0u8; buf];
    let res = loop {
        // SAFETY: the buffer is `buf` bytes long and `fd` is open.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, b.as_mut_ptr(), b.len()) };
        if n < 0 {
            break Err(std::io::Error::last_os_error());
        }
        if n == 0 {
            break Ok(());
        }
        let mut at = 0usize;
        while at < n as usize {
            // struct linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name (NUL-ended).
            let reclen = u16::from_ne_bytes([b[at + 16], b[at + 17]]) as usize;
            let name = &b[at + 19..at + reclen];
            let end = name.iter().position(|c| *c == 0).unwrap_or(name.len());
            let name = String::from_utf8_lossy(&name[..end]).to_string();
            if name != "." && name != ".." {
                out.push(name);
            }
            at += reclen;
        }
    };
    // SAFETY: `fd` is open.
    unsafe { libc::close(fd) };
    res.map(|()| out)
}

/// The partition the writer of the test below fills in its round `round`.
fn round_partition(round: usize) -> String {
    format!("p=r{round}")
}

/// Every listing of a `latest/` directory shows one snapshot, each name once, while commits
/// change that directory under readers that share the kernel's cached listing: a listing read
/// in many calls never continues in a listing of another snapshot (where its offsets mean other
/// names). The writer moves to a new partition every few commits, to keep listings short and
/// switches many.
#[test]
fn listings_of_latest_never_mix_snapshots_while_a_writer_commits() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
    use std::sync::Arc;
    if !support::fuse_available() {
        return;
    }
    const PER_PARTITION: usize = 24;
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = cow_table(dir.path());
    let mut order: Vec<Vec<String>> = vec![Vec::new()];
    let p0 = w.partition_path(&["r0"]).unwrap();
    assert_eq!(p0, round_partition(0));
    let mut t = w.begin(Action::Commit).unwrap();
    order[0].push(t.insert(&p0, &rows(1, 2)).unwrap());
    t.complete().unwrap();
    let m = support::MountGuard::mount(w.root(), &[]);
    let latest = m.path().join("latest");
    let (stop, round) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let readers: Vec<_> = (0..4)
        .map(|r| {
            let (latest, stop, round) = (latest.clone(), stop.clone(), round.clone());
            std::thread::spawn(move || {
                let mut listings = Vec::new();
                while !stop.load(Relaxed) {
                    let k = round.load(Relaxed);
                    let d = latest.join(round_partition(k));
                    let names = if r % 2 == 0 {
                        // One entry per call.
                        getdents_names(&d, 160)
                    } else {
                        std::fs::read_dir(&d).and_then(|d| {
                            d.map(|e| e.map(|e| e.file_name().to_string_lossy().to_string()))
                                .collect()
                        })
                    };
                    match names {
                        Ok(n) => listings.push((k, n)),
                        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}"),
                    }
                }
                listings
            })
        })
        .collect();
    let began = Instant::now();
    let mut seed = 2;
    while began.elapsed() < Duration::from_secs(8) {
        let mut k = order.len() - 1;
        if order[k].len() == PER_PARTITION {
            order.push(Vec::new());
            k += 1;
        }
        let p = w.partition_path(&[&format!("r{k}")]).unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        order[k].push(t.insert(&p, &rows(seed, 2)).unwrap());
        t.complete().unwrap();
        round.store(k, Relaxed);
        seed += 1;
    }
    stop.store(true, Relaxed);
    let (mut checked, mut bad) = (0, Vec::new());
    for r in readers {
        for (k, names) in r.join().unwrap() {
            checked += 1;
            // Inserts only: a snapshot shows the partition's first j file groups, one file each.
            let rank = |n: &String| {
                let id = n.split('_').next().unwrap_or("");
                order[k].iter().position(|o| o == id).unwrap_or(usize::MAX)
            };
            let mut ranks: Vec<usize> = names.iter().map(rank).collect();
            ranks.sort_unstable();
            if ranks.iter().enumerate().any(|(i, r)| *r != i) {
                bad.push(format!("{}: ranks {ranks:?}", round_partition(k)));
            }
        }
    }
    let commits: usize = order.iter().map(Vec::len).sum();
    eprintln!(
        "{commits} commits, {checked} listings, {} of no snapshot",
        bad.len()
    );
    let warnings: Vec<String> = m
        .log_text()
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .take(10)
        .map(str::to_string)
        .collect();
    assert!(
        bad.is_empty(),
        "listings of no snapshot: {:?}\ndaemon warnings: {warnings:#?}",
        &bad[..bad.len().min(5)]
    );
}

/// A change inotify named that fails to apply (here: the archive cannot be listed, so whether
/// instants were archived is unknown) is not lost with the event: the timeline is listed again
/// soon, and once the archive reads again the commit shows, with no further event naming it.
#[test]
fn a_change_that_failed_to_apply_is_listed_again_soon() {
    if !support::fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut w, a) = cow_table(dir.path());
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(1, 2)).unwrap();
    let c1 = t.complete().unwrap();
    let m = support::MountGuard::mount(w.root(), &[]);
    let latest = m.path().join("latest");
    assert_eq!(
        support::xattr(&latest, "user.hudi.instant"),
        Some(c1.clone())
    );
    // The follower starts watching on its own thread, maybe after the mount is served.
    wait_for("the follower to watch with inotify", || {
        m.log_text().contains("with inotify")
    });

    // The archive becomes unlistable (a file where its directory belongs), then a commit comes.
    let history = w.root().join(".hoodie/timeline/history");
    if history.is_dir() {
        std::fs::remove_dir_all(&history).unwrap();
    }
    std::fs::write(&history, b"not a directory").unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(2, 2)).unwrap();
    let c2 = t.complete().unwrap();
    wait_for("the failed apply to be logged", || {
        m.log_text().contains("refresh failed")
    });
    // The commit's files were all renamed in before `complete` returned, so their events are
    // queued; the follower may take them in more than one batch: let it fail on each.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(support::xattr(&latest, "user.hudi.instant"), Some(c1));

    // The archive reads again: nothing names the commit any more, yet latest/ moves to it well
    // before the idle rescan (30 s).
    std::fs::remove_file(&history).unwrap();
    std::fs::create_dir(&history).unwrap();
    let took = wait_for("latest to show the commit that failed to apply", || {
        support::xattr(&latest, "user.hudi.instant").as_deref() == Some(c2.as_str())
    });
    eprintln!("latest showed the commit {took:?} after the archive read again");
}

/// A commit that completes after the mount read the timeline but before the follower's watch
/// starts makes no inotify event: the follower lists the timeline once when it starts, so the
/// commit shows at once, not at the idle rescan 30 s later.
#[test]
fn a_commit_before_the_watch_starts_is_not_missed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut w, a) = cow_table(dir.path());
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(1, 2)).unwrap();
    t.complete().unwrap();
    let fs = std::sync::Arc::new(HudiFs::new(w.root(), opts()).unwrap());
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(2, 2)).unwrap();
    let c2 = t.complete().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let follower = {
        let (fs, stop) = (fs.clone(), stop.clone());
        std::thread::spawn(move || Follower::new().run(fs, None, Duration::from_secs(1), stop))
    };
    // (Should this fail, the follower thread ends with the test binary.)
    wait_for(
        "latest to show the commit made before the watch started",
        || fs.latest_instant().as_deref() == Some(c2.as_str()),
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    follower.join().unwrap();
}

/// A poll leaves a timeline file it finds too young to read for a later round. A commit whose
/// events come meanwhile must wait for it: `latest/` never shows a commit while an earlier
/// one, already complete, is missing. (Here the earlier commit completed just before the watch
/// started, so no event will ever announce it, and the follower's first poll finds it young.)
#[test]
fn a_commit_never_shows_before_an_earlier_one_a_poll_left_for_later() {
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let (mut w, a) = cow_table(dir.path());
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(1, 2)).unwrap();
    t.complete().unwrap();
    let fs = Arc::new(HudiFs::new(w.root(), opts()).unwrap());
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(2, 2)).unwrap();
    let c1 = t.complete().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let follower = {
        let (fs, stop) = (fs.clone(), stop.clone());
        std::thread::spawn(move || Follower::new().run(fs, None, Duration::from_secs(1), stop))
    };
    // The follower's first poll runs now and finds `c1` younger than the settle time.
    std::thread::sleep(Duration::from_millis(10));
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&a, &rows(3, 2)).unwrap();
    let c2 = t.complete().unwrap();
    let began = Instant::now();
    let mut gaps = 0;
    let mut both = false;
    while began.elapsed() < Duration::from_secs(3) && !both {
        let snap = fs.snapshot();
        let tl = snap.timeline();
        let (has1, has2) = (tl.is_committed(&c1), tl.is_committed(&c2));
        gaps += usize::from(has2 && !has1);
        both = has1 && has2;
    }
    stop.store(true, SeqCst);
    follower.join().unwrap();
    assert!(both, "latest never showed both commits");
    assert_eq!(gaps, 0, "snapshots showed {c2} without {c1}");
}
