//! Listing from Hudi's metadata table (SEMANTICS.md §1.10) on the fixture tables that carry one
//! (written by Java Hudi, so independent of this code): under `metadata`, `storage`, `verify`
//! and `auto`, every view lists the same files with the same sizes; and metadata tables made
//! adversarial (behind the data timeline, blocks of a write that did not complete, a torn
//! base file, a corrupt log, a lost log) never leak or lose a file: the reader fences, completes
//! from storage, or falls back to storage.

use hudifs_testkit::support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use hudifs_core::listing_source::ListingMode;
use hudifs_core::metadata_table;
use hudifs_core::snapshot::Snapshot;
use hudifs_core::table::TableConfig;
use hudifs_core::timefmt::TimelineZone;
use hudifs_core::viewkey::ViewKey;
use hudifs_storage::{LocalStore, Storage};

fn open(root: &Path, mode: ListingMode) -> hudifs_core::error::Result<Snapshot> {
    let store: Arc<dyn Storage> = Arc::new(LocalStore::new(root).unwrap());
    let cfg = TableConfig::load(&*store).unwrap();
    Snapshot::open_with_config(store, cfg, mode)
}

/// A view's files with their sizes, or its refusal.
type Listed = Result<Vec<(String, u64)>, String>;

/// Every view of a snapshot: its name → its files with their sizes, or the refusal.
fn views(snap: &Snapshot) -> Vec<(String, Listed)> {
    let mut keys = vec![("latest".to_string(), ViewKey::Latest, false)];
    keys.push(("latest (ro)".to_string(), ViewKey::Latest, true));
    for t in snap.as_of_names() {
        keys.push((format!("as_of/{t}"), ViewKey::AsOf(t), false));
    }
    for w in snap.window_names() {
        let key = snap.parse_window(&w, &TimelineZone::Utc).unwrap();
        keys.push((format!("incremental/{w}"), key, false));
    }
    keys.into_iter()
        .map(|(name, key, ro)| {
            let got = snap
                .resolve(&key, ro)
                .map(|v| {
                    v.files
                        .iter()
                        .map(|f| (f.rel_path(), f.file.size()))
                        .collect()
                })
                .map_err(|e| e.to_string());
            (name, got)
        })
        .collect()
}

/// The fixture tables with a metadata table, unzipped under `tmp`.
fn mdt_fixtures(tmp: &Path) -> Vec<(String, PathBuf)> {
    let Some(dir) = support::fixtures_dir() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, fx) in support::fixtures(&dir).into_iter().enumerate() {
        let root = support::unzip(&fx.zip, &tmp.join(format!("t{i}")));
        if root.join(".hoodie/metadata/files").is_dir() {
            out.push((fx.name, root));
        }
    }
    out
}

fn assert_same_views(name: &str, want: &Snapshot, got: &Snapshot) -> usize {
    let (a, b) = (views(want), views(got));
    assert_eq!(a.len(), b.len(), "{name}: the views differ");
    for ((va, fa), (vb, fb)) in a.iter().zip(&b) {
        assert_eq!(va, vb);
        assert_eq!(
            fa,
            fb,
            "{name} {va}: {} differs from {}",
            got.listing_source(),
            want.listing_source()
        );
    }
    a.len()
}

#[test]
fn every_metadata_table_fixture_lists_the_same_under_every_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let tables = mdt_fixtures(tmp.path());
    if support::fixtures_dir().is_none() {
        return;
    }
    assert!(
        tables.len() >= 19,
        "expected the 19 fixture tables with answers and a metadata table, found {}",
        tables.len()
    );
    let mut checked = 0;
    for (name, root) in &tables {
        let storage = open(root, ListingMode::Storage).unwrap();
        assert_eq!(storage.listing_source(), "storage");
        for mode in [
            ListingMode::Metadata,
            ListingMode::Auto,
            ListingMode::Verify,
        ] {
            let snap = open(root, mode).unwrap_or_else(|e| panic!("{name} {mode}: {e}"));
            if mode == ListingMode::Verify {
                assert_eq!(snap.listing_source(), "storage", "{name}");
            } else {
                assert!(
                    snap.listing_source().starts_with("metadata-table@"),
                    "{name} {mode}: {}",
                    snap.listing_source()
                );
            }
            checked += assert_same_views(name, &storage, &snap);
        }
        // Java's metadata tables are caught up, and none of their blocks is fenced out.
        let mdt = metadata_table::read(&storage.store, &storage.ctx, &storage.meta).unwrap();
        assert!(mdt.behind.is_empty(), "{name}: behind on {:?}", mdt.behind);
        assert!(!mdt.partitions.is_empty(), "{name}");
    }
    eprintln!(
        "metadata table: {} fixtures, {checked} views equal under metadata, auto and verify",
        tables.len()
    );
}

/// A copy of fixture `name` under `tmp`.
fn fixture(tmp: &Path, name: &str) -> Option<PathBuf> {
    let dir = support::fixtures_dir()?;
    Some(support::unzip(
        &dir.join("tables").join(format!("{name}.zip")),
        tmp,
    ))
}

const PARTITIONED_MOR: &str = "sample_table/mor/avro/v9_txns_simple_meta";
const PARTITIONED_COW: &str = "sample_table/cow/v9_txns_complex_meta";

fn mdt_timeline(root: &Path) -> PathBuf {
    root.join(".hoodie/metadata/.hoodie/timeline")
}

/// The completed file of the newest completed MDT deltacommit of a data write (not of an
/// indexing instant, which writes other MDT partitions).
fn newest_mdt_deltacommit(root: &Path) -> (String, PathBuf) {
    let writes: Vec<String> = std::fs::read_dir(root.join(".hoodie/timeline"))
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_str().unwrap().to_string();
            let write = n.contains('_')
                && [".commit", ".deltacommit", ".replacecommit"]
                    .iter()
                    .any(|a| n.ends_with(a));
            write.then(|| n[..17].to_string())
        })
        .collect();
    let mut done: Vec<PathBuf> = std::fs::read_dir(mdt_timeline(root))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_str().unwrap();
            n.ends_with(".deltacommit") && n.contains('_') && writes.contains(&n[..17].to_string())
        })
        .collect();
    done.sort();
    let p = done.pop().unwrap();
    let t = p.file_name().unwrap().to_str().unwrap()[..17].to_string();
    (t, p)
}

#[test]
fn a_metadata_table_behind_the_data_timeline_is_completed_from_storage() {
    let tmp = tempfile::tempdir().unwrap();
    for name in [PARTITIONED_MOR, PARTITIONED_COW] {
        let Some(root) = fixture(&tmp.path().join(name), name) else {
            return;
        };
        // The MDT's write of the newest data instant never completed.
        let (t, done) = newest_mdt_deltacommit(&root);
        std::fs::remove_file(done).unwrap();
        let storage = open(&root, ListingMode::Storage).unwrap();
        let mdt = metadata_table::read(&storage.store, &storage.ctx, &storage.meta).unwrap();
        assert!(!mdt.behind.is_empty(), "{name}: not behind on {t}");
        let snap = open(&root, ListingMode::Metadata).unwrap();
        assert!(snap.listing_source().starts_with("metadata-table@"));
        assert_same_views(name, &storage, &snap);
    }
}

#[test]
fn blocks_of_a_data_write_that_did_not_complete_are_fenced_out() {
    let tmp = tempfile::tempdir().unwrap();
    for name in [PARTITIONED_MOR, PARTITIONED_COW] {
        let Some(root) = fixture(&tmp.path().join(name), name) else {
            return;
        };
        // The MDT completed its write of the newest data instant; the data instant did not.
        let (t, _) = newest_mdt_deltacommit(&root);
        let data_tl = root.join(".hoodie/timeline");
        let completed: Vec<PathBuf> = std::fs::read_dir(&data_tl)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let n = p.file_name().unwrap().to_str().unwrap();
                n.starts_with(&format!("{t}_"))
            })
            .collect();
        assert_eq!(completed.len(), 1, "{name}: {t}");
        std::fs::remove_file(&completed[0]).unwrap();
        let storage = open(&root, ListingMode::Storage).unwrap();
        let mdt = metadata_table::read(&storage.store, &storage.ctx, &storage.meta).unwrap();
        assert!(mdt.fenced_blocks >= 1, "{name}: no block of {t} fenced out");
        let snap = open(&root, ListingMode::Metadata).unwrap();
        assert_same_views(name, &storage, &snap);
        // The files that write left are in storage and the MDT names none of them.
        let listed: Vec<&String> = mdt
            .partitions
            .values()
            .flatten()
            .map(|(n, _)| n)
            .filter(|n| n.contains(&t))
            .collect();
        assert!(listed.is_empty(), "{name}: {listed:?}");
    }
}

#[test]
fn a_damaged_metadata_table_falls_back_to_storage() {
    let tmp = tempfile::tempdir().unwrap();
    type Damage = fn(&Path);
    let damages: [(&str, Damage); 4] = [
        ("torn base file", |root| {
            let files = root.join(".hoodie/metadata/files");
            for e in std::fs::read_dir(files).unwrap().flatten() {
                if e.path().extension().is_some_and(|x| x == "hfile") {
                    let len = e.metadata().unwrap().len();
                    let f = std::fs::OpenOptions::new()
                        .write(true)
                        .open(e.path())
                        .unwrap();
                    f.set_len(len / 2).unwrap();
                }
            }
        }),
        ("corrupt log block", |root| {
            let log = newest_log(root);
            let mut b = std::fs::read(&log).unwrap();
            // Inside the block, after its magic and size: the block no longer parses.
            let mid = b.len() / 2;
            for x in &mut b[mid..mid + 64] {
                *x ^= 0x5a;
            }
            std::fs::write(&log, b).unwrap();
        }),
        ("lost log", |root| {
            std::fs::remove_file(newest_log(root)).unwrap();
        }),
        ("garbage HFile in a block", |root| {
            let log = newest_log(root);
            let mut b = std::fs::read(&log).unwrap();
            // The trailer of the block's HFile: its protobuf no longer parses.
            let magic = b"TRABLK\"$";
            let at = b.windows(magic.len()).rposition(|w| w == magic).unwrap();
            for x in &mut b[at + magic.len()..at + magic.len() + 16] {
                *x = 0xff;
            }
            std::fs::write(&log, b).unwrap();
        }),
    ];
    for (what, damage) in damages {
        let Some(root) = fixture(&tmp.path().join(what.replace(' ', "_")), PARTITIONED_MOR) else {
            return;
        };
        damage(&root);
        let storage = open(&root, ListingMode::Storage).unwrap();
        let e = metadata_table::read(&storage.store, &storage.ctx, &storage.meta);
        assert!(e.is_err(), "{what}: the damage went unnoticed");
        let refused = open(&root, ListingMode::Metadata)
            .err()
            .map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("--listing metadata")),
            "{what}: {refused:?}"
        );
        let auto = open(&root, ListingMode::Auto).unwrap();
        assert_eq!(auto.listing_source(), "storage", "{what}");
        assert_same_views(what, &storage, &auto);
    }
}

/// The newest log file of the `files` partition.
fn newest_log(root: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(root.join(".hoodie/metadata/files"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_str().unwrap().contains(".log."))
        .collect();
    logs.sort();
    logs.pop().unwrap()
}

#[test]
fn hudifs_ls_lists_with_every_mode_and_verify_finds_no_difference() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = fixture(tmp.path(), PARTITIONED_MOR) else {
        return;
    };
    let root = root.to_str().unwrap();
    let mut outs = Vec::new();
    for mode in ["storage", "metadata", "verify", "auto"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hudifs"))
            .args(["ls", root, "--listing", mode])
            .env("RUST_LOG", "hudifs_core=info")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{mode}: {stderr}");
        if mode == "verify" {
            assert!(stderr.contains("0 difference(s)"), "{stderr}");
            assert!(!stderr.contains("WARN"), "{stderr}");
        }
        outs.push(out.stdout);
    }
    assert!(!outs[0].is_empty());
    assert!(outs.iter().all(|o| o == &outs[0]));
    // --json names the source.
    for (mode, source) in [("storage", "storage"), ("metadata", "metadata-table@")] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hudifs"))
            .args(["ls", root, "--json", "--listing", mode])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            v["source"].as_str().unwrap().starts_with(source),
            "{mode}: {}",
            v["source"]
        );
    }
    // A bad mode is a usage error naming the modes.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hudifs"))
        .args(["ls", root, "--listing", "fast"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("auto, metadata, storage, verify"));
}

#[test]
fn verify_logs_each_difference() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = fixture(tmp.path(), PARTITIONED_COW) else {
        return;
    };
    // A committed base file the metadata table does not know of.
    let part = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.join(".hoodie_partition_metadata").is_file())
        .unwrap();
    let base = std::fs::read_dir(&part)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "parquet"))
        .unwrap();
    let name = base.file_name().unwrap().to_str().unwrap().to_string();
    std::fs::remove_file(&base).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hudifs"))
        .args(["ls", root.to_str().unwrap(), "--listing", "verify"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("{name} is in the metadata table, not in storage")),
        "{stderr}"
    );
    assert!(stderr.contains("1 difference(s)"), "{stderr}");
}

// ---- Tables written by the project's generator, with metadata tables as Java writes them
// (version 6 with the 0.x instant rules, version 9), through histories and failures.

use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};

const START: i64 = 1_767_225_600_000;

/// The views of the table at `root` listed from storage and from its metadata table are the
/// same; the metadata table is used (`mdt`), else `auto` fell back to storage. Returns the
/// metadata table's reading.
fn same_both_ways(root: &Path, step: &str, mdt: bool) -> Option<metadata_table::MdtListing> {
    let storage = open(root, ListingMode::Storage).unwrap();
    let auto = open(root, ListingMode::Auto).unwrap();
    let read = metadata_table::read(&storage.store, &storage.ctx, &storage.meta);
    if mdt {
        assert!(
            auto.listing_source().starts_with("metadata-table@"),
            "{step}: {} ({:?})",
            auto.listing_source(),
            read.as_ref().err()
        );
    } else {
        assert_eq!(auto.listing_source(), "storage", "{step}");
    }
    assert_same_views(step, &storage, &auto);
    read.ok()
}

fn part(partitioned: bool, city: &str) -> String {
    if partitioned {
        format!("city={city}")
    } else {
        String::new()
    }
}

/// Inserts, updates, a data compaction (MOR), a clean, an insert overwrite, a failed write
/// rolled back, MDT compactions (one left in flight over a write): the same views both ways
/// after every step, and the metadata table never behind.
fn history(version: u32, table_type: TableType, partitioned: bool) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let mut spec = TableSpec::new("mdt", table_type, version).with_metadata_table();
    if partitioned {
        spec = spec.partitioned_by(&["city"], true);
    }
    let mor = table_type == TableType::MergeOnRead;
    let (pa, pb) = (part(partitioned, "a"), part(partitioned, "b"));
    let mut w = TableWriter::create(root, spec, START).unwrap();
    let name = format!("v{version} {table_type:?} partitioned={partitioned}");
    let step = |w: &TableWriter, what: &str| {
        let m = same_both_ways(w.root(), &format!("{name}: {what}"), true).unwrap();
        assert!(
            m.behind.is_empty(),
            "{name}: {what}: behind on {:?}",
            m.behind
        );
    };
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
    txn.complete().unwrap();
    step(&w, "insert");
    let mut txn = w.begin(action).unwrap();
    txn.update(&pa, &fa, &rows_with_ids(3, &[1, 2])).unwrap();
    txn.complete().unwrap();
    step(&w, "update");
    let old_files = w.group_files(&pa, &fa);
    if mor {
        let c = w.schedule_compaction(&[(pa.clone(), fa.clone())]).unwrap();
        w.run_compaction(&c, true).unwrap();
        step(&w, "data compaction");
    }
    let latest = w.completed_writes().keys().next_back().unwrap().clone();
    let keep = if mor { old_files.len() } else { 1 };
    let to_clean: Vec<(String, String)> = old_files[..keep]
        .iter()
        .map(|n| (pa.clone(), n.clone()))
        .collect();
    w.clean(&latest, &to_clean).unwrap();
    step(&w, "clean");
    let mut txn = w.begin(Action::ReplaceCommit).unwrap();
    txn.insert(&pb, &rows(7, 4)).unwrap();
    txn.replace_group(&pb, &fb).unwrap();
    txn.complete().unwrap();
    step(&w, "insert overwrite");
    let mut txn = w.begin(action).unwrap();
    let fb = txn
        .insert(&pb, &rows_with_ids(8, &[100, 101, 102]))
        .unwrap();
    txn.complete().unwrap();
    let mut txn = w.begin(action).unwrap();
    txn.update(&pb, &fb, &rows_with_ids(4, &[100, 101]))
        .unwrap();
    let failed = txn.abandon();
    step(&w, "a write in flight");
    w.rollback(&failed).unwrap();
    step(&w, "rollback");
    w.compact_metadata().unwrap();
    step(&w, "MDT compaction");
    let mut txn = w.begin(action).unwrap();
    txn.insert(&pa, &rows(6, 2)).unwrap();
    txn.complete().unwrap();
    step(&w, "write after the MDT compaction");
    let c2 = w.schedule_metadata_compaction().unwrap();
    let mut txn = w.begin(action).unwrap();
    txn.insert(&part(partitioned, "c"), &rows(5, 3)).unwrap();
    txn.complete().unwrap();
    step(&w, "write over a requested MDT compaction");
    w.run_metadata_compaction(&c2, false).unwrap();
    step(&w, "MDT compaction in flight: two slices");
    w.run_metadata_compaction(&c2, true).unwrap();
    step(&w, "MDT compaction completed");
}

#[test]
fn generated_v6_merge_on_read_history() {
    history(6, TableType::MergeOnRead, true);
}

#[test]
fn generated_v6_copy_on_write_history() {
    history(6, TableType::CopyOnWrite, false);
}

#[test]
fn generated_v9_merge_on_read_history() {
    history(9, TableType::MergeOnRead, false);
}

#[test]
fn generated_v9_copy_on_write_history() {
    history(9, TableType::CopyOnWrite, true);
}

/// Failures Java leaves behind, on both table versions: the metadata table behind (a write
/// that skipped it), ahead (its deltacommit of a write that then failed, completed or not),
/// its own deltacommit rolled back, and truncated files.
#[test]
fn generated_metadata_tables_after_failures() {
    for version in [6, 9] {
        let dir = tempfile::tempdir().unwrap();
        let spec = TableSpec::new("mdt", TableType::MergeOnRead, version)
            .with_metadata_table()
            .partitioned_by(&["city"], true);
        let mut w = TableWriter::create(dir.path(), spec, START).unwrap();
        let (pa, pb) = ("city=a".to_string(), "city=b".to_string());
        let mut txn = w.begin(Action::DeltaCommit).unwrap();
        let fa = txn.insert(&pa, &rows(1, 10)).unwrap();
        txn.complete().unwrap();
        same_both_ways(w.root(), "insert", true);

        // Behind: a write completed without updating the metadata table, into a new partition.
        let mut txn = w.begin(Action::DeltaCommit).unwrap();
        txn.insert(&pb, &rows(2, 5)).unwrap();
        txn.skip_metadata_update();
        txn.complete().unwrap();
        let m = same_both_ways(w.root(), &format!("v{version} behind"), true).unwrap();
        assert!(m.behind.contains(&pb), "v{version}: {:?}", m.behind);

        // Ahead: the metadata table completed its deltacommit, the data write failed.
        let mut txn = w.begin(Action::DeltaCommit).unwrap();
        txn.update(&pa, &fa, &rows_with_ids(3, &[1, 2])).unwrap();
        let failed = txn.abandon_after_metadata(true).unwrap();
        let m = same_both_ways(w.root(), &format!("v{version} ahead"), true).unwrap();
        assert!(m.fenced_blocks >= 1, "v{version}: {failed} not fenced");
        w.rollback(&failed).unwrap();
        same_both_ways(w.root(), &format!("v{version} ahead, rolled back"), true);

        // The metadata table's own deltacommit left in flight, then rolled back in it.
        let mut txn = w.begin(Action::DeltaCommit).unwrap();
        txn.update(&pa, &fa, &rows_with_ids(4, &[3])).unwrap();
        let failed = txn.abandon_after_metadata(false).unwrap();
        same_both_ways(
            w.root(),
            &format!("v{version} MDT deltacommit in flight"),
            true,
        );
        w.rollback_metadata_deltacommit(&failed).unwrap();
        same_both_ways(
            w.root(),
            &format!("v{version} MDT deltacommit rolled back"),
            true,
        );
        w.rollback(&failed).unwrap();
        same_both_ways(w.root(), &format!("v{version} data rollback"), true);

        // Truncated files: the storage is listed instead.
        let info = w.metadata_table().unwrap();
        let log = info.log_files.last().unwrap().clone();
        let path = dir.path().join(".hoodie/metadata/files").join(&log);
        let len = std::fs::metadata(&path).unwrap().len();
        w.truncate_metadata_file(&log, len / 2).unwrap();
        same_both_ways(w.root(), &format!("v{version} truncated log"), false);
        w.truncate_metadata_file(&info.base_file, 100).unwrap();
        same_both_ways(w.root(), &format!("v{version} truncated base"), false);
    }
}

#[test]
fn generated_v8_merge_on_read_history() {
    history(8, TableType::MergeOnRead, true);
}
