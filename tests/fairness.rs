//! Fair shares by key: a queue shares its deliveries between the fairness
//! keys with ready tasks, in proportion to their weights, checked from the
//! history of deliveries.

#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::thread;
use std::time::{Duration, Instant};

use common::{lease, pull, Scratch};
use tq::{ErrorKind, OpenOptions, Pause, PullOptions, PushOptions, Queue, RateLimit, TaskState};

/// How many ready tasks the big key holds in the history test, as the
/// issue states it.
const BIG_BACKLOG: usize = 100_000;

/// `text` as a JSON string: each task's payload names its key (or itself).
fn json(text: &str) -> String {
    format!("\"{text}\"")
}

/// What a task's payload names (see [`json`]).
fn name(task: &tq::Task) -> &str {
    task.payload().trim_matches('"')
}

fn keyed(key: &str) -> PushOptions {
    let mut options = PushOptions::new();
    options.fair_key(key).expect("a valid key");
    options
}

/// Pushes `n` tasks under `key`, each carrying its key as payload.
fn push_keyed(queue: &Queue, key: &str, n: usize) {
    let payload = json(key);
    let payloads = vec![payload.as_str(); n];
    for chunk in payloads.chunks(10_000) {
        queue.push_batch(chunk, &keyed(key)).unwrap();
    }
}

/// The payloads of the next `n` deliveries, pulled `batch` at a time.
fn deliveries(queue: &Queue, n: usize, batch: usize) -> Vec<String> {
    let mut delivered = Vec::new();
    while delivered.len() < n {
        let tasks = queue
            .pull_batch(batch.min(n - delivered.len()), &PullOptions::new())
            .unwrap();
        if tasks.is_empty() {
            break;
        }
        delivered.extend(tasks.iter().map(|task| name(task).to_owned()));
    }
    delivered
}

fn counts<'a>(window: impl IntoIterator<Item = &'a String>) -> BTreeMap<&'a str, usize> {
    let mut counts = BTreeMap::new();
    for key in window {
        *counts.entry(key.as_str()).or_insert(0) += 1;
    }
    counts
}

/// Checks the stated bound over every window of `history` of every length
/// up to `longest`: keys i and j, both with ready tasks throughout,
/// deliver n_i and n_j with |n_i / w_i - n_j / w_j| <= 1 / w_i + 1 / w_j.
fn assert_within_bound(history: &[String], weights: &BTreeMap<&str, f64>, longest: usize) {
    for len in 1..=longest.min(history.len()) {
        for window in history.windows(len) {
            let counts = counts(window);
            for (&i, &w_i) in weights {
                for (&j, &w_j) in weights {
                    let n_i = *counts.get(i).unwrap_or(&0) as f64;
                    let n_j = *counts.get(j).unwrap_or(&0) as f64;
                    assert!(
                        (n_i / w_i - n_j / w_j).abs() <= 1.0 / w_i + 1.0 / w_j + 1e-9,
                        "window of {len}: {i} got {n_i}, {j} got {n_j}: {window:?}"
                    );
                }
            }
        }
    }
}

fn every_key_gets_its_share_of_every_window_while_it_has_ready_tasks(scratch: Scratch) {
    let queue = scratch.open();
    let big = BIG_BACKLOG;
    push_keyed(&queue, "A", big);
    for key in ["B", "C", "D", "E"] {
        push_keyed(&queue, key, 100);
    }
    let history = deliveries(&queue, 1_000, 64);
    assert_eq!(history.len(), 1_000);
    // B to E each have ready tasks until their 100th delivery: the first
    // 500 deliveries are shared by five keys.
    let shared = &history[..500];
    for len in 1..=100 {
        for window in shared.windows(len) {
            let counts = counts(window);
            for key in ["A", "B", "C", "D", "E"] {
                let n = *counts.get(key).unwrap_or(&0);
                assert!(
                    n + 1 >= len / 5 && n <= len.div_ceil(5) + 1,
                    "window of {len}: {key} got {n}"
                );
            }
        }
    }
    let weights = ["A", "B", "C", "D", "E"].map(|key| (key, 1.0)).into();
    assert_within_bound(shared, &weights, 100);
    // Then A alone has ready tasks, and gets every delivery.
    assert!(history[500..].iter().all(|key| key == "A"));
    assert_eq!(queue.count(TaskState::Pending).unwrap(), big as u64 - 600);
}

fn weights_share_deliveries_in_proportion(scratch: Scratch) {
    let queue = scratch.open();
    queue.set_fair_weight("heavy", 2.0).unwrap();
    queue.set_fair_weight("light", 0.5).unwrap();
    assert_eq!(scratch.open().fair_weight("heavy").unwrap(), 2.0);
    assert_eq!(queue.fair_weight("plain").unwrap(), 1.0, "the default");
    for key in ["heavy", "light", "plain"] {
        push_keyed(&queue, key, 400);
    }
    let history = deliveries(&queue, 350, 10);
    let counts = counts(&history);
    // 350 deliveries at weights 2 : 1 : 0.5 are 200 : 100 : 50.
    assert!(counts["heavy"].abs_diff(200) <= 2, "{counts:?}");
    assert!(counts["plain"].abs_diff(100) <= 2, "{counts:?}");
    assert!(counts["light"].abs_diff(50) <= 2, "{counts:?}");
    let weights = [("heavy", 2.0), ("plain", 1.0), ("light", 0.5)].into();
    assert_within_bound(&history, &weights, 60);
}

fn an_idle_key_gives_its_share_to_the_others_and_banks_nothing(scratch: Scratch) {
    let queue = scratch.open();
    push_keyed(&queue, "A", 200);
    push_keyed(&queue, "B", 1);
    let first = deliveries(&queue, 100, 1);
    assert_eq!(counts(&first)["B"], 1, "B had one task");
    assert_eq!(counts(&first)["A"], 99, "A takes the share B left idle");
    // B, idle for 98 deliveries, comes back level with A, not ahead.
    push_keyed(&queue, "B", 50);
    let next = deliveries(&queue, 20, 1);
    let counts = counts(&next);
    assert!(counts["B"] <= 11 && counts["A"] >= 9, "{counts:?}");
}

fn a_key_whose_tasks_were_delayed_banks_nothing_meanwhile(scratch: Scratch) {
    let queue = scratch.open();
    // Long enough for 30 deliveries on a loaded machine.
    let delay = Duration::from_secs(2);
    let mut later = keyed("L");
    later.delay(delay).unwrap();
    let pushed = Instant::now();
    queue.push_batch(&vec![json("L"); 6], &later).unwrap();
    push_keyed(&queue, "A", 100);
    assert_eq!(deliveries(&queue, 30, 1), vec!["A"; 30]);
    thread::sleep(
        (pushed + delay + Duration::from_millis(50)).saturating_duration_since(Instant::now()),
    );
    // L's tasks are now ready: L takes every other turn, not six in a row.
    let next = deliveries(&queue, 6, 1);
    assert_eq!(counts(&next)["L"], 3, "{next:?}");
}

fn priority_orders_the_tasks_inside_a_key_but_not_between_keys(scratch: Scratch) {
    let queue = scratch.open();
    for (payload, priority) in [("A-low", 0), ("A-high", 9), ("A-mid", 5)] {
        let mut options = keyed("A");
        options.priority(priority);
        queue.push(&json(payload), &options).unwrap();
    }
    let mut urgent_b = keyed("B");
    urgent_b.priority(100);
    let urgent: Vec<String> = ["B1", "B2", "B3"].map(json).into();
    queue.push_batch(&urgent, &urgent_b).unwrap();
    let history = deliveries(&queue, 6, 1);
    let of_a: Vec<&str> = history
        .iter()
        .filter(|payload| payload.starts_with('A'))
        .map(String::as_str)
        .collect();
    assert_eq!(of_a, ["A-high", "A-mid", "A-low"]);
    // B's higher priority does not take A's turns: they alternate.
    let keys: Vec<char> = history.iter().map(|p| p.chars().next().unwrap()).collect();
    assert!(
        keys.windows(2).all(|pair| pair[0] != pair[1]),
        "{history:?}"
    );
}

fn a_batch_claim_delivers_what_single_claims_would(scratch: Scratch) {
    let fill = |queue: &Queue| {
        queue.set_fair_weight("B", 3.0).unwrap();
        for (key, n) in [("A", 60), ("B", 60), ("C", 5), ("D", 30)] {
            for i in 0..n {
                let mut options = keyed(key);
                options.priority(i % 3);
                queue.push(&json(&format!("{key}{i}")), &options).unwrap();
            }
        }
    };
    let one_by_one = scratch.open();
    let mut other_queue = OpenOptions::new();
    other_queue.queue("batched").unwrap();
    let batched = scratch.open_with(&other_queue);
    fill(&one_by_one);
    fill(&batched);
    let singles = deliveries(&one_by_one, 155, 1);
    let batches = deliveries(&batched, 155, 7);
    assert_eq!(singles.len(), 155);
    assert_eq!(singles, batches);
}

fn tasks_without_a_key_share_the_empty_key(scratch: Scratch) {
    let queue = scratch.open();
    // Pushed before the queue has a key: they join the empty key.
    queue
        .push_batch(&vec![json("plain"); 10], &PushOptions::new())
        .unwrap();
    push_keyed(&queue, "A", 10);
    queue
        .push_batch(&vec![json("plain"); 10], &PushOptions::new())
        .unwrap();
    let history = deliveries(&queue, 20, 3);
    let counts = counts(&history);
    assert_eq!((counts["plain"], counts["A"]), (10, 10), "{history:?}");
    queue.set_fair_weight("", 3.0).unwrap();
    assert_eq!(queue.fair_weight("").unwrap(), 3.0);
}

fn a_key_whose_tasks_are_delayed_or_leased_gives_its_turns_away(scratch: Scratch) {
    let mut at_once = OpenOptions::new();
    at_once
        .retry_backoff(Duration::ZERO, Duration::ZERO)
        .unwrap();
    let queue = scratch.open_with(&at_once);
    let mut later = keyed("late");
    later.delay(Duration::from_secs(3600)).unwrap();
    queue.push(&json("late"), &later).unwrap();
    push_keyed(&queue, "A", 50);
    push_keyed(&queue, "B", 1);
    let first = pull(&queue).unwrap();
    let second = pull(&queue).unwrap();
    assert_eq!([name(&first), name(&second)], ["A", "B"]);
    assert_eq!(deliveries(&queue, 5, 1), ["A"; 5], "only A has ready tasks");
    // B's one task fails and is retried at once: B is back in line.
    let b = if name(&first) == "B" { first } else { second };
    queue.fail(b.receipt(), "again").unwrap();
    let b = pull_key(&queue, "B", 2);
    // Snoozed, the same.
    queue.snooze(b.receipt(), Duration::ZERO).unwrap();
    let b = pull_key(&queue, "B", 2);
    // Its lease expired, the same: the claim takes it back into B's line.
    queue.fail(b.receipt(), "again").unwrap();
    let b = pull_key_with(&queue, "B", 2, &lease(50));
    thread::sleep(Duration::from_millis(80));
    let again = pull_key(&queue, "B", 2);
    assert_eq!(again.id(), b.id());
    assert!(
        again.last_error().unwrap().contains("expired"),
        "{:?}",
        again.last_error()
    );
    // Delivered, failed, delivered, snoozed (its attempt given back),
    // delivered, failed, delivered with its lease expired, and delivered.
    assert_eq!(again.attempts(), 4);
    // Its lease expired again and taken back by a recovery, not a claim:
    // B is back in line all the same.
    queue.fail(again.receipt(), "again").unwrap();
    let b = pull_key_with(&queue, "B", 2, &lease(50));
    assert_eq!(deliveries(&queue, 2, 1), ["A"; 2], "B has no ready task");
    thread::sleep(Duration::from_millis(80));
    // (An A task delivered on the way, under the same lease, may expire too.)
    assert!(queue.recover().unwrap() >= 1);
    assert_eq!(pull_key(&queue, "B", 2).id(), b.id());
}

/// The task of `key` among the next `within` single deliveries.
fn pull_key(queue: &Queue, key: &str, within: usize) -> tq::Task {
    pull_key_with(queue, key, within, &PullOptions::new())
}

fn pull_key_with(queue: &Queue, key: &str, within: usize, options: &PullOptions) -> tq::Task {
    for _ in 0..within {
        let task = queue.pull(options).unwrap().expect("a ready task");
        if name(&task) == key {
            return task;
        }
    }
    panic!("no task of {key} in {within} deliveries");
}

fn ordered_groups_pause_and_limits_hold_in_a_fair_queue(scratch: Scratch) {
    let queue = scratch.open();
    // A's tasks form an ordered group: one at a time, A's turn passes to B
    // while A's next waits for the one delivered.
    let mut grouped = keyed("A");
    grouped.group("g", 1).unwrap();
    queue.push_batch(&vec![json("A"); 3], &grouped).unwrap();
    push_keyed(&queue, "B", 5);
    assert_eq!(deliveries(&queue, 4, 1), ["A", "B", "B", "B"]);

    queue.pause(Pause::UntilResumed).unwrap();
    assert!(pull(&queue).is_none(), "paused");
    queue.resume().unwrap();
    queue
        .set_rate_limit(Some(RateLimit {
            claims: 1,
            per: Duration::from_secs(3600),
        }))
        .unwrap();
    assert_eq!(deliveries(&queue, 5, 5).len(), 1, "one claim an hour");
    queue.set_rate_limit(None).unwrap();
    queue.set_concurrency_limit(Some(6)).unwrap();
    assert_eq!(deliveries(&queue, 5, 5).len(), 1, "six leased at once");
}

fn a_claim_ends_tasks_past_their_deadline_and_delivers_within(scratch: Scratch) {
    let queue = scratch.open();
    let mut doomed = keyed("A");
    doomed.deadline_after(Duration::from_millis(1)).unwrap();
    queue.push_batch(&vec![json("doomed"); 3], &doomed).unwrap();
    push_keyed(&queue, "A", 2);
    push_keyed(&queue, "B", 2);
    thread::sleep(Duration::from_millis(20));
    let history = deliveries(&queue, 10, 1);
    assert_eq!(counts(&history).get("doomed"), None, "{history:?}");
    assert_eq!(history.len(), 4);
    assert_eq!(queue.count(TaskState::Dead).unwrap(), 3);
}

fn bad_fairness_input_is_refused_and_changes_nothing(scratch: Scratch) {
    let queue = scratch.open();
    let mut options = PushOptions::new();
    assert_eq!(
        options.fair_key("").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        options.fair_key("a\0b").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert!(options
        .fair_key(&"k".repeat(tq::MAX_UNIQUE_KEY_LEN + 1))
        .is_err());
    queue.set_fair_weight("A", 4.0).unwrap();
    for weight in [
        0.0,
        -1.0,
        f64::NAN,
        f64::INFINITY,
        tq::MAX_FAIR_WEIGHT * 2.0,
    ] {
        let err = queue.set_fair_weight("A", weight).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("weight"), "{}", err.message());
    }
    assert_eq!(queue.fair_weight("A").unwrap(), 4.0);
    let from_json = PushOptions::from_json(r#"{"fair_key": "tenant-7"}"#).unwrap();
    assert_eq!(from_json, keyed("tenant-7"));
    assert!(PushOptions::from_json(r#"{"fair_key": 7}"#).is_err());
}

/// With `CLAIMERS` claiming at once, each claim may pass over the keys
/// the others hold (at most one each), so the stated bound widens to
/// |n_i / w_i - n_j / w_j| <= CLAIMERS * (1 / w_i + 1 / w_j), for keys
/// whose weight is at most 1 / CLAIMERS of the backlogged keys' (no key
/// is served by two claims at once: see the guide).
fn concurrent_claims_keep_within_the_bound_times_the_claimers(scratch: Scratch) {
    const CLAIMERS: usize = 3;
    const EACH: usize = 100;
    let queue = scratch.open();
    queue.set_fair_weight("heavy", 2.0).unwrap();
    let keys = ["heavy", "B", "C", "D", "E", "F"];
    for key in keys {
        push_keyed(&queue, key, CLAIMERS * EACH);
    }
    let delivered: Vec<String> = thread::scope(|scope| {
        let claimers: Vec<_> = (0..CLAIMERS)
            .map(|_| {
                scope.spawn(|| {
                    let queue = scratch.open();
                    let mut mine = Vec::new();
                    for _ in 0..EACH {
                        let task = pull(&queue).expect("every key is backlogged");
                        mine.push(name(&task).to_owned());
                        queue.finish(task.receipt()).unwrap();
                    }
                    mine
                })
            })
            .collect();
        claimers
            .into_iter()
            .flat_map(|claimer| claimer.join().unwrap())
            .collect()
    });
    assert_eq!(delivered.len(), CLAIMERS * EACH);
    let counts = counts(&delivered);
    let weights: BTreeMap<&str, f64> = keys
        .map(|key| (key, if key == "heavy" { 2.0 } else { 1.0 }))
        .into();
    for (&i, &w_i) in &weights {
        for (&j, &w_j) in &weights {
            let n_i = *counts.get(i).unwrap_or(&0) as f64;
            let n_j = *counts.get(j).unwrap_or(&0) as f64;
            assert!(
                (n_i / w_i - n_j / w_j).abs() <= CLAIMERS as f64 * (1.0 / w_i + 1.0 / w_j),
                "{i} got {n_i}, {j} got {n_j}: {counts:?}"
            );
        }
    }
}

/// Pushers naming many keys in opposite orders, with keys draining and
/// coming back meanwhile, and claimers at once: no push or claim waits
/// on another in a cycle, and every task is delivered once.
fn pushes_and_claims_at_once_lose_no_task_and_never_deadlock(scratch: Scratch) {
    const ROUNDS: usize = 40;
    const KEYS: usize = 8;
    let pushed_by_each = ROUNDS * KEYS;
    let delivered: Vec<String> = thread::scope(|scope| {
        for pusher in 0..2 {
            let scratch = &scratch;
            scope.spawn(move || {
                let queue = scratch.open();
                for round in 0..ROUNDS {
                    let mut keys: Vec<usize> = (0..KEYS).collect();
                    if pusher == 1 {
                        keys.reverse();
                    }
                    let items: Vec<(String, PushOptions)> = keys
                        .iter()
                        .map(|key| {
                            let mut options = keyed(&format!("k{key}"));
                            if round % 4 == 0 {
                                // One at a time: the path of unique keys.
                                let unique = format!("{pusher}-{round}-{key}");
                                options.unique_key(&unique).unwrap();
                            }
                            (json(&format!("{pusher}-{round}-{key}")), options)
                        })
                        .collect();
                    queue.push_items(&items).unwrap();
                }
            });
        }
        let claimers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    let queue = scratch.open();
                    let mut mine = Vec::new();
                    let mut idle = 0;
                    while idle < 50 {
                        match queue.pull_batch(3, &PullOptions::new()).unwrap() {
                            tasks if tasks.is_empty() => {
                                idle += 1;
                                thread::sleep(Duration::from_millis(10));
                            }
                            tasks => {
                                idle = 0;
                                for task in tasks {
                                    mine.push(name(&task).to_owned());
                                    queue.finish(task.receipt()).unwrap();
                                }
                            }
                        }
                    }
                    mine
                })
            })
            .collect();
        claimers
            .into_iter()
            .flat_map(|claimer| claimer.join().unwrap())
            .collect()
    });
    let mut sorted = delivered.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), delivered.len(), "each task delivered once");
    assert_eq!(delivered.len(), 2 * pushed_by_each, "every task delivered");
    assert_eq!(scratch.open().count(TaskState::Pending).unwrap(), 0);
}

fn a_dead_task_retried_after_its_key_left_the_line_is_delivered(scratch: Scratch) {
    let queue = scratch.open();
    let mut once = keyed("A");
    once.max_attempts(1).unwrap();
    queue.push(&json("A"), &once).unwrap();
    push_keyed(&queue, "B", 3);
    let first = pull(&queue).unwrap();
    assert_eq!(name(&first), "A");
    queue.fail(first.receipt(), "broken").unwrap();
    // A has no task left but a dead one: the claims pass it over.
    assert_eq!(deliveries(&queue, 5, 1), ["B"; 3]);
    queue.retry_dead(first.id()).unwrap();
    let again = pull(&queue).expect("the retried task is delivered");
    assert_eq!(again.id(), first.id());
}

on_both_backends! {
    every_key_gets_its_share_of_every_window_while_it_has_ready_tasks,
    weights_share_deliveries_in_proportion,
    an_idle_key_gives_its_share_to_the_others_and_banks_nothing,
    a_key_whose_tasks_were_delayed_banks_nothing_meanwhile,
    priority_orders_the_tasks_inside_a_key_but_not_between_keys,
    a_batch_claim_delivers_what_single_claims_would,
    tasks_without_a_key_share_the_empty_key,
    a_key_whose_tasks_are_delayed_or_leased_gives_its_turns_away,
    ordered_groups_pause_and_limits_hold_in_a_fair_queue,
    a_claim_ends_tasks_past_their_deadline_and_delivers_within,
    bad_fairness_input_is_refused_and_changes_nothing,
    concurrent_claims_keep_within_the_bound_times_the_claimers,
    pushes_and_claims_at_once_lose_no_task_and_never_deadlock,
    a_dead_task_retried_after_its_key_left_the_line_is_delivered,
}
