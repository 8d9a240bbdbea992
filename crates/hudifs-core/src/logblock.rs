//! Hudi log files (`HoodieLogFormat`): a sequence of blocks, each `#HUDI#`, a 64-bit block
//! size, the format version, the block type, a header, the content, a footer and the block's
//! length again. Used by the archived timeline (layout 1 archive logs), by the table generator
//! and by the merge of log records.
//!
//! Parsing never trusts a length it has not checked against the bytes left. A block that is
//! truncated or inconsistent is reported and skipped, and reading resumes at the next block
//! magic, as Java's `HoodieLogFileReader` turns such a stretch into a `HoodieCorruptBlock`.

use std::collections::BTreeMap;
use std::fmt;

/// The magic every block starts with.
pub const LOG_MAGIC: &[u8; 6] = b"#HUDI#";
/// `HoodieLogFormat.CURRENT_VERSION`.
pub const LOG_FORMAT_VERSION: i32 = 1;

/// `HoodieLogBlockType`, by its number in the file.
pub mod block_type {
    pub const COMMAND_BLOCK: i32 = 0;
    pub const DELETE_BLOCK: i32 = 1;
    pub const CORRUPT_BLOCK: i32 = 2;
    pub const AVRO_DATA_BLOCK: i32 = 3;
    pub const HFILE_DATA_BLOCK: i32 = 4;
    pub const PARQUET_DATA_BLOCK: i32 = 5;
    pub const CDC_DATA_BLOCK: i32 = 6;
}

/// `HeaderMetadataType`, by its number in the file.
pub mod header {
    pub const INSTANT_TIME: i32 = 0;
    pub const TARGET_INSTANT_TIME: i32 = 1;
    pub const SCHEMA: i32 = 2;
    pub const COMMAND_BLOCK_TYPE: i32 = 3;
    pub const COMPACTED_BLOCK_TIMES: i32 = 4;
    pub const RECORD_POSITIONS: i32 = 5;
    pub const BLOCK_IDENTIFIER: i32 = 6;
    pub const IS_PARTIAL: i32 = 7;
    pub const BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS: i32 = 8;
}

/// One block of a Hudi log file, as found in the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBlock<'a> {
    /// Offset of the block's magic in the file.
    pub offset: usize,
    pub block_type: i32,
    pub header: BTreeMap<i32, String>,
    pub content: &'a [u8],
    pub footer: BTreeMap<i32, String>,
}

/// Why bytes are not a well-formed block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockError {
    /// The data ends (or the block's stated size ends) before a field.
    Truncated { at: usize },
    /// A length field is negative.
    NegativeLength(i64),
    /// A header or footer value is not UTF-8.
    NotUtf8,
    /// A block size that runs past the end of the file.
    PastEnd { size: usize, file: usize },
    /// A format version this reader does not know.
    Version(i32),
    /// The stated block size and the fields inside disagree.
    SizeMismatch { size: usize, fields: usize },
    /// The trailing length disagrees with the block.
    TrailerMismatch { trailer: i64, block: usize },
}

impl fmt::Display for BlockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlockError::Truncated { at } => write!(f, "truncated at byte {at}"),
            BlockError::NegativeLength(n) => write!(f, "negative length {n}"),
            BlockError::NotUtf8 => write!(f, "header value is not UTF-8"),
            BlockError::PastEnd { size, file } => write!(
                f,
                "block size {size} runs past the end of the file ({file} bytes)"
            ),
            BlockError::Version(v) => write!(
                f,
                "log format version {v} is not supported (only {LOG_FORMAT_VERSION})"
            ),
            BlockError::SizeMismatch { size, fields } => write!(
                f,
                "block size {size} disagrees with its contents ({fields} bytes)"
            ),
            BlockError::TrailerMismatch { trailer, block } => write!(
                f,
                "trailing block length {trailer} disagrees with the block ({block} bytes)"
            ),
        }
    }
}

impl std::error::Error for BlockError {}

/// A stretch of a log file that was skipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skipped {
    /// Bytes `from..to` are not a block (garbage, or a truncated tail when `to` is the end).
    NotABlock { from: usize, to: usize, tail: bool },
    /// The block at `at` is corrupt.
    Corrupt { at: usize, error: BlockError },
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Skipped::NotABlock { from, to, tail } => {
                write!(f, "bytes {from}..{to} are not a log block")?;
                if *tail {
                    write!(f, " (truncated tail?)")?;
                }
                write!(f, "; skipped")
            }
            Skipped::Corrupt { at, error } => {
                write!(f, "corrupt block at byte {at}: {error}; skipped")
            }
        }
    }
}

/// A big-endian cursor over `bytes[pos..end]`.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor {
            bytes,
            pos: 0,
            end: bytes.len(),
        }
    }

    /// Where the cursor is.
    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], BlockError> {
        let stop = self
            .pos
            .checked_add(n)
            .filter(|&s| s <= self.end)
            .ok_or(BlockError::Truncated { at: self.pos })?;
        let s = &self.bytes[self.pos..stop];
        self.pos = stop;
        Ok(s)
    }

    pub fn i32(&mut self) -> Result<i32, BlockError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i64(&mut self) -> Result<i64, BlockError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(i64::from_be_bytes(a))
    }

    pub fn len32(&mut self) -> Result<usize, BlockError> {
        let n = self.i32()?;
        usize::try_from(n).map_err(|_| BlockError::NegativeLength(n.into()))
    }

    pub fn len64(&mut self) -> Result<usize, BlockError> {
        let n = self.i64()?;
        usize::try_from(n).map_err(|_| BlockError::NegativeLength(n))
    }

    /// A header or footer: i32 count, then (i32 key, i32 length, UTF-8 value) entries. Each
    /// entry takes at least eight bytes, so a count past the data ends in an error.
    pub fn metadata(&mut self) -> Result<BTreeMap<i32, String>, BlockError> {
        let n = self.len32()?;
        let mut out = BTreeMap::new();
        for _ in 0..n {
            let key = self.i32()?;
            let len = self.len32()?;
            let value = std::str::from_utf8(self.take(len)?).map_err(|_| BlockError::NotUtf8)?;
            out.insert(key, value.to_string());
        }
        Ok(out)
    }
}

/// A block's front after its size: the format version (checked), the block type, the header
/// and the content's length.
fn front_of(c: &mut Cursor<'_>) -> Result<(i32, BTreeMap<i32, String>, usize), BlockError> {
    let version = c.i32()?;
    if version != LOG_FORMAT_VERSION {
        return Err(BlockError::Version(version));
    }
    let block_type = c.i32()?;
    let header = c.metadata()?;
    let content_len = c.len64()?;
    Ok((block_type, header, content_len))
}

/// Parse the block whose magic is at `start`; returns it and the offset after it.
fn parse_block(bytes: &[u8], start: usize) -> Result<(LogBlock<'_>, usize), BlockError> {
    let mut c = Cursor {
        bytes,
        pos: start + LOG_MAGIC.len(),
        end: bytes.len(),
    };
    let size = c.len64()?;
    let body_start = c.pos;
    let body_end = body_start
        .checked_add(size)
        .filter(|&e| e <= bytes.len())
        .ok_or(BlockError::PastEnd {
            size,
            file: bytes.len(),
        })?;
    c.end = body_end;
    let (block_type, header, content_len) = front_of(&mut c)?;
    let content = c.take(content_len)?;
    let footer = c.metadata()?;
    let trailing = c.i64()?;
    if c.pos != body_end {
        return Err(BlockError::SizeMismatch {
            size,
            fields: c.pos - body_start,
        });
    }
    if trailing != (body_end - 8 - start) as i64 {
        return Err(BlockError::TrailerMismatch {
            trailer: trailing,
            block: body_end - 8 - start,
        });
    }
    Ok((
        LogBlock {
            offset: start,
            block_type,
            header,
            content,
            footer,
        },
        body_end,
    ))
}

fn find_magic(bytes: &[u8], from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(LOG_MAGIC.len())
        .position(|w| w == LOG_MAGIC)
        .map(|p| p + from)
}

/// The blocks of a Hudi log file, and the stretches that were skipped.
pub fn scan_log_blocks(bytes: &[u8]) -> (Vec<LogBlock<'_>>, Vec<Skipped>) {
    let mut blocks = Vec::new();
    let mut skipped = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        if !bytes[pos..].starts_with(LOG_MAGIC) {
            let next = find_magic(bytes, pos + 1);
            skipped.push(Skipped::NotABlock {
                from: pos,
                to: next.unwrap_or(bytes.len()),
                tail: next.is_none(),
            });
            pos = next.unwrap_or(bytes.len());
            continue;
        }
        match parse_block(bytes, pos) {
            Ok((block, next)) => {
                blocks.push(block);
                pos = next;
            }
            Err(error) => {
                let next = find_magic(bytes, pos + 1).unwrap_or(bytes.len());
                skipped.push(Skipped::Corrupt { at: pos, error });
                pos = next;
            }
        }
    }
    (blocks, skipped)
}

/// Where a block is in its file and what its header says; its content is not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockInfo {
    /// Offset of the block's magic in the file.
    pub offset: usize,
    pub block_type: i32,
    pub header: BTreeMap<i32, String>,
    /// Where the content lies in the file.
    pub content: std::ops::Range<usize>,
}

impl BlockInfo {
    fn of(b: LogBlock<'_>, file: &[u8]) -> BlockInfo {
        let start = b.content.as_ptr() as usize - file.as_ptr() as usize;
        BlockInfo {
            offset: b.offset,
            block_type: b.block_type,
            content: start..start + b.content.len(),
            header: b.header,
        }
    }
}

/// [`scan_log_blocks`] as [`BlockInfo`]s: where each block's content lies, not the content.
fn scan_block_infos(bytes: &[u8]) -> (Vec<BlockInfo>, Vec<Skipped>) {
    let (blocks, skipped) = scan_log_blocks(bytes);
    let infos = blocks
        .into_iter()
        .map(|b| BlockInfo::of(b, bytes))
        .collect();
    (infos, skipped)
}

/// The most of a block's front (version, type, header) or back (footer, trailing length)
/// [`scan_block_headers`] reads before it leaves the file to a whole scan.
const MAX_HEADER_READ: usize = 1 << 20;

/// The blocks of a log file of `len` bytes, read block by block through `read_at(offset,
/// buf)` (which fills `buf`): each block's size, then its front up to the content, then its
/// footer and trailing length. The content is skipped, so a cached merge is recognised
/// without reading the log records. The checks are [`scan_log_blocks`]'s; a file that is not
/// a clean run of well-formed blocks (a stretch to skip, a corrupt block, an outsized header)
/// gives `None`: only its bytes show where the next block starts, so it is scanned whole.
pub fn scan_block_headers(
    len: usize,
    read_at: &mut dyn FnMut(u64, &mut [u8]) -> std::io::Result<()>,
) -> std::io::Result<Option<Vec<BlockInfo>>> {
    let mut w = Window {
        read_at,
        len,
        start: 0,
        buf: Vec::new(),
    };
    let mut blocks = Vec::new();
    let mut pos = 0usize;
    while pos < len {
        // Magic and block size.
        if len - pos < 14 {
            return Ok(None);
        }
        let lead = w.get(pos, 14)?;
        if &lead[..6] != LOG_MAGIC {
            return Ok(None);
        }
        let Ok(size) = Cursor::new(&lead[6..]).len64() else {
            return Ok(None);
        };
        let body_start = pos + 14;
        let Some(body_end) = body_start.checked_add(size).filter(|&e| e <= len) else {
            return Ok(None);
        };
        // Version, type, header and content length: the first 16 KiB of the body, more if
        // the header (its schema) is longer.
        let mut want = size.min(16 << 10);
        let (block_type, header, content_start, content_len) = loop {
            let mut c = Cursor::new(w.get(body_start, want)?);
            match front_of(&mut c) {
                Ok((t, h, n)) => break (t, h, body_start + c.pos(), n),
                Err(BlockError::Truncated { .. }) if want < size && want < MAX_HEADER_READ => {
                    want = size.min(want * 4).min(MAX_HEADER_READ);
                }
                Err(_) => return Ok(None),
            }
        };
        let Some(content_end) = content_start
            .checked_add(content_len)
            .filter(|&e| e <= body_end)
        else {
            return Ok(None);
        };
        // Footer and trailing length: the rest of the block.
        let back_len = body_end - content_end;
        if back_len > MAX_HEADER_READ {
            return Ok(None);
        }
        let mut c = Cursor::new(w.get(content_end, back_len)?);
        let (Ok(_footer), Ok(trailing)) = (c.metadata(), c.i64()) else {
            return Ok(None);
        };
        if c.pos() != back_len || trailing != (body_end - 8 - pos) as i64 {
            return Ok(None);
        }
        blocks.push(BlockInfo {
            offset: pos,
            block_type,
            header,
            content: content_start..content_end,
        });
        pos = body_end;
    }
    Ok(Some(blocks))
}

/// The bytes read last by [`scan_block_headers`]: each read takes at least 64 KiB, so that a
/// block's footer, the next block's size and its header come in one read, and a log of small
/// blocks in a few.
struct Window<'r> {
    read_at: &'r mut dyn FnMut(u64, &mut [u8]) -> std::io::Result<()>,
    len: usize,
    start: usize,
    buf: Vec<u8>,
}

impl Window<'_> {
    /// Bytes `at..at + n` of the file (within its length).
    fn get(&mut self, at: usize, n: usize) -> std::io::Result<&[u8]> {
        let have = at >= self.start && at + n <= self.start + self.buf.len();
        if !have {
            let want = n.max(64 << 10).min(self.len - at);
            self.buf.resize(want, 0);
            (self.read_at)(at as u64, &mut self.buf)?;
            self.start = at;
        }
        let from = at - self.start;
        Ok(&self.buf[from..from + n])
    }
}

/// The rollback command (`HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK`).
const ROLLBACK: &str = "0";

/// A block that counts, not yet decoded.
#[derive(Debug, Clone)]
pub struct Chosen {
    pub file: usize,
    pub offset: usize,
    pub block_type: i32,
    pub instant: String,
    pub header: BTreeMap<i32, String>,
    pub content: std::ops::Range<usize>,
}

/// Choose the blocks of a slice's log files that count, in merge order. `files` are the log
/// files' bytes in merge order (Java's log-file comparator: instant, version, write token);
/// `names` name them in messages. In the order of the files and of the blocks in each:
///
/// - a rollback command block removes the blocks read before it whose instant is its target
///   (v6 appends the blocks of several instants, and rollbacks of failed ones, to one file);
/// - a data or delete block counts only when `visible` admits its instant;
/// - a block with `COMPACTED_BLOCK_TIMES` (log compaction) replaces the blocks of the instants
///   it lists, taking the place of the first of them, so later writes still override it.
///
/// A counting CDC block in a data log, or a counting block of an unknown type, is an error.
pub fn choose_blocks<B: AsRef<[u8]>>(
    files: &[B],
    names: &[String],
    visible: &dyn Fn(&str) -> bool,
) -> Result<Vec<Chosen>, String> {
    let scans = files.iter().map(|f| scan_block_infos(f.as_ref())).collect();
    choose_scanned(scans, names, visible)
}

/// [`choose_blocks`] over files already scanned: each file's blocks and skipped stretches (a
/// whole scan's, or [`scan_block_headers`]'s with none skipped).
pub fn choose_scanned(
    scans: Vec<(Vec<BlockInfo>, Vec<Skipped>)>,
    names: &[String],
    visible: &dyn Fn(&str) -> bool,
) -> Result<Vec<Chosen>, String> {
    let mut kept: Vec<Chosen> = Vec::new();
    for (fi, (blocks, problems)) in scans.into_iter().enumerate() {
        for p in problems {
            log::info!(
                "{}: {p} (a corrupt block; Hudi's readers skip it too)",
                names[fi]
            );
        }
        for b in blocks {
            let Some(instant) = b.header.get(&header::INSTANT_TIME).cloned() else {
                log::info!(
                    "{}: block at byte {} has no instant time; skipped as corrupt",
                    names[fi],
                    b.offset
                );
                continue;
            };
            let chosen = Chosen {
                file: fi,
                offset: b.offset,
                block_type: b.block_type,
                instant: instant.clone(),
                content: b.content,
                header: b.header,
            };
            match b.block_type {
                block_type::COMMAND_BLOCK => {
                    let command = chosen
                        .header
                        .get(&header::COMMAND_BLOCK_TYPE)
                        .map(String::as_str);
                    let target = chosen.header.get(&header::TARGET_INSTANT_TIME);
                    match (command, target) {
                        (Some(ROLLBACK), Some(target)) => kept.retain(|k| &k.instant != target),
                        _ => log::info!(
                            "{}: command block at byte {} is not a rollback with a target; skipped",
                            names[fi],
                            b.offset
                        ),
                    }
                }
                block_type::CORRUPT_BLOCK => {}
                block_type::DELETE_BLOCK
                | block_type::AVRO_DATA_BLOCK
                | block_type::PARQUET_DATA_BLOCK
                | block_type::HFILE_DATA_BLOCK
                | block_type::CDC_DATA_BLOCK => {
                    if !visible(&instant) {
                        continue;
                    }
                    if b.block_type == block_type::CDC_DATA_BLOCK {
                        return Err(format!(
                            "{}: a CDC block in a data log at byte {} (instant {instant})",
                            names[fi], b.offset
                        ));
                    }
                    match chosen.header.get(&header::COMPACTED_BLOCK_TIMES) {
                        Some(times) => {
                            let replaced: Vec<&str> = times
                                .split(',')
                                .map(str::trim)
                                .filter(|s| !s.is_empty())
                                .collect();
                            let at = kept
                                .iter()
                                .position(|k| replaced.contains(&k.instant.as_str()))
                                .unwrap_or(kept.len());
                            let before = kept[..at].len();
                            kept.retain(|k| !replaced.contains(&k.instant.as_str()));
                            kept.insert(before.min(kept.len()), chosen);
                        }
                        None => kept.push(chosen),
                    }
                }
                other => {
                    if visible(&instant) {
                        return Err(format!(
                            "{}: block of unknown type {other} at byte {} (instant {instant})",
                            names[fi], b.offset
                        ));
                    }
                }
            }
        }
    }
    Ok(kept)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One well-formed block of `block_type` with `header` and `content`.
    fn block(block_type: i32, header: &[(i32, &str)], content: &[u8]) -> Vec<u8> {
        let meta = |m: &[(i32, &str)]| {
            let mut v = (m.len() as i32).to_be_bytes().to_vec();
            for (k, val) in m {
                v.extend(k.to_be_bytes());
                v.extend((val.len() as i32).to_be_bytes());
                v.extend(val.as_bytes());
            }
            v
        };
        let mut body = LOG_FORMAT_VERSION.to_be_bytes().to_vec();
        body.extend(block_type.to_be_bytes());
        body.extend(meta(header));
        body.extend((content.len() as i64).to_be_bytes());
        body.extend(content);
        body.extend(meta(&[]));
        let mut out = LOG_MAGIC.to_vec();
        out.extend(((body.len() + 8) as i64).to_be_bytes());
        out.extend(&body);
        out.extend(((LOG_MAGIC.len() + 8 + body.len()) as i64).to_be_bytes());
        out
    }

    fn a_log() -> Vec<u8> {
        let schema = "s".repeat(40_000);
        let mut log = block(
            block_type::AVRO_DATA_BLOCK,
            &[(header::INSTANT_TIME, "001"), (header::SCHEMA, &schema)],
            &[7u8; 5000],
        );
        log.extend(block(
            block_type::DELETE_BLOCK,
            &[(header::INSTANT_TIME, "002")],
            b"keys",
        ));
        log.extend(block(
            block_type::COMMAND_BLOCK,
            &[
                (header::INSTANT_TIME, "003"),
                (header::TARGET_INSTANT_TIME, "002"),
                (header::COMMAND_BLOCK_TYPE, "0"),
            ],
            b"",
        ));
        log
    }

    fn by_headers(bytes: &[u8]) -> Option<Vec<BlockInfo>> {
        scan_block_headers(bytes.len(), &mut |at, buf| {
            let at = at as usize;
            buf.copy_from_slice(&bytes[at..at + buf.len()]);
            Ok(())
        })
        .unwrap()
    }

    #[test]
    fn headers_alone_find_the_blocks_a_whole_scan_finds() {
        let log = a_log();
        let (infos, skipped) = scan_block_infos(&log);
        assert!(skipped.is_empty());
        assert_eq!(infos.len(), 3);
        assert_eq!(by_headers(&log), Some(infos));
        assert_eq!(by_headers(b""), Some(vec![]));
        // Reads of 64 KiB at least: this 45 KB log in one.
        let mut reads = 0;
        scan_block_headers(log.len(), &mut |at, buf| {
            reads += 1;
            let at = at as usize;
            buf.copy_from_slice(&log[at..at + buf.len()]);
            Ok(())
        })
        .unwrap();
        assert_eq!(reads, 1);
    }

    #[test]
    fn a_log_that_is_not_a_clean_run_of_blocks_is_left_to_a_whole_scan() {
        let log = a_log();
        let first = scan_block_infos(&log).0[1].offset;
        // Garbage between blocks, a truncated tail, a wrong trailing length.
        let mut garbage = log[..first].to_vec();
        garbage.extend(b"xx");
        garbage.extend(&log[first..]);
        let truncated = &log[..log.len() - 3];
        let mut trailer = log.clone();
        let at = first - 1;
        trailer[at] ^= 1;
        for bad in [&garbage[..], truncated, &trailer[..]] {
            assert!(!scan_block_infos(bad).1.is_empty());
            assert_eq!(by_headers(bad), None);
        }
    }

    proptest! {
        /// Whatever the bytes, a header scan that answers agrees with the whole scan, which
        /// then skipped nothing.
        #[test]
        fn a_header_scan_never_disagrees_with_a_whole_scan(
            cuts in proptest::collection::vec((0usize..60_000, any::<u8>()), 0..4),
            keep in 0usize..60_000,
        ) {
            let mut log = a_log();
            for (at, b) in cuts {
                let n = log.len();
                log[at % n] = b;
            }
            log.truncate(keep.max(1).min(log.len()));
            if let Some(infos) = by_headers(&log) {
                let (w, skipped) = scan_block_infos(&log);
                prop_assert!(skipped.is_empty());
                prop_assert_eq!(infos, w);
            }
        }
    }

    #[test]
    fn garbage_log_bytes_do_not_panic() {
        for bytes in [
            &b""[..],
            b"#HUDI#",
            b"#HUDI#\x7f\xff\xff\xff\xff\xff\xff\xff",
            b"#HUDI#\xff\xff\xff\xff\xff\xff\xff\xff",
            b"#HUDI#\0\0\0\0\0\0\0\x04\0\0\0\x01",
            b"xx#HUDI##HUDI#",
        ] {
            let (blocks, skipped) = scan_log_blocks(bytes);
            assert!(blocks.is_empty());
            assert_eq!(skipped.is_empty(), bytes.is_empty(), "{bytes:?}");
        }
    }
}
