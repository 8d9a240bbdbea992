//! The log of `delta/` kept across mounts (docs/SEMANTICS.md §11.5). Building a log costs a
//! file-system view per version and a footer per data file: for a table of 100,000 files over
//! 1,000 writes, seconds. A built log is saved beside the merge cache's entries, and the next
//! mount of the same table by the same build of hudifs takes each saved version back while the
//! timeline still has the same write at the same number and nothing can have changed it (the
//! rule that keeps a version from one snapshot to the next: `fs/delta.rs`).
//!
//! The file is this module's own binary form: a header (magic, format, the key), the schemas
//! (each named by a file of that schema, whose footer gives it back), the data files once each
//! (path, size, time, `add.stats`, record count, schema), the versions (each the change of its
//! files from the version before, and its `add`s and `remove`s), and a checksum of all of it. A
//! file that does not decode, or was made under another key, is not used: the log is built
//! again. The newest checkpoint written is saved beside it, with a hash of all that decides its
//! bytes (the table's facts and its version's files), and taken back only for a version that
//! still hashes the same.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use super::log::{DeltaFile, TableFacts, Version};
use super::schema::DeltaSchema;
use super::stats::FileFacts;

const MAGIC: &[u8; 8] = b"hudifsDL";
/// A saved log as written: zstd-compressed (`add.stats` is JSON that shrinks tenfold), after
/// this magic and its length uncompressed.
const PACKED: &[u8; 8] = b"hudifsZ1";
/// The most an unpacked log may hold (a damaged length asks for no more).
const MAX_UNPACKED: u64 = 16 << 30;
const CHECKPOINT_MAGIC: &[u8; 8] = b"hudifsCP";
/// Changed whenever the form changes (a file of another format is not read).
const FORMAT: u64 = 1;

/// A log read back: its versions in order, each file's footer facts but the schema (a
/// `(record count, schema)` pair, the schema an index into `samples`), a file of each schema,
/// The versions of a saved log, and what it knows of their files.
pub struct Saved {
    /// The versions, their `arrow` schema not yet set: [`Saved::versions`] sets it.
    versions: Vec<Version>,
    /// The schema of each version's `arrow` (an index into `samples`).
    arrows: Vec<Option<usize>>,
    /// For each version, for each file it adds (in the order of its `added`): its record count
    /// and schema (an index into `samples`), if it has footer facts.
    pub added_facts: Vec<Vec<Option<(i64, usize)>>>,
    /// For each schema, the `add.path` of a file written in it.
    pub samples: Vec<String>,
}

impl Saved {
    /// The versions, each with its Arrow schema: `schemas[i]` the footer facts of
    /// `samples[i]`.
    pub fn versions(self, schemas: &[Arc<FileFacts>]) -> Option<Vec<Arc<Version>>> {
        self.versions
            .into_iter()
            .zip(self.arrows)
            .map(|(mut v, a)| {
                if let Some(a) = a {
                    v.arrow = Some(schemas.get(a)?.schema.clone());
                }
                Some(Arc::new(v))
            })
            .collect()
    }

    /// The number of versions.
    pub fn len(&self) -> usize {
        self.versions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.versions.is_empty()
    }
}

/// The footer facts of a saved file, its schema given back (`schemas[i]`: the footer facts of
/// `samples[i]`).
pub fn facts_of(
    stats: &Arc<str>,
    (num_records, schema): (i64, usize),
    schemas: &[Arc<FileFacts>],
) -> Option<FileFacts> {
    let s = schemas.get(schema)?;
    Some(FileFacts {
        stats: stats.clone(),
        num_records,
        schema: s.schema.clone(),
        parquet: s.parquet.clone(),
    })
}

/// A checksum of `data`, eight bytes at a time (a torn or damaged file is refused).
fn checksum(data: &[u8]) -> u64 {
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

struct Enc(Vec<u8>);

impl Enc {
    fn u(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }
    fn i(&mut self, v: i64) {
        self.u(((v << 1) ^ (v >> 63)) as u64);
    }
    fn b(&mut self, v: bool) {
        self.0.push(u8::from(v));
    }
    fn bytes(&mut self, s: &[u8]) {
        self.u(s.len() as u64);
        self.0.extend_from_slice(s);
    }
    fn s(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }
    fn opt_s(&mut self, s: Option<&str>) {
        self.b(s.is_some());
        if let Some(s) = s {
            self.s(s);
        }
    }
    /// The bytes, and their checksum after them.
    fn sealed(mut self) -> Vec<u8> {
        let sum = checksum(&self.0);
        self.0.extend_from_slice(&sum.to_le_bytes());
        self.0
    }
}

struct Dec<'a>(&'a [u8]);

type R<T> = Result<T, String>;

impl<'a> Dec<'a> {
    fn u(&mut self) -> R<u64> {
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
    fn i(&mut self) -> R<i64> {
        let u = self.u()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }
    fn n(&mut self) -> R<usize> {
        usize::try_from(self.u()?).map_err(|e| e.to_string())
    }
    fn b(&mut self) -> R<bool> {
        let (&b, rest) = self.0.split_first().ok_or("cut short")?;
        self.0 = rest;
        match b {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(format!("{b} is not a flag")),
        }
    }
    fn bytes(&mut self) -> R<&'a [u8]> {
        let n = self.n()?;
        if n > self.0.len() {
            return Err("cut short".into());
        }
        let (s, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(s)
    }
    fn s(&mut self) -> R<&'a str> {
        std::str::from_utf8(self.bytes()?).map_err(|e| e.to_string())
    }
    fn opt_s(&mut self) -> R<Option<&'a str>> {
        Ok(if self.b()? { Some(self.s()?) } else { None })
    }
    /// A count of items each at least `min` bytes long (a damaged count cannot ask for more
    /// memory than the file could hold).
    fn count(&mut self, min: usize) -> R<usize> {
        let n = self.n()?;
        if n.saturating_mul(min.max(1)) > self.0.len() {
            return Err(format!("{n} items in {} bytes", self.0.len()));
        }
        Ok(n)
    }
}

/// The saved form of `versions` (in order) under `key`, with the footer facts `facts` gives of
/// their data files; `None` when a data file or a version's schema has no facts (such a log is
/// not saved).
pub fn encode(
    key: &str,
    versions: &[Arc<Version>],
    facts: &dyn Fn(&str) -> Option<Arc<FileFacts>>,
) -> Option<Vec<u8>> {
    // The data files, each once, and the schemas of their facts.
    let mut files: Vec<Arc<DeltaFile>> = Vec::new();
    let mut index: HashMap<*const DeltaFile, u64> = HashMap::new();
    let mut seen = |f: &Arc<DeltaFile>, files: &mut Vec<Arc<DeltaFile>>| -> u64 {
        *index.entry(Arc::as_ptr(f)).or_insert_with(|| {
            files.push(f.clone());
            files.len() as u64 - 1
        })
    };
    type Diff = (Vec<Arc<str>>, Vec<(Arc<str>, u64)>);
    let mut diffs: Vec<Diff> = Vec::with_capacity(versions.len());
    let empty = imbl::OrdMap::new();
    for (i, v) in versions.iter().enumerate() {
        let before = if i == 0 {
            &empty
        } else {
            &versions[i - 1].files
        };
        let mut gone = Vec::new();
        let mut put = Vec::new();
        for d in before.diff(&v.files) {
            match d {
                imbl::ordmap::DiffItem::Add(k, f) => put.push((k.clone(), seen(f, &mut files))),
                imbl::ordmap::DiffItem::Update { new: (k, f), .. } => {
                    put.push((k.clone(), seen(f, &mut files)))
                }
                imbl::ordmap::DiffItem::Remove(k, _) => gone.push(k.clone()),
            }
        }
        for f in v.added.iter().chain(&v.removed) {
            seen(f, &mut files);
        }
        diffs.push((gone, put));
    }
    let mut schemas: Vec<Arc<FileFacts>> = Vec::new();
    let schema_of = |ff: &FileFacts, schemas: &[Arc<FileFacts>]| {
        schemas.iter().position(|s| {
            Arc::ptr_eq(&s.schema, &ff.schema) && Arc::ptr_eq(&s.parquet, &ff.parquet)
        })
    };
    let mut samples: Vec<String> = Vec::new();
    let mut file_facts: Vec<Option<(i64, u64)>> = Vec::with_capacity(files.len());
    for f in &files {
        if f.stats.is_none() {
            // A change data file: no footer facts.
            file_facts.push(None);
            continue;
        }
        let ff = facts(&f.path)?;
        let s = match schema_of(&ff, &schemas) {
            Some(s) => s,
            None => {
                schemas.push(ff.clone());
                samples.push(f.path.clone());
                schemas.len() - 1
            }
        };
        file_facts.push(Some((ff.num_records, s as u64)));
    }
    let mut e = Enc(Vec::with_capacity(files.len() * 400 + 1024));
    e.0.extend_from_slice(MAGIC);
    e.u(FORMAT);
    e.s(key);
    e.u(samples.len() as u64);
    for s in &samples {
        e.s(s);
    }
    e.u(files.len() as u64);
    for (f, ff) in files.iter().zip(&file_facts) {
        e.s(&f.path);
        e.u(f.size);
        e.i(f.modified_ms);
        e.opt_s(f.stats.as_deref());
        e.b(f.data_change);
        e.b(ff.is_some());
        if let Some((n, s)) = ff {
            e.i(*n);
            e.u(*s);
        }
    }
    e.u(versions.len() as u64);
    for (v, (gone, put)) in versions.iter().zip(&diffs) {
        e.u(v.number);
        e.s(&v.instant);
        e.opt_s(v.completion.as_deref());
        e.s(&v.action);
        e.i(v.timestamp_ms);
        e.b(v.schema.is_some());
        if let Some(s) = &v.schema {
            e.s(&s.string);
            e.b(s.timestamp_ntz);
        }
        e.b(v.data_change);
        e.b(v.wants_changes);
        match &v.arrow {
            Some(a) => {
                let s = schemas.iter().position(|s| Arc::ptr_eq(&s.schema, a))?;
                e.b(true);
                e.u(s as u64);
            }
            None => e.b(false),
        }
        e.u(gone.len() as u64);
        for k in gone {
            e.s(k);
        }
        e.u(put.len() as u64);
        for (k, f) in put {
            e.s(k);
            e.u(*f);
        }
        for list in [&v.added, &v.removed] {
            e.u(list.len() as u64);
            for f in list.iter() {
                e.u(*index.get(&Arc::as_ptr(f))?);
            }
        }
    }
    Some(e.sealed())
}

/// `bytes` compressed, as a saved log is written.
pub fn pack(bytes: &[u8]) -> Vec<u8> {
    let mut out = PACKED.to_vec();
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    match zstd::bulk::compress(bytes, 1) {
        Ok(z) => out.extend_from_slice(&z),
        Err(_) => return Vec::new(),
    }
    out
}

/// The bytes [`pack`] compressed, or why they cannot be had.
pub fn unpack(packed: &[u8]) -> R<Vec<u8>> {
    let rest = packed
        .strip_prefix(PACKED)
        .ok_or("not a saved delta/ log")?;
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
fn open<'a>(magic: &[u8; 8], key: &str, bytes: &'a [u8]) -> R<Dec<'a>> {
    let body_len = bytes.len().checked_sub(8).ok_or("cut short")?;
    let (body, sum) = bytes.split_at(body_len);
    let mut want = [0u8; 8];
    want.copy_from_slice(sum);
    if checksum(body) != u64::from_le_bytes(want) {
        return Err("its checksum does not match".into());
    }
    let mut d = Dec(body.strip_prefix(magic).ok_or("not of this kind")?);
    let format = d.u()?;
    if format != FORMAT {
        return Err(format!("format {format}, not {FORMAT}"));
    }
    if d.s()? != key {
        return Err("saved by another build of hudifs, or for other options".into());
    }
    Ok(d)
}

/// The saved form of the checkpoint `bytes` of version `v` of a log under `key`.
pub fn encode_checkpoint(key: &str, table: &TableFacts, v: &Version, bytes: &[u8]) -> Vec<u8> {
    let mut e = Enc(Vec::with_capacity(bytes.len() + key.len() + 64));
    e.0.extend_from_slice(CHECKPOINT_MAGIC);
    e.u(FORMAT);
    e.s(key);
    e.u(v.number);
    e.u(state_hash(table, v));
    e.bytes(bytes);
    e.sealed()
}

/// The checkpoint saved in `bytes` under `key`, if it was written for version `v` as it is
/// now (the same table facts and files); else why not.
pub fn decode_checkpoint(key: &str, table: &TableFacts, v: &Version, bytes: &[u8]) -> R<Vec<u8>> {
    let mut d = open(CHECKPOINT_MAGIC, key, bytes)?;
    let n = d.u()?;
    if n != v.number {
        return Err(format!("the checkpoint of version {n}, not {}", v.number));
    }
    if d.u()? != state_hash(table, v) {
        return Err(format!("written for another version {n}"));
    }
    let out = d.bytes()?.to_vec();
    if !d.0.is_empty() {
        return Err(format!("{} bytes after the end", d.0.len()));
    }
    Ok(out)
}

/// A hash of all that decides version `v`'s checkpoint: the table's facts, the version's own,
/// and every file's `add` but its statistics (a file's, at its path and of its size, are the
/// same under the same key: the same build of hudifs and the same table).
pub fn state_hash(table: &TableFacts, v: &Version) -> u64 {
    let mut e = Enc(Vec::with_capacity(1 << 16));
    let mut h: u64 = 0;
    let flush = |e: &mut Enc, h: &mut u64| {
        *h = checksum(&e.0) ^ h.rotate_left(17).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        e.0.clear();
    };
    e.s(&table.id);
    e.s(&table.name);
    e.b(table.change_feed);
    e.u(v.number);
    e.s(&v.instant);
    e.opt_s(v.completion.as_deref());
    e.s(&v.action);
    e.i(v.timestamp_ms);
    e.opt_s(v.schema.as_ref().map(|s| s.string.as_str()));
    e.b(v.schema.as_ref().is_some_and(|s| s.timestamp_ntz));
    e.b(v.data_change);
    e.u(v.files.len() as u64);
    for f in v.files.values() {
        e.s(&f.path);
        e.u(f.size);
        e.i(f.modified_ms);
        e.b(f.data_change);
        e.b(f.stats.is_some());
        if e.0.len() >= 1 << 16 {
            flush(&mut e, &mut h);
        }
    }
    flush(&mut e, &mut h);
    h
}

/// The log saved in `bytes` under `key`, or why it cannot be used.
pub fn decode(key: &str, bytes: &[u8]) -> Result<Saved, String> {
    let mut d = open(MAGIC, key, bytes)?;
    let mut samples = Vec::new();
    for _ in 0..d.count(1)? {
        samples.push(d.s()?.to_string());
    }
    let n_files = d.count(5)?;
    let mut files: Vec<Arc<DeltaFile>> = Vec::with_capacity(n_files);
    let mut file_facts: Vec<Option<(i64, usize)>> = Vec::with_capacity(n_files);
    for _ in 0..n_files {
        let path = d.s()?.to_string();
        let size = d.u()?;
        let modified_ms = d.i()?;
        let stats = d.opt_s()?.map(Arc::<str>::from);
        let data_change = d.b()?;
        let mut facts_of_file = None;
        if d.b()? {
            let n = d.i()?;
            let s = d.n()?;
            if s >= samples.len() || stats.is_none() {
                return Err(format!("{path}: facts without a schema or statistics"));
            }
            facts_of_file = Some((n, s));
        }
        let f = Arc::new(DeltaFile {
            path,
            size,
            modified_ms,
            stats,
            data_change,
        });
        file_facts.push(facts_of_file);
        files.push(f);
    }
    let file = |i: usize| -> R<Arc<DeltaFile>> {
        files.get(i).cloned().ok_or_else(|| format!("no file {i}"))
    };
    let mut added_facts = Vec::new();
    let mut versions: Vec<Version> = Vec::new();
    let mut arrows = Vec::new();
    for _ in 0..d.count(8)? {
        let number = d.u()?;
        let instant = d.s()?.to_string();
        let completion = d.opt_s()?.map(str::to_string);
        let action = d.s()?.to_string();
        let timestamp_ms = d.i()?;
        let schema = if d.b()? {
            Some(DeltaSchema {
                string: d.s()?.to_string(),
                timestamp_ntz: d.b()?,
            })
        } else {
            None
        };
        let data_change = d.b()?;
        let wants_changes = d.b()?;
        let arrow = if d.b()? {
            let s = d.n()?;
            if s >= samples.len() {
                return Err(format!("version {number}: no schema {s}"));
            }
            Some(s)
        } else {
            None
        };
        let mut files_now = versions.last().map(|p| p.files.clone()).unwrap_or_default();
        for _ in 0..d.count(1)? {
            let k = d.s()?;
            if files_now.remove(k).is_none() {
                return Err(format!(
                    "version {number} drops {k}, which it does not have"
                ));
            }
        }
        for _ in 0..d.count(2)? {
            let k: Arc<str> = Arc::from(d.s()?);
            files_now.insert(k, file(d.n()?)?);
        }
        let mut lists = [Vec::new(), Vec::new()];
        let mut facts_added = Vec::new();
        for (l, list) in lists.iter_mut().enumerate() {
            for _ in 0..d.count(1)? {
                let i = d.n()?;
                list.push(file(i)?);
                if l == 0 {
                    facts_added.push(file_facts[i]);
                }
            }
        }
        added_facts.push(facts_added);
        let [added, removed] = lists;
        if let Some(p) = versions.last() {
            if p.number.checked_add(1) != Some(number) {
                return Err(format!("version {number} after {}", p.number));
            }
        }
        versions.push(Version {
            number,
            instant,
            completion,
            action,
            timestamp_ms,
            schema,
            files: files_now,
            removed,
            added,
            data_change,
            wants_changes,
            changes: OnceLock::new(),
            // Set by [`Saved::versions`], once the schemas are read again.
            arrow: None,
        });
        arrows.push(arrow);
    }
    if !d.0.is_empty() {
        return Err(format!("{} bytes after the end", d.0.len()));
    }
    Ok(Saved {
        versions,
        arrows,
        added_facts,
        samples,
    })
}

#[cfg(test)]
mod tests {
    use super::super::log::{render, DeltaFile, TableFacts, Version};
    use super::*;

    fn table() -> TableFacts {
        TableFacts {
            id: "id".into(),
            name: "t".into(),
            change_feed: false,
        }
    }

    fn file(path: &str, size: u64) -> Arc<DeltaFile> {
        Arc::new(DeltaFile {
            path: path.into(),
            size,
            modified_ms: 7,
            stats: Some(Arc::from(format!(r#"{{"numRecords":{size}}}"#))),
            data_change: true,
        })
    }

    /// Three versions: `a` and `b`; `b` rewritten and `c` added; `a` gone. Each shares what
    /// it keeps with the one before, as a built log's versions do.
    fn versions(schema: &Arc<arrow_schema::Schema>) -> Vec<Arc<Version>> {
        let mut out: Vec<Arc<Version>> = Vec::new();
        let steps: [&[(&str, Option<u64>)]; 3] = [
            &[("p/a", Some(10)), ("p/b", Some(20))],
            &[("p/b", Some(21)), ("q/c", Some(30))],
            &[("p/a", None)],
        ];
        for (n, step) in steps.iter().enumerate() {
            let mut files = out.last().map(|p| p.files.clone()).unwrap_or_default();
            for (k, size) in step.iter() {
                match size {
                    Some(s) => {
                        files.insert(Arc::from(*k), file(&format!("{n}/{k}"), *s));
                    }
                    None => {
                        files.remove(*k);
                    }
                }
            }
            let mut v = Version {
                number: 5 + n as u64,
                instant: format!("2024010100000{n}"),
                completion: (n > 0).then(|| format!("2024010100001{n}")),
                action: "commit".into(),
                timestamp_ms: 1000 + n as i64,
                schema: Some(DeltaSchema {
                    string: format!(r#"{{"type":"struct","fields":[],"n":{n}}}"#),
                    timestamp_ntz: n == 2,
                }),
                files,
                removed: Vec::new(),
                added: Vec::new(),
                data_change: n != 1,
                wants_changes: false,
                changes: OnceLock::new(),
                arrow: Some(schema.clone()),
            };
            v.set_changes(out.last().map(|p| &**p));
            out.push(Arc::new(v));
        }
        out
    }

    fn facts(schema: &Arc<arrow_schema::Schema>) -> impl Fn(&str) -> Option<Arc<FileFacts>> {
        let parquet = Arc::new(
            parquet::schema::types::Type::group_type_builder("schema")
                .build()
                .unwrap(),
        );
        let schema = schema.clone();
        move |path: &str| {
            Some(Arc::new(FileFacts {
                stats: Arc::from("unused"),
                num_records: path.len() as i64,
                schema: schema.clone(),
                parquet: parquet.clone(),
            }))
        }
    }

    fn schema() -> Arc<arrow_schema::Schema> {
        Arc::new(arrow_schema::Schema::empty())
    }

    #[test]
    fn a_saved_log_gives_back_every_version_and_its_files_facts() {
        let schema = schema();
        let vs = versions(&schema);
        let facts = facts(&schema);
        let packed = pack(&encode("k", &vs, &facts).unwrap());
        let mut saved = decode("k", &unpack(&packed).unwrap()).unwrap();
        assert_eq!(saved.len(), 3);
        assert_eq!(saved.samples, vec!["0/p/a".to_string()]);
        let added_facts = std::mem::take(&mut saved.added_facts);
        let back = saved.versions(&[facts("0/p/a").unwrap()]).unwrap();
        let t = table();
        for (i, (v, w)) in vs.iter().zip(&back).enumerate() {
            assert_eq!(
                (
                    &v.number,
                    &v.instant,
                    &v.completion,
                    &v.action,
                    v.timestamp_ms
                ),
                (
                    &w.number,
                    &w.instant,
                    &w.completion,
                    &w.action,
                    w.timestamp_ms
                )
            );
            assert_eq!(v.schema, w.schema);
            assert_eq!(
                (v.data_change, v.wants_changes),
                (w.data_change, w.wants_changes)
            );
            assert!(w.arrow.as_ref().is_some_and(|a| Arc::ptr_eq(a, &schema)));
            let files = |v: &Version| -> Vec<(String, DeltaFile)> {
                v.files
                    .iter()
                    .map(|(k, f)| (k.to_string(), (**f).clone()))
                    .collect()
            };
            assert_eq!(files(v), files(w), "version {i}");
            let paths = |l: &[Arc<DeltaFile>]| l.iter().map(|f| f.path.clone()).collect::<Vec<_>>();
            assert_eq!(paths(&v.added), paths(&w.added));
            assert_eq!(paths(&v.removed), paths(&w.removed));
            let prev = |l: &[Arc<Version>]| i.checked_sub(1).map(|p| l[p].clone());
            assert_eq!(
                render(&t, prev(&vs).as_deref(), v).unwrap(),
                render(&t, prev(&back).as_deref(), w).unwrap()
            );
            // A file kept from the version before is the same file, as in a built log.
            if let Some(p) = prev(&back) {
                let kept = w.files.get("q/c").zip(p.files.get("q/c"));
                assert!(kept.is_none_or(|(a, b)| Arc::ptr_eq(a, b)));
            }
            assert_eq!(added_facts[i].len(), w.added.len());
            for (f, ff) in w.added.iter().zip(&added_facts[i]) {
                assert_eq!(*ff, Some((f.path.len() as i64, 0)));
            }
        }
    }

    #[test]
    fn a_damaged_or_foreign_saved_log_is_refused_without_a_panic() {
        let schema = schema();
        let raw = encode("k", &versions(&schema), &facts(&schema)).unwrap();
        assert!(decode("other", &raw).is_err());
        for cut in 0..raw.len() {
            assert!(decode("k", &raw[..cut]).is_err(), "cut at {cut}");
        }
        for at in (0..raw.len()).step_by(7) {
            let mut bad = raw.clone();
            bad[at] ^= 0x20;
            assert!(decode("k", &bad).is_err(), "byte {at}");
        }
        let packed = pack(&raw);
        for cut in 0..packed.len() {
            assert!(unpack(&packed[..cut]).is_err(), "packed cut at {cut}");
        }
        assert!(unpack(b"hudifsZ1\xff\xff\xff\xff\xff\xff\xff\xff").is_err());
    }

    #[test]
    fn a_version_without_footer_facts_is_not_saved() {
        let schema = schema();
        assert!(encode("k", &versions(&schema), &|_: &str| None).is_none());
    }

    #[test]
    fn a_saved_checkpoint_is_taken_back_only_for_the_same_version() {
        let schema = schema();
        let vs = versions(&schema);
        let t = table();
        let saved = encode_checkpoint("k", &t, &vs[1], b"PAR1 checkpoint");
        assert_eq!(
            decode_checkpoint("k", &t, &vs[1], &saved).unwrap(),
            b"PAR1 checkpoint"
        );
        assert!(decode_checkpoint("other", &t, &vs[1], &saved).is_err());
        assert!(decode_checkpoint("k", &t, &vs[2], &saved).is_err());
        // The same number, another file in it.
        let mut changed = (*vs[1]).clone();
        changed.files.insert(Arc::from("p/b"), file("1/p/b", 22));
        assert!(decode_checkpoint("k", &t, &changed, &saved).is_err());
        let other = TableFacts {
            change_feed: true,
            ..table()
        };
        assert!(decode_checkpoint("k", &other, &vs[1], &saved).is_err());
        for cut in 0..saved.len() {
            assert!(decode_checkpoint("k", &t, &vs[1], &saved[..cut]).is_err());
        }
    }
}
