//! The parts of a file's `add.stats` (§11.2) a manifest entry takes: the null counts and the
//! bounds, read straight from the JSON text (borrowing its strings) rather than through a JSON
//! tree: a manifest of a big table holds thousands of entries, each its file's statistics.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;

/// A bound as `add.stats` writes it: an integer, a string, or another value (not used).
#[derive(Debug, Clone, PartialEq)]
pub enum Bound<'a> {
    Int(i64),
    Str(Cow<'a, str>),
    Other,
}

/// Null counts by column, in the order written (none where it is not a number).
type Counts<'a> = Vec<(Cow<'a, str>, Option<i64>)>;

/// What a manifest entry takes of `add.stats`, column by column in the order written.
#[derive(Debug, Default, PartialEq)]
pub struct EntryStats<'a> {
    pub null_count: Counts<'a>,
    pub min: Vec<(Cow<'a, str>, Bound<'a>)>,
    pub max: Vec<(Cow<'a, str>, Bound<'a>)>,
}

impl<'a> EntryStats<'a> {
    /// The statistics in `text`; none where it is not a JSON object.
    pub fn parse(text: &'a str) -> EntryStats<'a> {
        serde_json::from_str(text).unwrap_or_default()
    }
}

impl<'a> Bound<'a> {
    /// The bound of column `name` in `list`.
    pub fn of<'l>(list: &'l [(Cow<'a, str>, Bound<'a>)], name: &str) -> Option<&'l Bound<'a>> {
        list.iter().find(|(n, _)| n == name).map(|(_, b)| b)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Bound<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Bound<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a bound")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Bound::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(i64::try_from(v).map_or(Bound::Other, Bound::Int))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Bound::Other)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Bound::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Bound::Other)
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Bound::Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Bound::Str(Cow::Owned(v.to_string())))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Bound::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Self::Value, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Bound::Other)
            }
        }
        d.deserialize_any(V)
    }
}

/// A JSON object as its entries in order, keys borrowed where unescaped.
fn entries<'de, D, T>(d: D) -> Result<Vec<(Cow<'de, str>, T)>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct V<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for V<T> {
        type Value = Vec<(Cow<'de, str>, T)>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(k) = m.next_key::<Cow<'de, str>>()? {
                out.push((k, m.next_value()?));
            }
            Ok(out)
        }
    }
    d.deserialize_map(V(std::marker::PhantomData))
}

/// A null count: a number, or what is not one (a nested column's object).
fn count<'de, D: Deserializer<'de>>(d: D) -> Result<Counts<'de>, D::Error> {
    let all: Vec<(Cow<'de, str>, Bound<'de>)> = entries(d)?;
    Ok(all
        .into_iter()
        .map(|(k, b)| {
            let n = match b {
                Bound::Int(n) => Some(n),
                _ => None,
            };
            (k, n)
        })
        .collect())
}

impl<'de: 'a, 'a> Deserialize<'de> for EntryStats<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = EntryStats<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("add.stats")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out = EntryStats::default();
                while let Some(k) = m.next_key::<Cow<'de, str>>()? {
                    match &*k {
                        "nullCount" => out.null_count = m.next_value::<NullCounts<'de>>()?.0,
                        "minValues" => out.min = m.next_value::<Bounds<'de>>()?.0,
                        "maxValues" => out.max = m.next_value::<Bounds<'de>>()?.0,
                        _ => {
                            m.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_map(V)
    }
}

struct NullCounts<'a>(Counts<'a>);
struct Bounds<'a>(Vec<(Cow<'a, str>, Bound<'a>)>);

impl<'de: 'a, 'a> Deserialize<'de> for NullCounts<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        count(d).map(NullCounts)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Bounds<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        entries(d).map(Bounds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counts_and_bounds_of_add_stats_as_a_json_tree_gives_them() {
        let text = r#"{"numRecords":3,"minValues":{"id":-2,"name":"a\"b","f":1.5,"big":18446744073709551615},"maxValues":{"id":9,"name":"zz","s":{"x":1}},"nullCount":{"id":0,"name":1,"s":{"x":0}}}"#;
        let s = EntryStats::parse(text);
        assert_eq!(
            s.null_count,
            vec![
                ("id".into(), Some(0)),
                ("name".into(), Some(1)),
                ("s".into(), None)
            ]
        );
        assert_eq!(Bound::of(&s.min, "id"), Some(&Bound::Int(-2)));
        assert_eq!(Bound::of(&s.min, "name"), Some(&Bound::Str("a\"b".into())));
        assert_eq!(Bound::of(&s.min, "f"), Some(&Bound::Other));
        assert_eq!(Bound::of(&s.min, "big"), Some(&Bound::Other));
        assert_eq!(Bound::of(&s.max, "s"), Some(&Bound::Other));
        assert_eq!(Bound::of(&s.max, "nope"), None);
        assert_eq!(EntryStats::parse("not json"), EntryStats::default());
        assert_eq!(EntryStats::parse("[1]"), EntryStats::default());
        assert_eq!(EntryStats::parse("{}"), EntryStats::default());
    }
}
