//! Fair shares by key on SQLite: a fair queue's keys, their weights and
//! passes, and the claim that serves them in turn ([`claim_fair`]).
//!
//! A queue becomes fair with its first fairness key (a push that names one,
//! or a weight set). From then on every task of the queue not yet ended
//! carries a key, the empty key for the tasks pushed without one, and each
//! delivery goes to the active key with the smallest pass that has a ready
//! task, by [`fair_turn`]. A key is active while it has pending tasks
//! (ready, delayed, blocked): the claim that finds an active key with none
//! left makes it inactive, and whatever makes a task of an inactive key
//! pending again (a push, a retry, a snooze, a lease taken back, a dead task
//! retried) makes it active. The tables: `schema.rs`, migration 14.

use rusqlite::{params, Connection, OptionalExtension};

use super::claim::{take_one, ANY_EXPIRED};
use super::finish::{release_waiting, Ended};
use crate::error::Result;
use crate::store::{fair_turn, DEFAULT_FAIR_WEIGHT, NO_FAIR_KEY};
use crate::task::Task;

/// The clock of queue `?1` if it is fair: one lookup.
pub(super) const FAIR_CLOCK: &str = "SELECT clock FROM tq_fair_queues WHERE queue = ?1";

/// Makes key `?2` of queue `?1` active, with the default weight if it has
/// no row yet; a key already active is left as it is (no write).
pub(super) const ACTIVATE: &str = "INSERT INTO tq_fair_keys (queue, fair_key, weight, pass, active)
    VALUES (?1, ?2, ?3, 0, 1)
    ON CONFLICT (queue, fair_key) DO UPDATE SET active = 1 WHERE active = 0";

/// Makes active the key of task `?1`, if it has one and it is inactive:
/// two lookups by primary key.
pub(super) const ACTIVATE_KEY_OF_TASK: &str = "UPDATE tq_fair_keys SET active = 1
    WHERE queue = (SELECT queue FROM tq_tasks WHERE id = ?1)
      AND fair_key = (SELECT fair_key FROM tq_tasks WHERE id = ?1)
      AND active = 0";

/// Makes active the inactive keys of queue `?1` that have pending tasks:
/// one lookup per inactive key, for the calls that make many tasks
/// pending at once (retrying dead tasks, recovering leases).
pub(super) const ACTIVATE_PENDING_KEYS: &str = "UPDATE tq_fair_keys SET active = 1
    WHERE queue = ?1 AND active = 0
      AND EXISTS (SELECT 1 FROM tq_tasks
                  WHERE queue = ?1 AND fair_key = tq_fair_keys.fair_key AND state IN (0, 4, 7))";

/// The active key of queue `?1` first in line: key, weight, pass.
pub(super) const FIRST_KEY: &str = "SELECT fair_key, weight, pass FROM tq_fair_keys
    WHERE queue = ?1 AND active = 1 ORDER BY pass, fair_key LIMIT 1";

/// The active key of queue `?1` next in line after pass `?2` and key `?3`.
pub(super) const NEXT_KEY: &str = "SELECT fair_key, weight, pass FROM tq_fair_keys
    WHERE queue = ?1 AND active = 1 AND (pass, fair_key) > (?2, ?3)
    ORDER BY pass, fair_key LIMIT 1";

/// The best ready task of key `?2` of queue `?1` whose limits let a
/// delivery start at `?3`, in claim order: one lookup in the index of keys.
pub(super) const KEY_READY: &str = "SELECT id FROM tq_tasks
    WHERE queue = ?1 AND fair_key = ?2 AND state = 0
      AND (not_after IS NULL OR not_after > ?3)
    ORDER BY priority DESC, run_at, id LIMIT 1";

/// Whether key `?2` of queue `?1` has a pending task (ready, delayed or
/// blocked): three lookups in the index of keys.
pub(super) const KEY_PENDING: &str = "SELECT 1 FROM tq_tasks
    WHERE queue = ?1 AND fair_key = ?2 AND state IN (0, 4, 7) LIMIT 1";

/// Takes back the leases of queue `?1` expired by `?2`, as `recover` does:
/// ready again, or dead when that was the last attempt.
const TAKE_BACK_EXPIRED: &str = "UPDATE tq_tasks
    SET state = CASE WHEN attempts >= max_attempts THEN 3 ELSE 0 END,
        finished_at = CASE WHEN attempts >= max_attempts THEN ?2 END,
        last_error = 'the lease of delivery ' || attempts || ' expired before it finished',
        lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
    WHERE queue = ?1 AND state = 1 AND lease_expires_at <= ?2
    RETURNING id, state, fair_key";

/// The clock of `queue` if it is fair, `None` if it is not.
pub(super) fn clock(conn: &Connection, queue: &str) -> Result<Option<f64>> {
    Ok(conn
        .prepare_cached(FAIR_CLOCK)?
        .query_row([queue], |row| row.get(0))
        .optional()?)
}

/// Makes `queue` fair, if it is not yet: its tasks not yet ended, pushed
/// before it was, join the empty key. Costs one pass over them, once.
pub(super) fn make_fair(conn: &Connection, queue: &str) -> Result<()> {
    if clock(conn, queue)?.is_some() {
        return Ok(());
    }
    conn.prepare_cached("INSERT INTO tq_fair_queues (queue, clock) VALUES (?1, 0)")?
        .execute([queue])?;
    let joined = conn
        .prepare_cached(
            "UPDATE tq_tasks SET fair_key = ?2
             WHERE queue = ?1 AND fair_key IS NULL AND state IN (0, 1, 4, 6, 7)",
        )?
        .execute(params![queue, NO_FAIR_KEY])?;
    if joined > 0 {
        activate(conn, queue, NO_FAIR_KEY)?;
    }
    Ok(())
}

/// The key a task pushed to `queue` with fairness key `key` is stored
/// under: its own (the queue becomes fair), the empty key in a fair
/// queue, none in another.
pub(super) fn key_for_push(
    conn: &Connection,
    queue: &str,
    key: Option<&str>,
) -> Result<Option<String>> {
    match key {
        Some(key) => {
            make_fair(conn, queue)?;
            Ok(Some(key.to_owned()))
        }
        None => Ok(clock(conn, queue)?.map(|_| NO_FAIR_KEY.to_owned())),
    }
}

/// Makes key `key` of `queue` active (see [`ACTIVATE`]).
pub(super) fn activate(conn: &Connection, queue: &str, key: &str) -> Result<()> {
    conn.prepare_cached(ACTIVATE)?
        .execute(params![queue, key, DEFAULT_FAIR_WEIGHT])?;
    Ok(())
}

/// Makes active the key of task `id`, made pending again (see
/// [`ACTIVATE_KEY_OF_TASK`]).
pub(super) fn activate_key_of(conn: &Connection, id: i64) -> Result<()> {
    conn.prepare_cached(ACTIVATE_KEY_OF_TASK)?.execute([id])?;
    Ok(())
}

/// Makes active the inactive keys of `queue` with pending tasks, if it is
/// fair (see [`ACTIVATE_PENDING_KEYS`]).
pub(super) fn activate_pending_keys(conn: &Connection, queue: &str) -> Result<()> {
    if clock(conn, queue)?.is_some() {
        conn.prepare_cached(ACTIVATE_PENDING_KEYS)?
            .execute([queue])?;
    }
    Ok(())
}

/// Sets the weight of key `key` of `queue`, making the queue fair.
pub(super) fn set_weight(conn: &Connection, queue: &str, key: &str, weight: f64) -> Result<()> {
    make_fair(conn, queue)?;
    conn.prepare_cached(
        "INSERT INTO tq_fair_keys (queue, fair_key, weight, pass, active)
         VALUES (?1, ?2, ?3, 0, 0)
         ON CONFLICT (queue, fair_key) DO UPDATE SET weight = excluded.weight",
    )?
    .execute(params![queue, key, weight])?;
    Ok(())
}

/// The weight of key `key` of `queue`.
pub(super) fn weight(conn: &Connection, queue: &str, key: &str) -> Result<f64> {
    let weight: Option<f64> = conn
        .prepare_cached("SELECT weight FROM tq_fair_keys WHERE queue = ?1 AND fair_key = ?2")?
        .query_row(params![queue, key], |row| row.get(0))
        .optional()?;
    Ok(weight.unwrap_or(DEFAULT_FAIR_WEIGHT))
}

/// Takes back the expired leases of fair queue `queue` before its claim
/// picks: each task ready again rejoins its key's line (so that it is
/// delivered in its key's turn), each that used its last attempt ends dead.
pub(super) fn take_back_expired(
    conn: &Connection,
    queue: &str,
    now: i64,
    keep_history: bool,
) -> Result<()> {
    let any_expired = conn
        .prepare_cached(ANY_EXPIRED)?
        .query_row(params![queue, now], |_| Ok(()))
        .optional()?;
    if any_expired.is_none() {
        return Ok(());
    }
    let taken: Vec<(i64, i64, Option<String>)> = conn
        .prepare_cached(TAKE_BACK_EXPIRED)?
        .query_map(params![queue, now], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for (id, state, key) in taken {
        if state == 0 {
            activate(conn, queue, key.as_deref().unwrap_or(NO_FAIR_KEY))?;
        } else {
            release_waiting(conn, id, Ended::Dead, now, keep_history)?;
        }
    }
    Ok(())
}

/// A key's turn: its best ready task, and the key as it stood.
struct Turn {
    task: i64,
    key: String,
    weight: f64,
    pass: f64,
}

/// The next turn of fair queue `queue` at `now`: the active key with the
/// smallest pass that has a ready task within its limits. Keys passed
/// over that have no pending task left become inactive; those with only
/// delayed or blocked tasks are passed over, each costing a lookup.
fn next_turn(conn: &Connection, queue: &str, now: i64) -> Result<Option<Turn>> {
    let mut after: Option<(f64, String)> = None;
    loop {
        let key: Option<(String, f64, f64)> = match &after {
            None => conn
                .prepare_cached(FIRST_KEY)?
                .query_row([queue], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
                .optional()?,
            Some((pass, key)) => conn
                .prepare_cached(NEXT_KEY)?
                .query_row(params![queue, pass, key], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .optional()?,
        };
        let Some((key, weight, pass)) = key else {
            return Ok(None);
        };
        let ready: Option<i64> = conn
            .prepare_cached(KEY_READY)?
            .query_row(params![queue, key, now], |row| row.get(0))
            .optional()?;
        if let Some(task) = ready {
            return Ok(Some(Turn {
                task,
                key,
                weight,
                pass,
            }));
        }
        let pending = conn
            .prepare_cached(KEY_PENDING)?
            .query_row(params![queue, key], |_| Ok(()))
            .optional()?;
        if pending.is_none() {
            conn.prepare_cached(
                "UPDATE tq_fair_keys SET active = 0 WHERE queue = ?1 AND fair_key = ?2",
            )?
            .execute(params![queue, key])?;
        }
        after = Some((pass, key));
    }
}

/// Claims up to `max` tasks of fair queue `queue`, whose clock is
/// `clock`, one turn at a time, so that a claim of n tasks delivers what n
/// claims of one would. Expired leases were taken back before
/// ([`take_back_expired`]).
pub(super) fn claim_fair(
    conn: &Connection,
    queue: &str,
    mut clock: f64,
    max: usize,
    now: i64,
    lease_expires_at: i64,
    holder_id: i64,
) -> Result<Vec<Task>> {
    let mut tasks = Vec::new();
    while tasks.len() < max {
        let Some(turn) = next_turn(conn, queue, now)? else {
            break;
        };
        let (start, pass) = fair_turn(turn.pass, clock, turn.weight);
        conn.prepare_cached(
            "UPDATE tq_fair_keys SET pass = ?3 WHERE queue = ?1 AND fair_key = ?2",
        )?
        .execute(params![queue, turn.key, pass])?;
        clock = start;
        tasks.push(take_one(
            conn,
            turn.task,
            lease_expires_at,
            holder_id,
            None,
            now,
        )?);
    }
    if !tasks.is_empty() {
        conn.prepare_cached("UPDATE tq_fair_queues SET clock = ?2 WHERE queue = ?1")?
            .execute(params![queue, clock])?;
    }
    Ok(tasks)
}
