//! The Delta log of a Hudi table as plain values: one version per completed write instant, each
//! the set of data files of that instant's snapshot, and the actions that turn the version
//! before it into it (docs/SEMANTICS.md §11).

use std::sync::{Arc, OnceLock};

use serde_json::{json, Map, Value};

/// One data file of a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaFile {
    /// `add.path`: relative to `delta/`, percent-encoded.
    pub path: String,
    pub size: u64,
    /// `add.modificationTime`: when the version that added it was written (ms since the epoch).
    pub modified_ms: i64,
    /// `add.stats` (none for a change data file).
    pub stats: Option<Arc<str>>,
    /// `add.dataChange`: false where the version that added it only rewrote records (a
    /// compaction, a clustering), so change data readers skip it.
    pub data_change: bool,
}

/// One version: the snapshot of one completed write instant.
#[derive(Debug, Clone)]
pub struct Version {
    pub number: u64,
    /// The instant time, as `as_of/` names it.
    pub instant: String,
    /// The completion time (table versions 8 and 9).
    pub completion: Option<String>,
    /// The Hudi action (`commit`, `deltacommit`, `replacecommit`).
    pub action: String,
    /// Milliseconds since the epoch of the write's completion.
    pub timestamp_ms: i64,
    /// The version's schema (`metaData.schemaString`) and whether it needs `timestampNtz`.
    pub schema: Option<super::schema::DeltaSchema>,
    /// The data files, by their path in the table (partition and name): a file keeps its
    /// `DeltaFile` from the version that added it for as long as it stays.
    /// (A persistent map: a version shares what it keeps with the one before.)
    pub files: imbl::OrdMap<Arc<str>, Arc<DeltaFile>>,
    /// The files of the version before that this one no longer has, and the files it adds.
    pub removed: Vec<Arc<DeltaFile>>,
    pub added: Vec<Arc<DeltaFile>>,
    /// Whether the write changed data (a commit, a deltacommit, an insert overwrite) rather
    /// than only rewrote records: its `remove`s' `dataChange`.
    pub data_change: bool,
    /// Whether it has change data files: a data write of a table with a change data feed (and
    /// a schema to write them in). Its log file is rendered once `changes` is set.
    pub wants_changes: bool,
    /// Its change data files (`cdc` actions, under `_change_data/`), in path order, once worked
    /// out: each costs a change feed, so they are worked out when first needed, not when the
    /// version is built.
    pub changes: OnceLock<Vec<Arc<DeltaFile>>>,
    /// The schema as Arrow (of the same file as `schema`): what its change data files are
    /// written in.
    pub arrow: Option<Arc<arrow_schema::Schema>>,
}

impl Version {
    /// Set `removed` and `added` by comparing every file with version `prev`'s.
    pub fn set_changes(&mut self, prev: Option<&Version>) {
        let empty = imbl::OrdMap::new();
        let before = prev.map_or(&empty, |p| &p.files);
        self.removed = before
            .iter()
            .filter(|(k, f)| self.files.get(*k).is_none_or(|g| g.path != f.path))
            .map(|(_, f)| f.clone())
            .collect();
        self.added = self
            .files
            .iter()
            .filter(|(k, f)| before.get(*k).is_none_or(|g| g.path != f.path))
            .map(|(_, f)| f.clone())
            .collect();
    }
}

/// What every version shares: the table's identity.
#[derive(Debug, Clone)]
pub struct TableFacts {
    /// `metaData.id`: stable for the table.
    pub id: String,
    pub name: String,
    /// `delta.enableChangeDataFeed`: every data write's version has `cdc` actions.
    pub change_feed: bool,
}

/// The bytes of version `cur`'s log file (`_delta_log/<number>.json`): one action per line; an
/// error when it wants change data files not worked out yet.
pub fn render(
    table: &TableFacts,
    prev: Option<&Version>,
    cur: &Version,
) -> Result<Vec<u8>, String> {
    let changes = match (cur.wants_changes, cur.changes.get()) {
        (false, _) => &[][..],
        (true, Some(c)) => &c[..],
        (true, None) => {
            return Err(format!(
                "version {}: its change data files are not worked out yet",
                cur.number
            ))
        }
    };
    let mut lines: Vec<Value> = Vec::new();
    let mut info = Map::new();
    info.insert("timestamp".into(), json!(cur.timestamp_ms));
    info.insert("operation".into(), json!("WRITE"));
    info.insert(
        "operationParameters".into(),
        json!({"mode": if prev.is_some() { "Append" } else { "ErrorIfExists" }}),
    );
    info.insert("isBlindAppend".into(), json!(false));
    info.insert(
        "engineInfo".into(),
        json!(concat!("hudifs/", env!("CARGO_PKG_VERSION"))),
    );
    info.insert("hudi.instant".into(), json!(cur.instant));
    if let Some(c) = &cur.completion {
        info.insert("hudi.completion".into(), json!(c));
    }
    info.insert("hudi.action".into(), json!(cur.action));
    lines.push(json!({ "commitInfo": info }));
    let ntz = |v: &Version| v.schema.as_ref().is_some_and(|s| s.timestamp_ntz);
    if prev.is_none() || prev.is_some_and(|p| ntz(p) != ntz(cur)) {
        lines.push(protocol(table, cur));
    }
    let schema_changed = prev.map(|p| p.schema.as_ref().map(|s| &s.string))
        != Some(cur.schema.as_ref().map(|s| &s.string));
    if schema_changed {
        lines.push(metadata(table, cur));
    }
    for f in &cur.removed {
        lines.push(json!({"remove": {
            "path": f.path,
            "deletionTimestamp": cur.timestamp_ms,
            "dataChange": cur.data_change,
            "extendedFileMetadata": true,
            "partitionValues": {},
            "size": f.size,
        }}));
    }
    for f in &cur.added {
        lines.push(add(f));
    }
    for f in changes {
        lines.push(json!({"cdc": {
            "path": f.path,
            "partitionValues": {},
            "size": f.size,
            "dataChange": false,
        }}));
    }
    let mut out = Vec::new();
    for l in lines {
        out.extend_from_slice(l.to_string().as_bytes());
        out.push(b'\n');
    }
    Ok(out)
}

/// The `protocol` action a version needs: writer version 4 for a change data feed (writer 7
/// with the `changeDataFeed` feature where table features are named anyway, for
/// `timestampNtz`).
pub fn protocol(table: &TableFacts, v: &Version) -> Value {
    if v.schema.as_ref().is_some_and(|s| s.timestamp_ntz) {
        let mut writer = vec!["timestampNtz"];
        if table.change_feed {
            writer.push("changeDataFeed");
        }
        json!({"protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["timestampNtz"],
            "writerFeatures": writer,
        }})
    } else if table.change_feed {
        json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 4}})
    } else {
        json!({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}})
    }
}

/// The `metaData` action of version `v`.
pub fn metadata(table: &TableFacts, v: &Version) -> Value {
    let schema = v
        .schema
        .as_ref()
        .map(|s| s.string.clone())
        .unwrap_or_else(|| json!({"type": "struct", "fields": []}).to_string());
    json!({"metaData": {
        "id": table.id,
        "name": table.name,
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema,
        "partitionColumns": [],
        "configuration": configuration(table),
    }})
}

/// `metaData.configuration`: the table properties Delta readers act on.
fn configuration(table: &TableFacts) -> Value {
    let mut c = Map::new();
    if table.change_feed {
        c.insert("delta.enableChangeDataFeed".into(), json!("true"));
    }
    Value::Object(c)
}

/// The `add` action of file `f`.
pub fn add(f: &DeltaFile) -> Value {
    let mut add = Map::new();
    add.insert("path".into(), json!(f.path));
    add.insert("partitionValues".into(), json!({}));
    add.insert("size".into(), json!(f.size));
    add.insert("modificationTime".into(), json!(f.modified_ms));
    add.insert("dataChange".into(), json!(f.data_change));
    if let Some(s) = &f.stats {
        add.insert("stats".into(), json!(&**s));
    }
    json!({ "add": add })
}

/// A path relative to `delta/` as Delta's `add.path` spells it: a URI reference, so every byte
/// but unreserved characters, `/` and `=` is percent-encoded.
pub fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/' | b'=') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A percent-encoded path (`DeltaFile::path`) as the file system names it.
pub fn decode_path(p: &str) -> String {
    let b = p.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|c| hex(*c)),
            b.get(i + 2).and_then(|c| hex(*c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A stable table id shaped as a UUID, from what names the table.
pub fn table_id(seed: &str) -> String {
    // FNV-1a, twice with different offsets, for 128 bits.
    let h = |offset: u64| {
        seed.bytes().fold(offset, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let (a, b) = (h(0xcbf2_9ce4_8422_2325), h(0x6c62_272e_07bb_0142));
    let x = format!("{a:016x}{b:016x}");
    format!(
        "{}-{}-{}-{}-{}",
        &x[0..8],
        &x[8..12],
        &x[12..16],
        &x[16..20],
        &x[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, size: u64) -> Arc<DeltaFile> {
        Arc::new(DeltaFile {
            path: path.into(),
            size,
            modified_ms: 1,
            stats: Some(r#"{"numRecords":2}"#.into()),
            data_change: true,
        })
    }

    fn version(n: u64, files: &[(&str, &str)]) -> Version {
        Version {
            number: n,
            instant: format!("2024010100000000{n}"),
            completion: None,
            action: "commit".into(),
            timestamp_ms: 1000 + n as i64,
            schema: Some(super::super::schema::DeltaSchema {
                string: r#"{"type":"struct","fields":[]}"#.into(),
                timestamp_ntz: false,
            }),
            files: files
                .iter()
                .map(|(k, p)| (k.to_string(), file(p, 10)))
                .collect(),
            removed: Vec::new(),
            added: Vec::new(),
            data_change: true,
            wants_changes: false,
            changes: OnceLock::new(),
            arrow: None,
        }
    }

    fn actions(bytes: &[u8]) -> Vec<Value> {
        std::str::from_utf8(bytes)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn the_first_version_declares_the_table_and_later_ones_only_what_changed() {
        let t = TableFacts {
            id: table_id("t"),
            name: "t".into(),
            change_feed: false,
        };
        let mut v0 = version(0, &[("p/a", "i0/p/a"), ("p/b", "i0/p/b")]);
        v0.set_changes(None);
        let mut v1 = version(1, &[("p/a", "i0/p/a"), ("p/c", "i1/p/c")]);
        v1.set_changes(Some(&v0));
        let a0 = actions(&render(&t, None, &v0).unwrap());
        assert_eq!(a0[0]["commitInfo"]["hudi.instant"], v0.instant);
        assert!(a0[1].get("protocol").is_some());
        assert!(a0[2].get("metaData").is_some());
        assert_eq!(a0.iter().filter(|a| a.get("add").is_some()).count(), 2);
        let a1 = actions(&render(&t, Some(&v0), &v1).unwrap());
        assert_eq!(a1.len(), 3, "{a1:?}");
        assert_eq!(a1[1]["remove"]["path"], "i0/p/b");
        assert_eq!(a1[2]["add"]["path"], "i1/p/c");
        assert_eq!(a1[2]["add"]["stats"], r#"{"numRecords":2}"#);
    }

    #[test]
    fn a_change_data_feed_is_declared_and_a_rewrite_changes_no_data() {
        let t = TableFacts {
            id: table_id("t"),
            name: "t".into(),
            change_feed: true,
        };
        let mut v0 = version(0, &[("p/a", "i0/p/a")]);
        v0.set_changes(None);
        v0.wants_changes = true;
        assert!(render(&t, None, &v0).is_err(), "not before its change data");
        let cdc = Arc::new(DeltaFile {
            path: "_change_data/i0/p/a.cdc.parquet".into(),
            size: 7,
            modified_ms: 1,
            stats: None,
            data_change: false,
        });
        v0.changes.set(vec![cdc]).unwrap();
        let a0 = actions(&render(&t, None, &v0).unwrap());
        assert_eq!(a0[1]["protocol"]["minWriterVersion"], 4);
        assert_eq!(
            a0[2]["metaData"]["configuration"]["delta.enableChangeDataFeed"],
            "true"
        );
        let cdc = a0.last().unwrap();
        assert_eq!(cdc["cdc"]["path"], "_change_data/i0/p/a.cdc.parquet");
        assert_eq!(cdc["cdc"]["size"], 7);
        assert_eq!(cdc["cdc"]["dataChange"], false);
        // A compaction: its file replaces the one before, changing no data.
        let mut v1 = version(1, &[("p/a2", "i1/p/a2")]);
        v1.data_change = false;
        v1.files = [(
            "p/a2".to_string(),
            Arc::new(DeltaFile {
                data_change: false,
                ..(*file("i1/p/a2", 10)).clone()
            }),
        )]
        .into_iter()
        .collect();
        v1.set_changes(Some(&v0));
        let a1 = actions(&render(&t, Some(&v0), &v1).unwrap());
        assert_eq!(a1[1]["remove"]["dataChange"], false);
        assert_eq!(a1[2]["add"]["dataChange"], false);
        assert_eq!(a1.len(), 3, "no cdc action: {a1:?}");
    }

    #[test]
    fn paths_are_uri_references() {
        assert_eq!(
            encode_path("20240101/city=san francisco/a%b.parquet"),
            "20240101/city=san%20francisco/a%25b.parquet"
        );
        assert_eq!(table_id("x").len(), 36);
        assert_ne!(table_id("x"), table_id("y"));
    }
}
