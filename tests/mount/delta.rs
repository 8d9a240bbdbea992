//! `delta/` against the fixture tables, through a real mount: every fixture mounted, every
//! version of `delta/_delta_log/` read with delta-rs (`deltalake`, from PyPI), and its rows
//! compared as multisets with hudi-rs 0.5.0's `read()` as of the version's instant and with the
//! files of `as_of/<instant>/` (copy-on-write) or `merged/as_of/<instant>/` (merge-on-read).
//! Each version's commitInfo must name its instant, no column may be all-NULL where the view's
//! files have values, and tables hudifs cannot give as Delta (Lance base files, archived
//! history) must be refused with EOPNOTSUPP, never read short. The change data feed of every
//! version (`load_cdf`) must be the change records of its write in `cdc/`.

use crate::merge;
use hudifs_testkit::support;

use std::collections::BTreeMap;

use serde_json::{json, Value};
use support::MountGuard;

#[test]
fn every_version_of_every_fixture_reads_as_hudi_reads_it() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut totals: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut problems_refused = Vec::new();
    for fx in support::fixtures(&dir) {
        let (_tmp, root, m) = mount_fixture(&fx.zip);
        let mor = fx.expected["table_type"] == "MERGE_ON_READ";
        *totals.entry("tables").or_default() += 1;
        let delta = m.path().join("delta");
        // The versions, in order: the table's completed writes (from its timeline, read apart
        // from the mount).
        let instants: Vec<String> = support::snapshot(&root)
            .timeline()
            .completed
            .keys()
            .map(|t| t.to_string())
            .collect();
        let log = match std::fs::read_dir(delta.join("_delta_log")) {
            Ok(d) => {
                let mut v: Vec<String> = d
                    .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
                    .collect();
                v.sort();
                v
            }
            Err(e) => {
                assert_eq!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP),
                    "{}: delta/_delta_log: {e}",
                    fx.name
                );
                assert!(
                    m.log_text().contains("delta/"),
                    "{}: no reason logged",
                    fx.name
                );
                *totals.entry("tables refused").or_default() += 1;
                continue;
            }
        };
        let mut want: Vec<String> = (0..instants.len())
            .map(|n| format!("{n:020}.json"))
            .collect();
        // A checkpoint every tenth version, as Delta writers make them.
        let checkpoints: Vec<String> = (1..instants.len())
            .filter(|n| n % 10 == 0)
            .map(|n| format!("{n:020}.checkpoint.parquet"))
            .collect();
        if !checkpoints.is_empty() {
            *totals.entry("tables with checkpoints").or_default() += 1;
            want.extend(checkpoints);
            want.push("_last_checkpoint".into());
        }
        want.sort();
        assert_eq!(log, want, "{}: one version per completed write", fx.name);
        // delta/ lists the data directory of every version the log has (all of them here,
        // unless a version is refused, and then none after it), and `_change_data`.
        let mut dirs: Vec<String> = std::fs::read_dir(&delta)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n != "_delta_log" && n != "_change_data")
            .collect();
        dirs.sort();
        assert!(
            instants.starts_with(&dirs),
            "{}: delta/ lists {dirs:?}",
            fx.name
        );
        // Time-based key generators write the partition field with different types in different
        // commits (int64, then string): Delta readers cast every file to the version's schema,
        // so those columns are compared as strings.
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
        let views: Vec<Value> = instants
            .iter()
            .enumerate()
            .map(|(n, t)| {
                let files = if mor {
                    m.path().join("merged/as_of").join(t)
                } else {
                    m.path().join("as_of").join(t)
                };
                json!({"label": format!("version {n}"), "as_of": t, "dir": null,
                       "delta": {"root": delta, "version": n}, "same_as_dir": files,
                       "stringify": stringify})
            })
            .collect();
        // The newest version read with polars' read_delta as well.
        let mut views = views;
        if let Some(last) = views.last().cloned() {
            let mut v = last;
            v["label"] = json!(format!("{} (polars)", v["label"].as_str().unwrap_or("")));
            v["delta"]["reader"] = json!("polars");
            views.push(v);
        }
        let res = merge::compare(&py, &json!({"table": root, "gold": null, "views": views}));
        for (i, v) in res["views"].as_array().unwrap().iter().enumerate() {
            // The last view is the newest version again, read with polars.
            let polars = i >= instants.len();
            let n = i.min(instants.len() - 1);
            let label = format!(
                "{} version {n} ({}){}",
                fx.name,
                instants[n],
                if polars { " with polars" } else { "" }
            );
            *totals
                .entry(if polars {
                    "versions read with polars"
                } else {
                    "versions"
                })
                .or_default() += 1;
            if let Some(e) = v.get("read_error") {
                // polars does not cast a file's column to the version's type where the table's
                // own files disagree on it (time-based key generators, SEMANTICS §11.2): it
                // fails, as it says, and reads nothing wrong.
                let mismatch = e["error"]
                    .as_str()
                    .is_some_and(|s| s.contains("data type mismatch"));
                if polars && mismatch && !stringify.is_empty() {
                    *totals
                        .entry("polars: mixed column types refused")
                        .or_default() += 1;
                    continue;
                }
                // Refused: the read fails (delta-rs does not always pass the errno on) and the
                // daemon said which version it refused and why.
                let said = m.log_text().lines().any(|l| {
                    l.contains("delta/: version")
                        && l.contains("refused")
                        && l.contains("not supported")
                });
                assert!(said, "{label}: failed without a refusal: {e}");
                problems_refused.push(format!("{label}: {}", e["error"]));
                *totals.entry("versions refused").or_default() += 1;
                continue;
            }
            assert_eq!(v["delta_instant"], instants[n], "{label}: commitInfo");
            let same = &v["same_as_dir"];
            if same["match"] != true || !same["all_null"].as_array().unwrap().is_empty() {
                problems.push(format!("{label}: differs from its view's files: {same}"));
            }
            match v.get("hudi_rs") {
                Some(c) if c["match"] == true => {
                    *totals.entry("versions matching hudi-rs").or_default() += 1
                }
                Some(c) => problems.push(format!("{label}: differs from hudi-rs: {c}")),
                None => {
                    *totals.entry("hudi-rs cannot read").or_default() += 1;
                }
            }
        }
    }
    eprintln!("delta/ fixture comparison: {totals:#?}");
    for r in &problems_refused {
        eprintln!("  refused: {r}");
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(
        totals
            .get("versions matching hudi-rs")
            .copied()
            .unwrap_or(0)
            >= 100,
        "{totals:#?}"
    );
}

/// DuckDB 1.5.5's `delta_scan` (the delta extension from its PyPI wheel) on the newest version
/// of every fixture: the same row count and the same multiset of record keys as `read_parquet`
/// of the files of `latest/` (copy-on-write) or `merged/latest/` (merge-on-read), and no column
/// all-NULL where those files have values.
#[test]
fn duckdb_delta_scan_reads_every_fixture_as_its_files() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let mut compared = 0;
    for fx in support::fixtures(&dir) {
        let (_tmp, _root, m) = mount_fixture(&fx.zip);
        let mor = fx.expected["table_type"] == "MERGE_ON_READ";
        let latest = m.path().join(if mor { "merged/latest" } else { "latest" });
        let files = support::walk_files(&latest).unwrap_or_default();
        // An empty table has no Delta version; a refused one (Lance base files) fails to
        // read, as the test above checks.
        let log = m.path().join("delta/_delta_log");
        let newest = std::fs::read_dir(&log)
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).max())
            .ok()
            .flatten();
        if files.is_empty() || newest.is_none_or(|v| std::fs::read(v).is_err()) {
            continue;
        }
        let scan = format!("delta_scan('{}')", m.path().join("delta").display());
        let r = merge::duckdb_scan(support::DUCKDB_DELTA_LOAD, &scan, &latest);
        assert!(r.get("error").is_none(), "{}: {r}", fx.name);
        assert_eq!(r["scan"], r["files"], "{}", fx.name);
        assert_eq!(r["all_null"], json!([]), "{}", fx.name);
        compared += 1;
    }
    assert!(compared >= 40, "{compared} tables compared");
}

/// The change data feed of every fixture, through a real mount: delta-rs's `load_cdf` of each
/// version alone gives, as a multiset of (change type, record key, data columns), exactly the
/// change records of the window of `cdc/` that selects the version's write, read with pyarrow
/// (`tests/mount/merge/delta_cdf_compare.py`): `insert` the after image of an `i`,
/// `update_preimage` and `update_postimage` the images of a `u`, `delete` the before image of a
/// `d`; a compaction or clustering none. Where one side cannot be read (a refused window, a
/// table without meta fields) neither can the other, and a write whose window a pending write
/// cuts short fails to read rather than reading empty: records are never lost silently.
#[test]
fn load_cdf_of_every_version_is_the_change_feed_of_its_write() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    let mut problems = Vec::new();
    for fx in support::fixtures(&dir) {
        let (_tmp, _root, m) = mount_fixture(&fx.zip);
        let delta = m.path().join("delta");
        let Ok(log) = std::fs::read_dir(delta.join("_delta_log")) else {
            *totals.entry("tables refused".into()).or_default() += 1;
            continue;
        };
        let versions: Vec<u64> = log
            .filter_map(|e| {
                let name = e.ok()?.file_name().to_string_lossy().to_string();
                name.strip_suffix(".json")?.parse().ok()
            })
            .collect();
        if versions.is_empty() {
            continue;
        }
        *totals.entry("tables".into()).or_default() += 1;
        let req = json!({"delta": delta, "cdc": m.path().join("cdc"), "versions": versions});
        let res = merge::run_script(&py, "delta_cdf_compare.py", &req);
        for a in res.as_array().unwrap() {
            let label = format!("{} version {}", fx.name, a["version"]);
            let count = |k: &str, totals: &mut BTreeMap<String, u64>| {
                *totals.entry(k.to_string()).or_default() += 1
            };
            if a.get("log_error").is_some() {
                count("versions refused", &mut totals);
                continue;
            }
            match (a.get("delta_error"), a.get("hudi_error")) {
                (Some(_), Some(_)) => count("versions without a change feed", &mut totals),
                // The write's window is cut short before it by a pending write: its change
                // data is refused until that write completes or is rolled back.
                (Some(_), None) if a["cut"] == true => count("versions cut short", &mut totals),
                (Some(e), None) => problems.push(format!("{label}: load_cdf failed: {e}")),
                (None, Some(e)) => {
                    problems.push(format!("{label}: load_cdf read what cdc/ refuses: {e}"))
                }
                (None, None) if a["match"] == true => {
                    count("versions matching cdc/", &mut totals);
                    for (k, n) in a["kinds"].as_object().unwrap() {
                        *totals.entry(format!("rows {k}")).or_default() += n.as_u64().unwrap();
                    }
                }
                (None, None) => problems.push(format!("{label}: differs from cdc/: {a}")),
            }
        }
    }
    eprintln!("delta/ change data feed comparison: {totals:#?}");
    assert!(problems.is_empty(), "{problems:#?}");
    for k in ["rows insert", "rows update_preimage", "rows delete"] {
        assert!(totals.get(k).copied().unwrap_or(0) > 0, "{k}: {totals:#?}");
    }
    assert!(
        totals.get("versions matching cdc/").copied().unwrap_or(0) >= 100,
        "{totals:#?}"
    );
}

/// A fixture zip unpacked in a temporary directory and mounted with a merge cache there and
/// `delta/`'s change data feed: the directory (removed when dropped, after the mount), the
/// table root and the mount.
fn mount_fixture(zip: &std::path::Path) -> (tempfile::TempDir, std::path::PathBuf, MountGuard) {
    let tmp = tempfile::tempdir().unwrap();
    let root = support::unzip(zip, tmp.path());
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(
        &root,
        &[
            "--merge-cache",
            cache.to_str().unwrap(),
            "--delta-change-data",
        ],
    );
    (tmp, root, m)
}

/// A table with cleaned and archived history (`build_cleaned_and_archived`) through a real
/// mount: delta-rs reads the newest version from its checkpoint and the log after it, rows equal
/// to `latest/`'s files; the first version the cleaner kept reads as `as_of/` of its instant;
/// a version the cleaner removed is not there; DuckDB's `delta_scan` agrees.
#[test]
fn a_cleaned_and_archived_table_reads_from_its_checkpoints() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let commits = hudifs_testkit::generator::build_cleaned_and_archived(&root).unwrap();
    let m = MountGuard::mount(&root, &[]);
    let delta = m.path().join("delta");
    let py = support::python();
    let mut views = vec![json!({"label": "newest", "as_of": commits[11], "dir": null,
        "delta": {"root": delta, "version": 11}, "same_as_dir": m.path().join("latest")})];
    views.push(
        json!({"label": "first kept", "as_of": commits[5], "dir": null,
        "delta": {"root": delta, "version": 5},
        "same_as_dir": m.path().join("as_of").join(&commits[5])}),
    );
    views.push(json!({"label": "cleaned", "as_of": commits[4], "dir": null,
        "delta": {"root": delta, "version": 4}}));
    let res = merge::compare(&py, &json!({"table": root, "gold": null, "views": views}));
    let v = res["views"].as_array().unwrap();
    for (i, n) in [(0, 11), (1, 5)] {
        assert!(v[i].get("read_error").is_none(), "{}", v[i]);
        assert_eq!(v[i]["delta_instant"], commits[n]);
        assert_eq!(v[i]["same_as_dir"]["match"], true, "{}", v[i]);
        assert_eq!(v[i]["same_as_dir"]["rows"], 20, "{}", v[i]);
        assert_eq!(v[i]["hudi_rs"]["match"], true, "{}", v[i]);
    }
    assert!(
        v[2].get("read_error").is_some(),
        "version 4 was cleaned: {}",
        v[2]
    );
    let scan = format!("delta_scan('{}')", delta.display());
    assert_eq!(support::duckdb_count(support::DUCKDB_DELTA_LOAD, &scan), 20);
}

/// A remount with the same merge cache takes `delta/`'s log back from what the first mount
/// saved (SEMANTICS §11.5): every log file the same bytes, the checkpoint too, and delta-rs
/// and DuckDB read the newest version as before; `iceberg/`, which the first mount read and
/// the remount builds ahead, gives the same metadata files.
#[test]
fn a_remount_takes_the_saved_log_back() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let commits = hudifs_testkit::generator::build_cleaned_and_archived(&root).unwrap();
    let cache = tmp.path().join("merge-cache");
    // Both mounts' `iceberg/` name their files under one prefix.
    let args = [
        "--merge-cache",
        cache.to_str().unwrap(),
        "--iceberg-prefix",
        "/lake/t",
    ];
    let read_dir = |m: &MountGuard, dir: &str| -> BTreeMap<String, Vec<u8>> {
        let dir = m.path().join(dir);
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                let n = e.unwrap().file_name().to_string_lossy().to_string();
                let bytes = std::fs::read(dir.join(&n)).unwrap();
                (n, bytes)
            })
            .collect()
    };
    let read_log = |m: &MountGuard| read_dir(m, "delta/_delta_log");
    let mut first = MountGuard::mount(&root, &args);
    let built = read_log(&first);
    let iceberg = read_dir(&first, "iceberg/metadata");
    assert!(iceberg.contains_key("version-hint.text"));
    assert!(built.contains_key("00000000000000000010.checkpoint.parquet"));
    assert!(!first.log_text().contains("taken from the saved log"));
    first.unmount();
    let saved: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("side-delta-"))
        .collect();
    assert_eq!(
        saved.len(),
        3,
        "the log, its newest checkpoint, iceberg/'s current manifests: {saved:?}"
    );
    let again = MountGuard::mount(&root, &args);
    assert_eq!(read_log(&again), built);
    assert_eq!(read_dir(&again, "iceberg/metadata"), iceberg);
    let log = again.log_text();
    assert!(
        log.contains("7 of 7 versions taken from the saved log"),
        "{log}"
    );
    assert!(
        !log.contains("is not used"),
        "the saved log and checkpoint: {log}"
    );
    assert!(!log.contains("not built ahead"), "{log}");
    // The current manifest list and the manifests it names, saved by the first mount.
    assert!(
        log.contains("files taken from the saved manifests"),
        "{log}"
    );
    let delta = again.path().join("delta");
    let py = support::python();
    let views = vec![json!({"label": "newest", "as_of": commits[11], "dir": null,
        "delta": {"root": delta, "version": 11}, "same_as_dir": again.path().join("latest")})];
    let res = merge::compare(&py, &json!({"table": root, "gold": null, "views": views}));
    let v = &res["views"][0];
    assert!(v.get("read_error").is_none(), "{v}");
    assert_eq!(v["same_as_dir"]["match"], true, "{v}");
    let scan = format!("delta_scan('{}')", delta.display());
    assert_eq!(support::duckdb_count(support::DUCKDB_DELTA_LOAD, &scan), 20);
}
