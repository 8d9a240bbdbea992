//! The log the journal's records are kept in: an anonymous memory file (`memfd`), inherited
//! across `exec`, that lives as long as the mount and leaves nothing on disk.
//!
//! It starts with a header page (a magic number and the offset where records start); records
//! are `[tag u8][length u32 LE][payload]`, each written with one `write`; a daemon killed in
//! the middle of one leaves a torn tail, which the next reading cuts off (nothing was answered
//! from it: an id is recorded before the reply that carries it). A tag the journal does not
//! know (`record.rs`) ends the records rather than being misread.
//!
//! A checkpoint record holds a whole record stream that supersedes everything before it:
//! reading takes the records of the last whole checkpoint followed by those after it. Writing
//! one is the commit point (a torn checkpoint is cut like any torn record, and the records
//! before it still read the same); then the header's start moves to the checkpoint and the
//! pages before it are punched out of the file, which frees their memory. A crash between any
//! two of these steps leaves a log that reads the same.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;

use super::record::is_tag;

/// The largest record the log accepts (a partition of a few hundred thousand files).
const MAX_RECORD: usize = 256 << 20;

/// The tag of a checkpoint record.
const CHECKPOINT: u8 = 11;

/// The header page: `[magic 8][version u32][0 u32][start u64]`, then zeros.
pub(super) const HEADER: u64 = 4096;
const PAGE: u64 = 4096;
/// Its first byte is no tag: a daemon that predates the header reads no records, rather than
/// misreading them.
const MAGIC: &[u8; 8] = b"\0hudiRJ\x01";
const VERSION: u32 = 1;
const START_AT: u64 = 16;

/// A record as the log holds it: tag and payload.
pub(super) type RawRecord = (u8, Vec<u8>);

/// What a reading found.
pub(super) struct Reading {
    /// The records of the last whole checkpoint, then those after it.
    pub records: Vec<RawRecord>,
    /// How many of them follow the last checkpoint.
    pub since_checkpoint: usize,
}

/// One record's bytes appended to `out`.
pub(super) fn frame(out: &mut Vec<u8>, tag: u8, payload: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The records of `bytes` as far as they are whole, and where they end.
fn parse(bytes: &[u8]) -> (Reading, usize) {
    let mut records = Vec::new();
    let mut since_checkpoint = 0;
    let mut at = 0usize;
    while let Some(head) = bytes.get(at..at + 5) {
        let (tag, len) = (
            head[0],
            u32::from_le_bytes([head[1], head[2], head[3], head[4]]),
        );
        let len = len as usize;
        if tag != CHECKPOINT && (len > MAX_RECORD || !is_tag(tag)) {
            break;
        }
        let Some(payload) = bytes.get(at + 5..at + 5 + len) else {
            break;
        };
        if tag == CHECKPOINT {
            let (inner, end) = parse(payload);
            if end < payload.len() {
                log::warn!("restart journal: a checkpoint does not read to its end");
            }
            records = inner.records;
            since_checkpoint = 0;
        } else {
            records.push((tag, payload.to_vec()));
            since_checkpoint += 1;
        }
        at += 5 + len;
    }
    let reading = Reading {
        records,
        since_checkpoint,
    };
    (reading, at)
}

/// The log of one mount.
pub(super) struct MemLog {
    file: File,
    /// Where records start: after the header, or at the last checkpoint (0: a log of a keeper
    /// that predates the header, never checkpointed).
    start: u64,
}

impl MemLog {
    /// A new, empty log.
    pub fn create() -> std::io::Result<MemLog> {
        let file = crate::sys::fds::memfd(c"hudifs-restart-journal")?;
        let mut header = vec![0u8; HEADER as usize];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[START_AT as usize..START_AT as usize + 8].copy_from_slice(&HEADER.to_le_bytes());
        file.write_all_at(&header, 0)?;
        Ok(MemLog {
            file,
            start: HEADER,
        })
    }

    /// The log passed down as descriptor `fd` (its start is found by the first reading).
    ///
    /// # Safety
    /// `fd` must be an open descriptor that nothing else in this process owns.
    pub unsafe fn from_raw_fd(fd: RawFd) -> MemLog {
        // SAFETY: the caller hands over ownership.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        MemLog { file, start: 0 }
    }

    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// Whether this log may be checkpointed (it has a header to point at one).
    pub fn has_header(&self) -> bool {
        self.start != 0
    }

    /// Append whole record bytes at the end; a write that fails leaves nothing behind (a torn
    /// record would hide every record after it). Where they start.
    pub fn append(&mut self, rec: &[u8]) -> std::io::Result<u64> {
        let end = self.file.seek(SeekFrom::End(0))?;
        if let Err(e) = self.file.write_all(rec) {
            let _ = self.file.set_len(end);
            return Err(e);
        }
        Ok(end)
    }

    /// Read the header and the records; cut a torn tail.
    pub fn read(&mut self) -> std::io::Result<Reading> {
        let size = self.file.metadata()?.len();
        let mut head = [0u8; 24];
        self.start = if size >= HEADER
            && self.file.read_exact_at(&mut head, 0).is_ok()
            && head[..8] == *MAGIC
        {
            let start = u64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
            if !(HEADER..=size).contains(&start) {
                return Err(std::io::Error::other(format!(
                    "the journal's records start at {start}, outside its {size} bytes"
                )));
            }
            start
        } else {
            0
        };
        let mut bytes = vec![0u8; (size - self.start) as usize];
        self.file.read_exact_at(&mut bytes, self.start)?;
        let (reading, at) = parse(&bytes);
        if at < bytes.len() {
            log::info!(
                "restart journal: cut {} bytes of a record torn by the previous daemon",
                bytes.len() - at
            );
            self.file.set_len(self.start + at as u64)?;
        }
        Ok(reading)
    }

    /// Append `state` (a record stream) as a checkpoint, start the records there, free what
    /// came before.
    pub fn checkpoint(&mut self, state: &[u8]) -> std::io::Result<()> {
        if state.len() > u32::MAX as usize {
            return Err(std::io::Error::other("the live state is over 4 GiB"));
        }
        let mut rec = Vec::with_capacity(5 + state.len());
        frame(&mut rec, CHECKPOINT, state);
        // The commit point: a reader finds the checkpoint from the old start too.
        let at = self.append(&rec)?;
        self.file.write_all_at(&at.to_le_bytes(), START_AT)?;
        self.start = at;
        let freed = at / PAGE * PAGE;
        if freed > HEADER {
            // The range is inside the file.
            crate::sys::fds::punch_hole(&self.file, HEADER, freed - HEADER)?;
        }
        Ok(())
    }

    /// The file's length and the memory it holds, in bytes.
    pub fn held(&self) -> std::io::Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let md = self.file.metadata()?;
        Ok((md.len(), md.blocks() * 512))
    }

    /// Bytes written at the end as they are (a torn record, garbage): for tests.
    #[cfg(test)]
    pub fn append_raw(&mut self, bytes: &[u8]) {
        self.file.seek(SeekFrom::End(0)).unwrap();
        self.file.write_all(bytes).unwrap();
    }

    /// Where records start now: for tests.
    #[cfg(test)]
    pub fn start(&self) -> u64 {
        self.start
    }
}
