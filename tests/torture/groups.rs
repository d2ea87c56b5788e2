//! Scenario 12: ordered groups drain with workers killed. The driver
//! pushes tasks to 30 groups (about 1,500 tasks in CI, 15,000 in long
//! mode), in calls of 100 items, each group delivering 1, 2 or 3 of its
//! tasks at once. Three worker processes of two threads pull with short
//! leases, fail a tenth of their deliveries (retried) and finish the rest,
//! while the driver kills them at random and starts others, and a thread
//! of the driver cancels a task every 20 to 100 ms, most often one the
//! queue lists as leased (held, or its holder killed); then drain workers,
//! which do not recover, empty the queue.
//!
//! From the histories: no task was delivered before a finish of the task
//! K places before it in its group was invoked, or a cancel of it (so a
//! group of K = 1 is delivered in push order); never more than K
//! deliveries of one group surely held at once (from a delivery's return
//! to the invocation of its finish or fail that succeeded); every task
//! was finished but those whose cancel was answered, none of which was;
//! and none is left, pending, held or with its cancellation waiting: a
//! task cancelled in a killed worker's hands ends once its lease ran out,
//! at the next claim, and the rest of its group runs.
//!
//! Also on PostgreSQL (`..._on_postgres`), where pushes to one group are
//! serialised by an advisory lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tq::{OpenOptions, PushOptions, Queue, TaskState};

use super::checker::assert_drained;
use super::client;
use super::control::{cancel_at_random, Cancels};
use super::db::Target;
use super::harness::{work_killed_then_drain, Dir, Settings, Turnover};
use super::history::{Histories, History, Outcome};

#[test]
#[ignore = "torture test: make test-torture"]
fn groups_drain_with_workers_killed_never_more_than_k_at_once_in_push_order() {
    let dir = Dir::new();
    groups(&dir, &Target::File(dir.file("queue.db")), "groups");
}

#[test]
#[ignore = "torture test on PostgreSQL: make test-postgres"]
fn groups_drain_with_workers_killed_never_more_than_k_at_once_in_push_order_on_postgres() {
    if let Some(target) = Target::postgres(
        "groups_drain_with_workers_killed_never_more_than_k_at_once_in_push_order_on_postgres",
        "torture_groups",
    ) {
        groups(&Dir::new(), &target, "groups-postgres");
    }
}

const GROUPS: usize = 30;

/// How many tasks of group `group` are delivered at once.
fn at_once(group: usize) -> u32 {
    group as u32 % 3 + 1
}

fn groups(dir: &Dir, target: &Target, scenario: &str) {
    let settings = Settings::new(scenario);
    let mut rng = settings.rng();
    let history_dir = dir.sub("history");
    let driver = History::create(&history_dir, "driver");
    let size = if settings.is_long() { 15_000 } else { 1_500 };
    let phase = settings.duration(Duration::from_secs(10));

    let mut options = OpenOptions::new();
    options.max_attempts(1000).expect("a valid maximum");
    let queue = Queue::open(target.db(), &target.options(&options)).expect("open");
    let group_of: Vec<usize> = (0..size)
        .map(|_| rng.range(0, GROUPS as u64 - 1) as usize)
        .collect();
    let mut ids = Vec::with_capacity(size);
    for (call, chunk) in group_of.chunks(100).enumerate() {
        let items: Vec<(String, PushOptions)> = chunk
            .iter()
            .enumerate()
            .map(|(index, &group)| {
                let mut options = PushOptions::new();
                options
                    .group(&format!("group {group}"), at_once(group))
                    .expect("a valid group");
                (client::payload(&format!("c{call}i{index}"), 0), options)
            })
            .collect();
        let pushed = queue.push_items(&items).expect("push to the groups");
        ids.extend(pushed.into_iter().map(|pushed| pushed.id()));
    }
    // Every task was unfinished when the next ones were pushed: each
    // waits for the task K places before it in its group.
    let mut members: Vec<Vec<i64>> = vec![Vec::new(); GROUPS];
    let mut group_of_id = HashMap::new();
    let mut predecessor = HashMap::new();
    for (index, &group) in group_of.iter().enumerate() {
        let k = at_once(group) as usize;
        let members = &mut members[group];
        if members.len() >= k {
            predecessor.insert(ids[index], members[members.len() - k]);
        }
        members.push(ids[index]);
        group_of_id.insert(ids[index], group);
    }

    let stop = AtomicBool::new(false);
    let seed = rng.next();
    let Turnover {
        started,
        killed,
        drain_rounds: round,
    } = std::thread::scope(|scope| {
        let canceller = scope.spawn(|| {
            let cancels = Cancels {
                every_ms: (20, 100),
                any: 0.1,
                last: 0.3,
            };
            cancel_at_random(target, &history_dir, &ids, seed, &stop, cancels)
        });
        let turnover = work_killed_then_drain(
            &queue,
            target,
            &history_dir,
            &driver,
            &mut rng,
            phase,
            &Vec::new(),
        );
        stop.store(true, Ordering::Relaxed);
        canceller.join().expect("the canceller");
        turnover
    });
    assert_drained(&target.rows(), scenario);
    for state in [TaskState::Dead, TaskState::Cancelled, TaskState::Done] {
        assert_eq!(queue.count(state).unwrap(), 0, "{state:?} tasks left");
    }
    drop(queue);

    let histories = Histories::read(&history_dir);
    // When each cancel that may have taken effect was invoked, per task,
    // and the tasks whose cancel was answered (removed or requested).
    let (cancels, cancelled) = cancels_of(&histories);
    // When each finish that may have committed was invoked, per task.
    let mut finishes: HashMap<i64, Vec<i64>> = HashMap::new();
    // When each delivery, by task and attempt, was surely ended by its
    // holder: the invocation of its finish or fail that succeeded.
    let mut ended: HashMap<(i64, i64), i64> = HashMap::new();
    for op in &histories.ops {
        let id = op.num("id");
        if op.op == "finish" && !matches!(op.outcome, Outcome::Fail(_)) {
            finishes
                .entry(id.expect("a finish names its task"))
                .or_default()
                .push(op.invoked);
        }
        if (op.op == "finish" || op.op == "fail") && matches!(op.outcome, Outcome::Ok) {
            let attempt = op.num("attempt").expect("a delivery's attempt");
            ended.insert((id.expect("an id"), attempt), op.invoked);
        }
    }
    let mut checked = 0;
    // Per group, the times a delivery surely held began (+1) and ended (-1).
    let mut held: Vec<Vec<(i64, i32)>> = vec![Vec::new(); GROUPS];
    for delivery in histories.delivered() {
        let id = delivery.num("id").expect("a delivered id");
        let attempt = delivery.num("attempt").expect("a delivered attempt");
        let returned = delivery.completed.expect("a logged delivery returned");
        if let Some(parent) = predecessor.get(&id) {
            let before = |times: Option<&Vec<i64>>| {
                times.is_some_and(|times| times.iter().any(|&invoked| invoked < returned))
            };
            assert!(
                before(finishes.get(parent)) || before(cancels.get(parent)),
                "task {id} of group {} was delivered (attempt {attempt}, by {}) before any \
                 finish or cancel of task {parent}, {} places before it",
                group_of_id[&id],
                delivery.process,
                at_once(group_of_id[&id])
            );
            checked += 1;
        }
        if let Some(&end) = ended.get(&(id, attempt)) {
            let group = group_of_id[&id];
            held[group].push((returned, 1));
            held[group].push((end, -1));
        }
    }
    let mut most_held = 0;
    for (group, mut events) in held.into_iter().enumerate() {
        // An end before a start at the same instant: the intervals are open.
        events.sort_unstable();
        let mut now_held = 0;
        for (at, change) in events {
            now_held += change;
            assert!(
                now_held <= at_once(group) as i32,
                "{now_held} deliveries of group {group} held at once at {at}, more than {}",
                at_once(group)
            );
            most_held = most_held.max(now_held);
        }
    }
    for id in &ids {
        let answer = cancelled.get(id);
        assert!(
            finishes.contains_key(id) || answer.is_some(),
            "task {id} was never finished nor cancelled"
        );
        if let Some(answer) = answer {
            assert!(
                !finishes_acknowledged(&histories, *id),
                "task {id} was cancelled ({answer}), yet a finish of it was acknowledged"
            );
        }
    }
    let requested = cancelled
        .values()
        .filter(|answer| *answer == "requested")
        .count();
    println!(
        "[{scenario}] {size} tasks in {GROUPS} groups, {started} worker processes, {killed} killed \
         by the driver, {round} drain rounds; {} tasks cancelled ({requested} held); {checked} \
         deliveries checked against their predecessors' finishes, at most {most_held} of one \
         group held at once",
        cancelled.len()
    );
    assert!(killed > 0 && checked > 0 && most_held > 1 && requested > 0);
}

/// When each cancel that may have taken effect was invoked, per task; and
/// the answer of the first cancel answered, per task cancelled.
pub fn cancels_of(histories: &Histories) -> (HashMap<i64, Vec<i64>>, HashMap<i64, String>) {
    let (mut invoked, mut answered) = (HashMap::new(), HashMap::new());
    for op in histories.ops.iter().filter(|op| op.op == "cancel") {
        let id = op.num("id").expect("a cancel names its task");
        if !matches!(op.outcome, Outcome::Fail(_)) {
            invoked.entry(id).or_insert_with(Vec::new).push(op.invoked);
        }
        if let Some(answer) = op.get("cancelled").filter(|_| op.is_ok()) {
            answered.entry(id).or_insert_with(|| answer.to_owned());
        }
    }
    (invoked, answered)
}

/// Whether a finish of task `id` was acknowledged.
pub fn finishes_acknowledged(histories: &Histories, id: i64) -> bool {
    histories
        .ops
        .iter()
        .any(|op| op.op == "finish" && op.is_ok() && op.num("id") == Some(id))
}
