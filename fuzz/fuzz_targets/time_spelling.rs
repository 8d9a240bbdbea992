//! Time spellings in paths and options: `parse_time` in the UTC, LOCAL and America/Chicago
//! timeline zones, `as_of/<ts>` (`parse_as_of`), `incremental/<t1>..<t2>` (`parse_window`), and
//! zone spellings (`TimelineZone::parse`).
//!
//! Properties: every instant produced is 17 ASCII digits and a valid instant; a window's start
//! is not after its end; a parsed zone prints (`Display`) to a spelling that parses back equal.
#![no_main]

use std::sync::OnceLock;

use hudifs_core::fsview::ViewKey;
use hudifs_core::timefmt::{is_valid_instant, parse_time, TimeSpec, TimelineZone};
use hudifs_core::viewkey::{parse_as_of, parse_window};
use libfuzzer_sys::fuzz_target;

fn zones() -> &'static [TimelineZone] {
    static Z: OnceLock<Vec<TimelineZone>> = OnceLock::new();
    Z.get_or_init(|| {
        vec![
            TimelineZone::Utc,
            TimelineZone::Local,
            TimelineZone::parse("America/Chicago").expect("America/Chicago"),
        ]
    })
}

fn check_instant(what: &str, input: &str, t: &str) {
    assert!(
        t.len() == 17 && t.bytes().all(|b| b.is_ascii_digit()) && is_valid_instant(t),
        "{what}({input:?}) gave {t:?}, not a valid 17-digit instant"
    );
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    for zone in zones() {
        if let Ok(TimeSpec::Instant(t)) = parse_time(s, zone) {
            check_instant("parse_time", s, &t);
        }
        if let Ok(ViewKey::AsOf(t)) = parse_as_of(s, zone) {
            check_instant("parse_as_of", s, &t);
        }
        if let Ok(ViewKey::Incremental { start, end }) =
            parse_window(s, zone, Some("20240101000000000"))
        {
            for t in start.iter().chain(end.iter()) {
                check_instant("parse_window", s, t);
            }
            if let (Some(a), Some(b)) = (&start, &end) {
                assert!(a <= b, "parse_window({s:?}) gave start {a} after end {b}");
            }
        }
    }
    if let Ok(z) = TimelineZone::parse(s) {
        let shown = z.to_string();
        assert_eq!(
            TimelineZone::parse(&shown).as_ref(),
            Ok(&z),
            "zone {s:?} prints as {shown:?}, which parses differently"
        );
    }
});
