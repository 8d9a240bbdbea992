//! A first performance figure for the merged view (issue #11's target: the first full read of
//! `merged/latest/` vs hudi-rs `read()` of the same snapshot plus pyarrow writing it to Parquet).
//!
//! ```sh
//! cargo run --release -p hudifs-merge --example merge_bench -- gen  TABLE ROWS FILES UPDATE_PCT
//! cargo run --release -p hudifs-merge --example merge_bench -- merge TABLE OUT [THREADS]
//! ```
//!
//! `gen` writes a v9 merge-on-read table with the project's generator: FILES file groups of
//! ROWS/FILES rows each (one insert), then one deltacommit updating UPDATE_PCT % of every
//! group's rows into a log file. `merge` merges every slice of `latest/` into OUT (THREADS
//! slices at a time) and prints the seconds it took.

use std::path::Path;
use std::time::Instant;

use std::sync::Arc;

use hudifs_core::snapshot::Snapshot;
use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_core::viewkey::ViewKey;
use hudifs_merge::{merge_slice, MergeConfig, MergeOptions};
use hudifs_storage::LocalStore;
use hudifs_testkit::generator::{rows_with_ids, TableSpec, TableWriter};

fn gen(root: &Path, rows: usize, files: usize, pct: usize) {
    let spec =
        TableSpec::new("bench_mor", TableType::MergeOnRead, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let per = rows / files;
    let mut groups = Vec::new();
    for f in 0..files {
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        let ids: Vec<i64> = (0..per as i64).map(|i| (f * per) as i64 + i).collect();
        let city = format!("city=c{}", f % 4);
        let id = t.insert(&city, &rows_with_ids(f as u64 + 1, &ids)).unwrap();
        t.complete().unwrap();
        groups.push((city, id, ids));
        eprintln!("base file {f} of {files}");
    }
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    for (i, (p, f, ids)) in groups.iter().enumerate() {
        let step = 100 / pct.max(1);
        let upd: Vec<i64> = ids.iter().copied().step_by(step).collect();
        t.update(p, f, &rows_with_ids(1000 + i as u64, &upd))
            .unwrap();
    }
    t.complete().unwrap();
}

fn merge(root: &Path, out: &Path, threads: usize) {
    let started = Instant::now();
    let store = LocalStore::new(root).unwrap();
    let snap = Snapshot::open(Arc::new(store.clone())).unwrap();
    let plan = snap.plan(&ViewKey::Latest, false).unwrap();
    let view = snap.resolve(&ViewKey::Latest, false).unwrap();
    let t = plan.t.as_ref().map(|t| t.to_string()).unwrap_or_default();
    let cfg = MergeConfig::from_properties(&snap.cfg.properties).unwrap();
    let vis = hudifs_merge::snapshot_visibility(snap.timeline(), &t);
    let slices = hudifs_merge::slices_of_view(&view.files);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let rows = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(vs) = slices.get(i) else { break };
                let dir = out.join(&vs.slice.partition);
                std::fs::create_dir_all(&dir).unwrap();
                let f = std::fs::File::create(dir.join(vs.file_name())).unwrap();
                let stats = merge_slice(
                    &store,
                    &cfg,
                    &vs.slice,
                    &vis,
                    &MergeOptions::default(),
                    std::io::BufWriter::with_capacity(1 << 20, f),
                )
                .unwrap()
                .expect("every slice has a log");
                rows.fetch_add(stats.rows, std::sync::atomic::Ordering::Relaxed);
            });
        }
    });
    println!(
        "merged {} slices, {} rows in {:.2} s",
        slices.len(),
        rows.into_inner(),
        started.elapsed().as_secs_f64()
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("gen") => gen(
            Path::new(&args[2]),
            args[3].parse().unwrap(),
            args[4].parse().unwrap(),
            args[5].parse().unwrap(),
        ),
        Some("merge") => merge(
            Path::new(&args[2]),
            Path::new(&args[3]),
            args.get(4).and_then(|t| t.parse().ok()).unwrap_or(2),
        ),
        _ => eprintln!(
            "usage: merge_bench gen TABLE ROWS FILES UPDATE_PCT | merge TABLE OUT [THREADS]"
        ),
    }
}
