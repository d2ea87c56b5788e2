//! The queue's semantics through the Rust API, in one process.

#[macro_use]
mod common;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use common::{lease, now_ms, push, Scratch};
use tq::{Durability, ErrorKind, OpenOptions, PullOptions, PushOptions, Queue, TaskState};

fn counts(queue: &Queue) -> [u64; 3] {
    [TaskState::Pending, TaskState::Leased, TaskState::Done].map(|s| queue.count(s).unwrap())
}

fn push_pull_finish_in_fifo_order(scratch: Scratch) {
    let queue = scratch.open();
    let ids: Vec<i64> = (0..5)
        .map(|i| push(&queue, &format!("{{\"n\": {i}}}")))
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");
    assert_eq!(counts(&queue), [5, 0, 0]);

    for (i, id) in ids.iter().enumerate() {
        let task = queue
            .pull(&PullOptions::new())
            .unwrap()
            .expect("a ready task");
        assert_eq!(task.id(), *id);
        assert_eq!(task.payload(), format!("{{\"n\": {i}}}"));
        assert_eq!(task.attempts(), 1);
        assert_eq!(counts(&queue), [4 - i as u64, 1, 0]);
        queue.finish(task.receipt()).unwrap();
    }
    assert!(queue.pull(&PullOptions::new()).unwrap().is_none());
    assert_eq!(counts(&queue), [0, 0, 0]);
}

fn payload_is_stored_byte_for_byte(scratch: Scratch) {
    let queue = scratch.open();
    for payload in [
        " {\"a\" : [1, 2.50, \"é\\u00e9\"]}\n",
        "null",
        "\"text\"",
        "[ ]",
        "-0.0e+1",
    ] {
        push(&queue, payload);
        let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
        assert_eq!(task.payload(), payload);
        queue.finish(task.receipt()).unwrap();
    }
}

fn invalid_json_stores_nothing(scratch: Scratch) {
    let queue = scratch.open();
    for payload in ["", " ", "{", "{\"a\":}", "nope", "1 2", "[1,]", "{'a': 1}"] {
        let err = queue.push(payload, &PushOptions::new()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidJson, "{payload:?}");
        assert!(err.message().contains("not JSON"), "{}", err.message());
    }
    assert_eq!(counts(&queue), [0, 0, 0]);
}

/// Each way the newest task can leave the table, then a push: its id is
/// one more than the newest's, from this handle and from one opened later.
fn ids_are_never_reused(scratch: Scratch) {
    let queue = scratch.open();
    let history = scratch.open_with(OpenOptions::new().keep_history(true));
    let mut newest = push(&queue, "0");

    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    queue.finish(task.receipt()).unwrap();
    let pushed = push(&queue, "\"after a finish\"");
    assert_eq!(pushed, newest + 1, "after a finish");
    newest = pushed;

    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    queue.finish_batch(&[task.receipt()]).unwrap();
    let pushed = push(&queue, "\"after a batch's finish\"");
    assert_eq!(pushed, newest + 1, "after a batch's finish");
    newest = pushed;

    queue.cancel_task(newest, "not wanted").unwrap();
    let pushed = push(&queue, "\"after a cancellation\"");
    assert_eq!(pushed, newest + 1, "after a cancellation");
    newest = pushed;

    let task = history.pull(&PullOptions::new()).unwrap().unwrap();
    history.finish(task.receipt()).unwrap();
    assert_eq!(history.purge(TaskState::Done, Duration::ZERO).unwrap(), 1);
    let pushed = push(&queue, "\"after a purge\"");
    assert_eq!(pushed, newest + 1, "after a purge");
    newest = pushed;

    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    queue.finish(task.receipt()).unwrap();
    drop((queue, history));
    let reopened = scratch.open();
    assert_eq!(reopened.last_id().unwrap(), newest);
    assert_eq!(
        push(&reopened, "\"reopened\""),
        newest + 1,
        "after a reopen"
    );
}

fn delayed_and_scheduled_tasks_wait_for_their_time(scratch: Scratch) {
    let queue = scratch.open();
    let mut delayed = PushOptions::new();
    delayed.delay(Duration::from_millis(300)).unwrap();
    let later = queue.push("\"later\"", &delayed).unwrap().id();
    let mut past = PushOptions::new();
    past.run_at_unix_ms(1).unwrap();
    let now = queue.push("\"past\"", &past).unwrap().id();

    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!(task.id(), now);
    assert!(
        queue.pull(&PullOptions::new()).unwrap().is_none(),
        "not due yet"
    );
    thread::sleep(Duration::from_millis(350));
    assert_eq!(
        queue.pull(&PullOptions::new()).unwrap().unwrap().id(),
        later
    );
}

fn ready_tasks_come_out_by_due_time_then_id(scratch: Scratch) {
    let queue = scratch.open();
    let mut at = PushOptions::new();
    at.run_at_unix_ms(2_000).unwrap();
    let second = queue.push("2", &at).unwrap().id();
    at.run_at_unix_ms(1_000).unwrap();
    let first = queue.push("1", &at).unwrap().id();
    let third = push(&queue, "3");
    let order: Vec<i64> = (0..3)
        .map(|_| queue.pull(&PullOptions::new()).unwrap().unwrap().id())
        .collect();
    assert_eq!(order, [first, second, third]);
}

fn an_expired_lease_makes_the_task_ready_again(scratch: Scratch) {
    let queue = scratch.open();
    let id = push(&queue, "{}");
    let first = queue.pull(&lease(50)).unwrap().unwrap();
    assert!(queue.pull(&lease(50)).unwrap().is_none(), "held, not ready");
    thread::sleep(Duration::from_millis(80));

    let second = queue.pull(&lease(60_000)).unwrap().expect("ready again");
    assert_eq!(second.id(), id);
    assert_eq!(second.attempts(), 2);
    let err = queue.finish(first.receipt()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotHeld);
    assert_eq!(counts(&queue), [0, 1, 0], "a stale finish changes nothing");
    queue.finish(second.receipt()).unwrap();
    assert_eq!(
        queue.finish(second.receipt()).unwrap_err().kind(),
        ErrorKind::NotHeld
    );
}

fn finish_after_lease_expiry_succeeds_while_nobody_took_the_task(scratch: Scratch) {
    let queue = scratch.open();
    push(&queue, "{}");
    let task = queue.pull(&lease(10)).unwrap().unwrap();
    thread::sleep(Duration::from_millis(30));
    queue.finish(task.receipt()).unwrap();
    assert_eq!(counts(&queue), [0, 0, 0]);
}

fn a_claim_takes_only_the_task_it_delivers_from_an_expired_holder(scratch: Scratch) {
    let queue = scratch.open();
    let expired = push(&queue, "\"expired\"");
    let held = queue.pull(&lease(1)).unwrap().unwrap();
    let mut earlier = PushOptions::new();
    earlier.run_at_unix_ms(1).unwrap();
    let due_first = queue.push("\"due first\"", &earlier).unwrap().id();
    thread::sleep(Duration::from_millis(20));

    let taken = queue.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!(taken.id(), due_first);
    assert_eq!(
        counts(&queue),
        [0, 2, 0],
        "the expired lease was not taken back"
    );
    queue
        .finish(held.receipt())
        .expect("nobody took it, so its holder may finish it");
    assert_eq!(held.id(), expired);
    assert!(queue.pull(&PullOptions::new()).unwrap().is_none());
}

fn recover_returns_expired_leases_but_not_live_ones(scratch: Scratch) {
    let queue = scratch.open();
    push(&queue, "1");
    push(&queue, "2");
    // The long lease first: a short one taken first could expire before
    // the second pull on a slow machine, which would then take it again.
    let long = queue.pull(&lease(60_000)).unwrap().unwrap();
    let short = queue.pull(&lease(10)).unwrap().unwrap();
    thread::sleep(Duration::from_millis(30));
    assert_eq!(queue.recover().unwrap(), 1);
    assert_eq!(counts(&queue), [1, 1, 0]);
    assert_eq!(
        queue.finish(short.receipt()).unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    queue.finish(long.receipt()).unwrap();
    let again = queue.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!((again.id(), again.attempts()), (short.id(), 2));
}

fn history_keeps_done_tasks_until_purged(scratch: Scratch) {
    let queue = scratch.open_with(
        OpenOptions::new()
            .durability(Durability::Normal)
            .keep_history(true),
    );
    for i in 0..3 {
        push(&queue, &i.to_string());
        let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
        queue.finish(task.receipt()).unwrap();
        assert_eq!(
            queue.finish(task.receipt()).unwrap_err().kind(),
            ErrorKind::NotHeld
        );
    }
    assert_eq!(counts(&queue), [0, 0, 3]);
    assert_eq!(
        queue
            .purge(TaskState::Done, Duration::from_secs(3600))
            .unwrap(),
        0,
        "finished just now"
    );
    assert_eq!(
        queue.purge(TaskState::Done, Duration::ZERO).unwrap(),
        3,
        "0 means all, even this millisecond's"
    );
    assert_eq!(counts(&queue), [0, 0, 0]);
    assert_eq!(
        queue
            .purge(TaskState::Done, Duration::from_millis(u64::MAX))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
}

fn a_payload_over_the_queue_limit_is_refused_and_stores_nothing(scratch: Scratch) {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .max_payload_len(4)
        .unwrap();
    let queue = scratch.open_with(&options);
    push(&queue, "1234");
    let err = queue.push("12345", &PushOptions::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("limit is 4"), "{err}");
    assert_eq!(counts(&queue), [1, 0, 0]);
}

#[test]
fn options_refuse_out_of_range_values() {
    let year = Duration::from_secs(366 * 24 * 3600);
    assert!(PullOptions::new().lease(Duration::ZERO).is_err());
    assert!(PullOptions::new()
        .lease(year + Duration::from_millis(1))
        .is_err());
    assert!(PullOptions::new().lease(year).is_ok());
    assert!(PushOptions::new()
        .delay(year + Duration::from_millis(1))
        .is_err());
    assert!(PushOptions::new().run_at_unix_ms(-1).is_err());
    assert!(OpenOptions::new()
        .busy_timeout(year + Duration::from_millis(1))
        .is_err());
    assert!(OpenOptions::new().busy_timeout(Duration::ZERO).is_ok());
    assert!(OpenOptions::new().max_payload_len(0).is_err());
    assert!(OpenOptions::new()
        .max_payload_len(tq::MAX_PAYLOAD_LEN + 1)
        .is_err());
    assert!(OpenOptions::new()
        .max_payload_len(tq::MAX_PAYLOAD_LEN)
        .is_ok());
}

fn timings_show_the_claims_and_ends_since_a_time_and_nothing_before(scratch: Scratch) {
    let queue = scratch.open_with(
        OpenOptions::new()
            .durability(Durability::Normal)
            .keep_history(true),
    );
    // Before `since`: a task claimed and finished, and one claimed and
    // still leased.
    push(&queue, "\"early done\"");
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    queue.finish(task.receipt()).unwrap();
    push(&queue, "\"early leased\"");
    let early_leased = queue.pull(&PullOptions::new()).unwrap().unwrap();
    thread::sleep(Duration::from_millis(20));
    let since = now_ms();
    thread::sleep(Duration::from_millis(5));

    // Since then: a task that waited 50 ms for its claim and is still
    // leased, one that ran 100 ms and is done, one that died of its only
    // failure, and one claimed again after its lease ran out.
    let waited = push(&queue, "\"waited\"");
    thread::sleep(Duration::from_millis(50));
    let leased = queue.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!(leased.id(), waited);
    let ran = push(&queue, "\"ran\"");
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    thread::sleep(Duration::from_millis(100));
    queue.finish(task.receipt()).unwrap();
    let mut once = PushOptions::new();
    once.max_attempts(1).unwrap();
    let died = queue.push("\"died\"", &once).unwrap().id();
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    queue.fail(task.receipt(), "no").unwrap();
    let again = push(&queue, "\"again\"");
    let first = queue.pull(&lease(50)).unwrap().unwrap();
    let first_claim = now_ms();
    thread::sleep(Duration::from_millis(100));
    let second = queue.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!(
        (first.id(), second.id(), second.attempts()),
        (again, again, 2)
    );

    let timings = queue.timings_since(since).unwrap();
    let mut ids: Vec<i64> = timings.iter().map(|timing| timing.id()).collect();
    ids.sort_unstable();
    assert_eq!(ids, [waited, ran, died, again], "{timings:?}");
    let timing = |id: i64| *timings.iter().find(|timing| timing.id() == id).unwrap();
    for timing in &timings {
        assert!(timing.claimed_at_unix_ms() >= since, "{timing:?}");
    }

    let leased = timing(waited);
    assert_eq!((leased.state(), leased.ran()), (TaskState::Leased, None));
    assert!(leased.waited() >= Duration::from_millis(50), "{leased:?}");
    let done = timing(ran);
    assert_eq!(done.state(), TaskState::Done);
    assert!(
        done.ran().unwrap() >= Duration::from_millis(100),
        "{done:?}"
    );
    assert_eq!(
        done.finished_at_unix_ms(),
        Some(done.claimed_at_unix_ms() + done.ran().unwrap().as_millis() as i64)
    );
    let dead = timing(died);
    assert_eq!((dead.state(), dead.attempts()), (TaskState::Dead, 1));
    assert!(dead.ran().is_some());
    // The claim after the expired lease overwrote the first one's time.
    let reclaimed = timing(again);
    assert_eq!(
        (reclaimed.state(), reclaimed.attempts()),
        (TaskState::Leased, 2)
    );
    assert!(
        reclaimed.claimed_at_unix_ms() >= first_claim + 100,
        "{reclaimed:?}"
    );

    // Later still: only what ended since.
    let later = now_ms() + 1;
    thread::sleep(Duration::from_millis(5));
    queue.finish(early_leased.receipt()).unwrap();
    let ended: Vec<i64> = queue
        .timings_since(later)
        .unwrap()
        .iter()
        .map(|timing| timing.id())
        .collect();
    assert_eq!(ended, [early_leased.id()]);
}

fn a_reopened_queue_keeps_its_tasks_and_handles_share_the_file(scratch: Scratch) {
    let id = push(&scratch.open(), "\"kept\"");
    let (a, b) = (scratch.open(), scratch.open());
    let task = a.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!((task.id(), task.payload()), (id, "\"kept\""));
    assert!(b.pull(&PullOptions::new()).unwrap().is_none());
    b.finish(task.receipt())
        .expect("any handle may finish a delivery");
    assert_eq!(counts(&a), [0, 0, 0]);
}

fn threads_sharing_a_handle_never_get_the_same_task(scratch: Scratch) {
    const PRODUCERS: usize = 4;
    const PER_PRODUCER: usize = 250;
    let queue = Arc::new(scratch.open());
    let finished = Arc::new(Mutex::new(Vec::new()));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                for i in 0..PER_PRODUCER {
                    push(&queue, &format!("[{p}, {i}]"));
                }
            })
        })
        .collect();
    let total = PRODUCERS * PER_PRODUCER;
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let (queue, finished) = (Arc::clone(&queue), Arc::clone(&finished));
            thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(60);
                while finished.lock().unwrap().len() < total {
                    assert!(Instant::now() < deadline, "tasks went missing");
                    match queue.pull(&PullOptions::new()).unwrap() {
                        Some(task) => {
                            queue.finish(task.receipt()).unwrap();
                            finished.lock().unwrap().push(task.payload().to_owned());
                        }
                        None => thread::sleep(Duration::from_millis(1)),
                    }
                }
            })
        })
        .collect();
    producers
        .into_iter()
        .chain(consumers)
        .for_each(|t| t.join().unwrap());
    let finished = finished.lock().unwrap();
    let distinct: HashSet<&String> = finished.iter().collect();
    assert_eq!(finished.len(), total, "each task finished once");
    assert_eq!(distinct.len(), finished.len(), "no task finished twice");
    assert_eq!(counts(&queue), [0, 0, 0]);
}

/// Threads sharing a handle, whose writes share transactions: one
/// finishes (deleting, without history) the newest task while another's
/// batch stores an item and then fails on a later one, which undoes that
/// item. The deleted task's id is still never given again.
fn ids_are_never_reused_when_a_batch_fails_in_a_shared_transaction(scratch: Scratch) {
    let queue = scratch.open();
    let pushed = Mutex::new(Vec::new());
    let deadline = Instant::now() + Duration::from_millis(1500);
    thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while Instant::now() < deadline {
                    pushed.lock().unwrap().push(push(&queue, "1"));
                    if let Some(task) = queue.pull(&PullOptions::new()).unwrap() {
                        queue.finish(task.receipt()).unwrap();
                    }
                }
            });
            scope.spawn(|| {
                let mut unknown_parent = PushOptions::new();
                unknown_parent.after(&[i64::MAX / 2]).unwrap();
                let items = [("2", PushOptions::new()), ("3", unknown_parent)];
                while Instant::now() < deadline {
                    let err = queue.push_items(&items).unwrap_err();
                    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
                }
            });
        }
    });
    let pushed = pushed.into_inner().unwrap();
    let distinct: HashSet<i64> = pushed.iter().copied().collect();
    assert_eq!(distinct.len(), pushed.len(), "an id given twice");
}

on_both_backends!(
    ids_are_never_reused_when_a_batch_fails_in_a_shared_transaction,
    push_pull_finish_in_fifo_order,
    payload_is_stored_byte_for_byte,
    invalid_json_stores_nothing,
    ids_are_never_reused,
    delayed_and_scheduled_tasks_wait_for_their_time,
    ready_tasks_come_out_by_due_time_then_id,
    an_expired_lease_makes_the_task_ready_again,
    finish_after_lease_expiry_succeeds_while_nobody_took_the_task,
    a_claim_takes_only_the_task_it_delivers_from_an_expired_holder,
    recover_returns_expired_leases_but_not_live_ones,
    history_keeps_done_tasks_until_purged,
    timings_show_the_claims_and_ends_since_a_time_and_nothing_before,
    a_payload_over_the_queue_limit_is_refused_and_stores_nothing,
    a_reopened_queue_keeps_its_tasks_and_handles_share_the_file,
    threads_sharing_a_handle_never_get_the_same_task,
);
