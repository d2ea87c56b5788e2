//! Scenario 13: cancellation and the rate limit. A backlog on a queue
//! limited to 8 claims in any 100 ms is worked by processes killed at
//! random and replaced, then drained (see `work_killed_then_drain`; here
//! with leases of 20 to 80 ms, work of up to 80 ms, two in five
//! deliveries worked in steps with an extend between them, and every
//! worker declaring the queue's rate at start with the rate in force, as
//! each worker of a deployment does: that must grant no fresh claims),
//! while a thread of the driver cancels random tasks, some pending, some
//! leased, each cancel logged with its answer. Besides everything the checker
//! checks (exactly-once accounting of the tasks not cancelled included),
//! the histories show:
//! - no task delivered by a pull invoked after a cancel of it returned
//!   (removed or requested);
//! - no finish, fail or extend of a task accepted after its cancel
//!   returned, no cancelled task ever done, and the holder of a task whose
//!   cancellation was requested told so (`Cancelled`) by its next call;
//! - no more claims than the rate allows surely inside one window of its
//!   period;
//! - after the drain (whose workers do not recover), no task left with
//!   its cancellation waiting: a task cancelled in the hands of a worker
//!   that was then killed ends, once its lease ran out, at the next claim.
//!
//! Why the rate check is sound. tq defines the rate by slots
//! (`Queue::set_rate_limit`): the queue has one slot per claim allowed; a
//! claim at time `t` takes a slot last used at `t - period` or before and
//! marks it used at `t`, in the claim's transaction. So two claims of one
//! slot are a period apart or more, and with `claims` slots no window
//! `[s, s + period)` holds more than `claims` claims. A claim's `t` is a
//! whole millisecond of the host's wall clock read after its pull's invoke
//! record and before its completion record (by the pulling process on
//! SQLite; by the server, on this host, for PostgreSQL), and the histories
//! use that clock too: `t` lies between the invoke's millisecond, the
//! earliest instant the claim can have happened, and the completion's.
//! The checker opens a window at each pull's invoke and counts the claims
//! whose pulls were invoked in it and completed before it ended: each of
//! those happened inside it, whatever the scheduling, so more of them than
//! the rate allows is a claim the slots should have refused. Any set of
//! claims that surely shares one window is found this way (a window
//! opened at the earliest invoke among them holds them all). Pulls of
//! unknown outcome (their process killed inside them) may have claimed
//! too; leaving them out only counts fewer claims, never more. The check
//! misses violations hidden by a pull's own latency, so the period is long
//! beside a pull's time: the run asserts that some window surely held as
//! many claims as the rate allows, proof that the bound was reached.
//!
//! Also on PostgreSQL (`..._on_postgres`), where the claims of a
//! rate-limited queue take its settings' lock one after another.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tq::{Durability, OpenOptions, Queue, RateLimit, TaskState};

use super::checker::{verify_run, Expect};
use super::client::{self, Client};
use super::db::Target;
use super::harness::{sleep_ms, work_killed_then_drain, Dir, Rng, Settings, Turnover};
use super::history::History;

/// The queue's rate: 80 claims a second, fewer than the workers would
/// take, in windows long beside a pull's time.
const RATE: RateLimit = RateLimit {
    claims: 8,
    per: Duration::from_millis(100),
};

#[test]
#[ignore = "torture test: make test-torture"]
fn cancelled_tasks_are_never_delivered_and_claims_never_pass_the_rate_with_workers_killed() {
    let dir = Dir::new();
    control(&dir, &Target::File(dir.file("queue.db")), "control");
}

#[test]
#[ignore = "torture test on PostgreSQL: make test-postgres"]
fn cancelled_tasks_are_never_delivered_and_claims_never_pass_the_rate_with_workers_killed_on_postgres(
) {
    if let Some(target) = Target::postgres(
        "cancelled_tasks_are_never_delivered_and_claims_never_pass_the_rate_with_workers_killed_on_postgres",
        "torture_control",
    ) {
        control(&Dir::new(), &target, "control-postgres");
    }
}

fn control(dir: &Dir, target: &Target, scenario: &str) {
    let settings = Settings::new(scenario);
    let mut rng = settings.rng();
    let history_dir = dir.sub("history");
    let driver = History::create(&history_dir, "driver");
    let phase = settings.duration(Duration::from_secs(10));
    // About what the rate lets through in the phase, less the tasks
    // cancelled and the claims spent on retries.
    let size = phase.as_secs() as usize * 60;

    let queue = Queue::open(target.db(), &target.options(&OpenOptions::new())).expect("open");
    queue.set_rate_limit(Some(RATE)).expect("set the rate");
    let ids = preload(target, &history_dir, size);

    let stop = AtomicBool::new(false);
    let seed = rng.next();
    let Turnover {
        started,
        killed,
        drain_rounds,
    } = std::thread::scope(|scope| {
        let canceller =
            scope.spawn(|| cancel_at_random(target, &history_dir, &ids, seed, &stop, CANCELS));
        let turnover = work_killed_then_drain(
            &queue,
            target,
            &history_dir,
            &driver,
            &mut rng,
            phase,
            &vec![
                ("lease_min", "20".into()),
                ("lease_max", "80".into()),
                ("work_max", "80".into()),
                ("heartbeat", "40".into()),
                ("rate", format!("{}:{}", RATE.claims, RATE.per.as_millis())),
            ],
        );
        stop.store(true, Ordering::Relaxed);
        canceller.join().expect("the canceller");
        turnover
    });
    assert_eq!(
        queue.count(TaskState::Cancelled).unwrap(),
        0,
        "cancelled tasks kept on a handle without history"
    );
    drop(queue);
    println!(
        "[{scenario}] {size} tasks, {started} worker processes, {killed} killed by the driver, \
         {drain_rounds} drain rounds"
    );

    let expect = Expect {
        drained: true,
        rate: Some(RATE),
        ..Expect::default()
    };
    let (histories, report) = verify_run(target, &history_dir, &expect, scenario);
    let s = &report.stats;
    let told_at_extend = histories
        .ops
        .iter()
        .filter(|op| op.op == "extend" && op.failed_with("Cancelled"))
        .count();
    println!("[{scenario}] {told_at_extend} holders told Cancelled by an extend");
    assert!(killed > 0, "{scenario}: no worker was killed");
    assert!(
        s.cancels_removed > 0
            && s.cancels_requested > 0
            && s.holders_told > 0
            && told_at_extend > 0,
        "{scenario}: the cancels did not reach both pending and held tasks, or no holder was \
         told (by an extend among others): {report}"
    );
    assert_eq!(
        s.most_in_window, RATE.claims as usize,
        "{scenario}: no window surely held as many claims as the rate allows: the bound was \
         not exercised"
    );
}

/// Pushes the backlog through a logged handle, the ids in push order.
fn preload(target: &Target, history_dir: &std::path::Path, size: usize) -> Vec<i64> {
    let history = History::create(history_dir, "preload");
    let mut options = OpenOptions::new();
    options.durability(Durability::Normal);
    let queue = client::open(&history, 0, target.db(), &target.options(&options)).expect("open");
    let client = Client {
        queue: &queue,
        history: &history,
        thread: 0,
    };
    (0..size)
        .map(|n| client.push(&format!("control-{n}"), 0).expect("push"))
        .collect()
}

/// How often [`cancel_at_random`] cancels, and what.
pub struct Cancels {
    /// The pause between two cancels, in ms: from, to.
    pub every_ms: (u64, u64),
    /// The share of cancels of a task of the backlog at random; the
    /// others cancel a task the queue lists as leased.
    pub any: f64,
    /// Of the cancels of a leased task, the share that picks the last
    /// claimed (most often held by a live worker); the others pick one at
    /// random (often held by a killed one).
    pub last: f64,
}

/// This scenario's: every 10 to 60 ms, half of them of leased tasks.
const CANCELS: Cancels = Cancels {
    every_ms: (10, 60),
    any: 0.5,
    last: 0.7,
};

/// Until `stop`, cancels a task every `cancels.every_ms`: a share of the
/// time one of the backlog's at random (pending, or held, or over
/// already), else one the queue lists as leased (held, or its holder
/// killed), most often the last claimed.
pub fn cancel_at_random(
    target: &Target,
    history_dir: &std::path::Path,
    ids: &[i64],
    seed: u64,
    stop: &AtomicBool,
    cancels: Cancels,
) {
    let history = History::create(history_dir, "canceller");
    let queue = client::open(
        &history,
        0,
        target.db(),
        &target.options(&OpenOptions::new()),
    )
    .expect("open");
    let client = Client {
        queue: &queue,
        history: &history,
        thread: 0,
    };
    let mut rng = Rng::new(seed);
    while !stop.load(Ordering::Relaxed) {
        let id = if rng.chance(cancels.any) {
            Some(ids[rng.range(0, ids.len() as u64 - 1) as usize])
        } else {
            let leased = queue.list(TaskState::Leased, 0, 100).expect("list");
            // The backlog is claimed in push order: the last leased is most
            // often held by a live worker, the others by killed ones.
            let pick = if rng.chance(cancels.last) {
                leased.len().saturating_sub(1)
            } else {
                rng.range(0, leased.len().max(1) as u64 - 1) as usize
            };
            leased.get(pick).map(|task| task.id())
        };
        if let Some(id) = id {
            let _ = client.cancel(id);
        }
        sleep_ms(rng.range(cancels.every_ms.0, cancels.every_ms.1));
    }
}
