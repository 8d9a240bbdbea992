//! Whether directory listings hand the kernel their files' attributes.
//!
//! A `readdirplus` answer can carry each entry's attributes, and the kernel then makes an inode
//! and a dentry for it: about 4 µs of kernel time per file, paid in the lister's own thread.
//! That pays when the caller goes on to stat what it listed (`ls -l`, `rsync`, `du`, pyarrow's
//! discovery): one round trip per directory page instead of one `lookup` per file. It is wasted
//! on a walk that only needs names and types (`find -type f`, a glob), which then runs several
//! times slower than on the disk. The kernel's own heuristic (`FUSE_READDIRPLUS_AUTO`) decides
//! per directory page and leaves `ls -l` with a lookup for most files, 4x slower.
//!
//! So the daemon decides, per listing: directories always come with attributes (a walk enters
//! them), files only while callers are statting. The sign of statting is a `lookup` of a file:
//! the kernel asks only for names it has no entry for, that is, names listed without attributes
//! (or paths typed directly). After one, listings carry file attributes for [`WINDOW`]; a stat
//! walk keeps renewing it with the few lookups of each directory it reaches, a name-only walk
//! never starts it. The cost of a wrong guess is bounded: a stat walk pays lookups for the first
//! directory it lists, a name walk pays the inodes for [`WINDOW`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long one file lookup keeps file attributes in listings.
pub const WINDOW: Duration = Duration::from_secs(2);

/// The daemon's guess whether callers stat what they list (see the module comment).
#[derive(Debug)]
pub struct StatDemand {
    start: Instant,
    /// Milliseconds after `start` of the last file lookup, plus one (0: none yet).
    last_lookup_ms: AtomicU64,
}

impl Default for StatDemand {
    fn default() -> Self {
        StatDemand {
            start: Instant::now(),
            last_lookup_ms: AtomicU64::new(0),
        }
    }
}

impl StatDemand {
    /// A file was looked up by name.
    pub fn file_looked_up(&self) {
        self.file_looked_up_at(self.start.elapsed());
    }

    /// Whether a listing made now should carry its files' attributes.
    pub fn wants_file_attrs(&self) -> bool {
        self.wants_file_attrs_at(self.start.elapsed())
    }

    fn file_looked_up_at(&self, since_start: Duration) {
        let ms = since_start.as_millis() as u64 + 1;
        self.last_lookup_ms.fetch_max(ms, Ordering::Relaxed);
    }

    fn wants_file_attrs_at(&self, since_start: Duration) -> bool {
        match self.last_lookup_ms.load(Ordering::Relaxed) {
            0 => false,
            last => {
                (since_start.as_millis() as u64 + 1).saturating_sub(last)
                    <= WINDOW.as_millis() as u64
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_name_walk_never_asks_for_file_attributes() {
        let d = StatDemand::default();
        for t in [0, 10, 5_000, 3_600_000] {
            assert!(!d.wants_file_attrs_at(ms(t)));
        }
    }

    #[test]
    fn a_file_lookup_asks_for_attributes_for_the_window() {
        let d = StatDemand::default();
        d.file_looked_up_at(ms(1_000));
        assert!(d.wants_file_attrs_at(ms(1_000)));
        assert!(d.wants_file_attrs_at(ms(1_000) + WINDOW));
        assert!(!d.wants_file_attrs_at(ms(1_001) + WINDOW));
        // A stat walk renews it with each directory's first lookups.
        d.file_looked_up_at(ms(2_500));
        assert!(d.wants_file_attrs_at(ms(2_500) + WINDOW));
        // An older lookup reported late does not move it back.
        d.file_looked_up_at(ms(100));
        assert!(d.wants_file_attrs_at(ms(2_500) + WINDOW));
    }

    #[test]
    fn a_lookup_at_the_first_millisecond_counts() {
        let d = StatDemand::default();
        d.file_looked_up_at(ms(0));
        assert!(d.wants_file_attrs_at(ms(0)));
    }
}
