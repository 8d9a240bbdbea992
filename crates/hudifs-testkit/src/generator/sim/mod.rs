//! A live writer for tests: a seeded loop of Hudi operations against one table, the way Hudi's
//! writers commit (request an instant, mark it inflight, write data files, complete it), with
//! a JSON-lines log of everything a reader of the table could observe. `hudifs-writer` runs it.
//!
//! Operations (chosen by a PRNG seeded with the seed, so the sequence of operations and the data
//! they write depend only on the seed; timing may vary):
//!
//! | op | what it does |
//! |---|---|
//! | `insert` | one write of 1–3 new file groups |
//! | `update` | one write updating 1–3 live groups: a new base file version (copy-on-write) or a new log file (merge-on-read) |
//! | `slow` | an insert or update that stays in flight for a while before it completes |
//! | `crash` | a write that dies mid-way: its files stay (one base file may be truncated) and its instant stays inflight |
//! | `rollback` | rolls back the oldest crashed write |
//! | `clean` | rolls back every crashed write (as Hudi's lazy failed-writes policy does), then deletes file slices older than the retained commit, recording `earliestCommitToRetain` |
//! | `replace` | an INSERT_OVERWRITE replacecommit of one partition |
//! | `compaction` | merge-on-read: schedules a compaction, runs it (leaving it inflight), or completes it |
//! | `savepoint` | savepoints the latest completed write (at most three per run) |
//! | `archive` | (with [`SimOptions::archive`]) moves completed instants older than the newest few into the archived timeline, as Hudi's archiver does: never at or past a pending instant or a savepoint, never a replacecommit whose replaced groups still have files |
//!
//! The cleaner keeps every file a savepoint lists (and the rest of its slice), every file group
//! with a pending compaction, and every slice `as_of` needs at or after the retained commit,
//! which is never newer than a pending instant: an `as_of` view that no pending instant can
//! change keeps its files until a later clean moves the retained commit past it.
//!
//! Log lines (`"t"` is the wall-clock epoch ms when the line was written):
//!
//! - `start`: seed, table version and type, timeline layout;
//! - `op`: the operation about to run (`n`, `op`, and a deterministic `digest` of its choices);
//! - `timeline`: a timeline file renamed into place (`file`, `instant`, `action`, `state`,
//!   `before`/`after` = wall-clock ms around the rename);
//! - `commit`: a completed write or compaction with `published` (ms before its completed file's
//!   rename) and per file `path`, `file_id`, `kind`, `rows`, `size`, `hash` (FNV-1a 64 of the
//!   bytes, hex); `replaced` file groups of a replacecommit;
//! - `crash`, `rollback` (with `deleted`, `written`), `clean` (with `earliest_commit_to_retain`,
//!   `deleted`, `published`), `compaction_scheduled`, `savepoint` (with `files`);
//! - `snapshot`: after a change of what `latest/` should show: `seq`, `instant` (the newest
//!   completed write instant, what `user.hudi.instant` of `latest/` names), `published`, `files`;
//! - `final`: `as_of/<instant>` can no longer change (older than every pending instant):
//!   `instant`, `files` — until a clean retains only newer commits and the view is refused;
//! - `end`: `ops` and per-operation counts.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use hudifs_storage::{StorageWrite, TablePath};
use std::time::{Duration, Instant};

use serde_json::{json, Value as Json};

mod services;

use super::{fnv1a, now_ms, rows_with_ids, Clock, Row, SplitMix64, TableSpec, TableWriter};
use hudifs_core::error::{Error, Result};
use hudifs_core::listing;
use hudifs_core::table::TableType;
use hudifs_core::timeline::{Action, State};

/// Partition values of the simulated table (partitioned by `city`, hive-style).
const CITIES: [&str; 4] = ["amsterdam", "chennai", "sao_paulo", "san_francisco"];
/// Above this many live file groups, inserts turn into updates.
const MAX_LIVE_GROUPS: usize = 30;
const MAX_CRASHED: usize = 3;
const MAX_SAVEPOINTS: usize = 3;

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimOptions {
    pub seed: u64,
    /// 6, 8 or 9.
    pub version: u32,
    pub table_type: TableType,
    /// Stop starting operations after this long.
    pub duration: Duration,
    /// Stop after this many operations.
    pub max_ops: Option<u64>,
    /// Pace operations to this many per second (0: as fast as possible).
    pub ops_per_sec: f64,
    /// Longest time a slow write stays in flight, in ms (0: slow writes do not sleep).
    pub slow_ms: u64,
    /// `Some(start)`: a logical clock starting at `start` epoch ms (fully deterministic names);
    /// `None`: wall-clock instants.
    pub logical_clock_ms: Option<i64>,
    /// Also archive old instants now and then.
    pub archive: bool,
}

/// The operations, in the order of their weights below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    Insert,
    Update,
    Slow,
    Crash,
    Rollback,
    Clean,
    Replace,
    Compaction,
    Savepoint,
    Archive,
}

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Update => "update",
            Op::Slow => "slow",
            Op::Crash => "crash",
            Op::Rollback => "rollback",
            Op::Clean => "clean",
            Op::Replace => "replace",
            Op::Compaction => "compaction",
            Op::Savepoint => "savepoint",
            Op::Archive => "archive",
        }
    }
}

fn weights(mor: bool, archive: bool) -> [(Op, u64); 10] {
    [
        (Op::Insert, 15),
        (Op::Update, 30),
        (Op::Slow, 8),
        (Op::Crash, 7),
        (Op::Rollback, 6),
        (Op::Clean, 7),
        (Op::Replace, 4),
        (Op::Compaction, if mor { 12 } else { 0 }),
        (Op::Savepoint, 3),
        (Op::Archive, if archive { 5 } else { 0 }),
    ]
}

/// The table name the simulation uses (it seeds the file ids together with the seed).
pub fn table_name(version: u32, table_type: TableType) -> String {
    let kind = match table_type {
        TableType::CopyOnWrite => "cow",
        TableType::MergeOnRead => "mor",
    };
    format!("hudifs_torture_v{version}_{kind}")
}

/// FNV-1a 64 of a file's bytes, as 16 hex digits (what the log's `hash` fields hold).
pub fn file_hash(bytes: &[u8]) -> String {
    format!("{:016x}", fnv1a(bytes))
}

/// The running simulation.
pub struct Sim<L: Write> {
    w: TableWriter,
    opts: SimOptions,
    rng: SplitMix64,
    log: L,
    next_id: i64,
    ops: u64,
    counts: BTreeMap<&'static str, u64>,
    /// Files some savepoint lists: never cleaned.
    savepointed: BTreeSet<String>,
    /// Completed instants whose `as_of` view was logged as final.
    finalized: BTreeSet<String>,
    last_snapshot: Option<Vec<String>>,
    snapshot_seq: u64,
    last_retained: Option<String>,
    /// Wall-clock ms before the newest completed-file rename of the current operation.
    last_completion_ms: Option<i64>,
    /// The operation the last step ran.
    last_op: Option<Op>,
}

impl<L: Write> Sim<L> {
    /// Create the table in directory `root` (which must not hold one) and log `start`.
    pub fn create(root: &Path, opts: SimOptions, log: L) -> Result<Sim<L>> {
        std::fs::create_dir_all(root).map_err(|e| Error::io(root.display().to_string(), e))?;
        let store = hudifs_storage::LocalStore::new(root)
            .map_err(|e| Error::io(root.display().to_string(), e))?;
        Sim::create_in(Arc::new(store), opts, log)
    }

    /// Create the table in `store` (which must not hold one) and log `start`.
    pub fn create_in(store: Arc<dyn StorageWrite>, opts: SimOptions, log: L) -> Result<Sim<L>> {
        let spec = TableSpec::new(
            &table_name(opts.version, opts.table_type),
            opts.table_type,
            opts.version,
        )
        .partitioned_by(&["city"], true);
        let clock = match opts.logical_clock_ms {
            Some(start_ms) => Clock::Logical { start_ms },
            None => Clock::Wall { seed: opts.seed },
        };
        let mut w = TableWriter::create_in(store, spec, clock)?;
        // File ids depend on the seed only, whatever the clock.
        w.seed_file_ids(opts.seed);
        let mut sim = Sim {
            w,
            rng: SplitMix64::new(opts.seed ^ 0x5151_7a7a_0000_0001),
            opts,
            log,
            next_id: 1,
            ops: 0,
            counts: BTreeMap::new(),
            savepointed: BTreeSet::new(),
            finalized: BTreeSet::new(),
            last_snapshot: None,
            snapshot_seq: 0,
            last_retained: None,
            last_completion_ms: None,
            last_op: None,
        };
        let layout = sim.w.layout().number();
        sim.emit(json!({
            "ev": "start",
            "seed": sim.opts.seed,
            "version": sim.opts.version,
            "table_type": match sim.opts.table_type {
                TableType::CopyOnWrite => "COPY_ON_WRITE",
                TableType::MergeOnRead => "MERGE_ON_READ",
            },
            "layout": layout,
            "table": sim.w.describe_root(),
        }))?;
        sim.flush_published()?;
        sim.after_op()?;
        Ok(sim)
    }

    pub fn writer(&self) -> &TableWriter {
        &self.w
    }

    /// The name of the operation the last step ran.
    pub fn last_op(&self) -> Option<&'static str> {
        self.last_op.map(Op::name)
    }

    /// Operations run so far, by name.
    pub fn counts(&self) -> &BTreeMap<&'static str, u64> {
        &self.counts
    }

    /// Run until the duration or the operation budget is used up; logs `end`.
    pub fn run(&mut self) -> Result<()> {
        let start = Instant::now();
        loop {
            if start.elapsed() >= self.opts.duration
                || self.opts.max_ops.is_some_and(|m| self.ops >= m)
            {
                break;
            }
            self.step()?;
            if self.opts.ops_per_sec > 0.0 {
                let due = start + Duration::from_secs_f64(self.ops as f64 / self.opts.ops_per_sec);
                let now = Instant::now();
                let end = start + self.opts.duration;
                if due > now {
                    std::thread::sleep(due.min(end).saturating_duration_since(now));
                }
            }
        }
        let counts: BTreeMap<&str, u64> = self.counts.clone();
        self.emit(json!({"ev": "end", "ops": self.ops, "counts": counts}))
    }

    /// Choose and run one operation.
    pub fn step(&mut self) -> Result<()> {
        let mor = self.opts.table_type == TableType::MergeOnRead;
        let table = weights(mor, self.opts.archive);
        let total: u64 = table.iter().map(|(_, w)| w).sum();
        let mut pick = self.rng.next_u64() % total;
        let mut op = Op::Insert;
        for (o, w) in table {
            if pick < w {
                op = o;
                break;
            }
            pick -= w;
        }
        let op = self.applicable(op);
        self.last_op = Some(op);
        self.ops += 1;
        *self.counts.entry(op.name()).or_default() += 1;
        self.last_completion_ms = None;
        let n = self.ops;
        self.emit(json!({"ev": "op", "n": n, "op": op.name()}))?;
        match op {
            Op::Insert => self.write(false, false, false)?,
            Op::Update => self.write(true, false, false)?,
            Op::Slow => {
                let update = self.rand(2) == 0;
                self.write(update, true, false)?
            }
            Op::Crash => {
                let update = self.rand(2) == 0;
                self.write(update, false, true)?
            }
            Op::Rollback => self.rollback_oldest()?,
            Op::Clean => self.clean()?,
            Op::Replace => self.replace()?,
            Op::Compaction => self.compaction()?,
            Op::Savepoint => self.savepoint()?,
            Op::Archive => self.archive()?,
        }
        self.after_op()
    }

    /// The operation actually run: one that cannot run now falls back to another.
    fn applicable(&self, op: Op) -> Op {
        let live = self.w.file_groups().len();
        let crashed = self.w.pending_writes().len();
        match op {
            Op::Insert if live >= MAX_LIVE_GROUPS => Op::Update,
            Op::Update | Op::Slow | Op::Replace if live == 0 => Op::Insert,
            Op::Crash if crashed >= MAX_CRASHED => Op::Rollback,
            Op::Rollback if crashed == 0 => Op::Update.fallback(live),
            Op::Replace if self.replaceable_partitions().is_empty() => Op::Update,
            Op::Compaction if self.opts.table_type != TableType::MergeOnRead => Op::Update,
            Op::Compaction
                if self.w.pending_compactions().is_empty() && self.compactable().is_empty() =>
            {
                Op::Update.fallback(live)
            }
            Op::Savepoint if !self.can_savepoint() => Op::Insert.fallback(live),
            Op::Archive if self.archive_bound().is_none() => Op::Update.fallback(live),
            op => op,
        }
    }

    fn emit(&mut self, mut v: Json) -> Result<()> {
        if let Json::Object(o) = &mut v {
            o.insert("t".into(), json!(now_ms()));
        }
        let mut line = serde_json::to_vec(&v).map_err(|e| Error::Usage(e.to_string()))?;
        line.push(b'\n');
        self.log
            .write_all(&line)
            .and_then(|()| self.log.flush())
            .map_err(|e| Error::io("writer log", e))
    }

    /// Log the timeline files renamed since the last call.
    fn flush_published(&mut self) -> Result<()> {
        for p in self.w.take_published() {
            if p.state == State::Completed {
                self.last_completion_ms = Some(p.before_ms);
            }
            self.emit(json!({
                "ev": "timeline", "file": p.name, "instant": p.requested,
                "action": p.action.name(), "state": state_name(p.state),
                "before": p.before_ms, "after": p.after_ms,
            }))?;
        }
        Ok(())
    }

    fn rand(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.rng.next_u64() % n
        }
    }

    fn partition(&mut self) -> Result<String> {
        let city = CITIES[self.rand(CITIES.len() as u64) as usize];
        self.w.partition_path(&[city])
    }

    fn new_rows(&mut self) -> Vec<Row> {
        let n = 5 + self.rand(120) as i64;
        let ids: Vec<i64> = (self.next_id..self.next_id + n).collect();
        self.next_id += n;
        let seed = self.rng.next_u64();
        rows_with_ids(seed, &ids)
    }

    fn update_rows(&mut self, partition: &str, file_id: &str) -> Vec<Row> {
        let existing: Vec<i64> = self
            .w
            .group_rows(partition, file_id)
            .unwrap_or_default()
            .iter()
            .map(|r| r.id)
            .collect();
        let mut ids = BTreeSet::new();
        let m = 1 + self.rand(10.min(existing.len() as u64));
        for _ in 0..m {
            let i = self.rand(existing.len() as u64) as usize;
            if let Some(id) = existing.get(i) {
                ids.insert(*id);
            }
        }
        if self.rand(4) == 0 || ids.is_empty() {
            ids.insert(self.next_id);
            self.next_id += 1;
        }
        let ids: Vec<i64> = ids.into_iter().collect();
        let seed = self.rng.next_u64();
        rows_with_ids(seed, &ids)
    }

    /// Live groups, in a deterministic order.
    fn pick_groups(&mut self, max: u64) -> Vec<(String, String)> {
        let mut live = self.w.file_groups();
        let k = (1 + self.rand(max)) as usize;
        let mut out = Vec::new();
        while out.len() < k && !live.is_empty() {
            let i = self.rand(live.len() as u64) as usize;
            out.push(live.remove(i));
        }
        out
    }

    /// An insert or update, optionally slow (sleeps in flight) or crashing (abandoned).
    fn write(&mut self, update: bool, slow: bool, crash: bool) -> Result<()> {
        let action = self.w.write_action();
        let update = update && !self.w.file_groups().is_empty();
        // Choose everything before the transaction borrows the writer.
        let mut plan: Vec<(String, Option<String>, Vec<Row>)> = Vec::new();
        if update {
            for (p, f) in self.pick_groups(3) {
                let rows = self.update_rows(&p, &f);
                plan.push((p, Some(f), rows));
            }
        } else {
            let k = 1 + self.rand(3);
            for _ in 0..k {
                let p = self.partition()?;
                let rows = self.new_rows();
                plan.push((p, None, rows));
            }
        }
        if crash {
            // A crash happens after some of the files: drop the tail of the plan.
            let keep = 1 + self.rand(plan.len() as u64) as usize;
            plan.truncate(keep);
        }
        let sleep_ms = if slow && self.opts.slow_ms > 0 {
            self.opts.slow_ms / 4 + self.rand(self.opts.slow_ms - self.opts.slow_ms / 4 + 1)
        } else {
            0
        };
        let truncate = crash && self.rand(3) != 0;
        let cut = self.rng.next_u64();
        let digest = plan_digest(&plan);
        self.emit(json!({"ev": "plan", "n": self.ops, "digest": digest}))?;

        let mut txn = self.w.begin(action)?;
        let instant = txn.instant().to_string();
        for (p, f, rows) in &plan {
            match f {
                Some(f) => {
                    txn.update(p, f, rows)?;
                }
                None => {
                    txn.insert(p, rows)?;
                }
            }
        }
        if crash {
            txn.abandon();
            let written = self.event_written(&instant, action);
            let mut files = Vec::new();
            let bases: Vec<&String> = written.iter().filter(|p| !is_log(p)).collect();
            let victim = if truncate && !bases.is_empty() {
                Some(bases[(cut % bases.len() as u64) as usize].clone())
            } else {
                None
            };
            let store = self.w.store().clone();
            for path in &written {
                let full = TablePath::new(path).map_err(|e| Error::Invalid(e.to_string()))?;
                let mut truncated = false;
                if victim.as_ref() == Some(path) {
                    let len = store.stat(&full).map(|m| m.size).unwrap_or(0);
                    let to = if len > 0 { (cut >> 8) % len } else { 0 };
                    store
                        .truncate(&full, to)
                        .map_err(|e| Error::io(store.describe(&full), e))?;
                    truncated = true;
                }
                let size = store.stat(&full).map(|m| m.size).unwrap_or(0);
                files.push(json!({"path": path, "size": size, "truncated": truncated}));
            }
            self.flush_published()?;
            return self.emit(
                json!({"ev": "crash", "instant": instant, "action": action.name(),
                                    "files": files}),
            );
        }
        if sleep_ms > 0 {
            // A slow write: its files are on disk, its instant inflight.
            std::thread::sleep(Duration::from_millis(sleep_ms));
        }
        txn.complete()?;
        self.flush_published()?;
        if sleep_ms > 0 {
            self.emit(json!({"ev": "slow", "instant": instant, "sleep_ms": sleep_ms}))?;
        }
        self.log_commit(&instant, action, &[])
    }

    fn event_written(&self, instant: &str, action: Action) -> Vec<String> {
        self.w
            .events()
            .iter()
            .rev()
            .find(|e| e.instant == instant && e.action == action)
            .map(|e| e.written.clone())
            .unwrap_or_default()
    }

    /// Log a completed write or compaction with its files.
    fn log_commit(&mut self, instant: &str, action: Action, replaced: &[String]) -> Result<()> {
        let mut files = Vec::new();
        for path in self.event_written(instant, action) {
            let full = TablePath::new(&path).map_err(|e| Error::Invalid(e.to_string()))?;
            let bytes = self.w.read(&full)?;
            let info = self.w.written_file(&path).cloned();
            let name = path.rsplit('/').next().unwrap_or_default();
            let file_id = listing::parse_base_name(name, &[super::BASE_EXT.to_string()])
                .map(|b| b.file_id)
                .or_else(|| listing::parse_log_name(name).map(|l| l.file_id))
                .unwrap_or_default();
            files.push(json!({
                "path": path,
                "file_id": file_id,
                "kind": if is_log(&path) { "log" } else { "base" },
                "rows": info.as_ref().map(|i| i.rows),
                "size": bytes.len(),
                "hash": file_hash(&bytes),
            }));
        }
        let completion = self.w.completed_writes().get(instant).cloned();
        let published = self.last_completion_ms;
        self.emit(json!({
            "ev": "commit", "instant": instant, "action": action.name(),
            "completion": completion, "published": published, "files": files,
            "replaced": replaced,
        }))
    }

    /// The retention bound of the last clean (`earliestCommitToRetain`), if any.
    pub fn retained(&self) -> Option<&str> {
        self.last_retained.as_deref()
    }

    /// Log a changed `latest/` and `as_of` views that became final.
    fn after_op(&mut self) -> Result<()> {
        let files: Vec<String> = self
            .w
            .expected_view(None)
            .into_iter()
            .map(|f| f.path)
            .collect();
        if self.last_snapshot.as_ref() != Some(&files) {
            self.snapshot_seq += 1;
            let instant = self.w.completed_writes().keys().next_back().cloned();
            let seq = self.snapshot_seq;
            let published = self.last_completion_ms.unwrap_or(0);
            self.emit(json!({"ev": "snapshot", "seq": seq, "instant": instant,
                             "published": published, "files": files}))?;
            self.last_snapshot = Some(files);
        }
        let oldest_pending = self
            .w
            .pending_writes()
            .into_iter()
            .chain(self.w.pending_compactions())
            .min();
        let newly: Vec<String> = self
            .w
            .completed_writes()
            .keys()
            .filter(|t| !self.finalized.contains(*t))
            .filter(|t| oldest_pending.as_ref().is_none_or(|p| *t < p))
            .cloned()
            .collect();
        for t in newly {
            let files: Vec<String> = self
                .w
                .expected_view(Some(&t))
                .into_iter()
                .map(|f| f.path)
                .collect();
            self.emit(json!({"ev": "final", "instant": t, "files": files}))?;
            self.finalized.insert(t);
        }
        Ok(())
    }
}

impl Op {
    /// `self`, or an insert when no file group is live.
    fn fallback(self, live: usize) -> Op {
        if live == 0 {
            Op::Insert
        } else {
            self
        }
    }
}

fn state_name(s: State) -> &'static str {
    match s {
        State::Requested => "requested",
        State::Inflight => "inflight",
        State::Completed => "completed",
    }
}

fn is_log(path: &str) -> bool {
    path.rsplit('/').next().is_some_and(|n| n.starts_with('.'))
}

/// A digest of a write's choices that does not depend on time: partitions, targeted groups,
/// row ids and values.
fn plan_digest(plan: &[(String, Option<String>, Vec<Row>)]) -> String {
    let mut text = String::new();
    for (p, f, rows) in plan {
        text.push_str(p);
        text.push('|');
        text.push_str(f.as_deref().unwrap_or("new"));
        for r in rows {
            text.push_str(&format!("|{}:{}:{}:{}", r.id, r.name, r.value, r.ts));
        }
        text.push('\n');
    }
    file_hash(text.as_bytes())
}
