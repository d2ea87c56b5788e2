//! Who holds a queue's leased tasks, and until when: the holders the
//! store records, on both backends.

#[macro_use]
mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{push, Scratch};
use tq::{OpenOptions, PullOptions};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn leased_tasks_name_their_holder_and_lease(scratch: Scratch) {
    let queue = scratch.open();
    let first = push(&queue, "1");
    let second = push(&queue, "2");
    push(&queue, "3");
    let before = now_ms();
    let mut minute = PullOptions::new();
    minute.lease(Duration::from_secs(60)).unwrap();
    let tasks = queue.pull_batch(2, &minute).unwrap();
    let after = now_ms();

    let leases = queue.leases(None, 100).unwrap();
    let mut ids: Vec<i64> = leases.iter().map(|lease| lease.task_id()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [first, second]);
    let holder = leases[0].holder();
    for lease in &leases {
        assert_eq!(lease.holder(), holder, "one process holds both");
        // The server's clock on PostgreSQL: a second either side.
        assert!(lease.claimed_at_unix_ms() >= before - 1000, "{lease:?}");
        assert!(lease.claimed_at_unix_ms() <= after + 1000, "{lease:?}");
        let lease_ms = lease.expires_at_unix_ms() - lease.claimed_at_unix_ms();
        assert!((59_000..=61_000).contains(&lease_ms), "{lease:?}");
    }
    if scratch.server().is_none() {
        assert_eq!(holder.pid(), Some(i64::from(std::process::id())));
        assert!(holder.boot_id().is_some_and(|boot| !boot.is_empty()));
    } else {
        assert_eq!(holder.pid(), None, "a PostgreSQL holder is a connection");
    }

    let only = queue.leases(Some(second), 100).unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].task_id(), second);
    assert_eq!(queue.leases(None, 1).unwrap().len(), 1, "at most the limit");

    let done = tasks.iter().find(|task| task.id() == first).unwrap();
    queue.finish(done.receipt()).unwrap();
    let ids: Vec<i64> = queue
        .leases(None, 100)
        .unwrap()
        .iter()
        .map(|lease| lease.task_id())
        .collect();
    assert_eq!(ids, [second]);
    assert!(queue.leases(Some(first), 100).unwrap().is_empty());
}

fn another_queues_leases_are_not_listed(scratch: Scratch) {
    let queue = scratch.open();
    let mut other = OpenOptions::new();
    other.queue("other").unwrap();
    let other = scratch.open_with(&other);
    push(&other, "1");
    other.pull(&PullOptions::new()).unwrap().unwrap();
    assert!(queue.leases(None, 100).unwrap().is_empty());
    assert_eq!(other.leases(None, 100).unwrap().len(), 1);
}

on_both_backends!(
    leased_tasks_name_their_holder_and_lease,
    another_queues_leases_are_not_listed,
);
