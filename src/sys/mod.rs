//! The raw OS calls of the daemon and its commands, in one place, each behind a safe function:
//! signals.rs (blocking the stop signals and waiting for them on one thread), alloc.rs (the
//! allocator's tuning).

pub mod alloc;
pub mod signals;
