//! Recovering: how the tasks of expired leases and of holders that are
//! gone are taken back, how dead tasks are retried, and how old history
//! is purged.

use super::push::ADD_DEPENDENCIES;
use super::PostgresStore;
use crate::error::{Error, Result};
use crate::task::TaskState;

/// The server's time and the live holders: those holding their lock
/// (`($2, holder id)`) or whose heartbeat is younger than `$3` ms (the
/// listener's grace period), so merely connecting again.
const CLOCK_AND_LIVE: &str = "WITH clock AS (SELECT NOW_MS AS now),
    live AS (
        SELECT objid::int8 AS id FROM pg_locks
        WHERE locktype = 'advisory' AND classid::int8 = $2::int8 AND objsubid = 2 AND granted
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
        UNION
        SELECT id FROM @.holders WHERE seen_alive_at > (SELECT now FROM clock) - $3::int8)";

/// Takes back the leased tasks of queue `$1` whose lease expired or whose
/// holder is gone (not live: see [`CLOCK_AND_LIVE`]).
const RECOVER: &str = ",
    gone AS (
        SELECT t.id, (t.holder_id IS NULL OR t.holder_id NOT IN (SELECT id FROM live)) AS died
        FROM @.tasks t, clock
        WHERE t.queue = $1 AND t.state = 1
          AND (t.lease_expires_at <= clock.now OR t.holder_id IS NULL
               OR t.holder_id NOT IN (SELECT id FROM live))
        FOR UPDATE OF t SKIP LOCKED)
    UPDATE @.tasks t
    SET state = CASE WHEN t.attempts >= t.max_attempts THEN 3 ELSE 0 END,
        finished_at = CASE WHEN t.attempts >= t.max_attempts THEN clock.now END,
        last_error = CASE
            WHEN g.died THEN 'the process holding delivery ' || t.attempts
                             || ' died (its session on the server ended)'
            ELSE 'the lease of delivery ' || t.attempts || ' expired before it finished'
        END,
        lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
    FROM gone g, clock WHERE t.id = g.id";

/// The cancelling tasks of queue `$1` whose lease expired or whose holder
/// is gone: they are over (after [`CLOCK_AND_LIVE`]).
const OVER_CANCELLING: &str = ",
    over AS (
        SELECT t.id FROM @.tasks t, clock
        WHERE t.queue = $1 AND t.state = 6
          AND (t.lease_expires_at <= clock.now OR t.holder_id IS NULL
               OR t.holder_id NOT IN (SELECT id FROM live))
        FOR UPDATE OF t SKIP LOCKED)";

const RETRY_DEAD: &str = "UPDATE @.tasks
    SET state = 0, attempts = 0, run_at = NOW_MS, finished_at = NULL
    WHERE queue = $1 AND state = 3 AND ($2::int8 IS NULL OR id = $2)";

/// The dead tasks of ordered groups that [`RETRY_DEAD`] would retry, with
/// their groups, by id, locked until the retry commits.
const DEAD_IN_GROUPS: &str = "SELECT id, group_key FROM @.tasks
    WHERE queue = $1 AND state = 3 AND group_key IS NOT NULL AND ($2::int8 IS NULL OR id = $2)
    ORDER BY id FOR UPDATE";

/// Retries the dead task `$1` of an ordered group: ready, or blocked
/// behind one task when `$2`.
const RETRY_GROUPED: &str = "UPDATE @.tasks
    SET state = CASE WHEN $2 THEN 7 ELSE 0 END, waiting_for = CASE WHEN $2 THEN 1 ELSE 0 END,
        attempts = 0, run_at = NOW_MS, finished_at = NULL
    WHERE id = $1";

impl PostgresStore {
    /// Takes back the tasks of expired leases and gone holders (`Store::recover`).
    pub(super) fn recover_leases(&self) -> Result<u64> {
        let space = i64::from(self.lock_space);
        let grace = super::listener::GRACE.as_millis() as i64;
        let ended = if self.keep_history {
            "UPDATE @.tasks t
             SET state = 5, finished_at = clock.now,
                 lease_token = NULL, lease_expires_at = NULL, holder_id = NULL,
                 unique_key = NULL, unique_until = NULL
             FROM over o, clock WHERE t.id = o.id"
        } else {
            "DELETE FROM @.tasks t USING over o WHERE t.id = o.id"
        };
        self.write(|tx| {
            let recovered = tx.execute(
                &self.sql(&format!("{CLOCK_AND_LIVE}{RECOVER}")),
                &[&self.queue, &space, &grace],
            )?;
            tx.execute(
                &self.sql(&format!("{CLOCK_AND_LIVE}{OVER_CANCELLING} {ended}")),
                &[&self.queue, &space, &grace],
            )?;
            if recovered > 0 {
                self.notify(tx, &self.queue)?;
            }
            Ok(recovered)
        })
    }

    /// Makes dead tasks pending again (`Store::retry_dead`).
    pub(super) fn retry_dead_tasks(&self, id: Option<i64>) -> Result<u64> {
        self.write(|tx| {
            // See `Store::retry_dead`: each dead task of a group rejoins it
            // at the back of its line, after the one retried before it.
            let grouped: Vec<(i64, String)> = tx
                .query(&self.sql(DEAD_IN_GROUPS), &[&self.queue, &id])?
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
                tx.execute(&self.sql(RETRY_DEAD), &[&self.queue, &id])? + grouped.len() as u64;
            if retried > 0 {
                self.notify(tx, &self.queue)?;
            }
            Ok(retried)
        })
    }

    /// Deletes old done, dead or cancelled tasks (`Store::purge`).
    pub(super) fn purge_tasks(&self, state: TaskState, older_than: i64) -> Result<u64> {
        let sql = match state {
            TaskState::Done => {
                "DELETE FROM @.tasks WHERE queue = $1 AND state = 2 AND finished_at <= NOW_MS - $2"
            }
            TaskState::Dead => {
                "DELETE FROM @.tasks WHERE queue = $1 AND state = 3 AND finished_at <= NOW_MS - $2"
            }
            TaskState::Cancelled => {
                "DELETE FROM @.tasks WHERE queue = $1 AND state = 5 AND finished_at <= NOW_MS - $2"
            }
            TaskState::Pending | TaskState::Leased => {
                return Err(Error::invalid_argument(
                    "only done, dead and cancelled tasks can be purged",
                ))
            }
        };
        let sql = self.sql(sql);
        self.write(|tx| tx.execute(&sql, &[&self.queue, &older_than]))
    }
}
