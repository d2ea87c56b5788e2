//! Looking at a queue: counts, pages of tasks, one task, timings, and
//! the names of the queues.

use std::collections::BTreeSet;

use rusqlite::{params, Connection, OptionalExtension, Row};

use super::claim::{ids_from_json, READY_IN_LINE};
use crate::error::Result;
use crate::store::{delayed_condition, state_condition, visible_state, ListFrom, STORED_STATES};
use crate::task::{Delayed, Holder, Lease, TaskInfo, TaskState, TaskTiming};

/// Counts the tasks of queue `?1` in `state`: one range of a partial index
/// per stored state.
pub(super) fn count_sql(state: TaskState) -> String {
    format!(
        "SELECT count(*) FROM tq_tasks WHERE queue = ?1 AND {}",
        state_condition(state)
    )
}

/// How many ids a page of [`list`] reads in id order first (or 16 per
/// task asked for, if more): 8,192 rows of a million-task file read in
/// about a millisecond (the `serve` benchmark measures the pages).
const LIST_WALK: i64 = 8192;

/// A page of queue `queue`'s tasks in `state` from `from`, by id, read in
/// one snapshot (callers run it in a read transaction) without scanning
/// the table. It reads the ids that follow in windows of [`LIST_WALK`]
/// ids, each twice the one before, until the page is full; a state's
/// tasks are usually many where they are found at all (a backlog, a
/// history), so a window or two finds a page of them.
/// Before each further window it counts the state's tasks up to that
/// window's size: a state with fewer has the rest of the page found
/// through its partial indexes and sorted by id, for less than the window
/// would cost. A page so costs at most a few times the lesser of the ids
/// it must pass and the tasks in the state. An index of every task by
/// state and id would cost a page nothing, at the price of one more index
/// entry written by every push, claim and finish (measured: pull and
/// finish at `normal` fell from about 0.6 to 0.44 of bare SQLite's rate).
pub(super) fn list(
    conn: &Connection,
    queue: &str,
    state: TaskState,
    from: ListFrom,
    limit: usize,
) -> Result<Vec<TaskInfo>> {
    let limit = limit.min(i64::MAX as usize) as i64;
    let Some(ids) = ids_beyond(conn, from)? else {
        return Ok(Vec::new());
    };
    read_page(conn, queue, state, from, limit, ids)
}

/// The ids a page of [`list`] may read: from `start` (excluded) on to
/// `end`, `step` moving away from the page's start.
struct IdsBeyond {
    start: i64,
    end: i64,
    step: fn(i64, i64) -> i64,
}

/// Where the ids beyond the page's start begin and end, or none when the
/// table is empty; the start is moved to the table's first or last id
/// when it lies beyond (the first page, or ids purged since).
fn ids_beyond(conn: &Connection, from: ListFrom) -> Result<Option<IdsBeyond>> {
    let (first, last): (Option<i64>, Option<i64>) = conn
        .prepare_cached(ENDS_OF_IDS)?
        .query_row([], |row| Ok((row.get(0)?, row.get(1)?)))?;
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(None);
    };
    let (start, end, step): (i64, i64, fn(i64, i64) -> i64) = match from {
        ListFrom::After(id) => (id.max(first.saturating_sub(1)), last, i64::saturating_add),
        ListFrom::Before(id) => (id.min(last.saturating_add(1)), first, i64::saturating_sub),
    };
    Ok(Some(IdsBeyond { start, end, step }))
}

/// Reads up to `limit` tasks of `queue` in `state` among `ids`, in windows
/// of ids that double, until the page is full, the ids run out, or the
/// state's tasks are few enough to be found through its partial indexes
/// instead (see [`list`]).
fn read_page(
    conn: &Connection,
    queue: &str,
    state: TaskState,
    from: ListFrom,
    limit: i64,
    ids: IdsBeyond,
) -> Result<Vec<TaskInfo>> {
    let IdsBeyond {
        start: mut bound,
        end,
        step,
    } = ids;
    let walk_sql = list_walk_sql(state, from);
    let mut window = LIST_WALK.max(limit.saturating_mul(16));
    let mut page = Vec::new();
    loop {
        let walked_to = step(bound, window);
        let left = limit - page.len() as i64;
        page.extend(read_list(
            conn,
            &walk_sql,
            params![queue, bound, left, walked_to],
        )?);
        bound = walked_to;
        let past_the_end = match from {
            ListFrom::After(_) => bound >= end,
            ListFrom::Before(_) => bound <= end,
        };
        if page.len() as i64 == limit || past_the_end {
            break;
        }
        window = window.saturating_mul(2);
        let in_state: i64 = conn
            .prepare_cached(&count_up_to_sql(state))?
            .query_row(params![queue, window], |row| row.get(0))?;
        if in_state < window {
            let left = limit - page.len() as i64;
            page.extend(read_list(
                conn,
                &list_sql(state, from),
                params![queue, bound, left],
            )?);
            break;
        }
    }
    Ok(page)
}

/// The tasks of queue `?1` in `state`, counted up to `?2`, through the
/// state's partial indexes.
pub(super) fn count_up_to_sql(state: TaskState) -> String {
    format!(
        "SELECT count(*) FROM (SELECT 1 FROM tq_tasks WHERE queue = ?1 AND {} LIMIT ?2)",
        state_condition(state)
    )
}

/// Up to `limit` of queue `queue`'s delayed tasks of `kind` (see
/// `Store::list_delayed`): a range of the index of waiting tasks.
pub(super) fn list_delayed(
    conn: &Connection,
    queue: &str,
    kind: Delayed,
    after: (i64, i64),
    now: i64,
    limit: usize,
) -> Result<Vec<TaskInfo>> {
    let limit = limit.min(i64::MAX as usize) as i64;
    read_list(
        conn,
        &list_delayed_sql(kind),
        params![queue, now, after.0, after.1, limit],
    )
}

/// Lists up to `?5` of queue `?1`'s delayed tasks of `kind` due after
/// `?2`, beyond `(run_at, id)` `(?3, ?4)`, soonest first.
pub(super) fn list_delayed_sql(kind: Delayed) -> String {
    format!(
        "SELECT {TASK_INFO} FROM tq_tasks WHERE queue = ?1 AND {} ORDER BY run_at, id LIMIT ?5",
        delayed_condition(kind, "?2", "?3", "?4")
    )
}

/// Counts up to `?5` of what [`list_delayed_sql`] lists.
pub(super) fn count_delayed_sql(kind: Delayed) -> String {
    format!(
        "SELECT count(*) FROM (SELECT 1 FROM tq_tasks WHERE queue = ?1 AND {} LIMIT ?5)",
        delayed_condition(kind, "?2", "?3", "?4")
    )
}

/// How many delayed tasks of `kind` queue `queue` has, up to `up_to`.
pub(super) fn count_delayed(
    conn: &Connection,
    queue: &str,
    kind: Delayed,
    now: i64,
    up_to: u64,
) -> Result<u64> {
    let up_to = up_to.min(i64::MAX as u64) as i64;
    let count: i64 = conn
        .prepare_cached(&count_delayed_sql(kind))?
        .query_row(params![queue, now, i64::MIN, i64::MIN, up_to], |row| {
            row.get(0)
        })?;
    Ok(count as u64)
}

/// Up to `?3` of queue `?1`'s leased and cancelling tasks (only task `?2`
/// when not NULL) with their holders, through the indexes of leased tasks.
pub(super) const LEASES: &str =
    "SELECT t.id, t.holder_id, h.pid, h.boot_id, t.claimed_at, t.lease_expires_at
    FROM tq_tasks t LEFT JOIN tq_holders h ON h.id = t.holder_id
    WHERE t.queue = ?1 AND (t.state = 1 OR t.state = 6) AND (?2 IS NULL OR t.id = ?2)
    ORDER BY t.holder_id, t.lease_expires_at, t.id LIMIT ?3";

/// Up to `limit` of queue `queue`'s leases (see `Store::leases`).
pub(super) fn leases(
    conn: &Connection,
    queue: &str,
    only: Option<i64>,
    limit: usize,
) -> Result<Vec<Lease>> {
    let limit = limit.min(i64::MAX as usize) as i64;
    let mut statement = conn.prepare_cached(LEASES)?;
    let rows = statement.query_map(params![queue, only, limit], |row| {
        Ok(Lease {
            task_id: row.get(0)?,
            holder: Holder {
                id: row.get::<_, Option<i64>>(1)?.unwrap_or(0),
                pid: row.get(2)?,
                boot_id: row.get(3)?,
                seen_alive_at_unix_ms: None,
            },
            claimed_at_unix_ms: row.get::<_, Option<i64>>(4)?.unwrap_or(0),
            expires_at_unix_ms: row.get::<_, Option<i64>>(5)?.unwrap_or(0),
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The table's first and last ids, each one step down its B-tree (a
/// `min` and a `max` in one `SELECT` would read every row).
pub(super) const ENDS_OF_IDS: &str =
    "SELECT (SELECT min(id) FROM tq_tasks), (SELECT max(id) FROM tq_tasks)";

fn read_list(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> Result<Vec<TaskInfo>> {
    let mut statement = conn.prepare_cached(sql)?;
    let rows = statement.query_map(params, |row| Ok(info_from_row(row)))?;
    rows.map(|row| row?).collect()
}

/// The tasks of queue `?1` in `state` among the ids from `?2` (excluded)
/// to `?4` (included), at most `?3`, in the order `from` asks: a range of
/// the table's own ids, never a scan.
pub(super) fn list_walk_sql(state: TaskState, from: ListFrom) -> String {
    let (range, order) = match from {
        ListFrom::After(_) => ("id > ?2 AND id <= ?4", "id"),
        ListFrom::Before(_) => ("id < ?2 AND id >= ?4", "id DESC"),
    };
    format!(
        "SELECT {TASK_INFO} FROM tq_tasks NOT INDEXED
         WHERE {range} AND queue = ?1 AND {} ORDER BY {order} LIMIT ?3",
        state_condition(state)
    )
}

/// The tasks of queue `?1` in `state` beyond id `?2`, at most `?3`, in the
/// order `from` asks: the partial indexes of the state find its tasks,
/// which are then sorted by id, so this costs as much as the tasks in that
/// state beyond `?2`, never the whole table (done history included).
pub(super) fn list_sql(state: TaskState, from: ListFrom) -> String {
    let (range, order) = match from {
        ListFrom::After(_) => ("id > ?2", "id"),
        ListFrom::Before(_) => ("id < ?2", "id DESC"),
    };
    format!(
        "SELECT {TASK_INFO}
         FROM tq_tasks WHERE queue = ?1 AND {} AND {range} ORDER BY {order} LIMIT ?3",
        state_condition(state)
    )
}

/// How many ordered groups of `queue` have a task blocked, waiting for its
/// turn (see `Store::groups_waiting`).
pub(super) fn groups_waiting(conn: &Connection, queue: &str) -> Result<i64> {
    // Named, else the group index, in group order for DISTINCT, would
    // read every grouped task rather than the blocked ones.
    Ok(conn
        .prepare_cached(
            "SELECT count(DISTINCT group_key) FROM tq_tasks INDEXED BY tq_tasks_blocked
                     WHERE queue = ?1 AND state = 7 AND group_key IS NOT NULL",
        )?
        .query_row([queue], |row| row.get(0))?)
}

/// When the oldest task of `queue` ready at `now` became due (see
/// `Store::oldest_ready`).
pub(super) fn oldest_ready(conn: &Connection, queue: &str, now: i64) -> Result<Option<i64>> {
    // Ready tasks are indexed by priority first: the oldest ready
    // task is the first of one of its priorities, found by skipping
    // from priority to priority rather than reading every entry.
    let ready: Option<i64> = conn
        .prepare_cached(&format!(
            "WITH RECURSIVE level(priority) AS (
                         SELECT max(priority) FROM tq_tasks WHERE {READY_IN_LINE}
                         UNION ALL
                         SELECT (SELECT max(priority) FROM tq_tasks
                                 WHERE {READY_IN_LINE} AND priority < level.priority)
                         FROM level WHERE level.priority IS NOT NULL
                     )
                     SELECT min((SELECT run_at FROM tq_tasks
                                 WHERE {READY_IN_LINE} AND priority = level.priority
                                 ORDER BY run_at LIMIT 1))
                     FROM level WHERE level.priority IS NOT NULL"
        ))?
        .query_row([queue], |row| row.get(0))?;
    let due: Option<i64> = conn
        .prepare_cached(
            "SELECT min(run_at) FROM tq_tasks WHERE queue = ?1 AND state = 4 AND run_at <= ?2",
        )?
        .query_row(params![queue, now], |row| row.get(0))?;
    Ok(ready.into_iter().chain(due).min())
}

/// Task `id` of `queue`, if it is there (see `Store::task`).
pub(super) fn task(conn: &Connection, queue: &str, id: i64) -> Result<Option<TaskInfo>> {
    conn.prepare_cached(&format!(
        "SELECT {TASK_INFO} FROM tq_tasks WHERE id = ?1 AND queue = ?2"
    ))?
    .query_row(params![id, queue], |row| Ok(info_from_row(row)))
    .optional()?
    .transpose()
}

/// The timings of `queue` since `since` (see `Store::timings_since`),
/// read with [`TIMINGS`].
pub(super) fn timings_since(
    conn: &Connection,
    queue: &str,
    since: i64,
    limit: usize,
) -> Result<Vec<TaskTiming>> {
    let mut statement = conn.prepare_cached(TIMINGS)?;
    let rows = statement.query_map(
        params![queue, since, limit.min(i64::MAX as usize) as i64],
        |row| Ok(timing_from_row(row)),
    )?;
    rows.map(|row| row?).collect()
}

/// The task of `queue` that has unique key `key`, if one does (see
/// `Store::task_with_unique_key`).
pub(super) fn task_with_unique_key(
    conn: &Connection,
    queue: &str,
    key: &str,
) -> Result<Option<TaskInfo>> {
    conn.prepare_cached(&format!(
        "SELECT {TASK_INFO} FROM tq_tasks WHERE queue = ?1 AND unique_key = ?2"
    ))?
    .query_row(params![queue, key], |row| Ok(info_from_row(row)))
    .optional()?
    .transpose()
}

/// The names of the queues with a task in any state, sorted (see
/// `Store::queue_names`).
pub(super) fn queue_names(conn: &Connection) -> Result<Vec<String>> {
    let mut names = BTreeSet::new();
    for state in STORED_STATES {
        let mut statement = conn.prepare_cached(&queue_names_sql(state))?;
        let rows = statement.query_map([], |row| row.get::<_, String>(0))?;
        for name in rows {
            names.insert(name?);
        }
    }
    Ok(names.into_iter().collect())
}

/// The timings of queue `?1` since `?2`, at most `?3` of each kind (see
/// `Store::timings_since`), in one statement so in one snapshot: the
/// leased tasks in the index of live tasks (a claim's time is in no
/// index: the leased tasks of the queue are as many as are held), the
/// cancelling ones in theirs, and the done and dead ones ended since `?2`
/// in theirs, in the order of those indexes.
pub(super) const TIMINGS: &str = "SELECT * FROM (
        SELECT id, state, attempts, run_at, claimed_at, finished_at FROM tq_tasks
        WHERE queue = ?1 AND state = 1 AND claimed_at >= ?2 LIMIT ?3)
    UNION ALL SELECT * FROM (
        SELECT id, state, attempts, run_at, claimed_at, finished_at FROM tq_tasks
        WHERE queue = ?1 AND state = 6 AND claimed_at >= ?2 LIMIT ?3)
    UNION ALL SELECT * FROM (
        SELECT id, state, attempts, run_at, claimed_at, finished_at FROM tq_tasks
        WHERE queue = ?1 AND state = 2 AND finished_at >= ?2 AND claimed_at IS NOT NULL
        ORDER BY finished_at LIMIT ?3)
    UNION ALL SELECT * FROM (
        SELECT id, state, attempts, run_at, claimed_at, finished_at FROM tq_tasks
        WHERE queue = ?1 AND state = 3 AND finished_at >= ?2 AND claimed_at IS NOT NULL
        ORDER BY finished_at LIMIT ?3)";

fn timing_from_row(row: &Row<'_>) -> Result<TaskTiming> {
    Ok(TaskTiming {
        id: row.get(0)?,
        state: visible_state(row.get(1)?)?,
        attempts: row.get(2)?,
        run_at_unix_ms: row.get(3)?,
        claimed_at_unix_ms: row.get(4)?,
        finished_at_unix_ms: row.get(5)?,
    })
}

/// The columns of a task as [`info_from_row`] reads them.
const TASK_INFO: &str =
    "id, state, attempts, max_attempts, priority, run_at, last_error, payload, result, progress,
     CASE WHEN state = 7 THEN (SELECT json_group_array(parent) FROM
         (SELECT parent FROM tq_dependencies WHERE task = tq_tasks.id ORDER BY parent))
     END,
     group_key, created_at, claimed_at,
     CASE WHEN state IN (2, 3, 5) THEN finished_at END, expires_at, deadline";

fn info_from_row(row: &Row<'_>) -> Result<TaskInfo> {
    Ok(TaskInfo {
        id: row.get(0)?,
        state: visible_state(row.get(1)?)?,
        attempts: row.get(2)?,
        max_attempts: row.get(3)?,
        priority: row.get(4)?,
        run_at_unix_ms: row.get(5)?,
        last_error: row.get(6)?,
        payload: row.get(7)?,
        result: row.get(8)?,
        progress: row.get(9)?,
        waiting_for: ids_from_json(row.get(10)?)?,
        group: row.get(11)?,
        created_at_unix_ms: row.get(12)?,
        claimed_at_unix_ms: row.get(13)?,
        finished_at_unix_ms: row.get(14)?,
        expires_at_unix_ms: row.get(15)?,
        deadline_unix_ms: row.get(16)?,
        steps: Vec::new(),
        ended_attempts: Vec::new(),
    })
}

/// The queues with a task in `state`, skipping from name to name in the
/// state's index: a few lookups per queue.
fn queue_names_sql(state: i64) -> String {
    format!(
        "WITH RECURSIVE names(name) AS (
             SELECT min(queue) FROM tq_tasks WHERE state = {state}
             UNION ALL
             SELECT (SELECT min(queue) FROM tq_tasks WHERE state = {state} AND queue > names.name)
             FROM names WHERE names.name IS NOT NULL)
         SELECT name FROM names WHERE name IS NOT NULL"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of `rows` tasks of queue `default` whose stored state is
    /// `state_sql`, an SQL expression of the id `value` (an in-memory
    /// file: the shapes below need hundreds of thousands of rows).
    fn tasks_shaped(rows: i64, state_sql: &str) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&conn).unwrap();
        conn.execute_batch(&format!(
            "WITH RECURSIVE n(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n
                                         WHERE value < {rows})
             INSERT INTO tq_tasks (queue, state, payload, created_at, run_at, finished_at)
             SELECT 'default', {state_sql}, '1', 0, value, value FROM n;"
        ))
        .unwrap();
        conn
    }

    /// The shapes of file a page must cope with: a backlog with a few of
    /// each other state among it, a history with a backlog after it, and a
    /// backlog whose first tasks were purged.
    const SHAPES: [(&str, &str); 3] = [
        (
            "backlog",
            "CASE WHEN value % 997 = 0 THEN 3 WHEN value % 1009 = 0 THEN 4
                  WHEN value % 5003 = 0 THEN 1 ELSE 0 END",
        ),
        (
            "history, then a backlog",
            "CASE WHEN value <= 150000 THEN 2 ELSE 0 END",
        ),
        (
            "purged, then a backlog",
            "CASE WHEN value % 2 = 0 THEN 5 ELSE 0 END",
        ),
    ];

    #[test]
    fn pages_of_a_state_are_its_tasks_by_id_in_either_order() {
        for (shape, state_sql) in SHAPES {
            let conn = tasks_shaped(200_000, state_sql);
            if shape.starts_with("purged") {
                conn.execute("DELETE FROM tq_tasks WHERE id <= 120000", [])
                    .unwrap();
            }
            for state in [
                TaskState::Pending,
                TaskState::Leased,
                TaskState::Done,
                TaskState::Dead,
                TaskState::Cancelled,
            ] {
                let every: Vec<i64> = conn
                    .prepare(&format!(
                        "SELECT id FROM tq_tasks NOT INDEXED WHERE {} ORDER BY id",
                        state_condition(state)
                    ))
                    .unwrap()
                    .query_map([], |row| row.get(0))
                    .unwrap()
                    .collect::<rusqlite::Result<_>>()
                    .unwrap();
                for limit in [1, 50, 1000] {
                    // The first pages, and pages from the middle.
                    let middle = every.get(every.len() / 2).copied().unwrap_or(100_000);
                    for (from, expected) in [
                        (
                            ListFrom::After(0),
                            every.iter().take(limit).copied().collect::<Vec<_>>(),
                        ),
                        (
                            ListFrom::After(middle),
                            every
                                .iter()
                                .filter(|id| **id > middle)
                                .take(limit)
                                .copied()
                                .collect(),
                        ),
                        (
                            ListFrom::Before(i64::MAX),
                            every.iter().rev().take(limit).copied().collect(),
                        ),
                        (
                            ListFrom::Before(middle),
                            every
                                .iter()
                                .rev()
                                .filter(|id| **id < middle)
                                .take(limit)
                                .copied()
                                .collect(),
                        ),
                    ] {
                        let page: Vec<i64> = list(&conn, "default", state, from, limit)
                            .unwrap()
                            .iter()
                            .map(TaskInfo::id)
                            .collect();
                        assert_eq!(
                            page, expected,
                            "{shape}, {state:?} from {from:?}, limit {limit}"
                        );
                    }
                }
                // Another queue's tasks are not listed.
                assert!(list(&conn, "other", state, ListFrom::After(0), 10)
                    .unwrap()
                    .is_empty());
            }
        }
    }

    /// The steps of SQLite's virtual machine that a page of `state` from
    /// `from` takes, over every statement [`list`] may run.
    fn cost_of_page(conn: &Connection, state: TaskState, from: ListFrom) -> i32 {
        conn.flush_prepared_statement_cache();
        list(conn, "default", state, from, 50).unwrap();
        [
            ENDS_OF_IDS.to_owned(),
            list_walk_sql(state, from),
            count_up_to_sql(state),
            list_sql(state, from),
        ]
        .iter()
        .map(|sql| {
            conn.prepare_cached(sql)
                .unwrap()
                .get_status(rusqlite::StatementStatus::VmStep)
        })
        .sum()
    }

    #[test]
    fn a_page_costs_far_less_than_sorting_its_state() {
        let conn = tasks_shaped(300_000, SHAPES[0].1);
        // What a page cost when the state's tasks were all sorted by id:
        // the pending tasks' indexes, read whole.
        let sorted_whole = {
            let mut statement = conn
                .prepare(&list_sql(TaskState::Pending, ListFrom::After(0)))
                .unwrap();
            let mut rows = statement.query(params!["default", 0, 50]).unwrap();
            while rows.next().unwrap().is_some() {}
            drop(rows);
            statement.get_status(rusqlite::StatementStatus::VmStep)
        };
        for state in [
            TaskState::Pending,
            TaskState::Leased,
            TaskState::Done,
            TaskState::Dead,
            TaskState::Cancelled,
        ] {
            for from in [
                ListFrom::After(0),
                ListFrom::After(150_000),
                ListFrom::Before(i64::MAX),
                ListFrom::Before(150_000),
            ] {
                let page = cost_of_page(&conn, state, from);
                assert!(
                    page * 10 < sorted_whole,
                    "{state:?} from {from:?}: {page} steps, sorting the backlog {sorted_whole}"
                );
            }
        }
    }
}
