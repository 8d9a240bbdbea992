//! The byte-level pieces of HFile v3: integers and varints, the hand-decoded protobuf of the
//! trailer and file info, block headers, decompression, index entries and cells. Every function
//! checks each length against the bytes it was given; none panics on any input.

use std::collections::BTreeMap;
use std::io::Read;

use crate::error::{HFileError, Result};

/// Block header of HFile v2/v3 with checksums: magic, two sizes, previous offset, checksum
/// type, bytes per checksum, on-disk data size with header.
pub const HEADER_LEN: usize = 33;
pub const TRAILER_LEN: usize = 4096;

pub const DATA: &[u8; 8] = b"DATABLK*";
pub const ENCODED_DATA: &[u8; 8] = b"DATABLKE";
pub const LEAF_INDEX: &[u8; 8] = b"IDXLEAF2";
pub const INTERMEDIATE_INDEX: &[u8; 8] = b"IDXINTE2";
pub const ROOT_INDEX: &[u8; 8] = b"IDXROOT2";
pub const META: &[u8; 8] = b"METABLKc";
pub const FILE_INFO: &[u8; 8] = b"FILEINF2";
pub const TRAILER: &[u8; 8] = b"TRABLK\"$";
pub const PBUF: &[u8; 4] = b"PBUF";

pub fn be_u16(b: &[u8], at: usize) -> Option<u16> {
    let s = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([s[0], s[1]]))
}

pub fn be_i32(b: &[u8], at: usize) -> Option<i32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

pub fn be_i64(b: &[u8], at: usize) -> Option<i64> {
    let s = b.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(i64::from_be_bytes(a))
}

/// A Hadoop `WritableUtils` vlong at `at`: the value and the bytes it took.
pub fn hadoop_vlong(b: &[u8], at: usize) -> Option<(i64, usize)> {
    let first = *b.get(at)? as i8;
    if first >= -112 {
        return Some((first as i64, 1));
    }
    let (negative, len) = if first < -120 {
        (true, (-119 - first as i32) as usize)
    } else {
        (false, (-111 - first as i32) as usize)
    };
    let rest = b.get(at + 1..at.checked_add(len)?)?;
    let mut v: i64 = 0;
    for &byte in rest {
        v = (v << 8) | byte as i64;
    }
    Some((if negative { !v } else { v }, len))
}

#[cfg(any(test, feature = "writer"))]
pub fn put_hadoop_vlong(out: &mut Vec<u8>, v: i64) {
    if (-112..=127).contains(&v) {
        out.push(v as i8 as u8);
        return;
    }
    let (mut len, mag) = if v < 0 { (-120i32, !v) } else { (-112i32, v) };
    let mut tmp = mag;
    while tmp != 0 {
        tmp >>= 8;
        len -= 1;
    }
    out.push(len as i8 as u8);
    let n = if len < -120 {
        -(len + 120)
    } else {
        -(len + 112)
    };
    for i in (0..n).rev() {
        out.push((mag >> (i * 8)) as u8);
    }
}

/// A protobuf base-128 varint at `*pos` (at most 10 bytes).
pub fn pb_varint(b: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v: u64 = 0;
    for i in 0..10 {
        let byte = *b.get(*pos)?;
        *pos += 1;
        v |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

#[cfg(any(test, feature = "writer"))]
pub fn put_pb_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// One field of a protobuf message: its number and its varint or length-delimited value.
/// Fixed-width fields are skipped over; groups are refused.
pub enum PbValue<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

pub fn pb_fields(msg: &[u8]) -> Result<Vec<(u64, PbValue<'_>)>> {
    let bad = |what: &str| HFileError::malformed(format!("protobuf message: {what}"));
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < msg.len() {
        let tag = pb_varint(msg, &mut pos).ok_or_else(|| bad("truncated tag"))?;
        let field = tag >> 3;
        let value = match tag & 7 {
            0 => PbValue::Varint(pb_varint(msg, &mut pos).ok_or_else(|| bad("truncated varint"))?),
            1 | 5 => {
                let n = if tag & 7 == 1 { 8 } else { 4 };
                if msg.len() - pos < n {
                    return Err(bad("truncated fixed field"));
                }
                pos += n;
                PbValue::Fixed
            }
            2 => {
                let len = pb_varint(msg, &mut pos).ok_or_else(|| bad("truncated length"))?;
                let len = usize::try_from(len)
                    .ok()
                    .filter(|&l| l <= msg.len() - pos)
                    .ok_or_else(|| bad("field runs past the message"))?;
                let v = &msg[pos..pos + len];
                pos += len;
                PbValue::Bytes(v)
            }
            w => return Err(bad(&format!("wire type {w} of field {field}"))),
        };
        out.push((field, value));
    }
    Ok(out)
}

/// A varint-length-delimited message at the start of `b`: the message and the bytes taken.
pub fn pb_delimited(b: &[u8]) -> Result<(&[u8], usize)> {
    let mut pos = 0;
    let len =
        pb_varint(b, &mut pos).ok_or_else(|| HFileError::malformed("truncated protobuf length"))?;
    let len = usize::try_from(len)
        .ok()
        .filter(|&l| l <= b.len() - pos)
        .ok_or_else(|| {
            HFileError::malformed(format!(
                "protobuf length {len} runs past its {} bytes",
                b.len() - pos
            ))
        })?;
    Ok((&b[pos..pos + len], pos + len))
}

/// The block compression codecs (Hadoop's `Compression.Algorithm` ids, which HFile stores).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    Lzo,
    Gzip,
    None,
    Snappy,
    Lz4,
    Bzip2,
    Zstd,
}

impl Codec {
    pub fn from_id(id: u64) -> Result<Codec> {
        Ok(match id {
            0 => Codec::Lzo,
            1 => Codec::Gzip,
            2 => Codec::None,
            3 => Codec::Snappy,
            4 => Codec::Lz4,
            5 => Codec::Bzip2,
            6 => Codec::Zstd,
            _ => {
                return Err(HFileError::malformed(format!(
                    "unknown compression codec id {id}"
                )))
            }
        })
    }

    pub fn id(self) -> u64 {
        match self {
            Codec::Lzo => 0,
            Codec::Gzip => 1,
            Codec::None => 2,
            Codec::Snappy => 3,
            Codec::Lz4 => 4,
            Codec::Bzip2 => 5,
            Codec::Zstd => 6,
        }
    }

    pub fn is_supported(self) -> bool {
        matches!(self, Codec::None | Codec::Gzip | Codec::Snappy)
    }

    /// Decompress one block payload, which must come to exactly `expected` bytes.
    pub fn decompress(self, data: &[u8], expected: usize) -> Result<Vec<u8>> {
        let out = match self {
            Codec::None => data.to_vec(),
            Codec::Gzip => {
                // Hadoop's gzip stream may hold several members; read one past `expected` so
                // an overlong stream is seen without inflating all of it.
                let mut out = Vec::new();
                flate2::read::MultiGzDecoder::new(data)
                    .take(expected as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| HFileError::malformed(format!("GZIP block: {e}")))?;
                out
            }
            Codec::Snappy => hadoop_snappy_decompress(data, expected)?,
            other => {
                return Err(HFileError::Unsupported(format!(
                    "blocks compressed with {other:?}"
                )))
            }
        };
        if out.len() != expected {
            return Err(HFileError::malformed(format!(
                "block decompresses to {}{} bytes, its header says {expected}",
                out.len().min(expected),
                if out.len() > expected { "+" } else { "" }
            )));
        }
        Ok(out)
    }

    pub fn compress(self, data: &[u8]) -> Result<Vec<u8>> {
        match self {
            Codec::None => Ok(data.to_vec()),
            Codec::Gzip => {
                use std::io::Write;
                let mut enc =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                enc.write_all(data)
                    .and_then(|_| enc.finish())
                    .map_err(|e| HFileError::Write(format!("GZIP: {e}")))
            }
            Codec::Snappy => hadoop_snappy_compress(data),
            other => Err(HFileError::Write(format!("codec {other:?} is not written"))),
        }
    }
}

/// Hadoop's `BlockCompressorStream` framing of Snappy (what HBase's and Hudi's Snappy codecs
/// write): blocks of [uncompressed length: u32 BE] then chunks of [compressed length: u32 BE]
/// [raw Snappy] until the block's uncompressed length is reached.
fn hadoop_snappy_decompress(data: &[u8], expected: usize) -> Result<Vec<u8>> {
    let bad = |s: String| HFileError::malformed(format!("Snappy block: {s}"));
    let u32_at = |pos: usize| -> Result<usize> {
        data.get(pos..pos + 4)
            .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize)
            .ok_or_else(|| bad(format!("truncated length at byte {pos}")))
    };
    let mut out = Vec::new();
    let mut pos = 0;
    let mut decoder = snap::raw::Decoder::new();
    while pos < data.len() {
        let block_len = u32_at(pos)?;
        pos += 4;
        if block_len > expected - out.len() {
            return Err(bad(format!(
                "a block of {block_len} bytes past the {expected} expected"
            )));
        }
        let block_end = out.len() + block_len;
        while out.len() < block_end {
            let chunk_len = u32_at(pos)?;
            pos += 4;
            let chunk = data
                .get(pos..pos.saturating_add(chunk_len))
                .ok_or_else(|| bad(format!("chunk of {chunk_len} bytes runs past the block")))?;
            pos += chunk_len;
            let n = snap::raw::decompress_len(chunk).map_err(|e| bad(e.to_string()))?;
            if n > block_end - out.len() {
                return Err(bad(format!("chunk of {n} bytes overruns its block")));
            }
            // No Snappy element expands more than 64 bytes from 3: a larger claim is forged,
            // and is refused before the output is allocated.
            if n > chunk_len.saturating_mul(22).saturating_add(64) {
                return Err(bad(format!(
                    "chunk of {chunk_len} bytes claims {n} bytes of output"
                )));
            }
            let at = out.len();
            out.resize(at + n, 0);
            decoder
                .decompress(chunk, &mut out[at..])
                .map_err(|e| bad(e.to_string()))?;
            if n == 0 && chunk_len == 0 {
                // An empty chunk makes no progress; refuse rather than loop on it.
                return Err(bad("empty chunk inside a non-empty block".into()));
            }
        }
    }
    Ok(out)
}

fn hadoop_snappy_compress(data: &[u8]) -> Result<Vec<u8>> {
    const CHUNK: usize = 256 * 1024;
    let mut out = Vec::new();
    let mut enc = snap::raw::Encoder::new();
    for piece in data.chunks(CHUNK) {
        let c = enc
            .compress_vec(piece)
            .map_err(|e| HFileError::Write(format!("Snappy: {e}")))?;
        out.extend_from_slice(&(piece.len() as u32).to_be_bytes());
        out.extend_from_slice(&(c.len() as u32).to_be_bytes());
        out.extend_from_slice(&c);
    }
    Ok(out)
}

/// A block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub magic: [u8; 8],
    pub on_disk_size_without_header: usize,
    pub uncompressed_size_without_header: usize,
    pub prev_block_offset: i64,
    pub checksum_type: u8,
    pub bytes_per_checksum: u32,
    pub on_disk_data_size_with_header: usize,
}

impl Header {
    pub fn parse(b: &[u8]) -> Result<Header> {
        if b.len() < HEADER_LEN {
            return Err(HFileError::malformed(format!(
                "block header truncated ({} of {HEADER_LEN} bytes)",
                b.len()
            )));
        }
        let mut magic = [0u8; 8];
        magic.copy_from_slice(&b[..8]);
        let size = |at: usize, what: &str| -> Result<usize> {
            let v = be_i32(b, at).unwrap_or(-1);
            usize::try_from(v)
                .map_err(|_| HFileError::malformed(format!("block {what} is negative ({v})")))
        };
        let h = Header {
            magic,
            on_disk_size_without_header: size(8, "on-disk size")?,
            uncompressed_size_without_header: size(12, "uncompressed size")?,
            prev_block_offset: be_i64(b, 16).unwrap_or(-1),
            checksum_type: b[24],
            bytes_per_checksum: be_i32(b, 25).unwrap_or(0) as u32,
            on_disk_data_size_with_header: size(29, "data size")?,
        };
        if h.on_disk_data_size_with_header < HEADER_LEN
            || h.on_disk_data_size_with_header > HEADER_LEN + h.on_disk_size_without_header
        {
            return Err(HFileError::malformed(format!(
                "block data size {} is outside its on-disk size {}",
                h.on_disk_data_size_with_header,
                HEADER_LEN + h.on_disk_size_without_header
            )));
        }
        Ok(h)
    }

    /// The whole block on disk: header, payload and checksums.
    pub fn on_disk_len(&self) -> usize {
        HEADER_LEN + self.on_disk_size_without_header
    }

    pub fn magic_str(&self) -> String {
        String::from_utf8_lossy(&self.magic).into_owned()
    }

    #[cfg(any(test, feature = "writer"))]
    pub fn serialize(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[..8].copy_from_slice(&self.magic);
        h[8..12].copy_from_slice(&(self.on_disk_size_without_header as i32).to_be_bytes());
        h[12..16].copy_from_slice(&(self.uncompressed_size_without_header as i32).to_be_bytes());
        h[16..24].copy_from_slice(&self.prev_block_offset.to_be_bytes());
        h[24] = self.checksum_type;
        h[25..29].copy_from_slice(&(self.bytes_per_checksum as i32).to_be_bytes());
        h[29..33].copy_from_slice(&(self.on_disk_data_size_with_header as i32).to_be_bytes());
        h
    }
}

/// Decode the block at the start of `b` (which must hold all of it) to its header and
/// uncompressed payload. `max_payload` caps the size the header may claim.
pub fn decode_block(b: &[u8], codec: Codec, max_payload: usize) -> Result<(Header, Vec<u8>)> {
    let h = Header::parse(b)?;
    if h.on_disk_len() > b.len() {
        return Err(HFileError::malformed(format!(
            "{} block of {} bytes runs past the {} bytes there",
            h.magic_str(),
            h.on_disk_len(),
            b.len()
        )));
    }
    if h.uncompressed_size_without_header > max_payload {
        return Err(HFileError::TooLarge(format!(
            "{} block of {} uncompressed bytes (limit {max_payload})",
            h.magic_str(),
            h.uncompressed_size_without_header
        )));
    }
    let data = &b[HEADER_LEN..h.on_disk_data_size_with_header];
    let payload = codec.decompress(data, h.uncompressed_size_without_header)?;
    Ok((h, payload))
}

/// One entry of a block index: the row of the first key of the block it points to, and where
/// that block is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    pub row: Vec<u8>,
    pub offset: u64,
    pub size: usize,
}

/// The row of an HFile key (`[row length: u16][row]...`): Hudi's record key.
pub fn key_row(key: &[u8]) -> Result<&[u8]> {
    let len = be_u16(key, 0)
        .ok_or_else(|| HFileError::malformed(format!("key of {} bytes has no row", key.len())))?
        as usize;
    key.get(2..2 + len).ok_or_else(|| {
        HFileError::malformed(format!(
            "row length {len} runs past its key of {} bytes",
            key.len()
        ))
    })
}

fn entry_location(b: &[u8], at: usize) -> Result<(u64, usize)> {
    let offset = be_i64(b, at).ok_or_else(|| HFileError::malformed("index entry truncated"))?;
    let size = be_i32(b, at + 8).ok_or_else(|| HFileError::malformed("index entry truncated"))?;
    let offset = u64::try_from(offset)
        .map_err(|_| HFileError::malformed(format!("index entry offset {offset}")))?;
    let size = usize::try_from(size)
        .map_err(|_| HFileError::malformed(format!("index entry size {size}")))?;
    Ok((offset, size))
}

/// The entries of a root index block: `count` of [offset: i64][on-disk size: i32][key length:
/// vlong][key]. Data index keys are HFile keys (`full_keys`); meta index keys are names. Bytes
/// after the entries (HBase's mid-key metadata) are ignored.
pub fn parse_root_index(b: &[u8], count: usize, full_keys: bool) -> Result<Vec<IndexEntry>> {
    let mut out = Vec::new();
    let mut pos = 0;
    for i in 0..count {
        if b.len() - pos < 13 {
            return Err(HFileError::malformed(format!(
                "root index holds {i} of its {count} entries"
            )));
        }
        let (offset, size) = entry_location(b, pos)?;
        pos += 12;
        let (len, took) = hadoop_vlong(b, pos)
            .ok_or_else(|| HFileError::malformed("root index key length truncated"))?;
        pos += took;
        let key = usize::try_from(len)
            .ok()
            .and_then(|l| b.get(pos..pos.checked_add(l)?))
            .ok_or_else(|| {
                HFileError::malformed(format!(
                    "root index key of length {len} runs past the block"
                ))
            })?;
        pos += key.len();
        let row = if full_keys { key_row(key)? } else { key };
        out.push(IndexEntry {
            row: row.to_vec(),
            offset,
            size,
        });
    }
    Ok(out)
}

/// The entries of a leaf or intermediate index block: [count: i32], count + 1 offsets of the
/// entries (i32, from the end of that table), then entries of [offset: i64][on-disk size: i32]
/// [key], each key running to the next entry.
pub fn parse_nonroot_index(b: &[u8]) -> Result<Vec<IndexEntry>> {
    let bad = |s: String| HFileError::malformed(format!("non-root index block: {s}"));
    let count = be_i32(b, 0).ok_or_else(|| bad("no entry count".into()))?;
    // Each entry takes at least 4 (its offset) + 12 bytes: a count past that is corrupt, and
    // is refused before anything is allocated from it.
    let count = usize::try_from(count)
        .ok()
        .filter(|&c| c <= b.len() / 16)
        .ok_or_else(|| bad(format!("entry count {count} in {} bytes", b.len())))?;
    let entries_start = 4 + 4 * (count + 1);
    if entries_start > b.len() {
        return Err(bad("secondary index truncated".into()));
    }
    let rel = |i: usize| -> Result<usize> {
        let v = be_i32(b, 4 + 4 * i).unwrap_or(-1);
        usize::try_from(v)
            .ok()
            .and_then(|v| v.checked_add(entries_start))
            .filter(|&v| v <= b.len())
            .ok_or_else(|| bad(format!("entry offset {v} outside the block")))
    };
    let mut out = Vec::new();
    for i in 0..count {
        let start = rel(i)?;
        let end = rel(i + 1)?;
        if end < start + 12 {
            return Err(bad(format!("entry {i} spans {start}..{end}")));
        }
        let (offset, size) = entry_location(b, start)?;
        out.push(IndexEntry {
            row: key_row(&b[start + 12..end])?.to_vec(),
            offset,
            size,
        });
    }
    Ok(out)
}

/// How the cells of the data blocks are laid out, from the file info.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CellFormat {
    /// A tags length (u16) and tags follow each value (`hfile.MAX_TAGS_LEN` present).
    pub tags: bool,
    /// An MVCC version (Hadoop vlong) ends each cell.
    pub mvcc: bool,
}

/// One cell of a data block: byte ranges of its row and value inside the block payload.
#[derive(Debug, Clone)]
pub struct Cell {
    pub row: std::ops::Range<usize>,
    pub value: std::ops::Range<usize>,
}

/// Read the cell at `pos` of a data block payload; the cell and the position after it.
pub fn parse_cell(b: &[u8], pos: usize, fmt: CellFormat) -> Result<(Cell, usize)> {
    let bad = |s: String| HFileError::malformed(format!("cell at byte {pos} of its block: {s}"));
    let klen = be_i32(b, pos).ok_or_else(|| bad("truncated".into()))?;
    let vlen = be_i32(b, pos + 4).ok_or_else(|| bad("truncated".into()))?;
    let klen = usize::try_from(klen).map_err(|_| bad(format!("key length {klen}")))?;
    let vlen = usize::try_from(vlen).map_err(|_| bad(format!("value length {vlen}")))?;
    let kstart = pos + 8;
    let vstart = kstart
        .checked_add(klen)
        .filter(|&e| e <= b.len())
        .ok_or_else(|| bad(format!("key of {klen} bytes runs past the block")))?;
    let mut end = vstart
        .checked_add(vlen)
        .filter(|&e| e <= b.len())
        .ok_or_else(|| bad(format!("value of {vlen} bytes runs past the block")))?;
    let row = key_row(&b[kstart..vstart]).map_err(|e| bad(e.to_string()))?;
    let row = kstart + 2..kstart + 2 + row.len();
    let value = vstart..end;
    if fmt.tags {
        let tlen = be_u16(b, end).ok_or_else(|| bad("tags length truncated".into()))? as usize;
        end = end
            .checked_add(2 + tlen)
            .filter(|&e| e <= b.len())
            .ok_or_else(|| bad(format!("tags of {tlen} bytes run past the block")))?;
    }
    if fmt.mvcc {
        let (_, took) = hadoop_vlong(b, end).ok_or_else(|| bad("MVCC version truncated".into()))?;
        end += took;
    }
    Ok((Cell { row, value }, end))
}

/// Every cell of a data block payload, which they must fill exactly, rows in ascending order.
pub fn parse_cells(b: &[u8], fmt: CellFormat) -> Result<Vec<Cell>> {
    let mut out: Vec<Cell> = Vec::new();
    let mut pos = 0;
    while pos < b.len() {
        let (cell, next) = parse_cell(b, pos, fmt)?;
        if let Some(prev) = out.last() {
            if b[prev.row.clone()] > b[cell.row.clone()] {
                return Err(HFileError::malformed(format!(
                    "cell at byte {pos} of its block is out of order"
                )));
            }
        }
        out.push(cell);
        pos = next;
    }
    Ok(out)
}

/// The trailer's fields (`TrailerProto`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trailer {
    pub major_version: u32,
    pub minor_version: u8,
    pub file_info_offset: u64,
    pub load_on_open_offset: u64,
    pub uncompressed_data_index_size: u64,
    pub total_uncompressed_bytes: u64,
    pub data_index_count: u64,
    pub meta_index_count: u64,
    pub entry_count: u64,
    pub num_data_index_levels: u64,
    pub first_data_block_offset: u64,
    pub last_data_block_offset: u64,
    pub comparator_class_name: String,
    pub compression_codec: u64,
    pub encryption_key: Vec<u8>,
}

impl Trailer {
    pub fn parse(b: &[u8]) -> Result<Trailer> {
        if b.len() != TRAILER_LEN {
            return Err(HFileError::malformed(format!(
                "trailer of {} bytes, not {TRAILER_LEN}",
                b.len()
            )));
        }
        if &b[..8] != TRAILER {
            return Err(HFileError::malformed(format!(
                "no trailer magic at {TRAILER_LEN} bytes from the end (found {:?})",
                String::from_utf8_lossy(&b[..8])
            )));
        }
        let v = &b[TRAILER_LEN - 4..];
        let major = u32::from_be_bytes([0, v[1], v[2], v[3]]);
        let minor = v[0];
        if major != 3 {
            return Err(HFileError::Unsupported(format!(
                "HFile version {major}.{minor} (only version 3 is read)"
            )));
        }
        let (msg, _) = pb_delimited(&b[8..TRAILER_LEN - 4])?;
        let mut t = Trailer {
            major_version: major,
            minor_version: minor,
            num_data_index_levels: 1,
            compression_codec: Codec::None.id(),
            ..Trailer::default()
        };
        for (field, value) in pb_fields(msg)? {
            match (field, value) {
                (1, PbValue::Varint(v)) => t.file_info_offset = v,
                (2, PbValue::Varint(v)) => t.load_on_open_offset = v,
                (3, PbValue::Varint(v)) => t.uncompressed_data_index_size = v,
                (4, PbValue::Varint(v)) => t.total_uncompressed_bytes = v,
                (5, PbValue::Varint(v)) => t.data_index_count = v,
                (6, PbValue::Varint(v)) => t.meta_index_count = v,
                (7, PbValue::Varint(v)) => t.entry_count = v,
                (8, PbValue::Varint(v)) => t.num_data_index_levels = v,
                (9, PbValue::Varint(v)) => t.first_data_block_offset = v,
                (10, PbValue::Varint(v)) => t.last_data_block_offset = v,
                (11, PbValue::Bytes(s)) => {
                    t.comparator_class_name = String::from_utf8_lossy(s).into_owned()
                }
                (12, PbValue::Varint(v)) => t.compression_codec = v,
                (13, PbValue::Bytes(s)) => t.encryption_key = s.to_vec(),
                (1..=13, _) => {
                    return Err(HFileError::malformed(format!(
                        "trailer field {field} has the wrong wire type"
                    )))
                }
                _ => {}
            }
        }
        Ok(t)
    }

    #[cfg(any(test, feature = "writer"))]
    pub fn serialize(&self) -> Vec<u8> {
        let mut msg = Vec::new();
        let varint = |msg: &mut Vec<u8>, field: u64, v: u64| {
            put_pb_varint(msg, field << 3);
            put_pb_varint(msg, v);
        };
        varint(&mut msg, 1, self.file_info_offset);
        varint(&mut msg, 2, self.load_on_open_offset);
        varint(&mut msg, 3, self.uncompressed_data_index_size);
        varint(&mut msg, 4, self.total_uncompressed_bytes);
        varint(&mut msg, 5, self.data_index_count);
        varint(&mut msg, 6, self.meta_index_count);
        varint(&mut msg, 7, self.entry_count);
        varint(&mut msg, 8, self.num_data_index_levels);
        varint(&mut msg, 9, self.first_data_block_offset);
        varint(&mut msg, 10, self.last_data_block_offset);
        put_pb_varint(&mut msg, (11 << 3) | 2);
        put_pb_varint(&mut msg, self.comparator_class_name.len() as u64);
        msg.extend_from_slice(self.comparator_class_name.as_bytes());
        varint(&mut msg, 12, self.compression_codec);
        let mut out = Vec::with_capacity(TRAILER_LEN);
        out.extend_from_slice(TRAILER);
        put_pb_varint(&mut out, msg.len() as u64);
        out.extend_from_slice(&msg);
        out.resize(TRAILER_LEN - 4, 0);
        out.push(self.minor_version);
        out.extend_from_slice(&self.major_version.to_be_bytes()[1..]);
        out
    }
}

/// The file info block's payload: "PBUF", then a delimited `InfoProto` of `BytesBytesPair`s.
pub fn parse_file_info(b: &[u8]) -> Result<BTreeMap<Vec<u8>, Vec<u8>>> {
    if b.get(..4) != Some(PBUF) {
        return Err(HFileError::malformed("file info does not start with PBUF"));
    }
    let (msg, _) = pb_delimited(&b[4..])?;
    let mut out = BTreeMap::new();
    for (field, value) in pb_fields(msg)? {
        if field != 1 {
            continue;
        }
        let PbValue::Bytes(pair) = value else {
            return Err(HFileError::malformed("file info entry is not a message"));
        };
        let (mut first, mut second) = (None, None);
        for (f, v) in pb_fields(pair)? {
            match (f, v) {
                (1, PbValue::Bytes(s)) => first = Some(s),
                (2, PbValue::Bytes(s)) => second = Some(s),
                _ => {}
            }
        }
        match (first, second) {
            (Some(k), Some(v)) => {
                out.insert(k.to_vec(), v.to_vec());
            }
            _ => {
                return Err(HFileError::malformed(
                    "file info entry lacks a name or value",
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(any(test, feature = "writer"))]
pub fn serialize_file_info(info: &BTreeMap<Vec<u8>, Vec<u8>>) -> Vec<u8> {
    let mut msg = Vec::new();
    for (k, v) in info {
        let mut pair = Vec::new();
        put_pb_varint(&mut pair, (1 << 3) | 2);
        put_pb_varint(&mut pair, k.len() as u64);
        pair.extend_from_slice(k);
        put_pb_varint(&mut pair, (2 << 3) | 2);
        put_pb_varint(&mut pair, v.len() as u64);
        pair.extend_from_slice(v);
        put_pb_varint(&mut msg, (1 << 3) | 2);
        put_pb_varint(&mut msg, pair.len() as u64);
        msg.extend_from_slice(&pair);
    }
    let mut out = PBUF.to_vec();
    put_pb_varint(&mut out, msg.len() as u64);
    out.extend_from_slice(&msg);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hadoop_vlongs_roundtrip() {
        for v in [
            0i64,
            1,
            -1,
            127,
            -112,
            128,
            -113,
            255,
            256,
            65535,
            1 << 40,
            i64::MAX,
            i64::MIN,
            -(1 << 33),
        ] {
            let mut b = Vec::new();
            put_hadoop_vlong(&mut b, v);
            assert_eq!(hadoop_vlong(&b, 0), Some((v, b.len())), "{v}");
            assert_eq!(hadoop_vlong(&b[..b.len() - 1], 0), None);
        }
        // Known encodings (Hadoop's WritableUtils).
        let mut b = Vec::new();
        put_hadoop_vlong(&mut b, 300);
        assert_eq!(b, [0x8e, 0x01, 0x2c]);
    }

    #[test]
    fn pb_varints_roundtrip_and_stop() {
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            let mut b = Vec::new();
            put_pb_varint(&mut b, v);
            let mut pos = 0;
            assert_eq!(pb_varint(&b, &mut pos), Some(v));
            assert_eq!(pos, b.len());
        }
        let mut pos = 0;
        assert_eq!(pb_varint(&[0x80; 11], &mut pos), None);
    }

    #[test]
    fn snappy_framing_roundtrip_and_bounds() {
        let data: Vec<u8> = (0..600_000u32).map(|i| (i % 251) as u8).collect();
        let c = Codec::Snappy.compress(&data).unwrap();
        assert_eq!(Codec::Snappy.decompress(&c, data.len()).unwrap(), data);
        assert!(Codec::Snappy.decompress(&c, data.len() - 1).is_err());
        assert!(Codec::Snappy.decompress(&c, data.len() + 1).is_err());
        for cut in [0, 3, 4, 7, 8, 100, c.len() - 1] {
            assert!(Codec::Snappy.decompress(&c[..cut], data.len()).is_err());
        }
        // A 2-byte chunk claiming 1 MiB of output is refused before allocating it.
        let mut forged = Vec::new();
        forged.extend_from_slice(&(1u32 << 20).to_be_bytes());
        forged.extend_from_slice(&4u32.to_be_bytes());
        forged.extend_from_slice(&[0x80, 0x80, 0x40, 0x00]);
        let err = Codec::Snappy.decompress(&forged, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("claims"), "{err}");
    }

    #[test]
    fn gzip_output_is_capped() {
        let data = vec![0u8; 1 << 20];
        let c = Codec::Gzip.compress(&data).unwrap();
        assert!(Codec::Gzip.decompress(&c, 1000).is_err());
        assert_eq!(Codec::Gzip.decompress(&c, data.len()).unwrap(), data);
    }
}
