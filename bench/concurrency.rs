//! Many writers: push and pull+finish from 1 to 16 threads sharing one
//! handle (group commit), with each call's latency; 1, 2 and 4 processes
//! pulling from one file; and how fairly processes writing in tight loops
//! share the write lock, against bare SQLite doing the same.

use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};
use serde_json::{json, Value};
use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue, TaskState};

use super::{
    bare_transaction, check, label, now_ms, print_line, show_stats, thousands, BenchDir, Config,
    Stats, Timing, BARE_SCHEMA, PAYLOAD,
};

/// The durability of the fairness figures, where the issue was measured.
const DURABILITY: Durability = Durability::Full;

const DURABILITIES: [Durability; 2] = [Durability::Full, Durability::Normal];

/// Thread counts of the push and pull+finish figures.
const PUSH_THREADS: [usize; 5] = [1, 2, 4, 8, 16];
const PULL_THREADS: [usize; 4] = [1, 2, 4, 8];

/// Process counts of the pull+finish figures.
const PULL_PROCESSES: [usize; 3] = [1, 2, 4];

/// The environment variable that makes this binary a writing child.
pub const WRITER_ROLE: &str = "TQ_BENCH_WRITER";

/// One thread count's figures: the rate over the runs, and the latency of
/// each call (ms) over every call of every run.
pub struct ThreadRow {
    operation: &'static str,
    durability: Durability,
    threads: usize,
    rate: Stats,
    latencies_ms: Vec<f64>,
}

impl ThreadRow {
    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.latencies_ms.clone();
        sorted.sort_by(f64::total_cmp);
        sorted[((sorted.len() - 1) as f64 * p).round() as usize]
    }

    pub fn to_json(&self) -> Value {
        json!({
            "operation": self.operation,
            "durability": label(self.durability),
            "threads": self.threads,
            "rate": self.rate.to_json(),
            "p50_ms": self.percentile(0.5),
            "p99_ms": self.percentile(0.99),
        })
    }
}

/// Tasks per thread: enough for some hundreds of commits at `full`.
fn per_thread(config: &Config, durability: Durability, threads: usize) -> u64 {
    (config.ops(durability) / threads as u64).max(20)
}

/// Push, and pull+finish, from 1 to 16 threads sharing one handle, at both
/// durabilities.
pub fn measure_threads(config: &Config, dir: &BenchDir) -> super::Result<Vec<ThreadRow>> {
    let mut rows = Vec::new();
    for durability in DURABILITIES {
        for (operation, counts) in [
            ("push", &PUSH_THREADS[..]),
            ("pull+finish", &PULL_THREADS[..]),
        ] {
            for &threads in counts {
                let per_thread = per_thread(config, durability, threads);
                let mut latencies_ms = Vec::new();
                let mut timings = Vec::new();
                eprintln!("  {operation}, {threads} threads, {}", label(durability));
                for _ in 0..config.runs {
                    let (timing, latencies) =
                        tq_threads(dir, durability, operation, threads, per_thread)?;
                    timings.push(timing);
                    latencies_ms.extend(latencies);
                }
                rows.push(ThreadRow {
                    operation,
                    durability,
                    threads,
                    rate: Stats::of(timings),
                    latencies_ms,
                });
            }
        }
    }
    Ok(rows)
}

/// One run: `threads` threads each push `per_thread` tasks, or each pull
/// and finish `per_thread` tasks pushed beforehand. Returns the time and
/// each call's latency (a pull and its finish count as one).
fn tq_threads(
    dir: &BenchDir,
    durability: Durability,
    operation: &str,
    threads: usize,
    per_thread: u64,
) -> super::Result<(Timing, Vec<f64>)> {
    let file = dir.fresh("tq-threads");
    let queue = Queue::open(file.path(), OpenOptions::new().durability(durability))?;
    let total = threads as u64 * per_thread;
    let pulling = operation == "pull+finish";
    if pulling {
        let payloads = vec![PAYLOAD; 1000];
        for _ in 0..total.div_ceil(1000) {
            queue.push_batch(&payloads, &PushOptions::new())?;
        }
    }
    let latencies = std::sync::Mutex::new(Vec::new());
    let start = Barrier::new(threads);
    let started = Instant::now();
    thread::scope(|scope| -> super::Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (queue, start, latencies) = (&queue, &start, &latencies);
                scope.spawn(move || -> tq::Result<()> {
                    let options = PullOptions::new();
                    let mut mine = Vec::with_capacity(per_thread as usize);
                    start.wait();
                    for _ in 0..per_thread {
                        let call = Instant::now();
                        if pulling {
                            if let Some(task) = queue.pull(&options)? {
                                queue.finish(task.receipt())?;
                            }
                        } else {
                            queue.push(PAYLOAD, &PushOptions::new())?;
                        }
                        mine.push(call.elapsed().as_secs_f64() * 1000.0);
                    }
                    latencies.lock().unwrap().extend(mine);
                    Ok(())
                })
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| "a thread panicked")??;
        }
        Ok(())
    })?;
    let elapsed = started.elapsed();
    let left = queue.count(TaskState::Pending)? + queue.count(TaskState::Leased)?;
    check(
        left == if pulling {
            total.div_ceil(1000) * 1000 - total
        } else {
            total
        },
        "tq threads lost or left tasks",
    )?;
    Ok((
        Timing {
            ops: total,
            elapsed,
        },
        latencies.into_inner().unwrap(),
    ))
}

/// `ratio` drawn as a bar, one `#` per quarter.
fn bar(ratio: f64) -> String {
    if ratio.is_finite() && ratio > 0.0 {
        "#".repeat((ratio * 4.0).round() as usize)
    } else {
        String::new()
    }
}

pub fn print_threads(rows: &[ThreadRow]) {
    println!(
        "\nThreads sharing one handle (group commit): rate, and each call's latency (a pull and its finish count as one call)"
    );
    let widths = [11, 13, 9, 27, 12, 10, 10, 0];
    print_line(
        &widths,
        &[
            "durability",
            "operation",
            "threads",
            "tq",
            "vs 1 thread",
            "p50 ms",
            "p99 ms",
            "scaling (# = a quarter of 1 thread)",
        ],
    );
    for row in rows {
        let single = rows
            .iter()
            .find(|other| {
                other.threads == 1
                    && other.operation == row.operation
                    && other.durability == row.durability
            })
            .map_or(f64::NAN, |single| single.rate.median);
        let vs_single = row.rate.median / single;
        print_line(
            &widths,
            &[
                label(row.durability),
                row.operation,
                &row.threads.to_string(),
                &show_stats(&row.rate),
                &format!("{vs_single:.2}"),
                &format!("{:.2}", row.percentile(0.5)),
                &format!("{:.2}", row.percentile(0.99)),
                &bar(vs_single),
            ],
        );
    }
    let ratio = |operation: &str, threads: usize| {
        let rate = |n: usize| {
            rows.iter()
                .find(|row| {
                    row.operation == operation
                        && row.durability == Durability::Full
                        && row.threads == n
                })
                .map_or(f64::NAN, |row| row.rate.median)
        };
        rate(threads) / rate(1)
    };
    println!(
        "targets at full: 8 threads push {:.1}x one thread (5x); 4 threads pull+finish {:.1}x (3x); \
         p99 of a push at 8 threads {:.2} ms (5 ms)",
        ratio("push", 8),
        ratio("pull+finish", 4),
        rows.iter()
            .find(|row| row.operation == "push" && row.durability == Durability::Full && row.threads == 8)
            .map_or(f64::NAN, |row| row.percentile(0.99)),
    );
}

// ---------------------------------------------------------------------------
// Processes pulling from one file

pub struct ProcessRow {
    durability: Durability,
    processes: usize,
    /// Tasks each process pulled and finished in the time given.
    finished: Vec<u64>,
    seconds: f64,
}

impl ProcessRow {
    fn aggregate(&self) -> f64 {
        self.finished.iter().sum::<u64>() as f64 / self.seconds
    }

    fn least_over_mean(&self) -> f64 {
        let mean = self.finished.iter().sum::<u64>() as f64 / self.finished.len() as f64;
        *self.finished.iter().min().unwrap_or(&0) as f64 / mean
    }

    pub fn to_json(&self) -> Value {
        json!({
            "durability": label(self.durability),
            "processes": self.processes,
            "finished": self.finished,
            "seconds": self.seconds,
        })
    }
}

/// 1, 2 and 4 processes pulling and finishing from one backlog for a fixed
/// time, each counting what it did.
pub fn measure_processes(config: &Config, dir: &BenchDir) -> super::Result<Vec<ProcessRow>> {
    let seconds = if config.quick { 1 } else { 3 };
    let mut rows = Vec::new();
    for durability in DURABILITIES {
        for processes in PULL_PROCESSES {
            eprintln!(
                "  pull+finish, {processes} processes, {}",
                label(durability)
            );
            let file = dir.fresh("procs");
            let queue = Queue::open(file.path(), OpenOptions::new().durability(durability))?;
            // More than the processes can drain in the time given.
            let per_second = match durability {
                Durability::Full => 20_000,
                Durability::Normal => 100_000,
            };
            let payloads = vec![PAYLOAD; 1000];
            for _ in 0..per_second * seconds / 1000 {
                queue.push_batch(&payloads, &PushOptions::new())?;
            }
            drop(queue);
            let kind = format!("pull-{}", label(durability));
            let finished = run_children(&kind, processes, seconds, file.path())?
                .into_iter()
                .map(|(done, _)| done)
                .collect();
            rows.push(ProcessRow {
                durability,
                processes,
                finished,
                seconds: seconds as f64,
            });
        }
    }
    Ok(rows)
}

pub fn print_processes(rows: &[ProcessRow]) {
    println!("\nProcesses pulling and finishing from one file, each with its own handle");
    let widths = [11, 11, 16, 14, 16, 0];
    print_line(
        &widths,
        &[
            "durability",
            "processes",
            "tasks/s",
            "vs 1 process",
            "least / mean",
            "per process",
        ],
    );
    for row in rows {
        let single = rows
            .iter()
            .find(|other| other.processes == 1 && other.durability == row.durability)
            .map_or(f64::NAN, ProcessRow::aggregate);
        let per: Vec<String> = row.finished.iter().map(|&n| thousands(n)).collect();
        print_line(
            &widths,
            &[
                label(row.durability),
                &row.processes.to_string(),
                &thousands(row.aggregate() as u64),
                &format!("{:.2}", row.aggregate() / single),
                &format!("{:.2}", row.least_over_mean()),
                &per.join(" / "),
            ],
        );
    }
    println!("targets: 4 processes at least 0.8 of one alone; none below 0.25 of the mean");
}

// ---------------------------------------------------------------------------
// Fairness between processes

/// Processes writing at once in the fairness figures.
const PROCESSES: usize = 3;

pub struct Fairness {
    label: &'static str,
    /// Commits each process made in the time given.
    commits: Vec<u64>,
    busy_errors: u64,
}

impl Fairness {
    fn mean(&self) -> f64 {
        self.commits.iter().sum::<u64>() as f64 / self.commits.len() as f64
    }

    /// The smallest share over the mean share: 1 is perfectly fair.
    fn worst_over_mean(&self) -> f64 {
        *self.commits.iter().min().unwrap_or(&0) as f64 / self.mean()
    }

    pub fn to_json(&self) -> Value {
        json!({
            "case": self.label,
            "commits": self.commits,
            "busy_errors": self.busy_errors,
            "min_over_mean": self.worst_over_mean(),
        })
    }
}

/// The child's side: once every child is ready, for `seconds`,
/// pushes in a tight loop (`tq` or `bare`: one push per commit) or pulls
/// and finishes (`pull-full`, `pull-normal`), then prints how many it did
/// and how many "busy" errors it got.
pub fn run_writer(spec: &str) -> super::Result<()> {
    let mut parts = spec.splitn(3, ':');
    let (kind, seconds, path) = (
        parts.next().ok_or("kind")?,
        parts.next().ok_or("seconds")?.parse::<u64>()?,
        parts.next().ok_or("path")?,
    );
    let mut write: Box<dyn FnMut() -> super::Result<bool>> = if let Some(durability) =
        kind.strip_prefix("pull-")
    {
        let durability = if durability == "full" {
            Durability::Full
        } else {
            Durability::Normal
        };
        let queue = Queue::open(path, OpenOptions::new().durability(durability))?;
        let options = PullOptions::new();
        Box::new(move || match queue.pull(&options) {
            Ok(Some(task)) => {
                queue.finish(task.receipt())?;
                Ok(true)
            }
            Ok(None) => Err("the backlog ran out".into()),
            Err(err) if err.kind() == tq::ErrorKind::Busy => Ok(false),
            Err(err) => Err(err.into()),
        })
    } else if kind == "tq" {
        let queue = Queue::open(path, OpenOptions::new().durability(DURABILITY))?;
        Box::new(move || match queue.push(PAYLOAD, &PushOptions::new()) {
            Ok(_) => Ok(true),
            Err(err) if err.kind() == tq::ErrorKind::Busy => Ok(false),
            Err(err) => Err(err.into()),
        })
    } else {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "synchronous", label(DURABILITY))?;
        conn.busy_timeout(Duration::from_secs(5))?;
        Box::new(move || {
            let result = bare_transaction(&conn, || {
                conn.prepare_cached(
                    "INSERT INTO tasks (state, payload, created_at, run_at) VALUES (0, ?1, ?2, ?2)",
                )?
                .execute(params![PAYLOAD, now_ms()])?;
                Ok(())
            });
            if result.is_err() && !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            match result {
                Ok(()) => Ok(true),
                Err(err)
                    if err.to_string().contains("locked") || err.to_string().contains("busy") =>
                {
                    Ok(false)
                }
                Err(err) => Err(err),
            }
        })
    };
    super::children::wait_for_start()?;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let (mut commits, mut busy) = (0u64, 0u64);
    while Instant::now() < deadline {
        if write()? {
            commits += 1;
        } else {
            busy += 1;
        }
    }
    println!("{commits} {busy}");
    Ok(())
}

pub fn measure_fairness(config: &Config, dir: &BenchDir) -> super::Result<Vec<Fairness>> {
    let seconds = if config.quick { 1 } else { 3 };
    eprintln!("  fairness: {PROCESSES} processes for {seconds} s, bare then tq");
    let mut rows = Vec::new();
    for (kind, label) in [("bare", "bare SQLite"), ("tq", "tq")] {
        let file = dir.fresh("fair");
        if kind == "bare" {
            let conn = Connection::open(file.path())?;
            conn.pragma_update(None, "journal_mode", "wal")?;
            conn.execute_batch(BARE_SCHEMA)?;
        } else {
            drop(Queue::open(file.path(), &OpenOptions::new())?);
        }
        let counts = run_children(kind, PROCESSES, seconds, file.path())?;
        let commits = counts.iter().map(|&(done, _)| done).collect();
        let busy_errors = counts.iter().map(|&(_, busy)| busy).sum();
        rows.push(Fairness {
            label,
            commits,
            busy_errors,
        });
    }
    Ok(rows)
}

/// Runs `processes` children of `kind` (see [`run_writer`]) on `path` for
/// `seconds`, started together; returns each one's (done, busy) counts.
fn run_children(
    kind: &str,
    processes: usize,
    seconds: u64,
    path: &str,
) -> super::Result<Vec<(u64, u64)>> {
    let specs = vec![format!("{kind}:{seconds}:{path}"); processes];
    let mut counts = Vec::new();
    for text in super::children::run(WRITER_ROLE, &specs)? {
        let mut numbers = text.split_whitespace().map(str::parse::<u64>);
        counts.push((
            numbers.next().ok_or("no count")??,
            numbers.next().ok_or("no busy count")??,
        ));
    }
    Ok(counts)
}

pub fn print_fairness(rows: &[Fairness]) {
    println!(
        "\nProcesses writing in tight loops at {} ({PROCESSES} processes, one push per commit; \
         target: the least served within 4x of the mean)",
        label(DURABILITY)
    );
    let widths = [14, 30, 16, 0];
    print_line(
        &widths,
        &["", "commits per process", "least / mean", "busy errors"],
    );
    for row in rows {
        let commits: Vec<String> = row.commits.iter().map(|&c| thousands(c)).collect();
        print_line(
            &widths,
            &[
                row.label,
                &commits.join(" / "),
                &format!("{:.2}", row.worst_over_mean()),
                &row.busy_errors.to_string(),
            ],
        );
    }
}
