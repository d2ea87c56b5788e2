//! Attempts: reading a task's ended attempts, and the migration that
//! records and trims them ([`ATTEMPTS`]), as SQLite's migration 17 does
//! (see `crate::attempts`).

use super::pool::Conn;
use super::PostgresStore;
use crate::attempts::{AttemptInfo, AttemptOutcome};
use crate::error::Result;

/// The ended attempts of task `$1` kept, oldest first.
const OF_TASK: &str =
    "SELECT attempt, outcome, reason, holder_id, started_at, ended_at FROM @.attempts
     WHERE task = $1 ORDER BY seq";

/// Migration 16: SQLite's version 17. The table of attempts, in the order
/// they ended (seq), removed with their task by the foreign key; the
/// trigger records one in the statement that takes a held delivery's lease
/// away with a reason (a failure, a recovery, an expired lease claimed
/// again, a cancellation ending it; never a finish, which sets no reason,
/// nor a snooze), reading its outcome from the new state and from the
/// reasons tq writes when it takes a lease back (`recover.rs`,
/// `claim.rs`), and keeps the task's newest `ATTEMPTS_KEPT`. The task's
/// row is locked by the update, so two trims of one task never interleave.
pub(super) const ATTEMPTS: &str = "CREATE TABLE @.attempts (
        seq        bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        task       bigint   NOT NULL REFERENCES @.tasks (id) ON DELETE CASCADE,
        attempt    bigint   NOT NULL,
        outcome    smallint NOT NULL,
        reason     text,
        holder_id  integer,
        started_at bigint,
        ended_at   bigint   NOT NULL
    );
    CREATE INDEX attempts_task ON @.attempts (task, seq);
    CREATE FUNCTION @.record_attempt() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        ended bigint := NOW_MS;
    BEGIN
        INSERT INTO @.attempts
            (task, attempt, outcome, reason, holder_id, started_at, ended_at)
        VALUES (OLD.id, OLD.attempts,
                CASE WHEN NEW.state = 5 THEN 3
                     WHEN NEW.last_error LIKE 'the process holding delivery % died%' THEN 2
                     WHEN OLD.lease_expires_at <= ended
                          AND (NEW.last_error LIKE 'the lease of % expired%'
                               OR NEW.last_error = 'deadline passed') THEN 1
                     ELSE 0 END,
                NEW.last_error, OLD.holder_id, OLD.claimed_at,
                greatest(ended, OLD.claimed_at));
        DELETE FROM @.attempts WHERE task = OLD.id AND seq <= (
            SELECT seq FROM @.attempts WHERE task = OLD.id
            ORDER BY seq DESC OFFSET ATTEMPTS_KEPT LIMIT 1);
        RETURN NULL;
    END $$;
    CREATE TRIGGER tasks_attempt_ended AFTER UPDATE OF last_error ON @.tasks FOR EACH ROW
        WHEN (OLD.state IN (1, 6) AND OLD.lease_token IS NOT NULL
              AND NEW.lease_token IS DISTINCT FROM OLD.lease_token AND NEW.state <> 2)
        EXECUTE FUNCTION @.record_attempt();";

impl PostgresStore {
    /// The ended attempts of task `id`, read on `conn`.
    pub(super) fn task_attempts(&self, conn: &mut Conn, id: i64) -> Result<Vec<AttemptInfo>> {
        conn.query(&self.sql(OF_TASK), &[&id])?
            .iter()
            .map(|row| {
                Ok(AttemptInfo {
                    attempt: u32::try_from(row.try_get::<_, i64>(0)?).unwrap_or(u32::MAX),
                    outcome: AttemptOutcome::from_stored(row.try_get::<_, i16>(1)?.into())?,
                    reason: row.try_get(2)?,
                    holder_id: row.try_get::<_, Option<i32>>(3)?.map(i64::from),
                    holder_pid: None,
                    started_at_unix_ms: row.try_get(4)?,
                    ended_at_unix_ms: row.try_get(5)?,
                })
            })
            .collect()
    }
}
