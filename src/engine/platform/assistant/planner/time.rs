//! Time windows in a question: "in the last hour", "past 3 days", "today", "yesterday", "this
//! week", "since monday", "since 2026-11-01", "before ...", "after ...", "between ... and ...",
//! "on 2026-11-01". A window is kept as Elasticsearch date math (`now-1h`, `now/d`,
//! `2026-11-01T00:00:00Z`) so that a saved plan stays relative to the time it runs.

use chrono::{DateTime, Datelike, NaiveDate, Utc, Weekday};
use serde::{Deserialize, Serialize};

use super::lexicon::Token;

/// From (inclusive) and to (exclusive), as date math; either may be open.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// How the question said it ("in the last hour"), for the answer's text.
    pub said: String,
}

/// The date-math unit of a word, with how many seconds one of it is.
pub fn unit(word: &str) -> Option<(char, i64)> {
    Some(match word.trim_end_matches('s') {
        "second" | "sec" => ('s', 1),
        "minute" | "min" => ('m', 60),
        "hour" | "hr" => ('h', 3_600),
        "day" => ('d', 86_400),
        "week" => ('w', 604_800),
        "month" => ('M', 2_592_000),
        "year" => ('y', 31_536_000),
        _ => return None,
    })
}

fn word_number(word: &str) -> Option<i64> {
    Some(match word {
        "one" | "a" | "an" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "ten" => 10,
        "twelve" => 12,
        "fifteen" => 15,
        "twenty" => 20,
        "thirty" => 30,
        other => return other.parse().ok().filter(|n| *n > 0),
    })
}

fn weekday(word: &str) -> Option<Weekday> {
    word.parse::<Weekday>().ok()
}

/// A date the question names: `2026-11-01`, `2026-11-01T10:00`, `2026-11-01T10:00:00Z`.
fn date(word: &str) -> Option<String> {
    // Tokens are lowercased: `2026-11-01t10:00z`.
    let word = &word.to_uppercase();
    if let Ok(at) = DateTime::parse_from_rfc3339(word) {
        return Some(
            at.with_timezone(&Utc)
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        );
    }
    for format in ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M"] {
        if let Ok(at) = chrono::NaiveDateTime::parse_from_str(word, format) {
            return Some(
                at.and_utc()
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            );
        }
    }
    NaiveDate::parse_from_str(word, "%Y-%m-%d")
        .ok()
        .map(|d| format!("{d}T00:00:00Z"))
}

/// The window the tokens name, and which tokens named it (to be left out of the rest of the
/// reading). `now` places weekdays.
pub fn window(tokens: &[Token], now: DateTime<Utc>) -> Option<(Window, Vec<usize>)> {
    let words: Vec<&str> = tokens
        .iter()
        .map(|t| if t.quoted { "" } else { t.text.as_str() })
        .collect();
    let at = |i: usize| words.get(i).copied().unwrap_or("");
    for i in 0..words.len() {
        let w = at(i);
        // "last|past|previous [N] unit(s)", "in the last ...", "over the past ...".
        if matches!(w, "last" | "past" | "previous") {
            let (n, unit_at) = match word_number(at(i + 1)) {
                Some(n) if unit(at(i + 2)).is_some() => (n, i + 2),
                _ => (1, i + 1),
            };
            if let Some((u, _)) = unit(at(unit_at)) {
                let mut used: Vec<usize> = (i..=unit_at).collect();
                // "in the", "over the", "during the", "for the" before it.
                if i >= 1 && at(i - 1) == "the" {
                    used.push(i - 1);
                    if i >= 2 && matches!(at(i - 2), "in" | "over" | "during" | "for" | "within") {
                        used.push(i - 2);
                    }
                } else if i >= 1 && matches!(at(i - 1), "in" | "over" | "during" | "for") {
                    used.push(i - 1);
                }
                let said = match n {
                    1 => format!("in the last {}", at(unit_at).trim_end_matches('s')),
                    n => format!("in the last {n} {}", at(unit_at)),
                };
                return Some((
                    Window {
                        from: Some(format!("now-{n}{u}")),
                        to: None,
                        said,
                    },
                    used,
                ));
            }
        }
        match w {
            "today" => {
                return Some((
                    Window {
                        from: Some("now/d".to_owned()),
                        to: None,
                        said: "today".to_owned(),
                    },
                    vec![i],
                ));
            }
            "yesterday" => {
                return Some((
                    Window {
                        from: Some("now-1d/d".to_owned()),
                        to: Some("now/d".to_owned()),
                        said: "yesterday".to_owned(),
                    },
                    vec![i],
                ));
            }
            "this" if matches!(at(i + 1), "week" | "month" | "year" | "hour") => {
                let u = unit(at(i + 1)).map(|(u, _)| u).unwrap_or('d');
                return Some((
                    Window {
                        from: Some(format!("now/{u}")),
                        to: None,
                        said: format!("this {}", at(i + 1)),
                    },
                    vec![i, i + 1],
                ));
            }
            "since" | "after" | "from" => {
                let next = at(i + 1);
                let from = if let Some(day) = weekday(next) {
                    Some(weekday_start(day, now))
                } else if next == "yesterday" {
                    Some("now-1d/d".to_owned())
                } else if next == "today" {
                    Some("now/d".to_owned())
                } else {
                    date(next)
                };
                if let Some(from) = from {
                    let mut used = vec![i, i + 1];
                    let mut window = Window {
                        from: Some(from),
                        to: None,
                        said: format!("{w} {next}"),
                    };
                    // "from X to Y", "from X until Y".
                    if matches!(at(i + 2), "to" | "until" | "till")
                        && let Some(to) = date(at(i + 3))
                    {
                        window.to = Some(to);
                        window.said = format!("{w} {next} {} {}", at(i + 2), at(i + 3));
                        used.extend([i + 2, i + 3]);
                    }
                    return Some((window, used));
                }
            }
            "before" | "until" => {
                if let Some(to) = date(at(i + 1)) {
                    return Some((
                        Window {
                            from: None,
                            to: Some(to),
                            said: format!("{w} {}", at(i + 1)),
                        },
                        vec![i, i + 1],
                    ));
                }
            }
            "between" => {
                if let (Some(from), "and", Some(to)) = (date(at(i + 1)), at(i + 2), date(at(i + 3)))
                {
                    return Some((
                        Window {
                            from: Some(from),
                            to: Some(to),
                            said: format!("between {} and {}", at(i + 1), at(i + 3)),
                        },
                        vec![i, i + 1, i + 2, i + 3],
                    ));
                }
            }
            "on" => {
                if let Ok(day) = NaiveDate::parse_from_str(at(i + 1), "%Y-%m-%d") {
                    let next = day.succ_opt()?;
                    return Some((
                        Window {
                            from: Some(format!("{day}T00:00:00Z")),
                            to: Some(format!("{next}T00:00:00Z")),
                            said: format!("on {day}"),
                        },
                        vec![i, i + 1],
                    ));
                }
            }
            _ => {}
        }
    }
    None
}

/// The start of the most recent `day` (today's if today is one), as date math: `now/w` for
/// Monday (weeks start on Monday), else `now-Nd/d`.
fn weekday_start(day: Weekday, now: DateTime<Utc>) -> String {
    let back = (7 + now.weekday().num_days_from_monday() - day.num_days_from_monday()) % 7;
    match (day, back) {
        (Weekday::Mon, _) => "now/w".to_owned(),
        (_, 0) => "now/d".to_owned(),
        (_, n) => format!("now-{n}d/d"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::assistant::planner::lexicon::tokens;

    fn at(question: &str) -> Option<(Option<String>, Option<String>, String)> {
        // A Thursday.
        let now = DateTime::parse_from_rfc3339("2026-11-26T15:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        window(&tokens(question), now).map(|(w, _)| (w.from, w.to, w.said))
    }

    fn from(s: &str) -> Option<String> {
        Some(s.to_owned())
    }

    #[test]
    fn relative_windows_stay_relative() {
        assert_eq!(
            at("errors in the last hour"),
            Some((from("now-1h"), None, "in the last hour".into()))
        );
        assert_eq!(at("over the past 3 days").unwrap().0, from("now-3d"));
        assert_eq!(at("last 15 minutes").unwrap().0, from("now-15m"));
        assert_eq!(at("in the last two weeks").unwrap().0, from("now-2w"));
        assert_eq!(at("today").unwrap().0, from("now/d"));
        assert_eq!(
            at("yesterday").map(|w| (w.0, w.1)),
            Some((from("now-1d/d"), from("now/d")))
        );
        assert_eq!(at("this week").unwrap().0, from("now/w"));
        assert_eq!(at("since monday").unwrap().0, from("now/w"));
        assert_eq!(at("since tuesday").unwrap().0, from("now-2d/d"));
        assert_eq!(at("since thursday").unwrap().0, from("now/d"));
        assert_eq!(at("how many records are in logs"), None);
    }

    #[test]
    fn dates_are_absolute() {
        assert_eq!(
            at("between 2026-11-01 and 2026-11-03").map(|w| (w.0, w.1)),
            Some((from("2026-11-01T00:00:00Z"), from("2026-11-03T00:00:00Z")))
        );
        assert_eq!(
            at("since 2026-11-01T10:30").unwrap().0,
            from("2026-11-01T10:30:00Z")
        );
        assert_eq!(
            at("before 2026-11-02").map(|w| (w.0, w.1)),
            Some((None, from("2026-11-02T00:00:00Z")))
        );
        assert_eq!(
            at("on 2026-11-05").map(|w| (w.0, w.1)),
            Some((from("2026-11-05T00:00:00Z"), from("2026-11-06T00:00:00Z")))
        );
        assert_eq!(
            at("from 2026-11-01 to 2026-11-02").map(|w| (w.0, w.1)),
            Some((from("2026-11-01T00:00:00Z"), from("2026-11-02T00:00:00Z")))
        );
    }
}
