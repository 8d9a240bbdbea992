//! The compression codecs this build reads. Hudi writes Parquet base files and Parquet log
//! blocks in Snappy (its default), GZIP, ZSTD, LZ4, LZ4_RAW and Brotli, all of which the
//! parquet crate is built with here; LZO, which it cannot read, is refused by name before a
//! page is decoded (`EOPNOTSUPP`, docs/SEMANTICS.md §10.5), never reported as corrupt data.

use parquet::basic::Compression;
use parquet::file::metadata::ParquetMetaData;

/// The first column chunk of `meta` compressed with a codec this build cannot decompress: its
/// column path and the codec.
pub(crate) fn unreadable(meta: &ParquetMetaData) -> Option<(String, Compression)> {
    meta.row_groups()
        .iter()
        .flat_map(|g| g.columns())
        .find(|c| !readable(c.compression()))
        .map(|c| (c.column_path().string(), c.compression()))
}

fn readable(c: Compression) -> bool {
    match c {
        Compression::UNCOMPRESSED
        | Compression::SNAPPY
        | Compression::GZIP(_)
        | Compression::ZSTD(_)
        | Compression::LZ4
        | Compression::LZ4_RAW
        | Compression::BROTLI(_) => true,
        Compression::LZO => false,
    }
}

/// The refusal of a file or block whose column `column` is compressed with `codec`.
pub(crate) fn refusal(what: &str, (column, codec): (String, Compression)) -> crate::MergeError {
    crate::MergeError::unsupported(format!(
        "{what}: column {column} is compressed with {codec}, which hudifs cannot decompress \
         (it reads uncompressed, Snappy, GZIP, ZSTD, LZ4, LZ4_RAW and Brotli)"
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch, StringArray};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;
    use parquet::basic::{BrotliLevel, GzipLevel, ZstdLevel};
    use parquet::file::properties::WriterProperties;

    use super::*;

    fn batch() -> RecordBatch {
        RecordBatch::try_from_iter([
            (
                "k",
                Arc::new(StringArray::from_iter_values(
                    (0..500).map(|i| format!("key-{i}")),
                )) as _,
            ),
            ("v", Arc::new(Int64Array::from_iter_values(0..500)) as _),
        ])
        .unwrap()
    }

    /// Every codec Hudi writes round-trips through this build's parquet crate.
    #[test]
    fn every_codec_hudi_writes_reads_back() {
        for codec in [
            Compression::SNAPPY,
            Compression::GZIP(GzipLevel::default()),
            Compression::ZSTD(ZstdLevel::default()),
            Compression::LZ4,
            Compression::LZ4_RAW,
            Compression::BROTLI(BrotliLevel::default()),
        ] {
            let mut out = Vec::new();
            let props = WriterProperties::builder().set_compression(codec).build();
            let mut w = ArrowWriter::try_new(&mut out, batch().schema(), Some(props)).unwrap();
            w.write(&batch()).unwrap();
            w.close().unwrap();
            let r = ParquetRecordBatchReaderBuilder::try_new(bytes::Bytes::from(out)).unwrap();
            assert_eq!(unreadable(r.metadata()), None, "{codec}");
            let got: Vec<RecordBatch> = r.build().unwrap().map(Result::unwrap).collect();
            assert_eq!(got, vec![batch()], "{codec}");
        }
        assert!(!readable(Compression::LZO));
        let e = refusal("f.parquet", ("v".into(), Compression::LZO));
        assert_eq!(e.errno(), libc::EOPNOTSUPP);
        assert!(e.to_string().contains("LZO"), "{e}");
    }
}
