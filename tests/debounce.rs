//! Debounce and replace on a unique key: a push under a key that a
//! pending task holds may give that task its payload and move its run
//! time (never later than a longest debounce after the first push),
//! while a task being delivered is never changed, on both backends.

#[macro_use]
mod common;

use std::thread;
use std::time::Duration;

use common::{now_ms, pull, waiting, Scratch};
use tq::{
    Durability, ErrorKind, Failed, OpenOptions, PushOptions, Pushed, Queue, TaskInfo, TaskState,
};

/// The scratch's queue, whose failed tasks are retried at once.
fn open(scratch: &Scratch) -> Queue {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .retry_backoff(Duration::ZERO, Duration::ZERO)
        .unwrap();
    scratch.open_with(&options)
}

/// Options under unique key `key` that replace a pending holder's payload
/// (`replace`) and debounce it by `delay_ms`, up to `max_ms` after the
/// first push (`None`: no debounce).
fn merging(key: &str, replace: bool, debounce: Option<(u64, u64)>) -> PushOptions {
    let mut options = PushOptions::new();
    options.unique_key(key).unwrap().replace_pending(replace);
    if let Some((delay_ms, max_ms)) = debounce {
        options
            .delay(Duration::from_millis(delay_ms))
            .unwrap()
            .debounce(Duration::from_millis(max_ms))
            .unwrap();
    }
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

fn a_burst_of_pushes_is_delivered_once_with_the_last_payload(scratch: Scratch) {
    const PUSHES: usize = 1000;
    let queue = open(&scratch);
    let options = merging("doc-7", true, Some((300, 60_000)));
    let first = queue.push("0", &options).unwrap();
    assert!(matches!(first, Pushed::Stored(_)), "{first:?}");
    let mut last_push = 0;
    for n in 1..PUSHES {
        last_push = now_ms();
        let pushed = queue.push(&n.to_string(), &options).unwrap();
        assert_eq!(pushed, Pushed::Merged(first.id()), "push {n}");
    }
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
    let held = info(&queue, first.id());
    assert_eq!(held.payload(), (PUSHES - 1).to_string());
    assert!(
        held.run_at_unix_ms() >= last_push + 300,
        "due a delay after the last push"
    );

    sleep_past(held.run_at_unix_ms());
    let task = queue.pull(&waiting(5000)).unwrap().expect("delivered");
    assert_eq!(
        (task.id(), task.payload()),
        (first.id(), (PUSHES - 1).to_string().as_str())
    );
    queue.finish(task.receipt()).unwrap();
    assert!(pull(&queue).is_none(), "one delivery in all");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
}

fn a_steady_stream_runs_no_later_than_the_longest_debounce(scratch: Scratch) {
    let queue = open(&scratch);
    let options = merging("price-3", false, Some((200, 500)));
    let id = queue.push("1", &options).unwrap().id();
    let cap = info(&queue, id).created_at_unix_ms() + 500;
    // Each push alone would put the run time 200 ms ahead: without the cap
    // the task would never run while the pushes go on.
    let delivered = loop {
        let pushed = queue.push("2", &options).unwrap();
        if let Some(task) = pull(&queue) {
            break task;
        }
        assert_eq!(pushed, Pushed::Merged(id));
        assert!(info(&queue, id).run_at_unix_ms() <= cap);
        assert!(now_ms() < cap + 20_000, "the task is delivered in the end");
        thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(delivered.id(), id);
    assert!(
        now_ms() >= info(&queue, id).run_at_unix_ms(),
        "delivered once due"
    );
    assert_eq!(info(&queue, id).run_at_unix_ms(), cap);
    assert_eq!(
        delivered.payload(),
        "1",
        "without replace, the payload stays"
    );
}

fn a_delivered_task_is_never_changed(scratch: Scratch) {
    let queue = open(&scratch);
    let options = merging("doc-1", true, Some((0, 1000)));
    let id = queue.push("\"first\"", &options).unwrap().id();
    let task = pull(&queue).expect("delivered");
    let run_at = info(&queue, id).run_at_unix_ms();

    let later = merging("doc-1", true, Some((5000, 60_000)));
    assert_eq!(
        queue.push("\"second\"", &later).unwrap(),
        Pushed::Duplicate(id),
        "a task being delivered is not merged into"
    );
    let held = info(&queue, id);
    assert_eq!(held.state(), TaskState::Leased);
    assert_eq!(held.payload(), "\"first\"");
    assert_eq!(held.run_at_unix_ms(), run_at);
    assert_eq!(task.payload(), "\"first\"");
    queue
        .finish(task.receipt())
        .expect("its receipt still finishes it");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
    assert!(matches!(
        queue.push("\"third\"", &options).unwrap(),
        Pushed::Stored(new) if new != id
    ));
}

fn a_task_waiting_for_its_retry_is_merged_into(scratch: Scratch) {
    let queue = open(&scratch);
    let options = merging("doc-2", true, None);
    let id = queue.push("1", &options).unwrap().id();
    let task = pull(&queue).unwrap();
    assert!(matches!(
        queue.fail(task.receipt(), "flaky").unwrap(),
        Failed::RetryAt(_)
    ));
    assert_eq!(queue.push("2", &options).unwrap(), Pushed::Merged(id));
    let retried = queue.pull(&waiting(5000)).unwrap().expect("retried");
    assert_eq!((retried.id(), retried.payload()), (id, "2"));
    assert_eq!(retried.attempts(), 2, "its attempts go on");
    assert!(matches!(
        queue.fail(task.receipt(), "late").unwrap_err().kind(),
        ErrorKind::NotHeld
    ));
}

fn replace_alone_keeps_the_run_time_and_debounce_alone_the_payload(scratch: Scratch) {
    let queue = open(&scratch);
    let mut delayed = merging("k", false, None);
    delayed.delay(Duration::from_secs(3600)).unwrap();
    let id = queue.push("1", &delayed).unwrap().id();
    let run_at = info(&queue, id).run_at_unix_ms();

    assert_eq!(
        queue.push("2", &merging("k", true, None)).unwrap(),
        Pushed::Merged(id)
    );
    assert_eq!(
        (
            info(&queue, id).payload(),
            info(&queue, id).run_at_unix_ms()
        ),
        ("2", run_at)
    );

    // A debounce may also bring the run time forward: to the push's own.
    assert_eq!(
        queue
            .push("3", &merging("k", false, Some((0, 3_600_000))))
            .unwrap(),
        Pushed::Merged(id)
    );
    let now_due = info(&queue, id);
    assert_eq!(now_due.payload(), "2");
    assert!(now_due.run_at_unix_ms() <= now_ms());
    let task = pull(&queue).expect("a debounce to now makes the task ready");
    assert_eq!(task.id(), id);
}

fn a_ready_task_debounced_waits_for_its_new_run_time(scratch: Scratch) {
    let queue = open(&scratch);
    let plain = merging("k", false, None);
    let id = queue.push("1", &plain).unwrap().id();
    assert_eq!(
        queue.push("1", &plain).unwrap(),
        Pushed::Duplicate(id),
        "no merge asked: as before"
    );
    assert_eq!(
        queue
            .push("2", &merging("k", true, Some((3_600_000, 7_200_000))))
            .unwrap(),
        Pushed::Merged(id)
    );
    assert!(pull(&queue).is_none(), "the ready task was put off");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
    assert_eq!(queue.oldest_ready_age().unwrap(), None);
}

fn merges_the_options_cannot_make_are_refused_storing_nothing(scratch: Scratch) {
    let queue = open(&scratch);
    let parent = common::push(&queue, "0");
    let refused = |options: &PushOptions| {
        let err = queue.push("1", options).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        err.message().to_owned()
    };
    let mut no_key = PushOptions::new();
    no_key.replace_pending(true);
    assert!(refused(&no_key).contains("needs a unique key"));
    no_key
        .replace_pending(false)
        .debounce(Duration::from_secs(1))
        .unwrap();
    assert!(refused(&no_key).contains("needs a unique key"));

    let mut after = merging("k", true, None);
    after.after(&[parent]).unwrap();
    assert!(refused(&after).contains("wait for other tasks"));
    let mut group = merging("k", false, Some((0, 1000)));
    group.group("g", 1).unwrap();
    assert!(refused(&group).contains("ordered group"));

    let err = queue
        .push_batch(&["1", "2"], &{
            let mut options = PushOptions::new();
            options.replace_pending(true);
            options
        })
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let mut waits = merging("k", true, None);
    waits.after_item(0).unwrap();
    let err = queue
        .push_items(&[("1", PushOptions::new()), ("2", waits)])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("item 1"), "{err}");

    assert_eq!(
        PushOptions::new()
            .debounce(Duration::ZERO)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        queue.count(TaskState::Pending).unwrap(),
        1,
        "only the parent"
    );
    assert_eq!(queue.task_with_unique_key("k").unwrap(), None);
}

fn json_options_merge_as_the_setters_do(scratch: Scratch) {
    let queue = open(&scratch);
    let options = PushOptions::from_json(
        r#"{"unique_key": "j", "replace_pending": true, "delay_ms": 60000,
            "debounce_max_ms": 120000}"#,
    )
    .unwrap();
    assert_eq!(options, merging("j", true, Some((60_000, 120_000))));
    let id = queue.push("1", &options).unwrap().id();
    assert_eq!(queue.push("2", &options).unwrap(), Pushed::Merged(id));
    assert_eq!(info(&queue, id).payload(), "2");
    for (json, wanted) in [
        (r#"{"replace_pending": true}"#, "needs a unique key"),
        (
            r#"{"unique_key": "j", "replace_pending": 1}"#,
            "replace_pending",
        ),
        (
            r#"{"unique_key": "j", "debounce_max_ms": -5}"#,
            "debounce_max_ms",
        ),
        (
            r#"{"unique_key": "j", "debounce_max_ms": 0}"#,
            "longest debounce",
        ),
        (
            r#"{"unique_key": "j", "replace_pending": true, "group": "g"}"#,
            "ordered group",
        ),
    ] {
        let err = PushOptions::from_json(json).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains(wanted), "{json}: {err}");
    }
}

on_both_backends!(
    a_burst_of_pushes_is_delivered_once_with_the_last_payload,
    a_steady_stream_runs_no_later_than_the_longest_debounce,
    a_delivered_task_is_never_changed,
    a_task_waiting_for_its_retry_is_merged_into,
    replace_alone_keeps_the_run_time_and_debounce_alone_the_payload,
    a_ready_task_debounced_waits_for_its_new_run_time,
    merges_the_options_cannot_make_are_refused_storing_nothing,
    json_options_merge_as_the_setters_do,
);
