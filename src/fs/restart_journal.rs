//! What a serving daemon must hand on to the daemon that replaces it after a crash
//! (docs/SEMANTICS.md §7.11): the meaning of every inode number and handle the kernel may still
//! hold.
//!
//! Inode numbers are computed from ids that the mount hands out in order (`inode.rs`): interned
//! views, directories and timeline names, the registry of table files, the registry of merged
//! slices. The journal records each id as it is handed out, before the kernel hears of it; a
//! daemon that takes the mount over replays the records in order and so hands the same ids to
//! the same things. The kernel also holds passthrough backing files by number (`fuse.rs`), which
//! the journal records per handle.
//!
//! The journal is an anonymous memory file (`memfd`) owned by the keeper (`daemon/keeper.rs`):
//! it lives as long as the mount and no longer, and leaves nothing on disk. Records are
//! `[tag u8][length u32 LE][payload]`, each written with one `write`; a daemon killed in the
//! middle of one leaves a torn tail, which the next daemon cuts off (nothing was answered from
//! it: an id is recorded before the reply that carries it).

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// The kinds of record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Tag {
    /// How the kernel's INIT was answered: whether passthrough was granted (one byte).
    Init = 1,
    /// An interned view (the next view id).
    View = 2,
    /// An interned directory path.
    Dir = 3,
    /// An interned `timeline/` file name.
    TimelineName = 4,
    /// Table files registered, in id order: a partition and its new files.
    Files = 5,
    /// A merged slice id handed out (no payload: its meaning is not recorded, see `merged.rs`).
    MergedSlice = 6,
    /// A passthrough handle opened: handle, inode, backing id.
    PassOpen = 7,
    /// A passthrough handle released: handle.
    PassRelease = 8,
    /// The highest handle number handed out so far is at least this.
    Handles = 9,
    /// The table's configuration (`hoodie.properties`) as the keeper read it: the first daemon
    /// uses it instead of reading the file again.
    TableConfig = 10,
}

impl Tag {
    fn of(b: u8) -> Option<Tag> {
        Some(match b {
            1 => Tag::Init,
            2 => Tag::View,
            3 => Tag::Dir,
            4 => Tag::TimelineName,
            5 => Tag::Files,
            6 => Tag::MergedSlice,
            7 => Tag::PassOpen,
            8 => Tag::PassRelease,
            9 => Tag::Handles,
            10 => Tag::TableConfig,
            _ => return None,
        })
    }
}

/// The largest record the journal accepts (a partition of a few hundred thousand files).
const MAX_RECORD: usize = 256 << 20;

/// The journal of one mount.
pub struct RestartJournal {
    file: Mutex<File>,
}

impl std::fmt::Debug for RestartJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RestartJournal")
    }
}

impl RestartJournal {
    /// A new, empty journal (an anonymous memory file, inherited across `exec`).
    pub fn create() -> std::io::Result<RestartJournal> {
        // SAFETY: a valid C string and flags; the result is checked.
        let fd = unsafe { libc::memfd_create(c"hudifs-restart-journal".as_ptr(), 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: memfd_create returned a fresh descriptor we own.
        Ok(RestartJournal {
            file: Mutex::new(File::from(unsafe { OwnedFd::from_raw_fd(fd) })),
        })
    }

    /// The journal passed down as descriptor `fd`.
    ///
    /// # Safety
    /// `fd` must be an open descriptor that nothing else in this process owns.
    pub unsafe fn from_raw_fd(fd: RawFd) -> RestartJournal {
        RestartJournal {
            // SAFETY: the caller hands over ownership.
            file: Mutex::new(File::from(unsafe { OwnedFd::from_raw_fd(fd) })),
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        self.lock().as_raw_fd()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, File> {
        self.file.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append one record. A journal that cannot be written (memory exhausted) is logged: the
    /// mount goes on, and a restart after it would not know the newest ids.
    pub fn append(&self, tag: Tag, payload: &[u8]) {
        let mut rec = Vec::with_capacity(5 + payload.len());
        rec.push(tag as u8);
        rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        rec.extend_from_slice(payload);
        let mut f = self.lock();
        if let Err(e) = f.seek(SeekFrom::End(0)).and_then(|_| f.write_all(&rec)) {
            log::warn!("restart journal: cannot record {tag:?}: {e}");
        }
    }

    /// Every whole record, in order; a torn last record is cut off the file.
    pub fn records(&self) -> std::io::Result<Vec<(Tag, Vec<u8>)>> {
        let mut f = self.lock();
        f.seek(SeekFrom::Start(0))?;
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes)?;
        let mut out = Vec::new();
        let mut at = 0usize;
        while let Some(head) = bytes.get(at..at + 5) {
            let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
            let (Some(tag), true) = (Tag::of(head[0]), len <= MAX_RECORD) else {
                break;
            };
            let Some(payload) = bytes.get(at + 5..at + 5 + len) else {
                break;
            };
            out.push((tag, payload.to_vec()));
            at += 5 + len;
        }
        if at < bytes.len() {
            log::info!(
                "restart journal: cut {} bytes of a record torn by the previous daemon",
                bytes.len() - at
            );
            f.set_len(at as u64)?;
        }
        f.seek(SeekFrom::End(0))?;
        Ok(out)
    }
}

/// A payload being read, field by field; every getter is `None` past the end.
pub struct Fields<'a>(pub &'a [u8]);

impl<'a> Fields<'a> {
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    pub fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    pub fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes(self.take(2)?.try_into().ok()?))
    }
    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    pub fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    pub fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    /// A string with a u32 length.
    pub fn str(&mut self) -> Option<&'a str> {
        let n = self.u32()? as usize;
        std::str::from_utf8(self.take(n)?).ok()
    }
}

/// Append a string with a u32 length.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// Properties as a record: their number, then each key and value.
pub fn encode_properties(props: &BTreeMap<String, String>) -> Vec<u8> {
    let mut out = (props.len() as u32).to_le_bytes().to_vec();
    for (k, v) in props {
        put_str(&mut out, k);
        put_str(&mut out, v);
    }
    out
}

pub fn decode_properties(payload: &[u8]) -> Option<BTreeMap<String, String>> {
    let mut f = Fields(payload);
    let n = f.u32()?;
    let mut out = BTreeMap::new();
    for _ in 0..n {
        let k = f.str()?.to_string();
        out.insert(k, f.str()?.to_string());
    }
    Some(out)
}

/// A time as seconds and nanoseconds since the epoch (before it: negative seconds).
pub fn put_time(out: &mut Vec<u8>, t: SystemTime) {
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

pub fn get_time(f: &mut Fields<'_>) -> Option<SystemTime> {
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

    #[test]
    fn records_come_back_in_order_and_a_torn_tail_is_cut() {
        let j = RestartJournal::create().unwrap();
        j.append(Tag::Dir, b"p1");
        j.append(Tag::MergedSlice, b"");
        j.append(Tag::TimelineName, b"x.commit");
        let got = j.records().unwrap();
        assert_eq!(
            got,
            vec![
                (Tag::Dir, b"p1".to_vec()),
                (Tag::MergedSlice, vec![]),
                (Tag::TimelineName, b"x.commit".to_vec())
            ]
        );
        // A record whose payload never arrived (the daemon died inside its write).
        {
            let mut f = j.lock();
            f.write_all(&[Tag::Dir as u8, 9, 0, 0, 0, b'a']).unwrap();
        }
        assert_eq!(j.records().unwrap().len(), 3);
        // Cut, so the next record follows the last whole one.
        j.append(Tag::Dir, b"p2");
        let got = j.records().unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[3], (Tag::Dir, b"p2".to_vec()));
        // Garbage (an unknown tag) ends the journal rather than being misread.
        {
            let mut f = j.lock();
            f.write_all(&[200, 0, 0, 0, 0]).unwrap();
        }
        assert_eq!(j.records().unwrap().len(), 4);
    }

    #[test]
    fn properties_round_trip() {
        let props: BTreeMap<String, String> = [("a.b", "1"), ("c", "")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(decode_properties(&encode_properties(&props)), Some(props));
        assert_eq!(decode_properties(&[1, 0, 0, 0]), None);
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
}
