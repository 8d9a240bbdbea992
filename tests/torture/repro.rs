//! Minimal reproducers of what the torture test found, on tables written step by step.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use hudifs_testkit::support;

use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};

const START: i64 = hudifs_testkit::generator::DEMO_CLOCK_START_MS;

/// A copy-on-write table with one file group written at `t1` and updated at `t2`; returns
/// the writer, the partition, the group, and the file names of t1 and t2.
fn two_versions(root: &Path) -> (TableWriter, String, String, String) {
    let spec = TableSpec::new("repro", TableType::CopyOnWrite, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(root, spec, START).unwrap();
    let p = w.partition_path(&["paris"]).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    let f = t.insert(&p, &rows(1, 50)).unwrap();
    t.complete().unwrap();
    let first = w.group_files(&p, &f)[0].clone();
    (w, p, f, first)
}

/// Guarantee 4: a file opened through latest/ reads to the end after latest/ moved on and
/// the cleaner deleted it.
pub fn open_file_outlives_latest(root: &Path) -> Result<(), String> {
    let (mut w, p, f, first) = two_versions(root);
    let m = support::MountGuard::mount(root, &["--poll-interval", "50"]);
    let path = m.path().join("latest").join(&p).join(&first);
    let expected = std::fs::read(root.join(&p).join(&first)).unwrap();
    let mut file = std::fs::File::open(&path).map_err(|e| format!("open: {e}"))?;
    let mut t = w.begin(Action::Commit).unwrap();
    t.update(&p, &f, &rows_with_ids(2, &[1000])).unwrap();
    let t2 = t.complete().unwrap();
    w.clean(&t2, &[(p.as_str(), first.as_str())]).unwrap();
    assert!(!root.join(&p).join(&first).exists());
    // The daemon sees the new snapshot; the kernel's attributes of the file expire (1 s).
    std::thread::sleep(Duration::from_millis(1500));
    let mut got = Vec::new();
    file.read_to_end(&mut got).map_err(|e| {
        format!(
            "reading {first} after latest/ moved on and the cleaner deleted it: {e}\n\
             daemon log:\n{}",
            m.log_text()
        )
    })?;
    if got != expected {
        return Err(format!(
            "read {} bytes, expected {}",
            got.len(),
            expected.len()
        ));
    }
    Ok(())
}

/// Guarantee 5: as_of/<t1> is refused once a clean retains only commits from t2 on — also
/// when it was listed (and cached as final) before the clean.
pub fn as_of_refused_after_clean(root: &Path) -> Result<(), String> {
    let (mut w, p, f, first) = two_versions(root);
    let t1 = w.completed_writes().keys().next().unwrap().clone();
    let mut t = w.begin(Action::Commit).unwrap();
    t.update(&p, &f, &rows_with_ids(2, &[1000])).unwrap();
    let t2 = t.complete().unwrap();
    let m = support::MountGuard::mount(root, &["--poll-interval", "50"]);
    let view = m.path().join("as_of").join(&t1);
    let before = support::walk_files(&view).map_err(|e| format!("as_of/{t1}: {e}"))?;
    assert_eq!(before, vec![format!("{p}/{first}")]);
    w.clean(&t2, &[(p.as_str(), first.as_str())]).unwrap();
    // The daemon refuses the view and drops the kernel's names of it once it has applied the
    // clean (SEMANTICS.md §5.3, §6.5): usually at once, but on a loaded machine (a CI run) later
    // than a fixed sleep allowed, so wait for it, up to 5 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut listed = support::walk_files(&view);
    while listed.is_ok() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
        listed = support::walk_files(&view);
    }
    match listed {
        Err(_) => Ok(()),
        Ok(files) => {
            let readable = files
                .iter()
                .map(|f| (f, std::fs::read(view.join(f)).map(|b| b.len())))
                .map(|(f, r)| format!("{f}: {r:?}"))
                .collect::<Vec<_>>();
            Err(format!(
                "as_of/{t1} still lists {readable:?} after clean retained {t2} (on disk: {})",
                root.join(&p).join(&first).exists()
            ))
        }
    }
}
