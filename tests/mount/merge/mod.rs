//! Shared by the merged-view and change-feed tests of this binary: the comparison scripts
//! (pyarrow reads the merged files, hudi-rs reads the table; Python from `support::python`) and
//! what a mount's merged/ tree and log show.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Run tests/mount/merge/compare.py on one request; its JSON answer.
pub fn compare(py: &Path, input: &Value) -> Value {
    run_script(py, "compare.py", input)
}

/// Run the script `name` of tests/mount/merge/ with `input` as JSON on its stdin; its JSON answer.
pub fn run_script(py: &Path, name: &str, input: &Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/mount/merge")
        .join(name);
    run_python(py, &[script.as_os_str()], name, input)
}

/// DuckDB 1.5.5 (`support::python_duckdb_delta`) with the extensions `load` loads: `scan` (a
/// table-format scan, `delta_scan('…')`, `iceberg_scan('…')`) against `read_parquet` of the
/// Parquet files under `files`: counts, record keys and all-NULL columns (`duckdb_scan.py`).
pub fn duckdb_scan(load: &str, scan: &str, files: &Path) -> Value {
    let req = serde_json::json!({"load": load, "tables": [{
        "scan": scan, "files": files.join("**/*.parquet")}]});
    let res = run_script(
        &hudifs_testkit::support::python_duckdb_delta(),
        "duckdb_scan.py",
        &req,
    );
    res[0].clone()
}

fn run_python(py: &Path, args: &[&std::ffi::OsStr], what: &str, input: &Value) -> Value {
    use std::io::Write;
    let mut child = Command::new(py)
        .args(args)
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
    assert!(out.status.success(), "{what} failed");
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
