//! Time spellings: every way a user may name a point in time in a path (`as_of/<ts>`, each side
//! of `incremental/<t1>..<t2>`) or on the command line, and the one canonical form hudifs works
//! with, a 17-digit instant string `yyyyMMddHHmmssSSS`.
//!
//! Why this needs care (SEMANTICS.md §4):
//!
//! - Hudi instants are *wall-clock* strings in the table's timeline time zone
//!   (`hoodie.table.timeline.timezone`, Java default `LOCAL` = the writer's zone), and they are
//!   compared as plain strings. Every input is therefore normalised once, here, to 17 digits; the
//!   rest of hudifs only compares equal-length strings.
//! - Wall-clock inputs (`2024-04-18 17:35:51`, `20240418173551906`, `2024-04-18`) are already in
//!   the timeline zone: they are validated as real calendar dates and times, never converted.
//!   They are *not* checked against the zone's daylight-saving gaps: a wall-clock string the zone
//!   skipped is still a well-formed instant string.
//! - Absolute inputs (epoch seconds or milliseconds, or a date-time with `Z`/`±HH:MM`) name one
//!   moment; they are converted to the timeline zone's wall clock, which is always unique.
//!   The v6 fixtures were written on US Central wall clock, so `2024-04-18T22:35:51Z` is instant
//!   `20240418173551000` there and not `20240418223551000` (SEMANTICS.md §4.3).
//! - Spark parity: a wall-clock time without a fraction (`2024-04-18 17:35:51`) includes the
//!   whole second, i.e. it becomes `…173551999`; a 14-digit instant gets `000` (hudi-rs parity).
//!
//! The module holds [`TimelineZone`] (the zone instants are written in, and its parser for the
//! `--timezone` option and the table property), [`TimeSpec`] with [`parse_time`] (every accepted
//! spelling to its canonical form), [`instant_from_epoch_millis`] (stamping instants), and
//! [`minus_one_ms`]/[`plus_one_ms`] (neighbouring instants in string order, e.g. for the
//! `p − 1 ms` end of a BLOCKed incremental window).

use std::fmt;
use std::str::FromStr;

use chrono::{
    DateTime, Datelike, FixedOffset, Local, NaiveDate, NaiveDateTime, TimeDelta, Timelike, Utc,
};

/// Length of a canonical instant string `yyyyMMddHHmmssSSS`.
pub const INSTANT_LEN: usize = 17;

/// Longest time spelling or zone name accepted, in bytes; anything longer is rejected unread.
pub const MAX_INPUT_LEN: usize = 64;

/// The accepted time spellings, as listed in every [`TimeError::InvalidTime`] message.
pub const ACCEPTED_SPELLINGS: &str = "20240418173551906, 20240418173551, \
    2024-04-18 17:35:51[.906], 2024-04-18T17:35:51[.906][Z|+02:00], 2024-04-18, \
    epoch seconds (10 digits) or milliseconds (13 digits), latest, earliest";

/// The accepted time-zone spellings, as listed in every [`TimeError::InvalidZone`] message.
pub const ACCEPTED_ZONES: &str =
    "UTC (or Z), LOCAL, an offset such as +05:30, -0600 or +05, an IANA name such as America/Chicago";

/// The time zone in which instant strings (17-digit wall-clock `yyyyMMddHHmmssSSS`) are written.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum TimelineZone {
    /// Coordinated Universal Time; the default when the table does not say (SEMANTICS.md §4.3).
    #[default]
    Utc,
    /// The zone of the machine hudifs runs on (`chrono::Local`), for `LOCAL` tables.
    Local,
    /// An IANA zone such as `America/Chicago`, daylight-saving rules included.
    Named(chrono_tz::Tz),
    /// A constant offset from UTC such as `+05:30`.
    Fixed(FixedOffset),
}

impl TimelineZone {
    /// Parse a `--timezone` option or the `hoodie.table.timeline.timezone` property value:
    /// `UTC`/`utc`/`Z` → [`TimelineZone::Utc`], `LOCAL` (any case) → [`TimelineZone::Local`],
    /// `+05:30`/`-0600`/`+05` → [`TimelineZone::Fixed`], IANA names such as `America/Chicago`
    /// (exact case) → [`TimelineZone::Named`].
    ///
    /// Surrounding ASCII whitespace is ignored, since the value comes from a configuration file
    /// or a command line, not from a path.
    pub fn parse(s: &str) -> Result<TimelineZone, TimeError> {
        let err = |reason: String| TimeError::InvalidZone {
            input: shown(s),
            reason,
        };
        let t = s.trim_matches(|c: char| c.is_ascii_whitespace());
        if t.is_empty() {
            return Err(err("it is empty".to_string()));
        }
        if t.len() > MAX_INPUT_LEN {
            return Err(err(format!(
                "it is longer than {MAX_INPUT_LEN} bytes ({} bytes)",
                t.len()
            )));
        }
        if t.eq_ignore_ascii_case("utc") || t.eq_ignore_ascii_case("z") {
            return Ok(TimelineZone::Utc);
        }
        if t.eq_ignore_ascii_case("local") {
            return Ok(TimelineZone::Local);
        }
        if t.starts_with(['+', '-']) {
            return parse_offset_seconds(t.as_bytes(), true)
                .and_then(FixedOffset::east_opt)
                .map(TimelineZone::Fixed)
                .ok_or_else(|| {
                    err(
                        "an offset must be ±HH:MM, ±HHMM or ±HH with hours 00-23 and minutes 00-59"
                            .to_string(),
                    )
                });
        }
        chrono_tz::Tz::from_str(t)
            .map(TimelineZone::Named)
            .map_err(|_| {
                err("it is not a known IANA time zone name (names are case-sensitive)".to_string())
            })
    }

    /// The wall clock of the moment `utc` in this zone.
    fn wall_clock(&self, utc: &DateTime<Utc>) -> NaiveDateTime {
        match self {
            TimelineZone::Utc => utc.naive_utc(),
            TimelineZone::Local => utc.with_timezone(&Local).naive_local(),
            TimelineZone::Named(tz) => utc.with_timezone(tz).naive_local(),
            TimelineZone::Fixed(offset) => utc.with_timezone(offset).naive_local(),
        }
    }
}

impl fmt::Display for TimelineZone {
    /// `UTC`, `LOCAL`, the IANA name, or the offset as `±HH:MM`; [`TimelineZone::parse`] reads
    /// each back to an equal value (for offsets: whole minutes under 24 hours).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimelineZone::Utc => f.write_str("UTC"),
            TimelineZone::Local => f.write_str("LOCAL"),
            TimelineZone::Named(tz) => f.write_str(tz.name()),
            TimelineZone::Fixed(offset) => write!(f, "{offset}"),
        }
    }
}

/// What a path component / CLI argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeSpec {
    /// A canonical instant: exactly 17 ASCII digits `yyyyMMddHHmmssSSS`, a valid date and time,
    /// wall clock in the timeline zone.
    Instant(String),
    /// The keyword `earliest`: the start of the timeline, to be resolved by the caller.
    Earliest,
    /// The keyword `latest`: the latest completed instant, to be resolved by the caller.
    Latest,
}

/// Why a time spelling, a zone or an epoch value was refused. Every message names the value.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum TimeError {
    /// A time spelling given by a user (path component or CLI argument) was not accepted.
    #[error("'{input}' is not a valid time: {reason}; accepted: {accepted}", accepted = ACCEPTED_SPELLINGS)]
    InvalidTime {
        /// The input as given, with control and non-ASCII characters escaped and cut at 64 characters.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A time-zone spelling (`--timezone` or `hoodie.table.timeline.timezone`) was not accepted.
    #[error("'{input}' is not a valid time zone: {reason}; accepted: {accepted}", accepted = ACCEPTED_ZONES)]
    InvalidZone {
        /// The input as given, escaped and cut like the input of [`TimeError::InvalidTime`].
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An epoch value whose wall clock in the zone has no 17-digit form (year outside 0000-9999).
    #[error(
        "epoch milliseconds {millis} fall outside the years 0000 to 9999 in time zone {zone}, \
         so they have no 17-digit instant"
    )]
    EpochOutOfRange {
        /// The epoch milliseconds given.
        millis: i64,
        /// The zone it was converted to, as [`TimelineZone`]'s `Display` writes it.
        zone: String,
    },
}

/// Parse one time spelling into its canonical form (SEMANTICS.md §4.1):
///
/// - 17 digits: returned as is after checking it is a real date and time (month 01-12, a day of
///   that month, hour < 24, minute < 60, second < 60); `19700101000000000` is accepted. Hudi's
///   special values such as `00000000000000000` (§2.1) are not dates and are refused.
/// - 14 digits: validated likewise, `000` appended (hudi-rs parity).
/// - `yyyy-MM-dd HH:mm:ss` or `yyyy-MM-ddTHH:mm:ss`: wall clock in the timeline zone; `999`
///   milliseconds appended (Spark parity: the whole second is included).
/// - the same with `.` and 1 to 9 fraction digits: that millisecond (digits past the third are
///   dropped, not rounded).
/// - any of these followed by `Z`, `±HH:MM` or `±HHMM`: an absolute moment, converted to the
///   timeline zone's wall clock. Without a fraction it is the start of that second (`.000`): the
///   input names one exact moment, and the `999` rule exists only for wall-clock strings, whose
///   second is taken as a whole.
/// - `yyyy-MM-dd`: `yyyyMMdd000000000`.
/// - 10 digits: epoch seconds, 13 digits: epoch milliseconds, converted to the timeline zone's
///   wall clock. Any other all-digit length is refused as ambiguous.
/// - `latest` / `earliest` in any case: [`TimeSpec::Latest`] / [`TimeSpec::Earliest`].
///
/// `T` and `Z` may also be written `t` and `z` (RFC 3339 allows it). Nothing is trimmed: spaces
/// around a spelling are an error, a single space between date and time is part of the spelling.
/// Empty input, input longer than [`MAX_INPUT_LEN`] bytes, non-ASCII or control characters, `/`
/// and anything else are refused with [`TimeError::InvalidTime`].
pub fn parse_time(input: &str, zone: &TimelineZone) -> Result<TimeSpec, TimeError> {
    parse_time_reason(input, zone).map_err(|reason| TimeError::InvalidTime {
        input: shown(input),
        reason,
    })
}

/// Convert a UTC epoch-milliseconds value to the 17-digit instant of its wall clock in `zone`.
///
/// Fails with [`TimeError::EpochOutOfRange`] when that wall clock is outside years 0000-9999.
pub fn instant_from_epoch_millis(ms: i64, zone: &TimelineZone) -> Result<String, TimeError> {
    let out_of_range = || TimeError::EpochOutOfRange {
        millis: ms,
        zone: zone.to_string(),
    };
    let utc = DateTime::<Utc>::from_timestamp_millis(ms).ok_or_else(out_of_range)?;
    // Zone offsets are under a day, so the wall clock of a moment in years -1..=10000 cannot
    // overflow chrono's range; checking first keeps `naive_local` from panicking at the extremes.
    if !(-1..=10_000).contains(&utc.year()) {
        return Err(out_of_range());
    }
    format_instant(&zone.wall_clock(&utc)).ok_or_else(out_of_range)
}

/// The 17-digit instant one millisecond earlier, e.g. `20240707001301554` → `20240707001301553`
/// and `20240101000000000` → `20231231235959999`. This is calendar arithmetic on the wall clock
/// (no zone involved), i.e. the previous valid instant in string order.
///
/// `None` if `instant` is not a valid 17-digit instant, or for `00000101000000000`.
pub fn minus_one_ms(instant: &str) -> Option<String> {
    step_ms(instant, -1)
}

/// The 17-digit instant one millisecond later, e.g. `20231231235959999` → `20240101000000000`;
/// the next valid instant in string order.
///
/// `None` if `instant` is not a valid 17-digit instant, or for `99991231235959999`.
pub fn plus_one_ms(instant: &str) -> Option<String> {
    step_ms(instant, 1)
}

/// Whether `s` is a canonical instant: exactly 17 ASCII digits forming a real date and time.
pub fn is_valid_instant(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == INSTANT_LEN && b.iter().all(u8::is_ascii_digit) && instant_datetime(b).is_ok()
}

fn step_ms(instant: &str, delta: i64) -> Option<String> {
    let b = instant.as_bytes();
    if b.len() != INSTANT_LEN || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let dt = instant_datetime(b).ok()?;
    let next = dt.checked_add_signed(TimeDelta::try_milliseconds(delta)?)?;
    format_instant(&next)
}

/// [`parse_time`] with the reason for a refusal as a plain string.
fn parse_time_reason(input: &str, zone: &TimelineZone) -> Result<TimeSpec, String> {
    let b = input.as_bytes();
    if b.is_empty() {
        return Err("it is empty".to_string());
    }
    if b.len() > MAX_INPUT_LEN {
        return Err(format!(
            "it is longer than {MAX_INPUT_LEN} bytes ({} bytes)",
            b.len()
        ));
    }
    if !input.is_ascii() {
        return Err("it contains a non-ASCII character".to_string());
    }
    if let Some(c) = b.iter().find(|c| c.is_ascii_control()) {
        return Err(format!("it contains the control character 0x{c:02x}"));
    }
    if b.contains(&b'/') {
        return Err("it contains '/'".to_string());
    }
    if b.first() == Some(&b' ') || b.last() == Some(&b' ') {
        return Err("it has a leading or trailing space".to_string());
    }
    if input.eq_ignore_ascii_case("latest") {
        return Ok(TimeSpec::Latest);
    }
    if input.eq_ignore_ascii_case("earliest") {
        return Ok(TimeSpec::Earliest);
    }
    if b.iter().all(u8::is_ascii_digit) {
        return parse_all_digits(input, zone).map(TimeSpec::Instant);
    }
    if b.get(4) == Some(&b'-') {
        return parse_calendar(b, zone).map(TimeSpec::Instant);
    }
    Err("it is not one of the accepted spellings".to_string())
}

/// An all-digit input: an instant (17 or 14 digits) or an epoch value (10 or 13 digits).
fn parse_all_digits(input: &str, zone: &TimelineZone) -> Result<String, String> {
    let b = input.as_bytes();
    let epoch = |scale: i64| -> Result<String, String> {
        // At most 13 digits: always fits an i64, and scaling by 1000 cannot overflow.
        let n: i64 = input
            .parse()
            .map_err(|_| "it is not a number".to_string())?;
        instant_from_epoch_millis(n.saturating_mul(scale), zone).map_err(|e| e.to_string())
    };
    match b.len() {
        17 => instant_datetime(b).map(|_| input.to_string()),
        14 => instant_datetime(b).map(|_| format!("{input}000")),
        10 => epoch(1000),
        13 => epoch(1),
        n => Err(format!(
            "a number of {n} digits is ambiguous: an instant has 17 (or 14) digits, \
             epoch seconds 10, epoch milliseconds 13"
        )),
    }
}

/// The moment a 14- or 17-digit instant stands for when its wall clock is read as UTC; `None`
/// for anything else (a suffixed metadata-table instant, a date before 1970).
pub fn instant_as_utc(instant: &str) -> Option<std::time::SystemTime> {
    let b = instant.as_bytes();
    if !(b.len() == 14 || b.len() == INSTANT_LEN) || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let ms = instant_datetime(b).ok()?.and_utc().timestamp_millis();
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).ok()?))
}

/// Validate a 14- or 17-digit instant (all bytes ASCII digits) and return its date and time.
fn instant_datetime(b: &[u8]) -> Result<NaiveDateTime, String> {
    let field = |from: usize, to: usize| b.get(from..to).and_then(digits).unwrap_or(u32::MAX);
    let milli = if b.len() == INSTANT_LEN {
        field(14, 17)
    } else {
        0
    };
    civil(
        field(0, 4),
        field(4, 6),
        field(6, 8),
        field(8, 10),
        field(10, 12),
        field(12, 14),
        milli,
    )
}

/// A `yyyy-MM-dd…` spelling (the caller saw a `-` after four bytes).
fn parse_calendar(b: &[u8], zone: &TimelineZone) -> Result<String, String> {
    let bad_date = || "the date must be yyyy-MM-dd".to_string();
    if b.get(7) != Some(&b'-') {
        return Err(bad_date());
    }
    let year = b.get(0..4).and_then(digits).ok_or_else(bad_date)?;
    let month = b.get(5..7).and_then(digits).ok_or_else(bad_date)?;
    let day = b.get(8..10).and_then(digits).ok_or_else(bad_date)?;
    let Some(&sep) = b.get(10) else {
        let date = civil(year, month, day, 0, 0, 0, 0)?;
        return format_instant(&date).ok_or_else(bad_date);
    };
    if !matches!(sep, b' ' | b'T' | b't') {
        return Err("the date must be followed by nothing, ' ' or 'T'".to_string());
    }
    let bad_time = || "the time must be HH:mm:ss (seconds are required)".to_string();
    let time = b.get(11..19).ok_or_else(bad_time)?;
    if time[2] != b':' || time[5] != b':' {
        return Err(bad_time());
    }
    let hour = digits(&time[0..2]).ok_or_else(bad_time)?;
    let minute = digits(&time[3..5]).ok_or_else(bad_time)?;
    let second = digits(&time[6..8]).ok_or_else(bad_time)?;

    let mut rest = &b[19..];
    let mut milli = None;
    if let Some((b'.', after_dot)) = rest.split_first() {
        let n = after_dot.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 || n > 9 {
            return Err("a '.' must be followed by 1 to 9 fraction digits".to_string());
        }
        // Fraction digits are tenths, hundredths, …: pad to three digits, drop the rest.
        let ms = (0..3).fold(0u32, |acc, i| {
            let d = after_dot
                .get(i)
                .filter(|_| i < n)
                .map_or(0, |c| u32::from(c - b'0'));
            acc * 10 + d
        });
        milli = Some(ms);
        rest = &after_dot[n..];
    }
    let offset_seconds = match rest {
        [] => None,
        [b'Z' | b'z'] => Some(0),
        [b'+' | b'-', ..] => Some(parse_offset_seconds(rest, false).ok_or_else(|| {
            "the offset must be Z, ±HH:MM or ±HHMM with hours 00-23 and minutes 00-59".to_string()
        })?),
        _ => {
            return Err(
                "the time may only be followed by .fraction and then Z, ±HH:MM or ±HHMM"
                    .to_string(),
            )
        }
    };
    match offset_seconds {
        // Wall clock in the timeline zone: validated, not converted.
        None => {
            let wall = civil(year, month, day, hour, minute, second, milli.unwrap_or(999))?;
            format_instant(&wall).ok_or_else(bad_date)
        }
        // Absolute: the start of the named second unless a fraction says otherwise.
        Some(offset) => {
            let wall = civil(year, month, day, hour, minute, second, milli.unwrap_or(0))?;
            let utc_ms = wall
                .and_utc()
                .timestamp_millis()
                .saturating_sub(i64::from(offset) * 1000);
            instant_from_epoch_millis(utc_ms, zone)
                .map_err(|_| format!("in time zone {zone} it falls outside the years 0000 to 9999"))
        }
    }
}

/// Parse `±HH:MM` or `±HHMM` (or `±HH` when `allow_hours_only`) into seconds east of UTC.
/// Hours must be 00-23 and minutes 00-59.
fn parse_offset_seconds(b: &[u8], allow_hours_only: bool) -> Option<i32> {
    let (sign, rest) = match b.split_first()? {
        (b'+', rest) => (1, rest),
        (b'-', rest) => (-1, rest),
        _ => return None,
    };
    let (hh, mm) = match rest {
        [h1, h2, b':', m1, m2] | [h1, h2, m1, m2] => ([*h1, *h2], [*m1, *m2]),
        [h1, h2] if allow_hours_only => ([*h1, *h2], *b"00"),
        _ => return None,
    };
    let hours = digits(&hh)?;
    let minutes = digits(&mm)?;
    if hours > 23 || minutes > 59 {
        return None;
    }
    i32::try_from(hours * 3600 + minutes * 60)
        .ok()
        .map(|s| sign * s)
}

/// The value of a short run of ASCII digits (at most 9); `None` if empty, too long or not digits.
fn digits(b: &[u8]) -> Option<u32> {
    if b.is_empty() || b.len() > 9 || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |acc, c| acc * 10 + u32::from(c - b'0')))
}

/// Build a date and time from fields, saying which field is out of range.
fn civil(
    year: u32,
    month: u32,
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    milli: u32,
) -> Result<NaiveDateTime, String> {
    if year > 9999 {
        return Err(format!("year {year} out of range"));
    }
    if !(1..=12).contains(&month) {
        return Err(format!("month {month:02} out of range"));
    }
    let date = i32::try_from(year)
        .ok()
        .and_then(|y| NaiveDate::from_ymd_opt(y, month, day))
        .ok_or_else(|| format!("day {day:02} out of range for {year:04}-{month:02}"))?;
    if hour > 23 {
        return Err(format!("hour {hour:02} out of range"));
    }
    if minute > 59 {
        return Err(format!("minute {minute:02} out of range"));
    }
    if second > 59 {
        return Err(format!("second {second:02} out of range"));
    }
    date.and_hms_milli_opt(hour, minute, second, milli)
        .ok_or_else(|| format!("millisecond {milli:03} out of range"))
}

/// The 17-digit form of a wall clock, or `None` outside years 0000-9999.
fn format_instant(dt: &NaiveDateTime) -> Option<String> {
    let year = dt.year();
    if !(0..=9999).contains(&year) {
        return None;
    }
    // `min` guards against a leap-second nanosecond value, which no path here produces.
    let milli = (dt.nanosecond() / 1_000_000).min(999);
    Some(format!(
        "{year:04}{:02}{:02}{:02}{:02}{:02}{milli:03}",
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    ))
}

/// An input made safe to print in an error or a log line: control and non-ASCII characters
/// escaped, cut after 64 characters.
fn shown(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(MAX_INPUT_LEN)
        .flat_map(char::escape_default)
        .collect();
    if s.chars().nth(MAX_INPUT_LEN).is_some() {
        out.push_str(&format!("… ({} bytes)", s.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn utc() -> TimelineZone {
        TimelineZone::Utc
    }

    fn chicago() -> TimelineZone {
        TimelineZone::Named(chrono_tz::America::Chicago)
    }

    fn fixed(seconds_east: i32) -> TimelineZone {
        TimelineZone::Fixed(FixedOffset::east_opt(seconds_east).expect("test offset"))
    }

    fn instant(s: &str) -> TimeSpec {
        TimeSpec::Instant(s.to_string())
    }

    /// The instant `input` parses to, panicking with the error otherwise.
    fn canon(input: &str, zone: &TimelineZone) -> String {
        match parse_time(input, zone) {
            Ok(TimeSpec::Instant(s)) => s,
            other => panic!("{input:?} in {zone}: {other:?}"),
        }
    }

    /// The reason `input` is refused, panicking if it is accepted.
    fn reason(input: &str) -> String {
        match parse_time(input, &utc()) {
            Err(TimeError::InvalidTime { reason, .. }) => reason,
            other => panic!("{input:?} should be refused, got {other:?}"),
        }
    }

    // ---- 17 and 14 digits ----

    #[test]
    fn test_parse_time_17_digits_identity() {
        for s in [
            "20240418173551906",
            "19700101000000000",
            "20240229235959999",
            "00000101000000000",
            "99991231235959999",
        ] {
            assert_eq!(parse_time(s, &utc()), Ok(instant(s)));
            assert_eq!(parse_time(s, &chicago()), Ok(instant(s)), "not converted");
        }
    }

    #[test]
    fn test_parse_time_14_digits_appends_000() {
        assert_eq!(canon("20240418173551", &utc()), "20240418173551000");
        assert_eq!(canon("20240418173551", &chicago()), "20240418173551000");
        assert_eq!(canon("19700101000000", &utc()), "19700101000000000");
    }

    #[test]
    fn test_parse_time_invalid_digit_instants_refused() {
        assert!(reason("99999999999999999").contains("month 99 out of range"));
        assert!(reason("20241301000000000").contains("month 13"));
        assert!(reason("20240001000000000").contains("month 00"));
        assert!(reason("20240230000000000").contains("day 30 out of range for 2024-02"));
        assert!(reason("20230229000000000").contains("day 29 out of range for 2023-02"));
        assert!(reason("20240400000000000").contains("day 00"));
        assert!(reason("20240431000000000").contains("day 31"));
        assert!(reason("20240418240000000").contains("hour 24"));
        assert!(reason("20240418236000000").contains("minute 60"));
        assert!(reason("20240418235960000").contains("second 60"));
        assert!(reason("20240418235960").contains("second 60"));
        // Hudi's special values (§2.1) are not user inputs.
        assert!(reason("00000000000000000").contains("month 00"));
        assert!(reason("00000000000001").contains("month 00"));
    }

    // ---- wall clock ----

    #[test]
    fn test_parse_time_wall_clock_without_fraction_appends_999() {
        assert_eq!(canon("2024-04-18 17:35:51", &utc()), "20240418173551999");
        assert_eq!(canon("2024-04-18T17:35:51", &utc()), "20240418173551999");
        assert_eq!(canon("2024-04-18t17:35:51", &utc()), "20240418173551999");
    }

    #[test]
    fn test_parse_time_wall_clock_with_fraction_uses_milliseconds() {
        assert_eq!(
            canon("2024-04-18 17:35:51.906", &utc()),
            "20240418173551906"
        );
        assert_eq!(
            canon("2024-04-18T17:35:51.906", &utc()),
            "20240418173551906"
        );
        assert_eq!(
            canon("2024-04-18T17:35:51.000", &utc()),
            "20240418173551000"
        );
        assert_eq!(canon("2024-04-18T17:35:51.9", &utc()), "20240418173551900");
        assert_eq!(canon("2024-04-18T17:35:51.09", &utc()), "20240418173551090");
        assert_eq!(
            canon("2024-04-18T17:35:51.9069", &utc()),
            "20240418173551906"
        );
        assert_eq!(
            canon("2024-04-18T17:35:51.123456789", &utc()),
            "20240418173551123"
        );
    }

    #[test]
    fn test_parse_time_wall_clock_not_converted_in_any_zone() {
        for zone in [
            utc(),
            chicago(),
            fixed(5 * 3600 + 1800),
            TimelineZone::Local,
        ] {
            assert_eq!(canon("2024-04-18 17:35:51.906", &zone), "20240418173551906");
            assert_eq!(canon("2024-04-18 17:35:51", &zone), "20240418173551999");
        }
        // A wall clock Chicago skipped (spring forward) is still a well-formed instant string.
        assert_eq!(
            canon("2024-03-10 02:30:00", &chicago()),
            "20240310023000999"
        );
    }

    #[test]
    fn test_parse_time_date_only_midnight() {
        assert_eq!(canon("2024-04-18", &utc()), "20240418000000000");
        assert_eq!(canon("2024-04-18", &chicago()), "20240418000000000");
        assert_eq!(canon("2024-02-29", &utc()), "20240229000000000");
        assert!(reason("2023-02-29").contains("day 29 out of range for 2023-02"));
        assert!(reason("2024-02-30").contains("day 30 out of range for 2024-02"));
        assert!(reason("2024-13-01").contains("month 13 out of range"));
    }

    // ---- absolute times ----

    #[test]
    fn test_parse_time_zulu_in_chicago_is_central_wall_clock() {
        // SEMANTICS.md §4.3: the v6 fixtures' commit at 22:35:51 UTC is instant …173551 there.
        assert_eq!(
            canon("2024-04-18T22:35:51Z", &chicago()),
            "20240418173551000"
        );
        assert_eq!(
            canon("2024-04-18 22:35:51Z", &chicago()),
            "20240418173551000"
        );
        assert_eq!(
            canon("2024-04-18T22:35:51.906z", &chicago()),
            "20240418173551906"
        );
        assert_eq!(canon("2024-04-18T22:35:51Z", &utc()), "20240418223551000");
    }

    #[test]
    fn test_parse_time_offset_forms_convert_to_zone() {
        assert_eq!(
            canon("2024-04-18T17:35:51.906+02:00", &utc()),
            "20240418153551906"
        );
        assert_eq!(
            canon("2024-04-18T17:35:51.906+0200", &utc()),
            "20240418153551906"
        );
        assert_eq!(
            canon("2024-04-18T17:35:51-06:00", &utc()),
            "20240418233551000"
        );
        assert_eq!(
            canon("2024-04-18 17:35:51-0600", &utc()),
            "20240418233551000"
        );
        assert_eq!(
            canon("2024-04-18T17:35:51+00:00", &utc()),
            "20240418173551000"
        );
        assert_eq!(
            canon("2024-04-18T17:35:51-00:00", &utc()),
            "20240418173551000"
        );
        // Same offset as the zone: no change.
        assert_eq!(
            canon("2024-04-18T17:35:51.5+05:30", &fixed(19800)),
            "20240418173551500"
        );
        assert_eq!(
            canon("2024-04-18T22:35:51Z", &fixed(-5 * 3600)),
            "20240418173551000"
        );
        // Across midnight, month and year.
        assert_eq!(
            canon("2024-01-01T01:00:00+02:00", &utc()),
            "20231231230000000"
        );
        assert_eq!(
            canon("2023-12-31T23:30:00-01:00", &utc()),
            "20240101003000000"
        );
    }

    #[test]
    fn test_parse_time_chicago_daylight_saving_conversions() {
        // Winter: CST (-06:00).
        assert_eq!(
            canon("2024-01-15T12:00:00Z", &chicago()),
            "20240115060000000"
        );
        // Fall back: two moments, one wall clock.
        assert_eq!(
            canon("2024-11-03T06:30:00Z", &chicago()),
            "20241103013000000"
        );
        assert_eq!(
            canon("2024-11-03T07:30:00Z", &chicago()),
            "20241103013000000"
        );
        // Spring forward: 08:30Z is 03:30 CDT.
        assert_eq!(
            canon("2024-03-10T08:30:00Z", &chicago()),
            "20240310033000000"
        );
    }

    #[test]
    fn test_parse_time_local_zone_matches_chrono_local() {
        let expected = DateTime::<Utc>::from_timestamp_millis(1_713_479_751_906)
            .expect("in range")
            .with_timezone(&Local)
            .format("%Y%m%d%H%M%S%3f")
            .to_string();
        let local = TimelineZone::Local;
        assert_eq!(canon("1713479751906", &local), expected);
        assert_eq!(canon("2024-04-18T22:35:51.906Z", &local), expected);
    }

    #[test]
    fn test_parse_time_absolute_out_of_year_range_refused() {
        let r = reason("0000-01-01T00:00:00+01:00");
        assert!(r.contains("outside the years 0000 to 9999"), "{r}");
        let r = reason("9999-12-31T23:59:59-01:00");
        assert!(r.contains("outside the years 0000 to 9999"), "{r}");
        assert_eq!(
            canon("9999-12-31T23:59:59-01:00", &fixed(-3600)),
            "99991231235959000"
        );
    }

    // ---- epoch ----

    #[test]
    fn test_parse_time_epoch_seconds_and_millis() {
        assert_eq!(canon("1713479751", &utc()), "20240418223551000");
        assert_eq!(canon("1713479751906", &utc()), "20240418223551906");
        assert_eq!(canon("1713479751", &chicago()), "20240418173551000");
        assert_eq!(canon("1713479751906", &chicago()), "20240418173551906");
        assert_eq!(canon("1713479751906", &fixed(19800)), "20240419040551906");
        assert_eq!(canon("0000000000", &utc()), "19700101000000000");
        assert_eq!(canon("0000000000000", &fixed(-3600)), "19691231230000000");
        assert_eq!(canon("9999999999", &utc()), "22861120174639000");
    }

    #[test]
    fn test_parse_time_other_digit_counts_ambiguous() {
        for s in [
            "0",
            "000",
            "171347975",
            "17134797519",
            "171347975190",
            "17134797519060",
            "171347975190600",
            "1713479751906000",
            "171347975190600000",
        ] {
            if s.len() == 14 {
                continue; // 14 digits is an instant, covered elsewhere
            }
            let r = reason(s);
            assert!(r.contains("ambiguous"), "{s}: {r}");
            assert!(r.contains(&format!("{} digits", s.len())), "{s}: {r}");
        }
        assert!(reason("171347975190").contains("12 digits is ambiguous"));
    }

    // ---- keywords ----

    #[test]
    fn test_parse_time_keywords_any_case() {
        for s in ["latest", "LATEST", "Latest"] {
            assert_eq!(parse_time(s, &utc()), Ok(TimeSpec::Latest));
        }
        for s in ["earliest", "EARLIEST", "eArLiEsT"] {
            assert_eq!(parse_time(s, &chicago()), Ok(TimeSpec::Earliest));
        }
        assert!(parse_time("latest ", &utc()).is_err());
        assert!(parse_time("lates", &utc()).is_err());
        assert!(parse_time("now", &utc()).is_err());
    }

    // ---- rejects ----

    #[test]
    fn test_parse_time_malformed_refused_with_reason() {
        assert!(reason("").contains("empty"));
        assert!(reason("../x").contains("'/'"));
        assert!(reason("2024/04/18").contains("'/'"));
        assert!(reason("..").contains("not one of the accepted spellings"));
        assert!(reason("2024-04-18T17:35").contains("HH:mm:ss"));
        assert!(reason("2024-04-18T17:35Z").contains("HH:mm:ss"));
        assert!(reason("2024-04-18 17").contains("HH:mm:ss"));
        assert!(reason("2024-04-18T").contains("HH:mm:ss"));
        assert!(reason("2024-04-18T17-35-51").contains("HH:mm:ss"));
        assert!(reason("2024-04-18X17:35:51").contains("' ' or 'T'"));
        assert!(reason("2024-04-18  17:35:51").contains("HH:mm:ss"));
        assert!(reason("2024-4-18").contains("yyyy-MM-dd"));
        assert!(reason("2024-04-1").contains("yyyy-MM-dd"));
        assert!(reason("2024-").contains("yyyy-MM-dd"));
        assert!(reason("24-04-18T17:35:51").contains("not one of the accepted"));
        assert!(reason("2024-04-18T17:35:51.").contains("1 to 9 fraction digits"));
        assert!(reason("2024-04-18T17:35:51.1234567890").contains("1 to 9 fraction digits"));
        assert!(reason("2024-04-18T17:35:51.Z").contains("1 to 9 fraction digits"));
        assert!(reason("2024-04-18T17:35:51+2").contains("offset"));
        assert!(reason("2024-04-18T17:35:51+02").contains("offset"));
        assert!(reason("2024-04-18T17:35:51+24:00").contains("offset"));
        assert!(reason("2024-04-18T17:35:51+02:60").contains("offset"));
        assert!(reason("2024-04-18T17:35:51+02:00Z").contains("offset"));
        assert!(reason("2024-04-18T17:35:51ZZ").contains("may only be followed"));
        assert!(reason("2024-04-18T17:35:51 Z").contains("may only be followed"));
        assert!(reason("2024-04-18T24:00:00").contains("hour 24"));
        assert!(reason("2024-04-18T23:59:60Z").contains("second 60"));
        assert!(reason("2024-04-18T23:60:00Z").contains("minute 60"));
        assert!(reason("-1713479751").contains("not one of the accepted"));
        assert!(reason("+1713479751").contains("not one of the accepted"));
        assert!(reason("1713479751.5").contains("not one of the accepted"));
        assert!(reason("１７１３４７９７５１").contains("non-ASCII"));
        assert!(reason("2024-04-18T17:35:51.906Z\u{e9}").contains("non-ASCII"));
        assert!(reason("2024-04-18\n").contains("control character 0x0a"));
        assert!(reason("2024-04-18\0").contains("control character 0x00"));
        assert!(reason("\u{7f}").contains("control character 0x7f"));
        assert!(reason(" 2024-04-18").contains("leading or trailing space"));
        assert!(reason("2024-04-18 ").contains("leading or trailing space"));
        assert!(reason(" latest").contains("leading or trailing space"));
        assert!(reason("\t20240418173551906").contains("control character 0x09"));
    }

    #[test]
    fn test_parse_time_over_long_refused() {
        let long = format!("2024-04-18T17:35:51.{}", "1".repeat(60));
        assert!(reason(&long).contains("longer than 64 bytes"));
        let sixty_five = "1".repeat(65);
        assert!(reason(&sixty_five).contains("longer than 64 bytes (65 bytes)"));
        // 64 bytes is not too long by itself (it fails for another reason).
        assert!(reason(&"1".repeat(64)).contains("64 digits is ambiguous"));
    }

    #[test]
    fn test_time_error_display_names_input_and_spellings() {
        let err = parse_time("2024-13-01", &utc()).expect_err("month 13");
        assert_eq!(
            err.to_string(),
            "'2024-13-01' is not a valid time: month 13 out of range; accepted: \
             20240418173551906, 20240418173551, 2024-04-18 17:35:51[.906], \
             2024-04-18T17:35:51[.906][Z|+02:00], 2024-04-18, epoch seconds (10 digits) or \
             milliseconds (13 digits), latest, earliest"
        );
    }

    #[test]
    fn test_time_error_display_escapes_and_truncates_input() {
        let msg = parse_time("a\nb\u{e9}", &utc())
            .expect_err("control")
            .to_string();
        assert!(
            msg.starts_with("'a\\nb\\u{e9}' is not a valid time"),
            "{msg}"
        );
        let long = "x".repeat(200);
        let msg = parse_time(&long, &utc()).expect_err("long").to_string();
        assert!(
            msg.contains(&format!("'{}… (200 bytes)'", "x".repeat(64))),
            "{msg}"
        );
    }

    // ---- epoch conversion ----

    #[test]
    fn test_instant_from_epoch_millis_zones() {
        assert_eq!(
            instant_from_epoch_millis(0, &utc()).as_deref(),
            Ok("19700101000000000")
        );
        assert_eq!(
            instant_from_epoch_millis(-1, &utc()).as_deref(),
            Ok("19691231235959999")
        );
        let ms = 1_713_479_751_906;
        assert_eq!(
            instant_from_epoch_millis(ms, &utc()).as_deref(),
            Ok("20240418223551906")
        );
        assert_eq!(
            instant_from_epoch_millis(ms, &chicago()).as_deref(),
            Ok("20240418173551906")
        );
        assert_eq!(
            instant_from_epoch_millis(ms, &fixed(-6 * 3600)).as_deref(),
            Ok("20240418163551906")
        );
    }

    #[test]
    fn test_instant_from_epoch_millis_year_bounds() {
        let last = 253_402_300_799_999; // 9999-12-31T23:59:59.999Z
        assert_eq!(
            instant_from_epoch_millis(last, &utc()).as_deref(),
            Ok("99991231235959999")
        );
        assert_eq!(
            instant_from_epoch_millis(last + 1, &fixed(-3600)).as_deref(),
            Ok("99991231230000000")
        );
        let first = -62_167_219_200_000; // 0000-01-01T00:00:00Z
        assert_eq!(
            instant_from_epoch_millis(first, &utc()).as_deref(),
            Ok("00000101000000000")
        );
        for (ms, zone) in [
            (last + 1, utc()),
            (last, fixed(3600)),
            (first - 1, utc()),
            (first, fixed(-3600)),
            (i64::MAX, utc()),
            (i64::MIN, utc()),
            (i64::MAX, TimelineZone::Local),
            (i64::MIN, chicago()),
        ] {
            let err = instant_from_epoch_millis(ms, &zone).expect_err("out of range");
            assert_eq!(
                err,
                TimeError::EpochOutOfRange {
                    millis: ms,
                    zone: zone.to_string()
                }
            );
            assert!(err.to_string().contains(&ms.to_string()));
        }
    }

    // ---- neighbours ----

    #[test]
    fn test_minus_one_ms_borrows() {
        let cases = [
            ("20240707001301554", "20240707001301553"),
            ("20240707001301000", "20240707001300999"),
            ("20240707001300000", "20240707001259999"),
            ("20240707000000000", "20240706235959999"),
            ("20240701000000000", "20240630235959999"),
            ("20240301000000000", "20240229235959999"),
            ("20230301000000000", "20230228235959999"),
            ("20240101000000000", "20231231235959999"),
            ("19700101000000000", "19691231235959999"),
        ];
        for (from, to) in cases {
            assert_eq!(minus_one_ms(from).as_deref(), Some(to), "{from}");
            assert_eq!(plus_one_ms(to).as_deref(), Some(from), "{to}");
        }
    }

    #[test]
    fn test_plus_one_ms_carries() {
        assert_eq!(
            plus_one_ms("20240418173551906").as_deref(),
            Some("20240418173551907")
        );
        assert_eq!(
            plus_one_ms("20240228235959999").as_deref(),
            Some("20240229000000000")
        );
        assert_eq!(
            plus_one_ms("20230228235959999").as_deref(),
            Some("20230301000000000")
        );
        assert_eq!(
            plus_one_ms("20231231235959999").as_deref(),
            Some("20240101000000000")
        );
    }

    #[test]
    fn test_minus_plus_one_ms_invalid_or_edge_none() {
        assert_eq!(plus_one_ms("99991231235959999"), None);
        assert_eq!(minus_one_ms("00000101000000000"), None);
        for s in [
            "",
            "2024",
            "20240418173551",
            "202404181735519060",
            "20240230000000000",
            "99999999999999999",
            "00000000000000000",
            "2024041817355190a",
            "+2024041817355190",
            "2024-04-18 17:35:5",
            "2024041817355\u{e9}90",
        ] {
            assert_eq!(minus_one_ms(s), None, "{s:?}");
            assert_eq!(plus_one_ms(s), None, "{s:?}");
            assert!(!is_valid_instant(s), "{s:?}");
        }
    }

    // ---- zones ----

    #[test]
    fn test_timeline_zone_parse_spellings() {
        assert_eq!(TimelineZone::parse("UTC"), Ok(TimelineZone::Utc));
        assert_eq!(TimelineZone::parse("utc"), Ok(TimelineZone::Utc));
        assert_eq!(TimelineZone::parse("Z"), Ok(TimelineZone::Utc));
        assert_eq!(TimelineZone::parse(" UTC\n"), Ok(TimelineZone::Utc));
        assert_eq!(TimelineZone::parse("LOCAL"), Ok(TimelineZone::Local));
        assert_eq!(TimelineZone::parse("local"), Ok(TimelineZone::Local));
        assert_eq!(TimelineZone::parse("+05:30"), Ok(fixed(19800)));
        assert_eq!(TimelineZone::parse("-0600"), Ok(fixed(-21600)));
        assert_eq!(TimelineZone::parse("+05"), Ok(fixed(18000)));
        assert_eq!(TimelineZone::parse("-00:00"), Ok(fixed(0)));
        assert_eq!(TimelineZone::parse("America/Chicago"), Ok(chicago()));
        assert_eq!(
            TimelineZone::parse("Asia/Kolkata"),
            Ok(TimelineZone::Named(chrono_tz::Asia::Kolkata))
        );
        assert_eq!(TimelineZone::default(), TimelineZone::Utc);
    }

    #[test]
    fn test_timeline_zone_parse_refused() {
        for s in [
            "",
            "   ",
            "Mars/Olympus",
            "america/chicago",
            "05:30",
            "+24:00",
            "+05:60",
            "+5:30",
            "+05:3",
            "+0530x",
            "UTC+1",
            "../etc/passwd",
            "\u{e9}",
        ] {
            let err = TimelineZone::parse(s).expect_err(s);
            assert!(matches!(err, TimeError::InvalidZone { .. }), "{s:?}");
            assert!(err.to_string().contains("America/Chicago"), "{err}");
        }
        let err = TimelineZone::parse(&"A".repeat(65)).expect_err("long");
        assert!(err.to_string().contains("longer than 64 bytes"), "{err}");
        let err = TimelineZone::parse("Mars/Olympus").expect_err("unknown");
        assert!(err
            .to_string()
            .starts_with("'Mars/Olympus' is not a valid time zone"));
    }

    #[test]
    fn test_timeline_zone_display_parses_back() {
        for zone in [
            utc(),
            TimelineZone::Local,
            chicago(),
            fixed(19800),
            fixed(-21600),
            fixed(0),
        ] {
            assert_eq!(TimelineZone::parse(&zone.to_string()), Ok(zone.clone()));
        }
        assert_eq!(chicago().to_string(), "America/Chicago");
        assert_eq!(fixed(-21600).to_string(), "-06:00");
    }

    // ---- properties ----

    fn valid_instant() -> impl Strategy<Value = String> {
        (
            0u32..=9999,
            1u32..=12,
            1u32..=31,
            0u32..24,
            0u32..60,
            0u32..60,
            0u32..1000,
        )
            .prop_map(|(y, mo, d, h, mi, s, ms)| {
                // Clamp the day to the month's length so every case is valid.
                let date = (1..=d)
                    .rev()
                    .find_map(|d| NaiveDate::from_ymd_opt(y as i32, mo, d))
                    .expect("day 1 always exists");
                format!("{y:04}{mo:02}{:02}{h:02}{mi:02}{s:02}{ms:03}", date.day())
            })
    }

    fn any_zone() -> impl Strategy<Value = TimelineZone> {
        prop_oneof![
            Just(TimelineZone::Utc),
            Just(TimelineZone::Local),
            Just(TimelineZone::Named(chrono_tz::America::Chicago)),
            Just(TimelineZone::Named(chrono_tz::Australia::Lord_Howe)),
            (-86_399i32..86_400)
                .prop_map(|s| TimelineZone::Fixed(FixedOffset::east_opt(s).expect("in range"))),
        ]
    }

    proptest! {
        #[test]
        fn prop_valid_instant_neighbours_round_trip(x in valid_instant()) {
            prop_assert!(is_valid_instant(&x));
            if let Some(before) = minus_one_ms(&x) {
                prop_assert!(is_valid_instant(&before));
                prop_assert!(before < x);
                prop_assert_eq!(plus_one_ms(&before), Some(x.clone()));
            } else {
                prop_assert_eq!(x.as_str(), "00000101000000000");
            }
            if let Some(after) = plus_one_ms(&x) {
                prop_assert!(is_valid_instant(&after));
                prop_assert!(after > x);
                prop_assert_eq!(minus_one_ms(&after), Some(x.clone()));
            } else {
                prop_assert_eq!(x.as_str(), "99991231235959999");
            }
        }

        #[test]
        fn prop_parse_time_valid_instant_identity(x in valid_instant(), zone in any_zone()) {
            prop_assert_eq!(parse_time(&x, &zone), Ok(TimeSpec::Instant(x.clone())));
            // Its 14-digit prefix gets 000, its wall-clock spelling the same digits.
            let fourteen = &x[..14];
            prop_assert_eq!(
                parse_time(fourteen, &zone),
                Ok(TimeSpec::Instant(format!("{fourteen}000")))
            );
            let wall = format!(
                "{}-{}-{}T{}:{}:{}.{}",
                &x[0..4], &x[4..6], &x[6..8], &x[8..10], &x[10..12], &x[12..14], &x[14..17]
            );
            prop_assert_eq!(parse_time(&wall, &zone), Ok(TimeSpec::Instant(x.clone())));
        }

        #[test]
        fn prop_parse_time_arbitrary_strings_no_panic(s in any::<String>(), zone in any_zone()) {
            let _ = parse_time(&s, &zone);
            let _ = TimelineZone::parse(&s);
            let _ = minus_one_ms(&s);
            let _ = plus_one_ms(&s);
        }

        #[test]
        fn prop_parse_time_near_miss_strings_yield_valid_instants(
            s in "[0-9]{0,4}-?[0-9]{0,2}-?[0-9]{0,2}[ Tt]?[0-9:]{0,8}(\\.[0-9]{0,10})?[Zz+-]?[0-9:]{0,5}",
            zone in any_zone(),
        ) {
            if let Ok(TimeSpec::Instant(i)) = parse_time(&s, &zone) {
                prop_assert!(is_valid_instant(&i), "{:?} -> {:?}", s, i);
            }
            let _ = TimelineZone::parse(&s);
        }

        #[test]
        fn prop_parse_time_epoch_millis_matches_conversion(
            ms in 0i64..=9_999_999_999_999,
            zone in any_zone(),
        ) {
            let expected = instant_from_epoch_millis(ms, &zone).map(TimeSpec::Instant);
            prop_assert_eq!(parse_time(&format!("{ms:013}"), &zone), expected);
        }

        #[test]
        fn prop_parse_time_rfc3339_matches_epoch(
            ms in -62_100_000_000_000i64..253_300_000_000_000,
            offset_minutes in -1439i32..=1439,
            use_z in any::<bool>(),
            zone in any_zone(),
        ) {
            // chrono writes the moment as RFC 3339 with some offset; parsing it must land on the
            // same wall clock as converting the epoch value directly.
            let offset = FixedOffset::east_opt(offset_minutes * 60).expect("in range");
            let text = DateTime::<Utc>::from_timestamp_millis(ms)
                .expect("in range")
                .with_timezone(&offset)
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, use_z);
            let expected = instant_from_epoch_millis(ms, &zone).map(TimeSpec::Instant);
            prop_assert!(expected.is_ok());
            prop_assert_eq!(parse_time(&text, &zone), expected);
        }

        #[test]
        fn prop_instant_from_epoch_millis_utc_round_trips(ms in -62_167_219_200_000i64..=253_402_300_799_999) {
            let s = instant_from_epoch_millis(ms, &TimelineZone::Utc).expect("in range");
            prop_assert!(is_valid_instant(&s));
            let back = instant_datetime(s.as_bytes())
                .expect("valid")
                .and_utc()
                .timestamp_millis();
            prop_assert_eq!(back, ms);
        }
    }
}
