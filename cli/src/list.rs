//! `tq list`: a page of tasks in one state; `tq show`: one task whole.

use std::time::Duration;

use clap::ValueEnum;
use tq::{AttemptInfo, Queue, TaskInfo, TaskState, DEFAULT_QUEUE};

use crate::output::{
    self, parse_queue_name, print, relative_time, rfc3339, state_name, task_json, CommandResult,
    Failure, Location, Outcome,
};

/// A task state as the command line names it.
#[derive(Clone, Copy, ValueEnum)]
pub enum State {
    Pending,
    Leased,
    Dead,
    Done,
    Cancelled,
}

impl From<State> for TaskState {
    fn from(state: State) -> Self {
        match state {
            State::Pending => TaskState::Pending,
            State::Leased => TaskState::Leased,
            State::Dead => TaskState::Dead,
            State::Done => TaskState::Done,
            State::Cancelled => TaskState::Cancelled,
        }
    }
}

/// Arguments of `tq list`.
#[derive(clap::Args)]
pub struct ListArgs {
    /// The queue file or PostgreSQL URL; `-` or none: $TQ_DATABASE_URL.
    #[arg(default_value = "-", hide_default_value = true, value_parser = Location::parse)]
    file: Location,

    /// The queue to list.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,

    /// Which tasks to list.
    #[arg(long, value_enum, default_value = "pending")]
    state: State,

    /// At most this many tasks.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    limit: u64,

    /// Only tasks with ids above this one (the last id of the previous page).
    #[arg(long, default_value_t = 0)]
    after: i64,
}

/// Runs `tq list`.
pub fn run_list(args: ListArgs, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |_| Ok(()))?;
    let state = TaskState::from(args.state);
    let tasks = queue.list(state, args.after, args.limit as usize)?;
    if json {
        let tasks = tasks
            .iter()
            .map(|task| task_json(task, &args.queue))
            .collect::<Result<Vec<_>, _>>()?;
        print(format!("[{}]", tasks.join(",")))?;
        return Ok(Outcome::Done);
    }
    if tasks.is_empty() {
        eprintln!(
            "no {} tasks in queue {:?}{}",
            state_name(state),
            args.queue,
            if args.after > 0 {
                format!(" after id {}", args.after)
            } else {
                String::new()
            }
        );
        return Ok(Outcome::Done);
    }
    let mut table = output::table(&[
        "ID",
        "STATE",
        "ATTEMPTS",
        "RUN AT",
        "LAST REASON",
        "PAYLOAD",
    ]);
    for task in &tasks {
        output::add_row(
            &mut table,
            vec![
                task.id().to_string(),
                state_name(task.state()).to_owned(),
                format!("{}/{}", task.attempts(), task.max_attempts()),
                relative_time(task.run_at_unix_ms()),
                task.last_error().unwrap_or("").to_owned(),
                task.payload().to_owned(),
            ],
        );
    }
    output::print_table(&table)?;
    if tasks.len() as u64 == args.limit {
        if let Some(last) = tasks.last() {
            eprintln!("more may follow: add --after {}", last.id());
        }
    }
    Ok(Outcome::Done)
}

/// Arguments of `tq show`.
#[derive(clap::Args)]
pub struct ShowArgs {
    /// The queue file or PostgreSQL URL; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The task's id.
    id: i64,

    /// Look only in this queue (default: every queue in the file).
    #[arg(long, short, value_parser = parse_queue_name)]
    queue: Option<String>,
}

/// Runs `tq show`.
pub fn run_show(args: ShowArgs, json: bool) -> CommandResult {
    let (_, name, task) = locate(&args.file, args.queue.as_deref(), args.id)?;
    show(&task, &name, json)?;
    Ok(Outcome::Done)
}

/// Task `id` in `queue`, or in whichever queue of the file has it: a
/// handle on its queue, the queue's name and the task as it is now.
fn locate(
    file: &Location,
    queue: Option<&str>,
    id: i64,
) -> Result<(Queue, String, TaskInfo), Failure> {
    let first = queue.unwrap_or(DEFAULT_QUEUE);
    let mut handle = Some(file.open_existing(first, |_| Ok(()))?);
    let names = match queue {
        Some(name) => vec![name.to_owned()],
        None => handle.as_ref().map_or(Ok(Vec::new()), Queue::queue_names)?,
    };
    for name in names {
        let handle = match handle.take().filter(|_| name == first) {
            Some(handle) => handle,
            None => file.open(&name, |_| Ok(()))?,
        };
        if let Some(task) = handle.task(id)? {
            return Ok((handle, name, task));
        }
    }
    Err(Failure::new(match queue {
        Some(name) => format!("{file}: queue {name:?} has no task {id}"),
        None => format!("{file}: no task {id}"),
    }))
}

/// Arguments of `tq wait`.
#[derive(clap::Args)]
pub struct WaitArgs {
    /// The queue file or PostgreSQL URL; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The task's id.
    id: i64,

    /// Look only in this queue (default: every queue in the file).
    #[arg(long, short, value_parser = parse_queue_name)]
    queue: Option<String>,

    /// Give up after this long (exit status 3).
    #[arg(long, default_value = "1h", value_parser = output::parse_duration)]
    timeout: Duration,
}

/// Runs `tq wait`: shows the task once it has ended; fails when it ended
/// dead or cancelled.
pub fn run_wait(args: WaitArgs, json: bool) -> CommandResult {
    let (handle, name, _) = locate(&args.file, args.queue.as_deref(), args.id)?;
    let Some(task) = handle.wait_for(args.id, args.timeout, None)? else {
        eprintln!(
            "task {} has not ended after {}",
            args.id,
            humantime::format_duration(args.timeout)
        );
        return Ok(Outcome::Nothing);
    };
    show(&task, &name, json)?;
    match task.state() {
        TaskState::Done => Ok(Outcome::Done),
        state => Err(Failure::new(format!(
            "task {} ended {}",
            args.id,
            state_name(state)
        ))),
    }
}

pub fn show(task: &TaskInfo, queue: &str, json: bool) -> Result<(), Failure> {
    if json {
        return print(task_json(task, queue)?);
    }
    let time = |at: i64| format!("{} ({})", rfc3339(at), relative_time(at));
    let fields = [
        ("id", task.id().to_string()),
        ("queue", queue.to_owned()),
        ("state", state_name(task.state()).to_owned()),
        (
            "attempts",
            format!("{} of {}", task.attempts(), task.max_attempts()),
        ),
        ("priority", task.priority().to_string()),
        ("pushed", time(task.created_at_unix_ms())),
        ("run at", time(task.run_at_unix_ms())),
    ];
    for (name, value) in fields {
        print(format!("{name:<12}{value}"))?;
    }
    if let Some(expiry) = task.expires_at_unix_ms() {
        print(format!("{:<12}{}", "expires", time(expiry)))?;
    }
    if let Some(deadline) = task.deadline_unix_ms() {
        print(format!("{:<12}{}", "deadline", time(deadline)))?;
    }
    if let Some(claimed) = task.claimed_at_unix_ms() {
        print(format!("{:<12}{}", "claimed", time(claimed)))?;
    }
    if let Some(ended) = task.finished_at_unix_ms() {
        print(format!("{:<12}{}", "ended", time(ended)))?;
    }
    if let Some(group) = task.group() {
        print(format!("{:<12}{group}", "group"))?;
    }
    if !task.waiting_for().is_empty() {
        let ids: Vec<String> = task.waiting_for().iter().map(i64::to_string).collect();
        print(format!("{:<12}{}", "waits for", ids.join(" ")))?;
    }
    if let Some(reason) = task.last_error() {
        print(format!("last reason\n{reason}"))?;
    }
    print(format!("payload\n{}", task.payload()))?;
    if let Some(progress) = task.progress() {
        print(format!("progress\n{progress}"))?;
    }
    if !task.steps().is_empty() {
        print("steps")?;
        for step in task.steps() {
            let at = time(step.recorded_at_unix_ms());
            print(format!("  {}  {at}\n  {}", step.name(), step.output()))?;
        }
    }
    if !task.ended_attempts().is_empty() {
        print("attempts")?;
        print(attempts_table(task.ended_attempts()))?;
    }
    if let Some(result) = task.result() {
        print(format!("result\n{result}"))?;
    }
    Ok(())
}

/// A task's ended attempts as a table, oldest first: number, outcome,
/// start, duration, holder and reason.
fn attempts_table(attempts: &[AttemptInfo]) -> String {
    let rows = attempts.iter().map(|attempt| {
        let holder = match (attempt.holder_id(), attempt.holder_pid()) {
            (Some(id), Some(pid)) => format!("{id} (pid {pid})"),
            (Some(id), None) => id.to_string(),
            (None, _) => "-".to_owned(),
        };
        let started = attempt.started_at_unix_ms().map_or("-".to_owned(), rfc3339);
        let duration = attempt.duration_ms().map_or("-".to_owned(), |ms| {
            humantime::format_duration(Duration::from_millis(ms as u64)).to_string()
        });
        format!(
            "  {:<3} {:<14} {:<25} {:<10} {:<20} {}",
            attempt.attempt(),
            attempt.outcome().as_str(),
            started,
            duration,
            holder,
            attempt.reason().unwrap_or("")
        )
    });
    let header = format!(
        "  {:<3} {:<14} {:<25} {:<10} {:<20} {}",
        "#", "outcome", "started", "took", "holder", "reason"
    );
    std::iter::once(header)
        .chain(rows)
        .collect::<Vec<_>>()
        .join("\n")
}
