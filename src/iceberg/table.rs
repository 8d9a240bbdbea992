//! The Iceberg table of a Hudi table as plain values: one snapshot per version of the Delta log
//! (`delta::Version`: one per completed write instant, its files the instant's snapshot), the
//! schemas with their field ids, and the manifests, rendered when read.
//!
//! Manifests: the files are spread over [`BUCKETS`] manifests by a hash of their partition. A
//! snapshot writes a new manifest for each bucket its write changed (its files added, kept and
//! deleted in that bucket) and keeps the manifests of the buckets it did not touch from the
//! snapshot before, as Iceberg's own writers append: a write that touches a few partitions
//! writes a few small manifests, however big the table.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parquet::schema::types::Type;
use serde_json::{json, Map, Value};

use super::entry_stats::{Bound, EntryStats};
use super::footer::id_bytes;
use super::manifest::{self, DataFileEntry, ManifestRef, Status};
use super::schema::{
    element_ids, iceberg_schema, leaf_types, reads_as, BoundKind, FieldIds, IcebergSchema,
};
use crate::delta::log::decode_path;
use crate::delta::stats::FileFacts;
use crate::delta::{DeltaFile, Version};

mod saved;

/// Manifests per snapshot, at most.
pub const BUCKETS: usize = 64;

/// What the table needs of one data file: its footer facts (schema and statistics).
pub type FactsOf<'a> = dyn Fn(&DeltaFile) -> Option<Arc<FileFacts>> + Sync + 'a;

/// A manifest as written, and its entry in a manifest list.
type Rendered = (Arc<Vec<u8>>, ManifestRef);

/// One snapshot.
pub struct Snapshot {
    pub version: Arc<Version>,
    /// The instant's digits: stable, and `FOR VERSION AS OF <instant>` reads like `as_of/`.
    pub id: i64,
    /// The version number plus one (Iceberg sequence numbers start at 1).
    pub sequence: i64,
    pub schema_id: i32,
    /// For each bucket, the snapshot (index) that wrote its manifest; none: the bucket is empty.
    writers: Vec<Option<usize>>,
    list: OnceLock<Arc<Vec<u8>>>,
    /// This snapshot's own manifests (by bucket) and their manifest-list entries, rendered when
    /// first read.
    manifests: HashMap<usize, OnceLock<Rendered>>,
    /// The version's files by bucket, sorted out in one pass when a manifest of this snapshot
    /// is first rendered (each manifest would otherwise walk all of them).
    by_bucket: OnceLock<Vec<Vec<Arc<DeltaFile>>>>,
}

/// A file of `iceberg/metadata/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaFile {
    /// `v<n + 1>.metadata.json`: the table as of version `n`.
    Metadata(u64),
    /// `snap-<n>.avro`: version `n`'s manifest list.
    List(u64),
    /// `v<n>-m<b>.avro`: a manifest version `n` wrote.
    Manifest(u64, usize),
    /// `version-hint.text`.
    Hint,
}

/// Versions above this have no file id.
const MAX_VERSION: u64 = (1 << 26) - 1;

impl MetaFile {
    pub fn name(self) -> String {
        match self {
            MetaFile::Metadata(n) => format!("v{}.metadata.json", n + 1),
            MetaFile::List(n) => format!("snap-{n}.avro"),
            MetaFile::Manifest(n, b) => format!("v{n}-m{b}.avro"),
            MetaFile::Hint => "version-hint.text".into(),
        }
    }

    pub fn parse(name: &str) -> Option<MetaFile> {
        let num = |s: &str| -> Option<u64> {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && !s.starts_with("00"))
                .then(|| s.parse().ok())
                .flatten()
                .filter(|n| *n <= MAX_VERSION)
        };
        if name == "version-hint.text" {
            return Some(MetaFile::Hint);
        }
        if let Some(s) = name.strip_suffix(".metadata.json") {
            let n = num(s.strip_prefix('v')?)?;
            return Some(MetaFile::Metadata(n.checked_sub(1)?));
        }
        if let Some(s) = name.strip_prefix("snap-") {
            return Some(MetaFile::List(num(s.strip_suffix(".avro")?)?));
        }
        let (n, b) = name
            .strip_prefix('v')?
            .strip_suffix(".avro")?
            .split_once("-m")?;
        let b = usize::try_from(num(b)?).ok().filter(|b| *b < BUCKETS)?;
        let f = MetaFile::Manifest(num(n)?, b);
        (f.name() == name).then_some(f)
    }

    /// A number for the file's inode (below 2^35).
    pub fn id(self) -> u64 {
        match self {
            MetaFile::Metadata(n) => n << 8,
            MetaFile::List(n) => (n << 8) | 1,
            MetaFile::Manifest(n, b) => (n << 8) | 2 | ((b as u64) << 2),
            MetaFile::Hint => 3,
        }
    }

    pub fn from_id(id: u64) -> Option<MetaFile> {
        let n = id >> 8;
        match id & 0xff {
            0 => Some(MetaFile::Metadata(n)),
            1 => Some(MetaFile::List(n)),
            3 if n == 0 => Some(MetaFile::Hint),
            x if x & 3 == 2 => Some(MetaFile::Manifest(n, (x >> 2) as usize)),
            _ => None,
        }
        .filter(|_| n <= MAX_VERSION)
    }
}

/// A data file as `iceberg/` serves it: its size with field ids in its footer, and its entry's
/// statistics.
#[derive(Debug, Clone)]
pub struct Served {
    pub size: u64,
    pub ids: Arc<Vec<Option<i32>>>,
}

/// The whole Iceberg table of one snapshot of the Hudi table.
pub struct IcebergTable {
    /// Absolute: where `iceberg/` is seen (`<mount>/iceberg`).
    pub location: String,
    pub uuid: String,
    pub snapshots: Vec<Snapshot>,
    /// Every schema, by id, as the snapshots introduced them.
    schemas: Vec<(Value, Value)>,
    pub ids: FieldIds,
    /// The `bounded` columns of each schema.
    bounded: Vec<HashMap<String, (i32, BoundKind)>>,
    /// Snapshot index by instant.
    by_instant: HashMap<String, usize>,
    /// Hudi table properties worth showing.
    properties: Map<String, Value>,
    /// What [`IcebergTable::served`] worked out for each footer schema (a table's files share a
    /// few): the elements' ids and how many bytes they add.
    served: std::sync::Mutex<Vec<ServedSchema>>,
}

/// A footer schema, its elements' field ids and what they add to a file's size (or why it has
/// none).
type ServedSchema = (Arc<Type>, Result<IdsAdded, String>);

/// The field ids of a footer schema's elements, and how many bytes they add to its file.
type IdsAdded = (Arc<Vec<Option<i32>>>, i64);

/// The bucket of a file, from its path (`<instant>/<partition>/<name>`).
fn bucket(path: &str) -> usize {
    let part = path
        .split_once('/')
        .map_or("", |(_, r)| r.rsplit_once('/').map_or("", |(p, _)| p));
    let h = part.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (h % BUCKETS as u64) as usize
}

impl IcebergTable {
    /// The table of `versions` (in order), seen at `location`. `old` is the table built before:
    /// its field ids are kept, so a column keeps its id as the table moves.
    pub fn new(
        location: String,
        uuid: String,
        versions: &[Arc<Version>],
        facts: &FactsOf,
        old: Option<&IcebergTable>,
        properties: Map<String, Value>,
    ) -> Result<IcebergTable, (u64, String)> {
        let mut ids = old.map(|o| o.ids.clone()).unwrap_or_default();
        let mut schemas: Vec<(Value, Value)> = Vec::new();
        let mut bounded = Vec::new();
        let mut snapshots: Vec<Snapshot> = Vec::new();
        let mut by_instant = HashMap::new();
        // The distinct Parquet schemas of the current files (files share them), with how many
        // files have each, and which of them a schema was checked against.
        let mut in_use: HashMap<usize, (Arc<Type>, usize)> = HashMap::new();
        let mut checked: std::collections::HashSet<(usize, i32)> = Default::default();
        for (i, v) in versions.iter().enumerate() {
            for f in &v.added {
                if let Some(x) = facts(f) {
                    in_use
                        .entry(Arc::as_ptr(&x.parquet) as usize)
                        .or_insert_with(|| (x.parquet.clone(), 0))
                        .1 += 1;
                }
            }
            for f in &v.removed {
                if let Some(x) = facts(f) {
                    let key = Arc::as_ptr(&x.parquet) as usize;
                    if let Some(e) = in_use.get_mut(&key) {
                        e.1 -= 1;
                        if e.1 == 0 {
                            in_use.remove(&key);
                        }
                    }
                }
            }
            let schema_file = v.added.first().and_then(|f| facts(f));
            let schema_id = match schema_file {
                Some(f) => {
                    let s: IcebergSchema = iceberg_schema(&f.parquet, &mut ids)
                        .map_err(|e| (v.number, format!("{}: {e}", decode_path(&f_path(v)))))?;
                    match schemas.iter().position(|(fields, _)| *fields == s.fields) {
                        Some(p) if p + 1 == schemas.len() => p as i32,
                        _ => {
                            schemas.push((s.fields, s.mapping));
                            bounded.push(s.bounded);
                            schemas.len() as i32 - 1
                        }
                    }
                }
                None if !schemas.is_empty() => schemas.len() as i32 - 1,
                None => return Err((v.number, "no file gives the table a schema".into())),
            };
            // Every file must read as the snapshot's schema: Iceberg declares the promotions
            // Hudi makes (int to long, ...), not a column that changes to another type (as
            // time-based key generators' partition fields do, long then string).
            let table_types = leaf_types(&schemas[schema_id as usize].0);
            for (key, (p, _)) in &in_use {
                if !checked.insert((*key, schema_id)) {
                    continue;
                }
                let file = iceberg_schema(p, &mut ids.clone())
                    .map_err(|e| (v.number, format!("a file's schema: {e}")))?;
                for (id, from) in leaf_types(&file.fields) {
                    if let Some(to) = table_types.get(&id) {
                        if !reads_as(&from, to) {
                            return Err((
                                v.number,
                                format!(
                                    "field {id} is {from} in some of its files and {to} in its \
                                     schema, and Iceberg reads no {from} as {to}"
                                ),
                            ));
                        }
                    }
                }
            }
            let mut writers = snapshots
                .last()
                .map_or_else(|| vec![None; BUCKETS], |s| s.writers.clone());
            let mut touched = [false; BUCKETS];
            for f in v.added.iter().chain(&v.removed) {
                touched[bucket(&f.path)] = true;
            }
            // A manifest is written where the write changed something (deleted entries
            // included); every other bucket keeps the manifest it had, and a bucket no write
            // ever touched has none. (No walk of the version's files: a version adds or removes
            // a few of the table's many.)
            let mut manifests = HashMap::new();
            for b in (0..BUCKETS).filter(|b| touched[*b]) {
                writers[b] = Some(i);
                manifests.insert(b, OnceLock::new());
            }
            by_instant.insert(v.instant.clone(), i);
            snapshots.push(Snapshot {
                version: v.clone(),
                id: v.instant.parse().unwrap_or(v.number as i64),
                sequence: v.number as i64 + 1,
                schema_id,
                writers,
                list: OnceLock::new(),
                manifests,
                by_bucket: OnceLock::new(),
            });
        }
        Ok(IcebergTable {
            location,
            uuid,
            snapshots,
            schemas,
            ids,
            bounded,
            by_instant,
            properties,
            served: Default::default(),
        })
    }

    /// The snapshot of the write at `instant`.
    pub fn snapshot_at(&self, instant: &str) -> Option<&Snapshot> {
        self.by_instant.get(instant).map(|i| &self.snapshots[*i])
    }

    fn snapshot(&self, number: u64) -> Option<(usize, &Snapshot)> {
        let first = self.snapshots.first()?.version.number;
        let i = usize::try_from(number.checked_sub(first)?).ok()?;
        Some((i, self.snapshots.get(i)?))
    }

    /// The files of `iceberg/metadata/` for the built snapshots, in order.
    pub fn files(&self) -> Vec<MetaFile> {
        let mut out = Vec::new();
        for s in &self.snapshots {
            let n = s.version.number;
            out.push(MetaFile::Metadata(n));
            out.push(MetaFile::List(n));
            let mut own: Vec<usize> = s.manifests.keys().copied().collect();
            own.sort_unstable();
            out.extend(own.into_iter().map(|b| MetaFile::Manifest(n, b)));
        }
        if !self.snapshots.is_empty() {
            out.push(MetaFile::Hint);
        }
        out
    }

    /// Whether the newest snapshot's manifest list is rendered (or taken back).
    pub fn current_list_rendered(&self) -> bool {
        self.snapshots
            .last()
            .is_some_and(|s| s.list.get().is_some())
    }

    /// Whether `f` is a file of this table.
    pub fn has(&self, f: MetaFile) -> bool {
        match f {
            MetaFile::Metadata(n) | MetaFile::List(n) => self.snapshot(n).is_some(),
            MetaFile::Manifest(n, b) => self
                .snapshot(n)
                .is_some_and(|(_, s)| s.manifests.contains_key(&b)),
            MetaFile::Hint => !self.snapshots.is_empty(),
        }
    }

    /// The snapshot a file belongs to (for its time).
    pub fn version_of(&self, f: MetaFile) -> Option<&Arc<Version>> {
        match f {
            MetaFile::Metadata(n) | MetaFile::List(n) | MetaFile::Manifest(n, _) => {
                self.snapshot(n).map(|(_, s)| &s.version)
            }
            MetaFile::Hint => self.snapshots.last().map(|s| &s.version),
        }
    }

    /// The bytes of `f`.
    pub fn bytes(&self, f: MetaFile, facts: &FactsOf) -> Result<Arc<Vec<u8>>, String> {
        let missing = || format!("{}: not a file of this table", f.name());
        match f {
            MetaFile::Hint => {
                let last = self.snapshots.last().ok_or_else(missing)?;
                Ok(Arc::new(
                    format!("{}", last.version.number + 1).into_bytes(),
                ))
            }
            MetaFile::Metadata(n) => {
                let (i, _) = self.snapshot(n).ok_or_else(missing)?;
                Ok(Arc::new(self.metadata(i).into_bytes()))
            }
            MetaFile::List(n) => {
                let (i, _) = self.snapshot(n).ok_or_else(missing)?;
                self.list(i, facts)
            }
            MetaFile::Manifest(n, b) => {
                let (i, _) = self.snapshot(n).ok_or_else(missing)?;
                self.manifest(i, b, facts).map(|(bytes, _)| bytes)
            }
        }
    }

    fn path_of(&self, f: MetaFile) -> String {
        format!("{}/metadata/{}", self.location, f.name())
    }

    /// `v<n + 1>.metadata.json` of snapshot `i`: the table with snapshots up to `i`.
    fn metadata(&self, i: usize) -> String {
        let cur = &self.snapshots[i];
        let schemas: Vec<Value> = self.schemas[..=cur.schema_id as usize]
            .iter()
            .enumerate()
            .map(|(id, (fields, _))| json!({"type": "struct", "schema-id": id, "fields": fields}))
            .collect();
        let snapshots: Vec<Value> = self.snapshots[..=i]
            .iter()
            .enumerate()
            .map(|(j, s)| {
                let v = &s.version;
                let mut summary = Map::new();
                let op = match (v.added.is_empty(), v.removed.is_empty()) {
                    (false, true) => "append",
                    (true, false) => "delete",
                    _ => "overwrite",
                };
                summary.insert("operation".into(), json!(op));
                summary.insert("hudi.instant".into(), json!(v.instant));
                if let Some(c) = &v.completion {
                    summary.insert("hudi.completion".into(), json!(c));
                }
                summary.insert("hudi.action".into(), json!(v.action));
                summary.insert("added-data-files".into(), json!(v.added.len().to_string()));
                summary.insert(
                    "deleted-data-files".into(),
                    json!(v.removed.len().to_string()),
                );
                summary.insert("total-data-files".into(), json!(v.files.len().to_string()));
                let mut o = json!({
                    "snapshot-id": s.id,
                    "sequence-number": s.sequence,
                    "timestamp-ms": v.timestamp_ms,
                    "manifest-list": self.path_of(MetaFile::List(v.number)),
                    "summary": summary,
                    "schema-id": s.schema_id,
                });
                if let Some(p) = j.checked_sub(1) {
                    o["parent-snapshot-id"] = json!(self.snapshots[p].id);
                }
                o
            })
            .collect();
        let log: Vec<Value> = self.snapshots[..=i]
            .iter()
            .map(|s| json!({"timestamp-ms": s.version.timestamp_ms, "snapshot-id": s.id}))
            .collect();
        let mut properties = self.properties.clone();
        properties.insert(
            "schema.name-mapping.default".into(),
            json!(self.schemas[cur.schema_id as usize].1.to_string()),
        );
        let v = json!({
            "format-version": 2,
            "table-uuid": self.uuid,
            "location": self.location,
            "last-sequence-number": cur.sequence,
            "last-updated-ms": cur.version.timestamp_ms,
            "last-column-id": self.ids.last,
            "current-schema-id": cur.schema_id,
            "schemas": schemas,
            "default-spec-id": 0,
            "partition-specs": [{"spec-id": 0, "fields": []}],
            "last-partition-id": 999,
            "default-sort-order-id": 0,
            "sort-orders": [{"order-id": 0, "fields": []}],
            "properties": properties,
            "current-snapshot-id": cur.id,
            "refs": {"main": {"snapshot-id": cur.id, "type": "branch"}},
            "snapshots": snapshots,
            "snapshot-log": log,
            "metadata-log": [],
        });
        serde_json::to_string_pretty(&v).unwrap_or_default()
    }

    /// The manifest list of snapshot `i`.
    fn list(&self, i: usize, facts: &FactsOf) -> Result<Arc<Vec<u8>>, String> {
        let s = &self.snapshots[i];
        if let Some(b) = s.list.get() {
            return Ok(b.clone());
        }
        // Its manifests, for their lengths: rendered side by side (each holds thousands of
        // entries in a big table).
        let writers: Vec<(usize, usize)> = s
            .writers
            .iter()
            .enumerate()
            .filter_map(|(b, w)| Some((b, (*w)?)))
            .collect();
        let threads = hudifs_core::side_by_side::cores();
        let refs = hudifs_core::side_by_side::map(&writers, threads, |(b, w)| {
            self.manifest(*w, *b, facts).map(|(_, r)| r)
        })
        .into_iter()
        .collect::<Result<Vec<_>, String>>()?;
        let parent = i.checked_sub(1).map(|p| self.snapshots[p].id);
        let bytes = Arc::new(manifest::manifest_list(s.id, parent, s.sequence, &refs));
        Ok(s.list.get_or_init(|| bytes).clone())
    }

    /// The manifest snapshot `i` wrote for bucket `b`, and its entry in a manifest list.
    fn manifest(
        &self,
        i: usize,
        b: usize,
        facts: &FactsOf,
    ) -> Result<(Arc<Vec<u8>>, ManifestRef), String> {
        let s = &self.snapshots[i];
        let slot = s
            .manifests
            .get(&b)
            .ok_or_else(|| format!("snapshot {} wrote no manifest {b}", s.id))?;
        if let Some(got) = slot.get() {
            return Ok(got.clone());
        }
        let entries = self.entries(i, b, facts)?;
        let (fields, _) = &self.schemas[s.schema_id as usize];
        let schema = json!({"type": "struct", "schema-id": s.schema_id, "fields": fields});
        let bytes = Arc::new(manifest::manifest(
            &schema.to_string(),
            s.schema_id,
            &entries,
        ));
        let mut r = ManifestRef {
            path: self.path_of(MetaFile::Manifest(s.version.number, b)),
            length: bytes.len() as u64,
            sequence_number: s.sequence,
            snapshot_id: s.id,
            min_sequence_number: s.sequence,
            added: (0, 0),
            existing: (0, 0),
            deleted: (0, 0),
        };
        r.count(&entries);
        Ok(slot.get_or_init(|| (bytes, r)).clone())
    }

    /// The entries of the manifest snapshot `i` wrote for bucket `b`: its files there (added
    /// by it, or kept from the snapshot that added them) and those it deleted.
    fn entries(&self, i: usize, b: usize, facts: &FactsOf) -> Result<Vec<DataFileEntry>, String> {
        let s = &self.snapshots[i];
        let v = &s.version;
        let mut out = Vec::new();
        let by_bucket = s.by_bucket.get_or_init(|| {
            let mut out = vec![Vec::new(); BUCKETS];
            for f in v.files.values() {
                out[bucket(&f.path)].push(f.clone());
            }
            out
        });
        for f in &by_bucket[b] {
            let adder = self.adder(f)?;
            let status = if adder == i {
                Status::Added
            } else {
                Status::Existing
            };
            out.push(self.entry(f, status, self.snapshots[adder].id, adder, facts)?);
        }
        for f in v.removed.iter().filter(|f| bucket(&f.path) == b) {
            let adder = self.adder(f)?;
            out.push(self.entry(f, Status::Deleted, s.id, adder, facts)?);
        }
        Ok(out)
    }

    /// The snapshot that added file `f` (its path starts with that snapshot's instant).
    fn adder(&self, f: &DeltaFile) -> Result<usize, String> {
        let instant = f.path.split('/').next().unwrap_or_default();
        self.by_instant
            .get(instant)
            .copied()
            .ok_or_else(|| format!("{}: added by no snapshot", f.path))
    }

    fn entry(
        &self,
        f: &DeltaFile,
        status: Status,
        snapshot_id: i64,
        adder: usize,
        facts: &FactsOf,
    ) -> Result<DataFileEntry, String> {
        let a = &self.snapshots[adder];
        let mut e = DataFileEntry {
            status,
            snapshot_id,
            sequence_number: a.sequence,
            path: format!("{}/{}", self.location, decode_path(&f.path)),
            record_count: 0,
            size: 0,
            value_counts: Vec::new(),
            null_counts: Vec::new(),
            lower: Vec::new(),
            upper: Vec::new(),
        };
        let facts = facts(f).ok_or_else(|| format!("{}: no footer facts", f.path))?;
        e.record_count = facts.num_records;
        e.size = self.served(&facts.parquet, f.size)?.size;
        let stats = EntryStats::parse(&facts.stats);
        let bounded = &self.bounded[a.schema_id as usize];
        for (name, n) in &stats.null_count {
            if let (Some(id), Some(n)) = (self.ids.column(name), n) {
                e.value_counts.push((id, facts.num_records));
                e.null_counts.push((id, *n));
            }
        }
        for (name, (id, kind)) in bounded {
            let enc = |v: Option<&Bound>| -> Option<Vec<u8>> {
                match (kind, v?) {
                    (BoundKind::Int, Bound::Int(n)) => {
                        Some(i32::try_from(*n).ok()?.to_le_bytes().to_vec())
                    }
                    (BoundKind::Long, Bound::Int(n)) => Some(n.to_le_bytes().to_vec()),
                    (BoundKind::String, Bound::Str(s)) => Some(s.as_bytes().to_vec()),
                    _ => None,
                }
            };
            if let (Some(lo), Some(hi)) = (
                enc(Bound::of(&stats.min, name)),
                enc(Bound::of(&stats.max, name)),
            ) {
                e.lower.push((*id, lo));
                e.upper.push((*id, hi));
            }
        }
        e.value_counts.sort_unstable();
        e.null_counts.sort_unstable();
        e.lower.sort_unstable();
        e.upper.sort_unstable();
        Ok(e)
    }

    /// The field ids of the elements of a file's footer schema, and the size the file has with
    /// them: `size` plus what the ids add, less what ids it already had take. Worked out once
    /// per schema.
    pub fn served(&self, parquet: &Arc<Type>, size: u64) -> Result<Served, String> {
        let known = {
            let memo = hudifs_storage::sync::lock(&self.served);
            memo.iter()
                .find(|(t, _)| Arc::ptr_eq(t, parquet))
                .map(|(_, r)| r.clone())
        };
        let (ids, delta) = match known {
            Some(r) => r?,
            None => {
                let r = self.served_schema(parquet);
                hudifs_storage::sync::lock(&self.served).push((parquet.clone(), r.clone()));
                r?
            }
        };
        Ok(Served {
            size: u64::try_from(i128::from(size) + i128::from(delta))
                .map_err(|_| "a footer smaller than its ids")?,
            ids,
        })
    }

    /// The elements' field ids of footer schema `parquet`, and how many bytes they add to the
    /// footer (less those of the ids it had).
    fn served_schema(&self, parquet: &Type) -> Result<IdsAdded, String> {
        let ids = Arc::new(element_ids(parquet, &self.ids)?);
        let mut old = Vec::new();
        preorder_ids(parquet, &mut old);
        let add: usize = ids.iter().flatten().map(|i| id_bytes(*i)).sum();
        let sub: usize = old.iter().flatten().map(|i| id_bytes(*i)).sum();
        Ok((ids, add as i64 - sub as i64))
    }
}

fn f_path(v: &Version) -> String {
    v.added.first().map(|f| f.path.clone()).unwrap_or_default()
}

/// The ids a schema's elements have, depth first (the root first).
fn preorder_ids(t: &Type, out: &mut Vec<Option<i32>>) {
    let info = t.get_basic_info();
    out.push(info.has_id().then(|| info.id()));
    if t.is_group() {
        for c in t.get_fields() {
            preorder_ids(c, out);
        }
    }
}
