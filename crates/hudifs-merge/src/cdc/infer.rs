//! What changed between the states of a feed: each step's change records, inferred from its
//! merged states before and after the write compared by record key, or read from its CDC log
//! files with their images completed from the states.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Schema, SchemaRef};

use super::CdcGroup;
use crate::config::MergeConfig;
use crate::engine::Prepared;
use crate::error::{MergeError, Result};
use crate::merger::built_keys;

/// The hasher of record-key maps: keys come from the data, so seeded; fast on short keys.
type KeyHash = foldhash::fast::RandomState;

/// Record key → place (batch, row) in a state.
type Places<'a> = HashMap<&'a str, (usize, usize), KeyHash>;

/// One state merged in memory: its batches, and each record key's position.
pub(super) struct State {
    pub(super) batches: Vec<RecordBatch>,
    /// Per batch, `_hoodie_record_key` as strings (a state of log images may have none).
    keys: Vec<Option<ArrayRef>>,
    /// Per batch, `_hoodie_commit_time`, `_hoodie_commit_seqno` and `_hoodie_partition_path`
    /// as strings (cast once).
    commit: Vec<Option<ArrayRef>>,
    seqno: Vec<Option<ArrayRef>>,
    partition: Vec<Option<ArrayRef>>,
}

impl State {
    fn of(batches: Vec<RecordBatch>, keyed: bool) -> Result<State> {
        let (mut keys, mut commit, mut seqno, mut partition) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for batch in &batches {
            let key = string_column(batch, "_hoodie_record_key")?;
            if keyed && key.is_none() {
                return Err(MergeError::unsupported(
                    "no _hoodie_record_key: the change feed needs Hudi's meta fields",
                ));
            }
            keys.push(key);
            commit.push(string_column(batch, "_hoodie_commit_time")?);
            seqno.push(string_column(batch, "_hoodie_commit_seqno")?);
            partition.push(string_column(batch, "_hoodie_partition_path")?);
        }
        Ok(State {
            batches,
            keys,
            commit,
            seqno,
            partition,
        })
    }

    /// Every row's record key with its place (batch, row), in order.
    fn rows(&self) -> impl Iterator<Item = (&str, (usize, usize))> + '_ {
        self.keys.iter().enumerate().flat_map(|(b, k)| {
            let a = k.as_ref().map(|k| k.as_string::<i32>());
            (0..a.map_or(0, |a| a.len())).filter_map(move |r| {
                let a = a?;
                Some((if a.is_valid(r) { a.value(r) } else { "" }, (b, r)))
            })
        })
    }

    /// Rows in all.
    fn len(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// The first place of each record key (borrowing the key columns).
    fn by_key(&self) -> Places<'_> {
        let mut m = Places::with_capacity_and_hasher(self.len(), KeyHash::default());
        for (k, at) in self.rows() {
            m.entry(k).or_insert(at);
        }
        m
    }

    /// The string at row `r` of batch `b` of one of the cast columns.
    fn text(col: &[Option<ArrayRef>], b: usize, r: usize) -> Option<&str> {
        let a = col.get(b)?.as_ref()?.as_string::<i32>();
        (r < a.len() && a.is_valid(r)).then(|| a.value(r))
    }
}

/// The string at row `r` of a string column.
fn text_at(col: &ArrayRef, r: usize) -> Option<&str> {
    let a = col.as_string::<i32>();
    (r < a.len() && a.is_valid(r)).then(|| a.value(r))
}

fn string_column(batch: &RecordBatch, name: &str) -> Result<Option<ArrayRef>> {
    let Ok(i) = batch.schema().index_of(name) else {
        return Ok(None);
    };
    arrow_cast::cast(batch.column(i), &DataType::Utf8)
        .map(Some)
        .map_err(|e| MergeError::unsupported(format!("{name} is not a string: {e}")))
}

fn state(p: Prepared) -> Result<(SchemaRef, State)> {
    let (schema, batches, _) = p.batches()?;
    Ok((schema, State::of(batches, true)?))
}

/// Where an image is: state index, batch, row.
pub(super) type At = (usize, usize, usize);

/// One change record: the op, the step, and where its images are.
pub(super) struct Change {
    pub(super) op: &'static str,
    pub(super) ts: usize,
    pub(super) key: String,
    pub(super) partition: Option<String>,
    pub(super) before: Option<At>,
    pub(super) after: Option<At>,
}

/// The partition path of an image's row, where its state has the column.
fn partition_at(states: &[State], at: Option<At>) -> Result<Option<String>> {
    let Some((s, b, r)) = at else { return Ok(None) };
    Ok(states
        .get(s)
        .and_then(|st| State::text(&st.partition, b, r))
        .map(String::from))
}

/// The change records of step `ts` inferred from its states before (`b`) and after (`a`): one
/// record per record, also where a file group holds a key more than once (SEMANTICS.md
/// §10.10). Per key, a row the write did not touch (an older commit time) is the row of the
/// state before with the same commit time and sequence number; each row the write wrote is an
/// update of the next row of its key before that no untouched row is (`u`, in order), else an
/// insert (`i`); a row before that is neither is a delete (`d`).
fn infer(
    states: &[State],
    b: Option<usize>,
    a: Option<usize>,
    instant: &str,
    ts: usize,
    changes: &mut Vec<Change>,
) -> Result<()> {
    // The rows before, by key, in order; a slot is emptied when an after row takes it.
    let mut before: HashMap<&str, Slots, KeyHash> = HashMap::default();
    if let Some(b) = b {
        before.reserve(states[b].len());
        for (k, at) in states[b].rows() {
            before
                .entry(k)
                .and_modify(|s| s.push(at))
                .or_insert(Slots::One(Some(at)));
        }
    }
    let id = |s: usize, (bi, r): (usize, usize)| {
        let st = &states[s];
        (
            State::text(&st.commit, bi, r),
            State::text(&st.seqno, bi, r),
        )
    };
    let mut written = Vec::new();
    if let Some(a) = a {
        let st = &states[a];
        for (k, (bi, r)) in st.rows() {
            if State::text(&st.commit, bi, r) == Some(instant) {
                written.push((k, (bi, r)));
                continue;
            }
            // Untouched: the same row as before.
            let (Some(b), Some(slots)) = (b, before.get_mut(k)) else {
                continue;
            };
            let this = id(a, (bi, r));
            if let Some(slot) = slots
                .all()
                .iter_mut()
                .find(|s| s.is_some_and(|at| id(b, at) == this))
            {
                *slot = None;
            }
        }
    }
    for (k, (bi, r)) in written {
        let a = a.unwrap_or(0);
        let taken = before
            .get_mut(k)
            .and_then(|slots| slots.all().iter_mut().find(|s| s.is_some()))
            .and_then(Option::take);
        let before = taken.map(|(x, y)| (b.unwrap_or(0), x, y));
        let after = Some((a, bi, r));
        changes.push(Change {
            op: if before.is_some() { "u" } else { "i" },
            ts,
            key: k.to_string(),
            partition: partition_at(states, after)?,
            before,
            after,
        });
    }
    if let Some(b) = b {
        for (k, at) in states[b].rows() {
            let Some(slot) = before
                .get_mut(k)
                .and_then(|slots| slots.all().iter_mut().find(|s| **s == Some(at)))
            else {
                continue;
            };
            *slot = None;
            let before = Some((b, at.0, at.1));
            changes.push(Change {
                op: "d",
                ts,
                key: k.to_string(),
                partition: partition_at(states, before)?,
                before,
                after: None,
            });
        }
    }
    Ok(())
}

/// The rows of one key in a state, in order (one, nearly always: no allocation then); a slot
/// is emptied when a row after takes it.
enum Slots {
    One(Option<(usize, usize)>),
    Many(Vec<Option<(usize, usize)>>),
}

impl Slots {
    fn push(&mut self, at: (usize, usize)) {
        match self {
            Slots::One(first) => *self = Slots::Many(vec![*first, Some(at)]),
            Slots::Many(v) => v.push(Some(at)),
        }
    }

    fn all(&mut self) -> &mut [Option<(usize, usize)>] {
        match self {
            Slots::One(first) => std::slice::from_mut(first),
            Slots::Many(v) => v,
        }
    }
}

/// An image column of a CDC log's records (`before` / `after`) as a state of its own (its rows
/// are the log's records; validity says where there is an image).
fn image_state(batch: &RecordBatch, column: &str) -> Result<Option<(State, NullBuffer)>> {
    let Some(col) = batch.column_by_name(column) else {
        return Ok(None);
    };
    let Some(st) = col.as_struct_opt() else {
        return Err(MergeError::unsupported(format!(
            "the CDC log's {column} image is not a record"
        )));
    };
    let valid = st
        .nulls()
        .cloned()
        .unwrap_or_else(|| NullBuffer::new_valid(st.len()));
    let fields: Vec<Field> = st
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    let images = RecordBatch::try_new(Arc::new(Schema::new(fields)), st.columns().to_vec())
        .map_err(|e| MergeError::corrupt(format!("the CDC log's {column} images: {e}")))?;
    Ok(Some((State::of(vec![images], false)?, valid)))
}

/// The change records of step `ts` from its CDC log records: the op and key of each, its
/// images from the log where the supplemental logging mode keeps them (`before` in
/// `data_before`, both in `data_before_after`), else from the states before (`b`) and after
/// (`a`) the write.
fn from_log(
    cfg: &MergeConfig,
    states: &mut Vec<State>,
    b: Option<usize>,
    a: Option<usize>,
    batches: &[RecordBatch],
    ts: usize,
    changes: &mut Vec<Change>,
) -> Result<()> {
    for batch in batches {
        let op = string_column(batch, "op")?
            .ok_or_else(|| MergeError::unsupported("a CDC log record without op"))?;
        let logged_before = image_state(batch, "before")?;
        let logged_after = image_state(batch, "after")?;
        // The key: record_key (op_key_only, data_before), else the images' record key.
        // The images' record keys, where the log keeps images: Hudi writes the images without
        // meta fields, so the key is rebuilt from the record key fields as the table's key
        // generator builds it.
        let keys_of = |which: &Option<(State, NullBuffer)>| -> Result<Option<Vec<Option<String>>>> {
            let Some((st, valid)) = which else {
                return Ok(None);
            };
            let batch = &st.batches[0];
            let keys: Vec<String> = match string_column(batch, "_hoodie_record_key")? {
                Some(c) => (0..batch.num_rows())
                    .map(|r| text_at(&c, r).unwrap_or_default().to_string())
                    .collect(),
                None if cfg.record_key_fields.is_empty() || cfg.rebuilt_key_gen.is_none() => {
                    return Err(MergeError::unsupported(
                        "CDC log images without meta fields, and a key generator whose keys \
                         cannot be rebuilt from hoodie.table.recordkey.fields",
                    ))
                }
                None => built_keys(cfg.rebuilt_key_gen, &cfg.record_key_fields, batch)?,
            };
            Ok(Some(
                keys.into_iter()
                    .enumerate()
                    .map(|(r, k)| valid.is_valid(r).then_some(k))
                    .collect(),
            ))
        };
        let (keys_before, keys_after) = (keys_of(&logged_before)?, keys_of(&logged_after)?);
        let image_key = |keys: &Option<Vec<Option<String>>>, r: usize| {
            keys.as_ref().and_then(|k| k.get(r).cloned().flatten())
        };
        let record_key = string_column(batch, "record_key")?;
        let mut place = |st: Option<(State, NullBuffer)>| {
            st.map(|(s, valid)| {
                states.push(s);
                (states.len() - 1, valid)
            })
        };
        let mut rows = Vec::with_capacity(batch.num_rows());
        for r in 0..batch.num_rows() {
            let key = match &record_key {
                Some(c) => text_at(c, r).map(String::from),
                None => image_key(&keys_after, r).or_else(|| image_key(&keys_before, r)),
            };
            let key = key
                .ok_or_else(|| MergeError::unsupported("a CDC log record without a record key"))?;
            let op = match text_at(&op, r) {
                Some("i") => "i",
                Some("u") => "u",
                Some("d") => "d",
                other => {
                    return Err(MergeError::corrupt(format!(
                        "a CDC log record of op {other:?}"
                    )))
                }
            };
            rows.push((op, key));
        }
        let lb = place(logged_before);
        let la = place(logged_after);
        let states: &[State] = states;
        let maps: HashMap<usize, Places<'_>> = [b, a]
            .into_iter()
            .flatten()
            .map(|s| (s, states[s].by_key()))
            .collect();
        for (r, (op, key)) in rows.into_iter().enumerate() {
            let from_state = |s: Option<usize>| {
                s.and_then(|s| maps.get(&s)?.get(key.as_str()).map(|(x, y)| (s, *x, *y)))
            };
            let before = match &lb {
                Some((s, valid)) => valid.is_valid(r).then_some((*s, 0, r)),
                None if op != "i" => from_state(b),
                None => None,
            };
            let after = match &la {
                Some((s, valid)) => valid.is_valid(r).then_some((*s, 0, r)),
                None if op != "d" => from_state(a),
                None => None,
            };
            let partition = match partition_at(states, after.or(before))? {
                Some(p) => Some(p),
                None => partition_at(states, from_state(a).or(from_state(b)))?,
            };
            changes.push(Change {
                op,
                ts,
                key,
                partition,
                before,
                after,
            });
        }
    }
    Ok(())
}

/// Every state of a feed merged, in order, and the change records of its steps.
pub(super) struct Changes {
    pub(super) states: Vec<State>,
    /// Per state, its schema.
    pub(super) schemas: Vec<SchemaRef>,
    pub(super) changes: Vec<Change>,
}

/// The change records of every step of `group`, from its prepared states (before and after
/// each write) and the records of its CDC log files where it has readable ones.
pub(super) fn changes(
    cfg: &MergeConfig,
    group: &CdcGroup,
    prepared: Vec<(Option<Prepared>, Option<Prepared>)>,
    logged: Vec<Option<Vec<RecordBatch>>>,
) -> Result<Changes> {
    // Every state merged, in order; the schema of the images: all states' data columns,
    // later ones extending and promoting earlier ones.
    let mut states: Vec<State> = Vec::new();
    let mut schemas: Vec<SchemaRef> = Vec::new();
    let mut changes: Vec<Change> = Vec::new();
    for (ts, ((before, after), logged)) in prepared.into_iter().zip(logged).enumerate() {
        let instant = group.steps[ts].instant.clone();
        let mut index = |p: Option<Prepared>| -> Result<Option<usize>> {
            let Some(p) = p else { return Ok(None) };
            let (s, st) = state(p)?;
            schemas.push(s);
            states.push(st);
            Ok(Some(states.len() - 1))
        };
        let b = index(before)?;
        let a = index(after)?;
        match logged {
            Some(batches) => from_log(cfg, &mut states, b, a, &batches, ts, &mut changes)?,
            None => infer(&states, b, a, &instant, ts, &mut changes)?,
        }
    }
    Ok(Changes {
        states,
        schemas,
        changes,
    })
}
