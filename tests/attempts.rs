//! Attempts: each delivery of a task that ends without finishing it
//! (failed, its lease taken back, cancelled while held) is kept with the
//! task, with its reason, holder, start and end, the newest
//! `ATTEMPTS_KEPT`; a finish or a snooze records none, and the attempts go
//! with their task. On both backends.

#[macro_use]
mod common;

use std::time::Duration;

use common::{lease, now_ms, pull, push, Scratch};
use tq::{
    AttemptInfo, AttemptOutcome, Durability, OpenOptions, PushOptions, Queue, TaskState,
    ATTEMPTS_KEPT,
};

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

/// Pushes a task that gets `max_attempts` deliveries.
fn push_with_attempts(queue: &Queue, max_attempts: u32) -> i64 {
    let mut options = PushOptions::new();
    options.max_attempts(max_attempts).unwrap();
    queue.push("{}", &options).unwrap().id()
}

fn attempts_of(queue: &Queue, id: i64) -> Vec<AttemptInfo> {
    let info = queue.task(id).unwrap().expect("the task is stored");
    info.ended_attempts().to_vec()
}

fn numbers_and_reasons(attempts: &[AttemptInfo]) -> Vec<(u32, String)> {
    attempts
        .iter()
        .map(|attempt| (attempt.attempt(), attempt.reason().unwrap_or("").to_owned()))
        .collect()
}

/// The holder id and claim time of the task's current lease.
fn lease_of(queue: &Queue, id: i64) -> (i64, i64) {
    let lease = queue.leases(Some(id), 1).unwrap().remove(0);
    (lease.holder().id(), lease.claimed_at_unix_ms())
}

fn failures_are_kept_in_order_with_reasons_and_holders(scratch: Scratch) {
    let queue = open(&scratch, true);
    let id = push_with_attempts(&queue, 5);
    let mut leases = Vec::new();
    for reason in ["timeout calling the bank", "HTTP 502", "HTTP 503"] {
        let task = pull(&queue).expect("the task is ready again");
        leases.push(lease_of(&queue, id));
        let before_fail = now_ms();
        queue.fail(task.receipt(), reason).unwrap();
        let ended = attempts_of(&queue, id).last().unwrap().ended_at_unix_ms();
        assert!(
            ended >= before_fail,
            "ended {ended}, failed at {before_fail}"
        );
    }

    let attempts = attempts_of(&queue, id);
    assert_eq!(
        numbers_and_reasons(&attempts),
        [
            (1, "timeout calling the bank".to_owned()),
            (2, "HTTP 502".to_owned()),
            (3, "HTTP 503".to_owned()),
        ]
    );
    for (attempt, (holder, claimed_at)) in attempts.iter().zip(leases) {
        assert_eq!(attempt.outcome(), AttemptOutcome::Failed);
        assert_eq!(attempt.holder_id(), Some(holder));
        assert_eq!(attempt.started_at_unix_ms(), Some(claimed_at));
        assert_eq!(
            attempt.duration_ms(),
            Some(attempt.ended_at_unix_ms() - claimed_at)
        );
        let pid = scratch
            .server()
            .is_none()
            .then_some(i64::from(std::process::id()));
        assert_eq!(attempt.holder_pid(), pid);
    }
    // A list shows no attempts; the task's last error is still the last.
    let listed = queue.list(TaskState::Pending, 0, 10).unwrap();
    assert!(listed[0].ended_attempts().is_empty());
    assert_eq!(listed[0].last_error(), Some("HTTP 503"));
}

fn a_lease_taken_back_by_recover_is_recorded(scratch: Scratch) {
    let queue = open(&scratch, true);
    let id = push_with_attempts(&queue, 5);
    queue.pull(&lease(30)).unwrap().expect("delivery 1");
    let (holder, claimed_at) = lease_of(&queue, id);
    std::thread::sleep(Duration::from_millis(60));
    assert_eq!(queue.recover().unwrap(), 1);

    let attempts = attempts_of(&queue, id);
    assert_eq!(attempts.len(), 1);
    let attempt = &attempts[0];
    assert_eq!(attempt.attempt(), 1);
    assert_eq!(attempt.outcome(), AttemptOutcome::LeaseExpired);
    assert!(
        attempt.reason().unwrap().contains("expired"),
        "{:?}",
        attempt.reason()
    );
    assert_eq!(attempt.holder_id(), Some(holder));
    assert!(attempt.duration_ms().unwrap() >= 30, "{attempt:?}");
    assert!(attempt.started_at_unix_ms() == Some(claimed_at));
}

fn an_expired_lease_claimed_again_is_recorded(scratch: Scratch) {
    let queue = open(&scratch, true);
    let id = push_with_attempts(&queue, 5);
    queue.pull(&lease(30)).unwrap().expect("delivery 1");
    std::thread::sleep(Duration::from_millis(60));
    let second = pull(&queue).expect("the expired lease is delivered again");
    assert_eq!(second.id(), id);
    queue.fail(second.receipt(), "still broken").unwrap();

    let attempts = attempts_of(&queue, id);
    let outcomes: Vec<_> = attempts.iter().map(AttemptInfo::outcome).collect();
    assert_eq!(
        outcomes,
        [AttemptOutcome::LeaseExpired, AttemptOutcome::Failed]
    );
    assert_eq!(
        attempts
            .iter()
            .map(AttemptInfo::attempt)
            .collect::<Vec<_>>(),
        [1, 2]
    );
}

fn only_the_newest_are_kept(scratch: Scratch) {
    let queue = open(&scratch, true);
    let failures = ATTEMPTS_KEPT as u32 + 5;
    let id = push_with_attempts(&queue, failures + 1);
    for n in 1..=failures {
        let task = pull(&queue).expect("the task is ready again");
        queue.fail(task.receipt(), &format!("failure {n}")).unwrap();
    }
    let kept = numbers_and_reasons(&attempts_of(&queue, id));
    let newest: Vec<_> = (6..=failures)
        .map(|n| (n, format!("failure {n}")))
        .collect();
    assert_eq!(kept.len(), ATTEMPTS_KEPT);
    assert_eq!(kept, newest);
}

fn a_task_retried_from_dead_keeps_its_history(scratch: Scratch) {
    let queue = open(&scratch, true);
    let id = push_with_attempts(&queue, 2);
    for reason in ["first", "second"] {
        let task = pull(&queue).unwrap();
        queue.fail(task.receipt(), reason).unwrap();
    }
    assert_eq!(queue.task(id).unwrap().unwrap().state(), TaskState::Dead);
    queue.retry_dead(id).unwrap();
    let task = pull(&queue).unwrap();
    queue.fail(task.receipt(), "third").unwrap();

    assert_eq!(
        numbers_and_reasons(&attempts_of(&queue, id)),
        [
            (1, "first".to_owned()),
            (2, "second".to_owned()),
            (1, "third".to_owned()),
        ]
    );
}

fn a_cancellation_ending_a_held_delivery_is_recorded(scratch: Scratch) {
    let queue = open(&scratch, true);
    let id = push_with_attempts(&queue, 5);
    queue.pull(&lease(30)).unwrap().expect("delivery 1");
    queue.cancel_task(id, "the order was withdrawn").unwrap();
    assert!(
        attempts_of(&queue, id).is_empty(),
        "the delivery goes on until its holder stops"
    );
    std::thread::sleep(Duration::from_millis(60));
    queue.recover().unwrap();

    let info = queue.task(id).unwrap().unwrap();
    assert_eq!(info.state(), TaskState::Cancelled);
    let outcomes: Vec<_> = info
        .ended_attempts()
        .iter()
        .map(|attempt| (attempt.outcome(), attempt.reason().map(str::to_owned)))
        .collect();
    assert_eq!(
        outcomes,
        [(
            AttemptOutcome::Cancelled,
            Some("the order was withdrawn".to_owned())
        )]
    );
}

fn a_finish_or_a_snooze_records_nothing(scratch: Scratch) {
    let queue = open(&scratch, true);
    let id = push(&queue, "{}");
    let task = pull(&queue).unwrap();
    queue.snooze(task.receipt(), Duration::ZERO).unwrap();
    let task = pull(&queue).unwrap();
    queue.finish(task.receipt()).unwrap();

    let info = queue.task(id).unwrap().unwrap();
    assert_eq!(info.state(), TaskState::Done);
    assert!(info.ended_attempts().is_empty());
    assert_eq!(stored_attempts(&scratch), 0);
}

fn attempts_are_removed_with_their_task(scratch: Scratch) {
    // Finished without history: the row goes, and its attempts with it.
    let forgetful = open(&scratch, false);
    push(&forgetful, "1");
    let task = pull(&forgetful).unwrap();
    forgetful.fail(task.receipt(), "once").unwrap();
    assert_eq!(stored_attempts(&scratch), 1);
    let task = pull(&forgetful).unwrap();
    forgetful.finish(task.receipt()).unwrap();
    assert_eq!(stored_attempts(&scratch), 0);

    // Dead, kept, then purged.
    let kept = open(&scratch, true);
    push_with_attempts(&kept, 1);
    let task = pull(&kept).unwrap();
    kept.fail(task.receipt(), "fatal").unwrap();
    assert_eq!(stored_attempts(&scratch), 1);
    assert_eq!(kept.purge(TaskState::Dead, Duration::ZERO).unwrap(), 1);
    assert_eq!(stored_attempts(&scratch), 0);
}

/// How many attempts the scratch's store holds, in any queue, read beside
/// tq.
fn stored_attempts(scratch: &Scratch) -> i64 {
    match scratch.server() {
        Some(pg) => common::postgres_client(&pg.url)
            .query_one(
                &format!("SELECT count(*) FROM \"{}\".attempts", pg.schema),
                &[],
            )
            .unwrap()
            .get(0),
        None => rusqlite::Connection::open(scratch.queue_path())
            .unwrap()
            .query_row("SELECT count(*) FROM tq_attempts", [], |row| row.get(0))
            .unwrap(),
    }
}

on_both_backends!(
    failures_are_kept_in_order_with_reasons_and_holders,
    a_lease_taken_back_by_recover_is_recorded,
    an_expired_lease_claimed_again_is_recorded,
    only_the_newest_are_kept,
    a_task_retried_from_dead_keeps_its_history,
    a_cancellation_ending_a_held_delivery_is_recorded,
    a_finish_or_a_snooze_records_nothing,
    attempts_are_removed_with_their_task,
);
