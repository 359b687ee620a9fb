//! Building histograms from the fields of the test-script notation
//! `{{schema:1 sum:3 count:22 z_bucket:1 z_bucket_w:0.001 buckets:[5 10 7] offset:-1
//! n_buckets:[1] n_offset:2 counter_reset_hint:gauge custom_values:[1 2]}}`.
//!
//! As in Prometheus' parser, every field is optional and defaults to zero (or `unknown`), and
//! each side's buckets form a single span starting at the given offset.

use super::{CounterResetHint, FloatHistogram, HistogramError, Span};

/// The fields of the `{{...}}` notation, as written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HistogramFields {
    pub schema: i32,
    pub sum: f64,
    pub count: f64,
    /// `z_bucket`
    pub zero_count: f64,
    /// `z_bucket_w`
    pub zero_threshold: f64,
    /// `buckets`
    pub buckets: Vec<f64>,
    /// `offset`
    pub offset: i32,
    /// `n_buckets`
    pub negative_buckets: Vec<f64>,
    /// `n_offset`
    pub negative_offset: i32,
    pub counter_reset_hint: CounterResetHint,
    pub custom_values: Vec<f64>,
}

impl From<HistogramFields> for FloatHistogram {
    fn from(f: HistogramFields) -> FloatHistogram {
        let span = |buckets: &[f64], offset: i32| {
            if buckets.is_empty() {
                Vec::new()
            } else {
                vec![Span::new(offset, buckets.len() as u32)]
            }
        };
        FloatHistogram {
            counter_reset_hint: f.counter_reset_hint,
            schema: f.schema,
            zero_threshold: f.zero_threshold,
            zero_count: f.zero_count,
            count: f.count,
            sum: f.sum,
            positive_spans: span(&f.buckets, f.offset),
            negative_spans: span(&f.negative_buckets, f.negative_offset),
            positive_buckets: f.buckets,
            negative_buckets: f.negative_buckets,
            custom_values: f.custom_values.into(),
        }
    }
}

impl FloatHistogram {
    /// The histogram written `text` in the test-script notation, braces included.
    pub fn parse_notation(text: &str) -> Result<FloatHistogram, HistogramError> {
        Ok(HistogramFields::parse(text)?.into())
    }
}

impl HistogramFields {
    /// Reads the `{{...}}` notation.
    pub fn parse(text: &str) -> Result<HistogramFields, HistogramError> {
        let bad = |what: &str| HistogramError::Notation(what.to_string());
        let inner = text
            .trim()
            .strip_prefix("{{")
            .and_then(|t| t.strip_suffix("}}"))
            .ok_or_else(|| bad(text))?;
        let mut fields = HistogramFields::default();
        let mut rest = inner.trim_start();
        while !rest.is_empty() {
            let (key, after) = rest.split_once(':').ok_or_else(|| bad(rest))?;
            let key = key.trim();
            let after = after.trim_start();
            let (value, next) = if let Some(list) = after.strip_prefix('[') {
                let (items, next) = list.split_once(']').ok_or_else(|| bad(after))?;
                (Value::List(items), next)
            } else {
                let end = after.find(char::is_whitespace).unwrap_or(after.len());
                (Value::Scalar(&after[..end]), &after[end..])
            };
            fields.set(key, value).map_err(|_| bad(key))?;
            rest = next.trim_start();
        }
        Ok(fields)
    }

    fn set(&mut self, key: &str, value: Value<'_>) -> Result<(), ()> {
        match (key, value) {
            ("schema", Value::Scalar(v)) => self.schema = parse_int(v)?,
            ("sum", Value::Scalar(v)) => self.sum = parse_number(v)?,
            ("count", Value::Scalar(v)) => self.count = parse_number(v)?,
            ("z_bucket", Value::Scalar(v)) => self.zero_count = parse_number(v)?,
            ("z_bucket_w", Value::Scalar(v)) => self.zero_threshold = parse_number(v)?,
            ("offset", Value::Scalar(v)) => self.offset = parse_int(v)?,
            ("n_offset", Value::Scalar(v)) => self.negative_offset = parse_int(v)?,
            ("buckets", Value::List(v)) => self.buckets = parse_list(v)?,
            ("n_buckets", Value::List(v)) => self.negative_buckets = parse_list(v)?,
            ("custom_values", Value::List(v)) => self.custom_values = parse_list(v)?,
            ("counter_reset_hint", Value::Scalar(v)) => {
                self.counter_reset_hint = CounterResetHint::from_name(v).ok_or(())?
            }
            _ => return Err(()),
        }
        Ok(())
    }
}

enum Value<'a> {
    Scalar(&'a str),
    List(&'a str),
}

fn parse_list(items: &str) -> Result<Vec<f64>, ()> {
    items.split_whitespace().map(parse_number).collect()
}

fn parse_int(text: &str) -> Result<i32, ()> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let value = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => i64::from_str_radix(hex, 16).map_err(|_| ())?,
        None => digits.parse::<i64>().map_err(|_| ())?,
    };
    let value = if negative { -value } else { value };
    i32::try_from(value).map_err(|_| ())
}

/// A number as Prometheus' parser reads it: an integer (also hexadecimal) or a float,
/// including `Inf` and `NaN` in any case.
fn parse_number(text: &str) -> Result<f64, ()> {
    if let Ok(i) = parse_int(text) {
        return Ok(f64::from(i));
    }
    text.parse::<f64>().map_err(|_| ())
}
