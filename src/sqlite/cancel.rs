//! Cancelling: how a task is cancelled, at once or, while leased, once
//! its holder stops.

use rusqlite::{params, Connection, OptionalExtension};

use super::finish::{release_waiting, Ended, FORGET_PARENTS};
use crate::error::{Error, Result};
use crate::store::{CANCELLED, CANCELLING, DONE, LEASED};
use crate::task::{Cancelled, Receipt};

/// Cancels task `id` of `queue` (see `Store::cancel_task`): a leased task
/// is asked to stop, any other task not yet ended ends at once.
pub(super) fn cancel_task(
    conn: &Connection,
    queue: &str,
    id: i64,
    reason: Option<&str>,
    now: i64,
    keep_history: bool,
) -> Result<Cancelled> {
    let state: Option<i64> = conn
        .prepare_cached("SELECT state FROM tq_tasks WHERE id = ?1 AND queue = ?2")?
        .query_row(params![id, queue], |row| row.get(0))
        .optional()?;
    match state {
        None => Err(Error::invalid_argument(format!(
            "queue '{queue}' has no task {id}"
        ))),
        Some(DONE) => Err(Error::invalid_argument(format!(
            "task {id} is done: a finished task cannot be cancelled"
        ))),
        Some(CANCELLED | CANCELLING) => Ok(if state == Some(CANCELLED) {
            Cancelled::Removed
        } else {
            Cancelled::Requested
        }),
        Some(LEASED) => {
            conn.prepare_cached(
                "UPDATE tq_tasks SET state = 6, last_error = coalesce(?2, last_error)
                         WHERE id = ?1",
            )?
            .execute(params![id, reason])?;
            Ok(Cancelled::Requested)
        }
        Some(_) => {
            end_as_cancelled(conn, id, reason, now, keep_history)?;
            Ok(Cancelled::Removed)
        }
    }
}

/// Ends the delivery named by `receipt` if its task was cancelled while
/// leased (see `Store::end_cancelled`); says whether it was.
pub(super) fn end_cancelled(
    conn: &Connection,
    receipt: Receipt,
    now: i64,
    keep_history: bool,
) -> Result<bool> {
    let cancelling = conn
        .prepare_cached("SELECT 1 FROM tq_tasks WHERE id = ?1 AND state = 6 AND lease_token = ?2")?
        .query_row(params![receipt.id, receipt.token], |_| Ok(()))
        .optional()?;
    if cancelling.is_some() {
        end_as_cancelled(conn, receipt.id, None, now, keep_history)?;
    }
    Ok(cancelling.is_some())
}

/// Ends task `id` as cancelled, keeping `reason` (when given) as its last
/// error: kept as such with history, deleted without. Its unique key is
/// free again, and the tasks waiting for it learn of it.
fn end_as_cancelled(
    conn: &Connection,
    id: i64,
    reason: Option<&str>,
    now: i64,
    keep_history: bool,
) -> Result<()> {
    cancel_row(conn, id, reason, now, keep_history)?;
    release_waiting(conn, id, Ended::Cancelled, now, keep_history)
}

/// [`end_as_cancelled`] but for the tasks waiting for it.
fn cancel_row(
    conn: &Connection,
    id: i64,
    reason: Option<&str>,
    now: i64,
    keep_history: bool,
) -> Result<()> {
    hand_on_group(conn, id)?;
    conn.prepare_cached(FORGET_PARENTS)?.execute([id])?;
    if keep_history {
        conn.prepare_cached(
            "UPDATE tq_tasks
             SET state = 5, finished_at = ?2, last_error = coalesce(?3, last_error),
                 lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
                 unique_key = NULL, unique_until = NULL
             WHERE id = ?1",
        )?
        .execute(params![id, now, reason])?;
    } else {
        conn.prepare_cached("DELETE FROM tq_tasks WHERE id = ?1")?
            .execute([id])?;
    }
    Ok(())
}

/// Hands the place of task `id`, if it is a blocked task of an ordered
/// group about to be cancelled, to the tasks of its group waiting for it
/// (to run anyway): they wait for the task it waited for in its group
/// instead, so that its end lets no more of the group run at once.
fn hand_on_group(conn: &Connection, id: i64) -> Result<()> {
    let predecessor: Option<i64> = conn
        .prepare_cached(
            "SELECT max(d.parent) FROM tq_tasks t
             JOIN tq_dependencies d ON d.task = t.id
             JOIN tq_tasks p ON p.id = d.parent AND p.queue = t.queue AND p.group_key = t.group_key
             WHERE t.id = ?1 AND t.state = 7",
        )?
        .query_row([id], |row| row.get(0))?;
    let Some(predecessor) = predecessor else {
        return Ok(());
    };
    // The successors in the group: those waiting for the predecessor
    // already merely stop waiting for `id`; the others wait for it instead.
    const SUCCESSORS: &str = "SELECT d.task FROM tq_dependencies d
        JOIN tq_tasks s ON s.id = d.task
        WHERE d.parent = ?1 AND d.run_anyway
          AND s.group_key = (SELECT group_key FROM tq_tasks WHERE id = ?1)";
    conn.prepare_cached(&format!(
        "UPDATE tq_tasks SET waiting_for = waiting_for - 1
         WHERE id IN ({SUCCESSORS})
           AND id IN (SELECT task FROM tq_dependencies WHERE parent = ?2)"
    ))?
    .execute(params![id, predecessor])?;
    conn.prepare_cached(&format!(
        "DELETE FROM tq_dependencies
         WHERE parent = ?1 AND task IN ({SUCCESSORS})
           AND task IN (SELECT task FROM tq_dependencies WHERE parent = ?2)"
    ))?
    .execute(params![id, predecessor])?;
    conn.prepare_cached(&format!(
        "UPDATE tq_dependencies SET parent = ?2 WHERE parent = ?1 AND task IN ({SUCCESSORS})"
    ))?
    .execute(params![id, predecessor])?;
    Ok(())
}

/// Cancels task `id` if it is still blocked, forgetting the other tasks it
/// waited for; says whether it did.
pub(super) fn cancel_blocked(
    conn: &Connection,
    id: i64,
    reason: &str,
    now: i64,
    keep_history: bool,
) -> Result<bool> {
    let blocked = conn
        .prepare_cached("SELECT 1 FROM tq_tasks WHERE id = ?1 AND state = 7")?
        .query_row([id], |_| Ok(()))
        .optional()?;
    if blocked.is_some() {
        cancel_row(conn, id, Some(reason), now, keep_history)?;
    }
    Ok(blocked.is_some())
}
