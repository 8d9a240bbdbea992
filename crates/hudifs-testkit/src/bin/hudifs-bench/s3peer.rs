//! Figure 10: hudifs against the program a user would pick instead on an object store, AWS's
//! Mountpoint for S3 (`mount-s3`), side by side on one S3 server and one object.
//!
//! The peers are third-party builds (`../shared/anchors/build.sh`: mount-s3 1.24 and s3s-fs
//! 0.14.1 patched to give ETags in listings, which mount-s3 requires); `scripts/bench` passes
//! their paths and skips this figure, saying so, where they are not there. The server runs as
//! its own process on 127.0.0.1; the table is PUT to it (so that every object has its stored
//! ETag), and both mounts read the same object through it, directly or through a proxy that
//! delays each request (+20 ms: a region's round trip).
//!
//! - `s3peer-seq-<L>ms`: `cat` of the object (128 KiB reads), kernel pages dropped before each;
//!   hudifs's throughput over mount-s3's;
//! - `s3peer-cpu-<L>ms`: each daemon's CPU time per GiB of that read; hudifs's over mount-s3's;
//! - `s3peer-parquet-<L>ms`: a Parquet reader's pattern (footer length, 64 KiB footer, four
//!   4 MiB column chunks), time; hudifs's over mount-s3's.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hudifs_testkit::mount::is_mounted;
use hudifs_testkit::server::{free_port, wait_for_port, ServerProcess};

use crate::record::{append, Record, Side};
use crate::s3read::{client, err, forget_pages, runtime, start_delay_proxy, upload};
use crate::sys::{cpu_seconds, hudifs_bin, mib_per_s, Mount};
use crate::{Common, Res};

const BUCKET: &str = "lake";

/// A running `mount-s3` in the foreground; unmounted and stopped when dropped.
struct PeerMount {
    mnt: PathBuf,
    proc: Option<ServerProcess>,
}

impl PeerMount {
    fn start(bin: &Path, endpoint: &str, prefix: &str, mnt: &Path) -> Res<PeerMount> {
        std::fs::create_dir_all(mnt).map_err(err("mountpoint"))?;
        let child = Command::new(bin)
            .arg(BUCKET)
            .arg(mnt)
            .args(["--prefix", prefix, "--endpoint-url", endpoint])
            .args(["--force-path-style", "--region", "us-east-1", "--read-only"])
            .args(["--maximum-throughput-gbps", "10", "--foreground"])
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(err("mount-s3"))?;
        let mut m = PeerMount {
            mnt: mnt.to_path_buf(),
            proc: Some(ServerProcess::new(child)),
        };
        let t = Instant::now();
        while !is_mounted(mnt) {
            if let Some(p) = m.proc.as_mut() {
                if let Some(status) = p.try_wait() {
                    return Err(format!("mount-s3 exited: {status}"));
                }
            }
            if t.elapsed() > Duration::from_secs(20) {
                return Err("mount-s3 did not mount in 20 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(m)
    }

    fn pid(&self) -> u32 {
        self.proc.as_ref().map_or(0, ServerProcess::id)
    }
}

impl Drop for PeerMount {
    fn drop(&mut self) {
        if is_mounted(&self.mnt) {
            let _ = Command::new("umount").arg(&self.mnt).status();
            if is_mounted(&self.mnt) {
                let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
            }
        }
        if let Some(mut p) = self.proc.take() {
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(5) {
                if p.try_wait().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// `cat PATH > /dev/null`: (seconds, bytes read as the file's size says).
fn cat(path: &Path) -> Res<(f64, u64)> {
    let size = std::fs::metadata(path).map_err(err("stat"))?.len();
    let t = Instant::now();
    let status = Command::new("cat")
        .arg(path)
        .stdout(Stdio::null())
        .status()
        .map_err(err("cat"))?;
    if !status.success() {
        return Err(format!("cat {}: {status}", path.display()));
    }
    Ok((t.elapsed().as_secs_f64(), size))
}

/// A Parquet reader's ranges of a file of `size` bytes: footer length, footer, four column
/// chunks of 4 MiB.
fn parquet_ranges(size: u64) -> Vec<(u64, usize)> {
    let mut v = vec![(size - 8, 8), (size - 8 - (64 << 10), 64 << 10)];
    for k in 1..=4 {
        v.push((size / 5 * k, 4 << 20));
    }
    v
}

fn parquet_pattern(path: &Path, size: u64) -> Res<f64> {
    forget_pages(path)?;
    let t = Instant::now();
    let f = std::fs::File::open(path).map_err(err("open"))?;
    for (off, len) in parquet_ranges(size) {
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, off).map_err(err("pread"))?;
    }
    Ok(t.elapsed().as_secs_f64() * 1000.0)
}

pub fn bench_s3peer(
    table: &Path,
    file: &str,
    work: &Path,
    mount_s3: &Path,
    s3s_fs: &Path,
    latencies: &[u64],
    c: &Common,
) -> Res<()> {
    hudifs_testkit::s3::set_keys();
    let hudifs = hudifs_bin(c);
    let rt = runtime()?;
    let root = work.join("peer-root");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join(BUCKET)).map_err(err("server root"))?;
    let port = free_port();
    let _server = ServerProcess::new(
        Command::new(s3s_fs)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", "testing", "--secret-key", "testing"])
            .arg(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(err("s3s-fs"))?,
    );
    let server = format!("http://127.0.0.1:{port}");
    wait_for_port(([127, 0, 0, 1], port).into(), "s3s-fs");
    let direct = client(&server)?;
    let t = Instant::now();
    upload(&rt, &direct, table, "big")?;
    println!(
        "  put {} on s3s-fs (ETag listings) in {:.1} s",
        table.display(),
        t.elapsed().as_secs_f64()
    );
    let peer_mnt = work.join("peer-mnt");
    for &lat in latencies {
        let endpoint = if lat == 0 {
            server.clone()
        } else {
            start_delay_proxy(&rt, &server, Duration::from_millis(lat))?
        };
        let ours = Mount::new(
            &hudifs,
            Path::new(&format!("s3://{BUCKET}/big")),
            &c.mnt,
            &[
                format!("--endpoint-url={endpoint}"),
                "--force-path-style".into(),
            ],
        )?;
        let peer = PeerMount::start(mount_s3, &endpoint, "big/", &peer_mnt)?;
        let paths = [ours.latest().join(file), peer_mnt.join(file)];
        let pids = [ours.pid, peer.pid()];
        let size = std::fs::metadata(&paths[1]).map_err(err("stat"))?.len();
        // Warm both (connections, the daemons' metadata) once.
        for p in &paths {
            forget_pages(p)?;
            parquet_pattern(p, size)?;
        }
        let mut mib: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let mut cpu: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let mut pq: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let gib = size as f64 / (1u64 << 30) as f64;
        for rep in 0..c.reps {
            let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
            for side in order {
                forget_pages(&paths[side])?;
                let before = cpu_seconds(pids[side]);
                let (secs, bytes) = cat(&paths[side]).map_err(|e| {
                    if side == 0 {
                        format!("{e}; daemon log: {}", ours.guard.log_text())
                    } else {
                        e
                    }
                })?;
                cpu[side].push((cpu_seconds(pids[side]) - before) / gib);
                mib[side].push(mib_per_s(bytes, secs));
            }
            for side in order {
                pq[side].push(parquet_pattern(&paths[side], size)?);
            }
        }
        let [ours_mib, peer_mib] = mib;
        let [ours_cpu, peer_cpu] = cpu;
        let [ours_pq, peer_pq] = pq;
        let notes = vec![
            format!(
                "one {:.0} MiB object on s3s-fs 0.14.1 (ETag listings), +{lat} ms per request; \
                 mount-s3 1.24 --maximum-throughput-gbps 10; kernel pages dropped before each read; \
                 the two sides alternate",
                size as f64 / (1 << 20) as f64
            ),
            "mount-s3 is third-party code built by ../shared/anchors/build.sh, for measuring only"
                .into(),
        ];
        for r in [
            Record::new(
                10,
                &format!("s3peer-seq-{lat}ms"),
                &format!("cat of a large object, +{lat} ms per request: hudifs vs mount-s3"),
                Side::new("hudifs", "MiB/s", ours_mib),
                Side::new("mount-s3", "MiB/s", peer_mib),
                "hudifs throughput / mount-s3 throughput",
                Some((">=", 1.0)),
                notes.clone(),
            ),
            Record::new(
                10,
                &format!("s3peer-cpu-{lat}ms"),
                &format!("daemon CPU per GiB of that cat, +{lat} ms per request"),
                Side::new("hudifs", "s/GiB", ours_cpu),
                Side::new("mount-s3", "s/GiB", peer_cpu),
                "hudifs CPU per GiB / mount-s3 CPU per GiB",
                Some(("<=", 1.0)),
                notes.clone(),
            ),
            Record::new(
                10,
                &format!("s3peer-parquet-{lat}ms"),
                &format!(
                    "Parquet pattern (footer length, 64 KiB footer, four 4 MiB column chunks), \
                     +{lat} ms per request"
                ),
                Side::new("hudifs", "ms", ours_pq),
                Side::new("mount-s3", "ms", peer_pq),
                "hudifs time / mount-s3 time",
                Some(("<=", 1.0)),
                notes.clone(),
            ),
        ] {
            append(&c.out, &r)?;
        }
        drop(peer);
        drop(ours);
    }
    Ok(())
}
