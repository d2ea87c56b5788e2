//! Events and durable sleep, the rules both backends share: the part of
//! the [`Store`](crate::store::Store) interface about them (in a trait of
//! its own, [`EventStore`]), what a wait does given what it finds
//! ([`wait_step`]), and the reserved names under which a task's steps
//! record a wait's or a sleep's outcome.
//!
//! An event is stored under a key of a queue until one wait takes it or
//! its retention passes. A task waiting for a key is snoozed (its lease
//! released, its attempt given back, its steps kept) until an event under
//! the key or its timeout; the row of its wait says which key and until
//! when. Events under a key are taken in the order they were sent, one per
//! wait; a signal with tasks waiting wakes the one that has waited longest.

use crate::error::{Error, Result};
use crate::options::{check_text, MAX_STEP_NAME_LEN};
use crate::task::Receipt;

/// The prefix of the step names tq records itself (events taken,
/// timeouts, sleeps); the caller's step names may not start with it.
pub const RESERVED_STEP_PREFIX: &str = "tq:";

/// Checks the name of a step the caller records: a step name not starting
/// with [`RESERVED_STEP_PREFIX`], under which tq records the outcomes of
/// waits and sleeps.
pub(crate) fn check_own_step_name(name: &str) -> Result<()> {
    check_text("a step name", name, MAX_STEP_NAME_LEN)?;
    if name.starts_with(RESERVED_STEP_PREFIX) {
        return Err(Error::invalid_argument(format!(
            "step names starting with '{RESERVED_STEP_PREFIX}' are tq's own (events, \
             timeouts and sleeps): '{name}' cannot be recorded"
        )));
    }
    Ok(())
}

/// The step recording the event a wait for `key` took: its output is the
/// event's payload.
pub(crate) fn event_step(key: &str) -> String {
    format!("{RESERVED_STEP_PREFIX}event:{key}")
}

/// The step recording that a wait for `key` timed out: its output is the
/// time it timed out at.
pub(crate) fn timeout_step(key: &str) -> String {
    format!("{RESERVED_STEP_PREFIX}timeout:{key}")
}

/// The step recording the sleep named `name`: its output is the time it
/// ends, fixed by its first call.
pub(crate) fn sleep_step(name: &str) -> String {
    format!("{RESERVED_STEP_PREFIX}sleep:{name}")
}

/// What waiting for an event gives a held task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Awaited {
    /// The payload of the event the wait took, now or at an earlier
    /// delivery; the task is still held.
    Event(String),
    /// The wait timed out before an event came, now or at an earlier
    /// delivery; the task is still held.
    TimedOut,
    /// The task was handed back to wait (its lease released, its attempt
    /// given back, its steps kept): the delivery is over, and the worker
    /// must stop working on it. The next delivery asks again and gets the
    /// event or the timeout.
    Suspended,
}

/// What a durable sleep gives a held task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slept {
    /// The sleep's end has passed: the task is still held and goes on.
    Over,
    /// The task was handed back to run at the sleep's end (its lease
    /// released, its attempt given back, its steps kept): the delivery is
    /// over, and the worker must stop working on it.
    Suspended,
}

/// When a sleep ends: at a time, or a length after its first call, which
/// a backend with a clock of its own counts on that clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SleepEnd {
    At(i64),
    After(i64),
}

/// A wait of a task found in its transaction: for which key, and until
/// when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StoredWait {
    pub(crate) key: String,
    pub(crate) until: i64,
}

/// What a wait for an event does, decided by [`wait_step`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WaitStep {
    /// Answers what an earlier delivery recorded; writes nothing.
    Recorded(Awaited),
    /// Takes the unconsumed event numbered `seq` (deleting it), records
    /// its payload as the task's event step and ends the task's wait.
    Take { seq: i64, payload: String },
    /// Records the timeout step (at `until`) and ends the task's wait.
    TimeOut { until: i64 },
    /// Stores the task's wait for the key until `until` (replacing any
    /// other) when `new`, and snoozes the task until then.
    Suspend { until: i64, new: bool },
}

/// What a wait for `key` with `timeout` ms does at `now`, given the
/// outcome steps the task has for the key (`recorded`: the event's
/// payload, or the timeout), the key's oldest unconsumed event (`event`:
/// its number and payload) and the task's stored wait, in this order: a
/// recorded outcome is answered again; an unconsumed event is taken (even
/// when the wait's time has passed: until the task reads its timeout, an
/// event that came meanwhile is still its answer); a wait for the key
/// whose time has passed ends as a timeout; one whose time has not (the
/// task was delivered early, say by a retry) suspends the task again until
/// then; otherwise a new wait starts (a timeout of 0 times out at once).
pub(crate) fn wait_step(
    recorded: Option<Awaited>,
    event: Option<(i64, String)>,
    wait: Option<StoredWait>,
    key: &str,
    now: i64,
    timeout: i64,
) -> WaitStep {
    if let Some(outcome) = recorded {
        return WaitStep::Recorded(outcome);
    }
    if let Some((seq, payload)) = event {
        return WaitStep::Take { seq, payload };
    }
    match wait {
        Some(wait) if wait.key == key && wait.until <= now => {
            WaitStep::TimeOut { until: wait.until }
        }
        Some(wait) if wait.key == key => WaitStep::Suspend {
            until: wait.until,
            new: false,
        },
        _ => {
            let until = now.saturating_add(timeout);
            if until <= now {
                WaitStep::TimeOut { until }
            } else {
                WaitStep::Suspend { until, new: true }
            }
        }
    }
}

/// The outcome recorded by the steps named by [`event_step`] and
/// [`timeout_step`] of one key, given as (name, output) pairs.
pub(crate) fn recorded_outcome(key: &str, steps: Vec<(String, String)>) -> Option<Awaited> {
    let event = event_step(key);
    let (name, output) = steps.into_iter().next()?;
    Some(if name == event {
        Awaited::Event(output)
    } else {
        Awaited::TimedOut
    })
}

/// The part of [`Store`](crate::store::Store) about events and sleeps.
/// Each method is one atomic operation, safe from any number of threads
/// and processes at once: a signal and a wait under the same key are
/// serialised, so an event is never lost nor taken twice.
pub(crate) trait EventStore {
    /// Stores an event under `key` with `payload` at `now`, kept for
    /// `retention` ms; if tasks of the queue wait for `key` (pending, not
    /// delivered since), the one that has waited longest takes it at once
    /// instead: its wait ends, the payload is recorded as its event step,
    /// and it is ready now. Returns that task's id, if any. Also deletes
    /// some of the queue's events whose retention has passed.
    fn signal(&self, key: &str, payload: &str, now: i64, retention: i64) -> Result<Option<i64>>;

    /// Waits for an event under `key` for the task of the current delivery
    /// `receipt`, as [`wait_step`] decides, in one transaction: a
    /// suspension snoozes the task without counting its attempt. `NotHeld`,
    /// changing nothing, when the delivery is no longer current.
    fn wait_for_event(
        &self,
        receipt: Receipt,
        key: &str,
        now: i64,
        timeout: i64,
    ) -> Result<Awaited>;

    /// The sleep named `name` of the task of the current delivery
    /// `receipt`, in one transaction: its end is recorded as a step by
    /// its first call (as `end` says) and read by every later one; the
    /// task goes on once the end has passed, and is snoozed until it
    /// otherwise, without counting its attempt. `NotHeld`, changing
    /// nothing, when the delivery is no longer current.
    fn sleep(&self, receipt: Receipt, name: &str, now: i64, end: SleepEnd) -> Result<Slept>;
}

/// The outcome of a sleep ending at `until`, at `now`.
pub(crate) fn sleep_outcome(until: i64, now: i64) -> Slept {
    if until <= now {
        Slept::Over
    } else {
        Slept::Suspended
    }
}

/// A sleep's end as recorded in its step's output; a step of another
/// program's making that holds no time ends the sleep at once.
pub(crate) fn recorded_sleep_end(output: &str) -> i64 {
    output.trim().parse().unwrap_or(i64::MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_outcome_comes_first() {
        let step = wait_step(
            Some(Awaited::TimedOut),
            Some((1, "1".into())),
            None,
            "k",
            10,
            5,
        );
        assert_eq!(step, WaitStep::Recorded(Awaited::TimedOut));
    }

    #[test]
    fn a_wait_times_out_once_its_time_has_passed() {
        let wait = StoredWait {
            key: "k".into(),
            until: 10,
        };
        assert_eq!(
            wait_step(None, None, Some(wait.clone()), "k", 10, 5),
            WaitStep::TimeOut { until: 10 }
        );
        assert_eq!(
            wait_step(None, None, Some(wait), "k", 9, 5),
            WaitStep::Suspend {
                until: 10,
                new: false
            }
        );
    }

    #[test]
    fn a_wait_for_another_key_starts_afresh() {
        let wait = StoredWait {
            key: "other".into(),
            until: 10,
        };
        assert_eq!(
            wait_step(None, None, Some(wait), "k", 20, 5),
            WaitStep::Suspend {
                until: 25,
                new: true
            }
        );
        assert_eq!(
            wait_step(None, None, None, "k", 20, 0),
            WaitStep::TimeOut { until: 20 }
        );
    }
}
