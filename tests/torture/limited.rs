//! Scenario 9: a queue under a concurrency limit of 3. A backlog is worked
//! by three processes of three threads (short leases, heartbeats, fails,
//! `finish_and_pull`) that the driver kills at random and replaces; then
//! drain workers empty the queue. During the phase each
//! finish pushes a new task of a priority above every task pushed before
//! it, which is delivered first. One delivery in five has its handler stall past
//! its lease (a pause, swap) and then extend it, as a late heartbeat does:
//! an expired lease holds no slot, so by then another claim may have
//! taken its slot (a newer task, of higher priority, is claimed before
//! the expired one), and the extend must not bring the queue over its limit. Besides everything the checker checks, the
//! histories never show more deliveries surely held at once than the
//! limit (the checker's rule "over the limit": a delivery is surely held
//! from its pull's answer until the invoke of the call that ended it or
//! the earliest its lease can have run out, and again from each accepted
//! extend's answer until the earliest that extend's lease can have run
//! out). A killed holder's lease holds its slot until then too. It also
//! runs on PostgreSQL (`..._on_postgres`), where claims of a limited queue
//! take its settings' lock one after another.

use std::time::{Duration, Instant};

use tq::{OpenOptions, Queue, TaskState};

use super::checker::{verify_run, Expect};
use super::client::{self, Client};
use super::db::Target;
use super::harness::{now_ns, sleep_ms, spawn, Dir, Proc, Settings};
use super::history::History;

/// The queue's concurrency limit.
const LIMIT: usize = 3;

const BACKLOG: usize = 600;

#[test]
#[ignore = "torture test: make test-torture"]
fn a_limited_queue_never_has_more_tasks_held_than_its_limit() {
    let dir = Dir::new();
    limited(&dir, &Target::File(dir.file("queue.db")), "limited");
}

#[test]
#[ignore = "torture test on PostgreSQL: make test-postgres"]
fn a_limited_queue_never_has_more_tasks_held_than_its_limit_on_postgres() {
    if let Some(target) = Target::postgres(
        "a_limited_queue_never_has_more_tasks_held_than_its_limit_on_postgres",
        "torture_limited",
    ) {
        limited(&Dir::new(), &target, "limited-postgres");
    }
}

fn limited(dir: &Dir, target: &Target, scenario: &str) {
    let settings = Settings::new(scenario);
    let mut rng = settings.rng();
    let history_dir = dir.sub("history");
    let driver = History::create(&history_dir, "driver");
    let phase = settings.duration(Duration::from_secs(5));
    let deadline = now_ns() + phase.as_nanos() as i64 + 120_000_000_000;
    let push_until = now_ns() + phase.as_nanos() as i64;
    {
        let history = History::create(&history_dir, "preload");
        let options = target.options(&OpenOptions::new());
        let queue = client::open(&history, 0, target.db(), &options).expect("open");
        queue
            .set_concurrency_limit(Some(LIMIT as u32))
            .expect("set the limit");
        let client = Client {
            queue: &queue,
            history: &history,
            thread: 0,
        };
        for n in 0..BACKLOG {
            client.push(&format!("limited-{n}"), 0).expect("push");
        }
    }
    let worker_args = |label: &str, rng_seed: u64, idle_exit: bool| {
        let mut args = target.child_args(&history_dir, label, rng_seed, deadline);
        args.extend([
            ("threads", "3".into()),
            ("shared", "1".into()),
            ("durability", "normal".into()),
            ("backoff", "5:50".into()),
            ("lease_min", "20".into()),
            ("lease_max", "120".into()),
            ("work_min", "0".into()),
            ("work_max", "40".into()),
            ("heartbeat", "33".into()),
            ("fail", "10".into()),
            ("finish_pull", "33".into()),
            ("overrun", "20".into()),
            ("push_until", push_until.to_string()),
            ("push_priority", "rising".into()),
        ]);
        if idle_exit {
            args.push(("idle_exit", "1000".into()));
        }
        args
    };

    let monitor = Queue::open(target.db(), &target.options(&OpenOptions::new())).expect("open");
    let mut slots: Vec<Option<(Proc, String, Instant)>> = (0..3).map(|_| None).collect();
    let (mut started, mut killed) = (0, 0);
    let begin = Instant::now();
    while begin.elapsed() < phase && monitor.count(TaskState::Pending).unwrap() > 30 {
        for slot in &mut slots {
            if let Some((proc, label, kill_at)) = slot {
                if Instant::now() >= *kill_at {
                    driver.info("kill", &format!("target={label}"));
                    proc.kill();
                    killed += 1;
                    *slot = None;
                }
            }
            if slot.is_none() {
                let label = format!("w{started}");
                started += 1;
                let args = worker_args(&label, rng.next(), false);
                let life = Duration::from_millis(rng.range(200, 1500));
                *slot = Some((spawn("worker", &args), label, Instant::now() + life));
            }
        }
        sleep_ms(5);
    }
    for (proc, label, _) in slots.iter_mut().flatten() {
        driver.info("kill", &format!("target={label}"));
        proc.kill();
        killed += 1;
    }
    drop(monitor);
    // Drain: the killed workers' leases run out, and these take the rest.
    let mut drains: Vec<Proc> = (0..2)
        .map(|i| {
            spawn(
                "worker",
                &worker_args(&format!("drain{i}"), rng.next(), true),
            )
        })
        .collect();
    for drain in &mut drains {
        let status = drain
            .wait_timeout(Duration::from_secs(120))
            .expect("a drain worker");
        assert_eq!(status, Some(0), "a drain worker failed");
    }
    println!("[{scenario}] {started} workers started, {killed} killed");
    assert!(killed > 0, "no worker was killed");

    let expect = Expect {
        drained: true,
        limit: Some(LIMIT),
        ..Expect::default()
    };
    let (histories, report) = verify_run(target, &history_dir, &expect, scenario);
    let most = report.stats.most_held;
    let revived = histories
        .ops
        .iter()
        .filter(|op| op.op == "extend" && op.is_ok())
        .count();
    println!(
        "[{scenario}] at most {most} tasks surely held at once (limit {LIMIT}); {revived} extends accepted"
    );
    assert!(
        most == LIMIT,
        "{scenario}: the workers never filled the limit ({most} of {LIMIT}): the race was not exercised"
    );
}
