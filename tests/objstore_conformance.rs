//! Conformance on an object store: every fixture table uploaded through the StorageWrite seam to
//! an in-memory object store (ETags, If-Match, delimiter listings) gives the same answers as the
//! expectations the local tables are checked against (tests/conformance.rs), from the same code.

mod common;

use std::sync::Arc;

use common::{check_fixture, Answer, Ask};
use hudifs_core::snapshot::Snapshot;
use hudifs_core::viewkey::{self, ViewKey};
use hudifs_objstore::{ObjectStorage, StoreUrl};
use hudifs_storage::{StorageWrite, TablePath};

fn answer(table: &Snapshot, ask: &Ask) -> Answer {
    let zone = hudifs::cli::zone(None, table.cfg.timeline_zone.as_ref()).unwrap();
    let (key, ro) = match ask {
        Ask::Latest { read_optimized } => (Ok(ViewKey::Latest), *read_optimized),
        Ask::AsOf(t) => (
            viewkey::parse_as_of(t, &zone).map_err(|e| e.to_string()),
            false,
        ),
        Ask::Window(w) => (
            table.parse_window(w, &zone).map_err(|e| e.to_string()),
            false,
        ),
    };
    let key = match key {
        Ok(k) => k,
        Err(e) => return Answer::Refused(e),
    };
    let view = match table.resolve(&key, ro) {
        Ok(v) => v,
        Err(e) => return Answer::Refused(e.to_string()),
    };
    let v = hudifs::cli::view_json(&key, &view, ro);
    let strs = |x: &serde_json::Value| {
        x.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
    };
    Answer::Files {
        files: view.files.iter().map(|f| f.rel_path()).collect(),
        selected: strs(&v["selected"]),
        effective_end: v["effective_end"].as_str().map(str::to_string),
    }
}

#[test]
fn every_fixture_uploaded_to_an_object_store() {
    let Some(dir) = common::fixtures_dir() else {
        return;
    };
    let fixtures = common::fixtures(&dir);
    assert!(fixtures.len() >= 60, "found {} fixtures", fixtures.len());
    let (mut total, mut objects) = (0, 0);
    let mut problems = Vec::new();
    for fx in &fixtures {
        let tmp = tempfile::tempdir().unwrap();
        let root = common::unzip(&fx.zip, tmp.path());
        let url = StoreUrl::parse(&format!("s3://bucket/warehouse/{}", fx.name)).unwrap();
        let store = ObjectStorage::in_memory(url).unwrap();
        for rel in common::walk_files(&root).unwrap() {
            let bytes = std::fs::read(root.join(&rel)).unwrap();
            store.put(&TablePath::new(&rel).unwrap(), &bytes).unwrap();
            objects += 1;
        }
        let table = Snapshot::open(Arc::new(store)).unwrap();
        let (n, p) = check_fixture(&fx.name, &fx.expected, |ask| answer(&table, ask));
        total += n;
        problems.extend(p);
    }
    eprintln!(
        "objstore conformance: {} fixtures, {objects} objects, {total} views checked, {} mismatches",
        fixtures.len(),
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
