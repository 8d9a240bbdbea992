//! The body shared by the `metadata_json` and `metadata_avro` targets: decode an instant file's
//! bytes and run every extractor on the result. None of them may panic, hang or blow memory:
//! `metadata::decode` bounds what an Avro container decodes to by the container's size, so any
//! input that trips libFuzzer's memory limits (scripts/fuzz runs with 2 GB) is a bug.

use std::cell::RefCell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

use hudifs_core::metadata::{
    clean_earliest_to_retain, compaction_plan_groups, decode, is_clustering_request,
    rollback_files, CommitMetadata,
};

thread_local! {
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// `metadata::decode` turns a panic of the Avro library into an error (catch_unwind), as the
/// daemon runs it. libfuzzer-sys's panic hook would abort on that panic before it unwinds to
/// decode's catch_unwind, so replace it with one that only remembers the message; a panic that
/// escapes `check` is then reported with that message and aborts, i.e. is a crash.
fn let_caught_panics_unwind() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        panic::set_hook(Box::new(|info| {
            let msg = info.to_string();
            LAST_PANIC.with(|p| *p.borrow_mut() = msg);
        }));
    });
}

pub fn check(data: &[u8]) {
    let_caught_panics_unwind();
    if panic::catch_unwind(AssertUnwindSafe(|| check_unguarded(data))).is_err() {
        LAST_PANIC.with(|p| eprintln!("panic not caught by hudifs: {}", p.borrow()));
        std::process::abort();
    }
}

fn check_unguarded(data: &[u8]) {
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
