//! Metadata-only bootstrapped tables on a real S3 server (SEMANTICS.md §10.11): the table and its
//! source files on the same bucket (the index naming them `s3a://…`, as Java on a Hadoop file
//! system writes them), mounted as `s3://`: every view reads the stitched rows the kit wrote
//! (`support::bootstrap::check_views`), and the same names and bytes as the same table on the
//! local disk with its sources there.

use std::path::Path;

use hudifs_core::table::TableType;
use hudifs_testkit::mount::{fuse_available, MountGuard};
use hudifs_testkit::s3::{upload, BUCKET};
use hudifs_testkit::support::{self, bootstrap};

fn check(tt: TableType, version: u32, endpoint: &str, prefix: &str) {
    let tmp = tempfile::tempdir().unwrap();
    // On the store: the table and its sources side by side under `prefix`.
    let on_store = tmp.path().join("store");
    let base = format!("s3a://{BUCKET}/{prefix}/source");
    let u = bootstrap::bootstrapped_with_upsert(&on_store, &base, tt, version);
    let url = format!("s3://{BUCKET}/{prefix}/table");
    upload(&on_store.join("table"), &url, endpoint);
    upload(
        &on_store.join("source"),
        &format!("s3://{BUCKET}/{prefix}/source"),
        endpoint,
    );
    // The same table on the local disk.
    let local = tmp.path().join("local");
    let lbase = format!("file:{}", local.join("source").display());
    let lu = bootstrap::bootstrapped_with_upsert(&local, &lbase, tt, version);
    assert_eq!(lu.a.skeleton, u.a.skeleton, "the two tables differ");

    let cache = tmp.path().join("cache-s3");
    let sm = MountGuard::mount(
        Path::new(&url),
        &[
            "--endpoint-url",
            endpoint,
            "--force-path-style",
            "--merge-cache",
            cache.to_str().unwrap(),
        ],
    );
    bootstrap::check_views(sm.path(), &u, tt == TableType::MergeOnRead);
    let lcache = tmp.path().join("cache-local");
    let lm = MountGuard::mount(
        &local.join("table"),
        &["--merge-cache", lcache.to_str().unwrap()],
    );
    let window = format!("{}..", u.t0);
    for v in [
        "latest".to_string(),
        "merged/latest".to_string(),
        format!("as_of/{}", u.t0),
        format!("merged/as_of/{}", u.t0),
        format!("merged/incremental/{window}"),
        format!("cdc/{window}"),
    ] {
        let (l, s) = (
            crate::tree(&lm.path().join(&v)),
            crate::tree(&sm.path().join(&v)),
        );
        assert!(!l.is_empty(), "{url}: empty {v}");
        assert!(l == s, "{url}: {v} differs on the store");
    }
    assert!(!sm.log_text().contains("not served"), "{}", sm.log_text());
}

#[test]
fn bootstrapped_tables_read_stitched_on_s3() {
    if !fuse_available() {
        return;
    }
    let moto = support::moto();
    check(TableType::CopyOnWrite, 6, &moto.endpoint, "boot-cow6");
    check(TableType::MergeOnRead, 9, &moto.endpoint, "boot-mor9");
}
