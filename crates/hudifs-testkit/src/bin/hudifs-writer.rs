//! `hudifs-writer`: a live Hudi writer to test readers against.
//!
//! Creates the table (the directory may be missing; it must not hold a table yet), then runs
//! a seeded loop of Hudi operations for a bounded time — inserts, updates, slow writes that stay
//! in flight, crashed writes, rollbacks, cleans, insert-overwrite replacecommits, compactions
//! (merge-on-read) and savepoints — following the requested → inflight → completed protocol,
//! with wall-clock instants. The same seed gives the same sequence of operations and the same
//! data; `--log` records every event as JSON lines (see `hudifs_testkit::generator::sim`).
//!
//! `--table` is a directory, or an object-store URL (`s3://bucket/prefix`, reached with
//! `--endpoint-url`, `--region`, `--force-path-style`, `--allow-http` and the usual
//! credentials): the table is then written through the same storage seam, PUT by PUT.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use hudifs_core::table::TableType;
use hudifs_testkit::generator::sim::{Sim, SimOptions};

#[derive(Parser)]
#[command(
    name = "hudifs-writer",
    about = "Write to a Hudi table like Hudi's writers do, for a bounded time"
)]
struct Cli {
    /// Directory of the table to create (made if missing; must not hold a table yet), or an
    /// object-store URL (s3://bucket/prefix).
    #[arg(long)]
    table: PathBuf,
    /// S3-compatible endpoint (object-store tables).
    #[arg(long)]
    endpoint_url: Option<String>,
    /// Region of the bucket (object-store tables).
    #[arg(long)]
    region: Option<String>,
    /// Path-style requests (object-store tables).
    #[arg(long)]
    force_path_style: bool,
    /// Allow plain HTTP (object-store tables).
    #[arg(long)]
    allow_http: bool,
    /// Seed of the operation sequence and the data.
    #[arg(long)]
    seed: u64,
    /// Stop starting operations after this many milliseconds.
    #[arg(long)]
    duration_ms: u64,
    /// Hudi table version: 6 (timeline layout 1), 8 or 9 (layout 2).
    #[arg(long, default_value_t = 9, value_parser = parse_version)]
    version: u32,
    /// Copy-on-write instead of merge-on-read.
    #[arg(long)]
    cow: bool,
    /// Operations per second (0: as fast as possible).
    #[arg(long, default_value_t = 5.0)]
    ops_per_sec: f64,
    /// JSON-lines event log (flushed per line).
    #[arg(long)]
    log: Option<PathBuf>,
    /// Stop after this many operations.
    #[arg(long)]
    max_ops: Option<u64>,
    /// Longest time a slow write stays in flight, in milliseconds.
    #[arg(long, default_value_t = 1500)]
    slow_ms: u64,
    /// Use a logical clock starting at this epoch millisecond instead of the wall clock
    /// (then the same seed gives byte-identical tables).
    #[arg(long, allow_negative_numbers = true)]
    logical_clock_ms: Option<i64>,
    /// Also archive old instants now and then, as Hudi's archiver does.
    #[arg(long)]
    archive: bool,
}

fn parse_version(s: &str) -> Result<u32, String> {
    match s {
        "6" => Ok(6),
        "8" => Ok(8),
        "9" => Ok(9),
        _ => Err("the writer writes table versions 6, 8 and 9".to_string()),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !(cli.ops_per_sec >= 0.0 && cli.ops_per_sec.is_finite()) {
        eprintln!("hudifs-writer: --ops-per-sec must be a non-negative number");
        return ExitCode::from(2);
    }
    let log: Box<dyn std::io::Write> = match &cli.log {
        Some(p) => match std::fs::File::create(p) {
            Ok(f) => Box::new(f),
            Err(e) => {
                eprintln!("hudifs-writer: cannot create the log {}: {e}", p.display());
                return ExitCode::FAILURE;
            }
        },
        None => Box::new(std::io::sink()),
    };
    let opts = SimOptions {
        seed: cli.seed,
        version: cli.version,
        table_type: if cli.cow {
            TableType::CopyOnWrite
        } else {
            TableType::MergeOnRead
        },
        duration: Duration::from_millis(cli.duration_ms),
        max_ops: cli.max_ops,
        ops_per_sec: cli.ops_per_sec,
        slow_ms: cli.slow_ms,
        logical_clock_ms: cli.logical_clock_ms,
        archive: cli.archive,
    };
    let table = cli
        .table
        .to_str()
        .filter(|t| hudifs_objstore::is_store_url(t));
    let sim = match table {
        Some(url) => {
            let store_opts = hudifs_objstore::StoreOptions {
                endpoint_url: cli.endpoint_url.clone(),
                region: cli.region.clone(),
                force_path_style: cli.force_path_style,
                allow_http: cli.allow_http,
                ..Default::default()
            };
            hudifs_objstore::StoreUrl::parse(url)
                .map_err(hudifs_core::error::Error::Usage)
                .and_then(|u| {
                    hudifs_objstore::ObjectStorage::new(u, &store_opts)
                        .map_err(|e| hudifs_core::error::Error::io(url, e))
                })
                .and_then(|store| Sim::create_in(std::sync::Arc::new(store), opts, log))
        }
        None => Sim::create(&cli.table, opts, log),
    };
    let result = sim.and_then(|mut sim| {
        sim.run()?;
        let counts: Vec<String> = sim
            .counts()
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        println!("hudifs-writer: {}", counts.join(", "));
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hudifs-writer: {e}");
            ExitCode::from(if matches!(e, hudifs_core::error::Error::Usage(_)) {
                2
            } else {
                1
            })
        }
    }
}
