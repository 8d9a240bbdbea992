//! The binary form of the files a mount saves for the next one in the merge cache directory
//! (docs/SEMANTICS.md §11.5): `delta/`'s log and checkpoint (`delta/saved.rs`) and `iceberg/`'s
//! current manifests (`iceberg/saved.rs`). Numbers are LEB128 varints (signed ones zigzagged),
//! strings and byte runs are length-prefixed, and a checksum seals each file; a file is packed
//! with zstd. A torn, damaged or foreign file is refused with the reason, never read wrong.

/// A saved file as written: zstd-compressed (`add.stats` and manifests shrink tenfold), after
/// this magic and its length uncompressed.
const PACKED: &[u8; 8] = b"hudifsZ1";
/// The most an unpacked file may hold (a damaged length asks for no more).
const MAX_UNPACKED: u64 = 16 << 30;

/// A checksum of `data`, eight bytes at a time (a torn or damaged file is refused).
pub(crate) fn checksum(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h ^ w).wrapping_mul(0x0000_0100_0000_01b3).rotate_left(29);
    }
    for b in chunks.remainder() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^ data.len() as u64
}

/// A saved file being written.
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn u(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    pub(crate) fn i(&mut self, v: i64) {
        self.u(((v << 1) ^ (v >> 63)) as u64);
    }
    pub(crate) fn b(&mut self, v: bool) {
        self.0.push(u8::from(v));
    }
    pub(crate) fn bytes(&mut self, s: &[u8]) {
        self.u(s.len() as u64);
        self.0.extend_from_slice(s);
    }
    pub(crate) fn s(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    pub(crate) fn opt_s(&mut self, s: Option<&str>) {
        self.b(s.is_some());
        if let Some(s) = s {
            self.s(s);
        }
    }
    /// The bytes, and their checksum after them.
    pub(crate) fn sealed(mut self) -> Vec<u8> {
        let sum = checksum(&self.0);
        self.0.extend_from_slice(&sum.to_le_bytes());
        self.0
    }
}

/// A saved file being read: what is left of it.
pub(crate) struct Dec<'a>(pub(crate) &'a [u8]);

/// A value read, or why it cannot be.
pub(crate) type R<T> = Result<T, String>;

impl<'a> Dec<'a> {
    pub(crate) fn u(&mut self) -> R<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self.0.split_first().ok_or("cut short")?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err("a number too long".into())
    }
    pub(crate) fn i(&mut self) -> R<i64> {
        let u = self.u()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }
    pub(crate) fn n(&mut self) -> R<usize> {
        usize::try_from(self.u()?).map_err(|e| e.to_string())
    }
    pub(crate) fn b(&mut self) -> R<bool> {
        let (&b, rest) = self.0.split_first().ok_or("cut short")?;
        self.0 = rest;
        match b {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(format!("{b} is not a flag")),
        }
    }
    pub(crate) fn bytes(&mut self) -> R<&'a [u8]> {
        let n = self.n()?;
        if n > self.0.len() {
            return Err("cut short".into());
        }
        let (s, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(s)
    }
    pub(crate) fn s(&mut self) -> R<&'a str> {
        std::str::from_utf8(self.bytes()?).map_err(|e| e.to_string())
    }
    pub(crate) fn opt_s(&mut self) -> R<Option<&'a str>> {
        Ok(if self.b()? { Some(self.s()?) } else { None })
    }
    /// A count of items each at least `min` bytes long (a damaged count cannot ask for more
    /// memory than the file could hold).
    pub(crate) fn count(&mut self, min: usize) -> R<usize> {
        let n = self.n()?;
        if n.saturating_mul(min.max(1)) > self.0.len() {
            return Err(format!("{n} items in {} bytes", self.0.len()));
        }
        Ok(n)
    }
}

/// `bytes` compressed, as a saved file is written.
pub(crate) fn pack(bytes: &[u8]) -> Vec<u8> {
    let mut out = PACKED.to_vec();
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    match zstd::bulk::compress(bytes, 1) {
        Ok(z) => out.extend_from_slice(&z),
        Err(_) => return Vec::new(),
    }
    out
}

/// The bytes [`pack`] compressed, or why they cannot be had.
pub(crate) fn unpack(packed: &[u8]) -> R<Vec<u8>> {
    let rest = packed
        .strip_prefix(PACKED)
        .ok_or("not a file hudifs saved")?;
    if rest.len() < 8 {
        return Err("cut short".into());
    }
    let (len, z) = rest.split_at(8);
    let mut l = [0u8; 8];
    l.copy_from_slice(len);
    let len = u64::from_le_bytes(l);
    if len > MAX_UNPACKED {
        return Err(format!("{len} bytes unpacked"));
    }
    let out = zstd::bulk::decompress(z, len as usize).map_err(|e| e.to_string())?;
    if out.len() as u64 != len {
        return Err(format!("{} bytes unpacked, not {len}", out.len()));
    }
    Ok(out)
}

/// The body of a saved file of kind `magic` under `key`, after its header; or why it cannot be
/// used.
pub(crate) fn open<'a>(magic: &[u8; 8], format: u64, key: &str, bytes: &'a [u8]) -> R<Dec<'a>> {
    let body_len = bytes.len().checked_sub(8).ok_or("cut short")?;
    let (body, sum) = bytes.split_at(body_len);
    let mut want = [0u8; 8];
    want.copy_from_slice(sum);
    if checksum(body) != u64::from_le_bytes(want) {
        return Err("its checksum does not match".into());
    }
    let mut d = Dec(body.strip_prefix(magic).ok_or("not of this kind")?);
    if d.u()? != format {
        return Err(format!("not format {format}"));
    }
    if d.s()? != key {
        return Err("saved by another build of hudifs, or for other options".into());
    }
    Ok(d)
}
