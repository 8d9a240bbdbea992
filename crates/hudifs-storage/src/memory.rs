//! [`MemStore`]: a table held in memory, for fast tests of everything above the storage seam.
//! Directories are explicit (created with their parents by writes) and have modification times
//! like a local file system's; an open file keeps the bytes it was opened with.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::{Entry, Kind, Meta, OpenFile, Storage, TablePath};

#[derive(Debug, Clone)]
enum Node {
    File {
        bytes: Arc<Vec<u8>>,
        mtime: SystemTime,
    },
    Dir {
        mtime: SystemTime,
    },
}

/// A table in memory.
#[derive(Debug)]
pub struct MemStore {
    name: String,
    /// By path (`TablePath::as_str`): the children of `d` are the keys starting `d/`, which
    /// sort together.
    nodes: Mutex<BTreeMap<String, Node>>,
}

impl Default for MemStore {
    fn default() -> Self {
        MemStore::new("memory")
    }
}

impl MemStore {
    /// An empty store; `name` is how its paths are described (`mem://<name>/<path>`).
    pub fn new(name: &str) -> MemStore {
        let mut nodes = BTreeMap::new();
        nodes.insert(
            String::new(),
            Node::Dir {
                mtime: SystemTime::now(),
            },
        );
        MemStore {
            name: name.to_string(),
            nodes: Mutex::new(nodes),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Node>> {
        self.nodes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every file, with its size, sorted by path (for tests).
    pub fn files(&self) -> Vec<(TablePath, u64)> {
        self.lock()
            .iter()
            .filter_map(|(p, n)| match n {
                Node::File { bytes, .. } => Some((TablePath::new(p).ok()?, bytes.len() as u64)),
                Node::Dir { .. } => None,
            })
            .collect()
    }

    fn meta(node: &Node) -> Meta {
        match node {
            Node::File { bytes, mtime } => Meta {
                kind: Kind::File,
                size: bytes.len() as u64,
                mtime: Some(*mtime),
                mode: 0o644,
                version: None,
            },
            Node::Dir { mtime } => Meta {
                kind: Kind::Dir,
                size: 0,
                mtime: Some(*mtime),
                mode: 0o755,
                version: None,
            },
        }
    }

    fn file(&self, path: &TablePath) -> io::Result<Arc<Vec<u8>>> {
        match self.lock().get(path.as_str()) {
            Some(Node::File { bytes, .. }) => Ok(bytes.clone()),
            Some(Node::Dir { .. }) => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{}: is a directory", self.describe(path)),
            )),
            None => Err(crate::not_found(self.describe(path))),
        }
    }

    /// Create `dir` and its parents, touching the parent of each created directory.
    fn make_dirs(nodes: &mut BTreeMap<String, Node>, dir: &TablePath) -> io::Result<()> {
        let mut chain = Vec::new();
        let mut d = Some(dir.clone());
        while let Some(p) = d {
            match nodes.get(p.as_str()) {
                Some(Node::Dir { .. }) => break,
                Some(Node::File { .. }) => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotADirectory,
                        format!("{p}: is a file"),
                    ))
                }
                None => {
                    d = p.parent();
                    chain.push(p);
                }
            }
        }
        for p in chain.into_iter().rev() {
            Self::touch_parent(nodes, &p);
            nodes.insert(
                p.as_str().to_string(),
                Node::Dir {
                    mtime: SystemTime::now(),
                },
            );
        }
        Ok(())
    }

    fn touch_parent(nodes: &mut BTreeMap<String, Node>, path: &TablePath) {
        if let Some(parent) = path.parent() {
            if let Some(Node::Dir { mtime }) = nodes.get_mut(parent.as_str()) {
                *mtime = SystemTime::now();
            }
        }
    }

    /// Every node strictly below `dir`, as (path relative to `dir`, node).
    fn below<'a>(
        nodes: &'a BTreeMap<String, Node>,
        dir: &TablePath,
    ) -> impl Iterator<Item = (&'a str, &'a Node)> + 'a {
        let prefix = if dir.is_root() {
            String::new()
        } else {
            format!("{}/", dir.as_str())
        };
        let len = prefix.len();
        nodes
            .range(prefix.clone()..)
            .take_while(move |(p, _)| p.starts_with(&prefix))
            .filter(|(p, _)| !p.is_empty())
            .map(move |(p, n)| (&p[len..], n))
    }

    fn insert_file(&self, path: &TablePath, bytes: Vec<u8>) -> io::Result<()> {
        let mut nodes = self.lock();
        if let Some(parent) = path.parent() {
            Self::make_dirs(&mut nodes, &parent)?;
        }
        if let Some(Node::Dir { .. }) = nodes.get(path.as_str()) {
            return Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{path}: is a directory"),
            ));
        }
        let existed = nodes.contains_key(path.as_str());
        nodes.insert(
            path.as_str().to_string(),
            Node::File {
                bytes: Arc::new(bytes),
                mtime: SystemTime::now(),
            },
        );
        if !existed {
            Self::touch_parent(&mut nodes, path);
        }
        Ok(())
    }
}

struct MemFile(Arc<Vec<u8>>);

impl OpenFile for MemFile {
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(self.0.len());
        let n = buf.len().min(self.0.len() - start);
        buf[..n].copy_from_slice(&self.0[start..start + n]);
        Ok(n)
    }
}

impl Storage for MemStore {
    fn describe(&self, path: &TablePath) -> String {
        format!("mem://{}/{}", self.name, path.as_str())
    }

    fn list(&self, dir: &TablePath) -> io::Result<Vec<Entry>> {
        let nodes = self.lock();
        match nodes.get(dir.as_str()) {
            Some(Node::Dir { .. }) => {}
            Some(Node::File { .. }) => {
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{}: not a directory", self.describe(dir)),
                ))
            }
            None => return Err(crate::not_found(self.describe(dir))),
        }
        let mut out = Vec::new();
        for (p, node) in Self::below(&nodes, dir) {
            if !p.contains('/') {
                out.push(Entry {
                    name: p.to_string(),
                    meta: Self::meta(node),
                });
            }
        }
        Ok(out)
    }

    fn stat(&self, path: &TablePath) -> io::Result<Meta> {
        self.lock()
            .get(path.as_str())
            .map(Self::meta)
            .ok_or_else(|| crate::not_found(self.describe(path)))
    }

    fn read(&self, path: &TablePath) -> io::Result<Vec<u8>> {
        Ok(self.file(path)?.to_vec())
    }

    fn read_range(&self, path: &TablePath, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        let bytes = self.file(path)?;
        let start = usize::try_from(offset)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        let end = start.saturating_add(len).min(bytes.len());
        Ok(bytes[start..end].to_vec())
    }

    fn open(&self, path: &TablePath) -> io::Result<Arc<dyn OpenFile>> {
        Ok(Arc::new(MemFile(self.file(path)?)))
    }
}

#[cfg(any(test, feature = "write"))]
impl crate::StorageWrite for MemStore {
    fn put(&self, path: &TablePath, bytes: &[u8]) -> io::Result<()> {
        self.insert_file(path, bytes.to_vec())
    }

    fn put_atomic(&self, path: &TablePath, bytes: &[u8], _staging: &TablePath) -> io::Result<()> {
        self.insert_file(path, bytes.to_vec())
    }

    fn rename(&self, from: &TablePath, to: &TablePath) -> io::Result<()> {
        let mut nodes = self.lock();
        let node = match nodes.get(from.as_str()) {
            Some(n @ Node::File { .. }) => n.clone(),
            _ => return Err(crate::not_found(from)),
        };
        if let Some(parent) = to.parent() {
            Self::make_dirs(&mut nodes, &parent)?;
        }
        nodes.remove(from.as_str());
        Self::touch_parent(&mut nodes, from);
        nodes.insert(to.as_str().to_string(), node);
        Self::touch_parent(&mut nodes, to);
        Ok(())
    }

    fn delete(&self, path: &TablePath) -> io::Result<bool> {
        let mut nodes = self.lock();
        match nodes.get(path.as_str()) {
            Some(Node::File { .. }) => {
                nodes.remove(path.as_str());
                Self::touch_parent(&mut nodes, path);
                Ok(true)
            }
            Some(Node::Dir { .. }) => Err(io::Error::new(
                io::ErrorKind::IsADirectory,
                format!("{path}: is a directory"),
            )),
            None => Ok(false),
        }
    }

    fn delete_dir_all(&self, dir: &TablePath) -> io::Result<()> {
        let mut nodes = self.lock();
        if !nodes.contains_key(dir.as_str()) {
            return Ok(());
        }
        let mut doomed: Vec<String> = Self::below(&nodes, dir)
            .map(|(rel, _)| dir.join(rel).map(|p| p.as_str().to_string()))
            .collect::<Result<_, _>>()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        if !dir.is_root() {
            doomed.push(dir.as_str().to_string());
        }
        for p in doomed {
            nodes.remove(&p);
        }
        Self::touch_parent(&mut nodes, dir);
        Ok(())
    }

    fn create_dir_all(&self, dir: &TablePath) -> io::Result<()> {
        Self::make_dirs(&mut self.lock(), dir)
    }

    fn truncate(&self, path: &TablePath, len: u64) -> io::Result<()> {
        let mut bytes = self.read(path)?;
        bytes.truncate(usize::try_from(len).unwrap_or(usize::MAX));
        self.insert_file(path, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StorageWrite;

    fn p(s: &str) -> TablePath {
        TablePath::new(s).unwrap()
    }

    #[test]
    fn behaves_like_a_small_file_system() {
        let s = MemStore::new("t");
        s.put(&p("a/b/c"), b"123").unwrap();
        s.put(&p("a/d"), b"4").unwrap();
        s.put(&p("ab"), b"5").unwrap();
        s.put(&p("a-x"), b"6").unwrap();
        let mut names: Vec<(String, Kind)> = s
            .list(&p("a"))
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.meta.kind))
            .collect();
        names.sort();
        assert_eq!(names, [("b".into(), Kind::Dir), ("d".into(), Kind::File)]);
        assert_eq!(s.list(&TablePath::root()).unwrap().len(), 3);
        assert_eq!(s.read_range(&p("a/b/c"), 1, 5).unwrap(), b"23");
        let before = s.stat(&p("a")).unwrap().mtime;
        std::thread::sleep(std::time::Duration::from_millis(2));
        let f = s.open(&p("a/d")).unwrap();
        assert!(s.delete(&p("a/d")).unwrap());
        assert_ne!(
            s.stat(&p("a")).unwrap().mtime,
            before,
            "a delete touches the dir"
        );
        let mut buf = [0u8; 4];
        assert_eq!(f.read_at(&mut buf, 0).unwrap(), 1);
        s.rename(&p("a/b/c"), &p("x/y")).unwrap();
        assert_eq!(s.read(&p("x/y")).unwrap(), b"123");
        assert_eq!(
            s.stat(&p("a/b/c")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        s.truncate(&p("x/y"), 1).unwrap();
        assert_eq!(s.read(&p("x/y")).unwrap(), b"1");
        s.delete_dir_all(&p("a")).unwrap();
        assert!(s.stat(&p("a/b")).is_err());
        assert!(
            s.stat(&p("ab")).is_ok(),
            "a sibling with a common prefix stays"
        );
    }
}
