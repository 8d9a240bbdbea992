//! Conformance through real S3 mounts: every fixture table with expected answers is uploaded
//! once to one moto server (127.0.0.1), mounted as `s3://` (and again `--read-optimized`), and
//! every view of its expected answers is walked with plain file-system calls, as
//! tests/mount/mount_conformance.rs does for the local mounts; every file of `latest/` reads back as
//! the table file's bytes (docs/SEMANTICS.md §9). Tables with a metadata table are listed from
//! it by default, and mounted again with `--listing=storage`; `--listing=verify` finds no
//! difference between the two (SEMANTICS.md §1.10).

use hudifs_testkit::support;

use std::path::Path;
use std::time::Instant;

use hudifs_testkit::s3::{store_args, upload};
use support::{check_fixture, mount_answer, MountGuard};

#[test]
fn every_fixture_through_a_real_s3_mount() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let t0 = Instant::now();
    let moto = support::moto();
    let fixtures = support::fixtures(&dir);
    let tmp = tempfile::tempdir().unwrap();
    // Upload every table once.
    let mut objects = 0;
    let mut tables = Vec::new();
    for (i, fx) in fixtures.iter().enumerate() {
        let root = support::unzip(&fx.zip, &tmp.path().join(format!("t{i}")));
        let url = format!("s3://lake/conformance/t{i}");
        objects += upload(&root, &url, &moto.endpoint);
        tables.push((fx, root, url));
    }
    let uploaded = t0.elapsed();
    let args = store_args(&moto.endpoint);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut ro_args = args.clone();
    ro_args.push("--read-optimized");
    let (mut total, mut files) = (0, 0);
    let mut problems = Vec::new();
    let mut storage_args = args.clone();
    storage_args.push("--listing=storage");
    let mut storage_ro_args = storage_args.clone();
    storage_ro_args.push("--read-optimized");
    let mut with_mdt = 0;
    for (fx, root, url) in &tables {
        let m = MountGuard::mount(Path::new(url), &args);
        let ro = MountGuard::mount(Path::new(url), &ro_args);
        let (n, p) = check_fixture(&fx.name, &fx.expected, |ask| {
            mount_answer(m.path(), ro.path(), ask)
        });
        total += n;
        problems.extend(p);
        // A table with a metadata table is listed from it by default (--listing auto); the
        // same views come out of a storage listing, and verify finds no difference.
        let source = support::xattr(&m.path().join("latest"), "user.hudi.listing").unwrap();
        // Names hudifs never gives (`ls -l` asks every file for these) are absent, answered
        // without a hop to the store's threads; the absent `user.hudi.*` ones too.
        for name in [
            "security.selinux",
            "system.posix_acl_access",
            "user.hudi.nope",
        ] {
            assert_eq!(
                support::xattr_errno(&m.path().join("latest"), name),
                Some(libc::ENODATA),
                "{}: {name}",
                fx.name
            );
        }
        if root.join(".hoodie/metadata/files").is_dir() {
            with_mdt += 1;
            assert!(
                source.starts_with("metadata-table@"),
                "{}: {source}",
                fx.name
            );
            let m = MountGuard::mount(Path::new(url), &storage_args);
            let ro = MountGuard::mount(Path::new(url), &storage_ro_args);
            assert_eq!(
                support::xattr(&m.path().join("latest"), "user.hudi.listing").as_deref(),
                Some("storage")
            );
            let (n, p) = check_fixture(&fx.name, &fx.expected, |ask| {
                mount_answer(m.path(), ro.path(), ask)
            });
            total += n;
            problems.extend(p);
            let mut verify = vec!["ls".to_string(), url.clone(), "--listing=verify".into()];
            verify.extend(store_args(&moto.endpoint));
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_hudifs"))
                .args(&verify)
                .env("RUST_LOG", "hudifs_core=info")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "{}: {stderr}", fx.name);
            assert!(stderr.contains(" 0 difference(s)"), "{}: {stderr}", fx.name);
        } else {
            assert_eq!(source, "storage", "{}", fx.name);
        }
        for rel in support::walk_files(&m.path().join("latest")).unwrap() {
            let via = std::fs::read(m.path().join("latest").join(&rel)).unwrap();
            let direct = std::fs::read(root.join(&rel)).unwrap();
            assert!(
                via == direct,
                "{}: {rel} differs through the S3 mount",
                fx.name
            );
            files += 1;
        }
    }
    eprintln!(
        "s3 mount conformance: {} fixtures ({objects} objects uploaded in {:.1} s), {total} views \
         checked, {files} files read byte-exact, {} mismatches, {:.1} s in all",
        tables.len(),
        uploaded.as_secs_f64(),
        problems.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(with_mdt >= 19, "{with_mdt} fixtures with a metadata table");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
