//! A real Azure Blob Storage server for tests, on 127.0.0.1 only: [`Azurite`] runs Microsoft's
//! emulator (npm `azurite`, [`VERSION`], installed from the npm registry by [`install`] into a
//! folder the caller chooses, once) over a temporary data folder and makes the container;
//! [`upload`] copies a local table tree to an `az://` URL through the storage seam. The
//! emulator's well-known account and key ([`ACCOUNT`], [`KEY`]) are published by Microsoft.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::server::{request, upload_with, wait_for_port, ServerProcess};

pub use hudifs_objstore::azure::{EMULATOR_ACCOUNT as ACCOUNT, EMULATOR_KEY as KEY};

/// The Azurite release the tests run.
pub const VERSION: &str = "3.37.0";

/// The container [`Azurite::start`] makes.
pub const CONTAINER: &str = "lake";

/// The variables that give the emulator's key to this process and the daemons it starts (the
/// account is named by the endpoint's path, as Azurite's blob endpoint does).
pub const KEYS: [(&str, &str); 1] = [("AZURE_STORAGE_ACCOUNT_KEY", KEY)];

/// Set [`KEYS`] in this process's environment (inherited by the programs it starts).
pub fn set_keys() {
    for (k, v) in KEYS {
        std::env::set_var(k, v);
    }
}

/// The blob server program of an install in `dir`.
fn blob_server(dir: &Path) -> PathBuf {
    dir.join("node_modules/.bin/azurite-blob")
}

/// The version installed in `dir`, if any.
fn installed_version(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("node_modules/azurite/package.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["version"].as_str().map(str::to_string)
}

/// Whether a program answers `--version`.
fn runs(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Why Azurite cannot be installed here, when node or npm is missing.
pub fn tools_missing() -> Option<String> {
    (!runs("node") || !runs("npm")).then(|| {
        "Azurite needs node and npm, and they are not installed (apt-get install nodejs npm)"
            .to_string()
    })
}

/// Azurite [`VERSION`] in `dir` (e.g. `target/azurite`), installed with `npm install` from the
/// npm registry when it is not there yet (into a fresh folder renamed into place when complete,
/// so an interrupted install is done again); the blob server's program. `Err` says why when it
/// cannot be had (node or npm missing, npm failing).
pub fn install(dir: &Path) -> Result<PathBuf, String> {
    if let Some(why) = tools_missing() {
        return Err(why);
    }
    if installed_version(dir).as_deref() == Some(VERSION) && blob_server(dir).is_file() {
        return Ok(blob_server(dir));
    }
    let staging = dir.with_extension(format!("installing-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).map_err(|e| format!("{}: {e}", staging.display()))?;
    let t0 = std::time::Instant::now();
    let out = Command::new("npm")
        .args([
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
            "--prefix",
        ])
        .arg(&staging)
        .arg(format!("azurite@{VERSION}"))
        .output()
        .map_err(|e| format!("npm install azurite@{VERSION}: {e}"))?;
    if !out.status.success() || installed_version(&staging).as_deref() != Some(VERSION) {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(format!(
            "npm install azurite@{VERSION} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&staging, dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    eprintln!(
        "installed azurite@{VERSION} into {} in {:.1} s",
        dir.display(),
        t0.elapsed().as_secs_f64()
    );
    Ok(blob_server(dir))
}

/// An Azurite blob server on a loopback port it chose, over a temporary data folder; killed
/// on drop.
pub struct Azurite {
    _process: ServerProcess,
    _data: tempfile::TempDir,
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`: the emulator's address (`AZURITE_BLOB_STORAGE_URL`).
    pub url: String,
    /// `http://127.0.0.1:PORT/devstoreaccount1`: the account's blob endpoint
    /// (`--endpoint-url`).
    pub endpoint: String,
}

impl Azurite {
    /// Start the blob server `program` (from [`install`]) and make [`CONTAINER`].
    pub fn start(program: &Path) -> Azurite {
        let data = tempfile::tempdir().expect("Azurite's data folder");
        let mut child = Command::new(program)
            .args(["--blobHost", "127.0.0.1", "--blobPort", "0", "--location"])
            .arg(data.path())
            .args([
                "--silent",
                "--skipApiVersionCheck",
                "--loose",
                "--disableTelemetry",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
        let stdout = child.stdout.take().expect("Azurite's output");
        let process = ServerProcess::new(child);
        // "Azurite Blob service successfully listens on http://127.0.0.1:PORT"
        let mut lines = BufReader::new(stdout).lines();
        let mut seen = Vec::new();
        let url = loop {
            match lines.next() {
                Some(Ok(line)) => {
                    if let Some(u) = line.split("listens on ").nth(1) {
                        break u.trim().to_string();
                    }
                    seen.push(line);
                }
                _ => panic!("Azurite stopped before listening: {}", seen.join("\n")),
            }
        };
        // Keep reading what it prints, so that it never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        let addr: SocketAddr = url
            .trim_start_matches("http://")
            .parse()
            .unwrap_or_else(|e| panic!("Azurite's address {url:?}: {e}"));
        wait_for_port(addr, "Azurite");
        let az = Azurite {
            _process: process,
            _data: data,
            addr,
            endpoint: format!("{url}/{ACCOUNT}"),
            url,
        };
        az.create_container(CONTAINER);
        az
    }

    /// Make a container (a request signed with the account's key, as Azurite checks).
    pub fn create_container(&self, name: &str) {
        let date = chrono::Utc::now()
            .format("%a, %d %b %Y %H:%M:%S GMT")
            .to_string();
        let version = "2021-08-06";
        let path = format!("/{ACCOUNT}/{name}");
        let to_sign = format!(
            "PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:{date}\nx-ms-version:{version}\n/{ACCOUNT}{path}\nrestype:container"
        );
        let headers = [
            ("x-ms-date", date),
            ("x-ms-version", version.to_string()),
            (
                "Authorization",
                format!("SharedKey {ACCOUNT}:{}", sign(&to_sign)),
            ),
        ];
        let (status, answer) = request(
            self.addr,
            "PUT",
            &format!("{path}?restype=container"),
            &headers,
            b"",
        )
        .unwrap_or_else(|e| panic!("create container {name}: {e}"));
        assert!(
            status == 201 || status == 409,
            "create container {name}: HTTP {status}: {answer}"
        );
    }

    /// The variables that make the client library use this emulator by itself
    /// (`AZURE_STORAGE_USE_EMULATOR`, `AZURITE_BLOB_STORAGE_URL`): no endpoint option needed.
    pub fn emulator_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AZURE_STORAGE_USE_EMULATOR", "true".into()),
            ("AZURITE_BLOB_STORAGE_URL", self.url.clone()),
        ]
    }

    /// The connection string of this emulator's account, as the Azure tools print it.
    pub fn connection_string(&self) -> String {
        format!(
            "DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};\
             BlobEndpoint={};",
            self.endpoint
        )
    }
}

/// Base64 of the HMAC-SHA256 of `text` under the account key (Azure's SharedKey signature).
fn sign(text: &str) -> String {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    let key = engine.decode(KEY).expect("the emulator's key is base64");
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key);
    engine.encode(ring::hmac::sign(&key, text.as_bytes()).as_ref())
}

/// The store options and `hudifs` arguments of a table on the emulator at an endpoint (its
/// account's blob endpoint).
pub use crate::server::{endpoint_args as store_args, endpoint_options as options};

/// Upload the table tree at `root` to `url` (e.g. `az://lake/t`) on the emulator at
/// `endpoint` through the storage seam ([`KEYS`] set); the number of objects.
pub fn upload(root: &Path, url: &str, endpoint: &str) -> usize {
    upload_with(root, url, &options(endpoint))
}
