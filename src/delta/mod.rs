//! `delta/`: the table as a Delta Lake table, for engines that read Delta but not Hudi
//! (docs/SEMANTICS.md §11). Plain logic, no file system: the versions and their log files
//! (`log`), checkpoints (`checkpoint`), change data files (`changes`), the Delta schema of a Parquet schema (`schema`), a
//! data file's statistics from its footer (`stats`) and the log kept across mounts (`saved`). The file system builds the versions from
//! its own views (`fs/delta.rs`).

pub mod changes;
pub mod checkpoint;
pub mod lean_footer;
pub mod log;
pub mod saved;
pub mod schema;
pub mod stats;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub use log::{DeltaFile, TableFacts, Version};

/// A file of `_delta_log/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogFile {
    /// `<20 digits>.json`: a version's actions.
    Json(u64),
    /// `<20 digits>.checkpoint.parquet`: a version's whole state.
    Checkpoint(u64),
    /// `_last_checkpoint`.
    Last,
}

/// Versions above this have no file id (far beyond any table's count of writes).
const MAX_VERSION: u64 = (1 << 33) - 1;

impl LogFile {
    pub fn name(self) -> String {
        match self {
            LogFile::Json(v) => format!("{v:020}.json"),
            LogFile::Checkpoint(v) => format!("{v:020}.checkpoint.parquet"),
            LogFile::Last => "_last_checkpoint".into(),
        }
    }

    pub fn parse(name: &str) -> Option<LogFile> {
        if name == "_last_checkpoint" {
            return Some(LogFile::Last);
        }
        let (digits, json) = match name.strip_suffix(".json") {
            Some(d) => (d, true),
            None => (name.strip_suffix(".checkpoint.parquet")?, false),
        };
        if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let v: u64 = digits.parse().ok().filter(|v| *v <= MAX_VERSION)?;
        Some(if json {
            LogFile::Json(v)
        } else {
            LogFile::Checkpoint(v)
        })
    }

    /// A number for the file's inode (below 2^35).
    pub fn id(self) -> u64 {
        match self {
            LogFile::Json(v) => v << 2,
            LogFile::Checkpoint(v) => (v << 2) | 1,
            LogFile::Last => 2,
        }
    }

    pub fn from_id(id: u64) -> Option<LogFile> {
        match (id & 3, id >> 2) {
            (0, v) if v <= MAX_VERSION => Some(LogFile::Json(v)),
            (1, v) if v <= MAX_VERSION => Some(LogFile::Checkpoint(v)),
            (2, 0) => Some(LogFile::Last),
            _ => None,
        }
    }
}

/// A checkpoint as written, or why it could not be.
type Written = Result<Arc<Vec<u8>>, String>;

/// The whole log of one snapshot of the table: every version that could be built, rendered,
/// and its checkpoints (written when first read).
pub struct DeltaLog {
    /// The generation of the snapshot it was built from.
    pub generation: u64,
    table: TableFacts,
    pub versions: Vec<Arc<Version>>,
    /// `rendered[i]` is the log file of `versions[i]`, once rendered (on first use: a version
    /// with change data files once they are worked out).
    rendered: Vec<OnceLock<Arc<Vec<u8>>>>,
    /// The versions with a checkpoint: the first built one when the log does not start at 0
    /// (archived or cleaned history), and every [`checkpoint::INTERVAL`]-th.
    checkpoints: Vec<u64>,
    written: Mutex<HashMap<u64, Written>>,
}

impl DeltaLog {
    /// The log of `versions` (in order, numbered from their first's number), rendered on first
    /// use. What `old` (the log of the snapshot before) rendered or wrote of a version it
    /// shares, with the same version before it, is taken over rather than rendered again.
    pub fn new(
        generation: u64,
        table: TableFacts,
        versions: Vec<Arc<Version>>,
        old: Option<&DeltaLog>,
    ) -> DeltaLog {
        // Whether `old` has version `i` of `versions`, and the same one before it.
        let shared = |i: usize| -> Option<usize> {
            let o = old?;
            let (j, v) = o.version(versions[i].number)?;
            let same_prev = match i.checked_sub(1) {
                Some(p) => j
                    .checked_sub(1)
                    .is_some_and(|q| Arc::ptr_eq(&o.versions[q], &versions[p])),
                None => j == 0,
            };
            (Arc::ptr_eq(v, &versions[i]) && same_prev).then_some(j)
        };
        let rendered = (0..versions.len())
            .map(|i| {
                let cell = OnceLock::new();
                if let (Some(j), Some(o)) = (shared(i), old) {
                    if let Some(b) = o.rendered[j].get() {
                        let _ = cell.set(b.clone());
                    }
                }
                cell
            })
            .collect();
        // A checkpoint holds one version's whole state: kept wherever the version is.
        let mut written = HashMap::new();
        if let Some(o) = old {
            let before = hudifs_storage::sync::lock(&o.written);
            for v in &versions {
                let same = o.version(v.number).is_some_and(|(_, w)| Arc::ptr_eq(w, v));
                if let (true, Some(Ok(bytes))) = (same, before.get(&v.number)) {
                    written.insert(v.number, Ok(bytes.clone()));
                }
            }
        }
        let checkpoints = versions
            .iter()
            .enumerate()
            .filter(|(i, v)| v.number > 0 && (*i == 0 || v.number % checkpoint::INTERVAL == 0))
            .map(|(_, v)| v.number)
            .collect();
        DeltaLog {
            generation,
            table,
            versions,
            rendered,
            checkpoints,
            written: Mutex::new(written),
        }
    }

    /// What every version shares.
    pub fn table(&self) -> &TableFacts {
        &self.table
    }

    fn version(&self, number: u64) -> Option<(usize, &Arc<Version>)> {
        let first = self.versions.first()?.number;
        let i = usize::try_from(number.checked_sub(first)?).ok()?;
        Some((i, self.versions.get(i)?))
    }

    /// The built versions' files in `_delta_log/`, in order.
    pub fn files(&self) -> Vec<LogFile> {
        let mut out: Vec<LogFile> = self
            .versions
            .iter()
            .map(|v| LogFile::Json(v.number))
            .collect();
        out.extend(self.checkpoints.iter().map(|v| LogFile::Checkpoint(*v)));
        if !self.checkpoints.is_empty() {
            out.push(LogFile::Last);
        }
        out
    }

    /// The length of log file `f` if it is known without working anything out: a version's
    /// log file once rendered, a checkpoint once written. (A listing of `_delta_log/` renders
    /// nothing: a reader reads the newest checkpoint and the versions after it, not the
    /// thousand before.)
    pub fn known_len(&self, f: LogFile) -> Option<usize> {
        match f {
            LogFile::Json(n) => {
                let (i, _) = self.version(n)?;
                self.rendered[i].get().map(|b| b.len())
            }
            LogFile::Last => Some(self.bytes(f)?.ok()?.len()),
            LogFile::Checkpoint(n) => match hudifs_storage::sync::lock(&self.written).get(&n) {
                Some(Ok(b)) => Some(b.len()),
                _ => None,
            },
        }
    }

    /// The versions with a checkpoint, in order.
    pub fn checkpoint_versions(&self) -> &[u64] {
        &self.checkpoints
    }

    /// Take `bytes` as the checkpoint of version `n` (written for the same version before:
    /// the log kept across mounts, `saved.rs`), where this log has a checkpoint there.
    pub fn adopt_checkpoint(&self, n: u64, bytes: Arc<Vec<u8>>) {
        if self.checkpoints.contains(&n) {
            hudifs_storage::sync::lock(&self.written)
                .entry(n)
                .or_insert(Ok(bytes));
        }
    }

    /// The version a log file belongs to (`_last_checkpoint`: the newest checkpoint's).
    pub fn version_of(&self, f: LogFile) -> Option<&Arc<Version>> {
        match f {
            LogFile::Json(n) => self.version(n).map(|(_, v)| v),
            LogFile::Checkpoint(n) if self.checkpoints.contains(&n) => {
                self.version(n).map(|(_, v)| v)
            }
            LogFile::Checkpoint(_) => None,
            LogFile::Last => self.version(*self.checkpoints.last()?).map(|(_, v)| v),
        }
    }

    /// The bytes of log file `f`, if this log has it (rendered, or a checkpoint written, on
    /// first use; a version with change data files renders once they are worked out).
    pub fn bytes(&self, f: LogFile) -> Option<Result<Arc<Vec<u8>>, String>> {
        match f {
            LogFile::Json(n) => {
                let (i, v) = self.version(n)?;
                if let Some(b) = self.rendered[i].get() {
                    return Some(Ok(b.clone()));
                }
                let prev = i.checked_sub(1).map(|p| &*self.versions[p]);
                Some(
                    log::render(&self.table, prev, v)
                        .map(|b| self.rendered[i].get_or_init(|| Arc::new(b)).clone()),
                )
            }
            LogFile::Checkpoint(n) => {
                let v = self.version_of(f)?.clone();
                let mut written = hudifs_storage::sync::lock(&self.written);
                Some(
                    written
                        .entry(n)
                        .or_insert_with(|| {
                            checkpoint::write(&self.table, &v).map(|(b, _)| Arc::new(b))
                        })
                        .clone(),
                )
            }
            LogFile::Last => {
                let v = self.version_of(f)?;
                Some(Ok(Arc::new(checkpoint::last_checkpoint(
                    v.number,
                    checkpoint::action_count(v),
                    v.files.len(),
                ))))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_file_names_and_ids_round_trip() {
        for f in [
            LogFile::Json(0),
            LogFile::Json(7),
            LogFile::Checkpoint(10),
            LogFile::Last,
        ] {
            assert_eq!(LogFile::parse(&f.name()), Some(f));
            assert_eq!(LogFile::from_id(f.id()), Some(f));
        }
        assert_eq!(LogFile::Json(7).name(), "00000000000000000007.json");
        assert_eq!(
            LogFile::Checkpoint(10).name(),
            "00000000000000000010.checkpoint.parquet"
        );
        for bad in [
            "7.json",
            "0000000000000000000a.json",
            "00000000000000000007.crc",
            "99999999999999999999.json",
        ] {
            assert_eq!(LogFile::parse(bad), None, "{bad}");
        }
    }
}
