//! Step checkpoints: recording a held task's step, reading one back, the
//! steps of a task, and clearing those after a named one.

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::Result;
use crate::store::{not_held, steps_to_clear};
use crate::task::{Receipt, StepInfo};

/// Records step `name` of the task held under `receipt` (see
/// `Store::record_step`), inside the caller's write transaction.
pub(crate) fn record(
    conn: &Connection,
    receipt: Receipt,
    name: &str,
    output: &str,
    now: i64,
) -> Result<bool> {
    let held = conn
        .prepare_cached("SELECT 1 FROM tq_tasks WHERE id = ?1 AND state = 1 AND lease_token = ?2")?
        .exists(params![receipt.id, receipt.token])?;
    if !held {
        return Err(not_held(receipt.id));
    }
    let stored = conn
        .prepare_cached(
            "INSERT INTO tq_steps (task, name, output, recorded_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (task, name) DO NOTHING",
        )?
        .execute(params![receipt.id, name, output, now])?;
    Ok(stored == 1)
}

/// The output of step `name` of task `id`, if recorded.
pub(super) fn output(conn: &Connection, id: i64, name: &str) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached("SELECT output FROM tq_steps WHERE task = ?1 AND name = ?2")?
        .query_row(params![id, name], |row| row.get(0))
        .optional()?)
}

/// The steps of task `id`, in the order they were recorded.
pub(super) fn of_task(conn: &Connection, id: i64) -> Result<Vec<StepInfo>> {
    let mut statement = conn.prepare_cached(
        "SELECT name, output, recorded_at FROM tq_steps WHERE task = ?1 ORDER BY seq",
    )?;
    let steps = statement
        .query_map([id], |row| {
            Ok(StepInfo {
                name: row.get(0)?,
                output: row.get(1)?,
                recorded_at_unix_ms: row.get(2)?,
            })
        })?
        .collect::<rusqlite::Result<_>>()?;
    Ok(steps)
}

/// Deletes the steps of task `id` of `queue` recorded after its step
/// `name` (see `Store::clear_steps_after`), inside the caller's write
/// transaction.
pub(super) fn clear_after(conn: &Connection, queue: &str, id: i64, name: &str) -> Result<u64> {
    let state: Option<i64> = conn
        .prepare_cached("SELECT state FROM tq_tasks WHERE id = ?1 AND queue = ?2")?
        .query_row(params![id, queue], |row| row.get(0))
        .optional()?;
    let order: Option<i64> = conn
        .prepare_cached("SELECT seq FROM tq_steps WHERE task = ?1 AND name = ?2")?
        .query_row(params![id, name], |row| row.get(0))
        .optional()?;
    let after = steps_to_clear(queue, id, name, state, order)?;
    Ok(conn
        .prepare_cached("DELETE FROM tq_steps WHERE task = ?1 AND seq > ?2")?
        .execute(params![id, after])? as u64)
}
