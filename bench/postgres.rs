//! The PostgreSQL backend against SQLite, in one run: `make bench-postgres`
//! (which starts a throwaway server on 127.0.0.1), or `cargo bench --bench
//! postgres` with `TQ_BENCH_POSTGRES_URL` naming a server.
//!
//! One thread, at both durabilities: pushes one at a time, pull+finish one
//! at a time, batch pushes of 100, and batch pulls of 100 finished in one
//! call. Each figure is the median of 3 runs on a fresh file or schema, the
//! runs of the two backends interleaved.
//!
//! Then the same four steps from 1, 4 and 16 worker processes (this binary
//! run again), each with its own handle, on one SQLite file or one
//! PostgreSQL schema: the tasks are shared out evenly and the rate is all
//! of them over the time from the first process starting to the last one
//! ending; each figure the median of 3 runs, the backends interleaved.
//!
//! Then the control features' quality bars (`control.rs`): a concurrency
//! limit of 40 against none, with four threads draining a backlog at both
//! durabilities, and 100,000 tasks in 1,000 ordered groups of 100 against
//! no groups, from one thread and from four, at durability normal.
//!
//! `TQ_BENCH_QUICK=1` makes the runs small, and the processes' ones a
//! single run at durability full only (a smoke test; its figures mean
//! nothing). `TQ_BENCH_PARTS` (comma-separated, from `one-thread`,
//! `processes`, `control`) runs only the parts named.

#[path = "children.rs"]
mod children;
#[path = "control.rs"]
mod control;

use std::cell::Cell;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue, TaskState};

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

/// The environment variable that makes this binary a worker process.
const WORKER_ROLE: &str = "TQ_BENCH_POSTGRES_WORKER";

/// Worker process counts of the multi-process figures.
const PROCESSES: [usize; 3] = [1, 4, 16];

/// The parts of the benchmark, in the order they run.
const PARTS: [&str; 3] = ["one-thread", "processes", "control"];

fn main() {
    if let Ok(spec) = std::env::var(WORKER_ROLE) {
        if let Err(err) = run_worker(&spec) {
            eprintln!("worker process failed: {err}");
            std::process::exit(1);
        }
        return;
    }
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
    let parts = parts()?;
    let dir = tempfile::tempdir_in(std::env::var("TQ_BENCH_DIR").unwrap_or_else(|_| ".".into()))?;
    let link = if url.contains("127.0.0.1") || url.contains("localhost") {
        "loopback"
    } else {
        "network"
    };
    if parts.contains(&"one-thread") {
        measure_one_thread(&url, dir.path(), quick, link)?;
    }
    if parts.contains(&"processes") {
        measure_processes(&url, dir.path(), quick, link)?;
    }
    if parts.contains(&"control") {
        measure_control(&url, quick)?;
    }
    Ok(())
}

/// The parts named in `TQ_BENCH_PARTS`, or all of them.
fn parts() -> Result<Vec<&'static str>> {
    let Ok(text) = std::env::var("TQ_BENCH_PARTS") else {
        return Ok(PARTS.to_vec());
    };
    text.split(',')
        .map(|name| {
            PARTS
                .into_iter()
                .find(|part| *part == name.trim())
                .ok_or_else(|| {
                    format!(
                        "TQ_BENCH_PARTS: unknown part {name:?} (the parts: {})",
                        PARTS.join(", ")
                    )
                    .into()
                })
        })
        .collect()
}

/// The four steps from one thread, at both durabilities, SQLite and
/// PostgreSQL interleaved.
fn measure_one_thread(url: &str, dir: &std::path::Path, quick: bool, link: &str) -> Result<()> {
    let tasks = if quick { 200 } else { 2000 };
    println!("{tasks} tasks per run, median of {RUNS} runs, one thread");
    println!("| step | durability | SQLite (file) | PostgreSQL ({link}) | PostgreSQL / SQLite |");
    println!("|---|---|---:|---:|---:|");
    for durability in [Durability::Full, Durability::Normal] {
        let mut sqlite = Vec::new();
        let mut postgres = Vec::new();
        for run in 0..RUNS {
            let mut options = OpenOptions::new();
            options.durability(durability);
            let file = dir.join(format!("{durability:?}-{run}.db"));
            sqlite.push(measure(
                &Queue::open(file.to_str().ok_or("a UTF-8 path")?, &options)?,
                tasks,
            )?);
            let schema = format!("bench_{}_{run}", std::process::id());
            options.postgres_schema(&schema)?;
            let queue = Queue::open(url, &options)?;
            postgres.push(measure(&queue, tasks)?);
            drop(queue);
            postgres::Client::connect(url, postgres::NoTls)?
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

// ---------------------------------------------------------------------------
// Worker processes

/// Runs the four steps from 1, 4 and 16 worker processes on both backends,
/// at both durabilities, and prints a table row per step and count.
fn measure_processes(url: &str, dir: &std::path::Path, quick: bool, link: &str) -> Result<()> {
    // Multiples of 16 (and of 16 batches of 100), so every count shares
    // them out evenly.
    let (single, batched) = if quick { (320, 1600) } else { (2000, 16000) };
    let runs = if quick { 1 } else { RUNS };
    println!(
        "\nWorker processes, each with its own handle (pool of 1 connection on PostgreSQL): \
         {single} tasks one at a time, {batched} in batches, shared out evenly; median of {runs} runs"
    );
    println!(
        "| step | durability | processes | SQLite (file) | PostgreSQL ({link}) | PostgreSQL / SQLite |"
    );
    println!("|---|---|---:|---:|---:|---:|");
    // A quick run checks the steps work; one durability is enough for that.
    let durabilities = if quick {
        &[Durability::Full][..]
    } else {
        &[Durability::Full, Durability::Normal]
    };
    for &durability in durabilities {
        let name = format!("{durability:?}").to_lowercase();
        for processes in PROCESSES {
            for (step, step_name) in STEPS.iter().enumerate() {
                let tasks = if step < 2 { single } else { batched };
                let (mut sqlite, mut postgres) = (Vec::new(), Vec::new());
                for run in 0..runs {
                    let id = format!("{name}_{processes}_{step}_{run}");
                    let file = dir.join(format!("processes-{id}.db"));
                    let file = file.to_str().ok_or("a UTF-8 path")?;
                    sqlite.push(run_workers(file, None, durability, step, processes, tasks)?);
                    let schema = format!("bench_{}_{id}", std::process::id());
                    postgres.push(run_workers(
                        url,
                        Some(&schema),
                        durability,
                        step,
                        processes,
                        tasks,
                    )?);
                    postgres::Client::connect(url, postgres::NoTls)?
                        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))?;
                }
                let (lite, pg) = (median(sqlite), median(postgres));
                println!(
                    "| {step_name} | {name} | {processes} | {lite:.0}/s | {pg:.0}/s | {:.2} |",
                    pg / lite
                );
            }
        }
    }
    Ok(())
}

/// One figure: creates the queue at `target` (pushing the tasks first when
/// the step pulls them), runs `processes` workers on it for `tasks` tasks in
/// all, checks what they left, and returns the tasks per second.
fn run_workers(
    target: &str,
    schema: Option<&str>,
    durability: Durability,
    step: usize,
    processes: usize,
    tasks: usize,
) -> Result<f64> {
    let queue = Queue::open(target, &worker_options(schema, durability)?)?;
    let pulling = step % 2 == 1;
    if pulling {
        for pushed in (0..tasks).step_by(BATCH) {
            queue.push_batch(
                &vec![PAYLOAD; BATCH.min(tasks - pushed)],
                &PushOptions::new(),
            )?;
        }
    }
    let spec = format!(
        "{step}:{}:{}:{}:{target}",
        if durability == Durability::Full {
            "full"
        } else {
            "normal"
        },
        tasks / processes,
        schema.unwrap_or(""),
    );
    let mut first = u128::MAX;
    let mut last = 0;
    for text in children::run(WORKER_ROLE, &vec![spec; processes])? {
        let mut times = text.split_whitespace().map(str::parse::<u128>);
        first = first.min(times.next().ok_or("no start time")??);
        last = last.max(times.next().ok_or("no end time")??);
    }
    let pending = queue.count(TaskState::Pending)? + queue.count(TaskState::Leased)?;
    if pending != if pulling { 0 } else { tasks as u64 } {
        return Err(
            format!("{pending} tasks left where the workers should have left none or all").into(),
        );
    }
    Ok(tasks as f64 / ((last - first) as f64 / 1e6))
}

/// A worker's options: one pooled connection is enough for one thread.
fn worker_options(schema: Option<&str>, durability: Durability) -> Result<OpenOptions> {
    let mut options = OpenOptions::new();
    options.durability(durability);
    if let Some(schema) = schema {
        options.postgres_schema(schema)?.pool_size(1)?;
    }
    Ok(options)
}

/// The worker's side: opens its handle, waits until every worker has, does
/// its share of one step, and prints when it started and ended (µs since
/// the Unix epoch).
fn run_worker(spec: &str) -> Result<()> {
    let mut parts = spec.splitn(5, ':');
    let mut next = |what: &'static str| parts.next().ok_or(what);
    let step: usize = next("step")?.parse()?;
    let durability = match next("durability")? {
        "full" => Durability::Full,
        _ => Durability::Normal,
    };
    let tasks: usize = next("tasks")?.parse()?;
    let schema = Some(next("schema")?).filter(|schema| !schema.is_empty());
    let queue = Queue::open(next("target")?, &worker_options(schema, durability)?)?;
    let (push, pull) = (PushOptions::new(), PullOptions::new());
    children::wait_for_start()?;
    let started = now_us();
    let mut done = 0;
    // A claim can come back empty while other processes' claims hold the
    // rows it looked at, though tasks are left for this one: it tries
    // again, unless nothing came for long enough to mean tasks went missing.
    let mut progress = Instant::now();
    while done < tasks {
        let size = BATCH.min(tasks - done);
        let finished = match step {
            0 => retrying(|| queue.push(PAYLOAD, &push)).map(|_| 1)?,
            1 => match retrying(|| queue.pull(&pull))? {
                Some(task) => retrying(|| queue.finish(task.receipt())).map(|_| 1)?,
                None => 0,
            },
            2 => retrying(|| queue.push_batch(&vec![PAYLOAD; size], &push)).map(|_| size)?,
            _ => {
                let batch = retrying(|| queue.pull_batch(size, &pull))?;
                let receipts: Vec<_> = batch.iter().map(|task| task.receipt()).collect();
                retrying(|| queue.finish_batch(&receipts))?;
                batch.len()
            }
        };
        if finished > 0 {
            progress = Instant::now();
        } else if progress.elapsed() > Duration::from_secs(10) {
            return Err("tasks went missing".into());
        }
        done += finished;
    }
    println!("{started} {}", now_us());
    Ok(())
}

/// Makes a call again when it waited longer than the busy timeout for the
/// SQLite file's write lock (or, on PostgreSQL, for a row lock or a pooled
/// connection), which many processes writing at once can make it.
fn retrying<T>(mut call: impl FnMut() -> tq::Result<T>) -> tq::Result<T> {
    loop {
        match call() {
            Err(err) if err.kind() == tq::ErrorKind::Busy => continue,
            result => return result,
        }
    }
}

/// Microseconds since the Unix epoch, the clock the workers agree on.
fn now_us() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_micros())
}

// ---------------------------------------------------------------------------
// The control features' quality bars

/// A schema of the server made for one run, dropped with what it holds
/// when the run is over.
struct Schema<'a> {
    url: &'a str,
    name: String,
}

impl Drop for Schema<'_> {
    fn drop(&mut self) {
        let dropped =
            postgres::Client::connect(self.url, postgres::NoTls).and_then(|mut client| {
                client.batch_execute(&format!("DROP SCHEMA \"{}\" CASCADE", self.name))
            });
        if let Err(err) = dropped {
            eprintln!("cannot drop schema {}: {err}", self.name);
        }
    }
}

/// The limit at both durabilities, then the groups at normal, from one
/// thread and from four (see `control.rs`), each in a fresh schema per run.
fn measure_control(url: &str, quick: bool) -> Result<()> {
    // Smaller backlogs than SQLite's: the server here drains a few thousand
    // tasks a second.
    let (limit_full, limit_normal) = if quick { (500, 1_000) } else { (5_000, 20_000) };
    let (groups, group_size) = if quick { (100, 10) } else { (1_000, 100) };
    let runs = if quick { 1 } else { RUNS };
    let made = Cell::new(0);
    let open = |durability: Durability| {
        let made = &made;
        move || -> Result<control::Fresh<Schema<'_>>> {
            made.set(made.get() + 1);
            let schema = Schema {
                url,
                name: format!("bench_{}_control_{}", std::process::id(), made.get()),
            };
            let mut options = OpenOptions::new();
            options
                .durability(durability)
                .postgres_schema(&schema.name)?;
            Ok((Queue::open(url, &options)?, schema))
        }
    };
    println!(
        "\nControl features, PostgreSQL: pull+finish one task per call, threads sharing a handle \
         (pool of {} connections); the runs with and without the feature interleaved, median of {runs}",
        tq::DEFAULT_POOL_SIZE
    );
    println!(
        "| case (with / without) | durability | threads | tasks | with | without | ratio | bar |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---|");
    let print = |case: &str,
                 durability: Durability,
                 pair: &control::Pair,
                 ratio: f64,
                 bar: String,
                 met: bool| {
        println!(
            "| {case} | {} | {} | {} | {:.0}/s | {:.0}/s | {ratio:.2}{} | {bar} |",
            format!("{durability:?}").to_lowercase(),
            pair.threads,
            pair.tasks,
            pair.with_median(),
            pair.without_median(),
            if met { "" } else { " (!)" },
        );
        println!(
            "|   runs | | | | {} | {} | | |",
            show_runs(&pair.with),
            show_runs(&pair.without)
        );
    };
    for (durability, backlog) in [
        (Durability::Full, limit_full),
        (Durability::Normal, limit_normal),
    ] {
        let title = format!("{durability:?} concurrency limit").to_lowercase();
        let pair = control::measure_limit(&title, runs, backlog, open(durability))?;
        let ratio = pair.throughput_ratio();
        print(
            &format!("limit of {} / no limit", control::LIMIT),
            durability,
            &pair,
            ratio,
            format!("with/without >= {:.2}", control::LIMIT_TARGET),
            ratio >= control::LIMIT_TARGET,
        );
    }
    for threads in control::GROUP_THREADS {
        let title = format!("normal groups, threads: {threads}");
        let pair = control::measure_groups(
            &title,
            runs,
            groups,
            group_size,
            threads,
            open(Durability::Normal),
        )?;
        let ratio = pair.claim_cost_ratio();
        print(
            &format!("{groups} groups of {group_size}, 1 at once / no groups"),
            Durability::Normal,
            &pair,
            ratio,
            format!(
                "claim cost with/without <= {:.2}; pull+finish {:.2}",
                control::GROUP_TARGET,
                pair.cost_ratio()
            ),
            ratio <= control::GROUP_TARGET,
        );
    }
    println!(
        "ratio: of the medians; for groups, time claiming per task with over without; (!) the bar is missed"
    );
    Ok(())
}

/// Each run's rate, in run order.
fn show_runs(rates: &[f64]) -> String {
    rates
        .iter()
        .map(|rate| format!("{rate:.0}"))
        .collect::<Vec<_>>()
        .join(", ")
}
