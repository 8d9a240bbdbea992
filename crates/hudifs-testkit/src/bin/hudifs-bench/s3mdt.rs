//! Figure 9: a table of many partitions with a metadata table, on a local S3 server (moto or
//! s3s-fs on 127.0.0.1, behind the test kit's latency proxy): mount until the first full listing of
//! latest/ listed from the metadata table (`--listing auto`) vs the same with `--listing
//! storage`, and vs hudi-rs `build()` + `get_file_slices()` (which reads the metadata table of
//! a version 8+ table too), with and without the latency; the requests of each hudifs side.

use std::time::Duration;

use hudifs_testkit::s3::store_args;

use crate::record::{append, median, Record, Side};
use crate::s3list::{first_walk, hudi_rs_options, hudi_rs_slices};
use crate::s3server::{serve, S3Table, Served};
use crate::sys::hudifs_bin;
use crate::{Common, Res};

pub fn bench_s3_mdt(s3: &S3Table, c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let url = "s3://lake/bench/mdt";
    let Served {
        server,
        proxy,
        objects,
    } = serve(s3, url)?;
    let on = server.name();
    let (python, script) = (&s3.python, &s3.script);
    let storage_options = hudi_rs_options(&proxy);
    let mut mdt_args = store_args(&proxy.endpoint);
    mdt_args.extend(["--poll-interval".into(), "3600000".into()]);
    let mut storage_args = mdt_args.clone();
    storage_args.push("--listing=storage".into());
    for &lat in &s3.latency_ms {
        proxy.set_latency(Duration::from_millis(lat));
        let (mut mdt, mut storage, mut hudi_rs) = (Vec::new(), Vec::new(), Vec::new());
        let (mut mdt_live, mut storage_live) = (Vec::new(), Vec::new());
        let (mut mdt_walk, mut storage_walk, mut slices) = (None, None, 0);
        for rep in 0..c.reps {
            // Each side first in turn.
            for side in (0..3).map(|i| (i + rep) % 3) {
                match side {
                    0 => {
                        let w = first_walk(&hudifs, url, &proxy, &mdt_args, c)?;
                        mdt.push(w.seconds);
                        mdt_live.push(w.live);
                        mdt_walk = Some(w);
                    }
                    1 => {
                        let w = first_walk(&hudifs, url, &proxy, &storage_args, c)?;
                        storage.push(w.seconds);
                        storage_live.push(w.live);
                        storage_walk = Some(w);
                    }
                    _ => {
                        let run = hudi_rs_slices(python, script, url, &storage_options)?;
                        hudi_rs.push(run.seconds);
                        slices = run.slices;
                    }
                }
            }
        }
        let (Some(m), Some(s)) = (mdt_walk, storage_walk) else {
            return Err("no repetition ran".into());
        };
        if m.files != s.files {
            return Err(format!(
                "latest/ lists {} files from the metadata table, {} from storage",
                m.files, s.files
            ));
        }
        let notes = vec![
            format!(
                "{objects} objects on {on} (127.0.0.1) behind a proxy adding {lat} ms per \
                 request; latest/ lists {} files, hudi-rs returns {slices} file slices",
                m.files
            ),
            format!(
                "requests from mount to the end of the first find: metadata table {} ({}), \
                 storage {} ({})",
                m.request_count, m.requests, s.request_count, s.requests
            ),
            format!(
                "mount live (command returned) after {:.3} s (metadata table) and {:.3} s \
                 (storage), medians; the rest of each side is the `find` of latest/ ({} files)",
                median(&mdt_live),
                median(&storage_live),
                m.files
            ),
            "hudifs sides: wall time of `hudifs mount s3://…` (spawn, store check, load, mount \
             live) + `find latest -type f`, with --listing auto (the metadata table) and \
             --listing storage; hudi-rs side: in-process time of build() + get_file_slices()"
                .to_string(),
        ];
        let mut suffix = if on == "moto" {
            String::new()
        } else {
            format!("-{on}")
        };
        if lat != 0 {
            suffix.push_str(&format!("-{lat}ms"));
        }
        for (id, title, b, target) in [
            (
                format!("s3mdt{suffix}"),
                format!(
                    "S3 table with a metadata table ({on}, +{lat} ms/request): first listing \
                     from the metadata table vs from storage"
                ),
                Side::new("hudifs --listing storage", "s", storage.clone()),
                0.1,
            ),
            (
                format!("s3mdt-hudi-rs{suffix}"),
                format!(
                    "S3 table with a metadata table ({on}, +{lat} ms/request): mount until \
                     first full listing of latest/ vs hudi-rs get_file_slices()"
                ),
                Side::new("hudi-rs", "s", hudi_rs.clone()),
                0.5,
            ),
        ] {
            let r = Record::new(
                9,
                &id,
                &title,
                Side::new("hudifs (metadata table)", "s", mdt.clone()),
                b,
                "metadata-table time / other time",
                Some(("<=", target)),
                notes.clone(),
            );
            println!(
                "   +{lat} ms {id}: {:.3} s vs {:.3} s, ratio {:.3}",
                r.a.median, r.b.median, r.ratio
            );
            append(&c.out, &r)?;
        }
    }
    Ok(())
}
