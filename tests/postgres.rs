//! What only the PostgreSQL backend does: a live process keeps its tasks
//! through a lost session, one that is gone gives them back at once,
//! receipts are tied to their schema, notifications wake waiting pulls, lost
//! connections are replaced, several worker processes share a queue, a
//! child after `fork()` leaves its parent's sessions alone, and options
//! that mean nothing there are refused. The queue's semantics on
//! PostgreSQL are tested by `queue.rs` and `jobs.rs`, which run on both
//! backends.
//!
//! Every test needs `TQ_TEST_POSTGRES_URL` (`make test-postgres` sets it)
//! and says it is skipped without it. Child processes are this binary run
//! again with `TQ_TEST_CHILD` set (see `child_process`).

#[macro_use]
mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use common::{lease, postgres_client, push, Scratch};
use tq::{Durability, ErrorKind, OpenOptions, PullOptions, PushOptions, Queue, TaskState};

/// `scratch`'s URL with `application_name` set to `name`, so that the
/// sessions of the handles opened with it can be told apart on the server
/// (and so that they get a listener of their own in this process).
fn named_url(scratch: &Scratch, name: &str) -> String {
    let url = &scratch.server().expect("a PostgreSQL scratch").url;
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={name}")
}

fn normal(scratch: &Scratch) -> OpenOptions {
    scratch.options(OpenOptions::new().durability(Durability::Normal))
}

/// Ends every session on the server whose application name is `name`.
fn terminate_sessions(scratch: &Scratch, name: &str) -> usize {
    let url = &scratch.server().unwrap().url;
    let rows = postgres_client(url)
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
            &[&name],
        )
        .unwrap();
    rows.len()
}

/// A scratch on the server, or `None` (said) without one.
fn scratch(test: &str) -> Option<Scratch> {
    Scratch::postgres(&format!("postgres::{test}"))
}

#[test]
fn a_waiting_pull_is_woken_by_a_push_from_another_client() {
    let Some(scratch) = scratch("woken_by_push") else {
        return;
    };
    let waiter = Queue::open(&named_url(&scratch, "tq_test_waiter"), &normal(&scratch)).unwrap();
    let pusher = Queue::open(&named_url(&scratch, "tq_test_pusher"), &normal(&scratch)).unwrap();
    let wait = waiting_up_to(Duration::from_secs(20));
    // Warm up: the first pull prepares its statements.
    assert!(waiter.pull(&PullOptions::new()).unwrap().is_none());
    let (sender, pushed_at) = std::sync::mpsc::channel();
    let pushing = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        sender.send(Instant::now()).unwrap();
        push(&pusher, "\"wake up\"")
    });
    let task = waiter.pull(&wait).unwrap().expect("woken by the push");
    let woken_after = pushed_at.recv().unwrap().elapsed();
    assert_eq!(task.id(), pushing.join().unwrap());
    // Without the notification, only the once-a-second retry would find it.
    assert!(
        woken_after < Duration::from_millis(500),
        "woken {woken_after:?} after the push"
    );
}

#[test]
fn a_lost_connection_is_replaced_for_reads_and_writes() {
    let Some(scratch) = scratch("lost_connection") else {
        return;
    };
    let name = "tq_test_lost";
    let mut options = normal(&scratch);
    options.pool_size(2).unwrap();
    let queue = Queue::open(&named_url(&scratch, name), &options).unwrap();
    push(&queue, "1");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
    terminate_sessions(&scratch, name);
    thread::sleep(Duration::from_millis(100));
    assert_eq!(
        queue.count(TaskState::Pending).unwrap(),
        1,
        "a read is made again"
    );
    terminate_sessions(&scratch, name);
    thread::sleep(Duration::from_millis(100));
    push(&queue, "2");
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    queue.finish(task.receipt()).unwrap();
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
}

#[test]
fn options_without_meaning_are_refused_on_each_backend() {
    let Some(scratch) = scratch("refused_options") else {
        return;
    };
    let queue = scratch.open();
    for err in [
        queue.checkpoint().unwrap_err(),
        queue.wal_size().unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("no WAL file"), "{err}");
    }
    let file = Scratch::new();
    for options in [
        OpenOptions::new().pool_size(2).unwrap().clone(),
        OpenOptions::new().postgres_schema("jobs").unwrap().clone(),
    ] {
        let err = Queue::open(&file.queue_path(), &options).err().unwrap();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument);
        assert!(err.message().contains("PostgreSQL only"), "{err}");
    }
    assert!(OpenOptions::new().pool_size(0).is_err());
    assert!(OpenOptions::new().pool_size(tq::MAX_POOL_SIZE + 1).is_err());
    for name in ["", "pg_x", "1a", "a-b", "a\"b", &"s".repeat(64)] {
        assert_eq!(
            OpenOptions::new().postgres_schema(name).unwrap_err().kind(),
            ErrorKind::InvalidArgument,
            "{name:?}"
        );
    }
}

#[test]
fn a_schema_that_is_newer_or_not_tqs_is_refused_and_left_alone() {
    let Some(scratch) = scratch("refused_schemas") else {
        return;
    };
    let server = scratch.server().unwrap();
    drop(scratch.open());
    let mut client = postgres_client(&server.url);
    client
        .batch_execute(&format!(
            "UPDATE \"{}\".meta SET value = 99 WHERE key = 'schema_version'",
            server.schema
        ))
        .unwrap();
    let err = Queue::open(&server.url, &normal(&scratch)).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::NotADatabase);
    assert!(err.message().contains("newer"), "{err}");
    let version: i64 = client
        .query_one(
            &format!(
                "SELECT value FROM \"{}\".meta WHERE key = 'schema_version'",
                server.schema
            ),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(version, 99, "left as it was");

    let other = format!("{}_app", server.schema);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{other}\" CASCADE; CREATE SCHEMA \"{other}\";
             CREATE TABLE \"{other}\".orders (id int)"
        ))
        .unwrap();
    let mut options = normal(&scratch);
    options.postgres_schema(&other).unwrap();
    let err = Queue::open(&server.url, &options).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::NotADatabase);
    assert!(err.message().contains("not tq's"), "{err}");
}

#[test]
fn handles_opening_a_new_schema_at_once_agree() {
    let Some(scratch) = scratch("concurrent_migrations") else {
        return;
    };
    let url = scratch.server().unwrap().url.clone();
    let openers: Vec<_> = (0..6)
        .map(|i| {
            let url = format!("{url}?application_name=tq_test_opener_{i}");
            let options = normal(&scratch);
            thread::spawn(move || {
                let queue = Queue::open(&url, &options).unwrap();
                push(&queue, &i.to_string())
            })
        })
        .collect();
    let ids: Vec<i64> = openers.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(ids.len(), 6);
    assert_eq!(scratch.open().count(TaskState::Pending).unwrap(), 6);
}

/// Plays a worker when run as a child (`TQ_TEST_CHILD=worker`): drains the
/// queue, printing "claimed ID" and "finished ID" lines, in batches or one
/// by one, and ends after a quiet second.
#[test]
fn child_process() {
    let Ok(role) = std::env::var("TQ_TEST_CHILD") else {
        return; // Not a child: nothing to do in the parent's run.
    };
    let url = std::env::var("TQ_TEST_URL").unwrap();
    if role == "fork" {
        fork_scenario(&url);
        std::process::exit(0);
    }
    assert_eq!(role, "worker");
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .postgres_schema(&std::env::var("TQ_TEST_SCHEMA").unwrap())
        .unwrap();
    let queue = Queue::open(&url, &options).unwrap();
    let batch = std::env::var("TQ_TEST_BATCH").is_ok();
    let mut wait = PullOptions::new();
    wait.wait(Duration::from_secs(1))
        .unwrap()
        .lease(Duration::from_secs(120))
        .unwrap();
    loop {
        let tasks = if batch {
            queue.pull_batch(7, &wait).unwrap()
        } else {
            queue.pull(&wait).unwrap().into_iter().collect()
        };
        if tasks.is_empty() {
            break;
        }
        for task in &tasks {
            println!("claimed {}", task.id());
        }
        let receipts: Vec<_> = tasks.iter().map(|task| task.receipt()).collect();
        let held = queue.finish_batch(&receipts).unwrap();
        for (task, held) in tasks.iter().zip(held) {
            assert!(held, "task {} was taken from this worker", task.id());
            println!("finished {}", task.id());
        }
    }
    std::process::exit(0);
}

/// The server's sessions named `name`, by process id.
fn sessions(url: &str, name: &str) -> Vec<i32> {
    postgres_client(url)
        .query(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1 ORDER BY pid",
            &[&name],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// In a child process of its own (forking the test harness could hang):
/// a forked child that drops its copy of the parent's handle leaves the
/// parent's sessions, and so its held tasks, alone.
fn fork_scenario(url: &str) {
    let schema = std::env::var("TQ_TEST_SCHEMA").unwrap();
    let mut options = OpenOptions::new();
    options.postgres_schema(&schema).unwrap();
    let name = "tq_test_forker";
    let queue = Queue::open(&format!("{url}?application_name={name}"), &options).unwrap();
    push(&queue, "1");
    let task = queue.pull(&lease(60_000)).unwrap().unwrap();
    let before = sessions(url, name);
    assert!(before.len() >= 2, "a pooled connection and the listener");
    // SAFETY: the child only drops the handle and leaves with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        drop(queue);
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    thread::sleep(Duration::from_millis(200));
    assert_eq!(sessions(url, name), before, "the parent's sessions live on");
    let other = Queue::open(url, &options).unwrap();
    assert_eq!(other.recover().unwrap(), 0, "its task is still held");
    queue.finish(task.receipt()).unwrap();
    println!("scenario passed");
}

#[test]
fn a_child_after_fork_leaves_the_parents_sessions_alone() {
    let Some(scratch) = scratch("fork") else {
        return;
    };
    let server = scratch.server().unwrap();
    let output = common::child_command("fork")
        .env("TQ_TEST_URL", &server.url)
        .env("TQ_TEST_SCHEMA", &server.schema)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("scenario passed"),
        "{stdout}\n{stderr}"
    );
}

#[test]
fn worker_processes_share_a_queue_and_no_task_goes_to_two() {
    const TASKS: usize = 1500;
    let Some(scratch) = scratch("worker_processes") else {
        return;
    };
    let server = scratch.server().unwrap();
    let queue = scratch.open();
    let payloads: Vec<String> = (0..TASKS).map(|i| i.to_string()).collect();
    let mut ids: Vec<i64> = Vec::new();
    for chunk in payloads.chunks(500) {
        ids.extend(queue.push_batch(chunk, &PushOptions::new()).unwrap());
    }
    let workers: Vec<_> = (0..4)
        .map(|i| {
            let mut command = common::child_command("worker");
            command
                .env("TQ_TEST_URL", &server.url)
                .env("TQ_TEST_SCHEMA", &server.schema)
                .stdout(Stdio::piped());
            if i % 2 == 1 {
                command.env("TQ_TEST_BATCH", "1");
            }
            command.spawn().unwrap()
        })
        .collect();
    let mut claimed: HashMap<i64, usize> = HashMap::new();
    let mut finished: HashMap<i64, usize> = HashMap::new();
    let mut busy_workers = 0;
    for mut worker in workers {
        let stdout = worker.stdout.take().unwrap();
        let mut did_work = false;
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            // The last two words: the harness's "test child_process ... "
            // may start the first line.
            let mut words = line.split_whitespace().rev();
            let (Some(id), Some(what)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(id) = id.parse::<i64>() else { continue };
            match what {
                "claimed" => *claimed.entry(id).or_default() += 1,
                "finished" => *finished.entry(id).or_default() += 1,
                _ => continue,
            }
            did_work = true;
        }
        assert!(worker.wait().unwrap().success());
        busy_workers += usize::from(did_work);
    }
    assert_eq!(claimed.len(), TASKS, "every task was delivered");
    assert!(
        claimed.values().all(|&n| n == 1),
        "no task was delivered twice"
    );
    assert_eq!(finished.len(), TASKS, "every task was finished");
    assert!(ids.iter().all(|id| finished.get(id) == Some(&1)));
    assert!(busy_workers >= 2, "the workers shared the queue");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 0);
}

/// Pulls with `wait`, in a thread, from a handle on `url`.
fn wait_for_a_task(
    url: String,
    options: OpenOptions,
    wait: Duration,
) -> thread::JoinHandle<Option<i64>> {
    thread::spawn(move || {
        let queue = Queue::open(&url, &options).unwrap();
        let mut pull = PullOptions::new();
        pull.wait(wait).unwrap();
        let task = queue.pull(&pull).unwrap()?;
        queue.finish(task.receipt()).unwrap();
        Some(task.id())
    })
}

#[test]
fn a_live_process_whose_sessions_end_keeps_its_tasks() {
    let Some(scratch) = scratch("live_holder_reconnects") else {
        return;
    };
    // Holder identity is kept per listener, and a listener is shared by
    // the handles of one process on one URL and schema: a handle on
    // another URL (another application name) is another process to it.
    let holder_name = "tq_test_live_holder";
    let holder = Queue::open(&named_url(&scratch, holder_name), &normal(&scratch)).unwrap();
    let other = Queue::open(&named_url(&scratch, "tq_test_rescuer"), &normal(&scratch)).unwrap();
    push(&other, "1");
    let task = holder.pull(&lease(60_000)).unwrap().unwrap();

    assert!(
        terminate_sessions(&scratch, holder_name) >= 2,
        "pool and listener"
    );
    // Recovery during the reconnection, and after it, leaves the task to
    // its holder.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(3) {
        assert_eq!(other.recover().unwrap(), 0, "a live holder keeps its task");
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(other.count(TaskState::Leased).unwrap(), 1);
    holder
        .finish(task.receipt())
        .expect("the holder still holds its task");
}

#[test]
fn a_holder_that_is_gone_gives_its_tasks_back_at_once() {
    let Some(scratch) = scratch("holder_gone") else {
        return;
    };
    let holder = Queue::open(&named_url(&scratch, "tq_test_gone"), &normal(&scratch)).unwrap();
    let other = Queue::open(&named_url(&scratch, "tq_test_survivor"), &normal(&scratch)).unwrap();
    for i in 0..3 {
        push(&other, &i.to_string());
    }
    let held: Vec<_> = (0..2)
        .map(|_| holder.pull(&lease(60_000)).unwrap().unwrap())
        .collect();
    assert_eq!(other.recover().unwrap(), 0, "a live holder keeps its tasks");

    drop(holder);
    let started = Instant::now();
    let mut recovered = 0;
    while recovered < 2 && started.elapsed() < Duration::from_secs(10) {
        recovered += other.recover().unwrap();
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        recovered, 2,
        "both tasks came back, long before the 60 s leases expire"
    );
    assert_eq!(other.count(TaskState::Pending).unwrap(), 3);
    let again = other.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!(again.id(), held[0].id(), "it keeps its place in line");
    assert!(
        again.last_error().unwrap().contains("died"),
        "{:?}",
        again.last_error()
    );
    other.finish(again.receipt()).unwrap();
}

/// An extend of a live lease that waits for its task's row while the
/// lease runs out, and a claim that meanwhile takes the slot the expired
/// lease freed, must not both succeed: a limit of one would have two live
/// leases. Extends of a limited queue's tasks take the settings' lock the
/// claims take, so the late extend sees the slot taken.
#[test]
fn an_extend_that_waits_while_its_lease_runs_out_never_exceeds_the_limit() {
    let Some(scratch) = scratch("extend_racing_a_claim") else {
        return;
    };
    let server = scratch.server().unwrap();
    let queue = scratch.open();
    queue.set_concurrency_limit(Some(1)).unwrap();
    push(&queue, "1");
    push(&queue, "2");
    let late = queue.pull(&lease(1_000)).unwrap().unwrap();

    // Another session holds the task's row, so that the extend, begun
    // while the lease is live, waits for it.
    let mut blocker = postgres_client(&server.url);
    let mut row_lock = blocker.transaction().unwrap();
    row_lock
        .execute(
            &format!(
                "SELECT 1 FROM \"{}\".tasks WHERE id = $1 FOR UPDATE",
                server.schema
            ),
            &[&late.id()],
        )
        .unwrap();
    thread::scope(|scope| {
        let extend = scope.spawn(|| queue.extend(late.receipt(), Duration::from_secs(30)));
        let mut watcher = postgres_client(&server.url);
        let started = Instant::now();
        loop {
            let waiting: i64 = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%lease_%'",
                    &[],
                )
                .unwrap()
                .get(0);
            if waiting > 0 {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the extend never waited"
            );
            thread::sleep(Duration::from_millis(5));
        }
        assert!(
            started.elapsed() < Duration::from_millis(800),
            "the extend began while the lease was live"
        );
        thread::sleep(Duration::from_millis(1_200));
        // The lease has run out: a claim may take its slot, unless the
        // extend, still waiting, has it.
        let claim = scope.spawn(|| scratch.open().pull(&PullOptions::new()));
        thread::sleep(Duration::from_millis(300));
        row_lock.rollback().unwrap();
        let taken = claim.join().unwrap().unwrap();
        let extended = extend.join().unwrap();
        match (&taken, &extended) {
            (Some(_), Ok(())) => panic!("two live leases under a limit of one"),
            (Some(_), Err(err)) => assert_eq!(err.kind(), ErrorKind::NotHeld, "{err}"),
            (None, Ok(())) => {}
            (None, Err(err)) => panic!("the slot went to neither: {err}"),
        }
    });
}

#[test]
fn a_receipt_from_another_schema_is_refused() {
    let Some(first) = scratch("receipts_schema_a") else {
        return;
    };
    let second = scratch("receipts_schema_b").unwrap();
    let a = first.open();
    let b = second.open();
    push(&a, "\"a\"");
    push(&b, "\"b\"");
    let task_a = a.pull(&lease(60_000)).unwrap().unwrap();
    let task_b = b.pull(&lease(60_000)).unwrap().unwrap();

    let refusals = [
        b.finish(task_a.receipt()).unwrap_err(),
        b.fail(task_a.receipt(), "no").unwrap_err(),
        b.extend(task_a.receipt(), Duration::from_secs(60))
            .unwrap_err(),
        b.finish_batch(&[task_a.receipt()]).unwrap_err(),
    ];
    for err in refusals {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert!(err.message().contains("another queue store"), "{err}");
    }
    assert_eq!(
        b.count(TaskState::Leased).unwrap(),
        1,
        "b's task is still held"
    );
    b.finish(task_b.receipt()).expect("by its holder");
    a.finish(task_a.receipt()).expect("by its holder");
}

#[test]
fn a_schema_name_of_63_bytes_pushes_pulls_and_waits() {
    let Some(scratch) = scratch("long_schema_name") else {
        return;
    };
    let server = scratch.server().unwrap();
    let name = format!("tq_long_{}", "s".repeat(55));
    assert_eq!(name.len(), 63);
    postgres_client(&server.url)
        .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
        .unwrap();
    let mut options = normal(&scratch);
    options.postgres_schema(&name).unwrap();
    let waiter = wait_for_a_task(
        named_url(&scratch, "tq_test_long_waiter"),
        options.clone(),
        Duration::from_secs(20),
    );
    let queue = Queue::open(&server.url, &options).unwrap();
    thread::sleep(Duration::from_millis(300));
    let id = push(&queue, "\"wake up\"");
    assert_eq!(waiter.join().unwrap(), Some(id), "the waiting pull got it");
    push(&queue, "2");
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    queue.fail(task.receipt(), "again").unwrap();
    assert_eq!(queue.recover().unwrap(), 0);
    postgres_client(&server.url)
        .batch_execute(&format!("DROP SCHEMA \"{name}\" CASCADE"))
        .unwrap();
}

/// A database of its own on the test server, with `pg_stat_statements`,
/// so that the statistics hold one test's statements only (`BEGIN` and
/// `COMMIT` name no schema); dropped with it.
struct StatsDatabase {
    admin: postgres::Client,
    client: postgres::Client,
    name: String,
    url: String,
    oid: u32,
}

impl StatsDatabase {
    /// `None`, after saying why `test` is skipped, when the server has no
    /// `pg_stat_statements` loaded.
    fn create(scratch: &Scratch, test: &str) -> Option<StatsDatabase> {
        let url = &scratch.server().unwrap().url;
        let name = format!("tq_{test}_{}", std::process::id());
        let mut admin = postgres_client(url);
        // Two calls: CREATE DATABASE runs in no transaction, not even the
        // implicit one of several statements sent at once.
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        let url = format!("{}/{name}", url.rsplit_once('/').unwrap().0);
        let mut client = postgres_client(&url);
        let loaded = client.batch_execute(
            "CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT 1 FROM pg_stat_statements",
        );
        let oid = client
            .query_one(
                "SELECT oid FROM pg_database WHERE datname = current_database()",
                &[],
            )
            .unwrap()
            .get(0);
        let database = StatsDatabase {
            admin,
            client,
            name,
            url,
            oid,
        };
        if let Err(err) = loaded {
            let _ = std::io::Write::write_fmt(
                &mut std::io::stderr(),
                format_args!(
                    "skipped {test}: the server has no pg_stat_statements loaded \
                     (tests/postgres/cluster.sh loads it): {err}\n"
                ),
            );
            return None;
        }
        Some(database)
    }

    fn reset(&mut self) {
        self.client
            .execute("SELECT pg_stat_statements_reset(0, $1, 0)", &[&self.oid])
            .unwrap();
    }

    /// What the server ran in the database since the last reset (the
    /// listener's heartbeats and the test's own questions left out): each
    /// statement's text, calls and plans.
    fn statements_run(&mut self) -> Vec<(String, i64, i64)> {
        self.client
            .query(
                "SELECT query, calls, plans FROM pg_stat_statements
                 WHERE dbid = $1 AND query NOT LIKE '%holders%'
                   AND query NOT LIKE '%pg_stat_statements%'",
                &[&self.oid],
            )
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect()
    }
}

impl Drop for StatsDatabase {
    fn drop(&mut self) {
        let _ = self
            .admin
            .batch_execute(&format!("DROP DATABASE {} WITH (FORCE)", self.name));
    }
}

#[test]
fn each_write_is_one_statement_planned_once_per_connection() {
    let Some(scratch) = scratch("one_round_trip") else {
        return;
    };
    let Some(mut stats) = StatsDatabase::create(&scratch, "one_round_trip") else {
        return;
    };
    let mut options = OpenOptions::new();
    options.pool_size(1).unwrap();
    let queue = Queue::open(&stats.url, &options).unwrap();
    // A backlog the server knows of: planned for the values at hand, a
    // claim would then be planned at every call.
    const BACKLOG: usize = 10_000;
    for _ in 0..BACKLOG / 1000 {
        queue
            .push_batch(&vec!["\"backlog\""; 1000], &PushOptions::new())
            .unwrap();
    }
    stats.client.batch_execute("ANALYZE tq.tasks").unwrap();
    const CALLS: usize = 100;
    let one = PullOptions::new();
    // Every statement prepared (and planned) before counting.
    push(&queue, "0");
    let warm = queue.pull(&one).unwrap().unwrap();
    queue
        .extend(warm.receipt(), Duration::from_secs(60))
        .unwrap();
    queue.fail(warm.receipt(), "warming up").unwrap();
    push(&queue, "0");
    let warm = queue.pull(&one).unwrap().unwrap();
    queue.finish(warm.receipt()).unwrap();

    let mut measure = |what: &str, work: &mut dyn FnMut()| {
        stats.reset();
        work();
        let run = stats.statements_run();
        let calls: i64 = run.iter().map(|(_, calls, _)| calls).sum();
        assert_eq!(
            calls, CALLS as i64,
            "{CALLS} {what}s are {CALLS} statements, no BEGIN or COMMIT: {run:#?}"
        );
        let plans: i64 = run.iter().map(|(_, _, plans)| plans).sum();
        // Only new statistics of the table (autovacuum's ANALYZE) make a
        // prepared statement be planned again.
        assert!(
            plans <= 1,
            "{CALLS} {what}s were planned {plans} times: {run:#?}"
        );
    };
    measure("push", &mut || {
        for n in 0..CALLS {
            push(&queue, &n.to_string());
        }
    });
    let mut tasks = Vec::new();
    measure("pull", &mut || {
        for _ in 0..CALLS {
            tasks.push(queue.pull(&one).unwrap().unwrap());
        }
    });
    measure("extend", &mut || {
        for task in &tasks {
            queue
                .extend(task.receipt(), Duration::from_secs(60))
                .unwrap();
        }
    });
    let (failing, finishing) = tasks.split_at(CALLS / 2);
    measure("finish or fail", &mut || {
        for task in failing {
            queue.fail(task.receipt(), "failed").unwrap();
        }
        for task in finishing {
            queue.finish(task.receipt()).unwrap();
        }
    });
    // Two pushed to warm up and CALLS more, one of them finished then and
    // half of the CALLS pulled now.
    assert_eq!(
        queue.count(TaskState::Pending).unwrap(),
        (BACKLOG + 2 + CALLS - 1 - CALLS / 2) as u64
    );
}

#[test]
fn claims_and_finishes_made_at_once_by_threads_share_statements() {
    let Some(scratch) = scratch("coalesced") else {
        return;
    };
    let Some(mut stats) = StatsDatabase::create(&scratch, "coalesced") else {
        return;
    };
    const THREADS: usize = 8;
    const TASKS: usize = 800;
    let queue = Queue::open(&stats.url, &OpenOptions::new()).unwrap();
    queue
        .push_batch(&vec!["1"; TASKS], &PushOptions::new())
        .unwrap();
    let warm = queue.pull(&PullOptions::new()).unwrap().unwrap();
    queue.finish(warm.receipt()).unwrap();
    stats.reset();
    let finished: Vec<i64> = thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    let mut finished = Vec::new();
                    while let Some(task) = queue.pull(&PullOptions::new()).unwrap() {
                        queue.finish(task.receipt()).expect("each finish its own");
                        finished.push(task.id());
                    }
                    finished
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    let distinct: std::collections::HashSet<i64> = finished.iter().copied().collect();
    assert_eq!(finished.len(), TASKS - 1, "every task finished");
    assert_eq!(distinct.len(), finished.len(), "none finished twice");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 0);
    let run = stats.statements_run();
    let calls = |starting: &str| -> i64 {
        run.iter()
            .filter(|(query, _, _)| query.contains(starting))
            .map(|(_, calls, _)| calls)
            .sum()
    };
    let (claims, finishes) = (calls("ready AS"), calls("deleted AS"));
    // Each thread's last pull came back empty.
    let pulls = (TASKS - 1 + THREADS) as i64;
    assert!(
        claims > 0 && claims < pulls,
        "{pulls} pulls from {THREADS} threads made {claims} claims: none shared one"
    );
    assert!(
        finishes > 0 && finishes < (TASKS - 1) as i64,
        "{} finishes from {THREADS} threads made {finishes} statements: none shared one",
        TASKS - 1
    );

    // The same with finish_and_pull: each thread finishes a task and
    // claims the next in one call.
    queue
        .push_batch(&vec!["2"; TASKS], &PushOptions::new())
        .unwrap();
    stats.reset();
    let finished: Vec<i64> = thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    let mut finished = Vec::new();
                    let mut next = queue.pull(&PullOptions::new()).unwrap();
                    while let Some(task) = next {
                        next = queue
                            .finish_and_pull(task.receipt(), &PullOptions::new())
                            .expect("each finish its own");
                        finished.push(task.id());
                    }
                    finished
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|worker| worker.join().unwrap())
            .collect()
    });
    let distinct: std::collections::HashSet<i64> = finished.iter().copied().collect();
    assert_eq!(finished.len(), TASKS, "every task finished");
    assert_eq!(distinct.len(), finished.len(), "none finished twice");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 0);
    let run = stats.statements_run();
    let finishes = run
        .iter()
        .filter(|(query, _, _)| query.contains("deleted AS"))
        .map(|(_, calls, _)| calls)
        .sum::<i64>();
    assert!(
        finishes > 0 && finishes < TASKS as i64,
        "{TASKS} finish_and_pulls from {THREADS} threads made {finishes} finish statements: \
         none shared one"
    );
}

/// A finish frees a slot of a concurrency limit, but tells the waiters of
/// other clients only while a pull waits for one: a notification holds a
/// lock of the whole database from its commit until the flush ends, so
/// finishes that all notified would commit one after another.
#[test]
fn a_finish_at_a_limited_queue_notifies_only_while_a_pull_waits_for_a_slot() {
    use postgres::fallible_iterator::FallibleIterator;

    let Some(scratch) = scratch("slot_wanted") else {
        return;
    };
    let server = scratch.server().unwrap();
    let (worker, waiter) = worker_and_waiter_at_a_limit_of_one(&scratch);
    let pushed: Vec<i64> = ["1", "2", "3"].iter().map(|p| push(&worker, p)).collect();
    let channel = format!("tq_{}", server.schema);
    let mut listener = postgres_client(&server.url);
    listener
        .batch_execute(&format!("LISTEN \"{channel}\""))
        .unwrap();
    // How many notifications for the queue came from commits before now:
    // they arrive in commit order, before a marker sent now.
    let mut told = || -> usize {
        listener
            .execute("SELECT pg_notify($1, 'marker')", &[&channel])
            .unwrap();
        let mut count = 0;
        let mut notifications = listener.notifications();
        let mut arriving = notifications.timeout_iter(Duration::from_secs(10));
        while let Some(notification) = arriving.next().unwrap() {
            match notification.payload() {
                "marker" => return count,
                "default" => count += 1,
                _ => {}
            }
        }
        panic!("the marker never came back");
    };
    told();
    let first = worker.pull(&PullOptions::new()).unwrap().unwrap();
    worker.finish(first.receipt()).unwrap();
    assert_eq!(told(), 0, "a finish told of its slot with no pull waiting");

    let second = worker.pull(&PullOptions::new()).unwrap().unwrap();
    let wait = waiting_up_to(Duration::from_secs(20));
    let mut admin = postgres_client(&server.url);
    thread::scope(|scope| {
        let waiting = scope.spawn(|| waiter.pull(&wait).unwrap());
        slot_wanted_after(&mut admin, &server.schema, None);
        worker.finish(second.receipt()).unwrap();
        let task = waiting.join().unwrap().expect("woken by the finish");
        assert_eq!(task.id(), pushed[2]);
    });
    assert!(told() >= 1, "the finish told no one of its slot");
}

/// Handles of two clients (their connections named apart) on the default
/// queue of `scratch`'s schema, limited to one task leased at once: a
/// worker's, and a waiter's.
fn worker_and_waiter_at_a_limit_of_one(scratch: &Scratch) -> (Queue, Queue) {
    let worker = Queue::open(&named_url(scratch, "tq_test_worker"), &normal(scratch)).unwrap();
    let waiter = Queue::open(&named_url(scratch, "tq_test_waiter"), &normal(scratch)).unwrap();
    worker.set_concurrency_limit(Some(1)).unwrap();
    (worker, waiter)
}

/// Options of a pull that waits up to `wait` for a task.
fn waiting_up_to(wait: Duration) -> PullOptions {
    let mut options = PullOptions::new();
    options.wait(wait).unwrap();
    options
}

/// Waits up to 10 s until the default queue of `schema` has a want of a
/// slot posted later than `after`, and returns until when it is posted.
fn slot_wanted_after(admin: &mut postgres::Client, schema: &str, after: Option<i64>) -> i64 {
    let sql = format!("SELECT slots_wanted_until FROM \"{schema}\".queues WHERE queue = 'default'");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let until: Option<i64> = admin.query_one(&sql, &[]).unwrap().get(0);
        if let Some(until) = until.filter(|&until| after.is_none_or(|after| until > after)) {
            return until;
        }
        assert!(
            Instant::now() < deadline,
            "no want of a slot posted after {after:?} within 10 s"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// A want of a slot lapses (so that one left by a pull that went away
/// stops costing finishes a notification): a pull still waiting posts it
/// again before then, however long it waits, so a finish still tells it.
#[test]
fn a_pull_waiting_at_the_limit_posts_its_want_of_a_slot_again_before_it_lapses() {
    let Some(scratch) = scratch("slot_want_renewed") else {
        return;
    };
    let server = scratch.server().unwrap();
    let (worker, waiter) = worker_and_waiter_at_a_limit_of_one(&scratch);
    push(&worker, "1");
    let behind = push(&worker, "2");
    let held = worker.pull(&PullOptions::new()).unwrap().unwrap();
    let wait = waiting_up_to(Duration::from_secs(30));
    let mut admin = postgres_client(&server.url);
    thread::scope(|scope| {
        let waiting = scope.spawn(|| waiter.pull(&wait).unwrap());
        slot_wanted_after(&mut admin, &server.schema, None);
        // Past the claim's second look, which posts it once more at once.
        thread::sleep(Duration::from_millis(500));
        let posted = slot_wanted_after(&mut admin, &server.schema, None);
        slot_wanted_after(&mut admin, &server.schema, Some(posted));
        worker.finish(held.receipt()).unwrap();
        let task = waiting.join().unwrap().expect("woken by the finish");
        assert_eq!(task.id(), behind);
    });
}

/// A client of the application's own, beside tq: what pushes and finishes
/// through tq's SQL functions.
fn application_client(scratch: &Scratch) -> postgres::Client {
    let server = scratch.server().expect("a PostgreSQL scratch");
    let mut client = postgres_client(&server.url);
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS \"{0}\".orders (id int PRIMARY KEY);
             CREATE TABLE IF NOT EXISTS \"{0}\".receipts (task bigint PRIMARY KEY);",
            server.schema
        ))
        .unwrap();
    client
}

/// `sql` run as the application would, `$schema` naming the scratch's schema.
fn sql(scratch: &Scratch, sql: &str) -> String {
    sql.replace(
        "$schema",
        &format!("\"{}\"", scratch.server().unwrap().schema),
    )
}

/// The SQLSTATE and the message of a failed statement.
fn sql_error(err: &postgres::Error) -> (String, String) {
    let db = err.as_db_error().expect("an error from the server");
    (db.code().code().to_owned(), db.message().to_owned())
}

/// Checks that `tx` was aborted by an error, as PostgreSQL aborts it, and
/// commits it, which rolls it back.
fn assert_aborted(mut tx: postgres::Transaction<'_>) {
    let err = tx.query_one("SELECT 1", &[]).unwrap_err();
    assert_eq!(sql_error(&err).0, "25P02", "the transaction is aborted");
    tx.commit().unwrap();
}

#[test]
fn a_push_through_sql_commits_with_the_application_and_a_rollback_leaves_nothing() {
    use postgres::fallible_iterator::FallibleIterator;

    let Some(scratch) = scratch("sql_push_commit") else {
        return;
    };
    let queue = scratch.open();
    let waiter = Queue::open(
        &named_url(&scratch, "tq_test_sql_waiter"),
        &normal(&scratch),
    )
    .unwrap();
    let mut app = application_client(&scratch);
    // What every tq process hears: the schema's channel (a short schema
    // name's is `tq_` and the name).
    let mut listener = postgres_client(&scratch.server().unwrap().url);
    listener
        .batch_execute(&format!(
            "LISTEN \"tq_{}\"",
            scratch.server().unwrap().schema
        ))
        .unwrap();
    let waiting = thread::spawn(move || waiter.pull(&waiting_up_to(Duration::from_secs(60))));

    let mut tx = app.transaction().unwrap();
    tx.execute(&sql(&scratch, "INSERT INTO $schema.orders VALUES (2)"), &[])
        .unwrap();
    tx.query_one(
        &sql(
            &scratch,
            "SELECT $schema.push('rolled_back', '{\"order\": 2}')",
        ),
        &[],
    )
    .unwrap();
    tx.rollback().unwrap();

    let mut tx = app.transaction().unwrap();
    tx.execute(&sql(&scratch, "INSERT INTO $schema.orders VALUES (1)"), &[])
        .unwrap();
    let id: i64 = tx
        .query_one(
            &sql(&scratch, "SELECT $schema.push('default', '{\"order\": 1}')"),
            &[],
        )
        .unwrap()
        .get(0);
    tx.commit().unwrap();

    // Notifications come in commit order: the rolled-back push sent none
    // before the committed one.
    let heard = listener
        .notifications()
        .timeout_iter(Duration::from_secs(60))
        .next()
        .unwrap()
        .expect("the commit notifies");
    assert_eq!(heard.payload(), "default");
    let task = waiting
        .join()
        .unwrap()
        .unwrap()
        .expect("the waiting pull is woken");
    assert_eq!((task.id(), task.payload()), (id, "{\"order\": 1}"));

    assert_eq!(queue.queue_names().unwrap(), ["default"]);
    assert_eq!(queue.last_id().unwrap(), id, "one task stored");
    let orders: Vec<i32> = app
        .query(&sql(&scratch, "SELECT id FROM $schema.orders"), &[])
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(orders, [1]);
}

#[test]
fn a_push_through_sql_refuses_what_the_api_refuses_and_writes_nothing() {
    let Some(scratch) = scratch("sql_push_refused") else {
        return;
    };
    let queue = scratch.open();
    let mut app = application_client(&scratch);
    let long_name = "q".repeat(tq::MAX_QUEUE_NAME_LEN + 1);
    let too_long = format!(
        "SELECT $schema.push('default', repeat('1', {}))",
        tq::MAX_PAYLOAD_LEN + 1
    );
    let cases: [(&str, &str, &str); 11] = [
        (
            "SELECT $schema.push('default', '{\"a\": ')",
            "22P02",
            "the payload is not JSON",
        ),
        (
            &too_long,
            "22023",
            "the payload is 1000000001 bytes; this queue's limit is 1000000000",
        ),
        (
            "SELECT $schema.push('default', '1', '{\"priority\": 1, \"bogus\": 2}')",
            "22023",
            "unknown push option 'bogus'",
        ),
        (
            "SELECT $schema.push('', '1')",
            "22023",
            "a queue name must be 1 to 128 bytes long, got 0 bytes",
        ),
        (
            &format!("SELECT $schema.push('{long_name}', '1')"),
            "22023",
            "a queue name must be 1 to 128 bytes long, got 129 bytes",
        ),
        (
            "SELECT $schema.push('default', '1', '{\"after\": [12345]}')",
            "22023",
            "queue 'default' has no task 12345 to wait for",
        ),
        (
            "SELECT $schema.push('default', '1', '{\"max_attempts\": 0}')",
            "22023",
            "max attempts must be at least 1",
        ),
        (
            "SELECT $schema.push('default', '1', '{\"unique_for_ms\": 10}')",
            "22023",
            "a unique window needs a unique key",
        ),
        (
            "SELECT $schema.push('default', '1', '{\"group\": \"g\", \"group_max_at_once\": 0}')",
            "22023",
            "a group delivers 1 to 1000 of its tasks at once, got 0",
        ),
        (
            "SELECT $schema.push('default', '1', '{\"on_parent_failure\": \"maybe\"}')",
            "22023",
            "on_parent_failure is 'cancel' or 'run_anyway'",
        ),
        (
            "SELECT $schema.push('default', '1', '{\"delay_ms\": 1, \"run_at_unix_ms\": 1}')",
            "22023",
            "a push takes a delay or a run-at time, not both",
        ),
    ];
    for (statement, code, message) in cases {
        let mut tx = app.transaction().unwrap();
        tx.execute(&sql(&scratch, "INSERT INTO $schema.orders VALUES (1)"), &[])
            .unwrap();
        let err = tx.query_one(&sql(&scratch, statement), &[]).unwrap_err();
        let (got_code, got_message) = sql_error(&err);
        assert_eq!(got_code, code, "{statement}: {got_message}");
        assert!(got_message.contains(message), "{statement}: {got_message}");
        assert_aborted(tx);
    }
    assert_eq!(queue.last_id().unwrap(), 0, "nothing was stored");
    assert!(queue.queue_names().unwrap().is_empty());
    let orders = app
        .query(&sql(&scratch, "SELECT id FROM $schema.orders"), &[])
        .unwrap();
    assert!(orders.is_empty());
}

#[test]
fn expiries_and_deadlines_through_sql_are_the_apis() {
    let Some(scratch) = scratch("sql_push_limits") else {
        return;
    };
    let queue = scratch.open();
    let mut app = application_client(&scratch);
    let mut push = |options: &str| -> Result<i64, postgres::Error> {
        app.query_one(
            &sql(
                &scratch,
                &format!("SELECT $schema.push('default', '1', '{options}')"),
            ),
            &[],
        )
        .map(|row| row.get(0))
    };
    let expired = push(r#"{"expire_at_unix_ms": 1000, "unique_key": "k"}"#).unwrap();
    let info = queue.task(expired).unwrap().unwrap();
    assert_eq!(
        (info.expires_at_unix_ms(), info.deadline_unix_ms()),
        (Some(1000), None)
    );
    // A holder of the key found keeps its own limits.
    assert_eq!(
        push(r#"{"deadline_after_ms": 60000, "unique_key": "k"}"#).unwrap(),
        expired
    );
    assert_eq!(
        queue.task(expired).unwrap().unwrap().deadline_unix_ms(),
        None
    );
    let next = push(r#"{"deadline_after_ms": 60000}"#).unwrap();
    assert!(
        queue
            .task(next)
            .unwrap()
            .unwrap()
            .deadline_unix_ms()
            .unwrap()
            > 1000
    );
    assert_eq!(queue.pull(&PullOptions::new()).unwrap().unwrap().id(), next);
    assert_eq!(
        queue.task(expired).unwrap().unwrap().last_error(),
        Some("expired")
    );
    for (options, message) in [
        (
            r#"{"expire_after_ms": 10, "expire_at_unix_ms": 10}"#,
            "not both",
        ),
        (r#"{"deadline_after_ms": 0}"#, "between 1 ms"),
        (
            r#"{"delay_ms": 60000, "expire_after_ms": 1000}"#,
            "could never run",
        ),
    ] {
        let err = push(options).unwrap_err();
        let (code, got) = sql_error(&err);
        assert_eq!(code, "22023", "{options}: {got}");
        assert!(got.contains(message), "{options}: {got}");
    }
}

#[test]
fn debounce_and_replace_through_sql_are_the_apis() {
    let Some(scratch) = scratch("sql_push_merge") else {
        return;
    };
    let queue = scratch.open();
    let mut app = application_client(&scratch);
    let mut push = |payload: &str, options: &str| -> Result<i64, postgres::Error> {
        app.query_one(
            &sql(
                &scratch,
                "SELECT $schema.push('default', $1, $2::text::jsonb)",
            ),
            &[&payload, &options],
        )
        .map(|row| row.get(0))
    };
    let merging = r#"{"unique_key": "doc", "replace_pending": true, "delay_ms": 3600000,
                      "debounce_max_ms": 7200000}"#;
    let id = push("1", r#"{"unique_key": "doc"}"#).unwrap();
    assert_eq!(push("2", merging).unwrap(), id);
    let merged = queue.task(id).unwrap().unwrap();
    assert_eq!(merged.payload(), "2");
    assert!(merged.run_at_unix_ms() > merged.created_at_unix_ms() + 3_000_000);
    assert!(
        queue.pull(&PullOptions::new()).unwrap().is_none(),
        "put off"
    );
    assert_eq!(
        push("3", r#"{"unique_key": "doc", "debounce_max_ms": 1}"#).unwrap(),
        id
    );
    let task = queue.pull(&PullOptions::new()).unwrap().expect("due again");
    assert_eq!((task.id(), task.payload()), (id, "2"));
    assert_eq!(
        push("4", merging).unwrap(),
        id,
        "a delivered task: as before"
    );
    assert_eq!(queue.task(id).unwrap().unwrap().payload(), "2");
    queue.finish(task.receipt()).unwrap();

    for (options, message) in [
        (r#"{"replace_pending": true}"#, "needs a unique key"),
        (
            r#"{"unique_key": "k", "replace_pending": "yes"}"#,
            "true or false",
        ),
        (
            r#"{"unique_key": "k", "debounce_max_ms": 0}"#,
            "between 1 ms",
        ),
        (
            r#"{"unique_key": "k", "debounce_max_ms": 10, "group": "g"}"#,
            "ordered group",
        ),
        (
            &format!(r#"{{"unique_key": "k", "replace_pending": true, "after": [{id}]}}"#),
            "wait for other tasks",
        ),
    ] {
        let err = push("5", options).unwrap_err();
        let (code, got) = sql_error(&err);
        assert_eq!(code, "22023", "{options}: {got}");
        assert!(got.contains(message), "{options}: {got}");
    }
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
}

#[test]
fn unique_keys_parents_and_groups_through_sql_are_the_apis() {
    let Some(scratch) = scratch("sql_push_rules") else {
        return;
    };
    let queue = scratch.open();
    let mut app = application_client(&scratch);
    let mut push_sql = |payload: &str, options: &str| -> i64 {
        app.query_one(
            &sql(
                &scratch,
                "SELECT $schema.push('default', $1, $2::text::jsonb)",
            ),
            &[&payload, &options],
        )
        .unwrap()
        .get(0)
    };
    let keyed = |key: &str| {
        let mut options = PushOptions::new();
        options.unique_key(key).unwrap();
        options
    };

    // A key held answers the holder's id, whichever way each was pushed.
    let by_api = queue.push("1", &keyed("a")).unwrap();
    assert_eq!(push_sql("2", r#"{"unique_key": "a"}"#), by_api.id());
    let by_sql = push_sql("3", r#"{"unique_key": "b"}"#);
    assert_eq!(
        queue.push("4", &keyed("b")).unwrap(),
        tq::Pushed::Duplicate(by_sql)
    );

    // A task waits for its parents until they are done.
    let child = push_sql("5", &format!(r#"{{"after": [{}, {by_sql}]}}"#, by_api.id()));
    let info = queue.task(child).unwrap().unwrap();
    assert_eq!(info.waiting_for(), [by_api.id(), by_sql]);
    for _ in 0..2 {
        let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
        assert_ne!(task.id(), child, "a blocked task is not claimed");
        queue.finish(task.receipt()).unwrap();
    }
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!(task.id(), child);
    assert_eq!(task.parents(), [by_api.id(), by_sql]);
    queue.finish(task.receipt()).unwrap();

    // Each task of a group waits for the one before it, whoever pushed it.
    let first = push_sql("6", r#"{"group": "g"}"#);
    let mut grouped = PushOptions::new();
    grouped.group("g", 1).unwrap();
    let second = queue.push("7", &grouped).unwrap().id();
    let third = push_sql("8", r#"{"group": "g", "priority": 9}"#);
    assert_eq!(queue.task(second).unwrap().unwrap().waiting_for(), [first]);
    assert_eq!(queue.task(third).unwrap().unwrap().waiting_for(), [second]);
    assert_eq!(queue.task(third).unwrap().unwrap().group(), Some("g"));
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 3);
}

#[test]
fn a_finish_through_sql_commits_with_the_workers_write_and_refuses_a_stale_receipt() {
    let Some(scratch) = scratch("sql_finish") else {
        return;
    };
    let queue = scratch.open();
    let mut app = application_client(&scratch);
    let id = push(&queue, "{\"order\": 1}");
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    let receipt = task.receipt();

    let mut tx = app.transaction().unwrap();
    tx.execute(
        &sql(&scratch, "INSERT INTO $schema.receipts VALUES ($1)"),
        &[&id],
    )
    .unwrap();
    tx.query_one(
        &sql(&scratch, "SELECT $schema.finish($1, $2)"),
        &[&receipt.id(), &receipt.token()],
    )
    .unwrap();
    tx.commit().unwrap();
    assert_eq!(queue.task(id).unwrap(), None, "finished and deleted");
    assert_eq!(
        queue.finish(receipt).unwrap_err().kind(),
        ErrorKind::NotHeld
    );

    // The same receipt again: refused, and the write beside it rolls back.
    let mut tx = app.transaction().unwrap();
    tx.execute(&sql(&scratch, "INSERT INTO $schema.orders VALUES (1)"), &[])
        .unwrap();
    let err = tx
        .query_one(
            &sql(&scratch, "SELECT $schema.finish($1, $2)"),
            &[&receipt.id(), &receipt.token()],
        )
        .unwrap_err();
    let (code, message) = sql_error(&err);
    assert_eq!(code, "55000");
    assert!(
        message.contains(&format!("task {id} is not held by this delivery")),
        "{message}"
    );
    assert_aborted(tx);
    assert!(app
        .query(&sql(&scratch, "SELECT id FROM $schema.orders"), &[])
        .unwrap()
        .is_empty());

    // With history, the task is kept as done, as the API's finish keeps it.
    let kept = push(&queue, "2");
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    app.query_one(
        &sql(
            &scratch,
            "SELECT $schema.finish($1, $2, keep_history => true)",
        ),
        &[&task.receipt().id(), &task.receipt().token()],
    )
    .unwrap();
    assert_eq!(queue.task(kept).unwrap().unwrap().state(), TaskState::Done);
}

#[test]
fn a_trigger_pushes_through_sql_in_the_transaction_of_its_statement() {
    let Some(scratch) = scratch("sql_push_trigger") else {
        return;
    };
    let queue = scratch.open();
    let mut app = application_client(&scratch);
    app.batch_execute(&sql(
        &scratch,
        "CREATE FUNCTION $schema.order_placed() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             PERFORM $schema.push('default', json_build_object('order', NEW.id)::text);
             RETURN NEW;
         END $$;
         CREATE TRIGGER placed AFTER INSERT ON $schema.orders
             FOR EACH ROW EXECUTE FUNCTION $schema.order_placed();",
    ))
    .unwrap();
    app.execute(&sql(&scratch, "INSERT INTO $schema.orders VALUES (7)"), &[])
        .unwrap();
    let mut tx = app.transaction().unwrap();
    tx.execute(&sql(&scratch, "INSERT INTO $schema.orders VALUES (8)"), &[])
        .unwrap();
    tx.rollback().unwrap();
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    assert_eq!(task.payload(), r#"{"order" : 7}"#);
    assert!(queue.pull(&PullOptions::new()).unwrap().is_none());
}

#[test]
fn a_push_through_sql_into_a_full_queue_fails_with_53400_and_writes_nothing() {
    let Some(scratch) = scratch("sql_push_full") else {
        return;
    };
    let queue = scratch.open();
    queue.set_max_pending(Some(1)).unwrap();
    let mut app = application_client(&scratch);
    let push = sql(&scratch, "SELECT $schema.push('default', '1')");
    app.query_one(&push, &[]).unwrap();
    let err = app.query_one(&push, &[]).unwrap_err();
    let (code, message) = sql_error(&err);
    assert_eq!(code, "53400");
    assert!(message.contains("is full"), "{message}");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
    queue.pull(&PullOptions::new()).unwrap().unwrap();
    app.query_one(&push, &[]).unwrap();
}

#[test]
fn a_step_through_sql_commits_with_the_workers_write_and_refuses_a_stale_receipt() {
    let Some(scratch) = scratch("sql_step") else {
        return;
    };
    let queue = scratch.open();
    let mut app = application_client(&scratch);
    let id = push(&queue, "{\"order\": 1}");
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();
    let receipt = task.receipt();
    let step = sql(&scratch, "SELECT $schema.step($1, $2, $3, $4)");

    // Rolled back with the application's row: not recorded.
    let mut tx = app.transaction().unwrap();
    tx.execute(&sql(&scratch, "INSERT INTO $schema.orders VALUES (1)"), &[])
        .unwrap();
    let stored: bool = tx
        .query_one(
            &step,
            &[&id, &receipt.token(), &"charge", &"{\"charge\": 1}"],
        )
        .unwrap()
        .get(0);
    assert!(stored);
    tx.rollback().unwrap();
    assert_eq!(queue.step_output(receipt, "charge").unwrap(), None);

    let mut tx = app.transaction().unwrap();
    tx.execute(&sql(&scratch, "INSERT INTO $schema.orders VALUES (1)"), &[])
        .unwrap();
    tx.query_one(
        &step,
        &[&id, &receipt.token(), &"charge", &"{\"charge\": 1}"],
    )
    .unwrap();
    tx.commit().unwrap();
    assert_eq!(
        queue.step_output(receipt, "charge").unwrap().as_deref(),
        Some("{\"charge\": 1}")
    );
    let again: bool = app
        .query_one(&step, &[&id, &receipt.token(), &"charge", &"2"])
        .unwrap()
        .get(0);
    assert!(!again, "the first write wins");

    for (name, output, code) in [("mail", "{nope", "22P02"), ("", "1", "22023")] {
        let err = app
            .query_one(&step, &[&id, &receipt.token(), &name, &output])
            .unwrap_err();
        assert_eq!(sql_error(&err).0, code, "{name:?} {output:?}");
    }
    queue.finish(receipt).unwrap();
    let err = app
        .query_one(&step, &[&id, &receipt.token(), &"mail", &"1"])
        .unwrap_err();
    let (code, message) = sql_error(&err);
    assert_eq!(code, "55000");
    assert!(message.contains("not held"), "{message}");
    let left: i64 = app
        .query_one(&sql(&scratch, "SELECT count(*) FROM $schema.steps"), &[])
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "removed with the task finished without history");
}
