//! Events and durable sleep on PostgreSQL (see `crate::events`), as
//! SQLite's `events.rs` does them, on the server's clock. A signal and a
//! wait under one key first take the key's advisory lock, then the task's
//! row, so that they run one after the other and never miss each other;
//! and the migration that created their tables ([`EVENTS`]).

use super::pool::Tx;
use super::PostgresStore;
use crate::error::Result;
use crate::events::{
    event_step, recorded_outcome, recorded_sleep_end, sleep_outcome, sleep_step, timeout_step,
    wait_step, Awaited, EventStore, SleepEnd, Slept, StoredWait, WaitStep,
};
use crate::store::not_held;
use crate::task::Receipt;

/// Serialises the signals and waits under key `$1` (a text naming the
/// schema, the queue and the key) until the transaction ends, and reads
/// the server's clock.
const LOCK_KEY: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))::text, NOW_MS";

/// The task of queue `$1` that has waited longest for key `$2` and has not
/// been delivered since (pending: ready or waiting), locked.
const FIRST_WAITER: &str = "SELECT w.task FROM @.event_waits w JOIN @.tasks t ON t.id = w.task
    WHERE w.queue = $1 AND w.key = $2 AND t.state IN (0, 4)
    ORDER BY w.started_at, w.task LIMIT 1 FOR UPDATE OF t";

/// Records step `$2` of task `$1` with output `$3`, unless it has one.
const RECORD_STEP: &str = "INSERT INTO @.steps (task, name, output, recorded_at)
    VALUES ($1, $2, $3, NOW_MS) ON CONFLICT (task, name) DO NOTHING";

/// Hands the held task `$1` back to run at `$2`, giving back its attempt.
const SNOOZE_UNTIL: &str = "UPDATE @.tasks
    SET state = CASE WHEN $2::int8 <= NOW_MS THEN 0 ELSE 4 END, run_at = $2,
        attempts = attempts - 1, lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
    WHERE id = $1";

/// What a wait finds: the recorded outcome, the oldest kept event (its
/// number and payload) and the task's stored wait.
type WaitInputs = (Option<Awaited>, Option<(i64, String)>, Option<StoredWait>);

impl EventStore for PostgresStore {
    fn signal(&self, key: &str, payload: &str, _now: i64, retention: i64) -> Result<Option<i64>> {
        self.write(|tx| {
            self.lock_key(tx, key)?;
            tx.execute(
                &self.sql(
                    "DELETE FROM @.events WHERE seq IN (SELECT seq FROM @.events
                     WHERE queue = $1 AND expires_at <= NOW_MS LIMIT 100)",
                ),
                &[&self.queue],
            )?;
            let waiter = tx.query_opt(&self.sql(FIRST_WAITER), &[&self.queue, &key])?;
            let Some(task) = waiter.map(|row| row.try_get::<_, i64>(0)).transpose()? else {
                tx.execute(
                    &self.sql(
                        "INSERT INTO @.events (queue, key, payload, sent_at, expires_at)
                         VALUES ($1, $2, $3, NOW_MS, NOW_MS + $4::int8)",
                    ),
                    &[&self.queue, &key, &payload, &retention],
                )?;
                return Ok(None);
            };
            self.end_wait(tx, task, &event_step(key), payload)?;
            tx.execute(
                &self.sql(
                    "UPDATE @.tasks SET state = 0, run_at = least(run_at, NOW_MS) WHERE id = $1",
                ),
                &[&task],
            )?;
            self.notify(tx, &self.queue)?;
            Ok(Some(task))
        })
    }

    fn wait_for_event(
        &self,
        receipt: Receipt,
        key: &str,
        _now: i64,
        timeout: i64,
    ) -> Result<Awaited> {
        self.write(|tx| {
            let now = self.lock_key(tx, key)?;
            self.lock_held(tx, receipt)?;
            let (recorded, event, wait) = self.wait_inputs(tx, receipt, key)?;
            match wait_step(recorded, event, wait, key, now, timeout) {
                WaitStep::Recorded(awaited) => Ok(awaited),
                WaitStep::Take { seq, payload } => {
                    tx.execute(&self.sql("DELETE FROM @.events WHERE seq = $1"), &[&seq])?;
                    self.end_wait(tx, receipt.id, &event_step(key), &payload)?;
                    Ok(Awaited::Event(payload))
                }
                WaitStep::TimeOut { until } => {
                    let output = until.to_string();
                    self.end_wait(tx, receipt.id, &timeout_step(key), &output)?;
                    Ok(Awaited::TimedOut)
                }
                WaitStep::Suspend { until, new } => {
                    if new {
                        tx.execute(
                            &self.sql(
                                "INSERT INTO @.event_waits (task, queue, key, started_at, wait_until)
                                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (task) DO UPDATE
                                 SET key = $3, started_at = $4, wait_until = $5",
                            ),
                            &[&receipt.id, &self.queue, &key, &now, &until],
                        )?;
                    }
                    tx.execute(&self.sql(SNOOZE_UNTIL), &[&receipt.id, &until])?;
                    self.notify(tx, &self.queue)?;
                    Ok(Awaited::Suspended)
                }
            }
        })
    }

    fn sleep(&self, receipt: Receipt, name: &str, _now: i64, end: SleepEnd) -> Result<Slept> {
        self.write(|tx| {
            let now: i64 = tx.query(&self.sql("SELECT NOW_MS"), &[])?[0].try_get(0)?;
            self.lock_held(tx, receipt)?;
            let step = sleep_step(name);
            let recorded: Option<String> = tx
                .query_opt(
                    &self.sql("SELECT output FROM @.steps WHERE task = $1 AND name = $2"),
                    &[&receipt.id, &step],
                )?
                .map(|row| row.try_get(0))
                .transpose()?;
            let until = match recorded {
                Some(output) => recorded_sleep_end(&output),
                None => {
                    let until = match end {
                        SleepEnd::At(at) => at,
                        SleepEnd::After(after) => now.saturating_add(after),
                    };
                    let output = until.to_string();
                    tx.execute(&self.sql(RECORD_STEP), &[&receipt.id, &step, &output])?;
                    until
                }
            };
            let slept = sleep_outcome(until, now);
            if slept == Slept::Suspended {
                tx.execute(&self.sql(SNOOZE_UNTIL), &[&receipt.id, &until])?;
                self.notify(tx, &self.queue)?;
            }
            Ok(slept)
        })
    }
}

impl PostgresStore {
    /// What a wait for `key` by the task of `receipt` finds: the outcome
    /// recorded for the key, the key's oldest kept event and the task's
    /// stored wait (see `wait_step`).
    fn wait_inputs(&self, tx: &mut Tx<'_>, receipt: Receipt, key: &str) -> Result<WaitInputs> {
        let steps = tx
            .query(
                &self.sql(
                    "SELECT name, output FROM @.steps
                     WHERE task = $1 AND name IN ($2, $3) ORDER BY seq",
                ),
                &[&receipt.id, &event_step(key), &timeout_step(key)],
            )?
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<Vec<(String, String)>>>()?;
        let event = tx
            .query_opt(
                &self.sql(
                    "SELECT seq, payload FROM @.events WHERE queue = $1 AND key = $2
                     AND expires_at > NOW_MS ORDER BY seq LIMIT 1",
                ),
                &[&self.queue, &key],
            )?
            .map(|row| Ok::<_, crate::Error>((row.try_get(0)?, row.try_get(1)?)))
            .transpose()?;
        let wait = tx
            .query_opt(
                &self.sql("SELECT key, wait_until FROM @.event_waits WHERE task = $1"),
                &[&receipt.id],
            )?
            .map(|row| {
                Ok::<_, crate::Error>(StoredWait {
                    key: row.try_get(0)?,
                    until: row.try_get(1)?,
                })
            })
            .transpose()?;
        Ok((recorded_outcome(key, steps), event, wait))
    }

    /// Takes the advisory lock of the queue's key `key` (see [`LOCK_KEY`])
    /// and returns the server's time.
    fn lock_key(&self, tx: &mut Tx<'_>, key: &str) -> Result<i64> {
        let name = format!(
            "tq:{}:event:{}:{}:{key}",
            self.schema,
            self.queue.len(),
            self.queue
        );
        let rows = tx.query(&self.sql(LOCK_KEY), &[&name])?;
        Ok(rows[0].try_get(1)?)
    }

    /// Locks the task of `receipt` until the transaction ends; `NotHeld`
    /// unless the delivery is current.
    fn lock_held(&self, tx: &mut Tx<'_>, receipt: Receipt) -> Result<()> {
        let held = tx.query_opt(
            &self.sql(
                "SELECT 1 FROM @.tasks WHERE id = $1 AND state = 1 AND lease_token = $2 FOR UPDATE",
            ),
            &[&receipt.id, &receipt.token],
        )?;
        match held {
            Some(_) => Ok(()),
            None => Err(not_held(receipt.id)),
        }
    }

    /// Records the outcome of task `task`'s wait as its step `name` and
    /// ends the wait.
    fn end_wait(&self, tx: &mut Tx<'_>, task: i64, name: &str, output: &str) -> Result<()> {
        tx.execute(&self.sql(RECORD_STEP), &[&task, &name, &output])?;
        tx.execute(
            &self.sql("DELETE FROM @.event_waits WHERE task = $1"),
            &[&task],
        )?;
        Ok(())
    }
}

/// 17: events and durable sleep (SQLite's version 18): events under their
/// keys until a wait takes one or their retention passes, and the waits of
/// tasks, removed with their task by the foreign key.
pub(super) const EVENTS: &str = "CREATE TABLE @.events (
        seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        queue      text   NOT NULL,
        key        text   NOT NULL,
        payload    text   NOT NULL,
        sent_at    bigint NOT NULL,
        expires_at bigint NOT NULL
    );
    CREATE INDEX events_by_key ON @.events (queue, key, seq);
    CREATE INDEX events_by_expiry ON @.events (queue, expires_at);
    CREATE TABLE @.event_waits (
        task       bigint PRIMARY KEY REFERENCES @.tasks (id) ON DELETE CASCADE,
        queue      text   NOT NULL,
        key        text   NOT NULL,
        started_at bigint NOT NULL,
        wait_until bigint NOT NULL
    );
    CREATE INDEX event_waits_by_key ON @.event_waits (queue, key, started_at, task);";
