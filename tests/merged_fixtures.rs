//! The merged view against the fixture tables: every merge-on-read fixture, `latest` and every
//! `as_of` time of its expected answers, every slice merged by hudifs-merge, the rows read
//! back with pyarrow and compared as multisets with hudi-rs 0.5.0's `read()` of the same
//! snapshot and, for `latest`, with Spark's gold data shipped in the fixture zip.
//!
//! Python with pyarrow and `hudi==0.5.0`: see `tests/merge/support.rs`.

mod common;
#[path = "merge/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::path::Path;

use hudifs_core::fsview::ViewKey;
use hudifs_core::snapshot::TableSnapshot;
use serde_json::{json, Value};
use support::{merge_view, python};

#[test]
fn merged_slices_match_hudi_rs_and_spark() {
    let Some(dir) = common::fixtures_dir() else {
        return;
    };
    let py = python();
    let mut totals: BTreeMap<&str, u64> = BTreeMap::new();
    let mut notes = Vec::new();
    for fx in common::fixtures(&dir) {
        if fx.expected["table_type"] != "MERGE_ON_READ" {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = common::unzip(&fx.zip, tmp.path());
        let gold = tmp.path().join("gold_data");
        let snap = TableSnapshot::open(&root).unwrap();
        let mut views = vec![("latest".to_string(), None::<String>, ViewKey::Latest)];
        for (t, exp) in fx.expected["as_of"].as_object().unwrap() {
            if exp.is_array() {
                views.push((
                    format!("as_of/{t}"),
                    Some(t.clone()),
                    ViewKey::AsOf(t.clone()),
                ));
            }
        }
        let mut req = Vec::new();
        for (label, as_of, key) in &views {
            let out = tmp.path().join("merged").join(label.replace('/', "_"));
            std::fs::create_dir_all(&out).unwrap();
            let r = merge_view(&root, &snap, key, &out);
            if let Err(e) = &r {
                *totals.entry("views refused").or_default() += 1;
                notes.push(format!("{} {label}: refused: {e}", fx.name));
            }
            req.push(json!({"label": label, "as_of": as_of, "dir": out,
                "refused": r.as_ref().err()}));
        }
        let input = json!({"table": root, "gold": gold.is_dir().then_some(&gold), "views": req});
        let res: Value = support::compare(&py, &input);
        *totals.entry("tables").or_default() += 1;
        if let Some(e) = res.get("hudi_error") {
            notes.push(format!("{}: hudi-rs cannot open the table: {e}", fx.name));
        }
        for v in res["views"].as_array().unwrap() {
            *totals.entry("views").or_default() += 1;
            let label = v["label"].as_str().unwrap();
            for (who, k) in [("hudi_rs", "hudi-rs"), ("spark", "spark")] {
                let Some(c) = v.get(who) else {
                    if let Some(e) = v.get(format!("{who}_error")) {
                        notes.push(format!("{} {label}: {k} failed: {e}", fx.name));
                        *totals
                            .entry(if who == "hudi_rs" {
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
                        .entry(if who == "hudi_rs" {
                            "views matching hudi-rs"
                        } else {
                            "views matching spark"
                        })
                        .or_default() += 1;
                    *totals
                        .entry(if who == "hudi_rs" {
                            "rows matching hudi-rs"
                        } else {
                            "rows matching spark"
                        })
                        .or_default() += rows;
                } else {
                    *totals
                        .entry(if who == "hudi_rs" {
                            "views differing from hudi-rs"
                        } else {
                            "views differing from spark"
                        })
                        .or_default() += 1;
                    notes.push(format!(
                        "{} {label}: differs from {k}: ours {} rows, theirs {}; extra {} missing {}",
                        fx.name, rows, c["reference_rows"], c["extra"], c["missing"]
                    ));
                }
            }
        }
    }
    eprintln!("merged-view fixture comparison: {totals:#?}");
    for n in &notes {
        eprintln!("  {n}");
    }
    let report = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/merge-fixtures.txt");
    let _ = std::fs::write(&report, format!("{totals:#?}\n{}\n", notes.join("\n")));
    // Refused: only the slices with Lance base files and HFile log blocks (EOPNOTSUPP).
    for n in &notes {
        if n.contains("refused") {
            assert!(
                n.contains("base file format \"lance\"") || n.contains("an HFile data block"),
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
