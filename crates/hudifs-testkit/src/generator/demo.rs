//! The bundled demo table (what `hudifs-gen demo` writes).

use std::path::Path;

use super::{rows, rows_with_ids, TableSpec, TableWriter};
use hudifs_core::error::Result;
use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;

/// 2026-01-01T00:00:00Z.
pub const DEMO_CLOCK_START_MS: i64 = 1_767_225_600_000;

/// Build the demo table at `root`: partitioned by `city` (hive-style), with
///
/// 1. three inserts over three partitions (amsterdam + chennai, sao_paulo, a second group in
///    amsterdam),
/// 2. two updates (merge-on-read: log files; copy-on-write: new base file versions),
/// 3. merge-on-read only: a compaction of the updated groups, completed,
/// 4. an INSERT_OVERWRITE replacecommit of `city=chennai`,
/// 5. one last write left in flight (its files on disk, its timeline only requested/inflight).
pub fn build_demo(
    root: &Path,
    version: u32,
    table_type: TableType,
    clock_start_ms: i64,
) -> Result<TableWriter> {
    let kind = match table_type {
        TableType::CopyOnWrite => "cow",
        TableType::MergeOnRead => "mor",
    };
    let spec = TableSpec::new(
        &format!("hudifs_demo_v{version}_{kind}"),
        table_type,
        version,
    )
    .partitioned_by(&["city"], true);
    let mut w = TableWriter::create(root, spec, clock_start_ms)?;
    let write = w.write_action();
    let ams = w.partition_path(&["amsterdam"])?;
    let che = w.partition_path(&["chennai"])?;
    let sao = w.partition_path(&["sao_paulo"])?;

    // 1. Inserts.
    let mut t = w.begin(write)?;
    let a1 = t.insert(&ams, &rows(1, 5))?;
    let c1 = t.insert(&che, &rows(2, 4))?;
    t.complete()?;
    let mut t = w.begin(write)?;
    let s1 = t.insert(&sao, &rows(3, 6))?;
    t.complete()?;
    let mut t = w.begin(write)?;
    let a2 = t.insert(&ams, &rows(4, 3))?;
    t.complete()?;

    // 2. Updates: two rows of a1 and one of s1, then a1 again plus a new row in s1.
    let mut t = w.begin(write)?;
    t.update(&ams, &a1, &rows_with_ids(11, &[1000, 1001]))?;
    t.update(&sao, &s1, &rows_with_ids(12, &[3000]))?;
    t.complete()?;
    let mut t = w.begin(write)?;
    t.update(&ams, &a1, &rows_with_ids(13, &[1001, 1004]))?;
    t.update(&sao, &s1, &rows_with_ids(14, &[3006]))?;
    t.complete()?;

    // 3. Compaction of the groups with logs.
    if table_type == TableType::MergeOnRead {
        let c =
            w.schedule_compaction(&[(ams.as_str(), a1.as_str()), (sao.as_str(), s1.as_str())])?;
        w.run_compaction(&c, true)?;
    }

    // 4. INSERT_OVERWRITE of chennai.
    let mut t = w.begin(Action::ReplaceCommit)?;
    t.replace_group(&che, &c1)?;
    t.insert(&che, &rows(5, 3))?;
    t.complete()?;

    // 5. A write left in flight.
    let mut t = w.begin(write)?;
    t.update(&ams, &a2, &rows_with_ids(15, &[4000]))?;
    t.insert(&sao, &rows(6, 2))?;
    t.abandon();
    Ok(w)
}
