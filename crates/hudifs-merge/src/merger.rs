//! The key map of one slice's merge: log records by record key, merged with each other (the
//! delta merge) and then with the base rows (the final merge), and the assembly of output
//! batches from the base batch and the decoded log batches (`engine/merge.rs`, steps 1-3).

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch, StringArray};
use arrow_schema::{DataType, SchemaRef};

use crate::config::{KeyGen, MergeConfig, MergeMode, Placeholder, Sequence, Unavailable};
use crate::error::{MergeError, Result};
use crate::order::{all_default, column_by_path, compare_all, ord_at, OrdVal};
use crate::schema::{conform_array, META_COLUMNS};

/// Where one column of a merged log record comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    /// This row of this log batch.
    Set(u32, u32),
    /// The older record's value (a partial-update block lacks the column), or null.
    Older,
    /// The table's unavailable value, at this row of this log batch: the older record's value
    /// where there is one, else this value as it is (`MergeConfig::unavailable`).
    Unavailable(u32, u32),
}

impl Cell {
    /// The cell where `self` leaves the value to the older record `under`.
    fn over(self, under: Cell) -> Cell {
        match (self, under) {
            (Cell::Set(..), _) => self,
            (Cell::Older, _) => under,
            (Cell::Unavailable(..), Cell::Older) => self,
            (Cell::Unavailable(..), _) => under,
        }
    }
}

/// Where the values of a merged log record come from.
#[derive(Debug, Clone)]
enum Src {
    /// A delete: no values.
    None,
    /// Every column from one row of one log batch.
    Row(u32, u32),
    /// Per output column.
    Cols(Vec<Cell>),
}

impl Src {
    fn col(&self, c: usize) -> Option<Cell> {
        match self {
            Src::None => None,
            Src::Row(b, r) => Some(Cell::Set(*b, *r)),
            Src::Cols(v) => v.get(c).copied(),
        }
    }
    /// `self`'s columns where set, `under`'s where `self` leaves them to the older record;
    /// `fill`: also `self`'s unavailable values (else they stay for a later, older record).
    fn over(&self, under: &Src, ncols: usize, fill: bool) -> Src {
        match self {
            Src::Row(..) | Src::None => self.clone(),
            Src::Cols(v) => Src::Cols(
                (0..ncols)
                    .map(|c| {
                        let mine = v.get(c).copied().unwrap_or(Cell::Older);
                        match (mine, under.col(c)) {
                            (Cell::Unavailable(..), _) if !fill => mine,
                            (_, None) => mine,
                            (_, Some(u)) => mine.over(u),
                        }
                    })
                    .collect(),
            ),
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    seq: u32,
    delete: bool,
    ord: Vec<OrdVal>,
    src: Src,
    used: bool,
}

impl Entry {
    fn commit_time_delete(&self) -> bool {
        self.delete && all_default(&self.ord)
    }
}

pub(crate) struct Merger {
    mode: MergeMode,
    populate_meta: bool,
    key_gen: Option<KeyGen>,
    key_fields: Vec<String>,
    ordering: Vec<String>,
    /// Order by a Debezium sequence instead (`MergeConfig::sequence`).
    sequence: Option<Sequence>,
    /// Ordering fields as the table declares them (what delete blocks carry values of).
    declared_ordering: Vec<String>,
    unavailable: Option<Unavailable>,
    /// Equal ordering values keep the older record (`MergeConfig::ties_to_older`); only where
    /// there is something to order by (Java's first-value payload takes the newer record of a
    /// table without an ordering field).
    ties_to_older: bool,
    /// `MergeConfig::partial_update_payload`, and which output columns are meta columns (what
    /// a winning stored record takes from the incoming one).
    partial_update_payload: bool,
    meta: Vec<bool>,
    ncols: usize,
    batches: Vec<RecordBatch>,
    /// Record key → entry (keys come from the data: seeded hashing, see `foldhash`).
    map: HashMap<String, usize, foldhash::fast::RandomState>,
    entries: Vec<Entry>,
}

impl Merger {
    pub(crate) fn new(cfg: &MergeConfig, schema: &SchemaRef) -> Merger {
        Merger {
            mode: cfg.mode,
            populate_meta: cfg.populate_meta_fields,
            key_gen: cfg.key_gen,
            key_fields: cfg.record_key_fields.clone(),
            ordering: cfg.ordering_fields.clone(),
            sequence: cfg.sequence.clone(),
            declared_ordering: cfg.ordering_fields.clone(),
            unavailable: cfg.unavailable.clone(),
            ties_to_older: cfg.ties_to_older
                && (cfg.sequence.is_some() || !cfg.ordering_fields.is_empty()),
            partial_update_payload: cfg.partial_update_payload,
            meta: schema
                .fields()
                .iter()
                .map(|f| META_COLUMNS.contains(&f.name().as_str()))
                .collect(),
            ncols: schema.fields().len(),
            batches: Vec::new(),
            map: HashMap::default(),
            entries: Vec::new(),
        }
    }

    /// The record keys of a batch's rows.
    fn keys(&self, batch: &RecordBatch) -> Result<Keys> {
        let schema = batch.schema();
        if self.populate_meta {
            let col = column_by_path(schema.fields(), batch.columns(), "_hoodie_record_key")
                .ok_or_else(|| MergeError::corrupt("records without _hoodie_record_key"))?;
            let col = if col.data_type() == &DataType::Utf8 {
                col
            } else {
                arrow_cast::cast(&col, &DataType::Utf8)
                    .map_err(|e| MergeError::corrupt(format!("_hoodie_record_key: {e}")))?
            };
            return Ok(Keys::Column(col));
        }
        built_keys(self.key_gen, &self.key_fields, batch).map(Keys::Built)
    }

    /// The columns a batch's records are ordered by; `log`: records of a log (a record whose
    /// sequence is missing is refused there, as Java's Debezium payload fails on it).
    fn ordering_columns(&self, batch: &RecordBatch, log: bool) -> Result<Vec<Option<ArrayRef>>> {
        if self.mode == MergeMode::CommitTime {
            return Ok(Vec::new());
        }
        let schema = batch.schema();
        if let Some(seq) = &self.sequence {
            let col = column_by_path(schema.fields(), batch.columns(), seq.field());
            return sequence_columns(col.as_ref(), seq, batch.num_rows(), log);
        }
        Ok(self
            .ordering
            .iter()
            .map(|f| column_by_path(schema.fields(), batch.columns(), f))
            .collect())
    }

    fn ord_of(cols: &[Option<ArrayRef>], row: usize) -> Vec<OrdVal> {
        cols.iter()
            .map(|c| {
                c.as_ref()
                    .map(|c| ord_at(c, row))
                    .unwrap_or(OrdVal::Default)
            })
            .collect()
    }

    /// Whether `newer` replaces `older` (Java's `shouldKeepNewerRecord`; the partial-update
    /// payload's incoming delete wins whatever its ordering value).
    fn keep_newer(&self, older_delete_ct: bool, older: &[OrdVal], newer: &Entry) -> bool {
        self.mode == MergeMode::CommitTime
            || newer.commit_time_delete()
            || (self.partial_update_payload && newer.delete)
            || older_delete_ct
            || match compare_all(&newer.ord, older) {
                std::cmp::Ordering::Greater => true,
                std::cmp::Ordering::Equal => !self.ties_to_older,
                std::cmp::Ordering::Less => false,
            }
    }

    pub(crate) fn add_batch(
        &mut self,
        batch: RecordBatch,
        present: Option<Vec<bool>>,
        deleted: Option<arrow_array::BooleanArray>,
    ) -> Result<()> {
        let b = self.batches.len() as u32;
        let keys = self.keys(&batch)?;
        let ords = self.ordering_columns(&batch, true)?;
        let rows = batch.num_rows();
        self.batches.push(batch);
        for r in 0..rows {
            let Some(key) = keys.get(r) else {
                return Err(MergeError::corrupt(format!(
                    "log record {r} has a null record key"
                )));
            };
            let delete = deleted
                .as_ref()
                .is_some_and(|d| d.is_valid(r) && d.value(r));
            let (b, row) = (b, r as u32);
            let marked = match &self.unavailable {
                Some(u) if !delete => {
                    let batch = &self.batches[b as usize];
                    let m: Vec<bool> = (0..self.ncols)
                        .map(|c| is_unavailable(batch.column(c), r, &u.value))
                        .collect();
                    m.contains(&true).then_some(m)
                }
                _ => None,
            };
            let src = match (&present, marked) {
                (None, None) => Src::Row(b, row),
                (p, m) => Src::Cols(
                    (0..self.ncols)
                        .map(|c| {
                            if !p
                                .as_ref()
                                .is_none_or(|p| p.get(c).copied().unwrap_or(false))
                            {
                                Cell::Older
                            } else if m.as_ref().is_some_and(|m| m[c]) {
                                Cell::Unavailable(b, row)
                            } else {
                                Cell::Set(b, row)
                            }
                        })
                        .collect(),
                ),
            };
            let new = Entry {
                seq: 0,
                delete,
                ord: Self::ord_of(&ords, r),
                src,
                used: false,
            };
            self.delta_merge(key, new)?;
        }
        Ok(())
    }

    fn delta_merge(&mut self, key: &str, mut new: Entry) -> Result<()> {
        match self.map.get(key) {
            None => {
                new.seq = self.entries.len() as u32;
                self.map.insert(key.to_string(), self.entries.len());
                self.entries.push(new);
            }
            Some(&i) => {
                let old = &self.entries[i];
                let newer_wins = self.keep_newer(old.commit_time_delete(), &old.ord, &new);
                let payload_merged = self.ties_to_older || self.partial_update_payload;
                if payload_merged && old.delete && !old.commit_time_delete() && !newer_wins {
                    // Java's payload merge reads a deleted older record as absent and takes
                    // the newer one in some releases, orders them in others.
                    return Err(MergeError::unsupported(format!(
                        "record {key}: a deleted record ordered after a later record, in a \
                         table merged by FirstValueAvroPayload or PartialUpdateAvroPayload (Hudi \
                         releases merge it differently)"
                    )));
                }
                let merged = if newer_wins {
                    let src = if new.delete || old.delete {
                        new.src.clone()
                    } else {
                        new.src.over(&old.src, self.ncols, true)
                    };
                    Entry {
                        src,
                        seq: old.seq,
                        ..new
                    }
                } else {
                    let src = if old.delete || new.delete {
                        old.src.clone()
                    } else if self.partial_update_payload {
                        // The stored record wins: its values (nulls filled from the incoming
                        // one), the incoming record's meta columns (filled from the stored).
                        let data = old.src.over(&new.src, self.ncols, true);
                        let meta = new.src.over(&old.src, self.ncols, true);
                        Src::Cols(
                            (0..self.ncols)
                                .map(|c| {
                                    let from = if self.meta[c] { &meta } else { &data };
                                    from.col(c).unwrap_or(Cell::Older)
                                })
                                .collect(),
                        )
                    } else {
                        old.src
                            .over(&new.src, self.ncols, self.fills_winner_of_either())
                    };
                    Entry { src, ..old.clone() }
                };
                self.entries[i] = merged;
            }
        }
        Ok(())
    }

    pub(crate) fn add_deletes(&mut self, keys: Vec<String>, ordering: Vec<OrdVal>) -> Result<()> {
        // Java compares a delete's ordering value with the stored record's precombine value,
        // not with the Debezium sequence the records are ordered by: reproduced only where the
        // two are one long field (a Postgres table ordered by `_event_lsn`).
        let same = match &self.sequence {
            None => true,
            Some(Sequence::Long(f)) => self.declared_ordering == [f.clone()],
            Some(Sequence::FilePosition(_)) => false,
        };
        if !same && ordering.iter().any(|o| !o.is_default()) {
            return Err(MergeError::unsupported(
                "a delete block with ordering values in a table ordered by a Debezium sequence",
            ));
        }
        // Hudi 0.x's log scanner orders such a delete against the record; 1.x merges it through
        // the first-value or partial-update payload, which deletes whatever the ordering: the
        // versions disagree.
        if (self.ties_to_older || self.partial_update_payload)
            && ordering.iter().any(|o| !o.is_default())
        {
            return Err(MergeError::unsupported(
                "a delete block with ordering values in a FirstValueAvroPayload or \
                 PartialUpdateAvroPayload table (Hudi 0.x orders it against the record, 1.x \
                 deletes)",
            ));
        }
        for (key, ord) in keys.into_iter().zip(ordering) {
            let new = Entry {
                seq: 0,
                delete: true,
                ord: vec![ord],
                src: Src::None,
                used: false,
            };
            match self.map.get(key.as_str()) {
                None => self.delta_merge(&key, new)?,
                Some(&i) => {
                    let old = &self.entries[i];
                    let keep_old = self.mode == MergeMode::EventTime
                        && (old.commit_time_delete()
                            || (!new.ord[0].is_default()
                                && old.ord.first().is_some_and(|o| {
                                    o.same_class(&new.ord[0])
                                        && o.compare(&new.ord[0]) == std::cmp::Ordering::Greater
                                })));
                    if !keep_old {
                        let seq = old.seq;
                        self.entries[i] = Entry { seq, ..new };
                    }
                }
            }
        }
        Ok(())
    }

    /// Merge one base batch with the log records; `None` when every row was dropped.
    pub(crate) fn merge_base_batch(
        &mut self,
        batch: &RecordBatch,
        schema: &SchemaRef,
    ) -> Result<Option<RecordBatch>> {
        if self.map.is_empty() {
            return Ok(Some(conform_base(batch, schema)?));
        }
        let keys = self.keys(batch)?;
        let ords = self.ordering_columns(batch, false)?;
        let base = conform_base(batch, schema)?;
        let mut plan: Vec<Plan> = Vec::new();
        let mut changed = false;
        for r in 0..batch.num_rows() {
            let Some(key) = keys.get(r) else {
                plan.push(Plan::Base);
                continue;
            };
            let Some(&i) = self.map.get(key) else {
                plan.push(Plan::Base);
                continue;
            };
            if self.entries[i].used {
                // A duplicate key in the base file: the log record was used by the first row.
                plan.push(Plan::Base);
                continue;
            }
            self.entries[i].used = true;
            let base_ord = Self::ord_of(&ords, r);
            let e = &self.entries[i];
            if self.keep_newer(false, &base_ord, e) {
                changed = true;
                plan.push(if e.delete { Plan::Drop } else { Plan::Log(i) });
            } else if !e.delete
                && self.fills_winner_of_either()
                && (self.partial_update_payload || self.base_marked(&base, r))
            {
                // The base record wins with unavailable values: they take the log record's.
                changed = true;
                plan.push(Plan::BaseFilled(i));
            } else {
                plan.push(Plan::Base);
            }
        }
        if !changed {
            return Ok(Some(base));
        }
        let kept = plan.iter().filter(|p| !matches!(p, Plan::Drop)).count();
        if kept == 0 {
            return Ok(None);
        }
        let marker = self.unavailable.as_ref().map(|u| &u.value);
        let mut columns = Vec::with_capacity(self.ncols);
        for c in 0..self.ncols {
            let mut sources: Vec<&dyn Array> = vec![base.column(c).as_ref()];
            sources.extend(self.batches.iter().map(|b| b.column(c).as_ref()));
            let mut idx = Vec::with_capacity(kept);
            for (r, p) in plan.iter().enumerate() {
                let log_cell = |i: usize| self.entries[i].src.col(c);
                match p {
                    Plan::Base => idx.push((0, r)),
                    Plan::Drop => {}
                    Plan::Log(i) => idx.push(match log_cell(*i) {
                        Some(Cell::Set(b, row)) => (1 + b as usize, row as usize),
                        _ => (0, r),
                    }),
                    // The partial-update payload's winning base row takes the log record's
                    // meta columns where it has them.
                    Plan::BaseFilled(i) if self.partial_update_payload && self.meta[c] => {
                        idx.push(match log_cell(*i) {
                            Some(Cell::Set(b, row)) => (1 + b as usize, row as usize),
                            _ => (0, r),
                        })
                    }
                    Plan::BaseFilled(i) => idx.push(
                        match (
                            marker.is_some_and(|m| is_unavailable(base.column(c), r, m)),
                            log_cell(*i),
                        ) {
                            (true, Some(Cell::Set(b, row) | Cell::Unavailable(b, row))) => {
                                (1 + b as usize, row as usize)
                            }
                            _ => (0, r),
                        },
                    ),
                }
            }
            columns.push(interleave(&sources, &idx)?);
        }
        assemble(schema, columns, kept).map(Some)
    }

    /// Whether the winner of a merge takes the loser's values for its unavailable values even
    /// when the winner is the older record (version 9's `FILL_UNAVAILABLE`; the Postgres
    /// payload fills only a winning incoming record).
    fn fills_winner_of_either(&self) -> bool {
        self.unavailable
            .as_ref()
            .is_some_and(|u| u.winner_of_either)
    }

    /// Whether a base row holds the unavailable value in a column.
    fn base_marked(&self, base: &RecordBatch, row: usize) -> bool {
        let Some(u) = &self.unavailable else {
            return false;
        };
        base.columns()
            .iter()
            .any(|c| is_unavailable(c, row, &u.value))
    }

    /// The log records no base row used, in the order their keys first appeared.
    pub(crate) fn remaining(
        &self,
        schema: &SchemaRef,
        batch_rows: usize,
    ) -> Result<Vec<RecordBatch>> {
        let mut order: Vec<usize> = (0..self.entries.len())
            .filter(|&i| !self.entries[i].used && !self.entries[i].delete)
            .collect();
        order.sort_by_key(|&i| self.entries[i].seq);
        let mut out = Vec::new();
        for chunk in order.chunks(batch_rows) {
            let mut columns = Vec::with_capacity(self.ncols);
            for c in 0..self.ncols {
                let nulls = new_null_array(schema.field(c).data_type(), 1);
                let mut sources: Vec<&dyn Array> = vec![nulls.as_ref()];
                sources.extend(self.batches.iter().map(|b| b.column(c).as_ref()));
                let idx: Vec<(usize, usize)> = chunk
                    .iter()
                    .map(|&i| match self.entries[i].src.col(c) {
                        Some(Cell::Set(b, r) | Cell::Unavailable(b, r)) => {
                            (1 + b as usize, r as usize)
                        }
                        _ => (0, 0),
                    })
                    .collect();
                columns.push(interleave(&sources, &idx)?);
            }
            out.push(assemble(schema, columns, chunk.len())?);
        }
        Ok(out)
    }
}

enum Keys {
    Column(ArrayRef),
    Built(Vec<String>),
}

impl Keys {
    fn get(&self, i: usize) -> Option<&str> {
        match self {
            Keys::Column(c) => {
                let s: &StringArray = c.as_string::<i32>();
                (!s.is_null(i)).then(|| s.value(i))
            }
            Keys::Built(v) => v.get(i).map(String::as_str),
        }
    }
}

/// What becomes of one base row.
enum Plan {
    /// Kept as it is.
    Base,
    /// Dropped: a delete won.
    Drop,
    /// Replaced by a log record (entry), its missing columns from the base row.
    Log(usize),
    /// Kept, its unavailable values taken from the log record (entry) it won against.
    BaseFilled(usize),
}

/// Whether a value is the table's unavailable value: a string or bytes column (top level, as
/// Java checks the fields of the record's schema) holding exactly those bytes.
fn is_unavailable(col: &ArrayRef, row: usize, value: &Placeholder) -> bool {
    let value = match value {
        Placeholder::Null | Placeholder::AnyNull => return col.is_null(row),
        Placeholder::Text(_) if col.is_null(row) => return false,
        Placeholder::Text(t) => t,
    };
    let v = value.as_bytes();
    match col.data_type() {
        DataType::Utf8 => col.as_string::<i32>().value(row).as_bytes() == v,
        DataType::LargeUtf8 => col.as_string::<i64>().value(row).as_bytes() == v,
        DataType::Utf8View => col.as_string_view().value(row).as_bytes() == v,
        DataType::Binary => col.as_binary::<i32>().value(row) == v,
        DataType::LargeBinary => col.as_binary::<i64>().value(row) == v,
        DataType::BinaryView => col.as_binary_view().value(row) == v,
        _ => false,
    }
}

fn interleave(sources: &[&dyn Array], idx: &[(usize, usize)]) -> Result<ArrayRef> {
    arrow_select::interleave::interleave(sources, idx)
        .map_err(|e| MergeError::corrupt(format!("assembling merged rows: {e}")))
}

fn conform_base(batch: &RecordBatch, schema: &SchemaRef) -> Result<RecordBatch> {
    if batch.schema().fields() == schema.fields() {
        return Ok(batch.clone());
    }
    let mut columns = Vec::with_capacity(schema.fields().len());
    for f in schema.fields() {
        columns.push(match batch.schema().index_of(f.name()) {
            Ok(i) => conform_array(batch.column(i), f.data_type())
                .map_err(|e| MergeError::unsupported(format!("column {}: {e}", f.name())))?,
            Err(_) => new_null_array(f.data_type(), batch.num_rows()),
        });
    }
    assemble(schema, columns, batch.num_rows())
}

/// A batch of `schema` from columns whose nested field names or nullability may differ from
/// it (they come from log records): the writer follows the Parquet schema, so the batch's own
/// schema is taken from the columns where they differ.
fn assemble(schema: &SchemaRef, columns: Vec<ArrayRef>, rows: usize) -> Result<RecordBatch> {
    let fields: Vec<arrow_schema::FieldRef> = schema
        .fields()
        .iter()
        .zip(&columns)
        .map(|(f, c)| {
            if f.data_type() == c.data_type() && (f.is_nullable() || c.null_count() == 0) {
                f.clone()
            } else {
                Arc::new(arrow_schema::Field::new(
                    f.name(),
                    c.data_type().clone(),
                    true,
                ))
            }
        })
        .collect();
    RecordBatch::try_new_with_options(
        Arc::new(arrow_schema::Schema::new_with_metadata(
            fields,
            schema.metadata().clone(),
        )),
        columns,
        &arrow_array::RecordBatchOptions::new().with_row_count(Some(rows)),
    )
    .map_err(|e| MergeError::corrupt(format!("assembling merged rows: {e}")))
}

/// The record keys of a batch's rows rebuilt from the record key fields, as the table's key
/// generator builds them (simple: the value; complex: `field:value,...`; null and empty values
/// as `__null__` and `__empty__`): for tables without meta fields, and for CDC log images
/// (which Hudi writes without them).
pub(crate) fn built_keys(
    key_gen: Option<KeyGen>,
    key_fields: &[String],
    batch: &RecordBatch,
) -> Result<Vec<String>> {
    let schema = batch.schema();
    let gen = key_gen.unwrap_or(KeyGen::Complex);
    let cols = key_fields
        .iter()
        .map(|f| {
            column_by_path(schema.fields(), batch.columns(), f).ok_or_else(|| {
                MergeError::corrupt(format!("records without the record key field {f}"))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let opts = arrow_cast::display::FormatOptions::default();
    let fmts = cols
        .iter()
        .map(|c| arrow_cast::display::ArrayFormatter::try_new(c.as_ref(), &opts))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| MergeError::corrupt(format!("record key: {e}")))?;
    let part = |c: &ArrayRef, f: &arrow_cast::display::ArrayFormatter, i: usize| -> String {
        if c.is_null(i) {
            "__null__".to_string()
        } else {
            let s = f.value(i).to_string();
            if s.is_empty() {
                "__empty__".to_string()
            } else {
                s
            }
        }
    };
    let mut out = Vec::with_capacity(batch.num_rows());
    for i in 0..batch.num_rows() {
        out.push(match gen {
            KeyGen::Simple => part(&cols[0], &fmts[0], i),
            KeyGen::Complex => {
                let mut s = String::new();
                for (j, name) in key_fields.iter().enumerate() {
                    if j > 0 {
                        s.push(',');
                    }
                    s.push_str(name);
                    s.push(':');
                    s.push_str(&part(&cols[j], &fmts[j], i));
                }
                s
            }
        });
    }
    Ok(out)
}

/// A Debezium sequence column as long columns, compared as `shouldPickCurrentRecord` compares
/// them: `_event_lsn` as one long; a `<file>.<position>` `_event_seq` as two, file then position
/// (`MySqlDebeziumAvroPayload.isCurrentSeqLatest` parses each part as a long: `"10.1"` is after
/// `"9.5"`). A stored record without a sequence is older than any (Java's bootstrap case); a
/// value that does not parse, or a log record without one, is refused (Java's read fails on it).
fn sequence_columns(
    col: Option<&ArrayRef>,
    seq: &Sequence,
    rows: usize,
    log: bool,
) -> Result<Vec<Option<ArrayRef>>> {
    let field = seq.field();
    let width = match seq {
        Sequence::Long(_) => 1,
        Sequence::FilePosition(_) => 2,
    };
    let refuse = |why: String| MergeError::unsupported(format!("{field}: {why}"));
    let Some(col) = col else {
        if log && rows > 0 {
            return Err(refuse("log records without it cannot be ordered".into()));
        }
        return Ok(vec![None; width]);
    };
    if let Sequence::Long(_) = seq {
        // Java casts the value to a Long: an int or a string fails there.
        if col.data_type() != &DataType::Int64 {
            return Err(refuse(format!("{} values are not longs", col.data_type())));
        }
        if log && col.null_count() > 0 {
            return Err(refuse("a log record without it cannot be ordered".into()));
        }
        return Ok(vec![Some(col.clone())]);
    }
    let s = arrow_cast::cast(col, &DataType::Utf8).map_err(|e| refuse(e.to_string()))?;
    let s = s.as_string::<i32>();
    let (mut file, mut pos) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
    for r in 0..s.len() {
        if s.is_null(r) {
            if log {
                return Err(refuse("a log record without it cannot be ordered".into()));
            }
            file.push(None);
            pos.push(None);
            continue;
        }
        let v = s.value(r);
        let mut parts = v.split('.');
        let mut part = || parts.next().and_then(|p| p.parse::<i64>().ok());
        match (part(), part()) {
            (Some(f), Some(p)) => {
                file.push(Some(f));
                pos.push(Some(p));
            }
            _ => {
                return Err(refuse(format!(
                    "{v:?} is not <file>.<position> with numeric parts"
                )))
            }
        }
    }
    Ok(vec![
        Some(Arc::new(arrow_array::Int64Array::from(file)) as ArrayRef),
        Some(Arc::new(arrow_array::Int64Array::from(pos)) as ArrayRef),
    ])
}
