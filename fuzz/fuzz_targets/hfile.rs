//! HFile v3 bytes (Hudi's metadata-table files and HFile log blocks). Seeded with small files
//! from `hudifs_hfile::writer` (each codec, a multi-level index). Every call must return an
//! answer or an error, never panic; a file that opens answers the same lookups the same way.
#![no_main]

use hudifs_hfile::HFileReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hudifs_hfile::raw::blocks(data);
    let Ok(r) = HFileReader::open(data) else {
        return;
    };
    let mut keys = Vec::new();
    for kv in r.scan().take(10_000) {
        match kv {
            Ok((k, _)) => keys.push(k),
            Err(_) => break,
        }
    }
    for k in keys.iter().take(64) {
        let one = r.get(k);
        let again = r.get(k);
        assert_eq!(one.is_ok(), again.is_ok());
        if let (Ok(a), Ok(b)) = (&one, &again) {
            assert_eq!(a, b);
        }
        let _ = r.scan_prefix(k).take(1_000).count();
    }
    let _ = r.get_many(&keys[..keys.len().min(64)]);
    let _ = r.get(b"__all_partitions__");
    for name in r.meta_block_names().map(<[u8]>::to_vec).collect::<Vec<_>>() {
        let _ = r.meta_block(&name);
    }
});
