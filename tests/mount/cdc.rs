//! `cdc/<t1>..<t2>/`, the change feed (SEMANTICS.md §10.10), through a real mount: on every
//! fixture table every window that `ls cdc/` lists and every window of its expected answers is
//! read with pyarrow and compared with the change records `tests/mount/merge/cdc_compare.py` computes
//! on its own from the mount's `merged/as_of/<W − 1 ms>/` and `merged/as_of/<W>/` for each data
//! write W of the window (those snapshots are checked against hudi-rs and Spark by
//! `tests/mount/merged_fixtures.rs`). The same on generated tables with what the fixtures lack.
//! Also: the windows listed are those of `incremental/`, `hudifs ls --cdc W` names what the
//! mount shows, and a window is refused where `incremental/` refuses it or where the table just
//! before its first write is cleaned history.

use crate::merge;
use hudifs_testkit::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hudifs_core::rules::WriteKind;
use hudifs_core::table::TableType;
use hudifs_core::timefmt::TimelineZone;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};
use serde_json::json;
use support::MountGuard;

fn listed(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect()
}

/// The change feeds of `windows` of mount `m` compared by `cdc_compare.py` with the records the
/// merged snapshots on either side of each data write give: one result per window.
fn compare_windows(
    py: &Path,
    m: &MountGuard,
    snap: &hudifs_core::snapshot::Snapshot,
    windows: &[String],
) -> Vec<serde_json::Value> {
    let req: Vec<serde_json::Value> = windows
        .iter()
        .map(|w| {
            let key = snap.parse_window(w, &TimelineZone::Utc).unwrap();
            let plan = snap.plan(&key, false).unwrap();
            let writes: Vec<(String, &str)> = plan
                .writes
                .iter()
                .map(|x| {
                    let kind = if x.kind == WriteKind::Data {
                        "data"
                    } else {
                        "rewrite"
                    };
                    (x.requested.to_string(), kind)
                })
                .collect();
            json!({"window": w, "writes": writes})
        })
        .collect();
    let res = merge::run_script(
        py,
        "cdc_compare.py",
        &json!({"mount": m.path(), "windows": req}),
    );
    res["windows"].as_array().unwrap().clone()
}

/// Mount `root` and check the change feed of every window it lists and of `extra`; a window
/// in `refused` must be refused. Counts into `totals`, findings into `notes`.
#[allow(clippy::too_many_arguments)]
fn check_windows(
    py: &Path,
    name: &str,
    root: &Path,
    tmp: &Path,
    extra: &[String],
    refused: &BTreeSet<String>,
    totals: &mut BTreeMap<&'static str, u64>,
    notes: &mut Vec<String>,
) {
    let cache = tmp.join("merge-cache");
    let m = MountGuard::mount(root, &["--merge-cache", cache.to_str().unwrap()]);
    let windows = listed(&m.path().join("cdc"));
    assert_eq!(windows, listed(&m.path().join("incremental")), "{name}");
    let mut all = windows.clone();
    all.extend(extra.iter().cloned());
    let snap = support::snapshot(root);
    let mut req: Vec<String> = Vec::new();
    for w in &all {
        let d = m.path().join("cdc").join(w);
        if refused.contains(w) {
            assert!(support::walk_files(&d).is_err(), "{name} {w}: not refused");
            *totals.entry("windows refused").or_default() += 1;
            continue;
        }
        // hudifs ls --cdc names what the mount shows.
        let ls = std::process::Command::new(hudifs_testkit::mount::binary("hudifs"))
            .args(["ls", "--cdc", w])
            .arg(root)
            .output()
            .unwrap();
        assert!(ls.status.success(), "{name} {w}: {ls:?}");
        let named: BTreeSet<String> = String::from_utf8_lossy(&ls.stdout)
            .lines()
            .map(String::from)
            .collect();
        let shown: BTreeSet<String> = support::walk_files(&d).unwrap().into_iter().collect();
        assert_eq!(named, shown, "{name} {w}: hudifs ls --cdc vs the mount");
        req.push(w.clone());
    }
    let res = compare_windows(py, &m, &snap, &req);
    let log = m.log_text();
    for r in &res {
        let w = r["window"].as_str().unwrap();
        *totals.entry("windows").or_default() += 1;
        if let Some(e) = r.get("error") {
            // Only slices merged/ refuses everywhere (Lance base files).
            let why = log
                .lines()
                .find(|l| l.contains("merged file"))
                .unwrap_or("(no log line)");
            assert_eq!(e["errno"], libc::EOPNOTSUPP, "{name} {w}: {e}");
            assert!(why.contains("\"lance\""), "{name} {w}: {why}");
            *totals.entry("windows with a refused slice").or_default() += 1;
            continue;
        }
        assert_eq!(
            r["ordered"], true,
            "{name} {w}: records out of commit order"
        );
        if r["match"] == true {
            *totals.entry("windows matching").or_default() += 1;
            *totals.entry("change records").or_default() += r["rows"].as_u64().unwrap();
            for (op, n) in r["ops"].as_object().unwrap() {
                let k = match op.as_str() {
                    "i" => "inserts",
                    "u" => "updates",
                    _ => "deletes",
                };
                *totals.entry(k).or_default() += n.as_u64().unwrap();
            }
        } else {
            *totals.entry("windows differing").or_default() += 1;
            notes.push(format!("{name} {w}: {r}"));
        }
    }
}

#[test]
fn fixture_change_feeds_match_merged_snapshots() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut totals = BTreeMap::new();
    let mut notes = Vec::new();
    for fx in support::fixtures(&dir) {
        let tmp = tempfile::tempdir().unwrap();
        let root = support::unzip(&fx.zip, tmp.path());
        let expected = fx.expected["incremental"].as_object().unwrap();
        let as_of = fx.expected["as_of"].as_object().unwrap();
        let snap = support::snapshot(&root);
        // Refused: where incremental/ refuses the window, and where the table just before the
        // window's first data write is refused by as_of/ (cleaned history).
        let mut refused = BTreeSet::new();
        for (w, e) in expected {
            if e.get("refused").is_some() {
                refused.insert(w.clone());
                continue;
            }
            let key = snap.parse_window(w, &TimelineZone::Utc).unwrap();
            let plan = snap.plan(&key, false).unwrap();
            let first = plan
                .writes
                .iter()
                .filter(|x| x.kind == WriteKind::Data)
                .map(|x| x.requested.to_string())
                .min();
            if let Some(first) = first {
                let before = hudifs_core::timefmt::minus_one_ms(&first).unwrap();
                if as_of
                    .get(&before)
                    .is_some_and(|e| e.get("refused").is_some())
                {
                    refused.insert(w.clone());
                }
            }
        }
        let windows: Vec<String> = expected.keys().cloned().collect();
        check_windows(
            &py,
            &fx.name,
            &root,
            tmp.path(),
            &windows,
            &refused,
            &mut totals,
            &mut notes,
        );
    }
    eprintln!("cdc/ on the fixtures: {totals:#?}");
    for n in &notes {
        eprintln!("  {n}");
    }
    assert!(notes.is_empty(), "change feeds differ: {notes:#?}");
    assert!(totals.get("windows matching").copied().unwrap_or(0) >= 250);
    for k in ["inserts", "updates", "deletes"] {
        assert!(
            totals.get(k).copied().unwrap_or(0) > 0,
            "no {k} in any feed"
        );
    }
}

/// A table of the generator with what the fixtures lack: several writes to one key in one
/// window, deletes only in log delete blocks (of a base key and of a key only in a log), an
/// update writing identical data, late records under event-time ordering, a compaction inside
/// a window, an insert overwrite (its replaced group's records are deletes), and on v6 a write
/// left pending (BLOCK). Returns windows of several writes.
fn build(root: &Path, spec: TableSpec) -> Vec<String> {
    let v6 = spec.version == 6;
    let mor = spec.table_type == TableType::MergeOnRead;
    let write = if mor {
        Action::DeltaCommit
    } else {
        Action::Commit
    };
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(write).unwrap();
    let fa = t.insert("city=a", &rows(1, 20)).unwrap();
    let fb = t.insert("city=b", &rows(2, 20)).unwrap();
    let first = t.complete().unwrap();
    for round in 0..2u64 {
        let mut t = w.begin(write).unwrap();
        let mut ids: Vec<i64> = (1000..1005).collect();
        if round == 0 && mor {
            ids.push(5000);
        }
        t.update("city=a", &fa, &rows_with_ids(100 + round, &ids))
            .unwrap();
        t.complete().unwrap();
    }
    // An update writing the data a row already holds.
    let same = w
        .group_rows("city=b", &fb)
        .unwrap()
        .into_iter()
        .filter(|r| r.id == 2003)
        .collect::<Vec<_>>();
    let mut late = rows_with_ids(500, &[2000, 2001]);
    let now = w.group_rows("city=b", &fb).unwrap();
    for (r, d) in late.iter_mut().zip([-5, 5]) {
        r.ts = now.iter().find(|x| x.id == r.id).unwrap().ts + d;
    }
    late.extend(same);
    let mut t = w.begin(write).unwrap();
    t.update("city=b", &fb, &late).unwrap();
    t.complete().unwrap();
    // Deletes: in a log delete block on merge-on-read (a base key, a key only in a log), by
    // rewriting the group on copy-on-write.
    let mut t = w.begin(write).unwrap();
    let deleted: &[i64] = if mor {
        &[1001, 1010, 5000]
    } else {
        &[1001, 1010]
    };
    t.delete("city=a", &fa, deleted).unwrap();
    let mid = t.complete().unwrap();
    if mor {
        let c = w.schedule_compaction(&[("city=a", fa.as_str())]).unwrap();
        w.run_compaction(&c, true).unwrap();
    }
    if v6 {
        let mut t = w.begin(write).unwrap();
        t.update("city=b", &fb, &rows_with_ids(650, &[2010]))
            .unwrap();
        t.abandon();
    }
    let mut t = w.begin(write).unwrap();
    t.update("city=a", &fa, &rows_with_ids(600, &[1002]))
        .unwrap();
    t.complete().unwrap();
    let mut t = w.begin(Action::ReplaceCommit).unwrap();
    t.set_operation("INSERT_OVERWRITE").unwrap();
    t.replace_group("city=b", &fb).unwrap();
    t.insert("city=b", &rows(3, 5)).unwrap();
    let last = t.complete().unwrap();
    let sel = |i: &str| {
        if v6 {
            i.to_string()
        } else {
            w.completed_writes()[i].clone()
        }
    };
    vec![
        format!("{}..{}", sel(&first), sel(&mid)),
        format!("{}..{}", sel(&mid), sel(&last)),
        format!("{}..", sel(&first)),
        format!("..{}", sel(&last)),
    ]
}

#[test]
fn generated_change_feeds_match_merged_snapshots() {
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let spec = |t, v| TableSpec::new("gen_cdc", t, v).partitioned_by(&["city"], true);
    let tables = [
        ("v6 mor", spec(TableType::MergeOnRead, 6)),
        ("v9 mor event time", spec(TableType::MergeOnRead, 9)),
        (
            "v9 mor commit time",
            spec(TableType::MergeOnRead, 9)
                .with_property("hoodie.record.merge.mode", "COMMIT_TIME_ORDERING"),
        ),
        ("v6 cow", spec(TableType::CopyOnWrite, 6)),
        ("v9 cow", spec(TableType::CopyOnWrite, 9)),
    ];
    let mut totals = BTreeMap::new();
    let mut notes = Vec::new();
    for (name, spec) in tables {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let extra = build(&root, spec);
        check_windows(
            &py,
            name,
            &root,
            tmp.path(),
            &extra,
            &BTreeSet::new(),
            &mut totals,
            &mut notes,
        );
    }
    eprintln!("cdc/ on generated tables: {totals:#?}");
    for n in &notes {
        eprintln!("  {n}");
    }
    assert!(notes.is_empty(), "change feeds differ: {notes:#?}");
    assert!(!totals.contains_key("windows with a refused slice"));
    for k in ["inserts", "updates", "deletes"] {
        assert!(
            totals.get(k).copied().unwrap_or(0) > 0,
            "no {k} in any feed"
        );
    }
}

/// DuckDB and a plain pyarrow job, as a user runs them: the change feed's struct fields are
/// queried by name, `merged/incremental/` is counted, and both agree with pyarrow.
#[test]
fn duckdb_and_pyarrow_read_both_views() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let tmp = tempfile::tempdir().unwrap();
    let zip = dir.join("tables/quickstart_trips_table/mor/avro/v8_trips_8i3u1d.zip");
    let root = support::unzip(&zip, tmp.path());
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
    let script = r#"
import sys, glob, duckdb, pyarrow.parquet as pq
mnt = sys.argv[1]
feed = duckdb.sql(f"select op, ts_ms, before.fare, after.fare from '{mnt}/cdc/earliest..latest/**/*.parquet' order by ts_ms, op").fetchall()
ops = "".join(sorted(r[0] for r in feed))
updates = [r for r in feed if r[0] == "u"]
assert all(r[2] is not None and r[3] is not None for r in updates), updates
deletes = [r for r in feed if r[0] == "d"]
assert all(r[2] is not None and r[3] is None for r in deletes), deletes
files = glob.glob(f"{mnt}/merged/incremental/earliest..latest/**/*.parquet", recursive=True)
arrow_rows = sum(pq.read_table(f).num_rows for f in files)
duck_rows = duckdb.sql(f"select count(*) from '{mnt}/merged/incremental/earliest..latest/**/*.parquet'").fetchall()[0][0]
latest = duckdb.sql(f"select count(*) from '{mnt}/merged/latest/**/*.parquet'").fetchall()[0][0]
print(ops, arrow_rows, duck_rows, latest)
"#;
    let text = support::printed(&py, script, &[m.path()]);
    let parts: Vec<&str> = text.split_whitespace().collect();
    // 8 inserts, 3 updates and 2 deletes over the table's history (cdc/ reads the same as
    // tests/mount/cdc.rs's reference); the whole-history window of merged/incremental/ is the table.
    assert_eq!(parts[0], "ddiiiiiiiiuuu", "{text}");
    assert_eq!(
        parts[1], parts[2],
        "pyarrow and DuckDB count the same rows: {text}"
    );
    assert_eq!(
        parts[2], parts[3],
        "earliest..latest holds the latest snapshot: {text}"
    );
}

/// Copy-on-write tables written with CDC enabled, in each supplemental logging mode and table
/// versions 6 and 9 (the generator writes Hudi's CDC logs, RFC-51's layout): the feed is read
/// from those logs (`user.hudi.merged_from` names them) and equals the records computed from
/// the merged snapshots.
#[test]
fn cdc_logs_of_each_logging_mode_give_the_same_feed() {
    use hudifs_testkit::generator::CdcMode;
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut totals = BTreeMap::new();
    let mut notes = Vec::new();
    let mut logs_read = 0;
    for version in [6, 9] {
        for mode in CdcMode::ALL {
            let name = format!("v{version} cow {}", mode.name());
            let tmp = tempfile::tempdir().unwrap();
            let root = tmp.path().join("table");
            let spec = TableSpec::new("gen_cdc_log", TableType::CopyOnWrite, version)
                .partitioned_by(&["city"], true)
                .with_cdc(mode);
            let extra = build(&root, spec);
            check_windows(
                &py,
                &name,
                &root,
                tmp.path(),
                &extra,
                &BTreeSet::new(),
                &mut totals,
                &mut notes,
            );
            // The feeds of the writes that rewrote a group name its CDC log among their inputs.
            let cache = tmp.path().join("merge-cache");
            let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
            let all = m.path().join("cdc/earliest..latest");
            let mut named = 0;
            for f in support::walk_files(&all).unwrap() {
                let from = support::xattr(&all.join(&f), "user.hudi.merged_from").unwrap();
                named += from
                    .lines()
                    .filter(|l| l.ends_with("-cdc") || l.ends_with(".cdc"))
                    .count();
            }
            assert!(named > 0, "{name}: no feed read a CDC log");
            assert!(
                !m.log_text().contains("CDC log gone"),
                "{name}: a CDC log was not read: {}",
                m.log_text()
            );
            logs_read += named;
        }
    }
    eprintln!("cdc/ from CDC logs: {totals:#?}; {logs_read} CDC logs read");
    for n in &notes {
        eprintln!("  {n}");
    }
    assert!(notes.is_empty(), "change feeds differ: {notes:#?}");
    assert!(!totals.contains_key("windows with a refused slice"));
}

/// A window whose oldest write's before-state is history the cleaner removed is refused by
/// cdc/ (a `before` image would be missing), where incremental/ still serves it.
#[test]
fn a_window_whose_before_state_was_cleaned_is_refused() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let spec =
        TableSpec::new("gen_clean", TableType::CopyOnWrite, 6).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    let fa = t.insert("city=a", &rows(1, 10)).unwrap();
    t.complete().unwrap();
    let mut written = Vec::new();
    for round in 0..2u64 {
        let mut t = w.begin(Action::Commit).unwrap();
        written.push(
            t.update("city=a", &fa, &rows_with_ids(100 + round, &[1000]))
                .unwrap(),
        );
        t.complete().unwrap();
    }
    let (second, third) = {
        let c: Vec<String> = w.completed_writes().keys().cloned().collect();
        (c[1].clone(), c[2].clone())
    };
    // The cleaner keeps only the newest commit: the first two slices' base files go.
    let first_base = w.group_files("city=a", &fa)[0].clone();
    let gone = [
        ("city=a", first_base.rsplit('/').next().unwrap().to_string()),
        ("city=a", written[0].clone()),
    ];
    w.clean(&third, &gone).unwrap();
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
    let window = format!("{second}..{third}");
    assert!(
        support::walk_files(&m.path().join("incremental").join(&window)).is_ok(),
        "incremental/ serves the window"
    );
    assert!(
        support::walk_files(&m.path().join("cdc").join(&window)).is_err(),
        "cdc/ refuses it"
    );
    let ls = std::process::Command::new(hudifs_testkit::mount::binary("hudifs"))
        .args(["ls", "--cdc", &window])
        .arg(&root)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&ls.stderr);
    assert!(!ls.status.success() && err.contains("just before"), "{err}");
}

/// `check_windows` on every window of one write `w` made and the window of them all.
fn check_every_window(
    py: &Path,
    name: &str,
    root: &Path,
    tmp: &Path,
    w: &TableWriter,
    totals: &mut BTreeMap<&'static str, u64>,
    notes: &mut Vec<String>,
) {
    let writes: Vec<&String> = w.completed_writes().keys().collect();
    let all = format!("{}..{}", writes[0], writes[writes.len() - 1]);
    let none = BTreeSet::new();
    check_windows(py, name, root, tmp, &[all], &none, totals, notes);
}

/// A table whose records a custom delete marker deletes (SEMANTICS §10.4): its change feed
/// has a `d` with the before image wherever a marked record wins, as the merged snapshots on
/// either side of each write say (`merged_deletes.rs` builds the table).
#[test]
fn change_feeds_of_a_table_with_a_delete_marker_match_merged_snapshots() {
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut totals = BTreeMap::new();
    let mut notes = Vec::new();
    for mode in ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let (w, _) = crate::merged_deletes::build(&root, crate::merged_deletes::marked(mode));
        check_every_window(&py, mode, &root, tmp.path(), &w, &mut totals, &mut notes);
    }
    eprintln!("cdc/ with a delete marker: {totals:#?}");
    assert!(notes.is_empty(), "change feeds differ: {notes:#?}");
    assert!(!totals.contains_key("windows with a refused slice"));
    // Keys 1000-1002 and 2007 are deleted by the marker, in both tables.
    assert!(
        totals.get("deletes").copied().unwrap_or(0) >= 8,
        "{totals:?}"
    );
}

/// Tables upgraded from 0.x (SEMANTICS §8, `hudifs_testkit::generator::build_upgraded`): every
/// change record of every window, across the upgrade, equals what the merged snapshots on
/// either side of its write say.
#[test]
fn change_feeds_of_upgraded_tables_match_merged_snapshots() {
    use hudifs_core::table::TableType;
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut totals = BTreeMap::new();
    let mut notes = Vec::new();
    for version in [8, 9] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let u =
            hudifs_testkit::generator::build_upgraded(&root, TableType::MergeOnRead, version, None)
                .unwrap();
        let name = format!("upgraded to {version}");
        check_every_window(
            &py,
            &name,
            &root,
            tmp.path(),
            &u.writer,
            &mut totals,
            &mut notes,
        );
    }
    eprintln!("cdc/ of upgraded tables: {totals:#?}");
    assert!(notes.is_empty(), "change feeds differ: {notes:#?}");
    assert!(!totals.contains_key("windows with a refused slice"));
    assert!(
        totals.get("updates").copied().unwrap_or(0) >= 10,
        "{totals:?}"
    );
}

/// Tables whose merges fill values from the other record, and a first-value table (SEMANTICS
/// §10.4): each change feed's images hold the values the merged snapshots on either side of
/// each write hold, filled values included.
#[test]
fn change_feeds_of_tables_that_fill_values_match_merged_snapshots() {
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut totals = BTreeMap::new();
    let mut notes = Vec::new();
    for (name, spec, mark) in crate::merged_deletes::fill_tables() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let (w, _) = crate::merged_deletes::build_fills(&root, spec, mark);
        check_every_window(&py, name, &root, tmp.path(), &w, &mut totals, &mut notes);
    }
    eprintln!("cdc/ of tables that fill values: {totals:#?}");
    assert!(notes.is_empty(), "change feeds differ: {notes:#?}");
    assert!(!totals.contains_key("windows with a refused slice"));
    assert!(
        totals.get("updates").copied().unwrap_or(0) >= 12,
        "{totals:?}"
    );
}

/// `table_duplicate_keys` (one file group holding `k1` twice and `k2` three times; an upsert of
/// `k1` and a delete of `k2`): one change record per record in every window, as the merged
/// snapshots on either side say. The insert gives six records (one per row, not one per key),
/// the upsert one update (of `k1`'s first row; its second stays), the delete one delete (of
/// `k2`'s first row, the one a keyed merge drops).
#[test]
fn duplicate_keys_give_one_change_record_per_record() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let fx = support::fixtures(&dir)
        .into_iter()
        .find(|f| f.name.ends_with("table_duplicate_keys"))
        .expect("the table_duplicate_keys fixture");
    let tmp = tempfile::tempdir().unwrap();
    let root = support::unzip(&fx.zip, tmp.path());
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
    // One window per write: the ends of the windows cdc/ lists are the writes' times.
    let ends: BTreeSet<String> = listed(&m.path().join("cdc"))
        .iter()
        .filter_map(|w| w.split_once("..").map(|(_, end)| end.to_string()))
        .collect();
    let writes: Vec<String> = ends.into_iter().collect();
    assert_eq!(writes.len(), 3, "{writes:?}");
    let mut prev = "19700101000000000".to_string();
    let mut windows = Vec::new();
    for w in &writes {
        windows.push(format!("{prev}..{w}"));
        prev = w.clone();
    }
    let res = compare_windows(&support::python(), &m, &support::snapshot(&root), &windows);
    let mut ops = Vec::new();
    for r in &res {
        assert_eq!(r["match"], true, "{r}");
        let mut o = String::new();
        for (op, n) in r["ops"].as_object().unwrap() {
            o.push_str(&op.repeat(n.as_u64().unwrap() as usize));
        }
        ops.push(o);
    }
    assert_eq!(ops, ["iiiiii", "u", "d"], "{res:?}");
}
