//! Repairs and upkeep: `tq retry`, `tq purge`, `tq recover` and
//! `tq checkpoint`.

use std::time::Duration;

use indicatif::HumanBytes;
use serde_json::json;
use tq::{Queue, TaskState, DEFAULT_QUEUE};

use crate::output::{
    parse_duration, parse_queue_name, print, print_json, CommandResult, Failure, Location, Outcome,
};

/// Arguments of a command that acts on the whole file.
#[derive(clap::Args)]
pub struct FileArgs {
    /// The queue file or PostgreSQL URL; `-` or none: $TQ_DATABASE_URL.
    #[arg(default_value = "-", hide_default_value = true, value_parser = Location::parse)]
    file: Location,
}

/// Arguments of `tq recover`.
#[derive(clap::Args)]
pub struct RecoverArgs {
    /// The queue file or PostgreSQL URL; `-` or none: $TQ_DATABASE_URL.
    #[arg(default_value = "-", hide_default_value = true, value_parser = Location::parse)]
    file: Location,

    /// Only this queue (default: every queue in the file).
    #[arg(long, short, value_parser = parse_queue_name)]
    queue: Option<String>,
}

/// Arguments of `tq retry`.
#[derive(clap::Args)]
pub struct RetryArgs {
    /// The queue file or PostgreSQL URL; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The ids of the dead tasks to put back.
    #[arg(required_unless_present = "all_dead", conflicts_with = "all_dead")]
    ids: Vec<i64>,

    /// Put back every dead task of the queue.
    #[arg(long)]
    all_dead: bool,

    /// The queue the tasks are in.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Runs `tq retry`: each task that is not dead is reported and the others
/// are still retried.
pub fn run_retry(args: RetryArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    if args.all_dead {
        let retried = queue.retry_all_dead()?;
        report(
            json,
            &args.queue,
            "retried",
            retried,
            "dead task",
            "put back",
        )?;
        return Ok(if retried == 0 {
            Outcome::Nothing
        } else {
            Outcome::Done
        });
    }
    let mut retried = Vec::new();
    let mut refused = Vec::new();
    for &id in &args.ids {
        match queue.retry_dead(id) {
            Ok(()) => retried.push(id),
            Err(err) if err.kind() == tq::ErrorKind::InvalidArgument => {
                eprintln!("tq: {err}");
                refused.push(id);
            }
            Err(err) => return Err(err.into()),
        }
    }
    if json {
        print_json(&json!({ "queue": args.queue, "retried": retried, "not_dead": refused }))?;
    } else if !retried.is_empty() {
        let ids: Vec<String> = retried.iter().map(i64::to_string).collect();
        print(format!(
            "put back task{} {} in queue {:?}",
            if ids.len() == 1 { "" } else { "s" },
            ids.join(", "),
            args.queue
        ))?;
    }
    if refused.is_empty() {
        Ok(Outcome::Done)
    } else {
        Err(Failure::new(format!(
            "{} of {} tasks were not dead in queue {:?}",
            refused.len(),
            args.ids.len(),
            args.queue
        )))
    }
}

/// Arguments of `tq purge`.
#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["done_older_than", "dead", "cancelled"]))]
pub struct PurgeArgs {
    /// The queue file or PostgreSQL URL; `-` or none: $TQ_DATABASE_URL.
    #[arg(default_value = "-", hide_default_value = true, value_parser = Location::parse)]
    file: Location,

    /// Delete done tasks finished at least this long ago (e.g. 7d; 0s for all).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    done_older_than: Option<Duration>,

    /// Delete dead tasks.
    #[arg(long)]
    dead: bool,

    /// Delete cancelled tasks (kept by workers that keep history).
    #[arg(long)]
    cancelled: bool,

    /// With --dead or --cancelled: only those that got there at least this
    /// long ago.
    #[arg(long, value_name = "DURATION", conflicts_with = "done_older_than", value_parser = parse_duration)]
    older_than: Option<Duration>,

    /// The queue to purge.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Runs `tq purge`.
pub fn run_purge(args: PurgeArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    let age = args.older_than.unwrap_or(Duration::ZERO);
    let (state, age, what) = match args.done_older_than {
        Some(age) => (TaskState::Done, age, "done task"),
        None if args.cancelled => (TaskState::Cancelled, age, "cancelled task"),
        None => (TaskState::Dead, age, "dead task"),
    };
    let purged = queue.purge(state, age)?;
    report(json, &args.queue, "purged", purged, what, "deleted")?;
    Ok(Outcome::Done)
}

/// Runs `tq recover`: on the queue given, else on every queue of the file
/// (a dead worker may have held tasks of any of them).
pub fn run_recover(args: RecoverArgs, json: bool) -> CommandResult {
    let first = args.queue.as_deref().unwrap_or(DEFAULT_QUEUE);
    let mut handle = Some(args.file.open_existing(first, |_| Ok(()))?);
    let names = match &args.queue {
        Some(name) => vec![name.clone()],
        None => handle.as_ref().map_or(Ok(Vec::new()), Queue::queue_names)?,
    };
    let mut recovered = Vec::with_capacity(names.len());
    for name in names {
        let queue = match handle.take().filter(|_| name == first) {
            Some(queue) => queue,
            None => args.file.open(&name, |_| Ok(()))?,
        };
        recovered.push((queue.recover()?, name));
    }
    let total: u64 = recovered.iter().map(|(count, _)| count).sum();
    if json {
        let queues: Vec<_> = recovered
            .iter()
            .map(|(count, name)| json!({ "queue": name, "recovered": count }))
            .collect();
        print_json(&json!({ "recovered": total, "queues": queues }))?;
    } else if recovered.is_empty() {
        print("took back 0 tasks: the file has no queues")?;
    } else {
        for (count, name) in &recovered {
            print(format!("took back {}", counted(*count, "task", name)))?;
        }
    }
    Ok(Outcome::Done)
}

/// Runs `tq checkpoint`.
pub fn run_checkpoint(args: FileArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(DEFAULT_QUEUE, |_| Ok(()))?;
    let checkpoint = queue.checkpoint()?;
    if json {
        print_json(&json!({
            "wal_bytes": checkpoint.wal_bytes,
            "complete": checkpoint.complete,
        }))?;
    } else if checkpoint.complete {
        print(format!(
            "write-ahead log copied into the database; now {}",
            HumanBytes(checkpoint.wal_bytes)
        ))?;
    } else {
        print(format!(
            "write-ahead log partly copied: a reader still uses the rest ({} left)",
            HumanBytes(checkpoint.wal_bytes)
        ))?;
    }
    Ok(Outcome::Done)
}

/// Prints a count of tasks of `queue`: `{"queue": q, "<key>": n}` in
/// JSON, else `<verb> n <noun>s in queue "q"`.
fn report(
    json: bool,
    queue: &str,
    key: &str,
    count: u64,
    noun: &str,
    verb: &str,
) -> Result<(), Failure> {
    if json {
        print_json(&json!({ "queue": queue, key: count }))
    } else {
        print(format!("{verb} {}", counted(count, noun, queue)))
    }
}

/// `n <noun>s in queue "q"`.
fn counted(count: u64, noun: &str, queue: &str) -> String {
    format!(
        "{count} {noun}{} in queue {queue:?}",
        if count == 1 { "" } else { "s" }
    )
}
