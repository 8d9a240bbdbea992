//! What a serving daemon must hand on to the daemon that replaces it after a crash
//! (docs/SEMANTICS.md §7.11): the meaning of every inode number and handle the kernel may still
//! hold, and the table's configuration as the keeper read it.
//!
//! Inode numbers are computed from ids that the mount hands out in order (`fs/inode.rs`):
//! interned views, directories and timeline names, the registry of table files, the registry of
//! merged slices. The journal records each id as it is handed out, before the kernel hears of
//! it; a daemon that takes the mount over replays the records in order and so hands the same ids
//! to the same things. The kernel also holds passthrough backing files by number
//! (`fuse/passthrough.rs`), which the journal records per handle.
//!
//! - `memlog.rs`: the log itself, an anonymous memory file owned by the keeper
//!   (`daemon/keeper.rs`), with torn tails cut and checkpoints;
//! - `record.rs`: the typed [`Record`]s and their one codec. Each owner appends its own kind
//!   and replays it from [`RestartJournal::records`].
//!
//! Passthrough opens and releases come and go without end, while only the handles open now
//! matter: once enough of them accumulate, the journal is compacted in place. The live state
//! (every other record as it is, one open per handle still open) is written as one checkpoint.

mod memlog;
mod record;

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::Mutex;

pub use record::{FileEntry, FilesRecord, PassOpen, Record};

use memlog::{frame, MemLog, RawRecord};
use record::is_passthrough;

/// Passthrough records appended since the last checkpoint that trigger a compaction, beyond 4
/// per handle still open (and beyond the size of the live state, so that compactions copy no
/// more than they free).
pub const COMPACT_AFTER: u64 = 65_536;

/// A passthrough handle still open after some records: its open, and the index of its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenPassthrough {
    pub open: PassOpen,
    pub record: usize,
}

/// The passthrough handles open after `records` (a `PassOpen` not followed by a `PassRelease`
/// of its handle), in the order of their opens. The one reading of these two kinds of record:
/// replay (`fuse/passthrough.rs`) and compaction both use it.
pub fn open_passthrough(records: &[Record]) -> Vec<OpenPassthrough> {
    let mut open: HashMap<u64, OpenPassthrough> = HashMap::new();
    for (record, r) in records.iter().enumerate() {
        match *r {
            Record::PassOpen(o) => {
                open.insert(o.fh, OpenPassthrough { open: o, record });
            }
            Record::PassRelease { fh } => {
                open.remove(&fh);
            }
            _ => {}
        }
    }
    let mut out: Vec<OpenPassthrough> = open.into_values().collect();
    out.sort_by_key(|o| o.record);
    out
}

/// The journal of one mount.
pub struct RestartJournal {
    inner: Mutex<Inner>,
}

struct Inner {
    log: MemLog,
    /// Passthrough records appended since the last checkpoint (as far as this process knows).
    pass_since: u64,
    /// Their bytes.
    pass_bytes_since: u64,
    /// Passthrough handles open (as far as this process knows).
    live: u64,
    /// The size of the live state at the last compaction or reading.
    live_bytes: u64,
    /// [`COMPACT_AFTER`], lower in tests.
    compact_after: u64,
}

impl std::fmt::Debug for RestartJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RestartJournal")
    }
}

impl RestartJournal {
    /// A new, empty journal (an anonymous memory file, inherited across `exec`).
    pub fn create() -> std::io::Result<RestartJournal> {
        Ok(RestartJournal::of(MemLog::create()?))
    }

    /// The journal passed down as descriptor `fd`.
    ///
    /// # Safety
    /// `fd` must be an open descriptor that nothing else in this process owns.
    pub unsafe fn from_raw_fd(fd: RawFd) -> RestartJournal {
        // SAFETY: the caller hands over ownership. Read again by `records`, which a daemon
        // calls before it appends.
        RestartJournal::of(unsafe { MemLog::from_raw_fd(fd) })
    }

    fn of(log: MemLog) -> RestartJournal {
        RestartJournal {
            inner: Mutex::new(Inner {
                log,
                pass_since: 0,
                pass_bytes_since: 0,
                live: 0,
                live_bytes: 0,
                compact_after: COMPACT_AFTER,
            }),
        }
    }

    /// Compact after `n` passthrough records (beyond 4 per open handle) instead of
    /// [`COMPACT_AFTER`].
    #[doc(hidden)]
    pub fn set_compact_after(&self, n: u64) {
        self.lock().compact_after = n;
    }

    pub fn raw_fd(&self) -> RawFd {
        self.lock().log.raw_fd()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append one record. A journal that cannot be written (memory exhausted) is logged: the
    /// mount goes on, and a restart after it would not know the newest ids.
    pub fn append(&self, record: &Record) {
        let (tag, payload) = (record.tag(), record.payload());
        let mut rec = Vec::with_capacity(5 + payload.len());
        frame(&mut rec, tag, &payload);
        let mut j = self.lock();
        if let Err(e) = j.log.append(&rec) {
            log::warn!("restart journal: cannot record {}: {e}", Record::kind(tag));
            return;
        }
        match record {
            Record::PassOpen(_) => j.live += 1,
            Record::PassRelease { .. } => j.live = j.live.saturating_sub(1),
            _ => return,
        }
        j.pass_since += 1;
        j.pass_bytes_since += rec.len() as u64;
        if j.log.has_header()
            && j.pass_since > j.compact_after + 4 * j.live
            && j.pass_bytes_since >= j.live_bytes
        {
            if let Err(e) = j.compact() {
                log::warn!("restart journal: cannot compact: {e}");
                // Not tried again before as many records more.
                j.pass_since = 0;
                j.pass_bytes_since = 0;
            }
        }
    }

    /// Every record in order, as of the last checkpoint: the records of the checkpoint, then
    /// those after it. A torn last record is cut off the file; a whole record that does not
    /// read as its kind is an error (every id after it would name something else).
    pub fn records(&self) -> std::io::Result<Vec<Record>> {
        self.lock().read()
    }
}

impl Inner {
    /// Read the records (see [`RestartJournal::records`]) and take the counts from them.
    fn read(&mut self) -> std::io::Result<Vec<Record>> {
        let reading = self.log.read()?;
        let records = decode(&reading.records)?;
        let open = open_passthrough(&records);
        let after = &reading.records[reading.records.len() - reading.since_checkpoint..];
        self.live = open.len() as u64;
        self.pass_since = after.iter().filter(|(t, _)| is_passthrough(*t)).count() as u64;
        self.pass_bytes_since = 0;
        self.live_bytes = live_state(&reading.records, &open).len() as u64;
        Ok(records)
    }

    /// Write the live state as a checkpoint, start the records there, free what came before.
    fn compact(&mut self) -> std::io::Result<()> {
        let before = self.log.held()?.1;
        let reading = self.log.read()?;
        let records = decode(&reading.records)?;
        let open = open_passthrough(&records);
        let state = live_state(&reading.records, &open);
        self.log.checkpoint(&state)?;
        self.live = open.len() as u64;
        self.pass_since = 0;
        self.pass_bytes_since = 0;
        self.live_bytes = state.len() as u64;
        log::info!(
            "restart journal: compacted {} records to {} KiB ({} passthrough handles open): \
             {} KiB held before, {} KiB after",
            records.len(),
            state.len() >> 10,
            open.len(),
            before >> 10,
            self.log.held()?.1 >> 10
        );
        Ok(())
    }
}

/// The typed records of `raw`.
fn decode(raw: &[RawRecord]) -> std::io::Result<Vec<Record>> {
    raw.iter()
        .map(|(tag, p)| {
            Record::decode(*tag, p).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!(
                        "a {} record of the restart journal does not read back",
                        Record::kind(*tag)
                    ),
                )
            })
        })
        .collect()
}

/// The records that matter after `records`, as one stream: every record but passthrough ones
/// as it is, and the opens of the handles still `open`, in their order.
fn live_state(records: &[RawRecord], open: &[OpenPassthrough]) -> Vec<u8> {
    let mut keep = open.iter().map(|o| o.record).peekable();
    let mut out = Vec::new();
    for (i, (tag, p)) in records.iter().enumerate() {
        if is_passthrough(*tag) {
            if keep.peek() != Some(&i) {
                continue;
            }
            keep.next();
        }
        frame(&mut out, *tag, p);
    }
    out
}

#[cfg(test)]
mod tests;
