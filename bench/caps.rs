//! What a cap on pending tasks costs a push (`make bench-caps`): single
//! pushes at `normal` durability into a queue without a cap, and into a
//! queue capped at 10,000 and half full, whose every push counts its
//! pending tasks up to the cap. On SQLite, also pushes with a fairness key
//! into a fair queue, its key uncapped, then capped at 10,000 and half
//! full (each push counts its key's pending tasks up to the cap). Runs
//! alternate (uncapped, capped, key uncapped, key capped, uncapped, ...),
//! each on a fresh store with the backlog pushed beforehand in batches,
//! untimed; the figures are ratios of the medians of the time per push.
//! On PostgreSQL too when `TQ_TEST_POSTGRES_URL` is set (each run in a
//! fresh schema), without the fair cases, which it does not have.
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

/// What bounds the queue measured: nothing, a cap on the queue, or
/// (pushes with a fairness key) nothing or a cap on the key.
#[derive(Clone, Copy, PartialEq)]
enum Case {
    Uncapped,
    Capped,
    KeyUncapped,
    KeyCapped,
}

/// Seconds per push of `ops` single pushes into a fresh queue set up as
/// `case` says, filled to [`HALF_FULL`] first unless uncapped.
fn run(open: &dyn Fn(usize) -> Result<Queue>, run: usize, case: Case, ops: usize) -> Result<f64> {
    let queue = open(run)?;
    let mut options = PushOptions::new();
    if matches!(case, Case::KeyUncapped | Case::KeyCapped) {
        options.fair_key("tenant")?;
    }
    match case {
        Case::Uncapped => {}
        Case::Capped => queue.set_max_pending(Some(CAP))?,
        Case::KeyUncapped => queue.set_fair_weight("tenant", 1.0)?,
        Case::KeyCapped => queue.set_max_pending_per_key(Some(CAP))?,
    }
    if case != Case::Uncapped {
        let backlog = vec![PAYLOAD; HALF_FULL];
        queue.push_batch(&backlog, &options)?;
    }
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

/// Runs the cases on one backend, interleaved, and prints their figures:
/// the queue's cap against no cap, and with `fair`, a key's cap against
/// no cap and against a queue that is not fair.
fn measure(backend: &str, fair: bool, open: &dyn Fn(usize) -> Result<Queue>) -> Result<()> {
    let (runs, ops) = (count("TQ_BENCH_RUNS", 3)?, count("TQ_BENCH_OPS", 2_000)?);
    let cases: &[Case] = if fair {
        &[
            Case::Uncapped,
            Case::Capped,
            Case::KeyUncapped,
            Case::KeyCapped,
        ]
    } else {
        &[Case::Uncapped, Case::Capped]
    };
    let mut times = vec![Vec::new(); cases.len()];
    for n in 0..runs {
        for (index, &case) in cases.iter().enumerate() {
            times[index].push(run(open, cases.len() * n + index, case, ops)?);
        }
    }
    let names = [
        "push, uncapped".to_owned(),
        format!("push, capped at {CAP} with {HALF_FULL} pending"),
        format!("push with a fairness key, uncapped, {HALF_FULL} pending in the key"),
        format!("push with a fairness key capped at {CAP}, {HALF_FULL} pending in the key"),
    ];
    let mut medians = Vec::new();
    for (index, values) in times.iter().enumerate() {
        let runs: Vec<String> = values.iter().map(|s| format!("{:.1}", s * 1e6)).collect();
        let median = median(&mut values.clone());
        medians.push(median);
        println!(
            "{backend}: {}: {:.1} us (runs: {})",
            names[index],
            median * 1e6,
            runs.join(", ")
        );
    }
    println!(
        "{backend}: capped / uncapped (medians of {runs}): {:.2}",
        medians[1] / medians[0]
    );
    if fair {
        println!(
            "{backend}: key capped / uncapped (medians of {runs}): {:.2}; \
             key capped / key uncapped: {:.2}",
            medians[3] / medians[0],
            medians[3] / medians[2]
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
    let mut options = OpenOptions::new();
    options.durability(Durability::Normal);
    measure("sqlite", true, &|run| {
        let path = dir.path().join(format!("caps-{run}.db"));
        Ok(Queue::open(path.to_str().ok_or("a UTF-8 path")?, &options)?)
    })?;
    if let Ok(url) = env::var("TQ_TEST_POSTGRES_URL") {
        let stamp = std::process::id();
        measure("postgres", false, &|run| {
            let mut options = options.clone();
            options.postgres_schema(&format!("bench_caps_{stamp}_{run}"))?;
            Ok(Queue::open(&url, &options)?)
        })?;
    }
    Ok(())
}
