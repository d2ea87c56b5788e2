//! `tq stats`: tasks by state in each queue, the oldest ready task's age
//! and the write-ahead log's size; with `--watch`, refreshed in place with
//! rates derived from the changes between two looks.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, IsTerminal};
use std::thread;
use std::time::{Duration, Instant};

use indicatif::HumanBytes;
use serde_json::{json, Value};
use tq::{Pause, Queue, TaskState, DEFAULT_QUEUE};

use crate::output::{
    self, parse_positive_duration, parse_queue_name, print, print_json, CommandResult, Failure,
    Location, Outcome,
};

/// Arguments of `tq stats`.
#[derive(clap::Args)]
pub struct Args {
    /// The queue file or PostgreSQL URL; `-` or none: $TQ_DATABASE_URL.
    #[arg(default_value = "-", hide_default_value = true, value_parser = Location::parse)]
    file: Location,

    /// Show only this queue (default: every queue in the file).
    #[arg(long, short, value_parser = parse_queue_name)]
    queue: Option<String>,

    /// Refresh every INTERVAL (default 1s) until interrupted, and show how
    /// many tasks were pushed, finished and went dead per second.
    #[arg(
        long,
        value_name = "INTERVAL",
        num_args = 0..=1,
        default_missing_value = "1s",
        value_parser = parse_positive_duration
    )]
    watch: Option<Duration>,
}

/// One queue's counts.
struct QueueStats {
    queue: String,
    pending: u64,
    leased: u64,
    dead: u64,
    done: u64,
    cancelled: u64,
    /// How long the task ready longest has waited; `null` when none is ready.
    oldest_ready_age_ms: Option<u64>,
    /// The queue's pause in force, if any.
    paused: Option<Pause>,
    concurrency_limit: Option<u32>,
}

impl QueueStats {
    fn to_json(&self) -> Value {
        json!({
            "queue": self.queue,
            "pending": self.pending,
            "leased": self.leased,
            "dead": self.dead,
            "done": self.done,
            "cancelled": self.cancelled,
            "oldest_ready_age_ms": self.oldest_ready_age_ms,
            "concurrency_limit": self.concurrency_limit,
            "paused": self.paused.is_some(),
            "paused_until": match self.paused {
                Some(Pause::UntilUnixMs(until)) => Some(output::rfc3339(until)),
                _ => None,
            },
        })
    }
}

/// The whole file at one moment.
struct Sample {
    taken_at: Instant,
    /// Every queue of the file, by name.
    queues: Vec<QueueStats>,
    /// The `-wal` file's size; `None` on PostgreSQL, which has no file.
    wal_bytes: Option<u64>,
    /// The highest task id handed out: its growth counts pushes.
    last_id: i64,
}

/// Tasks per second between two samples, for the whole file. Pushes come
/// from the id sequence; finished tasks are those pushed that no longer
/// count as pending, leased or dead (done, cancelled or deleted; a purge
/// of dead tasks counts too); dead is the growth of the dead count.
struct Rates {
    interval_s: f64,
    pushed_per_s: f64,
    finished_per_s: f64,
    dead_per_s: f64,
}

/// Runs `tq stats`.
pub fn run(args: Args, json: bool) -> CommandResult {
    let mut sampler = Sampler::open(&args.file, args.queue.as_deref())?;
    let Some(interval) = args.watch else {
        let sample = sampler.sample()?;
        show(&args, &sample, None, json)?;
        return Ok(Outcome::Done);
    };
    let terminal = io::stdout().is_terminal() && !json;
    let mut previous: Option<Sample> = None;
    let mut lines_shown = 0;
    let mut next = Instant::now();
    loop {
        let sample = sampler.sample()?;
        let rates = previous.as_ref().map(|previous| rates(previous, &sample));
        if terminal {
            console::Term::stdout().clear_last_lines(lines_shown)?;
        } else if previous.is_some() && !json {
            print("")?;
        }
        lines_shown = show(&args, &sample, rates, json)?;
        previous = Some(sample);
        next += interval;
        thread::sleep(next.saturating_duration_since(Instant::now()));
    }
}

/// Prints one sample, and says how many lines it took.
fn show(args: &Args, sample: &Sample, rates: Option<Rates>, json: bool) -> Result<usize, Failure> {
    let shown: Vec<&QueueStats> = sample
        .queues
        .iter()
        .filter(|stats| args.queue.as_ref().is_none_or(|only| &stats.queue == only))
        .collect();
    if json {
        let mut report = json!({
            "file": args.file.to_string(),
            "wal_bytes": sample.wal_bytes,
            "queues": shown.iter().map(|stats| stats.to_json()).collect::<Vec<_>>(),
        });
        if let Some(rates) = rates {
            report["rates"] = json!({
                "interval_s": rates.interval_s,
                "pushed_per_s": rates.pushed_per_s,
                "finished_per_s": rates.finished_per_s,
                "dead_per_s": rates.dead_per_s,
            });
        }
        print_json(&report)?;
        return Ok(1);
    }
    let mut lines = 0;
    if shown.is_empty() {
        print(format!("no tasks in {}", args.file))?;
        lines += 1;
    } else {
        let mut table = output::table(&[
            "QUEUE",
            "PENDING",
            "LEASED",
            "DEAD",
            "DONE",
            "CANCELLED",
            "OLDEST READY",
            "LIMIT",
            "PAUSED",
        ]);
        for stats in &shown {
            output::add_row(
                &mut table,
                vec![
                    stats.queue.clone(),
                    stats.pending.to_string(),
                    stats.leased.to_string(),
                    stats.dead.to_string(),
                    stats.done.to_string(),
                    stats.cancelled.to_string(),
                    stats.oldest_ready_age_ms.map_or("-".to_owned(), |ms| {
                        output::short_duration(Duration::from_millis(ms))
                    }),
                    stats
                        .concurrency_limit
                        .map_or("-".to_owned(), |limit| limit.to_string()),
                    match stats.paused {
                        None => "-".to_owned(),
                        Some(Pause::UntilResumed) => "until resumed".to_owned(),
                        Some(Pause::UntilUnixMs(until)) => {
                            format!("until {}", output::rfc3339(until))
                        }
                    },
                ],
            );
        }
        output::print_table(&table)?;
        lines += shown.len() + 1;
    }
    if let Some(wal_bytes) = sample.wal_bytes {
        print(format!("write-ahead log: {}", HumanBytes(wal_bytes)))?;
    }
    lines += 1;
    if let Some(rates) = rates {
        print(format!(
            "per second over {:.1}s: {:.1} pushed, {:.1} finished, {:.1} dead",
            rates.interval_s, rates.pushed_per_s, rates.finished_per_s, rates.dead_per_s
        ))?;
        lines += 1;
    }
    Ok(lines)
}

fn rates(before: &Sample, after: &Sample) -> Rates {
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
    }
}

/// Takes samples of one file, keeping a handle on each queue it has seen.
struct Sampler {
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
    fn open(location: &Location, only: Option<&str>) -> Result<Sampler, Failure> {
        let first = only.unwrap_or(DEFAULT_QUEUE);
        let handle = location.open_existing(first, |_| Ok(()))?;
        Ok(Sampler {
            handles: BTreeMap::from([(first.to_owned(), handle)]),
            sampled: only.map(str::to_owned).into_iter().collect(),
            first: first.to_owned(),
            location: location.clone(),
        })
    }

    fn sample(&mut self) -> Result<Sample, Failure> {
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
                oldest_ready_age_ms: handle.oldest_ready_age()?.map(|age| age.as_millis() as u64),
                paused: handle.paused()?,
                concurrency_limit: handle.concurrency_limit()?,
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
