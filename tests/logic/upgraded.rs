//! Tables upgraded from Hudi 0.x, written by the test kit exactly as Java's upgrade handlers
//! leave them (`TableWriter::upgrade` and `build_upgraded`, crates/hudifs-testkit/src/generator/upgrade.rs): a
//! version-6 history (logs named after their base instant, a compaction scheduled and left
//! pending, a failed write, the 0.x archive), the upgrade (which rolls the failed write back,
//! compacts the groups with logs, moves the timeline to `.hoodie/timeline/` with completion
//! times in the names and copies the archive into the LSM history), then version-8 writes (logs
//! named after their deltacommit, one into the pending compaction's slice, the compaction
//! completed across the upgrade, LSM archival) and, for version 9, the 8→9 upgrade and more
//! writes. Every view (`latest/` and `as_of/<T>` for every completed write) must be what the
//! writer's own model says.

use hudifs::fs::{FsOptions, HudiFs};
use hudifs_core::archive::load_archive;
use hudifs_core::table::{TableConfig, TableType};
use hudifs_storage::LocalStore;
use hudifs_testkit::generator::build_upgraded;

use crate::model::{paths, shown, xattr};

fn check(table_type: TableType, version: u32, payload: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("t");
    let u = build_upgraded(&root, table_type, version, payload).unwrap();
    let (w, pending) = (u.writer, u.pending);
    let name = format!("{table_type:?} v{version} {payload:?}");
    // The shape Java's upgrade leaves.
    let props = std::fs::read_to_string(root.join(".hoodie/hoodie.properties")).unwrap();
    for want in [
        format!("hoodie.table.version={version}"),
        "hoodie.table.initial.version=SIX".into(),
        "hoodie.timeline.layout.version=2".into(),
        "hoodie.timeline.path=timeline".into(),
    ] {
        assert!(
            props.lines().any(|l| l == want),
            "{name}: {want} in\n{props}"
        );
    }
    let top: Vec<String> = std::fs::read_dir(root.join(".hoodie"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert!(
        top.is_empty(),
        "{name}: timeline files left in .hoodie: {top:?}"
    );
    assert!(
        std::fs::read_dir(root.join(".hoodie/archived"))
            .unwrap()
            .any(|e| e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".commits_")),
        "{name}: the 0.x archive stays"
    );
    let store = LocalStore::new(&root).unwrap();
    let cfg = TableConfig::load(&store).unwrap();
    let archive = load_archive(&store, &cfg).unwrap();
    assert!(archive.is_complete(), "{name}: {:?}", archive.problems);
    assert!(
        archive
            .instants
            .iter()
            .any(|i| i.file.contains(".commits_.archive."))
            || archive.instants.len() >= 2,
        "{name}: {archive:?}"
    );
    if let Some(c) = &pending {
        // Completed after the upgrade, with a completion time in its name (now in the
        // timeline or in the LSM history).
        let completion = &w.completed_writes()[c];
        let named = format!("{c}_{completion}.commit");
        let in_timeline = root.join(".hoodie/timeline").join(&named).exists();
        let in_history = archive
            .instants
            .iter()
            .any(|i| i.requested.as_str() == c && i.completion.as_str() == completion);
        assert!(in_timeline || in_history, "{name}: {named}");
    }
    // Every view equals the writer's model.
    let fs = HudiFs::new(&root, FsOptions::default()).unwrap();
    let mut problems = Vec::new();
    let got = shown(&fs, &["latest"]);
    if got.as_ref() != Ok(&paths(&w, None)) {
        problems.push(format!("latest/: {got:?}\n  model {:?}", paths(&w, None)));
    }
    let newest = w.completed_writes().keys().next_back().cloned();
    assert_eq!(
        xattr(&fs, &["latest"], "user.hudi.instant"),
        newest,
        "{name}"
    );
    let mut checked = 0;
    for t in w.completed_writes().keys() {
        let got = shown(&fs, &["as_of", t]);
        let want = paths(&w, Some(t));
        if got.as_ref() != Ok(&want) {
            problems.push(format!("as_of/{t}: {got:?}\n  model {want:?}"));
        }
        checked += 1;
    }
    assert!(checked >= 5, "{name}: {checked} views");
    assert!(problems.is_empty(), "{name}:\n{}", problems.join("\n"));
}

#[test]
fn merge_on_read_upgraded_to_8_shows_what_the_model_says() {
    check(TableType::MergeOnRead, 8, None);
}

#[test]
fn merge_on_read_upgraded_to_9_shows_what_the_model_says() {
    check(TableType::MergeOnRead, 9, None);
    check(
        TableType::MergeOnRead,
        9,
        Some("org.apache.hudi.common.model.DefaultHoodieRecordPayload"),
    );
}

#[test]
fn copy_on_write_upgraded_to_8_and_9_shows_what_the_model_says() {
    check(TableType::CopyOnWrite, 8, None);
    check(TableType::CopyOnWrite, 9, None);
}
