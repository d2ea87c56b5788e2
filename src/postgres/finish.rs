//! Ending a delivery: finish (with a result, or with a claim of more tasks
//! in the same transaction), fail (retried after a back-off, or dead),
//! extend, snooze (handed back to run later); and retrying dead tasks.

use std::collections::HashSet;

use postgres::Row;

use super::claim::LIVE_LEASES;
use super::pool::Params;
use super::push::ADD_DEPENDENCIES;
use super::PostgresStore;
use crate::error::Result;
use crate::options::RetryBackoff;
use crate::store::{lease_slot_taken, not_held, stored_reason, IfNotHeld};
use crate::task::{Failed, Receipt, Task};

/// One finish-and-claim ([`Store::finish_and_claim`]), as its handle's
/// threads' calls made at once are run together.
///
/// [`Store::finish_and_claim`]: crate::store::Store::finish_and_claim
pub(super) struct FinishAndClaim {
    pub(super) receipts: Vec<Receipt>,
    pub(super) if_not_held: IfNotHeld,
    pub(super) lease: i64,
    pub(super) max: usize,
}

/// Completes the current deliveries among receipts (`$1` ids, `$2`
/// tokens): deleted, or kept as done with history (`$3`) or for a unique
/// window; returns the receipts that were current. On a handle without
/// history, also deletes a few done tasks of queue `$4` whose unique window
/// has passed. A slot of a concurrency limit freed is told afterwards, and
/// only to a pull that waits for one ([`NOTIFY_IF_SLOT_WANTED`]).
///
/// [`NOTIFY_IF_SLOT_WANTED`]: super::claim::NOTIFY_IF_SLOT_WANTED
const FINISH: &str = "WITH clock AS (SELECT NOW_MS AS now),
    r AS (SELECT * FROM unnest($1::int8[], $2::int8[]) AS r(id, token)),
    deleted AS (
        DELETE FROM @.tasks t USING r
        WHERE t.id = ANY ($1) AND t.id = r.id AND t.state = 1 AND t.lease_token = r.token AND NOT $3::bool
          AND (t.unique_key IS NULL OR t.unique_for = 0)
        RETURNING t.id, r.token),
    kept AS (
        UPDATE @.tasks t
        SET state = 2, finished_at = clock.now,
            lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
            unique_key = CASE WHEN t.unique_for > 0 THEN t.unique_key END,
            unique_until = CASE WHEN t.unique_for > 0 AND t.unique_key IS NOT NULL
                                THEN clock.now + t.unique_for END
        FROM r, clock
        WHERE t.id = ANY ($1) AND t.id = r.id AND t.state = 1 AND t.lease_token = r.token
          AND ($3 OR (t.unique_key IS NOT NULL AND t.unique_for > 0))
        RETURNING t.id, r.token),
    swept AS (
        DELETE FROM @.tasks WHERE NOT $3 AND id IN (
            SELECT id FROM @.tasks
            WHERE queue = $4 AND state = 2 AND unique_until IS NOT NULL
              AND unique_until <= (SELECT now FROM clock)
              AND (result_until IS NULL OR result_until <= (SELECT now FROM clock))
            LIMIT 100 FOR UPDATE SKIP LOCKED)),
    done AS (SELECT id, token FROM deleted UNION ALL SELECT id, token FROM kept)
    SELECT id, token FROM done";

/// Completes the delivery `($1, $2)`, if current, keeping the task as done
/// with result `$3`: for `$5` ms on a handle without history (`$4`), with
/// its history otherwise. Also deletes a few done tasks of queue `$6`
/// whose result's time has passed, and notifies channel `$7`, for the
/// processes waiting for the task's outcome. Returns the task if current.
const FINISH_WITH_RESULT: &str = "WITH clock AS (SELECT NOW_MS AS now),
    kept AS (
        UPDATE @.tasks t
        SET state = 2, finished_at = clock.now,
            lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
            unique_key = CASE WHEN t.unique_for > 0 THEN t.unique_key END,
            unique_until = CASE WHEN t.unique_for > 0 AND t.unique_key IS NOT NULL
                                THEN clock.now + t.unique_for END,
            result = $3, result_until = CASE WHEN NOT $4::bool THEN clock.now + $5::int8 END
        FROM clock
        WHERE t.id = $1 AND t.state = 1 AND t.lease_token = $2
        RETURNING t.id),
    swept AS (
        DELETE FROM @.tasks WHERE id IN (
            SELECT id FROM @.tasks
            WHERE queue = $6 AND state = 2 AND result_until IS NOT NULL
              AND result_until <= (SELECT now FROM clock)
              AND (unique_until IS NULL OR unique_until <= (SELECT now FROM clock))
            LIMIT 100 FOR UPDATE SKIP LOCKED))
    SELECT id, pg_notify($7, $6)::text FROM kept";

/// Ends the delivery `($1, $2)`, if current, as failed for reason `$3`:
/// dead on its last attempt, else due again after the back-off that
/// `RetryBackoff::pause` computes (from `$4` to `$5` ms, doubling with each
/// attempt, less a random part of up to half), and then the channel `$6`
/// is notified with the task's queue (the task may be another queue's of
/// this schema). A retry that would fall at or after the task's deadline
/// ends it dead instead, for that reason (`DEADLINE_PASSED` in
/// `store.rs`). Returns whether it died and when it is due again.
const FAIL: &str = "WITH clock AS (
        SELECT NOW_MS AS now, floor(random() * 9007199254740992)::numeric AS draw),
    current AS (
        SELECT t.id, t.queue,
               t.attempts >= t.max_attempts OR coalesce(r.at >= t.deadline, false) AS dead,
               coalesce(r.at >= t.deadline, false) AS past_deadline, r.at AS retry_at
        FROM @.tasks t, clock,
             LATERAL (SELECT least($4::int8 * 2::numeric ^ least(greatest(t.attempts - 1, 0), 63),
                                   $5::int8) AS full) b,
             LATERAL (SELECT least(clock.now + b.full - mod(clock.draw, floor(b.full / 2) + 1),
                                   9223372036854775807)::int8 AS at) r
        WHERE t.id = $1 AND t.state = 1 AND t.lease_token = $2 FOR UPDATE OF t),
    failed AS (
        UPDATE @.tasks t
        SET state = CASE WHEN c.dead THEN 3 WHEN c.retry_at <= clock.now THEN 0 ELSE 4 END,
            run_at = CASE WHEN c.dead THEN t.run_at ELSE c.retry_at END,
            finished_at = CASE WHEN c.dead THEN clock.now END,
            last_error = CASE WHEN c.past_deadline THEN 'deadline passed' ELSE $3 END,
            lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
        FROM current c, clock WHERE t.id = c.id
        RETURNING c.dead, c.retry_at, c.queue)
    SELECT dead, retry_at, CASE WHEN NOT dead THEN pg_notify($6, queue)::text END FROM failed";

/// Moves the live lease of delivery `($1, $2)` to `$3` ms from now,
/// recording progress `$4` when not NULL, unless its queue has a
/// concurrency limit: those extends take the claims' lock
/// ([`PostgresStore::extend_limited`]).
const EXTEND: &str = "UPDATE @.tasks t
    SET lease_expires_at = NOW_MS + $3::int8, progress = coalesce($4::text, progress)
    WHERE id = $1 AND state = 1 AND lease_token = $2 AND lease_expires_at > NOW_MS
      AND NOT EXISTS (SELECT 1 FROM @.queues q WHERE q.queue = t.queue AND q.max_leased IS NOT NULL)
    RETURNING id";

/// The concurrency limit of task `$1`'s queue, its settings locked as
/// claims of a limited queue lock them ([`LOCK_SLOTS`]); no row when its
/// queue has no settings.
///
/// [`LOCK_SLOTS`]: super::claim::LOCK_SLOTS
const LOCK_SLOTS_OF_TASK: &str = "SELECT max_leased FROM @.queues
    WHERE queue = (SELECT queue FROM @.tasks WHERE id = $1) FOR UPDATE";

/// The queue of delivery `($1, $2)`, if current, and whether its lease is
/// live, its row locked so that no claim takes it meanwhile.
const LOCK_DELIVERY: &str = "SELECT queue, lease_expires_at > NOW_MS FROM @.tasks
    WHERE id = $1 AND state = 1 AND lease_token = $2 FOR UPDATE";

/// Moves the lease of task `$1` to `$2` ms from now, recording progress
/// `$3` when not NULL.
const EXTEND_LOCKED: &str = "UPDATE @.tasks
    SET lease_expires_at = NOW_MS + $2::int8, progress = coalesce($3::text, progress)
    WHERE id = $1";

const RETRY_DEAD: &str = "UPDATE @.tasks
    SET state = 0, attempts = 0, run_at = NOW_MS, finished_at = NULL,
        expires_at = NULL, deadline = NULL, not_after = NULL
    WHERE queue = $1 AND state = 3 AND ($2::int8[] IS NULL OR id = ANY($2))";

/// The dead tasks of ordered groups that [`RETRY_DEAD`] would retry, with
/// their groups, by id, locked until the retry commits.
const DEAD_IN_GROUPS: &str = "SELECT id, group_key FROM @.tasks
    WHERE queue = $1 AND state = 3 AND group_key IS NOT NULL
      AND ($2::int8[] IS NULL OR id = ANY($2))
    ORDER BY id FOR UPDATE";

/// Retries the dead task `$1` of an ordered group: ready, or blocked
/// behind one task when `$2`.
const RETRY_GROUPED: &str = "UPDATE @.tasks
    SET state = CASE WHEN $2 THEN 7 ELSE 0 END, waiting_for = CASE WHEN $2 THEN 1 ELSE 0 END,
        attempts = 0, run_at = NOW_MS, finished_at = NULL,
        expires_at = NULL, deadline = NULL, not_after = NULL
    WHERE id = $1";

impl PostgresStore {
    /// Runs finishes made at once as one statement; each gets the answers
    /// for its own receipts.
    pub(super) fn finish_together(&self, finishes: &[Vec<Receipt>]) -> Vec<Result<Vec<bool>>> {
        let receipts = finishes.concat();
        match self.finish_with(|sql, params| self.write_one(sql, params), &receipts) {
            Ok(done) => {
                if done.contains(&true) {
                    self.slots_freed();
                }
                let mut done = done.into_iter();
                finishes
                    .iter()
                    .map(|receipts| Ok(done.by_ref().take(receipts.len()).collect()))
                    .collect()
            }
            Err(err) => finishes.iter().map(|_| Err(err.clone())).collect(),
        }
    }

    /// Completes the current deliveries among `receipts`, [`FINISH`] run
    /// by `run`.
    fn finish_with(
        &self,
        run: impl FnOnce(&str, Params<'_>) -> Result<Vec<Row>>,
        receipts: &[Receipt],
    ) -> Result<Vec<bool>> {
        let ids: Vec<i64> = receipts.iter().map(|receipt| receipt.id).collect();
        let tokens: Vec<i64> = receipts.iter().map(|receipt| receipt.token).collect();
        let rows = run(
            &self.sql(FINISH),
            &[&ids, &tokens, &self.keep_history, &self.queue],
        )?;
        let mut done = HashSet::new();
        for row in &rows {
            done.insert((row.try_get::<_, i64>(0)?, row.try_get::<_, i64>(1)?));
        }
        // A receipt given twice was current the first time only.
        Ok(receipts
            .iter()
            .map(|receipt| done.remove(&(receipt.id, receipt.token)))
            .collect())
    }

    /// Completes a delivery, keeping its result (`Store::finish_with_result`).
    pub(super) fn finish_keeping_result(
        &self,
        receipt: Receipt,
        result: &str,
        retention: i64,
    ) -> Result<bool> {
        let rows = self.write_one(
            &self.sql(FINISH_WITH_RESULT),
            &[
                &receipt.id,
                &receipt.token,
                &result,
                &self.keep_history,
                &retention,
                &self.queue,
                &self.channel,
            ],
        )?;
        // Its statement notified the waiters, of a free slot too.
        Ok(!rows.is_empty())
    }

    /// Runs finish-and-claims made at once in one transaction: one
    /// statement finishes them all, then one claims the tasks of all those
    /// to claim (per lease).
    pub(super) fn finish_and_claim_together(
        &self,
        calls: &[FinishAndClaim],
    ) -> Vec<Result<(Vec<bool>, Vec<Task>)>> {
        let receipts: Vec<Receipt> = calls
            .iter()
            .flat_map(|call| call.receipts.iter().copied())
            .collect();
        let outcome = self.write(|tx| {
            let mut done = self
                .finish_with(|sql, params| tx.query(sql, params), &receipts)?
                .into_iter();
            let held: Vec<Vec<bool>> = calls
                .iter()
                .map(|call| done.by_ref().take(call.receipts.len()).collect())
                .collect();
            let claims: Vec<(usize, i64)> = calls
                .iter()
                .zip(&held)
                .map(|(call, held)| {
                    let refused = call.if_not_held == IfNotHeld::Refuse && held.contains(&false);
                    (if refused { 0 } else { call.max }, call.lease)
                })
                .collect();
            let claimed = self
                .claim_together(|sql, params| tx.query(sql, params), true, &claims)
                .into_iter()
                .collect::<Result<Vec<Vec<Task>>>>()?;
            Ok((held, claimed))
        });
        match outcome {
            Ok((held, claimed)) => {
                // Finishes whose claims took fewer tasks left slots free.
                let finished: usize = held.iter().flatten().filter(|&&done| done).count();
                if finished > claimed.iter().map(Vec::len).sum() {
                    self.slots_freed();
                }
                calls
                    .iter()
                    .zip(held.into_iter().zip(claimed))
                    .map(
                        |(call, (held, tasks))| match held.iter().position(|&done| !done) {
                            Some(lost) if call.if_not_held == IfNotHeld::Refuse => {
                                Err(not_held(call.receipts[lost].id))
                            }
                            _ => Ok((held, tasks)),
                        },
                    )
                    .collect()
            }
            Err(err) => calls.iter().map(|_| Err(err.clone())).collect(),
        }
    }

    /// Ends a delivery as failed (`Store::fail`).
    pub(super) fn fail_delivery(
        &self,
        receipt: Receipt,
        reason: &str,
        backoff: &RetryBackoff,
    ) -> Result<Failed> {
        let reason = stored_reason(reason);
        let (min, max) = (
            backoff.min.as_millis().min(i64::MAX as u128) as i64,
            backoff.max.as_millis().min(i64::MAX as u128) as i64,
        );
        let rows = self.write_one(
            &self.sql(FAIL),
            &[
                &receipt.id,
                &receipt.token,
                &reason,
                &min,
                &max,
                &self.channel,
            ],
        )?;
        let row = rows.first().ok_or_else(|| not_held(receipt.id))?;
        if row.try_get(0)? {
            self.slots_freed();
            return Ok(Failed::Dead);
        }
        Ok(Failed::RetryAt(row.try_get(1)?))
    }

    /// Moves the lease of a current delivery (`Store::extend`).
    pub(super) fn extend_lease(
        &self,
        receipt: Receipt,
        lease: i64,
        progress: Option<&str>,
    ) -> Result<()> {
        let extended = self.write_one(
            &self.sql(EXTEND),
            &[&receipt.id, &receipt.token, &lease, &progress],
        )?;
        if extended.is_empty() {
            return self.extend_limited(receipt, lease, progress);
        }
        Ok(())
    }

    /// Extends the lease of `receipt` that [`EXTEND`] did not: one of a
    /// queue with a concurrency limit, or one expired (or not current).
    /// Under the settings' lock that claims of a limited queue take, it
    /// decides whether the lease is live and, if it is not, whether the
    /// limit has room for it: an expired lease holds no slot, and a claim
    /// may have filled it. Without the lock, an extend begun while the
    /// lease was live and a claim counting it expired could both succeed.
    fn extend_limited(&self, receipt: Receipt, lease: i64, progress: Option<&str>) -> Result<()> {
        self.write(|tx| {
            let limit: Option<i64> = match tx
                .query(&self.sql(LOCK_SLOTS_OF_TASK), &[&receipt.id])?
                .first()
            {
                Some(row) => row.try_get(0)?,
                None => None,
            };
            let current = tx.query(&self.sql(LOCK_DELIVERY), &[&receipt.id, &receipt.token])?;
            let Some(row) = current.first() else {
                return Err(not_held(receipt.id));
            };
            let queue: String = row.try_get(0)?;
            let live: bool = row.try_get(1)?;
            if let (Some(limit), false) = (limit, live) {
                let taken: i64 = tx
                    .query(&self.sql(LIVE_LEASES), &[&queue])?
                    .first()
                    .map(|row| row.try_get(0))
                    .transpose()?
                    .unwrap_or(0);
                if taken >= limit {
                    return Err(lease_slot_taken(receipt.id, &queue, limit));
                }
            }
            tx.execute(&self.sql(EXTEND_LOCKED), &[&receipt.id, &lease, &progress])?;
            Ok(())
        })
    }

    /// Makes dead tasks pending again (`Store::retry_dead`).
    pub(super) fn retry_dead_tasks(&self, ids: Option<&[i64]>) -> Result<u64> {
        self.write(|tx| {
            // See `Store::retry_dead`: each dead task of a group rejoins it
            // at the back of its line, after the one retried before it.
            let grouped: Vec<(i64, String)> = tx
                .query(&self.sql(DEAD_IN_GROUPS), &[&self.queue, &ids])?
                .iter()
                .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
                .collect::<Result<_>>()?;
            self.lock_groups(tx, grouped.iter().map(|(_, group)| group.as_str()))?;
            for (task, group) in &grouped {
                let predecessor = self.group_parent(tx, group, 1, &[])?;
                tx.execute(&self.sql(RETRY_GROUPED), &[task, &predecessor.is_some()])?;
                if let Some(parent) = predecessor {
                    tx.execute(&self.sql(ADD_DEPENDENCIES), &[&vec![parent], task, &true])?;
                }
            }
            let retried =
                tx.execute(&self.sql(RETRY_DEAD), &[&self.queue, &ids])? + grouped.len() as u64;
            if retried > 0 && self.seen_fair() {
                self.rejoin_line(tx)?;
            }
            if retried > 0 {
                self.notify(tx, &self.queue)?;
            }
            Ok(retried)
        })
    }

    /// Hands the task of a current delivery back to run later (`Store::snooze`).
    pub(super) fn snooze_delivery(&self, receipt: Receipt, delay: i64) -> Result<()> {
        self.write(|tx| {
            let snoozed = tx.execute(
                &self.sql(
                    "UPDATE @.tasks
                     SET state = CASE WHEN $3::int8 <= 0 THEN 0 ELSE 4 END, run_at = NOW_MS + $3,
                         attempts = attempts - 1,
                         lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
                     WHERE id = $1 AND state = 1 AND lease_token = $2",
                ),
                &[&receipt.id, &receipt.token, &delay],
            )?;
            if snoozed == 0 {
                return Err(not_held(receipt.id));
            }
            self.notify(tx, &self.queue)
        })
    }
}
