//! The fixture tables' expected answers (tests/fixtures/, see its README.md) and checking views
//! against them: through `hudifs ls`, through mounts, and a store's mount against a local one.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::files::{walk_files, xattr};

/// The folder whose `tables/<path>.zip` are the fixture tables (`crate::fixtures`).
pub fn fixtures_dir() -> Option<PathBuf> {
    crate::fixtures::dir()
}

/// The expected answers kept in the repository: `expected/` and `reference/`.
pub fn answers_dir() -> PathBuf {
    crate::fixtures::workspace().join("tests/fixtures")
}

/// A table another writer wrote and that writer's answers for it (tests/fixtures/hudi-rs-0.6/,
/// see its README.md): `root` the table, `answers` the folder of `views.json`, `steps.json`
/// and one Parquet file per view.
#[derive(Debug)]
pub struct WrittenTable {
    pub name: String,
    pub root: PathBuf,
    pub answers: PathBuf,
}

impl WrittenTable {
    /// `views.json` or `steps.json` of the answers.
    pub fn doc(&self, file: &str) -> Value {
        serde_json::from_slice(&std::fs::read(self.answers.join(file)).unwrap()).unwrap()
    }
}

/// The tables hudi-rs 0.6 wrote, unzipped into `tmp`, sorted by name; with
/// `HUDIFS_HUDI_RS_TABLES=DIR`, the fresh output of `hudi-rs-oracle write DIR` in place instead.
pub fn hudi_rs_tables(tmp: &Path) -> Vec<WrittenTable> {
    if let Ok(dir) = std::env::var("HUDIFS_HUDI_RS_TABLES") {
        return written_tables_in(Path::new(&dir));
    }
    for e in std::fs::read_dir(answers_dir().join("hudi-rs-0.6")).unwrap() {
        let zip = e.unwrap().path();
        if zip.extension().is_some_and(|x| x == "zip") {
            unzip(&zip, tmp);
        }
    }
    written_tables_in(tmp)
}

/// The tables under `dir` (a folder with `.hoodie/`, searched to any depth) whose answers are
/// beside them (`<table>.answers/`), sorted by name (the path under `dir`).
pub fn written_tables_in(dir: &Path) -> Vec<WrittenTable> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let root = e.path();
            if !root.is_dir() {
                continue;
            }
            let answers = root.with_file_name(format!(
                "{}.answers",
                root.file_name().unwrap().to_string_lossy()
            ));
            if root.join(".hoodie").is_dir() && answers.is_dir() {
                let name = root
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                out.push(WrittenTable {
                    name,
                    root,
                    answers,
                });
            } else if !root.join(".hoodie").is_dir() {
                stack.push(root);
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// One fixture: its name (path under tables/ without .zip), its expected answers, its zip.
pub struct Fixture {
    pub name: String,
    pub expected: Value,
    pub zip: PathBuf,
    pub reference: Option<Value>,
}

/// The fixtures that have expected answers (tests/fixtures/expected/<name>.json), each with its
/// zip in `dir/tables/` (`dir` from `fixtures_dir()`), sorted by name.
pub fn fixtures(dir: &Path) -> Vec<Fixture> {
    let answers = answers_dir();
    let mut out = Vec::new();
    let mut stack = vec![answers.join("expected")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "json") {
                let rel = p
                    .strip_prefix(answers.join("expected"))
                    .unwrap()
                    .with_extension("");
                let name = rel.to_string_lossy().to_string();
                let expected = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                let reference =
                    std::fs::read(answers.join("reference").join(&rel).with_extension("json"))
                        .ok()
                        .and_then(|b| serde_json::from_slice(&b).ok());
                let zip = dir.join("tables").join(&rel).with_extension("zip");
                assert!(
                    zip.is_file(),
                    "{name} has expected answers but no {}",
                    zip.display()
                );
                out.push(Fixture {
                    zip,
                    name,
                    expected,
                    reference,
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Every fixture table in `dir/tables/` (with or without expected answers): its name, the path
/// under tables/ without .zip, sorted.
pub fn table_names(dir: &Path) -> Vec<String> {
    let tables = dir.join("tables");
    let mut out = Vec::new();
    let mut stack = vec![tables.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "zip") {
                let rel = p.strip_prefix(&tables).unwrap().with_extension("");
                out.push(rel.to_string_lossy().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Unzip a fixture into `into`; returns the table root (the folder named after the zip).
pub fn unzip(zip: &Path, into: &Path) -> PathBuf {
    let f = std::fs::File::open(zip).unwrap();
    let mut archive = zip::ZipArchive::new(f).unwrap();
    archive.extract(into).unwrap();
    into.join(zip.file_stem().unwrap())
}

/// Unzip the fixture table `name` (its path under tables/, without .zip; any of the fetched
/// tables, with expected answers or not) into `tmp`; `None` (with the reason printed) when the
/// fixtures are missing.
pub fn fixture_table(tmp: &Path, name: &str) -> Option<PathBuf> {
    let dir = fixtures_dir()?;
    let zip = dir.join("tables").join(format!("{name}.zip"));
    assert!(
        zip.is_file(),
        "no fixture table {name}: {} is missing",
        zip.display()
    );
    Some(unzip(&zip, tmp))
}

/// What a view answered: its files, or that it was refused.
#[derive(Debug, PartialEq)]
pub enum Answer {
    Files {
        files: Vec<String>,
        selected: Option<Vec<String>>,
        effective_end: Option<String>,
    },
    Refused(String),
}

/// A question to ask a table.
#[derive(Debug, Clone)]
pub enum Ask {
    Latest { read_optimized: bool },
    AsOf(String),
    Window(String),
}

/// Check every view of `expected` against `answer`; returns the mismatches.
pub fn check_fixture(
    name: &str,
    expected: &Value,
    mut answer: impl FnMut(&Ask) -> Answer,
) -> (usize, Vec<String>) {
    let mut checked = 0;
    let mut problems = Vec::new();
    let strs = |v: &Value| -> Vec<String> {
        let mut x: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        x.sort();
        x
    };
    let mut compare = |ask: Ask, exp: &Value, with_window: bool| {
        checked += 1;
        let got = answer(&ask);
        let ok = match (&got, exp) {
            (Answer::Refused(_), e) if e.get("refused").is_some() => true,
            (
                Answer::Files {
                    files,
                    selected,
                    effective_end,
                },
                e,
            ) if e.is_array() => {
                *files == strs(e)
                    && (!with_window || (selected.is_none() && effective_end.is_none()))
            }
            (
                Answer::Files {
                    files,
                    selected,
                    effective_end,
                },
                e,
            ) if e.get("files").is_some() => {
                *files == strs(&e["files"])
                    && selected
                        .as_ref()
                        .is_some_and(|s| *s == strs(&e["selected"]))
                    && effective_end
                        .as_ref()
                        .is_some_and(|x| Some(x.as_str()) == e["effective_end"].as_str())
            }
            _ => false,
        };
        if !ok {
            problems.push(format!(
                "{name} {ask:?}:\n  expected {exp}\n  got      {got:?}"
            ));
        }
    };
    compare(
        Ask::Latest {
            read_optimized: false,
        },
        &expected["latest"],
        false,
    );
    compare(
        Ask::Latest {
            read_optimized: true,
        },
        &expected["latest_read_optimized"],
        false,
    );
    for (t, exp) in expected["as_of"].as_object().unwrap() {
        compare(Ask::AsOf(t.clone()), exp, false);
    }
    for (w, exp) in expected["incremental"].as_object().unwrap() {
        compare(Ask::Window(w.clone()), exp, true);
    }
    (checked, problems)
}

/// The answer of a mount to `ask`, walking it with plain file-system calls: `m` a mount,
/// `ro` a `--read-optimized` mount of the same table (tests/mount_conformance.rs and the S3
/// conformance).
pub fn mount_answer(m: &Path, ro: &Path, ask: &Ask) -> Answer {
    let dir = match ask {
        Ask::Latest {
            read_optimized: true,
        } => ro.join("latest"),
        Ask::Latest { .. } => m.join("latest"),
        Ask::AsOf(t) => m.join("as_of").join(t),
        Ask::Window(w) => m.join("incremental").join(w),
    };
    match walk_files(&dir) {
        Ok(files) => {
            let (selected, effective_end) = if matches!(ask, Ask::Window(_)) {
                let sel = xattr(&dir, "user.hudi.commit_times").map(|s| {
                    s.split(',')
                        .filter(|x| !x.is_empty())
                        .map(str::to_string)
                        .collect()
                });
                (sel, xattr(&dir, "user.hudi.effective_end"))
            } else {
                (None, None)
            };
            Answer::Files {
                files,
                selected,
                effective_end,
            }
        }
        Err(e) => Answer::Refused(e.to_string()),
    }
}

/// Every view of a fixture's `expected` answers through a mount of the table on a store (`m`,
/// and `ro` with `--read-optimized`) and through the local mounts (`lm`, `lro`): the views
/// checked, and each mismatch (with the expected answers, or between the two mounts).
pub fn views_match_local(
    name: &str,
    expected: &Value,
    (m, ro): (&Path, &Path),
    (lm, lro): (&Path, &Path),
) -> (usize, Vec<String>) {
    let mut differ = Vec::new();
    let (n, mut problems) = check_fixture(name, expected, |ask: &Ask| {
        let got = mount_answer(m, ro, ask);
        let local = mount_answer(lm, lro, ask);
        let same = match (&got, &local) {
            (Answer::Refused(_), Answer::Refused(_)) => true,
            (a, b) => a == b,
        };
        if !same {
            differ.push(format!("{name} {ask:?}: store {got:?}, local {local:?}"));
        }
        got
    });
    problems.extend(differ);
    (n, problems)
}

/// The files below `sub` of a store mount `m` have the names and bytes of those below `sub` of
/// the local mount `lm`; their number.
pub fn same_files(name: &str, m: &Path, lm: &Path, sub: &str) -> usize {
    let names = walk_files(&m.join(sub)).unwrap();
    assert_eq!(
        names,
        walk_files(&lm.join(sub)).unwrap(),
        "{name}: {sub}/ names differ"
    );
    for rel in &names {
        let via = std::fs::read(m.join(sub).join(rel)).unwrap();
        let local = std::fs::read(lm.join(sub).join(rel)).unwrap();
        assert!(via == local, "{name}: {sub}/{rel} differs");
    }
    names.len()
}
