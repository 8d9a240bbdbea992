//! What the layers of a mount report to the daemon's metrics (`src/metrics.rs` of the hudifs
//! package): requests to a store by kind and outcome with their time, cache lookups, merges,
//! FUSE requests, the follower's checks. One observer per process, installed once, as `log`'s
//! logger is; until one is, every report is a no-op costing one atomic load.

use std::sync::OnceLock;
use std::time::Instant;

/// Receives the reports. Implementations must be cheap: reports come from hot paths.
pub trait Observer: Send + Sync {
    /// A request to a store (`kind`: `GET`, `HEAD`, `LIST`, `PUT`, `DELETE`) and how it ended
    /// (`ok`, `not_found`, `error`).
    fn store_request(&self, kind: &'static str, outcome: &'static str, seconds: f64);
    /// A lookup in a cache (`data`: the object-store data cache), and the bytes it served.
    fn cache_lookup(&self, cache: &'static str, hit: bool, bytes: u64);
    /// A merged file asked for (`outcome`: `merged`, `cached`, `base`, `refused`, `failed`), the
    /// time it took and the bytes it wrote.
    fn merge(&self, outcome: &'static str, seconds: f64, bytes: u64);
    /// A FUSE request answered (`op`: the operation), whether it succeeded, and its time from
    /// arrival to reply.
    fn fuse_request(&self, op: &'static str, ok: bool, seconds: f64);
    /// The follower checked the timeline and `latest/` is current as of now.
    fn followed(&self);
}

/// A shared observer (the daemon keeps its own handle on its metrics).
impl<T: Observer + ?Sized> Observer for std::sync::Arc<T> {
    fn store_request(&self, kind: &'static str, outcome: &'static str, seconds: f64) {
        (**self).store_request(kind, outcome, seconds)
    }
    fn cache_lookup(&self, cache: &'static str, hit: bool, bytes: u64) {
        (**self).cache_lookup(cache, hit, bytes)
    }
    fn merge(&self, outcome: &'static str, seconds: f64, bytes: u64) {
        (**self).merge(outcome, seconds, bytes)
    }
    fn fuse_request(&self, op: &'static str, ok: bool, seconds: f64) {
        (**self).fuse_request(op, ok, seconds)
    }
    fn followed(&self) {
        (**self).followed()
    }
}

static OBSERVER: OnceLock<Box<dyn Observer>> = OnceLock::new();

/// Install the process's observer; false if one was installed already.
pub fn install(o: Box<dyn Observer>) -> bool {
    OBSERVER.set(o).is_ok()
}

fn get() -> Option<&'static dyn Observer> {
    OBSERVER.get().map(|b| &**b)
}

/// A store request that began at `started`.
pub fn store_request(kind: &'static str, outcome: &'static str, started: Instant) {
    if let Some(o) = get() {
        o.store_request(kind, outcome, started.elapsed().as_secs_f64());
    }
}

/// A store request that took `seconds` (measured by the caller).
pub fn store_request_took(kind: &'static str, outcome: &'static str, seconds: f64) {
    if let Some(o) = get() {
        o.store_request(kind, outcome, seconds);
    }
}

pub fn cache_lookup(cache: &'static str, hit: bool, bytes: u64) {
    if let Some(o) = get() {
        o.cache_lookup(cache, hit, bytes);
    }
}

pub fn merge(outcome: &'static str, started: Instant, bytes: u64) {
    if let Some(o) = get() {
        o.merge(outcome, started.elapsed().as_secs_f64(), bytes);
    }
}

pub fn fuse_request(op: &'static str, ok: bool, started: Instant) {
    if let Some(o) = get() {
        o.fuse_request(op, ok, started.elapsed().as_secs_f64());
    }
}

pub fn followed() {
    if let Some(o) = get() {
        o.followed();
    }
}
