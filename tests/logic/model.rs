//! The reference-model test: random runs of the writer simulation (inserts, updates, slow and
//! crashing writes, rollbacks, cleans, compactions, insert-overwrites, savepoints, archival)
//! write a table into memory ([`MemStore`]); a [`HudiFs`] reads the same store through the
//! storage seam and follows it as a mount does; after every step every view it shows must be
//! what the simulator's own model of the table says:
//!
//! - `latest/`: the writer's expected snapshot, and `user.hudi.instant` its newest write;
//! - `as_of/<T>` for every completed write `T`: the expected snapshot at `T`, or refused when
//!   the cleaner no longer retains `T` (unless `T` is a savepoint);
//! - `incremental/<prev>..<T>` for every window `incremental/` lists: the groups the selected
//!   writes touched, as of the newest one, with the BLOCK cut on table version 6, and the
//!   selected instants in `user.hudi.commit_times`.
//!
//! No kernel, no disk: thousands of cases run in seconds in the ordinary `cargo test`
//! (`PROPTEST_CASES` sets how many; the default here is 1,000).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::sync::Arc;
use std::time::Duration;

use hudifs::follow::Follower;
use hudifs::fs::{FsOptions, HudiFs, Kind, ROOT};
use hudifs_core::table::TableType;
use hudifs_core::timeline::{Action, State};
use hudifs_storage::MemStore;
use hudifs_testkit::generator::sim::{Sim, SimOptions};
use hudifs_testkit::generator::TableWriter;
use proptest::prelude::*;

const CLOCK: i64 = 1_767_225_600_000;

/// A view as the file system shows it: its files, or the errno of its refusal.
type Shown = Result<Vec<String>, i32>;

fn errno(e: hudifs_core::error::Error) -> i32 {
    hudifs::fuse::errno_of(&e)
}

fn lookup(fs: &HudiFs, path: &[&str]) -> Result<u64, i32> {
    let mut ino = ROOT;
    for p in path {
        ino = fs.lookup(ino, OsStr::new(p)).map_err(errno)?.attr.ino;
    }
    Ok(ino)
}

/// Every file below directory `ino`, as paths relative to it.
fn files_below(fs: &HudiFs, ino: u64, prefix: &str, out: &mut Vec<String>) -> Result<(), i32> {
    for e in fs.readdir_entries(ino).map_err(errno)? {
        let path = if prefix.is_empty() {
            e.name.to_string()
        } else {
            format!("{prefix}/{}", e.name)
        };
        match e.entry.attr.kind {
            Kind::Dir => files_below(fs, e.entry.attr.ino, &path, out)?,
            Kind::File => out.push(path),
        }
    }
    Ok(())
}

pub(crate) fn shown(fs: &HudiFs, path: &[&str]) -> Shown {
    let ino = lookup(fs, path)?;
    let mut out = Vec::new();
    files_below(fs, ino, "", &mut out)?;
    out.sort();
    Ok(out)
}

pub(crate) fn xattr(fs: &HudiFs, path: &[&str], name: &str) -> Option<String> {
    let ino = lookup(fs, path).ok()?;
    fs.xattrs(ino)
        .ok()?
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
}

pub(crate) fn paths(w: &TableWriter, t: Option<&str>) -> Vec<String> {
    let mut p: Vec<String> = w.expected_view(t).into_iter().map(|f| f.path).collect();
    p.sort();
    p
}

/// `partition/fileId` of a data file path.
fn group_of(path: &str) -> String {
    let (partition, name) = path.rsplit_once('/').unwrap_or(("", path));
    let file_id = if let Some(l) = hudifs_core::listing::parse_log_name(name) {
        l.file_id
    } else {
        name.split('_').next().unwrap_or("").to_string()
    };
    format!("{partition}/{file_id}")
}

/// What the model says of one window `(start, end]`: its files (or a refusal) and the
/// instants it selects.
fn expected_window(
    w: &TableWriter,
    retained: Option<&str>,
    start: &str,
    end: &str,
) -> (Result<Vec<String>, ()>, Vec<String>) {
    let by_completion = w.spec().version >= 8;
    let mut end = end.to_string();
    if !by_completion {
        // BLOCK: a pending write inside the window cuts it just before itself.
        if let Some(p) = w
            .pending_writes()
            .into_iter()
            .filter(|p| p.as_str() > start && p.as_str() <= end.as_str())
            .min()
        {
            end = hudifs_core::timefmt::minus_one_ms(&p).unwrap();
        }
    }
    let selected: Vec<String> = w
        .completed_writes()
        .iter()
        .filter(|(r, c)| {
            let at = if by_completion {
                c.as_str()
            } else {
                r.as_str()
            };
            at > start && at <= end.as_str()
        })
        .map(|(r, _)| r.clone())
        .collect();
    let Some(l) = selected.iter().max().cloned() else {
        return (Ok(Vec::new()), selected);
    };
    if retained.is_some_and(|b| l.as_str() < b) && !w.savepoints().contains(&l) {
        return (Err(()), selected);
    }
    let mut touched = BTreeSet::new();
    let mut replaced = BTreeSet::new();
    for e in w.events() {
        if e.state != State::Completed || !selected.contains(&e.instant) {
            continue;
        }
        if !matches!(
            e.action,
            Action::Commit | Action::DeltaCommit | Action::ReplaceCommit | Action::Compaction
        ) {
            continue;
        }
        touched.extend(e.written.iter().map(|p| group_of(p)));
        replaced.extend(e.replaced.iter().cloned());
    }
    let files = paths(w, Some(&l))
        .into_iter()
        .filter(|p| {
            let g = group_of(p);
            touched.contains(&g) && !replaced.contains(&g)
        })
        .collect();
    (Ok(files), selected)
}

/// Compare every view `fs` shows with the model; the differences, described.
fn check(fs: &HudiFs, sim: &Sim<std::io::Sink>, step: &str) -> Vec<String> {
    let w = sim.writer();
    let mut problems = Vec::new();
    let mut differ = |what: String, got: &dyn std::fmt::Debug, want: &dyn std::fmt::Debug| {
        problems.push(format!(
            "{step}: {what}:\n  shown {got:?}\n  model {want:?}"
        ));
    };
    // latest/
    let latest = w.completed_writes().keys().next_back().cloned();
    let got = shown(fs, &["latest"]);
    let want = paths(w, None);
    if got.as_ref() != Ok(&want) {
        differ("latest/".into(), &got, &want);
    }
    let instant = xattr(fs, &["latest"], "user.hudi.instant");
    if instant != latest {
        differ("latest/ user.hudi.instant".into(), &instant, &latest);
    }
    // as_of/<T>
    let retained = sim.retained();
    for t in w.completed_writes().keys() {
        let got = shown(fs, &["as_of", t]);
        let kept = retained.is_none_or(|b| t.as_str() >= b) || w.savepoints().contains(t);
        if kept {
            let want = paths(w, Some(t));
            if got.as_ref() != Ok(&want) {
                differ(format!("as_of/{t}"), &got, &want);
            }
        } else if got != Err(libc::ENOENT) {
            differ(
                format!("as_of/{t} (older than the retained {retained:?})"),
                &got,
                &"refused",
            );
        }
    }
    // incremental/<prev>..<T>, as listed.
    let windows = lookup(fs, &["incremental"])
        .and_then(|ino| fs.readdir_entries(ino).map_err(errno))
        .unwrap_or_default();
    let listed: Vec<String> = windows.iter().map(|e| e.name.to_string()).collect();
    let want_listed = {
        let by_completion = w.spec().version >= 8;
        let mut times: Vec<&String> = w
            .completed_writes()
            .iter()
            .map(|(r, c)| if by_completion { c } else { r })
            .collect();
        times.sort();
        let mut prev = hudifs_core::instant_time::EARLIEST.to_string();
        let mut out = Vec::new();
        // The active timeline's writes only: archived ones are not listed.
        let active: BTreeSet<String> = fs
            .snapshot()
            .timeline()
            .completed
            .values()
            .map(|i| i.completion_or_requested().to_string())
            .collect();
        for t in times {
            if active.contains(t) {
                out.push(format!("{prev}..{t}"));
                prev = t.clone();
            }
        }
        out
    };
    if listed != want_listed {
        differ("incremental/ listing".into(), &listed, &want_listed);
    }
    for name in &listed {
        let (start, end) = name.split_once("..").unwrap();
        let (want, selected) = expected_window(w, retained, start, end);
        let got = shown(fs, &["incremental", name]);
        match (&got, &want) {
            (Ok(g), Ok(e)) if g == e => {}
            (Err(libc::ENOENT), Err(())) => {}
            _ => differ(format!("incremental/{name}"), &got, &want),
        }
        if want.is_ok() {
            let times =
                xattr(fs, &["incremental", name], "user.hudi.commit_times").unwrap_or_default();
            let got_sel: Vec<&str> = times.split(',').filter(|s| !s.is_empty()).collect();
            if got_sel != selected {
                differ(
                    format!("incremental/{name} commit_times"),
                    &got_sel,
                    &selected,
                );
            }
        }
    }
    problems
}

/// One case: `ops` simulated operations on a table of `version` / `cow`, checked after each.
fn run(seed: u64, version: u32, cow: bool, ops: u64) -> Result<u64, String> {
    let store = Arc::new(MemStore::new("model"));
    let opts = SimOptions {
        seed,
        version,
        table_type: if cow {
            TableType::CopyOnWrite
        } else {
            TableType::MergeOnRead
        },
        duration: Duration::from_secs(3600),
        max_ops: Some(ops),
        ops_per_sec: 0.0,
        slow_ms: 0,
        logical_clock_ms: Some(CLOCK),
        archive: true,
    };
    let mut sim =
        Sim::create_in(store.clone(), opts, std::io::sink()).map_err(|e| e.to_string())?;
    let fs = HudiFs::with_store(store, FsOptions::default()).map_err(|e| e.to_string())?;
    let mut follower = Follower::new();
    let mut checked = 0;
    for n in 1..=ops {
        sim.step().map_err(|e| format!("step {n}: {e}"))?;
        if let Some(inv) = follower
            .poll_once(&fs, Duration::ZERO)
            .map_err(|e| format!("step {n}: following: {e}"))?
        {
            fs.switched(&inv);
        }
        let op = sim.last_op().unwrap_or("?");
        let step = format!(
            "seed {seed} v{version} {} step {n} ({op})",
            if cow { "cow" } else { "mor" }
        );
        let problems = check(&fs, &sim, &step);
        if !problems.is_empty() {
            let facts = fs.snapshot().ctx.facts();
            return Err(format!(
                "{}\n  the file system's timeline: pending {}, hollow blockers {}, completed {}; \
                 the writer's pending writes {:?}",
                problems.join("\n"),
                facts["pending"],
                facts["hollow_blockers"],
                facts["completed"],
                sim.writer().pending_writes()
            ));
        }
        checked += 1;
    }
    // What the follower built step by step equals a fresh read of the same store.
    let fresh =
        HudiFs::with_store(fs.store().clone(), FsOptions::default()).map_err(|e| e.to_string())?;
    if fs.snapshot().ctx.facts() != fresh.snapshot().ctx.facts() {
        return Err(format!(
            "seed {seed} v{version}: followed facts differ from a fresh read"
        ));
    }
    Ok(checked)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(1000),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_view_matches_the_writers_model_after_every_step(
        seed in any::<u64>(),
        version in prop::sample::select(vec![6u32, 8, 9]),
        cow in any::<bool>(),
        ops in 1u64..24,
    ) {
        if let Err(e) = run(seed, version, cow, ops) {
            prop_assert!(false, "{e}");
        }
    }
}

/// The same, a few long runs with fixed seeds (so a regression names its seed).
#[test]
fn long_runs_match_the_model() {
    let mut steps = 0;
    let mut per_version: BTreeMap<String, u64> = BTreeMap::new();
    for (seed, version, cow) in [
        (1, 6, false),
        (2, 8, false),
        (3, 9, false),
        (4, 6, true),
        (5, 9, true),
    ] {
        let n = run(seed, version, cow, 80).unwrap_or_else(|e| panic!("{e}"));
        steps += n;
        *per_version.entry(format!("v{version}")).or_default() += n;
    }
    eprintln!("{steps} steps checked against the model: {per_version:?}");
}
