//! Batches and wake-ups: batch push and batch pull+finish against the same
//! work done with rusqlite alone, and how soon a waiting pull sees a push
//! from its own process and from another one.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};
use serde_json::{json, Value};
use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue, TaskState};

use super::{
    bare_transaction, check, interleave, label, now_ms, print_line, show_stats, thousands, timed,
    BenchDir, Config, Stats, Timing, BARE_SCHEMA, PAYLOAD,
};

/// Tasks per batch.
pub const BATCH: usize = 1000;

/// The batch push rate the design aims for at `normal`, tasks per second.
const BATCH_PUSH_TARGET: f64 = 500_000.0;

/// Batches are measured at `normal`: at `full` a batch costs one flush,
/// which the single-operation figures already show.
const DURABILITY: Durability = Durability::Normal;

/// The environment variable that makes this binary an idle waiting child
/// of [`idle_waiters`]: its value is the file's path.
pub const IDLE_ROLE: &str = "TQ_BENCH_IDLE_WAITER";

/// Idle waiting processes for [`idle_waiters`].
const IDLE_WAITERS: usize = 100;

/// The environment variable that makes this binary a waiting child.
pub const WAITER_ROLE: &str = "TQ_BENCH_WAITER";

pub struct BatchRow {
    operation: &'static str,
    bare: Stats,
    tq: Stats,
}

pub fn measure(config: &Config, dir: &BenchDir) -> super::Result<Vec<BatchRow>> {
    let batches = config.batches;
    let cases: Vec<super::Case<'_, (Timing, Timing)>> = vec![
        ("bare".into(), Box::new(|| bare_batches(dir, batches))),
        ("tq".into(), Box::new(|| tq_batches(dir, batches))),
    ];
    let mut results = interleave("batches", config.runs, cases)?.into_iter();
    let (bare, tq) = (results.next().unwrap(), results.next().unwrap());
    let split = |runs: &[(Timing, Timing)]| {
        (
            Stats::of(runs.iter().map(|run| run.0)),
            Stats::of(runs.iter().map(|run| run.1)),
        )
    };
    let ((bare_push, bare_pull), (tq_push, tq_pull)) = (split(&bare), split(&tq));
    Ok(vec![
        BatchRow {
            operation: "push",
            bare: bare_push,
            tq: tq_push,
        },
        BatchRow {
            operation: "pull+finish",
            bare: bare_pull,
            tq: tq_pull,
        },
    ])
}

/// `batches` batches pushed, then claimed and deleted, one transaction per
/// batch and step, with rusqlite alone.
fn bare_batches(dir: &BenchDir, batches: u64) -> super::Result<(Timing, Timing)> {
    let file = dir.fresh("bare-batch");
    let conn = Connection::open(file.path())?;
    conn.pragma_update(None, "journal_mode", "wal")?;
    conn.pragma_update(None, "synchronous", label(DURABILITY))?;
    conn.execute_batch(BARE_SCHEMA)?;
    let tasks = batches * BATCH as u64;
    let push = timed(tasks, || {
        for _ in 0..batches {
            let now = now_ms();
            bare_transaction(&conn, || {
                let mut insert = conn.prepare_cached(
                    "INSERT INTO tasks (state, payload, created_at, run_at) VALUES (0, ?1, ?2, ?2)",
                )?;
                for _ in 0..BATCH {
                    insert.execute(params![PAYLOAD, now])?;
                }
                Ok(())
            })?;
        }
        Ok(())
    })?;
    let pull_finish = timed(tasks, || {
        for _ in 0..batches {
            let now = now_ms();
            let ids: Vec<i64> = bare_transaction(&conn, || {
                let mut claim = conn.prepare_cached(
                    "UPDATE tasks SET state = 1
                     WHERE id IN (SELECT id FROM tasks WHERE state = 0 AND run_at <= ?1
                                  ORDER BY run_at, id LIMIT ?2)
                     RETURNING id, payload",
                )?;
                let rows = claim.query_map(params![now, BATCH as i64], |row| {
                    Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?))
                })?;
                Ok(rows
                    .map(|row| row.map(|(id, _)| id))
                    .collect::<Result<_, _>>()?)
            })?;
            check(ids.len() == BATCH, "bare batch claim came back short")?;
            bare_transaction(&conn, || {
                let mut delete = conn.prepare_cached("DELETE FROM tasks WHERE id = ?1")?;
                for id in &ids {
                    delete.execute([id])?;
                }
                Ok(())
            })?;
        }
        Ok(())
    })?;
    Ok((push, pull_finish))
}

fn tq_batches(dir: &BenchDir, batches: u64) -> super::Result<(Timing, Timing)> {
    let file = dir.fresh("tq-batch");
    let queue = Queue::open(file.path(), OpenOptions::new().durability(DURABILITY))?;
    let payloads = vec![PAYLOAD; BATCH];
    let options = PushOptions::new();
    let tasks = batches * BATCH as u64;
    let push = timed(tasks, || {
        for _ in 0..batches {
            queue.push_batch(&payloads, &options)?;
        }
        Ok(())
    })?;
    check(
        queue.count(TaskState::Pending)? == tasks,
        "tq batch push lost tasks",
    )?;
    let pull_options = PullOptions::new();
    let pull_finish = timed(tasks, || {
        for _ in 0..batches {
            let claimed = queue.pull_batch(BATCH, &pull_options)?;
            check(claimed.len() == BATCH, "tq batch pull came back short")?;
            let receipts: Vec<_> = claimed.iter().map(|task| task.receipt()).collect();
            let held = queue.finish_batch(&receipts)?;
            check(held.iter().all(|&held| held), "tq batch finish lost a task")?;
        }
        Ok(())
    })?;
    check(
        queue.count(TaskState::Pending)? == 0,
        "tq batches left tasks",
    )?;
    Ok((push, pull_finish))
}

pub fn print(config: &Config, rows: &[BatchRow]) {
    println!(
        "\nBatches of {} at {} ({} tasks per run; bare pulls with one UPDATE ... LIMIT and deletes in one transaction)",
        thousands(BATCH as u64),
        label(DURABILITY),
        thousands(config.batches * BATCH as u64)
    );
    let widths = [13, 33, 33, 0];
    print_line(&widths, &["operation", "bare SQLite", "tq", "tq/bare"]);
    for row in rows {
        print_line(
            &widths,
            &[
                row.operation,
                &show_stats(&row.bare),
                &show_stats(&row.tq),
                &format!("{:.2}", row.tq.median / row.bare.median),
            ],
        );
    }
    if let Some(push) = rows.iter().find(|row| row.operation == "push") {
        let verdict = if push.tq.median >= BATCH_PUSH_TARGET {
            "reached"
        } else {
            "NOT reached"
        };
        println!(
            "batch push target of {} tasks/s: {verdict}",
            thousands(BATCH_PUSH_TARGET as u64)
        );
    }
}

impl BatchRow {
    pub fn to_json(&self) -> Value {
        json!({
            "operation": self.operation,
            "batch": BATCH,
            "durability": label(DURABILITY),
            "bare": self.bare.to_json(),
            "tq": self.tq.to_json(),
        })
    }
}

// ---------------------------------------------------------------------------
// Wake-up latency

/// Milliseconds from the start of a push to the return of the pull it woke.
pub struct Latency {
    pub label: &'static str,
    pub samples: Vec<f64>,
}

impl Latency {
    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.samples.clone();
        sorted.sort_by(f64::total_cmp);
        let index = ((sorted.len() - 1) as f64 * p).round() as usize;
        sorted[index]
    }

    pub fn to_json(&self) -> Value {
        json!({
            "case": self.label,
            "p50_ms": self.percentile(0.50),
            "p99_ms": self.percentile(0.99),
            "max_ms": self.percentile(1.0),
            "samples": self.samples.len(),
        })
    }
}

/// How long a waiting pull waits before giving up: far beyond any wake-up.
const WAIT: Duration = Duration::from_secs(30);

/// A pause before each push, so that the waiter is asleep when it comes.
const SETTLE: Duration = Duration::from_millis(5);

pub fn measure_latency(config: &Config, dir: &BenchDir) -> super::Result<Vec<Latency>> {
    eprintln!("  wake-ups: {} pushes each way", config.wakeups);
    Ok(vec![
        same_process(dir, config.wakeups)?,
        other_process(dir, config.wakeups)?,
        application_commit(dir, config.wakeups)?,
    ])
}

/// The CPU time a pull waiting on an empty queue uses, in milliseconds per
/// second of waiting.
pub fn idle_cpu(config: &Config, dir: &BenchDir) -> super::Result<f64> {
    let file = dir.fresh("idle");
    let queue = Queue::open(file.path(), OpenOptions::new().durability(DURABILITY))?;
    let wait = Duration::from_secs(if config.quick { 1 } else { 5 });
    let mut options = PullOptions::new();
    options.wait(wait)?;
    // On a thread of its own, so that its CPU clock counts only the wait.
    let cpu_ms = thread::scope(|scope| {
        scope
            .spawn(|| -> tq::Result<(f64, bool)> {
                let before = thread_cpu_ms();
                let pulled = queue.pull(&options)?.is_some();
                Ok((thread_cpu_ms() - before, pulled))
            })
            .join()
    })
    .map_err(|_| "the waiting thread panicked")?;
    let (cpu_ms, pulled) = cpu_ms?;
    check(!pulled, "a task came out of an empty queue")?;
    Ok(cpu_ms / wait.as_secs_f64())
}

/// CPU time used by the calling thread so far, in milliseconds.
fn thread_cpu_ms() -> f64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec as f64 * 1000.0 + now.tv_nsec as f64 / 1e6
}

fn waiting() -> PullOptions {
    let mut options = PullOptions::new();
    options.wait(WAIT).expect("a valid wait");
    options
}

fn same_process(dir: &BenchDir, samples: u64) -> super::Result<Latency> {
    let file = dir.fresh("wake");
    let options = OpenOptions::new().durability(DURABILITY).clone();
    let queue = Queue::open(file.path(), &options)?;
    let (woke, wakes) = mpsc::channel::<Instant>();
    let waiter_queue = Queue::open(file.path(), &options)?;
    let waiter = thread::spawn(move || -> tq::Result<()> {
        let options = waiting();
        for _ in 0..samples {
            if let Some(task) = waiter_queue.pull(&options)? {
                let _ = woke.send(Instant::now());
                waiter_queue.finish(task.receipt())?;
            }
        }
        Ok(())
    });
    let mut latencies = Vec::new();
    for _ in 0..samples {
        thread::sleep(SETTLE);
        let pushed = Instant::now();
        queue.push(PAYLOAD, &PushOptions::new())?;
        let woke = wakes
            .recv_timeout(WAIT)
            .map_err(|_| "the waiter never woke")?;
        latencies.push(woke.duration_since(pushed).as_secs_f64() * 1000.0);
    }
    waiter.join().map_err(|_| "the waiter panicked")??;
    Ok(Latency {
        label: "same process",
        samples: latencies,
    })
}

/// The child's side of [`other_process`]: pulls `samples` tasks, waiting
/// for each, and prints the wall-clock time (ns) at which each pull returned.
pub fn run_waiter(path: &str, samples: u64) -> super::Result<()> {
    let queue = Queue::open(path, OpenOptions::new().durability(DURABILITY))?;
    let options = waiting();
    println!("ready");
    let mut out = std::io::stdout().lock();
    for _ in 0..samples {
        let task = queue.pull(&options)?.ok_or("no task within the wait")?;
        writeln!(out, "{}", wall_ns())?;
        out.flush()?;
        queue.finish(task.receipt())?;
    }
    Ok(())
}

/// A producer's push rate, one task per transaction at `normal`, without
/// and then with [`IDLE_WAITERS`] processes waiting on another queue of
/// the file, and the CPU those processes use together, while nothing is
/// written and while the producer pushes: what waiters that never get a
/// task cost.
pub struct IdleRow {
    waiters: usize,
    pushes_per_s: f64,
    /// All waiters' CPU time while nothing is written, in % of one core.
    waiters_cpu_idle: Option<f64>,
    /// All waiters' CPU time while the producer pushes, in % of one core.
    waiters_cpu_pushing: Option<f64>,
}

impl IdleRow {
    pub fn to_json(&self) -> Value {
        json!({
            "idle_waiters": self.waiters,
            "pushes_per_s": self.pushes_per_s,
            "waiters_cpu_percent_idle": self.waiters_cpu_idle,
            "waiters_cpu_percent_pushing": self.waiters_cpu_pushing,
        })
    }
}

pub fn idle_waiters(config: &Config, dir: &BenchDir) -> super::Result<Vec<IdleRow>> {
    let file = dir.fresh("idle-waiters");
    let producer = Queue::open(file.path(), OpenOptions::new().durability(DURABILITY))?;
    let pushes = config.ops_normal;
    let rate = || -> super::Result<f64> {
        let started = Instant::now();
        for _ in 0..pushes {
            producer.push(PAYLOAD, &PushOptions::new())?;
        }
        Ok(pushes as f64 / started.elapsed().as_secs_f64())
    };
    let alone = rate()?;
    let mut children = Vec::new();
    let measured = (|| -> super::Result<(f64, f64, f64)> {
        for _ in 0..IDLE_WAITERS {
            children.push(
                Command::new(std::env::current_exe()?)
                    .env(IDLE_ROLE, file.path())
                    .stdout(Stdio::piped())
                    .spawn()?,
            );
        }
        for child in &mut children {
            let mut line = String::new();
            BufReader::new(child.stdout.as_mut().ok_or("no pipe")?).read_line(&mut line)?;
            check(line == "ready\n", "an idle waiter did not start")?;
        }
        // Until each is asleep in its pull.
        thread::sleep(Duration::from_millis(500));
        let pids: Vec<u32> = children.iter().map(Child::id).collect();
        let window = Duration::from_secs(if config.quick { 1 } else { 5 });
        let (cpu_idle, ()) = cpu_share(&pids, || {
            thread::sleep(window);
            Ok(())
        })?;
        let (cpu_pushing, watched) = cpu_share(&pids, rate)?;
        Ok((watched, cpu_idle, cpu_pushing))
    })();
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    let (watched, cpu_idle, cpu_pushing) = measured?;
    Ok(vec![
        IdleRow {
            waiters: 0,
            pushes_per_s: alone,
            waiters_cpu_idle: None,
            waiters_cpu_pushing: None,
        },
        IdleRow {
            waiters: IDLE_WAITERS,
            pushes_per_s: watched,
            waiters_cpu_idle: Some(cpu_idle),
            waiters_cpu_pushing: Some(cpu_pushing),
        },
    ])
}

/// The CPU time the processes `pids` use together while `work` runs, in %
/// of one core, and what `work` returned.
fn cpu_share<T>(pids: &[u32], work: impl FnOnce() -> super::Result<T>) -> super::Result<(f64, T)> {
    let cpu = || -> super::Result<f64> { pids.iter().map(|&pid| process_cpu_s(pid)).sum() };
    let (before, started) = (cpu()?, Instant::now());
    let result = work()?;
    let (after, elapsed) = (cpu()?, started.elapsed());
    Ok((100.0 * (after - before) / elapsed.as_secs_f64(), result))
}

/// The CPU time all threads of process `pid` have run so far, in seconds,
/// from the scheduler's nanosecond count (`/proc/PID/task/TID/schedstat`,
/// first field): the tick-counted times of `/proc/PID/stat` miss the
/// short runs of a waiter.
fn process_cpu_s(pid: u32) -> super::Result<f64> {
    let mut nanos = 0u64;
    for thread in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let stat = std::fs::read_to_string(thread?.path().join("schedstat"))?;
        nanos += stat
            .split_whitespace()
            .next()
            .ok_or("empty schedstat")?
            .parse::<u64>()?;
    }
    Ok(nanos as f64 / 1e9)
}

/// The child's side of [`idle_waiters`]: waits on an empty queue until it
/// is killed.
pub fn run_idle_waiter(path: &str) -> super::Result<()> {
    let queue = Queue::open(
        path,
        OpenOptions::new().durability(DURABILITY).queue("idle")?,
    )?;
    println!("ready");
    loop {
        check(
            queue.pull(&waiting())?.is_none(),
            "a task in the idle queue",
        )?;
    }
}

pub fn print_idle(rows: &[IdleRow]) {
    println!(
        "\nA producer's pushes, one per transaction ({}), with processes waiting on another queue",
        label(DURABILITY)
    );
    let widths = [14, 10, 0];
    print_line(
        &widths,
        &[
            "idle waiters",
            "pushes/s",
            "waiters' CPU, % of a core: idle / pushing",
        ],
    );
    let percent = |share: Option<f64>| share.map_or("-".into(), |share| format!("{share:.2}"));
    for row in rows {
        print_line(
            &widths,
            &[
                &row.waiters.to_string(),
                &thousands(row.pushes_per_s as u64),
                &format!(
                    "{} / {}",
                    percent(row.waiters_cpu_idle),
                    percent(row.waiters_cpu_pushing)
                ),
            ],
        );
    }
}

fn wall_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos())
}

fn other_process(dir: &BenchDir, samples: u64) -> super::Result<Latency> {
    let file = dir.fresh("wake-other");
    let queue = Queue::open(file.path(), OpenOptions::new().durability(DURABILITY))?;
    woken_in_another_process(file.path(), samples, "another process", || {
        let pushed = wall_ns();
        queue.push(PAYLOAD, &PushOptions::new())?;
        Ok(pushed)
    })
}

/// The application's own connection pushes in SQL, in its transaction
/// (`tq::outbox::install`, as tq's SQLite extension does): from the start
/// of its commit.
fn application_commit(dir: &BenchDir, samples: u64) -> super::Result<Latency> {
    let file = dir.fresh("wake-commit");
    drop(Queue::open(
        file.path(),
        OpenOptions::new().durability(DURABILITY),
    )?);
    let app = tq::rusqlite::Connection::open(file.path())?;
    tq::outbox::install(&app)?;
    let mut push = app.prepare("SELECT tq_push('default', ?1)")?;
    woken_in_another_process(file.path(), samples, "an app's commit", || {
        app.execute_batch("BEGIN IMMEDIATE")?;
        push.query_row([PAYLOAD], |row| row.get::<_, i64>(0))?;
        let committing = wall_ns();
        app.execute_batch("COMMIT")?;
        Ok(committing)
    })
}

/// Starts a process that pulls `samples` tasks of the file at `path`,
/// waiting for each, and makes each with `push`, which returns the time
/// its push began: the latencies from there to the pull's return.
fn woken_in_another_process(
    path: &str,
    samples: u64,
    label: &'static str,
    mut push: impl FnMut() -> super::Result<u128>,
) -> super::Result<Latency> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(WAITER_ROLE, format!("{samples}:{path}"))
        .stdout(Stdio::piped())
        .spawn()?;
    let mut lines = BufReader::new(child.stdout.take().ok_or("no pipe")?).lines();
    let mut next_line = move || -> super::Result<String> {
        Ok(lines.next().ok_or("the waiting process ended early")??)
    };
    check(next_line()? == "ready", "the waiting process did not start")?;
    let mut latencies = Vec::new();
    for _ in 0..samples {
        thread::sleep(SETTLE);
        let pushed = push()?;
        let woke: u128 = next_line()?.parse()?;
        latencies.push(woke.saturating_sub(pushed) as f64 / 1e6);
    }
    check(child.wait()?.success(), "the waiting process failed")?;
    Ok(Latency {
        label,
        samples: latencies,
    })
}

pub fn print_latency(rows: &[Latency], idle_cpu_ms_per_s: f64) {
    println!(
        "\nWake-up of a waiting pull, from the start of a push to the pull's return ({})",
        label(DURABILITY)
    );
    let widths = [17, 11, 11, 11, 0];
    print_line(
        &widths,
        &["pushed from", "p50 ms", "p99 ms", "max ms", "samples"],
    );
    for row in rows {
        print_line(
            &widths,
            &[
                row.label,
                &format!("{:.2}", row.percentile(0.50)),
                &format!("{:.2}", row.percentile(0.99)),
                &format!("{:.2}", row.percentile(1.0)),
                &row.samples.len().to_string(),
            ],
        );
    }
    println!("CPU used by a pull waiting on an empty queue: {idle_cpu_ms_per_s:.3} ms per second of waiting");
}
