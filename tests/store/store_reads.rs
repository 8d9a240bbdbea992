//! Reads of store tables through a real mount, on a real S3 server (moto on 127.0.0.1, as in
//! `tests/store/s3_server.rs`), docs/SEMANTICS.md §9: the prefetcher gives exact bytes for
//! sequential and random reads; an object replaced while open gives ESTALE; on a versioned
//! bucket, and with `--cache`, a file the cleaner deletes while open reads to its end; a file
//! in the cache is read again without a GET (counted by a proxy in this process); eight readers
//! and a merge at once stay under `--max-memory`; a remount takes `delta/`'s saved log back
//! without reading a data file.

use hudifs_testkit::support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::FileExt;
use std::path::Path;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hudifs_core::table::TableType;
use hudifs_objstore::{ObjectStorage, StoreUrl};
use hudifs_storage::{StorageWrite, TablePath};
use hudifs_testkit::generator::{TableSpec, TableWriter};
use hudifs_testkit::mount::{fuse_available, MountGuard};
use hudifs_testkit::s3::Moto;

fn seam(url: &str, endpoint: &str) -> ObjectStorage {
    ObjectStorage::new(
        StoreUrl::parse(url).unwrap(),
        &hudifs_testkit::s3::options(endpoint),
    )
    .unwrap()
}

/// A copy-on-write table with two big base files (real Parquet, about `bytes` each) written by
/// the project's generator, uploaded to `url`; the files' paths in the table.
fn big_table(local: &Path, url: &str, endpoint: &str, bytes: u64) -> Vec<String> {
    let spec = TableSpec::new("reads", TableType::CopyOnWrite, 8).partitioned_by(&["part"], true);
    let mut w = TableWriter::create(local, spec, 1_767_225_600_000).unwrap();
    let action = w.write_action();
    let mut t = w.begin(action).unwrap();
    t.insert_sized("part=a", bytes).unwrap();
    t.insert_sized("part=a", bytes).unwrap();
    t.complete().unwrap();
    let files = w.events().last().unwrap().written.clone();
    assert_eq!(files.len(), 2);
    let store = seam(url, endpoint);
    support::put_tree(&store, local);
    files
}

/// A TCP proxy to `upstream` on 127.0.0.1 that records the GET and HEAD requests going
/// through (their request lines).
struct Counter {
    endpoint: String,
    gets: Arc<Mutex<Vec<String>>>,
}

impl Counter {
    /// Requests so far with `method` of keys ending in `name`.
    fn requests_of(&self, method: &str, name: &str) -> usize {
        self.lines_of(method, name).len()
    }

    /// GETs so far of keys ending in `name`.
    fn gets_of(&self, name: &str) -> usize {
        self.requests_of("GET", name)
    }

    /// The request lines so far with `method` of keys ending in `name`, a ranged GET's marked
    /// " (range)".
    fn lines_of(&self, method: &str, name: &str) -> Vec<String> {
        let name = name.rsplit('/').next().unwrap_or(name);
        self.gets
            .lock()
            .unwrap()
            .iter()
            .filter(|l| {
                l.split(' ').next() == Some(method)
                    && l.split(['?', ' '])
                        .nth(1)
                        .is_some_and(|p| p.ends_with(name))
            })
            .cloned()
            .collect()
    }
}

fn counting_proxy(upstream: &str) -> Counter {
    let up = upstream.trim_start_matches("http://").to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let gets = Arc::new(Mutex::new(Vec::new()));
    let g = gets.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { return };
            let Ok(server) = TcpStream::connect(&up) else {
                continue;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let (mut c2, mut s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            let g = g.clone();
            let (mut c1, mut s1) = (client, server);
            std::thread::spawn(move || {
                // Requests: count "GET /" at the start of each request line.
                let mut buf = vec![0; 64 << 10];
                let mut tail: Vec<u8> = b"\n".to_vec();
                let starts = |w: &[u8]| w.starts_with(b"\nGET /") || w.starts_with(b"\nHEAD /");
                loop {
                    let n = match c1.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let mut scan = std::mem::take(&mut tail);
                    scan.extend_from_slice(&buf[..n]);
                    for (i, _) in scan.windows(7).enumerate().filter(|(_, w)| starts(w)) {
                        let line = &scan[i + 1..];
                        let end = line.iter().position(|&c| c == b'\r').unwrap_or(line.len());
                        let mut seen = String::from_utf8_lossy(&line[..end]).into_owned();
                        // A ranged GET says so (the headers up to the blank line).
                        let head = line
                            .windows(4)
                            .position(|w| w == b"\r\n\r\n")
                            .map_or(line, |e| &line[..e]);
                        if String::from_utf8_lossy(head)
                            .to_ascii_lowercase()
                            .contains("\r\nrange: bytes=")
                        {
                            seen.push_str(" (range)");
                        }
                        g.lock().unwrap().push(seen);
                    }
                    tail = scan[scan.len().saturating_sub(6)..].to_vec();
                    if s1.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = s1.shutdown(std::net::Shutdown::Write);
            });
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s2, &mut c2);
                let _ = c2.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    Counter { endpoint, gets }
}

fn mount(url: &str, endpoint: &str, extra: &[&str]) -> MountGuard {
    let mut args = vec!["--endpoint-url", endpoint, "--force-path-style"];
    args.extend_from_slice(extra);
    MountGuard::mount(Path::new(url), &args)
}

fn setup() -> Option<(tempfile::TempDir, Moto)> {
    if !fuse_available() {
        return None;
    }
    Some((tempfile::tempdir().unwrap(), support::moto()))
}

#[test]
fn sequential_and_random_reads_are_exact_and_a_replaced_object_is_estale() {
    let Some((tmp, moto)) = setup() else { return };
    let url = "s3://lake/reads";
    let local = tmp.path().join("t");
    let files = big_table(&local, url, &moto.endpoint, 24 << 20);
    let m = mount(url, &moto.endpoint, &[]);
    let (a, b) = (&files[0], &files[1]);
    let want = std::fs::read(local.join(a)).unwrap();
    // Sequential: the whole file, in 1 MiB reads.
    let got = std::fs::read(m.path().join("latest").join(a)).unwrap();
    assert!(got == want, "sequential read differs");
    // Random: a Parquet reader's footer, then column-chunk-sized reads here and there.
    let want_b = std::fs::read(local.join(b)).unwrap();
    let f = std::fs::File::open(m.path().join("latest").join(b)).unwrap();
    let n = want_b.len();
    let mut offsets = vec![(n - 8, 8), (n - 70_000, 70_000)];
    let mut x: u64 = 12345;
    for _ in 0..12 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let off = (x >> 20) as usize % (n - 300_000);
        offsets.push((off, 1 + (x as usize % 300_000)));
    }
    for (off, len) in offsets {
        let mut buf = vec![0; len];
        f.read_exact_at(&mut buf, off as u64).unwrap();
        assert!(
            buf == want_b[off..off + len],
            "random read at {off}+{len} differs"
        );
    }
    // Replaced while open: the next read of bytes not yet fetched gives ESTALE.
    let f = std::fs::File::open(m.path().join("latest").join(a)).unwrap();
    let mut buf = vec![0; 4096];
    f.read_exact_at(&mut buf, 0).unwrap();
    let store = seam(url, &moto.endpoint);
    let mut other = want.clone();
    other[100] ^= 1;
    store.put(&TablePath::new(a).unwrap(), &other).unwrap();
    // The kernel may hold pages of the earlier full read: drop them first.
    drop_kernel_cache(&f);
    let err = f.read_exact_at(&mut buf, 20 << 20).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ESTALE), "{err}");
    assert!(m.log_text().contains("changed since it was opened"));
}

#[test]
fn a_parquet_readers_pattern_costs_one_get_per_range_and_no_head() {
    let Some((tmp, moto)) = setup() else { return };
    let url = "s3://lake/pattern";
    let local = tmp.path().join("t");
    let files = big_table(&local, url, &moto.endpoint, 24 << 20);
    let proxy = counting_proxy(&moto.endpoint);
    let m = mount(url, &proxy.endpoint, &[]);
    let a = &files[0];
    let want = std::fs::read(local.join(a)).unwrap();
    let n = want.len() as u64;
    // The footer's length, the footer, four column chunks of 1 MiB (as figure s3read reads).
    let mut ranges = vec![(n - 8, 8u64), (n - 8 - (64 << 10), 64 << 10)];
    ranges.extend((1..=4).map(|k| (n / 5 * k, 1 << 20)));
    let (gets, heads) = (proxy.gets_of(a), proxy.requests_of("HEAD", a));
    let f = std::fs::File::open(m.path().join("latest").join(a)).unwrap();
    for &(off, len) in &ranges {
        let mut buf = vec![0; len as usize];
        f.read_exact_at(&mut buf, off).unwrap();
        assert!(
            buf[..] == want[off as usize..(off + len) as usize],
            "bytes at {off}"
        );
    }
    // The open pins what the listing said: no HEAD.
    assert_eq!(proxy.requests_of("HEAD", a), heads, "HEADs at open");
    let gets = proxy.gets_of(a) - gets;
    if m.log_text().contains("read-ahead of the mount set to") {
        // The kernel sends each read whole (the mount's read-ahead is above 1 MiB), in one
        // request of up to 1 MiB, plus one of the last page when the read is not page-aligned:
        // one GET per request, none ahead of a reader that jumps.
        assert!(
            (ranges.len()..=2 * ranges.len()).contains(&gets),
            "{gets} GETs: {:?}",
            proxy.gets.lock().unwrap()
        );
        println!("{gets} GETs for {} reads", ranges.len());
    } else {
        // Without root the mount reads ahead 128 KiB and splits a 1 MiB read in eight.
        println!(
            "read-ahead not raised (not root?): {gets} GETs for {} reads",
            ranges.len()
        );
        assert!(gets <= 4 * ranges.len(), "{gets} GETs");
    }
}

/// A merge reads its base file from the store a row group at a time: one GET for the footer's
/// length and one for the footer (or one for both), one per row group. Parquet's reader asks
/// for every page header and page, column after column; a GET each was hundreds of requests
/// per merge, a minute per file group on a server answering in 40 ms. A fresh mount over the
/// warm cache then finds the merge from ranged GETs of the log's block headers.
#[test]
fn a_merge_reads_its_base_file_a_row_group_at_a_time() {
    use hudifs_core::timeline::Action;
    use hudifs_testkit::generator::rows_with_ids;
    let Some((tmp, moto)) = setup() else { return };
    let url = "s3://lake/rowgroups";
    let local = tmp.path().join("t");
    let spec =
        TableSpec::new("rowgroups", TableType::MergeOnRead, 9).partitioned_by(&["part"], true);
    let mut w = TableWriter::create(&local, spec, 1_767_225_600_000).unwrap();
    let ids: Vec<i64> = (0..200_000).collect();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let group = t.insert("part=b", &rows_with_ids(1, &ids)).unwrap();
    t.complete().unwrap();
    let base = w.events().last().unwrap().written[0].clone();
    let upd: Vec<i64> = ids.iter().copied().step_by(5).collect();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("part=b", &group, &rows_with_ids(2, &upd)).unwrap();
    t.complete().unwrap();
    let log = w.events().last().unwrap().written[0].clone();
    assert!(log.contains(".log."), "{log}");
    support::put_tree(&seam(url, &moto.endpoint), &local);
    let footer = parquet::file::reader::SerializedFileReader::new(
        std::fs::File::open(local.join(&base)).unwrap(),
    )
    .unwrap();
    let meta = parquet::file::reader::FileReader::metadata(&footer);
    let chunks: usize = meta.row_groups().iter().map(|g| g.num_columns()).sum();
    assert!(
        chunks >= 8,
        "a base file of {chunks} column chunks tests nothing"
    );

    let proxy = counting_proxy(&moto.endpoint);
    let cache = tmp.path().join("mc").display().to_string();
    let m = mount(url, &proxy.endpoint, &["--merge-cache", &cache]);
    let local_cache = tmp.path().join("mc-local").display().to_string();
    let lm = MountGuard::mount(&local, &["--merge-cache", &local_cache]);
    let rel = |m: &MountGuard| {
        let dir = m.path().join("merged/latest/part=b");
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
        assert_eq!(names.len(), 1, "one merged file in {}", dir.display());
        names[0].path()
    };
    let merged = std::fs::read(rel(&m)).unwrap();
    let gets = proxy.gets_of(&base);
    assert!(
        (1..=2 + meta.num_row_groups()).contains(&gets),
        "{gets} GETs of the base file ({} row groups, {chunks} column chunks): {:?}",
        meta.num_row_groups(),
        proxy.gets.lock().unwrap()
    );
    // The same merge as of the table on a disk (read as parquet asks there).
    assert!(
        merged == std::fs::read(rel(&lm)).unwrap(),
        "merged bytes differ"
    );
    println!(
        "{gets} GETs of the base file for {} row groups",
        meta.num_row_groups()
    );

    // A fresh mount over the warm merge cache finds the merge from the log's block headers:
    // a ranged GET of each block's front and back, not the log whole, and nothing of the base.
    drop(m);
    let (base_gets, log_gets) = (proxy.gets_of(&base), proxy.lines_of("GET", &log).len());
    let m = mount(url, &proxy.endpoint, &["--merge-cache", &cache]);
    assert!(
        std::fs::read(rel(&m)).unwrap() == merged,
        "the cached merge differs"
    );
    let lines = proxy.lines_of("GET", &log)[log_gets..].to_vec();
    assert!(
        (1..=2).contains(&lines.len()) && lines.iter().all(|l| l.ends_with(" (range)")),
        "the log's GETs on a fresh mount: {lines:?}"
    );
    assert_eq!(
        proxy.gets_of(&base),
        base_gets,
        "the base file was read again"
    );
}

/// Ask the kernel to drop its cached pages of `f` (FUSE honours POSIX_FADV_DONTNEED).
fn drop_kernel_cache(f: &std::fs::File) {
    use std::os::fd::AsRawFd;
    // SAFETY: a plain advice call on an open descriptor.
    unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
}

/// Open, read a little, delete the object (as the cleaner does), read on to the end.
fn read_across_a_delete(m: &MountGuard, url: &str, endpoint: &str, rel: &str, want: &[u8]) {
    let mut f = std::fs::File::open(m.path().join("latest").join(rel)).unwrap();
    let mut got = vec![0; 1 << 20];
    f.read_exact(&mut got).unwrap();
    assert!(seam(url, endpoint)
        .delete(&TablePath::new(rel).unwrap())
        .unwrap());
    f.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "bytes differ after the delete");
}

#[test]
fn on_a_versioned_bucket_a_file_deleted_while_open_reads_to_its_end() {
    let Some((tmp, moto)) = setup() else { return };
    moto.create_versioned_bucket("vlake");
    let url = "s3://vlake/reads";
    let local = tmp.path().join("t");
    let files = big_table(&local, url, &moto.endpoint, 16 << 20);
    let m = mount(url, &moto.endpoint, &[]);
    let want = std::fs::read(local.join(&files[0])).unwrap();
    read_across_a_delete(&m, url, &moto.endpoint, &files[0], &want);
}

#[test]
fn with_a_cache_deleted_files_read_to_their_end_and_cached_ones_cost_no_get() {
    let Some((tmp, moto)) = setup() else { return };
    let url = "s3://lake/cached";
    let local = tmp.path().join("t");
    let files = big_table(&local, url, &moto.endpoint, 16 << 20);
    let cache = tmp.path().join("cache");
    let proxy = counting_proxy(&moto.endpoint);
    let cache_arg = format!("--cache={}", cache.display());
    let (a, b) = (&files[0], &files[1]);
    let want_a = std::fs::read(local.join(a)).unwrap();
    let want_b = std::fs::read(local.join(b)).unwrap();
    {
        let m = mount(url, &proxy.endpoint, &[&cache_arg, "--max-cache-size=1G"]);
        // Deleted while open: the fill begun at open has the rest.
        read_across_a_delete(&m, url, &moto.endpoint, b, &want_b);
        // Read a whole: the cache holds it once the fill completes.
        assert!(std::fs::read(m.path().join("latest").join(a)).unwrap() == want_a);
        let t0 = Instant::now();
        while count_sums(&cache) < 2 {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the cache was not filled"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // A new daemon on the same cache: reading `a` again makes no GET at all.
    let m = mount(url, &proxy.endpoint, &[&cache_arg]);
    let before = proxy.gets_of(a);
    assert!(std::fs::read(m.path().join("latest").join(a)).unwrap() == want_a);
    assert_eq!(proxy.gets_of(a), before, "GETs of a cached file");
    drop(m);
    // Without the cache the same read makes GETs (what the proxy counts is real).
    let m = mount(url, &proxy.endpoint, &[]);
    let before = proxy.gets_of(a);
    assert!(std::fs::read(m.path().join("latest").join(a)).unwrap() == want_a);
    assert!(
        proxy.gets_of(a) > before,
        "{:?}",
        proxy.gets.lock().unwrap()
    );
}

fn count_sums(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".sum"))
                .count()
        })
        .unwrap_or(0)
}

/// A merge-on-read table for the memory ceiling: eight large base files in `part=a`, and in
/// `part=b` one file group of 200,000 rows with a log updating one row in five. Uploaded to
/// `url`; the paths of the eight large files.
fn ceiling_table(local: &Path, url: &str, endpoint: &str) -> Vec<String> {
    use hudifs_core::timeline::Action;
    use hudifs_testkit::generator::rows_with_ids;
    let spec = TableSpec::new("ceiling", TableType::MergeOnRead, 9).partitioned_by(&["part"], true);
    let mut w = TableWriter::create(local, spec, 1_767_225_600_000).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    for _ in 0..8 {
        t.insert_sized("part=a", 32 << 20).unwrap();
    }
    t.complete().unwrap();
    let big = w.events().last().unwrap().written.clone();
    let ids: Vec<i64> = (0..200_000).collect();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let group = t.insert("part=b", &rows_with_ids(1, &ids)).unwrap();
    t.complete().unwrap();
    let upd: Vec<i64> = ids.iter().copied().step_by(5).collect();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update("part=b", &group, &rows_with_ids(2, &upd)).unwrap();
    t.complete().unwrap();
    let store = seam(url, endpoint);
    support::put_tree(&store, local);
    big
}

/// The serving daemon of `m` (from `hudifs status --json`, once the daemon has written its
/// state) and how many times it was restarted.
fn serving(m: &MountGuard) -> (u32, u64) {
    for _ in 0..100 {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_hudifs"))
            .args(["status", "--json"])
            .arg(m.path())
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let row = &v["mounts"][0];
        if let (Some(pid), Some(restarts)) = (row["pid"].as_u64(), row["restarts"].as_u64()) {
            return (pid as u32, restarts);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("no serving daemon in hudifs status: {}", m.log_text());
}

/// A line of `/proc/PID/status` in bytes (`VmHWM:`, `VmRSS:`).
fn status_bytes(pid: u32, key: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in /proc/{pid}/status"));
    kb << 10
}

/// Eight slow sequential readers of the large files (checking every byte) and a read of the
/// merged slice, all at once, on a fresh mount with `extra`; the serving daemon's peak resident
/// size and the merged file's bytes.
fn ceiling_load(
    url: &str,
    endpoint: &str,
    local: &Path,
    big: &[String],
    extra: &[&str],
) -> (u64, Vec<u8>) {
    let m = mount(url, endpoint, extra);
    let (pid, _) = serving(&m);
    let latest = m.path().join("latest");
    let merged_dir = m.path().join("merged/latest/part=b");
    // A read that never finishes (a take of memory nobody wakes) fails the test instead of
    // hanging it: the daemon is killed, and every read waiting on it fails.
    let keeper = m.pid.filter(|&k| k != pid);
    let (done, watch) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        let hung = matches!(
            watch.recv_timeout(Duration::from_secs(300)),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout)
        );
        if hung {
            // The keeper first: it would start another serving daemon on the same connection.
            for p in keeper.into_iter().chain([pid]) {
                // SAFETY: a signal to a process this test started.
                unsafe { libc::kill(p as i32, libc::SIGKILL) };
            }
        }
        hung
    });
    let load = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        std::thread::scope(|s| {
            let readers: Vec<_> = big
                .iter()
                .map(|rel| {
                    let (view, want) = (latest.join(rel), local.join(rel));
                    s.spawn(move || {
                        let want = std::fs::read(want).unwrap();
                        let mut f = std::fs::File::open(&view).unwrap();
                        let mut got = Vec::with_capacity(want.len());
                        let mut buf = vec![0u8; 1 << 20];
                        loop {
                            let n = f.read(&mut buf).unwrap();
                            if n == 0 {
                                break;
                            }
                            got.extend_from_slice(&buf[..n]);
                            // A slow consumer: the prefetcher runs ahead of it.
                            std::thread::sleep(Duration::from_millis(30));
                        }
                        assert!(got == want, "{rel}: bytes differ");
                    })
                })
                .collect();
            let merge = s.spawn(|| {
                let names: Vec<_> = std::fs::read_dir(&merged_dir)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .collect();
                assert_eq!(names.len(), 1, "{names:?}");
                std::fs::read(&names[0]).unwrap()
            });
            for r in readers {
                r.join().unwrap();
            }
            let merged = merge.join().unwrap();
            (status_bytes(pid, "VmHWM:"), merged)
        })
    }));
    drop(done);
    assert!(
        !watchdog.join().unwrap(),
        "the load did not finish in 300 s: {}",
        m.log_text()
    );
    let (hwm, merged) = load.unwrap_or_else(|p| std::panic::resume_unwind(p));
    assert_eq!(
        serving(&m),
        (pid, 0),
        "the serving daemon was restarted under the load: {}",
        m.log_text()
    );
    (hwm, merged)
}

/// `--max-memory` (docs/SEMANTICS.md §9, "Memory ceiling"): the load that takes the daemon well
/// over 112 MiB without a ceiling stays under it with one, every byte right and the merged file
/// the same.
#[test]
fn eight_readers_and_a_merge_stay_under_the_memory_ceiling() {
    let Some((tmp, moto)) = setup() else { return };
    let url = "s3://lake/ceiling";
    let local = tmp.path().join("t");
    let big = ceiling_table(&local, url, &moto.endpoint);
    let cache = |n: &str| tmp.path().join(n).display().to_string();
    let (free, merged_free) = ceiling_load(
        url,
        &moto.endpoint,
        &local,
        &big,
        &["--merge-cache", &cache("mc1")],
    );
    let ceiling: u64 = 112 << 20;
    let (capped, merged_capped) = ceiling_load(
        url,
        &moto.endpoint,
        &local,
        &big,
        &["--merge-cache", &cache("mc2"), "--max-memory", "112M"],
    );
    eprintln!(
        "peak resident: {} MiB without a ceiling, {} MiB with --max-memory 112M",
        free >> 20,
        capped >> 20
    );
    assert!(
        free > ceiling + (16 << 20),
        "the load must take the daemon over the ceiling without one ({} MiB)",
        free >> 20
    );
    assert!(
        capped <= ceiling,
        "peak {} MiB over --max-memory 112M",
        capped >> 20
    );
    assert!(merged_free.len() > 1 << 20);
    assert!(merged_free == merged_capped, "the merged file is the same");
}

/// A ceiling that leaves less than 64 MiB above what the daemon holds is refused at mount.
#[test]
fn a_ceiling_too_small_to_read_is_refused() {
    let Some((tmp, moto)) = setup() else { return };
    let url = "s3://lake/small";
    big_table(&tmp.path().join("t"), url, &moto.endpoint, 1 << 20);
    let mnt = tmp.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let out = std::process::Command::new(hudifs_testkit::mount::binary("hudifs"))
        .args(["mount", url])
        .arg(&mnt)
        .args(["--endpoint-url", &moto.endpoint, "--force-path-style"])
        .args(["--max-memory", "40M"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("--max-memory 40 MiB is too small"), "{err}");
    assert!(!hudifs_testkit::mount::is_mounted(&mnt));
}

/// A remount of an `s3://` table whose `delta/` log a mount before saved (SEMANTICS §11.5) has
/// the newest snapshot's metadata without a read of a data file: the saved log holds the footer
/// of a file of each schema, so taking it back reads nothing of the table but what every mount
/// reads (`.hoodie/` and the listing of the partitions). The log files are the bytes the first
/// mount served.
#[test]
fn a_remount_has_delta_metadata_without_reading_a_data_file() {
    let Some((tmp, moto)) = setup() else { return };
    let url = "s3://lake/remount";
    let local = tmp.path().join("t");
    let spec = TableSpec::new("remount", TableType::CopyOnWrite, 8).partitioned_by(&["city"], true);
    let mut w = TableWriter::create(&local, spec, 1_767_225_600_000).unwrap();
    for (i, city) in ["a", "b", "c"].iter().enumerate() {
        let action = w.write_action();
        let mut t = w.begin(action).unwrap();
        t.insert(
            &format!("city={city}"),
            &hudifs_testkit::generator::rows(i as u64, 20),
        )
        .unwrap();
        t.complete().unwrap();
    }
    support::put_tree(&seam(url, &moto.endpoint), &local);
    let proxy = counting_proxy(&moto.endpoint);
    let cache = tmp.path().join("cache");
    let extra = ["--merge-cache", cache.to_str().unwrap()];
    let read_log = |m: &MountGuard| -> Vec<(String, Vec<u8>)> {
        let dir = m.path().join("delta/_delta_log");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|n| {
                let bytes = std::fs::read(dir.join(&n)).unwrap();
                (n, bytes)
            })
            .collect()
    };
    // GETs of objects outside `.hoodie/` (not LISTs) from request `from` on.
    let data_gets = |from: usize| -> Vec<String> {
        proxy.gets.lock().unwrap()[from..]
            .iter()
            .filter(|l| !l.contains("list-type") && !l.contains("/.hoodie/"))
            .cloned()
            .collect()
    };
    let mut first = mount(url, &proxy.endpoint, &extra);
    let built = read_log(&first);
    assert_eq!(
        built.len(),
        3,
        "{:?}",
        built.iter().map(|b| &b.0).collect::<Vec<_>>()
    );
    assert_eq!(
        data_gets(0).len(),
        3,
        "a first build reads each file's footer"
    );
    first.unmount();
    let from = proxy.gets.lock().unwrap().len();
    let again = mount(url, &proxy.endpoint, &extra);
    assert_eq!(read_log(&again), built);
    let log = again.log_text();
    assert!(
        log.contains("3 of 3 versions taken from the saved log"),
        "{log}"
    );
    assert_eq!(
        data_gets(from),
        Vec::<String>::new(),
        "reads of data files on the remount"
    );
}
