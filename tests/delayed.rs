//! A queue's delayed tasks (pending, not yet due): those never delivered
//! and those waiting out the pause before a retry, listed soonest first
//! and counted, on both backends.

#[macro_use]
mod common;

use std::time::Duration;

use common::{pull, push, Scratch};
use tq::{Delayed, OpenOptions, PushOptions, Queue};

const HOUR: Duration = Duration::from_secs(3600);

fn delayed_by(queue: &Queue, payload: &str, delay: Duration) -> i64 {
    let mut options = PushOptions::new();
    options.delay(delay).unwrap();
    queue.push(payload, &options).unwrap().id()
}

fn ids(queue: &Queue, kind: Delayed, after: Option<(i64, i64)>, limit: usize) -> Vec<i64> {
    queue
        .list_delayed(kind, after, limit)
        .unwrap()
        .iter()
        .map(|task| task.id())
        .collect()
}

/// A queue whose failed tasks wait an hour before their retry.
fn slow_retries(scratch: &Scratch) -> Queue {
    let mut options = OpenOptions::new();
    options.retry_backoff(HOUR, HOUR).unwrap();
    scratch.open_with(&options)
}

fn delayed_tasks_are_listed_soonest_first_and_paged(scratch: Scratch) {
    let queue = scratch.open();
    push(&queue, "\"ready\"");
    let in_two_hours = delayed_by(&queue, "\"b\"", 2 * HOUR);
    let in_an_hour = delayed_by(&queue, "\"a\"", HOUR);
    let in_three_hours = delayed_by(&queue, "\"c\"", 3 * HOUR);
    let mut after_parent = PushOptions::new();
    after_parent.after(&[in_an_hour]).unwrap();
    queue.push("\"blocked\"", &after_parent).unwrap();

    assert_eq!(
        ids(&queue, Delayed::FirstAttempt, None, 10),
        [in_an_hour, in_two_hours, in_three_hours]
    );
    assert_eq!(queue.count_delayed(Delayed::FirstAttempt, 100).unwrap(), 3);
    assert_eq!(
        queue.count_delayed(Delayed::FirstAttempt, 2).unwrap(),
        2,
        "counted up to 2"
    );
    let first_page = queue.list_delayed(Delayed::FirstAttempt, None, 2).unwrap();
    let last = first_page.last().unwrap();
    assert_eq!(
        ids(
            &queue,
            Delayed::FirstAttempt,
            Some((last.run_at_unix_ms(), last.id())),
            2
        ),
        [in_three_hours]
    );
    assert!(ids(&queue, Delayed::Retry, None, 10).is_empty());
    assert_eq!(queue.count_delayed(Delayed::Retry, 100).unwrap(), 0);
}

fn a_failed_task_waiting_for_its_retry_is_listed_apart(scratch: Scratch) {
    let queue = slow_retries(&scratch);
    let failing = push(&queue, "\"fails\"");
    let later = delayed_by(&queue, "\"later\"", 2 * HOUR);
    let task = pull(&queue).unwrap();
    assert_eq!(task.id(), failing);
    queue.fail(task.receipt(), "smtp timeout").unwrap();

    let retrying = queue.list_delayed(Delayed::Retry, None, 10).unwrap();
    assert_eq!(retrying.len(), 1);
    assert_eq!(retrying[0].id(), failing);
    assert_eq!(retrying[0].last_error(), Some("smtp timeout"));
    assert_eq!(queue.count_delayed(Delayed::Retry, 100).unwrap(), 1);
    assert_eq!(ids(&queue, Delayed::FirstAttempt, None, 10), [later]);
    assert_eq!(queue.count_delayed(Delayed::FirstAttempt, 100).unwrap(), 1);
}

fn another_queues_delayed_tasks_are_not_listed(scratch: Scratch) {
    let queue = scratch.open();
    let mut other = OpenOptions::new();
    other.queue("other").unwrap();
    let other = scratch.open_with(&other);
    delayed_by(&other, "\"theirs\"", HOUR);
    let ours = delayed_by(&queue, "\"ours\"", HOUR);
    assert_eq!(ids(&queue, Delayed::FirstAttempt, None, 10), [ours]);
    assert_eq!(queue.count_delayed(Delayed::FirstAttempt, 100).unwrap(), 1);
}

on_both_backends!(
    delayed_tasks_are_listed_soonest_first_and_paged,
    a_failed_task_waiting_for_its_retry_is_listed_apart,
    another_queues_delayed_tasks_are_not_listed,
);
