//! Metadata-only bootstrapped tables (SEMANTICS.md §10.11) through the file system's logic: a
//! skeleton is served stitched with its source file in `latest/`, `as_of/` and `merged/`, sized
//! as stitched, named by `user.hudi.stitched_from`; later writes slice and merge as usual; bad
//! input (no source file, no index, no index entry, row counts that differ) is refused with
//! EIO, a source under a base path that cannot be opened with EOPNOTSUPP.
//! Expected rows are what the table kit wrote (source rows and bootstrap meta values), read back
//! with the parquet crate's record reader.

use std::ffi::OsStr;
use std::sync::Arc;

use hudifs::fs::{HudiFs, ROOT};
use hudifs_core::table::{TableType, METADATA_BOOTSTRAP_INSTANT};
use hudifs_core::timeline::Action;
use hudifs_storage::{LocalStore, StorageWrite};
use hudifs_testkit::generator::{
    bootstrapped_table, rows_with_ids, seqno_matches, stitched_rows, BootstrappedGroup,
    TableWriter, STITCHED_COLUMNS,
};
use hudifs_testkit::support::parquet_rows;

fn walk(fs: &HudiFs, path: &[&str]) -> hudifs_core::error::Result<u64> {
    let mut ino = ROOT;
    for p in path {
        ino = fs.lookup(ino, OsStr::new(p))?.attr.ino;
    }
    Ok(ino)
}

fn names(fs: &HudiFs, ino: u64) -> Vec<String> {
    let mut n: Vec<String> = fs
        .readdir_entries(ino)
        .unwrap()
        .into_iter()
        .map(|e| e.name.to_string())
        .collect();
    n.sort();
    n
}

fn read_all(fs: &HudiFs, ino: u64) -> hudifs_core::error::Result<Vec<u8>> {
    let fh = fs.open(ino)?.fh;
    let mut got = Vec::new();
    loop {
        let chunk = crate::read_now(fs, fh, got.len() as u64, 1 << 20)?;
        if chunk.is_empty() {
            break;
        }
        got.extend(chunk);
    }
    fs.release(fh);
    Ok(got)
}

struct Table {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    source: std::path::PathBuf,
    cache: std::path::PathBuf,
    w: TableWriter,
    groups: Vec<BootstrappedGroup>,
}

fn table(tt: TableType, version: u32) -> Table {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let source = tmp.path().join("source");
    std::fs::create_dir_all(&source).unwrap();
    let src: Arc<dyn StorageWrite> = Arc::new(LocalStore::new(&source).unwrap());
    let uri = format!("file:{}", source.display());
    let (w, groups) = bootstrapped_table(&root, &*src, &uri, tt, version).unwrap();
    Table {
        cache: tmp.path().join("cache"),
        _tmp: tmp,
        root,
        source,
        w,
        groups,
    }
}

impl Table {
    fn fs(&self) -> HudiFs {
        crate::fs_with_merge_cache(&self.root, &self.cache)
    }

    fn group(&self, partition: &str) -> &BootstrappedGroup {
        self.groups
            .iter()
            .find(|g| g.partition == partition)
            .unwrap()
    }
}

fn skeleton_name(g: &BootstrappedGroup) -> String {
    g.skeleton.rsplit('/').next().unwrap().to_string()
}

/// The skeleton's file, read through `path`, holds the stitched rows of `g`.
fn assert_stitched(fs: &HudiFs, path: &[&str], g: &BootstrappedGroup) {
    let ino = walk(fs, path).unwrap();
    let bytes = read_all(fs, ino).unwrap();
    assert_eq!(fs.getattr(ino).unwrap().attr.size, bytes.len() as u64);
    let (columns, rows) = parquet_rows(&bytes);
    assert_eq!(columns, STITCHED_COLUMNS, "{path:?}");
    assert!(
        seqno_matches(&rows, &stitched_rows(g)),
        "{path:?}: {rows:?}\nexpected {:?}",
        stitched_rows(g)
    );
}

/// The instant time (`yyyyMMddHHmmssSSS`) `ms` milliseconds after 2026-01-01T00:00:00Z (the
/// kit's clock start), within that day.
fn time_after_start(ms: i64) -> String {
    let (h, m, s, f) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    assert!(h < 24);
    format!("20260101{h:02}{m:02}{s:02}{f:03}")
}

fn check_latest_and_as_of(tt: TableType, version: u32) {
    let mut t = table(tt, version);
    let fs = t.fs();
    for g in &t.groups {
        let name = skeleton_name(g);
        assert_eq!(
            names(&fs, walk(&fs, &["latest", &g.partition]).unwrap()),
            std::slice::from_ref(&name)
        );
        assert_stitched(&fs, &["latest", &g.partition, &name], g);
        // merged/: a skeleton slice without logs is its (stitched) file.
        assert_stitched(&fs, &["merged", "latest", &g.partition, &name], g);
        let x = fs
            .xattrs(walk(&fs, &["latest", &g.partition, &name]).unwrap())
            .unwrap();
        let from = x
            .iter()
            .find(|(k, _)| k == "user.hudi.stitched_from")
            .map(|(_, v)| v.clone())
            .unwrap();
        assert!(from.contains(&g.skeleton), "{from}");
        assert!(from.contains(&g.source), "{from}");
    }
    // The skeleton alone on disk holds only the meta columns: it is not what was served.
    let (columns, _) =
        parquet_rows(&std::fs::read(t.root.join(&t.group("city=a").skeleton)).unwrap());
    assert_eq!(columns, &STITCHED_COLUMNS[..5]);

    // An upsert on the bootstrapped group of city=a (copy-on-write: a new base file; merge on
    // read: a log).
    let a = t.group("city=a").clone();
    // A time after the bootstrap and before the upsert.
    let t0 = time_after_start(t.w.clock_ms() - 1 - 1_767_225_600_000);
    let mut upd = rows_with_ids(7, &[a.rows[0].id, a.rows[1].id, 5_000_000]);
    // Newer by event time too (tables ordered by `ts` keep the greater).
    for r in &mut upd {
        r.ts = 1_800_000_000_000;
    }
    let mut txn = t.w.begin(t.w.write_action()).unwrap();
    txn.update("city=a", &a.file_id, &upd).unwrap();
    txn.complete().unwrap();
    let fs = t.fs();
    let snapshot_rows = |path: &[&str]| {
        let ino = walk(&fs, path).unwrap();
        let (cols, mut rows) = parquet_rows(&read_all(&fs, ino).unwrap());
        let id = cols.iter().position(|c| c == "id").unwrap();
        let name = cols.iter().position(|c| c == "name").unwrap();
        rows.sort_by_key(|r| r[id].parse::<i64>().unwrap());
        rows.iter()
            .map(|r| (r[id].parse::<i64>().unwrap(), r[name].clone()))
            .collect::<Vec<_>>()
    };
    let mut model: Vec<(i64, String)> =
        t.w.group_rows("city=a", &a.file_id)
            .unwrap()
            .into_iter()
            .map(|r| (r.id, r.name))
            .collect();
    model.sort();
    assert_eq!(model.len(), 21);
    let merged = names(&fs, walk(&fs, &["merged", "latest", "city=a"]).unwrap());
    assert_eq!(merged.len(), 1, "{merged:?}");
    assert_eq!(
        snapshot_rows(&["merged", "latest", "city=a", &merged[0]]),
        model
    );
    if tt == TableType::CopyOnWrite {
        let latest = names(&fs, walk(&fs, &["latest", "city=a"]).unwrap());
        assert_eq!(snapshot_rows(&["latest", "city=a", &latest[0]]), model);
    } else {
        // The log of the bootstrapped slice is listed beside its stitched skeleton.
        let latest = names(&fs, walk(&fs, &["latest", "city=a"]).unwrap());
        assert_eq!(latest.len(), 2, "{latest:?}");
        assert!(latest.contains(&skeleton_name(&a)));
    }
    // As of the bootstrap: the stitched skeleton.
    assert_stitched(&fs, &["as_of", &t0, "city=a", &skeleton_name(&a)], &a);
    assert_stitched(
        &fs,
        &["merged", "as_of", &t0, "city=a", &skeleton_name(&a)],
        &a,
    );
    // The upsert's window: merged/incremental/ holds its three records; cdc/ its two updates
    // (before images from the stitched rows) and one insert.
    let window = format!("{t0}..");
    let inc = names(
        &fs,
        walk(&fs, &["merged", "incremental", &window, "city=a"]).unwrap(),
    );
    assert_eq!(inc.len(), 1, "{inc:?}");
    let mut got: Vec<(i64, String)> =
        snapshot_rows(&["merged", "incremental", &window, "city=a", &inc[0]]);
    got.sort();
    let mut want: Vec<(i64, String)> = upd.iter().map(|r| (r.id, r.name.clone())).collect();
    want.sort();
    assert_eq!(got, want);
    let feed = names(&fs, walk(&fs, &["cdc", &window, "city=a"]).unwrap());
    assert_eq!(feed.len(), 1, "{feed:?}");
    let ino = walk(&fs, &["cdc", &window, "city=a", &feed[0]]).unwrap();
    let (cols, records) = parquet_rows(&read_all(&fs, ino).unwrap());
    let op = cols.iter().position(|c| c == "op").unwrap();
    let before = cols.iter().position(|c| c == "before").unwrap();
    let after = cols.iter().position(|c| c == "after").unwrap();
    let mut ops: Vec<String> = records.iter().map(|r| r[op].clone()).collect();
    ops.sort();
    assert_eq!(ops, ["i", "u", "u"], "{records:?}");
    for (old, new) in a.rows[..2].iter().zip(&upd) {
        let r = records
            .iter()
            .find(|r| r[after].contains(&format!("name: \"{}\"", new.name)))
            .unwrap_or_else(|| panic!("no record of {}: {records:?}", new.id));
        assert!(
            r[before].contains(&format!("name: \"{}\"", old.name)),
            "the before image is not the stitched row: {r:?}"
        );
    }
    // The bootstrap's own window: incremental/ lists the skeleton (stitched), and
    // merged/incremental/ holds the stitched rows; cdc/ refuses it (no time just before the
    // bootstrap instant, SEMANTICS.md §10.10).
    let first = format!("..{t0}");
    assert_stitched(
        &fs,
        &["incremental", &first, "city=a", &skeleton_name(&a)],
        &a,
    );
    let inc = names(
        &fs,
        walk(&fs, &["merged", "incremental", &first, "city=a"]).unwrap(),
    );
    assert_eq!(inc.len(), 1, "{inc:?}");
    let ino = walk(&fs, &["merged", "incremental", &first, "city=a", &inc[0]]).unwrap();
    let (columns, rows) = parquet_rows(&read_all(&fs, ino).unwrap());
    assert_eq!(columns, STITCHED_COLUMNS);
    assert!(seqno_matches(&rows, &stitched_rows(&a)), "{rows:?}");
    assert!(walk(&fs, &["cdc", &first]).is_err());
    // The group not written since is still the stitched skeleton.
    let b = t.group("city=b").clone();
    assert_stitched(&fs, &["latest", "city=b", &skeleton_name(&b)], &b);
}

#[test]
fn cow_v6_skeletons_are_served_stitched() {
    check_latest_and_as_of(TableType::CopyOnWrite, 6);
}

#[test]
fn cow_v9_skeletons_are_served_stitched() {
    check_latest_and_as_of(TableType::CopyOnWrite, 9);
}

#[test]
fn mor_v6_skeleton_slices_merge_over_stitched_rows() {
    check_latest_and_as_of(TableType::MergeOnRead, 6);
}

#[test]
fn mor_v8_skeleton_slices_merge_over_stitched_rows() {
    check_latest_and_as_of(TableType::MergeOnRead, 8);
}

/// A merge-on-read group compacted after the bootstrap: the compacted base file is whole.
#[test]
fn a_compacted_bootstrapped_group_is_an_ordinary_slice() {
    let mut t = table(TableType::MergeOnRead, 8);
    let a = t.group("city=a").clone();
    let mut txn = t.w.begin(Action::DeltaCommit).unwrap();
    txn.update("city=a", &a.file_id, &rows_with_ids(9, &[a.rows[3].id]))
        .unwrap();
    txn.complete().unwrap();
    let c =
        t.w.schedule_compaction(&[("city=a".to_string(), a.file_id.clone())])
            .unwrap();
    t.w.run_compaction(&c, true).unwrap();
    let fs = t.fs();
    let latest = names(&fs, walk(&fs, &["latest", "city=a"]).unwrap());
    assert_eq!(latest.len(), 1, "{latest:?}");
    assert!(!latest[0].contains(METADATA_BOOTSTRAP_INSTANT));
    let (cols, rows) = parquet_rows(
        &read_all(&fs, walk(&fs, &["latest", "city=a", &latest[0]]).unwrap()).unwrap(),
    );
    assert_eq!(cols, STITCHED_COLUMNS);
    assert_eq!(rows.len(), 20);
}

fn errno_of(fs: &HudiFs, path: &[&str]) -> i32 {
    let e = walk(fs, path)
        .and_then(|ino| read_all(fs, ino))
        .expect_err("served");
    hudifs::fuse::errno_of(&e)
}

#[test]
fn bad_bootstrap_input_is_refused_with_eio() {
    // The source file is gone.
    let t = table(TableType::CopyOnWrite, 6);
    let a = t.group("city=a").clone();
    std::fs::remove_file(t.source.join(&a.source)).unwrap();
    let fs = t.fs();
    assert_eq!(
        errno_of(&fs, &["latest", "city=a", &skeleton_name(&a)]),
        libc::EIO
    );
    // The other group still reads.
    let b = t.group("city=b").clone();
    assert_stitched(&fs, &["latest", "city=b", &skeleton_name(&b)], &b);

    // The source holds other rows than the skeleton: city=b's source under city=a's name.
    let t = table(TableType::CopyOnWrite, 9);
    let (a, b) = (t.group("city=a").clone(), t.group("city=b").clone());
    std::fs::copy(t.source.join(&b.source), t.source.join(&a.source)).unwrap();
    let fs = t.fs();
    assert_eq!(
        errno_of(&fs, &["latest", "city=a", &skeleton_name(&a)]),
        libc::EIO
    );

    // The index has no entry for city=b's group.
    let t = table(TableType::MergeOnRead, 8);
    let (a, b) = (t.group("city=a").clone(), t.group("city=b").clone());
    let src = LocalStore::new(&t.source).unwrap();
    let uri = format!("file:{}", t.source.display());
    t.w.write_bootstrap_index(&src, &uri, std::slice::from_ref(&a), 0)
        .unwrap();
    let fs = t.fs();
    assert_eq!(
        errno_of(&fs, &["latest", "city=b", &skeleton_name(&b)]),
        libc::EIO
    );
    assert_stitched(&fs, &["latest", "city=a", &skeleton_name(&a)], &a);

    // The index names sources under a base path that cannot be opened: EOPNOTSUPP.
    let t = table(TableType::CopyOnWrite, 6);
    let a = t.group("city=a").clone();
    let src = LocalStore::new(&t.source).unwrap();
    let elsewhere = t.source.with_file_name("no-such-source");
    let uri = format!("file:{}", elsewhere.display());
    t.w.write_bootstrap_index(&src, &uri, std::slice::from_ref(&a), 0)
        .unwrap();
    let fs = t.fs();
    assert_eq!(
        errno_of(&fs, &["latest", "city=a", &skeleton_name(&a)]),
        libc::EOPNOTSUPP
    );

    // The index is gone.
    let t = table(TableType::CopyOnWrite, 9);
    std::fs::remove_file(t.root.join(hudifs_core::bootstrap::FILE_ID_INDEX)).unwrap();
    let fs = t.fs();
    let a = t.group("city=a").clone();
    assert_eq!(
        errno_of(&fs, &["latest", "city=a", &skeleton_name(&a)]),
        libc::EIO
    );
}

/// A listing stitches nothing (plain and merged): a skeleton not stitched yet is listed with
/// size 0 and a zero timeout; its lookup stitches it, once.
#[test]
fn listings_stitch_nothing() {
    let t = table(TableType::MergeOnRead, 9);
    let fs = t.fs();
    let b = t.group("city=b").clone();
    for view in [
        &["latest", "city=b"][..],
        &["merged", "latest", "city=b"][..],
    ] {
        let e = fs.readdir_entries(walk(&fs, view).unwrap()).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].entry.attr.size, 0, "{view:?}");
        assert!(e[0].entry.ttl.is_zero(), "{view:?}");
    }
    assert_eq!(fs.merges_run(), 0);
    assert_stitched(&fs, &["latest", "city=b", &skeleton_name(&b)], &b);
    assert_eq!(fs.merges_run(), 1);
    let e = fs
        .readdir_entries(walk(&fs, &["merged", "latest", "city=b"]).unwrap())
        .unwrap();
    assert!(e[0].entry.attr.size > 0);
    assert_stitched(&fs, &["merged", "latest", "city=b", &skeleton_name(&b)], &b);
    assert_eq!(fs.merges_run(), 1);
}
