//! `--metrics ADDR` through real mounts (docs/SEMANTICS.md §7.12): the scrape parses as
//! OpenMetrics text (the parser of Prometheus's Python client, from PyPI), FUSE and store
//! counters move as requests are made (a local table, and one on moto), the endpoint answers
//! across a restart of the serving daemon, `hudifs status --json` carries the same counters, and
//! an address that cannot be bound fails the mount.

use hudifs_testkit::support;

use std::io::Read;
use std::path::Path;
use std::process::Command;

use hudifs_core::table::TableType;
use hudifs_objstore::{ObjectStorage, StoreUrl};
use hudifs_testkit::generator::{TableSpec, TableWriter};
use hudifs_testkit::mount::{fuse_available, MountGuard};
use hudifs_testkit::server::free_port;
use serde_json::Value;
use support::sample;

/// A small copy-on-write table written by the project's generator; its files' paths.
fn table(root: &Path) -> Vec<String> {
    let spec = TableSpec::new("m", TableType::CopyOnWrite, 9).partitioned_by(&["part"], true);
    let mut w = TableWriter::create(root, spec, 1_767_225_600_000).unwrap();
    let action = w.write_action();
    let mut t = w.begin(action).unwrap();
    t.insert_sized("part=a", 1 << 20).unwrap();
    t.insert_sized("part=b", 1 << 20).unwrap();
    t.complete().unwrap();
    w.events().last().unwrap().written.clone()
}

fn status(m: &MountGuard) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_hudifs"))
        .args(["status", "--json"])
        .arg(m.path())
        .output()
        .unwrap();
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["mounts"][0].clone()
}

#[test]
fn a_local_mount_counts_its_requests_and_keeps_answering_across_a_restart() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    let files = table(&root);
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let m = MountGuard::mount(&root, &["--no-passthrough", "--metrics", &addr]);
    // Whole files, their cached pages dropped first: every read reaches the daemon.
    let read = |rel: &str| {
        use std::os::fd::AsRawFd;
        let mut f = std::fs::File::open(m.path().join("latest").join(rel)).unwrap();
        // SAFETY: a plain advice call on an open descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        let mut out = Vec::new();
        f.read_to_end(&mut out).unwrap();
        out
    };
    assert_eq!(
        read(&files[0]),
        std::fs::read(root.join(&files[0])).unwrap()
    );
    let (line, body) = support::http_get(port, "/metrics");
    assert!(line.contains("200"), "{line}");
    let first = support::openmetrics(&body);
    // (A family with labels appears with its first sample: no store requests here.)
    for (family, kind) in [
        ("hudifs_fuse_requests", "counter"),
        ("hudifs_fuse_request_seconds", "histogram"),
        ("hudifs_merge_seconds", "histogram"),
        ("hudifs_latest_instant_age_seconds", "gauge"),
        ("hudifs_follower_lag_seconds", "gauge"),
        ("hudifs_resident_memory_bytes", "gauge"),
        ("hudifs_memory_ceiling_bytes", "gauge"),
        ("hudifs_memory_counted_bytes", "gauge"),
        ("hudifs_memory_waits", "gauge"),
    ] {
        assert!(
            body.contains(&format!("# TYPE {family} {kind}\n")),
            "{family}: {body}"
        );
    }
    assert_eq!(first["hudifs_fuse_requests"]["type"], "counter");
    assert_eq!(first["hudifs_fuse_request_seconds"]["type"], "histogram");
    let reads = |p: &Value| {
        sample(
            p,
            "hudifs_fuse_requests",
            "hudifs_fuse_requests_total",
            &[("op", "read"), ("outcome", "ok")],
        )
    };
    assert!(reads(&first) >= 1.0, "{first:#}");
    assert!(
        sample(
            &first,
            "hudifs_resident_memory_bytes",
            "hudifs_resident_memory_bytes",
            &[]
        ) > 1e6
    );
    assert!(
        sample(
            &first,
            "hudifs_memory_ceiling_bytes",
            "hudifs_memory_ceiling_bytes",
            &[]
        ) >= (512u64 << 20) as f64,
        "the default ceiling: half the memory available, at least 512 MiB"
    );
    assert!(
        sample(
            &first,
            "hudifs_latest_instant_timestamp_seconds",
            "hudifs_latest_instant_timestamp_seconds",
            &[]
        ) > 1.7e9,
        "the generator's clock starts in 2026"
    );
    // Counters move as requests are made.
    assert!(std::fs::metadata(m.path().join("latest/nope")).is_err());
    let _ = read(&files[1]);
    let second = support::openmetrics(&support::http_get(port, "/metrics").1);
    assert!(reads(&second) > reads(&first));
    let failed_lookups = sample(
        &second,
        "hudifs_fuse_requests",
        "hudifs_fuse_requests_total",
        &[("op", "lookup"), ("outcome", "error")],
    );
    assert!(failed_lookups >= 1.0, "{second:#}");
    assert_eq!(
        support::http_get(port, "/healthz").0.split(' ').nth(1),
        Some("200")
    );
    assert_eq!(
        support::http_get(port, "/nope").0.split(' ').nth(1),
        Some("404")
    );
    // `hudifs status --json` carries the same counters.
    let st = status(&m);
    let key = r#"hudifs_fuse_requests_total{op="read",outcome="ok"}"#;
    assert!(
        st["metrics"][key]
            .as_f64()
            .is_some_and(|v| v >= reads(&second)),
        "{st:#}"
    );
    // The serving daemon dies: the keeper holds the socket, the next daemon answers on it.
    let pid = st["pid"].as_u64().unwrap();
    // SAFETY: a signal to the daemon this test's mount started.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    let _ = read(&files[0]);
    let (line, body) = support::http_get(port, "/metrics");
    assert!(line.contains("200"), "{line}");
    let after = support::openmetrics(&body);
    assert!(
        reads(&after) >= 1.0,
        "the new daemon counts its own: {after:#}"
    );
    assert_ne!(status(&m)["pid"].as_u64(), Some(pid));
}

#[test]
fn store_requests_are_counted_by_kind_and_outcome() {
    if !fuse_available() {
        return;
    }
    let moto = support::moto();
    let tmp = tempfile::tempdir().unwrap();
    let local = tmp.path().join("t");
    let files = table(&local);
    let url = "s3://lake/metrics/t";
    let store = ObjectStorage::new(
        StoreUrl::parse(url).unwrap(),
        &hudifs_testkit::s3::options(&moto.endpoint),
    )
    .unwrap();
    support::put_tree(&store, &local);
    let port = free_port();
    let addr = format!(":{port}");
    let m = MountGuard::mount(
        Path::new(url),
        &[
            "--endpoint-url",
            &moto.endpoint,
            "--force-path-style",
            "--metrics",
            &addr,
        ],
    );
    let got = std::fs::read(m.path().join("latest").join(&files[0])).unwrap();
    assert_eq!(got, std::fs::read(local.join(&files[0])).unwrap());
    let parsed = support::openmetrics(&support::http_get(port, "/metrics").1);
    let count = |kind: &str, outcome: &str| {
        sample(
            &parsed,
            "hudifs_store_requests",
            "hudifs_store_requests_total",
            &[("kind", kind), ("outcome", outcome)],
        )
    };
    assert!(count("GET", "ok") >= 1.0, "{parsed:#}");
    assert!(count("LIST", "ok") >= 1.0, "{parsed:#}");
    let timed = sample(
        &parsed,
        "hudifs_store_request_seconds",
        "hudifs_store_request_seconds_count",
        &[("kind", "GET")],
    );
    assert!(timed >= count("GET", "ok"), "{parsed:#}");
}

#[test]
fn an_address_that_cannot_be_bound_fails_the_mount() {
    if !fuse_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("t");
    table(&root);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mnt = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hudifs"))
        .arg("mount")
        .arg(&root)
        .arg(mnt.path())
        .args(["--metrics", &addr])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("--metrics"), "{err}");
    assert!(!hudifs_testkit::mount::is_mounted(mnt.path()));
}
