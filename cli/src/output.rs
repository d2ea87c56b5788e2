//! What the commands share: where the queue is and opening it, errors and
//! outcomes, tables sized to the terminal, JSON, and how times are shown.

use std::fmt::Display;
use std::io::{self, IsTerminal, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comfy_table::{presets, ContentArrangement, Row, Table};
use serde::de::IgnoredAny;
use serde_json::{json, Value};
use tq::{AttemptInfo, OpenOptions, Queue, TaskInfo, TaskState};

/// How a command that did its work ended.
pub enum Outcome {
    /// It did what was asked: exit status 0.
    Done,
    /// There was nothing to do (no task to work, no dead task to retry):
    /// exit status 3, so that scripts can tell.
    Nothing,
}

/// Why a command stopped: exit status 1 with the message, unless standard
/// output was closed by its reader.
#[derive(Debug)]
pub enum Failure {
    /// A message for standard error.
    Message(String),
    /// Standard output's reader went away (`tq list ... | head`).
    ClosedOutput,
}

impl Failure {
    /// A failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Failure::Message(message.into())
    }
}

impl From<tq::Error> for Failure {
    fn from(err: tq::Error) -> Self {
        Failure::Message(err.to_string())
    }
}

impl From<io::Error> for Failure {
    fn from(err: io::Error) -> Self {
        if err.kind() == io::ErrorKind::BrokenPipe {
            Failure::ClosedOutput
        } else {
            Failure::Message(format!("writing the output: {err}"))
        }
    }
}

/// The result of a command.
pub type CommandResult = Result<Outcome, Failure>;

/// The environment variable that gives the queue file or database URL
/// when the command line says `-` (or, where it may, leaves it out), so
/// that a password shows neither in `ps` nor in the shell's history.
pub const DATABASE_URL_ENV: &str = "TQ_DATABASE_URL";

/// Where the queue is, as the command line (or `TQ_DATABASE_URL`) gives
/// it. It is shown (`Display`) without any password: only [`Location::open`]
/// and [`Location::open_existing`] see the password.
#[derive(Clone)]
pub struct Location {
    given: String,
    shown: String,
}

impl Location {
    /// Reads the location argument: `-` stands for `$TQ_DATABASE_URL`.
    pub fn parse(arg: &str) -> Result<Location, String> {
        let given = if arg == "-" {
            match std::env::var(DATABASE_URL_ENV) {
                Ok(url) if !url.is_empty() => url,
                _ => {
                    return Err(format!(
                        "`-` (or no queue file) means ${DATABASE_URL_ENV}, which is not set"
                    ))
                }
            }
        } else {
            arg.to_owned()
        };
        let shown = tq::redacted_location(&given);
        Ok(Location { given, shown })
    }

    /// Whether this is a PostgreSQL database rather than a file.
    pub fn is_postgres(&self) -> bool {
        tq::Backend::of(&self.given) == tq::Backend::Postgres
    }

    /// The path of the file, for commands that work on SQLite files only.
    pub fn file_path(&self) -> &str {
        &self.given
    }

    /// Opens `queue` in the queue file, which must exist: only `tq push`
    /// creates a file. `configure` sets options beyond the queue's name. A
    /// PostgreSQL database is opened as it is (tq creates its schema there).
    pub fn open_existing(
        &self,
        queue: &str,
        configure: impl FnOnce(&mut OpenOptions) -> tq::Result<()>,
    ) -> Result<Queue, Failure> {
        if self.is_postgres() {
            return self.open(queue, configure);
        }
        match std::fs::metadata(&self.given) {
            Ok(_) => self.open(queue, configure),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Err(Failure::new(format!(
                "{self}: no such file (`tq push` creates a queue file)"
            ))),
            Err(err) => Err(Failure::new(format!("{self}: {err}"))),
        }
    }

    /// Opens `queue` in the queue file, creating the file if needed.
    pub fn open(
        &self,
        queue: &str,
        configure: impl FnOnce(&mut OpenOptions) -> tq::Result<()>,
    ) -> Result<Queue, Failure> {
        let mut options = OpenOptions::new();
        options.queue(queue)?;
        configure(&mut options)?;
        Queue::open(&self.given, &options).map_err(|err| Failure::new(format!("{self}: {err}")))
    }
}

impl Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// Checks a queue name given on the command line, so that a bad one is a
/// usage error.
pub fn parse_queue_name(name: &str) -> Result<String, String> {
    OpenOptions::new()
        .queue(name)
        .map(|_| name.to_owned())
        .map_err(|err| err.to_string())
}

/// Parses a duration such as `30s`, `10m`, `1h 30m` or `250ms`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text).map_err(|err| format!("{err} (examples: 30s, 10m, 2h, 250ms)"))
}

/// Parses a duration that must not be zero.
pub fn parse_positive_duration(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        Duration::ZERO => Err("must be longer than zero".to_owned()),
        duration => Ok(duration),
    }
}

/// Writes `text` and a newline to standard output.
pub fn print(text: impl Display) -> Result<(), Failure> {
    let mut out = io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()?;
    Ok(())
}

/// Writes `value` as one line of JSON to standard output.
pub fn print_json(value: &Value) -> Result<(), Failure> {
    print(value)
}

/// A table without borders, its columns two spaces apart, as wide as the
/// terminal (or `$COLUMNS`) when the output's width is known: each row is
/// one line, cut with `…` where it would not fit.
pub fn table(header: &[&str]) -> Table {
    let mut table = Table::new();
    table.load_style(presets::NOTHING);
    let mut header = Row::from(header.to_vec());
    header.max_height(1);
    table.set_header(header);
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    if let Some(width) = output_width() {
        table
            .set_width(width)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_truncation_indicator("…");
    }
    table
}

/// Adds a row that stays on one line, with line breaks inside cells shown
/// as spaces.
pub fn add_row(table: &mut Table, cells: Vec<String>) {
    let mut row = Row::from(
        cells
            .into_iter()
            .map(|cell| cell.split_whitespace().collect::<Vec<_>>().join(" ")),
    );
    row.max_height(1);
    table.add_row(row);
}

/// Prints a table, each line without trailing blanks.
pub fn print_table(table: &Table) -> Result<(), Failure> {
    for line in table.lines() {
        print(line.trim_end())?;
    }
    Ok(())
}

/// The width to fit tables to: the terminal's, or `$COLUMNS` when standard
/// output is not a terminal; `None` (no limit) when neither is known.
fn output_width() -> Option<u16> {
    if io::stdout().is_terminal() {
        if let Some((_, columns)) = console::Term::stdout().size_checked() {
            return Some(columns);
        }
    }
    std::env::var("COLUMNS").ok()?.parse().ok()
}

/// The word for a state, as the command line spells it.
pub fn state_name(state: TaskState) -> &'static str {
    match state {
        TaskState::Pending => "pending",
        TaskState::Leased => "leased",
        TaskState::Done => "done",
        TaskState::Dead => "dead",
        TaskState::Cancelled => "cancelled",
    }
}

/// Now, in milliseconds since the Unix epoch.
pub fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

/// A duration for people, to the second and in at most two units:
/// `0s`, `42s`, `3m 20s`, `2days 4h`.
pub fn short_duration(duration: Duration) -> String {
    let seconds = Duration::from_secs(duration.as_secs());
    let text = humantime::format_duration(seconds).to_string();
    text.split(' ').take(2).collect::<Vec<_>>().join(" ")
}

/// A time relative to now: `in 5m`, `3s ago`, `now`.
pub fn relative_time(unix_ms: i64) -> String {
    let delta = unix_ms - now_unix_ms();
    if delta.abs() < 1000 {
        "now".to_owned()
    } else if delta > 0 {
        format!("in {}", short_duration(Duration::from_millis(delta as u64)))
    } else {
        format!(
            "{} ago",
            short_duration(Duration::from_millis(delta.unsigned_abs()))
        )
    }
}

/// A time as RFC 3339 in UTC, to the millisecond.
pub fn rfc3339(unix_ms: i64) -> String {
    let time = UNIX_EPOCH + Duration::from_millis(unix_ms.max(0) as u64);
    humantime::format_rfc3339_millis(time).to_string()
}

/// A task as `--json` shows it: one JSON object whose `payload` is the
/// stored JSON text itself (key order, numbers and inner spacing as
/// pushed; surrounding blanks dropped).
pub fn task_json(task: &TaskInfo, queue: &str) -> Result<String, Failure> {
    // tq stores only JSON texts, so this fails only on a damaged file.
    let stored = [
        ("payload", Some(task.payload())),
        ("progress", task.progress()),
        ("result", task.result()),
    ];
    let step_outputs = task
        .steps()
        .iter()
        .map(|step| ("step's output", Some(step.output())));
    for (what, text) in stored.into_iter().chain(step_outputs) {
        if let Some(text) = text {
            serde_json::from_str::<IgnoredAny>(text).map_err(|err| {
                Failure::new(format!(
                    "task {}: the stored {what} is not JSON: {err}",
                    task.id()
                ))
            })?;
        }
    }
    let mut fields = json!({
        "id": task.id(),
        "queue": queue,
        "state": state_name(task.state()),
        "attempts": task.attempts(),
        "max_attempts": task.max_attempts(),
        "priority": task.priority(),
        "run_at_unix_ms": task.run_at_unix_ms(),
        "run_at": rfc3339(task.run_at_unix_ms()),
        "created_at_unix_ms": task.created_at_unix_ms(),
        "claimed_at_unix_ms": task.claimed_at_unix_ms(),
        "finished_at_unix_ms": task.finished_at_unix_ms(),
        "expires_at_unix_ms": task.expires_at_unix_ms(),
        "deadline_unix_ms": task.deadline_unix_ms(),
        "last_error": task.last_error(),
    });
    // Only for a blocked task: what it still waits for.
    if !task.waiting_for().is_empty() {
        fields["waiting_for"] = json!(task.waiting_for());
    }
    // Only for a task of an ordered group.
    if let Some(group) = task.group() {
        fields["group"] = json!(group);
    }
    // Only for a snapshot with ended attempts, oldest first.
    if !task.ended_attempts().is_empty() {
        fields["ended_attempts"] = attempts_json(task.ended_attempts());
    }
    // The fields' object without its closing brace, then the stored JSON
    // texts as they are.
    let fields = fields.to_string();
    let mut json = fields.strip_suffix('}').unwrap_or(&fields).to_owned();
    for (what, text) in stored {
        json.push_str(&format!(",\"{what}\":{}", text.map_or("null", str::trim)));
    }
    // Only for a task with steps: each as recorded, its output as stored.
    if !task.steps().is_empty() {
        let steps: Vec<String> = task
            .steps()
            .iter()
            .map(|step| {
                let fields = json!({
                    "name": step.name(),
                    "recorded_at_unix_ms": step.recorded_at_unix_ms(),
                })
                .to_string();
                let fields = fields.strip_suffix('}').unwrap_or(&fields);
                format!("{fields},\"output\":{}}}", step.output().trim())
            })
            .collect();
        json.push_str(&format!(",\"steps\":[{}]", steps.join(",")));
    }
    json.push('}');
    Ok(json)
}

/// A task's ended attempts as `--json` and the dashboard's API show them.
pub fn attempts_json(attempts: &[AttemptInfo]) -> serde_json::Value {
    attempts
        .iter()
        .map(|attempt| {
            json!({
                "attempt": attempt.attempt(),
                "outcome": attempt.outcome().as_str(),
                "reason": attempt.reason(),
                "holder_id": attempt.holder_id(),
                "holder_pid": attempt.holder_pid(),
                "started_at_unix_ms": attempt.started_at_unix_ms(),
                "ended_at_unix_ms": attempt.ended_at_unix_ms(),
                "duration_ms": attempt.duration_ms(),
            })
        })
        .collect()
}
