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
//! it lives as long as the mount and no longer, and leaves nothing on disk. It starts with a
//! header page (a magic number and the offset where records start); records are
//! `[tag u8][length u32 LE][payload]`, each written with one `write`; a daemon killed in the
//! middle of one leaves a torn tail, which the next daemon cuts off (nothing was answered from
//! it: an id is recorded before the reply that carries it).
//!
//! Passthrough opens and releases come and go without end, while only the handles open now
//! matter: once enough of them accumulate, the journal is compacted in place. The live state
//! (every other record as it is, one open per handle still open) is appended as one
//! `Checkpoint` record, whose payload is itself a record stream; reading takes the records of
//! the last whole checkpoint followed by those after it. The append is the commit point (a torn
//! checkpoint is cut like any torn record, and the records before it still read the same); then
//! the header's start moves to the checkpoint and the pages before it are punched out of the
//! file, which frees their memory. A crash between any two of these steps leaves a journal that
//! reads the same.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
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
    /// A passthrough handle opened: handle, inode, backing id ([`pass_open`]).
    PassOpen = 7,
    /// A passthrough handle released: handle ([`pass_release`]).
    PassRelease = 8,
    /// The highest handle number handed out so far is at least this.
    Handles = 9,
    /// The table's configuration (`hoodie.properties`) as the keeper read it: the first daemon
    /// uses it instead of reading the file again.
    TableConfig = 10,
    /// The whole state as of here, a record stream: what came before it is superseded. Never
    /// returned by [`RestartJournal::records`].
    Checkpoint = 11,
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
            11 => Tag::Checkpoint,
            _ => return None,
        })
    }
}

/// The largest record the journal accepts (a partition of a few hundred thousand files).
const MAX_RECORD: usize = 256 << 20;

/// The header page: `[magic 8][version u32][0 u32][start u64]`, then zeros.
const HEADER: u64 = 4096;
const PAGE: u64 = 4096;
/// Its first byte is no tag: a daemon that predates the header reads no records, rather than
/// misreading them.
const MAGIC: &[u8; 8] = b"\0hudiRJ\x01";
const VERSION: u32 = 1;
const START_AT: u64 = 16;

/// Passthrough records appended since the last checkpoint that trigger a compaction, beyond 4
/// per handle still open (and beyond the size of the live state, so that compactions copy no
/// more than they free).
pub const COMPACT_AFTER: u64 = 65_536;

/// A `PassOpen` payload.
pub fn pass_open(fh: u64, ino: u64, backing_id: u32) -> Vec<u8> {
    [fh, ino, backing_id as u64]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect()
}

/// A `PassRelease` payload.
pub fn pass_release(fh: u64) -> Vec<u8> {
    fh.to_le_bytes().to_vec()
}

/// A passthrough handle still open after `records`: handle, inode, backing id, and the index
/// of its `PassOpen` record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenPassthrough {
    pub fh: u64,
    pub ino: u64,
    pub backing_id: u32,
    pub record: usize,
}

/// The passthrough handles open after `records` (a `PassOpen` not followed by a `PassRelease`
/// of its handle), in the order of their opens. The one reading of these two kinds of record:
/// replay (`fuse/passthrough.rs`) and compaction both use it.
pub fn open_passthrough(records: &[(Tag, Vec<u8>)]) -> Vec<OpenPassthrough> {
    let mut open: HashMap<u64, OpenPassthrough> = HashMap::new();
    for (i, (tag, p)) in records.iter().enumerate() {
        let mut f = Fields(p);
        match tag {
            Tag::PassOpen => {
                if let (Some(fh), Some(ino), Some(id)) = (f.u64(), f.u64(), f.u64()) {
                    let backing_id = id as u32;
                    let record = i;
                    open.insert(
                        fh,
                        OpenPassthrough {
                            fh,
                            ino,
                            backing_id,
                            record,
                        },
                    );
                }
            }
            Tag::PassRelease => {
                if let Some(fh) = f.u64() {
                    open.remove(&fh);
                }
            }
            _ => {}
        }
    }
    let mut out: Vec<OpenPassthrough> = open.into_values().collect();
    out.sort_by_key(|o| o.record);
    out
}

fn is_passthrough(tag: Tag) -> bool {
    matches!(tag, Tag::PassOpen | Tag::PassRelease)
}

fn encode(out: &mut Vec<u8>, tag: Tag, payload: &[u8]) {
    out.push(tag as u8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The records of `bytes` as far as they are whole: the records, where they end, and how many
/// passthrough records follow the last checkpoint. A checkpoint replaces what came before it.
fn parse(bytes: &[u8]) -> (Vec<(Tag, Vec<u8>)>, usize, u64) {
    let mut out = Vec::new();
    let mut pass = 0;
    let mut at = 0usize;
    while let Some(head) = bytes.get(at..at + 5) {
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let Some(tag) = Tag::of(head[0]) else {
            break;
        };
        if len > MAX_RECORD && tag != Tag::Checkpoint {
            break;
        }
        let Some(payload) = bytes.get(at + 5..at + 5 + len) else {
            break;
        };
        if tag == Tag::Checkpoint {
            let (inner, end, _) = parse(payload);
            if end < payload.len() {
                log::warn!("restart journal: a checkpoint does not read to its end");
            }
            out = inner;
            pass = 0;
        } else {
            pass += is_passthrough(tag) as u64;
            out.push((tag, payload.to_vec()));
        }
        at += 5 + len;
    }
    (out, at, pass)
}

/// The journal of one mount.
pub struct RestartJournal {
    inner: Mutex<Inner>,
}

struct Inner {
    file: File,
    /// Where records start: after the header, or at the last compaction's checkpoint (0: a
    /// journal of a keeper that predates the header, never compacted).
    start: u64,
    /// Passthrough records appended since the last checkpoint (as far as this process knows).
    pass_since: u64,
    /// Their bytes.
    pass_bytes_since: u64,
    /// Passthrough handles open (as far as this process knows).
    live: u64,
    /// The size of the live state at the last compaction or reading.
    live_bytes: u64,
    /// [`COMPACT_AFTER`], lower in tests.
    compact_after: u64,
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
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        let mut header = vec![0u8; HEADER as usize];
        header[..8].copy_from_slice(MAGIC);
        header[8..12].copy_from_slice(&VERSION.to_le_bytes());
        header[START_AT as usize..START_AT as usize + 8].copy_from_slice(&HEADER.to_le_bytes());
        file.write_all_at(&header, 0)?;
        Ok(RestartJournal::of(file, HEADER))
    }

    /// The journal passed down as descriptor `fd`.
    ///
    /// # Safety
    /// `fd` must be an open descriptor that nothing else in this process owns.
    pub unsafe fn from_raw_fd(fd: RawFd) -> RestartJournal {
        // SAFETY: the caller hands over ownership.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        // Read again by `records`, which a daemon calls before it appends.
        RestartJournal::of(file, 0)
    }

    fn of(file: File, start: u64) -> RestartJournal {
        RestartJournal {
            inner: Mutex::new(Inner {
                file,
                start,
                pass_since: 0,
                pass_bytes_since: 0,
                live: 0,
                live_bytes: 0,
                compact_after: COMPACT_AFTER,
            }),
        }
    }

    /// Compact after `n` passthrough records (beyond 4 per open handle) instead of
    /// [`COMPACT_AFTER`].
    #[doc(hidden)]
    pub fn set_compact_after(&self, n: u64) {
        self.lock().compact_after = n;
    }

    pub fn raw_fd(&self) -> RawFd {
        self.lock().file.as_raw_fd()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Append one record. A journal that cannot be written (memory exhausted) is logged: the
    /// mount goes on, and a restart after it would not know the newest ids.
    pub fn append(&self, tag: Tag, payload: &[u8]) {
        let mut rec = Vec::with_capacity(5 + payload.len());
        encode(&mut rec, tag, payload);
        let mut j = self.lock();
        if let Err(e) = j.append(&rec) {
            log::warn!("restart journal: cannot record {tag:?}: {e}");
            return;
        }
        match tag {
            Tag::PassOpen => j.live += 1,
            Tag::PassRelease => j.live = j.live.saturating_sub(1),
            _ => return,
        }
        j.pass_since += 1;
        j.pass_bytes_since += rec.len() as u64;
        if j.start != 0
            && j.pass_since > j.compact_after + 4 * j.live
            && j.pass_bytes_since >= j.live_bytes
        {
            if let Err(e) = j.compact() {
                log::warn!("restart journal: cannot compact: {e}");
                // Not tried again before as many records more.
                j.pass_since = 0;
                j.pass_bytes_since = 0;
            }
        }
    }

    /// Every record in order, as of the last checkpoint: the records of the checkpoint, then
    /// those after it. A torn last record is cut off the file.
    pub fn records(&self) -> std::io::Result<Vec<(Tag, Vec<u8>)>> {
        self.lock().read()
    }
}

impl Inner {
    /// Append whole record bytes at the end; a write that fails leaves nothing behind (a torn
    /// record would hide every record after it).
    fn append(&mut self, rec: &[u8]) -> std::io::Result<u64> {
        let end = self.file.seek(SeekFrom::End(0))?;
        if let Err(e) = self.file.write_all(rec) {
            let _ = self.file.set_len(end);
            return Err(e);
        }
        Ok(end)
    }

    /// Read the header and the records (see [`RestartJournal::records`]); cut a torn tail.
    fn read(&mut self) -> std::io::Result<Vec<(Tag, Vec<u8>)>> {
        let size = self.file.metadata()?.len();
        let mut head = [0u8; 24];
        self.start = if size >= HEADER
            && self.file.read_exact_at(&mut head, 0).is_ok()
            && head[..8] == *MAGIC
        {
            let start = u64::from_le_bytes(head[16..24].try_into().expect("8 bytes"));
            if !(HEADER..=size).contains(&start) {
                return Err(std::io::Error::other(format!(
                    "the journal's records start at {start}, outside its {size} bytes"
                )));
            }
            start
        } else {
            0
        };
        let mut bytes = vec![0u8; (size - self.start) as usize];
        self.file.read_exact_at(&mut bytes, self.start)?;
        let (records, at, pass) = parse(&bytes);
        if at < bytes.len() {
            log::info!(
                "restart journal: cut {} bytes of a record torn by the previous daemon",
                bytes.len() - at
            );
            self.file.set_len(self.start + at as u64)?;
        }
        let open = open_passthrough(&records);
        self.live = open.len() as u64;
        self.pass_since = pass;
        self.pass_bytes_since = 0;
        self.live_bytes = live_state(&records, &open).len() as u64;
        Ok(records)
    }

    /// Append the live state as a checkpoint, start the records there, free what came before.
    fn compact(&mut self) -> std::io::Result<()> {
        let before = self.file.metadata()?;
        let records = self.read()?;
        let open = open_passthrough(&records);
        let state = live_state(&records, &open);
        if state.len() > u32::MAX as usize {
            return Err(std::io::Error::other("the live state is over 4 GiB"));
        }
        let mut rec = Vec::with_capacity(5 + state.len());
        encode(&mut rec, Tag::Checkpoint, &state);
        // The commit point: a reader finds the checkpoint from the old start too.
        let at = self.append(&rec)?;
        self.file.write_all_at(&at.to_le_bytes(), START_AT)?;
        self.start = at;
        let freed = at / PAGE * PAGE;
        if freed > HEADER {
            // SAFETY: fallocate on a descriptor we hold; the range is inside the file.
            let rc = unsafe {
                libc::fallocate(
                    self.file.as_raw_fd(),
                    libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                    HEADER as libc::off_t,
                    (freed - HEADER) as libc::off_t,
                )
            };
            if rc != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        self.live = open.len() as u64;
        self.pass_since = 0;
        self.pass_bytes_since = 0;
        self.live_bytes = state.len() as u64;
        {
            use std::os::unix::fs::MetadataExt;
            log::info!(
                "restart journal: compacted {} records to {} KiB ({} passthrough handles open): \
                 {} KiB held before, {} KiB after",
                records.len(),
                state.len() >> 10,
                open.len(),
                before.blocks() / 2,
                self.file.metadata()?.blocks() / 2
            );
        }
        Ok(())
    }
}

/// The records that matter after `records`, as one stream: every record but passthrough ones
/// as it is, and the opens of the handles still `open`, in their order.
fn live_state(records: &[(Tag, Vec<u8>)], open: &[OpenPassthrough]) -> Vec<u8> {
    let mut keep = open.iter().map(|o| o.record).peekable();
    let mut out = Vec::new();
    for (i, (tag, p)) in records.iter().enumerate() {
        if is_passthrough(*tag) {
            if keep.peek() != Some(&i) {
                continue;
            }
            keep.next();
        }
        encode(&mut out, *tag, p);
    }
    out
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

    /// Bytes written at the end of the journal as they are (a torn record, garbage).
    fn raw_append(j: &RestartJournal, bytes: &[u8]) {
        let mut g = j.lock();
        g.file.seek(SeekFrom::End(0)).unwrap();
        g.file.write_all(bytes).unwrap();
    }

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
        raw_append(&j, &[Tag::Dir as u8, 9, 0, 0, 0, b'a']);
        assert_eq!(j.records().unwrap().len(), 3);
        // Cut, so the next record follows the last whole one.
        j.append(Tag::Dir, b"p2");
        let got = j.records().unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(got[3], (Tag::Dir, b"p2".to_vec()));
        // Garbage (an unknown tag) ends the journal rather than being misread.
        raw_append(&j, &[200, 0, 0, 0, 0]);
        assert_eq!(j.records().unwrap().len(), 4);
    }

    /// What replay makes of `records`: the other records in order, the passthrough handles open.
    type Replayed = (Vec<(Tag, Vec<u8>)>, BTreeMap<u64, (u64, u32)>);

    fn replayed(records: &[(Tag, Vec<u8>)]) -> Replayed {
        let other = records
            .iter()
            .filter(|(t, _)| !is_passthrough(*t))
            .cloned()
            .collect();
        let open = open_passthrough(records)
            .into_iter()
            .map(|o| (o.fh, (o.ino, o.backing_id)))
            .collect();
        (other, open)
    }

    /// The journal as another process reads it (the daemon that takes over).
    fn reopened(j: &RestartJournal) -> RestartJournal {
        // SAFETY: dup of a descriptor we hold; the result is checked and owned by the journal.
        let fd = unsafe { libc::dup(j.raw_fd()) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor nothing else owns.
        unsafe { RestartJournal::from_raw_fd(fd) }
    }

    fn start(j: &RestartJournal) -> u64 {
        j.lock().start
    }

    #[test]
    fn records_survive_checkpoints() {
        let j = RestartJournal::create().unwrap();
        j.set_compact_after(10);
        j.append(Tag::TableConfig, b"props");
        let mut all = vec![(Tag::TableConfig, b"props".to_vec())];
        let mut push = |tag: Tag, p: Vec<u8>| {
            j.append(tag, &p);
            all.push((tag, p));
        };
        for fh in 0..100u64 {
            push(Tag::PassOpen, pass_open(fh, 1000 + fh % 7, (fh % 7) as u32));
            if fh % 10 == 3 {
                push(Tag::Dir, format!("d{fh}").into_bytes());
            }
            // Every third handle stays open.
            if fh % 3 != 0 {
                push(Tag::PassRelease, pass_release(fh));
            }
        }
        assert!(start(&j) > HEADER, "compacted");
        let got = j.records().unwrap();
        assert_eq!(replayed(&got), replayed(&all));
        assert_eq!(open_passthrough(&got).len(), 34);
        assert!(got.len() < all.len());
        assert_eq!(replayed(&reopened(&j).records().unwrap()), replayed(&all));
        // Appends after a reading go on from the checkpoint.
        j.append(Tag::PassRelease, &pass_release(0));
        all.push((Tag::PassRelease, pass_release(0)));
        assert_eq!(replayed(&reopened(&j).records().unwrap()), replayed(&all));
    }

    #[test]
    fn a_torn_checkpoint_falls_back_to_the_records_before_it() {
        let j = RestartJournal::create().unwrap();
        j.append(Tag::Dir, b"p1");
        j.append(Tag::PassOpen, &pass_open(1, 2, 3));
        j.append(Tag::PassOpen, &pass_open(2, 2, 3));
        j.append(Tag::PassRelease, &pass_release(1));
        let before = j.records().unwrap();
        // A checkpoint whose write stopped halfway.
        let mut state = Vec::new();
        encode(&mut state, Tag::Dir, b"p1");
        encode(&mut state, Tag::PassOpen, &pass_open(2, 2, 3));
        let mut rec = Vec::new();
        encode(&mut rec, Tag::Checkpoint, &state);
        raw_append(&j, &rec[..rec.len() - 4]);
        assert_eq!(reopened(&j).records().unwrap(), before);
        // Cut: the next record follows the last whole one.
        j.append(Tag::Dir, b"p2");
        let got = j.records().unwrap();
        assert_eq!(got.len(), 5);
        assert_eq!(got[4], (Tag::Dir, b"p2".to_vec()));
    }

    #[test]
    fn a_checkpoint_the_header_does_not_point_at_yet_is_read() {
        let j = RestartJournal::create().unwrap();
        j.append(Tag::Dir, b"p1");
        j.append(Tag::Dir, b"gone");
        j.append(Tag::PassOpen, &pass_open(1, 2, 3));
        // The daemon died after appending the checkpoint, before moving the start to it. (This
        // checkpoint leaves out a record to show that what precedes it is superseded.)
        let mut state = Vec::new();
        encode(&mut state, Tag::Dir, b"p1");
        encode(&mut state, Tag::PassOpen, &pass_open(1, 2, 3));
        let mut rec = Vec::new();
        encode(&mut rec, Tag::Checkpoint, &state);
        raw_append(&j, &rec);
        j.append(Tag::PassRelease, &pass_release(1));
        j.append(Tag::Dir, b"p3");
        assert_eq!(start(&j), HEADER);
        let want = vec![
            (Tag::Dir, b"p1".to_vec()),
            (Tag::PassOpen, pass_open(1, 2, 3)),
            (Tag::PassRelease, pass_release(1)),
            (Tag::Dir, b"p3".to_vec()),
        ];
        assert_eq!(reopened(&j).records().unwrap(), want);
        // The last checkpoint counts: another one after it, pointed at this time.
        j.set_compact_after(0);
        j.append(Tag::PassOpen, &pass_open(5, 6, 7));
        for _ in 0..20 {
            if start(&j) > HEADER {
                break;
            }
            // Releases of no handle: dropped by the compaction they bring about.
            j.append(Tag::PassRelease, &pass_release(99));
        }
        assert!(start(&j) > HEADER);
        assert_eq!(
            reopened(&j).records().unwrap(),
            vec![
                (Tag::Dir, b"p1".to_vec()),
                (Tag::Dir, b"p3".to_vec()),
                (Tag::PassOpen, pass_open(5, 6, 7)),
            ]
        );
    }

    #[test]
    fn compaction_frees_the_memory_of_what_it_dropped() {
        let held = |j: &RestartJournal| {
            use std::os::unix::fs::MetadataExt;
            let md = j.lock().file.metadata().unwrap();
            (md.len(), md.blocks() * 512)
        };
        let n = 200_000u64;
        let mut sizes = Vec::new();
        for compact_after in [u64::MAX / 8, COMPACT_AFTER] {
            let j = RestartJournal::create().unwrap();
            j.set_compact_after(compact_after);
            j.append(Tag::Files, &[7u8; 10_000]);
            for fh in 0..3 {
                j.append(Tag::PassOpen, &pass_open(fh, 10 + fh, fh as u32));
            }
            for fh in 3..n {
                j.append(Tag::PassOpen, &pass_open(fh, 10, 0));
                j.append(Tag::PassRelease, &pass_release(fh));
            }
            let got = reopened(&j).records().unwrap();
            let (other, open) = replayed(&got);
            assert_eq!((other.len(), open.len()), (1, 3));
            if compact_after == COMPACT_AFTER {
                assert!(
                    got.len() < (COMPACT_AFTER as usize + 20) * 2,
                    "{}",
                    got.len()
                );
            } else {
                assert_eq!(got.len(), 4 + 2 * (n - 3) as usize);
            }
            assert_eq!(open_passthrough(&got).len(), 3);
            sizes.push(held(&j));
        }
        let ((len0, held0), (len1, held1)) = (sizes[0], sizes[1]);
        eprintln!(
            "{n} opens and releases: {len0} bytes held {held0} without compaction; {len1} bytes \
             held {held1} with it"
        );
        assert!(held0 >= len0 - 4096 && held0 > 8 << 20, "{held0}");
        // At most the records since the last compaction and the live state stay.
        assert!(held1 < (COMPACT_AFTER + 16) * 29 + (64 << 10), "{held1}");
        assert!(len1 > held1 * 3, "{len1} {held1}");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Open(u64, u64),
        Release(u64),
        Other(u8),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0..20u64, 0..5u64).prop_map(|(fh, ino)| Op::Open(fh, ino)),
            4 => (0..20u64).prop_map(Op::Release),
            1 => any::<u8>().prop_map(Op::Other),
        ]
    }

    proptest::proptest! {
        #[test]
        fn replay_after_compactions_matches_a_model(
            ops in proptest::collection::vec(op(), 0..300),
            compact_after in 0..20u64,
            read_at in 0..300usize,
        ) {
            let j = RestartJournal::create().unwrap();
            j.set_compact_after(compact_after);
            let mut other = Vec::new();
            let mut open = BTreeMap::new();
            for (i, op) in ops.iter().enumerate() {
                if i == read_at {
                    // A daemon that took over reads, then appends.
                    let got = j.records().unwrap();
                    proptest::prop_assert_eq!(replayed(&got), (other.clone(), open.clone()));
                }
                match *op {
                    Op::Open(fh, ino) => {
                        j.append(Tag::PassOpen, &pass_open(fh, ino, ino as u32 + 1));
                        open.insert(fh, (ino, ino as u32 + 1));
                    }
                    Op::Release(fh) => {
                        j.append(Tag::PassRelease, &pass_release(fh));
                        open.remove(&fh);
                    }
                    Op::Other(b) => {
                        j.append(Tag::Dir, &[b]);
                        other.push((Tag::Dir, vec![b]));
                    }
                }
            }
            let got = reopened(&j).records().unwrap();
            proptest::prop_assert_eq!(replayed(&got), (other, open));
        }
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
