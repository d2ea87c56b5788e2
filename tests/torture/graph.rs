//! Scenario 11: a graph of tasks drains with workers killed. The driver
//! pushes a graph in one call (about 1,000 tasks in CI, 10,000 in long
//! mode): roots, chains and fan-outs (a task waiting for one earlier
//! task), and fan-ins (a task waiting for up to 20); half the tasks that
//! wait are cancelled when a task they wait for is (tq's default), the
//! others run anyway. Three worker processes of two threads pull with
//! short leases, fail a tenth of their deliveries (retried) and finish
//! the rest, while the driver kills them at random and starts others, and
//! a thread of the driver cancels a task every 20 to 100 ms, most often
//! one the queue lists as leased (held, or its holder killed); then drain
//! workers, which do not recover, empty the queue.
//!
//! From the histories, each task's fate follows from the cancels answered:
//! a task is cancelled when a cancel of it was answered, or a task it
//! waits for was cancelled and it is not to run anyway; each other task
//! was finished, and no cancelled one. No delivery of a task returned
//! before a finish of each task it waits for was invoked (the finish that
//! committed, logged or not), or, for a task that runs anyway, before
//! that task's cancel was invoked; a task cancelled through a task it
//! waits for was never delivered. None is left pending, leased, with its
//! cancellation waiting, dead or cancelled: a task cancelled in a killed
//! worker's hands ends once its lease ran out, at the next claim, and
//! releases or cancels the tasks waiting for it.
//!
//! Also on PostgreSQL (`..._on_postgres`), where a task's end reaches the
//! tasks waiting for it through a trigger.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tq::{OpenOptions, ParentFailure, PushOptions, Queue, TaskState};

use super::checker::assert_drained;
use super::client;
use super::control::{cancel_at_random, Cancels};
use super::db::Target;
use super::groups::{cancels_of, finishes_acknowledged};
use super::harness::{work_killed_then_drain, Dir, Rng, Settings, Turnover};
use super::history::{Histories, History, Outcome};

#[test]
#[ignore = "torture test: make test-torture"]
fn a_graph_drains_with_workers_killed_and_no_task_starts_before_its_parents_finish() {
    let dir = Dir::new();
    graph(&dir, &Target::File(dir.file("queue.db")), "graph");
}

#[test]
#[ignore = "torture test on PostgreSQL: make test-postgres"]
fn a_graph_drains_with_workers_killed_and_no_task_starts_before_its_parents_finish_on_postgres() {
    if let Some(target) = Target::postgres(
        "a_graph_drains_with_workers_killed_and_no_task_starts_before_its_parents_finish_on_postgres",
        "torture_graph",
    ) {
        graph(&Dir::new(), &target, "graph-postgres");
    }
}

/// The tasks each item waits for, by index: a graph with roots, chains,
/// fan-outs and fan-ins, every edge pointing to an earlier item.
fn shape(size: usize, rng: &mut Rng) -> Vec<Vec<usize>> {
    (0..size)
        .map(|index| {
            if index < 5 || rng.chance(0.05) {
                return Vec::new();
            }
            let fan_in = if rng.chance(0.1) { rng.range(2, 20) } else { 1 };
            // Mostly recent tasks, so that the graph is deep as well as wide.
            let window = index.min(50) as u64;
            let mut parents: Vec<usize> = (0..fan_in)
                .map(|_| index - rng.range(1, window) as usize)
                .collect();
            parents.sort_unstable();
            parents.dedup();
            parents
        })
        .collect()
}

fn graph(dir: &Dir, target: &Target, scenario: &str) {
    let settings = Settings::new(scenario);
    let mut rng = settings.rng();
    let history_dir = dir.sub("history");
    let driver = History::create(&history_dir, "driver");
    let size = if settings.is_long() { 10_000 } else { 1_000 };
    let phase = settings.duration(Duration::from_secs(10));

    let mut options = OpenOptions::new();
    options.max_attempts(1000).expect("a valid maximum");
    let queue = Queue::open(target.db(), &target.options(&options)).expect("open");
    let shape = shape(size, &mut rng);
    let run_anyway: Vec<bool> = shape.iter().map(|_| rng.chance(0.5)).collect();
    let items: Vec<(String, PushOptions)> = shape
        .iter()
        .enumerate()
        .map(|(index, parents)| {
            let mut options = PushOptions::new();
            for &parent in parents {
                options.after_item(parent).expect("an earlier item");
            }
            if run_anyway[index] {
                options.on_parent_failure(ParentFailure::RunAnyway);
            }
            (client::payload(&format!("g{index}"), 0), options)
        })
        .collect();
    let ids: Vec<i64> = queue
        .push_items(&items)
        .expect("push the graph")
        .into_iter()
        .map(|pushed| pushed.id())
        .collect();
    let parents_of: HashMap<i64, Vec<i64>> = shape
        .iter()
        .enumerate()
        .map(|(index, parents)| (ids[index], parents.iter().map(|&p| ids[p]).collect()))
        .collect();

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
    let (cancels, answered) = cancels_of(&histories);
    // Each task's fate, in push order (parents first): cancelled or not,
    // and from when (the earliest invoke of a cancel that ended it, its
    // own or one of a task it waits for and does not run anyway after).
    let mut cancelled_from: HashMap<i64, i64> = HashMap::new();
    for (index, parents) in shape.iter().enumerate() {
        let id = ids[index];
        let own = answered
            .contains_key(&id)
            .then(|| cancels[&id].iter().copied().min().expect("a cancel"));
        let through = (!run_anyway[index])
            .then(|| {
                parents
                    .iter()
                    .filter_map(|&p| cancelled_from.get(&ids[p]).copied())
                    .min()
            })
            .flatten();
        if let Some(from) = own.into_iter().chain(through).min() {
            cancelled_from.insert(id, from);
        }
    }
    // When each finish that may have committed was invoked, per task.
    let mut finishes: HashMap<i64, Vec<i64>> = HashMap::new();
    for op in &histories.ops {
        if op.op == "finish" && !matches!(op.outcome, Outcome::Fail(_)) {
            let id = op.num("id").expect("a finish names its task");
            finishes.entry(id).or_default().push(op.invoked);
        }
    }
    let index_of: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, &id)| (id, i)).collect();
    let mut checked = 0;
    for delivery in histories.delivered() {
        let id = delivery.num("id").expect("a delivered id");
        let returned = delivery.completed.expect("a logged delivery returned");
        for parent in &parents_of[&id] {
            let finished_before = finishes
                .get(parent)
                .is_some_and(|times| times.iter().any(|&invoked| invoked < returned));
            let ended_before = finished_before
                || (run_anyway[index_of[&id]]
                    && cancelled_from.get(parent).is_some_and(|&at| at < returned));
            assert!(
                ended_before,
                "task {id} was delivered (attempt {:?}, by {}) before any finish{} of task {parent}, \
                 which it waits for",
                delivery.num("attempt"),
                delivery.process,
                if run_anyway[index_of[&id]] { " or cancel" } else { "" }
            );
            checked += 1;
        }
        if !answered.contains_key(&id) && cancelled_from.contains_key(&id) {
            panic!(
                "task {id} was delivered (attempt {:?}, by {}), though a task it waits for was \
                 cancelled and it is cancelled then",
                delivery.num("attempt"),
                delivery.process
            );
        }
    }
    for id in &ids {
        match cancelled_from.get(id) {
            Some(_) => assert!(
                !finishes_acknowledged(&histories, *id),
                "task {id} was cancelled ({}), yet a finish of it was acknowledged",
                answered
                    .get(id)
                    .map_or("through a task it waits for", String::as_str)
            ),
            None => assert!(
                finishes.contains_key(id),
                "task {id} was never finished, and neither it nor a task it waits for (without \
                 running anyway) was cancelled"
            ),
        }
    }
    let requested = answered.values().filter(|a| *a == "requested").count();
    println!(
        "[{scenario}] {size} tasks, {started} worker processes, {killed} killed by the driver, \
         {round} drain rounds; {} tasks cancelled, {} of them directly ({requested} held); \
         {checked} deliveries of waiting tasks checked against their parents' ends",
        cancelled_from.len(),
        answered.len()
    );
    assert!(killed > 0 && checked > 0 && requested > 0);
}
