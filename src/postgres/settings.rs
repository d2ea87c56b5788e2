//! What an operator set for a queue: its pause, its concurrency limit,
//! its rate limit and its cap on pending tasks.

use std::sync::atomic::Ordering;

use postgres::Row;

use super::PostgresStore;
use crate::error::Result;
use crate::store::{pause_until, stored_pause, NEVER_USED};
use crate::task::{Pause, RateLimit};

/// The end of queue `$1`'s pause in force, if any.
const PAUSED_UNTIL: &str =
    "SELECT paused_until FROM @.queues WHERE queue = $1 AND paused_until > NOW_MS";

/// The rate limit of queue `$1`: as many claims as it has slots, and its
/// window (read by [`rate_limit_in`]).
const RATE_LIMIT: &str = "SELECT count(*), q.rate_period FROM @.queues q
    JOIN @.rate_slots s ON s.queue = q.queue
    WHERE q.queue = $1 AND q.rate_period IS NOT NULL
    GROUP BY q.rate_period";

/// The rate limit that [`RATE_LIMIT`] answered.
fn rate_limit_in(rows: &[Row]) -> Result<Option<RateLimit>> {
    rows.first()
        .map(|row| -> Result<RateLimit> {
            Ok(RateLimit {
                claims: u32::try_from(row.try_get::<_, i64>(0)?).unwrap_or(u32::MAX),
                per: std::time::Duration::from_millis(row.try_get::<_, i64>(1)?.max(0) as u64),
            })
        })
        .transpose()
}

impl PostgresStore {
    /// Pauses or resumes the queue (`Store::set_pause`).
    pub(super) fn write_pause(&self, pause: Option<Pause>) -> Result<()> {
        let until = pause.map(pause_until);
        self.write(|tx| {
            tx.execute(
                &self.sql(
                    "INSERT INTO @.queues (queue, paused_until) VALUES ($1, $2)
                     ON CONFLICT (queue) DO UPDATE SET paused_until = excluded.paused_until",
                ),
                &[&self.queue, &until],
            )?;
            if pause.is_none() {
                self.notify(tx, &self.queue)?;
            }
            Ok(())
        })
    }

    /// The queue's pause in force (`Store::pause`).
    pub(super) fn read_pause(&self) -> Result<Option<Pause>> {
        let sql = self.sql(PAUSED_UNTIL);
        self.read(|conn| {
            let rows = conn.query(&sql, &[&self.queue])?;
            Ok(rows
                .first()
                .map(|row| row.try_get::<_, i64>(0))
                .transpose()?
                .map(stored_pause))
        })
    }

    /// Sets the queue's concurrency limit (`Store::set_concurrency_limit`).
    pub(super) fn write_concurrency_limit(&self, limit: Option<u32>) -> Result<()> {
        let limit = limit.map(i64::from);
        self.write(|tx| {
            tx.execute(
                &self.sql(
                    "INSERT INTO @.queues (queue, max_leased) VALUES ($1, $2)
                     ON CONFLICT (queue) DO UPDATE SET max_leased = excluded.max_leased",
                ),
                &[&self.queue, &limit],
            )?;
            self.notify(tx, &self.queue)
        })?;
        self.limited.store(limit.is_some(), Ordering::Relaxed);
        Ok(())
    }

    /// The queue's concurrency limit (`Store::concurrency_limit`).
    pub(super) fn read_concurrency_limit(&self) -> Result<Option<u32>> {
        let sql = self.sql("SELECT max_leased FROM @.queues WHERE queue = $1");
        self.read(|conn| {
            let rows = conn.query(&sql, &[&self.queue])?;
            let limit: Option<i64> = rows
                .first()
                .map(|row| row.try_get(0))
                .transpose()?
                .flatten();
            Ok(limit.map(|limit| u32::try_from(limit).unwrap_or(u32::MAX)))
        })
    }

    /// Sets the queue's rate limit (`Store::set_rate_limit`).
    pub(super) fn write_rate_limit(&self, limit: Option<RateLimit>) -> Result<()> {
        let period = limit.map(|limit| limit.per.as_millis() as i64);
        self.write(|tx| {
            // Locks the settings, so that two calls at once see each other.
            tx.execute(
                &self.sql(
                    "INSERT INTO @.queues (queue) VALUES ($1)
                     ON CONFLICT (queue) DO UPDATE SET queue = excluded.queue",
                ),
                &[&self.queue],
            )?;
            let in_force = rate_limit_in(&tx.query(&self.sql(RATE_LIMIT), &[&self.queue])?)?;
            if in_force == limit {
                return Ok(());
            }
            tx.execute(
                &self.sql("UPDATE @.queues SET rate_period = $2 WHERE queue = $1"),
                &[&self.queue, &period],
            )?;
            // The most recent uses carry over to the new rate, so that
            // declaring a rate again grants no burst the old one refused.
            let mut newest_first: Vec<i64> = tx
                .query(
                    &self.sql("DELETE FROM @.rate_slots WHERE queue = $1 RETURNING used_at"),
                    &[&self.queue],
                )?
                .iter()
                .map(|row| row.try_get(0))
                .collect::<std::result::Result<_, _>>()?;
            newest_first.sort_unstable_by(|a, b| b.cmp(a));
            if let Some(limit) = limit {
                let claims = i64::from(limit.claims);
                tx.execute(
                    &self.sql(
                        "INSERT INTO @.rate_slots (queue, slot, used_at)
                         SELECT $1, slot, coalesce(($3::int8[])[slot + 1], $4)
                         FROM generate_series(0, $2::int8 - 1) AS slot",
                    ),
                    &[&self.queue, &claims, &newest_first, &NEVER_USED],
                )?;
            }
            self.notify(tx, &self.queue)
        })
    }

    /// The queue's rate limit (`Store::rate_limit`).
    pub(super) fn read_rate_limit(&self) -> Result<Option<RateLimit>> {
        let sql = self.sql(RATE_LIMIT);
        self.read(|conn| rate_limit_in(&conn.query(&sql, &[&self.queue])?))
    }

    /// Sets the queue's cap on pending tasks (`Store::set_max_pending`).
    pub(super) fn write_max_pending(&self, cap: Option<u64>) -> Result<()> {
        let cap = cap.map(|cap| i64::try_from(cap).unwrap_or(i64::MAX));
        self.write(|tx| {
            tx.execute(
                &self.sql(
                    "INSERT INTO @.queues (queue, max_pending) VALUES ($1, $2)
                     ON CONFLICT (queue) DO UPDATE SET max_pending = excluded.max_pending",
                ),
                &[&self.queue, &cap],
            )?;
            Ok(())
        })
    }

    /// The queue's cap on pending tasks (`Store::max_pending`).
    pub(super) fn read_max_pending(&self) -> Result<Option<u64>> {
        let sql = self.sql("SELECT max_pending FROM @.queues WHERE queue = $1 AND max_pending > 0");
        self.read(|conn| {
            let rows = conn.query(&sql, &[&self.queue])?;
            let cap: Option<i64> = rows.first().map(|row| row.try_get(0)).transpose()?;
            Ok(cap.map(|cap| cap as u64))
        })
    }
}
