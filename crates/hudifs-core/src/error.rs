//! The one error type of hudifs.
//!
//! Every failure a caller can see is an [`Error`]: it names the table file or the input that is
//! wrong and why. The FUSE adapter turns it into an errno; the CLI prints it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The directory is not a Hudi table (no `.hoodie/hoodie.properties`).
    #[error("{0} is not a Hudi table: no .hoodie/hoodie.properties (nor hoodie.properties.backup) under it")]
    NotATable(PathBuf),

    /// `hoodie.properties` says something hudifs does not understand.
    #[error("{path}: {reason}")]
    BadTableConfig { path: PathBuf, reason: String },

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
    #[error("{path}: unreadable instant metadata: {reason}")]
    BadMetadata { path: PathBuf, reason: String },

    /// Anything the file system underneath reported.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The table is read-only through hudifs.
    #[error("read-only file system")]
    ReadOnly,

    /// Mounting or unmounting failed (mount point missing, not empty, already mounted, ...).
    #[error("{0}")]
    Mount(String),

    /// Bad command-line usage.
    #[error("{0}")]
    Usage(String),
}

impl Error {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Whether this error is routine (a lookup of a name that is not there) and so is logged at
    /// debug level rather than as a warning.
    pub fn is_routine(&self) -> bool {
        matches!(self, Error::NotFound(_))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
