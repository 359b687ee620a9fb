use chrono::{DateTime, Utc};
use serde_json::json;

use super::{Schedule, ScheduleError};

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text).unwrap().to_utc()
}

fn cron(expression: &str, timezone: Option<&str>) -> Result<Schedule, ScheduleError> {
    let mut cron = json!({"expression": expression});
    if let Some(zone) = timezone {
        cron["timezone"] = json!(zone);
    }
    Schedule::parse(&json!({ "cron": cron }))
}

fn next(schedule: &Schedule, after: &str) -> String {
    schedule.next_after(at(after)).unwrap().to_rfc3339()
}

#[test]
fn a_period_runs_its_interval_after_the_previous_run() {
    let every = |interval: u64, unit: &str| {
        Schedule::parse(&json!({"period": {"interval": interval, "unit": unit}})).unwrap()
    };
    assert_eq!(
        next(&every(5, "MINUTES"), "2026-11-27T10:03:10Z"),
        "2026-11-27T10:08:10+00:00"
    );
    assert_eq!(
        next(&every(2, "HOURS"), "2026-11-27T23:30:00Z"),
        "2026-11-28T01:30:00+00:00"
    );
    assert_eq!(
        next(&every(1, "DAYS"), "2026-11-27T10:00:00Z"),
        "2026-11-28T10:00:00+00:00"
    );
    assert_eq!(
        every(1, "HOURS").to_json(),
        json!({"period": {"interval": 1, "unit": "HOURS"}})
    );
}

#[test]
fn a_cron_expression_has_six_fields_seconds_first() {
    let every_five_minutes = cron("0 */5 * * * *", None).unwrap();
    assert_eq!(
        next(&every_five_minutes, "2026-11-27T10:03:10Z"),
        "2026-11-27T10:05:00+00:00"
    );
    let every_second = cron("* * * * * *", None).unwrap();
    assert_eq!(
        next(&every_second, "2026-11-27T10:03:10Z"),
        "2026-11-27T10:03:11+00:00"
    );
    assert_eq!(
        every_five_minutes.upcoming(at("2026-11-27T10:03:10Z"), 3),
        vec![
            at("2026-11-27T10:05:00Z"),
            at("2026-11-27T10:10:00Z"),
            at("2026-11-27T10:15:00Z")
        ]
    );
}

#[test]
fn zero_and_seven_are_sunday() {
    // 2026-11-27 is a Friday.
    for sunday in ["0 0 12 * * 0", "0 0 12 * * 7", "0 0 12 * * SUN"] {
        let schedule = cron(sunday, None).unwrap();
        assert_eq!(
            next(&schedule, "2026-11-27T10:00:00Z"),
            "2026-11-29T12:00:00+00:00",
            "{sunday}"
        );
    }
    let monday = cron("0 0 12 * * 1", None).unwrap();
    assert_eq!(
        next(&monday, "2026-11-27T10:00:00Z"),
        "2026-11-30T12:00:00+00:00"
    );
}

#[test]
fn a_day_of_the_month_and_a_day_of_the_week_match_either() {
    // The 1st of the month, or a Monday.
    let schedule = cron("0 0 0 1 * 1", None).unwrap();
    assert_eq!(
        schedule.upcoming(at("2026-11-27T10:00:00Z"), 3),
        vec![
            at("2026-11-30T00:00:00Z"),
            at("2026-12-01T00:00:00Z"),
            at("2026-12-07T00:00:00Z")
        ]
    );
}

#[test]
fn the_shortcuts_are_hourly_daily_and_weekly() {
    let after = "2026-11-27T10:03:10Z";
    assert_eq!(
        next(&cron("@hourly", None).unwrap(), after),
        "2026-11-27T11:00:00+00:00"
    );
    assert_eq!(
        next(&cron("@daily", None).unwrap(), after),
        "2026-11-28T00:00:00+00:00"
    );
    assert_eq!(
        next(&cron("@weekly", None).unwrap(), after),
        "2026-11-29T00:00:00+00:00"
    );
}

#[test]
fn a_cron_expression_is_read_in_its_time_zone() {
    let nine = cron("0 0 9 * * *", Some("Europe/Paris")).unwrap();
    // Winter: Paris is UTC+1; summer: UTC+2.
    assert_eq!(
        next(&nine, "2026-11-27T10:00:00Z"),
        "2026-11-28T08:00:00+00:00"
    );
    assert_eq!(
        next(&nine, "2026-07-01T10:00:00Z"),
        "2026-07-02T07:00:00+00:00"
    );
    assert_eq!(
        nine.to_json(),
        json!({"cron": {"expression": "0 0 9 * * *", "timezone": "Europe/Paris"}})
    );
    assert_eq!(
        cron("0 0 9 * * *", None).unwrap().to_json()["cron"]["timezone"],
        "UTC"
    );
}

#[test]
fn a_schedule_that_cannot_be_read_names_its_field() {
    let field = |schedule: serde_json::Value| Schedule::parse(&schedule).unwrap_err().field;
    assert_eq!(field(json!("hourly")), "schedule");
    assert_eq!(field(json!({})), "schedule");
    assert_eq!(
        field(
            json!({"period": {"interval": 1, "unit": "MINUTES"}, "cron": {"expression": "@daily"}})
        ),
        "schedule"
    );
    assert_eq!(
        field(json!({"period": {"interval": 0, "unit": "MINUTES"}})),
        "schedule.period.interval"
    );
    assert_eq!(
        field(json!({"period": {"interval": "5", "unit": "MINUTES"}})),
        "schedule.period.interval"
    );
    assert_eq!(
        field(json!({"period": {"interval": 400, "unit": "DAYS"}})),
        "schedule.period.interval"
    );
    assert_eq!(
        field(json!({"period": {"interval": 1, "unit": "WEEKS"}})),
        "schedule.period.unit"
    );
    assert_eq!(
        field(json!({"period": {"interval": 1}})),
        "schedule.period.unit"
    );
    for bad in [
        "*/5 * * * *",
        "0 0 25 * * *",
        "0 61 * * * *",
        "0 0 0 * * 8",
        "@yearly",
        "0 0 0 31 2 *",
        "",
        // Found by fuzzing (the schedule target): an empty list, once a search without end.
        "*/10 , * * * 0,7",
        "0 1, * * * *",
        "0 ,1 * * * *",
    ] {
        let error = cron(bad, None).unwrap_err();
        assert_eq!(error.field, "schedule.cron.expression", "{bad}: {error}");
    }
    assert_eq!(field(json!({"cron": {}})), "schedule.cron.expression");
    assert_eq!(
        cron("0 0 9 * * *", Some("Mars/Olympus")).unwrap_err().field,
        "schedule.cron.timezone"
    );
}

#[test]
fn a_time_daylight_saving_skips_or_repeats_runs_once() {
    // Paris skips 02:00-03:00 on 2026-03-29 and repeats 02:00-03:00 on 2026-10-25.
    let half_past_two = cron("0 30 2 * * *", Some("Europe/Paris")).unwrap();
    let spring = half_past_two.upcoming(at("2026-03-28T12:00:00Z"), 2);
    let autumn = half_past_two.upcoming(at("2026-10-24T12:00:00Z"), 2);
    // The skipped 02:30 runs when the gap ends (03:00 local), once.
    assert_eq!(spring[0], at("2026-03-29T01:00:00Z"));
    assert_eq!(spring[1], at("2026-03-30T00:30:00Z"));
    // The repeated 02:30 runs the first time only.
    assert_eq!(autumn[0], at("2026-10-25T00:30:00Z"));
    assert_eq!(autumn[1], at("2026-10-26T01:30:00Z"));
}
