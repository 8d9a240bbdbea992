//! A real client reads the mount: DuckDB and pyarrow (from PyPI, in a virtual environment this
//! test creates under target/) count the rows of the Parquet files under the mounted `latest/`
//! and every `as_of/<T>/` of each copy-on-write Parquet fixture, and must get the row counts
//! Spark got (the fixture's `gold_data/` where present, otherwise `reference/`).

use hudifs_testkit::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use support::MountGuard;

fn count_rows(py: &Path, dirs: &[PathBuf]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mount/readers.py");
    let arg = serde_json::to_string(&dirs.iter().map(|d| d.to_str().unwrap()).collect::<Vec<_>>())
        .unwrap();
    let out = Command::new(py).arg(script).arg(arg).output().unwrap();
    assert!(
        out.status.success(),
        "readers.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn duckdb_and_pyarrow_read_the_mount_with_sparks_row_counts() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    let mut checked = 0;
    let mut problems = Vec::new();
    for fx in support::fixtures(&dir) {
        let is_cow = fx.expected["table_type"] == "COPY_ON_WRITE";
        let parquet = fx.expected["latest"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.as_str().unwrap().ends_with(".parquet"));
        let Some(reference) = &fx.reference else {
            continue;
        };
        if !is_cow || !parquet || fx.name.contains("lance") {
            continue;
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = support::unzip(&fx.zip, tmp.path());
        let m = MountGuard::mount(&root, &[]);

        // (directory, expected rows, source of the expectation)
        let mut asks: Vec<(PathBuf, u64, String)> = Vec::new();
        let gold = root.parent().unwrap().join("gold_data");
        let latest_expected = if gold.is_dir() {
            let g = count_rows(&py, std::slice::from_ref(&gold));
            (
                g[gold.to_str().unwrap()]["duckdb"].as_u64().unwrap(),
                "spark gold_data",
            )
        } else {
            (
                reference["records"]["latest"].as_u64().unwrap(),
                "reference",
            )
        };
        asks.push((
            m.path().join("latest"),
            latest_expected.0,
            latest_expected.1.into(),
        ));
        for key in ["as_of", "as_of_minus_1ms"] {
            for (t, n) in reference["records"][key].as_object().unwrap() {
                asks.push((
                    m.path().join("as_of").join(t),
                    n.as_u64().unwrap(),
                    format!("reference {key}"),
                ));
            }
        }
        let dirs: Vec<PathBuf> = asks.iter().map(|a| a.0.clone()).collect();
        let counts = count_rows(&py, &dirs);
        for (d, want, source) in &asks {
            let got = &counts[d.to_str().unwrap()];
            checked += 1;
            for reader in ["duckdb", "pyarrow"] {
                if got[reader].as_u64() != Some(*want) {
                    problems.push(format!(
                        "{} {}: {reader} counted {} rows, {source} says {want}",
                        fx.name,
                        d.strip_prefix(m.path()).unwrap().display(),
                        got[reader]
                    ));
                }
            }
        }
    }
    eprintln!(
        "real client: {checked} views read with DuckDB and pyarrow, {} mismatches",
        problems.len()
    );
    assert!(checked >= 60, "too few views checked: {checked}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
