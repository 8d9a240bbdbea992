//! The metadata table the generator writes, read back from disk with `hudifs_hfile`'s reader,
//! the log block parser and `apache_avro` — not through the writer's model — and compared with
//! the files the writer knows are committed; and compared in shape with a Spark-written MDT.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use super::*;
use hudifs_core::timeline::parse_instant_file_name;
use hudifs_hfile::HFileReader;

const START: i64 = DEMO_CLOCK_START_MS;

/// The MDT as read from disk.
struct DiskMdt {
    /// Merged records of the committed base file and committed, not rolled back, data blocks.
    records: BTreeMap<String, FilesRecord>,
    /// Completed MDT deltacommits, compaction commits and rollbacks (requested times).
    deltacommits: BTreeSet<String>,
    commits: BTreeSet<String>,
    rollbacks: BTreeSet<String>,
    /// File names in the `files` partition.
    names: BTreeSet<String>,
}

fn mdt_timeline_dir(root: &Path, layout: Layout) -> PathBuf {
    match layout {
        Layout::V1 => root.join(".hoodie/metadata/.hoodie"),
        Layout::V2 => root.join(".hoodie/metadata/.hoodie/timeline"),
    }
}

fn hfile_records(bytes: Vec<u8>, schema_override: Option<&str>) -> Vec<FilesRecord> {
    let r = HFileReader::open(bytes).unwrap();
    let schema = match schema_override {
        Some(s) => s.to_string(),
        None => String::from_utf8(r.file_info(b"schema").unwrap().to_vec()).unwrap(),
    };
    r.scan()
        .map(|kv| {
            let (k, v) = kv.unwrap();
            decode_files_record(&k, &v, &schema).unwrap()
        })
        .collect()
}

fn read_mdt(root: &Path, layout: Layout) -> DiskMdt {
    let mut deltacommits = BTreeSet::new();
    let mut commits = BTreeSet::new();
    let mut rollbacks = BTreeSet::new();
    for e in std::fs::read_dir(mdt_timeline_dir(root, layout)).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        let Some(f) = parse_instant_file_name(&name, layout) else {
            continue;
        };
        if f.state != State::Completed {
            continue;
        }
        let t = f.requested.to_string();
        match f.action {
            Action::DeltaCommit => deltacommits.insert(t),
            Action::Commit | Action::Compaction => commits.insert(t),
            Action::Rollback => rollbacks.insert(t),
            _ => false,
        };
    }
    let dir = root.join(FILES_PARTITION_DIR);
    let names: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    // The latest base file written by a completed instant.
    let base = names
        .iter()
        .filter(|n| n.ends_with(".hfile"))
        .filter_map(|n| {
            let t = n.trim_end_matches(".hfile").rsplit('_').next()?.to_string();
            (deltacommits.contains(&t) || commits.contains(&t)).then(|| (t, n.clone()))
        })
        .max()
        .expect("a committed base file");
    let mut all = hfile_records(std::fs::read(dir.join(&base.1)).unwrap(), None);
    let mut rolled_back = BTreeSet::new();
    let mut blocks: Vec<(String, Vec<FilesRecord>)> = Vec::new();
    for n in names.iter().filter(|n| n.contains(".log.")) {
        for b in read_blocks(&std::fs::read(dir.join(n)).unwrap()).unwrap() {
            if b.is_rollback_command() {
                rolled_back.insert(b.target_instant().unwrap().to_string());
            } else if b.block_type == blocks::HFILE_DATA {
                let instant = b.instant().unwrap().to_string();
                let recs = hfile_records(b.content.clone(), b.schema());
                blocks.push((instant, recs));
            }
        }
    }
    blocks.retain(|(t, _)| deltacommits.contains(t) && !rolled_back.contains(t) && *t > base.0);
    blocks.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, recs) in blocks {
        all.extend(recs);
    }
    DiskMdt {
        records: merge_records(&all),
        deltacommits,
        commits,
        rollbacks,
        names,
    }
}

/// Type-2 records as partition → live files (non-empty only).
fn live(records: &BTreeMap<String, FilesRecord>) -> BTreeMap<String, BTreeMap<String, u64>> {
    records
        .values()
        .filter(|r| r.record_type == TYPE_FILE_LIST)
        .map(|r| {
            let files: BTreeMap<String, u64> = r
                .files
                .iter()
                .filter(|(_, i)| !i.is_deleted)
                .map(|(n, i)| (n.clone(), i.size))
                .collect();
            (r.key.clone(), files)
        })
        .filter(|(_, f)| !f.is_empty())
        .collect()
}

fn expected(w: &TableWriter) -> BTreeMap<String, BTreeMap<String, u64>> {
    w.committed_files()
        .into_iter()
        .filter(|(_, f)| !f.is_empty())
        .collect()
}

/// The MDT on disk lists exactly the committed files (with their sizes on disk) and the
/// partitions holding them; the writer's model agrees.
fn check(w: &TableWriter, what: &str) -> DiskMdt {
    let disk = read_mdt(w.root(), w.layout());
    let want = expected(w);
    assert_eq!(
        live(&disk.records),
        want,
        "{what}: MDT on disk vs committed files"
    );
    assert_eq!(
        live(&w.metadata_records()),
        want,
        "{what}: writer's MDT model vs committed files"
    );
    for (p, files) in &want {
        for (n, size) in files {
            let path = if p == NON_PARTITIONED_KEY {
                w.root().join(n)
            } else {
                w.root().join(p).join(n)
            };
            let on_disk = std::fs::metadata(&path)
                .unwrap_or_else(|e| panic!("{what}: {}: {e}", path.display()))
                .len();
            assert_eq!(on_disk, *size, "{what}: size of {}", path.display());
        }
    }
    let parts = record_partitions(&disk.records);
    for p in want.keys() {
        assert!(parts.contains(p), "{what}: partition {p} not in {parts:?}");
    }
    disk
}

fn part(partitioned: bool, city: &str) -> String {
    if partitioned {
        format!("city={city}")
    } else {
        String::new()
    }
}

/// A history of inserts, updates, a data compaction (MOR), a clean, a failed write rolled
/// back, MDT compactions (one left pending over a write); the MDT checked after each step.
fn history(version: u32, table_type: TableType, partitioned: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = TableSpec::new("mdt", table_type, version).with_metadata_table();
    if partitioned {
        spec = spec.partitioned_by(&["city"], true);
    }
    let mor = table_type == TableType::MergeOnRead;
    let (pa, pb) = (part(partitioned, "a"), part(partitioned, "b"));
    let mut w = TableWriter::create(dir.path(), spec, START).unwrap();
    let props = std::fs::read_to_string(dir.path().join(".hoodie/hoodie.properties")).unwrap();
    assert!(props.contains("\nhoodie.table.metadata.partitions=files\n"));
    let mdt_props = std::fs::read_to_string(
        dir.path()
            .join(".hoodie/metadata/.hoodie/hoodie.properties"),
    )
    .unwrap();
    assert!(mdt_props.contains("hoodie.table.type=MERGE_ON_READ"));
    assert!(mdt_props.contains("hoodie.table.base.file.format=HFILE"));
    assert!(mdt_props.contains(&format!("hoodie.table.version={version}\n")));
    let info = w.metadata_table().unwrap();
    if version == 6 {
        assert_eq!(info.init_instant, "00000000000000010");
        assert_eq!(info.file_id, "files-0000");
    } else {
        assert_eq!(info.init_instant, "00000000000000000");
        assert_eq!(info.file_id, "files-0000-0");
    }
    let disk = check(&w, "init");
    assert!(disk.deltacommits.contains(&info.init_instant));

    let action = w.write_action();
    let mut txn = w.begin(action).unwrap();
    let fa = txn.insert(&pa, &rows(1, 10)).unwrap();
    let fb = if partitioned {
        txn.insert(&pb, &rows(2, 10)).unwrap()
    } else {
        txn.insert(&pa, &rows_with_ids(2, &(100..110).collect::<Vec<_>>()))
            .unwrap()
    };
    let pb = if partitioned { pb } else { pa.clone() };
    let t1 = txn.complete().unwrap();
    let disk = check(&w, "insert");
    assert!(disk.deltacommits.contains(&t1), "MDT deltacommit at {t1}");

    let mut txn = w.begin(action).unwrap();
    txn.update(&pa, &fa, &rows_with_ids(3, &[1, 2])).unwrap();
    txn.complete().unwrap();
    check(&w, "update");

    let old_files = w.group_files(&pa, &fa);
    if mor {
        let c = w.schedule_compaction(&[(pa.clone(), fa.clone())]).unwrap();
        w.run_compaction(&c, true).unwrap();
        check(&w, "data compaction");
    }
    let latest = w.completed_writes().keys().next_back().unwrap().clone();
    // The slice before the update (COW: its base file) or the compaction (MOR: base and log).
    let keep = if mor { old_files.len() } else { 1 };
    let to_clean: Vec<(String, String)> = old_files[..keep]
        .iter()
        .map(|n| (pa.clone(), n.clone()))
        .collect();
    assert!(!to_clean.is_empty());
    let clean = w.clean(&latest, &to_clean).unwrap();
    let disk = check(&w, "clean");
    assert!(disk.deltacommits.contains(&clean));

    // An insert overwrite: new files listed, the replaced group's files stay until cleaned.
    let mut txn = w.begin(Action::ReplaceCommit).unwrap();
    txn.insert(&pb, &rows(7, 4)).unwrap();
    txn.replace_group(&pb, &fb).unwrap();
    let replace = txn.complete().unwrap();
    let disk = check(&w, "replacecommit");
    assert!(disk.deltacommits.contains(&replace));
    let fb_files = w.group_files(&pb, &fb);
    assert!(!fb_files.is_empty());
    for f in &fb_files {
        assert!(live(&disk.records)[partition_key(&pb)].contains_key(f));
    }
    // A write into a new group (the replaced one cannot be written).
    let mut txn = w.begin(action).unwrap();
    let fb = txn
        .insert(&pb, &rows_with_ids(8, &[100, 101, 102]))
        .unwrap();
    txn.complete().unwrap();
    check(&w, "insert after the replacecommit");

    // A failed write, rolled back.
    let mut txn = w.begin(action).unwrap();
    txn.update(&pb, &fb, &rows_with_ids(4, &[100, 101]))
        .unwrap();
    let failed = txn.abandon();
    check(&w, "failed write in flight");
    let rb = w.rollback(&failed).unwrap();
    let disk = check(&w, "rollback");
    assert!(!disk.deltacommits.contains(&failed));
    assert_eq!(disk.deltacommits.contains(&rb), version == 6);

    let c = w.compact_metadata().unwrap();
    let disk = check(&w, "MDT compaction");
    assert!(disk.commits.contains(&c));
    if version == 6 {
        let last_delta = disk.deltacommits.iter().filter(|t| **t < c).max().unwrap();
        assert_eq!(c, format!("{last_delta}001"));
    }
    let base = w.metadata_table().unwrap().base_file;
    assert!(base.ends_with(&format!("_{c}.hfile")), "{base}");

    if version == 6 {
        // The next compaction's instant would be this one's again.
        assert!(w.schedule_metadata_compaction().is_err());
    }
    let mut txn = w.begin(action).unwrap();
    txn.insert(&pa, &rows(6, 2)).unwrap();
    txn.complete().unwrap();
    check(&w, "write after the MDT compaction");

    // An MDT compaction pending over a write: two slices of the files group.
    let c2 = w.schedule_metadata_compaction().unwrap();
    let pc = part(partitioned, "c");
    let mut txn = w.begin(action).unwrap();
    txn.insert(&pc, &rows(5, 3)).unwrap();
    let t5 = txn.complete().unwrap();
    check(&w, "write over a requested MDT compaction");
    let info = w.metadata_table().unwrap();
    let newest_log = info.log_files.last().unwrap().clone();
    if version == 6 {
        assert!(
            newest_log.contains(&format!("_{c2}.log.1_")),
            "{newest_log}"
        );
    } else {
        assert!(
            newest_log.contains(&format!("_{t5}.log.1_")),
            "{newest_log}"
        );
    }
    w.run_metadata_compaction(&c2, false).unwrap();
    let disk = check(&w, "inflight MDT compaction");
    assert_eq!(
        disk.names.iter().filter(|n| n.ends_with(".hfile")).count(),
        3
    );
    w.run_metadata_compaction(&c2, true).unwrap();
    let disk = check(&w, "MDT compaction completed");
    assert!(disk.commits.contains(&c2));
    // The new base folded the slice before it, not the write over it.
    let base_records = hfile_records(
        std::fs::read(
            w.root()
                .join(FILES_PARTITION_DIR)
                .join(w.metadata_table().unwrap().base_file),
        )
        .unwrap(),
        None,
    );
    let pc_key = partition_key(&pc).to_string();
    let in_base = base_records.iter().any(|r| {
        r.key == pc_key
            && r.record_type == TYPE_FILE_LIST
            && r.files.keys().any(|n| n.contains(&t5))
    });
    assert!(!in_base, "the write over the compaction is not in its base");
    assert!(live(&disk.records)
        .get(&pc_key)
        .is_some_and(|f| f.keys().any(|n| n.contains(&t5))));
}

#[test]
fn v6_mor_partitioned() {
    history(6, TableType::MergeOnRead, true);
}

#[test]
fn v6_cow_nonpartitioned() {
    history(6, TableType::CopyOnWrite, false);
}

#[test]
fn v9_mor_nonpartitioned() {
    history(9, TableType::MergeOnRead, false);
}

#[test]
fn v9_cow_partitioned() {
    history(9, TableType::CopyOnWrite, true);
}

#[test]
fn v6_cow_partitioned_and_v9_mor_partitioned() {
    history(6, TableType::CopyOnWrite, true);
    history(9, TableType::MergeOnRead, true);
}

#[test]
fn v8_mor_partitioned() {
    history(8, TableType::MergeOnRead, true);
}

/// The schemas written per table version: v8's and v9's are the fixtures' SCHEMA headers; v6's
/// is v8's without the fields 1.0 added.
#[test]
fn record_schemas_per_table_version() {
    let names = |s: &str| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(s).unwrap();
        v["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect()
    };
    let v6 = record_schema(6).unwrap();
    let v8 = record_schema(8).unwrap();
    let v9 = record_schema(9).unwrap();
    assert!(names(&v9).contains(&"SecondaryIndexMetadata".to_string()));
    assert!(names(&v8).contains(&"SecondaryIndexMetadata".to_string()));
    assert!(!names(&v6).contains(&"SecondaryIndexMetadata".to_string()));
    assert!(v9.contains("\"valueType\"") && !v8.contains("\"valueType\""));
    assert!(v8.contains("\"isTightBound\"") && !v6.contains("\"isTightBound\""));
    assert!(v8.contains("\"position\"") && !v6.contains("\"position\""));
    assert_eq!(&names(&v6)[..8], &names(&v9)[..8]);
    let Some(fixtures) = crate::fixtures::dir() else {
        return;
    };
    let zip_path = fixtures.join("tables/quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip");
    let mut archive = zip::ZipArchive::new(std::fs::File::open(zip_path).unwrap()).unwrap();
    let mut checked = 0;
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).unwrap();
        if !f.name().contains("/.hoodie/metadata/files/.files-") {
            continue;
        }
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        for b in read_blocks(&bytes).unwrap() {
            if b.block_type == blocks::HFILE_DATA {
                assert_eq!(b.schema(), Some(v8.as_str()), "{}", f.name());
                checked += 1;
            }
        }
    }
    assert!(checked > 0);
}

/// A write whose MDT update is skipped: the MDT is behind the data timeline.
#[test]
fn skipped_metadata_update_leaves_the_mdt_behind() {
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let spec = TableSpec::new("t", TableType::CopyOnWrite, version)
            .partitioned_by(&["city"], true)
            .with_metadata_table();
        let mut w = TableWriter::create(dir.path(), spec, START).unwrap();
        let mut txn = w.begin(Action::Commit).unwrap();
        txn.insert("city=a", &rows(1, 3)).unwrap();
        txn.complete().unwrap();
        check(&w, "first write");
        let mut txn = w.begin(Action::Commit).unwrap();
        txn.insert("city=b", &rows(2, 3)).unwrap();
        txn.skip_metadata_update();
        let t = txn.complete().unwrap();
        let disk = read_mdt(w.root(), w.layout());
        assert!(!disk.deltacommits.contains(&t));
        assert!(w.completed_writes().contains_key(&t));
        assert_ne!(live(&disk.records), expected(&w));
        assert!(!live(&disk.records).contains_key("city=b"));
    }
}

/// A write that completed its MDT deltacommit and then failed: the MDT names its files until
/// the rollback, which rolls the MDT deltacommit back as Java does.
#[test]
fn failed_write_after_its_mdt_deltacommit_is_rolled_back_in_the_mdt() {
    for (version, tt) in [
        (6, TableType::MergeOnRead),
        (9, TableType::MergeOnRead),
        (6, TableType::CopyOnWrite),
        (9, TableType::CopyOnWrite),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let spec = TableSpec::new("t", tt, version)
            .partitioned_by(&["city"], true)
            .with_metadata_table();
        let mut w = TableWriter::create(dir.path(), spec, START).unwrap();
        let action = w.write_action();
        let mut txn = w.begin(action).unwrap();
        let fid = txn.insert("city=a", &rows(1, 3)).unwrap();
        txn.complete().unwrap();
        let mut txn = w.begin(action).unwrap();
        let written = txn.update("city=a", &fid, &rows_with_ids(2, &[1])).unwrap();
        txn.insert("city=b", &rows(3, 2)).unwrap();
        let failed = txn.abandon_after_metadata(true).unwrap();
        let disk = read_mdt(w.root(), w.layout());
        assert!(disk.deltacommits.contains(&failed));
        assert!(live(&disk.records)["city=a"].contains_key(&written));
        assert_ne!(live(&disk.records), expected(&w));
        assert!(w.pending_writes().contains(&failed));

        let rb = w.rollback(&failed).unwrap();
        let disk = check(&w, "rolled back");
        assert!(!disk.deltacommits.contains(&failed));
        let mdt_rb = if version == 6 {
            format!("{rb}006")
        } else {
            rb.clone()
        };
        assert!(disk.rollbacks.contains(&mdt_rb), "{:?}", disk.rollbacks);
        let tl = mdt_timeline_dir(w.root(), w.layout());
        let left: Vec<String> = std::fs::read_dir(&tl)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| {
                n.starts_with(&format!("{failed}.")) || n.starts_with(&format!("{failed}_"))
            })
            .collect();
        assert!(left.is_empty(), "{left:?}");
        if version == 6 {
            // The MDT log of the failed deltacommit stays, with a command block after it.
            let cmd = disk
                .names
                .iter()
                .find(|n| n.ends_with("_1-0-1"))
                .expect("a rollback command block log");
            let b =
                read_blocks(&std::fs::read(w.root().join(FILES_PARTITION_DIR).join(cmd)).unwrap())
                    .unwrap();
            assert!(b[0].is_rollback_command());
            assert_eq!(b[0].target_instant(), Some(failed.as_str()));
        } else {
            assert!(!disk.names.iter().any(|n| n.contains(&failed)));
        }
    }
}

/// An MDT deltacommit left inflight and rolled back in the MDT alone.
#[test]
fn inflight_mdt_deltacommit_rolled_back_in_the_mdt() {
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let spec = TableSpec::new("t", TableType::MergeOnRead, version).with_metadata_table();
        let mut w = TableWriter::create(dir.path(), spec, START).unwrap();
        let mut txn = w.begin(Action::DeltaCommit).unwrap();
        txn.insert("", &rows(1, 3)).unwrap();
        let failed = txn.abandon_after_metadata(false).unwrap();
        assert_eq!(
            w.metadata_table().unwrap().deltacommits.get(&failed),
            Some(&MdtCommitState::Inflight)
        );
        check(&w, "inflight MDT deltacommit");
        let rb = w.rollback_metadata_deltacommit(&failed).unwrap();
        let disk = read_mdt(w.root(), w.layout());
        assert!(disk.rollbacks.contains(&rb));
        assert_eq!(
            w.metadata_table().unwrap().deltacommits.get(&failed),
            Some(&MdtCommitState::RolledBack)
        );
        w.rollback(&failed).unwrap();
        check(&w, "after both rollbacks");
    }
}

/// A data rollback of a write whose MDT deltacommit was left inflight: 1.x rolls the MDT
/// deltacommit back at the rollback's instant, 0.14 leaves it to the MDT's own cleaning.
#[test]
fn data_rollback_of_a_write_with_an_inflight_mdt_deltacommit() {
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let spec = TableSpec::new("t", TableType::MergeOnRead, version).with_metadata_table();
        let mut w = TableWriter::create(dir.path(), spec, START).unwrap();
        let mut txn = w.begin(Action::DeltaCommit).unwrap();
        txn.insert("", &rows(1, 3)).unwrap();
        let failed = txn.abandon_after_metadata(false).unwrap();
        let rb = w.rollback(&failed).unwrap();
        let state = w
            .metadata_table()
            .unwrap()
            .deltacommits
            .get(&failed)
            .copied();
        let disk = check(&w, "rolled back");
        if version == 6 {
            assert_eq!(state, Some(MdtCommitState::Inflight));
            assert!(!disk.rollbacks.iter().any(|r| r.starts_with(&rb)));
            assert!(disk.deltacommits.contains(&rb));
        } else {
            assert_eq!(state, Some(MdtCommitState::RolledBack));
            assert!(disk.rollbacks.contains(&rb));
            assert!(!disk.deltacommits.contains(&rb));
        }
    }
}

#[test]
fn truncated_mdt_files_do_not_parse() {
    let dir = tempfile::tempdir().unwrap();
    let spec = TableSpec::new("t", TableType::MergeOnRead, 9).with_metadata_table();
    let mut w = TableWriter::create(dir.path(), spec, START).unwrap();
    let mut txn = w.begin(Action::DeltaCommit).unwrap();
    txn.insert("", &rows(1, 3)).unwrap();
    txn.complete().unwrap();
    let info = w.metadata_table().unwrap();
    let log = info.log_files.last().unwrap().clone();
    let files = w.root().join(FILES_PARTITION_DIR);
    let len = std::fs::metadata(files.join(&log)).unwrap().len();
    assert!(read_blocks(&std::fs::read(files.join(&log)).unwrap()).is_ok());
    w.truncate_metadata_file(&log, len - 10).unwrap();
    assert!(read_blocks(&std::fs::read(files.join(&log)).unwrap()).is_err());
    assert!(HFileReader::open(std::fs::read(files.join(&info.base_file)).unwrap()).is_ok());
    w.truncate_metadata_file(&info.base_file, 100).unwrap();
    assert!(HFileReader::open(std::fs::read(files.join(&info.base_file)).unwrap()).is_err());
}

/// An MDT enabled on a table with history: its base file holds the committed files.
#[test]
fn enabling_the_mdt_later_bases_it_on_the_committed_files() {
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let spec =
            TableSpec::new("t", TableType::MergeOnRead, version).partitioned_by(&["city"], true);
        let mut w = TableWriter::create(dir.path(), spec, START).unwrap();
        let mut txn = w.begin(Action::DeltaCommit).unwrap();
        let fid = txn.insert("city=a", &rows(1, 3)).unwrap();
        let t1 = txn.complete().unwrap();
        let mut txn = w.begin(Action::DeltaCommit).unwrap();
        txn.update("city=a", &fid, &rows_with_ids(2, &[1])).unwrap();
        let t2 = txn.complete().unwrap();
        // The latest completed action need not be a write.
        let clean = w.clean(&t2, &[("city=a", "no-such-file.parquet")]).unwrap();
        assert!(clean > t2);
        assert!(!w.has_metadata_table());
        w.enable_metadata_table().unwrap();
        let info = w.metadata_table().unwrap();
        let want = if version == 6 {
            format!("{clean}010")
        } else {
            clean.clone()
        };
        assert_eq!(info.init_instant, want);
        assert!(t1 < t2);
        let disk = check(&w, "enabled later");
        // All in the base file: no data block yet.
        assert!(disk.names.iter().filter(|n| n.contains(".log.")).count() == 1);
        let props = std::fs::read_to_string(dir.path().join(".hoodie/hoodie.properties")).unwrap();
        assert!(props.contains("hoodie.table.metadata.partitions=files"));
    }
}

/// The shapes of a Spark-written 1.x MDT: the log block header keys and schema, the file info
/// of its HFiles, the file names, and its records decode with our decoder.
#[test]
fn shapes_match_a_spark_written_metadata_table() {
    let Some(fixtures) = crate::fixtures::dir() else {
        return;
    };
    let zip_path = fixtures.join("tables/sample_table/cow/v9_txns_simple_meta.zip");
    let mut archive = zip::ZipArchive::new(std::fs::File::open(zip_path).unwrap()).unwrap();
    let mut java_logs: Vec<(String, Vec<u8>)> = Vec::new();
    let mut java_bases: Vec<(String, Vec<u8>)> = Vec::new();
    for i in 0..archive.len() {
        let mut f = archive.by_index(i).unwrap();
        let name = f.name().to_string();
        if !name.contains("/.hoodie/metadata/files/") {
            continue;
        }
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        let base = name.rsplit('/').next().unwrap().to_string();
        if base.ends_with(".hfile") {
            java_bases.push((base, bytes));
        } else if base.contains(".log.") {
            java_logs.push((base, bytes));
        }
    }
    assert!(!java_bases.is_empty() && !java_logs.is_empty());

    let dir = tempfile::tempdir().unwrap();
    let spec = TableSpec::new("t", TableType::CopyOnWrite, 9)
        .partitioned_by(&["region"], true)
        .with_metadata_table();
    let mut w = TableWriter::create(dir.path(), spec, START).unwrap();
    let mut txn = w.begin(Action::Commit).unwrap();
    txn.insert("region=apac", &rows(1, 3)).unwrap();
    txn.complete().unwrap();
    let files = w.root().join(FILES_PARTITION_DIR);
    let info = w.metadata_table().unwrap();
    let ours_log =
        read_blocks(&std::fs::read(files.join(info.log_files.last().unwrap())).unwrap()).unwrap();
    let ours_init = read_blocks(&std::fs::read(files.join(&info.log_files[0])).unwrap()).unwrap();

    // File names: the same shape once every run of digits (instants, tokens) is one `9`.
    let name_shape = |n: &str| {
        let mut out = String::new();
        for c in n.chars() {
            if c.is_ascii_digit() {
                if !out.ends_with('9') {
                    out.push('9');
                }
            } else {
                out.push(c);
            }
        }
        out
    };
    let java_names: BTreeSet<String> = java_logs
        .iter()
        .chain(&java_bases)
        .map(|(n, _)| name_shape(n))
        .collect();
    for n in info.log_files.iter().chain([&info.base_file]) {
        assert!(java_names.contains(&name_shape(n)), "{n} vs {java_names:?}");
    }

    let mut seen_data = false;
    let mut seen_delete = false;
    for (name, bytes) in &java_logs {
        for b in read_blocks(bytes).unwrap() {
            let keys: BTreeSet<i32> = b.header.iter().map(|(k, _)| *k).collect();
            if b.block_type == blocks::HFILE_DATA {
                seen_data = true;
                let ours = &ours_log[0];
                assert_eq!(ours.block_type, blocks::HFILE_DATA);
                let our_keys: BTreeSet<i32> = ours.header.iter().map(|(k, _)| *k).collect();
                assert_eq!(keys, our_keys, "{name}");
                assert_eq!(b.schema(), ours.schema(), "{name}: SCHEMA header");
                let java_hfile = HFileReader::open(b.content.clone()).unwrap();
                let our_hfile = HFileReader::open(ours.content.clone()).unwrap();
                let jk: BTreeSet<&Vec<u8>> = java_hfile.file_info_entries().keys().collect();
                let ok: BTreeSet<&Vec<u8>> = our_hfile.file_info_entries().keys().collect();
                assert_eq!(jk, ok, "{name}: file info keys");
                assert_eq!(java_hfile.codec(), our_hfile.codec());
                // Java's records decode with our decoder, under the header schema.
                let recs = hfile_records(b.content.clone(), b.schema());
                let all = recs.iter().find(|r| r.key == ALL_PARTITIONS_KEY).unwrap();
                assert_eq!(all.record_type, TYPE_PARTITION_LIST);
                for r in recs.iter().filter(|r| r.key != ALL_PARTITIONS_KEY) {
                    assert_eq!(r.record_type, TYPE_FILE_LIST, "{name}: {r:?}");
                    assert!(r.key.starts_with("region="), "{name}: {r:?}");
                    assert!(r.files.values().all(|i| i.size > 0 || i.is_deleted));
                }
            } else if b.block_type == blocks::DELETE {
                seen_delete = true;
                assert_eq!(b, ours_init[0], "{name}: the init log's empty delete block");
            }
        }
    }
    assert!(seen_data && seen_delete);
    // The newest base (a compaction's, with the table's partitions in it).
    let (bname, bbytes) = java_bases
        .iter()
        .max_by_key(|(n, _)| {
            n.trim_end_matches(".hfile")
                .rsplit('_')
                .next()
                .map(str::to_string)
        })
        .unwrap();
    let java_base = HFileReader::open(bbytes.clone()).unwrap();
    let our_base = HFileReader::open(std::fs::read(files.join(&info.base_file)).unwrap()).unwrap();
    let jk: BTreeSet<&Vec<u8>> = java_base.file_info_entries().keys().collect();
    let ok: BTreeSet<&Vec<u8>> = our_base.file_info_entries().keys().collect();
    let missing: Vec<_> = jk
        .difference(&ok)
        .map(|k| String::from_utf8_lossy(k))
        .collect();
    assert_eq!(
        missing,
        vec!["bloomFilterTypeCode"],
        "{bname}: file info keys"
    );
    assert_eq!(
        java_base.file_info(b"schema"),
        our_base.file_info(b"schema"),
        "{bname}: schema"
    );
    // The Java base's partition list decodes and names the table's partition.
    let recs = hfile_records(bbytes.clone(), None);
    let all = recs.iter().find(|r| r.key == ALL_PARTITIONS_KEY).unwrap();
    assert!(
        all.files.keys().any(|k| k.starts_with("region=")),
        "{all:?}"
    );
}

/// The wide generated table: N partitions with an MDT, written in one bulk commit, fast.
#[test]
fn wide_table_with_metadata_table() {
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let started = std::time::Instant::now();
        let w =
            build_wide_table(dir.path(), version, TableType::CopyOnWrite, 5_000, START).unwrap();
        let took = started.elapsed();
        assert!(took.as_secs() < 60, "v{version}: {took:?}");
        let disk = check(&w, "wide table");
        assert_eq!(record_partitions(&disk.records).len(), 5_000);
        assert_eq!(live(&disk.records).len(), 5_000);
    }
}
