//! What a task returned and how far it got: results stored by a finish,
//! progress recorded with a heartbeat, and waiting for a task's outcome,
//! on both backends.

#[macro_use]
mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{pull, push, Scratch};
use tq::{CancelToken, Durability, ErrorKind, OpenOptions, PushOptions, Queue, TaskState};

fn kind<T: std::fmt::Debug>(result: tq::Result<T>) -> ErrorKind {
    result.unwrap_err().kind()
}

/// A handle whose results are kept for `retention`.
fn keeping_results(scratch: &Scratch, retention: Duration) -> Queue {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .max_attempts(1)
        .unwrap()
        .result_retention(retention)
        .unwrap();
    scratch.open_with(&options)
}

fn a_finish_with_a_result_keeps_it_for_any_handle_to_read(scratch: Scratch) {
    let queue = scratch.open();
    let id = push(&queue, "{\"resize\":\"a.png\"}");
    let task = pull(&queue).unwrap();
    queue
        .finish_with_result(task.receipt(), "{\"width\":640}")
        .unwrap();

    let other = scratch.open();
    let done = other
        .task(id)
        .unwrap()
        .expect("the task is kept for its result");
    assert_eq!(done.state(), TaskState::Done);
    assert_eq!(done.result(), Some("{\"width\":640}"));
    assert_eq!(done.payload(), "{\"resize\":\"a.png\"}");
    assert_eq!(other.count(TaskState::Done).unwrap(), 1);
    let listed = other.list(TaskState::Done, 0, 10).unwrap();
    assert_eq!(listed[0].result(), Some("{\"width\":640}"));

    // A finish without a result, on a handle without history, keeps
    // nothing; a pending task has no result yet.
    let gone = push(&queue, "2");
    queue.finish(pull(&queue).unwrap().receipt()).unwrap();
    assert!(other.task(gone).unwrap().is_none());
    let waiting = push(&queue, "3");
    let pending = other.task(waiting).unwrap().unwrap();
    assert_eq!(pending.state(), TaskState::Pending);
    assert_eq!(pending.result(), None);
    assert!(other.task(i64::MAX).unwrap().is_none());
}

fn a_bad_result_is_refused_and_the_task_stays_held(scratch: Scratch) {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .max_payload_len(16)
        .unwrap();
    let queue = scratch.open_with(&options);
    let id = push(&queue, "1");
    let task = pull(&queue).unwrap();
    assert_eq!(
        kind(queue.finish_with_result(task.receipt(), "{\"too\":\"long for the limit\"}")),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(queue.finish_with_result(task.receipt(), "{not json")),
        ErrorKind::InvalidJson
    );
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 1);
    assert_eq!(queue.task(id).unwrap().unwrap().state(), TaskState::Leased);
    queue.finish_with_result(task.receipt(), "[1,2]").unwrap();
    assert_eq!(
        kind(queue.finish_with_result(task.receipt(), "[1,2]")),
        ErrorKind::NotHeld,
        "a second finish is refused"
    );
    assert_eq!(queue.task(id).unwrap().unwrap().result(), Some("[1,2]"));
}

fn results_are_kept_for_the_retention_then_swept(scratch: Scratch) {
    let queue = keeping_results(&scratch, Duration::from_millis(200));
    let first = push(&queue, "1");
    queue
        .finish_with_result(pull(&queue).unwrap().receipt(), "\"one\"")
        .unwrap();
    // A unique key reserved for less time than the result is kept: the
    // sweep of passed unique windows leaves the result.
    let mut unique = PushOptions::new();
    unique
        .unique_key("k")
        .unwrap()
        .unique_for(Duration::from_millis(1))
        .unwrap();
    let keyed = queue.push("2", &unique).unwrap().id();
    queue
        .finish_with_result(pull(&queue).unwrap().receipt(), "\"two\"")
        .unwrap();
    thread::sleep(Duration::from_millis(20));
    push(&queue, "3");
    queue.finish(pull(&queue).unwrap().receipt()).unwrap();
    assert_eq!(
        queue.task(keyed).unwrap().unwrap().result(),
        Some("\"two\"")
    );

    thread::sleep(Duration::from_millis(250));
    // The next finish with a result sweeps the results whose time passed.
    let last = push(&queue, "4");
    queue
        .finish_with_result(pull(&queue).unwrap().receipt(), "\"four\"")
        .unwrap();
    assert!(queue.task(first).unwrap().is_none());
    assert!(queue.task(keyed).unwrap().is_none());
    assert_eq!(
        queue.task(last).unwrap().unwrap().result(),
        Some("\"four\"")
    );
    // A purge of done tasks takes results too.
    assert_eq!(queue.purge(TaskState::Done, Duration::ZERO).unwrap(), 1);
    assert!(queue.task(last).unwrap().is_none());
}

fn with_history_a_result_stays_with_the_done_task(scratch: Scratch) {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .keep_history(true)
        .result_retention(Duration::from_millis(1))
        .unwrap();
    let queue = scratch.open_with(&options);
    let id = push(&queue, "1");
    queue
        .finish_with_result(pull(&queue).unwrap().receipt(), "true")
        .unwrap();
    thread::sleep(Duration::from_millis(20));
    push(&queue, "2");
    queue
        .finish_with_result(pull(&queue).unwrap().receipt(), "false")
        .unwrap();
    assert_eq!(queue.task(id).unwrap().unwrap().result(), Some("true"));
}

fn progress_is_recorded_with_the_heartbeat(scratch: Scratch) {
    let queue = scratch.open();
    let id = push(&queue, "1");
    let task = pull(&queue).unwrap();
    let lease = Duration::from_secs(60);
    queue
        .extend_with_progress(task.receipt(), lease, "{\"done\":3,\"of\":10}")
        .unwrap();
    let seen = scratch.open().task(id).unwrap().unwrap();
    assert_eq!(seen.state(), TaskState::Leased);
    assert_eq!(seen.progress(), Some("{\"done\":3,\"of\":10}"));

    assert_eq!(
        kind(queue.extend_with_progress(task.receipt(), lease, "{bad")),
        ErrorKind::InvalidJson
    );
    assert_eq!(
        queue.task(id).unwrap().unwrap().progress(),
        Some("{\"done\":3,\"of\":10}"),
        "a refused progress changes nothing"
    );
    queue
        .finish_with_result(task.receipt(), "{\"done\":10}")
        .unwrap();
    let done = queue.task(id).unwrap().unwrap();
    assert_eq!(done.progress(), Some("{\"done\":3,\"of\":10}"));
    assert_eq!(
        kind(queue.extend_with_progress(task.receipt(), lease, "1")),
        ErrorKind::NotHeld
    );
}

/// Waits for task `id` on a thread of its own with a handle of its own,
/// from before `end` ends it, and returns what the wait saw and how long
/// it took.
fn outcome_after(
    scratch: &Scratch,
    id: i64,
    end: impl FnOnce(),
) -> (Option<tq::TaskInfo>, Duration) {
    let waiter = scratch.open();
    thread::scope(|scope| {
        let waiting = scope.spawn(move || {
            let began = Instant::now();
            let outcome = waiter.wait_for(id, Duration::from_secs(20), None).unwrap();
            (outcome, began.elapsed())
        });
        thread::sleep(Duration::from_millis(100));
        assert!(!waiting.is_finished(), "the wait returned before the end");
        end();
        waiting.join().unwrap()
    })
}

fn a_wait_returns_each_outcome_as_it_happens(scratch: Scratch) {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .keep_history(true)
        .max_attempts(1)
        .unwrap();
    let queue = scratch.open_with(&options);

    let id = push(&queue, "1");
    let task = pull(&queue).unwrap();
    let (done, _) = outcome_after(&scratch, id, || {
        queue.finish_with_result(task.receipt(), "42").unwrap()
    });
    let done = done.unwrap();
    assert_eq!((done.state(), done.result()), (TaskState::Done, Some("42")));

    let id = push(&queue, "2");
    let task = pull(&queue).unwrap();
    let (dead, _) = outcome_after(&scratch, id, || {
        queue.fail(task.receipt(), "out of paper").unwrap();
    });
    let dead = dead.unwrap();
    assert_eq!(dead.state(), TaskState::Dead);
    assert_eq!(dead.last_error(), Some("out of paper"));

    let id = push(&queue, "3");
    let (cancelled, _) = outcome_after(&scratch, id, || {
        queue.cancel_task(id, "not needed").unwrap();
    });
    let cancelled = cancelled.unwrap();
    assert_eq!(cancelled.state(), TaskState::Cancelled);
    assert_eq!(cancelled.last_error(), Some("not needed"));

    // A task that has ended already answers at once.
    let at_once = Instant::now();
    let again = queue.wait_for(id, Duration::from_secs(20), None).unwrap();
    assert_eq!(again.unwrap().state(), TaskState::Cancelled);
    assert!(at_once.elapsed() < Duration::from_secs(10));
}

fn a_wait_wakes_on_the_end_not_at_its_timeout(scratch: Scratch) {
    let queue = scratch.open();
    let id = push(&queue, "1");
    let task = pull(&queue).unwrap();
    let (outcome, waited) = outcome_after(&scratch, id, || {
        queue.finish_with_result(task.receipt(), "{}").unwrap()
    });
    assert_eq!(outcome.unwrap().result(), Some("{}"));
    // 20 s is the wait's bound; the end came at about 100 ms.
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
}

/// A task finished without a result on a handle without history is
/// deleted: a wait that saw it before it went has seen it end.
fn a_wait_that_saw_the_task_takes_its_deletion_for_its_end(scratch: Scratch) {
    let queue = scratch.open();
    let id = push(&queue, "1");
    let task = pull(&queue).unwrap();
    let (outcome, waited) = outcome_after(&scratch, id, || queue.finish(task.receipt()).unwrap());
    let outcome = outcome.expect("the wait timed out");
    assert_eq!(
        (outcome.id(), outcome.state(), outcome.result()),
        (id, TaskState::Done, None)
    );
    assert_eq!(outcome.payload(), "1");
    assert!(waited < Duration::from_secs(10), "waited {waited:?}");
}

fn a_wait_times_out_with_nothing_and_refuses_what_it_cannot_wait_for(scratch: Scratch) {
    let queue = scratch.open();
    let id = push(&queue, "1");
    let began = Instant::now();
    assert!(queue
        .wait_for(id, Duration::from_millis(150), None)
        .unwrap()
        .is_none());
    assert!(began.elapsed() >= Duration::from_millis(150));
    assert_eq!(
        kind(queue.wait_for(i64::MAX, Duration::from_millis(10), None)),
        ErrorKind::InvalidArgument,
        "an unknown task"
    );
    // Without history and without a result, nothing is kept to wait on.
    queue.finish(pull(&queue).unwrap().receipt()).unwrap();
    assert_eq!(
        kind(queue.wait_for(id, Duration::from_millis(10), None)),
        ErrorKind::InvalidArgument
    );
    let other = push(&queue, "2");
    let waiter = scratch.open();
    // A token ends one wait, and leaves the handle's other waits alone.
    let token = CancelToken::new();
    thread::scope(|scope| {
        let cancelled =
            scope.spawn(|| waiter.wait_for(other, Duration::from_secs(20), Some(&token)));
        let untouched = scope.spawn(|| waiter.wait_for(other, Duration::from_millis(600), None));
        thread::sleep(Duration::from_millis(100));
        let triggered = Instant::now();
        token.cancel();
        assert_eq!(kind(cancelled.join().unwrap()), ErrorKind::Interrupted);
        assert!(
            triggered.elapsed() < Duration::from_millis(500),
            "ended at once"
        );
        assert!(untouched.join().unwrap().unwrap().is_none(), "timed out");
    });
    thread::scope(|scope| {
        let waiting = scope.spawn(|| waiter.wait_for(other, Duration::from_secs(20), None));
        thread::sleep(Duration::from_millis(100));
        waiter.interrupt();
        assert_eq!(kind(waiting.join().unwrap()), ErrorKind::Interrupted);
    });
}

on_both_backends!(
    a_finish_with_a_result_keeps_it_for_any_handle_to_read,
    a_bad_result_is_refused_and_the_task_stays_held,
    results_are_kept_for_the_retention_then_swept,
    with_history_a_result_stays_with_the_done_task,
    progress_is_recorded_with_the_heartbeat,
    a_wait_returns_each_outcome_as_it_happens,
    a_wait_wakes_on_the_end_not_at_its_timeout,
    a_wait_that_saw_the_task_takes_its_deletion_for_its_end,
    a_wait_times_out_with_nothing_and_refuses_what_it_cannot_wait_for,
);

/// A wait reads; it never writes to the file.
#[test]
fn waiting_for_an_outcome_writes_nothing() {
    let scratch = Scratch::new();
    let queue = scratch.open();
    let id = push(&queue, "1");
    queue.checkpoint().unwrap();
    let before = queue.wal_size().unwrap();
    assert!(queue
        .wait_for(id, Duration::from_millis(1500), None)
        .unwrap()
        .is_none());
    assert_eq!(queue.wal_size().unwrap(), before);
}
