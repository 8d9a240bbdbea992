//! `iceberg/` through the file system's logic (SEMANTICS.md §12), on tables the test kit
//! writes: one snapshot per completed write, parent-linked, naming its instant; manifests whose
//! entries are the snapshot's files with the sizes the data directory serves them at; served
//! files whose footers carry the schema's field ids and whose data pages are the original
//! bytes; a pending write never a snapshot; and a file system that does not know where readers
//! see it refusing.

use hudifs::fs::HudiFs;
use hudifs_core::error::Error;
use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};
use serde_json::Value;

use crate::{read_all, walk};

fn fs_at(root: &std::path::Path, cache: &std::path::Path, location: Option<&str>) -> HudiFs {
    let opts = hudifs::fs::FsOptions {
        location: location.map(str::to_string),
        ..crate::opts_with_merge_cache(cache)
    };
    HudiFs::new(root, opts).unwrap()
}

/// The records of an Avro container file.
fn avro(bytes: &[u8]) -> Vec<apache_avro::types::Value> {
    apache_avro::Reader::new(bytes)
        .unwrap()
        .map(|r| r.unwrap())
        .collect()
}

fn field<'a>(v: &'a apache_avro::types::Value, name: &str) -> &'a apache_avro::types::Value {
    let apache_avro::types::Value::Record(f) = v else {
        panic!("{v:?}")
    };
    &f.iter().find(|(n, _)| n == name).unwrap().1
}

fn string(v: &apache_avro::types::Value) -> String {
    match v {
        apache_avro::types::Value::String(s) => s.clone(),
        other => panic!("{other:?}"),
    }
}

fn long(v: &apache_avro::types::Value) -> i64 {
    match v {
        apache_avro::types::Value::Long(n) => *n,
        apache_avro::types::Value::Int(n) => i64::from(*n),
        other => panic!("{other:?}"),
    }
}

/// The writer of a new merge-on-read table in `root`, partitioned by `city`.
fn mor_writer(root: &std::path::Path) -> TableWriter {
    let spec = TableSpec::new("i", TableType::MergeOnRead, 9).partitioned_by(&["city"], true);
    TableWriter::create(root, spec, 1_767_225_600_000).unwrap()
}

#[test]
fn snapshots_manifests_and_served_files_of_a_merge_on_read_table() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let mut w = mor_writer(&root);
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let g0 = t.insert("city=a", &rows(1, 50)).unwrap();
    t.insert("city=b", &rows(2, 40)).unwrap();
    let i0 = t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &g0, &rows_with_ids(9, &[1000, 1001]))
        .unwrap();
    let i1 = t.complete().unwrap();
    // A write still in flight is never a snapshot.
    let mut pending = w.begin(Action::DeltaCommit).unwrap();
    pending.insert("city=c", &rows(3, 5)).unwrap();

    let loc = "/seen/here";
    let fs = fs_at(&root, &tmp.path().join("cache"), Some(loc));
    let hint = read_all(
        &fs,
        walk(&fs, "iceberg/metadata/version-hint.text").unwrap(),
    );
    assert_eq!(hint, b"2");
    let meta: Value = serde_json::from_slice(&read_all(
        &fs,
        walk(&fs, "iceberg/metadata/v2.metadata.json").unwrap(),
    ))
    .unwrap();
    assert_eq!(meta["location"], format!("{loc}/iceberg"));
    let snaps = meta["snapshots"].as_array().unwrap();
    assert_eq!(snaps.len(), 2);
    assert_eq!(snaps[0]["summary"]["hudi.instant"], i0.as_str());
    assert_eq!(snaps[1]["summary"]["hudi.instant"], i1.as_str());
    assert_eq!(snaps[1]["parent-snapshot-id"], snaps[0]["snapshot-id"]);
    assert_eq!(meta["current-snapshot-id"], snaps[1]["snapshot-id"]);
    assert_eq!(
        snaps[1]["snapshot-id"].as_i64().unwrap().to_string(),
        i1.as_str()
    );
    let names: Vec<String> = fs
        .readdir_entries(walk(&fs, "iceberg").unwrap())
        .unwrap()
        .iter()
        .map(|e| e.name.to_string())
        .collect();
    assert_eq!(names, ["metadata", i0.as_str(), i1.as_str()]);

    // The manifest list of the current snapshot: its manifests' live entries are the files
    // of merged/latest/, each with the size iceberg/ serves it at.
    let list_path = snaps[1]["manifest-list"].as_str().unwrap();
    let rel = |p: &str| p.strip_prefix(&format!("{loc}/")).unwrap().to_string();
    let list = avro(&read_all(&fs, walk(&fs, &rel(list_path)).unwrap()));
    let mut live = Vec::new();
    let mut deleted = 0;
    for m in &list {
        let path = string(field(m, "manifest_path"));
        let bytes = read_all(&fs, walk(&fs, &rel(&path)).unwrap());
        assert_eq!(long(field(m, "manifest_length")), bytes.len() as i64);
        for e in avro(&bytes) {
            let df = field(&e, "data_file");
            let file = rel(&string(field(df, "file_path")));
            match long(field(&e, "status")) {
                2 => deleted += 1,
                _ => live.push((
                    file,
                    long(field(df, "file_size_in_bytes")),
                    long(field(df, "record_count")),
                )),
            }
        }
    }
    // The update replaced group g0's slice: the old one is a deleted entry.
    assert_eq!(deleted, 1);
    live.sort();
    assert_eq!(live.len(), 2);
    let rows_total: i64 = live.iter().map(|l| l.2).sum();
    assert_eq!(rows_total, 90);
    for (file, size, _) in &live {
        let ino = walk(&fs, file).unwrap();
        assert_eq!(fs.getattr(ino).unwrap().attr.size as i64, *size, "{file}");
        // Served with field ids; the data pages are the merged file's own bytes.
        let served = read_all(&fs, ino);
        let footer_start = |b: &[u8]| {
            let n = b.len();
            n - 8 - u32::from_le_bytes(b[n - 8..n - 4].try_into().unwrap()) as usize
        };
        let footer = &served[footer_start(&served)..served.len() - 8];
        let md = parquet::file::metadata::ParquetMetaDataReader::decode_metadata(footer).unwrap();
        let fields = md.file_metadata().schema().get_fields();
        assert!(fields.iter().all(|f| f.get_basic_info().has_id()), "{file}");
        let under = file.replacen("iceberg/", "delta/", 1);
        let original = read_all(&fs, walk(&fs, &under).unwrap());
        let cut = footer_start(&original);
        assert_eq!(footer_start(&served), cut, "{file}");
        assert_eq!(served[..cut], original[..cut], "{file}: data pages differ");
        assert!(served.len() > original.len());
    }

    // Not mounted: refused, with the reason.
    let unmounted = fs_at(&root, &tmp.path().join("cache2"), None);
    match walk(&unmounted, "iceberg/metadata") {
        Err(Error::Unsupported(why)) => assert!(why.contains("iceberg/"), "{why}"),
        other => {
            let r = other.and_then(|ino| unmounted.readdir_entries(ino).map(|_| ()));
            assert!(matches!(r, Err(Error::Unsupported(_))), "{r:?}");
        }
    }
    drop(pending);
}

/// Every file `iceberg/metadata/` lists, by name, as read.
fn meta_files(fs: &HudiFs) -> std::collections::BTreeMap<String, Vec<u8>> {
    crate::files_in(fs, "iceberg/metadata")
}

/// The saved current manifests of the one table in merge cache `cache`.
fn saved_manifests(cache: &std::path::Path) -> std::path::PathBuf {
    crate::saved_side_file(cache, ".manifests")
}

#[test]
fn a_new_mount_takes_the_current_manifests_back_where_its_table_is_the_same() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let mut w = mor_writer(&root);
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let g0 = t.insert("city=a", &rows(1, 50)).unwrap();
    for (i, city) in ["b", "c", "d", "e"].iter().enumerate() {
        t.insert(&format!("city={city}"), &rows(2 + i as u64, 40))
            .unwrap();
    }
    t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &g0, &rows_with_ids(9, &[1000, 1001]))
        .unwrap();
    t.complete().unwrap();
    let cache = tmp.path().join("cache");
    let loc = Some("/seen/here");

    let first = fs_at(&root, &cache, loc);
    let built = meta_files(&first);
    assert_eq!(first.iceberg_files_taken(), 0);
    drop(first);
    // The current list (snapshot 1's) and the manifests it names.
    let named = avro(&built["snap-1.avro"]).len();
    assert!(named >= 2, "{named} manifests");
    let again = fs_at(&root, &cache, loc);
    assert_eq!(meta_files(&again), built);
    assert_eq!(again.iceberg_files_taken(), named + 1);
    drop(again);

    // Files seen elsewhere name other paths: nothing is taken.
    let elsewhere = fs_at(&root, &cache, Some("/seen/elsewhere"));
    let other = meta_files(&elsewhere);
    assert_eq!(elsewhere.iceberg_files_taken(), 0);
    assert_ne!(other, built);
    drop(elsewhere);
    // That mount saved its own: put back the first's, then damage it.
    let fresh_cache = tmp.path().join("fresh");
    drop(meta_files(&fs_at(&root, &fresh_cache, loc)));
    std::fs::copy(saved_manifests(&fresh_cache), saved_manifests(&cache)).unwrap();
    let saved = saved_manifests(&cache);
    let mut bytes = std::fs::read(&saved).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&saved, &bytes).unwrap();
    let damaged = fs_at(&root, &cache, loc);
    assert_eq!(meta_files(&damaged), built);
    assert_eq!(damaged.iceberg_files_taken(), 0);
    drop(damaged);
    // So is a torn one, wherever it was cut.
    bytes[mid] ^= 0x01;
    for cut in [0, 9, 16, bytes.len() / 3, bytes.len() - 1] {
        std::fs::write(&saved, &bytes[..cut]).unwrap();
        let torn = fs_at(&root, &cache, loc);
        assert_eq!(meta_files(&torn), built, "cut at {cut}");
        assert_eq!(torn.iceberg_files_taken(), 0, "cut at {cut}");
    }

    // A write after the save: what was saved is still what those snapshots hold, and the new
    // snapshot is rendered as a fresh build renders it.
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.insert("city=f", &rows(20, 10)).unwrap();
    t.complete().unwrap();
    let next = fs_at(&root, &cache, loc);
    let after = meta_files(&next);
    assert_eq!(next.iceberg_files_taken(), named + 1);
    let fresh = fs_at(&root, &tmp.path().join("fresh2"), loc);
    assert_eq!(meta_files(&fresh), after);
    assert_eq!(fresh.iceberg_files_taken(), 0);
    for (name, bytes) in &built {
        if name != "version-hint.text" {
            assert_eq!(after.get(name), Some(bytes), "{name}");
        }
    }
}
