//! `hudifs-gen`: write Hudi tables with hudifs's own generator.
//!
//! `hudifs-gen demo DIR` writes the bundled demo table (merge-on-read, table version 9,
//! partitioned by `city`); `--version 6|8|9` and `--cow` pick the variant, `--clock-start-ms`
//! moves the logical clock (default 2026-01-01T00:00:00Z). The same arguments always give the
//! same file names. `hudifs-gen wide DIR --partitions N` writes a table of N partitions (one
//! file group each) with a metadata table, in one bulk commit.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hudifs_core::table::TableType;
use hudifs_core::timeline::State;
use hudifs_testkit::generator::{build_demo, build_wide_table, TableWriter, DEMO_CLOCK_START_MS};

#[derive(Parser)]
#[command(name = "hudifs-gen", version, about = "Write Hudi test tables")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write the demo table: three inserts over three partitions, two updates, (merge-on-read)
    /// a completed compaction, an INSERT_OVERWRITE of one partition, and a last write left in
    /// flight.
    Demo {
        /// Directory to create the table in (must not hold a table yet).
        dir: PathBuf,
        /// Hudi table version: 6 (timeline layout 1), 8 or 9 (layout 2).
        #[arg(long, default_value_t = 9, value_parser = parse_version)]
        version: u32,
        /// Copy-on-write instead of merge-on-read.
        #[arg(long)]
        cow: bool,
        /// Start of the logical clock, in epoch milliseconds (UTC).
        #[arg(long, default_value_t = DEMO_CLOCK_START_MS, allow_negative_numbers = true)]
        clock_start_ms: i64,
    },
    /// Write a wide table: N partitions (`part=00000`, ...) of one file group each, and a
    /// metadata table whose `files` partition lists them, in one bulk commit (every base file
    /// is a hard link to one template Parquet file).
    Wide {
        /// Directory to create the table in (must not hold a table yet).
        dir: PathBuf,
        /// Number of partitions.
        #[arg(long, default_value_t = 5_000)]
        partitions: usize,
        /// Hudi table version: 6 (timeline layout 1), 8 or 9 (layout 2).
        #[arg(long, default_value_t = 9, value_parser = parse_version)]
        version: u32,
        /// Copy-on-write instead of merge-on-read.
        #[arg(long)]
        cow: bool,
        /// Start of the logical clock, in epoch milliseconds (UTC).
        #[arg(long, default_value_t = DEMO_CLOCK_START_MS, allow_negative_numbers = true)]
        clock_start_ms: i64,
    },
}

fn parse_version(s: &str) -> Result<u32, String> {
    match s {
        "6" => Ok(6),
        "8" => Ok(8),
        "9" => Ok(9),
        _ => Err("the generator writes table versions 6, 8 and 9".to_string()),
    }
}

fn state_name(s: State) -> &'static str {
    match s {
        State::Requested => "requested",
        State::Inflight => "inflight",
        State::Completed => "completed",
    }
}

fn summary(w: &TableWriter) {
    let spec = w.spec();
    println!(
        "wrote {} at {} (table version {}, {}, timeline layout {})",
        spec.name,
        w.describe_root(),
        spec.version,
        match spec.table_type {
            TableType::CopyOnWrite => "COPY_ON_WRITE",
            TableType::MergeOnRead => "MERGE_ON_READ",
        },
        w.layout().number()
    );
    for e in w.events() {
        let mut line = format!(
            "  {} {:<13} {}",
            e.instant,
            e.action.name(),
            state_name(e.state)
        );
        if let (Some(c), true) = (&e.completion, w.layout().has_completion_times()) {
            line.push_str(&format!(" at {c}"));
        }
        if let Some(r) = &e.rolled_back_by {
            line.push_str(&format!(" (rolled back by {r})"));
        }
        println!("{line}");
        for f in &e.written {
            println!("      + {f}");
        }
        for f in &e.replaced {
            println!("      x {f} (file group replaced)");
        }
        for f in &e.deleted {
            println!("      - {f}");
        }
    }
}

fn table_type(cow: bool) -> TableType {
    if cow {
        TableType::CopyOnWrite
    } else {
        TableType::MergeOnRead
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Wide {
            dir,
            partitions,
            version,
            cow,
            clock_start_ms,
        } => match build_wide_table(&dir, version, table_type(cow), partitions, clock_start_ms) {
            Ok(w) => {
                let info = w.metadata_table();
                println!(
                    "wrote {} partitions at {} (table version {version}); metadata table base {}, logs {:?}",
                    partitions,
                    w.describe_root(),
                    info.as_ref().map_or("-", |i| i.base_file.as_str()),
                    info.as_ref().map(|i| i.log_files.clone()).unwrap_or_default()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("hudifs-gen: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Demo {
            dir,
            version,
            cow,
            clock_start_ms,
        } => match build_demo(&dir, version, table_type(cow), clock_start_ms) {
            Ok(w) => {
                summary(&w);
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("hudifs-gen: {e}");
                ExitCode::FAILURE
            }
        },
    }
}
