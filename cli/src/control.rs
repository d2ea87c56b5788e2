//! Control over running work: `tq cancel`, `tq pause` and `tq resume`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tq::{Cancelled, Pause, DEFAULT_QUEUE};

use crate::output::{
    parse_duration, parse_queue_name, print, print_json, rfc3339, CommandResult, Failure, Location,
    Outcome,
};

/// Arguments of `tq cancel`.
#[derive(clap::Args)]
pub struct CancelArgs {
    /// The queue file or PostgreSQL URL; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The ids of the tasks to cancel.
    #[arg(required = true)]
    ids: Vec<i64>,

    /// Why, kept as each task's last error.
    #[arg(long, default_value = "")]
    reason: String,

    /// The queue the tasks are in.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Runs `tq cancel`: each task that cannot be cancelled is reported and the
/// others are still cancelled.
pub fn run_cancel(args: CancelArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    let (mut removed, mut requested, mut refused) = (Vec::new(), Vec::new(), Vec::new());
    for &id in &args.ids {
        match queue.cancel_task(id, &args.reason) {
            Ok(Cancelled::Removed) => removed.push(id),
            Ok(Cancelled::Requested) => requested.push(id),
            Err(err) if err.kind() == tq::ErrorKind::InvalidArgument => {
                eprintln!("tq: {err}");
                refused.push(id);
            }
            Err(err) => return Err(err.into()),
        }
    }
    if json {
        print_json(&json!({
            "cancelled": removed,
            "cancel_requested": requested,
            "refused": refused,
        }))?;
    } else {
        let ids = |ids: &[i64]| {
            ids.iter()
                .map(i64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !removed.is_empty() {
            print(format!("cancelled {}", ids(&removed)))?;
        }
        if !requested.is_empty() {
            print(format!(
                "cancelled {} (leased: never delivered again; the worker holding it is told at its next heartbeat or finish)",
                ids(&requested)
            ))?;
        }
    }
    if refused.is_empty() {
        Ok(Outcome::Done)
    } else {
        Err(Failure::new(format!(
            "{} of {} tasks could not be cancelled in queue {:?}",
            refused.len(),
            args.ids.len(),
            args.queue
        )))
    }
}

/// Arguments of `tq pause`.
#[derive(clap::Args)]
pub struct PauseArgs {
    /// The queue file or PostgreSQL URL; `-` or none: $TQ_DATABASE_URL.
    #[arg(default_value = "-", hide_default_value = true, value_parser = Location::parse)]
    file: Location,

    /// End the pause by itself after this long (e.g. 30m); without it, the
    /// pause lasts until `tq resume`.
    #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,

    /// The queue to pause.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Runs `tq pause`.
pub fn run_pause(args: PauseArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    let pause = match args.duration {
        None => Pause::UntilResumed,
        Some(duration) => {
            let until = SystemTime::now() + duration;
            let until_ms = until
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as i64);
            Pause::UntilUnixMs(until_ms)
        }
    };
    queue.pause(pause)?;
    let until = match pause {
        Pause::UntilResumed => None,
        Pause::UntilUnixMs(until) => Some(rfc3339(until)),
    };
    if json {
        print_json(&json!({ "queue": args.queue, "paused": true, "paused_until": until }))?;
    } else {
        match until {
            None => print(format!("paused queue {:?} until `tq resume`", args.queue))?,
            Some(until) => print(format!("paused queue {:?} until {until}", args.queue))?,
        }
    }
    Ok(Outcome::Done)
}

/// Arguments of `tq resume`.
#[derive(clap::Args)]
pub struct ResumeArgs {
    /// The queue file or PostgreSQL URL; `-` or none: $TQ_DATABASE_URL.
    #[arg(default_value = "-", hide_default_value = true, value_parser = Location::parse)]
    file: Location,

    /// The queue to resume.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Runs `tq resume`.
pub fn run_resume(args: ResumeArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    let was_paused = queue.paused()?.is_some();
    queue.resume()?;
    if json {
        print_json(&json!({ "queue": args.queue, "paused": false, "was_paused": was_paused }))?;
    } else if was_paused {
        print(format!("resumed queue {:?}", args.queue))?;
    } else {
        print(format!("queue {:?} was not paused", args.queue))?;
    }
    Ok(Outcome::Done)
}

/// Arguments of `tq limit`.
#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("what").required(true).args(["limit", "none"]))]
pub struct LimitArgs {
    /// The queue file or PostgreSQL URL; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// At most this many tasks of the queue leased at once.
    #[arg(value_parser = clap::value_parser!(u32).range(1..))]
    limit: Option<u32>,

    /// Remove the queue's limit.
    #[arg(long)]
    none: bool,

    /// The queue to limit.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Runs `tq limit`.
pub fn run_limit(args: LimitArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    queue.set_concurrency_limit(args.limit)?;
    if json {
        print_json(&json!({ "queue": args.queue, "concurrency_limit": args.limit }))?;
    } else {
        match args.limit {
            Some(limit) => print(format!(
                "queue {:?}: at most {limit} task{} leased at once",
                args.queue,
                if limit == 1 { "" } else { "s" }
            ))?,
            None => print(format!("queue {:?}: no concurrency limit", args.queue))?,
        }
    }
    Ok(Outcome::Done)
}
