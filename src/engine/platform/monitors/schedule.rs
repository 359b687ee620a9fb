//! When a monitor runs: every `interval` minutes, hours or days, or at the times a cron
//! expression names in a time zone, as OpenSearch Alerting's monitors do:
//!
//! ```json
//! {"period": {"interval": 1, "unit": "MINUTES"}}
//! {"cron": {"expression": "0 */5 * * * *", "timezone": "Europe/Paris"}}
//! ```
//!
//! Cron expressions have six fields, seconds first, or are one of `@hourly`, `@daily` and
//! `@weekly`. They are read by `croner`, with the meanings OpenSearch documents and users of
//! cron expect: 0 and 7 are Sunday, and a day of the month and a day of the week both given
//! match either (the `cron` crate reads 1 as Sunday). The time zone is an IANA name, UTC when
//! none is given. A local time that a daylight-saving change skips runs once when the gap ends;
//! one that it repeats runs once, the first time.

use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use croner::{
    Cron,
    parser::{CronParser, Seconds, Year},
};
use serde_json::Value;

/// A monitor's schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Every `interval` units, counted from the previous run.
    Period { interval: u32, unit: Unit },
    /// At the times of a cron expression, read in a time zone.
    Cron {
        expression: String,
        cron: Box<Cron>,
        timezone: Tz,
    },
}

/// The unit of a period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Minutes,
    Hours,
    Days,
}

/// A schedule that cannot be read: the field at fault (`schedule.cron.expression`, ...) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("[{field}] {reason}")]
pub struct ScheduleError {
    pub field: String,
    pub reason: String,
}

fn error(field: &str, reason: impl Into<String>) -> ScheduleError {
    ScheduleError {
        field: field.to_owned(),
        reason: reason.into(),
    }
}

/// The longest period: a year, in any unit.
const MAX_PERIOD_DAYS: i64 = 366;

impl Schedule {
    /// Reads a monitor's `schedule` object.
    pub fn parse(schedule: &Value) -> Result<Schedule, ScheduleError> {
        let Some(fields) = schedule.as_object() else {
            return Err(error("schedule", "must be an object with period or cron"));
        };
        match (fields.get("period"), fields.get("cron")) {
            (Some(period), None) => Schedule::period(period),
            (None, Some(cron)) => Schedule::cron(cron),
            (Some(_), Some(_)) => Err(error("schedule", "has both period and cron")),
            (None, None) => Err(error("schedule", "needs period or cron")),
        }
    }

    fn period(period: &Value) -> Result<Schedule, ScheduleError> {
        let interval = period
            .get("interval")
            .and_then(Value::as_u64)
            .filter(|&n| n > 0)
            .ok_or_else(|| error("schedule.period.interval", "must be a positive integer"))?;
        let unit = match period.get("unit").and_then(Value::as_str) {
            Some("MINUTES") => Unit::Minutes,
            Some("HOURS") => Unit::Hours,
            Some("DAYS") => Unit::Days,
            Some(other) => {
                return Err(error(
                    "schedule.period.unit",
                    format!("{other:?} is not MINUTES, HOURS or DAYS"),
                ));
            }
            None => return Err(error("schedule.period.unit", "is required")),
        };
        let interval = u32::try_from(interval)
            .ok()
            .filter(|&n| unit.length(n) <= Duration::days(MAX_PERIOD_DAYS))
            .ok_or_else(|| error("schedule.period.interval", "is longer than a year"))?;
        Ok(Schedule::Period { interval, unit })
    }

    fn cron(cron: &Value) -> Result<Schedule, ScheduleError> {
        let expression = cron
            .get("expression")
            .and_then(Value::as_str)
            .ok_or_else(|| error("schedule.cron.expression", "is required"))?;
        let timezone = match cron.get("timezone") {
            None | Some(Value::Null) => Tz::UTC,
            Some(Value::String(name)) => name.parse().map_err(|_| {
                error(
                    "schedule.cron.timezone",
                    format!("{name:?} is not a time zone"),
                )
            })?,
            Some(_) => return Err(error("schedule.cron.timezone", "must be a string")),
        };
        let trimmed = expression.trim();
        // Six fields, seconds first; the shortcuts stand for their own times.
        let pattern = match trimmed {
            "@hourly" => "0 0 * * * *",
            "@daily" => "0 0 0 * * *",
            "@weekly" => "0 0 0 * * 0",
            _ if trimmed.starts_with('@') => {
                return Err(error(
                    "schedule.cron.expression",
                    format!("{trimmed:?}: the shortcuts are @hourly, @daily and @weekly"),
                ));
            }
            _ if trimmed.split_whitespace().count() != 6 => {
                return Err(error(
                    "schedule.cron.expression",
                    format!("{trimmed:?} does not have six fields (seconds first)"),
                ));
            }
            _ => trimmed,
        };
        // A list with an empty item (`,`, `1,`, `,5`) names nothing: croner would search
        // for a time that never comes (found by fuzzing: `*/10 , * * * 0,7` took seconds).
        if let Some(field) = pattern
            .split_whitespace()
            .find(|field| field.split(',').any(str::is_empty))
        {
            return Err(error(
                "schedule.cron.expression",
                format!("{trimmed:?}: the field {field:?} lists an empty item"),
            ));
        }
        let parser = CronParser::builder()
            .seconds(Seconds::Required)
            .year(Year::Disallowed)
            .build();
        let parsed = parser
            .parse(pattern)
            .map_err(|e| error("schedule.cron.expression", format!("{trimmed:?}: {e}")))?;
        let schedule = Schedule::Cron {
            expression: trimmed.to_owned(),
            cron: Box::new(parsed),
            timezone,
        };
        // An expression that names no time (the 31st of February) would never run.
        if schedule.next_after(Utc::now()).is_none() {
            return Err(error(
                "schedule.cron.expression",
                format!("{trimmed:?} names no time that comes"),
            ));
        }
        Ok(schedule)
    }

    /// The first time after `after` that the schedule runs (`None`: never again). A period
    /// counts from `after`, the previous run.
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Period { interval, unit } => after.checked_add_signed(unit.length(*interval)),
            Schedule::Cron { cron, timezone, .. } => cron
                .find_next_occurrence(&after.with_timezone(timezone), false)
                .ok()
                .map(|next| next.with_timezone(&Utc)),
        }
    }

    /// The next `n` times after `after` (what a console previews).
    pub fn upcoming(&self, after: DateTime<Utc>, n: usize) -> Vec<DateTime<Utc>> {
        std::iter::successors(self.next_after(after), |&at| self.next_after(at))
            .take(n)
            .collect()
    }

    /// The schedule as a monitor's document shows it.
    pub fn to_json(&self) -> Value {
        match self {
            Schedule::Period { interval, unit } => serde_json::json!({
                "period": {"interval": interval, "unit": unit.name()}
            }),
            Schedule::Cron {
                expression,
                timezone,
                ..
            } => serde_json::json!({
                "cron": {"expression": expression, "timezone": timezone.name()}
            }),
        }
    }
}

impl Unit {
    fn length(self, n: u32) -> Duration {
        let n = i64::from(n);
        match self {
            Unit::Minutes => Duration::minutes(n),
            Unit::Hours => Duration::hours(n),
            Unit::Days => Duration::days(n),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Unit::Minutes => "MINUTES",
            Unit::Hours => "HOURS",
            Unit::Days => "DAYS",
        }
    }
}

#[cfg(test)]
mod tests;
