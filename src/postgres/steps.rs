//! Step checkpoints: recording a held task's step, reading one back, the
//! steps of a task, and clearing those after a named one, as SQLite's
//! `steps.rs` does; and the migration that created their table and the SQL
//! function `step` ([`STEPS`]).

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

/// 14: step checkpoints (SQLite's version 15): the table of steps, seq
/// being the order of recording, whose foreign key removes a task's steps
/// with it, whichever statement deletes the task; and the SQL function
/// `step(id, token, name, output)`, which records a step of a held task
/// in the application's own transaction as `steps.rs` does (true once
/// stored, false when already recorded: the first output is kept), so that
/// a step writing to the application's tables runs once. Errors: SQLSTATE
/// 22023 for a bad name or an output too long, 22P02 for an output that is
/// not JSON, 55000 for a receipt not held.
pub(super) const STEPS: &str = "CREATE TABLE @.steps (
        seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        task        bigint NOT NULL REFERENCES @.tasks (id) ON DELETE CASCADE,
        name        text   NOT NULL,
        output      text   NOT NULL,
        recorded_at bigint NOT NULL,
        UNIQUE (task, name)
    );
    CREATE FUNCTION @.step(id bigint, token bigint, name text, output text)
    RETURNS boolean LANGUAGE plpgsql AS $$
    #variable_conflict use_column
    DECLARE
        why text;
    BEGIN
        IF octet_length(step.name) IS NULL OR octet_length(step.name) NOT BETWEEN 1 AND MAX_STEP_NAME_LEN THEN
            RAISE EXCEPTION 'a step name must be 1 to MAX_STEP_NAME_LEN bytes long, got % bytes',
                coalesce(octet_length(step.name), 0) USING ERRCODE = '22023';
        END IF;
        IF octet_length(step.output) > MAX_PAYLOAD_LEN THEN
            RAISE EXCEPTION 'the step''s output is % bytes; this queue''s limit is %',
                octet_length(step.output), MAX_PAYLOAD_LEN USING ERRCODE = '22023';
        END IF;
        BEGIN
            PERFORM coalesce(step.output, '')::json;
        EXCEPTION WHEN invalid_text_representation THEN
            GET STACKED DIAGNOSTICS why = PG_EXCEPTION_DETAIL;
            RAISE EXCEPTION 'the step''s output is not JSON: %: %', SQLERRM, why USING ERRCODE = '22P02';
        END;
        PERFORM 1 FROM @.tasks WHERE id = step.id AND state = 1 AND lease_token = step.token
            FOR SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'task % is not held by this delivery: it was already finished or '
                'failed, or its lease was recovered or taken by another worker', step.id
                USING ERRCODE = '55000';
        END IF;
        INSERT INTO @.steps (task, name, output, recorded_at)
        VALUES (step.id, step.name, step.output,
                floor(extract(epoch FROM statement_timestamp()) * 1000)::int8)
        ON CONFLICT (task, name) DO NOTHING;
        RETURN FOUND;
    END $$;";
