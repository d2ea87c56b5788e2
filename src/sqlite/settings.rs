//! What an operator set for a queue: its pause, its concurrency limit,
//! its rate limit and its cap on pending tasks.

use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use crate::error::Result;
use crate::store::{full, pause_until, pending_up_to_sql, NEVER_USED};
use crate::task::{Pause, RateLimit};

/// The end of queue `?1`'s pause in force at `?2`: one lookup in a table
/// of a row per queue an operator set.
pub(super) const PAUSED_UNTIL: &str =
    "SELECT paused_until FROM tq_queues WHERE queue = ?1 AND paused_until > ?2";

/// What an operator set for queue `?1`: its pause's end, its concurrency
/// limit and its rate limit's window.
pub(super) const SETTINGS: &str =
    "SELECT paused_until, max_leased, rate_period FROM tq_queues WHERE queue = ?1";

/// What an operator set for `queue` ([`SETTINGS`]), if anything.
pub(super) fn settings(conn: &Connection, queue: &str) -> Result<Option<Settings>> {
    Ok(conn
        .prepare_cached(SETTINGS)?
        .query_row([queue], |row| {
            Ok(Settings {
                paused_until: row.get(0)?,
                max_leased: row.get(1)?,
                rate_period: row.get(2)?,
            })
        })
        .optional()?)
}

/// What an operator set for a queue, as stored; `None` for what is not set.
#[derive(Default)]
pub(super) struct Settings {
    /// When its pause ends, in ms (`UNTIL_RESUMED` for a pause without end).
    pub(super) paused_until: Option<i64>,
    /// Its concurrency limit: the most leases live at once.
    pub(super) max_leased: Option<i64>,
    /// The window of its rate limit, in ms.
    pub(super) rate_period: Option<i64>,
}

/// When the pause of `queue` in force at `now` ends, if it is paused.
pub(super) fn paused_until(conn: &Connection, queue: &str, now: i64) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached(PAUSED_UNTIL)?
        .query_row(params![queue, now], |row| row.get(0))
        .optional()?)
}

/// The rate limit of `queue`: its window, and as many claims as it has slots.
pub(super) fn rate_limit_of(conn: &Connection, queue: &str) -> Result<Option<RateLimit>> {
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

/// Sets or lifts the pause of `queue` (see `Store::set_pause`).
pub(super) fn set_pause(conn: &Connection, queue: &str, pause: Option<Pause>) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO tq_queues (queue, paused_until) VALUES (?1, ?2)
                 ON CONFLICT (queue) DO UPDATE SET paused_until = excluded.paused_until",
    )?
    .execute(params![queue, pause.map(pause_until)])?;
    Ok(())
}

/// Sets or lifts the concurrency limit of `queue` (see
/// `Store::set_concurrency_limit`).
pub(super) fn set_concurrency_limit(
    conn: &Connection,
    queue: &str,
    limit: Option<u32>,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO tq_queues (queue, max_leased) VALUES (?1, ?2)
                 ON CONFLICT (queue) DO UPDATE SET max_leased = excluded.max_leased",
    )?
    .execute(params![queue, limit])?;
    Ok(())
}

/// The concurrency limit of `queue`, if it has one.
pub(super) fn concurrency_limit(conn: &Connection, queue: &str) -> Result<Option<u32>> {
    let limit: Option<Option<u32>> = conn
        .prepare_cached("SELECT max_leased FROM tq_queues WHERE queue = ?1")?
        .query_row([queue], |row| row.get(0))
        .optional()?;
    Ok(limit.flatten())
}

/// Sets or lifts the rate limit of `queue` (see `Store::set_rate_limit`);
/// says whether it changed.
pub(super) fn set_rate_limit(
    conn: &Connection,
    queue: &str,
    limit: Option<RateLimit>,
) -> Result<bool> {
    if rate_limit_of(conn, queue)? == limit {
        return Ok(false);
    }
    let period = limit.map(|limit| limit.per.as_millis() as i64);
    conn.prepare_cached(
        "INSERT INTO tq_queues (queue, rate_period) VALUES (?1, ?2)
                 ON CONFLICT (queue) DO UPDATE SET rate_period = excluded.rate_period",
    )?
    .execute(params![queue, period])?;
    // The most recent uses carry over to the new rate, so that
    // declaring a rate again grants no burst the old one refused.
    let uses: Vec<i64> = conn
        .prepare_cached("DELETE FROM tq_rate_slots WHERE queue = ?1 RETURNING used_at")?
        .query_map([queue], |row| row.get(0))?
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
            insert.execute(params![queue, slot, used_at])?;
        }
    }
    Ok(true)
}

/// The cap on pending tasks of queue `?1`, when it has one: one lookup in
/// the table of queues, which is all an uncapped queue's push pays.
pub(super) const MAX_PENDING: &str =
    "SELECT max_pending FROM tq_queues WHERE queue = ?1 AND max_pending > 0";

/// The cap on pending tasks of `queue`, if it has one.
pub(super) fn max_pending(conn: &Connection, queue: &str) -> Result<Option<u64>> {
    let cap: Option<i64> = conn
        .prepare_cached(MAX_PENDING)?
        .query_row([queue], |row| row.get(0))
        .optional()?;
    Ok(cap.map(|cap| cap as u64))
}

/// Sets or lifts the cap on pending tasks of `queue` (see
/// `Store::set_max_pending`).
pub(super) fn set_max_pending(conn: &Connection, queue: &str, cap: Option<u64>) -> Result<()> {
    let cap = cap.map(|cap| i64::try_from(cap).unwrap_or(i64::MAX));
    conn.prepare_cached(
        "INSERT INTO tq_queues (queue, max_pending) VALUES (?1, ?2)
                 ON CONFLICT (queue) DO UPDATE SET max_pending = excluded.max_pending",
    )?
    .execute(params![queue, cap])?;
    Ok(())
}

/// The room a push must check before storing tasks in a queue: its cap, and
/// its pending tasks counted up to the cap.
pub(super) struct Room {
    cap: u64,
    pending: u64,
}

impl Room {
    /// The room of `queue`, or `None` when it has no cap. Read inside the
    /// push's write transaction, so that it stays exact until the commit.
    pub(super) fn of(conn: &Connection, queue: &str) -> Result<Option<Room>> {
        let Some(cap) = max_pending(conn, queue)? else {
            return Ok(None);
        };
        let limit = i64::try_from(cap).unwrap_or(i64::MAX);
        let pending: i64 = conn
            .prepare_cached(&pending_up_to_sql("tq_tasks", '?'))?
            .query_row(params![queue, limit], |row| row.get(0))?;
        Ok(Some(Room {
            cap,
            pending: pending as u64,
        }))
    }

    /// Refuses the `added` pending tasks just stored in `queue` when they do
    /// not fit (the caller's transaction then rolls them back). The count
    /// in the message is exact: it is read again without the cap (a limit
    /// of -1), less the tasks added.
    pub(super) fn check(&self, conn: &Connection, queue: &str, added: u64) -> Result<()> {
        if added == 0 || self.pending.saturating_add(added) <= self.cap {
            return Ok(());
        }
        let pending: i64 = conn
            .prepare_cached(&pending_up_to_sql("tq_tasks", '?'))?
            .query_row(params![queue, -1], |row| row.get(0))?;
        Err(full(
            queue,
            self.cap,
            (pending as u64).saturating_sub(added),
            added,
        ))
    }
}
