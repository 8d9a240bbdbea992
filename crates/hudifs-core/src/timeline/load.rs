//! Reading the timeline directory through the storage.

use hudifs_storage::{Kind, Storage, TablePath};

use super::{looks_like_instant, parse_instant_file_name, InstantFile, Timeline};
use crate::error::{Error, Result};
use crate::table::TableConfig;

impl Timeline {
    /// Read the active timeline of a table.
    pub fn load(store: &dyn Storage, cfg: &TableConfig) -> Result<Timeline> {
        // On an object store the archive's LIST goes out beside the timeline's: each is a
        // round trip to the store, and neither needs the other's answer.
        let (names, archived) = if store.is_object_store() {
            std::thread::scope(|s| {
                let archived = s.spawn(|| archive_has_files(store, cfg));
                let names = stable_listing(store, &cfg.timeline_dir);
                let archived = archived
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p));
                (names, archived)
            })
        } else {
            (
                stable_listing(store, &cfg.timeline_dir),
                archive_has_files(store, cfg),
            )
        };
        let mut files = Vec::new();
        for name in names? {
            if let Some(f) = parse_timeline_name(store, cfg, &name) {
                files.push(f);
            }
        }
        Ok(Timeline::from_files(cfg.layout, files, archived?))
    }
}

/// A name found in the timeline directory as an instant file; a name that looks meant as one
/// but is outside the grammar is logged (and ignored).
pub fn parse_timeline_name(
    store: &dyn Storage,
    cfg: &TableConfig,
    name: &str,
) -> Option<InstantFile> {
    let f = parse_instant_file_name(name, cfg.layout);
    if f.is_none() && looks_like_instant(name) {
        log::warn!(
            "{}: not a timeline file name hudifs understands (layout {}); ignored",
            store.describe(&cfg.timeline_dir.child(name).unwrap_or_default()),
            cfg.layout.number()
        );
    }
    f
}

/// The names of the regular files of a directory, in listing order.
pub fn list_files(store: &dyn Storage, dir: &TablePath) -> Result<Vec<String>> {
    Ok(store
        .list_names(dir)
        .map_err(|e| Error::io(store.describe(dir), e))?
        .into_iter()
        .filter(|(_, kind)| *kind == Kind::File)
        .map(|(name, _)| name)
        .collect())
}

/// The names of the regular files of a directory, sorted. On a file system they are read
/// until two listings in a row agree: a listing taken while files are renamed in can show a
/// later rename and miss an earlier one (directory order is hash order), which would show a
/// state of the table that never existed. An object store lists keys in order and a PUT
/// appears whole, so a listing that shows an instant file shows every one completed before
/// it: one listing is enough.
pub fn stable_listing(store: &dyn Storage, dir: &TablePath) -> Result<Vec<String>> {
    let mut first = list_files(store, dir)?;
    first.sort_unstable();
    if store.is_object_store() {
        return Ok(first);
    }
    stabilize(store, dir, first)
}

/// Read `dir` again until a listing agrees with the one before, starting from `last` (sorted).
pub fn stabilize(
    store: &dyn Storage,
    dir: &TablePath,
    mut last: Vec<String>,
) -> Result<Vec<String>> {
    for _ in 0..20 {
        let mut next = list_files(store, dir)?;
        next.sort_unstable();
        if next == last {
            return Ok(next);
        }
        last = next;
    }
    Ok(last)
}

/// Whether the archived timeline of a table holds any file.
pub fn archive_has_files(store: &dyn Storage, cfg: &TableConfig) -> Result<bool> {
    dir_has_files(store, &cfg.archive_dir, 3)
        .map_err(|e| Error::io(store.describe(&cfg.archive_dir), e))
}

/// Whether `dir` (missing: no) holds a file other than a checksum, `depth` levels down. A
/// listing that fails is an error, not an empty archive: whether instants were archived decides
/// what the timeline shows (the caller keeps its previous answer and asks again later).
fn dir_has_files(store: &dyn Storage, dir: &TablePath, depth: u32) -> std::io::Result<bool> {
    let entries = match store.list_names(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    for (name, kind) in &entries {
        let found = match kind {
            Kind::File => !name.ends_with(".crc"),
            Kind::Dir if depth > 0 => match dir.child(name) {
                Ok(d) => dir_has_files(store, &d, depth - 1)?,
                Err(_) => false,
            },
            _ => false,
        };
        if found {
            return Ok(true);
        }
    }
    Ok(false)
}
