//! Instant metadata (SEMANTICS.md §1.9): the bytes of a timeline file → JSON (0.x commit
//! metadata is JSON; every Hudi 1.x file and every plan is an Avro object container file), and
//! the few facts the views need from it.
//!
//! - `avro`: a general, bounded decoder of Avro containers and datums (untrusted input), and
//!   the bounded cursor over Avro's binary encoding every Avro reader of hudifs uses
//!   ([`AvroCursor`]);
//! - `facts`: write stats, replaced groups, plans, clean bounds, rollbacks.
//!
//! Reading instant files through the storage is `timeline::InstantMetadata`'s business.

mod avro;
mod facts;

use serde_json::Value;

pub use avro::{avro_to_json, AvroCursor, AvroDecoder, AvroError};
pub use facts::{
    clean_earliest_to_retain, compaction_plan_groups, is_clustering_request, rollback_files,
    CommitMetadata, WriteStat,
};

/// Why an instant file's content could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Neither JSON nor an Avro object container.
    #[error("not JSON and not Avro: {0}")]
    NotJsonNorAvro(String),
    #[error("{0}")]
    Avro(#[from] AvroError),
    /// It decodes, but is not shaped like the metadata it should be.
    #[error("{0}")]
    Shape(String),
    /// The storage could not read it.
    #[error("cannot read: {0}")]
    Unreadable(String),
    /// The instant has no file of the state asked for.
    #[error("no {0} file")]
    Missing(&'static str),
}

/// An instant file that could not be used: which file, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {error}")]
pub struct MetadataError {
    /// The file as the storage names it.
    pub file: String,
    pub error: DecodeError,
}

/// Decode an instant file's bytes to JSON. An empty file is a legal empty instant and decodes to
/// an empty object.
pub fn decode(bytes: &[u8]) -> Result<Value, DecodeError> {
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Value::Object(Default::default()));
    }
    if bytes.starts_with(b"Obj\x01") {
        return Ok(avro::decode_avro(bytes)?);
    }
    serde_json::from_slice(bytes).map_err(|e| DecodeError::NotJsonNorAvro(e.to_string()))
}
