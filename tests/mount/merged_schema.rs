//! One schema per view (SEMANTICS §10.2): a table whose schema gained a column mid-history
//! (`TableWriter::add_column`), merge-on-read and copy-on-write, through a real mount. Every
//! file of each `merged/` view (`latest/`, every `as_of/<T>/`, the window over the whole
//! history in `merged/incremental/`) has the same columns, in the view's schema: the old
//! schema before the column was added, the new one after, with the column null in file groups
//! written before it. The rows (key and the new column) are the writer's model's. A base file
//! written under the old schema is rewritten in `merged/latest/` (a `.merged.parquet` name),
//! while `latest/` keeps serving it as it was written.

use hudifs_testkit::support;

use std::collections::BTreeMap;
use std::path::Path;

use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{build_renamed, rows, rows_with_ids, TableSpec, TableWriter};
use serde_json::json;
use support::MountGuard;

/// (id, score) rows, sorted.
type Scored = Vec<(i64, Option<i64>)>;

/// The model's (id, score) rows, sorted.
fn model(w: &TableWriter) -> Scored {
    let mut out: Vec<(i64, Option<i64>)> = w
        .file_groups()
        .iter()
        .flat_map(|(p, f)| w.group_rows(p, f).unwrap_or_default())
        .map(|r| {
            (
                r.id,
                r.extra
                    .first()
                    .cloned()
                    .flatten()
                    .map(|v| v.parse().unwrap()),
            )
        })
        .collect();
    out.sort();
    out
}

/// Writes before and after `score` is added; the model after each write.
fn build(root: &Path, table_type: TableType) -> (TableWriter, BTreeMap<String, Scored>) {
    let write = match table_type {
        TableType::MergeOnRead => Action::DeltaCommit,
        TableType::CopyOnWrite => Action::Commit,
    };
    let spec = TableSpec::new("evolved", table_type, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let mut models = BTreeMap::new();
    let mut t = w.begin(write).unwrap();
    let a = t.insert("city=a", &rows(1, 20)).unwrap();
    let b = t.insert("city=b", &rows(2, 20)).unwrap();
    let c = t.complete().unwrap();
    models.insert(c, model(&w));
    let mut t = w.begin(write).unwrap();
    let newer: Vec<_> = rows_with_ids(3, &[1000, 1001])
        .into_iter()
        .map(|mut r| {
            r.ts = 1_800_000_000_000 + r.id;
            r
        })
        .collect();
    t.update("city=a", &a, &newer).unwrap();
    let c = t.complete().unwrap();
    models.insert(c, model(&w));
    w.add_column("score", true);
    // Newer event times than the rows they update: they win under either ordering.
    let scored = |seed, ids: &[i64]| -> Vec<_> {
        rows_with_ids(seed, ids)
            .into_iter()
            .map(|mut r| {
                r.ts = 1_800_000_000_000 + r.id;
                let s = (r.id * 7).to_string();
                r.with_extra(&[Some(&s)])
            })
            .collect()
    };
    let mut t = w.begin(write).unwrap();
    t.update("city=b", &b, &scored(4, &[2000, 2002])).unwrap();
    let fresh: Vec<_> = rows(5, 10)
        .into_iter()
        .map(|r| {
            let s = r.id.to_string();
            r.with_extra(&[Some(&s)])
        })
        .collect();
    t.insert("city=c", &fresh).unwrap();
    let c = t.complete().unwrap();
    models.insert(c, model(&w));
    (w, models)
}

/// `hudifs ls --merged` (with `extra` arguments) names what the mount shows in `view`.
fn ls_names_what_the_mount_shows(root: &Path, m: &MountGuard, view: &str, extra: &[&str]) {
    let out = std::process::Command::new(hudifs_testkit::mount::binary("hudifs"))
        .arg("ls")
        .args(extra)
        .arg("--merged")
        .arg(root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let named: std::collections::BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect();
    let shown: std::collections::BTreeSet<String> = support::walk_files(&m.path().join(view))
        .unwrap()
        .into_iter()
        .collect();
    assert_eq!(named, shown, "hudifs ls --merged {extra:?} vs {view}");
}

#[test]
fn every_merged_view_has_one_schema_after_a_column_is_added() {
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    for table_type in [TableType::MergeOnRead, TableType::CopyOnWrite] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let (_w, models) = build(&root, table_type);
        let cache = tmp.path().join("merge-cache");
        let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
        let writes: Vec<&String> = models.keys().collect();
        let mut views: Vec<(String, &Scored)> =
            vec![("merged/latest".into(), models.values().last().unwrap())];
        for (t, rows) in &models {
            views.push((format!("merged/as_of/{t}"), rows));
        }
        let window = "merged/incremental/earliest..latest";
        let dirs: Vec<String> = views
            .iter()
            .map(|(v, _)| m.path().join(v).display().to_string())
            .chain([m.path().join(window).display().to_string()])
            .collect();
        let res = crate::merge::run_script(&py, "schema_rows.py", &json!(dirs));
        let name = format!("{table_type:?}");
        for (i, (view, rows)) in views.iter().enumerate() {
            let r = &res[&dirs[i]];
            let schemas = r["schemas"].as_array().unwrap();
            assert_eq!(schemas.len(), 1, "{name} {view}: {schemas:?}");
            let cols: Vec<&str> = schemas[0]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c[0].as_str().unwrap())
                .collect();
            let after = view.ends_with("latest") || view.ends_with(writes[2].as_str());
            assert_eq!(cols.contains(&"score"), after, "{name} {view}: {cols:?}");
            if after {
                // The view's order: the data columns, the added one, then the partition's.
                let at = |c: &str| cols.iter().position(|x| *x == c).unwrap();
                assert!(
                    at("ts") < at("score") && at("score") < at("city"),
                    "{cols:?}"
                );
            }
            let got: Scored = r["rows"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| (x[0].as_i64().unwrap(), x[1].as_i64()))
                .collect();
            assert_eq!(&got, *rows, "{name} {view}: rows");
        }
        // The window over the whole history is in the newest schema too.
        let r = &res[&dirs[dirs.len() - 1]];
        assert_eq!(
            r["schemas"].as_array().unwrap().len(),
            1,
            "{name} {window}: {r}"
        );
        // city=a's file was written before the column: rewritten in merged/latest (a merged
        // name), served as written in latest/.
        let latest: Vec<String> =
            support::walk_files(&m.path().join("merged/latest/city=a")).unwrap();
        assert!(
            latest.iter().all(|n| n.ends_with(".merged.parquet")),
            "{name}: {latest:?}"
        );
        if table_type == TableType::CopyOnWrite {
            let plain = support::walk_files(&m.path().join("latest/city=a")).unwrap();
            assert!(
                plain.iter().all(|n| !n.ends_with(".merged.parquet")),
                "{plain:?}"
            );
        }
        ls_names_what_the_mount_shows(&root, &m, "merged/latest", &[]);
        let window = ["--incremental", "earliest..latest"];
        ls_names_what_the_mount_shows(&root, &m, "merged/incremental/earliest..latest", &window);
        assert!(!m.log_text().contains("refused"), "{}", m.log_text());
    }
}

/// A change record as `cdc_schema_rows.py` gives it: op, ts_ms, id, before.score,
/// after.score, whether there is a before image, whether there is an after image.
type CdcRow = (String, String, i64, Option<i64>, Option<i64>, bool, bool);

/// The change records of `writes` (of `build`) that `window` selects, by hand from what the
/// writer wrote: the first write inserted 1000..1019 (city=a) and 2000..2019 (city=b), the
/// second updated 1000 and 1001, the third (after `score` was added) updated 2000 and 2002
/// with score id·7 and inserted 5000..5009 (city=c) with score id. Rows written before the
/// column have it null.
fn expected_feed(writes: &[&String], selected: &[usize]) -> Vec<CdcRow> {
    let mut out = Vec::new();
    let rec = |op: &str, w: usize, id, before: Option<Option<i64>>, after: Option<i64>| {
        (
            op.to_string(),
            writes[w].clone(),
            id,
            before.flatten(),
            after,
            before.is_some(),
            true,
        )
    };
    for &w in selected {
        match w {
            0 => {
                for id in (1000..1020).chain(2000..2020) {
                    out.push(rec("i", 0, id, None, None));
                }
            }
            1 => {
                for id in [1000, 1001] {
                    out.push(rec("u", 1, id, Some(None), None));
                }
            }
            _ => {
                for id in [2000, 2002] {
                    out.push(rec("u", 2, id, Some(None), Some(id * 7)));
                }
                for id in 5000..5010 {
                    out.push(rec("i", 2, id, None, Some(id)));
                }
            }
        }
    }
    out.sort_by_key(|r| serde_json::to_string(&json!(r)).unwrap());
    out
}

#[test]
fn every_change_feed_file_of_a_window_has_the_window_schema() {
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    for table_type in [TableType::MergeOnRead, TableType::CopyOnWrite] {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let (_w, models) = build(&root, table_type);
        let cache = tmp.path().join("merge-cache");
        let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
        let writes: Vec<&String> = models.keys().collect();
        // One window per write, by the time that selects it (completion times on v9).
        let mut listed: Vec<String> = std::fs::read_dir(m.path().join("cdc"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        listed.sort();
        assert_eq!(listed.len(), 3, "{listed:?}");
        let end_of_second = listed[1].split_once("..").unwrap().1;
        // (window, the writes it selects, whether its schema has score)
        let windows = [
            ("earliest..latest".to_string(), vec![0, 1, 2], true),
            (format!("earliest..{end_of_second}"), vec![0, 1], false),
            (listed[2].clone(), vec![2], true),
        ];
        let dirs: Vec<String> = windows
            .iter()
            .map(|(w, _, _)| m.path().join("cdc").join(w).display().to_string())
            .collect();
        let res = crate::merge::run_script(&py, "cdc_schema_rows.py", &json!(dirs));

        let name = format!("{table_type:?}");
        for (i, (window, selected, scored)) in windows.iter().enumerate() {
            let r = &res[&dirs[i]];
            let schemas = r["schemas"].as_array().unwrap();
            assert!(r["files"].as_u64().unwrap() >= 1, "{name} {window}: {r}");
            assert_eq!(schemas.len(), 1, "{name} {window}: {schemas:?}");
            let cols: std::collections::BTreeMap<&str, &str> = schemas[0]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| (c[0].as_str().unwrap(), c[1].as_str().unwrap()))
                .collect();
            for image in ["before", "after"] {
                let t = cols[image];
                assert_eq!(
                    t.contains("score: int64"),
                    *scored,
                    "{name} {window} {image}: {t}"
                );
                assert!(!t.contains("_hoodie_"), "{name} {window} {image}: {t}");
            }
            let got: Vec<CdcRow> = serde_json::from_value(r["rows"].clone()).unwrap();
            assert_eq!(
                got,
                expected_feed(&writes, selected),
                "{name} {window}: records"
            );
        }
        assert!(!m.log_text().contains("refused"), "{}", m.log_text());
    }
}

/// A change record of `build_renamed`'s feed: op, id, before's price and tip, after's.
type FeedRow = (
    String,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// (id, price or fare, tip) rows, sorted.
type Priced = Vec<(i64, Option<i64>, Option<i64>)>;

/// The rows of `build_renamed` after its last write, by the rule: a value keeps its field id
/// (fare is served as price), a column dropped and added again starts null.
fn renamed_latest() -> Priced {
    let mut out: Priced = Vec::new();
    for id in 1000..1020 {
        out.push(if id < 1002 {
            (id, Some(id * 5), Some(id * 11))
        } else {
            (id, Some(id * 3), None)
        });
    }
    out.extend((2000..2010).map(|id| (id, Some(id * 3), None)));
    out.extend((5000..5005).map(|id| (id, Some(id * 5), Some(id * 11))));
    out.sort();
    out
}

fn priced(v: &serde_json::Value) -> Priced {
    let mut out: Priced = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0].as_i64().unwrap(), r[1].as_i64(), r[2].as_i64()))
        .collect();
    out.sort();
    out
}

#[test]
fn renamed_columns_are_served_by_field_id() {
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    for (table_type, version) in [
        (TableType::MergeOnRead, 9),
        (TableType::CopyOnWrite, 9),
        (TableType::MergeOnRead, 6),
    ] {
        let name = format!("{table_type:?} v{version}");
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let (mut w, first, _last) = build_renamed(&root, table_type, version).unwrap();

        let schema_dir = root.join(".hoodie/.schema");
        assert!(
            std::fs::read_dir(&schema_dir).unwrap().count() >= 3 * 4,
            "{name}: a schema commit per write"
        );
        let cache = tmp.path().join("merge-cache");
        let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
        let mut listed: Vec<String> = std::fs::read_dir(m.path().join("cdc"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        listed.sort();
        let last_window = listed.last().unwrap().clone();
        let dir = |v: &str| m.path().join(v).display().to_string();
        let views = [
            dir("merged/latest"),
            dir(&format!("merged/as_of/{first}")),
            dir("merged/incremental/earliest..latest"),
            dir(&format!("cdc/{last_window}")),
        ];
        let res = crate::merge::run_script(
            &py,
            "renamed_rows.py",
            &json!({"dirs": views, "columns": ["price", "tip"]}),
        );
        // merged/latest: one schema, the new names, old values under them, tip null where
        // it was written before it was dropped.
        let r = &res[&views[0]];
        let schemas = r["schemas"].as_array().unwrap();
        assert_eq!(schemas.len(), 1, "{name}: {schemas:?}");
        let cols: Vec<&str> = schemas[0]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        assert!(
            cols.contains(&"price") && cols.contains(&"tip") && !cols.contains(&"fare"),
            "{name}: {cols:?}"
        );
        assert_eq!(
            priced(&r["rows"]),
            renamed_latest(),
            "{name}: merged/latest"
        );
        // The window over the whole history: the same records (all written in it).
        let r = &res[&views[2]];
        assert_eq!(r["schemas"].as_array().unwrap().len(), 1, "{name}: {r}");
        assert_eq!(priced(&r["rows"]), renamed_latest(), "{name}: window");
        // as_of the first write: its own names and values.
        let old = crate::merge::run_script(
            &py,
            "renamed_rows.py",
            &json!({"dirs": [views[1]], "columns": ["fare", "tip"]}),
        );
        let r = &old[&views[1]];
        assert_eq!(r["schemas"].as_array().unwrap().len(), 1, "{name}: {r}");
        let mut want: Priced = (1000..1020)
            .chain(2000..2010)
            .map(|id| (id, Some(id * 3), Some(id)))
            .collect();
        want.sort();
        assert_eq!(priced(&r["rows"]), want, "{name}: as_of {first}");
        // cdc/ of the last write: the updates' before images carry the old values under the
        // new names (tip null), the after images the new ones.
        let r = &res[&views[3]];
        assert_eq!(r["schemas"].as_array().unwrap().len(), 1, "{name}: {r}");
        let mut got: Vec<FeedRow> = r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x[0].as_str().unwrap().to_string(),
                    x[1].as_i64().unwrap(),
                    x[2].as_i64(),
                    x[3].as_i64(),
                    x[4].as_i64(),
                    x[5].as_i64(),
                )
            })
            .collect();
        got.sort();
        let mut want: Vec<_> = [1000i64, 1001]
            .iter()
            .map(|&id| {
                (
                    "u".to_string(),
                    id,
                    Some(id * 3),
                    None,
                    Some(id * 5),
                    Some(id * 11),
                )
            })
            .chain(
                (5000..5005)
                    .map(|id| ("i".to_string(), id, None, None, Some(id * 5), Some(id * 11))),
            )
            .collect();
        want.sort();
        assert_eq!(got, want, "{name}: cdc/{last_window}");
        ls_names_what_the_mount_shows(&root, &m, "merged/latest", &[]);
        let as_of = ["--as-of", first.as_str()];
        ls_names_what_the_mount_shows(&root, &m, &format!("merged/as_of/{first}"), &as_of);
        assert!(!m.log_text().contains("refused"), "{}", m.log_text());
        drop(m);
        if table_type == TableType::MergeOnRead {
            // A compaction after the rename rewrites city=a's slice (base under fare, log
            // under price) under the new names: the same rows.
            let groups: Vec<(String, String)> = w
                .file_groups()
                .into_iter()
                .filter(|(p, _)| p == "city=a")
                .collect();
            let c = w.schedule_compaction(&groups).unwrap();
            w.run_compaction(&c, true).unwrap();
            let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
            let latest = m.path().join("merged/latest").display().to_string();
            let res = crate::merge::run_script(
                &py,
                "renamed_rows.py",
                &json!({"dirs": [latest], "columns": ["price", "tip"]}),
            );
            let r = &res[&latest];
            assert_eq!(r["schemas"].as_array().unwrap().len(), 1, "{name}: {r}");
            assert_eq!(
                priced(&r["rows"]),
                renamed_latest(),
                "{name}: after compaction"
            );
            assert!(!m.log_text().contains("refused"), "{}", m.log_text());
        }
    }
}

/// A type change Hudi allows but hudifs does not convert (long → string through schema-on-read)
/// is refused (`EOPNOTSUPP`, the column named), never served by name; a damaged schema history
/// fails the files that need it (`EIO`, the file named), while files whose commit recorded
/// their schema are served.
#[test]
fn schema_changes_hudifs_cannot_map_are_refused() {
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    // long → string.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let spec = TableSpec::new("retyped", TableType::MergeOnRead, 9)
        .partitioned_by(&["city"], true)
        .with_long_columns(&["fare"]);
    let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
    w.enable_schema_on_read();
    let with_fare = |seed, n| -> Vec<_> {
        rows(seed, n)
            .into_iter()
            .map(|r| {
                let v = (r.id * 3).to_string();
                r.with_extra(&[Some(&v)])
            })
            .collect()
    };
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.insert("city=a", &with_fare(1, 5)).unwrap();
    t.complete().unwrap();
    w.change_column_type("fare", false).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.insert("city=b", &with_fare(2, 5)).unwrap();
    t.complete().unwrap();
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
    let a = m.path().join("merged/latest/city=a");
    let names = crate::merge::names(&a);
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].ends_with(".merged.parquet"), "{names:?}");
    let (se, oe) = crate::merge::refused_errno(&a.join(&names[0]));
    assert_eq!((se, oe), (libc::EOPNOTSUPP, libc::EOPNOTSUPP));
    let log = m.log_text();
    assert!(
        log.contains("fare changed type from long to string"),
        "{log}"
    );
    let b = m.path().join("merged/latest/city=b").display().to_string();
    let res = crate::merge::run_script(
        &py,
        "renamed_rows.py",
        &json!({"dirs": [b], "columns": ["fare"]}),
    );
    assert_eq!(res[&b]["rows"].as_array().unwrap().len(), 5, "{res}");
    drop(m);

    // A damaged history: the first write predates schema-on-read, so its files' schema is
    // looked up in the history.
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("table");
    let spec = TableSpec::new("damaged", TableType::CopyOnWrite, 9)
        .partitioned_by(&["city"], true)
        .with_long_columns(&["fare"]);
    let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert("city=a", &with_fare(1, 5)).unwrap();
    t.complete().unwrap();
    w.enable_schema_on_read();
    w.rename_column("fare", "price").unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert("city=b", &with_fare(2, 5)).unwrap();
    t.complete().unwrap();
    let damaged = w
        .damage_schema_history(b"{\"schemas\": [{\"type\": 1")
        .unwrap();
    let cache = tmp.path().join("merge-cache");
    let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
    let a = m.path().join("merged/latest/city=a");
    let names = crate::merge::names(&a);
    assert_eq!(names.len(), 1, "{names:?}");
    let (se, oe) = crate::merge::refused_errno(&a.join(&names[0]));
    assert_eq!((se, oe), (libc::EIO, libc::EIO));
    let log = m.log_text();
    assert!(log.contains(&damaged) && log.contains("malformed"), "{log}");
    // city=b's commit recorded its schema: served, under the new name.
    let b = m.path().join("merged/latest/city=b").display().to_string();
    let res = crate::merge::run_script(
        &py,
        "renamed_rows.py",
        &json!({"dirs": [b], "columns": ["price"]}),
    );
    let rows = res[&b]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 5, "{res}");
    assert!(rows
        .iter()
        .all(|r| r[1].as_i64() == Some(r[0].as_i64().unwrap() * 3)));
}

/// CDC log files written before a rename (a copy-on-write table with
/// `hoodie.table.cdc.enabled`, every supplemental logging mode): their images carry the old
/// name, and `cdc/` serves their values under the new one, as it serves the states'. The
/// first write inserts 1000..1004 with fare id·3; the second updates 1000 to id·5 (a CDC log
/// under `fare`); `fare` is renamed to `price`; the third updates 1001 to id·7 (a CDC log
/// under `price`).
#[test]
fn cdc_logs_written_before_a_rename_are_read_by_field_id() {
    use hudifs_testkit::generator::CdcMode;
    if !support::fuse_available() {
        return;
    }
    let py = support::python();
    for mode in CdcMode::ALL {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("table");
        let spec = TableSpec::new("cdc_renamed", TableType::CopyOnWrite, 9)
            .partitioned_by(&["city"], true)
            .with_long_columns(&["fare"])
            .with_cdc(mode);
        let mut w = TableWriter::create(&root, spec, 1_767_225_600_000).unwrap();
        w.enable_schema_on_read();
        let priced = |ids: &[i64], k: i64| -> Vec<_> {
            rows_with_ids(7, ids)
                .into_iter()
                .map(|mut r| {
                    r.ts = 1_800_000_000_000 + r.id * k;
                    let v = (r.id * k).to_string();
                    r.with_extra(&[Some(&v)])
                })
                .collect()
        };
        let mut t = w.begin(Action::Commit).unwrap();
        let g = t
            .insert("city=a", &priced(&[1000, 1001, 1002, 1003, 1004], 3))
            .unwrap();
        t.complete().unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        t.update("city=a", &g, &priced(&[1000], 5)).unwrap();
        let second = t.complete().unwrap();
        assert!(!w.cdc_files(&second).is_empty(), "{mode:?}: a CDC log");
        w.rename_column("fare", "price").unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        t.update("city=a", &g, &priced(&[1001], 7)).unwrap();
        t.complete().unwrap();
        let cache = tmp.path().join("merge-cache");
        let m = MountGuard::mount(&root, &["--merge-cache", cache.to_str().unwrap()]);
        let d = m.path().join("cdc/earliest..latest").display().to_string();
        let res = crate::merge::run_script(
            &py,
            "renamed_rows.py",
            &json!({"dirs": [d], "columns": ["price"]}),
        );
        let r = &res[&d];
        assert_eq!(r["schemas"].as_array().unwrap().len(), 1, "{mode:?}: {r}");
        let mut got: Vec<(String, i64, Option<i64>, Option<i64>)> = r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                let s = x[0].as_str().unwrap().to_string();
                (s, x[1].as_i64().unwrap(), x[2].as_i64(), x[3].as_i64())
            })
            .collect();
        got.sort();
        let mut want: Vec<(String, i64, Option<i64>, Option<i64>)> = (1000..1005)
            .map(|id| ("i".to_string(), id, None, Some(id * 3)))
            .collect();
        want.push(("u".into(), 1000, Some(3000), Some(5000)));
        want.push(("u".into(), 1001, Some(3003), Some(7007)));
        want.sort();
        assert_eq!(got, want, "{mode:?}");
        assert!(
            !m.log_text().contains("refused"),
            "{mode:?}: {}",
            m.log_text()
        );
    }
}
