//! Avro object container files, as Iceberg's manifests and manifest lists are written: a
//! header with the writer's schema (its fields carrying Iceberg's `field-id`s, which is why the
//! schema text is written as given rather than as a library would print it) and key-value
//! metadata, then one block of records, uncompressed. Records are encoded by hand with the few
//! Avro binary rules they need.

/// Encodes Avro binary values into a buffer.
#[derive(Default)]
pub struct Enc {
    pub buf: Vec<u8>,
}

impl Enc {
    pub fn long(&mut self, v: i64) {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        while z >= 0x80 {
            self.buf.push((z as u8) | 0x80);
            z >>= 7;
        }
        self.buf.push(z as u8);
    }

    pub fn int(&mut self, v: i32) {
        self.long(i64::from(v));
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.long(b.len() as i64);
        self.buf.extend_from_slice(b);
    }

    pub fn string(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    /// The null branch of a `["null", T]` union.
    pub fn null(&mut self) {
        self.long(0);
    }

    /// The value branch of a `["null", T]` union (the value follows).
    pub fn some(&mut self) {
        self.long(1);
    }

    /// An optional `map<int, long>` (an array of key-value records, as Iceberg writes maps
    /// whose keys are not strings); none when `kv` is empty.
    pub fn int_long_map(&mut self, kv: &[(i32, i64)]) {
        if kv.is_empty() {
            return self.null();
        }
        self.some();
        self.long(kv.len() as i64);
        for (k, v) in kv {
            self.int(*k);
            self.long(*v);
        }
        self.long(0);
    }

    /// An optional `map<int, binary>`, as [`Enc::int_long_map`].
    pub fn int_bytes_map(&mut self, kv: &[(i32, Vec<u8>)]) {
        if kv.is_empty() {
            return self.null();
        }
        self.some();
        self.long(kv.len() as i64);
        for (k, v) in kv {
            self.int(*k);
            self.bytes(v);
        }
        self.long(0);
    }
}

/// A container file of `count` records encoded in `body`, with writer schema `schema` and
/// `meta` in its header. The sync marker is derived from the header, so the same records give
/// the same bytes.
pub fn container(schema: &str, meta: &[(&str, String)], count: usize, body: &[u8]) -> Vec<u8> {
    let mut e = Enc::default();
    e.buf.extend_from_slice(b"Obj\x01");
    e.long(meta.len() as i64 + 2);
    e.string("avro.schema");
    e.string(schema);
    e.string("avro.codec");
    e.string("null");
    for (k, v) in meta {
        e.string(k);
        e.string(v);
    }
    e.long(0);
    let sync = sync_marker(&e.buf);
    e.buf.extend_from_slice(&sync);
    if count > 0 {
        e.long(count as i64);
        e.bytes(body);
        e.buf.extend_from_slice(&sync);
    }
    e.buf
}

/// Sixteen bytes from the header (FNV-1a, twice with different seeds).
fn sync_marker(header: &[u8]) -> [u8; 16] {
    let fnv = |seed: u64| {
        header.iter().fold(seed, |h, b| {
            (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
        })
    };
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&fnv(0xcbf2_9ce4_8422_2325).to_le_bytes());
    out[8..].copy_from_slice(&fnv(0x8422_2325_cbf2_9ce4).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_container_reads_back_with_an_avro_library() {
        let schema = r#"{"type":"record","name":"r","fields":[
            {"name":"a","type":"long","field-id":1},
            {"name":"b","type":["null","string"],"default":null,"field-id":2},
            {"name":"m","type":["null",{"type":"array","items":{"type":"record","name":"k1_v2",
              "fields":[{"name":"key","type":"int","field-id":3},{"name":"value","type":"long","field-id":4}]},
              "logicalType":"map"}],"default":null,"field-id":5}]}"#;
        let mut e = Enc::default();
        e.long(-5);
        e.some();
        e.string("x");
        e.int_long_map(&[(1, 10), (2, 20)]);
        e.long(1 << 40);
        e.null();
        e.int_long_map(&[]);
        let file = container(schema, &[("format-version", "2".into())], 2, &e.buf);
        let r = apache_avro::Reader::new(&file[..]).unwrap();
        assert_eq!(r.user_metadata()["format-version"], b"2");
        let rows: Vec<_> = r.map(|v| v.unwrap()).collect();
        assert_eq!(rows.len(), 2);
        let apache_avro::types::Value::Record(f) = &rows[0] else {
            panic!("{:?}", rows[0])
        };
        assert_eq!(f[0].1, apache_avro::types::Value::Long(-5));
        let apache_avro::types::Value::Record(f) = &rows[1] else {
            panic!()
        };
        assert_eq!(f[0].1, apache_avro::types::Value::Long(1 << 40));
        assert_eq!(
            container(schema, &[], 2, &e.buf),
            container(schema, &[], 2, &e.buf)
        );
    }
}
