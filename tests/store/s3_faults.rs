//! Faults between a mount and its store: fixture tables on moto (127.0.0.1), mounted through
//! the test kit's proxy, which answers a share of the requests with 503 SlowDown, 500, a reset
//! connection, a late answer or a body cut off half-way. Every file read through the mount is
//! exactly the table file's bytes or fails with EIO, never other bytes; every listing is the
//! local mount's or fails; once the faults stop, everything reads and lists right
//! (docs/SEMANTICS.md §9).

use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::path::Path;

use hudifs_testkit::s3::{store_args, upload, Fault, FaultProxy};

/// The share of requests that fail (each kind of fault equally often): mostly absorbed by the
/// retries.
const RATE: f64 = 0.2;
/// ... and a storm that exhausts them often (no slow answers, to keep the test short).
const STORM: f64 = 0.75;
const STORM_FAULTS: [Fault; 4] = [
    Fault::SlowDown,
    Fault::Internal,
    Fault::Reset,
    Fault::Truncate,
];

/// Tables with partitions, logs, and several instants (copy-on-write and merge-on-read).
const TABLES: [&str; 3] = [
    "sample_table/mor/parquet/v6_complexkeygen_hivestyle",
    "quickstart_trips_table/mor/avro/v6_trips_8i1u",
    "sample_table/cow/v8_nonpartitioned",
];

#[derive(Default)]
struct Tally {
    reads_exact: u64,
    reads_eio: u64,
    lists_same: u64,
    lists_failed: u64,
}

/// The view directories to compare: latest/ and every as_of/ of the local mount.
fn views(local: &Path) -> Vec<String> {
    let mut v = vec!["latest".to_string()];
    for e in std::fs::read_dir(local.join("as_of")).unwrap() {
        v.push(format!(
            "as_of/{}",
            e.unwrap().file_name().to_string_lossy()
        ));
    }
    v.sort();
    v
}

/// Read every file and list every view of the store mount `m` against the local mount `l`.
fn check(name: &str, l: &Path, m: &Path, faults: bool, t: &mut Tally) {
    for view in views(l) {
        let want = support::walk_files(&l.join(&view)).unwrap();
        match support::walk_files(&m.join(&view)) {
            Ok(got) => {
                assert_eq!(got, want, "{name}: {view} lists other files");
                t.lists_same += 1;
            }
            Err(e) => {
                assert!(faults, "{name}: {view} failed without faults: {e}");
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{name}: {view}: {e}");
                t.lists_failed += 1;
            }
        }
    }
    let latest = support::walk_files(&l.join("latest")).unwrap();
    let timeline = support::walk_files(&l.join("timeline")).unwrap();
    let files = latest
        .iter()
        .map(|f| format!("latest/{f}"))
        .chain(timeline.iter().map(|f| format!("timeline/{f}")));
    for rel in files {
        let want = std::fs::read(l.join(&rel)).unwrap();
        match std::fs::read(m.join(&rel)) {
            Ok(got) => {
                assert!(
                    got == want,
                    "{name}: {rel}: other bytes through the store mount"
                );
                t.reads_exact += 1;
            }
            Err(e) => {
                assert!(faults, "{name}: {rel} failed without faults: {e}");
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{name}: {rel}: {e}");
                t.reads_eio += 1;
            }
        }
    }
}

#[test]
fn faults_give_the_exact_bytes_or_eio_and_the_mount_recovers() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let moto = support::moto();
    let proxy = FaultProxy::start(moto.addr, 7);
    let fixtures = support::fixtures(&dir);
    let tmp = tempfile::tempdir().unwrap();
    let mut under = Tally::default();
    let mut storm = Tally::default();
    let mut after = Tally::default();
    let mut mount_failures = BTreeMap::new();
    let mut blackout_eio = false;
    for name in TABLES {
        let fx = fixtures.iter().find(|f| f.name == name).unwrap();
        let local = support::unzip(&fx.zip, &tmp.path().join(name));
        let short = name.rsplit('/').next().unwrap();
        let url = format!("s3://lake/faults/{short}");
        upload(&local, &url, &moto.endpoint);
        let lm = support::MountGuard::mount(&local, &["--no-passthrough"]);
        let args = store_args(&proxy.endpoint);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // Two mounts (each its own page cache): one read under the light faults, one under
        // the storm; both mounted under the light faults, which the mount itself meets too (a
        // mount that fails says so and is tried again: most succeed, the client retries).
        proxy.set_faults(RATE, &Fault::ALL);
        let mut mount = |what: &str| {
            for i in 0..5 {
                let mnt = tmp.path().join(format!("mnt-{short}-{what}-{i}"));
                let hudifs = hudifs_testkit::mount::binary("hudifs");
                match support::MountGuard::try_mount_at(&hudifs, Path::new(&url), &mnt, &args, &[])
                {
                    Ok(g) => return g,
                    Err(e) => {
                        assert!(e.contains("hudifs mount"), "a failed mount says why: {e}");
                        *mount_failures.entry(short).or_insert(0) += 1;
                    }
                }
            }
            panic!("no mount succeeded in 5 tries under faults");
        };
        let sm = mount("light");
        let sm2 = mount("storm");
        check(short, lm.path(), sm.path(), true, &mut under);
        proxy.set_faults(STORM, &STORM_FAULTS);
        check(short, lm.path(), sm2.path(), true, &mut storm);
        // The faults stop: everything reads and lists right on the same mounts.
        proxy.set_faults(0.0, &Fault::ALL);
        check(short, lm.path(), sm.path(), false, &mut after);
        check(short, lm.path(), sm2.path(), false, &mut after);
        if name == TABLES[0] {
            // Every request failing: a read exhausts the retries and gives EIO, never other
            // bytes (the storm reaches that only by chance); once the store answers, it reads.
            let bm = mount("blackout");
            let file = support::walk_files(&lm.path().join("latest")).unwrap()[0].clone();
            let path = |m: &Path| m.join("latest").join(&file);
            proxy.set_faults(1.0, &[Fault::Internal]);
            let got = std::fs::read(path(bm.path()));
            proxy.set_faults(0.0, &Fault::ALL);
            assert_eq!(
                got.map(|b| b.len()).map_err(|e| e.raw_os_error()),
                Err(Some(libc::EIO)),
                "a read with every request failing"
            );
            blackout_eio = true;
            assert!(
                std::fs::read(path(bm.path())).unwrap() == std::fs::read(path(lm.path())).unwrap(),
                "{file}: other bytes once the store answers again"
            );
        }
        assert!(
            !sm2.log_text().contains("panicked"),
            "the daemon panicked: {}",
            sm2.log_text()
        );
        assert!(
            !sm.log_text().contains("panicked"),
            "the daemon panicked: {}",
            sm.log_text()
        );
    }
    let c = proxy.counts();
    eprintln!(
        "s3 faults: {}; at rate {RATE}: {} reads exact, {} reads EIO, {} listings right, {} \
         listings EIO; at rate {STORM} (no slow answers): {} reads exact, {} reads EIO, {} \
         listings right, {} listings EIO; after: {} reads exact, {} listings right; mounts \
         that failed and were tried again: {mount_failures:?}; every request failing: EIO",
        c.summary(),
        under.reads_exact,
        under.reads_eio,
        under.lists_same,
        under.lists_failed,
        storm.reads_exact,
        storm.reads_eio,
        storm.lists_same,
        storm.lists_failed,
        after.reads_exact,
        after.lists_same
    );
    assert!(
        c.faults_total() > 20,
        "few faults injected: {}",
        c.summary()
    );
    assert!(under.reads_exact > 0, "nothing read under faults");
    assert!(blackout_eio, "the EIO path went untested");
}
