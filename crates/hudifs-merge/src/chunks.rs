//! Adapters between the storage seam and parquet's reader and writer: a slice's opened input
//! as a `ChunkReader`, and a writer that counts the bytes it passed on.

use std::io::{Read, Write};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes};
use hudifs_storage::OpenFile;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::{ChunkReader, Length};

/// A slice's opened base file for parquet's reader. Parquet's reader asks for every page
/// header (a few bytes at a time) and every page of the columns in turn: on a disk each ask is
/// a `pread`, but on an object store it would be a request, hundreds per row group, and
/// column after column in turn defeats the store's read-ahead. There (`by_row_group`) the
/// reader is given one row group's column chunks at a time, fetched as one span (in pieces
/// of [`PIECE`], which the store's read-ahead turns into GETs side by side): what parquet's
/// own asynchronous reader does, and the memory the merge counts for the base file
/// (`Prepared::merge_into`).
pub(crate) struct StorageChunks {
    file: Arc<dyn OpenFile>,
    /// The byte spans of the row groups' column chunks, fetched whole (none: read as asked).
    row_groups: Vec<Range<u64>>,
    /// The span fetched last, and its bytes.
    held: Mutex<Option<(Range<u64>, Bytes)>>,
}

impl StorageChunks {
    /// Reads as parquet asks for them.
    pub(crate) fn direct(file: Arc<dyn OpenFile>) -> StorageChunks {
        StorageChunks {
            file,
            row_groups: Vec::new(),
            held: Mutex::new(None),
        }
    }

    /// One row group's column chunks at a time, as `metadata` (the file's footer) places
    /// them. A row group whose chunks lie outside the file is read as asked (and refused by
    /// parquet's checks).
    pub(crate) fn by_row_group(
        file: Arc<dyn OpenFile>,
        metadata: &ParquetMetaData,
    ) -> StorageChunks {
        let size = file.size();
        let row_groups = metadata
            .row_groups()
            .iter()
            .filter_map(|g| row_group_span(g.columns().iter().map(|c| c.byte_range())))
            .filter(|r| r.end <= size)
            .collect();
        StorageChunks {
            file,
            row_groups,
            held: Mutex::new(None),
        }
    }

    /// The longest row group span fetched whole, in bytes.
    pub(crate) fn largest_held(&self) -> u64 {
        self.row_groups
            .iter()
            .map(|r| r.end - r.start)
            .max()
            .unwrap_or(0)
    }

    /// The bytes of the row group span that holds `range`, and where that span starts, if
    /// one does: fetched now unless it is the one held.
    fn held(&self, range: Range<u64>) -> parquet::errors::Result<Option<(Bytes, u64)>> {
        let Some(span) = self
            .row_groups
            .iter()
            .find(|r| r.start <= range.start && range.end <= r.end)
        else {
            return Ok(None);
        };
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((r, bytes)) = held.as_ref().filter(|(r, _)| r == span) {
            return Ok(Some((bytes.clone(), r.start)));
        }
        // The span before is given up first: one row group's bytes are held at a time.
        *held = None;
        let bytes = read_in_pieces(&*self.file, span.clone())?;
        *held = Some((span.clone(), bytes.clone()));
        Ok(Some((bytes, span.start)))
    }
}

/// The span of a row group's column chunks, given as (start, length) pairs; none for a group
/// without columns or with a chunk that runs past the end of the offsets.
fn row_group_span(chunks: impl Iterator<Item = (u64, u64)>) -> Option<Range<u64>> {
    let mut span: Option<Range<u64>> = None;
    for (start, len) in chunks {
        let end = start.checked_add(len)?;
        span = Some(match span {
            None => start..end,
            Some(s) => s.start.min(start)..s.end.max(end),
        });
    }
    span
}

/// The most one read of a span asks for (an object store's largest GET). A span is read in
/// pieces, one after another: past the first two the store's read-ahead sees a sequential
/// reader and fetches ahead of it, GETs side by side as far as memory allows. One read of a
/// whole row group (Hudi writes them up to 120 MiB) would hold its bytes three times at once:
/// the GETs', their assembly, and the copy held here.
const PIECE: usize = 8 << 20;

/// The bytes of `span` of `file`, read [`PIECE`] by piece into one buffer.
fn read_in_pieces(file: &dyn OpenFile, span: Range<u64>) -> parquet::errors::Result<Bytes> {
    let mut buf = vec![0u8; (span.end - span.start) as usize];
    for (i, piece) in buf.chunks_mut(PIECE).enumerate() {
        fill_at(file, span.start + (i * PIECE) as u64, piece)?;
    }
    Ok(Bytes::from(buf))
}

/// `len` bytes of `file` at `start`: all of them, or an error.
fn read_exact_at(file: &dyn OpenFile, start: u64, len: usize) -> parquet::errors::Result<Bytes> {
    let mut buf = vec![0u8; len];
    fill_at(file, start, &mut buf)?;
    Ok(Bytes::from(buf))
}

/// Fill `buf` with the bytes of `file` at `start`, or fail.
fn fill_at(file: &dyn OpenFile, start: u64, buf: &mut [u8]) -> parquet::errors::Result<()> {
    hudifs_storage::fill_at(file, buf, start).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => {
            ParquetError::EOF("the file ended early (it shrank while being read)".into())
        }
        _ => ParquetError::External(Box::new(e)),
    })
}

impl Length for StorageChunks {
    fn len(&self) -> u64 {
        self.file.size()
    }
}

/// Where parquet reads a page header from: the file, or the row group held.
pub(crate) enum ChunkRead {
    File { file: Arc<dyn OpenFile>, pos: u64 },
    Held(bytes::buf::Reader<Bytes>),
}

impl Read for ChunkRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            ChunkRead::File { file, pos } => {
                let n = file.read_at(buf, *pos)?;
                *pos += n as u64;
                Ok(n)
            }
            ChunkRead::Held(r) => r.read(buf),
        }
    }
}

impl ChunkReader for StorageChunks {
    type T = ChunkRead;
    fn get_read(&self, start: u64) -> parquet::errors::Result<ChunkRead> {
        if let Some((bytes, at)) = self.held(start..start.saturating_add(1))? {
            return Ok(ChunkRead::Held(
                bytes.slice((start - at) as usize..).reader(),
            ));
        }
        Ok(ChunkRead::File {
            file: self.file.clone(),
            pos: start,
        })
    }
    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let end = start
            .checked_add(length as u64)
            .filter(|&e| e <= self.file.size());
        let Some(end) = end else {
            return Err(ParquetError::EOF(format!(
                "{length} bytes at {start} run past the end of the file ({} bytes)",
                self.file.size()
            )));
        };
        if let Some((bytes, at)) = self.held(start..end)? {
            let from = (start - at) as usize;
            return Ok(bytes.slice(from..from + length));
        }
        read_exact_at(&*self.file, start, length)
    }
}

pub(crate) struct Counting<W> {
    pub(crate) inner: W,
    pub(crate) n: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
    use hudifs_storage::{FaultyStore, MemStore, Op, Storage, StorageWrite, TablePath};
    use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    /// A Parquet file of two row groups, each of several small pages per column.
    fn two_row_groups() -> Vec<u8> {
        let rows = 20_000i64;
        let batch = RecordBatch::try_from_iter([
            (
                "k",
                Arc::new(StringArray::from_iter_values(
                    (0..rows).map(|i| format!("key{i}")),
                )) as ArrayRef,
            ),
            (
                "v",
                Arc::new(Int64Array::from_iter_values(0..rows)) as ArrayRef,
            ),
        ])
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_size(10_000)
            .set_data_page_size_limit(4 << 10)
            .set_write_batch_size(512)
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        out
    }

    /// The file's batches read through `chunks`, and the `read_at`s it took.
    fn read_all(by_row_group: bool) -> (Vec<RecordBatch>, u64) {
        let mem = Arc::new(MemStore::new("t"));
        let p = TablePath::new("p/f.parquet").unwrap();
        mem.put(&p, &two_row_groups()).unwrap();
        let store = FaultyStore::new(mem, 1);
        let file = store.open(&p).unwrap();
        let footer = StorageChunks::direct(file.clone());
        let meta = ArrowReaderMetadata::load(&footer, Default::default()).unwrap();
        assert_eq!(meta.metadata().num_row_groups(), 2);
        let before = store.calls(Op::ReadAt);
        let chunks = match by_row_group {
            true => StorageChunks::by_row_group(file, meta.metadata()),
            false => footer,
        };
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(chunks, meta)
            .build()
            .unwrap();
        let batches = reader.map(|b| b.unwrap()).collect();
        (batches, store.calls(Op::ReadAt) - before)
    }

    #[test]
    fn a_row_group_at_a_time_reads_once_per_row_group_and_gives_the_same_rows() {
        let (direct, asked) = read_all(false);
        let (grouped, reads) = read_all(true);
        assert_eq!(direct, grouped);
        assert_eq!(reads, 2, "one read per row group");
        assert!(
            asked > 20,
            "read as asked: {asked} reads (the test needs many pages)"
        );
    }

    #[test]
    fn spans_cover_a_row_groups_chunks_and_refuse_what_runs_past_the_offsets() {
        assert_eq!(row_group_span([(10, 5), (4, 2)].into_iter()), Some(4..15));
        assert_eq!(row_group_span(std::iter::empty()), None);
        assert_eq!(row_group_span([(u64::MAX, 2)].into_iter()), None);
    }
}
