//! The merged view on tables written by the project's generator (real Parquet base files, Hudi
//! log files, timelines), for the shapes the fixtures lack: v6 logs of several deltacommits per
//! slice, an abandoned deltacommit rolled back with a command block, a pending compaction whose
//! slice gets logs named after it, inserts that went to new groups, on table versions 6 and 9.
//! Every slice of `latest` and of every `as_of` write is merged, and the rows are compared
//! with hudi-rs 0.5.0's `read()` of the same snapshot and, for `latest`, with the generator's
//! own model of the committed rows.

mod common;
#[path = "merge/support.rs"]
mod support;

use std::path::Path;

use hudifs_core::instant_time::InstantTime;
use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_core::viewkey::ViewKey;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};
use serde_json::json;

/// The table, and the deltacommit that wrote a log into the pending compaction's slice.
fn build(root: &Path, version: u32) -> (TableWriter, String) {
    let spec =
        TableSpec::new("gen_mor", TableType::MergeOnRead, version).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let mut groups = Vec::new();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    for (i, city) in ["city=a", "city=b"].iter().enumerate() {
        let f = t.insert(city, &rows(i as u64 + 1, 50)).unwrap();
        groups.push((city.to_string(), f));
    }
    t.complete().unwrap();
    // Two updating deltacommits: two logs per slice (v6: one slice instant, versions 1 and 2).
    for round in 0..2u64 {
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        for (i, (p, f)) in groups.iter().enumerate() {
            let base = (i as i64 + 1) * 1000;
            let ids: Vec<i64> = (0..10).map(|k| base + k * 3 + round as i64).collect();
            t.update(p, f, &rows_with_ids(100 + round * 10 + i as u64, &ids))
                .unwrap();
        }
        t.complete().unwrap();
    }
    // A deltacommit that fails and is rolled back (v6: a rollback command block).
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let (p, f) = &groups[0];
    t.update(p, f, &rows_with_ids(900, &[1000, 1001, 1002]))
        .unwrap();
    let failed = t.abandon();
    w.rollback(&failed).unwrap();
    // A compaction scheduled but not run: the next update's log joins its slice.
    let c = w.schedule_compaction(&[(p.clone(), f.clone())]).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update(p, f, &rows_with_ids(700, &[1004, 1005, 5000]))
        .unwrap();
    let after = t.complete().unwrap();
    assert!(after > c);
    (w, after)
}

fn check(version: u32) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let (w, after_compaction) = build(&root, version);
    let snap = common::snapshot(&root);
    let mut views = vec![("latest".to_string(), None::<String>, ViewKey::Latest)];
    for t in w.completed_writes().keys() {
        views.push((
            format!("as_of/{t}"),
            Some(t.clone()),
            ViewKey::AsOf(InstantTime::parse(t).unwrap()),
        ));
    }
    let mut req = Vec::new();
    let mut latest_dir = None;
    for (label, as_of, key) in &views {
        let out = tmp.path().join("merged").join(label.replace('/', "_"));
        std::fs::create_dir_all(&out).unwrap();
        support::merge_view(&root, &snap, key, &out).unwrap_or_else(|e| panic!("{label}: {e}"));
        if as_of.is_none() {
            latest_dir = Some(out.clone());
        }
        req.push(json!({"label": label, "as_of": as_of, "dir": out}));
    }
    let py = common::python();
    let res = support::compare(&py, &json!({"table": root, "gold": null, "views": req}));
    let mut bad = Vec::new();
    for v in res["views"].as_array().unwrap() {
        let c = &v["hudi_rs"];
        let label = v["label"].as_str().unwrap();
        let at = label
            .strip_prefix("as_of/")
            .unwrap_or(after_compaction.as_str());
        if version == 6 && at >= after_compaction.as_str() {
            // hudi-rs 0.5.0 does not read the log a v6 writer names after a pending compaction
            // (its slice is merged into the previous one, SEMANTICS §3.3, as Java does): it
            // misses exactly that write's rows. The generator's model below is the check.
            assert_eq!(c["rows"].as_u64(), Some(101), "{label}: {c}");
            assert_eq!(c["reference_rows"].as_u64(), Some(100), "{label}: {c}");
            continue;
        }
        if c["match"] != true {
            bad.push(format!("{label}: {c}"));
        }
    }
    assert!(
        bad.is_empty(),
        "v{version}: merged rows differ from hudi-rs:\n{}",
        bad.join("\n")
    );
    // Latest against the generator's own model: same keys, same values.
    let mut expected: Vec<(i64, String)> = Vec::new();
    for (p, f) in w.file_groups() {
        for r in w.group_rows(&p, &f).unwrap_or_default() {
            expected.push((r.id, r.name));
        }
    }
    expected.sort();
    let script = "import sys,glob,pyarrow.parquet as pq\nrows=[]\nfor f in glob.glob(sys.argv[1]+'/**/*.parquet',recursive=True):\n t=pq.read_table(f,columns=['id','name'])\n rows+=list(zip(t.column('id').to_pylist(),t.column('name').to_pylist()))\nfor r in sorted(rows): print(r[0],r[1])\n";
    let out = std::process::Command::new(&py)
        .args(["-c", script])
        .arg(latest_dir.unwrap())
        .output()
        .unwrap();
    assert!(out.status.success());
    let got: Vec<(i64, String)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (a, b) = l.split_once(' ').unwrap();
            (a.parse().unwrap(), b.to_string())
        })
        .collect();
    if version == 6 {
        // Commit-time ordering: the generator's model (latest write wins) is the answer.
        assert_eq!(got, expected);
    } else {
        assert_eq!(got.len(), expected.len());
    }
}

#[test]
fn generated_v6_tables_merge_like_hudi_rs() {
    check(6);
}

#[test]
fn generated_v9_tables_merge_like_hudi_rs() {
    check(9);
}
