//! `hudifs-writer`, the live writer the torture test runs against: its log agrees with what
//! `hudifs ls` reads from the table it wrote, it is deterministic for a seed, and its crashes
//! leave what a crashed Hudi writer leaves.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

const CLOCK: &str = "1767225600000";

fn write(table: &Path, log: &Path, args: &[&str]) {
    let out = Command::new(hudifs_testkit::mount::binary("hudifs-writer"))
        .arg("--table")
        .arg(table)
        .arg("--log")
        .arg(log)
        .args([
            "--duration-ms",
            "600000",
            "--ops-per-sec",
            "0",
            "--slow-ms",
            "0",
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "hudifs-writer failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn events(log: &Path) -> Vec<Value> {
    std::fs::read_to_string(log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn strs(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    out.sort();
    out
}

/// `hudifs ls --json` of a view: `Ok((files, instant))` or `Err(stderr)`.
fn ls(table: &Path, as_of: Option<&str>) -> Result<(Vec<String>, Option<String>), String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hudifs"));
    cmd.arg("ls").arg(table).arg("--json");
    if let Some(t) = as_of {
        cmd.args(["--as-of", t]);
    }
    let out = cmd.output().unwrap();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).to_string());
    }
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut files: Vec<String> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    files.sort();
    Ok((files, v["instant"].as_str().map(str::to_string)))
}

/// The writer's expected `latest/` and final `as_of` views against `hudifs ls`, and every file
/// of a completed write on disk as logged (unless cleaned). Returns the number of views checked.
fn check_against_reader(table: &Path, evs: &[Value]) -> usize {
    let retained = evs
        .iter()
        .rfind(|e| e["ev"] == "clean")
        .map(|e| e["earliest_commit_to_retain"].as_str().unwrap().to_string());
    let savepoints: BTreeSet<&str> = evs
        .iter()
        .filter(|e| e["ev"] == "savepoint")
        .map(|e| e["instant"].as_str().unwrap())
        .collect();
    let snapshot = evs.iter().rfind(|e| e["ev"] == "snapshot").unwrap();
    let (files, instant) = ls(table, None).unwrap();
    assert_eq!(files, strs(&snapshot["files"]), "latest");
    assert_eq!(instant.as_deref(), snapshot["instant"].as_str(), "latest");
    let mut checked = 1;
    for e in evs.iter().filter(|e| e["ev"] == "final") {
        let t = e["instant"].as_str().unwrap();
        let got = ls(table, Some(t));
        if retained.as_deref().is_some_and(|r| t < r) && !savepoints.contains(t) {
            assert!(got.is_err(), "as_of {t} is older than the retained commit");
            continue;
        }
        assert_eq!(got.unwrap().0, strs(&e["files"]), "as_of {t}");
        checked += 1;
    }
    let deleted: BTreeSet<String> = evs
        .iter()
        .filter(|e| e["ev"] == "clean")
        .flat_map(|e| strs(&e["deleted"]))
        .collect();
    for e in evs.iter().filter(|e| e["ev"] == "commit") {
        for f in e["files"].as_array().unwrap() {
            let path = f["path"].as_str().unwrap();
            if deleted.contains(path) {
                assert!(!table.join(path).exists(), "{path} was cleaned");
                continue;
            }
            let bytes = std::fs::read(table.join(path)).unwrap();
            assert_eq!(Some(bytes.len() as u64), f["size"].as_u64(), "{path}");
            assert_eq!(
                hudifs_testkit::generator::sim::file_hash(&bytes),
                f["hash"].as_str().unwrap(),
                "{path}"
            );
            if f["kind"] == "base" {
                let md = parquet_rows(&bytes);
                assert_eq!(Some(md), f["rows"].as_u64(), "{path}");
            }
        }
    }
    checked
}

fn parquet_rows(bytes: &[u8]) -> u64 {
    let n = bytes.len();
    assert!(n >= 12 && &bytes[n - 4..] == b"PAR1" && &bytes[..4] == b"PAR1");
    let len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let md =
        parquet::file::metadata::ParquetMetaDataReader::decode_metadata(&bytes[n - 8 - len..n - 8])
            .unwrap();
    md.file_metadata().num_rows() as u64
}

/// The writer's model (its log) and the reader agree, at several points of a history with every
/// operation, for every table version and type. With a logical clock the same seed and a
/// larger operation budget extend the same history, so each budget checks one point of it.
#[test]
fn the_writer_log_agrees_with_hudifs_ls() {
    for (version, cow, seed) in [
        ("6", false, 11),
        ("8", false, 12),
        ("9", false, 13),
        ("6", true, 14),
        ("9", true, 15),
    ] {
        let mut kinds = BTreeSet::new();
        for ops in [15, 40, 80] {
            let dir = tempfile::tempdir().unwrap();
            let (table, log) = (dir.path().join("t"), dir.path().join("log"));
            let mut args = vec!["--version", version, "--logical-clock-ms", CLOCK];
            let (seed, ops) = (seed.to_string(), ops.to_string());
            args.extend(["--seed", &seed, "--max-ops", &ops]);
            if cow {
                args.push("--cow");
            }
            write(&table, &log, &args);
            let evs = events(&log);
            check_against_reader(&table, &evs);
            for e in evs.iter().filter(|e| e["ev"] == "op") {
                kinds.insert(e["op"].as_str().unwrap().to_string());
            }
        }
        let mut all: BTreeSet<String> = [
            "insert",
            "update",
            "slow",
            "crash",
            "rollback",
            "clean",
            "replace",
            "savepoint",
        ]
        .map(String::from)
        .into();
        if !cow {
            all.insert("compaction".into());
        }
        assert_eq!(kinds, all, "v{version} cow={cow}: operations run");
    }
}

/// Fields of the log that depend on timing, not on the seed.
fn without_times(evs: &[Value]) -> Vec<Value> {
    evs.iter()
        .filter(|e| e["ev"] != "end")
        .map(|e| {
            let mut e = e.clone();
            let o = e.as_object_mut().unwrap();
            for k in ["t", "before", "after", "published", "table"] {
                o.remove(k);
            }
            e
        })
        .collect()
}

fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().to_string();
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn same_seed_same_operations_and_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A logical clock: byte-identical tables and logs (but for wall-clock times).
    for name in ["a", "b"] {
        write(
            &d.join(name),
            &d.join(format!("{name}.log")),
            &[
                "--seed",
                "7",
                "--max-ops",
                "60",
                "--logical-clock-ms",
                CLOCK,
            ],
        );
    }
    assert_eq!(tree(&d.join("a")), tree(&d.join("b")));
    assert_eq!(
        without_times(&events(&d.join("a.log"))),
        without_times(&events(&d.join("b.log")))
    );
    // Another seed, another history.
    write(
        &d.join("c"),
        &d.join("c.log"),
        &[
            "--seed",
            "8",
            "--max-ops",
            "60",
            "--logical-clock-ms",
            CLOCK,
        ],
    );
    assert_ne!(tree(&d.join("a")), tree(&d.join("c")));

    // The wall clock: instants differ, the operations, their data and the file ids do not.
    let digest = |log: &Path| -> Vec<String> {
        events(log)
            .iter()
            .filter_map(|e| match e["ev"].as_str().unwrap() {
                "op" => Some(format!("op {}", e["op"])),
                "plan" => Some(format!("plan {}", e["digest"])),
                "commit" => Some(format!(
                    "commit {} {:?}",
                    e["action"],
                    e["files"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|f| (
                            f["file_id"].to_string(),
                            f["kind"].to_string(),
                            f["rows"].to_string()
                        ))
                        .collect::<Vec<_>>()
                )),
                _ => None,
            })
            .collect()
    };
    for name in ["w1", "w2"] {
        write(
            &d.join(name),
            &d.join(format!("{name}.log")),
            &["--seed", "7", "--max-ops", "60"],
        );
    }
    let (w1, w2) = (digest(&d.join("w1.log")), digest(&d.join("w2.log")));
    assert!(w1.len() > 100);
    assert_eq!(w1, w2);
    // The same operations as with the logical clock.
    assert_eq!(w1, digest(&d.join("a.log")));
}

/// A crash leaves the instant inflight with its files on disk, one base file possibly cut
/// short; its rollback removes the instant and its base files.
#[test]
fn crashed_writes_dangle_until_rolled_back() {
    for (version, layout2) in [("6", false), ("9", true)] {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let args = [
            "--seed",
            "3",
            "--version",
            version,
            "--logical-clock-ms",
            CLOCK,
        ];
        write(
            &d.join("full"),
            &d.join("full.log"),
            &[&args[..], &["--max-ops", "80"]].concat(),
        );
        let evs = events(&d.join("full.log"));
        // The first crash that truncated a file, and the op number it ran as.
        let mut op = 0;
        let mut crash = None;
        for e in &evs {
            if e["ev"] == "op" {
                op = e["n"].as_u64().unwrap();
            }
            if e["ev"] == "crash"
                && e["files"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|f| f["truncated"] == true)
            {
                crash = Some((op, e.clone()));
                break;
            }
        }
        let (op, crash) = crash.expect("a crash with a truncated file in 80 operations");
        let t = crash["instant"].as_str().unwrap();
        let table = d.join("t");
        let ops = op.to_string();
        write(
            &table,
            &d.join("log"),
            &[&args[..], &["--max-ops", &ops]].concat(),
        );
        let timeline = if layout2 {
            table.join(".hoodie/timeline")
        } else {
            table.join(".hoodie")
        };
        let names: BTreeSet<String> = std::fs::read_dir(&timeline)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().to_string())
            .filter(|n| n.starts_with(t))
            .collect();
        let action = crash["action"].as_str().unwrap();
        assert_eq!(
            names,
            BTreeSet::from([
                format!("{t}.{action}.requested"),
                format!("{t}.{action}.inflight")
            ]),
            "v{version}"
        );
        for f in crash["files"].as_array().unwrap() {
            let p = table.join(f["path"].as_str().unwrap());
            let bytes = std::fs::read(&p).unwrap();
            assert_eq!(Some(bytes.len() as u64), f["size"].as_u64());
            if f["truncated"] == true {
                assert!(bytes.len() < 8 || &bytes[bytes.len() - 4..] != b"PAR1");
            }
        }
        // Nothing of it is visible, and no temporary file is left behind.
        let (files, _) = ls(&table, None).unwrap();
        for f in crash["files"].as_array().unwrap() {
            assert!(!files.contains(&f["path"].as_str().unwrap().to_string()));
        }
        let tmp: Vec<_> = std::fs::read_dir(table.join(".hoodie/.temp"))
            .unwrap()
            .flatten()
            .collect();
        assert!(tmp.is_empty(), "{tmp:?}");

        // Later in the full history the crash is rolled back.
        let rb = evs
            .iter()
            .find(|e| e["ev"] == "rollback" && e["rolled_back"] == t)
            .expect("rolled back within 80 operations");
        for f in crash["files"].as_array().unwrap() {
            let p = f["path"].as_str().unwrap();
            let is_log = p.rsplit('/').next().unwrap().starts_with('.');
            // v6 keeps a failed log and writes a rollback command block beside it.
            let kept = is_log && !layout2;
            assert_eq!(
                !strs(&rb["deleted"]).contains(&p.to_string()),
                kept,
                "v{version} {p}"
            );
        }
    }
}
