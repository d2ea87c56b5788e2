//! `tq serve` under load: how fast each page, the JSON API and `/metrics`
//! answer on a file of 1,000,000 tasks, and how much a dashboard being
//! read slows the workers of its file.
//!
//! `cargo bench -p tq-cli --bench dashboard` (or `make bench-serve`);
//! `TQ_BENCH_QUICK=1` runs a smoke version on 100,000 tasks. Files go to
//! `TQ_BENCH_DIR` (default `target/bench-tmp`), on the real disk.

#[path = "../tests/serving/mod.rs"]
mod serving;

use std::env;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use serving::{open, Served};
use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue};

/// The sizes of one run of the benchmark.
struct Sizes {
    /// Tasks in the file whose pages are timed.
    file_tasks: usize,
    /// Times each page is fetched; the median is reported.
    rounds: usize,
    /// Tasks each drain works, with and without a dashboard read.
    drain_tasks: usize,
    /// Drains of each kind, interleaved.
    drains: usize,
}

fn sizes() -> Sizes {
    match env::var("TQ_BENCH_QUICK").as_deref() {
        Ok("1") => Sizes {
            file_tasks: 100_000,
            rounds: 5,
            drain_tasks: 2_000,
            drains: 1,
        },
        Ok("0") | Err(_) => Sizes {
            file_tasks: 1_000_000,
            rounds: 20,
            drain_tasks: 50_000,
            drains: 7,
        },
        Ok(other) => panic!("TQ_BENCH_QUICK must be 0 or 1, got {other:?}"),
    }
}

fn bench_dir() -> PathBuf {
    let dir = env::var_os("TQ_BENCH_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/bench-tmp"),
        PathBuf::from,
    );
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(30)))
            .max_redirects(0)
            .build(),
    )
}

/// GETs `path` and fails the run unless it answers 200.
fn fetch(agent: &ureq::Agent, served: &Served, path: &str) {
    let mut response = agent.get(served.url(path)).call().unwrap();
    assert_eq!(response.status().as_u16(), 200, "GET {path}");
    response.body_mut().read_to_string().unwrap();
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// A file of `total` tasks in queue `bulk`: 1% dead (the first ids, with
/// seven reasons), 1% leased, the rest pending; and one with a unique key.
fn seed_million(file: &str, total: usize) {
    let bulk = open(file, "bulk");
    let mut once = PushOptions::new();
    once.max_attempts(1).unwrap();
    let batch: Vec<String> = (0..10_000).map(|n| format!("{{\"n\":{n}}}")).collect();
    let one_percent = total / 100;
    for _ in 0..(2 * one_percent).div_ceil(batch.len()) {
        bulk.push_batch(&batch, &once).unwrap();
    }
    for task in bulk.pull_batch(one_percent, &PullOptions::new()).unwrap() {
        bulk.fail(task.receipt(), &format!("reason {}", task.id() % 7))
            .unwrap();
    }
    bulk.pull_batch(one_percent, &PullOptions::new()).unwrap();
    while bulk.last_id().unwrap() < total as i64 - 1 {
        bulk.push_batch(&batch, &PushOptions::new()).unwrap();
    }
    let mut key = PushOptions::new();
    key.unique_key("report:2026-12").unwrap();
    bulk.push("{\"report\":true}", &key).unwrap();
}

/// The answer times of every page, the API and `/metrics`.
fn answer_times(sizes: &Sizes, dir: &std::path::Path) {
    let file = dir.join("dashboard-million.db");
    let file = file.to_str().unwrap();
    let started = Instant::now();
    seed_million(file, sizes.file_tasks);
    eprintln!(
        "seeded {} tasks in {:.1} s",
        sizes.file_tasks,
        started.elapsed().as_secs_f64()
    );
    let served = Served::start(file, &[]);
    let agent = agent();
    let middle = sizes.file_tasks / 2;
    let last = sizes.file_tasks - 1;
    let paths = [
        "/".to_owned(),
        "/api/queues".to_owned(),
        "/metrics".to_owned(),
        "/queues/bulk?state=pending".to_owned(),
        format!("/queues/bulk?state=pending&after={middle}"),
        "/queues/bulk?state=pending&order=newest".to_owned(),
        "/queues/bulk?state=leased".to_owned(),
        "/queues/bulk?state=done".to_owned(),
        "/queues/bulk?state=cancelled&order=newest".to_owned(),
        "/api/queues/bulk/tasks?state=dead&limit=1000".to_owned(),
        format!("/tasks/{last}?queue=bulk"),
        format!("/api/tasks/{middle}"),
        "/api/queues/bulk/keys/report:2026-12".to_owned(),
        "/queues/bulk/dead".to_owned(),
        "/queues/bulk/scheduled".to_owned(),
        "/queues/bulk/retrying".to_owned(),
        "/schedules".to_owned(),
        "/workers".to_owned(),
    ];
    println!(
        "\nAnswer times on a file of {} tasks (98% pending, 1% leased, 1% dead), \
         {} rounds:\n",
        sizes.file_tasks, sizes.rounds
    );
    println!("| GET | median ms | max ms |");
    println!("|---|---:|---:|");
    for path in &paths {
        let times: Vec<f64> = (0..sizes.rounds)
            .map(|_| {
                let started = Instant::now();
                fetch(&agent, &served, path);
                started.elapsed().as_secs_f64() * 1000.0
            })
            .collect();
        let max = times.iter().copied().fold(0.0, f64::max);
        println!("| `{path}` | {:.1} | {max:.1} |", median(times));
    }
}

/// Drains `tasks` tasks from 4 threads (pull, then finish, at `normal`)
/// on a new file; with `read`, while a dashboard of the file is read ten
/// times a second (the overview, its JSON, `/metrics` and a page of
/// pending tasks: twenty times what an open page and a Prometheus scrape
/// ask). Returns tasks per second.
fn drain(dir: &std::path::Path, run: usize, tasks: usize, read: bool) -> f64 {
    let file = dir.join(format!("dashboard-drain-{run}-{read}.db"));
    let file = file.to_str().unwrap().to_owned();
    let mut options = OpenOptions::new();
    options.durability(Durability::Normal);
    let queue = Arc::new(Queue::open(&file, &options).unwrap());
    let payloads: Vec<String> = (0..tasks).map(|n| format!("{{\"n\":{n}}}")).collect();
    for chunk in payloads.chunks(10_000) {
        queue.push_batch(chunk, &PushOptions::new()).unwrap();
    }
    let served = read.then(|| Served::start(&file, &[]));
    let done = Arc::new(AtomicBool::new(false));
    let reader = served.as_ref().map(|served| {
        let base = served.base.clone();
        let done = Arc::clone(&done);
        thread::spawn(move || {
            let agent = agent();
            while !done.load(Ordering::Relaxed) {
                for path in [
                    "/",
                    "/api/queues",
                    "/metrics",
                    "/queues/default?state=pending",
                ] {
                    let mut response = agent.get(format!("{base}{path}")).call().unwrap();
                    response.body_mut().read_to_string().unwrap();
                }
                thread::sleep(Duration::from_millis(100));
            }
        })
    });
    let started = Instant::now();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let queue = Arc::clone(&queue);
            thread::spawn(move || {
                while let Some(task) = queue.pull(&PullOptions::new()).unwrap() {
                    queue.finish(task.receipt()).unwrap();
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let rate = tasks as f64 / started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    if let Some(reader) = reader {
        reader.join().unwrap();
    }
    drop(served);
    drop(queue);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{file}{suffix}"));
    }
    rate
}

fn slowdown(sizes: &Sizes, dir: &std::path::Path) {
    let (mut alone, mut read, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..sizes.drains {
        // Interleaved, the order swapped each run; each pair's ratio
        // compares two drains made seconds apart, which the machine's
        // other load moves less than it moves runs far apart.
        let mut pair = [0.0; 2];
        for with_dashboard in [run % 2 == 1, run % 2 == 0] {
            let rate = drain(dir, run, sizes.drain_tasks, with_dashboard);
            eprintln!("drain {run}, dashboard read: {with_dashboard}: {rate:.0} tasks/s");
            pair[usize::from(with_dashboard)] = rate;
        }
        alone.push(pair[0]);
        read.push(pair[1]);
        ratios.push(pair[1] / pair[0]);
    }
    println!(
        "\nDrain of {} tasks, 4 threads, pull then finish at `normal`, {} interleaved \
         pairs of runs:\n",
        sizes.drain_tasks, sizes.drains
    );
    println!("| | tasks/s, median |");
    println!("|---|---:|");
    println!("| alone | {:.0} |", median(alone));
    println!(
        "| while a dashboard of the file is read 10 times a second | {:.0} |",
        median(read)
    );
    println!(
        "| ratio, median of the pairs' (bar: at least 0.95) | {:.2} |",
        median(ratios)
    );
}

fn main() {
    let sizes = sizes();
    let dir = tempfile::tempdir_in(bench_dir()).unwrap();
    answer_times(&sizes, dir.path());
    slowdown(&sizes, dir.path());
}
