//! The newcomer's path: `hudifs-gen demo` writes the bundled demo table (every version and
//! table type), and a real mount shows it without the write left in flight.

use hudifs_testkit::support;

use std::process::Command;

use support::MountGuard;

#[test]
fn demo_tables_mount_and_hide_the_write_in_flight() {
    if !support::fuse_available() {
        return;
    }
    for (version, cow) in [(6, false), (6, true), (8, false), (9, false), (9, true)] {
        let tmp = tempfile::tempdir().unwrap();
        let table = tmp.path().join("trips");
        let mut cmd = Command::new(hudifs_testkit::mount::binary("hudifs-gen"));
        cmd.arg("demo").arg("--version").arg(version.to_string());
        if cow {
            cmd.arg("--cow");
        }
        let out = cmd.arg(&table).output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let summary = String::from_utf8_lossy(&out.stdout).to_string();
        let inflight = summary
            .lines()
            .find(|l| l.contains("inflight"))
            .and_then(|l| l.split_whitespace().next())
            .expect("the demo leaves a write in flight")
            .to_string();

        let m = MountGuard::mount(&table, &[]);
        let latest = support::walk_files(&m.path().join("latest")).unwrap();
        assert!(!latest.is_empty());
        assert!(
            !latest.iter().any(|f| f.contains(&inflight)),
            "v{version} cow={cow}: in-flight files shown: {latest:?}"
        );
        // On disk the in-flight write did leave files.
        let on_disk = support::walk_files(&table).unwrap();
        assert!(on_disk
            .iter()
            .any(|f| f.contains(&inflight) && !f.starts_with(".hoodie")));
        let as_of: Vec<_> = std::fs::read_dir(m.path().join("as_of")).unwrap().collect();
        assert_eq!(as_of.len(), if cow { 6 } else { 7 }, "v{version} cow={cow}");
        let shown = support::xattr(&m.path().join("latest"), "user.hudi.instant").unwrap();
        assert!(shown < inflight);
    }
}
