//! Scenarios 15 and 16: limits in time and in room, with producers and
//! workers killed at random and replaced while they push and work, then a
//! drain.
//!
//! 15: tasks pushed with random expiries and deadlines (after the push or
//! at a time, up to 400 ms, some already passed), both or neither, worked
//! with short leases, stalls past them, heartbeats and fails retried after
//! back-offs of up to 200 ms, three attempts each. Besides everything the
//! checker checks, its rules of limits: no delivery claimed once its
//! task's deadline (or, for a first delivery, its expiry) had surely
//! passed, and no task dead for a limit it did not have or that cannot
//! have passed by the last claim of its queue (see checker/limits.rs).
//!
//! 16: a queue capped at 16 pending tasks, three producers of two threads
//! pushing into it as fast as they can (some waiting a little for room),
//! with limits as in 15, and two workers draining it. The rule: at no
//! commit does the queue hold more pending tasks than its cap. The
//! histories cannot prove it: commits of different processes are not
//! ordered by the history (a push acknowledged and a claim in another
//! process overlap in time, in either order), so a count from them is
//! only bounds. The file itself is watched instead ([`CapWatch`]):
//! triggers count the queue's pending tasks after every change of a row,
//! inside the writing transaction. The file has one writer, so every
//! commit's count is seen, as the count after its transaction's last
//! change; the counts between may only be higher than at either end if
//! one transaction both added and removed pending tasks, which no call of
//! this scenario does (a push only adds, a claim only removes; fails,
//! which make a task pending again without a check of room, and
//! `recover`, which does the same with a lease, are left out, as tq
//! documents that neither is ever refused). Every refused push (`Full`)
//! stored nothing: the checker reports a failed push whose task is stored
//! or delivered. Scenario 15 also runs on PostgreSQL (`..._on_postgres`),
//! where tq reads the server's clock (on this machine, the same clock the
//! histories read); 16 runs on SQLite only, its watch being SQLite's
//! triggers under its one writer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rusqlite::Connection;
use tq::{OpenOptions, Queue};

use super::checker::{verify_run, Expect, Report};
use super::db::Target;
use super::harness::{
    kill_and_replace, now_ns, work_killed_then_drain, Args, Crew, Dir, Rng, Settings,
};
use super::history::{Histories, History};

/// Scenario 16's cap on pending tasks.
const CAP: u64 = 16;

#[test]
#[ignore = "torture test: make test-torture"]
fn no_task_is_delivered_past_its_expiry_or_deadline_with_processes_killed() {
    let dir = Dir::new();
    let target = Target::File(dir.file("queue.db"));
    limits(&dir, &target, "limits");
}

#[test]
#[ignore = "torture test on PostgreSQL: make test-postgres"]
fn no_task_is_delivered_past_its_expiry_or_deadline_with_processes_killed_on_postgres() {
    if let Some(target) = Target::postgres(
        "no_task_is_delivered_past_its_expiry_or_deadline_with_processes_killed_on_postgres",
        "torture_limits",
    ) {
        limits(&Dir::new(), &target, "limits-postgres");
    }
}

/// Scenario 15 on `target`.
fn limits(dir: &Dir, target: &Target, scenario: &str) {
    let (histories, report) = run(dir, target, scenario, None);
    let pushed_with_limits = histories
        .ops
        .iter()
        .filter(|op| op.op == "push" && op.is_ok())
        .filter(|op| {
            ["expire_after", "expire_at", "deadline_after", "deadline_at"]
                .iter()
                .any(|name| op.get(name).is_some())
        })
        .count();
    let s = &report.stats;
    println!(
        "[{scenario}] {pushed_with_limits} pushes acknowledged with limits; {} tasks expired, {} past \
         their deadline",
        s.expired, s.deadline_passed
    );
    assert!(
        s.expired > 0 && s.deadline_passed > 0,
        "no task ended for its expiry or its deadline: the rules were not exercised"
    );
}

#[test]
#[ignore = "torture test: make test-torture"]
fn a_capped_queue_never_commits_more_pending_tasks_than_its_cap_with_processes_killed() {
    let dir = Dir::new();
    let path = dir.file("queue.db");
    let (histories, _) = run(&dir, &Target::File(path.clone()), "capped", Some(CAP));
    let refused = histories
        .ops
        .iter()
        .filter(|op| op.op == "push" && op.failed_with("Full"))
        .count();
    let watch = CapWatch::read(&path);
    println!(
        "[capped] {refused} pushes refused as full; at most {} pending tasks at a commit (cap \
         {CAP})",
        watch.most
    );
    assert!(
        watch.breaches.is_empty(),
        "the queue held more pending tasks than its cap {CAP}: {}",
        watch.breaches.join("; ")
    );
    assert!(
        refused > 0 && watch.most == CAP as i64,
        "the producers never filled the queue ({refused} pushes refused, at most {} pending): \
         the cap was not exercised",
        watch.most
    );
}

/// Producers and workers killed and replaced for the phase, then a drain,
/// then the checker; with a cap, the queue (a file's) is capped and
/// watched.
fn run(dir: &Dir, target: &Target, scenario: &str, cap: Option<u64>) -> (Histories, Report) {
    let settings = Settings::new(scenario);
    let mut rng = settings.rng();
    let history_dir = dir.sub("history");
    let driver = History::create(&history_dir, "driver");
    let phase = settings.duration(Duration::from_secs(8));
    let deadline = now_ns() + phase.as_nanos() as i64 + 180_000_000_000;
    let queue = Queue::open(target.db(), &target.options(&OpenOptions::new())).expect("open");
    if let Some(cap) = cap {
        queue.set_max_pending(Some(cap)).expect("set the cap");
        CapWatch::install(target.db(), cap);
    }
    let producer_args = |label: &str, seed: u64| {
        let mut args = target.child_args(&history_dir, label, seed, deadline);
        args.extend([
            ("threads", "2".into()),
            ("pad", "0".into()),
            ("limits", "1".into()),
            ("max_attempts", "3".into()),
            ("durability", "normal".into()),
        ]);
        if cap.is_some() {
            args.push(("wait_room", "30".into()));
        } else {
            args.push(("pause", "4".into()));
        }
        args
    };
    let worker_args = |label: &str, seed: u64| -> Args {
        let mut args = target.child_args(&history_dir, label, seed, deadline);
        args.extend([
            ("threads", "2".into()),
            ("durability", "normal".into()),
            ("lease_min", "20".into()),
            ("lease_max", "100".into()),
            ("work_min", "0".into()),
            ("work_max", "15".into()),
            ("heartbeat", "20".into()),
            ("overrun", "10".into()),
            ("finish_pull", "30".into()),
        ]);
        if cap.is_none() {
            args.extend([("fail", "25".into()), ("backoff", "20:200".into())]);
        }
        args
    };
    let stop = AtomicBool::new(false);
    let begin = Instant::now();
    let mut producer_rng = Rng::new(rng.next());
    let ((produced, producers_killed), (worked, workers_killed)) = std::thread::scope(|scope| {
        let producers = scope.spawn(|| {
            let crew = Crew {
                role: "producer",
                prefix: "p",
                count: if cap.is_some() { 3 } else { 2 },
                life_ms: (100, 1500),
            };
            kill_and_replace(&crew, &driver, &mut producer_rng, producer_args, || {
                stop.load(Ordering::Relaxed)
            })
        });
        let crew = Crew {
            role: "worker",
            prefix: "w",
            count: if cap.is_some() { 2 } else { 3 },
            life_ms: (100, 1000),
        };
        let workers = kill_and_replace(&crew, &driver, &mut rng, worker_args, || {
            begin.elapsed() >= phase
        });
        stop.store(true, Ordering::Relaxed);
        (producers.join().expect("the producers' driver"), workers)
    });
    println!(
        "[{scenario}] {produced} producers started, {producers_killed} killed; {worked} workers \
         started, {workers_killed} killed"
    );
    assert!(
        producers_killed > 0 && workers_killed > 0,
        "no producer or no worker was killed"
    );
    // The drain alone (no phase): workers that finish every task.
    work_killed_then_drain(
        &queue,
        target,
        &history_dir,
        &driver,
        &mut rng,
        Duration::ZERO,
        &Args::new(),
    );
    drop(queue);
    let expect = Expect {
        drained: true,
        on_server: matches!(target, Target::Postgres { .. }),
        ..Expect::default()
    };
    verify_run(target, &history_dir, &expect, scenario)
}

/// Triggers in a queue file that count the default queue's pending tasks
/// (tq's pending states: ready, waiting for a time, blocked) after every
/// insert and every change of state of one of its rows, inside the
/// writing transaction, and keep the highest count and each count over
/// the cap, in tables of their own.
pub struct CapWatch {
    /// The highest count seen.
    pub most: i64,
    /// Each count over the cap: which task's change made it.
    pub breaches: Vec<String>,
}

impl CapWatch {
    /// Installs the watch of cap `cap` in the file at `path`, which tq has
    /// created.
    pub fn install(path: &str, cap: u64) {
        let count = "(SELECT count(*) FROM tq_tasks WHERE queue = 'default' AND state = 0) \
                   + (SELECT count(*) FROM tq_tasks WHERE queue = 'default' AND state = 4) \
                   + (SELECT count(*) FROM tq_tasks WHERE queue = 'default' AND state = 7)";
        let body = format!(
            "BEGIN
                UPDATE torture_pending_most SET n = max(n, {count});
                INSERT INTO torture_over_cap SELECT NEW.id, n FROM (SELECT {count} AS n)
                    WHERE n > {cap};
            END"
        );
        Connection::open(path)
            .expect("open the queue file")
            .execute_batch(&format!(
                "CREATE TABLE torture_pending_most (n INTEGER NOT NULL);
                 INSERT INTO torture_pending_most VALUES (0);
                 CREATE TABLE torture_over_cap (task INTEGER NOT NULL, pending INTEGER NOT NULL);
                 CREATE TRIGGER torture_cap_insert AFTER INSERT ON tq_tasks
                     WHEN NEW.queue = 'default' {body};
                 CREATE TRIGGER torture_cap_update AFTER UPDATE OF state ON tq_tasks
                     WHEN NEW.queue = 'default' {body};"
            ))
            .expect("install the watch of the cap");
    }

    /// What the watch saw in the file at `path`.
    pub fn read(path: &str) -> CapWatch {
        let conn = Connection::open(path).expect("open the queue file");
        let most = conn
            .query_row("SELECT n FROM torture_pending_most", [], |row| row.get(0))
            .expect("read the highest count");
        let mut statement = conn
            .prepare("SELECT task, pending FROM torture_over_cap ORDER BY rowid")
            .expect("prepare");
        let breaches = statement
            .query_map([], |row| {
                let (task, pending): (i64, i64) = (row.get(0)?, row.get(1)?);
                Ok(format!("{pending} pending after a change of task {task}"))
            })
            .expect("read the counts over the cap")
            .map(|line| line.expect("a count over the cap"))
            .collect();
        CapWatch { most, breaches }
    }
}
