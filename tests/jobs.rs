//! Job semantics: failures and retries, dead tasks, priorities, named
//! queues, batches, blocking pulls, heartbeats, unique keys, the outbox,
//! visibility and WAL upkeep.

#[macro_use]
mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{lease, now_ms, pull, push, waiting, Scratch};
use tq::rusqlite::{self, Connection};
use tq::{
    CancelToken, Durability, ErrorKind, Failed, OpenOptions, PullOptions, PushOptions, Pushed,
    Queue, TaskState,
};

fn normal() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.durability(Durability::Normal);
    options
}

/// A queue whose failed tasks are retried at once.
fn retry_at_once(scratch: &Scratch, max_attempts: u32) -> Queue {
    let mut options = normal();
    options
        .retry_backoff(Duration::ZERO, Duration::ZERO)
        .unwrap()
        .max_attempts(max_attempts)
        .unwrap();
    scratch.open_with(&options)
}

fn a_failed_task_comes_back_with_its_reason_until_its_attempts_run_out(scratch: Scratch) {
    let queue = retry_at_once(&scratch, 3);
    let id = push(&queue, "\"flaky\"");
    for attempt in 1..=3 {
        let task = pull(&queue).expect("the task is retried");
        assert_eq!(
            (task.id(), task.attempts(), task.max_attempts()),
            (id, attempt, 3)
        );
        let previous = (attempt > 1).then(|| format!("failure {}", attempt - 1));
        assert_eq!(task.last_error(), previous.as_deref());
        let failed = queue
            .fail(task.receipt(), &format!("failure {attempt}"))
            .unwrap();
        assert_eq!(failed == Failed::Dead, attempt == 3);
        assert_eq!(
            queue.fail(task.receipt(), "again").unwrap_err().kind(),
            ErrorKind::NotHeld
        );
        if attempt == 1 {
            let nul = queue.fail(task.receipt(), "nul\0byte").unwrap_err();
            assert_eq!(nul.kind(), ErrorKind::InvalidArgument, "checked first");
        }
    }
    assert!(pull(&queue).is_none(), "a dead task is never delivered");
    assert_eq!(queue.count(TaskState::Dead).unwrap(), 1);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
    let dead = queue.list(TaskState::Dead, 0, 10).unwrap();
    assert_eq!(dead.len(), 1);
    assert_eq!((dead[0].id(), dead[0].attempts()), (id, 3));
    assert_eq!(dead[0].last_error(), Some("failure 3"));
    assert_eq!(dead[0].payload(), "\"flaky\"");
}

fn a_failure_waits_for_the_back_off_and_a_push_can_set_its_own_attempts(scratch: Scratch) {
    let mut options = normal();
    options
        .retry_backoff(Duration::from_secs(60), Duration::from_secs(120))
        .unwrap();
    let queue = scratch.open_with(&options);
    let mut once = PushOptions::new();
    once.max_attempts(1).unwrap();
    let single = queue.push("1", &once).unwrap().id();
    let patient = push(&queue, "2");

    let task = pull(&queue).unwrap();
    assert_eq!((task.id(), task.max_attempts()), (single, 1));
    assert_eq!(queue.fail(task.receipt(), "no").unwrap(), Failed::Dead);

    let task = pull(&queue).unwrap();
    assert_eq!((task.id(), task.max_attempts()), (patient, 25));
    let before = now_ms();
    let Failed::RetryAt(at) = queue.fail(task.receipt(), "later").unwrap() else {
        panic!("the task has attempts left");
    };
    // 60 s with up to half taken off by jitter.
    assert!(
        at >= before + 30_000 && at <= now_ms() + 60_000,
        "{at} vs {before}"
    );
    assert!(pull(&queue).is_none(), "not before its back-off");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
}

fn dead_tasks_can_be_retried_one_or_all_and_purged(scratch: Scratch) {
    let queue = retry_at_once(&scratch, 1);
    let ids: Vec<i64> = (0..4).map(|i| push(&queue, &i.to_string())).collect();
    while let Some(task) = pull(&queue) {
        queue.fail(task.receipt(), "boom").unwrap();
    }
    assert_eq!(queue.count(TaskState::Dead).unwrap(), 4);

    queue.retry_dead(ids[2]).unwrap();
    let task = pull(&queue).unwrap();
    assert_eq!(
        (task.id(), task.attempts()),
        (ids[2], 1),
        "attempts start over"
    );
    queue.finish(task.receipt()).unwrap();
    assert_eq!(
        queue.retry_dead(ids[2]).unwrap_err().kind(),
        ErrorKind::InvalidArgument,
        "no longer dead"
    );

    assert_eq!(
        queue
            .purge(TaskState::Dead, Duration::from_secs(3600))
            .unwrap(),
        0
    );
    assert_eq!(queue.retry_all_dead().unwrap(), 3);
    let mut back = Vec::new();
    while let Some(task) = pull(&queue) {
        back.push(task.id());
        queue.fail(task.receipt(), "boom").unwrap();
    }
    back.sort();
    assert_eq!(back, [ids[0], ids[1], ids[3]]);
    assert_eq!(queue.purge(TaskState::Dead, Duration::ZERO).unwrap(), 3);
    assert_eq!(queue.count(TaskState::Dead).unwrap(), 0);
    assert_eq!(
        queue
            .purge(TaskState::Pending, Duration::ZERO)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
}

/// How many transactions `op` committed on `queue`: on SQLite, the commits
/// it left in the WAL, emptied first by a checkpoint; on PostgreSQL, the
/// transactions that last wrote the tasks `ids` (their rows' `xmin`).
fn transactions_of(scratch: &Scratch, queue: &Queue, ids: &[i64], op: impl FnOnce()) -> usize {
    let Some(server) = scratch.server() else {
        assert!(queue.checkpoint().unwrap().complete);
        op();
        return commits_in_wal(&scratch.queue_path());
    };
    op();
    let count: i64 = common::postgres_client(&server.url)
        .query_one(
            &format!(
                "SELECT count(DISTINCT xmin::text) FROM \"{}\".tasks WHERE id = ANY($1)",
                server.schema
            ),
            &[&ids],
        )
        .unwrap()
        .get(0);
    count as usize
}

/// The transactions committed in the WAL of the file at `path`: its frames
/// of the current generation (the header's salt) that end one.
fn commits_in_wal(path: &str) -> usize {
    const HEADER: usize = 32;
    const FRAME_HEADER: usize = 24;
    let wal = std::fs::read(format!("{path}-wal")).unwrap_or_default();
    if wal.len() < HEADER {
        return 0;
    }
    let page_size = u32::from_be_bytes(wal[8..12].try_into().unwrap()) as usize;
    let salt = &wal[16..24];
    wal[HEADER..]
        .chunks_exact(FRAME_HEADER + page_size)
        // A commit frame holds the database's size in pages, never 0.
        .filter(|frame| &frame[8..16] == salt && frame[4..8] != [0; 4])
        .count()
}

/// "Retry these" on the dashboard: a list of dead tasks goes back to
/// pending in one transaction; ids no longer dead are skipped, and left
/// out of the count.
fn a_list_of_dead_tasks_is_retried_in_one_transaction_skipping_the_others(scratch: Scratch) {
    let queue = retry_at_once(&scratch, 1);
    let ids: Vec<i64> = (0..20).map(|i| push(&queue, &i.to_string())).collect();
    while let Some(task) = pull(&queue) {
        queue.fail(task.receipt(), "boom").unwrap();
    }
    // Since the list was made: one retried by someone else, one purged
    // (an id no task has).
    queue.retry_dead(ids[3]).unwrap();
    let mut listed = ids.clone();
    listed.push(ids[19] + 1_000);
    let retried_ids: Vec<i64> = ids.iter().copied().filter(|&id| id != ids[3]).collect();
    let mut retried = 0;
    let transactions = transactions_of(&scratch, &queue, &retried_ids, || {
        retried = queue.retry_dead_many(&listed).unwrap();
    });
    assert_eq!(
        retried, 19,
        "the task pending already and the unknown id are skipped"
    );
    assert_eq!(transactions, 1, "one transaction for the whole list");
    assert_eq!(queue.count(TaskState::Dead).unwrap(), 0);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 20);
    let task = pull(&queue).unwrap();
    assert_eq!(task.attempts(), 1, "attempts start over");
    assert_eq!(queue.retry_dead_many(&[]).unwrap(), 0);
}

fn a_delivery_whose_lease_expires_counts_and_its_last_one_ends_dead(scratch: Scratch) {
    let queue = retry_at_once(&scratch, 2);
    let id = push(&queue, "\"poison\"");
    let first = queue.pull(&lease(1)).unwrap().unwrap();
    thread::sleep(Duration::from_millis(5));
    let second = queue.pull(&lease(1)).unwrap().unwrap();
    assert_eq!((second.id(), second.attempts()), (id, 2));
    assert_eq!(
        second.last_error(),
        Some("the lease of the previous delivery expired")
    );
    assert_eq!(
        queue.finish(first.receipt()).unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    thread::sleep(Duration::from_millis(5));
    assert!(
        pull(&queue).is_none(),
        "the expired last attempt is not delivered again"
    );
    let dead = queue.list(TaskState::Dead, 0, 10).unwrap();
    assert_eq!(dead.len(), 1);
    assert!(
        dead[0].last_error().unwrap().contains("expired"),
        "{dead:?}"
    );

    // Recover does the same for a lease that expired on its last attempt.
    let id = push(&queue, "\"slow\"");
    queue.pull(&lease(1)).unwrap().unwrap();
    thread::sleep(Duration::from_millis(5));
    queue.pull(&lease(1)).unwrap().unwrap();
    thread::sleep(Duration::from_millis(5));
    assert_eq!(queue.recover().unwrap(), 1);
    assert_eq!(queue.list(TaskState::Dead, 0, 10).unwrap()[1].id(), id);
}

fn higher_priorities_come_first_and_equal_ones_in_push_order(scratch: Scratch) {
    let queue = scratch.open();
    let mut pushed = Vec::new();
    for (payload, priority) in [
        ("1", 0),
        ("2", 5),
        ("3", -1),
        ("4", 5),
        ("5", 0),
        ("6", i32::MAX),
    ] {
        let mut options = PushOptions::new();
        options.priority(priority);
        pushed.push((queue.push(payload, &options).unwrap().id(), priority));
    }
    let order: Vec<String> = std::iter::from_fn(|| pull(&queue))
        .map(|task| task.payload().to_owned())
        .collect();
    assert_eq!(order, ["6", "2", "4", "1", "5", "3"]);
}

fn an_expired_lease_keeps_its_place_in_line(scratch: Scratch) {
    let queue = scratch.open();
    let push_at = |payload: &str, priority| {
        let mut options = PushOptions::new();
        options.priority(priority);
        queue.push(payload, &options).unwrap().id()
    };
    let low = push_at("\"low\"", 0);
    assert_eq!(queue.pull(&lease(1)).unwrap().unwrap().id(), low);
    thread::sleep(Duration::from_millis(5));
    let high = push_at("\"high\"", 10);
    assert_eq!(queue.pull(&lease(1)).unwrap().unwrap().id(), high);
    thread::sleep(Duration::from_millis(5));
    push_at("\"middle\"", 5);
    // Both leases expired; the one first in line is the highest priority.
    let order: Vec<String> = std::iter::from_fn(|| pull(&queue))
        .map(|task| task.payload().to_owned())
        .collect();
    assert_eq!(order, ["\"high\"", "\"middle\"", "\"low\""]);
}

fn a_retried_task_keeps_its_priority_but_waits_behind_ready_peers(scratch: Scratch) {
    let queue = retry_at_once(&scratch, 5);
    let mut urgent = PushOptions::new();
    urgent.priority(9);
    queue.push("\"urgent\"", &urgent).unwrap();
    let task = pull(&queue).unwrap();
    push(&queue, "\"normal\"");
    queue.fail(task.receipt(), "retry").unwrap();
    let next = pull(&queue).unwrap();
    assert_eq!(next.payload(), "\"urgent\"", "priority still comes first");
    assert_eq!(next.priority(), 9);
}

fn named_queues_in_one_file_are_independent(scratch: Scratch) {
    let mut options = normal();
    options.queue("emails").unwrap();
    let emails = scratch.open_with(&options);
    let default = scratch.open();
    assert_eq!((emails.name(), default.name()), ("emails", "default"));
    push(&emails, "\"mail\"");
    push(&default, "\"job\"");
    push(&default, "\"job\"");
    assert_eq!(emails.count(TaskState::Pending).unwrap(), 1);
    assert_eq!(default.count(TaskState::Pending).unwrap(), 2);
    let held = emails.pull(&lease(300)).unwrap().unwrap();
    assert_eq!(held.payload(), "\"mail\"");
    assert!(emails.pull(&PullOptions::new()).unwrap().is_none());
    thread::sleep(Duration::from_millis(310));
    assert_eq!(default.recover().unwrap(), 0, "recover is per queue");
    assert_eq!(emails.recover().unwrap(), 1);
    for name in ["", &"x".repeat(129), "a\0b"] {
        assert_eq!(
            OpenOptions::new().queue(name).unwrap_err().kind(),
            ErrorKind::InvalidArgument,
            "{name:?}"
        );
    }
    assert!(
        OpenOptions::new().queue(&"é".repeat(64)).is_ok(),
        "128 bytes"
    );
}

fn the_queue_names_and_the_last_id_cover_the_whole_file(scratch: Scratch) {
    let default = scratch.open();
    assert_eq!(default.queue_names().unwrap(), Vec::<String>::new());
    assert_eq!(default.last_id().unwrap(), 0);
    let mut options = normal();
    options.queue("zeta").unwrap();
    let zeta = scratch.open_with(&options);
    options.queue("alpha").unwrap();
    let alpha = scratch.open_with(&options);
    push(&zeta, "1");
    let last = push(&alpha, "2");
    assert_eq!(default.queue_names().unwrap(), ["alpha", "zeta"]);
    assert_eq!(default.last_id().unwrap(), last);
    // A queue is named while it holds a task in any state, and an id is
    // never handed out again once its task is gone.
    let held = alpha.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!(zeta.queue_names().unwrap(), ["alpha", "zeta"]);
    alpha.finish(held.receipt()).unwrap();
    assert_eq!(zeta.queue_names().unwrap(), ["zeta"]);
    assert_eq!(zeta.last_id().unwrap(), last);
}

fn a_batch_push_stores_all_or_nothing_and_names_the_bad_payload(scratch: Scratch) {
    let queue = scratch.open();
    let ids = queue
        .push_batch(&["1", "2", "3"], &PushOptions::new())
        .unwrap();
    assert_eq!(ids.len(), 3);
    assert!(ids.windows(2).all(|pair| pair[1] > pair[0]));
    let err = queue
        .push_batch(&["4", "{oops", "6"], &PushOptions::new())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidJson);
    assert!(err.message().starts_with("payload 1:"), "{err}");
    assert_eq!(
        queue.count(TaskState::Pending).unwrap(),
        3,
        "none of the bad batch"
    );
    let mut unique = PushOptions::new();
    unique.unique_key("k").unwrap();
    assert_eq!(
        queue.push_batch(&["7"], &unique).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert!(queue
        .push_batch::<&str>(&[], &PushOptions::new())
        .unwrap()
        .is_empty());
}

fn a_batch_pull_claims_in_order_and_a_batch_finish_reports_each_task(scratch: Scratch) {
    let queue = scratch.open();
    let ids = queue
        .push_batch(
            &(0..10).map(|i| i.to_string()).collect::<Vec<_>>(),
            &PushOptions::new(),
        )
        .unwrap();
    let first = queue.pull_batch(4, &PullOptions::new()).unwrap();
    assert_eq!(first.iter().map(|t| t.id()).collect::<Vec<_>>(), ids[..4]);
    let rest = queue.pull_batch(100, &lease(100)).unwrap();
    assert_eq!(rest.len(), 6);
    assert!(queue.pull_batch(5, &PullOptions::new()).unwrap().is_empty());
    assert_eq!(
        queue.pull_batch(0, &PullOptions::new()).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );

    // One of the first four was finished already; one of the rest lost its
    // lease to another claim.
    queue.finish(first[1].receipt()).unwrap();
    thread::sleep(Duration::from_millis(110));
    let retaken = queue.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!(retaken.id(), rest[0].id());
    let receipts: Vec<_> = first.iter().chain(&rest).map(|t| t.receipt()).collect();
    let held = queue.finish_batch(&receipts).unwrap();
    let expected: Vec<bool> = (0..10).map(|i| i != 1 && i != 4).collect();
    assert_eq!(held, expected);
    queue.finish(retaken.receipt()).unwrap();
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 0);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
}

fn a_waiting_pull_wakes_for_a_push_from_this_process(scratch: Scratch) {
    let queue = Arc::new(scratch.open());
    let waiter = {
        let queue = Arc::clone(&queue);
        thread::spawn(move || {
            let started = Instant::now();
            let task = queue.pull(&waiting(30_000)).unwrap();
            (task.map(|t| t.id()), started.elapsed())
        })
    };
    thread::sleep(Duration::from_millis(100));
    // Another handle on the same file rings the same bell.
    let id = push(&scratch.open(), "\"wake\"");
    let (got, waited) = waiter.join().unwrap();
    assert_eq!(got, Some(id));
    assert!(
        waited < Duration::from_secs(20),
        "woken by the push, not the timeout"
    );
}

fn a_waiting_pull_wakes_when_a_delayed_task_comes_due_and_times_out_otherwise(scratch: Scratch) {
    let queue = scratch.open();
    let started = Instant::now();
    assert!(queue.pull(&waiting(50)).unwrap().is_none());
    assert!(started.elapsed() >= Duration::from_millis(50));

    let mut later = PushOptions::new();
    later.delay(Duration::from_millis(200)).unwrap();
    let id = queue.push("\"later\"", &later).unwrap().id();
    let started = Instant::now();
    let task = queue.pull(&waiting(30_000)).unwrap().unwrap();
    assert_eq!(task.id(), id);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(150), "{waited:?}");
    assert!(waited < Duration::from_secs(20), "{waited:?}");
}

fn interrupt_and_cancel_end_waits_at_once(scratch: Scratch) {
    let queue = Arc::new(scratch.open());
    let token = CancelToken::new();
    let waiters: Vec<_> = [None, Some(token.clone())]
        .into_iter()
        .map(|token| {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                let mut options = waiting(60_000);
                options.cancel_token(token);
                let started = Instant::now();
                (queue.pull(&options).map(|t| t.is_some()), started.elapsed())
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(100));
    token.cancel();
    let mut waiters = waiters.into_iter();
    let cancelled_one = waiters.nth(1).unwrap();
    let (result, waited) = cancelled_one.join().unwrap();
    assert_eq!(result.unwrap_err().kind(), ErrorKind::Interrupted);
    assert!(waited < Duration::from_secs(30));

    queue.interrupt();
    let (result, waited) = waiters_first(&queue);
    assert_eq!(result.unwrap_err().kind(), ErrorKind::Interrupted);
    assert!(waited < Duration::from_secs(30));

    // Interrupted for good, but a ready task is still taken.
    push(&queue, "1");
    assert!(queue.pull(&waiting(60_000)).unwrap().is_some());
    assert_eq!(
        queue.pull(&waiting(60_000)).unwrap_err().kind(),
        ErrorKind::Interrupted
    );
    assert!(
        queue.pull(&PullOptions::new()).unwrap().is_none(),
        "no wait, no interruption"
    );

    fn waiters_first(queue: &Arc<Queue>) -> (tq::Result<bool>, Duration) {
        let started = Instant::now();
        (
            queue.pull(&waiting(60_000)).map(|t| t.is_some()),
            started.elapsed(),
        )
    }
}

fn extend_keeps_a_lease_and_a_lost_lease_answers_not_held(scratch: Scratch) {
    let queue = scratch.open();
    push(&queue, "\"long\"");
    let task = queue.pull(&lease(100)).unwrap().unwrap();
    for _ in 0..3 {
        thread::sleep(Duration::from_millis(60));
        queue
            .extend(task.receipt(), Duration::from_millis(500))
            .unwrap();
    }
    assert!(pull(&queue).is_none(), "the renewed lease still holds");
    thread::sleep(Duration::from_millis(510));
    let thief = pull(&queue).expect("the lease ran out");
    assert_eq!(
        queue
            .extend(task.receipt(), Duration::from_secs(1))
            .unwrap_err()
            .kind(),
        ErrorKind::NotHeld
    );
    assert_eq!(
        queue
            .extend(thief.receipt(), Duration::ZERO)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    queue.finish(thief.receipt()).unwrap();
}

fn a_unique_key_admits_one_live_task_at_a_time(scratch: Scratch) {
    let queue = retry_at_once(&scratch, 1);
    let mut key = PushOptions::new();
    key.unique_key("report:42").unwrap();
    let Pushed::Stored(id) = queue.push("1", &key).unwrap() else {
        panic!("the first push stores");
    };
    assert_eq!(queue.push("2", &key).unwrap(), Pushed::Duplicate(id));
    let task = pull(&queue).unwrap();
    assert_eq!(
        queue.push("3", &key).unwrap(),
        Pushed::Duplicate(id),
        "while leased"
    );
    queue.finish(task.receipt()).unwrap();
    let Pushed::Stored(second) = queue.push("4", &key).unwrap() else {
        panic!("the key is free once the task is done");
    };
    let task = pull(&queue).unwrap();
    assert_eq!(queue.fail(task.receipt(), "x").unwrap(), Failed::Dead);
    assert!(
        matches!(queue.push("5", &key).unwrap(), Pushed::Stored(_)),
        "a dead task frees it"
    );
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
    // The dead task, retried, comes back without the key it gave up.
    queue.retry_dead(second).unwrap();
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 2);

    let mut other_queue = normal();
    other_queue.queue("other").unwrap();
    let other = scratch.open_with(&other_queue);
    assert!(
        matches!(other.push("6", &key).unwrap(), Pushed::Stored(_)),
        "keys are per queue"
    );
}

fn a_unique_window_keeps_the_key_after_the_task_is_done(scratch: Scratch) {
    for keep_history in [false, true] {
        let mut options = normal();
        options
            .keep_history(keep_history)
            .queue(&format!("history {keep_history}"))
            .unwrap();
        let queue = scratch.open_with(&options);
        let mut key = PushOptions::new();
        key.unique_key("daily")
            .unwrap()
            .unique_for(Duration::from_millis(300))
            .unwrap();
        let id = queue.push("1", &key).unwrap().id();
        let task = pull(&queue).unwrap();
        queue.finish(task.receipt()).unwrap();
        assert_eq!(queue.push("2", &key).unwrap(), Pushed::Duplicate(id));
        thread::sleep(Duration::from_millis(350));
        assert!(matches!(queue.push("3", &key).unwrap(), Pushed::Stored(_)));
        let task = pull(&queue).unwrap();
        queue.finish(task.receipt()).unwrap();
        let done = queue.count(TaskState::Done).unwrap();
        if keep_history {
            assert_eq!(done, 2);
        } else {
            assert_eq!(done, 1, "only the task still inside its window is kept");
        }
    }
    assert_eq!(
        PushOptions::new()
            .unique_for(Duration::from_secs(1))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument,
        "a window needs a key"
    );
    for key in ["", &"k".repeat(1025), "a\0b"] {
        assert_eq!(
            PushOptions::new().unique_key(key).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
}

#[test]
fn an_outbox_push_commits_or_rolls_back_with_the_application_rows() {
    let scratch = Scratch::new();
    let queue = scratch.open();
    let mut app = Connection::open(scratch.queue_path()).unwrap();
    app.execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT)")
        .unwrap();

    let tx = app.transaction().unwrap();
    tx.execute("INSERT INTO orders (item) VALUES ('book')", [])
        .unwrap();
    tq::outbox::push(&tx, "default", "{\"order\": 1}", &PushOptions::new()).unwrap();
    tx.rollback().unwrap();
    assert!(pull(&queue).is_none());

    let tx = app.transaction().unwrap();
    tx.execute("INSERT INTO orders (item) VALUES ('pen')", [])
        .unwrap();
    let pushed = tq::outbox::push(&tx, "default", "{\"order\": 2}", &PushOptions::new()).unwrap();
    assert_eq!(
        tq::outbox::push(&tx, "default", "nope", &PushOptions::new())
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidJson
    );
    tx.commit().unwrap();
    let task = pull(&queue).unwrap();
    assert_eq!((task.id(), task.payload()), (pushed.id(), "{\"order\": 2}"));

    let tx = app.transaction().unwrap();
    tx.execute("UPDATE orders SET item = 'shipped'", [])
        .unwrap();
    tq::outbox::finish(&tx, task.receipt(), false).unwrap();
    tx.commit().unwrap();
    assert_eq!(
        queue.finish(task.receipt()).unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    let orders: i64 = app
        .query_row(
            "SELECT count(*) FROM orders WHERE item = 'shipped'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(orders, 1);
    assert_eq!(
        queue.push("3", &PushOptions::new()).unwrap().id(),
        pushed.id() + 1,
        "the id of the newest task, finished in the application's transaction, is not given again"
    );

    let mut bare = Connection::open(scratch.path("bare.db")).unwrap();
    let tx = bare.transaction().unwrap();
    assert_eq!(
        tq::outbox::push(&tx, "default", "1", &PushOptions::new())
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument,
        "a file tq never opened has no tq tables"
    );
}

#[test]
fn a_waiting_pull_sees_an_outbox_push_from_another_connection() {
    let scratch = Scratch::new();
    let queue = Arc::new(scratch.open());
    let waiter = {
        let queue = Arc::clone(&queue);
        thread::spawn(move || queue.pull(&waiting(30_000)).unwrap().map(|t| t.id()))
    };
    thread::sleep(Duration::from_millis(100));
    let mut app = Connection::open(scratch.queue_path()).unwrap();
    let tx = app.transaction().unwrap();
    let id = tq::outbox::push(&tx, "default", "1", &PushOptions::new())
        .unwrap()
        .id();
    tx.commit().unwrap();
    assert_eq!(waiter.join().unwrap(), Some(id));
}

fn the_oldest_ready_age_and_pages_of_tasks_show_the_backlog(scratch: Scratch) {
    let queue = scratch.open();
    assert_eq!(queue.oldest_ready_age().unwrap(), None);
    let mut old = PushOptions::new();
    old.run_at_unix_ms(now_ms() - 60_000).unwrap().priority(-5);
    queue.push("\"old\"", &old).unwrap();
    let mut future = PushOptions::new();
    future.delay(Duration::from_secs(600)).unwrap();
    queue.push("\"future\"", &future).unwrap();
    for i in 0..5 {
        let mut options = PushOptions::new();
        options.priority(i);
        queue.push(&i.to_string(), &options).unwrap();
    }
    let age = queue.oldest_ready_age().unwrap().unwrap();
    assert!(
        age >= Duration::from_secs(60) && age < Duration::from_secs(120),
        "{age:?}"
    );

    let mut seen = Vec::new();
    let mut after = 0;
    loop {
        let page = queue.list(TaskState::Pending, after, 3).unwrap();
        seen.extend(page.iter().map(|t| t.payload().to_owned()));
        if page.len() < 3 {
            break;
        }
        after = page.last().unwrap().id();
    }
    assert_eq!(seen, ["\"old\"", "\"future\"", "0", "1", "2", "3", "4"]);
    assert!(queue.list(TaskState::Leased, 0, 10).unwrap().is_empty());

    let mut newest_first = Vec::new();
    let mut before = i64::MAX;
    loop {
        let page = queue
            .list_newest_first(TaskState::Pending, before, 3)
            .unwrap();
        newest_first.extend(page.iter().map(|t| t.payload().to_owned()));
        if page.len() < 3 {
            break;
        }
        before = page.last().unwrap().id();
    }
    seen.reverse();
    assert_eq!(newest_first, seen);
    assert!(queue
        .list_newest_first(TaskState::Dead, i64::MAX, 10)
        .unwrap()
        .is_empty());
}

fn a_task_tells_when_it_was_pushed_claimed_and_ended(scratch: Scratch) {
    let mut history = normal();
    history.keep_history(true);
    let queue = scratch.open_with(&history);
    let before = now_ms();
    let id = queue.push("1", &PushOptions::new()).unwrap().id();
    let pending = queue.task(id).unwrap().unwrap();
    // A second either way: on PostgreSQL the times are the server's.
    let near = |at: i64, from: i64, to: i64| (from - 1000..=to + 1000).contains(&at);
    assert!(near(pending.created_at_unix_ms(), before, now_ms()));
    assert_eq!(pending.claimed_at_unix_ms(), None);
    assert_eq!(pending.finished_at_unix_ms(), None);
    thread::sleep(Duration::from_millis(50));
    let claiming = now_ms();
    let task = pull(&queue).unwrap();
    let leased = queue.task(id).unwrap().unwrap();
    let claimed = leased.claimed_at_unix_ms().unwrap();
    assert!(near(claimed, claiming, now_ms()));
    assert!(claimed >= leased.created_at_unix_ms() + 50, "{leased:?}");
    assert_eq!(leased.finished_at_unix_ms(), None);
    thread::sleep(Duration::from_millis(50));
    queue.finish(task.receipt()).unwrap();
    let done = queue.task(id).unwrap().unwrap();
    assert_eq!(done.claimed_at_unix_ms(), Some(claimed));
    assert!(
        done.finished_at_unix_ms().unwrap() >= claimed + 50,
        "{done:?}"
    );
    assert_eq!(done.created_at_unix_ms(), pending.created_at_unix_ms());
}

fn a_task_is_found_by_its_unique_key(scratch: Scratch) {
    let queue = retry_at_once(&scratch, 1);
    let mut key = PushOptions::new();
    key.unique_key("invoice:7").unwrap();
    // The id and state of the task found under the key, if any.
    let found = || {
        queue
            .task_with_unique_key("invoice:7")
            .unwrap()
            .map(|task| (task.id(), task.state()))
    };
    assert_eq!(found(), None);
    let id = queue.push("1", &key).unwrap().id();
    queue.push("2", &PushOptions::new()).unwrap();
    assert_eq!(found(), Some((id, TaskState::Pending)));
    let task = pull(&queue).unwrap();
    assert_eq!(task.id(), id);
    assert_eq!(found(), Some((id, TaskState::Leased)));
    // A dead task is still found by the key it was given, until a push
    // with the key takes it.
    assert_eq!(queue.fail(task.receipt(), "no").unwrap(), Failed::Dead);
    assert_eq!(found(), Some((id, TaskState::Dead)));
    let second = queue.push("3", &key).unwrap().id();
    assert_eq!(found(), Some((second, TaskState::Pending)));

    let mut other_queue = normal();
    other_queue.queue("other").unwrap();
    let other = scratch.open_with(&other_queue);
    assert!(other.task_with_unique_key("invoice:7").unwrap().is_none());
    for key in ["", &"k".repeat(1025)] {
        assert_eq!(
            queue.task_with_unique_key(key).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
}

#[test]
fn a_checkpoint_empties_the_wal() {
    let scratch = Scratch::new();
    let queue = scratch.open();
    queue
        .push_batch(
            &vec!["\"some payload to fill pages\""; 2000],
            &PushOptions::new(),
        )
        .unwrap();
    assert!(queue.wal_size().unwrap() > 0);
    let checkpoint = queue.checkpoint().unwrap();
    assert!(checkpoint.complete);
    assert_eq!(checkpoint.wal_bytes, 0);
    assert_eq!(queue.wal_size().unwrap(), 0);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 2000);
}

#[test]
fn a_version_1_file_is_upgraded_with_its_tasks() {
    let scratch = Scratch::new();
    let conn = Connection::open(scratch.queue_path()).unwrap();
    conn.execute_batch(VERSION_1_SCHEMA).unwrap();
    let now = now_ms();
    conn.execute(
        "INSERT INTO tq_tasks (state, payload, created_at, run_at) VALUES
            (0, '\"due\"', ?1, ?1), (0, '\"later\"', ?1, ?1 + 600000), (2, '\"done\"', ?1, ?1)",
        [now],
    )
    .unwrap();
    drop(conn);
    let queue = scratch.open();
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 2);
    assert_eq!(queue.count(TaskState::Done).unwrap(), 1);
    let task = pull(&queue).unwrap();
    assert_eq!((task.payload(), task.max_attempts()), ("\"due\"", 25));
    assert!(pull(&queue).is_none(), "the delayed task still waits");
}

/// The schema tq 0.1 wrote, to test the upgrade from it.
const VERSION_1_SCHEMA: &str = "
    CREATE TABLE tq_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    CREATE TABLE tq_holders (
        id INTEGER PRIMARY KEY, boot_id TEXT NOT NULL, pid_namespace TEXT NOT NULL,
        pid INTEGER NOT NULL, start_time INTEGER NOT NULL,
        UNIQUE (boot_id, pid_namespace, pid, start_time));
    CREATE TABLE tq_tasks (
        id INTEGER PRIMARY KEY AUTOINCREMENT, state INTEGER NOT NULL, payload TEXT NOT NULL,
        created_at INTEGER NOT NULL, run_at INTEGER NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0, lease_token INTEGER, lease_expires_at INTEGER,
        holder_id INTEGER, finished_at INTEGER);
    CREATE INDEX tq_tasks_ready  ON tq_tasks (run_at, id)       WHERE state = 0;
    CREATE INDEX tq_tasks_leased ON tq_tasks (lease_expires_at) WHERE state = 1;
    CREATE INDEX tq_tasks_done   ON tq_tasks (finished_at)      WHERE state = 2;
    INSERT INTO tq_meta VALUES ('schema_version', 1);
    PRAGMA journal_mode = WAL;";

#[test]
fn rows_changed_outside_tq_are_reported_as_not_a_database() {
    let damage = [
        "ALTER TABLE tq_tasks RENAME COLUMN payload TO body",
        "UPDATE tq_tasks SET payload = x'00ff'",
        "UPDATE tq_tasks SET payload = CAST(x'ff22' AS TEXT)",
        "UPDATE tq_tasks SET attempts = 5000000000",
        "DROP TABLE tq_tasks",
    ];
    for sql in damage {
        let scratch = Scratch::new();
        let queue = scratch.open();
        push(&queue, "\"fine\"");
        Connection::open(scratch.queue_path())
            .unwrap()
            .execute_batch(sql)
            .unwrap();
        let err = queue.pull(&PullOptions::new()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotADatabase, "{sql}: {err}");
    }
    let scratch = Scratch::new();
    let queue = scratch.open();
    Connection::open(scratch.queue_path())
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON tq_tasks BEGIN SELECT RAISE(ABORT, 'refused'); END",
        )
        .unwrap();
    let err = queue.push("1", &PushOptions::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotADatabase, "a trigger: {err}");
    // A task with the smallest id: pages from either end still answer
    // (ids after the smallest one are none).
    let scratch = Scratch::new();
    let queue = scratch.open();
    let id = push(&queue, "\"fine\"");
    Connection::open(scratch.queue_path())
        .unwrap()
        .execute(
            "UPDATE tq_tasks SET id = -9223372036854775808 WHERE id = ?1",
            [id],
        )
        .unwrap();
    assert!(queue
        .list(TaskState::Pending, i64::MIN, 10)
        .unwrap()
        .is_empty());
    let newest_first = queue
        .list_newest_first(TaskState::Pending, i64::MAX, 10)
        .unwrap();
    assert_eq!(
        newest_first.len(),
        1,
        "the task with the smallest id is listed"
    );
    // The floor under task ids: at the largest id, or not a number.
    for floor in ["9223372036854775807", "'text'"] {
        let scratch = Scratch::new();
        let queue = scratch.open();
        push(&queue, "\"fine\"");
        Connection::open(scratch.queue_path())
            .unwrap()
            .execute(
                &format!("UPDATE tq_meta SET value = {floor} WHERE key = 'task_id_floor'"),
                [],
            )
            .unwrap();
        let err = queue.push("1", &PushOptions::new()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotADatabase, "floor {floor}: {err}");
    }
    for sql in ["DROP TABLE tq_meta", "UPDATE tq_meta SET value = 1"] {
        let scratch = Scratch::new();
        drop(scratch.open());
        Connection::open(scratch.queue_path())
            .unwrap()
            .execute_batch(sql)
            .unwrap();
        let err = Queue::open(&scratch.queue_path(), &normal()).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::NotADatabase, "{sql}: {err}");
    }
    for version in ["0", "1.5", "'one'"] {
        let scratch = Scratch::new();
        drop(scratch.open());
        Connection::open(scratch.queue_path())
            .unwrap()
            .execute(&format!("UPDATE tq_meta SET value = {version}"), [])
            .unwrap();
        let err = Queue::open(&scratch.queue_path(), &normal()).err().unwrap();
        assert_eq!(
            err.kind(),
            ErrorKind::NotADatabase,
            "version {version}: {err}"
        );
    }
    let _ = rusqlite::version();
}

/// A stored state tq never writes (9) is damage, reported as such by a
/// read of the task, never shown as one of the visible states.
fn a_task_in_an_unknown_state_is_reported_as_not_a_database(scratch: Scratch) {
    let queue = scratch.open();
    let id = push(&queue, "\"fine\"");
    match scratch.server() {
        Some(server) => {
            common::postgres_client(&server.url)
                .execute(
                    &format!(
                        "UPDATE \"{}\".tasks SET state = 9 WHERE id = $1",
                        server.schema
                    ),
                    &[&id],
                )
                .unwrap();
        }
        None => {
            Connection::open(scratch.queue_path())
                .unwrap()
                .execute("UPDATE tq_tasks SET state = 9 WHERE id = ?1", [id])
                .unwrap();
        }
    }
    let err = queue.task(id).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotADatabase, "{err}");
    assert!(err.message().contains("unknown state 9"), "{err}");
    for state in [
        TaskState::Pending,
        TaskState::Leased,
        TaskState::Done,
        TaskState::Dead,
        TaskState::Cancelled,
    ] {
        assert_eq!(queue.count(state).unwrap(), 0, "{state:?}");
        assert!(queue.list(state, 0, 10).unwrap().is_empty(), "{state:?}");
    }
}

/// The rules both backends share (store.rs): the claim order, higher
/// priority first, then the task ready longest, then the one pushed first,
/// whether a batch claims the tasks or single pulls do; and the same
/// not-held error for a delivery that is over.
fn both_backends_claim_in_one_order_and_refuse_an_old_delivery_alike(scratch: Scratch) {
    let queue = scratch.open();
    let now = now_ms();
    // (priority, ready this long ago): ties in both, so each key decides.
    let shapes = [(0, 5), (2, 1), (0, 9), (2, 1), (-1, 20), (0, 5), (2, 7)];
    let mut pushed = Vec::new();
    for (priority, ago) in shapes {
        let mut options = PushOptions::new();
        options
            .priority(priority)
            .run_at_unix_ms(now - ago * 1000)
            .unwrap();
        let id = queue.push("{}", &options).unwrap().id();
        pushed.push((std::cmp::Reverse(priority), now - ago * 1000, id));
    }
    pushed.sort();
    let expected: Vec<i64> = pushed.iter().map(|&(_, _, id)| id).collect();

    let batch = queue.pull_batch(4, &PullOptions::new()).unwrap();
    let mut claimed: Vec<i64> = batch.iter().map(|task| task.id()).collect();
    while let Some(task) = pull(&queue) {
        claimed.push(task.id());
    }
    assert_eq!(claimed, expected);

    let first = &batch[0];
    queue.finish(first.receipt()).unwrap();
    let err = queue.finish(first.receipt()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert!(
        err.message()
            .starts_with(&format!("task {} is not held by this delivery", first.id())),
        "{err}"
    );
}

fn finish_and_pull_completes_one_task_and_claims_the_next_in_one_step(scratch: Scratch) {
    let queue = scratch.open();
    let ids: Vec<i64> = (0..3).map(|i| push(&queue, &i.to_string())).collect();
    let mut task = pull(&queue).unwrap();
    let mut seen = vec![task.id()];
    while let Some(next) = queue
        .finish_and_pull(task.receipt(), &PullOptions::new())
        .unwrap()
    {
        seen.push(next.id());
        task = next;
    }
    assert_eq!(seen, ids);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
    assert_eq!(
        queue.count(TaskState::Leased).unwrap(),
        0,
        "the last finish committed"
    );

    // A stale receipt finishes nothing and claims nothing.
    push(&queue, "\"waiting\"");
    let err = queue
        .finish_and_pull(task.receipt(), &PullOptions::new())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);

    // It never waits: a wait is refused, and nothing is finished.
    let held = pull(&queue).unwrap();
    let err = queue
        .finish_and_pull(held.receipt(), &waiting(1_000))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 1);
    assert!(queue
        .finish_and_pull(held.receipt(), &PullOptions::new())
        .unwrap()
        .is_none());
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 0);
}

/// A worker's batch: the tasks that ended are finished and the next claimed
/// in one transaction; a task no longer held changes nothing and stops
/// neither the others nor the claim.
fn finish_and_pull_batch_finishes_what_ended_and_claims_the_free_slots(scratch: Scratch) {
    let queue = scratch.open();
    let ids: Vec<i64> = (0..7).map(|i| push(&queue, &i.to_string())).collect();
    let first = queue.pull_batch(3, &PullOptions::new()).unwrap();
    // The second was finished meanwhile: its receipt is no longer current.
    queue.finish(first[1].receipt()).unwrap();
    let receipts: Vec<_> = first.iter().map(|task| task.receipt()).collect();
    let (finished, next) = queue
        .finish_and_pull_batch(&receipts, &PullOptions::new(), 3)
        .unwrap();
    let kinds: Vec<_> = finished
        .iter()
        .map(|r| r.as_ref().err().map(|e| e.kind()))
        .collect();
    assert_eq!(kinds, [None, Some(ErrorKind::NotHeld), None]);
    assert_eq!(
        next.iter().map(|task| task.id()).collect::<Vec<_>>(),
        ids[3..6],
        "claimed in the order pull_batch claims"
    );
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 3);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);

    // No receipt: a claim alone; max 0: finishes alone.
    let receipts: Vec<_> = next.iter().map(|task| task.receipt()).collect();
    let (finished, last) = queue
        .finish_and_pull_batch(&[], &PullOptions::new(), 5)
        .unwrap();
    assert!(finished.is_empty());
    assert_eq!(
        last.iter().map(|task| task.id()).collect::<Vec<_>>(),
        ids[6..]
    );
    let (finished, none) = queue
        .finish_and_pull_batch(&receipts, &PullOptions::new(), 0)
        .unwrap();
    assert!(finished.iter().all(Result::is_ok), "{finished:?}");
    assert!(none.is_empty());

    // It never waits: a wait is refused, and nothing is finished.
    let err = queue
        .finish_and_pull_batch(&[last[0].receipt()], &waiting(1_000), 1)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 1);
    let (finished, none) = queue
        .finish_and_pull_batch(&[last[0].receipt()], &PullOptions::new(), 4)
        .unwrap();
    assert!(finished[0].is_ok());
    assert!(none.is_empty(), "nothing is left to claim");
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 0);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
}

/// A task cancelled while held is reported cancelled by the batch, as a
/// finish would report it, and ends as cancelled; the claim goes on.
fn finish_and_pull_batch_ends_a_task_cancelled_meanwhile(scratch: Scratch) {
    let queue = scratch.open_with(OpenOptions::new().keep_history(true));
    let cancelled = push(&queue, "1");
    push(&queue, "2");
    let held = pull(&queue).unwrap();
    assert_eq!(held.id(), cancelled);
    queue.cancel_task(cancelled, "no longer wanted").unwrap();
    let (finished, next) = queue
        .finish_and_pull_batch(&[held.receipt()], &PullOptions::new(), 1)
        .unwrap();
    assert_eq!(
        finished[0].as_ref().unwrap_err().kind(),
        ErrorKind::Cancelled
    );
    assert_eq!(next.len(), 1);
    assert_eq!(
        queue.task(cancelled).unwrap().unwrap().state(),
        TaskState::Cancelled
    );
}

fn threads_writing_at_once_each_get_their_own_result(scratch: Scratch) {
    let mut options = OpenOptions::new();
    options.durability(Durability::Full);
    let queue = Arc::new(scratch.open_with(&options));
    let stale = {
        push(&queue, "\"to be finished\"");
        let task = pull(&queue).unwrap();
        queue.finish(task.receipt()).unwrap();
        task.receipt()
    };
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                let mut ids = Vec::new();
                for i in 0..50 {
                    // Failing writes in the same groups as the pushes.
                    if t % 2 == 0 {
                        let err = queue.extend(stale, Duration::from_secs(1)).unwrap_err();
                        assert_eq!(err.kind(), ErrorKind::NotHeld);
                    }
                    ids.push(push(&queue, &format!("[{t}, {i}]")));
                }
                ids
            })
        })
        .collect();
    let mut ids: Vec<i64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 400);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 400);
    let mut payloads = HashSet::new();
    while let Some(task) = pull(&queue) {
        assert!(payloads.insert(task.payload().to_owned()));
        queue.finish(task.receipt()).unwrap();
    }
    assert_eq!(payloads.len(), 400);
}

on_both_backends!(
    a_failed_task_comes_back_with_its_reason_until_its_attempts_run_out,
    a_failure_waits_for_the_back_off_and_a_push_can_set_its_own_attempts,
    dead_tasks_can_be_retried_one_or_all_and_purged,
    a_list_of_dead_tasks_is_retried_in_one_transaction_skipping_the_others,
    a_delivery_whose_lease_expires_counts_and_its_last_one_ends_dead,
    higher_priorities_come_first_and_equal_ones_in_push_order,
    an_expired_lease_keeps_its_place_in_line,
    a_retried_task_keeps_its_priority_but_waits_behind_ready_peers,
    named_queues_in_one_file_are_independent,
    the_queue_names_and_the_last_id_cover_the_whole_file,
    a_batch_push_stores_all_or_nothing_and_names_the_bad_payload,
    a_batch_pull_claims_in_order_and_a_batch_finish_reports_each_task,
    a_waiting_pull_wakes_for_a_push_from_this_process,
    a_waiting_pull_wakes_when_a_delayed_task_comes_due_and_times_out_otherwise,
    interrupt_and_cancel_end_waits_at_once,
    extend_keeps_a_lease_and_a_lost_lease_answers_not_held,
    a_unique_key_admits_one_live_task_at_a_time,
    a_unique_window_keeps_the_key_after_the_task_is_done,
    a_task_is_found_by_its_unique_key,
    a_task_tells_when_it_was_pushed_claimed_and_ended,
    the_oldest_ready_age_and_pages_of_tasks_show_the_backlog,
    finish_and_pull_completes_one_task_and_claims_the_next_in_one_step,
    finish_and_pull_batch_finishes_what_ended_and_claims_the_free_slots,
    finish_and_pull_batch_ends_a_task_cancelled_meanwhile,
    threads_writing_at_once_each_get_their_own_result,
    a_task_in_an_unknown_state_is_reported_as_not_a_database,
    both_backends_claim_in_one_order_and_refuse_an_old_delivery_alike,
);
