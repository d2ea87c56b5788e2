//! Claiming: how a pull picks the best ready tasks of a queue and takes
//! their lease, within the queue's concurrency and rate limits; and how
//! long until a task can be claimed. This is where a task is claimed
//! ([`CLAIM`]).
//!
//! Design: `docs/internals.md`, "PostgreSQL task statements".

use std::sync::atomic::Ordering;

use postgres::Row;

use super::fair::Round;
use super::list::count32;
use super::pool::Params;
use super::PostgresStore;
use crate::error::Result;
use crate::store::sort_claimed;
use crate::task::{Receipt, Task};

/// How long a pull that found its queue at its concurrency limit posts
/// that it waits for a slot ([`WANT_SLOT`]), in ms.
const SLOT_WANTED_FOR: i64 = 10_000;

/// How long before a posted want of a slot lapses a pull waiting at the
/// concurrency limit looks again, even when no finish notified it, and so
/// posts its want again (see [`NEXT_CLAIMABLE`]), in ms. A notification
/// lost after its finish committed costs a waiter at most the rest.
const SLOT_WANT_RENEWED_BEFORE_END: i64 = SLOT_WANTED_FOR / 2;

/// The live leases of queue `$1`, which hold a slot of its concurrency
/// limit (expired ones hold none): two ranges of partial indexes.
macro_rules! live_leases {
    () => {
        "((SELECT count(*) FROM @.tasks WHERE queue = $1 AND state = 1 AND lease_expires_at > NOW_MS)
          + (SELECT count(*) FROM @.tasks WHERE queue = $1 AND state = 6 AND lease_expires_at > NOW_MS))"
    };
}

/// Claims up to `$2` tasks of queue `$1` for `$3` ms for holder `$4`, in
/// one statement. The candidates, each arm skipping rows others have
/// locked, are: the ready tasks first in claim order, the leased tasks
/// whose lease expired (so that a task whose holder vanished keeps its
/// place in line), and the waiting tasks now due. The best `$2` of them are
/// taken, except that an expired delivery that was its task's last attempt
/// is buried as dead instead (those rows come back with a NULL token); the
/// due tasks not taken become ready. A paused queue has no candidates;
/// nor has a queue with a concurrency or rate limit unless `$5` (the claim
/// is already bounded by its slots: see [`LOCK_SLOTS`]), which then
/// answers one row with a NULL id instead. With `$6`, its settings locked,
/// it takes no more than its concurrency limit's slots left: the limit
/// less the live leases (expired ones hold no slot), counted in the
/// claim's own snapshot, which the lock's statement before it makes see
/// the leases of the claim that held the lock last. It also ends the tasks
/// of every queue cancelled while leased whose lease has run out (kept as
/// history with `$7`, else deleted), as `Store::claim` says: the triggers
/// release what waits for them, which the next claim can take. Rows are
/// changed by id, looked up in the primary key (`= ANY (ARRAY(...))`), so
/// that the plan, made once for any values (see `pool.rs`), never scans
/// the table. First, it ends as dead the pending tasks whose expiry or
/// deadline has passed (at most `SWEEP_BATCH` of `store.rs`, found in
/// the index of limits, which is empty for a queue whose tasks have none),
/// for the reason `limit_reason` in `store.rs` gives; no candidate is one
/// whose next delivery may no longer start, so one left past the bound is
/// ended by a later claim, never delivered. A delivery whose lease expired
/// after its deadline passed is buried as a last attempt is, for that
/// reason. A fair queue (see `fair.rs`) has no candidates either unless
/// `$8` (the claim serves its keys in turn, narrowing the candidates:
/// `fair::claim_narrowed`): it answers one row with a NULL id and 1 for
/// attempts instead (a limited queue's has 0).
pub(super) const CLAIM: &str = "WITH clock AS (SELECT NOW_MS AS now),
    past AS (
        SELECT id FROM @.tasks
        WHERE queue = $1 AND not_after <= (SELECT now FROM clock) AND not_after IS NOT NULL
          AND (state = 0 OR state = 4)
        ORDER BY not_after LIMIT 1000 FOR UPDATE SKIP LOCKED),
    past_ended AS (
        UPDATE @.tasks t
        SET state = 3, finished_at = clock.now,
            last_error = CASE WHEN t.attempts = 0 AND t.expires_at <= clock.now THEN 'expired'
                              ELSE 'deadline passed' END
        FROM clock WHERE t.id = ANY (ARRAY(SELECT id FROM past))),
    cancels_over AS (
        SELECT id FROM @.tasks WHERE state = 6 AND lease_expires_at <= (SELECT now FROM clock)
        FOR UPDATE SKIP LOCKED),
    cancels_kept AS (
        -- last_error is set so that the trigger of attempts sees the end.
        UPDATE @.tasks t
        SET state = 5, finished_at = clock.now, last_error = t.last_error,
            lease_token = NULL, lease_expires_at = NULL,
            holder_id = NULL, unique_key = NULL, unique_until = NULL
        FROM clock WHERE $7::bool AND t.id = ANY (ARRAY(SELECT id FROM cancels_over))),
    cancels_deleted AS (
        DELETE FROM @.tasks t
        WHERE NOT $7::bool AND t.id = ANY (ARRAY(SELECT id FROM cancels_over))),
    room AS (
        SELECT CASE WHEN $6::bool THEN greatest(least($2::int8,
                   (SELECT max_leased FROM @.queues WHERE queue = $1)
                   - (SELECT count(*) FROM @.tasks WHERE queue = $1 AND state = 1
                        AND lease_expires_at > (SELECT now FROM clock))
                   - (SELECT count(*) FROM @.tasks WHERE queue = $1 AND state = 6
                        AND lease_expires_at > (SELECT now FROM clock))), 0)
               ELSE $2::int8 END AS n),
    settings AS (
        SELECT coalesce(paused_until > (SELECT now FROM clock), false) AS paused,
               (max_leased IS NOT NULL OR rate_period IS NOT NULL) AND NOT $5::bool AS unbounded
        FROM @.queues WHERE queue = $1),
    unfair AS (
        SELECT NOT $8::bool AND EXISTS (SELECT 1 FROM @.fair_queues WHERE queue = $1) AS unfair),
    open AS (
        SELECT NOT EXISTS (SELECT 1 FROM settings WHERE paused OR unbounded)
               AND NOT (SELECT unfair FROM unfair) AS open),
    ready AS (
        SELECT id, priority, run_at, false AS last FROM @.tasks
        WHERE queue = $1 AND state = 0 AND (SELECT open FROM open)
          AND (not_after IS NULL OR not_after > (SELECT now FROM clock))
        ORDER BY priority DESC, run_at, id LIMIT (SELECT n FROM room) FOR UPDATE SKIP LOCKED),
    expired AS (
        SELECT id, priority, run_at,
               attempts >= max_attempts
                   OR coalesce(deadline <= (SELECT now FROM clock), false) AS last
        FROM @.tasks
        WHERE queue = $1 AND state = 1 AND lease_expires_at <= (SELECT now FROM clock)
          AND (SELECT open FROM open)
        ORDER BY priority DESC, run_at, id LIMIT (SELECT n FROM room) FOR UPDATE SKIP LOCKED),
    due AS (
        SELECT id, priority, run_at, false AS last FROM @.tasks
        WHERE queue = $1 AND state = 4 AND run_at <= (SELECT now FROM clock)
          AND (SELECT open FROM open)
          AND (not_after IS NULL OR not_after > (SELECT now FROM clock))
        ORDER BY run_at LIMIT greatest((SELECT n FROM room), 1000) FOR UPDATE SKIP LOCKED),
    picked AS (
        SELECT * FROM (SELECT * FROM ready UNION ALL SELECT * FROM expired
                       UNION ALL SELECT * FROM due) c
        ORDER BY priority DESC, run_at, id LIMIT (SELECT n FROM room)),
    promoted AS (
        UPDATE @.tasks t SET state = 0
        WHERE t.id = ANY (ARRAY(SELECT id FROM due WHERE id NOT IN (SELECT id FROM picked)))),
    buried AS (
        UPDATE @.tasks t
        SET state = 3, finished_at = clock.now, lease_token = NULL, lease_expires_at = NULL,
            holder_id = NULL,
            last_error = CASE WHEN t.deadline <= clock.now THEN 'deadline passed'
                ELSE 'the lease of delivery ' || t.attempts || ' expired before it finished' END
        FROM clock WHERE t.id = ANY (ARRAY(SELECT id FROM picked WHERE last))
        RETURNING t.id),
    taken AS (
        UPDATE @.tasks t
        SET state = 1, attempts = t.attempts + 1, lease_token = RANDOM_TOKEN,
            lease_expires_at = clock.now + $3::int8, holder_id = $4::int4, claimed_at = clock.now,
            not_after = t.deadline,
            last_error = CASE WHEN t.state = 1 THEN 'the lease of the previous delivery expired'
                              ELSE t.last_error END
        FROM clock WHERE t.id = ANY (ARRAY(SELECT id FROM picked WHERE NOT last))
        RETURNING t.id, t.lease_token, t.attempts, t.max_attempts, t.priority, t.run_at,
                  t.last_error, t.payload, t.parents)
    SELECT id, lease_token, attempts, max_attempts, priority, run_at, last_error, payload, parents
    FROM taken
    UNION ALL SELECT id, NULL, 0, 0, 0, 0, NULL, NULL, NULL FROM buried
    UNION ALL SELECT NULL, NULL, 0, 0, 0, 0, NULL, NULL, NULL FROM settings
        WHERE unbounded AND NOT paused
    UNION ALL SELECT NULL, NULL, 1, 0, 0, 0, NULL, NULL, NULL FROM unfair
        WHERE unfair AND NOT EXISTS (SELECT 1 FROM settings WHERE paused)";

/// Locks the settings of queue `$1`, which has a concurrency or rate
/// limit, and answers them. Claims of a limited queue take this lock one
/// after another, each in a statement of its own, so that the count of
/// live leases in the claim that follows it ([`CLAIM`] with `$6`) sees the
/// leases the claim before took (a statement's snapshot is taken when it
/// starts).
pub(super) const LOCK_SLOTS: &str =
    "SELECT max_leased, rate_period FROM @.queues WHERE queue = $1 FOR UPDATE";

/// Posts, for `$2` ms, that a pull waits for a slot of queue `$1`'s
/// concurrency limit, if the queue is at its limit; answers a row if so.
/// Run by a claim that took nothing with the settings locked
/// ([`LOCK_SLOTS`]).
const WANT_SLOT: &str = concat!(
    "UPDATE @.queues SET slots_wanted_until = NOW_MS + $2
     WHERE queue = $1 AND max_leased <= ",
    live_leases!(),
    " RETURNING 1"
);

/// Notifies channel `$1` with queue `$2` if a pull waits for a slot of the
/// queue's concurrency limit ([`WANT_SLOT`]). Run in a transaction of its
/// own once the call that freed a slot committed: it then sees any want
/// posted by a claim that could not see that slot free, and it writes
/// nothing (so waits for no flush) when no one waits.
pub(super) const NOTIFY_IF_SLOT_WANTED: &str = "SELECT pg_notify($1, $2)::text FROM @.queues
    WHERE queue = $2 AND slots_wanted_until > NOW_MS";

/// How many of queue `$1`'s rate slots are free (last used `$2` ms ago or
/// more), counting up to `$3`.
const FREE_RATE_SLOTS: &str = "SELECT count(*) FROM (SELECT 1 FROM @.rate_slots
    WHERE queue = $1 AND used_at <= NOW_MS - $2 LIMIT $3) free";

/// Marks `$3` of queue `$1`'s free rate slots (see [`FREE_RATE_SLOTS`])
/// used now.
const USE_RATE_SLOTS: &str = "UPDATE @.rate_slots SET used_at = NOW_MS
    WHERE queue = $1 AND slot IN (SELECT slot FROM @.rate_slots
                                  WHERE queue = $1 AND used_at <= NOW_MS - $2
                                  ORDER BY used_at LIMIT $3)";

/// The live leases of queue `$1`, which hold a slot of its concurrency limit.
pub(super) const LIVE_LEASES: &str = concat!("SELECT ", live_leases!());

/// A lease token: 64 random bits, as in SQLite, so that a receipt never
/// matches a delivery it was not drawn for (two draws of 32 bits: one
/// `random()` has fewer than 64).
pub(super) const RANDOM_TOKEN: &str = "((floor(random() * 4294967296)::int8 << 32)
    | floor(random() * 4294967296)::int8)";

/// How long until a task of queue `$1` can be claimed (see
/// `Store::next_claimable`): 0 when one is ready; while the queue is
/// paused, until its pause ends (NULL: until resumed); under a rate limit,
/// not before a slot is free; at its concurrency limit, not before the
/// first live lease expires (a finish notifies instead), nor later than
/// `$2` ms before the want of a slot posted lapses (at once when none is),
/// so that a waiting pull claims, and so posts its want, again.
const NEXT_CLAIMABLE: &str = concat!(
    "SELECT CASE
        WHEN p.until IS NULL THEN greatest(c.at, (
            SELECT min(s.used_at + q.rate_period) FROM @.queues q
            JOIN @.rate_slots s ON s.queue = q.queue
            WHERE q.queue = $1 AND q.rate_period IS NOT NULL AND c.at IS NOT NULL), (
            SELECT least(
                (SELECT min(lease_expires_at) FROM @.tasks
                 WHERE queue = $1 AND state = 1 AND lease_expires_at > NOW_MS),
                (SELECT min(lease_expires_at) FROM @.tasks
                 WHERE queue = $1 AND state = 6 AND lease_expires_at > NOW_MS),
                coalesce(q.slots_wanted_until, 0) - $2)
            FROM @.queues q
            WHERE q.queue = $1 AND c.at IS NOT NULL AND q.max_leased <= ",
    live_leases!(),
    "))
        WHEN p.until < 9223372036854775807 THEN p.until
    END - NOW_MS
    FROM (SELECT (SELECT paused_until FROM @.queues WHERE queue = $1 AND paused_until > NOW_MS)
          AS until) p,
         (SELECT least(
            (SELECT NOW_MS WHERE EXISTS (SELECT 1 FROM @.tasks WHERE queue = $1 AND state = 0)),
            (SELECT min(run_at) FROM @.tasks WHERE queue = $1 AND state = 4),
            (SELECT min(lease_expires_at) FROM @.tasks WHERE queue = $1 AND state = 1),
            (SELECT min(lease_expires_at) FROM @.tasks WHERE queue = $1 AND state = 6)) AS at) c"
);

/// A claimed task, or `None` for a delivery buried as dead (NULL token).
pub(super) fn task_from_row(row: &Row) -> Result<Option<Task>> {
    let Some(token) = row.try_get::<_, Option<i64>>(1)? else {
        return Ok(None);
    };
    Ok(Some(Task {
        receipt: Receipt::new(row.try_get(0)?, token),
        attempts: count32(row, 2)?,
        max_attempts: count32(row, 3)?,
        priority: row.try_get(4)?,
        run_at_unix_ms: row.try_get(5)?,
        last_error: row.try_get(6)?,
        payload: row.try_get(7)?,
        parents: row.try_get::<_, Option<Vec<i64>>>(8)?.unwrap_or_default(),
    }))
}

impl PostgresStore {
    /// Runs claims made at once (their size and lease), one statement for
    /// those of each lease, each run by `run` (in a `transaction` or not:
    /// see `claim_with`); each claim gets the best tasks left by the claims
    /// before it.
    pub(super) fn claim_together(
        &self,
        mut run: impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        transaction: bool,
        claims: &[(usize, i64)],
    ) -> Vec<Result<Vec<Task>>> {
        let mut results: Vec<Option<Result<Vec<Task>>>> = claims.iter().map(|_| None).collect();
        for (first, &(_, lease)) in claims.iter().enumerate() {
            if results[first].is_some() {
                continue;
            }
            let same_lease: Vec<usize> = (first..claims.len())
                .filter(|&i| claims[i].1 == lease)
                .collect();
            let total = same_lease.iter().map(|&i| claims[i].0).sum();
            match self.claim_with(&mut run, transaction, total, lease) {
                Ok(tasks) => {
                    let mut tasks = tasks.into_iter();
                    for &i in &same_lease {
                        results[i] = Some(Ok(tasks.by_ref().take(claims[i].0).collect()));
                    }
                }
                Err(err) => {
                    for &i in &same_lease {
                        results[i] = Some(Err(err.clone()));
                    }
                }
            }
        }
        results
            .into_iter()
            .map(|result| result.expect("every claim has a lease"))
            .collect()
    }

    /// Claims up to `max` tasks for this process's holder, each round of
    /// [`CLAIM`] run by `run` (in a `transaction` of the caller's, or each
    /// statement in one of its own). A limited queue, or a fair one, is
    /// claimed from in a transaction: the caller's, or one of its own.
    fn claim_with(
        &self,
        mut run: impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        transaction: bool,
        max: usize,
        lease: i64,
    ) -> Result<Vec<Task>> {
        let holder = self.listener.holder(self.wait)?;
        // A handle that saw its queue limited or fair claims so at once,
        // rather than learn it again from a round of the claim.
        loop {
            if self.limited.load(Ordering::Relaxed) {
                return self.claim_from_limited(&mut run, transaction, max, lease, holder);
            }
            if self.seen_fair() {
                let (tasks, limited) = if transaction {
                    self.claim_turns(&mut run, max, (lease, holder), (false, false))?
                } else {
                    self.write(|tx| {
                        let mut run = |sql: &str, params: Params<'_>| tx.query(sql, params);
                        self.claim_turns(&mut run, max, (lease, holder), (false, false))
                    })?
                };
                if !limited || !tasks.is_empty() {
                    return Ok(tasks);
                }
                continue;
            }
            if let Some(tasks) = self.claim_rounds(&mut run, max, lease, holder)? {
                return Ok(tasks);
            }
        }
    }

    /// Claims up to `max` tasks of a queue neither limited nor fair, each
    /// round of [`CLAIM`] run by `run`; `None` when the queue was found
    /// limited or fair (marked so, the claim is to be made again).
    fn claim_rounds(
        &self,
        mut run: impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        max: usize,
        lease: i64,
        holder: i32,
    ) -> Result<Option<Vec<Task>>> {
        let sql = self.sql(CLAIM);
        let max = max.min(i64::MAX as usize) as i64;
        let mut tasks = Vec::new();
        // A round that claimed nothing but buried some expired last
        // attempts goes again: they have left the candidates, so it ends.
        // One that claimed a task ends the claim, so that each round may
        // be a transaction of its own without tasks claimed and then lost
        // to a later round's error.
        while tasks.is_empty() {
            let rows = run(
                &sql,
                &[
                    &self.queue,
                    &max,
                    &lease,
                    &holder,
                    &false,
                    &false,
                    &self.keep_history,
                    &false,
                ],
            )?;
            let round = Round::from_rows(&rows)?;
            if round.limited || round.fair {
                self.limited.fetch_or(round.limited, Ordering::Relaxed);
                self.fair.fetch_or(round.fair, Ordering::Relaxed);
                return Ok(None);
            }
            tasks.extend(round.tasks);
            if round.buried == 0 {
                break;
            }
        }
        sort_claimed(&mut tasks);
        Ok(Some(tasks))
    }

    /// Claims up to `max` tasks of this limited queue, whose slots are taken
    /// under a lock that lasts until the end of a transaction: the caller's
    /// (`transaction`, with `run` in it), or one of its own.
    fn claim_from_limited(
        &self,
        run: impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        transaction: bool,
        max: usize,
        lease: i64,
        holder: i32,
    ) -> Result<Vec<Task>> {
        if transaction {
            return Ok(self.claim_limited(run, max, lease, holder)?.0);
        }
        let claim = || {
            self.write(|tx| {
                self.claim_limited(|sql, params| tx.query(sql, params), max, lease, holder)
            })
        };
        let (tasks, wanted) = claim()?;
        if wanted {
            // A finish that committed after this claim counted the
            // leases looked for a want before this one was posted, and
            // told no one: look once more, now that it is posted.
            return Ok(claim()?.0);
        }
        Ok(tasks)
    }

    /// Claims up to `max` tasks of this limited queue, with `run` in a
    /// transaction: locks its settings ([`LOCK_SLOTS`]), counts its free
    /// rate slots, claims no more than those and its concurrency limit's
    /// slots left, and marks the rate slots it used. Having claimed
    /// nothing at its concurrency limit, it posts that a pull waits for a
    /// slot ([`WANT_SLOT`]), and says so.
    fn claim_limited(
        &self,
        mut run: impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        max: usize,
        lease: i64,
        holder: i32,
    ) -> Result<(Vec<Task>, bool)> {
        let (limit, rate_period) = self.lock_limits(&mut run)?;
        let mut room = max;
        if let Some(period) = rate_period {
            room = room.min(self.free_rate_slots(&mut run, period, room)?);
        }
        let count_leases = limit.is_some();
        let tasks = if self.seen_fair() {
            self.claim_turns(&mut run, room, (lease, holder), (true, count_leases))?
                .0
        } else {
            self.limited_rounds(&mut run, room, (lease, holder), count_leases)?
        };
        if let (Some(period), false) = (rate_period, tasks.is_empty()) {
            let used = tasks.len() as i64;
            run(&self.sql(USE_RATE_SLOTS), &[&self.queue, &period, &used])?;
        }
        let wanted = tasks.is_empty()
            && count_leases
            && !run(&self.sql(WANT_SLOT), &[&self.queue, &SLOT_WANTED_FOR])?.is_empty();
        Ok((tasks, wanted))
    }

    /// Claims up to `room` tasks of this limited queue, its settings
    /// locked, each round of [`CLAIM`] run by `run`; a queue found fair is
    /// claimed from as fair ones are.
    fn limited_rounds(
        &self,
        run: &mut impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        room: usize,
        (lease, holder): (i64, i32),
        count_leases: bool,
    ) -> Result<Vec<Task>> {
        let sql = self.sql(CLAIM);
        let room = room.min(i64::MAX as usize) as i64;
        let mut tasks = Vec::new();
        // As in `claim_rounds`, bounded by the slots: no limited marker
        // comes back.
        while room > 0 && tasks.is_empty() {
            let rows = run(
                &sql,
                &[
                    &self.queue,
                    &room,
                    &lease,
                    &holder,
                    &true,
                    &count_leases,
                    &self.keep_history,
                    &false,
                ],
            )?;
            let round = Round::from_rows(&rows)?;
            if round.fair {
                self.fair.store(true, Ordering::Relaxed);
                let room = room as usize;
                return Ok(self
                    .claim_turns(run, room, (lease, holder), (true, count_leases))?
                    .0);
            }
            tasks.extend(round.tasks);
            if round.buried == 0 {
                break;
            }
        }
        sort_claimed(&mut tasks);
        Ok(tasks)
    }

    /// Locks this queue's settings ([`LOCK_SLOTS`]) until the transaction
    /// ends, and answers its concurrency limit and its rate limit's
    /// window. Limits found lifted are remembered, so that later claims
    /// take no lock.
    fn lock_limits(
        &self,
        run: &mut impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
    ) -> Result<(Option<i64>, Option<i64>)> {
        let settings = run(&self.sql(LOCK_SLOTS), &[&self.queue])?;
        let (limit, rate_period): (Option<i64>, Option<i64>) = match settings.first() {
            Some(row) => (row.try_get(0)?, row.try_get(1)?),
            // The settings were removed meanwhile.
            None => (None, None),
        };
        if limit.is_none() && rate_period.is_none() {
            // The limits were lifted: later claims need no lock.
            self.limited.store(false, Ordering::Relaxed);
        }
        Ok((limit, rate_period))
    }

    /// How many of this queue's rate slots are free in a window of
    /// `period` ms, counted up to `most` (no claim takes more).
    fn free_rate_slots(
        &self,
        run: &mut impl FnMut(&str, Params<'_>) -> Result<Vec<Row>>,
        period: i64,
        most: usize,
    ) -> Result<usize> {
        let most = most.min(i64::MAX as usize) as i64;
        let free: i64 = run(&self.sql(FREE_RATE_SLOTS), &[&self.queue, &period, &most])?
            .first()
            .map(|row| row.try_get(0))
            .transpose()?
            .unwrap_or(0);
        Ok(free.max(0) as usize)
    }

    /// Wakes the pulls waiting for a slot of this limited queue, in every
    /// process, if one waits ([`NOTIFY_IF_SLOT_WANTED`]), once a call that
    /// freed a slot committed: one round trip, made only by a handle that
    /// saw its queue limited. Its error is not the call's, which has
    /// committed: a waiter it misses looks again before its want lapses
    /// ([`SLOT_WANT_RENEWED_BEFORE_END`]).
    pub(super) fn slots_freed(&self) {
        if self.limited.load(Ordering::Relaxed) {
            let _ = self.write_one(
                &self.sql(NOTIFY_IF_SLOT_WANTED),
                &[&self.channel, &self.queue],
            );
        }
    }

    /// When a task of the queue can be claimed (`Store::next_claimable`).
    pub(super) fn next_claimable_at(&self, now: i64) -> Result<Option<i64>> {
        let until: Option<i64> = self.read_value(
            NEXT_CLAIMABLE,
            &[&self.queue, &SLOT_WANT_RENEWED_BEFORE_END],
        )?;
        // The server says how long until then; the engine waits on its clock.
        Ok(until.map(|until| now.saturating_add(until.max(0))))
    }
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::super::list::TIMINGS;
    use super::super::test_server::{explain, fresh_store, server};
    use super::*;
    use crate::options::{OpenOptions, PushOptions};
    use crate::store::{group_predecessor_sql, NewTask, Store};

    fn unix_ms() -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    }

    #[test]
    fn a_claim_ends_at_most_the_sweep_batch_of_tasks_past_their_limits() {
        let bound = format!(
            "ORDER BY not_after LIMIT {} FOR UPDATE",
            crate::store::SWEEP_BATCH
        );
        assert!(CLAIM.contains(&bound), "CLAIM's literal is SWEEP_BATCH");
    }

    #[test]
    fn times_come_from_the_server_clock_whatever_the_client_says() {
        let Some(url) = server("times_come_from_the_server_clock_whatever_the_client_says") else {
            return;
        };
        let schema = format!("unit_clock_{}", std::process::id());
        let mut options = OpenOptions::new();
        options.postgres_schema(&schema).unwrap();
        let store = PostgresStore::open(&url, &options).unwrap();
        // A client whose clock is off by a day either way.
        let (past, future) = (unix_ms() - 86_400_000, unix_ms() + 86_400_000);
        let task = NewTask::new("1", &PushOptions::new(), future, 3);
        store.push(vec![task], future).unwrap();
        let claimed = store.claim(1, past, 60_000).unwrap().pop().unwrap();
        let now = unix_ms();
        assert!(
            (claimed.run_at_unix_ms - now).abs() < 10_000,
            "pushed at the server's time, not the client's: {} vs {now}",
            claimed.run_at_unix_ms
        );
        let lease_ends: i64 = store
            .read_value(
                "SELECT lease_expires_at FROM @.tasks WHERE id = $1",
                &[&claimed.id()],
            )
            .unwrap();
        assert!(
            (lease_ends - (now + 60_000)).abs() < 10_000,
            "the lease runs from the server's time"
        );
        // The engine waits on its own clock: the due time comes back in it.
        let due = store.next_claimable(past).unwrap().unwrap();
        assert!((due - (past + 60_000)).abs() < 10_000, "{due}");
        assert_eq!(
            store.recover(future).unwrap(),
            0,
            "the lease has not expired"
        );
        drop(store);
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }

    #[test]
    fn claiming_stays_an_index_lookup_with_a_million_blocked_tasks() {
        let Some(url) = server("claiming_stays_an_index_lookup_with_a_million_blocked_tasks")
        else {
            return;
        };
        let schema = format!("unit_blocked_{}", std::process::id());
        let store = fresh_store(&url, &schema, "default");
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        client
            .batch_execute(&format!(
                "INSERT INTO \"{schema}\".tasks
                     (queue, state, payload, created_at, run_at, max_attempts, waiting_for)
                 SELECT 'default', 7, '1', 0, i, 3, 1 FROM generate_series(1, 1000000) AS i;
                 INSERT INTO \"{schema}\".dependencies (parent, task, run_anyway)
                 SELECT 1, id, false FROM \"{schema}\".tasks;
                 INSERT INTO \"{schema}\".tasks (queue, state, payload, created_at, run_at, max_attempts)
                 VALUES ('default', 0, '2', 0, 5, 3);
                 ANALYZE \"{schema}\".tasks;
                 ANALYZE \"{schema}\".dependencies"
            ))
            .unwrap();
        let claim = store
            .sql(CLAIM)
            .replace("$1", "'default'")
            .replace("$2", "1")
            .replace("$3", "1000")
            .replace("$4", "1")
            .replace("$5", "false")
            .replace("$6", "false")
            .replace("$7", "false")
            .replace("$8", "false");
        let plan: Vec<String> = client
            .query(&format!("EXPLAIN {claim}"), &[])
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        let plan = plan.join("\n");
        assert!(!plan.contains("Seq Scan"), "{plan}");
        let tasks = store.claim(1, 0, 1000).unwrap();
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].payload(), "2");
        // A finish of a task nobody waits for calls no trigger function;
        // one waited for finds the tasks waiting by the primary key.
        let take: Vec<String> = client
            .query(
                &format!("EXPLAIN DELETE FROM \"{schema}\".dependencies WHERE parent = 2"),
                &[],
            )
            .unwrap()
            .iter()
            .map(|row| row.get(0))
            .collect();
        assert!(!take.join("\n").contains("Seq Scan"), "{take:?}");
        drop(store);
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }

    #[test]
    fn claiming_stays_an_index_lookup_with_a_thousand_groups_of_a_hundred() {
        let Some(url) =
            server("claiming_stays_an_index_lookup_with_a_thousand_groups_of_a_hundred")
        else {
            return;
        };
        let schema = format!("unit_groups_{}", std::process::id());
        let store = fresh_store(&url, &schema, "default");
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        // What pushes of 100 rounds to 1,000 groups store: each group's
        // head ready, each other task blocked by the one before it.
        client
            .batch_execute(&format!(
                "INSERT INTO \"{schema}\".tasks
                     (id, queue, state, payload, created_at, run_at, max_attempts, waiting_for,
                      has_children, group_key)
                 SELECT i, 'default', CASE WHEN i <= 1000 THEN 0 ELSE 7 END, '1', 0, i, 3,
                        CASE WHEN i <= 1000 THEN 0 ELSE 1 END, i <= 99000, 'g' || (i % 1000)
                 FROM generate_series(1, 100000) AS i;
                 INSERT INTO \"{schema}\".dependencies (parent, task, run_anyway)
                 SELECT i - 1000, i, true FROM generate_series(1001, 100000) AS i;
                 SELECT setval(pg_get_serial_sequence('\"{schema}\".tasks', 'id'), 100000);
                 ANALYZE \"{schema}\".tasks;
                 ANALYZE \"{schema}\".dependencies"
            ))
            .unwrap();
        let claim = store
            .sql(CLAIM)
            .replace("$1", "'default'")
            .replace("$2", "1")
            .replace("$3", "1000")
            .replace("$4", "1")
            .replace("$5", "false")
            .replace("$6", "false")
            .replace("$7", "false")
            .replace("$8", "false");
        let plan = explain(&mut client, &claim);
        assert!(!plan.contains("Seq Scan"), "{plan}");
        let predecessor = store
            .sql(&group_predecessor_sql("@.tasks", '$'))
            .replace("$1", "'default'")
            .replace("$2", "'g7'")
            .replace("$3", "0");
        let plan = explain(&mut client, &predecessor);
        assert!(plan.contains("tasks_group"), "{plan}");
        // The timings a monitor samples: each kind through its index.
        let timings = store
            .sql(TIMINGS)
            .replace("$1", "'default'")
            .replace("$2", "0")
            .replace("$3", "10000");
        let plan = explain(&mut client, &timings);
        assert!(!plan.contains("Seq Scan"), "{plan}");
        for index in ["tasks_leased", "tasks_done", "tasks_dead"] {
            assert!(plan.contains(index), "{index}: {plan}");
        }
        let tasks = store.claim(1, 0, 1000).unwrap();
        assert_eq!(tasks.len(), 1);
        assert!(tasks[0].receipt().id() <= 1000, "a group's head");
        // A push to a group waits for the group's newest task.
        let mut options = PushOptions::new();
        options.group("g7", 1).unwrap();
        let pushed = store
            .push(vec![NewTask::new("1", &options, 0, 3)], 0)
            .unwrap();
        let info = store.task(pushed[0].id()).unwrap().unwrap();
        assert_eq!(info.waiting_for(), [99_007]);
        assert_eq!(info.group(), Some("g7"));
        drop(store);
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }
}
