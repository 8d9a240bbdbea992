//! Figure 3: mount until first full listing vs hudi-rs.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde::Deserialize;

use crate::record::{append, median, sides, Record, Side};
use crate::sys::{find_files, hudifs_bin, Mount};
use crate::{Common, Res};

#[derive(Deserialize)]
struct HudiRsRun {
    seconds: f64,
    build_seconds: f64,
    slices: usize,
}

pub fn bench_mount_list(table: &Path, python: &Path, script: &Path, c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let canon = table
        .canonicalize()
        .map_err(|e| format!("{}: {e}", table.display()))?;
    find_files(&canon)?;
    let (mut a, mut b, mut b_proc, mut b_build) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut n_view, mut n_slices) = (0, 0);
    for rep in 0..c.reps {
        let order = sides(rep);
        for hudifs_side in order {
            if hudifs_side {
                let t = Instant::now();
                let mnt = Mount::new(&hudifs, &canon, &c.mnt, &[])?;
                let (_, n) = find_files(&mnt.latest())?;
                a.push(t.elapsed().as_secs_f64());
                n_view = n;
                drop(mnt);
            } else {
                let t = Instant::now();
                let out = Command::new(python)
                    .arg(script)
                    .arg(&canon)
                    .output()
                    .map_err(|e| format!("{}: {e}", python.display()))?;
                let whole = t.elapsed().as_secs_f64();
                if !out.status.success() {
                    return Err(format!(
                        "hudi-rs refused the table: {}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
                let run: HudiRsRun = serde_json::from_slice(&out.stdout).map_err(|e| {
                    format!(
                        "hudi-rs script output: {e}: {}",
                        String::from_utf8_lossy(&out.stdout)
                    )
                })?;
                b.push(run.seconds);
                b_build.push(run.build_seconds);
                b_proc.push(whole);
                n_slices = run.slices;
            }
        }
    }
    let notes = vec![
        format!("latest/ lists {n_view} files; hudi-rs returns {n_slices} file slices"),
        "hudifs side: wall time of `hudifs mount` (spawn, load, mount live) + `find latest -type f`; \
         hudi-rs side: in-process time of HudiTableBuilder.from_base_uri(t).build() + get_file_slices() \
         (Python start-up and import excluded)"
            .to_string(),
        format!(
            "hudi-rs medians: build() {:.4} s; whole Python process {:.4} s (ratio against it {:.3})",
            median(&b_build),
            median(&b_proc),
            median(&a) / median(&b_proc)
        ),
        "page cache warm for both sides (the table was listed once before)".to_string(),
    ];
    let r = Record::new(
        3,
        "mount-to-listing",
        "Mount until first full listing of latest/ vs hudi-rs get_file_slices()",
        Side::new("hudifs", "s", a),
        Side::new("hudi-rs", "s", b),
        "hudifs time / hudi-rs time",
        Some(("<=", 0.5)),
        notes,
    );
    append(&c.out, &r)
}
