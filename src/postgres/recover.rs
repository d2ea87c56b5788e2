//! Recovering: how the tasks of expired leases and of holders that are
//! gone are taken back, and how old history is purged.

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

impl PostgresStore {
    /// Takes back the tasks of expired leases and gone holders (`Store::recover`).
    pub(super) fn recover_leases(&self) -> Result<u64> {
        let space = i64::from(self.lock_space);
        let grace = super::listener::GRACE.as_millis() as i64;
        // The reason is named among the columns set so that the trigger
        // of attempts (`attempts.rs`) records the delivery's end.
        let ended = if self.keep_history {
            "UPDATE @.tasks t
             SET state = 5, finished_at = clock.now, last_error = t.last_error,
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
