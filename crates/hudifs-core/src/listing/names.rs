//! The base-file and log-file name grammars (SEMANTICS.md §1.5). Parsing and formatting live
//! side by side so that the table generator writes exactly the names the reader accepts.

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
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 3 && parts.iter().all(|p| is_digits(p))
}

/// Parse a base file name; `exts` are the extensions the table accepts.
pub fn parse_base_name(name: &str, exts: &[String]) -> Option<BaseName> {
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
    Some(BaseName {
        file_id: file_id.to_string(),
        write_token: token.to_string(),
        instant: instant.to_string(),
        ext: ext.to_string(),
    })
}

/// Parse a log file name. CDC logs (a suffix after the write token) and archive logs are not
/// data logs and give `None` (SEMANTICS.md §1.5).
pub fn parse_log_name(name: &str) -> Option<LogName> {
    let rest = name.strip_prefix('.')?;
    let (head, tail) = rest.split_once(".log.")?;
    let (file_id, instant) = head.rsplit_once('_')?;
    if file_id.is_empty() || file_id.contains('_') || !is_digits(instant) {
        return None;
    }
    let (version, token) = match tail.split_once('_') {
        Some((v, t)) => (v, t),
        None => (tail, ""),
    };
    if !is_digits(version) || (!token.is_empty() && !is_write_token(token)) {
        return None;
    }
    Some(LogName {
        file_id: file_id.to_string(),
        instant: instant.to_string(),
        version: version.parse().ok()?,
        write_token: token.to_string(),
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
