//! Figure 5: freshness and the cost of a commit.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use hudifs_core::timeline::{self, State};
use hudifs_testkit::generator::TableWriter;

use crate::gen::{partition_name, write_wide};
use crate::record::{append, max, Record, Side};
use crate::sys::{cpu_seconds, getxattr, hudifs_bin, Mount};
use crate::{Common, Res};

struct CommitRun {
    delays_ms: Vec<f64>,
    cpu_ms: Vec<f64>,
    loop_cpu_ms_per_commit: f64,
}

/// Mount `w`'s table, then `commits` times: begin a commit of one file, complete it staged,
/// wait until the daemon has seen its inflight file, rename the completed file into the
/// timeline and poll latest/'s `user.hudi.instant` until it names the commit.
fn commit_loop(
    w: &mut TableWriter,
    c: &Common,
    extra: &[String],
    env: &[(&str, &str)],
    commits: usize,
    jitter_ms: u64,
) -> Res<CommitRun> {
    let hudifs = hudifs_bin(c);
    let root = PathBuf::from(w.describe_root());
    let staging =
        hudifs_storage::TablePath::new(".hoodie/.temp/bench-staging").map_err(|e| e.to_string())?;
    let mnt = Mount::with_env(&hudifs, &root, &c.mnt, extra, env)?;
    let latest = mnt.latest();
    // Warm the view once.
    getxattr(&latest, "user.hudi.instant");
    let action = w.write_action();
    let layout = w.layout();
    let (mut delays, mut cpus) = (Vec::new(), Vec::new());
    let cpu_start = cpu_seconds(mnt.pid);
    let mut jitter: u64 = 0x2545_f491_4f6c_dd1d;
    for file_no in 0..commits {
        let mut t = w.begin(action).map_err(|e| e.to_string())?;
        let instant = t.instant().to_string();
        t.insert_linked(&[(partition_name(file_no % 7).as_str(), 1)])
            .map_err(|e| e.to_string())?;
        let staged = t.complete_staged(&staging).map_err(|e| e.to_string())?;
        // Wait until the daemon shows the inflight instant in timeline/, i.e. it has taken
        // the snapshot with it, then let it settle.
        let inflight = mnt
            .guard
            .path()
            .join("timeline")
            .join(timeline::instant_file_name(
                &instant,
                None,
                action,
                State::Inflight,
                layout,
            ));
        let wait = Instant::now();
        while !inflight.exists() {
            if wait.elapsed() > Duration::from_secs(120) {
                return Err(format!("the daemon never showed {}", inflight.display()));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        // Settle, plus a pseudo-random wait so commits do not land in phase with polling.
        jitter = jitter
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let extra_ms = if jitter_ms == 0 {
            0
        } else {
            (jitter >> 33) % jitter_ms
        };
        std::thread::sleep(Duration::from_millis(100 + extra_ms));
        let cpu0 = cpu_seconds(mnt.pid);
        let t0 = Instant::now();
        staged.publish().map_err(|e| e.to_string())?;
        loop {
            if getxattr(&latest, "user.hudi.instant").as_deref() == Some(instant.as_str()) {
                break;
            }
            if t0.elapsed() > Duration::from_secs(120) {
                return Err(format!("latest/ never showed {instant}"));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        delays.push(t0.elapsed().as_secs_f64() * 1000.0);
        cpus.push((cpu_seconds(mnt.pid) - cpu0) * 1000.0);
    }
    let loop_cpu = (cpu_seconds(mnt.pid) - cpu_start) * 1000.0 / commits.max(1) as f64;
    let _ = std::fs::remove_dir(root.join(staging.as_str()));
    Ok(CommitRun {
        delays_ms: delays,
        cpu_ms: cpus,
        loop_cpu_ms_per_commit: loop_cpu,
    })
}

fn fresh_table(work: &Path, name: &str, files: usize, instants: usize) -> Res<TableWriter> {
    let dir = work.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    write_wide(&dir, files, instants, 7, 9, 0)
}

/// The daemon's environment for the polling figures: inotify off, so the timeline is polled at
/// `--poll-interval` as it is on network and FUSE file systems.
const POLLING: &[(&str, &str)] = &[("HUDIFS_NO_INOTIFY", "1")];

#[allow(clippy::too_many_arguments)]
pub fn bench_freshness(
    work: &Path,
    files: usize,
    short: usize,
    long: usize,
    poll_ms: u64,
    fast_poll_ms: u64,
    c: &Common,
) -> Res<()> {
    std::fs::create_dir_all(work).map_err(|e| e.to_string())?;
    let commits = c.reps;
    let cpu_note = |r: &CommitRun| {
        format!(
            "daemon CPU (utime+stime, 10 ms ticks): {:.1} ms per commit from rename to visible (mean), {:.1} ms per commit over the whole loop incl. requested/inflight refreshes and idle polling",
            r.cpu_ms.iter().sum::<f64>() / r.cpu_ms.len().max(1) as f64,
            r.loop_cpu_ms_per_commit
        )
    };
    // 5a: delay from the rename to latest/ showing the commit.
    let mut w = fresh_table(work, "fresh-short", files, short)?;
    // The daemon's default poll interval is 1000 ms: jitter over one second.
    let default = commit_loop(&mut w, c, &[], &[], commits, 1000)?;
    let poll = commit_loop(
        &mut w,
        c,
        &[format!("--poll-interval={poll_ms}")],
        POLLING,
        commits,
        poll_ms,
    )?;
    let title_note = format!(
        "{short}-instant table of {files} files; median over {commits} commits of one file; delay = rename of the completed instant file -> latest/'s user.hudi.instant names it (polled every 0.2 ms)"
    );
    let r = Record::new(
        5,
        "freshness-default",
        "Commit visible in latest/, default mount (inotify when the daemon has it) vs 100 ms",
        Side::new("delay", "ms", default.delays_ms.clone()),
        Side::new("bound", "ms", vec![100.0]),
        "median delay / 100 ms",
        Some(("<=", 1.0)),
        vec![
            title_note.clone(),
            format!("max delay {:.1} ms", max(&default.delays_ms)),
            cpu_note(&default),
        ],
    );
    append(&c.out, &r)?;
    let r = Record::new(
        5,
        &format!("freshness-poll-{poll_ms}ms"),
        &format!("Commit visible in latest/ when polling (inotify off) every {poll_ms} ms vs one interval"),
        Side::new("delay", "ms", poll.delays_ms.clone()),
        Side::new("bound", "ms", vec![poll_ms as f64]),
        "median delay / poll interval",
        Some(("<=", 1.0)),
        vec![
            title_note,
            format!("max delay {:.1} ms", max(&poll.delays_ms)),
            cpu_note(&poll),
        ],
    );
    append(&c.out, &r)?;
    drop(w);
    std::fs::remove_dir_all(work.join("fresh-short")).map_err(|e| e.to_string())?;

    // 5b: one commit applied on a long vs a short timeline, same number of files.
    for (label, extra, env, jitter) in [
        (
            format!("poll-{fast_poll_ms}ms"),
            vec![format!("--poll-interval={fast_poll_ms}")],
            POLLING,
            fast_poll_ms,
        ),
        ("default".to_string(), Vec::new(), &[][..], 1000),
    ] {
        let mut ws = fresh_table(work, "cost-short", files, short)?;
        let mut wl = fresh_table(work, "cost-long", files, long)?;
        // Interleave: alternate the tables, a few commits at a time.
        let (mut rs, mut rl) = (Vec::new(), Vec::new());
        let rounds = 2;
        let per = commits.div_ceil(rounds);
        for _ in 0..rounds {
            rs.push(commit_loop(&mut ws, c, &extra, env, per, jitter)?);
            rl.push(commit_loop(&mut wl, c, &extra, env, per, jitter)?);
        }
        let join = |v: &[CommitRun]| CommitRun {
            delays_ms: v.iter().flat_map(|r| r.delays_ms.clone()).collect(),
            cpu_ms: v.iter().flat_map(|r| r.cpu_ms.clone()).collect(),
            loop_cpu_ms_per_commit: v.iter().map(|r| r.loop_cpu_ms_per_commit).sum::<f64>()
                / v.len().max(1) as f64,
        };
        let (s, l) = (join(&rs), join(&rl));
        let r = Record::new(
            5,
            &format!("commit-cost-{label}"),
            &format!(
                "One commit applied (rename -> visible), {long} vs {short} instants, {label} mount"
            ),
            Side::new(&format!("{long} instants"), "ms", l.delays_ms.clone()),
            Side::new(&format!("{short} instants"), "ms", s.delays_ms.clone()),
            "long-timeline delay / short-timeline delay",
            Some(("<=", 1.5)),
            vec![
                format!(
                    "both tables hold {files} files; {} commits each",
                    l.delays_ms.len()
                ),
                format!("long: {}", cpu_note(&l)),
                format!("short: {}", cpu_note(&s)),
            ],
        );
        append(&c.out, &r)?;
        drop((ws, wl));
    }
    for t in ["cost-short", "cost-long"] {
        let _ = std::fs::remove_dir_all(work.join(t));
    }
    Ok(())
}
