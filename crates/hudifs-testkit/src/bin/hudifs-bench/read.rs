//! Figure 1: sequential read.

use std::path::Path;

use crate::record::{append, sides, Record, Side};
use crate::sys::{drop_caches, hudifs_bin, hudifs_supports, mib_per_s, read_file, Mount};
use crate::{Common, Res};

pub fn bench_read(table: &Path, file: &str, modes: &[String], c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let direct = table.join(file);
    let size = std::fs::metadata(&direct)
        .map_err(|e| format!("{}: {e}", direct.display()))?
        .len();
    let can_drop = drop_caches();
    for mode in modes {
        let mut extra = Vec::new();
        let mut notes = vec![format!(
            "file {} ({:.0} MiB), read with 1 MiB read() calls (as dd bs=1M)",
            file,
            size as f64 / (1 << 20) as f64
        )];
        let target = match mode.as_str() {
            "default" => {
                notes.push(
                    "default mount: the 0.95 target assumes kernel FUSE passthrough".to_string(),
                );
                0.95
            }
            "no-passthrough" => {
                if !hudifs_supports(&hudifs, "--no-passthrough") {
                    println!("  hudifs mount has no --no-passthrough yet: skipped");
                    continue;
                }
                extra.push("--no-passthrough".to_string());
                0.7
            }
            m => return Err(format!("unknown mount mode {m}")),
        };
        let mnt = Mount::new(&hudifs, table, &c.mnt, &extra)?;
        let view = mnt.latest().join(file);
        for cold in [true, false] {
            if cold && !can_drop {
                notes.push("cannot drop the page cache (not root?): no cold figure".into());
                continue;
            }
            let (mut a, mut b) = (Vec::new(), Vec::new());
            if !cold {
                read_file(&direct)?;
                read_file(&view)?;
            }
            for rep in 0..c.reps {
                // Alternate which side goes first.
                let order = sides(rep);
                for through_view in order {
                    if cold {
                        drop_caches();
                    }
                    let p = if through_view { &view } else { &direct };
                    let (secs, bytes) = read_file(p)?;
                    if bytes != size {
                        return Err(format!("{} gave {bytes} bytes, not {size}", p.display()));
                    }
                    let v = mib_per_s(bytes, secs);
                    if through_view {
                        a.push(v)
                    } else {
                        b.push(v)
                    }
                }
            }
            let cache = if cold { "cold" } else { "warm" };
            let r = Record::new(
                1,
                &format!("read-{cache}-{mode}"),
                &format!("Sequential read, {cache} page cache, {mode} mount: view vs direct"),
                Side::new("view", "MiB/s", a),
                Side::new("direct", "MiB/s", b),
                "view throughput / direct throughput",
                Some((">=", target)),
                notes.clone(),
            );
            append(&c.out, &r)?;
        }
    }
    if !modes.iter().any(|m| m == "no-passthrough") || !hudifs_supports(&hudifs, "--no-passthrough")
    {
        println!("  note: `hudifs mount --help` lists no --no-passthrough: default mount only");
    }
    Ok(())
}
