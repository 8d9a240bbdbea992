//! The writer's log: `hudifs-writer`'s JSON lines, read into what the checks compare against —
//! the files of completed writes, the snapshots, the final `as_of` views, cleans and deletions.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

pub struct FileInfo {
    pub writer: String,
    pub published: i64,
    pub rows: Option<u64>,
    pub size: u64,
    pub hash: String,
    pub base: bool,
}

pub struct Snapshot {
    pub instant: Option<String>,
    pub published: i64,
    pub files: BTreeSet<String>,
}

impl Snapshot {
    pub fn partitions(&self) -> BTreeSet<String> {
        self.files
            .iter()
            .filter_map(|f| f.rsplit_once('/').map(|(p, _)| p.to_string()))
            .collect()
    }
    pub fn in_partition(&self, p: &str) -> Vec<String> {
        self.files
            .iter()
            .filter_map(|f| f.rsplit_once('/'))
            .filter(|(fp, _)| *fp == p)
            .map(|(_, n)| n.to_string())
            .collect()
    }
}

pub struct Clean {
    pub retain: String,
    /// When its requested file was renamed in: from then on it may delete what it does not
    /// retain, and the daemon refuses time travel before `retain`.
    pub requested: i64,
    pub completed: i64,
}

#[derive(Default)]
pub struct Log {
    pub files: HashMap<String, FileInfo>,
    pub snapshots: Vec<Snapshot>,
    /// T → (when the writer logged it final, its files).
    pub finals: HashMap<String, (i64, BTreeSet<String>)>,
    pub cleans: Vec<Clean>,
    pub savepoints: BTreeSet<String>,
    /// Completed write instants and savepoints → when their completed file was renamed.
    pub as_of_names: HashMap<String, i64>,
    /// Deleted files → when their deleting instant completed.
    pub deleted: HashMap<String, i64>,
    pub ops: u64,
    pub counts: BTreeMap<String, u64>,
    pub end_seen: bool,
}

pub fn parse_log(text: &str) -> Log {
    let mut log = Log::default();
    // (instant, action, state) → ms before the rename.
    let mut renames: HashMap<(String, String, String), i64> = HashMap::new();
    let evs: Vec<Value> = text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    for e in &evs {
        match e["ev"].as_str().unwrap_or_default() {
            "timeline" => {
                let key = (s(&e["instant"]), s(&e["action"]), s(&e["state"]));
                let before = e["before"].as_i64().unwrap_or(0);
                if key.2 == "completed"
                    && ["commit", "deltacommit", "replacecommit", "savepoint"]
                        .contains(&key.1.as_str())
                {
                    log.as_of_names.entry(key.0.clone()).or_insert(before);
                }
                renames.insert(key, before);
            }
            "commit" => {
                let published = e["published"].as_i64().unwrap_or(0);
                for f in e["files"].as_array().into_iter().flatten() {
                    log.files.insert(
                        s(&f["path"]),
                        FileInfo {
                            writer: s(&e["instant"]),
                            published,
                            rows: f["rows"].as_u64(),
                            size: f["size"].as_u64().unwrap_or(0),
                            hash: s(&f["hash"]),
                            base: f["kind"] == "base",
                        },
                    );
                }
            }
            "snapshot" => log.snapshots.push(Snapshot {
                instant: e["instant"].as_str().map(str::to_string),
                published: e["published"].as_i64().unwrap_or(0),
                files: e["files"].as_array().into_iter().flatten().map(s).collect(),
            }),
            "final" => {
                log.finals.insert(
                    s(&e["instant"]),
                    (
                        e["t"].as_i64().unwrap_or(0),
                        e["files"].as_array().into_iter().flatten().map(s).collect(),
                    ),
                );
            }
            "clean" => {
                let completed = e["published"].as_i64().unwrap_or(0);
                let key = (s(&e["instant"]), "clean".into(), "requested".into());
                log.cleans.push(Clean {
                    retain: s(&e["earliest_commit_to_retain"]),
                    requested: renames.get(&key).copied().unwrap_or(completed),
                    completed,
                });
                for f in e["deleted"].as_array().into_iter().flatten() {
                    log.deleted.insert(s(f), completed);
                }
            }
            "rollback" => {
                let key = (s(&e["instant"]), "rollback".into(), "completed".into());
                let completed = renames.get(&key).copied().unwrap_or(0);
                for f in e["deleted"].as_array().into_iter().flatten() {
                    log.deleted.insert(s(f), completed);
                }
            }
            "savepoint" => {
                log.savepoints.insert(s(&e["instant"]));
            }
            "end" => {
                log.end_seen = true;
                log.ops = e["ops"].as_u64().unwrap_or(0);
                if let Some(c) = e["counts"].as_object() {
                    for (k, v) in c {
                        log.counts.insert(k.clone(), v.as_u64().unwrap_or(0));
                    }
                }
            }
            _ => {}
        }
    }
    log
}
