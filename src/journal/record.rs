//! The records of the restart journal, typed, and their one codec.
//!
//! A record is `[tag u8][length u32 LE][payload]` in the log (`memlog.rs`); this file says what
//! each tag means and how its payload reads. Adding a kind of record touches this file and the
//! owner that replays it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use hudifs_core::instant_time::InstantTime;
use hudifs_core::listing::DataFile;
use hudifs_core::viewkey::{ViewKey, ViewName};

/// One record of the journal.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// An interned view (the next view id): `fs/inode.rs`.
    View(ViewName),
    /// An interned directory path: `fs/inode.rs`.
    Dir(Arc<str>),
    /// An interned `timeline/` file name: `fs/inode.rs`.
    TimelineName(Arc<str>),
    /// Table files registered, in id order: a partition and its new files (`fs/partitions.rs`).
    Files(FilesRecord),
    /// A merged slice id handed out, with the partition and name it was handed out for
    /// (`fs/merged.rs`).
    MergedSlice { partition: Arc<str>, name: Arc<str> },
    /// A passthrough handle opened (`fuse/passthrough.rs`).
    PassOpen(PassOpen),
    /// A passthrough handle released (`fuse/passthrough.rs`).
    PassRelease { fh: u64 },
    /// The highest handle number handed out so far is at least this (`fs/handles.rs`).
    Handles(u64),
    /// The table's configuration (`hoodie.properties`) as the keeper read it: the first daemon
    /// uses it instead of reading the file again (`daemon/keeper.rs`, `daemon/takeover.rs`).
    TableConfig(BTreeMap<String, String>),
}

/// A passthrough open: the handle, its inode and the backing file's id in the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PassOpen {
    pub fh: u64,
    pub ino: u64,
    pub backing_id: u32,
}

/// The files of one partition registered together.
#[derive(Debug, Clone, PartialEq)]
pub struct FilesRecord {
    pub partition: Arc<str>,
    pub files: Vec<FileEntry>,
}

/// One registered file: its name and, once stated, what the file system said of it.
#[derive(Debug, Clone, PartialEq)]
pub struct FileEntry {
    pub name: Box<str>,
    /// Size, time and permission bits; `None` for a file listed by name, not stated yet.
    pub stat: Option<(u64, SystemTime, u16)>,
}

impl FilesRecord {
    /// The record of `files` (of one partition, the first's).
    pub fn of(files: &[DataFile]) -> FilesRecord {
        FilesRecord {
            partition: files
                .first()
                .map_or_else(|| Arc::from(""), |f| f.partition.clone()),
            files: files
                .iter()
                .map(|f| FileEntry {
                    name: f.name().into(),
                    stat: f.is_stated().then(|| (f.size(), f.mtime(), f.mode())),
                })
                .collect(),
        }
    }

    /// The files again, named as a table with base file extensions `exts` names them (None: a
    /// name that is no data file name of it).
    pub fn data_files(&self, exts: &[String]) -> Option<Vec<DataFile>> {
        let p = &self.partition;
        self.files
            .iter()
            .map(|e| match e.stat {
                None => DataFile::unstatted(p.clone(), &e.name, exts),
                Some((size, mtime, mode)) => {
                    DataFile::new(p.clone(), &e.name, exts, size, mtime, mode as u32)
                }
            })
            .collect()
    }
}

/// The tags of the records (1 was a record never written; 11 is the log's checkpoint).
mod tag {
    pub const VIEW: u8 = 2;
    pub const DIR: u8 = 3;
    pub const TIMELINE_NAME: u8 = 4;
    pub const FILES: u8 = 5;
    pub const MERGED_SLICE: u8 = 6;
    pub const PASS_OPEN: u8 = 7;
    pub const PASS_RELEASE: u8 = 8;
    pub const HANDLES: u8 = 9;
    pub const TABLE_CONFIG: u8 = 10;
}

/// Whether the log knows `t` as a record's tag.
pub fn is_tag(t: u8) -> bool {
    (tag::VIEW..=tag::TABLE_CONFIG).contains(&t)
}

/// Whether records of tag `t` are passthrough opens or releases (the ones compaction drops).
pub fn is_passthrough(t: u8) -> bool {
    matches!(t, tag::PASS_OPEN | tag::PASS_RELEASE)
}

/// The size a `Files` record gives a file not stated yet.
const UNSTATTED_SIZE: u64 = u64::MAX;

impl Record {
    /// The record's tag in the log.
    pub fn tag(&self) -> u8 {
        match self {
            Record::View(_) => tag::VIEW,
            Record::Dir(_) => tag::DIR,
            Record::TimelineName(_) => tag::TIMELINE_NAME,
            Record::Files(_) => tag::FILES,
            Record::MergedSlice { .. } => tag::MERGED_SLICE,
            Record::PassOpen(_) => tag::PASS_OPEN,
            Record::PassRelease { .. } => tag::PASS_RELEASE,
            Record::Handles(_) => tag::HANDLES,
            Record::TableConfig(_) => tag::TABLE_CONFIG,
        }
    }

    /// The kind of record, for messages.
    pub fn kind(tag: u8) -> &'static str {
        match tag {
            tag::VIEW => "View",
            tag::DIR => "Dir",
            tag::TIMELINE_NAME => "TimelineName",
            tag::FILES => "Files",
            tag::MERGED_SLICE => "MergedSlice",
            tag::PASS_OPEN => "PassOpen",
            tag::PASS_RELEASE => "PassRelease",
            tag::HANDLES => "Handles",
            tag::TABLE_CONFIG => "TableConfig",
            _ => "unknown",
        }
    }

    /// The record's payload.
    pub fn payload(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Record::View(v) => encode_view(&mut out, v),
            Record::Dir(s) | Record::TimelineName(s) => out.extend_from_slice(s.as_bytes()),
            Record::Files(f) => encode_files(&mut out, f),
            Record::MergedSlice { partition, name } => {
                put_str(&mut out, partition);
                put_str(&mut out, name);
            }
            Record::PassOpen(o) => {
                for w in [o.fh, o.ino, o.backing_id as u64] {
                    out.extend_from_slice(&w.to_le_bytes());
                }
            }
            Record::PassRelease { fh } => out.extend_from_slice(&fh.to_le_bytes()),
            Record::Handles(n) => out.extend_from_slice(&n.to_le_bytes()),
            Record::TableConfig(props) => {
                out.extend_from_slice(&(props.len() as u32).to_le_bytes());
                for (k, v) in props {
                    put_str(&mut out, k);
                    put_str(&mut out, v);
                }
            }
        }
        out
    }

    /// The record of tag `tag` with `payload`; None when the payload does not read as one.
    pub fn decode(tag: u8, payload: &[u8]) -> Option<Record> {
        let mut f = Fields(payload);
        let text = || std::str::from_utf8(payload).ok().map(Arc::<str>::from);
        Some(match tag {
            tag::VIEW => Record::View(decode_view(&mut f)?),
            tag::DIR => Record::Dir(text()?),
            tag::TIMELINE_NAME => Record::TimelineName(text()?),
            tag::FILES => Record::Files(decode_files(&mut f, payload.len())?),
            tag::MERGED_SLICE => Record::MergedSlice {
                partition: f.str()?.into(),
                name: f.str()?.into(),
            },
            tag::PASS_OPEN => Record::PassOpen(PassOpen {
                fh: f.u64()?,
                ino: f.u64()?,
                backing_id: f.u64()? as u32,
            }),
            tag::PASS_RELEASE => Record::PassRelease { fh: f.u64()? },
            tag::HANDLES => Record::Handles(f.u64()?),
            tag::TABLE_CONFIG => {
                let n = f.u32()?;
                let mut props = BTreeMap::new();
                for _ in 0..n {
                    let k = f.str()?.to_string();
                    props.insert(k, f.str()?.to_string());
                }
                Record::TableConfig(props)
            }
            _ => return None,
        })
    }
}

/// A view name: flags, then its key.
fn encode_view(out: &mut Vec<u8>, v: &ViewName) {
    out.push(
        u8::from(v.merged)
            | (u8::from(v.cdc) << 1)
            | (u8::from(v.delta) << 2)
            | (u8::from(v.iceberg) << 3),
    );
    match &v.key {
        ViewKey::Latest => out.push(0),
        ViewKey::AsOf(t) => {
            out.push(1);
            put_str(out, t.as_str());
        }
        ViewKey::Incremental { start, end } => {
            out.push(2);
            for side in [start, end] {
                match side {
                    None => out.push(0),
                    Some(t) => {
                        out.push(1);
                        put_str(out, t.as_str());
                    }
                }
            }
        }
    }
}

fn decode_view(f: &mut Fields<'_>) -> Option<ViewName> {
    let flags = f.u8()?;
    let time = |f: &mut Fields<'_>| InstantTime::parse(f.str()?);
    let key = match f.u8()? {
        0 => ViewKey::Latest,
        1 => ViewKey::AsOf(time(f)?),
        2 => {
            let side = |f: &mut Fields<'_>| -> Option<Option<InstantTime>> {
                match f.u8()? {
                    0 => Some(None),
                    _ => Some(Some(time(f)?)),
                }
            };
            let start = side(f)?;
            let end = side(f)?;
            ViewKey::Incremental { start, end }
        }
        _ => return None,
    };
    Some(ViewName {
        key,
        merged: flags & 1 != 0,
        cdc: flags & 2 != 0,
        delta: flags & 4 != 0,
        iceberg: flags & 8 != 0,
    })
}

/// Files of one partition: the partition, then per file its name, size, time and mode (size
/// [`UNSTATTED_SIZE`] for a file not stated yet).
fn encode_files(out: &mut Vec<u8>, files: &FilesRecord) {
    out.reserve(16 + files.files.len() * 96);
    put_str(out, &files.partition);
    out.extend_from_slice(&(files.files.len() as u32).to_le_bytes());
    for e in &files.files {
        put_str(out, &e.name);
        let (size, mtime, mode) = e
            .stat
            .unwrap_or((UNSTATTED_SIZE, SystemTime::UNIX_EPOCH, 0));
        out.extend_from_slice(&size.to_le_bytes());
        put_time(out, mtime);
        out.extend_from_slice(&mode.to_le_bytes());
    }
}

fn decode_files(f: &mut Fields<'_>, len: usize) -> Option<FilesRecord> {
    let partition: Arc<str> = Arc::from(f.str()?);
    let n = f.u32()? as usize;
    let mut files = Vec::with_capacity(n.min(len / 16));
    for _ in 0..n {
        let name = f.str()?.into();
        let size = f.u64()?;
        let mtime = get_time(f)?;
        let mode = f.u16()?;
        let stat = (size != UNSTATTED_SIZE).then_some((size, mtime, mode));
        files.push(FileEntry { name, stat });
    }
    Some(FilesRecord { partition, files })
}

/// A payload being read, field by field; every getter is `None` past the end.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    /// A string with a u32 length.
    fn str(&mut self) -> Option<&'a str> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }
}

/// Append a string with a u32 length.
fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A time as seconds and nanoseconds since the epoch (before it: negative seconds).
fn put_time(out: &mut Vec<u8>, t: SystemTime) {
    let (secs, nanos) = match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            let (s, n) = (d.as_secs() as i64, d.subsec_nanos());
            if n == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - n)
            }
        }
    };
    out.extend_from_slice(&secs.to_le_bytes());
    out.extend_from_slice(&nanos.to_le_bytes());
}

fn get_time(f: &mut Fields<'_>) -> Option<SystemTime> {
    let secs = f.i64()?;
    let nanos = f.u32()?;
    if nanos >= 1_000_000_000 {
        return None;
    }
    if secs >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(Duration::new(secs as u64, nanos))
    } else {
        SystemTime::UNIX_EPOCH
            .checked_sub(Duration::from_secs(secs.unsigned_abs()))?
            .checked_add(Duration::from_nanos(nanos as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(r: Record) {
        assert_eq!(
            Record::decode(r.tag(), &r.payload()),
            Some(r.clone()),
            "{r:?}"
        );
        // A payload cut short never reads as a record of its kind.
        let p = r.payload();
        if !p.is_empty() && !matches!(r, Record::Dir(_) | Record::TimelineName(_)) {
            assert_eq!(Record::decode(r.tag(), &p[..p.len() - 1]), None, "{r:?}");
        }
    }

    #[test]
    fn every_kind_round_trips() {
        let t = |s: &str| InstantTime::parse(s).unwrap();
        let views = [
            ViewKey::Latest,
            ViewKey::AsOf(t("20240101000000000")),
            ViewKey::Incremental {
                start: None,
                end: Some(t("20240101000000000")),
            },
            ViewKey::Incremental {
                start: Some(t("20230101000000000")),
                end: None,
            },
        ];
        for (i, key) in views.into_iter().enumerate() {
            round_trip(Record::View(ViewName {
                key,
                merged: i % 2 == 0,
                cdc: i == 3,
                delta: i == 1,
                iceberg: i == 2,
            }));
        }
        round_trip(Record::Dir("city=a/b".into()));
        round_trip(Record::TimelineName("x.commit".into()));
        round_trip(Record::MergedSlice {
            partition: "p".into(),
            name: "n.parquet".into(),
        });
        round_trip(Record::PassOpen(PassOpen {
            fh: 1,
            ino: 2,
            backing_id: 3,
        }));
        round_trip(Record::PassRelease { fh: 9 });
        round_trip(Record::Handles(1 << 40));
        let props: BTreeMap<String, String> = [("a.b", "1"), ("c", "")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        round_trip(Record::TableConfig(props));
        round_trip(Record::Files(FilesRecord {
            partition: "dt=1".into(),
            files: vec![
                FileEntry {
                    name: "a.parquet".into(),
                    stat: Some((10, SystemTime::UNIX_EPOCH + Duration::new(5, 7), 0o644)),
                },
                FileEntry {
                    name: "b.parquet".into(),
                    stat: None,
                },
            ],
        }));
        assert_eq!(Record::decode(tag::TABLE_CONFIG, &[1, 0, 0, 0]), None);
        assert_eq!(Record::decode(tag::VIEW, &[0, 9]), None);
        assert_eq!(Record::decode(tag::VIEW, &[0, 1, 200, 0, 0, 0]), None);
        assert_eq!(Record::decode(1, &[]), None);
    }

    #[test]
    fn times_round_trip() {
        for time in [
            SystemTime::UNIX_EPOCH,
            SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 123),
            SystemTime::UNIX_EPOCH - Duration::new(5, 1),
        ] {
            let mut out = Vec::new();
            put_time(&mut out, time);
            assert_eq!(get_time(&mut Fields(&out)), Some(time));
        }
    }

    #[test]
    fn files_come_back_as_the_data_files_they_were() {
        let exts = vec!["parquet".to_string()];
        let name = "5a0b2a38-0a4e-4c9b-9b3e-2b2b6f1d1c2e-0_0-7-8_20240101000000000.parquet";
        let stated = DataFile::new(
            "p".into(),
            name,
            &exts,
            42,
            SystemTime::UNIX_EPOCH + Duration::new(9, 0),
            0o640,
        )
        .unwrap();
        let rec = FilesRecord::of(std::slice::from_ref(&stated));
        let back = rec.data_files(&exts).unwrap();
        assert_eq!(back[0].name(), name);
        assert_eq!(
            (back[0].size(), back[0].mtime(), back[0].mode()),
            (42, stated.mtime(), 0o640)
        );
        let unstated = DataFile::unstatted("p".into(), name, &exts).unwrap();
        let back = FilesRecord::of(&[unstated]).data_files(&exts).unwrap();
        assert!(!back[0].is_stated());
    }
}
