//! The PostgreSQL backend against SQLite, in one run: `make bench-postgres`
//! (which starts a throwaway server on 127.0.0.1), or `cargo bench --bench
//! postgres` with `TQ_BENCH_POSTGRES_URL` naming a server.
//!
//! One thread, at both durabilities: pushes one at a time, pull+finish one
//! at a time, batch pushes of 100, and batch pulls of 100 finished in one
//! call. Each figure is the median of 3 runs on a fresh file or schema, the
//! runs of the two backends interleaved. `TQ_BENCH_QUICK=1` makes the runs
//! small (a smoke test; its figures mean nothing).

use std::time::Instant;

use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const PAYLOAD: &str = r#"{"kind":"email","to":"user@example.com","template":"welcome"}"#;
const BATCH: usize = 100;
const RUNS: usize = 3;

/// Operations (or tasks) per second of each measured step, in order.
type Rates = [f64; 4];

const STEPS: [&str; 4] = [
    "push, one at a time",
    "pull+finish, one at a time",
    "push, batches of 100",
    "pull+finish, batches of 100",
];

fn main() {
    if let Err(err) = run() {
        eprintln!("benchmark failed: {err}");
        std::process::exit(1);
    }
}

fn run() -> Result<()> {
    let Ok(url) = std::env::var("TQ_BENCH_POSTGRES_URL") else {
        println!(
            "skipped: TQ_BENCH_POSTGRES_URL is not set (`make bench-postgres` starts a server)"
        );
        return Ok(());
    };
    let quick = std::env::var("TQ_BENCH_QUICK").is_ok();
    let tasks = if quick { 200 } else { 2000 };
    let dir = tempfile::tempdir_in(std::env::var("TQ_BENCH_DIR").unwrap_or_else(|_| ".".into()))?;
    println!("{tasks} tasks per run, median of {RUNS} runs, one thread");
    println!(
        "| step | durability | SQLite (file) | PostgreSQL ({}) | PostgreSQL / SQLite |",
        if url.contains("127.0.0.1") || url.contains("localhost") {
            "loopback"
        } else {
            "network"
        }
    );
    println!("|---|---|---:|---:|---:|");
    for durability in [Durability::Full, Durability::Normal] {
        let mut sqlite = Vec::new();
        let mut postgres = Vec::new();
        for run in 0..RUNS {
            let mut options = OpenOptions::new();
            options.durability(durability);
            let file = dir.path().join(format!("{durability:?}-{run}.db"));
            sqlite.push(measure(
                &Queue::open(file.to_str().ok_or("a UTF-8 path")?, &options)?,
                tasks,
            )?);
            let schema = format!("bench_{}_{run}", std::process::id());
            options.postgres_schema(&schema)?;
            let queue = Queue::open(&url, &options)?;
            postgres.push(measure(&queue, tasks)?);
            drop(queue);
            postgres::Client::connect(&url, postgres::NoTls)?
                .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))?;
        }
        for (step, name) in STEPS.iter().enumerate() {
            let lite = median(sqlite.iter().map(|rates| rates[step]).collect());
            let pg = median(postgres.iter().map(|rates| rates[step]).collect());
            println!(
                "| {name} | {} | {lite:.0}/s | {pg:.0}/s | {:.2} |",
                format!("{durability:?}").to_lowercase(),
                pg / lite
            );
        }
    }
    Ok(())
}

/// Runs the four steps on an empty queue and returns their rates.
fn measure(queue: &Queue, tasks: usize) -> Result<Rates> {
    let push = PushOptions::new();
    let pull = PullOptions::new();
    let rate = |started: Instant| tasks as f64 / started.elapsed().as_secs_f64();

    let started = Instant::now();
    for _ in 0..tasks {
        queue.push(PAYLOAD, &push)?;
    }
    let push_one = rate(started);

    let started = Instant::now();
    for _ in 0..tasks {
        let task = queue.pull(&pull)?.ok_or("a task went missing")?;
        queue.finish(task.receipt())?;
    }
    let pull_one = rate(started);

    let payloads = vec![PAYLOAD; BATCH];
    let started = Instant::now();
    for _ in 0..tasks / BATCH {
        queue.push_batch(&payloads, &push)?;
    }
    let push_batch = rate(started);

    let started = Instant::now();
    let mut finished = 0;
    while finished < tasks / BATCH * BATCH {
        let batch = queue.pull_batch(BATCH, &pull)?;
        if batch.is_empty() {
            return Err("tasks went missing".into());
        }
        let receipts: Vec<_> = batch.iter().map(|task| task.receipt()).collect();
        queue.finish_batch(&receipts)?;
        finished += batch.len();
    }
    let pull_batch = rate(started);
    Ok([push_one, pull_one, push_batch, pull_batch])
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
