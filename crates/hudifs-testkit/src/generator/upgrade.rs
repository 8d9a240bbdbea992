//! Upgrading a table the way Hudi 1.x's upgrade handlers leave it, so that tests can read tables
//! with a 0.x history and 1.x writes after it (SEMANTICS.md §8, "Tables upgraded from v6").
//!
//! 6 → 8 (`SixToSevenUpgradeHandler`, a no-op, then `SevenToEightUpgradeHandler`):
//! 1. `rollbackFailedWritesAndCompact`, still writing table version 6: every pending write is
//!    rolled back (the failed-writes policy is `EAGER` for the upgrade); on a merge-on-read
//!    table one compaction is scheduled (`UnBoundedCompactionStrategy`: every file group whose
//!    latest slice has logs and is not already in a pending compaction) and run. A compaction
//!    that was pending before stays pending: `compact` runs only the new one.
//! 2. Every timeline file of `.hoodie/` moves to `.hoodie/timeline/`
//!    (`upgradeActiveTimelineInstant`): a completed instant is renamed
//!    `<requested>_<completion>.<action>`, its completion time being the file's modification
//!    time; a pending `replacecommit` becomes `clustering`; the files of commits and
//!    deltacommits are rewritten from JSON to the Avro `HoodieCommitMetadata` (an empty file
//!    as an empty one), all others are renamed as they are.
//! 3. `upgradeToLSMTimeline`: the 0.x archive (`.hoodie/archived`) is copied into the LSM
//!    history (`.hoodie/timeline/history`) and left where it was. Each instant keeps the
//!    archived record's state-transition time as its completion time and the archived metadata
//!    as JSON (what `ArchivedTimelineV1` hands out).
//! 4. `hoodie.properties`: `hoodie.table.version=8`, `hoodie.timeline.layout.version=2`,
//!    `hoodie.timeline.path=timeline`, `hoodie.table.initial.version=SIX`, the merge mode
//!    `inferCorrectMergingBehavior` gives the payload class (with its strategy id), and the
//!    key generator's type. No `hoodie.table.checksum` (Java adds one; hudifs does not read it).
//!
//! 8 → 9 (`EightToNineUpgradeHandler`): `rollbackFailedWritesAndCompact` again, then the
//! payload classes of RFC-97 become merge modes, partial-update modes, merge properties and
//! ordering fields, and the payload class moves to `hoodie.table.legacy.payload.class`.
//!
//! The generator stamps each completed layout-1 timeline file with its logical completion time
//! as modification time (tables on this machine's file system), so step 2 finds the times its
//! clock gave. Not modelled (refused): tables with a metadata table or change data capture.

use std::collections::{BTreeMap, BTreeSet};
use std::time::SystemTime;

use hudifs_core::archive::{load_log_archive, LsmRow};
use hudifs_core::error::{Error, Result};
use hudifs_core::table::TableType;
use hudifs_core::timeline::{self, Action, Layout, State};
use hudifs_storage::TablePath;
use serde_json::{json, Value as Json};

use super::{
    archiver, avro, encode_err, escape_property, instant_time, join, rows, rows_with_ids, Row,
    TableSpec, TableWriter,
};

/// Where the clock of [`build_upgraded`]'s table starts (2026-01-01 UTC).
pub const UPGRADE_CLOCK_START_MS: i64 = 1_767_225_600_000;

const PAYLOAD_PREFIX: &str = "org.apache.hudi.common.model.";
const COMMIT_TIME_STRATEGY: &str = "ce9acb64-bde0-424c-9b91-f6ebba25356d";
const EVENT_TIME_STRATEGY: &str = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5";
const PAYLOAD_STRATEGY: &str = "00000000-0000-0000-0000-000000000000";
/// Instants per LSM file the upgrade's copy writes (the archiver's batch).
const LSM_BATCH: usize = 10;

/// A payload class by its simple name, as `hoodie.compaction.payload.class` names it.
fn payload(simple: &str) -> String {
    match simple {
        "MySqlDebeziumAvroPayload" | "PostgresDebeziumAvroPayload" => {
            format!("{PAYLOAD_PREFIX}debezium.{simple}")
        }
        _ => format!("{PAYLOAD_PREFIX}{simple}"),
    }
}

/// `hoodie.properties` as lines, edited in place by key (values stay escaped as written).
struct Properties {
    lines: Vec<(String, String)>,
}

impl Properties {
    fn parse(text: &str) -> Properties {
        let lines = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Properties { lines }
    }
    /// The value of `key`, unescaped as far as the generator escapes (`\:` and the like).
    fn get(&self, key: &str) -> Option<String> {
        let (_, v) = self.lines.iter().find(|(k, _)| k == key)?;
        let mut out = String::new();
        let mut chars = v.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.extend(chars.next()),
                c => out.push(c),
            }
        }
        Some(out)
    }
    fn set(&mut self, key: &str, value: &str) {
        let v = escape_property(value);
        match self.lines.iter_mut().find(|(k, _)| k == key) {
            Some(e) => e.1 = v,
            None => self.lines.push((key.to_string(), v)),
        }
    }
    fn remove(&mut self, key: &str) {
        self.lines.retain(|(k, _)| k != key);
    }
    /// `HoodieTableConfig.storeProperties`: sorted by key, under a date comment.
    fn text(&self, ms: i64) -> Result<String> {
        let mut lines = self.lines.clone();
        lines.sort();
        let mut text = format!("#Updated at {}\n", instant_time(ms)?);
        for (k, v) in lines {
            text.push_str(&format!("{k}={v}\n"));
        }
        Ok(text)
    }
}

impl TableWriter {
    /// Upgrade the table to table version `version` (8 or 9) as Hudi 1.x's upgrade does (see
    /// the module documentation): a version-6 table goes through 8 on its way to 9. Later
    /// writes are written as the new version writes them.
    pub fn upgrade(&mut self, version: u32) -> Result<()> {
        if self.mdt.is_some() || self.spec.cdc.is_some() || self.wall_clock {
            return Err(Error::Usage(
                "the generator's upgrade models tables without a metadata table or change data \
                 capture, written on its logical clock"
                    .into(),
            ));
        }
        if !(self.spec.version < version && matches!(version, 8 | 9)) {
            return Err(Error::Usage(format!(
                "cannot upgrade a version-{} table to version {version}",
                self.spec.version
            )));
        }
        if self.spec.version == 6 {
            self.six_to_eight()?;
        }
        if version == 9 {
            self.eight_to_nine()?;
        }
        Ok(())
    }

    /// `rollbackFailedWritesAndCompact`.
    fn rollback_failed_and_compact(&mut self) -> Result<()> {
        for t in self.pending_writes() {
            self.rollback(&t)?;
        }
        if !self.spec.is_mor() {
            return Ok(());
        }
        let in_compaction: BTreeSet<(String, String)> = self
            .compactions
            .values()
            .filter(|c| c.state != State::Completed)
            .flat_map(|c| c.ops.iter())
            .map(|op| (op.partition.clone(), op.file_id.clone()))
            .collect();
        let groups: Vec<(String, String)> = self
            .groups
            .iter()
            .filter(|(k, g)| {
                !g.opaque
                    && g.replaced_by.is_none()
                    && !in_compaction.contains(*k)
                    && g.slices
                        .last()
                        .is_some_and(|s| s.logs.iter().any(|l| l.committed))
            })
            .map(|(k, _)| k.clone())
            .collect();
        if !groups.is_empty() {
            let c = self.schedule_compaction(&groups)?;
            self.run_compaction(&c, true)?;
        }
        Ok(())
    }

    fn six_to_eight(&mut self) -> Result<()> {
        self.rollback_failed_and_compact()?;
        let from = self.timeline_dir.clone();
        let to = TablePath::new(".hoodie/timeline").map_err(|e| Error::Invalid(e.to_string()))?;
        self.store
            .create_dir_all(&to)
            .map_err(|e| Error::io(self.store.describe(&to), e))?;
        // The LSM copy reads the 0.x archive before anything moves.
        let legacy = self.archive_dir();
        let archived = load_log_archive(&*self.store, &legacy)
            .map_err(|e| Error::Invalid(format!("{}: {}", e.path, e.reason)))?;
        let mut moved = Vec::new();
        for name in archiver::file_names(&*self.store, &from)? {
            let Some(f) = timeline::parse_instant_file_name(&name, Layout::V1) else {
                continue;
            };
            let requested = f.requested.to_string();
            let src = join(&from, &name)?;
            let completion = match f.state {
                State::Completed => Some(self.completion_of(&requested, &src)?),
                _ => None,
            };
            let action = match (f.action, f.state) {
                (Action::ReplaceCommit, State::Requested | State::Inflight) => Action::Clustering,
                (a, _) => a,
            };
            let new_name = timeline::instant_file_name(
                &requested,
                completion.as_deref(),
                action,
                f.state,
                Layout::V2,
            );
            let bytes = self.read(&src)?;
            let bytes = if matches!(f.action, Action::Commit | Action::DeltaCommit) {
                let v: Json = if bytes.is_empty() {
                    json!({})
                } else {
                    serde_json::from_slice(&bytes).map_err(|e| {
                        Error::Invalid(format!("{}: not commit metadata: {e}", name))
                    })?
                };
                avro::container(
                    &avro::commit_metadata(),
                    std::slice::from_ref(&v),
                    &new_name,
                )
                .map_err(encode_err(&new_name))?
            } else {
                bytes
            };
            self.put(&join(&to, &new_name)?, &bytes)?;
            self.delete(&src)?;
            if let Some(c) = completion {
                moved.push((requested, c));
            }
        }
        self.layout = Layout::V2;
        self.timeline_dir = to;
        self.spec.version = 8;
        // Completion times are in the names now: the model takes them.
        for (requested, completion) in moved {
            if let Some(c) = self.completed.get_mut(&requested) {
                *c = completion.clone();
            }
            for e in self.events.iter_mut().filter(|e| e.instant == requested) {
                if e.state == State::Completed {
                    e.completion = Some(completion.clone());
                }
            }
        }
        // `upgradeToLSMTimeline`.
        let rows: Vec<LsmRow> = archived
            .instants
            .iter()
            .map(|i| {
                let requested = i.requested.to_string();
                LsmRow {
                    completion_time: Some(
                        self.completed
                            .get(&requested)
                            .cloned()
                            .unwrap_or_else(|| requested.clone()),
                    ),
                    instant_time: Some(requested),
                    action: Some(i.action.name().to_string()),
                    metadata: i
                        .metadata
                        .as_ref()
                        .ok()
                        .and_then(|v| serde_json::to_vec(v).ok()),
                    plan: None,
                    version: Some(1),
                }
            })
            .collect();
        for batch in rows.chunks(LSM_BATCH) {
            archiver::write_lsm_rows(&*self.store, &self.archive_dir(), batch)?;
        }
        // `hoodie.properties`.
        let mut p = self.properties()?;
        p.set("hoodie.table.version", "8");
        p.set("hoodie.timeline.layout.version", "2");
        p.set("hoodie.timeline.path", "timeline");
        p.set("hoodie.table.initial.version", "SIX");
        let class = p
            .get("hoodie.compaction.payload.class")
            .unwrap_or_else(|| payload("OverwriteWithLatestAvroPayload"));
        let (mode, strategy) = if class == payload("OverwriteWithLatestAvroPayload") {
            ("COMMIT_TIME_ORDERING", COMMIT_TIME_STRATEGY)
        } else if class == payload("DefaultHoodieRecordPayload")
            || class == payload("EventTimeAvroPayload")
        {
            ("EVENT_TIME_ORDERING", EVENT_TIME_STRATEGY)
        } else {
            ("CUSTOM", PAYLOAD_STRATEGY)
        };
        p.set("hoodie.record.merge.mode", mode);
        p.set("hoodie.compaction.payload.class", &class);
        p.set("hoodie.record.merge.strategy.id", strategy);
        if let Some(keygen) = p.get("hoodie.table.keygenerator.class") {
            let kind = match keygen.rsplit('.').next().unwrap_or_default() {
                "NonpartitionedKeyGenerator" => "NON_PARTITION",
                "ComplexKeyGenerator" => "COMPLEX",
                "TimestampBasedKeyGenerator" => "TIMESTAMP",
                "CustomKeyGenerator" => "CUSTOM",
                _ => "SIMPLE",
            };
            p.set("hoodie.table.keygenerator.type", kind);
        }
        self.follow_merge_mode(&p);
        self.write_properties(&p)
    }

    fn eight_to_nine(&mut self) -> Result<()> {
        self.rollback_failed_and_compact()?;
        let mut p = self.properties()?;
        let class = p.get("hoodie.compaction.payload.class");
        let class = class.as_deref().unwrap_or_default();
        let is = |simple: &str| class == payload(simple);
        let mode = p.get("hoodie.record.merge.mode").unwrap_or_default();
        // reconcileMergeModeConfig
        if mode != "CUSTOM" || !class.is_empty() {
            if mode != "CUSTOM" {
                p.remove("hoodie.record.merge.strategy.id");
            }
            if is("AWSDmsAvroPayload") || is("OverwriteNonDefaultsWithLatestAvroPayload") {
                p.set("hoodie.record.merge.mode", "COMMIT_TIME_ORDERING");
                p.set("hoodie.record.merge.strategy.id", COMMIT_TIME_STRATEGY);
            } else if [
                "EventTimeAvroPayload",
                "MySqlDebeziumAvroPayload",
                "PartialUpdateAvroPayload",
                "PostgresDebeziumAvroPayload",
            ]
            .iter()
            .any(|c| is(c))
            {
                p.set("hoodie.record.merge.mode", "EVENT_TIME_ORDERING");
                p.set("hoodie.record.merge.strategy.id", EVENT_TIME_STRATEGY);
            }
        }
        // reconcilePartialUpdateModeConfig
        if is("OverwriteNonDefaultsWithLatestAvroPayload") || is("PartialUpdateAvroPayload") {
            p.set("hoodie.table.partial.update.mode", "IGNORE_DEFAULTS");
        } else if is("PostgresDebeziumAvroPayload") {
            p.set("hoodie.table.partial.update.mode", "FILL_UNAVAILABLE");
        }
        // reconcileMergePropertiesConfig
        let prop = |k: &str| format!("hoodie.record.merge.property.{k}");
        if is("AWSDmsAvroPayload") {
            p.set(&prop("hoodie.payload.delete.field"), "Op");
            p.set(&prop("hoodie.payload.delete.marker"), "D");
        } else if is("PostgresDebeziumAvroPayload") || is("MySqlDebeziumAvroPayload") {
            if is("PostgresDebeziumAvroPayload") {
                p.set(
                    &prop("hoodie.write.partial.update.unavailable.value"),
                    "__debezium_unavailable_value",
                );
            }
            p.set(
                &prop("hoodie.payload.delete.field"),
                "_change_operation_type",
            );
            p.set(&prop("hoodie.payload.delete.marker"), "d");
        }
        // reconcilePayloadClassConfig
        const HANDLED: [&str; 8] = [
            "AWSDmsAvroPayload",
            "DefaultHoodieRecordPayload",
            "EventTimeAvroPayload",
            "MySqlDebeziumAvroPayload",
            "OverwriteNonDefaultsWithLatestAvroPayload",
            "OverwriteWithLatestAvroPayload",
            "PartialUpdateAvroPayload",
            "PostgresDebeziumAvroPayload",
        ];
        if HANDLED.iter().any(|c| is(c)) {
            p.set("hoodie.table.legacy.payload.class", class);
            p.remove("hoodie.compaction.payload.class");
        }
        // reconcileOrderingFieldsConfig
        let ordering = if is("MySqlDebeziumAvroPayload") {
            Some("_event_bin_file,_event_pos".to_string())
        } else if is("PostgresDebeziumAvroPayload") {
            Some("_event_lsn".to_string())
        } else {
            p.get("hoodie.table.ordering.fields")
                .or_else(|| p.get("hoodie.table.precombine.field"))
        };
        if let Some(fields) = ordering {
            p.set("hoodie.table.ordering.fields", &fields);
            p.remove("hoodie.table.precombine.field");
        }
        p.set("hoodie.table.version", "9");
        self.spec.version = 9;
        self.follow_merge_mode(&p);
        self.write_properties(&p)
    }

    /// The row model merges as the rewritten properties say (`TableSpec::event_time_ordering`).
    fn follow_merge_mode(&mut self, p: &Properties) {
        let mode = p.get("hoodie.record.merge.mode").unwrap_or_default();
        let props = &mut self.spec.properties;
        props.retain(|(k, _)| k != "hoodie.record.merge.mode");
        props.push(("hoodie.record.merge.mode".into(), mode));
    }

    fn properties_path(&self) -> Result<TablePath> {
        TablePath::new(".hoodie/hoodie.properties").map_err(|e| Error::Invalid(e.to_string()))
    }

    fn properties(&self) -> Result<Properties> {
        let bytes = self.read(&self.properties_path()?)?;
        Ok(Properties::parse(&String::from_utf8_lossy(&bytes)))
    }

    fn write_properties(&mut self, p: &Properties) -> Result<()> {
        let text = p.text(self.clock_ms)?;
        self.put_atomic(&self.properties_path()?, text.as_bytes())?;
        Ok(())
    }

    /// A layout-1 completed instant's completion time, as Java's upgrade takes it: the
    /// modification time of its file (`yyyyMMddHHmmssSSS` in UTC, the generator's zone).
    fn completion_of(&self, requested: &str, path: &TablePath) -> Result<String> {
        if let Some(c) = self.completed.get(requested) {
            return Ok(c.clone());
        }
        let meta = self
            .store
            .stat(path)
            .map_err(|e| Error::io(self.store.describe(path), e))?;
        let ms = meta
            .mtime
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64);
        let c = instant_time(ms)?;
        Ok(if c.as_str() > requested {
            c
        } else {
            requested.to_string()
        })
    }
}

/// A table with a 0.x history upgraded to 1.x ([`build_upgraded`]).
pub struct Upgraded {
    pub writer: TableWriter,
    /// The compaction scheduled before the upgrade and completed after it (merge-on-read).
    pub pending: Option<String>,
    /// The writer's model of the table's rows after each completed write, by requested time.
    pub models: BTreeMap<String, Vec<Row>>,
}

/// The rows the writer's model holds now.
fn model_rows(w: &TableWriter) -> Vec<Row> {
    w.file_groups()
        .iter()
        .flat_map(|(p, f)| w.group_rows(p, f).unwrap_or_default())
        .collect()
}

/// A table written by Hudi 0.x and upgraded to `version` (8 or 9) at `root`, with writes on
/// both sides (`payload`: the 0.x table's `hoodie.compaction.payload.class`, if not the
/// default):
/// - version 6: inserts into `city=a` and `city=b`; two updates of both (logs named after the
///   base instant on merge-on-read); a compaction of `city=b` scheduled and left pending, with
///   a log named after it; 0.x archival of the first two writes; a failed update of `city=a`;
/// - the upgrade to 8 (which rolls the failed write back and compacts `city=a`);
/// - version 8: an update of both groups (logs named after their deltacommit, `city=b`'s in
///   the pending compaction's slice), the pending compaction completed, an insert into
///   `city=c` with an update of `city=b`, LSM archival of all but the last four writes;
/// - for version 9: the 8→9 upgrade and an update of `city=a`.
pub fn build_upgraded(
    root: &std::path::Path,
    table_type: TableType,
    version: u32,
    payload: Option<&str>,
) -> Result<Upgraded> {
    let mor = table_type == TableType::MergeOnRead;
    let write = if mor {
        Action::DeltaCommit
    } else {
        Action::Commit
    };
    let mut spec = TableSpec::new("upgraded", table_type, 6).partitioned_by(&["city"], true);
    if let Some(p) = payload {
        spec = spec.with_property("hoodie.compaction.payload.class", p);
    }
    let mut w = TableWriter::create(root, spec, UPGRADE_CLOCK_START_MS)?;
    let mut models = BTreeMap::new();
    let mut done = |w: &TableWriter, t: String| models.insert(t, model_rows(w));
    let mut t = w.begin(write)?;
    let a = t.insert("city=a", &rows(1, 40))?;
    let b = t.insert("city=b", &rows(2, 40))?;
    let c = t.complete()?;
    done(&w, c);
    for round in 0..2u64 {
        let r = round as i64;
        let mut t = w.begin(write)?;
        t.update("city=a", &a, &rows_with_ids(10 + round, &[1000 + r, 1003]))?;
        t.update("city=b", &b, &rows_with_ids(20 + round, &[2000, 2005 + r]))?;
        let c = t.complete()?;
        done(&w, c);
    }
    let pending = if mor {
        let compaction = w.schedule_compaction(&[("city=b", &b)])?;
        let mut t = w.begin(write)?;
        t.update("city=b", &b, &rows_with_ids(30, &[2001, 2002]))?;
        let c = t.complete()?;
        done(&w, c);
        Some(compaction)
    } else {
        None
    };
    let second = w
        .completed_writes()
        .keys()
        .nth(1)
        .cloned()
        .unwrap_or_default();
    w.archive(&second)?;
    let mut t = w.begin(write)?;
    t.update("city=a", &a, &rows_with_ids(40, &[1001]))?;
    t.abandon();
    w.upgrade(8)?;
    let mut t = w.begin(write)?;
    t.update("city=a", &a, &rows_with_ids(50, &[1002, 1004]))?;
    t.update("city=b", &b, &rows_with_ids(51, &[2003]))?;
    let c = t.complete()?;
    done(&w, c);
    if let Some(c) = &pending {
        w.run_compaction(c, true)?;
    }
    let mut t = w.begin(write)?;
    t.insert("city=c", &rows(3, 30))?;
    t.update("city=b", &b, &rows_with_ids(60, &[2004, 2006]))?;
    let c = t.complete()?;
    done(&w, c);
    let writes: Vec<String> = w.completed_writes().keys().cloned().collect();
    if let Some(cut) = writes.len().checked_sub(4).map(|i| writes[i].clone()) {
        w.archive(&cut)?;
    }
    if version == 9 {
        w.upgrade(9)?;
        let mut t = w.begin(write)?;
        t.update("city=a", &a, &rows_with_ids(70, &[1000, 1005]))?;
        let c = t.complete()?;
        done(&w, c);
    }
    // Compactions change no rows: the model after one is the model before it.
    let compactions: Vec<String> = w
        .completed_writes()
        .keys()
        .filter(|t| !models.contains_key(*t))
        .cloned()
        .collect();
    for t in compactions {
        if let Some(before) = models
            .range(..t.clone())
            .next_back()
            .map(|(_, m)| m.clone())
        {
            models.insert(t, before);
        }
    }
    Ok(Upgraded {
        writer: w,
        pending,
        models,
    })
}
