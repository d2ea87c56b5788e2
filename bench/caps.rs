//! What a cap on pending tasks costs a push (`make bench-caps`): single
//! pushes at `normal` durability into a queue without a cap, and into a
//! queue capped at 10,000 and half full, whose every push counts its
//! pending tasks up to the cap. Runs alternate (uncapped, capped, uncapped,
//! ...), each on a fresh store with the backlog pushed beforehand in
//! batches, untimed; the figure is the ratio of the medians of the time per
//! push. On SQLite always; on PostgreSQL too when `TQ_TEST_POSTGRES_URL` is
//! set (each run in a fresh schema).
//!
//! Knobs: `TQ_BENCH_RUNS` (runs of each case, default 3), `TQ_BENCH_OPS`
//! (timed pushes per run, default 2,000), `TQ_BENCH_DIR` (where the files
//! go, default `target/bench-tmp`).

use std::env;
use std::path::PathBuf;
use std::time::Instant;

use tq::{Durability, OpenOptions, PushOptions, Queue};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const PAYLOAD: &str = r#"{"kind":"email","to":"user@example.com","template":"welcome"}"#;

/// The cap measured, and the tasks pending when the timed pushes start.
const CAP: u64 = 10_000;
const HALF_FULL: usize = 5_000;

fn count(name: &str, default: usize) -> Result<usize> {
    match env::var(name) {
        Ok(text) => Ok(text.parse()?),
        Err(_) => Ok(default),
    }
}

/// Seconds per push of `ops` single pushes into a fresh queue, capped at
/// [`CAP`] and filled to [`HALF_FULL`] first when `capped`.
fn run(open: &dyn Fn(usize) -> Result<Queue>, run: usize, capped: bool, ops: usize) -> Result<f64> {
    let queue = open(run)?;
    if capped {
        queue.set_max_pending(Some(CAP))?;
        let backlog = vec![PAYLOAD; HALF_FULL];
        queue.push_batch(&backlog, &PushOptions::new())?;
    }
    let options = PushOptions::new();
    let started = Instant::now();
    for _ in 0..ops {
        queue.push(PAYLOAD, &options)?;
    }
    Ok(started.elapsed().as_secs_f64() / ops as f64)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Runs both cases on one backend, interleaved, and prints their figures.
fn measure(backend: &str, open: &dyn Fn(usize) -> Result<Queue>) -> Result<()> {
    let (runs, ops) = (count("TQ_BENCH_RUNS", 3)?, count("TQ_BENCH_OPS", 2_000)?);
    let (mut uncapped, mut capped) = (Vec::new(), Vec::new());
    for n in 0..runs {
        uncapped.push(run(open, 2 * n, false, ops)?);
        capped.push(run(open, 2 * n + 1, true, ops)?);
    }
    let us = |values: &[f64]| -> Vec<String> {
        values.iter().map(|s| format!("{:.1}", s * 1e6)).collect()
    };
    println!(
        "{backend}: push, uncapped: {} us (runs: {})",
        format_args!("{:.1}", median(&mut uncapped.clone()) * 1e6),
        us(&uncapped).join(", ")
    );
    println!(
        "{backend}: push, capped at {CAP} with {HALF_FULL} pending: {} us (runs: {})",
        format_args!("{:.1}", median(&mut capped.clone()) * 1e6),
        us(&capped).join(", ")
    );
    println!(
        "{backend}: capped / uncapped (medians of {runs}): {:.2}",
        median(&mut capped) / median(&mut uncapped)
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
    let mut options = OpenOptions::new();
    options.durability(Durability::Normal);
    measure("sqlite", &|run| {
        let path = dir.path().join(format!("caps-{run}.db"));
        Ok(Queue::open(path.to_str().ok_or("a UTF-8 path")?, &options)?)
    })?;
    if let Ok(url) = env::var("TQ_TEST_POSTGRES_URL") {
        let stamp = std::process::id();
        measure("postgres", &|run| {
            let mut options = options.clone();
            options.postgres_schema(&format!("bench_caps_{stamp}_{run}"))?;
            Ok(Queue::open(&url, &options)?)
        })?;
    }
    Ok(())
}
