//! The merged view against the fixture tables, through a real mount: every merge-on-read
//! fixture mounted, `merged/latest/` and `merged/as_of/<T>/` for every `as_of` time of its
//! expected answers read with pyarrow, the rows compared as multisets with hudi-rs 0.5.0's
//! `read()` of the same snapshot and, for `merged/latest/`, with Spark's gold data shipped in the
//! fixture zip. Slices hudifs cannot merge (Lance base files) must fail with EOPNOTSUPP and a
//! log line naming the reason; HFile log blocks (`table_hfile_log_block`) are merged and
//! compared like the rest.
//!
//! Python with pyarrow and `hudi==0.5.0`: `support::python`.

use crate::merge;
use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};
use support::MountGuard;

#[test]
fn merged_slices_match_hudi_rs_and_spark() {
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
        if fx.expected["table_type"] != "MERGE_ON_READ" {
            continue;
        }
        let as_of: Vec<String> = fx.expected["as_of"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, e)| e.is_array())
            .map(|(t, _)| t.clone())
            .collect();
        compare_table(&py, &fx.name, &fx.zip, Some(as_of), &mut totals, &mut notes);
    }
    eprintln!("merged-view fixture comparison: {totals:#?}");
    for n in &notes {
        eprintln!("  {n}");
    }
    let report = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/merge-fixtures.txt");
    let _ = std::fs::write(&report, format!("{totals:#?}\n{}\n", notes.join("\n")));
    // Refused: only the slices with Lance base files (EOPNOTSUPP, and the daemon said why).
    for n in &notes {
        if n.contains("refused") {
            assert!(
                n.contains("errno 95") && n.contains("base file format") && n.contains("lance"),
                "unexpected refusal: {n}"
            );
        }
    }
    assert!(
        !totals.contains_key("views differing from hudi-rs")
            && !totals.contains_key("views differing from spark")
            && !totals.contains_key("hudi-rs errors")
            && !totals.contains_key("spark errors"),
        "merged rows differ: {notes:#?}"
    );
    assert!(totals.get("views matching hudi-rs").copied().unwrap_or(0) >= 300);
    assert!(totals.get("views matching spark").copied().unwrap_or(0) >= 30);
}

/// Merge `latest` and every `as_of` time (the given ones, or every completed write of the
/// table) of one fixture zip and compare them; counts go to `totals`, findings to `notes`.
fn compare_table(
    py: &Path,
    name: &str,
    zip: &Path,
    as_of: Option<Vec<String>>,
    totals: &mut BTreeMap<&'static str, u64>,
    notes: &mut Vec<String>,
) {
    let tmp = tempfile::tempdir().unwrap();
    let root = support::unzip(zip, tmp.path());
    let gold = tmp.path().join("gold_data");
    let snap = support::snapshot(&root);
    let times = as_of.unwrap_or_else(|| {
        snap.timeline()
            .instants()
            .filter(|i| i.is_completed_write())
            .map(|i| i.requested.to_string())
            .collect()
    });
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
    // `hudifs ls --merged` names what merged/latest/ shows, from the same code.
    let ls = std::process::Command::new(hudifs_testkit::mount::binary("hudifs"))
        .args(["ls", "--merged"])
        .arg(&root)
        .output()
        .unwrap();
    let mut named: Vec<String> = String::from_utf8_lossy(&ls.stdout)
        .lines()
        .map(String::from)
        .collect();
    named.sort();
    let mut shown = support::walk_files(&m.path().join("merged/latest")).unwrap_or_default();
    shown.sort();
    assert_eq!(named, shown, "{name}: hudifs ls --merged vs merged/latest/");
    let mut views = vec![("latest".to_string(), None::<String>)];
    views.extend(times.into_iter().map(|t| (format!("as_of/{t}"), Some(t))));
    let req: Vec<Value> = views
        .iter()
        .map(|(label, as_of)| {
            let dir = m.path().join("merged").join(label);
            json!({"label": label, "as_of": as_of, "dir": dir})
        })
        .collect();
    let input = json!({"table": root, "gold": gold.is_dir().then_some(&gold), "views": req});
    let res: Value = merge::compare(py, &input);
    *totals.entry("tables").or_default() += 1;
    if let Some(e) = res.get("hudi_error") {
        notes.push(format!("{name}: hudi-rs cannot open the table: {e}"));
    }
    let log = m.log_text();
    for v in res["views"].as_array().unwrap() {
        *totals.entry("views").or_default() += 1;
        let label = v["label"].as_str().unwrap();
        if let Some(e) = v.get("read_error") {
            *totals.entry("views refused").or_default() += 1;
            // The daemon's one log line per refused slice says why.
            let why: Vec<&str> = log.lines().filter(|l| l.contains("refused")).collect();
            notes.push(format!(
                "{name} {label}: refused: errno {} ({}); daemon: {why:?}",
                e["errno"], e["error"]
            ));
            continue;
        }
        for (who, k) in [("hudi_rs", "hudi-rs"), ("spark", "spark")] {
            let hudi = who == "hudi_rs";
            let Some(c) = v.get(who) else {
                if let Some(e) = v.get(format!("{who}_error")) {
                    notes.push(format!("{name} {label}: {k} failed: {e}"));
                    *totals
                        .entry(if hudi {
                            "hudi-rs errors"
                        } else {
                            "spark errors"
                        })
                        .or_default() += 1;
                }
                continue;
            };
            let rows = c["rows"].as_u64().unwrap();
            if c["match"] == true {
                *totals
                    .entry(if hudi {
                        "views matching hudi-rs"
                    } else {
                        "views matching spark"
                    })
                    .or_default() += 1;
                *totals
                    .entry(if hudi {
                        "rows matching hudi-rs"
                    } else {
                        "rows matching spark"
                    })
                    .or_default() += rows;
            } else {
                *totals
                    .entry(if hudi {
                        "views differing from hudi-rs"
                    } else {
                        "views differing from spark"
                    })
                    .or_default() += 1;
                notes.push(format!(
                    "{name} {label}: differs from {k}: ours {} rows, theirs {}; extra {} missing {}",
                    rows, c["reference_rows"], c["extra"], c["missing"]
                ));
            }
        }
    }
}

/// The extra tables of the hudi 0.5.0 sdist that have no expected answers (table_event_time_stale,
/// table_partial_update_event_time, v9_mor_8i4u_commit_time, ...): with
/// `HUDIFS_MERGE_EXTRA_TABLES=DIR` (zips anywhere below DIR), each merge-on-read table's `latest`
/// and every completed write's `as_of` against hudi-rs. Findings are printed, not asserted:
/// hudi-rs is not the reference where it differs from Java.
#[test]
fn extra_tables_against_hudi_rs() {
    let Ok(dir) = std::env::var("HUDIFS_MERGE_EXTRA_TABLES") else {
        eprintln!("SKIP: HUDIFS_MERGE_EXTRA_TABLES not set");
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut zips = Vec::new();
    let mut stack = vec![std::path::PathBuf::from(dir)];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "zip") {
                zips.push(p);
            }
        }
    }
    zips.sort();
    let mut totals = BTreeMap::new();
    let mut notes = Vec::new();
    for z in zips {
        let tmp = tempfile::tempdir().unwrap();
        let root = support::unzip(&z, tmp.path());
        let props =
            std::fs::read_to_string(root.join(".hoodie/hoodie.properties")).unwrap_or_default();
        if !props.contains("MERGE_ON_READ") {
            continue;
        }
        let name = z.file_stem().unwrap().to_string_lossy().to_string();
        compare_table(&py, &name, &z, None, &mut totals, &mut notes);
    }
    eprintln!("extra tables: {totals:#?}");
    for n in &notes {
        eprintln!("  {n}");
    }
}
