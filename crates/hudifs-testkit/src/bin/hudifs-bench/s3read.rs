//! Figure 7: reads of a table on an object store (docs/SEMANTICS.md §9). An S3 server in this
//! process (s3s-fs over a temporary directory, TCP_NODELAY, on 127.0.0.1), optionally behind a
//! proxy that delays every request by a fixed latency (a stand-in for a real region):
//!
//! - `s3read-seq-<L>ms`: a sequential read of the big file through the mount (1 MiB reads) vs
//!   the best throughput of the client library's own ranged GETs of the same object (8 MiB
//!   parts, the best of 1–16 in flight);
//! - `s3read-parquet-<L>ms`: a Parquet reader's pattern (the footer's length, the footer, four
//!   1 MiB column chunks) through the mount vs the same ranged GETs made directly, in time;
//! - `s3read-memory`: the daemon's peak resident memory while 8 files are read at once, above
//!   its resident memory before, vs the prefetch budget.

use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::StreamExt;
use hudifs_core::table::TableType;
use hudifs_testkit::generator::{TableSpec, TableWriter};
use object_store::path::Path as ObjPath;
use object_store::ObjectStore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::record::{append, median, sides, Record, Side};
use crate::sys::{
    cpu_seconds, hudifs_bin, machine_cpu_seconds, mib_per_s, read_file, status_bytes, Mount,
};
use crate::{Common, Res};

const BUCKET: &str = "lake";
const PART: u64 = 8 << 20;
/// The daemon's prefetch budget (hudifs-objstore's DEFAULT_BUDGET).
const BUDGET_MIB: f64 = 256.0;

pub fn err<E: std::fmt::Display>(what: &str) -> impl Fn(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

pub fn runtime() -> Res<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .map_err(err("runtime"))
}

/// Serve `root` with s3s-fs on 127.0.0.1 until the process is killed, after printing its
/// endpoint (`endpoint http://127.0.0.1:PORT`) on a line of its own.
pub fn serve_forever(root: &Path) -> Res<()> {
    use std::io::Write;
    let rt = runtime()?;
    let endpoint = start_server(&rt, root)?;
    println!("endpoint {endpoint}");
    std::io::stdout().flush().map_err(err("stdout"))?;
    loop {
        std::thread::park();
    }
}

/// s3s-fs over `root` on 127.0.0.1; its endpoint.
pub fn start_server(rt: &tokio::runtime::Runtime, root: &Path) -> Res<String> {
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use hyper_util::server::conn::auto::Builder as ConnBuilder;
    let fs = s3s_fs::FileSystem::new(root).map_err(|e| format!("s3s-fs: {e:?}"))?;
    let mut b = s3s::service::S3ServiceBuilder::new(fs);
    b.set_auth(s3s::auth::SimpleAuth::from_single("testing", "testing"));
    let service = b.build();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(err("bind"))?;
    let addr = listener.local_addr().map_err(err("bind"))?;
    rt.spawn(async move {
        let http = ConnBuilder::new(TokioExecutor::new());
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                continue;
            };
            let _ = sock.set_nodelay(true);
            let conn = http
                .serve_connection(TokioIo::new(sock), service.clone())
                .into_owned();
            tokio::spawn(async move {
                let _ = conn.await;
            });
        }
    });
    Ok(format!("http://{addr}"))
}

/// A proxy to `upstream` that holds every chunk a client sends for `delay` before passing it
/// on: each request (one write of its head) arrives `delay` late.
pub fn start_delay_proxy(
    rt: &tokio::runtime::Runtime,
    upstream: &str,
    delay: Duration,
) -> Res<String> {
    let up = upstream.trim_start_matches("http://").to_string();
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(err("bind"))?;
    let addr = listener.local_addr().map_err(err("bind"))?;
    rt.spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                continue;
            };
            let Ok(server) = tokio::net::TcpStream::connect(&up).await else {
                continue;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let n = match cr.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    tokio::time::sleep(delay).await;
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                let _ = sw.shutdown().await;
            });
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut sr, &mut cw).await;
                let _ = cw.shutdown().await;
            });
        }
    });
    Ok(format!("http://{addr}"))
}

pub fn client(endpoint: &str) -> Res<Arc<dyn ObjectStore>> {
    let s = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(BUCKET)
        .with_endpoint(endpoint)
        .with_allow_http(true)
        .with_virtual_hosted_style_request(false)
        .with_region("us-east-1")
        .with_access_key_id("testing")
        .with_secret_access_key("testing")
        .build()
        .map_err(err("client"))?;
    Ok(Arc::new(s))
}

/// Upload every file under `table` to `s3://lake/<name>/`.
pub fn upload(
    rt: &tokio::runtime::Runtime,
    store: &Arc<dyn ObjectStore>,
    table: &Path,
    name: &str,
) -> Res<()> {
    let mut stack = vec![table.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(err("read_dir"))? {
            let p = e.map_err(err("read_dir"))?.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(table).map_err(err("path"))?;
            let key = ObjPath::from(format!("{name}/{}", rel.display()));
            let bytes = Bytes::from(std::fs::read(&p).map_err(err("read"))?);
            rt.block_on(store.put(&key, bytes.into()))
                .map_err(err("put"))?;
        }
    }
    Ok(())
}

/// Ranged GETs of the whole object, `part` bytes each, `conc` in flight: MiB/s.
fn raw_seq(
    rt: &tokio::runtime::Runtime,
    store: &Arc<dyn ObjectStore>,
    key: &ObjPath,
    size: u64,
    conc: usize,
) -> Res<f64> {
    let ranges: Vec<_> = (0..size.div_ceil(PART))
        .map(|i| i * PART..((i + 1) * PART).min(size))
        .collect();
    let t = Instant::now();
    let total = rt.block_on(async {
        let mut s = futures::stream::iter(ranges)
            .map(|r| store.get_range(key, r))
            .buffered(conc);
        let mut total = 0u64;
        while let Some(b) = s.next().await {
            total += b.map_err(err("get"))?.len() as u64;
        }
        Ok::<_, String>(total)
    })?;
    if total != size {
        return Err(format!("raw read gave {total} of {size} bytes"));
    }
    Ok(mib_per_s(size, t.elapsed().as_secs_f64()))
}

/// Drop the kernel's cached pages of a file of the mount.
pub fn forget_pages(p: &Path) -> Res<()> {
    let f = std::fs::File::open(p).map_err(err("open"))?;
    // SAFETY: advice on an open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    Ok(())
}

/// A Parquet reader's ranges of a file of `size` bytes.
fn parquet_ranges(size: u64) -> Vec<(u64, usize)> {
    let mut v = vec![(size - 8, 8), (size - 8 - (64 << 10), 64 << 10)];
    for k in 1..=4 {
        v.push((size / 5 * k, 1 << 20));
    }
    v
}

/// A table of `n` base files of about `bytes` each (one commit, one partition).
fn multi_table(dir: &Path, n: usize, bytes: u64) -> Res<Vec<String>> {
    if dir.join(".hoodie").exists() {
        let _ = std::fs::remove_dir_all(dir);
    }
    let spec =
        TableSpec::new("bench_s3_multi", TableType::CopyOnWrite, 9).partitioned_by(&["part"], true);
    let mut w = TableWriter::create(dir, spec, 1_767_225_600_000).map_err(|e| e.to_string())?;
    let action = w.write_action();
    let mut t = w.begin(action).map_err(|e| e.to_string())?;
    for _ in 0..n {
        t.insert_sized("part=00000", bytes)
            .map_err(|e| e.to_string())?;
    }
    t.complete().map_err(|e| e.to_string())?;
    w.events()
        .last()
        .map(|e| e.written.clone())
        .ok_or_else(|| "no files written".to_string())
}

pub fn bench_s3read(
    table: &Path,
    file: &str,
    work: &Path,
    multi_bytes: u64,
    latencies: &[u64],
    c: &Common,
) -> Res<()> {
    hudifs_testkit::s3::set_keys();
    let hudifs = hudifs_bin(c);
    let rt = runtime()?;
    let root = work.join("s3root");
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join(BUCKET)).map_err(err("s3 root"))?;
    let server = start_server(&rt, &root)?;
    let direct = client(&server)?;
    let t = Instant::now();
    upload(&rt, &direct, table, "big")?;
    println!(
        "  uploaded {} to the in-process S3 server in {:.1} s",
        table.display(),
        t.elapsed().as_secs_f64()
    );
    let key = ObjPath::from(format!("big/{file}"));
    let size = rt.block_on(direct.head(&key)).map_err(err("head"))?.size;
    let mnt_args = |endpoint: &str| -> Vec<String> {
        vec![
            format!("--endpoint-url={endpoint}"),
            "--force-path-style".into(),
        ]
    };
    for &lat in latencies {
        let endpoint = if lat == 0 {
            server.clone()
        } else {
            start_delay_proxy(&rt, &server, Duration::from_millis(lat))?
        };
        let store = client(&endpoint)?;
        // The client library's best: 8 MiB parts, 1 to 16 in flight.
        let mut best = (0.0, 1);
        for conc in [1, 4, 8, 16] {
            let v = raw_seq(&rt, &store, &key, size, conc)?;
            println!("  raw ranged GETs, {lat} ms, {conc} in flight: {v:.0} MiB/s");
            if v > best.0 {
                best = (v, conc);
            }
        }
        let mnt = Mount::new(
            &hudifs,
            Path::new(&format!("s3://{BUCKET}/big")),
            &c.mnt,
            &mnt_args(&endpoint),
        )?;
        let view = mnt.latest().join(file);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        // What each side costs in CPU: the machine's (all processes) and the daemon's, per GiB,
        // and how busy the machine was: a side near 100 % is bound by the CPU, not the store.
        let mut cpu: [Vec<(f64, f64, f64)>; 2] = [Vec::new(), Vec::new()];
        for rep in 0..c.reps {
            for through_mount in sides(rep) {
                let (busy0, idle0) = machine_cpu_seconds();
                let daemon0 = cpu_seconds(mnt.pid);
                if through_mount {
                    let log = |e: String| format!("{e}; daemon log: {}", mnt.guard.log_text());
                    forget_pages(&view).map_err(log)?;
                    let (secs, bytes) = read_file(&view).map_err(log)?;
                    if bytes != size {
                        return Err(format!("the mount gave {bytes} of {size} bytes"));
                    }
                    a.push(mib_per_s(bytes, secs));
                } else {
                    b.push(raw_seq(&rt, &store, &key, size, best.1)?);
                }
                let (busy1, idle1) = machine_cpu_seconds();
                let gib = size as f64 / (1u64 << 30) as f64;
                cpu[usize::from(!through_mount)].push((
                    (busy1 - busy0) / gib,
                    (cpu_seconds(mnt.pid) - daemon0) / gib,
                    (busy1 - busy0) / (busy1 - busy0 + idle1 - idle0),
                ));
            }
        }
        let [on_mount, on_raw] = cpu.map(|v| {
            let med = |f: fn(&(f64, f64, f64)) -> f64| median(&v.iter().map(f).collect::<Vec<_>>());
            (med(|t| t.0), med(|t| t.1), med(|t| t.2))
        });
        let cpu_note = format!(
            "CPU per GiB (medians): mount {:.2} s on the machine, {:.2} s of it the daemon's, \
             machine {:.0} % busy; raw GETs {:.2} s, machine {:.0} % busy",
            on_mount.0,
            on_mount.1,
            on_mount.2 * 100.0,
            on_raw.0,
            on_raw.2 * 100.0
        );
        println!("  {cpu_note}");
        append(
            &c.out,
            &Record::new(
                7,
                &format!("s3read-seq-{lat}ms"),
                &format!(
                    "Sequential read of a {:.0} MiB object, +{lat} ms per request: mount vs \
                     the client library's best ranged GETs",
                    size as f64 / (1 << 20) as f64
                ),
                Side::new("mount", "MiB/s", a),
                Side::new("raw GETs", "MiB/s", b),
                "mount throughput / raw ranged-GET throughput",
                Some((">=", 0.9)),
                vec![
                    format!(
                        "raw: 8 MiB ranged GETs, {} in flight (the best of 1, 4, 8, 16); mount: \
                         1 MiB read() calls, kernel pages dropped before each read",
                        best.1
                    ),
                    cpu_note,
                ],
            ),
        )?;
        // A Parquet reader's pattern.
        let ranges = parquet_ranges(size);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for rep in 0..c.reps {
            for through_mount in sides(rep) {
                if through_mount {
                    forget_pages(&view)?;
                    let t = Instant::now();
                    let f = std::fs::File::open(&view).map_err(err("open"))?;
                    for &(off, len) in &ranges {
                        let mut buf = vec![0u8; len];
                        f.read_exact_at(&mut buf, off).map_err(err("pread"))?;
                    }
                    a.push(t.elapsed().as_secs_f64() * 1000.0);
                } else {
                    let t = Instant::now();
                    for &(off, len) in &ranges {
                        let r = off..off + len as u64;
                        rt.block_on(store.get_range(&key, r)).map_err(err("get"))?;
                    }
                    b.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            }
        }
        append(
            &c.out,
            &Record::new(
                7,
                &format!("s3read-parquet-{lat}ms"),
                &format!(
                    "Parquet reader's pattern (footer length, 64 KiB footer, four 1 MiB column \
                     chunks), +{lat} ms per request: mount vs the same ranged GETs"
                ),
                Side::new("mount", "ms", a),
                Side::new("direct GETs", "ms", b),
                "mount time / direct time",
                Some(("<=", 1.3)),
                vec!["mount: open + pread of each range, kernel pages dropped first".into()],
            ),
        )?;
        drop(mnt);
    }
    // Memory while 8 files are read at once.
    let t = Instant::now();
    let multi_dir = work.join("s3multi");
    let files = multi_table(&multi_dir, 8, multi_bytes)?;
    upload(&rt, &direct, &multi_dir, "multi")?;
    println!(
        "  wrote and uploaded 8 files of {} MiB in {:.1} s",
        multi_bytes >> 20,
        t.elapsed().as_secs_f64()
    );
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..c.reps.min(3) {
        // A fresh daemon each time: memory an allocator kept from an earlier repetition would
        // hide this one's growth.
        let mnt = Mount::new(
            &hudifs,
            Path::new(&format!("s3://{BUCKET}/multi")),
            &c.mnt,
            &mnt_args(&server),
        )?;
        let pid = mnt.pid;
        let before = status_bytes(pid, "VmRSS:")?;
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let sampler = std::thread::spawn(move || {
            let mut peak = 0.0f64;
            while !d2.load(Ordering::Relaxed) {
                peak = peak.max(status_bytes(pid, "VmRSS:").unwrap_or(0.0));
                std::thread::sleep(Duration::from_millis(10));
            }
            peak
        });
        let readers: Vec<_> = files
            .iter()
            .map(|f| {
                let p: PathBuf = mnt.latest().join(f);
                std::thread::spawn(move || {
                    let _ = forget_pages(&p);
                    read_file(&p)
                })
            })
            .collect();
        for r in readers {
            r.join().map_err(|_| "reader panicked".to_string())??;
        }
        done.store(true, Ordering::Relaxed);
        let peak = sampler.join().map_err(|_| "sampler panicked".to_string())?;
        a.push((peak - before).max(0.0) / (1 << 20) as f64);
        b.push(BUDGET_MIB);
    }
    append(
        &c.out,
        &Record::new(
            7,
            "s3read-memory",
            "Daemon memory while 8 files are read at once: peak RSS growth vs the prefetch budget",
            Side::new("peak RSS growth", "MiB", a),
            Side::new("prefetch budget", "MiB", b),
            "RSS growth / budget",
            None,
            vec![format!(
                "8 files of {} MiB, each read whole by its own thread, by a freshly mounted \
                 daemon each time; RSS sampled every 10 ms",
                multi_bytes >> 20
            )],
        ),
    )?;
    Ok(())
}
