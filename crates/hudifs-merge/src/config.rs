//! What the merge needs of `hoodie.properties`: table version, record key fields and key
//! generator, ordering fields, merge mode (stated on v8/v9, inferred from the payload class on
//! v6), whether meta fields are populated, the base file format. Anything hudifs cannot merge
//! faithfully (custom merge modes, payloads, delete markers, partial-update modes, key
//! generators it does not know on tables without meta fields) is refused here, before any data
//! is read.

use std::collections::BTreeMap;

use crate::error::{MergeError, Result};

/// How two versions of one record are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeMode {
    /// The later write wins (`COMMIT_TIME_ORDERING`, `OverwriteWithLatestAvroPayload`).
    CommitTime,
    /// The greater ordering value wins, ties to the later write (`EVENT_TIME_ORDERING`,
    /// `DefaultHoodieRecordPayload`, `EventTimeAvroPayload`).
    EventTime,
}

/// How record keys are built for tables without meta fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyGen {
    /// One field, its value (`SimpleKeyGenerator`, `TimestampBasedKeyGenerator`, and the
    /// non-partitioned generator with one field).
    Simple,
    /// `field1:value1,field2:value2` (`ComplexKeyGenerator`, the non-partitioned generator with
    /// several fields).
    Complex,
}

/// The table configuration the merge depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergeConfig {
    pub table_version: u32,
    pub mode: MergeMode,
    /// Ordering (precombine) fields; empty when the table has none.
    pub ordering_fields: Vec<String>,
    pub record_key_fields: Vec<String>,
    /// `Some` only for tables without meta fields (keys are rebuilt from the data).
    pub key_gen: Option<KeyGen>,
    /// How the table's key generator builds keys from the record key fields, where it can be
    /// told (every table): what rebuilds the keys of CDC log images, written without meta
    /// fields.
    pub rebuilt_key_gen: Option<KeyGen>,
    pub populate_meta_fields: bool,
    /// `hoodie.table.base.file.format`, lower case.
    pub base_format: String,
    /// The table was bootstrapped (`hoodie.bootstrap.base.path`): a slice whose base instant is
    /// the metadata-only bootstrap's has a skeleton base file, which is refused.
    pub bootstrapped: bool,
    /// A record whose field holds a marker is a delete (`deletes.rs`): the custom delete marker
    /// of tables version 8 and 9 (the merge properties `hoodie.payload.delete.field` and
    /// `.marker`, Java's `DeleteContext`), or the one a payload class carries
    /// (`AWSDmsAvroPayload`: `Op = 'D'`).
    pub delete_marker: Option<DeleteMarker>,
    /// Records are ordered by a Debezium sequence instead of by the ordering fields.
    pub sequence: Option<Sequence>,
    /// String and bytes values that stand for "unavailable, keep the older record's value"
    /// (Postgres' TOAST placeholder `__debezium_unavailable_value`).
    pub unavailable: Option<Unavailable>,
    /// Under event-time ordering, records with equal ordering values keep the older one
    /// (`FirstValueAvroPayload`); otherwise the later write wins the tie.
    pub ties_to_older: bool,
    /// `PartialUpdateAvroPayload`'s merge: an incoming delete wins whatever its ordering
    /// value, and where the stored record wins it takes the incoming record's meta columns
    /// (`mergeDisorderRecordsWithMetadata`); nulls are filled both ways (`unavailable`).
    pub partial_update_payload: bool,
}

/// A Debezium sequence records are ordered by (`AbstractDebeziumAvroPayload`'s
/// `shouldPickCurrentRecord`): the incoming record wins unless its sequence is lower than the
/// stored one's; a stored record without one loses, a log record without one is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sequence {
    /// A `<file>.<position>` string, its two parts compared as numbers
    /// (`MySqlDebeziumAvroPayload.isCurrentSeqLatest` on `_event_seq`).
    FilePosition(String),
    /// A long (`PostgresDebeziumAvroPayload.extractLSN` on `_event_lsn`).
    Long(String),
}

impl Sequence {
    pub fn field(&self) -> &str {
        match self {
            Sequence::FilePosition(f) | Sequence::Long(f) => f,
        }
    }
}

/// The "unavailable value" of a table: a top-level value that `value` marks takes the other
/// record's value of that column where two records merge, and stays as it is where the record
/// merges with nothing (`PostgresDebeziumAvroPayload.mergeToastedValuesIfPresent`,
/// `PartialUpdateHandler.reconcileMarkerValues` and `reconcileDefaultValues`,
/// `OverwriteNonDefaultsWithLatestAvroPayload.combineAndGetUpdateValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable {
    pub value: Placeholder,
    /// Which record's marked values are filled. The payload fills the incoming record's only,
    /// and only when it wins (`combineAndGetUpdateValue` returns the stored record untouched
    /// otherwise); the version-9 partial-update mode fills whichever record wins from the one
    /// that loses (`PartialUpdateHandler.partialMerge`).
    pub winner_of_either: bool,
}

/// What marks a value as unavailable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placeholder {
    /// A string or bytes value equal to this text (`FILL_UNAVAILABLE`, Postgres' TOAST value).
    Text(String),
    /// A null: the value of a top-level field left at its Avro default, where every such
    /// default is null (`IGNORE_DEFAULTS`, `OverwriteNonDefaultsWithLatestAvroPayload`). A
    /// field with another default is refused where records merge
    /// (`non_null_default`): Java compares those with Avro's `equals` (payloads) or with `==`
    /// on the engine's objects (`reconcileDefaultValues`), which depends on the engine.
    Null,
    /// A null, whatever the field's default (`PartialUpdateAvroPayload.overwriteField`).
    AnyNull,
}

impl std::fmt::Display for Placeholder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Placeholder::Text(t) => write!(f, "{t}"),
            Placeholder::Null => write!(f, "(null)"),
            Placeholder::AnyNull => write!(f, "(any null)"),
        }
    }
}

/// The first top-level field of an Avro record schema (as JSON text) whose default is not
/// null, with that default: where defaults mark values as unavailable, such a table's records
/// are not merged (see `Placeholder::Null`).
pub fn non_null_default(schema_json: &str) -> Option<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(schema_json).ok()?;
    v.get("fields")?.as_array()?.iter().find_map(|f| {
        let d = f.get("default")?;
        (!d.is_null()).then(|| {
            let name = f.get("name").and_then(|n| n.as_str()).unwrap_or("?");
            (name.to_string(), d.to_string())
        })
    })
}

/// A delete marker: records whose `field`, printed as Java prints it, equals `marker` are
/// deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteMarker {
    pub field: String,
    pub marker: String,
    /// Compared ignoring case (`AWSDmsAvroPayload.isDMSDeleteRecord` uses `equalsIgnoreCase`;
    /// `DeleteContext`'s markers compare exactly).
    pub ignore_case: bool,
}

impl DeleteMarker {
    fn exact(field: &str, marker: &str) -> DeleteMarker {
        DeleteMarker {
            field: field.to_string(),
            marker: marker.to_string(),
            ignore_case: false,
        }
    }

    /// Whether a value, as Java prints it, is the marker.
    pub fn matches(&self, value: &str) -> bool {
        if self.ignore_case {
            value.eq_ignore_ascii_case(&self.marker)
        } else {
            value == self.marker
        }
    }
}

/// The prefix of the merge properties of table version 9 (`hoodie.record.merge.property.`).
const MERGE_PROPERTY: &str = "hoodie.record.merge.property.";
/// The merge properties of a custom delete marker (Java's `DefaultHoodieRecordPayload.DELETE_KEY`
/// and `DELETE_MARKER`, read by `DeleteContext` from the table's merge properties).
const DELETE_FIELD: &str = "hoodie.record.merge.property.hoodie.payload.delete.field";
const DELETE_MARKER: &str = "hoodie.record.merge.property.hoodie.payload.delete.marker";

const EVENT_TIME_STRATEGY: &str = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5";
const COMMIT_TIME_STRATEGY: &str = "ce9acb64-bde0-424c-9b91-f6ebba25356d";
/// `HoodieRecordMerger.PAYLOAD_BASED_MERGE_STRATEGY_UUID`: a version-8 table merged by its
/// payload class (merge mode `CUSTOM`).
const PAYLOAD_STRATEGY: &str = "00000000-0000-0000-0000-000000000000";
/// Debezium's placeholder for an unchanged TOAST column (`DEBEZIUM_TOASTED_VALUE`).
const DEBEZIUM_UNAVAILABLE: &str = "__debezium_unavailable_value";
/// The merge properties that name the unavailable value of the version-9 partial-update mode
/// `FILL_UNAVAILABLE` (`IGNORE_MARKERS` before Hudi 1.1 named it so): the spellings Hudi's
/// releases gave `HoodieTableConfig.PARTIAL_UPDATE_UNAVAILABLE_VALUE` and
/// `PARTIAL_UPDATE_CUSTOM_MARKER`, under the merge-property prefix.
const UNAVAILABLE_VALUE_PROPERTIES: [&str; 3] = [
    "hoodie.record.merge.property.hoodie.write.partial.update.unavailable.value",
    "hoodie.record.merge.property.partial.update.unavailable.value",
    "hoodie.record.merge.property.hoodie.write.partial.update.custom.marker",
];

/// How a payload class Hudi ships merges: its ordering, the delete marker it carries (besides
/// `_hoodie_is_deleted`, which every one honours), and the sequence field it orders by. Custom
/// classes, whose merge is not reproduced, are `None`.
struct PayloadRules {
    mode: MergeMode,
    marker: Option<DeleteMarker>,
    sequence: Option<Sequence>,
    unavailable: Option<Unavailable>,
    ties_to_older: bool,
    partial_update_payload: bool,
}

impl PayloadRules {
    /// Ordering alone: what the merge modes (and the plain payloads) give.
    fn plain(mode: MergeMode) -> PayloadRules {
        PayloadRules {
            mode,
            marker: None,
            sequence: None,
            unavailable: None,
            ties_to_older: false,
            partial_update_payload: false,
        }
    }
}

fn payload_rules(class: &str) -> Option<PayloadRules> {
    let simple = class.rsplit('.').next().unwrap_or(class);
    let ignoring_case = |field: &str, marker: &str| DeleteMarker {
        ignore_case: true,
        ..DeleteMarker::exact(field, marker)
    };
    let plain = PayloadRules::plain;
    match simple {
        "OverwriteWithLatestAvroPayload" => Some(plain(MergeMode::CommitTime)),
        "DefaultHoodieRecordPayload" | "EventTimeAvroPayload" => Some(plain(MergeMode::EventTime)),
        // combineAndGetUpdateValue takes the newer record unless its `Op` is `D` (any case);
        // Hudi 1.1's upgrade maps it to commit-time ordering with the marker `Op = D`.
        "AWSDmsAvroPayload" => Some(PayloadRules {
            marker: Some(ignoring_case("Op", "D")),
            ..plain(MergeMode::CommitTime)
        }),
        // AbstractDebeziumAvroPayload.combineAndGetUpdateValue keeps the stored record when the
        // incoming one's `_event_seq` is lower (isCurrentSeqLatest), else takes the incoming
        // one, a delete when its `_change_operation_type` is `d` (any case).
        "MySqlDebeziumAvroPayload" => Some(PayloadRules {
            mode: MergeMode::EventTime,
            marker: Some(ignoring_case("_change_operation_type", "d")),
            sequence: Some(Sequence::FilePosition("_event_seq".into())),
            ..plain(MergeMode::EventTime)
        }),
        // The same, ordered by the long `_event_lsn` (`shouldPickCurrentRecord`), and a winning
        // incoming record's TOAST placeholders take the stored record's values
        // (`mergeToastedValuesIfPresent`).
        "PostgresDebeziumAvroPayload" => Some(PayloadRules {
            mode: MergeMode::EventTime,
            marker: Some(ignoring_case("_change_operation_type", "d")),
            sequence: Some(Sequence::Long("_event_lsn".into())),
            unavailable: Some(Unavailable {
                value: Placeholder::Text(DEBEZIUM_UNAVAILABLE.into()),
                winner_of_either: false,
            }),
            ties_to_older: false,
            partial_update_payload: false,
        }),
        // combineAndGetUpdateValue takes the incoming record (no ordering), a delete when it
        // is one, its fields equal to their default (`overwriteField`: null) filled from the
        // stored record. Hudi 1.1's upgrade maps it to commit-time ordering with the
        // partial-update mode IGNORE_DEFAULTS, merged alike.
        "OverwriteNonDefaultsWithLatestAvroPayload" => Some(PayloadRules {
            unavailable: Some(Unavailable {
                value: Placeholder::Null,
                winner_of_either: true,
            }),
            ..plain(MergeMode::CommitTime)
        }),
        // DefaultHoodieRecordPayload with needUpdatingPersistedRecord's `<=` made `<`, and
        // preCombine keeping the old value on `>=`: the greater ordering value wins, a tie
        // keeps the record written first. Hudi 1.1's upgrade leaves it a payload-merged table.
        "FirstValueAvroPayload" => Some(PayloadRules {
            ties_to_older: true,
            ..plain(MergeMode::EventTime)
        }),
        // combineAndGetUpdateValue with isRecordNewer: the record with the greater ordering
        // value wins (the stored one only when strictly greater and of the same class), its
        // nulls (whatever the default: overwriteField is `value == null`) filled from the
        // other; an incoming delete wins whatever the order ("natural order for delete
        // record"); where the stored record wins, the meta columns are the incoming record's
        // (mergeDisorderRecordsWithMetadata). Hudi 1.1's upgrade maps it to event-time
        // ordering with IGNORE_DEFAULTS.
        "PartialUpdateAvroPayload" => Some(PayloadRules {
            unavailable: Some(Unavailable {
                value: Placeholder::AnyNull,
                winner_of_either: true,
            }),
            partial_update_payload: true,
            ..plain(MergeMode::EventTime)
        }),
        _ => None,
    }
}

impl MergeConfig {
    /// The record rules a materialised file was made under, beyond the table's files: a cached
    /// file made under other rules (an older hudifs, a marker declared since) is not reused.
    pub fn rules(&self) -> String {
        let mut r = "deletes:_hoodie_is_deleted,_hoodie_operation".to_string();
        if let Some(m) = &self.delete_marker {
            let case = if m.ignore_case { "~" } else { "" };
            r.push_str(&format!(",{}={case}{}", m.field, m.marker));
        }
        match &self.sequence {
            Some(Sequence::FilePosition(f)) => r.push_str(&format!(";order:{f}(file.pos)")),
            Some(Sequence::Long(f)) => r.push_str(&format!(";order:{f}(long)")),
            None => {}
        }
        if self.ties_to_older && self.mode == MergeMode::EventTime {
            r.push_str(";ties:older");
        }
        if self.partial_update_payload {
            r.push_str(";payload:partial-update");
        }
        if let Some(u) = &self.unavailable {
            let scope = if u.winner_of_either {
                "winner"
            } else {
                "incoming"
            };
            r.push_str(&format!(";unavailable:{scope}={}", u.value));
        }
        r
    }

    /// Read the merge configuration from the table's properties (as `TableConfig::properties`
    /// holds them).
    pub fn from_properties(props: &BTreeMap<String, String>) -> Result<MergeConfig> {
        let get = |k: &str| props.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
        let table_version: u32 = get("hoodie.table.version")
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| {
                MergeError::unsupported("hoodie.table.version missing or not a number")
            })?;
        let list = |v: Option<&str>| -> Vec<String> {
            v.map(|v| {
                v.split(',')
                    .map(|s| s.trim().to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            })
            .unwrap_or_default()
        };
        let ordering_fields = if get("hoodie.table.ordering.fields").is_some() {
            list(get("hoodie.table.ordering.fields"))
        } else {
            list(get("hoodie.table.precombine.field"))
        };
        let payload = get("hoodie.compaction.payload.class")
            .or_else(|| get("hoodie.table.payload.class"))
            .or_else(|| get("hoodie.datasource.write.payload.class"));
        let payload_rules_of = |p: &str| {
            payload_rules(p).ok_or_else(|| {
                MergeError::unsupported(format!(
                    "payload class {p} is a custom payload: its merge cannot be reproduced"
                ))
            })
        };
        let plain = PayloadRules::plain;
        let rules = if table_version >= 8 {
            match (
                get("hoodie.record.merge.mode"),
                get("hoodie.record.merge.strategy.id"),
            ) {
                (Some("COMMIT_TIME_ORDERING"), _) => plain(MergeMode::CommitTime),
                (Some("EVENT_TIME_ORDERING"), _) => plain(MergeMode::EventTime),
                // A version-8 table merged by its payload class.
                (Some("CUSTOM") | None, Some(PAYLOAD_STRATEGY)) if payload.is_some() => {
                    payload_rules_of(payload.unwrap_or_default())?
                }
                (Some(other), _) => {
                    return Err(MergeError::unsupported(format!(
                        "hoodie.record.merge.mode={other}: only COMMIT_TIME_ORDERING, \
                         EVENT_TIME_ORDERING and the payload classes of SEMANTICS §10.4 are \
                         merged"
                    )))
                }
                (None, Some(EVENT_TIME_STRATEGY)) => plain(MergeMode::EventTime),
                (None, Some(COMMIT_TIME_STRATEGY)) => plain(MergeMode::CommitTime),
                (None, Some(other)) => {
                    return Err(MergeError::unsupported(format!(
                        "hoodie.record.merge.strategy.id={other} is a custom merger"
                    )))
                }
                (None, None) => match payload {
                    Some(p) => payload_rules_of(p)?,
                    None if ordering_fields.is_empty() => plain(MergeMode::CommitTime),
                    None => plain(MergeMode::EventTime),
                },
            }
        } else {
            match payload {
                None => plain(MergeMode::CommitTime),
                Some(p) => payload_rules_of(p)?,
            }
        };
        for key in [
            "hoodie.payload.delete.field",
            "hoodie.payload.delete.marker",
            "hoodie.table.delete.key",
            "hoodie.table.delete.marker",
            "hoodie.write.delete.field",
        ] {
            if let Some(v) = get(key) {
                return Err(MergeError::unsupported(format!(
                    "{key}={v}: custom delete markers are not merged"
                )));
            }
        }
        // A custom delete marker among the merge properties (Hudi 1.1's upgrade writes an
        // AWSDmsAvroPayload table's as field `Op`, marker `D`): merged as Java's DeleteContext
        // reads it, on the table versions that have merge properties. Java refuses one of the
        // two without the other; so does hudifs.
        let declared_marker = match (get(DELETE_FIELD), get(DELETE_MARKER)) {
            _ if table_version < 8 => None,
            (Some(f), Some(m)) => Some(DeleteMarker::exact(f, m)),
            (None, None) => None,
            (f, _) => {
                return Err(MergeError::unsupported(format!(
                    "{} is declared without {}: Hudi takes a custom delete marker only with \
                     both (DeleteContext)",
                    if f.is_some() {
                        DELETE_FIELD
                    } else {
                        DELETE_MARKER
                    },
                    if f.is_some() {
                        DELETE_MARKER
                    } else {
                        DELETE_FIELD
                    },
                )))
            }
        };
        // Every other merge property changes which records survive or what they hold
        // (partial-update markers, properties of custom mergers), and none is merged yet, so a
        // table declaring one is refused rather than served with rows Hudi would not return.
        if let Some((k, v)) = props.iter().find(|(k, v)| {
            k.starts_with(MERGE_PROPERTY)
                && !v.trim().is_empty()
                && (table_version < 8
                    || (k.as_str() != DELETE_FIELD
                        && k.as_str() != DELETE_MARKER
                        && !UNAVAILABLE_VALUE_PROPERTIES.contains(&k.as_str())))
        }) {
            return Err(MergeError::unsupported(format!(
                "{k}={v}: this merge property is not merged"
            )));
        }
        let delete_marker = match (declared_marker, rules.marker) {
            (Some(d), Some(p)) if d != p => {
                return Err(MergeError::unsupported(format!(
                    "two delete markers: {}={} declared, and {}={} of the payload class",
                    d.field, d.marker, p.field, p.marker
                )))
            }
            (d, p) => d.or(p),
        };
        // The version-9 partial-update mode: KEEP_VALUES (partial blocks keep the older values
        // of the columns they lack, merged everywhere), IGNORE_DEFAULTS, or FILL_UNAVAILABLE
        // with its value; a declared unavailable value is read only under that mode, as Java
        // reads it.
        let unavailable = match get("hoodie.table.partial.update.mode") {
            None | Some("KEEP_VALUES") | Some("NONE") => None,
            Some("IGNORE_DEFAULTS") if table_version >= 8 => Some(Unavailable {
                value: Placeholder::Null,
                winner_of_either: true,
            }),
            Some(m @ ("FILL_UNAVAILABLE" | "IGNORE_MARKERS")) if table_version >= 8 => {
                let declared: Vec<&str> = UNAVAILABLE_VALUE_PROPERTIES
                    .iter()
                    .filter_map(|k| get(k))
                    .collect();
                match declared.as_slice() {
                    [v] => Some(Unavailable {
                        value: Placeholder::Text(v.to_string()),
                        winner_of_either: true,
                    }),
                    [] => {
                        return Err(MergeError::unsupported(format!(
                            "hoodie.table.partial.update.mode={m} without its unavailable value \
                             ({})",
                            UNAVAILABLE_VALUE_PROPERTIES[0]
                        )))
                    }
                    _ => {
                        return Err(MergeError::unsupported(format!(
                            "hoodie.table.partial.update.mode={m} with {} unavailable values \
                             declared",
                            declared.len()
                        )))
                    }
                }
            }
            Some(v) => {
                return Err(MergeError::unsupported(format!(
                    "hoodie.table.partial.update.mode={v} is not merged"
                )));
            }
        };
        let unavailable = match (unavailable, rules.unavailable) {
            (Some(d), Some(p)) if d.value != p.value => {
                return Err(MergeError::unsupported(format!(
                    "two unavailable values: {} declared, and {} of the payload class",
                    d.value, p.value
                )))
            }
            (Some(d), _) => Some(d),
            (None, p) => p,
        };
        let populate_meta_fields = get("hoodie.populate.meta.fields") != Some("false");
        let record_key_fields = list(get("hoodie.table.recordkey.fields"));
        let class = get("hoodie.table.keygenerator.class")
            .map(|c| c.rsplit('.').next().unwrap_or(c).to_string());
        let kind = get("hoodie.table.keygenerator.type").map(str::to_ascii_uppercase);
        let name = kind.or(class.map(|c| match c.as_str() {
            "SimpleKeyGenerator" | "SimpleAvroKeyGenerator" => "SIMPLE".to_string(),
            "ComplexKeyGenerator" | "ComplexAvroKeyGenerator" => "COMPLEX".to_string(),
            "NonpartitionedKeyGenerator" | "NonpartitionedAvroKeyGenerator" => {
                "NON_PARTITION".to_string()
            }
            "TimestampBasedKeyGenerator" | "TimestampBasedAvroKeyGenerator" => {
                "TIMESTAMP".to_string()
            }
            other => other.to_string(),
        }));
        let several = record_key_fields.len() > 1;
        let declared = match name.as_deref() {
            None | Some("SIMPLE") | Some("TIMESTAMP") if !several => Some(KeyGen::Simple),
            Some("NON_PARTITION") if !several => Some(KeyGen::Simple),
            Some("COMPLEX") | Some("NON_PARTITION") => Some(KeyGen::Complex),
            None => Some(KeyGen::Complex),
            Some(_) => None,
        };
        let key_gen = if populate_meta_fields {
            None
        } else {
            if record_key_fields.is_empty() {
                return Err(MergeError::unsupported(
                    "a table without meta fields and without hoodie.table.recordkey.fields: \
                     record keys cannot be rebuilt",
                ));
            }
            Some(declared.ok_or_else(|| {
                MergeError::unsupported(format!(
                    "key generator {} with record key fields {record_key_fields:?}: record \
                     keys cannot be rebuilt for a table without meta fields",
                    name.as_deref().unwrap_or("?")
                ))
            })?)
        };
        let base_format = get("hoodie.table.base.file.format")
            .unwrap_or("PARQUET")
            .to_ascii_lowercase();
        let bootstrapped = get("hoodie.bootstrap.base.path").is_some();
        Ok(MergeConfig {
            bootstrapped,
            delete_marker,
            sequence: rules.sequence,
            unavailable,
            ties_to_older: rules.ties_to_older,
            partial_update_payload: rules.partial_update_payload,
            table_version,
            mode: rules.mode,
            ordering_fields,
            record_key_fields,
            key_gen,
            rebuilt_key_gen: declared,
            populate_meta_fields,
            base_format,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn modes() {
        let c = MergeConfig::from_properties(&props(&[("hoodie.table.version", "6")])).unwrap();
        assert_eq!(c.mode, MergeMode::CommitTime);
        let c = MergeConfig::from_properties(&props(&[
            ("hoodie.table.version", "6"),
            (
                "hoodie.compaction.payload.class",
                "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
            ),
            ("hoodie.table.precombine.field", "ts"),
        ]))
        .unwrap();
        assert_eq!(c.mode, MergeMode::EventTime);
        assert_eq!(c.ordering_fields, vec!["ts"]);
        let e = MergeConfig::from_properties(&props(&[
            ("hoodie.table.version", "6"),
            ("hoodie.compaction.payload.class", "com.acme.MyPayload"),
        ]))
        .unwrap_err();
        assert_eq!(e.kind, crate::Refusal::Unsupported);
        let e = MergeConfig::from_properties(&props(&[
            ("hoodie.table.version", "9"),
            ("hoodie.record.merge.mode", "CUSTOM"),
        ]))
        .unwrap_err();
        assert_eq!(e.errno(), libc::EOPNOTSUPP);
        let c = MergeConfig::from_properties(&props(&[
            ("hoodie.table.version", "9"),
            ("hoodie.record.merge.mode", "EVENT_TIME_ORDERING"),
            ("hoodie.table.ordering.fields", "a,b"),
            ("hoodie.populate.meta.fields", "false"),
            ("hoodie.table.recordkey.fields", "k1,k2"),
            ("hoodie.table.keygenerator.type", "COMPLEX"),
        ]))
        .unwrap();
        assert_eq!(c.ordering_fields, vec!["a", "b"]);
        assert_eq!(c.key_gen, Some(KeyGen::Complex));
        let e = MergeConfig::from_properties(&props(&[
            ("hoodie.table.version", "9"),
            ("hoodie.populate.meta.fields", "false"),
            ("hoodie.table.recordkey.fields", "k1"),
            ("hoodie.table.keygenerator.type", "CUSTOM_THING"),
        ]))
        .unwrap_err();
        assert_eq!(e.kind, crate::Refusal::Unsupported);
    }

    #[test]
    fn merge_properties_other_than_a_delete_marker_are_refused_by_name() {
        let with = |version: &str, kv: &[(&str, &str)]| {
            let mut p = props(kv);
            p.insert("hoodie.table.version".into(), version.into());
            MergeConfig::from_properties(&p)
        };
        let c = with("9", &[(DELETE_FIELD, "Op"), (DELETE_MARKER, "D")]).unwrap();
        assert_eq!(c.delete_marker, Some(DeleteMarker::exact("Op", "D")));
        for (version, kv, named) in [
            ("9", vec![(DELETE_FIELD, "Op")], DELETE_MARKER),
            ("9", vec![(DELETE_MARKER, "D")], DELETE_FIELD),
            // Table version 6 has no merge properties: a 0.x reader would ignore them.
            (
                "6",
                vec![(DELETE_FIELD, "Op"), (DELETE_MARKER, "D")],
                DELETE_FIELD,
            ),
            (
                "9",
                vec![("hoodie.record.merge.property.anything.else", "x")],
                "anything.else",
            ),
        ] {
            let e = with(version, &kv).unwrap_err();
            assert_eq!(e.errno(), libc::EOPNOTSUPP);
            assert!(e.to_string().contains(named), "{e}");
        }
        // Declared empty: nothing to merge differently.
        let c = with("9", &[(DELETE_MARKER, " ")]).unwrap();
        assert_eq!(c.delete_marker, None);
    }

    #[test]
    fn partial_update_modes() {
        let with = |kv: &[(&str, &str)]| {
            let mut p = props(kv);
            p.insert("hoodie.table.version".into(), "9".into());
            MergeConfig::from_properties(&p)
        };
        let mode = "hoodie.table.partial.update.mode";
        let c = with(&[
            (mode, "FILL_UNAVAILABLE"),
            (UNAVAILABLE_VALUE_PROPERTIES[1], "__x"),
        ])
        .unwrap();
        assert_eq!(
            c.unavailable,
            Some(Unavailable {
                value: Placeholder::Text("__x".into()),
                winner_of_either: true
            })
        );
        let c = with(&[(mode, "IGNORE_DEFAULTS")]).unwrap();
        assert_eq!(
            c.unavailable,
            Some(Unavailable {
                value: Placeholder::Null,
                winner_of_either: true
            })
        );
        assert!(
            c.rules().contains("unavailable:winner=(null)"),
            "{}",
            c.rules()
        );
        // Under KEEP_VALUES Java does not read the value: neither does hudifs.
        let c = with(&[(UNAVAILABLE_VALUE_PROPERTIES[0], "__x")]).unwrap();
        assert_eq!(c.unavailable, None);
        for (kv, named) in [
            (
                vec![(mode, "FILL_UNAVAILABLE")],
                "without its unavailable value",
            ),
            (
                vec![
                    (mode, "IGNORE_MARKERS"),
                    (UNAVAILABLE_VALUE_PROPERTIES[0], "a"),
                    (UNAVAILABLE_VALUE_PROPERTIES[2], "b"),
                ],
                "2 unavailable values",
            ),
            (vec![(mode, "FILL_DEFAULTS")], "FILL_DEFAULTS"),
        ] {
            let e = with(&kv).unwrap_err();
            assert_eq!(e.errno(), libc::EOPNOTSUPP);
            assert!(e.to_string().contains(named), "{e}");
        }
        let pg = MergeConfig::from_properties(&props(&[
            ("hoodie.table.version", "6"),
            (
                "hoodie.compaction.payload.class",
                "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload",
            ),
        ]))
        .unwrap();
        assert_eq!(pg.sequence, Some(Sequence::Long("_event_lsn".into())));
        assert_eq!(
            pg.unavailable.map(|u| (u.value, u.winner_of_either)),
            Some((Placeholder::Text(DEBEZIUM_UNAVAILABLE.to_string()), false))
        );
        assert_eq!(
            non_null_default(
                r#"{"type":"record","name":"r","fields":[{"name":"a","type":["null","int"],
                "default":null},{"name":"b","type":"int"},{"name":"c","type":"int","default":0}]}"#
            ),
            Some(("c".into(), "0".into()))
        );
        assert_eq!(
            non_null_default(
                r#"{"type":"record","name":"r","fields":[{"name":"a","type":"int"}]}"#
            ),
            None
        );
    }
}
