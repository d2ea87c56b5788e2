//! Events and durable sleep: a signal under a key, a held task waiting for
//! one with a timeout (suspended meanwhile, its attempt given back, its
//! steps kept, the outcome read back by its next delivery), and a held
//! task sleeping until a time. On both backends.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::{lease, pull, push, waiting, Scratch};
use tq::{Awaited, Durability, ErrorKind, OpenOptions, Queue, Slept, TaskState};

const LONG: Duration = Duration::from_secs(600);

fn open(scratch: &Scratch) -> Queue {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .keep_history(true)
        .retry_backoff(Duration::ZERO, Duration::ZERO)
        .unwrap();
    scratch.open_with(&options)
}

fn state_and_attempts(queue: &Queue, id: i64) -> (TaskState, u32) {
    let info = queue.task(id).unwrap().expect("the task is stored");
    (info.state(), info.attempts())
}

fn an_event_sent_before_the_wait_is_taken_at_once(scratch: Scratch) {
    let queue = open(&scratch);
    assert_eq!(queue.signal("payment:42", "{\"paid\": 10}").unwrap(), None);
    let id = push(&queue, "1");
    let task = pull(&queue).unwrap();
    let awaited = queue
        .wait_for_event(task.receipt(), "payment:42", LONG)
        .unwrap();
    assert_eq!(awaited, Awaited::Event("{\"paid\": 10}".into()));
    // Asked again, the same answer; the task is still held.
    let again = queue
        .wait_for_event(task.receipt(), "payment:42", LONG)
        .unwrap();
    assert_eq!(again, awaited);
    queue.finish(task.receipt()).unwrap();
    let steps = queue.task(id).unwrap().unwrap();
    assert_eq!(steps.steps()[0].name(), "tq:event:payment:42");
}

fn a_waiting_task_is_suspended_then_woken_with_the_payload(scratch: Scratch) {
    let queue = open(&scratch);
    let id = push(&queue, "1");
    let first = pull(&queue).unwrap();
    queue
        .record_step(first.receipt(), "charge", "\"ch_1\"")
        .unwrap();
    let awaited = queue
        .wait_for_event(first.receipt(), "payment:42", LONG)
        .unwrap();
    assert_eq!(awaited, Awaited::Suspended);
    // The delivery is over and no attempt was spent; nothing to pull.
    let err = queue.finish(first.receipt()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert_eq!(state_and_attempts(&queue, id), (TaskState::Pending, 0));
    assert!(pull(&queue).is_none());

    assert_eq!(
        queue.signal("payment:42", "{\"paid\": 5}").unwrap(),
        Some(id)
    );
    let second = pull(&queue).expect("the signal made the task ready");
    assert_eq!(second.id(), id);
    assert_eq!(second.attempts(), 1);
    assert_eq!(
        queue
            .step_output(second.receipt(), "charge")
            .unwrap()
            .as_deref(),
        Some("\"ch_1\"")
    );
    let replayed = queue
        .wait_for_event(second.receipt(), "payment:42", LONG)
        .unwrap();
    assert_eq!(replayed, Awaited::Event("{\"paid\": 5}".into()));
    queue.finish(second.receipt()).unwrap();
}

fn a_wait_times_out_and_a_later_event_is_kept(scratch: Scratch) {
    let queue = open(&scratch);
    let id = push(&queue, "1");
    let first = pull(&queue).unwrap();
    let timeout = Duration::from_millis(100);
    assert_eq!(
        queue.wait_for_event(first.receipt(), "k", timeout).unwrap(),
        Awaited::Suspended
    );
    let second = queue
        .pull(&waiting(10_000))
        .unwrap()
        .expect("delivered again at the timeout");
    assert_eq!(second.id(), id);
    assert_eq!(
        queue
            .wait_for_event(second.receipt(), "k", timeout)
            .unwrap(),
        Awaited::TimedOut
    );
    assert_eq!(
        queue.signal("k", "1").unwrap(),
        None,
        "nobody waits any more"
    );
    assert_eq!(
        queue
            .wait_for_event(second.receipt(), "k", timeout)
            .unwrap(),
        Awaited::TimedOut,
        "the outcome is recorded"
    );
    // A zero timeout never suspends.
    assert_eq!(
        queue
            .wait_for_event(second.receipt(), "k2", Duration::ZERO)
            .unwrap(),
        Awaited::TimedOut
    );
    queue.finish(second.receipt()).unwrap();
    let other = push(&queue, "2");
    let task = pull(&queue).unwrap();
    assert_eq!(task.id(), other);
    assert_eq!(
        queue
            .wait_for_event(task.receipt(), "k", Duration::ZERO)
            .unwrap(),
        Awaited::Event("1".into())
    );
}

fn one_event_wakes_the_first_waiter_only(scratch: Scratch) {
    let queue = open(&scratch);
    let first = push(&queue, "1");
    let second = push(&queue, "2");
    for _ in 0..2 {
        let task = pull(&queue).unwrap();
        assert_eq!(
            queue.wait_for_event(task.receipt(), "k", LONG).unwrap(),
            Awaited::Suspended
        );
    }
    assert_eq!(queue.signal("k", "\"a\"").unwrap(), Some(first));
    let woken = pull(&queue).unwrap();
    assert_eq!(woken.id(), first);
    assert!(pull(&queue).is_none(), "the other waiter keeps waiting");
    assert_eq!(queue.signal("k", "\"b\"").unwrap(), Some(second));
    let next = pull(&queue).unwrap();
    assert_eq!(
        queue.wait_for_event(next.receipt(), "k", LONG).unwrap(),
        Awaited::Event("\"b\"".into())
    );
    assert_eq!(
        queue.wait_for_event(woken.receipt(), "k", LONG).unwrap(),
        Awaited::Event("\"a\"".into())
    );
}

fn kept_events_are_taken_in_send_order_one_per_wait(scratch: Scratch) {
    let queue = open(&scratch);
    for payload in ["1", "2"] {
        assert_eq!(queue.signal("k", payload).unwrap(), None);
    }
    push(&queue, "10");
    push(&queue, "11");
    let mut taken = Vec::new();
    for _ in 0..2 {
        let task = pull(&queue).unwrap();
        taken.push(queue.wait_for_event(task.receipt(), "k", LONG).unwrap());
    }
    assert_eq!(
        taken,
        vec![Awaited::Event("1".into()), Awaited::Event("2".into())]
    );
    push(&queue, "12");
    let third = pull(&queue).unwrap();
    assert_eq!(
        queue.wait_for_event(third.receipt(), "k", LONG).unwrap(),
        Awaited::Suspended,
        "both events were taken"
    );
}

fn an_event_past_its_retention_is_gone(scratch: Scratch) {
    let queue = open(&scratch);
    queue
        .signal_kept_for("k", "1", Duration::from_millis(50))
        .unwrap();
    queue.signal("kept", "2").unwrap();
    std::thread::sleep(Duration::from_millis(120));
    push(&queue, "10");
    let task = pull(&queue).unwrap();
    assert_eq!(
        queue
            .wait_for_event(task.receipt(), "k", Duration::ZERO)
            .unwrap(),
        Awaited::TimedOut
    );
    assert_eq!(
        queue
            .wait_for_event(task.receipt(), "kept", Duration::ZERO)
            .unwrap(),
        Awaited::Event("2".into())
    );
}

fn a_stale_receipt_is_refused_and_changes_nothing(scratch: Scratch) {
    let queue = open(&scratch);
    queue.signal("k", "1").unwrap();
    let id = push(&queue, "10");
    let first = queue.pull(&lease(30)).unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(60));
    let second = pull(&queue).expect("the expired lease is delivered again");
    let err = queue
        .wait_for_event(first.receipt(), "k", LONG)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    let err = queue
        .sleep_for(first.receipt(), "nap", Duration::from_secs(60))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert!(queue.task(id).unwrap().unwrap().steps().is_empty());
    assert_eq!(
        queue.wait_for_event(second.receipt(), "k", LONG).unwrap(),
        Awaited::Event("1".into()),
        "the event is still there"
    );
}

fn bad_input_is_refused_and_stores_nothing(scratch: Scratch) {
    let queue = open(&scratch);
    let err = queue.signal("k", "{not json").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidJson);
    for key in ["", "a\0b"] {
        let err = queue.signal(key, "1").unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }
    let long = "k".repeat(tq::MAX_EVENT_KEY_LEN + 1);
    assert_eq!(
        queue.signal(&long, "1").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    push(&queue, "10");
    let task = pull(&queue).unwrap();
    for key in ["", long.as_str()] {
        let err = queue.wait_for_event(task.receipt(), key, LONG).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    }
    let err = queue.sleep_for(task.receipt(), "", LONG).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    // tq's own step names are not the caller's to record.
    let err = queue
        .record_step(task.receipt(), "tq:event:k", "1")
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        queue
            .wait_for_event(task.receipt(), "k", Duration::ZERO)
            .unwrap(),
        Awaited::TimedOut,
        "no event was stored"
    );
}

/// Waits and signals under one key race from threads: every event is
/// taken exactly once, and every suspended waiter is woken.
fn a_signal_racing_a_wait_is_neither_lost_nor_doubled(scratch: Scratch) {
    const TASKS: usize = 8;
    let queue = open(&scratch);
    for n in 0..TASKS {
        push(&queue, &n.to_string());
    }
    let tasks: Vec<_> = (0..TASKS).map(|_| pull(&queue).unwrap()).collect();
    let mut taken = Vec::new();
    std::thread::scope(|scope| {
        let waits: Vec<_> = tasks
            .iter()
            .map(|task| {
                let queue = &queue;
                scope.spawn(move || queue.wait_for_event(task.receipt(), "k", LONG).unwrap())
            })
            .collect();
        let signals: Vec<_> = (0..TASKS)
            .map(|n| {
                let queue = &queue;
                scope.spawn(move || queue.signal("k", &n.to_string()).unwrap())
            })
            .collect();
        for wait in waits {
            if let Awaited::Event(payload) = wait.join().unwrap() {
                taken.push(payload);
            }
        }
        for signal in signals {
            signal.join().unwrap();
        }
    });
    // The suspended waiters were woken: each takes its event on replay.
    while let Some(task) = pull(&queue) {
        match queue.wait_for_event(task.receipt(), "k", LONG).unwrap() {
            Awaited::Event(payload) => taken.push(payload),
            other => panic!("a woken waiter got {other:?}"),
        }
    }
    let distinct: BTreeSet<_> = taken.iter().cloned().collect();
    assert_eq!(taken.len(), TASKS, "taken: {taken:?}");
    assert_eq!(distinct.len(), TASKS, "taken: {taken:?}");
}

fn a_signal_wakes_a_blocked_pull(scratch: Scratch) {
    let queue = open(&scratch);
    let id = push(&queue, "10");
    let task = pull(&queue).unwrap();
    assert_eq!(
        queue.wait_for_event(task.receipt(), "k", LONG).unwrap(),
        Awaited::Suspended
    );
    let pulled = std::thread::scope(|scope| {
        let puller = scope.spawn(|| queue.pull(&waiting(20_000)).unwrap());
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(queue.signal("k", "1").unwrap(), Some(id));
        puller.join().unwrap()
    });
    assert_eq!(pulled.expect("the blocked pull took it").id(), id);
}

fn a_durable_sleep_keeps_steps_and_spends_no_attempt(scratch: Scratch) {
    let queue = open(&scratch);
    let id = push(&queue, "10");
    let first = pull(&queue).unwrap();
    queue.record_step(first.receipt(), "charge", "1").unwrap();
    let nap = Duration::from_millis(150);
    assert_eq!(
        queue.sleep_for(first.receipt(), "nap", nap).unwrap(),
        Slept::Suspended
    );
    assert_eq!(state_and_attempts(&queue, id), (TaskState::Pending, 0));
    assert!(pull(&queue).is_none(), "asleep");
    let second = queue.pull(&waiting(10_000)).unwrap().expect("woken");
    assert_eq!(second.id(), id);
    assert_eq!(second.attempts(), 1);
    assert_eq!(
        queue
            .step_output(second.receipt(), "charge")
            .unwrap()
            .as_deref(),
        Some("1")
    );
    // The same call on replay returns at once: its end was recorded.
    assert_eq!(
        queue.sleep_for(second.receipt(), "nap", nap).unwrap(),
        Slept::Over
    );
    // A sleep until a time already past never suspends.
    assert_eq!(
        queue.sleep_until(second.receipt(), "past", 1).unwrap(),
        Slept::Over
    );
    queue.finish(second.receipt()).unwrap();
}

on_both_backends!(
    an_event_sent_before_the_wait_is_taken_at_once,
    a_waiting_task_is_suspended_then_woken_with_the_payload,
    a_wait_times_out_and_a_later_event_is_kept,
    one_event_wakes_the_first_waiter_only,
    kept_events_are_taken_in_send_order_one_per_wait,
    an_event_past_its_retention_is_gone,
    a_stale_receipt_is_refused_and_changes_nothing,
    bad_input_is_refused_and_stores_nothing,
    a_signal_racing_a_wait_is_neither_lost_nor_doubled,
    a_signal_wakes_a_blocked_pull,
    a_durable_sleep_keeps_steps_and_spends_no_attempt,
);
