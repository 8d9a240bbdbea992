//! The body shared by the `metadata_json` and `metadata_avro` targets: decode an instant file's
//! bytes and run every extractor on the result. None of them may panic, hang or blow memory.

use hudifs::metadata::{
    clean_earliest_to_retain, compaction_plan_groups, decode, is_clustering_request,
    rollback_files, CommitMetadata,
};

/// `HUDIFS_FUZZ_AVRO_MAX_ALLOC=N` caps every length apache-avro will allocate for at N (its
/// process-wide `max_allocation_bytes`, default 512 MiB), set before the first decode. Unset,
/// the target fuzzes exactly what the daemon runs. Set it only to fuzz past the known
/// allocation bombs (a length prefix in the header map, an array or map count, a block size)
/// while they are unfixed in `hudifs::metadata::decode`; once decode guards against them, a set
/// cap here would mask that guard, because the first caller of `max_allocation_bytes` wins.
fn cap_avro_allocations() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if let Some(n) = std::env::var("HUDIFS_FUZZ_AVRO_MAX_ALLOC")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
        {
            apache_avro::max_allocation_bytes(n);
        }
    });
}

/// `HUDIFS_FUZZ_KNOWN_PANICS="text|other text"` tolerates a panic inside `decode` whose message
/// contains one of the texts (a known, reported bug) so fuzzing can go on past it; any other
/// panic still aborts as a crash. Unset, every panic is a crash.
fn tolerate_known_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let known: Vec<String> = std::env::var("HUDIFS_FUZZ_KNOWN_PANICS")
            .unwrap_or_default()
            .split('|')
            .filter(|k| !k.is_empty())
            .map(str::to_string)
            .collect();
        if known.is_empty() {
            return;
        }
        // libfuzzer-sys's hook aborts on every panic; let the known ones unwind instead, to the
        // catch_unwind around `decode` in `check`.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let msg = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !known.iter().any(|k| msg.contains(k.as_str())) {
                previous(info);
            }
        }));
    });
}

pub fn check(data: &[u8]) {
    cap_avro_allocations();
    tolerate_known_panics();
    // Only a tolerated panic unwinds to here (see tolerate_known_panics); it counts as refused.
    let Ok(Ok(v)) = std::panic::catch_unwind(|| decode(data)) else {
        return;
    };
    if let Ok(m) = CommitMetadata::from_json(&v) {
        for s in &m.write_stats {
            assert!(!s.file_id.is_empty());
            let _ = s.file_name();
        }
    }
    let _ = compaction_plan_groups(&v);
    let _ = rollback_files(&v);
    if let Some(t) = clean_earliest_to_retain(&v) {
        assert!(!t.is_empty());
    }
    let _ = is_clustering_request(&v);
    // Whatever decoded must be printable as JSON again (the daemon logs and shows it).
    let _ = serde_json::to_string(&v);
}
