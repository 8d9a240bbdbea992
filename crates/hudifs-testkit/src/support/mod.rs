//! What the tests of the hudifs package share (tests/README.md): the fixture tables and their
//! expected answers, checking views against them, files and tables on disk, the programs the
//! tests run, and the Python environment with the servers it provides. Everything is re-exported
//! here, so a test names it `support::x`; what bootstrapped-table tests share is
//! `support::bootstrap`.

mod answers;
pub mod bootstrap;
mod files;
mod programs;
mod python;

pub use crate::mount::{fuse_available, MountGuard};
pub use answers::*;
pub use files::*;
pub use programs::*;
pub use python::*;
