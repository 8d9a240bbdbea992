//! Tuning of the C allocator.

/// Free large buffers straight back to the system. A read from a store holds its bytes in
/// buffers of up to 8 MiB, many a second, across the runtime's threads; after the first such
/// free glibc raises its mmap threshold above them and serves later ones from per-thread arenas
/// that keep what they once held. Measured with `scripts/bench` figure 7 (`s3read-memory`): a
/// fresh daemon reading 8 files at once grew by 398 to 469 MiB against a prefetch budget of
/// 256 MiB, and by 244 to 310 MiB with the threshold fixed at 1 MiB.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn return_large_buffers_at_free() {
    // SAFETY: mallopt only sets an allocator parameter; glibc serialises it with allocation.
    if unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) } != 1 {
        log::debug!("mallopt(M_MMAP_THRESHOLD) refused");
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn return_large_buffers_at_free() {}
