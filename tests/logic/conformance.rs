//! Conformance against the fixtures: every fixture table with expected answers, every view of
//! tests/fixtures/expected/<table>.json (latest, read-optimized, every as_of point including
//! refused ones, every incremental window), answered by `hudifs ls --json` (the binary) and by
//! the library directly, plus the facts of `model` through `hudifs timeline --json`.

use hudifs_testkit::support;

use std::process::Command;

use serde_json::Value;
use support::{check_fixture, Answer, Ask};

fn hudifs(args: &[&str]) -> (bool, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_hudifs"))
        .args(args)
        .output()
        .expect("run hudifs");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.success(), v, stderr)
}

fn ls_answer(root: &str, ask: &Ask) -> Answer {
    let mut args = vec!["ls", root, "--json"];
    let opt;
    match ask {
        Ask::Latest {
            read_optimized: true,
        } => args.push("--read-optimized"),
        Ask::Latest { .. } => {}
        Ask::AsOf(t) => {
            opt = t.clone();
            args.extend(["--as-of", &opt]);
        }
        Ask::Window(w) => {
            opt = w.clone();
            args.extend(["--incremental", &opt]);
        }
    }
    let (ok, v, stderr) = hudifs(&args);
    if !ok {
        return Answer::Refused(stderr);
    }
    let files = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    let strs = |x: &Value| {
        x.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
    };
    Answer::Files {
        files,
        selected: strs(&v["selected"]),
        effective_end: v["effective_end"].as_str().map(str::to_string),
    }
}

#[test]
fn every_fixture_through_hudifs_ls() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    let fixtures = support::fixtures(&dir);
    assert!(
        fixtures.len() >= 60,
        "expected the 61 fixture tables, found {}",
        fixtures.len()
    );
    let mut total = 0;
    let mut problems = Vec::new();
    for fx in &fixtures {
        let tmp = tempfile::tempdir().unwrap();
        let root = support::unzip(&fx.zip, tmp.path());
        let root_s = root.to_str().unwrap().to_string();
        let (n, p) = check_fixture(&fx.name, &fx.expected, |ask| ls_answer(&root_s, ask));
        total += n;
        problems.extend(p);

        // The facts the views rest on.
        let (ok, tl, stderr) = hudifs(&["timeline", &root_s, "--json"]);
        assert!(ok, "{}: hudifs timeline failed: {stderr}", fx.name);
        for (k, exp) in fx.expected["model"].as_object().unwrap() {
            total += 1;
            if &tl["model"][k] != exp {
                problems.push(format!(
                    "{} model.{k}: expected {exp}, got {}",
                    fx.name, tl["model"][k]
                ));
            }
        }
        assert_eq!(
            tl["table_version"], fx.expected["table_version"],
            "{}",
            fx.name
        );
        assert_eq!(tl["table_type"], fx.expected["table_type"], "{}", fx.name);
    }
    eprintln!(
        "conformance: {} fixtures, {total} views and facts checked, {} mismatches",
        fixtures.len(),
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Resolving only some file groups of a partition (what `delta/` does for the groups a write
/// touched) chooses in them exactly what resolving the whole partition chooses: on every
/// fixture, every `as_of/` view and every partition, each group alone and all groups at once.
#[test]
fn a_partition_resolves_group_by_group_as_a_whole() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    let interner = hudifs_core::rules::InstantInterner::default();
    let mut checked = 0;
    for fx in support::fixtures(&dir) {
        let tmp = tempfile::tempdir().unwrap();
        let root = support::unzip(&fx.zip, tmp.path());
        let snap = support::snapshot(&root);
        let keys = snap
            .timeline()
            .completed
            .keys()
            .map(|t| hudifs_core::viewkey::ViewKey::AsOf(t.clone()))
            .chain([hudifs_core::viewkey::ViewKey::Latest]);
        for key in keys {
            let Ok(plan) = snap.plan(&key, false) else {
                continue;
            };
            for p in snap.partitions.iter() {
                let files = snap.list_partition(p).unwrap();
                let whole = snap.resolve_partition(&plan, &files, &interner);
                let chosen =
                    |c: &hudifs_core::rules::PartitionChoice| -> Vec<(u32, String, String)> {
                        c.files
                            .iter()
                            .map(|f| {
                                let w = c.writer(f).map(|w| w.to_string()).unwrap_or_default();
                                (f.index, w, c.slice(f).to_string())
                            })
                            .collect()
                    };
                let fids: std::collections::BTreeSet<&str> =
                    files.iter().map(|f| f.file_id()).collect();
                let all = snap.resolve_groups(&plan, &files, &fids, &interner);
                assert_eq!(chosen(&all), chosen(&whole), "{} {key:?} {p}", fx.name);
                let mut by_one = Vec::new();
                for fid in &fids {
                    let one = snap.resolve_groups(&plan, &files, &[*fid].into(), &interner);
                    by_one.extend(chosen(&one));
                }
                by_one.sort();
                assert_eq!(by_one, chosen(&whole), "{} {key:?} {p}", fx.name);
                checked += 1;
            }
        }
    }
    eprintln!("{checked} partitions of views resolved group by group as a whole");
    assert!(checked > 500, "only {checked} partitions checked");
}
