//! Expiries ("not started by") and deadlines ("all attempts within"):
//! a claim ends a task whose limit has passed as dead, never delivering
//! it, and a failure is not retried past the deadline, on both backends.

#[macro_use]
mod common;

use std::thread;
use std::time::Duration;

use common::{lease, now_ms, pull, push, Scratch};
use tq::{
    Durability, ErrorKind, Failed, OpenOptions, ParentFailure, PushOptions, Queue, TaskInfo,
    TaskState,
};

/// Queue `name` of the scratch, whose failed tasks are retried after
/// `backoff` (at once when zero).
fn open(scratch: &Scratch, backoff: Duration) -> Queue {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .keep_history(true)
        .retry_backoff(backoff, backoff)
        .unwrap();
    scratch.open_with(&options)
}

fn expiring_at(unix_ms: i64) -> PushOptions {
    let mut options = PushOptions::new();
    options.expire_at_unix_ms(unix_ms).unwrap();
    options
}

fn deadline_after(ms: u64) -> PushOptions {
    let mut options = PushOptions::new();
    options.deadline_after(Duration::from_millis(ms)).unwrap();
    options
}

fn info(queue: &Queue, id: i64) -> TaskInfo {
    queue.task(id).unwrap().expect("the task is stored")
}

/// Sleeps until the clock tq reads is past `unix_ms`.
fn sleep_past(unix_ms: i64) {
    while now_ms() <= unix_ms {
        thread::sleep(Duration::from_millis(5));
    }
}

fn an_expired_task_is_ended_by_the_claim_which_delivers_the_next(scratch: Scratch) {
    let queue = open(&scratch, Duration::ZERO);
    let expiry = now_ms() - 1000;
    let expired = queue.push("\"late\"", &expiring_at(expiry)).unwrap().id();
    let next = push(&queue, "\"next\"");
    assert_eq!(info(&queue, expired).expires_at_unix_ms(), Some(expiry));
    assert_eq!(info(&queue, expired).deadline_unix_ms(), None);

    let task = pull(&queue).expect("the next task is delivered");
    assert_eq!(task.id(), next);
    let ended = info(&queue, expired);
    assert_eq!(ended.state(), TaskState::Dead);
    assert_eq!(ended.last_error(), Some("expired"));
    assert_eq!(ended.attempts(), 0, "it was never delivered");
    assert!(pull(&queue).is_none());
}

fn an_expiry_binds_the_first_delivery_only(scratch: Scratch) {
    let queue = open(&scratch, Duration::ZERO);
    let mut options = PushOptions::new();
    options.expire_after(Duration::from_millis(200)).unwrap();
    let id = queue.push("1", &options).unwrap().id();
    let expiry = info(&queue, id).expires_at_unix_ms().unwrap();
    let task = pull(&queue).unwrap();
    sleep_past(expiry);
    assert!(matches!(
        queue.fail(task.receipt(), "try again").unwrap(),
        Failed::RetryAt(_)
    ));
    let again = pull(&queue).expect("a retry is not bound by the expiry");
    assert_eq!((again.id(), again.attempts()), (id, 2));
}

fn a_deadline_ends_the_retries(scratch: Scratch) {
    let queue = open(&scratch, Duration::ZERO);
    let id = queue.push("1", &deadline_after(300)).unwrap().id();
    let deadline = info(&queue, id).deadline_unix_ms().unwrap();
    let task = pull(&queue).unwrap();
    assert!(matches!(
        queue.fail(task.receipt(), "once").unwrap(),
        Failed::RetryAt(_)
    ));
    sleep_past(deadline);
    assert!(
        pull(&queue).is_none(),
        "the retry would start after the deadline"
    );
    let ended = info(&queue, id);
    assert_eq!(ended.state(), TaskState::Dead);
    assert_eq!(ended.last_error(), Some("deadline passed"));
    assert_eq!(ended.attempts(), 1);
}

fn a_failure_whose_retry_falls_after_the_deadline_ends_dead_at_once(scratch: Scratch) {
    let queue = open(&scratch, Duration::from_secs(120));
    let id = queue.push("1", &deadline_after(60_000)).unwrap().id();
    let task = pull(&queue).unwrap();
    assert_eq!(queue.fail(task.receipt(), "broken").unwrap(), Failed::Dead);
    let ended = info(&queue, id);
    assert_eq!(ended.state(), TaskState::Dead);
    assert_eq!(ended.last_error(), Some("deadline passed"));
}

fn a_delivery_running_past_its_deadline_finishes_but_is_not_retried(scratch: Scratch) {
    let queue = open(&scratch, Duration::ZERO);
    let finished = queue
        .push("\"finished\"", &deadline_after(200))
        .unwrap()
        .id();
    let failed = queue.push("\"failed\"", &deadline_after(200)).unwrap().id();
    let first = queue.pull(&lease(60_000)).unwrap().unwrap();
    let second = queue.pull(&lease(60_000)).unwrap().unwrap();
    sleep_past(info(&queue, failed).deadline_unix_ms().unwrap());
    queue
        .extend(first.receipt(), Duration::from_secs(60))
        .expect("its lease is renewed as any other");
    queue.finish(first.receipt()).unwrap();
    assert_eq!(info(&queue, finished).state(), TaskState::Done);
    assert_eq!(
        queue.fail(second.receipt(), "broken").unwrap(),
        Failed::Dead
    );
    let ended = info(&queue, failed);
    assert_eq!(ended.state(), TaskState::Dead);
    assert_eq!(ended.last_error(), Some("deadline passed"));
}

fn an_expired_lease_past_the_deadline_is_not_delivered_again(scratch: Scratch) {
    let queue = open(&scratch, Duration::ZERO);
    let id = queue.push("1", &deadline_after(200)).unwrap().id();
    let _lost = queue.pull(&lease(50)).unwrap().unwrap();
    sleep_past(info(&queue, id).deadline_unix_ms().unwrap());
    assert!(pull(&queue).is_none());
    let ended = info(&queue, id);
    assert_eq!(ended.state(), TaskState::Dead);
    assert_eq!(ended.last_error(), Some("deadline passed"));
}

fn a_limit_given_both_ways_or_before_the_run_time_is_refused(scratch: Scratch) {
    for json in [
        r#"{"expire_after_ms": 10, "expire_at_unix_ms": 10}"#,
        r#"{"deadline_after_ms": 10, "deadline_unix_ms": 10}"#,
    ] {
        let err = PushOptions::from_json(json).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("not both"), "{}", err.message());
    }
    let queue = open(&scratch, Duration::ZERO);
    let mut expiring = PushOptions::new();
    expiring
        .delay(Duration::from_secs(10))
        .unwrap()
        .expire_after(Duration::from_secs(5))
        .unwrap();
    let mut late = PushOptions::new();
    late.run_at_unix_ms(now_ms() + 60_000)
        .unwrap()
        .deadline_unix_ms(now_ms() + 30_000)
        .unwrap();
    for options in [expiring, late] {
        let err = queue.push("1", &options).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(
            err.message().contains("could never run"),
            "{}",
            err.message()
        );
    }
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
}

fn the_dependents_of_an_expired_task_follow_their_policy(scratch: Scratch) {
    let queue = open(&scratch, Duration::ZERO);
    let parent = queue
        .push("\"parent\"", &expiring_at(now_ms() - 1))
        .unwrap()
        .id();
    let mut cancel = PushOptions::new();
    cancel.after(&[parent]).unwrap();
    let cancelled = queue.push("\"cancelled\"", &cancel).unwrap().id();
    let mut anyway = PushOptions::new();
    anyway
        .after(&[parent])
        .unwrap()
        .on_parent_failure(ParentFailure::RunAnyway);
    let runs = queue.push("\"runs\"", &anyway).unwrap().id();

    // On PostgreSQL the task freed is claimable from the next claim on:
    // a claim is one statement, which sees the tasks as they were.
    let task = pull(&queue)
        .or_else(|| pull(&queue))
        .expect("the claim ends the parent and frees one");
    assert_eq!(task.id(), runs);
    assert_eq!(info(&queue, parent).last_error(), Some("expired"));
    assert_eq!(info(&queue, cancelled).state(), TaskState::Cancelled);
}

fn retrying_an_expired_task_clears_its_limits(scratch: Scratch) {
    let queue = open(&scratch, Duration::ZERO);
    let mut options = expiring_at(now_ms() - 1);
    options.deadline_unix_ms(now_ms() - 1).unwrap();
    let id = queue.push("1", &options).unwrap().id();
    assert!(pull(&queue).is_none());
    assert_eq!(info(&queue, id).state(), TaskState::Dead);
    queue.retry_dead(id).unwrap();
    let retried = info(&queue, id);
    assert_eq!(
        (retried.expires_at_unix_ms(), retried.deadline_unix_ms()),
        (None, None)
    );
    assert_eq!(pull(&queue).expect("it runs now").id(), id);
}

fn claims_end_a_large_backlog_of_expired_tasks_a_batch_at_a_time(scratch: Scratch) {
    // More than a claim ends at once (`SWEEP_BATCH`, 1000).
    const EXPIRED: usize = 2500;
    let queue = open(&scratch, Duration::ZERO);
    let payloads = vec!["\"expired\""; EXPIRED];
    queue
        .push_batch(&payloads, &expiring_at(now_ms() - 1))
        .unwrap();
    let good = push(&queue, "\"good\"");
    let delivered = pull(&queue).expect("the claim reads the line past the tasks left to end");
    assert_eq!(delivered.id(), good, "no expired task is ever delivered");
    let mut claims = 1;
    while queue.count(TaskState::Pending).unwrap() > 0 {
        claims += 1;
        assert!(claims <= 20, "claims make progress");
        assert!(pull(&queue).is_none());
    }
    assert_eq!(queue.count(TaskState::Dead).unwrap(), EXPIRED as u64);
}

on_both_backends!(
    an_expired_task_is_ended_by_the_claim_which_delivers_the_next,
    an_expiry_binds_the_first_delivery_only,
    a_deadline_ends_the_retries,
    a_failure_whose_retry_falls_after_the_deadline_ends_dead_at_once,
    a_delivery_running_past_its_deadline_finishes_but_is_not_retried,
    an_expired_lease_past_the_deadline_is_not_delivered_again,
    a_limit_given_both_ways_or_before_the_run_time_is_refused,
    the_dependents_of_an_expired_task_follow_their_policy,
    retrying_an_expired_task_clears_its_limits,
    claims_end_a_large_backlog_of_expired_tasks_a_batch_at_a_time,
);
