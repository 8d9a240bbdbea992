//! The seam over object_store's in-memory store, which keeps ETags and honours `If-Match`
//! like S3 does.

use std::sync::Arc;

use hudifs_storage::{Kind, Storage, StorageWrite, TablePath};
use object_store::memory::InMemory;
use object_store::ObjectStore;

use crate::{ObjectStorage, StoreUrl};

fn p(s: &str) -> TablePath {
    TablePath::new(s).unwrap()
}

fn store() -> (ObjectStorage, Arc<InMemory>) {
    let mem = Arc::new(InMemory::new());
    let url = StoreUrl::parse("s3://bucket/warehouse/trips").unwrap();
    let s = ObjectStorage::with_client(url, mem.clone() as Arc<dyn ObjectStore>).unwrap();
    (s, mem)
}

#[test]
fn write_list_stat_read() {
    let (s, _) = store();
    s.put(&p(".hoodie/hoodie.properties"), b"hoodie.table.name=t\n")
        .unwrap();
    s.put(&p("city=a/f1.parquet"), b"0123456789").unwrap();
    s.put(&p("city=a/f2.parquet"), b"abc").unwrap();
    s.put(&p("city=b/x/f3.parquet"), b"z").unwrap();
    s.check().unwrap();

    let mut root: Vec<_> = s
        .list(&TablePath::root())
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.meta.kind))
        .collect();
    root.sort();
    assert_eq!(
        root,
        vec![
            (".hoodie".to_string(), Kind::Dir),
            ("city=a".to_string(), Kind::Dir),
            ("city=b".to_string(), Kind::Dir)
        ]
    );
    let mut a = s.list(&p("city=a")).unwrap();
    a.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(a.len(), 2);
    assert_eq!((a[0].name.as_str(), a[0].meta.size), ("f1.parquet", 10));
    assert!(a[0].meta.version.is_some());
    assert_eq!(s.stat(&p("city=b")).unwrap().kind, Kind::Dir);
    assert_eq!(s.stat(&p("city=a/f2.parquet")).unwrap().size, 3);
    assert_eq!(
        s.stat(&p("nope")).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    assert!(s.list(&p("nope")).unwrap().is_empty());
    assert_eq!(s.read(&p("city=a/f1.parquet")).unwrap(), b"0123456789");
    assert_eq!(
        s.read_range(&p("city=a/f1.parquet"), 7, 10).unwrap(),
        b"789"
    );
    assert!(s
        .read_range(&p("city=a/f1.parquet"), 10, 4)
        .unwrap()
        .is_empty());

    s.rename(&p("city=a/f2.parquet"), &p("city=a/f4.parquet"))
        .unwrap();
    assert_eq!(s.read(&p("city=a/f4.parquet")).unwrap(), b"abc");
    assert!(s.delete(&p("city=a/f4.parquet")).unwrap());
    assert!(!s.delete(&p("city=a/f4.parquet")).unwrap());
    s.truncate(&p("city=a/f1.parquet"), 4).unwrap();
    assert_eq!(s.read(&p("city=a/f1.parquet")).unwrap(), b"0123");
    s.delete_dir_all(&p("city=b")).unwrap();
    assert!(s.stat(&p("city=b")).is_err());
    assert_eq!(
        s.describe(&p("city=a/f1.parquet")),
        "s3://bucket/warehouse/trips/city=a/f1.parquet"
    );
}

#[test]
fn keys_live_under_the_prefix() {
    let (s, mem) = store();
    s.put(&p("a/b"), b"x").unwrap();
    let got = s
        .runtime_block_for_test(mem.head(&"warehouse/trips/a/b".into()))
        .unwrap();
    assert_eq!(got.size, 1);
}

#[test]
fn open_file_is_pinned_to_its_etag() {
    let (s, _) = store();
    s.put(&p("f"), b"first version").unwrap();
    let f = s.open(&p("f")).unwrap();
    let unread = s.open(&p("f")).unwrap();
    assert_eq!(f.size(), 13);
    let mut buf = [0u8; 5];
    assert_eq!(f.read_at(&mut buf, 6).unwrap(), 5);
    assert_eq!(&buf, b"versi");
    let mut end = [0u8; 10];
    assert_eq!(f.read_at(&mut end, 10).unwrap(), 3);
    assert_eq!(&end[..3], b"ion");
    assert_eq!(f.read_at(&mut end, 13).unwrap(), 0);

    // Replaced: a handle never returns the new bytes. One that must fetch gets ESTALE; one
    // whose prefetch window already holds the bytes (a small file is fetched whole) gives the
    // version it opened.
    s.put(&p("f"), b"SECOND VERSION!").unwrap();
    let e = unread.read_at(&mut buf, 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "{e}");
    match f.read_at(&mut buf, 0) {
        Ok(n) => assert_eq!(&buf[..n], b"first"),
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "{e}"),
    }

    // Deleted (the cleaner): EIO.
    let g = s.open(&p("f")).unwrap();
    s.delete(&p("f")).unwrap();
    let e = g.read_at(&mut buf, 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
}

#[test]
fn missing_table_is_a_clear_error() {
    let (s, _) = store();
    let e = s.check().unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert!(e.to_string().contains("not a Hudi table"), "{e}");
    assert!(format!("{s:?}").contains("s3://bucket/warehouse/trips"));
}

#[test]
fn requests_are_counted_by_kind() {
    let (s, _) = store();
    assert!(s.is_object_store());
    s.put(&p("city=a/f1.parquet"), b"0123456789").unwrap();
    let before = s.requests();
    assert_eq!(before.put, 1);
    s.list(&p("city=a")).unwrap();
    s.read(&p("city=a/f1.parquet")).unwrap();
    let f = s.open(&p("city=a/f1.parquet")).unwrap();
    let mut buf = [0u8; 4];
    f.read_at(&mut buf, 2).unwrap();
    // A directory has no object: a stat of one is a HEAD and a LIST. The open of a listed
    // file asks nothing: the listing gave its size and ETag.
    assert_eq!(s.stat(&p("city=a")).unwrap().kind, Kind::Dir);
    let d = s.requests().since(&before);
    assert_eq!(
        (d.list, d.head, d.get, d.put, d.delete),
        (2, 1, 2, 0, 0),
        "{d:?}"
    );
    assert_eq!(d.total(), 5);
}

#[test]
fn an_open_pins_what_the_listing_said() {
    let (s, _) = store();
    s.put(&p("city=a/f.parquet"), b"first version").unwrap();
    s.put(&p("city=a/g.parquet"), b"kept").unwrap();
    s.put(&p("city=a/h.parquet"), b"cleaned").unwrap();
    s.list(&p("city=a")).unwrap();
    let before = s.requests();
    let f = s.open(&p("city=a/f.parquet")).unwrap();
    let g = s.open(&p("city=a/g.parquet")).unwrap();
    let h = s.open(&p("city=a/h.parquet")).unwrap();
    assert_eq!(s.requests().since(&before).total(), 0, "no HEAD at open");
    assert_eq!((f.size(), g.size()), (13, 4));
    let mut buf = [0u8; 4];
    assert_eq!(g.read_at(&mut buf, 0).unwrap(), 4);
    assert_eq!(&buf, b"kept");

    // Replaced after the listing: the handle never returns the new bytes (ESTALE); deleted
    // after it: EIO.
    s.put(&p("city=a/f.parquet"), b"SECOND VERSION!").unwrap();
    let e = f.read_at(&mut buf, 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "{e}");
    s.delete(&p("city=a/h.parquet")).unwrap();
    let e = h.read_at(&mut buf, 0).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");

    // A new listing replaces the old: the new version opens, a deleted file is not found (a
    // HEAD, since no listing shows it).
    s.list(&p("city=a")).unwrap();
    let f2 = s.open(&p("city=a/f.parquet")).unwrap();
    let mut all = [0u8; 15];
    assert_eq!(f2.read_at(&mut all, 0).unwrap(), 15);
    assert_eq!(&all, b"SECOND VERSION!");
    let before = s.requests();
    let e = s.open(&p("city=a/h.parquet")).err().unwrap();
    assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(s.requests().since(&before).head, 1);
}
