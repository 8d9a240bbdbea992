//! Partition discovery and partition listings, through the storage (SEMANTICS.md §1.8): a
//! directory is a partition iff it directly holds a partition metafile; names starting with `.`
//! are never entered; symbolic links are never followed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::SystemTime;

use hudifs_storage::{Entry, Kind, Storage, TablePath};

use super::{DataFile, PARTITION_METAFILE};
use crate::error::{Error, Result};
use crate::table::TableConfig;

/// How deep partition discovery descends (timestamp key generators write four levels; this is
/// generous and bounds a walk of a pathological tree).
const MAX_PARTITION_DEPTH: usize = 16;

/// The directory of a partition (`""` is the table root).
pub fn partition_dir(partition: &str) -> Result<TablePath> {
    TablePath::new(partition).map_err(|e| Error::NotFound(e.to_string()))
}

/// Every partition of the table, sorted.
pub fn discover_partitions(store: &dyn Storage) -> Result<Vec<String>> {
    Ok(discover_partitions_listed(store)?.0)
}

/// The listings a partition discovery took, by partition: on an object store, where a listing
/// of names is a full listing (sizes, times), they serve as the partitions' first listings, so
/// a mount's first walk of `latest/` costs no second LIST per partition.
pub type Prelisted = HashMap<String, Vec<Entry>>;

/// Every partition of the table, sorted, and on an object store the discovery's listings of
/// them ([`Prelisted`]; empty elsewhere, where a walk lists names only).
pub fn discover_partitions_listed(store: &dyn Storage) -> Result<(Vec<String>, Prelisted)> {
    discover_partitions_within(store, MAX_TREE_REQUESTS)
}

/// [`discover_partitions_listed`], listing an object store's whole tree at once only while that
/// costs at most `max_tree_requests` requests (0: never) and pays (see [`tree_pays`]).
pub fn discover_partitions_within(
    store: &dyn Storage,
    max_tree_requests: usize,
) -> Result<(Vec<String>, Prelisted)> {
    let mut out = Vec::new();
    let mut listed = Prelisted::new();
    if store.is_object_store() {
        walk_levels(store, max_tree_requests, &mut out, &mut listed)?;
    } else {
        walk(store, &TablePath::root(), 0, &mut out)?;
    }
    out.sort();
    Ok((out, listed))
}

/// How many LISTs a discovery on an object store has in flight at once.
const PARALLEL_LISTS: usize = 16;

/// The most requests a listing of the table's whole tree (outside `.hoodie/`) may cost for
/// discovery to take it instead of one LIST per directory: 100 pages, 100,000 files.
const MAX_TREE_REQUESTS: usize = 100;

/// Keys a page of a tree listing holds.
const PAGE_KEYS: usize = 1000;

/// Whether listing the rest of the tree page after page beats LISTs of each directory,
/// [`PARALLEL_LISTS`] side by side, judged from what the pages so far show. Pages come one
/// after another: n keys cost n / 1000 round trips; directory LISTs cost one round trip per
/// [`PARALLEL_LISTS`] directories (each fits a page). So the tree pays while directories hold
/// fewer than 1000 / [`PARALLEL_LISTS`] keys each (62): a table of many small partitions.
pub fn tree_pays(p: hudifs_storage::TreeProgress) -> bool {
    // The last directory may be partly listed: count only the complete ones.
    let complete = p.dirs.saturating_sub(1).max(1);
    p.keys / complete < PAGE_KEYS / PARALLEL_LISTS
}

/// What a listing says of a directory on an object store (a key prefix).
fn dir_meta() -> hudifs_storage::Meta {
    hudifs_storage::Meta {
        kind: Kind::Dir,
        size: 0,
        mtime: None,
        mode: 0o755,
        version: None,
    }
}

/// The listings of every directory of a tree of files (paths relative to its root), as
/// directory listings would give them.
fn tree_listings(files: Vec<(String, hudifs_storage::Meta)>) -> HashMap<String, Vec<Entry>> {
    let mut dirs: HashMap<String, Vec<Entry>> = HashMap::new();
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (path, meta) in files {
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
        dirs.entry(dir.to_string()).or_default().push(Entry {
            name: name.to_string(),
            meta,
        });
        // Each ancestor lists the next one down, once.
        let mut child = dir;
        while !child.is_empty() && seen.insert(child.to_string()) {
            let (parent, name) = child.rsplit_once('/').unwrap_or(("", child));
            dirs.entry(parent.to_string()).or_default().push(Entry {
                name: name.to_string(),
                meta: dir_meta(),
            });
            child = parent;
        }
    }
    dirs
}

/// Discovery on an object store. The whole tree is listed page after page while its pages
/// show a table of many small partitions ([`tree_pays`]); otherwise level by level, the
/// directories of a level listed side by side (a LIST is mostly waiting for the store).
/// Either way the same partitions and listings as [`walk`].
fn walk_levels(
    store: &dyn Storage,
    max_tree_requests: usize,
    out: &mut Vec<String>,
    listed: &mut Prelisted,
) -> Result<()> {
    let go_on = |p: hudifs_storage::TreeProgress| {
        p.keys < max_tree_requests.saturating_mul(PAGE_KEYS) && tree_pays(p)
    };
    let tree = (max_tree_requests > 0)
        .then(|| store.list_tree(&TablePath::root(), crate::table::HOODIE, &go_on))
        .flatten()
        .map(|files| {
            let mut dirs = tree_listings(files);
            // The root lists `.hoodie/` too, as its own listing would (the tree left it out).
            dirs.entry(String::new()).or_default().push(Entry {
                name: crate::table::HOODIE.to_string(),
                meta: dir_meta(),
            });
            dirs
        });
    let list = |dir: &TablePath| match &tree {
        Some(t) => Ok(t.get(dir.as_str()).cloned().unwrap_or_default()),
        None => store.list(dir),
    };
    let mut level = vec![TablePath::root()];
    let mut depth = 0;
    while !level.is_empty() {
        let lists = if tree.is_some() { 1 } else { PARALLEL_LISTS };
        let results = crate::side_by_side::map(&level, lists, |dir| list(dir));
        let mut below = Vec::new();
        for (dir, r) in level.iter().zip(results) {
            let entries = match r {
                Ok(e) => e,
                Err(e) if depth > 0 => {
                    log::warn!("{}: cannot list, skipped: {e}", store.describe(dir));
                    continue;
                }
                Err(e) => return Err(Error::io(store.describe(dir), e)),
            };
            let mut is_partition = false;
            let mut subdirs = Vec::new();
            for e in &entries {
                if e.meta.kind == Kind::File && e.name.starts_with(PARTITION_METAFILE) {
                    is_partition = true;
                } else if e.meta.kind == Kind::Dir
                    && !e.name.starts_with('.')
                    && depth < MAX_PARTITION_DEPTH
                {
                    subdirs.push(e.name.clone());
                }
            }
            if is_partition {
                out.push(dir.as_str().to_string());
                listed.insert(dir.as_str().to_string(), entries);
            }
            subdirs.sort();
            below.extend(subdirs.iter().filter_map(|n| dir.child(n).ok()));
        }
        level = below;
        depth += 1;
    }
    Ok(())
}

fn walk(store: &dyn Storage, dir: &TablePath, depth: usize, out: &mut Vec<String>) -> Result<()> {
    let entries = match store.list_names(dir) {
        Ok(e) => e,
        Err(e) if depth > 0 => {
            log::warn!("{}: cannot list, skipped: {e}", store.describe(dir));
            return Ok(());
        }
        Err(e) => return Err(Error::io(store.describe(dir), e)),
    };
    let mut is_partition = false;
    let mut subdirs = Vec::new();
    for (name, kind) in entries {
        if kind == Kind::File && name.starts_with(PARTITION_METAFILE) {
            is_partition = true;
        } else if kind == Kind::Dir && !name.starts_with('.') && depth < MAX_PARTITION_DEPTH {
            subdirs.push(name);
        }
    }
    if is_partition {
        out.push(dir.as_str().to_string());
    }
    subdirs.sort();
    for name in subdirs {
        if let Ok(child) = dir.child(&name) {
            walk(store, &child, depth + 1, out)?;
        }
    }
    Ok(())
}

/// Whether `partition` is a partition directory (holds a partition metafile).
pub fn is_partition_dir(store: &dyn Storage, partition: &str) -> bool {
    let Ok(dir) = TablePath::new(partition) else {
        return false;
    };
    store.list_names(&dir).is_ok_and(|entries| {
        entries
            .iter()
            .any(|(n, k)| *k == Kind::File && n.starts_with(PARTITION_METAFILE))
    })
}

/// The data files of one partition, sorted by name. Junk, metafiles, CDC logs, directories and
/// symbolic links are left out.
pub fn list_partition(
    store: &dyn Storage,
    cfg: &TableConfig,
    partition: &str,
) -> Result<Vec<DataFile>> {
    let dir = partition_dir(partition)?;
    let entries = store
        .list(&dir)
        .map_err(|e| Error::io(store.describe(&dir), e))?;
    Ok(partition_files(cfg, partition, entries))
}

/// [`list_partition`] by names alone, where that saves a `stat` per file (a local disk): the
/// files come [`DataFile::unstatted`] and [`stat_files`] fills them in when their attributes
/// are asked for. On an object store a listing has the sizes anyway: the same as
/// [`list_partition`].
pub fn list_partition_names(
    store: &dyn Storage,
    cfg: &TableConfig,
    partition: &str,
) -> Result<Vec<DataFile>> {
    if store.is_object_store() {
        return list_partition(store, cfg, partition);
    }
    let dir = partition_dir(partition)?;
    let entries = store
        .list_names(&dir)
        .map_err(|e| Error::io(store.describe(&dir), e))?;
    let part: Arc<str> = Arc::from(partition);
    let mut files: Vec<DataFile> = entries
        .into_iter()
        .filter(|(_, kind)| *kind == Kind::File)
        .filter_map(|(name, _)| DataFile::unstatted(part.clone(), &name, &cfg.base_extensions))
        .collect();
    files.sort_by(|a, b| a.name().cmp(b.name()));
    Ok(files)
}

/// Names a thread states at once ([`stat_files`]), and the most threads it uses.
const STAT_CHUNK: usize = 256;
const STAT_THREADS: usize = 4;

/// State every file of `files` listed by name only ([`list_partition_names`]). A file that is
/// gone (or no longer a regular file) stays unstated; the caller treats it as gone.
pub fn stat_files(store: &dyn Storage, files: &[DataFile]) {
    // By partition directory: a listing's files share one.
    let mut todo: Vec<&DataFile> = files.iter().filter(|f| !f.is_stated()).collect();
    todo.sort_by(|a, b| a.partition.cmp(&b.partition));
    for group in todo.chunk_by(|a, b| a.partition == b.partition) {
        let Ok(dir) = partition_dir(&group[0].partition) else {
            continue;
        };
        let names: Vec<&str> = group.iter().map(|f| f.name()).collect();
        // A large directory on every core: a `stat` is a system call, not a wait.
        let chunks: Vec<&[&str]> = names.chunks(STAT_CHUNK).collect();
        let threads = crate::side_by_side::cores().min(STAT_THREADS);
        let metas = crate::side_by_side::map(&chunks, threads, |c| store.stat_names(&dir, c));
        for (f, m) in group.iter().zip(metas.into_iter().flatten()) {
            match m {
                Ok(m) if m.kind == Kind::File => {
                    f.set_meta(m.size, m.mtime.unwrap_or(SystemTime::UNIX_EPOCH), m.mode)
                }
                Ok(_) => {}
                Err(e) => log::debug!("{}/{}: cannot stat: {e}", store.describe(&dir), f.name()),
            }
        }
    }
}

/// The data files of a partition's listing `entries`, sorted by name.
pub fn partition_files(cfg: &TableConfig, partition: &str, entries: Vec<Entry>) -> Vec<DataFile> {
    let part: Arc<str> = Arc::from(partition);
    let mut files = Vec::new();
    for e in entries {
        if e.meta.kind != Kind::File {
            continue;
        }
        // `DataFile::new` is None for every name that is not a data file name.
        files.extend(DataFile::new(
            part.clone(),
            &e.name,
            &cfg.base_extensions,
            e.meta.size,
            e.meta.mtime.unwrap_or(SystemTime::UNIX_EPOCH),
            e.meta.mode,
        ));
    }
    files.sort_by(|a, b| a.name().cmp(b.name()));
    files
}
