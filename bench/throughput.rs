//! tq's throughput benchmark: `cargo bench --bench throughput` (or `make
//! bench`); bench/README.md explains the figures and the knobs.
//!
//! One thread, one operation per transaction. tq is compared with the same
//! statements run through rusqlite directly ("bare": what tq's design can
//! reach on this disk) and with the Python prototype it replaces; then its
//! claim rate is measured as the table grows; then batches and the wake-up
//! of waiting pulls (`batches.rs`); then the control features' quality
//! bars (`control.rs`). Every figure is the median of several runs on fresh
//! files, the runs of compared cases interleaved.

mod batches;
mod children;
mod concurrency;
mod control;
mod drain;

use std::cell::Cell;
use std::env;
use std::error::Error;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{params, Connection, OptionalExtension};
use serde_json::{json, Value};
use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue, TaskState};

type Result<T> = std::result::Result<T, Box<dyn Error>>;

/// Every task's payload, for tq, bare SQLite and the prototype alike.
const PAYLOAD: &str = r#"{"kind":"email","to":"user@example.com","template":"welcome"}"#;

/// tq/bare, and a large table's rate over a small one's, should reach this.
const TARGET_RATIO: f64 = 0.80;

/// The interpreter that runs bench/prototype.py.
const PYTHON: &str = "python3";

const DURABILITIES: [Durability; 2] = [Durability::Full, Durability::Normal];

fn main() {
    // This binary run again as the waiting process of the wake-up figures.
    if let Ok(spec) = env::var(concurrency::WRITER_ROLE) {
        if let Err(err) = concurrency::run_writer(&spec) {
            eprintln!("writing process failed: {err}");
            std::process::exit(1);
        }
        return;
    }
    if let Ok(role) = env::var(batches::WAITER_ROLE) {
        let (samples, path) = role.split_once(':').expect("samples:path");
        let result = batches::run_waiter(path, samples.parse().expect("a count"));
        if let Err(err) = result {
            eprintln!("waiting process failed: {err}");
            std::process::exit(1);
        }
        return;
    }
    if let Ok(path) = env::var(batches::IDLE_ROLE) {
        if let Err(err) = batches::run_idle_waiter(&path) {
            eprintln!("idle waiting process failed: {err}");
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
    let started = Instant::now();
    let config = Config::from_env()?;
    let dir = BenchDir::create(&config.parent_dir)?;
    let machine = Machine::describe(dir.path());
    let prototype = Prototype::probe(&config.prototype_driver);
    print_header(&config, &machine, &prototype, &dir);

    let wanted = |name: &str| {
        config
            .parts
            .as_ref()
            .is_none_or(|parts| parts.iter().any(|part| part == name))
    };

    let comparisons = part(
        wanted("comparison"),
        || {
            DURABILITIES
                .into_iter()
                .map(|durability| compare(&config, &dir, durability, &prototype))
                .collect()
        },
        |rows| print_comparisons(&config, rows, &prototype),
    )?;
    let scaling = part(
        wanted("scaling"),
        || measure_scaling(&config, &dir),
        |rows| print_scaling(&config, rows),
    )?;
    let (batch_rows, latencies, idle_cpu) = if wanted("batches") {
        let batch_rows = batches::measure(&config, &dir)?;
        batches::print(&config, &batch_rows);
        let latencies = batches::measure_latency(&config, &dir)?;
        let idle_cpu = batches::idle_cpu(&config, &dir)?;
        batches::print_latency(&latencies, idle_cpu);
        (batch_rows, latencies, Some(idle_cpu))
    } else {
        (Vec::new(), Vec::new(), None)
    };

    let drains = part(
        wanted("drain"),
        || drain::measure(&config, &dir),
        |rows| drain::print(&config, rows),
    )?;
    let idle = part(
        wanted("idle-waiters"),
        || batches::idle_waiters(&config, &dir),
        batches::print_idle,
    )?;
    let threads = part(
        wanted("threads"),
        || concurrency::measure_threads(&config, &dir),
        concurrency::print_threads,
    )?;
    let processes = part(
        wanted("processes"),
        || concurrency::measure_processes(&config, &dir),
        concurrency::print_processes,
    )?;
    let fairness = part(
        wanted("fairness"),
        || concurrency::measure_fairness(&config, &dir),
        concurrency::print_fairness,
    )?;
    let controls = part(
        wanted("control"),
        || measure_control(&config, &dir),
        print_control,
    )?;

    let duration = started.elapsed();
    println!("\ntotal time: {:.0} s", duration.as_secs_f64());
    let report = json!({
        "machine": machine.to_json(),
        "config": config.to_json(),
        "prototype": prototype.to_json(),
        "comparison": comparisons
            .iter()
            .flat_map(Comparison::rows)
            .map(|row| row.to_json())
            .collect::<Vec<_>>(),
        "scaling": scaling.iter().map(ScalingRow::to_json).collect::<Vec<_>>(),
        "batches": batch_rows.iter().map(batches::BatchRow::to_json).collect::<Vec<_>>(),
        "wakeups": latencies.iter().map(batches::Latency::to_json).collect::<Vec<_>>(),
        "drain": drains.iter().map(drain::DrainRow::to_json).collect::<Vec<_>>(),
        "idle_wait_cpu_ms_per_s": idle_cpu,
        "idle_waiters": idle.iter().map(batches::IdleRow::to_json).collect::<Vec<_>>(),
        "threads": threads.iter().map(concurrency::ThreadRow::to_json).collect::<Vec<_>>(),
        "processes": processes.iter().map(concurrency::ProcessRow::to_json).collect::<Vec<_>>(),
        "fairness": fairness.iter().map(concurrency::Fairness::to_json).collect::<Vec<_>>(),
        "control": controls.iter().map(ControlRow::to_json).collect::<Vec<_>>(),
        "duration_s": duration.as_secs_f64(),
    });
    fs::write(
        &config.json_path,
        serde_json::to_string_pretty(&report)? + "\n",
    )
    .map_err(|err| format!("cannot write {}: {err}", config.json_path.display()))?;
    println!("results also in {}", config.json_path.display());
    Ok(())
}

/// One part of the benchmark, when it was asked for: measures, prints, and
/// returns its rows (none for a part left out).
fn part<T>(
    wanted: bool,
    measure: impl FnOnce() -> Result<Vec<T>>,
    print: impl FnOnce(&[T]),
) -> Result<Vec<T>> {
    if !wanted {
        return Ok(Vec::new());
    }
    let rows = measure()?;
    print(&rows);
    Ok(rows)
}

// ---------------------------------------------------------------------------
// Settings

struct Config {
    quick: bool,
    runs: usize,
    ops_full: u64,
    ops_normal: u64,
    /// Pending tasks in the small queues of the scaling runs: each round of
    /// a scaling run pulls this many tasks from every table.
    small_queue: u64,
    /// Rounds per scaling run; the tasks pulled are put back between rounds.
    scaling_rounds: u64,
    /// Rows in the large tables of the scaling runs.
    large_table: u64,
    /// Batches of `batches::BATCH` tasks per run of the batch figures.
    batches: u64,
    /// Pushes that wake a waiting pull, per wake-up figure.
    wakeups: u64,
    /// Tasks in the backlog of a drain run.
    drain: u64,
    /// Tasks drained per run of the concurrency limit's figures, at `full`
    /// and at `normal`.
    limit_full: u64,
    limit_normal: u64,
    /// The groups of the group figures, and the tasks in each.
    groups: u64,
    group_size: u64,
    /// Each run of the benchmark makes a fresh directory in here. It must be
    /// on the disk to measure: the default is under target/, as /tmp may be
    /// held in memory, where a flush costs nothing.
    parent_dir: PathBuf,
    json_path: PathBuf,
    prototype_driver: PathBuf,
    /// The parts of the benchmark to run (`TQ_BENCH_PARTS`); `None`: all.
    parts: Option<Vec<String>>,
}

/// The parts of the benchmark, in the order they run.
const PARTS: [&str; 9] = [
    "comparison",
    "scaling",
    "batches",
    "drain",
    "idle-waiters",
    "threads",
    "processes",
    "fairness",
    "control",
];

impl Config {
    fn from_env() -> Result<Config> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        let quick = match env::var("TQ_BENCH_QUICK").as_deref() {
            Err(_) | Ok("" | "0") => false,
            Ok("1") => true,
            Ok(other) => return Err(format!("TQ_BENCH_QUICK must be 0 or 1, got {other:?}").into()),
        };
        let ops = env_count("TQ_BENCH_OPS")?;
        let (ops_full, ops_normal) = match ops {
            Some(ops) => (ops, ops),
            None if quick => (200, 200),
            None => (2_000, 20_000),
        };
        let (small_queue, scaling_rounds) = if quick { (100, 2) } else { (1_000, 5) };
        let large_table =
            env_count("TQ_BENCH_LARGE")?.unwrap_or(if quick { 20_000 } else { 1_000_000 });
        if large_table < small_queue {
            return Err(format!("TQ_BENCH_LARGE must be at least {small_queue}").into());
        }
        Ok(Config {
            quick,
            runs: env_count("TQ_BENCH_RUNS")?.unwrap_or(if quick { 1 } else { 5 }) as usize,
            ops_full,
            ops_normal,
            small_queue,
            scaling_rounds,
            large_table,
            batches: env_count("TQ_BENCH_BATCHES")?.unwrap_or(if quick { 3 } else { 100 }),
            wakeups: env_count("TQ_BENCH_WAKEUPS")?.unwrap_or(if quick { 10 } else { 200 }),
            drain: env_count("TQ_BENCH_DRAIN")?.unwrap_or(if quick { 2_000 } else { 1_000_000 }),
            limit_full: if quick { 500 } else { 10_000 },
            limit_normal: if quick { 1_000 } else { 100_000 },
            groups: if quick { 100 } else { 1_000 },
            group_size: if quick { 10 } else { 100 },
            parent_dir: env::var_os("TQ_BENCH_DIR")
                .map_or_else(|| repo.join("target/bench-tmp"), PathBuf::from),
            json_path: env::var_os("TQ_BENCH_JSON")
                .map_or_else(|| repo.join("target/bench-results.json"), PathBuf::from),
            prototype_driver: repo.join("bench/prototype.py"),
            parts: env_parts()?,
        })
    }

    fn limit_backlog(&self, durability: Durability) -> u64 {
        match durability {
            Durability::Full => self.limit_full,
            Durability::Normal => self.limit_normal,
        }
    }

    fn ops(&self, durability: Durability) -> u64 {
        match durability {
            Durability::Full => self.ops_full,
            Durability::Normal => self.ops_normal,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "quick": self.quick,
            "runs": self.runs,
            "ops_full": self.ops_full,
            "ops_normal": self.ops_normal,
            "small_queue": self.small_queue,
            "scaling_rounds": self.scaling_rounds,
            "large_table": self.large_table,
            "batches": self.batches,
            "wakeups": self.wakeups,
            "drain": self.drain,
            "limit_full": self.limit_full,
            "limit_normal": self.limit_normal,
            "groups": self.groups,
            "group_size": self.group_size,
            "parts": self.parts,
        })
    }
}

/// The parts named in `TQ_BENCH_PARTS` (comma-separated), if set.
fn env_parts() -> Result<Option<Vec<String>>> {
    let Ok(text) = env::var("TQ_BENCH_PARTS") else {
        return Ok(None);
    };
    let parts: Vec<String> = text.split(',').map(|part| part.trim().to_owned()).collect();
    match parts.iter().find(|part| !PARTS.contains(&part.as_str())) {
        Some(unknown) => Err(format!(
            "TQ_BENCH_PARTS: unknown part {unknown:?} (the parts: {})",
            PARTS.join(", ")
        )
        .into()),
        None => Ok(Some(parts)),
    }
}

/// A positive count from the environment variable `name`, if set.
fn env_count(name: &str) -> Result<Option<u64>> {
    let Ok(text) = env::var(name) else {
        return Ok(None);
    };
    match text.replace('_', "").parse::<u64>() {
        Ok(count) if count > 0 => Ok(Some(count)),
        _ => Err(format!("{name} must be a positive whole number, got {text:?}").into()),
    }
}

/// The durability's name in the output, which is also its `PRAGMA synchronous` value.
fn label(durability: Durability) -> &'static str {
    match durability {
        Durability::Full => "full",
        Durability::Normal => "normal",
    }
}

// ---------------------------------------------------------------------------
// Files

/// The directory holding every file of one benchmark run, removed at the end.
struct BenchDir {
    dir: tempfile::TempDir,
    files_made: Cell<u32>,
}

impl BenchDir {
    fn create(parent: &Path) -> Result<BenchDir> {
        fs::create_dir_all(parent)
            .map_err(|err| format!("cannot create {}: {err}", parent.display()))?;
        let dir = tempfile::Builder::new()
            .prefix("run-")
            .tempdir_in(fs::canonicalize(parent)?)?;
        if dir.path().to_str().is_none() {
            return Err(format!(
                "{} is not UTF-8; tq needs a UTF-8 path",
                dir.path().display()
            )
            .into());
        }
        Ok(BenchDir {
            dir,
            files_made: Cell::new(0),
        })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A database path not used before in this run.
    fn fresh(&self, stem: &str) -> DbFile {
        let number = self.files_made.get() + 1;
        self.files_made.set(number);
        let path = self.path().join(format!("{stem}-{number}.db"));
        DbFile(path.to_str().expect("checked UTF-8 in create").to_owned())
    }

    /// A fresh copy of `template`, flushed to the disk now so that its
    /// write-back does not fall into the timed part.
    fn copy_of(&self, template: &DbFile) -> Result<DbFile> {
        let copy = self.fresh("copy");
        fs::copy(template.path(), copy.path())?;
        File::open(copy.path())?.sync_all()?;
        Ok(copy)
    }
}

/// A database file of one run. It goes, with its WAL and shared-memory
/// files, when dropped, so that the large tables do not pile up on the disk.
struct DbFile(String);

impl DbFile {
    fn path(&self) -> &str {
        &self.0
    }
}

impl Drop for DbFile {
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm"] {
            let _ = fs::remove_file(format!("{}{suffix}", self.0));
        }
    }
}

// ---------------------------------------------------------------------------
// Measuring

/// How long some number of operations took.
#[derive(Clone, Copy)]
struct Timing {
    ops: u64,
    elapsed: Duration,
}

impl Timing {
    fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }
}

fn timed(ops: u64, work: impl FnOnce() -> Result<()>) -> Result<Timing> {
    let start = Instant::now();
    work()?;
    Ok(Timing {
        ops,
        elapsed: start.elapsed(),
    })
}

/// ops/s over the runs of one measurement.
struct Stats {
    median: f64,
    min: f64,
    max: f64,
    /// In the order the runs were made.
    runs: Vec<f64>,
}

impl Stats {
    fn of(timings: impl IntoIterator<Item = Timing>) -> Stats {
        Stats::of_rates(timings.into_iter().map(|timing| timing.rate()).collect())
    }

    /// The statistics of rates already computed, in run order.
    fn of_rates(runs: Vec<f64>) -> Stats {
        let mut sorted = runs.clone();
        sorted.sort_by(f64::total_cmp);
        let middle = sorted.len() / 2;
        let median = if sorted.len() % 2 == 1 {
            sorted[middle]
        } else {
            (sorted[middle - 1] + sorted[middle]) / 2.0
        };
        Stats {
            median,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            runs,
        }
    }

    fn to_json(&self) -> Value {
        json!({ "median": self.median, "min": self.min, "max": self.max, "runs": self.runs })
    }
}

/// One measured case: its name in the progress lines, and one run of it.
type Case<'a, T> = (String, Box<dyn FnMut() -> Result<T> + 'a>);

/// Runs every case `runs` times, in rounds (a, b, c, a, b, c, ...) so that a
/// noisy stretch of this shared machine falls on all cases alike, and returns
/// each case's results in run order.
fn interleave<T>(title: &str, runs: usize, mut cases: Vec<Case<'_, T>>) -> Result<Vec<Vec<T>>> {
    let mut results: Vec<Vec<T>> = cases.iter().map(|_| Vec::with_capacity(runs)).collect();
    for round in 1..=runs {
        eprintln!("  {title}: round {round} of {runs}");
        for ((name, case), case_results) in cases.iter_mut().zip(&mut results) {
            let result = case().map_err(|err| format!("{title}, {name}: {err}"))?;
            case_results.push(result);
        }
    }
    Ok(results)
}

fn check(ok: bool, failure: &str) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(failure.into())
    }
}

/// Milliseconds since the Unix epoch, the clock tq stores.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

// ---------------------------------------------------------------------------
// Push and pull+finish: bare SQLite, tq and the prototype

/// One run's push rate, and its pull+finish rate on the tasks just pushed.
struct PushPull {
    push: Timing,
    pull_finish: Timing,
}

/// The push and pull+finish rates of one subject over the runs.
struct Rates {
    push: Stats,
    pull_finish: Stats,
}

impl Rates {
    fn of(runs: Vec<PushPull>) -> Rates {
        Rates {
            push: Stats::of(runs.iter().map(|run| run.push)),
            pull_finish: Stats::of(runs.iter().map(|run| run.pull_finish)),
        }
    }
}

struct Comparison {
    durability: Durability,
    ops: u64,
    bare: Rates,
    tq: Rates,
    /// Measured at `full` only: the prototype always runs at its default,
    /// `synchronous=FULL`.
    prototype: Option<Rates>,
}

fn compare(
    config: &Config,
    dir: &BenchDir,
    durability: Durability,
    prototype: &Prototype,
) -> Result<Comparison> {
    let ops = config.ops(durability);
    let mut cases: Vec<Case<'_, PushPull>> = vec![
        (
            "bare SQLite".into(),
            Box::new(move || bare_push_pull(dir, durability, ops)),
        ),
        (
            "tq".into(),
            Box::new(move || tq_push_pull(dir, durability, ops)),
        ),
    ];
    if let (Durability::Full, Prototype::Available(_)) = (durability, prototype) {
        let driver = &config.prototype_driver;
        cases.push((
            "prototype".into(),
            Box::new(move || prototype_push_pull(dir, driver, ops)),
        ));
    }
    let title = format!("{} push, pull+finish", label(durability));
    let mut results = interleave(&title, config.runs, cases)?
        .into_iter()
        .map(Rates::of);
    Ok(Comparison {
        durability,
        ops,
        bare: results.next().expect("one result per case"),
        tq: results.next().expect("one result per case"),
        prototype: results.next(),
    })
}

/// The bare table: the columns the bare statements use, and tq's ready index.
/// Its ids are SQLite's rowids, as tq's are (tq keeps them from reuse with
/// a floor written only when the newest task is deleted).
const BARE_SCHEMA: &str = "
    CREATE TABLE tasks (
        id         INTEGER PRIMARY KEY,
        state      INTEGER NOT NULL,
        payload    TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        run_at     INTEGER NOT NULL
    );
    CREATE INDEX tasks_ready ON tasks (run_at, id) WHERE state = 0;";

/// The bare claim: the first ready task in tq's order, marked taken.
const BARE_CLAIM: &str = "UPDATE tasks SET state = 1
     WHERE id = (SELECT id FROM tasks
                 WHERE state = 0 AND run_at <= ?1
                 ORDER BY run_at, id LIMIT 1)
     RETURNING id, payload";

/// The bare finish: the claimed task deleted.
const BARE_FINISH: &str = "DELETE FROM tasks WHERE id = ?1";

/// Pushes `ops` tasks, then claims and deletes them, with rusqlite alone,
/// one statement per transaction: the work tq does, without tq.
fn bare_push_pull(dir: &BenchDir, durability: Durability, ops: u64) -> Result<PushPull> {
    let file = dir.fresh("bare");
    let conn = Connection::open(file.path())?;
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0))?;
    check(mode == "wal", "SQLite refused WAL mode")?;
    conn.pragma_update(None, "synchronous", label(durability))?;
    conn.pragma_update(None, "mmap_size", 0)?;
    conn.execute_batch(BARE_SCHEMA)?;
    let count_tasks = || -> Result<u64> {
        let count: i64 = conn.query_row("SELECT count(*) FROM tasks", [], |row| row.get(0))?;
        Ok(count as u64)
    };

    let push = timed(ops, || {
        for _ in 0..ops {
            let now = now_ms();
            bare_transaction(&conn, || {
                conn.prepare_cached(
                    "INSERT INTO tasks (state, payload, created_at, run_at) VALUES (0, ?1, ?2, ?2)",
                )?
                .execute(params![PAYLOAD, now])?;
                Ok(())
            })?;
        }
        Ok(())
    })?;
    check(
        count_tasks()? == ops,
        "bare push: the table does not hold every task pushed",
    )?;

    let pull_finish = timed(ops, || {
        for _ in 0..ops {
            let now = now_ms();
            let (id, payload): (i64, String) = bare_transaction(&conn, || {
                conn.prepare_cached(BARE_CLAIM)?
                    .query_row([now], |row| Ok((row.get(0)?, row.get(1)?)))
                    .optional()?
                    .ok_or_else(|| "bare claim found no task with tasks pending".into())
            })?;
            check(payload == PAYLOAD, "bare claim returned another payload")?;
            let deleted = bare_transaction(&conn, || {
                Ok(conn.prepare_cached(BARE_FINISH)?.execute([id])?)
            })?;
            check(deleted == 1, "bare finish deleted no row")?;
        }
        Ok(())
    })?;
    check(count_tasks()? == 0, "bare: tasks left after the drain")?;
    Ok(PushPull { push, pull_finish })
}

/// One `BEGIN IMMEDIATE` ... `COMMIT` transaction, statements cached, as tq makes them.
fn bare_transaction<T>(conn: &Connection, body: impl FnOnce() -> Result<T>) -> Result<T> {
    conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    let value = body()?;
    conn.prepare_cached("COMMIT")?.execute([])?;
    Ok(value)
}

fn tq_push_pull(dir: &BenchDir, durability: Durability, ops: u64) -> Result<PushPull> {
    let file = dir.fresh("tq");
    let queue = Queue::open(file.path(), OpenOptions::new().durability(durability))?;
    let options = PushOptions::new();
    let push = timed(ops, || {
        for _ in 0..ops {
            queue.push(PAYLOAD, &options)?;
        }
        Ok(())
    })?;
    check_queue(&queue, ops, 0)?;
    let pull_finish = tq_pull_finish(&queue, ops)?;
    check_queue(&queue, 0, 0)?;
    Ok(PushPull { push, pull_finish })
}

/// Pulls and finishes `ops` tasks one by one; each pull must return one.
fn tq_pull_finish(queue: &Queue, ops: u64) -> Result<Timing> {
    let options = PullOptions::new();
    timed(ops, || {
        for _ in 0..ops {
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
    })
}

/// Fails unless the queue holds exactly `pending` pending tasks, none
/// leased, and `done` done.
fn check_queue(queue: &Queue, pending: u64, done: u64) -> Result<()> {
    let found = (
        queue.count(TaskState::Pending)?,
        queue.count(TaskState::Leased)?,
        queue.count(TaskState::Done)?,
    );
    if found != (pending, 0, done) {
        return Err(format!(
            "the queue holds {} pending, {} leased and {} done tasks; expected {pending}, 0 and {done}",
            found.0, found.1, found.2
        )
        .into());
    }
    Ok(())
}

/// Whether the prototype can be run, and how it is set up.
enum Prototype {
    /// The driver's description: where the prototype is, Python's and its
    /// SQLite's versions, the synchronous level it runs at.
    Available(Value),
    /// Why the prototype's rows are left out.
    Skipped(String),
}

impl Prototype {
    fn probe(driver: &Path) -> Prototype {
        match run_driver(driver, &["--probe"]) {
            Ok(description) => Prototype::Available(description),
            Err(reason) => Prototype::Skipped(reason.to_string()),
        }
    }

    fn to_json(&self) -> Value {
        match self {
            Prototype::Available(description) => description.clone(),
            Prototype::Skipped(reason) => json!({ "skipped": reason }),
        }
    }
}

/// Runs bench/prototype.py with `args` and returns the JSON it prints.
fn run_driver(driver: &Path, args: &[&str]) -> Result<Value> {
    let output = Command::new(PYTHON)
        .arg(driver)
        .args(args)
        .output()
        .map_err(|err| format!("cannot run {PYTHON}: {err}"))?;
    if !output.status.success() {
        return Err(format!(
            "{} ({}): {}",
            driver.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    Ok(serde_json::from_slice(&output.stdout)?)
}

fn prototype_push_pull(dir: &BenchDir, driver: &Path, ops: u64) -> Result<PushPull> {
    let file = dir.fresh("prototype");
    let report = run_driver(driver, &[file.path(), &ops.to_string(), PAYLOAD])?;
    check(
        report["journal_mode"] == "wal",
        "the prototype's file is not in WAL mode",
    )?;
    let timing = |phase: &str| -> Result<Timing> {
        let seconds = report[phase]["seconds"].as_f64();
        let measured = report[phase]["ops"].as_u64();
        match (seconds, measured) {
            (Some(seconds), Some(measured)) if measured == ops && seconds > 0.0 => Ok(Timing {
                ops,
                elapsed: Duration::from_secs_f64(seconds),
            }),
            _ => Err(format!("the driver's report has no valid {phase:?}: {report}").into()),
        }
    };
    Ok(PushPull {
        push: timing("push")?,
        pull_finish: timing("pull_finish")?,
    })
}

/// One operation at one durability: a line of the comparison table.
struct ComparisonRow<'a> {
    durability: Durability,
    operation: &'static str,
    ops: u64,
    bare: &'a Stats,
    tq: &'a Stats,
    prototype: Option<&'a Stats>,
}

impl Comparison {
    fn rows(&self) -> [ComparisonRow<'_>; 2] {
        let row = |operation, pick: fn(&Rates) -> &Stats| ComparisonRow {
            durability: self.durability,
            operation,
            ops: self.ops,
            bare: pick(&self.bare),
            tq: pick(&self.tq),
            prototype: self.prototype.as_ref().map(pick),
        };
        [
            row("push", |rates| &rates.push),
            row("pull+finish", |rates| &rates.pull_finish),
        ]
    }
}

impl ComparisonRow<'_> {
    fn tq_over_bare(&self) -> f64 {
        self.tq.median / self.bare.median
    }

    fn tq_over_prototype(&self) -> Option<f64> {
        self.prototype
            .map(|prototype| self.tq.median / prototype.median)
    }

    fn to_json(&self) -> Value {
        json!({
            "durability": label(self.durability),
            "operation": self.operation,
            "ops_per_run": self.ops,
            "bare": self.bare.to_json(),
            "tq": self.tq.to_json(),
            "tq_over_bare": self.tq_over_bare(),
            "prototype": self.prototype.map(Stats::to_json),
            "tq_over_prototype": self.tq_over_prototype(),
        })
    }
}

// ---------------------------------------------------------------------------
// Pull+finish as the table grows

/// The tasks a scaling run starts with.
#[derive(Clone, Copy)]
struct Shape {
    pending: u64,
    /// Done tasks kept as history; a queue with any is opened with history.
    done: u64,
}

impl Shape {
    fn describe(&self) -> String {
        match self.done {
            0 => format!("{} pending", thousands(self.pending)),
            done => format!(
                "{} pending + {} done (history)",
                thousands(self.pending),
                thousands(done)
            ),
        }
    }
}

struct ScalingRow {
    durability: Durability,
    shape: Shape,
    ops: u64,
    rate: Stats,
    /// This rate over the small queue's.
    vs_small: f64,
}

fn measure_scaling(config: &Config, dir: &BenchDir) -> Result<Vec<ScalingRow>> {
    let shapes = [
        Shape {
            pending: config.small_queue,
            done: 0,
        },
        Shape {
            pending: config.large_table,
            done: 0,
        },
        Shape {
            pending: config.small_queue,
            done: config.large_table,
        },
    ];
    eprintln!("  building the tables for the scaling runs");
    let templates = shapes
        .iter()
        .map(|shape| build_template(dir, shape))
        .collect::<Result<Vec<_>>>()?;
    let (round, rounds) = (config.small_queue, config.scaling_rounds);
    let mut rows = Vec::new();
    for durability in DURABILITIES {
        let cases: Vec<Case<'_, Timing>> = shapes
            .iter()
            .zip(&templates)
            .map(|(&shape, template)| -> Case<'_, Timing> {
                (
                    shape.describe(),
                    Box::new(move || {
                        pull_from_copy(dir, template, shape, durability, round, rounds)
                    }),
                )
            })
            .collect();
        let title = format!("{} pull+finish as the table grows", label(durability));
        let rates: Vec<Stats> = interleave(&title, config.runs, cases)?
            .into_iter()
            .map(Stats::of)
            .collect();
        let small = rates[0].median;
        rows.extend(shapes.iter().zip(rates).map(|(&shape, rate)| ScalingRow {
            durability,
            shape,
            ops: round * rounds,
            vs_small: rate.median / small,
            rate,
        }));
    }
    Ok(rows)
}

/// A tq file holding `shape`'s tasks, the WAL checkpointed into it, to be
/// copied for each run.
fn build_template(dir: &BenchDir, shape: &Shape) -> Result<DbFile> {
    let file = dir.fresh("template");
    drop(Queue::open(file.path(), &OpenOptions::new())?); // creates tq's schema
    let mut conn = Connection::open(file.path())?;
    insert_tasks(&mut conn, shape.pending, shape.done)?;
    let busy: i64 = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| row.get(0))?;
    check(busy == 0, "the checkpoint of a template could not complete")?;
    Ok(file)
}

/// Adds `done` tasks kept as history, then `pending` tasks, all due, into
/// tq's table with rusqlite in one transaction: pushing a million tasks one
/// by one would take minutes.
fn insert_tasks(conn: &mut Connection, pending: u64, done: u64) -> Result<()> {
    let tx = conn.transaction()?;
    let first_time = now_ms() - (done + pending) as i64;
    {
        let mut done_row = tx.prepare(
            "INSERT INTO tq_tasks (state, payload, created_at, run_at, attempts, finished_at)
             VALUES (2, ?1, ?2, ?2, 1, ?2)",
        )?;
        let mut pending_row = tx.prepare(
            "INSERT INTO tq_tasks (state, payload, created_at, run_at) VALUES (0, ?1, ?2, ?2)",
        )?;
        // The history is older than the pending work, as in a queue that has run a while.
        for n in 0..done {
            done_row.execute(params![PAYLOAD, first_time + n as i64])?;
        }
        for n in done..done + pending {
            pending_row.execute(params![PAYLOAD, first_time + n as i64])?;
        }
    }
    tx.commit()?;
    Ok(())
}

/// Pulls and finishes `rounds` × `round` tasks from a fresh copy of
/// `template`. Between rounds, untimed, `round` pending tasks are added back,
/// so that a small queue is drained at each round but never runs dry.
fn pull_from_copy(
    dir: &BenchDir,
    template: &DbFile,
    shape: Shape,
    durability: Durability,
    round: u64,
    rounds: u64,
) -> Result<Timing> {
    let file = dir.copy_of(template)?;
    let history = shape.done > 0;
    let queue = Queue::open(
        file.path(),
        OpenOptions::new()
            .durability(durability)
            .keep_history(history),
    )?;
    let mut refill = Connection::open(file.path())?;
    check_queue(&queue, shape.pending, shape.done)?;
    let mut elapsed = Duration::ZERO;
    for number in 0..rounds {
        if number > 0 {
            insert_tasks(&mut refill, round, 0)?;
        }
        elapsed += tq_pull_finish(&queue, round)?.elapsed;
    }
    let ops = round * rounds;
    check_queue(
        &queue,
        shape.pending - round,
        if history { shape.done + ops } else { 0 },
    )?;
    Ok(Timing { ops, elapsed })
}

impl ScalingRow {
    fn to_json(&self) -> Value {
        json!({
            "durability": label(self.durability),
            "table": self.shape.describe(),
            "pending": self.shape.pending,
            "done": self.shape.done,
            "ops_per_run": self.ops,
            "tq": self.rate.to_json(),
            "over_small_queue": self.vs_small,
        })
    }
}

// ---------------------------------------------------------------------------
// The control features' quality bars (`control.rs`)

/// What one control figure measures.
#[derive(Clone, Copy)]
enum ControlFeature {
    /// A queue limited to `control::LIMIT` tasks leased at once, against none.
    Limit,
    /// Tasks in this many ordered groups of `size` delivering one at a
    /// time, against no group.
    Groups { groups: u64, size: u64 },
}

struct ControlRow {
    feature: ControlFeature,
    durability: Durability,
    pair: control::Pair,
}

/// The limit at both durabilities, then the groups at `normal` (at `full`
/// the flush of each commit would hide what a claim costs), from one thread
/// and from four.
fn measure_control(config: &Config, dir: &BenchDir) -> Result<Vec<ControlRow>> {
    let open = |durability: Durability| {
        move || -> Result<control::Fresh<DbFile>> {
            let file = dir.fresh("control");
            let queue = Queue::open(file.path(), OpenOptions::new().durability(durability))?;
            Ok((queue, file))
        }
    };
    let mut rows = Vec::new();
    for durability in DURABILITIES {
        let title = format!("{} concurrency limit", label(durability));
        let backlog = config.limit_backlog(durability);
        rows.push(ControlRow {
            feature: ControlFeature::Limit,
            durability,
            pair: control::measure_limit(&title, config.runs, backlog, open(durability))?,
        });
    }
    let durability = Durability::Normal;
    for threads in control::GROUP_THREADS {
        let title = format!("{} groups, threads: {threads}", label(durability));
        let pair = control::measure_groups(
            &title,
            config.runs,
            config.groups,
            config.group_size,
            threads,
            open(durability),
        )?;
        rows.push(ControlRow {
            feature: ControlFeature::Groups {
                groups: config.groups,
                size: config.group_size,
            },
            durability,
            pair,
        });
    }
    Ok(rows)
}

impl ControlRow {
    /// The figure held against the bar, and whether it meets it.
    fn ratio(&self) -> (f64, bool) {
        match self.feature {
            ControlFeature::Limit => {
                let ratio = self.pair.throughput_ratio();
                (ratio, ratio >= control::LIMIT_TARGET)
            }
            ControlFeature::Groups { .. } => {
                let ratio = self.pair.claim_cost_ratio();
                (ratio, ratio <= control::GROUP_TARGET)
            }
        }
    }

    fn to_json(&self) -> Value {
        let pair = &self.pair;
        let mut row = json!({
            "tasks_per_run": pair.tasks,
            "threads": pair.threads,
            "with": Stats::of_rates(pair.with.clone()).to_json(),
            "without": Stats::of_rates(pair.without.clone()).to_json(),
            "throughput_ratio": pair.throughput_ratio(),
            "cost_ratio": pair.cost_ratio(),
        });
        row["feature"] = match self.feature {
            ControlFeature::Limit => json!("concurrency limit"),
            ControlFeature::Groups { .. } => json!("groups"),
        };
        row["durability"] = json!(label(self.durability));
        if let ControlFeature::Groups { groups, size } = self.feature {
            row["groups"] = json!(groups);
            row["group_size"] = json!(size);
            row["claim_cost_ratio"] = json!(pair.claim_cost_ratio());
        }
        row["meets_bar"] = json!(self.ratio().1);
        row
    }
}

fn print_control(rows: &[ControlRow]) {
    println!(
        "\nControl features: pull+finish one task per call, threads sharing a handle; tasks/s, \
         the runs with and without the feature interleaved"
    );
    let widths = [44, 11, 8, 9, 27, 27, 0];
    print_line(
        &widths,
        &[
            "case (with / without)",
            "durability",
            "threads",
            "tasks",
            "with",
            "without",
            "ratio (bar)",
        ],
    );
    for row in rows {
        let (case, bar) = match row.feature {
            ControlFeature::Limit => (
                format!("limit of {} / no limit", control::LIMIT),
                format!("with/without >= {:.2}", control::LIMIT_TARGET),
            ),
            ControlFeature::Groups { groups, size } => (
                format!(
                    "{} groups of {size}, 1 at once / no groups",
                    thousands(groups)
                ),
                format!(
                    "claim cost with/without <= {:.2}; pull+finish {:.2}",
                    control::GROUP_TARGET,
                    row.pair.cost_ratio()
                ),
            ),
        };
        let (ratio, met) = row.ratio();
        print_line(
            &widths,
            &[
                &case,
                label(row.durability),
                &row.pair.threads.to_string(),
                &thousands(row.pair.tasks),
                &show_stats(&Stats::of_rates(row.pair.with.clone())),
                &show_stats(&Stats::of_rates(row.pair.without.clone())),
                &format!("{ratio:.2} ({bar}){}", if met { "" } else { " (!)" }),
            ],
        );
    }
    println!("(!) the bar is missed");
}

// ---------------------------------------------------------------------------
// Output

struct Machine {
    cpus: usize,
    cpu_model: String,
    /// The filesystem holding the benchmark's files, and its device.
    filesystem: String,
}

impl Machine {
    fn describe(dir: &Path) -> Machine {
        let cpu_model = fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                let line = info.lines().find(|line| line.starts_with("model name"))?;
                Some(line.split_once(':')?.1.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".into());
        Machine {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model,
            filesystem: filesystem_of(dir).unwrap_or_else(|| "unknown".into()),
        }
    }

    fn to_json(&self) -> Value {
        json!({ "nproc": self.cpus, "cpu_model": self.cpu_model, "filesystem": self.filesystem })
    }
}

/// "ext4 (/dev/vda)": the type and source of the innermost mount holding
/// `dir`, from /proc/self/mountinfo (whose fields are space-separated: the
/// mount point is the fifth; type and source follow the " - " separator).
fn filesystem_of(dir: &Path) -> Option<String> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo
        .lines()
        .filter_map(|line| {
            let (mount, filesystem) = line.split_once(" - ")?;
            let mount_point = mount.split(' ').nth(4)?;
            let mut filesystem = filesystem.split(' ');
            Some((mount_point, filesystem.next()?, filesystem.next()?))
        })
        .filter(|(mount_point, ..)| dir.starts_with(mount_point))
        // The last of equally long mount points is the one on top.
        .max_by_key(|(mount_point, ..)| mount_point.len())
        .map(|(_, kind, source)| format!("{kind} ({source})"))
}

fn print_header(config: &Config, machine: &Machine, prototype: &Prototype, dir: &BenchDir) {
    println!(
        "tq throughput benchmark{}",
        if config.quick {
            " (quick mode: tiny counts, figures not meaningful)"
        } else {
            ""
        }
    );
    println!(
        "machine:   {} CPUs (nproc), {}",
        machine.cpus, machine.cpu_model
    );
    println!(
        "files:     {} on {}",
        dir.path().display(),
        machine.filesystem
    );
    println!(
        "SQLite:    {} (tq and bare, bundled with rusqlite)",
        rusqlite::version()
    );
    match prototype {
        Prototype::Available(description) => println!(
            "prototype: {}, Python {} with sqlite3 {}, synchronous={} ({}), WAL: compare it with the full rows only",
            description["prototype"].as_str().unwrap_or("?"),
            description["python"].as_str().unwrap_or("?"),
            description["sqlite"].as_str().unwrap_or("?"),
            description["synchronous"],
            if description["synchronous"] == 2 { "FULL" } else { "NOT FULL: its comparison is skewed" },
        ),
        Prototype::Skipped(reason) => println!("prototype: skipped: {reason}"),
    }
    println!(
        "runs:      {} per figure, interleaved; median [min-max] ops/s; one thread, one operation per transaction",
        config.runs
    );
}

fn print_comparisons(config: &Config, comparisons: &[Comparison], prototype: &Prototype) {
    println!(
        "\nPush, and pull+finish of the tasks just pushed ({} ops per run at full, {} at normal)",
        thousands(config.ops_full),
        thousands(config.ops_normal)
    );
    let widths = [11, 13, 27, 27, 9, 27, 0];
    print_line(
        &widths,
        &[
            "durability",
            "operation",
            "bare SQLite",
            "tq",
            "tq/bare",
            "prototype",
            "tq/prototype",
        ],
    );
    for row in comparisons.iter().flat_map(Comparison::rows) {
        let prototype = match (row.prototype, row.durability) {
            (Some(prototype), _) => show_stats(prototype),
            (None, Durability::Full) => "skipped".to_owned(),
            (None, Durability::Normal) => "(runs at full only)".to_owned(),
        };
        let tq_over_prototype = row.tq_over_prototype();
        print_line(
            &widths,
            &[
                label(row.durability),
                row.operation,
                &show_stats(row.bare),
                &show_stats(row.tq),
                &show_ratio(row.tq_over_bare()),
                &prototype,
                &tq_over_prototype.map_or("-".to_owned(), |ratio| format!("{ratio:.2}")),
            ],
        );
    }
    if let Prototype::Skipped(reason) = prototype {
        println!("prototype skipped: {reason}");
    }
    println!("(!) below the {TARGET_RATIO:.2} target");
}

fn print_scaling(config: &Config, rows: &[ScalingRow]) {
    println!(
        "\nPull+finish as the table grows (tq; per run, {} rounds of {} pulls, and as many pending \
         tasks put back between rounds, untimed)",
        config.scaling_rounds,
        thousands(config.small_queue)
    );
    let widths = [11, 46, 27, 0];
    print_line(
        &widths,
        &[
            "durability",
            "table at the start",
            "tq",
            "vs the small queue",
        ],
    );
    for row in rows {
        print_line(
            &widths,
            &[
                label(row.durability),
                &row.shape.describe(),
                &show_stats(&row.rate),
                &show_ratio(row.vs_small),
            ],
        );
    }
    println!("(!) below the {TARGET_RATIO:.2} target");
}

/// Prints one line of a table, each cell left-aligned in a column this wide.
fn print_line(widths: &[usize], cells: &[&str]) {
    let line: String = cells
        .iter()
        .zip(widths)
        .map(|(cell, &width)| format!("{cell:<width$}"))
        .collect();
    println!("{}", line.trim_end());
}

/// "12,345 [11,900-12,600]": median [min-max] ops/s.
fn show_stats(stats: &Stats) -> String {
    let round = |rate: f64| thousands(rate.round() as u64);
    format!(
        "{} [{}-{}]",
        round(stats.median),
        round(stats.min),
        round(stats.max)
    )
}

fn show_ratio(ratio: f64) -> String {
    let flag = if ratio < TARGET_RATIO { " (!)" } else { "" };
    format!("{ratio:.2}{flag}")
}

/// 1234567 as "1,234,567".
fn thousands(number: u64) -> String {
    let digits = number.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}
