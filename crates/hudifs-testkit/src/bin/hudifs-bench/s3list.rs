//! Figure 8: a table on a local S3 server (moto on 127.0.0.1, behind the test kit's proxy,
//! which adds a per-request latency standing in for a region and counts requests): mount until
//! the first full listing of latest/ vs hudi-rs `build()` + `get_file_slices()` on the same S3
//! table, with and without the latency; and the requests of an idle poll and of a warm
//! `find latest`, printed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use hudifs_testkit::s3::{store_args, FaultProxy, KEYS};
use serde::Deserialize;

use crate::record::{append, median, sides, Record, Side};
use crate::s3server::{serve, S3Table, Served};
use crate::sys::{find_files, hudifs_bin, Mount};
use crate::{Common, Res};

#[derive(Deserialize)]
pub struct HudiRsRun {
    pub seconds: f64,
    pub slices: usize,
}

pub fn bench_s3_list(s3: &S3Table, c: &Common) -> Res<()> {
    let hudifs = hudifs_bin(c);
    let url = "s3://lake/bench/t";
    let Served {
        server,
        proxy,
        objects,
    } = serve(s3, url)?;
    let on = server.name();
    let (python, script) = (&s3.python, &s3.script);
    let storage_options = hudi_rs_options(&proxy);
    let requests = request_counts(&hudifs, url, &proxy, c)?;
    let mut args = store_args(&proxy.endpoint);
    // The figure measures the listing; polls are counted separately (above).
    args.extend(["--poll-interval".into(), "3600000".into()]);
    for &lat in &s3.latency_ms {
        proxy.set_latency(Duration::from_millis(lat));
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let (mut n_view, mut n_slices, mut mount_requests) = (0, 0, String::new());
        let mut mount_live = Vec::new();
        for rep in 0..c.reps {
            let order = sides(rep);
            for hudifs_side in order {
                if hudifs_side {
                    let w = first_walk(&hudifs, url, &proxy, &args, c)?;
                    a.push(w.seconds);
                    mount_live.push(w.live);
                    mount_requests = w.requests;
                    n_view = w.files;
                } else {
                    let run = hudi_rs_slices(python, script, url, &storage_options)?;
                    b.push(run.seconds);
                    n_slices = run.slices;
                }
            }
        }
        let mut notes = vec![
            format!(
                "{objects} objects on {on} (127.0.0.1) behind a proxy adding {lat} ms per request; \
                 latest/ lists {n_view} files, hudi-rs returns {n_slices} file slices"
            ),
            format!("hudifs requests from mount to the end of the first find: {mount_requests}"),
            format!(
                "hudifs mount live (command returned) after {:.3} s of the {:.3} s (medians)",
                median(&mount_live),
                median(&a)
            ),
            "hudifs side: wall time of `hudifs mount s3://…` (spawn, store check, load, mount \
             live) + `find latest -type f`; hudi-rs side: in-process time of build() + \
             get_file_slices() with aws_endpoint_url/aws_allow_http/keys/region"
                .to_string(),
        ];
        notes.extend(requests.iter().cloned());
        let base = if on == "moto" {
            "s3list".to_string()
        } else {
            format!("s3list-{on}")
        };
        let id = if lat == 0 {
            base
        } else {
            format!("{base}-{lat}ms")
        };
        let r = Record::new(
            8,
            &id,
            &format!(
                "S3 table ({on}, +{lat} ms/request): mount until first full listing of latest/ vs \
                 hudi-rs get_file_slices()"
            ),
            Side::new("hudifs", "s", a),
            Side::new("hudi-rs", "s", b),
            "hudifs time / hudi-rs time",
            Some(("<=", 0.5)),
            notes,
        );
        println!(
            "   +{lat} ms: hudifs {:.3} s, hudi-rs {:.3} s, ratio {:.3}",
            r.a.median, r.b.median, r.ratio
        );
        append(&c.out, &r)?;
    }
    Ok(())
}

/// Requests of an idle poll and of a warm `find latest` (no latency), as two report lines.
fn request_counts(hudifs: &Path, url: &str, proxy: &FaultProxy, c: &Common) -> Res<Vec<String>> {
    let mut args = store_args(&proxy.endpoint);
    args.extend(["--poll-interval".into(), "200".into()]);
    let mnt = Mount::new(hudifs, Path::new(url), &c.mnt, &args)?;
    find_files(&mnt.latest())?;
    std::thread::sleep(Duration::from_millis(500));
    proxy.reset_counts();
    let t = Instant::now();
    std::thread::sleep(Duration::from_secs(3));
    let idle = proxy.counts();
    let idle_secs = t.elapsed().as_secs_f64();
    let polls = idle_secs * 1000.0 / 200.0;
    proxy.reset_counts();
    let (_, n) = find_files(&mnt.latest())?;
    let warm = proxy.counts();
    let warm_non_poll = warm
        .lines
        .iter()
        .filter(|l| !(l.contains("list-type") && l.contains("timeline")))
        .count();
    drop(mnt);
    let timeline_lists = idle
        .lines
        .iter()
        .filter(|l| l.contains("list-type") && l.contains("timeline"))
        .count();
    let idle_line = format!(
        "idle: {} requests in {idle_secs:.1} s at --poll-interval 200 ({:.0} polls at most), \
         {timeline_lists} of them LISTs of the timeline, {} other (a poll is one LIST when \
         idle: tests/store/s3_live.rs counts it exactly)",
        idle.requests,
        polls,
        idle.requests as usize - timeline_lists
    );
    let warm_line = format!(
        "warm find latest ({n} files): {warm_non_poll} requests besides the timeline polls \
         ({} in all)",
        warm.requests
    );
    println!("   {idle_line}\n   {warm_line}");
    Ok(vec![idle_line, warm_line])
}

/// One cold mount of `url` and a first `find latest -type f` through it.
pub struct FirstWalk {
    /// Spawn to the end of the find.
    pub seconds: f64,
    /// Spawn until `hudifs mount` returned (the mount live).
    pub live: f64,
    pub files: usize,
    /// The requests the proxy saw, summarised.
    pub requests: String,
    pub request_count: u64,
}

/// Mount `url` with `args`, walk `latest/` once, unmount; the proxy's counts are reset first.
pub fn first_walk(
    hudifs: &Path,
    url: &str,
    proxy: &FaultProxy,
    args: &[String],
    c: &Common,
) -> Res<FirstWalk> {
    proxy.reset_counts();
    let t = Instant::now();
    let mnt = Mount::new(hudifs, Path::new(url), &c.mnt, args)?;
    let live = t.elapsed().as_secs_f64();
    let (_, files) = find_files(&mnt.latest())?;
    let seconds = t.elapsed().as_secs_f64();
    let counts = proxy.counts();
    if std::env::var_os("HUDIFS_BENCH_REQUEST_LINES").is_some() {
        eprintln!("{}", counts.lines.join("\n"));
    }
    Ok(FirstWalk {
        seconds,
        live,
        files,
        requests: counts.summary(),
        request_count: counts.requests,
    })
}

/// hudi-rs's storage options for the table behind `proxy`.
pub fn hudi_rs_options(proxy: &FaultProxy) -> String {
    serde_json::json!({
        "aws_endpoint_url": proxy.endpoint,
        "aws_allow_http": "true",
        "aws_access_key_id": KEYS[0].1,
        "aws_secret_access_key": KEYS[1].1,
        "aws_region": KEYS[2].1,
    })
    .to_string()
}

/// hudi-rs `build()` + `get_file_slices()` of `url`, timed in its process.
pub fn hudi_rs_slices(
    python: &Path,
    script: &Path,
    url: &str,
    storage_options: &str,
) -> Res<HudiRsRun> {
    let out = Command::new(python)
        .arg(script)
        .arg(url)
        .arg(storage_options)
        .output()
        .map_err(|e| format!("{}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "hudi-rs refused the S3 table: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("hudi-rs script output: {e}"))
}
