//! The command line: `hudifs mount | umount | ls | timeline` (SEMANTICS.md §7).
//!
//! `ls` and `timeline` print the same views as the mount from the same code (`hudifs-core`'s
//! rules through a `Snapshot`), so the shell and the mount can never disagree. Exit codes: 0
//! success, 1 runtime error, 2 usage.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand};
use serde_json::json;

use crate::error::{Error, Result};
use hudifs_core::rules::{self, View};
use hudifs_core::snapshot::Snapshot;
use hudifs_core::timefmt::TimelineZone;
use hudifs_core::viewkey::{self, ViewKey};

#[derive(Parser, Debug)]
#[command(
    name = "hudifs",
    version = crate::VERSION,
    about = "Mount an Apache Hudi table read-only and see exactly the files its timeline makes visible",
    after_help = "`hudifs TABLE MOUNTPOINT -o OPTIONS` (no subcommand, as mount.fuse3 runs it for \
                  `mount -t fuse.hudifs` and fstab lines) is `hudifs mount`."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Mount TABLE at MOUNTPOINT (returns once the mount is live; -f stays in the foreground).
    Mount(MountArgs),
    /// Unmount a hudifs mount (also one whose daemon died).
    Umount {
        /// The mount point.
        mountpoint: PathBuf,
    },
    /// Print the files of a view, one table-relative path per line.
    Ls(LsArgs),
    /// Print the table's active timeline.
    Timeline(TimelineArgs),
    /// List live hudifs mounts: table, the instant latest/ shows, daemon pid and log.
    Status(StatusArgs),
    /// Serve the Kubernetes CSI node plugin (csi.hudifs.dev) on a Unix socket: pods get tables,
    /// or one instant of a table, as volumes (docs/kubernetes.md).
    Csi(CsiArgs),
    /// Print a shell completion script (bash, zsh, fish) to standard output.
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) to standard output: `hudifs man | man -l -`.
    Man,
}

/// Where `hudifs csi` keeps its state unless told: inside kubelet's directory, which the node
/// DaemonSet mounts with bidirectional propagation, so that the shared mounts made there are
/// seen by kubelet and can be bound into pods.
pub const CSI_STATE_DIR: &str = "/var/lib/kubelet/plugins/csi.hudifs.dev/state";

/// `hudifs csi`: the Kubernetes node plugin (src/csi/).
#[derive(clap::Args, Debug, Clone)]
pub struct CsiArgs {
    /// The gRPC endpoint kubelet calls: unix:///PATH (or a plain path).
    #[arg(long, env = "CSI_ENDPOINT", value_name = "ENDPOINT")]
    pub endpoint: String,
    /// This node's name, as NodeGetInfo reports it.
    #[arg(long, env = "NODE_NAME", value_name = "NAME")]
    pub node_id: String,
    /// Where the plugin keeps its shared mounts and the records of what it published.
    #[arg(long, value_name = "DIR", default_value = CSI_STATE_DIR)]
    pub state_dir: PathBuf,
    /// The only directory under which a volume's `cache=` and `merge_cache=` options may put
    /// their files (a volume must not make the plugin write elsewhere on the node).
    #[arg(long, value_name = "DIR", default_value = "/var/cache/hudifs")]
    pub cache_root: PathBuf,
    /// Serve the plugin's metrics (OpenMetrics text at /metrics, /healthz) on this address:
    /// HOST:PORT, or :PORT for 127.0.0.1.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// Only this mount point (exit 1 if it is not a live hudifs mount).
    pub mountpoint: Option<PathBuf>,
    /// Machine-readable output (stable).
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct LsArgs {
    /// The table root (the directory that holds .hoodie/), or a lake (a directory or prefix
    /// holding tables, each mounted at its path): a path, file://, s3://, gs:// or az://.
    pub table: PathBuf,
    #[command(flatten)]
    pub store: crate::store::StoreArgs,
    /// Time travel: the snapshot as of this time (any accepted spelling, e.g.
    /// 20240418173551906, "2024-04-18 17:35:51", 2024-04-18T22:35:51Z, 1713479751).
    #[arg(long, value_name = "TS", conflicts_with = "incremental")]
    pub as_of: Option<String>,
    /// What changed in the half-open window (T1, T2]: T1..T2, T1.. (up to latest), ..T2.
    #[arg(long, value_name = "T1..T2")]
    pub incremental: Option<String>,
    /// Base files only (merge-on-read tables).
    #[arg(long, conflicts_with = "incremental")]
    pub read_optimized: bool,
    /// The names merged/ shows: one per file slice, with the table files merged into it
    /// (nothing is merged). With --incremental, the names merged/incremental/ shows.
    #[arg(long, conflicts_with = "read_optimized")]
    pub merged: bool,
    /// The change feed of the window (T1, T2]: the files cdc/T1..T2/ shows, one per file group
    /// (nothing is merged).
    #[arg(long, value_name = "T1..T2", conflicts_with_all = ["as_of", "incremental", "merged", "read_optimized"])]
    pub cdc: Option<String>,
    /// Time zone of naive times (default: the table's hoodie.table.timeline.timezone, else UTC).
    #[arg(long, value_name = "TZ")]
    pub timezone: Option<String>,
    /// Machine-readable output (stable).
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct TimelineArgs {
    /// The table root (the directory that holds .hoodie/), or a lake (a directory or prefix
    /// holding tables, each mounted at its path): a path, file://, s3://, gs:// or az://.
    pub table: PathBuf,
    #[command(flatten)]
    pub store: crate::store::StoreArgs,
    /// Machine-readable output (stable), with the facts the views rest on.
    #[arg(long)]
    pub json: bool,
}

/// The zone naive times are read in: `--timezone`, else the table's, else UTC (SEMANTICS.md §4.3).
pub fn zone(option: Option<&str>, table: Option<&TimelineZone>) -> Result<TimelineZone> {
    match option {
        Some(z) => TimelineZone::parse(z).map_err(|e| Error::Usage(format!("--timezone: {e}"))),
        None => Ok(table.cloned().unwrap_or(TimelineZone::Utc)),
    }
}

/// A `--timezone` value (SEMANTICS.md §4.3).
pub fn parse_zone(s: &str) -> Result<TimelineZone, String> {
    TimelineZone::parse(s).map_err(|e| e.to_string())
}

/// The table at `table`, read.
fn open(table: &Path, store: &crate::store::StoreArgs) -> Result<Snapshot> {
    let s = crate::store::open_store(table, store)?;
    let opened = hudifs_core::table::TableConfig::load(&*s)
        .and_then(|cfg| Snapshot::open_with_config(s, cfg, store.listing));
    match opened {
        // A lake root: name the tables it holds (lake/mod.rs).
        Err(hudifs_core::error::Error::NotATable(_)) if crate::lake::lake_hint(table).is_some() => {
            Err(Error::Usage(
                crate::lake::lake_hint(table).unwrap_or_default(),
            ))
        }
        r => Ok(r?),
    }
}

pub fn run_ls(args: &LsArgs, out: &mut dyn Write) -> Result<()> {
    let table = open(&args.table, &args.store)?;
    let zone = zone(args.timezone.as_deref(), table.cfg.timeline_zone.as_ref())?;
    if let Some(w) = &args.cdc {
        let key = table.parse_window(w, &zone)?;
        return print_cdc(&table, &key, args.json, out);
    }
    let key = if let Some(ts) = &args.as_of {
        viewkey::parse_as_of(ts, &zone)?
    } else if let Some(w) = &args.incremental {
        table.parse_window(w, &zone)?
    } else {
        ViewKey::Latest
    };
    let view = table.resolve(&key, args.read_optimized)?;
    let w = |e: std::io::Error| Error::io("<stdout>", e);
    if args.merged {
        let plan = table.plan(&key, args.read_optimized)?;
        let schema = crate::fs::view_schema(&*table.store, &table, &plan);
        return print_merged(&key, &view, schema.as_ref(), args.json, out);
    }
    if args.json {
        let mut v = view_json(&key, &view, args.read_optimized);
        v["source"] = json!(table.listing_source());
        serde_json::to_writer_pretty(&mut *out, &v).map_err(|e| w(e.into()))?;
        writeln!(out).map_err(w)?;
    } else {
        for f in &view.files {
            writeln!(out, "{}", f.rel_path()).map_err(w)?;
        }
    }
    Ok(())
}

/// `hudifs ls --merged`: the slices of a view as `merged/` names them, each with its inputs
/// (a slice rewritten in the view's schema, SEMANTICS.md §10.2, under its merged name).
fn print_merged(
    key: &ViewKey,
    view: &View,
    schema: Option<&crate::fs::ViewSchemaText>,
    json: bool,
    out: &mut dyn Write,
) -> Result<()> {
    let w = |e: std::io::Error| Error::io("<stdout>", e);
    let mut slices = match key {
        ViewKey::Incremental { .. } => {
            hudifs_merge::slices_of_window(&view.files, &view.selected, &view.groups_written)
        }
        _ => hudifs_merge::slices_of_view(&view.files),
    };
    if let Some(vs) = schema {
        let schema_of = |instant: &str| vs.writers.get(instant).cloned().flatten();
        hudifs_merge::apply_view_schema(
            &mut slices,
            &vs.arrow,
            &vs.text,
            schema_of,
            vs.evolution.as_ref(),
        );
    }
    let path = |partition: &str, name: &str| {
        if partition.is_empty() {
            name.to_string()
        } else {
            format!("{partition}/{name}")
        }
    };
    if json {
        let files: Vec<_> = slices
            .iter()
            .map(|vs| {
                let s = &vs.slice;
                json!({
                    "path": path(&s.partition, &vs.file_name()),
                    "partition": s.partition,
                    "file_id": s.file_id,
                    "slice": s.instant,
                    "newest_instant": vs.newest_instant,
                    "merge": s.needs_merge(),
                    "inputs": s.base.iter().chain(&s.logs).map(|i| i.path.as_str()).collect::<Vec<_>>(),
                })
            })
            .collect();
        let v = match key {
            ViewKey::Incremental { .. } => json!({"view": "merged/incremental",
                "commit_times": view.selected, "effective_end": view.effective_end, "files": files}),
            ViewKey::Latest => {
                json!({"view": "merged/latest", "instant": view.instant, "files": files})
            }
            ViewKey::AsOf(_) => {
                json!({"view": "merged/as_of", "instant": view.instant, "files": files})
            }
        };
        serde_json::to_writer_pretty(&mut *out, &v).map_err(|e| w(e.into()))?;
        writeln!(out).map_err(w)?;
    } else {
        for vs in &slices {
            writeln!(out, "{}", path(&vs.slice.partition, &vs.file_name())).map_err(w)?;
        }
    }
    Ok(())
}

/// `hudifs ls --cdc`: the change feeds of a window as `cdc/` names them, each with its writes
/// and inputs.
fn print_cdc(table: &Snapshot, key: &ViewKey, json: bool, out: &mut dyn Write) -> Result<()> {
    let w = |e: std::io::Error| Error::io("<stdout>", e);
    let plan = table.plan(key, false)?;
    hudifs_merge::cdc_check(table, &plan)?;
    let mut groups = Vec::new();
    for p in table.partitions.iter() {
        let touched = plan.writes.iter().any(|w| {
            w.kind == hudifs_core::rules::WriteKind::Data
                && w.touched
                    .iter()
                    .chain(&w.replaced)
                    .any(|g| g.partition == **p)
        });
        if touched {
            let files = table.list_partition(p)?;
            groups.extend(hudifs_merge::cdc_groups(table, &plan, p, &files)?);
        }
    }
    let path = |g: &hudifs_merge::CdcGroup| {
        if g.partition.is_empty() {
            g.file_name()
        } else {
            format!("{}/{}", g.partition, g.file_name())
        }
    };
    if json {
        let files: Vec<_> = groups
            .iter()
            .map(|g| {
                json!({
                    "path": path(g),
                    "partition": g.partition,
                    "file_id": g.file_id,
                    "writes": g.steps.iter().map(|s| s.instant.as_str()).collect::<Vec<_>>(),
                    "inputs": g.inputs(),
                })
            })
            .collect();
        let v = json!({"view": "cdc", "commit_times": plan.selected,
            "effective_end": plan.effective_end, "files": files});
        serde_json::to_writer_pretty(&mut *out, &v).map_err(|e| w(e.into()))?;
        writeln!(out).map_err(w)?;
    } else {
        let mut paths: Vec<String> = groups.iter().map(path).collect();
        paths.sort();
        for p in paths {
            writeln!(out, "{p}").map_err(w)?;
        }
    }
    Ok(())
}

/// The stable JSON form of a view.
pub fn view_json(key: &ViewKey, view: &View, read_optimized: bool) -> serde_json::Value {
    let (kind, k) = match key {
        ViewKey::Latest => ("latest", json!(null)),
        ViewKey::AsOf(t) => ("as_of", json!(t)),
        ViewKey::Incremental { start, end } => ("incremental", json!({"start": start, "end": end})),
    };
    let files: Vec<_> = view
        .files
        .iter()
        .map(|f| {
            json!({
                "path": f.rel_path(),
                "partition": f.file.partition.as_ref(),
                "file_id": f.file.file_id(),
                "kind": if f.file.is_base() { "base" } else { "log" },
                "size": f.file.size(),
                "mtime_ms": f.file.mtime().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
                "writer": f.writer,
                "slice": f.slice,
            })
        })
        .collect();
    let mut v = json!({
        "view": kind,
        "key": k,
        "read_optimized": read_optimized,
        "instant": view.instant,
        "files": files,
    });
    if matches!(key, ViewKey::Incremental { .. }) {
        v["selected"] = json!(view.selected);
        v["effective_end"] = json!(view.effective_end);
        v["listing"] = json!("merge-ready");
    }
    v
}

pub fn run_timeline(args: &TimelineArgs, out: &mut dyn Write) -> Result<()> {
    let table = open(&args.table, &args.store)?;
    let w = |e: std::io::Error| Error::io("<stdout>", e);
    if args.json {
        let instants: Vec<_> = table
            .timeline()
            .instants()
            .map(|i| {
                json!({
                    "requested": i.requested,
                    "completion": i.completion,
                    "action": i.action.name(),
                    "planned": i.planned.map(|a| a.name()),
                    "state": i.state,
                    "files": i.files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>(),
                })
            })
            .collect();
        let v = json!({
            "table": table.store.describe(&Default::default()),
            "name": table.cfg.name,
            "table_type": table.cfg.table_type,
            "table_version": table.cfg.version,
            "layout": table.cfg.layout.number(),
            "instants": instants,
            "model": rules::model(&table.ctx, &table.meta),
        });
        serde_json::to_writer_pretty(&mut *out, &v).map_err(|e| w(e.into()))?;
        writeln!(out).map_err(w)?;
    } else {
        writeln!(
            out,
            "{:<17}  {:<17}  {:<13}  {:<9}  planned as",
            "requested", "completed", "action", "state"
        )
        .map_err(w)?;
        for i in table.timeline().instants() {
            let state = i.state.name();
            writeln!(
                out,
                "{:<17}  {:<17}  {:<13}  {:<9}  {}",
                i.requested,
                i.completion.as_deref().unwrap_or("-"),
                i.action.name(),
                state,
                i.planned.map(|a| a.name()).unwrap_or("")
            )
            .map_err(w)?;
        }
    }
    Ok(())
}

#[derive(clap::Args, Debug, Clone)]
#[command(
    after_help = "Every option above is also an -o option, dashes as underscores \
    (-o poll_interval=500,read_optimized,uid=1000), as in an fstab line: \
    `/data/trips /mnt/trips fuse.hudifs ro,allow_other,poll_interval=500 0 0`. \
    -o also takes fsname=NAME and noexec (for the kernel), ignores ro, defaults, _netdev, nofail, \
    noauto, user, users, x-systemd.* and the other options of mount(8), and refuses rw."
)]
pub struct MountArgs {
    /// The table root (the directory that holds .hoodie/), or a lake (a directory or prefix
    /// holding tables, each mounted at its path): a path, file://, s3://, gs:// or az://.
    pub table: PathBuf,
    #[command(flatten)]
    pub store: crate::store::StoreArgs,
    /// An empty directory to mount on.
    pub mountpoint: PathBuf,
    /// Stay in the foreground (logs to standard error; tells systemd when the mount is live).
    #[arg(short, long, help_heading = MOUNTING)]
    pub foreground: bool,
    /// Base files only (merge-on-read tables).
    #[arg(long, help_heading = VIEWS)]
    pub read_optimized: bool,
    /// Let other users read the mount (needs user_allow_other in /etc/fuse.conf for non-root).
    #[arg(long, help_heading = ACCESS)]
    pub allow_other: bool,
    /// Time zone of naive times in paths (default: the table's, else UTC).
    #[arg(long, value_name = "TZ", value_parser = parse_zone, allow_hyphen_values = true, help_heading = VIEWS)]
    pub timezone: Option<TimelineZone>,
    /// How often to poll the timeline for new instants where inotify cannot see them (tables
    /// on network or FUSE file systems), in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 1000, help_heading = FOLLOWING)]
    pub poll_interval: u64,
    /// Serve metrics (OpenMetrics text at /metrics, a liveness answer at /healthz) on this
    /// address: HOST:PORT, or :PORT for 127.0.0.1.
    #[arg(long, value_name = "ADDR", help_heading = MOUNTING)]
    pub metrics: Option<String>,
    /// When the root is a lake: how many directory levels below it to look for tables.
    #[arg(long, value_name = "N", default_value_t = crate::lake::DEFAULT_DEPTH, help_heading = MOUNTING)]
    pub lake_depth: usize,
    /// Give `delta/` a change data feed (`delta.enableChangeDataFeed`, `_change_data/`): Hudi's
    /// change feed of each data write, for `load_cdf` and `readChangeFeed`. Off by default, as
    /// in Delta: a reader of the newest snapshot then reads nothing more than the data.
    #[arg(long, help_heading = VIEWS)]
    pub delta_change_data: bool,
    /// Where readers see the mount, when not at the mount point (in a container, through the
    /// CSI plugin): the prefix of the absolute data file paths `iceberg/` metadata names.
    #[arg(long, value_name = "PATH", help_heading = VIEWS)]
    pub iceberg_prefix: Option<PathBuf>,
    /// Read table files through the daemon instead of kernel FUSE passthrough.
    #[arg(long, help_heading = PERFORMANCE)]
    pub no_passthrough: bool,
    /// FUSE worker threads.
    #[arg(long, value_name = "N", default_value_t = 4, help_heading = PERFORMANCE)]
    pub threads: usize,
    /// Directory of the merged view's cache of merged files (default: $XDG_CACHE_HOME/hudifs/merge,
    /// else ~/.cache/hudifs/merge). Created private (0700); shared by the mounts of one user.
    #[arg(long, value_name = "DIR", help_heading = VIEWS)]
    pub merge_cache: Option<PathBuf>,
    /// How much the merge cache may hold (bytes, or with a K, M, G or T suffix).
    #[arg(long, value_name = "SIZE", default_value = "4G", value_parser = parse_size, help_heading = VIEWS)]
    pub merge_cache_size: u64,
    /// How much memory the log records of one slice may take while it is merged; a slice that
    /// needs more fails with EFBIG.
    #[arg(long, value_name = "SIZE", default_value = "1G", value_parser = parse_size, help_heading = VIEWS)]
    pub merge_memory: u64,
    /// The most memory the daemon may hold (bytes, or with a K, M, G or T suffix; default: half
    /// of the machine's memory or of its cgroup's limit). Reads from object stores wait for
    /// memory rather than exceed it; a merge that cannot fit fails with EFBIG.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = PERFORMANCE)]
    pub max_memory: Option<u64>,
    /// Keep the bytes of files read from an object store in this directory (created private),
    /// keyed by object and ETag: repeated reads are local, and a file deleted while open reads
    /// to its end.
    #[arg(long, value_name = "DIR", help_heading = PERFORMANCE)]
    pub cache: Option<PathBuf>,
    /// How much the data cache (--cache) may hold (bytes, or with a K, M, G or T suffix).
    #[arg(long, value_name = "SIZE", default_value = "10G", value_parser = parse_size, help_heading = PERFORMANCE)]
    pub max_cache_size: u64,
    /// Mount options, comma separated: every option of this command as NAME or NAME=VALUE,
    /// fsname=NAME, noexec, and mount(8)'s generic ones (see below).
    #[arg(short = 'o', value_name = "OPTIONS", help_heading = MOUNTING)]
    pub options: Vec<String>,
    /// Owner of every file and directory, a user name or number (default: the table root's
    /// owner).
    #[arg(long, value_name = "USER", value_parser = crate::access::parse_uid, help_heading = ACCESS)]
    pub uid: Option<u32>,
    /// Group of every file and directory, a group name or number (default: the table root's
    /// group).
    #[arg(long, value_name = "GROUP", value_parser = crate::access::parse_gid, help_heading = ACCESS)]
    pub gid: Option<u32>,
    /// Permission bits of every file, octal, no write bit (default: the table file's r and x
    /// bits; 0444 for timeline/ files).
    #[arg(long, value_name = "MODE", value_parser = crate::access::parse_mode, help_heading = ACCESS)]
    pub file_mode: Option<u16>,
    /// Permission bits of every directory, octal, no write bit (default: 0555).
    #[arg(long, value_name = "MODE", value_parser = crate::access::parse_mode, help_heading = ACCESS)]
    pub dir_mode: Option<u16>,
    /// Let the kernel check the permission bits against the caller (implied by --uid, --gid,
    /// --file-mode and --dir-mode).
    #[arg(long, help_heading = ACCESS)]
    pub default_permissions: bool,
    /// The source `mount` shows (`-o fsname=NAME` only).
    #[arg(skip)]
    pub fsname: Option<String>,
    /// No program runs from the mount (`-o noexec` only).
    #[arg(skip)]
    pub noexec: bool,
}

/// A size in bytes: a number with an optional K, M, G or T suffix (powers of 1024, `KiB` and
/// `KB` spellings too).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(digits);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?} is not a size (e.g. 4G, 512M, 1048576)"))?;
    let shift = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return Err(format!("{s:?}: unknown size unit (K, M, G or T)")),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?} is too large"))
}

// `hudifs mount --help`, by topic.
const MOUNTING: &str = "Mounting";
const VIEWS: &str = "Views";
const FOLLOWING: &str = "Following writers";
const ACCESS: &str = "Access (shared mounts)";
const PERFORMANCE: &str = "Performance";
