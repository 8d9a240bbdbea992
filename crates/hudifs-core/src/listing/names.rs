//! The base-file and log-file name grammars (SEMANTICS.md §1.5). Parsing and formatting live
//! side by side so that the table generator writes exactly the names the reader accepts.

use std::ops::Range;

/// A base file name: `<fileId>_<writeToken>_<instant>.<ext>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseName {
    pub file_id: String,
    pub write_token: String,
    pub instant: String,
    pub ext: String,
}

/// A log file name: `.<fileId>_<instant>.log.<version>_<writeToken>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogName {
    pub file_id: String,
    pub instant: String,
    pub version: u32,
    pub write_token: String,
}

/// What a name in a partition directory is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DataName {
    Base(BaseName),
    Log(LogName),
}

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A write token is `<task partition>-<stage>-<attempt>`: three dash-separated numbers.
fn is_write_token(s: &str) -> bool {
    let mut parts = s.split('-');
    let three = (parts.next(), parts.next(), parts.next(), parts.next());
    matches!(three, (Some(a), Some(b), Some(c), None) if is_digits(a) && is_digits(b) && is_digits(c))
}

/// Where the parts of a data file name lie in it (byte ranges of the name), as parsed without
/// copying: a listing of a million names parses each once and keeps the ranges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameSpans {
    pub file_id: Range<usize>,
    pub instant: Range<usize>,
    /// Empty (at the end of the name) for a log name without a write token.
    pub write_token: Range<usize>,
    /// Whether this is a log file name (else a base file name).
    pub log: bool,
    /// The log version as written; 0 for a base file.
    pub version: u32,
    /// The extension of a base file; empty for a log.
    pub ext: Range<usize>,
}

/// The byte range that `part`, a sub-slice of `name`, takes in it.
fn span(name: &str, part: &str) -> Range<usize> {
    let at = part.as_ptr() as usize - name.as_ptr() as usize;
    at..at + part.len()
}

/// The parts of a base file name `<fileId>_<writeToken>_<instant>.<ext>`; `exts` are the
/// extensions the table accepts.
pub fn base_name_spans(name: &str, exts: &[String]) -> Option<NameSpans> {
    if name.starts_with('.') {
        return None;
    }
    let (stem, ext) = name.rsplit_once('.')?;
    if !exts.iter().any(|e| e == ext) {
        return None;
    }
    let mut parts = stem.split('_');
    let (file_id, token, instant) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || file_id.is_empty() || !is_write_token(token) || !is_digits(instant)
    {
        return None;
    }
    Some(NameSpans {
        file_id: span(name, file_id),
        instant: span(name, instant),
        write_token: span(name, token),
        log: false,
        version: 0,
        ext: span(name, ext),
    })
}

/// The parts of a log file name `.<fileId>_<instant>.log.<version>_<writeToken>`. CDC logs (a
/// suffix after the write token) and archive logs are not data logs and give `None`
/// (SEMANTICS.md §1.5).
pub fn log_name_spans(name: &str) -> Option<NameSpans> {
    let rest = name.strip_prefix('.')?;
    let (head, tail) = rest.split_once(".log.")?;
    let (file_id, instant) = head.rsplit_once('_')?;
    if file_id.is_empty() || file_id.contains('_') || !is_digits(instant) {
        return None;
    }
    let (version, token) = match tail.split_once('_') {
        Some((v, t)) => (v, t),
        None => (tail, &tail[tail.len()..]),
    };
    if !is_digits(version) || (!token.is_empty() && !is_write_token(token)) {
        return None;
    }
    Some(NameSpans {
        file_id: span(name, file_id),
        instant: span(name, instant),
        write_token: span(name, token),
        log: true,
        version: version.parse().ok()?,
        ext: name.len()..name.len(),
    })
}

/// The parts of a data file name, base or log (None: not a data file name of this table).
pub fn data_name_spans(name: &str, exts: &[String]) -> Option<NameSpans> {
    if name.starts_with(".hoodie_partition_metadata") || name.ends_with(".crc") {
        return None;
    }
    base_name_spans(name, exts).or_else(|| log_name_spans(name))
}

/// Parse a base file name; `exts` are the extensions the table accepts.
pub fn parse_base_name(name: &str, exts: &[String]) -> Option<BaseName> {
    let s = base_name_spans(name, exts)?;
    Some(BaseName {
        file_id: name[s.file_id].to_string(),
        write_token: name[s.write_token].to_string(),
        instant: name[s.instant].to_string(),
        ext: name[s.ext].to_string(),
    })
}

/// Parse a log file name. CDC logs (a suffix after the write token) and archive logs are not
/// data logs and give `None` (SEMANTICS.md §1.5).
pub fn parse_log_name(name: &str) -> Option<LogName> {
    let s = log_name_spans(name)?;
    Some(LogName {
        file_id: name[s.file_id].to_string(),
        instant: name[s.instant].to_string(),
        version: s.version,
        write_token: name[s.write_token].to_string(),
    })
}

/// Classify a name found in a partition directory.
pub fn parse_data_name(name: &str, exts: &[String]) -> Option<DataName> {
    if name.starts_with(".hoodie_partition_metadata") || name.ends_with(".crc") {
        return None;
    }
    if let Some(b) = parse_base_name(name, exts) {
        return Some(DataName::Base(b));
    }
    parse_log_name(name).map(DataName::Log)
}

/// Format a base file name.
pub fn base_file_name(file_id: &str, write_token: &str, instant: &str, ext: &str) -> String {
    format!("{file_id}_{write_token}_{instant}.{ext}")
}

/// Format a log file name.
pub fn log_file_name(file_id: &str, instant: &str, version: u32, write_token: &str) -> String {
    format!(".{file_id}_{instant}.log.{version}_{write_token}")
}

/// Name of the partition metafile that marks a directory as a partition.
pub const PARTITION_METAFILE: &str = ".hoodie_partition_metadata";
