//! The bench tables, written with the project's generator: wide tables of many small files
//! (`gen-wide`) and a table of one big file (`gen-big`).

use std::path::Path;
use std::time::Instant;

use hudifs_core::table::TableType;
use hudifs_testkit::generator::{TableSpec, TableWriter};

use crate::Res;

/// 2026-01-01T00:00:00Z: the generator's logical clock start for every bench table.
const CLOCK_START_MS: i64 = 1_767_225_600_000;

pub fn partition_name(i: usize) -> String {
    format!("part={i:05}")
}

/// A table of `files` base files over `instants` commits and `partitions` partitions: file j
/// (in write order) goes to partition j mod `partitions`.
pub fn write_wide(
    dir: &Path,
    files: usize,
    instants: usize,
    partitions: usize,
    version: u32,
    bloom_filter_bytes: usize,
) -> Res<TableWriter> {
    if instants == 0 || partitions == 0 {
        return Err("instants and partitions must be at least 1".into());
    }
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("bench")
        .replace(|c: char| !c.is_ascii_alphanumeric(), "_");
    let spec = TableSpec::new(&name, TableType::CopyOnWrite, version)
        .partitioned_by(&["part"], true)
        .with_bloom_filter(bloom_filter_bytes);
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

pub fn gen_wide(
    dir: &Path,
    files: usize,
    instants: usize,
    partitions: usize,
    version: u32,
    bloom_filter_bytes: usize,
) -> Res<()> {
    let t = Instant::now();
    write_wide(
        dir,
        files,
        instants,
        partitions,
        version,
        bloom_filter_bytes,
    )?;
    println!(
        "wrote {} ({files} files, {instants} instants, {partitions} partitions) in {:.1} s",
        dir.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

pub fn gen_big(dir: &Path, bytes: u64, version: u32) -> Res<()> {
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

/// The merged-view bench table (figure 6): a v9 merge-on-read table of base files of
/// `rows_per_file` rows each (one deltacommit per file, four partitions) until they hold at
/// least `bytes` bytes, then one deltacommit updating `update_pct` % of every file group's rows
/// into a log file. Prints the base bytes, file groups and rows.
pub fn gen_mor(dir: &Path, bytes: u64, rows_per_file: usize, update_pct: usize) -> Res<()> {
    use hudifs_core::timeline::Action;
    use hudifs_testkit::generator::rows_with_ids;
    if rows_per_file == 0 || !(1..=100).contains(&update_pct) {
        return Err("rows per file must be at least 1 and the update share 1 to 100 %".into());
    }
    let started = Instant::now();
    let spec =
        TableSpec::new("bench_mor", TableType::MergeOnRead, 9).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(dir, spec, CLOCK_START_MS).map_err(|e| e.to_string())?;
    let mut groups = Vec::new();
    let mut written = 0u64;
    while written < bytes {
        let f = groups.len();
        let mut t = w.begin(Action::DeltaCommit).map_err(|e| e.to_string())?;
        let first = (f * rows_per_file) as i64;
        let ids: Vec<i64> = (first..first + rows_per_file as i64).collect();
        let city = format!("city=c{}", f % 4);
        let id = t
            .insert(&city, &rows_with_ids(f as u64 + 1, &ids))
            .map_err(|e| e.to_string())?;
        t.complete().map_err(|e| e.to_string())?;
        written = base_bytes(dir)?;
        groups.push((city, id, ids));
    }
    let step = 100 / update_pct;
    let mut t = w.begin(Action::DeltaCommit).map_err(|e| e.to_string())?;
    for (i, (p, f, ids)) in groups.iter().enumerate() {
        let upd: Vec<i64> = ids.iter().copied().step_by(step).collect();
        t.update(p, f, &rows_with_ids(1000 + i as u64, &upd))
            .map_err(|e| e.to_string())?;
    }
    t.complete().map_err(|e| e.to_string())?;
    println!(
        "wrote {}: {} MiB of base files in {} file groups, {} rows, 1 in {step} updated, in {:.1} s",
        dir.display(),
        written >> 20,
        groups.len(),
        groups.len() * rows_per_file,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The bytes of the Parquet base files under the partitions of `dir`.
fn base_bytes(dir: &Path) -> Res<u64> {
    let mut total = 0;
    for p in std::fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        let p = p.map_err(|e| e.to_string())?.path();
        if !p.is_dir() || p.file_name().is_some_and(|n| n == ".hoodie") {
            continue;
        }
        for f in std::fs::read_dir(&p).map_err(|e| format!("{}: {e}", p.display()))? {
            let f = f.map_err(|e| e.to_string())?;
            if f.file_name().to_string_lossy().ends_with(".parquet") {
                total += f.metadata().map_err(|e| e.to_string())?.len();
            }
        }
    }
    Ok(total)
}
