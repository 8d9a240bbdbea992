//! Tier 1: what the table format and the visibility rules decide, checked on plain data
//! structures and through the file system's logic (`HudiFs` called directly), without a kernel.
//!
//! One test binary; each file is a module, its tests named `file::test`. What each proves:
//! tests/logic/README.md.

mod archive;
mod bad_input;
mod bootstrap;
mod conformance;
mod delta_log;
mod fixture_cache;
mod fs_logic;
mod generated_views;
mod iceberg_table;
mod lake_logic;
mod live;
mod merged_read_ahead;
mod metadata_decoding;
mod metadata_table;
mod model;
mod objstore_conformance;
mod upgraded;
mod writer;

/// The inode of `path` (names joined by `/`) below the root of `fs`.
pub fn walk(fs: &hudifs::fs::HudiFs, path: &str) -> hudifs_core::error::Result<u64> {
    let mut ino = hudifs::fs::ROOT;
    for p in path.split('/') {
        ino = fs.lookup(ino, std::ffi::OsStr::new(p))?.attr.ino;
    }
    Ok(ino)
}

/// The whole of file `ino` of `fs`, read in one request of its stated size.
pub fn read_all(fs: &hudifs::fs::HudiFs, ino: u64) -> Vec<u8> {
    let size = fs.getattr(ino).unwrap().attr.size;
    let fh = fs.open(ino).unwrap().fh;
    let bytes = read_now(fs, fh, 0, u32::try_from(size).unwrap()).unwrap();
    fs.release(fh);
    assert_eq!(bytes.len() as u64, size, "a read of the stated size");
    bytes
}

/// Every file of directory `dir` of `fs`, by name, as read.
pub fn files_in(fs: &hudifs::fs::HudiFs, dir: &str) -> std::collections::BTreeMap<String, Vec<u8>> {
    fs.readdir_entries(walk(fs, dir).unwrap())
        .unwrap()
        .iter()
        .map(|e| {
            let n = e.name.to_string();
            let bytes = read_all(fs, walk(fs, &format!("{dir}/{n}")).unwrap());
            (n, bytes)
        })
        .collect()
}

/// The one file a mount saved for the next in merge cache `cache` whose name ends with
/// `suffix` (`.log`: `delta/`'s log; `.manifests`: `iceberg/`'s current manifests).
pub fn saved_side_file(cache: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let found: Vec<_> = std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with("side-delta-") && n.ends_with(suffix)
        })
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    found[0].clone()
}

/// The file system of the table at `root`, merging into the cache directory `cache`.
pub fn fs_with_merge_cache(root: &std::path::Path, cache: &std::path::Path) -> hudifs::fs::HudiFs {
    hudifs::fs::HudiFs::new(root, opts_with_merge_cache(cache)).unwrap()
}

/// The options of [`fs_with_merge_cache`].
pub fn opts_with_merge_cache(cache: &std::path::Path) -> hudifs::fs::FsOptions {
    hudifs::fs::FsOptions {
        merge: hudifs::fs::MergeSettings {
            cache_dir: Some(cache.to_path_buf()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// [`fs_with_merge_cache`] with `delta/`'s change data feed (`--delta-change-data`).
pub fn fs_with_change_data(root: &std::path::Path, cache: &std::path::Path) -> hudifs::fs::HudiFs {
    let opts = hudifs::fs::FsOptions {
        delta_change_data: true,
        ..opts_with_merge_cache(cache)
    };
    hudifs::fs::HudiFs::new(root, opts).unwrap()
}

/// A read through [`hudifs::fs::Served::read`], waited for.
pub fn read_now(
    fs: &dyn hudifs::fs::Served,
    fh: u64,
    offset: u64,
    size: u32,
) -> hudifs_core::error::Result<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    fs.read(
        0,
        fh,
        offset,
        size,
        Box::new(move |r| {
            let _ = tx.send(r.map(<[u8]>::to_vec));
        }),
    );
    rx.recv().unwrap()
}

/// The answer of an operation of [`hudifs::fs::Served`] that takes a `done` callback (lookup,
/// opendir, readdir), waited for.
pub fn now<T: Send + 'static>(
    ask: impl FnOnce(hudifs::fs::Answer<T>),
) -> hudifs_core::error::Result<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    ask(Box::new(move |r| {
        let _ = tx.send(r);
    }));
    rx.recv().unwrap()
}

/// A local table seen as an object store: work that may wait on it runs on a thread of its own
/// (as on a store's runtime), and every request to it is counted (`FaultyStore`). As on a
/// store, a partition's listing gives its files' sizes.
#[derive(Debug)]
pub struct AsObjectStore(
    pub std::sync::Arc<hudifs_storage::FaultyStore<hudifs_storage::LocalStore>>,
);

impl hudifs_storage::Storage for AsObjectStore {
    fn describe(&self, path: &hudifs_storage::TablePath) -> String {
        self.0.describe(path)
    }
    fn list(&self, dir: &hudifs_storage::TablePath) -> std::io::Result<Vec<hudifs_storage::Entry>> {
        self.0.list(dir)
    }
    fn list_names(
        &self,
        dir: &hudifs_storage::TablePath,
    ) -> std::io::Result<Vec<(String, hudifs_storage::Kind)>> {
        self.0.list_names(dir)
    }
    fn stat(&self, path: &hudifs_storage::TablePath) -> std::io::Result<hudifs_storage::Meta> {
        self.0.stat(path)
    }
    fn stat_names(
        &self,
        dir: &hudifs_storage::TablePath,
        names: &[&str],
    ) -> Vec<std::io::Result<hudifs_storage::Meta>> {
        self.0.stat_names(dir, names)
    }
    fn read(&self, path: &hudifs_storage::TablePath) -> std::io::Result<Vec<u8>> {
        self.0.read(path)
    }
    fn read_range(
        &self,
        path: &hudifs_storage::TablePath,
        offset: u64,
        len: usize,
    ) -> std::io::Result<Vec<u8>> {
        self.0.read_range(path, offset, len)
    }
    fn open(
        &self,
        path: &hudifs_storage::TablePath,
    ) -> std::io::Result<std::sync::Arc<dyn hudifs_storage::OpenFile>> {
        self.0.open(path)
    }
    fn is_object_store(&self) -> bool {
        true
    }
    fn run_blocking(&self, job: hudifs_storage::Job) {
        std::thread::spawn(job);
    }
}
