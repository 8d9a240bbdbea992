//! The merge of one file slice: its base file (if any) and the blocks of its log files that
//! count, into one Parquet file of the rows a Hudi snapshot query returns for the slice.
//!
//! Java Hudi's file-group reader (`HoodieFileGroupReader` with its key-based record buffer and
//! `BufferedRecordMergerFactory`) is the reference:
//!
//! 1. The log records are read block by block, in merge order (`logread`), into a map from
//!    record key to the merged log record ("delta merge"): commit-time ordering keeps the later
//!    record; event-time ordering keeps the greater ordering value, ties to the later record,
//!    and a delete carrying the default ordering value (none, or the integer 0) wins
//!    unconditionally; a delete with an ordering value loses to a record with a greater one of
//!    the same class. Partial-update blocks (`IS_PARTIAL`) set only their columns; the others
//!    keep the older record's values. `_hoodie_is_deleted = true` makes a record a delete.
//! 2. The base file is read batch by batch; a row whose key has a log record is merged with it
//!    ("final merge", same rules, the base row being the older record) and the log record is
//!    used up: a second base row with the same key (duplicate keys) stays as it is.
//! 3. Log records no base row used (inserts into logs, log-only slices) follow the base rows
//!    in the order their keys first appeared in the logs; deletes of keys only in logs drop
//!    them.
//!
//! Output rows are assembled column by column with Arrow's `interleave` kernel from the base
//! batch and the decoded log batches: no per-row conversion beyond the key lookup.
//!
//! - `plan`: the slice, its log files in merge order, and what its cached merge is recognised
//!   by from the log blocks' headers alone;
//! - `merge`: the prepared slice and the merge itself;
//! - `stitch`: the base rows of a metadata-only bootstrap skeleton joined with its source
//!   file's, row by row;
//! - `sinks`: where the rows go (the merged Parquet file, or memory), and the writer
//!   properties of every file hudifs writes.

mod merge;
mod plan;
mod sinks;
mod stitch;

use std::io::Write;

use hudifs_storage::Storage;

use crate::config::MergeConfig;
use crate::error::Result;
use crate::materialise::{BlockVisibility, Materialise, MergeOptions, Quick};

pub use merge::{prepare, MergeStats, Prepared};
pub(crate) use plan::quick_inputs;
pub use plan::{merged_file_name, Plan, Slice};
pub(crate) use sinks::writer_properties;
pub use sinks::WRITER_FLUSH;
pub use stitch::BootstrapSource;

/// The `created_by` of every merged file: fixed, so that bytes do not depend on the build.
pub const CREATED_BY: &str = "hudifs-merge version 1";

/// A slice's merged file, as the cache materialises it.
impl Materialise for Slice {
    type Prepared = Prepared;

    fn format(&self) -> &'static str {
        CREATED_BY
    }

    fn id(&self) -> String {
        Slice::id(self)
    }

    fn describe(&self) -> String {
        format!("slice {}", Slice::id(self))
    }

    fn flight(&self) -> String {
        match &self.keep_commits {
            None => Slice::id(self),
            Some(k) => format!("{}\0{}", Slice::id(self), k.join(",")),
        }
    }

    fn keep_commits(&self) -> Option<Vec<String>> {
        self.keep_commits.clone()
    }

    fn schema_id(&self) -> Option<String> {
        self.schema.as_ref().map(|s| s.claim_id())
    }

    fn served_as_is(&self) -> bool {
        !self.needs_merge()
    }

    fn quick(&self, storage: &dyn Storage, visible: &dyn BlockVisibility) -> Option<Quick> {
        let (identities, blocks, plan) = quick_inputs(storage, self, visible)?;
        Some(match plan {
            Plan::BaseUnchanged => Quick::AsIs,
            Plan::Merge => Quick::Inputs { identities, blocks },
        })
    }

    fn prepare(
        &self,
        storage: &dyn Storage,
        cfg: &MergeConfig,
        visible: &dyn BlockVisibility,
        opts: &MergeOptions,
    ) -> Result<Option<Prepared>> {
        let p = prepare(storage, cfg, self, visible, opts)?;
        Ok((p.plan() == Plan::Merge).then_some(p))
    }
}

/// Prepare and write in one go; `Ok(None)` when the slice needs no merge or no block counts
/// (serve the base file itself).
pub fn merge_slice<W: Write + Send>(
    storage: &dyn Storage,
    cfg: &MergeConfig,
    slice: &Slice,
    visible: &dyn BlockVisibility,
    opts: &MergeOptions,
    out: W,
) -> Result<Option<MergeStats>> {
    if !slice.needs_merge() {
        return Ok(None);
    }
    let p = prepare(storage, cfg, slice, visible, opts)?;
    if p.plan() == Plan::BaseUnchanged {
        return Ok(None);
    }
    p.write_to(out).map(Some)
}
