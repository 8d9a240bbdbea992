//! Instant metadata given as JSON (0.x / table version 6 timelines). Seeded with the v6
//! `.hoodie/*` instant files of the fixture tables.
#![no_main]

#[path = "metadata_common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::check(data));
