//! `hudifs-bench`: the helper behind `scripts/bench` (README.md, Benchmarks). It writes the large tables
//! with the project's generator, runs the timing loops — both sides of every figure in the same
//! run, interleaved, medians of several repetitions — and appends one JSON record per figure to
//! a results file, from which `report` writes `report.md` and `report.json`.
//!
//! Never run by the test suite; nothing here asserts a timing.

mod delta;
mod find;
mod freshness;
mod gen;
mod iceberg;
mod incremental;
mod memory;
mod merged;
mod mount;
mod read;
mod record;
mod report;
mod s3list;
mod s3mdt;
mod s3merged;
#[cfg(feature = "s3bench")]
mod s3peer;
#[cfg(feature = "s3bench")]
mod s3read;
mod s3server;
mod sys;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

type Res<T> = std::result::Result<T, String>;

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
        /// Bytes of the bloom filter in every base file's footer, as Hudi writes one (about
        /// 430,000 for its defaults); none by default.
        #[arg(long, default_value_t = 0)]
        bloom_filter_bytes: usize,
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
    /// Write the merged-view bench table: a v9 merge-on-read table of at least BYTES bytes of
    /// base files, ROWS_PER_FILE rows each, then UPDATE_PCT % of every file group's rows updated
    /// in one deltacommit's logs.
    GenMor {
        dir: PathBuf,
        #[arg(long)]
        bytes: u64,
        #[arg(long, default_value_t = 500_000)]
        rows_per_file: usize,
        #[arg(long, default_value_t = 10)]
        update_pct: usize,
    },
    /// Figure 12: delta/: a cold mount until a Delta reader has the newest snapshot's metadata
    /// (vs a cold first listing of latest/), and DuckDB's count(*) through delta_scan vs
    /// read_parquet of the same files.
    Delta {
        table: PathBuf,
        /// Python of a virtual environment with duckdb 1.5.5 and duckdb-extension-delta.
        #[arg(long)]
        python: PathBuf,
        #[command(flatten)]
        s3: delta::OnS3,
        #[command(flatten)]
        c: Common,
    },
    /// Figure 13: iceberg/: a cold mount until an Iceberg reader has the current snapshot's
    /// metadata (vs a cold first listing of latest/), and DuckDB's count(*) through
    /// iceberg_scan vs read_parquet of the same files.
    Iceberg {
        table: PathBuf,
        /// Python of a virtual environment with duckdb 1.5.5 and its iceberg and avro
        /// extensions.
        #[arg(long)]
        python: PathBuf,
        #[command(flatten)]
        s3: delta::OnS3,
        #[command(flatten)]
        c: Common,
    },
    /// Figure 6: the merged view: first read of merged/latest/ vs hudi-rs read() + pyarrow
    /// write, a cached second read vs the cache's files, and `ls -lR` over a warm cache; then
    /// the last write's window through merged/incremental/ (vs hudi-rs's incremental read) and
    /// cdc/ (vs merged/as_of/ of the same groups).
    Merged {
        table: PathBuf,
        /// Python of the virtual environment with `hudi` and `pyarrow`.
        #[arg(long)]
        python: PathBuf,
        /// The hudi-rs script (scripts/bench-hudi-rs-read.py).
        #[arg(long)]
        script: PathBuf,
        /// A scratch directory (the merge cache, hudi-rs's output).
        #[arg(long)]
        work: PathBuf,
        #[command(flatten)]
        c: Common,
    },
    /// Figure 7: reads of the big table on an in-process S3 server (s3s-fs), with and without
    /// per-request latency: sequential and Parquet-pattern reads through the mount vs the
    /// client library's ranged GETs, and the daemon's memory with 8 files read at once (built
    /// with the `s3bench` feature).
    S3read {
        table: PathBuf,
        /// The big file, relative to the table root.
        #[arg(long)]
        file: String,
        /// Scratch directory (the server's root, the 8-file table).
        #[arg(long)]
        work: PathBuf,
        /// Bytes of each of the 8 files of the memory figure.
        #[arg(long, default_value_t = 64 << 20)]
        multi_bytes: u64,
        /// Per-request latencies to inject, in milliseconds.
        #[arg(long, value_delimiter = ',', default_value = "0,20")]
        latency_ms: Vec<u64>,
        #[command(flatten)]
        c: Common,
    },
    /// Serve `dir` over S3 with s3s-fs on 127.0.0.1 (a bucket per sub-directory; the test
    /// kit's keys) until killed, after printing `endpoint http://127.0.0.1:PORT`: the second
    /// server of the S3 torture (`scripts/torture … v9-mor-s3s`; built with the `s3bench`
    /// feature).
    S3Serve { dir: PathBuf },
    /// Figure 10: hudifs vs mount-s3 on one S3 server (s3s-fs with ETag listings, run as
    /// MOUNT_S3's peer): sequential throughput, daemon CPU per GiB, a Parquet reader's pattern
    /// (built with the `s3bench` feature).
    S3peer {
        table: PathBuf,
        /// The big file, relative to the table root.
        #[arg(long)]
        file: String,
        /// Scratch directory (the server's root, the peer's mountpoint).
        #[arg(long)]
        work: PathBuf,
        /// The mount-s3 binary (../shared/anchors/build.sh).
        #[arg(long)]
        mount_s3: PathBuf,
        /// The s3s-fs binary that lists ETags (../shared/anchors/build.sh).
        #[arg(long)]
        s3s_fs: PathBuf,
        /// Per-request latencies to inject, in milliseconds.
        #[arg(long, value_delimiter = ',', default_value = "0,20")]
        latency_ms: Vec<u64>,
        #[command(flatten)]
        c: Common,
    },
    /// Figure 9: TABLE (many partitions, with a metadata table) uploaded to a moto server
    /// behind a latency proxy: mount until the first full listing of latest/ from the metadata
    /// table vs from storage, and vs hudi-rs, per latency.
    S3Mdt {
        #[command(flatten)]
        s3: s3server::S3Table,
        #[command(flatten)]
        c: Common,
    },
    /// Figure 8: TABLE uploaded to a moto server (PYTHON has `moto[server]` and `hudi`) behind
    /// a latency proxy: mount until the first full listing of latest/ vs hudi-rs, per latency;
    /// requests per idle poll and per warm find.
    S3List {
        #[command(flatten)]
        s3: s3server::S3Table,
        #[command(flatten)]
        c: Common,
    },
    /// Figure 11: the first read of merged/latest/ of a merge-on-read table on an S3 server,
    /// four files at once and one after another, vs hudi-rs read() from the same server.
    S3Merged {
        #[command(flatten)]
        s3: s3server::S3Table,
        /// A scratch directory (the merge cache, hudi-rs's output).
        #[arg(long)]
        work: PathBuf,
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

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let res = match &cli.command {
        Cmd::GenWide {
            dir,
            files,
            instants,
            partitions,
            version,
            bloom_filter_bytes,
        } => gen::gen_wide(
            dir,
            *files,
            *instants,
            *partitions,
            *version,
            *bloom_filter_bytes,
        ),
        Cmd::GenBig {
            dir,
            bytes,
            version,
        } => gen::gen_big(dir, *bytes, *version),
        Cmd::Read {
            table,
            file,
            modes,
            c,
        } => read::bench_read(table, file, modes, c),
        Cmd::Find { table, c } => find::bench_find(table, c),
        Cmd::Delta {
            table,
            python,
            s3,
            c,
        } => delta::bench_delta(table, python, c, s3),
        Cmd::Iceberg {
            table,
            python,
            s3,
            c,
        } => iceberg::bench_iceberg(table, python, c, s3),
        Cmd::MountList {
            table,
            python,
            script,
            c,
        } => mount::bench_mount_list(table, python, script, c),
        Cmd::Memory { big, tiny, c } => memory::bench_memory(big, tiny, c),
        Cmd::S3List { s3, c } => s3list::bench_s3_list(s3, c),
        Cmd::S3Merged { s3, work, c } => s3merged::bench_s3_merged(s3, work, c),
        Cmd::S3Mdt { s3, c } => s3mdt::bench_s3_mdt(s3, c),
        Cmd::Freshness {
            work,
            files,
            short,
            long,
            poll_ms,
            fast_poll_ms,
            c,
        } => freshness::bench_freshness(work, *files, *short, *long, *poll_ms, *fast_poll_ms, c),
        Cmd::GenMor {
            dir,
            bytes,
            rows_per_file,
            update_pct,
        } => gen::gen_mor(dir, *bytes, *rows_per_file, *update_pct),
        Cmd::Merged {
            table,
            python,
            script,
            work,
            c,
        } => merged::bench_merged(table, python, script, work, c)
            .and_then(|()| incremental::bench_incremental(table, python, script, work, c)),
        #[cfg(feature = "s3bench")]
        Cmd::S3read {
            table,
            file,
            work,
            multi_bytes,
            latency_ms,
            c,
        } => s3read::bench_s3read(table, file, work, *multi_bytes, latency_ms, c),
        #[cfg(feature = "s3bench")]
        Cmd::S3peer {
            table,
            file,
            work,
            mount_s3,
            s3s_fs,
            latency_ms,
            c,
        } => s3peer::bench_s3peer(table, file, work, mount_s3, s3s_fs, latency_ms, c),
        #[cfg(not(feature = "s3bench"))]
        Cmd::S3peer { .. } => Err("built without the s3bench feature: \
            cargo build --release -p hudifs-testkit --features s3bench"
            .into()),
        #[cfg(feature = "s3bench")]
        Cmd::S3Serve { dir } => s3read::serve_forever(dir),
        #[cfg(not(feature = "s3bench"))]
        Cmd::S3Serve { .. } => Err("built without the s3bench feature: \
            cargo build -p hudifs-testkit --features s3bench"
            .into()),
        #[cfg(not(feature = "s3bench"))]
        Cmd::S3read { .. } => Err("built without the s3bench feature: \
            cargo build --release -p hudifs-testkit --features s3bench"
            .into()),
        Cmd::Report {
            results,
            md,
            json,
            header,
        } => report::report(results, md, json, header),
    };
    match res {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hudifs-bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
