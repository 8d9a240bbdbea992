//! Merges ahead of a reader (SEMANTICS.md §10.6), through the file system's logic: a reader
//! looking up the slices of a `merged/` directory in order finds the next two merged without
//! asking (two merges ahead, no more), and across a partition's end the first slices of the
//! partition a walk visits next (resolved ahead of it); a reader that skips around starts none.

use std::ffi::OsStr;
use std::time::{Duration, Instant};

use hudifs::fs::{HudiFs, ROOT};
use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};

/// A merge-on-read table with six file groups in `city=a`, each with a log.
fn table(root: &std::path::Path) {
    let spec = TableSpec::new("ahead", TableType::MergeOnRead, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let groups: Vec<String> = (0..6)
        .map(|i| t.insert("city=a", &rows(i + 1, 50)).unwrap())
        .collect();
    t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    for (i, g) in groups.iter().enumerate() {
        let id = (i as i64 + 1) * 1000;
        t.update("city=a", g, &rows_with_ids(10 + i as u64, &[id, id + 1]))
            .unwrap();
    }
    t.complete().unwrap();
}

/// The directory `merged/latest/city=a` and its names, in order.
fn dir(fs: &HudiFs) -> (u64, Vec<String>) {
    let mut ino = ROOT;
    for p in ["merged", "latest", "city=a"] {
        ino = fs.lookup(ino, OsStr::new(p)).unwrap().attr.ino;
    }
    let mut names: Vec<String> = fs
        .readdir_entries(ino)
        .unwrap()
        .iter()
        .map(|e| e.name.to_string())
        .collect();
    names.sort();
    (ino, names)
}

/// `fs.merges_run()` once it reaches `n` (or after 30 s), then after a further pause.
fn merges_settle(fs: &HudiFs, n: u64) -> u64 {
    let start = Instant::now();
    while fs.merges_run() < n && start.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    fs.merges_run()
}

#[test]
fn a_reader_in_order_finds_the_next_slices_merged() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    table(&root);
    let fs = crate::fs_with_merge_cache(&root, &tmp.path().join("cache-1"));
    let (d, names) = dir(&fs);
    assert_eq!(names.len(), 6, "{names:?}");
    assert!(names.iter().all(|n| n.ends_with(".merged.parquet")));
    assert_eq!(fs.merges_run(), 0, "a listing merges nothing");
    fs.lookup(d, OsStr::new(&names[0])).unwrap();
    assert_eq!(merges_settle(&fs, 1), 1, "the first slice alone");
    // The second in order: the third and fourth are merged ahead, no more.
    fs.lookup(d, OsStr::new(&names[1])).unwrap();
    assert_eq!(merges_settle(&fs, 4), 4, "two slices merged ahead");
    // The reader goes on: it finds each slice merged (or merging) ahead of it, and the rest
    // go ahead of it in turn; the last one was merged before it got there.
    for n in &names[2..5] {
        fs.lookup(d, OsStr::new(n)).unwrap();
    }
    assert_eq!(merges_settle(&fs, 6), 6, "the rest merged ahead");
    fs.lookup(d, OsStr::new(&names[5])).unwrap();
    assert_eq!(fs.merges_run(), 6, "the last slice was merged ahead");

    // A reader that skips around merges only what it asks for.
    let fs = crate::fs_with_merge_cache(&root, &tmp.path().join("cache-2"));
    let (d, names) = dir(&fs);
    fs.lookup(d, OsStr::new(&names[3])).unwrap();
    fs.lookup(d, OsStr::new(&names[1])).unwrap();
    fs.lookup(d, OsStr::new(&names[5])).unwrap();
    assert_eq!(
        merges_settle(&fs, 3),
        3,
        "no merge ahead of a skipping reader"
    );
}

/// A merge-on-read table with three file groups in each of `city=a`, `city=b` and `city=c`,
/// each with a log.
fn partitioned_table(root: &std::path::Path) {
    let spec = TableSpec::new("across", TableType::MergeOnRead, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let parts = ["city=a", "city=b", "city=c"];
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let mut groups = Vec::new();
    for (p, part) in parts.iter().enumerate() {
        for g in 0..3u64 {
            let seed = p as u64 * 3 + g + 1;
            groups.push((*part, seed, t.insert(part, &rows(seed, 50)).unwrap()));
        }
    }
    t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    for (part, seed, g) in &groups {
        let id = *seed as i64 * 1000;
        t.update(part, g, &rows_with_ids(20 + seed, &[id, id + 1]))
            .unwrap();
    }
    t.complete().unwrap();
}

/// The inode of `merged/latest/<part>`.
fn part_dir(fs: &HudiFs, part: &str) -> u64 {
    let mut ino = ROOT;
    for p in ["merged", "latest", part] {
        ino = fs.lookup(ino, OsStr::new(p)).unwrap().attr.ino;
    }
    ino
}

/// The names of directory `d`, in order, each with whether it is merged (its listed size).
fn listed(fs: &HudiFs, d: u64) -> Vec<(String, bool)> {
    let mut names: Vec<(String, bool)> = fs
        .readdir_entries(d)
        .unwrap()
        .iter()
        .map(|e| (e.name.to_string(), e.entry.attr.size > 0))
        .collect();
    names.sort();
    names
}

/// Watch how many merges ahead run at once in `fs` until `done` is set: the most seen (the
/// thread's answer).
fn watch_peak(
    fs: &std::sync::Arc<HudiFs>,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<usize>,
) {
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (fs, stop) = (fs.clone(), done.clone());
    let peak = std::thread::spawn(move || {
        let mut peak = 0;
        while !stop.load(std::sync::atomic::Ordering::Acquire) {
            peak = peak.max(fs.merges_ahead());
            std::thread::sleep(Duration::from_micros(200));
        }
        peak
    });
    (done, peak)
}

#[test]
fn a_reader_in_order_finds_the_next_partition_merged() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    partitioned_table(&root);
    let fs = crate::fs_with_merge_cache(&root, &tmp.path().join("cache-1")).shared();
    // The most merges ahead running at once, watched throughout.
    let (done, peak) = watch_peak(&fs);
    // The reader lists `city=a` alone: `city=b` is not resolved until the read-ahead gets
    // there.
    let a = part_dir(&fs, "city=a");
    let names: Vec<String> = listed(&fs, a).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 3, "{names:?}");
    fs.lookup(a, OsStr::new(&names[0])).unwrap();
    assert_eq!(merges_settle(&fs, 1), 1, "the first slice alone");
    // The second in order: the third, and the first of `city=b`, are merged ahead.
    fs.lookup(a, OsStr::new(&names[1])).unwrap();
    assert_eq!(merges_settle(&fs, 4), 4, "two slices merged ahead, across");
    // The last of `city=a`: the first two of `city=b` are merged ahead, no more.
    fs.lookup(a, OsStr::new(&names[2])).unwrap();
    assert_eq!(
        merges_settle(&fs, 5),
        5,
        "the second of city=b merged ahead"
    );
    let b = part_dir(&fs, "city=b");
    let b_names = listed(&fs, b);
    let merged: Vec<bool> = b_names.iter().map(|(_, m)| *m).collect();
    assert_eq!(
        merged,
        [true, true, false],
        "city=b's first slices merged without asking: {b_names:?}"
    );
    let c = part_dir(&fs, "city=c");
    assert!(
        listed(&fs, c).iter().all(|(_, m)| !m),
        "nothing merged two slices past the reader"
    );
    assert_eq!(fs.merges_run(), 5, "listings merge nothing");
    // The reader goes on into `city=b` (still in order: the last of `city=a` is merged) and
    // finds its first slice merged; the read-ahead moves on by one.
    fs.lookup(b, OsStr::new(&b_names[0].0)).unwrap();
    assert_eq!(merges_settle(&fs, 6), 6, "the third of city=b merged ahead");
    done.store(true, std::sync::atomic::Ordering::Release);
    let peak = peak.join().unwrap();
    assert!(peak <= 2, "{peak} merges ahead at once");
}

/// On an object store a merge mostly waits on its requests: four slices are merged ahead of a
/// reader in order, at most four at a time, across partitions.
#[test]
fn on_an_object_store_four_slices_are_merged_ahead() {
    use hudifs_storage::{FaultyStore, LocalStore};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    partitioned_table(&root);
    let store = std::sync::Arc::new(FaultyStore::new(
        std::sync::Arc::new(LocalStore::new(&root).unwrap()),
        1,
    ));
    let opts = crate::opts_with_merge_cache(&tmp.path().join("cache"));
    let fs = HudiFs::with_store(std::sync::Arc::new(crate::AsObjectStore(store)), opts)
        .unwrap()
        .shared();
    let (done, peak) = watch_peak(&fs);
    let a = part_dir(&fs, "city=a");
    let names: Vec<String> = listed(&fs, a).into_iter().map(|(n, _)| n).collect();
    fs.lookup(a, OsStr::new(&names[0])).unwrap();
    assert_eq!(merges_settle(&fs, 1), 1, "the first slice alone");
    // The second in order: the third of city=a and the three of city=b are merged ahead.
    fs.lookup(a, OsStr::new(&names[1])).unwrap();
    assert_eq!(merges_settle(&fs, 6), 6, "four slices merged ahead, across");
    let b = part_dir(&fs, "city=b");
    assert!(
        listed(&fs, b).iter().all(|(_, m)| *m),
        "city=b merged ahead"
    );
    let c = part_dir(&fs, "city=c");
    assert!(
        listed(&fs, c).iter().all(|(_, m)| !m),
        "nothing merged four slices past the reader"
    );
    done.store(true, std::sync::atomic::Ordering::Release);
    let peak = peak.join().unwrap();
    assert!(peak <= 4, "{peak} merges ahead at once");
}

#[test]
fn a_reader_skipping_across_partitions_starts_none() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    partitioned_table(&root);
    let fs = crate::fs_with_merge_cache(&root, &tmp.path().join("cache-2")).shared();
    let (a, b, c) = (
        part_dir(&fs, "city=a"),
        part_dir(&fs, "city=b"),
        part_dir(&fs, "city=c"),
    );
    let names = |d| -> Vec<String> { listed(&fs, d).into_iter().map(|(n, _)| n).collect() };
    let (na, nb, nc) = (names(a), names(b), names(c));
    fs.lookup(b, OsStr::new(&nb[1])).unwrap();
    fs.lookup(a, OsStr::new(&na[2])).unwrap();
    fs.lookup(c, OsStr::new(&nc[0])).unwrap();
    fs.lookup(a, OsStr::new(&na[0])).unwrap();
    assert_eq!(
        merges_settle(&fs, 4),
        4,
        "no merge ahead of a skipping reader"
    );
}
