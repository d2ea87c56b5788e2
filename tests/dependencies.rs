//! Tasks that wait for other tasks: a push naming the tasks it waits for,
//! a graph pushed in one call, and what a task ending dead or cancelled
//! does to the tasks waiting for it, on both backends.

#[macro_use]
mod common;

use std::thread;
use std::time::Duration;

use common::{lease, pull, push, Scratch};
use tq::{
    Cancelled, Durability, ErrorKind, OpenOptions, ParentFailure, PushOptions, Pushed, Queue,
    TaskInfo, TaskState,
};

/// Queue `name` of the scratch, whose tasks have `attempts` attempts.
fn open(scratch: &Scratch, name: &str, history: bool, attempts: u32) -> Queue {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .keep_history(history)
        .max_attempts(attempts)
        .unwrap()
        .queue(name)
        .unwrap();
    scratch.open_with(&options)
}

fn after(ids: &[i64]) -> PushOptions {
    let mut options = PushOptions::new();
    options.after(ids).unwrap();
    options
}

fn after_items(items: &[usize]) -> PushOptions {
    let mut options = PushOptions::new();
    for &item in items {
        options.after_item(item).unwrap();
    }
    options
}

fn push_after(queue: &Queue, payload: &str, ids: &[i64]) -> i64 {
    queue.push(payload, &after(ids)).unwrap().id()
}

/// The stored task `id`, in whichever state it is.
fn info(queue: &Queue, id: i64) -> Option<TaskInfo> {
    [
        TaskState::Pending,
        TaskState::Leased,
        TaskState::Done,
        TaskState::Dead,
        TaskState::Cancelled,
    ]
    .into_iter()
    .flat_map(|state| queue.list(state, id - 1, 1).unwrap())
    .find(|task| task.id() == id)
}

/// Pulls the next task, which must be `id`, and finishes it.
fn run(queue: &Queue, id: i64) -> tq::Task {
    let task = pull(queue).expect("a task is ready");
    assert_eq!(task.id(), id, "the task ready");
    queue.finish(task.receipt()).unwrap();
    task
}

fn a_task_runs_only_once_every_task_it_waits_for_is_done(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 3);
    let first = push(&queue, "1");
    let second = push(&queue, "2");
    let join = push_after(&queue, "\"join\"", &[second, first, first]);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 3);
    let blocked = info(&queue, join).unwrap();
    assert_eq!(blocked.state(), TaskState::Pending);
    assert_eq!(blocked.waiting_for(), [first, second]);
    let a = pull(&queue).unwrap();
    let b = pull(&queue).unwrap();
    assert_eq!((a.id(), b.id()), (first, second));
    assert!(pull(&queue).is_none(), "the join waits for both");
    queue.finish(a.receipt()).unwrap();
    assert!(pull(&queue).is_none(), "the join waits for the second");
    assert_eq!(info(&queue, join).unwrap().waiting_for(), [second]);
    queue.finish(b.receipt()).unwrap();
    assert!(info(&queue, join).unwrap().waiting_for().is_empty());
    let task = run(&queue, join);
    assert_eq!(task.parents(), [first, second], "the ids of its parents");
    assert!(
        pull(&queue).is_none() && queue.count(TaskState::Pending).unwrap() == 0,
        "nothing left"
    );
}

fn a_task_released_before_it_is_due_waits_for_its_time(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 3);
    let parent = push(&queue, "1");
    let mut later = after(&[parent]);
    later.delay(Duration::from_millis(300)).unwrap();
    let child = queue.push("2", &later).unwrap().id();
    run(&queue, parent);
    assert!(pull(&queue).is_none(), "not yet due");
    thread::sleep(Duration::from_millis(350));
    run(&queue, child);
}

fn a_task_released_is_in_line_from_its_release_on(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 3);
    let parent = push(&queue, "1");
    let child = push_after(&queue, "2", &[parent]);
    let task = pull(&queue).unwrap();
    let other = push(&queue, "3");
    thread::sleep(Duration::from_millis(5));
    queue.finish(task.receipt()).unwrap();
    run(&queue, other);
    run(&queue, child);
}

fn a_pull_waiting_elsewhere_wakes_when_the_last_parent_finishes(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 3);
    let other = open(&scratch, "default", false, 3);
    let parent = push(&queue, "1");
    let child = push_after(&queue, "2", &[parent]);
    let task = pull(&queue).unwrap();
    let waiter = thread::spawn(move || {
        let began = std::time::Instant::now();
        let task = other.pull(&common::waiting(10_000)).unwrap();
        (task.map(|task| task.id()), began.elapsed())
    });
    thread::sleep(Duration::from_millis(300));
    queue.finish(task.receipt()).unwrap();
    let (woken, waited) = waiter.join().unwrap();
    assert_eq!(woken, Some(child));
    assert!(
        waited < Duration::from_millis(2_000),
        "the waiting pull took {waited:?}"
    );
}

fn a_graph_pushed_in_one_call_runs_in_order(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 3);
    let items = vec![
        ("\"root\"", PushOptions::new()),
        ("\"left\"", after_items(&[0])),
        ("\"right\"", after_items(&[0])),
        ("\"join\"", after_items(&[1, 2])),
    ];
    let ids: Vec<i64> = queue
        .push_items(&items)
        .unwrap()
        .into_iter()
        .map(Pushed::id)
        .collect();
    run(&queue, ids[0]);
    let left = pull(&queue).unwrap();
    let right = pull(&queue).unwrap();
    assert_eq!([left.id(), right.id()], [ids[1], ids[2]]);
    assert_eq!(left.parents(), [ids[0]]);
    assert!(pull(&queue).is_none());
    queue.finish(right.receipt()).unwrap();
    assert!(pull(&queue).is_none());
    queue.finish(left.receipt()).unwrap();
    assert_eq!(run(&queue, ids[3]).parents(), [ids[1], ids[2]]);
}

fn an_item_waiting_for_a_duplicate_waits_for_the_task_holding_the_key(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 3);
    let mut unique = PushOptions::new();
    unique.unique_key("nightly").unwrap();
    let holder = queue.push("1", &unique).unwrap().id();
    let pushed = queue
        .push_items(&[("2", unique.clone()), ("3", after_items(&[0]))])
        .unwrap();
    assert_eq!(pushed[0], Pushed::Duplicate(holder));
    assert_eq!(
        info(&queue, pushed[1].id()).unwrap().waiting_for(),
        [holder]
    );
}

fn a_bad_graph_stores_nothing_and_says_which_item(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 3);
    let existing = push(&queue, "0");
    let err = queue
        .push_items(&[
            ("1", PushOptions::new()),
            ("2", after_items(&[0])),
            ("3", after(&[existing, 999_999])),
        ])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("item 2"), "{err}");
    assert!(err.message().contains("999999"), "{err}");
    let err = queue
        .push_items(&[("1", PushOptions::new()), ("2", after_items(&[1]))])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("item 1"), "{err}");
    let err = queue.push("1", &after_items(&[0])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let err = queue
        .push_batch(&["1", "2"], &after_items(&[0]))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert_eq!(
        queue.count(TaskState::Pending).unwrap(),
        1,
        "nothing stored but the first task"
    );
}

fn a_task_to_wait_for_must_be_of_the_queue_and_stored(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 3);
    let other = open(&scratch, "other", false, 3);
    let elsewhere = push(&other, "1");
    let err = queue.push("2", &after(&[elsewhere])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(
        err.message().contains(&elsewhere.to_string()) && err.message().contains("own queue"),
        "{err}"
    );
    let err = queue.push("2", &after(&[777])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("777"), "{err}");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
    let err = PushOptions::new().after(&[0]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let many: Vec<i64> = (1..=tq::MAX_PARENTS as i64 + 1).collect();
    assert_eq!(
        PushOptions::new().after(&many).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

fn a_task_done_before_the_push_does_not_hold_it_back(scratch: Scratch) {
    let queue = open(&scratch, "default", true, 3);
    let done = push(&queue, "1");
    run(&queue, done);
    let child = push_after(&queue, "2", &[done]);
    assert!(info(&queue, child).unwrap().waiting_for().is_empty());
    assert_eq!(run(&queue, child).parents(), [done]);
}

fn a_dead_task_cancels_the_tasks_waiting_for_it_in_turn(scratch: Scratch) {
    for history in [true, false] {
        let queue = open(&scratch, &format!("dead-{history}"), history, 1);
        let parent = push(&queue, "1");
        let child = push_after(&queue, "2", &[parent]);
        let grandchild = push_after(&queue, "3", &[child]);
        let task = pull(&queue).unwrap();
        queue.fail(task.receipt(), "broken").unwrap();
        assert!(pull(&queue).is_none(), "nothing runs");
        assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
        if history {
            assert_eq!(queue.count(TaskState::Cancelled).unwrap(), 2);
            let child = info(&queue, child).unwrap();
            assert_eq!(child.state(), TaskState::Cancelled);
            assert!(
                child
                    .last_error()
                    .unwrap()
                    .contains(&format!("task {parent}")),
                "{:?}",
                child.last_error()
            );
            assert!(child.last_error().unwrap().contains("dead"));
            let grandchild = info(&queue, grandchild).unwrap();
            assert!(grandchild
                .last_error()
                .unwrap()
                .contains(&format!("task {child}", child = child.id())));
        } else {
            assert!(info(&queue, child).is_none() && info(&queue, grandchild).is_none());
        }
        // A dead task retried runs again; what it cancelled stays cancelled.
        queue.retry_dead(parent).unwrap();
        run(&queue, parent);
        assert!(pull(&queue).is_none());
    }
}

fn a_task_pushed_to_run_anyway_runs_after_a_failure(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 1);
    let failing = push(&queue, "1");
    let fine = push(&queue, "2");
    let mut anyway = after(&[failing, fine]);
    anyway.on_parent_failure(ParentFailure::RunAnyway);
    let cleanup = queue.push("\"cleanup\"", &anyway).unwrap().id();
    let task = pull(&queue).unwrap();
    assert_eq!(task.id(), failing);
    queue.fail(task.receipt(), "broken").unwrap();
    let task = pull(&queue).unwrap();
    assert_eq!(task.id(), fine);
    assert_eq!(info(&queue, cleanup).unwrap().waiting_for(), [fine]);
    assert!(pull(&queue).is_none());
    queue.finish(task.receipt()).unwrap();
    assert_eq!(run(&queue, cleanup).parents(), [failing, fine]);
    // A dead task at push time counts as ended for a task run anyway, and
    // refuses one that would be cancelled.
    let mut also = after(&[failing]);
    also.on_parent_failure(ParentFailure::RunAnyway);
    let late = queue.push("3", &also).unwrap().id();
    assert!(info(&queue, late).unwrap().waiting_for().is_empty());
    let err = queue.push("4", &after(&[failing])).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("dead"), "{err}");
}

fn a_cancelled_task_cancels_the_tasks_waiting_for_it(scratch: Scratch) {
    let queue = open(&scratch, "default", true, 3);
    let pending = push(&queue, "1");
    let child = push_after(&queue, "2", &[pending]);
    assert_eq!(queue.cancel_task(pending, "").unwrap(), Cancelled::Removed);
    let cancelled = info(&queue, child).unwrap();
    assert_eq!(cancelled.state(), TaskState::Cancelled);
    assert!(cancelled.last_error().unwrap().contains("cancelled"));
    // A leased one: once its holder learns of it.
    let leased = push(&queue, "3");
    let child = push_after(&queue, "4", &[leased]);
    let task = pull(&queue).unwrap();
    assert_eq!(queue.cancel_task(leased, "").unwrap(), Cancelled::Requested);
    assert_eq!(info(&queue, child).unwrap().state(), TaskState::Pending);
    assert_eq!(
        queue.finish(task.receipt()).unwrap_err().kind(),
        ErrorKind::Cancelled
    );
    assert_eq!(info(&queue, child).unwrap().state(), TaskState::Cancelled);
}

fn a_blocked_task_cancelled_leaves_the_other_tasks_alone(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 3);
    let parent = push(&queue, "1");
    let cancelled = push_after(&queue, "2", &[parent]);
    let kept = push_after(&queue, "3", &[parent]);
    assert_eq!(
        queue.cancel_task(cancelled, "").unwrap(),
        Cancelled::Removed
    );
    assert!(info(&queue, cancelled).is_none());
    run(&queue, parent);
    run(&queue, kept);
    assert!(pull(&queue).is_none());
}

fn a_last_attempt_lost_cancels_the_tasks_waiting_for_it(scratch: Scratch) {
    // Taken back by a recovery, and buried by a claim.
    for by_claim in [false, true] {
        let queue = open(&scratch, &format!("lost-{by_claim}"), true, 1);
        let parent = push(&queue, "1");
        let child = push_after(&queue, "2", &[parent]);
        let _task = queue.pull(&lease(20)).unwrap().unwrap();
        thread::sleep(Duration::from_millis(60));
        if by_claim {
            assert!(pull(&queue).is_none());
        } else {
            assert_eq!(queue.recover().unwrap(), 1);
        }
        assert_eq!(queue.count(TaskState::Dead).unwrap(), 1);
        assert_eq!(info(&queue, child).unwrap().state(), TaskState::Cancelled);
    }
}

fn a_blocked_task_holds_its_unique_key(scratch: Scratch) {
    let queue = open(&scratch, "default", false, 3);
    let parent = push(&queue, "1");
    let mut unique = after(&[parent]);
    unique.unique_key("report").unwrap();
    let child = queue.push("2", &unique).unwrap();
    assert!(matches!(child, Pushed::Stored(_)));
    let mut again = PushOptions::new();
    again.unique_key("report").unwrap();
    assert_eq!(
        queue.push("3", &again).unwrap(),
        Pushed::Duplicate(child.id())
    );
}

on_both_backends!(
    a_task_runs_only_once_every_task_it_waits_for_is_done,
    a_task_released_before_it_is_due_waits_for_its_time,
    a_task_released_is_in_line_from_its_release_on,
    a_pull_waiting_elsewhere_wakes_when_the_last_parent_finishes,
    a_graph_pushed_in_one_call_runs_in_order,
    an_item_waiting_for_a_duplicate_waits_for_the_task_holding_the_key,
    a_bad_graph_stores_nothing_and_says_which_item,
    a_task_to_wait_for_must_be_of_the_queue_and_stored,
    a_task_done_before_the_push_does_not_hold_it_back,
    a_dead_task_cancels_the_tasks_waiting_for_it_in_turn,
    a_task_pushed_to_run_anyway_runs_after_a_failure,
    a_cancelled_task_cancels_the_tasks_waiting_for_it,
    a_blocked_task_cancelled_leaves_the_other_tasks_alone,
    a_last_attempt_lost_cancels_the_tasks_waiting_for_it,
    a_blocked_task_holds_its_unique_key,
);
