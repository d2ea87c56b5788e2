//! Samples of a queue file: every queue's counts at one moment, and the
//! rates derived from two samples. `tq stats --watch` and `tq serve` show
//! them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use serde_json::{json, Value};
use tq::{Pause, Queue, RateLimit, TaskState, TaskTiming, DEFAULT_QUEUE, MAX_TIMINGS};

use crate::output::{self, Failure, Location};

/// One queue's counts.
pub struct QueueStats {
    pub queue: String,
    pub pending: u64,
    pub leased: u64,
    pub dead: u64,
    pub done: u64,
    pub cancelled: u64,
    /// How many ordered groups have tasks waiting for their turn.
    pub groups_waiting: u64,
    /// How long the task ready longest has waited; `null` when none is ready.
    pub oldest_ready_age_ms: Option<u64>,
    /// The queue's pause in force, if any.
    pub paused: Option<Pause>,
    pub concurrency_limit: Option<u32>,
    pub rate_limit: Option<RateLimit>,
    /// The queue's cap on pending tasks, if any.
    pub max_pending: Option<u64>,
}

impl QueueStats {
    /// How many of the queue's tasks are in `state`.
    pub fn count(&self, state: TaskState) -> u64 {
        match state {
            TaskState::Pending => self.pending,
            TaskState::Leased => self.leased,
            TaskState::Dead => self.dead,
            TaskState::Done => self.done,
            TaskState::Cancelled => self.cancelled,
        }
    }

    /// The queue's pending tasks and cap, when it has one.
    pub fn fill(&self) -> Option<crate::control::Fill> {
        self.max_pending.map(|cap| crate::control::Fill {
            pending: self.pending,
            cap,
        })
    }

    /// The queue's counts as `tq stats --json` shows them.
    pub fn to_json(&self) -> Value {
        json!({
            "queue": self.queue,
            "pending": self.pending,
            "leased": self.leased,
            "dead": self.dead,
            "done": self.done,
            "cancelled": self.cancelled,
            "groups_waiting": self.groups_waiting,
            "oldest_ready_age_ms": self.oldest_ready_age_ms,
            "concurrency_limit": self.concurrency_limit,
            "rate_limit": self.rate_limit.map(crate::control::rate_json),
            "max_pending": self.max_pending,
            "paused": self.paused.is_some(),
            "paused_until": match self.paused {
                Some(Pause::UntilUnixMs(until)) => Some(output::rfc3339(until)),
                _ => None,
            },
        })
    }
}

/// The whole file at one moment.
pub struct Sample {
    pub taken_at: Instant,
    /// Every queue of the file, by name.
    pub queues: Vec<QueueStats>,
    /// The `-wal` file's size; `None` on PostgreSQL, which has no file.
    pub wal_bytes: Option<u64>,
    /// The highest task id handed out: its growth counts pushes.
    pub last_id: i64,
}

/// Tasks per second between two samples, for the whole file. Pushes come
/// from the id sequence; finished tasks are those pushed that no longer
/// count as pending, leased or dead (done, cancelled or deleted; a purge
/// of dead tasks counts too); dead is the growth of the dead count.
pub struct Rates {
    pub interval_s: f64,
    pub pushed_per_s: f64,
    pub finished_per_s: f64,
    pub dead_per_s: f64,
    /// The counts behind the rates: tasks pushed, finished and gone dead
    /// between the two samples.
    pub pushed: u64,
    pub finished: u64,
    pub died: u64,
}

/// The rates between two samples of the same file.
pub fn rates(before: &Sample, after: &Sample) -> Rates {
    let seconds = after
        .taken_at
        .duration_since(before.taken_at)
        .as_secs_f64()
        .max(f64::EPSILON);
    let active = |sample: &Sample| -> i64 {
        sample
            .queues
            .iter()
            .map(|stats| (stats.pending + stats.leased + stats.dead) as i64)
            .sum()
    };
    let dead =
        |sample: &Sample| -> i64 { sample.queues.iter().map(|stats| stats.dead as i64).sum() };
    let pushed = after.last_id.saturating_sub(before.last_id);
    let finished = (pushed - (active(after) - active(before))).max(0);
    let died = (dead(after) - dead(before)).max(0);
    Rates {
        interval_s: seconds,
        pushed_per_s: pushed as f64 / seconds,
        finished_per_s: finished as f64 / seconds,
        dead_per_s: died as f64 / seconds,
        pushed: pushed.max(0) as u64,
        finished: finished as u64,
        died: died as u64,
    }
}

/// What one queue's stored rows tell of a window of time `[from, until)`:
/// the claims made in it and the ends (done or dead) in it, each claim and
/// each end seen by one window only when windows follow one another (see
/// [`tq::Queue::timings_since`] for what no window sees).
#[derive(Default)]
pub struct Observed {
    /// For each claim, how long its task had waited for it, in seconds.
    pub waited_s: Vec<f64>,
    /// For each end, how long its last delivery had run, in seconds.
    pub ran_s: Vec<f64>,
    /// Deliveries that ended without finishing: one for each claim of a
    /// second or later attempt (the delivery before it failed, its lease
    /// ran out or its holder was gone) and one for each death.
    pub failed: u64,
}

/// The most calls of [`Queue::timings_since`] one window makes per queue,
/// reading on past [`MAX_TIMINGS`] ended tasks each.
const MAX_TIMING_PAGES: usize = 10;

/// Takes samples of one file, keeping a handle on each queue it has seen.
pub struct Sampler {
    handles: BTreeMap<String, Queue>,
    /// The queues to sample: those that had tasks at some look, and the
    /// one asked for.
    sampled: BTreeSet<String>,
    /// The queue opened first, always open.
    first: String,
    location: Location,
}

impl Sampler {
    /// Opens the file; `only` is sampled even while it has no task.
    pub fn open(location: &Location, only: Option<&str>) -> Result<Sampler, Failure> {
        let first = only.unwrap_or(DEFAULT_QUEUE);
        let handle = location.open_existing(first, |_| Ok(()))?;
        Ok(Sampler {
            handles: BTreeMap::from([(first.to_owned(), handle)]),
            sampled: only.map(str::to_owned).into_iter().collect(),
            first: first.to_owned(),
            location: location.clone(),
        })
    }

    /// The handle on queue `name` of the file, opened on first use.
    pub fn queue(&mut self, name: &str) -> Result<&Queue, Failure> {
        if !self.handles.contains_key(name) {
            let handle = self.location.open(name, |_| Ok(()))?;
            self.handles.insert(name.to_owned(), handle);
        }
        Ok(&self.handles[name])
    }

    /// The claims and ends of each sampled queue in `[from, until)`, ms
    /// since the Unix epoch on the store's clock (the server's, on
    /// PostgreSQL). A queue that ended more than [`MAX_TIMING_PAGES`] times
    /// [`MAX_TIMINGS`] tasks of one kind in the window is seen in part.
    pub fn observe(&self, from: i64, until: i64) -> Result<Vec<(String, Observed)>, Failure> {
        let mut queues = Vec::with_capacity(self.sampled.len());
        for name in &self.sampled {
            let handle = &self.handles[name];
            // By id: a task leased at one read and ended at the next, or
            // ended at the very time a page ends, is seen twice.
            let mut seen: HashMap<i64, TaskTiming> = HashMap::new();
            let mut since = from;
            for _ in 0..MAX_TIMING_PAGES {
                let timings = handle.timings_since(since)?;
                let mut last_ends = Vec::new();
                for state in [TaskState::Done, TaskState::Dead] {
                    let ended: Vec<i64> = timings
                        .iter()
                        .filter(|timing| timing.state() == state)
                        .filter_map(TaskTiming::finished_at_unix_ms)
                        .collect();
                    if ended.len() == MAX_TIMINGS {
                        last_ends.extend(ended.last().copied());
                    }
                }
                for timing in timings {
                    let ended = timing.finished_at_unix_ms().is_some();
                    seen.entry(timing.id())
                        .and_modify(|kept| {
                            if ended {
                                *kept = timing;
                            }
                        })
                        .or_insert(timing);
                }
                // Read on from the earliest last end of a kind cut short.
                match last_ends.into_iter().min() {
                    Some(next) if next > since && next < until => since = next,
                    _ => break,
                }
            }
            let within = |at: i64| from <= at && at < until;
            let mut observed = Observed::default();
            for timing in seen.values() {
                if within(timing.claimed_at_unix_ms()) {
                    observed.waited_s.push(timing.waited().as_secs_f64());
                    if timing.attempts() > 1 {
                        observed.failed += 1;
                    }
                }
                if let (Some(ended), Some(ran)) = (timing.finished_at_unix_ms(), timing.ran()) {
                    if within(ended) {
                        observed.ran_s.push(ran.as_secs_f64());
                        if timing.state() == TaskState::Dead {
                            observed.failed += 1;
                        }
                    }
                }
            }
            queues.push((name.clone(), observed));
        }
        Ok(queues)
    }

    /// Counts every queue of the file now.
    pub fn sample(&mut self) -> Result<Sample, Failure> {
        for name in self.handles[&self.first].queue_names()? {
            if !self.handles.contains_key(&name) {
                let handle = self.location.open(&name, |_| Ok(()))?;
                self.handles.insert(name.clone(), handle);
            }
            self.sampled.insert(name);
        }
        let last_id = self.handles[&self.first].last_id()?;
        let mut queues = Vec::with_capacity(self.sampled.len());
        for name in &self.sampled {
            let handle = &self.handles[name];
            queues.push(QueueStats {
                queue: name.clone(),
                pending: handle.count(TaskState::Pending)?,
                leased: handle.count(TaskState::Leased)?,
                dead: handle.count(TaskState::Dead)?,
                done: handle.count(TaskState::Done)?,
                cancelled: handle.count(TaskState::Cancelled)?,
                groups_waiting: handle.groups_waiting()?,
                oldest_ready_age_ms: handle.oldest_ready_age()?.map(|age| age.as_millis() as u64),
                paused: handle.paused()?,
                concurrency_limit: handle.concurrency_limit()?,
                rate_limit: handle.rate_limit()?,
                max_pending: handle.max_pending()?,
            });
        }
        let wal_bytes = if self.location.is_postgres() {
            None
        } else {
            Some(self.handles[&self.first].wal_size()?)
        };
        Ok(Sample {
            taken_at: Instant::now(),
            queues,
            wal_bytes,
            last_id,
        })
    }
}
