//! `tq list`: a page of tasks in one state; `tq show`: one task whole.

use clap::ValueEnum;
use tq::{Queue, TaskInfo, TaskState, DEFAULT_QUEUE};

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
    let first = args.queue.as_deref().unwrap_or(DEFAULT_QUEUE);
    let handle = args.file.open_existing(first, |_| Ok(()))?;
    let names = match &args.queue {
        Some(name) => vec![name.clone()],
        None => handle.queue_names()?,
    };
    for name in names {
        let found = if name == first {
            find(&handle, args.id)?
        } else {
            find(&args.file.open(&name, |_| Ok(()))?, args.id)?
        };
        if let Some(task) = found {
            show(&task, &name, json)?;
            return Ok(Outcome::Done);
        }
    }
    Err(Failure::new(match &args.queue {
        Some(name) => format!("{}: queue {name:?} has no task {}", args.file, args.id),
        None => format!("{}: no task {}", args.file, args.id),
    }))
}

/// The task `id` of `queue`: for each state, the first task listed after
/// `id - 1` is the one if it has that id.
pub fn find(queue: &Queue, id: i64) -> Result<Option<TaskInfo>, Failure> {
    for state in [
        TaskState::Pending,
        TaskState::Leased,
        TaskState::Dead,
        TaskState::Done,
        TaskState::Cancelled,
    ] {
        let page = queue.list(state, id.saturating_sub(1), 1)?;
        if let Some(task) = page.into_iter().next().filter(|task| task.id() == id) {
            return Ok(Some(task));
        }
    }
    Ok(None)
}

fn show(task: &TaskInfo, queue: &str, json: bool) -> Result<(), Failure> {
    if json {
        return print(task_json(task, queue)?);
    }
    let run_at = task.run_at_unix_ms();
    let fields = [
        ("id", task.id().to_string()),
        ("queue", queue.to_owned()),
        ("state", state_name(task.state()).to_owned()),
        (
            "attempts",
            format!("{} of {}", task.attempts(), task.max_attempts()),
        ),
        ("priority", task.priority().to_string()),
        (
            "run at",
            format!("{} ({})", rfc3339(run_at), relative_time(run_at)),
        ),
    ];
    for (name, value) in fields {
        print(format!("{name:<12}{value}"))?;
    }
    if !task.waiting_for().is_empty() {
        let ids: Vec<String> = task.waiting_for().iter().map(i64::to_string).collect();
        print(format!("{:<12}{}", "waits for", ids.join(" ")))?;
    }
    if let Some(reason) = task.last_error() {
        print(format!("last reason\n{reason}"))?;
    }
    print(format!("payload\n{}", task.payload()))
}
