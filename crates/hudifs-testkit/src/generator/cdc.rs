//! Change data capture as Hudi's writers persist it (RFC-51): the supplemental logging modes,
//! the CDC log file name and the Avro schema and records of its CDC data block.
//!
//! What Hudi does, and the generator follows (checked against Apache Hudi's
//! `HoodieMergeHandleWithChangeLog`, `HoodieCDCLogger`, `HoodieCDCUtils`,
//! `HoodieWriteHandle.createLogWriter` and `HoodieCommitMetadata.avsc`):
//!
//! - Only the merge handle logs changes: a copy-on-write write that rewrites an existing file
//!   group. Inserts into new file groups (`BASE_FILE_INSERT`), replaced groups and
//!   merge-on-read log files are inferred by readers and get no CDC file.
//! - The merge handle logs one record per changed key of the group: `u` for a key it merged
//!   (even when the data is the same), `d` for a deleted key, `i` for a key new to the group.
//!   Keys it only copied get none. It writes no CDC file at all when the new base file is
//!   empty (every record deleted) or holds only inserted records (`recordsWritten == 0 ||
//!   recordsWritten == insertRecordsWritten`).
//! - The file is a log file of the group named with the write's instant, version 1 and the
//!   merge handle's write token, with the CDC suffix glued to the token
//!   (`.<fileId>_<instant>.log.1_<token>-cdc` in table version 6,
//!   `.<fileId>_<instant>.log.1_<token>.cdc` in 8 and 9), holding one `CDC_DATA_BLOCK` whose
//!   header has `INSTANT_TIME` and `SCHEMA` and whose content is laid out as an Avro data
//!   block's (block version 3, record count, length-prefixed Avro records).
//! - The schema depends on the mode: `OP_KEY_ONLY` is the fixed record `Record {op:
//!   ["string","null"], record_key: ["string","null"]}`; `DATA_BEFORE` is `CDC {op, record_key,
//!   before}` and `DATA_BEFORE_AFTER` is `CDC {op, ts_ms, before, after}`, every field
//!   `["null", …]` with default null, the images being the table's record schema *without*
//!   Hudi's meta fields (`HoodieCDCLogger` removes them). `ts_ms` is the write's instant.
//! - The write stat of the group carries `cdcStats`: the CDC file's path relative to the table
//!   root → its size.
//!
//! The record order in the block is by record key (Hudi's in-memory map gives no order).

use serde_json::{json, Value as Json};

use super::avro::{Field, Record, Schema};

/// Hudi's `HoodieCDCSupplementalLoggingMode`: what a CDC log record holds besides the
/// operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CdcMode {
    /// The operation and the record key (`op_key_only`).
    OpKeyOnly,
    /// Also the record before the change (`data_before`).
    DataBefore,
    /// The operation, the commit time and the records before and after the change
    /// (`data_before_after`, Hudi's default).
    DataBeforeAfter,
}

impl CdcMode {
    pub const ALL: [CdcMode; 3] = [
        CdcMode::OpKeyOnly,
        CdcMode::DataBefore,
        CdcMode::DataBeforeAfter,
    ];

    /// The enum constant's name (`OP_KEY_ONLY`, `DATA_BEFORE`, `DATA_BEFORE_AFTER`).
    pub fn name(self) -> &'static str {
        match self {
            CdcMode::OpKeyOnly => "OP_KEY_ONLY",
            CdcMode::DataBefore => "DATA_BEFORE",
            CdcMode::DataBeforeAfter => "DATA_BEFORE_AFTER",
        }
    }

    /// `hoodie.table.cdc.supplemental.logging.mode` as the table version's Hudi writes it:
    /// the lower-case option value (`op_key_only`, …) in version 6, the upper-case enum name
    /// in 8 and 9 (Hudi 1.x's table builder upper-cases the value; readers of every version
    /// upper-case it before parsing).
    pub fn property_value(self, table_version: u32) -> String {
        if table_version >= 8 {
            self.name().to_string()
        } else {
            self.name().to_ascii_lowercase()
        }
    }

    /// Parse either spelling.
    pub fn parse(s: &str) -> Option<CdcMode> {
        CdcMode::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(s))
    }
}

/// The suffix Hudi appends to a CDC log file's write token (`HoodieCDCUtils.CDC_LOGFILE_SUFFIX`):
/// `-cdc` for table version 6, `.cdc` for 8 and 9.
pub(super) fn log_suffix(table_version: u32) -> &'static str {
    if table_version >= 8 {
        ".cdc"
    } else {
        "-cdc"
    }
}

/// `HoodieCDCOperation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CdcOp {
    Insert,
    Update,
    Delete,
}

impl CdcOp {
    fn value(self) -> &'static str {
        match self {
            CdcOp::Insert => "i",
            CdcOp::Update => "u",
            CdcOp::Delete => "d",
        }
    }
}

fn nullable(s: Schema) -> Schema {
    Schema::Union(vec![Schema::Null, s])
}

fn null_default(name: &'static str, schema: Schema) -> Field {
    Field {
        name: name.into(),
        schema,
        default: Some(Json::Null),
    }
}

/// The schema of a CDC data block for `mode`; `image` is the table's record schema without
/// meta fields. The `CDC` record takes the image's namespace in Hudi 1.x (table versions 8
/// and 9) and none in 0.x.
pub(super) fn schema(mode: CdcMode, table_version: u32, image: &Schema) -> Schema {
    let string = || Schema::Union(vec![Schema::String, Schema::Null]);
    match mode {
        CdcMode::OpKeyOnly => Schema::Record(Record {
            name: "Record".into(),
            fields: vec![
                Field {
                    name: "op".into(),
                    schema: string(),
                    default: None,
                },
                Field {
                    name: "record_key".into(),
                    schema: string(),
                    default: None,
                },
            ],
        }),
        CdcMode::DataBefore | CdcMode::DataBeforeAfter => {
            let opt_string = || nullable(Schema::String);
            let mut fields = vec![null_default("op", opt_string())];
            if mode == CdcMode::DataBeforeAfter {
                fields.push(null_default("ts_ms", opt_string()));
                fields.push(null_default("before", nullable(image.clone())));
                fields.push(null_default("after", nullable(image.clone())));
            } else {
                fields.push(null_default("record_key", opt_string()));
                fields.push(null_default("before", nullable(image.clone())));
            }
            let namespace = match image {
                Schema::Record(r) if table_version >= 8 => {
                    r.name.rsplit_once('.').map(|(ns, _)| ns.to_string())
                }
                _ => None,
            };
            let name = match namespace {
                Some(ns) => format!("{ns}.CDC"),
                None => "CDC".to_string(),
            };
            Schema::Record(Record { name, fields })
        }
    }
}

/// One CDC record (as JSON for the Avro encoder): `before`/`after` are the images (JSON
/// records of the image schema) where the operation has them.
pub(super) fn record(
    mode: CdcMode,
    op: CdcOp,
    key: &str,
    instant: &str,
    before: Option<Json>,
    after: Option<Json>,
) -> Json {
    match mode {
        CdcMode::OpKeyOnly => json!({"op": op.value(), "record_key": key}),
        CdcMode::DataBefore => json!({"op": op.value(), "record_key": key,
                                      "before": before.unwrap_or(Json::Null)}),
        CdcMode::DataBeforeAfter => json!({"op": op.value(), "ts_ms": instant,
                                           "before": before.unwrap_or(Json::Null),
                                           "after": after.unwrap_or(Json::Null)}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn property_spelling_and_parse() {
        assert_eq!(CdcMode::OpKeyOnly.property_value(6), "op_key_only");
        assert_eq!(
            CdcMode::DataBeforeAfter.property_value(9),
            "DATA_BEFORE_AFTER"
        );
        for m in CdcMode::ALL {
            for v in [6, 8, 9] {
                assert_eq!(CdcMode::parse(&m.property_value(v)), Some(m));
            }
        }
        assert_eq!(CdcMode::parse("cdc_op_key"), None);
    }

    #[test]
    fn schemas_parse_with_apache_avro() {
        let image = super::super::parquet::data_schema("t", false, &[], &["city".to_string()]);
        for m in CdcMode::ALL {
            for v in [6, 9] {
                let s = schema(m, v, &image);
                let parsed = apache_avro::Schema::parse_str(&s.to_text())
                    .unwrap_or_else(|e| panic!("{m:?} v{v}: {e}"));
                let apache_avro::Schema::Record(r) = parsed else {
                    panic!("{m:?}: not a record");
                };
                let names: Vec<&str> = r.fields.iter().map(|f| f.name.as_str()).collect();
                let expected: &[&str] = match m {
                    CdcMode::OpKeyOnly => &["op", "record_key"],
                    CdcMode::DataBefore => &["op", "record_key", "before"],
                    CdcMode::DataBeforeAfter => &["op", "ts_ms", "before", "after"],
                };
                assert_eq!(names, expected);
                let full = r.name.fullname(None);
                match (m, v) {
                    (CdcMode::OpKeyOnly, _) => assert_eq!(full, "Record"),
                    (_, 6) => assert_eq!(full, "CDC"),
                    _ => assert_eq!(full, "hoodie.t.CDC"),
                }
            }
        }
    }
}
