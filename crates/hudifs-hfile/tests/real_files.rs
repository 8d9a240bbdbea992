//! The reader on HFiles written by Java Hudi: the `files` partition of the metadata table of
//! every fixture table that has one (base files, and the HFile data blocks of its log files),
//! plus truncated and corrupted copies of them.

use std::collections::BTreeSet;
use std::io::Read;

use hudifs_hfile::{HFileError, HFileReader};

/// One table's MDT `files` partition: its HFiles (base files and log-block contents), its
/// partition directories.
struct Table {
    name: String,
    hfiles: Vec<(String, Vec<u8>)>,
    partitions: BTreeSet<String>,
}

fn tables() -> Vec<Table> {
    let Some(dir) = hudifs_testkit::fixtures::dir() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for path in hudifs_testkit::fixtures::zips(&dir.join("tables")) {
        let file = std::fs::File::open(&path).unwrap();
        let mut archive = zip::ZipArchive::new(file).unwrap();
        let mut table = Table {
            name: path.file_stem().unwrap().to_string_lossy().into_owned(),
            hfiles: Vec::new(),
            partitions: BTreeSet::new(),
        };
        for i in 0..archive.len() {
            let mut entry = archive.by_index(i).unwrap();
            let name = entry.name().to_string();
            if name.starts_with("__MACOSX") {
                continue;
            }
            // `<table>/<partition>/.hoodie_partition_metadata` outside `.hoodie/`.
            if let Some(rest) = name.split_once('/').map(|(_, r)| r) {
                if !rest.starts_with(".hoodie/") {
                    if let Some(p) = rest.strip_suffix("/.hoodie_partition_metadata") {
                        table.partitions.insert(p.to_string());
                    } else if rest == ".hoodie_partition_metadata" {
                        table.partitions.insert(".".to_string());
                    }
                }
            }
            if !name.contains("/.hoodie/metadata/files/") {
                continue;
            }
            let base = name.rsplit('/').next().unwrap().to_string();
            let is_hfile = base.ends_with(".hfile");
            let is_log = base.starts_with(".files-") && base.contains(".log.");
            if !is_hfile && !is_log {
                continue;
            }
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes).unwrap();
            if is_hfile {
                table.hfiles.push((base, bytes));
            } else {
                let (blocks, _) = hudifs_core::logblock::scan_log_blocks(&bytes);
                for b in blocks.iter().filter(|b| b.block_type == 4) {
                    table
                        .hfiles
                        .push((format!("{base}@{}", b.offset), b.content.to_vec()));
                }
            }
        }
        if !table.hfiles.is_empty() {
            out.push(table);
        }
    }
    out
}

type Cells = Vec<(Vec<u8>, Vec<u8>)>;

fn scan_all(bytes: &[u8]) -> Result<Cells, HFileError> {
    let r = HFileReader::open(bytes)?;
    r.scan().collect()
}

#[test]
fn reads_every_metadata_table_hfile() {
    let tables = tables();
    if tables.is_empty() {
        return;
    }
    let mut base_files = 0;
    let mut log_blocks = 0;
    for t in &tables {
        for (name, bytes) in &t.hfiles {
            let what = format!("{}/{name}", t.name);
            let r = HFileReader::open(bytes.as_slice()).unwrap_or_else(|e| panic!("{what}: {e}"));
            let cells: Vec<_> = r
                .scan()
                .collect::<Result<_, _>>()
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(cells.len() as u64, r.entry_count(), "{what}");
            assert!(!cells.is_empty(), "{what}: no cells");
            assert!(
                cells.windows(2).all(|w| w[0].0 < w[1].0),
                "{what}: keys not strictly ascending"
            );
            assert!(r.file_info(b"hfile.LASTKEY").is_some(), "{what}");
            for (k, v) in &cells {
                assert!(!v.is_empty(), "{what}: empty value for {k:?}");
                assert_eq!(r.get(k).unwrap().as_ref(), Some(v), "{what}: get {k:?}");
                let mut longer = k.clone();
                longer.push(0);
                assert_eq!(r.get(&longer).unwrap(), None, "{what}");
                // Every prefix scan of a whole key finds that key (and only keys it prefixes).
                let found: Vec<_> = r.scan_prefix(k).collect::<Result<_, _>>().unwrap();
                assert!(found.iter().any(|(fk, _)| fk == k), "{what}: prefix {k:?}");
                assert!(found.iter().all(|(fk, _)| fk.starts_with(k)), "{what}");
            }
            for missing in [
                &b""[..],
                b"\x00",
                b"__all_partitions_",
                b"zzzz-not-a-key",
                b"\xff",
            ] {
                assert_eq!(r.get(missing).unwrap(), None, "{what}: {missing:?}");
            }
            let keys: Vec<&[u8]> = cells.iter().rev().map(|(k, _)| k.as_slice()).collect();
            let many = r.get_many(&keys).unwrap();
            for (k, v) in keys.iter().zip(&many) {
                let want = cells.iter().find(|(ck, _)| ck == k).map(|(_, v)| v);
                assert_eq!(v.as_ref(), want, "{what}");
            }
            if name.ends_with(".hfile") {
                base_files += 1;
                check_files_partition(t, &what, &cells);
            } else {
                log_blocks += 1;
            }
        }
    }
    eprintln!(
        "{} tables, {base_files} MDT base files, {log_blocks} HFile log blocks",
        tables.len()
    );
    assert!(base_files >= 20, "only {base_files} base files found");
    assert!(log_blocks >= 20, "only {log_blocks} HFile log blocks found");
}

/// A `files` partition base file: keyed by `__all_partitions__` and partition paths, each of
/// which is a partition of the table and is named in the `__all_partitions__` record.
fn check_files_partition(t: &Table, what: &str, cells: &[(Vec<u8>, Vec<u8>)]) {
    let all = cells
        .iter()
        .find(|(k, _)| k == b"__all_partitions__")
        .unwrap_or_else(|| panic!("{what}: no __all_partitions__ key"));
    for (k, _) in cells {
        if k == b"__all_partitions__" {
            continue;
        }
        let p = std::str::from_utf8(k).unwrap_or_else(|_| panic!("{what}: key {k:?}"));
        assert!(
            t.partitions.contains(p),
            "{what}: key {p:?} is not a partition of the table ({:?})",
            t.partitions
        );
        assert!(
            all.1.windows(k.len()).any(|w| w == k.as_slice()),
            "{what}: {p:?} is not in the __all_partitions__ record"
        );
    }
}

#[test]
fn truncated_and_corrupted_copies_fail_cleanly() {
    let tables = tables();
    let Some(t) = tables.iter().find(|t| t.name == "v9_txns_simple_meta") else {
        assert!(tables.is_empty(), "v9_txns_simple_meta has no MDT HFiles");
        return;
    };
    let (name, bytes) = t
        .hfiles
        .iter()
        .find(|(n, _)| n.ends_with(".hfile"))
        .unwrap();
    assert!(scan_all(bytes).is_ok());
    // Every truncation is an error: the trailer is the last 4096 bytes.
    for cut in 0..bytes.len() {
        assert!(scan_all(&bytes[..cut]).is_err(), "{name} cut at {cut}");
    }
    // Flipped bytes anywhere: an error or an answer, never a panic (checksums are not
    // verified, so a flip inside a value can go unseen).
    let mut errors = 0;
    for at in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut copy = bytes.clone();
            copy[at] ^= mask;
            if scan_all(&copy).is_err() {
                errors += 1;
            }
            if let Ok(r) = HFileReader::open(copy.as_slice()) {
                let _ = r.get(b"__all_partitions__");
                let _ = r.get_many(&[b"a".as_slice(), b"__all_partitions__"]);
            }
        }
    }
    assert!(errors > 0);
}

#[test]
fn hfile_log_block_of_the_data_table_fixture() {
    // `table_hfile_log_block`: a data table whose log holds an HFile data block of Avro
    // records keyed by record key.
    let Some(dir) = hudifs_testkit::fixtures::dir() else {
        return;
    };
    let path = dir.join("tables/quickstart_trips_table/mor/avro/table_hfile_log_block.zip");
    let mut archive = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut found = 0;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).unwrap();
        if !entry.name().contains(".log.") || entry.name().starts_with("__MACOSX") {
            continue;
        }
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        let (blocks, _) = hudifs_core::logblock::scan_log_blocks(&bytes);
        for b in blocks.iter().filter(|b| b.block_type == 4) {
            let r = HFileReader::open(b.content).unwrap();
            let cells = r.scan().collect::<Result<Vec<_>, _>>().unwrap();
            assert!(!cells.is_empty());
            assert!(r.file_info(b"schema").is_some());
            found += cells.len();
        }
    }
    assert!(found > 0);
}
