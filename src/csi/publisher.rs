//! Publishing volumes: one shared daemon per (table, options) on the node, and a read-only bind
//! mount of the volume's view for every pod that uses it (docs/kubernetes.md).
//!
//! State lives under the plugin's state directory, so that a restarted plugin knows what it
//! published:
//! - `daemons/<key>/mnt`: the shared mount of one (table, options), served by an ordinary
//!   `hudifs mount` (keeper and serving daemon, SEMANTICS.md §7.11); `daemons/<key>/daemon.json`
//!   names its table and options;
//! - `volumes/<key>.json`: one publication (volume id, target path, the daemon it uses, the view
//!   it shows, pinned or not).
//!
//! Publish and unpublish are idempotent, as CSI requires, and serialised: the last unpublish of
//! a daemon's volumes stops that daemon.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::attributes::{self, Pin, Secrets, VolumeSpec};
use super::bind;
use crate::mount_config::MountConfig;

/// Why a call failed, as the CSI status code that says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The request is wrong: a bad attribute, option or view. Retrying will not help.
    InvalidArgument(String),
    /// The view named does not exist in the table.
    NotFound(String),
    /// The target already shows something else.
    AlreadyExists(String),
    /// The table cannot be served as asked now (no completed write to pin, say).
    FailedPrecondition(String),
    /// Anything else: a daemon that would not start, a mount call that failed.
    Internal(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (Refusal::InvalidArgument(m)
        | Refusal::NotFound(m)
        | Refusal::AlreadyExists(m)
        | Refusal::FailedPrecondition(m)
        | Refusal::Internal(m)) = self;
        f.write_str(m)
    }
}

/// One published volume, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    pub volume_id: String,
    pub target: PathBuf,
    /// The shared daemon's key (`daemons/<key>`).
    pub daemon: String,
    /// The view as the volume asked for it.
    pub asked_view: String,
    pub pin: bool,
    /// The view shown: `asked_view`, or its pinned `as_of/<instant>` form.
    pub view: String,
}

impl Publication {
    fn to_json(&self) -> Value {
        json!({
            "volume_id": self.volume_id,
            "target": self.target,
            "daemon": self.daemon,
            "asked_view": self.asked_view,
            "pin": self.pin,
            "view": self.view,
        })
    }

    fn from_json(v: &Value) -> Option<Publication> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Publication {
            volume_id: s("volume_id")?,
            target: PathBuf::from(s("target")?),
            daemon: s("daemon")?,
            asked_view: s("asked_view")?,
            pin: v.get("pin").and_then(Value::as_bool)?,
            view: s("view")?,
        })
    }
}

/// A publish request, checked.
pub struct PublishRequest<'a> {
    pub volume_id: &'a str,
    pub target: &'a Path,
    pub spec: &'a VolumeSpec,
    /// Environment variables for the volume's daemon (credentials): volumes share a daemon
    /// only when their secrets are the same too.
    pub secrets: &'a Secrets,
}

/// The node's publications and shared daemons.
pub struct Publisher {
    state: PathBuf,
    /// The program that runs daemons (`hudifs` itself).
    exe: PathBuf,
    /// Where volumes may keep caches (`--cache-root`).
    cache_root: PathBuf,
    /// Publish and unpublish one at a time: they share daemons.
    lock: Mutex<()>,
}

/// A stable 64-bit hash of `parts` (each ended by a NUL) as 16 hex digits: state file names
/// that do not change with the Rust version.
fn key_of(parts: &[&str]) -> String {
    let h = hudifs_storage::fnv::fnv1a(parts.iter().flat_map(|p| p.bytes().chain([0u8])));
    format!("{h:016x}")
}

fn internal(what: impl std::fmt::Display) -> Refusal {
    Refusal::Internal(what.to_string())
}

/// Write `value` to `path` whole or not at all.
fn write_json(path: &Path, value: &Value) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, format!("{value:#}\n"))?;
    std::fs::rename(&tmp, path)
}

/// The `-o` options a shared daemon gets: `allow_other` (pods run as any user) and the volume's.
fn daemon_options(spec: &VolumeSpec) -> Vec<String> {
    let mut out = vec!["allow_other".to_string()];
    out.extend(spec.options.iter().cloned());
    out
}

/// The names of the shared daemon of `table` with `options` and `secrets`.
struct DaemonKeys {
    /// A hash of the typed configuration and the secrets: options that mean the same, in any
    /// order or spelling, share a daemon.
    typed: String,
    /// A hash of the option strings as given, as plugins before the typed key named daemons.
    legacy: String,
}

/// The names of the shared daemon of `table` with `options` and `secrets`; an error for
/// options `hudifs mount -o` refuses.
fn daemon_keys(table: &str, options: &[String], secrets: &Secrets) -> Result<DaemonKeys, String> {
    // Secrets part the key too (a hash of them names the daemon's directory; the values are
    // written nowhere).
    let mut secret_parts = vec!["secrets"];
    for (k, v) in &secrets.0 {
        secret_parts.extend([k.as_str(), v.as_str()]);
    }
    let with_secrets = |parts: &[&str]| {
        let mut all = parts.to_vec();
        if !secrets.0.is_empty() {
            all.extend(&secret_parts);
        }
        key_of(&all)
    };
    let mut given = vec![table];
    given.extend(options.iter().map(String::as_str));
    // The configuration's argv is its canonical form; the mount point (the last word) is the
    // daemon's own, named by this key, so it is left out.
    let config = daemon_config(table, Path::new("/"), options)?;
    let argv: Vec<String> = config
        .to_mount_argv()
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let canonical: Vec<&str> = argv[..argv.len().saturating_sub(1)]
        .iter()
        .map(String::as_str)
        .collect();
    Ok(DaemonKeys {
        typed: with_secrets(&canonical),
        legacy: with_secrets(&given),
    })
}

/// The configuration of the shared daemon of `table` with `options` at `mnt`, checked as
/// `hudifs mount -o` checks it, before any daemon starts.
pub fn daemon_config(table: &str, mnt: &Path, options: &[String]) -> Result<MountConfig, String> {
    MountConfig::from_options(table, mnt, options).map_err(|e| e.to_string())
}

impl Publisher {
    /// The publisher keeping its state under `state`, running daemons with `exe`. Daemons that
    /// no recorded publication uses (left by a plugin that died between steps) are stopped.
    pub fn open(state: &Path, exe: &Path, cache_root: &Path) -> std::io::Result<Publisher> {
        std::fs::create_dir_all(state.join("daemons"))?;
        std::fs::create_dir_all(state.join("volumes"))?;
        let state = state.canonicalize()?;
        let p = Publisher {
            state,
            exe: exe.to_path_buf(),
            cache_root: std::path::absolute(cache_root)?,
            lock: Mutex::new(()),
        };
        for key in p.daemon_keys() {
            p.stop_if_unused(&key);
        }
        Ok(p)
    }

    fn daemon_dir(&self, key: &str) -> PathBuf {
        self.state.join("daemons").join(key)
    }

    fn record_path(&self, volume_id: &str, target: &Path) -> PathBuf {
        let target = target.to_string_lossy();
        self.state
            .join("volumes")
            .join(format!("{}.json", key_of(&[volume_id, &target])))
    }

    /// Every recorded publication.
    pub fn publications(&self) -> Vec<Publication> {
        let Ok(entries) = std::fs::read_dir(self.state.join("volumes")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|t| serde_json::from_str::<Value>(&t).ok())
            .filter_map(|v| Publication::from_json(&v))
            .collect()
    }

    /// The keys of the shared daemons' directories.
    pub fn daemon_keys(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(self.state.join("daemons")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().to_string())
            .collect()
    }

    /// The shared mount of daemon `key`.
    pub fn daemon_mount(&self, key: &str) -> PathBuf {
        self.daemon_dir(key).join("mnt")
    }

    /// Whether the plugin can serve: `/dev/fuse` opens and the state directory is writable.
    pub fn ready(&self) -> Result<(), String> {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .map_err(|e| format!("/dev/fuse: {e}"))?;
        let probe = self.state.join(".probe");
        std::fs::write(&probe, b"")
            .and_then(|_| std::fs::remove_file(&probe))
            .map_err(|e| format!("{}: {e}", self.state.display()))
    }

    /// Publish a volume at its target: start or reuse its daemon, resolve its view, bind it.
    pub fn publish(&self, req: &PublishRequest) -> Result<Publication, Refusal> {
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let spec = req.spec;
        let options = daemon_options(spec);
        let record = self.record_path(req.volume_id, req.target);
        let earlier = std::fs::read_to_string(&record)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| Publication::from_json(&v));
        let keys =
            daemon_keys(&spec.table, &options, req.secrets).map_err(Refusal::InvalidArgument)?;
        // A volume published before the key was typed keeps the daemon it has.
        let key = match &earlier {
            Some(e) if e.daemon == keys.legacy => keys.legacy,
            _ => keys.typed,
        };
        let config = daemon_config(&spec.table, &self.daemon_mount(&key), &options)
            .map_err(Refusal::InvalidArgument)?;
        self.check_cache_dirs(&config)?;
        let pin = spec.pin == Pin::MountTime;
        if let Some(e) = &earlier {
            if e.daemon != key || e.asked_view != spec.view || e.pin != pin {
                return Err(Refusal::AlreadyExists(format!(
                    "volume {} is already published at {} with other attributes",
                    req.volume_id,
                    req.target.display()
                )));
            }
            if crate::sys::mountinfo::is_mount_point(req.target) {
                return Ok(e.clone());
            }
        } else if crate::sys::mountinfo::is_mount_point(req.target) {
            return Err(Refusal::AlreadyExists(format!(
                "{} is already a mount point, not of volume {}",
                req.target.display(),
                req.volume_id
            )));
        }
        let mnt = self.ensure_daemon(&key, &config, &options, req.secrets)?;
        let shown = self.bind_view(req, spec, &key, &mnt, earlier.as_ref());
        match shown {
            Ok(p) => Ok(p),
            Err(e) => {
                self.stop_if_unused(&key);
                Err(e)
            }
        }
    }

    /// A volume's cache directories must lie under the cache root: the daemon runs as root and
    /// writes there.
    fn check_cache_dirs(&self, config: &MountConfig) -> Result<(), Refusal> {
        let dirs = [
            ("cache", config.cache.as_ref()),
            ("merge_cache", config.merge.cache_dir.as_ref()),
        ];
        for (option, dir) in dirs {
            let Some(dir) = dir else { continue };
            let inside = dir.starts_with(&self.cache_root)
                && !dir
                    .components()
                    .any(|c| matches!(c, std::path::Component::ParentDir));
            if !inside {
                return Err(Refusal::InvalidArgument(format!(
                    "{option}={}: a volume's cache must be under {} (the plugin's --cache-root)",
                    dir.display(),
                    self.cache_root.display()
                )));
            }
        }
        Ok(())
    }

    /// Resolve the view (pinning it once), bind it at the target, record the publication.
    fn bind_view(
        &self,
        req: &PublishRequest,
        spec: &VolumeSpec,
        key: &str,
        mnt: &Path,
        earlier: Option<&Publication>,
    ) -> Result<Publication, Refusal> {
        // A volume published again (after a node restart, say) keeps its instant, and so does
        // the same volume published for another pod of the node: one volume, one instant.
        let pinned_before = earlier.cloned().or_else(|| {
            self.publications().into_iter().find(|p| {
                p.volume_id == req.volume_id
                    && p.pin
                    && p.daemon == key
                    && p.asked_view == spec.view
            })
        });
        let view = match (spec.pin, pinned_before) {
            (Pin::Follow, _) => spec.view.clone(),
            (Pin::MountTime, Some(e)) => e.view,
            (Pin::MountTime, None) => {
                let latest_of = if spec.view.starts_with("merged/") {
                    mnt.join("merged/latest")
                } else {
                    mnt.join("latest")
                };
                let instant =
                    crate::sys::xattr::get(&latest_of, "user.hudi.instant").map_err(|_| {
                        Refusal::FailedPrecondition(format!(
                            "pin: mount-time: table {} has no completed write to pin",
                            spec.table
                        ))
                    })?;
                attributes::pinned_view(&spec.view, &instant).map_err(Refusal::InvalidArgument)?
            }
        };
        let source = mnt.join(&view);
        match std::fs::metadata(&source) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(Refusal::InvalidArgument(format!(
                    "view {view:?} of {} is a file; a volume shows a directory",
                    spec.table
                )))
            }
            Err(e) => {
                return Err(Refusal::NotFound(format!(
                    "view {view:?} of {}: {e}",
                    spec.table
                )))
            }
        }
        std::fs::create_dir_all(req.target)
            .map_err(|e| internal(format!("{}: {e}", req.target.display())))?;
        bind::bind_read_only(&source, req.target).map_err(internal)?;
        let p = Publication {
            volume_id: req.volume_id.to_string(),
            target: req.target.to_path_buf(),
            daemon: key.to_string(),
            asked_view: spec.view.clone(),
            pin: spec.pin == Pin::MountTime,
            view,
        };
        if let Err(e) = write_json(&self.record_path(req.volume_id, req.target), &p.to_json()) {
            let _ = bind::unmount(req.target);
            return Err(internal(format!("recording the publication: {e}")));
        }
        log::info!(
            "published volume {} ({} {}) at {}",
            p.volume_id,
            crate::store::redact(&spec.table),
            p.view,
            p.target.display()
        );
        Ok(p)
    }

    /// The live shared mount of daemon `key`, started if it is not running.
    fn ensure_daemon(
        &self,
        key: &str,
        config: &MountConfig,
        options: &[String],
        secrets: &Secrets,
    ) -> Result<PathBuf, Refusal> {
        let dir = self.daemon_dir(key);
        let mnt = dir.join("mnt");
        if crate::sys::mountinfo::is_mount_point(&mnt) {
            if std::fs::metadata(&mnt).is_ok() {
                return Ok(mnt);
            }
            // A mount whose keeper died too: clear it and start again.
            log::warn!("shared mount {} does not answer; remounting", mnt.display());
            let _ = self.run(&["umount".into(), mnt.clone().into()]);
        }
        std::fs::create_dir_all(&mnt).map_err(|e| internal(format!("{}: {e}", mnt.display())))?;
        let table = config.table.to_string_lossy().to_string();
        // Each daemon serves its metrics on a port of the loopback interface, which the
        // plugin's own `/metrics` gathers: a volume may not set `metrics` itself.
        let metrics = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.to_string())
            .map_err(|e| internal(format!("a port for the daemon's metrics: {e}")))?;
        let mut config = config.clone();
        config.metrics = Some(metrics.clone());
        let mut argv: Vec<OsString> = vec!["mount".into()];
        argv.extend(config.to_mount_argv());
        write_json(
            &dir.join("daemon.json"),
            &json!({
                "table": crate::store::redact(&table),
                "options": options,
                "secrets": secrets.0.iter().map(|(k, _)| k).collect::<Vec<_>>(),
                "metrics": metrics,
            }),
        )
        .map_err(|e| internal(format!("{}: {e}", dir.display())))?;
        match self.run_with(&argv, &secrets.0) {
            Ok(_) => Ok(mnt),
            Err((code, message)) => {
                let _ = std::fs::remove_dir_all(&dir);
                let message = format!("mounting {}: {message}", crate::store::redact(&table));
                // `hudifs mount` exits 2 on a usage error (EX_USAGE-like), as clap does.
                Err(if code == Some(2) {
                    Refusal::InvalidArgument(message)
                } else {
                    Refusal::Internal(message)
                })
            }
        }
    }

    /// Run `hudifs ARGS`, returning its output, or its exit code and what it said.
    fn run(&self, argv: &[OsString]) -> Result<String, (Option<i32>, String)> {
        self.run_with(argv, &[])
    }

    /// [`Self::run`] with `env` added to the environment (a daemon's keeper and serving
    /// daemons inherit it).
    fn run_with(
        &self,
        argv: &[OsString],
        env: &[(String, String)],
    ) -> Result<String, (Option<i32>, String)> {
        let out = std::process::Command::new(&self.exe)
            .args(argv)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| (None, format!("{}: {e}", self.exe.display())))?;
        let said = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
        if out.status.success() {
            Ok(said(&out.stdout))
        } else {
            let mut msg = said(&out.stderr);
            if msg.is_empty() {
                msg = said(&out.stdout);
            }
            Err((out.status.code(), msg))
        }
    }

    /// Unpublish the volume at `target`: unmount it, remove it, forget it, and stop its daemon
    /// when no other publication uses it. Unpublishing what is not published succeeds.
    pub fn unpublish(&self, volume_id: &str, target: &Path) -> Result<(), Refusal> {
        let _one = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let record = self.record_path(volume_id, target);
        let earlier = std::fs::read_to_string(&record)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| Publication::from_json(&v));
        if crate::sys::mountinfo::is_mount_point(target) {
            bind::unmount(target).map_err(internal)?;
        }
        match std::fs::remove_dir(target) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("{}: not removed: {e}", target.display()),
        }
        if let Err(e) = std::fs::remove_file(&record) {
            if e.kind() != std::io::ErrorKind::NotFound {
                return Err(internal(format!("{}: {e}", record.display())));
            }
        }
        if let Some(p) = earlier {
            log::info!("unpublished volume {} at {}", volume_id, target.display());
            self.stop_if_unused(&p.daemon);
        }
        Ok(())
    }

    /// Stop daemon `key` and remove its directory if no publication uses it.
    fn stop_if_unused(&self, key: &str) {
        if self.publications().iter().any(|p| p.daemon == key) {
            return;
        }
        let dir = self.daemon_dir(key);
        let mnt = dir.join("mnt");
        let state =
            crate::status::read_state(&crate::status::state_path(&crate::status::log_path(&mnt)));
        if crate::sys::mountinfo::is_mount_point(&mnt) {
            if let Err((_, e)) = self.run(&["umount".into(), mnt.clone().into()]) {
                log::warn!("stopping the daemon of {}: {e}", mnt.display());
                return;
            }
        }
        // The daemon exits once the kernel ends its session: wait for it, so that "the last
        // unpublish stops the daemon" holds when the call returns.
        if let Some(s) = state {
            let pids: Vec<u32> = [Some(s.pid), s.keeper_pid].into_iter().flatten().collect();
            let until = Instant::now() + Duration::from_secs(10);
            while pids.iter().any(|p| crate::sys::spawn::alive(*p)) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            log::warn!("{}: not removed: {e}", dir.display());
        } else {
            log::info!("stopped the shared daemon {key}");
        }
    }

    /// Each running daemon's key and the address of its metrics.
    pub fn daemon_metrics(&self) -> Vec<(String, String)> {
        self.daemon_keys()
            .into_iter()
            .filter_map(|key| {
                let text =
                    std::fs::read_to_string(self.daemon_dir(&key).join("daemon.json")).ok()?;
                let v: Value = serde_json::from_str(&text).ok()?;
                Some((key, v.get("metrics")?.as_str()?.to_string()))
            })
            .collect()
    }

    /// How many publications each daemon has (for metrics).
    pub fn daemon_use(&self) -> HashMap<String, usize> {
        let mut out: HashMap<String, usize> =
            self.daemon_keys().into_iter().map(|k| (k, 0)).collect();
        for p in self.publications() {
            *out.entry(p.daemon).or_default() += 1;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_and_separate_their_parts() {
        assert_eq!(key_of(&["a"]), key_of(&["a"]));
        assert_ne!(key_of(&["ab", "c"]), key_of(&["a", "bc"]));
        assert_eq!(key_of(&[]).len(), 16);
        // The names earlier builds gave: a restarted plugin finds its daemons' directories.
        assert_eq!(key_of(&["vol", "/t"]), "8a1c4d1d3338679f");
    }

    #[test]
    fn options_that_mean_the_same_share_a_daemon() {
        let keys = |o: &[&str], secrets: &[(&str, &str)]| {
            let o: Vec<String> = o.iter().map(|s| s.to_string()).collect();
            let s = Secrets(
                secrets
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            );
            daemon_keys("/t", &o, &s).unwrap()
        };
        let a = keys(&["allow_other", "poll_interval=700", "timezone=UTC"], &[]);
        let b = keys(&["allow_other", "timezone=UTC", "poll_interval=700"], &[]);
        assert_eq!(a.typed, b.typed);
        assert_ne!(a.legacy, b.legacy, "the option strings as given differ");
        assert_ne!(
            a.typed,
            keys(&["allow_other", "poll_interval=800", "timezone=UTC"], &[]).typed
        );
        let s = keys(
            &["allow_other", "poll_interval=700", "timezone=UTC"],
            &[("k", "v")],
        );
        assert_ne!(a.typed, s.typed, "secrets part the key");
        assert!(daemon_keys("/t", &["rw".to_string()], &Secrets::default()).is_err());
    }

    #[test]
    fn options_are_checked_as_hudifs_mount_checks_them() {
        let check = |o: &[&str]| {
            let o: Vec<String> = o.iter().map(|s| s.to_string()).collect();
            daemon_config("/t", Path::new("/m"), &o)
        };
        let c = check(&["allow_other", "poll_interval=500"]).unwrap();
        assert!(c.allow_other);
        assert_eq!(c.poll_interval, Duration::from_millis(500));
        let e = check(&["poll_interval=soon"]).unwrap_err();
        assert!(e.contains("poll_interval"), "{e}");
        let e = check(&["rw"]).unwrap_err();
        assert!(e.contains("read-only"), "{e}");
        let e = check(&["no_such_option"]).unwrap_err();
        assert!(e.contains("unknown mount option"), "{e}");
    }

    #[test]
    fn publications_round_trip_through_their_records() {
        let p = Publication {
            volume_id: "v".into(),
            target: "/k/pods/x/mount".into(),
            daemon: "0123456789abcdef".into(),
            asked_view: "latest".into(),
            pin: true,
            view: "as_of/20250101000000000".into(),
        };
        assert_eq!(Publication::from_json(&p.to_json()), Some(p));
    }
}
