//! Hudi log files (`HoodieLogFormat` version 1): a sequence of blocks, each
//!
//! ```text
//! magic        6 bytes  "#HUDI#"
//! block size   i64      bytes that follow, up to and including the trailing length
//! log version  i32      1 (HoodieLogFormat.CURRENT_VERSION)
//! block type   i32      ordinal of HoodieLogBlockType
//! header       i32 count, then per entry: i32 ordinal of HeaderMetadataType, i32 length, UTF-8
//! content len  i64
//! content      bytes
//! footer       same shape as the header (Hudi writes an empty one)
//! block length i64      bytes of the whole block from the magic up to (excluding) this field
//! ```
//!
//! all big-endian, as Java's `DataOutputStream` writes them (`HoodieLogFormatWriter`,
//! `HoodieLogBlock.getHeaderMetadataBytes`). Checked byte for byte against Spark-written files:
//! the rollback command block of `v6_nonpartitioned_rollback` (`.log.2_1-0-1`: block size 91,
//! trailing length 97) and the Avro data blocks of `v9_txns_simple_meta` and `v6_trips_8i1u`.
//!
//! An Avro data block's content (`HoodieAvroDataBlock.serializeRecords`) is: i32 block version,
//! i32 record count, then per record i32 length + the record's Avro binary encoding under the
//! header's SCHEMA. The block version written by Hudi 0.14 and 1.x alike is 3 (both fixtures
//! above carry 3), so that is what is written here.
//!
//! A CDC data block (`HoodieCDCDataBlock`, type 6) has the Avro data block's content layout and
//! the header INSTANT_TIME and SCHEMA (the CDC schema of the table's logging mode).
//!
//! Simplifications: one block per file (each generator write starts a new log file, as Hudi
//! does on storage without append); no delete blocks, no CRC/corrupt-block handling, no
//! `RECORD_POSITIONS`/`BLOCK_IDENTIFIER` headers (optional in Hudi 1.x). Java keeps the header
//! in a `HashMap`, so its entry order is unspecified; the order below is the one observed in
//! the fixtures for command blocks and INSTANT_TIME-first for data blocks — readers use a map.

/// `HoodieLogBlock.HoodieLogBlockType` ordinals.
const COMMAND_BLOCK: i32 = 0;
const AVRO_DATA_BLOCK: i32 = 3;
const CDC_DATA_BLOCK: i32 = 6;

/// `HoodieLogBlock.HeaderMetadataType` ordinals.
const INSTANT_TIME: i32 = 0;
const TARGET_INSTANT_TIME: i32 = 1;
const SCHEMA: i32 = 2;
const COMMAND_BLOCK_TYPE: i32 = 3;

/// `HoodieCommandBlock.HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK`.
const ROLLBACK_BLOCK: &str = "0";

const MAGIC: &[u8; 6] = b"#HUDI#";
const LOG_FORMAT_VERSION: i32 = 1;
const AVRO_BLOCK_VERSION: i32 = 3;

/// The write token Hudi uses when no Spark task wrote the file, e.g. rollback command blocks
/// (`HoodieLogFormat.UNKNOWN_WRITE_TOKEN`; seen as `.log.2_1-0-1` in the fixtures).
pub(crate) const UNKNOWN_WRITE_TOKEN: &str = "1-0-1";

fn metadata_bytes(entries: &[(i32, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(entries.len() as i32).to_be_bytes());
    for (key, value) in entries {
        out.extend_from_slice(&key.to_be_bytes());
        out.extend_from_slice(&(value.len() as i32).to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    out
}

fn block(block_type: i32, header: &[(i32, &str)], content: &[u8]) -> Vec<u8> {
    let header = metadata_bytes(header);
    let footer = metadata_bytes(&[]);
    // Everything after the size field: version, type, header, content length, content,
    // footer, trailing length.
    let size = 4 + 4 + header.len() + 8 + content.len() + footer.len() + 8;
    let mut out = Vec::with_capacity(MAGIC.len() + 8 + size);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(size as i64).to_be_bytes());
    out.extend_from_slice(&LOG_FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&block_type.to_be_bytes());
    out.extend_from_slice(&header);
    out.extend_from_slice(&(content.len() as i64).to_be_bytes());
    out.extend_from_slice(content);
    out.extend_from_slice(&footer);
    // The reverse pointer: the block's length from the magic up to here.
    let written = out.len() as i64;
    out.extend_from_slice(&written.to_be_bytes());
    out
}

/// An Avro data block holding `records` (each already Avro-encoded under `schema`), written by
/// the instant `instant`.
pub(crate) fn avro_data_block(instant: &str, schema: &str, records: &[Vec<u8>]) -> Vec<u8> {
    block(
        AVRO_DATA_BLOCK,
        &[(INSTANT_TIME, instant), (SCHEMA, schema)],
        &avro_block_content(records),
    )
}

/// A CDC data block (`HoodieCDCDataBlock`, a subclass of the Avro data block with the same
/// content layout) holding `records` (each Avro-encoded under the CDC `schema`), written by
/// the instant `instant` (`HoodieCDCLogger`'s header: INSTANT_TIME and SCHEMA).
pub(crate) fn cdc_data_block(instant: &str, schema: &str, records: &[Vec<u8>]) -> Vec<u8> {
    block(
        CDC_DATA_BLOCK,
        &[(INSTANT_TIME, instant), (SCHEMA, schema)],
        &avro_block_content(records),
    )
}

/// An Avro data block of a layout-1 archive file: the archiver's header holds the schema only
/// (`TimelineArchiverV1.writeToFile`).
pub(crate) fn archive_data_block(schema: &str, records: &[Vec<u8>]) -> Vec<u8> {
    block(
        AVRO_DATA_BLOCK,
        &[(SCHEMA, schema)],
        &avro_block_content(records),
    )
}

fn avro_block_content(records: &[Vec<u8>]) -> Vec<u8> {
    let mut content = Vec::new();
    content.extend_from_slice(&AVRO_BLOCK_VERSION.to_be_bytes());
    content.extend_from_slice(&(records.len() as i32).to_be_bytes());
    for r in records {
        content.extend_from_slice(&(r.len() as i32).to_be_bytes());
        content.extend_from_slice(r);
    }
    content
}

/// A rollback command block: the rollback `instant` tells readers to drop the blocks written
/// by `target`.
pub(crate) fn rollback_command_block(instant: &str, target: &str) -> Vec<u8> {
    block(
        COMMAND_BLOCK,
        &[
            (INSTANT_TIME, instant),
            (COMMAND_BLOCK_TYPE, ROLLBACK_BLOCK),
            (TARGET_INSTANT_TIME, target),
        ],
        &[],
    )
}

/// Log blocks of every kind the merged view reads or refuses, for tests of the merge engine
/// (`hudifs-merge`): data blocks with any header (partial updates, log compaction), Parquet
/// data blocks, Avro delete blocks, and raw blocks of any type and content (HFile, CDC,
/// Kryo-era delete blocks, undecodable content).
pub mod blocks {
    use super::{avro_block_content, block};

    /// `HoodieLogBlockType` ordinals.
    pub const COMMAND: i32 = 0;
    pub const DELETE: i32 = 1;
    pub const AVRO_DATA: i32 = 3;
    pub const HFILE_DATA: i32 = 4;
    pub const PARQUET_DATA: i32 = 5;
    pub const CDC_DATA: i32 = 6;
    /// `HeaderMetadataType` ordinals.
    pub const INSTANT_TIME: i32 = 0;
    pub const TARGET_INSTANT_TIME: i32 = 1;
    pub const SCHEMA: i32 = 2;
    pub const COMMAND_BLOCK_TYPE: i32 = 3;
    pub const COMPACTED_BLOCK_TIMES: i32 = 4;
    pub const IS_PARTIAL: i32 = 7;

    /// A block of any type with the given header entries and content.
    pub fn raw(block_type: i32, header: &[(i32, &str)], content: &[u8]) -> Vec<u8> {
        block(block_type, header, content)
    }

    /// An Avro data block (content version 3) of Avro-encoded `records`, with extra header
    /// entries (e.g. `(IS_PARTIAL, "true")`, `(COMPACTED_BLOCK_TIMES, "t1,t2")`).
    pub fn avro_data(
        instant: &str,
        schema: &str,
        records: &[Vec<u8>],
        extra: &[(i32, &str)],
    ) -> Vec<u8> {
        let mut header = vec![(INSTANT_TIME, instant), (SCHEMA, schema)];
        header.extend_from_slice(extra);
        block(AVRO_DATA, &header, &avro_block_content(records))
    }

    /// A Parquet data block: `parquet` is a whole Parquet file, as Hudi embeds one.
    pub fn parquet_data(instant: &str, schema: &str, parquet: &[u8]) -> Vec<u8> {
        block(
            PARQUET_DATA,
            &[(INSTANT_TIME, instant), (SCHEMA, schema)],
            parquet,
        )
    }

    /// A rollback command block of `instant` against the blocks of `target`.
    pub fn rollback(instant: &str, target: &str) -> Vec<u8> {
        super::rollback_command_block(instant, target)
    }

    /// The ordering value of a delete record (`HoodieDeleteRecord.orderingVal`).
    #[derive(Debug, Clone, PartialEq)]
    pub enum DeleteOrdering {
        None,
        Int(i32),
        Long(i64),
        Double(f64),
        String(String),
    }

    fn zigzag(out: &mut Vec<u8>, n: i64) {
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn string(out: &mut Vec<u8>, s: &str) {
        zigzag(out, s.len() as i64);
        out.extend_from_slice(s.as_bytes());
    }

    /// An Avro delete block (version 3: `HoodieDeleteRecordList`) of (record key, partition
    /// path, ordering value).
    pub fn delete(
        instant: &str,
        schema: &str,
        deletes: &[(&str, &str, DeleteOrdering)],
    ) -> Vec<u8> {
        let mut avro = Vec::new();
        if !deletes.is_empty() {
            zigzag(&mut avro, deletes.len() as i64);
            for (key, partition, ord) in deletes {
                zigzag(&mut avro, 1);
                string(&mut avro, key);
                zigzag(&mut avro, 1);
                string(&mut avro, partition);
                match ord {
                    DeleteOrdering::None => zigzag(&mut avro, 0),
                    DeleteOrdering::Int(v) => {
                        zigzag(&mut avro, 2);
                        zigzag(&mut avro, *v as i64)
                    }
                    DeleteOrdering::Long(v) => {
                        zigzag(&mut avro, 3);
                        zigzag(&mut avro, *v)
                    }
                    DeleteOrdering::Double(v) => {
                        zigzag(&mut avro, 5);
                        avro.extend_from_slice(&v.to_le_bytes())
                    }
                    DeleteOrdering::String(v) => {
                        zigzag(&mut avro, 7);
                        string(&mut avro, v)
                    }
                }
            }
        }
        zigzag(&mut avro, 0);
        let mut content = Vec::new();
        content.extend_from_slice(&3i32.to_be_bytes());
        content.extend_from_slice(&(avro.len() as i32).to_be_bytes());
        content.extend_from_slice(&avro);
        block(
            DELETE,
            &[(INSTANT_TIME, instant), (SCHEMA, schema)],
            &content,
        )
    }
}

/// A block as read back (for tests and diagnostics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBlock {
    pub block_type: i32,
    pub header: Vec<(i32, String)>,
    pub content: Vec<u8>,
}

impl ReadBlock {
    pub fn header_value(&self, key: i32) -> Option<&str> {
        self.header
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
    }
    /// Records in an Avro data block's content (Avro data blocks only; see
    /// [`ReadBlock::cdc_record_count`] for CDC blocks).
    pub fn record_count(&self) -> Option<i32> {
        (self.block_type == AVRO_DATA_BLOCK)
            .then(|| self.content.get(4..8))
            .flatten()
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// A CDC data block (`CDC_DATA_BLOCK`, type 6).
    pub fn is_cdc(&self) -> bool {
        self.block_type == CDC_DATA_BLOCK
    }
    /// Records in a CDC data block's content.
    pub fn cdc_record_count(&self) -> Option<i32> {
        self.is_cdc()
            .then(|| self.content.get(4..8))
            .flatten()
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// The header's SCHEMA entry.
    pub fn schema(&self) -> Option<&str> {
        self.header_value(SCHEMA)
    }
    /// The Avro-encoded records of an Avro data block or a CDC data block (block version,
    /// record count, then each record's length and bytes); `None` for other blocks or content
    /// that does not add up.
    pub fn avro_records(&self) -> Option<Vec<&[u8]>> {
        if self.block_type != AVRO_DATA_BLOCK && self.block_type != CDC_DATA_BLOCK {
            return None;
        }
        let c = &self.content;
        let int = |at: usize| -> Option<i32> {
            let b = c.get(at..at + 4)?;
            Some(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
        };
        let count = usize::try_from(int(4)?).ok()?;
        let mut at = 8;
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            let len = usize::try_from(int(at)?).ok()?;
            at += 4;
            out.push(c.get(at..at.checked_add(len)?)?);
            at += len;
        }
        (at == c.len()).then_some(out)
    }
    pub fn is_rollback_command(&self) -> bool {
        self.block_type == COMMAND_BLOCK
            && self.header_value(COMMAND_BLOCK_TYPE) == Some(ROLLBACK_BLOCK)
    }
    pub fn instant(&self) -> Option<&str> {
        self.header_value(INSTANT_TIME)
    }
    pub fn target_instant(&self) -> Option<&str> {
        self.header_value(TARGET_INSTANT_TIME)
    }
}

/// Parse the blocks of a log file strictly: any truncated or inconsistent block is an error.
/// The parsing itself is the reader's (`logblock::scan_log_blocks`), so writer and reader agree
/// on the format by construction.
pub fn read_blocks(bytes: &[u8]) -> Result<Vec<ReadBlock>, hudifs_core::logblock::Skipped> {
    let (blocks, problems) = hudifs_core::logblock::scan_log_blocks(bytes);
    if let Some(p) = problems.into_iter().next() {
        return Err(p);
    }
    Ok(blocks
        .into_iter()
        .map(|b| ReadBlock {
            block_type: b.block_type,
            header: b.header.into_iter().collect(),
            content: b.content.to_vec(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollback_block_matches_the_spark_written_one() {
        // `.0712b9f9-…_20250126040823628.log.2_1-0-1` of fixture v6_nonpartitioned_rollback.
        let expected: Vec<u8> = [
            &b"#HUDI#"[..],
            &[
                0, 0, 0, 0, 0, 0, 0, 0x5b, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0,
                0x11,
            ],
            b"20250126040936578",
            &[0, 0, 0, 3, 0, 0, 0, 1],
            b"0",
            &[0, 0, 0, 1, 0, 0, 0, 0x11],
            b"20250126040826878",
            &[
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x61,
            ],
        ]
        .concat();
        let got = rollback_command_block("20250126040936578", "20250126040826878");
        assert_eq!(got, expected);
        let blocks = read_blocks(&got).unwrap();
        assert!(blocks[0].is_rollback_command());
        assert_eq!(blocks[0].target_instant(), Some("20250126040826878"));
    }

    #[test]
    fn data_block_round_trip() {
        let b = avro_data_block("20260101000000000", "{}", &[vec![1, 2], vec![3]]);
        let blocks = read_blocks(&b).unwrap();
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].record_count(), Some(2));
        assert_eq!(blocks[0].instant(), Some("20260101000000000"));
        assert!(read_blocks(&b[..b.len() - 1]).is_err());
        assert_eq!(
            blocks[0].avro_records(),
            Some(vec![&[1u8, 2][..], &[3u8][..]])
        );
    }

    #[test]
    fn cdc_block_round_trip() {
        let b = cdc_data_block("20260101000000000", "{}", &[vec![7], vec![8, 9, 10]]);
        let blocks = read_blocks(&b).unwrap();
        assert_eq!(blocks.len(), 1);
        assert!(blocks[0].is_cdc());
        assert_eq!(blocks[0].block_type, blocks::CDC_DATA);
        assert_eq!(blocks[0].cdc_record_count(), Some(2));
        assert_eq!(blocks[0].record_count(), None);
        assert_eq!(blocks[0].instant(), Some("20260101000000000"));
        assert_eq!(blocks[0].schema(), Some("{}"));
        assert_eq!(
            blocks[0].avro_records(),
            Some(vec![&[7u8][..], &[8u8, 9, 10][..]])
        );
    }
}
