//! Conformance on an object store: every fixture table uploaded through the StorageWrite seam to
//! an in-memory object store (ETags, If-Match, delimiter listings) gives the same answers as the
//! expectations the local tables are checked against (tests/logic/conformance.rs), from the same code.

use hudifs_testkit::support;

use std::sync::Arc;

use hudifs_core::snapshot::Snapshot;
use hudifs_core::viewkey::{self, ViewKey};
use hudifs_objstore::{ObjectStorage, StoreUrl};
use hudifs_storage::{Kind, Storage, StorageWrite, TablePath, TreeProgress};
use support::{check_fixture, Answer, Ask};

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
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    let fixtures = support::fixtures(&dir);
    assert!(fixtures.len() >= 60, "found {} fixtures", fixtures.len());
    let (mut total, mut objects) = (0, 0);
    let mut problems = Vec::new();
    for fx in &fixtures {
        let tmp = tempfile::tempdir().unwrap();
        let root = support::unzip(&fx.zip, tmp.path());
        let url = StoreUrl::parse(&format!("s3://bucket/warehouse/{}", fx.name)).unwrap();
        let store = ObjectStorage::in_memory(url).unwrap();
        objects += support::put_tree(&store, &root);
        same_discovery_both_ways(&fx.name, &store);
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

/// What a discovery found: partitions, and each one's listing as (name, is a file, size).
type Discovered = (Vec<String>, Vec<(String, Vec<(String, bool, u64)>)>);

fn discovered(store: &ObjectStorage, max_tree_requests: usize) -> Discovered {
    let (parts, listed) =
        hudifs_core::listing::discover_partitions_within(store, max_tree_requests).unwrap();
    let mut listed: Vec<_> = listed
        .into_iter()
        .map(|(p, entries)| {
            let mut e: Vec<_> = entries
                .into_iter()
                .map(|e| (e.name, e.meta.kind == Kind::File, e.meta.size))
                .collect();
            e.sort();
            (p, e)
        })
        .collect();
    listed.sort();
    (parts, listed)
}

/// What differs between two discoveries, briefly.
fn difference(a: &Discovered, b: &Discovered) -> String {
    if a.0 != b.0 {
        return format!("partitions {:?} vs {:?}", a.0, b.0);
    }
    for ((p, x), (_, y)) in a.1.iter().zip(&b.1) {
        if x != y {
            let only_a: Vec<_> = x.iter().filter(|e| !y.contains(e)).take(3).collect();
            let only_b: Vec<_> = y.iter().filter(|e| !x.contains(e)).take(3).collect();
            return format!(
                "partition {p:?}: only in the first {only_a:?}, only in the second {only_b:?}"
            );
        }
    }
    format!("{} vs {} listings", a.1.len(), b.1.len())
}

/// Discovery from one listing of the whole tree finds what a walk directory by directory finds.
fn same_discovery_both_ways(name: &str, store: &ObjectStorage) {
    let by_tree = discovered(store, 5);
    let by_dir = discovered(store, 0);
    assert!(
        by_tree == by_dir,
        "{name}: {}",
        difference(&by_tree, &by_dir)
    );
}

/// The tree is listed whole only within the request budget (1,000 keys a page), skips `.hoodie/`
/// (and nothing else: names sorting just before and after it are kept), and a discovery falls
/// back to directory listings beyond it.
#[test]
fn a_tree_larger_than_the_budget_is_listed_by_directory() {
    let store = ObjectStorage::in_memory(StoreUrl::parse("s3://bucket/big/t").unwrap()).unwrap();
    let put = |p: &str| store.put(&TablePath::new(p).unwrap(), b"x").unwrap();
    put(".hoodie/hoodie.properties");
    put(".hoodie/timeline/20240101000000000.commit");
    put("-early/x");
    put(".hoodie_partition_metadata");
    put("p=1/.hoodie_partition_metadata");
    for i in 0..1000 {
        put(&format!("p=1/f{i:04}_0-1-1_20240101000000000.parquet"));
    }
    let root = TablePath::root();
    let pages = |n: usize| move |p: TreeProgress| p.keys < n * 1000;
    assert!(Storage::list_tree(&store, &root, ".hoodie", &pages(1)).is_none());
    let tree = Storage::list_tree(&store, &root, ".hoodie", &pages(2)).expect("within 2 pages");
    let names: Vec<&str> = tree.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names.len(), 1003, "{:?}", &names[..5]);
    assert!(names.contains(&"-early/x") && names.contains(&".hoodie_partition_metadata"));
    assert!(!names.iter().any(|n| n.starts_with(".hoodie/")));
    // Whatever the budget and whether the tree pays, the same answer.
    let (parts, listed) = discovered(&store, 5);
    assert_eq!(parts, ["", "p=1"]);
    assert_eq!(listed[1].1.len(), 1001);
    let (by_tree, by_dir) = ((parts, listed), discovered(&store, 1));
    assert!(by_tree == by_dir, "{}", difference(&by_tree, &by_dir));
}

/// A discovery lists a tree of many small partitions whole, page after page, and one of few
/// big partitions directory by directory, LISTs side by side, as soon as its first page shows
/// which it is (listing/walk.rs `tree_pays`); the answer is the same either way.
#[test]
fn the_first_page_chooses_between_the_tree_and_directory_listings() {
    for (partitions, files, by_tree) in [(2000, 1, true), (20, 200, false)] {
        let url = format!("s3://bucket/shape/{partitions}x{files}");
        let store = ObjectStorage::in_memory(StoreUrl::parse(&url).unwrap()).unwrap();
        let put = |p: &str| store.put(&TablePath::new(p).unwrap(), b"x").unwrap();
        put(".hoodie/hoodie.properties");
        for p in 0..partitions {
            put(&format!("p={p:04}/.hoodie_partition_metadata"));
            for f in 0..files {
                put(&format!("p={p:04}/f{f:04}_0-1-1_20240101000000000.parquet"));
            }
        }
        let before = store.requests().list;
        let got = discovered(&store, 100);
        let lists = store.requests().list - before;
        assert_eq!(got.0.len(), partitions);
        let keys = partitions * (files + 1);
        if by_tree {
            // Two listings' first pages, then a page per 1,000 keys.
            assert!(lists as usize <= 2 + keys / 1000, "{url}: {lists} LISTs");
        } else {
            // The abandoned first page, then the root and one LIST per partition.
            assert!(
                lists as usize <= 2 + 1 + partitions + 1,
                "{url}: {lists} LISTs"
            );
            assert!(lists as usize > partitions, "{url}: {lists} LISTs");
        }
        let by_dir = discovered(&store, 0);
        assert!(got == by_dir, "{url}: {}", difference(&got, &by_dir));
    }
}
