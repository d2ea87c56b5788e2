//! What keeping attempts costs (`cargo bench --bench attempts`): the same
//! loops on a store with the attempts' triggers (as tq makes it) and on one
//! whose triggers were dropped beforehand (the cost of the schema before
//! attempts), alternating (without, with, without, ...), each on a fresh
//! store; the figure is the ratio of the medians. Three loops:
//!
//! - pull and finish of tasks that never failed, without history (the
//!   finish deletes the row, so the trigger that removes attempts runs);
//! - the same with history (the finish sets no reason: no trigger looks);
//! - recover of expired leases, each recorded as an attempt with them (the
//!   price of the feature, which the baseline does not pay).
//!
//! At `normal` durability. On SQLite always; on PostgreSQL too when
//! `TQ_TEST_POSTGRES_URL` is set (each run in a fresh schema).
//!
//! Knobs: `TQ_BENCH_RUNS` (runs of each case, default 3), `TQ_BENCH_OPS`
//! (tasks per run, default 2,000), `TQ_BENCH_DIR` (where the files go,
//! default `target/bench-tmp`).

use std::env;
use std::path::PathBuf;
use std::thread::sleep;
use std::time::{Duration, Instant};

use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const PAYLOAD: &str = r#"{"kind":"email","to":"user@example.com","template":"welcome"}"#;

fn count(name: &str, default: usize) -> Result<usize> {
    match env::var(name) {
        Ok(text) => Ok(text.parse()?),
        Err(_) => Ok(default),
    }
}

/// A backend: opens run `n`'s fresh queue, with or without the attempts'
/// triggers.
type Open<'a> = &'a dyn Fn(usize, bool, bool) -> Result<Queue>;

/// Which loop is timed.
#[derive(Clone, Copy)]
enum Loop {
    Finish { keep_history: bool },
    Recover,
}

/// Seconds per task of `ops` tasks through `what`, on run `n`'s queue.
fn run(open: Open<'_>, n: usize, with_triggers: bool, what: Loop, ops: usize) -> Result<f64> {
    let keep_history = matches!(what, Loop::Finish { keep_history: true });
    let queue = open(n, with_triggers, keep_history)?;
    queue.push_batch(&vec![PAYLOAD; ops], &PushOptions::new())?;
    match what {
        Loop::Finish { .. } => {
            let options = PullOptions::new();
            let started = Instant::now();
            while let Some(task) = queue.pull(&options)? {
                queue.finish(task.receipt())?;
            }
            Ok(started.elapsed().as_secs_f64() / ops as f64)
        }
        Loop::Recover => {
            let mut options = PullOptions::new();
            options.lease(Duration::from_millis(1))?;
            let mut taken = 0;
            while taken < ops {
                taken += queue.pull_batch(ops - taken, &options)?.len();
            }
            sleep(Duration::from_millis(5));
            let started = Instant::now();
            let recovered = queue.recover()?;
            let elapsed = started.elapsed().as_secs_f64();
            assert_eq!(recovered as usize, taken, "every lease is taken back");
            Ok(elapsed / ops as f64)
        }
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs each loop on one backend, interleaved, and prints their figures.
fn measure(backend: &str, open: Open<'_>) -> Result<()> {
    let (runs, ops) = (count("TQ_BENCH_RUNS", 3)?, count("TQ_BENCH_OPS", 2_000)?);
    let loops = [
        (
            "pull+finish, no history",
            Loop::Finish {
                keep_history: false,
            },
        ),
        ("pull+finish, history", Loop::Finish { keep_history: true }),
        ("recover of expired leases", Loop::Recover),
    ];
    let mut n = 0;
    for (name, what) in loops {
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            without.push(run(open, n, false, what, ops)?);
            with.push(run(open, n + 1, true, what, ops)?);
            n += 2;
        }
        let us = |values: &[f64]| -> String {
            let texts: Vec<String> = values.iter().map(|s| format!("{:.1}", s * 1e6)).collect();
            texts.join(", ")
        };
        println!(
            "{backend}: {name}: without {:.1} us/task (runs: {}), with {:.1} (runs: {}); \
             with / without (medians of {runs}): {:.2}",
            median(&mut without.clone()) * 1e6,
            us(&without),
            median(&mut with.clone()) * 1e6,
            us(&with),
            median(&mut with) / median(&mut without)
        );
    }
    Ok(())
}

fn main() -> Result<()> {
    let parent = env::var_os("TQ_BENCH_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-tmp"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&parent)?;
    let dir = tempfile::tempdir_in(&parent)?;
    let options = |keep_history: bool| {
        let mut options = OpenOptions::new();
        options
            .durability(Durability::Normal)
            .keep_history(keep_history);
        options
    };
    measure("sqlite", &|run, with_triggers, keep_history| {
        let path = dir.path().join(format!("attempts-{run}.db"));
        let path = path.to_str().ok_or("a UTF-8 path")?;
        let queue = Queue::open(path, &options(keep_history))?;
        if !with_triggers {
            tq::rusqlite::Connection::open(path)?.execute_batch(
                "DROP TRIGGER tq_tasks_record_attempt; DROP TRIGGER tq_tasks_forget_attempts;",
            )?;
        }
        Ok(queue)
    })?;
    if let Ok(url) = env::var("TQ_TEST_POSTGRES_URL") {
        let stamp = std::process::id();
        measure("postgres", &|run, with_triggers, keep_history| {
            let schema = format!("bench_attempts_{stamp}_{run}");
            let mut options = options(keep_history);
            options.postgres_schema(&schema)?;
            let queue = Queue::open(&url, &options)?;
            if !with_triggers {
                postgres::Client::connect(&url, postgres::NoTls)?.batch_execute(&format!(
                    "DROP TRIGGER tasks_attempt_ended ON {schema}.tasks;
                     ALTER TABLE {schema}.attempts DROP CONSTRAINT attempts_task_fkey;"
                ))?;
            }
            Ok(queue)
        })?;
    }
    Ok(())
}
