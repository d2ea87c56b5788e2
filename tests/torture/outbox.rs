//! Scenario 14: the application's own transactions, processes killed.
//! A producer process (one at a time) writes an order and pushes its task
//! in one transaction of its own SQLite connection (`tq_push`, through
//! `tq::outbox::install`, as tq's SQLite extension does); three worker
//! processes pull tasks through tq and, in one transaction of their own
//! connection, write the order's result row and finish the task
//! (`tq_finish`), a tenth of them after stalling past their lease. The
//! driver kills producers and workers with SIGKILL at random moments, in
//! or out of those transactions. Afterwards a last worker drains the
//! queue, and the file must show: every order with exactly one result
//! row and no task left, no result without its order, every order a
//! producer saw committed stored, and nothing else. It also runs on
//! PostgreSQL (`..._on_postgres`), through `push` and `finish` in tq's
//! schema.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant};

use tq::rusqlite::Connection;
use tq::{OpenOptions, PullOptions, Queue};

use super::common::postgres_client;
use super::db::Target;
use super::harness::{arg, arg_opt, now_ns, sleep_ms, spawn, Dir, Proc, Rng, Settings};

/// A worker's lease: short, so that a killed worker's task comes back soon.
const LEASE: Duration = Duration::from_millis(300);

#[test]
#[ignore = "torture test: make test-torture"]
fn orders_and_results_commit_with_their_tasks_exactly_once_with_processes_killed() {
    let dir = Dir::new();
    outbox(&dir, &Target::File(dir.file("app.db")), "outbox");
}

#[test]
#[ignore = "torture test: make test-torture"]
fn orders_and_results_commit_with_their_tasks_exactly_once_with_processes_killed_on_postgres() {
    if let Some(target) = Target::postgres(
        "orders_and_results_commit_with_their_tasks_exactly_once_with_processes_killed_on_postgres",
        "torture_outbox",
    ) {
        outbox(&Dir::new(), &target, "outbox-postgres");
    }
}

fn outbox(dir: &Dir, target: &Target, scenario: &str) {
    let settings = Settings::new(scenario);
    let mut rng = settings.rng();
    let acks = dir.sub("acks");
    drop(Queue::open(target.db(), &target.options(&OpenOptions::new())).unwrap());
    App::open(target).create_tables();
    let phase = settings.duration(Duration::from_secs(10));
    let deadline = now_ns() + phase.as_nanos() as i64 + 60_000_000_000;

    let mut slots: Vec<Option<(Proc, Instant)>> = (0..4).map(|_| None).collect();
    let (mut started, mut killed) = (0, 0);
    let begin = Instant::now();
    while begin.elapsed() < phase {
        for (index, slot) in slots.iter_mut().enumerate() {
            if let Some((proc, _)) = slot {
                if let Some(code) = proc.try_wait() {
                    panic!("a child exited by itself with {code:?}");
                }
            }
            if slot
                .as_ref()
                .is_some_and(|(_, kill_at)| Instant::now() >= *kill_at)
            {
                let (mut proc, _) = slot.take().unwrap();
                proc.kill();
                killed += 1;
            }
            if slot.is_none() {
                let label = format!("c{started}");
                started += 1;
                let mut args = target.child_args(&acks, &label, rng.next(), deadline);
                args.push(("acks", acks.join(&label).to_str().unwrap().to_owned()));
                let (role, longest) = if index == 0 {
                    ("app-producer", 400)
                } else {
                    // Long enough, at times, to stall past a lease.
                    ("app-worker", 1500)
                };
                let life = Duration::from_millis(rng.range(5, longest));
                *slot = Some((spawn(role, &args), Instant::now() + life));
            }
        }
        sleep_ms(1);
    }
    for (mut proc, _) in slots.into_iter().flatten() {
        proc.kill();
    }

    // The last worker, not killed: drains what is left, leases that ran
    // out included.
    let queue = Queue::open(target.db(), &target.options(&OpenOptions::new())).unwrap();
    let mut app = App::open(target);
    let mut pull = PullOptions::new();
    pull.wait(LEASE * 3).unwrap().lease(LEASE).unwrap();
    while let Some(task) = queue.pull(&pull).unwrap() {
        app.complete(&task).unwrap();
    }

    let orders = app.keys("orders");
    let results = app.keys("results");
    let mut acknowledged = BTreeSet::new();
    for entry in std::fs::read_dir(&acks).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        // A line is whole once its newline is written.
        acknowledged.extend(
            text.lines()
                .filter(|line| !line.is_empty())
                .map(str::to_owned),
        );
    }
    println!(
        "[{scenario}] {started} processes, {killed} killed; {} orders committed ({} seen \
         committed by their producer), {} results",
        orders.len(),
        acknowledged.len(),
        results.len()
    );
    app.check_integrity();
    assert_eq!(app.tasks_left(), 0, "tasks left after the drain");
    let stored: BTreeSet<String> = orders.iter().cloned().collect();
    assert_eq!(stored.len(), orders.len(), "an order stored twice");
    let mut seen = BTreeSet::new();
    let twice: Vec<&String> = results.iter().filter(|key| !seen.insert(*key)).collect();
    assert!(
        twice.is_empty(),
        "orders with more than one result: {twice:?}"
    );
    let with_result: BTreeSet<String> = seen.into_iter().cloned().collect();
    let without: Vec<&String> = stored.difference(&with_result).collect();
    assert!(without.is_empty(), "orders without a result: {without:?}");
    assert_eq!(results.len(), orders.len(), "results without an order");
    let lost: Vec<&String> = acknowledged.difference(&stored).collect();
    assert!(
        lost.is_empty(),
        "orders seen committed but not stored: {lost:?}"
    );
    assert!(
        acknowledged.len() > 50,
        "too few orders committed to prove anything"
    );
}

/// The application's own connection, beside tq: a SQLite connection on
/// the file with tq's SQL functions, or a PostgreSQL session and tq's
/// schema.
enum App {
    Sqlite(Connection),
    Postgres(postgres::Client, String),
}

impl App {
    fn open(target: &Target) -> App {
        match target {
            Target::File(path) => {
                let app = Connection::open(path).unwrap();
                app.busy_timeout(Duration::from_secs(30)).unwrap();
                tq::outbox::install(&app).unwrap();
                App::Sqlite(app)
            }
            Target::Postgres { url, schema } => {
                App::Postgres(postgres_client(url), format!("\"{schema}\""))
            }
        }
    }

    /// The open of a child, from its arguments.
    fn of_child() -> App {
        let db: String = arg("db");
        match arg_opt::<String>("schema") {
            Some(schema) => App::open(&Target::Postgres { url: db, schema }),
            None => App::open(&Target::File(db)),
        }
    }

    fn create_tables(&mut self) {
        let sql = |schema: &str| {
            format!(
                "CREATE TABLE {schema}orders (key TEXT NOT NULL);
                 CREATE TABLE {schema}results (key TEXT NOT NULL);"
            )
        };
        match self {
            App::Sqlite(app) => app.execute_batch(&sql("")).unwrap(),
            App::Postgres(client, schema) => {
                client.batch_execute(&sql(&format!("{schema}."))).unwrap()
            }
        }
    }

    /// Stores the order `key` and pushes its task, in one transaction.
    fn commit_order(&mut self, key: &str) {
        let payload = serde_json::json!({ "order": key }).to_string();
        match self {
            App::Sqlite(app) => {
                app.execute_batch("BEGIN IMMEDIATE").unwrap();
                app.execute("INSERT INTO orders (key) VALUES (?1)", [key])
                    .unwrap();
                app.query_row("SELECT tq_push('default', ?1)", [&payload], |row| {
                    row.get::<_, i64>(0)
                })
                .unwrap();
                app.execute_batch("COMMIT").unwrap();
            }
            App::Postgres(client, schema) => {
                let mut tx = client.transaction().unwrap();
                tx.execute(
                    &format!("INSERT INTO {schema}.orders (key) VALUES ($1)"),
                    &[&key],
                )
                .unwrap();
                tx.query_one(&format!("SELECT {schema}.push('default', $1)"), &[&payload])
                    .unwrap();
                tx.commit().unwrap();
            }
        }
    }

    /// Writes the result of `task`'s order and finishes the task, in one
    /// transaction; nothing when the finish is refused (another worker
    /// took the task once its lease ran out: the result is that worker's).
    fn complete(&mut self, task: &tq::Task) -> Result<(), String> {
        let key = serde_json::from_str::<serde_json::Value>(task.payload()).unwrap()["order"]
            .as_str()
            .unwrap()
            .to_owned();
        let (id, token) = (task.id(), task.receipt().token());
        match self {
            App::Sqlite(app) => {
                app.execute_batch("BEGIN IMMEDIATE").unwrap();
                let done = app
                    .execute("INSERT INTO results (key) VALUES (?1)", [&key])
                    .and_then(|_| {
                        app.query_row("SELECT tq_finish(?1, ?2)", [id, token], |row| {
                            row.get::<_, i64>(0)
                        })
                    });
                match done {
                    Ok(_) => app.execute_batch("COMMIT").map_err(|err| err.to_string()),
                    Err(err) => {
                        app.execute_batch("ROLLBACK").unwrap();
                        Err(err.to_string())
                    }
                }
            }
            App::Postgres(client, schema) => {
                let mut tx = client.transaction().unwrap();
                tx.execute(
                    &format!("INSERT INTO {schema}.results (key) VALUES ($1)"),
                    &[&key],
                )
                .unwrap();
                // Dropped without a commit on an error: rolled back.
                tx.query_one(&format!("SELECT {schema}.finish($1, $2)"), &[&id, &token])
                    .map_err(|err| err.to_string())?;
                tx.commit().map_err(|err| err.to_string())
            }
        }
    }

    /// The keys of `table`, in order.
    fn keys(&mut self, table: &str) -> Vec<String> {
        match self {
            App::Sqlite(app) => {
                let mut statement = app
                    .prepare(&format!("SELECT key FROM {table} ORDER BY key"))
                    .unwrap();
                let rows = statement.query_map([], |row| row.get(0)).unwrap();
                rows.map(Result::unwrap).collect()
            }
            App::Postgres(client, schema) => client
                .query(
                    &format!("SELECT key FROM {schema}.{table} ORDER BY key"),
                    &[],
                )
                .unwrap()
                .iter()
                .map(|row| row.get(0))
                .collect(),
        }
    }

    fn tasks_left(&mut self) -> i64 {
        match self {
            App::Sqlite(app) => app
                .query_row("SELECT count(*) FROM tq_tasks", [], |row| row.get(0))
                .unwrap(),
            App::Postgres(client, schema) => client
                .query_one(&format!("SELECT count(*) FROM {schema}.tasks"), &[])
                .unwrap()
                .get(0),
        }
    }

    /// SQLite's own check of the file (PostgreSQL's tables need none).
    fn check_integrity(&mut self) {
        if let App::Sqlite(app) = self {
            let integrity: String = app
                .query_row("PRAGMA integrity_check", [], |row| row.get(0))
                .unwrap();
            assert_eq!(integrity, "ok");
        }
    }
}

/// Child role: commits orders with their tasks, one transaction each, and
/// appends each order's key to its file of acknowledgements once its
/// commit returned, until killed or past its deadline.
pub fn producer() {
    let mut app = App::of_child();
    let label: String = arg("label");
    let mut acks = std::fs::File::create(arg::<String>("acks")).unwrap();
    for n in 0.. {
        if now_ns() > arg::<i64>("deadline") {
            break;
        }
        let key = format!("{label}-{n}");
        app.commit_order(&key);
        writeln!(acks, "{key}").unwrap();
    }
}

/// Child role: pulls tasks through tq and completes each in the
/// application's transaction, until killed or past its deadline. One
/// delivery in ten stalls past its lease first, so that another worker may
/// take the task meanwhile: then this one's finish must be refused, and
/// its result rolled back with it.
pub fn worker() {
    let mut rng = Rng::new(arg("seed"));
    let db: String = arg("db");
    let mut options = OpenOptions::new();
    if let Some(schema) = arg_opt::<String>("schema") {
        options.postgres_schema(&schema).unwrap();
    }
    let queue = Queue::open(&db, &options).unwrap();
    let mut app = App::of_child();
    let mut pull = PullOptions::new();
    pull.wait(Duration::from_millis(200))
        .unwrap()
        .lease(LEASE)
        .unwrap();
    while now_ns() < arg::<i64>("deadline") {
        if let Some(task) = queue.pull(&pull).unwrap() {
            if rng.chance(0.1) {
                sleep_ms(rng.range(LEASE.as_millis() as u64, 2 * LEASE.as_millis() as u64));
            }
            // Refused when another worker took the task meanwhile: rolled
            // back.
            let _ = app.complete(&task);
        }
    }
}
