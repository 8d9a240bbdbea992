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

pub fn gen_wide(
    dir: &Path,
    files: usize,
    instants: usize,
    partitions: usize,
    version: u32,
) -> Res<()> {
    let t = Instant::now();
    write_wide(dir, files, instants, partitions, version)?;
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
