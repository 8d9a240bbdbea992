//! The visibility rules (SEMANTICS.md §2–§3), pure: a view is a function of a timeline snapshot
//! (its [`Context`] of derived facts, instant metadata decoded through `InstantMetadata`), the
//! archived facts the I/O layer read for it, a partition's listing and a view key. No storage
//! access, no caching, no FUSE.
//!
//! - `context`: the derived facts of one timeline snapshot;
//! - `archived`: the facts of the archived timeline;
//! - `plan`: deciding a view before any listing ([`plan`], the clean guard);
//! - `incremental`: the instants and groups a window selects;
//! - `resolve`: choosing a partition's files ([`resolve_partition`]);
//! - `model`: the facts `hudifs timeline --json` reports.

mod archived;
mod context;
mod incremental;
mod model;
mod plan;
mod resolve;
mod touched;

pub use archived::ArchivedFacts;
pub use context::{unreadable_metadata, Context};
pub use incremental::{incremental_windows, write_kind};
pub use model::model;
pub use plan::{needs_archive, plan, wants_archive, Archived, Plan, WindowWrite, WriteKind};
pub use resolve::{resolve_groups, resolve_partition, Chosen, InstantInterner, PartitionChoice};
pub use touched::touched_partitions;

use crate::instant_time::InstantTime;
use crate::listing::DataFile;

/// A file a view shows (for `hudifs ls` and tests; the mount keeps [`PartitionChoice`]s).
#[derive(Debug, Clone)]
pub struct VisibleFile {
    pub file: DataFile,
    /// The instant that wrote this file, where the timeline tells.
    pub writer: Option<InstantTime>,
    /// Base instant of the file slice the file belongs to.
    pub slice: String,
}

impl VisibleFile {
    pub fn rel_path(&self) -> String {
        self.file.rel_path()
    }
}

/// A resolved view.
#[derive(Debug, Clone, Default)]
pub struct View {
    /// Sorted by table-relative path.
    pub files: Vec<VisibleFile>,
    /// Snapshot views: the instant the view shows (for `latest/`, the newest completed write).
    pub instant: Option<InstantTime>,
    /// Incremental views: the requested times of the selected instants, ascending.
    pub selected: Vec<InstantTime>,
    /// Incremental views: the end of the window after the BLOCK cut.
    pub effective_end: Option<InstantTime>,
    /// Incremental views: the groups the window's writes wrote records to
    /// ([`Plan::groups_written`]).
    pub groups_written: std::collections::BTreeSet<crate::ids::FileGroupId>,
}

impl View {
    pub fn paths(&self) -> Vec<String> {
        self.files.iter().map(VisibleFile::rel_path).collect()
    }
}
