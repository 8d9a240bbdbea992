//! What a merge of one slice is made of and what it will do: the slice as the view resolved
//! it, its log files in merge order, and what its cached merge is recognised by from the log
//! blocks' headers alone.

use hudifs_storage::{Storage, TablePath};

use crate::materialise::{identity, BlockVisibility, Identity, InputFile};
use crate::schema::SliceSchema;

/// One file slice as the view resolved it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slice {
    /// Partition path (`""` for a non-partitioned table).
    pub partition: String,
    pub file_id: String,
    /// The slice's base instant (`user.hudi.slice`).
    pub instant: String,
    /// The base file; `None` for a log-only slice.
    pub base: Option<InputFile>,
    /// The log files the view shows for the slice (chosen at file level by the visibility
    /// rules), in any order.
    pub logs: Vec<InputFile>,
    /// Incremental views (`merged/incremental/`): keep only the merged records whose
    /// `_hoodie_commit_time` is one of these instants (sorted), the row filter of an incremental
    /// query. `None` keeps every record (a snapshot view).
    pub keep_commits: Option<Vec<String>>,
    /// The view's schema, where the slice's files were written under another
    /// ([`crate::schema::aligned`]); `None` writes the slice in its own.
    pub schema: Option<SliceSchema>,
    /// A metadata-only bootstrap skeleton's source file (the caller finds it in the bootstrap
    /// index): the base rows are the two joined row by row (`stitch`).
    pub source: Option<super::BootstrapSource>,
}

impl Slice {
    /// `partition/fileId@instant`, as messages name the slice.
    pub fn id(&self) -> String {
        if self.partition.is_empty() {
            format!("{}@{}", self.file_id, self.instant)
        } else {
            format!("{}/{}@{}", self.partition, self.file_id, self.instant)
        }
    }

    /// Whether the slice needs merging: a slice without log files is its base file, served
    /// as it is (the caller serves the base file itself), unless its rows are filtered.
    /// A base file that is not Parquet always goes through the engine, which refuses it.
    pub fn needs_merge(&self) -> bool {
        if self.keep_commits.is_some()
            || self.source.is_some()
            || self.schema.as_ref().is_some_and(|s| s.rewrite_base)
        {
            return true;
        }
        let parquet_base = self.base.as_ref().is_some_and(|b| {
            b.path
                .name()
                .rsplit('.')
                .next()
                .is_some_and(|e| e.eq_ignore_ascii_case("parquet"))
        });
        !self.logs.is_empty() || !parquet_base
    }
}

/// The name of the merged file of a slice in `merged/`: the base file's own name for a slice
/// that needs no merge (a Parquet base file without logs: it is that file), else
/// `<fileId>_<slice instant>_<newest instant>.merged.parquet`, where the newest instant is the
/// newest write the slice's files hold (the base instant or the newest log writer the view
/// attributes). A slice of a base file in another format is named like a merged one, so that a
/// `*.parquet` glob meets it and fails (EOPNOTSUPP) instead of silently skipping it.
pub fn merged_file_name(slice: &Slice, newest_instant: &str) -> String {
    match &slice.base {
        Some(b) if !slice.needs_merge() => b.path.name().to_string(),
        _ => format!(
            "{}_{}_{}.merged.parquet",
            slice.file_id, slice.instant, newest_instant
        ),
    }
}

/// What a merge needs to do, known after reading the log files and before reading the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// No block of the logs counts for this view: the merged file is the base file,
    /// unchanged; serve the base file itself.
    BaseUnchanged,
    /// Blocks count: the merged file must be written.
    Merge,
}

impl Plan {
    /// The plan for `slice` when `no_blocks` count: its base file unchanged if it has one and
    /// no row filter applies.
    pub(crate) fn of(slice: &Slice, no_blocks: bool) -> Plan {
        let rewrite = slice.schema.as_ref().is_some_and(|s| s.rewrite_base);
        let stitched = slice.source.is_some();
        if no_blocks
            && slice.base.is_some()
            && slice.keep_commits.is_none()
            && !rewrite
            && !stitched
        {
            Plan::BaseUnchanged
        } else {
            Plan::Merge
        }
    }
}

/// The slice's log files in merge order ([`log_order`]).
pub(crate) fn logs_in_order(slice: &Slice) -> Vec<&InputFile> {
    let mut logs: Vec<&InputFile> = slice.logs.iter().collect();
    logs.sort_by_key(|f| log_order(&f.path));
    logs
}

/// Java's log-file order: instant in the name, version, write token.
fn log_order(path: &TablePath) -> (String, u32, String, String) {
    match hudifs_core::listing::parse_log_name(path.name()) {
        Some(n) => (
            n.instant,
            n.version,
            n.write_token,
            path.as_str().to_string(),
        ),
        None => (String::new(), 0, String::new(), path.as_str().to_string()),
    }
}

/// What a cached merge of `slice` is recognised by, worked out from the log blocks' headers
/// alone: the inputs' identities and the instants of the blocks that count
/// (`Prepared::identities`, `Prepared::block_instants`), and whether the slice reads as its
/// base file unchanged (`Plan::BaseUnchanged`). A cache hit then reads no log record: a fresh
/// mount's first `ls -l` or open of a merged file no longer reads every log whole (on an object
/// store, a GET of each log whole; now a few ranged GETs of its blocks' fronts and backs).
///
/// `None` where that is not sure, and the merge's own reading decides: a log that is not a
/// clean run of blocks, a base file that is not Parquet, an input that cannot be read now.
pub(crate) fn quick_inputs(
    storage: &dyn Storage,
    slice: &Slice,
    visible: &dyn BlockVisibility,
) -> Option<(Vec<Identity>, Vec<String>, Plan)> {
    let mut identities = Vec::new();
    if let Some(b) = &slice.base {
        let ext = b.path.name().rsplit('.').next().unwrap_or("");
        if !ext.eq_ignore_ascii_case("parquet") {
            return None;
        }
        identities.push(identity(storage, b).ok()?);
        if let Some(src) = &slice.source {
            let mut id = identity(&*src.storage, &src.file).ok()?;
            id.path = src.describe();
            identities.push(id);
        }
    }
    let logs = logs_in_order(slice);
    let (mut scans, mut names) = (Vec::new(), Vec::new());
    for f in logs {
        let id = identity(storage, f).ok()?;
        let file = storage.open(&f.path).ok()?;
        if file.size() != id.size {
            return None;
        }
        let len = usize::try_from(id.size).ok()?;
        let blocks = hudifs_core::logblock::scan_block_headers(len, &mut |at, buf| {
            file.read_exact_random(buf, at)
        })
        .ok()??;
        scans.push((blocks, Vec::new()));
        names.push(storage.describe(&f.path));
        identities.push(id);
    }
    let blocks =
        hudifs_core::logblock::choose_scanned(scans, &names, &|i| visible.is_visible(i)).ok()?;
    let mut instants: Vec<String> = blocks.iter().map(|b| b.instant.clone()).collect();
    instants.dedup();
    Some((identities, instants, Plan::of(slice, blocks.is_empty())))
}
