//! Ending a delivery: finish, fail, extend, snooze, and retrying dead
//! tasks; and how the end of a task reaches the tasks waiting for it
//! ([`release_waiting`]).

use rusqlite::{params, Connection, OptionalExtension};

use super::cancel::cancel_blocked;
use super::claim::{claim_for, LIVE_LEASES};
use super::commands::ClaimArgs;
use super::fair;
use super::push::group_parent;
use super::settings::{settings, Settings};
use crate::error::Result;
use crate::holder::ProcessId;
use crate::options::RetryBackoff;
use crate::store::{
    cancelled_for, lease_slot_taken, not_held, stored_reason, IfNotHeld, BLOCKED, DEADLINE_PASSED,
    READY,
};
use crate::task::{Failed, Receipt, Task};

/// A result to keep with a finished task, and until when on a handle
/// without history (`None` with history: as long as the done task).
#[derive(Clone, Copy)]
pub(crate) struct KeptResult<'a> {
    pub(crate) result: &'a str,
    pub(crate) until: Option<i64>,
}

/// Completes the delivery named by `receipt`, if it is current: the task
/// is deleted, or kept as done with history, with a result, or while its
/// unique key stays reserved after it is done (until its window passes).
/// Returns whether the delivery was current.
pub(crate) fn finish_one(
    conn: &Connection,
    receipt: Receipt,
    now: i64,
    keep_history: bool,
    result: Option<KeptResult<'_>>,
) -> Result<bool> {
    if !keep_history && result.is_none() {
        let deleted = conn
            .prepare_cached(
                "DELETE FROM tq_tasks
                 WHERE id = ?1 AND state = 1 AND lease_token = ?2
                   AND (unique_key IS NULL OR unique_for = 0)",
            )?
            .execute(params![receipt.id, receipt.token])?;
        if deleted > 0 {
            release_waiting(conn, receipt.id, Ended::Done, now, keep_history)?;
            return Ok(true);
        }
    }
    let kept = conn
        .prepare_cached(
            "UPDATE tq_tasks
             SET state = 2, finished_at = ?3,
                 lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
                 unique_key = CASE WHEN unique_for > 0 THEN unique_key END,
                 unique_until = CASE WHEN unique_for > 0 AND unique_key IS NOT NULL
                                     THEN ?3 + unique_for END,
                 result = ?4, result_until = ?5
             WHERE id = ?1 AND state = 1 AND lease_token = ?2",
        )?
        .execute(params![
            receipt.id,
            receipt.token,
            now,
            result.map(|kept| kept.result),
            result.and_then(|kept| kept.until)
        ])?;
    if kept > 0 {
        release_waiting(conn, receipt.id, Ended::Done, now, keep_history)?;
    }
    Ok(kept > 0)
}

/// Finishes each receipt, telling for each whether it was still held;
/// without history, the finished tasks' reserved rows are swept once for
/// the whole batch rather than once a task.
pub(super) fn finish_all(
    conn: &Connection,
    queue: &str,
    receipts: &[Receipt],
    now: i64,
    keep_history: bool,
) -> Result<Vec<bool>> {
    let held = receipts
        .iter()
        .map(|&receipt| finish_one(conn, receipt, now, keep_history, None))
        .collect::<Result<Vec<bool>>>()?;
    if !keep_history {
        sweep_reserved(conn, queue, now)?;
    }
    Ok(held)
}

/// Finishes one task keeping its result, until `keep_until` unless the
/// handle keeps history; the queue's results past their time are swept
/// in the same transaction, so that kept results do not pile up.
pub(super) fn finish_with_result(
    conn: &Connection,
    queue: &str,
    receipt: Receipt,
    result: &str,
    now: i64,
    keep_history: bool,
    keep_until: i64,
) -> Result<bool> {
    let kept = KeptResult {
        result,
        until: (!keep_history).then_some(keep_until),
    };
    let held = finish_one(conn, receipt, now, keep_history, Some(kept))?;
    sweep_results(conn, queue, now)?;
    Ok(held)
}

/// Finishes tasks and claims the next in the same transaction. With
/// [`IfNotHeld::Refuse`], a receipt no longer held fails the whole
/// operation, so that nothing is claimed on the strength of a finish that
/// did not happen.
#[allow(clippy::too_many_arguments)]
pub(super) fn finish_and_claim(
    conn: &Connection,
    receipts: &[Receipt],
    if_not_held: IfNotHeld,
    keep_history: bool,
    claim: &ClaimArgs,
    holder: &mut Option<i64>,
    process: &ProcessId,
) -> Result<(Vec<bool>, Vec<Task>)> {
    let (now, _) = claim.time_under_lock();
    let mut held = Vec::with_capacity(receipts.len());
    for &receipt in receipts {
        let finished = finish_one(conn, receipt, now, keep_history, None)?;
        if !finished && if_not_held == IfNotHeld::Refuse {
            return Err(not_held(receipt.id));
        }
        held.push(finished);
    }
    if !keep_history && !receipts.is_empty() {
        sweep_reserved(conn, &claim.queue, now)?;
    }
    if claim.max == 0 {
        return Ok((held, Vec::new()));
    }
    Ok((held, claim_for(conn, claim, holder, process)?))
}

/// Ends the delivery named by `receipt` as failed: retried after a pause
/// from `backoff`, or dead if it was the last attempt or the retry would
/// fall at or after its deadline.
pub(super) fn fail_one(
    conn: &Connection,
    receipt: Receipt,
    reason: &str,
    now: i64,
    backoff: &RetryBackoff,
    keep_history: bool,
) -> Result<Failed> {
    let delivery: Option<(u32, u32, i64, Option<i64>)> = conn
        .prepare_cached(
            "SELECT attempts, max_attempts, random(), deadline FROM tq_tasks
             WHERE id = ?1 AND state = 1 AND lease_token = ?2",
        )?
        .query_row(params![receipt.id, receipt.token], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .optional()?;
    let (attempts, max_attempts, random, deadline) =
        delivery.ok_or_else(|| not_held(receipt.id))?;
    let pause = backoff.pause(attempts, random as u64);
    let retry_at = now.saturating_add(pause.as_millis() as i64);
    let past_deadline = deadline.is_some_and(|deadline| retry_at >= deadline);
    let reason = if past_deadline {
        Some(DEADLINE_PASSED)
    } else {
        stored_reason(reason)
    };
    if attempts >= max_attempts || past_deadline {
        conn.prepare_cached(
            "UPDATE tq_tasks
             SET state = 3, finished_at = ?2, last_error = ?3,
                 lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
             WHERE id = ?1",
        )?
        .execute(params![receipt.id, now, reason])?;
        release_waiting(conn, receipt.id, Ended::Dead, now, keep_history)?;
        return Ok(Failed::Dead);
    }
    conn.prepare_cached(
        "UPDATE tq_tasks
         SET state = ?2, run_at = ?3, last_error = ?4,
             lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
         WHERE id = ?1",
    )?
    .execute(params![
        receipt.id,
        if retry_at <= now { 0 } else { 4 },
        retry_at,
        reason
    ])?;
    fair::activate_key_of(conn, receipt.id)?;
    Ok(Failed::RetryAt(retry_at))
}

/// Moves a held lease's expiry (and records progress, if given); a
/// receipt no longer held is an error, since the caller's work is then
/// no longer its own.
/// An expired lease is extended only while its queue's concurrency limit
/// has room: it held no slot once it expired (see [`LIVE_LEASES`]), so a
/// claim may have filled the slot.
pub(super) fn extend_lease(
    conn: &Connection,
    receipt: Receipt,
    now: i64,
    lease_expires_at: i64,
    progress: Option<&str>,
) -> Result<()> {
    let extended = conn
        .prepare_cached(
            "UPDATE tq_tasks SET lease_expires_at = ?3, progress = coalesce(?4, progress)
                     WHERE id = ?1 AND state = 1 AND lease_token = ?2 AND lease_expires_at > ?5",
        )?
        .execute(params![
            receipt.id,
            receipt.token,
            lease_expires_at,
            progress,
            now
        ])?;
    if extended == 1 {
        return Ok(());
    }
    let expired_in: Option<String> = conn
        .prepare_cached(
            "SELECT queue FROM tq_tasks WHERE id = ?1 AND state = 1 AND lease_token = ?2",
        )?
        .query_row(params![receipt.id, receipt.token], |row| row.get(0))
        .optional()?;
    let Some(queue) = expired_in else {
        return Err(not_held(receipt.id));
    };
    if let Some(Settings {
        max_leased: Some(limit),
        ..
    }) = settings(conn, &queue)?
    {
        let live: i64 = conn
            .prepare_cached(LIVE_LEASES)?
            .query_row(params![queue, now], |row| row.get(0))?;
        if live >= limit {
            return Err(lease_slot_taken(receipt.id, &queue, limit));
        }
    }
    conn.prepare_cached(
        "UPDATE tq_tasks SET lease_expires_at = ?2, progress = coalesce(?3, progress) WHERE id = ?1",
    )?
    .execute(params![receipt.id, lease_expires_at, progress])?;
    Ok(())
}

/// Puts the delivery named by `receipt` back in line at `run_at`, giving
/// back its attempt (see `Store::snooze`); returns how many it put back:
/// none when the receipt is no longer held.
pub(super) fn snooze(conn: &Connection, receipt: Receipt, now: i64, run_at: i64) -> Result<usize> {
    let snoozed = conn
        .prepare_cached(
            "UPDATE tq_tasks
                     SET state = CASE WHEN ?3 <= ?4 THEN 0 ELSE 4 END, run_at = ?3,
                         attempts = attempts - 1,
                         lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
                     WHERE id = ?1 AND state = 1 AND lease_token = ?2",
        )?
        .execute(params![receipt.id, receipt.token, run_at, now])?;
    if snoozed > 0 {
        fair::activate_key_of(conn, receipt.id)?;
    }
    Ok(snoozed)
}

/// Makes the dead tasks of `queue` (those of `ids` alone, if given) ready
/// again with their attempts back (see `Store::retry_dead`); returns how
/// many.
pub(super) fn retry_dead(
    conn: &Connection,
    queue: &str,
    ids: Option<&[i64]>,
    now: i64,
) -> Result<u64> {
    let ids_json =
        ids.map(|ids| serde_json::to_string(ids).expect("a list of integers serializes"));
    // A dead task of an ordered group let its successors run: it
    // rejoins the group at the back of its line (see
    // `Store::retry_dead`), each after the one retried before it.
    let grouped: Vec<(i64, String)> = conn
        .prepare_cached(
            "SELECT id, group_key FROM tq_tasks
                     WHERE queue = ?1 AND state = 3 AND group_key IS NOT NULL
                       AND (?2 IS NULL OR id IN (SELECT value FROM json_each(?2)))
                     ORDER BY id",
        )?
        .query_map(params![queue, ids_json], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for (task, group) in &grouped {
        let predecessor = group_parent(conn, queue, group, 1, &[])?;
        conn.prepare_cached(
            "UPDATE tq_tasks SET state = ?2, attempts = 0, run_at = ?3, finished_at = NULL,
                         waiting_for = ?4, expires_at = NULL, deadline = NULL, not_after = NULL
                     WHERE id = ?1",
        )?
        .execute(params![
            task,
            if predecessor.is_some() {
                BLOCKED
            } else {
                READY
            },
            now,
            i64::from(predecessor.is_some())
        ])?;
        if let Some(parent) = predecessor {
            conn.prepare_cached(
                "INSERT INTO tq_dependencies (parent, task, run_anyway) VALUES (?1, ?2, 1)",
            )?
            .execute(params![parent, task])?;
        }
    }
    let retried = conn
        .prepare_cached(
            "UPDATE tq_tasks SET state = 0, attempts = 0, run_at = ?2, finished_at = NULL,
                         expires_at = NULL, deadline = NULL, not_after = NULL
                     WHERE queue = ?1 AND state = 3
                       AND (?3 IS NULL OR id IN (SELECT value FROM json_each(?3)))",
        )?
        .execute(params![queue, now, ids_json])?;
    fair::activate_pending_keys(conn, queue)?;
    Ok((grouped.len() + retried) as u64)
}

/// The tasks waiting for task `?1`: one lookup in the primary key of
/// `tq_dependencies`, which starts with the parent. A plain query, then
/// [`FORGET_WAITING`] when it found any: a `DELETE ... RETURNING` in their
/// place costs every call a statement journal and a temporary table, even
/// when it deletes nothing. Measured at `normal`, it made a pull and finish
/// of a task nobody waits for take 1.5 times as long, and of a task of an
/// ordered group (whose finish hands its group on) 1.4 times.
pub(super) const DEPENDENTS: &str =
    "SELECT task, run_anyway FROM tq_dependencies WHERE parent = ?1";

/// Forgets the tasks waiting for task `?1`, which has ended.
pub(super) const FORGET_WAITING: &str = "DELETE FROM tq_dependencies WHERE parent = ?1";

/// Forgets what task `?1` waits for, as it ends before them.
pub(super) const FORGET_PARENTS: &str = "DELETE FROM tq_dependencies WHERE task = ?1";

/// How a task ended, for the tasks waiting for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ended {
    Done,
    Dead,
    Cancelled,
}

/// Hands the end of task `parent` to the tasks waiting for it, found by
/// the index of `tq_dependencies` (a lookup that finds nothing for the
/// most common task, one nobody waits for). A waiting task whose last
/// task ends becomes ready, in line from then on (its `run_at`), or
/// waiting when not yet due; one that waited
/// for a task ending dead or cancelled, unless it runs anyway, is
/// cancelled, and so in turn are the tasks waiting for it.
pub(super) fn release_waiting(
    conn: &Connection,
    parent: i64,
    ended: Ended,
    now: i64,
    keep_history: bool,
) -> Result<()> {
    let mut ends = vec![(parent, ended)];
    while let Some((parent, ended)) = ends.pop() {
        let waiting: Vec<(i64, bool)> = conn
            .prepare_cached(DEPENDENTS)?
            .query_map([parent], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<rusqlite::Result<_>>()?;
        if waiting.is_empty() {
            continue;
        }
        conn.prepare_cached(FORGET_WAITING)?.execute([parent])?;
        for (task, run_anyway) in waiting {
            if ended == Ended::Done || run_anyway {
                conn.prepare_cached(
                    "UPDATE tq_tasks
                     SET waiting_for = waiting_for - 1,
                         state = CASE WHEN waiting_for > 1 THEN 7 WHEN run_at <= ?2 THEN 0 ELSE 4 END,
                         run_at = CASE WHEN waiting_for = 1 THEN max(run_at, ?2) ELSE run_at END
                     WHERE id = ?1 AND state = 7",
                )?
                .execute(params![task, now])?;
            } else {
                let reason = cancelled_for(parent, ended == Ended::Dead);
                if cancel_blocked(conn, task, &reason, now, keep_history)? {
                    ends.push((task, Ended::Cancelled));
                }
            }
        }
    }
    Ok(())
}

/// Deletes, on a handle without history, some done tasks kept only for a
/// unique window that has now passed (and no result still kept).
fn sweep_reserved(conn: &Connection, queue: &str, now: i64) -> Result<()> {
    sweep(
        conn,
        "FROM tq_tasks
         WHERE queue = ?1 AND state = 2 AND unique_until IS NOT NULL AND unique_until <= ?2
           AND (result_until IS NULL OR result_until <= ?2)",
        queue,
        now,
    )
}

/// Deletes some done tasks kept for a result whose time has passed (and
/// no unique key still reserved).
fn sweep_results(conn: &Connection, queue: &str, now: i64) -> Result<()> {
    sweep(
        conn,
        "FROM tq_tasks
         WHERE queue = ?1 AND state = 2 AND result_until IS NOT NULL AND result_until <= ?2
           AND (unique_until IS NULL OR unique_until <= ?2)",
        queue,
        now,
    )
}

/// Deletes up to 100 of the tasks `from` selects (with the queue `?1` and
/// the time `?2`), after a cheaper look for one: most calls find none.
fn sweep(conn: &Connection, from: &str, queue: &str, now: i64) -> Result<()> {
    let any = conn
        .prepare_cached(&format!("SELECT 1 {from} LIMIT 1"))?
        .query_row(params![queue, now], |_| Ok(()))
        .optional()?;
    if any.is_none() {
        return Ok(());
    }
    conn.prepare_cached(&format!(
        "DELETE FROM tq_tasks WHERE id IN (SELECT id {from} LIMIT 100)"
    ))?
    .execute(params![queue, now])?;
    Ok(())
}
