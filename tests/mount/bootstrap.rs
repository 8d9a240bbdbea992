//! Metadata-only bootstrapped tables through a real mount (SEMANTICS.md §10.11): tables the kit
//! bootstraps as Java does (skeletons, source files in another directory, the bootstrap index),
//! copy-on-write (v6) and merge-on-read (v9), with an upsert on a bootstrapped group. A reader
//! of `latest/`, `as_of/`, `merged/`, `merged/incremental/` and `cdc/` gets the stitched rows
//! (compared with what the kit wrote, read back with the parquet crate's record reader:
//! `support::bootstrap::check_views`), `stat` gives the size it reads, `user.hudi.stitched_from`
//! names both files; a missing source file is EIO with a log line naming it.

use std::path::Path;

use hudifs_core::table::TableType;
use hudifs_testkit::support::bootstrap::{
    assert_stitched, bootstrapped_with_upsert, check_views, skeleton_name, Upserted,
};
use hudifs_testkit::support::{self, MountGuard};

/// A table at `tmp/table` bootstrapped from `tmp/source`, with the upsert on top.
fn written(tmp: &Path, tt: TableType, version: u32) -> Upserted {
    let uri = format!("file:{}", tmp.join("source").display());
    bootstrapped_with_upsert(tmp, &uri, tt, version)
}

fn mount(tmp: &Path) -> MountGuard {
    let cache = tmp.join("cache");
    MountGuard::mount(
        &tmp.join("table"),
        &["--merge-cache", cache.to_str().unwrap()],
    )
}

#[test]
fn cow_v6_bootstrapped_table_reads_stitched() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let u = written(tmp.path(), TableType::CopyOnWrite, 6);
    let m = mount(tmp.path());
    check_views(m.path(), &u, false);
}

#[test]
fn mor_v9_bootstrapped_table_reads_stitched() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let u = written(tmp.path(), TableType::MergeOnRead, 9);
    let m = mount(tmp.path());
    check_views(m.path(), &u, true);
}

/// A source file that is gone: the skeleton is refused with EIO, a log line names the source
/// file, and the other group still reads.
#[test]
fn a_missing_source_file_is_eio_and_logged() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let u = written(tmp.path(), TableType::MergeOnRead, 9);
    std::fs::remove_file(tmp.path().join("source").join(&u.b.source)).unwrap();
    let m = mount(tmp.path());
    let e = std::fs::read(m.path().join("latest/city=b").join(skeleton_name(&u.b)))
        .expect_err("a skeleton without its source was served");
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let log = m.log_text();
    assert!(
        log.contains(&u.b.source),
        "no log line names the source file: {log}"
    );
    let a = m
        .path()
        .join("as_of")
        .join(&u.t0)
        .join("city=a")
        .join(skeleton_name(&u.a));
    assert_stitched(&a, &u.a);
}
