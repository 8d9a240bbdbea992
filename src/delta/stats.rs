//! What the Delta log says of one data file, from its Parquet footer alone: the record count,
//! per-column null counts, minimums and maximums (`add.stats`), and the file's schema.

#[cfg(test)]
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arrow_schema::Schema;
use parquet::basic::{ColumnOrder, ConvertedType, LogicalType, SortOrder, Type as PhysicalType};
use parquet::file::metadata::{
    KeyValue, ParquetMetaData, ParquetMetaDataOptions, ParquetMetaDataReader,
};
use parquet::file::statistics::Statistics;

use hudifs_storage::OpenFile;

/// The footer facts of one data file.
#[derive(Debug, Clone)]
pub struct FileFacts {
    /// `add.stats`: `numRecords`, `nullCount`, `minValues`, `maxValues`.
    pub stats: Arc<str>,
    pub num_records: i64,
    pub schema: Arc<Schema>,
    /// The Parquet schema (for `iceberg/`'s field ids): files of one table share it.
    pub parquet: Arc<parquet::schema::types::Type>,
}

/// How many bytes of a file's end [`read_footer`] takes in one read: the largest footer read
/// so far and the 8 bytes after it, with an eighth to spare (the files of one table have
/// footers of about one size), or 16 KiB before the first; never more than 4 MiB. On a local
/// disk a small guess keeps each read small; on a store a right one makes each footer one
/// request.
#[derive(Debug, Default)]
pub struct TailGuess(AtomicU64, AtomicU64);

const FIRST_GUESS: u64 = 16 << 10;
const MAX_GUESS: u64 = 4 << 20;

impl TailGuess {
    fn get(&self) -> u64 {
        match self.0.load(Ordering::Relaxed) {
            0 => FIRST_GUESS,
            len => (len + 8 + len / 8).min(MAX_GUESS),
        }
    }
    /// A footer of `len` bytes was read.
    pub(super) fn saw(&self, len: u64) {
        self.0.fetch_max(len.max(1), Ordering::Relaxed);
    }
    /// How much of a footer's start a walk (`lean_footer.rs`) reads at once: what the walks
    /// before needed before the bloom filter, with an eighth to spare, or 16 KiB before the
    /// first.
    pub(super) fn head(&self) -> u64 {
        match self.1.load(Ordering::Relaxed) {
            0 => FIRST_GUESS,
            len => (len + len / 8).clamp(64, MAX_GUESS),
        }
    }
    pub(super) fn saw_head(&self, len: u64) {
        self.1.fetch_max(len.max(1), Ordering::Relaxed);
    }
}

/// The footer of a Parquet file: its bytes, and the offset it starts at.
pub struct Footer {
    pub bytes: Vec<u8>,
    pub start: u64,
}

/// Read the footer of `file`: one read of its last `guess` bytes when the footer is in them (on
/// an object store, one request rather than two: the length, then the footer), else a second
/// read of the footer itself. The one reader of whole footers (`iceberg/`'s footers with field
/// ids); `delta/`'s facts read them with `lean_footer::read_lean_footer`.
pub fn read_footer(file: &dyn OpenFile, guess: &TailGuess) -> Result<Footer, String> {
    match read_tail(file, guess)? {
        Tail::Whole(footer) => Ok(footer),
        Tail::Part { start, len, .. } => read_rest(file, guess, start, len),
    }
}

/// The end of a file read with its tail guess.
pub(super) enum Tail {
    /// The whole footer was in it.
    Whole(Footer),
    /// Only the last `bytes` of the footer of `len` bytes at `start`.
    Part {
        start: u64,
        len: u64,
        bytes: Vec<u8>,
    },
}

pub(super) fn read_tail(file: &dyn OpenFile, guess: &TailGuess) -> Result<Tail, String> {
    let size = file.size();
    if size < 12 {
        return Err(format!("{size} bytes is too short for a Parquet file"));
    }
    let take = size.min(guess.get().max(8));
    let mut tail = vec![0u8; take as usize];
    file.read_exact_random(&mut tail, size - take)
        .map_err(|e| e.to_string())?;
    let end = &tail[tail.len() - 8..];
    if &end[4..] != b"PAR1" {
        return Err("not a Parquet file (no PAR1 at its end)".into());
    }
    let len = u64::from(u32::from_le_bytes([end[0], end[1], end[2], end[3]]));
    if len + 12 > size {
        return Err(format!("a footer of {len} bytes in a file of {size}"));
    }
    let start = size - 8 - len;
    tail.truncate(tail.len() - 8);
    if len + 8 <= take {
        guess.saw(len);
        tail.drain(..(take - 8 - len) as usize);
        return Ok(Tail::Whole(Footer { bytes: tail, start }));
    }
    Ok(Tail::Part {
        start,
        len,
        bytes: tail,
    })
}

/// The whole footer of `len` bytes at `start`, read (the guess learns its length).
pub(super) fn read_rest(
    file: &dyn OpenFile,
    guess: &TailGuess,
    start: u64,
    len: u64,
) -> Result<Footer, String> {
    guess.saw(len);
    let mut bytes = vec![0u8; len as usize];
    file.read_exact_random(&mut bytes, start)
        .map_err(|e| e.to_string())?;
    Ok(Footer { bytes, start })
}

/// Arrow schemas converted from Parquet schemas, each conversion made once (a table's files
/// share a few schemas, and converting one costs as much as decoding the rest of a footer).
#[derive(Debug, Default)]
pub struct ArrowSchemas(Mutex<Vec<ArrowSchema>>);

/// A Parquet schema, the Arrow types its writer recorded (`ARROW:schema`), and its Arrow schema.
type ArrowSchema = (
    Arc<parquet::schema::types::Type>,
    Option<String>,
    Arc<Schema>,
);

impl ArrowSchemas {
    /// The Arrow schema of a file's Parquet schema, without the file's key-value metadata: a
    /// Hudi base file keeps its bloom filter (hundreds of KB) and its record key range there,
    /// which differ from file to file, so with them no two files would share a schema and
    /// every file's facts would hold its bloom filter. (`ARROW:schema`, the Arrow types a
    /// writer recorded, is still taken: the conversion reads it from the metadata.)
    ///
    /// Returned with the file's Parquet schema, both as held here: the files of one schema
    /// share them (`FileFacts::parquet` is compared by pointer).
    fn of(
        &self,
        fmd: &parquet::file::metadata::FileMetaData,
    ) -> Result<(Arc<parquet::schema::types::Type>, Arc<Schema>), String> {
        let root = fmd.schema_descr().root_schema_ptr();
        let hint = fmd.key_value_metadata().and_then(|kv| {
            kv.iter()
                .find(|e| e.key == parquet::arrow::ARROW_SCHEMA_META_KEY)
                .and_then(|e| e.value.clone())
        });
        let mut known = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((r, _, schema)) = known.iter().find(|(r, h, _)| *r == root && *h == hint) {
            return Ok((r.clone(), schema.clone()));
        }
        let root = known
            .iter()
            .find(|(r, _, _)| *r == root)
            .map_or(root, |(r, _, _)| r.clone());
        let kv = hint.as_ref().map(|h| {
            vec![KeyValue::new(
                parquet::arrow::ARROW_SCHEMA_META_KEY.to_string(),
                h.clone(),
            )]
        });
        let schema = parquet::arrow::parquet_to_arrow_schema(fmd.schema_descr(), kv.as_ref())
            .map_err(|e| e.to_string())?
            .with_metadata(Default::default());
        let schema = Arc::new(schema);
        known.push((root.clone(), hint, schema.clone()));
        Ok((root, schema))
    }
}

/// The facts of a footer's bytes (Parquet's `FileMetaData`, as [`read_footer`] reads it), its
/// Arrow schema converted once per schema in `schemas`.
pub fn footer_facts(footer: &[u8], schemas: &ArrowSchemas) -> Result<FileFacts, String> {
    // What the facts do not use is not decoded: the pages' encoding statistics.
    let options = ParquetMetaDataOptions::new()
        .with_encoding_stats_policy(parquet::file::metadata::ParquetStatisticsPolicy::SkipAll);
    let md = decode_footer(footer, Some(&options))?;
    // A footer with fewer column orders than columns panics the crate's accessor too.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| facts(&md, schemas)))
        .unwrap_or_else(|_| Err("a footer the Parquet decoder cannot read".into()))
}

/// A footer's `FileMetaData`, decoded. The Parquet crate panics on some damaged footers (a
/// required field missing): such a footer is an error, not the end of the daemon. The one
/// decoder of footers read from the table (`delta/` facts, `iceberg/`'s footers with ids).
pub fn decode_footer(
    footer: &[u8],
    options: Option<&ParquetMetaDataOptions>,
) -> Result<ParquetMetaData, String> {
    std::panic::catch_unwind(|| {
        ParquetMetaDataReader::decode_metadata_with_options(footer, options)
            .map_err(|e| e.to_string())
    })
    .unwrap_or_else(|_| Err("a footer the Parquet decoder cannot read".into()))
}

/// The facts of a decoded footer.
fn facts(md: &ParquetMetaData, schemas: &ArrowSchemas) -> Result<FileFacts, String> {
    let fmd = md.file_metadata();
    let (parquet, schema) = schemas.of(fmd)?;
    let num_records: i64 = md.row_groups().iter().map(|rg| rg.num_rows()).sum();
    let mut nulls: Vec<(&str, u64)> = Vec::new();
    let mut bounded: Vec<(&str, Bound, Bound)> = Vec::new();
    let descr = fmd.schema_descr();
    for (i, col) in descr.columns().iter().enumerate() {
        // Top-level primitive columns only: a nested leaf's nulls are not its column's.
        if col.path().parts().len() != 1 || col.max_rep_level() > 0 {
            continue;
        }
        let name = col.name();
        let chunks: Vec<Option<&Statistics>> = md
            .row_groups()
            .iter()
            .map(|rg| rg.column(i).statistics())
            .collect();
        if chunks
            .iter()
            .all(|s| s.and_then(|s| s.null_count_opt()).is_some())
        {
            let n: u64 = chunks
                .iter()
                .filter_map(|s| s.and_then(|s| s.null_count_opt()))
                .sum();
            nulls.push((name, n));
        }
        let order = fmd.column_order(i);
        if let Some((lo, hi)) = bounds(
            col.physical_type(),
            col.logical_type_ref(),
            col.converted_type(),
            order,
            &chunks,
        ) {
            bounded.push((name, lo, hi));
        }
    }
    // `add.stats`, written straight out (a big table has a hundred thousand files): the JSON
    // serde_json writes of {"numRecords", "minValues", "maxValues", "nullCount"} in that order.
    let mut stats = format!("{{\"numRecords\":{num_records},\"minValues\":{{");
    let object = |stats: &mut String, entries: &mut dyn Iterator<Item = (&str, Bound)>| {
        for (i, (name, value)) in entries.enumerate() {
            if i > 0 {
                stats.push(',');
            }
            json_string(stats, name);
            stats.push(':');
            match value {
                Bound::Int(n) => stats.push_str(&n.to_string()),
                Bound::Str(v) => json_string(stats, v),
            }
        }
        stats.push('}');
    };
    object(&mut stats, &mut bounded.iter().map(|(n, lo, _)| (*n, *lo)));
    stats.push_str(",\"maxValues\":{");
    object(&mut stats, &mut bounded.iter().map(|(n, _, hi)| (*n, *hi)));
    stats.push_str(",\"nullCount\":{");
    object(
        &mut stats,
        &mut nulls.iter().map(|(n, c)| (*n, Bound::Int(*c as i128))),
    );
    stats.push('}');
    Ok(FileFacts {
        stats: Arc::from(stats),
        num_records,
        schema,
        parquet,
    })
}

/// A column's minimum or maximum: an integer or a UTF-8 string.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound<'a> {
    Int(i128),
    Str(&'a str),
}

/// `s` as a JSON string, escaped as serde_json escapes it.
fn json_string(out: &mut String, s: &str) {
    // A `String` is a valid writer of the UTF-8 serde_json writes.
    let mut buf = Vec::with_capacity(s.len() + 2);
    if serde_json::to_writer(&mut buf, s).is_ok() {
        out.push_str(std::str::from_utf8(&buf).unwrap_or_default());
    }
}

/// A column's minimum and maximum over every row group, where each has exact bounds and the
/// type is one whose bounds compare as Delta compares them: plain integers, and UTF-8 strings
/// ordered as unsigned bytes. Every other column gets none (readers then do not prune on it).
fn bounds<'a>(
    physical: PhysicalType,
    logical: Option<&LogicalType>,
    converted: ConvertedType,
    order: ColumnOrder,
    chunks: &[Option<&'a Statistics>],
) -> Option<(Bound<'a>, Bound<'a>)> {
    if chunks.is_empty() {
        return None;
    }
    let plain_int = match logical {
        None => matches!(converted, ConvertedType::NONE),
        Some(LogicalType::Integer { is_signed, .. }) => *is_signed,
        _ => false,
    };
    let string =
        matches!(logical, Some(LogicalType::String)) || matches!(converted, ConvertedType::UTF8);
    let mut lo: Option<Bound> = None;
    let mut hi: Option<Bound> = None;
    for s in chunks {
        let s = (*s)?;
        // A chunk of only nulls has no bounds and changes none.
        if s.min_bytes_opt().is_none() && s.max_bytes_opt().is_none() {
            if s.null_count_opt().is_some() {
                continue;
            }
            return None;
        }
        if !s.min_is_exact() || !s.max_is_exact() {
            return None;
        }
        let (a, b) = match (physical, s) {
            (PhysicalType::INT32, Statistics::Int32(v)) if plain_int => (
                Bound::Int((*v.min_opt()?).into()),
                Bound::Int((*v.max_opt()?).into()),
            ),
            (PhysicalType::INT64, Statistics::Int64(v)) if plain_int => (
                Bound::Int((*v.min_opt()?).into()),
                Bound::Int((*v.max_opt()?).into()),
            ),
            (PhysicalType::BYTE_ARRAY, Statistics::ByteArray(v))
                if string && order == ColumnOrder::TYPE_DEFINED_ORDER(SortOrder::UNSIGNED) =>
            {
                (
                    Bound::Str(std::str::from_utf8(v.min_opt()?.data()).ok()?),
                    Bound::Str(std::str::from_utf8(v.max_opt()?.data()).ok()?),
                )
            }
            _ => return None,
        };
        lo = Some(match lo {
            Some(x) if less(&x, &a) => x,
            _ => a,
        });
        hi = Some(match hi {
            Some(x) if less(&b, &x) => x,
            _ => b,
        });
    }
    Some((lo?, hi?))
}

fn less(a: &Bound, b: &Bound) -> bool {
    match (a, b) {
        (Bound::Int(x), Bound::Int(y)) => x < y,
        (Bound::Str(x), Bound::Str(y)) => x.as_bytes() < y.as_bytes(),
        _ => false,
    }
}

/// A file in memory that counts the reads made of it and the bytes they took: the file the
/// tests of footer reading read (here, `lean_footer.rs`, `iceberg/footer.rs`).
#[cfg(test)]
pub(crate) struct Counted(pub Vec<u8>, pub AtomicUsize, pub AtomicU64);

#[cfg(test)]
impl Counted {
    pub(crate) fn new(bytes: Vec<u8>) -> Counted {
        Counted(bytes, AtomicUsize::new(0), AtomicU64::new(0))
    }
}

#[cfg(test)]
impl OpenFile for Counted {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.1.fetch_add(1, Ordering::Relaxed);
        let from = (offset as usize).min(self.0.len());
        let n = buf.len().min(self.0.len() - from);
        buf[..n].copy_from_slice(&self.0[from..from + n]);
        self.2.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use arrow_array::{Int64Array, RecordBatch};
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::KeyValue;
    use parquet::file::properties::WriterProperties;

    /// A Parquet file of `rows` rows whose footer carries `padding` bytes of key-value metadata
    /// (as a Hudi base file carries its bloom filter).
    fn parquet(rows: i64, padding: usize) -> Counted {
        let batch = RecordBatch::try_from_iter([(
            "x",
            Arc::new(Int64Array::from_iter_values(0..rows)) as _,
        )])
        .unwrap();
        let props = WriterProperties::builder()
            .set_key_value_metadata(Some(vec![KeyValue::new(
                "org.apache.hudi.bloomfilter".into(),
                "b".repeat(padding),
            )]))
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        Counted::new(out)
    }

    fn read_facts(file: &dyn OpenFile, guess: &TailGuess) -> Result<FileFacts, String> {
        footer_facts(&read_footer(file, guess)?.bytes, &ArrowSchemas::default())
    }

    fn reads(f: &Counted) -> usize {
        f.1.swap(0, Ordering::Relaxed)
    }

    #[test]
    fn a_footer_is_one_read_once_its_size_is_guessed() {
        let guess = TailGuess::default();
        // Smaller than the first guess: the whole file in one read.
        let small = parquet(10, 0);
        assert!(small.size() < FIRST_GUESS);
        assert_eq!(read_facts(&small, &guess).unwrap().num_records, 10);
        assert_eq!(reads(&small), 1);
        // A footer bigger than the guess: a second read, and the guess learns its size.
        let big = parquet(1000, 200_000);
        assert_eq!(read_facts(&big, &guess).unwrap().num_records, 1000);
        assert_eq!(reads(&big), 2);
        assert!(
            guess.get() > 200_000 && guess.get() < 250_000,
            "{}",
            guess.get()
        );
        // The next file of that kind: one read.
        let next = parquet(500, 200_000);
        assert_eq!(read_facts(&next, &guess).unwrap().num_records, 500);
        assert_eq!(reads(&next), 1);
        // The guess never shrinks below a footer seen, and never grows past its bound.
        guess.saw(100 << 20);
        assert_eq!(guess.get(), MAX_GUESS);
        // Small footers keep the reads small: the guess follows them down from 16 KiB.
        let fresh = TailGuess::default();
        assert_eq!(fresh.get(), FIRST_GUESS);
        read_facts(&parquet(10, 0), &fresh).unwrap();
        assert!(fresh.get() < 2048, "{}", fresh.get());
        let again = parquet(20, 0);
        assert_eq!(read_facts(&again, &fresh).unwrap().num_records, 20);
        assert_eq!(reads(&again), 1);
    }

    #[test]
    fn files_that_differ_only_in_key_value_metadata_share_a_schema() {
        let guess = TailGuess::default();
        // Two footers with bloom filters of different sizes (and so different metadata).
        let a = read_facts(&parquet(10, 100), &guess).unwrap();
        let b = read_facts(&parquet(20, 300), &guess).unwrap();
        assert_eq!(a.schema, b.schema);
        assert!(a.schema.metadata().is_empty(), "{:?}", a.schema.metadata());
        assert_eq!(a.parquet, b.parquet);
    }

    #[test]
    fn stats_are_the_json_delta_readers_parse() {
        use arrow_array::{Float64Array, Int32Array, StringArray};
        let batch = RecordBatch::try_from_iter([
            (
                "i",
                Arc::new(Int32Array::from(vec![Some(-3), None, Some(7)])) as _,
            ),
            (
                "s \"q\"",
                Arc::new(StringArray::from(vec![
                    Some("b\u{e9}\n"),
                    Some("a\\"),
                    None,
                ])) as _,
            ),
            ("f", Arc::new(Float64Array::from(vec![1.5, 2.5, 0.5])) as _),
            ("n", Arc::new(StringArray::from(vec![None::<&str>; 3])) as _),
        ])
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_size(2)
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let facts = read_facts(&Counted::new(out), &TailGuess::default()).unwrap();
        let got: serde_json::Value = serde_json::from_str(&facts.stats).unwrap();
        assert_eq!(
            got,
            serde_json::json!({
                "numRecords": 3,
                "minValues": {"i": -3, "s \"q\"": "a\\"},
                "maxValues": {"i": 7, "s \"q\"": "b\u{e9}\n"},
                "nullCount": {"i": 1, "s \"q\"": 1, "f": 0, "n": 3},
            })
        );
        // Written as serde_json writes it, key order kept.
        assert_eq!(got.to_string(), &*facts.stats);
        assert_eq!(facts.num_records, 3);
    }

    #[test]
    fn a_file_that_is_not_parquet_is_refused_whatever_the_guess() {
        let guess = TailGuess::default();
        let mut f = parquet(10, 0);
        let n = f.0.len();
        f.0[n - 1] = b'X';
        assert!(read_facts(&f, &guess).unwrap_err().contains("no PAR1"));
        // A length that points before the file's start.
        let mut f = parquet(10, 0);
        let n = f.0.len();
        f.0[n - 8..n - 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(read_facts(&f, &guess).unwrap_err().contains("a footer of"));
        let tiny = Counted::new(b"PAR1PAR1".to_vec());
        assert!(read_facts(&tiny, &guess).unwrap_err().contains("too short"));
    }
}
