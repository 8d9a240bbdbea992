//! Instant-metadata decoding (`hudifs_core::metadata`): shapes, bounds against allocation
//! bombs (a counting allocator measures what a decode takes), and agreement with apache-avro's
//! own reader, on crafted containers and on every Avro instant file of the fixture tables.

use hudifs_testkit::support;

use hudifs_core::metadata::{avro_to_json, decode, CommitMetadata};
use serde_json::{json, Value};
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
        records.push(avro_to_json(value.map_err(|e| e.to_string())?).map_err(|e| e.to_string())?);
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
    assert_eq!(
        m.replaced,
        vec![hudifs_core::ids::FileGroupId::new("20", "g1")]
    );
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
    assert!(decode(&deep).unwrap_err().to_string().contains("recursive"));
    assert!(CommitMetadata::from_json(&serde_json::json!([1])).is_err());
    assert!(CommitMetadata::from_json(&serde_json::json!({"partitionToWriteStats": 3})).is_err());
}

/// Found by fuzzing (issue #5): a header whose file-metadata map announces 2^25 entries in
/// 8 bytes. apache-avro reserved a hash table for them first: malloc(5,435,818,000).
#[test]
fn avro_header_count_bomb() {
    let bomb = hex("4f626a0180808020");
    let (r, peak) = peak_alloc(|| decode(&bomb));
    let e = r.unwrap_err();
    assert!(e.to_string().contains("bad Avro container header"), "{e}");
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
    assert!(
        e.to_string()
            .contains("more values than the data has bytes"),
        "{e}"
    );
    assert!(peak < 1 << 20, "{peak} bytes allocated");
    // The same array with as many nulls as the budget allows still decodes.
    let schema = r#"{"type":"array","items":"null"}"#;
    let mut data = Vec::new();
    long(&mut data, 4000);
    long(&mut data, 0);
    let ok = container(schema, None, &[(1, data)]);
    assert_eq!(decode(&ok).unwrap(), Value::Array(vec![Value::Null; 4000]));
    assert_eq!(decode(&ok).ok(), apache_avro_decode(&ok).ok());
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
    assert!(
        e.to_string().contains("inflates to more than 16 times"),
        "{e}"
    );
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
    assert_eq!(decode(&ok).ok(), apache_avro_decode(&ok).ok());
    let bad = container(schema, Some("deflate"), &[(1, b"\xff\xff".to_vec())]);
    assert!(decode(&bad)
        .unwrap_err()
        .to_string()
        .contains("bad deflate data"));
    let snappy = container(schema, Some("snappy"), &[]);
    assert!(decode(&snappy)
        .unwrap_err()
        .to_string()
        .contains("not supported"));
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
    assert!(
        e.to_string()
            .contains("more values than the data has bytes"),
        "{e}"
    );
    assert!(peak < 4 << 20, "{peak} bytes allocated");
    // Arrays of empty records: the same, by count.
    let schema = r#"{"type":"array","items":{"type":"record","name":"E","fields":[]}}"#;
    let mut data = Vec::new();
    long(&mut data, i64::MAX);
    let bomb = container(schema, None, &[(1, data)]);
    assert!(decode(&bomb)
        .unwrap_err()
        .to_string()
        .contains("more values than"));
    // A record count past what the records' bytes can hold.
    let bomb = container(r#""null""#, None, &[(i64::MAX, vec![])]);
    assert!(decode(&bomb)
        .unwrap_err()
        .to_string()
        .contains("more than 64 Avro records"));
}

/// Lengths come from the schema as well as from the data: a fixed of a terabyte, a decimal
/// too long to render, nesting deeper than AVRO_MAX_DEPTH through a chain of named types.
#[test]
fn avro_schema_sizes_are_checked_against_the_data() {
    let schema = r#"{"type":"fixed","name":"F","size":1000000000000}"#;
    let bomb = container(schema, None, &[(1, vec![0; 8])]);
    let (r, peak) = peak_alloc(|| decode(&bomb));
    assert!(r
        .unwrap_err()
        .to_string()
        .contains("1000000000000 bytes wanted"));
    assert!(peak < 1 << 20, "{peak} bytes allocated");
    let schema = r#"{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}"#;
    let mut data = Vec::new();
    bytes(&mut data, &[1; 2000]);
    let bomb = container(schema, None, &[(1, data)]);
    assert!(decode(&bomb)
        .unwrap_err()
        .to_string()
        .contains("decimal of 2000 bytes"));
    let mut defs =
        vec![r#"{"type":"record","name":"D0","fields":[{"name":"x","type":"int"}]}"#.to_string()];
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
        .to_string()
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
    assert_eq!(decode(&ok).ok(), apache_avro_decode(&ok).ok());
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
    assert!(decode(&bad)
        .unwrap_err()
        .to_string()
        .contains("sync marker"));
    let bad = container(schema, None, &[(-1, record(0))]);
    assert!(decode(&bad)
        .unwrap_err()
        .to_string()
        .contains("negative record count"));
}

/// Every Avro instant file of the fixture tables (Hudi 1.x, table versions 8 and 9, their
/// metadata tables included) decodes to exactly what apache-avro and `avro_to_json` made
/// of it, with allocation bounded by the file's size.
#[test]
fn avro_fixture_files_decode_as_apache_avro_did() {
    use std::io::Read;
    let Some(dir) = support::fixtures_dir() else {
        return;
    };
    let dir = dir.join("tables");
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
