//! `tq stats`: tasks by state in each queue, the oldest ready task's age
//! and the write-ahead log's size; with `--watch`, refreshed in place with
//! rates derived from the changes between two looks.

use std::io::{self, IsTerminal};
use std::thread;
use std::time::{Duration, Instant};

use indicatif::HumanBytes;
use serde_json::json;
use tq::Pause;

use crate::output::{
    self, parse_positive_duration, parse_queue_name, print, print_json, CommandResult, Failure,
    Location, Outcome,
};
use crate::sample::{rates, QueueStats, Rates, Sample, Sampler};

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
            "GROUPS WAITING",
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
                    stats.groups_waiting.to_string(),
                    stats.oldest_ready_age_ms.map_or("-".to_owned(), |ms| {
                        output::short_duration(Duration::from_millis(ms))
                    }),
                    match (stats.concurrency_limit, stats.rate_limit, stats.fill()) {
                        (None, None, None) => "-".to_owned(),
                        (limit, rate, fill) => crate::control::describe_limits(limit, rate, fill),
                    },
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
