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
//!
//! This module compiles a writer schema (`AvroToArrow::new`); `decode` decodes records under
//! it into Arrow columns, reading with `hudifs_core`'s bounded [`AvroCursor`].

mod decode;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use apache_avro::Schema as S;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef, TimeUnit};
pub use decode::decimal_from_be;
pub use hudifs_core::metadata::AvroCursor;

/// How deeply values may nest (records, arrays, maps and unions each add a level).
pub const MAX_DEPTH: usize = 64;
/// Values a block may decode beyond one per byte of its content.
pub const VALUE_SLACK: usize = 4096;
/// Nodes a compiled schema may have (a schema is text in a block header; a few thousand
/// columns is the most any real table has).
const MAX_NODES: usize = 100_000;

#[derive(Debug, Clone)]
pub(crate) enum Node {
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
