//! Scenario 2: workers killed. A preloaded backlog and a poison task (it
//! kills the worker that takes it, on every delivery), pushed through a
//! handle whose queue gives a task 4 attempts; three worker processes of
//! two threads pull with short leases, fail a tenth of their tasks
//! (retried after a short back-off) and finish the rest, a third of them
//! with `finish_and_pull`; the driver kills them at random and starts
//! others, half of which recover at start. Each worker process also runs
//! two churn threads (roles.rs, `churn`): one pushes a task of high
//! priority, pulls it and finishes it, deleting the newest task over and
//! over; the other pushes pairs of items whose second waits for a task
//! that does not exist, calls that fail after storing their first item;
//! in one process's group commit they often commit together, and no id
//! may ever be given twice. Then drain workers empty the
//! queue. Nothing is lost, no task ends twice, no lease overlaps a live
//! holder's, and the poison task comes back after each crash until its
//! fourth delivery, after which tq makes it dead (through recover, or the
//! expiry of that last lease), while every other task finishes.
//!
//! The second test isolates how a dead worker's tasks come back: by their
//! lease's expiry when nobody recovers, and at once through `recover`.
//!
//! Both also run on PostgreSQL (`..._on_postgres`), each worker process a
//! client of its own; there a dead holder is one whose session ended.

use std::time::{Duration, Instant};

use tq::{OpenOptions, Queue, TaskState};

use super::checker::{verify_run, Expect};
use super::client::{self, Client};
use super::db::{self, Target};
use super::harness::{now_ns, repeat, sleep_ms, spawn, wait_until, Dir, Proc, Settings};
use super::history::{Histories, History, Operation, Outcome};

/// Tasks per 15 s of the chaos phase: about what the workers finish in
/// that time, so the phase ends near the end of the backlog.
const BACKLOG_PER_15_S: usize = 3000;

/// The attempts of the handle that pushes the poison task.
const POISON_ATTEMPTS: u32 = 4;

#[test]
#[ignore = "torture test: make test-torture"]
fn workers_killed_and_restarted_finish_every_task_exactly_once() {
    let dir = Dir::new();
    workers_killed(&dir, &Target::File(dir.file("queue.db")), "workers");
}

#[test]
#[ignore = "torture test on PostgreSQL: make test-postgres"]
fn workers_killed_and_restarted_finish_every_task_exactly_once_on_postgres() {
    if let Some(target) = Target::postgres(
        "workers_killed_and_restarted_finish_every_task_exactly_once_on_postgres",
        "torture_workers",
    ) {
        workers_killed(&Dir::new(), &target, "workers-postgres");
    }
}

fn workers_killed(dir: &Dir, target: &Target, scenario: &str) {
    let settings = Settings::new(scenario);
    let mut rng = settings.rng();
    let history_dir = dir.sub("history");
    let driver = History::create(&history_dir, "driver");
    let phase = settings.duration(Duration::from_secs(15));
    let deadline = now_ns() + phase.as_nanos() as i64 + 120_000_000_000;
    let backlog = BACKLOG_PER_15_S * (phase.as_secs() as usize / 15).max(1);
    preload(target, &history_dir, backlog, &mut rng);

    let monitor = Queue::open(target.db(), &target.options(&OpenOptions::new())).expect("open");
    let mut slots: Vec<Option<(Proc, String, Instant)>> = (0..3).map(|_| None).collect();
    let (mut started, mut killed) = (0, 0);
    let begin = Instant::now();
    while begin.elapsed() < phase && monitor.count(TaskState::Pending).unwrap() > 20 {
        for slot in &mut slots {
            if let Some((proc, label, kill_at)) = slot {
                if proc.try_wait().is_some() {
                    *slot = None; // the poison task killed it
                } else if Instant::now() >= *kill_at {
                    driver.info("kill", &format!("target={label}"));
                    proc.kill();
                    killed += 1;
                    *slot = None;
                }
            }
            if slot.is_none() {
                let label = format!("w{started}");
                started += 1;
                let mut args = target.child_args(&history_dir, &label, rng.next(), deadline);
                args.extend([
                    ("threads", "2".into()),
                    ("shared", rng.range(0, 1).to_string()),
                    ("lease_min", "50".into()),
                    ("lease_max", "400".into()),
                    ("work_min", "5".into()),
                    ("work_max", "40".into()),
                    ("recover", rng.range(0, 1).to_string()),
                    ("fail", "10".into()),
                    ("finish_pull", "30".into()),
                    ("backoff", "5:50".into()),
                    ("churn", "2".into()),
                ]);
                let life = Duration::from_millis(rng.range(50, 800));
                *slot = Some((spawn("worker", &args), label, Instant::now() + life));
            }
        }
        sleep_ms(2);
    }
    for (proc, label, _) in slots.iter_mut().flatten() {
        driver.info("kill", &format!("target={label}"));
        proc.kill();
        killed += 1;
    }
    drop(monitor);

    // Drain: workers that recover at start until one ends idle; the poison
    // task kills each until it has used its attempts and is dead.
    let mut drained = false;
    for round in 0..POISON_ATTEMPTS + 10 {
        let mut args =
            target.child_args(&history_dir, &format!("drain{round}"), rng.next(), deadline);
        args.extend([
            ("threads", "2".into()),
            ("lease_min", "200".into()),
            ("lease_max", "400".into()),
            ("work_min", "0".into()),
            ("work_max", "2".into()),
            ("recover", "1".into()),
            ("idle_exit", "300".into()),
            ("finish_pull", "80".into()),
        ]);
        let status = spawn("worker", &args)
            .wait_timeout(Duration::from_secs(120))
            .expect("drain");
        if status == Some(0) {
            drained = true;
            break;
        }
    }
    assert!(drained, "the drain workers never emptied the queue");

    let expect = Expect {
        drained: true,
        ..Expect::default()
    };
    let rows = target.rows();
    let (histories, report) = verify_run(target, &history_dir, &expect, scenario);
    let mut deliveries: Vec<&Operation> = histories
        .delivered()
        .into_iter()
        .filter(|op| op.get("key") == Some("poison"))
        .collect();
    deliveries.sort_by_key(|op| op.num("attempt"));
    let poison: Vec<i64> = deliveries
        .iter()
        .map(|op| op.num("attempt").unwrap())
        .collect();
    let buried = rows
        .iter()
        .find(|row| row.key == "poison")
        .expect("the poison task's row");
    println!(
        "[{scenario}] {started} worker processes, {killed} killed by the driver; poison delivered at attempts \
         {poison:?}, then dead: {}",
        buried.last_error.as_deref().unwrap_or("no reason")
    );
    let preloaded = histories
        .ops
        .iter()
        .filter(|op| op.op == "push" && op.process == "preload" && op.is_ok())
        .count();
    assert_eq!(preloaded, backlog + 1);
    let churned = report.stats.pushed - preloaded;
    println!("[{scenario}] {churned} tasks pushed by the churn threads");
    assert!(churned > 0, "the churn threads pushed nothing");
    assert!(
        report.stats.redeliveries > 0,
        "no task came back after a crash"
    );
    assert!(report.stats.failed > 0, "no task failed");
    // It came back after each crash it caused, and not after its last. A
    // delivery goes unlogged when the driver kills its worker between the
    // claim's commit and the answer (a commit on a PostgreSQL server goes
    // on without its client): then a pull of unknown outcome, invoked
    // between the logged deliveries around it, stands for it.
    assert_eq!(
        poison.last(),
        Some(&i64::from(POISON_ATTEMPTS)),
        "the poison task's last delivery"
    );
    let mut previous: Option<&Operation> = None;
    for delivery in &deliveries {
        let after = previous.map_or(i64::MIN, |op| op.invoked);
        let first = previous.map_or(1, |op| op.num("attempt").unwrap() + 1);
        let missing = delivery.num("attempt").unwrap() - first;
        let unknown = histories
            .ops
            .iter()
            .filter(|op| {
                op.op == "pull"
                    && op.outcome == Outcome::Unknown
                    && (after..delivery.invoked).contains(&op.invoked)
            })
            .count() as i64;
        assert!(
            missing >= 0 && unknown >= missing,
            "the poison task's deliveries {poison:?}: {missing} unlogged before attempt {}, \
             with {unknown} pulls of unknown outcome to account for them",
            delivery.num("attempt").unwrap()
        );
        previous = Some(delivery);
    }
    assert_eq!(
        (buried.state, buried.attempts),
        (db::DEAD, i64::from(POISON_ATTEMPTS)),
        "the poison task ends dead after its attempts"
    );
    assert!(
        buried
            .last_error
            .as_deref()
            .is_some_and(|why| why.contains(&format!("delivery {POISON_ATTEMPTS}"))),
        "the dead task says which delivery ended it: {:?}",
        buried.last_error
    );
    assert_eq!(report.stats.dead, 1, "only the poison task is dead");
    assert!(report.queues.values().all(|b| b.holds()));
}

/// The poison task first, through a handle that gives its tasks
/// [`POISON_ATTEMPTS`], then the backlog, with the default attempts.
fn preload(
    target: &Target,
    history_dir: &std::path::Path,
    backlog: usize,
    rng: &mut super::harness::Rng,
) {
    let history = History::create(history_dir, "preload");
    let mut options = target.options(&OpenOptions::new());
    options.durability(tq::Durability::Normal);
    let mut few = options.clone();
    few.max_attempts(POISON_ATTEMPTS).expect("a valid maximum");
    let queue = client::open(&history, 0, target.db(), &few).expect("open");
    Client {
        queue: &queue,
        history: &history,
        thread: 0,
    }
    .push("poison", 0)
    .expect("push");
    drop(queue);
    let queue = client::open(&history, 0, target.db(), &options).expect("open");
    let client = Client {
        queue: &queue,
        history: &history,
        thread: 0,
    };
    for n in 0..backlog {
        client
            .push(&format!("task-{n}"), rng.range(0, 500) as usize)
            .expect("push");
    }
}

#[test]
#[ignore = "torture test: make test-torture"]
fn a_dead_workers_tasks_come_back_by_expiry_or_at_once_by_recover() {
    for _ in repeat("dead-holders") {
        let dir = Dir::new();
        dead_holders(&dir, &Target::File(dir.file("queue.db")), "dead-holders");
    }
}

#[test]
#[ignore = "torture test on PostgreSQL: make test-postgres"]
fn a_dead_workers_tasks_come_back_by_expiry_or_at_once_by_recover_on_postgres() {
    for _ in repeat("dead-holders-postgres") {
        if let Some(target) = Target::postgres(
            "a_dead_workers_tasks_come_back_by_expiry_or_at_once_by_recover_on_postgres",
            "torture_dead_holders",
        ) {
            dead_holders(&Dir::new(), &target, "dead-holders-postgres");
        }
    }
}

fn dead_holders(dir: &Dir, target: &Target, scenario: &str) {
    const SHORT_LEASE_MS: i64 = 300;
    let history_dir = dir.sub("history");
    let deadline = now_ns() + 120_000_000_000;
    let driver = History::create(&history_dir, "driver");
    let queue = client::open(
        &driver,
        0,
        target.db(),
        &target.options(&OpenOptions::new()),
    )
    .expect("open");
    let client = Client {
        queue: &queue,
        history: &driver,
        thread: 0,
    };
    for n in 0..4 {
        client.push(&format!("task-{n}"), 0).expect("push");
    }

    // A worker that takes `hold` tasks under `lease` ms and keeps them.
    let holder = |label: &str, hold: usize, lease: i64| -> Proc {
        let mut args = target.child_args(&history_dir, label, 1, deadline);
        args.extend([
            ("threads", "1".into()),
            ("hold", hold.to_string()),
            ("lease_min", lease.to_string()),
            ("lease_max", lease.to_string()),
            ("work_min", "0".into()),
            ("work_max", "0".into()),
        ]);
        let proc = spawn("worker", &args);
        assert!(
            wait_until(Duration::from_secs(20), || Histories::read_process(
                &history_dir,
                label
            )
            .delivered()
            .len()
                >= hold),
            "{label} did not take {hold} tasks"
        );
        proc
    };
    let kill = |mut proc: Proc, label: &str| {
        driver.info("kill", &format!("target={label}"));
        proc.kill();
    };

    // Long leases, holder killed: only recover can bring these back soon.
    kill(holder("long", 2, 600_000), "long");
    // Short leases, holder killed, nobody recovers: the next worker gets
    // them when the lease runs out, not before.
    kill(holder("short", 2, SHORT_LEASE_MS), "short");
    kill(holder("late", 1, 600_000), "late");
    let short = Histories::read_process(&history_dir, "short");
    let late = Histories::read_process(&history_dir, "late");
    let (first, taken) = (short.delivered()[0], late.delivered()[0]);
    assert_eq!(
        taken.num("id"),
        first.num("id"),
        "the expired task is first in line"
    );
    let waited = taken.completed.unwrap() / 1_000_000 - first.invoked / 1_000_000;
    assert!(
        waited >= SHORT_LEASE_MS,
        "a dead holder's task came back after {waited} ms, before its {SHORT_LEASE_MS} ms lease ran out"
    );

    // The tasks of the holders with long leases: only recover brings these
    // back before their leases run out.
    let held_ids: Vec<i64> = ["long", "late"]
        .iter()
        .flat_map(|label| Histories::read_process(&history_dir, label).delivered_ids())
        .collect();
    // On SQLite a holder's locks die with its process, so the first recover
    // brings its tasks back. On PostgreSQL a holder whose session ended
    // counts as alive, connecting again, until its heartbeat is older than
    // the 30 s grace period; recover is retried until then.
    let patience = match target {
        Target::File(_) => Duration::ZERO,
        Target::Postgres { .. } => Duration::from_secs(45),
    };
    let started = Instant::now();
    let mut recovered = client.recover().expect("recover");
    let still_held = || -> Vec<i64> {
        target
            .rows()
            .iter()
            .filter(|row| held_ids.contains(&row.id) && row.state != db::READY)
            .map(|row| row.id)
            .collect()
    };
    while !still_held().is_empty() && started.elapsed() < patience {
        sleep_ms(20);
        recovered += client.recover().expect("recover");
    }
    assert!(recovered >= 3, "recover brought back {recovered} tasks");
    assert_eq!(
        still_held(),
        Vec::<i64>::new(),
        "tasks of dead holders not pending after recover"
    );
    while let Some(task) = client.pull(60_000).expect("pull") {
        client.finish(&task).expect("finish");
    }
    drop(queue);

    let expect = Expect {
        drained: true,
        ..Expect::default()
    };
    verify_run(target, &history_dir, &expect, scenario);
}
