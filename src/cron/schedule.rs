//! Schedules as Hermes writes them: `30m` (once, that long from now; `s`, `m`, `h`, `d`),
//! `every 2h` (recurring), a cron expression (`0 9 * * *`, in the configured time zone), or
//! an ISO time (`2026-02-03T14:00`, once; without an offset it is in the configured zone).

use std::str::FromStr;

use jiff::Timestamp;
use jiff::tz::TimeZone;

/// When a job runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// Once, at this moment.
    Once(Timestamp),
    /// Every this many seconds, from when it was created.
    Every(i64),
    /// A cron expression.
    Cron(String),
}

impl Schedule {
    /// Read `text` (as the person or the model wrote it) at `now` in `tz`.
    pub fn parse(text: &str, now: Timestamp, tz: &TimeZone) -> Result<Schedule, String> {
        let text = text.trim();
        let lower = text.to_ascii_lowercase();
        if let Some(every) = lower.strip_prefix("every ") {
            let seconds = duration(every.trim())?;
            return Ok(Schedule::Every(seconds));
        }
        let fields: Vec<&str> = text.split_whitespace().collect();
        if fields.len() >= 5
            && fields.iter().all(|f| {
                f.chars().all(|c| {
                    c.is_ascii_digit() || "*-,/?#LW".contains(c) || c.is_ascii_alphabetic()
                })
            })
        {
            if fields.len() > 5 {
                return Err(format!(
                    "{text:?}: use five fields (minute hour day month weekday); seconds are not taken"
                ));
            }
            croner::Cron::from_str(text)
                .map_err(|e| format!("{text:?} is not a cron expression: {e}"))?;
            return Ok(Schedule::Cron(text.to_owned()));
        }
        if text.contains('T')
            || text
                .get(..4)
                .is_some_and(|y| y.chars().all(|c| c.is_ascii_digit()))
        {
            return at(text, tz).map(Schedule::Once);
        }
        if let Ok(seconds) = duration(&lower) {
            return Ok(Schedule::Once(
                now.checked_add(jiff::SignedDuration::from_secs(seconds))
                    .map_err(|e| e.to_string())?,
            ));
        }
        Err(format!(
            "{text:?} is not a schedule. Use 30m or 2h (once, from now), every 30m (recurring), a cron expression like 0 9 * * *, or a time like 2026-02-03T14:00"
        ))
    }

    /// The first run after `after`; `None` when there is none (a one-shot already past).
    pub fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        match self {
            Schedule::Once(at) => (*at > after).then_some(*at),
            Schedule::Every(seconds) => after
                .checked_add(jiff::SignedDuration::from_secs(*seconds))
                .ok(),
            Schedule::Cron(expr) => cron_next(expr, after, tz),
        }
    }

    pub fn recurring(&self) -> bool {
        !matches!(self, Schedule::Once(_))
    }

    /// How it is stored and shown: what [`Schedule::parse`] reads back the same.
    pub fn text(&self) -> String {
        match self {
            Schedule::Once(at) => at.to_string(),
            Schedule::Every(seconds) => format!("every {}", shown_duration(*seconds)),
            Schedule::Cron(expr) => expr.clone(),
        }
    }
}

/// `30m`, `2 h`, `1day`, `45s` in seconds.
fn duration(text: &str) -> Result<i64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} has no unit (s, m, h or d)"))?;
    let (number, unit) = text.split_at(split);
    let value: i64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration"))?;
    let unit = unit.trim();
    let seconds = match unit {
        "s" | "sec" | "secs" | "second" | "seconds" => 1,
        "m" | "min" | "mins" | "minute" | "minutes" => 60,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600,
        "d" | "day" | "days" => 86_400,
        _ => return Err(format!("{text:?}: the unit must be s, m, h or d")),
    };
    if value <= 0 {
        return Err(format!("{text:?} must be more than nothing"));
    }
    value
        .checked_mul(seconds)
        .filter(|s| *s <= 366 * 86_400)
        .ok_or_else(|| format!("{text:?} is longer than a year"))
}

fn shown_duration(seconds: i64) -> String {
    match seconds {
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// An ISO time: with an offset as it says, without one in `tz`.
fn at(text: &str, tz: &TimeZone) -> Result<Timestamp, String> {
    if let Ok(ts) = Timestamp::from_str(text) {
        return Ok(ts);
    }
    let civil = jiff::civil::DateTime::from_str(text)
        .map_err(|e| format!("{text:?} is not a time: {e}"))?;
    civil
        .to_zoned(tz.clone())
        .map(|z| z.timestamp())
        .map_err(|e| format!("{text:?} is not a time here: {e}"))
}

/// The next match of a cron expression after `after`, on `tz`'s wall clock: the next
/// matching local time, made an instant as the zone says (a time skipped by a change to
/// summer time runs just after it; a time that happens twice runs at its first), and
/// always later than `after`, so a repeated hour does not run a job twice.
fn cron_next(expr: &str, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
    let cron = croner::Cron::from_str(expr).ok()?;
    let utc = chrono::FixedOffset::east_opt(0)?;
    let mut wall = after.to_zoned(tz.clone()).datetime();
    for _ in 0..8 {
        // The wall clock as if it were UTC: croner then walks wall times, not instants.
        let as_utc = chrono::NaiveDate::from_ymd_opt(
            i32::from(wall.year()),
            u32::try_from(wall.month()).ok()?,
            u32::try_from(wall.day()).ok()?,
        )?
        .and_hms_opt(
            u32::try_from(wall.hour()).ok()?,
            u32::try_from(wall.minute()).ok()?,
            u32::try_from(wall.second()).ok()?,
        )?
        .and_local_timezone(utc)
        .single()?;
        let next = cron.find_next_occurrence(&as_utc, false).ok()?;
        let next_wall = jiff::civil::DateTime::new(
            i16::try_from(chrono::Datelike::year(&next)).ok()?,
            i8::try_from(chrono::Datelike::month(&next)).ok()?,
            i8::try_from(chrono::Datelike::day(&next)).ok()?,
            i8::try_from(chrono::Timelike::hour(&next)).ok()?,
            i8::try_from(chrono::Timelike::minute(&next)).ok()?,
            0,
            0,
        )
        .ok()?;
        let at = tz
            .to_ambiguous_zoned(next_wall)
            .compatible()
            .ok()?
            .timestamp();
        if at > after {
            return Some(at);
        }
        wall = next_wall;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::from_str("2026-11-24T08:00:00Z").unwrap()
    }

    #[test]
    fn hermes_schedules_are_read() {
        let utc = TimeZone::UTC;
        assert_eq!(
            Schedule::parse("30m", now(), &utc).unwrap(),
            Schedule::Once(Timestamp::from_str("2026-11-24T08:30:00Z").unwrap())
        );
        assert_eq!(
            Schedule::parse("every 2h", now(), &utc).unwrap(),
            Schedule::Every(7_200)
        );
        assert_eq!(
            Schedule::parse("every 2h", now(), &utc).unwrap().text(),
            "every 2h"
        );
        let cron = Schedule::parse("0 9 * * *", now(), &utc).unwrap();
        assert_eq!(
            cron.next_after(now(), &utc),
            Some(Timestamp::from_str("2026-11-24T09:00:00Z").unwrap())
        );
        let lisbon_summer = TimeZone::get("Europe/Lisbon").unwrap();
        let once = Schedule::parse("2026-07-01T14:00", now(), &lisbon_summer).unwrap();
        assert_eq!(
            once,
            Schedule::Once(Timestamp::from_str("2026-07-01T13:00:00Z").unwrap())
        );
        assert_eq!(
            once.next_after(Timestamp::from_str("2026-08-01T00:00:00Z").unwrap(), &utc),
            None
        );
        assert!(Schedule::parse("0 9 * * SAT", now(), &utc).is_ok());
        assert!(Schedule::parse("0 9 * * TUE,THU", now(), &utc).is_ok());
        for bad in [
            "soon",
            "every",
            "every 0m",
            "99999d",
            "61 * * * *",
            "* * * * * *",
        ] {
            assert!(Schedule::parse(bad, now(), &utc).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_repeated_or_skipped_hour_runs_a_job_once() {
        let ny = TimeZone::get("America/New_York").unwrap();
        let cron = Schedule::Cron("30 1 * * *".into());
        // 2026-11-01: 01:00–02:00 happens twice in New York.
        let before = Timestamp::from_str("2026-11-01T04:00:00Z").unwrap(); // 00:00 EDT
        let first = cron.next_after(before, &ny).unwrap();
        assert_eq!(first, Timestamp::from_str("2026-11-01T05:30:00Z").unwrap()); // 01:30 EDT
        let second = cron.next_after(first, &ny).unwrap();
        assert_eq!(
            second,
            Timestamp::from_str("2026-11-02T06:30:00Z").unwrap(),
            "not again at 01:30 EST the same night"
        );
        // 2026-03-08: 02:00–03:00 does not happen; a 02:30 job runs at 03:30 EDT.
        let spring = Schedule::Cron("30 2 * * *".into());
        let at = spring
            .next_after(Timestamp::from_str("2026-03-08T05:00:00Z").unwrap(), &ny)
            .unwrap();
        assert_eq!(at, Timestamp::from_str("2026-03-08T07:30:00Z").unwrap());
    }

    #[test]
    fn cron_follows_the_zones_wall_clock() {
        let ny = TimeZone::get("America/New_York").unwrap();
        let cron = Schedule::Cron("0 9 * * *".into());
        // 9:00 in New York in November is 14:00 UTC.
        assert_eq!(
            cron.next_after(now(), &ny),
            Some(Timestamp::from_str("2026-11-24T14:00:00Z").unwrap())
        );
    }
}
