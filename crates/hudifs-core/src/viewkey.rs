//! [`ViewKey`]: which view of the table, and its grammar: `as_of/<ts>` and
//! `incremental/<t1>..<t2>` path components and the `--as-of` / `--incremental` options,
//! normalised through `timefmt` (SEMANTICS.md §4).

use crate::error::{Error, Result};
use crate::instant_time::InstantTime;
use crate::timefmt::{self, TimeSpec, TimelineZone};

/// Which view of the table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ViewKey {
    Latest,
    AsOf(InstantTime),
    /// The half-open window `(start, end]`; `None` means earliest / latest.
    Incremental {
        start: Option<InstantTime>,
        end: Option<InstantTime>,
    },
}

/// A view as a mount shows it: a view key, as table files or as merged slices (`merged/`),
/// or (an incremental key) as change feeds (`cdc/`, whose files are merged like slices).
/// `delta` marks the same view shown again as a data directory of `delta/` (a Delta Lake
/// table's version files): its own inode numbers, the same files. `iceberg` marks it shown as a
/// data directory of `iceberg/`: its own inode numbers, the same files with field ids in their
/// footers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ViewName {
    pub key: ViewKey,
    pub merged: bool,
    pub cdc: bool,
    pub delta: bool,
    pub iceberg: bool,
}

fn instant(t: String) -> Result<InstantTime> {
    InstantTime::parse(&t).ok_or_else(|| Error::Usage(format!("{t:?} is not an instant time")))
}

/// Longest path component hudifs accepts as a time or window.
pub const MAX_KEY_LEN: usize = 160;

/// `as_of/<ts>`: a time spelling, `latest` or `earliest`.
pub fn parse_as_of(s: &str, zone: &TimelineZone) -> Result<ViewKey> {
    Ok(match timefmt::parse_time(s, zone)? {
        TimeSpec::Instant(t) => ViewKey::AsOf(instant(t)?),
        TimeSpec::Earliest => ViewKey::AsOf(InstantTime::earliest()),
        TimeSpec::Latest => ViewKey::Latest,
    })
}

/// `incremental/<t1>..<t2>`: split at the first `..`; an empty side is open (earliest /
/// latest). `latest_time` is the newest time that selects instants (for a `latest` start).
pub fn parse_window(
    s: &str,
    zone: &TimelineZone,
    latest_time: Option<&InstantTime>,
) -> Result<ViewKey> {
    if s.len() > MAX_KEY_LEN {
        return Err(Error::Usage(format!(
            "window of {} bytes is too long",
            s.len()
        )));
    }
    let Some((a, b)) = s.split_once("..") else {
        return Err(Error::Usage(format!(
            "{s:?} is not a window: write T1..T2, T1.. or ..T2 (e.g. 20240101000000000..20240201000000000)"
        )));
    };
    let side = |x: &str, is_start: bool| -> Result<Option<InstantTime>> {
        if x.is_empty() {
            return Ok(None);
        }
        Ok(match timefmt::parse_time(x, zone)? {
            TimeSpec::Instant(t) => Some(instant(t)?),
            TimeSpec::Earliest if is_start => None,
            TimeSpec::Earliest => Some(InstantTime::earliest()),
            TimeSpec::Latest if is_start => {
                Some(latest_time.cloned().unwrap_or_else(InstantTime::earliest))
            }
            TimeSpec::Latest => None,
        })
    };
    let start = side(a, true)?;
    let end = side(b, false)?;
    if let (Some(x), Some(y)) = (&start, &end) {
        if x > y {
            return Err(Error::Usage(format!(
                "window {s:?} ends ({y}) before it starts ({x})"
            )));
        }
    }
    Ok(ViewKey::Incremental { start, end })
}

/// The canonical name of a window, as listed in `incremental/`.
pub fn window_name(start: Option<&str>, end: Option<&str>) -> String {
    format!("{}..{}", start.unwrap_or(""), end.unwrap_or(""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Option<InstantTime> {
        InstantTime::parse(s)
    }

    #[test]
    fn windows() {
        let z = TimelineZone::Utc;
        assert_eq!(
            parse_window("20240101000000000..20240102000000000", &z, None).unwrap(),
            ViewKey::Incremental {
                start: t("20240101000000000"),
                end: t("20240102000000000")
            }
        );
        assert_eq!(
            parse_window("..", &z, None).unwrap(),
            ViewKey::Incremental {
                start: None,
                end: None
            }
        );
        assert_eq!(
            parse_window("2024-01-01..", &z, None).unwrap(),
            ViewKey::Incremental {
                start: t("20240101000000000"),
                end: None
            }
        );
        assert!(parse_window("20240102000000000..20240101000000000", &z, None).is_err());
        assert!(parse_window("20240102000000000", &z, None).is_err());
        assert!(parse_window("x..y", &z, None).is_err());
        assert_eq!(parse_as_of("latest", &z).unwrap(), ViewKey::Latest);
    }
}
