//! `iceberg/`'s current snapshot kept across mounts (docs/SEMANTICS.md §11.5): the manifest
//! list of the newest snapshot a mount rendered and the manifests it names, saved beside
//! `delta/`'s log, and taken back by the next mount where its table is, up to the snapshot that
//! wrote each file, what it was. Rendering the manifests of a 100,000-file table takes a second
//! of both cores; taking them back, a read.
//!
//! What a snapshot's files hold is decided by the table's location, id and properties, its
//! field ids, and the snapshots up to it: their numbers, instants, schemas and the files each
//! added and removed (a file's footer facts are those of its path, size and statistics under the
//! same key: the same build of hudifs and the same table, as for `delta/`'s checkpoint). A
//! chain of hashes over those, one per snapshot, is saved with each file, and a file is taken
//! back only where the new table's chain has the same hash at its snapshot.

use std::sync::Arc;

use super::{IcebergTable, Rendered, BUCKETS};
use crate::delta::{DeltaFile, Version};
use crate::iceberg::manifest::ManifestRef;
use crate::saved_form::{checksum, open, Dec, Enc, R};

const MAGIC: &[u8; 8] = b"hudifsIM";
/// Changed whenever the form changes (a file of another format is not read).
const FORMAT: u64 = 1;

/// Hashes `e`'s bytes into `h` and empties it (a long walk hashes in runs).
fn flush(e: &mut Enc, h: &mut u64) {
    *h = checksum(&e.0) ^ h.rotate_left(17).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    e.0.clear();
}

fn file(e: &mut Enc, f: &DeltaFile) {
    e.s(&f.path);
    e.u(f.size);
    e.i(f.modified_ms);
    e.b(f.data_change);
    e.opt_s(f.stats.as_deref());
}

fn version(e: &mut Enc, h: &mut u64, v: &Version, first: bool) {
    e.u(v.number);
    e.s(&v.instant);
    e.opt_s(v.completion.as_deref());
    e.s(&v.action);
    e.i(v.timestamp_ms);
    e.b(v.data_change);
    // The first snapshot's files are all it has; every later one's, those of the one before
    // less those it removed, plus those it added.
    let lists: [Vec<&Arc<DeltaFile>>; 2] = if first {
        [v.files.values().collect(), Vec::new()]
    } else {
        [v.added.iter().collect(), v.removed.iter().collect()]
    };
    for list in lists {
        e.u(list.len() as u64);
        for f in list {
            file(e, f);
            if e.0.len() >= 1 << 16 {
                flush(e, h);
            }
        }
    }
}

fn manifest_ref(e: &mut Enc, r: &ManifestRef) {
    e.s(&r.path);
    e.u(r.length);
    e.i(r.sequence_number);
    e.i(r.snapshot_id);
    e.i(r.min_sequence_number);
    for (files, rows) in [r.added, r.existing, r.deleted] {
        e.i(i64::from(files));
        e.i(rows);
    }
}

fn read_manifest_ref(d: &mut Dec) -> R<ManifestRef> {
    let path = d.s()?.to_string();
    let length = d.u()?;
    let (sequence_number, snapshot_id, min_sequence_number) = (d.i()?, d.i()?, d.i()?);
    let mut counts = [(0i32, 0i64); 3];
    for c in &mut counts {
        let files = i32::try_from(d.i()?).map_err(|e| e.to_string())?;
        *c = (files, d.i()?);
    }
    let [added, existing, deleted] = counts;
    Ok(ManifestRef {
        path,
        length,
        sequence_number,
        snapshot_id,
        min_sequence_number,
        added,
        existing,
        deleted,
    })
}

impl IcebergTable {
    /// For each snapshot, a hash of all that decides its manifest list and the manifests it
    /// wrote (module docs): each snapshot's own, worked out side by side, chained in order.
    fn chain(&self) -> Vec<u64> {
        let mut e = Enc(Vec::with_capacity(1 << 12));
        let mut h: u64 = 0;
        e.s(&self.location);
        e.s(&self.uuid);
        e.s(&serde_json::Value::Object(self.properties.clone()).to_string());
        e.i(i64::from(self.ids.last));
        for (path, id) in self.ids.sorted() {
            e.s(path);
            e.i(i64::from(id));
        }
        flush(&mut e, &mut h);
        let schemas: Vec<String> = self
            .schemas
            .iter()
            .map(|(fields, _)| fields.to_string())
            .collect();
        let indices: Vec<usize> = (0..self.snapshots.len()).collect();
        let own =
            hudifs_core::side_by_side::map(&indices, hudifs_core::side_by_side::cores(), |&i| {
                let s = &self.snapshots[i];
                let mut e = Enc(Vec::with_capacity(1 << 12));
                let mut h: u64 = 0;
                e.i(s.id);
                e.i(s.sequence);
                e.i(i64::from(s.schema_id));
                e.s(schemas.get(s.schema_id as usize).map_or("", |x| x.as_str()));
                for w in &s.writers {
                    e.u(w.map_or(0, |w| w as u64 + 1));
                }
                version(&mut e, &mut h, &s.version, i == 0);
                flush(&mut e, &mut h);
                h
            });
        own.into_iter()
            .map(|o| {
                h = o ^ h.rotate_left(17).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                h
            })
            .collect()
    }

    /// The saved form, under `key`, of the newest snapshot's manifest list and the manifests it
    /// names, as far as they are rendered; `None` where its list is not.
    pub fn save_current(&self, key: &str) -> Option<Vec<u8>> {
        let (i, s) = self.snapshots.iter().enumerate().next_back()?;
        let list = s.list.get()?;
        let chain = self.chain();
        let mut e = Enc(Vec::with_capacity(1 << 20));
        e.0.extend_from_slice(MAGIC);
        e.u(FORMAT);
        e.s(key);
        e.u(s.version.number);
        e.u(chain[i]);
        e.bytes(list);
        let rendered: Vec<(usize, usize, &Rendered)> = (0..BUCKETS)
            .filter_map(|b| {
                let w = s.writers[b]?;
                Some((w, b, self.snapshots[w].manifests.get(&b)?.get()?))
            })
            .collect();
        e.u(rendered.len() as u64);
        for (w, b, (bytes, r)) in rendered {
            e.u(self.snapshots[w].version.number);
            e.u(b as u64);
            e.u(chain[w]);
            e.bytes(bytes);
            manifest_ref(&mut e, r);
        }
        Some(e.sealed())
    }

    /// Take back what [`IcebergTable::save_current`] saved in `bytes` under `key`: each file
    /// whose snapshot hashes the same in this table; how many were taken, or why none could be.
    pub fn take_back(&self, key: &str, bytes: &[u8]) -> R<usize> {
        let mut d = open(MAGIC, FORMAT, key, bytes)?;
        let chain = self.chain();
        let same = |number: u64, hash: u64| -> Option<usize> {
            let (i, _) = self.snapshot(number)?;
            (chain[i] == hash).then_some(i)
        };
        // Read whole before anything is taken.
        let (n, hash) = (d.u()?, d.u()?);
        let list = d.bytes()?;
        let mut manifests = Vec::new();
        for _ in 0..d.count(4)? {
            let (w, b, hash) = (d.u()?, d.n()?, d.u()?);
            let bytes = d.bytes()?;
            manifests.push((w, b, hash, bytes, read_manifest_ref(&mut d)?));
        }
        if !d.0.is_empty() {
            return Err(format!("{} bytes after the end", d.0.len()));
        }
        let mut taken = 0;
        if let Some(i) = same(n, hash) {
            if self.snapshots[i].list.set(Arc::new(list.to_vec())).is_ok() {
                taken += 1;
            }
        }
        for (w, b, hash, bytes, r) in manifests {
            let slot = same(w, hash).and_then(|i| self.snapshots[i].manifests.get(&b));
            if let Some(slot) = slot {
                if slot.set((Arc::new(bytes.to_vec()), r)).is_ok() {
                    taken += 1;
                }
            }
        }
        Ok(taken)
    }
}
