//! A lake in one real mount (SEMANTICS.md §7.1.1): generated tables at different depths (a v6
//! merge-on-read, a v9 copy-on-write, one never opened, one broken) and a directory that is
//! not a table, mounted with `hudifs mount LAKE MNT`. Each table's `latest/` equals a single
//! mount of it; the broken table fails only itself; tables never used are never read; tables
//! come and go; a commit shows in its table's `latest/`.

use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hudifs_core::table::TableType;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};

const START: i64 = 1_767_225_600_000;

fn table(root: &Path, table_type: TableType, version: u32) -> TableWriter {
    let name = root.file_name().unwrap().to_string_lossy().to_string();
    let spec = TableSpec::new(&name, table_type, version).partitioned_by(&["p"], true);
    let mut w = TableWriter::create(root, spec, START).unwrap();
    let a = w.partition_path(&["a"]).unwrap();
    let b = w.partition_path(&["b"]).unwrap();
    let mut t = w.begin(w.write_action()).unwrap();
    let f = t.insert(&a, &rows(1, 4)).unwrap();
    t.insert(&b, &rows(2, 3)).unwrap();
    t.complete().unwrap();
    let mut t = w.begin(w.write_action()).unwrap();
    t.update(&a, &f, &rows_with_ids(3, &[1000])).unwrap();
    t.complete().unwrap();
    w
}

fn ls(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

/// Every file below `dir`: relative path → bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Wait (10 s at most, no timing asserted) until `f` holds.
fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn loaded(log: &str, table: &str) -> bool {
    log.contains(&format!("lake: loaded table {table} "))
}

#[test]
fn a_lake_in_one_mount() {
    if !support::fuse_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let lake = dir.path().join("lake");
    let _orders = table(&lake.join("sales/orders"), TableType::MergeOnRead, 6);
    let mut trips = table(&lake.join("trips"), TableType::CopyOnWrite, 9);
    let _untouched = table(&lake.join("db/untouched"), TableType::CopyOnWrite, 9);
    let broken = lake.join("db/x/broken/.hoodie");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(
        broken.join("hoodie.properties"),
        "hoodie.table.name=broken\nhoodie.table.version=99\n",
    )
    .unwrap();
    std::fs::create_dir_all(lake.join("notes")).unwrap();
    std::fs::write(lake.join("notes/readme.txt"), "not a table").unwrap();

    let m = support::MountGuard::mount(&lake, &["--poll-interval", "100"]);
    let mnt = m.path().to_path_buf();

    // The lake's directories lead only to tables.
    assert_eq!(ls(&mnt), ["db", "sales", "trips"]);
    assert_eq!(ls(&mnt.join("sales")), ["orders"]);
    assert_eq!(ls(&mnt.join("db")), ["untouched", "x"]);
    assert_eq!(ls(&mnt.join("db/x")), ["broken"]);
    assert!(!mnt.join("notes").exists());
    // A stat of a table's directory reads nothing of it.
    assert!(std::fs::metadata(mnt.join("db/untouched"))
        .unwrap()
        .is_dir());
    for t in ["trips", "sales/orders", "db/untouched"] {
        assert!(!loaded(&m.log_text(), t), "{t} read before use");
    }

    // Inside a table: what a single mount of it shows, same names and bytes.
    for t in ["trips", "sales/orders"] {
        let single = support::MountGuard::mount(&lake.join(t), &[]);
        assert_eq!(ls(&mnt.join(t)), ls(single.path()), "{t}");
        let (got, want) = (
            tree(&mnt.join(t).join("latest")),
            tree(&single.path().join("latest")),
        );
        assert!(!want.is_empty(), "{t}");
        assert_eq!(
            got.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{t}"
        );
        assert!(got == want, "{t}: same names, other bytes");
        for top in ["as_of", "incremental", "timeline", "merged", "cdc", "delta"] {
            assert_eq!(
                ls(&mnt.join(t).join(top)),
                ls(&single.path().join(top)),
                "{t}/{top}"
            );
        }
        // iceberg/ names its files where readers see this table: below the lake's mount.
        assert_eq!(
            ls(&mnt.join(t).join("iceberg")),
            ls(&single.path().join("iceberg")),
            "{t}/iceberg"
        );
        let hint = std::fs::read_to_string(mnt.join(t).join("iceberg/metadata/version-hint.text"))
            .unwrap();
        let meta: serde_json::Value = serde_json::from_slice(
            &std::fs::read(
                mnt.join(t)
                    .join(format!("iceberg/metadata/v{}.metadata.json", hint.trim())),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(
            meta["location"],
            format!("{}/{t}/iceberg", mnt.display()),
            "{t}"
        );
        assert!(loaded(&m.log_text(), t), "{t} was used:\n{}", m.log_text());
    }

    // The broken table fails only itself, with the errno its own mount would give.
    let want = hudifs::fuse::errno_of(
        &hudifs::fs::HudiFs::new(&lake.join("db/x/broken"), Default::default())
            .err()
            .unwrap(),
    );
    assert_eq!(want, libc::EIO);
    let err = std::fs::read_dir(mnt.join("db/x/broken/latest")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(want), "{err}");
    assert!(std::fs::metadata(mnt.join("db/x/broken")).unwrap().is_dir());
    let naming = |log: &str| log.lines().filter(|l| l.contains("db/x/broken")).count();
    assert_eq!(
        naming(&m.log_text()),
        1,
        "one line names it:\n{}",
        m.log_text()
    );
    assert!(!ls(&mnt.join("trips/latest")).is_empty());

    // A commit to one table shows in its latest/.
    let c = trips.partition_path(&["c"]).unwrap();
    let mut t = trips.begin(trips.write_action()).unwrap();
    t.insert(&c, &rows(9, 2)).unwrap();
    t.complete().unwrap();
    wait_for("the commit in trips/latest", || {
        ls(&mnt.join("trips/latest")).contains(&c)
    });

    // A table created after the mount appears; a dropped one disappears, and a file opened
    // before keeps reading.
    let _fresh = table(&lake.join("sales/fresh"), TableType::CopyOnWrite, 9);
    wait_for("sales/fresh", || {
        ls(&mnt.join("sales")).contains(&"fresh".into())
    });
    assert!(!ls(&mnt.join("sales/fresh/latest")).is_empty());
    let c_dir = mnt.join("trips/latest").join(&c);
    let kept = c_dir.join(&ls(&c_dir)[0]);
    let want = std::fs::read(&kept).unwrap();
    let mut open = std::fs::File::open(&kept).unwrap();
    std::fs::remove_dir_all(lake.join("trips")).unwrap();
    wait_for("trips to go", || !ls(&mnt).contains(&"trips".into()));
    assert!(!mnt.join("trips").exists());
    let mut got = Vec::new();
    std::io::Read::read_to_end(&mut open, &mut got).unwrap();
    assert_eq!(got, want, "a file opened before its table was dropped");

    // Never used: never read.
    let log = m.log_text();
    assert!(loaded(&log, "sales/fresh"), "{log}");
    assert!(!loaded(&log, "db/untouched"), "{log}");
    assert!(!loaded(&log, "db/x/broken"), "{log}");

    // hudifs status names the lake root and says it is a lake.
    let out = Command::new(hudifs_testkit::mount::binary("hudifs"))
        .args(["status", "--json"])
        .arg(&mnt)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = &v["mounts"][0];
    assert_eq!(row["lake"], true, "{v}");
    assert_eq!(
        row["table"].as_str().unwrap(),
        lake.canonicalize().unwrap().display().to_string()
    );
}
