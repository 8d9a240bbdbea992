//! Conformance through a real mount: every fixture table is mounted with `hudifs mount` (and
//! again with `--read-optimized`) and every view of its expected answers is walked with plain
//! file-system calls; the incremental windows' selected instants and effective ends are read from
//! the view roots' extended attributes.

use hudifs_testkit::support;

use support::{check_fixture, Answer, Ask, MountGuard};

fn answer(m: &MountGuard, ro: &MountGuard, ask: &Ask) -> Answer {
    support::mount_answer(m.path(), ro.path(), ask)
}

#[test]
fn every_fixture_through_a_real_mount() {
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let fixtures = support::fixtures(&dir);
    let mut total = 0;
    let mut problems = Vec::new();
    for fx in &fixtures {
        let tmp = tempfile::tempdir().unwrap();
        let root = support::unzip(&fx.zip, tmp.path());
        let m = MountGuard::mount(&root, &[]);
        // The read-optimized mount also exercises reads through the daemon (no passthrough).
        let ro = MountGuard::mount(&root, &["--read-optimized", "--no-passthrough"]);
        let (n, p) = check_fixture(&fx.name, &fx.expected, |ask| answer(&m, &ro, ask));
        total += n;
        problems.extend(p);
        // Files read through the mount are byte-identical to the table's.
        for rel in support::walk_files(&m.path().join("latest")).unwrap() {
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

/// A walk by names (`find -type f`: directory listings only, which hand the kernel no file
/// attributes) and a walk that stats every file (`ls -l`: the first directory's files are
/// looked up one by one, later listings carry attributes) see the same files with the table's
/// sizes, in either order, on fresh mounts.
#[test]
fn name_walks_and_stat_walks_agree_with_the_table() {
    if !support::fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let table = tmp.path().join("trips");
    let out = std::process::Command::new(hudifs_testkit::mount::binary("hudifs-gen"))
        .args(["demo", "--version", "6"])
        .arg(&table)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stat_walk = |latest: &std::path::Path| -> Vec<(String, u64)> {
        let mut got = Vec::new();
        for part in std::fs::read_dir(latest).unwrap() {
            let part = part.unwrap();
            let names: Vec<_> = std::fs::read_dir(part.path())
                .unwrap()
                .map(|e| e.unwrap())
                .collect();
            for e in names {
                let md = std::fs::symlink_metadata(e.path()).unwrap();
                assert!(md.is_file());
                let rel = format!(
                    "{}/{}",
                    part.file_name().to_string_lossy(),
                    e.file_name().to_string_lossy()
                );
                got.push((rel, md.len()));
            }
        }
        got.sort();
        got
    };
    let on_disk = |files: &[String]| -> Vec<(String, u64)> {
        files
            .iter()
            .map(|f| (f.clone(), std::fs::metadata(table.join(f)).unwrap().len()))
            .collect()
    };

    // Names first, then stats of what was listed.
    let m = MountGuard::mount(&table, &[]);
    let latest = m.path().join("latest");
    let names = support::walk_files(&latest).unwrap();
    assert!(names.len() >= 3, "{names:?}");
    let want = on_disk(&names);
    let stated: Vec<(String, u64)> = names
        .iter()
        .map(|f| (f.clone(), std::fs::metadata(latest.join(f)).unwrap().len()))
        .collect();
    assert_eq!(stated, want);
    assert_eq!(stat_walk(&latest), want);
    drop(m);

    // A stat walk on a fresh mount, then names.
    let m = MountGuard::mount(&table, &[]);
    let latest = m.path().join("latest");
    assert_eq!(stat_walk(&latest), want);
    assert_eq!(support::walk_files(&latest).unwrap(), names);
}
