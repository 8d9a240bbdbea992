//! What one merge holds of the daemon's memory ceiling (`hudifs_storage::ceiling`,
//! docs/SEMANTICS.md §9.9, "Memory ceiling").
//!
//! A merge counts what it holds as it goes (log files, decoded records, the base file's row
//! group, the writer's row group) and holds that much of the ceiling. Growing never waits: a
//! merge that holds bytes and waits for more could wait on another merge doing the same. When
//! the bytes are not there, the merge stops with [`MergeError::needs`] naming all it needed so
//! far; the caller ([`crate::MergeCache`]) drops everything and starts it again with a
//! [`MergeMemory`] that took that much at once, waiting holding nothing. A merge whose bytes can
//! never fit below the ceiling is refused (`EFBIG`), as one over its memory cap is.

use std::sync::{Arc, Mutex};

use hudifs_storage::ceiling::{Lease, MemoryCeiling};

use crate::error::{MergeError, Result};

/// How many times a merge is started again for want of memory before it gives up.
pub const ATTEMPTS: usize = 4;

struct Inner {
    ceiling: Arc<MemoryCeiling>,
    lease: Option<Lease>,
    counted: u64,
    /// Whether what the merge freed goes back to the system when it ends.
    give_back: bool,
}

impl Drop for Inner {
    /// A merge of a table on an object store is over: what it freed goes back to the system
    /// before its bytes of the ceiling do. Its many buffers below the allocator's mmap
    /// threshold (decoded pages, arrays) were freed into the allocator's arenas, which keep
    /// them: counted as released but still resident, they would let the store reads that take
    /// the released room (in buffers of their own, mapped apart) run the daemon over the
    /// ceiling (`tests/store/store_reads.rs` measured 118-130 MiB under `--max-memory 112M`). On a
    /// local disk reads hold no room, and the next merge reuses what the arenas keep: handing
    /// it back there made merging 12 % slower (faults on the pages taken again).
    fn drop(&mut self) {
        if self.give_back && self.counted > 0 {
            give_back_freed_memory();
        }
    }
}

/// Return the allocator's free pages to the system (glibc's `malloc_trim`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn give_back_freed_memory() {
    // SAFETY: malloc_trim takes no pointers; glibc serialises it with allocation.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn give_back_freed_memory() {}

/// The memory one merge holds (shared by the slices of one change feed).
#[derive(Clone)]
pub struct MergeMemory(Arc<Mutex<Inner>>);

impl std::fmt::Debug for MergeMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.lock();
        f.debug_struct("MergeMemory")
            .field("counted", &i.counted)
            .field("held", &i.lease.as_ref().map_or(0, Lease::bytes))
            .finish()
    }
}

fn too_big(n: u64, ceiling: &MemoryCeiling) -> MergeError {
    MergeError::too_big(format!(
        "it needs {} MiB of memory, more than the {} MiB that --max-memory ({} MiB) leaves for data",
        n >> 20,
        ceiling.room() >> 20,
        ceiling.ceiling() >> 20
    ))
}

impl MergeMemory {
    /// A merge's memory within `ceiling`, taking `reserve` bytes at once first (waiting for them:
    /// the caller holds nothing).
    pub fn within(ceiling: &Arc<MemoryCeiling>, reserve: u64) -> Result<MergeMemory> {
        let lease = if reserve > 0 {
            if !ceiling.can_fit(reserve) {
                return Err(too_big(reserve, ceiling));
            }
            Some(ceiling.take_blocking(reserve))
        } else {
            None
        };
        Ok(MergeMemory(Arc::new(Mutex::new(Inner {
            ceiling: ceiling.clone(),
            lease,
            counted: 0,
            give_back: false,
        }))))
    }

    /// Hand what the merge freed back to the system when it ends (a table on an object store).
    pub fn give_back_when_done(&self) {
        self.lock().give_back = true;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes counted so far.
    pub fn counted(&self) -> u64 {
        self.lock().counted
    }

    /// Count `n` more bytes held, and hold them of the ceiling: at once if they fit, else (when
    /// nothing is held yet) waiting for them; else the merge must start again
    /// ([`MergeError::needs`]).
    pub fn count(&self, n: u64) -> Result<()> {
        let mut i = self.lock();
        i.counted += n;
        let held = i.lease.as_ref().map_or(0, Lease::bytes);
        if i.counted <= held {
            return Ok(());
        }
        let more = i.counted - held;
        let counted = i.counted;
        if !i.ceiling.can_fit(counted) {
            return Err(too_big(counted, &i.ceiling));
        }
        match i.lease.as_mut() {
            Some(l) => {
                if l.try_grow(more) {
                    Ok(())
                } else {
                    Err(MergeError::needs(counted))
                }
            }
            None => match i.ceiling.try_take(more) {
                Some(l) => {
                    i.lease = Some(l);
                    Ok(())
                }
                None => {
                    let c = i.ceiling.clone();
                    drop(i);
                    let l = c.take_blocking(more);
                    self.lock().lease = Some(l);
                    Ok(())
                }
            },
        }
    }
}

/// Run `attempt` with a [`MergeMemory`] of `ceiling`, again with all it needed taken at once
/// while it stops for want of memory.
pub fn with_memory<T>(
    ceiling: &Arc<MemoryCeiling>,
    mut attempt: impl FnMut(MergeMemory) -> Result<T>,
) -> Result<T> {
    let mut reserve = 0;
    for _ in 0..ATTEMPTS {
        match attempt(MergeMemory::within(ceiling, reserve)?) {
            Err(e) if e.needed > 0 => reserve = e.needed.max(reserve),
            r => return r,
        }
    }
    Err(MergeError::too_big(format!(
        "it still needed more memory after {ATTEMPTS} attempts (last {} MiB)",
        reserve >> 20
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: u64 = 1 << 20;

    #[test]
    fn counting_holds_the_bytes_and_a_second_merge_that_cannot_grow_starts_again() {
        let c = MemoryCeiling::fixed(100 * M);
        let a = MergeMemory::within(&c, 0).unwrap();
        a.count(30 * M).unwrap();
        let b = MergeMemory::within(&c, 0).unwrap();
        b.count(50 * M).unwrap();
        assert_eq!(c.used(), 80 * M);
        let e = b.count(30 * M).unwrap_err();
        assert_eq!(e.needed, 80 * M, "all it counted");
        // Started again (holding nothing) with what it needed taken at once, once the other
        // merge is done.
        drop(b);
        drop(a);
        let b2 = MergeMemory::within(&c, e.needed).unwrap();
        b2.count(80 * M).unwrap();
        assert_eq!(c.used(), 80 * M);
    }

    #[test]
    fn what_can_never_fit_is_too_big() {
        let c = MemoryCeiling::fixed(10 * M);
        let m = MergeMemory::within(&c, 0).unwrap();
        let e = m.count(11 * M).unwrap_err();
        assert_eq!((e.kind, e.needed), (crate::Refusal::TooBig, 0));
        assert!(e.reason.contains("--max-memory"), "{e}");
        assert!(MergeMemory::within(&c, 11 * M).is_err());
    }

    #[test]
    fn with_memory_retries_with_the_bytes_needed() {
        let c = MemoryCeiling::fixed(100 * M);
        let other = c.try_take(60 * M).unwrap();
        let mut tries = 0;
        let freed = std::sync::Mutex::new(Some(other));
        let r = with_memory(&c, |m| {
            tries += 1;
            let r = m.count(10 * M).and_then(|_| m.count(40 * M));
            // The other holder lets go after the first attempt.
            freed.lock().unwrap().take();
            r.map(|_| m.counted())
        });
        assert_eq!(r.unwrap(), 50 * M);
        assert_eq!(tries, 2);
        assert_eq!(c.used(), 0);
    }
}
