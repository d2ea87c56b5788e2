//! The quality bars of the control features, on either backend (shared by
//! the throughput benchmark's part `control` on SQLite and by
//! `postgres.rs`):
//!
//! - a concurrency limit: a backlog drained by four threads sharing one
//!   handle, from a queue limited to 40 tasks leased at once and from the
//!   same queue with no limit. Four workers never reach the limit, so the
//!   difference is what checking it costs every claim; the bar is a
//!   throughput of at least 0.9 of the unlimited queue's.
//! - ordered groups: the same tasks pushed in groups delivering one task at
//!   a time (`PushOptions::group(key, 1)`) and in no group, then drained
//!   from one thread and from four, in rounds of as many tasks as there are
//!   groups: the threads claim a round's tasks (each group's next one),
//!   then finish them. The bar is a claim (the claiming phases' time per
//!   task) costing at most 1.5 times one without groups. Timing the claims
//!   apart matters with threads sharing a handle: a pull's commit would
//!   otherwise carry the other threads' finishes, and a grouped finish
//!   also hands its group on to the next task; the pull+finish's cost (the
//!   whole drain's) is shown beside it.
//!
//! Each figure pairs the runs of the two cases, interleaved (with, without,
//! with, without, ...), each on a fresh store, the backlog pushed
//! beforehand in batches, untimed; the ratios are of the medians.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tq::{PullOptions, PushOptions, Queue, TaskState};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const PAYLOAD: &str = r#"{"kind":"email","to":"user@example.com","template":"welcome"}"#;

/// Worker threads of the limit's drain, sharing one handle.
pub const WORKERS: usize = 4;

/// The concurrency limit measured.
pub const LIMIT: u32 = 40;

/// The limited queue's throughput over the unlimited one's should reach this.
pub const LIMIT_TARGET: f64 = 0.9;

/// A grouped task's claim should cost at most this many times an
/// ungrouped one's.
pub const GROUP_TARGET: f64 = 1.5;

/// Thread counts of the group figures.
pub const GROUP_THREADS: [usize; 2] = [1, WORKERS];

/// Tasks per push while filling a backlog.
const FILL_BATCH: u64 = 1000;

/// How long a worker tries again while its pulls find nothing though tasks
/// are left (the next task of a group waits for one another thread holds)
/// before it takes tasks to have gone missing.
const STALL: Duration = Duration::from_secs(10);

/// A queue on a fresh, empty store of the backend measured, with what holds
/// that store (its file, or its schema), dropped after the queue once the
/// run is over.
pub type Fresh<G> = (Queue, G);

/// One figure: the rates, in tasks per second, of the runs with the
/// feature and of the runs without it, each in run order, and each run's
/// seconds of claiming per task.
pub struct Pair {
    pub tasks: u64,
    pub threads: usize,
    pub with: Vec<f64>,
    pub without: Vec<f64>,
    pub with_claim: Vec<f64>,
    pub without_claim: Vec<f64>,
}

impl Pair {
    pub fn with_median(&self) -> f64 {
        median(&self.with)
    }

    pub fn without_median(&self) -> f64 {
        median(&self.without)
    }

    /// The median rate with the feature over the median rate without: the
    /// concurrency limit's bar.
    pub fn throughput_ratio(&self) -> f64 {
        self.with_median() / self.without_median()
    }

    /// The median time per task with the feature over the median time per
    /// task without, pulls and finishes together.
    pub fn cost_ratio(&self) -> f64 {
        self.without_median() / self.with_median()
    }

    /// The median time spent claiming per task with the feature over the
    /// median without: the groups' bar (measured by drains in rounds only).
    pub fn claim_cost_ratio(&self) -> f64 {
        median(&self.with_claim) / median(&self.without_claim)
    }
}

/// What one drain measured.
struct Drained {
    /// Tasks per second, pulls and finishes together.
    rate: f64,
    /// Seconds of claiming per task, for a drain in rounds
    /// ([`drain_in_rounds`]); `None` for one whose pulls and finishes
    /// interleave ([`drain`]).
    claim: Option<f64>,
}

/// The median of `values` (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let middle = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[middle]
    } else {
        (sorted[middle - 1] + sorted[middle]) / 2.0
    }
}

/// The limit's figure: `runs` drains of `backlog` tasks by [`WORKERS`]
/// threads from a queue limited to [`LIMIT`], interleaved with as many from
/// a queue never limited; `open` makes each run's fresh store.
pub fn measure_limit<G>(
    title: &str,
    runs: usize,
    backlog: u64,
    open: impl Fn() -> Result<Fresh<G>>,
) -> Result<Pair> {
    let run = |limited: bool| -> Result<Drained> {
        let (queue, store) = open()?;
        if limited {
            queue.set_concurrency_limit(Some(LIMIT))?;
        }
        fill(&queue, backlog, None)?;
        let drained = drain(&queue, backlog, WORKERS)?;
        check_empty(&queue)?;
        drop(queue);
        drop(store);
        Ok(drained)
    };
    let (with, without) = interleave(title, runs, || run(true), || run(false))?;
    Ok(Pair::of(backlog, WORKERS, with, without))
}

/// The groups' figure at one thread count: `runs` drains of `groups` ×
/// `group_size` tasks pushed in groups of one at a time, the groups taking
/// turns (task n in group n mod `groups`), interleaved with as many drains
/// of the same tasks in no group; each drain in rounds of `groups` tasks.
pub fn measure_groups<G>(
    title: &str,
    runs: usize,
    groups: u64,
    group_size: u64,
    threads: usize,
    open: impl Fn() -> Result<Fresh<G>>,
) -> Result<Pair> {
    let tasks = groups * group_size;
    let run = |grouped: bool| -> Result<Drained> {
        let (queue, store) = open()?;
        fill(&queue, tasks, grouped.then_some(groups))?;
        if grouped {
            let last = queue.last_id()?;
            let waits = queue.task(last)?.map(|info| info.waiting_for().len());
            if group_size > 1 && waits != Some(1) {
                return Err("the last task pushed does not wait for its group".into());
            }
        }
        let drained = drain_in_rounds(&queue, tasks, groups, threads)?;
        check_empty(&queue)?;
        drop(queue);
        drop(store);
        Ok(drained)
    };
    let (with, without) = interleave(title, runs, || run(true), || run(false))?;
    Ok(Pair::of(tasks, threads, with, without))
}

impl Pair {
    fn of(tasks: u64, threads: usize, with: Vec<Drained>, without: Vec<Drained>) -> Pair {
        let rates = |runs: &[Drained]| runs.iter().map(|run| run.rate).collect();
        let claims = |runs: &[Drained]| runs.iter().filter_map(|run| run.claim).collect();
        Pair {
            tasks,
            threads,
            with: rates(&with),
            without: rates(&without),
            with_claim: claims(&with),
            without_claim: claims(&without),
        }
    }
}

/// Runs `with` and `without` in turn, `runs` times each, and returns
/// their results in run order.
fn interleave(
    title: &str,
    runs: usize,
    mut with: impl FnMut() -> Result<Drained>,
    mut without: impl FnMut() -> Result<Drained>,
) -> Result<(Vec<Drained>, Vec<Drained>)> {
    let (mut with_rates, mut without_rates) = (Vec::new(), Vec::new());
    for round in 1..=runs {
        eprintln!("  {title}: round {round} of {runs}");
        with_rates.push(with().map_err(|err| format!("{title}, with: {err}"))?);
        without_rates.push(without().map_err(|err| format!("{title}, without: {err}"))?);
    }
    Ok((with_rates, without_rates))
}

/// Pushes `tasks` tasks in batches: in no group, or in `groups` groups of
/// one at a time taking turns.
fn fill(queue: &Queue, tasks: u64, groups: Option<u64>) -> Result<()> {
    let mut pushed = 0;
    while pushed < tasks {
        let batch = FILL_BATCH.min(tasks - pushed);
        match groups {
            None => {
                queue.push_batch(&vec![PAYLOAD; batch as usize], &PushOptions::new())?;
            }
            Some(groups) => {
                let items = (pushed..pushed + batch)
                    .map(|n| {
                        let mut options = PushOptions::new();
                        options.group(&format!("group-{}", n % groups), 1)?;
                        Ok((PAYLOAD, options))
                    })
                    .collect::<Result<Vec<_>>>()?;
                queue.push_items(&items)?;
            }
        }
        pushed += batch;
    }
    Ok(())
}

/// Pulls and finishes `tasks` tasks one at a time from `threads` threads
/// sharing `queue`.
fn drain(queue: &Queue, tasks: u64, threads: usize) -> Result<Drained> {
    let left = AtomicU64::new(tasks);
    let started = Instant::now();
    thread::scope(|scope| -> Result<()> {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let left = &left;
                // Errors cross back to the measuring thread as text.
                scope.spawn(move || work(queue, left).map_err(|err| err.to_string()))
            })
            .collect();
        for worker in workers {
            worker.join().map_err(|_| "a thread panicked")??;
        }
        Ok(())
    })?;
    Ok(Drained {
        rate: tasks as f64 / started.elapsed().as_secs_f64(),
        claim: None,
    })
}

/// One worker: takes one of the tasks `left`, pulls it and finishes it,
/// and so on until none is left.
fn work(queue: &Queue, left: &AtomicU64) -> Result<()> {
    let options = PullOptions::new();
    while left
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
        .is_ok()
    {
        let task = pull_one(queue, &options)?;
        queue.finish(task.receipt())?;
    }
    Ok(())
}

/// Pulls a task, trying again while pulls find none (the next task of a
/// group may wait for one that another thread holds), for up to
/// [`STALL`]; checks its payload.
fn pull_one(queue: &Queue, options: &PullOptions) -> Result<tq::Task> {
    let since = Instant::now();
    loop {
        match queue.pull(options)? {
            Some(task) if task.payload() == PAYLOAD => return Ok(task),
            Some(_) => return Err("a pull returned another payload".into()),
            None if since.elapsed() > STALL => {
                return Err("pulls found no task for 10 s with tasks left".into())
            }
            None => thread::yield_now(),
        }
    }
}

/// Drains `tasks` tasks from `threads` threads sharing `queue`, in rounds
/// of `round` tasks: the threads pull the round's tasks between them, one
/// at a time, then each finishes those it pulled, and the next round
/// starts once every thread is done. Only the pulling phases count as
/// claiming. Once a thread fails, every thread stops working but still
/// meets the others at each phase's end, so that none waits forever.
fn drain_in_rounds(queue: &Queue, tasks: u64, round: u64, threads: usize) -> Result<Drained> {
    let phases = Barrier::new(threads);
    // Tasks pulled so far, over every round.
    let pulled = AtomicU64::new(0);
    let claiming = Mutex::new(Duration::ZERO);
    let failure = Mutex::new(None::<String>);
    let started = Instant::now();
    thread::scope(|scope| {
        for _ in 0..threads {
            let (phases, pulled, claiming, failure) = (&phases, &pulled, &claiming, &failure);
            scope.spawn(move || {
                let failure = || failure.lock().expect("no panic holding it");
                let fail = |err: Box<dyn std::error::Error>| {
                    failure().get_or_insert(err.to_string());
                };
                let mut round_end = 0;
                while round_end < tasks {
                    round_end = tasks.min(round_end + round);
                    phases.wait();
                    // Every thread leaves the barrier at once: the one
                    // timing the phase may start its clock here.
                    let since = Instant::now();
                    let held = if failure().is_some() {
                        Vec::new()
                    } else {
                        pull_until(queue, pulled, round_end).unwrap_or_else(|err| {
                            fail(err);
                            Vec::new()
                        })
                    };
                    if phases.wait().is_leader() {
                        *claiming.lock().expect("no panic holding it") += since.elapsed();
                    }
                    for task in held {
                        if let Err(err) = queue.finish(task.receipt()) {
                            fail(err.into());
                            break;
                        }
                    }
                }
            });
        }
    });
    if let Some(failure) = failure.into_inner().expect("no panic holding it") {
        return Err(failure.into());
    }
    let claiming = claiming.into_inner().expect("no panic holding it");
    Ok(Drained {
        rate: tasks as f64 / started.elapsed().as_secs_f64(),
        claim: Some(claiming.as_secs_f64() / tasks as f64),
    })
}

/// Pulls tasks one at a time while fewer than `until` have been `pulled`
/// by every thread together, and returns those this thread pulled.
fn pull_until(queue: &Queue, pulled: &AtomicU64, until: u64) -> Result<Vec<tq::Task>> {
    let options = PullOptions::new();
    let mut held = Vec::new();
    while pulled
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n < until).then_some(n + 1)
        })
        .is_ok()
    {
        held.push(pull_one(queue, &options)?);
    }
    Ok(held)
}

fn check_empty(queue: &Queue) -> Result<()> {
    let left = queue.count(TaskState::Pending)? + queue.count(TaskState::Leased)?;
    if left != 0 {
        return Err(format!("{left} tasks left after the drain").into());
    }
    Ok(())
}
