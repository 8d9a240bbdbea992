//! Avro object container files (Hudi 1.x instant metadata, every plan).
//!
//! apache-avro parses the writer schema; the container and its data are decoded here, straight
//! to JSON. apache-avro's `Reader` trusted the counts it read: it reserved room for as many map
//! entries or array items as a count announced (capped only by `max_allocation_bytes`: an
//! 8-byte header asked for 5.4 GB), decoded 33 M items of type `null` from a 4-byte count (4.5
//! GB resident: each value was built twice, its `Value`, then ours), and inflated deflate blocks
//! without limit. Here nothing is reserved from a count, every length is checked against the
//! bytes left before anything is allocated, and every JSON value made is charged to a budget of
//! one value per byte of block data plus `AVRO_VALUE_SLACK`. A value other than a bare `null`,
//! an empty record or an empty `fixed` takes at least one byte, so real data stays far inside
//! the budget (the fixture tables' instant files: at most 0.42 values per byte in blocks of
//! 500 bytes or more, at most 607 values in a file), while values that take no bytes cannot
//! multiply. A container of n bytes thus decodes to at most n + 4096 JSON values (with deflate,
//! 16 n + 64 Ki + 4096), each a few tens of bytes.

use std::fmt;

use serde_json::Value;

/// Why Avro data could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AvroError(pub String);

impl fmt::Display for AvroError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for AvroError {}

impl From<String> for AvroError {
    fn from(s: String) -> Self {
        AvroError(s)
    }
}

impl From<AvroError> for String {
    fn from(e: AvroError) -> String {
        e.0
    }
}

impl From<&str> for AvroError {
    fn from(s: &str) -> Self {
        AvroError(s.to_string())
    }
}

macro_rules! err {
    ($($t:tt)*) => {
        AvroError(format!($($t)*))
    };
}

/// Records a container may hold: an instant file holds one; a container announcing more (a
/// corrupt count can announce `u64::MAX` records that decode from zero bytes) is not an
/// instant file.
const AVRO_MAX_RECORDS: usize = 64;

/// How deeply values may nest (each record, array, map and union is a level). Hudi's deepest
/// metadata nests 10 levels (the fixture tables); a schema without recursion can still nest deeply
/// through a chain of named types, and decoding recurses once per level.
const AVRO_MAX_DEPTH: usize = 64;

/// JSON values a decode may make beyond one per byte of (inflated) block data; see above.
const AVRO_VALUE_SLACK: usize = 4096;

/// A container's deflate blocks may inflate to at most this many times the container's size,
/// plus `AVRO_INFLATE_SLACK` (deflate can inflate 1032-fold: a 1 MB block to 1 GB). Hudi writes
/// its instant files uncompressed (codec `null`); the blocks of the fixture tables' instant
/// files, deflated, inflate at most 8.6-fold.
const AVRO_INFLATE_RATIO: usize = 16;
const AVRO_INFLATE_SLACK: usize = 64 << 10;

/// The longest decimal (`decimal`, `big-decimal`) decoded, in bytes (2,466 decimal digits;
/// rendering a long one is quadratic). No Hudi schema has decimals.
const AVRO_MAX_DECIMAL_BYTES: usize = 1024;

/// apache-avro's process-wide cap on the lengths it allocates for. Container data and the
/// records of archived log blocks (`archive.rs`) are decoded here, not by apache-avro; the cap
/// still guards the rare logical types handed to it on slices of exactly their size.
const AVRO_MAX_ALLOCATION: usize = 32 << 20;

pub(crate) fn decode_avro(bytes: &[u8]) -> Result<Value, AvroError> {
    apache_avro::max_allocation_bytes(AVRO_MAX_ALLOCATION);
    // apache-avro can panic on some malformed schemas; bad input must never take the daemon
    // down, so a panic is one more way of being unreadable.
    std::panic::catch_unwind(|| decode_avro_unguarded(bytes))
        .unwrap_or_else(|_| Err(AvroError::from("malformed Avro (the decoder gave up)")))
}

fn decode_avro_unguarded(bytes: &[u8]) -> Result<Value, AvroError> {
    let mut input = AvroCursor::new(bytes);
    if input.take(4)? != b"Obj\x01" {
        return Err(AvroError::from("not an Avro object container file"));
    }
    // The header: file metadata (a map of bytes), then the sync marker.
    let header = |e: AvroError| err!("bad Avro container header: {e}");
    let (mut schema, mut codec) = (None, None);
    loop {
        let count = input.block_count().map_err(header)?;
        if count == 0 {
            break;
        }
        // Each entry takes at least two bytes, so a count past the input ends in an error.
        for _ in 0..count {
            let key = input.string().map_err(header)?;
            let value = input.bytes().map_err(header)?;
            match key.as_str() {
                "avro.schema" => schema = Some(value),
                "avro.codec" => codec = Some(value),
                _ => {}
            }
        }
    }
    let sync = input.take(16).map_err(header)?;
    let schema: serde_json::Value = schema
        .and_then(|s| serde_json::from_slice(s).ok())
        .ok_or_else(|| header(AvroError::from("no JSON schema in avro.schema")))?;
    let schema =
        apache_avro::Schema::parse(&schema).map_err(|e| header(AvroError(e.to_string())))?;
    let deflate = match codec {
        None | Some(b"null") => false,
        Some(b"deflate") => true,
        Some(c) => {
            return Err(header(err!(
                "codec {:?} is not supported",
                String::from_utf8_lossy(c)
            )))
        }
    };
    let decoder = AvroDecoder::new(&schema)?;
    let inflate_limit = bytes
        .len()
        .saturating_mul(AVRO_INFLATE_RATIO)
        .saturating_add(AVRO_INFLATE_SLACK);
    let mut inflated = 0usize;
    let mut budget = AVRO_VALUE_SLACK;
    let mut records = Vec::new();
    // The data blocks: record count, size in bytes, the records, the sync marker.
    while input.left() > 0 {
        let at = input.pos();
        let block = |e: AvroError| err!("bad Avro block at byte {at}: {e}");
        let count = input.long().map_err(block)?;
        let count =
            u64::try_from(count).map_err(|_| block(err!("negative record count {count}")))?;
        let data = input.bytes().map_err(block)?;
        if input.take(16).map_err(block)? != sync {
            return Err(block(AvroError::from(
                "sync marker differs from the header's",
            )));
        }
        let data = if deflate {
            let out = inflate(data, inflate_limit.saturating_sub(inflated)).map_err(block)?;
            inflated += out.len();
            std::borrow::Cow::Owned(out)
        } else {
            std::borrow::Cow::Borrowed(data)
        };
        budget = budget.saturating_add(data.len());
        let mut data = AvroCursor::new(&data);
        for _ in 0..count {
            if records.len() >= AVRO_MAX_RECORDS {
                return Err(err!("more than {AVRO_MAX_RECORDS} Avro records"));
            }
            let record = decoder
                .value(decoder.root, &mut data, &mut budget, 0)
                .map_err(|e| err!("bad Avro record: {e}"))?;
            records.push(record);
        }
    }
    match records.len() {
        0 => Ok(Value::Object(Default::default())),
        1 => Ok(records.pop().unwrap_or(Value::Null)),
        _ => Ok(Value::Array(records)),
    }
}

/// Inflate a deflate block (RFC 1951, no zlib header, as Avro writes it) to at most `limit`
/// bytes.
fn inflate(data: &[u8], limit: usize) -> Result<Vec<u8>, AvroError> {
    use miniz_oxide::inflate::TINFLStatus;
    miniz_oxide::inflate::decompress_to_vec_with_limit(data, limit).map_err(|e| match e.status {
        TINFLStatus::HasMoreOutput => {
            err!("deflate data inflates to more than {AVRO_INFLATE_RATIO} times the file's size")
        }
        status => err!("bad deflate data ({status:?})"),
    })
}

/// A cursor over Avro binary data (untrusted): every read is checked against the bytes left
/// before anything is taken, and a length is never trusted past them. The one reader of Avro's
/// binary encoding (zigzag varints, lengths, blocks of arrays and maps) in hudifs: the instant
/// metadata here, the log records of `hudifs-merge`.
pub struct AvroCursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> AvroCursor<'a> {
    #[inline]
    pub fn new(bytes: &'a [u8]) -> Self {
        AvroCursor { bytes, pos: 0 }
    }

    /// The offset of the next byte.
    #[inline]
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet.
    #[inline]
    pub fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The bytes read since offset `start`.
    #[inline]
    pub fn taken_since(&self, start: usize) -> Result<&'a [u8], AvroError> {
        self.bytes
            .get(start..self.pos)
            .ok_or_else(|| AvroError::from("value bytes"))
    }

    #[inline]
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], AvroError> {
        let taken = self
            .pos
            .checked_add(n)
            .and_then(|end| self.bytes.get(self.pos..end))
            .ok_or_else(|| {
                err!(
                    "{n} bytes wanted at byte {}, {} left",
                    self.pos,
                    self.left()
                )
            })?;
        self.pos += n;
        Ok(taken)
    }

    #[inline]
    pub fn byte(&mut self) -> Result<u8, AvroError> {
        self.take(1)?
            .first()
            .copied()
            .ok_or_else(|| AvroError::from("no byte"))
    }

    /// A zigzag varint, read as apache-avro reads one: at most 10 bytes.
    #[inline]
    pub fn long(&mut self) -> Result<i64, AvroError> {
        let mut z = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            z |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(if z & 1 == 0 {
                    (z >> 1) as i64
                } else {
                    !(z >> 1) as i64
                });
            }
        }
        Err(err!(
            "integer of more than 10 bytes before byte {}",
            self.pos
        ))
    }

    #[inline]
    pub fn int(&mut self) -> Result<i32, AvroError> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| err!("int {v} out of range"))
    }

    /// The length prefix of bytes or a string: not negative, not past the end.
    #[inline]
    fn len(&mut self) -> Result<usize, AvroError> {
        let at = self.pos;
        let v = self.long()?;
        match usize::try_from(v) {
            Ok(n) if n <= self.left() => Ok(n),
            _ => Err(err!("length {v} at byte {at}, {} bytes left", self.left())),
        }
    }

    /// Bytes or a string: a length, checked against the bytes left, then the bytes.
    #[inline]
    pub fn bytes(&mut self) -> Result<&'a [u8], AvroError> {
        let n = self.len()?;
        self.take(n)
    }

    /// A string, which must be UTF-8.
    #[inline]
    pub fn str(&mut self) -> Result<&'a str, AvroError> {
        let at = self.pos;
        let b = self.bytes()?;
        std::str::from_utf8(b).map_err(|_| err!("string at byte {at} is not UTF-8"))
    }

    pub fn string(&mut self) -> Result<String, AvroError> {
        self.str().map(str::to_string)
    }

    /// The item count of one block of an array or a map (0 ends it). A negative count is
    /// followed by the block's size in bytes, which decoding does not need.
    #[inline]
    pub fn block_count(&mut self) -> Result<u64, AvroError> {
        let n = self.long()?;
        if n < 0 {
            self.long()?;
        }
        Ok(n.unsigned_abs())
    }
}

/// One node of a compiled schema.
enum AvroNode<'s> {
    Null,
    Boolean,
    /// `int`, `date`, `time-millis`.
    Int,
    /// `long` and the logical types over it.
    Long,
    Float,
    Double,
    Bytes,
    String,
    Array(usize),
    Map(usize),
    Union(Vec<usize>),
    Record(Vec<(&'s str, usize)>),
    Enum(&'s [String]),
    Fixed(usize),
    /// `decimal`, `big-decimal`, `uuid`, `duration` (no Hudi schema has them): their bytes are
    /// measured here, then apache-avro decodes exactly those, as `avro_to_json` has always
    /// shown them.
    Rare(&'s apache_avro::Schema),
}

/// A writer schema compiled for decoding Avro binary data to JSON, in the shape of
/// [`avro_to_json`]: named types are resolved once (a reference to an enclosing record, i.e. a
/// recursive schema, is refused), so decoding does no look-ups. Decoding is bounded: lengths
/// are checked against the bytes left, every JSON value made is charged to a budget of one per
/// byte plus a constant, and values nest at most `AVRO_MAX_DEPTH` levels.
pub struct AvroDecoder<'s> {
    nodes: Vec<AvroNode<'s>>,
    root: usize,
}

impl<'s> AvroDecoder<'s> {
    pub fn new(schema: &'s apache_avro::Schema) -> Result<AvroDecoder<'s>, AvroError> {
        let resolved = apache_avro::schema::ResolvedSchema::try_from(schema)
            .map_err(|e| err!("bad Avro schema: {e}"))?;
        let mut compiler = AvroCompiler {
            names: resolved.get_names(),
            nodes: Vec::new(),
            done: std::collections::HashMap::new(),
            open: Vec::new(),
        };
        let root = compiler.compile(schema, &None)?;
        Ok(AvroDecoder {
            nodes: compiler.nodes,
            root,
        })
    }

    /// One datum at the start of `bytes` (a record of a Hudi log block; bytes after it are
    /// ignored, as `apache_avro::from_avro_datum` ignores them), as JSON.
    pub fn decode_datum(&self, bytes: &[u8]) -> Result<Value, AvroError> {
        let mut budget = AVRO_VALUE_SLACK.saturating_add(bytes.len());
        self.value(self.root, &mut AvroCursor::new(bytes), &mut budget, 0)
    }

    fn value(
        &self,
        node: usize,
        input: &mut AvroCursor,
        budget: &mut usize,
        depth: usize,
    ) -> Result<Value, AvroError> {
        let node = self
            .nodes
            .get(node)
            .ok_or_else(|| AvroError::from("schema node missing"))?;
        if depth > AVRO_MAX_DEPTH {
            return Err(err!("values nested more than {AVRO_MAX_DEPTH} levels deep"));
        }
        // A union is shown as its value, which pays for itself.
        if !matches!(node, AvroNode::Union(_)) {
            charge(budget, 1)?;
        }
        Ok(match node {
            AvroNode::Null => Value::Null,
            AvroNode::Boolean => match input.byte()? {
                0 => Value::Bool(false),
                1 => Value::Bool(true),
                b => return Err(err!("boolean byte {b}")),
            },
            AvroNode::Int => Value::from(input.int()?),
            AvroNode::Long => Value::from(input.long()?),
            AvroNode::Float => {
                let b = input.take(4)?.try_into().map_err(|_| "float".to_string())?;
                serde_json::Number::from_f64(f32::from_le_bytes(b) as f64)
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
            AvroNode::Double => {
                let b = input
                    .take(8)?
                    .try_into()
                    .map_err(|_| "double".to_string())?;
                serde_json::Number::from_f64(f64::from_le_bytes(b))
                    .map(Value::Number)
                    .unwrap_or(Value::Null)
            }
            AvroNode::Bytes => byte_array(input.bytes()?, budget)?,
            AvroNode::Fixed(size) => byte_array(input.take(*size)?, budget)?,
            AvroNode::String => Value::String(input.string()?),
            AvroNode::Enum(symbols) => {
                let i = input.int()?;
                let symbol = usize::try_from(i).ok().and_then(|i| symbols.get(i));
                match symbol {
                    Some(s) => Value::String(s.clone()),
                    None => return Err(err!("enum index {i} of {} symbols", symbols.len())),
                }
            }
            AvroNode::Union(variants) => {
                let i = input.long()?;
                let Some(&variant) = usize::try_from(i).ok().and_then(|i| variants.get(i)) else {
                    return Err(err!("union index {i} of {} variants", variants.len()));
                };
                return self.value(variant, input, budget, depth + 1);
            }
            AvroNode::Array(item) => {
                let mut items = Vec::new();
                loop {
                    let count = input.block_count()?;
                    if count == 0 {
                        break;
                    }
                    // Each item is charged, so a count past the budget ends in an error.
                    for _ in 0..count {
                        items.push(self.value(*item, input, budget, depth + 1)?);
                    }
                }
                Value::Array(items)
            }
            AvroNode::Map(values) => {
                let mut entries = Vec::new();
                loop {
                    let count = input.block_count()?;
                    if count == 0 {
                        break;
                    }
                    for _ in 0..count {
                        let key = input.string()?;
                        entries.push((key, self.value(*values, input, budget, depth + 1)?));
                    }
                }
                // Keys sorted; of a repeated key the last value counts (apache-avro's map).
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Value::Object(entries.into_iter().collect())
            }
            AvroNode::Record(fields) => {
                // Sized once: a record grown field by field spent more time growing than
                // decoding (a commit of a thousand write stats).
                let mut out = serde_json::Map::with_capacity(fields.len());
                for (name, field) in fields {
                    out.insert(
                        name.to_string(),
                        self.value(*field, input, budget, depth + 1)?,
                    );
                }
                Value::Object(out)
            }
            AvroNode::Rare(schema) => rare_value(schema, input)?,
        })
    }
}

/// Bytes and fixed values are shown as arrays of numbers, a value each.
fn byte_array(bytes: &[u8], budget: &mut usize) -> Result<Value, AvroError> {
    charge(budget, bytes.len())?;
    Ok(Value::Array(
        bytes.iter().map(|&b| Value::from(b)).collect(),
    ))
}

fn charge(budget: &mut usize, values: usize) -> Result<(), AvroError> {
    *budget = budget.checked_sub(values).ok_or_else(|| {
        "more values than the data has bytes (a count no real file has)".to_string()
    })?;
    Ok(())
}

/// A value of a rare logical type: its bytes are measured and bounded here, then decoded by
/// apache-avro (its renderings are what `avro_to_json` shows).
fn rare_value(schema: &apache_avro::Schema, input: &mut AvroCursor) -> Result<Value, AvroError> {
    use apache_avro::Schema as S;
    let start = input.pos();
    let decimal = |len: usize| {
        if len > AVRO_MAX_DECIMAL_BYTES {
            Err(err!("decimal of {len} bytes"))
        } else {
            Ok(())
        }
    };
    match schema {
        S::Duration => drop(input.take(12)?),
        S::Decimal(d) => match &*d.inner {
            S::Fixed(f) => decimal(input.take(f.size)?.len())?,
            S::Bytes => decimal(input.bytes()?.len())?,
            _ => return Err(AvroError::from("decimal over neither fixed nor bytes")),
        },
        S::BigDecimal => decimal(input.bytes()?.len())?,
        _ => drop(input.bytes()?),
    }
    let mut exact = input.taken_since(start)?;
    let decode =
        std::panic::AssertUnwindSafe(|| apache_avro::from_avro_datum(schema, &mut exact, None));
    let value = std::panic::catch_unwind(decode)
        .map_err(|_| "malformed Avro value (the decoder gave up)".to_string())?
        .map_err(|e| err!("bad Avro value: {e}"))?;
    avro_to_json(value)
}

/// Compiles a schema into `AvroNode`s.
struct AvroCompiler<'s, 'r> {
    names: &'r std::collections::HashMap<apache_avro::schema::Name, &'s apache_avro::Schema>,
    nodes: Vec<AvroNode<'s>>,
    /// Named types compiled, by their place in the schema.
    done: std::collections::HashMap<*const apache_avro::Schema, usize>,
    /// The records being compiled: a reference to one of them is recursion.
    open: Vec<*const apache_avro::Schema>,
}

impl<'s> AvroCompiler<'s, '_> {
    fn compile(
        &mut self,
        schema: &'s apache_avro::Schema,
        namespace: &apache_avro::schema::Namespace,
    ) -> Result<usize, AvroError> {
        use apache_avro::Schema as S;
        let key = schema as *const apache_avro::Schema;
        if let Some(&node) = self.done.get(&key) {
            return Ok(node);
        }
        let node = match schema {
            S::Null => AvroNode::Null,
            S::Boolean => AvroNode::Boolean,
            S::Int | S::Date | S::TimeMillis => AvroNode::Int,
            S::Long
            | S::TimeMicros
            | S::TimestampMillis
            | S::TimestampMicros
            | S::TimestampNanos
            | S::LocalTimestampMillis
            | S::LocalTimestampMicros
            | S::LocalTimestampNanos => AvroNode::Long,
            S::Float => AvroNode::Float,
            S::Double => AvroNode::Double,
            S::Bytes => AvroNode::Bytes,
            S::String => AvroNode::String,
            S::Array(a) => AvroNode::Array(self.compile(&a.items, namespace)?),
            S::Map(m) => AvroNode::Map(self.compile(&m.types, namespace)?),
            S::Union(u) => AvroNode::Union(
                u.variants()
                    .iter()
                    .map(|v| self.compile(v, namespace))
                    .collect::<Result<_, _>>()?,
            ),
            S::Record(r) => {
                let inner = r.name.fully_qualified_name(namespace).namespace;
                self.open.push(key);
                let fields = r
                    .fields
                    .iter()
                    .map(|f| Ok((f.name.as_str(), self.compile(&f.schema, &inner)?)))
                    .collect::<Result<Vec<_>, AvroError>>();
                self.open.pop();
                AvroNode::Record(fields?)
            }
            S::Enum(e) => AvroNode::Enum(&e.symbols),
            S::Fixed(f) => AvroNode::Fixed(f.size),
            S::Decimal(_) | S::BigDecimal | S::Uuid | S::Duration => AvroNode::Rare(schema),
            S::Ref { name } => {
                let full = name.fully_qualified_name(namespace);
                let Some(&target) = self.names.get(&full) else {
                    return Err(err!("Avro schema names an undefined type {full}"));
                };
                if self.open.contains(&(target as *const apache_avro::Schema)) {
                    return Err(AvroError::from(
                        "recursive Avro schema (no Hudi instant metadata is recursive)",
                    ));
                }
                return self.compile(target, &full.namespace);
            }
        };
        let id = self.nodes.len();
        self.nodes.push(node);
        if matches!(schema, S::Record(_) | S::Enum(_) | S::Fixed(_)) {
            self.done.insert(key, id);
        }
        Ok(id)
    }
}

/// An Avro value as JSON, in the shape Java's `GenericRecord.toString()` gives: unions are
/// flattened to their value, records and maps become objects (map keys sorted, so that the
/// result does not depend on hash order), enums become their symbol.
pub fn avro_to_json(v: apache_avro::types::Value) -> Result<Value, AvroError> {
    use apache_avro::types::Value as A;
    Ok(match v {
        A::Null => Value::Null,
        A::Boolean(b) => Value::Bool(b),
        A::Int(i) | A::Date(i) | A::TimeMillis(i) => Value::from(i),
        A::Long(i)
        | A::TimeMicros(i)
        | A::TimestampMillis(i)
        | A::TimestampMicros(i)
        | A::TimestampNanos(i)
        | A::LocalTimestampMillis(i)
        | A::LocalTimestampMicros(i)
        | A::LocalTimestampNanos(i) => Value::from(i),
        A::Float(f) => serde_json::Number::from_f64(f as f64)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        A::Double(f) => serde_json::Number::from_f64(f)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        A::String(s) | A::Enum(_, s) => Value::String(s),
        A::Uuid(u) => Value::String(u.to_string()),
        A::Bytes(b) | A::Fixed(_, b) => Value::Array(b.into_iter().map(Value::from).collect()),
        A::Union(_, inner) => avro_to_json(*inner)?,
        A::Array(items) => Value::Array(
            items
                .into_iter()
                .map(avro_to_json)
                .collect::<Result<_, _>>()?,
        ),
        A::Map(m) => {
            let mut entries: Vec<_> = m.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| Ok((k, avro_to_json(v)?)))
                    .collect::<Result<_, AvroError>>()?,
            )
        }
        A::Record(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| Ok((k, avro_to_json(v)?)))
                .collect::<Result<_, AvroError>>()?,
        ),
        other => Value::String(format!("{other:?}")),
    })
}
