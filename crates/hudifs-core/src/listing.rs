//! Data files of a table: the base-file and log-file name grammars (spec §3) and partition
//! discovery (spec §1.4).
//!
//! Parsing and formatting live side by side so that the table generator writes exactly the names
//! the reader accepts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::table::TableConfig;

/// A base file name: `<fileId>_<writeToken>_<instant>.<ext>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseName {
    pub file_id: String,
    pub write_token: String,
    pub instant: String,
    pub ext: String,
}

/// A log file name: `.<fileId>_<instant>.log.<version>_<writeToken>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogName {
    pub file_id: String,
    pub instant: String,
    pub version: u32,
    pub write_token: String,
}

/// What a name in a partition directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataName {
    Base(BaseName),
    Log(LogName),
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A write token is `<task partition>-<stage>-<attempt>`: three dash-separated numbers.
fn is_write_token(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 3 && parts.iter().all(|p| is_digits(p))
}

/// Parse a base file name; `exts` are the extensions the table accepts.
pub fn parse_base_name(name: &str, exts: &[String]) -> Option<BaseName> {
    if name.starts_with('.') {
        return None;
    }
    let (stem, ext) = name.rsplit_once('.')?;
    if !exts.iter().any(|e| e == ext) {
        return None;
    }
    let mut parts = stem.split('_');
    let (file_id, token, instant) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || file_id.is_empty() || !is_write_token(token) || !is_digits(instant)
    {
        return None;
    }
    Some(BaseName {
        file_id: file_id.to_string(),
        write_token: token.to_string(),
        instant: instant.to_string(),
        ext: ext.to_string(),
    })
}

/// Parse a log file name. CDC logs (a suffix after the write token) and archive logs are not
/// data logs and give `None` (spec §3.3).
pub fn parse_log_name(name: &str) -> Option<LogName> {
    let rest = name.strip_prefix('.')?;
    let (head, tail) = rest.split_once(".log.")?;
    let (file_id, instant) = head.rsplit_once('_')?;
    if file_id.is_empty() || file_id.contains('_') || !is_digits(instant) {
        return None;
    }
    let (version, token) = match tail.split_once('_') {
        Some((v, t)) => (v, t),
        None => (tail, ""),
    };
    if !is_digits(version) || (!token.is_empty() && !is_write_token(token)) {
        return None;
    }
    Some(LogName {
        file_id: file_id.to_string(),
        instant: instant.to_string(),
        version: version.parse().ok()?,
        write_token: token.to_string(),
    })
}

/// Classify a name found in a partition directory.
pub fn parse_data_name(name: &str, exts: &[String]) -> Option<DataName> {
    if name.starts_with(".hoodie_partition_metadata") || name.ends_with(".crc") {
        return None;
    }
    if let Some(b) = parse_base_name(name, exts) {
        return Some(DataName::Base(b));
    }
    parse_log_name(name).map(DataName::Log)
}

/// Format a base file name.
pub fn base_file_name(file_id: &str, write_token: &str, instant: &str, ext: &str) -> String {
    format!("{file_id}_{write_token}_{instant}.{ext}")
}

/// Format a log file name.
pub fn log_file_name(file_id: &str, instant: &str, version: u32, write_token: &str) -> String {
    format!(".{file_id}_{instant}.log.{version}_{write_token}")
}

/// Name of the partition metafile that marks a directory as a partition.
pub const PARTITION_METAFILE: &str = ".hoodie_partition_metadata";

/// One data file found on disk, kept compact: a table of a million files holds a million of
/// these. The file id, instant and write token are ranges of the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    /// Partition path relative to the table root (`""` for non-partitioned tables).
    pub partition: Arc<str>,
    name: Box<str>,
    file_id: (u8, u8),
    instant: (u8, u8),
    token: (u8, u8),
    /// Log version; 0 for a base file.
    version: u32,
    pub size: u64,
    mtime_secs: i64,
    mtime_nanos: u32,
    /// Permission bits of the file on disk.
    pub mode: u16,
}

impl DataFile {
    /// A data file from its name (None if the name is not a data file name of this table) and
    /// what the file system says about it.
    pub fn new(
        partition: Arc<str>,
        name: &str,
        exts: &[String],
        size: u64,
        mtime: SystemTime,
        mode: u32,
    ) -> Option<DataFile> {
        if name.len() > u8::MAX as usize {
            return None;
        }
        let kind = parse_data_name(name, exts)?;
        let (file_id, instant, token, version) = match &kind {
            DataName::Base(b) => (&b.file_id, &b.instant, &b.write_token, 0),
            DataName::Log(l) => (&l.file_id, &l.instant, &l.write_token, l.version.max(1)),
        };
        // Locate the parsed parts inside the name (they are substrings of it).
        let find = |needle: &str, from: usize| -> Option<(u8, u8)> {
            let at = name[from..].find(needle)? + from;
            Some((at as u8, (at + needle.len()) as u8))
        };
        let fid = find(file_id, 0)?;
        let (inst, tok) = if version == 0 {
            let tok = find(token, fid.1 as usize)?;
            (find(instant, tok.1 as usize)?, tok)
        } else {
            let inst = find(instant, fid.1 as usize)?;
            let tok = if token.is_empty() {
                (name.len() as u8, name.len() as u8)
            } else {
                find(token, inst.1 as usize)?
            };
            (inst, tok)
        };
        let (mtime_secs, mtime_nanos) = match mtime.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
            Err(e) => (-(e.duration().as_secs() as i64), 0),
        };
        Some(DataFile {
            partition,
            name: name.into(),
            file_id: fid,
            instant: inst,
            token: tok,
            version,
            size,
            mtime_secs,
            mtime_nanos,
            mode: (mode & 0o7777) as u16,
        })
    }

    /// File name inside the partition directory.
    pub fn name(&self) -> &str {
        &self.name
    }
    fn part(&self, r: (u8, u8)) -> &str {
        &self.name[r.0 as usize..r.1 as usize]
    }
    pub fn file_id(&self) -> &str {
        self.part(self.file_id)
    }
    /// The instant in the file name (base instant, or the log's name instant).
    pub fn instant(&self) -> &str {
        self.part(self.instant)
    }
    pub fn write_token(&self) -> &str {
        self.part(self.token)
    }
    pub fn is_base(&self) -> bool {
        self.version == 0
    }
    /// Log version (0 for base files).
    pub fn log_version(&self) -> u32 {
        self.version
    }
    pub fn mtime(&self) -> SystemTime {
        if self.mtime_secs >= 0 {
            SystemTime::UNIX_EPOCH
                + std::time::Duration::new(self.mtime_secs as u64, self.mtime_nanos)
        } else {
            SystemTime::UNIX_EPOCH - std::time::Duration::from_secs(self.mtime_secs.unsigned_abs())
        }
    }
    /// Path relative to the table root.
    pub fn rel_path(&self) -> String {
        if self.partition.is_empty() {
            self.name.to_string()
        } else {
            format!("{}/{}", self.partition, self.name)
        }
    }
}

/// The data files of every partition, as found on disk.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    pub partitions: BTreeMap<Arc<str>, Vec<DataFile>>,
}

impl Listing {
    pub fn files(&self) -> impl Iterator<Item = &DataFile> {
        self.partitions.values().flatten()
    }
}

/// How deep partition discovery descends (timestamp key generators write four levels; this is
/// generous and bounds a walk of a pathological tree).
const MAX_PARTITION_DEPTH: usize = 16;

/// Find every partition of the table: a directory is a partition iff it directly holds a
/// partition metafile; names starting with `.` are never entered; symbolic links are never
/// followed.
pub fn discover_partitions(cfg: &TableConfig) -> Result<Vec<String>> {
    let mut out = Vec::new();
    walk(&cfg.root, "", 0, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(dir: &Path, rel: &str, depth: usize, out: &mut Vec<String>) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if depth > 0 => {
            log::warn!("{}: cannot list, skipped: {e}", dir.display());
            return Ok(());
        }
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut is_partition = false;
    let mut subdirs = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_file() && name.starts_with(PARTITION_METAFILE) {
            is_partition = true;
        } else if ft.is_dir() && !name.starts_with('.') && depth < MAX_PARTITION_DEPTH {
            subdirs.push(name.to_string());
        }
    }
    if is_partition {
        out.push(rel.to_string());
    }
    for name in subdirs {
        let child_rel = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        walk(&dir.join(&name), &child_rel, depth + 1, out)?;
    }
    Ok(())
}

/// List the data files of one partition. Junk, metafiles, CDC logs, directories and symbolic
/// links are left out.
pub fn list_partition(cfg: &TableConfig, partition: &str) -> Result<Vec<DataFile>> {
    let dir = partition_dir(&cfg.root, partition);
    let entries = std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    let part: Arc<str> = Arc::from(partition);
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let Ok(ft) = entry.file_type() else { continue };
        if !ft.is_file() {
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if parse_data_name(name, &cfg.base_extensions).is_none() {
            continue;
        }
        let Ok(md) = entry.metadata() else { continue };
        use std::os::unix::fs::PermissionsExt;
        files.extend(DataFile::new(
            part.clone(),
            name,
            &cfg.base_extensions,
            md.len(),
            md.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            md.permissions().mode(),
        ));
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

/// List every partition of the table.
pub fn list_table(cfg: &TableConfig) -> Result<Listing> {
    let mut listing = Listing::default();
    for p in discover_partitions(cfg)? {
        let files = list_partition(cfg, &p)?;
        listing.partitions.insert(Arc::from(p.as_str()), files);
    }
    Ok(listing)
}

pub fn partition_dir(root: &Path, partition: &str) -> PathBuf {
    if partition.is_empty() {
        root.to_path_buf()
    } else {
        root.join(partition)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exts() -> Vec<String> {
        vec!["parquet".to_string()]
    }

    #[test]
    fn base_names() {
        let b = parse_base_name(
            "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_0-13-23_20250126040823628.parquet",
            &exts(),
        )
        .unwrap();
        assert_eq!(b.file_id, "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0");
        assert_eq!(b.write_token, "0-13-23");
        assert_eq!(b.instant, "20250126040823628");
        assert_eq!(
            base_file_name(&b.file_id, &b.write_token, &b.instant, &b.ext),
            "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_0-13-23_20250126040823628.parquet"
        );
        for bad in [
            "part-00000-abc.snappy.parquet",
            "a_b_c_d.parquet",
            "f_0-1-2_2024x.parquet",
            "f_0-1_20240101000000000.parquet",
            ".f_0-1-2_20240101000000000.parquet",
            "f_0-1-2_20240101000000000.orc",
            "_0-1-2_20240101000000000.parquet",
        ] {
            assert_eq!(parse_base_name(bad, &exts()), None, "{bad}");
        }
    }

    #[test]
    fn log_names() {
        let l = parse_log_name(".8aa68f7e-ab-0_20251220210125441.log.1_0-1047-3000").unwrap();
        assert_eq!(l.file_id, "8aa68f7e-ab-0");
        assert_eq!(l.instant, "20251220210125441");
        assert_eq!(l.version, 1);
        assert_eq!(l.write_token, "0-1047-3000");
        assert_eq!(
            log_file_name(&l.file_id, &l.instant, l.version, &l.write_token),
            ".8aa68f7e-ab-0_20251220210125441.log.1_0-1047-3000"
        );
        for bad in [
            ".f_20240101000000000.log.1_0-1-2-cdc",
            ".f_20240101000000000.log.1_0-1-2.cdc",
            ".commits_.archive.1_1-0-1",
            ".f_20240101000000000.log.x_0-1-2",
            "f_20240101000000000.log.1_0-1-2",
            ".hoodie_partition_metadata",
        ] {
            assert_eq!(parse_log_name(bad), None, "{bad}");
        }
        assert!(parse_data_name(".abc_0-1-2_20240101000000000.parquet.crc", &exts()).is_none());
    }

    #[test]
    fn compact_data_files() {
        let p: Arc<str> = Arc::from("city=x");
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 123);
        let b = DataFile::new(
            p.clone(),
            "f-1_0-1-2_20240101000000000.parquet",
            &exts(),
            10,
            t,
            0o644,
        )
        .unwrap();
        assert_eq!(
            (b.file_id(), b.write_token(), b.instant()),
            ("f-1", "0-1-2", "20240101000000000")
        );
        assert!(b.is_base());
        assert_eq!(b.mtime(), t);
        assert_eq!(b.rel_path(), "city=x/f-1_0-1-2_20240101000000000.parquet");
        let l = DataFile::new(
            p,
            ".f-1_20240101000000000.log.3_1-2-3",
            &exts(),
            10,
            t,
            0o644,
        )
        .unwrap();
        assert_eq!(
            (l.file_id(), l.write_token(), l.instant(), l.log_version()),
            ("f-1", "1-2-3", "20240101000000000", 3)
        );
        assert!(!l.is_base());
        // A file id that also occurs as the token's digits is still located by position.
        let odd = DataFile::new(
            Arc::from(""),
            "0-1-2_0-1-2_20240101000000000.parquet",
            &exts(),
            1,
            t,
            0,
        )
        .unwrap();
        assert_eq!((odd.file_id(), odd.write_token()), ("0-1-2", "0-1-2"));
        assert!(
            std::mem::size_of::<DataFile>() <= 64,
            "{}",
            std::mem::size_of::<DataFile>()
        );
    }
}
