//! Change data files (`delta/_change_data/`): Hudi's change records of one write (a `cdc/` feed
//! file, docs/SEMANTICS.md §10.10) rewritten as Delta's change data feed wants them: one row per
//! image, in the version's table schema, with `_change_type` (`insert`, `update_preimage`,
//! `update_postimage`, `delete`). Read and written a batch at a time, so a big feed is never
//! held in memory.

use std::io::Write;
use std::sync::Arc;

use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch, StringArray, StructArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;

/// The column Delta readers take each row's kind of change from.
pub const CHANGE_TYPE: &str = "_change_type";

/// The `created_by` of change data files, and the format the merge cache's claims name.
pub const FORMAT: &str = "hudifs-delta-change-data version 1";

/// Rows read from a feed file at a time.
const BATCH_ROWS: usize = 8192;

/// Why a change data file cannot be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangeError {
    /// The feed file does not read as a feed, or the output cannot be written.
    Unreadable(String),
    /// An image's column cannot be read as the version's type.
    Uncastable(String),
}

impl std::fmt::Display for ChangeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChangeError::Unreadable(e) | ChangeError::Uncastable(e) => f.write_str(e),
        }
    }
}

fn unreadable(e: impl std::fmt::Display) -> ChangeError {
    ChangeError::Unreadable(format!("the change feed file cannot be rewritten: {e}"))
}

/// How many rows of each kind a change data file holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChangeCounts {
    pub inserts: u64,
    pub updates: u64,
    pub deletes: u64,
}

/// The schema of a change data file for table schema `table`: its columns, nullable (an image
/// has no value for the meta columns the feed does not carry), then `_change_type`.
pub fn change_schema(table: &Schema) -> Schema {
    let mut fields: Vec<Field> = table
        .fields()
        .iter()
        .map(|f| Field::new(f.name(), f.data_type().clone(), true))
        .collect();
    fields.push(Field::new(CHANGE_TYPE, DataType::Utf8, false));
    Schema::new(fields)
}

/// Which image of which feed row an output row is: `(0, row)` the `before` image, `(1, row)`
/// the `after` image.
type Pick = (usize, usize);

/// A writer that counts what goes through it.
struct Counting<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Rewrite feed file `feed` (a `cdc/` file) as a change data file in table schema `table` into
/// `out`: the bytes written and the rows of each kind. An `i` gives its `after` image as
/// `insert`, a `u` its `before` image as `update_preimage` then its `after` image as
/// `update_postimage`, a `d` its `before` image as `delete`, in the feed's order.
pub fn write_change_data<W: Write + Send>(
    feed: std::fs::File,
    table: &Schema,
    out: W,
) -> Result<(u64, ChangeCounts), ChangeError> {
    let schema = Arc::new(change_schema(table));
    let reader = ParquetRecordBatchReaderBuilder::try_new(feed)
        .map_err(unreadable)?
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(unreadable)?;
    let props = parquet::file::properties::WriterProperties::builder()
        .set_compression(parquet::basic::Compression::SNAPPY)
        .set_created_by(FORMAT.to_string())
        .build();
    let counting = Counting {
        inner: out,
        written: 0,
    };
    let mut w = ArrowWriter::try_new(counting, schema.clone(), Some(props)).map_err(unreadable)?;
    let mut counts = ChangeCounts::default();
    for batch in reader {
        let rows = change_rows(&batch.map_err(unreadable)?, &schema, &mut counts)?;
        if rows.num_rows() > 0 {
            w.write(&rows).map_err(unreadable)?;
        }
    }
    let mut counting = w.into_inner().map_err(unreadable)?;
    counting.flush().map_err(unreadable)?;
    Ok((counting.written, counts))
}

/// A feed column by name, of the type the feed writes it in.
fn feed_column<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> Result<&'a T, ChangeError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| unreadable(format!("no column {name} of the feed's type")))
}

/// The change data rows (in `schema`, [`change_schema`]) of one batch of feed rows.
fn change_rows(
    batch: &RecordBatch,
    schema: &Arc<Schema>,
    counts: &mut ChangeCounts,
) -> Result<RecordBatch, ChangeError> {
    let op = feed_column::<StringArray>(batch, "op")?;
    let ts = feed_column::<StringArray>(batch, "ts_ms")?;
    let before = feed_column::<StructArray>(batch, "before")?;
    let after = feed_column::<StructArray>(batch, "after")?;
    let mut picks: Vec<Pick> = Vec::with_capacity(batch.num_rows());
    let mut kinds: Vec<&str> = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        match op.is_valid(row).then(|| op.value(row)) {
            Some("i") => {
                picks.push((1, row));
                kinds.push("insert");
                counts.inserts += 1;
            }
            Some("u") => {
                picks.extend([(0, row), (1, row)]);
                kinds.extend(["update_preimage", "update_postimage"]);
                counts.updates += 1;
            }
            Some("d") => {
                picks.push((0, row));
                kinds.push("delete");
                counts.deletes += 1;
            }
            other => return Err(unreadable(format!("a change record with op {other:?}"))),
        }
    }
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let name = field.name().as_str();
        let column: ArrayRef = match name {
            CHANGE_TYPE => Arc::new(StringArray::from(kinds.clone())),
            "_hoodie_record_key" | "_hoodie_partition_path" => {
                let c = batch
                    .column_by_name(name)
                    .ok_or_else(|| unreadable(format!("no column {name}")))?;
                let both = [c.as_ref(), c.as_ref()];
                cast(&interleave(&both, &picks)?, field, name)?
            }
            // The commit time of an image written by the write is the write's; that of an
            // image before it is not in the feed.
            "_hoodie_commit_time" => {
                let values: StringArray = picks
                    .iter()
                    .map(|(side, row)| (*side == 1 && ts.is_valid(*row)).then(|| ts.value(*row)))
                    .collect();
                cast(&(Arc::new(values) as ArrayRef), field, name)?
            }
            _ => {
                let image = |s: &StructArray| -> Result<ArrayRef, ChangeError> {
                    match s.column_by_name(name) {
                        Some(c) => cast(c, field, name),
                        None => Ok(new_null_array(field.data_type(), s.len())),
                    }
                };
                let (b, a) = (image(before)?, image(after)?);
                interleave(&[b.as_ref(), a.as_ref()], &picks)?
            }
        };
        columns.push(column);
    }
    RecordBatch::try_new(schema.clone(), columns).map_err(unreadable)
}

/// Column `c` as `field`'s type.
fn cast(c: &ArrayRef, field: &Field, name: &str) -> Result<ArrayRef, ChangeError> {
    if c.data_type() == field.data_type() {
        return Ok(c.clone());
    }
    arrow_cast::cast(c, field.data_type()).map_err(|e| {
        ChangeError::Uncastable(format!(
            "column {name}: the change feed's {} cannot be read as the version's {} ({e})",
            c.data_type(),
            field.data_type()
        ))
    })
}

/// The rows `picks` names of `sides`.
fn interleave(sides: &[&dyn Array], picks: &[Pick]) -> Result<ArrayRef, ChangeError> {
    arrow_select::interleave::interleave(sides, picks).map_err(unreadable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::Int64Array;
    use arrow_schema::Fields;

    /// A feed file of three records (`i`, `u`, `d`) whose images have `fare` (int32) only.
    fn feed() -> std::fs::File {
        let image = Fields::from(vec![Field::new("fare", DataType::Int32, true)]);
        let images = |vals: [Option<i32>; 3], valid: [bool; 3]| {
            StructArray::new(
                image.clone(),
                vec![Arc::new(arrow_array::Int32Array::from(vals.to_vec())) as ArrayRef],
                Some(valid.to_vec().into()),
            )
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("op", DataType::Utf8, false),
            Field::new("ts_ms", DataType::Utf8, false),
            Field::new("_hoodie_record_key", DataType::Utf8, false),
            Field::new("_hoodie_partition_path", DataType::Utf8, false),
            Field::new("before", DataType::Struct(image.clone()), true),
            Field::new("after", DataType::Struct(image.clone()), true),
        ]));
        let s = |v: [&str; 3]| Arc::new(StringArray::from(v.to_vec())) as ArrayRef;
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                s(["i", "u", "d"]),
                s(["20240101000000000"; 3]),
                s(["k1", "k2", "k3"]),
                s(["p", "p", "p"]),
                Arc::new(images([None, Some(20), Some(30)], [false, true, true])),
                Arc::new(images([Some(1), Some(21), None], [true, true, false])),
            ],
        )
        .unwrap();
        let mut f = tempfile::tempfile().unwrap();
        let mut w = ArrowWriter::try_new(&mut f, schema, None).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        f
    }

    #[test]
    fn each_record_gives_its_images_with_their_change_type() {
        let table = Schema::new(vec![
            Field::new("_hoodie_commit_time", DataType::Utf8, true),
            Field::new("_hoodie_record_key", DataType::Utf8, true),
            Field::new("fare", DataType::Int64, true),
            Field::new("added_later", DataType::Utf8, true),
        ]);
        let mut out = tempfile::tempfile().unwrap();
        let (size, counts) = write_change_data(feed(), &table, &mut out).unwrap();
        assert_eq!(size, out.metadata().unwrap().len());
        assert_eq!(
            counts,
            ChangeCounts {
                inserts: 1,
                updates: 1,
                deletes: 1
            }
        );
        let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(out)
            .unwrap()
            .build()
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let b = &batches[0];
        let col = |n: &str| b.column_by_name(n).unwrap().clone();
        let kinds = col(CHANGE_TYPE);
        let kinds = kinds.as_any().downcast_ref::<StringArray>().unwrap();
        let kinds: Vec<&str> = kinds.iter().flatten().collect();
        assert_eq!(
            kinds,
            ["insert", "update_preimage", "update_postimage", "delete"]
        );
        let keys = col("_hoodie_record_key");
        let keys = keys.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(
            keys.iter().flatten().collect::<Vec<_>>(),
            ["k1", "k2", "k2", "k3"]
        );
        let fares = col("fare");
        let fares = fares.as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(
            fares.iter().collect::<Vec<_>>(),
            [Some(1), Some(20), Some(21), Some(30)]
        );
        let times = col("_hoodie_commit_time");
        assert_eq!(
            times.null_count(),
            2,
            "the before images have no commit time"
        );
        assert_eq!(col("added_later").null_count(), 4);
    }
}
