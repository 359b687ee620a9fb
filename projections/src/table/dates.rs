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
    /// A pattern, in chrono's letters.
    Pattern {
        chrono: String,
    },
}

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

    /// The milliseconds `value` stands for, by the first format that reads it.
    pub fn read(&self, value: &Value) -> Option<i64> {
        self.parts.iter().find_map(|part| part.read(value))
    }

    /// `ms` printed by the first format: epoch formats as JSON numbers, the others as strings.
    pub fn print(&self, ms: i64) -> Value {
        self.parts[0].print(ms)
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
        "strict_date_optional_time"
        | "date_optional_time"
        | "strict_date_optional_time_nanos"
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
    let chars: Vec<char> = java.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' {
            // A quoted literal; '' is a quote.
            if chars.get(i + 1) == Some(&'\'') {
                chrono.push('\'');
                i += 2;
                continue;
            }
            let end = chars[i + 1..]
                .iter()
                .position(|&d| d == '\'')
                .map_or(chars.len(), |p| i + 1 + p);
            let literal: String = chars[i + 1..end].iter().collect();
            chrono.push_str(&literal.replace('%', "%%"));
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
        chrono.push_str(&converted);
    }
    Ok(Part::Pattern { chrono })
}

/// `text` read by the chrono `pattern`: what it leaves out is zero (the time of day) or UTC
/// (the offset), as Java's DateFormatter defaults them.
fn parse_pattern(text: &str, pattern: &str) -> Option<i64> {
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
    parsed.to_datetime().ok().map(|at| at.timestamp_millis())
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
            Part::Iso => parse_date_millis(&text),
            Part::Pattern { chrono, .. } => parse_pattern(&text, chrono),
        }
    }

    fn print(&self, ms: i64) -> Value {
        let at = DateTime::from_timestamp_millis(ms);
        match (self, at) {
            (Part::EpochMillis, _) | (_, None) => Value::from(ms),
            (Part::EpochSecond, _) if ms % 1000 == 0 => Value::from(ms / 1000),
            (Part::EpochSecond, _) => Value::from(ms as f64 / 1000.0),
            (Part::Iso, Some(at)) => Value::from(at.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string()),
            (Part::Pattern { chrono, .. }, Some(at)) => Value::from(at.format(chrono).to_string()),
        }
    }
}

/// A date as Elasticsearch's default date detection sees one (`strict_date_optional_time`):
/// `2026-11-23`, `2026-11-23T10:15`, `2026-11-23T10:15:30`, with fractions of a second and a
/// zone (`Z`, `+01:00`) or without (UTC). Unix milliseconds. Bulk ingestion detects dates with it
/// too, so that what is written as a date is queried as one.
pub fn parse_date_millis(text: &str) -> Option<i64> {
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
        return Some(at.timestamp_millis());
    }
    for format in ["%Y-%m-%dT%H:%M:%S%.f%:z", "%Y-%m-%dT%H:%M%:z"] {
        if let Ok(at) = DateTime::parse_from_str(text, format) {
            return Some(at.timestamp_millis());
        }
    }
    let naive = text.strip_suffix('Z').unwrap_or(text);
    for format in ["%Y-%m-%dT%H:%M:%S%.f", "%Y-%m-%dT%H:%M"] {
        if let Ok(at) = NaiveDateTime::parse_from_str(naive, format) {
            return Some(at.and_utc().timestamp_millis());
        }
    }
    NaiveDate::parse_from_str(naive, "%Y-%m-%d")
        .ok()
        .and_then(|day| day.and_hms_opt(0, 0, 0))
        .map(|at| at.and_utc().timestamp_millis())
}

/// Elasticsearch date math: an anchor (`now`, or a date followed by `||`), then operations:
/// `+N<unit>`, `-N<unit>`, `/<unit>` (round down; up with `round_up`), units y M w d h H m s.
pub fn date_math(text: &str, now: i64, round_up: bool) -> Option<i64> {
    use chrono::{DateTime, Datelike, Duration, Months, TimeZone, Timelike, Utc};
    let (anchor, mut ops) = match text.strip_prefix("now") {
        Some(rest) => (now, rest),
        None => match text.split_once("||") {
            Some((date, rest)) => (parse_date_millis(date)?, rest),
            None => return parse_date_millis(text).or_else(|| text.parse::<i64>().ok()),
        },
    };
    let mut at: DateTime<Utc> = DateTime::from_timestamp_millis(anchor)?;
    while !ops.is_empty() {
        let op = ops.as_bytes()[0];
        ops = &ops[1..];
        let digits = ops.bytes().take_while(u8::is_ascii_digit).count();
        let amount: u32 = match digits {
            0 if op == b'/' => 0,
            0 => 1,
            n => ops[..n].parse().ok()?,
        };
        ops = &ops[digits..];
        let unit = *ops.as_bytes().first()?;
        ops = &ops[1..];
        at = match op {
            b'+' | b'-' => {
                let sign = if op == b'+' { 1 } else { -1 };
                match unit {
                    b'y' => shift_months(at, sign * 12 * amount as i32)?,
                    b'M' => shift_months(at, sign * amount as i32)?,
                    b'w' => at + Duration::weeks(sign as i64 * amount as i64),
                    b'd' => at + Duration::days(sign as i64 * amount as i64),
                    b'h' | b'H' => at + Duration::hours(sign as i64 * amount as i64),
                    b'm' => at + Duration::minutes(sign as i64 * amount as i64),
                    b's' => at + Duration::seconds(sign as i64 * amount as i64),
                    _ => return None,
                }
            }
            b'/' => {
                let start = match unit {
                    b'y' => Utc.with_ymd_and_hms(at.year(), 1, 1, 0, 0, 0).single()?,
                    b'M' => Utc
                        .with_ymd_and_hms(at.year(), at.month(), 1, 0, 0, 0)
                        .single()?,
                    b'w' => {
                        let day = at.date_naive()
                            - Duration::days(at.weekday().num_days_from_monday() as i64);
                        day.and_hms_opt(0, 0, 0)?.and_utc()
                    }
                    b'd' => at.date_naive().and_hms_opt(0, 0, 0)?.and_utc(),
                    b'h' | b'H' => at.date_naive().and_hms_opt(at.hour(), 0, 0)?.and_utc(),
                    b'm' => at
                        .date_naive()
                        .and_hms_opt(at.hour(), at.minute(), 0)?
                        .and_utc(),
                    b's' => at
                        .date_naive()
                        .and_hms_opt(at.hour(), at.minute(), at.second())?
                        .and_utc(),
                    _ => return None,
                };
                if round_up {
                    let next = match unit {
                        b'y' => shift_months(start, 12)?,
                        b'M' => start.checked_add_months(Months::new(1))?,
                        b'w' => start + Duration::weeks(1),
                        b'd' => start + Duration::days(1),
                        b'h' | b'H' => start + Duration::hours(1),
                        b'm' => start + Duration::minutes(1),
                        _ => start + Duration::seconds(1),
                    };
                    next - Duration::milliseconds(1)
                } else {
                    start
                }
            }
            _ => return None,
        };
    }
    Some(at.timestamp_millis())
}

fn shift_months(
    at: chrono::DateTime<chrono::Utc>,
    months: i32,
) -> Option<chrono::DateTime<chrono::Utc>> {
    use chrono::Months;
    match months >= 0 {
        true => at.checked_add_months(Months::new(months as u32)),
        false => at.checked_sub_months(Months::new(months.unsigned_abs())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: i64 = 1_795_428_000_000; // 2026-11-23T10:00:00Z

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
    }
}
