//! The change feed written: the images of every change record assembled from the merged
//! states (one schema for all: the window's table schema where the group has one, else the
//! newest state's columns, then those only older states have), as op / ts_ms / record key /
//! partition path / before / after records.

use std::io::Write;
use std::sync::Arc;

use arrow_array::builder::StringBuilder;
use arrow_array::{new_null_array, Array, ArrayRef, RecordBatch, StructArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::arrow::ArrowWriter;
use parquet::file::metadata::KeyValue;

use super::infer::{At, Change, Changes, State};
use super::{CdcGroup, CDC_CREATED_BY};
use crate::chunks::Counting;
use crate::engine::writer_properties;
use crate::error::{MergeError, Result};
use crate::schema::{aligned, conform_batch, output_schema, ViewSchema, META_COLUMNS};

/// Every state's rows conformed to the images' schema, as columns of batches, then one
/// all-null row: what the `before` and `after` images are interleaved from.
struct Images {
    /// The images' fields: all states' data columns (the newest state's columns and types,
    /// then the columns only older states have; a column whose type changed takes the newest
    /// type), nullable; in the window's schema where there is one (`crate::schema::aligned`:
    /// its columns in its order, promoted types, null where no state has a column, no column
    /// it lacks).
    fields: Vec<Field>,
    /// Per field, its array of every batch of every state, then the all-null one.
    arrays: Vec<Vec<ArrayRef>>,
    /// Per state, the index of its first batch.
    offsets: Vec<usize>,
    /// The index of the all-null batch.
    null_batch: usize,
}

impl Images {
    fn of(states: &[State], schemas: &[SchemaRef], window: Option<&ViewSchema>) -> Result<Images> {
        let full = schemas
            .iter()
            .rev()
            .fold(None::<SchemaRef>, |acc, s| {
                Some(match acc {
                    None => s.clone(),
                    Some(newer) => output_schema(Some(&newer), Some(s)),
                })
            })
            .unwrap_or_else(|| Arc::new(Schema::empty()));
        let full = match window {
            Some(w) => aligned(&full, &w.arrow),
            None => full,
        };
        let fields: Vec<Field> = full
            .fields()
            .iter()
            .filter(|f| !META_COLUMNS.contains(&f.name().as_str())) // not part of the images
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        let data_schema = Arc::new(Schema::new(fields.clone()));
        let mut arrays: Vec<Vec<ArrayRef>> = vec![Vec::new(); fields.len()];
        let mut offsets = Vec::with_capacity(states.len());
        let mut n = 0usize;
        for st in states {
            offsets.push(n);
            for batch in &st.batches {
                let (c, _) = conform_batch(batch, &data_schema).map_err(|e| {
                    MergeError::unsupported(format!("states do not share a schema: {e}"))
                })?;
                for (i, col) in c.columns().iter().enumerate() {
                    arrays[i].push(col.clone());
                }
                n += 1;
            }
        }
        for (i, f) in fields.iter().enumerate() {
            arrays[i].push(new_null_array(f.data_type(), 1));
        }
        Ok(Images {
            fields,
            arrays,
            offsets,
            null_batch: n,
        })
    }

    /// The image column of `changes` whose places `which` gives (null where it gives none).
    fn column(
        &self,
        changes: &[Change],
        which: &dyn Fn(&Change) -> Option<At>,
    ) -> Result<ArrayRef> {
        let idx: Vec<(usize, usize)> = changes
            .iter()
            .map(|c| match which(c) {
                Some((s, b, r)) => (self.offsets[s] + b, r),
                None => (self.null_batch, 0),
            })
            .collect();
        let children = self
            .arrays
            .iter()
            .map(|col| {
                let refs: Vec<&dyn Array> = col.iter().map(|a| a.as_ref()).collect();
                arrow_select::interleave::interleave(&refs, &idx)
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| MergeError::corrupt(format!("assembling change images: {e}")))?;
        let nulls = NullBuffer::from(
            changes
                .iter()
                .map(|c| which(c).is_some())
                .collect::<Vec<_>>(),
        );
        let fields: Fields = self.fields.clone().into();
        if fields.is_empty() {
            return Ok(Arc::new(StructArray::new_empty_fields(
                changes.len(),
                Some(nulls),
            )));
        }
        StructArray::try_new(fields, children, Some(nulls))
            .map(|s| Arc::new(s) as ArrayRef)
            .map_err(|e| MergeError::corrupt(format!("assembling change images: {e}")))
    }
}

/// Write the change records of `group` found in its states to `out`; the bytes written.
pub(super) fn write_feed<W: Write + Send>(group: &CdcGroup, found: Changes, out: W) -> Result<u64> {
    let Changes {
        states,
        schemas,
        changes,
    } = found;
    let partition = group.partition.clone();
    let images = Images::of(&states, &schemas, group.schema.as_deref())?;
    let before = images.column(&changes, &|c| c.before)?;
    let after = images.column(&changes, &|c| c.after)?;
    let strings = |f: &dyn Fn(&Change) -> Option<String>| -> ArrayRef {
        let mut b = StringBuilder::new();
        for c in &changes {
            b.append_option(f(c));
        }
        Arc::new(b.finish())
    };
    let steps = &group.steps;
    let columns = vec![
        strings(&|c| Some(c.op.to_string())),
        strings(&|c| Some(steps[c.ts].instant.clone())),
        strings(&|c| Some(c.key.clone())),
        strings(&|c| Some(c.partition.clone().unwrap_or_else(|| partition.clone()))),
        before,
        after,
    ];
    let struct_type = DataType::Struct(images.fields.into());
    let out_schema = Arc::new(Schema::new(vec![
        Field::new("op", DataType::Utf8, false),
        Field::new("ts_ms", DataType::Utf8, false),
        Field::new("_hoodie_record_key", DataType::Utf8, false),
        Field::new("_hoodie_partition_path", DataType::Utf8, false),
        Field::new("before", struct_type.clone(), true),
        Field::new("after", struct_type, true),
    ]));
    let batch = RecordBatch::try_new(out_schema.clone(), columns)
        .map_err(|e| MergeError::corrupt(format!("assembling change records: {e}")))?;
    write_parquet(group, out_schema, &batch, out)
}

/// The change records `batch` as the feed's Parquet file, written to `out`; the bytes written.
fn write_parquet<W: Write + Send>(
    group: &CdcGroup,
    schema: SchemaRef,
    batch: &RecordBatch,
    out: W,
) -> Result<u64> {
    let kv = vec![KeyValue::new("hudifs.cdc.group".to_string(), group.id())];
    let props = writer_properties(CDC_CREATED_BY, kv).build();
    let options = ArrowWriterOptions::new()
        .with_properties(props)
        .with_skip_arrow_metadata(true);
    let counting = Counting { inner: out, n: 0 };
    let write_err = |e: parquet::errors::ParquetError| {
        MergeError::corrupt(format!("writing the change feed: {e}"))
    };
    let mut w = ArrowWriter::try_new_with_options(counting, schema, options).map_err(|e| {
        MergeError::unsupported(format!("cannot write the change feed's schema: {e}"))
    })?;
    w.write(batch).map_err(write_err)?;
    let counting = w.into_inner().map_err(write_err)?;
    let n = counting.n;
    let mut inner = counting.inner;
    inner
        .flush()
        .map_err(|e| MergeError::corrupt(format!("writing the change feed: {e}")))?;
    Ok(n)
}
