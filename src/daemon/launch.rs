//! The background launch: start the daemon detached, with its log, and return once the mount is
//! live or with the daemon's own error; the daemon's command line; and how the daemon reports
//! that it is live.

use std::ffi::OsString;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use crate::error::{Error, Result};
use crate::mount_config::MountConfig;
use crate::status::log_path;
use crate::sys::spawn::{keep_fds, Detach};

/// Environment variable through which a background launch tells the daemon which fd to report
/// readiness on.
pub(super) const READY_FD_ENV: &str = "HUDIFS_READY_FD";

/// Set for a daemon started by a background launch.
pub(super) const DAEMON_ENV: &str = "HUDIFS_DAEMON";

/// Where a background daemon's log goes, as the launcher decided: the log file, or `journal`.
pub(super) const LOG_ENV: &str = "HUDIFS_LOG";

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
    // The detached daemon's standard input and output, now that it is live.
    crate::sys::fds::stdin_stdout_to_null();
}

/// Start the daemon in the background and wait until the mount is live or the daemon failed.
pub(super) fn launch_background(cfg: &MountConfig) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| Error::io("current executable", e))?;
    let (read_end, write_end) = crate::sys::fds::pipe().map_err(|e| Error::io("pipe", e))?;
    let log_path = log_path(&cfg.mountpoint);
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

    let child_args = daemon_argv(cfg);
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
    keep_fds(&mut cmd, vec![wfd], Detach::Session);
    let mut child = cmd.spawn().map_err(|e| Error::io("spawn daemon", e))?;
    drop(write_end);
    let mut reader = std::fs::File::from(read_end);
    let mut buf = [0u8; 1];
    let got = reader.read(&mut buf).unwrap_or(0);
    if got == 1 && buf[0] == b'R' {
        println!(
            "hudifs: mounted {} at {} (daemon pid {}, log {})",
            cfg.table.display(),
            cfg.mountpoint.display(),
            child.id(),
            log_name
        );
        crate::notify::ready(
            child.id(),
            &format!(
                "mounted {} at {}",
                cfg.table.display(),
                cfg.mountpoint.display()
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

/// The command line of a daemon that a background launch or a keeper starts: `mount -f` with
/// the configuration (`MountConfig::to_mount_argv`, which the mount_config tests read back).
pub(super) fn daemon_argv(cfg: &MountConfig) -> Vec<OsString> {
    let daemon = MountConfig {
        foreground: true,
        ..cfg.clone()
    };
    let mut argv = vec![OsString::from("mount")];
    argv.extend(daemon.to_mount_argv());
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemon_gets_the_configuration_in_the_foreground() {
        let given = MountConfig::from_mount_argv(
            [
                "/t",
                "/m",
                "--read-optimized",
                "--timezone",
                "-05:00",
                "--poll-interval",
                "250",
                "--metrics",
                ":9464",
                "-o",
                "fsname=x,noexec,uid=12,region=eu-west-3",
            ]
            .map(OsString::from),
        )
        .unwrap();
        assert!(!given.foreground);
        let argv = daemon_argv(&given);
        assert_eq!(argv[0], "mount");
        let got = MountConfig::from_mount_argv(argv[1..].to_vec()).unwrap();
        assert!(got.foreground);
        assert_eq!(
            got,
            MountConfig {
                foreground: true,
                ..given
            }
        );
    }
}
