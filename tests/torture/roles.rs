//! What a child process does: the roles the scenarios start. Every child
//! reads its arguments with [`arg`], appends to its own history, and exits
//! by itself at its deadline, so none outlives its test.
//!
//! Common arguments: `db` (the queue file, or a PostgreSQL URL with
//! `schema` naming the schema), `dir` (the history directory),
//! `label` (this incarnation's unique name), `seed`, `deadline` (Unix ns),
//! and optionally `stop_file`: a path whose creation stops the child as
//! its deadline would (for a scenario that decides when to stop as it
//! goes).

use std::sync::Arc;
use std::time::{Duration, Instant};

use tq::{Durability, OpenOptions, Queue, Task, TaskState};

use super::client::{self, key_of, Client, Limit, Limits};
use super::db::Target;
use super::harness::{arg, arg_opt, now_ns, sleep_ms, Rng};
use super::history::History;
use super::vfs::{self, Loss, Plan};

/// Runs `role` and exits the process.
pub fn run(role: &str) -> ! {
    if let Some(crash) = arg_opt::<String>("crash") {
        // "AT:before" or "AT:after": SIGKILL at that write or sync.
        let (at, when) = crash.split_once(':').expect("crash is AT:WHEN");
        vfs::install(
            Plan::Crash {
                at: at.parse().expect("a crash point"),
                after: when == "after",
            },
            0,
        );
    }
    match role {
        "producer" => producer(),
        "worker" => worker(),
        "clock-worker" => clock_worker(),
        "opener" => opener(),
        "reader" => reader(),
        "snapshot" => snapshot(),
        "power" => power(),
        "schedule-driver" => schedule_driver(),
        "app-producer" => super::outbox::producer(),
        "app-worker" => super::outbox::worker(),
        other => panic!("unknown child role {other}"),
    }
    // Each role has closed its queue on returning; exiting here skips the
    // test harness's own report.
    std::process::exit(0);
}

fn history() -> History {
    let dir: String = arg("dir");
    History::create(std::path::Path::new(&dir), &arg::<String>("label"))
}

/// The handle's options from the arguments: `durability`, `keep_history`,
/// `busy_timeout` (ms), `max_attempts`, `backoff` (`MIN:MAX` ms),
/// `schema` (on PostgreSQL), and the queue `queue` (the default queue when
/// none).
fn options(queue: Option<&str>) -> OpenOptions {
    let mut options = OpenOptions::new();
    if let Some(schema) = arg_opt::<String>("schema") {
        options
            .postgres_schema(&schema)
            .expect("a valid schema name");
    }
    match arg_opt::<String>("durability").as_deref() {
        Some("normal") => options.durability(Durability::Normal),
        _ => options.durability(Durability::Full),
    };
    options.keep_history(arg_opt::<u8>("keep_history") == Some(1));
    if let Some(ms) = arg_opt::<u64>("busy_timeout") {
        options
            .busy_timeout(Duration::from_millis(ms))
            .expect("a valid busy timeout");
    }
    if let Some(max) = arg_opt::<u32>("max_attempts") {
        options.max_attempts(max).expect("a valid maximum");
    }
    if let Some(backoff) = arg_opt::<String>("backoff") {
        let (min, max) = backoff.split_once(':').expect("backoff is MIN:MAX");
        let ms = |text: &str| Duration::from_millis(text.parse().expect("milliseconds"));
        options
            .retry_backoff(ms(min), ms(max))
            .expect("a valid back-off");
    }
    if let Some(name) = queue {
        options.queue(name).expect("a valid queue name");
    }
    options
}

fn past_deadline() -> bool {
    now_ns() > arg::<i64>("deadline")
        || arg_opt::<String>("stop_file").is_some_and(|path| std::path::Path::new(&path).exists())
}

/// Runs `body` in `threads` threads with a client each. Thread N works on
/// queue N modulo the comma-separated `queues` (the default queue when
/// none), through a handle of its own, or with `shared=1` through one
/// handle per queue shared by the threads of that queue. (Handles on one
/// file in one process share tq's connections and group commit either way.)
/// `extra` threads more are started likewise, numbered after the others.
fn threads(history: &History, extra: u32, body: impl Fn(&Client, Rng) + Sync) {
    let path: String = arg("db");
    let count: u32 = arg::<u32>("threads") + extra;
    let seed: u64 = arg("seed");
    let names: Vec<Option<String>> = match arg_opt::<String>("queues") {
        Some(list) => list.split(',').map(|name| Some(name.to_owned())).collect(),
        None => vec![None],
    };
    let slot = |thread: u32| thread as usize % names.len();
    let mut shared = Vec::new();
    if arg_opt::<u8>("shared") == Some(1) {
        for name in &names {
            match client::open(history, 0, &path, &options(name.as_deref())) {
                Ok(queue) => shared.push(Arc::new(queue)),
                Err(_) => return,
            }
        }
    }
    std::thread::scope(|scope| {
        for thread in 0..count {
            let (shared, body, path, name) = (&shared, &body, &path, &names[slot(thread)]);
            scope.spawn(move || {
                let queue = match shared.get(slot(thread)) {
                    Some(queue) => Arc::clone(queue),
                    None => match client::open(history, thread, path, &options(name.as_deref())) {
                        Ok(queue) => Arc::new(queue),
                        Err(_) => return,
                    },
                };
                let client = Client {
                    queue: &queue,
                    history,
                    thread,
                };
                body(&client, Rng::new(seed ^ (u64::from(thread) << 32)));
            });
        }
    });
}

/// Pushes unique keys (`LABEL-THREAD-N`) until killed, the deadline, or
/// `count` pushes per thread. `pad` bytes of padding per payload; `pause`
/// ms between two pushes of a thread (none by default). With `limits=1`,
/// payloads are not padded and each push is given a random expiry,
/// deadline, both or neither (see [`random_limits`]), and waits up to a
/// random part of `wait_room` ms (none by default) for room under the
/// queue's cap.
fn producer() {
    let history = history();
    let pad: usize = arg("pad");
    let count: u64 = arg_opt("count").unwrap_or(u64::MAX);
    let pause: u64 = arg_opt("pause").unwrap_or(0);
    let limited = arg_opt::<u8>("limits") == Some(1);
    let wait_room: u64 = arg_opt("wait_room").unwrap_or(0);
    threads(&history, 0, |client, mut rng| {
        for n in 0..count {
            if past_deadline() {
                break;
            }
            let key = format!("{}-{}-{n}", client.history.process(), client.thread);
            let pushed = if limited {
                let wait = Duration::from_millis(rng.range(0, wait_room));
                client.push_limited(&key, &random_limits(&mut rng), wait)
            } else {
                client.push(&key, pad)
            };
            if pushed.is_err() {
                sleep_ms(1);
            }
            if pause > 0 {
                sleep_ms(pause);
            }
        }
    });
}

/// An expiry, a deadline, both or neither, each after the push or at a
/// time (up to 50 ms past already, which the first claim ends), within
/// 400 ms of the push: short enough that many pass before the task's
/// turn, or between its attempts.
fn random_limits(rng: &mut Rng) -> Limits {
    let limit = |rng: &mut Rng| {
        let ms = rng.range(0, 400) as i64;
        if rng.chance(0.5) {
            Limit::After(ms.max(1))
        } else {
            Limit::At(now_ns() / 1_000_000 - 50 + ms)
        }
    };
    let roll = rng.range(0, 100);
    Limits {
        expiry: (roll < 50).then(|| limit(rng)),
        deadline: (25..75).contains(&roll).then(|| limit(rng)),
    }
}

/// Pulls under a random lease (`lease_min`..`lease_max` ms), works a random
/// while (`work_min`..`work_max` ms) and ends the delivery, until the
/// deadline. Percentages of deliveries: `heartbeat` work in steps and
/// extend the lease between them (some steps run past it); `fail` end in a
/// fail; `finish_pull` finish with `finish_and_pull`, working on the task
/// it returns next; the rest finish. A worker whose extend is refused
/// stops working and ends the delivery anyway (to be refused again).
/// Options: `recover=1` recovers once at start; `hold=N` makes each thread
/// keep N tasks without ending them; `idle_exit=MS` ends a thread after
/// that long without a task; `push_until=NS` makes a thread push a new
/// task after each finish that succeeds until then, which keeps the
/// backlog's size (of priority 0, or with `push_priority=rising` of a
/// priority that rises with the time of the push, so that each task
/// pushed so is claimed before every task pushed earlier). A task whose key starts with "poison" kills its worker
/// on every delivery. `overrun` is a percentage of deliveries whose
/// handler stalls past its lease (a pause, swap), then extends it and
/// works a little more before ending it. `rate=CLAIMS:PER_MS` makes the
/// first thread declare the queue's rate limit at start, as every worker
/// of a deployment does. `churn=N` adds N threads (see [`churn`]).
fn worker() {
    let history = history();
    let (lease_min, lease_max): (u64, u64) = (arg("lease_min"), arg("lease_max"));
    let (work_min, work_max): (u64, u64) = (arg("work_min"), arg("work_max"));
    let percent = |name: &str| arg_opt::<u64>(name).unwrap_or(0);
    let (heartbeat, fail, finish_pull) = (
        percent("heartbeat"),
        percent("fail"),
        percent("finish_pull"),
    );
    let hold: usize = arg_opt("hold").unwrap_or(0);
    let idle_exit: Option<u64> = arg_opt("idle_exit");
    let push_until: i64 = arg_opt("push_until").unwrap_or(0);
    let rising = arg_opt::<String>("push_priority").as_deref() == Some("rising");
    let deadline_ms = arg::<i64>("deadline") / 1_000_000;
    let recover = arg_opt::<u8>("recover") == Some(1);
    let overrun = percent("overrun");
    let rate: Option<tq::RateLimit> = arg_opt::<String>("rate").map(|text| {
        let (claims, per) = text.split_once(':').expect("rate is CLAIMS:PER_MS");
        tq::RateLimit {
            claims: claims.parse().expect("a number of claims"),
            per: Duration::from_millis(per.parse().expect("milliseconds")),
        }
    });
    let workers: u32 = arg("threads");
    threads(
        &history,
        arg_opt("churn").unwrap_or(0),
        |client, mut rng| {
            if client.thread >= workers {
                churn(client, client.thread - workers, &mut rng);
                return;
            }
            if let (Some(rate), 0) = (rate, client.thread) {
                let _ = client.set_rate_limit(rate);
            }
            if recover && client.thread == 0 {
                let _ = client.recover();
            }
            let mut held: Vec<Task> = Vec::new();
            let mut next: Option<(Task, u64)> = None;
            let mut idle_since: Option<Instant> = None;
            let mut pushed = 0;
            while !past_deadline() {
                if hold > 0 && held.len() >= hold {
                    sleep_ms(10);
                    continue;
                }
                let (task, lease) = match next.take() {
                    Some(delivered) => delivered,
                    None => {
                        let lease = rng.range(lease_min, lease_max);
                        match client.pull(lease) {
                            Ok(Some(task)) => (task, lease),
                            Ok(None) => {
                                let since = *idle_since.get_or_insert_with(Instant::now);
                                if idle_exit
                                    .is_some_and(|ms| since.elapsed() >= Duration::from_millis(ms))
                                {
                                    break;
                                }
                                sleep_ms(2);
                                continue;
                            }
                            Err(_) => {
                                sleep_ms(2);
                                continue;
                            }
                        }
                    }
                };
                idle_since = None;
                crash_on_poison(client, &task);
                if hold > 0 {
                    held.push(task);
                    continue;
                }
                let mut work = rng.range(work_min, work_max);
                if rng.range(1, 100) <= overrun {
                    // The lease runs out under the handler; then its heartbeat.
                    sleep_ms(lease + rng.range(5, 40));
                    if client.extend(&task, lease).is_ok() {
                        sleep_ms(rng.range(0, lease / 2));
                    }
                } else if rng.range(1, 100) <= heartbeat {
                    while work > 0 {
                        let step = work.min(rng.range(lease / 2, lease * 3 / 2).max(1));
                        sleep_ms(step);
                        work -= step;
                        if work > 0 && client.extend(&task, lease).is_err() {
                            break;
                        }
                    }
                } else {
                    sleep_ms(work);
                }
                let roll = rng.range(1, 100);
                let finished = if roll <= fail {
                    let _ = client.fail(&task, "torture: the work failed");
                    false
                } else if roll <= fail + finish_pull {
                    let lease = rng.range(lease_min, lease_max);
                    match client.finish_and_pull(&task, lease) {
                        Ok(delivered) => {
                            next = delivered.map(|task| (task, lease));
                            true
                        }
                        Err(_) => false,
                    }
                } else {
                    client.finish(&task).is_ok()
                };
                if finished && now_ns() < push_until {
                    let key = format!("{}-{}-{pushed}", client.history.process(), client.thread);
                    pushed += 1;
                    let mut options = tq::PushOptions::new();
                    if rising {
                        // Positive: the deadline is minutes away at most.
                        options
                            .priority((1_000_000_000 + now_ns() / 1_000_000 - deadline_ms) as i32);
                    }
                    let _ = client.push_options(&key, 0, &options, None);
                }
            }
        },
    );
}

/// Kills this process when `task` is a poison task (its key starts with
/// "poison"), as a task that crashes its worker would.
fn crash_on_poison(client: &Client, task: &Task) {
    if key_of(task.payload()).starts_with("poison") {
        // Logged as a kill, like the driver's: from now on this process is
        // dead, and recover may take back its tasks.
        client
            .history
            .info("kill", &format!("target={}", client.history.process()));
        // SAFETY: kills this process.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

/// A churn thread of a worker, until the deadline: churn thread 0, 2, ...
/// pushes a task of high priority, pulls (most often that task, the
/// newest on the file) and finishes what it got, so that the newest task
/// is deleted (without history) again and again; churn thread 1, 3, ...
/// pushes pairs of items with `push_items` whose second item waits for a
/// task that does not exist, which fails the call, the first item stored
/// and rolled back inside it. Several threads of one process share tq's
/// group commit: such a finish and such a failed call often commit
/// together. Keys are `LABEL-cN-M`. A poison task kills the process, as
/// in the other threads.
fn churn(client: &Client, index: u32, rng: &mut Rng) {
    let label = format!("{}-c{index}", client.history.process());
    let mut high = tq::PushOptions::new();
    high.priority(100);
    let mut orphan = tq::PushOptions::new();
    orphan.after(&[1_000_000_000_000_000]).expect("a valid id");
    let mut n = 0u64;
    while !past_deadline() {
        n += 1;
        if index.is_multiple_of(2) {
            if client
                .push_options(&format!("{label}-{n}"), 0, &high, None)
                .is_err()
            {
                sleep_ms(1);
                continue;
            }
            if let Ok(Some(task)) = client.pull(rng.range(200, 400)) {
                crash_on_poison(client, &task);
                let _ = client.finish(&task);
            }
        } else {
            let items = [
                (format!("{label}-{n}a"), tq::PushOptions::new()),
                (format!("{label}-{n}b"), orphan.clone()),
            ];
            let _ = client.push_items(&items);
            if rng.chance(0.5) {
                sleep_ms(1);
            }
        }
    }
}

/// One task under a clock that libfaketime may shift: logs the process's
/// view of the clock against the real one, then pulls (lease `lease` ms)
/// for up to `pull_for` ms until it gets a task. With `stop=1` it stops
/// itself (SIGSTOP) once it holds the task, and when resumed extends the
/// lease (a heartbeat) before it finishes.
fn clock_worker() {
    let history = history();
    let wall_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    history.info(
        "clock",
        &format!("wall_ms={wall_ms} real_ms={}", now_ns() / 1_000_000),
    );
    let Ok(queue) = client::open(&history, 0, &arg::<String>("db"), &options(None)) else {
        return;
    };
    let client = Client {
        queue: &queue,
        history: &history,
        thread: 0,
    };
    let started = Instant::now();
    let pull_for = Duration::from_millis(arg("pull_for"));
    while started.elapsed() < pull_for {
        if let Ok(Some(task)) = client.pull(arg("lease")) {
            if arg_opt::<u8>("stop") == Some(1) {
                // SAFETY: stops this process until the parent resumes it.
                unsafe { libc::raise(libc::SIGSTOP) };
                let _ = client.extend(&task, arg("lease"));
            }
            let _ = client.finish(&task);
            return;
        }
        sleep_ms(20);
    }
}

/// Waits until `start_at` (Unix ns), then opens the queue, pushes `key`
/// and closes, as many processes starting at once would.
fn opener() {
    let history = history();
    let start_at: i64 = arg("start_at");
    while now_ns() < start_at - 2_000_000 {
        sleep_ms(1);
    }
    while now_ns() < start_at {
        std::hint::spin_loop();
    }
    if let Ok(queue) = client::open(&history, 0, &arg::<String>("db"), &options(None)) {
        let client = Client {
            queue: &queue,
            history: &history,
            thread: 0,
        };
        let _ = client.push(&arg::<String>("key"), 0);
    }
}

/// Monitors the queue: counts pending, held and dead tasks in a loop, each
/// count a read of its own, pausing `pause` ms (default 0) after each
/// round, until killed or the deadline. Failures are logged; answers are
/// not.
fn reader() {
    let history = history();
    let pause: u64 = arg_opt("pause").unwrap_or(0);
    let Ok(queue) = client::open(&history, 0, &arg::<String>("db"), &options(None)) else {
        return;
    };
    while !past_deadline() {
        for state in [TaskState::Pending, TaskState::Leased, TaskState::Dead] {
            let call = history.invoke(0, "count", "");
            match queue.count(state) {
                Ok(_) => history.ok(call, ""),
                Err(err) => history.fail(call, &err),
            }
        }
        sleep_ms(pause);
    }
}

/// Another program reading the file (say, the sqlite3 shell left inside
/// a transaction): holds one read snapshot open until killed or the
/// deadline, which keeps every checkpoint from resetting the WAL.
fn snapshot() {
    let history = history();
    let conn = rusqlite::Connection::open(arg::<String>("db")).expect("open");
    conn.execute_batch("BEGIN").expect("begin");
    let tasks: i64 = conn
        .query_row("SELECT count(*) FROM tq_tasks", [], |row| row.get(0))
        .expect("read");
    history.info("snapshot", &format!("tasks={tasks}"));
    while !past_deadline() {
        sleep_ms(10);
    }
}

/// A power-loss run: one thread makes `ops` random calls (push with 1 to 3
/// attempts, pull, finish, fail, extend, checkpoint; with `recover=1`, a
/// recover first) through the power-loss VFS, then closes the queue (a
/// checkpoint). `power` is `AT:LOSS:LIE_FROM`:
/// the sync where power fails ("never" to count syncs only), what becomes
/// of unsynced writes, and the sync from which the disk lies ("never").
/// Logs the number of syncs made when it ends without losing power.
fn power() {
    let power: String = arg("power");
    let parts: Vec<&str> = power.split(':').collect();
    let number = |text: &str| (text != "never").then(|| text.parse().expect("a sync number"));
    vfs::install(
        Plan::PowerLoss {
            at: number(parts[0]),
            loss: parts[1].parse::<Loss>().expect("a loss"),
            lie_from: number(parts[2]),
        },
        arg("seed"),
    );
    let history = history();
    let mut rng = Rng::new(arg("seed"));
    let pad_max: u64 = arg("pad_max");
    let Ok(queue) = client::open(&history, 0, &arg::<String>("db"), &options(None)) else {
        return;
    };
    let client = Client {
        queue: &queue,
        history: &history,
        thread: 0,
    };
    if arg_opt::<u8>("recover") == Some(1) {
        let _ = client.recover();
    }
    const HOUR_MS: u64 = 3_600_000;
    let mut held: Vec<Task> = Vec::new();
    for n in 0..arg::<u32>("ops") {
        let roll = rng.range(0, 99);
        let pick = |rng: &mut Rng, held: &Vec<Task>| rng.range(0, held.len() as u64 - 1) as usize;
        if roll < 12 && !held.is_empty() {
            let task = held.swap_remove(pick(&mut rng, &held));
            let _ = client.finish(&task);
        } else if roll < 18 && !held.is_empty() {
            let task = held.swap_remove(pick(&mut rng, &held));
            let _ = client.fail(&task, "power: failed");
        } else if roll < 23 && !held.is_empty() {
            let _ = client.extend(&held[pick(&mut rng, &held)], HOUR_MS);
        } else if (23..28).contains(&roll) {
            let _ = client.checkpoint();
        } else if roll < 50 {
            if let Ok(Some(task)) = client.pull(HOUR_MS) {
                match rng.range(0, 9) {
                    0..=5 => drop(client.finish(&task)),
                    6 => drop(client.fail(&task, "power: failed")),
                    _ => held.push(task),
                }
            }
        } else {
            let key = format!("{}-{n}", history.process());
            let max_attempts = rng.range(1, 3) as u32;
            let _ = client.push_with(&key, rng.range(0, pad_max) as usize, Some(max_attempts));
        }
    }
    let call = history.invoke(0, "close", "");
    drop(queue);
    history.ok(call, "");
    history.info("syncs", &format!("n={}", vfs::syncs()));
}

/// Opens `target` as the parent does after a scenario, and proves the
/// queue usable: a push, then a pull that gets it (due at the epoch, it
/// comes before every other task), and a finish.
pub fn reopen_and_use(target: &Target) -> Result<(), String> {
    let queue = Queue::open(target.db(), &target.options(&OpenOptions::new()))
        .map_err(|e| format!("open: {e}"))?;
    let mut first = tq::PushOptions::new();
    first.run_at_unix_ms(0).expect("a valid time");
    let id = queue
        .push("{\"key\":\"after\"}", &first)
        .map_err(|e| format!("push: {e}"))?
        .id();
    let task = queue
        .pull(&tq::PullOptions::new())
        .map_err(|e| format!("pull: {e}"))?
        .ok_or("the task pushed after reopening was not delivered")?;
    if task.id() != id {
        return Err(format!(
            "pulled task {} instead of {id}, which is due first",
            task.id()
        ));
    }
    queue
        .finish(task.receipt())
        .map_err(|e| format!("finish: {e}"))
}

/// Drives the queue's schedules until the deadline: pulls of random waits
/// (which drive due schedules) finishing what they take, and explicit
/// `run_due_schedules` calls. Errors (a busy file) are passed over: the
/// scenario checks the slots enqueued, not each call.
fn schedule_driver() {
    let queue = Queue::open(&arg::<String>("db"), &options(None)).expect("open");
    let mut rng = Rng::new(arg("seed"));
    while !past_deadline() {
        if rng.chance(0.25) {
            let _ = queue.run_due_schedules();
            sleep_ms(rng.range(0, 40));
            continue;
        }
        let mut pull = tq::PullOptions::new();
        pull.wait(Duration::from_millis(rng.range(0, 300)))
            .expect("a valid wait");
        match queue.pull(&pull) {
            Ok(Some(task)) => {
                let _ = queue.finish(task.receipt());
            }
            Ok(None) => {}
            Err(_) => sleep_ms(5),
        }
    }
}
