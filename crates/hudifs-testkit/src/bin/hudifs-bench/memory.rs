//! Figure 4: memory.

use std::path::Path;

use crate::record::{append, median, Record, Side};
use crate::sys::{find_files, hudifs_bin, status_bytes, Mount};
use crate::{Common, Res};

pub fn bench_memory(big: &Path, tiny: &Path, c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let (mut per_file, mut big_rss, mut tiny_rss, mut big_hwm) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut files = 0;
    for _ in 0..c.reps {
        let mnt = Mount::new(&hudifs, tiny, &c.mnt, &[])?;
        find_files(&mnt.latest())?;
        let t = status_bytes(mnt.pid, "VmRSS:")?;
        drop(mnt);
        let mnt = Mount::new(&hudifs, big, &c.mnt, &[])?;
        let (_, n) = find_files(&mnt.latest())?;
        let b = status_bytes(mnt.pid, "VmRSS:")?;
        big_hwm.push(status_bytes(mnt.pid, "VmHWM:")?);
        drop(mnt);
        files = n;
        per_file.push((b - t) / n.max(1) as f64);
        big_rss.push(b);
        tiny_rss.push(t);
    }
    let mib = |v: f64| v / (1 << 20) as f64;
    let notes = vec![
        format!(
            "{files} visible files; daemon VmRSS after `find latest -type f`: {:.1} MiB (big), {:.1} MiB (tiny); peak VmHWM on big {:.1} MiB",
            mib(median(&big_rss)),
            mib(median(&tiny_rss)),
            mib(median(&big_hwm))
        ),
        "(RSS big - RSS tiny) / visible files, one fresh mount per repetition".to_string(),
    ];
    let r = Record::new(
        4,
        "memory-per-file",
        "Daemon resident memory per visible file",
        Side::new("hudifs", "bytes/file", per_file),
        Side::new("target", "bytes/file", vec![200.0]),
        "bytes per file / 200",
        Some(("<=", 1.0)),
        notes,
    );
    append(&c.out, &r)
}
