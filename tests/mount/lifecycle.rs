//! Mount lifecycle and containment against real mounts: every mutating call fails with EROFS;
//! SIGINT/SIGTERM unmount cleanly; after `kill -9` `hudifs umount` clears the dead mount; bad
//! mount points and non-tables exit 1 with a clear message.

use hudifs_testkit::support;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hudifs::daemon::is_mount_point;
use support::MountGuard;

const TABLE: &str = "sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable";

fn table(tmp: &Path) -> Option<PathBuf> {
    support::fixture_table(tmp, TABLE)
}

fn hudifs(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let (code, _, err) = support::run_hudifs(args);
    (code, err)
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

fn last_errno(rc: libc::c_int) -> i32 {
    assert!(rc < 0, "call succeeded on a read-only mount");
    std::io::Error::last_os_error().raw_os_error().unwrap()
}

#[test]
fn every_mutating_call_fails_with_erofs() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let m = MountGuard::mount(&root, &[]);
    let latest = m.path().join("latest");
    let dir = latest.join("30");
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let new = dir.join("new.parquet");
    let erofs = Some(libc::EROFS);
    let e = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error());

    assert_eq!(e(std::fs::write(&new, b"x")), erofs, "create");
    assert_eq!(e(std::fs::create_dir(dir.join("d"))), erofs, "mkdir");
    assert_eq!(e(std::fs::remove_file(&file)), erofs, "unlink");
    assert_eq!(e(std::fs::remove_dir(&dir)), erofs, "rmdir");
    assert_eq!(e(std::fs::rename(&file, &new)), erofs, "rename");
    assert_eq!(e(std::fs::hard_link(&file, &new)), erofs, "link");
    assert_eq!(e(std::os::unix::fs::symlink(&file, &new)), erofs, "symlink");
    assert_eq!(
        e(std::fs::OpenOptions::new()
            .write(true)
            .open(&file)
            .map(drop)),
        erofs,
        "open for write"
    );
    assert_eq!(
        e(std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .map(drop)),
        erofs,
        "open for append"
    );
    unsafe {
        assert_eq!(
            last_errno(libc::truncate(c(&file).as_ptr(), 0)),
            libc::EROFS,
            "truncate"
        );
        assert_eq!(
            last_errno(libc::chmod(c(&file).as_ptr(), 0o777)),
            libc::EROFS,
            "setattr"
        );
        assert_eq!(
            last_errno(libc::chown(c(&file).as_ptr(), 1, 1)),
            libc::EROFS,
            "chown"
        );
        assert_eq!(
            last_errno(libc::utimes(c(&file).as_ptr(), std::ptr::null())),
            libc::EROFS,
            "utimes"
        );
        assert_eq!(
            last_errno(libc::mknod(c(&new).as_ptr(), libc::S_IFIFO | 0o644, 0)),
            libc::EROFS,
            "mknod"
        );
        let name = CString::new("user.x").unwrap();
        assert_eq!(
            last_errno(libc::setxattr(
                c(&file).as_ptr(),
                name.as_ptr(),
                b"1".as_ptr().cast(),
                1,
                0
            )),
            libc::EROFS,
            "setxattr"
        );
        let name = CString::new("user.hudi.instant").unwrap();
        assert_eq!(
            last_errno(libc::removexattr(c(&file).as_ptr(), name.as_ptr())),
            libc::EROFS,
            "removexattr"
        );
    }
    // Nothing changed in the table.
    assert!(!root.join("30/new.parquet").exists());
    assert!(std::fs::metadata(&file).is_ok());
}

fn wait_unmounted(mp: &Path) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if !is_mount_point(mp) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn sigint_and_sigterm_unmount_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    for sig in ["-INT", "-TERM"] {
        let m = MountGuard::mount(&root, &[]);
        let pid = m.pid.expect("daemon pid");
        assert!(is_mount_point(m.path()));
        Command::new("kill")
            .arg(sig)
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(wait_unmounted(m.path()), "{sig} did not unmount");
    }
}

#[test]
fn foreground_mount_serves_until_signalled() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let mp = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_hudifs"))
        .arg("mount")
        .arg("-f")
        .arg(&root)
        .arg(mp.path())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !is_mount_point(mp.path()) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let listed = std::fs::read_dir(mp.path().join("latest")).map(|d| d.count());
    Command::new("kill")
        .arg("-INT")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    let status = child.wait().unwrap();
    let unmounted = wait_unmounted(mp.path());
    if !unmounted {
        let _ = Command::new(env!("CARGO_BIN_EXE_hudifs"))
            .arg("umount")
            .arg(mp.path())
            .status();
    }
    assert_eq!(listed.unwrap(), 1);
    assert!(status.success(), "foreground daemon exit: {status:?}");
    assert!(unmounted);
}

#[test]
fn umount_clears_the_mount_of_a_killed_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let m = MountGuard::mount(&root, &[]);
    // The keeper (the pid `hudifs mount` printed) and the daemon serving the mount: a serving
    // daemon alone that dies is replaced (tests/mount/crash_restart.rs); both dead, the mount is.
    let out = Command::new(env!("CARGO_BIN_EXE_hudifs"))
        .args(["status", "--json"])
        .arg(m.path())
        .output()
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let serving = status["mounts"][0]["pid"].as_u64().expect("serving pid");
    assert_eq!(
        status["mounts"][0]["keeper_pid"].as_u64(),
        m.pid.map(u64::from)
    );
    for pid in [m.pid.unwrap() as u64, serving] {
        Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status()
            .unwrap();
    }
    // The kernel ends the connection when the last /dev/fuse descriptor closes.
    let t0 = Instant::now();
    let err = loop {
        let err = std::fs::read_dir(m.path())
            .err()
            .and_then(|e| e.raw_os_error());
        if err == Some(libc::ENOTCONN) || t0.elapsed() > Duration::from_secs(10) {
            break err;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        err,
        Some(libc::ENOTCONN),
        "a dead mount says Transport endpoint is not connected"
    );
    // Mounting over it is refused with a hint.
    let (code, msg) = hudifs(&["mount".as_ref(), root.as_os_str(), m.path().as_os_str()]);
    assert_eq!(code, 1);
    assert!(msg.contains("hudifs umount"), "{msg}");
    let (code, msg) = hudifs(&["umount".as_ref(), m.path().as_os_str()]);
    assert_eq!(code, 0, "{msg}");
    assert!(!is_mount_point(m.path()));
}

/// `hudifs umount` waits out a moment of use (a `hudifs status`, a file manager's stat keep a
/// mount busy while they ask), and says "busy" only of a mount that stays in use.
#[test]
fn umount_waits_out_a_moment_of_use_and_refuses_a_mount_in_use() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let m = MountGuard::mount(&root, &[]);
    let mut file = m.path().join("latest");
    while file.is_dir() {
        file = std::fs::read_dir(&file)
            .unwrap()
            .flatten()
            .next()
            .expect("a file below latest/")
            .path();
    }

    // In use for good: a process has its working directory in the mount.
    let inside = support::BusyIn::start(&m.path().join("latest"));
    let t0 = Instant::now();
    let (code, msg) = hudifs(&["umount".as_ref(), m.path().as_os_str()]);
    assert_eq!(code, 1, "{msg}");
    assert!(
        msg.contains("busy: a process still uses the mount"),
        "{msg}"
    );
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "said busy after {:?}, without trying again",
        t0.elapsed()
    );
    assert!(is_mount_point(m.path()));
    drop(inside);

    // In use for a moment: a file open for 300 ms after the unmount starts.
    let open = std::fs::File::open(&file).unwrap();
    let closer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        drop(open);
    });
    let (code, msg) = hudifs(&["umount".as_ref(), m.path().as_os_str()]);
    closer.join().unwrap();
    assert_eq!(code, 0, "a moment of use made the unmount fail: {msg}");
    assert!(!is_mount_point(m.path()));
}

#[test]
fn bad_mount_points_and_non_tables_exit_1() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let mount =
        |table: &Path, mp: &Path| hudifs(&["mount".as_ref(), table.as_os_str(), mp.as_os_str()]);

    let nonempty = tempfile::tempdir().unwrap();
    std::fs::write(nonempty.path().join("x"), b"").unwrap();
    let (code, msg) = mount(&root, nonempty.path());
    assert_eq!(code, 1);
    assert!(msg.contains("not empty"), "{msg}");

    let (code, msg) = mount(&root, &tmp.path().join("missing"));
    assert_eq!(code, 1);
    assert!(msg.contains("does not exist"), "{msg}");

    let m = MountGuard::mount(&root, &[]);
    let (code, msg) = mount(&root, m.path());
    assert_eq!(code, 1);
    assert!(
        msg.contains("already a mount point") || msg.contains("not empty"),
        "{msg}"
    );

    let empty = tempfile::tempdir().unwrap();
    let (code, msg) = mount(&tmp.path().join("no-such-table"), empty.path());
    assert_eq!(code, 1);
    assert!(msg.contains("not a Hudi table"), "{msg}");
    // A directory holding no table (within --lake-depth) is neither a table nor a lake; one
    // holding a table is a lake (SEMANTICS.md §7.1.1, tests/mount/lake_mount.rs).
    let plain = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(plain.path().join("a/b")).unwrap();
    let (code, msg) = mount(plain.path(), empty.path());
    assert_eq!(code, 1);
    assert!(msg.contains("not a Hudi table"), "{msg}");
    let (code, msg) = hudifs(&[
        "mount".as_ref(),
        tmp.path().as_os_str(),
        empty.path().as_os_str(),
        "--lake-depth=0".as_ref(),
    ]);
    assert_eq!(code, 1, "a lake needs its tables within --lake-depth");
    assert!(msg.contains("not a Hudi table"), "{msg}");

    let (code, msg) = hudifs(&["umount".as_ref(), empty.path().as_os_str()]);
    assert_eq!(code, 1);
    assert!(msg.contains("not mounted"), "{msg}");
    let (code, _) = hudifs(&["mount".as_ref()]);
    assert_eq!(code, 2, "usage errors exit 2");
}

/// Symbolic links inside the table are neither shown nor followed: a linked-in partition or
/// data file (pointing outside the table) never appears in a view.
#[test]
fn symbolic_links_in_the_table_are_not_shown_or_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join(".hoodie_partition_metadata"),
        b"commitTime=1\n",
    )
    .unwrap();
    let secret = "aaaaaaaa-0000-0000-0000-000000000000-0_0-1-1_20240707001303088.parquet";
    std::fs::write(outside.path().join(secret), b"secret").unwrap();
    // A partition directory that is a link, and a data file name that is a link.
    std::os::unix::fs::symlink(outside.path(), root.join("40")).unwrap();
    std::os::unix::fs::symlink(outside.path().join(secret), root.join("30").join(secret)).unwrap();
    let m = MountGuard::mount(&root, &[]);
    let files = support::walk_files(&m.path().join("latest")).unwrap();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(!files.iter().any(|f| f.contains("aaaaaaaa")), "{files:?}");
    assert!(std::fs::metadata(m.path().join("latest/40")).is_err());
    assert!(std::fs::metadata(m.path().join("latest/30").join(secret)).is_err());
    // `..` and over-long names lead nowhere: latest/30/../.. is the mount root (eight entries).
    assert!(std::fs::read_dir(m.path().join("latest/30/../..")).is_ok_and(|d| d.count() == 8));
    let long = "x".repeat(300);
    let e = std::fs::metadata(m.path().join("as_of").join(&long)).unwrap_err();
    assert!(
        matches!(
            e.raw_os_error(),
            Some(libc::ENAMETOOLONG) | Some(libc::ENOENT) | Some(libc::EINVAL)
        ),
        "{e}"
    );
}

/// The mount is private to the user who mounted it unless --allow-other.
#[test]
fn the_mount_is_private_unless_allow_other() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    // The table and the mount point must be reachable by the other user for the test to mean
    // anything: make the temp dirs world-searchable.
    use std::os::unix::fs::PermissionsExt;
    for d in [tmp.path(), root.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let as_nobody = |path: &Path| {
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "ls"])
            .arg(path)
            .output()
            .map(|o| {
                (
                    o.status.success(),
                    String::from_utf8_lossy(&o.stderr).to_string(),
                )
            })
    };
    let private = MountGuard::mount(&root, &[]);
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o755)).ok();
    let Ok((ok, err)) = as_nobody(&private.path().join("latest")) else {
        eprintln!("SKIP: setpriv unavailable");
        return;
    };
    assert!(!ok, "another user could list a private mount");
    assert!(err.contains("Permission denied"), "{err}");
    drop(private);
    let shared = MountGuard::mount(&root, &["--allow-other"]);
    let (ok, err) = as_nobody(&shared.path().join("latest")).unwrap();
    assert!(ok, "--allow-other: {err}");
}

/// A new FUSE mount reads ahead only 128 KiB; as root the daemon gives its mount the read-ahead
/// of the table's device (at least 1 MiB), so cold reads through the daemon keep the disk busy.
#[test]
fn the_mount_reads_ahead_like_the_table_device() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let m = MountGuard::mount(&root, &["--no-passthrough"]);
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(m.path()).unwrap().dev();
    let knob = format!(
        "/sys/class/bdi/{}:{}/read_ahead_kb",
        libc::major(dev),
        libc::minor(dev)
    );
    let kb: u64 = std::fs::read_to_string(&knob)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(kb >= 1024, "{knob}: {kb} KiB");
    } else {
        println!("not root: the mount keeps the kernel's read-ahead ({kb} KiB)");
    }
}

/// Whether process `pid` is gone (it is not this test's child: a daemon).
fn gone(pid: u32) -> bool {
    !Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_mount_made_right_after_an_unmount_at_the_same_path_stays() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = table(tmp.path()) else {
        return;
    };
    if !support::fuse_available() {
        return;
    }
    let hudifs = hudifs_testkit::mount::binary("hudifs");
    let mp = tmp.path().join("mnt");
    // A script's `umount M && hudifs mount T M`: the first daemon is still on its way out when
    // the second mount stands at the same path.
    for round in 0..3 {
        let first = MountGuard::try_mount_at(&hudifs, &root, &mp, &[], &[]).unwrap();
        let old = first.pid.expect("daemon pid");
        // SAFETY: umount(2) of a path we mounted.
        assert_eq!(unsafe { libc::umount(c(&mp).as_ptr()) }, 0, "umount");
        let second = MountGuard::try_mount_at(&hudifs, &root, &mp, &[], &[]).unwrap();
        let start = Instant::now();
        while !gone(old) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(old), "round {round}: the first daemon did not exit");
        assert!(
            is_mount_point(&mp),
            "round {round}: the first daemon, leaving, unmounted the second mount"
        );
        assert!(std::fs::read_dir(mp.join("latest")).is_ok());
        drop(second);
        drop(first);
    }
}
