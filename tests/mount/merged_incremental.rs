//! `merged/incremental/<t1>..<t2>/` against the fixture tables, through a real mount: every
//! fixture mounted, every window that `ls merged/incremental/` lists and every window of its
//! expected answers read with pyarrow, the rows compared as multisets
//! - with hudi-rs 0.5.0's incremental read of the same window (after the BLOCK cut: hudi-rs
//!   does not cut windows at pending writes), and
//! - with the rows of `merged/as_of/<L>/` (L: the newest write the window selects) whose
//!   `_hoodie_commit_time` is one of the window's writes: Java Hudi's definition, the state as
//!   of the window's end of every record whose latest change is in the window.
//!
//! Every window must equal the second; every window must equal the first except on the
//! fixtures of [`HUDI_RS_DIFFERS`], where hudi-rs departs from Java Hudi (SEMANTICS.md §10.9).
//! Also: the windows listed are those of `incremental/`, `hudifs ls --incremental W --merged`
//! names what the mount shows, and a window `incremental/` refuses is refused here too.
//!
//! Python with pyarrow and `hudi==0.5.0`: `support::python`.

use crate::merge;
use hudifs_testkit::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};
use serde_json::{json, Value};
use support::MountGuard;

/// Fixtures on which hudi-rs's incremental read (0.5.0, and 0.6.0-rc.1: `hudi_rs_written`)
/// departs from Java Hudi, and how (SEMANTICS.md §10.9 has the details).
pub(crate) const HUDI_RS_DIFFERS: [(&str, &str); 2] = [
    (
        "quickstart_trips_table/mor/avro/table_partial_update",
        "hudi-rs leaves the columns a partial update did not set null; Java merges them",
    ),
    (
        "quickstart_trips_table/mor/avro/table_log_compaction",
        "hudi-rs returns nothing for the window of a log compaction, whose block rewrote the \
         records with its own commit time",
    ),
];

/// hudi-rs's bounds of a window name: an open start is the earliest time, an open end the
/// table's latest (hudi-rs's own defaults).
fn bounds(window: &str) -> (String, Option<String>) {
    let (a, b) = window.split_once("..").unwrap();
    let b = if b == "latest" { "" } else { b };
    let start = if a.is_empty() || a == "earliest" {
        "19700101000000000".to_string()
    } else {
        a.to_string()
    };
    (start, (!b.is_empty()).then(|| b.to_string()))
}

fn listed(dir: &std::path::Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect()
}

#[test]
fn merged_windows_match_hudi_rs() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut totals: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut notes = Vec::new();
    for fx in support::fixtures(&dir) {
        let tmp = tempfile::tempdir().unwrap();
        let root = support::unzip(&fx.zip, tmp.path());
        let expected = fx.expected["incremental"].as_object().unwrap();
        let refused: BTreeSet<String> = expected
            .iter()
            .filter(|(_, e)| e.get("refused").is_some())
            .map(|(w, _)| w.clone())
            .collect();
        let known = HUDI_RS_DIFFERS
            .iter()
            .find(|(n, _)| *n == fx.name)
            .map(|k| k.1);
        let windows: Vec<String> = expected.keys().cloned().collect();
        compare_windows(
            &py,
            &fx.name,
            &root,
            tmp.path(),
            &windows,
            &refused,
            known,
            &mut totals,
            &mut notes,
        );
    }
    eprintln!("merged/incremental fixture comparison: {totals:#?}");
    for n in &notes {
        eprintln!("  {n}");
    }
    let report =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/merged-incremental.txt");
    let _ = std::fs::write(&report, format!("{totals:#?}\n{}\n", notes.join("\n")));
    assert!(
        !totals.contains_key("windows differing from hudi-rs")
            && !totals.contains_key("windows differing from merged/as_of filtered")
            && !totals.contains_key("hudi-rs errors"),
        "merged/incremental/ differs: {notes:#?}"
    );
    assert!(totals.get("windows matching hudi-rs").copied().unwrap_or(0) >= 280);
    assert!(
        totals
            .get("windows matching merged/as_of filtered")
            .copied()
            .unwrap_or(0)
            >= 280
    );
}

/// Mount the table at `root` and compare `merged/incremental/<w>/` for every window it lists and
/// every one of `extra` (those in `refused` must be refused) with hudi-rs and with
/// `merged/as_of/<L>/` filtered; counts into `totals`, findings into `notes`. `known`: how
/// hudi-rs departs from Java Hudi on this table, if it does.
#[allow(clippy::too_many_arguments)]
fn compare_windows(
    py: &Path,
    name: &str,
    root: &Path,
    tmp: &Path,
    extra: &[String],
    refused: &BTreeSet<String>,
    known: Option<&str>,
    totals: &mut BTreeMap<&'static str, u64>,
    notes: &mut Vec<String>,
) {
    let cache = tmp.join("merge-cache");
    let m = MountGuard::mount(root, &["--merge-cache", cache.to_str().unwrap()]);
    // The same windows as incremental/.
    let windows = listed(&m.path().join("merged/incremental"));
    assert_eq!(
        windows,
        listed(&m.path().join("incremental")),
        "{}: merged/incremental/ vs incremental/",
        name
    );
    let mut all: BTreeSet<String> = windows.clone();
    all.extend(extra.iter().cloned());
    let latest = support::snapshot(root)
        .timeline()
        .latest_completion()
        .map(|t| t.to_string());
    // hudi-rs's incremental read gives the partition fields as strings (a timestamp-based
    // key generator's epoch field too), where the data files and Spark hold their own
    // types: they are compared as strings.
    let props = std::fs::read_to_string(root.join(".hoodie/hoodie.properties")).unwrap_or_default();
    let partition_fields: Vec<String> = props
        .lines()
        .find_map(|l| l.strip_prefix("hoodie.table.partition.fields="))
        .map(|v| {
            v.split(',')
                .map(|f| f.split(':').next().unwrap_or(f).to_string())
                .collect()
        })
        .unwrap_or_default();
    let mut req = Vec::new();
    for w in &all {
        let d = m.path().join("merged/incremental").join(w);
        if refused.contains(w) {
            // Refused as incremental/ refuses it.
            assert!(support::walk_files(&d).is_err(), "{} {w}", name);
            *totals.entry("windows refused").or_default() += 1;
            continue;
        }
        // hudifs ls --incremental W --merged names what the mount shows.
        let ls = std::process::Command::new(hudifs_testkit::mount::binary("hudifs"))
            .args(["ls", "--merged", "--incremental", w])
            .arg(root)
            .output()
            .unwrap();
        assert!(ls.status.success(), "{} {w}: {:?}", name, ls);
        let mut named: Vec<String> = String::from_utf8_lossy(&ls.stdout)
            .lines()
            .map(String::from)
            .collect();
        named.sort();
        let mut shown = support::walk_files(&d).unwrap_or_default();
        shown.sort();
        assert_eq!(named, shown, "{} {w}: hudifs ls vs the mount", name);
        let (start, end) = bounds(w);
        // hudi-rs reads the window after the BLOCK cut.
        let end = support::xattr(&d, "user.hudi.effective_end")
            .or(end)
            .or_else(|| latest.clone());
        let keep: Vec<String> = support::xattr(&d, "user.hudi.commit_times")
            .unwrap_or_default()
            .split(',')
            .filter(|x| !x.is_empty())
            .map(String::from)
            .collect();
        let oracle = keep
            .last()
            .map(|l| json!({"dir": m.path().join("merged/as_of").join(l), "keep": keep}));
        req.push(
            json!({"label": w, "as_of": null, "window": [start, end], "dir": d,
                "oracle": oracle, "stringify": partition_fields}),
        );
    }
    let input = json!({"table": root, "gold": null, "views": req});
    let res: Value = merge::compare(py, &input);
    *totals.entry("tables").or_default() += 1;
    let log = m.log_text();
    for v in res["views"].as_array().unwrap() {
        *totals.entry("windows").or_default() += 1;
        let label = v["label"].as_str().unwrap();
        if let Some(e) = v.get("read_error") {
            // Only what merged/ refuses everywhere: Lance base files, HFile log blocks.
            *totals.entry("windows with a refused slice").or_default() += 1;
            let why = log
                .lines()
                .find(|l| l.contains("merged file"))
                .unwrap_or("(no log line)");
            assert_eq!(e["errno"], libc::EOPNOTSUPP, "{} {label}: {e}", name);
            assert!(
                why.contains("\"lance\"") || why.contains("an HFile data block"),
                "{} {label}: unexpected refusal: {why}",
                name
            );
            continue;
        }
        match v.get("oracle") {
            Some(c) if c["match"] == true => {
                *totals
                    .entry("windows matching merged/as_of filtered")
                    .or_default() += 1;
            }
            Some(c) => {
                *totals
                    .entry("windows differing from merged/as_of filtered")
                    .or_default() += 1;
                notes.push(format!(
                        "{} {label}: differs from merged/as_of filtered: ours {} rows, theirs {}; extra {} missing {}",
                        name, c["rows"], c["reference_rows"], c["extra"], c["missing"]
                    ));
            }
            None if v.get("oracle_error").is_some() => {
                *totals
                    .entry("windows differing from merged/as_of filtered")
                    .or_default() += 1;
                notes.push(format!("{} {label}: oracle: {}", name, v["oracle_error"]));
            }
            None => {}
        }
        match v.get("hudi_rs") {
            None => {
                *totals.entry("hudi-rs errors").or_default() += 1;
                notes.push(format!(
                    "{} {label}: hudi-rs failed: {}",
                    name, v["hudi_rs_error"]
                ));
            }
            Some(c) if c["match"] == true => {
                *totals.entry("windows matching hudi-rs").or_default() += 1;
                *totals.entry("rows matching hudi-rs").or_default() += c["rows"].as_u64().unwrap();
            }
            Some(c) if known.is_some() => {
                *totals
                    .entry("windows differing from hudi-rs as documented")
                    .or_default() += 1;
                notes.push(format!(
                    "{} {label}: differs from hudi-rs as documented ({}): ours {} rows, theirs {}",
                    name,
                    known.unwrap_or(""),
                    c["rows"],
                    c["reference_rows"]
                ));
            }
            Some(c) => {
                *totals.entry("windows differing from hudi-rs").or_default() += 1;
                notes.push(format!(
                        "{} {label}: differs from hudi-rs: ours {} rows, theirs {}; extra {} missing {}",
                        name, c["rows"], c["reference_rows"], c["extra"], c["missing"]
                    ));
            }
        }
    }
}

/// Tables whose merges follow a delete marker, a payload class or a partial-update mode
/// (SEMANTICS §10.4), and tables upgraded from 0.x (§8): every window of `merged/incremental/` equals `merged/as_of/` filtered to
/// the window's commits. hudi-rs 0.5 is no oracle here: it refuses the payload and marker
/// tables ("a merger of its own"), and reads the partial-update ones without filling values
/// (and, as elsewhere, filters base rows by commit time before it merges).
#[test]
fn windows_of_pipeline_tables_match_merged_as_of() {
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut totals = BTreeMap::new();
    let mut notes = Vec::new();
    let mut check = |name: &str, root: &Path, tmp: &Path, writes: Vec<&String>| {
        let all = format!("{}..{}", writes[0], writes[writes.len() - 1]);
        compare_windows(
            &py,
            name,
            root,
            tmp,
            &[all],
            &BTreeSet::new(),
            Some("hudi-rs 0.5 does not fill values under partial-update modes"),
            &mut totals,
            &mut notes,
        );
    };
    for (name, spec, mark) in crate::merged_deletes::fill_tables() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let (w, _) = crate::merged_deletes::build_fills(&root, spec, mark);
        check(
            name,
            &root,
            tmp.path(),
            w.completed_writes().keys().collect(),
        );
    }
    for mode in ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let (w, _) = crate::merged_deletes::build(&root, crate::merged_deletes::marked(mode));
        let name = format!("v9 delete marker, {mode}");
        check(
            &name,
            &root,
            tmp.path(),
            w.completed_writes().keys().collect(),
        );
    }
    for version in [8, 9] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let u = hudifs_testkit::generator::build_upgraded(
            &root,
            hudifs_core::table::TableType::MergeOnRead,
            version,
            None,
        )
        .unwrap();
        let name = format!("upgraded from 0.x to {version}");
        check(
            &name,
            &root,
            tmp.path(),
            u.writer.completed_writes().keys().collect(),
        );
    }
    eprintln!("merged/incremental on pipeline tables: {totals:#?}");
    let differing: Vec<&String> = notes
        .iter()
        .filter(|n| n.contains("merged/as_of filtered") || n.contains("oracle:"))
        .collect();
    assert!(
        differing.is_empty(),
        "merged/incremental/ differs: {differing:#?}"
    );
    assert!(
        !totals.contains_key("windows with a refused slice"),
        "{totals:?}"
    );
    assert!(
        totals
            .get("windows matching merged/as_of filtered")
            .copied()
            .unwrap_or(0)
            >= 24,
        "{totals:?}"
    );
}

/// A merge-on-read table of the generator with what the fixtures lack for windows: the same
/// keys updated by consecutive writes (several writes to one key inside one window), late
/// records with older ordering values (event time), deletes that exist only in log delete
/// blocks (of base keys and of a key only in logs), a completed compaction, an update after
/// it, an insert overwrite replacing a group and, on v6, a write left pending before a later
/// completed one, so that windows over it are cut (BLOCK). Returns windows of several writes
/// to compare besides the ones `merged/incremental/` lists.
fn build_generated(root: &Path, spec: TableSpec) -> Vec<String> {
    let v6 = spec.version == 6;
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let fa = t.insert("city=a", &rows(1, 30)).unwrap();
    let fb = t.insert("city=b", &rows(2, 30)).unwrap();
    let first = t.complete().unwrap();
    // Keys 1000..1010 updated by two consecutive writes; a key inserted into a log.
    for round in 0..2u64 {
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        let mut ids: Vec<i64> = (1000..1010).collect();
        if round == 0 {
            ids.push(5000);
        }
        t.update("city=a", &fa, &rows_with_ids(100 + round, &ids))
            .unwrap();
        t.complete().unwrap();
    }
    // Late records in b: older, equal and newer ordering values than the rows they update.
    let mut late = rows_with_ids(500, &[2000, 2001, 2002, 2003]);
    let now = w.group_rows("city=b", &fb).unwrap();
    for (r, d) in late.iter_mut().zip([-1, -5, 0, 1]) {
        r.ts = now.iter().find(|x| x.id == r.id).unwrap().ts + d;
    }
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=b", &fb, &late).unwrap();
    t.complete().unwrap();
    // Deletes only in logs: base keys and the key only in a log.
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.delete("city=a", &fa, &[1001, 1020, 5000]).unwrap();
    let deletes = t.complete().unwrap();
    // A compaction of a, then an update of the compacted slice.
    let c = w.schedule_compaction(&[("city=a", fa.as_str())]).unwrap();
    w.run_compaction(&c, true).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &fa, &rows_with_ids(600, &[1002, 1003]))
        .unwrap();
    t.complete().unwrap();
    // v6: a write left pending, then one that completes after it.
    if v6 {
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.update("city=b", &fb, &rows_with_ids(650, &[2010]))
            .unwrap();
        t.abandon();
    }
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=b", &fb, &rows_with_ids(660, &[2011, 2012]))
        .unwrap();
    t.complete().unwrap();
    // An insert overwrite: b replaced by a new group.
    let mut t = w.begin(Action::ReplaceCommit).unwrap();
    t.set_operation("INSERT_OVERWRITE").unwrap();
    t.replace_group("city=b", &fb).unwrap();
    t.insert("city=b", &rows(3, 10)).unwrap();
    let last = t.complete().unwrap();
    let sel = |i: &str| {
        if v6 {
            i.to_string()
        } else {
            w.completed_writes()[i].clone()
        }
    };
    vec![
        format!("{}..{}", sel(&first), sel(&deletes)),
        format!("{}..{}", sel(&deletes), sel(&last)),
        format!("{}..", sel(&first)),
        "earliest..latest".to_string(),
    ]
}

#[test]
fn generated_windows_match_hudi_rs_and_merged_as_of() {
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mor =
        |v| TableSpec::new("gen_mor", TableType::MergeOnRead, v).partitioned_by(&["city"], true);
    let cow =
        |v| TableSpec::new("gen_cow", TableType::CopyOnWrite, v).partitioned_by(&["city"], true);
    let tables = [
        ("v6 mor commit time", mor(6)),
        (
            "v6 mor event time",
            mor(6).with_property(
                "hoodie.compaction.payload.class",
                "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
            ),
        ),
        ("v9 mor event time", mor(9)),
        ("v6 cow", cow(6)),
        ("v9 cow", cow(9)),
    ];
    let mut totals = BTreeMap::new();
    let mut notes = Vec::new();
    for (name, spec) in tables {
        // hudi-rs 0.5.0 filters a slice's base rows by commit time before it merges the logs
        // into them: a late log record that loses to the base row under event-time ordering
        // still comes out. Java merges first (SEMANTICS.md §10.9); merged/as_of is the check.
        let known = spec.event_time_ordering().then_some(
            "hudi-rs filters base rows by commit time before merging: late records that lose \
             under event-time ordering still appear",
        );
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let extra = if name.contains("mor") {
            build_generated(&root, spec)
        } else {
            build_generated_cow(&root, spec)
        };
        compare_windows(
            &py,
            name,
            &root,
            tmp.path(),
            &extra,
            &BTreeSet::new(),
            known,
            &mut totals,
            &mut notes,
        );
    }
    eprintln!("merged/incremental on generated tables: {totals:#?}");
    for n in &notes {
        eprintln!("  {n}");
    }
    assert!(
        !totals.contains_key("windows differing from hudi-rs")
            && !totals.contains_key("windows differing from merged/as_of filtered")
            && !totals.contains_key("hudi-rs errors")
            && !totals.contains_key("windows with a refused slice"),
        "merged/incremental/ differs: {notes:#?}"
    );
    assert!(
        totals
            .get("windows matching merged/as_of filtered")
            .copied()
            .unwrap_or(0)
            >= 40
    );
}

/// A copy-on-write table of the generator: inserts, two updates of the same keys, a write left
/// pending on v6 before a completed one (BLOCK), an insert overwrite. Returns windows of
/// several writes.
fn build_generated_cow(root: &Path, spec: TableSpec) -> Vec<String> {
    let v6 = spec.version == 6;
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    let fa = t.insert("city=a", &rows(1, 30)).unwrap();
    let fb = t.insert("city=b", &rows(2, 30)).unwrap();
    let first = t.complete().unwrap();
    for round in 0..2u64 {
        let mut t = w.begin(Action::Commit).unwrap();
        let ids: Vec<i64> = (1000..1010).collect();
        t.update("city=a", &fa, &rows_with_ids(100 + round, &ids))
            .unwrap();
        t.complete().unwrap();
    }
    if v6 {
        let mut t = w.begin(Action::Commit).unwrap();
        t.update("city=b", &fb, &rows_with_ids(650, &[2010]))
            .unwrap();
        t.abandon();
    }
    let mut t = w.begin(Action::Commit).unwrap();
    t.update("city=b", &fb, &rows_with_ids(660, &[2011]))
        .unwrap();
    let mid = t.complete().unwrap();
    let mut t = w.begin(Action::ReplaceCommit).unwrap();
    t.set_operation("INSERT_OVERWRITE").unwrap();
    t.replace_group("city=a", &fa).unwrap();
    t.insert("city=a", &rows(3, 10)).unwrap();
    t.complete().unwrap();
    let sel = |i: &str| {
        if v6 {
            i.to_string()
        } else {
            w.completed_writes()[i].clone()
        }
    };
    vec![
        format!("{}..{}", sel(&first), sel(&mid)),
        "earliest..latest".to_string(),
    ]
}
