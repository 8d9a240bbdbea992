//! The fixture tables (the Hudi tables of Apache hudi-rs's test suite, from the `hudi` 0.5.0
//! sdist on PyPI, Apache License 2.0): where tests of every crate of the workspace find them.
//! A clone of the repository alone has them: `scripts/fetch-fixtures` fetches them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The workspace root, which is also the `hudifs` package's (this crate lives in
/// `crates/hudifs-testkit`).
pub fn workspace() -> PathBuf {
    let kit = Path::new(env!("CARGO_MANIFEST_DIR"));
    kit.parent()
        .and_then(Path::parent)
        .unwrap_or(kit)
        .to_path_buf()
}

/// The folder whose `tables/<path>.zip` are the fixture tables, or `None` (with the reason
/// printed) when they cannot be had. `HUDIFS_FIXTURES_DIR` names an unpacked copy; otherwise
/// `scripts/fetch-fixtures` fetches them into target/fixtures once (later calls, and other
/// test processes, find them there). With `HUDIFS_REQUIRE_FIXTURES=1` a failure to get them
/// fails the test instead.
pub fn dir() -> Option<PathBuf> {
    static DIR: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match DIR.get_or_init(locate_tables) {
        Ok(dir) => Some(dir.clone()),
        Err(msg) => {
            if std::env::var("HUDIFS_REQUIRE_FIXTURES").as_deref() == Ok("1") {
                panic!("{msg} (and HUDIFS_REQUIRE_FIXTURES=1)");
            }
            eprintln!("SKIP: {msg}");
            None
        }
    }
}

fn locate_tables() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("HUDIFS_FIXTURES_DIR") {
        let dir = PathBuf::from(dir);
        return if dir.join("tables").is_dir() {
            Ok(dir)
        } else {
            Err(format!(
                "HUDIFS_FIXTURES_DIR={} has no tables/ folder",
                dir.display()
            ))
        };
    }
    let manifest = workspace();
    let cache = manifest.join("target/fixtures");
    let out = std::process::Command::new("python3")
        .arg(manifest.join("scripts/fetch-fixtures"))
        .arg(&cache)
        .output()
        .map_err(|e| {
            format!("could not fetch the fixture tables from PyPI: cannot run python3: {e}")
        })?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() || !cache.join("tables").is_dir() {
        // The script's last line says why (network, hash); anything else is quoted whole.
        let last = stderr.trim().lines().last().unwrap_or_default();
        let why = match last.strip_prefix("fetch-fixtures: could not fetch") {
            Some(rest) => format!("could not fetch{rest}"),
            None => format!(
                "could not fetch the fixture tables from PyPI: scripts/fetch-fixtures failed \
                 ({}): {}",
                out.status,
                stderr.trim()
            ),
        };
        return Err(format!(
            "{why} [cache {}; HUDIFS_FIXTURES_DIR=DIR uses DIR/tables instead]",
            cache.display()
        ));
    }
    eprint!("{stderr}");
    Ok(cache)
}

/// Every `.zip` below `dir`, sorted.
pub fn zips(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for p in entries.flatten().map(|e| e.path()) {
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|e| e == "zip") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
