//! Figure 12: `delta/`. First, on a cold mount (page cache dropped, daemon just started), the
//! time until a Delta reader holds the current snapshot's metadata (`_delta_log/` listed,
//! `_last_checkpoint`, the checkpoint it names and every log file after it read), beside the
//! time until a first full listing of `latest/` on an equally cold mount. Then DuckDB's
//! `count(*)` through `delta_scan('delta/')` against `read_parquet` of the same files
//! (`latest/**/*.parquet`) on one warm mount, alternating.
//!
//! With `--server` the same table is served by an S3 server on 127.0.0.1 (s3s-fs in this
//! process, or moto) behind the test kit's latency proxy, mounted as `s3://…`, once per
//! `--latency-ms`: the same two figures on an object store.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::record::{append, median, sides, Record, Side};
use crate::s3server::{serve, S3Table};
use crate::sys::{drop_caches, find_files, hudifs_bin, Mount};
use crate::{Common, Res};

/// Where a figure's table is mounted from: its path (or `s3://` URL), the mount's extra
/// arguments, and how the record names and titles say so (empty on a local disk).
pub struct Source {
    pub table: std::path::PathBuf,
    pub args: Vec<String>,
    /// `-s3s-fs-0ms`: appended to the record names.
    pub tag: String,
    /// ` (s3s-fs, +0 ms per request)`: appended to the titles.
    pub title: String,
}

/// The S3 side of a figure: `--server` and `--latency-ms` of `delta` and `iceberg`.
#[derive(clap::Args, Clone, Default)]
pub struct OnS3 {
    /// Also measure the table on this S3 server on 127.0.0.1: s3s-fs (a build with
    /// --features s3bench) or moto (`--moto-python`).
    #[arg(long)]
    pub server: Option<String>,
    /// Per-request latencies to measure the S3 side at, in ms.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    pub latency_ms: Vec<u64>,
    /// A Python with `moto[server]`, for `--server moto`.
    #[arg(long)]
    pub moto_python: Option<std::path::PathBuf>,
    /// The metadata figure alone, without DuckDB's count (which reads every data file: minutes
    /// on a store with latency).
    #[arg(long)]
    pub metadata_only: bool,
}

/// Figure `f` on `table` from a local disk, then from every S3 side `s3` asks for.
pub fn bench_everywhere(table: &Path, python: &Path, c: &Common, s3: &OnS3, f: &Format) -> Res<()> {
    let canon = table
        .canonicalize()
        .map_err(|e| format!("{}: {e}", table.display()))?;
    let local = Source {
        table: canon.clone(),
        args: Vec::new(),
        tag: String::new(),
        title: String::new(),
    };
    bench_format(&local, python, c, f, s3.metadata_only)?;
    let Some(server) = &s3.server else {
        return Ok(());
    };
    let url = "s3://lake/bench/wide";
    let served = serve(
        &S3Table {
            table: canon,
            python: s3.moto_python.clone().unwrap_or_default(),
            script: Default::default(),
            latency_ms: s3.latency_ms.clone(),
            server: server.clone(),
        },
        url,
    )?;
    for &lat in &s3.latency_ms {
        served
            .proxy
            .set_latency(std::time::Duration::from_millis(lat));
        let on = Source {
            table: url.into(),
            args: hudifs_testkit::s3::store_args(&served.proxy.endpoint),
            tag: format!("-{server}-{lat}ms"),
            title: format!(" ({server}, +{lat} ms per request)"),
        };
        bench_format(&on, python, c, f, s3.metadata_only)?;
    }
    Ok(())
}

/// What a Delta reader reads of `delta/` to know the current snapshot; the files read.
fn read_metadata(delta: &Path) -> Res<usize> {
    let log = delta.join("_delta_log");
    let mut names: Vec<String> = std::fs::read_dir(&log)
        .map_err(|e| format!("{}: {e}", log.display()))?
        .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    names.sort();
    let read = |n: &str| std::fs::read(log.join(n)).map_err(|e| format!("{n}: {e}"));
    let mut from = 0u64;
    let mut files = 0;
    if names.iter().any(|n| n == "_last_checkpoint") {
        let last: serde_json::Value =
            serde_json::from_slice(&read("_last_checkpoint")?).map_err(|e| e.to_string())?;
        from = last["version"]
            .as_u64()
            .ok_or("_last_checkpoint has no version")?;
        read(&format!("{from:020}.checkpoint.parquet"))?;
        files += 2;
    }
    for n in &names {
        let Some(v) = n.strip_suffix(".json").and_then(|d| d.parse::<u64>().ok()) else {
            continue;
        };
        if files == 0 || v > from {
            read(n)?;
            files += 1;
        }
    }
    Ok(files)
}

/// DuckDB's in-process time for `sql` (and its answer), with the extensions `exts` (`delta`,
/// `avro`, `iceberg`) loaded from their PyPI wheels.
pub fn duckdb_with(python: &Path, exts: &[&str], sql: &str) -> Res<f64> {
    let script = format!(
        "import duckdb, glob, os, time, importlib
c = duckdb.connect(config={{'allow_unsigned_extensions': 'true'}})
for name in {exts:?}:
    mod = importlib.import_module('duckdb_extension_' + name)
    ext = glob.glob(os.path.join(os.path.dirname(mod.__file__), 'extensions', '*', name + '.duckdb_extension'))[0]
    c.execute(\"LOAD '\" + ext + \"'\")
c.execute('SET enable_progress_bar = false')
t = time.perf_counter()
n = c.execute({sql:?}).fetchall()[0][0]
print(time.perf_counter() - t, n)"
    );
    let out = Command::new(python)
        .args(["-c", &script])
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!("duckdb: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .last()
        .and_then(|l| l.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("duckdb printed {text:?}"))
}

/// One table format's figure: its number and names, the metadata a reader of it reads to know
/// the current snapshot, the DuckDB extensions it needs and its scan.
pub struct Format<'a> {
    pub figure: u32,
    /// `delta`, `iceberg`: the directory under the mount, and the record names' stem.
    pub dir: &'static str,
    /// What the metadata is, for the notes (`Delta`, `Iceberg`).
    pub title: &'static str,
    pub read_metadata: &'a dyn Fn(&Path) -> Res<usize>,
    pub exts: &'a [&'a str],
    /// The DuckDB table function over the format's directory (`delta_scan`, `iceberg_scan`),
    /// given the mount root.
    pub scan: &'a dyn Fn(&Path) -> Res<String>,
}

/// The figure of `f` on `table`: cold mounts until a reader has the current snapshot's
/// metadata vs until a full listing of latest/, then DuckDB's count(*) through the format vs
/// read_parquet of the same files on one warm mount, alternating (unless `metadata_only`).
pub fn bench_format(
    on: &Source,
    python: &Path,
    c: &Common,
    f: &Format,
    metadata_only: bool,
) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let mut n_files = 0;
    let cold = drop_caches();
    let (mut meta, mut listing, mut remount) = (Vec::new(), Vec::new(), Vec::new());
    let mut read_files = 0;
    // A first mount has a merge cache of its own, empty: no log saved by a mount before it. A
    // remount has the one a mount before it saved its log in (SEMANTICS §11.5).
    let with_cache = |dir: &Path| {
        let mut args = on.args.clone();
        args.extend(["--merge-cache".to_string(), dir.display().to_string()]);
        args
    };
    let kept = tempfile::tempdir().map_err(|e| e.to_string())?;
    {
        let mut mnt = Mount::new(&hudifs, &on.table, &c.mnt, &with_cache(kept.path()))?;
        (f.read_metadata)(&mnt.guard.path().join(f.dir))?;
        // The daemon ends once its saves do.
        mnt.guard.unmount();
    }
    for rep in 0..c.reps {
        for side in [0, 1, 2].map(|s| (s + rep) % 3) {
            let fresh = tempfile::tempdir().map_err(|e| e.to_string())?;
            let args = match side {
                0 => with_cache(fresh.path()),
                1 => with_cache(kept.path()),
                _ => with_cache(fresh.path()),
            };
            drop_caches();
            let t = Instant::now();
            let mnt = Mount::new(&hudifs, &on.table, &c.mnt, &args)?;
            match side {
                0 | 1 => {
                    read_files = (f.read_metadata)(&mnt.guard.path().join(f.dir))?;
                    let took = t.elapsed().as_secs_f64();
                    if side == 0 { &mut meta } else { &mut remount }.push(took);
                }
                _ => {
                    n_files = find_files(&mnt.latest())?.1;
                    listing.push(t.elapsed().as_secs_f64());
                }
            }
        }
    }
    let notes = vec![
        format!(
            "latest/: {n_files} files; {read_files} metadata files read for the newest snapshot"
        ),
        format!(
            "page cache {}; wall time from `hudifs mount` to the last byte read",
            if cold {
                "dropped before each run"
            } else {
                "not dropped (not root)"
            }
        ),
        "a first mount: an empty merge cache, no log saved by a mount before it".into(),
        format!(
            "target (issue 35): the current snapshot's {} metadata in <= 1 s: {} on a first mount ({:.3} s), {} on a remount ({:.3} s)",
            f.title,
            if median(&meta) <= 1.0 { "met" } else { "not met" },
            median(&meta),
            if median(&remount) <= 1.0 { "met" } else { "not met" },
            median(&remount),
        ),
    ];
    append(
        &c.out,
        &Record::new(
            f.figure,
            &format!("{}-metadata-cold{}", f.dir, on.tag),
            &format!(
                "Cold mount until a {} reader has the newest snapshot's metadata vs until a full listing of latest/{}",
                f.title, on.title
            ),
            Side::new(&format!("{}/ metadata", f.dir), "s", meta),
            Side::new("latest/ listing", "s", listing.clone()),
            &format!("{} metadata time / listing time", f.dir),
            None,
            notes.clone(),
        ),
    )?;
    append(
        &c.out,
        &Record::new(
            f.figure,
            &format!("{}-metadata-remount{}", f.dir, on.tag),
            &format!(
                "Cold remount (page cache dropped; the log a mount before saved in its merge cache) until a {} reader has the newest snapshot's metadata vs until a full listing of latest/{}",
                f.title, on.title
            ),
            Side::new(&format!("{}/ metadata, remount", f.dir), "s", remount),
            Side::new("latest/ listing", "s", listing),
            &format!("{} metadata time on a remount / listing time", f.dir),
            None,
            notes,
        ),
    )?;

    if metadata_only {
        return Ok(());
    }
    let mnt = Mount::new(&hudifs, &on.table, &c.mnt, &on.args)?;
    let root = mnt.guard.path().to_path_buf();
    let scan = format!("select count(*) from {}", (f.scan)(&root)?);
    let plain = format!(
        "select count(*) from read_parquet('{}/**/*.parquet')",
        root.join("latest").display()
    );
    // Warm both: the first scan builds the metadata, the first read_parquet lists.
    duckdb_with(python, f.exts, &scan)?;
    duckdb_with(python, f.exts, &plain)?;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for rep in 0..c.reps {
        for format_side in sides(rep) {
            if format_side {
                a.push(duckdb_with(python, f.exts, &scan)?);
            } else {
                b.push(duckdb_with(python, f.exts, &plain)?);
            }
        }
    }
    let fun = format!("{}_scan", f.dir);
    append(
        &c.out,
        &Record::new(
            f.figure,
            &format!("{}-duckdb-count{}", f.dir, on.tag),
            &format!(
                "DuckDB 1.5.5 count(*): {fun}('{}/') vs read_parquet of the same files{}",
                f.dir, on.title
            ),
            Side::new(&fun, "s", a),
            Side::new("read_parquet", "s", b),
            &format!("{fun} time / read_parquet time"),
            Some(("<=", 1.5)),
            vec!["one warm mount; in-process query time (Python start and LOAD excluded)".into()],
        ),
    )
}

pub fn bench_delta(table: &Path, python: &Path, c: &Common, s3: &OnS3) -> Res<()> {
    let scan = |root: &Path| Ok(format!("delta_scan('{}')", root.join("delta").display()));
    bench_everywhere(
        table,
        python,
        c,
        s3,
        &Format {
            figure: 12,
            dir: "delta",
            title: "Delta",
            read_metadata: &read_metadata,
            exts: &["delta"],
            scan: &scan,
        },
    )
}
