//! Tables upgraded from Hudi 0.x through a real mount: the test kit writes a version-6 history,
//! upgrades it exactly as Java's 6→8 (and 8→9) upgrade handlers leave it, and writes on
//! (`hudifs_testkit::generator::build_upgraded`). Through the mount, `latest/` and every
//! `as_of/<T>` show the files the writer's model says (pre-upgrade logs named after their base
//! instant shown only from the write that wrote them, the failed pre-upgrade write's log
//! nowhere), and `merged/latest/` and every `merged/as_of/<T>/` hold the model's rows, read with
//! pyarrow (tests/mount/merge/compare.py).

use crate::merge;
use hudifs_testkit::support;

use std::path::Path;

use hudifs_core::table::TableType;
use hudifs_testkit::generator::build_upgraded;
use serde_json::{json, Value};
use support::MountGuard;

/// Every file below `dir`, relative to it, sorted.
fn files_below(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
                out.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

fn check(table_type: TableType, version: u32, payload: Option<&str>) -> usize {
    let name = format!("{table_type:?} v{version} {payload:?}");
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let u = build_upgraded(&root, table_type, version, payload).unwrap();
    let w = &u.writer;
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
    let mut views = vec![("latest".to_string(), None::<String>)];
    views.extend(
        w.completed_writes()
            .keys()
            .map(|t| (format!("as_of/{t}"), Some(t.clone()))),
    );
    let mut bad = Vec::new();
    for (label, t) in &views {
        let got = files_below(&m.path().join(label));
        let mut want: Vec<String> = w
            .expected_view(t.as_deref())
            .into_iter()
            .map(|f| f.path)
            .collect();
        want.sort();
        if got != want {
            bad.push(format!("{label}: {got:?}\n  model {want:?}"));
        }
    }
    let req: Vec<Value> = views
        .iter()
        .map(|(label, as_of)| {
            let at = as_of.clone().unwrap_or_else(|| "99999999999999999".into());
            let model: Option<Vec<Value>> = u.models.range(..=at).next_back().map(|(_, rows)| {
                rows.iter()
                    .map(|r| json!({"id": r.id, "name": r.name, "value": r.value, "ts": r.ts}))
                    .collect()
            });
            json!({"label": label, "as_of": as_of,
                   "dir": m.path().join("merged").join(label), "model": model})
        })
        .collect();
    let res = merge::compare(
        &support::python(),
        &json!({"table": root, "gold": null, "views": req}),
    );
    let mut rows = 0;
    for v in res["views"].as_array().unwrap() {
        let label = v["label"].as_str().unwrap();
        match v.get("model") {
            Some(mc) if mc["match"] == true => rows += mc["rows"].as_u64().unwrap() as usize,
            other => bad.push(format!("merged/{label}: {other:?}")),
        }
    }
    assert!(bad.is_empty(), "{name}:\n{}", bad.join("\n"));
    assert!(
        !m.log_text().contains("refused"),
        "{name}: {}",
        m.log_text()
    );
    assert!(rows > 500, "{name}: {rows} rows compared");
    views.len()
}

#[test]
fn upgraded_tables_show_the_models_files_and_rows() {
    let mut views = 0;
    views += check(TableType::MergeOnRead, 8, None);
    views += check(TableType::MergeOnRead, 9, None);
    views += check(
        TableType::MergeOnRead,
        9,
        Some("org.apache.hudi.common.model.DefaultHoodieRecordPayload"),
    );
    views += check(TableType::CopyOnWrite, 9, None);
    println!("upgraded tables: {views} views, plain and merged, equal to the model");
}
