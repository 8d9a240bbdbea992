//! Files and tables on the local disk: walking a tree, extended attributes, a table's storage,
//! configuration and snapshot, a tree uploaded to a store.

use std::path::Path;
use std::sync::Arc;

use hudifs_core::snapshot::Snapshot;
use hudifs_core::table::TableConfig;
use hudifs_storage::{LocalStore, Storage};

/// Every regular file below `dir`, as sorted paths relative to it.
pub fn walk_files(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, rel)) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().to_string();
            let r = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            if e.file_type()?.is_dir() {
                stack.push((e.path(), r));
            } else {
                out.push(r);
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Read an extended attribute of `path` (None if absent).
pub fn xattr(path: &Path, name: &str) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0u8; 64 * 1024];
    // SAFETY: valid C strings and a buffer of the stated length.
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if len < 0 {
        return None;
    }
    buf.truncate(len as usize);
    String::from_utf8(buf).ok()
}

/// The errno of `getxattr(path, name)`, or `None` if the attribute is there.
pub fn xattr_errno(path: &Path, name: &str) -> Option<i32> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    // SAFETY: valid C strings; a zero-length buffer asks for the size only.
    let len = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) };
    (len < 0).then(|| std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
}

/// The storage of the table at `root` (a local directory).
pub fn store(root: &Path) -> Arc<dyn Storage> {
    Arc::new(LocalStore::new(root).unwrap())
}

/// The configuration of the table at `root`.
pub fn config(root: &Path) -> TableConfig {
    TableConfig::load(&*store(root)).unwrap()
}

/// The table at `root`, read.
pub fn snapshot(root: &Path) -> Snapshot {
    Snapshot::open(store(root)).unwrap()
}

/// Write every file below `dir` to `store` under the same relative path (a table uploaded to
/// an object store through the `StorageWrite` seam); how many.
pub fn put_tree(store: &dyn hudifs_storage::StorageWrite, dir: &Path) -> usize {
    let files = walk_files(dir).unwrap();
    for rel in &files {
        let bytes = std::fs::read(dir.join(rel)).unwrap();
        store
            .put(&hudifs_storage::TablePath::new(rel).unwrap(), &bytes)
            .unwrap();
    }
    files.len()
}

/// The column names and rows (every value as its string form, `null` for a null) of a Parquet
/// file, read with the parquet crate's record reader: an answer independent of hudifs's Arrow
/// path.
pub fn parquet_rows(bytes: &[u8]) -> (Vec<String>, Vec<Vec<String>>) {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    use std::io::{Seek, Write};
    let mut tmp = tempfile::tempfile().unwrap();
    tmp.write_all(bytes).unwrap();
    tmp.rewind().unwrap();
    let reader = SerializedFileReader::new(tmp).expect("a Parquet file");
    let columns: Vec<String> = reader
        .metadata()
        .file_metadata()
        .schema()
        .get_fields()
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    let mut rows = Vec::new();
    for row in reader.get_row_iter(None).unwrap() {
        let row = row.unwrap();
        rows.push(
            row.get_column_iter()
                .map(|(_, v)| match v {
                    parquet::record::Field::Str(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect(),
        );
    }
    (columns, rows)
}
