//! `tq push`: one task from the command line, or one task per line of
//! standard input, pushed in batches that are each all or nothing.

use std::fs::File;
use std::io::{self, BufRead, IsTerminal};
use std::os::fd::AsFd;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use tq::{ParentFailure, PushOptions, Pushed, Queue, DEFAULT_QUEUE};

use crate::output::{
    parse_duration, parse_queue_name, print, print_json, CommandResult, Failure, Location, Outcome,
};

/// Arguments of `tq push`.
#[derive(clap::Args)]
pub struct Args {
    /// The queue file, created if it does not exist, or PostgreSQL URL;
    /// `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The task's payload, one JSON text; without it, one task per line of
    /// standard input.
    #[arg(value_name = "JSON")]
    payload: Option<String>,

    /// The queue to push to.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,

    /// Make the tasks ready this long from now (e.g. 30s, 10m, 2h).
    #[arg(long, value_parser = parse_duration)]
    delay: Option<Duration>,

    /// Never start the tasks' first delivery once this long from now has
    /// passed (e.g. 30s, 10m): a pull ends such a task as dead, "expired".
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    expire_after: Option<Duration>,

    /// Start no delivery of the tasks, first or retry, once this long from
    /// now has passed: a pull ends such a task as dead, "deadline passed".
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    deadline: Option<Duration>,

    /// Higher priorities are pulled first (any 32-bit integer).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    priority: i32,

    /// Deliveries a task gets before a failure makes it dead (default: 25).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    max_attempts: Option<u32>,

    /// Push nothing if a pending or leased task of the queue holds this key
    /// (only with a JSON argument).
    #[arg(long, requires = "payload")]
    unique_key: Option<String>,

    /// Keep the unique key reserved this long after the task is done.
    #[arg(long, requires = "unique_key", value_parser = parse_duration)]
    unique_for: Option<Duration>,

    /// If a pending task (not being delivered) holds the unique key, give it
    /// this payload instead of pushing nothing.
    #[arg(long, requires = "unique_key")]
    replace_pending: bool,

    /// If a pending task (not being delivered) holds the unique key, move
    /// its run time to this push's (now, or --delay from now), but never
    /// later than this long after it was first pushed (e.g. 1m).
    #[arg(long, value_name = "MAX", requires = "unique_key", value_parser = parse_duration)]
    debounce: Option<Duration>,

    /// Wait for these tasks of the queue: the new tasks run only once each
    /// is done.
    #[arg(long, value_name = "ID", num_args = 1.., value_parser = clap::value_parser!(i64).range(1..))]
    after: Vec<i64>,

    /// Run the new tasks even if a task they wait for ends dead or
    /// cancelled (by default they are cancelled with it).
    #[arg(long, requires = "after")]
    run_anyway: bool,

    /// Put the tasks in this ordered group of the queue: its tasks run one
    /// at a time (or --group-max at a time), in push order, while other
    /// groups proceed.
    #[arg(long, value_name = "KEY")]
    group: Option<String>,

    /// How many tasks of the group run at once (1 to 1000).
    #[arg(long, value_name = "K", requires = "group", default_value_t = 1)]
    group_max: u32,

    /// File the tasks under this fairness key (a tenant, say): the queue
    /// then shares its deliveries between the keys with ready tasks, by
    /// their weights (see `tq weight`).
    #[arg(long, value_name = "KEY")]
    fair_key: Option<String>,

    /// Lines of standard input stored per transaction.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    batch: u64,
}

/// Runs `tq push`.
pub fn run(args: Args, json: bool) -> CommandResult {
    let options = push_options(&args)?;
    let queue = args.file.open(&args.queue, |_| Ok(()))?;
    match &args.payload {
        Some(payload) => push_one(&queue, payload, &options, &args, json),
        None => push_lines(&queue, &options, args.batch as usize, json),
    }
}

fn push_options(args: &Args) -> Result<PushOptions, Failure> {
    let mut options = PushOptions::new();
    options.priority(args.priority);
    if let Some(delay) = args.delay {
        options.delay(delay)?;
    }
    if let Some(after) = args.expire_after {
        options.expire_after(after)?;
    }
    if let Some(after) = args.deadline {
        options.deadline_after(after)?;
    }
    if let Some(max_attempts) = args.max_attempts {
        options.max_attempts(max_attempts)?;
    }
    if let Some(key) = &args.unique_key {
        options.unique_key(key)?;
    }
    if let Some(window) = args.unique_for {
        options.unique_for(window)?;
    }
    options.replace_pending(args.replace_pending);
    if let Some(max) = args.debounce {
        options.debounce(max)?;
    }
    options.after(&args.after)?;
    if args.run_anyway {
        options.on_parent_failure(ParentFailure::RunAnyway);
    }
    if let Some(group) = &args.group {
        options.group(group, args.group_max)?;
    }
    if let Some(key) = &args.fair_key {
        options.fair_key(key)?;
    }
    Ok(options)
}

fn push_one(
    queue: &Queue,
    payload: &str,
    options: &PushOptions,
    args: &Args,
    json: bool,
) -> CommandResult {
    let pushed = queue.push(payload, options)?;
    if json {
        print_json(&json!({
            "queue": queue.name(),
            "id": pushed.id(),
            "duplicate": matches!(pushed, Pushed::Duplicate(_)),
            "merged": matches!(pushed, Pushed::Merged(_)),
        }))?;
    } else {
        match pushed {
            Pushed::Stored(id) => print(format!("pushed task {id} to queue {:?}", queue.name()))?,
            Pushed::Duplicate(id) => print(format!(
                "pushed nothing to queue {:?}: task {id} holds the key {:?}",
                queue.name(),
                args.unique_key.as_deref().unwrap_or_default()
            ))?,
            Pushed::Merged(id) => print(format!(
                "merged into task {id} of queue {:?}, which holds the key {:?}",
                queue.name(),
                args.unique_key.as_deref().unwrap_or_default()
            ))?,
        }
    }
    Ok(Outcome::Done)
}

/// Pushes standard input, one task per line, `batch` lines per transaction.
fn push_lines(queue: &Queue, options: &PushOptions, batch: usize, json: bool) -> CommandResult {
    let stdin = io::stdin();
    if stdin.is_terminal() {
        eprintln!("reading tasks from standard input, one JSON text per line; Ctrl-D ends");
    }
    let progress = progress_bar(&stdin);
    let mut import = Import {
        queue,
        options,
        payloads: Vec::with_capacity(batch),
        lines: Vec::with_capacity(batch),
        pushed: 0,
    };
    let mut bytes_read = 0;
    let mut line = String::new();
    let mut line_number = 0;
    let mut reader = stdin.lock();
    loop {
        line.clear();
        line_number += 1;
        let read = reader.read_line(&mut line).map_err(|err| {
            let problem = match err.kind() {
                io::ErrorKind::InvalidData => "not UTF-8".to_owned(),
                _ => format!("reading standard input: {err}"),
            };
            import.stopped_at(line_number, &problem)
        })?;
        if read == 0 {
            break;
        }
        bytes_read += read as u64;
        let payload = line.strip_suffix('\n').unwrap_or(&line);
        let payload = payload.strip_suffix('\r').unwrap_or(payload);
        if payload.trim().is_empty() {
            continue;
        }
        import.payloads.push(payload.to_owned());
        import.lines.push(line_number);
        if import.payloads.len() == batch {
            import.flush()?;
            progress.set_position(bytes_read);
            progress.set_message(format!("{} tasks", import.pushed));
        }
    }
    import.flush()?;
    progress.finish_and_clear();
    if json {
        print_json(&json!({ "queue": queue.name(), "pushed": import.pushed }))?;
    } else {
        print(format!(
            "pushed {} task{} to queue {:?}",
            import.pushed,
            if import.pushed == 1 { "" } else { "s" },
            queue.name()
        ))?;
    }
    Ok(Outcome::Done)
}

/// Lines read but not yet stored, and how many were stored.
struct Import<'a> {
    queue: &'a Queue,
    options: &'a PushOptions,
    payloads: Vec<String>,
    /// The line number of each payload.
    lines: Vec<usize>,
    pushed: u64,
}

impl Import<'_> {
    /// Stores the batch, all or nothing.
    fn flush(&mut self) -> Result<(), Failure> {
        if self.payloads.is_empty() {
            return Ok(());
        }
        if let Err(err) = self.queue.push_batch(&self.payloads, self.options) {
            // The message starts with the bad payload's index in the batch.
            let (line, problem) = match bad_index(err.message()) {
                Some((index, problem)) if index < self.lines.len() => (self.lines[index], problem),
                _ => (self.lines[0], err.message()),
            };
            return Err(self.stopped_at(line, problem));
        }
        self.pushed += self.payloads.len() as u64;
        self.payloads.clear();
        self.lines.clear();
        Ok(())
    }

    /// The error for a problem at `line`, saying what was stored before it.
    fn stopped_at(&self, line: usize, problem: &str) -> Failure {
        let first_unstored = self.lines.first().copied().unwrap_or(line);
        let stored = match self.pushed {
            0 => "nothing was stored".to_owned(),
            pushed => format!(
                "the {pushed} task{} before line {first_unstored} were stored, nothing from it on",
                if pushed == 1 { "" } else { "s" }
            ),
        };
        Failure::new(format!("line {line}: {problem} ({stored})"))
    }
}

/// Splits a batch push's message `payload N: problem` into its parts.
fn bad_index(message: &str) -> Option<(usize, &str)> {
    let rest = message.strip_prefix("payload ")?;
    let (index, problem) = rest.split_once(": ")?;
    Some((index.parse().ok()?, problem))
}

/// A progress bar on standard error when it is a terminal: by bytes when
/// standard input is a file of known size, else a count. Hidden otherwise.
fn progress_bar(stdin: &io::Stdin) -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let size = stdin
        .as_fd()
        .try_clone_to_owned()
        .ok()
        .map(File::from)
        .and_then(|file| file.metadata().ok())
        .filter(|metadata| metadata.is_file())
        .map(|metadata| metadata.len());
    let bar = ProgressBar::with_draw_target(size, ProgressDrawTarget::stderr());
    let template = match size {
        Some(_) => "{bar:40} {bytes}/{total_bytes} {msg} ({eta} left)",
        None => "{spinner} {bytes} read, {msg}",
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar
}
