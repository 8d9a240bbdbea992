use arrow_array::{Array, Decimal128Array, Int64Array};

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
    let d =
        AvroToArrow::new(r#"{"type":"record","name":"r","fields":[{"name":"s","type":"string"}]}"#)
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
