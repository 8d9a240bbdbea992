//! The daemon's metrics (docs/SEMANTICS.md §7.12): what the layers report
//! (`hudifs_storage::observe`), kept in Prometheus families (the `prometheus-client` crate,
//! Prometheus's own Rust client), and served as OpenMetrics text at `/metrics` of `--metrics
//! ADDR`, with `/healthz` for a liveness probe. The same counters, without histogram buckets,
//! are the `user.hudifs.metrics` attribute of the mount root, which `hudifs status --json`
//! shows.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

type Labels1 = [(&'static str, &'static str); 1];
type Labels2 = [(&'static str, &'static str); 2];

/// Latency buckets: 50 µs to about 3 minutes, doubling.
pub(crate) fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 22))
}

/// What is asked of the table when metrics are scraped: the instant `latest/` shows.
pub type LatestInstant = Box<dyn Fn() -> Option<String> + Send + Sync>;

/// The metrics of one daemon.
pub struct Metrics {
    registry: Registry,
    fuse_requests: Family<Labels2, Counter>,
    fuse_seconds: Family<Labels1, Histogram, fn() -> Histogram>,
    store_requests: Family<Labels2, Counter>,
    store_seconds: Family<Labels1, Histogram, fn() -> Histogram>,
    cache_lookups: Family<Labels2, Counter>,
    cache_bytes: Family<Labels1, Counter>,
    merges: Family<Labels1, Counter>,
    merge_seconds: Histogram,
    merge_bytes: Counter,
    latest_instant: Gauge<f64, AtomicU64>,
    latest_age: Gauge<f64, AtomicU64>,
    follower_lag: Gauge<f64, AtomicU64>,
    memory: Gauge<i64, AtomicI64>,
    ceiling: Gauge<i64, AtomicI64>,
    counted: Gauge<i64, AtomicI64>,
    memory_waits: Gauge<i64, AtomicI64>,
    /// When the follower last confirmed `latest/` (ms since the epoch; 0: never).
    followed_at: AtomicU64,
    latest: OnceLock<LatestInstant>,
    /// One scrape at a time: the scrape-time gauges are set, then encoded.
    scrape: Mutex<()>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut m = Metrics {
            registry: Registry::default(),
            fuse_requests: Family::default(),
            fuse_seconds: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            store_requests: Family::default(),
            store_seconds: Family::new_with_constructor(latency_histogram as fn() -> Histogram),
            cache_lookups: Family::default(),
            cache_bytes: Family::default(),
            merges: Family::default(),
            merge_seconds: latency_histogram(),
            merge_bytes: Counter::default(),
            latest_instant: Gauge::default(),
            latest_age: Gauge::default(),
            follower_lag: Gauge::default(),
            memory: Gauge::default(),
            ceiling: Gauge::default(),
            counted: Gauge::default(),
            memory_waits: Gauge::default(),
            followed_at: AtomicU64::new(0),
            latest: OnceLock::new(),
            scrape: Mutex::new(()),
        };
        let r = &mut m.registry;
        r.register(
            "hudifs_fuse_requests",
            "FUSE requests answered, by operation and outcome",
            m.fuse_requests.clone(),
        );
        r.register(
            "hudifs_fuse_request_seconds",
            "Time from a FUSE request's arrival to its reply, by operation",
            m.fuse_seconds.clone(),
        );
        r.register(
            "hudifs_store_requests",
            "Requests to the object store, by kind (GET, HEAD, LIST) and outcome",
            m.store_requests.clone(),
        );
        r.register(
            "hudifs_store_request_seconds",
            "Time of a request to the object store, by kind",
            m.store_seconds.clone(),
        );
        r.register(
            "hudifs_cache_lookups",
            "Reads looked up in a cache (data: the object-store data cache), hit or miss",
            m.cache_lookups.clone(),
        );
        r.register(
            "hudifs_cache_hit_bytes",
            "Bytes served from a cache",
            m.cache_bytes.clone(),
        );
        r.register(
            "hudifs_merges",
            "Merged files asked for, by outcome (merged, cached, base, refused, failed)",
            m.merges.clone(),
        );
        r.register(
            "hudifs_merge_seconds",
            "Time to produce a merged file",
            m.merge_seconds.clone(),
        );
        r.register(
            "hudifs_merge_written_bytes",
            "Bytes of merged files written",
            m.merge_bytes.clone(),
        );
        r.register(
            "hudifs_latest_instant_timestamp_seconds",
            "The instant latest/ shows, as seconds since the epoch (its digits read as UTC)",
            m.latest_instant.clone(),
        );
        r.register(
            "hudifs_latest_instant_age_seconds",
            "How old the instant latest/ shows is",
            m.latest_age.clone(),
        );
        r.register(
            "hudifs_follower_lag_seconds",
            "Time since the follower last confirmed that latest/ is the table's newest state",
            m.follower_lag.clone(),
        );
        r.register(
            "hudifs_resident_memory_bytes",
            "Resident memory of the serving daemon",
            m.memory.clone(),
        );
        r.register(
            "hudifs_memory_ceiling_bytes",
            "The most memory the daemon may hold (--max-memory)",
            m.ceiling.clone(),
        );
        r.register(
            "hudifs_memory_counted_bytes",
            "Memory counted against the ceiling now: read-ahead, bytes reads wait for, merges",
            m.counted.clone(),
        );
        r.register(
            "hudifs_memory_waits",
            "Reads and merges that waited for memory under the ceiling, since start",
            m.memory_waits.clone(),
        );
        m
    }

    /// Where scrapes find the instant `latest/` shows.
    pub fn set_latest(&self, f: LatestInstant) {
        let _ = self.latest.set(f);
    }

    /// Set the gauges that are read at scrape time.
    fn refresh(&self) {
        let now = now_ms();
        if let Some(t) = self.latest.get().and_then(|f| f()) {
            if let Some(at) = hudifs_core::timefmt::instant_as_utc(&t) {
                let secs = at
                    .duration_since(UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64());
                self.latest_instant.set(secs);
                let age = SystemTime::now().duration_since(at).unwrap_or_default();
                self.latest_age.set(age.as_secs_f64());
            }
        }
        let followed = self.followed_at.load(Ordering::Relaxed);
        if followed > 0 {
            self.follower_lag
                .set(now.saturating_sub(followed) as f64 / 1000.0);
        }
        self.memory.set(resident_bytes());
        let c = hudifs_storage::ceiling::process();
        let as_i64 = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        self.ceiling.set(as_i64(c.ceiling()));
        self.counted.set(as_i64(c.used()));
        self.memory_waits.set(as_i64(c.waits()));
    }

    /// The OpenMetrics text of every family.
    pub fn text(&self) -> String {
        let _one = self.scrape.lock().unwrap_or_else(|e| e.into_inner());
        self.refresh();
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }

    /// Every sample but histogram buckets, as a JSON object of `name{labels}` to value: the
    /// mount root's `user.hudifs.metrics`, shown by `hudifs status --json`.
    pub fn summary_json(&self) -> String {
        let mut obj = serde_json::Map::new();
        for line in self.text().lines() {
            if line.starts_with('#') || line.contains("_bucket{") {
                continue;
            }
            if let Some((name, value)) = line.rsplit_once(' ') {
                if let Ok(v) = value.parse::<f64>() {
                    obj.insert(name.to_string(), serde_json::json!(v));
                }
            }
        }
        serde_json::Value::Object(obj).to_string()
    }
}

/// The resident memory of this process (from `/proc/self/statm`).
fn resident_bytes() -> i64 {
    hudifs_storage::ceiling::resident_bytes().map_or(0, |b| i64::try_from(b).unwrap_or(i64::MAX))
}

impl hudifs_storage::observe::Observer for Metrics {
    fn store_request(&self, kind: &'static str, outcome: &'static str, seconds: f64) {
        self.store_requests
            .get_or_create(&[("kind", kind), ("outcome", outcome)])
            .inc();
        self.store_seconds
            .get_or_create(&[("kind", kind)])
            .observe(seconds);
    }

    fn cache_lookup(&self, cache: &'static str, hit: bool, bytes: u64) {
        let result = if hit { "hit" } else { "miss" };
        self.cache_lookups
            .get_or_create(&[("cache", cache), ("result", result)])
            .inc();
        if bytes > 0 {
            self.cache_bytes
                .get_or_create(&[("cache", cache)])
                .inc_by(bytes);
        }
    }

    fn merge(&self, outcome: &'static str, seconds: f64, bytes: u64) {
        self.merges.get_or_create(&[("outcome", outcome)]).inc();
        if outcome == "merged" {
            self.merge_seconds.observe(seconds);
            self.merge_bytes.inc_by(bytes);
        }
    }

    fn fuse_request(&self, op: &'static str, ok: bool, seconds: f64) {
        let outcome = if ok { "ok" } else { "error" };
        self.fuse_requests
            .get_or_create(&[("op", op), ("outcome", outcome)])
            .inc();
        self.fuse_seconds
            .get_or_create(&[("op", op)])
            .observe(seconds);
    }

    fn followed(&self) {
        self.followed_at.store(now_ms(), Ordering::Relaxed);
    }
}

/// The process's metrics.
static GLOBAL: OnceLock<Arc<Metrics>> = OnceLock::new();

/// The metrics of this daemon: made and installed as the storage layers' observer on first use.
pub fn global() -> &'static Arc<Metrics> {
    GLOBAL.get_or_init(|| {
        let m = Arc::new(Metrics::new());
        hudifs_storage::observe::install(Box::new(m.clone()));
        m
    })
}

/// Bind the metrics address `addr` (`HOST:PORT`; `:PORT` means 127.0.0.1): checked before the
/// mount is made, so that a bad address fails the mount, not a scrape.
pub fn bind(addr: &str) -> std::io::Result<TcpListener> {
    let addr = if addr.starts_with(':') {
        format!("127.0.0.1{addr}")
    } else {
        addr.to_string()
    };
    TcpListener::bind(&addr).map_err(|e| std::io::Error::new(e.kind(), format!("{addr}: {e}")))
}

/// Answer HTTP requests on `listener` from a thread: `GET /metrics` (OpenMetrics text),
/// `GET /healthz` (`ok`), 404 for anything else. One connection at a time, each bounded in
/// size and time: a scraper is one client, not a crowd.
pub fn serve(listener: TcpListener, metrics: Arc<Metrics>) -> std::io::Result<()> {
    serve_text(listener, move || metrics.text())
}

/// [`serve`] for any source of OpenMetrics text (the CSI plugin's families).
pub fn serve_text(
    listener: TcpListener,
    text: impl Fn() -> String + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("hudifs-metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let _ = conn.set_write_timeout(Some(Duration::from_secs(5)));
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
                    match conn.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                }
                let line = String::from_utf8_lossy(&req);
                let mut parts = line.split_whitespace();
                let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
                let path = path.split('?').next().unwrap_or("");
                let (status, ctype, body) = match (method, path) {
                    ("GET", "/metrics") => (
                        "200 OK",
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        text(),
                    ),
                    ("GET", "/healthz") => ("200 OK", "text/plain", "ok\n".to_string()),
                    ("GET", _) => ("404 Not Found", "text/plain", "not found\n".to_string()),
                    _ => (
                        "405 Method Not Allowed",
                        "text/plain",
                        "GET only\n".to_string(),
                    ),
                };
                let head = format!(
                    "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n",
                    body.len()
                );
                let _ = conn
                    .write_all(head.as_bytes())
                    .and_then(|_| conn.write_all(body.as_bytes()));
            }
        })
        .map(|_| ())
}
