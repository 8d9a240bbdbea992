//! A Parquet footer without the bloom filter a Hudi base file keeps in it. Hudi writes each
//! base file's bloom filter into the footer's key-value metadata (`org.apache.hudi.bloomfilter`,
//! some 430 KB for its default of 60,000 entries), between the row groups and the column
//! orders: a file of a few KB of data has a footer of half a megabyte, and reading the footers
//! of a 100,000-file table whole reads 44 GB. The footer facts (`stats.rs`) need none of it.
//!
//! So a footer bigger than its file's tail read is walked rather than read: its Thrift compact
//! encoding (`FileMetaData`) is followed from its start, reading what is walked, and the value of
//! a bloom filter key is stepped over by its length, unread. What is returned is the footer with
//! those entries left out of its key-value list, every other byte as it was: the same schema,
//! row groups, statistics and column orders. Where the walk meets anything it does not expect
//! (another encoding, a length past the footer's end, a walk that does not end where the footer
//! does), it gives up and the footer is read whole, as before: the walk can only make a read
//! smaller. The Thrift itself is read by `thrift_compact.rs`.

use hudifs_storage::OpenFile;

use super::stats::{read_rest, read_tail, Footer, Tail, TailGuess};
use crate::thrift_compact::{put_list_header, Bytes, Reader, BINARY, LIST, STRUCT};

/// The key-value keys whose values are left out: Hudi's bloom filter (and its older name).
const LEFT_OUT: [&[u8]; 2] = [
    b"org.apache.hudi.bloomfilter",
    b"com.uber.hoodie.bloomfilter",
];

/// `FileMetaData.key_value_metadata`'s field id.
const KEY_VALUE: i16 = 5;

/// The bytes of a footer read so far, each piece at its offset in the footer.
struct Pieces<'a> {
    file: &'a dyn OpenFile,
    /// Where the footer starts in the file, and its length.
    start: u64,
    len: u64,
    pieces: Vec<(u64, Vec<u8>)>,
    /// How much one read takes where the walk needs bytes it has not read.
    chunk: u64,
}

impl Bytes for Pieces<'_> {
    /// The byte at `pos`, reading a chunk from there where no piece has it.
    fn byte_at(&mut self, pos: u64) -> Result<u8, String> {
        if let Some(b) = self.find(pos) {
            return Ok(b);
        }
        if pos >= self.len {
            return Err("the footer ends inside a value".into());
        }
        let n = self.chunk.min(self.len - pos);
        let mut buf = vec![0u8; n as usize];
        self.file
            .read_exact_random(&mut buf, self.start + pos)
            .map_err(|e| e.to_string())?;
        let b = buf[0];
        self.pieces.push((pos, buf));
        Ok(b)
    }

    fn size(&self) -> u64 {
        self.len
    }
}

impl Pieces<'_> {
    fn find(&self, pos: u64) -> Option<u8> {
        self.pieces.iter().find_map(|(at, p)| {
            let i = pos.checked_sub(*at)?;
            p.get(usize::try_from(i).ok()?).copied()
        })
    }

    /// Bytes `from..to` of the footer, appended to `out`.
    fn copy(&mut self, from: u64, to: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let mut pos = from;
        while pos < to {
            self.byte_at(pos)?;
            // The piece holding `pos`, and how much of the range it has from there.
            let (at, p) = self
                .pieces
                .iter()
                .find(|(at, p)| pos >= *at && pos < at + p.len() as u64)
                .ok_or("a piece read is not there")?;
            let i = (pos - at) as usize;
            let n = ((to - pos) as usize).min(p.len() - i);
            out.extend_from_slice(&p[i..i + n]);
            pos += n as u64;
        }
        Ok(())
    }
}

/// The key-value list of a footer: where it lies and the entries kept.
struct KeyValues {
    /// The list's header (after the field's header), and the end of its last entry.
    header: u64,
    end: u64,
    /// The entries kept, as their byte ranges.
    kept: Vec<(u64, u64)>,
    /// Where the first value left out starts and the last one ends, if any was.
    left_out: Option<(u64, u64)>,
}

/// The key-value list at `r` (its field header just read): each entry's key read, each value
/// stepped over unread (a kept entry is copied whole afterwards).
fn key_values(r: &mut Reader<Pieces>) -> Result<KeyValues, String> {
    let header = r.pos;
    let (elem, n) = r.list_header()?;
    if elem != STRUCT {
        return Err("key-value entries that are not structs".into());
    }
    let mut kept = Vec::new();
    let mut left_out: Option<(u64, u64)> = None;
    for _ in 0..n {
        let from = r.pos;
        let mut leave = false;
        let mut value = (0, 0);
        let mut last = 0;
        while let Some((id, ty)) = r.field(&mut last)? {
            match (id, ty) {
                (1, BINARY) => {
                    let n = r.varint()?;
                    let at = r.pos;
                    r.step(n)?;
                    let mut key = Vec::new();
                    r.b.copy(at, r.pos, &mut key)?;
                    leave = LEFT_OUT.contains(&&key[..]);
                }
                (2, BINARY) => {
                    let n = r.varint()?;
                    let at = r.pos;
                    r.step(n)?;
                    value = (at, r.pos);
                }
                (_, ty) => r.skip(ty, false, 3)?,
            }
        }
        if leave {
            left_out = Some(match left_out {
                Some((first, _)) => (first, value.1),
                None => value,
            });
        } else {
            kept.push((from, r.pos));
        }
    }
    Ok(KeyValues {
        header,
        end: r.pos,
        kept,
        left_out,
    })
}

/// Read the footer of `file` for its facts: as `stats::read_footer`, except that a footer bigger
/// than the tail read is first walked without its bloom filter ([`lean`]: a Hudi base file's
/// footer is mostly its bloom filter); a walk that gives up reads it whole.
pub fn read_lean_footer(file: &dyn OpenFile, guess: &TailGuess) -> Result<Footer, String> {
    match read_tail(file, guess)? {
        Tail::Whole(footer) => Ok(footer),
        Tail::Part { start, len, bytes } => {
            match lean(file, start, len, bytes, guess.head()) {
                // The guess learns what the walk needed on either side of the bloom filter,
                // not the footer's length: the next file's reads stay small.
                Some(lean) => {
                    guess.saw(lean.after);
                    guess.saw_head(lean.before);
                    Ok(Footer {
                        bytes: lean.bytes,
                        start,
                    })
                }
                None => read_rest(file, guess, start, len),
            }
        }
    }
}

/// A footer without its bloom filter, and how much of the footer lies before the first value
/// left out and after the last.
pub struct Lean {
    pub bytes: Vec<u8>,
    pub before: u64,
    pub after: u64,
}

/// The footer of `len` bytes that starts at `start` in `file`, with the bloom filter entries
/// left out of its key-value metadata, given the last `tail.len()` bytes of the footer already
/// read, reading `chunk` bytes at a time of what else the walk needs. None where the walk gave
/// up (or found nothing to leave out): the footer is then to be read whole.
pub fn lean(file: &dyn OpenFile, start: u64, len: u64, tail: Vec<u8>, chunk: u64) -> Option<Lean> {
    let tail_at = len.checked_sub(tail.len() as u64)?;
    let mut r = Reader::new(Pieces {
        file,
        start,
        len,
        pieces: vec![(tail_at, tail)],
        chunk: chunk.max(64),
    });
    let mut kv: Option<KeyValues> = None;
    let mut last = 0;
    while let Some((id, ty)) = r.field(&mut last).ok()? {
        if id == KEY_VALUE && ty == LIST && kv.is_none() {
            kv = Some(key_values(&mut r).ok()?);
        } else {
            r.skip(ty, false, 1).ok()?;
        }
    }
    // The walk must end where the footer does.
    if r.pos != len {
        return None;
    }
    let kv = kv?;
    let (before, after) = kv.left_out?;
    let mut out = Vec::new();
    let bytes = &mut r.b;
    bytes.copy(0, kv.header, &mut out).ok()?;
    put_list_header(&mut out, kv.kept.len(), STRUCT);
    for (from, to) in &kv.kept {
        bytes.copy(*from, *to, &mut out).ok()?;
    }
    bytes.copy(kv.end, len, &mut out).ok()?;
    Some(Lean {
        bytes: out,
        before,
        after: len - after,
    })
}

#[cfg(test)]
mod tests {

    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::{KeyValue, ParquetMetaDataReader};
    use parquet::file::properties::WriterProperties;

    use super::*;
    use crate::delta::stats::{footer_facts, read_footer, ArrowSchemas, Counted};

    /// A Parquet file of two row groups whose footer's key-value metadata is `kv`.
    fn parquet(kv: &[(&str, String)]) -> Vec<u8> {
        let batch = RecordBatch::try_from_iter([
            ("id", Arc::new(Int64Array::from_iter_values(0..100)) as _),
            (
                "name",
                Arc::new(StringArray::from_iter_values(
                    (0..100).map(|i| format!("n{i}")),
                )) as _,
            ),
        ])
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_size(60)
            .set_key_value_metadata(Some(
                kv.iter()
                    .map(|(k, v)| KeyValue::new(k.to_string(), v.clone()))
                    .collect(),
            ))
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        out
    }

    fn bloom(n: usize) -> String {
        (0..n).map(|i| char::from(b'A' + (i % 26) as u8)).collect()
    }

    #[test]
    fn a_bloom_filter_is_stepped_over_and_everything_else_kept() {
        let big = bloom(500_000);
        let key = "org.apache.hudi.bloomfilter".to_string();
        // The bloom filter first, between others, last, and under its older name.
        for kv in [
            vec![
                (key.as_str(), big.clone()),
                ("hoodie_min_record_key", "a".into()),
            ],
            vec![
                ("hoodie_min_record_key", "a".into()),
                (key.as_str(), big.clone()),
                ("parquet.avro.schema", bloom(40_000)),
            ],
            vec![("x", "1".into()), (key.as_str(), big.clone())],
            vec![
                ("com.uber.hoodie.bloomfilter", big.clone()),
                ("y", "2".into()),
            ],
        ] {
            let bytes = parquet(&kv);
            let whole = Counted::new(bytes.clone());
            let full = read_footer(&whole, &TailGuess::default()).unwrap();
            let file = Counted::new(bytes);
            let lean = read_lean_footer(&file, &TailGuess::default()).unwrap();
            // Only what is not the bloom filter is read: its 16 KiB tail, the head, and the
            // chunks of the other big value, if any.
            let read = file.2.load(Ordering::Relaxed);
            assert!(read < 120_000, "{read} bytes read");
            assert_eq!(lean.start, full.start);
            assert!(lean.bytes.len() < 100_000);
            let a = footer_facts(&full.bytes, &ArrowSchemas::default()).unwrap();
            let b = footer_facts(&lean.bytes, &ArrowSchemas::default()).unwrap();
            assert_eq!(
                (a.stats, a.num_records, a.schema),
                (b.stats, b.num_records, b.schema)
            );
            assert_eq!(a.parquet, b.parquet);
            // The other key-value entries are kept, in order.
            let md = ParquetMetaDataReader::decode_metadata(&lean.bytes).unwrap();
            let kept: Vec<&str> = md
                .file_metadata()
                .key_value_metadata()
                .unwrap()
                .iter()
                .map(|e| e.key.as_str())
                .filter(|k| !k.starts_with("ARROW"))
                .collect();
            let want: Vec<&str> = kv
                .iter()
                .map(|(k, _)| *k)
                .filter(|k| !k.ends_with("bloomfilter"))
                .collect();
            assert_eq!(kept, want);
        }
    }

    #[test]
    fn the_reads_learn_what_the_walk_needs() {
        let bytes = parquet(&[
            ("org.apache.hudi.bloomfilter", bloom(430_000)),
            ("hoodie_min_record_key", "a".into()),
        ]);
        let guess = TailGuess::default();
        let read = |guess: &TailGuess| {
            let file = Counted::new(bytes.clone());
            let f = read_lean_footer(&file, guess).unwrap();
            (f.bytes, file.2.load(Ordering::Relaxed))
        };
        let (first, a) = read(&guess);
        // The next file of the table: a small tail and a small head.
        let (second, b) = read(&guess);
        assert_eq!(first, second);
        assert!(a >= 32 << 10, "{a}");
        assert!(b < 8 << 10, "{b} bytes read the second time");
    }

    #[test]
    fn a_big_footer_without_a_bloom_filter_is_read_whole() {
        let bytes = parquet(&[("parquet.avro.schema", bloom(100_000))]);
        let file = Counted::new(bytes.clone());
        let lean = read_lean_footer(&file, &TailGuess::default()).unwrap();
        let full = read_footer(&Counted::new(bytes), &TailGuess::default()).unwrap();
        assert_eq!(lean.bytes, full.bytes);
    }

    #[test]
    fn a_damaged_footer_never_panics_the_walk() {
        let bytes = parquet(&[
            ("org.apache.hudi.bloomfilter", bloom(50_000)),
            ("k", "v".into()),
        ]);
        let len = u32::from_le_bytes(bytes[bytes.len() - 8..bytes.len() - 4].try_into().unwrap())
            as usize;
        let start = bytes.len() - 8 - len;
        // Every byte of the footer's head and end, flipped; the footer cut short.
        let positions = (start..start + 2000).chain(bytes.len() - 2000..bytes.len() - 8);
        for (n, pos) in positions.enumerate() {
            let mut b = bytes.clone();
            b[pos] ^= [0x01, 0x80, 0xFF][n % 3];
            let file = Counted::new(b);
            let _ = read_lean_footer(&file, &TailGuess::default())
                .and_then(|f| footer_facts(&f.bytes, &ArrowSchemas::default()));
        }
        for cut in [1usize, 100, 16 << 10, len / 2, len - 1] {
            let tail = bytes[bytes.len() - 16_000..bytes.len() - 8].to_vec();
            let _ = lean(
                &Counted::new(bytes[..bytes.len() - cut].to_vec()),
                start as u64,
                len as u64,
                tail,
                100,
            );
        }
    }
}
