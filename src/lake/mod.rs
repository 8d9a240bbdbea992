//! A lake: a directory (or prefix) that is not itself a table but holds many
//! (SEMANTICS.md §7.1.1). This module finds the tables through the storage seam; `tree` is the
//! directories a lake mount shows above them, `inode` gives each table its own inode numbers,
//! and `lake_fs` mounts the whole lake as one file system ([`LakeFs`]), routing each request to
//! one table's `HudiFs`.
//!
//! A table is any directory with `.hoodie/hoodie.properties` (or its `.backup`, written during
//! upgrades). Discovery walks at most `depth` levels below the root, never descends into a table
//! (its partitions are not tables) nor into hidden directories (`.x`, which also skips every
//! `.hoodie`) or Spark's `_temporary`-style ones (`_x`). It costs one listing per directory it
//! visits and one stat per candidate; no table is read.

mod inode;
mod lake_fs;
mod tree;

pub use lake_fs::{LakeFs, LakeOptions};
pub use tree::{Child, Tree, TreeChange};

use std::io;

use hudifs_core::table::{PROPERTIES, PROPERTIES_BACKUP};
use hudifs_storage::{Kind, Storage, TablePath};

/// How deep discovery looks below a lake root by default (`db/schema/table` and one more level).
pub const DEFAULT_DEPTH: usize = 4;

/// Whether `dir` is a table root: it holds `.hoodie/hoodie.properties` (or its backup).
pub fn is_table(store: &dyn Storage, dir: &TablePath) -> bool {
    [PROPERTIES, PROPERTIES_BACKUP].iter().any(|name| {
        dir.join(&format!(".hoodie/{name}"))
            .ok()
            .and_then(|p| store.stat(&p).ok())
            .is_some_and(|m| m.is_file())
    })
}

/// The tables at most `depth` levels below `root` (`root` itself counts as level 0), sorted. A
/// directory that cannot be listed is skipped with a log line (the rest of the lake still counts);
/// only a root that cannot be listed is an error.
pub fn discover(store: &dyn Storage, root: &TablePath, depth: usize) -> io::Result<Vec<TablePath>> {
    if is_table(store, root) {
        return Ok(vec![root.clone()]);
    }
    let mut found = Vec::new();
    let mut level = vec![root.clone()];
    for d in 0..depth {
        let mut next = Vec::new();
        for dir in &level {
            let names = match store.list_names(dir) {
                Ok(n) => n,
                Err(e) if d == 0 => return Err(e),
                Err(e) => {
                    log::warn!("lake: cannot list {}: {e}", store.describe(dir));
                    continue;
                }
            };
            for (name, kind) in names {
                if kind != Kind::Dir || name.starts_with('.') || name.starts_with('_') {
                    continue;
                }
                let Ok(child) = dir.child(&name) else {
                    continue;
                };
                if is_table(store, &child) {
                    found.push(child);
                } else {
                    next.push(child);
                }
            }
        }
        level = next;
    }
    found.sort();
    Ok(found)
}

/// For `hudifs ls` and `hudifs timeline`, which read one table: what to say when `dir` is not a
/// table but a lake (`None` when it holds no table either). Names at most 10 of the tables.
pub fn lake_hint(dir: &std::path::Path) -> Option<String> {
    let store = hudifs_storage::LocalStore::new(dir).ok()?;
    let found = discover(&store, &TablePath::root(), DEFAULT_DEPTH).ok()?;
    if found.is_empty() {
        return None;
    }
    let shown: Vec<String> = found
        .iter()
        .take(10)
        .map(|t| dir.join(t.as_str()).display().to_string())
        .collect();
    let more = match found.len() {
        n if n > 10 => format!(", and {} more", n - 10),
        _ => String::new(),
    };
    Some(format!(
        "{} is not a Hudi table but holds {} (a lake): give one table, e.g. {}{more}",
        dir.display(),
        match found.len() {
            1 => "1 table".to_string(),
            n => format!("{n} tables"),
        },
        shown.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hudifs_storage::{MemStore, StorageWrite};

    fn table(store: &MemStore, at: &str) {
        let p = TablePath::new(&format!("{at}/.hoodie/{PROPERTIES}")).unwrap();
        store.put(&p, b"hoodie.table.name=t\n").unwrap();
    }

    fn names(found: &[TablePath]) -> Vec<&str> {
        found.iter().map(|p| p.as_str()).collect()
    }

    #[test]
    fn finds_tables_at_every_depth_up_to_the_bound() {
        let s = MemStore::new("lake");
        table(&s, "a");
        table(&s, "db/b");
        table(&s, "db/schema/c");
        table(&s, "x/y/z/d");
        table(&s, "x/y/z/w/too_deep");
        // Inside a table, hidden and underscore directories: never looked into.
        table(&s, "a/city=x/nested");
        table(&s, ".trash/e");
        table(&s, "_temporary/f");
        s.put(&TablePath::new("db/readme.txt").unwrap(), b"not a dir")
            .unwrap();
        let root = TablePath::root();
        assert_eq!(
            names(&discover(&s, &root, DEFAULT_DEPTH).unwrap()),
            ["a", "db/b", "db/schema/c", "x/y/z/d"]
        );
        assert_eq!(names(&discover(&s, &root, 2).unwrap()), ["a", "db/b"]);
        assert!(discover(&s, &root, 0).unwrap().is_empty());
        // A table as the root is the one table.
        let a = TablePath::new("a").unwrap();
        assert_eq!(names(&discover(&s, &a, 4).unwrap()), ["a"]);
    }

    #[test]
    fn a_backup_counts_and_a_bare_hoodie_does_not() {
        let s = MemStore::new("lake");
        s.put(
            &TablePath::new(&format!("up/.hoodie/{PROPERTIES_BACKUP}")).unwrap(),
            b"x",
        )
        .unwrap();
        s.create_dir_all(&TablePath::new("bare/.hoodie").unwrap())
            .unwrap();
        assert_eq!(names(&discover(&s, &TablePath::root(), 4).unwrap()), ["up"]);
    }

    #[test]
    fn ls_on_a_lake_names_its_tables() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(lake_hint(tmp.path()), None);
        for t in ["db/one", "two"] {
            std::fs::create_dir_all(tmp.path().join(t).join(".hoodie")).unwrap();
            std::fs::write(tmp.path().join(t).join(".hoodie").join(PROPERTIES), "x").unwrap();
        }
        let hint = lake_hint(tmp.path()).unwrap();
        assert!(
            hint.contains("is not a Hudi table but holds 2 tables"),
            "{hint}"
        );
        assert!(
            hint.contains(&tmp.path().join("db/one").display().to_string()),
            "{hint}"
        );
        assert!(
            hint.contains(&tmp.path().join("two").display().to_string()),
            "{hint}"
        );
    }

    #[test]
    fn a_missing_root_is_an_error() {
        let s = MemStore::new("lake");
        assert!(discover(&s, &TablePath::new("nope").unwrap(), 4).is_err());
    }
}
