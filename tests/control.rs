//! Control over running work: cancelling a task, pausing a queue, and
//! snoozing a delivery, on both backends.

#[macro_use]
mod common;

use std::thread;
use std::time::Duration;

use common::{lease, now_ms, pull, push, waiting, Scratch};
use tq::{
    Cancelled, Durability, ErrorKind, OpenOptions, ParentFailure, Pause, PullOptions, PushOptions,
    Pushed, Queue, RateLimit, TaskState,
};

fn with_history(scratch: &Scratch) -> Queue {
    let mut options = OpenOptions::new();
    options.durability(Durability::Normal).keep_history(true);
    scratch.open_with(&options)
}

/// Queue `name` of the scratch, whose tasks have one attempt.
fn one_attempt(scratch: &Scratch, name: &str, history: bool) -> Queue {
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .keep_history(history)
        .max_attempts(1)
        .unwrap()
        .queue(name)
        .unwrap();
    scratch.open_with(&options)
}

fn kind<T: std::fmt::Debug>(result: tq::Result<T>) -> ErrorKind {
    result.unwrap_err().kind()
}

/// A dead, a pending and a delayed task, each cancelled: their ids.
fn cancel_one_of_each(queue: &Queue) -> [i64; 3] {
    let dead = push(queue, "\"dead\"");
    let task = pull(queue).unwrap();
    queue.fail(task.receipt(), "no").unwrap();
    assert_eq!(queue.count(TaskState::Dead).unwrap(), 1);
    let pending = push(queue, "\"pending\"");
    let mut later = PushOptions::new();
    later.delay(Duration::from_secs(3600)).unwrap();
    let delayed = queue.push("\"delayed\"", &later).unwrap().id();
    let ids = [dead, pending, delayed];
    for id in ids {
        assert_eq!(
            queue.cancel_task(id, "not needed").unwrap(),
            Cancelled::Removed
        );
    }
    ids
}

fn a_task_out_of_line_cancelled_is_gone_or_kept_with_its_reason(scratch: Scratch) {
    let queue = one_attempt(&scratch, "gone", false);
    let ids = cancel_one_of_each(&queue);
    assert!(pull(&queue).is_none());
    for state in [TaskState::Pending, TaskState::Dead, TaskState::Cancelled] {
        assert_eq!(queue.count(state).unwrap(), 0, "{state:?}");
    }
    assert_eq!(
        kind(queue.cancel_task(ids[0], "")),
        ErrorKind::InvalidArgument,
        "without history, a cancelled task is gone"
    );

    let queue = one_attempt(&scratch, "kept", true);
    let ids = cancel_one_of_each(&queue);
    assert!(pull(&queue).is_none());
    assert_eq!(queue.count(TaskState::Cancelled).unwrap(), 3);
    assert_eq!(queue.count(TaskState::Dead).unwrap(), 0);
    let cancelled = queue.list(TaskState::Cancelled, 0, 10).unwrap();
    assert_eq!(
        cancelled.iter().map(|task| task.id()).collect::<Vec<_>>(),
        ids
    );
    assert!(cancelled.iter().all(
        |task| task.state() == TaskState::Cancelled && task.last_error() == Some("not needed")
    ));
    assert_eq!(
        queue.cancel_task(ids[1], "again").unwrap(),
        Cancelled::Removed,
        "cancelling again changes nothing"
    );
    assert_eq!(
        queue.list(TaskState::Cancelled, 0, 10).unwrap()[1].last_error(),
        Some("not needed")
    );
    assert_eq!(
        queue.purge(TaskState::Cancelled, Duration::ZERO).unwrap(),
        3
    );
}

/// A call a holder makes with its receipt.
type HolderCall = fn(&Queue, tq::Receipt) -> tq::Result<()>;

fn a_cancelled_delivery_is_told_at_its_holders_next_call_and_never_delivered_again(
    scratch: Scratch,
) {
    let queue = with_history(&scratch);
    let calls: [(&str, HolderCall); 4] = [
        ("extend", |queue, receipt| {
            queue.extend(receipt, Duration::from_secs(60))
        }),
        ("finish", |queue, receipt| queue.finish(receipt)),
        ("fail", |queue, receipt| queue.fail(receipt, "x").map(drop)),
        ("snooze", |queue, receipt| {
            queue.snooze(receipt, Duration::ZERO)
        }),
    ];
    for (name, call) in calls {
        let id = push(&queue, "\"work\"");
        let task = pull(&queue).unwrap();
        assert_eq!(
            queue.cancel_task(id, "stop it").unwrap(),
            Cancelled::Requested
        );
        assert_eq!(
            queue.cancel_task(id, "stop it").unwrap(),
            Cancelled::Requested,
            "asked twice, the same"
        );
        assert_eq!(queue.count(TaskState::Leased).unwrap(), 1, "{name}");
        assert!(pull(&queue).is_none(), "{name}: not delivered again");
        assert_eq!(
            kind(call(&queue, task.receipt())),
            ErrorKind::Cancelled,
            "{name}"
        );
        assert_eq!(
            kind(call(&queue, task.receipt())),
            ErrorKind::NotHeld,
            "{name}: the delivery is over"
        );
        assert_eq!(queue.count(TaskState::Leased).unwrap(), 0, "{name}");
        let kept = queue.list(TaskState::Cancelled, id - 1, 1).unwrap();
        assert_eq!(kept[0].id(), id, "{name}");
        assert_eq!(kept[0].last_error(), Some("stop it"), "{name}");
    }
    assert!(pull(&queue).is_none());
}

fn a_cancelled_task_whose_lease_expires_is_over_not_recovered(scratch: Scratch) {
    let queue = with_history(&scratch);
    let id = push(&queue, "\"abandoned\"");
    let task = queue.pull(&lease(50)).unwrap().unwrap();
    assert_eq!(queue.cancel_task(id, "").unwrap(), Cancelled::Requested);
    thread::sleep(Duration::from_millis(120));
    assert!(
        pull(&queue).is_none(),
        "an expired lease is not taken again"
    );
    assert_eq!(queue.recover().unwrap(), 0, "nothing brought back");
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 0);
    assert_eq!(queue.count(TaskState::Cancelled).unwrap(), 1);
    assert_eq!(kind(queue.finish(task.receipt())), ErrorKind::NotHeld);
}

/// The usual reason to cancel a running task is that its worker is stuck,
/// and then the worker is killed: once its lease has run out, the next
/// claim of any queue of the file ends the task, so what waits for it (its
/// ordered group's next task, its dependents) goes on without a `recover`.
fn a_cancelled_task_whose_holder_is_gone_is_ended_by_the_next_claim(scratch: Scratch) {
    let queue = with_history(&scratch);
    let mut grouped = PushOptions::new();
    grouped.group("account-7", 1).unwrap();
    let first = queue.push("1", &grouped).unwrap().id();
    let second = queue.push("2", &grouped).unwrap().id();
    let mut after = PushOptions::new();
    after.after(&[first]).unwrap();
    let cancelled_with_it = queue.push("3", &after).unwrap().id();
    after.on_parent_failure(ParentFailure::RunAnyway);
    let runs_anyway = queue.push("4", &after).unwrap().id();
    let held = queue.pull(&lease(50)).unwrap().unwrap();
    assert_eq!(held.id(), first);
    assert_eq!(
        queue.cancel_task(first, "stuck").unwrap(),
        Cancelled::Requested
    );
    drop(held);
    thread::sleep(Duration::from_millis(120));
    let mut options = OpenOptions::new();
    options.keep_history(true).queue("other").unwrap();
    assert!(pull(&scratch.open_with(&options)).is_none());
    let cancelled: Vec<i64> = queue
        .list(TaskState::Cancelled, 0, 10)
        .unwrap()
        .iter()
        .map(|task| task.id())
        .collect();
    assert_eq!(
        cancelled,
        [first, cancelled_with_it],
        "a claim of another queue ended the cancelled task, and its dependent with it"
    );
    let next: Vec<i64> = queue
        .pull_batch(10, &PullOptions::new())
        .unwrap()
        .iter()
        .map(|task| task.id())
        .collect();
    assert_eq!(
        next,
        [second, runs_anyway],
        "the group's next task and the dependent are free"
    );
}

/// A pull waiting on a group whose head was cancelled while held wakes
/// when the head's lease runs out and takes the next task.
fn a_pull_waiting_behind_a_cancelled_task_takes_the_next_once_its_lease_runs_out(scratch: Scratch) {
    let queue = scratch.open();
    let mut grouped = PushOptions::new();
    grouped.group("g", 1).unwrap();
    let first = queue.push("1", &grouped).unwrap().id();
    let second = queue.push("2", &grouped).unwrap().id();
    let _held = queue.pull(&lease(300)).unwrap().unwrap();
    assert_eq!(queue.cancel_task(first, "").unwrap(), Cancelled::Requested);
    let task = scratch
        .open()
        .pull(&waiting(5_000))
        .unwrap()
        .expect("woken when the cancelled task's lease ran out");
    assert_eq!(task.id(), second);
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 1);
}

fn cancel_refuses_what_it_cannot_cancel_and_changes_nothing(scratch: Scratch) {
    let queue = with_history(&scratch);
    assert_eq!(
        kind(queue.cancel_task(12345, "")),
        ErrorKind::InvalidArgument
    );
    let done = push(&queue, "\"done\"");
    let task = pull(&queue).unwrap();
    queue.finish(task.receipt()).unwrap();
    let refused = queue.cancel_task(done, "").unwrap_err();
    assert_eq!(refused.kind(), ErrorKind::InvalidArgument);
    assert!(refused.message().contains("done"), "{refused}");
    assert_eq!(queue.count(TaskState::Done).unwrap(), 1);
    let pending = push(&queue, "\"pending\"");
    assert_eq!(
        kind(queue.cancel_task(pending, "nul\0byte")),
        ErrorKind::InvalidArgument
    );
    let other = scratch.open_with(OpenOptions::new().queue("other").unwrap());
    assert_eq!(
        kind(other.cancel_task(pending, "")),
        ErrorKind::InvalidArgument,
        "a task of another queue"
    );
    assert_eq!(pull(&queue).unwrap().id(), pending, "still in line");
}

fn a_cancelled_task_gives_up_its_unique_key(scratch: Scratch) {
    let queue = with_history(&scratch);
    let mut unique = PushOptions::new();
    unique.unique_key("report-42").unwrap();
    let first = queue.push("1", &unique).unwrap();
    assert!(matches!(queue.push("2", &unique).unwrap(), Pushed::Duplicate(id) if id == first.id()));
    // Leased and cancelled: its holder still runs it, so it keeps the key.
    let task = pull(&queue).unwrap();
    queue.cancel_task(first.id(), "").unwrap();
    assert!(matches!(
        queue.push("2", &unique).unwrap(),
        Pushed::Duplicate(_)
    ));
    assert_eq!(kind(queue.finish(task.receipt())), ErrorKind::Cancelled);
    assert!(matches!(
        queue.push("3", &unique).unwrap(),
        Pushed::Stored(_)
    ));
}

fn a_paused_queue_delivers_nothing_until_resumed_and_still_stores_pushes(scratch: Scratch) {
    let queue = scratch.open();
    let other = scratch.open_with(OpenOptions::new().queue("other").unwrap());
    assert_eq!(queue.paused().unwrap(), None);
    queue.pause(Pause::UntilResumed).unwrap();
    let id = push(&queue, "\"held back\"");
    push(&other, "\"free\"");
    assert!(pull(&queue).is_none());
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
    assert_eq!(queue.paused().unwrap(), Some(Pause::UntilResumed));
    assert_eq!(other.paused().unwrap(), None);
    assert!(pull(&other).is_some(), "other queues go on");
    // Seen by every handle, and kept when they close.
    drop(queue);
    let queue = scratch.open();
    assert_eq!(queue.paused().unwrap(), Some(Pause::UntilResumed));
    assert!(pull(&queue).is_none());
    queue.resume().unwrap();
    assert_eq!(queue.paused().unwrap(), None);
    assert_eq!(pull(&queue).unwrap().id(), id);
}

fn a_pull_waiting_on_a_paused_queue_takes_a_task_once_it_is_resumed(scratch: Scratch) {
    let queue = scratch.open();
    queue.pause(Pause::UntilResumed).unwrap();
    let id = push(&queue, "\"waits\"");
    thread::scope(|scope| {
        let waiter = scope.spawn(|| queue.pull(&waiting(20_000)).unwrap());
        thread::sleep(Duration::from_millis(200));
        assert!(!waiter.is_finished(), "the pull waits through the pause");
        scratch.open().resume().unwrap();
        let task = waiter.join().unwrap().expect("woken by the resume");
        assert_eq!(task.id(), id);
    });
}

fn a_pause_until_a_time_ends_by_itself(scratch: Scratch) {
    let queue = scratch.open();
    assert_eq!(
        kind(queue.pause(Pause::UntilUnixMs(now_ms() - 1))),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        queue.paused().unwrap(),
        None,
        "a refused pause changes nothing"
    );
    let until = now_ms() + 400;
    queue.pause(Pause::UntilUnixMs(until)).unwrap();
    assert_eq!(queue.paused().unwrap(), Some(Pause::UntilUnixMs(until)));
    let id = push(&queue, "\"later\"");
    assert!(pull(&queue).is_none());
    let task = queue
        .pull(&waiting(20_000))
        .unwrap()
        .expect("after the pause");
    assert_eq!(task.id(), id);
    assert_eq!(queue.paused().unwrap(), None);
}

fn snooze_hands_a_task_back_without_counting_an_attempt(scratch: Scratch) {
    let queue = one_attempt(&scratch, "default", false);
    let id = push(&queue, "\"not yet\"");
    for _ in 0..3 {
        let task = pull(&queue).expect("snoozed, not dead");
        assert_eq!((task.id(), task.attempts()), (id, 1));
        queue.snooze(task.receipt(), Duration::ZERO).unwrap();
        assert_eq!(
            kind(queue.snooze(task.receipt(), Duration::ZERO)),
            ErrorKind::NotHeld
        );
    }
    let task = pull(&queue).unwrap();
    queue
        .snooze(task.receipt(), Duration::from_millis(300))
        .unwrap();
    assert!(pull(&queue).is_none(), "not before its delay");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
    let again = queue
        .pull(&waiting(20_000))
        .unwrap()
        .expect("after the delay");
    assert_eq!((again.id(), again.attempts()), (id, 1));
    assert_eq!(
        kind(queue.snooze(again.receipt(), Duration::from_secs(400 * 24 * 3600))),
        ErrorKind::InvalidArgument
    );
    queue.finish(again.receipt()).unwrap();
}

fn no_task_is_delivered_after_its_cancellation_returned(scratch: Scratch) {
    use std::collections::HashMap;
    use std::sync::Mutex;
    use std::time::Instant;

    const TASKS: i64 = 400;
    let queue = with_history(&scratch);
    let ids: Vec<i64> = (0..TASKS).map(|n| push(&queue, &n.to_string())).collect();
    // When each pull began, by task; when each cancellation returned.
    let pulls: Mutex<Vec<(i64, Instant)>> = Mutex::new(Vec::new());
    let cancelled: Mutex<HashMap<i64, Instant>> = Mutex::new(HashMap::new());
    let (finished, told) = (Mutex::new(Vec::new()), Mutex::new(Vec::new()));
    thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| loop {
                let began = Instant::now();
                let Some(task) = queue.pull(&lease(60_000)).unwrap() else {
                    break;
                };
                pulls.lock().unwrap().push((task.id(), began));
                match queue.finish(task.receipt()) {
                    Ok(()) => finished.lock().unwrap().push(task.id()),
                    Err(err) if err.kind() == ErrorKind::Cancelled => {
                        told.lock().unwrap().push(task.id())
                    }
                    Err(err) => panic!("finish: {err}"),
                }
            });
        }
        scope.spawn(|| {
            // Every third task, in an order of its own.
            for &id in ids.iter().step_by(3).rev() {
                match queue.cancel_task(id, "") {
                    Ok(_) => {
                        cancelled.lock().unwrap().insert(id, Instant::now());
                    }
                    Err(err) if err.kind() == ErrorKind::InvalidArgument => {} // done already
                    Err(err) => panic!("cancel: {err}"),
                }
            }
        });
    });
    let (cancelled, finished, told) = (
        cancelled.into_inner().unwrap(),
        finished.into_inner().unwrap(),
        told.into_inner().unwrap(),
    );
    for (id, began) in pulls.into_inner().unwrap() {
        if let Some(&at) = cancelled.get(&id) {
            assert!(
                began < at,
                "task {id} was delivered after its cancellation returned"
            );
        }
    }
    assert!(!cancelled.is_empty());
    for id in &finished {
        assert!(
            !cancelled.contains_key(id),
            "task {id}: cancelled and finished"
        );
    }
    for id in &told {
        assert!(
            cancelled.contains_key(id),
            "task {id}: told of a cancellation never made"
        );
    }
    assert_eq!(queue.count(TaskState::Done).unwrap(), finished.len() as u64);
    assert_eq!(
        queue.count(TaskState::Cancelled).unwrap(),
        cancelled.len() as u64
    );
    assert_eq!(finished.len() + cancelled.len(), TASKS as usize);
}

fn a_holder_waiting_for_its_cancellation_is_told_when_it_is_recorded(scratch: Scratch) {
    let (queue, other) = (with_history(&scratch), with_history(&scratch));
    let id = push(&queue, "\"work\"");
    let task = pull(&queue).unwrap();
    let watching = thread::spawn({
        let queue = with_history(&scratch);
        let receipt = task.receipt();
        move || queue.wait_for_cancellation(receipt, Duration::from_secs(60), None)
    });
    // Another handle's finish, and its pushes, do not end the wait.
    push(&other, "\"more\"");
    let more = pull(&other).unwrap();
    other.finish(more.receipt()).unwrap();
    thread::sleep(Duration::from_millis(100));
    assert!(
        !watching.is_finished(),
        "the wait ended before any cancellation"
    );
    assert_eq!(
        other.cancel_task(id, "not needed").unwrap(),
        Cancelled::Requested
    );
    assert_eq!(watching.join().unwrap().unwrap(), Some(tq::Stop::Cancelled));
    // Told, the holder still ends the delivery, as cancelled.
    assert_eq!(kind(queue.finish(task.receipt())), ErrorKind::Cancelled);
    assert_eq!(
        queue
            .wait_for_cancellation(task.receipt(), Duration::from_secs(60), None)
            .unwrap(),
        Some(tq::Stop::NotHeld),
        "the delivery is over"
    );
    assert_eq!(queue.count(TaskState::Cancelled).unwrap(), 1);
}

fn a_wait_for_cancellation_ends_at_its_timeout_its_token_or_an_interrupt(scratch: Scratch) {
    let queue = scratch.open();
    let id = push(&queue, "\"work\"");
    let task = pull(&queue).unwrap();
    let receipt = task.receipt();
    assert_eq!(
        queue
            .wait_for_cancellation(receipt, Duration::from_millis(50), None)
            .unwrap(),
        None,
        "nothing happened within the timeout"
    );
    let token = tq::CancelToken::new();
    thread::scope(|scope| {
        let waiting = scope
            .spawn(|| queue.wait_for_cancellation(receipt, Duration::from_secs(60), Some(&token)));
        thread::sleep(Duration::from_millis(50));
        token.cancel();
        assert_eq!(kind(waiting.join().unwrap()), ErrorKind::Interrupted);
    });
    assert_eq!(
        kind(queue.wait_for_cancellation(receipt, Duration::from_secs(60), Some(&token))),
        ErrorKind::Interrupted,
        "a token cancelled before ends the wait at once"
    );
    // A snooze ends the delivery: the wait says so.
    queue.snooze(receipt, Duration::ZERO).unwrap();
    assert_eq!(
        queue
            .wait_for_cancellation(receipt, Duration::from_secs(60), None)
            .unwrap(),
        Some(tq::Stop::NotHeld)
    );
    let task = pull(&queue).unwrap();
    assert_eq!(task.id(), id);
    let interrupted = scratch.open();
    thread::scope(|scope| {
        let waiting = scope.spawn(|| {
            interrupted.wait_for_cancellation(task.receipt(), Duration::from_secs(60), None)
        });
        thread::sleep(Duration::from_millis(50));
        interrupted.interrupt();
        assert_eq!(kind(waiting.join().unwrap()), ErrorKind::Interrupted);
    });
    assert_eq!(
        kind(queue.wait_for_cancellation(task.receipt(), Duration::from_secs(367 * 86_400), None)),
        ErrorKind::InvalidArgument,
        "a timeout over a year"
    );
    let elsewhere = Scratch::new().open();
    assert_eq!(
        kind(elsewhere.wait_for_cancellation(task.receipt(), Duration::ZERO, None)),
        ErrorKind::InvalidArgument,
        "a receipt from another store"
    );
    queue.finish(task.receipt()).unwrap();
}

fn a_concurrency_limit_caps_the_leased_tasks_of_every_handle(scratch: Scratch) {
    let queue = scratch.open();
    let other = scratch.open();
    assert_eq!(queue.concurrency_limit().unwrap(), None);
    assert_eq!(
        kind(queue.set_concurrency_limit(Some(0))),
        ErrorKind::InvalidArgument
    );
    queue.set_concurrency_limit(Some(2)).unwrap();
    assert_eq!(other.concurrency_limit().unwrap(), Some(2));
    for n in 0..5 {
        push(&queue, &n.to_string());
    }
    let first = pull(&queue).unwrap();
    let second = pull(&other).unwrap();
    assert!(pull(&queue).is_none(), "both slots are taken");
    assert!(other
        .pull_batch(10, &PullOptions::new())
        .unwrap()
        .is_empty());
    queue.finish(first.receipt()).unwrap();
    let batch = other.pull_batch(10, &PullOptions::new()).unwrap();
    assert_eq!(batch.len(), 1, "one slot was freed");
    queue.set_concurrency_limit(None).unwrap();
    assert_eq!(queue.concurrency_limit().unwrap(), None);
    assert_eq!(queue.pull_batch(10, &PullOptions::new()).unwrap().len(), 2);
    drop(second);
}

fn an_expired_lease_frees_its_slot(scratch: Scratch) {
    let queue = scratch.open();
    queue.set_concurrency_limit(Some(1)).unwrap();
    push(&queue, "1");
    push(&queue, "2");
    let lost = queue.pull(&lease(50)).unwrap().unwrap();
    assert!(pull(&queue).is_none());
    thread::sleep(Duration::from_millis(120));
    let next = pull(&queue).expect("the expired lease holds no slot");
    assert_eq!(next.id(), lost.id(), "the expired task keeps its place");
    assert!(pull(&queue).is_none(), "and now holds the slot again");
}

/// An expired lease holds no slot, so another claim may take it; its
/// holder, back late, must then not have the lease again, or two tasks
/// would be held under a limit of one.
fn an_expired_lease_whose_slot_was_taken_is_not_extended(scratch: Scratch) {
    let queue = scratch.open();
    queue.set_concurrency_limit(Some(1)).unwrap();
    let mut first = PushOptions::new();
    first.priority(1);
    queue.push("1", &first).unwrap();
    push(&queue, "2");
    let late = queue.pull(&lease(50)).unwrap().unwrap();
    thread::sleep(Duration::from_millis(120));
    // The same task again, under a new lease: the late holder's is gone.
    let retaken = pull(&queue).expect("the expired lease holds no slot");
    assert_eq!(retaken.id(), late.id());
    assert_eq!(
        kind(queue.extend(late.receipt(), Duration::from_secs(30))),
        ErrorKind::NotHeld
    );
    queue.finish(retaken.receipt()).unwrap();
    // Another task in the freed slot: the late holder's lease, still its
    // task's, may not take a second slot.
    let late = queue.pull(&lease(50)).unwrap().unwrap();
    thread::sleep(Duration::from_millis(120));
    let second = scratch.open();
    push(&second, "3");
    let mut high = PushOptions::new();
    high.priority(5);
    let taker = second.push("4", &high).unwrap().id();
    assert_eq!(pull(&second).expect("the slot is free").id(), taker);
    assert_eq!(
        kind(queue.extend(late.receipt(), Duration::from_secs(30))),
        ErrorKind::NotHeld,
        "the queue is at its limit"
    );
    assert_eq!(
        queue.count(TaskState::Leased).unwrap(),
        2,
        "one expired, one live"
    );
    // With room under the limit, an expired lease nobody took may be
    // extended, as on a queue without a limit.
    queue.set_concurrency_limit(Some(2)).unwrap();
    queue
        .extend(late.receipt(), Duration::from_secs(30))
        .unwrap();
    queue.finish(late.receipt()).unwrap();
}

fn a_pull_waiting_at_the_limit_takes_a_task_once_a_slot_frees(scratch: Scratch) {
    let queue = scratch.open();
    queue.set_concurrency_limit(Some(1)).unwrap();
    push(&queue, "1");
    let waiting_for = push(&queue, "2");
    let held = pull(&queue).unwrap();
    thread::scope(|scope| {
        let waiter = scope.spawn(|| queue.pull(&waiting(20_000)).unwrap());
        thread::sleep(Duration::from_millis(200));
        assert!(!waiter.is_finished(), "no slot: the pull waits");
        scratch.open().finish(held.receipt()).unwrap();
        let task = waiter.join().unwrap().expect("woken by the finish");
        assert_eq!(task.id(), waiting_for);
    });
}

/// A slot also frees when its holder's lease expires, which no call tells
/// of: a pull waiting at the limit wakes for it.
fn a_pull_waiting_at_the_limit_takes_a_task_whose_lease_expired(scratch: Scratch) {
    let queue = scratch.open();
    queue.set_concurrency_limit(Some(1)).unwrap();
    let lost = push(&queue, "1");
    push(&queue, "2");
    let _held = queue.pull(&lease(300)).unwrap().unwrap();
    let other = scratch.open();
    let task = other
        .pull(&waiting(5_000))
        .unwrap()
        .expect("woken when the lease expired");
    assert_eq!(task.id(), lost, "the expired task keeps its place");
}

fn the_limit_holds_exactly_under_threads_racing_for_slots(scratch: Scratch) {
    use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

    const LIMIT: i64 = 3;
    const TASKS: usize = 300;
    let queue = scratch.open();
    queue.set_concurrency_limit(Some(LIMIT as u32)).unwrap();
    let payloads: Vec<String> = (0..TASKS).map(|n| n.to_string()).collect();
    let payloads: Vec<&str> = payloads.iter().map(String::as_str).collect();
    queue.push_batch(&payloads, &PushOptions::new()).unwrap();
    // Held from the return of a pull to the call of its finish: never more
    // than the leases the queue has.
    let (held, most, done) = (AtomicI64::new(0), AtomicI64::new(0), AtomicUsize::new(0));
    thread::scope(|scope| {
        for _ in 0..6 {
            let handle = scratch.open();
            let (held, most, done) = (&held, &most, &done);
            scope.spawn(move || {
                while done.load(Ordering::SeqCst) < TASKS {
                    let Some(task) = handle.pull(&waiting(100)).unwrap() else {
                        continue;
                    };
                    let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    thread::yield_now();
                    held.fetch_sub(1, Ordering::SeqCst);
                    handle.finish(task.receipt()).unwrap();
                    done.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
    });
    assert!(
        most.load(Ordering::SeqCst) <= LIMIT,
        "{} held at once",
        most.load(Ordering::SeqCst)
    );
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
}

fn a_rate_limit_allows_that_many_claims_per_window(scratch: Scratch) {
    let queue = scratch.open();
    assert_eq!(queue.rate_limit().unwrap(), None);
    for refused in [
        RateLimit {
            claims: 0,
            per: Duration::from_secs(1),
        },
        RateLimit {
            claims: tq::MAX_RATE_CLAIMS + 1,
            per: Duration::from_secs(1),
        },
        RateLimit {
            claims: 1,
            per: Duration::ZERO,
        },
    ] {
        assert_eq!(
            kind(queue.set_rate_limit(Some(refused))),
            ErrorKind::InvalidArgument
        );
    }
    assert_eq!(
        queue.rate_limit().unwrap(),
        None,
        "a refused limit changes nothing"
    );
    let limit = RateLimit {
        claims: 3,
        per: Duration::from_millis(400),
    };
    queue.set_rate_limit(Some(limit)).unwrap();
    assert_eq!(scratch.open().rate_limit().unwrap(), Some(limit));
    let payloads: Vec<String> = (0..10).map(|n| n.to_string()).collect();
    let payloads: Vec<&str> = payloads.iter().map(String::as_str).collect();
    queue.push_batch(&payloads, &PushOptions::new()).unwrap();
    assert_eq!(queue.pull_batch(10, &PullOptions::new()).unwrap().len(), 3);
    assert!(pull(&queue).is_none(), "the window's claims are spent");
    let next = queue.pull(&waiting(20_000)).unwrap();
    assert!(
        next.is_some(),
        "a waiting pull takes a task once a slot is free"
    );
    queue.set_rate_limit(None).unwrap();
    assert_eq!(queue.rate_limit().unwrap(), None);
    assert_eq!(queue.pull_batch(10, &PullOptions::new()).unwrap().len(), 6);
}

/// Workers declare the rate at start: a restart must grant no new burst.
fn setting_the_rate_in_force_again_frees_no_slot(scratch: Scratch) {
    let queue = scratch.open();
    let rate = RateLimit {
        claims: 2,
        per: Duration::from_secs(3600),
    };
    queue.set_rate_limit(Some(rate)).unwrap();
    let payloads: Vec<String> = (0..10).map(|n| n.to_string()).collect();
    let payloads: Vec<&str> = payloads.iter().map(String::as_str).collect();
    queue.push_batch(&payloads, &PushOptions::new()).unwrap();
    assert_eq!(queue.pull_batch(10, &PullOptions::new()).unwrap().len(), 2);
    scratch.open().set_rate_limit(Some(rate)).unwrap();
    assert!(pull(&queue).is_none(), "the window's claims stay spent");
    // A changed rate keeps the most recent uses: three claims an hour,
    // two of them used, leaves one.
    let wider = RateLimit {
        claims: 3,
        per: Duration::from_secs(3600),
    };
    queue.set_rate_limit(Some(wider)).unwrap();
    assert_eq!(queue.rate_limit().unwrap(), Some(wider));
    assert_eq!(queue.pull_batch(10, &PullOptions::new()).unwrap().len(), 1);
    // Fewer slots keep the newest uses: one claim an hour, spent.
    queue
        .set_rate_limit(Some(RateLimit {
            claims: 1,
            per: Duration::from_secs(3600),
        }))
        .unwrap();
    assert!(pull(&queue).is_none());
    // A shorter window frees the uses older than it.
    queue
        .set_rate_limit(Some(RateLimit {
            claims: 1,
            per: Duration::from_millis(50),
        }))
        .unwrap();
    thread::sleep(Duration::from_millis(80));
    assert!(pull(&queue).is_some());
}

fn the_rate_holds_under_threads_racing_for_slots(scratch: Scratch) {
    use std::sync::Mutex;
    use std::time::Instant;

    const CLAIMS: usize = 5;
    const WINDOW: Duration = Duration::from_millis(300);
    const TASKS: usize = 30;
    let queue = scratch.open();
    queue
        .set_rate_limit(Some(RateLimit {
            claims: CLAIMS as u32,
            per: WINDOW,
        }))
        .unwrap();
    let payloads: Vec<String> = (0..TASKS).map(|n| n.to_string()).collect();
    let payloads: Vec<&str> = payloads.iter().map(String::as_str).collect();
    queue.push_batch(&payloads, &PushOptions::new()).unwrap();
    // When each pull that delivered began and returned: its claim was
    // made in between.
    let claims: Mutex<Vec<(Instant, Instant)>> = Mutex::new(Vec::new());
    thread::scope(|scope| {
        for _ in 0..4 {
            let handle = scratch.open();
            let claims = &claims;
            scope.spawn(move || {
                while claims.lock().unwrap().len() < TASKS {
                    let began = Instant::now();
                    let Some(task) = handle.pull(&waiting(100)).unwrap() else {
                        continue;
                    };
                    claims.lock().unwrap().push((began, Instant::now()));
                    handle.finish(task.receipt()).unwrap();
                }
            });
        }
    });
    let mut claims = claims.into_inner().unwrap();
    assert_eq!(claims.len(), TASKS);
    claims.sort();
    // CLAIMS + 1 claims made surely within less than a window break it
    // (claim times are whole milliseconds: one less may pass).
    for group in claims.windows(CLAIMS + 1) {
        let began = group[0].0;
        let returned = group.iter().map(|claim| claim.1).max().unwrap();
        assert!(
            returned - began >= WINDOW - Duration::from_millis(1),
            "{} claims within {:?}",
            CLAIMS + 1,
            returned - began
        );
    }
}

fn cancel_many_cancels_pending_leased_and_dead_tasks_and_skips_the_rest(scratch: Scratch) {
    let queue = with_history(&scratch);
    let mut once = PushOptions::new();
    once.max_attempts(1).unwrap();
    let dead = queue.push("\"dead\"", &once).unwrap().id();
    let task = pull(&queue).unwrap();
    queue.fail(task.receipt(), "boom").unwrap();
    let leased = push(&queue, "\"leased\"");
    let held = pull(&queue).unwrap();
    assert_eq!(held.id(), leased);
    let done = push(&queue, "\"done\"");
    queue.finish(pull(&queue).unwrap().receipt()).unwrap();
    let pending: Vec<i64> = (0..3).map(|n| push(&queue, &n.to_string())).collect();

    let mut ids = vec![dead, leased, done, 999_999];
    ids.extend(&pending);
    assert_eq!(queue.cancel_many(&ids, "not wanted").unwrap(), 5);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
    assert_eq!(queue.count(TaskState::Dead).unwrap(), 0);
    // The leased task's holder learns of it at its next call.
    assert_eq!(
        queue.finish(held.receipt()).unwrap_err().kind(),
        ErrorKind::Cancelled
    );
    assert!(
        queue.task(done).unwrap().is_some(),
        "a done task stays done"
    );
    assert_eq!(
        queue.cancel_many(&[dead], "again\0").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

on_both_backends!(
    cancel_many_cancels_pending_leased_and_dead_tasks_and_skips_the_rest,
    a_cancelled_task_whose_holder_is_gone_is_ended_by_the_next_claim,
    a_pull_waiting_behind_a_cancelled_task_takes_the_next_once_its_lease_runs_out,
    an_expired_lease_whose_slot_was_taken_is_not_extended,
    setting_the_rate_in_force_again_frees_no_slot,
    a_holder_waiting_for_its_cancellation_is_told_when_it_is_recorded,
    a_wait_for_cancellation_ends_at_its_timeout_its_token_or_an_interrupt,
    a_rate_limit_allows_that_many_claims_per_window,
    the_rate_holds_under_threads_racing_for_slots,
    a_concurrency_limit_caps_the_leased_tasks_of_every_handle,
    an_expired_lease_frees_its_slot,
    a_pull_waiting_at_the_limit_takes_a_task_once_a_slot_frees,
    a_pull_waiting_at_the_limit_takes_a_task_whose_lease_expired,
    the_limit_holds_exactly_under_threads_racing_for_slots,
    no_task_is_delivered_after_its_cancellation_returned,
    a_task_out_of_line_cancelled_is_gone_or_kept_with_its_reason,
    a_cancelled_delivery_is_told_at_its_holders_next_call_and_never_delivered_again,
    a_cancelled_task_whose_lease_expires_is_over_not_recovered,
    cancel_refuses_what_it_cannot_cancel_and_changes_nothing,
    a_cancelled_task_gives_up_its_unique_key,
    a_paused_queue_delivers_nothing_until_resumed_and_still_stores_pushes,
    a_pull_waiting_on_a_paused_queue_takes_a_task_once_it_is_resumed,
    a_pause_until_a_time_ends_by_itself,
    snooze_hands_a_task_back_without_counting_an_attempt,
);

/// A claim that waited for the write lock is made when it gets the lock:
/// its time (which stamps its rate slot, its lease and `claimed_at`) is
/// read then, so a window of a rate limit never holds more claims than the
/// rate because some of them waited.
#[test]
fn a_claim_that_waited_for_the_write_lock_is_stamped_when_it_took_it() {
    let scratch = Scratch::new();
    let queue = scratch.open();
    let id = push(&queue, "1");
    let mut other = tq::rusqlite::Connection::open(scratch.queue_path()).unwrap();
    let writer = other
        .transaction_with_behavior(tq::rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let released = thread::scope(|scope| {
        let puller = scope.spawn(|| pull(&queue).expect("the task, once the lock is free"));
        thread::sleep(Duration::from_millis(300));
        let released = now_ms();
        writer.commit().unwrap();
        assert_eq!(puller.join().unwrap().id(), id);
        released
    });
    let claimed_at = queue
        .task(id)
        .unwrap()
        .unwrap()
        .claimed_at_unix_ms()
        .unwrap();
    assert!(
        claimed_at >= released,
        "claimed at {claimed_at}, while another connection held the lock until {released}"
    );
}
