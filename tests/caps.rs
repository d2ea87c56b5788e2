//! Bounded queues: a cap on a queue's pending tasks, and pushes that wait
//! for room, on both backends; caps per fairness key, on SQLite (which
//! alone counts a key's pending tasks for now).

#[macro_use]
mod common;

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use common::{pull, push, Scratch};
use tq::{ErrorKind, PushOptions, Pushed, Queue, TaskState};

fn kind<T: std::fmt::Debug>(result: tq::Result<T>) -> ErrorKind {
    result.unwrap_err().kind()
}

fn pending(queue: &Queue) -> u64 {
    queue.count(TaskState::Pending).unwrap()
}

fn waiting_for_room(ms: u64) -> PushOptions {
    let mut options = PushOptions::new();
    options
        .wait_for_room(Duration::from_millis(ms))
        .expect("a valid wait");
    options
}

fn a_push_beyond_the_cap_is_refused_and_stores_nothing(scratch: Scratch) {
    let queue = scratch.open();
    assert_eq!(queue.max_pending().unwrap(), None);
    queue.set_max_pending(Some(3)).unwrap();
    assert_eq!(scratch.open().max_pending().unwrap(), Some(3));
    // Ready, delayed and waiting for a parent: all three are pending.
    let parent = push(&queue, "1");
    let mut later = PushOptions::new();
    later.delay(Duration::from_secs(3600)).unwrap();
    queue.push("2", &later).unwrap();
    let mut child = PushOptions::new();
    child.after(&[parent]).unwrap();
    queue.push("3", &child).unwrap();

    let err = queue.push("4", &PushOptions::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Full);
    assert!(
        err.message().contains("'default'")
            && err.message().contains("holds 3 pending")
            && err.message().contains("cap is 3"),
        "{}",
        err.message()
    );
    assert_eq!(kind(queue.push("4", &child)), ErrorKind::Full);
    assert_eq!(pending(&queue), 3, "nothing was written");

    queue.set_max_pending(None).unwrap();
    assert_eq!(queue.max_pending().unwrap(), None);
    push(&queue, "4");
    queue.set_max_pending(Some(0)).unwrap();
    assert_eq!(queue.max_pending().unwrap(), None, "0 is no cap");
    push(&queue, "5");
}

fn a_batch_that_does_not_fit_stores_none_of_its_tasks(scratch: Scratch) {
    let queue = scratch.open();
    queue.set_max_pending(Some(3)).unwrap();
    push(&queue, "0");
    assert_eq!(
        kind(queue.push_batch(&["1", "2", "3"], &PushOptions::new())),
        ErrorKind::Full
    );
    let items: Vec<(&str, PushOptions)> = (0..3).map(|_| ("1", PushOptions::new())).collect();
    assert_eq!(kind(queue.push_items(&items)), ErrorKind::Full);
    assert_eq!(pending(&queue), 1);
    assert_eq!(
        queue
            .push_batch(&["1", "2"], &PushOptions::new())
            .unwrap()
            .len(),
        2,
        "a batch that fits exactly"
    );
    assert_eq!(pending(&queue), 3);
}

fn a_push_finding_its_unique_key_held_is_never_refused(scratch: Scratch) {
    let queue = scratch.open();
    let mut keyed = PushOptions::new();
    keyed.unique_key("k").unwrap();
    let held = queue.push("1", &keyed).unwrap().id();
    push(&queue, "2");
    queue.set_max_pending(Some(1)).unwrap();
    // Over the cap set after the pushes: nothing is removed.
    assert_eq!(pending(&queue), 2);
    assert_eq!(queue.push("3", &keyed).unwrap(), Pushed::Duplicate(held));
    let items = vec![("3", keyed.clone()), ("4", PushOptions::new())];
    assert_eq!(kind(queue.push_items(&items)), ErrorKind::Full);
    assert_eq!(
        queue.push_items(&items[..1]).unwrap(),
        [Pushed::Duplicate(held)]
    );
}

fn leased_tasks_do_not_count_against_the_cap(scratch: Scratch) {
    let queue = scratch.open();
    queue.set_max_pending(Some(2)).unwrap();
    push(&queue, "1");
    push(&queue, "2");
    let task = pull(&queue).unwrap();
    push(&queue, "3");
    assert_eq!(kind(queue.push("4", &PushOptions::new())), ErrorKind::Full);
    queue.finish(task.receipt()).unwrap();
    assert_eq!(kind(queue.push("4", &PushOptions::new())), ErrorKind::Full);
    pull(&queue).unwrap();
    push(&queue, "4");
}

fn a_queue_over_a_new_cap_refuses_pushes_until_it_drains_below(scratch: Scratch) {
    let queue = scratch.open();
    for n in 0..3 {
        push(&queue, &n.to_string());
    }
    queue.set_max_pending(Some(1)).unwrap();
    assert_eq!(pending(&queue), 3, "setting a cap removes nothing");
    let err = queue.push("3", &PushOptions::new()).unwrap_err();
    assert!(
        err.message().contains("holds 3 pending"),
        "{}",
        err.message()
    );
    pull(&queue).unwrap();
    pull(&queue).unwrap();
    assert_eq!(kind(queue.push("3", &PushOptions::new())), ErrorKind::Full);
    pull(&queue).unwrap();
    push(&queue, "3");
}

fn a_cap_is_per_queue(scratch: Scratch) {
    let queue = scratch.open();
    let mut options = tq::OpenOptions::new();
    options.queue("other").unwrap();
    let other = scratch.open_with(&options);
    queue.set_max_pending(Some(1)).unwrap();
    push(&queue, "1");
    push(&other, "1");
    push(&other, "2");
    assert_eq!(other.max_pending().unwrap(), None);
    assert_eq!(kind(queue.push("2", &PushOptions::new())), ErrorKind::Full);
}

fn a_push_waiting_for_room_stores_once_a_task_is_delivered(scratch: Scratch) {
    let queue = scratch.open();
    let worker = scratch.open();
    queue.set_max_pending(Some(1)).unwrap();
    push(&queue, "1");
    let delivered = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        pull(&worker).expect("the task to deliver")
    });
    let pushed = queue.push("2", &waiting_for_room(60_000)).unwrap();
    assert!(matches!(pushed, Pushed::Stored(_)));
    assert_eq!(delivered.join().unwrap().payload(), "1");
    assert_eq!(pending(&queue), 1);
}

fn a_push_waiting_for_room_stores_once_a_task_ends(scratch: Scratch) {
    let queue = Arc::new(scratch.open());
    queue.set_max_pending(Some(1)).unwrap();
    let first = push(&queue, "1");
    let canceller = {
        let queue = Arc::clone(&queue);
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            queue.cancel_task(first, "made room").unwrap();
        })
    };
    queue.push("2", &waiting_for_room(60_000)).unwrap();
    canceller.join().unwrap();
    assert_eq!(pending(&queue), 1);
}

fn a_push_waiting_for_room_in_vain_fails_with_full(scratch: Scratch) {
    let queue = scratch.open();
    queue.set_max_pending(Some(1)).unwrap();
    push(&queue, "1");
    let err = queue.push("2", &waiting_for_room(150)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Full, "{}", err.message());
    assert_eq!(pending(&queue), 1);
}

fn interrupt_ends_a_wait_for_room(scratch: Scratch) {
    let queue = Arc::new(scratch.open());
    queue.set_max_pending(Some(1)).unwrap();
    push(&queue, "1");
    let interrupter = {
        let queue = Arc::clone(&queue);
        thread::spawn(move || {
            thread::sleep(Duration::from_millis(100));
            queue.interrupt();
        })
    };
    assert_eq!(
        kind(queue.push("2", &waiting_for_room(60_000))),
        ErrorKind::Interrupted
    );
    interrupter.join().unwrap();
    assert_eq!(pending(&queue), 1);
}

/// Pushers on handles of their own (on PostgreSQL, connections of their
/// own) racing into a cap: exactly as many tasks as the cap are stored.
fn racing_pushes_store_exactly_the_cap(scratch: Scratch) {
    const CAP: u64 = 10;
    const PUSHERS: usize = 6;
    const PUSHES: usize = 5;
    scratch.open().set_max_pending(Some(CAP)).unwrap();
    let start = Arc::new(Barrier::new(PUSHERS));
    let pushers: Vec<_> = (0..PUSHERS)
        .map(|_| {
            let queue = scratch.open();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                let mut stored = 0;
                for n in 0..PUSHES {
                    match queue.push(&n.to_string(), &PushOptions::new()) {
                        Ok(_) => stored += 1,
                        Err(err) if err.kind() == ErrorKind::Full => {}
                        Err(err) if err.kind() == ErrorKind::Busy => {}
                        Err(err) => panic!("{err}"),
                    }
                }
                stored
            })
        })
        .collect();
    let stored: u64 = pushers.into_iter().map(|p| p.join().unwrap()).sum();
    assert_eq!(stored, CAP);
    assert_eq!(pending(&scratch.open()), CAP);
}

on_both_backends!(
    a_push_beyond_the_cap_is_refused_and_stores_nothing,
    a_batch_that_does_not_fit_stores_none_of_its_tasks,
    a_push_finding_its_unique_key_held_is_never_refused,
    leased_tasks_do_not_count_against_the_cap,
    a_queue_over_a_new_cap_refuses_pushes_until_it_drains_below,
    a_cap_is_per_queue,
    a_push_waiting_for_room_stores_once_a_task_is_delivered,
    a_push_waiting_for_room_stores_once_a_task_ends,
    a_push_waiting_for_room_in_vain_fails_with_full,
    interrupt_ends_a_wait_for_room,
    racing_pushes_store_exactly_the_cap,
);

fn keyed(key: &str) -> PushOptions {
    let mut options = PushOptions::new();
    options.fair_key(key).unwrap();
    options
}

/// Pushes a task of fairness key `key`, its payload the key as a string.
fn push_keyed(queue: &Queue, key: &str) -> tq::Result<Pushed> {
    queue.push(&format!("{key:?}"), &keyed(key))
}

/// The payloads of every ready task, delivered and finished.
fn drain_payloads(queue: &Queue) -> Vec<String> {
    let mut payloads = Vec::new();
    while let Some(task) = pull(queue) {
        payloads.push(task.payload().to_owned());
        queue.finish(task.receipt()).unwrap();
    }
    payloads.sort();
    payloads
}

fn a_push_beyond_a_key_cap_is_refused_and_other_keys_are_not(scratch: Scratch) {
    let queue = scratch.open();
    assert_eq!(queue.max_pending_per_key().unwrap(), None);
    assert_eq!(queue.key_max_pending("a").unwrap(), None);
    queue.set_max_pending_per_key(Some(2)).unwrap();
    assert_eq!(scratch.open().max_pending_per_key().unwrap(), Some(2));
    assert_eq!(queue.key_max_pending("a").unwrap(), Some(2));
    push_keyed(&queue, "a").unwrap();
    push_keyed(&queue, "a").unwrap();
    let err = push_keyed(&queue, "a").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Full);
    assert!(
        err.message().contains("fairness key 'a'")
            && err.message().contains("holds 2 pending")
            && err.message().contains("cap is 2"),
        "{}",
        err.message()
    );
    assert_eq!(pending(&queue), 2, "nothing was written");
    push_keyed(&queue, "b").unwrap();
    push_keyed(&queue, "b").unwrap();
    // The tasks pushed without a key share the empty key, capped alike.
    push(&queue, "1");
    push(&queue, "2");
    assert_eq!(kind(queue.push("3", &PushOptions::new())), ErrorKind::Full);

    // A key's own cap, higher or lower, replaces the default.
    queue.set_key_max_pending("b", Some(3)).unwrap();
    queue.set_key_max_pending("c", Some(1)).unwrap();
    assert_eq!(scratch.open().key_max_pending("b").unwrap(), Some(3));
    assert_eq!(queue.key_max_pending("a").unwrap(), Some(2));
    push_keyed(&queue, "b").unwrap();
    assert_eq!(kind(push_keyed(&queue, "b")), ErrorKind::Full);
    push_keyed(&queue, "c").unwrap();
    assert_eq!(kind(push_keyed(&queue, "c")), ErrorKind::Full);
    // Without its own cap, the key is under the default again.
    queue.set_key_max_pending("c", None).unwrap();
    assert_eq!(queue.key_max_pending("c").unwrap(), Some(2));
    push_keyed(&queue, "c").unwrap();
    assert_eq!(kind(push_keyed(&queue, "c")), ErrorKind::Full);
    // Without the default, only keys with caps of their own are capped.
    queue.set_max_pending_per_key(Some(0)).unwrap();
    assert_eq!(queue.max_pending_per_key().unwrap(), None, "0 is no cap");
    push_keyed(&queue, "a").unwrap();
    assert_eq!(kind(push_keyed(&queue, "b")), ErrorKind::Full);
    queue.set_key_max_pending("b", Some(0)).unwrap();
    assert_eq!(queue.key_max_pending("b").unwrap(), None);
    push_keyed(&queue, "b").unwrap();
}

fn a_batch_across_keys_that_does_not_fit_stores_none_of_its_tasks(scratch: Scratch) {
    let queue = scratch.open();
    queue.set_max_pending_per_key(Some(2)).unwrap();
    push_keyed(&queue, "a").unwrap();
    let items: Vec<(&str, PushOptions)> = ["b", "b", "a", "c", "a"]
        .iter()
        .map(|key| ("1", keyed(key)))
        .collect();
    let err = queue.push_items(&items).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Full);
    assert!(
        err.message().contains("'a'") && err.message().contains("the 2 this push"),
        "{}",
        err.message()
    );
    assert_eq!(pending(&queue), 1, "none of the batch was stored");
    assert_eq!(queue.push_items(&items[..4]).unwrap().len(), 4, "fits");
    assert_eq!(pending(&queue), 5);
    assert_eq!(
        kind(queue.push_batch(&["1"], &keyed("b"))),
        ErrorKind::Full,
        "a batch of one key"
    );
}

fn a_key_cap_never_refuses_a_push_finding_its_unique_key_held(scratch: Scratch) {
    let queue = scratch.open();
    let mut keyed_unique = keyed("a");
    keyed_unique.unique_key("u").unwrap();
    let held = queue.push("1", &keyed_unique).unwrap().id();
    push_keyed(&queue, "a").unwrap();
    queue.set_key_max_pending("a", Some(1)).unwrap();
    assert_eq!(
        queue.push("2", &keyed_unique).unwrap(),
        Pushed::Duplicate(held)
    );
    assert_eq!(kind(push_keyed(&queue, "a")), ErrorKind::Full);
    assert_eq!(pending(&queue), 2);
}

fn a_push_waiting_for_room_under_a_key_cap_stores_once_its_key_drains(scratch: Scratch) {
    let queue = scratch.open();
    let worker = scratch.open();
    queue.set_key_max_pending("a", Some(1)).unwrap();
    push_keyed(&queue, "a").unwrap();
    let delivered = thread::spawn(move || {
        thread::sleep(Duration::from_millis(100));
        pull(&worker).expect("the task to deliver")
    });
    let mut waiting = waiting_for_room(60_000);
    waiting.fair_key("a").unwrap();
    let pushed = queue.push(r#""a""#, &waiting).unwrap();
    assert!(matches!(pushed, Pushed::Stored(_)));
    assert_eq!(delivered.join().unwrap().payload(), r#""a""#);
    let mut in_vain = waiting_for_room(150);
    in_vain.fair_key("a").unwrap();
    assert_eq!(kind(queue.push(r#""a""#, &in_vain)), ErrorKind::Full);
    assert_eq!(pending(&queue), 1);
}

/// Pushers on handles of their own racing into the caps of two keys:
/// exactly as many tasks of each key as its cap are stored.
fn racing_pushes_store_exactly_the_cap_of_each_key(scratch: Scratch) {
    const CAP: u64 = 5;
    const PUSHERS: usize = 6;
    const PUSHES: usize = 6;
    let setup = scratch.open();
    setup.set_max_pending_per_key(Some(CAP)).unwrap();
    setup.set_key_max_pending("b", Some(CAP + 2)).unwrap();
    let start = Arc::new(Barrier::new(PUSHERS));
    let pushers: Vec<_> = (0..PUSHERS)
        .map(|_| {
            let queue = scratch.open();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                for n in 0..PUSHES {
                    match push_keyed(&queue, ["a", "b"][n % 2]) {
                        Ok(_) => {}
                        Err(err) if err.kind() == ErrorKind::Full => {}
                        Err(err) if err.kind() == ErrorKind::Busy => {}
                        Err(err) => panic!("{err}"),
                    }
                }
            })
        })
        .collect();
    for pusher in pushers {
        pusher.join().unwrap();
    }
    let payloads = drain_payloads(&setup);
    let of = |key: &str| {
        payloads
            .iter()
            .filter(|p| **p == format!("{key:?}"))
            .count()
    };
    assert_eq!((of("a"), of("b")), (CAP as usize, CAP as usize + 2));
}

fn bad_key_caps_are_refused_and_change_nothing(scratch: Scratch) {
    let queue = scratch.open();
    let err = queue.set_key_max_pending("a\0b", Some(1)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        kind(queue.set_key_max_pending(&"k".repeat(10_000), Some(1))),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(queue.key_max_pending("a\0b")),
        ErrorKind::InvalidArgument
    );
    push(&queue, "1");
    push(&queue, "2");
    assert_eq!(pending(&queue), 2, "the queue did not become capped");
}

on_backends! {
    tests: [
        a_push_beyond_a_key_cap_is_refused_and_other_keys_are_not,
        a_batch_across_keys_that_does_not_fit_stores_none_of_its_tasks,
        a_key_cap_never_refuses_a_push_finding_its_unique_key_held,
        a_push_waiting_for_room_under_a_key_cap_stores_once_its_key_drains,
        racing_pushes_store_exactly_the_cap_of_each_key,
        bad_key_caps_are_refused_and_change_nothing
    ],
    backends: [key_caps_sqlite: sqlite],
}

/// Caps per key are SQLite's only for now: PostgreSQL refuses them.
fn postgres_refuses_key_caps_and_changes_nothing(scratch: Scratch) {
    let queue = scratch.open();
    for err in [
        queue.set_max_pending_per_key(Some(1)).unwrap_err(),
        queue.set_key_max_pending("a", Some(1)).unwrap_err(),
        queue.max_pending_per_key().unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("key cap"), "{}", err.message());
    }
    push(&queue, "1");
    push(&queue, "2");
    assert_eq!(pending(&queue), 2);
}

on_backends! {
    tests: [postgres_refuses_key_caps_and_changes_nothing],
    backends: [key_caps_postgres: postgres],
}

/// Whether `count` of the server's connections wait for a lock in a
/// statement naming `schema`.
fn waiting_for_locks(client: &mut ::postgres::Client, schema: &str, count: i64) -> bool {
    let waiting: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE wait_event_type = 'Lock' AND strpos(query, $1) > 0",
            &[&schema],
        )
        .unwrap()
        .get(0);
    waiting == count
}

fn wait_for_lock_waiters(client: &mut ::postgres::Client, schema: &str, count: i64) {
    for _ in 0..1000 {
        if waiting_for_locks(client, schema, count) {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("{count} pushes never waited for the cap's lock");
}

fn unique(key: &str) -> PushOptions {
    let mut options = PushOptions::new();
    options.unique_key(key).unwrap();
    options
}

/// On PostgreSQL, pushes into a capped queue take its lock before any
/// task's, so that a push waiting for the cap holds nothing that the push
/// ahead of it needs. Here a batch pushing keys "b" then "a" waits for the
/// cap first, then a push of key "a": had the second stored its "a" before
/// waiting, the batch would wait for that "a" while holding the cap, until
/// the server broke the deadlock by failing one of them.
#[test]
fn postgres_pushes_of_unique_keys_into_a_capped_queue_never_deadlock() {
    let Some(scratch) = Scratch::postgres(
        "caps::postgres_pushes_of_unique_keys_into_a_capped_queue_never_deadlock",
    ) else {
        return;
    };
    let server = scratch.server().unwrap();
    let schema = server.schema.clone();
    let queue = scratch.open();
    queue.set_max_pending(Some(100)).unwrap();
    let mut watcher = common::postgres_client(&server.url);
    let mut cap_holder = common::postgres_client(&server.url);
    let mut holding = cap_holder.transaction().unwrap();
    holding
        .batch_execute(&format!(
            "SELECT 1 FROM \"{schema}\".queues WHERE max_pending > 0 FOR UPDATE"
        ))
        .unwrap();

    let batch_queue = scratch.open();
    let batch = thread::spawn(move || {
        batch_queue.push_items(&[(r#""batch b""#, unique("b")), (r#""batch a""#, unique("a"))])
    });
    wait_for_lock_waiters(&mut watcher, &schema, 1);
    let single_queue = scratch.open();
    let single = thread::spawn(move || single_queue.push(r#""single a""#, &unique("a")));
    wait_for_lock_waiters(&mut watcher, &schema, 2);
    holding.commit().unwrap();

    let batch = batch.join().unwrap().expect("the batch is stored");
    let single = single.join().unwrap().expect("the single push is answered");
    assert!(batch
        .iter()
        .all(|pushed| matches!(pushed, Pushed::Stored(_))));
    assert_eq!(single, Pushed::Duplicate(batch[1].id()));
    assert_eq!(pending(&queue), 2);
}
