//! Real mounts for tests and benchmarks: [`MountGuard`] runs `hudifs mount` and unmounts on
//! drop (also when the test fails), making sure the daemon is gone; [`fuse_available`] tells
//! whether this machine can mount at all; [`binary`] finds the test kit's own programs.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether this machine can mount FUSE file systems; prints the reason when it cannot. With
/// `HUDIFS_REQUIRE_FUSE=1` that is a failure (a panic) instead.
pub fn fuse_available() -> bool {
    let reason = if !Path::new("/dev/fuse").exists() {
        Some("/dev/fuse is missing".to_string())
    } else if std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_err()
    {
        Some("/dev/fuse cannot be opened".to_string())
    } else {
        None
    };
    match reason {
        None => true,
        Some(r) => {
            if std::env::var("HUDIFS_REQUIRE_FUSE").as_deref() == Ok("1") {
                panic!("{r} and HUDIFS_REQUIRE_FUSE=1");
            }
            eprintln!("SKIP: {r}");
            false
        }
    }
}

/// A program of the workspace (`hudifs`, or the test kit's `hudifs-gen`, `hudifs-writer`,
/// `hudifs-bench`), built into the same target directory as the running test or benchmark
/// (`cargo test --workspace` builds them all before any test runs).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    // target/<profile>/deps/<test> or target/<profile>/<program>.
    let candidates = exe
        .ancestors()
        .skip(1)
        .take(2)
        .map(|d| d.join(name))
        .collect::<Vec<_>>();
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "{name} not found beside {} (looked in {candidates:?}): build it with \
                 `cargo build -p hudifs-testkit --bins`, or run the tests with \
                 `cargo test --workspace` (scripts/test does)",
                exe.display()
            )
        })
}

/// Whether something is mounted at `mnt` (this process's mount table).
pub fn is_mounted(mnt: &Path) -> bool {
    let target = mnt.to_string_lossy();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(&*target))
}

/// A live `hudifs mount`, unmounted (and its daemon stopped) on drop.
pub struct MountGuard {
    hudifs: PathBuf,
    mnt: PathBuf,
    /// The temporary mount point, when the guard made it.
    _dir: Option<tempfile::TempDir>,
    /// The daemon's pid, as `hudifs mount` printed it.
    pub pid: Option<u32>,
    /// The daemon's log file.
    pub log: Option<PathBuf>,
}

impl MountGuard {
    /// Mount `table` on a fresh temporary directory with `hudifs mount` (background mode, the
    /// `hudifs` of this target directory) and extra arguments; panics when the mount fails.
    pub fn mount(table: &Path, extra: &[&str]) -> MountGuard {
        MountGuard::mount_with_env(table, extra, &[])
    }

    /// [`MountGuard::mount`], the daemon running with `env` set (a store's credentials).
    pub fn mount_with_env(table: &Path, extra: &[&str], env: &[(&str, &str)]) -> MountGuard {
        let dir = tempfile::tempdir().expect("temporary mount point");
        let mnt = dir.path().to_path_buf();
        let mut g = MountGuard::try_mount_at(&binary("hudifs"), table, &mnt, extra, env)
            .unwrap_or_else(|e| panic!("{e}"));
        g._dir = Some(dir);
        g
    }

    /// Mount `table` at `mnt` (created if missing), the daemon running with `env` set.
    pub fn try_mount_at(
        hudifs: &Path,
        table: &Path,
        mnt: &Path,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Result<MountGuard, String> {
        std::fs::create_dir_all(mnt).map_err(|e| format!("{}: {e}", mnt.display()))?;
        let out = Command::new(hudifs)
            .envs(env.iter().copied())
            .arg("mount")
            .arg(table)
            .arg(mnt)
            .args(extra)
            .output()
            .map_err(|e| format!("{}: {e}", hudifs.display()))?;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let guard = MountGuard::adopt(hudifs, mnt, &stdout);
        if !out.status.success() {
            return Err(format!(
                "hudifs mount {} failed: {}{}",
                table.display(),
                stdout,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(guard)
    }

    /// Take charge of a mount at `mnt` made some other way (`mount -t fuse.hudifs`, `mount -T
    /// FSTAB`, a foreground daemon), from what `hudifs mount` printed on standard output (the
    /// daemon's pid and log; none when empty); `hudifs` is the program that unmounts it on drop.
    pub fn adopt(hudifs: &Path, mnt: &Path, stdout: &str) -> MountGuard {
        let pid = stdout
            .split("daemon pid ")
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse().ok());
        let log = stdout
            .split(", log ")
            .nth(1)
            .and_then(|s| s.lines().next())
            .map(|s| PathBuf::from(s.trim().trim_end_matches(')')));
        MountGuard {
            hudifs: hudifs.to_path_buf(),
            mnt: mnt.to_path_buf(),
            _dir: None,
            pid,
            log,
        }
    }

    /// The pid of the daemon serving the mount's requests: the state file's `pid` (under a
    /// keeper, not the pid `hudifs mount` printed), else the printed one.
    pub fn serving_pid(&self) -> Option<u32> {
        self.log
            .as_ref()
            .and_then(|l| std::fs::read_to_string(l.with_extension("state")).ok())
            .and_then(|t| {
                let rest = t.split("\"pid\":").nth(1)?;
                rest.trim_start()
                    .split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse::<u32>()
                    .ok()
            })
            .or(self.pid)
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.mnt
    }

    /// What the daemon logged so far.
    pub fn log_text(&self) -> String {
        self.log
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_default()
    }

    /// Unmount now and wait for the daemon to exit (killing it if it does not).
    pub fn unmount(&mut self) {
        let mounted = || is_mounted(&self.mnt);
        for _ in 0..50 {
            let _ = Command::new(&self.hudifs)
                .arg("umount")
                .arg(&self.mnt)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if !mounted() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let serving = self.serving_pid();
        if let Some(pid) = self.pid.take() {
            // The daemon exits once unmounted (and what `delta/` saves for the next mount is
            // written); make sure it does.
            let gone = (0..500).any(|_| {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                if stat.is_empty() || stat.contains(") Z ") {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
                false
            });
            if !gone {
                // A keeper (`hudifs status`'s keeper_pid) that did not stop: its serving daemon
                // goes with it, or it would go on holding the mount.
                for p in [Some(pid), serving].into_iter().flatten() {
                    let _ = Command::new("kill").arg("-9").arg(p.to_string()).status();
                }
            }
        }
        if let Some(log) = self.log.take().filter(|l| l.is_absolute()) {
            let _ = std::fs::remove_file(log);
        }
    }
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        self.unmount();
    }
}
