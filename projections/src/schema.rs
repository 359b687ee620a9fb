//! Column types: the type grammar of docs/api.md and its mapping to Arrow.
//!
//! ```text
//! type := bool | int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64
//!       | float32 | float64 | utf8 | binary | date32
//!       | decimal(P,S)                            (1 <= P <= 38, 0 <= S <= P)
//!       | timestamp[ms|us|ns] | timestamp[ms|us|ns,UTC]
//!       | list<type> | vector<float32,N>        (1 <= N <= 65536; vector only at top level)
//! ```
//! Spaces are allowed around the punctuation; [`ColumnType`]'s `Display` gives the canonical form.

use std::{fmt, str::FromStr, sync::Arc};

use arrow_schema::{DataType, Field, TimeUnit};

use crate::error::Error;

/// Largest dimension of a vector column.
pub const MAX_VECTOR_DIM: u32 = 65_536;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimestampUnit {
    Milliseconds,
    Microseconds,
    Nanoseconds,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ColumnType {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Float32,
    Float64,
    /// A fixed-point number of `precision` digits, `scale` of them after the point: Arrow's
    /// decimal128, exact.
    Decimal {
        precision: u8,
        scale: i8,
    },
    Utf8,
    Binary,
    Date32,
    Timestamp {
        unit: TimestampUnit,
        utc: bool,
    },
    List(Box<ColumnType>),
    /// A fixed-size list of float32: the type of a vector column.
    Vector {
        dim: u32,
    },
    /// A point on the globe: a struct of `lat` and `lon`, in degrees (a dataset's `geo_point`).
    GeoPoint,
}

/// The fields of a geo point's Arrow struct: `lat` and `lon`, in degrees.
pub fn geo_point_fields() -> arrow_schema::Fields {
    vec![
        Field::new("lat", DataType::Float64, false),
        Field::new("lon", DataType::Float64, false),
    ]
    .into()
}

impl ColumnType {
    /// The Arrow type a column of this type holds.
    pub fn to_arrow(&self) -> DataType {
        match self {
            ColumnType::Bool => DataType::Boolean,
            ColumnType::Int8 => DataType::Int8,
            ColumnType::Int16 => DataType::Int16,
            ColumnType::Int32 => DataType::Int32,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::UInt8 => DataType::UInt8,
            ColumnType::UInt16 => DataType::UInt16,
            ColumnType::UInt32 => DataType::UInt32,
            ColumnType::UInt64 => DataType::UInt64,
            ColumnType::Float32 => DataType::Float32,
            ColumnType::Float64 => DataType::Float64,
            ColumnType::Decimal { precision, scale } => DataType::Decimal128(*precision, *scale),
            ColumnType::Utf8 => DataType::Utf8,
            ColumnType::Binary => DataType::Binary,
            ColumnType::Date32 => DataType::Date32,
            ColumnType::Timestamp { unit, utc } => DataType::Timestamp(
                match unit {
                    TimestampUnit::Milliseconds => TimeUnit::Millisecond,
                    TimestampUnit::Microseconds => TimeUnit::Microsecond,
                    TimestampUnit::Nanoseconds => TimeUnit::Nanosecond,
                },
                utc.then(|| Arc::from("UTC")),
            ),
            ColumnType::List(item) => {
                DataType::List(Arc::new(Field::new("item", item.to_arrow(), true)))
            }
            ColumnType::Vector { dim } => DataType::FixedSizeList(
                Arc::new(Field::new("item", DataType::Float32, true)),
                *dim as i32,
            ),
            ColumnType::GeoPoint => DataType::Struct(geo_point_fields()),
        }
    }

    /// Whether values of this type can be matched exactly by an exact-match index.
    pub fn is_scalar(&self) -> bool {
        !matches!(
            self,
            ColumnType::List(_)
                | ColumnType::Vector { .. }
                | ColumnType::Binary
                | ColumnType::GeoPoint
        )
    }

    fn parse(text: &str, top_level: bool) -> Result<ColumnType, String> {
        let text = text.trim();
        let simple = match text {
            "bool" => Some(ColumnType::Bool),
            "int8" => Some(ColumnType::Int8),
            "int16" => Some(ColumnType::Int16),
            "int32" => Some(ColumnType::Int32),
            "int64" => Some(ColumnType::Int64),
            "uint8" => Some(ColumnType::UInt8),
            "uint16" => Some(ColumnType::UInt16),
            "uint32" => Some(ColumnType::UInt32),
            "uint64" => Some(ColumnType::UInt64),
            "float32" => Some(ColumnType::Float32),
            "float64" => Some(ColumnType::Float64),
            "utf8" => Some(ColumnType::Utf8),
            "binary" => Some(ColumnType::Binary),
            "date32" => Some(ColumnType::Date32),
            "geo_point" => Some(ColumnType::GeoPoint),
            _ => None,
        };
        if let Some(simple) = simple {
            return Ok(simple);
        }
        if let Some(inner) = enclosed(text, "timestamp", '[', ']') {
            let mut parts = inner.split(',').map(str::trim);
            let unit = match parts.next() {
                Some("ms") => TimestampUnit::Milliseconds,
                Some("us") => TimestampUnit::Microseconds,
                Some("ns") => TimestampUnit::Nanoseconds,
                _ => return Err("the timestamp unit must be ms, us or ns".to_owned()),
            };
            let utc = match parts.next() {
                None => false,
                Some("UTC") => true,
                Some(_) => return Err("the only timestamp time zone is UTC".to_owned()),
            };
            if parts.next().is_some() {
                return Err("a timestamp takes a unit and optionally UTC".to_owned());
            }
            return Ok(ColumnType::Timestamp { unit, utc });
        }
        if let Some(inner) = enclosed(text, "decimal", '(', ')') {
            let invalid =
                || "a decimal is written decimal(P,S), 1 <= P <= 38, 0 <= S <= P".to_owned();
            let (precision, scale) = inner.split_once(',').ok_or_else(invalid)?;
            let precision: u8 = precision.trim().parse().map_err(|_| invalid())?;
            let scale: i8 = scale.trim().parse().map_err(|_| invalid())?;
            if !(1..=38).contains(&precision) || scale < 0 || scale as u8 > precision {
                return Err(invalid());
            }
            return Ok(ColumnType::Decimal { precision, scale });
        }
        if let Some(inner) = enclosed(text, "list", '<', '>') {
            let item = ColumnType::parse(inner, false)?;
            return Ok(ColumnType::List(Box::new(item)));
        }
        if let Some(inner) = enclosed(text, "vector", '<', '>') {
            if !top_level {
                return Err("a vector cannot be nested in a list".to_owned());
            }
            let (element, dim) = inner
                .split_once(',')
                .ok_or_else(|| "a vector is written vector<float32,N>".to_owned())?;
            if element.trim() != "float32" {
                return Err("vectors hold float32".to_owned());
            }
            let dim: u32 = dim
                .trim()
                .parse()
                .map_err(|_| "the vector dimension must be a positive integer".to_owned())?;
            if dim == 0 || dim > MAX_VECTOR_DIM {
                return Err(format!(
                    "the vector dimension must be 1 to {MAX_VECTOR_DIM}"
                ));
            }
            return Ok(ColumnType::Vector { dim });
        }
        Err("unknown type".to_owned())
    }
}

/// The text between `open` and a final `close` after `name`, if `text` has that shape.
fn enclosed<'a>(text: &'a str, name: &str, open: char, close: char) -> Option<&'a str> {
    text.strip_prefix(name)?
        .trim_start()
        .strip_prefix(open)?
        .strip_suffix(close)
}

impl FromStr for ColumnType {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self, Error> {
        ColumnType::parse(text, true).map_err(|reason| Error::InvalidType {
            text: text.to_owned(),
            reason,
        })
    }
}

impl fmt::Display for ColumnType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ColumnType::Bool => f.write_str("bool"),
            ColumnType::Int8 => f.write_str("int8"),
            ColumnType::Int16 => f.write_str("int16"),
            ColumnType::Int32 => f.write_str("int32"),
            ColumnType::Int64 => f.write_str("int64"),
            ColumnType::UInt8 => f.write_str("uint8"),
            ColumnType::UInt16 => f.write_str("uint16"),
            ColumnType::UInt32 => f.write_str("uint32"),
            ColumnType::UInt64 => f.write_str("uint64"),
            ColumnType::Float32 => f.write_str("float32"),
            ColumnType::Float64 => f.write_str("float64"),
            ColumnType::Decimal { precision, scale } => write!(f, "decimal({precision},{scale})"),
            ColumnType::Utf8 => f.write_str("utf8"),
            ColumnType::Binary => f.write_str("binary"),
            ColumnType::Date32 => f.write_str("date32"),
            ColumnType::Timestamp { unit, utc } => {
                let unit = match unit {
                    TimestampUnit::Milliseconds => "ms",
                    TimestampUnit::Microseconds => "us",
                    TimestampUnit::Nanoseconds => "ns",
                };
                match utc {
                    true => write!(f, "timestamp[{unit},UTC]"),
                    false => write!(f, "timestamp[{unit}]"),
                }
            }
            ColumnType::List(item) => write!(f, "list<{item}>"),
            ColumnType::Vector { dim } => write!(f, "vector<float32,{dim}>"),
            ColumnType::GeoPoint => f.write_str("geo_point"),
        }
    }
}

impl serde::Serialize for ColumnType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ColumnType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_type_parses_and_prints_canonically() {
        for text in [
            "bool",
            "int8",
            "int16",
            "int32",
            "int64",
            "uint8",
            "uint16",
            "uint32",
            "uint64",
            "float32",
            "float64",
            "utf8",
            "binary",
            "date32",
            "timestamp[ms]",
            "timestamp[us,UTC]",
            "timestamp[ns]",
            "list<utf8>",
            "list<list<int64>>",
            "vector<float32,384>",
            "geo_point",
            "decimal(12,2)",
            "decimal(38,0)",
            "list<decimal(5,5)>",
        ] {
            let parsed: ColumnType = text.parse().unwrap();
            assert_eq!(parsed.to_string(), text);
        }
        assert_eq!(
            " vector< float32 , 3 > ".parse::<ColumnType>().unwrap(),
            ColumnType::Vector { dim: 3 }
        );
        assert_eq!(
            "timestamp[ms, UTC]"
                .parse::<ColumnType>()
                .unwrap()
                .to_string(),
            "timestamp[ms,UTC]"
        );
    }

    #[test]
    fn bad_types_are_refused_with_a_reason() {
        for text in [
            "",
            "int",
            "string",
            "INT64",
            "timestamp",
            "timestamp[s]",
            "timestamp[ms,Europe/Paris]",
            "list<>",
            "list<nope>",
            "vector<float64,3>",
            "vector<float32,0>",
            "vector<float32,65537>",
            "vector<float32>",
            "list<vector<float32,3>>",
            "decimal(0,0)",
            "decimal(39,2)",
            "decimal(4,5)",
            "decimal(4,-1)",
            "decimal(4)",
        ] {
            let error = text.parse::<ColumnType>().unwrap_err();
            assert!(error.to_string().contains(&format!("{text:?}")), "{error}");
        }
    }

    #[test]
    fn arrow_types() {
        let vector: ColumnType = "vector<float32,4>".parse().unwrap();
        assert!(matches!(vector.to_arrow(), DataType::FixedSizeList(_, 4)));
        let point: ColumnType = "geo_point".parse().unwrap();
        assert!(
            matches!(point.to_arrow(), DataType::Struct(fields) if fields.len() == 2 && fields[0].name() == "lat")
        );
        let ts: ColumnType = "timestamp[us,UTC]".parse().unwrap();
        assert_eq!(
            ts.to_arrow(),
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
    }
}
