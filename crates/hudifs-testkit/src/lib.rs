//! hudifs's test kit: the project's own table writer (`generator`: real Parquet, log and
//! timeline files for table versions 6, 8 and 9), the live writer simulation behind
//! `hudifs-writer`, and what tests and benchmarks share.

pub mod azurite;
pub mod fake_gcs;
pub mod fixtures;
pub mod generator;
pub mod mount;
pub mod s3;
pub mod server;
pub mod support;
