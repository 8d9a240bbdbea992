//! `delta/_change_data/` (docs/SEMANTICS.md §11.4): the change data directory of each data
//! write's version, and its change data files, worked out when first needed (each costs the
//! write's change feed).

use std::sync::Arc;

use hudifs_core::error::{Error, Result};
use hudifs_core::instant_time::InstantTime;
use hudifs_core::viewkey::{ViewKey, ViewName};

use crate::delta::{self, DeltaFile, Version};
use crate::fs::inode::Node;
use crate::fs::{join, DirEntry, HudiFs, TTL_FRESH};

use super::{has_changes, CHANGES_DIR};

/// Change data files of one version written side by side (each merges its group's states
/// before and after the write first): at most this many, and no more than the cores.
const CHANGE_WRITERS: usize = 4;

/// The file a version's single `cdc` action names when its write's change feed is refused as a
/// whole: under `_change_data/<instant>/`, whose lookup fails with the refusal's errno.
const UNAVAILABLE: &str = "unavailable.parquet";

/// Whether version `v`'s change data files, worked out, are its write's change feed rather
/// than [`UNAVAILABLE`] (the feed refused as a whole).
fn changes_given(v: &Version) -> bool {
    v.changes
        .get()
        .is_some_and(|c| !c.iter().any(|f| f.path.ends_with(UNAVAILABLE)))
}

impl HudiFs {
    /// The node of a name in `delta/_change_data/`: the change data directory of a version
    /// with change data (named by its instant).
    pub(in crate::fs) fn delta_changes_child(&self, name: &str) -> Result<Node> {
        let built = self.delta_log()?;
        let v = built
            .log
            .versions
            .iter()
            .find(|v| v.instant == name && has_changes(v))
            .ok_or_else(|| Error::NotFound(format!("delta/{CHANGES_DIR}/{name}")))?;
        self.change_data_root(&v.instant)
    }

    /// The entries of `delta/_change_data/`: a directory per version with change data (worked
    /// out now where they are not yet), not those whose write's change feed is refused as a
    /// whole (found by name, and refusing, but a walk of `delta/` does not stumble on them).
    pub(in crate::fs) fn delta_changes_entries(&self) -> Result<Vec<DirEntry>> {
        let built = self.delta_log()?;
        let mut out = Vec::new();
        for v in built.log.versions.iter().filter(|v| has_changes(v)) {
            self.ensure_changes(v)?;
            if !changes_given(v) {
                continue;
            }
            let node = self.change_data_root(&v.instant)?;
            out.push(DirEntry {
                name: Arc::from(v.instant.as_str()),
                entry: self.dir_entry(node.ino(), TTL_FRESH),
            });
        }
        Ok(out)
    }

    /// The root of the change data of write `instant` (`delta/_change_data/<instant>/`).
    fn change_data_root(&self, instant: &str) -> Result<Node> {
        let t = InstantTime::parse(instant)
            .ok_or_else(|| Error::Invalid(format!("instant {instant}")))?;
        self.view_root_of(ViewName {
            key: ViewKey::AsOf(t),
            merged: true,
            cdc: true,
            delta: true,
            iceberg: false,
        })
    }

    /// The schema the change data of write `t` is written in: its version's.
    pub(in crate::fs) fn change_data_schema(
        &self,
        t: &InstantTime,
    ) -> Result<Arc<arrow_schema::Schema>> {
        let built = self.delta_log()?;
        built
            .log
            .versions
            .iter()
            .find(|v| v.instant == t.as_str())
            .and_then(|v| v.arrow.clone())
            .ok_or_else(|| Error::NotFound(format!("delta/{CHANGES_DIR}/{t}: no such version")))
    }

    /// Work out version `v`'s change data files if it has any and they are not yet (a data
    /// write's; a compaction or clustering changes no record): one per file of the write's
    /// change feed (`cdc/<window of the write>/`), each written now for its size. A feed file
    /// refused (what the same inputs always give: EOPNOTSUPP, EFBIG) is named with size 0
    /// (reading it fails with its errno); a feed refused as a whole gives one file,
    /// [`UNAVAILABLE`], whose directory fails with the refusal's errno. Any other failure (the
    /// storage) is the caller's, and nothing is kept: the next read tries again.
    pub(super) fn ensure_changes(&self, v: &Version) -> Result<()> {
        if !v.wants_changes || v.changes.get().is_some() {
            return Ok(());
        }
        let Some(schema) = v.arrow.clone() else {
            return Ok(());
        };
        let root = self.change_data_root(&v.instant)?;
        let dir = join(CHANGES_DIR, &v.instant);
        let file = |rel: &str, size: u64| {
            Arc::new(DeltaFile {
                path: delta::log::encode_path(&join(&dir, rel)),
                size,
                modified_ms: v.timestamp_ms,
                stats: None,
                data_change: false,
            })
        };
        let Node::ViewDir { view, .. } = root else {
            return Err(Error::Invalid(format!("delta/{dir}: not a view")));
        };
        let mut walked = Vec::new();
        let listed = self
            .view(view)
            .and_then(|_| self.delta_walk(root, "", true, &mut walked));
        if let Err(e) = listed {
            if !matches!(e, Error::Refused(_) | Error::NotFound(_)) {
                return Err(e);
            }
            log::warn!(
                "delta/: version {} (instant {}): change data refused: {e}",
                v.number,
                v.instant
            );
            let _ = v.changes.set(vec![file(UNAVAILABLE, 0)]);
            return Ok(());
        }
        walked.sort();
        let threads = CHANGE_WRITERS.min(hudifs_core::side_by_side::cores());
        let sizes = hudifs_core::side_by_side::map(&walked, threads, |(rel, ino)| {
            let size = match Node::from_ino(*ino) {
                Some(Node::MergedFile { view, slice }) => self
                    .merged_slice(view, slice)
                    .and_then(|ms| self.change_data(&ms, &schema))
                    .map(|(_, size)| size),
                _ => Err(Error::Invalid(format!(
                    "delta/{dir}/{rel}: not a change feed"
                ))),
            };
            match size {
                Err(e @ (Error::Unsupported(_) | Error::TooBig(_))) => {
                    log::warn!("delta/{dir}/{rel}: {e}");
                    Ok(0)
                }
                other => other,
            }
        });
        let files = walked
            .iter()
            .zip(sizes)
            .map(|((rel, _), size)| Ok(file(rel, size?)))
            .collect::<Result<Vec<_>>>()?;
        let _ = v.changes.set(files);
        Ok(())
    }
}
