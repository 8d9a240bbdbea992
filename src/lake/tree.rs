//! The directories a lake mount shows above its tables: the root, and every directory on the
//! way to a table (SEMANTICS.md §7.1.1). Nothing else of the lake root is shown: a directory that
//! leads to no table, files beside the tables, hidden and `_` directories.

use std::collections::BTreeSet;

use hudifs_storage::TablePath;

/// What a name in one of the lake's directories is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Child {
    /// A table root.
    Table(TablePath),
    /// A directory with tables below it.
    Dir(TablePath),
}

/// The tables of a lake, as paths below its root (no table lies inside another).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tree {
    tables: BTreeSet<TablePath>,
}

impl Tree {
    pub fn new(tables: impl IntoIterator<Item = TablePath>) -> Tree {
        Tree {
            tables: tables.into_iter().collect(),
        }
    }

    pub fn tables(&self) -> impl Iterator<Item = &TablePath> {
        self.tables.iter()
    }

    pub fn len(&self) -> usize {
        self.tables.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    pub fn is_table(&self, p: &TablePath) -> bool {
        self.tables.contains(p)
    }

    /// Whether `p` is one of the lake's directories: the root, or a directory a table lies
    /// below.
    pub fn is_dir(&self, p: &TablePath) -> bool {
        p.is_root() || self.below(p).next().is_some()
    }

    /// The tables strictly below `dir` (a scan: lakes hold thousands of tables, not millions).
    fn below<'a>(&'a self, dir: &'a TablePath) -> impl Iterator<Item = &'a TablePath> + 'a {
        self.tables
            .iter()
            .filter(move |t| *t != dir && t.starts_with(dir))
    }

    /// What `name` in the lake directory `dir` is.
    pub fn child(&self, dir: &TablePath, name: &str) -> Option<Child> {
        let p = dir.child(name).ok()?;
        if self.is_table(&p) {
            Some(Child::Table(p))
        } else if !p.is_root() && self.is_dir(&p) {
            Some(Child::Dir(p))
        } else {
            None
        }
    }

    /// The names in the lake directory `dir`, sorted (`None`: not a lake directory).
    pub fn children(&self, dir: &TablePath) -> Option<Vec<(String, Child)>> {
        if !self.is_dir(dir) {
            return None;
        }
        let depth = dir.components().count();
        let mut names = BTreeSet::new();
        for t in self.below(dir) {
            if let Some(n) = t.components().nth(depth) {
                names.insert(n.to_string());
            }
        }
        Some(
            names
                .into_iter()
                .filter_map(|n| self.child(dir, &n).map(|c| (n, c)))
                .collect(),
        )
    }

    /// What changed from `self` to `next`: tables that left and tables that came, and the lake
    /// directories that left (no table below them any more).
    pub fn diff(&self, next: &Tree) -> TreeChange {
        let gone: Vec<TablePath> = self.tables.difference(&next.tables).cloned().collect();
        let came: Vec<TablePath> = next.tables.difference(&self.tables).cloned().collect();
        let mut dirs_gone = BTreeSet::new();
        for t in &gone {
            let mut p = t.parent();
            while let Some(d) = p {
                if d.is_root() || next.is_dir(&d) {
                    break;
                }
                dirs_gone.insert(d.clone());
                p = d.parent();
            }
        }
        TreeChange {
            gone,
            came,
            dirs_gone: dirs_gone.into_iter().collect(),
        }
    }
}

/// See [`Tree::diff`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeChange {
    pub gone: Vec<TablePath>,
    pub came: Vec<TablePath>,
    pub dirs_gone: Vec<TablePath>,
}

impl TreeChange {
    pub fn is_empty(&self) -> bool {
        self.gone.is_empty() && self.came.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> TablePath {
        TablePath::new(s).unwrap()
    }

    fn tree(paths: &[&str]) -> Tree {
        Tree::new(paths.iter().map(|s| p(s)))
    }

    fn names(t: &Tree, dir: &str) -> Vec<String> {
        t.children(&p(dir))
            .unwrap()
            .into_iter()
            .map(|(n, c)| match c {
                Child::Table(_) => format!("{n}*"),
                Child::Dir(_) => n,
            })
            .collect()
    }

    #[test]
    fn directories_lead_only_to_tables() {
        let t = tree(&["a", "db/b", "db/schema/c", "db2/x/y/d"]);
        assert_eq!(names(&t, ""), ["a*", "db", "db2"]);
        assert_eq!(names(&t, "db"), ["b*", "schema"]);
        assert_eq!(names(&t, "db/schema"), ["c*"]);
        assert_eq!(names(&t, "db2/x"), ["y"]);
        assert!(
            t.children(&p("a")).is_none(),
            "a table is not a lake directory"
        );
        assert!(t.children(&p("nope")).is_none());
        assert!(
            t.children(&p("db/sch")).is_none(),
            "a prefix is not a directory"
        );
        assert_eq!(t.child(&p("db"), "b"), Some(Child::Table(p("db/b"))));
        assert_eq!(t.child(&p(""), "db2"), Some(Child::Dir(p("db2"))));
        assert_eq!(t.child(&p(""), "nope"), None);
        assert_eq!(t.child(&p(""), ".."), None);
        // `db` sorts between `db/b` and `db2`: neither leaks into the other.
        let t = tree(&["db/b", "db-x/c", "db2/d"]);
        assert_eq!(names(&t, "db"), ["b*"]);
    }

    #[test]
    fn a_diff_names_tables_and_directories_that_left() {
        let before = tree(&["a", "db/b", "db/schema/c", "x/y/z"]);
        let after = tree(&["a", "db/b", "new/t"]);
        let d = before.diff(&after);
        assert_eq!(d.gone, [p("db/schema/c"), p("x/y/z")]);
        assert_eq!(d.came, [p("new/t")]);
        assert_eq!(d.dirs_gone, [p("db/schema"), p("x"), p("x/y")]);
        assert!(before.diff(&before).is_empty());
    }
}
