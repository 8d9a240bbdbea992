//! The file system as plain logic, without a kernel: walking views through `lookup`/`readdir`,
//! reading bytes, provenance attributes, directory handles that keep one snapshot, open files
//! that outlive the cleaner, the atomic switch of `latest/`, and the merged view's naming without
//! merging and merging on first lookup.

use hudifs_testkit::support;

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use hudifs::follow::Follower;
use hudifs::fs::{DirCache, FsOptions, HudiFs, Kind, MergeSettings, ROOT, TTL_FRESH};

const TABLE: &str = "sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable";
const C2: &str = "20240707001302376";
const R3: &str = "20240707001303088";

fn open_fs(tmp: &Path) -> Option<(HudiFs, std::path::PathBuf)> {
    let dir = support::fixtures_dir()?;
    let root = support::unzip(&dir.join("tables").join(format!("{TABLE}.zip")), tmp);
    let fs = HudiFs::new(&root, FsOptions::default()).unwrap();
    Some((fs, root))
}

fn walk(fs: &HudiFs, path: &[&str]) -> hudifs_core::error::Result<u64> {
    let mut ino = ROOT;
    for p in path {
        ino = fs.lookup(ino, OsStr::new(p))?.attr.ino;
    }
    Ok(ino)
}

fn names(fs: &HudiFs, ino: u64) -> Vec<String> {
    fs.readdir_entries(ino)
        .unwrap()
        .into_iter()
        .map(|e| e.name.to_string())
        .collect()
}

#[test]
fn views_walk_read_and_describe_themselves() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((fs, root)) = open_fs(tmp.path()) else {
        return;
    };
    assert_eq!(
        names(&fs, ROOT),
        [
            "latest",
            "as_of",
            "incremental",
            "timeline",
            "merged",
            "cdc",
            "delta",
            "iceberg"
        ]
    );
    let as_of = walk(&fs, &["as_of"]).unwrap();
    assert_eq!(names(&fs, as_of), ["20240707001301554", C2, R3]);
    let latest = walk(&fs, &["latest"]).unwrap();
    assert_eq!(names(&fs, latest), ["30"]);
    let part = walk(&fs, &["latest", "30"]).unwrap();
    let files = fs.readdir_entries(part).unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].entry.attr.kind, Kind::File);
    let file = walk(&fs, &["latest", "30", &files[0].name]).unwrap();
    let attr = fs.getattr(file).unwrap().attr;
    let on_disk = std::fs::read(root.join("30").join(&*files[0].name)).unwrap();
    assert_eq!(attr.size, on_disk.len() as u64);
    assert_eq!(attr.perm & 0o222, 0, "no write bits");

    // Read in odd-sized chunks; the bytes are the table's.
    let fh = fs.open(file).unwrap().fh;
    let mut got = Vec::new();
    loop {
        let chunk = crate::read_now(&fs, fh, got.len() as u64, 777).unwrap();
        if chunk.is_empty() {
            break;
        }
        got.extend(chunk);
    }
    fs.release(fh);
    assert_eq!(got, on_disk);

    // Provenance.
    let x: std::collections::HashMap<_, _> = fs.xattrs(file).unwrap().into_iter().collect();
    assert_eq!(x["user.hudi.instant"], R3);
    assert_eq!(x["user.hudi.partition"], "30");
    assert_eq!(
        x["user.hudi.file_id"],
        "ebcb261d-62d3-4895-90ec-5b3c9622dff4-0"
    );
    assert_eq!(x["user.hudi.slice"], R3);
    let x: std::collections::HashMap<_, _> = fs.xattrs(latest).unwrap().into_iter().collect();
    assert_eq!(x["user.hudi.instant"], R3);
    let w = walk(&fs, &["incremental", &format!("20240707001301554..{R3}")]).unwrap();
    let x: std::collections::HashMap<_, _> = fs.xattrs(w).unwrap().into_iter().collect();
    assert_eq!(x["user.hudi.commit_times"], format!("{C2},{R3}"));
    assert_eq!(x["user.hudi.effective_end"], R3);

    // Time travel by any spelling lands on the same inode.
    let a = walk(&fs, &["as_of", C2]).unwrap();
    let b = walk(&fs, &["as_of", "2024-07-07T00:13:02.376"]).unwrap();
    assert_eq!(a, b);
    assert_eq!(names(&fs, a), ["10", "20", "30"]);

    // The timeline renders metadata as JSON.
    let t = walk(&fs, &["timeline", &format!("{R3}.replacecommit")]).unwrap();
    let fh = fs.open(t).unwrap().fh;
    let text = crate::read_now(&fs, fh, 0, 1 << 20).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
    assert_eq!(v["operationType"], "INSERT_OVERWRITE_TABLE");

    // Names that are not there.
    assert!(walk(&fs, &["nope"]).is_err());
    assert!(walk(&fs, &["latest", "10"]).is_err());
    assert!(walk(&fs, &["timeline", "hoodie.properties"]).is_err());
    assert_eq!(
        hudifs::fuse::errno_of(&walk(&fs, &["as_of", "soon"]).unwrap_err()),
        libc::EINVAL
    );
}

#[test]
fn latest_switches_atomically_and_open_handles_keep_their_snapshot() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((fs, root)) = open_fs(tmp.path()) else {
        return;
    };
    let latest = walk(&fs, &["latest"]).unwrap();
    let first = fs.opendir(latest).unwrap();
    assert_eq!(first.cache, DirCache::Reuse, "nothing changed yet");
    assert!(fs.releasedir(first.fh).is_none());
    let old_dir = fs.opendir(latest).unwrap().fh;
    let file = walk(&fs, &["latest", "30"]).unwrap();
    let fname = names(&fs, file).pop().unwrap();
    let file = walk(&fs, &["latest", "30", &fname]).unwrap();
    let fh = fs.open(file).unwrap().fh;

    // The replacecommit is undone on disk (as a restore would), and the cleaner deletes the
    // file we hold open.
    std::fs::remove_file(root.join(format!(".hoodie/{R3}.replacecommit"))).unwrap();
    let on_disk = std::fs::read(root.join("30").join(&fname)).unwrap();
    std::fs::remove_file(root.join("30").join(&fname)).unwrap();
    let mut follower = Follower::new();
    let inv = follower
        .poll_once(&fs, std::time::Duration::ZERO)
        .unwrap()
        .expect("a changed timeline is a new snapshot");
    assert!(
        follower
            .poll_once(&fs, std::time::Duration::ZERO)
            .unwrap()
            .is_none(),
        "an unchanged one is not"
    );
    // The kernel's cached listing of latest/ is shared by handles with one listing only: while
    // a handle of the old snapshot is open, new ones stay out of it; that handle drops the cache
    // on release.
    assert!(inv.inodes.contains(&latest), "{inv:?}");
    let during = fs.opendir(latest).unwrap();
    assert_eq!(during.cache, DirCache::Off, "the old handle is still open");
    fs.switched(&inv);
    let after = fs.opendir(latest).unwrap();
    assert_eq!(after.cache, DirCache::Off, "the old handle is still open");
    assert!(fs.releasedir(during.fh).is_none());
    assert!(fs.releasedir(after.fh).is_none());

    // A directory handle opened before the switch lists the old snapshot, a new one the new.
    let old: Vec<String> = fs
        .readdir(latest, old_dir)
        .unwrap()
        .iter()
        .map(|(name, e)| {
            assert_eq!(e.ttl, TTL_FRESH, "a handle that outlived a switch");
            name.to_string()
        })
        .collect();
    assert_eq!(old, ["30"]);
    let stale = fs
        .releasedir(old_dir)
        .expect("the old handle outlived the switch");
    assert_eq!(stale.ino, latest);
    fs.stale_dir_dropped(stale);
    assert_eq!(fs.opendir(latest).unwrap().cache, DirCache::Reuse);
    assert_eq!(names(&fs, latest), ["10", "20", "30"]);
    assert_eq!(fs.latest_instant().as_deref(), Some(C2));

    // The open file still reads to its end.
    let got = crate::read_now(&fs, fh, 0, 1 << 24).unwrap();
    assert_eq!(got, on_disk);
    fs.release(fh);
    assert_eq!(fs.open_file_count(), 0);
}

/// A merge-on-read fixture whose `latest/` is compacted (base files only) and whose earlier
/// `as_of` times have slices with logs.
const MOR_TABLE: &str = "sample_table/mor/avro/v9_txns_simple_meta";

fn open_merged_fs(tmp: &Path, cache: &Path) -> Option<(HudiFs, std::path::PathBuf)> {
    let dir = support::fixtures_dir()?;
    let root = tmp.join("table");
    if !root.exists() {
        let unzipped = support::unzip(&dir.join("tables").join(format!("{MOR_TABLE}.zip")), tmp);
        std::fs::rename(unzipped, &root).unwrap();
    }
    let opts = FsOptions {
        merge: MergeSettings {
            cache_dir: Some(cache.to_path_buf()),
            ..MergeSettings::default()
        },
        ..FsOptions::default()
    };
    Some((HudiFs::new(&root, opts).unwrap(), root))
}

fn read_all(fs: &HudiFs, ino: u64) -> Vec<u8> {
    let fh = fs.open(ino).unwrap().fh;
    let mut got = Vec::new();
    loop {
        let chunk = crate::read_now(fs, fh, got.len() as u64, 65_536).unwrap();
        if chunk.is_empty() {
            break;
        }
        got.extend(chunk);
    }
    fs.release(fh);
    got
}

#[test]
fn merged_views_list_without_merging_and_merge_once_on_lookup() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let Some((fs, root)) = open_merged_fs(tmp.path(), &cache) else {
        return;
    };
    assert_eq!(
        names(&fs, walk(&fs, &["merged"]).unwrap()),
        ["as_of", "incremental", "latest"]
    );

    // A compacted latest/: every slice is its base file, same names, same bytes.
    let latest = walk(&fs, &["latest"]).unwrap();
    let merged_latest = walk(&fs, &["merged", "latest"]).unwrap();
    assert_eq!(names(&fs, latest), names(&fs, merged_latest));
    for p in names(&fs, latest) {
        let plain = names(&fs, walk(&fs, &["latest", &p]).unwrap());
        assert_eq!(
            plain,
            names(&fs, walk(&fs, &["merged", "latest", &p]).unwrap())
        );
        for f in plain {
            let ino = walk(&fs, &["merged", "latest", &p, &f]).unwrap();
            assert_eq!(
                read_all(&fs, ino),
                std::fs::read(root.join(&p).join(&f)).unwrap()
            );
        }
    }
    assert_eq!(fs.merges_run(), 0, "base files are served as they are");

    // Every merged/as_of/<T>: listing names slices but merges nothing.
    let as_of = walk(&fs, &["merged", "as_of"]).unwrap();
    let times = names(&fs, as_of);
    assert_eq!(times, names(&fs, walk(&fs, &["as_of"]).unwrap()));
    let mut merged_files = Vec::new();
    for t in &times {
        for p in names(&fs, walk(&fs, &["merged", "as_of", t]).unwrap()) {
            let dir = walk(&fs, &["merged", "as_of", t, &p]).unwrap();
            for e in fs.readdir_entries(dir).unwrap() {
                if e.name.ends_with(".merged.parquet") {
                    assert_eq!(e.entry.attr.size, 0, "not merged yet: no size");
                    assert_eq!(e.entry.ttl, std::time::Duration::ZERO);
                    merged_files.push((t.clone(), p.clone(), e.name.to_string()));
                }
            }
        }
    }
    assert!(
        merged_files.len() >= 3,
        "the fixture has slices with logs: {merged_files:?}"
    );
    assert_eq!(fs.merges_run(), 0, "readdir merges nothing");
    assert!(!cache.exists(), "the cache is created on first merge");

    // Lookup merges (once); getattr, a second lookup and reads do not merge again.
    let (t, p, f) = &merged_files[0];
    let path = ["merged", "as_of", t.as_str(), p.as_str(), f.as_str()];
    let ino = walk(&fs, &path).unwrap();
    assert_eq!(fs.merges_run(), 1);
    let size = fs.getattr(ino).unwrap().attr.size;
    assert!(size > 12);
    assert_eq!(walk(&fs, &path).unwrap(), ino);
    let bytes = read_all(&fs, ino);
    assert_eq!(bytes.len() as u64, size);
    assert_eq!(&bytes[..4], b"PAR1");
    assert_eq!(&bytes[bytes.len() - 4..], b"PAR1");
    assert_eq!(fs.merges_run(), 1);
    let dir = walk(&fs, &path[..4]).unwrap();
    let listed = fs.readdir_entries(dir).unwrap();
    let e = listed.iter().find(|e| &*e.name == f.as_str()).unwrap();
    assert_eq!(
        e.entry.attr.size, size,
        "a merged slice lists with its size"
    );
    let x: std::collections::HashMap<_, _> = fs.xattrs(ino).unwrap().into_iter().collect();
    let inputs: Vec<&str> = x["user.hudi.merged_from"].lines().collect();
    assert!(
        inputs.len() >= 2 && inputs[1..].iter().all(|l| l.contains(".log.")),
        "{inputs:?}"
    );
    assert!(f.starts_with(&x["user.hudi.file_id"]));
    drop(fs);

    // Another mount on the same cache finds the merged file: no merge, same bytes.
    let (fs, _) = open_merged_fs(tmp.path(), &cache).unwrap();
    let ino = walk(&fs, &path).unwrap();
    assert_eq!(fs.merges_run(), 0);
    assert_eq!(read_all(&fs, ino), bytes);
}

#[test]
fn merged_windows_list_without_merging_and_filter_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let Some((fs, _root)) = open_merged_fs(tmp.path(), &cache) else {
        return;
    };
    // The same windows as incremental/.
    let windows = names(&fs, walk(&fs, &["merged", "incremental"]).unwrap());
    assert_eq!(windows, names(&fs, walk(&fs, &["incremental"]).unwrap()));
    assert!(windows.len() >= 2, "{windows:?}");
    // Listing every window names files and merges nothing; every name is a merged file.
    let mut files = Vec::new();
    for w in &windows {
        let root = walk(&fs, &["merged", "incremental", w]).unwrap();
        let x: std::collections::HashMap<_, _> = fs.xattrs(root).unwrap().into_iter().collect();
        assert_eq!(x["user.hudi.content"], "merged");
        // The fixture has a metadata table; its newest completed instant versions the listing.
        assert_eq!(x["user.hudi.listing"], "metadata-table@20260307162621933");
        let keep: Vec<String> = x["user.hudi.commit_times"]
            .split(',')
            .map(String::from)
            .collect();
        for p in names(&fs, root) {
            let dir = walk(&fs, &["merged", "incremental", w, &p]).unwrap();
            for e in fs.readdir_entries(dir).unwrap() {
                assert!(e.name.ends_with(".merged.parquet"), "{}", e.name);
                assert_eq!(e.entry.attr.size, 0, "not merged yet");
                files.push((w.clone(), p.clone(), e.name.to_string(), keep.clone()));
            }
        }
    }
    assert!(!files.is_empty());
    assert_eq!(fs.merges_run(), 0, "readdir merges nothing");
    // A lookup merges; the file holds only records of the window's writes.
    let mut checked = 0;
    for (w, p, f, keep) in &files {
        let ino = walk(&fs, &["merged", "incremental", w, p, f]).unwrap();
        let copy = tmp.path().join("window.parquet");
        std::fs::write(&copy, read_all(&fs, ino)).unwrap();
        let reader =
            parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&copy).unwrap())
                .unwrap();
        use parquet::file::reader::FileReader;
        for row in reader.get_row_iter(None).unwrap() {
            let row = row.unwrap();
            let commit = row
                .get_column_iter()
                .find(|(n, _)| n.as_str() == "_hoodie_commit_time")
                .map(|(_, v)| v.to_string().trim_matches('"').to_string())
                .unwrap();
            assert!(keep.contains(&commit), "{w} {f}: {commit} not in {keep:?}");
            checked += 1;
        }
    }
    assert!(checked > 0, "no row of any window was checked");
    assert_eq!(fs.merges_run(), files.len() as u64);
}

#[test]
fn change_feeds_list_without_merging() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let Some((fs, _root)) = open_merged_fs(tmp.path(), &cache) else {
        return;
    };
    let windows = names(&fs, walk(&fs, &["cdc"]).unwrap());
    assert_eq!(windows, names(&fs, walk(&fs, &["incremental"]).unwrap()));
    let mut files = Vec::new();
    for w in &windows {
        let root = walk(&fs, &["cdc", w]).unwrap();
        let x: std::collections::HashMap<_, _> = fs.xattrs(root).unwrap().into_iter().collect();
        assert_eq!(x["user.hudi.content"], "cdc");
        for p in names(&fs, root) {
            let dir = walk(&fs, &["cdc", w, &p]).unwrap();
            for e in fs.readdir_entries(dir).unwrap() {
                assert!(e.name.ends_with(".cdc.parquet"), "{}", e.name);
                files.push((w.clone(), p.clone(), e.name.to_string()));
            }
        }
    }
    assert!(!files.is_empty());
    assert_eq!(fs.merges_run(), 0, "readdir merges nothing");
    let (w, p, f) = &files[0];
    let ino = walk(&fs, &["cdc", w, p, f]).unwrap();
    assert_eq!(fs.merges_run(), 1, "a lookup computes the feed once");
    let bytes = read_all(&fs, ino);
    assert_eq!(&bytes[bytes.len() - 4..], b"PAR1");
    let x: std::collections::HashMap<_, _> = fs.xattrs(ino).unwrap().into_iter().collect();
    assert!(f.starts_with(&x["user.hudi.file_id"]));
    assert!(!x["user.hudi.merged_from"].is_empty());
}

/// `latest/`, listed, and its first partition directory.
fn latest_and_first_partition(fs: &HudiFs) -> (u64, u64) {
    let latest = walk(fs, &["latest"]).unwrap();
    (
        latest,
        fs.readdir_entries(latest).unwrap()[0].entry.attr.ino,
    )
}

/// Listings hand the kernel file attributes only while callers stat what they list: not to a
/// name-only walk (`find -type f`), again after a file is looked up (`ls -l`, `rsync`).
#[test]
fn listings_carry_file_attributes_once_files_are_looked_up() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((fs, _root)) = open_fs(tmp.path()) else {
        return;
    };
    let (latest, part) = latest_and_first_partition(&fs);
    let listing = |ino: u64| {
        let d = fs.opendir(ino).unwrap();
        let l = fs.readdir(ino, d.fh).unwrap();
        let got = (
            l.file_attrs(),
            l.iter()
                .map(|(n, e)| (n.to_string(), e.attr.kind))
                .collect::<Vec<_>>(),
        );
        fs.releasedir(d.fh);
        got
    };
    let (attrs, entries) = listing(part);
    assert!(!attrs, "nothing looked a file up yet: names only");
    let file = entries
        .iter()
        .find(|(_, k)| *k == Kind::File)
        .map(|(n, _)| n.clone())
        .expect("the partition lists a file");
    // Directories are looked up without asking for file attributes.
    walk(&fs, &["as_of"]).unwrap();
    assert!(!listing(latest).0);
    let e = fs.lookup(part, OsStr::new(&file)).unwrap();
    assert_eq!(e.attr.kind, Kind::File);
    let (attrs, again) = listing(part);
    assert!(attrs, "a file was looked up: listings carry attributes");
    assert_eq!(again, entries, "the same entries either way");
}

/// A walk for names states no table file: a local disk lists names without a `stat` each. The
/// first file whose attributes are asked for states its partition, with the disk's size, time
/// and mode; a file gone since the listing is not found; listings then carry the attributes.
#[test]
fn a_name_walk_states_no_file_and_attributes_come_from_the_disk() {
    use hudifs_storage::{FaultyStore, LocalStore, Op};
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    // Three partitions, several files in latest/.
    let table = "sample_table/cow/v6_simplekeygen_nonhivestyle";
    let root = support::unzip(&dir.join("tables").join(format!("{table}.zip")), tmp.path());
    let store = Arc::new(FaultyStore::new(
        Arc::new(LocalStore::new(&root).unwrap()),
        1,
    ));
    let fs = HudiFs::with_store(store.clone(), FsOptions::default()).unwrap();
    let latest = walk(&fs, &["latest"]).unwrap();
    let stats_before = store.calls(Op::Stat);
    // (directory inode, partition, file name) of every file of latest/.
    let mut files = Vec::new();
    let mut partitions = 0;
    for p in fs.readdir_entries(latest).unwrap() {
        assert_eq!(p.entry.attr.kind, Kind::Dir, "a partitioned table");
        partitions += 1;
        for e in fs.readdir_entries(p.entry.attr.ino).unwrap() {
            assert_eq!(e.entry.attr.kind, Kind::File, "one level of partitions");
            files.push((p.entry.attr.ino, p.name.to_string(), e.name.to_string()));
        }
    }
    // The partitions hold older slices too: a listing with attributes states them all.
    let on_disk: usize = files
        .iter()
        .map(|(_, part, _)| part)
        .collect::<std::collections::BTreeSet<_>>()
        .iter()
        .map(|part| {
            std::fs::read_dir(root.join(part))
                .unwrap()
                .filter(|e| {
                    let n = e.as_ref().unwrap().file_name();
                    n.to_string_lossy().ends_with(".parquet")
                })
                .count()
        })
        .sum();
    assert!(
        on_disk > partitions,
        "{on_disk} files in {partitions} partitions"
    );
    // One `stat` per partition directory (its time decides when to list it again), none per
    // file.
    let stats = store.calls(Op::Stat) - stats_before;
    assert!(
        stats <= partitions as u64,
        "{stats} stats for {partitions} partitions"
    );
    // A file that grew after the name walk shows its size now: the walk did not state it.
    // (The count above misses a listing that states inside the storage's `list`.)
    let (_, grown_part, grown) = &files[1];
    std::fs::OpenOptions::new()
        .append(true)
        .open(root.join(grown_part).join(grown))
        .unwrap()
        .write_all(b"tail")
        .unwrap();
    // A file deleted since the listing: not found, not served with made-up attributes.
    let (gone_dir, gone_part, gone) = files[0].clone();
    std::fs::remove_file(root.join(&gone_part).join(&gone)).unwrap();
    let err = fs.lookup(gone_dir, OsStr::new(&gone)).unwrap_err();
    assert!(
        matches!(err, hudifs_core::error::Error::NotFound(_)),
        "{err}"
    );
    // The others carry the disk's attributes, by lookup and then in listings.
    let disk = |part: &str, name: &str| {
        let m = std::fs::symlink_metadata(root.join(part).join(name)).unwrap();
        (
            m.len(),
            m.modified().unwrap(),
            (m.permissions().mode() & 0o555) as u16,
        )
    };
    for (d, part, name) in &files[1..] {
        let a = fs.lookup(*d, OsStr::new(name)).unwrap().attr;
        assert_eq!((a.size, a.mtime, a.perm), disk(part, name), "{part}/{name}");
        assert!(a.size > 0);
    }
    for (d, part, name) in &files[1..] {
        let h = fs.opendir(*d).unwrap();
        let l = fs.readdir(*d, h.fh).unwrap();
        assert!(
            l.file_attrs(),
            "files were looked up: listings carry attributes"
        );
        let (_, e) = l.iter().find(|(n, _)| n == name).unwrap();
        assert_eq!(e.attr.size, disk(part, name).0, "{part}/{name}");
        fs.releasedir(h.fh);
    }
}

/// Every byte of `ino` through handle `fh` read with `read` (as the mount reads, inode
/// given), `None` when a read fails.
fn read_via(fs: &HudiFs, ino: u64, fh: u64) -> Option<Vec<u8>> {
    let mut got = Vec::new();
    loop {
        let (tx, rx) = std::sync::mpsc::channel();
        fs.read(
            ino,
            fh,
            got.len() as u64,
            65_536,
            Box::new(move |r| {
                let _ = tx.send(r.map(<[u8]>::to_vec).ok());
            }),
        );
        let chunk = rx.recv().ok()??;
        if chunk.is_empty() {
            return Some(got);
        }
        got.extend(chunk);
    }
}

#[test]
fn a_daemon_that_takes_over_gives_every_number_and_handle_the_same_meaning() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let Some((first, _)) = open_merged_fs(tmp.path(), &cache) else {
        return;
    };
    let journal = std::sync::Arc::new(hudifs::journal::RestartJournal::create().unwrap());
    first
        .resume_from(&journal, &journal.records().unwrap())
        .unwrap();
    // What the kernel could hold from the first daemon: inodes of every kind, with what they
    // are, and open file and directory handles.
    let mut held: Vec<(Vec<String>, u64, hudifs::fs::Attr)> = Vec::new();
    let mut paths: Vec<Vec<String>> = vec![vec!["timeline".into()]];
    for t in names(&first, walk(&first, &["as_of"]).unwrap()) {
        for p in names(&first, walk(&first, &["merged", "as_of", &t]).unwrap()) {
            for f in names(&first, walk(&first, &["merged", "as_of", &t, &p]).unwrap()) {
                paths.push(vec![
                    "merged".into(),
                    "as_of".into(),
                    t.clone(),
                    p.clone(),
                    f,
                ]);
            }
            for f in names(&first, walk(&first, &["as_of", &t, &p]).unwrap()) {
                paths.push(vec!["as_of".into(), t.clone(), p.clone(), f]);
            }
        }
    }
    for t in names(&first, walk(&first, &["timeline"]).unwrap()) {
        paths.push(vec!["timeline".into(), t]);
    }
    for p in &paths {
        let parts: Vec<&str> = p.iter().map(String::as_str).collect();
        let ino = walk(&first, &parts).unwrap();
        held.push((p.clone(), ino, first.getattr(ino).unwrap().attr));
    }
    let merged_files = held
        .iter()
        .filter(|(p, _, _)| p[0] == "merged" && p[4].ends_with(".merged.parquet"))
        .count();
    assert!(merged_files >= 3, "{paths:?}");
    let files: Vec<(u64, u64, Vec<u8>)> = held
        .iter()
        .filter(|(_, _, a)| a.kind == Kind::File)
        .map(|(_, ino, _)| {
            let fh = first.open(*ino).unwrap().fh;
            (*ino, fh, read_via(&first, *ino, fh).unwrap())
        })
        .collect();
    let dir = walk(&first, &["as_of"]).unwrap();
    let dir_fh = first.opendir(dir).unwrap().fh;
    let dir_names: Vec<String> = first
        .readdir(dir, dir_fh)
        .unwrap()
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    drop(first);

    // The daemon that takes over: the same table, the same journal.
    let (next, _) = open_merged_fs(tmp.path(), &cache).unwrap();
    next.resume_from(&journal, &journal.records().unwrap())
        .unwrap();
    // Handles first, before any lookup: the kernel sends reads on what it holds.
    for (ino, fh, bytes) in &files {
        assert_eq!(
            read_via(&next, *ino, *fh).as_ref(),
            Some(bytes),
            "handle {fh} of inode {ino:#x}"
        );
    }
    let listed: Vec<String> = next
        .readdir(dir, dir_fh)
        .unwrap()
        .iter()
        .map(|(n, _)| n.to_string())
        .collect();
    assert_eq!(listed, dir_names);
    for (path, ino, attr) in &held {
        let now = next.getattr(*ino).unwrap().attr;
        assert_eq!((now.kind, now.size), (attr.kind, attr.size), "{path:?}");
        let parts: Vec<&str> = path.iter().map(String::as_str).collect();
        let again = walk(&next, &parts).unwrap();
        // A merged slice's id says it was taken, not what it is: a name looked up again gets
        // a new number (the kernel's old one keeps working, as above). Everything else keeps
        // its number.
        if !path[path.len() - 1].ends_with(".merged.parquet") {
            assert_eq!(again, *ino, "{path:?}: a new number");
        }
    }
    // New handles do not collide with the first daemon's.
    let fresh = next.open(files[0].0).unwrap().fh;
    assert!(files.iter().all(|(_, fh, _)| *fh != fresh));
    // A handle number nobody handed out is still refused.
    assert!(read_via(&next, files[0].0, fresh + 1_000_000).is_none());
}

/// An operation of `Served` asked as the FUSE adapter asks it: its answer, and whether it was
/// given in place (on this thread, before the call returned) rather than from the store's
/// threads. An answer given in place must have asked the storage nothing (`calls` counts the
/// storage's requests).
fn asked<T: Send + 'static>(
    calls: &dyn Fn() -> Vec<u64>,
    ask: impl FnOnce(hudifs::fs::Answer<T>),
) -> (hudifs_core::error::Result<T>, bool) {
    let here = std::thread::current().id();
    let before = calls();
    let (tx, rx) = std::sync::mpsc::channel();
    ask(Box::new(move |r| {
        let _ = tx.send((r, std::thread::current().id() == here));
    }));
    let (r, in_place) = rx.recv().unwrap();
    if in_place {
        assert_eq!(
            calls(),
            before,
            "an answer given in place asked the storage"
        );
    }
    (r, in_place)
}

/// What an object-store mount answers in place (on the FUSE thread, no hop to the store's
/// threads) needs nothing from the storage: the directories of a view once it is listed, and
/// lookups in them once their files are stated; not before the view is listed, not in a merged
/// view, not after a switch.
#[test]
fn directories_resolved_in_memory_are_answered_without_the_storage() {
    use hudifs::fs::Served;
    use hudifs_storage::{FaultyStore, LocalStore, Op};
    let tmp = tempfile::tempdir().unwrap();
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    let root = support::unzip(&dir.join("tables").join(format!("{TABLE}.zip")), tmp.path());
    let store = Arc::new(FaultyStore::new(
        Arc::new(LocalStore::new(&root).unwrap()),
        1,
    ));
    let fs = Arc::new(
        HudiFs::with_store(
            Arc::new(crate::AsObjectStore(store.clone())),
            FsOptions::default(),
        )
        .unwrap(),
    );
    let calls = || {
        [Op::List, Op::Stat, Op::Read, Op::ReadRange, Op::Open]
            .map(|o| store.calls(o))
            .to_vec()
    };
    let opendir = |ino: u64| asked(&calls, |done| fs.clone().opendir(ino, done));
    let readdir = |ino: u64, fh: u64| asked(&calls, |done| fs.clone().readdir(ino, fh, done));
    let lookup = |parent: u64, name: &str| {
        let name = OsStr::new(name);
        asked(&calls, |done| fs.clone().lookup(parent, name, done))
    };
    let latest = walk(&fs, &["latest"]).unwrap();
    let (_, in_place) = lookup(latest, "30");
    assert!(!in_place, "no partition is resolved yet: a lookup lists");
    let (h, in_place) = opendir(latest);
    assert!(!in_place, "no partition is resolved yet");
    fs.releasedir(h.unwrap().fh);
    let parts: Vec<u64> = fs
        .readdir_entries(latest)
        .unwrap()
        .iter()
        .map(|p| p.entry.attr.ino)
        .collect();
    assert!(!parts.is_empty());
    let (h, in_place) = opendir(latest);
    assert!(in_place, "listing latest/ resolves every partition");
    fs.releasedir(h.unwrap().fh);

    // Listing resolved directories asks the storage nothing.
    let before = calls();
    let mut files = Vec::new();
    for &p in &parts {
        let (h, in_place) = opendir(p);
        assert!(in_place);
        let fh = h.unwrap().fh;
        let (l, in_place) = readdir(p, fh);
        assert!(in_place, "a handle this daemon opened");
        for (name, _) in l.unwrap().iter() {
            files.push((p, name.to_string()));
        }
        fs.releasedir(fh);
    }
    assert!(!files.is_empty());
    assert_eq!(calls(), before, "a listing of resolved directories");

    // A listing on a store gives the files' sizes: looking a listed file up asks nothing.
    for (p, name) in &files {
        let (e, in_place) = lookup(*p, name);
        assert!(in_place, "{name}: listed with its size");
        e.unwrap();
    }
    // The partitions themselves are resolved: looking them up in latest/ asks nothing.
    for p in fs.readdir_entries(latest).unwrap() {
        let (e, in_place) = lookup(latest, &p.name);
        assert!(in_place);
        e.unwrap();
    }
    // A name that is not there is answered in place too (no partition lies below it).
    let (e, in_place) = lookup(latest, "no-such-partition");
    assert!(in_place);
    assert!(e.is_err());
    // Once files are looked up, listings carry their attributes, still without the storage.
    let before = calls();
    for &p in &parts {
        let (h, in_place) = opendir(p);
        assert!(in_place);
        let fh = h.unwrap().fh;
        assert!(readdir(p, fh).0.unwrap().file_attrs());
        fs.releasedir(fh);
    }
    assert_eq!(calls(), before, "listings with attributes, files stated");

    // A merged view may merge: never in place.
    let merged = walk(&fs, &["merged", "latest"]).unwrap();
    fs.readdir_entries(merged).unwrap();
    let (h, in_place) = opendir(merged);
    assert!(!in_place);
    fs.releasedir(h.unwrap().fh);

    // After a switch the view is planned again: latest/ is not in place until its partitions
    // back in view (10 and 20, which the undone replacecommit had replaced) are resolved; what
    // is in place still asks nothing (`asked` checks).
    std::fs::remove_file(root.join(format!(".hoodie/{R3}.replacecommit"))).unwrap();
    let inv = Follower::new()
        .poll_once(&fs, std::time::Duration::ZERO)
        .unwrap()
        .expect("a changed timeline is a new snapshot");
    fs.switched(&inv);
    for &p in &parts {
        let (h, _) = opendir(p);
        let fh = h.unwrap().fh;
        readdir(p, fh).0.unwrap();
        fs.releasedir(fh);
    }
    let (h, in_place) = opendir(latest);
    assert!(!in_place, "partitions 10 and 20 are not resolved yet");
    fs.releasedir(h.unwrap().fh);
    assert_eq!(names(&fs, latest), ["10", "20", "30"]);
    let (h, in_place) = opendir(latest);
    assert!(in_place);
    fs.releasedir(h.unwrap().fh);
}

/// Only an object-store mount answers lookup, opendir and readdir on the calling thread by
/// choice: on a local disk every request is answered in place anyway (`run_blocking` runs
/// there). On an object store a request is answered in place when it needs nothing from the
/// storage (a LIST gives the files' sizes: they are stated), and from the store's threads
/// otherwise: before anything is resolved, a handle released, a merged view.
#[test]
fn only_an_object_store_mount_answers_from_memory_out_of_turn() {
    use hudifs::fs::Served;
    use hudifs_objstore::{ObjectStorage, StoreUrl};
    use hudifs_storage::{FaultyStore, Op};
    let tmp = tempfile::tempdir().unwrap();
    let Some((local, root)) = open_fs(tmp.path()) else {
        return;
    };
    let local = Arc::new(local);
    let (_, part) = latest_and_first_partition(&local);
    let no_calls = Vec::<u64>::new;
    let (h, in_place) = asked(&no_calls, |done| local.clone().opendir(part, done));
    assert!(in_place, "a local disk");
    local.releasedir(h.unwrap().fh);

    let store = ObjectStorage::in_memory(StoreUrl::parse("s3://bucket/t").unwrap()).unwrap();
    support::put_tree(&store, &root);
    let store = Arc::new(FaultyStore::new(Arc::new(store), 1));
    let calls = || {
        [Op::List, Op::Stat, Op::Read, Op::ReadRange, Op::Open]
            .map(|o| store.calls(o))
            .to_vec()
    };
    let fs = Arc::new(HudiFs::with_store(store.clone(), FsOptions::default()).unwrap());
    let opendir = |ino: u64| asked(&calls, |done| fs.clone().opendir(ino, done));
    let readdir = |ino: u64, fh: u64| asked(&calls, |done| fs.clone().readdir(ino, fh, done));
    let lookup = |parent: u64, name: &str| {
        let name = OsStr::new(name);
        asked(&calls, |done| fs.clone().lookup(parent, name, done))
    };
    let latest = walk(&fs, &["latest"]).unwrap();
    let (_, in_place) = lookup(latest, "30");
    assert!(!in_place, "nothing resolved yet: a lookup lists");
    let (h, in_place) = opendir(latest);
    assert!(!in_place, "nothing resolved yet");
    fs.releasedir(h.unwrap().fh);
    let parts = fs.readdir_entries(latest).unwrap();
    for p in &parts {
        let ino = p.entry.attr.ino;
        let (e, in_place) = lookup(latest, &p.name);
        assert!(in_place);
        e.unwrap();
        let (h, in_place) = opendir(ino);
        assert!(in_place);
        let fh = h.unwrap().fh;
        let (l, in_place) = readdir(ino, fh);
        assert!(in_place);
        for (name, _) in l.unwrap().iter() {
            let (e, in_place) = lookup(ino, name);
            assert!(in_place, "{name}: listed with its size");
            e.unwrap();
        }
        fs.releasedir(fh);
        let (l, in_place) = readdir(ino, fh);
        assert!(!in_place, "a released handle");
        assert!(l.is_err());
    }
    let merged = walk(&fs, &["merged", "latest"]).unwrap();
    fs.readdir_entries(merged).unwrap();
    let (h, in_place) = opendir(merged);
    assert!(!in_place);
    fs.releasedir(h.unwrap().fh);
}
