//! A directory of a storage as a storage of its own: each table of a lake (a directory or prefix
//! holding many tables) is read through the lake's storage, scoped to the table's root.

use std::io;
use std::sync::Arc;

use crate::{Entry, Job, Kind, LocalStore, Meta, OpenFile, Storage, TablePath};

/// The storage of directory `dir` of `store`, with `dir` as its root. A local disk gets a
/// [`LocalStore`] of its own (what only local disks offer, inotify and passthrough, works from
/// the new root); any other storage is wrapped, sharing its client.
pub fn scoped(store: &Arc<dyn Storage>, dir: &TablePath) -> io::Result<Arc<dyn Storage>> {
    if dir.is_root() {
        return Ok(store.clone());
    }
    if let Some(local) = store.local() {
        return Ok(Arc::new(LocalStore::new(&local.path(dir))?));
    }
    Ok(Arc::new(Scoped {
        inner: store.clone(),
        root: dir.clone(),
    }))
}

/// `inner` seen from its directory `root`.
#[derive(Debug)]
pub struct Scoped {
    inner: Arc<dyn Storage>,
    root: TablePath,
}

impl Scoped {
    fn at(&self, p: &TablePath) -> TablePath {
        self.root.join_path(p)
    }
}

impl Storage for Scoped {
    fn describe(&self, path: &TablePath) -> String {
        self.inner.describe(&self.at(path))
    }
    fn list(&self, dir: &TablePath) -> io::Result<Vec<Entry>> {
        self.inner.list(&self.at(dir))
    }
    fn list_names(&self, dir: &TablePath) -> io::Result<Vec<(String, Kind)>> {
        self.inner.list_names(&self.at(dir))
    }
    fn list_tree(
        &self,
        dir: &TablePath,
        skip: &str,
        go_on: &dyn Fn(crate::TreeProgress) -> bool,
    ) -> Option<Vec<(String, Meta)>> {
        self.inner.list_tree(&self.at(dir), skip, go_on)
    }
    fn known_meta(&self, path: &TablePath) -> Option<Meta> {
        self.inner.known_meta(&self.at(path))
    }
    fn stat(&self, path: &TablePath) -> io::Result<Meta> {
        self.inner.stat(&self.at(path))
    }
    fn stat_names(&self, dir: &TablePath, names: &[&str]) -> Vec<io::Result<Meta>> {
        self.inner.stat_names(&self.at(dir), names)
    }
    fn read(&self, path: &TablePath) -> io::Result<Vec<u8>> {
        self.inner.read(&self.at(path))
    }
    fn read_range(&self, path: &TablePath, offset: u64, len: usize) -> io::Result<Vec<u8>> {
        self.inner.read_range(&self.at(path), offset, len)
    }
    fn open(&self, path: &TablePath) -> io::Result<Arc<dyn OpenFile>> {
        self.inner.open(&self.at(path))
    }
    fn is_object_store(&self) -> bool {
        self.inner.is_object_store()
    }
    fn run_blocking(&self, job: Job) {
        self.inner.run_blocking(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemStore, StorageWrite};

    #[test]
    fn a_scoped_store_sees_its_directory_as_the_root() {
        let mem = MemStore::new("lake");
        mem.put(&TablePath::new("db/t/.hoodie/x").unwrap(), b"abc")
            .unwrap();
        mem.put(&TablePath::new("other").unwrap(), b"no").unwrap();
        let store: Arc<dyn Storage> = Arc::new(mem);
        let t = scoped(&store, &TablePath::new("db/t").unwrap()).unwrap();
        let x = TablePath::new(".hoodie/x").unwrap();
        assert_eq!(t.read(&x).unwrap(), b"abc");
        assert_eq!(t.read_range(&x, 1, 5).unwrap(), b"bc");
        assert_eq!(t.open(&x).unwrap().size(), 3);
        assert!(t.stat(&TablePath::new("other").unwrap()).is_err());
        let names: Vec<String> = t
            .list_names(&TablePath::root())
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, [".hoodie"]);
        assert_eq!(
            t.describe(&x),
            store.describe(&TablePath::new("db/t/.hoodie/x").unwrap())
        );
    }

    /// A store that waits on a "network": its blocking work runs on a thread of its own.
    #[derive(Debug)]
    struct Remote(MemStore);

    impl Storage for Remote {
        fn describe(&self, path: &TablePath) -> String {
            self.0.describe(path)
        }
        fn list(&self, dir: &TablePath) -> io::Result<Vec<Entry>> {
            self.0.list(dir)
        }
        fn stat(&self, path: &TablePath) -> io::Result<Meta> {
            self.0.stat(path)
        }
        fn read(&self, path: &TablePath) -> io::Result<Vec<u8>> {
            self.0.read(path)
        }
        fn read_range(&self, path: &TablePath, offset: u64, len: usize) -> io::Result<Vec<u8>> {
            self.0.read_range(path, offset, len)
        }
        fn open(&self, path: &TablePath) -> io::Result<Arc<dyn OpenFile>> {
            self.0.open(path)
        }
        fn is_object_store(&self) -> bool {
            true
        }
        fn run_blocking(&self, job: Job) {
            std::thread::spawn(job);
        }
    }

    #[test]
    fn a_scoped_object_store_is_one_and_runs_blocking_work_on_its_threads() {
        let store: Arc<dyn Storage> = Arc::new(Remote(MemStore::new("lake")));
        let t = scoped(&store, &TablePath::new("db/t").unwrap()).unwrap();
        assert!(t.is_object_store());
        let (tx, rx) = std::sync::mpsc::channel();
        let here = std::thread::current().id();
        let job: Job = Box::new(move || tx.send(std::thread::current().id()).unwrap());
        t.run_blocking(job);
        assert_ne!(rx.recv().unwrap(), here);
        // A local disk runs the job in place.
        let mem: Arc<dyn Storage> = Arc::new(MemStore::new("m"));
        let m = scoped(&mem, &TablePath::new("db/t").unwrap()).unwrap();
        assert!(!m.is_object_store());
        let (tx, rx) = std::sync::mpsc::channel();
        m.run_blocking(Box::new(move || {
            tx.send(std::thread::current().id()).unwrap()
        }));
        assert_eq!(rx.try_recv().unwrap(), here);
    }

    #[test]
    fn a_local_directory_gets_its_own_local_store() {
        let tmp = std::env::temp_dir().join(format!("hudifs-scoped-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("db/t")).unwrap();
        let store: Arc<dyn Storage> = Arc::new(LocalStore::new(&tmp).unwrap());
        let t = scoped(&store, &TablePath::new("db/t").unwrap()).unwrap();
        let local = t.local().expect("still local");
        assert_eq!(local.root(), tmp.canonicalize().unwrap().join("db/t"));
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
