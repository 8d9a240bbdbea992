//! The archived timeline: tables written with the project's generator, archived as Hudi's
//! archiver does (layout 1: `.hoodie/archived/.commits_.archive.N_1-0-1` log files of
//! `HoodieArchivedMetaEntry` records; layout 2: the LSM timeline under
//! `.hoodie/timeline/history`), read back with `archive::load_archive`; damaged archives; and
//! the fixtures' empty archive folders.

use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hudifs_core::archive::{self, Archive, ArchivedInstant};
use hudifs_core::metadata::{self, CommitMetadata};
use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};

const START: i64 = 1_767_225_600_000;

fn table(kind: TableType, version: u32) -> (tempfile::TempDir, TableWriter) {
    let dir = tempfile::tempdir().unwrap();
    let spec = TableSpec::new("t", kind, version).partitioned_by(&["p"], true);
    let w = TableWriter::create(&dir.path().join("t"), spec, START).unwrap();
    (dir, w)
}

fn load(root: &Path) -> Archive {
    archive::load_archive(&*support::store(root), &support::config(root)).unwrap()
}

/// What the active timeline says of a completed instant, to compare with its archived form.
#[derive(Debug, Clone, PartialEq)]
struct Facts {
    requested: String,
    completion: String,
    action: Action,
    planned: Option<Action>,
    /// Commit metadata (writes), the retention bound (cleans), touched files (rollbacks).
    commit: Option<CommitMetadata>,
    earliest_to_retain: Option<String>,
    rollback_files: Vec<(String, String)>,
}

fn facts_of_json(
    requested: &str,
    completion: &str,
    action: Action,
    planned: Option<Action>,
    v: &serde_json::Value,
) -> Facts {
    Facts {
        requested: requested.to_string(),
        completion: completion.to_string(),
        action,
        planned,
        commit: action
            .is_write()
            .then(|| CommitMetadata::from_json(v).unwrap()),
        earliest_to_retain: (action == Action::Clean)
            .then(|| metadata::clean_earliest_to_retain(v))
            .flatten()
            .map(String::from),
        rollback_files: metadata::rollback_files(v)
            .into_iter()
            .map(|f| (f.partition, f.name))
            .collect(),
    }
}

/// Completed instants of the active timeline up to `up_to`, as facts and raw JSON.
fn active_facts(root: &Path, up_to: &str) -> Vec<(Facts, serde_json::Value)> {
    let snap = support::snapshot(root);
    let tl = snap.timeline();
    tl.instants()
        .filter(|i| i.is_completed() && i.requested.as_str() <= up_to)
        .filter(|i| i.action != Action::Savepoint)
        .map(|i| {
            let v = snap.meta.json(i).unwrap();
            let f = facts_of_json(
                &i.requested,
                i.completion.as_deref().unwrap(),
                i.action,
                i.planned,
                &v,
            );
            (f, (*v).clone())
        })
        .collect()
}

fn archived_facts(a: &ArchivedInstant) -> Facts {
    facts_of_json(
        &a.requested,
        &a.completion,
        a.action,
        a.planned,
        a.metadata.as_ref().unwrap(),
    )
}

/// A history with every action the archiver moves: writes with inserts and log updates, a
/// compaction, an insert overwrite, a failed write and its rollback, a clean, then one more
/// write. Returns the clean's time: the bound to archive up to.
fn history(w: &mut TableWriter) -> String {
    let mor = w.spec().table_type == TableType::MergeOnRead;
    let wa = w.write_action();
    let pa = w.partition_path(&["a"]).unwrap();
    let pb = w.partition_path(&["b"]).unwrap();
    let mut t = w.begin(wa).unwrap();
    let fa = t.insert(&pa, &rows(1, 4)).unwrap();
    let fb = t.insert(&pb, &rows(2, 3)).unwrap();
    t.complete().unwrap();
    let mut t = w.begin(wa).unwrap();
    t.update(&pa, &fa, &rows_with_ids(3, &[1000, 1001]))
        .unwrap();
    t.complete().unwrap();
    if mor {
        let c = w
            .schedule_compaction(&[(pa.as_str(), fa.as_str())])
            .unwrap();
        w.run_compaction(&c, true).unwrap();
    }
    let mut t = w.begin(Action::ReplaceCommit).unwrap();
    t.insert(&pb, &rows(4, 2)).unwrap();
    t.replace_group(&pb, &fb).unwrap();
    t.complete().unwrap();
    let mut t = w.begin(wa).unwrap();
    t.insert(&pa, &rows(5, 2)).unwrap();
    let failed = t.abandon();
    w.rollback(&failed).unwrap();
    let old_b: Vec<(String, String)> = w
        .group_files(&pb, &fb)
        .into_iter()
        .map(|n| (pb.clone(), n))
        .collect();
    let mut t = w.begin(wa).unwrap();
    t.insert(&pa, &rows(6, 2)).unwrap();
    let retained = t.complete().unwrap();
    let clean = w.clean(&retained, &old_b).unwrap();
    let mut t = w.begin(wa).unwrap();
    t.update(&pa, &fa, &rows_with_ids(7, &[1000])).unwrap();
    t.complete().unwrap();
    clean
}

fn round_trip(kind: TableType, version: u32) {
    let (_d, mut w) = table(kind, version);
    let bound = history(&mut w);
    let root = w.root().to_path_buf();
    let before = active_facts(&root, &bound);
    let kept: Vec<String> = {
        let snap = support::snapshot(&root);
        snap.timeline()
            .instants()
            .filter(|i| i.requested > bound)
            .map(|i| i.files.iter().map(|f| f.name.clone()).collect::<Vec<_>>())
            .collect::<Vec<_>>()
            .concat()
    };
    assert!(load(&root).instants.is_empty(), "nothing archived yet");

    let archived = w.archive(&bound).unwrap();
    assert_eq!(
        archived
            .iter()
            .map(|(t, a)| (t.clone(), *a))
            .collect::<Vec<_>>(),
        before
            .iter()
            .map(|(f, _)| (f.requested.clone(), f.action))
            .collect::<Vec<_>>(),
        "v{version}: the archiver moves exactly the completed instants up to the bound"
    );
    let actions: Vec<Action> = archived.iter().map(|(_, a)| *a).collect();
    for a in [Action::ReplaceCommit, Action::Rollback, Action::Clean] {
        assert!(actions.contains(&a), "v{version}: {actions:?}");
    }

    // The active timeline lost them (every state file) and kept the rest.
    let snap = support::snapshot(&root);
    let tl = snap.timeline();
    assert!(
        tl.instants().all(|i| i.requested > bound),
        "v{version}: {:?}",
        tl.instants().map(|i| &i.requested).collect::<Vec<_>>()
    );
    let now: Vec<String> = tl
        .instants()
        .flat_map(|i| i.files.iter().map(|f| f.name.clone()))
        .collect();
    assert_eq!(now, kept, "v{version}");
    assert!(tl.archive_nonempty);

    // The archive holds exactly the archived instants, with their completion times and metadata.
    let a = load(&root);
    assert!(a.is_complete(), "v{version}: {:?}", a.problems);
    let got: Vec<Facts> = a.instants.iter().map(archived_facts).collect();
    let want: Vec<Facts> = before.iter().map(|(f, _)| f.clone()).collect();
    assert_eq!(got, want, "v{version}");
    if version >= 8 {
        // Layout 2 archives the completed file's bytes: the very same metadata.
        for (inst, (_, json)) in a.instants.iter().zip(&before) {
            assert_eq!(inst.metadata.as_ref().unwrap(), json, "{}", inst.requested);
        }
        assert!(a.instants.iter().any(|i| i.completion != i.requested));
    } else {
        assert!(a.instants.iter().all(|i| i.completion == i.requested));
    }
    if kind == TableType::MergeOnRead {
        let c = a
            .instants
            .iter()
            .find(|i| i.planned == Some(Action::Compaction))
            .expect("the compaction");
        assert_eq!(c.action, Action::Commit);
        let plan = c.plan.as_ref().expect("its plan").as_ref().unwrap();
        assert_eq!(metadata::compaction_plan_groups(plan).unwrap().len(), 1);
    }
    let clean = a
        .instants
        .iter()
        .find(|i| i.action == Action::Clean)
        .unwrap();
    assert!(
        clean.plan.is_some(),
        "v{version}: the cleaner plan is archived"
    );
}

#[test]
fn v6_round_trip() {
    round_trip(TableType::MergeOnRead, 6);
    round_trip(TableType::CopyOnWrite, 6);
}

#[test]
fn v9_round_trip() {
    round_trip(TableType::MergeOnRead, 9);
    round_trip(TableType::CopyOnWrite, 9);
}

#[test]
fn v8_round_trip() {
    round_trip(TableType::MergeOnRead, 8);
}

/// Archiving is refused where Hudi's archiver stops: a pending write, a savepoint.
#[test]
fn archiver_stops_where_hudi_stops() {
    for version in [6, 9] {
        let (_d, mut w) = table(TableType::CopyOnWrite, version);
        let p = w.partition_path(&["a"]).unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(&p, &rows(1, 2)).unwrap();
        let c1 = t.complete().unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(&p, &rows(2, 2)).unwrap();
        let pending = t.abandon();
        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(&p, &rows(3, 2)).unwrap();
        let c3 = t.complete().unwrap();
        assert!(w.archive(&pending).is_err(), "v{version}");
        assert!(w.archive(&c3).is_err(), "v{version}");
        assert_eq!(w.archive(&c1).unwrap(), vec![(c1.clone(), Action::Commit)]);
        assert_eq!(w.archive(&c1).unwrap(), vec![], "nothing left to archive");
        w.rollback(&pending).unwrap();
        w.savepoint(&c3).unwrap();
        assert!(w.archive(&c3).is_err(), "v{version}: savepoint");
        let a = load(w.root());
        assert_eq!(a.instants.len(), 1);
        assert!(a.is_complete());
    }
}

fn commits(w: &mut TableWriter, n: usize) -> Vec<String> {
    let p = w.partition_path(&["a"]).unwrap();
    (0..n)
        .map(|i| {
            let mut t = w.begin(Action::Commit).unwrap();
            t.insert(&p, &rows(100 + i as u64, 1)).unwrap();
            t.complete().unwrap()
        })
        .collect()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Layout 2: one level-0 file per archival; ten of them compact into a level-1 file; old
/// manifests and the files only they listed are cleaned; files outside the manifest are
/// ignored by the reader.
#[test]
fn lsm_levels_compaction_and_cleaning() {
    let (_d, mut w) = table(TableType::CopyOnWrite, 9);
    let cs = commits(&mut w, 13);
    let history = w.local_path(&w.archive_dir());
    for c in &cs[..12] {
        assert_eq!(w.archive(c).unwrap().len(), 1);
    }
    let files = names(&history);
    let parquet: Vec<&String> = files.iter().filter(|n| n.ends_with(".parquet")).collect();
    assert_eq!(
        parquet,
        vec![
            &format!("{}_{}_1.parquet", cs[0], cs[9]),
            &format!("{}_{}_0.parquet", cs[10], cs[10]),
            &format!("{}_{}_0.parquet", cs[11], cs[11]),
        ]
    );
    // 12 archivals + 1 compaction = 13 snapshot versions, the newest 3 kept.
    assert_eq!(
        files
            .iter()
            .filter(|n| n.starts_with("manifest_"))
            .collect::<Vec<_>>(),
        vec!["manifest_11", "manifest_12", "manifest_13"]
    );
    assert_eq!(
        std::fs::read_to_string(history.join("_version_")).unwrap(),
        "13"
    );
    let a = load(w.root());
    assert!(a.is_complete(), "{:?}", a.problems);
    assert_eq!(
        a.instants
            .iter()
            .map(|i| i.requested.to_string())
            .collect::<Vec<_>>(),
        cs[..12].to_vec()
    );
    assert!(a.instants[..10]
        .iter()
        .all(|i| i.file.ends_with("_1.parquet")));

    // A data file no manifest lists (a failed archival) is not part of the archive.
    let stray = history.join(format!("{}_{}_0.parquet", cs[12], cs[12]));
    std::fs::copy(
        history.join(format!("{}_{}_0.parquet", cs[11], cs[11])),
        &stray,
    )
    .unwrap();
    assert_eq!(load(w.root()).instants.len(), 12);

    // `_version_` unreadable: the greatest manifest stands in for it.
    std::fs::write(history.join("_version_"), b"garbage").unwrap();
    assert_eq!(load(w.root()).instants.len(), 12);
    std::fs::remove_file(history.join("_version_")).unwrap();
    assert_eq!(load(w.root()).instants.len(), 12);

    // `_version_` naming a manifest that is gone: nothing can be trusted.
    std::fs::write(history.join("_version_"), b"14").unwrap();
    let err =
        archive::load_archive(&*support::store(w.root()), &support::config(w.root())).unwrap_err();
    assert!(err.to_string().contains("manifest_14"), "{err}");
    std::fs::write(history.join("_version_"), b"13").unwrap();
    std::fs::write(history.join("manifest_13"), b"{\"files\": [").unwrap();
    let err =
        archive::load_archive(&*support::store(w.root()), &support::config(w.root())).unwrap_err();
    assert!(err.to_string().contains("manifest_13"), "{err}");
}

/// Layout 2: a damaged data file is reported with the range of instants it held; the other
/// files are still read.
#[test]
fn lsm_damaged_files() {
    let (_d, mut w) = table(TableType::CopyOnWrite, 9);
    let cs = commits(&mut w, 3);
    w.archive(&cs[0]).unwrap();
    w.archive(&cs[2]).unwrap();
    let history = w.local_path(&w.archive_dir());
    let first = history.join(format!("{}_{}_0.parquet", cs[0], cs[0]));
    let second = history.join(format!("{}_{}_0.parquet", cs[1], cs[2]));
    let bytes = std::fs::read(&second).unwrap();
    for cut in [0, 4, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&second, &bytes[..cut]).unwrap();
        let a = load(w.root());
        assert_eq!(a.instants.len(), 1, "cut {cut}");
        assert_eq!(a.instants[0].requested, cs[0]);
        assert_eq!(a.problems.len(), 1, "cut {cut}: {:?}", a.problems);
        let p = &a.problems[0];
        assert_eq!(p.path, second);
        assert_eq!(p.covers, Some((cs[1].clone(), cs[2].clone())));
        assert!(p.to_string().contains(&cs[1]), "{p}");
    }
    std::fs::remove_file(&second).unwrap();
    let a = load(w.root());
    assert_eq!((a.instants.len(), a.problems.len()), (1, 1));
    // The other file damaged instead.
    std::fs::write(&second, &bytes).unwrap();
    std::fs::write(&first, b"PAR1 not really").unwrap();
    let a = load(w.root());
    assert_eq!(a.instants.len(), 2);
    assert_eq!(a.problems[0].path, first);
}

/// The archive log files of a layout-1 table after several archivals.
fn v6_archive(
    n_commits: usize,
    archivals: &[usize],
) -> (tempfile::TempDir, TableWriter, Vec<String>) {
    let (d, mut w) = table(TableType::CopyOnWrite, 6);
    let cs = commits(&mut w, n_commits);
    for &i in archivals {
        w.archive(&cs[i]).unwrap();
    }
    (d, w, cs)
}

/// Layout 1: one archive log file per archival, blocks of at most ten records (three records
/// per commit: requested, inflight, completed); a truncated or damaged file keeps what was read
/// before the damage (and after it, from the next block on) and reports the file.
#[test]
fn v6_damaged_archive_logs() {
    let (_d, w, cs) = v6_archive(9, &[3, 8]);
    let dir = w.local_path(&w.archive_dir());
    assert_eq!(
        names(&dir),
        vec![".commits_.archive.1_1-0-1", ".commits_.archive.2_1-0-1"]
    );
    let second = dir.join(".commits_.archive.2_1-0-1");
    let bytes = std::fs::read(&second).unwrap();
    let (blocks, problems) = hudifs_core::logblock::scan_log_blocks(&bytes);
    assert!(problems.is_empty());
    // 5 commits × 3 records = 15 records: blocks of 10 and 5.
    assert_eq!(blocks.len(), 2);
    let boundaries: Vec<usize> = blocks.iter().map(|b| b.offset).collect();
    let full: Vec<String> = load(w.root())
        .instants
        .iter()
        .map(|i| i.requested.to_string())
        .collect();
    assert_eq!(full, cs);

    // Truncation points all along the file: no panic, never an instant that was not archived, the damage
    // reported unless the cut falls on a block boundary.
    let mut cuts: Vec<usize> = (0..bytes.len()).step_by(61).collect();
    for b in &boundaries {
        cuts.extend([b.saturating_sub(1), *b, b + 1, b + 6, b + 14]);
    }
    cuts.push(bytes.len() - 1);
    cuts.retain(|&c| c < bytes.len());
    for cut in cuts {
        std::fs::write(&second, &bytes[..cut]).unwrap();
        let a = load(w.root());
        let got: Vec<String> = a.instants.iter().map(|i| i.requested.to_string()).collect();
        assert!(
            got.len() >= 4 && got.iter().all(|t| cs.contains(t)),
            "cut {cut}"
        );
        let on_boundary = cut == 0 || boundaries.contains(&cut);
        assert_eq!(
            a.problems.is_empty(),
            on_boundary,
            "cut {cut}: {:?}",
            a.problems
        );
        if cut >= boundaries[1] {
            // The first block whole: cs[4..7] complete, plus cs[7]'s requested state.
            assert!(got.len() >= 7, "cut {cut}: {got:?}");
        }
        for p in &a.problems {
            assert_eq!(p.path, second);
        }
    }

    // A damaged first block: the second is still read (resynchronised at its magic).
    let mut damaged = bytes.clone();
    damaged[10] ^= 0x40; // inside the first block's size field
    std::fs::write(&second, &damaged).unwrap();
    let a = load(w.root());
    assert_eq!(a.problems.len(), 1, "{:?}", a.problems);
    assert!(
        a.problems[0].reason.contains("corrupt block"),
        "{}",
        a.problems[0]
    );
    let got: Vec<&str> = a.instants.iter().map(|i| i.requested.as_str()).collect();
    assert!(got.contains(&cs[8].as_str()), "{got:?}");
    assert!(!got.contains(&cs[5].as_str()), "{got:?}");

    // A record that does not decode: its neighbours still do. The first block's content starts
    // with the block version (3) and the record count (10); 4 bytes of record length later comes
    // the first record, whose first field is a union: an out-of-range branch index breaks it.
    let mut damaged = bytes.clone();
    let record_start = bytes
        .windows(8)
        .position(|w| w == [0u8, 0, 0, 3, 0, 0, 0, 10])
        .unwrap()
        + 12;
    assert!(record_start < boundaries[1]);
    damaged[record_start] = 0x7f;
    std::fs::write(&second, &damaged).unwrap();
    let a = load(w.root());
    assert_eq!(a.problems.len(), 1, "{:?}", a.problems);
    assert!(
        a.problems[0].reason.contains("record 0 of 10"),
        "{}",
        a.problems[0]
    );
    assert_eq!(a.instants.len(), 9, "the first record is a requested state");

    // Garbage in place of an archive file; an unreadable one.
    std::fs::write(&second, b"not a log file").unwrap();
    let a = load(w.root());
    assert_eq!(a.instants.len(), 4);
    assert_eq!(a.problems.len(), 1);
    std::fs::write(&second, &bytes).unwrap();

    // An unfinished merge (Java's `mergeArchivePlan` names the merged file): its damage is
    // ignored, as Java does, since its sources are still there.
    let merged = dir.join(".commits_.archive.3_1-0-1");
    std::fs::write(&merged, &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(load(w.root()).problems.len(), 1);
    write_merge_plan(&dir, ".commits_.archive.3_1-0-1");
    let a = load(w.root());
    assert!(a.is_complete(), "{:?}", a.problems);
    assert_eq!(a.instants.len(), 9);
}

/// `HoodieMergeArchiveFilePlan` as an Avro container (its three fields).
fn write_merge_plan(dir: &Path, merged: &str) {
    let schema = apache_avro::Schema::parse_str(
        r#"{"type":"record","name":"HoodieMergeArchiveFilePlan","namespace":"org.apache.hudi.avro.model",
            "fields":[{"name":"version","type":["int","null"],"default":1},
                      {"name":"candidate","type":["null",{"type":"array","items":"string"}],"default":null},
                      {"name":"mergedArchiveFileName","type":["null","string"],"default":null}]}"#,
    )
    .unwrap();
    let mut writer = apache_avro::Writer::new(&schema, Vec::new());
    let mut r = apache_avro::types::Record::new(&schema).unwrap();
    r.put(
        "version",
        apache_avro::types::Value::Union(0, Box::new(1.into())),
    );
    r.put(
        "candidate",
        apache_avro::types::Value::Union(
            1,
            Box::new(apache_avro::types::Value::Array(vec![
                ".commits_.archive.1_1-0-1".into(),
            ])),
        ),
    );
    r.put(
        "mergedArchiveFileName",
        apache_avro::types::Value::Union(1, Box::new(merged.into())),
    );
    writer.append(r).unwrap();
    std::fs::write(dir.join("mergeArchivePlan"), writer.into_inner().unwrap()).unwrap();
}

/// Every fixture table has an empty archive folder: the archive reads as empty.
#[test]
fn fixture_archives_are_empty() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut seen = BTreeMap::new();
    for f in support::fixtures(&dir) {
        let root = support::unzip(&f.zip, &tmp.path().join(f.name.replace('/', "_")));
        let cfg = support::config(&root);
        let a = archive::load_archive(&*support::store(&root), &cfg).unwrap();
        assert_eq!(a, Archive::default(), "{}", f.name);
        *seen
            .entry(root.join(cfg.archive_dir.as_str()).is_dir())
            .or_insert(0) += 1;
    }
    assert!(seen.get(&true).copied().unwrap_or(0) > 40, "{seen:?}");
}

/// A missing archive folder and an archive folder of unrelated files read as empty.
#[test]
fn absent_archives_are_empty() {
    for version in [6, 9] {
        let (_d, w) = table(TableType::CopyOnWrite, version);
        let dir: PathBuf = w.local_path(&w.archive_dir());
        std::fs::write(dir.join("README"), b"x").unwrap();
        std::fs::write(dir.join(".hidden.crc"), b"x").unwrap();
        assert_eq!(load(w.root()), Archive::default());
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(load(w.root()), Archive::default());
    }
}

/// A table upgraded from 0.x (`hoodie.table.initial.version=SIX`, as `SixToEightUpgradeHandler`
/// records it) keeps the archive its 0.x archiver wrote in `.hoodie/archived` beside the LSM
/// history: the upgrade copies it best effort and leaves it. Both are read (an instant in both
/// is taken as the LSM history has it: `sort_and_dedup` keeps the first read). A table that was
/// not upgraded reads the LSM history alone.
#[test]
fn an_upgraded_table_reads_its_0x_archive_beside_the_lsm_history() {
    let (_d6, w6, old) = v6_archive(6, &[3]);
    let dir = tempfile::tempdir().unwrap();
    let spec = TableSpec::new("t", TableType::CopyOnWrite, 8).partitioned_by(&["p"], true);
    let mut w8 = TableWriter::create(&dir.path().join("t"), spec, START + 86_400_000).unwrap();
    let new = commits(&mut w8, 4);
    w8.archive(&new[1]).unwrap();
    let lsm_only = load(w8.root());
    assert_eq!(lsm_only.instants.len(), 2, "{lsm_only:?}");
    // The 0.x archive where the upgrade left it.
    let legacy = w8.root().join(".hoodie/archived");
    std::fs::create_dir_all(&legacy).unwrap();
    for e in std::fs::read_dir(w6.local_path(&w6.archive_dir())).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), legacy.join(e.file_name())).unwrap();
    }
    assert_eq!(
        load(w8.root()),
        lsm_only,
        "not upgraded: the LSM history alone"
    );
    let props = w8.root().join(".hoodie/hoodie.properties");
    let mut text = std::fs::read_to_string(&props).unwrap();
    text.push_str("hoodie.table.initial.version=SIX\n");
    std::fs::write(&props, text).unwrap();
    let both = load(w8.root());
    assert!(both.is_complete(), "{:?}", both.problems);
    let requested: Vec<&str> = both.instants.iter().map(|i| i.requested.as_str()).collect();
    let want: Vec<&str> = old[..4]
        .iter()
        .chain(&new[..2])
        .map(String::as_str)
        .collect();
    assert_eq!(requested, want);
    for i in &both.instants[..4] {
        assert_eq!(
            i.completion, i.requested,
            "layout 1: completion = requested"
        );
        assert!(i.file.contains(".commits_.archive."), "{}", i.file);
    }
    assert_eq!(both.instants[4..], lsm_only.instants[..]);
}
