//! Bad input never takes the daemon down: garbage instant file names, unknown actions,
//! truncated metadata, nonsense times in paths and missing or unknown table configuration each
//! give a clear error (errno to the caller, one log line naming the file) while every other view
//! keeps working.

use hudifs_testkit::support;

use std::path::{Path, PathBuf};

use support::MountGuard;

const TABLE: &str = "sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable";
const C1: &str = "20240707001301554";
const C2: &str = "20240707001302376";
const R3: &str = "20240707001303088";

fn table(tmp: &Path) -> Option<PathBuf> {
    support::fixture_table(tmp, TABLE)
}

fn errno_of(r: std::io::Result<impl Sized>) -> Option<i32> {
    r.err().and_then(|e| e.raw_os_error())
}

fn hudifs(args: &[&str]) -> (i32, String, String) {
    support::run_hudifs(args)
}

#[test]
fn garbage_timeline_names_and_unknown_actions_are_ignored_with_a_log_line() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let hoodie = root.join(".hoodie");
    for junk in [
        "2024xx.commit",
        "20991231000000000.frobnicate",
        "notes.txt",
        "20991231000000000_20991231000000001.commit",
    ] {
        std::fs::write(hoodie.join(junk), b"{}").unwrap();
    }
    let m = MountGuard::mount(&root, &[]);
    let latest = support::walk_files(&m.path().join("latest")).unwrap();
    assert_eq!(
        latest,
        vec![format!(
            "30/ebcb261d-62d3-4895-90ec-5b3c9622dff4-0_0-111-154_{R3}.parquet"
        )]
    );
    let names: Vec<String> = std::fs::read_dir(m.path().join("timeline"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(names.len(), 9, "only the 9 real instant files: {names:?}");
    let log = m.log_text();
    assert!(
        log.contains("2024xx.commit"),
        "log names the garbage file: {log}"
    );
    assert!(log.contains("20991231000000000.frobnicate"), "{log}");
    assert!(
        !log.contains("notes.txt"),
        "a name that is not meant as an instant is not noise"
    );
}

#[test]
fn truncated_commit_metadata_refuses_only_what_depends_on_it() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let commit = root.join(format!(".hoodie/{C2}.commit"));
    let bytes = std::fs::read(&commit).unwrap();
    std::fs::write(&commit, &bytes[..bytes.len() / 2]).unwrap();

    let m = MountGuard::mount(&root, &[]);
    // Snapshots do not depend on a commit's metadata: its files carry its instant.
    assert_eq!(
        support::walk_files(&m.path().join("as_of").join(C2))
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        support::walk_files(&m.path().join("latest")).unwrap().len(),
        1
    );
    // A window that selects it cannot list its files: refused.
    let w = m.path().join("incremental").join(format!("{C1}..{C2}"));
    assert_eq!(errno_of(std::fs::read_dir(&w)), Some(libc::ENOENT));
    // Other windows still work.
    let w3 = m.path().join("incremental").join(format!("{C2}..{R3}"));
    assert_eq!(support::walk_files(&w3).unwrap().len(), 1);
    // Inspecting it gives EIO, not a crash.
    let tf = m.path().join("timeline").join(format!("{C2}.commit"));
    assert_eq!(errno_of(std::fs::read(&tf)), Some(libc::EIO));
    let log = m.log_text();
    assert!(
        log.contains(&format!("{C2}.commit")),
        "log names the file: {log}"
    );
    // ... and `hudifs ls` agrees.
    let (code, _, err) = hudifs(&[
        "ls",
        root.to_str().unwrap(),
        "--incremental",
        &format!("{C1}..{C2}"),
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("unreadable metadata"), "{err}");
}

#[test]
fn truncated_replacecommit_refuses_snapshots_at_or_after_it() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    std::fs::write(
        root.join(format!(".hoodie/{R3}.replacecommit")),
        b"{\"partitionToRepl",
    )
    .unwrap();
    let m = MountGuard::mount(&root, &[]);
    assert_eq!(
        errno_of(std::fs::read_dir(m.path().join("latest"))),
        Some(libc::ENOENT)
    );
    assert_eq!(
        errno_of(std::fs::read_dir(m.path().join("as_of").join(R3))),
        Some(libc::ENOENT)
    );
    // Before it, time travel is unaffected.
    assert_eq!(
        support::walk_files(&m.path().join("as_of").join(C2))
            .unwrap()
            .len(),
        3
    );
    assert!(m.log_text().contains("replacecommit"), "{}", m.log_text());
}

#[test]
fn nonsense_times_in_paths_are_invalid_and_harmless() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let m = MountGuard::mount(&root, &[]);
    for bad in [
        "yesterday",
        "2024-13-45",
        "99999999999999999",
        "123456789012",
        "2024-01-01T25:00:00Z",
        "..20240101",
        "x..y",
        "\u{e9}t\u{e9}",
    ] {
        let parent = if bad.contains("..") {
            "incremental"
        } else {
            "as_of"
        };
        let e = errno_of(std::fs::read_dir(m.path().join(parent).join(bad)));
        assert!(
            matches!(e, Some(libc::EINVAL) | Some(libc::ENOENT)),
            "{parent}/{bad}: {e:?}"
        );
    }
    assert_eq!(
        errno_of(std::fs::metadata(m.path().join("as_of").join("yesterday"))),
        Some(libc::EINVAL)
    );
    // Every accepted spelling of one time resolves to the same directory.
    let canonical = std::fs::metadata(m.path().join("as_of").join(C2)).unwrap();
    use std::os::unix::fs::MetadataExt;
    for spelling in [
        "2024-07-07 00:13:02.376",
        "2024-07-07T00:13:02.376Z",
        "1720311182376",
    ] {
        let md = std::fs::metadata(m.path().join("as_of").join(spelling)).unwrap();
        assert_eq!(md.ino(), canonical.ino(), "{spelling}");
    }
    // The daemon is still serving.
    assert_eq!(
        support::walk_files(&m.path().join("latest")).unwrap().len(),
        1
    );
}

#[test]
fn missing_or_unknown_table_configuration_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    let props = root.join(".hoodie/hoodie.properties");
    let text = std::fs::read_to_string(&props).unwrap();

    std::fs::write(
        &props,
        text.replace("hoodie.table.version=6", "hoodie.table.version=7"),
    )
    .unwrap();
    let (code, _, err) = hudifs(&["ls", root.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("table version 7 is not supported"), "{err}");

    std::fs::remove_file(&props).unwrap();
    let (code, _, err) = hudifs(&["ls", root.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("is not a Hudi table"), "{err}");
    let mp = tempfile::tempdir().unwrap();
    let (code, _, err) = hudifs(&["mount", root.to_str().unwrap(), mp.path().to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("is not a Hudi table"), "{err}");

    // A table read from hoodie.properties.backup (an interrupted upgrade).
    std::fs::write(root.join(".hoodie/hoodie.properties.backup"), &text).unwrap();
    let (code, out, _) = hudifs(&["ls", root.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(out.lines().count(), 1);
}

/// The malformed-input table: one table carrying every kind of bad input at once, mounted; for
/// each case the errno the caller gets and the log line the daemon writes; every other view
/// keeps working.
#[test]
fn malformed_input_table() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let hoodie = root.join(".hoodie");
    std::fs::write(hoodie.join("2024xx.commit"), b"{}").unwrap();
    std::fs::write(hoodie.join("20991231000000000.frobnicate"), b"{}").unwrap();
    let c2 = hoodie.join(format!("{C2}.commit"));
    let bytes = std::fs::read(&c2).unwrap();
    std::fs::write(&c2, &bytes[..bytes.len() / 3]).unwrap();
    std::fs::write(root.join("10/part-00000-junk.snappy.parquet"), b"PAR1").unwrap();
    std::fs::write(root.join("10/.DS_Store"), b"junk").unwrap();
    std::fs::write(root.join("10/_SUCCESS"), b"").unwrap();

    let m = MountGuard::mount(&root, &[]);
    let p = |rel: &str| m.path().join(rel);
    let c2_log = format!("{C2}.commit: unreadable instant metadata");
    // (what, path, errno, a piece of the log line)
    let cases: Vec<(&str, PathBuf, i32, &str)> = vec![
        (
            "garbage instant file name",
            p("timeline/2024xx.commit"),
            libc::ENOENT,
            "2024xx.commit: not a timeline file name",
        ),
        (
            "unknown action",
            p("timeline/20991231000000000.frobnicate"),
            libc::ENOENT,
            "20991231000000000.frobnicate: not a timeline file name",
        ),
        (
            "truncated metadata, inspected",
            p(&format!("timeline/{C2}.commit")),
            libc::EIO,
            &c2_log,
        ),
        (
            "truncated metadata, window selecting it",
            p(&format!("incremental/{C1}..{C2}")),
            libc::ENOENT,
            "unreadable metadata",
        ),
        (
            "nonsense time",
            p("as_of/yesterday"),
            libc::EINVAL,
            "'yesterday' is not a valid time",
        ),
        (
            "impossible date",
            p("as_of/2024-02-30"),
            libc::EINVAL,
            "'2024-02-30' is not a valid time",
        ),
        (
            "control byte in a time",
            p("as_of/2024-01-01\u{1}"),
            libc::EINVAL,
            "is not a valid time",
        ),
        (
            "ambiguous bare number",
            p("as_of/123456789012"),
            libc::EINVAL,
            "ambiguous",
        ),
        (
            "reversed window",
            p(&format!("incremental/{C2}..{C1}")),
            libc::EINVAL,
            "ends",
        ),
        (
            "not a window",
            p("incremental/yesterday"),
            libc::EINVAL,
            "is not a window",
        ),
        (
            "junk data file",
            p("latest/10/part-00000-junk.snappy.parquet"),
            libc::ENOENT,
            "",
        ),
        ("junk file", p("latest/10/.DS_Store"), libc::ENOENT, ""),
    ];
    let mut table = String::new();
    for (what, path, errno, log) in &cases {
        let got = std::fs::read(path)
            .err()
            .or_else(|| std::fs::read_dir(path).err())
            .and_then(|e| e.raw_os_error());
        // Reading a directory gives EISDIR; what matters is the lookup's errno.
        let got = match got {
            Some(libc::EISDIR) => std::fs::metadata(path).err().and_then(|e| e.raw_os_error()),
            g => g,
        };
        assert_eq!(got, Some(*errno), "{what}: {}", path.display());
        let text = m.log_text();
        assert!(
            log.is_empty() || text.contains(log),
            "{what}: no log line with {log:?} in:\n{text}"
        );
        table.push_str(&format!("{what:<42} errno {errno:<3} log: {log}\n"));
    }
    eprintln!("{table}");
    // Every other view keeps working.
    assert_eq!(support::walk_files(&p("latest")).unwrap().len(), 1);
    assert_eq!(
        support::walk_files(&p(&format!("as_of/{C2}")))
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        support::walk_files(&p(&format!("incremental/{C2}..{R3}")))
            .unwrap()
            .len(),
        1
    );
    assert_eq!(std::fs::read_dir(p("timeline")).unwrap().count(), 9);
    assert!(std::fs::read(p(&format!("timeline/{R3}.replacecommit"))).is_ok());
}
