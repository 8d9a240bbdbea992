//! Tier 3: tables on object stores: real servers on 127.0.0.1 started by the tests (moto for S3,
//! Azurite, fake-gcs-server), some behind the test kit's counting, fault-injecting proxy.
//!
//! One test binary; each file is a module, its tests named `file::test`. What each proves:
//! tests/store/README.md.

mod az_server;
mod bootstrap;
mod gcs_server;
mod s3_conformance;
mod s3_faults;
mod s3_live;
mod s3_server;
mod store_reads;

/// Every file under `dir` with its bytes, sorted by path.
pub fn tree(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = hudifs_testkit::support::walk_files(dir)
        .unwrap()
        .into_iter()
        .map(|rel| {
            let b = std::fs::read(dir.join(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
            (rel, b)
        })
        .collect();
    v.sort();
    v
}
