//! Scenario 11: a graph of tasks drains with workers killed. The driver
//! pushes a graph in one call (about 1,000 tasks in CI, 10,000 in long
//! mode): roots, chains and fan-outs (a task waiting for one earlier
//! task), and fan-ins (a task waiting for up to 20). Three worker
//! processes of two threads pull with short leases, fail a tenth of their
//! deliveries (retried) and finish the rest, while the driver kills them
//! at random and starts others; then drain workers empty the queue.
//!
//! From the histories: no delivery of a task returned before a finish of
//! each task it waits for was invoked (the finish that committed, logged
//! or not), so a task never starts before its parents finished; and every
//! task was finished, none is left pending, leased, dead or cancelled.
//!
//! Also on PostgreSQL (`..._on_postgres`), where a task's end reaches the
//! tasks waiting for it through a trigger.

use std::collections::HashMap;
use std::time::Duration;

use tq::{OpenOptions, PushOptions, Queue, TaskState};

use super::client;
use super::db::Target;
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
    let items: Vec<(String, PushOptions)> = shape
        .iter()
        .enumerate()
        .map(|(index, parents)| {
            let mut options = PushOptions::new();
            for &parent in parents {
                options.after_item(parent).expect("an earlier item");
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

    let Turnover {
        started,
        killed,
        drain_rounds: round,
    } = work_killed_then_drain(
        &queue,
        target,
        &history_dir,
        &driver,
        &mut rng,
        phase,
        &Vec::new(),
    );
    for state in [TaskState::Dead, TaskState::Cancelled, TaskState::Done] {
        assert_eq!(queue.count(state).unwrap(), 0, "{state:?} tasks left");
    }
    drop(queue);

    let histories = Histories::read(&history_dir);
    // When each finish that may have committed was invoked, per task.
    let mut finishes: HashMap<i64, Vec<i64>> = HashMap::new();
    for op in &histories.ops {
        if op.op == "finish" && !matches!(op.outcome, Outcome::Fail(_)) {
            let id = op.num("id").expect("a finish names its task");
            finishes.entry(id).or_default().push(op.invoked);
        }
    }
    let mut checked = 0;
    for delivery in histories.delivered() {
        let id = delivery.num("id").expect("a delivered id");
        let returned = delivery.completed.expect("a logged delivery returned");
        for parent in &parents_of[&id] {
            let finished_before = finishes
                .get(parent)
                .is_some_and(|times| times.iter().any(|&invoked| invoked < returned));
            assert!(
                finished_before,
                "task {id} was delivered (attempt {:?}, by {}) before any finish of task {parent}, \
                 which it waits for",
                delivery.num("attempt"),
                delivery.process
            );
            checked += 1;
        }
    }
    for id in &ids {
        assert!(finishes.contains_key(id), "task {id} was never finished");
    }
    println!(
        "[{scenario}] {size} tasks, {started} worker processes, {killed} killed by the driver, \
         {round} drain rounds; {checked} deliveries of waiting tasks checked against their parents' finishes"
    );
    assert!(killed > 0 && checked > 0);
}
