//! Records decoded under a compiled writer schema, straight into Arrow columns: every value
//! charged to the budget, every length checked by the cursor.

use std::sync::Arc;

use arrow_array::builder::{BinaryBuilder, FixedSizeBinaryBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Decimal128Array, Float32Array, Float64Array, Int32Array,
    Int64Array, ListArray, MapArray, NullArray, RecordBatch, RecordBatchOptions, StructArray,
};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::DataType;

use super::{AvroCursor, AvroToArrow, Node, MAX_DEPTH};

impl AvroToArrow {
    /// Decode records (each the Avro binary encoding of one record, bytes after it ignored
    /// as Java's reader ignores them) into one batch. `budget` is the number of values the
    /// records may make in all.
    pub fn decode<'a>(
        &self,
        records: impl Iterator<Item = &'a [u8]>,
        budget: usize,
    ) -> Result<RecordBatch, String> {
        let mut col = Col::new(&self.types[self.root])?;
        let mut budget = budget;
        let mut rows = 0usize;
        for (i, r) in records.enumerate() {
            let mut input = AvroCursor::new(r);
            self.value(self.root, &mut input, &mut col, &mut budget, 0)
                .map_err(|e| format!("record {i}: {e}"))?;
            rows += 1;
        }
        let array = col.finish(&self.types[self.root])?;
        let s = array
            .as_any()
            .downcast_ref::<StructArray>()
            .ok_or("root is not a record")?;
        let (_, columns, _) = s.clone().into_parts();
        RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )
        .map_err(|e| e.to_string())
    }

    fn value(
        &self,
        node: usize,
        input: &mut AvroCursor,
        col: &mut Col,
        budget: &mut usize,
        depth: usize,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("values nested more than {MAX_DEPTH} levels deep"));
        }
        let n = &self.nodes[node];
        if !matches!(n, Node::Optional { .. }) {
            *budget = budget
                .checked_sub(1)
                .ok_or("more values than the block has bytes (a count no real file has)")?;
        }
        match (n, col) {
            (Node::Optional { null_index, inner }, col) => {
                let i = input.long()?;
                if i == *null_index {
                    col.append_null();
                    Ok(())
                } else if i == 1 - *null_index {
                    self.value(*inner, input, col, budget, depth + 1)
                } else {
                    Err(format!("union index {i} of 2 variants"))
                }
            }
            (Node::Null, Col::Null(n)) => {
                *n += 1;
                Ok(())
            }
            (Node::Bool, Col::Bool(v, nb)) => {
                let b = input.byte()?;
                if b > 1 {
                    return Err(format!("boolean byte {b}"));
                }
                v.push(b == 1);
                nb.append_non_null();
                Ok(())
            }
            (Node::Int, Col::I32(v, nb)) => {
                v.push(input.int()?);
                nb.append_non_null();
                Ok(())
            }
            (Node::Long, Col::I64(v, nb)) => {
                v.push(input.long()?);
                nb.append_non_null();
                Ok(())
            }
            (Node::Float, Col::F32(v, nb)) => {
                let b = input.take(4)?;
                v.push(f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                nb.append_non_null();
                Ok(())
            }
            (Node::Double, Col::F64(v, nb)) => {
                let b = input.take(8)?;
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                v.push(f64::from_le_bytes(a));
                nb.append_non_null();
                Ok(())
            }
            (Node::Bytes, Col::Bin(b)) => {
                let s = input.bytes()?;
                b.append_value(s);
                Ok(())
            }
            (Node::Str, Col::Str(b)) => {
                b.append_value(input.str()?);
                Ok(())
            }
            (Node::Enum(symbols), Col::Str(b)) => {
                let i = input.int()?;
                let s = usize::try_from(i)
                    .ok()
                    .and_then(|i| symbols.get(i))
                    .ok_or_else(|| format!("enum index {i} of {} symbols", symbols.len()))?;
                b.append_value(s);
                Ok(())
            }
            (Node::Fixed(size), Col::Fixed(b)) => {
                let s = input.take(*size)?;
                b.append_value(s).map_err(|e| e.to_string())
            }
            (Node::Decimal { fixed }, Col::Dec(v, nb)) => {
                let s = match fixed {
                    Some(n) => input.take(*n)?,
                    None => input.bytes()?,
                };
                v.push(decimal_from_be(s)?);
                nb.append_non_null();
                Ok(())
            }
            (Node::Record(children), Col::Struct(cols, nb)) => {
                for (c, sub) in children.iter().zip(cols.iter_mut()) {
                    self.value(*c, input, sub, budget, depth + 1)?;
                }
                nb.append_non_null();
                Ok(())
            }
            (Node::Array(item), Col::List(offsets, child, nb)) => {
                let mut len = *offsets.last().unwrap_or(&0);
                loop {
                    let count = input.block_count()?;
                    if count == 0 {
                        break;
                    }
                    for _ in 0..count {
                        self.value(*item, input, child, budget, depth + 1)?;
                        len = len.checked_add(1).ok_or("list of more than 2^31 items")?;
                    }
                }
                offsets.push(len);
                nb.append_non_null();
                Ok(())
            }
            (Node::Map(value), Col::Map(offsets, keys, values, nb)) => {
                let mut len = *offsets.last().unwrap_or(&0);
                loop {
                    let count = input.block_count()?;
                    if count == 0 {
                        break;
                    }
                    for _ in 0..count {
                        let at = input.pos();
                        let k = input.bytes()?;
                        let k = std::str::from_utf8(k)
                            .map_err(|_| format!("map key at byte {at} is not UTF-8"))?;
                        keys.append_value(k);
                        self.value(*value, input, values, budget, depth + 1)?;
                        len = len.checked_add(1).ok_or("map of more than 2^31 entries")?;
                    }
                }
                offsets.push(len);
                nb.append_non_null();
                Ok(())
            }
            _ => Err("schema and column disagree (internal)".into()),
        }
    }
}

/// A big-endian two's complement integer of at most 16 bytes.
pub fn decimal_from_be(s: &[u8]) -> Result<i128, String> {
    if s.len() > 16 {
        return Err(format!("decimal of {} bytes", s.len()));
    }
    if s.is_empty() {
        return Ok(0);
    }
    let neg = s[0] & 0x80 != 0;
    let mut a = if neg { [0xffu8; 16] } else { [0u8; 16] };
    a[16 - s.len()..].copy_from_slice(s);
    Ok(i128::from_be_bytes(a))
}

/// A column being built.
enum Col {
    Null(usize),
    Bool(Vec<bool>, NullBufferBuilder),
    I32(Vec<i32>, NullBufferBuilder),
    I64(Vec<i64>, NullBufferBuilder),
    F32(Vec<f32>, NullBufferBuilder),
    F64(Vec<f64>, NullBufferBuilder),
    Dec(Vec<i128>, NullBufferBuilder),
    Bin(BinaryBuilder),
    Str(StringBuilder),
    Fixed(FixedSizeBinaryBuilder),
    Struct(Vec<Col>, NullBufferBuilder),
    List(Vec<i32>, Box<Col>, NullBufferBuilder),
    Map(Vec<i32>, StringBuilder, Box<Col>, NullBufferBuilder),
}

impl Col {
    fn new(dt: &DataType) -> Result<Col, String> {
        Ok(match dt {
            DataType::Null => Col::Null(0),
            DataType::Boolean => Col::Bool(Vec::new(), NullBufferBuilder::new(0)),
            DataType::Int32 | DataType::Date32 | DataType::Time32(_) => {
                Col::I32(Vec::new(), NullBufferBuilder::new(0))
            }
            DataType::Int64 | DataType::Time64(_) | DataType::Timestamp(_, _) => {
                Col::I64(Vec::new(), NullBufferBuilder::new(0))
            }
            DataType::Float32 => Col::F32(Vec::new(), NullBufferBuilder::new(0)),
            DataType::Float64 => Col::F64(Vec::new(), NullBufferBuilder::new(0)),
            DataType::Decimal128(_, _) => Col::Dec(Vec::new(), NullBufferBuilder::new(0)),
            DataType::Binary => Col::Bin(BinaryBuilder::with_capacity(0, 0)),
            DataType::Utf8 => Col::Str(StringBuilder::with_capacity(0, 0)),
            DataType::FixedSizeBinary(n) => {
                Col::Fixed(FixedSizeBinaryBuilder::with_capacity(0, *n))
            }
            DataType::Struct(fields) => Col::Struct(
                fields
                    .iter()
                    .map(|f| Col::new(f.data_type()))
                    .collect::<Result<_, _>>()?,
                NullBufferBuilder::new(0),
            ),
            DataType::List(f) => Col::List(
                vec![0],
                Box::new(Col::new(f.data_type())?),
                NullBufferBuilder::new(0),
            ),
            DataType::Map(entries, _) => {
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err("map entries are not a struct".into());
                };
                Col::Map(
                    vec![0],
                    StringBuilder::with_capacity(0, 0),
                    Box::new(Col::new(kv[1].data_type())?),
                    NullBufferBuilder::new(0),
                )
            }
            other => return Err(format!("no column for {other}")),
        })
    }

    fn append_null(&mut self) {
        match self {
            Col::Null(n) => *n += 1,
            Col::Bool(v, nb) => {
                v.push(false);
                nb.append_null()
            }
            Col::I32(v, nb) => {
                v.push(0);
                nb.append_null()
            }
            Col::I64(v, nb) => {
                v.push(0);
                nb.append_null()
            }
            Col::F32(v, nb) => {
                v.push(0.0);
                nb.append_null()
            }
            Col::F64(v, nb) => {
                v.push(0.0);
                nb.append_null()
            }
            Col::Dec(v, nb) => {
                v.push(0);
                nb.append_null()
            }
            Col::Bin(b) => b.append_null(),
            Col::Str(b) => b.append_null(),
            Col::Fixed(b) => b.append_null(),
            Col::Struct(cols, nb) => {
                for c in cols {
                    c.append_null();
                }
                nb.append_null()
            }
            Col::List(offsets, _, nb) | Col::Map(offsets, _, _, nb) => {
                let last = *offsets.last().unwrap_or(&0);
                offsets.push(last);
                nb.append_null()
            }
        }
    }

    fn finish(self, dt: &DataType) -> Result<ArrayRef, String> {
        let e = |e: arrow_schema::ArrowError| e.to_string();
        let cast = |a: ArrayRef| -> Result<ArrayRef, String> {
            if a.data_type() == dt {
                Ok(a)
            } else {
                arrow_cast::cast(&a, dt).map_err(e)
            }
        };
        Ok(match self {
            Col::Null(n) => Arc::new(NullArray::new(n)),
            Col::Bool(v, mut nb) => Arc::new(BooleanArray::new(v.into(), nb.finish())),
            Col::I32(v, mut nb) => cast(Arc::new(Int32Array::new(
                ScalarBuffer::from(v),
                nb.finish(),
            )))?,
            Col::I64(v, mut nb) => cast(Arc::new(Int64Array::new(
                ScalarBuffer::from(v),
                nb.finish(),
            )))?,
            Col::F32(v, mut nb) => Arc::new(Float32Array::new(ScalarBuffer::from(v), nb.finish())),
            Col::F64(v, mut nb) => Arc::new(Float64Array::new(ScalarBuffer::from(v), nb.finish())),
            Col::Dec(v, mut nb) => {
                let DataType::Decimal128(p, s) = dt else {
                    return Err("decimal column of another type".into());
                };
                Arc::new(
                    Decimal128Array::new(ScalarBuffer::from(v), nb.finish())
                        .with_precision_and_scale(*p, *s)
                        .map_err(e)?,
                )
            }
            Col::Bin(mut b) => Arc::new(b.finish()),
            Col::Str(mut b) => Arc::new(b.finish()),
            Col::Fixed(mut b) => Arc::new(b.finish()),
            Col::Struct(cols, mut nb) => {
                let DataType::Struct(fields) = dt else {
                    return Err("struct column of another type".into());
                };
                let len = nb.len();
                let children = cols
                    .into_iter()
                    .zip(fields.iter())
                    .map(|(c, f)| c.finish(f.data_type()))
                    .collect::<Result<Vec<_>, _>>()?;
                Arc::new(
                    StructArray::try_new_with_length(fields.clone(), children, nb.finish(), len)
                        .map_err(e)?,
                )
            }
            Col::List(offsets, child, mut nb) => {
                let DataType::List(f) = dt else {
                    return Err("list column of another type".into());
                };
                let values = child.finish(f.data_type())?;
                Arc::new(
                    ListArray::try_new(
                        f.clone(),
                        OffsetBuffer::new(ScalarBuffer::from(offsets)),
                        values,
                        nb.finish(),
                    )
                    .map_err(e)?,
                )
            }
            Col::Map(offsets, mut keys, values, mut nb) => {
                let DataType::Map(entries, sorted) = dt else {
                    return Err("map column of another type".into());
                };
                let DataType::Struct(kv) = entries.data_type() else {
                    return Err("map entries are not a struct".into());
                };
                let keys: ArrayRef = Arc::new(keys.finish());
                let values = values.finish(kv[1].data_type())?;
                let entries_array =
                    StructArray::try_new(kv.clone(), vec![keys, values], None).map_err(e)?;
                Arc::new(
                    MapArray::try_new(
                        entries.clone(),
                        OffsetBuffer::new(ScalarBuffer::from(offsets)),
                        entries_array,
                        nb.finish(),
                        *sorted,
                    )
                    .map_err(e)?,
                )
            }
        })
    }
}
