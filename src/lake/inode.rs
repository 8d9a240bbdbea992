//! Inode numbers of a lake mount: every table gets its own space, so that two tables' numbers
//! never collide (SEMANTICS.md §7.1.1).
//!
//! A single mount computes its numbers from what they name (`fs/inode.rs`: kind, view, item). A
//! lake packs the same three fields anew, with the table's number in front:
//!
//! ```text
//!  63      0: packed, 1: mapped
//!  62..48  table  1.. (0: the lake's own directories, item = directory id; the root is 1)
//!  47..46  kind   as in a single mount
//!  45..32  view   as in a single mount, when it is below 2^14
//!  31..0   item   as in a single mount, when it is below 2^32
//! ```
//!
//! A number whose fields do not fit (table 2^15 and above, view 2^14, item 2^32) is mapped
//! instead: it gets the next free number with the top bit set, remembered both ways. Packing is
//! the rule, so the lake costs nothing per file; the mapping keeps the rare overflow correct.
//! Either way a `(table, inner number)` pair always gets the same lake number, and a lake number
//! never means two things.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::fs::{ino_fields, ino_of_fields};

const MAPPED: u64 = 1 << 63;
const TABLE_SHIFT: u32 = 48;
const TABLE_MAX: u32 = (1 << 15) - 1;
const KIND_SHIFT: u32 = 46;
const VIEW_SHIFT: u32 = 32;
const VIEW_MAX: u64 = (1 << 14) - 1;
const ITEM_MAX: u64 = (1 << 32) - 1;

/// Where a lake inode number points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LakeNode {
    /// One of the lake's own directories (the root is directory 1).
    Dir(u64),
    /// Inode `ino` of table `table`, as that table's file system numbers it.
    Table { table: u32, ino: u64 },
}

/// A `(table, inner number)` pair.
type Pair = (u32, u64);

/// The numbering of one lake mount.
#[derive(Default)]
pub struct LakeInodes {
    /// The mapped numbers: pair → number, and by number (without the top bit).
    mapped: Mutex<(HashMap<Pair, u64>, Vec<Pair>)>,
}

impl LakeInodes {
    /// The lake number of inode `ino` of table `table` (`table` ≥ 1).
    pub fn outer(&self, table: u32, ino: u64) -> u64 {
        let (kind, view, item) = ino_fields(ino);
        if table <= TABLE_MAX && view <= VIEW_MAX && item <= ITEM_MAX {
            return ((table as u64) << TABLE_SHIFT)
                | (kind << KIND_SHIFT)
                | (view << VIEW_SHIFT)
                | item;
        }
        let mut g = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&n) = g.0.get(&(table, ino)) {
            return n;
        }
        let n = MAPPED | g.1.len() as u64;
        g.1.push((table, ino));
        g.0.insert((table, ino), n);
        n
    }

    /// The lake number of the lake's own directory `id`.
    pub fn dir(id: u64) -> u64 {
        id & ITEM_MAX
    }

    /// What lake number `ino` points at (`None`: no such number was handed out).
    pub fn inner(&self, ino: u64) -> Option<LakeNode> {
        if ino & MAPPED != 0 {
            let g = self.mapped.lock().unwrap_or_else(|e| e.into_inner());
            let &(table, ino) = g.1.get((ino & !MAPPED) as usize)?;
            return Some(LakeNode::Table { table, ino });
        }
        let table = ((ino >> TABLE_SHIFT) as u32) & TABLE_MAX;
        let kind = (ino >> KIND_SHIFT) & 3;
        let view = (ino >> VIEW_SHIFT) & VIEW_MAX;
        let item = ino & ITEM_MAX;
        if table == 0 {
            return (kind == 0 && view == 0 && item != 0).then_some(LakeNode::Dir(item));
        }
        Some(LakeNode::Table {
            table,
            ino: ino_of_fields(kind, view, item)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::{Node, ROOT};

    #[test]
    fn tables_get_disjoint_numbers_that_round_trip() {
        let l = LakeInodes::default();
        let nodes = [
            Node::Root.ino(),
            Node::ViewDir { view: 0, dir: 0 }.ino(),
            Node::ViewFile { view: 3, file: 7 }.ino(),
            Node::MergedFile { view: 1, slice: 2 }.ino(),
            Node::TimelineFile { name: 5 }.ino(),
            // Too big to pack: mapped.
            Node::ViewFile {
                view: 1 << 20,
                file: 1,
            }
            .ino(),
            Node::ViewFile {
                view: 0,
                file: 1 << 35,
            }
            .ino(),
        ];
        let mut seen = std::collections::HashSet::new();
        for table in [1, 2, TABLE_MAX, TABLE_MAX + 1, u32::MAX] {
            for &ino in &nodes {
                let o = l.outer(table, ino);
                assert!(seen.insert(o), "{table} {ino:#x} -> {o:#x} collides");
                assert_eq!(l.inner(o), Some(LakeNode::Table { table, ino }));
                assert_eq!(l.outer(table, ino), o, "stable");
                assert_ne!(o, ROOT);
            }
        }
        assert_eq!(l.inner(ROOT), Some(LakeNode::Dir(1)));
        assert_eq!(l.inner(LakeInodes::dir(9)), Some(LakeNode::Dir(9)));
        assert!(!seen.contains(&LakeInodes::dir(9)));
        assert_eq!(l.inner(0), None);
        assert_eq!(l.inner(MAPPED | 1_000_000), None, "never handed out");
    }
}
