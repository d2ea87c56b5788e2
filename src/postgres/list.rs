//! Looking at a queue: counts, lists, a task's information, timings and
//! the oldest ready task; and the queues and the last id of the schema.

use postgres::Row;

use super::PostgresStore;
use crate::error::{Error, Result};
use crate::store::{delayed_condition, state_condition, visible_state, ListFrom};
use crate::task::{Delayed, Holder, Lease, TaskInfo, TaskState, TaskTiming};

/// The time the ready task of queue `$1` that has been ready longest
/// became ready, found as SQLite does (see `sqlite/list.rs`), and the
/// server's time.
const OLDEST_READY: &str = "WITH RECURSIVE level(priority) AS (
        SELECT max(priority) FROM @.tasks WHERE queue = $1 AND state = 0
        UNION ALL
        SELECT (SELECT max(priority) FROM @.tasks
                WHERE queue = $1 AND state = 0 AND priority < level.priority)
        FROM level WHERE level.priority IS NOT NULL)
    SELECT least(
        (SELECT min((SELECT run_at FROM @.tasks
                     WHERE queue = $1 AND state = 0 AND priority = level.priority
                     ORDER BY run_at LIMIT 1))
         FROM level WHERE level.priority IS NOT NULL),
        (SELECT min(run_at) FROM @.tasks WHERE queue = $1 AND state = 4 AND run_at <= NOW_MS)),
        NOW_MS";

/// Counts the tasks of queue `$1` in `state`.
fn count_sql(state: TaskState) -> String {
    format!(
        "SELECT count(*) FROM @.tasks WHERE queue = $1 AND {}",
        state_condition(state)
    )
}

/// Lists up to `$3` tasks of queue `$1` in `state` beyond id `$2`, in the
/// order `from` asks.
fn list_sql(state: TaskState, from: ListFrom) -> String {
    let (range, order) = match from {
        ListFrom::After(_) => ("id > $2", "id"),
        ListFrom::Before(_) => ("id < $2", "id DESC"),
    };
    format!(
        "SELECT {TASK_INFO}
         FROM @.tasks t WHERE queue = $1 AND {} AND {range} ORDER BY {order} LIMIT $3",
        state_condition(state)
    )
}

/// The timings of queue `$1` since `$2`, at most `$3` of each kind (see
/// `Store::timings_since`), in one statement: the leased and cancelling
/// tasks through their indexes (as many as are held), the done and dead
/// ones ended since `$2` through theirs, in their order.
pub(super) const TIMINGS: &str =
    "(SELECT id, state, attempts, run_at, claimed_at, finished_at FROM @.tasks
        WHERE queue = $1 AND state = 1 AND claimed_at >= $2 LIMIT $3)
    UNION ALL
    (SELECT id, state, attempts, run_at, claimed_at, finished_at FROM @.tasks
        WHERE queue = $1 AND state = 6 AND claimed_at >= $2 LIMIT $3)
    UNION ALL
    (SELECT id, state, attempts, run_at, claimed_at, finished_at FROM @.tasks
        WHERE queue = $1 AND state = 2 AND finished_at >= $2 AND claimed_at IS NOT NULL
        ORDER BY finished_at LIMIT $3)
    UNION ALL
    (SELECT id, state, attempts, run_at, claimed_at, finished_at FROM @.tasks
        WHERE queue = $1 AND state = 3 AND finished_at >= $2 AND claimed_at IS NOT NULL
        ORDER BY finished_at LIMIT $3)";

fn timing_from_row(row: &Row) -> Result<TaskTiming> {
    Ok(TaskTiming {
        id: row.try_get(0)?,
        state: visible_state(i64::from(row.try_get::<_, i16>(1)?))?,
        attempts: count32(row, 2)?,
        run_at_unix_ms: row.try_get(3)?,
        claimed_at_unix_ms: row.try_get(4)?,
        finished_at_unix_ms: row.try_get(5)?,
    })
}

/// The columns of a task as [`info_from_row`] reads them.
const TASK_INFO: &str =
    "id, state, attempts, max_attempts, priority, run_at, last_error, payload, result, progress,
     CASE WHEN state = 7 THEN ARRAY(SELECT parent FROM @.dependencies
                                    WHERE task = t.id ORDER BY parent) END,
     group_key, created_at, claimed_at,
     CASE WHEN state IN (2, 3, 5) THEN finished_at END, expires_at, deadline";

fn info_from_row(row: &Row) -> Result<TaskInfo> {
    Ok(TaskInfo {
        id: row.try_get(0)?,
        state: visible_state(i64::from(row.try_get::<_, i16>(1)?))?,
        attempts: count32(row, 2)?,
        max_attempts: count32(row, 3)?,
        priority: row.try_get(4)?,
        run_at_unix_ms: row.try_get(5)?,
        last_error: row.try_get(6)?,
        payload: row.try_get(7)?,
        result: row.try_get(8)?,
        progress: row.try_get(9)?,
        waiting_for: row.try_get::<_, Option<Vec<i64>>>(10)?.unwrap_or_default(),
        group: row.try_get(11)?,
        created_at_unix_ms: row.try_get(12)?,
        claimed_at_unix_ms: row.try_get(13)?,
        finished_at_unix_ms: row.try_get(14)?,
        expires_at_unix_ms: row.try_get(15)?,
        deadline_unix_ms: row.try_get(16)?,
        steps: Vec::new(),
        ended_attempts: Vec::new(),
    })
}

/// A count read from the database as a `u32` (tq writes only those).
pub(super) fn count32(row: &Row, column: usize) -> Result<u32> {
    let value: i64 = row.try_get(column)?;
    Ok(u32::try_from(value).unwrap_or(u32::MAX))
}

/// The queues with a task in any state, sorted: in each state's partial
/// index (all start with the queue's name), a skip from name to name. The
/// states are literals, so that each partial index can serve its branch.
fn queue_names_sql() -> String {
    let states = [0, 1, 2, 3, 4, 7];
    let branches: Vec<String> = states
        .iter()
        .map(|state| {
            format!(
                "n{state}(name) AS (
                    SELECT min(queue) FROM @.tasks WHERE state = {state}
                    UNION ALL
                    SELECT (SELECT min(queue) FROM @.tasks WHERE state = {state} AND queue > n{state}.name)
                    FROM n{state} WHERE n{state}.name IS NOT NULL)"
            )
        })
        .collect();
    let names: Vec<String> = states
        .iter()
        .map(|state| format!("SELECT name FROM n{state} WHERE name IS NOT NULL"))
        .collect();
    format!(
        "WITH RECURSIVE {} {} ORDER BY 1",
        branches.join(", "),
        names.join(" UNION ")
    )
}

/// The last value the tasks' id sequence handed out, 0 before the first.
const LAST_ID: &str = "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM @.tasks_id_seq";

impl PostgresStore {
    /// How many tasks are in `state` (`Store::count`).
    pub(super) fn count_tasks(&self, state: TaskState) -> Result<u64> {
        let count: i64 = self.read_value(&count_sql(state), &[&self.queue])?;
        Ok(count as u64)
    }

    /// How many ordered groups have blocked tasks (`Store::groups_waiting`).
    pub(super) fn count_groups_waiting(&self) -> Result<u64> {
        let count: i64 = self.read_value(
            "SELECT count(DISTINCT group_key) FROM @.tasks
             WHERE queue = $1 AND state = 7 AND group_key IS NOT NULL",
            &[&self.queue],
        )?;
        Ok(count as u64)
    }

    /// When the oldest ready task became ready (`Store::oldest_ready`).
    pub(super) fn oldest_ready_at(&self, now: i64) -> Result<Option<i64>> {
        let sql = self.sql(OLDEST_READY);
        let (oldest, server_now): (Option<i64>, i64) = self.read(|conn| {
            let rows = conn.query(&sql, &[&self.queue])?;
            let row = &rows[0];
            Ok((row.try_get(0)?, row.try_get(1)?))
        })?;
        // The engine measures the age on its own clock: same age, its time.
        Ok(oldest.map(|ready_at| now.saturating_sub(server_now.saturating_sub(ready_at))))
    }

    /// Task `id` of the queue, if any (`Store::task`).
    pub(super) fn task_info(&self, id: i64) -> Result<Option<TaskInfo>> {
        let sql = self.sql(&format!(
            "SELECT {TASK_INFO} FROM @.tasks t WHERE id = $1 AND queue = $2"
        ));
        self.read(|conn| {
            let Some(row) = conn.query(&sql, &[&id, &self.queue])?.into_iter().next() else {
                return Ok(None);
            };
            let mut task = info_from_row(&row)?;
            task.steps = self.task_steps(conn, id)?;
            task.ended_attempts = self.task_attempts(conn, id)?;
            Ok(Some(task))
        })
    }

    /// The timings of the queue since `since` (`Store::timings_since`).
    pub(super) fn read_timings(&self, since: i64, limit: usize) -> Result<Vec<TaskTiming>> {
        let sql = self.sql(TIMINGS);
        let limit = limit.min(i64::MAX as usize) as i64;
        self.read(|conn| {
            conn.query(&sql, &[&self.queue, &since, &limit])?
                .iter()
                .map(timing_from_row)
                .collect()
        })
    }

    /// Up to `limit` tasks in `state` from where `from` says (`Store::list`).
    pub(super) fn list_tasks(
        &self,
        state: TaskState,
        from: ListFrom,
        limit: usize,
    ) -> Result<Vec<TaskInfo>> {
        let sql = self.sql(&list_sql(state, from));
        let limit = limit.min(i64::MAX as usize) as i64;
        let (ListFrom::After(bound) | ListFrom::Before(bound)) = from;
        self.read(|conn| {
            conn.query(&sql, &[&self.queue, &bound, &limit])?
                .iter()
                .map(info_from_row)
                .collect()
        })
    }

    /// Up to `limit` delayed tasks of `kind` beyond `after`, due after the
    /// server's time now (`Store::list_delayed`).
    pub(super) fn list_delayed_tasks(
        &self,
        kind: Delayed,
        after: (i64, i64),
        limit: usize,
    ) -> Result<Vec<TaskInfo>> {
        let sql = self.sql(&format!(
            "SELECT {TASK_INFO} FROM @.tasks t WHERE queue = $1 AND {} ORDER BY run_at, id LIMIT $4",
            delayed_condition(kind, "NOW_MS", "$2", "$3")
        ));
        let limit = limit.min(i64::MAX as usize) as i64;
        self.read(|conn| {
            conn.query(&sql, &[&self.queue, &after.0, &after.1, &limit])?
                .iter()
                .map(info_from_row)
                .collect()
        })
    }

    /// How many delayed tasks of `kind` there are, up to `up_to`
    /// (`Store::count_delayed`).
    pub(super) fn count_delayed_tasks(&self, kind: Delayed, up_to: u64) -> Result<u64> {
        let sql = format!(
            "SELECT count(*) FROM (SELECT 1 FROM @.tasks WHERE queue = $1 AND {} LIMIT $4) delayed",
            delayed_condition(kind, "NOW_MS", "$2", "$3")
        );
        let up_to = up_to.min(i64::MAX as u64) as i64;
        let count: i64 = self.read_value(&sql, &[&self.queue, &i64::MIN, &i64::MIN, &up_to])?;
        Ok(count as u64)
    }

    /// Up to `limit` of the queue's leases with their holders, by holder
    /// then expiry; only task `only`'s when given (`Store::leases`).
    pub(super) fn read_leases(&self, only: Option<i64>, limit: usize) -> Result<Vec<Lease>> {
        let sql = self.sql(
            "SELECT t.id, t.holder_id, h.seen_alive_at, t.claimed_at, t.lease_expires_at
             FROM @.tasks t LEFT JOIN @.holders h ON h.id = t.holder_id
             WHERE t.queue = $1 AND (t.state = 1 OR t.state = 6) AND ($2::int8 IS NULL OR t.id = $2)
             ORDER BY t.holder_id, t.lease_expires_at, t.id LIMIT $3",
        );
        let limit = limit.min(i64::MAX as usize) as i64;
        self.read(|conn| {
            conn.query(&sql, &[&self.queue, &only, &limit])?
                .iter()
                .map(|row| {
                    Ok(Lease {
                        task_id: row.try_get(0)?,
                        holder: Holder {
                            id: row.try_get::<_, Option<i32>>(1)?.map_or(0, i64::from),
                            pid: None,
                            boot_id: None,
                            seen_alive_at_unix_ms: row.try_get(2)?,
                        },
                        claimed_at_unix_ms: row.try_get::<_, Option<i64>>(3)?.unwrap_or(0),
                        expires_at_unix_ms: row.try_get::<_, Option<i64>>(4)?.unwrap_or(0),
                    })
                })
                .collect()
        })
    }

    /// The task stored under unique key `key` (`Store::task_with_unique_key`).
    pub(super) fn task_info_by_unique_key(&self, key: &str) -> Result<Option<TaskInfo>> {
        let sql = self.sql(&format!(
            "SELECT {TASK_INFO} FROM @.tasks t WHERE queue = $1 AND unique_key = $2"
        ));
        self.read(|conn| {
            conn.query(&sql, &[&self.queue, &key])?
                .first()
                .map(info_from_row)
                .transpose()
        })
    }

    /// The queues holding a task (`Store::queue_names`).
    pub(super) fn read_queue_names(&self) -> Result<Vec<String>> {
        let sql = self.sql(&queue_names_sql());
        self.read(|conn| {
            conn.query(&sql, &[])?
                .iter()
                .map(|row| Ok(row.try_get(0)?))
                .collect()
        })
    }

    /// The highest task id handed out (`Store::last_id`).
    pub(super) fn read_last_id(&self) -> Result<i64> {
        self.read_value(LAST_ID, &[])
    }

    /// One number from a query returning one row and column.
    pub(super) fn read_value<T>(&self, sql: &str, params: super::pool::Params<'_>) -> Result<T>
    where
        T: for<'a> postgres::types::FromSql<'a>,
    {
        let sql = self.sql(sql);
        self.read(|conn| {
            let rows = conn.query(&sql, params)?;
            let row = rows.first().ok_or_else(|| {
                Error::new(
                    crate::ErrorKind::Internal,
                    "a query for one value returned no row",
                )
            })?;
            Ok(row.try_get(0)?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_server::{explain, fresh_store, server};
    use super::*;
    use crate::store::Store;

    #[test]
    fn pending_tasks_are_counted_and_listed_through_the_partial_indexes() {
        let Some(url) = server("pending_tasks_are_counted_and_listed_through_the_partial_indexes")
        else {
            return;
        };
        let schema = format!("unit_plans_{}", std::process::id());
        let store = fresh_store(&url, &schema, "default");
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        // History dwarfs the pending tasks, as on a queue that keeps it.
        client
            .batch_execute(&format!(
                "INSERT INTO \"{schema}\".tasks
                     (queue, state, payload, created_at, run_at, max_attempts, finished_at)
                 SELECT 'default', CASE WHEN i % 1000 = 0 THEN i % 3000 / 1000 * 4 ELSE 2 END,
                        '1', 0, i, 3, i
                 FROM generate_series(1, 100000) AS i;
                 ANALYZE \"{schema}\".tasks"
            ))
            .unwrap();
        for (sql, bound) in [
            (count_sql(TaskState::Pending), 0),
            (list_sql(TaskState::Pending, ListFrom::After(0)), 0),
            (
                list_sql(TaskState::Pending, ListFrom::Before(i64::MAX)),
                i64::MAX,
            ),
        ] {
            let sql = store
                .sql(&sql)
                .replace("$1", "'default'")
                .replace("$2", &bound.to_string())
                .replace("$3", "100");
            let plan = explain(&mut client, &sql);
            assert!(!plan.contains("Seq Scan"), "{sql}\n{plan}");
            assert!(
                plan.contains("tasks_ready") && plan.contains("tasks_waiting"),
                "{sql}\n{plan}"
            );
        }
        assert_eq!(store.count(TaskState::Pending).unwrap(), 67);
        assert_eq!(
            store
                .list(TaskState::Pending, ListFrom::After(0), 1000)
                .unwrap()
                .len(),
            67
        );
        drop(store);
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }
}
