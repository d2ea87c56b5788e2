//! Recovering: taking back the leases of dead holders and expired leases,
//! and ending the cancelled tasks nobody is left to stop.

use rusqlite::{params, Connection, OptionalExtension};

use super::fair;
use super::finish::{release_waiting, Ended};
use crate::error::Result;
use crate::holder::{Liveness, ProcessId};
use crate::store::DEAD;

/// Takes back the leases of `queue` that expired by `now` or whose holder
/// is gone, ends its abandoned cancels, and forgets the dead holders no
/// task names any more (see `Store::recover`); returns how many leases
/// were taken back.
pub(super) fn recover(
    conn: &Connection,
    queue: &str,
    observer: &ProcessId,
    now: i64,
    keep_history: bool,
) -> Result<u64> {
    let dead = dead_holders(conn, observer)?;
    let dead_json = serde_json::to_string(&dead).expect("a list of integers serializes");
    let recovered = take_back_leases(conn, queue, &dead_json, now, keep_history)?;
    end_abandoned_cancels(conn, queue, &dead_json, now, keep_history)?;
    forget_dead_holders(conn, &dead_json)?;
    Ok(recovered)
}

/// The recorded holders whose process is gone.
fn dead_holders(conn: &Connection, observer: &ProcessId) -> Result<Vec<i64>> {
    let mut statement =
        conn.prepare_cached("SELECT id, boot_id, pid_namespace, pid, start_time FROM tq_holders")?;
    let holders = statement.query_map([], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            ProcessId {
                boot_id: row.get(1)?,
                pid_namespace: row.get(2)?,
                pid: row.get(3)?,
                start_time: row.get(4)?,
            },
        ))
    })?;
    let mut dead = Vec::new();
    for holder in holders {
        let (id, process) = holder?;
        if process.liveness(observer) == Liveness::Dead {
            dead.push(id);
        }
    }
    Ok(dead)
}

/// Takes back, in `queue`, the leases expired by `now` or held by a dead
/// holder (`dead_json`, a JSON list of holder ids): a task with attempts
/// left is ready again and its fairness key, if it has one, active; one
/// without ends dead and releases the tasks waiting for it. Returns how
/// many were taken back. The claims of fair queues take back expired
/// leases with it too, so that a task ready again rejoins its key's line.
pub(super) fn take_back_leases(
    conn: &Connection,
    queue: &str,
    dead_json: &str,
    now: i64,
    keep_history: bool,
) -> Result<u64> {
    let recovered: Vec<(i64, i64, Option<String>)> = conn
        .prepare_cached(
            "UPDATE tq_tasks
                     SET state = CASE WHEN attempts >= max_attempts THEN 3 ELSE 0 END,
                         finished_at = CASE WHEN attempts >= max_attempts THEN ?1 END,
                         last_error = CASE
                             WHEN holder_id IN (SELECT value FROM json_each(?2))
                             THEN 'the process holding delivery ' || attempts || ' died'
                             ELSE 'the lease of delivery ' || attempts || ' expired before it finished'
                         END,
                         lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
                     WHERE queue = ?3 AND state = 1
                       AND (lease_expires_at <= ?1
                            OR holder_id IN (SELECT value FROM json_each(?2)))
                     RETURNING id, state, fair_key",
        )?
        .query_map(params![now, dead_json, queue], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for (id, state, fair_key) in &recovered {
        if *state == DEAD {
            release_waiting(conn, *id, Ended::Dead, now, keep_history)?;
        } else if let Some(key) = fair_key {
            fair::activate(conn, queue, key)?;
        }
    }
    Ok(recovered.len() as u64)
}

/// Whether a task of any queue cancelled while leased has a lease expired
/// by `?1`: a look in the index of such tasks, which holds few.
pub(super) const ANY_CANCEL_EXPIRED: &str =
    "SELECT 1 FROM tq_tasks WHERE state = 6 AND lease_expires_at <= ?1 LIMIT 1";

/// Ends the tasks of every queue cancelled while leased whose lease expired
/// by `now`: their holder no longer works on them and will not be told,
/// and what waits for them (their ordered group, their dependents, in any
/// queue) must go on without a `recover`. Every claim calls it, as it
/// takes back the expired leases of its queue.
pub(super) fn end_expired_cancels(conn: &Connection, now: i64, keep_history: bool) -> Result<()> {
    let any = conn
        .prepare_cached(ANY_CANCEL_EXPIRED)?
        .query_row([now], |_| Ok(()))
        .optional()?;
    if any.is_none() {
        return Ok(());
    }
    let cancelled: Vec<i64> = conn
        .prepare_cached(&end_cancels_sql(
            keep_history,
            "state = 6 AND lease_expires_at <= ?1",
        ))?
        .query_map([now], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for id in cancelled {
        release_waiting(conn, id, Ended::Cancelled, now, keep_history)?;
    }
    Ok(())
}

/// Ends as cancelled at `?1` the tasks `filter` picks, which were cancelled
/// while leased: kept as history, or deleted; returns their ids. The
/// reason is named among the columns set so that the trigger of attempts
/// (`schema.rs`, migration 17) records the delivery's end.
fn end_cancels_sql(keep_history: bool, filter: &str) -> String {
    if keep_history {
        format!(
            "UPDATE tq_tasks
                 SET state = 5, finished_at = ?1, last_error = last_error,
                     lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
                     unique_key = NULL, unique_until = NULL
                 WHERE {filter}
                 RETURNING id"
        )
    } else {
        format!("DELETE FROM tq_tasks WHERE {filter} RETURNING id")
    }
}

/// Ends the tasks of `queue` cancelled while leased whose holder is gone
/// (its lease expired by `now`, or it is in `dead_json`): nobody is left
/// to see the cancel, so the task is over, and the tasks waiting for it
/// are released.
fn end_abandoned_cancels(
    conn: &Connection,
    queue: &str,
    dead_json: &str,
    now: i64,
    keep_history: bool,
) -> Result<()> {
    let cancelled: Vec<i64> = conn
        .prepare_cached(&end_cancels_sql(
            keep_history,
            "queue = ?3 AND state = 6
             AND (lease_expires_at <= ?1 OR holder_id IN (SELECT value FROM json_each(?2)))",
        ))?
        .query_map(params![now, dead_json, queue], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    for id in cancelled {
        release_waiting(conn, id, Ended::Cancelled, now, keep_history)?;
    }
    Ok(())
}

/// Deletes the rows of the dead holders in `dead_json` that no queue's
/// task names any more; one still named is kept until that queue
/// recovers its tasks.
fn forget_dead_holders(conn: &Connection, dead_json: &str) -> Result<()> {
    conn.prepare_cached(
        "DELETE FROM tq_holders
                 WHERE id IN (SELECT value FROM json_each(?1))
                   AND NOT EXISTS (SELECT 1 FROM tq_tasks
                                   WHERE (state = 1 OR state = 6) AND holder_id = tq_holders.id)",
    )?
    .execute([dead_json])?;
    Ok(())
}
