//! Shared by the merged-view tests: the merge of every slice of one view into a directory (in
//! process, for comparing the engine alone), and the comparison script (pyarrow reads the
//! merged files, hudi-rs reads the table; Python from `common::python`).
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

use hudifs_core::snapshot::Snapshot;
use hudifs_core::viewkey::ViewKey;
use hudifs_merge::{prepare, MergeConfig, MergeOptions, Plan};
use hudifs_storage::LocalStore;
use serde_json::Value;

/// Merge every slice of one view into `out`; `Err` names the refusal.
pub fn merge_view(
    root: &Path,
    snap: &Snapshot,
    key: &ViewKey,
    out: &Path,
) -> Result<usize, String> {
    let plan = snap.plan(key, false).map_err(|e| e.to_string())?;
    let view = snap.resolve(key, false).map_err(|e| e.to_string())?;
    let t = plan.t.as_ref().map(|t| t.to_string()).unwrap_or_default();
    let cfg = MergeConfig::from_properties(&snap.cfg.properties).map_err(|e| e.to_string())?;
    let store = LocalStore::new(root).map_err(|e| e.to_string())?;
    let vis = hudifs_merge::snapshot_visibility(snap.timeline(), &t);
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

/// Run tests/merge/compare.py on one request; its JSON answer.
pub fn compare(py: &Path, input: &Value) -> Value {
    run_script(py, "compare.py", input)
}

/// Run the script `name` of tests/merge/ with `input` as JSON on its stdin; its JSON answer.
pub fn run_script(py: &Path, name: &str, input: &Value) -> Value {
    use std::io::Write;
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/merge")
        .join(name);
    let mut child = Command::new(py)
        .arg(&script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{name} failed");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// How many merges the daemon ran, from its log (one `merged slice` line per cache miss).
pub fn merges_logged(log: &str) -> usize {
    log.lines().filter(|l| l.contains("merged slice ")).count()
}

/// The files in a merge cache directory (merged files, claims, temporaries), sorted.
pub fn cache_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The names in a directory, by readdir alone (no `stat` of the entries).
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

/// The errno of a failing `stat` and of a failing `open` of `path` (panics if either works).
pub fn refused_errno(path: &Path) -> (i32, i32) {
    let s = std::fs::metadata(path).map(|m| m.len());
    let o = std::fs::File::open(path).map(|_| ());
    let se = s
        .err()
        .unwrap_or_else(|| panic!("stat of {} worked", path.display()));
    let oe = o
        .err()
        .unwrap_or_else(|| panic!("open of {} worked", path.display()));
    (
        se.raw_os_error().unwrap_or(0),
        oe.raw_os_error().unwrap_or(0),
    )
}
