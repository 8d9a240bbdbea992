//! The background launch: start the daemon detached, with its log, and return once the mount is
//! live or with the daemon's own error; the daemon's command line; and how the daemon reports
//! that it is live.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;

use crate::cli::MountArgs;
use crate::error::{Error, Result};

/// Environment variable through which a background launch tells the daemon which fd to report
/// readiness on.
pub(super) const READY_FD_ENV: &str = "HUDIFS_READY_FD";

/// Set for a daemon started by a background launch.
pub(super) const DAEMON_ENV: &str = "HUDIFS_DAEMON";

/// Where a background daemon's log goes, as the launcher decided: the log file, or `journal`.
pub(super) const LOG_ENV: &str = "HUDIFS_LOG";

/// Where a background daemon logs: one file per mount point, under the temp directory, so that
/// remounting the same place reuses (truncates) the same file.
pub fn log_path(mountpoint: &Path) -> std::path::PathBuf {
    let abs = std::path::absolute(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    let name: String = abs
        .to_string_lossy()
        .trim_start_matches('/')
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    std::env::temp_dir()
        .join(format!("hudifs-{uid}"))
        .join(format!("{name}.log"))
}

/// What a daemon's state file records as its log (`hudifs status`): the file a background
/// launch gave it (or `journal`), else `journal` or `stderr` for a foreground one. `log` is the
/// mount's log path.
pub(super) fn log_name(log: &Path) -> String {
    if std::env::var_os(DAEMON_ENV).is_some() {
        std::env::var(LOG_ENV).unwrap_or_else(|_| log.display().to_string())
    } else if crate::notify::stderr_is_journal() {
        "journal".into()
    } else {
        "stderr".into()
    }
}

/// Tell a waiting background launcher that the mount is live.
pub(super) fn report_ready() {
    let Some(fd) = std::env::var(READY_FD_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    // SAFETY: the launcher passed us the write end of its pipe under this number.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut f = std::fs::File::from(owned);
    let _ = std::io::Write::write_all(&mut f, b"R");
    std::env::remove_var(READY_FD_ENV);
    // SAFETY: redirect stdio of the detached daemon to /dev/null now that it is live.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
}

/// Start the daemon in the background and wait until the mount is live or the daemon failed.
pub(super) fn launch_background(args: &MountArgs) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| Error::io("current executable", e))?;
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid two-element array for pipe2.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::io("pipe", std::io::Error::last_os_error()));
    }
    // SAFETY: pipe2 returned two fresh descriptors we now own.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let log_path = log_path(&args.mountpoint);
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir.display().to_string(), e))?;
    }
    // Under systemd (a .mount unit runs mount(8), which runs us) standard error is the journal:
    // the daemon keeps it rather than writing a file nobody reads.
    let journal = crate::notify::stderr_is_journal();
    let log = if journal {
        std::process::Stdio::inherit()
    } else {
        std::fs::File::create(&log_path)
            .map_err(|e| Error::io(log_path.display().to_string(), e))?
            .into()
    };
    let log_name = if journal {
        "journal".to_string()
    } else {
        log_path.display().to_string()
    };

    let child_args = daemon_argv(args);
    let wfd = write_end.as_raw_fd();
    let mut cmd = std::process::Command::new(exe);
    cmd.args(&child_args)
        .env(READY_FD_ENV, wfd.to_string())
        .env(DAEMON_ENV, "1")
        .env(LOG_ENV, &log_name)
        // The launcher tells systemd, naming the daemon as the main process.
        .env_remove("NOTIFY_SOCKET")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            libc::fcntl(wfd, libc::F_SETFD, 0);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| Error::io("spawn daemon", e))?;
    drop(write_end);
    let mut reader = std::fs::File::from(read_end);
    let mut buf = [0u8; 1];
    let got = reader.read(&mut buf).unwrap_or(0);
    if got == 1 && buf[0] == b'R' {
        println!(
            "hudifs: mounted {} at {} (daemon pid {}, log {})",
            args.table.display(),
            args.mountpoint.display(),
            child.id(),
            log_name
        );
        crate::notify::ready(
            child.id(),
            &format!(
                "mounted {} at {}",
                args.table.display(),
                args.mountpoint.display()
            ),
        );
        return Ok(());
    }
    let status = child.wait().ok();
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let _ = std::fs::remove_file(&log_path);
    let msg = text
        .lines()
        .rev()
        .find(|l| l.starts_with("hudifs: "))
        .map(|l| l.trim_start_matches("hudifs: ").to_string())
        .unwrap_or_else(|| {
            if journal {
                format!(
                    "the daemon exited ({status:?}) before the mount was live (see the journal)"
                )
            } else {
                format!("the daemon exited ({status:?}) before the mount was live: {text}")
            }
        });
    Err(Error::Mount(msg))
}

/// The command line of the daemon a background launch starts: `mount -f` with every option of
/// `args` (paths made absolute: the daemon does not share the caller's directory). A test parses
/// it back and checks nothing is lost.
pub(super) fn daemon_argv(args: &MountArgs) -> Vec<OsString> {
    let mut child_args: Vec<OsString> = vec!["mount".into(), "-f".into()];
    child_args.push(args.table.clone().into());
    child_args.push(
        std::path::absolute(&args.mountpoint)
            .unwrap_or_else(|_| args.mountpoint.clone())
            .into(),
    );
    if args.read_optimized {
        child_args.push("--read-optimized".into());
    }
    if args.allow_other {
        child_args.push("--allow-other".into());
    }
    if args.no_passthrough {
        child_args.push("--no-passthrough".into());
    }
    if let Some(z) = &args.timezone {
        child_args.push("--timezone".into());
        child_args.push(z.into());
    }
    child_args.push(format!("--poll-interval={}", args.poll_interval).into());
    if let Some(m) = &args.metrics {
        child_args.push(format!("--metrics={m}").into());
    }
    child_args.push(format!("--threads={}", args.threads).into());
    child_args.push(format!("--lake-depth={}", args.lake_depth).into());
    if let Some(dir) = &args.merge_cache {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        let mut a = OsString::from("--merge-cache=");
        a.push(dir);
        child_args.push(a);
    }
    child_args.push(format!("--merge-cache-size={}", args.merge_cache_size).into());
    child_args.push(format!("--merge-memory={}", args.merge_memory).into());
    if let Some(dir) = &args.cache {
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.clone());
        let mut a = OsString::from("--cache=");
        a.push(dir);
        child_args.push(a);
    }
    child_args.push(format!("--max-cache-size={}", args.max_cache_size).into());
    for a in args.store.to_args() {
        child_args.push(a.into());
    }
    for o in &args.options {
        child_args.push(format!("-o{o}").into());
    }
    if let Some(uid) = args.uid {
        child_args.push(format!("--uid={uid}").into());
    }
    if let Some(gid) = args.gid {
        child_args.push(format!("--gid={gid}").into());
    }
    if let Some(mode) = args.file_mode {
        child_args.push(format!("--file-mode={mode:o}").into());
    }
    if let Some(mode) = args.dir_mode {
        child_args.push(format!("--dir-mode={mode:o}").into());
    }
    if args.default_permissions {
        child_args.push("--default-permissions".into());
    }
    child_args
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::cli::{Cli, Command};

    fn parse(argv: &[OsString]) -> MountArgs {
        let mut full = vec![OsString::from("hudifs")];
        full.extend(argv.iter().cloned());
        match Cli::try_parse_from(full).unwrap().command {
            Command::Mount(m) => m,
            c => panic!("not a mount: {c:?}"),
        }
    }

    #[test]
    fn the_daemon_gets_every_option_of_a_background_launch() {
        let given = parse(
            &[
                "mount",
                "/t",
                "/m",
                "--read-optimized",
                "--allow-other",
                "--no-passthrough",
                "--timezone",
                "UTC",
                "--poll-interval",
                "250",
                "--metrics",
                ":9464",
                "--threads",
                "7",
                "--lake-depth",
                "2",
                "--merge-cache",
                "/c",
                "--merge-cache-size",
                "3G",
                "--merge-memory",
                "64M",
                "-o",
                "fsname=x",
                "--uid",
                "12",
                "--gid",
                "34",
                "--file-mode",
                "0440",
                "--dir-mode",
                "0550",
                "--default-permissions",
                "--endpoint-url",
                "http://127.0.0.1:9000",
                "--region",
                "eu-west-3",
                "--force-path-style",
                "--no-sign-request",
                "--profile",
                "dev",
                "--allow-http",
            ]
            .map(OsString::from),
        );
        let mut got = parse(&daemon_argv(&given));
        assert!(got.foreground);
        got.foreground = given.foreground;
        assert_eq!(format!("{got:?}"), format!("{given:?}"));
    }
}
