//! Paths of the store that the other suites reach only in part: the sweep
//! of unique windows on the finish-and-claim path, the claim order of many
//! expired leases, and pages of pending tasks that are partly waiting.

#[macro_use]
mod common;

use std::thread;
use std::time::Duration;

use common::{lease, Scratch};
use tq::{Durability, OpenOptions, PullOptions, PushOptions, TaskState};

fn normal() -> OpenOptions {
    let mut options = OpenOptions::new();
    options.durability(Durability::Normal);
    options
}

fn finish_and_pull_sweeps_unique_windows_that_have_passed(scratch: Scratch) {
    let queue = scratch.open_with(normal().keep_history(false));
    let mut key = PushOptions::new();
    key.unique_key("nightly")
        .unwrap()
        .unique_for(Duration::from_millis(50))
        .unwrap();
    queue.push("\"keyed\"", &key).unwrap();
    for payload in ["1", "2", "3"] {
        queue.push(payload, &PushOptions::new()).unwrap();
    }
    let keyed = queue.pull(&PullOptions::new()).unwrap().unwrap();
    let mut task = queue
        .finish_and_pull(keyed.receipt(), &PullOptions::new())
        .unwrap()
        .unwrap();
    assert_eq!(
        queue.count(TaskState::Done).unwrap(),
        1,
        "inside its window"
    );
    thread::sleep(Duration::from_millis(80));
    while let Some(next) = queue
        .finish_and_pull(task.receipt(), &PullOptions::new())
        .unwrap()
    {
        task = next;
    }
    assert_eq!(
        queue.count(TaskState::Done).unwrap(),
        0,
        "a done task whose window passed is not kept without history"
    );
}

fn a_batch_claim_after_many_expired_leases_takes_them_in_claim_order(scratch: Scratch) {
    let queue = scratch.open();
    let mut pushed = Vec::new();
    for n in 0..300 {
        let mut options = PushOptions::new();
        options.priority(n % 7 - 3);
        if n % 50 == 0 {
            options.max_attempts(1).unwrap();
        }
        let id = queue.push(&n.to_string(), &options).unwrap().id();
        pushed.push((n % 7 - 3, id, n % 50 == 0));
    }
    // A worker takes every task and dies: all its leases expire at once.
    assert_eq!(queue.pull_batch(300, &lease(1)).unwrap().len(), 300);
    thread::sleep(Duration::from_millis(20));
    // Ready tasks pushed since fall in line among them.
    for n in 0..20 {
        let mut options = PushOptions::new();
        options.priority(n % 5 - 2);
        let id = queue.push("\"new\"", &options).unwrap().id();
        pushed.push((n % 5 - 2, id, false));
    }

    let claimed: Vec<(i32, i64)> = queue
        .pull_batch(1000, &lease(60_000))
        .unwrap()
        .iter()
        .map(|task| (task.priority(), task.id()))
        .collect();
    // Every task here was due before it was first claimed, in push order,
    // so claim order is higher priority first, then id.
    let mut expected: Vec<(i32, i64)> = pushed
        .iter()
        .filter(|&&(_, _, last_attempt)| !last_attempt)
        .map(|&(priority, id, _)| (priority, id))
        .collect();
    expected.sort_by_key(|&(priority, id)| (std::cmp::Reverse(priority), id));
    assert_eq!(claimed, expected);
    assert_eq!(
        queue.count(TaskState::Dead).unwrap(),
        6,
        "an expired last attempt is buried, not delivered"
    );
}

fn pages_of_pending_tasks_mix_ready_and_waiting_ones_in_id_order(scratch: Scratch) {
    let queue = scratch.open();
    let mut later = PushOptions::new();
    later.delay(Duration::from_secs(3600)).unwrap();
    let ids: Vec<i64> = (0..9)
        .map(|n| {
            let options = if n % 3 == 0 {
                later.clone()
            } else {
                PushOptions::new()
            };
            queue.push(&n.to_string(), &options).unwrap().id()
        })
        .collect();
    let mut listed = Vec::new();
    let mut after = 0;
    loop {
        let page = queue.list(TaskState::Pending, after, 4).unwrap();
        let Some(last) = page.last() else { break };
        after = last.id();
        listed.extend(page.iter().map(|task| task.id()));
    }
    assert_eq!(listed, ids);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 9);
}

on_both_backends!(
    finish_and_pull_sweeps_unique_windows_that_have_passed,
    a_batch_claim_after_many_expired_leases_takes_them_in_claim_order,
    pages_of_pending_tasks_mix_ready_and_waiting_ones_in_id_order,
);
