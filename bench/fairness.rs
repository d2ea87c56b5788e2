//! What fair shares by key cost a claim (`cargo bench --bench fairness`): single
//! claims (at `normal` durability unless told) from a queue of 100,000 ready tasks
//! without fairness keys, and from a queue of as many spread over 10,000
//! keys of equal weight, each of whose claims takes the next key's turn.
//! Runs alternate (without keys, with keys, without, ...), each on a fresh
//! file with the backlog pushed beforehand in batches, untimed; the figure
//! is the ratio of the medians of the time per claim. On SQLite, and on
//! PostgreSQL too when `TQ_TEST_POSTGRES_URL` names a server (a schema per
//! run, left on the server).
//!
//! Knobs: `TQ_BENCH_RUNS` (runs of each case, default 3), `TQ_BENCH_OPS`
//! (timed claims per run, default 2,000), `TQ_BENCH_DURABILITY` (`normal`,
//! the default, or `full`), `TQ_BENCH_DIR` (where the files go, default
//! `target/bench-tmp`).

use std::env;
use std::path::PathBuf;
use std::time::Instant;

use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const PAYLOAD: &str = r#"{"kind":"email","to":"user@example.com","template":"welcome"}"#;

/// The keys of the fair case, and the ready tasks of each.
const KEYS: usize = 10_000;
const TASKS_PER_KEY: usize = 10;

fn count(name: &str, default: usize) -> Result<usize> {
    match env::var(name) {
        Ok(text) => Ok(text.parse()?),
        Err(_) => Ok(default),
    }
}

/// Seconds per claim of `ops` single claims from a fresh queue holding
/// `KEYS * TASKS_PER_KEY` ready tasks, spread over `KEYS` keys when `fair`.
fn run(open: &dyn Fn(usize) -> Result<Queue>, run: usize, fair: bool, ops: usize) -> Result<f64> {
    let queue = open(run)?;
    let backlog = vec![PAYLOAD; KEYS];
    for _ in 0..TASKS_PER_KEY {
        if fair {
            let items: Vec<(&str, PushOptions)> = (0..KEYS)
                .map(|key| {
                    let mut options = PushOptions::new();
                    options.fair_key(&format!("tenant-{key}"))?;
                    Ok((PAYLOAD, options))
                })
                .collect::<Result<_>>()?;
            queue.push_items(&items)?;
        } else {
            queue.push_batch(&backlog, &PushOptions::new())?;
        }
    }
    let options = PullOptions::new();
    let started = Instant::now();
    for _ in 0..ops {
        queue.pull(&options)?.ok_or("the backlog ran out")?;
    }
    Ok(started.elapsed().as_secs_f64() / ops as f64)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs the cases in turn on `backend`, each run on a queue `open` makes
/// fresh, and prints the medians and their ratio.
fn measure(backend: &str, open: &dyn Fn(usize) -> Result<Queue>) -> Result<()> {
    let (runs, ops) = (count("TQ_BENCH_RUNS", 3)?, count("TQ_BENCH_OPS", 2_000)?);
    let (mut plain, mut fair) = (Vec::new(), Vec::new());
    for n in 0..runs {
        plain.push(run(open, 2 * n, false, ops)?);
        fair.push(run(open, 2 * n + 1, true, ops)?);
    }
    let us = |values: &[f64]| -> Vec<String> {
        values.iter().map(|s| format!("{:.1}", s * 1e6)).collect()
    };
    let ready = KEYS * TASKS_PER_KEY;
    println!(
        "{backend}: claim, {ready} ready, no keys: {:.1} us (runs: {})",
        median(&mut plain.clone()) * 1e6,
        us(&plain).join(", ")
    );
    println!(
        "{backend}: claim, {ready} ready over {KEYS} keys: {:.1} us (runs: {})",
        median(&mut fair.clone()) * 1e6,
        us(&fair).join(", ")
    );
    println!(
        "{backend}: with keys / without (medians of {runs}): {:.2}",
        median(&mut fair) / median(&mut plain)
    );
    Ok(())
}

fn main() -> Result<()> {
    let parent = env::var_os("TQ_BENCH_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-tmp"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&parent)?;
    let dir = tempfile::tempdir_in(&parent)?;
    let full = env::var("TQ_BENCH_DURABILITY").is_ok_and(|name| name == "full");
    let durability = if full {
        Durability::Full
    } else {
        Durability::Normal
    };
    let mut options = OpenOptions::new();
    options.durability(durability);
    let open = |run: usize| -> Result<Queue> {
        let path = dir.path().join(format!("fairness-{run}.db"));
        Ok(Queue::open(path.to_str().ok_or("a UTF-8 path")?, &options)?)
    };
    let label = format!("sqlite at {}", if full { "full" } else { "normal" });
    measure(&label, &open)?;
    if let Ok(url) = env::var("TQ_TEST_POSTGRES_URL") {
        let stamp = std::process::id();
        measure("postgres", &|run| {
            let mut options = options.clone();
            options.postgres_schema(&format!("bench_fair_{stamp}_{run}"))?;
            Ok(Queue::open(&url, &options)?)
        })?;
    }
    Ok(())
}
