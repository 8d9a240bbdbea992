//! [`InstantTime`]: the time of an instant as Hudi writes it in file names and metadata.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// An instant time: 1 to 32 decimal digits (`yyyyMMddHHmmssSSS` on every table hudifs reads;
/// tables written before Hudi 0.9 have 14). Instant times compare as text, as Hudi compares
/// them. Cheap to clone: the digits are shared.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstantTime(Arc<str>);

/// The lower bound hudi-rs and the fixtures use for "from the beginning".
pub const EARLIEST: &str = "19700101000000000";

/// Whether `s` is an instant time.
pub fn is_instant_time(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_digit())
}

impl InstantTime {
    /// `s` as an instant time, if it is one.
    pub fn parse(s: &str) -> Option<InstantTime> {
        is_instant_time(s).then(|| InstantTime(Arc::from(s)))
    }

    /// [`EARLIEST`].
    pub fn earliest() -> InstantTime {
        InstantTime(Arc::from(EARLIEST))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether another copy of this value exists (for interners that drop unshared values).
    pub fn is_shared(&self) -> bool {
        Arc::strong_count(&self.0) > 1
    }

    /// Whether `other` shares this value's allocation.
    pub fn shares_with(&self, other: &InstantTime) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Deref for InstantTime {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for InstantTime {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for InstantTime {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for InstantTime {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for InstantTime {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for InstantTime {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialOrd<String> for InstantTime {
    fn partial_cmp(&self, other: &String) -> Option<std::cmp::Ordering> {
        Some((*self.0).cmp(other.as_str()))
    }
}

impl From<InstantTime> for String {
    fn from(t: InstantTime) -> String {
        t.0.to_string()
    }
}

impl PartialOrd<str> for InstantTime {
    fn partial_cmp(&self, other: &str) -> Option<std::cmp::Ordering> {
        Some((*self.0).cmp(other))
    }
}

impl fmt::Display for InstantTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for InstantTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

impl serde::Serialize for InstantTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_only_compared_as_text() {
        assert!(InstantTime::parse("20240101000000000").is_some());
        assert!(InstantTime::parse("").is_none());
        assert!(InstantTime::parse("2024x").is_none());
        assert!(InstantTime::parse(&"1".repeat(33)).is_none());
        let a = InstantTime::parse("20240101000000000").unwrap();
        let b = InstantTime::parse("20240101000000001").unwrap();
        assert!(a < b);
        assert!(a == "20240101000000000");
        let mut m = std::collections::BTreeMap::new();
        m.insert(a.clone(), 1);
        assert_eq!(m.get("20240101000000000"), Some(&1));
    }
}
