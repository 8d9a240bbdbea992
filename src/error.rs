//! Errors of the command line and the daemon: a table error from `hudifs-core`, a mount that
//! failed, or bad usage. [`Error::exit_code`] gives the exit code (SEMANTICS.md §7.6).

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Table(#[from] hudifs_core::error::Error),
    /// Mounting or unmounting failed (mount point missing, not empty, already mounted, ...).
    #[error("{0}")]
    Mount(String),
    /// Bad command-line usage.
    #[error("{0}")]
    Usage(String),
}

impl Error {
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Error {
        Error::Table(hudifs_core::error::Error::io(path, source))
    }

    /// 2 for usage errors, 1 for everything else.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::Table(hudifs_core::error::Error::Usage(_)) => 2,
            _ => 1,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
