//! Claiming: how a claim picks the best ready tasks of a queue, within
//! its pause and limits, and takes their leases. This is where a task is
//! claimed ([`claim`]).
//!
//! The stored states are named in `store.rs` (`READY` to `BLOCKED`).
//! Design: `docs/internals.md`, "Task statements and stored states".

use std::collections::VecDeque;

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::commands::ClaimArgs;
use super::fair;
use super::finish::{release_waiting, Ended};
use super::recover::end_expired_cancels;
use super::settings::{settings, Settings};
use crate::error::Result;
use crate::holder::ProcessId;
use crate::store::{
    claim_order, limit_reason, sort_claimed, DEADLINE_PASSED, SWEEP_BATCH, UNTIL_RESUMED,
};
use crate::task::{Receipt, Task};

/// At most this many waiting tasks become ready per claim, so one claim
/// after a long pause does not rewrite a large backlog in one transaction.
const PROMOTE_BATCH: usize = 1000;

/// Whether queue `?1` has a pending task whose next delivery may not start
/// at `?2` (see `not_after` in `schema.rs`): one lookup in the index of
/// limits, which holds nothing for a queue whose tasks have none.
pub(super) const ANY_PAST_LIMIT: &str = "SELECT 1 FROM tq_tasks
    WHERE queue = ?1 AND not_after <= ?2 AND not_after IS NOT NULL AND (state = 0 OR state = 4)
    LIMIT 1";

/// The first `?3` pending tasks of queue `?1` whose next delivery may not
/// start at `?2`, with what [`limit_reason`] reads.
pub(super) const PAST_LIMIT: &str = "SELECT id, attempts, expires_at FROM tq_tasks
    WHERE queue = ?1 AND not_after <= ?2 AND not_after IS NOT NULL AND (state = 0 OR state = 4)
    ORDER BY not_after LIMIT ?3";

/// Ends pending task `?1` as dead at `?2`, for reason `?3`.
const END_PAST_LIMIT: &str = "UPDATE tq_tasks SET state = 3, finished_at = ?2, last_error = ?3
    WHERE id = ?1";

/// Records `process` in `tq_holders` (once per process) and returns its row id.
fn register_holder(conn: &Connection, process: &ProcessId) -> Result<i64> {
    let id = conn
        .prepare_cached(
            "INSERT INTO tq_holders (boot_id, pid_namespace, pid, start_time)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT DO UPDATE SET pid = excluded.pid
             RETURNING id",
        )?
        .query_row(
            params![
                process.boot_id,
                process.pid_namespace,
                process.pid,
                process.start_time
            ],
            |row| row.get(0),
        )?;
    Ok(id)
}

pub(super) fn claim_for(
    conn: &Connection,
    args: &ClaimArgs,
    holder: &mut Option<i64>,
    process: &ProcessId,
) -> Result<Vec<Task>> {
    // This process is recorded as a holder by its first claim, so opening
    // a queue writes nothing.
    let holder_id = match *holder {
        Some(id) => id,
        None => *holder.insert(register_holder(conn, process)?),
    };
    let (now, lease_expires_at) = args.time_under_lock();
    claim(
        conn,
        &args.queue,
        args.max,
        now,
        lease_expires_at,
        holder_id,
        args.keep_history,
    )
}

/// Whether queue `?1` has a waiting task due by `?2`: a cheap look before
/// [`PROMOTE`], whose `IN (SELECT ...)` costs more even when it finds nothing.
pub(super) const ANY_DUE: &str =
    "SELECT 1 FROM tq_tasks WHERE queue = ?1 AND state = 4 AND run_at <= ?2 LIMIT 1";

/// Makes ready the waiting tasks of `?1` due by `?2`, oldest first, at most `?3`.
pub(super) const PROMOTE: &str = "UPDATE tq_tasks SET state = 0
    WHERE id IN (SELECT id FROM tq_tasks
                 WHERE queue = ?1 AND state = 4 AND run_at <= ?2
                 ORDER BY run_at LIMIT ?3)";

/// The ready tasks of queue `?1`, in claim order in the index of live
/// tasks (where ready tasks have no lease expiry: see `schema.rs`).
pub(super) const READY_IN_LINE: &str = "queue = ?1 AND state = 0 AND lease_expires_at IS NULL";

/// The ready task to claim first: one lookup in the index of live tasks.
pub(super) fn ready_first_sql() -> String {
    format!(
        "SELECT id, priority, run_at, 0 FROM tq_tasks WHERE {READY_IN_LINE}
         ORDER BY priority DESC, run_at, id LIMIT 1"
    )
}

/// Whether queue `?1` has a lease expired by `?2`: one lookup in the index
/// of live tasks, made before every claim.
pub(super) const ANY_EXPIRED: &str = "SELECT 1 FROM tq_tasks
    WHERE queue = ?1 AND state = 1 AND lease_expires_at <= ?2 LIMIT 1";

/// The earliest time `?2` or later when a task of queue `?1` can be claimed
/// (see `Store::next_claimable`): four index lookups. The end of a
/// cancelled task's lease counts: the claim after it ends the task, which
/// may free its group's next task.
pub(super) const NEXT_CLAIMABLE: &str = "SELECT min(t) FROM (
    SELECT ?2 AS t WHERE EXISTS (SELECT 1 FROM tq_tasks WHERE queue = ?1 AND state = 0)
    UNION ALL
    SELECT min(run_at) FROM tq_tasks WHERE queue = ?1 AND state = 4
    UNION ALL
    SELECT min(lease_expires_at) FROM tq_tasks WHERE queue = ?1 AND state = 1
    UNION ALL
    SELECT min(lease_expires_at) FROM tq_tasks WHERE queue = ?1 AND state = 6)";

/// The first `?3` expired leases in claim order, so that they keep their
/// place in line (looked for only when [`ANY_EXPIRED`] found one). A claim
/// of many tasks asks once, not once per task; SQLite keeps only the first
/// `?3` while it reads the expired leases, so one ask reads each expired
/// lease once, never sorting them all. (Leased tasks indexed in claim
/// order would spare even that read, but then a claim's entry would no
/// longer land beside the ready task it was: see `schema.rs`.) The last
/// column says whether the task may be delivered again ([`Again`]).
pub(super) const EXPIRED_IN_LINE: &str = "SELECT id, priority, run_at,
        CASE WHEN deadline <= ?2 THEN 2 WHEN attempts >= max_attempts THEN 1 ELSE 0 END
    FROM tq_tasks
    WHERE queue = ?1 AND state = 1 AND lease_expires_at <= ?2
    ORDER BY priority DESC, run_at, id LIMIT ?3";

/// What every claim sets: a new lease, whose token is drawn here so each
/// delivery has a receipt of its own, one more attempt, and the claim's
/// time `?5` (over an earlier claim's). Once a delivery has started, only
/// the deadline bounds the next (see `not_after` in `schema.rs`).
const LEASE: &str = "UPDATE tq_tasks
    SET state = 1, attempts = attempts + 1, lease_token = random(),
        lease_expires_at = ?2, holder_id = ?3, claimed_at = ?5, not_after = deadline";

/// What every claim returns, in the order [`task_from_row`] reads it.
const TAKEN_COLUMNS: &str = "id, lease_token, attempts, max_attempts, priority, run_at,
    last_error, payload, parents";

/// Takes task `?1` at `?5`; `?4`, when not NULL, is why its previous
/// delivery ended (an expired lease). No RETURNING: it makes SQLite keep a
/// statement journal (allocated and freed by every claim) and a temporary
/// table, which cost more than reading the row again ([`taken_sql`]).
pub(super) fn take_one_sql() -> String {
    format!("{LEASE}, last_error = coalesce(?4, last_error) WHERE id = ?1")
}

/// Task `?1` as a claim returns it, read after [`take_one_sql`].
pub(super) fn taken_sql() -> String {
    format!("SELECT {TAKEN_COLUMNS} FROM tq_tasks WHERE id = ?1")
}

/// Takes task `id` (see [`take_one_sql`]) and returns it.
pub(super) fn take_one(
    conn: &Connection,
    id: i64,
    lease_expires_at: i64,
    holder_id: i64,
    reason: Option<&str>,
    now: i64,
) -> Result<Task> {
    conn.prepare_cached(&take_one_sql())?.execute(params![
        id,
        lease_expires_at,
        holder_id,
        reason,
        now
    ])?;
    Ok(conn
        .prepare_cached(&taken_sql())?
        .query_row([id], task_from_row)?)
}

/// Takes the first `?4` ready tasks of queue `?1` at `?5` in one statement.
pub(super) fn take_ready_sql() -> String {
    format!(
        "{LEASE} WHERE id IN (SELECT id FROM tq_tasks WHERE {READY_IN_LINE}
                              ORDER BY priority DESC, run_at, id LIMIT ?4)
         RETURNING {TAKEN_COLUMNS}"
    )
}

/// Ends, as dead, the expired delivery of task `?1` that may not be
/// delivered again: for reason `?3`, or, when NULL, its last attempt's.
const BURY_EXPIRED: &str = "UPDATE tq_tasks
    SET state = 3, finished_at = ?2, lease_token = NULL, lease_expires_at = NULL,
        holder_id = NULL,
        last_error = coalesce(?3,
            'the lease of delivery ' || attempts || ' expired before it finished')
    WHERE id = ?1";

/// Whether an expired lease's task may be delivered again: 0 yes, 1 no
/// (that was its last attempt), 2 no (its deadline has passed).
type Again = u8;

/// A claim candidate: id, priority, run-at, and, for an expired lease,
/// whether it may be delivered again ([`Again`]; 0 for a ready task).
type Candidate = (i64, i32, i64, Again);

/// A candidate's place in [`claim_order`].
fn candidate_order(&(id, priority, run_at, _): &Candidate) -> (std::cmp::Reverse<i32>, i64, i64) {
    claim_order(priority, run_at, id)
}

/// Claims up to `max` tasks of `queue` for `holder_id`, best first (in a
/// fair queue, in its keys' turns: see `fair.rs`). While a
/// leased task's lease has expired, each task is the better, in claim
/// order, of the ready task first in line and the task whose lease expired
/// first, so a task whose holder vanished keeps its place in line; only the
/// tasks delivered change hands (another expired lease stays with its
/// holder, who may still finish it). With no expired lease, the ready tasks
/// are taken in one statement.
pub(super) fn claim(
    conn: &Connection,
    queue: &str,
    max: usize,
    now: i64,
    lease_expires_at: i64,
    holder_id: i64,
    keep_history: bool,
) -> Result<Vec<Task>> {
    end_expired_cancels(conn, now, keep_history)?;
    let bounds = bounds(conn, queue, now, max)?;
    let max = bounds.room.map_or(max, |room| max.min(room));
    if max == 0 {
        return Ok(Vec::new());
    }
    let tasks = if fair::is_fair(conn, queue)? {
        // A fair queue's expired leases rejoin their keys' lines first, so
        // that the ends past limits below take in those past their deadline.
        fair::take_back_expired(conn, queue, now, keep_history)?;
        end_past_limits(conn, queue, now, keep_history)?;
        promote_due(conn, queue, now, max)?;
        fair::claim_fair(conn, queue, max, now, lease_expires_at, holder_id)?
    } else if end_past_limits(conn, queue, now, keep_history)? {
        claim_within_limits(conn, queue, max, now, lease_expires_at, holder_id)?
    } else {
        claim_up_to(
            conn,
            queue,
            max,
            now,
            lease_expires_at,
            holder_id,
            keep_history,
        )?
    };
    if let (Some(period), false) = (bounds.rate_period, tasks.is_empty()) {
        conn.prepare_cached(USE_RATE_SLOTS)?.execute(params![
            queue,
            now,
            now.saturating_sub(period),
            tasks.len() as i64
        ])?;
    }
    Ok(tasks)
}

/// [`claim`] within the bounds already applied.
fn claim_up_to(
    conn: &Connection,
    queue: &str,
    max: usize,
    now: i64,
    lease_expires_at: i64,
    holder_id: i64,
    keep_history: bool,
) -> Result<Vec<Task>> {
    promote_due(conn, queue, now, max)?;
    claim_with_expired(
        conn,
        queue,
        max,
        now,
        lease_expires_at,
        holder_id,
        keep_history,
    )
}

/// The first `?3` ready tasks of queue `?1` whose limits let a delivery
/// start at `?2`, in claim order: the line read past the tasks a claim
/// has not yet ended (see [`claim_within_limits`]).
pub(super) const READY_WITHIN_LIMITS: &str = "SELECT id FROM tq_tasks
    WHERE queue = ?1 AND state = 0 AND lease_expires_at IS NULL
      AND (not_after IS NULL OR not_after > ?2)
    ORDER BY priority DESC, run_at, id LIMIT ?3";

/// [`claim`] while more tasks are past their limits than one claim ends:
/// takes, in line, the ready tasks within their limits, so that the tasks
/// left to end are never delivered and never hide the others. The rare
/// path: it reads the rows of those it passes over, and leaves expired
/// leases to the claims after the backlog is ended.
fn claim_within_limits(
    conn: &Connection,
    queue: &str,
    max: usize,
    now: i64,
    lease_expires_at: i64,
    holder_id: i64,
) -> Result<Vec<Task>> {
    promote_due(conn, queue, now, max)?;
    let ids: Vec<i64> = conn
        .prepare_cached(READY_WITHIN_LIMITS)?
        .query_map(params![queue, now, max as i64], |row| row.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    ids.into_iter()
        .map(|id| take_one(conn, id, lease_expires_at, holder_id, None, now))
        .collect()
}

/// Makes ready the waiting tasks of `queue` due by `now` (at least `max`,
/// or [`PROMOTE_BATCH`]), so that they take their place in line before
/// the claim looks; the update runs only when [`ANY_DUE`] finds one.
fn promote_due(conn: &Connection, queue: &str, now: i64, max: usize) -> Result<()> {
    let any_due = conn
        .prepare_cached(ANY_DUE)?
        .query_row(params![queue, now], |_| Ok(()))
        .optional()?;
    if any_due.is_some() {
        conn.prepare_cached(PROMOTE)?.execute(params![
            queue,
            now,
            PROMOTE_BATCH.max(max) as i64
        ])?;
    }
    Ok(())
}

/// Claims up to `max` tasks, each the better in claim order of the first
/// ready task and the first expired lease (see [`claim`]); an expired last
/// attempt met on the way is buried as dead instead. Once no expired lease
/// is left, the rest are taken by [`claim_ready_batch`].
fn claim_with_expired(
    conn: &Connection,
    queue: &str,
    max: usize,
    now: i64,
    lease_expires_at: i64,
    holder_id: i64,
    keep_history: bool,
) -> Result<Vec<Task>> {
    let mut tasks = Vec::new();
    // Expired leases in claim order, fetched a batch at a time.
    let mut expired = VecDeque::new();
    let mut more_expired = true;
    while tasks.len() < max {
        let left = max - tasks.len();
        if expired.is_empty() && more_expired {
            expired = expired_in_line(conn, queue, now, left)?;
            more_expired = expired.len() == left;
        }
        let Some(&first_expired) = expired.front() else {
            tasks.extend(claim_ready_batch(
                conn,
                queue,
                left,
                now,
                lease_expires_at,
                holder_id,
            )?);
            break;
        };
        let (id, reason) = match ready_before(conn, queue, &first_expired)? {
            Some(id) => (id, None),
            None => {
                expired.pop_front();
                if first_expired.3 != 0 {
                    let reason = (first_expired.3 == 2).then_some(DEADLINE_PASSED);
                    bury_expired(conn, first_expired.0, now, reason, keep_history)?;
                    continue;
                }
                (
                    first_expired.0,
                    Some("the lease of the previous delivery expired"),
                )
            }
        };
        tasks.push(take_one(
            conn,
            id,
            lease_expires_at,
            holder_id,
            reason,
            now,
        )?);
    }
    Ok(tasks)
}

/// The first ready task of `queue`, if it comes before the expired lease
/// `expired` in claim order; if not, the expired lease's task is next, so
/// that a task whose holder vanished keeps its place in line.
fn ready_before(conn: &Connection, queue: &str, expired: &Candidate) -> Result<Option<i64>> {
    let ready = conn
        .prepare_cached(&ready_first_sql())?
        .query_row(params![queue], candidate_from_row)
        .optional()?;
    Ok(ready
        .filter(|ready| candidate_order(ready) < candidate_order(expired))
        .map(|ready| ready.0))
}

/// Ends as dead task `id`, whose expired delivery was its last attempt or
/// whose deadline (`reason`) has passed, and releases the tasks waiting
/// for it: nobody may claim it again.
fn bury_expired(
    conn: &Connection,
    id: i64,
    now: i64,
    reason: Option<&str>,
    keep_history: bool,
) -> Result<()> {
    conn.prepare_cached(BURY_EXPIRED)?
        .execute(params![id, now, reason])?;
    release_waiting(conn, id, Ended::Dead, now, keep_history)
}

/// Ends as dead, in the claim's transaction, the pending tasks of `queue`
/// whose expiry or deadline has passed by `now` (at most [`SWEEP_BATCH`]),
/// and releases the tasks waiting for them. Returns whether it left some,
/// in which case the claim reads the line past them
/// ([`claim_within_limits`]). [`ANY_PAST_LIMIT`] spares the full query when none has.
fn end_past_limits(conn: &Connection, queue: &str, now: i64, keep_history: bool) -> Result<bool> {
    let any_past = conn
        .prepare_cached(ANY_PAST_LIMIT)?
        .query_row(params![queue, now], |_| Ok(()))
        .optional()?;
    if any_past.is_none() {
        return Ok(false);
    }
    let past: Vec<(i64, u32, Option<i64>)> = conn
        .prepare_cached(PAST_LIMIT)?
        .query_map(params![queue, now, SWEEP_BATCH as i64 + 1], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for &(id, attempts, expires_at) in past.iter().take(SWEEP_BATCH) {
        conn.prepare_cached(END_PAST_LIMIT)?.execute(params![
            id,
            now,
            limit_reason(attempts, expires_at, now)
        ])?;
        release_waiting(conn, id, Ended::Dead, now, keep_history)?;
    }
    Ok(past.len() > SWEEP_BATCH)
}

/// Up to `left` of the leases of `queue` expired by `now`, in claim order;
/// none without the full query when [`ANY_EXPIRED`] finds none, since that
/// lookup is the one every claim makes.
fn expired_in_line(
    conn: &Connection,
    queue: &str,
    now: i64,
    left: usize,
) -> Result<VecDeque<Candidate>> {
    let any_expired = conn
        .prepare_cached(ANY_EXPIRED)?
        .query_row(params![queue, now], |_| Ok(()))
        .optional()?;
    if any_expired.is_none() {
        return Ok(VecDeque::new());
    }
    let mut statement = conn.prepare_cached(EXPIRED_IN_LINE)?;
    let rows = statement.query_map(params![queue, now, left as i64], candidate_from_row)?;
    Ok(rows.collect::<rusqlite::Result<VecDeque<Candidate>>>()?)
}

/// Takes up to `left` ready tasks of `queue`, with no expired lease to
/// weigh them against, in claim order.
fn claim_ready_batch(
    conn: &Connection,
    queue: &str,
    left: usize,
    now: i64,
    lease_expires_at: i64,
    holder_id: i64,
) -> Result<Vec<Task>> {
    // One task: a lookup, then a take by id. (One statement with the
    // lookup as a subquery is compiled anew at every run inside a
    // transaction, which costs more than the second statement.)
    let mut batch = if left == 1 {
        let first = conn
            .prepare_cached(&ready_first_sql())?
            .query_row(params![queue], candidate_from_row)
            .optional()?;
        match first {
            Some((id, ..)) => vec![take_one(conn, id, lease_expires_at, holder_id, None, now)?],
            None => Vec::new(),
        }
    } else {
        let mut statement = conn.prepare_cached(&take_ready_sql())?;
        let rows = statement.query_map(
            params![queue, lease_expires_at, holder_id, left as i64, now],
            task_from_row,
        )?;
        rows.collect::<rusqlite::Result<Vec<Task>>>()?
    };
    sort_claimed(&mut batch);
    Ok(batch)
}

/// Up to `?3` of queue `?1`'s rate slots free at `?2` (last used a window
/// ago or more), the longest free first.
pub(super) const FREE_RATE_SLOTS: &str = "SELECT slot FROM tq_rate_slots
    WHERE queue = ?1 AND used_at <= ?2 ORDER BY used_at LIMIT ?3";

/// Marks `?4` of queue `?1`'s rate slots free at `?3` used at `?2`.
pub(super) const USE_RATE_SLOTS: &str = "UPDATE tq_rate_slots SET used_at = ?2
    WHERE queue = ?1 AND slot IN (SELECT slot FROM tq_rate_slots
                                  WHERE queue = ?1 AND used_at <= ?3 ORDER BY used_at LIMIT ?4)";

/// The live leases of queue `?1` at `?2`, which hold a slot of its
/// concurrency limit: two ranges of indexes, as long as the limit.
pub(super) const LIVE_LEASES: &str = "SELECT
    (SELECT count(*) FROM tq_tasks WHERE queue = ?1 AND state = 1 AND lease_expires_at > ?2)
  + (SELECT count(*) FROM tq_tasks WHERE queue = ?1 AND state = 6 AND lease_expires_at > ?2)";

/// When the first live lease of queue `?1` expires after `?2`: two
/// lookups in partial indexes.
pub(super) const FIRST_LEASE_END: &str = "SELECT min(t) FROM (
    SELECT min(lease_expires_at) AS t FROM tq_tasks
    WHERE queue = ?1 AND state = 1 AND lease_expires_at > ?2
    UNION ALL
    SELECT min(lease_expires_at) FROM tq_tasks
    WHERE queue = ?1 AND state = 6 AND lease_expires_at > ?2)";

/// When the first live lease of `queue` expires, if the queue is at its
/// concurrency `limit` at `now`: until then (or a finish), it has no slot
/// to claim with.
fn lease_end_at_limit(conn: &Connection, queue: &str, limit: i64, now: i64) -> Result<Option<i64>> {
    let live: i64 = conn
        .prepare_cached(LIVE_LEASES)?
        .query_row(params![queue, now], |row| row.get(0))?;
    if live < limit {
        return Ok(None);
    }
    Ok(conn
        .prepare_cached(FIRST_LEASE_END)?
        .query_row(params![queue, now], |row| row.get(0))?)
}

/// What bounds a claim of one queue at one time.
struct Bounds {
    /// How many more tasks may be leased: none while the queue is paused;
    /// under a concurrency limit, the limit less the live leases; under a
    /// rate limit, no more than its free slots. `None`: unbounded.
    room: Option<usize>,
    /// The rate limit's window, in ms: each delivery uses a slot.
    rate_period: Option<i64>,
}

/// What bounds a claim of up to `max` tasks of `queue` at `now`. Claims
/// take no more, so the limits hold exactly: every claim of the file runs
/// under its write lock.
fn bounds(conn: &Connection, queue: &str, now: i64, max: usize) -> Result<Bounds> {
    let Some(Settings {
        paused_until,
        max_leased,
        rate_period,
    }) = settings(conn, queue)?
    else {
        return Ok(Bounds {
            room: None,
            rate_period: None,
        });
    };
    if paused_until.is_some_and(|until| until > now) {
        return Ok(Bounds {
            room: Some(0),
            rate_period,
        });
    }
    let mut room = None;
    if let Some(max_leased) = max_leased {
        let live: i64 = conn
            .prepare_cached(LIVE_LEASES)?
            .query_row(params![queue, now], |row| row.get(0))?;
        room = Some(max_leased.saturating_sub(live).max(0) as usize);
    }
    if let Some(period) = rate_period {
        let mut statement = conn.prepare_cached(FREE_RATE_SLOTS)?;
        let free = statement
            .query_map(
                params![queue, now.saturating_sub(period), max as i64],
                |_| Ok(()),
            )?
            .count();
        room = Some(room.map_or(free, |room: usize| room.min(free)));
    }
    Ok(Bounds { room, rate_period })
}

fn task_from_row(row: &Row<'_>) -> rusqlite::Result<Task> {
    Ok(Task {
        receipt: Receipt::new(row.get(0)?, row.get(1)?),
        attempts: row.get(2)?,
        max_attempts: row.get(3)?,
        priority: row.get(4)?,
        run_at_unix_ms: row.get(5)?,
        last_error: row.get(6)?,
        payload: row.get(7)?,
        parents: ids_from_json(row.get(8)?)?,
    })
}

/// The ids stored as a JSON array (NULL: none).
pub(super) fn ids_from_json(json: Option<String>) -> rusqlite::Result<Vec<i64>> {
    json.map_or(Ok(Vec::new()), |json| {
        serde_json::from_str(&json).map_err(|err| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(err))
        })
    })
}

fn candidate_from_row(row: &Row<'_>) -> rusqlite::Result<Candidate> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
}

/// [`Store::next_claimable`](crate::store::Store::next_claimable) of `queue`, read on `conn`.
pub(super) fn next_claimable(conn: &Connection, queue: &str, now: i64) -> Result<Option<i64>> {
    let Settings {
        paused_until,
        max_leased,
        rate_period,
    } = settings(conn, queue)?.unwrap_or_default();
    // A paused queue has nothing to claim before its pause ends
    // (a resume rings the waiters).
    if let Some(until) = paused_until.filter(|&until| until > now) {
        return Ok((until != UNTIL_RESUMED).then_some(until));
    }
    let due: Option<i64> = conn
        .prepare_cached(NEXT_CLAIMABLE)?
        .query_row(rusqlite::params![queue, now], |row| row.get(0))?;
    let Some(due) = due else {
        return Ok(None);
    };
    let mut at = due.max(now);
    // Under a rate limit, not before a slot is free.
    if rate_period.is_some() {
        let slot_free: Option<i64> = conn
            .prepare_cached(
                "SELECT min(s.used_at + q.rate_period) FROM tq_queues q
                 JOIN tq_rate_slots s ON s.queue = q.queue
                 WHERE q.queue = ?1 AND q.rate_period IS NOT NULL",
            )?
            .query_row([queue], |row| row.get(0))?;
        at = at.max(slot_free.unwrap_or(now));
    }
    // At its concurrency limit, not before a live lease expires,
    // which rings no one (a finish does).
    if let Some(limit) = max_leased {
        at = at.max(lease_end_at_limit(conn, queue, limit, now)?.unwrap_or(now));
    }
    Ok(Some(at))
}
