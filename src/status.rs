//! `hudifs status [MOUNTPOINT] [--json]`: the live hudifs mounts (SEMANTICS.md §7.9), and the
//! small state file each daemon keeps beside its log so that status can name its pid and log.
//!
//! Mounts come from `/proc/self/mountinfo` (file-system type `fuse.hudifs`, or a source starting
//! with `hudifs:`); the instant `latest/` shows from its `user.hudi.instant` attribute, read with
//! a time limit so that a hung daemon cannot hang status; pid and log from the daemon's state file
//! (`<log file>.state`: JSON, written once the mount is live, removed when the daemon exits),
//! looked for in `$TMPDIR/hudifs-<uid>/` and `/tmp/hudifs-<uid>/`, where `<uid>` is the mount's
//! owner as the kernel records it. Nothing secret is written or printed: a table URL loses its
//! user information and query.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::StatusArgs;
use crate::error::{Error, Result};
use crate::store::redact;

/// How long status waits for a mount to answer.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// What a daemon records about its mount.
#[derive(Debug, Clone, PartialEq)]
pub struct State {
    pub mountpoint: PathBuf,
    pub table: String,
    /// The process serving the mount's requests.
    pub pid: u32,
    /// The process holding the mount and restarting the serving one when it dies
    /// (`daemon/keeper.rs`); none for a daemon that serves its mount alone.
    pub keeper_pid: Option<u32>,
    /// How many times the keeper started a new serving daemon.
    pub restarts: u32,
    /// The log file, or `stderr` / `journal`.
    pub log: String,
    /// `table` is a lake's root: many tables, each mounted at its path (SEMANTICS.md §7.1.1).
    pub lake: bool,
}

impl State {
    fn to_json(&self) -> Value {
        json!({
            "mountpoint": self.mountpoint,
            "table": redact(&self.table),
            "pid": self.pid,
            "keeper_pid": self.keeper_pid,
            "restarts": self.restarts,
            "log": self.log,
            "lake": self.lake,
            "version": crate::VERSION,
        })
    }

    fn from_json(v: &Value) -> Option<State> {
        Some(State {
            mountpoint: PathBuf::from(v.get("mountpoint")?.as_str()?),
            table: v.get("table")?.as_str()?.to_string(),
            pid: u32::try_from(v.get("pid")?.as_u64()?).ok()?,
            keeper_pid: v
                .get("keeper_pid")
                .and_then(Value::as_u64)
                .and_then(|p| u32::try_from(p).ok()),
            restarts: v
                .get("restarts")
                .and_then(Value::as_u64)
                .and_then(|p| u32::try_from(p).ok())
                .unwrap_or(0),
            log: v.get("log")?.as_str()?.to_string(),
            lake: v.get("lake").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// Write the state file `path` (atomically); the returned guard removes it when dropped.
    pub fn write(&self, path: &Path) -> std::io::Result<StateFile> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("state.tmp");
        std::fs::write(&tmp, format!("{:#}\n", self.to_json()))?;
        std::fs::rename(&tmp, path)?;
        Ok(StateFile(path.to_path_buf()))
    }

    /// Replace the state file of `file` with this state (atomically).
    pub fn rewrite(&self, file: &StateFile) -> std::io::Result<()> {
        let tmp = file.0.with_extension("state.tmp");
        std::fs::write(&tmp, format!("{:#}\n", self.to_json()))?;
        std::fs::rename(&tmp, &file.0)
    }
}

/// The state a daemon wrote at `path`, if the file is there and reads as one.
pub fn read_state(path: &Path) -> Option<State> {
    let text = std::fs::read_to_string(path).ok()?;
    State::from_json(&serde_json::from_str::<Value>(&text).ok()?)
}

/// A written state file, removed on drop (when the daemon exits).
pub struct StateFile(PathBuf);

impl Drop for StateFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

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
    let uid = crate::sys::ids::uid();
    std::env::temp_dir()
        .join(format!("hudifs-{uid}"))
        .join(format!("{name}.log"))
}

/// The state file of a daemon whose log is `log` (also for a foreground daemon, which logs to
/// standard error: the file is where its log would be).
pub fn state_path(log: &Path) -> PathBuf {
    log.with_extension("state")
}

/// A hudifs mount as the mount table shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct MountEntry {
    pub mountpoint: PathBuf,
    pub source: String,
    pub fstype: String,
    /// The mount's owner (`user_id=` of the FUSE super-block options).
    pub user_id: Option<u32>,
}

fn unescape(s: &str) -> String {
    // Octal escapes of space, tab, newline and backslash.
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            if let Ok(n) = u8::from_str_radix(&s[i + 1..i + 4], 8) {
                out.push(n);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

/// The hudifs mounts of a mountinfo text.
pub fn hudifs_mounts(mountinfo: &str) -> Vec<MountEntry> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let Some(mp) = left.split(' ').nth(4) else {
            continue;
        };
        let mut r = right.split(' ');
        let (Some(fstype), Some(source)) = (r.next(), r.next()) else {
            continue;
        };
        let source = unescape(source);
        if fstype != "fuse.hudifs" && !source.starts_with("hudifs:") {
            continue;
        }
        let user_id = r.next().and_then(|opts| {
            opts.split(',')
                .find_map(|o| o.strip_prefix("user_id="))
                .and_then(|v| v.parse().ok())
        });
        out.push(MountEntry {
            mountpoint: PathBuf::from(unescape(mp)),
            source,
            fstype: fstype.to_string(),
            user_id,
        });
    }
    out
}

/// The live daemon's state for `m`: a state file in one of the places a daemon of its owner
/// writes one, that names this mount point and a live process.
fn find_state(m: &MountEntry) -> Option<State> {
    let uid = m.user_id.unwrap_or_else(crate::sys::ids::uid);
    let mut dirs = vec![std::env::temp_dir().join(format!("hudifs-{uid}"))];
    let tmp = PathBuf::from("/tmp").join(format!("hudifs-{uid}"));
    if !dirs.contains(&tmp) {
        dirs.push(tmp);
    }
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.extension().is_none_or(|x| x != "state") {
                continue;
            }
            let Some(state) = read_state(&p) else {
                continue;
            };
            if state.mountpoint == m.mountpoint
                && crate::sys::spawn::alive(state.keeper_pid.unwrap_or(state.pid))
            {
                return Some(state);
            }
        }
    }
    None
}

/// The instant `latest/` of the mount at `mp` shows, or why it could not be read.
fn latest_instant(mp: &Path) -> std::result::Result<String, String> {
    let path = mp.join("latest");
    let (tx, rx) = std::sync::mpsc::channel();
    // A hung daemon would block this thread for good: it is left behind (the process exits).
    std::thread::spawn(move || {
        let _ = tx.send(crate::sys::xattr::get(&path, "user.hudi.instant"));
    });
    match rx.recv_timeout(ANSWER_WITHIN) {
        Ok(Ok(v)) => Ok(v),
        // ECONNABORTED right after the daemon died, ENOTCONN from then on.
        Ok(Err(e)) if matches!(e.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED)) => {
            Err("dead (the daemon is gone): run `hudifs umount`".into())
        }
        Ok(Err(e)) if e.raw_os_error() == Some(libc::ENODATA) => Err("none".into()),
        Ok(Err(e)) => Err(format!("unreadable: {e}")),
        Err(_) => Err(format!(
            "unresponsive (no answer within {}s)",
            ANSWER_WITHIN.as_secs()
        )),
    }
}

/// The daemon's counters (the mount root's `user.hudifs.metrics`), within the time limit.
fn counters(mp: &Path) -> Option<Value> {
    let path = mp.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(crate::sys::xattr::get(&path, "user.hudifs.metrics"));
    });
    let text = rx.recv_timeout(ANSWER_WITHIN).ok()?.ok()?;
    serde_json::from_str(&text).ok()
}

/// One mount as status reports it.
fn describe(m: &MountEntry) -> Value {
    let state = find_state(m);
    let table = state
        .as_ref()
        .map(|s| redact(&s.table))
        .or_else(|| m.source.strip_prefix("hudifs:").map(redact));
    let lake = state.as_ref().is_some_and(|s| s.lake);
    // A lake has no one latest/: each table has its own.
    let (latest, problem) = match lake {
        true => (None, Some("(a lake: see each table's latest/)".to_string())),
        false => match latest_instant(&m.mountpoint) {
            Ok(t) => (Some(t), None),
            Err(e) => (None, Some(e)),
        },
    };
    let metrics = if problem.is_none() && !lake {
        counters(&m.mountpoint)
    } else {
        None
    };
    json!({
        "mountpoint": m.mountpoint,
        "source": redact(&m.source),
        "table": table,
        "lake": lake,
        "latest_instant": latest,
        "problem": problem,
        "pid": state.as_ref().map(|s| s.pid),
        "keeper_pid": state.as_ref().and_then(|s| s.keeper_pid),
        "restarts": state.as_ref().map(|s| s.restarts),
        "metrics": metrics,
        "log": state.as_ref().map(|s| s.log.clone()),
    })
}

/// `hudifs status`.
pub fn run(args: &StatusArgs, out: &mut dyn Write) -> Result<()> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| Error::io("/proc/self/mountinfo", e))?;
    let mut mounts = hudifs_mounts(&info);
    if let Some(mp) = &args.mountpoint {
        let want = mp
            .canonicalize()
            .or_else(|_| std::path::absolute(mp))
            .map_err(|e| Error::io(mp.display().to_string(), e))?;
        mounts.retain(|m| m.mountpoint == want);
        if mounts.is_empty() {
            return Err(Error::Mount(format!(
                "{} is not a hudifs mount",
                want.display()
            )));
        }
    }
    let rows: Vec<Value> = mounts.iter().map(describe).collect();
    let w = |e: std::io::Error| Error::io("<stdout>", e);
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &json!({ "mounts": rows }))
            .map_err(|e| w(e.into()))?;
        writeln!(out).map_err(w)?;
        return Ok(());
    }
    if rows.is_empty() {
        writeln!(out, "no hudifs mounts").map_err(w)?;
        return Ok(());
    }
    let s = |v: &Value| match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let table: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            let latest = match (&r["latest_instant"], &r["problem"]) {
                (Value::String(t), _) => t.clone(),
                (_, p) => s(p),
            };
            [
                s(&r["mountpoint"]),
                s(&r["table"]),
                latest,
                s(&r["pid"]),
                s(&r["log"]),
            ]
        })
        .collect();
    let head = ["MOUNT POINT", "TABLE", "LATEST", "PID", "LOG"];
    let width: Vec<usize> = (0..4)
        .map(|i| {
            table
                .iter()
                .map(|r| r[i].chars().count())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in std::iter::once(head.map(String::from)).chain(table) {
        writeln!(
            out,
            "{:<w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2],
            w3 = width[3]
        )
        .map_err(w)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
40 22 0:45 / /mnt/trips rw,nosuid,nodev,relatime shared:20 - fuse.hudifs hudifs:/data/trips ro,user_id=0,group_id=0,allow_other
41 22 0:46 / /mnt/with\\040space ro,nosuid,nodev master:3 - fuse hudifs:/data/b ro,user_id=1000,group_id=1000
42 22 0:47 / /mnt/ssh rw,nosuid,nodev - fuse.sshfs host:/x rw,user_id=0,group_id=0
43 22 0:48 / /mnt/named ro - fuse.hudifs trips ro,user_id=0,group_id=0
";

    #[test]
    fn hudifs_mounts_by_type_or_source() {
        let m = hudifs_mounts(INFO);
        let points: Vec<_> = m
            .iter()
            .map(|m| m.mountpoint.display().to_string())
            .collect();
        assert_eq!(points, ["/mnt/trips", "/mnt/with space", "/mnt/named"]);
        assert_eq!(m[0].source, "hudifs:/data/trips");
        assert_eq!(m[0].user_id, Some(0));
        assert_eq!(m[1].user_id, Some(1000));
        assert_eq!(m[2].source, "trips");
    }

    #[test]
    fn secrets_never_leave() {
        assert_eq!(redact("/data/trips"), "/data/trips");
        assert_eq!(redact("s3://bucket/t"), "s3://bucket/t");
        assert_eq!(
            redact("s3://AKIA:secret@bucket/t?X-Amz-Signature=abc"),
            "s3://bucket/t"
        );
        assert_eq!(redact("https://u:p@host:9000"), "https://host:9000");
    }

    #[test]
    fn state_files_round_trip_and_go_away() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("mnt_trips.log");
        let st = State {
            mountpoint: "/mnt/trips".into(),
            table: "s3://k:s@b/t".into(),
            pid: std::process::id(),
            keeper_pid: Some(1),
            restarts: 3,
            log: log.display().to_string(),
            lake: true,
        };
        let path = state_path(&log);
        assert_eq!(path, dir.path().join("mnt_trips.state"));
        let guard = st.write(&path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("k:s"), "{text}");
        let back = State::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back.table, "s3://b/t");
        assert_eq!((back.pid, &back.mountpoint), (st.pid, &st.mountpoint));
        assert_eq!((back.keeper_pid, back.restarts), (Some(1), 3));
        assert!(back.lake);
        let old = serde_json::json!({"mountpoint": "/m", "table": "/t", "pid": 1, "log": "x"});
        assert!(
            !State::from_json(&old).unwrap().lake,
            "older state files are tables"
        );
        drop(guard);
        assert!(!path.exists());
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape("a\\040b\\011c\\134d"), "a b\tc\\d");
        assert_eq!(unescape("plain\\"), "plain\\");
    }
}
