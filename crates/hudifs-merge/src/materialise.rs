//! The materialisation protocol: what the cache ([`crate::MergeCache`]) materialises (a
//! merged slice, a change feed), and the vocabulary every such thing shares.
//!
//! A thing the cache materialises ([`Materialise`]) is named, read from input files of the
//! table ([`InputFile`]) whose identities ([`Identity`]) and counting block instants a cached
//! result is recognised by (the claim), and prepared, then written, within the limits of
//! [`MergeOptions`]. Which block instants count is the caller's [`BlockVisibility`].
//!
//! 1. Quick: from the inputs' identities and their log blocks' headers alone
//!    ([`Materialise::quick`]), without reading a record, where that is sure; a cache hit then
//!    reads nothing more.
//! 2. Prepared: the inputs read and what counts chosen ([`Materialise::prepare`]); the claim of
//!    its [`Ready::identities`] and [`Ready::block_instants`] names the cache entry.
//! 3. Written ([`Ready::write_to`]), once, into the cache.

use std::io::Write;
use std::sync::Arc;

use hudifs_storage::ceiling::MemoryCeiling;
use hudifs_storage::{Storage, TablePath};

use crate::config::MergeConfig;
use crate::error::{MergeError, Result};
use crate::memory::MergeMemory;

/// A thing the cache materialises: a merged slice ([`crate::Slice`]), a change feed
/// ([`crate::CdcGroup`]).
pub trait Materialise {
    /// It with its inputs read and what counts chosen, ready to be written.
    type Prepared: Ready;

    /// The `created_by` of its files, and the format its claims name.
    fn format(&self) -> &'static str;

    /// How messages and its claim name it.
    fn id(&self) -> String;

    /// How the log names it once materialised ("merged …").
    fn describe(&self) -> String;

    /// What tells it from others of its table in flight (one computation at a time each).
    fn flight(&self) -> String;

    /// The row filter its claim records: the instants whose records it keeps, if it keeps
    /// only some.
    fn keep_commits(&self) -> Option<Vec<String>>;

    /// The view schema it is written in, where not its own ([`crate::schema::ViewSchema`]).
    fn schema_id(&self) -> Option<String> {
        None
    }

    /// Whether it is a table file served as it is, with nothing to materialise.
    fn served_as_is(&self) -> bool {
        false
    }

    /// What a cached result of it is recognised by, from the inputs' identities and their log
    /// blocks' headers alone (no record read); `None` where that is not sure, and
    /// [`Materialise::prepare`] decides.
    fn quick(&self, storage: &dyn Storage, visible: &dyn BlockVisibility) -> Option<Quick>;

    /// Read its inputs and choose what counts; `None` when it reads as its base file
    /// unchanged (serve that file itself).
    fn prepare(
        &self,
        storage: &dyn Storage,
        cfg: &MergeConfig,
        visible: &dyn BlockVisibility,
        opts: &MergeOptions,
    ) -> Result<Option<Self::Prepared>>;
}

/// What [`Materialise::quick`] tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Quick {
    /// It reads as its base file unchanged.
    AsIs,
    /// What its claim holds: the inputs' identities and the instants of the blocks that
    /// count ([`Ready::identities`], [`Ready::block_instants`]).
    Inputs {
        identities: Vec<Identity>,
        blocks: Vec<String>,
    },
}

/// A thing prepared: its inputs read, ready to be written.
pub trait Ready {
    /// The inputs as read: what a cached result must match.
    fn identities(&self) -> &[Identity];

    /// The instants of the blocks that count (what its claim records of them).
    fn block_instants(&self) -> &[String];

    /// Write it to `out`; the bytes written. On an error what was written is garbage: the
    /// caller must not serve it (the cache writes to a temporary file and drops it).
    fn write_to<W: Write + Send>(self, out: W) -> Result<u64>;
}

/// One input file, as the view listed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    pub path: TablePath,
    /// The size the listing saw, when known: a file of another size has changed since.
    pub size: Option<u64>,
}

impl InputFile {
    pub fn new(path: TablePath, size: Option<u64>) -> InputFile {
        InputFile { path, size }
    }
}

/// Which block instants the view admits: committed and not after the view's time. Supplied by
/// the caller (the engine knows no timeline).
pub trait BlockVisibility: Sync {
    fn is_visible(&self, instant: &str) -> bool;
}

impl<F: Fn(&str) -> bool + Sync> BlockVisibility for F {
    fn is_visible(&self, instant: &str) -> bool {
        self(instant)
    }
}

/// Limits of one merge.
#[derive(Debug, Clone)]
pub struct MergeOptions {
    /// Bytes the log records of one slice may take in memory (file bytes and decoded
    /// records); more is refused with [`crate::Refusal::TooBig`] (`EFBIG`).
    pub memory_cap: u64,
    /// Rows per batch read from the base file.
    pub batch_rows: usize,
    /// Rows per row group written (a row group is also closed once its encoded bytes reach
    /// [`crate::engine::WRITER_FLUSH`]).
    pub row_group_rows: usize,
    /// The memory ceiling merges count against (`--max-memory`).
    pub ceiling: Arc<MemoryCeiling>,
    /// What this merge holds of it (set per attempt by [`crate::memory::with_memory`]; a
    /// merge without one counts in a fresh one).
    pub memory: Option<MergeMemory>,
}

impl Default for MergeOptions {
    fn default() -> Self {
        MergeOptions {
            memory_cap: 1 << 30,
            batch_rows: 8192,
            row_group_rows: 1 << 20,
            ceiling: hudifs_storage::ceiling::process(),
            memory: None,
        }
    }
}

impl MergeOptions {
    /// These options, counting in `m`.
    pub fn with_memory(&self, m: MergeMemory) -> MergeOptions {
        MergeOptions {
            memory: Some(m),
            ..self.clone()
        }
    }

    /// The memory this merge counts in.
    pub(crate) fn memory(&self) -> Result<MergeMemory> {
        match &self.memory {
            Some(m) => Ok(m.clone()),
            None => MergeMemory::within(&self.ceiling, 0),
        }
    }
}

/// What an input file was when the merge read it: what a cached result is checked against.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    pub path: String,
    pub size: u64,
    /// Modification time in nanoseconds since the epoch, where the storage keeps one.
    pub mtime_ns: Option<i64>,
    /// The storage's version of the file (ETag, object version), where it has one.
    pub version: Option<String>,
}

pub(crate) fn io_error(what: &str, name: &str, e: std::io::Error) -> MergeError {
    if e.kind() == std::io::ErrorKind::NotFound {
        MergeError::corrupt(format!("{name}: vanished while merging ({what}): {e}"))
    } else {
        MergeError::corrupt(format!("{name}: cannot {what}: {e}"))
    }
}

pub(crate) fn identity(storage: &dyn Storage, f: &InputFile) -> Result<Identity> {
    let name = storage.describe(&f.path);
    let meta = storage
        .stat(&f.path)
        .map_err(|e| io_error("stat", &name, e))?;
    if !meta.is_file() {
        return Err(MergeError::corrupt(format!("{name}: not a regular file")));
    }
    if let Some(expected) = f.size {
        if expected != meta.size {
            return Err(MergeError::corrupt(format!(
                "{name}: {} bytes, the view listed {expected}: it changed since",
                meta.size
            )));
        }
    }
    Ok(Identity {
        path: f.path.as_str().to_string(),
        size: meta.size,
        mtime_ns: meta.mtime.and_then(|t| {
            t.duration_since(std::time::UNIX_EPOCH)
                .ok()
                .and_then(|d| i64::try_from(d.as_nanos()).ok())
        }),
        version: meta.version,
    })
}

/// Read input `f` whole (its identity `id` just taken), adding its size to `total`: more than
/// `cap` is refused (EFBIG, naming `what` the files are), a file whose size changed is EIO.
pub(crate) fn read_counted(
    storage: &dyn Storage,
    f: &InputFile,
    name: &str,
    id: &Identity,
    total: &mut u64,
    cap: u64,
    what: &str,
) -> Result<Vec<u8>> {
    *total += id.size;
    if *total > cap {
        return Err(MergeError::too_big(format!(
            "its {what} hold more than the memory cap of {cap} bytes"
        )));
    }
    let data = storage
        .read(&f.path)
        .map_err(|e| io_error("read", name, e))?;
    if data.len() as u64 != id.size {
        return Err(MergeError::corrupt(format!(
            "{name}: changed while being read ({} bytes, then {})",
            id.size,
            data.len()
        )));
    }
    Ok(data)
}
