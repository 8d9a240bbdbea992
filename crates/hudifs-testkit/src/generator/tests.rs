//! Write tables with the generator, read them back with the reading half of hudifs.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;

use ::parquet::file::reader::{FileReader, SerializedFileReader};
use serde_json::Value as Json;

use super::*;
use hudifs_core::ids::{FileGroupId, FileRef};
use hudifs_core::listing::{parse_base_name, parse_data_name, DataFile, DataName};
use hudifs_core::metadata::{self, CommitMetadata};
use hudifs_core::snapshot::Snapshot;
use hudifs_core::timeline::{Instant, Timeline};
use hudifs_storage::{LocalStore, TablePath};

/// The table at `root` read back through the reading half of hudifs.
fn open(root: &Path) -> Snapshot {
    Snapshot::open(Arc::new(LocalStore::new(root).unwrap())).unwrap()
}

/// Every data file of the table, by partition.
struct Files {
    partitions: BTreeMap<Arc<str>, Vec<DataFile>>,
}

impl Files {
    fn files(&self) -> impl Iterator<Item = &DataFile> {
        self.partitions.values().flatten()
    }
}

fn list_table(snap: &Snapshot) -> Files {
    Files {
        partitions: snap
            .partitions
            .iter()
            .map(|p| (p.clone(), snap.list_partition(p).unwrap()))
            .collect(),
    }
}

const START: i64 = DEMO_CLOCK_START_MS;

fn parquet_rows(path: &Path) -> (i64, usize) {
    let reader = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
    let md = reader.metadata().file_metadata();
    (md.num_rows(), md.schema_descr().num_columns())
}

fn log_records(path: &Path) -> i64 {
    let blocks = read_blocks(&std::fs::read(path).unwrap()).unwrap();
    blocks
        .iter()
        .filter_map(|b| b.record_count())
        .map(i64::from)
        .sum()
}

/// Files of one instant in the timeline directory, by name.
fn instant_files(tl: &Timeline, requested: &str) -> BTreeSet<String> {
    tl.instants()
        .filter(|i| i.requested == requested)
        .flat_map(|i| i.files.iter().map(|f| f.name.clone()))
        .collect()
}

fn instant<'a>(tl: &'a Timeline, requested: &str, action: Action) -> &'a Instant {
    tl.instants()
        .find(|i| i.requested == requested && i.action == action)
        .unwrap_or_else(|| panic!("no {} at {requested}", action.name()))
}

/// What every generated table must satisfy when read back.
fn check_table(root: &Path, spec: &TableSpec) -> Snapshot {
    let snap = open(root);
    let cfg = &*snap.cfg;
    assert_eq!(cfg.version, spec.version);
    assert_eq!(cfg.layout.number(), if spec.version >= 8 { 2 } else { 1 });
    assert_eq!(cfg.table_type, spec.table_type);
    assert_eq!(cfg.partition_fields, spec.partition_fields);
    assert_eq!(cfg.populate_meta_fields, spec.populate_meta_fields);
    assert_eq!(cfg.name, spec.name);
    assert!(cfg.timeline_zone.is_some());
    assert!(cfg.properties["hoodie.table.create.schema"].contains("\"name\":\"id\""));
    let tl = snap.timeline();
    assert!(!tl.archive_nonempty);

    // Every file in a partition directory is a partition metafile or a parsable data file.
    let listing = list_table(&snap);
    for p in listing.partitions.keys() {
        let dir = root.join(&**p);
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            if e.file_type().unwrap().is_dir() {
                continue;
            }
            assert!(
                name == PARTITION_METAFILE
                    || parse_data_name(&name, &cfg.base_extensions).is_some()
                    || (spec.cdc.is_some() && cdc_log_name(&name, spec.version).is_some()),
                "{p}/{name} does not parse"
            );
        }
        let meta = std::fs::read_to_string(dir.join(PARTITION_METAFILE)).unwrap();
        let props = hudifs_core::properties::parse_properties(&meta);
        let depth = if p.is_empty() {
            0
        } else {
            p.split('/').count()
        };
        assert_eq!(props["partitionDepth"], depth.to_string());
        assert_eq!(props["commitTime"].len(), 17);
    }
    for f in listing.files() {
        if f.is_base() {
            let (_, cols) = parquet_rows(&root.join(f.rel_path()));
            let data_cols = 4 + spec.partition_fields.len();
            assert_eq!(
                cols,
                data_cols + if spec.populate_meta_fields { 5 } else { 0 }
            );
        }
    }

    // Files removed by completed cleans (a real table's old commits point at them too).
    let mut cleaned = BTreeSet::new();
    for clean in tl.completed_of(Action::Clean) {
        let v = snap.meta.json(clean).unwrap();
        for pm in v["partitionMetadata"].as_object().unwrap().values() {
            for f in pm["successDeleteFiles"].as_array().unwrap() {
                cleaned.insert(f.as_str().unwrap().to_string());
            }
        }
    }

    // Completed writes: metadata decodes, every path exists and holds numWrites rows.
    for (t, inst) in &tl.completed {
        let m = snap
            .meta
            .commit(inst)
            .unwrap_or_else(|e| panic!("{t}: {e}"));
        let raw = snap.meta.json(inst).unwrap();
        let stats = raw["partitionToWriteStats"].as_object().unwrap();
        let mut n = 0;
        for (partition, list) in stats {
            for s in list.as_array().unwrap() {
                let path = s["path"].as_str().unwrap();
                assert!(path.starts_with(partition.as_str()), "{path}");
                let full = root.join(path);
                n += 1;
                if cleaned.contains(path) {
                    assert!(!full.exists(), "{t}: {path} was cleaned");
                    continue;
                }
                assert!(full.exists(), "{t}: {path} is missing");
                let name = path.rsplit('/').next().unwrap();
                let rows = match parse_data_name(name, &cfg.base_extensions).unwrap() {
                    DataName::Base(b) => {
                        assert_eq!(b.instant, t.as_str());
                        parquet_rows(&full).0
                    }
                    DataName::Log(l) => {
                        if cfg.layout == Layout::V2 {
                            assert_eq!(l.instant, t.as_str());
                        }
                        let blocks = read_blocks(&std::fs::read(&full).unwrap()).unwrap();
                        assert_eq!(blocks[0].instant(), Some(t.as_str()));
                        log_records(&full)
                    }
                };
                assert_eq!(Some(rows), s["numWrites"].as_i64(), "{t}: {path}");
                assert_eq!(
                    Some(std::fs::metadata(&full).unwrap().len()),
                    s["fileSizeInBytes"].as_u64()
                );
            }
        }
        assert_eq!(m.write_stats.len(), n);
        assert!(m.write_stats.iter().all(|s| s.path.is_some()));
        if cfg.layout == Layout::V2 {
            assert!(inst.completion.as_deref().unwrap() > t.as_str());
            let name = &inst.file(State::Completed).unwrap().name;
            assert!(name.contains('_'), "{name}");
        } else {
            assert_eq!(inst.completion.as_deref(), Some(t.as_str()));
        }
    }
    drop(listing);
    snap
}

/// A CDC log file name of the table version's writers (`.<fileId>_<instant>.log.<v>_<token>`
/// plus `-cdc` in version 6, `.cdc` in 8 and 9): the log name it extends.
fn cdc_log_name(name: &str, version: u32) -> Option<hudifs_core::listing::LogName> {
    let suffix = if version >= 8 { ".cdc" } else { "-cdc" };
    hudifs_core::listing::parse_log_name(name.strip_suffix(suffix)?)
}

/// The timeline file names of an abandoned write: requested and inflight only.
fn assert_in_flight(tl: &Timeline, t: &str, action: Action) {
    let files = instant_files(tl, t);
    let expected: BTreeSet<String> = [State::Requested, State::Inflight]
        .into_iter()
        .map(|s| timeline::instant_file_name(t, None, action, s, tl.layout))
        .collect();
    assert_eq!(files, expected);
    assert!(tl.pending().any(|i| i.requested == t));
    assert!(!tl.is_committed(t));
}

fn mor_spec(version: u32) -> TableSpec {
    TableSpec::new(&format!("mor_v{version}"), TableType::MergeOnRead, version)
        .partitioned_by(&["city"], true)
}

fn cow_spec(version: u32) -> TableSpec {
    TableSpec::new(&format!("cow_v{version}"), TableType::CopyOnWrite, version)
        .partitioned_by(&["city"], false)
}

fn mor_history(version: u32) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let spec = mor_spec(version);
    let mut w = TableWriter::create(root, spec.clone(), START).unwrap();
    let (a, b) = ("city=a".to_string(), "city=b".to_string());

    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let fa = t.insert(&a, &rows(1, 4)).unwrap();
    let fb = t.insert(&b, &rows(2, 3)).unwrap();
    let t1 = t.complete().unwrap();

    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let log1 = t
        .update(&a, &fa, &rows_with_ids(3, &[1000, 1001, 9999]))
        .unwrap();
    let t2 = t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let log2 = t.update(&a, &fa, &rows_with_ids(4, &[1002])).unwrap();
    let t3 = t.complete().unwrap();
    assert_eq!(w.group_row_count(&a, &fa), Some(5));

    let c = w.schedule_compaction(&[(&a, &fa)]).unwrap();
    // A write after scheduling: v6 names the log after the pending compaction.
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let log3 = t.update(&a, &fa, &rows_with_ids(5, &[1003])).unwrap();
    let t4 = t.complete().unwrap();
    {
        let snap = check_table(root, &spec);
        let tl = snap.timeline();
        assert!(tl.pending_compactions.contains_key(c.as_str()));
        let groups = snap.ctx.pending_compaction_groups();
        assert_eq!(
            groups[c.as_str()],
            BTreeSet::from([FileGroupId::new(&a, &fa)])
        );
        let plan = snap.meta.plan(instant(tl, &c, Action::Compaction)).unwrap();
        let op = &plan["operations"][0];
        assert_eq!(op["baseInstantTime"], Json::from(t1.as_str()));
        assert_eq!(op["deltaFilePaths"], serde_json::json!([log1, log2]));
        assert!(op["dataFilePath"]
            .as_str()
            .unwrap()
            .ends_with(&format!("{t1}.parquet")));
    }
    let l1 = hudifs_core::listing::parse_log_name(&log1).unwrap();
    let l2 = hudifs_core::listing::parse_log_name(&log2).unwrap();
    let l3 = hudifs_core::listing::parse_log_name(&log3).unwrap();
    if version == 6 {
        assert_eq!((l1.instant.as_str(), l1.version), (t1.as_str(), 1));
        assert_eq!((l2.instant.as_str(), l2.version), (t1.as_str(), 2));
        assert_eq!((l3.instant.as_str(), l3.version), (c.as_str(), 1));
    } else {
        assert_eq!((l1.instant.as_str(), l1.version), (t2.as_str(), 1));
        assert_eq!((l2.instant.as_str(), l2.version), (t3.as_str(), 1));
        assert_eq!((l3.instant.as_str(), l3.version), (t4.as_str(), 1));
    }

    w.run_compaction(&c, true).unwrap();
    let mut t = w.begin(Action::ReplaceCommit).unwrap();
    t.replace_group(&b, &fb).unwrap();
    let fb2 = t.insert(&b, &rows(6, 2)).unwrap();
    let r = t.complete().unwrap();

    // A second compaction stays pending (inflight, its base file on disk).
    let c2 = w.schedule_compaction(&[(&b, &fb2)]).unwrap();
    w.run_compaction(&c2, false).unwrap();

    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let log4 = t.update(&a, &fa, &rows_with_ids(7, &[1000])).unwrap();
    t.insert("city=c", &rows(8, 2)).unwrap();
    let failed = t.abandon();

    let snap = check_table(root, &spec);
    let (cfg, tl) = (&*snap.cfg, snap.timeline());
    let _ = (cfg, tl);
    let completed: Vec<&str> = tl.completed.keys().map(|k| k.as_str()).collect();
    assert_eq!(completed, [&t1, &t2, &t3, &c, &t4, &r]);
    assert_eq!(tl.completed[c.as_str()].action, Action::Commit);
    assert_eq!(tl.completed[c.as_str()].planned, Some(Action::Compaction));
    let cm = snap.meta.commit(&tl.completed[c.as_str()]).unwrap();
    assert_eq!(cm.operation_type.as_deref(), Some("COMPACT"));
    assert_eq!(
        snap.meta.json(&tl.completed[c.as_str()]).unwrap()["compacted"],
        Json::Bool(true)
    );
    assert_eq!(tl.completed[r.as_str()].action, Action::ReplaceCommit);
    let rm = snap.meta.commit(&tl.completed[r.as_str()]).unwrap();
    assert_eq!(rm.replaced, vec![FileGroupId::new(&b, &fb)]);
    assert_eq!(rm.operation_type.as_deref(), Some("INSERT_OVERWRITE"));
    assert!(!metadata::is_clustering_request(
        &snap
            .meta
            .plan(instant(tl, &r, Action::ReplaceCommit))
            .unwrap()
    ));
    assert_eq!(
        tl.pending_compactions
            .keys()
            .map(|k| k.as_str())
            .collect::<Vec<_>>(),
        [c2.as_str()],
        "the second compaction is pending"
    );
    assert_eq!(tl.latest.as_deref(), Some(c2.as_str()));
    assert_in_flight(tl, &failed, Action::DeltaCommit);
    // The failed write's files are on disk.
    let listing = list_table(&snap);
    let names: BTreeSet<String> = listing.files().map(|f| f.rel_path()).collect();
    assert!(names.contains(&format!("{a}/{log4}")));
    assert!(names.iter().any(|n| n.starts_with("city=c/")));
    let log4_name = hudifs_core::listing::parse_log_name(&log4).unwrap();
    if version == 6 {
        assert_eq!(
            (log4_name.instant.as_str(), log4_name.version),
            (c.as_str(), 2)
        );
    } else {
        assert_eq!(log4_name.instant, failed);
    }
    // The inflight of the failed write carries its workload profile.
    let profile = snap
        .meta
        .commit(instant(tl, &failed, Action::DeltaCommit))
        .unwrap();
    assert_eq!(profile.write_stats.len(), 1, "{profile:?}");
    assert_eq!(profile.write_stats[0].file_id, fa);
    // v6 write stats list every log of the slice; v8+ only the new one.
    let t3_raw = snap.meta.json(&tl.completed[t3.as_str()]).unwrap();
    let stat = &t3_raw["partitionToWriteStats"][&a][0];
    if version == 6 {
        assert_eq!(stat["logFiles"], serde_json::json!([log1, log2]));
        assert_eq!(stat["prevCommit"], Json::from(t1.as_str()));
        assert!(stat["baseFile"]
            .as_str()
            .unwrap()
            .ends_with(&format!("{t1}.parquet")));
    } else {
        assert_eq!(stat["logFiles"], serde_json::json!([log2]));
        assert_eq!(stat["baseFile"], Json::from(""));
    }
    assert_eq!(stat["numUpdateWrites"], Json::from(1));
    let t2_raw = snap.meta.json(&tl.completed[t2.as_str()]).unwrap();
    let stat = &t2_raw["partitionToWriteStats"][&a][0];
    assert_eq!(
        (
            stat["numUpdateWrites"].as_i64(),
            stat["numInserts"].as_i64()
        ),
        (Some(2), Some(1))
    );

    // Roll the failed write back.
    let rb = w.rollback(&failed).unwrap();
    let snap = check_table(root, &spec);
    let (cfg, tl) = (&*snap.cfg, snap.timeline());
    let _ = (cfg, tl);
    assert!(instant_files(tl, &failed).is_empty());
    let rbi = instant(tl, &rb, Action::Rollback);
    assert!(rbi.is_completed());
    let rbm = snap.meta.json(rbi).unwrap();
    assert_eq!(rbm["commitsRollback"], serde_json::json!([failed]));
    let touched = metadata::rollback_files(&rbm);
    let listing = list_table(&snap);
    let names: BTreeSet<String> = listing.files().map(|f| f.rel_path()).collect();
    assert!(!names.iter().any(|n| n.starts_with("city=c/")));
    if version == 6 {
        // The log stays; a command-block log follows it.
        assert!(names.contains(&format!("{a}/{log4}")));
        let rollback_log = hudifs_core::listing::log_file_name(&fa, &c, 3, "1-0-1");
        assert!(names.contains(&format!("{a}/{rollback_log}")), "{names:?}");
        let blocks =
            read_blocks(&std::fs::read(root.join(&a).join(&rollback_log)).unwrap()).unwrap();
        assert!(blocks[0].is_rollback_command());
        assert_eq!(blocks[0].instant(), Some(rb.as_str()));
        assert_eq!(blocks[0].target_instant(), Some(failed.as_str()));
        assert!(touched.contains(&FileRef::new(&a, &rollback_log)));
        assert!(touched.contains(&FileRef::new(&a, &log4)));
    } else {
        assert!(!names.contains(&format!("{a}/{log4}")));
        assert!(touched.is_empty());
    }
}

#[test]
fn v6_mor_history_reads_back() {
    mor_history(6);
}

#[test]
fn v9_mor_history_reads_back() {
    mor_history(9);
}

#[test]
fn v8_mor_history_reads_back() {
    mor_history(8);
}

fn cow_history(version: u32) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let spec = cow_spec(version);
    let mut w = TableWriter::create(root, spec.clone(), START).unwrap();
    assert_eq!(w.write_action(), Action::Commit);
    let p = w.partition_path(&["paris"]).unwrap();
    assert_eq!(p, "paris");

    let mut t = w.begin(Action::Commit).unwrap();
    let f = t.insert(&p, &rows(1, 4)).unwrap();
    let t1 = t.complete().unwrap();
    let first_base = w.group_files(&p, &f)[0].clone();

    let mut t = w.begin(Action::Commit).unwrap();
    let base2 = t.update(&p, &f, &rows_with_ids(2, &[1001, 1100])).unwrap();
    let t2 = t.complete().unwrap();
    assert_eq!(w.group_row_count(&p, &f), Some(5));
    let updated = w.group_rows(&p, &f).unwrap();
    assert_eq!(updated[1], rows_with_ids(2, &[1001])[0]);

    let mut t = w.begin(Action::ReplaceCommit).unwrap();
    t.set_operation("INSERT_OVERWRITE_TABLE").unwrap();
    t.replace_group(&p, &f).unwrap();
    let f2 = t.insert(&p, &rows(3, 2)).unwrap();
    let r = t.complete().unwrap();
    assert_eq!(w.file_groups(), vec![(p.clone(), f2.clone())]);

    w.savepoint(&t2).unwrap();
    let cl = w.clean(&t2, &[(p.as_str(), first_base.as_str())]).unwrap();

    let mut t = w.begin(Action::Commit).unwrap();
    t.update(&p, &f2, &rows_with_ids(4, &[3000])).unwrap();
    let failed = t.abandon();

    let snap = check_table(root, &spec);
    let (cfg, tl) = (&*snap.cfg, snap.timeline());
    let _ = (cfg, tl);
    assert_eq!(
        tl.completed.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
        [&t1, &t2, &r]
    );
    let m2 = snap.meta.commit(&tl.completed[t2.as_str()]).unwrap();
    assert_eq!(m2.operation_type.as_deref(), Some("UPSERT"));
    assert_eq!(m2.write_stats[0].file_name(), Some(base2.as_str()));
    let raw2 = snap.meta.json(&tl.completed[t2.as_str()]).unwrap();
    let s = &raw2["partitionToWriteStats"][&p][0];
    assert_eq!(s["prevCommit"], Json::from(t1.as_str()));
    assert_eq!(
        (s["numUpdateWrites"].as_i64(), s["numInserts"].as_i64()),
        (Some(1), Some(1))
    );
    assert_eq!(
        s.get("logFiles"),
        if version == 6 {
            None
        } else {
            Some(&Json::Null)
        }
    );
    let rm = snap.meta.commit(&tl.completed[r.as_str()]).unwrap();
    assert_eq!(rm.operation_type.as_deref(), Some("INSERT_OVERWRITE_TABLE"));
    assert_eq!(rm.replaced, vec![FileGroupId::new(&p, &f)]);
    assert_eq!(
        tl.savepoints()
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>(),
        BTreeSet::from([t2.clone()])
    );
    // The savepoint shares its requested time with the commit it pins.
    let sp = instant(tl, &t2, Action::Savepoint);
    let spm = snap.meta.json(sp).unwrap();
    assert_eq!(
        spm["partitionMetadata"][&p]["savepointDataFile"],
        serde_json::json!([base2])
    );
    assert_eq!(instant_files(tl, &t2).len(), 3 + 2);
    // The clean: its bound, and the file is gone.
    assert_eq!(
        snap.ctx.retention_bound().map(|b| b.as_str()),
        Some(t2.as_str())
    );
    let clean = instant(tl, &cl, Action::Clean);
    assert_eq!(clean.files.len(), 3);
    assert!(!root.join(&p).join(&first_base).exists());
    assert_in_flight(tl, &failed, Action::Commit);
    assert_eq!(
        instant_files(tl, &failed),
        BTreeSet::from([
            format!("{failed}.commit.requested"),
            format!("{failed}.inflight")
        ])
    );
    let listing = list_table(&snap);
    // base2, the base of f2, the failed rewrite of f2 (the first base was cleaned).
    assert_eq!(listing.files().count(), 3);
}

#[test]
fn v6_cow_history_reads_back() {
    cow_history(6);
}

#[test]
fn v9_cow_history_reads_back() {
    cow_history(9);
}

#[test]
fn abandoned_txn_leaves_only_requested_and_inflight() {
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let spec = mor_spec(version);
        let mut w = TableWriter::create(dir.path(), spec.clone(), START).unwrap();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        let fid = t.insert("city=x", &rows(1, 2)).unwrap();
        let t1 = t.abandon();
        // Dropping a transaction abandons it too.
        {
            let mut t = w.begin(Action::ReplaceCommit).unwrap();
            t.insert("city=y", &rows(2, 1)).unwrap();
        }
        let snap = check_table(dir.path(), &spec);
        let (cfg, tl) = (&*snap.cfg, snap.timeline());
        let _ = (cfg, tl);
        assert!(tl.completed.is_empty());
        assert_eq!(tl.latest, None);
        assert_in_flight(tl, &t1, Action::DeltaCommit);
        assert_eq!(tl.pending().count(), 2);
        let listing = list_table(&snap);
        let files: Vec<_> = listing.files().collect();
        assert_eq!(files.len(), 2);
        assert!(files
            .iter()
            .any(|f| f.file_id() == fid && f.instant() == t1));
        // The group does not exist for the writer: it never committed.
        assert_eq!(w.group_row_count("city=x", &fid), None);
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        assert!(t.update("city=x", &fid, &rows(3, 1)).is_err());
    }
}

#[test]
fn non_partitioned_without_meta_fields() {
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let spec = TableSpec::new("plain", TableType::MergeOnRead, version).without_meta_fields();
        let mut w = TableWriter::create(dir.path(), spec.clone(), START).unwrap();
        assert_eq!(w.partition_path(&[]).unwrap(), "");
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        let f = t.insert("", &rows(1, 3)).unwrap();
        t.complete().unwrap();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.update("", &f, &rows_with_ids(2, &[1000])).unwrap();
        t.complete().unwrap();
        let snap = check_table(dir.path(), &spec);
        let (cfg, _tl) = (&*snap.cfg, snap.timeline());
        assert!(cfg.partition_fields.is_empty());
        assert_eq!(cfg.properties["hoodie.populate.meta.fields"], "false");
        assert!(dir.path().join(PARTITION_METAFILE).exists());
        assert!(w
            .begin(Action::DeltaCommit)
            .unwrap()
            .insert("x", &rows(3, 1))
            .is_err());
    }
}

#[test]
fn misuse_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let spec = cow_spec(9);
    assert!(TableWriter::create(
        dir.path(),
        TableSpec {
            version: 7,
            ..spec.clone()
        },
        START
    )
    .is_err());
    let mut w = TableWriter::create(dir.path(), spec.clone(), START).unwrap();
    assert!(TableWriter::create(dir.path(), spec, START).is_err());
    assert!(w.begin(Action::Clean).is_err());
    assert!(w.schedule_compaction(&[("a", "b")]).is_err());
    assert!(w.rollback("20260101000000000").is_err());
    assert!(w.savepoint("20260101000000000").is_err());
    assert!(w.partition_path(&["a", "b"]).is_err());
    let mut t = w.begin(Action::Commit).unwrap();
    let f = t.insert("a", &rows(1, 1)).unwrap();
    assert!(t.update("a", &f, &rows(1, 1)).is_err(), "not committed yet");
    assert!(t.replace_group("a", &f).is_err(), "not a replacecommit");
    assert!(t.insert("a", &[]).is_err());
    assert!(t.insert("a/b", &rows(2, 1)).is_err());
    t.complete().unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.update("a", &f, &rows(1, 1)).unwrap();
    assert!(
        t.update("a", &f, &rows(1, 1)).is_err(),
        "one write per group per commit"
    );
}

#[test]
fn same_calls_give_the_same_table() {
    fn snapshot(root: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                    out.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
        out.sort();
        out
    }
    for (version, tt) in [(6, TableType::MergeOnRead), (9, TableType::CopyOnWrite)] {
        let d1 = tempfile::tempdir().unwrap();
        let d2 = tempfile::tempdir().unwrap();
        build_demo(d1.path(), version, tt, START).unwrap();
        build_demo(d2.path(), version, tt, START).unwrap();
        assert_eq!(snapshot(d1.path()), snapshot(d2.path()));
        let d3 = tempfile::tempdir().unwrap();
        build_demo(d3.path(), version, tt, START + 1).unwrap();
        let names = |d: &Path| snapshot(d).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_ne!(names(d1.path()), names(d3.path()));
    }
}

#[test]
fn demo_tables_read_back() {
    for version in [6, 8, 9] {
        for tt in [TableType::MergeOnRead, TableType::CopyOnWrite] {
            let dir = tempfile::tempdir().unwrap();
            let w = build_demo(dir.path(), version, tt, START).unwrap();
            let snap = check_table(dir.path(), w.spec());
            let (cfg, tl) = (&*snap.cfg, snap.timeline());
            let _ = (cfg, tl);
            let mor = tt == TableType::MergeOnRead;
            // 3 inserts, 2 updates, (compaction), 1 replacecommit complete; 1 write in flight.
            assert_eq!(tl.completed.len(), if mor { 7 } else { 6 });
            assert_eq!(tl.pending().count(), 1);
            let pending = tl.pending().next().unwrap();
            assert_eq!(pending.action, w.write_action());
            assert_eq!(
                tl.completed
                    .values()
                    .filter(|i| i.planned == Some(Action::Compaction))
                    .count(),
                usize::from(mor)
            );
            assert_eq!(
                tl.completed
                    .values()
                    .filter(|i| i.action == Action::ReplaceCommit)
                    .count(),
                1
            );
            let listing = list_table(&snap);
            let parts: Vec<&str> = listing.partitions.keys().map(|p| &**p).collect();
            assert_eq!(parts, ["city=amsterdam", "city=chennai", "city=sao_paulo"]);
            let logs = listing.files().filter(|f| !f.is_base()).count();
            assert_eq!(logs, if mor { 5 } else { 0 });
            // The first instant is the clock start.
            assert_eq!(
                tl.instants().next().map(|i| i.requested.as_str()),
                Some("20260101000000000")
            );
            assert!(!w.events().is_empty());
            let _ = CommitMetadata::default();
        }
    }
}

#[test]
fn instants_advance_strictly() {
    let dir = tempfile::tempdir().unwrap();
    let w = build_demo(dir.path(), 9, TableType::MergeOnRead, START).unwrap();
    let mut stamps: Vec<&str> = Vec::new();
    for e in w.events() {
        stamps.push(&e.instant);
        if let Some(c) = &e.completion {
            assert!(c.as_str() > e.instant.as_str());
            stamps.push(c);
        }
    }
    let sorted: BTreeSet<&str> = stamps.iter().copied().collect();
    assert_eq!(sorted.len(), stamps.len(), "no time is handed out twice");
}

#[test]
fn bulk_inserts_read_back() {
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let spec = cow_spec(version);
        let mut w = TableWriter::create(root, spec.clone(), START).unwrap();
        let (a, b) = ("a".to_string(), "b".to_string());
        let mut t = w.begin(Action::Commit).unwrap();
        let ids = t.insert_linked(&[(&a, 3), (&b, 2)]).unwrap();
        assert_eq!(ids.len(), 5);
        let big = t.insert_sized(&b, 200_000).unwrap();
        let t1 = t.complete().unwrap();
        assert!(root.join(".hoodie/.temp/hudifs-gen").is_dir());
        w.remove_templates().unwrap();
        assert!(!root.join(".hoodie/.temp/hudifs-gen").exists());
        let snap = check_table(root, &spec);
        let (cfg, tl) = (&*snap.cfg, snap.timeline());
        let _ = (cfg, tl);
        let listing = list_table(&snap);
        assert_eq!(listing.files().count(), 6);
        let sized = listing.files().find(|f| f.file_id() == big).unwrap();
        assert!(sized.size() >= 200_000, "{}", sized.size());
        let view = snap
            .resolve(&hudifs_core::viewkey::ViewKey::Latest, false)
            .unwrap();
        assert_eq!(view.files.len(), 6);
        assert_eq!(view.instant.as_deref(), Some(t1.as_str()));
        // Bulk-inserted groups are not tracked: no update, no compaction.
        let mut t = w.begin(Action::Commit).unwrap();
        assert!(t.update(&a, &ids[0], &rows(9, 1)).is_err());
    }
}

#[test]
fn staged_completion_completes_on_publish() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let spec = cow_spec(9);
    let mut w = TableWriter::create(root, spec.clone(), START).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert("a", &rows(1, 2)).unwrap();
    let staging = TablePath::new(".hoodie/.temp/staging").unwrap();
    let staged = t.complete_staged(&staging).unwrap();
    let snap = open(root);
    assert!(!snap
        .timeline()
        .completed
        .contains_key(staged.instant.as_str()));
    assert!(root.join(staged.staged.as_str()).exists());
    staged.publish().unwrap();
    let snap = check_table(root, &spec);
    assert!(snap
        .timeline()
        .completed
        .contains_key(staged.instant.as_str()));
    assert!(!root.join(staged.staged.as_str()).exists());
}

// ---------------------------------------------------------------------------------------------
// Change data capture.

/// An Avro value as JSON (unions unwrapped), for comparing decoded CDC records.
fn avro_json(v: &apache_avro::types::Value) -> Json {
    use apache_avro::types::Value as V;
    match v {
        V::Null => Json::Null,
        V::Boolean(b) => Json::from(*b),
        V::Int(n) => Json::from(*n),
        V::Long(n) => Json::from(*n),
        V::Double(d) => Json::from(*d),
        V::String(s) => Json::from(s.as_str()),
        V::Union(_, inner) => avro_json(inner),
        V::Record(fields) => Json::Object(
            fields
                .iter()
                .map(|(k, v)| (k.clone(), avro_json(v)))
                .collect(),
        ),
        other => panic!("unexpected Avro value {other:?}"),
    }
}

/// The records of a CDC file's single CDC block, decoded with `apache-avro` under the block's
/// header schema; checks the block's framing and header on the way.
fn cdc_records(path: &Path, instant: &str) -> (apache_avro::Schema, Vec<Json>) {
    let blocks = read_blocks(&std::fs::read(path).unwrap()).unwrap();
    assert_eq!(blocks.len(), 1, "{}", path.display());
    let b = &blocks[0];
    assert!(b.is_cdc());
    assert_eq!(b.block_type, logfile::blocks::CDC_DATA);
    assert_eq!(b.instant(), Some(instant));
    let header_keys: BTreeSet<i32> = b.header.iter().map(|(k, _)| *k).collect();
    assert_eq!(
        header_keys,
        BTreeSet::from([logfile::blocks::INSTANT_TIME, logfile::blocks::SCHEMA])
    );
    assert_eq!(b.content[..4], 3i32.to_be_bytes());
    let schema = apache_avro::Schema::parse_str(b.schema().unwrap()).unwrap();
    let records: Vec<Json> = b
        .avro_records()
        .unwrap()
        .into_iter()
        .map(|mut bytes| {
            let v = apache_avro::from_avro_datum(&schema, &mut bytes, None).unwrap();
            assert!(bytes.is_empty(), "trailing bytes after a record");
            avro_json(&v)
        })
        .collect();
    assert_eq!(
        b.cdc_record_count(),
        Some(records.len() as i32),
        "record count"
    );
    (schema, records)
}

/// A table row without meta fields, as a CDC image holds it.
fn image(r: &Row, city: &str) -> Json {
    serde_json::json!({"id": r.id, "name": r.name, "value": r.value, "ts": r.ts, "city": city})
}

/// What a CDC record of `mode` must be: op, key, before, after.
fn expected_cdc(
    mode: CdcMode,
    instant: &str,
    op: &str,
    key: i64,
    before: Option<Json>,
    after: Option<Json>,
) -> Json {
    let before = before.unwrap_or(Json::Null);
    let after = after.unwrap_or(Json::Null);
    match mode {
        CdcMode::OpKeyOnly => serde_json::json!({"op": op, "record_key": key.to_string()}),
        CdcMode::DataBefore => {
            serde_json::json!({"op": op, "record_key": key.to_string(), "before": before})
        }
        CdcMode::DataBeforeAfter => {
            serde_json::json!({"op": op, "ts_ms": instant, "before": before, "after": after})
        }
    }
}

/// The write stat of `file_id` in a completed instant's metadata (as JSON).
fn write_stat(snap: &Snapshot, instant: &str, partition: &str, file_id: &str) -> Json {
    let raw = snap.meta.json(&snap.timeline().completed[instant]).unwrap();
    raw["partitionToWriteStats"][partition]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["fileId"] == file_id)
        .unwrap_or_else(|| panic!("{instant}: no stat of {file_id}"))
        .clone()
}

fn cdc_cow(version: u32, mode: CdcMode) {
    let what = format!("v{version} {mode:?}");
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let spec = cow_spec(version).with_cdc(mode);
    let mut w = TableWriter::create(root, spec.clone(), START).unwrap();
    let p = w.partition_path(&["paris"]).unwrap();
    let suffix = if version >= 8 { ".cdc" } else { "-cdc" };

    // Two new file groups: inserts into new groups write no CDC file.
    let mut t = w.begin(Action::Commit).unwrap();
    let fa = t.insert(&p, &rows(1, 5)).unwrap();
    let fb = t.insert(&p, &rows(2, 3)).unwrap();
    let c1 = t.complete().unwrap();
    assert!(w.cdc_files(&c1).is_empty(), "{what}");
    let old: BTreeMap<i64, Row> = w
        .group_rows(&p, &fa)
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r))
        .collect();

    // One write: group a gets an update (1001), an update with the data it already holds
    // (1002), a delete (1003) and a new key (1100); a new group c is inserted; group b is not
    // touched.
    let mut upserts = rows_with_ids(3, &[1001, 1100]);
    upserts.push(old[&1002].clone());
    let mut t = w.begin(Action::Commit).unwrap();
    let base = t.merge(&p, &fa, &upserts, &[1003, 7777]).unwrap();
    let fc = t.insert(&p, &rows(4, 2)).unwrap();
    let c2 = t.complete().unwrap();
    let token = parse_base_name(&base, &["parquet".to_string()])
        .unwrap()
        .write_token;
    let cdc_name = format!(".{fa}_{c2}.log.1_{token}{suffix}");
    let cdc_rel = format!("{p}/{cdc_name}");
    assert_eq!(w.cdc_files(&c2), vec![cdc_rel.clone()], "{what}");
    let cdc_path = root.join(&cdc_rel);
    let cdc_size = std::fs::metadata(&cdc_path).unwrap().len();
    let (schema, records) = cdc_records(&cdc_path, &c2);
    let apache_avro::Schema::Record(r) = &schema else {
        panic!("{what}: CDC schema is not a record");
    };
    let names: Vec<&str> = r.fields.iter().map(|f| f.name.as_str()).collect();
    match mode {
        CdcMode::OpKeyOnly => assert_eq!(names, ["op", "record_key"]),
        CdcMode::DataBefore => assert_eq!(names, ["op", "record_key", "before"]),
        CdcMode::DataBeforeAfter => assert_eq!(names, ["op", "ts_ms", "before", "after"]),
    }
    let new = |id: i64| upserts.iter().find(|r| r.id == id).unwrap();
    let got: BTreeSet<String> = records.iter().map(|r| r.to_string()).collect();
    let expected: BTreeSet<String> = [
        expected_cdc(
            mode,
            &c2,
            "u",
            1001,
            Some(image(&old[&1001], &p)),
            Some(image(new(1001), &p)),
        ),
        expected_cdc(
            mode,
            &c2,
            "u",
            1002,
            Some(image(&old[&1002], &p)),
            Some(image(&old[&1002], &p)),
        ),
        expected_cdc(mode, &c2, "d", 1003, Some(image(&old[&1003], &p)), None),
        expected_cdc(mode, &c2, "i", 1100, None, Some(image(new(1100), &p))),
    ]
    .iter()
    .map(|r| r.to_string())
    .collect();
    assert_eq!(got, expected, "{what}");
    assert_eq!(records.len(), 4, "{what}");

    // A delete-only write: one "d" record.
    let mut t = w.begin(Action::Commit).unwrap();
    t.delete(&p, &fb, &[2001]).unwrap();
    let c3 = t.complete().unwrap();
    let cdc3 = w.cdc_files(&c3);
    assert_eq!(cdc3.len(), 1, "{what}");
    let b_old = rows(2, 3);
    let (_, records) = cdc_records(&root.join(&cdc3[0]), &c3);
    assert_eq!(
        records,
        [expected_cdc(
            mode,
            &c3,
            "d",
            2001,
            Some(image(&b_old[1], &p)),
            None
        )],
        "{what}"
    );
    // A write that deletes every row of a group writes no CDC file (Hudi infers it).
    let mut t = w.begin(Action::Commit).unwrap();
    t.delete(&p, &fb, &[2000, 2002]).unwrap();
    let c4 = t.complete().unwrap();
    assert!(w.cdc_files(&c4).is_empty(), "{what}");
    assert_eq!(w.group_row_count(&p, &fb), Some(0));

    // hoodie.properties, spelled as the version's Hudi writes it.
    let props = hudifs_core::properties::parse_properties(
        &std::fs::read_to_string(root.join(".hoodie/hoodie.properties")).unwrap(),
    );
    assert_eq!(props["hoodie.table.cdc.enabled"], "true");
    let spelled = match (mode, version >= 8) {
        (CdcMode::OpKeyOnly, false) => "op_key_only",
        (CdcMode::DataBefore, false) => "data_before",
        (CdcMode::DataBeforeAfter, false) => "data_before_after",
        (CdcMode::OpKeyOnly, true) => "OP_KEY_ONLY",
        (CdcMode::DataBefore, true) => "DATA_BEFORE",
        (CdcMode::DataBeforeAfter, true) => "DATA_BEFORE_AFTER",
    };
    assert_eq!(props["hoodie.table.cdc.supplemental.logging.mode"], spelled);

    // Read back with hudifs-core: the table is whole, the metadata decodes, the write stat of
    // group a names the CDC file with its size, and no listing shows a CDC file.
    let snap = check_table(root, &spec);
    assert!(snap.cfg.cdc_enabled);
    for c in [&c1, &c2, &c3, &c4] {
        let raw = snap
            .meta
            .json(&snap.timeline().completed[c.as_str()])
            .unwrap();
        let m = CommitMetadata::from_json(&raw).unwrap_or_else(|e| panic!("{what} {c}: {e:?}"));
        assert!(!m.write_stats.is_empty());
        snap.meta
            .commit(&snap.timeline().completed[c.as_str()])
            .unwrap();
    }
    let sa = write_stat(&snap, &c2, &p, &fa);
    assert_eq!(
        sa["cdcStats"],
        serde_json::json!({ cdc_rel.clone(): cdc_size }),
        "{what}"
    );
    assert_eq!(
        (
            sa["numUpdateWrites"].as_i64(),
            sa["numInserts"].as_i64(),
            sa["numDeletes"].as_i64()
        ),
        (Some(2), Some(1), Some(1)),
        "{what}"
    );
    let sc = write_stat(&snap, &c2, &p, &fc);
    assert!(sc.get("cdcStats").is_none_or(Json::is_null), "{what}: {sc}");
    let sb = write_stat(&snap, &c3, &p, &fb);
    assert_eq!(sb["cdcStats"].as_object().unwrap().len(), 1);
    let sb4 = write_stat(&snap, &c4, &p, &fb);
    assert!(
        sb4.get("cdcStats").is_none_or(Json::is_null),
        "{what}: {sb4}"
    );
    let listing = list_table(&snap);
    let listed: Vec<String> = listing.files().map(|f| f.rel_path().to_string()).collect();
    assert!(!listed.is_empty());
    for cdc in [&cdc_rel, &cdc3[0]] {
        assert!(root.join(cdc).exists());
        assert!(!listed.contains(cdc), "{what}: {cdc} listed");
        let name = cdc.rsplit('/').next().unwrap();
        assert!(parse_data_name(name, &snap.cfg.base_extensions).is_none());
        assert!(cdc_log_name(name, version).is_some());
    }
    assert!(
        listed.iter().all(|f| !f.ends_with("cdc")),
        "{what}: {listed:?}"
    );
    // The group's rows after the merge.
    let a: Vec<i64> = w
        .group_rows(&p, &fa)
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(a, [1000, 1001, 1002, 1004, 1100]);
}

#[test]
fn v6_cow_cdc_files() {
    for mode in CdcMode::ALL {
        cdc_cow(6, mode);
    }
}

#[test]
fn v9_cow_cdc_files() {
    for mode in CdcMode::ALL {
        cdc_cow(9, mode);
    }
}

#[test]
fn cdc_rolled_back_with_its_write_and_absent_on_mor() {
    // A failed copy-on-write write's CDC file goes with its base file on rollback.
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let spec = cow_spec(version).with_cdc(CdcMode::DataBeforeAfter);
        let mut w = TableWriter::create(dir.path(), spec, START).unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        let f = t.insert("p", &rows(1, 3)).unwrap();
        t.complete().unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        t.update("p", &f, &rows_with_ids(2, &[1001])).unwrap();
        let failed = t.abandon();
        let cdc = w.cdc_files(&failed);
        assert_eq!(cdc.len(), 1);
        assert!(dir.path().join(&cdc[0]).exists());
        w.rollback(&failed).unwrap();
        assert!(!dir.path().join(&cdc[0]).exists(), "v{version}");
    }
    // Merge-on-read: the properties say CDC, deltacommits write no CDC file.
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let spec = mor_spec(version).with_cdc(CdcMode::OpKeyOnly);
        let mut w = TableWriter::create(dir.path(), spec.clone(), START).unwrap();
        let p = w.partition_path(&["x"]).unwrap();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        let f = t.insert(&p, &rows(1, 3)).unwrap();
        t.complete().unwrap();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.update(&p, &f, &rows_with_ids(2, &[1001])).unwrap();
        let d1 = t.complete().unwrap();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.delete(&p, &f, &[1002]).unwrap();
        let d2 = t.complete().unwrap();
        assert!(w.cdc_files(&d1).is_empty() && w.cdc_files(&d2).is_empty());
        assert!(w
            .begin(Action::DeltaCommit)
            .unwrap()
            .merge(&p, &f, &rows(3, 1), &[])
            .is_err());
        let snap = check_table(dir.path(), &spec);
        assert!(snap.cfg.cdc_enabled);
        let names: Vec<String> = std::fs::read_dir(dir.path().join(&p))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with("cdc")), "{names:?}");
    }
}
