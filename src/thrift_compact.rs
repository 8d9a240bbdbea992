//! Thrift's compact protocol, as a Parquet footer encodes its `FileMetaData`: field headers,
//! lists, varints, and stepping over a value of any type. The one reader of footer Thrift:
//! `iceberg/footer.rs` copies a footer with field ids set, `delta/lean_footer.rs` walks one
//! without its bloom filter. Nothing here trusts the bytes: a length past the end, an unknown
//! type or nesting too deep is an error, never a panic.

/// Compact-protocol type codes.
pub const BOOL_TRUE: u8 = 1;
pub const BOOL_FALSE: u8 = 2;
pub const BYTE: u8 = 3;
pub const I16: u8 = 4;
pub const I32: u8 = 5;
pub const I64: u8 = 6;
pub const DOUBLE: u8 = 7;
pub const BINARY: u8 = 8;
pub const LIST: u8 = 9;
pub const SET: u8 = 10;
pub const MAP: u8 = 11;
pub const STRUCT: u8 = 12;
pub const UUID: u8 = 13;

/// Nesting deeper than this is not a footer (and would exhaust the stack).
const MAX_DEPTH: usize = 64;

/// The bytes a [`Reader`] walks: in memory, or read as the walk comes to them.
pub trait Bytes {
    /// The byte at `pos`.
    fn byte_at(&mut self, pos: u64) -> Result<u8, String>;
    /// How many bytes there are.
    fn size(&self) -> u64;
}

impl Bytes for &[u8] {
    fn byte_at(&mut self, pos: u64) -> Result<u8, String> {
        usize::try_from(pos)
            .ok()
            .and_then(|p| self.get(p).copied())
            .ok_or_else(|| "the footer ends inside a value".to_string())
    }
    fn size(&self) -> u64 {
        self.len() as u64
    }
}

/// A walk over compact-encoded bytes, at `pos`.
pub struct Reader<B> {
    pub b: B,
    pub pos: u64,
}

impl<B: Bytes> Reader<B> {
    pub fn new(b: B) -> Self {
        Reader { b, pos: 0 }
    }

    pub fn byte(&mut self) -> Result<u8, String> {
        let v = self.b.byte_at(self.pos)?;
        self.pos += 1;
        Ok(v)
    }

    /// Step over `n` bytes without reading them.
    pub fn step(&mut self, n: u64) -> Result<(), String> {
        self.pos = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.b.size())
            .ok_or_else(|| "the footer ends inside a value".to_string())?;
        Ok(())
    }

    pub fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("a varint longer than 10 bytes".into())
    }

    /// The next field header of a struct: `None` at its end, else (field id, type); `last` is
    /// the id of the field before (0 at a struct's start).
    pub fn field(&mut self, last: &mut i16) -> Result<Option<(i16, u8)>, String> {
        let b = self.byte()?;
        if b == 0 {
            return Ok(None);
        }
        let ty = b & 0x0f;
        let delta = i16::from(b >> 4);
        let id = if delta != 0 {
            last.checked_add(delta)
                .ok_or_else(|| "a field id out of range".to_string())?
        } else {
            let z = self.varint()?;
            i16::try_from((z >> 1) as i64 ^ -((z & 1) as i64))
                .map_err(|_| "a field id out of range".to_string())?
        };
        *last = id;
        Ok(Some((id, ty)))
    }

    /// A list or set header: (element type, count).
    pub fn list_header(&mut self) -> Result<(u8, usize), String> {
        let b = self.byte()?;
        let n = match b >> 4 {
            15 => self.varint()?,
            n => u64::from(n),
        };
        // Every element takes a byte at least.
        if n > self.b.size() {
            return Err(format!(
                "a list of {n} elements in a footer of {} bytes",
                self.b.size()
            ));
        }
        Ok((b & 0x0f, n as usize))
    }

    /// Step over a value of type `ty`; `in_list`: a boolean takes a byte of its own (in a
    /// struct field it is the header's type). A binary's bytes are stepped over unread.
    pub fn skip(&mut self, ty: u8, in_list: bool, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err("values nested too deep".into());
        }
        match ty {
            BOOL_TRUE | BOOL_FALSE if !in_list => {}
            BOOL_TRUE | BOOL_FALSE | BYTE => {
                self.byte()?;
            }
            I16 | I32 | I64 => {
                self.varint()?;
            }
            DOUBLE => self.step(8)?,
            UUID => self.step(16)?,
            BINARY => {
                let n = self.varint()?;
                self.step(n)?;
            }
            LIST | SET => {
                let (et, n) = self.list_header()?;
                for _ in 0..n {
                    self.skip(et, true, depth + 1)?;
                }
            }
            MAP => {
                let n = self.varint()?;
                if n > 0 {
                    let kv = self.byte()?;
                    for _ in 0..n {
                        self.skip(kv >> 4, true, depth + 1)?;
                        self.skip(kv & 0x0f, true, depth + 1)?;
                    }
                }
            }
            STRUCT => {
                let mut last = 0;
                while let Some((_, t)) = self.field(&mut last)? {
                    self.skip(t, false, depth + 1)?;
                }
            }
            t => return Err(format!("an unknown Thrift type {t}")),
        }
        Ok(())
    }
}

/// `v` as a varint, appended to `out`.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The header of a list of `n` elements of type `elem`, appended to `out`.
pub fn put_list_header(out: &mut Vec<u8>, n: usize, elem: u8) {
    if n < 15 {
        out.push(((n as u8) << 4) | elem);
    } else {
        out.push(0xF0 | elem);
        put_varint(out, n as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_stepped_over_and_bad_bytes_are_errors() {
        // A struct: field 1 i32 (zigzag 3 = -2), field 2 binary "ab", field 5 list of 2 bools,
        // then the stop.
        let mut b = vec![
            0x15, 0x03, 0x18, 0x02, b'a', b'b', 0x39, 0x21, 0x01, 0x02, 0x00,
        ];
        let mut r = Reader::new(&b[..]);
        r.skip(STRUCT, false, 0).unwrap();
        assert_eq!(r.pos, b.len() as u64);
        let mut r = Reader::new(&b[..]);
        let mut last = 0;
        assert_eq!(r.field(&mut last).unwrap(), Some((1, I32)));
        r.skip(I32, false, 0).unwrap();
        assert_eq!(r.field(&mut last).unwrap(), Some((2, BINARY)));
        // A binary longer than what is left, a list longer than the bytes: errors.
        b[3] = 0x7f;
        assert!(Reader::new(&b[..]).skip(STRUCT, false, 0).is_err());
        assert!(Reader::new(&[0xF9u8, 0xFF, 0xFF, 0x7F][..])
            .skip(LIST, false, 0)
            .is_err());
        // Structs nested past the limit.
        let deep = [0x1c; 200];
        assert!(Reader::new(&deep[..]).skip(STRUCT, false, 0).is_err());
        let mut out = Vec::new();
        put_list_header(&mut out, 20, STRUCT);
        out.extend([0u8; 20]);
        assert_eq!(Reader::new(&out[..]).list_header().unwrap(), (STRUCT, 20));
    }
}
