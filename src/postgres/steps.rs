//! Step checkpoints: recording a held task's step, reading one back, the
//! steps of a task, and clearing those after a named one, as SQLite's
//! `steps.rs` does.

use super::pool::Conn;
use super::PostgresStore;
use crate::error::Result;
use crate::store::{not_held, steps_to_clear};
use crate::task::{Receipt, StepInfo};

/// Records step `$3` with output `$4` of task `$1` held under token `$2`,
/// on the server's clock: whether the task is held, and whether the step
/// was stored. `FOR SHARE` keeps the delivery from ending (a finish, a
/// claim of an expired lease) until the step commits.
const RECORD: &str = "
    WITH held AS (
        SELECT id FROM @.tasks WHERE id = $1 AND state = 1 AND lease_token = $2 FOR SHARE
    ), stored AS (
        INSERT INTO @.steps (task, name, output, recorded_at)
        SELECT id, $3, $4, NOW_MS FROM held
        ON CONFLICT (task, name) DO NOTHING
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM held), EXISTS (SELECT 1 FROM stored)";

/// The steps of task `$1`, in the order they were recorded.
const OF_TASK: &str = "SELECT name, output, recorded_at FROM @.steps WHERE task = $1 ORDER BY seq";

impl PostgresStore {
    /// `Store::record_step`, in one statement.
    pub(super) fn record_held_step(
        &self,
        receipt: Receipt,
        name: &str,
        output: &str,
    ) -> Result<bool> {
        let rows = self.write_one(
            &self.sql(RECORD),
            &[&receipt.id, &receipt.token, &name, &output],
        )?;
        let (held, stored): (bool, bool) = match rows.first() {
            Some(row) => (row.try_get(0)?, row.try_get(1)?),
            None => (false, false),
        };
        if !held {
            return Err(not_held(receipt.id));
        }
        Ok(stored)
    }

    /// `Store::step_output`.
    pub(super) fn read_step_output(&self, id: i64, name: &str) -> Result<Option<String>> {
        let sql = self.sql("SELECT output FROM @.steps WHERE task = $1 AND name = $2");
        self.read(|conn| {
            conn.query(&sql, &[&id, &name])?
                .first()
                .map(|row| Ok(row.try_get(0)?))
                .transpose()
        })
    }

    /// The steps of task `id`, read on `conn`.
    pub(super) fn task_steps(&self, conn: &mut Conn, id: i64) -> Result<Vec<StepInfo>> {
        conn.query(&self.sql(OF_TASK), &[&id])?
            .iter()
            .map(|row| {
                Ok(StepInfo {
                    name: row.try_get(0)?,
                    output: row.try_get(1)?,
                    recorded_at_unix_ms: row.try_get(2)?,
                })
            })
            .collect()
    }

    /// `Store::clear_steps_after`, in one transaction that locks the task
    /// against a claim meanwhile.
    pub(super) fn clear_task_steps_after(&self, id: i64, name: &str) -> Result<u64> {
        self.write(|tx| {
            let state: Option<i16> = tx
                .query_opt(
                    &self.sql("SELECT state FROM @.tasks WHERE id = $1 AND queue = $2 FOR UPDATE"),
                    &[&id, &self.queue],
                )?
                .map(|row| row.try_get(0))
                .transpose()?;
            let order: Option<i64> = tx
                .query_opt(
                    &self.sql("SELECT seq FROM @.steps WHERE task = $1 AND name = $2"),
                    &[&id, &name],
                )?
                .map(|row| row.try_get(0))
                .transpose()?;
            let after = steps_to_clear(&self.queue, id, name, state.map(i64::from), order)?;
            tx.execute(
                &self.sql("DELETE FROM @.steps WHERE task = $1 AND seq > $2"),
                &[&id, &after],
            )
        })
    }
}
