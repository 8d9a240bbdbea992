//! Placeholder until the real module lands (being written in parallel).
#[derive(Debug, Clone, PartialEq)]
pub enum TimelineZone {
    Utc,
    Local,
    Named(chrono_tz::Tz),
    Fixed(chrono::FixedOffset),
}
impl TimelineZone {
    pub fn parse(s: &str) -> Result<TimelineZone, TimeError> {
        match s {
            "UTC" => Ok(TimelineZone::Utc),
            "LOCAL" => Ok(TimelineZone::Local),
            _ => Err(TimeError::Bad(s.to_string())),
        }
    }
}
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeSpec {
    Instant(String),
    Earliest,
    Latest,
}
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum TimeError {
    #[error("bad time {0}")]
    Bad(String),
}
pub fn parse_time(input: &str, _zone: &TimelineZone) -> Result<TimeSpec, TimeError> {
    if input.len() == 17 && input.bytes().all(|b| b.is_ascii_digit()) {
        Ok(TimeSpec::Instant(input.to_string()))
    } else if input == "latest" {
        Ok(TimeSpec::Latest)
    } else if input == "earliest" {
        Ok(TimeSpec::Earliest)
    } else {
        Err(TimeError::Bad(input.to_string()))
    }
}
pub fn minus_one_ms(instant: &str) -> Option<String> {
    let n: u64 = instant.parse().ok()?;
    Some(format!("{:017}", n - 1))
}
pub fn plus_one_ms(instant: &str) -> Option<String> {
    let n: u64 = instant.parse().ok()?;
    Some(format!("{:017}", n + 1))
}
