//! Shared mounts read by a real unprivileged user (README "System integration", SEMANTICS.md
//! §7.1): `--uid`, `--gid`, `--file-mode` and `--dir-mode` (or their `-o` spellings) are what
//! every node shows, the kernel enforces them (`default_permissions`, implied by them), and
//! `-o default_permissions` alone makes the kernel honour the table files' own bits.
//!
//! The reader is the user `hudifs-reader` (created with `useradd` when missing) and, as "any
//! other user", `nobody`; commands run as them through `setpriv`. Needs root (to create the user,
//! mount with allow_other and switch users); skips otherwise, and fails instead under
//! `HUDIFS_REQUIRE_FUSE=1`.

use hudifs_testkit::support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use support::MountGuard;

const TABLE: &str = "sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable";
const READER: &str = "hudifs-reader";

fn skip(reason: &str) -> bool {
    if std::env::var("HUDIFS_REQUIRE_FUSE").as_deref() == Ok("1") {
        panic!("{reason} and HUDIFS_REQUIRE_FUSE=1");
    }
    eprintln!("SKIP: {reason}");
    false
}

fn id_of(db: &str, name: &str) -> Option<u32> {
    let out = Command::new("getent").args([db, name]).output().ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split(':')
        .nth(2)
        .and_then(|s| s.trim().parse().ok())
}

/// The reader's uid and gid, creating the user (with a group of its own) when missing.
fn reader() -> Option<(u32, u32)> {
    if id_of("passwd", READER).is_none() {
        let out = Command::new("useradd")
            .args([
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                READER,
            ])
            .output();
        // Another test process may have created it meanwhile: look again either way.
        if id_of("passwd", READER).is_none() {
            skip(&format!("cannot create the user {READER}: {out:?}"));
            return None;
        }
    }
    Some((id_of("passwd", READER)?, id_of("group", READER)?))
}

/// Run `cmd args` as `user`: whether it succeeded, its standard output and error.
fn as_user(user: &str, cmd: &str, args: &[&Path]) -> (bool, Vec<u8>, String) {
    let group = if user == "nobody" { "nogroup" } else { user };
    let out = Command::new("setpriv")
        .arg(format!("--reuid={user}"))
        .arg(format!("--regid={group}"))
        .arg(if user == "nobody" {
            "--clear-groups"
        } else {
            "--init-groups"
        })
        .arg("--")
        .arg(cmd)
        .args(args)
        .output()
        .expect("setpriv (util-linux)");
    (
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn denied(r: &(bool, Vec<u8>, String), what: &str) {
    assert!(!r.0, "{what}: allowed");
    assert!(r.2.contains("Permission denied"), "{what}: {}", r.2);
}

fn allowed(r: &(bool, Vec<u8>, String), what: &str) {
    assert!(r.0, "{what}: {}", r.2);
}

/// A fixture table the other users can reach, and one of its data files (table-relative).
fn setup(tmp: &Path) -> Option<(PathBuf, String)> {
    let root = support::fixture_table(tmp, TABLE)?;
    if !support::fuse_available() {
        return None;
    }
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip("switching users and creating one needs root");
        return None;
    }
    for d in [tmp, root.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let (code, out, err) = support::run_hudifs([std::ffi::OsStr::new("ls"), root.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    let file = out.lines().next().expect("a file in latest").to_string();
    Some((root, file))
}

#[test]
fn owner_group_and_modes_are_shown_and_enforced() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((root, file)) = setup(tmp.path()) else {
        return;
    };
    let Some((_, reader_gid)) = reader() else {
        return;
    };
    let want = std::fs::read(root.join(&file)).unwrap();

    // Group-readable only: the reader's group may list and read, nobody may not even list.
    let gid = reader_gid.to_string();
    let m = MountGuard::mount(
        &root,
        &[
            "--allow-other",
            "--uid",
            "0",
            "--gid",
            &gid,
            "--file-mode",
            "0440",
            "--dir-mode",
            "0550",
        ],
    );
    let latest = m.path().join("latest");
    let f = latest.join(&file);
    let md = std::fs::metadata(&f).unwrap();
    assert_eq!(
        (md.uid(), md.gid(), md.mode() & 0o7777),
        (0, reader_gid, 0o440)
    );
    let dir = std::fs::metadata(&latest).unwrap();
    assert_eq!((dir.gid(), dir.mode() & 0o7777), (reader_gid, 0o550));
    let root_dir = std::fs::metadata(m.path()).unwrap();
    assert_eq!(root_dir.mode() & 0o7777, 0o550);
    let timeline = std::fs::read_dir(m.path().join("timeline"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    assert_eq!(
        std::fs::metadata(&timeline).unwrap().mode() & 0o7777,
        0o440,
        "timeline/ files take --file-mode too"
    );

    allowed(&as_user(READER, "ls", &[&latest]), "group member lists");
    let read = as_user(READER, "cat", &[&f]);
    allowed(&read, "group member reads");
    assert_eq!(read.1, want, "group member reads the table file's bytes");
    allowed(
        &as_user(READER, "cat", &[&timeline]),
        "group member reads timeline/",
    );
    denied(&as_user("nobody", "ls", &[&latest]), "other user lists");
    denied(&as_user("nobody", "cat", &[&f]), "other user reads");
    drop(m);

    // The -o spelling: owned by the reader, readable by it alone; directories stay 0555.
    let m = MountGuard::mount(
        &root,
        &[
            "--allow-other",
            "-o",
            &format!("uid={READER},file_mode=0400"),
        ],
    );
    let f = m.path().join("latest").join(&file);
    let md = std::fs::metadata(&f).unwrap();
    assert_eq!(
        (md.mode() & 0o7777, md.uid()),
        (0o400, id_of("passwd", READER).unwrap())
    );
    allowed(&as_user(READER, "cat", &[&f]), "owner reads");
    allowed(
        &as_user("nobody", "ls", &[&m.path().join("latest")]),
        "other user lists (0555 directories)",
    );
    denied(
        &as_user("nobody", "cat", &[&f]),
        "other user reads a 0400 file",
    );
}

#[test]
fn default_permissions_honours_the_table_files_own_bits() {
    let tmp = tempfile::tempdir().unwrap();
    let Some((root, file)) = setup(tmp.path()) else {
        return;
    };
    if reader().is_none() {
        return;
    }
    // One table file readable by its owner (root) only: shown as 0400.
    std::fs::set_permissions(root.join(&file), std::fs::Permissions::from_mode(0o600)).unwrap();

    // As before (no default_permissions): hudifs does not check, any user of an allow_other
    // mount reads it.
    let m = MountGuard::mount(&root, &["--allow-other"]);
    let f = m.path().join("latest").join(&file);
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o400);
    allowed(
        &as_user(READER, "cat", &[&f]),
        "without default_permissions",
    );
    drop(m);

    // With it the kernel checks the bits: the 0400 file is refused, the others read.
    let m = MountGuard::mount(&root, &["--allow-other", "-o", "default_permissions"]);
    let latest = m.path().join("latest");
    let f = latest.join(&file);
    denied(
        &as_user(READER, "cat", &[&f]),
        "0400 root file, default_permissions",
    );
    allowed(&as_user(READER, "ls", &[&latest]), "directories 0555");
    let timeline = std::fs::read_dir(m.path().join("timeline"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    allowed(
        &as_user(READER, "cat", &[&timeline]),
        "a 0444 timeline/ file",
    );
    // Root is not held back.
    assert!(std::fs::read(&f).is_ok());
    drop(m);

    // The same file back at 0644: shown as 0444, read.
    std::fs::set_permissions(root.join(&file), std::fs::Permissions::from_mode(0o644)).unwrap();
    let m = MountGuard::mount(&root, &["--allow-other", "-o", "default_permissions"]);
    let f = m.path().join("latest").join(&file);
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o7777, 0o444);
    allowed(&as_user(READER, "cat", &[&f]), "a 0644 table file");
}

#[test]
fn modes_with_write_bits_are_refused_before_mounting() {
    let (code, _, err) = support::run_hudifs([
        "mount",
        "/nonexistent",
        "/nonexistent",
        "--file-mode",
        "0644",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("write bit"), "{err}");
    let (code, _, err) = support::run_hudifs([
        "mount",
        "/nonexistent",
        "/nonexistent",
        "-o",
        "dir_mode=0775",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("write bit"), "{err}");
}
