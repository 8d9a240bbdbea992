//! What the readers saw: walks of a view root, whole-file reads (their length, hash and
//! Parquet row count), files held open, timeline reads.

use std::collections::{BTreeMap, BTreeSet};

pub fn fnv1a(bytes: &[u8]) -> String {
    hudifs_testkit::generator::sim::file_hash(bytes)
}

/// Rows in a Parquet file's footer.
fn parquet_rows(bytes: &[u8]) -> Result<u64, String> {
    let n = bytes.len();
    if n < 12 || &bytes[..4] != b"PAR1" || &bytes[n - 4..] != b"PAR1" {
        return Err(format!("not a complete Parquet file ({n} bytes)"));
    }
    let len = u32::from_le_bytes([bytes[n - 8], bytes[n - 7], bytes[n - 6], bytes[n - 5]]) as usize;
    if len + 12 > n {
        return Err(format!("footer length {len} exceeds the file"));
    }
    parquet::file::metadata::ParquetMetaDataReader::decode_metadata(&bytes[n - 8 - len..n - 8])
        .map(|m| m.file_metadata().num_rows() as u64)
        .map_err(|e| e.to_string())
}

#[derive(Debug, Clone)]
pub enum DirList {
    Names(Vec<String>),
    Err(i32),
}

/// One walk of a view root: its top-level entries and each subdirectory's files.
#[derive(Debug, Clone)]
pub struct Walk {
    pub start: i64,
    pub end: i64,
    pub x1: Option<String>,
    pub x2: Option<String>,
    /// `Err` when the view root itself could not be read.
    pub top: Result<Vec<String>, i32>,
    /// Partition path → its listing.
    pub dirs: BTreeMap<String, DirList>,
}

impl Walk {
    pub fn files(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (p, l) in &self.dirs {
            if let DirList::Names(n) = l {
                out.extend(n.iter().map(|f| format!("{p}/{f}")));
            }
        }
        out
    }
}

/// What a read of a whole file gave (the bytes themselves are not kept).
#[derive(Debug, Clone, PartialEq)]
pub struct Content {
    pub len: u64,
    pub hash: String,
    /// The Parquet footer's row count, for base files.
    pub rows: Option<Result<u64, String>>,
}

impl Content {
    pub fn of(path: &str, bytes: &[u8]) -> Content {
        let is_base = !path.rsplit('/').next().unwrap_or_default().starts_with('.');
        Content {
            len: bytes.len() as u64,
            hash: fnv1a(bytes),
            rows: is_base.then(|| parquet_rows(bytes)),
        }
    }
}

#[derive(Debug, Clone)]
pub enum Seen {
    Latest(Walk),
    AsOf {
        t: String,
        walk: Walk,
    },
    AsOfDir {
        end: i64,
        names: Vec<String>,
    },
    Read {
        /// `None` for latest/, else the as_of time.
        as_of: Option<String>,
        path: String,
        listed_start: i64,
        open_start: i64,
        end: i64,
        result: Result<Content, (bool, i32)>,
        xattr_instant: Option<String>,
    },
    Held {
        path: String,
        opened: i64,
        read_at: i64,
        deleted: bool,
        result: Result<Content, i32>,
    },
    Timeline {
        name: String,
        result: Result<usize, i32>,
    },
}
