//! Locks that outlive a panic: a thread that panicked while holding a lock leaves data that is
//! still whole for every use hudifs makes of it (maps, counters, caches), so the lock is taken
//! as it is rather than poisoning every later caller.

use std::sync::{Mutex, MutexGuard};

/// Lock `m`, whether or not a thread panicked while holding it.
pub fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_whose_holder_panicked_is_taken_as_it_is() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let _ = std::thread::spawn(move || {
            let mut g = m2.lock().unwrap();
            *g = 2;
            panic!("holding the lock");
        })
        .join();
        assert!(m.is_poisoned());
        assert_eq!(*lock(&m), 2);
    }
}
