//! What the tests of bootstrapped tables share (SEMANTICS.md §10.11): a table bootstrapped by the
//! kit with an upsert on top, and every view of a mount of it checked against what the kit
//! wrote (read back with the parquet crate's record reader, not hudifs).

use std::path::Path;
use std::sync::Arc;

use hudifs_core::table::TableType;
use hudifs_storage::{LocalStore, StorageWrite};

use crate::generator::{
    bootstrapped_table, rows_with_ids, seqno_matches, stitched_rows, BootstrappedGroup, Row,
    STITCHED_COLUMNS,
};
use crate::support::{parquet_rows, xattr};

/// What [`bootstrapped_with_upsert`] wrote: the two groups (`city=a`, `city=b`), the upsert on
/// `city=a`'s group, a time between the bootstrap and it, and the rows (id, name) the kit holds
/// for `city=a`'s group after it.
pub struct Upserted {
    pub a: BootstrappedGroup,
    pub b: BootstrappedGroup,
    pub upsert: Vec<Row>,
    pub t0: String,
    pub model: Vec<(i64, String)>,
}

/// The names in directory `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    v.sort();
    v
}

/// The file name of `g`'s skeleton.
pub fn skeleton_name(g: &BootstrappedGroup) -> String {
    g.skeleton.rsplit('/').next().unwrap().to_string()
}

/// The file at `path` holds the stitched rows of `g`, and `stat` says the size read.
pub fn assert_stitched(path: &Path, g: &BootstrappedGroup) {
    let size = std::fs::metadata(path).unwrap().len();
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(size, bytes.len() as u64, "{}", path.display());
    let (columns, rows) = parquet_rows(&bytes);
    assert_eq!(columns, STITCHED_COLUMNS, "{}", path.display());
    assert!(
        seqno_matches(&rows, &stitched_rows(g)),
        "{}: {rows:?}",
        path.display()
    );
}

/// (id, name) of every row of a Parquet file, by id.
pub fn id_names(path: &Path) -> Vec<(i64, String)> {
    let (cols, rows) = parquet_rows(&std::fs::read(path).unwrap());
    let id = cols.iter().position(|c| c == "id").unwrap();
    let name = cols.iter().position(|c| c == "name").unwrap();
    let mut v: Vec<(i64, String)> = rows
        .iter()
        .map(|r| (r[id].parse().unwrap(), r[name].clone()))
        .collect();
    v.sort();
    v
}

/// `yyyyMMddHHmmssSSS` of `ms` after the kit's clock start (2026-01-01T00:00:00Z).
pub fn time_after_start(ms: i64) -> String {
    let (h, m, s, f) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    format!("20260101{h:02}{m:02}{s:02}{f:03}")
}

/// A table at `dir/table` bootstrapped from `dir/source` (`base_uri` naming it in the index),
/// then an upsert of two bootstrapped rows and one new row into `city=a`'s group.
pub fn bootstrapped_with_upsert(
    dir: &Path,
    base_uri: &str,
    tt: TableType,
    version: u32,
) -> Upserted {
    let root = dir.join("table");
    let source = dir.join("source");
    std::fs::create_dir_all(&source).unwrap();
    let src: Arc<dyn StorageWrite> = Arc::new(LocalStore::new(&source).unwrap());
    let (mut w, groups) = bootstrapped_table(&root, &*src, base_uri, tt, version).unwrap();
    let a = groups
        .iter()
        .find(|g| g.partition == "city=a")
        .unwrap()
        .clone();
    let b = groups
        .iter()
        .find(|g| g.partition == "city=b")
        .unwrap()
        .clone();
    let t0 = time_after_start(w.clock_ms() - 1 - 1_767_225_600_000);
    let mut upsert = rows_with_ids(7, &[a.rows[0].id, a.rows[1].id, 5_000_000]);
    for r in &mut upsert {
        r.ts = 1_800_000_000_000;
    }
    let mut txn = w.begin(w.write_action()).unwrap();
    txn.update("city=a", &a.file_id, &upsert).unwrap();
    txn.complete().unwrap();
    let mut model: Vec<(i64, String)> = w
        .group_rows("city=a", &a.file_id)
        .unwrap()
        .into_iter()
        .map(|r| (r.id, r.name))
        .collect();
    model.sort();
    Upserted {
        a,
        b,
        upsert,
        t0,
        model,
    }
}

/// Every view of `m` over a table [`bootstrapped_with_upsert`] wrote.
pub fn check_views(m: &Path, u: &Upserted, mor: bool) {
    let (a, b, upsert, t0, model) = (&u.a, &u.b, &u.upsert[..], u.t0.as_str(), &u.model[..]);
    let (sa, sb) = (skeleton_name(a), skeleton_name(b));
    // latest/: city=b is its stitched skeleton; city=a a new base file (COW) or the stitched
    // skeleton and its log (MOR).
    assert_stitched(&m.join("latest/city=b").join(&sb), b);
    let latest_a = names(&m.join("latest/city=a"));
    if mor {
        assert_eq!(latest_a.len(), 2, "{latest_a:?}");
        assert_stitched(&m.join("latest/city=a").join(&sa), a);
    } else {
        assert_eq!(latest_a.len(), 1, "{latest_a:?}");
        assert_eq!(id_names(&m.join("latest/city=a").join(&latest_a[0])), model);
    }
    let from = xattr(
        &m.join("latest/city=b").join(&sb),
        "user.hudi.stitched_from",
    )
    .expect("user.hudi.stitched_from");
    assert!(
        from.contains(&b.skeleton) && from.contains(&b.source),
        "{from}"
    );
    // as_of/ the bootstrap: both stitched, plain and merged.
    for g in [a, b] {
        let n = skeleton_name(g);
        assert_stitched(&m.join("as_of").join(t0).join(&g.partition).join(&n), g);
        assert_stitched(
            &m.join("merged/as_of").join(t0).join(&g.partition).join(&n),
            g,
        );
    }
    // merged/latest/: city=a merged over its stitched rows.
    let merged = names(&m.join("merged/latest/city=a"));
    assert_eq!(merged.len(), 1, "{merged:?}");
    assert_eq!(
        id_names(&m.join("merged/latest/city=a").join(&merged[0])),
        model
    );
    assert_stitched(&m.join("merged/latest/city=b").join(&sb), b);
    // The upsert's window.
    let window = format!("{t0}..");
    let inc = m.join("merged/incremental").join(&window).join("city=a");
    let files = names(&inc);
    assert_eq!(files.len(), 1, "{files:?}");
    let mut want: Vec<(i64, String)> = upsert.iter().map(|r| (r.id, r.name.clone())).collect();
    want.sort();
    assert_eq!(id_names(&inc.join(&files[0])), want);
    let feed = m.join("cdc").join(&window).join("city=a");
    let files = names(&feed);
    assert_eq!(files.len(), 1, "{files:?}");
    let (cols, records) = parquet_rows(&std::fs::read(feed.join(&files[0])).unwrap());
    let col = |n: &str| cols.iter().position(|c| c == n).unwrap();
    let (op, before, after) = (col("op"), col("before"), col("after"));
    let mut ops: Vec<&str> = records.iter().map(|r| r[op].as_str()).collect();
    ops.sort();
    assert_eq!(ops, ["i", "u", "u"], "{records:?}");
    for (old, new) in a.rows[..2].iter().zip(upsert) {
        let r = records
            .iter()
            .find(|r| r[after].contains(&format!("name: \"{}\"", new.name)))
            .unwrap_or_else(|| panic!("no change record of {}: {records:?}", new.id));
        assert!(
            r[before].contains(&format!("name: \"{}\"", old.name)),
            "the before image is not the stitched row: {r:?}"
        );
    }
}
