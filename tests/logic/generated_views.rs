//! The visibility rules on tables the fixtures lack, written with the project's own generator
//! (real Parquet, Hudi log blocks and timeline files): pending compactions, failed and
//! rolled-back writes, cleaning and savepoints, hollow commits, duplicate base files, archived
//! history, log-only groups, pending replacecommits.

use hudifs_testkit::support;

use std::path::Path;

use hudifs_core::error::Result;
use hudifs_core::instant_time::InstantTime;
use hudifs_core::rules::{self, View};
use hudifs_core::table::TableType;
use hudifs_core::timeline::Action;
use hudifs_core::viewkey::ViewKey;
use hudifs_testkit::generator::{rows, rows_with_ids, TableSpec, TableWriter};

const START: i64 = 1_767_225_600_000;

fn view(root: &Path, key: ViewKey, ro: bool) -> Result<Vec<String>> {
    Ok(support::snapshot(root).resolve(&key, ro)?.paths())
}

fn t(s: &str) -> InstantTime {
    InstantTime::parse(s).unwrap()
}

fn latest(root: &Path) -> Vec<String> {
    view(root, ViewKey::Latest, false).unwrap()
}

fn as_of(root: &Path, t: &str) -> Result<Vec<String>> {
    view(root, ViewKey::AsOf(self::t(t)), false)
}

fn window(root: &Path, start: Option<&str>, end: Option<&str>) -> Result<View> {
    support::snapshot(root).resolve(
        &ViewKey::Incremental {
            start: start.map(t),
            end: end.map(t),
        },
        false,
    )
}

fn completion(root: &Path, t: &str) -> String {
    let snap = support::snapshot(root);
    snap.timeline().completed[t]
        .completion
        .clone()
        .unwrap()
        .to_string()
}

fn name(path: &str) -> &str {
    path.rsplit('/').next().unwrap()
}

fn mor(version: u32) -> (tempfile::TempDir, TableWriter) {
    let dir = tempfile::tempdir().unwrap();
    let spec = TableSpec::new("t", TableType::MergeOnRead, version).partitioned_by(&["p"], true);
    let w = TableWriter::create(&dir.path().join("t"), spec, START).unwrap();
    (dir, w)
}

fn cow(version: u32) -> (tempfile::TempDir, TableWriter) {
    let dir = tempfile::tempdir().unwrap();
    let spec = TableSpec::new("t", TableType::CopyOnWrite, version).partitioned_by(&["p"], true);
    let w = TableWriter::create(&dir.path().join("t"), spec, START).unwrap();
    (dir, w)
}

/// Pending compaction (SEMANTICS.md §3.3): its partial output is hidden and its slice merges
/// into the previous one; once completed, the new slice takes over.
#[test]
fn pending_compaction_merges_and_hides_its_output() {
    for version in [6, 9] {
        let (_d, mut w) = mor(version);
        let p = w.partition_path(&["a"]).unwrap();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        let f = t.insert(&p, &rows(1, 4)).unwrap();
        let t1 = t.complete().unwrap();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.update(&p, &f, &rows_with_ids(2, &[1000])).unwrap();
        t.complete().unwrap();
        let c = w.schedule_compaction(&[(p.as_str(), f.as_str())]).unwrap();
        let mut t = w.begin(Action::DeltaCommit).unwrap();
        t.update(&p, &f, &rows_with_ids(3, &[1001])).unwrap();
        let t4 = t.complete().unwrap();
        w.run_compaction(&c, false).unwrap(); // partial output, still pending
        let root = w.root().to_path_buf();

        let l = latest(&root);
        assert_eq!(l.len(), 3, "v{version}: base t1 + two logs: {l:?}");
        assert!(l
            .iter()
            .any(|x| name(x).ends_with(&format!("_{t1}.parquet"))));
        assert!(
            !l.iter().any(|x| x.ends_with(&format!("_{c}.parquet"))),
            "v{version}: {l:?}"
        );
        assert_eq!(l.iter().filter(|x| name(x).starts_with('.')).count(), 2);
        assert_eq!(
            view(&root, ViewKey::Latest, true).unwrap().len(),
            1,
            "read-optimized: the old base only"
        );
        // as_of before the compaction: slice t1 with only the first log.
        let before = as_of(&root, &hudifs_core::timefmt::minus_one_ms(&c).unwrap()).unwrap();
        assert_eq!(before.len(), 2, "v{version}: {before:?}");

        w.run_compaction(&c, true).unwrap();
        let l = latest(&root);
        assert!(
            l.iter().any(|x| x.ends_with(&format!("_{c}.parquet"))),
            "v{version}: {l:?}"
        );
        if version == 6 {
            // v6 logs after scheduling carry the compaction's instant: they join the new slice.
            assert_eq!(l.len(), 2, "{l:?}");
        } else {
            // v9: the log of t4 completed after c was requested: it belongs to slice c.
            assert!(
                l.iter().any(|x| name(x).contains(&format!("_{t4}.log."))),
                "{l:?}"
            );
            assert_eq!(l.len(), 2, "{l:?}");
        }
    }
}

/// A failed first write must not count as "archived, hence committed" (SEMANTICS.md §1.4).
#[test]
fn failed_first_write_stays_hidden() {
    for version in [6, 9] {
        let (_d, mut w) = cow(version);
        let p = w.partition_path(&["a"]).unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(&p, &rows(1, 3)).unwrap();
        let failed = t.abandon();
        let mut t = w.begin(Action::Commit).unwrap();
        t.insert(&p, &rows(2, 3)).unwrap();
        let ok = t.complete().unwrap();
        let root = w.root().to_path_buf();
        let l = latest(&root);
        assert_eq!(l.len(), 1, "v{version}: {l:?}");
        assert!(l[0].ends_with(&format!("_{ok}.parquet")));
        assert!(!l.iter().any(|x| x.contains(&failed)));
        // After a rollback too.
        w.rollback(&failed).unwrap();
        assert_eq!(latest(&root).len(), 1);
    }
}

/// v6 rollback of a log write: the failed data log and the rollback's command-block log are
/// hidden (strict logs, §4.5); a later committed log is shown.
#[test]
fn v6_rolled_back_log_and_command_block_are_hidden() {
    let (_d, mut w) = mor(6);
    let p = w.partition_path(&["a"]).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let f = t.insert(&p, &rows(1, 3)).unwrap();
    t.complete().unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    t.update(&p, &f, &rows_with_ids(2, &[1000])).unwrap();
    let failed = t.abandon();
    let root = w.root().to_path_buf();
    assert_eq!(latest(&root).len(), 1, "in-flight log hidden");
    w.rollback(&failed).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let good = t.update(&p, &f, &rows_with_ids(3, &[1001])).unwrap();
    t.complete().unwrap();
    let l = latest(&root);
    let logs_on_disk = std::fs::read_dir(root.join(&p))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".log.")
        })
        .count();
    assert_eq!(logs_on_disk, 3, "failed log, rollback block, good log");
    assert_eq!(l.len(), 2, "{l:?}");
    assert!(
        l.iter().any(|x| x.ends_with(name(&good))),
        "{l:?} vs {good}"
    );
}

/// The clean guard (§4.6): time travel below the retention bound is refused unless the time is
/// a savepoint; an incremental window is refused only when its newest instant is below it.
#[test]
fn clean_guard_and_savepoints() {
    let (_d, mut w) = cow(9);
    let p = w.partition_path(&["a"]).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    let f = t.insert(&p, &rows(1, 3)).unwrap();
    let c1 = t.complete().unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.update(&p, &f, &rows_with_ids(2, &[1000])).unwrap();
    let c2 = t.complete().unwrap();
    w.savepoint(&c2).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.update(&p, &f, &rows_with_ids(3, &[1001])).unwrap();
    let c3 = t.complete().unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.update(&p, &f, &rows_with_ids(4, &[1002])).unwrap();
    let c4 = t.complete().unwrap();
    let root = w.root().to_path_buf();
    let old = w.group_files(&p, &f);
    let c1_file = old
        .iter()
        .find(|x| x.ends_with(&format!("_{c1}.parquet")))
        .unwrap();
    w.clean(&c3, &[(p.as_str(), name(c1_file))]).unwrap();

    let err = as_of(&root, &c1).unwrap_err();
    assert!(err.to_string().contains("cleaner"), "{err}");
    assert_eq!(hudifs::fuse::errno_of(&err), libc::ENOENT);
    assert_eq!(
        as_of(&root, &c2).unwrap().len(),
        1,
        "a savepoint passes the guard"
    );
    assert_eq!(as_of(&root, &c3).unwrap().len(), 1);
    assert_eq!(latest(&root).len(), 1);
    assert!(latest(&root)[0].ends_with(&format!("_{c4}.parquet")));
    // Windows: refused when L < bound; served when only the start is older.
    // v9 windows are over completion times.
    let done = |t: &str| completion(&root, t);
    assert!(
        window(&root, None, Some(&done(&c1))).is_err(),
        "L = c1 is below the bound"
    );
    let v = window(&root, Some(&done(&c1)), Some(&done(&c2))).unwrap();
    assert_eq!(v.selected, vec![c2.clone()], "L = c2 is a savepoint");
    let v = window(&root, None, Some(&done(&c4))).unwrap();
    assert_eq!(
        v.selected,
        vec![c1.clone(), c2.clone(), c3.clone(), c4.clone()]
    );
    assert_eq!(v.files.len(), 1, "merge-ready as of L = c4");
    let v = window(&root, Some(&done(&c4)), None).unwrap();
    assert!(v.selected.is_empty() && v.files.is_empty(), "empty window");
    // The model says so.
    let snap = support::snapshot(&root);
    let m = rules::model(&snap.ctx, &snap.meta);
    assert_eq!(m["retention_bound"], c3.as_str());
    assert_eq!(m["savepoints"][0], c2.as_str());
}

/// A clean still in flight (here: one that crashed after deleting) already bounds time travel by
/// its plan: it has deleted, or is deleting, what it does not retain (SEMANTICS.md §5.3).
#[test]
fn a_clean_in_flight_bounds_time_travel_by_its_plan() {
    for version in [6, 9] {
        let (_d, mut w) = cow(version);
        let p = w.partition_path(&["a"]).unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        let f = t.insert(&p, &rows(1, 3)).unwrap();
        let c1 = t.complete().unwrap();
        let mut t = w.begin(Action::Commit).unwrap();
        t.update(&p, &f, &rows_with_ids(2, &[1000])).unwrap();
        let c2 = t.complete().unwrap();
        let root = w.root().to_path_buf();
        let c1_file = w.group_files(&p, &f)[0].clone();
        let k = w.clean(&c2, &[(p.as_str(), name(&c1_file))]).unwrap();
        // The completed clean file never made it: the clean is inflight.
        let completed = w
            .take_published()
            .into_iter()
            .map(|f| f.name)
            .find(|n| n.starts_with(&k) && n.ends_with(".clean"))
            .unwrap();
        std::fs::remove_file(w.local_path(w.timeline_dir()).join(&completed)).unwrap();
        let snap = support::snapshot(&root);
        assert!(snap.timeline().pending().any(|i| i.requested == k));
        let err = as_of(&root, &c1).unwrap_err();
        assert!(err.to_string().contains("cleaner"), "v{version}: {err}");
        assert_eq!(as_of(&root, &c2).unwrap().len(), 1, "v{version}");
        assert_eq!(
            rules::model(&snap.ctx, &snap.meta)["retention_bound"],
            c2.as_str(),
            "v{version}"
        );
    }
}

/// v6 hollow commits: a pending write inside a window cuts it just before itself (BLOCK).
#[test]
fn v6_block_policy_cuts_windows_at_the_oldest_pending_write() {
    let (_d, mut w) = cow(6);
    let p = w.partition_path(&["a"]).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&p, &rows(1, 3)).unwrap();
    let c1 = t.complete().unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&p, &rows(2, 3)).unwrap();
    let pending = t.abandon();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&p, &rows(3, 3)).unwrap();
    let c3 = t.complete().unwrap();
    let root = w.root().to_path_buf();
    let v = window(&root, None, None).unwrap();
    assert_eq!(v.selected, vec![c1.clone()]);
    assert_eq!(
        v.effective_end.as_deref(),
        hudifs_core::timefmt::minus_one_ms(&pending).as_deref()
    );
    assert_eq!(v.files.len(), 1);
    let v = window(&root, Some(&pending), None).unwrap();
    assert_eq!(
        v.selected,
        vec![c3.clone()],
        "a window starting at the blocker is not cut"
    );
    // v9 selects by completion time: no hollow commits, nothing cut.
    let (_d9, mut w9) = cow(9);
    let p9 = w9.partition_path(&["a"]).unwrap();
    let mut t = w9.begin(Action::Commit).unwrap();
    t.insert(&p9, &rows(1, 3)).unwrap();
    t.complete().unwrap();
    let mut t = w9.begin(Action::Commit).unwrap();
    t.insert(&p9, &rows(2, 3)).unwrap();
    t.abandon();
    let mut t = w9.begin(Action::Commit).unwrap();
    t.insert(&p9, &rows(3, 3)).unwrap();
    t.complete().unwrap();
    assert_eq!(window(w9.root(), None, None).unwrap().selected.len(), 2);
}

/// Two committed base files of one (fileId, instant) after a task retry: the one the commit
/// metadata names is shown (SEMANTICS.md §3.7); without metadata to tell, both are hidden.
#[test]
fn duplicate_base_files_prefer_the_metadata_path() {
    let (_d, mut w) = cow(6);
    let p = w.partition_path(&["a"]).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&p, &rows(1, 3)).unwrap();
    let c1 = t.complete().unwrap();
    let root = w.root().to_path_buf();
    let real = latest(&root).pop().unwrap();
    let base =
        hudifs_core::listing::parse_base_name(name(&real), &["parquet".to_string()]).unwrap();
    let dup = hudifs_core::listing::base_file_name(&base.file_id, "9-9-9", &c1, "parquet");
    std::fs::copy(root.join(&real), root.join(&p).join(&dup)).unwrap();
    assert_eq!(latest(&root), vec![real.clone()]);
    // Without metadata (an empty, legal commit file) neither can be trusted.
    std::fs::write(root.join(format!(".hoodie/{c1}.commit")), b"").unwrap();
    assert!(latest(&root).is_empty());
}

/// History before the active timeline: files of archived instants count as committed for
/// snapshots (SEMANTICS.md §6.8); time travel into the archived range needs the archive, and an archive that
/// cannot be read refuses it (SEMANTICS.md §5.6) while latest is unaffected.
#[test]
fn archived_commits_stay_live_and_a_damaged_archive_refuses_history() {
    let (_d, mut w) = cow(6);
    let p = w.partition_path(&["a"]).unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&p, &rows(1, 3)).unwrap();
    let c1 = t.complete().unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&p, &rows(2, 3)).unwrap();
    let c2 = t.complete().unwrap();
    let mut t = w.begin(Action::Commit).unwrap();
    t.insert(&p, &rows(3, 3)).unwrap();
    let c3 = t.complete().unwrap();
    let root = w.root().to_path_buf();
    // Archive c1: its timeline files leave the active timeline.
    for e in std::fs::read_dir(root.join(".hoodie")).unwrap() {
        let e = e.unwrap();
        if e.file_name().to_string_lossy().starts_with(&c1) {
            std::fs::remove_file(e.path()).unwrap();
        }
    }
    assert_eq!(
        latest(&root).len(),
        3,
        "the archived commit's file group is still live"
    );
    assert_eq!(
        as_of(&root, &hudifs_core::timefmt::minus_one_ms(&c2).unwrap())
            .unwrap()
            .len(),
        1
    );
    std::fs::create_dir_all(root.join(".hoodie/archived")).unwrap();
    std::fs::write(
        root.join(".hoodie/archived/.commits_.archive.1_1-0-1"),
        b"#HUDI#",
    )
    .unwrap();
    let err = as_of(&root, &c1).unwrap_err();
    assert!(err.to_string().contains("archived"), "{err}");
    assert!(window(&root, None, None).is_err());
    assert!(
        window(&root, Some(&c1), None).is_err(),
        "(c1, c2) may hold archived instants"
    );
    assert_eq!(window(&root, Some(&c2), None).unwrap().selected, vec![c3]);
}

/// A file group of log files only (SEMANTICS.md §1.6) and a pending replacecommit that replaces nothing yet.
#[test]
fn log_only_groups_and_pending_replacecommits() {
    let (_d, mut w) = mor(9);
    let p = w.partition_path(&["a"]).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let f = t.insert(&p, &rows(1, 3)).unwrap();
    t.complete().unwrap();
    let root = w.root().to_path_buf();
    // A log-only group: a committed log with no base file.
    let only = latest(&root).pop().unwrap();
    std::fs::remove_file(root.join(&only)).unwrap();
    let mut t = w.begin(Action::DeltaCommit).unwrap();
    let log = t.update(&p, &f, &rows_with_ids(2, &[1000])).unwrap();
    t.complete().unwrap();
    let log = format!("{p}/{log}");
    assert_eq!(latest(&root), vec![log.clone()]);
    assert!(
        view(&root, ViewKey::Latest, true).unwrap().is_empty(),
        "read-optimized drops it"
    );
    // A pending insert-overwrite: nothing replaced, its new files hidden.
    let mut t = w.begin(Action::ReplaceCommit).unwrap();
    t.replace_group(&p, &f).unwrap();
    t.insert(&p, &rows(3, 2)).unwrap();
    t.abandon();
    assert_eq!(latest(&root), vec![log]);
}

/// Archived history reached through the archive (SEMANTICS.md §6.8): after archiving, time travel and
/// windows into the archived range answer exactly as before; a damaged archive is refused.
#[test]
fn views_into_archived_history_answer_as_before_archiving() {
    for (version, table_type) in [
        (6, TableType::CopyOnWrite),
        (6, TableType::MergeOnRead),
        (9, TableType::CopyOnWrite),
        (9, TableType::MergeOnRead),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let spec = TableSpec::new("t", table_type, version).partitioned_by(&["p"], true);
        let mut w = TableWriter::create(&dir.path().join("t"), spec, START).unwrap();
        let write = w.write_action();
        let a = w.partition_path(&["a"]).unwrap();
        let b = w.partition_path(&["b"]).unwrap();
        let mut times = Vec::new();
        let mut t = w.begin(write).unwrap();
        let f = t.insert(&a, &rows(1, 4)).unwrap();
        let g = t.insert(&b, &rows(2, 4)).unwrap();
        times.push(t.complete().unwrap());
        let mut t = w.begin(write).unwrap();
        t.update(&a, &f, &rows_with_ids(3, &[1000])).unwrap();
        times.push(t.complete().unwrap());
        let mut t = w.begin(Action::ReplaceCommit).unwrap();
        t.replace_group(&b, &g).unwrap();
        t.insert(&b, &rows(4, 2)).unwrap();
        times.push(t.complete().unwrap());
        let mut t = w.begin(write).unwrap();
        t.update(&a, &f, &rows_with_ids(5, &[1001])).unwrap();
        times.push(t.complete().unwrap());
        // Hudi archives a replacecommit only once the groups it replaced are cleaned.
        let replaced: Vec<String> = w.group_files(&b, &g);
        let replaced: Vec<(&str, &str)> = replaced.iter().map(|p| (b.as_str(), name(p))).collect();
        w.clean(&times[2], &replaced).unwrap();
        let root = w.root().to_path_buf();

        let snap = support::snapshot(&root);
        let sel = |r: &str| -> String {
            let i = &snap.timeline().completed[r];
            i.completion
                .as_ref()
                .map(|c| c.to_string())
                .unwrap_or_else(|| r.to_string())
        };
        let windows: Vec<(Option<String>, Option<String>)> = vec![
            (None, Some(sel(&times[1]))),
            (None, None),
            (Some(sel(&times[0])), Some(sel(&times[2]))),
        ];
        let ok = |r: Result<Vec<String>>| r.map_err(|e| hudifs::fuse::errno_of(&e));
        let before_as_of: Vec<_> = times.iter().map(|t| ok(as_of(&root, t))).collect();
        assert!(before_as_of[0].is_err(), "cleaned history is refused");
        let win = |s: &Option<String>, e: &Option<String>| {
            window(&root, s.as_deref(), e.as_deref())
                .map(|v| (v.selected.clone(), v.paths()))
                .map_err(|e| hudifs::fuse::errno_of(&e))
        };
        let before_windows: Vec<_> = windows.iter().map(|(s, e)| win(s, e)).collect();
        let before_latest = latest(&root);

        let archived = w.archive(&times[2]).unwrap();
        assert!(archived.len() >= 3, "v{version}: {archived:?}");
        let snap = support::snapshot(&root);
        assert_eq!(
            snap.timeline().active_start.as_deref(),
            Some(times[3].as_str())
        );
        assert!(snap.timeline().archive_nonempty);

        assert_eq!(
            latest(&root),
            before_latest,
            "v{version}: latest needs no archive"
        );
        for (t, before) in times.iter().zip(&before_as_of) {
            assert_eq!(&ok(as_of(&root, t)), before, "v{version} as_of {t}");
        }
        for ((s, e), before) in windows.iter().zip(&before_windows) {
            assert_eq!(&win(s, e), before, "v{version} window {s:?}..{e:?}");
        }
        assert!(
            before_windows.iter().any(|w| w.is_ok()),
            "some window reaches the archive"
        );

        // A damaged archive: history before the active timeline is refused, latest is not.
        let arch = root.join(snap.cfg.archive_dir.as_str());
        for e in walk(&arch) {
            if e.extension().is_some_and(|x| x == "parquet")
                || e.to_string_lossy().contains(".archive.")
            {
                let bytes = std::fs::read(&e).unwrap();
                std::fs::write(&e, &bytes[..bytes.len() / 2]).unwrap();
            }
        }
        let err = as_of(&root, &times[2]).unwrap_err();
        assert!(
            err.to_string().contains("archived timeline"),
            "v{version}: {err}"
        );
        assert_eq!(latest(&root), before_latest);
        assert_eq!(as_of(&root, &times[3]).unwrap(), before_latest);
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
