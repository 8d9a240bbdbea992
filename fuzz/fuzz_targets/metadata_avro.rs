//! Instant metadata given as Avro object container files (Hudi 1.x, table versions 8 and 9, and
//! every plan). Seeded with the `.hoodie/timeline/*` instant files of the fixture tables. Same
//! body as `metadata_json`; a separate target so the Avro corpus is fuzzed on its own.
#![no_main]

#[path = "metadata_common.rs"]
mod common;

libfuzzer_sys::fuzz_target!(|data: &[u8]| common::check(data));
