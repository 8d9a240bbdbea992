//! The table's configuration: `.hoodie/hoodie.properties` → [`TableConfig`] (SEMANTICS.md
//! §1.1–§1.2). Missing optional keys take Hudi's defaults; an unknown table version is refused
//! rather than guessed.

use std::collections::BTreeMap;

use hudifs_storage::{Storage, TablePath};

use crate::error::{Error, Result};
use crate::properties::parse_properties;
use crate::timefmt::TimelineZone;

/// How the timeline is laid out (`hoodie.timeline.layout.version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Layout {
    /// Layout 1 (table version 6, Hudi 0.x): instant files flat in `.hoodie/`, named
    /// `<requested>.<action>[.<state>]`; no completion times.
    #[serde(rename = "1")]
    V1,
    /// Layout 2 (table versions 8 and 9, Hudi 1.x): instant files in `.hoodie/timeline/`, a
    /// completed one named `<requested>_<completion>.<action>`.
    #[serde(rename = "2")]
    V2,
}

impl Layout {
    /// The number Hudi gives the layout.
    pub fn number(self) -> u32 {
        match self {
            Layout::V1 => 1,
            Layout::V2 => 2,
        }
    }

    /// Whether completed instant files carry their completion time.
    pub fn has_completion_times(self) -> bool {
        self == Layout::V2
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum TableType {
    #[serde(rename = "COPY_ON_WRITE")]
    CopyOnWrite,
    #[serde(rename = "MERGE_ON_READ")]
    MergeOnRead,
}

/// What `hoodie.properties` says, as far as visibility is concerned.
#[derive(Debug, Clone)]
pub struct TableConfig {
    pub name: String,
    pub table_type: TableType,
    /// 6 (Hudi 0.x) or 8/9 (Hudi 1.x).
    pub version: u32,
    pub layout: Layout,
    /// The active timeline directory.
    pub timeline_dir: TablePath,
    /// The archived timeline directory (v6 archive or v8+ LSM history).
    pub archive_dir: TablePath,
    pub partition_fields: Vec<String>,
    /// Base-file extensions accepted in this table (without the dot).
    pub base_extensions: Vec<String>,
    pub populate_meta_fields: bool,
    /// `hoodie.table.timeline.timezone`, if the table states it.
    pub timeline_zone: Option<TimelineZone>,
    pub cdc_enabled: bool,
    /// All properties as read, for inspection.
    pub properties: BTreeMap<String, String>,
}

/// The instant of the skeleton base files a metadata-only bootstrap writes (Java's
/// `HoodieTimeline.METADATA_BOOTSTRAP_INSTANT_TS`): they hold the meta columns only, the data
/// stays in the source files under `hoodie.bootstrap.base.path`. (A full-record bootstrap's
/// files, `00000000000002`, are whole.)
pub const METADATA_BOOTSTRAP_INSTANT: &str = "00000000000001";

impl TableConfig {
    /// `hoodie.bootstrap.base.path`: where a bootstrapped table's source files are.
    pub fn bootstrap_base_path(&self) -> Option<&str> {
        self.properties
            .get("hoodie.bootstrap.base.path")
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
    }

    /// Where a table upgraded from Hudi 0.x keeps the archived timeline its 0.x archiver wrote
    /// (`.hoodie/archived`, or `hoodie.archivelog.folder`): a layout-2 table whose
    /// `hoodie.table.initial.version` is below 8 (`SixToEightUpgradeHandler` records `SIX`).
    /// The upgrade copies that archive into the LSM history (`upgradeToLSMTimeline`), where a
    /// failure is only a warning, and leaves it in place.
    pub fn legacy_archive_dir(&self) -> Option<TablePath> {
        if !self.was_upgraded() {
            return None;
        }
        let folder = self
            .properties
            .get("hoodie.archivelog.folder")
            .map(|f| f.trim())
            .filter(|f| !f.is_empty())
            .unwrap_or("archived");
        Some(
            TablePath::new(HOODIE)
                .unwrap_or_default()
                .join_path(&relative(folder)),
        )
    }

    /// A layout-2 table upgraded from Hudi 0.x: `hoodie.table.initial.version` below 8, as a
    /// number or a `HoodieTableVersion` name (`SixToEightUpgradeHandler` records `SIX`).
    pub fn was_upgraded(&self) -> bool {
        if self.layout != Layout::V2 {
            return false;
        }
        let Some(initial) = self.properties.get("hoodie.table.initial.version") else {
            return false;
        };
        let initial = initial.trim();
        const NAMES: [&str; 10] = [
            "ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE",
        ];
        let version = initial
            .parse::<usize>()
            .ok()
            .or_else(|| NAMES.iter().position(|n| n.eq_ignore_ascii_case(initial)));
        version.is_some_and(|v| v < 8)
    }

    /// Whether a base file of instant `instant` is a metadata-only bootstrap skeleton.
    pub fn is_bootstrap_skeleton(&self, instant: &str) -> bool {
        instant == METADATA_BOOTSTRAP_INSTANT && self.bootstrap_base_path().is_some()
    }

    /// Read the configuration of the table in `store`.
    pub fn load(store: &dyn Storage) -> Result<TableConfig> {
        let hoodie = TablePath::new(HOODIE).unwrap_or_default();
        let main = hoodie.join_path(&TablePath::new(PROPERTIES).unwrap_or_default());
        let backup = hoodie.join_path(&TablePath::new(PROPERTIES_BACKUP).unwrap_or_default());
        let (path, text) = match store.read(&main) {
            Ok(bytes) => (main, bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match store.read(&backup) {
                Ok(bytes) => {
                    log::warn!(
                        "{}: missing, reading {} instead (an upgrade was interrupted?)",
                        store.describe(&main),
                        store.describe(&backup)
                    );
                    (backup, bytes)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::NotATable(store.describe(&TablePath::root())))
                }
                Err(e) => return Err(Error::io(store.describe(&backup), e)),
            },
            Err(e) => return Err(Error::io(store.describe(&main), e)),
        };
        // Properties files are ISO-8859-1 by Java's definition; Hudi writes ASCII. Decode each
        // byte as a char so that no input can fail here.
        let text: String = text.iter().map(|&b| b as char).collect();
        let props = parse_properties(&text);
        Self::from_properties(&store.describe(&path), props)
    }

    /// The configuration `props` state; `path` names the file in messages.
    pub fn from_properties(path: &str, props: BTreeMap<String, String>) -> Result<TableConfig> {
        let bad = |reason: String| Error::BadTableConfig {
            path: path.to_string(),
            reason,
        };
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());

        let version = match get("hoodie.table.version") {
            None => return Err(bad("hoodie.table.version is missing".into())),
            Some(v) => v
                .parse::<u32>()
                .map_err(|_| bad(format!("hoodie.table.version={v:?} is not a number")))?,
        };
        if !matches!(version, 6 | 8 | 9) {
            return Err(bad(format!(
                "table version {version} is not supported (hudifs reads table versions 6, 8 and 9); \
                 upgrade or downgrade the table with Hudi first"
            )));
        }
        let layout_number = match get("hoodie.timeline.layout.version") {
            None => {
                if version >= 8 {
                    2
                } else {
                    1
                }
            }
            Some(v) => v.parse::<u32>().map_err(|_| {
                bad(format!(
                    "hoodie.timeline.layout.version={v:?} is not a number"
                ))
            })?,
        };
        let layout = match layout_number {
            1 => Layout::V1,
            2 => Layout::V2,
            n => return Err(bad(format!("timeline layout version {n} is not supported"))),
        };
        if (version >= 8) != (layout == Layout::V2) {
            return Err(bad(format!(
                "table version {version} with timeline layout {layout_number} is not a combination Hudi writes"
            )));
        }
        let table_type = match get("hoodie.table.type") {
            None | Some("COPY_ON_WRITE") => TableType::CopyOnWrite,
            Some("MERGE_ON_READ") => TableType::MergeOnRead,
            Some(other) => return Err(bad(format!("unknown hoodie.table.type {other:?}"))),
        };
        let hoodie = TablePath::new(HOODIE).unwrap_or_default();
        let (timeline_dir, archive_dir) = match layout {
            Layout::V2 => {
                let timeline =
                    hoodie.join_path(&relative(get("hoodie.timeline.path").unwrap_or("timeline")));
                let history = timeline.join_path(&relative(
                    get("hoodie.timeline.history.path").unwrap_or("history"),
                ));
                (timeline, history)
            }
            Layout::V1 => {
                let archive = hoodie.join_path(&relative(
                    get("hoodie.archivelog.folder").unwrap_or("archived"),
                ));
                (hoodie.clone(), archive)
            }
        };

        let non_partitioned_keygen = get("hoodie.table.keygenerator.class")
            .map(|c| c.ends_with("NonpartitionedKeyGenerator"))
            .unwrap_or(false)
            || get("hoodie.table.keygenerator.type") == Some("NON_PARTITION");
        let partition_fields: Vec<String> = if non_partitioned_keygen {
            Vec::new()
        } else {
            get("hoodie.table.partition.fields")
                .map(|v| {
                    v.split(',')
                        .map(|f| f.split(':').next().unwrap_or("").trim().to_string())
                        .filter(|f| !f.is_empty())
                        .collect()
                })
                .unwrap_or_default()
        };

        let base_format = get("hoodie.table.base.file.format")
            .unwrap_or("PARQUET")
            .to_ascii_lowercase();
        if !matches!(base_format.as_str(), "parquet" | "orc" | "hfile" | "lance") {
            return Err(bad(format!(
                "unknown hoodie.table.base.file.format {base_format:?}"
            )));
        }
        let multiple = get("hoodie.table.multiple.base.file.formats.enable") == Some("true");
        let base_extensions = if multiple {
            ["parquet", "orc", "hfile", "lance"]
                .iter()
                .map(|s| s.to_string())
                .collect()
        } else {
            vec![base_format]
        };

        let timeline_zone = match get("hoodie.table.timeline.timezone") {
            None => None,
            Some(z) => Some(
                TimelineZone::parse(z)
                    .map_err(|e| bad(format!("hoodie.table.timeline.timezone={z:?}: {e}")))?,
            ),
        };

        Ok(TableConfig {
            name: get("hoodie.table.name").unwrap_or("").to_string(),
            table_type,
            version,
            layout,
            timeline_dir,
            archive_dir,
            partition_fields,
            base_extensions,
            populate_meta_fields: get("hoodie.populate.meta.fields") != Some("false"),
            timeline_zone,
            cdc_enabled: get("hoodie.table.cdc.enabled") == Some("true"),
            properties: props,
        })
    }

    pub fn is_mor(&self) -> bool {
        self.table_type == TableType::MergeOnRead
    }

    /// A v6 merge-on-read table: its log files carry the base instant of their slice, not the
    /// instant that wrote them, so their writers are told by commit metadata (SEMANTICS.md §3.6).
    pub fn has_v6_logs(&self) -> bool {
        self.is_mor() && !self.has_completion_times()
    }

    /// A merge-on-read table upgraded from 0.x ([`Self::was_upgraded`]): its pre-upgrade logs
    /// are named after their slice's base instant, as on v6, so a log's writer is the completed
    /// write whose metadata names it, not its name's instant (SEMANTICS.md §8).
    pub fn has_pre_upgrade_logs(&self) -> bool {
        self.is_mor() && self.was_upgraded()
    }

    /// Whether log writers are told by commit metadata: v6 merge-on-read, or upgraded from it.
    pub fn attributes_logs(&self) -> bool {
        self.has_v6_logs() || self.has_pre_upgrade_logs()
    }

    /// v8+ tables name log files after the deltacommit that wrote them and carry completion
    /// times; v6 tables name logs after the slice's base instant.
    pub fn has_completion_times(&self) -> bool {
        self.layout.has_completion_times()
    }
}

/// The table's metadata directory.
pub const HOODIE: &str = ".hoodie";
/// The configuration file inside it, and its backup (written during upgrades).
pub const PROPERTIES: &str = "hoodie.properties";
pub const PROPERTIES_BACKUP: &str = "hoodie.properties.backup";

/// Keep a configured sub-path inside `.hoodie`: drop leading slashes, `.` and `..` components.
fn relative(p: &str) -> TablePath {
    let parts: Vec<&str> = p
        .split('/')
        .filter(|c| !c.is_empty() && *c != "." && *c != ".." && !c.contains('\0'))
        .collect();
    TablePath::new(&parts.join("/")).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(props: &[(&str, &str)]) -> Result<TableConfig> {
        let map = props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TableConfig::from_properties("/t/.hoodie/hoodie.properties", map)
    }

    #[test]
    fn defaults_and_layouts() {
        let c = config(&[("hoodie.table.version", "6")]).unwrap();
        assert_eq!(c.layout, Layout::V1);
        assert_eq!(c.table_type, TableType::CopyOnWrite);
        assert_eq!(c.timeline_dir.as_str(), ".hoodie");
        assert_eq!(c.archive_dir.as_str(), ".hoodie/archived");
        assert!(c.populate_meta_fields);
        let c = config(&[
            ("hoodie.table.version", "9"),
            ("hoodie.table.type", "MERGE_ON_READ"),
            ("hoodie.table.partition.fields", "region:SIMPLE,day"),
        ])
        .unwrap();
        assert_eq!(c.layout, Layout::V2);
        assert_eq!(c.timeline_dir.as_str(), ".hoodie/timeline");
        assert_eq!(c.archive_dir.as_str(), ".hoodie/timeline/history");
        assert_eq!(c.partition_fields, vec!["region", "day"]);
    }

    #[test]
    fn refuses_what_it_does_not_know() {
        for props in [
            vec![("hoodie.table.version", "5")],
            vec![("hoodie.table.version", "seven")],
            vec![],
            vec![("hoodie.table.version", "6"), ("hoodie.table.type", "X")],
            vec![
                ("hoodie.table.version", "8"),
                ("hoodie.timeline.layout.version", "1"),
            ],
        ] {
            let err = config(&props).unwrap_err().to_string();
            assert!(err.contains("hoodie.properties"), "{err}");
        }
    }

    #[test]
    fn configured_paths_stay_inside_hoodie() {
        let c = config(&[
            ("hoodie.table.version", "6"),
            ("hoodie.archivelog.folder", "../../etc"),
        ])
        .unwrap();
        assert_eq!(c.archive_dir.as_str(), ".hoodie/etc");
    }
}
