//! [`InstantMetadata`]: the one place instant files are read and decoded. It reads through the
//! storage and keeps what it decoded in the instant's memo cells, so an instant's metadata is
//! decoded once for every timeline that shares the instant, and only when a view needs it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use hudifs_storage::{Storage, TablePath};
use serde_json::Value;

use super::{Decoded, Instant, State};
use crate::metadata::{decode, CommitMetadata, DecodeError, MetadataError};

/// Reads and decodes the files of instants of one table's active timeline.
#[derive(Clone)]
pub struct InstantMetadata {
    store: Arc<dyn Storage>,
    timeline_dir: TablePath,
    /// Reads of instant files an object store failed (not a missing file): see
    /// [`InstantMetadata::store_faults`].
    faults: Arc<AtomicU64>,
}

impl std::fmt::Debug for InstantMetadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InstantMetadata({:?})", self.timeline_dir)
    }
}

impl InstantMetadata {
    pub fn new(store: Arc<dyn Storage>, timeline_dir: TablePath) -> InstantMetadata {
        InstantMetadata {
            store,
            timeline_dir,
            faults: Arc::default(),
        }
    }

    /// How many reads of instant files the object store failed so far (5xx, resets, timeouts
    /// after the client's retries; never a missing file, and never on a local disk, where an
    /// unreadable file is the file's state). A snapshot derived while this moved is not kept:
    /// the change is applied again at the next poll.
    pub fn store_faults(&self) -> u64 {
        self.faults.load(Ordering::Relaxed)
    }

    /// The location of an instant file.
    pub fn path(&self, name: &str) -> TablePath {
        self.timeline_dir.child(name).unwrap_or_default()
    }

    /// How the storage names an instant file.
    pub fn describe(&self, name: &str) -> String {
        self.store.describe(&self.path(name))
    }

    /// The decoded JSON of an instant file, by name.
    pub fn decode_file(&self, name: &str) -> Result<Value, MetadataError> {
        let error = |error| MetadataError {
            file: self.describe(name),
            error,
        };
        let bytes = self.store.read(&self.path(name)).map_err(|e| {
            if self.store.is_object_store() && e.kind() != std::io::ErrorKind::NotFound {
                self.faults.fetch_add(1, Ordering::Relaxed);
            }
            error(DecodeError::Unreadable(e.to_string()))
        })?;
        decode(&bytes).map_err(error)
    }

    fn decode_state(&self, inst: &Instant, state: State) -> Decoded<Value> {
        let Some(f) = inst.file(state) else {
            return Err(MetadataError {
                file: format!("instant {}", inst.requested),
                error: DecodeError::Missing(state.name()),
            });
        };
        self.decode_file(&f.name).map(Arc::new)
    }

    /// The decoded JSON of the completed file (or of the most advanced file if pending).
    pub fn json(&self, inst: &Instant) -> Decoded<Value> {
        memo(&inst.memo.json, || {
            let state = inst
                .last_file()
                .map(|f| f.state)
                .unwrap_or(State::Requested);
            self.decode_state(inst, state)
        })
    }

    /// The decoded plan in the requested file (compaction, clustering and cleaner plans).
    pub fn plan(&self, inst: &Instant) -> Decoded<Value> {
        memo(&inst.memo.plan, || {
            self.decode_state(inst, State::Requested)
        })
    }

    /// Commit metadata of a completed write instant (or the workload profile of an inflight
    /// one).
    pub fn commit(&self, inst: &Instant) -> Decoded<CommitMetadata> {
        memo(&inst.memo.commit, || {
            // The JSON is kept only where something else decoded it already: a commit's facts
            // are all its readers need, and a thousand commits' JSON trees held the memory of
            // a mount of a big table (and cost more in fresh pages than in decoding).
            let v = match inst.memo.json.get() {
                Some(v) => v.clone()?,
                None => {
                    let state = inst
                        .last_file()
                        .map(|f| f.state)
                        .unwrap_or(State::Requested);
                    self.decode_state(inst, state)?
                }
            };
            let m = CommitMetadata::from_json(&v).map_err(|error| MetadataError {
                file: self.describe(inst.last_file().map(|f| f.name.as_str()).unwrap_or("")),
                error,
            })?;
            Ok(Arc::new(m))
        })
    }
}

/// What `cell` holds, else what `decode` gives, kept unless the file could not be read (a
/// store's fault is not the file's content: the next use reads it again).
fn memo<T>(cell: &OnceLock<Decoded<T>>, decode: impl FnOnce() -> Decoded<T>) -> Decoded<T> {
    if let Some(v) = cell.get() {
        return v.clone();
    }
    let v = decode();
    if let Err(MetadataError {
        error: DecodeError::Unreadable(_),
        ..
    }) = &v
    {
        return v;
    }
    cell.get_or_init(|| v).clone()
}
