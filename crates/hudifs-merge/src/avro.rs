//! Avro binary records (the records of Hudi's Avro data blocks) decoded straight into Arrow
//! arrays, column by column, under the writer schema of the block's header.
//!
//! The input is untrusted (anyone who can write the table can write a log file), so decoding
//! follows the rules of the instant-metadata decoder in `hudifs_core::metadata`: every length is
//! checked against the bytes left before anything is taken, nothing is reserved from a count
//! (arrays and maps grow item by item), every value decoded is charged to a budget of one value
//! per byte of block content plus a constant (a value other than a bare null or an empty record
//! takes at least one byte, so values that take no bytes cannot multiply), values nest at most
//! [`MAX_DEPTH`] levels, and recursive schemas are refused. Malformed data gives an error, never
//! a panic or an allocation from a count.

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::Schema as S;
use arrow_array::builder::{BinaryBuilder, FixedSizeBinaryBuilder, StringBuilder};
use arrow_array::{
    Array, ArrayRef, BooleanArray, Decimal128Array, Float32Array, Float64Array, Int32Array,
    Int64Array, ListArray, MapArray, NullArray, RecordBatch, RecordBatchOptions, StructArray,
};
use arrow_buffer::{NullBufferBuilder, OffsetBuffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef, Fields, Schema, SchemaRef, TimeUnit};

/// How deeply values may nest (records, arrays, maps and unions each add a level).
pub const MAX_DEPTH: usize = 64;
/// Values a block may decode beyond one per byte of its content.
pub const VALUE_SLACK: usize = 4096;
/// Nodes a compiled schema may have (a schema is text in a block header; a few thousand
/// columns is the most any real table has).
const MAX_NODES: usize = 100_000;

#[derive(Debug, Clone)]
enum Node {
    Null,
    Bool,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    Str,
    Enum(Vec<String>),
    Fixed(usize),
    Decimal {
        fixed: Option<usize>,
    },
    Record(Vec<usize>),
    Array(usize),
    Map(usize),
    /// A union of null and one other type.
    Optional {
        null_index: i64,
        inner: usize,
    },
}

/// A writer schema compiled for decoding into Arrow.
pub struct AvroToArrow {
    nodes: Vec<Node>,
    types: Vec<DataType>,
    root: usize,
    schema: SchemaRef,
}

impl std::fmt::Debug for AvroToArrow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AvroToArrow({:?})", self.schema)
    }
}

/// Why a schema cannot be decoded: unsupported (a type hudifs does not map) or malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaProblem {
    Unsupported(String),
    Malformed(String),
}

struct Compiler<'s> {
    names: HashMap<String, &'s S>,
    nodes: Vec<Node>,
    types: Vec<DataType>,
    open: Vec<String>,
}

fn fullname(name: &apache_avro::schema::Name, ns: &Option<String>) -> String {
    let n = name.fully_qualified_name(ns);
    match n.namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}.{}", n.name),
        _ => n.name,
    }
}

fn collect_names<'s>(
    s: &'s S,
    ns: &Option<String>,
    out: &mut HashMap<String, &'s S>,
    depth: usize,
) -> Result<(), SchemaProblem> {
    if depth > MAX_DEPTH {
        return Err(SchemaProblem::Malformed("schema nests too deeply".into()));
    }
    match s {
        S::Record(r) => {
            let full = fullname(&r.name, ns);
            let inner = r.name.fully_qualified_name(ns).namespace;
            out.insert(full, s);
            for f in &r.fields {
                collect_names(&f.schema, &inner, out, depth + 1)?;
            }
        }
        S::Enum(e) => {
            out.insert(fullname(&e.name, ns), s);
        }
        S::Fixed(f) => {
            out.insert(fullname(&f.name, ns), s);
        }
        S::Decimal(d) => collect_names(&d.inner, ns, out, depth + 1)?,
        S::Array(a) => collect_names(&a.items, ns, out, depth + 1)?,
        S::Map(m) => collect_names(&m.types, ns, out, depth + 1)?,
        S::Union(u) => {
            for v in u.variants() {
                collect_names(v, ns, out, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(())
}

impl<'s> Compiler<'s> {
    fn push(&mut self, node: Node, dt: DataType) -> Result<usize, SchemaProblem> {
        if self.nodes.len() >= MAX_NODES {
            return Err(SchemaProblem::Malformed(format!(
                "schema of more than {MAX_NODES} types"
            )));
        }
        self.nodes.push(node);
        self.types.push(dt);
        Ok(self.nodes.len() - 1)
    }

    /// Compile `s`; returns its node and whether it may be null.
    fn compile(
        &mut self,
        s: &'s S,
        ns: &Option<String>,
        depth: usize,
    ) -> Result<(usize, bool), SchemaProblem> {
        if depth > MAX_DEPTH {
            return Err(SchemaProblem::Malformed(format!(
                "schema nests more than {MAX_DEPTH} levels"
            )));
        }
        let utc = Some(Arc::<str>::from("+00:00"));
        let (node, dt) = match s {
            S::Null => (Node::Null, DataType::Null),
            S::Boolean => (Node::Bool, DataType::Boolean),
            S::Int => (Node::Int, DataType::Int32),
            S::Date => (Node::Int, DataType::Date32),
            S::TimeMillis => (Node::Int, DataType::Time32(TimeUnit::Millisecond)),
            S::Long => (Node::Long, DataType::Int64),
            S::TimeMicros => (Node::Long, DataType::Time64(TimeUnit::Microsecond)),
            S::TimestampMillis => (Node::Long, DataType::Timestamp(TimeUnit::Millisecond, utc)),
            S::TimestampMicros => (Node::Long, DataType::Timestamp(TimeUnit::Microsecond, utc)),
            S::TimestampNanos => (Node::Long, DataType::Timestamp(TimeUnit::Nanosecond, utc)),
            S::LocalTimestampMillis => {
                (Node::Long, DataType::Timestamp(TimeUnit::Millisecond, None))
            }
            S::LocalTimestampMicros => {
                (Node::Long, DataType::Timestamp(TimeUnit::Microsecond, None))
            }
            S::LocalTimestampNanos => (Node::Long, DataType::Timestamp(TimeUnit::Nanosecond, None)),
            S::Float => (Node::Float, DataType::Float32),
            S::Double => (Node::Double, DataType::Float64),
            S::Bytes => (Node::Bytes, DataType::Binary),
            S::String | S::Uuid => (Node::Str, DataType::Utf8),
            S::Enum(e) => (Node::Enum(e.symbols.clone()), DataType::Utf8),
            S::Fixed(f) => {
                let size = i32::try_from(f.size)
                    .map_err(|_| SchemaProblem::Malformed(format!("fixed of {} bytes", f.size)))?;
                (Node::Fixed(f.size), DataType::FixedSizeBinary(size))
            }
            S::Decimal(d) => {
                let fixed = match &*d.inner {
                    S::Fixed(f) => Some(f.size),
                    S::Bytes => None,
                    _ => {
                        return Err(SchemaProblem::Malformed(
                            "decimal over neither bytes nor fixed".into(),
                        ))
                    }
                };
                if d.precision > 38 || d.precision == 0 || d.scale > d.precision {
                    return Err(SchemaProblem::Unsupported(format!(
                        "decimal({}, {}) (at most 38 digits are merged)",
                        d.precision, d.scale
                    )));
                }
                (
                    Node::Decimal { fixed },
                    DataType::Decimal128(d.precision as u8, d.scale as i8),
                )
            }
            S::BigDecimal | S::Duration => {
                return Err(SchemaProblem::Unsupported(format!(
                    "Avro type {s:?} in a log block"
                )))
            }
            S::Array(a) => {
                let (item, nullable) = self.compile(&a.items, ns, depth + 1)?;
                let field = Field::new("element", self.types[item].clone(), nullable);
                (Node::Array(item), DataType::List(Arc::new(field)))
            }
            S::Map(m) => {
                let (value, nullable) = self.compile(&m.types, ns, depth + 1)?;
                let entries = Field::new(
                    "key_value",
                    DataType::Struct(Fields::from(vec![
                        Field::new("key", DataType::Utf8, false),
                        Field::new("value", self.types[value].clone(), nullable),
                    ])),
                    false,
                );
                (Node::Map(value), DataType::Map(Arc::new(entries), false))
            }
            S::Union(u) => {
                let variants = u.variants();
                let nulls: Vec<usize> = (0..variants.len())
                    .filter(|&i| matches!(variants[i], S::Null))
                    .collect();
                match (variants.len(), nulls.as_slice()) {
                    (1, []) => return self.compile(&variants[0], ns, depth + 1),
                    (1, [_]) => return self.compile(&variants[0], ns, depth + 1),
                    (2, [n]) => {
                        let (inner, _) = self.compile(&variants[1 - *n], ns, depth + 1)?;
                        let dt = self.types[inner].clone();
                        let id = self.push(
                            Node::Optional {
                                null_index: *n as i64,
                                inner,
                            },
                            dt,
                        )?;
                        return Ok((id, true));
                    }
                    _ => {
                        return Err(SchemaProblem::Unsupported(format!(
                            "a union of {} types (only a type or null is merged)",
                            variants.len()
                        )))
                    }
                }
            }
            S::Record(r) => {
                let full = fullname(&r.name, ns);
                if self.open.contains(&full) {
                    return Err(SchemaProblem::Unsupported(format!(
                        "recursive record {full}"
                    )));
                }
                let inner_ns = r.name.fully_qualified_name(ns).namespace;
                self.open.push(full);
                let mut children = Vec::new();
                let mut fields = Vec::new();
                for f in &r.fields {
                    let (c, nullable) = self.compile(&f.schema, &inner_ns, depth + 1)?;
                    fields.push(Field::new(&f.name, self.types[c].clone(), nullable));
                    children.push(c);
                }
                self.open.pop();
                (
                    Node::Record(children),
                    DataType::Struct(Fields::from(fields)),
                )
            }
            S::Ref { name } => {
                let full = fullname(name, ns);
                let target = *self.names.get(&full).ok_or_else(|| {
                    SchemaProblem::Malformed(format!("schema names an undefined type {full}"))
                })?;
                let target_ns = name.fully_qualified_name(ns).namespace;
                return self.compile(target, &target_ns, depth + 1);
            }
        };
        let nullable = matches!(node, Node::Null);
        Ok((self.push(node, dt)?, nullable))
    }
}

impl AvroToArrow {
    /// Compile the writer schema of a block (a JSON text from the block header). The root must
    /// be a record; its fields become the columns.
    pub fn new(schema_text: &str) -> Result<AvroToArrow, SchemaProblem> {
        apache_avro::max_allocation_bytes(32 << 20);
        let parsed = std::panic::catch_unwind(|| apache_avro::Schema::parse_str(schema_text))
            .map_err(|_| SchemaProblem::Malformed("malformed Avro schema".into()))?
            .map_err(|e| SchemaProblem::Malformed(format!("bad Avro schema: {e}")))?;
        Self::from_schema(&parsed)
    }

    pub fn from_schema(parsed: &S) -> Result<AvroToArrow, SchemaProblem> {
        let mut names = HashMap::new();
        collect_names(parsed, &None, &mut names, 0)?;
        let mut c = Compiler {
            names,
            nodes: Vec::new(),
            types: Vec::new(),
            open: Vec::new(),
        };
        let (root, _) = c.compile(parsed, &None, 0)?;
        let DataType::Struct(fields) = c.types[root].clone() else {
            return Err(SchemaProblem::Malformed(
                "the record schema of a data block is not a record".into(),
            ));
        };
        Ok(AvroToArrow {
            nodes: c.nodes,
            types: c.types,
            root,
            schema: Arc::new(Schema::new(fields)),
        })
    }

    /// The Arrow schema records decode to.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

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
            let mut input = Input { bytes: r, pos: 0 };
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
        input: &mut Input,
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
                let at = input.pos;
                let s = input.bytes()?;
                let s = std::str::from_utf8(s)
                    .map_err(|_| format!("string at byte {at} is not UTF-8"))?;
                b.append_value(s);
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
                        let at = input.pos;
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

/// A cursor over Avro binary data; every read is checked against the bytes left.
pub(crate) struct Input<'a> {
    pub bytes: &'a [u8],
    pub pos: usize,
}

impl<'a> Input<'a> {
    pub fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                format!(
                    "{n} bytes wanted at byte {}, {} left",
                    self.pos,
                    self.left()
                )
            })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub fn byte(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }
    /// A zigzag varint of at most 10 bytes.
    pub fn long(&mut self) -> Result<i64, String> {
        let mut z = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            z |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(((z >> 1) as i64) ^ -((z & 1) as i64));
            }
        }
        Err(format!(
            "integer of more than 10 bytes before byte {}",
            self.pos
        ))
    }
    pub fn int(&mut self) -> Result<i32, String> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| format!("int {v} out of range"))
    }
    /// Bytes or a string: a length, checked against the bytes left, then the bytes.
    pub fn bytes(&mut self) -> Result<&'a [u8], String> {
        let at = self.pos;
        let v = self.long()?;
        match usize::try_from(v) {
            Ok(n) if n <= self.left() => self.take(n),
            _ => Err(format!(
                "length {v} at byte {at}, {} bytes left",
                self.left()
            )),
        }
    }
    /// The item count of one block of an array or a map (0 ends it); a negative count is
    /// followed by the block's size in bytes.
    pub fn block_count(&mut self) -> Result<u64, String> {
        let n = self.long()?;
        if n < 0 {
            self.long()?;
        }
        Ok(n.unsigned_abs())
    }
}

/// A field of `fields` by name: exact, else ignoring ASCII case (Hudi's schemas are matched
/// case-insensitively by Spark).
pub fn field_index(fields: &Fields, name: &str) -> Option<usize> {
    fields.iter().position(|f| f.name() == name).or_else(|| {
        fields
            .iter()
            .position(|f| f.name().eq_ignore_ascii_case(name))
    })
}

#[allow(dead_code)]
fn _assert_field_ref(_: FieldRef) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn zz(out: &mut Vec<u8>, n: i64) {
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        loop {
            let b = (z & 0x7f) as u8;
            z >>= 7;
            if z == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        }
    }

    const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
        {"name":"k","type":"string"},
        {"name":"v","type":["null","long"]},
        {"name":"a","type":{"type":"array","items":"int"}},
        {"name":"m","type":["null",{"type":"map","values":"double"}]},
        {"name":"s","type":["null",{"type":"record","name":"in","fields":[{"name":"x","type":"int"}]}]},
        {"name":"d","type":{"type":"fixed","name":"dec","size":5,"logicalType":"decimal","precision":10,"scale":2}},
        {"name":"t","type":{"type":"long","logicalType":"timestamp-micros"}}
    ]}"#;

    fn record(k: &str, v: Option<i64>) -> Vec<u8> {
        let mut r = Vec::new();
        zz(&mut r, k.len() as i64);
        r.extend(k.as_bytes());
        match v {
            None => zz(&mut r, 0),
            Some(v) => {
                zz(&mut r, 1);
                zz(&mut r, v)
            }
        }
        zz(&mut r, 2);
        zz(&mut r, 7);
        zz(&mut r, -7);
        zz(&mut r, 0);
        zz(&mut r, 1);
        zz(&mut r, 1);
        zz(&mut r, 1);
        r.push(b'x');
        r.extend(1.5f64.to_le_bytes());
        zz(&mut r, 0);
        zz(&mut r, 0);
        r.extend([0xff, 0xff, 0xff, 0xff, 0x9c]);
        zz(&mut r, 1_700_000_000_000_000);
        r
    }

    #[test]
    fn decodes_columns() {
        let d = AvroToArrow::new(SCHEMA).unwrap();
        let rows = [record("a", Some(5)), record("bb", None)];
        let b = d.decode(rows.iter().map(|r| r.as_slice()), 10_000).unwrap();
        assert_eq!(b.num_rows(), 2);
        assert_eq!(b.num_columns(), 7);
        let v = b.column(1).as_any().downcast_ref::<Int64Array>().unwrap();
        assert_eq!(v.value(0), 5);
        assert!(v.is_null(1));
        let dec = b
            .column(5)
            .as_any()
            .downcast_ref::<Decimal128Array>()
            .unwrap();
        assert_eq!(dec.value(0), -100);
        assert_eq!(b.column(4).null_count(), 2);
    }

    #[test]
    fn bombs_are_refused() {
        // An array announcing 2^40 items of type null: each decodes from no bytes.
        let d = AvroToArrow::new(
            r#"{"type":"record","name":"r","fields":[{"name":"a","type":{"type":"array","items":"null"}}]}"#,
        )
        .unwrap();
        let mut r = Vec::new();
        zz(&mut r, 1 << 40);
        let started = std::time::Instant::now();
        assert!(d
            .decode(std::iter::once(r.as_slice()), r.len() + VALUE_SLACK)
            .is_err());
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        // A string announcing more bytes than there are.
        let d = AvroToArrow::new(
            r#"{"type":"record","name":"r","fields":[{"name":"s","type":"string"}]}"#,
        )
        .unwrap();
        let mut r = Vec::new();
        zz(&mut r, i64::MAX);
        assert!(d.decode(std::iter::once(r.as_slice()), 100).is_err());
        // Truncated varints, bad union indexes, bad enum indexes.
        let d = AvroToArrow::new(SCHEMA).unwrap();
        let good = record("a", Some(1));
        for cut in 0..good.len() {
            assert!(
                d.decode(std::iter::once(&good[..cut]), 10_000).is_err(),
                "{cut}"
            );
        }
        // Recursive and deeply nested schemas.
        assert!(AvroToArrow::new(
            r#"{"type":"record","name":"r","fields":[{"name":"n","type":["null","r"]}]}"#
        )
        .is_err());
        let mut deep = String::from(r#"{"type":"record","name":"r","fields":[{"name":"a","type":"#);
        for _ in 0..200 {
            deep.push_str(r#"{"type":"array","items":"#);
        }
        deep.push_str("\"int\"");
        for _ in 0..200 {
            deep.push('}');
        }
        deep.push_str("}]}");
        assert!(AvroToArrow::new(&deep).is_err());
    }
}
