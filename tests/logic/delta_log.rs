//! `delta/` through the file system's logic (SEMANTICS.md §11), on tables the test kit writes:
//! one version per completed write, each version's actions the change from the one before
//! (a merged slice replaced when a log lands on its group, deletes applied in its record
//! count), every `add` path found under `delta/`, a new write appearing as the next version
//! only when `latest/` moves, a pending write never, and a table with archived instants refused;
//! the change data feed: `cdc` actions and the rows of their files, none for a compaction, and
//! a write whose change feed is gone refused.

use std::time::Duration;

use hudifs::follow::Follower;
use hudifs::fs::HudiFs;
use hudifs_core::error::Error;
use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{
    build_cleaned_and_archived, rows, rows_with_ids, TableSpec, TableWriter,
};
use serde_json::Value;

use crate::{read_all, walk};

fn log_names(fs: &HudiFs) -> Vec<String> {
    let mut v: Vec<String> = fs
        .readdir_entries(walk(fs, "delta/_delta_log").unwrap())
        .unwrap()
        .iter()
        .map(|e| e.name.to_string())
        .collect();
    v.sort();
    v
}

fn actions(fs: &HudiFs, version: u64) -> Vec<Value> {
    let ino = walk(fs, &format!("delta/_delta_log/{version:020}.json")).unwrap();
    String::from_utf8(read_all(fs, ino))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn of<'a>(acts: &'a [Value], kind: &str) -> Vec<&'a Value> {
    acts.iter().filter_map(|a| a.get(kind)).collect()
}

/// A merge-on-read table in `root` with two groups in `city=a` (50 and 40 rows) and two
/// completed writes: the inserts, then an update of two rows of the first group plus an insert
/// there, and a delete of three rows of the second. The writer, the first group and the writes.
fn two_writes(root: &std::path::Path) -> (TableWriter, String, String, String) {
    let spec = TableSpec::new("d", TableType::MergeOnRead, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let g0 = t.insert("city=a", &rows(1, 50)).unwrap();
    let g1 = t.insert("city=a", &rows(2, 40)).unwrap();
    let i0 = t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &g0, &rows_with_ids(9, &[1000, 1001, 7_000_000]))
        .unwrap();
    t.delete("city=a", &g1, &[2000, 2001, 2002]).unwrap();
    let i1 = t.complete().unwrap();
    (w, g0, i0, i1)
}

fn refresh(fs: &HudiFs) {
    if let Some(inv) = Follower::new().poll_once(fs, Duration::ZERO).unwrap() {
        fs.switched(&inv);
    }
}

#[test]
fn versions_follow_the_writes_of_a_merge_on_read_table() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let (mut w, _, i0, i1) = two_writes(&root);
    // A write still in flight: never a version.
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.insert("city=b", &rows(3, 5)).unwrap();
    let _pending = t.abandon();

    let fs = crate::fs_with_merge_cache(&root, &tmp.path().join("cache"));
    assert_eq!(
        log_names(&fs),
        ["00000000000000000000.json", "00000000000000000001.json"]
    );
    let v0 = actions(&fs, 0);
    assert_eq!(v0[0]["commitInfo"]["hudi.instant"], i0);
    assert!(v0[0]["commitInfo"]["hudi.completion"].is_string());
    assert_eq!(of(&v0, "protocol").len(), 1);
    assert_eq!(of(&v0, "metaData").len(), 1);
    // Without --delta-change-data: no change data feed, as a Delta table's default.
    assert!(of(&v0, "metaData")[0]["configuration"]
        .get("delta.enableChangeDataFeed")
        .is_none());
    assert_eq!(of(&v0, "protocol")[0]["minWriterVersion"], 2);
    assert!(of(&v0, "cdc").is_empty());
    assert!(walk(&fs, "delta/_change_data").is_err());
    let adds0 = of(&v0, "add");
    assert_eq!(adds0.len(), 2);
    let count = |a: &Value| -> i64 {
        let s: Value = serde_json::from_str(a["stats"].as_str().unwrap()).unwrap();
        s["numRecords"].as_i64().unwrap()
    };
    let mut counts: Vec<i64> = adds0.iter().map(|a| count(a)).collect();
    counts.sort();
    assert_eq!(counts, [40, 50]);
    let v1 = actions(&fs, 1);
    assert_eq!(v1[0]["commitInfo"]["hudi.instant"], i1);
    assert!(of(&v1, "metaData").is_empty(), "same schema: no metaData");
    let removed: Vec<&str> = of(&v1, "remove")
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    let mut removed_sorted = removed.clone();
    removed_sorted.sort();
    let mut added0: Vec<&str> = adds0.iter().map(|a| a["path"].as_str().unwrap()).collect();
    added0.sort();
    assert_eq!(removed_sorted, added0, "both groups changed");
    let adds1 = of(&v1, "add");
    let mut counts: Vec<i64> = adds1.iter().map(|a| count(a)).collect();
    counts.sort();
    // g0: 50 rows, two updated and one inserted; g1: 40 rows, three deleted.
    assert_eq!(counts, [37, 51]);
    for a in adds0.iter().chain(adds1.iter()) {
        let path = a["path"].as_str().unwrap();
        assert!(path.ends_with(".parquet"), "{path}");
        let ino = walk(&fs, &format!("delta/{path}")).unwrap();
        assert_eq!(
            fs.getattr(ino).unwrap().attr.size,
            a["size"].as_u64().unwrap(),
            "{path}"
        );
    }
    for a in &adds1 {
        let path = a["path"].as_str().unwrap();
        assert!(path.starts_with(&format!("{i1}/city=a/")), "{path}");
        assert!(path.ends_with(".merged.parquet"), "{path}");
    }

    // A new write: the next version once latest/ moves, not before.
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.insert("city=c", &rows(4, 7)).unwrap();
    let i2 = t.complete().unwrap();
    assert_eq!(log_names(&fs).len(), 2, "before the switch");
    refresh(&fs);
    assert_eq!(fs.latest_instant().as_deref(), Some(i2.as_str()));
    assert_eq!(log_names(&fs).len(), 3);
    let v2 = actions(&fs, 2);
    assert_eq!(v2[0]["commitInfo"]["hudi.instant"], i2);
    assert!(of(&v2, "remove").is_empty(), "{v2:?}");
    let adds2 = of(&v2, "add");
    assert_eq!(adds2.len(), 1);
    assert_eq!(count(adds2[0]), 7);
    // Versions 0 and 1 read the same as before.
    assert_eq!(actions(&fs, 1), v1);
    assert!(matches!(
        walk(&fs, "delta/_delta_log/00000000000000000003.json"),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn cleaned_and_archived_history_starts_at_a_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let commits = build_cleaned_and_archived(&root).unwrap();
    let fs = crate::fs_with_change_data(&root, &tmp.path().join("cache"));
    let mut want: Vec<String> = (5..12).map(|n| format!("{n:020}.json")).collect();
    want.extend([
        "00000000000000000005.checkpoint.parquet".to_string(),
        "00000000000000000010.checkpoint.parquet".to_string(),
        "_last_checkpoint".to_string(),
    ]);
    want.sort();
    assert_eq!(log_names(&fs), want);
    let last: Value = serde_json::from_slice(&read_all(
        &fs,
        walk(&fs, "delta/_delta_log/_last_checkpoint").unwrap(),
    ))
    .unwrap();
    assert_eq!(last["version"], 10);
    assert_eq!(last["size"], 3, "protocol, metaData, one add");
    assert_eq!(
        actions(&fs, 10)[0]["commitInfo"]["hudi.instant"],
        commits[10]
    );
    assert_eq!(actions(&fs, 5)[0]["commitInfo"]["hudi.instant"], commits[5]);
    // The checkpoint is a Parquet file whose one add names version 10's file.
    let cp = read_all(
        &fs,
        walk(
            &fs,
            "delta/_delta_log/00000000000000000010.checkpoint.parquet",
        )
        .unwrap(),
    );
    assert_eq!(&cp[..4], b"PAR1");
    let text = String::from_utf8_lossy(&cp);
    assert!(
        text.contains(&format!("{}/", commits[10])),
        "the add's path"
    );
    // Versions the cleaner removed are not there.
    assert!(matches!(
        walk(&fs, "delta/_delta_log/00000000000000000004.json"),
        Err(Error::NotFound(_))
    ));
    // The change data of the first version kept is refused (the table just before it is gone),
    // never given as no change; each later version's is its one update.
    let v5 = actions(&fs, 5);
    let cdc5 = of(&v5, "cdc");
    assert_eq!(cdc5.len(), 1);
    let unavailable = format!("_change_data/{}/unavailable.parquet", commits[5]);
    assert_eq!(cdc5[0]["path"], unavailable.as_str());
    assert_eq!(cdc5[0]["size"], 0);
    assert!(matches!(
        walk(&fs, &format!("delta/{unavailable}")),
        Err(Error::Refused(_))
    ));
    let columns = columns_of(of(&v5, "metaData")[0]);
    for n in 6..12 {
        let kinds = change_types(&fs, &actions(&fs, n), &columns);
        let want = [("update_postimage", 1), ("update_preimage", 1)];
        let want: std::collections::BTreeMap<String, usize> =
            want.iter().map(|(k, n)| (k.to_string(), *n)).collect();
        assert_eq!(kinds, want, "version {n}");
    }
    let listed: Vec<String> = fs
        .readdir_entries(walk(&fs, "delta/_change_data").unwrap())
        .unwrap()
        .iter()
        .map(|e| e.name.to_string())
        .collect();
    assert_eq!(listed, commits[6..], "not the refused one");
}

/// The columns of a `metaData` action's schema.
fn columns_of(meta: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(meta["schemaString"].as_str().unwrap()).unwrap();
    schema["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

/// The rows of each `_change_type` in the change data files a version's `cdc` actions name,
/// each found under `delta/` with the size its action gives, its columns those of the table
/// (`columns`) and `_change_type`.
fn change_types(
    fs: &HudiFs,
    acts: &[Value],
    columns: &[String],
) -> std::collections::BTreeMap<String, usize> {
    use arrow_array::{Array, StringArray};
    let mut out = std::collections::BTreeMap::new();
    for c in of(acts, "cdc") {
        let path = c["path"].as_str().unwrap();
        assert_eq!(c["dataChange"], false, "{c}");
        let ino = walk(fs, &format!("delta/{path}")).unwrap();
        assert_eq!(
            fs.getattr(ino).unwrap().attr.size,
            c["size"].as_u64().unwrap()
        );
        let mut f = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut f, &read_all(fs, ino)).unwrap();
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let kinds = batch.column_by_name("_change_type").unwrap();
            let kinds = kinds.as_any().downcast_ref::<StringArray>().unwrap();
            for k in kinds.iter() {
                *out.entry(k.unwrap().to_string()).or_default() += 1;
            }
            let names: Vec<String> = batch
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            assert_eq!(names[..names.len() - 1], columns[..], "the table's columns");
            assert_eq!(names[names.len() - 1], "_change_type");
        }
    }
    out
}

/// The change data feed (SEMANTICS.md §11.4): the table enables it, each data write's version
/// has `cdc` actions naming `_change_data/<instant>/` files whose rows are the write's change
/// records (an update as its pre- and post-image, a delete as its before image), and a
/// compaction's version has none, its `add`s and `remove`s without `dataChange`.
#[test]
fn data_writes_carry_their_change_data_and_a_compaction_none() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let (mut w, g0, i0, i1) = two_writes(&root);
    let c = w.schedule_compaction(&[("city=a", g0.as_str())]).unwrap();
    w.run_compaction(&c, true).unwrap();

    let fs = crate::fs_with_change_data(&root, &tmp.path().join("cache"));
    assert_eq!(log_names(&fs).len(), 3);
    // Listing the log renders nothing, and works no change data out: each log file has its
    // size on `stat` (a data write's once its change data is written).
    let listed = fs
        .readdir_entries(walk(&fs, "delta/_delta_log").unwrap())
        .unwrap();
    let listed_size = |name: &str| {
        let e = listed.iter().find(|e| &*e.name == name).unwrap();
        (e.entry.attr.size, e.entry.ttl.is_zero())
    };
    assert_eq!(listed_size("00000000000000000000.json"), (0, true));
    assert_eq!(listed_size("00000000000000000001.json"), (0, true));
    assert_eq!(listed_size("00000000000000000002.json"), (0, true));
    let merges = fs.merges_run();
    let v0 = actions(&fs, 0);
    assert!(
        fs.merges_run() > merges,
        "version 0's change data, written now"
    );
    let meta = of(&v0, "metaData")[0];
    assert_eq!(meta["configuration"]["delta.enableChangeDataFeed"], "true");
    assert_eq!(of(&v0, "protocol")[0]["minWriterVersion"], 4);
    let cdc0 = of(&v0, "cdc");
    assert_eq!(cdc0.len(), 2, "one change data file per file group written");
    for c in &cdc0 {
        let path = c["path"].as_str().unwrap();
        assert!(
            path.starts_with(&format!("_change_data/{i0}/city=a/")),
            "{path}"
        );
    }
    let kinds = |pairs: &[(&str, usize)]| -> std::collections::BTreeMap<String, usize> {
        pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    };
    let columns = columns_of(meta);
    assert!(columns.contains(&"_hoodie_record_key".to_string()));
    assert_eq!(change_types(&fs, &v0, &columns), kinds(&[("insert", 90)]));
    let v1 = actions(&fs, 1);
    assert_eq!(of(&v1, "cdc").len(), 2);
    assert_eq!(
        change_types(&fs, &v1, &columns),
        kinds(&[
            ("delete", 3),
            ("insert", 1),
            ("update_postimage", 2),
            ("update_preimage", 2)
        ])
    );
    for a in of(&v0, "add").iter().chain(of(&v1, "add").iter()) {
        assert_eq!(a["dataChange"], true);
    }
    // The compaction rewrote g0's records without changing them.
    let v2 = actions(&fs, 2);
    assert_eq!(v2[0]["commitInfo"]["hudi.instant"], c);
    assert!(of(&v2, "cdc").is_empty(), "{v2:?}");
    assert_eq!(of(&v2, "add").len(), 1);
    assert_eq!(of(&v2, "remove").len(), 1);
    for a in of(&v2, "add").iter().chain(of(&v2, "remove").iter()) {
        assert_eq!(a["dataChange"], false, "{a}");
    }
    // delta/ lists _change_data/, which lists the data writes.
    let names = |path: &str| -> Vec<String> {
        let mut v: Vec<String> = fs
            .readdir_entries(walk(&fs, path).unwrap())
            .unwrap()
            .iter()
            .map(|e| e.name.to_string())
            .collect();
        v.sort();
        v
    };
    assert!(names("delta").contains(&"_change_data".to_string()));
    let mut writes = vec![i0.clone(), i1.clone()];
    writes.sort();
    assert_eq!(names("delta/_change_data"), writes);
}

/// Every file `delta/_delta_log/` lists, by name, as read.
fn log_files(fs: &HudiFs) -> std::collections::BTreeMap<String, Vec<u8>> {
    crate::files_in(fs, "delta/_delta_log")
}

/// The saved log of the one table in merge cache `cache`.
fn saved_log(cache: &std::path::Path) -> std::path::PathBuf {
    crate::saved_side_file(cache, ".log")
}

#[test]
fn a_new_mount_takes_the_saved_log_back_and_serves_the_same_bytes() {
    // Archived and cleaned history, checkpoints, change data: versions 5 to 11.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    build_cleaned_and_archived(&root).unwrap();
    let cache = tmp.path().join("cache");
    let first = crate::fs_with_change_data(&root, &cache);
    let built = log_files(&first);
    assert_eq!(first.delta_versions_taken(), 0);
    assert!(built.contains_key("00000000000000000010.checkpoint.parquet"));
    drop(first);
    let saved_at = || {
        std::fs::metadata(saved_log(&cache))
            .unwrap()
            .modified()
            .unwrap()
    };
    let at = saved_at();
    let again = crate::fs_with_change_data(&root, &cache);
    assert_eq!(log_files(&again), built);
    assert_eq!(again.delta_versions_taken(), 7, "versions 5 to 11");
    assert_eq!(saved_at(), at, "nothing new to save");
    drop(again);
    // A damaged saved log is not used: the log is built again, the same.
    let saved = saved_log(&cache);
    let mut bytes = std::fs::read(&saved).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&saved, &bytes).unwrap();
    let damaged = crate::fs_with_change_data(&root, &cache);
    assert_eq!(log_files(&damaged), built);
    assert_eq!(damaged.delta_versions_taken(), 0);
    // Another mount's options (no change data feed) never take this one's log.
    drop(damaged);
    let other = crate::fs_with_merge_cache(&root, &cache);
    let plain = log_files(&other);
    assert_eq!(other.delta_versions_taken(), 0);
    assert_ne!(plain, built, "no cdc actions");
}

#[test]
fn a_write_after_the_saved_log_is_its_next_version_as_a_fresh_build_makes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let (mut w, g0, _, _) = two_writes(&root);
    let cache = tmp.path().join("cache");
    let first = crate::fs_with_merge_cache(&root, &cache);
    let before = log_files(&first);
    assert_eq!(before.len(), 2);
    drop(first);
    // A third write: an update into the first group's log.
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &g0, &rows_with_ids(11, &[1002, 1003]))
        .unwrap();
    t.complete().unwrap();
    let next = crate::fs_with_merge_cache(&root, &cache);
    let after = log_files(&next);
    assert_eq!(next.delta_versions_taken(), 2);
    assert_eq!(after.len(), 3);
    for (name, bytes) in &before {
        assert_eq!(after.get(name), Some(bytes), "{name}");
    }
    let fresh = crate::fs_with_merge_cache(&root, &tmp.path().join("fresh"));
    assert_eq!(log_files(&fresh), after);
    assert_eq!(fresh.delta_versions_taken(), 0);
    // The saved log now has the third version too.
    drop(next);
    let third = crate::fs_with_merge_cache(&root, &cache);
    assert_eq!(log_files(&third), after);
    assert_eq!(third.delta_versions_taken(), 3);
}

#[test]
fn a_first_build_worked_ahead_is_the_log_built_one_write_at_a_time() {
    // A copy-on-write table's first build resolves the versions after the first side by side
    // (fs/delta/ahead.rs); a build that keeps the versions before a new write resolves it
    // alone. Inserts, updates, a replace commit and a write in flight while later ones land.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let spec = TableSpec::new("d", TableType::CopyOnWrite, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    let g0 = t.insert("city=a", &rows(1, 30)).unwrap();
    let g1 = t.insert("city=a", &rows(2, 20)).unwrap();
    let g2 = t.insert("city=b", &rows(3, 25)).unwrap();
    t.complete().unwrap();
    let one_at_a_time = crate::fs_with_merge_cache(&root, &tmp.path().join("step"));
    let mut seen = vec![log_files(&one_at_a_time)];
    let mut step = || {
        refresh(&one_at_a_time);
        seen.push(log_files(&one_at_a_time));
    };
    let mut t = w.begin(Action::Commit).unwrap();
    t.update("city=a", &g0, &rows_with_ids(4, &[1000, 1001]))
        .unwrap();
    let g3 = t.insert("city=b", &rows(5, 10)).unwrap();
    t.complete().unwrap();
    step();
    let mut t = w.begin(Action::ReplaceCommit).unwrap();
    t.replace_group("city=a", &g1).unwrap();
    t.insert("city=a", &rows(6, 20)).unwrap();
    t.complete().unwrap();
    step();
    let in_flight = w.begin(Action::Commit).unwrap().abandon();
    let mut t = w.begin(Action::Commit).unwrap();
    t.update("city=b", &g2, &rows_with_ids(7, &[3000])).unwrap();
    t.update("city=b", &g3, &rows_with_ids(8, &[5000])).unwrap();
    t.complete().unwrap();
    step();
    for i in 0..12 {
        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(
            if i % 2 == 0 { "city=a" } else { "city=c" },
            &rows(20 + i, 5),
        )
        .unwrap();
        t.complete().unwrap();
        step();
    }
    let fresh = crate::fs_with_merge_cache(&root, &tmp.path().join("fresh"));
    let built = log_files(&fresh);
    assert_eq!(fresh.delta_versions_taken(), 0);
    let last = seen.last().unwrap();
    assert_eq!(
        built.keys().collect::<Vec<_>>(),
        last.keys().collect::<Vec<_>>()
    );
    for (name, bytes) in &built {
        assert_eq!(Some(bytes), last.get(name), "{name}");
    }
    // Sixteen versions, one a checkpoint; the write in flight is none of them.
    assert!(built.contains_key("00000000000000000015.json"));
    assert!(built.contains_key("00000000000000000010.checkpoint.parquet"));
    assert!(!built.contains_key("00000000000000000016.json"));
    let _ = in_flight;
}

#[test]
fn stats_of_real_base_files_are_those_of_their_whole_footers() {
    // Spark-written Hudi base files keep a bloom filter in their footers, which delta/ steps
    // over (delta/lean_footer.rs): every add's stats must be what the whole footer gives.
    let Some(dir) = hudifs_testkit::support::fixtures_dir() else {
        return;
    };
    let mut with_bloom = 0;
    let mut adds = 0;
    for f in hudifs_testkit::support::fixtures(&dir) {
        let tmp = tempfile::tempdir().unwrap();
        let root = hudifs_testkit::support::unzip(&f.zip, tmp.path());
        let props = std::fs::read_to_string(root.join(".hoodie/hoodie.properties")).unwrap();
        if !props.contains("hoodie.table.type=COPY_ON_WRITE") {
            continue;
        }
        let fs = crate::fs_with_merge_cache(&root, &tmp.path().join("cache"));
        let Ok(names) = fs
            .readdir_entries(walk(&fs, "delta/_delta_log").unwrap())
            .map(|es| es.iter().map(|e| e.name.to_string()).collect::<Vec<_>>())
        else {
            continue;
        };
        for name in names.iter().filter(|n| n.ends_with(".json")) {
            let Ok(ino) = walk(&fs, &format!("delta/_delta_log/{name}")) else {
                continue;
            };
            let Ok(text) = String::from_utf8(read_all(&fs, ino)) else {
                continue;
            };
            for line in text.lines() {
                let a: Value = serde_json::from_str(line).unwrap();
                let Some(add) = a.get("add") else { continue };
                let path = hudifs::delta::log::decode_path(add["path"].as_str().unwrap());
                let bytes = read_all(&fs, walk(&fs, &format!("delta/{path}")).unwrap());
                let n = bytes.len();
                let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
                let footer = &bytes[n - 8 - len..n - 8];
                if footer
                    .windows(27)
                    .any(|w| w == b"org.apache.hudi.bloomfilter")
                {
                    with_bloom += 1;
                }
                let whole = hudifs::delta::stats::footer_facts(
                    footer,
                    &hudifs::delta::stats::ArrowSchemas::default(),
                )
                .unwrap();
                assert_eq!(
                    add["stats"].as_str(),
                    Some(&*whole.stats),
                    "{}: {path}",
                    f.name
                );
                adds += 1;
            }
        }
    }
    eprintln!("{adds} adds, {with_bloom} of files with a bloom filter");
    assert!(with_bloom > 10, "{with_bloom} files with a bloom filter");
}
