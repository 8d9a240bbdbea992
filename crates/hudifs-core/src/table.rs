//! The table's configuration: `.hoodie/hoodie.properties` → [`TableConfig`] (spec §1.1–§1.2).
//!
//! The properties file is parsed like `java.util.Properties` (comments, `=`/`:`/space separators,
//! escapes, line continuations). Missing optional keys take Hudi's defaults; an unknown table
//! version is refused rather than guessed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::timefmt::TimelineZone;

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
    pub root: PathBuf,
    pub name: String,
    pub table_type: TableType,
    /// 6 (Hudi 0.x) or 8/9 (Hudi 1.x).
    pub version: u32,
    /// 1: instants flat in `.hoodie/`; 2: `<req>_<completion>` names in `.hoodie/timeline/`.
    pub layout: u32,
    /// Absolute path of the active timeline directory.
    pub timeline_dir: PathBuf,
    /// Absolute path of the archived timeline directory (v6 archive or v8+ LSM history).
    pub archive_dir: PathBuf,
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

impl TableConfig {
    /// Read the configuration of the table rooted at `root`.
    pub fn load(root: &Path) -> Result<TableConfig> {
        let hoodie = root.join(".hoodie");
        let main = hoodie.join("hoodie.properties");
        let backup = hoodie.join("hoodie.properties.backup");
        let (path, text) = match std::fs::read(&main) {
            Ok(bytes) => (main, bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::read(&backup) {
                Ok(bytes) => {
                    log::warn!(
                        "{}: missing, reading {} instead (an upgrade was interrupted?)",
                        main.display(),
                        backup.display()
                    );
                    (backup, bytes)
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Error::NotATable(root.to_path_buf()))
                }
                Err(e) => return Err(Error::io(backup, e)),
            },
            Err(e) => return Err(Error::io(main, e)),
        };
        // Properties files are ISO-8859-1 by Java's definition; Hudi writes ASCII. Decode each
        // byte as a char so that no input can fail here.
        let text: String = text.iter().map(|&b| b as char).collect();
        let props = parse_properties(&text);
        Self::from_properties(root, &path, props)
    }

    fn from_properties(
        root: &Path,
        path: &Path,
        props: BTreeMap<String, String>,
    ) -> Result<TableConfig> {
        let bad = |reason: String| Error::BadTableConfig {
            path: path.to_path_buf(),
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
        let layout = match get("hoodie.timeline.layout.version") {
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
        if !matches!(layout, 1 | 2) {
            return Err(bad(format!(
                "timeline layout version {layout} is not supported"
            )));
        }
        if (version >= 8) != (layout == 2) {
            return Err(bad(format!(
                "table version {version} with timeline layout {layout} is not a combination Hudi writes"
            )));
        }
        let table_type = match get("hoodie.table.type") {
            None | Some("COPY_ON_WRITE") => TableType::CopyOnWrite,
            Some("MERGE_ON_READ") => TableType::MergeOnRead,
            Some(other) => return Err(bad(format!("unknown hoodie.table.type {other:?}"))),
        };
        let hoodie = root.join(".hoodie");
        let timeline_dir = if layout == 2 {
            hoodie.join(relative(get("hoodie.timeline.path").unwrap_or("timeline")))
        } else {
            hoodie.clone()
        };
        let archive_dir = if layout == 2 {
            timeline_dir.join(relative(
                get("hoodie.timeline.history.path").unwrap_or("history"),
            ))
        } else {
            hoodie.join(relative(
                get("hoodie.archivelog.folder").unwrap_or("archived"),
            ))
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
            root: root.to_path_buf(),
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
    /// instant that wrote them, so their writers are told by commit metadata (spec §4.5).
    pub fn has_v6_logs(&self) -> bool {
        self.is_mor() && !self.has_completion_times()
    }

    /// v8+ tables name log files after the deltacommit that wrote them and carry completion
    /// times; v6 tables name logs after the slice's base instant.
    pub fn has_completion_times(&self) -> bool {
        self.layout == 2
    }
}

/// Keep a configured sub-path inside `.hoodie`: drop leading slashes and `..` components.
fn relative(p: &str) -> PathBuf {
    Path::new(p)
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .collect()
}

/// Parse text in `java.util.Properties` format.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    // Join logical lines: a line ending in an odd number of backslashes continues on the next,
    // whose leading white space is dropped.
    let mut logical: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for raw in text.split(['\n', '\r']) {
        let line = match current.take() {
            Some(mut acc) => {
                acc.push_str(raw.trim_start_matches([' ', '\t', '\x0c']));
                acc
            }
            None => {
                let trimmed = raw.trim_start_matches([' ', '\t', '\x0c']);
                if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
                    continue;
                }
                trimmed.to_string()
            }
        };
        let trailing = line.chars().rev().take_while(|&c| c == '\\').count();
        if trailing % 2 == 1 {
            let mut l = line;
            l.pop();
            current = Some(l);
        } else {
            logical.push(line);
        }
    }
    if let Some(l) = current {
        logical.push(l);
    }
    for line in logical {
        let chars: Vec<char> = line.chars().collect();
        // The key ends at the first unescaped '=', ':' or white space.
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' => i += 2,
                '=' | ':' | ' ' | '\t' | '\x0c' => break,
                _ => i += 1,
            }
        }
        let key_end = i.min(chars.len());
        // Skip white space, then at most one separator, then white space.
        let mut j = key_end;
        while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\x0c') {
            j += 1;
        }
        if j < chars.len() && matches!(chars[j], '=' | ':') {
            j += 1;
        }
        while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\x0c') {
            j += 1;
        }
        let key = unescape(&chars[..key_end]);
        let value = unescape(&chars[j.min(chars.len())..]);
        out.insert(key, value);
    }
    out
}

fn unescape(chars: &[char]) -> String {
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        let Some(&e) = chars.get(i) else { break };
        i += 1;
        match e {
            't' => out.push('\t'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            'f' => out.push('\x0c'),
            'u' => {
                let hex: String = chars.iter().skip(i).take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) if hex.len() == 4 => {
                        out.push(ch);
                        i += 4;
                    }
                    _ => out.push('u'),
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_java_properties() {
        let text = "#Updated at 2024\n\
                    hoodie.table.name=t1\n\
                    hoodie.keygen.timebased.input.dateformat=yyyy-MM-dd'T'HH\\:mm\\:ss.SSSZ\n\
                    key\\ with\\ space : value\n\
                    multi = a,\\\n    b\n\
                    ! bang comment\n\
                    uni=\\u0041x\n\
                    empty=\n";
        let p = parse_properties(text);
        assert_eq!(p["hoodie.table.name"], "t1");
        assert_eq!(
            p["hoodie.keygen.timebased.input.dateformat"],
            "yyyy-MM-dd'T'HH:mm:ss.SSSZ"
        );
        assert_eq!(p["key with space"], "value");
        assert_eq!(p["multi"], "a,b");
        assert_eq!(p["uni"], "Ax");
        assert_eq!(p["empty"], "");
        assert_eq!(p.len(), 6);
    }

    fn config(props: &[(&str, &str)]) -> Result<TableConfig> {
        let map = props
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TableConfig::from_properties(
            Path::new("/t"),
            Path::new("/t/.hoodie/hoodie.properties"),
            map,
        )
    }

    #[test]
    fn defaults_and_layouts() {
        let c = config(&[("hoodie.table.version", "6")]).unwrap();
        assert_eq!(c.layout, 1);
        assert_eq!(c.table_type, TableType::CopyOnWrite);
        assert_eq!(c.timeline_dir, Path::new("/t/.hoodie"));
        assert_eq!(c.archive_dir, Path::new("/t/.hoodie/archived"));
        assert!(c.populate_meta_fields);
        let c = config(&[
            ("hoodie.table.version", "9"),
            ("hoodie.table.type", "MERGE_ON_READ"),
            ("hoodie.table.partition.fields", "region:SIMPLE,day"),
        ])
        .unwrap();
        assert_eq!(c.layout, 2);
        assert_eq!(c.timeline_dir, Path::new("/t/.hoodie/timeline"));
        assert_eq!(c.archive_dir, Path::new("/t/.hoodie/timeline/history"));
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
        assert_eq!(c.archive_dir, Path::new("/t/.hoodie/etc"));
    }
}
