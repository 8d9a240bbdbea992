//! Ordering values (the precombine / ordering fields) and how Hudi compares them.
//!
//! Java compares `Comparable`s of the engine's types; two rules matter beyond plain order:
//! the default ordering value (integer 0, or none) marks a delete that wins unconditionally
//! ("commit-time ordering delete"), and a delete with an ordering value of another class than
//! the record's never loses to it (`OrderingValues.isSameClass`).

use std::cmp::Ordering;

use arrow_array::cast::AsArray;
use arrow_array::types::*;
use arrow_array::{Array, ArrayRef, StructArray};
use arrow_schema::{DataType, TimeUnit};

/// The class of an ordering value, as Java's engine types tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cls {
    Int,
    Long,
    Float,
    Double,
    Date,
}

/// One ordering value.
#[derive(Debug, Clone, PartialEq)]
pub enum OrdVal {
    /// No value (a null field, a delete without one): Java's default ordering value.
    Default,
    Bool(bool),
    Int(i64, Cls),
    Float(f64, Cls),
    Str(Vec<u8>),
    Bytes(Vec<u8>),
    /// Unscaled value and scale.
    Dec(i128, i8),
}

impl OrdVal {
    pub fn int(v: i64, c: Cls) -> OrdVal {
        OrdVal::Int(v, c)
    }

    /// Java's `OrderingValues.isDefault`: the integer 0 (or no value at all).
    pub fn is_default(&self) -> bool {
        matches!(self, OrdVal::Default | OrdVal::Int(0, Cls::Int))
    }

    fn class(&self) -> u8 {
        match self {
            OrdVal::Default => 0,
            OrdVal::Bool(_) => 1,
            OrdVal::Int(_, Cls::Int) | OrdVal::Int(_, Cls::Date) => 2,
            OrdVal::Int(_, _) => 3,
            OrdVal::Float(_, Cls::Float) => 4,
            OrdVal::Float(_, _) => 5,
            OrdVal::Str(_) => 6,
            OrdVal::Bytes(_) => 7,
            OrdVal::Dec(_, _) => 8,
        }
    }

    pub fn same_class(&self, other: &OrdVal) -> bool {
        self.class() == other.class()
    }

    fn as_f64(&self) -> Option<f64> {
        match self {
            OrdVal::Int(v, _) => Some(*v as f64),
            OrdVal::Float(v, _) => Some(*v),
            OrdVal::Dec(v, s) => Some(*v as f64 / 10f64.powi(*s as i32)),
            _ => None,
        }
    }

    /// Total order used for merging: the default is below everything, numbers compare by
    /// value across widths (schema evolution promotes them), strings and bytes bytewise;
    /// values of unrelated kinds compare equal (so the later write wins, as on ties).
    pub fn compare(&self, other: &OrdVal) -> Ordering {
        use OrdVal::*;
        match (self, other) {
            (Default, Default) => Ordering::Equal,
            (Default, _) => Ordering::Less,
            (_, Default) => Ordering::Greater,
            (Bool(a), Bool(b)) => a.cmp(b),
            (Int(a, _), Int(b, _)) => a.cmp(b),
            (Str(a), Str(b)) | (Bytes(a), Bytes(b)) => a.cmp(b),
            (Dec(a, sa), Dec(b, sb)) if sa == sb => a.cmp(b),
            (Dec(a, sa), Dec(b, sb)) => {
                let (hi, lo, a_hi) = if sa > sb {
                    (sa, sb, true)
                } else {
                    (sb, sa, false)
                };
                let f = 10i128.checked_pow((*hi - *lo) as u32);
                let scaled = f.and_then(|f| {
                    if a_hi {
                        b.checked_mul(f)
                    } else {
                        a.checked_mul(f)
                    }
                });
                match scaled {
                    Some(s) if a_hi => a.cmp(&s),
                    Some(s) => s.cmp(b),
                    None => self
                        .as_f64()
                        .partial_cmp(&other.as_f64())
                        .unwrap_or(Ordering::Equal),
                }
            }
            _ => match (self.as_f64(), other.as_f64()) {
                (Some(a), Some(b)) => a.total_cmp(&b),
                _ => Ordering::Equal,
            },
        }
    }
}

/// Compare ordering values of several fields, field by field.
pub fn compare_all(a: &[OrdVal], b: &[OrdVal]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.compare(y) {
            Ordering::Equal => continue,
            o => return o,
        }
    }
    Ordering::Equal
}

/// Whether a multi-field ordering value is Java's default.
pub fn all_default(v: &[OrdVal]) -> bool {
    v.is_empty() || v.iter().all(OrdVal::is_default)
}

/// The ordering value of row `row` of `array` (as the engine sees it: timestamps in
/// microseconds, dates as days).
pub fn ord_at(array: &ArrayRef, row: usize) -> OrdVal {
    if array.is_null(row) {
        return OrdVal::Default;
    }
    match array.data_type() {
        DataType::Boolean => OrdVal::Bool(array.as_boolean().value(row)),
        DataType::Int8 => OrdVal::Int(array.as_primitive::<Int8Type>().value(row) as i64, Cls::Int),
        DataType::Int16 => OrdVal::Int(
            array.as_primitive::<Int16Type>().value(row) as i64,
            Cls::Int,
        ),
        DataType::Int32 => OrdVal::Int(
            array.as_primitive::<Int32Type>().value(row) as i64,
            Cls::Int,
        ),
        DataType::Int64 => OrdVal::Int(array.as_primitive::<Int64Type>().value(row), Cls::Long),
        DataType::Date32 => OrdVal::Int(
            array.as_primitive::<Date32Type>().value(row) as i64,
            Cls::Date,
        ),
        DataType::Float32 => OrdVal::Float(
            array.as_primitive::<Float32Type>().value(row) as f64,
            Cls::Float,
        ),
        DataType::Float64 => {
            OrdVal::Float(array.as_primitive::<Float64Type>().value(row), Cls::Double)
        }
        DataType::Timestamp(unit, _) => {
            let micros = match unit {
                TimeUnit::Second => array
                    .as_primitive::<TimestampSecondType>()
                    .value(row)
                    .saturating_mul(1_000_000),
                TimeUnit::Millisecond => array
                    .as_primitive::<TimestampMillisecondType>()
                    .value(row)
                    .saturating_mul(1000),
                TimeUnit::Microsecond => {
                    array.as_primitive::<TimestampMicrosecondType>().value(row)
                }
                TimeUnit::Nanosecond => {
                    array.as_primitive::<TimestampNanosecondType>().value(row) / 1000
                }
            };
            OrdVal::Int(micros, Cls::Long)
        }
        DataType::Utf8 => OrdVal::Str(array.as_string::<i32>().value(row).as_bytes().to_vec()),
        DataType::LargeUtf8 => OrdVal::Str(array.as_string::<i64>().value(row).as_bytes().to_vec()),
        DataType::Utf8View => OrdVal::Str(array.as_string_view().value(row).as_bytes().to_vec()),
        DataType::Binary => OrdVal::Bytes(array.as_binary::<i32>().value(row).to_vec()),
        DataType::FixedSizeBinary(_) => {
            OrdVal::Bytes(array.as_fixed_size_binary().value(row).to_vec())
        }
        DataType::Decimal128(_, s) => {
            OrdVal::Dec(array.as_primitive::<Decimal128Type>().value(row), *s)
        }
        _ => OrdVal::Default,
    }
}

/// The column named by a (possibly dotted) field path in a struct-like set of columns.
pub fn column_by_path(
    fields: &arrow_schema::Fields,
    columns: &[ArrayRef],
    path: &str,
) -> Option<ArrayRef> {
    let mut parts = path.split('.');
    let first = parts.next()?;
    let i = crate::avro::field_index(fields, first)?;
    let mut col = columns.get(i)?.clone();
    for p in parts {
        let s: &StructArray = col.as_any().downcast_ref()?;
        let DataType::Struct(f) = s.data_type() else {
            return None;
        };
        let j = crate::avro::field_index(f, p)?;
        col = s.column(j).clone();
    }
    Some(col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order() {
        assert!(OrdVal::Int(0, Cls::Int).is_default());
        assert!(!OrdVal::Int(0, Cls::Long).is_default());
        assert_eq!(
            OrdVal::Int(3, Cls::Int).compare(&OrdVal::Int(2, Cls::Long)),
            Ordering::Greater
        );
        assert_eq!(
            OrdVal::Dec(150, 2).compare(&OrdVal::Dec(1_500_000_000_000_000, 15)),
            Ordering::Equal
        );
        assert_eq!(
            OrdVal::Dec(151, 2).compare(&OrdVal::Dec(1_500_000_000_000_000, 15)),
            Ordering::Greater
        );
        assert_eq!(
            OrdVal::Default.compare(&OrdVal::Int(-5, Cls::Int)),
            Ordering::Less
        );
        assert_eq!(
            OrdVal::Str(b"b".to_vec()).compare(&OrdVal::Str(b"ab".to_vec())),
            Ordering::Greater
        );
    }
}
