//! `hudifs-bench`: the helper behind `scripts/bench` (PRODUCT.md §5). It writes the large tables
//! with the project's generator, runs the timing loops — both sides of every figure in the same
//! run, interleaved, medians of several repetitions — and appends one JSON record per figure to
//! a results file, from which `report` writes `report.md` and `report.json`.
//!
//! Never run by the test suite; nothing here asserts a timing.

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use serde::{Deserialize, Serialize};
use serde_json::json;

use hudifs_core::table::TableType;
use hudifs_core::timeline::{self, State};
use hudifs_testkit::generator::{TableSpec, TableWriter};
use hudifs_testkit::mount::MountGuard;

type Res<T> = std::result::Result<T, String>;

/// 2026-01-01T00:00:00Z: the generator's logical clock start for every bench table.
const CLOCK_START_MS: i64 = 1_767_225_600_000;

#[derive(Parser)]
#[command(name = "hudifs-bench", about = "Benchmark helper behind scripts/bench")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(clap::Args, Clone)]
struct Common {
    /// The hudifs binary (default: `hudifs` beside this executable).
    #[arg(long)]
    hudifs: Option<PathBuf>,
    /// An empty directory to mount on.
    #[arg(long)]
    mnt: PathBuf,
    /// Repetitions per side.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// JSON-lines file the figure records are appended to.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Subcommand)]
enum Cmd {
    /// Write a table of FILES base files over INSTANTS commits and PARTITIONS partitions (files
    /// are hard links to one small Parquet file per partition: `Txn::insert_linked`).
    GenWide {
        dir: PathBuf,
        #[arg(long)]
        files: usize,
        #[arg(long)]
        instants: usize,
        #[arg(long)]
        partitions: usize,
        #[arg(long, default_value_t = 9)]
        version: u32,
    },
    /// Write a table with one base file of at least BYTES bytes; prints its table-relative path.
    GenBig {
        dir: PathBuf,
        #[arg(long)]
        bytes: u64,
        #[arg(long, default_value_t = 9)]
        version: u32,
    },
    /// Figure 1: sequential read of FILE through latest/ vs directly, cold and warm cache.
    Read {
        table: PathBuf,
        /// The big file, relative to the table root.
        #[arg(long)]
        file: String,
        /// Mount variants: `default`, `no-passthrough` (passes --no-passthrough).
        #[arg(long, value_delimiter = ',', default_value = "default")]
        modes: Vec<String>,
        #[command(flatten)]
        c: Common,
    },
    /// Figure 2: `find latest -type f` (cold: first after mount; warm) vs `find TABLE -type f`.
    Find {
        table: PathBuf,
        #[command(flatten)]
        c: Common,
    },
    /// Figure 3: mount until the first full listing of latest/ vs hudi-rs get_file_slices().
    MountList {
        table: PathBuf,
        /// Python of the virtual environment with the `hudi` package.
        #[arg(long)]
        python: PathBuf,
        /// The hudi-rs timing script (scripts/bench-hudi-rs.py).
        #[arg(long)]
        script: PathBuf,
        #[command(flatten)]
        c: Common,
    },
    /// Figure 4: daemon RSS per visible file after `find latest -type f` (big minus tiny table).
    Memory {
        big: PathBuf,
        tiny: PathBuf,
        #[command(flatten)]
        c: Common,
    },
    /// Figure 5: freshness delay (default mount and --poll-interval) and the cost of applying
    /// one commit on a short vs a long timeline. Writes its own tables under WORK.
    Freshness {
        work: PathBuf,
        /// Files of every freshness table.
        #[arg(long)]
        files: usize,
        /// Instants of the short timeline.
        #[arg(long, default_value_t = 100)]
        short: usize,
        /// Instants of the long timeline.
        #[arg(long)]
        long: usize,
        /// Poll interval (ms) of the polling-mode freshness figure.
        #[arg(long, default_value_t = 100)]
        poll_ms: u64,
        /// Poll interval (ms) of the apply-cost figure.
        #[arg(long, default_value_t = 10)]
        fast_poll_ms: u64,
        #[command(flatten)]
        c: Common,
    },
    /// Write report.md and report.json from the results file; print the summary table.
    Report {
        results: PathBuf,
        #[arg(long)]
        md: PathBuf,
        #[arg(long)]
        json: PathBuf,
        /// A line about the run (machine, mode), put at the top of the report.
        #[arg(long, default_value = "")]
        header: String,
    },
}

// ---------------------------------------------------------------------------------------------
// Records.

#[derive(Serialize, Deserialize, Clone, Debug)]
struct Side {
    label: String,
    unit: String,
    samples: Vec<f64>,
    median: f64,
}

impl Side {
    fn new(label: &str, unit: &str, samples: Vec<f64>) -> Side {
        Side {
            label: label.into(),
            unit: unit.into(),
            median: median(&samples),
            samples,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug)]
struct Record {
    /// Figure number from PRODUCT.md §5 / the bench issue (1–5).
    figure: u32,
    id: String,
    title: String,
    /// The measured side and the reference side.
    a: Side,
    b: Side,
    /// `a.median / b.median` (or as `ratio_def` says).
    ratio: f64,
    ratio_def: String,
    /// `>=` or `<=`, with the target; `None`: reported for information.
    target: Option<(String, f64)>,
    pass: Option<bool>,
    command: String,
    notes: Vec<String>,
}

impl Record {
    #[allow(clippy::too_many_arguments)]
    fn new(
        figure: u32,
        id: &str,
        title: &str,
        a: Side,
        b: Side,
        ratio_def: &str,
        target: Option<(&str, f64)>,
        notes: Vec<String>,
    ) -> Record {
        let ratio = if b.median != 0.0 {
            a.median / b.median
        } else {
            f64::NAN
        };
        let pass = target.map(|(cmp, t)| if cmp == ">=" { ratio >= t } else { ratio <= t });
        Record {
            figure,
            id: id.into(),
            title: title.into(),
            a,
            b,
            ratio,
            ratio_def: ratio_def.into(),
            target: target.map(|(c, t)| (c.to_string(), t)),
            pass,
            command: command_line(),
            notes,
        }
    }

    fn print(&self) {
        println!(
            "  [{}] {:<44} {} {:.4} {} | {} {:.4} {} | ratio {:.3} {}",
            self.figure,
            self.id,
            self.a.label,
            self.a.median,
            self.a.unit,
            self.b.label,
            self.b.median,
            self.b.unit,
            self.ratio,
            verdict(self)
        );
    }
}

fn verdict(r: &Record) -> String {
    match (&r.target, r.pass) {
        (Some((c, t)), Some(true)) => format!("(target {} {t}: pass)", sym(c)),
        (Some((c, t)), Some(false)) => format!("(target {} {t}: MISS)", sym(c)),
        _ => "(info)".to_string(),
    }
}

fn sym(c: &str) -> &'static str {
    if c == ">=" {
        "≥"
    } else {
        "≤"
    }
}

fn command_line() -> String {
    std::env::args()
        .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The 1- and 5-minute load averages: above about 1 on this 2-core machine, something else
/// shared it during the measurement.
fn load_average() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let mut f = s.split_whitespace().map(|v| v.parse().unwrap_or(f64::NAN));
    (f.next().unwrap_or(f64::NAN), f.next().unwrap_or(f64::NAN))
}

fn append(out: &Path, r: &Record) -> Res<()> {
    let mut r = r.clone();
    let (l1, l5) = load_average();
    r.notes.push(format!(
        "load average when recorded: {l1:.2} (1 min), {l5:.2} (5 min), including the benchmark itself{}",
        if l1 > 2.5 {
            " — other work was running: figures are disturbed"
        } else {
            ""
        }
    ));
    r.print();
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(out)
        .map_err(|e| format!("{}: {e}", out.display()))?;
    let line = serde_json::to_string(&r).map_err(|e| e.to_string())?;
    writeln!(f, "{line}").map_err(|e| e.to_string())
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn max(v: &[f64]) -> f64 {
    v.iter().cloned().fold(f64::NAN, f64::max)
}

// ---------------------------------------------------------------------------------------------
// System helpers.

/// `sync; echo 3 > /proc/sys/vm/drop_caches`. False when not permitted.
fn drop_caches() -> bool {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    std::fs::write("/proc/sys/vm/drop_caches", "3\n").is_ok()
}

/// A live mount made with `hudifs mount` (the test kit's [`MountGuard`]: unmounted on drop,
/// the daemon waited for, so the next measurement has the machine to itself).
struct Mount {
    guard: MountGuard,
    pid: u32,
}

fn hudifs_bin(c: &Common) -> PathBuf {
    c.hudifs.clone().unwrap_or_else(|| {
        std::env::current_exe()
            .ok()
            .and_then(|p| p.parent().map(|d| d.join("hudifs")))
            .unwrap_or_else(|| PathBuf::from("hudifs"))
    })
}

impl Mount {
    fn new(hudifs: &Path, table: &Path, mnt: &Path, extra: &[String]) -> Res<Mount> {
        Mount::with_env(hudifs, table, mnt, extra, &[])
    }

    /// A mount whose daemon runs with `env` set (`HUDIFS_NO_INOTIFY=1` to measure polling).
    fn with_env(
        hudifs: &Path,
        table: &Path,
        mnt: &Path,
        extra: &[String],
        env: &[(&str, &str)],
    ) -> Res<Mount> {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let guard = MountGuard::try_mount_at(hudifs, table, mnt, &extra, env)?;
        let pid = guard
            .pid
            .ok_or_else(|| format!("hudifs mount {} printed no daemon pid", table.display()))?;
        Ok(Mount { guard, pid })
    }

    fn latest(&self) -> PathBuf {
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
fn status_bytes(pid: u32, field: &str) -> Res<f64> {
    let v = status_field(pid, field).ok_or_else(|| format!("no {field} for pid {pid}"))?;
    let kib: f64 = v
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| format!("bad {field} {v:?}"))?;
    Ok(kib * 1024.0)
}

/// utime + stime of a process (all threads), in seconds.
fn cpu_seconds(pid: u32) -> f64 {
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
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(14) + ticks(15)) / hz
}

/// Run `find PATH -type f`; returns (seconds, lines).
fn find_files(path: &Path) -> Res<(f64, usize)> {
    let t = Instant::now();
    let mut child = Command::new("find")
        .arg(path)
        .args(["-type", "f"])
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
fn read_file(path: &Path) -> Res<(f64, u64)> {
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

fn getxattr(path: &Path, name: &str) -> Option<String> {
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

fn mib_per_s(bytes: u64, secs: f64) -> f64 {
    bytes as f64 / (1 << 20) as f64 / secs
}

fn hudifs_supports(hudifs: &Path, flag: &str) -> bool {
    Command::new(hudifs)
        .args(["mount", "--help"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(flag))
}

// ---------------------------------------------------------------------------------------------
// Tables.

fn partition_name(i: usize) -> String {
    format!("part={i:05}")
}

/// A table of `files` base files over `instants` commits and `partitions` partitions: file j
/// (in write order) goes to partition j mod `partitions`.
fn write_wide(
    dir: &Path,
    files: usize,
    instants: usize,
    partitions: usize,
    version: u32,
) -> Res<TableWriter> {
    if instants == 0 || partitions == 0 {
        return Err("instants and partitions must be at least 1".into());
    }
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("bench")
        .replace(|c: char| !c.is_ascii_alphanumeric(), "_");
    let spec =
        TableSpec::new(&name, TableType::CopyOnWrite, version).partitioned_by(&["part"], true);
    let mut w = TableWriter::create(dir, spec, CLOCK_START_MS).map_err(|e| e.to_string())?;
    let action = w.write_action();
    let mut next = 0usize;
    for k in 0..instants {
        let end = files * (k + 1) / instants;
        let mut per_partition: std::collections::BTreeMap<usize, usize> = Default::default();
        for j in next..end {
            *per_partition.entry(j % partitions).or_default() += 1;
        }
        next = end;
        let names: Vec<(String, usize)> = per_partition
            .into_iter()
            .map(|(p, n)| (partition_name(p), n))
            .collect();
        let groups: Vec<(&str, usize)> = names.iter().map(|(p, n)| (p.as_str(), *n)).collect();
        let mut t = w.begin(action).map_err(|e| e.to_string())?;
        t.insert_linked(&groups).map_err(|e| e.to_string())?;
        t.complete().map_err(|e| e.to_string())?;
    }
    w.remove_templates().map_err(|e| e.to_string())?;
    Ok(w)
}

fn gen_wide(dir: &Path, files: usize, instants: usize, partitions: usize, version: u32) -> Res<()> {
    let t = Instant::now();
    write_wide(dir, files, instants, partitions, version)?;
    println!(
        "wrote {} ({files} files, {instants} instants, {partitions} partitions) in {:.1} s",
        dir.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

fn gen_big(dir: &Path, bytes: u64, version: u32) -> Res<()> {
    let spec = TableSpec::new("bench_big", TableType::CopyOnWrite, version)
        .partitioned_by(&["part"], true);
    let mut w = TableWriter::create(dir, spec, CLOCK_START_MS).map_err(|e| e.to_string())?;
    let action = w.write_action();
    let mut t = w.begin(action).map_err(|e| e.to_string())?;
    let p = partition_name(0);
    t.insert_sized(&p, bytes).map_err(|e| e.to_string())?;
    t.complete().map_err(|e| e.to_string())?;
    let rel = w
        .events()
        .last()
        .and_then(|e| e.written.first().cloned())
        .ok_or("no file written")?;
    println!("{rel}");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Figure 1: sequential read.

fn bench_read(table: &Path, file: &str, modes: &[String], c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let direct = table.join(file);
    let size = std::fs::metadata(&direct)
        .map_err(|e| format!("{}: {e}", direct.display()))?
        .len();
    let can_drop = drop_caches();
    for mode in modes {
        let mut extra = Vec::new();
        let mut notes = vec![format!(
            "file {} ({:.0} MiB), read with 1 MiB read() calls (as dd bs=1M)",
            file,
            size as f64 / (1 << 20) as f64
        )];
        let target = match mode.as_str() {
            "default" => {
                notes.push(
                    "default mount: the 0.95 target assumes kernel FUSE passthrough".to_string(),
                );
                0.95
            }
            "no-passthrough" => {
                if !hudifs_supports(&hudifs, "--no-passthrough") {
                    println!("  hudifs mount has no --no-passthrough yet: skipped");
                    continue;
                }
                extra.push("--no-passthrough".to_string());
                0.7
            }
            m => return Err(format!("unknown mount mode {m}")),
        };
        let mnt = Mount::new(&hudifs, table, &c.mnt, &extra)?;
        let view = mnt.latest().join(file);
        for cold in [true, false] {
            if cold && !can_drop {
                notes.push("cannot drop the page cache (not root?): no cold figure".into());
                continue;
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            if !cold {
                read_file(&direct)?;
                read_file(&view)?;
            }
            for rep in 0..c.reps {
                // Alternate which side goes first.
                let order = if rep % 2 == 0 {
                    [true, false]
                } else {
                    [false, true]
                };
                for through_view in order {
                    if cold {
                        drop_caches();
                    }
                    let p = if through_view { &view } else { &direct };
                    let (secs, bytes) = read_file(p)?;
                    if bytes != size {
                        return Err(format!("{} gave {bytes} bytes, not {size}", p.display()));
                    }
                    let v = mib_per_s(bytes, secs);
                    if through_view {
                        a.push(v)
                    } else {
                        b.push(v)
                    }
                }
            }
            let cache = if cold { "cold" } else { "warm" };
            let r = Record::new(
                1,
                &format!("read-{cache}-{mode}"),
                &format!("Sequential read, {cache} page cache, {mode} mount: view vs direct"),
                Side::new("view", "MiB/s", a),
                Side::new("direct", "MiB/s", b),
                "view throughput / direct throughput",
                Some((">=", target)),
                notes.clone(),
            );
            append(&c.out, &r)?;
        }
    }
    if !modes.iter().any(|m| m == "no-passthrough") || !hudifs_supports(&hudifs, "--no-passthrough")
    {
        println!("  note: `hudifs mount --help` lists no --no-passthrough: default mount only");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Figure 2: find.

fn bench_find(table: &Path, c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let canon = table
        .canonicalize()
        .map_err(|e| format!("{}: {e}", table.display()))?;
    find_files(&canon)?;
    let (mut cold_a, mut cold_b, mut warm_a, mut warm_b) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut n_view, mut n_table) = (0, 0);
    // Cold: a fresh mount per repetition, its first find; the table side is the plain find
    // right after (the table's own metadata is warm in both cases).
    for _ in 0..c.reps {
        let mnt = Mount::new(&hudifs, &canon, &c.mnt, &[])?;
        let (s, n) = find_files(&mnt.latest())?;
        cold_a.push(s);
        n_view = n;
        let (s, n) = find_files(&canon)?;
        cold_b.push(s);
        n_table = n;
    }
    let mnt = Mount::new(&hudifs, &canon, &c.mnt, &[])?;
    find_files(&mnt.latest())?;
    for rep in 0..c.reps {
        let order = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for view in order {
            if view {
                let (s, n) = find_files(&mnt.latest())?;
                warm_a.push(s);
                n_view = n;
            } else {
                let (s, n) = find_files(&canon)?;
                warm_b.push(s);
                n_table = n;
            }
        }
    }
    drop(mnt);
    let notes = vec![format!(
        "find latest/ lists {n_view} files; find TABLE lists {n_table} (data files plus .hoodie/ and partition metafiles)"
    )];
    let r = Record::new(
        2,
        "find-warm",
        "find latest/ -type f (warm) vs find TABLE -type f",
        Side::new("view", "s", warm_a),
        Side::new("table", "s", warm_b),
        "view time / table time",
        Some(("<=", 1.5)),
        notes.clone(),
    );
    append(&c.out, &r)?;
    let mut notes = notes;
    notes.push(
        "cold = the first find after a fresh mount (one mount per repetition; the kernel caches of \
         the table directory itself stay warm), against a plain find of the table"
            .to_string(),
    );
    let r = Record::new(
        2,
        "find-cold",
        "find latest/ -type f (first after mount) vs find TABLE -type f",
        Side::new("view", "s", cold_a),
        Side::new("table", "s", cold_b),
        "view time / table time",
        None,
        notes,
    );
    append(&c.out, &r)
}

// ---------------------------------------------------------------------------------------------
// Figure 3: mount until first full listing vs hudi-rs.

#[derive(Deserialize)]
struct HudiRsRun {
    seconds: f64,
    build_seconds: f64,
    slices: usize,
}

fn bench_mount_list(table: &Path, python: &Path, script: &Path, c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let canon = table
        .canonicalize()
        .map_err(|e| format!("{}: {e}", table.display()))?;
    find_files(&canon)?;
    let (mut a, mut b, mut b_proc, mut b_build) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut n_view, mut n_slices) = (0, 0);
    for rep in 0..c.reps {
        let order = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for hudifs_side in order {
            if hudifs_side {
                let t = Instant::now();
                let mnt = Mount::new(&hudifs, &canon, &c.mnt, &[])?;
                let (_, n) = find_files(&mnt.latest())?;
                a.push(t.elapsed().as_secs_f64());
                n_view = n;
                drop(mnt);
            } else {
                let t = Instant::now();
                let out = Command::new(python)
                    .arg(script)
                    .arg(&canon)
                    .output()
                    .map_err(|e| format!("{}: {e}", python.display()))?;
                let whole = t.elapsed().as_secs_f64();
                if !out.status.success() {
                    return Err(format!(
                        "hudi-rs refused the table: {}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                let run: HudiRsRun = serde_json::from_slice(&out.stdout).map_err(|e| {
                    format!(
                        "hudi-rs script output: {e}: {}",
                        String::from_utf8_lossy(&out.stdout)
                    )
                })?;
                b.push(run.seconds);
                b_build.push(run.build_seconds);
                b_proc.push(whole);
                n_slices = run.slices;
            }
        }
    }
    let notes = vec![
        format!("latest/ lists {n_view} files; hudi-rs returns {n_slices} file slices"),
        "hudifs side: wall time of `hudifs mount` (spawn, load, mount live) + `find latest -type f`; \
         hudi-rs side: in-process time of HudiTableBuilder.from_base_uri(t).build() + get_file_slices() \
         (Python start-up and import excluded)"
            .to_string(),
        format!(
            "hudi-rs medians: build() {:.4} s; whole Python process {:.4} s (ratio against it {:.3})",
            median(&b_build),
            median(&b_proc),
            median(&a) / median(&b_proc)
        ),
        "page cache warm for both sides (the table was listed once before)".to_string(),
    ];
    let r = Record::new(
        3,
        "mount-to-listing",
        "Mount until first full listing of latest/ vs hudi-rs get_file_slices()",
        Side::new("hudifs", "s", a),
        Side::new("hudi-rs", "s", b),
        "hudifs time / hudi-rs time",
        Some(("<=", 0.5)),
        notes,
    );
    append(&c.out, &r)
}

// ---------------------------------------------------------------------------------------------
// Figure 4: memory.

fn bench_memory(big: &Path, tiny: &Path, c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let (mut per_file, mut big_rss, mut tiny_rss, mut big_hwm) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut files = 0;
    for _ in 0..c.reps {
        let mnt = Mount::new(&hudifs, tiny, &c.mnt, &[])?;
        find_files(&mnt.latest())?;
        let t = status_bytes(mnt.pid, "VmRSS:")?;
        drop(mnt);
        let mnt = Mount::new(&hudifs, big, &c.mnt, &[])?;
        let (_, n) = find_files(&mnt.latest())?;
        let b = status_bytes(mnt.pid, "VmRSS:")?;
        big_hwm.push(status_bytes(mnt.pid, "VmHWM:")?);
        drop(mnt);
        files = n;
        per_file.push((b - t) / n.max(1) as f64);
        big_rss.push(b);
        tiny_rss.push(t);
    }
    let mib = |v: f64| v / (1 << 20) as f64;
    let notes = vec![
        format!(
            "{files} visible files; daemon VmRSS after `find latest -type f`: {:.1} MiB (big), {:.1} MiB (tiny); peak VmHWM on big {:.1} MiB",
            mib(median(&big_rss)),
            mib(median(&tiny_rss)),
            mib(median(&big_hwm))
        ),
        "(RSS big - RSS tiny) / visible files, one fresh mount per repetition".to_string(),
    ];
    let r = Record::new(
        4,
        "memory-per-file",
        "Daemon resident memory per visible file",
        Side::new("hudifs", "bytes/file", per_file),
        Side::new("target", "bytes/file", vec![300.0]),
        "bytes per file / 300",
        Some(("<=", 1.0)),
        notes,
    );
    append(&c.out, &r)
}

// ---------------------------------------------------------------------------------------------
// Figure 5: freshness and the cost of a commit.

struct CommitRun {
    delays_ms: Vec<f64>,
    cpu_ms: Vec<f64>,
    loop_cpu_ms_per_commit: f64,
}

/// Mount `w`'s table, then `commits` times: begin a commit of one file, complete it staged,
/// wait until the daemon has seen its inflight file, rename the completed file into the
/// timeline and poll latest/'s `user.hudi.instant` until it names the commit.
fn commit_loop(
    w: &mut TableWriter,
    c: &Common,
    extra: &[String],
    env: &[(&str, &str)],
    commits: usize,
    jitter_ms: u64,
) -> Res<CommitRun> {
    let hudifs = hudifs_bin(c);
    let root = PathBuf::from(w.describe_root());
    let staging =
        hudifs_storage::TablePath::new(".hoodie/.temp/bench-staging").map_err(|e| e.to_string())?;
    let mnt = Mount::with_env(&hudifs, &root, &c.mnt, extra, env)?;
    let latest = mnt.latest();
    // Warm the view once.
    getxattr(&latest, "user.hudi.instant");
    let action = w.write_action();
    let layout = w.layout();
    let (mut delays, mut cpus) = (Vec::new(), Vec::new());
    let cpu_start = cpu_seconds(mnt.pid);
    let mut jitter: u64 = 0x2545_f491_4f6c_dd1d;
    for file_no in 0..commits {
        let mut t = w.begin(action).map_err(|e| e.to_string())?;
        let instant = t.instant().to_string();
        t.insert_linked(&[(partition_name(file_no % 7).as_str(), 1)])
            .map_err(|e| e.to_string())?;
        let staged = t.complete_staged(&staging).map_err(|e| e.to_string())?;
        // Wait until the daemon shows the inflight instant in timeline/, i.e. it has taken
        // the snapshot with it, then let it settle.
        let inflight = mnt
            .guard
            .path()
            .join("timeline")
            .join(timeline::instant_file_name(
                &instant,
                None,
                action,
                State::Inflight,
                layout,
            ));
        let wait = Instant::now();
        while !inflight.exists() {
            if wait.elapsed() > Duration::from_secs(120) {
                return Err(format!("the daemon never showed {}", inflight.display()));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        // Settle, plus a pseudo-random wait so commits do not land in phase with polling.
        jitter = jitter
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let extra_ms = if jitter_ms == 0 {
            0
        } else {
            (jitter >> 33) % jitter_ms
        };
        std::thread::sleep(Duration::from_millis(100 + extra_ms));
        let cpu0 = cpu_seconds(mnt.pid);
        let t0 = Instant::now();
        staged.publish().map_err(|e| e.to_string())?;
        loop {
            if getxattr(&latest, "user.hudi.instant").as_deref() == Some(instant.as_str()) {
                break;
            }
            if t0.elapsed() > Duration::from_secs(120) {
                return Err(format!("latest/ never showed {instant}"));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        delays.push(t0.elapsed().as_secs_f64() * 1000.0);
        cpus.push((cpu_seconds(mnt.pid) - cpu0) * 1000.0);
    }
    let loop_cpu = (cpu_seconds(mnt.pid) - cpu_start) * 1000.0 / commits.max(1) as f64;
    let _ = std::fs::remove_dir(root.join(staging.as_str()));
    Ok(CommitRun {
        delays_ms: delays,
        cpu_ms: cpus,
        loop_cpu_ms_per_commit: loop_cpu,
    })
}

fn fresh_table(work: &Path, name: &str, files: usize, instants: usize) -> Res<TableWriter> {
    let dir = work.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    write_wide(&dir, files, instants, 7, 9)
}

/// The daemon's environment for the polling figures: inotify off, so the timeline is polled at
/// `--poll-interval` as it is on network and FUSE file systems.
const POLLING: &[(&str, &str)] = &[("HUDIFS_NO_INOTIFY", "1")];

#[allow(clippy::too_many_arguments)]
fn bench_freshness(
    work: &Path,
    files: usize,
    short: usize,
    long: usize,
    poll_ms: u64,
    fast_poll_ms: u64,
    c: &Common,
) -> Res<()> {
    std::fs::create_dir_all(work).map_err(|e| e.to_string())?;
    let commits = c.reps;
    let cpu_note = |r: &CommitRun| {
        format!(
            "daemon CPU (utime+stime, 10 ms ticks): {:.1} ms per commit from rename to visible (mean), {:.1} ms per commit over the whole loop incl. requested/inflight refreshes and idle polling",
            r.cpu_ms.iter().sum::<f64>() / r.cpu_ms.len().max(1) as f64,
            r.loop_cpu_ms_per_commit
        )
    };
    // 5a: delay from the rename to latest/ showing the commit.
    let mut w = fresh_table(work, "fresh-short", files, short)?;
    // The daemon's default poll interval is 1000 ms: jitter over one second.
    let default = commit_loop(&mut w, c, &[], &[], commits, 1000)?;
    let poll = commit_loop(
        &mut w,
        c,
        &[format!("--poll-interval={poll_ms}")],
        POLLING,
        commits,
        poll_ms,
    )?;
    let title_note = format!(
        "{short}-instant table of {files} files; median over {commits} commits of one file; delay = rename of the completed instant file -> latest/'s user.hudi.instant names it (polled every 0.2 ms)"
    );
    let r = Record::new(
        5,
        "freshness-default",
        "Commit visible in latest/, default mount (inotify when the daemon has it) vs 100 ms",
        Side::new("delay", "ms", default.delays_ms.clone()),
        Side::new("bound", "ms", vec![100.0]),
        "median delay / 100 ms",
        Some(("<=", 1.0)),
        vec![
            title_note.clone(),
            format!("max delay {:.1} ms", max(&default.delays_ms)),
            cpu_note(&default),
        ],
    );
    append(&c.out, &r)?;
    let r = Record::new(
        5,
        &format!("freshness-poll-{poll_ms}ms"),
        &format!("Commit visible in latest/ when polling (inotify off) every {poll_ms} ms vs one interval"),
        Side::new("delay", "ms", poll.delays_ms.clone()),
        Side::new("bound", "ms", vec![poll_ms as f64]),
        "median delay / poll interval",
        Some(("<=", 1.0)),
        vec![
            title_note,
            format!("max delay {:.1} ms", max(&poll.delays_ms)),
            cpu_note(&poll),
        ],
    );
    append(&c.out, &r)?;
    drop(w);
    std::fs::remove_dir_all(work.join("fresh-short")).map_err(|e| e.to_string())?;

    // 5b: one commit applied on a long vs a short timeline, same number of files.
    for (label, extra, env, jitter) in [
        (
            format!("poll-{fast_poll_ms}ms"),
            vec![format!("--poll-interval={fast_poll_ms}")],
            POLLING,
            fast_poll_ms,
        ),
        ("default".to_string(), Vec::new(), &[][..], 1000),
    ] {
        let mut ws = fresh_table(work, "cost-short", files, short)?;
        let mut wl = fresh_table(work, "cost-long", files, long)?;
        // Interleave: alternate the tables, a few commits at a time.
        let (mut rs, mut rl) = (Vec::new(), Vec::new());
        let rounds = 2;
        let per = commits.div_ceil(rounds);
        for _ in 0..rounds {
            rs.push(commit_loop(&mut ws, c, &extra, env, per, jitter)?);
            rl.push(commit_loop(&mut wl, c, &extra, env, per, jitter)?);
        }
        let join = |v: &[CommitRun]| CommitRun {
            delays_ms: v.iter().flat_map(|r| r.delays_ms.clone()).collect(),
            cpu_ms: v.iter().flat_map(|r| r.cpu_ms.clone()).collect(),
            loop_cpu_ms_per_commit: v.iter().map(|r| r.loop_cpu_ms_per_commit).sum::<f64>()
                / v.len().max(1) as f64,
        };
        let (s, l) = (join(&rs), join(&rl));
        let r = Record::new(
            5,
            &format!("commit-cost-{label}"),
            &format!(
                "One commit applied (rename -> visible), {long} vs {short} instants, {label} mount"
            ),
            Side::new(&format!("{long} instants"), "ms", l.delays_ms.clone()),
            Side::new(&format!("{short} instants"), "ms", s.delays_ms.clone()),
            "long-timeline delay / short-timeline delay",
            Some(("<=", 1.5)),
            vec![
                format!(
                    "both tables hold {files} files; {} commits each",
                    l.delays_ms.len()
                ),
                format!("long: {}", cpu_note(&l)),
                format!("short: {}", cpu_note(&s)),
            ],
        );
        append(&c.out, &r)?;
        drop((ws, wl));
    }
    for t in ["cost-short", "cost-long"] {
        let _ = std::fs::remove_dir_all(work.join(t));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Report.

fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

fn report(results: &Path, md: &Path, json_out: &Path, header: &str) -> Res<()> {
    let text =
        std::fs::read_to_string(results).map_err(|e| format!("{}: {e}", results.display()))?;
    let mut recs: Vec<Record> = Vec::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        recs.push(serde_json::from_str(l).map_err(|e| format!("{e}: {l}"))?);
    }
    recs.sort_by_key(|r| r.figure);
    let mut m = String::new();
    m.push_str("# hudifs benchmark report\n\n");
    if !header.is_empty() {
        m.push_str(header);
        m.push_str("\n\n");
    }
    m.push_str(
        "Each figure: both sides measured in the same run, interleaved; medians of the repetitions.\n\n",
    );
    m.push_str(
        "| # | figure | measured (median) | reference (median) | ratio | target | result |\n",
    );
    m.push_str("|---|---|---|---|---|---|---|\n");
    for r in &recs {
        let target = r
            .target
            .as_ref()
            .map(|(c, t)| format!("{} {t}", sym(c)))
            .unwrap_or_else(|| "-".into());
        let res = match r.pass {
            Some(true) => "pass",
            Some(false) => "**miss**",
            None => "info",
        };
        m.push_str(&format!(
            "| {} | {} (`{}`) | {}: {} {} | {}: {} {} | {} | {} | {} |\n",
            r.figure,
            r.title,
            r.id,
            r.a.label,
            fmt_num(r.a.median),
            r.a.unit,
            r.b.label,
            fmt_num(r.b.median),
            r.b.unit,
            fmt_num(r.ratio),
            target,
            res
        ));
    }
    m.push_str("\n## Details\n");
    for r in &recs {
        m.push_str(&format!("\n### {} — {}\n\n", r.id, r.title));
        m.push_str(&format!(
            "- ratio: {} = {}\n",
            r.ratio_def,
            fmt_num(r.ratio)
        ));
        for s in [&r.a, &r.b] {
            let samples: Vec<String> = s.samples.iter().map(|v| fmt_num(*v)).collect();
            m.push_str(&format!(
                "- {} ({}): median {}; samples {}\n",
                s.label,
                s.unit,
                fmt_num(s.median),
                samples.join(", ")
            ));
        }
        for n in &r.notes {
            m.push_str(&format!("- {n}\n"));
        }
        m.push_str(&format!("- command: `{}`\n", r.command));
    }
    for p in [md, json_out] {
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
        }
    }
    std::fs::write(md, &m).map_err(|e| format!("{}: {e}", md.display()))?;
    let j = json!({"header": header, "figures": recs});
    let s = serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?;
    std::fs::write(json_out, s + "\n").map_err(|e| format!("{}: {e}", json_out.display()))?;
    println!();
    println!(
        "{:<3} {:<30} {:>14} {:>14} {:>9} {:>8} {:>6}",
        "#", "figure", "measured", "reference", "ratio", "target", "result"
    );
    for r in &recs {
        let target = r
            .target
            .as_ref()
            .map(|(c, t)| format!("{}{t}", sym(c)))
            .unwrap_or_else(|| "-".into());
        println!(
            "{:<3} {:<30} {:>14} {:>14} {:>9} {:>8} {:>6}",
            r.figure,
            r.id,
            format!("{} {}", fmt_num(r.a.median), r.a.unit),
            format!("{} {}", fmt_num(r.b.median), r.b.unit),
            fmt_num(r.ratio),
            target,
            match r.pass {
                Some(true) => "pass",
                Some(false) => "MISS",
                None => "info",
            }
        );
    }
    println!("\nreport: {} and {}", md.display(), json_out.display());
    Ok(())
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let res = match &cli.command {
        Cmd::GenWide {
            dir,
            files,
            instants,
            partitions,
            version,
        } => gen_wide(dir, *files, *instants, *partitions, *version),
        Cmd::GenBig {
            dir,
            bytes,
            version,
        } => gen_big(dir, *bytes, *version),
        Cmd::Read {
            table,
            file,
            modes,
            c,
        } => bench_read(table, file, modes, c),
        Cmd::Find { table, c } => bench_find(table, c),
        Cmd::MountList {
            table,
            python,
            script,
            c,
        } => bench_mount_list(table, python, script, c),
        Cmd::Memory { big, tiny, c } => bench_memory(big, tiny, c),
        Cmd::Freshness {
            work,
            files,
            short,
            long,
            poll_ms,
            fast_poll_ms,
            c,
        } => bench_freshness(work, *files, *short, *long, *poll_ms, *fast_poll_ms, c),
        Cmd::Report {
            results,
            md,
            json,
            header,
        } => report(results, md, json, header),
    };
    match res {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hudifs-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
