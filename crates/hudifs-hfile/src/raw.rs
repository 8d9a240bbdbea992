//! The blocks of an HFile as they lie on disk, for diagnostics and for tests that compare
//! layouts (the reader does not walk files this way).

use crate::error::{HFileError, Result};
use crate::format::{self, decode_block, Codec, Header, HEADER_LEN, TRAILER_LEN};

pub use crate::format::Header as BlockHeader;

/// One block: where it starts, its header and its uncompressed payload.
#[derive(Debug, Clone)]
pub struct RawBlock {
    pub offset: u64,
    pub header: Header,
    pub payload: Vec<u8>,
}

/// The trailer's fields.
pub use crate::format::Trailer;

/// The trailer of a whole file held in memory.
pub fn trailer(file: &[u8]) -> Result<Trailer> {
    let start = file
        .len()
        .checked_sub(TRAILER_LEN)
        .ok_or_else(|| HFileError::malformed("shorter than a trailer"))?;
    Trailer::parse(&file[start..])
}

/// Every block from offset 0 to the trailer, in file order, decompressed with the file's codec
/// (each up to the default [`crate::Limits::max_block`]).
pub fn blocks(file: &[u8]) -> Result<Vec<RawBlock>> {
    let t = trailer(file)?;
    let codec = Codec::from_id(t.compression_codec)?;
    let end = file.len() - TRAILER_LEN;
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < end {
        if end - pos < HEADER_LEN {
            return Err(HFileError::malformed(format!(
                "{} bytes before the trailer hold no block",
                end - pos
            )));
        }
        let (header, payload) =
            decode_block(&file[pos..end], codec, crate::Limits::default().max_block)?;
        out.push(RawBlock {
            offset: pos as u64,
            header,
            payload,
        });
        pos += header.on_disk_len();
    }
    Ok(out)
}

/// The entries of a file info block's payload.
pub fn file_info(payload: &[u8]) -> Result<std::collections::BTreeMap<Vec<u8>, Vec<u8>>> {
    format::parse_file_info(payload)
}

/// The entries of a root index block's payload: (first row, offset, on-disk size).
pub fn root_index(payload: &[u8], count: usize) -> Result<Vec<(Vec<u8>, u64, usize)>> {
    Ok(format::parse_root_index(payload, count, true)?
        .into_iter()
        .map(|e| (e.row, e.offset, e.size))
        .collect())
}
