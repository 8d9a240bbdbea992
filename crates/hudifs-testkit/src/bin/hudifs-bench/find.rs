//! Figure 2: find.

use std::path::Path;

use crate::record::{append, sides, Record, Side};
use crate::sys::{find_files, find_with, hudifs_bin, Mount};
use crate::{Common, Res};

pub fn bench_find(table: &Path, c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let canon = table
        .canonicalize()
        .map_err(|e| format!("{}: {e}", table.display()))?;
    find_files(&canon)?;
    let (mut cold_a, mut cold_b, mut warm_a, mut warm_b) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut stat_a, mut stat_b) = (Vec::new(), Vec::new());
    let (mut n_view, mut n_table) = (0, 0);
    // Cold: a fresh mount per repetition, its first find; the table side is the plain find
    // right after (the table's own metadata is warm in both cases). Then the same for a find
    // that stats every file (as `ls -l`, `rsync` and `du` do).
    let sizes = ["-printf", "%s\n"];
    for _ in 0..c.reps {
        let mnt = Mount::new(&hudifs, &canon, &c.mnt, &[])?;
        let (s, n) = find_files(&mnt.latest())?;
        cold_a.push(s);
        n_view = n;
        drop(mnt);
        let (s, n) = find_files(&canon)?;
        cold_b.push(s);
        n_table = n;
        let mnt = Mount::new(&hudifs, &canon, &c.mnt, &[])?;
        stat_a.push(find_with(&mnt.latest(), &sizes)?.0);
        drop(mnt);
        stat_b.push(find_with(&canon, &sizes)?.0);
    }
    let mnt = Mount::new(&hudifs, &canon, &c.mnt, &[])?;
    find_files(&mnt.latest())?;
    for rep in 0..c.reps {
        let order = sides(rep);
        for view in order {
            if view {
                let (s, n) = find_files(&mnt.latest())?;
                warm_a.push(s);
                n_view = n;
            } else {
                let (s, n) = find_files(&canon)?;
                warm_b.push(s);
                n_table = n;
            }
        }
    }
    drop(mnt);
    let notes = vec![format!(
        "find latest/ lists {n_view} files; find TABLE lists {n_table} (data files plus .hoodie/ and partition metafiles)"
    )];
    let r = Record::new(
        2,
        "find-warm",
        "find latest/ -type f (warm) vs find TABLE -type f",
        Side::new("view", "s", warm_a),
        Side::new("table", "s", warm_b),
        "view time / table time",
        Some(("<=", 1.5)),
        notes.clone(),
    );
    append(&c.out, &r)?;
    let mut notes = notes;
    notes.push(
        "cold = the first find after a fresh mount (one mount per repetition; the kernel caches of \
         the table directory itself stay warm), against a plain find of the table"
            .to_string(),
    );
    let r = Record::new(
        2,
        "find-cold",
        "find latest/ -type f (first after mount) vs find TABLE -type f",
        Side::new("view", "s", cold_a),
        Side::new("table", "s", cold_b),
        "view time / table time",
        Some(("<=", 3.0)),
        notes.clone(),
    );
    append(&c.out, &r)?;
    let r = Record::new(
        2,
        "find-stat-cold",
        "find latest/ -type f -printf %s (first after mount) vs the same on TABLE",
        Side::new("view", "s", stat_a),
        Side::new("table", "s", stat_b),
        "view time / table time",
        None,
        notes,
    );
    append(&c.out, &r)
}
