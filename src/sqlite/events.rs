//! Events and durable sleep on SQLite (see `crate::events`): signals, waits
//! and sleeps, each in one write transaction, which SQLite's single writer
//! serialises, so a signal and a wait never miss each other.

use rusqlite::{params, Connection, OptionalExtension};

use super::{fair, finish, SqliteStore};
use crate::error::Result;
use crate::events::{
    event_step, recorded_outcome, recorded_sleep_end, sleep_outcome, sleep_step, timeout_step,
    wait_step, Awaited, EventStore, SleepEnd, Slept, StoredWait, WaitStep,
};
use crate::store::not_held;
use crate::task::Receipt;

/// At most this many events whose retention has passed are deleted per
/// signal.
const EXPIRED_EVENTS_PER_SIGNAL: i64 = 100;

/// The task of queue `?1` that has waited longest for key `?2` and has not
/// been delivered since (pending: ready or waiting).
const FIRST_WAITER: &str = "SELECT w.task FROM tq_event_waits w JOIN tq_tasks t ON t.id = w.task
    WHERE w.queue = ?1 AND w.key = ?2 AND t.state IN (0, 4)
    ORDER BY w.started_at, w.task LIMIT 1";

impl EventStore for SqliteStore {
    fn signal(&self, key: &str, payload: &str, now: i64, retention: i64) -> Result<Option<i64>> {
        let woken = self.write(|conn| {
            conn.prepare_cached(
                "DELETE FROM tq_events WHERE seq IN (SELECT seq FROM tq_events
                 WHERE queue = ?1 AND expires_at <= ?2 LIMIT ?3)",
            )?
            .execute(params![self.queue, now, EXPIRED_EVENTS_PER_SIGNAL])?;
            let waiter: Option<i64> = conn
                .prepare_cached(FIRST_WAITER)?
                .query_row(params![self.queue, key], |row| row.get(0))
                .optional()?;
            let Some(task) = waiter else {
                conn.prepare_cached(
                    "INSERT INTO tq_events (queue, key, payload, sent_at, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![
                    self.queue,
                    key,
                    payload,
                    now,
                    now.saturating_add(retention)
                ])?;
                return Ok(None);
            };
            end_wait(conn, task, &event_step(key), payload, now)?;
            conn.prepare_cached(
                "UPDATE tq_tasks SET state = 0, run_at = min(run_at, ?2) WHERE id = ?1",
            )?
            .execute(params![task, now])?;
            fair::activate_key_of(conn, task)?;
            Ok(Some(task))
        })?;
        if woken.is_some() {
            self.ring_other_processes();
        }
        Ok(woken)
    }

    fn wait_for_event(
        &self,
        receipt: Receipt,
        key: &str,
        now: i64,
        timeout: i64,
    ) -> Result<Awaited> {
        let (awaited, snoozed) = self.write(|conn| {
            check_held(conn, receipt)?;
            let recorded = recorded_outcome(key, outcome_steps(conn, receipt.id, key)?);
            let event: Option<(i64, String)> = conn
                .prepare_cached(
                    "SELECT seq, payload FROM tq_events
                     WHERE queue = ?1 AND key = ?2 AND expires_at > ?3 ORDER BY seq LIMIT 1",
                )?
                .query_row(params![self.queue, key, now], |row| {
                    Ok((row.get(0)?, row.get(1)?))
                })
                .optional()?;
            let wait: Option<StoredWait> = conn
                .prepare_cached("SELECT key, wait_until FROM tq_event_waits WHERE task = ?1")?
                .query_row([receipt.id], |row| {
                    Ok(StoredWait {
                        key: row.get(0)?,
                        until: row.get(1)?,
                    })
                })
                .optional()?;
            match wait_step(recorded, event, wait, key, now, timeout) {
                WaitStep::Recorded(awaited) => Ok((awaited, false)),
                WaitStep::Take { seq, payload } => {
                    conn.prepare_cached("DELETE FROM tq_events WHERE seq = ?1")?
                        .execute([seq])?;
                    end_wait(conn, receipt.id, &event_step(key), &payload, now)?;
                    Ok((Awaited::Event(payload), false))
                }
                WaitStep::TimeOut { until } => {
                    end_wait(conn, receipt.id, &timeout_step(key), &until.to_string(), now)?;
                    Ok((Awaited::TimedOut, false))
                }
                WaitStep::Suspend { until, new } => {
                    if new {
                        conn.prepare_cached(
                            "INSERT OR REPLACE INTO tq_event_waits
                             (task, queue, key, started_at, wait_until) VALUES (?1, ?2, ?3, ?4, ?5)",
                        )?
                        .execute(params![receipt.id, self.queue, key, now, until])?;
                    }
                    finish::snooze(conn, receipt, now, until)?;
                    Ok((Awaited::Suspended, true))
                }
            }
        })?;
        if snoozed {
            self.ring_other_processes();
        }
        Ok(awaited)
    }

    fn sleep(&self, receipt: Receipt, name: &str, now: i64, end: SleepEnd) -> Result<Slept> {
        let slept = self.write(|conn| {
            check_held(conn, receipt)?;
            let step = sleep_step(name);
            let recorded: Option<String> = conn
                .prepare_cached("SELECT output FROM tq_steps WHERE task = ?1 AND name = ?2")?
                .query_row(params![receipt.id, step], |row| row.get(0))
                .optional()?;
            let until = match recorded {
                Some(output) => recorded_sleep_end(&output),
                None => {
                    let until = match end {
                        SleepEnd::At(at) => at,
                        SleepEnd::After(after) => now.saturating_add(after),
                    };
                    record_step(conn, receipt.id, &step, &until.to_string(), now)?;
                    until
                }
            };
            let slept = sleep_outcome(until, now);
            if slept == Slept::Suspended {
                finish::snooze(conn, receipt, now, until)?;
            }
            Ok(slept)
        })?;
        if slept == Slept::Suspended {
            self.ring_other_processes();
        }
        Ok(slept)
    }
}

/// Fails with `NotHeld` unless `receipt` names the current delivery.
fn check_held(conn: &Connection, receipt: Receipt) -> Result<()> {
    let held = conn
        .prepare_cached("SELECT 1 FROM tq_tasks WHERE id = ?1 AND state = 1 AND lease_token = ?2")?
        .exists(params![receipt.id, receipt.token])?;
    if held {
        Ok(())
    } else {
        Err(not_held(receipt.id))
    }
}

/// The task's steps recording the outcome of a wait for `key`, as (name,
/// output).
fn outcome_steps(conn: &Connection, task: i64, key: &str) -> Result<Vec<(String, String)>> {
    let mut statement = conn.prepare_cached(
        "SELECT name, output FROM tq_steps WHERE task = ?1 AND name IN (?2, ?3) ORDER BY seq",
    )?;
    let steps = statement
        .query_map(params![task, event_step(key), timeout_step(key)], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(steps)
}

/// Records the outcome of task `task`'s wait as its step `name` and ends
/// the wait.
fn end_wait(conn: &Connection, task: i64, name: &str, output: &str, now: i64) -> Result<()> {
    record_step(conn, task, name, output, now)?;
    conn.prepare_cached("DELETE FROM tq_event_waits WHERE task = ?1")?
        .execute([task])?;
    Ok(())
}

/// Records step `name` of task `task`, unless it has one.
fn record_step(conn: &Connection, task: i64, name: &str, output: &str, now: i64) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO tq_steps (task, name, output, recorded_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (task, name) DO NOTHING",
    )?
    .execute(params![task, name, output, now])?;
    Ok(())
}
