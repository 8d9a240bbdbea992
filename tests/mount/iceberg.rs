//! `iceberg/` against the fixture tables, through a real mount: every fixture mounted, every
//! snapshot of its current metadata read with pyiceberg's `StaticTable` (from PyPI), the
//! current one with polars' `scan_iceberg` too, and their rows compared as multisets with
//! hudi-rs 0.5.0's `read()` as of the snapshot's instant and with the files of `as_of/<instant>/`
//! (copy-on-write) or `merged/as_of/<instant>/` (merge-on-read). Every completed write is a
//! snapshot naming its instant, no column may be all-NULL where the view's files have values,
//! tables hudifs cannot give (Lance base files) are refused with EOPNOTSUPP, and nothing is
//! written to the table.

use crate::merge;
use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{json, Value};
use support::MountGuard;

/// Every file of the table directory with its size and modification time.
fn table_state(root: &Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let md = e.metadata().unwrap();
            if md.is_dir() {
                stack.push(e.path());
            } else {
                out.push((
                    e.path().display().to_string(),
                    md.len(),
                    md.modified().unwrap(),
                ));
            }
        }
    }
    out.sort();
    out
}

/// The current metadata file of `iceberg/` (`version-hint.text` names it).
fn current_metadata(iceberg: &Path) -> std::io::Result<std::path::PathBuf> {
    let hint = std::fs::read_to_string(iceberg.join("metadata/version-hint.text"))?;
    Ok(iceberg.join(format!("metadata/v{}.metadata.json", hint.trim())))
}

#[test]
fn every_snapshot_of_every_fixture_reads_as_hudi_reads_it() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut totals: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut problems = Vec::new();
    for fx in support::fixtures(&dir) {
        let (_tmp, root, m) = mount_fixture(&fx.zip);
        let before = table_state(&root);
        let mor = fx.expected["table_type"] == "MERGE_ON_READ";
        *totals.entry("tables").or_default() += 1;
        let iceberg = m.path().join("iceberg");
        let instants: Vec<String> = support::snapshot(&root)
            .timeline()
            .completed
            .keys()
            .map(|t| t.to_string())
            .collect();
        if instants.is_empty() {
            let names = std::fs::read_dir(iceberg.join("metadata")).unwrap().count();
            assert_eq!(names, 0, "{}: an empty table has no metadata", fx.name);
            continue;
        }
        let meta_path = current_metadata(&iceberg).unwrap();
        assert_eq!(
            meta_path.file_name().unwrap().to_string_lossy(),
            format!("v{}.metadata.json", instants.len()),
            "{}: the current metadata is the newest write's",
            fx.name
        );
        let meta: Value = match std::fs::read(&meta_path) {
            Ok(b) => serde_json::from_slice(&b).unwrap(),
            Err(e) => {
                assert_eq!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP),
                    "{}: {}: {e}",
                    fx.name,
                    meta_path.display()
                );
                assert!(
                    m.log_text().contains("refused"),
                    "{}: no reason logged",
                    fx.name
                );
                *totals.entry("tables refused").or_default() += 1;
                continue;
            }
        };
        let snaps = meta["snapshots"].as_array().unwrap();
        let named: Vec<&str> = snaps
            .iter()
            .map(|s| s["summary"]["hudi.instant"].as_str().unwrap())
            .collect();
        assert_eq!(
            named, instants,
            "{}: one snapshot per completed write",
            fx.name
        );
        assert_eq!(
            meta["current-snapshot-id"],
            snaps.last().unwrap()["snapshot-id"]
        );
        let props =
            std::fs::read_to_string(root.join(".hoodie/hoodie.properties")).unwrap_or_default();
        let stringify: Vec<String> = props
            .lines()
            .find_map(|l| l.strip_prefix("hoodie.table.partition.fields="))
            .map(|v| {
                v.split(',')
                    .map(|f| f.split(':').next().unwrap_or(f).to_string())
                    .collect()
            })
            .unwrap_or_default();
        let mut views: Vec<Value> = Vec::new();
        for (n, (s, t)) in snaps.iter().zip(&instants).enumerate() {
            let files = if mor {
                m.path().join("merged/as_of").join(t)
            } else {
                m.path().join("as_of").join(t)
            };
            let spec = json!({"metadata": meta_path, "snapshot_id": s["snapshot-id"]});
            views.push(
                json!({"label": format!("snapshot {n}"), "as_of": t, "dir": null,
                   "iceberg": spec, "same_as_dir": files, "stringify": stringify}),
            );
            if n + 1 == snaps.len() {
                let mut spec = spec.clone();
                spec["reader"] = json!("polars");
                views.push(
                    json!({"label": format!("snapshot {n} (polars)"), "as_of": t,
                       "dir": null, "iceberg": spec, "same_as_dir": files,
                       "stringify": stringify}),
                );
            }
        }
        let res = merge::compare(&py, &json!({"table": root, "gold": null, "views": views}));
        for v in res["views"].as_array().unwrap() {
            let label = format!("{} {}", fx.name, v["label"].as_str().unwrap());
            *totals.entry("snapshots read").or_default() += 1;
            if let Some(e) = v.get("read_error") {
                problems.push(format!("{label}: read failed: {e}"));
                continue;
            }
            let same = &v["same_as_dir"];
            if same["match"] != true || !same["all_null"].as_array().unwrap().is_empty() {
                problems.push(format!("{label}: differs from its view's files: {same}"));
            }
            match v.get("hudi_rs") {
                Some(c) if c["match"] == true => {
                    *totals.entry("snapshots matching hudi-rs").or_default() += 1
                }
                Some(c) => problems.push(format!("{label}: differs from hudi-rs: {c}")),
                None => *totals.entry("hudi-rs cannot read").or_default() += 1,
            }
        }
        assert_eq!(table_state(&root), before, "{}: the table changed", fx.name);
    }
    eprintln!("iceberg/ fixture comparison: {totals:#?}");
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        totals
            .get("snapshots matching hudi-rs")
            .copied()
            .unwrap_or(0)
            >= 100,
        "{totals:#?}"
    );
}

/// DuckDB 1.5.5's `iceberg_scan` (the iceberg and avro extensions from their PyPI wheels) on
/// the current snapshot of every fixture: the same row count and multiset of record keys as
/// `read_parquet` of the files of `latest/` or `merged/latest/`, and no all-NULL column where
/// those files have values — except list columns in Parquet's two-level layout (Hudi's Avro
/// writer's), which DuckDB 1.5's Iceberg column mapping reads as NULL (duckdb-iceberg #903;
/// pyiceberg and polars read them, as the test above checks).
#[test]
fn duckdb_iceberg_scan_reads_every_fixture_as_its_files() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let mut compared = 0;
    let mut lists = 0;
    for fx in support::fixtures(&dir) {
        let (_tmp, _root, m) = mount_fixture(&fx.zip);
        let mor = fx.expected["table_type"] == "MERGE_ON_READ";
        let latest = m.path().join(if mor { "merged/latest" } else { "latest" });
        let files = support::walk_files(&latest).unwrap_or_default();
        let iceberg = m.path().join("iceberg");
        let Ok(meta) = current_metadata(&iceberg) else {
            continue;
        };
        // A refused table (Lance base files) fails to read, as the test above checks.
        if files.is_empty() || std::fs::read(&meta).is_err() {
            continue;
        }
        let scan = format!("iceberg_scan('{}')", meta.display());
        let r = merge::duckdb_scan(support::DUCKDB_ICEBERG_LOAD, &scan, &latest);
        assert!(r.get("error").is_none(), "{}: {r}", fx.name);
        assert_eq!(r["scan"], r["files"], "{}", fx.name);
        for t in r["all_null_types"].as_array().unwrap() {
            assert!(
                t.as_str().unwrap().ends_with("[]"),
                "{}: an all-NULL column that is not a list: {r}",
                fx.name
            );
            lists += 1;
        }
        compared += 1;
    }
    eprintln!("iceberg_scan: {compared} tables compared, {lists} two-level list columns NULL");
    assert!(compared >= 40, "{compared} tables compared");
}

/// A fixture zip unpacked in a temporary directory and mounted with a merge cache there.
fn mount_fixture(zip: &Path) -> (tempfile::TempDir, std::path::PathBuf, MountGuard) {
    let tmp = tempfile::tempdir().unwrap();
    let root = support::unzip(zip, tmp.path());
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
    (tmp, root, m)
}

/// A table with cleaned and archived history, mounted with `--iceberg-prefix` naming a path
/// that leads to the mount another way (a symbolic link, as a container's mount would): the
/// metadata names files under the prefix; pyiceberg reads the current snapshot and the first
/// one the cleaner kept through it, rows equal to `latest/` and `as_of/`; no snapshot is left
/// of cleaned history; DuckDB agrees.
#[test]
fn a_cleaned_table_reads_through_another_prefix() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let commits = hudifs_testkit::generator::build_cleaned_and_archived(&root).unwrap();
    let elsewhere = tmp.path().join("seen-elsewhere");
    let m = MountGuard::mount(&root, &["--iceberg-prefix", elsewhere.to_str().unwrap()]);
    std::os::unix::fs::symlink(m.path(), &elsewhere).unwrap();
    let meta_path = current_metadata(&elsewhere.join("iceberg")).unwrap();
    let meta: Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    assert_eq!(meta["location"], format!("{}/iceberg", elsewhere.display()));
    let snaps = meta["snapshots"].as_array().unwrap();
    let named: Vec<&str> = snaps
        .iter()
        .map(|s| s["summary"]["hudi.instant"].as_str().unwrap())
        .collect();
    assert_eq!(
        named,
        commits[5..].to_vec(),
        "snapshots from the first kept write"
    );
    let py = support::python();
    let views = vec![
        json!({"label": "newest", "as_of": commits[11], "dir": null,
            "iceberg": {"metadata": meta_path, "snapshot_id": snaps[6]["snapshot-id"]},
            "same_as_dir": m.path().join("latest")}),
        json!({"label": "first kept", "as_of": commits[5], "dir": null,
            "iceberg": {"metadata": meta_path, "snapshot_id": snaps[0]["snapshot-id"]},
            "same_as_dir": m.path().join("as_of").join(&commits[5])}),
    ];
    let res = merge::compare(&py, &json!({"table": root, "gold": null, "views": views}));
    for (v, n) in res["views"].as_array().unwrap().iter().zip([11, 5]) {
        assert!(v.get("read_error").is_none(), "{v}");
        assert_eq!(v["iceberg_instant"], commits[n], "{v}");
        assert_eq!(v["same_as_dir"]["match"], true, "{v}");
        assert_eq!(v["same_as_dir"]["rows"], 20, "{v}");
        assert!(
            v["same_as_dir"]["all_null"].as_array().unwrap().is_empty(),
            "{v}"
        );
        assert_eq!(v["hudi_rs"]["match"], true, "{v}");
    }
    let scan = format!("iceberg_scan('{}')", meta_path.display());
    assert_eq!(
        support::duckdb_count(support::DUCKDB_ICEBERG_LOAD, &scan),
        20
    );
    drop(m);
}
