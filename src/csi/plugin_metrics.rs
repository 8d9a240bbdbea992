//! The CSI plugin's metrics (`hudifs csi --metrics ADDR`): its calls by kind and outcome, with
//! latency, and the volumes and shared daemons it has, in the daemon's `hudifs_` namespace.

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
            "Time to answer a CSI call, by method",
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

    /// Count one call of `op` that took `seconds` and ended in `outcome`.
    pub fn call(&self, op: &'static str, outcome: &'static str, seconds: f64) {
        self.calls
            .get_or_create(&[("method", op), ("outcome", outcome)])
            .inc();
        self.seconds
            .get_or_create(&[("method", op)])
            .observe(seconds);
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
