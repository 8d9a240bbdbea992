//! The CSI plugin's metrics (`hudifs csi --metrics ADDR`): its calls by kind and outcome, with
//! latency, and the volumes and shared daemons it has, followed by every shared daemon's own
//! families (SEMANTICS.md §7.12), each sample labelled with its daemon's key: one scrape per
//! node shows everything.

use std::sync::atomic::AtomicI64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

type OpOutcome = [(&'static str, &'static str); 2];
type Op = [(&'static str, &'static str); 1];

/// The plugin's metric families.
pub struct PluginMetrics {
    registry: Registry,
    calls: Family<OpOutcome, Counter>,
    seconds: Family<Op, Histogram, fn() -> Histogram>,
    volumes: Gauge<i64, AtomicI64>,
    daemons: Gauge<i64, AtomicI64>,
}

impl Default for PluginMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl PluginMetrics {
    pub fn new() -> PluginMetrics {
        let mut m = PluginMetrics {
            registry: Registry::with_prefix("hudifs_csi"),
            calls: Family::default(),
            seconds: Family::new_with_constructor(crate::metrics::latency_histogram),
            volumes: Gauge::default(),
            daemons: Gauge::default(),
        };
        m.registry.register(
            "calls",
            "CSI calls answered, by method and outcome (ok or the gRPC status)",
            m.calls.clone(),
        );
        m.registry.register(
            "call_seconds",
            "Time to answer the CSI calls that do work (Probe, publish, unpublish), by method",
            m.seconds.clone(),
        );
        m.registry.register(
            "volumes",
            "Volumes published on this node",
            m.volumes.clone(),
        );
        m.registry.register(
            "daemons",
            "Shared hudifs daemons running for the published volumes",
            m.daemons.clone(),
        );
        m
    }

    /// Count one call of `op` that ended in `outcome`, and its time when it did work.
    pub fn call(&self, op: &'static str, outcome: &'static str, seconds: Option<f64>) {
        self.calls
            .get_or_create(&[("method", op), ("outcome", outcome)])
            .inc();
        if let Some(seconds) = seconds {
            self.seconds
                .get_or_create(&[("method", op)])
                .observe(seconds);
        }
    }

    /// The OpenMetrics text, with the volume and daemon counts given.
    pub fn text(&self, volumes: usize, daemons: usize) -> String {
        self.volumes.set(volumes as i64);
        self.daemons.set(daemons as i64);
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// The `/metrics` text of the daemon serving metrics at `addr`, if it answers within 2 s.
pub fn scrape(addr: &str) -> Option<String> {
    use std::io::{Read, Write};
    let addr: std::net::SocketAddr = addr.parse().ok()?;
    let wait = std::time::Duration::from_secs(2);
    let mut s = std::net::TcpStream::connect_timeout(&addr, wait).ok()?;
    s.set_read_timeout(Some(wait)).ok()?;
    s.set_write_timeout(Some(wait)).ok()?;
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.take(64 << 20).read_to_string(&mut text).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    head.starts_with("HTTP/1.1 200").then(|| body.to_string())
}

/// One scrape of OpenMetrics text: the plugin's `own` families, then the families of each
/// daemon in `daemons` (its key and its `/metrics` text), a family's samples from every daemon
/// together under one `# TYPE`, each with a `daemon="<key>"` label.
pub fn with_daemons(own: &str, daemons: &[(String, String)]) -> String {
    let mut out = own
        .trim_end()
        .strip_suffix("# EOF")
        .unwrap_or(own)
        .trim_end()
        .to_string();
    if !out.is_empty() {
        out.push('\n');
    }
    let mut order: Vec<String> = Vec::new();
    let mut meta: std::collections::HashMap<String, Vec<String>> = Default::default();
    let mut samples: std::collections::HashMap<String, Vec<String>> = Default::default();
    for (key, text) in daemons {
        let mut family = String::new();
        for line in text.lines() {
            if line == "# EOF" {
                break;
            }
            if let Some(rest) = line.strip_prefix("# ") {
                // `# TYPE name t`, `# HELP name text`, `# UNIT name u`.
                family = rest.split(' ').nth(1).unwrap_or("").to_string();
                if !meta.contains_key(&family) {
                    order.push(family.clone());
                }
                let m = meta.entry(family.clone()).or_default();
                if !m.iter().any(|l| l == line) {
                    m.push(line.to_string());
                }
            } else if !line.trim().is_empty() {
                samples
                    .entry(family.clone())
                    .or_default()
                    .push(labelled(line, "daemon", key));
            }
        }
    }
    for family in order {
        for line in meta.get(&family).into_iter().flatten() {
            out.push_str(line);
            out.push('\n');
        }
        for line in samples.get(&family).into_iter().flatten() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push_str("# EOF\n");
    out
}

/// `sample` (`name{labels} value` or `name value`) with the label `name="value"` first.
fn labelled(sample: &str, name: &str, value: &str) -> String {
    let end_of_name = sample.find(['{', ' ']).unwrap_or(sample.len());
    let (metric, rest) = sample.split_at(end_of_name);
    match rest.strip_prefix('{') {
        Some(labels) if labels.starts_with('}') => format!("{metric}{{{name}=\"{value}\"{labels}"),
        Some(labels) => format!("{metric}{{{name}=\"{value}\",{labels}"),
        None => format!("{metric}{{{name}=\"{value}\"}}{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_families_are_merged_and_labelled() {
        let own = "# TYPE hudifs_csi_volumes gauge\nhudifs_csi_volumes 2\n# EOF\n";
        let a = "# HELP hudifs_fuse_requests x\n# TYPE hudifs_fuse_requests counter\n\
                 hudifs_fuse_requests_total{op=\"read\",outcome=\"ok\"} 3\n\
                 # TYPE hudifs_memory gauge\nhudifs_memory 10\n# EOF\n";
        let b = "# HELP hudifs_fuse_requests x\n# TYPE hudifs_fuse_requests counter\n\
                 hudifs_fuse_requests_total{op=\"read\",outcome=\"ok\"} 5\n# EOF\n";
        let text = with_daemons(own, &[("ka".into(), a.into()), ("kb".into(), b.into())]);
        assert_eq!(
            text,
            "# TYPE hudifs_csi_volumes gauge\nhudifs_csi_volumes 2\n\
             # HELP hudifs_fuse_requests x\n# TYPE hudifs_fuse_requests counter\n\
             hudifs_fuse_requests_total{daemon=\"ka\",op=\"read\",outcome=\"ok\"} 3\n\
             hudifs_fuse_requests_total{daemon=\"kb\",op=\"read\",outcome=\"ok\"} 5\n\
             # TYPE hudifs_memory gauge\nhudifs_memory{daemon=\"ka\"} 10\n# EOF\n"
        );
        assert_eq!(labelled("m{} 1", "d", "k"), "m{d=\"k\"} 1");
        assert_eq!(with_daemons(own, &[]), own);
    }
}
