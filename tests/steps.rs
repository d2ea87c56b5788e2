//! Step checkpoints: a step of a held task records its JSON output once,
//! and every later delivery of the task reads it instead of running the
//! step again; snapshots list the steps, and a retry may clear those
//! after a named step. On both backends.

#[macro_use]
mod common;

use std::cell::Cell;
use std::time::Duration;

use common::{lease, pull, push, Scratch};
use tq::{Durability, Error, ErrorKind, OpenOptions, Queue, TaskState};

/// Queue of the scratch whose failed tasks are retried at once, keeping
/// history as `keep_history` says.
fn open(scratch: &Scratch, keep_history: bool) -> Queue {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .keep_history(keep_history)
        .retry_backoff(Duration::ZERO, Duration::ZERO)
        .unwrap();
    scratch.open_with(&options)
}

fn step_names(queue: &Queue, id: i64) -> Vec<String> {
    let info = queue.task(id).unwrap().expect("the task is stored");
    info.steps()
        .iter()
        .map(|step| step.name().to_owned())
        .collect()
}

fn a_later_delivery_reads_the_step_without_running_it(scratch: Scratch) {
    let queue = open(&scratch, true);
    let id = push(&queue, "{\"order\": 7}");
    let runs = Cell::new(0);
    let charge = || {
        runs.set(runs.get() + 1);
        Ok::<_, Error>("{\"charge\": \"ch_1\"}".to_owned())
    };

    let first = pull(&queue).expect("delivery 1");
    assert_eq!(queue.step_output(first.receipt(), "charge").unwrap(), None);
    let output = queue.step(first.receipt(), "charge", charge).unwrap();
    assert_eq!(output, "{\"charge\": \"ch_1\"}");
    assert_eq!(runs.get(), 1);
    queue.fail(first.receipt(), "the mail step failed").unwrap();

    let second = pull(&queue).expect("delivery 2");
    assert_eq!(second.id(), id);
    assert_eq!(
        queue
            .step_output(second.receipt(), "charge")
            .unwrap()
            .as_deref(),
        Some("{\"charge\": \"ch_1\"}")
    );
    let again = queue.step(second.receipt(), "charge", charge).unwrap();
    assert_eq!(again, "{\"charge\": \"ch_1\"}");
    assert_eq!(runs.get(), 1, "the second delivery did not run the step");
    // A step whose closure fails stores nothing and runs again next time.
    let failed = queue.step(second.receipt(), "mail", || {
        Err(Error::new(ErrorKind::Io, "the mail server is down"))
    });
    assert_eq!(failed.unwrap_err().kind(), ErrorKind::Io);
    assert_eq!(queue.step_output(second.receipt(), "mail").unwrap(), None);
    queue.finish(second.receipt()).unwrap();
}

fn a_stale_receipt_is_refused_and_stores_nothing(scratch: Scratch) {
    let queue = open(&scratch, true);
    let id = push(&queue, "1");
    let first = queue.pull(&lease(30)).unwrap().expect("delivery 1");
    std::thread::sleep(Duration::from_millis(60));
    let second = pull(&queue).expect("the expired lease is delivered again");
    assert_eq!(second.id(), id);

    let err = queue
        .record_step(first.receipt(), "charge", "\"stale\"")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert_eq!(queue.step_output(second.receipt(), "charge").unwrap(), None);
    assert!(step_names(&queue, id).is_empty());

    queue.finish(second.receipt()).unwrap();
    let err = queue
        .record_step(second.receipt(), "charge", "\"late\"")
        .unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::NotHeld,
        "a finished delivery is not held"
    );
    assert!(step_names(&queue, id).is_empty());
}

/// The payload limit of the queue that checks outputs' lengths.
const SMALL_LIMIT: usize = 100;

fn bad_json_and_bad_names_are_refused(scratch: Scratch) {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .max_payload_len(SMALL_LIMIT)
        .unwrap();
    let queue = scratch.open_with(&options);
    let id = push(&queue, "1");
    let task = pull(&queue).unwrap();
    let err = queue
        .record_step(task.receipt(), "charge", "{nope")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidJson);
    for name in ["", "a\0b", &"n".repeat(tq::MAX_STEP_NAME_LEN + 1)] {
        let err = queue.record_step(task.receipt(), name, "1").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "name {name:?}");
    }
    let too_long = format!("\"{}\"", "x".repeat(SMALL_LIMIT));
    let err = queue
        .record_step(task.receipt(), "big", &too_long)
        .unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::InvalidArgument,
        "longer than the payload limit"
    );
    assert!(step_names(&queue, id).is_empty(), "nothing was stored");
    let name = "n".repeat(tq::MAX_STEP_NAME_LEN);
    assert!(queue.record_step(task.receipt(), &name, "1").unwrap());
}

fn the_first_write_wins(scratch: Scratch) {
    let queue = open(&scratch, true);
    push(&queue, "1");
    let task = pull(&queue).unwrap();
    assert!(queue.record_step(task.receipt(), "charge", "1").unwrap());
    assert!(!queue.record_step(task.receipt(), "charge", "2").unwrap());
    assert_eq!(
        queue
            .step_output(task.receipt(), "charge")
            .unwrap()
            .as_deref(),
        Some("1")
    );
}

fn snapshots_list_the_steps_in_recording_order(scratch: Scratch) {
    let queue = open(&scratch, true);
    let id = push(&queue, "1");
    let other = push(&queue, "2");
    let task = pull(&queue).unwrap();
    let before = common::now_ms() - 5_000;
    for (name, output) in [
        ("reserve", "{\"seat\": 4}"),
        ("charge", "\"ch_1\""),
        ("a", "[]"),
    ] {
        assert!(queue.record_step(task.receipt(), name, output).unwrap());
    }
    let info = queue.task(id).unwrap().unwrap();
    let steps = info.steps();
    let listed: Vec<(&str, &str)> = steps.iter().map(|s| (s.name(), s.output())).collect();
    assert_eq!(
        listed,
        [
            ("reserve", "{\"seat\": 4}"),
            ("charge", "\"ch_1\""),
            ("a", "[]")
        ]
    );
    for step in steps {
        assert!(step.recorded_at_unix_ms() > before);
        assert!(step.recorded_at_unix_ms() < common::now_ms() + 5_000);
    }
    assert!(
        step_names(&queue, other).is_empty(),
        "steps belong to their task"
    );
    queue.finish(task.receipt()).unwrap();
    assert_eq!(
        step_names(&queue, id),
        ["reserve", "charge", "a"],
        "kept with history"
    );
}

fn steps_after_a_named_step_are_cleared_for_a_retry(scratch: Scratch) {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .keep_history(true)
        .max_attempts(1)
        .unwrap();
    let queue = scratch.open_with(&options);
    let id = push(&queue, "1");
    let task = pull(&queue).unwrap();
    for name in ["one", "two", "three"] {
        assert!(queue.record_step(task.receipt(), name, "true").unwrap());
    }
    let err = queue.clear_steps_after(id, "one").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "refused while held");
    assert_eq!(step_names(&queue, id), ["one", "two", "three"]);
    queue.fail(task.receipt(), "three went wrong").unwrap();
    assert_eq!(queue.task(id).unwrap().unwrap().state(), TaskState::Dead);

    let err = queue.clear_steps_after(id, "four").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "no such step");
    assert_eq!(
        queue.clear_steps_after(id + 100, "one").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(step_names(&queue, id), ["one", "two", "three"]);

    assert_eq!(queue.clear_steps_after(id, "one").unwrap(), 2);
    queue.retry_dead(id).unwrap();
    let again = pull(&queue).expect("the retried task");
    assert_eq!(
        queue
            .step_output(again.receipt(), "one")
            .unwrap()
            .as_deref(),
        Some("true")
    );
    assert_eq!(queue.step_output(again.receipt(), "two").unwrap(), None);
    assert!(queue.record_step(again.receipt(), "two", "false").unwrap());
    assert_eq!(step_names(&queue, id), ["one", "two"]);
}

fn steps_are_removed_with_their_task(scratch: Scratch) {
    // Finished without history: the task and its steps are deleted.
    let queue = open(&scratch, false);
    let id = push(&queue, "1");
    let task = pull(&queue).unwrap();
    assert!(queue.record_step(task.receipt(), "charge", "1").unwrap());
    queue.finish(task.receipt()).unwrap();
    assert!(queue.task(id).unwrap().is_none());
    assert_eq!(queue.step_output(task.receipt(), "charge").unwrap(), None);
    assert_eq!(stored_steps(&scratch), 0);

    // Kept as history, then purged.
    let kept = open(&scratch, true);
    push(&kept, "2");
    let task = pull(&kept).unwrap();
    assert!(kept.record_step(task.receipt(), "charge", "2").unwrap());
    kept.finish(task.receipt()).unwrap();
    assert_eq!(stored_steps(&scratch), 1);
    assert_eq!(kept.purge(TaskState::Done, Duration::ZERO).unwrap(), 1);
    assert_eq!(stored_steps(&scratch), 0);
}

/// How many steps the scratch's store holds, in any queue, read beside tq.
fn stored_steps(scratch: &Scratch) -> i64 {
    match scratch.server() {
        Some(pg) => common::postgres_client(&pg.url)
            .query_one(
                &format!("SELECT count(*) FROM \"{}\".steps", pg.schema),
                &[],
            )
            .unwrap()
            .get(0),
        None => rusqlite::Connection::open(scratch.queue_path())
            .unwrap()
            .query_row("SELECT count(*) FROM tq_steps", [], |row| row.get(0))
            .unwrap(),
    }
}

on_both_backends!(
    a_later_delivery_reads_the_step_without_running_it,
    a_stale_receipt_is_refused_and_stores_nothing,
    bad_json_and_bad_names_are_refused,
    the_first_write_wins,
    snapshots_list_the_steps_in_recording_order,
    steps_after_a_named_step_are_cleared_for_a_retry,
    steps_are_removed_with_their_task,
);
