//! Where a merge's rows go: the merged Parquet file (fixed writer properties: the bytes are a
//! pure function of the inputs), or memory (what the change feed compares); and the writer
//! properties every file hudifs writes shares.

use std::io::Write;

use arrow_array::RecordBatch;
use arrow_schema::SchemaRef;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{
    EnabledStatistics, WriterProperties, WriterPropertiesBuilder, WriterVersion,
};
use parquet::schema::types::{ColumnPath, SchemaDescriptor};

use super::CREATED_BY;
use crate::chunks::Counting;
use crate::error::{MergeError, Result};
use crate::materialise::MergeOptions;
use crate::memory::MergeMemory;

/// The encoded bytes of a row group the writer holds before it closes it.
pub const WRITER_FLUSH: u64 = 32 << 20;

/// The properties of every file hudifs writes (merged files, change feeds), fixed so that the
/// bytes do not depend on the build: `created_by`, Parquet 1.0 pages, Snappy, column chunk
/// statistics, and the key-value metadata `kv`.
pub(crate) fn writer_properties(created_by: &str, kv: Vec<KeyValue>) -> WriterPropertiesBuilder {
    WriterProperties::builder()
        .set_created_by(created_by.to_string())
        .set_writer_version(WriterVersion::PARQUET_1_0)
        .set_compression(Compression::SNAPPY)
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_key_value_metadata(Some(kv))
}

/// Where a merge's rows go: a Parquet file, or memory.
pub(crate) trait Sink {
    fn start(
        &mut self,
        schema: &SchemaRef,
        descr: SchemaDescriptor,
        kv: Vec<KeyValue>,
        dictionary: Vec<(ColumnPath, bool)>,
        opts: &MergeOptions,
    ) -> Result<()>;
    fn write(&mut self, batch: &RecordBatch) -> Result<()>;
    fn finish(&mut self) -> Result<()>;
    /// Whether the rows stay in memory (then each batch is counted as it comes).
    fn holds_rows(&self) -> bool {
        false
    }
}

fn write_err(e: parquet::errors::ParquetError) -> MergeError {
    MergeError::corrupt(format!("writing the merged file: {e}"))
}

/// The merged file, written with fixed properties (deterministic bytes).
pub(crate) struct ParquetSink<W: Write + Send> {
    out: Option<W>,
    writer: Option<ArrowWriter<Counting<W>>>,
    /// The bytes written, once finished.
    pub(crate) bytes: u64,
}

impl<W: Write + Send> ParquetSink<W> {
    pub(crate) fn new(out: W) -> ParquetSink<W> {
        ParquetSink {
            out: Some(out),
            writer: None,
            bytes: 0,
        }
    }
}

impl<W: Write + Send> Sink for ParquetSink<W> {
    fn start(
        &mut self,
        schema: &SchemaRef,
        descr: SchemaDescriptor,
        kv: Vec<KeyValue>,
        dictionary: Vec<(ColumnPath, bool)>,
        opts: &MergeOptions,
    ) -> Result<()> {
        let mut props =
            writer_properties(CREATED_BY, kv).set_max_row_group_size(opts.row_group_rows.max(1));
        // Dictionary-encode the columns the base file's writer kept dictionary-encoded: for the
        // others (unique keys, sequence numbers) building a dictionary only to give it up
        // doubled the time of writing.
        for (path, dict) in dictionary {
            props = props.set_column_dictionary_enabled(path, dict);
        }
        let options = ArrowWriterOptions::new()
            .with_properties(props.build())
            .with_skip_arrow_metadata(true)
            .with_parquet_schema(descr);
        let out = self
            .out
            .take()
            .ok_or_else(|| MergeError::corrupt("the merged file was started twice"))?;
        let counting = Counting { inner: out, n: 0 };
        self.writer = Some(
            ArrowWriter::try_new_with_options(counting, schema.clone(), options).map_err(|e| {
                MergeError::unsupported(format!("cannot write the output schema: {e}"))
            })?,
        );
        Ok(())
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        match &mut self.writer {
            Some(w) => {
                w.write(batch).map_err(write_err)?;
                // A row group is closed once it holds WRITER_FLUSH encoded bytes (what the
                // merge counted for it), whatever its rows.
                if w.in_progress_size() as u64 >= WRITER_FLUSH {
                    w.flush().map_err(write_err)?;
                }
                Ok(())
            }
            None => Err(MergeError::corrupt("a merged batch before the schema")),
        }
    }

    fn finish(&mut self) -> Result<()> {
        let w = self
            .writer
            .take()
            .ok_or_else(|| MergeError::corrupt("the merged file was never started"))?;
        let counting = w.into_inner().map_err(write_err)?;
        self.bytes = counting.n;
        let mut inner = counting.inner;
        inner
            .flush()
            .map_err(|e| MergeError::corrupt(format!("writing the merged file: {e}")))
    }
}

/// The merged rows, kept in memory.
#[derive(Default)]
pub(crate) struct MemorySink {
    pub(crate) schema: Option<SchemaRef>,
    pub(crate) batches: Vec<RecordBatch>,
    /// Where each batch is counted as it comes.
    pub(crate) memory: Option<MergeMemory>,
}

impl Sink for MemorySink {
    fn start(
        &mut self,
        schema: &SchemaRef,
        _: SchemaDescriptor,
        _: Vec<KeyValue>,
        _: Vec<(ColumnPath, bool)>,
        _: &MergeOptions,
    ) -> Result<()> {
        self.schema = Some(schema.clone());
        Ok(())
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if let Some(m) = &self.memory {
            m.count(batch.get_array_memory_size() as u64)?;
        }
        self.batches.push(batch.clone());
        Ok(())
    }

    fn holds_rows(&self) -> bool {
        true
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

/// Per column of the base file's first row group: whether all its data pages were
/// dictionary-encoded (a column its writer had to fall back to plain encoding for is not worth
/// a dictionary). Columns without page encoding statistics keep the default (dictionary on).
pub(crate) fn dictionary_columns(
    meta: &parquet::file::metadata::ParquetMetaData,
) -> Vec<(ColumnPath, bool)> {
    use parquet::basic::{Encoding, PageType};
    let Some(rg) = meta.row_groups().first() else {
        return Vec::new();
    };
    rg.columns()
        .iter()
        .filter_map(|c| {
            let stats = c.page_encoding_stats()?;
            let dict = c.dictionary_page_offset().is_some()
                && stats
                    .iter()
                    .filter(|s| matches!(s.page_type, PageType::DATA_PAGE | PageType::DATA_PAGE_V2))
                    .all(|s| {
                        matches!(
                            s.encoding,
                            Encoding::PLAIN_DICTIONARY | Encoding::RLE_DICTIONARY
                        )
                    });
            Some((c.column_path().clone(), dict))
        })
        .collect()
}
