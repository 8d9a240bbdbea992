//! Timeline file names (SEMANTICS.md §1.3), layouts 1 and 2.
//!
//! Property: a parsed name formats back (`instant_file_name`) to a name that parses to the same
//! instant file (requested, completion, action, state). The `name` field is not compared: the
//! legacy `<t>.commit.inflight` and `<t>.inflight` spellings are the same instant file.
#![no_main]

use hudifs_core::timeline::{instant_file_name, parse_instant_file_name, State};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    for layout in [1u32, 2] {
        let Some(f) = parse_instant_file_name(name, layout) else {
            continue;
        };
        assert_eq!(f.name, name);
        assert!(!f.requested.is_empty() && f.requested.bytes().all(|b| b.is_ascii_digit()));
        if let Some(c) = &f.completion {
            assert!(layout == 2 && f.state == State::Completed);
            assert!(!c.is_empty() && c.bytes().all(|b| b.is_ascii_digit()));
        }
        let again = instant_file_name(&f.requested, f.completion.as_deref(), f.action, f.state, layout);
        let g = parse_instant_file_name(&again, layout).unwrap_or_else(|| {
            panic!("{name:?} (layout {layout}) formats to {again:?}, which does not parse")
        });
        assert_eq!(
            (&g.requested, &g.completion, g.action, g.state),
            (&f.requested, &f.completion, f.action, f.state),
            "{name:?} (layout {layout}) formats to {again:?}, which parses differently"
        );
    }
});
