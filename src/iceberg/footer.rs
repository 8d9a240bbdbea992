//! A Parquet footer with Iceberg field ids: the footer's Thrift bytes (the compact protocol,
//! `FileMetaData`) copied exactly as written, except that each schema element gets the
//! `field_id` (Thrift field 9 of `SchemaElement`) it is given. Everything else — row groups,
//! statistics, column orders, key-value metadata, fields this code does not know — stays
//! byte for byte, and the data pages before the footer are not touched, so the file is the
//! same file with ids (docs/SEMANTICS.md §12.3).

/// `FileMetaData.schema` and `SchemaElement.field_id`.
const SCHEMA_FIELD: i16 = 2;
const FIELD_ID: i16 = 9;

use std::io;
use std::sync::Arc;

use hudifs_storage::{fill_at, OpenFile, ReadDone};
use parquet::schema::types::Type;

use crate::delta::stats::{decode_footer, read_footer, Footer, TailGuess};
use crate::thrift_compact::{put_varint, Reader, I32, LIST, STRUCT};

fn zigzag32(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

fn put_field_header(out: &mut Vec<u8>, last: i16, id: i16, ty: u8) {
    match id - last {
        d @ 1..=15 => out.push(((d as u8) << 4) | ty),
        _ => {
            out.push(ty);
            put_varint(out, u64::from(((id << 1) ^ (id >> 15)) as u16));
        }
    }
}

/// The bytes a field id adds to a schema element that has none: its field header and value.
pub fn id_bytes(id: i32) -> usize {
    let mut v = Vec::new();
    put_varint(&mut v, zigzag32(id));
    1 + v.len()
}

/// `footer` (the Thrift `FileMetaData`, without the length and magic after it) with the
/// schema elements' field ids set to `ids` (one per element, in the footer's order: the
/// schema's nodes depth first, its root first). `None` leaves an element without an id.
pub fn with_field_ids(footer: &[u8], ids: &[Option<i32>]) -> Result<Vec<u8>, String> {
    let mut r = Reader::new(footer);
    let mut out = Vec::with_capacity(footer.len() + ids.len() * 3);
    let mut last = 0;
    let mut seen = false;
    loop {
        let start = r.pos as usize;
        match r.field(&mut last)? {
            None => {
                out.extend_from_slice(&footer[start..r.pos as usize]);
                break;
            }
            Some((SCHEMA_FIELD, LIST)) => {
                out.extend_from_slice(&footer[start..r.pos as usize]);
                let head = r.pos as usize;
                let (et, n) = r.list_header()?;
                if et != STRUCT || n != ids.len() {
                    return Err(format!(
                        "the footer's schema has {n} elements, {} ids were given",
                        ids.len()
                    ));
                }
                out.extend_from_slice(&footer[head..r.pos as usize]);
                for id in ids {
                    element(&mut r, &mut out, *id)?;
                }
                seen = true;
            }
            Some((_, ty)) => {
                r.skip(ty, false, 0)?;
                out.extend_from_slice(&footer[start..r.pos as usize]);
            }
        }
    }
    if !seen {
        return Err("the footer has no schema".into());
    }
    out.extend_from_slice(&footer[r.pos as usize..]);
    Ok(out)
}

/// One `SchemaElement`, copied with its field id set to `id` (or removed).
fn element(r: &mut Reader<&[u8]>, out: &mut Vec<u8>, id: Option<i32>) -> Result<(), String> {
    let mut fields: Vec<(i16, u8, Vec<u8>)> = Vec::new();
    let mut last = 0;
    while let Some((fid, ty)) = r.field(&mut last)? {
        let start = r.pos as usize;
        r.skip(ty, false, 1)?;
        if fid != FIELD_ID {
            fields.push((fid, ty, r.b[start..r.pos as usize].to_vec()));
        }
    }
    if let Some(id) = id {
        let mut v = Vec::new();
        put_varint(&mut v, zigzag32(id));
        fields.push((FIELD_ID, I32, v));
    }
    fields.sort_by_key(|f| f.0);
    let mut last = 0;
    for (fid, ty, value) in fields {
        put_field_header(out, last, fid, ty);
        out.extend_from_slice(&value);
        last = fid;
    }
    out.push(0);
    Ok(())
}

/// The ids a footer's schema elements already have, in order (to size a rewritten footer).
pub fn present_ids(footer: &[u8]) -> Result<Vec<Option<i32>>, String> {
    let mut r = Reader::new(footer);
    let mut last = 0;
    while let Some((fid, ty)) = r.field(&mut last)? {
        if fid == SCHEMA_FIELD && ty == LIST {
            let (_, n) = r.list_header()?;
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                let mut id = None;
                let mut last = 0;
                while let Some((f, t)) = r.field(&mut last)? {
                    if f == FIELD_ID && t == I32 {
                        let z = r.varint()?;
                        id = Some(((z >> 1) as i64 ^ -((z & 1) as i64)) as i32);
                    } else {
                        r.skip(t, false, 1)?;
                    }
                }
                out.push(id);
            }
            return Ok(out);
        }
        r.skip(ty, false, 0)?;
    }
    Err("the footer has no schema".into())
}

/// The field ids of a footer schema's elements (see [`with_field_ids`]).
pub type IdsOf<'a> = dyn Fn(&Type) -> Result<Vec<Option<i32>>, String> + 'a;

/// A Parquet file served with field ids: its bytes up to its footer as they are, then the
/// footer with ids, its length and the magic.
pub struct WithIds {
    inner: Arc<dyn OpenFile>,
    /// Where the original footer started.
    cut: u64,
    tail: Vec<u8>,
}

impl WithIds {
    /// `inner` with the ids `ids_of` gives its footer's schema (its footer read as
    /// [`read_footer`] reads it, `guess` how much of its end that takes in one read).
    pub fn open(
        inner: Arc<dyn OpenFile>,
        ids_of: &IdsOf<'_>,
        guess: &TailGuess,
    ) -> Result<WithIds, String> {
        let Footer {
            bytes: footer,
            start: cut,
        } = read_footer(&*inner, guess)?;
        let md = decode_footer(&footer, None)?;
        let ids = ids_of(md.file_metadata().schema())?;
        let mut tail = with_field_ids(&footer, &ids)?;
        let n = u32::try_from(tail.len()).map_err(|_| "a footer over 4 GiB".to_string())?;
        tail.extend_from_slice(&n.to_le_bytes());
        tail.extend_from_slice(b"PAR1");
        Ok(WithIds { inner, cut, tail })
    }
}

impl OpenFile for WithIds {
    fn size(&self) -> u64 {
        self.cut + self.tail.len() as u64
    }

    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut done = 0;
        let mut at = offset;
        if at < self.cut {
            let want = buf
                .len()
                .min(usize::try_from(self.cut - at).unwrap_or(usize::MAX));
            fill_at(&*self.inner, &mut buf[..want], at)?;
            done = want;
            at += want as u64;
        }
        if done < buf.len() {
            let start = usize::try_from(at - self.cut).unwrap_or(usize::MAX);
            if let Some(t) = self.tail.get(start..) {
                let n = t.len().min(buf.len() - done);
                buf[done..done + n].copy_from_slice(&t[..n]);
                done += n;
            }
        }
        Ok(done)
    }

    /// A read within the data pages is the inner file's own (on an object store, answered
    /// from its runtime); one of the footer is answered from memory.
    fn read(&self, offset: u64, len: usize, done: ReadDone) {
        if offset.saturating_add(len as u64) <= self.cut {
            return self.inner.read(offset, len, done);
        }
        if offset >= self.cut {
            let start = usize::try_from(offset - self.cut).unwrap_or(usize::MAX);
            let t = self.tail.get(start..).unwrap_or_default();
            return done(Ok(&t[..t.len().min(len)]));
        }
        let mut buf = vec![0u8; len];
        match self.read_at(&mut buf, offset) {
            Ok(n) => done(Ok(&buf[..n])),
            Err(e) => done(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use arrow_array::{Int32Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::metadata::ParquetMetaDataReader;

    fn file() -> Vec<u8> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, false),
            Field::new("b", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int32Array::from(vec![1, 2, 3])),
                Arc::new(StringArray::from(vec![Some("x"), None, Some("z")])),
            ],
        )
        .unwrap();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        out
    }

    fn footer(f: &[u8]) -> &[u8] {
        let n = f.len();
        let len = u32::from_le_bytes(f[n - 8..n - 4].try_into().unwrap()) as usize;
        &f[n - 8 - len..n - 8]
    }

    #[test]
    fn ids_are_set_and_everything_else_is_kept() {
        let f = file();
        let old = footer(&f);
        let new = with_field_ids(old, &[None, Some(1), Some(300)]).unwrap();
        assert_eq!(new.len(), old.len() + id_bytes(1) + id_bytes(300));
        let md = ParquetMetaDataReader::decode_metadata(&new).unwrap();
        let cols = md.file_metadata().schema().get_fields();
        assert_eq!(cols[0].get_basic_info().id(), 1);
        assert_eq!(cols[1].get_basic_info().id(), 300);
        assert_eq!(md.file_metadata().num_rows(), 3);
        assert_eq!(present_ids(&new).unwrap(), vec![None, Some(1), Some(300)]);
        // Setting them again changes nothing; removing them gives the original back.
        assert_eq!(
            with_field_ids(&new, &[None, Some(1), Some(300)]).unwrap(),
            new
        );
        assert_eq!(with_field_ids(&new, &[None, None, None]).unwrap(), old);
    }

    #[test]
    fn a_damaged_footer_is_an_error_when_opened_never_a_panic() {
        let f = file();
        let n = f.len();
        let len = footer(&f).len();
        let mut errors = 0;
        for pos in n - 8 - len..n - 8 {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut b = f.clone();
                b[pos] ^= flip;
                let ids = |_: &Type| Ok(vec![None, Some(1), Some(2)]);
                if WithIds::open(
                    Arc::new(crate::delta::stats::Counted::new(b)),
                    &ids,
                    &TailGuess::default(),
                )
                .is_err()
                {
                    errors += 1;
                }
            }
        }
        assert!(errors > 0);
    }

    #[test]
    fn a_wrong_count_or_damaged_bytes_are_errors() {
        let f = file();
        let old = footer(&f);
        assert!(with_field_ids(old, &[None, Some(1)]).is_err());
        for cut in [1, old.len() / 2, old.len() - 1] {
            assert!(with_field_ids(&old[..cut], &[None, Some(1), Some(2)]).is_err());
        }
        assert!(with_field_ids(&[0xff; 40], &[None]).is_err());
    }
}
