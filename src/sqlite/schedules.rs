//! Every statement on schedules in SQLite. Each function runs inside the
//! caller's transaction: a write one for the writes.

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::push::push_one;
use crate::error::{Error, Result};
use crate::schedule::{Schedule, ScheduleInfo, StoredSchedule};
use crate::store::{due_tasks, PutSchedule};
use crate::task::Pushed;

/// The columns [`from_row`] reads, in its order.
const COLUMNS: &str = "name, spec, time_zone, payload, priority, max_attempts, catch_up,
    catch_up_limit, paused, next_slot";

fn from_row(row: &Row<'_>) -> rusqlite::Result<ScheduleInfo> {
    let spec: String = row.get(1)?;
    Ok(ScheduleInfo {
        schedule: Schedule::from_stored(
            row.get(0)?,
            &spec,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
            row.get(5)?,
            (row.get(6)?, row.get(7)?),
        ),
        paused: row.get(8)?,
        next_slot: row.get(9)?,
    })
}

/// Stores `schedule` in `queue` (see `Store::put_schedule`).
pub(super) fn put(
    conn: &Connection,
    queue: &str,
    stored: &StoredSchedule,
    put: PutSchedule,
    now: i64,
) -> Result<()> {
    let schedule = stored.schedule();
    let next_slot = schedule.timetable()?.first_slot(now)?;
    if put == PutSchedule::Add {
        let taken = conn
            .prepare_cached("SELECT 1 FROM tq_schedules WHERE queue = ?1 AND name = ?2")?
            .query_row(params![queue, schedule.name], |_| Ok(()))
            .optional()?;
        if taken.is_some() {
            return Err(Error::invalid_argument(format!(
                "queue '{queue}' already has a schedule named '{}' (replace it instead)",
                schedule.name
            )));
        }
    }
    let (catch_up, catch_up_limit) = schedule.catch_up.stored();
    conn.prepare_cached(if put == PutSchedule::Upsert {
        // The right-hand sides read the row as it was.
        "INSERT INTO tq_schedules
            (queue, name, spec, time_zone, payload, priority, max_attempts, catch_up,
             catch_up_limit, paused, next_slot)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10)
         ON CONFLICT (queue, name) DO UPDATE SET
            next_slot = CASE WHEN spec = excluded.spec AND time_zone = excluded.time_zone
                               AND catch_up = excluded.catch_up
                               AND catch_up_limit = excluded.catch_up_limit
                             THEN next_slot ELSE excluded.next_slot END,
            spec = excluded.spec, time_zone = excluded.time_zone,
            payload = excluded.payload, priority = excluded.priority,
            max_attempts = excluded.max_attempts, catch_up = excluded.catch_up,
            catch_up_limit = excluded.catch_up_limit"
    } else {
        "INSERT OR REPLACE INTO tq_schedules
            (queue, name, spec, time_zone, payload, priority, max_attempts, catch_up,
             catch_up_limit, paused, next_slot)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 0, ?10)"
    })?
    .execute(params![
        queue,
        schedule.name,
        schedule.spec.stored(),
        schedule.time_zone,
        schedule.payload,
        schedule.priority,
        stored.task_max_attempts(),
        catch_up,
        catch_up_limit,
        next_slot
    ])?;
    Ok(())
}

pub(super) fn remove(conn: &Connection, queue: &str, name: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("DELETE FROM tq_schedules WHERE queue = ?1 AND name = ?2")?
        .execute(params![queue, name])?
        > 0)
}

/// Pauses or resumes a schedule (see `Store::set_schedule_paused`).
pub(super) fn set_paused(
    conn: &Connection,
    queue: &str,
    name: &str,
    paused: bool,
    now: i64,
) -> Result<bool> {
    let Some(info) = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM tq_schedules WHERE queue = ?1 AND name = ?2"
        ))?
        .query_row(params![queue, name], from_row)
        .optional()?
    else {
        return Ok(false);
    };
    let next_slot = if paused || !info.paused {
        info.next_slot
    } else {
        info.schedule()
            .timetable()?
            .slot_from(info.next_slot, now)?
    };
    conn.prepare_cached(
        "UPDATE tq_schedules SET paused = ?3, next_slot = ?4 WHERE queue = ?1 AND name = ?2",
    )?
    .execute(params![queue, name, paused, next_slot])?;
    Ok(true)
}

pub(super) fn list(conn: &Connection, queue: &str) -> Result<Vec<ScheduleInfo>> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM tq_schedules WHERE queue = ?1 ORDER BY name"
    ))?;
    let rows = statement.query_map([queue], from_row)?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Enqueues the due slots of `queue`'s schedules (see
/// `Store::run_due_schedules`); returns how many tasks were stored.
pub(super) fn run_due(conn: &Connection, queue: &str, now: i64) -> Result<u64> {
    let due = {
        let mut statement = conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM tq_schedules
             WHERE queue = ?1 AND paused = 0 AND next_slot <= ?2"
        ))?;
        let rows = statement.query_map(params![queue, now], from_row)?;
        rows.collect::<rusqlite::Result<Vec<_>>>()?
    };
    let mut stored = 0;
    for info in due {
        let Some((tasks, after)) = due_tasks(&info.schedule, info.next_slot, now)? else {
            conn.prepare_cached(
                "UPDATE tq_schedules SET paused = 1 WHERE queue = ?1 AND name = ?2",
            )?
            .execute(params![queue, info.schedule().name])?;
            continue;
        };
        for task in &tasks {
            if let Pushed::Stored(_) = push_one(conn, queue, task, &[], now)? {
                stored += 1;
            }
        }
        conn.prepare_cached(
            "UPDATE tq_schedules SET next_slot = ?3 WHERE queue = ?1 AND name = ?2",
        )?
        .execute(params![queue, info.schedule().name, after])?;
    }
    Ok(stored)
}

/// The earliest next slot of `queue`'s schedules not paused: one lookup.
pub(super) fn next_slot(conn: &Connection, queue: &str) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT min(next_slot) FROM tq_schedules WHERE queue = ?1 AND paused = 0")?
        .query_row([queue], |row| row.get(0))?)
}
