//! Figure 13: `iceberg/`, measured as figure 12 (`delta.rs`, [`bench_format`]). First, on a cold mount (page cache dropped, daemon just started), the
//! time until an Iceberg reader holds the current snapshot's metadata (`version-hint.text`, the
//! metadata file it names, the current snapshot's manifest list and every manifest in it, read
//! whole: the list decoded for the manifests' paths, each manifest checked to be Avro),
//! beside the time until a first full listing of `latest/` on an equally cold mount. Then
//! DuckDB's `count(*)` through `iceberg_scan` against `read_parquet` of the same files
//! (`latest/**/*.parquet`) on one warm mount, alternating.

use std::path::{Path, PathBuf};

use crate::delta::{bench_everywhere, Format, OnS3};
use crate::{Common, Res};

/// The current metadata file of `iceberg/`.
fn current(iceberg: &Path) -> Res<PathBuf> {
    let hint = iceberg.join("metadata/version-hint.text");
    let n = std::fs::read_to_string(&hint).map_err(|e| format!("{}: {e}", hint.display()))?;
    Ok(iceberg.join(format!("metadata/v{}.metadata.json", n.trim())))
}

/// What an Iceberg reader reads of `iceberg/` to plan a scan of the current snapshot (mounted
/// at `mnt`, whose paths the metadata names); the files read.
fn read_metadata(iceberg: &Path) -> Res<usize> {
    let meta = current(iceberg)?;
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    let m: serde_json::Value = serde_json::from_slice(&read(&meta)?).map_err(|e| e.to_string())?;
    let cur = m["current-snapshot-id"].clone();
    let snap = m["snapshots"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["snapshot-id"] == cur))
        .ok_or("no current snapshot")?;
    let list = PathBuf::from(snap["manifest-list"].as_str().ok_or("no manifest list")?);
    let bytes = read(&list)?;
    let mut files = 3;
    for r in apache_avro::Reader::new(&bytes[..]).map_err(|e| e.to_string())? {
        let r = r.map_err(|e| e.to_string())?;
        let apache_avro::types::Value::Record(fields) = r else {
            return Err("a manifest list record that is not a record".into());
        };
        let Some((_, apache_avro::types::Value::String(path))) =
            fields.iter().find(|(n, _)| n == "manifest_path")
        else {
            return Err("a manifest list record without manifest_path".into());
        };
        // Its bytes, as `delta`'s figure reads its checkpoint's: what the reader makes of them
        // (apache-avro's generic decoding of 100,000 entries takes over a second) is the
        // reader's time, not the mount's. The tests decode every manifest.
        let m = read(Path::new(path))?;
        if !m.starts_with(b"Obj\x01") {
            return Err(format!("{path}: not an Avro object container"));
        }
        files += 1;
    }
    Ok(files)
}

pub fn bench_iceberg(table: &Path, python: &Path, c: &Common, s3: &OnS3) -> Res<()> {
    let scan = |root: &Path| {
        Ok(format!(
            "iceberg_scan('{}')",
            current(&root.join("iceberg"))?.display()
        ))
    };
    bench_everywhere(
        table,
        python,
        c,
        s3,
        &Format {
            figure: 13,
            dir: "iceberg",
            title: "Iceberg",
            read_metadata: &read_metadata,
            exts: &["avro", "iceberg"],
            scan: &scan,
        },
    )
}
