//! Work on many items at once, a few threads at a time: listings and reads on an object store
//! are mostly waiting for the store, and the partitions of a view are resolved on every core,
//! so they are run side by side.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// The cores this process may run on (read once: asking costs a few file reads in a
/// container).
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `f` of every item, in the items' order, with at most `threads` running at once (1: in
/// place, on the calling thread).
pub fn map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if threads <= 1 || items.len() <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<R>>> = items.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads.min(items.len()) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(i) else { break };
                let r = f(item);
                *results[i].lock().unwrap_or_else(|e| e.into_inner()) = Some(r);
            });
        }
    });
    results
        .into_iter()
        .map(|r| {
            r.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .expect("every item is taken by a thread that finishes")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn results_keep_the_items_order() {
        let items: Vec<u64> = (0..100).collect();
        for threads in [1, 3, 16] {
            let got = super::map(&items, threads, |i| i * 2);
            assert_eq!(got, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        }
    }
}
