//! Control over running work: `tq cancel`, `tq pause` and `tq resume`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::json;
use tq::{Cancelled, Pause, RateLimit, TaskState, DEFAULT_QUEUE};

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
            "queue": args.queue,
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
            print(format!(
                "cancelled {} in queue {:?}",
                ids(&removed),
                args.queue
            ))?;
        }
        if !requested.is_empty() {
            print(format!(
                "cancelled {} in queue {:?} (leased: never delivered again; the worker holding \
                 it is told)",
                ids(&requested),
                args.queue
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
#[command(group = clap::ArgGroup::new("what").required(true).multiple(true)
    .args(["concurrency", "rate", "max_pending", "max_pending_per_key", "none"]))]
pub struct LimitArgs {
    /// The queue file or PostgreSQL URL; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// At most this many tasks of the queue leased at once.
    #[arg(value_name = "CONCURRENCY", value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: Option<u32>,

    /// At most this many claims in any window, as CLAIMS/WINDOW (e.g.
    /// 10/1s, 600/1m).
    #[arg(long, value_name = "CLAIMS/WINDOW", value_parser = parse_rate)]
    rate: Option<RateLimit>,

    /// At most this many pending tasks (ready, delayed, waiting; not
    /// leased): a push beyond it is refused as full. 0 removes the cap.
    #[arg(long, value_name = "N")]
    max_pending: Option<u64>,

    /// At most this many pending tasks of each fairness key, unless the
    /// key has a cap of its own (`tq weight --max-pending`). Makes the
    /// queue fair. 0 removes it. SQLite only.
    #[arg(long, value_name = "N")]
    max_pending_per_key: Option<u64>,

    /// Remove the queue's limits (every kind, its caps included).
    #[arg(long, conflicts_with_all = ["concurrency", "rate", "max_pending", "max_pending_per_key"])]
    none: bool,

    /// The queue to limit.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Arguments of `tq weight`.
#[derive(clap::Args)]
pub struct WeightArgs {
    /// The queue file; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The fairness key ("" for the tasks pushed without one).
    key: String,

    /// The key's new weight (0.001 to 1000000; default 1). Without it,
    /// shows the key's weight.
    weight: Option<f64>,

    /// At most this many pending tasks of the key, in place of the
    /// queue's default (`tq limit --max-pending-per-key`); 0 removes the
    /// key's own cap.
    #[arg(long, value_name = "N")]
    max_pending: Option<u64>,

    /// The queue of the key.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Runs `tq weight`.
pub fn run_weight(args: WeightArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    if let Some(weight) = args.weight {
        queue.set_fair_weight(&args.key, weight)?;
    }
    if let Some(cap) = args.max_pending {
        queue.set_key_max_pending(&args.key, Some(cap))?;
    }
    let weight = queue.fair_weight(&args.key)?;
    let cap = queue.key_max_pending(&args.key)?;
    if json {
        print_json(&json!({
            "queue": args.queue,
            "key": args.key,
            "weight": weight,
            "max_pending": cap,
        }))?;
    } else {
        let capped = cap.map_or_else(String::new, |cap| format!(", at most {cap} pending"));
        print(format!(
            "queue {:?}: key {:?} has weight {weight}{capped}",
            args.queue, args.key
        ))?;
    }
    Ok(Outcome::Done)
}

/// A rate written as CLAIMS/WINDOW.
fn parse_rate(text: &str) -> Result<RateLimit, String> {
    let (claims, window) = text
        .split_once('/')
        .ok_or_else(|| format!("{text:?} is not CLAIMS/WINDOW (e.g. 10/1s)"))?;
    let claims = claims
        .trim()
        .parse::<u32>()
        .map_err(|err| format!("{claims:?} is not a number of claims: {err}"))?;
    Ok(RateLimit {
        claims,
        per: parse_duration(window.trim())?,
    })
}

/// Runs `tq limit`.
pub fn run_limit(args: LimitArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    if args.none {
        queue.set_concurrency_limit(None)?;
        queue.set_rate_limit(None)?;
        queue.set_max_pending(None)?;
        if key_cap_default(&queue)?.is_some() {
            queue.set_max_pending_per_key(None)?;
        }
    }
    if let Some(cap) = args.max_pending {
        queue.set_max_pending(Some(cap))?;
    }
    if let Some(cap) = args.max_pending_per_key {
        queue.set_max_pending_per_key(Some(cap))?;
    }
    if let Some(limit) = args.concurrency {
        queue.set_concurrency_limit(Some(limit))?;
    }
    if let Some(rate) = args.rate {
        queue.set_rate_limit(Some(rate))?;
    }
    let (concurrency, rate) = (queue.concurrency_limit()?, queue.rate_limit()?);
    let fill = match queue.max_pending()? {
        Some(cap) => Some(Fill {
            pending: queue.count(TaskState::Pending)?,
            cap,
        }),
        None => None,
    };
    let per_key = key_cap_default(&queue)?;
    if json {
        print_json(&json!({
            "queue": args.queue,
            "concurrency_limit": concurrency,
            "rate_limit": rate.map(rate_json),
            "max_pending": fill.map(|fill| fill.cap),
            "max_pending_per_key": per_key,
        }))?;
    } else {
        let limits = describe_limits(concurrency, rate, fill);
        let described = match per_key {
            None => limits,
            Some(cap) if concurrency.is_none() && rate.is_none() && fill.is_none() => {
                format!("at most {cap} pending per fairness key")
            }
            Some(cap) => format!("{limits}, at most {cap} pending per fairness key"),
        };
        print(format!("queue {:?}: {described}", args.queue))?;
    }
    Ok(Outcome::Done)
}

/// The queue's default cap per fairness key; none on PostgreSQL, which
/// refuses fairness keys (and so their caps) with an invalid argument.
fn key_cap_default(queue: &tq::Queue) -> Result<Option<u64>, tq::Error> {
    match queue.max_pending_per_key() {
        Err(err) if err.kind() == tq::ErrorKind::InvalidArgument => Ok(None),
        other => other,
    }
}

/// A rate limit in JSON: `{"claims": n, "per_ms": ms}`.
pub fn rate_json(rate: RateLimit) -> serde_json::Value {
    json!({ "claims": rate.claims, "per_ms": rate.per.as_millis() as u64 })
}

/// A capped queue's pending tasks and its cap.
#[derive(Clone, Copy)]
pub struct Fill {
    pub pending: u64,
    pub cap: u64,
}

impl Fill {
    /// "5000 of 10000 pending (50%)".
    pub fn describe(self) -> String {
        let percent = self.pending.saturating_mul(100) / self.cap.max(1);
        format!("{} of {} pending ({percent}%)", self.pending, self.cap)
    }
}

/// "at most 3 leased at once, 10 claims per 1s, 5 of 10 pending (50%)",
/// or "no limits".
pub fn describe_limits(
    concurrency: Option<u32>,
    rate: Option<RateLimit>,
    fill: Option<Fill>,
) -> String {
    let mut parts = Vec::new();
    if let Some(limit) = concurrency {
        parts.push(format!("at most {limit} leased at once"));
    }
    if let Some(rate) = rate {
        parts.push(format!(
            "{} claim{} per {}",
            rate.claims,
            if rate.claims == 1 { "" } else { "s" },
            humantime::format_duration(rate.per)
        ));
    }
    if let Some(fill) = fill {
        parts.push(fill.describe());
    }
    if parts.is_empty() {
        "no limits".to_owned()
    } else {
        parts.join(", ")
    }
}

#[derive(clap::Args)]
pub struct SignalArgs {
    /// The queue file; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The event's key (1 to 1000 bytes).
    key: String,

    /// The event's payload, a JSON text.
    #[arg(value_name = "JSON")]
    payload: String,

    /// How long the event is kept when no task waits for it (default 7d).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    retention: Option<Duration>,

    /// The queue whose tasks wait for the event.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Runs `tq signal`.
pub fn run_signal(args: SignalArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    let retention = args.retention.unwrap_or(tq::DEFAULT_EVENT_RETENTION);
    let woken = queue.signal_kept_for(&args.key, &args.payload, retention)?;
    if json {
        print_json(&json!({ "queue": args.queue, "key": args.key, "woke": woken }))?;
    } else {
        print(match woken {
            Some(id) => format!("task {id} took the event"),
            None => format!(
                "no task waits for {:?}: the event is kept for {}",
                args.key,
                whole_seconds(retention)
            ),
        })?;
    }
    Ok(Outcome::Done)
}

/// A retention in whole seconds, as `tq signal` prints it.
fn whole_seconds(length: Duration) -> String {
    format!("{} s", length.as_secs())
}
