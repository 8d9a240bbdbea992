//! [`DataFile`]: one data file found in a partition, kept compact.

use std::sync::Arc;
use std::time::SystemTime;

use super::names::data_name_spans;

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
        let spans = data_name_spans(name, exts)?;
        // A name is at most 255 bytes (checked above): every range fits a byte.
        let pair = |r: std::ops::Range<usize>| (r.start as u8, r.end as u8);
        let (fid, inst, tok) = (
            pair(spans.file_id),
            pair(spans.instant),
            pair(spans.write_token),
        );
        let version = if spans.log { spans.version.max(1) } else { 0 };
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
