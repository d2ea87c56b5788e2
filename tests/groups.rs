//! Ordered groups: tasks of one group delivered at most K at a time, in
//! push order for K = 1, while other groups proceed, on both backends.

#[macro_use]
mod common;

use std::thread;
use std::time::Duration;

use common::{lease, pull, Scratch};
use tq::{
    Durability, ErrorKind, OpenOptions, ParentFailure, PushOptions, Queue, TaskState,
    MAX_GROUP_AT_ONCE, MAX_UNIQUE_KEY_LEN,
};

/// Queue `name` of the scratch, whose tasks have `attempts` attempts.
fn open(scratch: &Scratch, name: &str, attempts: u32) -> Queue {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .keep_history(true)
        .max_attempts(attempts)
        .unwrap()
        .queue(name)
        .unwrap();
    scratch.open_with(&options)
}

fn in_group(key: &str, at_once: u32) -> PushOptions {
    let mut options = PushOptions::new();
    options.group(key, at_once).unwrap();
    options
}

fn push_to(queue: &Queue, payload: &str, key: &str, at_once: u32) -> i64 {
    queue.push(payload, &in_group(key, at_once)).unwrap().id()
}

/// Pulls every ready task, holding each: their ids in claim order.
fn pull_all(queue: &Queue) -> Vec<tq::Task> {
    std::iter::from_fn(|| pull(queue)).collect()
}

fn ids(tasks: &[tq::Task]) -> Vec<i64> {
    tasks.iter().map(tq::Task::id).collect()
}

fn finish_all(queue: &Queue, tasks: &[tq::Task]) {
    for task in tasks {
        queue.finish(task.receipt()).unwrap();
    }
}

fn one_group_runs_one_at_a_time_in_push_order_beside_others(scratch: Scratch) {
    let queue = open(&scratch, "default", 3);
    let a1 = push_to(&queue, "\"a1\"", "a", 1);
    let b1 = push_to(&queue, "\"b1\"", "b", 1);
    let mut urgent = in_group("a", 1);
    urgent.priority(10);
    let a2 = queue.push("\"a2\"", &urgent).unwrap().id();
    let a3 = push_to(&queue, "\"a3\"", "a", 1);
    let b2 = push_to(&queue, "\"b2\"", "b", 1);
    let free = common::push(&queue, "\"free\"");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 6);
    assert_eq!(queue.groups_waiting().unwrap(), 2, "a2, a3 and b2 wait");

    let first = pull_all(&queue);
    assert_eq!(
        ids(&first),
        [a1, b1, free],
        "the head of each group, and the task in none"
    );
    let info = queue.task(a2).unwrap().unwrap();
    assert_eq!(info.state(), TaskState::Pending);
    assert_eq!(info.group(), Some("a"));
    assert_eq!(info.waiting_for(), [a1]);
    assert_eq!(queue.task(free).unwrap().unwrap().group(), None);

    finish_all(&queue, &first);
    let second = pull_all(&queue);
    assert_eq!(ids(&second), [a2, b2]);
    assert_eq!(queue.groups_waiting().unwrap(), 1, "a3 waits");
    finish_all(&queue, &second);
    let third = pull_all(&queue);
    assert_eq!(ids(&third), [a3]);
    assert!(third[0].parents().is_empty(), "parents lists only `after`");
    assert_eq!(queue.groups_waiting().unwrap(), 0);
    finish_all(&queue, &third);
    assert_eq!(queue.count(TaskState::Done).unwrap(), 6);
}

fn a_group_runs_at_most_k_at_once(scratch: Scratch) {
    let queue = open(&scratch, "default", 3);
    let tasks: Vec<i64> = (0..7)
        .map(|n| push_to(&queue, &n.to_string(), "k", 3))
        .collect();
    let first = pull_all(&queue);
    assert_eq!(ids(&first), tasks[..3]);
    // The fourth waits for the first, the fifth for the second, ...
    queue.finish(first[1].receipt()).unwrap();
    let next = pull_all(&queue);
    assert_eq!(ids(&next), [tasks[4]]);
    queue.finish(first[0].receipt()).unwrap();
    queue.finish(first[2].receipt()).unwrap();
    let more = pull_all(&queue);
    assert_eq!(ids(&more), [tasks[3], tasks[5]]);
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 3);
    finish_all(&queue, &next);
    finish_all(&queue, &more);
    assert_eq!(ids(&pull_all(&queue)), [tasks[6]]);
}

fn a_predecessor_ending_dead_or_cancelled_lets_the_next_run(scratch: Scratch) {
    let queue = open(&scratch, "default", 1);
    let dies = push_to(&queue, "1", "g", 1);
    let cancelled = push_to(&queue, "2", "g", 1);
    let last = push_to(&queue, "3", "g", 1);
    let task = pull(&queue).unwrap();
    assert_eq!(task.id(), dies);
    queue.fail(task.receipt(), "no").unwrap();
    assert_eq!(queue.count(TaskState::Dead).unwrap(), 1);
    queue.cancel_task(cancelled, "not needed").unwrap();
    let task = pull(&queue).expect("the last one runs");
    assert_eq!(task.id(), last);
    assert!(pull(&queue).is_none());
}

fn a_dead_task_retried_rejoins_its_group_at_the_back_of_its_line(scratch: Scratch) {
    let queue = open(&scratch, "default", 1);
    let a1 = push_to(&queue, "1", "a", 1);
    let a2 = push_to(&queue, "2", "a", 1);
    let task = pull(&queue).unwrap();
    assert_eq!(task.id(), a1);
    queue.fail(task.receipt(), "no").unwrap();
    let successor = pull(&queue).expect("a dead task lets the next run");
    assert_eq!(successor.id(), a2);
    queue.retry_dead(a1).unwrap();
    assert!(
        pull(&queue).is_none(),
        "retried, it waits for the task leased"
    );
    assert_eq!(queue.task(a1).unwrap().unwrap().waiting_for(), [a2]);
    assert_eq!(queue.groups_waiting().unwrap(), 1);
    queue.finish(successor.receipt()).unwrap();
    let again = pull(&queue).expect("the retried task runs after it");
    assert_eq!((again.id(), again.attempts()), (a1, 1));

    // Dead tasks retried together line up in id order.
    let (b1, b2) = (push_to(&queue, "3", "b", 1), push_to(&queue, "4", "b", 1));
    for expected in [b1, b2] {
        let task = pull(&queue).unwrap();
        assert_eq!(task.id(), expected);
        queue.fail(task.receipt(), "no").unwrap();
    }
    assert_eq!(queue.retry_all_dead().unwrap(), 2);
    let first = pull(&queue).unwrap();
    assert_eq!(first.id(), b1);
    assert!(pull(&queue).is_none(), "one of the group at a time");
    queue.finish(first.receipt()).unwrap();
    assert_eq!(pull(&queue).unwrap().id(), b2);
}

fn a_task_taken_back_still_holds_its_group(scratch: Scratch) {
    let queue = open(&scratch, "default", 3);
    let first = push_to(&queue, "1", "g", 1);
    let second = push_to(&queue, "2", "g", 1);
    let task = queue.pull(&lease(50)).unwrap().unwrap();
    assert_eq!(task.id(), first);
    thread::sleep(Duration::from_millis(120));
    assert_eq!(queue.recover().unwrap(), 1);
    let again = pull(&queue).expect("the task taken back is delivered again");
    assert_eq!(again.id(), first, "its successor still waits");
    assert!(pull(&queue).is_none());
    queue.finish(again.receipt()).unwrap();
    assert_eq!(pull(&queue).unwrap().id(), second);
}

fn a_batch_chains_its_tasks_of_one_group(scratch: Scratch) {
    let queue = open(&scratch, "default", 3);
    let before = push_to(&queue, "0", "g", 2);
    let batch = queue
        .push_batch(&["1", "2", "3", "4"], &in_group("g", 2))
        .unwrap();
    let items = queue
        .push_items(&[
            ("5", in_group("g", 2)),
            ("6", in_group("h", 1)),
            ("7", in_group("h", 1)),
        ])
        .unwrap();
    let items: Vec<i64> = items.iter().map(|pushed| pushed.id()).collect();
    assert_eq!(
        queue.task(batch[1]).unwrap().unwrap().waiting_for(),
        [before]
    );
    assert_eq!(
        queue.task(batch[2]).unwrap().unwrap().waiting_for(),
        [batch[0]]
    );
    assert_eq!(
        queue.task(items[2]).unwrap().unwrap().waiting_for(),
        [items[1]]
    );
    let first = pull_all(&queue);
    assert_eq!(ids(&first), [before, batch[0], items[1]]);
    finish_all(&queue, &first);
    let second = pull_all(&queue);
    assert_eq!(ids(&second), [batch[1], batch[2], items[2]]);
    finish_all(&queue, &second);
    let third = pull_all(&queue);
    assert_eq!(ids(&third), [batch[3], items[0]]);
}

fn a_group_combines_with_the_tasks_named_after(scratch: Scratch) {
    let queue = open(&scratch, "default", 1);
    let parent = common::push(&queue, "\"parent\"");
    let head = push_to(&queue, "1", "g", 1);
    let mut options = in_group("g", 1);
    options.after(&[parent]).unwrap();
    let both = queue.push("2", &options).unwrap().id();
    let last = push_to(&queue, "3", "g", 1);
    let info = queue.task(both).unwrap().unwrap();
    assert_eq!(info.waiting_for(), [parent, head]);

    // The parent dying cancels the task (its own policy); the group moves on.
    let first = pull_all(&queue);
    assert_eq!(ids(&first), [parent, head]);
    queue.fail(first[0].receipt(), "no").unwrap();
    assert_eq!(
        queue.task(both).unwrap().unwrap().state(),
        TaskState::Cancelled
    );
    assert!(pull(&queue).is_none(), "the head still holds the group");
    assert_eq!(queue.task(last).unwrap().unwrap().waiting_for(), [head]);
    queue.finish(first[1].receipt()).unwrap();
    assert_eq!(pull(&queue).unwrap().id(), last);

    // A task waiting for the group's predecessor by `after` too keeps
    // that policy, in one dependency.
    let head = push_to(&queue, "4", "p", 1);
    let mut options = in_group("p", 1);
    options
        .after(&[head])
        .unwrap()
        .on_parent_failure(ParentFailure::Cancel);
    let follower = queue.push("5", &options).unwrap().id();
    let info = queue.task(follower).unwrap().unwrap();
    assert_eq!(info.waiting_for(), [head]);
    let task = pull(&queue).unwrap();
    assert_eq!(task.id(), head);
    queue.fail(task.receipt(), "no").unwrap();
    assert_eq!(
        queue.task(follower).unwrap().unwrap().state(),
        TaskState::Cancelled
    );
}

fn a_task_cancelled_while_it_waits_hands_its_place_on(scratch: Scratch) {
    for history in [true, false] {
        let mut options = OpenOptions::new();
        options
            .durability(Durability::Normal)
            .keep_history(history)
            .queue(if history { "kept" } else { "gone" })
            .unwrap();
        let queue = scratch.open_with(&options);
        let tasks: Vec<i64> = (0..5)
            .map(|n| push_to(&queue, &n.to_string(), "g", 1))
            .collect();
        let head = pull(&queue).unwrap();
        assert_eq!(head.id(), tasks[0]);
        queue.cancel_task(tasks[1], "not needed").unwrap();
        assert!(pull(&queue).is_none(), "the head still holds the group");
        assert_eq!(
            queue.task(tasks[2]).unwrap().unwrap().waiting_for(),
            [tasks[0]]
        );
        // The next one in the middle too.
        queue.cancel_task(tasks[3], "not needed").unwrap();
        assert_eq!(
            queue.task(tasks[4]).unwrap().unwrap().waiting_for(),
            [tasks[2]]
        );
        queue.finish(head.receipt()).unwrap();
        let next = pull(&queue).unwrap();
        assert_eq!(next.id(), tasks[2]);
        assert!(pull(&queue).is_none());
        queue.finish(next.receipt()).unwrap();
        assert_eq!(pull(&queue).unwrap().id(), tasks[4]);
    }
}

fn concurrent_pushes_to_one_group_keep_one_chain(scratch: Scratch) {
    let queue = open(&scratch, "default", 3);
    thread::scope(|scope| {
        for _ in 0..4 {
            let handle = open(&scratch, "default", 3);
            scope.spawn(move || {
                for n in 0..25 {
                    handle.push(&n.to_string(), &in_group("g", 1)).unwrap();
                }
            });
        }
    });
    let mut delivered = Vec::new();
    while let Some(task) = pull(&queue) {
        assert!(pull(&queue).is_none(), "two of one group at once");
        delivered.push(task.id());
        queue.finish(task.receipt()).unwrap();
    }
    assert_eq!(delivered.len(), 100);
    assert!(
        delivered.windows(2).all(|pair| pair[0] < pair[1]),
        "in push order: {delivered:?}"
    );
}

fn bad_groups_are_refused_and_store_nothing(scratch: Scratch) {
    let queue = open(&scratch, "default", 3);
    let mut options = PushOptions::new();
    let too_long = "k".repeat(MAX_UNIQUE_KEY_LEN + 1);
    for (key, at_once) in [
        ("", 1),
        (too_long.as_str(), 1),
        ("a\0b", 1),
        ("g", 0),
        ("g", MAX_GROUP_AT_ONCE + 1),
    ] {
        let err = options.group(key, at_once).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{key:?} {at_once}");
    }
    assert_eq!(
        options,
        PushOptions::new(),
        "a refused group changes nothing"
    );
    assert!(options.group("g", MAX_GROUP_AT_ONCE).is_ok());
    options.clear_group();
    assert_eq!(options, PushOptions::new());
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
}

on_both_backends!(
    one_group_runs_one_at_a_time_in_push_order_beside_others,
    a_group_runs_at_most_k_at_once,
    a_predecessor_ending_dead_or_cancelled_lets_the_next_run,
    a_dead_task_retried_rejoins_its_group_at_the_back_of_its_line,
    a_task_taken_back_still_holds_its_group,
    a_batch_chains_its_tasks_of_one_group,
    a_group_combines_with_the_tasks_named_after,
    a_task_cancelled_while_it_waits_hands_its_place_on,
    concurrent_pushes_to_one_group_keep_one_chain,
    bad_groups_are_refused_and_store_nothing,
);
