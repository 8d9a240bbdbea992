//! [`InstantTime`]: the time of an instant as Hudi writes it in file names and metadata.

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// An instant time: 1 to 32 decimal digits (`yyyyMMddHHmmssSSS` on every table hudifs reads;
/// tables written before Hudi 0.9 have 14). Instant times compare as text, as Hudi compares
/// them. Cheap to clone: the digits are shared. A thin pointer (8 bytes, not the 16 of an
/// `Arc<str>`): a view's choice of a partition can hold one per file.
#[derive(Clone)]
pub struct InstantTime(Arc<Digits>);

/// The digits of an instant time (at most 32: [`is_instant_time`]).
struct Digits {
    len: u8,
    bytes: [u8; 32],
}

impl Digits {
    /// `s` must be an instant time.
    fn new(s: &str) -> Digits {
        let mut bytes = [0; 32];
        bytes[..s.len()].copy_from_slice(s.as_bytes());
        Digits {
            len: s.len() as u8,
            bytes,
        }
    }
}

/// The lower bound hudi-rs and the fixtures use for "from the beginning".
pub const EARLIEST: &str = "19700101000000000";

/// Whether `s` is an instant time.
pub fn is_instant_time(s: &str) -> bool {
    !s.is_empty() && s.len() <= 32 && s.bytes().all(|b| b.is_ascii_digit())
}

impl InstantTime {
    /// `s` as an instant time, if it is one.
    pub fn parse(s: &str) -> Option<InstantTime> {
        is_instant_time(s).then(|| InstantTime(Arc::new(Digits::new(s))))
    }

    /// [`EARLIEST`].
    pub fn earliest() -> InstantTime {
        InstantTime(Arc::new(Digits::new(EARLIEST)))
    }

    pub fn as_str(&self) -> &str {
        let d = &*self.0;
        // SAFETY: the bytes up to `len` are the digits of an instant time (`Digits::new` is
        // only given one), ASCII.
        unsafe { std::str::from_utf8_unchecked(&d.bytes[..d.len as usize]) }
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

impl PartialEq for InstantTime {
    fn eq(&self, other: &InstantTime) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.as_str() == other.as_str()
    }
}

impl Eq for InstantTime {}

impl PartialOrd for InstantTime {
    fn partial_cmp(&self, other: &InstantTime) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for InstantTime {
    fn cmp(&self, other: &InstantTime) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// As the digits' `str` hashes (`Borrow<str>` looks a map's keys up by text).
impl std::hash::Hash for InstantTime {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl Deref for InstantTime {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for InstantTime {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for InstantTime {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for InstantTime {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for InstantTime {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for InstantTime {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialOrd<String> for InstantTime {
    fn partial_cmp(&self, other: &String) -> Option<std::cmp::Ordering> {
        Some(self.as_str().cmp(other.as_str()))
    }
}

impl From<InstantTime> for String {
    fn from(t: InstantTime) -> String {
        t.as_str().to_string()
    }
}

impl PartialOrd<str> for InstantTime {
    fn partial_cmp(&self, other: &str) -> Option<std::cmp::Ordering> {
        Some(self.as_str().cmp(other))
    }
}

impl fmt::Display for InstantTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for InstantTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl serde::Serialize for InstantTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
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
        let mut h = std::collections::HashMap::new();
        h.insert(b.clone(), 2);
        assert_eq!(h.get("20240101000000001"), Some(&2));
        assert_eq!(std::mem::size_of::<InstantTime>(), 8);
        let long = "9".repeat(32);
        assert_eq!(InstantTime::parse(&long).unwrap().as_str(), long);
    }
}
