//! The reader: open (trailer, load-on-open section), point lookups, scans.

use std::collections::{BTreeMap, HashMap};

use crate::error::{HFileError, Result};
use crate::format::{
    self, decode_block, parse_cell, parse_cells, parse_file_info, parse_nonroot_index,
    parse_root_index, Cell, CellFormat, Codec, IndexEntry, Trailer, DATA, ENCODED_DATA, FILE_INFO,
    HEADER_LEN, INTERMEDIATE_INDEX, LEAF_INDEX, META, ROOT_INDEX, TRAILER_LEN,
};
use crate::RangeRead;

/// Caps on what a file may make the reader allocate or walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest block, on disk or uncompressed (a block holds at least one whole cell, so this
    /// also caps one value).
    pub max_block: usize,
    /// Largest load-on-open section (root indexes and file info).
    pub max_load_on_open: usize,
    /// Most index entries held at once (a full scan of a multi-level index holds them all).
    pub max_index_entries: usize,
    /// Most levels of a multi-level data index.
    pub max_index_levels: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_block: 256 << 20,
            max_load_on_open: 256 << 20,
            max_index_entries: 16 << 20,
            max_index_levels: 8,
        }
    }
}

/// An open HFile.
pub struct HFileReader<R> {
    src: R,
    size: u64,
    trailer: Trailer,
    codec: Codec,
    limits: Limits,
    cells: CellFormat,
    /// The root data index: data blocks when the index has one level, else the next level's
    /// index blocks.
    root: Vec<IndexEntry>,
    meta: Vec<IndexEntry>,
    file_info: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl<R> std::fmt::Debug for HFileReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HFileReader")
            .field("size", &self.size)
            .field("codec", &self.codec)
            .field("entries", &self.trailer.entry_count)
            .field("index_levels", &self.trailer.num_data_index_levels)
            .field("root_entries", &self.root.len())
            .finish()
    }
}

const KEY_VALUE_VERSION: &[u8] = b"KEY_VALUE_VERSION";
const MAX_TAGS_LEN: &[u8] = b"hfile.MAX_TAGS_LEN";
const DATA_BLOCK_ENCODING: &[u8] = b"DATA_BLOCK_ENCODING";

impl<R: RangeRead> HFileReader<R> {
    /// Open with the default [`Limits`]: reads the trailer and the load-on-open section.
    pub fn open(src: R) -> Result<Self> {
        Self::open_with_limits(src, Limits::default())
    }

    pub fn open_with_limits(src: R, limits: Limits) -> Result<Self> {
        let size = src.size();
        let trailer_at = size.checked_sub(TRAILER_LEN as u64).ok_or_else(|| {
            HFileError::malformed(format!(
                "{size} bytes, shorter than the {TRAILER_LEN}-byte trailer"
            ))
        })?;
        let trailer = Trailer::parse(&read(&src, trailer_at, TRAILER_LEN)?)?;
        let codec = Codec::from_id(trailer.compression_codec)?;
        if !codec.is_supported() {
            return Err(HFileError::Unsupported(format!(
                "blocks compressed with {codec:?}"
            )));
        }
        if !trailer.encryption_key.is_empty() {
            return Err(HFileError::Unsupported("an encrypted HFile".into()));
        }
        let levels = trailer.num_data_index_levels.max(1);
        if levels > limits.max_index_levels {
            return Err(HFileError::TooLarge(format!(
                "a data index of {levels} levels (limit {})",
                limits.max_index_levels
            )));
        }
        let lo = trailer.load_on_open_offset;
        if lo >= trailer_at {
            return Err(HFileError::malformed(format!(
                "load-on-open offset {lo} is not before the trailer at {trailer_at}"
            )));
        }
        let section_len = trailer_at - lo;
        if section_len > limits.max_load_on_open as u64 {
            return Err(HFileError::TooLarge(format!(
                "load-on-open section of {section_len} bytes (limit {})",
                limits.max_load_on_open
            )));
        }
        let section = read(&src, lo, section_len as usize)?;
        let at = |pos: usize| lo + pos as u64;
        let mut pos = 0;
        let mut next_block = |expect: &[u8; 8], what: &str| -> Result<Vec<u8>> {
            let (h, payload) = decode_block(&section[pos..], codec, limits.max_block)
                .map_err(|e| context(e, &format!("{what} at byte {}", at(pos))))?;
            if &h.magic != expect {
                return Err(HFileError::malformed(format!(
                    "{what} at byte {} is a {} block",
                    at(pos),
                    h.magic_str()
                )));
            }
            pos += h.on_disk_len();
            Ok(payload)
        };
        let root_payload = next_block(ROOT_INDEX, "root data index")?;
        let meta_payload = next_block(ROOT_INDEX, "meta index")?;
        let info_payload = next_block(FILE_INFO, "file info")?;
        // The counts are not trusted for allocation: each entry parsed takes at least 13 bytes
        // of its block, and the entries are collected as they are parsed.
        let count = |c: u64| usize::try_from(c).unwrap_or(usize::MAX);
        let root = parse_root_index(&root_payload, count(trailer.data_index_count), true)
            .map_err(|e| context(e, "root data index"))?;
        let meta = parse_root_index(&meta_payload, count(trailer.meta_index_count), false)
            .map_err(|e| context(e, "meta index"))?;
        let file_info = parse_file_info(&info_payload).map_err(|e| context(e, "file info"))?;
        if let Some(enc) = file_info.get(DATA_BLOCK_ENCODING) {
            if enc.as_slice() != b"NONE" {
                return Err(HFileError::Unsupported(format!(
                    "data block encoding {}",
                    String::from_utf8_lossy(enc)
                )));
            }
        }
        // HBase writes an MVCC version after each cell when KEY_VALUE_VERSION is 1; Hudi's
        // reader assumes one (it always writes it) when the key is absent.
        let mvcc = match file_info.get(KEY_VALUE_VERSION) {
            None => true,
            Some(v) => format::be_i32(v, 0) == Some(1),
        };
        let cells = CellFormat {
            tags: file_info.contains_key(MAX_TAGS_LEN),
            mvcc,
        };
        for e in root.iter().chain(&meta) {
            check_entry(e, trailer_at)?;
        }
        Ok(HFileReader {
            src,
            size,
            trailer,
            codec,
            limits,
            cells,
            root,
            meta,
            file_info,
        })
    }

    /// The number of cells the trailer records.
    pub fn entry_count(&self) -> u64 {
        self.trailer.entry_count
    }

    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Levels of the data index (1: the root points at data blocks).
    pub fn index_levels(&self) -> u64 {
        self.trailer.num_data_index_levels.max(1)
    }

    /// A file info entry (e.g. `schema`, `hfile.LASTKEY`).
    pub fn file_info(&self, name: &[u8]) -> Option<&[u8]> {
        self.file_info.get(name).map(Vec::as_slice)
    }

    pub fn file_info_entries(&self) -> &BTreeMap<Vec<u8>, Vec<u8>> {
        &self.file_info
    }

    /// The names of the meta blocks.
    pub fn meta_block_names(&self) -> impl Iterator<Item = &[u8]> {
        self.meta.iter().map(|e| e.row.as_slice())
    }

    /// The payload of the meta block named `name` (e.g. Hudi's `bloomFilter`).
    pub fn meta_block(&self, name: &[u8]) -> Result<Option<Vec<u8>>> {
        match self.meta.iter().find(|e| e.row == name) {
            Some(e) => Ok(Some(self.read_block(e, META, "meta block")?)),
            None => Ok(None),
        }
    }

    /// The value of `key`, reading only the index blocks and the one data block on its path.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(block) = self.locate(key)? else {
            return Ok(None);
        };
        let payload = self.read_block(&block, DATA, "data block")?;
        find_in_block(&payload, key, self.cells)
    }

    /// The values of `keys` (in any order; answers in the same order), reading each data block
    /// that holds one of them once.
    pub fn get_many<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Vec<u8>>>> {
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| keys[a].as_ref().cmp(keys[b].as_ref()));
        let mut out = vec![None; keys.len()];
        let mut current: Option<(IndexEntry, Vec<u8>)> = None;
        // Index blocks read for one key serve the next (keys in order share paths): each is
        // read once per call, and one data block is held at a time.
        let mut seen = HashMap::new();
        for i in order {
            let key = keys[i].as_ref();
            let Some(block) = self.locate_with(key, &mut seen)? else {
                continue;
            };
            if current.as_ref().map(|(e, _)| e) != Some(&block) {
                let payload = self.read_block(&block, DATA, "data block")?;
                current = Some((block, payload));
            }
            if let Some((_, payload)) = &current {
                out[i] = find_in_block(payload, key, self.cells)?;
            }
        }
        Ok(out)
    }

    /// Every (key, value) in key order.
    pub fn scan(&self) -> Scan<'_, R> {
        Scan::new(self, None)
    }

    /// Every (key, value) whose key starts with `prefix`, in key order, starting at the data
    /// block that may hold the first of them.
    pub fn scan_prefix(&self, prefix: &[u8]) -> Scan<'_, R> {
        Scan::new(self, Some(prefix.to_vec()))
    }

    /// The data block that may hold `key`: descend the index, taking at each level the last
    /// entry whose first row is not after the key.
    fn locate(&self, key: &[u8]) -> Result<Option<IndexEntry>> {
        self.locate_with(key, &mut HashMap::new())
    }

    /// [`Self::locate`], keeping the index blocks read in `seen` (by offset) for the next key.
    fn locate_with(
        &self,
        key: &[u8],
        seen: &mut HashMap<u64, Vec<IndexEntry>>,
    ) -> Result<Option<IndexEntry>> {
        let levels = self.index_levels();
        // The index block whose entries the descent is at (`None`: the root).
        let mut at: Option<u64> = None;
        for level in 1..levels {
            let entries = at.map_or(self.root.as_slice(), |o| seen[&o].as_slice());
            let Some(e) = floor(entries, key).cloned() else {
                return Ok(None);
            };
            if let std::collections::hash_map::Entry::Vacant(slot) = seen.entry(e.offset) {
                let (magic, what) = if level + 1 == levels {
                    (LEAF_INDEX, "leaf index block")
                } else {
                    (INTERMEDIATE_INDEX, "intermediate index block")
                };
                let payload = self.read_block(&e, magic, what)?;
                let next = parse_nonroot_index(&payload)
                    .map_err(|err| context(err, &format!("{what} at byte {}", e.offset)))?;
                for n in &next {
                    check_entry(n, self.size - TRAILER_LEN as u64)?;
                }
                slot.insert(next);
            }
            at = Some(e.offset);
        }
        let entries = at.map_or(self.root.as_slice(), |o| seen[&o].as_slice());
        Ok(floor(entries, key).cloned())
    }

    /// Every data block, walking a multi-level index level by level.
    fn data_blocks(&self) -> Result<Vec<IndexEntry>> {
        let levels = self.index_levels();
        let mut entries = self.root.clone();
        for level in 1..levels {
            let (magic, what) = if level + 1 == levels {
                (LEAF_INDEX, "leaf index block")
            } else {
                (INTERMEDIATE_INDEX, "intermediate index block")
            };
            let mut next = Vec::new();
            for e in &entries {
                let payload = self.read_block(e, magic, what)?;
                let got = parse_nonroot_index(&payload)
                    .map_err(|err| context(err, &format!("{what} at byte {}", e.offset)))?;
                if next.len() + got.len() > self.limits.max_index_entries {
                    return Err(HFileError::TooLarge(format!(
                        "more than {} index entries",
                        self.limits.max_index_entries
                    )));
                }
                for n in &got {
                    check_entry(n, self.size - TRAILER_LEN as u64)?;
                }
                next.extend(got);
            }
            entries = next;
        }
        Ok(entries)
    }

    /// Read the block an index entry points to, check its type, return its payload.
    fn read_block(&self, e: &IndexEntry, magic: &[u8; 8], what: &str) -> Result<Vec<u8>> {
        if e.size > self.limits.max_block {
            return Err(HFileError::TooLarge(format!(
                "{what} at byte {} of {} bytes (limit {})",
                e.offset, e.size, self.limits.max_block
            )));
        }
        let bytes = read(&self.src, e.offset, e.size)?;
        let (h, payload) = decode_block(&bytes, self.codec, self.limits.max_block)
            .map_err(|err| context(err, &format!("{what} at byte {}", e.offset)))?;
        if &h.magic != magic {
            if &h.magic == ENCODED_DATA {
                return Err(HFileError::Unsupported(format!(
                    "encoded data block at byte {}",
                    e.offset
                )));
            }
            return Err(HFileError::malformed(format!(
                "{what} at byte {} is a {} block",
                e.offset,
                h.magic_str()
            )));
        }
        if h.on_disk_len() < HEADER_LEN {
            return Err(HFileError::malformed("block shorter than its header"));
        }
        Ok(payload)
    }
}

/// The last entry whose row is not after `key`.
fn floor<'e>(entries: &'e [IndexEntry], key: &[u8]) -> Option<&'e IndexEntry> {
    let n = entries.partition_point(|e| e.row.as_slice() <= key);
    n.checked_sub(1).map(|i| &entries[i])
}

/// An index entry must point at a block inside the data section (before the trailer).
fn check_entry(e: &IndexEntry, data_end: u64) -> Result<()> {
    if e.size < HEADER_LEN {
        return Err(HFileError::malformed(format!(
            "index entry for byte {} has size {}, less than a block header",
            e.offset, e.size
        )));
    }
    if e.offset
        .checked_add(e.size as u64)
        .is_none_or(|end| end > data_end)
    {
        return Err(HFileError::malformed(format!(
            "index entry {}..+{} runs past the data section ({data_end} bytes)",
            e.offset, e.size
        )));
    }
    Ok(())
}

fn find_in_block(payload: &[u8], key: &[u8], fmt: CellFormat) -> Result<Option<Vec<u8>>> {
    let mut pos = 0;
    while pos < payload.len() {
        let (cell, next) = parse_cell(payload, pos, fmt)?;
        match payload[cell.row.clone()].cmp(key) {
            std::cmp::Ordering::Equal => return Ok(Some(payload[cell.value].to_vec())),
            std::cmp::Ordering::Greater => return Ok(None),
            std::cmp::Ordering::Less => pos = next,
        }
    }
    Ok(None)
}

fn read<R: RangeRead>(src: &R, offset: u64, len: usize) -> Result<Vec<u8>> {
    let bytes = src.read_at(offset, len).map_err(|source| HFileError::Io {
        offset,
        len,
        source,
    })?;
    if bytes.len() != len {
        return Err(HFileError::Io {
            offset,
            len,
            source: std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("got {} bytes", bytes.len()),
            ),
        });
    }
    Ok(bytes)
}

fn context(e: HFileError, what: &str) -> HFileError {
    match e {
        HFileError::Malformed(s) => HFileError::Malformed(format!("{what}: {s}")),
        HFileError::Unsupported(s) => HFileError::Unsupported(format!("{what}: {s}")),
        HFileError::TooLarge(s) => HFileError::TooLarge(format!("{what}: {s}")),
        other => other,
    }
}

/// An iterator over (key, value) pairs in key order; reads one data block at a time. After an
/// error it ends.
pub struct Scan<'a, R> {
    reader: &'a HFileReader<R>,
    prefix: Option<Vec<u8>>,
    blocks: Vec<IndexEntry>,
    next_block: usize,
    payload: Vec<u8>,
    cells: std::vec::IntoIter<Cell>,
    seen: u64,
    started: bool,
    done: bool,
}

impl<'a, R: RangeRead> Scan<'a, R> {
    fn new(reader: &'a HFileReader<R>, prefix: Option<Vec<u8>>) -> Self {
        Scan {
            reader,
            prefix,
            blocks: Vec::new(),
            next_block: 0,
            payload: Vec::new(),
            cells: Vec::new().into_iter(),
            seen: 0,
            started: false,
            done: false,
        }
    }

    fn start(&mut self) -> Result<()> {
        self.blocks = self.reader.data_blocks()?;
        if let Some(p) = &self.prefix {
            self.next_block = self
                .blocks
                .partition_point(|e| e.row.as_slice() <= p.as_slice())
                .saturating_sub(1);
        }
        Ok(())
    }

    fn step(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if !self.started {
            self.started = true;
            self.start()?;
        }
        loop {
            if let Some(cell) = self.cells.next() {
                let row = &self.payload[cell.row];
                if let Some(p) = &self.prefix {
                    if !row.starts_with(p) {
                        if row > p.as_slice() {
                            return Ok(None);
                        }
                        continue;
                    }
                }
                self.seen += 1;
                return Ok(Some((row.to_vec(), self.payload[cell.value].to_vec())));
            }
            let Some(e) = self.blocks.get(self.next_block).cloned() else {
                if self.prefix.is_none() && self.seen != self.reader.trailer.entry_count {
                    return Err(HFileError::malformed(format!(
                        "the data blocks hold {} cells, the trailer says {}",
                        self.seen, self.reader.trailer.entry_count
                    )));
                }
                return Ok(None);
            };
            self.next_block += 1;
            self.payload = self.reader.read_block(&e, DATA, "data block")?;
            self.cells = parse_cells(&self.payload, self.reader.cells)
                .map_err(|err| context(err, &format!("data block at byte {}", e.offset)))?
                .into_iter();
        }
    }
}

impl<R: RangeRead> Iterator for Scan<'_, R> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(kv)) => Some(Ok(kv)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
