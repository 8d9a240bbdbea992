//! Figure 11: the merged view on an object store: the first read of `merged/latest/` of a
//! merge-on-read table on an S3 server (moto or s3s-fs on 127.0.0.1, behind a proxy adding a
//! fixed latency per request), page caches dropped, against hudi-rs's snapshot `read()` of the
//! same table from the same server plus pyarrow writing it to Parquet (target ≤ 1.0 for both
//! readers):
//!
//! - `s3merged-par`: four files at once, as a query engine reads a dataset;
//! - `s3merged-seq`: one file after another, as `rsync`, `cp -r` or a legacy job copies.
//!
//! The hudifs side is the whole first use: `hudifs mount s3://…` into an empty merge cache, the
//! listing of `merged/latest/` and every file read to its end. The rows of both sides must
//! agree, or the figure fails.

use std::ffi::OsStr;
use std::path::Path;
use std::time::{Duration, Instant};

use hudifs_testkit::s3::store_args;

use crate::merged::{files_below, python_json, read_parallel, Count, HudiRsRead};
use crate::record::{append, median, sides, Record, Side};
use crate::s3list::hudi_rs_options;
use crate::s3server::{serve, S3Table, Served};
use crate::sys::{drop_caches, hudifs_bin, Mount};
use crate::{Common, Res};

/// Files read at once by the parallel reader.
const PARALLEL: usize = 4;

pub fn bench_s3_merged(s3: &S3Table, work: &Path, c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let url = "s3://lake/bench/mor";
    let Served {
        server,
        proxy,
        objects,
    } = serve(s3, url)?;
    let on = server.name();
    let options = hudi_rs_options(&proxy);
    let cache = work.join("merge-cache");
    let out = work.join("hudi-rs.parquet");
    let mut args = store_args(&proxy.endpoint);
    args.extend(["--merge-cache".into(), cache.display().to_string()]);
    let reps = c.reps.clamp(1, 3);
    for &lat in &s3.latency_ms {
        proxy.set_latency(Duration::from_millis(lat));
        for (reader, threads) in [("par", PARALLEL), ("seq", 1)] {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let (mut files, mut rs_rows) = (0, 0);
            let mut phases = Vec::new();
            for rep in 0..reps {
                let order = sides(rep);
                for hudifs_side in order {
                    drop_caches();
                    if hudifs_side {
                        let _ = std::fs::remove_dir_all(&cache);
                        let t = Instant::now();
                        let mnt = Mount::with_env(
                            &hudifs,
                            Path::new(url),
                            &c.mnt,
                            &args,
                            &[("RUST_LOG", "info")],
                        )?;
                        let list = files_below(&mnt.guard.path().join("merged/latest"))?;
                        read_parallel(&list, threads)?;
                        a.push(t.elapsed().as_secs_f64());
                        files = list.len();
                        phases.extend(merge_phases(&mnt.guard.log_text()));
                    } else {
                        let r: HudiRsRead = python_json(
                            &s3.python,
                            &s3.script,
                            &[
                                OsStr::new("read"),
                                OsStr::new(url),
                                out.as_os_str(),
                                OsStr::new(&options),
                            ],
                        )?;
                        b.push(r.seconds);
                        rs_rows = r.rows;
                    }
                }
            }
            // Both sides read the same rows (counted from the cache the last run filled).
            let mnt = Mount::new(&hudifs, Path::new(url), &c.mnt, &args)?;
            let dir = mnt.guard.path().join("merged/latest");
            let count: Count = python_json(
                &s3.python,
                &s3.script,
                &[OsStr::new("count"), dir.as_os_str()],
            )?;
            drop(mnt);
            if count.rows != rs_rows || count.files != files {
                return Err(format!(
                    "merged/latest holds {} rows in {} files, hudi-rs read {rs_rows} rows",
                    count.rows, count.files
                ));
            }
            let how = if threads == 1 {
                "one file after another (cat, as rsync or a legacy job copies)".to_string()
            } else {
                format!("{threads} files at once (as a query engine reads)")
            };
            let r = Record::new(
                11,
                &format!("s3merged-{reader}-{on}-{lat}ms"),
                &format!(
                    "merged/latest/ on S3 ({on}, +{lat} ms/request), {how}: mount + first read \
                     vs hudi-rs read() + pyarrow write_table"
                ),
                Side::new("hudifs", "s", a),
                Side::new("hudi-rs", "s", b),
                "hudifs time / hudi-rs time",
                Some(("<=", 1.0)),
                vec![
                    format!(
                        "{objects} objects on {on} (127.0.0.1) behind a proxy adding {lat} ms \
                         per request; {files} merged files, {rs_rows} rows on both sides; page \
                         caches dropped before each run"
                    ),
                    phase_note(&phases),
                    "hudifs side: wall time of `hudifs mount s3://…` into an empty merge \
                     cache, the listing of merged/latest/ and every file read to its end; \
                     hudi-rs side: in-process time of read() from the same server plus \
                     pyarrow's write_table of its rows"
                        .to_string(),
                ],
            );
            println!(
                "   {reader} +{lat} ms: hudifs {:.3} s, hudi-rs {:.3} s, ratio {:.3}",
                r.a.median, r.b.median, r.ratio
            );
            append(&c.out, &r)?;
        }
    }
    Ok(())
}

/// Each merge's (prepare ms, write ms) from the daemon's log lines
/// (`merged slice … (prepared in P ms) (B bytes, written in W ms)`).
fn merge_phases(log: &str) -> Vec<(f64, f64)> {
    let number_after = |l: &str, key: &str| -> Option<f64> {
        let rest = &l[l.find(key)? + key.len()..];
        rest.split(' ').next()?.parse().ok()
    };
    log.lines()
        .filter(|l| l.contains("merged slice"))
        .filter_map(|l| {
            Some((
                number_after(l, "prepared in ")?,
                number_after(l, "written in ")?,
            ))
        })
        .collect()
}

/// The merges' phases as a report line.
fn phase_note(phases: &[(f64, f64)]) -> String {
    let prepare: Vec<f64> = phases.iter().map(|p| p.0).collect();
    let write: Vec<f64> = phases.iter().map(|p| p.1).collect();
    format!(
        "{} merges: reading the logs (prepare) median {:.0} ms, merging and writing median {:.0} \
         ms a slice",
        phases.len(),
        median(&prepare),
        median(&write)
    )
}
