//! HFile v3 as Apache Hudi writes it: the base files of the metadata table (`*.hfile`) and the
//! HFile data blocks (`HFILE_DATA_BLOCK`) inside log files.
//!
//! # The layout
//!
//! ```text
//! offset 0                 data blocks ("DATABLK*"), leaf/intermediate index blocks of a
//!                          multi-level index ("IDXLEAF2"/"IDXINTE2"), meta blocks ("METABLKc",
//!                          e.g. a bloom filter)
//! load_on_open_offset      root data index ("IDXROOT2"), meta index ("IDXROOT2"),
//!                          file info ("FILEINF2"), possibly bloom metadata (ignored)
//! size - 4096              trailer: "TRABLK\"$", varint length + protobuf TrailerProto,
//!                          zero padding, then the version int (minor << 24 | major, major 3)
//! ```
//!
//! Every block has a 33-byte header: magic (8), on-disk size without header (i32, includes the
//! checksum bytes), uncompressed size without header (i32), previous block offset (i64),
//! checksum type (u8), bytes per checksum (i32), on-disk data size with header (i32). The
//! payload after the header is compressed with the file's codec (the trailer's
//! `compression_codec`: 1 GZIP, 2 NONE, 3 Snappy in Hadoop's block framing) and followed by the
//! checksums (4 bytes per `bytes_per_checksum` chunk of header + data; not verified here: Hudi
//! writes the NULL checksum type).
//!
//! A data block holds cells: key length (i32), value length (i32), the key — row length (u16),
//! row, then HBase's family length, family, qualifier, timestamp and type, which Hudi fills with
//! constants — the value, tags when the file info has `hfile.MAX_TAGS_LEN`, and the MVCC
//! version as a Hadoop vlong (always 0, one byte) unless `KEY_VALUE_VERSION` says otherwise.
//! Hudi's key is the row. Index entries carry the first key of the block they point to.
//!
//! # Reading
//!
//! [`HFileReader`] reads through [`RangeRead`]: the trailer and the load-on-open section when
//! opened, then only the index and data blocks a lookup needs. Input is untrusted: every length
//! is checked against the file and the [`Limits`] before anything is allocated, decompression
//! stops at the size the header claims, nothing recurses, and malformed input gives an
//! [`HFileError`], never a panic.
//!
//! [`writer`] writes the same layout (single-level index as Hudi's Java writer does, or a
//! multi-level index for tests of the reader).

mod error;
mod format;
#[cfg(any(test, feature = "writer"))]
pub mod raw;
mod reader;
#[cfg(any(test, feature = "writer"))]
pub mod writer;

pub use error::{HFileError, Result};
pub use format::Codec;
pub use reader::{HFileReader, Limits, Scan};

use std::io;
use std::sync::Arc;

/// Random-access reads of an immutable byte source (a file, an object, a buffer).
pub trait RangeRead {
    /// The size of the source in bytes.
    fn size(&self) -> u64;
    /// Exactly `len` bytes from `off`; fewer is an error.
    fn read_at(&self, off: u64, len: usize) -> io::Result<Vec<u8>>;
}

fn slice_at(bytes: &[u8], off: u64, len: usize) -> io::Result<Vec<u8>> {
    usize::try_from(off)
        .ok()
        .and_then(|start| Some(start..start.checked_add(len)?))
        .and_then(|r| bytes.get(r))
        .map(<[u8]>::to_vec)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("bytes {off}..+{len} past the end ({} bytes)", bytes.len()),
            )
        })
}

impl RangeRead for [u8] {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read_at(&self, off: u64, len: usize) -> io::Result<Vec<u8>> {
        slice_at(self, off, len)
    }
}

impl RangeRead for Vec<u8> {
    fn size(&self) -> u64 {
        self.len() as u64
    }
    fn read_at(&self, off: u64, len: usize) -> io::Result<Vec<u8>> {
        slice_at(self, off, len)
    }
}

impl<R: RangeRead + ?Sized> RangeRead for &R {
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn read_at(&self, off: u64, len: usize) -> io::Result<Vec<u8>> {
        (**self).read_at(off, len)
    }
}

impl<R: RangeRead + ?Sized> RangeRead for Box<R> {
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn read_at(&self, off: u64, len: usize) -> io::Result<Vec<u8>> {
        (**self).read_at(off, len)
    }
}

impl<R: RangeRead + ?Sized> RangeRead for Arc<R> {
    fn size(&self) -> u64 {
        (**self).size()
    }
    fn read_at(&self, off: u64, len: usize) -> io::Result<Vec<u8>> {
        (**self).read_at(off, len)
    }
}
