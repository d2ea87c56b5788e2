//! The statements of a claim, a finish and the reads stay index lookups,
//! however many tasks a file holds: their query plans, and the steps they
//! take on large files.

use rusqlite::Connection;

use super::claim::{
    claim, ready_first_sql, take_one_sql, take_ready_sql, taken_sql, ANY_DUE, ANY_EXPIRED,
    ANY_PAST_LIMIT, EXPIRED_IN_LINE, FIRST_LEASE_END, FREE_RATE_SLOTS, LIVE_LEASES, NEXT_CLAIMABLE,
    PAST_LIMIT, PROMOTE, READY_WITHIN_LIMITS, USE_RATE_SLOTS,
};
use super::finish::{DEPENDENTS, FORGET_PARENTS, FORGET_WAITING};
use super::list::{
    count_delayed_sql, count_sql, count_up_to_sql, list_delayed_sql, list_sql, list_walk_sql,
    ENDS_OF_IDS, LEASES, TIMINGS,
};
use super::push::push_one;
use super::recover::ANY_CANCEL_EXPIRED;
use super::settings::{MAX_PENDING, PAUSED_UNTIL, SETTINGS};
use crate::store::{group_predecessor_sql, pending_up_to_sql, ListFrom, NewTask, BLOCKED, READY};
use crate::task::{Delayed, TaskState};

/// The query plan of `sql` (its parameters left unbound), one line per step.
fn plan(conn: &Connection, sql: &str) -> String {
    let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let mut rows = statement.raw_query();
    let mut steps = Vec::new();
    while let Some(row) = rows.next().unwrap() {
        steps.push(row.get::<_, String>(3).unwrap());
    }
    steps.join("\n")
}

#[test]
fn claiming_stays_an_index_lookup_with_a_million_blocked_tasks() {
    let conn = Connection::open_in_memory().unwrap();
    super::schema::migrate(&conn).unwrap();
    conn.execute_batch(
        "WITH RECURSIVE n(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM n
                                     WHERE value < 1000000)
         INSERT INTO tq_tasks (queue, state, payload, created_at, run_at, waiting_for)
         SELECT 'default', 7, '1', 0, value, 1 FROM n;
         INSERT INTO tq_dependencies (parent, task, run_anyway)
         SELECT 1, id, 0 FROM tq_tasks;
         INSERT INTO tq_tasks (queue, state, payload, created_at, run_at)
         VALUES ('default', 0, '\"ready\"', 0, 5);
         ANALYZE;",
    )
    .unwrap();
    // Each statement of a claim (and what a finish adds) reads a few
    // entries, however many tasks are blocked.
    use rusqlite::types::Value;
    let steps = |sql: &str, params: Vec<Value>| -> i32 {
        let mut statement = conn.prepare(sql).unwrap();
        let mut rows = statement.query(rusqlite::params_from_iter(params)).unwrap();
        while rows.next().unwrap().is_some() {}
        drop(rows);
        statement.get_status(rusqlite::StatementStatus::VmStep)
    };
    let queue = || Value::Text("default".to_owned());
    for (sql, params) in [
        (ready_first_sql(), vec![queue()]),
        (ANY_DUE.to_owned(), vec![queue(), Value::Integer(10)]),
        (ANY_EXPIRED.to_owned(), vec![queue(), Value::Integer(10)]),
        (NEXT_CLAIMABLE.to_owned(), vec![queue(), Value::Integer(10)]),
        (
            "SELECT task FROM tq_dependencies WHERE parent = ?1".to_owned(),
            vec![Value::Integer(2)],
        ),
    ] {
        let steps = steps(&sql, params);
        assert!(steps < 200, "{steps} steps: {sql}");
    }
    let tasks = claim(&conn, "default", 1, 10, 1000, 1, false).unwrap();
    assert_eq!(tasks.len(), 1);
    assert_eq!(tasks[0].payload(), "\"ready\"");
    let waiting = plan(&conn, DEPENDENTS);
    assert!(waiting.contains("PRIMARY KEY"), "{waiting}");
    let forget_waiting = plan(&conn, FORGET_WAITING);
    assert!(forget_waiting.contains("PRIMARY KEY"), "{forget_waiting}");
    let forget = plan(&conn, FORGET_PARENTS);
    assert!(forget.contains("tq_dependencies_task"), "{forget}");
}

#[test]
fn claiming_stays_an_index_lookup_with_a_thousand_groups_of_a_hundred() {
    let mut conn = Connection::open_in_memory().unwrap();
    super::schema::migrate(&conn).unwrap();
    let tx = conn.transaction().unwrap();
    let grouped = |group: usize| NewTask {
        group: Some((format!("g{group}"), 1)),
        ..NewTask::ready("1")
    };
    for _ in 0..100 {
        for group in 0..1000 {
            push_one(&tx, "default", &grouped(group), &[], 0).unwrap();
        }
    }
    tx.commit().unwrap();
    conn.execute_batch("ANALYZE").unwrap();
    let count = |state: i64| -> i64 {
        conn.query_row(
            "SELECT count(*) FROM tq_tasks WHERE state = ?1",
            [state],
            |row| row.get(0),
        )
        .unwrap()
    };
    assert_eq!(
        (count(READY), count(BLOCKED)),
        (1000, 99_000),
        "a head per group"
    );
    let steps = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> i32 {
        let mut statement = conn.prepare(sql).unwrap();
        let mut rows = statement.query(params).unwrap();
        while rows.next().unwrap().is_some() {}
        drop(rows);
        statement.get_status(rusqlite::StatementStatus::VmStep)
    };
    let first = steps(&ready_first_sql(), &[&"default"]);
    assert!(first < 200, "{first} steps to find the task to claim");
    // A push finds its predecessor from the newest task of its group.
    let predecessor = group_predecessor_sql("tq_tasks", '?');
    let found = steps(&predecessor, &[&"default", &"g7", &0]);
    assert!(found < 200, "{found} steps to find a group's predecessor");
    let plan = plan(&conn, &predecessor);
    assert!(plan.contains("tq_tasks_group"), "{plan}");
    let tasks = claim(&conn, "default", 1, 10, 1000, 1, false).unwrap();
    assert_eq!(tasks.len(), 1);
}

#[test]
fn claims_and_upkeep_are_index_lookups() {
    let conn = Connection::open_in_memory().unwrap();
    super::schema::migrate(&conn).unwrap();
    for (sql, index) in [
        (ready_first_sql().as_str(), "tq_tasks_live"),
        (ANY_EXPIRED, "tq_tasks_live"),
        (ANY_DUE, "tq_tasks_waiting"),
        (take_ready_sql().as_str(), "tq_tasks_live"),
        (READY_WITHIN_LIMITS, "tq_tasks_live"),
        (PROMOTE, "tq_tasks_waiting"),
        (
            "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 2 AND finished_at <= ?2",
            "tq_tasks_done",
        ),
        (
            "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 3 AND finished_at <= ?2",
            "tq_tasks_dead",
        ),
        (
            "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 5 AND finished_at <= ?2",
            "tq_tasks_cancelled",
        ),
        (
            "SELECT id FROM tq_tasks WHERE queue = ?1 AND unique_key = ?2",
            "tq_tasks_unique",
        ),
    ] {
        let plan = plan(&conn, sql);
        assert!(plan.contains(index), "{sql}: {plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{sql} sorts: {plan}");
    }
    for sql in [take_one_sql(), taken_sql()] {
        let plan = plan(&conn, &sql);
        assert!(plan.contains("INTEGER PRIMARY KEY"), "{plan}");
    }
    // Every claim looks for a pending task whose expiry or deadline has
    // passed in the index that holds only those with one, in its order.
    for sql in [ANY_PAST_LIMIT, PAST_LIMIT] {
        let plan = plan(&conn, sql);
        assert!(plan.contains("tq_tasks_not_after"), "{sql}: {plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{sql} sorts: {plan}");
    }
    // Every claim, and every push, looks for its queue's settings.
    for sql in [PAUSED_UNTIL, SETTINGS, MAX_PENDING] {
        let plan = plan(&conn, sql);
        assert!(plan.contains("USING PRIMARY KEY (queue=?)"), "{plan}");
    }
    // A capped queue's push counts its pending tasks in the indexes of
    // ready, waiting and blocked tasks, never in the table.
    let pending = plan(&conn, &pending_up_to_sql("tq_tasks", '?'));
    for index in ["tq_tasks_live", "tq_tasks_waiting", "tq_tasks_blocked"] {
        assert!(pending.contains(index), "{pending}");
    }
    assert!(!pending.contains("SCAN tq_tasks"), "{pending}");
    // A rate-limited queue's claims find their free slots in order.
    for sql in [FREE_RATE_SLOTS, USE_RATE_SLOTS] {
        let plan = plan(&conn, sql);
        assert!(plan.contains("tq_rate_slots_free"), "{plan}");
        assert!(!plan.contains("TEMP B-TREE"), "{sql} sorts: {plan}");
    }
    // A limited queue's claims count its live leases in the indexes.
    let live = plan(&conn, LIVE_LEASES);
    assert!(live.contains("tq_tasks_live"), "{live}");
    assert!(live.contains("tq_tasks_cancelling"), "{live}");
    assert!(!live.contains("SCAN tq_tasks"), "{live}");
    // Every claim looks for a cancelled task's expired lease in any
    // queue: a scan of the index that holds only the tasks cancelled
    // while leased, never of the table.
    let cancelled = plan(&conn, ANY_CANCEL_EXPIRED);
    assert!(
        cancelled.contains("USING COVERING INDEX tq_tasks_cancelling"),
        "{cancelled}"
    );
    // A pull waiting at the limit looks up when the first lease ends.
    let first_end = plan(&conn, FIRST_LEASE_END);
    assert!(first_end.contains("tq_tasks_live"), "{first_end}");
    assert!(first_end.contains("tq_tasks_cancelling"), "{first_end}");
    assert!(!first_end.contains("SCAN tq_tasks"), "{first_end}");
    // The expired leases alone, through their index; the sort keeps only
    // the first `?3`.
    let expired = plan(&conn, EXPIRED_IN_LINE);
    assert!(
        expired.contains("tq_tasks_live (queue=? AND state=? AND lease_expires_at<?)"),
        "{expired}"
    );
    // The timings a monitor samples: the queue's leased tasks (as many
    // as are held) and those ended since a time, each kind through its
    // own index, in its order.
    let timings = plan(&conn, TIMINGS);
    for index in [
        "tq_tasks_live (queue=? AND state=?)",
        "tq_tasks_cancelling (queue=?)",
        "tq_tasks_done (queue=? AND finished_at>?)",
        "tq_tasks_dead (queue=? AND finished_at>?)",
    ] {
        assert!(timings.contains(index), "{index}: {timings}");
    }
    assert!(!timings.contains("SCAN tq_tasks"), "{timings}");
    assert!(!timings.contains("TEMP B-TREE"), "{timings}");
    // Counts of tasks, for monitoring, and pages of them.
    for state in [
        TaskState::Pending,
        TaskState::Leased,
        TaskState::Done,
        TaskState::Dead,
        TaskState::Cancelled,
    ] {
        let count = plan(&conn, &count_sql(state));
        assert!(count.contains("USING"), "{state:?}: {count}");
        assert!(!count.contains("SCAN tq_tasks"), "{state:?} scans: {count}");
        let count_up_to = plan(&conn, &count_up_to_sql(state));
        assert!(count_up_to.contains("USING"), "{state:?}: {count_up_to}");
        assert!(
            !count_up_to.contains("SCAN tq_tasks"),
            "{state:?} scans: {count_up_to}"
        );
        for from in [ListFrom::After(0), ListFrom::Before(0)] {
            let walk = plan(&conn, &list_walk_sql(state, from));
            assert!(
                walk.contains("USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)"),
                "{state:?} {from:?}: {walk}"
            );
            assert!(
                !walk.contains("TEMP B-TREE"),
                "{state:?} {from:?} sorts: {walk}"
            );
            let list = plan(&conn, &list_sql(state, from));
            assert!(list.contains("USING"), "{state:?} {from:?}: {list}");
            assert!(
                !list.contains("SCAN tq_tasks"),
                "{state:?} {from:?} scans: {list}"
            );
        }
    }
    let ends = plan(&conn, ENDS_OF_IDS);
    assert!(!ends.contains("SCAN tq_tasks"), "{ends}");
}

#[test]
fn a_fair_claim_stays_index_lookups_with_ten_thousand_keys() {
    use super::fair::{
        ACTIVATE, ACTIVATE_KEY_OF_TASK, ACTIVATE_PENDING_KEYS, FIRST_TURN, IS_FAIR, KEY_CAP,
        KEY_PENDING, KEY_PENDING_UP_TO, NEXT_TURN,
    };
    let mut conn = Connection::open_in_memory().unwrap();
    super::schema::migrate(&conn).unwrap();
    let tx = conn.transaction().unwrap();
    let keyed = |key: String| NewTask {
        fair_key: Some(key),
        ..NewTask::ready("1")
    };
    // Ten thousand keys of ten ready tasks, and one of ten thousand.
    for _ in 0..10 {
        for key in 0..10_000 {
            push_one(&tx, "default", &keyed(format!("k{key}")), &[], 0).unwrap();
        }
    }
    for _ in 0..10_000 {
        push_one(&tx, "default", &keyed("big".to_owned()), &[], 0).unwrap();
    }
    tx.commit().unwrap();
    conn.execute_batch("ANALYZE").unwrap();
    for (sql, indexes) in [
        (FIRST_TURN, &["tq_fair_keys_line", "tq_tasks_fair"][..]),
        (NEXT_TURN, &["tq_fair_keys_line", "tq_tasks_fair"]),
        (KEY_PENDING, &["tq_tasks_fair"]),
        (
            ACTIVATE_PENDING_KEYS,
            &["tq_tasks_fair", "tq_fair_keys_line"],
        ),
        (ACTIVATE_KEY_OF_TASK, &["tq_fair_keys_line"]),
        (ACTIVATE, &["tq_fair_keys_line"]),
    ] {
        let plan = plan(&conn, sql);
        for index in indexes {
            assert!(plan.contains(index), "{sql}: {plan}");
        }
        assert!(!plan.contains("TEMP B-TREE"), "{sql} sorts: {plan}");
        assert!(!plan.contains("SCAN"), "{sql} scans: {plan}");
    }
    // A key's cap and count: lookups, and a range of the index of keys per
    // pending state (the subqueries' rows are scanned, not the tables).
    for sql in [KEY_CAP, KEY_PENDING_UP_TO] {
        let plan = plan(&conn, sql);
        assert!(!plan.contains("SCAN tq_"), "{sql} scans: {plan}");
    }
    assert_eq!(
        plan(&conn, KEY_PENDING_UP_TO)
            .matches("COVERING INDEX tq_tasks_fair")
            .count(),
        3
    );
    for sql in [IS_FAIR, ACTIVATE_KEY_OF_TASK] {
        let plan = plan(&conn, sql);
        assert!(plan.contains("PRIMARY KEY"), "{sql}: {plan}");
        assert!(!plan.contains("SCAN"), "{sql} scans: {plan}");
    }
    let steps = |sql: &str, params: &[&dyn rusqlite::ToSql]| -> i32 {
        let mut statement = conn.prepare(sql).unwrap();
        let mut rows = statement.query(params).unwrap();
        while rows.next().unwrap().is_some() {}
        drop(rows);
        statement.get_status(rusqlite::StatementStatus::VmStep)
    };
    for (sql, params) in [
        (FIRST_TURN, &[&"default" as &dyn rusqlite::ToSql, &10][..]),
        (NEXT_TURN, &[&"default", &10, &0.0, &"k5000"]),
        (KEY_PENDING, &[&"default", &"big"]),
    ] {
        let steps = steps(sql, params);
        assert!(steps < 200, "{steps} steps: {sql}");
    }
    let tasks = claim(&conn, "default", 3, 10, 1000, 1, false).unwrap();
    assert_eq!(tasks.len(), 3);
}

#[test]
fn delayed_tasks_are_read_through_the_index_of_waiting_tasks_in_its_order() {
    let conn = Connection::open_in_memory().unwrap();
    super::schema::migrate(&conn).unwrap();
    for kind in [Delayed::FirstAttempt, Delayed::Retry] {
        for sql in [list_delayed_sql(kind), count_delayed_sql(kind)] {
            let plan = plan(&conn, &sql);
            assert!(
                plan.contains("tq_tasks_waiting (queue=? AND run_at>?)"),
                "{kind:?}: {plan}"
            );
            assert!(!plan.contains("TEMP B-TREE"), "{kind:?} sorts: {plan}");
        }
    }
}

#[test]
fn leases_are_read_through_the_indexes_of_leased_tasks() {
    let conn = Connection::open_in_memory().unwrap();
    super::schema::migrate(&conn).unwrap();
    let plan = plan(&conn, LEASES);
    assert!(
        plan.contains("tq_tasks_live (queue=? AND state=?)"),
        "{plan}"
    );
    assert!(plan.contains("tq_tasks_cancelling (queue=?)"), "{plan}");
    // The sort is of the queue's leased tasks alone.
    assert!(!plan.contains("SCAN"), "{plan}");
}
