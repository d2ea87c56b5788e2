//! Pushing and finishing in the application's own transaction, through
//! the SQL functions `tq::outbox::install` registers on a connection (the
//! ones tq's SQLite extension registers on any program's SQLite).

mod common;

use std::sync::Arc;
use std::thread;

use common::{pull, waiting, Scratch};
use tq::rusqlite::Connection;
use tq::{ErrorKind, PushOptions, TaskState};

/// The application's connection on the scratch file, with tq's functions
/// and an `orders` table.
fn application(scratch: &Scratch) -> Connection {
    let conn = Connection::open(scratch.queue_path()).unwrap();
    tq::outbox::install(&conn).unwrap();
    conn.execute_batch("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, item TEXT)")
        .unwrap();
    conn
}

fn tasks_stored(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM tq_tasks", [], |row| row.get(0))
        .unwrap()
}

fn sql_error(result: tq::rusqlite::Result<i64>) -> String {
    result.unwrap_err().to_string()
}

#[test]
fn a_task_pushed_in_sql_commits_or_rolls_back_with_the_application_rows() {
    let scratch = Scratch::new();
    let app = application(&scratch);
    let queue = scratch.open();

    app.execute_batch(
        "BEGIN IMMEDIATE;
         INSERT INTO orders (item) VALUES ('book');
         SELECT tq_push('default', '{\"order\": 1}');
         ROLLBACK;",
    )
    .unwrap();
    assert!(pull(&queue).is_none(), "a rolled-back push leaves no task");
    assert_eq!(tasks_stored(&app), 0);

    app.execute_batch("BEGIN IMMEDIATE; INSERT INTO orders (item) VALUES ('pen');")
        .unwrap();
    let id: i64 = app
        .query_row("SELECT tq_push('default', '{\"order\": 2}')", [], |row| {
            row.get(0)
        })
        .unwrap();
    app.execute_batch("COMMIT").unwrap();
    let task = pull(&queue).unwrap();
    assert_eq!((task.id(), task.payload()), (id, "{\"order\": 2}"));

    // Outside a transaction, the statement is the transaction.
    let alone: i64 = app
        .query_row("SELECT tq_push('default', '3')", [], |row| row.get(0))
        .unwrap();
    assert_eq!(pull(&queue).unwrap().id(), alone);
}

#[test]
fn a_bad_push_in_sql_fails_with_tqs_message_and_writes_nothing() {
    let scratch = Scratch::new();
    let app = application(&scratch);
    let push = |sql: &str| app.query_row(sql, [], |row| row.get::<_, i64>(0));
    app.execute_batch("BEGIN IMMEDIATE; INSERT INTO orders (item) VALUES ('kept');")
        .unwrap();
    let failures = [
        (
            "SELECT tq_push('default', '{nope')",
            "tq_push: the payload is not JSON",
        ),
        ("SELECT tq_push('', '1')", "tq_push: "),
        ("SELECT tq_push(NULL, '1')", "tq_push: the queue is a text"),
        (
            "SELECT tq_push('default', '1', '{\"colour\": 1}')",
            "unknown push option \"colour\"",
        ),
        (
            "SELECT tq_push('default', '1', '{\"priority\": \"high\"}')",
            "priority takes an integer",
        ),
        (
            "SELECT tq_push('default', '1', '{\"after\": [999]}')",
            "tq_push: ",
        ),
        ("SELECT tq_push('default', '1', '[1]')", "a JSON object"),
        (
            "SELECT tq_push('default', '1', '{\"delay_ms\": 1, \"run_at_unix_ms\": 1}')",
            "not both",
        ),
        (
            "SELECT tq_push('default', '1', '{\"on_parent_failure\": \"maybe\"}')",
            "on_parent_failure is \"cancel\" or \"run_anyway\"",
        ),
    ];
    for (sql, message) in failures {
        let error = sql_error(push(sql));
        assert!(error.contains(message), "{sql}: {error}");
    }
    assert_eq!(tasks_stored(&app), 0, "no failed push wrote a task");
    app.execute_batch("COMMIT").unwrap();
    let kept: i64 = app
        .query_row("SELECT count(*) FROM orders", [], |row| row.get(0))
        .unwrap();
    assert_eq!(kept, 1, "the application's transaction went on");
}

#[test]
fn push_options_in_sql_act_as_through_the_api() {
    let scratch = Scratch::new();
    let app = application(&scratch);
    let queue = scratch.open();
    let push = |sql: &str| -> i64 { app.query_row(sql, [], |row| row.get(0)).unwrap() };

    let first = push("SELECT tq_push('default', '1', '{\"unique_key\": \"order-7\"}')");
    let again = push("SELECT tq_push('default', '2', '{\"unique_key\": \"order-7\"}')");
    assert_eq!(again, first, "a held key answers the holder's id");
    assert_eq!(tasks_stored(&app), 1);

    let later = push("SELECT tq_push('default', '3', '{\"delay_ms\": 600000, \"priority\": 5}')");
    let child = push(&format!(
        "SELECT tq_push('default', '4', '{{\"after\": [{first}], \"max_attempts\": 2}}')"
    ));
    let grouped =
        push("SELECT tq_push('default', '5', '{\"group\": \"g\", \"group_max_at_once\": 1}')");
    let behind = push("SELECT tq_push('default', '6', '{\"group\": \"g\"}')");
    let info = |id| queue.task(id).unwrap().unwrap();
    assert!(info(later).run_at_unix_ms() > common::now_ms() + 500_000);
    assert_eq!(info(later).priority(), 5);
    assert_eq!(info(child).waiting_for(), [first]);
    assert_eq!(info(child).max_attempts(), 2);
    assert_eq!(info(behind).waiting_for(), [grouped]);
    assert_eq!(info(behind).group(), Some("g"));

    // The same through the API, for comparison: the same answers.
    let mut options = PushOptions::new();
    options.unique_key("order-7").unwrap();
    assert_eq!(queue.push("7", &options).unwrap().id(), first);
}

#[test]
fn a_worker_finishes_in_sql_with_its_result_rows_in_one_commit() {
    let scratch = Scratch::new();
    let app = application(&scratch);
    let queue = scratch.open();
    let id = queue
        .push("{\"order\": 1}", &PushOptions::new())
        .unwrap()
        .id();
    let task = pull(&queue).unwrap();
    let token = task.receipt().token();

    // Rolled back: the task stays held, the row is not written.
    app.execute_batch("BEGIN IMMEDIATE; INSERT INTO orders (item) VALUES ('shipped');")
        .unwrap();
    let finished: i64 = app
        .query_row("SELECT tq_finish(?1, ?2)", [id, token], |row| row.get(0))
        .unwrap();
    assert_eq!(finished, id);
    app.execute_batch("ROLLBACK").unwrap();
    queue
        .extend(task.receipt(), std::time::Duration::from_secs(30))
        .unwrap();

    app.execute_batch("BEGIN IMMEDIATE; INSERT INTO orders (item) VALUES ('shipped');")
        .unwrap();
    app.query_row("SELECT tq_finish(?1, ?2)", [id, token], |row| {
        row.get::<_, i64>(0)
    })
    .unwrap();
    app.execute_batch("COMMIT").unwrap();
    assert_eq!(
        queue.finish(task.receipt()).unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    assert_eq!(tasks_stored(&app), 0);

    // A whole number bound as a real, as some drivers bind numbers, names
    // the same task; a fraction names none.
    let fraction = sql_error(
        app.query_row("SELECT tq_finish(?1 + 0.5, ?2)", [id, token], |row| {
            row.get(0)
        }),
    );
    assert!(
        fraction.contains("the task id is an integer, got Real"),
        "{fraction}"
    );
    let as_real = sql_error(app.query_row(
        "SELECT tq_finish(CAST(?1 AS REAL), ?2)",
        [id, token],
        |row| row.get(0),
    ));
    assert!(as_real.contains("not held"), "{as_real}");

    let stale = sql_error(app.query_row("SELECT tq_finish(?1, ?2)", [id, token], |row| row.get(0)));
    assert!(
        stale.contains("tq_finish: ") && stale.contains("not held"),
        "{stale}"
    );

    // keep_history keeps it as done.
    let kept = queue.push("2", &PushOptions::new()).unwrap().id();
    let task = pull(&queue).unwrap();
    app.query_row(
        "SELECT tq_finish(?1, ?2, 1)",
        [kept, task.receipt().token()],
        |row| row.get::<_, i64>(0),
    )
    .unwrap();
    assert_eq!(queue.task(kept).unwrap().unwrap().state(), TaskState::Done);
    assert!(
        queue.push("3", &PushOptions::new()).unwrap().id() > kept,
        "ids finished in SQL are not given again"
    );
}

#[test]
fn installing_creates_tqs_tables_and_refuses_what_it_cannot_use() {
    let scratch = Scratch::new();
    let conn = Connection::open(scratch.path("fresh.db")).unwrap();
    tq::outbox::install(&conn).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    let id: i64 = conn
        .query_row("SELECT tq_push('jobs', '1')", [], |row| row.get(0))
        .unwrap();
    let mut options = tq::OpenOptions::new();
    options.queue("jobs").unwrap();
    let queue = tq::Queue::open(scratch.path("fresh.db").to_str().unwrap(), &options).unwrap();
    assert_eq!(pull(&queue).unwrap().id(), id);

    let memory = Connection::open_in_memory().unwrap();
    assert_eq!(
        tq::outbox::install(&memory).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    let busy = Connection::open(scratch.path("busy.db")).unwrap();
    busy.execute_batch("BEGIN; CREATE TABLE t (x);").unwrap();
    let refused = tq::outbox::install(&busy).unwrap_err();
    assert!(
        refused.message().contains("inside a transaction"),
        "{refused}"
    );
}

#[test]
fn a_waiting_pull_takes_a_task_pushed_in_sql_once_it_commits() {
    let scratch = Scratch::new();
    let app = application(&scratch);
    let queue = Arc::new(scratch.open());
    let waiter = {
        let queue = Arc::clone(&queue);
        thread::spawn(move || queue.pull(&waiting(30_000)).unwrap().map(|t| t.id()))
    };
    app.execute_batch("BEGIN IMMEDIATE").unwrap();
    let id: i64 = app
        .query_row("SELECT tq_push('default', '1')", [], |row| row.get(0))
        .unwrap();
    app.execute_batch("COMMIT").unwrap();
    assert_eq!(waiter.join().unwrap(), Some(id));
}

#[test]
fn expiries_and_deadlines_in_sql_act_as_through_the_api() {
    let scratch = Scratch::new();
    let app = application(&scratch);
    let queue = scratch.open();
    let push = |options: &str| -> tq::rusqlite::Result<i64> {
        app.query_row("SELECT tq_push('default', '1', ?1)", [options], |row| {
            row.get(0)
        })
    };
    let expired = push(r#"{"expire_at_unix_ms": 1000, "deadline_after_ms": 60000}"#).unwrap();
    let info = queue.task(expired).unwrap().unwrap();
    assert_eq!(info.expires_at_unix_ms(), Some(1000));
    assert!(info.deadline_unix_ms().is_some());
    let next = push("{}").unwrap();
    assert_eq!(pull(&queue).unwrap().id(), next);
    assert_eq!(
        queue.task(expired).unwrap().unwrap().last_error(),
        Some("expired")
    );
    let refused = sql_error(push(r#"{"delay_ms": 60000, "expire_after_ms": 1000}"#));
    assert!(refused.contains("could never run"), "{refused}");
    let both = sql_error(push(r#"{"deadline_after_ms": 1, "deadline_unix_ms": 1}"#));
    assert!(both.contains("not both"), "{both}");
}

#[test]
fn a_push_in_sql_debounces_and_replaces_as_through_the_api() {
    let scratch = Scratch::new();
    let app = application(&scratch);
    let queue = scratch.open();
    let push = |payload: &str, options: &str| -> tq::rusqlite::Result<i64> {
        app.query_row(
            "SELECT tq_push('default', ?1, ?2)",
            [payload, options],
            |row| row.get(0),
        )
    };
    let merging = r#"{"unique_key": "doc", "replace_pending": true, "delay_ms": 3600000,
                      "debounce_max_ms": 7200000}"#;
    let id = push("1", r#"{"unique_key": "doc"}"#).unwrap();
    assert_eq!(push("2", merging).unwrap(), id);
    assert_eq!(queue.task(id).unwrap().unwrap().payload(), "2");
    assert!(pull(&queue).is_none(), "put off by the debounce");
    let refused = sql_error(push("3", r#"{"replace_pending": true}"#));
    assert!(refused.contains("needs a unique key"), "{refused}");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
}

#[test]
fn a_push_in_sql_into_a_full_queue_fails_and_writes_nothing() {
    let scratch = Scratch::new();
    let app = application(&scratch);
    let queue = scratch.open();
    queue.set_max_pending(Some(1)).unwrap();
    let push = |payload: &str| {
        app.query_row("SELECT tq_push('default', ?1)", [payload], |row| {
            row.get::<_, i64>(0)
        })
    };
    push("1").unwrap();
    let message = sql_error(push("2"));
    assert!(message.contains("is full"), "{message}");
    assert_eq!(tasks_stored(&app), 1);
    pull(&queue).unwrap();
    push("2").unwrap();
}

#[test]
fn a_step_recorded_in_sql_commits_or_rolls_back_with_the_application_rows() {
    let scratch = Scratch::new();
    let app = application(&scratch);
    let queue = scratch.open();
    let id = queue
        .push("{\"order\": 1}", &PushOptions::new())
        .unwrap()
        .id();
    let task = pull(&queue).unwrap();
    let token = task.receipt().token();
    let step = |name: &str, json: &str| -> tq::rusqlite::Result<i64> {
        app.query_row(
            "SELECT tq_step_put(?1, ?2, ?3, ?4)",
            tq::rusqlite::params![id, token, name, json],
            |row| row.get(0),
        )
    };

    // Rolled back with the application's row: not recorded.
    app.execute_batch("BEGIN IMMEDIATE; INSERT INTO orders (item) VALUES ('charged');")
        .unwrap();
    assert_eq!(step("charge", "{\"charge\": \"ch_1\"}").unwrap(), 1);
    app.execute_batch("ROLLBACK").unwrap();
    assert_eq!(queue.step_output(task.receipt(), "charge").unwrap(), None);

    app.execute_batch("BEGIN IMMEDIATE; INSERT INTO orders (item) VALUES ('charged');")
        .unwrap();
    assert_eq!(step("charge", "{\"charge\": \"ch_1\"}").unwrap(), 1);
    app.execute_batch("COMMIT").unwrap();
    assert_eq!(
        queue
            .step_output(task.receipt(), "charge")
            .unwrap()
            .as_deref(),
        Some("{\"charge\": \"ch_1\"}")
    );
    assert_eq!(step("charge", "2").unwrap(), 0, "the first write wins");

    let bad = sql_error(step("mail", "{nope"));
    assert!(
        bad.contains("tq_step_put: ") && bad.contains("not JSON"),
        "{bad}"
    );
    let unnamed = sql_error(step("", "1"));
    assert!(unnamed.contains("step name"), "{unnamed}");
    queue.finish(task.receipt()).unwrap();
    let stale = sql_error(step("mail", "1"));
    assert!(stale.contains("not held"), "{stale}");
    assert_eq!(
        app.query_row("SELECT count(*) FROM tq_steps", [], |row| row
            .get::<_, i64>(0))
            .unwrap(),
        0,
        "removed with the task finished without history"
    );
}
