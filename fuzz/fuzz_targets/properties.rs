//! `hoodie.properties` text (java.util.Properties format). Seeded with the fixtures' files.
#![no_main]

use hudifs_core::table::parse_properties;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let props = parse_properties(text);
    // Parsing is a function of the text: the same text gives the same map.
    assert_eq!(props, parse_properties(text));
});
