//! A lake mounted as one file system, without a kernel (SEMANTICS.md §7.1.1): generated tables
//! copied into one in-memory store (hudifs's `MemStore`, and object_store's in-memory store
//! behind an `s3://bucket/warehouse` prefix), served by a `LakeFs` through the same trait the
//! FUSE adapter calls. Each table's `latest/` must equal a single mount of that table; tables
//! are read only when used; a broken table fails only itself; tables come and go.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

use hudifs::follow::Follower;
use hudifs::fs::{Entry, FsOptions, HudiFs, KernelNotifier, Kind, Served, ROOT};
use hudifs::lake::{LakeFs, LakeOptions};
use hudifs_core::table::TableType;
use hudifs_objstore::{ObjectStorage, StoreUrl};
use hudifs_storage::{MemStore, Storage, StorageWrite, TablePath};
use hudifs_testkit::generator::{rows, rows_with_ids, Clock, TableSpec, TableWriter};

const START: i64 = 1_767_225_600_000;

fn errno(e: hudifs_core::error::Error) -> i32 {
    hudifs::fuse::errno_of(&e)
}

fn p(s: &str) -> TablePath {
    TablePath::new(s).unwrap()
}

/// A generated table in memory, and its writer.
struct Gen {
    store: Arc<MemStore>,
    writer: TableWriter,
}

fn generate(name: &str, table_type: TableType, version: u32) -> Gen {
    let store = Arc::new(MemStore::new(name));
    let spec = TableSpec::new(name, table_type, version).partitioned_by(&["p"], true);
    let mut w = TableWriter::create_in(
        store.clone() as Arc<dyn StorageWrite>,
        spec,
        Clock::Logical { start_ms: START },
    )
    .unwrap();
    let a = w.partition_path(&["a"]).unwrap();
    let b = w.partition_path(&["b"]).unwrap();
    let mut t = w.begin(w.write_action()).unwrap();
    let f = t.insert(&a, &rows(1, 4)).unwrap();
    t.insert(&b, &rows(2, 3)).unwrap();
    t.complete().unwrap();
    let mut t = w.begin(w.write_action()).unwrap();
    // A log file on merge-on-read, a new base file version on copy-on-write.
    t.update(&a, &f, &rows_with_ids(3, &[1000])).unwrap();
    t.complete().unwrap();
    Gen { store, writer: w }
}

/// Copy every file of `from` under `prefix` of `to` (what a writer of that table would have
/// written there).
fn copy(from: &MemStore, to: &dyn StorageWrite, prefix: &str) {
    for (path, _) in from.files() {
        let bytes = from.read(&path).unwrap();
        to.put(&p(prefix).join_path(&path), &bytes).unwrap();
    }
}

/// Look `name` up in directory `parent`, through the operation the adapter calls.
fn lookup_in<S: Served>(fs: &Arc<S>, parent: u64, name: &str) -> hudifs_core::error::Result<Entry> {
    crate::now(|done| fs.clone().lookup(parent, OsStr::new(name), done))
}

fn lookup<S: Served>(fs: &Arc<S>, path: &[&str]) -> Result<u64, i32> {
    let mut ino = ROOT;
    for n in path {
        ino = lookup_in(fs, ino, n).map_err(errno)?.attr.ino;
    }
    Ok(ino)
}

/// The names of directory `ino` with their inode numbers and kinds (through a directory
/// handle, as the adapter reads them).
fn list<S: Served>(fs: &Arc<S>, ino: u64) -> Result<Vec<(String, u64, Kind)>, i32> {
    let d = crate::now(|done| fs.clone().opendir(ino, done)).map_err(errno)?;
    let out = crate::now(|done| fs.clone().readdir(ino, d.fh, done))
        .map_err(errno)?
        .iter()
        .map(|(n, e)| (n.to_string(), e.attr.ino, e.attr.kind))
        .collect();
    fs.releasedir(d.fh);
    Ok(out)
}

fn names<S: Served>(fs: &Arc<S>, path: &[&str]) -> Vec<String> {
    let ino = lookup(fs, path).unwrap();
    list(fs, ino).unwrap().into_iter().map(|e| e.0).collect()
}

fn read_all<S: Served>(fs: &Arc<S>, ino: u64) -> Vec<u8> {
    let fh = fs.open(ino).unwrap().fh;
    let mut got = Vec::new();
    loop {
        let chunk = crate::read_now(&**fs, fh, got.len() as u64, 65_536).unwrap();
        if chunk.is_empty() {
            break;
        }
        got.extend(chunk);
    }
    fs.release(fh);
    got
}

/// Every file below directory `ino`: path → bytes; and every inode number met.
fn contents<S: Served>(
    fs: &Arc<S>,
    ino: u64,
    prefix: &str,
    out: &mut BTreeMap<String, Vec<u8>>,
    inos: &mut Vec<u64>,
) {
    for (name, child, kind) in list(fs, ino).unwrap() {
        inos.push(child);
        let path = format!("{prefix}/{name}");
        // The listing's number is the one a lookup gives.
        assert_eq!(lookup_in(fs, ino, &name).unwrap().attr.ino, child);
        match kind {
            Kind::Dir => contents(fs, child, &path, out, inos),
            Kind::File => {
                out.insert(path, read_all(fs, child));
            }
        }
    }
}

/// The kernel invalidations a lake sends, recorded.
#[derive(Default)]
struct Recorder(std::sync::Mutex<Vec<(u64, String)>>);

impl KernelNotifier for Recorder {
    fn inval_entry(&self, parent: u64, name: &str) {
        self.0.lock().unwrap().push((parent, name.to_string()));
    }
    fn inval_inode(&self, _ino: u64) {}
}

impl Recorder {
    fn take(&self) -> BTreeSet<(u64, String)> {
        std::mem::take(&mut *self.0.lock().unwrap())
            .into_iter()
            .collect()
    }
}

fn lake_opts() -> LakeOptions {
    LakeOptions {
        depth: hudifs::lake::DEFAULT_DEPTH,
        poll_interval: Duration::from_millis(50),
        follow: false,
    }
}

/// The whole story on one lake store (`lake` is where the tables are copied). `pinned`: the
/// store pins open files to what they were (a local disk, `MemStore`), so a file deleted while
/// open keeps reading; on an object store it gives EIO, as on a single mount (SEMANTICS.md §9).
fn lake_story(lake: Arc<dyn StorageWrite>, pinned: bool) {
    let orders = generate("orders", TableType::MergeOnRead, 6);
    let mut trips = generate("trips", TableType::CopyOnWrite, 9);
    copy(&orders.store, &*lake, "sales/orders");
    copy(&trips.store, &*lake, "trips");
    // A table whose configuration hudifs refuses, three levels down.
    lake.put(
        &p("db/x/broken/.hoodie/hoodie.properties"),
        b"hoodie.table.name=broken\nhoodie.table.version=99\n",
    )
    .unwrap();
    // Not tables: a plain directory, a hidden one, and a table too deep.
    lake.put(&p("notes/readme.txt"), b"hello").unwrap();
    lake.put(&p(".trash/old/.hoodie/hoodie.properties"), b"x")
        .unwrap();
    lake.put(&p("a/b/c/d/e/.hoodie/hoodie.properties"), b"x")
        .unwrap();

    let store: Arc<dyn Storage> = lake.clone();
    let fs = Arc::new(LakeFs::open(store, FsOptions::default(), lake_opts()).unwrap());
    let kernel = Arc::new(Recorder::default());
    fs.set_notifier(kernel.clone());
    assert_eq!(
        fs.tables(),
        [p("db/x/broken"), p("sales/orders"), p("trips")]
    );

    // The lake's directories lead only to tables, and reading them reads no table.
    assert_eq!(names(&fs, &[]), ["db", "sales", "trips"]);
    assert_eq!(names(&fs, &["sales"]), ["orders"]);
    assert_eq!(names(&fs, &["db"]), ["x"]);
    assert_eq!(names(&fs, &["db", "x"]), ["broken"]);
    assert_eq!(lookup(&fs, &["notes"]), Err(libc::ENOENT));
    assert_eq!(lookup(&fs, &["a"]), Err(libc::ENOENT));
    for t in [&["trips"][..], &["sales", "orders"], &["db", "x", "broken"]] {
        let ino = lookup(&fs, t).unwrap();
        assert_eq!(fs.getattr(ino).unwrap().attr.kind, Kind::Dir);
    }
    assert_eq!(fs.loads(), 0, "nothing inside a table was asked for yet");

    // Inside a table: exactly what a single mount of it shows, same names and bytes.
    let mut all_inos = Vec::new();
    for (path, gen) in [
        (&["trips"][..], &trips),
        (&["sales", "orders"][..], &orders),
    ] {
        let single = Arc::new(HudiFs::with_store(gen.store.clone(), FsOptions::default()).unwrap());
        assert_eq!(names(&fs, path), names(&single, &[]), "{path:?}");
        let (mut want, mut got) = (BTreeMap::new(), BTreeMap::new());
        let mut ignored = Vec::new();
        contents(
            &single,
            lookup(&single, &["latest"]).unwrap(),
            "",
            &mut want,
            &mut ignored,
        );
        let mut latest = path.to_vec();
        latest.push("latest");
        let ino = lookup(&fs, &latest).unwrap();
        all_inos.push(ino);
        contents(&fs, ino, "", &mut got, &mut all_inos);
        assert!(!want.is_empty());
        assert_eq!(got, want, "{path:?}");
        for top in ["as_of", "incremental", "timeline", "merged", "cdc", "delta"] {
            let mut there = path.to_vec();
            there.push(top);
            assert_eq!(names(&fs, &there), names(&single, &[top]), "{path:?} {top}");
        }
        let mut ts = path.to_vec();
        ts.push("timeline");
        let first = names(&fs, &ts).into_iter().next().unwrap();
        ts.push(&first);
        let mut tl = ts.clone();
        tl.remove(0);
        if path.len() == 2 {
            tl.remove(0);
        }
        assert_eq!(
            read_all(&fs, lookup(&fs, &ts).unwrap()),
            read_all(&single, lookup(&single, &tl).unwrap())
        );
    }
    assert_eq!(fs.loads(), 2);
    let distinct: BTreeSet<u64> = all_inos.iter().copied().collect();
    assert_eq!(distinct.len(), all_inos.len(), "inode numbers collide");

    // The broken table fails itself only, with the errno its own mount would give.
    let want = errno(
        HudiFs::with_store(
            hudifs_storage::scoped(&(lake.clone() as Arc<dyn Storage>), &p("db/x/broken")).unwrap(),
            FsOptions::default(),
        )
        .err()
        .unwrap(),
    );
    assert_eq!(want, libc::EIO);
    assert_eq!(lookup(&fs, &["db", "x", "broken", "latest"]), Err(want));
    let broken = lookup(&fs, &["db", "x", "broken"]).unwrap();
    assert_eq!(list(&fs, broken).err(), Some(want));
    assert!(lookup(&fs, &["trips", "latest"]).is_ok());
    assert_eq!(fs.loads(), 2);

    // A commit to one table shows in its latest/ once its follower has seen it.
    let before = names(&fs, &["trips", "latest"]);
    let c = trips.writer.partition_path(&["c"]).unwrap();
    let mut t = trips.writer.begin(trips.writer.write_action()).unwrap();
    t.insert(&c, &rows(9, 2)).unwrap();
    t.complete().unwrap();
    copy(&trips.store, &*lake, "trips");
    let live = fs.loaded_table(&p("trips")).unwrap();
    let inv = Follower::new()
        .poll_once(&live, Duration::ZERO)
        .unwrap()
        .expect("a change");
    live.switched(&inv);
    let after = names(&fs, &["trips", "latest"]);
    assert_eq!(after.len(), before.len() + 1, "{before:?} -> {after:?}");
    assert!(after.contains(&c), "{after:?}");

    // A table created after the mount appears; a dropped one disappears, but a file opened
    // before keeps reading.
    let kept_file = {
        let dir = lookup(&fs, &["trips", "latest", &c]).unwrap();
        let (name, ino, _) = list(&fs, dir).unwrap().remove(0);
        (name, ino, fs.open(ino).unwrap().fh)
    };
    let fresh = generate("fresh", TableType::CopyOnWrite, 9);
    copy(&fresh.store, &*lake, "sales/fresh");
    lake.delete_dir_all(&p("trips")).unwrap();
    let change = fs.refresh().unwrap();
    assert_eq!(change.came, [p("sales/fresh")]);
    assert_eq!(change.gone, [p("trips")]);
    assert_eq!(names(&fs, &[]), ["db", "sales"]);
    assert_eq!(names(&fs, &["sales"]), ["fresh", "orders"]);
    assert_eq!(lookup(&fs, &["trips"]), Err(libc::ENOENT));
    // The kernel is told to forget the name that left.
    assert_eq!(kernel.take(), BTreeSet::from([(ROOT, "trips".to_string())]));
    let read = crate::read_now(&*fs, kept_file.2, 0, 1 << 20);
    let bytes = read.as_ref().cloned().unwrap_or_default();
    if pinned {
        read.unwrap();
        assert!(
            !bytes.is_empty(),
            "{} reads after its table left",
            kept_file.0
        );
    } else {
        assert_eq!(
            read.map_err(errno),
            Err(libc::EIO),
            "as on a single store mount"
        );
    }
    assert!(fs.getattr(kept_file.1).is_ok(), "fstat of an open file");
    fs.release(kept_file.2);
    assert_eq!(fs.loads(), 2, "the new table is not read before it is used");
    let single = Arc::new(HudiFs::with_store(fresh.store.clone(), FsOptions::default()).unwrap());
    assert_eq!(
        names(&fs, &["sales", "fresh", "latest"]),
        names(&single, &["latest"])
    );
    assert_eq!(fs.loads(), 3);
    // The whole branch of a dropped table goes when its last table does.
    lake.delete_dir_all(&p("db")).unwrap();
    let change = fs.refresh().unwrap();
    assert_eq!(change.dirs_gone, [p("db"), p("db/x")]);
    let (db, x) = (lookup(&fs, &["db"]), lookup(&fs, &["db", "x"]));
    assert_eq!((db, x), (Err(libc::ENOENT), Err(libc::ENOENT)));
    let forgotten: BTreeSet<String> = kernel.take().into_iter().map(|(_, n)| n).collect();
    assert_eq!(
        forgotten,
        BTreeSet::from(["broken", "db", "x"].map(String::from))
    );
    assert_eq!(names(&fs, &[]), ["sales"]);
}

#[test]
fn a_lake_in_memory() {
    lake_story(Arc::new(MemStore::new("lake")), true);
}

#[test]
fn a_lake_under_an_object_store_prefix() {
    let url = StoreUrl::parse("s3://bucket/warehouse").unwrap();
    lake_story(Arc::new(ObjectStorage::in_memory(url).unwrap()), false);
}

#[test]
fn an_unlistable_root_is_an_error_and_an_empty_lake_is_empty() {
    let s = MemStore::new("lake");
    let fs = Arc::new(LakeFs::open(Arc::new(s), FsOptions::default(), lake_opts()).unwrap());
    assert!(fs.tables().is_empty());
    assert!(names(&fs, &[]).is_empty());
}
