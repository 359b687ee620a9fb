//! A row of a batch as the document index takes it, read in place from the batch's columns:
//! the `text` and `kw` objects of a row are tantivy values that borrow the column names and the
//! strings of the batch, so that making a document copies each value once, into the document,
//! rather than into maps of owned values first (see [`super::DocsSchema::documents`]).

use arrow::{
    array::{
        Array, ArrayRef, AsArray, BooleanArray, Decimal128Array, Float64Array, Int64Array,
        ListArray, StringArray, StructArray, TimestampMillisecondArray, TimestampNanosecondArray,
    },
    datatypes::{
        DataType, Decimal128Type, Float64Type, Int64Type, TimeUnit, TimestampMillisecondType,
        TimestampNanosecondType,
    },
};
use tantivy::{
    DateTime,
    schema::{
        OwnedValue,
        document::{ReferenceValue, ReferenceValueLeaf, Value},
    },
};

use super::Rounding;
use crate::table::dates::{MAX_MILLIS, MIN_MILLIS};

/// A column whose values the document index holds, borrowed from a batch.
#[derive(Debug)]
pub(super) enum Col<'a> {
    Str(&'a StringArray),
    I64(&'a Int64Array),
    F64(&'a Float64Array),
    /// A decimal, searched and aggregated as the number it is, over its unit (its exact
    /// value stays in the segment: SQL and `_source` read it there).
    Decimal(&'a Decimal128Array, f64),
    Bool(&'a BooleanArray),
    DateMillis(&'a TimestampMillisecondArray),
    /// A `date_nanos` field's: to the nanosecond.
    DateNanos(&'a TimestampNanosecondArray),
    /// A geo point: an object of `lat` and `lon` (geo queries read both).
    Point(&'a StructArray, &'a Float64Array, &'a Float64Array),
    /// Several values: each is indexed (and each is a value of the field's fast column).
    List(&'a ListArray, Box<Col<'a>>),
}

impl<'a> Col<'a> {
    /// The column as the document index reads it; `None` for the types the Query DSL does not
    /// search (vectors, binaries: knn reads vectors).
    pub(super) fn of(column: &'a ArrayRef) -> Option<Col<'a>> {
        Some(match column.data_type() {
            DataType::Utf8 => Col::Str(column.as_string::<i32>()),
            DataType::Int64 => Col::I64(column.as_primitive::<Int64Type>()),
            DataType::Float64 => Col::F64(column.as_primitive::<Float64Type>()),
            DataType::Decimal128(_, scale) => Col::Decimal(
                column.as_primitive::<Decimal128Type>(),
                10f64.powi(i32::from(*scale)),
            ),
            DataType::Boolean => Col::Bool(column.as_boolean()),
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                Col::DateMillis(column.as_primitive::<TimestampMillisecondType>())
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                Col::DateNanos(column.as_primitive::<TimestampNanosecondType>())
            }
            DataType::Struct(fields) if super::is_geo_point(fields) => {
                let point = column.as_struct();
                Col::Point(
                    point,
                    point.column(0).as_primitive::<Float64Type>(),
                    point.column(1).as_primitive::<Float64Type>(),
                )
            }
            DataType::List(_) => {
                let list = column.as_list::<i32>();
                Col::List(list, Box::new(Col::of(list.values())?))
            }
            _ => return None,
        })
    }

    pub(super) fn is_null(&self, row: usize) -> bool {
        match self {
            Col::Str(a) => a.is_null(row),
            Col::I64(a) => a.is_null(row),
            Col::F64(a) => a.is_null(row),
            Col::Decimal(a, _) => a.is_null(row),
            Col::Bool(a) => a.is_null(row),
            Col::DateMillis(a) => a.is_null(row),
            Col::DateNanos(a) => a.is_null(row),
            Col::Point(a, ..) => a.is_null(row),
            Col::List(a, _) => a.is_null(row),
        }
    }

    /// The value in `row`, which is not null; `None` for a list of no (non-null) values.
    pub(super) fn value(&'a self, row: usize) -> Option<RowValue<'a>> {
        Some(match self {
            Col::Str(a) => RowValue::Str(a.value(row)),
            Col::I64(a) => RowValue::I64(a.value(row)),
            Col::F64(a) => RowValue::F64(a.value(row)),
            Col::Decimal(a, unit) => RowValue::F64(a.value(row) as f64 / unit),
            Col::Bool(a) => RowValue::Bool(a.value(row)),
            // Writes refuse dates outside what an index holds; clamped, never overflowing,
            // should one come from elsewhere.
            Col::DateMillis(a) => RowValue::Date(DateTime::from_timestamp_millis(
                a.value(row).clamp(MIN_MILLIS, MAX_MILLIS),
            )),
            Col::DateNanos(a) => RowValue::Date(DateTime::from_timestamp_nanos(a.value(row))),
            Col::Point(_, lat, lon) => RowValue::Point(lat.value(row), lon.value(row)),
            Col::List(list, item) => {
                let offsets = list.offsets();
                let items = Items {
                    item,
                    next: offsets[row] as usize,
                    end: offsets[row + 1] as usize,
                    strings_only: false,
                    rounding: None,
                };
                items.clone().next()?;
                RowValue::Items(items)
            }
        })
    }
}

/// A value of a row, borrowed from its batch.
#[derive(Clone, Debug)]
pub(super) enum RowValue<'a> {
    Str(&'a str),
    I64(i64),
    F64(f64),
    Bool(bool),
    Date(DateTime),
    Point(f64, f64),
    Items(Items<'a>),
    /// A row's fields, as one object.
    Object(Fields<'a>),
}

impl<'a> RowValue<'a> {
    /// The value at `rounding`'s precision (a `float` or `half_float` field's).
    fn rounded(self, rounding: Option<Rounding>) -> RowValue<'a> {
        match (rounding, self) {
            (None, value) => value,
            (Some(r), RowValue::F64(f)) => RowValue::F64(r.round(f)),
            (Some(r), RowValue::I64(n)) => RowValue::F64(r.round(n as f64)),
            (Some(r), RowValue::Items(items)) => RowValue::Items(Items {
                rounding: Some(r),
                ..items
            }),
            (Some(_), value) => value,
        }
    }

    /// The value as an owned one.
    pub(super) fn owned(&self) -> OwnedValue {
        OwnedValue::from(self.as_value())
    }
}

impl<'a> Value<'a> for RowValue<'a> {
    type ArrayIter = Items<'a>;
    type ObjectIter = Entries<'a>;

    fn as_value(&self) -> ReferenceValue<'a, Self> {
        match self {
            RowValue::Str(s) => ReferenceValue::Leaf(ReferenceValueLeaf::Str(s)),
            RowValue::I64(n) => ReferenceValue::Leaf(ReferenceValueLeaf::I64(*n)),
            RowValue::F64(f) => ReferenceValue::Leaf(ReferenceValueLeaf::F64(*f)),
            RowValue::Bool(b) => ReferenceValue::Leaf(ReferenceValueLeaf::Bool(*b)),
            RowValue::Date(d) => ReferenceValue::Leaf(ReferenceValueLeaf::Date(*d)),
            RowValue::Point(lat, lon) => ReferenceValue::Object(Entries::Point(*lat, *lon, 0)),
            RowValue::Items(items) => ReferenceValue::Array(items.clone()),
            RowValue::Object(fields) => ReferenceValue::Object(Entries::Row(fields.clone())),
        }
    }
}

/// The values of a list in a row: non-null ones, as the field's type reads them.
#[derive(Clone, Debug)]
pub(super) struct Items<'a> {
    item: &'a Col<'a>,
    next: usize,
    end: usize,
    /// Only the strings (the list as `text` holds it).
    strings_only: bool,
    rounding: Option<Rounding>,
}

impl<'a> Iterator for Items<'a> {
    type Item = RowValue<'a>;

    fn next(&mut self) -> Option<RowValue<'a>> {
        while self.next < self.end {
            let i = self.next;
            self.next += 1;
            if self.item.is_null(i) {
                continue;
            }
            let Some(value) = self.item.value(i) else {
                continue;
            };
            if self.strings_only && !matches!(value, RowValue::Str(_)) {
                continue;
            }
            return Some(value.rounded(self.rounding));
        }
        None
    }
}

/// The entries of an object value: a row's fields, or a point's coordinates.
#[derive(Clone, Debug)]
pub(super) enum Entries<'a> {
    Row(Fields<'a>),
    /// Latitude, longitude, and how many of the two were taken.
    Point(f64, f64, u8),
}

impl<'a> Iterator for Entries<'a> {
    type Item = (&'a str, RowValue<'a>);

    fn next(&mut self) -> Option<(&'a str, RowValue<'a>)> {
        match self {
            Entries::Row(fields) => fields.next(),
            Entries::Point(lat, lon, taken) => {
                *taken += 1;
                match *taken {
                    1 => Some(("lat", RowValue::F64(*lat))),
                    2 => Some(("lon", RowValue::F64(*lon))),
                    _ => None,
                }
            }
        }
    }
}

/// A field of the batch the document index holds: its name, column, and how it is indexed.
#[derive(Debug)]
pub(super) struct Field<'a> {
    pub name: &'a str,
    pub col: Col<'a>,
    /// An IP field's addresses are also in `ip`.
    pub is_ip: bool,
    /// In `kw` alone (`_id`).
    pub keyword_only: bool,
    pub rounding: Option<Rounding>,
}

/// Which of a row's objects: `text` (its strings, but keyword-only fields) or `kw` (every
/// value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Text,
    Keyword,
}

/// The fields of one row that go into one of its objects, in the batch's column order.
#[derive(Clone, Debug)]
pub(super) struct Fields<'a> {
    fields: &'a [Field<'a>],
    row: usize,
    next: usize,
    kind: Kind,
}

impl<'a> Fields<'a> {
    pub(super) fn of(fields: &'a [Field<'a>], row: usize, kind: Kind) -> Fields<'a> {
        Fields {
            fields,
            row,
            next: 0,
            kind,
        }
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = (&'a str, RowValue<'a>);

    fn next(&mut self) -> Option<(&'a str, RowValue<'a>)> {
        while let Some(field) = self.fields.get(self.next) {
            self.next += 1;
            if field.col.is_null(self.row) {
                continue;
            }
            let Some(value) = field.col.value(self.row) else {
                continue;
            };
            let value = match self.kind {
                Kind::Keyword if field.keyword_only => value,
                Kind::Keyword => value.rounded(field.rounding),
                Kind::Text if field.keyword_only => continue,
                Kind::Text => match value {
                    RowValue::Str(_) => value,
                    RowValue::Items(items) => {
                        let strings = Items {
                            strings_only: true,
                            ..items
                        };
                        if strings.clone().next().is_none() {
                            continue;
                        }
                        RowValue::Items(strings)
                    }
                    _ => continue,
                },
            };
            return Some((field.name, value));
        }
        None
    }
}
