//! What the harnesses of the test servers (moto in `s3.rs`, Azurite in `azurite.rs`,
//! fake-gcs-server in `fake_gcs.rs`) share: a
//! server process killed on drop, a free loopback port and waiting for it to answer, one plain
//! HTTP request, and uploading a local table tree to a store URL through the storage seam.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use hudifs_objstore::{ObjectStorage, StoreOptions, StoreUrl};
use hudifs_storage::{StorageWrite, TablePath};

/// A server's process, killed (and reaped) on drop.
pub struct ServerProcess {
    child: Child,
}

impl ServerProcess {
    pub fn new(child: Child) -> ServerProcess {
        ServerProcess { child }
    }

    /// Its pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// How it exited, if it has.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// Wait (up to a minute) until `addr` accepts connections; panics naming `what` if it does not.
pub fn wait_for_port(addr: SocketAddr, what: &str) {
    let t0 = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{what} did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One request with a body (or none) and extra headers: the status code and the answer.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
) -> io::Result<(u16, String)> {
    let mut s = TcpStream::connect(addr)?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    write!(
        s,
        "{head}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)?;
    let text = String::from_utf8_lossy(&out).to_string();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| io::Error::other(format!("no status in {text:?}")))?;
    Ok((code, text))
}

/// [`request`] without extra headers: the status code.
pub fn simple_request(addr: SocketAddr, method: &str, path: &str, body: &str) -> io::Result<u16> {
    request(addr, method, path, &[], body.as_bytes()).map(|(code, _)| code)
}

/// Every file below `root`, relative, sorted (names starting with `.` included).
pub fn files_below(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(p),
                Ok(t) if t.is_file() => {
                    if let Ok(rel) = p.strip_prefix(root) {
                        out.push(rel.to_string_lossy().to_string());
                    }
                }
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// Upload the table tree at `root` to `url` (`s3://lake/t`, `az://lake/t`) reached with
/// `opts` (credentials from the environment) through the storage seam, a few PUTs at a time;
/// the number of objects.
pub fn upload_with(root: &Path, url: &str, opts: &StoreOptions) -> usize {
    let store = ObjectStorage::new(StoreUrl::parse(url).expect("store URL"), opts).expect("store");
    upload_each(root, |rel, bytes| {
        store
            .put(&TablePath::new(rel).expect("table path"), bytes)
            .unwrap_or_else(|e| panic!("upload {rel}: {e}"));
    })
}

/// Hand every file below `root` (its path relative to `root`, its bytes) to `put`, eight at a
/// time; the number of files.
pub fn upload_each(root: &Path, put: impl Fn(&str, &[u8]) + Sync) -> usize {
    let files = files_below(root);
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(rel) = files.get(i) else { break };
                let bytes = std::fs::read(root.join(rel)).expect("read table file");
                put(rel, &bytes);
            });
        }
    });
    files.len()
}

/// The store options of a table on a server at `endpoint` (an emulator: no credentials
/// beyond what the environment gives).
pub fn endpoint_options(endpoint: &str) -> StoreOptions {
    StoreOptions {
        endpoint_url: Some(endpoint.to_string()),
        ..StoreOptions::default()
    }
}

/// The `hudifs` arguments that reach the server at `endpoint`.
pub fn endpoint_args(endpoint: &str) -> Vec<String> {
    vec!["--endpoint-url".into(), endpoint.into()]
}
