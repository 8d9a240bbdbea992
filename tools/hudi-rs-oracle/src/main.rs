//! hudi-rs 0.6 as a second writer and a second oracle for hudifs (issue 34).
//!
//! A standalone program against the `hudi` crate (0.6.0-rc.1), kept out of the product's
//! workspace and build: its ~440 crates (DataFusion, Lance, two Arrow versions) would double a
//! clean build. `scripts/hudi-rs-oracle` builds and runs it.
//!
//! ```text
//! hudi-rs-oracle write OUT             write every scenario table to OUT/<name>/ with hudi-rs's
//!                                      writer, then read each back (below) into OUT/<name>.answers/
//! hudi-rs-oracle read TABLE ANSWERS    hudi-rs's reads of TABLE: latest, as_of every completed
//!                                      instant, every incremental window between consecutive
//!                                      completions and the whole history, as Parquet files and
//!                                      ANSWERS/views.json
//! hudi-rs-oracle commit-loop TABLE N PAUSE_MS
//!                                      create TABLE (copy-on-write, version 9) if missing, then N
//!                                      upserts PAUSE_MS apart; after each, one JSON line on stdout:
//!                                      {"requested", "completion", "returned_unix_ms"}
//! ```
//!
//! The scenarios are what production merge-on-read tables carry: upserts into logs, deletes
//! (delete blocks), stale updates under event-time ordering, a compaction and updates after it,
//! partial updates (`UpsertOptions::update_columns`), a custom delete marker declared under
//! `hoodie.record.merge.property.` and `_hoodie_is_deleted`, on table versions 8 and 9; and
//! copy-on-write tables with the same writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use hudi::config::table::TableTypeValue;
use hudi::table::{HoodieKey, QueryType, ReadOptions, Table, UpsertOptions};
use serde_json::{json, Value};

type Res<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// One row of the scenario schema: key, partition, ordering value, fare, note, and the
/// optional delete columns.
#[derive(Clone)]
struct Row {
    id: &'static str,
    city: &'static str,
    ts: i64,
    fare: f64,
    note: Option<&'static str>,
    op: &'static str,
    deleted: bool,
}

fn r(id: &'static str, city: &'static str, ts: i64, fare: f64) -> Row {
    Row {
        id,
        city,
        ts,
        fare,
        note: Some("n"),
        op: "U",
        deleted: false,
    }
}

/// Which delete columns a scenario's schema carries.
#[derive(Clone, Copy, PartialEq)]
enum Deletes {
    None,
    /// An `op` column, `D` marks a delete (`hoodie.payload.delete.field` / `.marker`).
    Marker,
    /// Hudi's own `_hoodie_is_deleted` column.
    IsDeleted,
}

fn batch(rows: &[Row], deletes: Deletes) -> RecordBatch {
    let mut cols: Vec<(&str, ArrayRef, bool)> = vec![
        (
            "id",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.id))),
            false,
        ),
        (
            "city",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.city))),
            false,
        ),
        (
            "ts",
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.ts))),
            false,
        ),
        (
            "fare",
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|r| r.fare))),
            true,
        ),
        (
            "note",
            Arc::new(StringArray::from_iter(rows.iter().map(|r| r.note))),
            true,
        ),
    ];
    match deletes {
        Deletes::None => {}
        Deletes::Marker => cols.push((
            "op",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.op))),
            true,
        )),
        Deletes::IsDeleted => cols.push((
            "_hoodie_is_deleted",
            Arc::new(BooleanArray::from_iter(
                rows.iter().map(|r| Some(r.deleted)),
            )),
            true,
        )),
    }
    let schema = Arc::new(Schema::new(
        cols.iter()
            .map(|(n, a, nullable)| Field::new(*n, a.data_type().clone(), *nullable))
            .collect::<Vec<_>>(),
    ));
    RecordBatch::try_new(schema, cols.into_iter().map(|(_, a, _)| a).collect())
        .expect("scenario batch")
}

/// A write step of a scenario.
enum Step {
    Append(Vec<Row>),
    Upsert(Vec<Row>),
    /// An upsert whose rows carry a lower ordering value than the stored ones: under event-time
    /// ordering they lose (logged as "stale upsert": incremental readers differ on it).
    StaleUpsert(Vec<Row>),
    /// Upsert taking only these columns of the rows (a partial update: the others keep their
    /// values).
    Partial(Vec<Row>, &'static [&'static str]),
    Delete(&'static str),
    DeleteKeys(Vec<(&'static str, &'static str)>),
    Compact,
}

struct Scenario {
    name: String,
    table_type: TableTypeValue,
    version: isize,
    ordering: bool,
    partitioned: bool,
    deletes: Deletes,
    steps: Vec<Step>,
}

fn base_rows() -> Vec<Row> {
    vec![
        r("a", "sf", 1, 10.0),
        r("b", "sf", 1, 11.0),
        r("c", "nyc", 1, 12.0),
        r("d", "nyc", 1, 13.0),
        r("e", "chi", 1, 14.0),
        r("f", "chi", 1, 15.0),
    ]
}

/// The writes every table gets: inserts, updates (one of them stale under event-time
/// ordering), a delete by predicate and one by key, and on merge-on-read a compaction with
/// updates and a partial update after it.
fn common_steps(mor: bool) -> Vec<Step> {
    let mut steps = vec![
        Step::Append(base_rows()),
        Step::Upsert(vec![
            r("a", "sf", 2, 20.0),
            r("c", "nyc", 2, 22.0),
            r("g", "sf", 2, 16.0),
        ]),
        Step::StaleUpsert(vec![r("a", "sf", 1, 99.0), r("d", "nyc", 3, 33.0)]),
        Step::Delete("id = 'b'"),
    ];
    if mor {
        steps.push(Step::Compact);
    }
    steps.push(Step::Upsert(vec![
        r("c", "nyc", 4, 44.0),
        r("e", "chi", 4, 54.0),
    ]));
    // hudi-rs writes partial updates on copy-on-write tables only (0.6 refuses them on
    // merge-on-read); the note given here must not reach the table.
    let partial = vec![Row {
        note: Some("not written"),
        ..r("e", "chi", 5, 55.5)
    }];
    steps.push(if mor {
        Step::Upsert(partial)
    } else {
        Step::Partial(partial, &["ts", "fare"])
    });
    steps.push(Step::DeleteKeys(vec![("f", "chi")]));
    steps
}

fn scenarios() -> Vec<Scenario> {
    let mut out = Vec::new();
    for version in [8, 9] {
        for (kind, table_type) in [
            ("cow", TableTypeValue::CopyOnWrite),
            ("mor", TableTypeValue::MergeOnRead),
        ] {
            let mor = kind == "mor";
            out.push(Scenario {
                name: format!("{kind}_v{version}"),
                table_type,
                version,
                ordering: true,
                partitioned: true,
                deletes: Deletes::None,
                steps: common_steps(mor),
            });
        }
        // Commit-time ordering, not partitioned: the stale update wins.
        out.push(Scenario {
            name: format!("mor_v{version}_commit_time"),
            table_type: TableTypeValue::MergeOnRead,
            version,
            ordering: false,
            partitioned: false,
            deletes: Deletes::None,
            steps: common_steps(true),
        });
        // `_hoodie_is_deleted` in log records.
        out.push(Scenario {
            name: format!("mor_v{version}_is_deleted"),
            table_type: TableTypeValue::MergeOnRead,
            version,
            ordering: true,
            partitioned: true,
            deletes: Deletes::IsDeleted,
            steps: vec![
                Step::Append(base_rows()),
                Step::Upsert(vec![
                    Row {
                        deleted: true,
                        ..r("a", "sf", 2, 20.0)
                    },
                    r("c", "nyc", 2, 22.0),
                ]),
                Step::Upsert(vec![
                    // A stale delete loses under event-time ordering.
                    Row {
                        deleted: true,
                        ..r("c", "nyc", 1, 0.0)
                    },
                    Row {
                        deleted: true,
                        ..r("e", "chi", 3, 0.0)
                    },
                ]),
                Step::Compact,
                Step::Upsert(vec![
                    Row {
                        deleted: true,
                        ..r("d", "nyc", 4, 0.0)
                    },
                    r("f", "chi", 4, 40.0),
                ]),
            ],
        });
    }
    // A custom delete marker (what Hudi 1.1's upgrade writes for AWSDmsAvroPayload tables),
    // on values only log records hold.
    out.push(Scenario {
        name: "mor_v9_delete_marker".to_string(),
        table_type: TableTypeValue::MergeOnRead,
        version: 9,
        ordering: true,
        partitioned: true,
        deletes: Deletes::Marker,
        steps: vec![
            Step::Append(base_rows()),
            Step::Upsert(vec![
                Row {
                    op: "D",
                    ..r("a", "sf", 2, 20.0)
                },
                r("c", "nyc", 2, 22.0),
                Row {
                    op: "D",
                    ..r("e", "chi", 2, 0.0)
                },
            ]),
            Step::Upsert(vec![
                Row {
                    op: "D",
                    ..r("c", "nyc", 1, 0.0)
                },
                r("b", "sf", 3, 31.0),
            ]),
            Step::Compact,
            Step::Upsert(vec![
                Row {
                    op: "D",
                    ..r("b", "sf", 4, 0.0)
                },
                r("d", "nyc", 4, 44.0),
            ]),
        ],
    });
    out
}

async fn write_scenario(root: &Path, s: &Scenario) -> Res<Vec<Value>> {
    let partitions: &[&str] = if s.partitioned { &["city"] } else { &[] };
    let ordering: &[&str] = if s.ordering { &["ts"] } else { &[] };
    let mut builder = Table::create(root.to_str().ok_or("path")?)
        .with_table_name(&s.name)
        .with_table_type(s.table_type.clone())
        .with_table_version(s.version)
        .with_record_key_fields(["id"])
        .with_partition_fields(partitions.iter().copied())
        .with_ordering_fields(ordering.iter().copied());
    if s.deletes == Deletes::Marker {
        builder = builder
            .with_option(
                "hoodie.record.merge.property.hoodie.payload.delete.field",
                "op",
            )
            .with_option(
                "hoodie.record.merge.property.hoodie.payload.delete.marker",
                "D",
            );
    }
    let mut table = builder.create().await?;
    let mut log = Vec::new();
    for step in &s.steps {
        let (what, res) = match step {
            Step::Append(rows) => ("append", table.append([batch(rows, s.deletes)]).await?),
            Step::Upsert(rows) => ("upsert", table.upsert([batch(rows, s.deletes)]).await?),
            Step::StaleUpsert(rows) => (
                if s.ordering { "stale upsert" } else { "upsert" },
                table.upsert([batch(rows, s.deletes)]).await?,
            ),
            Step::Partial(rows, cols) => {
                let options = UpsertOptions {
                    update_columns: Some(cols.iter().map(|c| c.to_string()).collect()),
                };
                (
                    "partial upsert",
                    table.upsert_with([batch(rows, s.deletes)], options).await?,
                )
            }
            Step::Delete(filter) => ("delete", table.delete(filter).await?),
            Step::DeleteKeys(keys) => (
                "delete keys",
                table
                    .delete_keys(keys.iter().map(|(k, p)| HoodieKey {
                        record_key: k.to_string(),
                        partition_path: if s.partitioned {
                            format!("city={p}")
                        } else {
                            String::new()
                        },
                    }))
                    .await?,
            ),
            Step::Compact => {
                let c = table.compact().await?;
                log.push(json!({"step": "compact", "requested": c.requested_time}));
                continue;
            }
        };
        log.push(json!({"step": what, "requested": res.requested_time,
            "completion": res.completion_time, "updates": res.num_updates,
            "inserts": res.num_inserts, "deletes": res.num_deletes}));
    }
    Ok(log)
}

fn write_parquet(path: &Path, batches: &[RecordBatch]) -> Res<usize> {
    let file = std::fs::File::create(path)?;
    let schema = match batches.first() {
        Some(b) => b.schema(),
        None => Arc::new(Schema::new(vec![Field::new(
            "_empty",
            DataType::Utf8,
            true,
        )])),
    };
    let mut w = parquet::arrow::ArrowWriter::try_new(file, schema, None)?;
    let mut n = 0;
    for b in batches {
        n += b.num_rows();
        w.write(b)?;
    }
    w.close()?;
    Ok(n)
}

/// hudi-rs's reads of `table_dir` into `answers`: `views.json` names each view, its file and
/// its row count (or the error hudi-rs gave).
async fn read_views(table_dir: &Path, answers: &Path) -> Res<Value> {
    std::fs::create_dir_all(answers)?;
    let uri = table_dir.to_str().ok_or("path")?;
    let table = Table::new(uri).await?;
    let instants = table.get_timeline().completed_commits.clone();
    let mut views: Vec<(String, ReadOptions, Value)> =
        vec![("latest".into(), ReadOptions::new(), Value::Null)];
    for i in &instants {
        views.push((
            format!("as_of/{}", i.timestamp),
            ReadOptions::new().with_as_of_timestamp(&i.timestamp),
            json!({"as_of": i.timestamp}),
        ));
    }
    // Windows by completion time (v8+), consecutive, and the whole history.
    let mut done: Vec<String> = instants
        .iter()
        .filter_map(|i| i.completion_timestamp.clone())
        .collect();
    done.sort();
    let mut bounds = vec!["19700101000000000".to_string()];
    bounds.extend(done.iter().cloned());
    let mut windows: Vec<(String, String)> = bounds
        .windows(2)
        .map(|w| (w[0].clone(), w[1].clone()))
        .collect();
    if let Some(last) = done.last() {
        windows.push(("19700101000000000".to_string(), last.clone()));
    }
    for (a, b) in windows {
        views.push((
            format!("incremental/{a}..{b}"),
            ReadOptions::new()
                .with_query_type(QueryType::Incremental)
                .with_start_timestamp(&a)
                .with_end_timestamp(&b),
            json!({"window": [a, b]}),
        ));
    }
    let mut out = Vec::new();
    for (i, (label, options, extra)) in views.into_iter().enumerate() {
        let mut v = json!({"label": label});
        if let Value::Object(m) = extra {
            for (k, x) in m {
                v[k] = x;
            }
        }
        match table.read(&options).await {
            Ok(batches) => {
                let file = format!("{i:03}.parquet");
                v["rows"] = json!(write_parquet(&answers.join(&file), &batches)?);
                v["file"] = json!(file);
            }
            Err(e) => v["error"] = json!(e.to_string()),
        }
        out.push(v);
    }
    let doc = json!({
        "writer": "hudi-rs 0.6.0-rc.1 (crate hudi)",
        "table_version": table.hudi_options().get("hoodie.table.version"),
        "table_type": table.table_type(),
        "views": out,
    });
    std::fs::write(
        answers.join("views.json"),
        serde_json::to_string_pretty(&doc)?,
    )?;
    Ok(doc)
}

async fn write_all(out: &Path) -> Res<()> {
    std::fs::create_dir_all(out)?;
    let mut index = BTreeMap::new();
    for s in scenarios() {
        let root = out.join(&s.name);
        if root.exists() {
            return Err(format!("{} exists: write into an empty folder", root.display()).into());
        }
        let steps = write_scenario(&root, &s).await?;
        let answers = out.join(format!("{}.answers", s.name));
        let doc = read_views(&root, &answers).await?;
        let mut steps_doc = json!({"steps": steps});
        steps_doc["views"] = json!(doc["views"].as_array().map(|v| v.len()));
        std::fs::write(
            answers.join("steps.json"),
            serde_json::to_string_pretty(&steps_doc)?,
        )?;
        eprintln!("{}: {} views", s.name, steps_doc["views"]);
        index.insert(s.name.clone(), steps_doc);
    }
    println!("{}", serde_json::to_string_pretty(&index)?);
    Ok(())
}

fn unix_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

async fn commit_loop(root: &Path, n: usize, pause_ms: u64) -> Res<()> {
    let uri = root.to_str().ok_or("path")?;
    let mut table = if root.join(".hoodie/hoodie.properties").exists() {
        Table::new(uri).await?
    } else {
        let mut t = Table::create(uri)
            .with_table_name("commit_loop")
            .with_table_type(TableTypeValue::CopyOnWrite)
            .with_record_key_fields(["id"])
            .with_partition_fields(["city"])
            .with_ordering_fields(["ts"])
            .create()
            .await?;
        t.append([batch(&base_rows(), Deletes::None)]).await?;
        t
    };
    for i in 0..n {
        tokio::time::sleep(std::time::Duration::from_millis(pause_ms)).await;
        let fare = 100.0 + i as f64;
        let res = table
            .upsert([batch(&[r("a", "sf", 10 + i as i64, fare)], Deletes::None)])
            .await?;
        println!(
            "{}",
            json!({"requested": res.requested_time, "completion": res.completion_time,
                "returned_unix_ms": unix_ms() as u64})
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let res = match args.get(1).map(String::as_str) {
        Some("write") if args.len() == 3 => write_all(Path::new(&args[2])).await,
        Some("read") if args.len() == 4 => read_views(Path::new(&args[2]), Path::new(&args[3]))
            .await
            .map(|_| ()),
        Some("commit-loop") if args.len() == 5 => match (args[3].parse(), args[4].parse()) {
            (Ok(n), Ok(p)) => commit_loop(&PathBuf::from(&args[2]), n, p).await,
            _ => Err("commit-loop TABLE N PAUSE_MS: N and PAUSE_MS are numbers".into()),
        },
        _ => Err("usage: hudi-rs-oracle write OUT | read TABLE ANSWERS | \
                  commit-loop TABLE N PAUSE_MS"
            .into()),
    };
    if let Err(e) = res {
        eprintln!("hudi-rs-oracle: {e}");
        std::process::exit(1);
    }
}
