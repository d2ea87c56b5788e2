//! What a push that merges into the pending holder of its unique key
//! costs (`cargo bench --bench debounce`): single pushes at `normal`
//! durability of three kinds, each into a fresh queue: plain pushes (no
//! key), pushes under a new unique key each (a lookup of the key, then a
//! new task), and pushes under one key that replace and debounce its pending holder
//! (a lookup, then an update of that task). Runs alternate (plain, keyed,
//! merged, plain, ...); the figures are the ratios of the medians of the
//! time per push. On SQLite always; on PostgreSQL too when
//! `TQ_TEST_POSTGRES_URL` is set (each run in a fresh schema).
//!
//! Knobs: `TQ_BENCH_RUNS` (runs of each case, default 3), `TQ_BENCH_OPS`
//! (timed pushes per run, default 2,000), `TQ_BENCH_DIR` (where the files
//! go, default `target/bench-tmp`).

use std::env;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use tq::{Durability, OpenOptions, PushOptions, Pushed, Queue};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const PAYLOAD: &str = r#"{"kind":"reindex","document":"doc-42","revision":7}"#;

/// The kinds of push measured.
#[derive(Clone, Copy)]
enum Kind {
    Plain,
    Keyed,
    Merged,
}

fn count(name: &str, default: usize) -> Result<usize> {
    match env::var(name) {
        Ok(text) => Ok(text.parse()?),
        Err(_) => Ok(default),
    }
}

/// Seconds per push of `ops` single pushes of `kind` into a fresh queue.
fn run(open: &dyn Fn(usize) -> Result<Queue>, run: usize, kind: Kind, ops: usize) -> Result<f64> {
    let queue = open(run)?;
    let mut merging = PushOptions::new();
    merging
        .unique_key("doc-42")?
        .replace_pending(true)
        .delay(Duration::from_secs(5))?
        .debounce(Duration::from_secs(3600))?;
    if let Kind::Merged = kind {
        queue.push(PAYLOAD, &merging)?;
    }
    let plain = PushOptions::new();
    let started = Instant::now();
    for n in 0..ops {
        match kind {
            Kind::Plain => {
                queue.push(PAYLOAD, &plain)?;
            }
            Kind::Keyed => {
                let mut keyed = PushOptions::new();
                keyed.unique_key(&format!("doc-{n}"))?;
                queue.push(PAYLOAD, &keyed)?;
            }
            Kind::Merged => {
                let pushed = queue.push(PAYLOAD, &merging)?;
                if !matches!(pushed, Pushed::Merged(_)) {
                    return Err(format!("push {n} was not merged: {pushed:?}").into());
                }
            }
        }
    }
    Ok(started.elapsed().as_secs_f64() / ops as f64)
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// Runs the three kinds on one backend, interleaved, and prints their
/// figures.
fn measure(backend: &str, open: &dyn Fn(usize) -> Result<Queue>) -> Result<()> {
    let (runs, ops) = (count("TQ_BENCH_RUNS", 3)?, count("TQ_BENCH_OPS", 2_000)?);
    let (mut plain, mut keyed, mut merged) = (Vec::new(), Vec::new(), Vec::new());
    for n in 0..runs {
        plain.push(run(open, 3 * n, Kind::Plain, ops)?);
        keyed.push(run(open, 3 * n + 1, Kind::Keyed, ops)?);
        merged.push(run(open, 3 * n + 2, Kind::Merged, ops)?);
    }
    for (what, values) in [
        ("plain", &plain),
        ("under a new key", &keyed),
        ("merged (replace + debounce)", &merged),
    ] {
        let runs: Vec<String> = values.iter().map(|s| format!("{:.1}", s * 1e6)).collect();
        println!(
            "{backend}: push, {what}: {:.1} us (runs: {})",
            median(values) * 1e6,
            runs.join(", ")
        );
    }
    println!(
        "{backend}: merged / plain: {:.2}, merged / under a new key: {:.2} (medians of {runs})",
        median(&merged) / median(&plain),
        median(&merged) / median(&keyed)
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
        let path = dir.path().join(format!("debounce-{run}.db"));
        Ok(Queue::open(path.to_str().ok_or("a UTF-8 path")?, &options)?)
    })?;
    if let Ok(url) = env::var("TQ_TEST_POSTGRES_URL") {
        let stamp = std::process::id();
        measure("postgres", &|run| {
            let mut options = options.clone();
            options.postgres_schema(&format!("bench_debounce_{stamp}_{run}"))?;
            Ok(Queue::open(&url, &options)?)
        })?;
    }
    Ok(())
}
