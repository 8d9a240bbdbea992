//! Provenance as extended attributes (`user.hudi.*`, SEMANTICS.md §2.7): on a view root the
//! instant it shows (or an incremental window's selected instants and effective end), on a
//! file the instant that wrote it, its file group, partition and slice; on a merged file the
//! newest instant it holds and the table files merged into it (SEMANTICS.md §10); on the mount
//! root the daemon's counters (`user.hudifs.metrics`, SEMANTICS.md §7.12).

use hudifs_core::error::Result;
use hudifs_core::instant_time::EARLIEST;
use hudifs_core::viewkey::ViewKey;

use super::inode::Node;
use super::HudiFs;

/// What the name of every extended attribute hudifs gives starts with (`user.hudi.*`,
/// `user.hudifs.*`): a name without it is never there.
pub const XATTR_PREFIX: &str = "user.hudi";

impl HudiFs {
    /// Extended attributes of a node: `(name, value)`.
    pub fn xattrs(&self, ino: u64) -> Result<Vec<(String, String)>> {
        let node = Node::from_ino(ino)
            .ok_or_else(|| hudifs_core::error::Error::NotFound(format!("inode {ino}")))?;
        let mut out = Vec::new();
        match node {
            Node::ViewDir { view, dir: 0 } => {
                let v = self.view(view)?;
                let p = &v.plan;
                match &p.key {
                    ViewKey::Latest | ViewKey::AsOf(_) => {
                        if let Some(i) = &p.instant {
                            out.push(("user.hudi.instant".into(), i.to_string()));
                        }
                        let mode = if v.merged.is_some() {
                            "merged"
                        } else if self.opts.read_optimized {
                            "read_optimized"
                        } else {
                            "snapshot"
                        };
                        out.push(("user.hudi.mode".into(), mode.into()));
                    }
                    ViewKey::Incremental { start, .. } => {
                        let selected: Vec<&str> = p.selected.iter().map(|s| s.as_str()).collect();
                        out.push(("user.hudi.commit_times".into(), selected.join(",")));
                        let end = p
                            .effective_end
                            .as_ref()
                            .map(|e| e.to_string())
                            .unwrap_or_default();
                        out.push(("user.hudi.effective_end".into(), end.clone()));
                        out.push((
                            "user.hudi.window".into(),
                            format!("{}..{end}", start.as_deref().unwrap_or(EARLIEST)),
                        ));
                        // merged/incremental/ shows the rows of the window's writes, merged and
                        // filtered: nothing is left for the reader to do.
                        let content = if v.is_cdc() {
                            "cdc"
                        } else if v.merged.is_some() {
                            "merged"
                        } else {
                            "merge-ready"
                        };
                        out.push(("user.hudi.content".into(), content.into()));
                    }
                }
                // Where the table's listing came from (SEMANTICS.md §1.10).
                out.push((
                    "user.hudi.listing".into(),
                    v.snap.listing_source().to_string(),
                ));
            }
            Node::ViewFile { view, file } => {
                let v = self.view(view)?;
                let (pv, pos) = self.find_in_view(&v, file)?;
                let c = pv.choice.files[pos];
                let f = &pv.listing.files[c.index as usize];
                if let Some(w) = pv.choice.writer(&c) {
                    out.push(("user.hudi.instant".into(), w.to_string()));
                }
                out.push(("user.hudi.file_id".into(), f.file_id().to_string()));
                out.push(("user.hudi.partition".into(), f.partition.to_string()));
                out.push(("user.hudi.slice".into(), pv.choice.slice(&c).to_string()));
                if self.is_skeleton(f) {
                    // Served stitched: the skeleton and its source file (SEMANTICS.md §10.11).
                    let source = self.bootstrap_source(&f.partition, f.file_id())?;
                    let inputs = [f.rel_path(), source.describe()];
                    out.push(("user.hudi.stitched_from".into(), inputs.join("\n")));
                }
            }
            Node::MergedFile { view, slice } => {
                // Asked of a node the kernel holds: the view must still be servable.
                self.view(view)?;
                let ms = self.merged_slice(view, slice)?;
                out.push(("user.hudi.instant".into(), ms.newest.clone()));
                out.push(("user.hudi.file_id".into(), ms.slice.file_id.clone()));
                out.push(("user.hudi.partition".into(), ms.partition.to_string()));
                out.push(("user.hudi.slice".into(), ms.slice.instant.clone()));
                out.push(("user.hudi.merged_from".into(), ms.inputs().join("\n")));
            }
            // The daemon's counters (docs/SEMANTICS.md §7.12), for `hudifs status --json`.
            Node::Root => out.push((
                "user.hudifs.metrics".into(),
                crate::metrics::global().summary_json(),
            )),
            _ => {}
        }
        Ok(out)
    }
}
