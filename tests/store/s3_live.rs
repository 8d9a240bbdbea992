//! Following writers on a real S3 server (moto on 127.0.0.1, behind the test kit's counting
//! proxy): what listings cost in requests, counted at the HTTP level — one LIST per partition
//! the first time, none for a warm walk, one LIST per idle poll, and after a commit, a rollback
//! or a clean only the partitions its metadata names listed again (all of them where the
//! metadata cannot be read) — and that the snapshot a store mount builds change after change
//! equals a fresh read. Then a real mount follows `hudifs-writer` writing to the store
//! (docs/SEMANTICS.md §9).

use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::Arc;

use hudifs::follow::Follower;
use hudifs::fs::{FsOptions, HudiFs, Kind, ROOT};
use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_objstore::{ObjectStorage, StoreUrl};
use hudifs_storage::{Storage, StorageWrite, TablePath};
use hudifs_testkit::generator::{rows, Clock, TableSpec, TableWriter};
use hudifs_testkit::s3::{options, percent_decode, store_args, FaultProxy, ProxyCounts};

const START: i64 = 1_767_225_600_000;

fn store(url: &str, endpoint: &str) -> Arc<ObjectStorage> {
    Arc::new(ObjectStorage::new(StoreUrl::parse(url).unwrap(), &options(endpoint)).unwrap())
}

/// The LIST requests among `c`: the prefix each asked for, and whether it grouped by a
/// delimiter (names of the level below, a directory as one name) rather than listing keys.
fn list_requests(c: &ProxyCounts) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    for line in &c.lines {
        let Some(q) = line.split_once('?').map(|(_, q)| q) else {
            continue;
        };
        // The request line: `GET /bucket?k=v&k=v HTTP/1.1`.
        let kv: Vec<&str> = q.split(['&', ' ']).collect();
        let has = |k: &str| kv.iter().any(|x| x.starts_with(k));
        if !(has("list-type") || has("delimiter=")) {
            continue;
        }
        let prefix = kv
            .iter()
            .find_map(|x| x.strip_prefix("prefix="))
            .map(percent_decode)
            .unwrap_or_default();
        out.push((prefix, has("delimiter=")));
    }
    out
}

/// The prefixes the LIST requests among `c` asked for, with how often.
fn listed(c: &ProxyCounts) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (prefix, _) in list_requests(c) {
        *out.entry(prefix).or_default() += 1;
    }
    out
}

/// The LIST requests among `c` of exactly `prefix`: how many grouped by a delimiter, and how
/// many listed keys (`start-after` and continuation pages included).
fn lists_of(c: &ProxyCounts, prefix: &str) -> (u64, u64) {
    let of = list_requests(c).into_iter().filter(|(p, _)| p == prefix);
    of.fold(
        (0, 0),
        |(n, k), (_, names)| {
            if names {
                (n + 1, k)
            } else {
                (n, k + 1)
            }
        },
    )
}

/// Every view a caller can list (latest, each as_of, each window), with its files.
fn everything(fs: &HudiFs) -> BTreeMap<String, Vec<String>> {
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
    let mut out = BTreeMap::new();
    for top in ["latest", "as_of", "incremental"] {
        let ino = fs.lookup(ROOT, OsStr::new(top)).unwrap().attr.ino;
        let views: Vec<(String, u64)> = if top == "latest" {
            vec![("latest".into(), ino)]
        } else {
            fs.readdir_entries(ino)
                .unwrap()
                .into_iter()
                .filter_map(|e| {
                    let v = fs.lookup(ino, OsStr::new(&*e.name)).ok()?;
                    Some((format!("{top}/{}", e.name), v.attr.ino))
                })
                .collect()
        };
        for (key, v) in views {
            let mut files = Vec::new();
            let r = walk(fs, v, "", &mut files);
            out.insert(
                key,
                r.map(|_| files)
                    .unwrap_or_else(|e| vec![format!("errno {e}")]),
            );
        }
    }
    out
}

/// Walk all of `latest/`; the number of files.
fn walk_latest(fs: &HudiFs) -> usize {
    fn walk(fs: &HudiFs, ino: u64) -> usize {
        fs.readdir_entries(ino)
            .unwrap()
            .into_iter()
            .map(|e| match e.entry.attr.kind {
                Kind::Dir => walk(fs, e.entry.attr.ino),
                Kind::File => 1,
            })
            .sum()
    }
    walk(fs, fs.lookup(ROOT, OsStr::new("latest")).unwrap().attr.ino)
}

fn poll(fs: &HudiFs) -> bool {
    let inv = Follower::new()
        .poll_once(fs, hudifs::follow::SETTLE)
        .unwrap();
    if let Some(inv) = &inv {
        fs.switched(inv);
    }
    inv.is_some()
}

/// A v9 copy-on-write table at `url`, partitioned by `city`, with one commit writing a file to
/// each of `cities`: the writer and the partitions' paths.
fn cow_table(url: &str, endpoint: &str, cities: &[&str]) -> (TableWriter, Vec<String>) {
    let wstore: Arc<dyn StorageWrite> = store(url, endpoint);
    let spec = TableSpec::new("t", TableType::CopyOnWrite, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create_in(wstore, spec, Clock::Logical { start_ms: START }).unwrap();
    let parts: Vec<String> = cities
        .iter()
        .map(|c| w.partition_path(&[c]).unwrap())
        .collect();
    let mut t = w.begin(Action::Commit).unwrap();
    for (i, p) in parts.iter().enumerate() {
        t.insert(p, &rows(i as u64 + 1, 3)).unwrap();
    }
    t.complete().unwrap();
    (w, parts)
}

/// The store mount's snapshot, built change after change, equals a fresh read of the store.
fn check_same_as_fresh(live: &HudiFs, url: &str, endpoint: &str, step: &str) {
    let fresh = HudiFs::with_store(store(url, endpoint), FsOptions::default()).unwrap();
    assert_eq!(
        live.snapshot().ctx.facts(),
        fresh.snapshot().ctx.facts(),
        "{step}: incrementally derived facts differ from a fresh read"
    );
    assert_eq!(
        everything(live),
        everything(&fresh),
        "{step}: incremental snapshot differs from a fresh read"
    );
}

#[test]
fn a_small_store_table_is_listed_whole_once_and_a_commit_relists_what_it_touched() {
    let moto = support::moto();
    let proxy = FaultProxy::start(moto.addr, 1);
    let url = "s3://lake/counted/t";
    let prefix = "counted/t/";
    // The writer writes straight to moto; the mount reads through the counting proxy.
    let (mut w, parts) = cow_table(url, &moto.endpoint, &["a", "b", "c"]);

    // Mount (in process) and walk latest/ for the first time.
    proxy.reset_counts();
    let fs = HudiFs::with_store(store(url, &proxy.endpoint), FsOptions::default()).unwrap();
    let mounted = proxy.counts();
    assert_eq!(walk_latest(&fs), 3);
    let cold = proxy.counts();
    // A small table's tree is listed whole, in two LISTs, not one LIST per directory: the
    // top-level names (a delimiter listing: what sorts before .hoodie/), then the keys after
    // .hoodie/.
    let lists = listed(&cold);
    assert_eq!(lists_of(&cold, prefix), (1, 1), "{:?}", cold.lines);
    for p in &parts {
        assert_eq!(
            lists.get(&format!("{prefix}{p}/")),
            None,
            "partition {p} listed on its own from mount to first walk: {lists:?}"
        );
    }
    assert_eq!(lists.get(prefix), Some(&2), "{lists:?}");
    assert_eq!(
        cold.requests,
        mounted.requests,
        "the first walk of latest/ reuses the discovery's listings: {}",
        cold.summary()
    );
    eprintln!(
        "store counts: mount + first walk of latest/ ({} partitions): {}",
        parts.len(),
        cold.summary()
    );

    // Warm: no request at all.
    proxy.reset_counts();
    assert_eq!(walk_latest(&fs), 3);
    let warm = proxy.counts();
    assert_eq!(
        warm.requests,
        0,
        "a warm walk makes no request: {}",
        warm.summary()
    );

    // Idle polls: one LIST of the timeline each.
    proxy.reset_counts();
    for _ in 0..5 {
        assert!(!poll(&fs));
    }
    let idle = proxy.counts();
    assert_eq!(
        (idle.requests, idle.list),
        (5, 5),
        "five idle polls: {}",
        idle.summary()
    );
    assert!(
        listed(&idle)
            .keys()
            .all(|k| k.starts_with(&format!("{prefix}.hoodie/timeline"))),
        "idle polls list the timeline only: {:?}",
        idle.lines
    );
    eprintln!("store counts: 5 idle polls: {}", idle.summary());

    // A commit touching city=a: only a is listed again.
    let relisted = |what: &str, touched: &[&String], fs: &HudiFs| {
        proxy.reset_counts();
        assert!(poll(fs), "{what}: the poll saw the change");
        walk_latest(fs);
        let c = proxy.counts();
        let lists = listed(&c);
        for p in &parts {
            let n = lists.get(&format!("{prefix}{p}/")).copied().unwrap_or(0);
            let want = u64::from(touched.contains(&p));
            assert_eq!(
                n, want,
                "{what}: partition {p} listed {n} times (touched: {touched:?}): {:?}",
                c.lines
            );
        }
        eprintln!("store counts: {what}, poll + walk: {}", c.summary());
        check_same_as_fresh(fs, url, &moto.endpoint, what);
    };
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&parts[0], &rows(10, 2)).unwrap();
    t.complete().unwrap();
    relisted("commit to a", &[&parts[0]], &fs);

    // A failed write to b, rolled back: b again.
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&parts[1], &rows(11, 2)).unwrap();
    let failed = t.abandon();
    w.rollback(&failed).unwrap();
    relisted("rollback in b", &[&parts[1]], &fs);

    // An update of c's file group, then a clean of its older slice: c again, each time.
    let (_, fid) = w
        .file_groups()
        .into_iter()
        .find(|(p, _)| *p == parts[2])
        .unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.update(&parts[2], &fid, &rows(12, 3)).unwrap();
    let update = t.complete().unwrap();
    relisted("update of c", &[&parts[2]], &fs);
    let old = w.group_files(&parts[2], &fid);
    let victim = old.iter().find(|n| !n.contains(&update)).unwrap().clone();
    w.clean(&update, &[(parts[2].clone(), victim)]).unwrap();
    relisted("clean in c", &[&parts[2]], &fs);

    // An instant whose metadata cannot be read: every partition is listed again (this small
    // table's whole tree, in two LISTs).
    let tl = w.timeline_dir().clone();
    let name = "20990101000000000_20990101000000001.commit";
    w.store()
        .put(&tl.child(name).unwrap(), b"{ not json")
        .unwrap();
    let all: Vec<&String> = parts.iter().collect();
    proxy.reset_counts();
    assert!(poll(&fs), "unreadable commit: the poll saw the change");
    walk_latest(&fs);
    let c = proxy.counts();
    let lists = listed(&c);
    for p in &all {
        assert_eq!(
            lists.get(&format!("{prefix}{p}/")),
            None,
            "unreadable metadata: partition {p} listed on its own: {:?}",
            c.lines
        );
    }
    assert_eq!(
        lists.get(prefix),
        Some(&2),
        "unreadable metadata: the tree listed again once: {:?}",
        c.lines
    );
    eprintln!(
        "store counts: unreadable commit, poll + walk: {}",
        c.summary()
    );
}

/// Files of `latest/` in `hudifs ls --json` of the store table, read afresh.
fn ls_latest(url: &str, endpoint: &str) -> (Vec<String>, String) {
    let args = [
        "ls",
        "--json",
        url,
        "--endpoint-url",
        endpoint,
        "--force-path-style",
    ];
    let (code, out, err) = support::run_hudifs(args);
    assert_eq!(code, 0, "hudifs ls: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let mut files: Vec<String> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    files.sort();
    (files, v["instant"].as_str().unwrap_or_default().to_string())
}

/// A real mount of a table `hudifs-writer` writes to the store: it follows the writer (polling
/// at --poll-interval) and ends on what a fresh read of the store shows; when idle its requests
/// are LISTs of the timeline only, and a warm `find latest` makes none.
#[test]
fn a_store_mount_follows_hudifs_writer_on_the_store() {
    if !support::fuse_available() {
        return;
    }
    let moto = support::moto();
    let proxy = FaultProxy::start(moto.addr, 2);
    let url = "s3://lake/followed/t";
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("writer.log");
    let mut writer = std::process::Command::new(hudifs_testkit::mount::binary("hudifs-writer"))
        .args([
            "--table",
            url,
            "--endpoint-url",
            &moto.endpoint,
            "--force-path-style",
        ])
        .args(["--seed", "3", "--duration-ms", "6000", "--ops-per-sec", "6"])
        .arg("--log")
        .arg(&log)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let direct = store(url, &moto.endpoint);
    let props = hudifs_storage::TablePath::new(".hoodie/hoodie.properties").unwrap();
    let t0 = std::time::Instant::now();
    while hudifs_storage::Storage::stat(&*direct, &props).is_err() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "the writer did not create the table"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut args = store_args(&proxy.endpoint);
    args.extend(["--poll-interval".to_string(), "200".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let m = support::MountGuard::mount(std::path::Path::new(url), &args);
    // The table's configuration costs one GET in the launcher (which checks the table before
    // touching the mount point) and one in the keeper, which hands what it read to the daemon it
    // starts (docs/SEMANTICS.md §7.11).
    let props: Vec<String> = proxy
        .counts()
        .lines
        .into_iter()
        .filter(|l| l.contains("hoodie.properties"))
        .collect();
    assert_eq!(props.len(), 2, "{props:?}");
    assert!(props.iter().all(|l| l.starts_with("GET ")), "{props:?}");
    let latest = m.path().join("latest");
    let mut instants = std::collections::BTreeSet::new();
    let mut walks = 0;
    while writer.try_wait().unwrap().is_none() {
        if let Some(i) = support::xattr(&latest, "user.hudi.instant") {
            instants.insert(i);
        }
        support::walk_files(&latest).unwrap();
        walks += 1;
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(writer.wait().unwrap().success(), "hudifs-writer failed");
    // The mount ends on the state a fresh read of the store shows.
    let (want, want_instant) = ls_latest(url, &moto.endpoint);
    let t0 = std::time::Instant::now();
    loop {
        let mut got = support::walk_files(&latest).unwrap();
        got.sort();
        let instant = support::xattr(&latest, "user.hudi.instant").unwrap_or_default();
        if got == want && instant == want_instant {
            break;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "latest/ did not reach the writer's final state {want_instant}: {instant}, \
             {got:?} vs {want:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        instants.len() > 3,
        "latest/ moved only through {instants:?} during {walks} walks"
    );
    // Idle: LISTs of the timeline only.
    let timeline_list = |line: &String| line.contains("list-type") && line.contains("timeline");
    std::thread::sleep(std::time::Duration::from_millis(500));
    proxy.reset_counts();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // At 200 ms there are polls in 1.5 s; a machine too busy for that gets more time.
    let t0 = std::time::Instant::now();
    while proxy.counts().list == 0 && t0.elapsed() < std::time::Duration::from_secs(10) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let idle = proxy.counts();
    assert!(
        idle.list >= 1,
        "no poll in 11.5 s at 200 ms: {}",
        idle.summary()
    );
    assert!(
        idle.lines.iter().all(timeline_list),
        "idle requests other than timeline LISTs: {:?}",
        idle.lines
    );
    // A warm find of latest/: nothing but the polls' LISTs.
    support::walk_files(&latest).unwrap();
    proxy.reset_counts();
    let files = support::walk_files(&latest).unwrap();
    let warm = proxy.counts();
    let other: Vec<&String> = warm.lines.iter().filter(|l| !timeline_list(l)).collect();
    assert!(
        other.is_empty(),
        "a warm find of latest/ ({} files) made requests: {other:?}",
        files.len()
    );
    // timeline/: each file is read once (a GET; size and time come from the timeline's last
    // listing, no HEAD); listing it again costs nothing.
    let timeline = m.path().join("timeline");
    proxy.reset_counts();
    let rendered = support::walk_files(&timeline).unwrap();
    let first = proxy.counts();
    assert_eq!(
        first.head,
        0,
        "timeline/ asked with HEADs: {}",
        first.summary()
    );
    proxy.reset_counts();
    assert_eq!(support::walk_files(&timeline).unwrap(), rendered);
    let again = proxy.counts();
    let asked: Vec<&String> = again.lines.iter().filter(|l| !timeline_list(l)).collect();
    assert!(
        asked.is_empty(),
        "listing timeline/ ({} files) again made requests: {asked:?}",
        rendered.len()
    );
    eprintln!(
        "store mount: followed {} instants of hudifs-writer in {walks} walks; idle 1.5 s at \
         200 ms polls: {}; warm find of {} files: {} requests besides polls; timeline/ of {} \
         files listed again: {} requests besides polls",
        instants.len(),
        idle.summary(),
        files.len(),
        other.len(),
        rendered.len(),
        asked.len()
    );
}

/// A store request that takes long (here: a partition's LIST held by the proxy) holds no FUSE
/// thread: with a single one, while a reader waits on that listing, other requests (opendir,
/// readdir, getxattr, stat, a read of an open file) are answered; the held listing then
/// completes with the new file (SEMANTICS.md §9). Without the hand-off to the store's threads,
/// the other requests would wait for the held one.
#[test]
fn a_slow_store_listing_holds_no_fuse_thread() {
    use std::os::unix::fs::FileExt;
    use std::sync::mpsc;
    use std::time::Duration;
    if !support::fuse_available() {
        return;
    }
    let moto = support::moto();
    let proxy = FaultProxy::start(moto.addr, 3);
    let url = "s3://lake/held/t";
    let (mut w, parts) = cow_table(url, &moto.endpoint, &["a", "b"]);

    let mut args = store_args(&proxy.endpoint);
    args.extend(["--threads", "1", "--poll-interval", "100"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let m = support::MountGuard::mount(std::path::Path::new(url), &args);
    let latest = m.path().join("latest");
    // Only a is walked: b was listed at mount but never handed to the kernel, so after a
    // commit to it, the follower does not list it again; the first request inside b does.
    let (a, b) = (latest.join(&parts[0]), latest.join(&parts[1]));
    support::walk_files(&a).unwrap();
    let a_file = std::fs::read_dir(&a)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let open = std::fs::File::open(&a_file).unwrap();
    let size = open.metadata().unwrap().len();

    // A commit to b; once the mount shows it, b's listing is due on next use, a FUSE request:
    // its LIST is held.
    proxy.hold(&format!("prefix=held/t/{}/", parts[1]));
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&parts[1], &rows(20, 2)).unwrap();
    let instant = t.complete().unwrap();
    let t0 = std::time::Instant::now();
    while !support::walk_files(&m.path().join("timeline"))
        .unwrap()
        .iter()
        .any(|f| f.starts_with(&instant) && f.ends_with(".commit"))
    {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the commit never showed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        proxy.held(),
        0,
        "b was listed before any request asked for it"
    );
    let (tx, slow) = mpsc::channel();
    let b2 = b.clone();
    std::thread::spawn(move || {
        let _ = tx.send(support::walk_files(&b2).map_err(|e| e.to_string()));
    });
    let t0 = std::time::Instant::now();
    while proxy.held() == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "listing b never reached the store: {}",
            proxy.counts().summary()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Meanwhile, with b's listing held on the only FUSE thread's request, the rest answers.
    let (tx, quick) = mpsc::channel();
    let (a2, latest2, f2) = (a.clone(), latest.clone(), a_file.clone());
    std::thread::spawn(move || {
        let mut buf = vec![0; 16];
        let r = (|| -> std::io::Result<usize> {
            let names = support::walk_files(&a2)?;
            std::fs::metadata(&f2)?;
            support::xattr(&latest2, "user.hudi.instant").ok_or(std::io::ErrorKind::Other)?;
            open.read_at(&mut buf, size - 16)?;
            Ok(names.len())
        })();
        let _ = tx.send(r.map_err(|e| e.to_string()));
    });
    let answered = quick.recv_timeout(Duration::from_secs(20));
    let still_held = slow.try_recv().is_err();
    proxy.release();
    let listed_a = answered.expect("requests waited behind the held store listing");
    assert!(listed_a.unwrap() > 0, "latest/a lists its files");
    assert!(still_held, "the held listing answered before its release");
    let b_files = slow
        .recv_timeout(Duration::from_secs(60))
        .expect("the held listing never completed")
        .unwrap();
    assert_eq!(
        b_files.len(),
        2,
        "b has its first file and the new one: {b_files:?}"
    );
    eprintln!(
        "held store listing: {} requests held; meanwhile latest/a, stat, getxattr and a read \
         were answered on the single FUSE thread",
        proxy.held()
    );
}

/// A listing of the whole tree on a real server keeps every key outside `.hoodie/`, also those
/// that sort before it (found from the top level's names, then listed): a directory `-1/` (a
/// negative partition value), a root file `.early` and a directory `.hoodie-old/`; and
/// `.hoodie_partition_metadata`, just after it.
#[test]
fn a_tree_listing_keeps_the_keys_that_sort_before_the_timeline() {
    let moto = support::moto();
    let proxy = FaultProxy::start(moto.addr, 1);
    let url = "s3://lake/sorted/t";
    let keys = [
        ".hoodie/hoodie.properties",
        ".hoodie/timeline/20260101000000000.commit",
        "-1/.hoodie_partition_metadata",
        "-1/a.parquet",
        ".early",
        ".hoodie-old/y",
        ".hoodie_partition_metadata",
        "p=1/.hoodie_partition_metadata",
        "p=1/b.parquet",
    ];
    let writer = store(url, &moto.endpoint);
    for k in keys {
        writer.put(&TablePath::new(k).unwrap(), b"x").unwrap();
    }
    let reader = store(url, &proxy.endpoint);
    proxy.reset_counts();
    let tree = Storage::list_tree(&*reader, &TablePath::root(), ".hoodie", &|_| true)
        .expect("the tree is listed");
    let mut got: Vec<&str> = tree.iter().map(|(p, _)| p.as_str()).collect();
    got.sort_unstable();
    let mut want: Vec<&str> = keys
        .into_iter()
        .filter(|k| !k.starts_with(".hoodie/"))
        .collect();
    want.sort_unstable();
    assert_eq!(got, want);
    // The top level's names, each directory sorting before .hoodie/, the keys after it.
    let c = proxy.counts();
    assert_eq!(c.list, 4, "{:?}", c.lines);
    assert_eq!(lists_of(&c, "sorted/t/"), (1, 1), "{:?}", c.lines);
}

/// A table of 5,000 partitions with a metadata table (the test kit writes it as Java does):
/// a cold mount and first walk of `latest/` make a few dozen requests listed from the metadata
/// table (SEMANTICS.md §1.10), where a storage listing costs a page per 1,000 objects at best
/// and a LIST per partition at worst; both show the same files.
#[test]
fn a_wide_table_mounts_in_few_requests_from_its_metadata_table() {
    const PARTITIONS: usize = 5_000;
    let moto = support::moto();
    let proxy = FaultProxy::start(moto.addr, 1);
    let url = "s3://lake/wide/t";
    let tmp = tempfile::tempdir().unwrap();
    let t0 = std::time::Instant::now();
    hudifs_testkit::generator::build_wide_table(
        tmp.path(),
        9,
        TableType::CopyOnWrite,
        PARTITIONS,
        START,
    )
    .unwrap();
    let objects = hudifs_testkit::s3::upload(tmp.path(), url, &moto.endpoint);
    let built = t0.elapsed();
    let mut seen = Vec::new();
    for listing in [
        hudifs_core::listing_source::ListingMode::Auto,
        hudifs_core::listing_source::ListingMode::Storage,
    ] {
        proxy.reset_counts();
        let opts = FsOptions {
            listing,
            ..FsOptions::default()
        };
        let fs = HudiFs::with_store(store(url, &proxy.endpoint), opts).unwrap();
        assert_eq!(walk_latest(&fs), PARTITIONS, "{listing}");
        let c = proxy.counts();
        eprintln!(
            "wide table ({PARTITIONS} partitions, {objects} objects, written and uploaded in \
             {:.1} s): --listing {listing}: mount + first walk of latest/: {}",
            built.as_secs_f64(),
            c.summary()
        );
        if listing == hudifs_core::listing_source::ListingMode::Storage {
            // The top level holds 5,000 names after .hoodie/: the names before it take one
            // page, not five.
            let (names, keys) = lists_of(&c, "wide/t/");
            assert_eq!(names, 1, "{:?}", &c.lines[..c.lines.len().min(20)]);
            assert!(keys > 1, "{keys} pages of keys");
        }
        seen.push((c.requests, everything(&fs)));
    }
    let (mdt, storage) = (&seen[0], &seen[1]);
    assert!(mdt.0 <= 50, "{} requests with the metadata table", mdt.0);
    assert!(
        storage.0 > mdt.0,
        "storage {} vs metadata table {}",
        storage.0,
        mdt.0
    );
    assert!(
        mdt.1 == storage.1,
        "the views differ between the two listings"
    );
}
