//! Every statement on schedules in PostgreSQL. Slots are times on the
//! server's clock, like every other time of the schema: `now` is read from
//! the server in the transaction that uses it, and a schedule's next slot
//! is computed from it, so every machine drives the same slots whatever
//! its own clock says. The engine's clock only says when a waiting pull
//! wakes to drive them ([`crate::store::Store::next_schedule_slot`]).

use postgres::Row;

use super::pool::Tx;
use super::PostgresStore;
use crate::error::{Error, Result};
use crate::schedule::{Schedule, ScheduleInfo, StoredSchedule};
use crate::store::{due_tasks, PutSchedule};
use crate::task::Pushed;

/// The columns [`from_row`] reads, in its order.
const COLUMNS: &str = "name, spec, time_zone, payload, priority, max_attempts, catch_up,
    catch_up_limit, paused, next_slot";

/// The due schedules of queue `$1`, locked; one being driven by another
/// transaction is skipped (that one enqueues its slots). The last column is
/// the server's time.
const DUE: &str = "SELECT COLUMNS, NOW_MS FROM @.schedules
    WHERE queue = $1 AND NOT paused AND next_slot <= NOW_MS
    FOR UPDATE SKIP LOCKED";

fn from_row(row: &Row) -> Result<ScheduleInfo> {
    let spec: String = row.try_get(1)?;
    let max_attempts: i64 = row.try_get(5)?;
    let catch_up: i16 = row.try_get(6)?;
    Ok(ScheduleInfo {
        schedule: Schedule::from_stored(
            row.try_get(0)?,
            &spec,
            row.try_get(2)?,
            row.try_get(3)?,
            row.try_get(4)?,
            u32::try_from(max_attempts).unwrap_or(u32::MAX),
            (i64::from(catch_up), row.try_get(7)?),
        ),
        paused: row.try_get(8)?,
        next_slot: row.try_get(9)?,
    })
}

impl PostgresStore {
    fn schedule_sql(&self, template: &str) -> String {
        self.sql(&template.replace("COLUMNS", COLUMNS))
    }

    fn server_now(&self, tx: &mut Tx<'_>) -> Result<i64> {
        let row = tx.query_opt(&self.sql("SELECT NOW_MS"), &[])?;
        Ok(row.map(|row| row.try_get(0)).transpose()?.unwrap_or(0))
    }

    pub(super) fn put_schedule_row(&self, stored: &StoredSchedule, put: PutSchedule) -> Result<()> {
        let schedule = stored.schedule();
        let (catch_up, catch_up_limit) = schedule.catch_up.stored();
        let catch_up = catch_up as i16;
        let max_attempts = i64::from(stored.task_max_attempts());
        let spec = schedule.spec.stored();
        let timetable = schedule.timetable()?;
        let sql = self.sql(put_schedule_sql(put));
        self.write(|tx| {
            let next_slot = timetable.first_slot(self.server_now(tx)?)?;
            let stored = tx.execute(
                &sql,
                &[
                    &self.queue,
                    &schedule.name,
                    &spec,
                    &schedule.time_zone,
                    &schedule.payload,
                    &schedule.priority,
                    &max_attempts,
                    &catch_up,
                    &catch_up_limit,
                    &next_slot,
                ],
            )?;
            if stored == 0 {
                return Err(Error::invalid_argument(format!(
                    "queue '{}' already has a schedule named '{}' (replace it instead)",
                    self.queue, schedule.name
                )));
            }
            self.notify(tx, &self.queue)
        })
    }

    pub(super) fn remove_schedule_row(&self, name: &str) -> Result<bool> {
        let sql = self.sql("DELETE FROM @.schedules WHERE queue = $1 AND name = $2");
        self.write(|tx| Ok(tx.execute(&sql, &[&self.queue, &name])? > 0))
    }

    pub(super) fn set_schedule_row_paused(&self, name: &str, paused: bool) -> Result<bool> {
        let select = self.schedule_sql(
            "SELECT COLUMNS, NOW_MS FROM @.schedules WHERE queue = $1 AND name = $2 FOR UPDATE",
        );
        let update = self.sql(
            "UPDATE @.schedules SET paused = $3, next_slot = $4 WHERE queue = $1 AND name = $2",
        );
        self.write(|tx| {
            let Some(row) = tx.query_opt(&select, &[&self.queue, &name])? else {
                return Ok(false);
            };
            let info = from_row(&row)?;
            let now: i64 = row.try_get(10)?;
            let next_slot = if paused || !info.paused {
                info.next_slot
            } else {
                info.schedule()
                    .timetable()?
                    .slot_from(info.next_slot, now)?
            };
            tx.execute(&update, &[&self.queue, &name, &paused, &next_slot])?;
            if !paused {
                self.notify(tx, &self.queue)?;
            }
            Ok(true)
        })
    }

    pub(super) fn schedule_rows(&self) -> Result<Vec<ScheduleInfo>> {
        let sql =
            self.schedule_sql("SELECT COLUMNS FROM @.schedules WHERE queue = $1 ORDER BY name");
        self.read(|conn| {
            conn.query(&sql, &[&self.queue])?
                .iter()
                .map(from_row)
                .collect()
        })
    }

    pub(super) fn run_due_schedule_rows(&self) -> Result<u64> {
        let due = self.schedule_sql(DUE);
        let advance =
            self.sql("UPDATE @.schedules SET next_slot = $3 WHERE queue = $1 AND name = $2");
        let pause = self.sql("UPDATE @.schedules SET paused = true WHERE queue = $1 AND name = $2");
        self.write(|tx| {
            let mut stored = 0;
            for row in tx.query(&due, &[&self.queue])? {
                let info = from_row(&row)?;
                let now: i64 = row.try_get(10)?;
                let Some((tasks, after)) = due_tasks(&info.schedule, info.next_slot, now)? else {
                    tx.execute(&pause, &[&self.queue, &info.schedule().name])?;
                    continue;
                };
                for task in &tasks {
                    if let Pushed::Stored(_) = self.push_one(tx, task, &[])? {
                        stored += 1;
                    }
                }
                tx.execute(&advance, &[&self.queue, &info.schedule().name, &after])?;
            }
            Ok(stored)
        })
    }

    pub(super) fn next_schedule_row_slot(&self, now: i64) -> Result<Option<i64>> {
        let sql = self
            .sql("SELECT min(next_slot) - NOW_MS FROM @.schedules WHERE queue = $1 AND NOT paused");
        let rows = self.read(|conn| conn.query(&sql, &[&self.queue]))?;
        let until: Option<i64> = rows
            .first()
            .map(|row| row.try_get(0))
            .transpose()?
            .flatten();
        // The server says how long until then; the engine waits on its clock.
        Ok(until.map(|until| now.saturating_add(until)))
    }
}

/// The statement that stores a schedule, by how it treats one of the same
/// name: `Add` refuses it (stores nothing), `Replace` overwrites it and
/// resumes it, `Upsert` keeps its pause, and its next slot while its timing
/// is unchanged.
fn put_schedule_sql(put: PutSchedule) -> &'static str {
    match put {
        PutSchedule::Replace => {
            "INSERT INTO @.schedules
            (queue, name, spec, time_zone, payload, priority, max_attempts, catch_up,
             catch_up_limit, paused, next_slot)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, false, $10)
         ON CONFLICT (queue, name) DO UPDATE SET
            spec = excluded.spec, time_zone = excluded.time_zone,
            payload = excluded.payload, priority = excluded.priority,
            max_attempts = excluded.max_attempts, catch_up = excluded.catch_up,
            catch_up_limit = excluded.catch_up_limit, paused = false,
            next_slot = excluded.next_slot"
        }
        // The right-hand sides read the row as it was.
        PutSchedule::Upsert => {
            "INSERT INTO @.schedules AS s
            (queue, name, spec, time_zone, payload, priority, max_attempts, catch_up,
             catch_up_limit, paused, next_slot)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, false, $10)
         ON CONFLICT (queue, name) DO UPDATE SET
            next_slot = CASE WHEN s.spec = excluded.spec
                               AND s.time_zone = excluded.time_zone
                               AND s.catch_up = excluded.catch_up
                               AND s.catch_up_limit = excluded.catch_up_limit
                             THEN s.next_slot ELSE excluded.next_slot END,
            spec = excluded.spec, time_zone = excluded.time_zone,
            payload = excluded.payload, priority = excluded.priority,
            max_attempts = excluded.max_attempts, catch_up = excluded.catch_up,
            catch_up_limit = excluded.catch_up_limit"
        }
        PutSchedule::Add => {
            "INSERT INTO @.schedules
            (queue, name, spec, time_zone, payload, priority, max_attempts, catch_up,
             catch_up_limit, paused, next_slot)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, false, $10)
         ON CONFLICT (queue, name) DO NOTHING"
        }
    }
}
