//! hudifs as the system's tools use it (README "System integration", SEMANTICS.md §7.7–7.10):
//! `mount -t fuse.hudifs` and an fstab file through Debian's `mount.fuse3` (installed with
//! apt-get when missing), `umount`, systemd's readiness notification on a socket the test binds,
//! standard error as the journal, the documented unit files under `systemd-analyze verify`,
//! `hudifs status`, and the conventions of the command line (version, completions, man page,
//! grouped help).
//!
//! Every mount is unmounted on drop, also when an assertion fails, and its daemon is made sure to
//! be gone (`MountGuard`, `Foreground`).

use hudifs_testkit::support;

use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hudifs::daemon::is_mount_point;
use serde_json::Value;
use support::MountGuard;

const TABLE: &str = "sample_table/cow/v6_simplekeygen_nonhivestyle_overwritetable";

fn hudifs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_hudifs"))
}

fn skip(reason: &str) -> bool {
    if std::env::var("HUDIFS_REQUIRE_FUSE").as_deref() == Ok("1") {
        panic!("{reason} and HUDIFS_REQUIRE_FUSE=1");
    }
    eprintln!("SKIP: {reason}");
    false
}

fn is_root() -> bool {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A fixture table, when this machine can mount it.
fn mountable_table(tmp: &Path) -> Option<PathBuf> {
    let root = support::fixture_table(tmp, TABLE)?;
    support::fuse_available().then_some(root)
}

/// Whether one of `paths` exists, installing Debian's `package` with apt-get first when none
/// does (as root), as CI starts on a fresh machine. `Err` says why it is still missing.
fn apt_provides(package: &str, paths: &[&str]) -> Result<(), String> {
    let present = || paths.iter().any(|p| Path::new(p).exists());
    if present() {
        return Ok(());
    }
    if !is_root() {
        return Err(format!(
            "{} is missing and only root can install the {package} package",
            paths[0]
        ));
    }
    let install = || {
        Command::new("apt-get")
            .args([
                "install",
                "-y",
                "-q",
                "--no-install-recommends",
                "-o",
                "DPkg::Lock::Timeout=300",
                package,
            ])
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    eprintln!("installing Debian's {package} package for {}", paths[0]);
    let mut out = install();
    if !present() {
        // A fresh machine may have no package lists yet.
        let _ = Command::new("apt-get").args(["update", "-q"]).output();
        out = install();
    }
    if present() {
        Ok(())
    } else {
        Err(format!(
            "{} is missing and `apt-get install -y {package}` failed: {}",
            paths[0],
            out.map(|o| String::from_utf8_lossy(&o.stderr).to_string())
                .unwrap_or_else(|e| e.to_string())
        ))
    }
}

/// `mount.fuse` (Debian's fuse3 package), where mount(8) looks for the helper of `fuse.*` types.
fn mount_helper() -> bool {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let r =
        READY.get_or_init(|| apt_provides("fuse3", &["/sbin/mount.fuse", "/usr/sbin/mount.fuse"]));
    match r {
        Ok(()) => true,
        Err(why) => skip(why),
    }
}

/// Where mount.fuse3 finds `hudifs`. mount(8) clears `PATH` before it runs a helper, so the
/// `/bin/sh -c 'hudifs' …` of mount.fuse3 looks in the shell's default path only; its first
/// directory, /usr/local/sbin, gets a link `hudifs` to this build while a test needs it. What
/// was there before (a link) is put back when the last test is done; a program installed there
/// is not replaced (the test skips: mount would run that program).
struct OnDefaultPath;

const LINK: &str = "/usr/local/sbin/hudifs";

/// (tests using the link, the link's previous target)
static LINK_USERS: std::sync::Mutex<(usize, Option<PathBuf>)> = std::sync::Mutex::new((0, None));

fn hudifs_on_default_path() -> Option<OnDefaultPath> {
    let mut users = LINK_USERS.lock().unwrap_or_else(|e| e.into_inner());
    if users.0 == 0 {
        let link = Path::new(LINK);
        match std::fs::symlink_metadata(link) {
            Ok(md) if !md.file_type().is_symlink() => {
                skip(&format!(
                    "{LINK} is an installed program, not a link: not replaced"
                ));
                return None;
            }
            Ok(_) => {
                // A link of an earlier run, or to another build: back in place afterwards if it
                // leads somewhere.
                users.1 = std::fs::read_link(link).ok().filter(|t| t.exists());
                std::fs::remove_file(link).unwrap();
            }
            Err(_) => users.1 = None,
        }
        std::fs::create_dir_all("/usr/local/sbin").unwrap();
        std::os::unix::fs::symlink(hudifs_bin(), link).unwrap();
    }
    users.0 += 1;
    Some(OnDefaultPath)
}

impl Drop for OnDefaultPath {
    fn drop(&mut self) {
        let mut users = LINK_USERS.lock().unwrap_or_else(|e| e.into_inner());
        users.0 -= 1;
        if users.0 == 0 {
            let _ = std::fs::remove_file(LINK);
            if let Some(previous) = users.1.take() {
                let _ = std::os::unix::fs::symlink(previous, LINK);
            }
        }
    }
}

/// The mount table's line for `mp`: file-system type, source, mount options, super options.
fn mount_entry(mp: &Path) -> Option<(String, String, String, String)> {
    let target = mp.canonicalize().ok()?.to_string_lossy().to_string();
    let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    info.lines().rev().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        let f: Vec<&str> = left.split(' ').collect();
        if f.get(4) != Some(&target.as_str()) {
            return None;
        }
        let r: Vec<&str> = right.split(' ').collect();
        Some((
            r.first()?.to_string(),
            r.get(1)?.to_string(),
            f.get(5)?.to_string(),
            r.get(2)?.to_string(),
        ))
    })
}

fn has(opts: &str, o: &str) -> bool {
    opts.split(',').any(|x| x == o)
}

/// What the mount shows in `latest/` is what `hudifs ls` lists, byte for byte.
fn reads_like_the_table(mnt: &Path, root: &Path) {
    let (code, out, err) = support::run_hudifs([OsStr::new("ls"), root.as_os_str()]);
    assert_eq!(code, 0, "{err}");
    let mut want: Vec<&str> = out.lines().collect();
    want.sort();
    let mut got = support::walk_files(&mnt.join("latest")).unwrap();
    got.sort();
    assert_eq!(got, want);
    for f in &want {
        assert_eq!(
            std::fs::read(mnt.join("latest").join(f)).unwrap(),
            std::fs::read(root.join(f)).unwrap(),
            "{f}"
        );
    }
}

fn process_gone(pid: u32, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z ") {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// `umount MNT` (util-linux), then the daemon must exit by itself.
fn umount(m: &mut MountGuard) {
    // Another test of this binary may be running `hudifs status`, which reads every hudifs
    // mount's attributes (this one's too) and so keeps it busy for the moment of a request: a
    // refusal as busy is tried again, as an administrator would.
    let mut tries = 0;
    let out = loop {
        let out = Command::new("umount").arg(m.path()).output().unwrap();
        tries += 1;
        let busy = String::from_utf8_lossy(&out.stderr).contains("busy");
        if out.status.success() || !busy || tries == 10 {
            break out;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        out.status.success(),
        "umount ({tries} tries): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!is_mount_point(m.path()), "still mounted after umount");
    if let Some(pid) = m.pid {
        assert!(
            process_gone(pid, Duration::from_secs(10)),
            "daemon {pid} still running after umount"
        );
    }
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

#[test]
fn mount_t_fuse_hudifs_mounts_reads_and_umount_unmounts() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = mountable_table(tmp.path()) else {
        return;
    };
    if !is_root() && !skip("mount(8) with a helper needs root here") {
        return;
    }
    if !mount_helper() {
        return;
    }
    let Some(_on_path) = hudifs_on_default_path() else {
        return;
    };
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = Command::new("mount")
        .args(["-t", "fuse.hudifs"])
        .arg(&root)
        .arg(&mnt)
        .args(["-o", "ro,allow_other,poll_interval=500"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let mut m = MountGuard::adopt(&hudifs_bin(), &mnt, &stdout);
    assert!(
        out.status.success(),
        "mount -t fuse.hudifs: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (fstype, source, mount_opts, super_opts) = mount_entry(&mnt).expect("in the mount table");
    // fuser's own mount(2) gives the type "fuse" (subtype dropped); through fusermount3 it is
    // "fuse.hudifs". The source says hudifs either way.
    assert!(fstype == "fuse.hudifs" || fstype == "fuse", "{fstype}");
    assert_eq!(source, format!("hudifs:{}", root.display()));
    assert!(has(&mount_opts, "ro") && has(&mount_opts, "nosuid") && has(&mount_opts, "nodev"));
    assert!(has(&super_opts, "allow_other"), "{super_opts}");
    let pid = m.pid.expect("the daemon's pid, printed through mount");
    assert!(
        cmdline(pid).contains("--poll-interval=500"),
        "poll_interval reached the daemon: {}",
        cmdline(pid)
    );
    reads_like_the_table(&mnt, &root);
    umount(&mut m);
}

#[test]
fn an_fstab_line_mounts_with_mount_t_and_the_documented_line_works() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = mountable_table(tmp.path()) else {
        return;
    };
    if !is_root() && !skip("mount(8) with a helper needs root here") {
        return;
    }
    if !mount_helper() {
        return;
    }
    let Some(_on_path) = hudifs_on_default_path() else {
        return;
    };
    // The fstab line of docs/systemd/README.md, then one with every kind of option.
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/systemd/README.md"),
    )
    .unwrap();
    let documented = doc
        .lines()
        .find(|l| l.starts_with("/data/trips") && l.contains(" fuse.hudifs "))
        .expect("docs/systemd/README.md has an fstab line")
        .to_string();
    let options = [
        documented.split_whitespace().nth(3).unwrap().to_string(),
        "ro,defaults,noauto,nofail,_netdev,users,nosuid,nodev,noexec,noatime,read_optimized,\
         timezone=UTC,threads=2,no_passthrough,fsname=trips-fstab,x-systemd.requires=a.service,\
         x-systemd.idle-timeout=60,comment=x"
            .to_string(),
    ];
    for (i, opts) in options.iter().enumerate() {
        let mnt = tmp.path().join(format!("mnt{i}"));
        std::fs::create_dir(&mnt).unwrap();
        let fstab = tmp.path().join(format!("fstab{i}"));
        std::fs::write(
            &fstab,
            format!(
                "# a test fstab\n{}  {}  fuse.hudifs  {opts}  0  0\n",
                root.display(),
                mnt.display()
            ),
        )
        .unwrap();
        let out = Command::new("mount")
            .arg("-T")
            .arg(&fstab)
            .arg(&mnt)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let mut m = MountGuard::adopt(&hudifs_bin(), &mnt, &stdout);
        assert!(
            out.status.success(),
            "mount -T ({opts}): {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (fstype, source, mount_opts, _) = mount_entry(&mnt).expect("mounted");
        assert!(fstype == "fuse.hudifs" || fstype == "fuse", "{fstype}");
        assert!(has(&mount_opts, "ro"), "{mount_opts}");
        if i == 1 {
            assert_eq!(source, "trips-fstab");
            assert!(has(&mount_opts, "noexec"), "{mount_opts}");
            let c = cmdline(m.pid.expect("pid"));
            for flag in [
                "--read-optimized",
                "--no-passthrough",
                "--threads=2",
                "--timezone UTC",
            ] {
                assert!(c.contains(flag), "{flag} not in {c}");
            }
        }
        reads_like_the_table(&mnt, &root);
        umount(&mut m);
    }
}

#[test]
fn mount_without_ro_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = mountable_table(tmp.path()) else {
        return;
    };
    if !is_root() && !skip("mount(8) with a helper needs root here") {
        return;
    }
    if !mount_helper() {
        return;
    }
    let Some(_on_path) = hudifs_on_default_path() else {
        return;
    };
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = Command::new("mount")
        .args(["-t", "fuse.hudifs"])
        .arg(&root)
        .arg(&mnt)
        .args(["-o", "rw"])
        .output()
        .unwrap();
    let _m = MountGuard::adopt(&hudifs_bin(), &mnt, &String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "-o rw mounted");
    assert!(err.contains("read-only") && err.contains("ro"), "{err}");
    assert!(!is_mount_point(&mnt));
}

/// The command line mount.fuse3 uses, without mount(8): `hudifs TABLE MNT -o OPTS`.
#[test]
fn the_helper_convention_is_hudifs_mount() {
    let (code, _, err) =
        support::run_hudifs(["/no/such/table", "/no/such/mnt", "-o", "ro,dev,suid"]);
    assert_eq!(code, 1, "a mount that fails (not a usage error): {err}");
    assert!(err.contains("no such directory"), "{err}");
    let (code, _, err) = support::run_hudifs(["/no/such/table", "/no/such/mnt", "-o", "ro,frob"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("-o frob: unknown mount option"), "{err}");
    let (code, _, err) = support::run_hudifs(["/no/such/table", "/no/such/mnt", "-o", "rw"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("read-only"), "{err}");
}

/// A `hudifs mount -f` child, stopped (SIGTERM, then SIGKILL and a lazy unmount) on drop.
struct Foreground {
    child: Child,
    mnt: PathBuf,
}

impl Foreground {
    /// `hudifs mount -f ROOT MNT`, its command adjusted by `configure` (environment, stderr).
    fn start(root: &Path, mnt: &Path, configure: impl FnOnce(&mut Command)) -> Foreground {
        let mut cmd = Command::new(hudifs_bin());
        cmd.args([
            OsStr::new("mount"),
            OsStr::new("-f"),
            root.as_os_str(),
            mnt.as_os_str(),
        ]);
        configure(&mut cmd);
        Foreground {
            child: cmd.spawn().unwrap(),
            mnt: mnt.to_path_buf(),
        }
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(self.child.id().to_string())
                .status();
            if !process_gone(self.child.id(), Duration::from_secs(10)) {
                let _ = self.child.kill();
            }
            let _ = self.child.wait();
        }
        if is_mount_point(&self.mnt) {
            let _ = Command::new(hudifs_bin())
                .arg("umount")
                .arg(&self.mnt)
                .status();
        }
    }
}

/// The exit status of `child` once it exits, or None when it is still running after `within`.
fn exit_within(child: &mut Child, within: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if start.elapsed() > within {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A stop signal must stop the daemon also when the mount is busy (here a process has its
/// working directory in it; a passing `hudifs status` makes it busy for a moment): it detaches
/// the mount, as libfuse daemons do, and exits.
#[test]
fn sigterm_stops_a_daemon_whose_mount_is_busy() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = mountable_table(tmp.path()) else {
        return;
    };
    let mnt = tmp.path().join("busy");
    std::fs::create_dir(&mnt).unwrap();
    let mut fg = Foreground::start(&root, &mnt, |c| {
        c.stderr(Stdio::piped());
    });
    let start = Instant::now();
    while !is_mount_point(&mnt) {
        assert!(start.elapsed() < Duration::from_secs(20), "never mounted");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _inside = support::BusyIn::start(&mnt.join("latest"));
    // A plain unmount is refused while it is in use.
    let out = Command::new("umount").arg(&mnt).output().unwrap();
    assert!(!out.status.success(), "umount of a busy mount succeeded");
    Command::new("kill")
        .arg("-TERM")
        .arg(fg.child.id().to_string())
        .status()
        .unwrap();
    let status = exit_within(&mut fg.child, Duration::from_secs(20))
        .expect("the daemon exits on SIGTERM within 20 s although its mount is busy");
    assert!(status.success(), "{status:?}");
    assert!(
        !is_mount_point(&mnt),
        "still mounted after the daemon stopped"
    );
    let mut err = String::new();
    std::io::Read::read_to_string(fg.child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("is busy"), "{err}");
}

fn recv(sock: &UnixDatagram) -> String {
    let mut buf = [0u8; 4096];
    let n = sock
        .recv(&mut buf)
        .expect("a notification within the time limit");
    String::from_utf8_lossy(&buf[..n]).to_string()
}

#[test]
fn systemd_hears_ready_once_the_mount_is_live() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = mountable_table(tmp.path()) else {
        return;
    };
    let sock_path = tmp.path().join("notify.sock");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();

    // Type=notify with `hudifs mount -f`: the daemon itself.
    let mnt = tmp.path().join("fg");
    std::fs::create_dir(&mnt).unwrap();
    let mut fg = Foreground::start(&root, &mnt, |c| {
        c.env("NOTIFY_SOCKET", &sock_path).stderr(Stdio::null());
    });
    let msg = recv(&sock);
    // Live when READY arrives: listed in the mount table and serving.
    assert!(is_mount_point(&mnt), "READY before the mount was live");
    assert!(std::fs::read_dir(mnt.join("latest")).is_ok());
    let lines: Vec<&str> = msg.lines().collect();
    assert!(lines.contains(&"READY=1"), "{msg}");
    assert!(
        lines.contains(&format!("MAINPID={}", fg.child.id()).as_str()),
        "{msg}"
    );
    assert!(msg.contains("STATUS=mounted "), "{msg}");
    Command::new("kill")
        .arg("-TERM")
        .arg(fg.child.id().to_string())
        .status()
        .unwrap();
    assert_eq!(recv(&sock), "STOPPING=1\n");
    let status = exit_within(&mut fg.child, Duration::from_secs(20))
        .expect("the daemon exits on SIGTERM within 20 s");
    assert!(status.success());
    assert!(!is_mount_point(&mnt));

    // A background launch: the launcher says READY, naming the daemon as the main process,
    // which does not see the socket.
    let mnt = tmp.path().join("bg");
    let m = MountGuard::try_mount_at(
        &hudifs_bin(),
        &root,
        &mnt,
        &[],
        &[("NOTIFY_SOCKET", sock_path.to_str().unwrap())],
    )
    .unwrap();
    let pid = m.pid.expect("daemon pid");
    let msg = recv(&sock);
    assert!(msg.lines().any(|l| l == "READY=1"), "{msg}");
    assert!(msg.lines().any(|l| l == format!("MAINPID={pid}")), "{msg}");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(
        !String::from_utf8_lossy(&environ).contains("NOTIFY_SOCKET="),
        "the daemon inherited NOTIFY_SOCKET"
    );
}

#[test]
fn a_daemon_whose_stderr_is_the_journal_logs_there() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = mountable_table(tmp.path()) else {
        return;
    };
    let journal = tmp.path().join("journal");
    let file = std::fs::File::create(&journal).unwrap();
    let md = file.metadata().unwrap();
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = Command::new(hudifs_bin())
        .args([OsStr::new("mount"), root.as_os_str(), mnt.as_os_str()])
        .env("JOURNAL_STREAM", format!("{}:{}", md.dev(), md.ino()))
        .stderr(file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let m = MountGuard::adopt(&hudifs_bin(), &mnt, &stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains(", log journal)"), "{stdout}");
    let start = Instant::now();
    let mut text = String::new();
    while start.elapsed() < Duration::from_secs(10) {
        text = std::fs::read_to_string(&journal).unwrap();
        if text.contains("mounted ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(text.contains("mounted "), "the daemon's log: {text:?}");
    assert!(
        !hudifs::daemon::log_path(&mnt).exists(),
        "a log file beside the journal"
    );
    let (_, status, _) =
        support::run_hudifs([OsStr::new("status"), OsStr::new("--json"), mnt.as_os_str()]);
    let v: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(v["mounts"][0]["log"], "journal", "{v}");
    drop(m);
}

#[test]
fn status_lists_live_mounts_with_table_instant_pid_and_log() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = mountable_table(tmp.path()) else {
        return;
    };
    let mut m = MountGuard::mount(&root, &[]);
    let mp = m.path().canonicalize().unwrap();
    let instant = support::xattr(&m.path().join("latest"), "user.hudi.instant").expect("instant");

    let (code, out, err) = support::run_hudifs(["status", "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let mine = v["mounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["mountpoint"] == mp.to_str().unwrap())
        .unwrap_or_else(|| panic!("{mp:?} not in {v}"))
        .clone();
    assert_eq!(mine["table"], root.to_str().unwrap(), "{mine}");
    assert_eq!(mine["latest_instant"], instant.as_str(), "{mine}");
    // `hudifs mount` prints the keeper's pid; `pid` is the daemon serving the mount.
    assert_eq!(mine["keeper_pid"], m.pid.unwrap(), "{mine}");
    let serving = mine["pid"].as_u64().expect("serving pid") as u32;
    assert_ne!(serving, m.pid.unwrap());
    assert_eq!(mine["restarts"], 0, "{mine}");
    assert_eq!(
        mine["log"],
        m.log.as_ref().unwrap().to_str().unwrap(),
        "{mine}"
    );
    assert_eq!(mine["problem"], Value::Null);

    let (code, text, _) = support::run_hudifs([OsStr::new("status"), m.path().as_os_str()]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with("MOUNT POINT"), "{text}");
    for word in [
        mp.to_str().unwrap(),
        root.to_str().unwrap(),
        &instant,
        &serving.to_string(),
    ] {
        assert!(lines[1].contains(word), "{word} not in {text}");
    }

    let (code, _, err) = support::run_hudifs([OsStr::new("status"), tmp.path().as_os_str()]);
    assert_eq!(code, 1);
    assert!(err.contains("not a hudifs mount"), "{err}");

    // A dead daemon (the keeper and the one serving): listed, with why, and without a pid.
    for pid in [m.pid.unwrap(), serving] {
        Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status()
            .unwrap();
        assert!(process_gone(pid, Duration::from_secs(10)));
    }
    let (_, out, _) = support::run_hudifs([
        OsStr::new("status"),
        OsStr::new("--json"),
        m.path().as_os_str(),
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let dead = &v["mounts"][0];
    assert!(
        dead["problem"].as_str().unwrap_or("").starts_with("dead"),
        "{dead}"
    );
    assert_eq!(dead["pid"], Value::Null);
    m.unmount();
    let (_, out, _) = support::run_hudifs(["status", "--json"]);
    assert!(!out.contains(mp.to_str().unwrap()), "{out}");
}

#[test]
fn the_state_file_goes_with_the_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(root) = mountable_table(tmp.path()) else {
        return;
    };
    let mut m = MountGuard::mount(&root, &[]);
    let state = hudifs::status::state_path(&hudifs::daemon::log_path(m.path()));
    let text = std::fs::read_to_string(&state).expect("state file while mounted");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["keeper_pid"], m.pid.unwrap());
    assert!(v["pid"].as_u64().is_some());
    m.unmount();
    assert!(!state.exists(), "state file left after unmount");
}

#[test]
fn version_carries_the_git_revision() {
    let (code, out, _) = support::run_hudifs(["--version"]);
    assert_eq!(code, 0);
    let rev = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    assert_eq!(
        out.trim(),
        format!("hudifs {} (git {rev})", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn completions_and_man_page_come_from_the_command_line() {
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = support::run_hudifs(["completions", shell]);
        assert_eq!(code, 0, "{err}");
        assert!(
            out.contains("poll-interval") && out.contains("status"),
            "{shell}"
        );
    }
    let (_, bash, _) = support::run_hudifs(["completions", "bash"]);
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), &bash).unwrap();
    let st = Command::new("bash")
        .arg("-n")
        .arg(script.path())
        .status()
        .unwrap();
    assert!(st.success(), "bash -n on the completion script");
    let (code, _, err) = support::run_hudifs(["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");

    let (code, page, _) = support::run_hudifs(["man"]);
    assert_eq!(code, 0);
    assert!(page.contains(".TH hudifs 1"), "{page:.200}");
    // The page renders (man-db and groff, where installed).
    if Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        let f = tempfile::Builder::new().suffix(".1").tempfile().unwrap();
        std::fs::write(f.path(), &page).unwrap();
        let out = Command::new("man")
            .arg("-l")
            .arg(f.path())
            .env("MANPAGER", "cat")
            .env("MANWIDTH", "100")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("poll-interval") || text.contains("poll‐interval"),
            "{text:.500}"
        );
    } else {
        eprintln!("man is not installed: the page is not rendered");
    }
}

#[test]
fn mount_help_is_grouped_by_topic() {
    let (code, out, _) = support::run_hudifs(["mount", "--help"]);
    assert_eq!(code, 0);
    let headings = [
        "Mounting:",
        "Views:",
        "Access (shared mounts):",
        "Following writers:",
        "Performance:",
    ];
    for h in headings {
        assert!(out.lines().any(|l| l == h), "no {h} in\n{out}");
    }
    let at = |s: &str| out.find(s).unwrap_or_else(|| panic!("{s}"));
    assert!(at("Access (shared mounts):") < at("--file-mode"));
    assert!(at("Performance:") < at("--threads"));
    assert!(
        out.contains("fuse.hudifs"),
        "the fstab spelling is explained"
    );
}

/// docs/systemd/ under `systemd-analyze verify`, the service's program being this build's and its
/// Documentation= page the one `hudifs man` prints.
#[test]
fn the_documented_units_verify() {
    let sa = Path::new("/usr/bin/systemd-analyze");
    // Debian's systemd package brings it (installed when missing, as fuse3 is).
    if let Err(why) = apt_provides("systemd", &["/usr/bin/systemd-analyze"]) {
        skip(&format!("{why}: the unit files are not verified"));
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/systemd");
    let mut units = Vec::new();
    for e in std::fs::read_dir(&docs).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if [".mount", ".automount", ".service"]
            .iter()
            .any(|s| name.ends_with(s))
        {
            let text = std::fs::read_to_string(e.path())
                .unwrap()
                .replace("/usr/local/bin/hudifs", hudifs_bin().to_str().unwrap());
            std::fs::write(tmp.path().join(&name), text).unwrap();
            units.push(name);
        }
    }
    units.sort();
    assert_eq!(
        units,
        [
            "hudifs-trips.service",
            "mnt-trips.automount",
            "mnt-trips.mount"
        ]
    );
    let man = tmp.path().join("man/man1");
    std::fs::create_dir_all(&man).unwrap();
    let (_, page, _) = support::run_hudifs(["man"]);
    std::fs::write(man.join("hudifs.1"), page).unwrap();
    // Documentation=man:hudifs(1) is looked up with man(1) where it is installed.
    let has_man = Command::new("man")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_man {
        eprintln!("man is not installed: Documentation= is not checked");
    }
    let out = Command::new(sa)
        .arg("verify")
        .arg(if has_man { "--man=yes" } else { "--man=no" })
        .args(&units)
        .current_dir(tmp.path())
        .env("MANPATH", tmp.path().join("man"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.trim().is_empty(),
        "systemd-analyze verify: {err}"
    );
}
