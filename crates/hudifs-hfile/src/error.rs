use std::io;

/// Why an HFile cannot be read (or written).
#[derive(Debug, thiserror::Error)]
pub enum HFileError {
    /// The byte source failed.
    #[error("reading HFile bytes {offset}..+{len}: {source}")]
    Io {
        offset: u64,
        len: usize,
        #[source]
        source: io::Error,
    },
    /// The bytes are not a well-formed HFile v3 (truncated, corrupt, or not an HFile).
    #[error("malformed HFile: {0}")]
    Malformed(String),
    /// A well-formed HFile using a feature this reader does not implement.
    #[error("unsupported HFile: {0}")]
    Unsupported(String),
    /// A size in the file is over one of the reader's [`crate::Limits`].
    #[error("HFile over a limit: {0}")]
    TooLarge(String),
    /// The writer was given input it cannot write.
    #[error("cannot write HFile: {0}")]
    Write(String),
}

impl HFileError {
    pub(crate) fn malformed(s: impl Into<String>) -> HFileError {
        HFileError::Malformed(s.into())
    }
}

pub type Result<T, E = HFileError> = std::result::Result<T, E>;
