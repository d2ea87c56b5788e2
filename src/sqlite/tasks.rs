//! Every statement on tasks: push, claim, finish, fail, extend, recover,
//! and the calls that look at or tidy a queue. This is where a task is
//! claimed ([`claim`]).
//!
//! The stored states are named in `store.rs` (`READY` to `BLOCKED`).
//! Design: `docs/internals.md`, "Task statements and stored states".

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::ids::{self, next_task_id};
use super::{schedules, SqliteStore};
use crate::clock::now_unix_ms;
use crate::error::{Error, ErrorKind, Result};
use crate::holder::{Liveness, ProcessId};
use crate::options::RetryBackoff;
use crate::schedule::{Schedule, ScheduleInfo};
use crate::store::{
    cancellations_channel, cancelled_for, claim_order, delivery_stop, group_predecessor_sql,
    holds_unique_key, lease_slot_taken, not_held, of_item, parent_ids, pause_until, sort_claimed,
    state_condition, stored_pause, stored_reason, visible_state, waits_for, Checkpoint, IfNotHeld,
    ListFrom, Look, NewTask, PutSchedule, Store, BLOCKED, CANCELLED, CANCELLING, DEAD, DONE,
    LEASED, NEVER_USED, READY, STORED_STATES, UNTIL_RESUMED, WAITING,
};
use crate::task::{
    Cancelled, Failed, Pause, Pushed, RateLimit, Receipt, Stop, Task, TaskInfo, TaskState,
    TaskTiming,
};
use crate::wait::Bell;

/// At most this many waiting tasks become ready per claim, so one claim
/// after a long pause does not rewrite a large backlog in one transaction.
const PROMOTE_BATCH: usize = 1000;

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

/// Stores one task in `queue`, or finds the task holding its unique key.
/// A task that no longer holds its key ([`holds_unique_key`]) gives it up
/// here. `earlier` is what the earlier items of the same push did, which
/// the task may wait for; a task to wait for that cannot be
/// ([`waits_for`]) fails the push.
pub(crate) fn push_one(
    conn: &Connection,
    queue: &str,
    task: &NewTask,
    earlier: &[Pushed],
    now: i64,
) -> Result<Pushed> {
    let parents = parent_ids(&task.after, earlier);
    let unfinished = unfinished_parents(conn, queue, &parents, task.run_anyway)?;
    if let Some((key, _)) = &task.unique {
        if let Some(id) = unique_key_holder(conn, queue, key, now)? {
            return Ok(Pushed::Duplicate(id));
        }
    }
    let group_parent = match &task.group {
        Some((group, at_once)) => group_parent(conn, queue, group, *at_once, &unfinished)?,
        None => None,
    };
    let waiting_for = unfinished.len() + usize::from(group_parent.is_some());
    let state = if waiting_for > 0 {
        BLOCKED
    } else if task.run_at <= now {
        READY
    } else {
        WAITING
    };
    let id = insert_task(conn, queue, task, state, &parents, waiting_for, now)?;
    let dependencies = unfinished
        .into_iter()
        .map(|parent| (parent, task.run_anyway))
        .chain(group_parent.map(|parent| (parent, true)));
    for (parent, run_anyway) in dependencies {
        conn.prepare_cached(
            "INSERT INTO tq_dependencies (parent, task, run_anyway) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![parent, id, run_anyway])?;
    }
    Ok(Pushed::Stored(id))
}

/// Those of `parents` in `queue` that a new task must still wait for;
/// [`waits_for`] refuses a parent it cannot wait for, which fails the push
/// before anything of the task is written.
fn unfinished_parents(
    conn: &Connection,
    queue: &str,
    parents: &[i64],
    run_anyway: bool,
) -> Result<Vec<i64>> {
    let mut unfinished = Vec::new();
    for &parent in parents {
        let state: Option<i64> = conn
            .prepare_cached("SELECT state FROM tq_tasks WHERE id = ?1 AND queue = ?2")?
            .query_row(params![parent, queue], |row| row.get(0))
            .optional()?;
        if waits_for(queue, parent, state, run_anyway)? {
            unfinished.push(parent);
        }
    }
    Ok(unfinished)
}

/// The task of `queue` that still holds unique key `key` at `now`, if one
/// does. A task that has the key but no longer holds it
/// ([`holds_unique_key`]) gives it up here, so that the new task can take
/// it without breaking the key's uniqueness in the table.
fn unique_key_holder(conn: &Connection, queue: &str, key: &str, now: i64) -> Result<Option<i64>> {
    let holder: Option<(i64, i64, Option<i64>)> = conn
        .prepare_cached(
            "SELECT id, state, unique_until FROM tq_tasks WHERE queue = ?1 AND unique_key = ?2",
        )?
        .query_row(params![queue, key], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    if let Some((id, state, unique_until)) = holder {
        if holds_unique_key(state, unique_until, now) {
            return Ok(Some(id));
        }
        conn.prepare_cached("UPDATE tq_tasks SET unique_key = NULL WHERE id = ?1")?
            .execute([id])?;
    }
    Ok(None)
}

/// Writes the row of a new task in `state`, waiting for `waiting_for`
/// tasks, and returns its id; its `parents` are kept with it (as JSON) so
/// a claim can hand them to the worker.
fn insert_task(
    conn: &Connection,
    queue: &str,
    task: &NewTask,
    state: i64,
    parents: &[i64],
    waiting_for: usize,
    now: i64,
) -> Result<i64> {
    let (key, reserved_for) = task
        .unique
        .as_ref()
        .map_or((None, 0), |(key, ms)| (Some(key.as_str()), *ms));
    let parents_json = (!parents.is_empty())
        .then(|| serde_json::to_string(parents).expect("a list of integers serializes"));
    ids::settle_deletions(conn)?;
    conn.prepare_cached(concat!(
        "INSERT INTO tq_tasks
            (id, queue, state, payload, created_at, run_at, priority, max_attempts, unique_key,
             unique_for, parents, waiting_for, group_key)
         VALUES (",
        next_task_id!(),
        ", ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
    ))?
    .execute(params![
        queue,
        state,
        task.payload,
        now,
        task.run_at,
        task.priority,
        task.max_attempts,
        key,
        reserved_for,
        parents_json,
        waiting_for as i64,
        task.group.as_ref().map(|(group, _)| group.as_str()),
    ])?;
    Ok(conn.last_insert_rowid())
}

/// The task a task pushed to `group` of `queue`, `at_once` of whose tasks
/// run at once, waits for as its group's predecessor (see
/// [`group_predecessor_sql`]), unless it waits for that task already among
/// its `parents`, with their own policy.
fn group_parent(
    conn: &Connection,
    queue: &str,
    group: &str,
    at_once: u32,
    parents: &[i64],
) -> Result<Option<i64>> {
    let predecessor: Option<i64> = conn
        .prepare_cached(&group_predecessor_sql("tq_tasks", '?'))?
        .query_row(params![queue, group, at_once - 1], |row| row.get(0))
        .optional()?;
    Ok(predecessor.filter(|id| !parents.contains(id)))
}

/// The tasks waiting for task `?1`: one lookup in the primary key of
/// `tq_dependencies`, which starts with the parent. A plain query, then
/// [`FORGET_WAITING`] when it found any: a `DELETE ... RETURNING` in their
/// place costs every call a statement journal and a temporary table, even
/// when it deletes nothing. Measured at `normal`, it made a pull and finish
/// of a task nobody waits for take 1.5 times as long, and of a task of an
/// ordered group (whose finish hands its group on) 1.4 times.
const DEPENDENTS: &str = "SELECT task, run_anyway FROM tq_dependencies WHERE parent = ?1";

/// Forgets the tasks waiting for task `?1`, which has ended.
const FORGET_WAITING: &str = "DELETE FROM tq_dependencies WHERE parent = ?1";

/// Forgets what task `?1` waits for, as it ends before them.
const FORGET_PARENTS: &str = "DELETE FROM tq_dependencies WHERE task = ?1";

/// How a task ended, for the tasks waiting for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
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
fn release_waiting(
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

/// Cancels task `id` if it is still blocked, forgetting the other tasks it
/// waited for; says whether it did.
fn cancel_blocked(
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

/// Whether queue `?1` has a waiting task due by `?2`: a cheap look before
/// [`PROMOTE`], whose `IN (SELECT ...)` costs more even when it finds nothing.
const ANY_DUE: &str =
    "SELECT 1 FROM tq_tasks WHERE queue = ?1 AND state = 4 AND run_at <= ?2 LIMIT 1";

/// Makes ready the waiting tasks of `?1` due by `?2`, oldest first, at most `?3`.
const PROMOTE: &str = "UPDATE tq_tasks SET state = 0
    WHERE id IN (SELECT id FROM tq_tasks
                 WHERE queue = ?1 AND state = 4 AND run_at <= ?2
                 ORDER BY run_at LIMIT ?3)";

/// The ready tasks of queue `?1`, in claim order in the index of live
/// tasks (where ready tasks have no lease expiry: see `schema.rs`).
const READY_IN_LINE: &str = "queue = ?1 AND state = 0 AND lease_expires_at IS NULL";

/// The ready task to claim first: one lookup in the index of live tasks.
fn ready_first_sql() -> String {
    format!(
        "SELECT id, priority, run_at, 0 FROM tq_tasks WHERE {READY_IN_LINE}
         ORDER BY priority DESC, run_at, id LIMIT 1"
    )
}

/// Whether queue `?1` has a lease expired by `?2`: one lookup in the index
/// of live tasks, made before every claim.
const ANY_EXPIRED: &str = "SELECT 1 FROM tq_tasks
    WHERE queue = ?1 AND state = 1 AND lease_expires_at <= ?2 LIMIT 1";

/// The earliest time `?2` or later when a task of queue `?1` can be claimed
/// (see `Store::next_claimable`): four index lookups. The end of a
/// cancelled task's lease counts: the claim after it ends the task, which
/// may free its group's next task.
const NEXT_CLAIMABLE: &str = "SELECT min(t) FROM (
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
/// column says whether that
/// delivery was its last attempt.
const EXPIRED_IN_LINE: &str = "SELECT id, priority, run_at, attempts >= max_attempts
    FROM tq_tasks
    WHERE queue = ?1 AND state = 1 AND lease_expires_at <= ?2
    ORDER BY priority DESC, run_at, id LIMIT ?3";

/// What every claim sets: a new lease, whose token is drawn here so each
/// delivery has a receipt of its own, one more attempt, and the claim's
/// time `?5` (over an earlier claim's).
const LEASE: &str = "UPDATE tq_tasks
    SET state = 1, attempts = attempts + 1, lease_token = random(),
        lease_expires_at = ?2, holder_id = ?3, claimed_at = ?5";

/// What every claim returns, in the order [`task_from_row`] reads it.
const TAKEN_COLUMNS: &str = "id, lease_token, attempts, max_attempts, priority, run_at,
    last_error, payload, parents";

/// Takes task `?1` at `?5`; `?4`, when not NULL, is why its previous
/// delivery ended (an expired lease). No RETURNING: it makes SQLite keep a
/// statement journal (allocated and freed by every claim) and a temporary
/// table, which cost more than reading the row again ([`taken_sql`]).
fn take_one_sql() -> String {
    format!("{LEASE}, last_error = coalesce(?4, last_error) WHERE id = ?1")
}

/// Task `?1` as a claim returns it, read after [`take_one_sql`].
fn taken_sql() -> String {
    format!("SELECT {TAKEN_COLUMNS} FROM tq_tasks WHERE id = ?1")
}

/// Takes task `id` (see [`take_one_sql`]) and returns it.
fn take_one(
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
fn take_ready_sql() -> String {
    format!(
        "{LEASE} WHERE id IN (SELECT id FROM tq_tasks WHERE {READY_IN_LINE}
                              ORDER BY priority DESC, run_at, id LIMIT ?4)
         RETURNING {TAKEN_COLUMNS}"
    )
}

/// Ends, as dead, the expired delivery of task `?1` that was its last attempt.
const BURY_EXPIRED: &str = "UPDATE tq_tasks
    SET state = 3, finished_at = ?2, lease_token = NULL, lease_expires_at = NULL,
        holder_id = NULL,
        last_error = 'the lease of delivery ' || attempts || ' expired before it finished'
    WHERE id = ?1";

/// A claim candidate: id, priority, run-at, and whether it is an expired
/// last attempt.
type Candidate = (i64, i32, i64, bool);

/// A candidate's place in [`claim_order`].
fn candidate_order(&(id, priority, run_at, _): &Candidate) -> (std::cmp::Reverse<i32>, i64, i64) {
    claim_order(priority, run_at, id)
}

/// Claims up to `max` tasks of `queue` for `holder_id`, best first. While a
/// leased task's lease has expired, each task is the better, in claim
/// order, of the ready task first in line and the task whose lease expired
/// first, so a task whose holder vanished keeps its place in line; only the
/// tasks delivered change hands (another expired lease stays with its
/// holder, who may still finish it). With no expired lease, the ready tasks
/// are taken in one statement.
fn claim(
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
    let tasks = claim_up_to(
        conn,
        queue,
        max,
        now,
        lease_expires_at,
        holder_id,
        keep_history,
    )?;
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
                if first_expired.3 {
                    bury_expired(conn, first_expired.0, now, keep_history)?;
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

/// Ends as dead task `id`, whose expired delivery was its last attempt,
/// and releases the tasks waiting for it: nobody may claim it again.
fn bury_expired(conn: &Connection, id: i64, now: i64, keep_history: bool) -> Result<()> {
    conn.prepare_cached(BURY_EXPIRED)?
        .execute(params![id, now])?;
    release_waiting(conn, id, Ended::Dead, now, keep_history)
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

/// The end of queue `?1`'s pause in force at `?2`: one lookup in a table
/// of a row per queue an operator set.
const PAUSED_UNTIL: &str =
    "SELECT paused_until FROM tq_queues WHERE queue = ?1 AND paused_until > ?2";

/// What an operator set for queue `?1`: its pause's end, its concurrency
/// limit and its rate limit's window.
const SETTINGS: &str =
    "SELECT paused_until, max_leased, rate_period FROM tq_queues WHERE queue = ?1";

/// Up to `?3` of queue `?1`'s rate slots free at `?2` (last used a window
/// ago or more), the longest free first.
const FREE_RATE_SLOTS: &str = "SELECT slot FROM tq_rate_slots
    WHERE queue = ?1 AND used_at <= ?2 ORDER BY used_at LIMIT ?3";

/// Marks `?4` of queue `?1`'s rate slots free at `?3` used at `?2`.
const USE_RATE_SLOTS: &str = "UPDATE tq_rate_slots SET used_at = ?2
    WHERE queue = ?1 AND slot IN (SELECT slot FROM tq_rate_slots
                                  WHERE queue = ?1 AND used_at <= ?3 ORDER BY used_at LIMIT ?4)";

/// The live leases of queue `?1` at `?2`, which hold a slot of its
/// concurrency limit: two ranges of indexes, as long as the limit.
const LIVE_LEASES: &str = "SELECT
    (SELECT count(*) FROM tq_tasks WHERE queue = ?1 AND state = 1 AND lease_expires_at > ?2)
  + (SELECT count(*) FROM tq_tasks WHERE queue = ?1 AND state = 6 AND lease_expires_at > ?2)";

/// When the first live lease of queue `?1` expires after `?2`: two
/// lookups in partial indexes.
const FIRST_LEASE_END: &str = "SELECT min(t) FROM (
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
    let Some((paused_until, max_leased, rate_period)) = settings(conn, queue)? else {
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

/// What an operator set for `queue` ([`SETTINGS`]), if anything.
fn settings(conn: &Connection, queue: &str) -> Result<Option<Settings>> {
    Ok(conn
        .prepare_cached(SETTINGS)?
        .query_row([queue], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .optional()?)
}

/// A queue's pause's end, concurrency limit and rate limit's window.
type Settings = (Option<i64>, Option<i64>, Option<i64>);

/// When the pause of `queue` in force at `now` ends, if it is paused.
fn paused_until(conn: &Connection, queue: &str, now: i64) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(PAUSED_UNTIL)?
        .query_row(params![queue, now], |row| row.get(0))
        .optional()?)
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
fn ids_from_json(json: Option<String>) -> rusqlite::Result<Vec<i64>> {
    json.map_or(Ok(Vec::new()), |json| {
        serde_json::from_str(&json).map_err(|err| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(err))
        })
    })
}

fn candidate_from_row(row: &Row<'_>) -> rusqlite::Result<Candidate> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
}

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

/// Counts the tasks of queue `?1` in `state`: one range of a partial index
/// per stored state.
fn count_sql(state: TaskState) -> String {
    format!(
        "SELECT count(*) FROM tq_tasks WHERE queue = ?1 AND {}",
        state_condition(state)
    )
}

/// How many ids a page of [`list`] reads in id order first (or 16 per
/// task asked for, if more): 8,192 rows of a million-task file read in
/// about a millisecond (the `serve` benchmark measures the pages).
const LIST_WALK: i64 = 8192;

/// A page of queue `queue`'s tasks in `state` from `from`, by id, read in
/// one snapshot (callers run it in a read transaction) without scanning
/// the table. It reads the ids that follow in windows of [`LIST_WALK`]
/// ids, each twice the one before, until the page is full; a state's
/// tasks are usually many where they are found at all (a backlog, a
/// history), so a window or two finds a page of them.
/// Before each further window it counts the state's tasks up to that
/// window's size: a state with fewer has the rest of the page found
/// through its partial indexes and sorted by id, for less than the window
/// would cost. A page so costs at most a few times the lesser of the ids
/// it must pass and the tasks in the state. An index of every task by
/// state and id would cost a page nothing, at the price of one more index
/// entry written by every push, claim and finish (measured: pull and
/// finish at `normal` fell from about 0.6 to 0.44 of bare SQLite's rate).
fn list(
    conn: &Connection,
    queue: &str,
    state: TaskState,
    from: ListFrom,
    limit: usize,
) -> Result<Vec<TaskInfo>> {
    let limit = limit.min(i64::MAX as usize) as i64;
    let Some(ids) = ids_beyond(conn, from)? else {
        return Ok(Vec::new());
    };
    read_page(conn, queue, state, from, limit, ids)
}

/// The ids a page of [`list`] may read: from `start` (excluded) on to
/// `end`, `step` moving away from the page's start.
struct IdsBeyond {
    start: i64,
    end: i64,
    step: fn(i64, i64) -> i64,
}

/// Where the ids beyond the page's start begin and end, or none when the
/// table is empty; the start is moved to the table's first or last id
/// when it lies beyond (the first page, or ids purged since).
fn ids_beyond(conn: &Connection, from: ListFrom) -> Result<Option<IdsBeyond>> {
    let (first, last): (Option<i64>, Option<i64>) = conn
        .prepare_cached(ENDS_OF_IDS)?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(None);
    };
    let (start, end, step): (i64, i64, fn(i64, i64) -> i64) = match from {
        ListFrom::After(id) => (id.max(first.saturating_sub(1)), last, i64::saturating_add),
        ListFrom::Before(id) => (id.min(last.saturating_add(1)), first, i64::saturating_sub),
    };
    Ok(Some(IdsBeyond { start, end, step }))
}

/// Reads up to `limit` tasks of `queue` in `state` among `ids`, in windows
/// of ids that double, until the page is full, the ids run out, or the
/// state's tasks are few enough to be found through its partial indexes
/// instead (see [`list`]).
fn read_page(
    conn: &Connection,
    queue: &str,
    state: TaskState,
    from: ListFrom,
    limit: i64,
    ids: IdsBeyond,
) -> Result<Vec<TaskInfo>> {
    let IdsBeyond {
        start: mut bound,
        end,
        step,
    } = ids;
    let walk_sql = list_walk_sql(state, from);
    let mut window = LIST_WALK.max(limit.saturating_mul(16));
    let mut page = Vec::new();
    loop {
        let walked_to = step(bound, window);
        let left = limit - page.len() as i64;
        page.extend(read_list(
            conn,
            &walk_sql,
            params![queue, bound, left, walked_to],
        )?);
        bound = walked_to;
        let past_the_end = match from {
            ListFrom::After(_) => bound >= end,
            ListFrom::Before(_) => bound <= end,
        };
        if page.len() as i64 == limit || past_the_end {
            break;
        }
        window = window.saturating_mul(2);
        let in_state: i64 = conn
            .prepare_cached(&count_up_to_sql(state))?
            .query_row(params![queue, window], |row| row.get(0))?;
        if in_state < window {
            let left = limit - page.len() as i64;
            page.extend(read_list(
                conn,
                &list_sql(state, from),
                params![queue, bound, left],
            )?);
            break;
        }
    }
    Ok(page)
}

/// The tasks of queue `?1` in `state`, counted up to `?2`, through the
/// state's partial indexes.
fn count_up_to_sql(state: TaskState) -> String {
    format!(
        "SELECT count(*) FROM (SELECT 1 FROM tq_tasks WHERE queue = ?1 AND {} LIMIT ?2)",
        state_condition(state)
    )
}

/// The table's first and last ids, each one step down its B-tree (a
/// `min` and a `max` in one `SELECT` would read every row).
const ENDS_OF_IDS: &str = "SELECT (SELECT min(id) FROM tq_tasks), (SELECT max(id) FROM tq_tasks)";

fn read_list(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Result<Vec<TaskInfo>> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params, |row| Ok(info_from_row(row)))?;
    rows.map(|row| row?).collect()
}

/// The tasks of queue `?1` in `state` among the ids from `?2` (excluded)
/// to `?4` (included), at most `?3`, in the order `from` asks: a range of
/// the table's own ids, never a scan.
fn list_walk_sql(state: TaskState, from: ListFrom) -> String {
    let (range, order) = match from {
        ListFrom::After(_) => ("id > ?2 AND id <= ?4", "id"),
        ListFrom::Before(_) => ("id < ?2 AND id >= ?4", "id DESC"),
    };
    format!(
        "SELECT {TASK_INFO} FROM tq_tasks NOT INDEXED
         WHERE {range} AND queue = ?1 AND {} ORDER BY {order} LIMIT ?3",
        state_condition(state)
    )
}

/// The tasks of queue `?1` in `state` beyond id `?2`, at most `?3`, in the
/// order `from` asks: the partial indexes of the state find its tasks,
/// which are then sorted by id, so this costs as much as the tasks in that
/// state beyond `?2`, never the whole table (done history included).
fn list_sql(state: TaskState, from: ListFrom) -> String {
    let (range, order) = match from {
        ListFrom::After(_) => ("id > ?2", "id"),
        ListFrom::Before(_) => ("id < ?2", "id DESC"),
    };
    format!(
        "SELECT {TASK_INFO}
         FROM tq_tasks WHERE queue = ?1 AND {} AND {range} ORDER BY {order} LIMIT ?3",
        state_condition(state)
    )
}

/// The timings of queue `?1` since `?2`, at most `?3` of each kind (see
/// `Store::timings_since`), in one statement so in one snapshot: the
/// leased tasks in the index of live tasks (a claim's time is in no
/// index: the leased tasks of the queue are as many as are held), the
/// cancelling ones in theirs, and the done and dead ones ended since `?2`
/// in theirs, in the order of those indexes.
const TIMINGS: &str = "SELECT * FROM (
        SELECT id, state, attempts, run_at, claimed_at, finished_at FROM tq_tasks
        WHERE queue = ?1 AND state = 1 AND claimed_at >= ?2 LIMIT ?3)
    UNION ALL SELECT * FROM (
        SELECT id, state, attempts, run_at, claimed_at, finished_at FROM tq_tasks
        WHERE queue = ?1 AND state = 6 AND claimed_at >= ?2 LIMIT ?3)
    UNION ALL SELECT * FROM (
        SELECT id, state, attempts, run_at, claimed_at, finished_at FROM tq_tasks
        WHERE queue = ?1 AND state = 2 AND finished_at >= ?2 AND claimed_at IS NOT NULL
        ORDER BY finished_at LIMIT ?3)
    UNION ALL SELECT * FROM (
        SELECT id, state, attempts, run_at, claimed_at, finished_at FROM tq_tasks
        WHERE queue = ?1 AND state = 3 AND finished_at >= ?2 AND claimed_at IS NOT NULL
        ORDER BY finished_at LIMIT ?3)";

fn timing_from_row(row: &Row<'_>) -> Result<TaskTiming> {
    Ok(TaskTiming {
        id: row.get(0)?,
        state: visible_state(row.get(1)?)?,
        attempts: row.get(2)?,
        run_at_unix_ms: row.get(3)?,
        claimed_at_unix_ms: row.get(4)?,
        finished_at_unix_ms: row.get(5)?,
    })
}

/// The columns of a task as [`info_from_row`] reads them.
const TASK_INFO: &str =
    "id, state, attempts, max_attempts, priority, run_at, last_error, payload, result, progress,
     CASE WHEN state = 7 THEN (SELECT json_group_array(parent) FROM
         (SELECT parent FROM tq_dependencies WHERE task = tq_tasks.id ORDER BY parent))
     END,
     group_key, created_at, claimed_at,
     CASE WHEN state IN (2, 3, 5) THEN finished_at END";

fn info_from_row(row: &Row<'_>) -> Result<TaskInfo> {
    Ok(TaskInfo {
        id: row.get(0)?,
        state: visible_state(row.get(1)?)?,
        attempts: row.get(2)?,
        max_attempts: row.get(3)?,
        priority: row.get(4)?,
        run_at_unix_ms: row.get(5)?,
        last_error: row.get(6)?,
        payload: row.get(7)?,
        result: row.get(8)?,
        progress: row.get(9)?,
        waiting_for: ids_from_json(row.get(10)?)?,
        group: row.get(11)?,
        created_at_unix_ms: row.get(12)?,
        claimed_at_unix_ms: row.get(13)?,
        finished_at_unix_ms: row.get(14)?,
    })
}

/// A write that may share a transaction with others (see `group.rs`).
pub(crate) enum Op {
    Push {
        queue: String,
        tasks: Vec<NewTask>,
        now: i64,
    },
    Claim(ClaimArgs),
    Finish {
        queue: String,
        receipts: Vec<Receipt>,
        now: i64,
        keep_history: bool,
    },
    FinishWithResult {
        queue: String,
        receipt: Receipt,
        result: String,
        now: i64,
        keep_history: bool,
        keep_until: i64,
    },
    FinishAndClaim {
        receipts: Vec<Receipt>,
        if_not_held: IfNotHeld,
        keep_history: bool,
        claim: ClaimArgs,
    },
    Fail {
        receipt: Receipt,
        reason: String,
        now: i64,
        backoff: RetryBackoff,
        keep_history: bool,
    },
    Extend {
        receipt: Receipt,
        now: i64,
        lease_expires_at: i64,
        progress: Option<String>,
    },
}

pub(crate) struct ClaimArgs {
    queue: String,
    max: usize,
    /// When the pull began: the claim's time is read again once it holds
    /// the write lock ([`ClaimArgs::time_under_lock`]).
    now: i64,
    /// The lease's length, in ms.
    lease: i64,
    /// For the tasks waiting for an expired last attempt buried as dead.
    keep_history: bool,
}

impl ClaimArgs {
    /// The claim's time, read inside its transaction (never before the
    /// pull began), and when the leases it gives expire: a pull that waited
    /// for the write lock stamps its rate slots and starts its leases when
    /// it claims, not when it began (see `Store::claim`).
    fn time_under_lock(&self) -> (i64, i64) {
        let now = self.now.max(now_unix_ms());
        (now, now.saturating_add(self.lease))
    }
}

/// What an [`Op`] returns.
pub(crate) enum Output {
    Pushed(Vec<Pushed>),
    Tasks(Vec<Task>),
    Held(Vec<bool>),
    HeldAndTasks(Vec<bool>, Vec<Task>),
    Failed(Failed),
    Extended,
}

/// Runs one operation in the caller's transaction. `holder` is this
/// process's row in `tq_holders` once known; the first claim records it.
pub(super) fn run(
    conn: &Connection,
    op: Op,
    holder: &mut Option<i64>,
    process: &ProcessId,
) -> Result<Output> {
    match op {
        Op::Push { queue, tasks, now } => Ok(Output::Pushed(push_all(conn, &queue, &tasks, now)?)),
        Op::Claim(args) => Ok(Output::Tasks(claim_for(conn, &args, holder, process)?)),
        Op::Finish {
            queue,
            receipts,
            now,
            keep_history,
        } => Ok(Output::Held(finish_all(
            conn,
            &queue,
            &receipts,
            now,
            keep_history,
        )?)),
        Op::FinishWithResult {
            queue,
            receipt,
            result,
            now,
            keep_history,
            keep_until,
        } => Ok(Output::Held(vec![finish_with_result(
            conn,
            &queue,
            receipt,
            &result,
            now,
            keep_history,
            keep_until,
        )?])),
        Op::FinishAndClaim {
            receipts,
            if_not_held,
            keep_history,
            claim,
        } => {
            let (held, tasks) = finish_and_claim(
                conn,
                &receipts,
                if_not_held,
                keep_history,
                &claim,
                holder,
                process,
            )?;
            Ok(Output::HeldAndTasks(held, tasks))
        }
        Op::Fail {
            receipt,
            reason,
            now,
            backoff,
            keep_history,
        } => Ok(Output::Failed(fail_one(
            conn,
            receipt,
            &reason,
            now,
            &backoff,
            keep_history,
        )?)),
        Op::Extend {
            receipt,
            now,
            lease_expires_at,
            progress,
        } => {
            extend_lease(conn, receipt, now, lease_expires_at, progress.as_deref())?;
            Ok(Output::Extended)
        }
    }
}

/// Pushes the tasks of one call in order, so that a task can wait for an
/// earlier item of the same push; an error says which item failed.
fn push_all(conn: &Connection, queue: &str, tasks: &[NewTask], now: i64) -> Result<Vec<Pushed>> {
    let mut pushed = Vec::with_capacity(tasks.len());
    for (index, task) in tasks.iter().enumerate() {
        let one = push_one(conn, queue, task, &pushed, now)
            .map_err(|err| of_item(err, index, tasks.len()))?;
        pushed.push(one);
    }
    Ok(pushed)
}

/// Finishes each receipt, telling for each whether it was still held;
/// without history, the finished tasks' reserved rows are swept once for
/// the whole batch rather than once a task.
fn finish_all(
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
fn finish_with_result(
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
fn finish_and_claim(
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

/// Moves a held lease's expiry (and records progress, if given); a
/// receipt no longer held is an error, since the caller's work is then
/// no longer its own.
/// An expired lease is extended only while its queue's concurrency limit
/// has room: it held no slot once it expired (see [`LIVE_LEASES`]), so a
/// claim may have filled the slot.
fn extend_lease(
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
    if let Some((_, Some(limit), _)) = settings(conn, &queue)? {
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

fn claim_for(
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

/// Ends the delivery named by `receipt` as failed: retried after a pause
/// from `backoff`, or dead if it was the last attempt.
fn fail_one(
    conn: &Connection,
    receipt: Receipt,
    reason: &str,
    now: i64,
    backoff: &RetryBackoff,
    keep_history: bool,
) -> Result<Failed> {
    let delivery: Option<(u32, u32, i64)> = conn
        .prepare_cached(
            "SELECT attempts, max_attempts, random() FROM tq_tasks
             WHERE id = ?1 AND state = 1 AND lease_token = ?2",
        )?
        .query_row(params![receipt.id, receipt.token], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .optional()?;
    let (attempts, max_attempts, random) = delivery.ok_or_else(|| not_held(receipt.id))?;
    let reason = stored_reason(reason);
    if attempts >= max_attempts {
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
    let pause = backoff.pause(attempts, random as u64);
    let retry_at = now.saturating_add(pause.as_millis() as i64);
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
    Ok(Failed::RetryAt(retry_at))
}

/// The output of an operation that returns `Output::Tasks`, and so on: a
/// mismatch is a bug.
fn wrong_output() -> Error {
    Error::new(
        ErrorKind::Internal,
        "a write returned the wrong kind of result",
    )
}

/// The rate limit of `queue`: its window, and as many claims as it has slots.
fn rate_limit_of(conn: &Connection, queue: &str) -> Result<Option<RateLimit>> {
    Ok(conn
        .prepare_cached(
            "SELECT count(*), q.rate_period FROM tq_queues q
             JOIN tq_rate_slots s ON s.queue = q.queue
             WHERE q.queue = ?1 AND q.rate_period IS NOT NULL
             GROUP BY q.rate_period",
        )?
        .query_row([queue], |row| {
            Ok(RateLimit {
                claims: row.get(0)?,
                per: Duration::from_millis(row.get::<_, i64>(1)?.max(0) as u64),
            })
        })
        .optional()?)
}

impl SqliteStore {
    pub(super) fn claim_args(&self, max: usize, now: i64, lease: i64) -> ClaimArgs {
        ClaimArgs {
            queue: self.queue.clone(),
            max,
            now,
            lease,
            keep_history: self.keep_history,
        }
    }
}

/// [`Store::next_claimable`] of `queue`, read on `conn`.
fn next_claimable(conn: &Connection, queue: &str, now: i64) -> Result<Option<i64>> {
    let (paused_until, max_leased, rate_period) = settings(conn, queue)?.unwrap_or_default();
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

/// The file's change counter as `conn` sees it ([`Store::change_counter`]).
fn data_version(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached("PRAGMA data_version")?
        .query_row([], |row| row.get(0))?)
}

impl Store for SqliteStore {
    fn store_id(&self) -> u128 {
        let (device, inode) = self.file_id();
        (u128::from(device) << 64) | u128::from(inode)
    }

    fn push(&self, tasks: Vec<NewTask>, now: i64) -> Result<Vec<Pushed>> {
        match self.submit(Op::Push {
            queue: self.queue.clone(),
            tasks,
            now,
        })? {
            Output::Pushed(pushed) => {
                self.ring_other_processes();
                Ok(pushed)
            }
            _ => Err(wrong_output()),
        }
    }

    fn claim(&self, max: usize, now: i64, lease: i64) -> Result<Vec<Task>> {
        match self.submit(Op::Claim(self.claim_args(max, now, lease)))? {
            Output::Tasks(tasks) => Ok(tasks),
            _ => Err(wrong_output()),
        }
    }

    fn finish(&self, receipts: &[Receipt], now: i64) -> Result<Vec<bool>> {
        match self.submit(Op::Finish {
            queue: self.queue.clone(),
            receipts: receipts.to_vec(),
            now,
            keep_history: self.keep_history,
        })? {
            Output::Held(held) => {
                // A finish frees a slot of a concurrency limit.
                self.ring_other_processes();
                Ok(held)
            }
            _ => Err(wrong_output()),
        }
    }

    fn finish_with_result(
        &self,
        receipt: Receipt,
        result: &str,
        now: i64,
        retention: i64,
    ) -> Result<bool> {
        match self.submit(Op::FinishWithResult {
            queue: self.queue.clone(),
            receipt,
            result: result.to_owned(),
            now,
            keep_history: self.keep_history,
            keep_until: now.saturating_add(retention),
        })? {
            Output::Held(held) => {
                // Waiters for the task's outcome, and a slot of a limit.
                self.ring_other_processes();
                Ok(held[0])
            }
            _ => Err(wrong_output()),
        }
    }

    fn finish_and_claim(
        &self,
        receipts: &[Receipt],
        if_not_held: IfNotHeld,
        now: i64,
        lease: i64,
        max: usize,
    ) -> Result<(Vec<bool>, Vec<Task>)> {
        match self.submit(Op::FinishAndClaim {
            receipts: receipts.to_vec(),
            if_not_held,
            keep_history: self.keep_history,
            claim: self.claim_args(max, now, lease),
        })? {
            Output::HeldAndTasks(held, tasks) => {
                if held.iter().filter(|&&held| held).count() > tasks.len() {
                    // Slots of a concurrency limit were freed, not taken again.
                    self.ring_other_processes();
                }
                Ok((held, tasks))
            }
            _ => Err(wrong_output()),
        }
    }

    fn fail(
        &self,
        receipt: Receipt,
        reason: &str,
        now: i64,
        backoff: &RetryBackoff,
    ) -> Result<Failed> {
        match self.submit(Op::Fail {
            receipt,
            reason: reason.to_owned(),
            now,
            backoff: *backoff,
            keep_history: self.keep_history,
        })? {
            Output::Failed(failed) => {
                // A retry readies a task; either way, a slot of a limit is free.
                self.ring_other_processes();
                Ok(failed)
            }
            _ => Err(wrong_output()),
        }
    }

    fn extend(&self, receipt: Receipt, now: i64, lease: i64, progress: Option<&str>) -> Result<()> {
        match self.submit(Op::Extend {
            receipt,
            now,
            lease_expires_at: now.saturating_add(lease),
            progress: progress.map(str::to_owned),
        })? {
            Output::Extended => Ok(()),
            _ => Err(wrong_output()),
        }
    }

    fn recover(&self, now: i64) -> Result<u64> {
        let recovered = self.write(|conn| {
            let dead = dead_holders(conn, &self.file.process)?;
            let dead_json = serde_json::to_string(&dead).expect("a list of integers serializes");
            let recovered = recover_leases(conn, &self.queue, &dead_json, now, self.keep_history)?;
            end_abandoned_cancels(conn, &self.queue, &dead_json, now, self.keep_history)?;
            forget_dead_holders(conn, &dead_json)?;
            Ok(recovered)
        })?;
        if recovered > 0 {
            self.ring_other_processes();
        }
        Ok(recovered)
    }

    fn count(&self, state: TaskState) -> Result<u64> {
        let sql = count_sql(state);
        let count: i64 = self.read(|conn| {
            Ok(conn
                .prepare_cached(&sql)?
                .query_row([&self.queue], |row| row.get(0))?)
        })?;
        Ok(count as u64)
    }

    fn groups_waiting(&self) -> Result<u64> {
        // Named, else the group index, in group order for DISTINCT, would
        // read every grouped task rather than the blocked ones.
        let count: i64 = self.read(|conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT count(DISTINCT group_key) FROM tq_tasks INDEXED BY tq_tasks_blocked
                     WHERE queue = ?1 AND state = 7 AND group_key IS NOT NULL",
                )?
                .query_row([&self.queue], |row| row.get(0))?)
        })?;
        Ok(count as u64)
    }

    fn oldest_ready(&self, now: i64) -> Result<Option<i64>> {
        // Ready tasks are indexed by priority first: the oldest ready
        // task is the first of one of its priorities, found by skipping
        // from priority to priority rather than reading every entry.
        self.read(|conn| {
            let ready: Option<i64> = conn
                .prepare_cached(&format!(
                    "WITH RECURSIVE level(priority) AS (
                         SELECT max(priority) FROM tq_tasks WHERE {READY_IN_LINE}
                         UNION ALL
                         SELECT (SELECT max(priority) FROM tq_tasks
                                 WHERE {READY_IN_LINE} AND priority < level.priority)
                         FROM level WHERE level.priority IS NOT NULL
                     )
                     SELECT min((SELECT run_at FROM tq_tasks
                                 WHERE {READY_IN_LINE} AND priority = level.priority
                                 ORDER BY run_at LIMIT 1))
                     FROM level WHERE level.priority IS NOT NULL"
                ))?
                .query_row([&self.queue], |row| row.get(0))?;
            let due: Option<i64> = conn
                .prepare_cached(
                    "SELECT min(run_at) FROM tq_tasks WHERE queue = ?1 AND state = 4 AND run_at <= ?2",
                )?
                .query_row(params![self.queue, now], |row| row.get(0))?;
            Ok(ready.into_iter().chain(due).min())
        })
    }

    fn task(&self, id: i64) -> Result<Option<TaskInfo>> {
        self.read(|conn| {
            conn.prepare_cached(&format!(
                "SELECT {TASK_INFO} FROM tq_tasks WHERE id = ?1 AND queue = ?2"
            ))?
            .query_row(params![id, self.queue], |row| Ok(info_from_row(row)))
            .optional()?
            .transpose()
        })
    }

    fn timings_since(&self, since: i64, limit: usize) -> Result<Vec<TaskTiming>> {
        self.read(|conn| {
            let mut statement = conn.prepare_cached(TIMINGS)?;
            let rows = statement.query_map(
                params![self.queue, since, limit.min(i64::MAX as usize) as i64],
                |row| Ok(timing_from_row(row)),
            )?;
            rows.map(|row| row?).collect()
        })
    }

    fn list(&self, state: TaskState, from: ListFrom, limit: usize) -> Result<Vec<TaskInfo>> {
        self.read(|conn| list(conn, &self.queue, state, from, limit))
    }

    fn task_with_unique_key(&self, key: &str) -> Result<Option<TaskInfo>> {
        self.read(|conn| {
            conn.prepare_cached(&format!(
                "SELECT {TASK_INFO} FROM tq_tasks WHERE queue = ?1 AND unique_key = ?2"
            ))?
            .query_row(params![self.queue, key], |row| Ok(info_from_row(row)))
            .optional()?
            .transpose()
        })
    }

    fn retry_dead(&self, id: Option<i64>, now: i64) -> Result<u64> {
        let retried =
            self.write(|conn| {
                // A dead task of an ordered group let its successors run: it
                // rejoins the group at the back of its line (see
                // `Store::retry_dead`), each after the one retried before it.
                let grouped: Vec<(i64, String)> = conn
                    .prepare_cached(
                        "SELECT id, group_key FROM tq_tasks
                     WHERE queue = ?1 AND state = 3 AND group_key IS NOT NULL
                       AND (?2 IS NULL OR id = ?2)
                     ORDER BY id",
                    )?
                    .query_map(params![self.queue, id], |row| {
                        Ok((row.get(0)?, row.get(1)?))
                    })?
                    .collect::<rusqlite::Result<_>>()?;
                for (task, group) in &grouped {
                    let predecessor = group_parent(conn, &self.queue, group, 1, &[])?;
                    conn.prepare_cached(
                    "UPDATE tq_tasks SET state = ?2, attempts = 0, run_at = ?3, finished_at = NULL,
                         waiting_for = ?4
                     WHERE id = ?1",
                )?
                .execute(params![
                    task,
                    if predecessor.is_some() { BLOCKED } else { READY },
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
                    "UPDATE tq_tasks SET state = 0, attempts = 0, run_at = ?2, finished_at = NULL
                     WHERE queue = ?1 AND state = 3 AND (?3 IS NULL OR id = ?3)",
                )?
                .execute(params![self.queue, now, id])?;
                Ok((grouped.len() + retried) as u64)
            })?;
        if retried > 0 {
            self.ring_other_processes();
        }
        Ok(retried)
    }

    fn purge(&self, state: TaskState, now: i64, older_than: i64) -> Result<u64> {
        let before = now.saturating_sub(older_than);
        let sql = match state {
            TaskState::Done => {
                "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 2 AND finished_at <= ?2"
            }
            TaskState::Dead => {
                "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 3 AND finished_at <= ?2"
            }
            TaskState::Cancelled => {
                "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 5 AND finished_at <= ?2"
            }
            TaskState::Pending | TaskState::Leased => {
                return Err(Error::invalid_argument(
                    "only done, dead and cancelled tasks can be purged",
                ))
            }
        };
        self.write(|conn| {
            Ok(conn
                .prepare_cached(sql)?
                .execute(params![self.queue, before])? as u64)
        })
    }

    fn cancel_task(&self, id: i64, reason: &str, now: i64) -> Result<Cancelled> {
        let reason = stored_reason(reason);
        let cancelled = self.write(|conn| {
            let state: Option<i64> = conn
                .prepare_cached("SELECT state FROM tq_tasks WHERE id = ?1 AND queue = ?2")?
                .query_row(params![id, self.queue], |row| row.get(0))
                .optional()?;
            match state {
                None => Err(Error::invalid_argument(format!(
                    "queue '{}' has no task {id}",
                    self.queue
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
                    end_as_cancelled(conn, id, reason, now, self.keep_history)?;
                    Ok(Cancelled::Removed)
                }
            }
        })?;
        if cancelled == Cancelled::Requested {
            self.ring_cancellation()?;
        }
        Ok(cancelled)
    }

    fn delivery(&self, receipt: Receipt) -> Result<Option<Stop>> {
        let state: Option<i64> = self.read(|conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT state FROM tq_tasks
                     WHERE id = ?1 AND lease_token = ?2 AND (state = 1 OR state = 6)",
                )?
                .query_row(params![receipt.id, receipt.token], |row| row.get(0))
                .optional()?)
        })?;
        Ok(delivery_stop(state))
    }

    fn cancellations(&self) -> Result<(Arc<Bell>, Duration)> {
        let channel = cancellations_channel(&self.queue);
        let bell = Bell::for_queue(self.file.file_id, &channel)?;
        let safety_net = match &self.file.turns {
            Some(turns) if self.file.watcher.start(turns, self.file.file_id, &channel) => {
                super::wake::safety_net()
            }
            _ => crate::wait::POLL_INTERVAL,
        };
        Ok((bell, safety_net))
    }

    fn end_cancelled(&self, receipt: Receipt, now: i64) -> Result<bool> {
        self.write(|conn| {
            let cancelling = conn
                .prepare_cached(
                    "SELECT 1 FROM tq_tasks WHERE id = ?1 AND state = 6 AND lease_token = ?2",
                )?
                .query_row(params![receipt.id, receipt.token], |_| Ok(()))
                .optional()?;
            if cancelling.is_some() {
                end_as_cancelled(conn, receipt.id, None, now, self.keep_history)?;
            }
            Ok(cancelling.is_some())
        })
        .inspect(|&ended| {
            if ended {
                self.ring_other_processes();
            }
        })
    }

    fn snooze(&self, receipt: Receipt, now: i64, delay: i64) -> Result<()> {
        let run_at = now.saturating_add(delay);
        let snoozed = self.write(|conn| {
            Ok(conn
                .prepare_cached(
                    "UPDATE tq_tasks
                     SET state = CASE WHEN ?3 <= ?4 THEN 0 ELSE 4 END, run_at = ?3,
                         attempts = attempts - 1,
                         lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
                     WHERE id = ?1 AND state = 1 AND lease_token = ?2",
                )?
                .execute(params![receipt.id, receipt.token, run_at, now])?)
        })?;
        if snoozed == 0 {
            return Err(not_held(receipt.id));
        }
        self.ring_other_processes();
        Ok(())
    }

    fn set_pause(&self, pause: Option<Pause>) -> Result<()> {
        self.write(|conn| {
            conn.prepare_cached(
                "INSERT INTO tq_queues (queue, paused_until) VALUES (?1, ?2)
                 ON CONFLICT (queue) DO UPDATE SET paused_until = excluded.paused_until",
            )?
            .execute(params![self.queue, pause.map(pause_until)])?;
            Ok(())
        })?;
        if pause.is_none() {
            self.ring_other_processes();
        }
        Ok(())
    }

    fn set_concurrency_limit(&self, limit: Option<u32>) -> Result<()> {
        self.write(|conn| {
            conn.prepare_cached(
                "INSERT INTO tq_queues (queue, max_leased) VALUES (?1, ?2)
                 ON CONFLICT (queue) DO UPDATE SET max_leased = excluded.max_leased",
            )?
            .execute(params![self.queue, limit])?;
            Ok(())
        })?;
        // A higher limit, or none, may let waiters claim.
        self.ring_other_processes();
        Ok(())
    }

    fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<()> {
        let changed = self.write(|conn| {
            if rate_limit_of(conn, &self.queue)? == limit {
                return Ok(false);
            }
            let period = limit.map(|limit| limit.per.as_millis() as i64);
            conn.prepare_cached(
                "INSERT INTO tq_queues (queue, rate_period) VALUES (?1, ?2)
                 ON CONFLICT (queue) DO UPDATE SET rate_period = excluded.rate_period",
            )?
            .execute(params![self.queue, period])?;
            // The most recent uses carry over to the new rate, so that
            // declaring a rate again grants no burst the old one refused.
            let uses: Vec<i64> = conn
                .prepare_cached("DELETE FROM tq_rate_slots WHERE queue = ?1 RETURNING used_at")?
                .query_map([&self.queue], |row| row.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            if let Some(limit) = limit {
                let mut newest_first = uses;
                newest_first.sort_unstable_by(|a, b| b.cmp(a));
                let mut insert = conn.prepare_cached(
                    "INSERT INTO tq_rate_slots (queue, slot, used_at) VALUES (?1, ?2, ?3)",
                )?;
                for slot in 0..limit.claims {
                    let used_at = newest_first
                        .get(slot as usize)
                        .copied()
                        .unwrap_or(NEVER_USED);
                    insert.execute(params![self.queue, slot, used_at])?;
                }
            }
            Ok(true)
        })?;
        if changed {
            self.ring_other_processes();
        }
        Ok(())
    }

    fn rate_limit(&self) -> Result<Option<RateLimit>> {
        self.read(|conn| rate_limit_of(conn, &self.queue))
    }

    fn concurrency_limit(&self) -> Result<Option<u32>> {
        self.read(|conn| {
            let limit: Option<Option<u32>> = conn
                .prepare_cached("SELECT max_leased FROM tq_queues WHERE queue = ?1")?
                .query_row([&self.queue], |row| row.get(0))
                .optional()?;
            Ok(limit.flatten())
        })
    }

    fn pause(&self, now: i64) -> Result<Option<Pause>> {
        self.read(|conn| Ok(paused_until(conn, &self.queue, now)?.map(stored_pause)))
    }

    fn checkpoint(&self) -> Result<Checkpoint> {
        let busy = self.file.checkpoint()?;
        Ok(Checkpoint {
            wal_bytes: self.wal_size()?,
            complete: !busy,
        })
    }

    fn wal_size(&self) -> Result<u64> {
        self.file.wal_file_size()
    }

    fn next_claimable(&self, now: i64) -> Result<Option<i64>> {
        self.read(|conn| next_claimable(conn, &self.queue, now))
    }

    fn watch_other_processes(&self) -> Duration {
        // Rarely with the watcher (see `wake.rs`), often without.
        match &self.file.turns {
            Some(turns)
                if self
                    .file
                    .watcher
                    .start(turns, self.file.file_id, &self.queue) =>
            {
                super::wake::safety_net()
            }
            _ => crate::wait::POLL_INTERVAL,
        }
    }

    fn change_counter(&self) -> Result<i64> {
        self.read(data_version)
    }

    fn look(&self, now: i64, seen: Option<i64>) -> Result<Option<Look>> {
        self.read(|conn| {
            let changes = data_version(conn)?;
            if seen == Some(changes) {
                return Ok(None);
            }
            Ok(Some(Look {
                changes,
                claimable: next_claimable(conn, &self.queue, now)?,
                next_slot: schedules::next_slot(conn, &self.queue)?,
            }))
        })
    }

    fn queue_names(&self) -> Result<Vec<String>> {
        self.read(|conn| {
            let mut names = BTreeSet::new();
            for state in STORED_STATES {
                let mut statement = conn.prepare_cached(&queue_names_sql(state))?;
                let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
                for name in rows {
                    names.insert(name?);
                }
            }
            Ok(names.into_iter().collect())
        })
    }

    fn put_schedule(&self, schedule: &Schedule, put: PutSchedule, now: i64) -> Result<()> {
        self.write(|conn| schedules::put(conn, &self.queue, schedule, put, now))?;
        // A waiter's wait may now end sooner, at the first slot.
        self.ring_other_processes();
        Ok(())
    }

    fn remove_schedule(&self, name: &str) -> Result<bool> {
        self.write(|conn| schedules::remove(conn, &self.queue, name))
    }

    fn set_schedule_paused(&self, name: &str, paused: bool, now: i64) -> Result<bool> {
        let found =
            self.write(|conn| schedules::set_paused(conn, &self.queue, name, paused, now))?;
        if found && !paused {
            self.ring_other_processes();
        }
        Ok(found)
    }

    fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        self.read(|conn| schedules::list(conn, &self.queue))
    }

    fn run_due_schedules(&self, now: i64) -> Result<u64> {
        let stored = self.write(|conn| schedules::run_due(conn, &self.queue, now))?;
        if stored > 0 {
            self.ring_other_processes();
        }
        Ok(stored)
    }

    fn next_schedule_slot(&self, _now: i64) -> Result<Option<i64>> {
        self.read(|conn| schedules::next_slot(conn, &self.queue))
    }

    fn last_id(&self) -> Result<i64> {
        self.read(ids::last_given)
    }
}

/// The queues with a task in `state`, skipping from name to name in the
/// state's index: a few lookups per queue.
fn queue_names_sql(state: i64) -> String {
    format!(
        "WITH RECURSIVE names(name) AS (
             SELECT min(queue) FROM tq_tasks WHERE state = {state}
             UNION ALL
             SELECT (SELECT min(queue) FROM tq_tasks WHERE state = {state} AND queue > names.name)
             FROM names WHERE names.name IS NOT NULL)
         SELECT name FROM names WHERE name IS NOT NULL"
    )
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
/// left is ready again, one without ends dead and releases the tasks
/// waiting for it. Returns how many were taken back.
fn recover_leases(
    conn: &Connection,
    queue: &str,
    dead_json: &str,
    now: i64,
    keep_history: bool,
) -> Result<u64> {
    let recovered: Vec<(i64, i64)> = conn
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
                     RETURNING id, state",
        )?
        .query_map(params![now, dead_json, queue], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for &(id, state) in &recovered {
        if state == DEAD {
            release_waiting(conn, id, Ended::Dead, now, keep_history)?;
        }
    }
    Ok(recovered.len() as u64)
}

/// Whether a task of any queue cancelled while leased has a lease expired
/// by `?1`: a look in the index of such tasks, which holds few.
const ANY_CANCEL_EXPIRED: &str =
    "SELECT 1 FROM tq_tasks WHERE state = 6 AND lease_expires_at <= ?1 LIMIT 1";

/// Ends the tasks of every queue cancelled while leased whose lease expired
/// by `now`: their holder no longer works on them and will not be told,
/// and what waits for them (their ordered group, their dependents, in any
/// queue) must go on without a `recover`. Every claim calls it, as it
/// takes back the expired leases of its queue.
fn end_expired_cancels(conn: &Connection, now: i64, keep_history: bool) -> Result<()> {
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
/// while leased: kept as history, or deleted; returns their ids.
fn end_cancels_sql(keep_history: bool, filter: &str) -> String {
    if keep_history {
        format!(
            "UPDATE tq_tasks
                 SET state = 5, finished_at = ?1,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::OpenOptions;

    #[test]
    fn a_claim_rolled_back_in_a_group_leaves_no_holder_id_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let store = SqliteStore::open(path.to_str().unwrap(), &OpenOptions::new()).unwrap();
        let task = |queue: &str| Op::Push {
            queue: queue.to_owned(),
            tasks: vec![NewTask {
                payload: "1".to_owned(),
                run_at: 0,
                delay: Some(0),
                priority: 0,
                max_attempts: 3,
                unique: None,
                after: Vec::new(),
                run_anyway: false,
                group: None,
            }],
            now: 1,
        };
        let (pushed, _) = store
            .file
            .commit_group(vec![task("refused"), task("default")]);
        assert!(pushed.iter().all(Result::is_ok));
        // Damage from outside tq: a trigger that refuses to lease the tasks
        // of one queue, so the claim fails after this process registered.
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE UPDATE OF state ON tq_tasks
                 WHEN old.queue = 'refused' BEGIN SELECT RAISE(ABORT, 'refused'); END;",
            )
            .unwrap();
        let claim = |queue: &str| {
            Op::Claim(ClaimArgs {
                queue: queue.to_owned(),
                max: 1,
                now: 1,
                lease: 1000,
                keep_history: false,
            })
        };
        let (claimed, _) = store
            .file
            .commit_group(vec![claim("refused"), claim("default")]);
        assert!(claimed[0].is_err());
        let Ok(Output::Tasks(tasks)) = &claimed[1] else {
            panic!("the second claim failed");
        };
        let holder_id = *store
            .file
            .holder_id
            .get()
            .expect("the claim recorded a holder");
        let (pid, leased_by): (Option<i64>, i64) = store
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT (SELECT pid FROM tq_holders WHERE id = ?1),
                            (SELECT holder_id FROM tq_tasks WHERE id = ?2)",
                    params![holder_id, tasks[0].id()],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )?)
            })
            .unwrap();
        assert_eq!(
            pid,
            Some(std::process::id() as i64),
            "the cached holder id names this process's row"
        );
        assert_eq!(leased_by, holder_id);
    }

    /// The query plan of `sql` (its parameters left unbound), one line per step.
    fn plan(conn: &Connection, sql: &str) -> String {
        let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let mut rows = statement.raw_query();
        let mut steps = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            steps.push(row.get::<_, String>(3).unwrap());
        }
        steps.join("\n")
    }

    #[test]
    fn claiming_stays_an_index_lookup_with_a_million_blocked_tasks() {
        let conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&conn).unwrap();
        conn.execute_batch(
            "WITH RECURSIVE n(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n
                                         WHERE value < 1000000)
             INSERT INTO tq_tasks (queue, state, payload, created_at, run_at, waiting_for)
             SELECT 'default', 7, '1', 0, value, 1 FROM n;
             INSERT INTO tq_dependencies (parent, task, run_anyway)
             SELECT 1, id, 0 FROM tq_tasks;
             INSERT INTO tq_tasks (queue, state, payload, created_at, run_at)
             VALUES ('default', 0, '\"ready\"', 0, 5);
             ANALYZE;",
        )
        .unwrap();
        // Each statement of a claim (and what a finish adds) reads a few
        // entries, however many tasks are blocked.
        use rusqlite::types::Value;
        let steps = |sql: &str, params: Vec<Value>| -> i32 {
            let mut statement = conn.prepare(sql).unwrap();
            let mut rows = statement.query(rusqlite::params_from_iter(params)).unwrap();
            while rows.next().unwrap().is_some() {}
            drop(rows);
            statement.get_status(rusqlite::StatementStatus::VmStep)
        };
        let queue = || Value::Text("default".to_owned());
        for (sql, params) in [
            (ready_first_sql(), vec![queue()]),
            (ANY_DUE.to_owned(), vec![queue(), Value::Integer(10)]),
            (ANY_EXPIRED.to_owned(), vec![queue(), Value::Integer(10)]),
            (NEXT_CLAIMABLE.to_owned(), vec![queue(), Value::Integer(10)]),
            (
                "SELECT task FROM tq_dependencies WHERE parent = ?1".to_owned(),
                vec![Value::Integer(2)],
            ),
        ] {
            let steps = steps(&sql, params);
            assert!(steps < 200, "{steps} steps: {sql}");
        }
        let tasks = claim(&conn, "default", 1, 10, 1000, 1, false).unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].payload(), "\"ready\"");
        let waiting = plan(&conn, DEPENDENTS);
        assert!(waiting.contains("PRIMARY KEY"), "{waiting}");
        let forget_waiting = plan(&conn, FORGET_WAITING);
        assert!(forget_waiting.contains("PRIMARY KEY"), "{forget_waiting}");
        let forget = plan(&conn, FORGET_PARENTS);
        assert!(forget.contains("tq_dependencies_task"), "{forget}");
    }

    #[test]
    fn claiming_stays_an_index_lookup_with_a_thousand_groups_of_a_hundred() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&conn).unwrap();
        let tx = conn.transaction().unwrap();
        let grouped = |group: usize| NewTask {
            payload: "1".to_owned(),
            run_at: 0,
            delay: Some(0),
            priority: 0,
            max_attempts: 3,
            unique: None,
            after: Vec::new(),
            run_anyway: false,
            group: Some((format!("g{group}"), 1)),
        };
        for _ in 0..100 {
            for group in 0..1000 {
                push_one(&tx, "default", &grouped(group), &[], 0).unwrap();
            }
        }
        tx.commit().unwrap();
        conn.execute_batch("ANALYZE").unwrap();
        let count = |state: i64| -> i64 {
            conn.query_row(
                "SELECT count(*) FROM tq_tasks WHERE state = ?1",
                [state],
                |row| row.get(0),
            )
            .unwrap()
        };
        assert_eq!(
            (count(READY), count(BLOCKED)),
            (1000, 99_000),
            "a head per group"
        );
        let steps = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> i32 {
            let mut statement = conn.prepare(sql).unwrap();
            let mut rows = statement.query(params).unwrap();
            while rows.next().unwrap().is_some() {}
            drop(rows);
            statement.get_status(rusqlite::StatementStatus::VmStep)
        };
        let first = steps(&ready_first_sql(), &[&"default"]);
        assert!(first < 200, "{first} steps to find the task to claim");
        // A push finds its predecessor from the newest task of its group.
        let predecessor = group_predecessor_sql("tq_tasks", '?');
        let found = steps(&predecessor, &[&"default", &"g7", &0]);
        assert!(found < 200, "{found} steps to find a group's predecessor");
        let plan = plan(&conn, &predecessor);
        assert!(plan.contains("tq_tasks_group"), "{plan}");
        let tasks = claim(&conn, "default", 1, 10, 1000, 1, false).unwrap();
        assert_eq!(tasks.len(), 1);
    }

    #[test]
    fn claims_and_upkeep_are_index_lookups() {
        let conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&conn).unwrap();
        for (sql, index) in [
            (ready_first_sql().as_str(), "tq_tasks_live"),
            (ANY_EXPIRED, "tq_tasks_live"),
            (ANY_DUE, "tq_tasks_waiting"),
            (take_ready_sql().as_str(), "tq_tasks_live"),
            (PROMOTE, "tq_tasks_waiting"),
            (
                "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 2 AND finished_at <= ?2",
                "tq_tasks_done",
            ),
            (
                "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 3 AND finished_at <= ?2",
                "tq_tasks_dead",
            ),
            (
                "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 5 AND finished_at <= ?2",
                "tq_tasks_cancelled",
            ),
            (
                "SELECT id FROM tq_tasks WHERE queue = ?1 AND unique_key = ?2",
                "tq_tasks_unique",
            ),
        ] {
            let plan = plan(&conn, sql);
            assert!(plan.contains(index), "{sql}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql} sorts: {plan}");
        }
        for sql in [take_one_sql(), taken_sql()] {
            let plan = plan(&conn, &sql);
            assert!(plan.contains("INTEGER PRIMARY KEY"), "{plan}");
        }
        // Every claim looks for its queue's settings.
        for sql in [PAUSED_UNTIL, SETTINGS] {
            let plan = plan(&conn, sql);
            assert!(plan.contains("USING PRIMARY KEY (queue=?)"), "{plan}");
        }
        // A rate-limited queue's claims find their free slots in order.
        for sql in [FREE_RATE_SLOTS, USE_RATE_SLOTS] {
            let plan = plan(&conn, sql);
            assert!(plan.contains("tq_rate_slots_free"), "{plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql} sorts: {plan}");
        }
        // A limited queue's claims count its live leases in the indexes.
        let live = plan(&conn, LIVE_LEASES);
        assert!(live.contains("tq_tasks_live"), "{live}");
        assert!(live.contains("tq_tasks_cancelling"), "{live}");
        assert!(!live.contains("SCAN tq_tasks"), "{live}");
        // Every claim looks for a cancelled task's expired lease in any
        // queue: a scan of the index that holds only the tasks cancelled
        // while leased, never of the table.
        let cancelled = plan(&conn, ANY_CANCEL_EXPIRED);
        assert!(
            cancelled.contains("USING COVERING INDEX tq_tasks_cancelling"),
            "{cancelled}"
        );
        // A pull waiting at the limit looks up when the first lease ends.
        let first_end = plan(&conn, FIRST_LEASE_END);
        assert!(first_end.contains("tq_tasks_live"), "{first_end}");
        assert!(first_end.contains("tq_tasks_cancelling"), "{first_end}");
        assert!(!first_end.contains("SCAN tq_tasks"), "{first_end}");
        // The expired leases alone, through their index; the sort keeps only
        // the first `?3`.
        let expired = plan(&conn, EXPIRED_IN_LINE);
        assert!(
            expired.contains("tq_tasks_live (queue=? AND state=? AND lease_expires_at<?)"),
            "{expired}"
        );
        // The timings a monitor samples: the queue's leased tasks (as many
        // as are held) and those ended since a time, each kind through its
        // own index, in its order.
        let timings = plan(&conn, TIMINGS);
        for index in [
            "tq_tasks_live (queue=? AND state=?)",
            "tq_tasks_cancelling (queue=?)",
            "tq_tasks_done (queue=? AND finished_at>?)",
            "tq_tasks_dead (queue=? AND finished_at>?)",
        ] {
            assert!(timings.contains(index), "{index}: {timings}");
        }
        assert!(!timings.contains("SCAN tq_tasks"), "{timings}");
        assert!(!timings.contains("TEMP B-TREE"), "{timings}");
        // Counts of tasks, for monitoring, and pages of them.
        for state in [
            TaskState::Pending,
            TaskState::Leased,
            TaskState::Done,
            TaskState::Dead,
            TaskState::Cancelled,
        ] {
            let count = plan(&conn, &count_sql(state));
            assert!(count.contains("USING"), "{state:?}: {count}");
            assert!(!count.contains("SCAN tq_tasks"), "{state:?} scans: {count}");
            let count_up_to = plan(&conn, &count_up_to_sql(state));
            assert!(count_up_to.contains("USING"), "{state:?}: {count_up_to}");
            assert!(
                !count_up_to.contains("SCAN tq_tasks"),
                "{state:?} scans: {count_up_to}"
            );
            for from in [ListFrom::After(0), ListFrom::Before(0)] {
                let walk = plan(&conn, &list_walk_sql(state, from));
                assert!(
                    walk.contains("USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"),
                    "{state:?} {from:?}: {walk}"
                );
                assert!(
                    !walk.contains("TEMP B-TREE"),
                    "{state:?} {from:?} sorts: {walk}"
                );
                let list = plan(&conn, &list_sql(state, from));
                assert!(list.contains("USING"), "{state:?} {from:?}: {list}");
                assert!(
                    !list.contains("SCAN tq_tasks"),
                    "{state:?} {from:?} scans: {list}"
                );
            }
        }
        let ends = plan(&conn, ENDS_OF_IDS);
        assert!(!ends.contains("SCAN tq_tasks"), "{ends}");
    }

    /// A table of `rows` tasks of queue `default` whose stored state is
    /// `state_sql`, an SQL expression of the id `value` (an in-memory
    /// file: the shapes below need hundreds of thousands of rows).
    fn tasks_shaped(rows: i64, state_sql: &str) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&conn).unwrap();
        conn.execute_batch(&format!(
            "WITH RECURSIVE n(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n
                                         WHERE value < {rows})
             INSERT INTO tq_tasks (queue, state, payload, created_at, run_at, finished_at)
             SELECT 'default', {state_sql}, '1', 0, value, value FROM n;"
        ))
        .unwrap();
        conn
    }

    /// The shapes of file a page must cope with: a backlog with a few of
    /// each other state among it, a history with a backlog after it, and a
    /// backlog whose first tasks were purged.
    const SHAPES: [(&str, &str); 3] = [
        (
            "backlog",
            "CASE WHEN value % 997 = 0 THEN 3 WHEN value % 1009 = 0 THEN 4
                  WHEN value % 5003 = 0 THEN 1 ELSE 0 END",
        ),
        (
            "history, then a backlog",
            "CASE WHEN value <= 150000 THEN 2 ELSE 0 END",
        ),
        (
            "purged, then a backlog",
            "CASE WHEN value % 2 = 0 THEN 5 ELSE 0 END",
        ),
    ];

    #[test]
    fn pages_of_a_state_are_its_tasks_by_id_in_either_order() {
        for (shape, state_sql) in SHAPES {
            let conn = tasks_shaped(200_000, state_sql);
            if shape.starts_with("purged") {
                conn.execute("DELETE FROM tq_tasks WHERE id <= 120000", [])
                    .unwrap();
            }
            for state in [
                TaskState::Pending,
                TaskState::Leased,
                TaskState::Done,
                TaskState::Dead,
                TaskState::Cancelled,
            ] {
                let every: Vec<i64> = conn
                    .prepare(&format!(
                        "SELECT id FROM tq_tasks NOT INDEXED WHERE {} ORDER BY id",
                        state_condition(state)
                    ))
                    .unwrap()
                    .query_map([], |row| row.get(0))
                    .unwrap()
                    .collect::<rusqlite::Result<_>>()
                    .unwrap();
                for limit in [1, 50, 1000] {
                    // The first pages, and pages from the middle.
                    let middle = every.get(every.len() / 2).copied().unwrap_or(100_000);
                    for (from, expected) in [
                        (
                            ListFrom::After(0),
                            every.iter().take(limit).copied().collect::<Vec<_>>(),
                        ),
                        (
                            ListFrom::After(middle),
                            every
                                .iter()
                                .filter(|id| **id > middle)
                                .take(limit)
                                .copied()
                                .collect(),
                        ),
                        (
                            ListFrom::Before(i64::MAX),
                            every.iter().rev().take(limit).copied().collect(),
                        ),
                        (
                            ListFrom::Before(middle),
                            every
                                .iter()
                                .rev()
                                .filter(|id| **id < middle)
                                .take(limit)
                                .copied()
                                .collect(),
                        ),
                    ] {
                        let page: Vec<i64> = list(&conn, "default", state, from, limit)
                            .unwrap()
                            .iter()
                            .map(TaskInfo::id)
                            .collect();
                        assert_eq!(
                            page, expected,
                            "{shape}, {state:?} from {from:?}, limit {limit}"
                        );
                    }
                }
                // Another queue's tasks are not listed.
                assert!(list(&conn, "other", state, ListFrom::After(0), 10)
                    .unwrap()
                    .is_empty());
            }
        }
    }

    /// The steps of SQLite's virtual machine that a page of `state` from
    /// `from` takes, over every statement [`list`] may run.
    fn cost_of_page(conn: &Connection, state: TaskState, from: ListFrom) -> i32 {
        conn.flush_prepared_statement_cache();
        list(conn, "default", state, from, 50).unwrap();
        [
            ENDS_OF_IDS.to_owned(),
            list_walk_sql(state, from),
            count_up_to_sql(state),
            list_sql(state, from),
        ]
        .iter()
        .map(|sql| {
            conn.prepare_cached(sql)
                .unwrap()
                .get_status(rusqlite::StatementStatus::VmStep)
        })
        .sum()
    }

    #[test]
    fn a_page_costs_far_less_than_sorting_its_state() {
        let conn = tasks_shaped(300_000, SHAPES[0].1);
        // What a page cost when the state's tasks were all sorted by id:
        // the pending tasks' indexes, read whole.
        let sorted_whole = {
            let mut statement = conn
                .prepare(&list_sql(TaskState::Pending, ListFrom::After(0)))
                .unwrap();
            let mut rows = statement.query(params!["default", 0, 50]).unwrap();
            while rows.next().unwrap().is_some() {}
            drop(rows);
            statement.get_status(rusqlite::StatementStatus::VmStep)
        };
        for state in [
            TaskState::Pending,
            TaskState::Leased,
            TaskState::Done,
            TaskState::Dead,
            TaskState::Cancelled,
        ] {
            for from in [
                ListFrom::After(0),
                ListFrom::After(150_000),
                ListFrom::Before(i64::MAX),
                ListFrom::Before(150_000),
            ] {
                let page = cost_of_page(&conn, state, from);
                assert!(
                    page * 10 < sorted_whole,
                    "{state:?} from {from:?}: {page} steps, sorting the backlog {sorted_whole}"
                );
            }
        }
    }
}
