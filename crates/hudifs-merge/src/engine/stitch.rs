//! The base rows of a metadata-only bootstrapped slice: its skeleton file (the five `_hoodie_*`
//! meta columns) joined row by row with its source file (the data columns), as Java's
//! bootstrap reader joins them (`HoodieBootstrapRecordIterator`: the n-th skeleton record's meta
//! values prepended to the n-th source record; both must end together).
//!
//! The stitched row holds the skeleton's meta columns first, in the skeleton's order, then the
//! source's columns in the source's order; a source column with a meta column's name is left
//! out (the skeleton's value is the one Java keeps).

use std::sync::Arc;

use arrow_array::{RecordBatch, RecordBatchReader};
use arrow_schema::{Schema, SchemaRef};
use hudifs_storage::{Storage, TablePath};
use parquet::arrow::arrow_reader::ParquetRecordBatchReader;

use crate::error::{MergeError, Result};
use crate::materialise::InputFile;

/// The source file of a bootstrapped slice, on the storage its bootstrap base path names (the
/// table's own store or local disk).
#[derive(Debug, Clone)]
pub struct BootstrapSource {
    pub storage: Arc<dyn Storage>,
    pub file: InputFile,
}

impl BootstrapSource {
    pub fn new(storage: Arc<dyn Storage>, path: TablePath, size: Option<u64>) -> Self {
        BootstrapSource {
            storage,
            file: InputFile::new(path, size),
        }
    }

    /// The source file as messages name it.
    pub fn describe(&self) -> String {
        self.storage.describe(&self.file.path)
    }
}

impl PartialEq for BootstrapSource {
    fn eq(&self, other: &Self) -> bool {
        self.describe() == other.describe() && self.file == other.file
    }
}

impl Eq for BootstrapSource {}

/// Whether a column is one of Hudi's meta columns.
pub(crate) fn is_meta(name: &str) -> bool {
    name.starts_with("_hoodie_")
}

/// The schema of the stitched rows: the skeleton's meta columns, then the source's columns.
pub(crate) fn stitched_schema(skeleton: &Schema, source: &Schema) -> SchemaRef {
    let fields: Vec<_> = skeleton
        .fields()
        .iter()
        .filter(|f| is_meta(f.name()))
        .chain(source.fields().iter().filter(|f| !is_meta(f.name())))
        .cloned()
        .collect();
    Arc::new(Schema::new(fields))
}

/// The stitched rows of a skeleton reader and a source reader, batch by batch (batches are cut
/// where either side's batch ends).
pub(crate) struct Stitched {
    skeleton: ParquetRecordBatchReader,
    source: ParquetRecordBatchReader,
    schema: SchemaRef,
    meta: Vec<usize>,
    data: Vec<usize>,
    left: Option<RecordBatch>,
    right: Option<RecordBatch>,
    names: (String, String),
    done: bool,
}

impl Stitched {
    pub(crate) fn new(
        skeleton: ParquetRecordBatchReader,
        source: ParquetRecordBatchReader,
        names: (String, String),
    ) -> Stitched {
        let (ks, ss) = (skeleton.schema(), source.schema());
        let schema = stitched_schema(&ks, &ss);
        let meta = (0..ks.fields().len())
            .filter(|&i| is_meta(ks.field(i).name()))
            .collect();
        let data = (0..ss.fields().len())
            .filter(|&i| !is_meta(ss.field(i).name()))
            .collect();
        Stitched {
            skeleton,
            source,
            schema,
            meta,
            data,
            left: None,
            right: None,
            names,
            done: false,
        }
    }

    fn mismatch(&self, which: &str) -> MergeError {
        MergeError::corrupt(format!(
            "skeleton {} and source {} do not hold the same number of rows ({which} ends first)",
            self.names.0, self.names.1
        ))
    }

    fn step(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            if self.left.as_ref().is_none_or(|b| b.num_rows() == 0) {
                self.left = match self.skeleton.next() {
                    None => None,
                    Some(b) => {
                        Some(b.map_err(|e| MergeError::corrupt(format!("{}: {e}", self.names.0)))?)
                    }
                };
            }
            if self.right.as_ref().is_none_or(|b| b.num_rows() == 0) {
                self.right = match self.source.next() {
                    None => None,
                    Some(b) => {
                        Some(b.map_err(|e| MergeError::corrupt(format!("{}: {e}", self.names.1)))?)
                    }
                };
            }
            match (&self.left, &self.right) {
                (None, None) => return Ok(None),
                (Some(l), None) if l.num_rows() > 0 => return Err(self.mismatch("the source")),
                (None, Some(r)) if r.num_rows() > 0 => return Err(self.mismatch("the skeleton")),
                (Some(l), Some(r)) if l.num_rows() > 0 && r.num_rows() > 0 => break,
                _ => continue,
            }
        }
        let (Some(l), Some(r)) = (self.left.take(), self.right.take()) else {
            return Ok(None);
        };
        let n = l.num_rows().min(r.num_rows());
        let columns = self
            .meta
            .iter()
            .map(|&i| l.column(i).slice(0, n))
            .chain(self.data.iter().map(|&i| r.column(i).slice(0, n)))
            .collect();
        self.left = Some(l.slice(n, l.num_rows() - n));
        self.right = Some(r.slice(n, r.num_rows() - n));
        RecordBatch::try_new(self.schema.clone(), columns)
            .map(Some)
            .map_err(|e| MergeError::corrupt(format!("stitching {}: {e}", self.names.0)))
    }
}

impl Iterator for Stitched {
    type Item = Result<RecordBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
