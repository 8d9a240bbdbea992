//! Stable inode numbers for the nodes of the mount.
//!
//! A node is a name in the tree (`as_of/<T>/<partition>/<file>`, `timeline/<name>`, ...), not a
//! file on disk: the same table file seen through two views is two nodes. Every spelling of a
//! time resolves to one canonical view key, so `as_of/2024-04-18` and
//! `as_of/20240418000000000` are the same inode.
//!
//! Numbers are never forgotten: a node keeps its number for the life of the mount, so the kernel
//! can never see one number mean two things. The table grows with the distinct names callers look
//! up, not with the size of the table.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::fsview::ViewKey;

pub const ROOT_INO: u64 = 1;

/// One node of the mounted tree.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Node {
    Root,
    AsOfDir,
    IncrementalDir,
    TimelineDir,
    /// A directory inside a view; `path` is `""` for the view root.
    ViewDir {
        view: Arc<ViewKey>,
        path: Arc<str>,
    },
    /// A data file inside a view; `path` is table-relative.
    ViewFile {
        view: Arc<ViewKey>,
        path: Arc<str>,
    },
    /// One instant file of the timeline, rendered as JSON.
    TimelineFile {
        name: Arc<str>,
    },
}

#[derive(Default)]
struct Inner {
    by_node: HashMap<Node, u64>,
    nodes: Vec<Node>,
}

/// The two-way map between nodes and inode numbers.
pub struct InodeTable {
    inner: Mutex<Inner>,
}

impl Default for InodeTable {
    fn default() -> Self {
        Self::new()
    }
}

impl InodeTable {
    pub fn new() -> InodeTable {
        let mut inner = Inner::default();
        // Inode 0 is invalid; 1 is the root.
        inner.nodes.push(Node::Root);
        inner.nodes.push(Node::Root);
        inner.by_node.insert(Node::Root, ROOT_INO);
        InodeTable {
            inner: Mutex::new(inner),
        }
    }

    /// The inode number of `node`, assigning the next one if it has none yet.
    pub fn ino(&self, node: &Node) -> u64 {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&ino) = inner.by_node.get(node) {
            return ino;
        }
        let ino = inner.nodes.len() as u64;
        inner.nodes.push(node.clone());
        inner.by_node.insert(node.clone(), ino);
        ino
    }

    /// The node an inode number stands for.
    pub fn node(&self, ino: u64) -> Option<Node> {
        if ino == 0 {
            return None;
        }
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.nodes.get(ino as usize).cloned()
    }

    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .nodes
            .len()
            - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_numbers() {
        let t = InodeTable::new();
        assert_eq!(t.ino(&Node::Root), ROOT_INO);
        let a = t.ino(&Node::AsOfDir);
        let v = Node::ViewDir {
            view: Arc::new(ViewKey::AsOf("20240101000000000".into())),
            path: Arc::from(""),
        };
        let b = t.ino(&v);
        assert_ne!(a, b);
        assert_eq!(t.ino(&Node::AsOfDir), a);
        assert_eq!(t.ino(&v.clone()), b);
        assert_eq!(t.node(b), Some(v));
        assert_eq!(t.node(0), None);
        assert_eq!(t.node(999), None);
    }
}
