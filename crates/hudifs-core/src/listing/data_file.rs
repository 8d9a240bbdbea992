//! [`DataFile`]: one data file found in a partition, kept compact.
//!
//! A table of a million files holds a million of these, so a data file is one allocation: a
//! reference count, the fixed fields ([`DataFileFields`]) and the name's bytes right after them, behind
//! a thin pointer. Cloning shares it, like an `Arc` (a listing and the mount's file registry
//! hold the same file). A separate `Arc` around a struct with a boxed name took two allocations
//! of 96 bytes for a name of 77 bytes; this takes one of 144.

use std::alloc::Layout;
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicI64, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use super::names::data_name_spans;

/// What a [`DataFile`] knows besides its name (reached through `Deref`). The file id, instant
/// and write token are ranges of the name.
#[repr(C)]
pub struct DataFileFields {
    refs: AtomicUsize,
    /// Partition path relative to the table root (`""` for non-partitioned tables).
    pub partition: Arc<str>,
    /// What the file system says of the file (size, time, permission bits): set at listing
    /// time, or later for a file listed by name only ([`DataFile::unstatted`]). Atomics, so
    /// that stating the file once fills every handle of it.
    size: AtomicU64,
    mtime_secs: AtomicI64,
    mtime_nanos: AtomicU32,
    /// Log version; 0 for a base file.
    version: u32,
    /// Permission bits of the file on disk, or [`UNSTATTED`] before the file was stated.
    mode: AtomicU16,
    file_id: (u8, u8),
    instant: (u8, u8),
    token: (u8, u8),
    name_len: u8,
}

/// `mode` of a file listed by name only, not yet stated (permission bits never set it).
const UNSTATTED: u16 = 0x8000;

/// Where the name's bytes start in the allocation: right after the last field, not after the
/// padding that rounds `DataFileFields` up to its alignment.
const NAME_AT: usize = std::mem::offset_of!(DataFileFields, name_len) + 1;

/// One data file found on disk: a shared, immutable, thin handle (see the module comment).
pub struct DataFile {
    ptr: NonNull<DataFileFields>,
}

// SAFETY: the allocation is immutable after construction except for the atomic reference count,
// and every field is Send + Sync; the handle is shared like an `Arc<DataFileFields>`.
unsafe impl Send for DataFile {}
unsafe impl Sync for DataFile {}

/// The allocation of a file whose name has `name_len` bytes: never less than a whole `DataFileFields`
/// (a reference to one is made), the name overlapping its trailing padding.
fn layout(name_len: usize) -> Layout {
    Layout::from_size_align(
        (NAME_AT + name_len).max(std::mem::size_of::<DataFileFields>()),
        std::mem::align_of::<DataFileFields>(),
    )
    .expect("a data file's layout")
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
        let f = Self::unstatted(partition, name, exts)?;
        f.set_meta(size, mtime, mode);
        Some(f)
    }

    /// A data file from its name alone (None if the name is not a data file name of this
    /// table): its size, time and mode read 0 until [`DataFile::set_meta`]. A local disk lists
    /// names without a `stat` per file; the mount states a partition's files when something
    /// asks for their attributes (SEMANTICS.md §2.6).
    pub fn unstatted(partition: Arc<str>, name: &str, exts: &[String]) -> Option<DataFile> {
        if name.len() > u8::MAX as usize {
            return None;
        }
        let spans = data_name_spans(name, exts)?;
        // A name is at most 255 bytes (checked above): every range fits a byte.
        let pair = |r: std::ops::Range<usize>| (r.start as u8, r.end as u8);
        let version = if spans.log { spans.version.max(1) } else { 0 };
        let fields = DataFileFields {
            refs: AtomicUsize::new(1),
            partition,
            size: AtomicU64::new(0),
            mtime_secs: AtomicI64::new(0),
            mtime_nanos: AtomicU32::new(0),
            version,
            mode: AtomicU16::new(UNSTATTED),
            file_id: pair(spans.file_id),
            instant: pair(spans.instant),
            token: pair(spans.write_token),
            name_len: name.len() as u8,
        };
        let layout = layout(name.len());
        // SAFETY: the layout is non-empty, at least a whole `DataFileFields` and aligned for it;
        // `DataFileFields` is written at its start, then the name's bytes at `NAME_AT` (over its
        // trailing padding, which is never read), inside the layout.
        unsafe {
            let raw = std::alloc::alloc(layout);
            let Some(ptr) = NonNull::new(raw.cast::<DataFileFields>()) else {
                std::alloc::handle_alloc_error(layout)
            };
            ptr.as_ptr().write(fields);
            std::ptr::copy_nonoverlapping(name.as_ptr(), raw.add(NAME_AT), name.len());
            Some(DataFile { ptr })
        }
    }

    /// Record what the file system says of the file. Every handle of it sees it; stating a
    /// file twice at once stores the same values twice.
    pub fn set_meta(&self, size: u64, mtime: SystemTime, mode: u32) {
        let (secs, nanos) = match mtime.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
            Err(e) => (-(e.duration().as_secs() as i64), 0),
        };
        self.size.store(size, Ordering::Relaxed);
        self.mtime_secs.store(secs, Ordering::Relaxed);
        self.mtime_nanos.store(nanos, Ordering::Relaxed);
        // Last, and released: whoever sees the mode sees the size and time.
        self.mode.store((mode & 0o7777) as u16, Ordering::Release);
    }

    /// Whether the file's size, time and mode are known (see [`DataFile::unstatted`]).
    pub fn is_stated(&self) -> bool {
        self.mode.load(Ordering::Acquire) & UNSTATTED == 0
    }

    /// Size in bytes (0 before the file is stated).
    pub fn size(&self) -> u64 {
        if self.is_stated() {
            self.size.load(Ordering::Relaxed)
        } else {
            0
        }
    }

    /// Permission bits of the file on disk (0 before the file is stated).
    pub fn mode(&self) -> u16 {
        let m = self.mode.load(Ordering::Acquire);
        if m & UNSTATTED == 0 {
            m
        } else {
            0
        }
    }

    /// File name inside the partition directory.
    pub fn name(&self) -> &str {
        // SAFETY: `name_len` bytes of a `&str` were copied at `NAME_AT` by `new`, and the
        // allocation lives as long as `self`.
        unsafe {
            let bytes = std::slice::from_raw_parts(
                self.ptr.as_ptr().cast::<u8>().add(NAME_AT),
                self.name_len as usize,
            );
            std::str::from_utf8_unchecked(bytes)
        }
    }
    fn part(&self, r: (u8, u8)) -> &str {
        &self.name()[r.0 as usize..r.1 as usize]
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
    /// Modification time (the epoch before the file is stated).
    pub fn mtime(&self) -> SystemTime {
        if !self.is_stated() {
            return SystemTime::UNIX_EPOCH;
        }
        let secs = self.mtime_secs.load(Ordering::Relaxed);
        let nanos = self.mtime_nanos.load(Ordering::Relaxed);
        if secs >= 0 {
            SystemTime::UNIX_EPOCH + std::time::Duration::new(secs as u64, nanos)
        } else {
            SystemTime::UNIX_EPOCH - std::time::Duration::from_secs(secs.unsigned_abs())
        }
    }
    /// Path relative to the table root.
    pub fn rel_path(&self) -> String {
        if self.partition.is_empty() {
            self.name().to_string()
        } else {
            format!("{}/{}", self.partition, self.name())
        }
    }
    /// Bytes of the one allocation behind a file named `name` (for tests of its size).
    pub fn allocation_size(name: &str) -> usize {
        layout(name.len()).size()
    }
}

impl Deref for DataFile {
    type Target = DataFileFields;
    fn deref(&self) -> &DataFileFields {
        // SAFETY: the allocation holds an initialised `DataFileFields` (and at least its size) for as
        // long as a handle lives; nothing but the atomic count changes after construction.
        unsafe { self.ptr.as_ref() }
    }
}

impl Clone for DataFile {
    fn clone(&self) -> DataFile {
        // As `Arc::clone`: a new handle needs no ordering with other accesses.
        if self.refs.fetch_add(1, Ordering::Relaxed) > isize::MAX as usize {
            std::process::abort();
        }
        DataFile { ptr: self.ptr }
    }
}

impl Drop for DataFile {
    fn drop(&mut self) {
        // As `Arc::drop`: the last handle frees, after every other handle's last use.
        if self.refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        let layout = layout(self.name_len as usize);
        // SAFETY: this was the last handle: nobody else reads the allocation; it was made by
        // `new` with this layout, and `DataFileFields` is dropped (its partition `Arc`) before it is freed.
        unsafe {
            std::ptr::drop_in_place(self.ptr.as_ptr());
            std::alloc::dealloc(self.ptr.as_ptr().cast::<u8>(), layout);
        }
    }
}

impl PartialEq for DataFile {
    fn eq(&self, other: &DataFile) -> bool {
        self.ptr == other.ptr
            || (self.partition == other.partition
                && self.name() == other.name()
                && self.file_id == other.file_id
                && self.instant == other.instant
                && self.token == other.token
                && self.version == other.version
                && self.is_stated() == other.is_stated()
                && self.size() == other.size()
                && self.mtime() == other.mtime()
                && self.mode() == other.mode())
    }
}

impl Eq for DataFile {}

impl fmt::Debug for DataFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataFile")
            .field("partition", &self.partition)
            .field("name", &self.name())
            .field("file_id", &self.file_id)
            .field("instant", &self.instant)
            .field("token", &self.token)
            .field("version", &self.version)
            .field("stated", &self.is_stated())
            .field("size", &self.size())
            .field("mtime", &self.mtime())
            .field("mode", &self.mode())
            .finish()
    }
}
