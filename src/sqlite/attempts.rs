//! Attempts: reading a task's ended attempts, which the triggers of
//! migration 17 (`schema.rs`) record and trim.

use rusqlite::Connection;

use crate::attempts::{AttemptInfo, AttemptOutcome};
use crate::error::Result;

/// The ended attempts of task `id` kept, oldest first.
pub(super) fn of_task(conn: &Connection, id: i64) -> Result<Vec<AttemptInfo>> {
    let mut statement = conn.prepare_cached(
        "SELECT attempt, outcome, reason, holder_id, holder_pid, started_at, ended_at
         FROM tq_attempts WHERE task = ?1 ORDER BY seq",
    )?;
    let rows = statement.query_map([id], |row| {
        Ok((
            row.get::<_, i64>(1)?,
            AttemptInfo {
                attempt: row.get(0)?,
                outcome: AttemptOutcome::Failed,
                reason: row.get(2)?,
                holder_id: row.get(3)?,
                holder_pid: row.get(4)?,
                started_at_unix_ms: row.get(5)?,
                ended_at_unix_ms: row.get(6)?,
            },
        ))
    })?;
    rows.map(|row| {
        let (outcome, attempt) = row?;
        Ok(AttemptInfo {
            outcome: AttemptOutcome::from_stored(outcome)?,
            ..attempt
        })
    })
    .collect()
}
