//! `delta/`: the table as a Delta Lake table, for engines that read Delta but not Hudi
//! (docs/SEMANTICS.md §11). Plain logic, no file system: the versions and their log files
//! (`log`), the Delta schema of a Parquet schema (`schema`) and a data file's statistics from
//! its footer (`stats`). The file system builds the versions from its own views
//! (`fs/delta.rs`).

pub mod log;
pub mod schema;
pub mod stats;

use std::sync::Arc;

pub use log::{DeltaFile, TableFacts, Version};

/// The name of a file in `_delta_log/`: the version's JSON, `<20 digits>.json`.
pub fn log_file_name(version: u64) -> String {
    format!("{version:020}.json")
}

/// The version a `_delta_log/` file name stands for.
pub fn parse_log_file_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(".json")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The whole log of one snapshot of the table: every version, rendered.
pub struct DeltaLog {
    /// The generation of the snapshot it was built from.
    pub generation: u64,
    pub versions: Vec<Arc<Version>>,
    /// `rendered[i]` is the log file of `versions[i]`.
    pub rendered: Vec<Arc<Vec<u8>>>,
}

impl DeltaLog {
    /// Render `versions` (in order, numbered from their first's number).
    pub fn new(generation: u64, table: &TableFacts, versions: Vec<Arc<Version>>) -> DeltaLog {
        let rendered = versions
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let prev = i.checked_sub(1).map(|p| &*versions[p]);
                Arc::new(log::render(table, prev, v))
            })
            .collect();
        DeltaLog {
            generation,
            versions,
            rendered,
        }
    }

    /// The log file of version `number`, and its version.
    pub fn file(&self, number: u64) -> Option<(&Arc<Version>, &Arc<Vec<u8>>)> {
        let first = self.versions.first()?.number;
        let i = usize::try_from(number.checked_sub(first)?).ok()?;
        Some((self.versions.get(i)?, self.rendered.get(i)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_file_names_round_trip() {
        assert_eq!(log_file_name(7), "00000000000000000007.json");
        assert_eq!(parse_log_file_name("00000000000000000007.json"), Some(7));
        for bad in [
            "7.json",
            "0000000000000000000a.json",
            "00000000000000000007.crc",
        ] {
            assert_eq!(parse_log_file_name(bad), None, "{bad}");
        }
    }
}
