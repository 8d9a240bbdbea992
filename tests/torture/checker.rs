//! The checks: everything the readers saw against the writer's log, each violation by kind;
//! and their self-test on synthetic observations against a synthetic log.

use std::collections::BTreeSet;

use crate::log::{Clean, FileInfo, Log, Snapshot};
use crate::report::Report;
use crate::seen::{fnv1a, Content, DirList, Seen, Walk};

/// How long after the writer logged an `as_of` view as final a reader must see it so.
const FINAL_SLACK_MS: i64 = 3000;
/// How far `latest/` may lag behind the writer before it counts as a violation.
const STALE_LIMIT_MS: i64 = 10_000;

/// The newest clean completed at or before `at` retains only commits at or after its bound;
/// `T` older than that (and not a savepoint) is refused.
fn refused_by_clean(log: &Log, t: &str, at: i64) -> bool {
    clean_not_retaining(log, t, at, |c| c.completed)
}

/// A clean that does not retain `T` was requested at or before `at`: from then on it may be
/// deleting files of `T`'s snapshot, and the daemon may refuse `as_of/T` (it does as soon as it
/// sees the clean's plan) — or, in the moment before it sees it, list what is left.
fn clean_under_way(log: &Log, t: &str, at: i64) -> bool {
    clean_not_retaining(log, t, at, |c| c.requested)
}

/// Whether a clean that does not retain `T` (not a savepoint) had reached, by `at`, the moment
/// `when` tells.
fn clean_not_retaining(log: &Log, t: &str, at: i64, when: fn(&Clean) -> i64) -> bool {
    !log.savepoints.contains(t)
        && log
            .cleans
            .iter()
            .any(|c| when(c) > 0 && when(c) <= at && t < c.retain.as_str())
}

fn check_listed(log: &Log, rep: &mut Report, what: &str, files: &BTreeSet<String>, end: i64) {
    for f in files {
        match log.files.get(f) {
            None => rep.bad("uncommitted-file-listed", format!(
                "{what} listed {f}, which no completed write wrote (inflight, crashed, rolled back or not a data file)"
            )),
            Some(i) if i.published > end => rep.bad("file-listed-before-commit", format!(
                "{what} listed {f} by {} before its completed instant file was renamed into place ({} ms early)",
                i.writer,
                i.published - end
            )),
            Some(_) => {}
        }
    }
}

fn check_latest(log: &Log, rep: &mut Report, w: &Walk) {
    rep.latest_walks += 1;
    rep.dirs_read += 1 + w.dirs.len() as u64;
    let top = match &w.top {
        Ok(t) => t,
        Err(e) => {
            return rep.bad(
                "latest-unreadable",
                format!("latest/ could not be listed: errno {e}"),
            )
        }
    };
    let files = w.files();
    check_listed(log, rep, "latest/", &files, w.end);
    if w.x1 > w.x2 {
        return rep.bad(
            "latest-xattr-backwards",
            format!(
                "user.hudi.instant of latest/ went backwards during a walk: {:?} then {:?}",
                w.x1, w.x2
            ),
        );
    }
    let cands: Vec<(usize, &Snapshot)> = log
        .snapshots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.published <= w.end && s.instant >= w.x1 && s.instant <= w.x2)
        .collect();
    let exact = cands
        .iter()
        .rev()
        .find(|(_, s)| s.files == files && (w.x1 != w.x2 || s.instant == w.x1));
    if let Some((i, _)) = exact {
        if let Some(next) = log.snapshots.get(i + 1) {
            if next.published < w.start {
                let stale = w.start - next.published;
                rep.max_stale_ms = rep.max_stale_ms.max(stale);
                if stale > STALE_LIMIT_MS {
                    rep.bad("latest-stale", format!(
                        "latest/ showed a snapshot {stale} ms after the writer replaced it (instant {:?})",
                        w.x1
                    ));
                }
            }
        }
        return;
    }
    // No single snapshot: the walk crossed a switch. Each directory must still show one.
    let distinct: BTreeSet<&BTreeSet<String>> = cands.iter().map(|(_, s)| &s.files).collect();
    let crossed = w.x1 != w.x2 || distinct.len() > 1;
    let top_dirs: BTreeSet<String> = top.iter().cloned().collect();
    let mut ok = crossed && cands.iter().any(|(_, s)| s.partitions() == top_dirs);
    let mut unmatched = Vec::new();
    if !cands.iter().any(|(_, s)| s.partitions() == top_dirs) {
        unmatched.push(format!("top {top_dirs:?}"));
    }
    for (p, l) in &w.dirs {
        if let DirList::Err(e) = l {
            if *e != libc::ENOENT {
                rep.bad(
                    "latest-unreadable",
                    format!("latest/{p} could not be listed: errno {e}"),
                );
            }
        }
        let matched = match l {
            DirList::Names(n) if !n.is_empty() => {
                cands.iter().any(|(_, s)| s.in_partition(p) == *n)
            }
            _ => cands.iter().any(|(_, s)| !s.partitions().contains(p)),
        };
        if !matched {
            unmatched.push(format!("{p}: {l:?}"));
        }
        ok &= matched;
    }
    if ok {
        rep.latest_spanning += 1;
        return;
    }
    let nearest = cands
        .iter()
        .min_by_key(|(_, s)| s.files.symmetric_difference(&files).count())
        .map(|(_, s)| s);
    let diff = nearest
        .map(|s| {
            format!(
                "nearest snapshot {:?}: missing {:?}, extra {:?}",
                s.instant,
                s.files.difference(&files).take(4).collect::<Vec<_>>(),
                files.difference(&s.files).take(4).collect::<Vec<_>>()
            )
        })
        .unwrap_or_else(|| "no snapshot published yet".into());
    rep.bad("latest-mixes-snapshots", format!(
        "a walk of latest/ ({}..{} ms, user.hudi.instant {:?} then {:?}) matches no snapshot the writer logged: {diff}; candidates {:?}; no candidate shows {unmatched:?}",
        w.start, w.end, w.x1, w.x2, cands.iter().map(|(_, s)| &s.instant).collect::<Vec<_>>()
    ));
}

fn check_as_of(log: &Log, rep: &mut Report, t: &str, w: &Walk) {
    rep.as_of_walks += 1;
    rep.dirs_read += 1 + w.dirs.len() as u64;
    let final_view = log
        .finals
        .get(t)
        .filter(|(at, _)| w.start >= at + FINAL_SLACK_MS);
    match &w.top {
        Err(e) => {
            rep.as_of_refused += 1;
            // Refused: only when a clean retained newer commits (or the time is not final yet
            // and vanished, which a completed instant never does).
            if !clean_under_way(log, t, w.end) {
                rep.bad(
                    "as-of-refused",
                    format!("as_of/{t} was refused (errno {e}) though no clean had moved past it"),
                );
            }
        }
        Ok(_) => {
            let files = w.files();
            check_listed(log, rep, &format!("as_of/{t}"), &files, w.end);
            if w.x1.as_deref() != Some(t) && w.x1.is_some() {
                rep.bad("as-of-xattr", format!("as_of/{t} names instant {:?}", w.x1));
            }
            if let Some((_, expected)) = final_view {
                rep.as_of_final += 1;
                if refused_by_clean(log, t, w.start - FINAL_SLACK_MS) {
                    rep.bad("as-of-served-after-clean", format!(
                        "as_of/{t} was still listed {} ms after a clean retained only newer commits (SEMANTICS.md §5.3: it must be refused; its files may be gone)",
                        w.start
                            - log
                                .cleans
                                .iter()
                                .filter(|c| t < c.retain.as_str())
                                .map(|c| c.completed)
                                .min()
                                .unwrap_or(w.start)
                    ));
                } else if files != *expected && clean_under_way(log, t, w.end) {
                    rep.as_of_clean_races += 1;
                } else if files != *expected {
                    rep.bad("as-of-changed", format!(
                        "as_of/{t}, final since the writer logged it, changed: missing {:?}, extra {:?}",
                        expected.difference(&files).take(4).collect::<Vec<_>>(),
                        files.difference(expected).take(4).collect::<Vec<_>>()
                    ));
                }
            }
        }
    }
}

fn check_content(log: &Log, rep: &mut Report, what: &str, path: &str, c: &Content) {
    rep.files_opened += 1;
    rep.bytes_read += c.len;
    let Some(info) = log.files.get(path) else {
        return; // reported by the listing checks
    };
    if c.len != info.size || c.hash != info.hash {
        return rep.bad(
            "file-content",
            format!(
                "{what} {path}: read {} bytes (hash {}), the writer wrote {} (hash {})",
                c.len, c.hash, info.size, info.hash
            ),
        );
    }
    if info.base {
        match &c.rows {
            Some(Ok(n)) if Some(*n) == info.rows => {}
            Some(Ok(n)) => rep.bad(
                "file-content",
                format!(
                    "{what} {path}: footer says {n} rows, the write recorded {:?}",
                    info.rows
                ),
            ),
            Some(Err(e)) => rep.bad("file-content", format!("{what} {path}: {e}")),
            None => rep.bad(
                "file-content",
                format!("{what} {path}: not read as a base file"),
            ),
        }
    }
}

pub fn analyse(log: &Log, seen: &[Seen], rep: &mut Report) {
    for s in seen {
        match s {
            Seen::Latest(w) => check_latest(log, rep, w),
            Seen::AsOf { t, walk } => check_as_of(log, rep, t, walk),
            Seen::AsOfDir { end, names } => {
                rep.as_of_dirs += 1;
                for n in names {
                    match log.as_of_names.get(n) {
                        Some(at) if *at <= *end => {}
                        Some(at) => rep.bad(
                            "as-of-dir",
                            format!("as_of/ listed {n} {} ms before it completed", at - end),
                        ),
                        None => rep.bad(
                            "as-of-dir",
                            format!("as_of/ listed {n}, which is no completed write or savepoint"),
                        ),
                    }
                }
            }
            Seen::Read {
                as_of,
                path,
                listed_start,
                open_start,
                end,
                result,
                xattr_instant,
            } => {
                let what = match as_of {
                    None => "latest/".to_string(),
                    Some(t) => format!("as_of/{t}/"),
                };
                // A view that could still change may drop a file between listing and open.
                let final_listing = as_of.as_ref().is_some_and(|t| {
                    log.finals
                        .get(t)
                        .is_some_and(|(at, _)| *listed_start >= at + FINAL_SLACK_MS)
                });
                match result {
                    Ok(c) => {
                        check_content(log, rep, &format!("reading {what}"), path, c);
                        if let (Some(x), Some(info)) = (xattr_instant, log.files.get(path)) {
                            if *x != info.writer {
                                rep.bad(
                                    "file-xattr",
                                    format!(
                                        "{what}{path}: user.hudi.instant {x}, written by {}",
                                        info.writer
                                    ),
                                );
                            }
                        }
                    }
                    Err((true, e))
                        if rep.store && *e == libc::EIO && log.deleted.contains_key(path) =>
                    {
                        rep.eio_after_delete += 1;
                    }
                    Err((true, e)) => rep.bad(
                        if *e == libc::ENOENT {
                            "open-file-enoent"
                        } else {
                            "read-error"
                        },
                        format!("{what}{path}: opened, then reading failed with errno {e}"),
                    ),
                    Err((false, e)) if *e == libc::ENOENT => {
                        // Legitimate when the view moved on before the open: latest/ switched
                        // to a snapshot without the file, or the file was deleted (cleaned) and
                        // the as_of view is no longer served.
                        let written = log.files.get(path).map_or(i64::MAX, |i| i.published);
                        let switched = match as_of {
                            Some(_) => !final_listing,
                            None => log.snapshots.iter().any(|s| {
                                s.published >= written
                                    && s.published <= *end
                                    && !s.files.contains(path)
                            }),
                        };
                        // An as_of view may be refused once a clean retains only newer commits:
                        // legitimate between listing and open, a violation when the listing
                        // itself came after the clean.
                        let refused_at = |at: i64| {
                            as_of
                                .as_deref()
                                .is_some_and(|t| refused_by_clean(log, t, at))
                        };
                        let may_be_refused_at = |at: i64| {
                            as_of
                                .as_deref()
                                .is_some_and(|t| clean_under_way(log, t, at))
                        };
                        let cleaned = log.deleted.get(path).is_some_and(|d| *d <= *end);
                        let when = format!("listed at {listed_start}, opened at {open_start}");
                        if switched {
                            rep.gone_before_open += 1;
                        } else if refused_at(*listed_start - FINAL_SLACK_MS) {
                            rep.bad(
                                "as-of-served-after-clean",
                                format!(
                                    "{what}{path} was listed after a clean retained only newer commits ({when}: ENOENT, deleted on disk: {cleaned})"
                                ),
                            );
                        } else if may_be_refused_at(*end) || cleaned {
                            rep.gone_before_open += 1;
                        } else {
                            rep.bad(
                                "listed-file-missing",
                                format!(
                                    "{what}{path}: open failed with ENOENT though the file is in the view and on disk ({when})"
                                ),
                            );
                        }
                    }
                    Err((false, e)) => rep.bad(
                        "read-error",
                        format!("{what}{path}: open failed with errno {e}"),
                    ),
                }
            }
            Seen::Held {
                path,
                opened,
                read_at,
                deleted,
                result,
            } => {
                rep.held_read += 1;
                if *deleted {
                    rep.held_read_after_delete += 1;
                }
                match result {
                    Ok(c) => {
                        let before = rep.violations.len();
                        check_content(log, rep, "held open", path, c);
                        if *deleted && rep.violations.len() == before {
                            rep.held_intact_after_delete += 1;
                        }
                    }
                    Err(e) if rep.store && *deleted && *e == libc::EIO => {
                        rep.eio_after_delete += 1;
                    }
                    Err(e) => rep.bad(if *e == libc::ENOENT { "open-file-enoent" } else { "open-file-unreadable" }, format!(
                        "{path}: opened at {opened}, reading at {read_at} (deleted on disk: {deleted}) failed with errno {e}"
                    )),
                }
            }
            Seen::Timeline { name, result } => {
                rep.timeline_reads += 1;
                match result {
                    Ok(_) => {}
                    // Rollbacks delete the inflight files of failed writes.
                    Err(e) if *e == libc::ENOENT => {}
                    Err(e) => rep.bad(
                        "timeline-unreadable",
                        format!("timeline/{name}: read failed with errno {e}"),
                    ),
                }
            }
        }
    }
}

/// Each check fires on what it guards against (synthetic observations against a synthetic
/// writer log), and stays quiet on legitimate ones.
pub fn the_checks_catch_violations() {
    let bytes = b"log file bytes".to_vec();
    let hash = fnv1a(&bytes);
    let info = |writer: &str, published: i64| FileInfo {
        writer: writer.into(),
        published,
        rows: None,
        size: bytes.len() as u64,
        hash: hash.clone(),
        base: false,
    };
    let mut log = Log::default();
    log.files
        .insert("p/.a_1.log.1_0-1-1".into(), info("1", 100));
    log.files
        .insert("p/.b_2.log.1_0-1-2".into(), info("2", 200));
    log.files
        .insert("q/.c_3.log.1_0-1-3".into(), info("3", 300));
    let snap = |instant: &str, published: i64, files: &[&str]| Snapshot {
        instant: Some(instant.into()),
        published,
        files: files.iter().map(|f| f.to_string()).collect(),
    };
    log.snapshots = vec![
        snap("1", 100, &["p/.a_1.log.1_0-1-1"]),
        snap("2", 200, &["p/.a_1.log.1_0-1-1", "p/.b_2.log.1_0-1-2"]),
        snap("3", 300, &["q/.c_3.log.1_0-1-3"]),
    ];
    log.finals.insert(
        "2".into(),
        (
            250,
            ["p/.a_1.log.1_0-1-1", "p/.b_2.log.1_0-1-2"]
                .map(String::from)
                .into(),
        ),
    );
    log.cleans.push(Clean {
        retain: "3".into(),
        requested: 9_000,
        completed: 10_000,
    });
    log.deleted.insert("p/.a_1.log.1_0-1-1".into(), 10_000);
    log.as_of_names = [
        ("1".to_string(), 100),
        ("2".to_string(), 200),
        ("3".to_string(), 300),
    ]
    .into();

    let walk = |start: i64, x1: &str, x2: &str, dirs: &[(&str, &[&str])]| Walk {
        start,
        end: start + 10,
        x1: Some(x1.into()),
        x2: Some(x2.into()),
        top: Ok(dirs.iter().map(|(d, _)| d.to_string()).collect()),
        dirs: dirs
            .iter()
            .map(|(d, n)| {
                (
                    d.to_string(),
                    DirList::Names(n.iter().map(|s| s.to_string()).collect()),
                )
            })
            .collect(),
    };
    let kinds = |seen: Vec<Seen>| -> Vec<&'static str> {
        let mut rep = Report::default();
        analyse(&log, &seen, &mut rep);
        rep.violations.iter().map(|(k, _)| *k).collect()
    };
    let read =
        |as_of: Option<&str>, path: &str, listed: i64, result: Result<Vec<u8>, (bool, i32)>| {
            let result = result.map(|b| Content::of(path, &b));
            Seen::Read {
                as_of: as_of.map(String::from),
                path: path.into(),
                listed_start: listed,
                open_start: listed + 20,
                end: listed + 30,
                result,
                xattr_instant: None,
            }
        };
    let ab: &[&str] = &[".a_1.log.1_0-1-1", ".b_2.log.1_0-1-2"];

    // Legitimate: one snapshot, a walk across the switch from 2 to 3, a read, a refusal after
    // the clean, an ENOENT after latest/ moved on.
    assert_eq!(
        kinds(vec![Seen::Latest(walk(250, "2", "2", &[("p", ab)]))]),
        Vec::<&str>::new()
    );
    // (p listed at root under snapshot 2, gone by the time it is opened under snapshot 3.)
    let mut across = walk(290, "2", "3", &[("p", ab)]);
    across.dirs.insert("p".into(), DirList::Err(libc::ENOENT));
    assert_eq!(kinds(vec![Seen::Latest(across)]), Vec::<&str>::new());
    assert_eq!(
        kinds(vec![read(
            None,
            "p/.b_2.log.1_0-1-2",
            250,
            Ok(bytes.clone())
        )]),
        Vec::<&str>::new()
    );
    let mut refused = walk(20_000, "2", "2", &[]);
    refused.top = Err(libc::ENOENT);
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: refused.clone()
        }]),
        Vec::<&str>::new()
    );
    assert_eq!(
        kinds(vec![read(
            None,
            "p/.b_2.log.1_0-1-2",
            290,
            Err((false, libc::ENOENT))
        )]),
        Vec::<&str>::new()
    );
    // While the clean is under way (requested, not completed), as_of/2 may be refused, or list
    // what the cleaner left in the moment before the daemon saw the clean's plan.
    let mut during = walk(9_500, "2", "2", &[]);
    during.top = Err(libc::ENOENT);
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: during
        }]),
        Vec::<&str>::new()
    );
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: walk(9_500, "2", "2", &[("p", &[".b_2.log.1_0-1-2"])])
        }]),
        Vec::<&str>::new()
    );
    // ... and a file listed in it just before may then fail to open.
    assert_eq!(
        kinds(vec![read(
            Some("2"),
            "p/.b_2.log.1_0-1-2",
            8_990,
            Err((false, libc::ENOENT))
        )]),
        Vec::<&str>::new()
    );
    assert_eq!(
        kinds(vec![read(
            Some("2"),
            "p/.b_2.log.1_0-1-2",
            5_000,
            Err((false, libc::ENOENT))
        )]),
        ["listed-file-missing"]
    );

    // Violations.
    assert_eq!(
        kinds(vec![Seen::Latest(walk(
            250,
            "2",
            "2",
            &[("p", &[".a_1.log.1_0-1-1", ".x_9.log.1_0-1-9"])]
        ))]),
        ["uncommitted-file-listed", "latest-mixes-snapshots"]
    );
    assert_eq!(
        kinds(vec![Seen::Latest(walk(150, "1", "1", &[("p", ab)]))]),
        ["file-listed-before-commit", "latest-mixes-snapshots"]
    );
    // Files of snapshot 2 and 3 in one walk whose xattr stayed at 3.
    assert_eq!(
        kinds(vec![Seen::Latest(walk(
            350,
            "3",
            "3",
            &[("p", ab), ("q", &[".c_3.log.1_0-1-3"])]
        ))]),
        ["latest-mixes-snapshots"]
    );
    assert_eq!(
        kinds(vec![Seen::Latest(walk(30_000, "2", "2", &[("p", ab)]))]),
        ["latest-stale"]
    );
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: walk(5_000, "2", "2", &[("p", &[".a_1.log.1_0-1-1"])])
        }]),
        ["as-of-changed"]
    );
    let mut early_refusal = refused;
    early_refusal.start = 5_000;
    early_refusal.end = 5_010;
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: early_refusal
        }]),
        ["as-of-refused"]
    );
    assert_eq!(
        kinds(vec![Seen::AsOf {
            t: "2".into(),
            walk: walk(20_000, "2", "2", &[("p", ab)])
        }]),
        ["as-of-served-after-clean"]
    );
    let mut corrupt = bytes.clone();
    corrupt[0] ^= 1;
    assert_eq!(
        kinds(vec![read(None, "p/.b_2.log.1_0-1-2", 250, Ok(corrupt))]),
        ["file-content"]
    );
    assert_eq!(
        kinds(vec![read(
            None,
            "p/.b_2.log.1_0-1-2",
            250,
            Ok(bytes[..4].to_vec())
        )]),
        ["file-content"]
    );
    assert_eq!(
        kinds(vec![read(
            None,
            "q/.c_3.log.1_0-1-3",
            350,
            Err((false, libc::ENOENT))
        )]),
        ["listed-file-missing"]
    );
    assert_eq!(
        kinds(vec![read(
            None,
            "q/.c_3.log.1_0-1-3",
            350,
            Err((true, libc::EIO))
        )]),
        ["read-error"]
    );
    assert_eq!(
        kinds(vec![Seen::Held {
            path: "p/.a_1.log.1_0-1-1".into(),
            opened: 150,
            read_at: 11_000,
            deleted: true,
            result: Err(libc::ENOENT),
        }]),
        ["open-file-enoent"]
    );
    assert_eq!(
        kinds(vec![Seen::AsOfDir {
            end: 250,
            names: vec!["1".into(), "3".into(), "7".into()]
        }]),
        ["as-of-dir", "as-of-dir"]
    );
    assert_eq!(
        kinds(vec![Seen::Timeline {
            name: "2.deltacommit".into(),
            result: Err(libc::EIO)
        }]),
        ["timeline-unreadable"]
    );
}
