//! Instant metadata: the bytes of a timeline file → JSON (0.x commit metadata is JSON; every
//! Hudi 1.x file and every plan is an Avro object container file), and the few facts the views
//! need from it (spec §2.6).

use serde_json::Value;

/// Decode an instant file's bytes to JSON. An empty file is a legal empty instant and decodes to
/// an empty object.
pub fn decode(bytes: &[u8]) -> Result<Value, String> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Value::Object(Default::default()));
    }
    if bytes.starts_with(b"Obj\x01") {
        return decode_avro(bytes);
    }
    serde_json::from_slice(bytes).map_err(|e| format!("not JSON and not Avro: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Avro object container files (Hudi 1.x instant metadata, every plan).
//
// apache-avro parses the writer schema; the container and its data are decoded here, straight
// to JSON. apache-avro's `Reader` trusted the counts it read: it reserved room for as many map
// entries or array items as a count announced (capped only by `max_allocation_bytes`: an
// 8-byte header asked for 5.4 GB), decoded 33 M items of type `null` from a 4-byte count (4.5
// GB resident: each value was built twice, its `Value`, then ours), and inflated deflate blocks
// without limit. Here nothing is reserved from a count, every length is checked against the
// bytes left before anything is allocated, and every JSON value made is charged to a budget of
// one value per byte of block data plus `AVRO_VALUE_SLACK`. A value other than a bare `null`,
// an empty record or an empty `fixed` takes at least one byte, so real data stays far inside
// the budget (the fixture tables' instant files: at most 0.42 values per byte in blocks of
// 500 bytes or more, at most 607 values in a file), while values that take no bytes cannot
// multiply. A container of n bytes thus decodes to at most n + 4096 JSON values (with deflate,
// 16 n + 64 Ki + 4096), each a few tens of bytes.

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

fn decode_avro(bytes: &[u8]) -> Result<Value, String> {
    apache_avro::max_allocation_bytes(AVRO_MAX_ALLOCATION);
    // apache-avro can panic on some malformed schemas; bad input must never take the daemon
    // down, so a panic is one more way of being unreadable.
    std::panic::catch_unwind(|| decode_avro_unguarded(bytes))
        .unwrap_or_else(|_| Err("malformed Avro (the decoder gave up)".to_string()))
}

fn decode_avro_unguarded(bytes: &[u8]) -> Result<Value, String> {
    let mut input = AvroInput::new(bytes);
    if input.take(4)? != b"Obj\x01" {
        return Err("not an Avro object container file".to_string());
    }
    // The header: file metadata (a map of bytes), then the sync marker.
    let header = |e: String| format!("bad Avro container header: {e}");
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
        .ok_or_else(|| header("no JSON schema in avro.schema".to_string()))?;
    let schema = apache_avro::Schema::parse(&schema).map_err(|e| header(e.to_string()))?;
    let deflate = match codec {
        None | Some(b"null") => false,
        Some(b"deflate") => true,
        Some(c) => {
            return Err(header(format!(
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
        let at = input.pos;
        let block = |e: String| format!("bad Avro block at byte {at}: {e}");
        let count = input.long().map_err(block)?;
        let count =
            u64::try_from(count).map_err(|_| block(format!("negative record count {count}")))?;
        let data = input.bytes().map_err(block)?;
        if input.take(16).map_err(block)? != sync {
            return Err(block("sync marker differs from the header's".to_string()));
        }
        let data = if deflate {
            let out = inflate(data, inflate_limit.saturating_sub(inflated)).map_err(block)?;
            inflated += out.len();
            std::borrow::Cow::Owned(out)
        } else {
            std::borrow::Cow::Borrowed(data)
        };
        budget = budget.saturating_add(data.len());
        let mut data = AvroInput::new(&data);
        for _ in 0..count {
            if records.len() >= AVRO_MAX_RECORDS {
                return Err(format!("more than {AVRO_MAX_RECORDS} Avro records"));
            }
            let record = decoder
                .value(decoder.root, &mut data, &mut budget, 0)
                .map_err(|e| format!("bad Avro record: {e}"))?;
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
fn inflate(data: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    use miniz_oxide::inflate::TINFLStatus;
    miniz_oxide::inflate::decompress_to_vec_with_limit(data, limit).map_err(|e| match e.status {
        TINFLStatus::HasMoreOutput => {
            format!("deflate data inflates to more than {AVRO_INFLATE_RATIO} times the file's size")
        }
        status => format!("bad deflate data ({status:?})"),
    })
}

/// A cursor over Avro binary data; every read is checked against the bytes left.
struct AvroInput<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> AvroInput<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        AvroInput { bytes, pos: 0 }
    }

    fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let taken = self
            .pos
            .checked_add(n)
            .and_then(|end| self.bytes.get(self.pos..end))
            .ok_or_else(|| {
                format!(
                    "{n} bytes wanted at byte {}, {} left",
                    self.pos,
                    self.left()
                )
            })?;
        self.pos += n;
        Ok(taken)
    }

    fn byte(&mut self) -> Result<u8, String> {
        self.take(1)?
            .first()
            .copied()
            .ok_or_else(|| "no byte".to_string())
    }

    /// A zigzag varint, read as apache-avro reads one: at most 10 bytes.
    fn long(&mut self) -> Result<i64, String> {
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
        Err(format!(
            "integer of more than 10 bytes before byte {}",
            self.pos
        ))
    }

    fn int(&mut self) -> Result<i32, String> {
        let v = self.long()?;
        i32::try_from(v).map_err(|_| format!("int {v} out of range"))
    }

    /// The length prefix of bytes or a string: not negative, not past the end.
    fn len(&mut self) -> Result<usize, String> {
        let at = self.pos;
        let v = self.long()?;
        match usize::try_from(v) {
            Ok(n) if n <= self.left() => Ok(n),
            _ => Err(format!(
                "length {v} at byte {at}, {} bytes left",
                self.left()
            )),
        }
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.len()?;
        self.take(n)
    }

    fn string(&mut self) -> Result<String, String> {
        let at = self.pos;
        let b = self.bytes()?;
        std::str::from_utf8(b)
            .map(str::to_string)
            .map_err(|_| format!("string at byte {at} is not UTF-8"))
    }

    /// The item count of one block of an array or a map (0 ends it). A negative count is
    /// followed by the block's size in bytes, which decoding does not need.
    fn block_count(&mut self) -> Result<u64, String> {
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
    pub fn new(schema: &'s apache_avro::Schema) -> Result<AvroDecoder<'s>, String> {
        let resolved = apache_avro::schema::ResolvedSchema::try_from(schema)
            .map_err(|e| format!("bad Avro schema: {e}"))?;
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
    pub fn decode_datum(&self, bytes: &[u8]) -> Result<Value, String> {
        let mut budget = AVRO_VALUE_SLACK.saturating_add(bytes.len());
        self.value(self.root, &mut AvroInput::new(bytes), &mut budget, 0)
    }

    fn value(
        &self,
        node: usize,
        input: &mut AvroInput,
        budget: &mut usize,
        depth: usize,
    ) -> Result<Value, String> {
        let node = self
            .nodes
            .get(node)
            .ok_or_else(|| "schema node missing".to_string())?;
        if depth > AVRO_MAX_DEPTH {
            return Err(format!(
                "values nested more than {AVRO_MAX_DEPTH} levels deep"
            ));
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
                b => return Err(format!("boolean byte {b}")),
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
                    None => return Err(format!("enum index {i} of {} symbols", symbols.len())),
                }
            }
            AvroNode::Union(variants) => {
                let i = input.long()?;
                let Some(&variant) = usize::try_from(i).ok().and_then(|i| variants.get(i)) else {
                    return Err(format!("union index {i} of {} variants", variants.len()));
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
                let mut out = serde_json::Map::new();
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
fn byte_array(bytes: &[u8], budget: &mut usize) -> Result<Value, String> {
    charge(budget, bytes.len())?;
    Ok(Value::Array(
        bytes.iter().map(|&b| Value::from(b)).collect(),
    ))
}

fn charge(budget: &mut usize, values: usize) -> Result<(), String> {
    *budget = budget.checked_sub(values).ok_or_else(|| {
        "more values than the data has bytes (a count no real file has)".to_string()
    })?;
    Ok(())
}

/// A value of a rare logical type: its bytes are measured and bounded here, then decoded by
/// apache-avro (its renderings are what `avro_to_json` shows).
fn rare_value(schema: &apache_avro::Schema, input: &mut AvroInput) -> Result<Value, String> {
    use apache_avro::Schema as S;
    let start = input.pos;
    let decimal = |len: usize| {
        if len > AVRO_MAX_DECIMAL_BYTES {
            Err(format!("decimal of {len} bytes"))
        } else {
            Ok(())
        }
    };
    match schema {
        S::Duration => drop(input.take(12)?),
        S::Decimal(d) => match &*d.inner {
            S::Fixed(f) => decimal(input.take(f.size)?.len())?,
            S::Bytes => decimal(input.bytes()?.len())?,
            _ => return Err("decimal over neither fixed nor bytes".to_string()),
        },
        S::BigDecimal => decimal(input.bytes()?.len())?,
        _ => drop(input.bytes()?),
    }
    let mut exact = input
        .bytes
        .get(start..input.pos)
        .ok_or_else(|| "value bytes".to_string())?;
    let decode =
        std::panic::AssertUnwindSafe(|| apache_avro::from_avro_datum(schema, &mut exact, None));
    let value = std::panic::catch_unwind(decode)
        .map_err(|_| "malformed Avro value (the decoder gave up)".to_string())?
        .map_err(|e| format!("bad Avro value: {e}"))?;
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
    ) -> Result<usize, String> {
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
                    .collect::<Result<Vec<_>, String>>();
                self.open.pop();
                AvroNode::Record(fields?)
            }
            S::Enum(e) => AvroNode::Enum(&e.symbols),
            S::Fixed(f) => AvroNode::Fixed(f.size),
            S::Decimal(_) | S::BigDecimal | S::Uuid | S::Duration => AvroNode::Rare(schema),
            S::Ref { name } => {
                let full = name.fully_qualified_name(namespace);
                let Some(&target) = self.names.get(&full) else {
                    return Err(format!("Avro schema names an undefined type {full}"));
                };
                if self.open.contains(&(target as *const apache_avro::Schema)) {
                    return Err(
                        "recursive Avro schema (no Hudi instant metadata is recursive)".to_string(),
                    );
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
pub fn avro_to_json(v: apache_avro::types::Value) -> Result<Value, String> {
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
                    .collect::<Result<_, String>>()?,
            )
        }
        A::Record(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| Ok((k, avro_to_json(v)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => Value::String(format!("{other:?}")),
    })
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// One write stat of a commit: the file group it wrote and the file it wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteStat {
    pub partition: String,
    pub file_id: String,
    /// The file this instant wrote, relative to the table root (absent in inflight profiles).
    pub path: Option<String>,
}

impl WriteStat {
    /// The file name of `path` (its last component).
    pub fn file_name(&self) -> Option<&str> {
        self.path
            .as_deref()
            .map(|p| p.rsplit('/').next().unwrap_or(p))
    }
}

/// The facts of `HoodieCommitMetadata` / `HoodieReplaceCommitMetadata` the views use.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitMetadata {
    pub operation_type: Option<String>,
    pub write_stats: Vec<WriteStat>,
    /// `(partition, fileId)` of every file group a replacecommit replaced.
    pub replaced: Vec<(String, String)>,
}

impl CommitMetadata {
    pub fn from_json(v: &Value) -> Result<CommitMetadata, String> {
        if !v.is_object() {
            return Err("commit metadata is not an object".into());
        }
        let mut out = CommitMetadata {
            operation_type: str_field(v, "operationType").map(str::to_string),
            ..Default::default()
        };
        match v.get("partitionToWriteStats") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (partition, stats) in m {
                    let Some(stats) = stats.as_array() else {
                        return Err(format!(
                            "write stats of partition {partition:?} are not a list"
                        ));
                    };
                    for s in stats {
                        let Some(file_id) = str_field(s, "fileId") else {
                            continue;
                        };
                        out.write_stats.push(WriteStat {
                            partition: partition.clone(),
                            file_id: file_id.to_string(),
                            path: str_field(s, "path").map(str::to_string),
                        });
                    }
                }
            }
            Some(_) => return Err("partitionToWriteStats is not a map".into()),
        }
        match v.get("partitionToReplaceFileIds") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (partition, ids) in m {
                    let Some(ids) = ids.as_array() else {
                        return Err(format!(
                            "replaced file ids of partition {partition:?} are not a list"
                        ));
                    };
                    for id in ids.iter().filter_map(Value::as_str) {
                        out.replaced.push((partition.clone(), id.to_string()));
                    }
                }
            }
            Some(_) => return Err("partitionToReplaceFileIds is not a map".into()),
        }
        Ok(out)
    }
}

/// `(partition, fileId)` of every operation of a compaction plan (`HoodieCompactionPlan`).
pub fn compaction_plan_groups(v: &Value) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    match v.get("operations") {
        None | Some(Value::Null) => {}
        Some(Value::Array(ops)) => {
            for op in ops {
                let (Some(p), Some(f)) = (
                    op.get("partitionPath").and_then(Value::as_str),
                    str_field(op, "fileId"),
                ) else {
                    return Err("compaction operation without partitionPath/fileId".into());
                };
                out.push((p.to_string(), f.to_string()));
            }
        }
        Some(_) => return Err("compaction plan operations are not a list".into()),
    }
    Ok(out)
}

/// Whether a requested replacecommit/clustering file holds a clustering plan.
pub fn is_clustering_request(v: &Value) -> bool {
    str_field(v, "operationType") == Some("CLUSTER")
        || v.get("clusteringPlan").is_some_and(|p| !p.is_null())
}

/// The cleaner's retention bound of a completed clean (`earliestCommitToRetain`); `None` when
/// the field is empty (file-versions policy).
pub fn clean_earliest_to_retain(v: &Value) -> Option<String> {
    // Clean metadata names the instant; a cleaner plan gives it as a HoodieActionInstant record.
    str_field(v, "earliestCommitToRetain")
        .or_else(|| str_field(v, "earliestInstantToRetain"))
        .or_else(|| {
            v.get("earliestInstantToRetain")
                .and_then(|i| str_field(i, "timestamp"))
        })
        .map(str::to_string)
}

/// Files a rollback deleted or wrote (command-block logs), and the logs of the failed commit, as
/// `(partition, file name)`.
pub fn rollback_files(v: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(parts) = v.get("partitionMetadata").and_then(Value::as_object) else {
        return out;
    };
    let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    for (partition, pm) in parts {
        for key in ["rollbackLogFiles", "logFilesFromFailedCommit"] {
            match pm.get(key) {
                Some(Value::Object(m)) => {
                    out.extend(m.keys().map(|k| (partition.clone(), name(k))));
                }
                Some(Value::Array(a)) => {
                    out.extend(
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(|k| (partition.clone(), name(k))),
                    );
                }
                _ => {}
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    /// Counts the bytes each thread holds allocated, so a test can bound what a decode takes.
    struct Counting;

    thread_local! {
        static HELD: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn count(delta: isize) {
        let _ = HELD.try_with(|h| {
            h.set(h.get().wrapping_add(delta));
            let _ = PEAK.try_with(|p| p.set(p.get().max(h.get())));
        });
    }

    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count(layout.size() as isize);
            System.alloc(layout)
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count(layout.size() as isize);
            System.alloc_zeroed(layout)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            count(-(layout.size() as isize));
            System.dealloc(ptr, layout)
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count(new_size as isize - layout.size() as isize);
            System.realloc(ptr, layout, new_size)
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// `f()` and the most bytes this thread held allocated beyond what it held before.
    fn peak_alloc<R>(f: impl FnOnce() -> R) -> (R, usize) {
        let before = HELD.with(Cell::get);
        PEAK.with(|p| p.set(before));
        let r = f();
        (r, (PEAK.with(Cell::get) - before).max(0) as usize)
    }

    fn hex(h: &str) -> Vec<u8> {
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect()
    }

    fn long(out: &mut Vec<u8>, n: i64) {
        let mut z = ((n << 1) ^ (n >> 63)) as u64;
        while z > 0x7f {
            out.push(0x80 | (z & 0x7f) as u8);
            z >>= 7;
        }
        out.push(z as u8);
    }

    fn bytes(out: &mut Vec<u8>, b: &[u8]) {
        long(out, b.len() as i64);
        out.extend_from_slice(b);
    }

    const SYNC: [u8; 16] = *b"0123456789abcdef";

    /// An object container file: the schema, the codec (if named) and blocks of (record count,
    /// block data as stored).
    fn container(schema: &str, codec: Option<&str>, blocks: &[(i64, Vec<u8>)]) -> Vec<u8> {
        let mut out = b"Obj\x01".to_vec();
        long(&mut out, 1 + codec.is_some() as i64);
        bytes(&mut out, b"avro.schema");
        bytes(&mut out, schema.as_bytes());
        if let Some(c) = codec {
            bytes(&mut out, b"avro.codec");
            bytes(&mut out, c.as_bytes());
        }
        long(&mut out, 0);
        out.extend_from_slice(&SYNC);
        for (count, data) in blocks {
            long(&mut out, *count);
            bytes(&mut out, data);
            out.extend_from_slice(&SYNC);
        }
        out
    }

    fn deflate(data: &[u8]) -> Vec<u8> {
        miniz_oxide::deflate::compress_to_vec(data, 6)
    }

    /// How Avro containers were decoded before hudifs decoded them itself: apache-avro's
    /// Reader, then `avro_to_json` (the shape the new decoder must keep).
    fn apache_avro_decode(bytes: &[u8]) -> Result<Value, String> {
        let reader = apache_avro::Reader::new(bytes).map_err(|e| e.to_string())?;
        let mut records = Vec::new();
        for value in reader {
            records.push(avro_to_json(value.map_err(|e| e.to_string())?)?);
        }
        Ok(match records.len() {
            0 => json!({}),
            1 => records.pop().unwrap(),
            _ => Value::Array(records),
        })
    }

    #[test]
    fn empty_and_json() {
        assert_eq!(decode(b"").unwrap(), serde_json::json!({}));
        let v = decode(
            br#"{"partitionToWriteStats":{"10":[{"fileId":"f1","path":"10/f1_0-1-2_1.parquet"},{"fileId":""}]},
                 "partitionToReplaceFileIds":{"20":["g1"]},"operationType":"INSERT_OVERWRITE"}"#,
        )
        .unwrap();
        let m = CommitMetadata::from_json(&v).unwrap();
        assert_eq!(m.operation_type.as_deref(), Some("INSERT_OVERWRITE"));
        assert_eq!(m.write_stats.len(), 1);
        assert_eq!(m.write_stats[0].file_name(), Some("f1_0-1-2_1.parquet"));
        assert_eq!(m.replaced, vec![("20".to_string(), "g1".to_string())]);
        assert!(decode(b"{\"partitionToWriteSta").is_err());
        assert!(decode(b"Obj\x01garbage").is_err());
        // Found by fuzzing: a block count of -1 over records that decode from zero bytes (an
        // endless loop), and a recursive schema with deeply nested data (a stack overflow).
        let endless = hex("4f626a0102166176726f2e736368656d610c226e756c6c220053535353535353535353535353535353010053535353535353535353535353535353");
        assert!(decode(&endless).is_err());
        let mut deep = hex("4f626a0102166176726f2e736368656d61a2017b2274797065223a20227265636f7264222c20226e616d65223a20226e222c20226669656c6473223a205b7b226e616d65223a202278222c202274797065223a205b226e756c6c222c20226e225d7d5d7d00");
        deep.extend(std::iter::repeat_n(0x53u8, 16));
        deep.extend(hex("02a21f"));
        deep.extend(std::iter::repeat_n(0x02u8, 2000));
        deep.push(0);
        deep.extend(std::iter::repeat_n(0x53u8, 16));
        assert!(decode(&deep).unwrap_err().contains("recursive"));
        assert!(CommitMetadata::from_json(&serde_json::json!([1])).is_err());
        assert!(
            CommitMetadata::from_json(&serde_json::json!({"partitionToWriteStats": 3})).is_err()
        );
    }

    /// Found by fuzzing (issue #5): a header whose file-metadata map announces 2^25 entries in
    /// 8 bytes. apache-avro reserved a hash table for them first: malloc(5,435,818,000).
    #[test]
    fn avro_header_count_bomb() {
        let bomb = hex("4f626a0180808020");
        let (r, peak) = peak_alloc(|| decode(&bomb));
        let e = r.unwrap_err();
        assert!(e.contains("bad Avro container header"), "{e}");
        assert!(peak < 4096, "{peak} bytes allocated");
    }

    /// Found by fuzzing (issue #5): an array of 2^25 nulls in 89 bytes. Items of type null take
    /// no bytes, so the count is not bounded by the bytes left; apache-avro decoded them all
    /// (4.5 GB resident, 21 s under the fuzzer).
    #[test]
    fn avro_null_array_bomb() {
        let bomb = hex("4f626a0102166176726f2e736368656d613e7b2274797065223a226172726179222c226974656d73223a226e756c6c227d0053535353535353535353535353535353020a808080200053535353535353535353535353535353");
        assert_eq!(bomb.len(), 89);
        let (r, peak) = peak_alloc(|| decode(&bomb));
        let e = r.unwrap_err();
        assert!(e.contains("more values than the data has bytes"), "{e}");
        assert!(peak < 1 << 20, "{peak} bytes allocated");
        // The same array with as many nulls as the budget allows still decodes.
        let schema = r#"{"type":"array","items":"null"}"#;
        let mut data = Vec::new();
        long(&mut data, 4000);
        long(&mut data, 0);
        let ok = container(schema, None, &[(1, data)]);
        assert_eq!(decode(&ok).unwrap(), Value::Array(vec![Value::Null; 4000]));
        assert_eq!(decode(&ok), apache_avro_decode(&ok));
    }

    /// A deflate block inflates up to 1032-fold; apache-avro inflated without limit (a
    /// 1,023,471-byte file of 1,000 strings of 1 MiB took 3.1 GB resident). Inflation is now
    /// capped at AVRO_INFLATE_RATIO times the file's size.
    #[test]
    fn avro_deflate_bomb() {
        let schema = r#"{"type":"array","items":"string"}"#;
        let s = vec![b'a'; 1 << 20];
        let mut data = Vec::new();
        long(&mut data, 64);
        for _ in 0..64 {
            bytes(&mut data, &s);
        }
        long(&mut data, 0);
        let bomb = container(schema, Some("deflate"), &[(1, deflate(&data))]);
        assert!(bomb.len() < 100 << 10, "{}", bomb.len());
        let (r, peak) = peak_alloc(|| decode(&bomb));
        let e = r.unwrap_err();
        assert!(e.contains("inflates to more than 16 times"), "{e}");
        assert!(peak < 4 << 20, "{peak} bytes allocated");
        // Deflate blocks within the limit decode as apache-avro decodes them.
        let mut data = Vec::new();
        long(&mut data, 3);
        for s in ["a", "bb", "ccc"] {
            bytes(&mut data, s.as_bytes());
        }
        long(&mut data, 0);
        let ok = container(
            schema,
            Some("deflate"),
            &[(1, deflate(&data)), (1, deflate(&data))],
        );
        assert_eq!(
            decode(&ok).unwrap(),
            json!([["a", "bb", "ccc"], ["a", "bb", "ccc"]])
        );
        assert_eq!(decode(&ok), apache_avro_decode(&ok));
        let bad = container(schema, Some("deflate"), &[(1, b"\xff\xff".to_vec())]);
        assert!(decode(&bad).unwrap_err().contains("bad deflate data"));
        let snappy = container(schema, Some("snappy"), &[]);
        assert!(decode(&snappy).unwrap_err().contains("not supported"));
    }

    /// Values that take no bytes, multiplied through the schema instead of a count: records of
    /// two fields of the previous record type, 40 levels (2^40 empty records from one byte);
    /// apache-avro would have decoded until memory ran out.
    #[test]
    fn avro_zero_byte_values_are_bounded() {
        let mut defs = vec![r#"{"type":"record","name":"R0","fields":[]}"#.to_string()];
        for i in 1..=40 {
            defs.push(format!(
                r#"{{"type":"record","name":"R{i}","fields":[{{"name":"a","type":"R{p}"}},{{"name":"b","type":"R{p}"}}]}}"#,
                p = i - 1
            ));
        }
        let schema = format!("[{}]", defs.join(","));
        let mut data = Vec::new();
        long(&mut data, 40);
        let bomb = container(&schema, None, &[(1, data)]);
        let (r, peak) = peak_alloc(|| decode(&bomb));
        let e = r.unwrap_err();
        assert!(e.contains("more values than the data has bytes"), "{e}");
        assert!(peak < 4 << 20, "{peak} bytes allocated");
        // Arrays of empty records: the same, by count.
        let schema = r#"{"type":"array","items":{"type":"record","name":"E","fields":[]}}"#;
        let mut data = Vec::new();
        long(&mut data, i64::MAX);
        let bomb = container(schema, None, &[(1, data)]);
        assert!(decode(&bomb).unwrap_err().contains("more values than"));
        // A record count past what the records' bytes can hold.
        let bomb = container(r#""null""#, None, &[(i64::MAX, vec![])]);
        assert!(decode(&bomb)
            .unwrap_err()
            .contains("more than 64 Avro records"));
    }

    /// Lengths come from the schema as well as from the data: a fixed of a terabyte, a decimal
    /// too long to render, nesting deeper than AVRO_MAX_DEPTH through a chain of named types.
    #[test]
    fn avro_schema_sizes_are_checked_against_the_data() {
        let schema = r#"{"type":"fixed","name":"F","size":1000000000000}"#;
        let bomb = container(schema, None, &[(1, vec![0; 8])]);
        let (r, peak) = peak_alloc(|| decode(&bomb));
        assert!(r.unwrap_err().contains("1000000000000 bytes wanted"));
        assert!(peak < 1 << 20, "{peak} bytes allocated");
        let schema = r#"{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}"#;
        let mut data = Vec::new();
        bytes(&mut data, &[1; 2000]);
        let bomb = container(schema, None, &[(1, data)]);
        assert!(decode(&bomb).unwrap_err().contains("decimal of 2000 bytes"));
        let mut defs = vec![
            r#"{"type":"record","name":"D0","fields":[{"name":"x","type":"int"}]}"#.to_string(),
        ];
        for i in 1..=100 {
            defs.push(format!(
                r#"{{"type":"record","name":"D{i}","fields":[{{"name":"x","type":"D{}"}}]}}"#,
                i - 1
            ));
        }
        let schema = format!("[{}]", defs.join(","));
        let mut data = Vec::new();
        long(&mut data, 100);
        long(&mut data, 7);
        let deep = container(&schema, None, &[(1, data.clone())]);
        assert!(decode(&deep)
            .unwrap_err()
            .contains("nested more than 64 levels"));
        // 60 levels decode (apache-avro overflowed a test thread's 2 MiB stack on them in a
        // debug build; compare with it on 20).
        let schema = format!("[{}]", defs[..=60].join(","));
        let data = vec![120, 14]; // union index 60, x = 7
        let ok = container(&schema, None, &[(1, data.clone())]);
        let mut v = &decode(&ok).unwrap();
        for _ in 0..61 {
            v = &v["x"];
        }
        assert_eq!(v, &json!(7));
        let schema = format!("[{}]", defs[..=20].join(","));
        let ok = container(&schema, None, &[(1, vec![40, 14])]);
        assert_eq!(decode(&ok), apache_avro_decode(&ok));
        assert!(decode(&ok).is_ok());
    }

    /// Every Avro type, logical types included, decodes to the JSON apache-avro and
    /// `avro_to_json` made of it: one container with two records in two blocks, arrays and
    /// maps in several blocks (negative counts with sizes too), a repeated map key, named
    /// types used twice, deflate.
    #[test]
    fn avro_decodes_every_type_as_apache_avro_did() {
        let schema = r#"{"type":"record","name":"All","namespace":"t","fields":[
            {"name":"n","type":"null"},
            {"name":"b","type":"boolean"},
            {"name":"i","type":"int"},
            {"name":"l","type":"long"},
            {"name":"f","type":"float"},
            {"name":"d","type":"double"},
            {"name":"nan","type":"double"},
            {"name":"by","type":"bytes"},
            {"name":"s","type":"string"},
            {"name":"a","type":{"type":"array","items":"long"}},
            {"name":"m","type":{"type":"map","values":["null","string"]}},
            {"name":"r","type":{"type":"record","name":"Inner","namespace":"u","fields":[{"name":"x","type":"int"}]}},
            {"name":"r2","type":"u.Inner"},
            {"name":"ro","type":["null","u.Inner"]},
            {"name":"e","type":{"type":"enum","name":"E","symbols":["A","B"]}},
            {"name":"e2","type":"E"},
            {"name":"fx","type":{"type":"fixed","name":"F","size":3}},
            {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":10,"scale":2}},
            {"name":"decf","type":{"type":"fixed","name":"DF","size":4,"logicalType":"decimal","precision":8,"scale":1}},
            {"name":"uuid","type":{"type":"string","logicalType":"uuid"}},
            {"name":"date","type":{"type":"int","logicalType":"date"}},
            {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
            {"name":"tu","type":{"type":"long","logicalType":"time-micros"}},
            {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
            {"name":"tsu","type":{"type":"long","logicalType":"timestamp-micros"}},
            {"name":"tsn","type":{"type":"long","logicalType":"timestamp-nanos"}},
            {"name":"lts","type":{"type":"long","logicalType":"local-timestamp-millis"}},
            {"name":"ltsu","type":{"type":"long","logicalType":"local-timestamp-micros"}},
            {"name":"ltsn","type":{"type":"long","logicalType":"local-timestamp-nanos"}},
            {"name":"dur","type":{"type":"fixed","name":"Dur","size":12,"logicalType":"duration"}},
            {"name":"bd","type":{"type":"bytes","logicalType":"big-decimal"}}
        ]}"#;
        let record = |k: i64| {
            let mut o = Vec::new();
            o.push(1); // b
            long(&mut o, -123 - k); // i
            long(&mut o, 1 << 40); // l
            o.extend_from_slice(&1.5f32.to_le_bytes());
            o.extend_from_slice(&(-2.25f64).to_le_bytes());
            o.extend_from_slice(&f64::NAN.to_le_bytes());
            bytes(&mut o, &[0, 255, 7]);
            bytes(&mut o, "héllo".as_bytes());
            long(&mut o, 2); // a: a block of 2, a block of -1 with its size, the end
            long(&mut o, 5);
            long(&mut o, -6);
            long(&mut o, -1);
            long(&mut o, 1);
            long(&mut o, 7);
            long(&mut o, 0);
            long(&mut o, 2); // m: "b" → "x", "a" → null, then "b" → "y" (the last counts)
            bytes(&mut o, b"b");
            long(&mut o, 1);
            bytes(&mut o, b"x");
            bytes(&mut o, b"a");
            long(&mut o, 0);
            long(&mut o, 1);
            bytes(&mut o, b"b");
            long(&mut o, 1);
            bytes(&mut o, b"y");
            long(&mut o, 0);
            long(&mut o, 5); // r
            long(&mut o, 6); // r2
            long(&mut o, 1); // ro
            long(&mut o, 7);
            long(&mut o, 1); // e
            long(&mut o, 0); // e2
            o.extend_from_slice(&[1, 2, 3]); // fx
            bytes(&mut o, &[0x01, 0x00]); // dec
            o.extend_from_slice(&[0, 0, 1, 0]); // decf
            bytes(&mut o, b"550e8400-e29b-41d4-a716-446655440000");
            for v in [19000, 1000, 1_000_000, 1_700_000_000_000, 2, 3, 4, 5, 6] {
                long(&mut o, v);
            }
            o.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]); // dur
            let mut bd = Vec::new();
            bytes(&mut bd, &[0x01, 0x00]);
            long(&mut bd, 3);
            bytes(&mut o, &bd);
            o
        };
        for codec in [None, Some("null"), Some("deflate")] {
            let block = |k| match codec {
                Some("deflate") => deflate(&record(k)),
                _ => record(k),
            };
            let c = container(schema, codec, &[(1, block(0)), (1, block(1))]);
            let v = decode(&c).unwrap();
            assert_eq!(Ok(&v), apache_avro_decode(&c).as_ref(), "{codec:?}");
            assert_eq!(v[1]["i"], json!(-124));
            assert_eq!(v[0]["a"], json!([5, -6, 7]));
            assert_eq!(v[0]["m"], json!({"a": null, "b": "y"}));
            assert_eq!(v[0]["nan"], Value::Null);
            assert_eq!(v[0]["uuid"], json!("550e8400-e29b-41d4-a716-446655440000"));
            let one = container(schema, codec, &[(1, block(0))]);
            assert_eq!(decode(&one).unwrap(), v[0]);
        }
        // An empty container is an empty object; a zero-record block is skipped.
        let none = container(schema, None, &[]);
        assert_eq!(decode(&none).unwrap(), json!({}));
        let c = container(schema, None, &[(0, vec![]), (1, record(0))]);
        assert_eq!(decode(&c).unwrap()["i"], json!(-123));
        // Truncated anywhere (but after the header: no blocks), it is an error, never a panic.
        let c = container(schema, None, &[(1, record(0))]);
        for n in 4..c.len() {
            assert!(decode(&c[..n]).is_err() || n == none.len(), "{n}");
        }
        // A wrong sync marker, a negative record count.
        let mut bad = c.clone();
        let end = bad.len() - 1;
        bad[end] ^= 1;
        assert!(decode(&bad).unwrap_err().contains("sync marker"));
        let bad = container(schema, None, &[(-1, record(0))]);
        assert!(decode(&bad).unwrap_err().contains("negative record count"));
    }

    /// Every Avro instant file of the fixture tables (Hudi 1.x, table versions 8 and 9, their
    /// metadata tables included) decodes to exactly what apache-avro and `avro_to_json` made
    /// of it, with allocation bounded by the file's size.
    #[test]
    fn avro_fixture_files_decode_as_apache_avro_did() {
        use std::io::Read;
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/tables");
        let mut zips = Vec::new();
        let mut stack = vec![dir.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "zip") {
                    zips.push(p);
                }
            }
        }
        if zips.is_empty() {
            eprintln!("SKIP: no fixture tables at {}", dir.display());
            return;
        }
        let (mut files, mut worst) = (0, 0.0f64);
        for zip in &zips {
            let mut archive = zip::ZipArchive::new(std::fs::File::open(zip).unwrap()).unwrap();
            for i in 0..archive.len() {
                let mut entry = archive.by_index(i).unwrap();
                if !entry.name().contains("/.hoodie/") || entry.is_dir() {
                    continue;
                }
                let mut b = Vec::new();
                entry.read_to_end(&mut b).unwrap();
                if !b.starts_with(b"Obj\x01") {
                    continue;
                }
                let (new, peak) = peak_alloc(|| decode(&b));
                let name = entry.name().to_string();
                assert_eq!(
                    new.as_ref().ok(),
                    apache_avro_decode(&b).as_ref().ok(),
                    "{name}"
                );
                assert!(new.is_ok(), "{name}: {new:?}");
                assert!(
                    peak < 200 * b.len() + (1 << 20),
                    "{name}: {peak} bytes for {}",
                    b.len()
                );
                worst = worst.max(peak as f64 / b.len() as f64);
                files += 1;
            }
        }
        assert!(files > 500, "{files} Avro files");
        eprintln!("{files} fixture Avro files decoded as before; peak allocation at most {worst:.1} × the file's size");
    }
}
