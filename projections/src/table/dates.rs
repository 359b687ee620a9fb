//! Elasticsearch date formats, as a mapping's date field declares them (`"format":
//! "yyyy-MM-dd HH:mm:ss||epoch_millis"`): how a record's value is read, and how a date is
//! printed back (`_source`, aggregation keys). Several formats joined by `||` are tried in
//! order; the first prints.
//!
//! Served: `epoch_millis`, `epoch_second`, the ISO 8601 names (`strict_date_optional_time`,
//! `date_optional_time`, `date_time`, `strict_date_time`, `date_time_no_millis`, ...), `date`
//! and `strict_date` (`yyyy-MM-dd`), `basic_date` (`yyyyMMdd`), and patterns of Java's
//! DateTimeFormatter letters `y u M d H h m s S a E Z X x` with quoted literals. Dates are UTC
//! unless the pattern has an offset.

use chrono::DateTime;
use serde_json::Value;

/// The earliest and latest dates a document index holds (tantivy keeps nanoseconds in an i64:
/// 1677-09-21 to 2262-04-11), in milliseconds. A record's date outside them is refused.
pub const MIN_MILLIS: i64 = i64::MIN / 1_000_000 + 1;
pub const MAX_MILLIS: i64 = i64::MAX / 1_000_000;

/// Whether a document index can hold the date `ms`.
pub fn indexable(ms: i64) -> bool {
    (MIN_MILLIS..=MAX_MILLIS).contains(&ms)
}

/// A date field's format, read.
#[derive(Clone, Debug, PartialEq)]
pub struct DateFormat {
    parts: Vec<Part>,
}

#[derive(Clone, Debug, PartialEq)]
enum Part {
    EpochMillis,
    EpochSecond,
    /// ISO 8601 dates and times, printed as `2026-11-23T10:00:00.000Z`.
    Iso,
    /// The same, printed to the nanosecond (`strict_date_optional_time_nanos`).
    IsoNanos,
    /// A pattern, in chrono's letters: as it reads, and as it prints (where [`ZONE`] stands
    /// for Java's `X`, which prints `Z` for UTC).
    Pattern {
        chrono: String,
        print: String,
    },
}

/// Where a pattern's `X` prints the zone: `Z` for UTC, else `+01:00`.
const ZONE: char = '\u{1}';

impl DateFormat {
    /// Reads `text` (`a||b`); an unknown name or pattern letter says which.
    pub fn parse(text: &str) -> Result<DateFormat, String> {
        let parts = text
            .split("||")
            .map(|part| part_of(part.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        if parts.is_empty() {
            return Err("a date format is empty".to_owned());
        }
        Ok(DateFormat { parts })
    }

    /// Elasticsearch's default format of a date field, `strict_date_optional_time||epoch_millis`.
    pub fn iso_or_epoch_millis() -> DateFormat {
        DateFormat {
            parts: vec![Part::IsoNanos, Part::EpochMillis],
        }
    }

    /// Elasticsearch's default output format: ISO 8601 with milliseconds.
    pub fn iso() -> DateFormat {
        DateFormat {
            parts: vec![Part::Iso],
        }
    }

    /// The milliseconds `value` stands for, by the first format that reads it.
    pub fn read(&self, value: &Value) -> Option<i64> {
        self.parts.iter().find_map(|part| part.read(value))
    }

    /// The nanoseconds `value` stands for (a `date_nanos` field's), by the first format that
    /// reads it: `1540815132123.456789` in `epoch_millis`, nine digits of a second in a pattern.
    pub fn read_nanos(&self, value: &Value) -> Option<i64> {
        self.parts.iter().find_map(|part| part.read_nanos(value))
    }

    /// `ns` printed by the first format, to the nanosecond where it prints fractions: an epoch
    /// format as a JSON number when whole, else as a string (`"1540815132123.456789"`).
    pub fn print_nanos(&self, ns: i64) -> Value {
        self.parts[0].print_nanos(ns)
    }

    /// `ms` printed by the first format: epoch formats as JSON numbers, the others as strings.
    pub fn print(&self, ms: i64) -> Value {
        self.parts[0].print(ms)
    }

    /// `ms` printed by the first format in the zone `offset` (an aggregation's `time_zone`):
    /// ISO dates with the offset (`2015-12-31T17:00:00.000-07:00`), patterns in local time.
    pub fn print_at(&self, ms: i64, offset: chrono::FixedOffset) -> Value {
        self.parts[0].print_at(ms, offset)
    }

    /// `ms` printed by the first format, as text.
    pub fn print_text(&self, ms: i64) -> String {
        match self.print(ms) {
            Value::String(text) => text,
            other => other.to_string(),
        }
    }
}

fn part_of(name: &str) -> Result<Part, String> {
    Ok(match name {
        "epoch_millis" => Part::EpochMillis,
        "epoch_second" => Part::EpochSecond,
        "strict_date_optional_time_nanos" => Part::IsoNanos,
        "strict_date_optional_time"
        | "date_optional_time"
        | "date_time"
        | "strict_date_time"
        | "date_time_no_millis"
        | "strict_date_time_no_millis"
        | "date_hour_minute_second"
        | "strict_date_hour_minute_second"
        | "date_hour_minute_second_millis"
        | "strict_date_hour_minute_second_millis" => Part::Iso,
        "date" | "strict_date" | "year_month_day" | "strict_year_month_day" => {
            pattern("yyyy-MM-dd")?
        }
        "basic_date" | "strict_basic_date" => pattern("yyyyMMdd")?,
        "" => return Err("a date format is empty".to_owned()),
        other if other.chars().all(|c| c.is_ascii_lowercase() || c == '_') => {
            return Err(format!("the date format [{other}] is not served"));
        }
        other => pattern(other)?,
    })
}

/// A Java DateTimeFormatter pattern in chrono's letters.
fn pattern(java: &str) -> Result<Part, String> {
    let mut chrono = String::new();
    let mut print = String::new();
    let chars: Vec<char> = java.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // A quoted literal; '' is a quote.
            if chars.get(i + 1) == Some(&'\'') {
                chrono.push('\'');
                print.push('\'');
                i += 2;
                continue;
            }
            let end = chars[i + 1..]
                .iter()
                .position(|&d| d == '\'')
                .map_or(chars.len(), |p| i + 1 + p);
            let literal: String = chars[i + 1..end].iter().collect();
            chrono.push_str(&literal.replace('%', "%%"));
            print.push_str(&literal.replace('%', "%%"));
            i = end + 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|&&d| d == c).count();
        i += run;
        let converted = match (c, run) {
            ('y' | 'u', 2) => "%y".to_owned(),
            ('y' | 'u', _) => "%Y".to_owned(),
            ('M', 1 | 2) => "%m".to_owned(),
            ('M', 3) => "%b".to_owned(),
            ('M', _) => "%B".to_owned(),
            ('d', _) => "%d".to_owned(),
            ('H', _) => "%H".to_owned(),
            ('h', _) => "%I".to_owned(),
            ('m', _) => "%M".to_owned(),
            ('s', _) => "%S".to_owned(),
            ('S', 3 | 6 | 9) => format!("%{run}f"),
            ('a', _) => "%p".to_owned(),
            ('E', 1..=3) => "%a".to_owned(),
            ('E', _) => "%A".to_owned(),
            ('Z' | 'x', _) => "%z".to_owned(),
            ('X', _) => "%:z".to_owned(),
            (c, _) if c.is_ascii_alphabetic() => {
                return Err(format!(
                    "the date pattern [{java}] has [{}], which is not served",
                    c.to_string().repeat(run)
                ));
            }
            ('%', _) => "%%".repeat(run),
            (c, _) => c.to_string().repeat(run),
        };
        match c {
            'X' => print.push(ZONE),
            _ => print.push_str(&converted),
        }
        chrono.push_str(&converted);
    }
    Ok(Part::Pattern { chrono, print })
}

/// `text` read by the chrono `pattern`: what it leaves out is zero (the time of day) or UTC
/// (the offset), as Java's DateFormatter defaults them.
fn parse_pattern(text: &str, pattern: &str) -> Option<i64> {
    parse_pattern_at(text, pattern).map(|at| at.timestamp_millis())
}

/// [`parse_pattern`], as the instant read.
fn parse_pattern_at(text: &str, pattern: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    use chrono::format::{Parsed, StrftimeItems, parse};
    let mut parsed = Parsed::new();
    parse(&mut parsed, text, StrftimeItems::new(pattern)).ok()?;
    if parsed.hour_div_12().is_none() && parsed.hour_mod_12().is_none() {
        parsed.set_hour(0).ok()?;
    }
    if parsed.minute().is_none() {
        parsed.set_minute(0).ok()?;
    }
    if parsed.second().is_none() {
        parsed.set_second(0).ok()?;
    }
    if parsed.offset().is_none() {
        parsed.set_offset(0).ok()?;
    }
    parsed.to_datetime().ok()
}

impl Part {
    fn read(&self, value: &Value) -> Option<i64> {
        let text = match value {
            Value::String(text) => text.trim().to_owned(),
            Value::Number(n) => n.to_string(),
            _ => return None,
        };
        match self {
            Part::EpochMillis => text
                .parse::<i64>()
                .ok()
                .or_else(|| text.parse::<f64>().ok().map(|f| f as i64)),
            Part::EpochSecond => text
                .parse::<f64>()
                .ok()
                .filter(|f| f.is_finite())
                .map(|f| (f * 1000.0).round() as i64),
            Part::Iso | Part::IsoNanos => parse_date_millis(&text),
            Part::Pattern { chrono, .. } => parse_pattern(&text, chrono),
        }
    }

    fn read_nanos(&self, value: &Value) -> Option<i64> {
        let text = match value {
            Value::String(text) => text.trim().to_owned(),
            Value::Number(n) => n.to_string(),
            _ => return None,
        };
        match self {
            Part::EpochMillis => decimal_nanos(&text, 1_000_000),
            Part::EpochSecond => decimal_nanos(&text, 1_000_000_000),
            Part::Iso | Part::IsoNanos => parse_date_nanos(&text),
            Part::Pattern { chrono, .. } => parse_pattern_at(&text, chrono)?.timestamp_nanos_opt(),
        }
    }

    fn print_nanos(&self, ns: i64) -> Value {
        let at = DateTime::from_timestamp_nanos(ns);
        let epoch = |unit: i64| {
            let (whole, part) = (ns.div_euclid(unit), ns.rem_euclid(unit));
            match part {
                0 => Value::from(whole),
                _ => {
                    let digits = unit.to_string().len() - 1;
                    let fraction = format!("{part:0digits$}");
                    Value::from(format!("{whole}.{}", fraction.trim_end_matches('0')))
                }
            }
        };
        match self {
            Part::EpochMillis => epoch(1_000_000),
            Part::EpochSecond => epoch(1_000_000_000),
            Part::Iso => Value::from(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()),
            Part::IsoNanos => Value::from(at.format("%Y-%m-%dT%H:%M:%S%.9fZ").to_string()),
            Part::Pattern { print, .. } => Value::from(with_zone(at.format(print).to_string(), 0)),
        }
    }

    fn print_at(&self, ms: i64, offset: chrono::FixedOffset) -> Value {
        if offset.local_minus_utc() == 0 {
            return self.print(ms);
        }
        let at = DateTime::from_timestamp_millis(ms).map(|at| at.with_timezone(&offset));
        match (self, at) {
            (Part::Iso | Part::IsoNanos, Some(at)) => {
                Value::from(at.format("%Y-%m-%dT%H:%M:%S%.3f%:z").to_string())
            }
            (Part::Pattern { print, .. }, Some(at)) => Value::from(with_zone(
                at.format(print).to_string(),
                offset.local_minus_utc(),
            )),
            _ => self.print(ms),
        }
    }

    fn print(&self, ms: i64) -> Value {
        let at = DateTime::from_timestamp_millis(ms);
        match (self, at) {
            (Part::EpochMillis, _) | (_, None) => Value::from(ms),
            (Part::EpochSecond, _) if ms % 1000 == 0 => Value::from(ms / 1000),
            (Part::EpochSecond, _) => Value::from(ms as f64 / 1000.0),
            (Part::Iso | Part::IsoNanos, Some(at)) => {
                Value::from(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
            }
            (Part::Pattern { print, .. }, Some(at)) => {
                Value::from(with_zone(at.format(print).to_string(), 0))
            }
        }
    }
}

/// A printed pattern with its zone, as Java's `X` prints it: `Z` for UTC, else `+01:00`.
fn with_zone(printed: String, offset_seconds: i32) -> String {
    if !printed.contains(ZONE) {
        return printed;
    }
    let zone = match offset_seconds {
        0 => "Z".to_owned(),
        seconds => {
            let sign = if seconds < 0 { '-' } else { '+' };
            let seconds = seconds.abs();
            format!("{sign}{:02}:{:02}", seconds / 3600, seconds % 3600 / 60)
        }
    };
    printed.replace(ZONE, &zone)
}

/// A decimal number of `unit` nanoseconds (`1540815132123.456789` milliseconds) as whole
/// nanoseconds, read exactly; `None` past what 64 bits hold.
fn decimal_nanos(text: &str, unit: i64) -> Option<i64> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !fraction.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let places = unit.to_string().len() - 1;
    let mut part: String = fraction.chars().take(places).collect();
    while part.len() < places {
        part.push('0');
    }
    let value = whole
        .parse::<i64>()
        .ok()?
        .checked_mul(unit)?
        .checked_add(part.parse::<i64>().unwrap_or(0))?;
    Some(if negative { -value } else { value })
}

/// [`parse_date_millis`], to the nanosecond; `None` outside what 64 bits of nanoseconds hold
/// (1677 to 2262).
pub fn parse_date_nanos(text: &str) -> Option<i64> {
    parse_date_time(text)?.timestamp_nanos_opt()
}

/// A date as Elasticsearch's default date detection sees one (`strict_date_optional_time`):
/// `2026-11-23`, `2026-11-23T10:15`, `2026-11-23T10:15:30`, with fractions of a second and a
/// zone (`Z`, `+01:00`) or without (UTC). Unix milliseconds. Bulk ingestion detects dates with it
/// too, so that what is written as a date is queried as one.
pub fn parse_date_millis(text: &str) -> Option<i64> {
    parse_date_time(text).map(|at| at.timestamp_millis())
}

/// The instant of [`parse_date_millis`], to the nanosecond.
fn parse_date_time(text: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::{DateTime, NaiveDate, NaiveDateTime};
    let bytes = text.as_bytes();
    // The cheap test first: most strings are not dates.
    if bytes.len() < 10
        || !bytes[..4].iter().all(u8::is_ascii_digit)
        || bytes[4] != b'-'
        || bytes[7] != b'-'
    {
        return None;
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Some(at.to_utc());
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M%:z"] {
        if let Ok(at) = DateTime::parse_from_str(text, format) {
            return Some(at.to_utc());
        }
    }
    let naive = text.strip_suffix('Z').unwrap_or(text);
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(at) = NaiveDateTime::parse_from_str(naive, format) {
            return Some(at.and_utc());
        }
    }
    NaiveDate::parse_from_str(naive, "%Y-%m-%d")
        .ok()
        .and_then(|day| day.and_hms_opt(0, 0, 0))
        .map(|at| at.and_utc())
}

/// Elasticsearch date math: an anchor (`now`, or a date followed by `||`), then operations:
/// `+N<unit>`, `-N<unit>`, `/<unit>` (round down; up with `round_up`), units y M w d h H m s.
pub fn date_math(text: &str, now: i64, round_up: bool) -> Option<i64> {
    let (anchor, math) = match text.strip_prefix("now") {
        Some(rest) => (now, rest),
        None => match text.split_once("||") {
            Some((date, rest)) => (parse_date_millis(date)?, rest),
            None => return parse_date_millis(text).or_else(|| text.parse::<i64>().ok()),
        },
    };
    let at = chrono::DateTime::from_timestamp_millis(anchor)?;
    Some(apply_date_math(at, math, round_up)?.timestamp_millis())
}

/// Applies the operations of Elasticsearch date math (`+1h`, `-2d`, `/d`, ... after the
/// anchor) to `at`, as Elasticsearch reads them: `+`/`-` an amount (1 when none is written,
/// `now+h`) of a unit, or `/` a unit, rounded down to its start, or up to its last millisecond
/// with `round_up`. Units: y M w d h H m s. `None` for anything else, and for an instant out of
/// range (`now+999999999y`), never an overflow.
pub fn apply_date_math(
    mut at: chrono::DateTime<chrono::Utc>,
    mut math: &str,
    round_up: bool,
) -> Option<chrono::DateTime<chrono::Utc>> {
    while let Some(op) = math.chars().next() {
        math = &math[op.len_utf8()..];
        let digits = math.bytes().take_while(u8::is_ascii_digit).count();
        let amount: i64 = match digits {
            0 => 1,
            n => math[..n].parse().ok()?,
        };
        math = &math[digits..];
        let unit = math.chars().next()?;
        math = &math[unit.len_utf8()..];
        at = match op {
            '+' => shift(at, amount, unit)?,
            '-' => shift(at, -amount, unit)?,
            // As Elasticsearch: rounding takes a single unit (`/d`, `/1d`), not `/2d`.
            '/' if amount == 1 => round(at, unit, round_up)?,
            _ => return None,
        };
    }
    Some(at)
}

/// `at` moved by `n` units.
fn shift(
    at: chrono::DateTime<chrono::Utc>,
    n: i64,
    unit: char,
) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::TimeDelta;
    let delta = match unit {
        'y' => return shift_months(at, n.checked_mul(12)?),
        'M' => return shift_months(at, n),
        'w' => TimeDelta::try_weeks(n)?,
        'd' => TimeDelta::try_days(n)?,
        'h' | 'H' => TimeDelta::try_hours(n)?,
        'm' => TimeDelta::try_minutes(n)?,
        's' => TimeDelta::try_seconds(n)?,
        _ => return None,
    };
    at.checked_add_signed(delta)
}

/// `at` moved by `n` calendar months.
fn shift_months(
    at: chrono::DateTime<chrono::Utc>,
    n: i64,
) -> Option<chrono::DateTime<chrono::Utc>> {
    let months = chrono::Months::new(u32::try_from(n.unsigned_abs()).ok()?);
    match n >= 0 {
        true => at.checked_add_months(months),
        false => at.checked_sub_months(months),
    }
}

/// `at` rounded to the start of its `unit`, or to the unit's last millisecond when `up`.
fn round(
    at: chrono::DateTime<chrono::Utc>,
    unit: char,
    up: bool,
) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::{Datelike, Days, NaiveDate, TimeDelta, Timelike};
    let day = at.date_naive();
    let (date, (h, m, s)) = match unit {
        'y' => (NaiveDate::from_ymd_opt(day.year(), 1, 1)?, (0, 0, 0)),
        'M' => (day.with_day(1)?, (0, 0, 0)),
        'w' => (
            day.checked_sub_days(Days::new(day.weekday().num_days_from_monday().into()))?,
            (0, 0, 0),
        ),
        'd' => (day, (0, 0, 0)),
        'h' | 'H' => (day, (at.hour(), 0, 0)),
        'm' => (day, (at.hour(), at.minute(), 0)),
        's' => (day, (at.hour(), at.minute(), at.second())),
        _ => return None,
    };
    let start = date.and_hms_opt(h, m, s)?.and_utc();
    match up {
        true => shift(start, 1, unit)?.checked_sub_signed(TimeDelta::milliseconds(1)),
        false => Some(start),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: i64 = 1_795_428_000_000; // 2026-11-23T10:00:00Z

    #[test]
    fn date_math_that_is_not_date_math_or_out_of_range_is_no_date() {
        // Found by the `search` fuzz target: a character of two bytes after `now-` was cut
        // in half; amounts past what a date can hold overflowed.
        for text in [
            "now-\u{197}",
            "now+1\u{197}",
            "now/\u{197}",
            "2026-11-23||-\u{e9}",
            "now+999999999y",
            "now-4294967295M",
            "now+4294967295w",
            "now-4294967295d",
            "now+4294967295h",
        ] {
            assert_eq!(date_math(text, NOW, false), None, "{text}");
            assert_eq!(date_math(text, NOW, true), None, "{text}");
        }
        assert_eq!(
            date_math("now+4294967295s", NOW, false),
            Some(NOW + 4_294_967_295_000)
        );
    }

    #[test]
    fn date_math_reads_as_elasticsearch_reads_it() {
        let hour = 3_600_000;
        assert_eq!(date_math("now", NOW, false), Some(NOW));
        assert_eq!(date_math("now-1h", NOW, false), Some(NOW - hour));
        assert_eq!(date_math("now+2d", NOW, false), Some(NOW + 48 * hour));
        assert_eq!(date_math("now/d", NOW, false), Some(NOW - 10 * hour));
        assert_eq!(date_math("now/d", NOW, true), Some(NOW + 14 * hour - 1));
        assert_eq!(date_math("now-1d/d", NOW, false), Some(NOW - 34 * hour));
        assert_eq!(
            date_math("2026-11-23||+1M", NOW, false),
            parse_date_millis("2026-12-23")
        );
        assert_eq!(date_math("2026-11-23T10:00:00Z", NOW, false), Some(NOW));
        assert_eq!(date_math("now-1x", NOW, false), None);
        // No amount is one; rounding takes a single unit.
        assert_eq!(date_math("now+h", NOW, false), Some(NOW + hour));
        assert_eq!(date_math("now/1d", NOW, false), Some(NOW - 10 * hour));
        assert_eq!(date_math("now/2d", NOW, false), None);
        assert_eq!(date_math("yesterday", NOW, false), None);
    }

    #[test]
    fn formats_read_and_print_as_elasticsearch_does() {
        let custom = DateFormat::parse("yyyy-MM-dd HH:mm:ss.SSS").unwrap();
        let ms = custom.read(&json!("2019-10-21 08:30:04.828")).unwrap();
        assert_eq!(ms, 1_571_646_604_828);
        assert_eq!(custom.print(ms), json!("2019-10-21 08:30:04.828"));

        let seconds = DateFormat::parse("epoch_second").unwrap();
        assert_eq!(seconds.read(&json!(1000)), Some(1_000_000));
        assert_eq!(seconds.read(&json!("1000")), Some(1_000_000));
        assert_eq!(seconds.print(3_000_000), json!(3000));
        assert_eq!(seconds.print_text(3_000_000), "3000");

        let either = DateFormat::parse("dd/MM/yyyy||epoch_millis").unwrap();
        assert_eq!(either.read(&json!("02/01/2020")), Some(1_577_923_200_000));
        assert_eq!(either.read(&json!(5)), Some(5));
        assert_eq!(either.print(1_577_923_200_000), json!("02/01/2020"));
        assert_eq!(either.read(&json!("2020-01-02")), None);

        let quoted = DateFormat::parse("yyyy-MM-dd'T'HH:mmXXX").unwrap();
        assert_eq!(
            quoted.read(&json!("2020-01-02T01:00+01:00")),
            Some(1_577_923_200_000)
        );
        let iso = DateFormat::parse("strict_date_optional_time").unwrap();
        assert_eq!(iso.print(0), json!("1970-01-01T00:00:00.000Z"));
        assert_eq!(
            DateFormat::parse("date")
                .unwrap()
                .read(&json!("2016-05-03")),
            Some(1_462_233_600_000)
        );

        assert!(
            DateFormat::parse("week_date")
                .unwrap_err()
                .contains("[week_date]")
        );
        assert!(DateFormat::parse("yyyy-ww").unwrap_err().contains("[ww]"));
        // Java's X prints Z for UTC.
        assert_eq!(quoted.print(1_577_923_200_000), json!("2020-01-02T00:00Z"));
    }

    #[test]
    fn nanoseconds_read_and_print_exactly() {
        let ns = 1_540_815_132_123_456_789;
        assert_eq!(parse_date_nanos("2018-10-29T12:12:12.123456789Z"), Some(ns));
        assert_eq!(
            parse_date_millis("2018-10-29T12:12:12.123456789Z"),
            Some(ns / 1_000_000)
        );
        assert_eq!(parse_date_nanos("2263-01-01T00:00:00Z"), None);
        let millis = DateFormat::parse("epoch_millis").unwrap();
        assert_eq!(millis.read_nanos(&json!("1540815132123.456789")), Some(ns));
        assert_eq!(
            millis.read_nanos(&json!(1_540_815_132_123_i64)),
            Some(ns - 456_789)
        );
        assert_eq!(millis.print_nanos(ns), json!("1540815132123.456789"));
        assert_eq!(
            millis.print_nanos(ns - 456_789),
            json!(1_540_815_132_123_i64)
        );
        let iso = DateFormat::parse("strict_date_optional_time").unwrap();
        assert_eq!(iso.print_nanos(ns), json!("2018-10-29T12:12:12.123Z"));
        let nanos = DateFormat::parse("strict_date_optional_time_nanos").unwrap();
        assert_eq!(
            nanos.print_nanos(ns),
            json!("2018-10-29T12:12:12.123456789Z")
        );
        let pattern = DateFormat::parse("uuuu-MM-dd'T'HH:mm:ss.SSSSSSSSSX").unwrap();
        assert_eq!(
            pattern.print_nanos(ns),
            json!("2018-10-29T12:12:12.123456789Z")
        );
        let micros = DateFormat::parse("yyyy-MM-dd HH:mm:ss.SSSSSS").unwrap();
        let read = micros
            .read_nanos(&json!("2019-10-21 08:30:04.828733"))
            .unwrap();
        assert_eq!(read, 1_571_646_604_828_733_000);
        assert_eq!(
            micros.print_nanos(read),
            json!("2019-10-21 08:30:04.828733")
        );
    }
}
