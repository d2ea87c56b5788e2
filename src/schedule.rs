//! Periodic schedules stored in a queue: what a schedule is, and when its
//! slots fall. Driving them (enqueueing each due slot once) is the
//! backends' `Store::run_due_schedules`, one transaction each.
//!
//! A slot is a time, in milliseconds since the Unix epoch, at which a
//! schedule enqueues one task. Its task carries the unique key
//! `schedule:<name>:<slot>`, reserved for [`SLOT_KEY_RESERVED`] after it is
//! done, and runs at the slot's time (a slot enqueued late is ready at
//! once, ahead of later slots).

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};
use croner::Cron;

use crate::error::{Error, Result};
use crate::options::{check_text, resolve_max_attempts};

/// The longest schedule name, in bytes.
pub const MAX_SCHEDULE_NAME_LEN: usize = 200;

/// The most slots [`CatchUp::Each`] enqueues in one go.
pub const MAX_CATCH_UP: u32 = 10_000;

/// How late [`CatchUp::Skip`] still runs a slot.
pub const SKIP_GRACE: Duration = Duration::from_secs(60);

/// How long a slot's unique key stays reserved after its task is done, so
/// that no replay (a schedule replaced while the clock was stepped back)
/// enqueues the slot again.
pub(crate) const SLOT_KEY_RESERVED: i64 = 24 * 60 * 60 * 1000;

/// The longest interval of [`ScheduleSpec::Every`].
const MAX_INTERVAL: Duration = Duration::from_secs(366 * 24 * 60 * 60);

/// When a schedule's slots fall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleSpec {
    /// A cron expression of five fields (minute, hour, day of month,
    /// month, day of week) or six (seconds first), read in the schedule's
    /// time zone; `@daily` and the other usual aliases are accepted.
    Cron(String),
    /// Every interval (1 ms to 366 days), the first slot one interval
    /// after the schedule is added (or replaced).
    Every(Duration),
}

impl ScheduleSpec {
    /// The spec as stored: the cron expression, or `@every <ms>ms`.
    pub(crate) fn stored(&self) -> String {
        match self {
            ScheduleSpec::Cron(expression) => expression.clone(),
            ScheduleSpec::Every(interval) => format!("@every {}ms", interval.as_millis()),
        }
    }

    /// The spec read back from its stored text.
    pub(crate) fn from_stored(text: &str) -> ScheduleSpec {
        text.strip_prefix("@every ")
            .and_then(|rest| rest.strip_suffix("ms"))
            .and_then(|ms| ms.parse::<u64>().ok())
            .map_or_else(
                || ScheduleSpec::Cron(text.to_owned()),
                |ms| ScheduleSpec::Every(Duration::from_millis(ms)),
            )
    }
}

/// What the slots that came due while no handle drove the schedule (the
/// program was down, or no pull came) become, when a handle next drives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CatchUp {
    /// The latest due slot runs if it came due at most [`SKIP_GRACE`] ago;
    /// every other due slot is skipped.
    Skip,
    /// The latest due slot runs, however late: one run stands for all the
    /// slots missed. The default.
    #[default]
    One,
    /// Every due slot runs, the latest N of them (1 to [`MAX_CATCH_UP`]),
    /// in slot order; older ones are skipped.
    Each(u32),
}

impl CatchUp {
    /// The policy as stored: its number and its bound.
    pub(crate) fn stored(self) -> (i64, i64) {
        match self {
            CatchUp::Skip => (0, 1),
            CatchUp::One => (1, 1),
            CatchUp::Each(limit) => (2, i64::from(limit)),
        }
    }

    /// The policy read back from its stored number and bound.
    pub(crate) fn from_stored(kind: i64, limit: i64) -> CatchUp {
        match kind {
            0 => CatchUp::Skip,
            2 => CatchUp::Each(u32::try_from(limit.clamp(1, i64::from(MAX_CATCH_UP))).unwrap_or(1)),
            _ => CatchUp::One,
        }
    }
}

/// A periodic schedule: every slot of its [`ScheduleSpec`] enqueues one
/// task with its payload and push options, exactly once however many
/// processes or machines drive the queue's schedules (see
/// [`crate::Queue::run_due_schedules`]).
///
/// Cron slots are read in the schedule's time zone, so `0 2 * * *` runs at
/// 02:00 local time whatever the offset. Across daylight-saving changes
/// (what the cron crate does, checked by tq's tests):
/// - in a gap (the clocks jump forward), a slot whose local time does not
///   exist that day runs at the first instant after the gap (02:30 on a
///   night when 02:00 jumps to 03:00 runs at 03:00), once;
/// - in a repeat (the clocks go back), a slot whose local time occurs twice
///   runs once, at the first of the two instants. A pattern that matches
///   every minute or second of the repeated hour (`*` in the hour field)
///   runs at both instants, as the wall clock shows them twice.
///
/// Setters check their value, so a schedule never holds a bad cron
/// expression, time zone or bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    pub(crate) name: String,
    pub(crate) spec: ScheduleSpec,
    pub(crate) time_zone: String,
    pub(crate) payload: String,
    pub(crate) priority: i32,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) catch_up: CatchUp,
}

impl Schedule {
    /// A schedule named `name` (1 to [`MAX_SCHEDULE_NAME_LEN`] bytes, no
    /// NUL) enqueueing `payload` (a JSON text, checked when it is added)
    /// at every slot of `spec`, in UTC, with priority 0, the queue's max
    /// attempts and [`CatchUp::One`]. Fails with
    /// [`crate::ErrorKind::InvalidArgument`] for a bad name, a cron
    /// expression that does not parse (the message names it), or an
    /// interval outside 1 ms to 366 days.
    pub fn new(name: &str, spec: ScheduleSpec, payload: &str) -> Result<Schedule> {
        check_text("a schedule name", name, MAX_SCHEDULE_NAME_LEN)?;
        match &spec {
            ScheduleSpec::Cron(expression) => {
                parse_cron(expression)?;
            }
            ScheduleSpec::Every(interval) => {
                if interval.is_zero() || *interval > MAX_INTERVAL {
                    return Err(Error::invalid_argument(format!(
                        "a schedule's interval must be between 1 ms and 366 days, got {} ms",
                        interval.as_millis()
                    )));
                }
            }
        }
        Ok(Schedule {
            name: name.to_owned(),
            spec,
            time_zone: "UTC".to_owned(),
            payload: payload.to_owned(),
            priority: 0,
            max_attempts: None,
            catch_up: CatchUp::default(),
        })
    }

    /// Reads the cron expression in the IANA time zone `name` (such as
    /// `Europe/Paris`); fails with [`crate::ErrorKind::InvalidArgument`]
    /// naming it when it is unknown, or when the schedule is an interval
    /// (an interval is the same in every zone).
    pub fn time_zone(&mut self, name: &str) -> Result<&mut Self> {
        parse_time_zone(name)?;
        if matches!(self.spec, ScheduleSpec::Every(_)) && name != "UTC" {
            return Err(Error::invalid_argument(format!(
                "schedule '{}' is an interval, which no time zone changes: a time zone \
                 (here '{name}') applies to cron schedules only",
                self.name
            )));
        }
        self.time_zone = name.to_owned();
        Ok(self)
    }

    /// The priority of the tasks it enqueues (higher first; default 0).
    pub fn priority(&mut self, priority: i32) -> &mut Self {
        self.priority = priority;
        self
    }

    /// How many deliveries each of its tasks gets (at least 1; default
    /// the adding handle's [`crate::OpenOptions::max_attempts`]).
    pub fn max_attempts(&mut self, max_attempts: u32) -> Result<&mut Self> {
        self.max_attempts = Some(crate::options::check_max_attempts(max_attempts)?);
        Ok(self)
    }

    /// What slots missed while no one drove the schedule become; fails
    /// with [`crate::ErrorKind::InvalidArgument`] for [`CatchUp::Each`]
    /// of 0 or more than [`MAX_CATCH_UP`].
    pub fn catch_up(&mut self, catch_up: CatchUp) -> Result<&mut Self> {
        if let CatchUp::Each(limit) = catch_up {
            if limit == 0 || limit > MAX_CATCH_UP {
                return Err(Error::invalid_argument(format!(
                    "a catch-up of each missed slot is bounded by 1 to {MAX_CATCH_UP} slots, \
                     got {limit}"
                )));
            }
        }
        self.catch_up = catch_up;
        Ok(self)
    }

    /// The schedule's name, unique in its queue.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// When its slots fall.
    pub fn spec(&self) -> &ScheduleSpec {
        &self.spec
    }

    /// The IANA name of the time zone its cron expression is read in.
    pub fn time_zone_name(&self) -> &str {
        &self.time_zone
    }

    /// The payload of the tasks it enqueues.
    pub fn payload(&self) -> &str {
        &self.payload
    }

    /// The priority of the tasks it enqueues.
    pub fn task_priority(&self) -> i32 {
        self.priority
    }

    /// The max attempts of the tasks it enqueues, when set (a listed
    /// schedule always has it: the adding handle's default is stored).
    pub fn task_max_attempts(&self) -> Option<u32> {
        self.max_attempts
    }

    /// Its catch-up policy.
    pub fn catch_up_policy(&self) -> CatchUp {
        self.catch_up
    }

    /// This schedule as a handle whose tasks get `default_max_attempts`
    /// unless told otherwise stores it.
    pub(crate) fn resolved(&self, default_max_attempts: u32) -> StoredSchedule {
        StoredSchedule::new(
            self.clone(),
            resolve_max_attempts(self.max_attempts, default_max_attempts),
        )
    }

    /// A schedule read back from the store, as stored.
    pub(crate) fn from_stored(
        name: String,
        spec: &str,
        time_zone: String,
        payload: String,
        priority: i32,
        max_attempts: u32,
        catch_up: (i64, i64),
    ) -> StoredSchedule {
        let schedule = Schedule {
            name,
            spec: ScheduleSpec::from_stored(spec),
            time_zone,
            payload,
            priority,
            max_attempts: None,
            catch_up: CatchUp::from_stored(catch_up.0, catch_up.1),
        };
        StoredSchedule::new(schedule, max_attempts)
    }

    /// When its slots fall, ready to compute.
    pub(crate) fn timetable(&self) -> Result<Timetable> {
        Timetable::new(&self.spec, &self.time_zone)
    }
}

/// A schedule as the store keeps it: the max attempts of its tasks
/// resolved ([`Schedule::resolved`]), so that a backend stores and reads
/// them as they are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredSchedule {
    /// The schedule, its max attempts set to `task_max_attempts`.
    schedule: Schedule,
    task_max_attempts: u32,
}

impl StoredSchedule {
    fn new(mut schedule: Schedule, task_max_attempts: u32) -> StoredSchedule {
        schedule.max_attempts = Some(task_max_attempts);
        StoredSchedule {
            schedule,
            task_max_attempts,
        }
    }

    pub(crate) fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    pub(crate) fn into_schedule(self) -> Schedule {
        self.schedule
    }

    pub(crate) fn task_max_attempts(&self) -> u32 {
        self.task_max_attempts
    }
}

/// A stored schedule, as [`crate::Queue::schedules`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleInfo {
    pub(crate) schedule: StoredSchedule,
    pub(crate) paused: bool,
    pub(crate) next_slot: i64,
}

impl ScheduleInfo {
    /// The schedule as added.
    pub fn schedule(&self) -> &Schedule {
        self.schedule.schedule()
    }

    /// Whether it is paused (its slots are skipped until resumed).
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// Its next slot not yet enqueued, in ms since the Unix epoch (on
    /// PostgreSQL, on the server's clock).
    pub fn next_slot_unix_ms(&self) -> i64 {
        self.next_slot
    }
}

/// A schedule's slots, parsed once.
pub(crate) enum Timetable {
    Cron(Box<Cron>, Tz),
    Every(i64),
}

impl Timetable {
    pub(crate) fn new(spec: &ScheduleSpec, time_zone: &str) -> Result<Timetable> {
        Ok(match spec {
            ScheduleSpec::Cron(expression) => Timetable::Cron(
                Box::new(parse_cron(expression)?),
                parse_time_zone(time_zone)?,
            ),
            ScheduleSpec::Every(interval) => Timetable::Every(interval.as_millis().max(1) as i64),
        })
    }

    /// The first slot after `now`.
    pub(crate) fn first_slot(&self, now: i64) -> Result<i64> {
        match self {
            Timetable::Every(interval) => Ok(now.saturating_add(*interval)),
            Timetable::Cron(cron, tz) => next_cron(cron, tz, now),
        }
    }

    /// The first slot at or after `now`, counting from the slot `next` of
    /// the same timetable: where a resumed schedule goes on.
    pub(crate) fn slot_from(&self, next: i64, now: i64) -> Result<i64> {
        match self {
            Timetable::Every(interval) if next < now => {
                let steps = (now - next + interval - 1) / interval;
                Ok(next.saturating_add(steps.saturating_mul(*interval)))
            }
            Timetable::Every(_) => Ok(next),
            Timetable::Cron(..) if next >= now => Ok(next),
            Timetable::Cron(..) => self.first_slot(now - 1),
        }
    }

    /// The slots to enqueue at `now` for a schedule whose next slot is
    /// `next` (due: `next <= now`), in slot order, by `catch_up`; and the
    /// schedule's next slot afterwards, the first after `now`.
    pub(crate) fn due(&self, next: i64, now: i64, catch_up: CatchUp) -> Result<(Vec<i64>, i64)> {
        let wanted = match catch_up {
            CatchUp::Skip | CatchUp::One => 1,
            CatchUp::Each(limit) => limit as usize,
        };
        let mut slots = Vec::new();
        let after = match self {
            Timetable::Every(interval) => {
                let latest = next + (now - next) / interval * interval;
                let mut slot = latest;
                while slot >= next && slots.len() < wanted {
                    slots.push(slot);
                    slot -= interval;
                }
                latest.saturating_add(*interval)
            }
            Timetable::Cron(cron, tz) => {
                let mut at = at_ms(tz, now.div_euclid(1000) * 1000)?;
                let mut inclusive = true;
                while slots.len() < wanted {
                    let Ok(slot) = cron.find_previous_occurrence(&at, inclusive) else {
                        break;
                    };
                    let slot_ms = slot.timestamp_millis();
                    if slot_ms < next {
                        break;
                    }
                    slots.push(slot_ms);
                    at = slot;
                    inclusive = false;
                }
                next_cron(cron, tz, now)?
            }
        };
        if catch_up == CatchUp::Skip {
            let grace = SKIP_GRACE.as_millis() as i64;
            slots.retain(|&slot| now - slot <= grace);
        }
        slots.reverse();
        Ok((slots, after))
    }
}

/// The unique key of `schedule`'s task for `slot`.
pub(crate) fn slot_key(schedule: &str, slot: i64) -> String {
    format!("schedule:{schedule}:{slot}")
}

fn parse_cron(expression: &str) -> Result<Cron> {
    CronParser::builder()
        .seconds(Seconds::Optional)
        .build()
        .parse(expression)
        .map_err(|err| {
            Error::invalid_argument(format!(
                "'{expression}' is not a cron expression of 5 or 6 fields: {err}"
            ))
        })
}

fn parse_time_zone(name: &str) -> Result<Tz> {
    Tz::from_str(name).map_err(|_| {
        Error::invalid_argument(format!(
            "'{name}' is not a known IANA time zone (such as UTC or Europe/Paris)"
        ))
    })
}

fn at_ms(tz: &Tz, ms: i64) -> Result<DateTime<Tz>> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .map(|utc| utc.with_timezone(tz))
        .ok_or_else(|| Error::invalid_argument(format!("{ms} ms is outside the calendar")))
}

/// The first cron slot after `now`, in whole seconds.
fn next_cron(cron: &Cron, tz: &Tz, now: i64) -> Result<i64> {
    let at = at_ms(tz, now.div_euclid(1000) * 1000)?;
    cron.find_next_occurrence(&at, false)
        .map(|slot| slot.timestamp_millis())
        .map_err(|err| {
            Error::invalid_argument(format!(
                "cron expression '{}' has no slot after {now} ms: {err}",
                cron.pattern
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> i64 {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .timestamp_millis()
    }

    fn cron(expression: &str, tz: &str) -> Timetable {
        Timetable::new(&ScheduleSpec::Cron(expression.into()), tz).unwrap()
    }

    #[test]
    fn an_interval_catches_up_by_its_policy_and_goes_on_from_its_anchor() {
        let every = Timetable::Every(1000);
        assert_eq!(
            every.due(5000, 5000, CatchUp::One).unwrap(),
            (vec![5000], 6000)
        );
        assert_eq!(
            every.due(5000, 8500, CatchUp::One).unwrap(),
            (vec![8000], 9000)
        );
        assert_eq!(
            every.due(5000, 8500, CatchUp::Each(3)).unwrap(),
            (vec![6000, 7000, 8000], 9000)
        );
        assert_eq!(
            every.due(5000, 8500, CatchUp::Each(10)).unwrap(),
            (vec![5000, 6000, 7000, 8000], 9000)
        );
        assert_eq!(
            every.due(5000, 8500, CatchUp::Skip).unwrap(),
            (vec![8000], 9000)
        );
        let late = 8000 + SKIP_GRACE.as_millis() as i64 + 1;
        let hourly = Timetable::Every(3_600_000);
        assert_eq!(
            hourly.due(8000, late, CatchUp::Skip).unwrap(),
            (vec![], 3_608_000),
            "a slot found due past the grace is skipped"
        );
        assert_eq!(every.slot_from(5000, 7200).unwrap(), 8000);
        assert_eq!(every.slot_from(9000, 7200).unwrap(), 9000);
    }

    #[test]
    fn cron_slots_with_seconds_and_in_a_time_zone() {
        let each_second = cron("* * * * * *", "UTC");
        let now = ms("2026-01-01T00:00:05.300Z");
        assert_eq!(
            each_second
                .due(ms("2026-01-01T00:00:03Z"), now, CatchUp::Each(100))
                .unwrap(),
            (
                vec![
                    ms("2026-01-01T00:00:03Z"),
                    ms("2026-01-01T00:00:04Z"),
                    ms("2026-01-01T00:00:05Z")
                ],
                ms("2026-01-01T00:00:06Z")
            )
        );
        let paris = cron("0 2 * * *", "Europe/Paris");
        assert_eq!(
            paris.first_slot(ms("2026-01-10T12:00:00Z")).unwrap(),
            ms("2026-01-11T01:00:00Z")
        );
    }

    #[test]
    fn a_slot_in_a_daylight_saving_gap_runs_after_it_and_a_repeated_one_runs_once() {
        // 2026-03-29 in Paris: 02:00 jumps to 03:00 (01:00 UTC).
        let gap = cron("30 2 * * *", "Europe/Paris");
        assert_eq!(
            gap.first_slot(ms("2026-03-28T12:00:00Z")).unwrap(),
            ms("2026-03-29T01:00:00Z"),
            "02:30 that does not exist runs at 03:00 local"
        );
        assert_eq!(
            gap.first_slot(ms("2026-03-29T01:00:00Z")).unwrap(),
            ms("2026-03-30T00:30:00Z")
        );
        // 2026-10-25 in Paris: 03:00 goes back to 02:00 (01:00 UTC).
        let repeat = cron("30 2 * * *", "Europe/Paris");
        let first = repeat.first_slot(ms("2026-10-24T12:00:00Z")).unwrap();
        assert_eq!(first, ms("2026-10-25T00:30:00Z"), "the first 02:30");
        assert_eq!(
            repeat.first_slot(first).unwrap(),
            ms("2026-10-26T01:30:00Z"),
            "the second 02:30 does not run"
        );
        let (slots, _) = repeat
            .due(first, ms("2026-10-25T03:00:00Z"), CatchUp::Each(10))
            .unwrap();
        assert_eq!(slots, vec![first]);
    }

    #[test]
    fn a_spec_round_trips_through_its_stored_text() {
        for spec in [
            ScheduleSpec::Every(Duration::from_millis(1500)),
            ScheduleSpec::Cron("*/5 * * * *".into()),
        ] {
            assert_eq!(ScheduleSpec::from_stored(&spec.stored()), spec);
        }
        for policy in [CatchUp::Skip, CatchUp::One, CatchUp::Each(7)] {
            let (kind, limit) = policy.stored();
            assert_eq!(CatchUp::from_stored(kind, limit), policy);
        }
    }

    #[test]
    fn bad_specs_and_zones_are_refused_naming_them() {
        let err = Schedule::new("a", ScheduleSpec::Cron("61 * * * *".into()), "1").unwrap_err();
        assert!(err.message().contains("'61 * * * *'"), "{}", err.message());
        let mut schedule = Schedule::new("a", ScheduleSpec::Cron("@daily".into()), "1").unwrap();
        let err = schedule.time_zone("Mars/Olympus").unwrap_err();
        assert!(
            err.message().contains("'Mars/Olympus'"),
            "{}",
            err.message()
        );
        assert_eq!(schedule.time_zone_name(), "UTC");
        assert!(Schedule::new("a", ScheduleSpec::Every(Duration::ZERO), "1").is_err());
        let mut every =
            Schedule::new("a", ScheduleSpec::Every(Duration::from_secs(1)), "1").unwrap();
        assert!(every.time_zone("Europe/Paris").is_err());
        assert!(every.catch_up(CatchUp::Each(0)).is_err());
    }
}
