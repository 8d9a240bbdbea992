//! The merged view against the fixture tables: every merge-on-read fixture, `latest` and every
//! `as_of` time of its expected answers, every slice merged by hudifs-merge, the rows read
//! back with pyarrow and compared as multisets with hudi-rs 0.5.0's `read()` of the same
//! snapshot and, for `latest`, with Spark's gold data shipped in the fixture zip.
//!
//! Python with pyarrow and `hudi==0.5.0` (hudi-rs): `HUDIFS_MERGE_PYTHON`, else a venv in
//! target/pyenv-merge, created and filled from PyPI on first use.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use hudifs_core::fsview::{self, ViewKey};
use hudifs_core::snapshot::TableSnapshot;
use hudifs_merge::{prepare, MergeConfig, MergeOptions, Plan};
use hudifs_storage::LocalStore;
use serde_json::{json, Value};

fn python() -> PathBuf {
    if let Ok(p) = std::env::var("HUDIFS_MERGE_PYTHON") {
        return PathBuf::from(p);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pyenv-merge");
    let py = venv.join("bin/python");
    let ok = |py: &Path| {
        Command::new(py)
            .args([
                "-c",
                "import pyarrow, hudi; assert hudi.__version__ == '0.5.0'",
            ])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ok(&py) {
        let st = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .expect("python3 -m venv");
        assert!(st.success(), "could not create {}", venv.display());
        let st = Command::new(&py)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(["hudi==0.5.0", "pyarrow"])
            .status()
            .expect("pip install");
        assert!(st.success(), "pip install hudi==0.5.0 pyarrow failed");
    }
    assert!(
        ok(&py),
        "{} cannot import pyarrow and hudi 0.5.0",
        py.display()
    );
    py
}

/// Merge every slice of one view into `out`; `Err` names the refusal.
fn merge_view(
    root: &Path,
    snap: &TableSnapshot,
    key: &ViewKey,
    out: &Path,
) -> Result<usize, String> {
    let ctx = snap.context();
    let plan = fsview::plan(&ctx, key, false).map_err(|e| e.to_string())?;
    let view = fsview::resolve(&ctx, &snap.listing, key, false).map_err(|e| e.to_string())?;
    let t = plan.t.clone().unwrap_or_default();
    let cfg = MergeConfig::from_properties(&snap.cfg.properties).map_err(|e| e.to_string())?;
    let store = LocalStore::new(root).map_err(|e| e.to_string())?;
    let vis = hudifs_merge::snapshot_visibility(&ctx.timeline, &t);
    let opts = MergeOptions::default();
    let mut n = 0;
    for vs in hudifs_merge::slices_of_view(&view.files) {
        let dir = out.join(&vs.slice.partition);
        std::fs::create_dir_all(&dir).unwrap();
        let dest = dir.join(vs.file_name());
        let copy_base = |vs: &hudifs_merge::ViewSlice| {
            let b = vs.slice.base.as_ref().unwrap();
            std::fs::copy(root.join(b.path.as_str()), &dest).unwrap();
        };
        if !vs.slice.needs_merge() {
            copy_base(&vs);
        } else {
            let p = prepare(&store, &cfg, &vs.slice, &vis, &opts).map_err(|e| e.to_string())?;
            if p.plan() == Plan::BaseUnchanged {
                copy_base(&vs);
            } else {
                let f = std::fs::File::create(&dest).unwrap();
                p.write_to(std::io::BufWriter::new(f))
                    .map_err(|e| e.to_string())?;
            }
        }
        n += 1;
    }
    Ok(n)
}

#[test]
fn merged_slices_match_hudi_rs_and_spark() {
    let Some(dir) = common::fixtures_dir() else {
        return;
    };
    let py = python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/merge/compare.py");
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
        let mut child = Command::new(&py)
            .arg(&script)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "compare.py failed for {}", fx.name);
        let res: Value = serde_json::from_slice(&out.stdout).unwrap();
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
}
