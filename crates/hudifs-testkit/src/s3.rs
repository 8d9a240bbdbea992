//! A real S3 server for tests and benchmarks, on 127.0.0.1 only: [`Moto`] runs moto's server
//! (PyPI `moto[server]`, in a Python the caller provides) and makes the bucket; [`FaultProxy`]
//! stands in front of it, counts every request by kind, adds a per-request latency and injects
//! faults at a configurable rate (503 SlowDown, 500, connection resets, slow answers, bodies cut
//! short); [`upload`] copies a local table tree to a store URL through the storage seam. What
//! it shares with the other servers' harnesses is in `server.rs`.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use hudifs_objstore::StoreOptions;

use crate::server::{free_port, simple_request, upload_with, wait_for_port, ServerProcess};

/// The credentials moto accepts (it checks none); set them in the environment of the process
/// and of the daemons and writers it starts.
pub const KEYS: [(&str, &str); 3] = [
    ("AWS_ACCESS_KEY_ID", "testing"),
    ("AWS_SECRET_ACCESS_KEY", "testing"),
    ("AWS_DEFAULT_REGION", "us-east-1"),
];

/// The bucket [`Moto::start`] makes.
pub const BUCKET: &str = "lake";

/// Set [`KEYS`] in this process's environment (inherited by the programs it starts).
pub fn set_keys() {
    for (k, v) in KEYS {
        std::env::set_var(k, v);
    }
}

/// A moto server on a free loopback port, killed on drop.
pub struct Moto {
    _process: ServerProcess,
    pub addr: SocketAddr,
    pub endpoint: String,
}

impl Moto {
    /// Start moto's server with `python` (which has `moto[server]`) and make [`BUCKET`].
    pub fn start(python: &Path) -> Moto {
        let port = free_port();
        let child = Command::new(python)
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto server");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let moto = Moto {
            _process: ServerProcess::new(child),
            addr,
            endpoint: format!("http://{addr}"),
        };
        wait_for_port(addr, "moto");
        moto.create_bucket(BUCKET);
        moto
    }

    /// Make a bucket (moto checks no signature).
    pub fn create_bucket(&self, bucket: &str) {
        let status = simple_request(self.addr, "PUT", &format!("/{bucket}"), "")
            .unwrap_or_else(|e| panic!("create bucket {bucket}: {e}"));
        assert!(
            status == 200 || status == 409,
            "create bucket {bucket}: HTTP {status}"
        );
    }

    /// Make a bucket that keeps every version of its objects (S3 versioning enabled).
    pub fn create_versioned_bucket(&self, bucket: &str) {
        self.create_bucket(bucket);
        let body = "<VersioningConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\
                    <Status>Enabled</Status></VersioningConfiguration>";
        let status = simple_request(self.addr, "PUT", &format!("/{bucket}?versioning"), body)
            .unwrap_or_else(|e| panic!("versioning of bucket {bucket}: {e}"));
        assert_eq!(status, 200, "versioning of bucket {bucket}: HTTP {status}");
    }
}

/// The store options of a table on the local server at `endpoint`.
pub fn options(endpoint: &str) -> StoreOptions {
    StoreOptions {
        endpoint_url: Some(endpoint.to_string()),
        region: Some("us-east-1".into()),
        force_path_style: true,
        ..StoreOptions::default()
    }
}

/// The `hudifs` (and `hudifs-writer`) arguments that reach the server at `endpoint`.
pub fn store_args(endpoint: &str) -> Vec<String> {
    vec![
        "--endpoint-url".into(),
        endpoint.into(),
        "--force-path-style".into(),
    ]
}

/// Upload the table tree at `root` to `url` (e.g. `s3://lake/t`) on the server at `endpoint`
/// through the storage seam, a few PUTs at a time; the number of objects.
pub fn upload(root: &Path, url: &str, endpoint: &str) -> usize {
    upload_with(root, url, &options(endpoint))
}

/// What a request was, by what S3 calls it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    List,
    Head,
    Get,
    Put,
    Delete,
    Other,
}

/// A fault the proxy can inject.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// 503 SlowDown (throttling).
    SlowDown,
    /// 500 InternalError.
    Internal,
    /// The connection is reset before any answer.
    Reset,
    /// The answer comes 100 to 600 ms late.
    Slow,
    /// The body is cut off half-way (the headers announce all of it), then the connection
    /// closes.
    Truncate,
}

impl Fault {
    pub const ALL: [Fault; 5] = [
        Fault::SlowDown,
        Fault::Internal,
        Fault::Reset,
        Fault::Slow,
        Fault::Truncate,
    ];
}

/// What the proxy counted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyCounts {
    pub requests: u64,
    pub list: u64,
    pub head: u64,
    pub get: u64,
    pub put: u64,
    pub delete: u64,
    pub other: u64,
    /// Faults injected, by kind.
    pub faults: std::collections::BTreeMap<String, u64>,
    /// `METHOD path?query` of every request, in order.
    pub lines: Vec<String>,
}

impl ProxyCounts {
    pub fn faults_total(&self) -> u64 {
        self.faults.values().sum()
    }

    /// A one-line summary (requests by kind, faults by kind).
    pub fn summary(&self) -> String {
        format!(
            "{} requests (LIST {}, HEAD {}, GET {}, PUT {}, DELETE {}, other {}), {} faults {:?}",
            self.requests,
            self.list,
            self.head,
            self.get,
            self.put,
            self.delete,
            self.other,
            self.faults_total(),
            self.faults
        )
    }
}

struct ProxyState {
    upstream: SocketAddr,
    rate: Mutex<f64>,
    kinds: Mutex<Vec<Fault>>,
    latency: Mutex<Duration>,
    counts: Mutex<ProxyCounts>,
    rng: Mutex<u64>,
    stop: AtomicBool,
    /// Requests whose line (percent-decoded) contains this wait until it is cleared.
    hold: Mutex<Option<String>>,
    released: Condvar,
    /// How many requests were held so far.
    held: AtomicU64,
}

impl ProxyState {
    fn random(&self) -> u64 {
        // SplitMix64.
        let mut s = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn fault(&self, kind: RequestKind) -> Option<Fault> {
        let rate = *self.rate.lock().unwrap_or_else(|e| e.into_inner());
        let kinds = self.kinds.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if rate <= 0.0 || kinds.is_empty() {
            return None;
        }
        if (self.random() % 1_000_000) as f64 >= rate * 1_000_000.0 {
            return None;
        }
        let f = kinds[(self.random() % kinds.len() as u64) as usize];
        // A body can be cut short only where there is one.
        if f == Fault::Truncate && !matches!(kind, RequestKind::Get | RequestKind::List) {
            return Some(Fault::Reset);
        }
        Some(f)
    }

    fn count(&self, kind: RequestKind, line: String) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.requests += 1;
        match kind {
            RequestKind::List => c.list += 1,
            RequestKind::Head => c.head += 1,
            RequestKind::Get => c.get += 1,
            RequestKind::Put => c.put += 1,
            RequestKind::Delete => c.delete += 1,
            RequestKind::Other => c.other += 1,
        }
        c.lines.push(line);
    }

    /// Wait while `line` is held ([`FaultProxy::hold`]).
    fn wait_if_held(&self, line: &str) {
        let line = percent_decode(line);
        let mut hold = self.hold.lock().unwrap_or_else(|e| e.into_inner());
        let mut counted = false;
        while hold.as_ref().is_some_and(|h| line.contains(h.as_str())) {
            if !counted {
                self.held.fetch_add(1, Ordering::SeqCst);
                counted = true;
            }
            hold = self.released.wait(hold).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn count_fault(&self, f: Fault) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        *c.faults.entry(format!("{f:?}")).or_default() += 1;
    }
}

/// An HTTP proxy on 127.0.0.1 in front of an S3 server: counts requests, adds latency, injects
/// faults. Stops accepting on drop.
pub struct FaultProxy {
    pub addr: SocketAddr,
    pub endpoint: String,
    state: Arc<ProxyState>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(self.addr);
    }
}

impl FaultProxy {
    /// A proxy to `upstream` without faults or latency; `seed` fixes which requests fail.
    pub fn start(upstream: SocketAddr, seed: u64) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address");
        let state = Arc::new(ProxyState {
            upstream,
            rate: Mutex::new(0.0),
            kinds: Mutex::new(Fault::ALL.to_vec()),
            latency: Mutex::new(Duration::ZERO),
            counts: Mutex::new(ProxyCounts::default()),
            rng: Mutex::new(seed),
            stop: AtomicBool::new(false),
            hold: Mutex::new(None),
            released: Condvar::new(),
            held: AtomicU64::new(0),
        });
        let st = state.clone();
        std::thread::Builder::new()
            .name("s3-proxy".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if st.stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(conn) = conn else { continue };
                    let st = st.clone();
                    let _ = std::thread::Builder::new()
                        .name("s3-proxy-conn".into())
                        .spawn(move || {
                            let _ = serve(&st, conn);
                        });
                }
            })
            .expect("proxy thread");
        FaultProxy {
            addr,
            endpoint: format!("http://{addr}"),
            state,
        }
    }

    /// Inject faults into this share of requests (0 to 1), chosen among `kinds`.
    pub fn set_faults(&self, rate: f64, kinds: &[Fault]) {
        *self.state.kinds.lock().unwrap_or_else(|e| e.into_inner()) = kinds.to_vec();
        *self.state.rate.lock().unwrap_or_else(|e| e.into_inner()) = rate;
    }

    /// Delay every answer by `latency` (a region's round trip).
    pub fn set_latency(&self, latency: Duration) {
        *self.state.latency.lock().unwrap_or_else(|e| e.into_inner()) = latency;
    }

    /// Hold every request whose line (method and target, percent-decoded) contains `needle`
    /// until [`FaultProxy::release`]: a store request that takes as long as the test wants.
    pub fn hold(&self, needle: &str) {
        *self.state.hold.lock().unwrap_or_else(|e| e.into_inner()) = Some(needle.to_string());
    }

    /// Let the held requests go on, and hold no more.
    pub fn release(&self) {
        *self.state.hold.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.state.released.notify_all();
    }

    /// How many requests were held so far.
    pub fn held(&self) -> u64 {
        self.state.held.load(Ordering::SeqCst)
    }

    /// What was counted so far.
    pub fn counts(&self) -> ProxyCounts {
        self.state
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Start counting from zero.
    pub fn reset_counts(&self) {
        *self.state.counts.lock().unwrap_or_else(|e| e.into_inner()) = ProxyCounts::default();
    }
}

/// A parsed HTTP message head.
struct Head {
    first: String,
    headers: Vec<(String, String)>,
}

impl Head {
    fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn read_head(r: &mut impl BufRead) -> io::Result<Option<Head>> {
    let mut first = String::new();
    loop {
        first.clear();
        if r.read_line(&mut first)? == 0 {
            return Ok(None);
        }
        if !first.trim().is_empty() {
            break;
        }
    }
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    Ok(Some(Head {
        first: first.trim_end().to_string(),
        headers,
    }))
}

fn read_chunked(r: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line)?;
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
            .map_err(|e| io::Error::other(format!("bad chunk size {line:?}: {e}")))?;
        if size == 0 {
            // Trailers up to the empty line.
            loop {
                let mut t = String::new();
                if r.read_line(&mut t)? == 0 || t.trim().is_empty() {
                    break;
                }
            }
            return Ok(out);
        }
        let start = out.len();
        out.resize(start + size, 0);
        r.read_exact(&mut out[start..])?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf)?;
    }
}

/// `%XX` escapes decoded (a request target's keys and prefixes).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b.get(i + 1..i + 3).and_then(|h| {
            std::str::from_utf8(h)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        });
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn classify(method: &str, target: &str) -> RequestKind {
    let query = target.split_once('?').map(|(_, q)| q).unwrap_or("");
    match method {
        "GET" if query.contains("list-type") || query.contains("delimiter") => RequestKind::List,
        "GET" => RequestKind::Get,
        "HEAD" => RequestKind::Head,
        "PUT" => RequestKind::Put,
        "DELETE" => RequestKind::Delete,
        _ => RequestKind::Other,
    }
}

fn error_body(code: &str, message: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
         <Message>{message}</Message><RequestId>hudifs-proxy</RequestId></Error>"
    )
}

/// Serve one client connection (keep-alive) until it closes or a fault closes it.
fn serve(st: &ProxyState, client: TcpStream) -> io::Result<()> {
    let _ = client.set_nodelay(true);
    let mut reader = BufReader::new(client.try_clone()?);
    let mut client = client;
    loop {
        let Some(head) = read_head(&mut reader)? else {
            return Ok(());
        };
        let body = if head
            .get("Transfer-Encoding")
            .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
        {
            read_chunked(&mut reader)?
        } else {
            let len: usize = head
                .get("Content-Length")
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            let mut b = vec![0; len];
            reader.read_exact(&mut b)?;
            b
        };
        let mut parts = head.first.split(' ');
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        let kind = classify(&method, &target);
        let line = format!("{method} {target}");
        st.wait_if_held(&line);
        st.count(kind, line);
        let latency = *st.latency.lock().unwrap_or_else(|e| e.into_inner());
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        let fault = st.fault(kind);
        if let Some(f) = fault {
            st.count_fault(f);
        }
        match fault {
            Some(Fault::SlowDown) | Some(Fault::Internal) => {
                let (status, code) = if fault == Some(Fault::SlowDown) {
                    ("503 Slow Down", "SlowDown")
                } else {
                    ("500 Internal Server Error", "InternalError")
                };
                let b = error_body(code, "injected by the test proxy");
                let extra = if method == "HEAD" { "" } else { b.as_str() };
                write!(
                    client,
                    "HTTP/1.1 {status}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\r\n{extra}",
                    if method == "HEAD" { 0 } else { b.len() }
                )?;
                client.flush()?;
                continue;
            }
            Some(Fault::Reset) => {
                reset(&client);
                return Ok(());
            }
            Some(Fault::Slow) => {
                std::thread::sleep(Duration::from_millis(100 + st.random() % 500));
            }
            _ => {}
        }
        let (status, headers, rbody) = forward(st.upstream, &head, &body)?;
        let status = status.replacen("HTTP/1.0", "HTTP/1.1", 1);
        let mut out = format!("{status}\r\n");
        let code = status.split(' ').nth(1).unwrap_or("");
        let no_body = method == "HEAD" || code == "204" || code == "304";
        for (k, v) in &headers {
            let k_l = k.to_ascii_lowercase();
            if k_l == "connection" || k_l == "transfer-encoding" || k_l == "keep-alive" {
                continue;
            }
            if k_l == "content-length" && !no_body {
                continue;
            }
            out.push_str(&format!("{k}: {v}\r\n"));
        }
        if !no_body {
            out.push_str(&format!("Content-Length: {}\r\n", rbody.len()));
        }
        out.push_str("\r\n");
        client.write_all(out.as_bytes())?;
        if fault == Some(Fault::Truncate) && rbody.len() > 1 {
            client.write_all(&rbody[..rbody.len() / 2])?;
            client.flush()?;
            let _ = client.shutdown(Shutdown::Both);
            return Ok(());
        }
        if !no_body {
            client.write_all(&rbody)?;
        }
        client.flush()?;
    }
}

/// Close a connection with a TCP reset (SO_LINGER 0).
fn reset(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a correctly sized option value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &linger as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    let _ = s.shutdown(Shutdown::Both);
}

type Response = (String, Vec<(String, String)>, Vec<u8>);

/// Send one request upstream on a fresh connection and read the whole answer.
fn forward(upstream: SocketAddr, head: &Head, body: &[u8]) -> io::Result<Response> {
    let mut up = TcpStream::connect(upstream)?;
    let _ = up.set_nodelay(true);
    let mut req = format!("{}\r\n", head.first);
    for (k, v) in &head.headers {
        let k_l = k.to_ascii_lowercase();
        if k_l == "connection" || k_l == "transfer-encoding" || k_l == "content-length" {
            continue;
        }
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    ));
    up.write_all(req.as_bytes())?;
    up.write_all(body)?;
    up.flush()?;
    let mut r = BufReader::new(up);
    let h = read_head(&mut r)?.ok_or_else(|| io::Error::other("no answer upstream"))?;
    let is_head = head.first.starts_with("HEAD ");
    let rbody = if is_head {
        Vec::new()
    } else if h
        .get("Transfer-Encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        read_chunked(&mut r)?
    } else if let Some(len) = h
        .get("Content-Length")
        .and_then(|l| l.parse::<usize>().ok())
    {
        let mut b = vec![0; len];
        r.read_exact(&mut b)?;
        b
    } else {
        let mut b = Vec::new();
        r.read_to_end(&mut b)?;
        b
    };
    Ok((h.first, h.headers, rbody))
}
