//! The log of `delta/` kept across mounts (docs/SEMANTICS.md §11.5). Building a log costs a
//! file-system view per version and a footer per data file: for a table of 100,000 files over
//! 1,000 writes, seconds. A built log is saved beside the merge cache's entries, and the next
//! mount of the same table by the same build of hudifs takes each saved version back while the
//! timeline still has the same write at the same number and nothing can have changed it (the
//! rule that keeps a version from one snapshot to the next: `fs/delta.rs`).
//!
//! The file is this module's own binary form: a header (magic, format, the key), the schemas
//! (each the footer of a file of that schema, which gives it back without a read of the table),
//! the data files once each
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
use crate::saved_form::{checksum, open, Enc, R};

const MAGIC: &[u8; 8] = b"hudifsDL";
/// Changed whenever the form changes (a file of another format is not read).
const FORMAT: u64 = 2;
const CHECKPOINT_MAGIC: &[u8; 8] = b"hudifsCP";

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
    /// For each schema, that file's footer (Parquet's `FileMetaData`), which gives the schema
    /// back without a read of the table (on an object store, without listing its partitions).
    pub footers: Vec<Vec<u8>>,
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

/// The saved form of `versions` (in order) under `key`, with the footer facts `facts` gives of
/// their data files and the footer `footer` gives of a file of each schema; `None` when a data
/// file has no facts or a schema no footer (such a log is not saved).
pub fn encode(
    key: &str,
    versions: &[Arc<Version>],
    facts: &dyn Fn(&str) -> Option<Arc<FileFacts>>,
    footer: &dyn Fn(&FileFacts) -> Option<Arc<Vec<u8>>>,
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
    let mut samples: Vec<(String, Arc<Vec<u8>>)> = Vec::new();
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
                samples.push((f.path.clone(), footer(&ff)?));
                schemas.push(ff.clone());
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
    for (path, footer) in &samples {
        e.s(path);
        e.bytes(footer);
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
    let mut d = open(CHECKPOINT_MAGIC, FORMAT, key, bytes)?;
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
    let mut d = open(MAGIC, FORMAT, key, bytes)?;
    let mut samples = Vec::new();
    let mut footers = Vec::new();
    for _ in 0..d.count(2)? {
        samples.push(d.s()?.to_string());
        footers.push(d.bytes()?.to_vec());
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
        footers,
    })
}

#[cfg(test)]
mod tests {
    use super::super::log::{render, DeltaFile, TableFacts, Version};
    use super::*;
    use crate::saved_form::{pack, unpack};

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

    fn footer(_: &FileFacts) -> Option<Arc<Vec<u8>>> {
        Some(Arc::new(b"a footer".to_vec()))
    }

    fn schema() -> Arc<arrow_schema::Schema> {
        Arc::new(arrow_schema::Schema::empty())
    }

    #[test]
    fn a_saved_log_gives_back_every_version_and_its_files_facts() {
        let schema = schema();
        let vs = versions(&schema);
        let facts = facts(&schema);
        let packed = pack(&encode("k", &vs, &facts, &footer).unwrap());
        let mut saved = decode("k", &unpack(&packed).unwrap()).unwrap();
        assert_eq!(saved.len(), 3);
        assert_eq!(saved.samples, vec!["0/p/a".to_string()]);
        assert_eq!(saved.footers, vec![b"a footer".to_vec()]);
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
        let raw = encode("k", &versions(&schema), &facts(&schema), &footer).unwrap();
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
        assert!(encode("k", &versions(&schema), &|_: &str| None, &footer).is_none());
        // Nor one with a schema whose footer is not known.
        let vs = versions(&schema);
        assert!(encode("k", &vs, &facts(&schema), &|_: &FileFacts| None).is_none());
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
