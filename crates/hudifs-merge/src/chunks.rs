//! Adapters between the storage seam and parquet's reader and writer: a slice's opened input
//! as a `ChunkReader`, and a writer that counts the bytes it passed on.

use std::io::{Read, Write};
use std::sync::Arc;

use bytes::Bytes;
use hudifs_storage::OpenFile;
use parquet::file::reader::{ChunkReader, Length};

/// Read (slice the storage gives through an opened handle) for parquet's reader.
pub(crate) struct StorageChunks(pub(crate) Arc<dyn OpenFile>);

impl Length for StorageChunks {
    fn len(&self) -> u64 {
        self.0.size()
    }
}

pub(crate) struct ChunkRead {
    file: Arc<dyn OpenFile>,
    pos: u64,
}

impl Read for ChunkRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.file.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl ChunkReader for StorageChunks {
    type T = ChunkRead;
    fn get_read(&self, start: u64) -> parquet::errors::Result<ChunkRead> {
        Ok(ChunkRead {
            file: self.0.clone(),
            pos: start,
        })
    }
    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let end = start
            .checked_add(length as u64)
            .filter(|&e| e <= self.0.size());
        if end.is_none() {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "{length} bytes at {start} run past the end of the file ({} bytes)",
                self.0.size()
            )));
        }
        let mut buf = vec![0u8; length];
        let mut done = 0;
        while done < length {
            let n = self
                .0
                .read_at(&mut buf[done..], start + done as u64)
                .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
            if n == 0 {
                return Err(parquet::errors::ParquetError::EOF(
                    "the file ended early (it shrank while being read)".into(),
                ));
            }
            done += n;
        }
        Ok(Bytes::from(buf))
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
