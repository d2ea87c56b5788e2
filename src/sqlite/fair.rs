//! Fair shares by key on SQLite: a fair queue's keys, their weights and
//! passes, and the claim that serves them in turn ([`claim_fair`]).
//!
//! A queue becomes fair with its first fairness key (a push that names one,
//! or a weight set). From then on every task of the queue not yet ended
//! carries a key, the empty key for the tasks pushed without one, and each
//! delivery goes to the active key with the smallest pass that has a ready
//! task (see [`fair_pass_after`]). A key is active while it has pending tasks
//! (ready, delayed, blocked): the claim that finds an active key with none
//! left makes it inactive, and whatever makes a task of an inactive key
//! pending again (a push, a retry, a snooze, a lease taken back, a dead task
//! retried) makes it active. A key's pending tasks may be capped
//! ([`check_key_room`]). The tables: `schema.rs`, migrations 14 and 16.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};

use super::claim::{take_one, ANY_EXPIRED};
use super::recover::take_back_leases;
use crate::error::{Error, ErrorKind, Result};
use crate::store::{fair_pass_after, DEFAULT_FAIR_WEIGHT, NO_FAIR_KEY};
use crate::task::Task;

/// Whether queue `?1` is fair: one lookup.
pub(super) const IS_FAIR: &str = "SELECT 1 FROM tq_fair_queues WHERE queue = ?1";

/// The smallest pass among the active keys of the queue of `k` (NULL when
/// none is active): where a key made active again starts, at the lowest.
macro_rules! line_start {
    () => {
        "(SELECT l.pass FROM tq_fair_keys l WHERE l.queue = k.queue AND l.active = 1
          ORDER BY l.pass LIMIT 1)"
    };
}

/// Makes key `?2` of queue `?1` active, with the default weight `?3` if
/// it has no row yet, starting no lower than the line; a key already
/// active is left as it is (no write).
pub(super) const ACTIVATE: &str =
    "INSERT INTO tq_fair_keys AS k (queue, fair_key, weight, pass, active)
    VALUES (?1, ?2, ?3,
            coalesce((SELECT pass FROM tq_fair_keys WHERE queue = ?1 AND active = 1
                      ORDER BY pass LIMIT 1), 0), 1)
    ON CONFLICT (queue, fair_key) DO UPDATE SET active = 1, pass = max(k.pass, excluded.pass)
    WHERE k.active = 0";

/// Makes active the key of task `?1`, if it has one and it is inactive:
/// lookups by primary key, and one in the line.
pub(super) const ACTIVATE_KEY_OF_TASK: &str = concat!(
    "UPDATE tq_fair_keys AS k SET active = 1, pass = max(k.pass, coalesce(",
    line_start!(),
    ", k.pass))
    WHERE k.queue = (SELECT queue FROM tq_tasks WHERE id = ?1)
      AND k.fair_key = (SELECT fair_key FROM tq_tasks WHERE id = ?1)
      AND k.active = 0"
);

/// Makes active the inactive keys of queue `?1` that have pending tasks:
/// one lookup per inactive key, for the calls that make many tasks
/// pending at once (retrying dead tasks, recovering leases).
pub(super) const ACTIVATE_PENDING_KEYS: &str = concat!(
    "UPDATE tq_fair_keys AS k SET active = 1, pass = max(k.pass, coalesce(",
    line_start!(),
    ", k.pass))
    WHERE k.queue = ?1 AND k.active = 0
      AND EXISTS (SELECT 1 FROM tq_tasks t
                  WHERE t.queue = ?1 AND t.fair_key = k.fair_key AND t.state IN (0, 4, 7))"
);

/// The best ready task of the key of row `k` whose limits let a delivery
/// start at `?2`, in claim order: one lookup in the index of keys.
macro_rules! key_ready {
    () => {
        "(SELECT t.id FROM tq_tasks t
          WHERE t.queue = k.queue AND t.fair_key = k.fair_key AND t.state = 0
            AND (t.not_after IS NULL OR t.not_after > ?2)
          ORDER BY t.priority DESC, t.run_at, t.id LIMIT 1)"
    };
}

/// The active key of queue `?1` first in line (key, weight, pass) and its
/// best ready task at `?2`, if it has one.
pub(super) const FIRST_TURN: &str = concat!(
    "SELECT k.fair_key, k.weight, k.pass, ",
    key_ready!(),
    " FROM tq_fair_keys k WHERE k.queue = ?1 AND k.active = 1
    ORDER BY k.pass, k.fair_key LIMIT 1"
);

/// The active key of queue `?1` next in line after pass `?3` and key `?4`,
/// and its best ready task at `?2`, if it has one.
pub(super) const NEXT_TURN: &str = concat!(
    "SELECT k.fair_key, k.weight, k.pass, ",
    key_ready!(),
    " FROM tq_fair_keys k WHERE k.queue = ?1 AND k.active = 1 AND (k.pass, k.fair_key) > (?3, ?4)
    ORDER BY k.pass, k.fair_key LIMIT 1"
);

/// Whether key `?2` of queue `?1` has a pending task (ready, delayed or
/// blocked): three lookups in the index of keys.
pub(super) const KEY_PENDING: &str = "SELECT 1 FROM tq_tasks
    WHERE queue = ?1 AND fair_key = ?2 AND state IN (0, 4, 7) LIMIT 1";

/// Sets the pass of key `?2` of queue `?1` to `?3`.
const SET_PASS: &str = "UPDATE tq_fair_keys SET pass = ?3 WHERE queue = ?1 AND fair_key = ?2";

/// Whether `queue` is fair ([`IS_FAIR`]).
pub(super) fn is_fair(conn: &Connection, queue: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(IS_FAIR)?
        .query_row([queue], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Makes `queue` fair, if it is not yet: its tasks not yet ended, pushed
/// before it was, join the empty key. Costs one pass over them, once.
pub(super) fn make_fair(conn: &Connection, queue: &str) -> Result<()> {
    if is_fair(conn, queue)? {
        return Ok(());
    }
    conn.prepare_cached("INSERT INTO tq_fair_queues (queue) VALUES (?1)")?
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
        None => Ok(is_fair(conn, queue)?.then(|| NO_FAIR_KEY.to_owned())),
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
    if is_fair(conn, queue)? {
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
    take_back_leases(conn, queue, "[]", now, keep_history)?;
    Ok(())
}

/// A key's turn: its best ready task, and the key as it stood.
struct Turn {
    task: i64,
    key: String,
    weight: f64,
    pass: f64,
}

/// An active key in line, and its best ready task if it has one.
type InLine = (String, f64, f64, Option<i64>);

/// The next turn of fair queue `queue` at `now`: the active key with the
/// smallest pass that has a ready task within its limits. The keys passed
/// over forfeit the turn: those with no pending task left become
/// inactive, those with only delayed or blocked tasks (a lookup each) move
/// up to the served key's pass.
fn next_turn(conn: &Connection, queue: &str, now: i64) -> Result<Option<Turn>> {
    let mut passed_over = Vec::new();
    let mut after: Option<(f64, String)> = None;
    let turn = loop {
        let in_line: Option<InLine> = match &after {
            None => conn
                .prepare_cached(FIRST_TURN)?
                .query_row(params![queue, now], in_line_from_row)
                .optional()?,
            Some((pass, key)) => conn
                .prepare_cached(NEXT_TURN)?
                .query_row(params![queue, now, pass, key], in_line_from_row)
                .optional()?,
        };
        let Some((key, weight, pass, ready)) = in_line else {
            return Ok(None);
        };
        if let Some(task) = ready {
            break Turn {
                task,
                key,
                weight,
                pass,
            };
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
        } else {
            passed_over.push(key.clone());
        }
        after = Some((pass, key));
    };
    for key in passed_over {
        conn.prepare_cached(SET_PASS)?
            .execute(params![queue, key, turn.pass])?;
    }
    Ok(Some(turn))
}

fn in_line_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<InLine> {
    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
}

/// Claims up to `max` tasks of fair queue `queue`, one turn at a time, so
/// that a claim of n tasks delivers what n claims of one would. Expired
/// leases were taken back before ([`take_back_expired`]).
pub(super) fn claim_fair(
    conn: &Connection,
    queue: &str,
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
        conn.prepare_cached(SET_PASS)?.execute(params![
            queue,
            turn.key,
            fair_pass_after(turn.pass, turn.weight)
        ])?;
        tasks.push(take_one(
            conn,
            turn.task,
            lease_expires_at,
            holder_id,
            None,
            now,
        )?);
    }
    Ok(tasks)
}

/// The cap on pending tasks in force for key `?2` of queue `?1`: the key's
/// own, else the queue's default for every key; NULL when neither is set.
/// Two lookups by primary key.
pub(super) const KEY_CAP: &str = "SELECT coalesce(
        (SELECT max_pending FROM tq_fair_keys
         WHERE queue = ?1 AND fair_key = ?2 AND max_pending > 0),
        (SELECT max_pending_per_key FROM tq_queues
         WHERE queue = ?1 AND max_pending_per_key > 0))";

/// Counts the pending tasks of key `?2` of queue `?1`, each pending
/// state's up to `?3` (-1: all), as the queue's cap counts its own
/// (`pending_up_to_sql`): one range of the index of keys per state.
pub(super) const KEY_PENDING_UP_TO: &str = "SELECT
    (SELECT count(*) FROM (SELECT 1 FROM tq_tasks
        WHERE queue = ?1 AND fair_key = ?2 AND state = 0 LIMIT ?3)) +
    (SELECT count(*) FROM (SELECT 1 FROM tq_tasks
        WHERE queue = ?1 AND fair_key = ?2 AND state = 4 LIMIT ?3)) +
    (SELECT count(*) FROM (SELECT 1 FROM tq_tasks
        WHERE queue = ?1 AND fair_key = ?2 AND state = 7 LIMIT ?3))";

fn to_sql_cap(cap: Option<u64>) -> Option<i64> {
    cap.map(|cap| i64::try_from(cap).unwrap_or(i64::MAX))
}

/// Sets or lifts the default cap on the pending tasks of every key of
/// `queue`; a cap makes the queue fair, so that every task has a key.
pub(super) fn set_max_pending_per_key(
    conn: &Connection,
    queue: &str,
    cap: Option<u64>,
) -> Result<()> {
    if cap.is_some() {
        make_fair(conn, queue)?;
    }
    conn.prepare_cached(
        "INSERT INTO tq_queues (queue, max_pending_per_key) VALUES (?1, ?2)
         ON CONFLICT (queue) DO UPDATE SET max_pending_per_key = excluded.max_pending_per_key",
    )?
    .execute(params![queue, to_sql_cap(cap)])?;
    Ok(())
}

/// The default cap on the pending tasks of every key of `queue`, if any.
pub(super) fn max_pending_per_key(conn: &Connection, queue: &str) -> Result<Option<u64>> {
    let cap: Option<i64> = conn
        .prepare_cached(
            "SELECT max_pending_per_key FROM tq_queues
             WHERE queue = ?1 AND max_pending_per_key > 0",
        )?
        .query_row([queue], |row| row.get(0))
        .optional()?;
    Ok(cap.map(|cap| cap as u64))
}

/// Sets key `key`'s own cap on its pending tasks in `queue`, which makes
/// the queue fair, or with `None` lifts it (the default applies again).
pub(super) fn set_key_max_pending(
    conn: &Connection,
    queue: &str,
    key: &str,
    cap: Option<u64>,
) -> Result<()> {
    if cap.is_none() {
        conn.prepare_cached(
            "UPDATE tq_fair_keys SET max_pending = NULL WHERE queue = ?1 AND fair_key = ?2",
        )?
        .execute(params![queue, key])?;
        return Ok(());
    }
    make_fair(conn, queue)?;
    conn.prepare_cached(
        "INSERT INTO tq_fair_keys (queue, fair_key, weight, pass, active, max_pending)
         VALUES (?1, ?2, ?3, 0, 0, ?4)
         ON CONFLICT (queue, fair_key) DO UPDATE SET max_pending = excluded.max_pending",
    )?
    .execute(params![queue, key, DEFAULT_FAIR_WEIGHT, to_sql_cap(cap)])?;
    Ok(())
}

/// The cap in force for key `key` of `queue` (see [`KEY_CAP`]).
pub(super) fn key_max_pending(conn: &Connection, queue: &str, key: &str) -> Result<Option<u64>> {
    let cap: Option<i64> = conn
        .prepare_cached(KEY_CAP)?
        .query_row(params![queue, key], |row| row.get(0))?;
    Ok(cap.map(|cap| cap as u64))
}

/// The pending tasks of key `key` of `queue`, each state's counted up to
/// `limit` (-1: all; see [`KEY_PENDING_UP_TO`]).
fn key_pending(conn: &Connection, queue: &str, key: &str, limit: i64) -> Result<u64> {
    let pending: i64 = conn
        .prepare_cached(KEY_PENDING_UP_TO)?
        .query_row(params![queue, key, limit], |row| row.get(0))?;
    Ok(pending as u64)
}

/// Refuses a push that took a key of fair queue `queue` over its cap:
/// `added` is how many tasks the push stored under each key, already
/// written (the caller's transaction rolls them back on the error). Each
/// key counts up to one more than its cap, so the check reads at most
/// that many index entries; the message's count is exact.
pub(super) fn check_key_room(
    conn: &Connection,
    queue: &str,
    added: &BTreeMap<&str, u64>,
) -> Result<()> {
    for (&key, &adding) in added {
        let Some(cap) = key_max_pending(conn, queue, key)? else {
            continue;
        };
        let limit = i64::try_from(cap.saturating_add(1)).unwrap_or(i64::MAX);
        if key_pending(conn, queue, key, limit)? <= cap {
            continue;
        }
        let pending = key_pending(conn, queue, key, -1)?.saturating_sub(adding);
        return Err(Error::new(
            ErrorKind::Full,
            format!(
                "fairness key '{key}' of queue '{queue}' is full: it holds {pending} pending \
                 tasks and its cap is {cap}, so the {adding} this push would add do not fit \
                 (nothing was pushed)"
            ),
        ));
    }
    Ok(())
}
