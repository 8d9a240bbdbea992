//! The body shared by the `metadata_json` and `metadata_avro` targets: decode an instant file's
//! bytes and run every extractor on the result. None of them may panic, hang or blow memory.

use hudifs::metadata::{
    clean_earliest_to_retain, compaction_plan_groups, decode, is_clustering_request,
    rollback_files, CommitMetadata,
};

pub fn check(data: &[u8]) {
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
