//! `delta/` against the fixture tables, through a real mount: every fixture mounted, every
//! version of `delta/_delta_log/` read with delta-rs (`deltalake`, from PyPI), and its rows
//! compared as multisets with hudi-rs 0.5.0's `read()` as of the version's instant and with the
//! files of `as_of/<instant>/` (copy-on-write) or `merged/as_of/<instant>/` (merge-on-read).
//! Each version's commitInfo must name its instant, no column may be all-NULL where the view's
//! files have values, and tables hudifs cannot give as Delta (Lance base files, archived
//! history) must be refused with EOPNOTSUPP, never read short.

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
        let tmp = tempfile::tempdir().unwrap();
        let root = support::unzip(&fx.zip, tmp.path());
        let cache = tmp.path().join("merge-cache");
        let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
        let mor = fx.expected["table_type"] == "MERGE_ON_READ";
        *totals.entry("tables").or_default() += 1;
        let delta = m.path().join("delta");
        // The version directories, in version order: the completed writes.
        let mut instants: Vec<String> = std::fs::read_dir(&delta)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .filter(|n| n != "_delta_log")
            .collect();
        instants.sort();
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
        let want: Vec<String> = (0..instants.len())
            .map(|n| format!("{n:020}.json"))
            .collect();
        assert_eq!(log, want, "{}: one version per completed write", fx.name);
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
        let res = merge::compare(&py, &json!({"table": root, "gold": null, "views": views}));
        for (n, v) in res["views"].as_array().unwrap().iter().enumerate() {
            let label = format!("{} version {n} ({})", fx.name, instants[n]);
            *totals.entry("versions").or_default() += 1;
            if let Some(e) = v.get("read_error") {
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
