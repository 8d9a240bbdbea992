//! The one error type of hudifs's table logic.
//!
//! Every failure a caller can see is an [`Error`]: it names the table file or the input that is
//! wrong and why. The FUSE adapter turns it into an errno; the CLI prints it.

use std::sync::Arc;

use crate::metadata::MetadataError;

/// `Clone`, so that a refusal or a failure can be kept and given again to every caller that
/// asks (a refused merged slice, a lake's table that failed to open): an I/O error is shared.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The location is not a Hudi table (no `.hoodie/hoodie.properties`).
    #[error("{0} is not a Hudi table: no .hoodie/hoodie.properties (nor hoodie.properties.backup) under it")]
    NotATable(String),

    /// `hoodie.properties` says something hudifs does not understand.
    #[error("{path}: {reason}")]
    BadTableConfig { path: String, reason: String },

    /// A view that does not exist (unknown partition, unknown file, nothing at that name).
    #[error("not found: {0}")]
    NotFound(String),

    /// A time or window spelled in a way hudifs does not accept.
    #[error("{0}")]
    BadTime(#[from] crate::timefmt::TimeError),

    /// A view the timeline cannot answer honestly (cleaned history, unreadable metadata,
    /// incremental reads on a table without meta fields, ...).
    #[error("refused: {0}")]
    Refused(String),

    /// Instant metadata that cannot be decoded.
    #[error("unreadable instant metadata: {0}")]
    BadMetadata(#[from] MetadataError),

    /// Anything the storage underneath reported; `path` names the file as the storage does.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: Arc<std::io::Error>,
    },

    /// The operation does not apply to this node (a directory opened as a file, ...).
    #[error("{0}")]
    Invalid(String),

    /// Something hudifs does not support in this table (a merged view of a slice it cannot
    /// merge: HFile blocks, Lance base files, a custom merge mode, ...).
    #[error("not supported: {0}")]
    Unsupported(String),

    /// An input larger than a configured limit (a merged slice whose log records exceed the
    /// memory cap).
    #[error("too big: {0}")]
    TooBig(String),

    /// Committed data that does not decode, or an input that vanished while it was read (a
    /// merged slice).
    #[error("unreadable: {0}")]
    Corrupt(String),

    /// Bad command-line usage.
    #[error("{0}")]
    Usage(String),
}

impl Error {
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// Whether this error is routine (a lookup of a name that is not there) or was logged
    /// where it arose (a refused merge is logged once per slice), and so is logged at debug
    /// level rather than as a warning.
    pub fn is_routine(&self) -> bool {
        matches!(
            self,
            Error::NotFound(_) | Error::Unsupported(_) | Error::TooBig(_) | Error::Corrupt(_)
        )
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
