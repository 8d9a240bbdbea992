//! Tables with a long history: cleaned and archived, as the Delta view's log must start at a
//! checkpoint for them (docs/SEMANTICS.md §11).

use std::path::Path;

use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;

use hudifs_core::error::Result;

use super::{rows, rows_with_ids, TableSpec, TableWriter};

/// A copy-on-write table (version 6, unpartitioned) whose one file group is written by each of
/// 12 commits (20 rows, then one of them updated per commit), cleaned to retain the sixth commit (the
/// files only older snapshots held are deleted) and with the first three commits archived.
/// Returns the commits' instants, oldest first.
pub fn build_cleaned_and_archived(root: &Path) -> Result<Vec<String>> {
    let spec = TableSpec::new("d", TableType::CopyOnWrite, 6);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000)?;
    let mut t = w.begin(Action::Commit)?;
    let g = t.insert("", &rows(1, 20))?;
    let mut commits = vec![t.complete()?];
    let mut files = vec![w.group_files("", &g)];
    for i in 1..12u64 {
        let mut t = w.begin(Action::Commit)?;
        t.update("", &g, &rows_with_ids(i + 10, &[1000 + i as i64]))?;
        commits.push(t.complete()?);
        files.push(w.group_files("", &g));
    }
    // The files only the first five commits' snapshots hold.
    let mut gone: Vec<(String, String)> = Vec::new();
    for f in files[..5].iter().flatten() {
        if !files[5].contains(f) {
            gone.push((String::new(), f.clone()));
        }
    }
    gone.dedup();
    w.clean(&commits[5], &gone)?;
    w.archive(&commits[2])?;
    Ok(commits)
}
