//! [`TablePath`]: a location inside a table, relative to its root.

use std::fmt;
use std::sync::Arc;

/// A location relative to the table root: `/`-separated components, none empty, `.` or `..`,
/// no NUL byte; `""` is the root itself. Cheap to clone. A `TablePath` can never point outside
/// the table.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct TablePath(Arc<str>);

/// A string that is not a [`TablePath`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidPath(pub String);

impl fmt::Display for InvalidPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a path inside the table (empty, '.' or '..' components, a leading \
             slash or a NUL byte)",
            self.0
        )
    }
}

impl std::error::Error for InvalidPath {}

pub(crate) fn valid_component(c: &str) -> bool {
    !c.is_empty() && c != "." && c != ".." && !c.contains('/') && !c.contains('\0')
}

impl TablePath {
    /// The table root.
    pub fn root() -> TablePath {
        TablePath(Arc::from(""))
    }

    /// Parse a relative path.
    pub fn new(s: &str) -> Result<TablePath, InvalidPath> {
        if s.is_empty() {
            return Ok(TablePath::root());
        }
        if s.split('/').all(valid_component) {
            Ok(TablePath(Arc::from(s)))
        } else {
            Err(InvalidPath(s.to_string()))
        }
    }

    /// The path of `name` (one component) inside this directory.
    pub fn child(&self, name: &str) -> Result<TablePath, InvalidPath> {
        if !valid_component(name) {
            return Err(InvalidPath(name.to_string()));
        }
        Ok(self.join_unchecked(name))
    }

    /// The path of `rel` (one or more components) below this directory.
    pub fn join(&self, rel: &str) -> Result<TablePath, InvalidPath> {
        let rel = TablePath::new(rel)?;
        Ok(self.join_path(&rel))
    }

    /// The path of `rel` below this directory.
    pub fn join_path(&self, rel: &TablePath) -> TablePath {
        if rel.is_root() {
            self.clone()
        } else {
            self.join_unchecked(rel.as_str())
        }
    }

    fn join_unchecked(&self, rel: &str) -> TablePath {
        if self.is_root() {
            TablePath(Arc::from(rel))
        } else {
            TablePath(Arc::from(format!("{}/{rel}", self.0)))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The last component (`""` for the root).
    pub fn name(&self) -> &str {
        self.0.rsplit('/').next().unwrap_or("")
    }

    /// The directory holding this path (`None` for the root).
    pub fn parent(&self) -> Option<TablePath> {
        if self.is_root() {
            return None;
        }
        Some(match self.0.rsplit_once('/') {
            Some((p, _)) => TablePath(Arc::from(p)),
            None => TablePath::root(),
        })
    }

    /// The components, root first.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| !c.is_empty())
    }

    /// Whether this path is `dir` or lies below it.
    pub fn starts_with(&self, dir: &TablePath) -> bool {
        dir.is_root()
            || self.0 == dir.0
            || (self.0.starts_with(&*dir.0) && self.0.as_bytes().get(dir.0.len()) == Some(&b'/'))
    }
}

impl fmt::Debug for TablePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

impl fmt::Display for TablePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.is_root() { "." } else { &self.0 })
    }
}

impl AsRef<str> for TablePath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_inside_the_table() {
        for ok in [
            "",
            "a",
            "a/b",
            ".hoodie/timeline",
            "city=x/.f_1.log.1_0-1-2",
        ] {
            assert_eq!(TablePath::new(ok).unwrap().as_str(), ok);
        }
        for bad in ["/a", "a/", "a//b", "..", "a/../b", ".", "a/./b", "a\0b"] {
            assert!(TablePath::new(bad).is_err(), "{bad:?}");
        }
        let root = TablePath::root();
        assert!(root.child("..").is_err());
        assert!(root.child("a/b").is_err());
        let p = root.child("a").unwrap().join("b/c").unwrap();
        assert_eq!(p.as_str(), "a/b/c");
        assert_eq!(p.name(), "c");
        assert_eq!(p.parent().unwrap().as_str(), "a/b");
        assert_eq!(TablePath::new("a").unwrap().parent(), Some(root.clone()));
        assert_eq!(root.parent(), None);
        assert!(p.starts_with(&TablePath::new("a/b").unwrap()));
        assert!(!TablePath::new("a/bc")
            .unwrap()
            .starts_with(&TablePath::new("a/b").unwrap()));
        assert!(p.starts_with(&root));
        assert_eq!(p.components().collect::<Vec<_>>(), ["a", "b", "c"]);
    }
}
