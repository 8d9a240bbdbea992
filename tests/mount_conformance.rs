//! Conformance through a real mount: every fixture table is mounted with `hudifs mount` (and
//! again with `--read-optimized`) and every view of its expected answers is walked with plain
//! file-system calls; the incremental windows' selected instants and effective ends are read from
//! the view roots' extended attributes.

mod common;

use common::{check_fixture, Answer, Ask, MountGuard};

fn answer(m: &MountGuard, ro: &MountGuard, ask: &Ask) -> Answer {
    common::mount_answer(m.path(), ro.path(), ask)
}

#[test]
fn every_fixture_through_a_real_mount() {
    let Some(dir) = common::fixtures_dir() else {
        return;
    };
    if !common::fuse_available() {
        return;
    }
    let fixtures = common::fixtures(&dir);
    let mut total = 0;
    let mut problems = Vec::new();
    for fx in &fixtures {
        let tmp = tempfile::tempdir().unwrap();
        let root = common::unzip(&fx.zip, tmp.path());
        let m = MountGuard::mount(&root, &[]);
        // The read-optimized mount also exercises reads through the daemon (no passthrough).
        let ro = MountGuard::mount(&root, &["--read-optimized", "--no-passthrough"]);
        let (n, p) = check_fixture(&fx.name, &fx.expected, |ask| answer(&m, &ro, ask));
        total += n;
        problems.extend(p);
        // Files read through the mount are byte-identical to the table's.
        for rel in common::walk_files(&m.path().join("latest")).unwrap() {
            let via = std::fs::read(m.path().join("latest").join(&rel)).unwrap();
            let direct = std::fs::read(root.join(&rel)).unwrap();
            assert!(
                via == direct,
                "{}: {rel} differs through the mount",
                fx.name
            );
        }
    }
    eprintln!(
        "mount conformance: {} fixtures, {total} views checked, {} mismatches",
        fixtures.len(),
        problems.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
