//! A small HFile v3 writer, in the layout of Hudi's Java writer (`HFileWriterImpl`, which both
//! Hudi's own reader and HBase's read):
//!
//! - data blocks of cells keyed `[row length: u16][row][family length 0][timestamp
//!   i64::MAX][type 4 = Put]`, each cell followed by a one-byte MVCC version 0; a block is cut
//!   before a cell that would take it past `block_size` (counting key + value + 9 bytes per
//!   cell, as Hudi does), never between cells of the same key;
//! - every block compressed with the file's codec, checksum type NULL with 16 KiB per checksum
//!   and the matching count of zero checksum bytes;
//! - load-on-open: root data index (keys `[u16][row]`, lengths as Hadoop vlongs), an empty
//!   meta index (or one listing the caller's meta blocks), file info (`hfile.LASTKEY`, `MAX_MEMSTORE_TS_KEY`, `hfile.AVG_KEY_LEN`,
//!   `hfile.AVG_VALUE_LEN`, `hfile.CREATE_TIME_TS`, `KEY_VALUE_VERSION` = 1, and the caller's
//!   entries such as Hudi's `schema`);
//! - the 4096-byte trailer, version 3.0, comparator `HoodieHBaseKVComparator`.
//!
//! With [`Options::index_fanout`] set it writes a multi-level index instead (leaf and
//! intermediate index blocks after the data blocks), which HBase reads but Hudi's Java reader
//! does not: that is for testing readers.

use std::collections::BTreeMap;

use crate::error::{HFileError, Result};
use crate::format::{
    put_hadoop_vlong, serialize_file_info, Codec, Header, Trailer, DATA, FILE_INFO, HEADER_LEN,
    INTERMEDIATE_INDEX, LEAF_INDEX, META, ROOT_INDEX,
};

pub use crate::format::Codec as WriteCodec;

const BYTES_PER_CHECKSUM: u32 = 16 * 1024;
const COMPARATOR: &str = "org.apache.hudi.io.storage.HoodieHBaseKVComparator";

/// How to write.
#[derive(Debug, Clone)]
pub struct Options {
    /// NONE, GZIP or Snappy (Hudi's metadata table default is GZIP).
    pub codec: Codec,
    /// Uncompressed data block size to cut at (Hudi: 64 KiB for base files, 1 MiB in log
    /// blocks).
    pub block_size: usize,
    /// `None`: one root index level, as Hudi writes. `Some(n)` (n >= 2): index blocks of at
    /// most n entries, as many levels as that takes.
    pub index_fanout: Option<usize>,
    /// `hfile.CREATE_TIME_TS` (milliseconds); fixed by default so output is deterministic.
    pub create_time_ms: i64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            codec: Codec::Gzip,
            block_size: 64 * 1024,
            index_fanout: None,
            create_time_ms: 0,
        }
    }
}

struct Entry {
    key: Vec<u8>,
    offset: u64,
    size: usize,
}

/// Writes one HFile into memory.
pub struct Writer {
    opts: Options,
    out: Vec<u8>,
    block: Vec<u8>,
    block_first: Option<Vec<u8>>,
    block_counted: usize,
    last_key: Option<Vec<u8>>,
    index: Vec<Entry>,
    prev_data_offset: i64,
    entries: u64,
    key_bytes: u64,
    value_bytes: u64,
    uncompressed_total: u64,
    file_info: BTreeMap<Vec<u8>, Vec<u8>>,
    meta_blocks: BTreeMap<Vec<u8>, Vec<u8>>,
    comparator: String,
}

/// `[row length: u16][row]`, the key form of Hudi's index entries and `hfile.LASTKEY`.
fn short_key(row: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(row.len() + 2);
    k.extend_from_slice(&(row.len() as u16).to_be_bytes());
    k.extend_from_slice(row);
    k
}

impl Writer {
    pub fn new(opts: Options) -> Result<Writer> {
        if !opts.codec.is_supported() {
            return Err(HFileError::Write(format!("codec {:?}", opts.codec)));
        }
        if opts.index_fanout.is_some_and(|n| n < 2) {
            return Err(HFileError::Write("an index fanout below 2".into()));
        }
        Ok(Writer {
            opts,
            out: Vec::new(),
            block: Vec::new(),
            block_first: None,
            block_counted: 0,
            last_key: None,
            index: Vec::new(),
            prev_data_offset: -1,
            entries: 0,
            key_bytes: 0,
            value_bytes: 0,
            uncompressed_total: 0,
            file_info: BTreeMap::new(),
            meta_blocks: BTreeMap::new(),
            comparator: COMPARATOR.into(),
        })
    }

    /// Add a file info entry (e.g. `schema`); a later one of the same name replaces it.
    pub fn add_file_info(&mut self, name: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) {
        self.file_info.insert(name.into(), value.into());
    }

    /// The comparator class the trailer names (Hudi's `HoodieHBaseKVComparator` unless set;
    /// Hudi 0.x's bootstrap index named its own, `HFileBootstrapIndex$HoodieKVComparator`).
    pub fn set_comparator(&mut self, class: impl Into<String>) {
        self.comparator = class.into();
    }

    /// Add a meta block (e.g. Hudi's `bloomFilter`): one block per name, written after the
    /// data blocks and listed in the meta index by name.
    pub fn add_meta_block(&mut self, name: impl Into<Vec<u8>>, payload: impl Into<Vec<u8>>) {
        self.meta_blocks.insert(name.into(), payload.into());
    }

    /// Append a cell. Keys must come in ascending byte order (a repeated key stays in the
    /// same block).
    pub fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if key.len() > i16::MAX as usize {
            return Err(HFileError::Write(format!("a key of {} bytes", key.len())));
        }
        let klen = key.len() + 2 + 1 + 8 + 1;
        if value.len() > i32::MAX as usize - klen - 64 {
            return Err(HFileError::Write(format!(
                "a value of {} bytes",
                value.len()
            )));
        }
        let same_key = self.last_key.as_deref() == Some(key);
        if let Some(last) = &self.last_key {
            if last.as_slice() > key {
                return Err(HFileError::Write("keys out of order".into()));
            }
        }
        let counted = key.len() + value.len() + 9;
        if !self.block.is_empty()
            && !same_key
            && self.block_counted + counted > self.opts.block_size
        {
            self.flush_data_block()?;
        }
        let b = &mut self.block;
        b.extend_from_slice(&(klen as i32).to_be_bytes());
        b.extend_from_slice(&(value.len() as i32).to_be_bytes());
        b.extend_from_slice(&(key.len() as u16).to_be_bytes());
        b.extend_from_slice(key);
        b.push(0); // family length
        b.extend_from_slice(&i64::MAX.to_be_bytes()); // timestamp: latest
        b.push(4); // type: Put
        b.extend_from_slice(value);
        b.push(0); // MVCC version 0 as a vlong
        self.block_counted += counted;
        if self.block_first.is_none() {
            self.block_first = Some(key.to_vec());
        }
        self.last_key = Some(key.to_vec());
        self.entries += 1;
        self.key_bytes += key.len() as u64;
        self.value_bytes += value.len() as u64;
        Ok(())
    }

    /// Write one block (header, compressed payload, zero checksums); its offset and size.
    fn write_block(&mut self, magic: &[u8; 8], payload: &[u8], prev: i64) -> Result<(u64, usize)> {
        let compressed = self.opts.codec.compress(payload)?;
        let data_with_header = HEADER_LEN + compressed.len();
        let checksum_len =
            data_with_header.div_ceil(BYTES_PER_CHECKSUM as usize) * std::mem::size_of::<u32>();
        if data_with_header + checksum_len > i32::MAX as usize {
            return Err(HFileError::Write(format!(
                "a block of {data_with_header} bytes"
            )));
        }
        let header = Header {
            magic: *magic,
            on_disk_size_without_header: compressed.len() + checksum_len,
            uncompressed_size_without_header: payload.len(),
            prev_block_offset: prev,
            checksum_type: 0,
            bytes_per_checksum: BYTES_PER_CHECKSUM,
            on_disk_data_size_with_header: data_with_header,
        };
        let offset = self.out.len() as u64;
        self.out.extend_from_slice(&header.serialize());
        self.out.extend_from_slice(&compressed);
        self.out.resize(self.out.len() + checksum_len, 0);
        self.uncompressed_total += (HEADER_LEN + payload.len()) as u64;
        Ok((offset, header.on_disk_len()))
    }

    fn flush_data_block(&mut self) -> Result<()> {
        let Some(first) = self.block_first.take() else {
            return Ok(());
        };
        let payload = std::mem::take(&mut self.block);
        let (offset, size) = self.write_block(DATA, &payload, self.prev_data_offset)?;
        self.prev_data_offset = offset as i64;
        self.index.push(Entry {
            key: short_key(&first),
            offset,
            size,
        });
        self.block_counted = 0;
        Ok(())
    }

    /// Finish the file: the last data block, the index, file info and trailer.
    pub fn finish(mut self) -> Result<Vec<u8>> {
        self.flush_data_block()?;
        let first_data = self.index.first().map_or(u64::MAX, |e| e.offset);
        let last_data = self.index.last().map_or(u64::MAX, |e| e.offset);
        let data_blocks = self.index.len();
        let mut index_size = 0u64;

        // Non-root levels, bottom up, until the rest fits in the root.
        let mut level = std::mem::take(&mut self.index);
        let mut levels = 1u64;
        if let Some(fanout) = self.opts.index_fanout {
            let mut prev = -1i64;
            while level.len() > fanout {
                let magic = if levels == 1 {
                    LEAF_INDEX
                } else {
                    INTERMEDIATE_INDEX
                };
                let mut next = Vec::new();
                for chunk in level.chunks(fanout) {
                    let payload = nonroot_index_payload(chunk);
                    index_size += payload.len() as u64;
                    let (offset, size) = self.write_block(magic, &payload, prev)?;
                    prev = offset as i64;
                    next.push(Entry {
                        key: chunk[0].key.clone(),
                        offset,
                        size,
                    });
                }
                level = next;
                levels += 1;
            }
        }

        let mut meta_index = Vec::new();
        let mut meta_count = 0u64;
        for (name, payload) in std::mem::take(&mut self.meta_blocks) {
            let (offset, size) = self.write_block(META, &payload, -1)?;
            meta_index.extend_from_slice(&offset.to_be_bytes());
            meta_index.extend_from_slice(&(size as i32).to_be_bytes());
            put_hadoop_vlong(&mut meta_index, name.len() as i64);
            meta_index.extend_from_slice(&name);
            meta_count += 1;
        }

        let load_on_open = self.out.len() as u64;
        let mut root = Vec::new();
        for e in &level {
            root.extend_from_slice(&e.offset.to_be_bytes());
            root.extend_from_slice(&(e.size as i32).to_be_bytes());
            put_hadoop_vlong(&mut root, e.key.len() as i64);
            root.extend_from_slice(&e.key);
        }
        index_size += root.len() as u64;
        self.write_block(ROOT_INDEX, &root, -1)?;
        self.write_block(ROOT_INDEX, &meta_index, -1)?;

        let n = self.entries.max(1);
        let mut info = std::mem::take(&mut self.file_info);
        let last_key = self.last_key.as_deref().map(short_key).unwrap_or_default();
        info.insert(b"hfile.LASTKEY".to_vec(), last_key);
        info.insert(b"MAX_MEMSTORE_TS_KEY".to_vec(), 0i64.to_be_bytes().to_vec());
        let avg = |total: u64| ((total / n) as i32).to_be_bytes().to_vec();
        info.insert(b"hfile.AVG_KEY_LEN".to_vec(), avg(self.key_bytes));
        info.insert(b"hfile.AVG_VALUE_LEN".to_vec(), avg(self.value_bytes));
        info.insert(
            b"hfile.CREATE_TIME_TS".to_vec(),
            self.opts.create_time_ms.to_be_bytes().to_vec(),
        );
        info.entry(b"KEY_VALUE_VERSION".to_vec())
            .or_insert_with(|| 1i32.to_be_bytes().to_vec());
        let file_info_offset = self.out.len() as u64;
        self.write_block(FILE_INFO, &serialize_file_info(&info), -1)?;

        let trailer = Trailer {
            major_version: 3,
            minor_version: 0,
            file_info_offset,
            load_on_open_offset: load_on_open,
            uncompressed_data_index_size: index_size,
            total_uncompressed_bytes: self.uncompressed_total,
            data_index_count: level.len() as u64,
            meta_index_count: meta_count,
            entry_count: self.entries,
            num_data_index_levels: levels,
            first_data_block_offset: first_data,
            last_data_block_offset: last_data,
            comparator_class_name: self.comparator.clone(),
            compression_codec: self.opts.codec.id(),
            encryption_key: Vec::new(),
        };
        debug_assert!(data_blocks == 0 || first_data != u64::MAX);
        self.out.extend_from_slice(&trailer.serialize());
        Ok(self.out)
    }
}

fn nonroot_index_payload(entries: &[Entry]) -> Vec<u8> {
    let mut body = Vec::new();
    let mut offsets = Vec::with_capacity(entries.len() + 1);
    for e in entries {
        offsets.push(body.len() as i32);
        body.extend_from_slice(&e.offset.to_be_bytes());
        body.extend_from_slice(&(e.size as i32).to_be_bytes());
        body.extend_from_slice(&e.key);
    }
    offsets.push(body.len() as i32);
    let mut out = Vec::with_capacity(4 + 4 * offsets.len() + body.len());
    out.extend_from_slice(&(entries.len() as i32).to_be_bytes());
    for o in offsets {
        out.extend_from_slice(&o.to_be_bytes());
    }
    out.extend_from_slice(&body);
    out
}

/// Write `entries` (in ascending key order) as one HFile.
pub fn write<K: AsRef<[u8]>, V: AsRef<[u8]>>(
    entries: impl IntoIterator<Item = (K, V)>,
    opts: Options,
) -> Result<Vec<u8>> {
    let mut w = Writer::new(opts)?;
    for (k, v) in entries {
        w.append(k.as_ref(), v.as_ref())?;
    }
    w.finish()
}
