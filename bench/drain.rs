//! A drain of a large backlog, the figure peer queues publish: a million
//! tasks pushed beforehand in batches, then pulled and finished one by one
//! with the plain calls, from one thread and from four sharing a handle,
//! at `normal`; against the same claim and delete with rusqlite alone,
//! from one connection and from four (one per thread), which bounds what
//! threads can gain on one file: SQLite runs one writer at a time.

use std::thread;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};
use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue, TaskState};

use super::{
    bare_transaction, check, interleave, label, now_ms, print_line, show_stats, timed, BenchDir,
    Config, Stats, Timing, BARE_CLAIM, BARE_FINISH, BARE_SCHEMA, PAYLOAD,
};

const DURABILITY: Durability = Durability::Normal;

/// Threads of the wider runs.
const THREADS: usize = 4;

/// Tasks per transaction while filling the backlog.
const FILL_BATCH: u64 = 1000;

pub struct DrainRow {
    subject: &'static str,
    threads: usize,
    stats: Stats,
}

impl DrainRow {
    pub fn to_json(&self) -> Value {
        json!({
            "subject": self.subject,
            "threads": self.threads,
            "tasks_per_s": self.stats.to_json(),
        })
    }
}

pub fn measure(config: &Config, dir: &BenchDir) -> super::Result<Vec<DrainRow>> {
    let tasks = config.drain;
    let cases: Vec<super::Case<'_, Timing>> = vec![
        ("bare, 1".into(), Box::new(|| bare_drain(dir, tasks, 1))),
        (
            format!("bare, {THREADS}"),
            Box::new(|| bare_drain(dir, tasks, THREADS)),
        ),
        ("tq, 1".into(), Box::new(|| tq_drain(dir, tasks, 1))),
        (
            format!("tq, {THREADS}"),
            Box::new(|| tq_drain(dir, tasks, THREADS)),
        ),
    ];
    let results = interleave("drain", config.runs, cases)?;
    let subjects = [("bare", 1), ("bare", THREADS), ("tq", 1), ("tq", THREADS)];
    Ok(subjects
        .into_iter()
        .zip(results)
        .map(|((subject, threads), timings)| DrainRow {
            subject,
            threads,
            stats: Stats::of(timings),
        })
        .collect())
}

/// Splits `tasks` among `threads`, the first ones taking the remainder.
fn share(tasks: u64, threads: usize, index: usize) -> u64 {
    tasks / threads as u64 + u64::from((index as u64) < tasks % threads as u64)
}

fn tq_drain(dir: &BenchDir, tasks: u64, threads: usize) -> super::Result<Timing> {
    let file = dir.fresh("tq-drain");
    let queue = Queue::open(file.path(), OpenOptions::new().durability(DURABILITY))?;
    let mut left = tasks;
    while left > 0 {
        let batch = vec![PAYLOAD; left.min(FILL_BATCH) as usize];
        queue.push_batch(&batch, &PushOptions::new())?;
        left -= batch.len() as u64;
    }
    let timing = timed(tasks, || {
        thread::scope(|scope| -> super::Result<()> {
            let workers: Vec<_> = (0..threads)
                .map(|index| {
                    let queue = &queue;
                    scope.spawn(move || {
                        let work = || -> super::Result<()> {
                            let options = PullOptions::new();
                            for _ in 0..share(tasks, threads, index) {
                                let task = queue
                                    .pull(&options)?
                                    .ok_or("tq pull returned no task with tasks pending")?;
                                check(
                                    task.payload() == PAYLOAD,
                                    "tq pull returned another payload",
                                )?;
                                queue.finish(task.receipt())?;
                            }
                            Ok(())
                        };
                        // Errors cross back to the measuring thread as text.
                        work().map_err(|err| err.to_string())
                    })
                })
                .collect();
            for worker in workers {
                worker.join().map_err(|_| "a thread panicked")??;
            }
            Ok(())
        })
    })?;
    let left = queue.count(TaskState::Pending)? + queue.count(TaskState::Leased)?;
    check(left == 0, "tq drain: tasks left")?;
    Ok(timing)
}

fn bare_drain(dir: &BenchDir, tasks: u64, threads: usize) -> super::Result<Timing> {
    let file = dir.fresh("bare-drain");
    let connect = || -> super::Result<Connection> {
        let conn = Connection::open(file.path())?;
        let mode: String =
            conn.pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0))?;
        check(mode == "wal", "SQLite refused WAL mode")?;
        conn.pragma_update(None, "synchronous", label(DURABILITY))?;
        conn.pragma_update(None, "mmap_size", 0)?;
        conn.busy_timeout(Duration::from_secs(30))?;
        Ok(conn)
    };
    let conn = connect()?;
    conn.execute_batch(BARE_SCHEMA)?;
    let mut left = tasks;
    while left > 0 {
        let batch = left.min(FILL_BATCH);
        let now = now_ms();
        bare_transaction(&conn, || {
            let mut insert = conn.prepare_cached(
                "INSERT INTO tasks (state, payload, created_at, run_at) VALUES (0, ?1, ?2, ?2)",
            )?;
            for _ in 0..batch {
                insert.execute(params![PAYLOAD, now])?;
            }
            Ok(())
        })?;
        left -= batch;
    }
    let connections = (0..threads)
        .map(|_| connect())
        .collect::<super::Result<Vec<_>>>()?;
    let timing = timed(tasks, || {
        thread::scope(|scope| -> super::Result<()> {
            let workers: Vec<_> = connections
                .into_iter()
                .enumerate()
                .map(|(index, conn)| {
                    scope.spawn(move || {
                        let work = || -> super::Result<()> {
                            for _ in 0..share(tasks, threads, index) {
                                let id: i64 = bare_transaction(&conn, || {
                                    conn.prepare_cached(BARE_CLAIM)?
                                        .query_row([now_ms()], |row| row.get(0))
                                        .optional()?
                                        .ok_or_else(|| "bare claim found no task".into())
                                })?;
                                bare_transaction(&conn, || {
                                    Ok(conn.prepare_cached(BARE_FINISH)?.execute([id])?)
                                })?;
                            }
                            Ok(())
                        };
                        work().map_err(|err| err.to_string())
                    })
                })
                .collect();
            for worker in workers {
                worker.join().map_err(|_| "a thread panicked")??;
            }
            Ok(())
        })
    })?;
    let left: i64 = conn.query_row("SELECT count(*) FROM tasks", [], |row| row.get(0))?;
    check(left == 0, "bare drain: tasks left")?;
    Ok(timing)
}

pub fn print(config: &Config, rows: &[DrainRow]) {
    println!(
        "\nDrain of {} tasks pushed beforehand, pull then finish one by one ({}): tasks/s",
        super::thousands(config.drain),
        label(DURABILITY)
    );
    let one = |subject: &str| {
        rows.iter()
            .find(|row| row.subject == subject && row.threads == 1)
            .map(|row| row.stats.median)
    };
    let widths = [8, 9, 30, 0];
    print_line(&widths, &["", "threads", "tasks/s", "vs 1 thread"]);
    for row in rows {
        let versus =
            one(row.subject).map_or("-".into(), |one| format!("{:.2}x", row.stats.median / one));
        print_line(
            &widths,
            &[
                row.subject,
                &row.threads.to_string(),
                &show_stats(&row.stats),
                &versus,
            ],
        );
    }
    if let (Some(bare), Some(tq)) = (one("bare"), one("tq")) {
        println!("tq / bare, 1 thread: {:.2}", tq / bare);
    }
}
