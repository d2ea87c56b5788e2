//! `tq schedule add/list/rm/pause/resume`: the periodic schedules stored in
//! a queue, whose slots every worker (`tq work`) enqueues by itself.

use std::time::Duration;

use clap::{Subcommand, ValueEnum};
use serde_json::json;
use tq::{CatchUp, Queue, Schedule, ScheduleInfo, ScheduleSpec, DEFAULT_QUEUE};

use crate::output::{
    add_row, parse_positive_duration, parse_queue_name, print, print_json, print_table,
    relative_time, rfc3339, table, CommandResult, Failure, Location, Outcome,
};

/// The subcommands of `tq schedule`.
#[derive(Subcommand)]
pub enum Command {
    /// Add a schedule (or, with --replace, overwrite one of the same name).
    #[command(after_help = "\
Each slot is enqueued once, however many workers run: `tq work` (and any
program pulling from the queue) enqueues due slots by itself, so no other
daemon is needed. A cron expression has five fields (minute hour
day-of-month month day-of-week) or six (seconds first), read in --tz.

Examples:
  tq schedule add jobs.db nightly '{\"report\": \"daily\"}' --cron '0 2 * * *' --tz Europe/Paris
  tq schedule add jobs.db heartbeat '{}' --every 30s --catch-up skip
  tq schedule add jobs.db sync '{}' --every 5m --catch-up each --catch-up-limit 12 --replace")]
    Add(AddArgs),

    /// List the queue's schedules with their next slot.
    #[command(after_help = "\
Examples:
  tq schedule list jobs.db
  tq schedule list jobs.db --queue reports --json")]
    List(ListArgs),

    /// Remove schedules; the tasks they enqueued stay.
    #[command(after_help = "\
Example:
  tq schedule rm jobs.db nightly heartbeat")]
    Rm(NamesArgs),

    /// Pause schedules: their slots are skipped until resumed.
    #[command(after_help = "\
Example:
  tq schedule pause jobs.db nightly")]
    Pause(NamesArgs),

    /// Resume paused schedules from their next slot from now on.
    #[command(after_help = "\
The slots that fell while a schedule was paused are skipped.

Example:
  tq schedule resume jobs.db nightly")]
    Resume(NamesArgs),
}

/// A catch-up policy as the command line names it.
#[derive(Clone, Copy, ValueEnum)]
pub enum Policy {
    /// Run the latest missed slot if it is at most a minute late.
    Skip,
    /// Run the latest missed slot, however late: one run for all.
    One,
    /// Run each missed slot, the latest --catch-up-limit of them.
    Each,
}

/// Arguments of `tq schedule add`.
#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("spec").required(true).args(["cron", "every"]))]
pub struct AddArgs {
    /// The queue file or PostgreSQL URL (created if needed); `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The schedule's name, unique in its queue.
    name: String,

    /// The JSON payload of each task it enqueues.
    payload: String,

    /// A cron expression of 5 or 6 fields (seconds first), or @daily, @hourly...
    #[arg(long, value_name = "EXPRESSION")]
    cron: Option<String>,

    /// A plain interval instead (e.g. 30s, 5m); the first slot one interval from now.
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    every: Option<Duration>,

    /// The IANA time zone the cron expression is read in (default UTC).
    #[arg(long, value_name = "ZONE", conflicts_with = "every")]
    tz: Option<String>,

    /// The priority of its tasks (higher first).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    priority: i32,

    /// How many deliveries each of its tasks gets (default: the queue's, 25).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_attempts: Option<u32>,

    /// What slots missed while no worker ran become.
    #[arg(long, value_enum, default_value = "one")]
    catch_up: Policy,

    /// With --catch-up each: at most this many missed slots run.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    catch_up_limit: u32,

    /// Overwrite a schedule of the same name instead of refusing.
    #[arg(long)]
    replace: bool,

    /// The queue the schedule enqueues into.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Arguments of `tq schedule list`.
#[derive(clap::Args)]
pub struct ListArgs {
    /// The queue file or PostgreSQL URL; `-` or none: $TQ_DATABASE_URL.
    #[arg(default_value = "-", hide_default_value = true, value_parser = Location::parse)]
    file: Location,

    /// The queue whose schedules to list.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Arguments of `tq schedule rm`, `pause` and `resume`.
#[derive(clap::Args)]
pub struct NamesArgs {
    /// The queue file or PostgreSQL URL; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The schedules' names.
    #[arg(required = true)]
    names: Vec<String>,

    /// The queue the schedules belong to.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,
}

/// Runs `tq schedule ...`.
pub fn run(command: Command, json: bool) -> CommandResult {
    match command {
        Command::Add(args) => run_add(args, json),
        Command::List(args) => run_list(args, json),
        Command::Rm(args) => run_names(args, json, "removed", Queue::remove_schedule),
        Command::Pause(args) => run_names(args, json, "paused", Queue::pause_schedule),
        Command::Resume(args) => run_names(args, json, "resumed", Queue::resume_schedule),
    }
}

fn run_add(args: AddArgs, json: bool) -> CommandResult {
    let spec = match (args.cron, args.every) {
        (Some(expression), _) => ScheduleSpec::Cron(expression),
        (None, Some(interval)) => ScheduleSpec::Every(interval),
        (None, None) => unreachable!("clap requires --cron or --every"),
    };
    let mut schedule = Schedule::new(&args.name, spec, &args.payload)?;
    if let Some(zone) = &args.tz {
        schedule.time_zone(zone)?;
    }
    schedule
        .priority(args.priority)
        .catch_up(match args.catch_up {
            Policy::Skip => CatchUp::Skip,
            Policy::One => CatchUp::One,
            Policy::Each => CatchUp::Each(args.catch_up_limit),
        })?;
    if let Some(max_attempts) = args.max_attempts {
        schedule.max_attempts(max_attempts)?;
    }
    let queue = args.file.open(&args.queue, |_| Ok(()))?;
    if args.replace {
        queue.replace_schedule(&schedule)?;
    } else {
        queue.add_schedule(&schedule)?;
    }
    let added = queue
        .schedules()?
        .into_iter()
        .find(|info| info.schedule().name() == args.name)
        .ok_or_else(|| Failure::new(format!("schedule {:?} vanished meanwhile", args.name)))?;
    if json {
        print_json(&schedule_json(&added, &args.queue)?)?;
    } else {
        print(format!(
            "{} schedule {:?} in queue {:?}: next slot {} ({})",
            if args.replace { "stored" } else { "added" },
            args.name,
            args.queue,
            rfc3339(added.next_slot_unix_ms()),
            relative_time(added.next_slot_unix_ms())
        ))?;
    }
    Ok(Outcome::Done)
}

fn run_list(args: ListArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    let schedules = queue.schedules()?;
    if json {
        let listed = schedules
            .iter()
            .map(|info| schedule_json(info, &args.queue))
            .collect::<Result<Vec<_>, _>>()?;
        return print_json(&json!(listed)).map(|()| Outcome::Done);
    }
    if schedules.is_empty() {
        print(format!("queue {:?} has no schedules", args.queue))?;
        return Ok(Outcome::Done);
    }
    let mut rows = table(&["NAME", "SPEC", "NEXT SLOT", "CATCH-UP", "STATE", "PAYLOAD"]);
    for info in &schedules {
        let schedule = info.schedule();
        add_row(
            &mut rows,
            vec![
                schedule.name().to_owned(),
                spec_text(schedule),
                format!(
                    "{} ({})",
                    rfc3339(info.next_slot_unix_ms()),
                    relative_time(info.next_slot_unix_ms())
                ),
                catch_up_text(schedule.catch_up_policy()),
                (if info.paused() { "paused" } else { "active" }).to_owned(),
                schedule.payload().to_owned(),
            ],
        );
    }
    print_table(&rows)?;
    Ok(Outcome::Done)
}

/// Runs `call` on each named schedule; those that do not exist are named
/// on standard error and the others are still done.
fn run_names(
    args: NamesArgs,
    json: bool,
    done: &str,
    call: fn(&Queue, &str) -> tq::Result<()>,
) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    let (mut changed, mut refused) = (Vec::new(), Vec::new());
    for name in &args.names {
        match call(&queue, name) {
            Ok(()) => changed.push(name.clone()),
            Err(err) if err.kind() == tq::ErrorKind::InvalidArgument => {
                eprintln!("tq: {err}");
                refused.push(name.clone());
            }
            Err(err) => return Err(err.into()),
        }
    }
    if json {
        print_json(&json!({ "queue": args.queue, done: changed, "refused": refused }))?;
    } else if !changed.is_empty() {
        print(format!(
            "{done} {} in queue {:?}",
            changed
                .iter()
                .map(|name| format!("{name:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            args.queue
        ))?;
    }
    if refused.is_empty() {
        Ok(Outcome::Done)
    } else {
        Err(Failure::new(format!(
            "{} of {} schedules were not found in queue {:?}",
            refused.len(),
            args.names.len(),
            args.queue
        )))
    }
}

/// `0 2 * * * (Europe/Paris)`, or `every 30s`.
pub fn spec_text(schedule: &Schedule) -> String {
    match schedule.spec() {
        ScheduleSpec::Cron(expression) => format!("{expression} ({})", schedule.time_zone_name()),
        ScheduleSpec::Every(interval) => format!("every {}", humantime::format_duration(*interval)),
    }
}

pub fn catch_up_text(policy: CatchUp) -> String {
    match policy {
        CatchUp::Skip => "skip".to_owned(),
        CatchUp::One => "one".to_owned(),
        CatchUp::Each(limit) => format!("each (up to {limit})"),
    }
}

/// A schedule as `--json` shows it, its payload the stored JSON itself.
fn schedule_json(info: &ScheduleInfo, queue: &str) -> Result<serde_json::Value, Failure> {
    let schedule = info.schedule();
    let payload: serde_json::Value = serde_json::from_str(schedule.payload()).map_err(|err| {
        Failure::new(format!(
            "schedule {:?}: the stored payload is not JSON: {err}",
            schedule.name()
        ))
    })?;
    let (cron, every_ms) = match schedule.spec() {
        ScheduleSpec::Cron(expression) => (Some(expression.clone()), None),
        ScheduleSpec::Every(interval) => (None, Some(interval.as_millis() as u64)),
    };
    let (catch_up, catch_up_limit) = match schedule.catch_up_policy() {
        CatchUp::Skip => ("skip", None),
        CatchUp::One => ("one", None),
        CatchUp::Each(limit) => ("each", Some(limit)),
    };
    Ok(json!({
        "queue": queue,
        "name": schedule.name(),
        "cron": cron,
        "every_ms": every_ms,
        "time_zone": schedule.time_zone_name(),
        "payload": payload,
        "priority": schedule.task_priority(),
        "max_attempts": schedule.task_max_attempts(),
        "catch_up": catch_up,
        "catch_up_limit": catch_up_limit,
        "paused": info.paused(),
        "next_slot_unix_ms": info.next_slot_unix_ms(),
        "next_slot": rfc3339(info.next_slot_unix_ms()),
    }))
}
