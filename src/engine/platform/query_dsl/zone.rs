//! Time zones of date aggregations (`time_zone`), as Elasticsearch reads them: a fixed offset
//! (`+01:00`, `-07:00`, `-0700`, `Z`, `UTC`) or a region of the tz database
//! (`America/Phoenix`, `Europe/Paris`), whose offset changes with daylight saving time.

use chrono::{FixedOffset, NaiveDateTime, Offset, TimeZone};
use chrono_tz::Tz;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Zone {
    Fixed(FixedOffset),
    Region(Tz),
}

const DAY_MS: i64 = 86_400_000;

impl Zone {
    /// Reads a `time_zone`; an unknown one says so.
    pub fn parse(text: &str) -> Result<Zone, String> {
        let text = text.trim();
        if matches!(text, "Z" | "z" | "UTC" | "utc" | "GMT" | "Etc/UTC") {
            return Ok(Zone::Fixed(chrono::Utc.fix()));
        }
        if let Some(offset) = fixed_offset(text) {
            return Ok(Zone::Fixed(offset));
        }
        text.parse::<Tz>()
            .map(Zone::Region)
            .map_err(|_| format!("unknown time zone [{text}]"))
    }

    /// Whether the zone is UTC at every instant.
    pub fn is_utc(&self) -> bool {
        match self {
            Zone::Fixed(offset) => offset.local_minus_utc() == 0,
            Zone::Region(tz) => tz.name() == "UTC" || tz.name() == "Etc/UTC",
        }
    }

    /// The zone's offset from UTC at the instant `ms` (Unix milliseconds), in milliseconds.
    pub fn offset_ms(&self, ms: i64) -> i64 {
        i64::from(self.offset_at(ms).local_minus_utc()) * 1000
    }

    /// The zone's offset from UTC at the instant `ms`.
    pub fn offset_at(&self, ms: i64) -> FixedOffset {
        match self {
            Zone::Fixed(offset) => *offset,
            Zone::Region(tz) => match chrono::DateTime::from_timestamp_millis(ms) {
                Some(at) => tz.offset_from_utc_datetime(&at.naive_utc()).fix(),
                None => chrono::Utc.fix(),
            },
        }
    }

    /// The one offset the zone has from `low` to `high` (Unix milliseconds), if it keeps one.
    /// Offsets change at most a few times a year, never twice in a day: one reading a day
    /// sees every change.
    pub fn constant_offset_ms(&self, low: i64, high: i64) -> Option<i64> {
        let first = self.offset_ms(low);
        if let Zone::Fixed(_) = self {
            return Some(first);
        }
        let days = (high.saturating_sub(low)) / DAY_MS;
        // Beyond 30 years of daily readings, treat the offset as changing.
        if days > 11_000 {
            return None;
        }
        (0..=days)
            .map(|day| low + day * DAY_MS)
            .chain([high])
            .all(|ms| self.offset_ms(ms) == first)
            .then_some(first)
    }

    /// The instant a wall-clock time of the zone names: the earlier of two when clocks go back;
    /// when they go forward over it, the instant they jumped (the first whose wall-clock time
    /// is later), where a bucket of local time begins.
    pub fn instant_of(&self, local: NaiveDateTime) -> Option<i64> {
        let earliest = |local: NaiveDateTime| match self {
            Zone::Fixed(offset) => offset.from_local_datetime(&local).earliest(),
            Zone::Region(tz) => tz
                .from_local_datetime(&local)
                .earliest()
                .map(|at| at.fixed_offset()),
        };
        if let Some(at) = earliest(local) {
            return Some(at.timestamp_millis());
        }
        // In a gap (a few hours at most): the first existing minute after it, then the
        // instant of the jump, where the offset last changed before it.
        let after = (1..=24 * 60).find_map(|m| earliest(local + chrono::Duration::minutes(m)))?;
        let after = after.timestamp_millis();
        let offset = self.offset_ms(after);
        let (mut low, mut high) = (after - DAY_MS, after);
        while high - low > 1 {
            let mid = low + (high - low) / 2;
            if self.offset_ms(mid) == offset {
                high = mid;
            } else {
                low = mid;
            }
        }
        Some(high)
    }

    /// The wall-clock time of the zone at the instant `ms`.
    pub fn local_of(&self, ms: i64) -> Option<NaiveDateTime> {
        let at = chrono::DateTime::from_timestamp_millis(ms)?;
        Some(at.naive_utc() + chrono::Duration::milliseconds(self.offset_ms(ms)))
    }
}

/// `+01:00`, `-07:00`, `+0100`, `-07`, `+1`: hours and minutes east of UTC.
fn fixed_offset(text: &str) -> Option<FixedOffset> {
    let (sign, rest) = match text.as_bytes().first()? {
        b'+' => (1, &text[1..]),
        b'-' => (-1, &text[1..]),
        _ => return None,
    };
    let (hours, minutes) = match rest.split_once(':') {
        Some((h, m)) => (h, m),
        None if rest.len() == 4 => rest.split_at(2),
        None => (rest, "0"),
    };
    if hours.is_empty() || hours.len() > 2 || minutes.len() > 2 {
        return None;
    }
    let (hours, minutes): (i32, i32) = (hours.parse().ok()?, minutes.parse().ok()?);
    if hours > 18 || minutes > 59 {
        return None;
    }
    FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn offsets_and_regions_are_read() {
        assert_eq!(Zone::parse("-07:00").unwrap().offset_ms(0), -7 * 3_600_000);
        assert_eq!(Zone::parse("+0530").unwrap().offset_ms(0), 19_800_000);
        assert!(Zone::parse("UTC").unwrap().is_utc());
        assert!(Zone::parse("Z").unwrap().is_utc());
        let phoenix = Zone::parse("America/Phoenix").unwrap();
        assert_eq!(
            phoenix.offset_ms(ms("2016-01-01T00:00:00Z")),
            -7 * 3_600_000
        );
        assert!(
            Zone::parse("Mars/Olympus")
                .unwrap_err()
                .contains("unknown time zone")
        );
        assert!(Zone::parse("+25:00").is_err());
    }

    #[test]
    fn a_region_keeps_its_offset_only_between_changes() {
        let paris = Zone::parse("Europe/Paris").unwrap();
        assert_eq!(
            paris.constant_offset_ms(ms("2026-01-05T00:00:00Z"), ms("2026-02-05T00:00:00Z")),
            Some(3_600_000)
        );
        // Clocks go forward on 2026-03-29.
        assert_eq!(
            paris.constant_offset_ms(ms("2026-03-01T00:00:00Z"), ms("2026-04-05T00:00:00Z")),
            None
        );
        let phoenix = Zone::parse("America/Phoenix").unwrap();
        assert!(
            phoenix
                .constant_offset_ms(ms("2020-01-01T00:00:00Z"), ms("2026-01-01T00:00:00Z"))
                .is_some()
        );
    }

    #[test]
    fn wall_clock_times_in_gaps_and_overlaps() {
        let paris = Zone::parse("Europe/Paris").unwrap();
        let local = |text: &str| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M").unwrap();
        // 02:30 does not exist on 2026-03-29: the clocks jumped from 02:00 to 03:00 (01:00Z).
        assert_eq!(
            paris.instant_of(local("2026-03-29 02:30")),
            Some(ms("2026-03-29T01:00:00Z"))
        );
        // 02:30 happens twice on 2026-10-25: the earlier is 00:30Z.
        assert_eq!(
            paris.instant_of(local("2026-10-25 02:30")),
            Some(ms("2026-10-25T00:30:00Z"))
        );
        assert_eq!(
            paris.instant_of(local("2026-07-01 00:00")),
            Some(ms("2026-06-30T22:00:00Z"))
        );
        assert_eq!(
            paris.local_of(ms("2026-06-30T22:00:00Z")),
            Some(local("2026-07-01 00:00"))
        );
    }
}
