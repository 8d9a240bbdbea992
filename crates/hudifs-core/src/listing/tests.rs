//! Tests of the name grammars and of the compact data file.

use super::*;
use std::sync::Arc;
use std::time::SystemTime;

fn exts() -> Vec<String> {
    vec!["parquet".to_string()]
}

#[test]
fn base_names() {
    let b = parse_base_name(
        "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_0-13-23_20250126040823628.parquet",
        &exts(),
    )
    .unwrap();
    assert_eq!(b.file_id, "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0");
    assert_eq!(b.write_token, "0-13-23");
    assert_eq!(b.instant, "20250126040823628");
    assert_eq!(
        base_file_name(&b.file_id, &b.write_token, &b.instant, &b.ext),
        "0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_0-13-23_20250126040823628.parquet"
    );
    for bad in [
        "part-00000-abc.snappy.parquet",
        "a_b_c_d.parquet",
        "f_0-1-2_2024x.parquet",
        "f_0-1_20240101000000000.parquet",
        ".f_0-1-2_20240101000000000.parquet",
        "f_0-1-2_20240101000000000.orc",
        "_0-1-2_20240101000000000.parquet",
    ] {
        assert_eq!(parse_base_name(bad, &exts()), None, "{bad}");
    }
}

#[test]
fn log_names() {
    let l = parse_log_name(".8aa68f7e-ab-0_20251220210125441.log.1_0-1047-3000").unwrap();
    assert_eq!(l.file_id, "8aa68f7e-ab-0");
    assert_eq!(l.instant, "20251220210125441");
    assert_eq!(l.version, 1);
    assert_eq!(l.write_token, "0-1047-3000");
    assert_eq!(
        log_file_name(&l.file_id, &l.instant, l.version, &l.write_token),
        ".8aa68f7e-ab-0_20251220210125441.log.1_0-1047-3000"
    );
    for bad in [
        ".f_20240101000000000.log.1_0-1-2-cdc",
        ".f_20240101000000000.log.1_0-1-2.cdc",
        ".commits_.archive.1_1-0-1",
        ".f_20240101000000000.log.x_0-1-2",
        "f_20240101000000000.log.1_0-1-2",
        ".hoodie_partition_metadata",
    ] {
        assert_eq!(parse_log_name(bad), None, "{bad}");
    }
    assert!(parse_data_name(".abc_0-1-2_20240101000000000.parquet.crc", &exts()).is_none());
}

#[test]
fn compact_data_files() {
    let p: Arc<str> = Arc::from("city=x");
    let t = SystemTime::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 123);
    let b = DataFile::new(
        p.clone(),
        "f-1_0-1-2_20240101000000000.parquet",
        &exts(),
        10,
        t,
        0o644,
    )
    .unwrap();
    assert_eq!(
        (b.file_id(), b.write_token(), b.instant()),
        ("f-1", "0-1-2", "20240101000000000")
    );
    assert!(b.is_base());
    assert_eq!(b.mtime(), t);
    assert_eq!(b.rel_path(), "city=x/f-1_0-1-2_20240101000000000.parquet");
    let l = DataFile::new(
        p,
        ".f-1_20240101000000000.log.3_1-2-3",
        &exts(),
        10,
        t,
        0o644,
    )
    .unwrap();
    assert_eq!(
        (l.file_id(), l.write_token(), l.instant(), l.log_version()),
        ("f-1", "1-2-3", "20240101000000000", 3)
    );
    assert!(!l.is_base());
    // A file id that also occurs as the token's digits is still located by position.
    let odd = DataFile::new(
        Arc::from(""),
        "0-1-2_0-1-2_20240101000000000.parquet",
        &exts(),
        1,
        t,
        0,
    )
    .unwrap();
    assert_eq!((odd.file_id(), odd.write_token()), ("0-1-2", "0-1-2"));
    // One thin pointer to one allocation, the name's bytes right after the fields: 134 bytes
    // for a name of 77 (a uuid file id, a token, an instant and `.parquet`).
    assert_eq!(std::mem::size_of::<DataFile>(), 8);
    assert_eq!(std::mem::size_of::<Option<DataFile>>(), 8);
    assert!(DataFile::allocation_size(&"n".repeat(77)) <= 134);
    let c = b.clone();
    assert_eq!(c, b);
    assert_eq!(c.name(), b.name());
    drop(b);
    assert_eq!(c.name(), "f-1_0-1-2_20240101000000000.parquet");
    assert_eq!((c.size(), c.mode(), &*c.partition), (10, 0o644, "city=x"));
}

#[test]
fn a_file_listed_by_name_reads_zero_until_stated_and_then_every_handle_knows() {
    let f = DataFile::unstatted(
        Arc::from("p"),
        "f-1_0-1-2_20240101000000000.parquet",
        &exts(),
    )
    .unwrap();
    let other = f.clone();
    assert!(!f.is_stated());
    assert_eq!(
        (f.size(), f.mode(), f.mtime()),
        (0, 0, std::time::SystemTime::UNIX_EPOCH)
    );
    let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 5);
    f.set_meta(42, t, 0o100644);
    assert!(other.is_stated());
    assert_eq!((other.size(), other.mode(), other.mtime()), (42, 0o644, t));
    // A stated file equals one made with its attributes, an unstated one does not.
    let made = DataFile::new(Arc::from("p"), f.name(), &exts(), 42, t, 0o644).unwrap();
    assert_eq!(made, other);
    let bare = DataFile::unstatted(Arc::from("p"), f.name(), &exts()).unwrap();
    assert_ne!(bare, made);
    assert!(DataFile::unstatted(Arc::from("p"), "README.md", &exts()).is_none());
}
