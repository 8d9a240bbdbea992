//! The typed refusals of the merge engine. Each names the slice and the reason; the caller maps
//! the kind to an errno ([`MergeError::errno`]) and never serves a partial file.

use std::fmt;

/// Why a slice cannot be merged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Input hudifs does not merge (HFile blocks of an unsupported codec or encoding,
    /// non-Parquet base files, Kryo delete blocks, Avro data blocks below content version 3,
    /// CDC blocks in a data log, custom merge modes, payloads or delete markers, unknown key
    /// generators): `EOPNOTSUPP`.
    Unsupported,
    /// A committed block that does not decode, an unreadable base file, an input that
    /// vanished or changed mid-merge: `EIO`.
    Corrupt,
    /// The slice's log records exceed the memory cap: `EFBIG`.
    TooBig,
}

/// A slice that could not be merged: what kind of refusal, which slice, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeError {
    pub kind: Refusal,
    /// The slice, as `partition/fileId@baseInstant` (set by the engine once it knows it).
    pub slice: String,
    pub reason: String,
    /// Set when the merge stopped for want of memory it may wait for
    /// ([`crate::memory`]): all the bytes it needed; 0 otherwise.
    pub needed: u64,
}

impl MergeError {
    pub fn unsupported(reason: impl Into<String>) -> MergeError {
        MergeError {
            kind: Refusal::Unsupported,
            slice: String::new(),
            reason: reason.into(),
            needed: 0,
        }
    }
    pub fn corrupt(reason: impl Into<String>) -> MergeError {
        MergeError {
            kind: Refusal::Corrupt,
            slice: String::new(),
            reason: reason.into(),
            needed: 0,
        }
    }
    pub fn too_big(reason: impl Into<String>) -> MergeError {
        MergeError {
            kind: Refusal::TooBig,
            slice: String::new(),
            reason: reason.into(),
            needed: 0,
        }
    }

    /// A merge that must start again holding `needed` bytes at once ([`crate::memory`]).
    pub fn needs(needed: u64) -> MergeError {
        MergeError {
            kind: Refusal::TooBig,
            slice: String::new(),
            reason: format!("waiting for {} MiB of memory", needed >> 20),
            needed,
        }
    }

    /// Name the slice this error is about (kept if already named).
    pub fn in_slice(mut self, slice: &str) -> MergeError {
        if self.slice.is_empty() {
            self.slice = slice.to_string();
        }
        self
    }

    /// Run `f`, the work on the item `id` (a slice, a change feed) names: its errors name the
    /// item, and a panic of a decoder on malformed input is an error (EIO), not the end of the
    /// daemon.
    pub(crate) fn guarded<T>(id: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(r) => r.map_err(|e| e.in_slice(id)),
            Err(_) => {
                Err(MergeError::corrupt("the decoder gave up on malformed input").in_slice(id))
            }
        }
    }

    /// The errno a file system returns for this refusal.
    pub fn errno(&self) -> i32 {
        match self.kind {
            Refusal::Unsupported => libc::EOPNOTSUPP,
            Refusal::Corrupt => libc::EIO,
            Refusal::TooBig => libc::EFBIG,
        }
    }
}

impl fmt::Display for MergeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            Refusal::Unsupported => "not supported",
            Refusal::Corrupt => "unreadable input",
            Refusal::TooBig => "too big",
        };
        if self.slice.is_empty() {
            write!(f, "merge refused ({what}): {}", self.reason)
        } else {
            write!(
                f,
                "merge of slice {} refused ({what}): {}",
                self.slice, self.reason
            )
        }
    }
}

impl std::error::Error for MergeError {}

pub type Result<T, E = MergeError> = std::result::Result<T, E>;
