//! Tables another writer wrote: hudi-rs 0.6.0-rc.1 (the crate `hudi`), through a real mount,
//! against that writer's own reads (issue 34).
//!
//! `tools/hudi-rs-oracle` wrote each table of `tests/fixtures/hudi-rs-0.6/` with hudi-rs's
//! writer (copy-on-write and merge-on-read, versions 8 and 9: upserts into logs, deletes by
//! predicate and by key, a stale update under event-time ordering, commit-time ordering, a
//! compaction and updates after it, a partial update, `_hoodie_is_deleted`, a custom delete
//! marker under `hoodie.record.merge.property.`) and then read every view of it back with
//! hudi-rs's reader: `latest`, `as_of` every completed instant, every incremental window
//! between consecutive completions and the whole history. Each zip holds the table and those
//! answers (Parquet, one file per view, and `views.json`).
//!
//! Every view is read here with pyarrow from `merged/<view>/` and, on copy-on-write tables,
//! from the plain `latest/` and `as_of/<T>/` too, and the rows are compared as multisets with
//! hudi-rs's answer. `HUDIFS_HUDI_RS_TABLES=DIR` runs the same on the fresh output of
//! `hudi-rs-oracle write DIR` instead (what `scripts/hudi-rs-oracle` does).
//!
//! `commits_show_in_latest_within_the_freshness_goal` needs the oracle program itself
//! (`HUDIFS_HUDI_RS_ORACLE=path`) and `fixtures_equal_hudi_rs_0_6` its reads of the fixtures
//! (`HUDIFS_HUDI_RS_FIXTURE_ANSWERS=DIR`): `scripts/hudi-rs-oracle`, the last stage of
//! `scripts/test` (so of CI), builds the program and sets both.

use crate::merge;
use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use support::MountGuard;

/// Where hudi-rs 0.6 departs from Java Hudi, and why. Such a view must still equal Java's
/// answer (the check against `merged/as_of/<L>/` below) and differ from hudi-rs only there.
const HUDI_RS_DEPARTS: &str = "hudi-rs's incremental read of a merge-on-read table merges only \
    the log records of the window's writes, so an update that lost to a greater ordering value \
    (a stale upsert) comes out as if it had won; Java's incremental query merges the file slice \
    as of the query instant and then keeps the records whose commit time is in the window \
    (HoodieFileGroupReaderBasedParquetFileFormat with the incremental file index's commit-time \
    filters), as merged/incremental/ does (SEMANTICS §10.9)";

/// What the comparisons of one run found: counts, differences that fail the test, and the
/// views where hudi-rs departs from Java ([`HUDI_RS_DEPARTS`]).
#[derive(Default)]
struct Findings {
    totals: BTreeMap<&'static str, u64>,
    notes: Vec<String>,
    departures: Vec<String>,
}

impl Findings {
    fn print(&self, what: &str, why: &str) {
        eprintln!("{what}: {:#?}", self.totals);
        for n in &self.notes {
            eprintln!("  {n}");
        }
        eprintln!("hudi-rs departs from Java ({why}):");
        for d in &self.departures {
            eprintln!("  {d}");
        }
    }
}

/// Mount `t` and compare every view its answers name with hudi-rs's read: `merged/<view>/`, and
/// on copy-on-write `<view>/` too; each incremental window also against Java's definition
/// (`merged/as_of/<L>/` filtered). `stale`: the completion times of stale upserts (a window
/// ending there may show [`HUDI_RS_DEPARTS`]); `known`: a departure of hudi-rs on this table's
/// windows already known from 0.5.0 (`merged_incremental::HUDI_RS_DIFFERS`). Either way the
/// window must equal Java's definition. `refusable`: a slice may be refused (EOPNOTSUPP, a Lance
/// base file) where hudi-rs reads it.
fn compare_views(
    py: &std::path::Path,
    tmp: &std::path::Path,
    t: &support::WrittenTable,
    stale: &[String],
    known: Option<&str>,
    refusable: bool,
    f: &mut Findings,
) {
    let (name, root, answers) = (&t.name, &t.root, &t.answers);
    let doc = t.doc("views.json");
    let cow = doc["table_type"] == "COPY_ON_WRITE";
    let cache = tmp.join(format!("{}.cache", name.replace('/', "_")));
    let m = MountGuard::mount(root, &["--merge-cache", cache.to_str().unwrap()]);
    let mut req = Vec::new();
    for v in doc["views"].as_array().unwrap() {
        let label = v["label"].as_str().unwrap();
        let Some(file) = v["file"].as_str() else {
            f.notes.push(format!(
                "{name} {label}: hudi-rs gave no answer: {}",
                v["error"]
            ));
            continue;
        };
        let reference = answers.join(file);
        let mut dirs = vec![("merged", m.path().join("merged").join(label))];
        if cow && !label.starts_with("incremental/") {
            dirs.push(("plain", m.path().join(label)));
        }
        for (how, dir) in dirs {
            let mut r = json!({"label": format!("{how} {label}"), "as_of": v["as_of"],
                "dir": dir, "same_as_file": reference});
            if let Some(w) = label.strip_prefix("incremental/") {
                // Java's answer: merged/as_of/<L>/ (L the newest write the window selects)
                // kept to the records whose commit time is one of its writes.
                let times = support::xattr(&m.path().join(label), "user.hudi.commit_times")
                    .unwrap_or_default();
                let keep: Vec<&str> = times.split(',').filter(|t| !t.is_empty()).collect();
                let l = keep.iter().max().copied().unwrap_or("latest");
                r["oracle"] = json!({"dir": m.path().join("merged/as_of").join(l),
                    "keep": keep});
                r["departs"] =
                    json!(known.is_some() || stale.iter().any(|t| w.ends_with(&format!("..{t}"))));
            }
            req.push(r);
        }
    }
    let res = merge::compare(py, &json!({"table": null, "views": req}));
    for (v, asked) in res["views"].as_array().unwrap().iter().zip(&req) {
        let label = v["label"].as_str().unwrap();
        *f.totals.entry("views").or_default() += 1;
        if let Some(e) = v.get("read_error").or(v.get("same_as_dir_error")) {
            if refusable && e["errno"] == 95 {
                *f.totals.entry("views refused (a Lance slice)").or_default() += 1;
                continue;
            }
            *f.totals.entry("views failing").or_default() += 1;
            f.notes.push(format!("{name} {label}: {e}"));
            continue;
        }
        if let Some(o) = asked.get("oracle") {
            if v["oracle"]["match"] == true {
                *f.totals
                    .entry("windows equal to Java's definition")
                    .or_default() += 1;
            } else if !(refusable && v["oracle"]["skipped"].as_u64().unwrap_or(0) > 0) {
                f.notes.push(format!(
                    "{name} {label}: differs from merged/as_of filtered ({}): {} / {}",
                    o["dir"],
                    v["oracle"],
                    v.get("oracle_error").unwrap_or(&Value::Null)
                ));
            }
        }
        let c = &v["same_as_dir"];
        if c["match"] == true {
            *f.totals.entry("views equal to hudi-rs").or_default() += 1;
            *f.totals.entry("rows equal to hudi-rs").or_default() += c["rows"].as_u64().unwrap();
            if !c["all_null"].as_array().unwrap().is_empty() {
                f.notes.push(format!(
                    "{name} {label}: all-NULL columns {}",
                    c["all_null"]
                ));
            }
        } else {
            let line = format!(
                "{name} {label}: ours {} rows, hudi-rs {}; extra {} missing {} ({})",
                c["rows"], c["reference_rows"], c["extra"], c["missing"], c["column_names"]
            );
            if asked["departs"] == true && v["oracle"]["match"] == true {
                *f.totals
                    .entry("views where hudi-rs departs from Java")
                    .or_default() += 1;
                f.departures.push(line);
            } else {
                *f.totals.entry("views differing from hudi-rs").or_default() += 1;
                f.notes.push(line);
            }
        }
    }
}

#[test]
fn every_view_equals_hudi_rs_own_read() {
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let tmp = tempfile::tempdir().unwrap();
    let tables = support::hudi_rs_tables(tmp.path());
    assert!(tables.len() >= 9, "the hudi-rs tables: {tables:?}");
    let mut f = Findings::default();
    for t in &tables {
        // The windows that end at a stale upsert's completion, on event-time merge-on-read
        // tables (elsewhere the stale row wins, and hudi-rs agrees).
        let steps = t.doc("steps.json");
        let props = std::fs::read_to_string(t.root.join(".hoodie/hoodie.properties")).unwrap();
        let event_time_mor = t.doc("views.json")["table_type"] == "MERGE_ON_READ"
            && props
                .lines()
                .any(|l| l == "hoodie.record.merge.mode=EVENT_TIME_ORDERING");
        let stale: Vec<String> = steps["steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| event_time_mor && s["step"] == "stale upsert")
            .map(|s| s["completion"].as_str().unwrap().to_string())
            .collect();
        compare_views(&py, tmp.path(), t, &stale, None, false, &mut f);
    }
    f.print("hudi-rs 0.6 tables", HUDI_RS_DEPARTS);
    assert!(
        f.notes.is_empty(),
        "views differ from hudi-rs 0.6: {:#?}",
        f.notes
    );
    assert!(f.totals["views equal to hudi-rs"] >= 150, "{:#?}", f.totals);
    assert!(
        f.totals["windows equal to Java's definition"] >= 70,
        "{:#?}",
        f.totals
    );
    // The departure shows on each event-time merge-on-read table that has a stale upsert.
    assert_eq!(f.departures.len(), 2, "{:#?}", f.departures);
}

/// The Spark-written merge-on-read fixtures read by hudi-rs 0.6 (`hudi-rs-oracle read`, run by
/// `scripts/hudi-rs-oracle` into `HUDIFS_HUDI_RS_FIXTURE_ANSWERS=DIR`: `DIR/<name>/` the
/// table, `DIR/<name>.answers/` its reads, `<name>` the fixture's path): every view equal, or
/// a window of a known departure that equals Java's definition, or a slice hudifs refuses (Lance
/// base files, which hudi-rs 0.6 reads).
#[test]
fn fixtures_equal_hudi_rs_0_6() {
    let Ok(dir) = std::env::var("HUDIFS_HUDI_RS_FIXTURE_ANSWERS") else {
        eprintln!("SKIP: HUDIFS_HUDI_RS_FIXTURE_ANSWERS not set (scripts/hudi-rs-oracle sets it)");
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let tmp = tempfile::tempdir().unwrap();
    let tables = support::written_tables_in(std::path::Path::new(&dir));
    let mut f = Findings::default();
    for t in &tables {
        let known = crate::merged_incremental::HUDI_RS_DIFFERS
            .iter()
            .find(|(n, _)| *n == t.name)
            .map(|(_, why)| *why);
        compare_views(&py, tmp.path(), t, &[], known, true, &mut f);
    }
    let known: Vec<String> = crate::merged_incremental::HUDI_RS_DIFFERS
        .iter()
        .map(|(n, why)| format!("{n}: {why}"))
        .collect();
    f.print("fixtures against hudi-rs 0.6", &known.join("; "));
    assert!(
        f.notes.is_empty(),
        "views differ from hudi-rs 0.6: {:#?}",
        f.notes
    );
    assert!(tables.len() >= 39, "{} tables", tables.len());
    assert!(f.totals["views equal to hudi-rs"] >= 320, "{:#?}", f.totals);
}

/// The oracle's writer commits while the table is mounted: each commit must show in
/// `latest/`'s `user.hudi.instant` within the freshness goal (100 ms, SEMANTICS §6) after the
/// write returned. hudi-rs puts every timeline file in place by renaming `<name>#1`.
#[test]
fn commits_show_in_latest_within_the_freshness_goal() {
    let Ok(oracle) = std::env::var("HUDIFS_HUDI_RS_ORACLE") else {
        eprintln!("SKIP: HUDIFS_HUDI_RS_ORACLE not set (scripts/hudi-rs-oracle sets it)");
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let table = tmp.path().join("commit_loop");
    // The first run creates the table and its first commit, so the mount has a table.
    let first = std::process::Command::new(&oracle)
        .args(["commit-loop", table.to_str().unwrap(), "0", "0"])
        .output()
        .unwrap();
    assert!(first.status.success(), "{first:?}");
    let m = MountGuard::mount(&table, &[]);
    let latest = m.path().join("latest");
    let mut child = Writer(
        std::process::Command::new(&oracle)
            .args(["commit-loop", table.to_str().unwrap(), "10", "300"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let out = std::io::BufReader::new(child.0.stdout.take().unwrap());
    let mut lags = Vec::new();
    for line in std::io::BufRead::lines(out) {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        let want = v["requested"].as_str().unwrap().to_string();
        // The lag counts from the moment the write returned, as the writer's clock saw it.
        let returned = v["returned_unix_ms"].as_u64().unwrap();
        let since = || Duration::from_millis(unix_ms().saturating_sub(returned));
        loop {
            if support::xattr(&latest, "user.hudi.instant").as_deref() == Some(want.as_str()) {
                lags.push(since());
                break;
            }
            assert!(
                since() < Duration::from_secs(5),
                "latest/ did not move to {want} within 5 s"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    assert!(child.0.wait().unwrap().success());
    lags.sort();
    eprintln!("hudi-rs commits to latest/: {lags:?}");
    assert_eq!(lags.len(), 10);
    assert!(
        lags[lags.len() - 1] <= Duration::from_millis(100),
        "slowest commit to latest/: {:?}",
        lags[lags.len() - 1]
    );
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The writer's process, killed if the test fails before it ends.
struct Writer(std::process::Child);

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
