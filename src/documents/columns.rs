//! Dynamic mapping: the columns documents need, and their rows in a dataset's schema.
//!
//! A new field gets a column of the type its first value has (bool; int64 for a whole number;
//! float64 for another number; `timestamp[ms,UTC]` for a string that is a date; utf8 for any
//! other string). An array is several values of one field, as in Elasticsearch: a `list<T>`
//! column, `T` by its first value and widened to fit the others (an array holding objects is
//! kept as its JSON text). A value that does not fit its column is converted when it can be
//! without loss (`"42"` into an int64 column, a whole number into float64, Unix milliseconds
//! into a date, one value into a list of one); otherwise the column changes type, once and for
//! good: an int64 column meeting a fraction becomes float64, a scalar column meeting an array a
//! list, any other becomes utf8 (text, or a list of texts), and earlier rows read in the new
//! type (ADR 5).

use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
};

use arrow::{
    array::{
        ArrayRef, BooleanBuilder, Decimal128Builder, FixedSizeListBuilder, Float32Builder,
        Float64Builder, Int64Builder, RecordBatch, StringBuilder, StructArray,
        TimestampMillisecondBuilder, TimestampNanosecondBuilder,
    },
    buffer::NullBuffer,
    datatypes::{DataType, Field},
};
use serde_json::Value;
use strata_projections::{
    catalog::{ColumnDef, DeclaredField, TableDef},
    schema::{ColumnType, TimestampUnit},
    table::{
        dates::{self, DateFormat},
        geo, rows,
    },
};

use super::{Document, ID_FIELD, IGNORED_FIELD, Refusal, TIMESTAMP_FIELD, parse_date};

/// The most columns a dataset may have (Elasticsearch's default `total_fields` limit).
pub const MAX_COLUMNS: usize = 1000;

const DATE: ColumnType = ColumnType::Timestamp {
    unit: TimestampUnit::Milliseconds,
    utc: true,
};

/// A `date_nanos` field's column: nanoseconds since the epoch.
pub const NANOS: ColumnType = ColumnType::Timestamp {
    unit: TimestampUnit::Nanoseconds,
    utc: true,
};

/// Whether an array holds objects: kept as its JSON text, not as several values.
fn holds_objects(items: &[Value]) -> bool {
    items.iter().any(Value::is_object)
}

/// The type of a new column whose first value is `value`.
fn inferred(value: &Value) -> ColumnType {
    match value {
        Value::Bool(_) => ColumnType::Bool,
        Value::Number(n) if n.is_i64() => ColumnType::Int64,
        Value::Number(_) => ColumnType::Float64,
        Value::String(text) if parse_date(text).is_some_and(dates::indexable) => DATE,
        Value::Array(items) if !holds_objects(items) => {
            // The first value's type, widened until every value fits.
            let mut item = items.first().map_or(ColumnType::Utf8, inferred);
            for value in items {
                while cell(&item, Reading::default(), value).is_none() {
                    match widened(&item, Reading::default(), value) {
                        Some(to) if to != item => item = to,
                        _ => {
                            item = ColumnType::Utf8;
                            break;
                        }
                    }
                }
            }
            ColumnType::List(Box::new(item))
        }
        _ => ColumnType::Utf8,
    }
}

/// A value converted for a column of its type.
#[derive(Debug, PartialEq)]
enum Cell {
    Bool(bool),
    Int(i64),
    Float(f64),
    /// A decimal's value in units of its column's scale.
    Decimal(i128),
    Text(String),
    Millis(i64),
    Nanos(i64),
    Point(geo::Point),
    Vector(Vec<f32>),
    /// The values of a multi-valued field.
    List(Vec<Cell>),
}

/// How a dataset's mapping says its fields read values, read once per request: the date
/// formats it declares, and the fields it declares (IP addresses, nanosecond dates, and which
/// may not change type).
#[derive(Debug, Default)]
pub struct Formats {
    dates: HashMap<String, DateFormat>,
    declared: HashMap<String, DeclaredField>,
}

impl Formats {
    pub fn of(table: &TableDef) -> Formats {
        Formats {
            dates: table
                .date_formats
                .iter()
                .filter_map(|(name, text)| Some((name.clone(), DateFormat::parse(text).ok()?)))
                .collect(),
            declared: table
                .declared
                .iter()
                .map(|(name, field)| (name.clone(), field.clone()))
                .collect(),
        }
    }

    /// The date format field `field` declares.
    pub fn get(&self, field: &str) -> Option<&DateFormat> {
        self.dates.get(field)
    }

    /// What field `field` was declared as, if it was.
    pub fn declared(&self, field: &str) -> Option<&DeclaredField> {
        self.declared.get(field)
    }

    /// How the values of field `field`, in a `column` column, are read.
    fn reading(&self, field: &str, column: &ColumnType) -> Reading<'_> {
        let es_type = self.declared(field).map(|d| d.es_type.as_str());
        Reading {
            date: self.get(field).filter(|_| is_date(column)),
            ip: es_type == Some("ip"),
            nanos: es_type == Some("date_nanos"),
        }
    }
}

/// How a field's values are read, beyond its column's type.
#[derive(Clone, Copy, Debug, Default)]
struct Reading<'a> {
    /// A date field's declared format.
    date: Option<&'a DateFormat>,
    /// An IP address field: a value must be an IPv4 or IPv6 address, kept in its canonical form.
    ip: bool,
    /// A `date_nanos` field: a date must be from 1970 on (Elasticsearch keeps nanoseconds
    /// since the epoch, unsigned).
    nanos: bool,
}

/// `value` as a cell of a `column` column, read as `reading` says; `None` when it does not fit.
/// A date must be one a document index holds (1677 to 2262).
fn cell(column: &ColumnType, reading: Reading<'_>, value: &Value) -> Option<Cell> {
    let cell = cell_any(column, reading, value);
    match cell {
        Some(Cell::Millis(ms)) if !dates::indexable(ms) || (reading.nanos && ms < 0) => None,
        cell => cell,
    }
}

/// An IP address in the canonical form Elasticsearch prints it in: IPv4 dotted, IPv6 as RFC
/// 5952 says (an IPv4-mapped IPv6 address as IPv4).
pub fn canonical_ip(text: &str) -> Option<String> {
    let address: std::net::IpAddr = text.trim().parse().ok()?;
    Some(match address {
        std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        v4 => v4.to_string(),
    })
}

/// Whether a column is a date column, or a list of dates (a declared format reads them).
fn is_date(column: &ColumnType) -> bool {
    match column {
        ColumnType::List(item) => **item == DATE || **item == NANOS,
        column => *column == DATE || *column == NANOS,
    }
}

fn cell_any(column: &ColumnType, reading: Reading<'_>, value: &Value) -> Option<Cell> {
    if let Some(format) = reading.date
        && *column == DATE
        && !value.is_array()
    {
        return format.read(value).map(Cell::Millis);
    }
    // A nanosecond date: in the field's format, else an ISO date to the nanosecond or epoch
    // milliseconds (with a fraction: `1540815132123.456789`), from 1970 to 2262.
    if *column == NANOS && !value.is_array() {
        let iso = DateFormat::iso_or_epoch_millis();
        return reading
            .date
            .unwrap_or(&iso)
            .read_nanos(value)
            .filter(|ns| *ns >= 0)
            .map(Cell::Nanos);
    }
    match (column, value) {
        // Several values, each in the item type; one value is a list of one.
        (ColumnType::List(item), Value::Array(items)) => items
            .iter()
            .map(|value| cell(item, reading, value))
            .collect::<Option<Vec<Cell>>>()
            .map(Cell::List),
        (ColumnType::List(item), value) => cell(item, reading, value).map(|c| Cell::List(vec![c])),
        (ColumnType::Utf8, Value::String(text)) if reading.ip => canonical_ip(text).map(Cell::Text),
        (ColumnType::Utf8, _) if reading.ip => None,
        // An array in a column of one value: the column becomes a list (an array of objects
        // is text).
        (ColumnType::Utf8, Value::Array(items)) if !holds_objects(items) => None,
        (_, Value::Array(items))
            if !holds_objects(items)
                && !matches!(column, ColumnType::GeoPoint | ColumnType::Vector { .. }) =>
        {
            None
        }
        (ColumnType::Utf8, Value::String(s)) => Some(Cell::Text(s.clone())),
        (ColumnType::Utf8, Value::Bool(b)) => Some(Cell::Text(b.to_string())),
        (ColumnType::Utf8, Value::Number(n)) => Some(Cell::Text(n.to_string())),
        (ColumnType::Utf8, value) => Some(Cell::Text(value.to_string())),
        (ColumnType::Int64, Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| whole(*f)).map(|f| f as i64))
            .map(Cell::Int),
        (ColumnType::Int64, Value::String(s)) => s.trim().parse().ok().map(Cell::Int),
        (ColumnType::Float64, Value::Number(n)) => n.as_f64().map(Cell::Float),
        (ColumnType::Float64, Value::String(s)) => s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(Cell::Float),
        (ColumnType::Decimal { precision, scale }, Value::Number(_) | Value::String(_)) => {
            decimal_units(value, *precision, *scale).map(Cell::Decimal)
        }
        (ColumnType::Bool, Value::Bool(b)) => Some(Cell::Bool(*b)),
        (ColumnType::Bool, Value::String(s)) => match s.as_str() {
            "true" => Some(Cell::Bool(true)),
            "false" => Some(Cell::Bool(false)),
            _ => None,
        },
        (ColumnType::GeoPoint, value) => geo::parse_point(value).ok().map(Cell::Point),
        (ColumnType::Vector { dim }, Value::Array(items)) if items.len() == *dim as usize => items
            .iter()
            .map(|v| v.as_f64().map(|f| f as f32).filter(|f| f.is_finite()))
            .collect::<Option<Vec<f32>>>()
            .map(Cell::Vector),
        // Elasticsearch's default date format, `strict_date_optional_time||epoch_millis`: a
        // string of digits in a date field is milliseconds.
        (column, value) if *column == DATE => match value {
            Value::String(s) => parse_date(s)
                .or_else(|| s.trim().parse::<i64>().ok())
                .map(Cell::Millis),
            Value::Number(n) => n.as_i64().map(Cell::Millis),
            _ => None,
        },
        _ => None,
    }
}

/// A JSON number (or a number's text) as a decimal of `scale` digits after the point, in units
/// of that scale, rounded half away from zero (as Elasticsearch's scaled floats round); `None`
/// when it is no number or needs more than `precision` digits.
fn decimal_units(value: &Value, precision: u8, scale: i8) -> Option<i128> {
    let text = match value {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.trim().to_owned(),
        _ => return None,
    };
    let units = match text.contains(['e', 'E']) {
        // Exponent notation: through the float it reads as.
        true => {
            let f = text.parse::<f64>().ok()?;
            let scaled = (f * 10f64.powi(i32::from(scale))).round();
            (scaled.is_finite() && scaled.abs() < 1e38).then_some(scaled as i128)?
        }
        false => {
            let (negative, digits) = match text.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, text.strip_prefix('+').unwrap_or(&text)),
            };
            let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
            if whole.is_empty() && fraction.is_empty()
                || !whole
                    .bytes()
                    .chain(fraction.bytes())
                    .all(|b| b.is_ascii_digit())
            {
                return None;
            }
            let scale = usize::try_from(scale).ok()?;
            let kept: String = fraction
                .chars()
                .chain(std::iter::repeat('0'))
                .take(scale)
                .collect();
            let digits = format!("{whole}{kept}");
            let digits = digits.trim_start_matches('0');
            let mut units: i128 = match digits.is_empty() {
                true => 0,
                false => digits.parse().ok()?,
            };
            // The first digit past the scale rounds.
            if fraction.as_bytes().get(scale).is_some_and(|d| *d >= b'5') {
                units = units.checked_add(1)?;
            }
            if negative { -units } else { units }
        }
    };
    (units.unsigned_abs() < 10u128.checked_pow(u32::from(precision))?).then_some(units)
}

fn whole(f: f64) -> bool {
    f.is_finite() && f.fract() == 0.0 && f.abs() < 9.0e15
}

/// The type a `column` column takes to hold `value` too; `None` when it cannot change (a type
/// dynamic mapping never makes, such as a vector). `reading`: how the field reads values.
fn widened(column: &ColumnType, reading: Reading<'_>, value: &Value) -> Option<ColumnType> {
    match (column, value) {
        // The items of a list widen until they hold every value of the array.
        (ColumnType::List(item), Value::Array(items)) => {
            let mut item = (**item).clone();
            for value in items {
                if cell(&item, reading, value).is_none() {
                    item = widened(&item, reading, value).unwrap_or(ColumnType::Utf8);
                }
            }
            Some(ColumnType::List(Box::new(item)))
        }
        (ColumnType::List(item), value) => {
            Some(ColumnType::List(Box::new(widened(item, reading, value)?)))
        }
        (ColumnType::GeoPoint | ColumnType::Vector { .. }, _) => None,
        // A column of one value meeting an array: a list of its type, widened to fit.
        (column, Value::Array(items)) if !holds_objects(items) => {
            widened(&ColumnType::List(Box::new(column.clone())), reading, value)
        }
        (ColumnType::Int64 | ColumnType::Decimal { .. }, Value::Number(_)) => {
            Some(ColumnType::Float64)
        }
        (
            ColumnType::Int64 | ColumnType::Float64 | ColumnType::Decimal { .. } | ColumnType::Bool,
            _,
        ) => Some(ColumnType::Utf8),
        (column, _) if *column == DATE || *column == NANOS => Some(ColumnType::Utf8),
        _ => None,
    }
}

/// Whether `to` is `column` or a list of its type: how a declared field may change.
fn same_kind(column: &ColumnType, to: &ColumnType) -> bool {
    let item = |t: &ColumnType| match t {
        ColumnType::List(item) => (**item).clone(),
        t => t.clone(),
    };
    item(column) == item(to)
}

/// The refusal of `value` in field `name` (a `column` column, `declared` so).
fn malformed(
    name: &str,
    column: &ColumnType,
    declared: Option<&DeclaredField>,
    reading: Reading<'_>,
    value: &Value,
) -> Refusal {
    let kind = declared.map_or_else(|| column.to_string(), |d| d.es_type.clone());
    if reading.nanos
        && let Some(text) = value.as_str()
        && let Some(ms) = parse_date(text)
    {
        let why = match ms < 0 {
            true => "is before the epoch in 1970",
            false => "is after 2262-04-11T23:47:16.854775807",
        };
        return Refusal::parsing(format!(
            "failed to parse field [{name}] of type [{kind}]: {value} cannot be stored in nanosecond resolution"
        ))
        .caused_by(
            "illegal_argument_exception",
            format!("date[{text}] {why} and cannot be stored in nanosecond resolution"),
        );
    }
    Refusal::parsing(match reading.date {
        Some(format) if format.read(value).is_some() => format!(
            "failed to parse field [{name}] of type [{kind}]: {value} is outside the dates an index holds (1677-09-21 to 2262-04-11)"
        ),
        Some(_) => {
            format!("failed to parse field [{name}] of type [{kind}]: {value} is not in its format")
        }
        None if reading.nanos => format!(
            "failed to parse field [{name}] of type [{kind}]: {value} is not a date from 1970-01-01 to 2262-04-11, as nanosecond dates must be"
        ),
        None if reading.ip => format!(
            "failed to parse field [{name}] of type [{kind}]: {value} is not an IP string literal"
        ),
        None => format!("failed to parse field [{name}] of type [{kind}]: {value} does not fit it"),
    })
}

/// Leaves out of `document` the values of its fields declared with `ignore_malformed` that do
/// not fit their columns (`current`), naming those fields in its `_ignored` field, as
/// Elasticsearch does. Several values of one field are kept or left out one by one.
pub fn drop_malformed(current: &[ColumnDef], formats: &Formats, document: &mut Document) {
    let mut ignored: Vec<Value> = Vec::new();
    let fields = std::mem::take(&mut document.fields);
    for (name, value) in fields {
        let column = current.iter().find(|c| c.name == name);
        let ignore = formats.declared(&name).is_some_and(|d| d.ignore_malformed);
        let (Some(column), true) = (column, ignore) else {
            document.fields.push((name, value));
            continue;
        };
        let column = &column.data_type;
        let reading = formats.reading(&name, column);
        let item = match column {
            ColumnType::List(item) => (**item).clone(),
            column => column.clone(),
        };
        let fits = |value: &Value| {
            cell(column, reading, value).is_some() || cell(&item, reading, value).is_some()
        };
        let kept = match value {
            Value::Array(items)
                if !matches!(item, ColumnType::GeoPoint | ColumnType::Vector { .. }) =>
            {
                let before = items.len();
                let kept: Vec<Value> = items.into_iter().filter(|v| fits(v)).collect();
                if kept.len() < before {
                    ignored.push(Value::from(name.clone()));
                }
                (!kept.is_empty()).then_some(Value::Array(kept))
            }
            value if fits(&value) => Some(value),
            _ => {
                ignored.push(Value::from(name.clone()));
                None
            }
        };
        if let Some(value) = kept {
            document.fields.push((name, value));
        }
    }
    if !ignored.is_empty() {
        document
            .fields
            .push((IGNORED_FIELD.to_owned(), Value::Array(ignored)));
    }
}

/// Why `document`'s value of a range field (`date_range`, `long_range`, ...) is refused, if it
/// is: a range is an object of bounds (`gte` or `gt`, `lte` or `lt`), one range to a field,
/// its lower bound not above its upper.
fn range_refusal(formats: &Formats, columns: &[ColumnDef], document: &Document) -> Option<Refusal> {
    use super::mapping::{RANGE_BOUNDS, range_bound_type};
    let mut bounds: BTreeMap<&str, Vec<(&str, &Value)>> = BTreeMap::new();
    for (name, value) in &document.fields {
        let declared = formats.declared(name);
        if let Some(kind) = declared
            .map(|d| d.es_type.as_str())
            .filter(|k| range_bound_type(k).is_some())
        {
            let why = match value {
                Value::Array(_) => "several ranges in one field are not served",
                _ => "a range is an object of gte or gt, and lte or lt",
            };
            return Some(Refusal::parsing(format!(
                "failed to parse field [{name}] of type [{kind}]: {value}: {why}"
            )));
        }
        let Some((field, end)) = name.rsplit_once('.') else {
            continue;
        };
        let Some(kind) = formats
            .declared(field)
            .map(|d| d.es_type.as_str())
            .filter(|k| range_bound_type(k).is_some())
        else {
            continue;
        };
        if !RANGE_BOUNDS.contains(&end) {
            return Some(Refusal::parsing(format!(
                "failed to parse field [{field}] of type [{kind}]: error parsing field [{field}], with unknown parameter [{end}]"
            )));
        }
        if value.is_array() || value.is_object() {
            return Some(Refusal::parsing(format!(
                "failed to parse field [{field}] of type [{kind}]: its bound [{end}] must be one value, not {value}"
            )));
        }
        bounds.entry(field).or_default().push((end, value));
    }
    for (field, ends) in bounds {
        let has = |end: &str| ends.iter().any(|(e, _)| *e == end);
        if has("gte") && has("gt") || has("lte") && has("lt") {
            return Some(Refusal::parsing(format!(
                "failed to parse field [{field}]: a range takes gte or gt, and lte or lt, not both of a pair"
            )));
        }
        // Each bound as a number (dates as milliseconds), to compare them.
        let number = |end: &str| -> Option<f64> {
            let (_, value) = ends.iter().find(|(e, _)| *e == end)?;
            let name = format!("{field}.{end}");
            let column = &columns.iter().find(|c| c.name == name)?.data_type;
            match cell(column, formats.reading(&name, column), value)? {
                Cell::Int(n) => Some(n as f64),
                Cell::Float(f) => Some(f),
                Cell::Millis(ms) => Some(ms as f64),
                _ => None,
            }
        };
        let low = number("gte").or_else(|| number("gt"));
        let high = number("lte").or_else(|| number("lt"));
        if let (Some(low), Some(high)) = (low, high)
            && low > high
        {
            return Some(Refusal::parsing(format!(
                "failed to parse field [{field}]: min value ({low}) is greater than max value ({high})"
            )));
        }
    }
    None
}

/// The columns a dataset whose columns are `current` needs to hold `documents` (`None` marks a
/// document already refused): `current` in order, some retyped, then new ones in the order they
/// first appear. A document whose fields would pass [`MAX_COLUMNS`], or that holds a value no
/// column can take, is refused.
pub fn grow(
    current: &[ColumnDef],
    formats: &Formats,
    documents: &[Option<&Document>],
) -> (Vec<ColumnDef>, Vec<Option<Refusal>>) {
    let mut columns = current.to_vec();
    let mut position: HashMap<String, usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.clone(), i))
        .collect();
    let mut refusals = Vec::with_capacity(documents.len());
    for document in documents {
        let Some(document) = document else {
            refusals.push(None);
            continue;
        };
        let new_fields = document
            .fields
            .iter()
            .filter(|(name, _)| !position.contains_key(name))
            .count();
        if new_fields > 0 && columns.len() + new_fields > MAX_COLUMNS {
            refusals.push(Some(Refusal::illegal(format!(
                "Limit of total fields [{MAX_COLUMNS}] has been exceeded"
            ))));
            continue;
        }
        // Nothing changes unless the whole document fits. A field that reads another's values
        // (an alias, a multi-field) holds none of its own.
        let mut changes: Vec<(usize, ColumnType)> = Vec::new();
        let mut refusal = document
            .fields
            .iter()
            .find(|(name, _)| formats.declared(name).is_some_and(|d| d.path.is_some()))
            .map(|(name, _)| {
                Refusal::parsing(format!(
                    "Cannot write to a field alias [{name}]: it reads the values of [{}]",
                    formats
                        .declared(name)
                        .and_then(|d| d.path.clone())
                        .unwrap_or_default()
                ))
            });
        if refusal.is_none() {
            refusal = range_refusal(formats, &columns, document);
        }
        if refusal.is_none() {
            for (name, value) in &document.fields {
                let Some(&at) = position.get(name) else {
                    continue;
                };
                let column = changes
                    .iter()
                    .rev()
                    .find(|(i, _)| *i == at)
                    .map_or(&columns[at].data_type, |(_, t)| t);
                let reading = formats.reading(name, column);
                if cell(column, reading, value).is_some() {
                    continue;
                }
                // A declared field keeps its type (one value or several): a value it cannot take
                // is refused.
                let declared = formats.declared(name);
                let keeps_type = |to: &ColumnType| declared.is_none() || same_kind(column, to);
                match widened(column, reading, value).filter(keeps_type) {
                    Some(to) => changes.push((at, to)),
                    None => {
                        refusal = Some(malformed(
                            name,
                            &columns[at].data_type,
                            declared,
                            reading,
                            value,
                        ));
                        break;
                    }
                }
            }
        }
        if refusal.is_some() {
            refusals.push(refusal);
            continue;
        }
        for (name, value) in &document.fields {
            match position.get(name) {
                Some(&at) => {
                    let column = &columns[at].data_type;
                    let reading = formats.reading(name, column);
                    if cell(column, reading, value).is_none()
                        && let Some(to) = widened(column, reading, value)
                    {
                        columns[at].data_type = to;
                    }
                }
                None => {
                    position.insert(name.clone(), columns.len());
                    columns.push(ColumnDef {
                        name: name.clone(),
                        data_type: inferred(value),
                        nullable: true,
                    });
                }
            }
        }
        refusals.push(None);
    }
    (columns, refusals)
}

/// A builder of one column.
enum Builder {
    Bool(BooleanBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Decimal(Decimal128Builder),
    Text(StringBuilder),
    Millis(TimestampMillisecondBuilder),
    Nanos(TimestampNanosecondBuilder),
    /// Latitudes, longitudes and which points are there.
    Point(Vec<f64>, Vec<f64>, Vec<bool>),
    Vector(FixedSizeListBuilder<Float32Builder>),
    /// A list column: its items' builder, the offsets of each row's items, and which rows have
    /// a list.
    List {
        item: ColumnType,
        items: Box<Builder>,
        offsets: Vec<i32>,
        valid: Vec<bool>,
    },
}

impl Builder {
    fn new(column: &ColumnType, capacity: usize) -> Option<Builder> {
        Some(match column {
            ColumnType::Bool => Builder::Bool(BooleanBuilder::with_capacity(capacity)),
            ColumnType::Int64 => Builder::Int(Int64Builder::with_capacity(capacity)),
            ColumnType::Float64 => Builder::Float(Float64Builder::with_capacity(capacity)),
            ColumnType::Decimal { precision, scale } => Builder::Decimal(
                Decimal128Builder::with_capacity(capacity)
                    .with_precision_and_scale(*precision, *scale)
                    .ok()?,
            ),
            ColumnType::Utf8 => {
                Builder::Text(StringBuilder::with_capacity(capacity, capacity * 16))
            }
            column if *column == DATE => Builder::Millis(
                TimestampMillisecondBuilder::with_capacity(capacity).with_timezone("UTC"),
            ),
            column if *column == NANOS => Builder::Nanos(
                TimestampNanosecondBuilder::with_capacity(capacity).with_timezone("UTC"),
            ),
            ColumnType::GeoPoint => Builder::Point(
                Vec::with_capacity(capacity),
                Vec::with_capacity(capacity),
                Vec::with_capacity(capacity),
            ),
            ColumnType::Vector { dim } => Builder::Vector(
                FixedSizeListBuilder::with_capacity(
                    Float32Builder::with_capacity(capacity * *dim as usize),
                    *dim as i32,
                    capacity,
                )
                .with_field(Field::new("item", DataType::Float32, true)),
            ),
            ColumnType::List(item) if item.is_scalar() => Builder::List {
                item: (**item).clone(),
                items: Box::new(Builder::new(item, capacity)?),
                offsets: vec![0],
                valid: Vec::with_capacity(capacity),
            },
            _ => return None,
        })
    }

    fn push(&mut self, cell: Option<Cell>) {
        match (self, cell) {
            (
                Builder::List {
                    items,
                    offsets,
                    valid,
                    ..
                },
                cell,
            ) => {
                let values = match cell {
                    Some(Cell::List(values)) => Some(values),
                    _ => None,
                };
                valid.push(values.is_some());
                let mut end = offsets.last().copied().unwrap_or(0);
                for value in values.into_iter().flatten() {
                    items.push(Some(value));
                    end += 1;
                }
                offsets.push(end);
            }
            (Builder::Bool(b), Some(Cell::Bool(v))) => b.append_value(v),
            (Builder::Int(b), Some(Cell::Int(v))) => b.append_value(v),
            (Builder::Float(b), Some(Cell::Float(v))) => b.append_value(v),
            (Builder::Decimal(b), Some(Cell::Decimal(v))) => b.append_value(v),
            (Builder::Text(b), Some(Cell::Text(v))) => b.append_value(v),
            (Builder::Millis(b), Some(Cell::Millis(v))) => b.append_value(v),
            (Builder::Nanos(b), Some(Cell::Nanos(v))) => b.append_value(v),
            (Builder::Point(lat, lon, valid), cell) => {
                let point = match cell {
                    Some(Cell::Point(p)) => Some(p),
                    _ => None,
                };
                lat.push(point.map_or(0.0, |p| p.lat));
                lon.push(point.map_or(0.0, |p| p.lon));
                valid.push(point.is_some());
            }
            (Builder::Vector(b), Some(Cell::Vector(v))) => {
                b.values().append_slice(&v);
                b.append(true);
            }
            (Builder::Vector(b), _) => {
                let dim = b.value_length() as usize;
                b.values().append_nulls(dim);
                b.append(false);
            }
            (Builder::Bool(b), _) => b.append_null(),
            (Builder::Int(b), _) => b.append_null(),
            (Builder::Float(b), _) => b.append_null(),
            (Builder::Decimal(b), _) => b.append_null(),
            (Builder::Text(b), _) => b.append_null(),
            (Builder::Millis(b), _) => b.append_null(),
            (Builder::Nanos(b), _) => b.append_null(),
        }
    }

    fn finish(self) -> ArrayRef {
        match self {
            Builder::Bool(mut b) => Arc::new(b.finish()),
            Builder::Int(mut b) => Arc::new(b.finish()),
            Builder::Float(mut b) => Arc::new(b.finish()),
            Builder::Decimal(mut b) => Arc::new(b.finish()),
            Builder::Text(mut b) => Arc::new(b.finish()),
            Builder::Millis(mut b) => Arc::new(b.finish()),
            Builder::Nanos(mut b) => Arc::new(b.finish()),
            Builder::Point(lat, lon, valid) => {
                let children: Vec<ArrayRef> = vec![
                    Arc::new(arrow::array::Float64Array::from(lat)),
                    Arc::new(arrow::array::Float64Array::from(lon)),
                ];
                Arc::new(StructArray::new(
                    strata_projections::schema::geo_point_fields(),
                    children,
                    Some(NullBuffer::from(valid)),
                ))
            }
            Builder::Vector(mut b) => Arc::new(b.finish()),
            Builder::List {
                item,
                items,
                offsets,
                valid,
            } => Arc::new(arrow::array::ListArray::new(
                Arc::new(Field::new("item", item.to_arrow(), true)),
                arrow::buffer::OffsetBuffer::new(offsets.into()),
                items.finish(),
                Some(NullBuffer::from(valid)),
            )),
        }
    }
}

/// Where a document went: its row in the batch; or `Err`, with why it was refused here (`None`:
/// it was refused before).
pub type Placement = Result<usize, Option<Refusal>>;

/// The rows of `documents` (`None` marks one already refused) in `table`'s schema, whose columns
/// [`grow`] made fit them: the batch, and for each document its row in the batch or why it is
/// refused.
pub fn rows(
    table: &TableDef,
    documents: &[Option<&Document>],
) -> Result<(RecordBatch, Vec<Placement>), Refusal> {
    let schema = rows::data_schema(table);
    let capacity = documents.len();
    let mut builders = Vec::with_capacity(table.columns.len());
    let mut position: HashMap<&str, usize> = HashMap::with_capacity(table.columns.len());
    for (i, column) in table.columns.iter().enumerate() {
        let builder = Builder::new(&column.data_type, capacity).ok_or_else(|| {
            Refusal::illegal(format!(
                "column [{}] of type [{}] cannot take records yet",
                column.name, column.data_type
            ))
        })?;
        builders.push(builder);
        position.insert(column.name.as_str(), i);
    }
    let id_at = position.get(ID_FIELD).copied();
    let timestamp_at = position.get(TIMESTAMP_FIELD).copied();
    let formats = Formats::of(table);
    let mut placed = Vec::with_capacity(documents.len());
    let mut cells: Vec<Option<Cell>> = Vec::new();
    let mut count = 0;
    for document in documents {
        let Some(document) = document else {
            placed.push(Err(None));
            continue;
        };
        cells.clear();
        cells.resize_with(builders.len(), || None);
        let mut refusal = None;
        for (name, value) in &document.fields {
            let Some(&at) = position.get(name.as_str()) else {
                refusal = Some(Refusal::illegal(format!(
                    "field [{name}] has no column (the dataset's columns changed meanwhile)"
                )));
                break;
            };
            let column = &table.columns[at].data_type;
            match cell(column, formats.reading(name, column), value) {
                Some(c) => cells[at] = Some(c),
                None => {
                    refusal = Some(Refusal::parsing(format!(
                        "failed to parse field [{name}] of type [{}]",
                        table.columns[at].data_type
                    )));
                    break;
                }
            }
        }
        if let Some(refusal) = refusal {
            placed.push(Err(Some(refusal)));
            continue;
        }
        if let Some(at) = id_at {
            cells[at] = Some(Cell::Text(document.id.clone()));
        }
        if let Some(at) = timestamp_at {
            cells[at] = Some(Cell::Millis(document.timestamp));
        }
        for (builder, cell) in builders.iter_mut().zip(cells.drain(..)) {
            builder.push(cell);
        }
        placed.push(Ok(count));
        count += 1;
    }
    let arrays: Vec<ArrayRef> = builders.into_iter().map(Builder::finish).collect();
    let batch = RecordBatch::try_new_with_options(
        schema,
        arrays,
        &arrow::array::RecordBatchOptions::new().with_row_count(Some(count)),
    )
    .map_err(|error| Refusal::illegal(format!("the records do not form rows: {error}")))?;
    Ok((batch, placed))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn decimals_read_exactly_and_round_as_scaled_floats_do() {
        let units = |value: Value| decimal_units(&value, 6, 2);
        assert_eq!(units(json!(12.34)), Some(1234));
        assert_eq!(units(json!("12.34")), Some(1234));
        assert_eq!(units(json!(7)), Some(700));
        assert_eq!(units(json!("-0.5")), Some(-50));
        assert_eq!(units(json!("1.005")), Some(101));
        assert_eq!(units(json!("1.004")), Some(100));
        assert_eq!(units(json!(1.5e2)), Some(15000));
        // Six digits in all: 9999.99 fits, 10000 does not.
        assert_eq!(units(json!("9999.99")), Some(999_999));
        assert_eq!(units(json!(10000)), None);
        assert_eq!(units(json!("12a")), None);
        assert_eq!(units(json!("")), None);
        assert_eq!(units(json!(true)), None);
        let huge = "9".repeat(60);
        assert_eq!(decimal_units(&json!(huge), 38, 0), None);
    }
    use crate::documents::test_support::{column, dataset};

    fn base() -> Vec<ColumnDef> {
        vec![
            ColumnDef {
                name: ID_FIELD.to_owned(),
                data_type: ColumnType::Utf8,
                nullable: false,
            },
            ColumnDef {
                name: TIMESTAMP_FIELD.to_owned(),
                data_type: DATE,
                nullable: false,
            },
        ]
    }

    fn document(id: &str, value: Value) -> Document {
        let Value::Object(object) = value else {
            panic!()
        };
        Document::from_object(object, id.to_owned(), 1_000).unwrap()
    }

    fn types(columns: &[ColumnDef]) -> Vec<(String, String)> {
        columns
            .iter()
            .map(|c| (c.name.clone(), c.data_type.to_string()))
            .collect()
    }

    #[test]
    fn new_fields_get_the_type_of_their_first_value() {
        let docs = [document(
            "1",
            json!({"status": 200, "took": 1.5, "ok": true, "path": "/a", "at": "2026-11-23T10:00:00Z", "tags": ["x"], "user": {"id": 7}}),
        )];
        let refs: Vec<Option<&Document>> = docs.iter().map(Some).collect();
        let (columns, refusals) = grow(&base(), &Formats::default(), &refs);
        assert!(refusals.iter().all(Option::is_none));
        let names: Vec<(String, String)> = types(&columns)[2..].to_vec();
        let expected: Vec<(String, String)> = [
            ("at", "timestamp[ms,UTC]"),
            ("ok", "bool"),
            ("path", "utf8"),
            ("status", "int64"),
            ("tags", "list<utf8>"),
            ("took", "float64"),
            ("user.id", "int64"),
        ]
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
        assert_eq!(names, expected);
    }

    #[test]
    fn arrays_are_several_values_of_one_field() {
        let docs = [document(
            "1",
            json!({"n": [3, 1], "mixed": [1, 2.5], "words": ["a", 7], "dates": ["2026-11-23", "2026-11-24"], "objects": [{"a": 1}], "none": [], "nested": [[1, 2], [3]]}),
        )];
        let refs: Vec<Option<&Document>> = docs.iter().map(Some).collect();
        let (columns, refusals) = grow(&base(), &Formats::default(), &refs);
        assert!(refusals.iter().all(Option::is_none), "{refusals:?}");
        let expected: Vec<(String, String)> = [
            ("dates", "list<timestamp[ms,UTC]>"),
            ("mixed", "list<float64>"),
            ("n", "list<int64>"),
            ("nested", "list<int64>"),
            ("objects", "utf8"),
            ("words", "list<utf8>"),
        ]
        .iter()
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect();
        assert_eq!(types(&columns)[2..].to_vec(), expected);
        // Rows hold the values; an array of objects is its JSON text.
        let table = dataset(columns);
        let (batch, placed) = rows(&table, &refs).unwrap();
        assert!(placed[0].is_ok());
        let n = batch.column_by_name("n").unwrap();
        assert_eq!(
            crate::documents::source::json_value(n.as_ref(), 0),
            Some(json!([3, 1]))
        );
        let nested = batch.column_by_name("nested").unwrap();
        assert_eq!(
            crate::documents::source::json_value(nested.as_ref(), 0),
            Some(json!([1, 2, 3]))
        );
        let objects = batch.column_by_name("objects").unwrap();
        assert_eq!(
            crate::documents::source::json_value(objects.as_ref(), 0),
            Some(json!("[{\"a\":1}]"))
        );
    }

    #[test]
    fn a_field_of_one_value_becomes_a_list_when_an_array_comes() {
        let mut current = base();
        current.extend([
            column("n", ColumnType::Int64),
            column("s", ColumnType::Utf8),
            column("l", ColumnType::List(Box::new(ColumnType::Int64))),
        ]);
        // One value fits a list as a list of one.
        let fits = [document("1", json!({"l": 5}))];
        let refs: Vec<Option<&Document>> = fits.iter().map(Some).collect();
        assert_eq!(grow(&current, &Formats::default(), &refs).0, current);
        let grows = [document(
            "2",
            json!({"n": [1, 2], "s": ["x", "y"], "l": [1, "text"]}),
        )];
        let refs: Vec<Option<&Document>> = grows.iter().map(Some).collect();
        let (columns, refusals) = grow(&current, &Formats::default(), &refs);
        assert!(refusals.iter().all(Option::is_none));
        assert_eq!(
            types(&columns)[2..].to_vec(),
            [
                ("n".to_owned(), "list<int64>".to_owned()),
                ("s".to_owned(), "list<utf8>".to_owned()),
                ("l".to_owned(), "list<utf8>".to_owned()),
            ]
        );
    }

    #[test]
    fn values_convert_or_the_column_changes_once_for_good() {
        let mut current = base();
        current.extend([
            column("n", ColumnType::Int64),
            column("f", ColumnType::Float64),
            column("b", ColumnType::Bool),
            column("d", DATE),
            column("s", ColumnType::Utf8),
        ]);
        // All of these fit as they are.
        let fits = [
            document(
                "1",
                json!({"n": "42", "f": 3, "b": "true", "d": 1_700_000_000_000_i64, "s": 5}),
            ),
            document("1b", json!({"d": "1700000000000"})),
        ];
        // A date a document index cannot hold (past 2262) does not fit a date column.
        assert!(cell(&DATE, Reading::default(), &json!("9999-01-01")).is_none());
        assert_eq!(inferred(&json!("9999-01-01")), ColumnType::Utf8);
        let refs: Vec<Option<&Document>> = fits.iter().map(Some).collect();
        assert_eq!(grow(&current, &Formats::default(), &refs).0, current);
        // These do not: int64 widens to float64; the others become text.
        let misfits = [
            document("2", json!({"n": 2.5})),
            document("3", json!({"f": "many", "b": 1, "d": "soon"})),
        ];
        let refs: Vec<Option<&Document>> = misfits.iter().map(Some).collect();
        let (columns, _) = grow(&current, &Formats::default(), &refs);
        let after: Vec<String> = columns[2..]
            .iter()
            .map(|c| c.data_type.to_string())
            .collect();
        assert_eq!(after, ["float64", "utf8", "utf8", "utf8", "utf8"]);
        // A float64 column that once met text stays text when it meets a number again.
        let (columns, _) = grow(
            &columns,
            &Formats::default(),
            &[Some(&document("4", json!({"f": 1.5})))],
        );
        assert_eq!(columns[3].data_type, ColumnType::Utf8);
    }

    #[test]
    fn rows_hold_each_document_in_the_schema() {
        let docs = [
            document("a", json!({"status": 200, "path": "/x"})),
            document("b", json!({"status": "oops"})),
            document("c", json!({"path": "/y", "user": {"name": "ann"}})),
        ];
        let refs: Vec<Option<&Document>> = docs.iter().map(Some).collect();
        let (columns, _) = grow(&base(), &Formats::default(), &refs);
        let table = dataset(columns);
        let (batch, placed) = rows(&table, &refs).unwrap();
        assert_eq!(placed.iter().filter(|p| p.is_ok()).count(), 3);
        assert_eq!(batch.num_rows(), 3);
        let text = arrow::util::pretty::pretty_format_batches(&[batch])
            .unwrap()
            .to_string();
        // "status" met text, so it is text; 200 is kept as "200".
        assert!(
            text.contains("| a   | 1970-01-01T00:00:01Z | /x   | 200    |           |"),
            "{text}"
        );
        assert!(
            text.contains("| b   | 1970-01-01T00:00:01Z |      | oops   |           |"),
            "{text}"
        );
        assert!(
            text.contains("| c   | 1970-01-01T00:00:01Z | /y   |        | ann       |"),
            "{text}"
        );
    }

    #[test]
    fn a_document_past_the_column_limit_is_refused_alone() {
        let mut current = base();
        current.extend((2..MAX_COLUMNS).map(|i| column(&format!("c{i}"), ColumnType::Int64)));
        let docs = [
            document("1", json!({"c5": 1})),
            document("2", json!({"brand_new": 1})),
        ];
        let refs: Vec<Option<&Document>> = docs.iter().map(Some).collect();
        let (columns, refusals) = grow(&current, &Formats::default(), &refs);
        assert_eq!(columns.len(), MAX_COLUMNS);
        assert!(refusals[0].is_none());
        assert!(
            refusals[1]
                .as_ref()
                .unwrap()
                .reason
                .contains("Limit of total fields [1000]")
        );
    }
}
