//! Delete markers and payload classes through a real mount (SEMANTICS §10.4). First, a
//! version-9 merge-on-read table
//! that declares a custom delete marker the way Hudi 1.1's upgrade writes it for
//! `AWSDmsAvroPayload` tables (`hoodie.record.merge.property.hoodie.payload.delete.field` and
//! `….marker`), on a value only log records hold. A key whose winning record carries the marker
//! is gone from `merged/latest/` and from every `merged/as_of/<T>/`; a later write of the key
//! without the marker brings it back; a key inserted straight into a log with the marker never
//! shows. The views are read with pyarrow through the mount and compared with the writer's
//! model of the rows, less those whose winning record is marked (Java's
//! `RecordContext.isCustomDeleteRecord`; tests/mount/merge/compare.py). Then tables written
//! with the payload classes of AWS DMS and MySQL Debezium pipelines and a Flink changelog table,
//! their change columns written by the test kit (`TableSpec::with_string_columns`).

use crate::merge;
use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::path::Path;

use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{rows, rows_with_ids, Row, TableSpec, TableWriter};
use serde_json::{json, Value};
use support::MountGuard;

/// The marker value: no base record holds it (the generator's names are `<word>-<n>`).
const MARK: &str = "DELETED";

/// The writer's model now (the winning record of every key) as compare.py takes it, each
/// record as `shown` shows it (`None`: Hudi returns no row for the key).
fn rows_now(w: &TableWriter, shown: impl Fn(Row) -> Option<Row>) -> Vec<Value> {
    let mut out = Vec::new();
    for (p, f) in w.file_groups() {
        for r in w.group_rows(&p, &f).unwrap_or_default() {
            if let Some(r) = shown(r) {
                out.push(json!({"id": r.id, "name": r.name, "value": r.value, "ts": r.ts}));
            }
        }
    }
    out
}

/// The rows Hudi returns now: the writer's model less the keys whose winning record carries
/// the marker.
fn model(w: &TableWriter) -> Vec<Value> {
    rows_now(w, |r| (r.name != MARK).then_some(r))
}

/// Mount `root` and read `views` (label under `merged/`, as_of time, the rows it must hold)
/// with pyarrow through the mount: the views that differ, with why. The mount refuses nothing.
fn differing(root: &Path, views: &[(String, Option<String>, Vec<Value>)]) -> Vec<String> {
    let cache = root.parent().unwrap().join("merge-cache");
    let m = MountGuard::mount(root, &["--merge-cache", cache.to_str().unwrap()]);
    let req: Vec<Value> = views
        .iter()
        .map(|(label, as_of, rows)| {
            json!({"label": label, "as_of": as_of,
                   "dir": m.path().join("merged").join(label), "model": rows})
        })
        .collect();
    let res = merge::compare(
        &support::python(),
        &json!({"table": root, "gold": null, "views": req}),
    );
    let mut bad = Vec::new();
    for v in res["views"].as_array().unwrap() {
        let label = v["label"].as_str().unwrap();
        match v.get("model") {
            Some(mc) if mc["match"] == true => {}
            Some(mc) => bad.push(format!("{label}: differs from the model: {mc}")),
            None => bad.push(format!("{label}: not read: {v}")),
        }
    }
    assert!(!m.log_text().contains("refused"), "{}", m.log_text());
    bad
}

/// New versions of `ids` in group `(p, f)` that win under event time too (a greater `ts`),
/// the first `marked` of them carrying the marker.
fn versions(w: &TableWriter, p: &str, f: &str, seed: u64, ids: &[i64], marked: usize) -> Vec<Row> {
    let now: BTreeMap<i64, i64> = w
        .group_rows(p, f)
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.id, r.ts))
        .collect();
    let mut out = rows_with_ids(seed, ids);
    for (i, r) in out.iter_mut().enumerate() {
        if let Some(ts) = now.get(&r.id) {
            r.ts = ts + 1;
        }
        if i < marked {
            r.name = MARK.to_string();
        }
    }
    out
}

/// Writes: base files of two groups; a log marking five keys of group a and updating five more;
/// a log reviving two of the marked keys, marking a key of group b, and inserting two keys into
/// group a's log (one marked). Returns the model after each write, by requested time.
pub(crate) fn build(root: &Path, spec: TableSpec) -> (TableWriter, BTreeMap<String, Vec<Value>>) {
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let mut models = BTreeMap::new();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let fa = t.insert("city=a", &rows(1, 40)).unwrap();
    let fb = t.insert("city=b", &rows(2, 40)).unwrap();
    let c = t.complete().unwrap();
    models.insert(c, model(&w));
    let ids: Vec<i64> = (1000..1010).collect();
    let r = versions(&w, "city=a", &fa, 10, &ids, 5);
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &fa, &r).unwrap();
    let c = t.complete().unwrap();
    models.insert(c, model(&w));
    let mut r = versions(&w, "city=a", &fa, 20, &[5000, 1003, 1004], 1);
    r.extend(versions(&w, "city=a", &fa, 21, &[5001], 0));
    let rb = versions(&w, "city=b", &fb, 22, &[2007], 1);
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &fa, &r).unwrap();
    t.update("city=b", &fb, &rb).unwrap();
    let c = t.complete().unwrap();
    models.insert(c, model(&w));
    (w, models)
}

/// A version-9 merge-on-read table with `mode` (`EVENT_TIME_ORDERING`, `COMMIT_TIME_ORDERING`)
/// that declares the custom delete marker `name = DELETED`.
pub(crate) fn marked(mode: &str) -> TableSpec {
    TableSpec::new("gen_marker", TableType::MergeOnRead, 9)
        .partitioned_by(&["city"], true)
        .with_property("hoodie.record.merge.mode", mode)
        .with_property(
            "hoodie.record.merge.property.hoodie.payload.delete.field",
            "name",
        )
        .with_property(
            "hoodie.record.merge.property.hoodie.payload.delete.marker",
            MARK,
        )
}

#[test]
fn a_custom_delete_marker_deletes_the_keys_whose_winning_record_carries_it() {
    if !support::fuse_available() {
        return;
    }
    let mor = marked;
    let mut views_checked = 0;
    for mode in ["EVENT_TIME_ORDERING", "COMMIT_TIME_ORDERING"] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let (w, models) = build(&root, mor(mode));
        // The marker matters: keys 1000–1002 and 2007 are deleted by it, 5000 never lives;
        // 1003 and 1004 were marked and are back.
        let latest = models.values().last().unwrap();
        let ids: Vec<i64> = latest.iter().map(|r| r["id"].as_i64().unwrap()).collect();
        for gone in [1000, 1001, 1002, 2007, 5000] {
            assert!(!ids.contains(&gone), "{mode}: {gone} in the model");
        }
        for back in [1003, 1004, 5001] {
            assert!(ids.contains(&back), "{mode}: {back} not in the model");
        }
        let mut views = vec![("latest".to_string(), None::<String>)];
        views.extend(
            w.completed_writes()
                .keys()
                .map(|t| (format!("as_of/{t}"), Some(t.clone()))),
        );
        let views: Vec<_> = views
            .into_iter()
            .map(|(label, as_of)| {
                let at = as_of.clone().unwrap_or_else(|| "99999999999999999".into());
                let rows = models.range(..=at).next_back().unwrap().1.clone();
                (label, as_of, rows)
            })
            .collect();
        let bad = differing(&root, &views);
        assert!(bad.is_empty(), "{mode}:\n{}", bad.join("\n"));
        views_checked += views.len();
    }
    assert_eq!(
        views_checked, 8,
        "latest and three as_of views of two tables"
    );
}

/// The rows the writer's model holds now, less `gone`, with `older` keys shown as `base`
/// holds them (a log record that loses to the stored one under the payload's ordering).
fn expected(w: &TableWriter, gone: &[i64], older: &BTreeMap<i64, Row>) -> Vec<Value> {
    rows_now(w, |r| {
        (!gone.contains(&r.id)).then(|| older.get(&r.id).cloned().unwrap_or(r))
    })
}

/// Mount `root` and check that `merged/latest/` holds `want`.
fn check_latest(name: &str, root: &Path, want: Vec<Value>) {
    let bad = differing(root, &[("latest".into(), None, want)]);
    assert!(bad.is_empty(), "{name}: {}", bad.join("\n"));
}

/// Tables written with the payload classes production pipelines use, merged as those classes
/// merge (SEMANTICS §10.4): `AWSDmsAvroPayload` on table versions 6 and 8 (`Op = 'D'` in any
/// case deletes, the later write wins), `MySqlDebeziumAvroPayload` on version 6 (the greater
/// `_event_seq` wins, compared as numbers; `_change_operation_type = 'd'` deletes when it
/// wins), `FirstValueAvroPayload` on versions 6 and 8 (ties keep the first record), and a
/// Flink changelog table (`_hoodie_operation` `D` and `-U` delete).
#[test]
fn payload_tables_merge_as_their_payload_classes() {
    if !support::fuse_available() {
        return;
    }
    let mor = |v| {
        TableSpec::new("gen_payload", TableType::MergeOnRead, v).partitioned_by(&["city"], true)
    };
    // A payload class on version 6, and on version 8 merged by the payload (merge mode CUSTOM
    // with the payload-based strategy).
    let on_6_and_8 = |class: &str| {
        let class = format!("org.apache.hudi.common.model.{class}");
        let v8 = mor(8)
            .with_property("hoodie.record.merge.mode", "CUSTOM")
            .with_property(
                "hoodie.record.merge.strategy.id",
                "00000000-0000-0000-0000-000000000000",
            );
        [
            (format!("v6 {class}"), mor(6)),
            (format!("v8 payload-based {class}"), v8),
        ]
        .map(|(name, spec)| {
            (
                name,
                spec.with_property("hoodie.compaction.payload.class", &class),
            )
        })
    };
    // AWS DMS: full load without `Op`, then changes.
    for (name, spec) in on_6_and_8("AWSDmsAvroPayload") {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let mut w =
            TableWriter::create(&root, spec.with_string_columns(&["Op"]), 1_767_225_600_000)
                .unwrap();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        let f = t.insert("city=a", &rows(1, 20)).unwrap();
        t.complete().unwrap();
        let ops = [
            (1000, "D"),
            (1001, "d"),
            (1002, "U"),
            (5000, "D"),
            (5001, "I"),
        ];
        let changes: Vec<Row> = ops
            .iter()
            .map(|(id, op)| {
                rows_with_ids(10 + *id as u64, &[*id])
                    .remove(0)
                    .with_extra(&[Some(op)])
            })
            .collect();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.update("city=a", &f, &changes).unwrap();
        t.complete().unwrap();
        let again = rows_with_ids(30, &[1000])
            .remove(0)
            .with_extra(&[Some("U")]);
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.update("city=a", &f, &[again]).unwrap();
        t.complete().unwrap();
        check_latest(&name, &root, expected(&w, &[1001, 5000], &BTreeMap::new()));
    }

    // MySQL Debezium: base rows at sequence 9.<n>; changes with greater and smaller sequences.
    let dbz = "org.apache.hudi.common.model.debezium.MySqlDebeziumAvroPayload";
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let spec = mor(6)
        .with_property("hoodie.compaction.payload.class", dbz)
        .with_string_columns(&["_event_seq", "_change_operation_type"]);
    let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
    let base: Vec<Row> = rows(1, 20)
        .into_iter()
        .map(|r| {
            let seq = format!("9.{}", r.id - 1000);
            r.with_extra(&[Some(&seq), Some("c")])
        })
        .collect();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let f = t.insert("city=a", &base).unwrap();
    t.complete().unwrap();
    let changes = [
        (1000, "10.0", "u"), // 10.0 is after 9.0 (a string comparison says before)
        (1001, "9.0", "u"),  // before 9.1: loses
        (1002, "9.2", "u"),  // the same sequence: the later write wins
        (1003, "12.7", "d"), // a newer delete
        (1004, "2.9", "D"),  // an older delete loses
    ];
    let rows_changed: Vec<Row> = changes
        .iter()
        .map(|(id, seq, op)| {
            rows_with_ids(40 + *id as u64, &[*id])
                .remove(0)
                .with_extra(&[Some(seq), Some(op)])
        })
        .collect();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &f, &rows_changed).unwrap();
    t.complete().unwrap();
    let older: BTreeMap<i64, Row> = base
        .iter()
        .filter(|r| r.id == 1001 || r.id == 1004)
        .map(|r| (r.id, r.clone()))
        .collect();
    check_latest(
        "v6 MySqlDebeziumAvroPayload",
        &root,
        expected(&w, &[1003], &older),
    );

    // First value: the greater `ts` wins, a tie keeps the record written first (v6, and v8
    // merged by the payload as the upgrade leaves it).
    for (name, spec) in on_6_and_8("FirstValueAvroPayload") {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
        let base = rows(1, 20);
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        let f = t.insert("city=a", &base).unwrap();
        t.complete().unwrap();
        // 1000: the same ts (the base stays); 1001: a greater ts (wins); 1002: a smaller one.
        let changed: Vec<Row> = [(1000, 0), (1001, 1), (1002, -1)]
            .iter()
            .map(|&(id, dt)| {
                let mut r = rows_with_ids(50 + id as u64, &[id]).remove(0);
                r.ts = base[(id - 1000) as usize].ts + dt;
                r
            })
            .collect();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.update("city=a", &f, &changed).unwrap();
        t.complete().unwrap();
        // A second write ties with the first one's 1001: the first log record stays.
        let mut again = rows_with_ids(90, &[1001]).remove(0);
        again.ts = changed[1].ts;
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.update("city=a", &f, &[again]).unwrap();
        t.complete().unwrap();
        let mut older: BTreeMap<i64, Row> = base
            .iter()
            .filter(|r| r.id == 1000 || r.id == 1002)
            .map(|r| (r.id, r.clone()))
            .collect();
        older.insert(1001, changed[1].clone());
        check_latest(&name, &root, expected(&w, &[], &older));
    }

    // Flink changelog: `_hoodie_operation` of each record.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let spec = mor(9)
        .with_property("hoodie.record.merge.mode", "COMMIT_TIME_ORDERING")
        .with_string_columns(&["_hoodie_operation"]);
    let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let base: Vec<Row> = rows(1, 20)
        .into_iter()
        .map(|r| r.with_extra(&[Some("I")]))
        .collect();
    let f = t.insert("city=a", &base).unwrap();
    t.complete().unwrap();
    let op =
        |seed: u64, id: i64, op: &str| rows_with_ids(seed, &[id]).remove(0).with_extra(&[Some(op)]);
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update(
        "city=a",
        &f,
        &[op(50, 1000, "D"), op(51, 1001, "-U"), op(52, 1002, "U")],
    )
    .unwrap();
    t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &f, &[op(53, 1001, "U")]).unwrap();
    t.complete().unwrap();
    check_latest(
        "v9 Flink changelog",
        &root,
        expected(&w, &[1000], &BTreeMap::new()),
    );
}

/// A version-9 table in the partial-update mode Hudi 1.1's upgrade gives Postgres Debezium
/// tables (`FILL_UNAVAILABLE`, Debezium's TOAST placeholder as the unavailable value;
/// `PartialUpdateHandler.reconcileMarkerValues`): a string holding the placeholder takes the
/// value of the record it merged with, whichever of the two wins; a record that merged with
/// nothing keeps it as it is.
#[test]
fn unavailable_values_keep_the_older_records_value() {
    if !support::fuse_available() {
        return;
    }
    const TOAST: &str = "__debezium_unavailable_value";
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let spec = TableSpec::new("gen_toast", TableType::MergeOnRead, 9)
        .partitioned_by(&["city"], true)
        .with_property("hoodie.record.merge.mode", "EVENT_TIME_ORDERING")
        .with_property("hoodie.table.ordering.fields", "ts")
        .with_property("hoodie.table.partial.update.mode", "FILL_UNAVAILABLE")
        .with_property(
            "hoodie.record.merge.property.hoodie.write.partial.update.unavailable.value",
            TOAST,
        );
    let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
    let base = rows(1, 20);
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let f = t.insert("city=a", &base).unwrap();
    t.complete().unwrap();
    // A change of `id` at `ts` relative to the base row's, with `name`.
    let change = |seed: u64, i: usize, dts: i64, name: &str| Row {
        ts: base[i].ts + dts,
        name: name.to_string(),
        ..rows_with_ids(seed, &[base[i].id]).remove(0)
    };
    let newer_toasted = change(40, 0, 1, TOAST);
    let late = change(41, 1, -1, "late-1");
    let fresh = change(42, 3, 1, "fresh-1");
    let mut inserted = rows_with_ids(43, &[5000]).remove(0);
    inserted.name = TOAST.into();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &f, &[newer_toasted.clone(), late, fresh.clone()])
        .unwrap();
    t.insert("city=a", std::slice::from_ref(&inserted)).unwrap();
    t.complete().unwrap();
    let fresh_toasted = change(44, 3, 2, TOAST);
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &f, std::slice::from_ref(&fresh_toasted))
        .unwrap();
    t.complete().unwrap();
    let shown: BTreeMap<i64, Row> = [
        // The newer record wins, its placeholder filled from the base.
        Row {
            name: base[0].name.clone(),
            ..newer_toasted
        },
        // The base wins against the late record.
        base[1].clone(),
        // The placeholder filled from the older log record.
        Row {
            name: fresh.name.clone(),
            ..fresh_toasted
        },
    ]
    .into_iter()
    .map(|r| (r.id, r))
    .collect();
    check_latest("v9 FILL_UNAVAILABLE", &root, expected(&w, &[], &shown));
}

/// Null values keep the older record's where the table ignores defaults (every default of the
/// test kit's nullable columns is null): version 9's `IGNORE_DEFAULTS` under event time, and a
/// version-6 `OverwriteNonDefaultsWithLatestAvroPayload` table (the incoming record always
/// wins, its nulls filled from the stored record).
#[test]
fn nulls_keep_the_older_value_where_defaults_are_ignored() {
    if !support::fuse_available() {
        return;
    }
    let mor = |v| {
        TableSpec::new("gen_defaults", TableType::MergeOnRead, v).partitioned_by(&["city"], true)
    };
    for (name, spec, event_time) in [
        (
            "v9 IGNORE_DEFAULTS",
            mor(9)
                .with_property("hoodie.record.merge.mode", "EVENT_TIME_ORDERING")
                .with_property("hoodie.table.ordering.fields", "ts")
                .with_property("hoodie.table.partial.update.mode", "IGNORE_DEFAULTS"),
            true,
        ),
        (
            "v6 OverwriteNonDefaultsWithLatestAvroPayload",
            mor(6).with_property(
                "hoodie.compaction.payload.class",
                "org.apache.hudi.common.model.OverwriteNonDefaultsWithLatestAvroPayload",
            ),
            false,
        ),
        (
            "v6 PartialUpdateAvroPayload",
            mor(6).with_property(
                "hoodie.compaction.payload.class",
                "org.apache.hudi.common.model.PartialUpdateAvroPayload",
            ),
            true,
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let (w, base) = build_fills(&root, spec, None);
        let shown = |r: &Row, note: Option<&str>| json!({"id": r.id, "name": r.name, "value": r.value, "ts": r.ts, "note": note});
        let mut want = Vec::new();
        let all = w.file_groups().into_iter();
        for r in all.flat_map(|(p, g)| w.group_rows(&p, &g).unwrap_or_default()) {
            let i = (r.id - 1000) as usize;
            want.push(match r.id {
                1000 => shown(&r, Some("n1000")),
                1001 if event_time => shown(&base[1], Some("n1001")),
                1001 => shown(&r, Some("n1001")),
                1002 => shown(&r, Some("new")),
                5000 => shown(&r, None),
                _ => shown(&r, Some(&format!("n{}", base[i].id))),
            });
        }
        let bad = differing(&root, &[("latest".into(), None, want)]);
        assert!(bad.is_empty(), "{name}: {}", bad.join("\n"));
    }
}

/// A table with a nullable string column `note` whose changes leave values to the older
/// record: `mark` (`None`: a null) in place of a note. Writes base rows (note `n<id>`); then
/// 1000 newer and marked, 1001 older and marked, 1002 newer with note `new`, and a new key 5000
/// marked (in a group of its own); then 1003 newer and marked. Returns the writer and the base
/// rows.
pub(crate) fn build_fills(
    root: &Path,
    spec: TableSpec,
    mark: Option<&str>,
) -> (TableWriter, Vec<Row>) {
    let mut w =
        TableWriter::create(root, spec.with_string_columns(&["note"]), 1_767_225_600_000).unwrap();
    let base: Vec<Row> = rows(1, 20)
        .into_iter()
        .map(|r| {
            let note = format!("n{}", r.id);
            r.with_extra(&[Some(&note)])
        })
        .collect();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let f = t.insert("city=a", &base).unwrap();
    t.complete().unwrap();
    let change = |seed: u64, i: usize, dts: i64, note: Option<&str>| {
        let mut r = rows_with_ids(seed, &[base[i].id]).remove(0);
        r.ts = base[i].ts + dts;
        r.with_extra(&[note])
    };
    let changed = [
        change(60, 0, 1, mark),
        change(61, 1, -1, mark),
        change(62, 2, 1, Some("new")),
    ];
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &f, &changed).unwrap();
    let new_key = rows_with_ids(63, &[5000]).remove(0).with_extra(&[mark]);
    t.insert("city=a", &[new_key]).unwrap();
    t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &f, &[change(64, 3, 1, mark)]).unwrap();
    t.complete().unwrap();
    (w, base)
}

/// A version-6 `PostgresDebeziumAvroPayload` table (SEMANTICS §10.4): the greater long
/// `_event_lsn` wins (a tie to the later write), `_change_operation_type = d` deletes when it
/// wins, and a winning incoming record's TOAST placeholders take the stored record's values; a
/// record that merges with nothing keeps its placeholder.
#[test]
fn postgres_debezium_orders_by_lsn_and_fills_toasted_values() {
    if !support::fuse_available() {
        return;
    }
    const TOAST: &str = "__debezium_unavailable_value";
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let spec = TableSpec::new("gen_postgres", TableType::MergeOnRead, 6)
        .partitioned_by(&["city"], true)
        .with_property(
            "hoodie.compaction.payload.class",
            "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload",
        )
        .with_string_columns(&["_change_operation_type", "note"])
        .with_long_columns(&["_event_lsn"]);
    let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
    let base: Vec<Row> = rows(1, 20)
        .into_iter()
        .map(|r| {
            let (note, lsn) = (format!("n{}", r.id), (r.id - 900).to_string());
            r.with_extra(&[Some("c"), Some(&note), Some(&lsn)])
        })
        .collect();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let f = t.insert("city=a", &base).unwrap();
    t.complete().unwrap();
    // Base LSNs are id - 900: 100 for 1000, 101 for 1001, ...
    let change = |seed: u64, id: i64, op: &str, note: &str, lsn: i64| {
        let lsn = lsn.to_string();
        rows_with_ids(seed, &[id])
            .remove(0)
            .with_extra(&[Some(op), Some(note), Some(&lsn)])
    };
    let second = [
        change(70, 1000, "u", TOAST, 200), // wins: its note is filled from the base
        change(71, 1001, "u", "old", 50),  // a lower LSN loses
        change(72, 1002, "u", "eq", 102),  // the same LSN: the later write wins
        change(73, 1003, "d", "gone", 300), // a newer delete
        change(74, 1004, "d", "late", 10), // an older delete loses
    ];
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &f, &second).unwrap();
    let lone = change(75, 5000, "c", TOAST, 1);
    t.insert("city=a", std::slice::from_ref(&lone)).unwrap();
    t.complete().unwrap();
    let third = [
        change(76, 1000, "u", "stale", 150), // below 200: loses to the second write's
        change(77, 1005, "u", TOAST, 400),   // filled from the base
    ];
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("city=a", &f, &third).unwrap();
    t.complete().unwrap();
    let shown = |r: &Row, note: &str| json!({"id": r.id, "name": r.name, "value": r.value, "ts": r.ts, "note": note});
    let mut want: Vec<Value> = base
        .iter()
        .filter(|r| r.id != 1003)
        .map(|r| match r.id {
            1000 => shown(&second[0], "n1000"),
            1002 => shown(&second[2], "eq"),
            1005 => shown(&third[1], "n1005"),
            _ => shown(r, &format!("n{}", r.id)),
        })
        .collect();
    want.push(shown(&lone, TOAST));
    let bad = differing(&root, &[("latest".into(), None, want)]);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

/// The tables whose merges fill values from the other record, with what marks a value to
/// fill (`None`: a null), as `build_fills` takes them; and a first-value table, where nulls are
/// plain values. What `cdc/` and `merged/incremental/` are checked on.
pub(crate) fn fill_tables() -> Vec<(&'static str, TableSpec, Option<&'static str>)> {
    const TOAST: &str = "__debezium_unavailable_value";
    let mor =
        |v| TableSpec::new("gen_fills", TableType::MergeOnRead, v).partitioned_by(&["city"], true);
    let payload = |class: &str| {
        mor(6).with_property(
            "hoodie.compaction.payload.class",
            &format!("org.apache.hudi.common.model.{class}"),
        )
    };
    let event_time = |mode: &str| {
        mor(9)
            .with_property("hoodie.record.merge.mode", "EVENT_TIME_ORDERING")
            .with_property("hoodie.table.ordering.fields", "ts")
            .with_property("hoodie.table.partial.update.mode", mode)
    };
    vec![
        ("v9 IGNORE_DEFAULTS", event_time("IGNORE_DEFAULTS"), None),
        (
            "v9 FILL_UNAVAILABLE",
            event_time("FILL_UNAVAILABLE").with_property(
                "hoodie.record.merge.property.hoodie.write.partial.update.unavailable.value",
                TOAST,
            ),
            Some(TOAST),
        ),
        (
            "v6 OverwriteNonDefaultsWithLatestAvroPayload",
            payload("OverwriteNonDefaultsWithLatestAvroPayload"),
            None,
        ),
        (
            "v6 PartialUpdateAvroPayload",
            payload("PartialUpdateAvroPayload"),
            None,
        ),
        (
            "v6 FirstValueAvroPayload",
            payload("FirstValueAvroPayload"),
            None,
        ),
    ]
}
