//! Inode numbers of the mounted tree, computed rather than stored.
//!
//! An inode number encodes what it names, so the table costs nothing per file:
//!
//! ```text
//!  63..62  kind   0 special, 1 directory in a view, 2 table file in a view, 3 merged file
//!  61..36  view   interned view (as_of/<T>, incremental/<w>, latest, and the merged/ views)
//!  35..0   item   kind 0: 1 root, 2 as_of/, 3 incremental/, 4 timeline/, 5 merged/,
//!                 6 merged/as_of/, 7 merged/incremental/, 8 cdc/, 9 delta/, 10 delta/_delta_log/,
//!                 11 delta/_change_data/, 12 iceberg/, 13 iceberg/metadata/,
//!                 or (view 1) a timeline file id, (view 2) a Delta log file, (view 3) an
//!                 Iceberg metadata file; kind 1: interned directory
//!                 path; kind 2: file id in the registry of table files; kind 3: slice id in the
//!                 registry of merged slices
//! ```
//!
//! Every spelling of a time resolves to one canonical view key, so `as_of/2024-04-18` and
//! `as_of/20240418000000000` are the same inode; a file keeps its number as long as it stays in a
//! view, across snapshots of `latest/`. Interned keys and paths are never forgotten: the kernel
//! never sees one number mean two things. They grow with the distinct views and directories
//! callers look up, not with the number of files.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use hudifs_core::viewkey::ViewKey;
pub use hudifs_core::viewkey::ViewName;

use crate::journal::{Record, RestartJournal};

pub const ROOT_INO: u64 = 1;
pub const AS_OF_INO: u64 = 2;
pub const INCREMENTAL_INO: u64 = 3;
pub const TIMELINE_INO: u64 = 4;
pub const MERGED_INO: u64 = 5;
pub const MERGED_AS_OF_INO: u64 = 6;
pub const MERGED_INCREMENTAL_INO: u64 = 7;
pub const CDC_INO: u64 = 8;
pub const DELTA_INO: u64 = 9;
pub const DELTA_LOG_INO: u64 = 10;
pub const DELTA_CHANGES_INO: u64 = 11;
pub const ICEBERG_INO: u64 = 12;
pub const ICEBERG_META_INO: u64 = 13;

/// The view id of `latest/` and of `merged/latest/` (interned first).
pub const LATEST_VIEW: u32 = 0;
pub const MERGED_LATEST_VIEW: u32 = 1;

const KIND_SHIFT: u32 = 62;
const VIEW_SHIFT: u32 = 36;
const VIEW_MASK: u64 = (1 << 26) - 1;
const ITEM_MASK: u64 = (1 << 36) - 1;
/// The view field of timeline files (kind 0).
const TIMELINE_FILES: u64 = 1;
/// The view field of `delta/_delta_log/` files (kind 0).
const DELTA_LOG_FILES: u64 = 2;
/// The view field of `iceberg/metadata/` files (kind 0).
const ICEBERG_META_FILES: u64 = 3;

/// What an inode number names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Root,
    AsOfDir,
    IncrementalDir,
    TimelineDir,
    MergedDir,
    MergedAsOfDir,
    MergedIncrementalDir,
    CdcDir,
    DeltaDir,
    DeltaLogDir,
    /// `delta/_change_data/`: a directory per write with change data.
    DeltaChangesDir,
    /// One file of `delta/_delta_log/` (`DeltaLogName`'s number).
    DeltaLogFile {
        file: u64,
    },
    IcebergDir,
    IcebergMetaDir,
    /// One file of `iceberg/metadata/` (`MetaFile`'s number).
    IcebergMetaFile {
        file: u64,
    },
    /// One instant file of `timeline/`, by its interned name.
    TimelineFile {
        name: u32,
    },
    /// A directory inside a view; `dir` 0 is the view root.
    ViewDir {
        view: u32,
        dir: u32,
    },
    /// A table file inside a view, by its id in the file registry.
    ViewFile {
        view: u32,
        file: u64,
    },
    /// A merged file slice of a `merged/` view, by its id in the registry of merged slices.
    MergedFile {
        view: u32,
        slice: u64,
    },
}

impl Node {
    pub fn ino(self) -> u64 {
        let pack = |kind: u64, view: u64, item: u64| {
            (kind << KIND_SHIFT) | ((view & VIEW_MASK) << VIEW_SHIFT) | (item & ITEM_MASK)
        };
        match self {
            Node::Root => ROOT_INO,
            Node::AsOfDir => AS_OF_INO,
            Node::IncrementalDir => INCREMENTAL_INO,
            Node::TimelineDir => TIMELINE_INO,
            Node::MergedDir => MERGED_INO,
            Node::MergedAsOfDir => MERGED_AS_OF_INO,
            Node::MergedIncrementalDir => MERGED_INCREMENTAL_INO,
            Node::CdcDir => CDC_INO,
            Node::DeltaDir => DELTA_INO,
            Node::DeltaLogDir => DELTA_LOG_INO,
            Node::DeltaChangesDir => DELTA_CHANGES_INO,
            Node::DeltaLogFile { file } => pack(0, DELTA_LOG_FILES, file),
            Node::IcebergDir => ICEBERG_INO,
            Node::IcebergMetaDir => ICEBERG_META_INO,
            Node::IcebergMetaFile { file } => pack(0, ICEBERG_META_FILES, file),
            Node::TimelineFile { name } => pack(0, TIMELINE_FILES, name as u64),
            Node::ViewDir { view, dir } => pack(1, view as u64, dir as u64),
            Node::ViewFile { view, file } => pack(2, view as u64, file),
            Node::MergedFile { view, slice } => pack(3, view as u64, slice),
        }
    }

    pub fn from_ino(ino: u64) -> Option<Node> {
        let kind = ino >> KIND_SHIFT;
        let view = (ino >> VIEW_SHIFT) & VIEW_MASK;
        let item = ino & ITEM_MASK;
        Some(match (kind, view, item) {
            (0, 0, 1) => Node::Root,
            (0, 0, 2) => Node::AsOfDir,
            (0, 0, 3) => Node::IncrementalDir,
            (0, 0, 4) => Node::TimelineDir,
            (0, 0, 5) => Node::MergedDir,
            (0, 0, 6) => Node::MergedAsOfDir,
            (0, 0, 7) => Node::MergedIncrementalDir,
            (0, 0, 8) => Node::CdcDir,
            (0, 0, 9) => Node::DeltaDir,
            (0, 0, 10) => Node::DeltaLogDir,
            (0, 0, 11) => Node::DeltaChangesDir,
            (0, DELTA_LOG_FILES, file) => Node::DeltaLogFile { file },
            (0, 0, 12) => Node::IcebergDir,
            (0, 0, 13) => Node::IcebergMetaDir,
            (0, ICEBERG_META_FILES, file) => Node::IcebergMetaFile { file },
            (0, TIMELINE_FILES, n) => Node::TimelineFile {
                name: u32::try_from(n).ok()?,
            },
            (1, v, d) => Node::ViewDir {
                view: v as u32,
                dir: u32::try_from(d).ok()?,
            },
            (2, v, f) => Node::ViewFile {
                view: v as u32,
                file: f,
            },
            (3, v, s) => Node::MergedFile {
                view: v as u32,
                slice: s,
            },
            _ => return None,
        })
    }
}

/// The three fields of an inode number: kind, view and item (the layout above). A lake packs
/// them anew, with its table's number (`lake/inode.rs`).
pub fn ino_fields(ino: u64) -> (u64, u64, u64) {
    (
        ino >> KIND_SHIFT,
        (ino >> VIEW_SHIFT) & VIEW_MASK,
        ino & ITEM_MASK,
    )
}

/// The inode number of three fields ([`ino_fields`]); `None` when they do not fit the layout.
pub fn ino_of_fields(kind: u64, view: u64, item: u64) -> Option<u64> {
    if kind > 3 || view > VIEW_MASK || item > ITEM_MASK {
        return None;
    }
    Some((kind << KIND_SHIFT) | (view << VIEW_SHIFT) | item)
}

/// How an interner records the ids it hands out: the journal, and the record of a value.
type JournalHook<T> = (Arc<RestartJournal>, fn(&T) -> Record);

/// A two-way interner: values get small stable ids.
pub struct Interner<T> {
    inner: Mutex<(HashMap<T, u32>, Vec<T>)>,
    /// The largest id it hands out.
    limit: u32,
    /// Where each new id is recorded before anyone hears of it (`journal/`).
    journal: OnceLock<JournalHook<T>>,
}

impl<T: std::hash::Hash + Eq + Clone> Interner<T> {
    pub fn new(limit: u32) -> Interner<T> {
        Interner {
            inner: Mutex::new((HashMap::new(), Vec::new())),
            limit,
            journal: OnceLock::new(),
        }
    }

    /// Record every id handed out from now on in `journal`.
    pub fn record_in(&self, journal: Arc<RestartJournal>, record: fn(&T) -> Record) {
        let _ = self.journal.set((journal, record));
    }

    /// The id of `value`, assigning the next one if it has none (None when ids ran out).
    pub fn id(&self, value: &T) -> Option<u32> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = g.0.get(value) {
            return Some(id);
        }
        let id = g.1.len() as u32;
        if id > self.limit {
            return None;
        }
        if let Some((journal, record)) = self.journal.get() {
            journal.append(&record(value));
        }
        g.1.push(value.clone());
        g.0.insert(value.clone(), id);
        Some(id)
    }

    /// The id of `value` if it has one (never assigns).
    pub fn find<Q>(&self, value: &Q) -> Option<u32>
    where
        T: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ?Sized,
    {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0.get(value).copied()
    }

    /// How many ids it handed out.
    pub fn count(&self) -> u32 {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.1.len() as u32
    }

    pub fn get(&self, id: u32) -> Option<T> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.1.get(id as usize).cloned()
    }
}

/// The interners behind inode numbers: view keys, directory paths inside views, timeline names.
pub struct InodeTable {
    pub views: Interner<Arc<ViewName>>,
    pub dirs: Interner<Arc<str>>,
    pub timeline_names: Interner<Arc<str>>,
}

impl Default for InodeTable {
    fn default() -> Self {
        Self::new()
    }
}

impl InodeTable {
    pub fn new() -> InodeTable {
        let t = InodeTable {
            views: Interner::new(VIEW_MASK as u32),
            dirs: Interner::new(u32::MAX - 1),
            timeline_names: Interner::new(u32::MAX - 1),
        };
        // Directory 0 is every view's root; view 0 is `latest/`, view 1 `merged/latest/`.
        t.dirs.id(&Arc::from(""));
        t.views.id(&Arc::new(ViewName {
            key: ViewKey::Latest,
            merged: false,
            cdc: false,
            delta: false,
            iceberg: false,
        }));
        t.views.id(&Arc::new(ViewName {
            key: ViewKey::Latest,
            merged: true,
            cdc: false,
            delta: false,
            iceberg: false,
        }));
        t
    }

    /// Take over the ids a previous daemon of this mount handed out (in the order of `records`),
    /// then record every new one in `journal`. A record that does not read back is an error:
    /// every id after it would name something else.
    pub fn resume(&self, records: &[Record], journal: &Arc<RestartJournal>) -> Result<(), String> {
        for r in records {
            let taken = match r {
                Record::View(v) => self.views.id(&Arc::new(v.clone())),
                Record::Dir(d) => self.dirs.id(d),
                Record::TimelineName(n) => self.timeline_names.id(n),
                _ => continue,
            };
            if taken.is_none() {
                return Err(format!(
                    "the ids of the restart journal run out at its record {r:?}"
                ));
            }
        }
        self.views
            .record_in(journal.clone(), |v| Record::View(ViewName::clone(v)));
        self.dirs
            .record_in(journal.clone(), |d| Record::Dir(d.clone()));
        self.timeline_names
            .record_in(journal.clone(), |n| Record::TimelineName(n.clone()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        for node in [
            Node::Root,
            Node::AsOfDir,
            Node::IncrementalDir,
            Node::TimelineDir,
            Node::MergedDir,
            Node::MergedAsOfDir,
            Node::MergedIncrementalDir,
            Node::CdcDir,
            Node::MergedFile { view: 1, slice: 0 },
            Node::MergedFile {
                view: 7,
                slice: (1 << 36) - 1,
            },
            Node::TimelineFile { name: 0 },
            Node::TimelineFile { name: 77 },
            Node::DeltaDir,
            Node::DeltaLogDir,
            Node::DeltaChangesDir,
            Node::DeltaLogFile { file: 0 },
            Node::DeltaLogFile { file: 12_345 },
            Node::IcebergDir,
            Node::IcebergMetaDir,
            Node::IcebergMetaFile { file: 0 },
            Node::IcebergMetaFile { file: 12_345 },
            Node::ViewDir { view: 0, dir: 0 },
            Node::ViewDir {
                view: 5,
                dir: 123_456,
            },
            Node::ViewFile { view: 0, file: 0 },
            Node::ViewFile {
                view: (1 << 26) - 1,
                file: (1 << 36) - 1,
            },
        ] {
            let ino = node.ino();
            assert_ne!(ino, 0);
            assert_eq!(Node::from_ino(ino), Some(node), "{ino:#x}");
        }
        assert_eq!(Node::from_ino(0), None);
        assert_eq!(Node::from_ino(14), None);
        assert_eq!(Node::from_ino(99), None);
        for ino in [1, 77, Node::ViewFile { view: 9, file: 12 }.ino(), u64::MAX] {
            let (k, v, i) = ino_fields(ino);
            assert_eq!(ino_of_fields(k, v, i), Some(ino));
        }
        assert_eq!(ino_of_fields(0, VIEW_MASK + 1, 0), None);
    }

    #[test]
    fn interned_ids_are_stable() {
        let t = InodeTable::new();
        let name = |key: ViewKey, merged: bool| {
            Arc::new(ViewName {
                key,
                merged,
                cdc: false,
                delta: false,
                iceberg: false,
            })
        };
        let as_of = || {
            ViewKey::AsOf(
                hudifs_core::instant_time::InstantTime::parse("20240101000000000").unwrap(),
            )
        };
        let a = t.views.id(&name(as_of(), false)).unwrap();
        let m = t.views.id(&name(as_of(), true)).unwrap();
        assert_eq!(t.views.id(&name(ViewKey::Latest, false)), Some(LATEST_VIEW));
        assert_eq!(
            t.views.id(&name(ViewKey::Latest, true)),
            Some(MERGED_LATEST_VIEW)
        );
        assert_eq!((a, m), (2, 3));
        assert_eq!(t.views.id(&name(as_of(), false)), Some(a));
        assert_eq!(t.dirs.id(&Arc::from("")), Some(0));
        let small = Interner::<u8>::new(1);
        assert_eq!(small.id(&1), Some(0));
        assert_eq!(small.id(&2), Some(1));
        assert_eq!(small.id(&3), None, "ids run out instead of wrapping");
    }
}
