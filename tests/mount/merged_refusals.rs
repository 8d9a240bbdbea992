//! The merged view's refusals and materialisation through a real mount, on tables written by
//! the project's generator (SEMANTICS §10): each refusal fails `stat` and `open` of the merged
//! file with its errno and one daemon log line naming the slice and the reason, and leaves no
//! file in the merge cache — EFBIG (log records over `--merge-memory`), EIO (a committed block
//! that does not decode; a log deleted between the listing and the merge), EOPNOTSUPP (a custom
//! merge mode, a custom payload class). A `readdir` of `merged/` merges nothing, parallel
//! `stat`s of one slice merge it once, a warm `ls -l` merges nothing, and a merged file's bytes
//! are the same after the cache is evicted and after a remount (with and without the cache).

use crate::merge;
use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Barrier};

use hudifs_core::table::{TableType, METADATA_BOOTSTRAP_INSTANT};
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{read_blocks, rows, rows_with_ids, TableSpec, TableWriter};
use support::MountGuard;

/// A MOR table: `city=a` and `city=b` with a base file and two logs each (`city=a`'s first
/// with `log_rows` records, the others 5), `city=c` a base file only. Returns the table root.
fn table(dir: &Path, spec: TableSpec, log_rows: usize) -> PathBuf {
    let root = dir.join("table");
    let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let mut groups = Vec::new();
    for (i, city) in ["city=a", "city=b", "city=c"].iter().enumerate() {
        groups.push((
            city.to_string(),
            t.insert(city, &rows(i as u64 + 1, 50)).unwrap(),
        ));
    }
    t.complete().unwrap();
    for round in 0..2u64 {
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        for (i, (p, f)) in groups.iter().take(2).enumerate() {
            let n = if round == 0 && i == 0 { log_rows } else { 5 };
            let base = (i as i64 + 1) * 1000;
            let ids: Vec<i64> = (0..n as i64).map(|k| base + k).collect();
            t.update(p, f, &rows_with_ids(10 + round, &ids)).unwrap();
        }
        t.complete().unwrap();
    }
    root
}

fn mor(version: u32) -> TableSpec {
    TableSpec::new("gen_refuse", TableType::MergeOnRead, version).partitioned_by(&["city"], true)
}

/// The log files of a partition, sorted.
fn logs(root: &Path, partition: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(partition))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().contains(".log."))
        .collect();
    v.sort();
    v
}

/// The one merged file of `city=a` in `merged/latest/`.
fn merged_a(m: &MountGuard) -> PathBuf {
    let dir = m.path().join("merged/latest/city=a");
    let n = merge::names(&dir);
    assert_eq!(n.len(), 1, "{n:?}");
    dir.join(&n[0])
}

/// Mount, check that `city=a`'s merged file is refused with `errno` and a log line holding
/// `reason`, and that the merge cache holds no merged or temporary file. Returns the log line.
fn refused(root: &Path, extra: &[&str], errno: i32, reason: &str) -> String {
    let cache = root.parent().unwrap().join("merge-cache");
    let mut args = vec!["--merge-cache", cache.to_str().unwrap()];
    args.extend_from_slice(extra);
    let m = MountGuard::mount(root, &args);
    let f = merged_a(&m);
    assert_eq!(merge::refused_errno(&f), (errno, errno), "{}", f.display());
    // Asked again: the same answer (remembered or merged again), still one log line.
    assert_eq!(merge::refused_errno(&f), (errno, errno));
    let log = m.log_text();
    let name = f.file_name().unwrap().to_string_lossy().to_string();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(&format!("merged file city=a/{name}")))
        .collect();
    assert_eq!(lines.len(), 1, "one log line per refused slice: {log}");
    assert!(
        lines[0].contains(reason),
        "{reason:?} not in {:?}",
        lines[0]
    );
    let left: Vec<String> = merge::cache_files(&cache)
        .into_iter()
        .filter(|n| n.ends_with(".parquet") || n.starts_with("tmp-"))
        .collect();
    assert!(
        left.is_empty(),
        "partial files in the merge cache: {left:?}"
    );
    assert_eq!(merge::merges_logged(&log), 0, "{log}");
    // The other slices: unaffected by a slice's refusal; refused alike for a table-wide one.
    let b = m.path().join("merged/latest/city=b");
    for n in merge::names(&b) {
        match std::fs::read(b.join(n)) {
            Ok(bytes) => assert!(bytes.starts_with(b"PAR1") && errno != libc::EOPNOTSUPP),
            Err(e) => assert!(
                errno == libc::EOPNOTSUPP && e.raw_os_error() == Some(errno),
                "{e}: {}",
                m.log_text()
            ),
        }
    }
    lines[0].to_string()
}

#[test]
fn efbig_when_the_logs_exceed_the_memory_cap() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = table(tmp.path(), mor(9), 1000);
    // city=a's logs hold 1005 records (over 64 KiB), city=b's 10.
    let line = refused(&root, &["--merge-memory", "64K"], libc::EFBIG, "memory");
    eprintln!("EFBIG: {line}");
}

#[test]
fn eio_when_a_committed_block_does_not_decode() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = table(tmp.path(), mor(6), 20);
    let log = logs(&root, "city=a")[0].clone();
    let mut bytes = std::fs::read(&log).unwrap();
    let blocks = read_blocks(&bytes).unwrap();
    let content = &blocks[0].content;
    let at = bytes
        .windows(content.len())
        .position(|w| w == &content[..])
        .unwrap();
    // The framing stays intact (the block is not skipped as corrupt); its records do not
    // decode: the record count and the first record's length become garbage.
    for b in &mut bytes[at + 4..at + 12] {
        *b = 0x7f;
    }
    std::fs::write(&log, &bytes).unwrap();
    let line = refused(&root, &[], libc::EIO, "city=a");
    eprintln!("EIO (corrupt block): {line}");
}

#[test]
fn eio_when_a_log_vanishes_between_listing_and_merge() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = table(tmp.path(), mor(9), 20);
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
    // Listed (readdir names the slice, nothing merged), then a log goes away.
    let dir = m.path().join("merged/latest/city=a");
    let n = merge::names(&dir);
    std::fs::remove_file(&logs(&root, "city=a")[0]).unwrap();
    let f = dir.join(&n[0]);
    let (se, oe) = merge::refused_errno(&f);
    assert_eq!((se, oe), (libc::EIO, libc::EIO), "{}", m.log_text());
    let log = m.log_text();
    let line = log
        .lines()
        .find(|l| l.contains(&format!("merged file city=a/{}", n[0])))
        .unwrap_or_else(|| panic!("no log line: {log}"));
    eprintln!("EIO (vanished): {line}");
    let left: Vec<String> = merge::cache_files(&cache)
        .into_iter()
        .filter(|n| n.ends_with(".parquet") || n.starts_with("tmp-"))
        .collect();
    assert!(
        left.is_empty(),
        "partial files in the merge cache: {left:?}"
    );
}

#[test]
fn eopnotsupp_for_custom_merge_modes_and_payloads() {
    if !support::fuse_available() {
        return;
    }
    for (spec, reason) in [
        (
            mor(9).with_property("hoodie.record.merge.mode", "CUSTOM"),
            "hoodie.record.merge.mode=CUSTOM",
        ),
        (
            mor(6).with_property("hoodie.compaction.payload.class", "com.acme.MyPayload"),
            "com.acme.MyPayload",
        ),
        // Half a delete marker (Java refuses it too), and a partial-update mode hudifs does not
        // merge: merging without them would serve rows Hudi does not.
        (
            mor(9)
                .with_property("hoodie.record.merge.mode", "EVENT_TIME_ORDERING")
                .with_property(
                    "hoodie.record.merge.property.hoodie.payload.delete.field",
                    "Op",
                ),
            "hoodie.record.merge.property.hoodie.payload.delete.marker",
        ),
        (
            mor(9).with_property("hoodie.table.partial.update.mode", "FILL_DEFAULTS"),
            "hoodie.table.partial.update.mode=FILL_DEFAULTS",
        ),
        (
            mor(9).with_property("hoodie.table.partial.update.mode", "FILL_UNAVAILABLE"),
            "without its unavailable value",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let root = table(tmp.path(), spec, 20);
        let line = refused(&root, &[], libc::EOPNOTSUPP, reason);
        eprintln!("EOPNOTSUPP: {line}");
    }
}

/// Every file below `dir` whose name holds `from` renamed to hold `to` instead, and in the
/// timeline's files every mention of it too.
fn rename_instant(dir: &Path, from: &str, to: &str) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rename_instant(&p, from, to);
            continue;
        }
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if p.components().any(|c| c.as_os_str() == ".hoodie") {
            if let Ok(text) = std::fs::read_to_string(&p) {
                std::fs::write(&p, text.replace(from, to)).unwrap();
            }
        }
        if name.contains(from) {
            std::fs::rename(&p, p.with_file_name(name.replace(from, to))).unwrap();
        }
    }
}

/// A metadata-only bootstrap leaves skeleton base files (instant `00000000000001`) holding the
/// meta columns alone; they are served stitched with their source files (tests/mount/
/// bootstrap.rs). A table that says it is bootstrapped but has no bootstrap index has no source
/// to stitch with: served as data, a reader would get none of the table's columns, so every
/// view refuses the skeleton (`EIO`, a log line naming it), plain and merged, and serves the
/// other groups.
#[test]
fn metadata_bootstrap_skeletons_without_an_index_are_refused_not_served() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let mut w = TableWriter::create(&root, mor(6), 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let fa = t.insert("city=a", &rows(1, 20)).unwrap();
    let bootstrap = t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.insert("city=b", &rows(2, 20)).unwrap();
    t.update("city=a", &fa, &rows_with_ids(3, &[1000, 1001]))
        .unwrap();
    t.complete().unwrap();
    // The first write becomes the bootstrap's: its instant in every name and timeline file.
    rename_instant(&root, &bootstrap, METADATA_BOOTSTRAP_INSTANT);
    let props = root.join(".hoodie/hoodie.properties");
    let mut text = std::fs::read_to_string(&props).unwrap();
    text.push_str("hoodie.bootstrap.base.path=/data/source\n");
    std::fs::write(&props, text).unwrap();

    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
    let a = m.path().join("latest/city=a");
    let skeleton: Vec<String> = merge::names(&a)
        .into_iter()
        .filter(|n| n.ends_with(&format!("_{METADATA_BOOTSTRAP_INSTANT}.parquet")))
        .collect();
    assert_eq!(skeleton.len(), 1, "{:?}", merge::names(&a));
    let e = match std::fs::read(a.join(&skeleton[0])) {
        Ok(b) => panic!("the skeleton was served as data: {} bytes", b.len()),
        Err(e) => e,
    };
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let merged = merged_a(&m);
    assert_eq!(merge::refused_errno(&merged), (libc::EIO, libc::EIO));
    // The group written the ordinary way is served, plain and merged.
    for dir in ["latest/city=b", "merged/latest/city=b"] {
        let d = m.path().join(dir);
        let names = merge::names(&d);
        assert_eq!(names.len(), 1, "{dir}: {names:?}");
        assert!(std::fs::read(d.join(&names[0]))
            .unwrap()
            .starts_with(b"PAR1"));
    }
    let log = m.log_text();
    assert!(
        log.contains("metadata-only bootstrap skeleton"),
        "no log line names the skeleton: {log}"
    );
}

/// Every merged file of `merged/latest/` (relative name → bytes).
fn read_all(m: &MountGuard) -> BTreeMap<String, Vec<u8>> {
    let root = m.path().join("merged/latest");
    let mut out = BTreeMap::new();
    for p in merge::names(&root) {
        for n in merge::names(&root.join(&p)) {
            out.insert(
                format!("{p}/{n}"),
                std::fs::read(root.join(&p).join(&n)).unwrap(),
            );
        }
    }
    out
}

#[test]
fn listing_merges_nothing_stat_merges_once_and_bytes_are_stable() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = table(tmp.path(), mor(9), 30);
    let cache = tmp.path().join("merge-cache");
    let args = ["--merge-cache", cache.to_str().unwrap()];
    let mut m = MountGuard::mount(&root, &args);
    // readdir of every merged view and partition: names only, no merge.
    let merged = m.path().join("merged");
    let mut listed = 0;
    for v in ["latest".to_string()].into_iter().chain(
        merge::names(&merged.join("as_of"))
            .into_iter()
            .map(|t| format!("as_of/{t}")),
    ) {
        for p in merge::names(&merged.join(&v)) {
            // `ls -l merged/<view>/` stats the partition directories: no merge either.
            assert!(std::fs::metadata(merged.join(&v).join(&p))
                .unwrap()
                .is_dir());
            listed += merge::names(&merged.join(&v).join(p)).len();
        }
    }
    assert!(listed >= 9, "{listed}");
    assert_eq!(merge::merges_logged(&m.log_text()), 0, "{}", m.log_text());
    // Eight parallel stats of one slice: one merge, one size.
    let f = merged_a(&m);
    let gate = Arc::new(Barrier::new(8));
    let sizes: Vec<u64> = (0..8)
        .map(|_| {
            let (f, gate) = (f.clone(), gate.clone());
            std::thread::spawn(move || {
                gate.wait();
                std::fs::metadata(&f).unwrap().len()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    assert!(sizes.iter().all(|s| *s == sizes[0] && *s > 0), "{sizes:?}");
    assert_eq!(merge::merges_logged(&m.log_text()), 1, "{}", m.log_text());
    // `ls -l` of merged/latest: the other slice with logs merges; city=c is its base file.
    let ls_l = |m: &MountGuard| {
        let root = m.path().join("merged/latest");
        for p in merge::names(&root) {
            for e in std::fs::read_dir(root.join(p)).unwrap() {
                assert!(e.unwrap().metadata().unwrap().len() > 0);
            }
        }
    };
    ls_l(&m);
    assert_eq!(merge::merges_logged(&m.log_text()), 2, "{}", m.log_text());
    // Warm: `ls -l` again merges nothing.
    ls_l(&m);
    assert_eq!(merge::merges_logged(&m.log_text()), 2);
    let first = read_all(&m);
    assert_eq!(first.len(), 3);
    // Evicted while mounted (the cache files removed): merged again, the same bytes.
    for n in merge::cache_files(&cache) {
        if n.ends_with(".parquet") {
            std::fs::remove_file(cache.join(n)).unwrap();
        }
    }
    assert_eq!(read_all(&m), first, "bytes after eviction");
    assert_eq!(merge::merges_logged(&m.log_text()), 4, "{}", m.log_text());
    // Remounted over the warm cache: served from it, no merge, the same bytes.
    m.unmount();
    let mut m = MountGuard::mount(&root, &args);
    assert_eq!(read_all(&m), first, "bytes after a remount");
    assert_eq!(merge::merges_logged(&m.log_text()), 0, "{}", m.log_text());
    // Remounted without the cache: merged again, the same bytes.
    m.unmount();
    std::fs::remove_dir_all(&cache).unwrap();
    let m = MountGuard::mount(&root, &args);
    assert_eq!(
        read_all(&m),
        first,
        "bytes after a remount without the cache"
    );
    assert_eq!(merge::merges_logged(&m.log_text()), 2, "{}", m.log_text());
}
