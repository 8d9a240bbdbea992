//! Base and log file names in partition directories (SEMANTICS.md §1.5).
//!
//! Properties: a parsed base name formats back (`base_file_name`) to the very input; a parsed
//! log name formats back (`log_file_name`) to a name that parses equal; `parse_data_name` agrees
//! with the two parsers.
#![no_main]

use hudifs_core::listing::{
    base_file_name, log_file_name, parse_base_name, parse_data_name, parse_log_name, DataName,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    let exts: Vec<String> = ["parquet", "orc", "hfile", "lance"].map(String::from).to_vec();
    let base = parse_base_name(name, &exts);
    if let Some(b) = &base {
        assert_eq!(base_file_name(&b.file_id, &b.write_token, &b.instant, &b.ext), name);
    }
    let log = parse_log_name(name);
    if let Some(l) = &log {
        let again = log_file_name(&l.file_id, &l.instant, l.version, &l.write_token);
        assert_eq!(
            parse_log_name(&again).as_ref(),
            Some(l),
            "{name:?} formats to {again:?}, which parses differently"
        );
    }
    match parse_data_name(name, &exts) {
        Some(DataName::Base(b)) => assert_eq!(Some(b), base),
        Some(DataName::Log(l)) => {
            assert!(base.is_none());
            assert_eq!(Some(l), log);
        }
        None => {}
    }
});
