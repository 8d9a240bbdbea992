//! The fixture tables themselves: every table with expected answers is there, and the tables
//! the sdist carries beyond those (no expected answers, not part of conformance) unzip by name
//! through `fixture_table` into table roots.

use hudifs_testkit::support;

use std::collections::BTreeSet;

#[test]
fn every_fixture_table_is_there_and_unzips_by_name() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    let all: BTreeSet<String> = support::table_names(&dir).into_iter().collect();
    let answered: BTreeSet<String> = support::fixtures(&dir)
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert!(answered.is_subset(&all));
    let extra: Vec<&String> = all.difference(&answered).collect();
    // The fetched cache holds all 73 tables of the sdist; an unpacked copy named by
    // HUDIFS_FIXTURES_DIR may hold only those with answers.
    if dir.join("tables/FETCHED").is_file() {
        assert_eq!((all.len(), answered.len()), (73, 61), "{extra:?}");
    }
    for name in &extra {
        let tmp = tempfile::tempdir().unwrap();
        let root = support::fixture_table(tmp.path(), name).unwrap();
        assert!(
            root.join(".hoodie/hoodie.properties").is_file(),
            "{name}: no .hoodie/hoodie.properties in {}",
            root.display()
        );
    }
    eprintln!(
        "fixture tables: {} in {}, {} with expected answers, {} more reachable by name: {extra:?}",
        all.len(),
        dir.join("tables").display(),
        answered.len(),
        extra.len()
    );
}
