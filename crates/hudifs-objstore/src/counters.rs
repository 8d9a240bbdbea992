//! Counting the requests a store makes, by kind: for tests and benchmarks (requests per idle
//! poll, per warm walk), and the GETs of open files as well as the store's own calls.

use std::sync::atomic::{AtomicU64, Ordering};

/// How many requests of each kind a store made (each try of a retried request counts once
/// here; the client library's own retries of 5xx and resets are not seen).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RequestCounts {
    /// LIST with delimiter (one per page asked for by the client library's call).
    pub list: u64,
    pub head: u64,
    pub get: u64,
    pub put: u64,
    pub delete: u64,
}

impl RequestCounts {
    pub fn total(&self) -> u64 {
        self.list + self.head + self.get + self.put + self.delete
    }

    /// The requests made since `before`.
    pub fn since(&self, before: &RequestCounts) -> RequestCounts {
        RequestCounts {
            list: self.list - before.list,
            head: self.head - before.head,
            get: self.get - before.get,
            put: self.put - before.put,
            delete: self.delete - before.delete,
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) list: AtomicU64,
    pub(crate) head: AtomicU64,
    pub(crate) get: AtomicU64,
    pub(crate) put: AtomicU64,
    pub(crate) delete: AtomicU64,
}

impl Counters {
    pub(crate) fn add(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Count a request of `kind` (`GET`, `HEAD`, `LIST`) in `c` and time it for the daemon's
    /// metrics: report how it ended with [`Timed::done`].
    pub(crate) fn start(c: &AtomicU64, kind: &'static str) -> Timed {
        Counters::add(c);
        Timed {
            kind,
            started: std::time::Instant::now(),
        }
    }
}

/// A request under way, timed (`hudifs_storage::observe`).
pub(crate) struct Timed {
    kind: &'static str,
    started: std::time::Instant,
}

impl Timed {
    /// The request ended with `r`.
    pub(crate) fn done<T>(self, r: &Result<T, object_store::Error>) {
        let outcome = match r {
            Ok(_) => "ok",
            Err(object_store::Error::NotFound { .. }) => "not_found",
            Err(_) => "error",
        };
        hudifs_storage::observe::store_request(self.kind, outcome, self.started);
    }

    /// The request ended, well or not (its error is not an `object_store` one).
    pub(crate) fn ended(self, ok: bool) {
        let outcome = if ok { "ok" } else { "error" };
        hudifs_storage::observe::store_request(self.kind, outcome, self.started);
    }
}
