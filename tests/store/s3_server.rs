//! Tables on a real S3 server: moto's server (PyPI `moto[server]`, installed into the test venv
//! next to pyarrow) on 127.0.0.1, fixture tables uploaded through the StorageWrite seam over HTTP,
//! then `hudifs ls s3://…` and a real FUSE mount of the `s3://` table give the same answers and
//! the same bytes as the local table (docs/SEMANTICS.md §9); the prefix holding them mounts as a
//! lake (§7.1.1) with the same bytes per table. A server that is not there fails
//! the mount with a message naming what to check.

use hudifs_testkit::support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hudifs_objstore::{ObjectStorage, StoreUrl};
use hudifs_storage::{StorageWrite, TablePath};
use hudifs_testkit::mount::{binary, fuse_available, MountGuard};

use hudifs_testkit::s3::KEYS;

/// Upload a local table tree to `url` through the seam; the number of objects.
fn upload(root: &Path, url: &str, endpoint: &str) -> usize {
    let store = ObjectStorage::new(
        StoreUrl::parse(url).unwrap(),
        &hudifs_testkit::s3::options(endpoint),
    )
    .unwrap();
    let files = support::walk_files(root).unwrap();
    for rel in &files {
        let bytes = std::fs::read(root.join(rel)).unwrap();
        store.put(&TablePath::new(rel).unwrap(), &bytes).unwrap();
    }
    files.len()
}

fn ls_json(table: &str, extra: &[&str], view: &[&str]) -> serde_json::Value {
    let mut args = vec!["ls", "--json", table];
    args.extend_from_slice(view);
    args.extend_from_slice(extra);
    let (code, out, err) = support::run_hudifs(&args);
    assert_eq!(code, 0, "hudifs {args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The pages of `path` in the page cache (before it is touched through the map), and its bytes
/// read through a shared read-only map.
fn mapped(path: &Path) -> (usize, Vec<u8>) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    // SAFETY: a read-only shared map of an open file of `len` bytes, unmapped below; mincore
    // gets one byte per page of it.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(
            addr,
            libc::MAP_FAILED,
            "mmap {}: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
        let pages = len.div_ceil(4096);
        let mut vec = vec![0u8; pages];
        assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
        let resident = vec.iter().filter(|b| **b & 1 == 1).count();
        let bytes = std::slice::from_raw_parts(addr as *const u8, len).to_vec();
        libc::munmap(addr, len);
        (resident, bytes)
    }
}

#[test]
fn s3_tables_list_and_mount_like_local_ones() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !fuse_available() {
        return;
    }
    let moto = support::moto();
    let endpoint = moto.endpoint.clone();
    let store_args = ["--endpoint-url", endpoint.as_str(), "--force-path-style"];
    let tmp = tempfile::tempdir().unwrap();
    let mut objects = 0;
    let mut compared = 0;
    // Copy-on-write and merge-on-read, table versions 6 and 8.
    let names = [
        "sample_table/cow/v6_nonpartitioned",
        "sample_table/cow/v8_nonpartitioned",
        "sample_table/mor/parquet/v6_complexkeygen_hivestyle",
        "quickstart_trips_table/mor/avro/v6_trips_8i1u",
    ];
    let fixtures = support::fixtures(&dir);
    let mut found = 0;
    let mut locals = Vec::new();
    for name in names {
        let fx = fixtures
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no fixture {name}"));
        let local = support::unzip(&fx.zip, &tmp.path().join(name));
        found += 1;
        let name = name.rsplit('/').next().unwrap();
        locals.push((name.to_string(), local.clone()));
        let url = format!("s3://lake/warehouse/{name}");
        objects += upload(&local, &url, &endpoint);
        let local_s = local.to_str().unwrap();
        // hudifs ls: the same views, file for file.
        let a = ls_json(local_s, &[], &[]);
        let b = ls_json(&url, &store_args, &[]);
        // The same entries but for mtime_ms (an object's is the time of its upload).
        let strip = |v: &serde_json::Value| {
            let mut v = v["files"].clone();
            for f in v.as_array_mut().expect("files") {
                f.as_object_mut().unwrap().remove("mtime_ms");
            }
            v
        };
        assert_eq!(strip(&a), strip(&b), "{name}: ls latest differs");
        compared += 1;
        // A real mount of the s3:// table: latest/ has the local mount's files and bytes.
        let lm = MountGuard::mount(&local, &[]);
        let sm = MountGuard::mount(Path::new(&url), &store_args);
        let (lt, st) = (
            crate::tree(&lm.path().join("latest")),
            crate::tree(&sm.path().join("latest")),
        );
        assert!(!lt.is_empty(), "{name}: empty latest/");
        assert_eq!(
            lt.iter().map(|x| &x.0).collect::<Vec<_>>(),
            st.iter().map(|x| &x.0).collect::<Vec<_>>(),
            "{name}: latest/ names differ"
        );
        assert!(lt == st, "{name}: latest/ bytes differ");
        compared += lt.len();
        // Table files on a store are read past the page cache (FOPEN_DIRECT_IO): the reads
        // above left no page of them behind; they can still be mapped.
        if let Some((rel, bytes)) = st.iter().find(|(_, b)| !b.is_empty()) {
            // They ask for reads of 1 MiB (`st_blksize`, what cat and cp read at once), where
            // the local mount's ask for pages.
            use std::os::unix::fs::MetadataExt;
            let blksize = |m: &MountGuard| {
                std::fs::metadata(m.path().join("latest").join(rel))
                    .unwrap()
                    .blksize()
            };
            assert_eq!(
                (blksize(&sm), blksize(&lm)),
                (1 << 20, 4096),
                "{name}: {rel}"
            );
            let (resident, via_map) = mapped(&sm.path().join("latest").join(rel));
            assert_eq!(resident, 0, "{name}: {rel} was read through the page cache");
            assert!(&via_map == bytes, "{name}: {rel} maps to other bytes");
        }
        // The incremental pulls of issue #18: merged/incremental/ and cdc/ of the whole history
        // hold the local mount's names and bytes (both are pure functions of the inputs).
        for view in [
            "merged/incremental/earliest..latest",
            "cdc/earliest..latest",
        ] {
            if support::walk_files(&lm.path().join(view)).is_err() {
                continue;
            }
            let (lv, sv) = (
                crate::tree(&lm.path().join(view)),
                crate::tree(&sm.path().join(view)),
            );
            assert!(!lv.is_empty(), "{name}: empty {view}");
            assert!(lv == sv, "{name}: {view} differs on the store");
            compared += lv.len();
        }
        // And every as_of/ the timeline directory names lists the same files.
        let tl = support::walk_files(&lm.path().join("timeline")).unwrap();
        assert_eq!(
            tl,
            support::walk_files(&sm.path().join("timeline")).unwrap(),
            "{name}: timeline/ differs"
        );
    }
    // The prefix that holds them, as a lake in one mount (SEMANTICS.md §7.1.1): each table at
    // its name, with the local table's latest/; one table dropped disappears.
    let lake = MountGuard::mount(Path::new("s3://lake/warehouse"), &{
        let mut a = store_args.to_vec();
        a.extend(["--poll-interval", "200"]);
        a
    });
    let mut shown: Vec<String> = std::fs::read_dir(lake.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    shown.sort();
    let mut want: Vec<String> = locals.iter().map(|(n, _)| n.clone()).collect();
    want.sort();
    assert_eq!(shown, want, "the lake's tables");
    for (name, local) in &locals {
        let lm = MountGuard::mount(local, &[]);
        let (lt, st) = (
            crate::tree(&lm.path().join("latest")),
            crate::tree(&lake.path().join(name).join("latest")),
        );
        assert!(!lt.is_empty(), "{name}: empty latest/");
        assert!(
            lt == st,
            "{name}: the lake's latest/ differs from the local table's"
        );
        compared += lt.len();
    }
    let (gone, _) = &locals[0];
    let store = ObjectStorage::new(
        StoreUrl::parse(&format!("s3://lake/warehouse/{gone}")).unwrap(),
        &hudifs_testkit::s3::options(&endpoint),
    )
    .unwrap();
    store
        .delete(&TablePath::new(".hoodie/hoodie.properties").unwrap())
        .unwrap();
    let t0 = Instant::now();
    while lake.path().join(gone).exists() {
        assert!(t0.elapsed() < Duration::from_secs(20), "{gone} still shown");
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!(
        "s3 server: {found} tables, {objects} objects uploaded, {compared} listings and files compared"
    );
}

#[test]
fn an_unreachable_store_fails_the_mount_saying_what_to_check() {
    if !fuse_available() {
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let mnt = tempfile::tempdir().unwrap();
    let out = Command::new(binary("hudifs"))
        .envs(KEYS)
        .args(["mount", "s3://lake/none"])
        .arg(mnt.path())
        .args(["--endpoint-url", &endpoint, "--force-path-style"])
        .output()
        .unwrap();
    let _guard = MountGuard::adopt(
        &binary("hudifs"),
        mnt.path(),
        &String::from_utf8_lossy(&out.stdout),
    );
    let err = String::from_utf8_lossy(&out.stderr).to_lowercase();
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("endpoint"), "message: {err}");
}

/// The merge rules of pipelines' tables hold on S3 (SEMANTICS §10.4): a version-9 table with a
/// custom delete marker and a version-6 AWS DMS table, written by the test kit, uploaded to the
/// server: `merged/latest/` and `cdc/` of the whole history through a mount of the `s3://`
/// table hold the local mount's names and bytes, which `mount::merged_deletes` checks against
/// the rows Hudi returns. The marker and the `Op` column really delete: the local merged view
/// holds fewer rows than the table's latest records.
#[test]
fn pipelines_merge_rules_hold_on_s3() {
    use hudifs_core::table::TableType;
    use hudifs_core::timeline::Action;
    use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};
    if !fuse_available() {
        return;
    }
    let moto = support::moto();
    let endpoint = moto.endpoint.clone();
    let tmp = tempfile::tempdir().unwrap();
    let mor =
        |v| TableSpec::new("gen_rules", TableType::MergeOnRead, v).partitioned_by(&["city"], true);
    let tables = [
        (
            "marker",
            mor(9)
                .with_property(
                    "hoodie.record.merge.property.hoodie.payload.delete.field",
                    "name",
                )
                .with_property(
                    "hoodie.record.merge.property.hoodie.payload.delete.marker",
                    "DELETED",
                )
                .with_string_columns(&["Op"]),
            "name",
        ),
        (
            "dms",
            mor(6)
                .with_property(
                    "hoodie.compaction.payload.class",
                    "org.apache.hudi.common.model.AWSDmsAvroPayload",
                )
                .with_string_columns(&["Op"]),
            "Op",
        ),
    ];
    for (name, spec, marked_by) in tables {
        let local = tmp.path().join(name);
        let mut w = TableWriter::create(&local, spec, 1_767_225_600_000).unwrap();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        let f = t.insert("city=a", &rows(1, 30)).unwrap();
        t.complete().unwrap();
        // Five keys marked deleted (by name, or by Op), five updated.
        let changes: Vec<_> = rows_with_ids(20, &(1000..1010).collect::<Vec<_>>())
            .into_iter()
            .enumerate()
            .map(|(i, mut r)| {
                r.ts += 1_000_000_000_000;
                let marked = i < 5;
                if marked && marked_by == "name" {
                    r.name = "DELETED".into();
                }
                r.with_extra(&[Some(if marked && marked_by == "Op" {
                    "D"
                } else {
                    "U"
                })])
            })
            .collect();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.update("city=a", &f, &changes).unwrap();
        t.complete().unwrap();
        let url = format!("s3://lake/rules/{name}");
        let views = ["merged/latest", "cdc/earliest..latest"].map(String::from);
        let (lm, sm) = same_on_the_store(&local, &url, &endpoint, &views, &[]);
        // 30 records, 5 deleted: the merged file holds 25 rows (Parquet footer's row count).
        use parquet::file::reader::FileReader;
        let dir = lm.path().join("merged/latest");
        let rows: i64 = support::walk_files(&dir)
            .unwrap()
            .iter()
            .map(|rel| {
                let f = std::fs::File::open(dir.join(rel)).unwrap();
                let r = parquet::file::reader::SerializedFileReader::new(f).unwrap();
                r.metadata().file_metadata().num_rows()
            })
            .sum();
        assert_eq!(rows, 25, "{name}: rows in merged/latest");
        assert!(!sm.log_text().contains("refused"), "{}", sm.log_text());
    }
}

/// A table upgraded from 0.x (SEMANTICS §8) on S3: the test kit's merge-on-read table with a
/// version-6 history, the 6→8 and 8→9 upgrades and writes after each
/// (`hudifs_testkit::generator::build_upgraded`), uploaded to the server. Through a mount of the
/// `s3://` table, `latest/`, every `as_of/<T>/` and their `merged/` views hold the local
/// mount's names and bytes, which `mount::upgraded` checks against the writer's model.
#[test]
fn upgraded_tables_read_the_same_on_s3() {
    use hudifs_core::table::TableType;
    use hudifs_testkit::generator::build_upgraded;
    if !fuse_available() {
        return;
    }
    let moto = support::moto();
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("upgraded");
    let u = build_upgraded(&local, TableType::MergeOnRead, 9, None).unwrap();
    let mut views = vec!["latest".to_string()];
    views.extend(
        u.writer
            .completed_writes()
            .keys()
            .map(|t| format!("as_of/{t}")),
    );
    let merged: Vec<String> = views.iter().map(|v| format!("merged/{v}")).collect();
    views.extend(merged);
    let (_, sm) = same_on_the_store(&local, "s3://lake/upgraded/t", &moto.endpoint, &views, &[]);
    assert!(!sm.log_text().contains("refused"), "{}", sm.log_text());
}

/// Schema-on-read on S3 (SEMANTICS §10.2): the test kit's table whose `fare` was renamed to
/// `price` and whose `tip` was dropped and added again (`build_renamed`, checked row by row
/// through a local mount by `mount::merged_schema`), uploaded with its `.hoodie/.schema/`
/// history. Through a mount of the `s3://` table, `merged/latest/`, `merged/as_of/` before
/// the rename, the whole-history window of `merged/incremental/` and `cdc/` hold the local
/// mount's names and bytes.
#[test]
fn renamed_columns_read_the_same_on_s3() {
    use hudifs_core::table::TableType;
    use hudifs_testkit::generator::build_renamed;
    if !fuse_available() {
        return;
    }
    let moto = support::moto();
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("renamed");
    let (_, first, _) = build_renamed(&local, TableType::MergeOnRead, 9).unwrap();
    let views = [
        "merged/latest".to_string(),
        format!("merged/as_of/{first}"),
        "merged/incremental/earliest..latest".to_string(),
        "cdc/earliest..latest".to_string(),
    ];
    let (lm, sm) = same_on_the_store(&local, "s3://lake/renamed/t", &moto.endpoint, &views, &[]);
    for m in [&lm, &sm] {
        assert!(!m.log_text().contains("refused"), "{}", m.log_text());
    }
}

/// The tables hudi-rs 0.6 wrote (`tests/fixtures/hudi-rs-0.6/`: ZSTD base files and log blocks,
/// a metadata table, deletes, delete markers, a compaction), uploaded to the server. Through a
/// mount of each `s3://` table, every view hudi-rs answered for (`merged/latest/`, each
/// `merged/as_of/<T>/` and `merged/incremental/<w>/`; `latest/` and `as_of/<T>/` of the
/// copy-on-write tables) holds the local mount's names and bytes, which
/// `mount::hudi_rs_written` checks against hudi-rs's own reads.
#[test]
fn hudi_rs_tables_read_the_same_on_s3() {
    if !fuse_available() {
        return;
    }
    let moto = support::moto();
    let tmp = tempfile::tempdir().unwrap();
    let tables = support::hudi_rs_tables(tmp.path());
    assert!(tables.len() >= 9, "{tables:?}");
    for t in &tables {
        let doc = t.doc("views.json");
        let cow = doc["table_type"] == "COPY_ON_WRITE";
        let mut views = Vec::new();
        for v in doc["views"].as_array().unwrap() {
            let label = v["label"].as_str().unwrap();
            // A window that selects no data write (a compaction, a delete) lists nothing.
            if v["rows"] == 0 {
                continue;
            }
            views.push(format!("merged/{label}"));
            if cow && !label.starts_with("incremental/") {
                views.push(label.to_string());
            }
        }
        let url = format!("s3://lake/hudi-rs/{}", t.name);
        let (lm, sm) = same_on_the_store(&t.root, &url, &moto.endpoint, &views, &[]);
        for m in [&lm, &sm] {
            assert!(!m.log_text().contains("refused"), "{}", m.log_text());
        }
    }
}

/// Upload the table at `local` to the server at `endpoint` as `url`, mount both, and check
/// that each of `views` is not empty and holds the same names and bytes on the store as on the
/// local disk; the two mounts (local, store), both given the mount options `extra`.
fn same_on_the_store(
    local: &Path,
    url: &str,
    endpoint: &str,
    views: &[String],
    extra: &[&str],
) -> (MountGuard, MountGuard) {
    upload(local, url, endpoint);
    let mut store_args = vec!["--endpoint-url", endpoint, "--force-path-style"];
    store_args.extend_from_slice(extra);
    let lm = MountGuard::mount(local, extra);
    let sm = MountGuard::mount(Path::new(url), &store_args);
    for v in views {
        let (lv, sv) = (
            crate::tree(&lm.path().join(v)),
            crate::tree(&sm.path().join(v)),
        );
        assert!(!lv.is_empty(), "{url}: empty {v}");
        assert!(lv == sv, "{url}: {v} differs on the store");
    }
    (lm, sm)
}

/// The tables the `delta/` and `iceberg/` store tests read, under `dir`: a merge-on-read table
/// with an update and a delete (47 rows), and the test kit's cleaned and archived copy-on-write
/// table (20 rows).
fn format_tables(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    use hudifs_core::table::TableType;
    use hudifs_core::timeline::Action;
    use hudifs_testkit::generator::{
        build_cleaned_and_archived, rows, rows_with_ids, TableSpec, TableWriter,
    };
    let mor = dir.join("mor");
    let spec = TableSpec::new("fm", TableType::MergeOnRead, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(&mor, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let g0 = t.insert("city=a", &rows(1, 30)).unwrap();
    let g1 = t.insert("city=b", &rows(2, 20)).unwrap();
    t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &g0, &rows_with_ids(7, &[1000, 1001]))
        .unwrap();
    t.delete("city=b", &g1, &[2000, 2001, 2002]).unwrap();
    t.complete().unwrap();
    let cow = dir.join("cow");
    build_cleaned_and_archived(&cow).unwrap();
    (mor, cow)
}

/// `delta/` on S3 (SEMANTICS §11): a merge-on-read table with an update and a delete, and the
/// test kit's cleaned and archived copy-on-write table (log from a checkpoint), uploaded to the
/// server. Through a mount of each `s3://` table, `delta/` (the log, checkpoints and every data
/// directory, the change data) holds the local mount's names and bytes, delta-rs reads the
/// newest version from the store mount with the rows of `merged/latest/` (`latest/`), and its
/// `load_cdf` the merge-on-read table's change records.
#[test]
fn delta_reads_the_same_on_s3() {
    if !fuse_available() {
        return;
    }
    let moto = support::moto();
    let tmp = tempfile::tempdir().unwrap();
    let (mor, cow) = format_tables(tmp.path());
    let py = support::python();
    for (local, url, plain, want) in [
        (&mor, "s3://lake/delta/mor", "merged/latest", 47),
        (&cow, "s3://lake/delta/cow", "latest", 20),
    ] {
        let views = ["delta".to_string(), plain.to_string()];
        let (_, sm) =
            same_on_the_store(local, url, &moto.endpoint, &views, &["--delta-change-data"]);
        // Only the change data of the first version the cleaner kept is refused (the table
        // just before it is gone).
        let refused = |l: &&str| l.contains("refused") && !l.contains("change data refused");
        assert!(
            !sm.log_text().lines().any(|l| refused(&l)),
            "{}",
            sm.log_text()
        );
        // os._exit: under this test binary delta-rs aborted at interpreter exit ("terminate
        // called without an active exception"), after its answer was printed and read
        // correctly; the local mount tests' runs exit cleanly.
        let code = "import os, sys; from deltalake import DeltaTable; \
                    print(DeltaTable(sys.argv[1]).to_pyarrow_table().num_rows, flush=True); \
                    os._exit(0)";
        assert_eq!(
            support::printed(&py, code, &[&sm.path().join("delta")]),
            want.to_string(),
            "{url}"
        );
        // The change data feed of the merge-on-read table from the store: the change records
        // cdc/ gives (50 inserts, an update, three deletes).
        if local != &mor {
            continue;
        }
        let got = support::printed(
            &py,
            "import os, sys, collections, pyarrow as pa, pyarrow.dataset as ds; \
                 from deltalake import DeltaTable; \
                 t = pa.RecordBatchReader.from_stream(DeltaTable(sys.argv[1]).load_cdf(0)).read_all(); \
                 c = collections.Counter(t['_change_type'].to_pylist()); \
                 ops = ds.dataset(sys.argv[2]).to_table(columns=['op'])['op'].to_pylist(); \
                 kinds = {'i': ['insert'], 'd': ['delete'], \
                          'u': ['update_preimage', 'update_postimage']}; \
                 h = collections.Counter(k for o in ops for k in kinds[o]); \
                 print(sorted(c.items()), sorted(h.items()), sep='\\n', flush=True); os._exit(0)",
            &[
                &sm.path().join("delta"),
                &sm.path().join("cdc/earliest..latest"),
            ],
        );
        assert_eq!(
            got,
            "[('delete', 3), ('insert', 50), ('update_postimage', 1), ('update_preimage', 1)]\n\
             [('delete', 3), ('insert', 50), ('update_postimage', 1), ('update_preimage', 1)]"
        );
    }
}

/// `iceberg/` on S3 (SEMANTICS §12): the tables of the test above, uploaded to the server and
/// mounted from it and from the local disk, both with `--iceberg-prefix` naming one path (the
/// store mount is then reached through it). Metadata, manifests and every data file with field
/// ids hold the same names and bytes on both; pyiceberg reads the current snapshot from the
/// store mount with the rows of `merged/latest/` (`latest/`), and DuckDB's `iceberg_scan` agrees.
#[test]
fn iceberg_reads_the_same_on_s3() {
    if !fuse_available() {
        return;
    }
    let moto = support::moto();
    let tmp = tempfile::tempdir().unwrap();
    let (mor, cow) = format_tables(tmp.path());
    for (name, local, url, want) in [
        ("mor", &mor, "s3://lake/iceberg/mor", 47),
        ("cow", &cow, "s3://lake/iceberg/cow", 20),
    ] {
        let seen = tmp.path().join(format!("seen-{name}"));
        let views = ["iceberg".to_string()];
        let prefix = ["--iceberg-prefix", seen.to_str().unwrap()];
        let (_lm, sm) = same_on_the_store(local, url, &moto.endpoint, &views, &prefix);
        assert!(!sm.log_text().contains("refused"), "{}", sm.log_text());
        std::os::unix::fs::symlink(sm.path(), &seen).unwrap();
        let hint =
            std::fs::read_to_string(seen.join("iceberg/metadata/version-hint.text")).unwrap();
        let meta = seen.join(format!("iceberg/metadata/v{}.metadata.json", hint.trim()));
        let code = "import sys; from pyiceberg.table import StaticTable; \
                    print(StaticTable.from_metadata(sys.argv[1]).scan().to_arrow().num_rows)";
        assert_eq!(
            support::printed(&support::python(), code, &[&meta]),
            want.to_string(),
            "{url}"
        );
        let scan = format!("iceberg_scan('{}')", meta.display());
        assert_eq!(
            support::duckdb_count(support::DUCKDB_ICEBERG_LOAD, &scan),
            want,
            "{url}"
        );
        std::fs::remove_file(&seen).unwrap();
    }
}
