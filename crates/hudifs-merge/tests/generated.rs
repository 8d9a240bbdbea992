//! Generated slices for what the fixture tables lack: v6 logs holding several instants and a
//! rollback, pending-compaction slices, event-time ordering with late older records, deletes of
//! keys only in logs, partial updates, log compaction, schema evolution, tables without meta
//! fields, every refusal (unsupported, corrupt, too big, inputs vanishing mid-merge),
//! determinism, and the disk cache. Log files are written with the project's own block writer
//! (`hudifs_testkit::generator::blocks`), base files with parquet's Arrow writer, all in a
//! `MemStore` (or a `FaultyStore` over one).

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use hudifs_merge::{
    merge_slice, prepare, CacheOptions, CdcGroup, CdcStep, Ensured, GroupState, InputFile,
    MergeCache, MergeConfig, MergeOptions, Plan, Refusal, Slice,
};
use hudifs_storage::MemoryCeiling;
use hudifs_storage::{Fault, FaultyStore, MemStore, Op, Rule, Storage, StorageWrite, TablePath};
use hudifs_testkit::generator::blocks::{self, DeleteOrdering};

const SCHEMA: &str = r#"{"type":"record","name":"r","namespace":"hoodie.t","fields":[
 {"name":"_hoodie_commit_time","type":["null","string"],"default":null},
 {"name":"_hoodie_record_key","type":["null","string"],"default":null},
 {"name":"id","type":"string"},
 {"name":"v","type":["null","long"],"default":null},
 {"name":"ts","type":"long"}]}"#;

/// Without `v` (a partial update of `ts` only), and with an added column `extra`.
const SCHEMA_TS_ONLY: &str = r#"{"type":"record","name":"r","namespace":"hoodie.t","fields":[
 {"name":"_hoodie_commit_time","type":["null","string"],"default":null},
 {"name":"_hoodie_record_key","type":["null","string"],"default":null},
 {"name":"id","type":"string"},
 {"name":"ts","type":"long"}]}"#;
const SCHEMA_EXTRA: &str = r#"{"type":"record","name":"r","namespace":"hoodie.t","fields":[
 {"name":"_hoodie_commit_time","type":["null","string"],"default":null},
 {"name":"_hoodie_record_key","type":["null","string"],"default":null},
 {"name":"id","type":"string"},
 {"name":"v","type":["null","long"],"default":null},
 {"name":"ts","type":"long"},
 {"name":"extra","type":["null","string"],"default":null}]}"#;

fn zz(out: &mut Vec<u8>, n: i64) {
    let mut z = ((n << 1) ^ (n >> 63)) as u64;
    loop {
        let b = (z & 0x7f) as u8;
        z >>= 7;
        if z == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}
fn s(out: &mut Vec<u8>, v: &str) {
    zz(out, v.len() as i64);
    out.extend_from_slice(v.as_bytes());
}

/// A record of `SCHEMA`.
fn rec(commit: &str, key: &str, v: Option<i64>, ts: i64) -> Vec<u8> {
    let mut r = Vec::new();
    zz(&mut r, 1);
    s(&mut r, commit);
    zz(&mut r, 1);
    s(&mut r, key);
    s(&mut r, key);
    match v {
        None => zz(&mut r, 0),
        Some(v) => {
            zz(&mut r, 1);
            zz(&mut r, v)
        }
    }
    zz(&mut r, ts);
    r
}

fn rec_ts_only(commit: &str, key: &str, ts: i64) -> Vec<u8> {
    let mut r = Vec::new();
    zz(&mut r, 1);
    s(&mut r, commit);
    zz(&mut r, 1);
    s(&mut r, key);
    s(&mut r, key);
    zz(&mut r, ts);
    r
}

fn rec_extra(commit: &str, key: &str, v: i64, ts: i64, extra: &str) -> Vec<u8> {
    let mut r = rec(commit, key, Some(v), ts);
    zz(&mut r, 1);
    s(&mut r, extra);
    r
}

/// A Parquet file of one row group of `cols`.
fn parquet_of(schema: Arc<Schema>, cols: Vec<ArrayRef>) -> Vec<u8> {
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let mut out = Vec::new();
    let mut w = parquet::arrow::ArrowWriter::try_new(&mut out, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    out
}

/// A base file of rows (commit, key, v, ts).
fn base_parquet(rows: &[(&str, &str, Option<i64>, i64)]) -> Vec<u8> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("_hoodie_commit_time", DataType::Utf8, true),
        Field::new("_hoodie_record_key", DataType::Utf8, true),
        Field::new("id", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
        Field::new("ts", DataType::Int64, false),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.2))),
        Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
    ];
    parquet_of(schema, cols)
}

/// Rows of a merged file: key → (v, ts, commit time).
fn read_rows(bytes: &[u8]) -> BTreeMap<String, (Option<i64>, i64, String)> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::copy_from_slice(bytes),
    )
    .unwrap()
    .build()
    .unwrap();
    let mut out = BTreeMap::new();
    for b in reader {
        let b = b.unwrap();
        let key = b
            .column_by_name("_hoodie_record_key")
            .unwrap()
            .as_string::<i32>()
            .clone();
        let commit = b
            .column_by_name("_hoodie_commit_time")
            .unwrap()
            .as_string::<i32>()
            .clone();
        let v = b
            .column_by_name("v")
            .map(|c| c.as_primitive::<Int64Type>().clone());
        let ts = b
            .column_by_name("ts")
            .unwrap()
            .as_primitive::<Int64Type>()
            .clone();
        for i in 0..b.num_rows() {
            let v = v.as_ref().and_then(|v| (!v.is_null(i)).then(|| v.value(i)));
            let prev = out.insert(
                key.value(i).to_string(),
                (v, ts.value(i), commit.value(i).to_string()),
            );
            assert!(prev.is_none(), "duplicate key {} in output", key.value(i));
        }
    }
    out
}

fn props(kv: &[(&str, &str)]) -> MergeConfig {
    let mut p: BTreeMap<String, String> = kv
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    p.entry("hoodie.table.version".into())
        .or_insert_with(|| "9".into());
    MergeConfig::from_properties(&p).unwrap()
}

fn commit_time() -> MergeConfig {
    props(&[("hoodie.record.merge.mode", "COMMIT_TIME_ORDERING")])
}
fn event_time() -> MergeConfig {
    props(&[
        ("hoodie.record.merge.mode", "EVENT_TIME_ORDERING"),
        ("hoodie.table.ordering.fields", "ts"),
    ])
}

/// A table merged by the payload class `class`, ordered on `ts`: on version 6 by its payload
/// class; on versions 8 and 9 with merge mode `CUSTOM` and the payload-based strategy, as
/// Hudi 1.0 creates such tables and Hudi 1.1's upgrade leaves the payloads it does not map.
fn payload_merged(version: u32, class: &str) -> MergeConfig {
    let version = version.to_string();
    let mut kv = vec![
        ("hoodie.table.version", version.as_str()),
        ("hoodie.compaction.payload.class", class),
    ];
    if version == "6" {
        kv.push(("hoodie.table.precombine.field", "ts"));
    } else {
        kv.push(("hoodie.record.merge.mode", "CUSTOM"));
        kv.push((
            "hoodie.record.merge.strategy.id",
            "00000000-0000-0000-0000-000000000000",
        ));
        kv.push(("hoodie.table.ordering.fields", "ts"));
    }
    props(&kv)
}

/// A log file of group f1 at `instant` holding one Avro data block of `records` (`SCHEMA`).
fn avro_log(t: &Table, instant: &str, records: &[Vec<u8>]) -> InputFile {
    let name = format!("p/.f1_{instant}.log.1_0-1-1");
    t.put(&name, &blocks::avro_data(instant, SCHEMA, records, &[]))
}

/// The rows of `sl` merged under `cfg` with every instant visible.
fn merged_rows(
    t: &Table,
    cfg: &MergeConfig,
    sl: &Slice,
) -> BTreeMap<String, (Option<i64>, i64, String)> {
    let opts = MergeOptions::default();
    read_rows(&merge(&*t.store, cfg, sl, |_: &str| true, &opts).unwrap())
}

struct Table {
    store: Arc<MemStore>,
}

impl Table {
    fn new() -> Table {
        Table {
            store: Arc::new(MemStore::new("gen")),
        }
    }
    fn put(&self, path: &str, bytes: &[u8]) -> InputFile {
        let p = TablePath::new(path).unwrap();
        self.store.put(&p, bytes).unwrap();
        InputFile::new(p, Some(bytes.len() as u64))
    }
}

fn slice(base: Option<InputFile>, logs: Vec<InputFile>) -> Slice {
    Slice {
        partition: "p".into(),
        file_id: "f1".into(),
        instant: "001".into(),
        base,
        logs,
        keep_commits: None,
        schema: None,
        source: None,
    }
}

fn merge(
    store: &dyn Storage,
    cfg: &MergeConfig,
    sl: &Slice,
    visible: impl Fn(&str) -> bool + Sync,
    opts: &MergeOptions,
) -> Result<Vec<u8>, hudifs_merge::MergeError> {
    let mut out = Vec::new();
    match merge_slice(store, cfg, sl, &visible, opts, &mut out)? {
        Some(_) => Ok(out),
        None => {
            let b = sl.base.as_ref().unwrap();
            Ok(store.read(&b.path).unwrap())
        }
    }
}

const BASE: &[(&str, &str, Option<i64>, i64)] = &[
    ("001", "k1", Some(1), 10),
    ("001", "k2", Some(1), 10),
    ("001", "k3", Some(1), 10),
];

#[test]
fn v6_appended_log_with_several_instants_and_a_rollback() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    // One v6 log file (named after the base instant 001) with the blocks of three
    // deltacommits, the second of which failed and was rolled back by 004.
    let log = [
        blocks::avro_data("002", SCHEMA, &[rec("002", "k1", Some(2), 11)], &[]),
        blocks::avro_data(
            "003",
            SCHEMA,
            &[rec("003", "k1", Some(3), 12), rec("003", "k9", Some(3), 12)],
            &[],
        ),
        blocks::rollback("004", "003"),
        blocks::avro_data("005", SCHEMA, &[rec("005", "k2", Some(5), 13)], &[]),
    ]
    .concat();
    let log = t.put("p/.f1_001.log.1_0-1-1", &log);
    let sl = slice(Some(base), vec![log]);
    let committed = |i: &str| ["001", "002", "005"].contains(&i);
    let cfg = props(&[("hoodie.table.version", "6")]);
    let rows =
        read_rows(&merge(&*t.store, &cfg, &sl, committed, &MergeOptions::default()).unwrap());
    assert_eq!(rows["k1"].0, Some(2), "the rolled-back 003 does not count");
    assert_eq!(rows["k2"].0, Some(5));
    assert_eq!(rows["k3"].0, Some(1));
    assert!(!rows.contains_key("k9"));
    // The view as of 002 sees only the first block.
    let as_of = |i: &str| committed(i) && i <= "002";
    let rows = read_rows(&merge(&*t.store, &cfg, &sl, as_of, &MergeOptions::default()).unwrap());
    assert_eq!((rows["k1"].0, rows["k2"].0), (Some(2), Some(1)));
    // Before any block counts the merged file is the base file itself.
    let p = prepare(
        &*t.store,
        &cfg,
        &sl,
        &|i: &str| i <= "001",
        &MergeOptions::default(),
    )
    .unwrap();
    assert_eq!(p.plan(), Plan::BaseUnchanged);
}

#[test]
fn pending_compaction_slice_merges_both_logs_in_order() {
    // v6: compaction 003 is pending; the view shows base 001 with the log of slice 001
    // (written by 002) and the log named after the pending compaction (written by 004).
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let l1 = t.put(
        "p/.f1_001.log.1_0-1-1",
        &blocks::avro_data("002", SCHEMA, &[rec("002", "k1", Some(2), 11)], &[]),
    );
    let l2 = t.put(
        "p/.f1_003.log.1_0-1-1",
        &blocks::avro_data(
            "004",
            SCHEMA,
            &[rec("004", "k1", Some(4), 12), rec("004", "k4", Some(4), 12)],
            &[],
        ),
    );
    // Given in the wrong order: the engine orders logs as Java does.
    let sl = slice(Some(base), vec![l2, l1]);
    let rows = merged_rows(&t, &commit_time(), &sl);
    assert_eq!(rows["k1"], (Some(4), 12, "004".into()));
    assert_eq!(rows["k4"].0, Some(4));
    assert_eq!(rows.len(), 4);
}

#[test]
fn event_time_ordering_with_late_older_records() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let l1 = avro_log(
        &t,
        "002",
        &[
            rec("002", "k1", Some(2), 5),  // older than the base row: loses
            rec("002", "k2", Some(2), 20), // newer: wins
            rec("002", "k3", Some(2), 10), // a tie: the later write wins
            rec("002", "k7", Some(2), 9),
        ],
    );
    let l2 = avro_log(
        &t,
        "003",
        &[rec("003", "k7", Some(3), 8), rec("003", "k2", Some(3), 30)],
    );
    let sl = slice(Some(base), vec![l1, l2]);
    let rows = merged_rows(&t, &event_time(), &sl);
    assert_eq!(rows["k1"], (Some(1), 10, "001".into()));
    assert_eq!(rows["k2"], (Some(3), 30, "003".into()));
    assert_eq!(rows["k3"], (Some(2), 10, "002".into()));
    assert_eq!(
        rows["k7"],
        (Some(2), 9, "002".into()),
        "a late older log record loses"
    );
    // Commit-time ordering takes the later write regardless.
    let rows = merged_rows(&t, &commit_time(), &sl);
    assert_eq!(rows["k1"].0, Some(2));
    assert_eq!(rows["k7"].0, Some(3));
}

/// `PartialUpdateAvroPayload`: the record with the greater ordering value wins with its nulls
/// filled from the other; where the stored record wins (strictly greater), the meta columns are
/// the incoming record's (`mergeDisorderRecordsWithMetadata`); a delete wins whatever its order.
#[test]
fn partial_update_payload_fills_nulls_and_keeps_the_incoming_meta_columns() {
    let t = Table::new();
    let base = t.put(
        "p/f1_0-1-1_001.parquet",
        &base_parquet(&[
            ("001", "k1", Some(1), 10),
            ("001", "k2", Some(1), 10),
            ("001", "k3", None, 50),
            ("001", "k4", Some(1), 10),
        ]),
    );
    let l1 = avro_log(
        &t,
        "002",
        &[
            rec("002", "k1", None, 20),    // newer: its null takes the base's value
            rec("002", "k2", Some(2), 5),  // older: the base's values, 002's meta columns
            rec("002", "k3", Some(3), 40), // older: fills the base's null
            rec("002", "k7", None, 9),
            rec("002", "k8", Some(8), 1),
        ],
    );
    let l2 = avro_log(
        &t,
        "003",
        &[rec("003", "k7", Some(7), 8), rec("003", "k8", None, 2)],
    );
    let l3 = t.put(
        "p/.f1_004.log.1_0-1-1",
        &blocks::delete("004", SCHEMA, &[("k4", "p", DeleteOrdering::None)]),
    );
    let sl = slice(Some(base), vec![l1, l2, l3]);
    let payload = "org.apache.hudi.common.model.PartialUpdateAvroPayload";
    for (what, cfg) in [
        ("v6", payload_merged(6, payload)),
        ("v8 merged by its payload", payload_merged(8, payload)),
    ] {
        let rows = merged_rows(&t, &cfg, &sl);
        assert_eq!(rows["k1"], (Some(1), 20, "002".into()), "{what}");
        assert_eq!(
            rows["k2"],
            (Some(1), 10, "002".into()),
            "{what}: the incoming meta"
        );
        assert_eq!(rows["k3"], (Some(3), 50, "002".into()), "{what}");
        assert!(!rows.contains_key("k4"), "{what}: a delete wins");
        assert_eq!(
            rows["k7"],
            (Some(7), 9, "003".into()),
            "{what}: between logs"
        );
        assert_eq!(rows["k8"], (Some(8), 2, "003".into()), "{what}");
    }
    let cfg = payload_merged(6, payload);
    // An older `_hoodie_is_deleted` record deletes all the same.
    let l4 = t.put(
        "p/.f1_005.log.1_0-1-1",
        &blocks::avro_data(
            "005",
            SCHEMA_DELETED,
            &[rec_deleted("005", "k2", 5, true)],
            &[],
        ),
    );
    let sl = slice(sl.base.clone(), vec![sl.logs[0].clone(), l4.clone()]);
    let merged = merge(
        &*t.store,
        &cfg,
        &sl,
        |_: &str| true,
        &MergeOptions::default(),
    );
    assert!(!read_rows(&merged.unwrap()).contains_key("k2"));
    // A deleted record ordered after a later record: Hudi's releases disagree, refused.
    let l5 = avro_log(&t, "006", &[rec("006", "k2", Some(6), 1)]);
    let sl = slice(sl.base.clone(), vec![l4, l5]);
    let e = merge(
        &*t.store,
        &cfg,
        &sl,
        |_: &str| true,
        &MergeOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.errno(), libc::EOPNOTSUPP, "{e}");
    assert!(
        e.to_string().contains("Hudi releases merge it differently"),
        "{e}"
    );
}

/// `FirstValueAvroPayload`: the greater ordering value wins as under event time, but a tie keeps
/// the record written first, between log records and against the base file; without a
/// precombine field the later write wins.
#[test]
fn first_value_payload_ties_keep_the_first_record() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let l1 = avro_log(
        &t,
        "002",
        &[
            rec("002", "k1", Some(2), 5),  // older than the base row: loses
            rec("002", "k2", Some(2), 20), // newer: wins
            rec("002", "k3", Some(2), 10), // a tie with the base row: the base stays
            rec("002", "k7", Some(2), 9),
        ],
    );
    let l2 = avro_log(
        &t,
        "003",
        &[rec("003", "k7", Some(3), 9), rec("003", "k2", Some(3), 20)],
    );
    let sl = slice(Some(base), vec![l1, l2]);
    let payload = "org.apache.hudi.common.model.FirstValueAvroPayload";
    for (what, cfg) in [
        ("v6", payload_merged(6, payload)),
        (
            "v9 left merged by its payload by the upgrade",
            payload_merged(9, payload),
        ),
    ] {
        assert!(
            cfg.rules().contains("ties:older"),
            "{what}: {}",
            cfg.rules()
        );
        let rows = merged_rows(&t, &cfg, &sl);
        assert_eq!(rows["k1"], (Some(1), 10, "001".into()), "{what}");
        assert_eq!(
            rows["k2"],
            (Some(2), 20, "002".into()),
            "{what}: ties between logs"
        );
        assert_eq!(
            rows["k3"],
            (Some(1), 10, "001".into()),
            "{what}: a tie keeps the base"
        );
        assert_eq!(
            rows["k7"],
            (Some(2), 9, "002".into()),
            "{what}: only in logs"
        );
    }
    // Without a precombine field, the later write wins (needUpdatingPersistedRecord answers true).
    let cfg = props(&[
        ("hoodie.table.version", "6"),
        ("hoodie.compaction.payload.class", payload),
    ]);
    let rows = merged_rows(&t, &cfg, &sl);
    assert_eq!(rows["k1"].0, Some(2));
    assert_eq!(rows["k2"].0, Some(3));
    assert_eq!(rows["k7"].0, Some(3));
    // The default payload breaks the same ties the other way: the test can tell them apart.
    let rows = merged_rows(&t, &event_time(), &sl);
    assert_eq!(rows["k3"].0, Some(2));
    assert_eq!(rows["k7"].0, Some(3));
    // A delete block with the default ordering value deletes; one with ordering values is
    // refused (Hudi 0.x and 1.x disagree on it).
    let deletes = |name: &str, ord: DeleteOrdering| {
        t.put(name, &blocks::delete("004", SCHEMA, &[("k1", "p", ord)]))
    };
    let cfg = payload_merged(6, payload);
    let with = |l: InputFile| slice(sl.base.clone(), vec![sl.logs[0].clone(), l]);
    let plain = with(deletes("p/.f1_004.log.1_0-1-1", DeleteOrdering::None));
    let merged = merge(
        &*t.store,
        &cfg,
        &plain,
        |_: &str| true,
        &MergeOptions::default(),
    );
    assert!(!read_rows(&merged.unwrap()).contains_key("k1"));
    let ordered = with(deletes("p/.f1_005.log.1_0-1-1", DeleteOrdering::Long(1)));
    let e = merge(
        &*t.store,
        &cfg,
        &ordered,
        |_: &str| true,
        &MergeOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.errno(), libc::EOPNOTSUPP, "{e}");
}

/// Null values stand for "keep the other record's" under version 9's `IGNORE_DEFAULTS` and
/// `OverwriteNonDefaultsWithLatestAvroPayload` (every default here is null): the winner of each
/// merge takes the loser's values for its nulls, also a base record that wins; a record that
/// merges with nothing keeps its nulls. A non-null default in a block's schema is refused.
#[test]
fn null_values_keep_the_other_records_where_defaults_are_ignored() {
    let t = Table::new();
    let base = t.put(
        "p/f1_0-1-1_001.parquet",
        &base_parquet(&[
            ("001", "k1", Some(1), 10),
            ("001", "k2", Some(1), 10),
            ("001", "k3", Some(1), 10),
            ("001", "k4", None, 50),
        ]),
    );
    let l1 = avro_log(
        &t,
        "002",
        &[
            rec("002", "k1", None, 20),
            rec("002", "k2", Some(2), 5),
            rec("002", "k4", Some(4), 40),
            rec("002", "k7", None, 9),
            rec("002", "k8", Some(8), 1),
            rec("002", "k9", None, 1),
        ],
    );
    let l2 = avro_log(
        &t,
        "003",
        &[
            rec("003", "k7", Some(7), 8),
            rec("003", "k3", None, 30),
            rec("003", "k8", None, 2),
        ],
    );
    let sl = slice(Some(base), vec![l1, l2]);
    let run = |cfg: &MergeConfig| merged_rows(&t, cfg, &sl);
    let mode = "hoodie.table.partial.update.mode";
    let rows = run(&props(&[
        ("hoodie.record.merge.mode", "EVENT_TIME_ORDERING"),
        ("hoodie.table.ordering.fields", "ts"),
        (mode, "IGNORE_DEFAULTS"),
    ]));
    assert_eq!(
        rows["k1"],
        (Some(1), 20, "002".into()),
        "a newer null keeps the base's"
    );
    assert_eq!(rows["k2"], (Some(1), 10, "001".into()), "the base wins");
    assert_eq!(rows["k3"], (Some(1), 30, "003".into()));
    assert_eq!(
        rows["k4"],
        (Some(4), 50, "001".into()),
        "a winning base's null is filled"
    );
    assert_eq!(
        rows["k7"],
        (Some(7), 9, "002".into()),
        "a winning older log's null"
    );
    assert_eq!(rows["k8"], (Some(8), 2, "003".into()));
    assert_eq!(rows["k9"], (None, 1, "002".into()), "merged with nothing");
    for (what, cfg) in [
        (
            "v9 commit time",
            props(&[
                ("hoodie.record.merge.mode", "COMMIT_TIME_ORDERING"),
                (mode, "IGNORE_DEFAULTS"),
            ]),
        ),
        (
            "v6 OverwriteNonDefaultsWithLatestAvroPayload",
            payload_merged(
                6,
                "org.apache.hudi.common.model.OverwriteNonDefaultsWithLatestAvroPayload",
            ),
        ),
    ] {
        let rows = run(&cfg);
        assert_eq!(rows["k1"], (Some(1), 20, "002".into()), "{what}");
        assert_eq!(rows["k2"], (Some(2), 5, "002".into()), "{what}");
        assert_eq!(rows["k3"], (Some(1), 30, "003".into()), "{what}");
        assert_eq!(rows["k4"], (Some(4), 40, "002".into()), "{what}");
        assert_eq!(rows["k7"], (Some(7), 8, "003".into()), "{what}");
        assert_eq!(
            rows["k8"],
            (Some(8), 2, "003".into()),
            "{what}: a null between logs"
        );
        assert_eq!(rows["k9"], (None, 1, "002".into()), "{what}");
    }
    // Without the mode, nulls are values.
    assert_eq!(run(&commit_time())["k1"].0, None);

    // A schema that gives a field a non-null default: refused, not guessed.
    let with_default = SCHEMA.replace(
        r#"{"name":"ts","type":"long"}"#,
        r#"{"name":"ts","type":"long","default":0}"#,
    );
    assert_ne!(with_default, SCHEMA);
    let l3 = t.put(
        "p/.f1_004.log.1_0-1-1",
        &blocks::avro_data("004", &with_default, &[rec("004", "k1", None, 60)], &[]),
    );
    let sl = slice(sl.base.clone(), vec![sl.logs[0].clone(), l3]);
    let cfg = props(&[
        ("hoodie.record.merge.mode", "COMMIT_TIME_ORDERING"),
        (mode, "IGNORE_DEFAULTS"),
    ]);
    let e = merge(
        &*t.store,
        &cfg,
        &sl,
        |_: &str| true,
        &MergeOptions::default(),
    )
    .unwrap_err();
    assert_eq!(e.errno(), libc::EOPNOTSUPP, "{e}");
    assert!(e.to_string().contains("field ts the default 0"), "{e}");
    assert!(merge(
        &*t.store,
        &commit_time(),
        &sl,
        |_: &str| true,
        &MergeOptions::default()
    )
    .is_ok());
}

#[test]
fn deletes_of_keys_only_in_logs_and_default_ordering_deletes() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let l1 = avro_log(
        &t,
        "002",
        &[rec("002", "k5", Some(2), 50), rec("002", "k6", Some(2), 50)],
    );
    let l2 = t.put(
        "p/.f1_003.log.1_0-1-1",
        &blocks::delete(
            "003",
            SCHEMA,
            &[
                ("k5", "p", DeleteOrdering::None),    // a key only in logs
                ("k1", "p", DeleteOrdering::Long(1)), // older than the base row (ts 10)
                ("k2", "p", DeleteOrdering::Int(0)),  // the default ordering value: wins
                ("k6", "p", DeleteOrdering::Long(40)),
            ],
        ),
    );
    let sl = slice(Some(base), vec![l1, l2]);
    let rows = merged_rows(&t, &event_time(), &sl);
    assert!(!rows.contains_key("k5"));
    assert!(
        rows.contains_key("k1"),
        "a delete with a lower ordering value loses"
    );
    assert!(!rows.contains_key("k2"));
    assert!(
        rows.contains_key("k6"),
        "a delete older than the log record loses"
    );
    let rows = merged_rows(&t, &commit_time(), &sl);
    assert_eq!(rows.keys().collect::<Vec<_>>(), ["k3"]);
}

#[test]
fn partial_updates_log_compaction_and_added_columns() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    // A partial update of ts only: v keeps the base value.
    let l1 = t.put(
        "p/.f1_002.log.1_0-1-1",
        &blocks::avro_data(
            "002",
            SCHEMA_TS_ONLY,
            &[rec_ts_only("002", "k1", 99)],
            &[(blocks::IS_PARTIAL, "true")],
        ),
    );
    let l2 = avro_log(&t, "003", &[rec("003", "k2", Some(3), 11)]);
    let l3 = avro_log(&t, "004", &[rec("004", "k2", Some(4), 12)]);
    // Log compaction 006 of 002 and 003, holding their merged records; 004 was written
    // meanwhile and still overrides it.
    let l4 = t.put(
        "p/.f1_006.log.1_0-1-1",
        &blocks::avro_data(
            "006",
            SCHEMA,
            &[rec("002", "k1", Some(1), 99), rec("003", "k2", Some(3), 11)],
            &[(blocks::COMPACTED_BLOCK_TIMES, "002,003")],
        ),
    );
    let sl = slice(
        Some(base.clone()),
        vec![l1.clone(), l2.clone(), l3.clone(), l4],
    );
    let rows = merged_rows(&t, &commit_time(), &sl);
    assert_eq!(rows["k1"], (Some(1), 99, "002".into()));
    assert_eq!(rows["k2"], (Some(4), 12, "004".into()));
    // Without the compacted block: the partial update alone.
    let sl = slice(Some(base.clone()), vec![l1]);
    let rows = merged_rows(&t, &commit_time(), &sl);
    assert_eq!(rows["k1"], (Some(1), 99, "002".into()));
    // A column added by a later schema is added to the output, null for older rows.
    let l5 = t.put(
        "p/.f1_007.log.1_0-1-1",
        &blocks::avro_data(
            "007",
            SCHEMA_EXTRA,
            &[rec_extra("007", "k3", 7, 70, "new")],
            &[],
        ),
    );
    let sl = slice(Some(base), vec![l5]);
    let out = merge(
        &*t.store,
        &commit_time(),
        &sl,
        |_: &str| true,
        &MergeOptions::default(),
    )
    .unwrap();
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(out),
    )
    .unwrap();
    let names: Vec<String> = reader
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(names.last().map(String::as_str), Some("extra"));
    let batch = reader.build().unwrap().next().unwrap().unwrap();
    assert_eq!(batch.column_by_name("extra").unwrap().null_count(), 2);
}

#[test]
fn log_only_slices_and_tables_without_meta_fields() {
    let t = Table::new();
    let l1 = avro_log(
        &t,
        "002",
        &[rec("002", "b", Some(2), 1), rec("002", "a", Some(2), 1)],
    );
    let l2 = t.put(
        "p/.f1_003.log.1_0-1-1",
        &blocks::delete("003", SCHEMA, &[("a", "p", DeleteOrdering::None)]),
    );
    let sl = slice(None, vec![l1.clone(), l2.clone()]);
    let rows = merged_rows(&t, &commit_time(), &sl);
    assert_eq!(rows.keys().collect::<Vec<_>>(), ["b"]);
    // Without meta fields the keys are rebuilt from `id` (complex: `id:<value>`), and the
    // delete block's keys are in that form.
    let cfg = props(&[
        ("hoodie.populate.meta.fields", "false"),
        ("hoodie.table.recordkey.fields", "id"),
        ("hoodie.table.keygenerator.type", "COMPLEX"),
    ]);
    let l3 = t.put(
        "p/.f1_004.log.1_0-1-1",
        &blocks::delete("004", SCHEMA, &[("id:b", "p", DeleteOrdering::None)]),
    );
    let sl = slice(None, vec![l1, l2, l3]);
    let mut out = Vec::new();
    let stats = merge_slice(
        &*t.store,
        &cfg,
        &sl,
        &|_: &str| true,
        &MergeOptions::default(),
        &mut out,
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        stats.rows, 1,
        "'a' (a plain key) is not this table's key; 'id:b' is"
    );
}

fn errno_of(r: Result<Vec<u8>, hudifs_merge::MergeError>) -> (Refusal, i32, String) {
    let e = r.expect_err("must be refused");
    (e.kind, e.errno(), e.to_string())
}

#[test]
fn refusals() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let all = |_: &str| true;
    let opts = MergeOptions::default();
    let cfg = commit_time();
    let one = |name: &str, bytes: Vec<u8>| slice(Some(base.clone()), vec![t.put(name, &bytes)]);
    let cases: Vec<(&str, Slice, Refusal)> = vec![
        (
            "HFile data block that is not an HFile",
            one(
                "p/.f1_002.log.1_0-1-1",
                blocks::raw(blocks::HFILE_DATA, &[(0, "002"), (2, SCHEMA)], b"HFILEBLK"),
            ),
            Refusal::Corrupt,
        ),
        (
            "CDC block",
            one(
                "p/.f1_003.log.1_0-1-1",
                blocks::raw(blocks::CDC_DATA, &[(0, "003"), (2, SCHEMA)], b""),
            ),
            Refusal::Unsupported,
        ),
        (
            "Kryo delete block",
            one(
                "p/.f1_004.log.1_0-1-1",
                blocks::raw(blocks::DELETE, &[(0, "004")], &[0, 0, 0, 2, 0, 0, 0, 1, 7]),
            ),
            Refusal::Unsupported,
        ),
        (
            "Avro data block version 2",
            one(
                "p/.f1_005.log.1_0-1-1",
                blocks::raw(
                    blocks::AVRO_DATA,
                    &[(0, "005"), (2, SCHEMA)],
                    &[0, 0, 0, 2, 0, 0, 0, 0],
                ),
            ),
            Refusal::Unsupported,
        ),
        (
            "undecodable committed block",
            one(
                "p/.f1_006.log.1_0-1-1",
                blocks::raw(
                    blocks::AVRO_DATA,
                    &[(0, "006"), (2, SCHEMA)],
                    &[0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2, 0xff, 0xff],
                ),
            ),
            Refusal::Corrupt,
        ),
        (
            "a count of 2^31-1 records in 12 bytes",
            one(
                "p/.f1_007.log.1_0-1-1",
                blocks::raw(
                    blocks::AVRO_DATA,
                    &[(0, "007"), (2, SCHEMA)],
                    &[0, 0, 0, 3, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0],
                ),
            ),
            Refusal::Corrupt,
        ),
        (
            "a delete block announcing 2^62 records",
            one(
                "p/.f1_008.log.1_0-1-1",
                blocks::raw(
                    blocks::DELETE,
                    &[(0, "008")],
                    &[
                        0, 0, 0, 3, 0, 0, 0, 9, 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                        0x7f,
                    ],
                ),
            ),
            Refusal::Corrupt,
        ),
    ];
    for (what, sl, kind) in cases {
        let started = std::time::Instant::now();
        let (k, errno, msg) = errno_of(merge(&*t.store, &cfg, &sl, all, &opts));
        assert_eq!(k, kind, "{what}: {msg}");
        assert_eq!(
            errno,
            match kind {
                Refusal::Unsupported => libc::EOPNOTSUPP,
                Refusal::Corrupt => libc::EIO,
                Refusal::TooBig => libc::EFBIG,
            }
        );
        assert!(
            msg.contains("p/f1@001"),
            "{what}: the message names the slice: {msg}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{what}"
        );
        // The same block, not committed, is skipped.
        let inst = sl.logs[0].path.name()[4..7].to_string();
        assert!(
            merge(&*t.store, &cfg, &sl, |i: &str| i != inst, &opts).is_ok(),
            "{what}"
        );
    }
    // A corrupt stretch (a truncated block) is skipped, as Hudi's readers skip it.
    let mut torn = blocks::avro_data("009", SCHEMA, &[rec("009", "k1", Some(9), 1)], &[]);
    torn.truncate(torn.len() - 3);
    torn.extend(blocks::avro_data(
        "010",
        SCHEMA,
        &[rec("010", "k2", Some(10), 1)],
        &[],
    ));
    let sl = one("p/.f1_009.log.1_0-1-1", torn);
    let rows = read_rows(&merge(&*t.store, &cfg, &sl, all, &opts).unwrap());
    assert_eq!((rows["k1"].0, rows["k2"].0), (Some(1), Some(10)));
    // Non-Parquet base files.
    let lance = t.put("p/f1_0-1-1_001.lance", b"lance");
    let sl = slice(Some(lance), vec![]);
    assert!(sl.needs_merge());
    let (k, errno, _) = errno_of(merge(&*t.store, &cfg, &sl, all, &opts));
    assert_eq!((k, errno), (Refusal::Unsupported, libc::EOPNOTSUPP));
    // Too big for the memory cap.
    let big: Vec<Vec<u8>> = (0..2000)
        .map(|i| rec("011", &format!("key{i}"), Some(i), i))
        .collect();
    let sl = one(
        "p/.f1_011.log.1_0-1-1",
        blocks::avro_data("011", SCHEMA, &big, &[]),
    );
    let small = MergeOptions {
        memory_cap: 20_000,
        ..Default::default()
    };
    let (k, errno, msg) = errno_of(merge(&*t.store, &cfg, &sl, all, &small));
    assert_eq!((k, errno), (Refusal::TooBig, libc::EFBIG), "{msg}");
    let tiny = MergeOptions {
        memory_cap: 100,
        ..Default::default()
    };
    assert_eq!(
        errno_of(merge(&*t.store, &cfg, &sl, all, &tiny)).0,
        Refusal::TooBig
    );
    assert!(merge(&*t.store, &cfg, &sl, all, &opts).is_ok());
    // More than the memory ceiling leaves for data (`--max-memory`): EFBIG, naming it.
    let low = MergeOptions {
        ceiling: MemoryCeiling::fixed(4 << 20),
        ..Default::default()
    };
    let (k, errno, msg) = errno_of(merge(&*t.store, &cfg, &sl, all, &low));
    assert_eq!((k, errno), (Refusal::TooBig, libc::EFBIG), "{msg}");
    assert!(msg.contains("--max-memory"), "{msg}");
    // A merge that fits but finds the ceiling taken waits for it, holding nothing, and never
    // takes more than the ceiling.
    let ceiling = MemoryCeiling::fixed(64 << 20);
    let hog = ceiling.try_take(60 << 20).unwrap();
    let opts2 = MergeOptions {
        ceiling: ceiling.clone(),
        ..Default::default()
    };
    let got = std::thread::scope(|s| {
        let h = s.spawn(|| {
            hudifs_merge::memory::with_memory(&ceiling, |m| {
                merge(&*t.store, &cfg, &sl, all, &opts2.with_memory(m))
            })
        });
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(!h.is_finished(), "it waits while the ceiling is taken");
        drop(hog);
        h.join().unwrap()
    });
    assert_eq!(
        got.unwrap(),
        merge(&*t.store, &cfg, &sl, all, &opts).unwrap()
    );
    assert!(ceiling.peak() <= 64 << 20);
    assert!(ceiling.waits() >= 1);
    assert_eq!(ceiling.used(), 0);
}

#[test]
fn inputs_that_vanish_mid_merge() {
    let mem = Arc::new(MemStore::new("gen"));
    let put = |p: &str, b: &[u8]| {
        let p = TablePath::new(p).unwrap();
        mem.put(&p, b).unwrap();
        InputFile::new(p, Some(b.len() as u64))
    };
    let base = put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let log = put(
        "p/.f1_002.log.1_0-1-1",
        &blocks::avro_data("002", SCHEMA, &[rec("002", "k1", Some(2), 1)], &[]),
    );
    let sl = slice(Some(base.clone()), vec![log.clone()]);
    let faulty = FaultyStore::new(mem.clone(), 1);
    // The log is gone by the time it is read.
    faulty.add(
        Rule::new(Fault::Error(std::io::ErrorKind::NotFound))
            .on(&[Op::Read])
            .matching(".log."),
    );
    let (k, errno, msg) = errno_of(merge(
        &faulty,
        &commit_time(),
        &sl,
        |_: &str| true,
        &MergeOptions::default(),
    ));
    assert_eq!((k, errno), (Refusal::Corrupt, libc::EIO));
    assert!(msg.contains("vanished"), "{msg}");
    // The base file fails while its rows are read.
    faulty.clear();
    faulty.add(Rule::new(Fault::Error(std::io::ErrorKind::NotFound)).on(&[Op::ReadAt]));
    assert_eq!(
        errno_of(merge(
            &faulty,
            &commit_time(),
            &sl,
            |_: &str| true,
            &MergeOptions::default()
        ))
        .1,
        libc::EIO
    );
    faulty.clear();
    faulty.add(Rule::new(Fault::ShortRead).on(&[Op::ReadAt]));
    assert_eq!(
        errno_of(merge(
            &faulty,
            &commit_time(),
            &sl,
            |_: &str| true,
            &MergeOptions::default()
        ))
        .1,
        libc::EIO
    );
    // A base deleted before the merge starts; a log of another size than the view listed.
    faulty.clear();
    mem.delete(&base.path).unwrap();
    assert_eq!(
        errno_of(merge(
            &faulty,
            &commit_time(),
            &sl,
            |_: &str| true,
            &MergeOptions::default()
        ))
        .1,
        libc::EIO
    );
    let changed = slice(None, vec![InputFile::new(log.path.clone(), Some(1))]);
    assert_eq!(
        errno_of(merge(
            &faulty,
            &commit_time(),
            &changed,
            |_: &str| true,
            &MergeOptions::default()
        ))
        .1,
        libc::EIO
    );
}

#[test]
fn same_inputs_same_bytes() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let log = avro_log(
        &t,
        "002",
        &[rec("002", "k9", Some(2), 1), rec("002", "k1", Some(2), 1)],
    );
    let sl = slice(Some(base), vec![log]);
    let a = merge(
        &*t.store,
        &event_time(),
        &sl,
        |_: &str| true,
        &MergeOptions::default(),
    )
    .unwrap();
    for _ in 0..3 {
        let b = merge(
            &*t.store,
            &event_time(),
            &sl,
            |_: &str| true,
            &MergeOptions::default(),
        )
        .unwrap();
        assert_eq!(a, b);
    }
    let meta = parquet::file::reader::SerializedFileReader::new(bytes::Bytes::from(a)).unwrap();
    use parquet::file::reader::FileReader;
    assert_eq!(
        meta.metadata().file_metadata().created_by(),
        Some(hudifs_merge::CREATED_BY)
    );
}

#[test]
fn the_cache_merges_once_checks_claims_and_evicts() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let log = avro_log(&t, "002", &[rec("002", "k1", Some(2), 1)]);
    let sl = slice(Some(base.clone()), vec![log.clone()]);
    let dir = tempfile::tempdir().unwrap();
    let cdir = dir.path().join("cache");
    let cache = Arc::new(
        MergeCache::open(&CacheOptions {
            dir: cdir.clone(),
            max_bytes: 1 << 30,
        })
        .unwrap(),
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&cdir).unwrap().permissions().mode() & 0o777,
        0o700
    );
    let cfg = commit_time();
    let opts = MergeOptions::default();
    // Eight concurrent first lookups merge once.
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (cache, store, cfg, sl, opts) = (
                cache.clone(),
                t.store.clone(),
                cfg.clone(),
                sl.clone(),
                opts.clone(),
            );
            std::thread::spawn(move || {
                match cache
                    .ensure(&*store, "gen", &cfg, &sl, &|_: &str| true, &opts)
                    .unwrap()
                {
                    Ensured::Merged { size, path, .. } => (size, path),
                    Ensured::Base => panic!("must merge"),
                }
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(cache.merges(), 1);
    assert!(results.windows(2).all(|w| w[0] == w[1]));
    let (size, path) = results[0].clone();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    let direct = merge(&*t.store, &cfg, &sl, |_: &str| true, &opts).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        direct,
        "the cached file is the merge"
    );
    // A reopened cache (a remount) finds it.
    let cache2 = MergeCache::open(&CacheOptions {
        dir: cdir.clone(),
        max_bytes: 1 << 30,
    })
    .unwrap();
    assert!(matches!(
        cache2
            .ensure(&*t.store, "gen", &cfg, &sl, &|_: &str| true, &opts)
            .unwrap(),
        Ensured::Merged { .. }
    ));
    assert_eq!(cache2.merges(), 0);
    // It is recognised from the inputs' identities and the log blocks' headers: no log is read
    // whole. A view that does not see the log's block reads as the base file.
    let counting = FaultyStore::new(t.store.clone(), 1);
    let cache5 = MergeCache::open(&CacheOptions {
        dir: cdir.clone(),
        max_bytes: 1 << 30,
    })
    .unwrap();
    match cache5
        .ensure(&counting, "gen", &cfg, &sl, &|_: &str| true, &opts)
        .unwrap()
    {
        Ensured::Merged { path: p, .. } => assert_eq!(std::fs::read(p).unwrap(), direct),
        Ensured::Base => panic!("must be the merged entry"),
    }
    assert!(matches!(
        cache5
            .ensure(&counting, "gen", &cfg, &sl, &|i: &str| i != "002", &opts)
            .unwrap(),
        Ensured::Base
    ));
    assert_eq!(cache5.merges(), 0);
    assert_eq!(counting.calls(Op::Read), 0, "a log was read whole");
    assert!(counting.calls(Op::ReadAt) > 0);
    // A planted symbolic link in place of the entry is not followed: the slice is merged again.
    let target = dir.path().join("elsewhere.parquet");
    std::fs::write(&target, b"not this").unwrap();
    std::fs::remove_file(&path).unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let cache3 = MergeCache::open(&CacheOptions {
        dir: cdir.clone(),
        max_bytes: 1 << 30,
    })
    .unwrap();
    match cache3
        .ensure(&*t.store, "gen", &cfg, &sl, &|_: &str| true, &opts)
        .unwrap()
    {
        Ensured::Merged { path: p, .. } => assert_eq!(std::fs::read(p).unwrap(), direct),
        Ensured::Base => panic!(),
    }
    assert_eq!(cache3.merges(), 1);
    assert_eq!(std::fs::read(&target).unwrap(), b"not this");
    // An entry whose file was tampered with (its claim no longer holds) is merged again.
    std::fs::write(&path, b"PAR1 garbage PAR1").unwrap();
    let cache4 = MergeCache::open(&CacheOptions {
        dir: cdir.clone(),
        max_bytes: 1 << 30,
    })
    .unwrap();
    cache4
        .ensure(&*t.store, "gen", &cfg, &sl, &|_: &str| true, &opts)
        .unwrap();
    assert_eq!(cache4.merges(), 1);
    // Changed inputs (the log rewritten) are another entry.
    let log2 = avro_log(&t, "002", &[rec("002", "k1", Some(3), 1)]);
    let sl2 = slice(Some(base.clone()), vec![log2]);
    cache4
        .ensure(&*t.store, "gen", &cfg, &sl2, &|_: &str| true, &opts)
        .unwrap();
    assert_eq!(cache4.merges(), 2);
    // LRU by bytes: a cache that holds one file keeps the newest.
    let small = MergeCache::open(&CacheOptions {
        dir: dir.path().join("small"),
        max_bytes: size + 10,
    })
    .unwrap();
    small
        .ensure(&*t.store, "gen", &cfg, &sl2, &|_: &str| true, &opts)
        .unwrap();
    let other = slice(
        Some(base),
        vec![avro_log(&t, "003", &[rec("003", "k2", Some(3), 1)])],
    );
    small
        .ensure(&*t.store, "gen", &cfg, &other, &|_: &str| true, &opts)
        .unwrap();
    assert!(
        small.total_bytes() <= size + 10
            || std::fs::read_dir(dir.path().join("small")).unwrap().count() == 2
    );
    let files = std::fs::read_dir(dir.path().join("small")).unwrap().count();
    assert_eq!(files, 2, "one entry (file and claim) left");
    // A refused merge is remembered for the same inputs, not retried.
    let bad = slice(
        None,
        vec![t.put(
            "p/.f1_004.log.1_0-1-1",
            &blocks::raw(
                blocks::AVRO_DATA,
                &[(0, "004"), (2, SCHEMA)],
                &[0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0xff],
            ),
        )],
    );
    let before = small.merges();
    for _ in 0..3 {
        assert_eq!(
            small
                .ensure(&*t.store, "gen", &cfg, &bad, &|_: &str| true, &opts)
                .unwrap_err()
                .errno(),
            libc::EIO
        );
    }
    assert_eq!(small.merges(), before + 1);
    // A symbolic link in place of the cache directory is refused.
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(dir.path().join("small"), &link).unwrap();
    assert!(MergeCache::open(&CacheOptions {
        dir: link,
        max_bytes: 1
    })
    .is_err());
}

const SCHEMA_DELETED: &str = r#"{"type":"record","name":"r","namespace":"hoodie.t","fields":[
 {"name":"_hoodie_commit_time","type":["null","string"],"default":null},
 {"name":"_hoodie_record_key","type":["null","string"],"default":null},
 {"name":"id","type":"string"},
 {"name":"v","type":["null","long"],"default":null},
 {"name":"ts","type":"long"},
 {"name":"_hoodie_is_deleted","type":["null","boolean"],"default":null}]}"#;

fn rec_deleted(commit: &str, key: &str, ts: i64, deleted: bool) -> Vec<u8> {
    let mut r = rec(commit, key, None, ts);
    zz(&mut r, 1);
    r.push(deleted as u8);
    r
}

#[test]
fn is_deleted_records_and_parquet_data_blocks() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    // `_hoodie_is_deleted = true` deletes; under event-time ordering only when not older.
    let l1 = t.put(
        "p/.f1_002.log.1_0-1-1",
        &blocks::avro_data(
            "002",
            SCHEMA_DELETED,
            &[
                rec_deleted("002", "k1", 20, true),
                rec_deleted("002", "k2", 5, true),
                rec_deleted("002", "k3", 20, false),
            ],
            &[],
        ),
    );
    // A Parquet data block (a whole Parquet file inside the block).
    let l2 = t.put(
        "p/.f1_003.log.1_0-1-1",
        &blocks::parquet_data("003", SCHEMA, &base_parquet(&[("003", "k8", Some(8), 80)])),
    );
    let sl = slice(Some(base.clone()), vec![l1, l2]);
    let rows = merged_rows(&t, &event_time(), &sl);
    assert!(!rows.contains_key("k1"));
    assert_eq!(
        rows["k2"].2, "001",
        "an older delete marker loses under event time"
    );
    assert_eq!(rows["k3"], (None, 20, "002".into()));
    assert_eq!(rows["k8"], (Some(8), 80, "003".into()));
    // A Parquet data block that is not Parquet: a committed block that does not decode.
    let l3 = t.put(
        "p/.f1_004.log.1_0-1-1",
        &blocks::parquet_data("004", SCHEMA, b"PAR1 not parquet PAR1"),
    );
    let sl = slice(Some(base), vec![l3]);
    let (k, errno, _) = errno_of(merge(
        &*t.store,
        &commit_time(),
        &sl,
        |_: &str| true,
        &MergeOptions::default(),
    ));
    assert_eq!((k, errno), (Refusal::Corrupt, libc::EIO));
}

#[test]
fn mutated_log_files_never_panic_or_hang() {
    // Flip, truncate and overwrite bytes of a valid log (Avro data, delete and command blocks)
    // many times: every merge ends with rows or a refusal, quickly, and never because a decoder
    // panicked ("gave up").
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let good = [
        blocks::avro_data(
            "002",
            SCHEMA_EXTRA,
            &[
                rec_extra("002", "k1", 2, 11, "x"),
                rec_extra("002", "k5", 5, 1, "y"),
            ],
            &[],
        ),
        blocks::delete(
            "003",
            SCHEMA,
            &[
                ("k2", "p", DeleteOrdering::Long(3)),
                ("k5", "p", DeleteOrdering::None),
            ],
        ),
        blocks::rollback("004", "009"),
        blocks::avro_data(
            "005",
            SCHEMA_TS_ONLY,
            &[rec_ts_only("005", "k3", 7)],
            &[(blocks::IS_PARTIAL, "true")],
        ),
    ]
    .concat();
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let started = std::time::Instant::now();
    for round in 0..600 {
        let mut bytes = good.clone();
        match round % 3 {
            0 => {
                for _ in 0..1 + next() % 4 {
                    let i = (next() as usize) % bytes.len();
                    bytes[i] ^= 1 << (next() % 8);
                }
            }
            1 => {
                let n = (next() as usize) % bytes.len();
                bytes.truncate(n);
            }
            _ => {
                let i = (next() as usize) % bytes.len();
                let v = [0x00, 0x7f, 0xff, 0x80][(next() % 4) as usize];
                for b in bytes.iter_mut().skip(i).take(8) {
                    *b = v;
                }
            }
        }
        let sl = slice(
            Some(base.clone()),
            vec![t.put("p/.f1_002.log.1_0-1-1", &bytes)],
        );
        match merge(
            &*t.store,
            &event_time(),
            &sl,
            |_: &str| true,
            &MergeOptions::default(),
        ) {
            Ok(out) => assert!(out.ends_with(b"PAR1")),
            Err(e) => assert!(!e.reason.contains("gave up"), "round {round}: {e}"),
        }
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
}

#[test]
fn a_cached_change_feed_is_found_without_reading_a_log_whole() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let log = avro_log(&t, "002", &[rec("002", "k1", Some(2), 1)]);
    let state = |logs: Vec<InputFile>, at: &str| GroupState {
        slice: slice(Some(base.clone()), logs),
        t: at.into(),
    };
    let group = CdcGroup {
        partition: "p".into(),
        file_id: "f1".into(),
        steps: vec![CdcStep {
            instant: "002".into(),
            before: Some(state(vec![], "001")),
            after: Some(state(vec![log], "002")),
            cdc_logs: vec![],
        }],
        schema: None,
    };
    let dir = tempfile::tempdir().unwrap();
    let opts = CacheOptions {
        dir: dir.path().join("cache"),
        max_bytes: 1 << 30,
    };
    let (cfg, merge_opts) = (commit_time(), MergeOptions::default());
    let committed = |_: &str| true;
    let cache = MergeCache::open(&opts).unwrap();
    let Ensured::Merged { path: first, .. } = cache
        .ensure(&*t.store, "gen", &cfg, &group, &committed, &merge_opts)
        .unwrap()
    else {
        panic!("a change feed is a file")
    };
    assert_eq!(cache.merges(), 1);
    // A reopened cache (a remount) finds it from the identities and the block headers.
    let counting = FaultyStore::new(t.store.clone(), 1);
    let again = MergeCache::open(&opts).unwrap();
    let Ensured::Merged { path, .. } = again
        .ensure(&counting, "gen", &cfg, &group, &committed, &merge_opts)
        .unwrap()
    else {
        panic!("a change feed is a file")
    };
    assert_eq!(path, first);
    assert_eq!(again.merges(), 0);
    assert_eq!(counting.calls(Op::Read), 0, "a log was read whole");
    // The same group seen with the write not committed is another feed.
    let uncommitted = |i: &str| i != "002";
    again
        .ensure(&counting, "gen", &cfg, &group, &uncommitted, &merge_opts)
        .unwrap();
    assert_eq!(again.merges(), 1);
}

const SCHEMA_OP: &str = r#"{"type":"record","name":"r","namespace":"hoodie.t","fields":[
 {"name":"_hoodie_commit_time","type":["null","string"],"default":null},
 {"name":"_hoodie_record_key","type":["null","string"],"default":null},
 {"name":"id","type":"string"},
 {"name":"v","type":["null","long"],"default":null},
 {"name":"ts","type":"long"},
 {"name":"Op","type":["null","string"],"default":null}]}"#;

fn rec_op(commit: &str, key: &str, v: i64, ts: i64, op: &str) -> Vec<u8> {
    let mut r = rec(commit, key, Some(v), ts);
    zz(&mut r, 1);
    s(&mut r, op);
    r
}

/// AWS DMS tables: `Op = 'D'` deletes, as `AWSDmsAvroPayload` decides on table versions 6 and 8
/// (any case: `equalsIgnoreCase`) and as the merge properties Hudi 1.1's upgrade writes decide
/// on version 9 (`DeleteContext`: exactly). A later record of the key brings it back; a marked
/// key only in logs never shows.
#[test]
fn aws_dms_deletes_on_every_table_version() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let l1 = t.put(
        "p/.f1_001.log.1_0-1-1",
        &blocks::avro_data(
            "002",
            SCHEMA_OP,
            &[
                rec_op("002", "k1", 2, 20, "D"),
                rec_op("002", "k2", 2, 20, "d"),
                rec_op("002", "k3", 2, 20, "U"),
                rec_op("002", "k4", 2, 20, "D"),
                rec_op("002", "k5", 2, 20, "I"),
            ],
            &[],
        ),
    );
    let l2 = t.put(
        "p/.f1_001.log.2_0-1-1",
        &blocks::avro_data("003", SCHEMA_OP, &[rec_op("003", "k1", 3, 5, "U")], &[]),
    );
    let sl = slice(Some(base), vec![l1, l2]);
    let dms = "org.apache.hudi.common.model.AWSDmsAvroPayload";
    let merged = |cfg: &MergeConfig| {
        let bytes = merge(
            &*t.store,
            cfg,
            &sl,
            |_: &str| true,
            &MergeOptions::default(),
        );
        read_rows(&bytes.unwrap())
    };
    let keys = |rows: &BTreeMap<String, (Option<i64>, i64, String)>| {
        rows.keys().cloned().collect::<Vec<_>>()
    };
    for cfg in [
        props(&[
            ("hoodie.table.version", "6"),
            ("hoodie.compaction.payload.class", dms),
            ("hoodie.table.precombine.field", "ts"),
        ]),
        props(&[
            ("hoodie.table.version", "8"),
            ("hoodie.record.merge.mode", "CUSTOM"),
            (
                "hoodie.record.merge.strategy.id",
                "00000000-0000-0000-0000-000000000000",
            ),
            ("hoodie.compaction.payload.class", dms),
        ]),
    ] {
        let rows = merged(&cfg);
        // k1: deleted, then written again (commit time: the later record wins, whatever its ts).
        assert_eq!(keys(&rows), ["k1", "k3", "k5"], "{cfg:?}");
        assert_eq!(rows["k1"], (Some(3), 5, "003".into()));
        assert_eq!(rows["k3"], (Some(2), 20, "002".into()));
    }
    // Version 9 after the upgrade: commit time, the marker compared exactly.
    let v9 = props(&[
        ("hoodie.record.merge.mode", "COMMIT_TIME_ORDERING"),
        ("hoodie.legacy.payload.class", dms),
        (
            "hoodie.record.merge.property.hoodie.payload.delete.field",
            "Op",
        ),
        (
            "hoodie.record.merge.property.hoodie.payload.delete.marker",
            "D",
        ),
    ]);
    let rows = merged(&v9);
    assert_eq!(keys(&rows), ["k1", "k2", "k3", "k5"]);
    assert_eq!(rows["k2"], (Some(2), 20, "002".into()));
}

const SCHEMA_OPERATION: &str = r#"{"type":"record","name":"r","namespace":"hoodie.t","fields":[
 {"name":"_hoodie_commit_time","type":["null","string"],"default":null},
 {"name":"_hoodie_record_key","type":["null","string"],"default":null},
 {"name":"_hoodie_operation","type":["null","string"],"default":null},
 {"name":"id","type":"string"},
 {"name":"v","type":["null","long"],"default":null},
 {"name":"ts","type":"long"}]}"#;

fn rec_operation(commit: &str, key: &str, op: &str, v: i64) -> Vec<u8> {
    let mut r = Vec::new();
    zz(&mut r, 1);
    s(&mut r, commit);
    zz(&mut r, 1);
    s(&mut r, key);
    zz(&mut r, 1);
    s(&mut r, op);
    s(&mut r, key);
    zz(&mut r, 1);
    zz(&mut r, v);
    zz(&mut r, 30);
    r
}

/// Flink changelog tables: a record whose `_hoodie_operation` is `D` is a delete, and so is an
/// update's before image (`-U`), which the after image (`U`) that follows replaces.
#[test]
fn flink_changelog_operations() {
    let t = Table::new();
    let base = t.put("p/f1_0-1-1_001.parquet", &base_parquet(BASE));
    let log = |ops: &[(&str, &str, i64)]| {
        let recs: Vec<Vec<u8>> = ops
            .iter()
            .map(|(k, op, v)| rec_operation("002", k, op, *v))
            .collect();
        blocks::avro_data("002", SCHEMA_OPERATION, &recs, &[])
    };
    let l1 = t.put(
        "p/.f1_001.log.1_0-1-1",
        &log(&[
            ("k1", "-U", 1),
            ("k1", "U", 2),
            ("k2", "D", 1),
            ("k9", "I", 9),
        ]),
    );
    let sl = slice(Some(base.clone()), vec![l1]);
    let rows = merged_rows(&t, &commit_time(), &sl);
    assert_eq!(rows.keys().cloned().collect::<Vec<_>>(), ["k1", "k3", "k9"]);
    assert_eq!(rows["k1"].0, Some(2));
    // An operation Hudi does not know fails the read there: refused here.
    let l2 = t.put("p/.f1_001.log.1_0-1-2", &log(&[("k1", "X", 1)]));
    let (k, errno, why) = errno_of(merge(
        &*t.store,
        &commit_time(),
        &slice(Some(base), vec![l2]),
        |_: &str| true,
        &MergeOptions::default(),
    ));
    assert_eq!(
        (k, errno),
        (Refusal::Unsupported, libc::EOPNOTSUPP),
        "{why}"
    );
}

const SCHEMA_DBZ: &str = r#"{"type":"record","name":"r","namespace":"hoodie.t","fields":[
 {"name":"_hoodie_commit_time","type":["null","string"],"default":null},
 {"name":"_hoodie_record_key","type":["null","string"],"default":null},
 {"name":"id","type":"string"},
 {"name":"v","type":["null","long"],"default":null},
 {"name":"ts","type":"long"},
 {"name":"_event_seq","type":["null","string"],"default":null},
 {"name":"_change_operation_type","type":["null","string"],"default":null}]}"#;

fn rec_dbz(commit: &str, key: &str, v: i64, seq: &str, op: &str) -> Vec<u8> {
    let mut r = rec(commit, key, Some(v), v);
    zz(&mut r, 1);
    s(&mut r, seq);
    zz(&mut r, 1);
    s(&mut r, op);
    r
}

/// A base file of rows (key, v, ts) of commit 001 with the meta columns and `extra`
/// columns after them (name, type, values).
fn base_with(
    keys: &[&str],
    v: Vec<Option<i64>>,
    ts: Vec<i64>,
    extra: Vec<(&str, ArrayRef)>,
) -> Vec<u8> {
    let mut fields = vec![
        Field::new("_hoodie_commit_time", DataType::Utf8, true),
        Field::new("_hoodie_record_key", DataType::Utf8, true),
        Field::new("id", DataType::Utf8, false),
        Field::new("v", DataType::Int64, true),
        Field::new("ts", DataType::Int64, false),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(keys.iter().map(|_| "001"))),
        Arc::new(StringArray::from_iter_values(keys.iter().copied())),
        Arc::new(StringArray::from_iter_values(keys.iter().copied())),
        Arc::new(Int64Array::from(v)),
        Arc::new(Int64Array::from(ts)),
    ];
    for (name, col) in extra {
        fields.push(Field::new(name, col.data_type().clone(), true));
        cols.push(col);
    }
    parquet_of(Arc::new(Schema::new(fields)), cols)
}

/// A base file of Debezium rows (key, v, `_event_seq`).
fn dbz_base(rows: &[(&str, i64, Option<&str>)]) -> Vec<u8> {
    let keys: Vec<&str> = rows.iter().map(|r| r.0).collect();
    let extra: Vec<(&str, ArrayRef)> = vec![
        (
            "_event_seq",
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.2))),
        ),
        (
            "_change_operation_type",
            Arc::new(StringArray::from_iter(rows.iter().map(|_| Some("c")))),
        ),
    ];
    let v = rows.iter().map(|r| Some(r.1)).collect();
    base_with(&keys, v, rows.iter().map(|r| r.1).collect(), extra)
}

/// MySQL Debezium tables (`MySqlDebeziumAvroPayload`): the record with the greater `_event_seq`
/// wins, its file and position compared as numbers (`"10.1"` after `"9.5"`, `"02.12"` after
/// `"002.3"`), ties to the later write; `_change_operation_type = 'd'` (any case) deletes, but
/// only when the delete is not older; a stored record without a sequence loses; a sequence
/// that is no `<file>.<position>` is refused.
#[test]
fn mysql_debezium_sequence_ordering_and_deletes() {
    let t = Table::new();
    let base = t.put(
        "p/f1_0-1-1_001.parquet",
        &dbz_base(&[
            ("k1", 1, Some("9.5")),
            ("k2", 1, Some("002.3")),
            ("k3", 1, Some("5.5")),
            ("k4", 1, Some("5.5")),
            ("k5", 1, None),
            ("k6", 1, Some("7.7")),
        ]),
    );
    let log = t.put(
        "p/.f1_001.log.1_0-1-1",
        &blocks::avro_data(
            "002",
            SCHEMA_DBZ,
            &[
                rec_dbz("002", "k1", 2, "10.1", "u"),
                rec_dbz("002", "k2", 2, "02.12", "u"),
                rec_dbz("002", "k3", 2, "6.0", "D"),
                rec_dbz("002", "k4", 2, "5.4", "d"),
                rec_dbz("002", "k5", 2, "0.0", "u"),
                rec_dbz("002", "k6", 2, "7.6", "u"),
                rec_dbz("002", "k6", 3, "7.7", "u"),
            ],
            &[],
        ),
    );
    let dbz = "org.apache.hudi.common.model.debezium.MySqlDebeziumAvroPayload";
    let cfg = props(&[
        ("hoodie.table.version", "6"),
        ("hoodie.compaction.payload.class", dbz),
        ("hoodie.table.precombine.field", "_event_seq"),
    ]);
    let sl = slice(Some(base.clone()), vec![log]);
    let rows = merged_rows(&t, &cfg, &sl);
    let v = |k: &str| rows.get(k).map(|r| r.0.unwrap());
    assert_eq!(v("k1"), Some(2), "10.1 is after 9.5");
    assert_eq!(v("k2"), Some(2), "02.12 is after 002.3");
    assert_eq!(v("k3"), None, "a newer delete deletes");
    assert_eq!(v("k4"), Some(1), "an older delete loses");
    assert_eq!(v("k5"), Some(2), "a stored record without a sequence loses");
    assert_eq!(
        v("k6"),
        Some(3),
        "7.6 loses to the base's 7.7; the tie goes to the later write"
    );
    let bad = t.put(
        "p/.f1_001.log.1_0-1-2",
        &blocks::avro_data(
            "002",
            SCHEMA_DBZ,
            &[rec_dbz("002", "k1", 2, "10", "u")],
            &[],
        ),
    );
    let (k, errno, why) = errno_of(merge(
        &*t.store,
        &cfg,
        &slice(Some(base), vec![bad]),
        |_: &str| true,
        &MergeOptions::default(),
    ));
    assert_eq!(
        (k, errno),
        (Refusal::Unsupported, libc::EOPNOTSUPP),
        "{why}"
    );
    assert!(why.contains("_event_seq"), "{why}");
}

const SCHEMA_PG: &str = r#"{"type":"record","name":"r","namespace":"hoodie.t","fields":[
 {"name":"_hoodie_commit_time","type":["null","string"],"default":null},
 {"name":"_hoodie_record_key","type":["null","string"],"default":null},
 {"name":"id","type":"string"},
 {"name":"v","type":["null","long"],"default":null},
 {"name":"ts","type":"long"},
 {"name":"_event_lsn","type":["null","long"],"default":null},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"_change_operation_type","type":["null","string"],"default":null}]}"#;

const TOAST: &str = "__debezium_unavailable_value";

fn rec_pg(commit: &str, key: &str, v: i64, lsn: Option<i64>, note: &str, op: &str) -> Vec<u8> {
    let mut r = rec(commit, key, Some(v), v);
    match lsn {
        None => zz(&mut r, 0),
        Some(l) => {
            zz(&mut r, 1);
            zz(&mut r, l);
        }
    }
    zz(&mut r, 1);
    s(&mut r, note);
    zz(&mut r, 1);
    s(&mut r, op);
    r
}

/// A base file of Postgres Debezium rows (key, `_event_lsn`, note), all with v = 1.
fn pg_base(rows: &[(&str, Option<i64>, &str)]) -> Vec<u8> {
    let keys: Vec<&str> = rows.iter().map(|r| r.0).collect();
    let extra: Vec<(&str, ArrayRef)> = vec![
        (
            "_event_lsn",
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.1))),
        ),
        (
            "note",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
        ),
        (
            "_change_operation_type",
            Arc::new(StringArray::from_iter(rows.iter().map(|_| Some("r")))),
        ),
    ];
    base_with(&keys, vec![Some(1); keys.len()], vec![1; keys.len()], extra)
}

/// Key → (v, note) of a merged file.
fn notes(bytes: &[u8]) -> BTreeMap<String, (i64, String)> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::copy_from_slice(bytes),
    )
    .unwrap()
    .build()
    .unwrap();
    let mut out = BTreeMap::new();
    for b in reader {
        let b = b.unwrap();
        let key = b.column_by_name("_hoodie_record_key").unwrap();
        let v = b.column_by_name("v").unwrap();
        let note = b.column_by_name("note").unwrap();
        for i in 0..b.num_rows() {
            out.insert(
                key.as_string::<i32>().value(i).to_string(),
                (
                    v.as_primitive::<Int64Type>().value(i),
                    note.as_string::<i32>().value(i).to_string(),
                ),
            );
        }
    }
    out
}

/// Postgres Debezium tables (`PostgresDebeziumAvroPayload`) and the version-9 partial-update
/// mode its upgrade gives them (`FILL_UNAVAILABLE` with Debezium's placeholder): records are
/// ordered by `_event_lsn`; an unchanged TOAST column (`__debezium_unavailable_value`) keeps the
/// older record's value where two records merge and stays as it is where nothing is older. The
/// payload fills only a winning incoming record; version 9 fills whichever record wins.
#[test]
fn postgres_debezium_lsn_ordering_and_unavailable_values() {
    let t = Table::new();
    let base = t.put(
        "p/f1_0-1-1_001.parquet",
        &pg_base(&[
            ("k1", Some(10), "a1"),
            ("k2", Some(10), "b1"),
            ("k3", Some(10), "c1"),
            ("k4", Some(50), TOAST),
            ("k5", None, "e1"),
            ("k8", Some(10), "h1"),
        ]),
    );
    let log1 = t.put(
        "p/.f1_001.log.1_0-1-1",
        &blocks::avro_data(
            "002",
            SCHEMA_PG,
            &[
                rec_pg("002", "k1", 2, Some(20), TOAST, "u"),
                rec_pg("002", "k2", 2, Some(20), "b2", "u"),
                rec_pg("002", "k3", 2, Some(5), TOAST, "u"),
                rec_pg("002", "k4", 2, Some(40), "d2", "u"),
                rec_pg("002", "k5", 2, Some(1), "e2", "u"),
                rec_pg("002", "k6", 2, Some(20), TOAST, "c"),
                rec_pg("002", "k7", 2, Some(20), TOAST, "u"),
                rec_pg("002", "k8", 2, Some(20), "h2", "D"),
            ],
            &[],
        ),
    );
    let log2 = t.put(
        "p/.f1_001.log.2_0-1-1",
        &blocks::avro_data(
            "003",
            SCHEMA_PG,
            &[
                rec_pg("003", "k2", 3, Some(30), TOAST, "u"),
                rec_pg("003", "k7", 3, Some(15), "g2", "u"),
            ],
            &[],
        ),
    );
    let pg = "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload";
    let sl = slice(Some(base.clone()), vec![log1.clone(), log2]);
    let run = |cfg: &MergeConfig| {
        notes(
            &merge(
                &*t.store,
                cfg,
                &sl,
                |_: &str| true,
                &MergeOptions::default(),
            )
            .unwrap(),
        )
    };
    let row = |v: i64, n: &str| (v, n.to_string());
    for cfg in [
        props(&[
            ("hoodie.table.version", "6"),
            ("hoodie.compaction.payload.class", pg),
            ("hoodie.table.precombine.field", "_event_lsn"),
        ]),
        props(&[
            ("hoodie.table.version", "8"),
            ("hoodie.record.merge.mode", "CUSTOM"),
            (
                "hoodie.record.merge.strategy.id",
                "00000000-0000-0000-0000-000000000000",
            ),
            ("hoodie.compaction.payload.class", pg),
            ("hoodie.table.precombine.field", "_event_lsn"),
        ]),
    ] {
        let rows = run(&cfg);
        assert_eq!(rows["k1"], row(2, "a1"), "the placeholder keeps the base's");
        assert_eq!(rows["k2"], row(3, "b2"), "... and the older log record's");
        assert_eq!(rows["k3"], row(1, "c1"), "a lower LSN loses");
        assert_eq!(
            rows["k4"],
            row(1, TOAST),
            "a stored winner is returned as it is"
        );
        assert_eq!(
            rows["k5"],
            row(2, "e2"),
            "a stored record without an LSN loses"
        );
        assert_eq!(
            rows["k6"],
            row(2, TOAST),
            "nothing older: the placeholder stays"
        );
        assert_eq!(
            rows["k7"],
            row(2, TOAST),
            "the older log record won untouched"
        );
        assert!(
            !rows.contains_key("k8"),
            "_change_operation_type d (any case) deletes"
        );
    }
    let v9 = props(&[
        ("hoodie.table.version", "9"),
        ("hoodie.record.merge.mode", "EVENT_TIME_ORDERING"),
        ("hoodie.table.ordering.fields", "_event_lsn"),
        ("hoodie.legacy.payload.class", pg),
        ("hoodie.table.partial.update.mode", "FILL_UNAVAILABLE"),
        (
            "hoodie.record.merge.property.hoodie.write.partial.update.unavailable.value",
            TOAST,
        ),
        (
            "hoodie.record.merge.property.hoodie.payload.delete.field",
            "_change_operation_type",
        ),
        (
            "hoodie.record.merge.property.hoodie.payload.delete.marker",
            "D",
        ),
    ]);
    let rows = run(&v9);
    assert_eq!(rows["k1"], row(2, "a1"));
    assert_eq!(rows["k2"], row(3, "b2"));
    assert_eq!(rows["k3"], row(1, "c1"));
    assert_eq!(
        rows["k4"],
        row(1, "d2"),
        "the winning base takes the loser's value"
    );
    assert_eq!(rows["k6"], row(2, TOAST));
    assert_eq!(
        rows["k7"],
        row(2, "g2"),
        "the winning older record takes the loser's"
    );
    assert!(!rows.contains_key("k8"));
    // A log record without an LSN cannot be ordered: Java's payload fails on it.
    let bad = t.put(
        "p/.f1_001.log.3_0-1-1",
        &blocks::avro_data(
            "004",
            SCHEMA_PG,
            &[rec_pg("004", "k1", 4, None, "x", "u")],
            &[],
        ),
    );
    let pg6 = props(&[
        ("hoodie.table.version", "6"),
        ("hoodie.compaction.payload.class", pg),
    ]);
    let (k, errno, why) = errno_of(merge(
        &*t.store,
        &pg6,
        &slice(Some(base), vec![log1, bad]),
        |_: &str| true,
        &MergeOptions::default(),
    ));
    assert_eq!(
        (k, errno),
        (Refusal::Unsupported, libc::EOPNOTSUPP),
        "{why}"
    );
    assert!(why.contains("_event_lsn"), "{why}");
}

/// The schema of a merged file's columns (name and type), meta columns included.
fn columns(bytes: Vec<u8>) -> Vec<(String, DataType)> {
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
        bytes::Bytes::from(bytes),
    )
    .unwrap();
    reader
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect()
}

/// One schema per view (SEMANTICS §10.3): a slice written under an older table schema is
/// written in the view's. A base-only slice is rewritten (not served as it is) with the
/// view's added column null; a merged slice gets it too; a column the view promotes (an int
/// written as long by a later schema) takes the view's type; a column the view no longer has
/// is dropped; the claim names the view schema, so the slice's own merge is another entry.
#[test]
fn slices_written_under_an_older_schema_take_the_views() {
    use hudifs_merge::schema::{SliceSchema, ViewSchema};
    let t = Table::new();
    // The base file's own schema: v an int, plus a column `gone` the view dropped.
    let schema = Arc::new(Schema::new(vec![
        Field::new("_hoodie_commit_time", DataType::Utf8, true),
        Field::new("_hoodie_record_key", DataType::Utf8, true),
        Field::new("id", DataType::Utf8, false),
        Field::new("v", DataType::Int32, true),
        Field::new("ts", DataType::Int64, false),
        Field::new("gone", DataType::Utf8, true),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["001", "001"])),
        Arc::new(StringArray::from(vec!["k1", "k2"])),
        Arc::new(StringArray::from(vec!["k1", "k2"])),
        Arc::new(arrow_array::Int32Array::from(vec![Some(1), None])),
        Arc::new(Int64Array::from(vec![10, 10])),
        Arc::new(StringArray::from(vec!["x", "y"])),
    ];
    let base = t.put("p/f1_0-1-1_001.parquet", &parquet_of(schema, cols));
    let view = Arc::new(ViewSchema::from_avro(SCHEMA_EXTRA, &[]).unwrap());
    let want: Vec<(String, DataType)> = [
        ("_hoodie_commit_time", DataType::Utf8),
        ("_hoodie_record_key", DataType::Utf8),
        ("id", DataType::Utf8),
        ("v", DataType::Int64),
        ("ts", DataType::Int64),
        ("extra", DataType::Utf8),
    ]
    .into_iter()
    .map(|(n, d)| (n.to_string(), d))
    .collect();
    let opts = MergeOptions::default();
    // Base only, served as it is without a view schema ...
    let mut sl = slice(Some(base.clone()), vec![]);
    assert!(!sl.needs_merge());
    // ... rewritten with one.
    sl.schema = Some(SliceSchema {
        view: view.clone(),
        rewrite_base: true,
        evolution: None,
    });
    assert!(sl.needs_merge());
    let out = merge(&*t.store, &commit_time(), &sl, |_: &str| true, &opts).unwrap();
    assert_eq!(columns(out.clone()), want);
    let rows = read_rows(&out);
    assert_eq!(rows["k1"], (Some(1), 10, "001".into()));
    assert_eq!(rows["k2"], (None, 10, "001".into()));
    // With a log written under the old schema too: the same columns.
    let log = avro_log(&t, "002", &[rec("002", "k2", Some(5), 11)]);
    let mut sl = slice(Some(base), vec![log]);
    let own = columns(merge(&*t.store, &commit_time(), &sl, |_: &str| true, &opts).unwrap());
    assert!(own.iter().any(|(n, _)| n == "gone"), "{own:?}");
    sl.schema = Some(SliceSchema {
        view,
        rewrite_base: true,
        evolution: None,
    });
    let out = merge(&*t.store, &commit_time(), &sl, |_: &str| true, &opts).unwrap();
    assert_eq!(columns(out.clone()), want);
    assert_eq!(read_rows(&out)["k2"], (Some(5), 11, "002".into()));
    // The cache keeps the two apart.
    let dir = tempfile::tempdir().unwrap();
    let cache = MergeCache::open(&CacheOptions {
        dir: dir.path().to_path_buf(),
        max_bytes: 1 << 30,
    })
    .unwrap();
    let ensure = |s: &Slice| match cache
        .ensure(&*t.store, "t", &commit_time(), s, &|_: &str| true, &opts)
        .unwrap()
    {
        Ensured::Merged { path, .. } => path,
        Ensured::Base => panic!("merged expected"),
    };
    let mut own_slice = sl.clone();
    own_slice.schema = None;
    assert_ne!(ensure(&sl), ensure(&own_slice));
    assert_eq!(cache.merges(), 2);
}

/// Schema-on-read (SEMANTICS §10.2): a base file written when `v` was called `old_v` (field id
/// 3), and a column `gone` (id 5) the view dropped; a log block written after the rename. In
/// the view, the base's values come out under `v`, `gone` is not served, and a view column
/// whose id the base lacks (`extra`, id 6) is null. Read by name (no schema-on-read), the
/// base's `v` would be null. A type change hudifs does not convert is refused.
#[test]
fn schema_on_read_matches_columns_by_field_id() {
    use hudifs_merge::evolution::{InternalSchema, SchemaOnRead};
    use hudifs_merge::schema::{SliceSchema, ViewSchema};
    use std::collections::BTreeMap;
    let t = Table::new();
    let schema = Arc::new(Schema::new(vec![
        Field::new("_hoodie_commit_time", DataType::Utf8, true),
        Field::new("_hoodie_record_key", DataType::Utf8, true),
        Field::new("id", DataType::Utf8, false),
        Field::new("old_v", DataType::Int64, true),
        Field::new("ts", DataType::Int64, false),
        Field::new("gone", DataType::Utf8, true),
    ]));
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["001", "001"])),
        Arc::new(StringArray::from(vec!["k1", "k2"])),
        Arc::new(StringArray::from(vec!["k1", "k2"])),
        Arc::new(Int64Array::from(vec![Some(7), Some(8)])),
        Arc::new(Int64Array::from(vec![10, 10])),
        Arc::new(StringArray::from(vec!["x", "y"])),
    ];
    let base = t.put("p/f1_0-1-1_001.parquet", &parquet_of(schema, cols));
    let log = avro_log(&t, "002", &[rec("002", "k2", Some(5), 11)]);
    let version = |v: i64, fields: &[(i64, &str, &str)]| {
        let fields: Vec<serde_json::Value> = fields
            .iter()
            .map(|(id, n, t)| serde_json::json!({"id": id, "name": n, "optional": true, "type": t}))
            .collect();
        serde_json::json!({"max_column_id": 6, "version-id": v, "type": "record", "fields": fields})
            .to_string()
    };
    let old = version(
        1,
        &[
            (2, "id", "string"),
            (3, "old_v", "long"),
            (4, "ts", "long"),
            (5, "gone", "string"),
        ],
    );
    let new = version(
        2,
        &[
            (2, "id", "string"),
            (3, "v", "long"),
            (4, "ts", "long"),
            (6, "extra", "string"),
        ],
    );
    let sor = |query: &str, file: &str| {
        let commits = BTreeMap::from([
            ("001".to_string(), InternalSchema::parse(file).map(Arc::new)),
            (
                "002".to_string(),
                InternalSchema::parse(query).map(Arc::new),
            ),
        ]);
        Arc::new(SchemaOnRead::new(query, commits, Ok(BTreeMap::new())).unwrap())
    };
    let view = Arc::new(ViewSchema::from_avro(SCHEMA_EXTRA, &[]).unwrap());
    let mut sl = slice(Some(base), vec![log]);
    let opts = MergeOptions::default();
    let by_name = read_rows(&merge(&*t.store, &commit_time(), &sl, |_: &str| true, &opts).unwrap());
    assert_eq!(by_name["k1"].0, None, "read by name, old_v is not v");
    sl.schema = Some(SliceSchema {
        view: view.clone(),
        rewrite_base: true,
        evolution: Some(sor(&new, &old)),
    });
    let out = merge(&*t.store, &commit_time(), &sl, |_: &str| true, &opts).unwrap();
    let names: Vec<String> = columns(out.clone()).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "_hoodie_commit_time",
            "_hoodie_record_key",
            "id",
            "v",
            "ts",
            "extra"
        ]
    );
    let rows = read_rows(&out);
    assert_eq!(rows["k1"], (Some(7), 10, "001".into()));
    assert_eq!(rows["k2"], (Some(5), 11, "002".into()));
    // old_v written as a string, read as a long: Hudi allows string → decimal/date only, and
    // hudifs converts neither; refused, naming the column.
    let retyped = version(
        1,
        &[
            (2, "id", "string"),
            (3, "old_v", "string"),
            (4, "ts", "long"),
        ],
    );
    sl.schema = Some(SliceSchema {
        view,
        rewrite_base: true,
        evolution: Some(sor(&new, &retyped)),
    });
    let e = merge(&*t.store, &commit_time(), &sl, |_: &str| true, &opts).unwrap_err();
    assert_eq!(e.kind, hudifs_merge::Refusal::Unsupported);
    assert!(
        e.reason
            .contains("column v changed type from string to long"),
        "{e}"
    );
}
