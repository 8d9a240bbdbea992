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

pub fn check(data: &[u8]) {
    cap_avro_allocations();
    let Ok(v) = decode(data) else {
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
