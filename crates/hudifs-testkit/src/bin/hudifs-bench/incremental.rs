//! Figure 6b: incremental pulls on the merged view's table (issue #18), for the window of its
//! last write (an update of every file slice):
//!
//! - `incr-first`: the first read of `merged/incremental/<window>/` (fresh mount, empty merge
//!   cache) vs hudi-rs's incremental read of the same window plus pyarrow writing it to
//!   Parquet (target ≤ 1.0). The rows of both sides must agree, or the figure fails.
//! - `cdc-first`: the first read of `cdc/<window>/` vs the first read of
//!   `merged/as_of/<write>/` of the same file groups, both on a fresh mount over an empty cache
//!   (target ≤ 2.0: a feed compares the state before the write with the state after it).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Deserialize;

use crate::merged::{files_below, python_json, read_parallel};
use crate::record::{append, Record, Side};
use crate::sys::{hudifs_bin, Mount};
use crate::{Common, Res};

#[derive(Deserialize)]
struct HudiRsIncr {
    seconds: f64,
    rows: u64,
}

#[derive(Deserialize)]
struct Count {
    rows: u64,
}

pub fn bench_incremental(
    table: &Path,
    python: &Path,
    script: &Path,
    work: &Path,
    c: &Common,
) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let table = table
        .canonicalize()
        .map_err(|e| format!("{}: {e}", table.display()))?;
    let cache = work.join("incr-cache");
    let out = work.join("hudi-rs-incr.parquet");
    let cache_arg = |d: &Path| vec!["--merge-cache".to_string(), d.display().to_string()];
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    // The window of the last write: the last one incremental/ lists.
    let window = {
        let mnt = Mount::new(&hudifs, &table, &c.mnt, &cache_arg(&cache))?;
        let mut names: Vec<String> = std::fs::read_dir(mnt.guard.path().join("incremental"))
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
            .collect();
        names.sort();
        names.pop().ok_or("the table lists no window")?
    };
    let (start, end) = window.split_once("..").ok_or("not a window")?;
    let reps = c.reps.clamp(1, 3);
    let fresh = |dir: &str| -> Res<(f64, Vec<PathBuf>, usize)> {
        let _ = std::fs::remove_dir_all(&cache);
        let mnt = Mount::new(&hudifs, &table, &c.mnt, &cache_arg(&cache))?;
        let t = Instant::now();
        let files = files_below(&mnt.guard.path().join(dir))?;
        read_parallel(&files, threads)?;
        let secs = t.elapsed().as_secs_f64();
        let n = files.len();
        Ok((secs, files, n))
    };

    // incr-first: hudifs vs hudi-rs incremental read + pyarrow write_table.
    let (mut a, mut b) = (vec![], vec![]);
    let mut rs_rows = 0;
    let mut groups = 0;
    for rep in 0..reps {
        for hudifs_side in [rep % 2 == 0, rep % 2 != 0] {
            if hudifs_side {
                let (secs, _, n) = fresh(&format!("merged/incremental/{window}"))?;
                a.push(secs);
                groups = n;
            } else {
                let r: HudiRsIncr = python_json(
                    python,
                    script,
                    &[
                        OsStr::new("incr"),
                        table.as_os_str(),
                        OsStr::new(start),
                        OsStr::new(end),
                        out.as_os_str(),
                    ],
                )?;
                b.push(r.seconds);
                rs_rows = r.rows;
            }
        }
    }
    // The rows must be the window's records as merged/as_of/<write>/ holds them (the table
    // orders by event time: an update older than the stored record loses, SEMANTICS §10.9).
    let mnt = Mount::new(&hudifs, &table, &c.mnt, &cache_arg(&cache))?;
    let dir = mnt.guard.path().join("merged/incremental").join(&window);
    let count: Count = python_json(python, script, &[OsStr::new("count"), dir.as_os_str()])?;
    let write = std::fs::read_dir(&dir)
        .ok()
        .and_then(|_| files_below(&dir).ok())
        .and_then(|f| {
            f.first()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().to_string())
        })
        .and_then(|n| {
            n.strip_suffix(".merged.parquet")
                .and_then(|n| n.rsplit('_').next())
                .map(String::from)
        })
        .ok_or("merged/incremental/ lists no file to name the write")?;
    let as_of = mnt.guard.path().join("merged/as_of").join(&write);
    let want: Count = python_json(
        python,
        script,
        &[OsStr::new("count"), as_of.as_os_str(), OsStr::new(&write)],
    )?;
    drop(mnt);
    if count.rows != want.rows {
        return Err(format!(
            "merged/incremental/{window} holds {} rows, merged/as_of/{write} {} of that write",
            count.rows, want.rows
        ));
    }
    append(
        &c.out,
        &Record::new(
            6,
            "incr-first",
            "First read of merged/incremental/<last write's window>/ vs hudi-rs incremental read + pyarrow write",
            Side::new("hudifs", "s", a),
            Side::new("hudi-rs", "s", b),
            "hudifs time / hudi-rs time",
            Some(("<=", 1.0)),
            vec![
                format!(
                    "window {window}: {groups} files, {} rows (the write's records that won under \
                     event-time ordering, as merged/as_of/ holds them); hudi-rs returned \
                     {rs_rows} (it filters before merging, SEMANTICS.md §10.9)",
                    count.rows
                ),
                "hudifs: fresh mount, empty merge cache, every file read to its end by the \
                 machine's cores; hudi-rs: in-process build() + incremental read() + pyarrow \
                 write_table() (Python start-up excluded)"
                    .into(),
            ],
        ),
    )?;

    // cdc-first: the feed vs merged/as_of/<write>/ of the same groups.
    let (mut a, mut b) = (vec![], vec![]);
    let mut feeds = 0;
    for rep in 0..reps {
        for cdc_side in [rep % 2 == 0, rep % 2 != 0] {
            if cdc_side {
                let (secs, files, n) = fresh(&format!("cdc/{window}"))?;
                a.push(secs);
                feeds = n;
                if files.is_empty() {
                    return Err(format!("cdc/{window} lists nothing"));
                }
            } else {
                // The write's requested time: the feed files' names end `_<first>_<last>`.
                let _ = std::fs::remove_dir_all(&cache);
                let mnt = Mount::new(&hudifs, &table, &c.mnt, &cache_arg(&cache))?;
                let feeds_listed = files_below(&mnt.guard.path().join("cdc").join(&window))?;
                let names: Vec<String> = feeds_listed
                    .iter()
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().to_string()))
                    .collect();
                let write = names
                    .first()
                    .and_then(|n| n.strip_suffix(".cdc.parquet"))
                    .and_then(|n| n.rsplit('_').next())
                    .ok_or("no feed file to name the write")?
                    .to_string();
                let ids: Vec<String> = names
                    .iter()
                    .filter_map(|n| n.split('_').next().map(String::from))
                    .collect();
                let t = Instant::now();
                let files: Vec<PathBuf> =
                    files_below(&mnt.guard.path().join("merged/as_of").join(&write))?
                        .into_iter()
                        .filter(|p| {
                            let n = p.file_name().map(|n| n.to_string_lossy().to_string());
                            n.is_some_and(|n| ids.iter().any(|id| n.starts_with(id.as_str())))
                        })
                        .collect();
                read_parallel(&files, threads)?;
                b.push(t.elapsed().as_secs_f64());
            }
        }
    }
    let _ = std::fs::remove_dir_all(&cache);
    append(
        &c.out,
        &Record::new(
            6,
            "cdc-first",
            "First read of cdc/<last write's window>/ vs merged/as_of/<write>/ of the same groups",
            Side::new("cdc", "s", a),
            Side::new("as_of", "s", b),
            "cdc time / merged/as_of time",
            Some(("<=", 2.0)),
            vec![format!(
                "{feeds} feed files; both sides: a fresh mount over an empty merge cache, every \
                 file read to its end by the machine's cores"
            )],
        ),
    )
}
