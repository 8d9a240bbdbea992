//! System helpers: the page cache, mounts, `/proc` figures of the daemon, timed `find` and
//! reads, extended attributes.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use hudifs_testkit::mount::MountGuard;

use crate::{Common, Res};

/// `sync; echo 3 > /proc/sys/vm/drop_caches`. False when not permitted.
pub fn drop_caches() -> bool {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

/// A live mount made with `hudifs mount` (the test kit's [`MountGuard`]: unmounted on drop,
/// the daemon waited for, so the next measurement has the machine to itself).
pub struct Mount {
    pub guard: MountGuard,
    /// The daemon serving the mount.
    pub pid: u32,
}

pub fn hudifs_bin(c: &Common) -> PathBuf {
    c.hudifs.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("hudifs")))
            .unwrap_or_else(|| PathBuf::from("hudifs"))
    })
}

impl Mount {
    pub fn new(hudifs: &Path, table: &Path, mnt: &Path, extra: &[String]) -> Res<Mount> {
        Mount::with_env(hudifs, table, mnt, extra, &[])
    }

    /// A mount whose daemon runs with `env` set (`HUDIFS_NO_INOTIFY=1` to measure polling).
    pub fn with_env(
        hudifs: &Path,
        table: &Path,
        mnt: &Path,
        extra: &[String],
        env: &[(&str, &str)],
    ) -> Res<Mount> {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let guard = MountGuard::try_mount_at(hudifs, table, mnt, &extra, env)?;
        // The daemon serving the mount (its memory and CPU are the figures), not its keeper.
        let pid = guard
            .serving_pid()
            .ok_or_else(|| format!("hudifs mount {} printed no daemon pid", table.display()))?;
        Ok(Mount { guard, pid })
    }

    pub fn latest(&self) -> PathBuf {
        self.guard.path().join("latest")
    }
}

fn status_field(pid: u32, field: &str) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(field))
        .map(|l| l[field.len()..].trim().to_string())
}

/// A `/proc/<pid>/status` size field (`VmRSS:`, `VmHWM:`) in bytes.
pub fn status_bytes(pid: u32, field: &str) -> Res<f64> {
    let v = status_field(pid, field).ok_or_else(|| format!("no {field} for pid {pid}"))?;
    let kib: f64 = v
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("bad {field} {v:?}"))?;
    Ok(kib * 1024.0)
}

/// The unit of /proc's CPU times.
fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

/// utime + stime of a process (all threads), in seconds.
pub fn cpu_seconds(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = s.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime is field 14, stime field 15.
    let ticks = |i: usize| {
        f.get(i - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let hz = ticks_per_second();
    (ticks(14) + ticks(15)) / hz
}

/// CPU time of the whole machine so far, in seconds: (busy, idle), from `/proc/stat` (busy:
/// user, nice, system, irq, softirq, steal; idle: idle, iowait).
#[cfg(feature = "s3bench")]
pub fn machine_cpu_seconds() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<f64> = s
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    let at = |i: usize| f.get(i).copied().unwrap_or(0.0);
    let hz = ticks_per_second();
    let busy = at(0) + at(1) + at(2) + at(5) + at(6) + at(7);
    (busy / hz, (at(3) + at(4)) / hz)
}

/// Run `find PATH -type f`; returns (seconds, lines).
pub fn find_files(path: &Path) -> Res<(f64, usize)> {
    find_with(path, &[])
}

/// `find PATH -type f` with the tests and actions `extra` (`-printf %s\n`: stat every file);
/// returns (seconds, lines).
pub fn find_with(path: &Path, extra: &[&str]) -> Res<(f64, usize)> {
    let t = Instant::now();
    let mut child = Command::new("find")
        .arg(path)
        .args(["-type", "f"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("find: {e}"))?;
    let mut n = 0;
    let mut buf = Vec::with_capacity(256);
    if let Some(out) = child.stdout.take() {
        let mut r = BufReader::with_capacity(1 << 20, out);
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) => break,
                Ok(_) => n += 1,
                Err(e) => return Err(format!("find: {e}")),
            }
        }
    }
    let status = child.wait().map_err(|e| format!("find: {e}"))?;
    let secs = t.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("find {} failed: {status}", path.display()));
    }
    Ok((secs, n))
}

/// Read a file sequentially with 1 MiB reads (as `dd bs=1M`); returns (seconds, bytes).
pub fn read_file(path: &Path) -> Res<(f64, u64)> {
    let mut buf = vec![0u8; 1 << 20];
    let t = Instant::now();
    let mut f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut total = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    Ok((t.elapsed().as_secs_f64(), total))
}

pub fn getxattr(path: &Path, name: &str) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let p = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = std::ffi::CString::new(name).ok()?;
    let mut buf = [0u8; 256];
    // SAFETY: valid C strings and a buffer of the given length.
    let len = unsafe {
        libc::getxattr(
            p.as_ptr(),
            n.as_ptr(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
        )
    };
    (len >= 0).then(|| String::from_utf8_lossy(&buf[..len as usize]).to_string())
}

pub fn mib_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1 << 20) as f64 / secs
}

pub fn hudifs_supports(hudifs: &Path, flag: &str) -> bool {
    Command::new(hudifs)
        .args(["mount", "--help"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(flag))
}
