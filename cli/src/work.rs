//! `tq work`: a pool of workers, each pulling a task, running the command
//! with the payload on its standard input, and finishing or failing the
//! task by the command's exit status. The lease is extended while the
//! command runs; a cancellation of its task stops it at once (SIGTERM,
//! then SIGKILL after a grace period). A pull refused for a while (a busy
//! file, a PostgreSQL server restarting) is tried again. The first SIGINT
//! or SIGTERM stops the pulls and waits for the running commands; a second
//! one kills them.

use std::io::{self, IsTerminal, Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use tq::{
    CancelToken, ErrorKind, Failed, PullOptions, Queue, Stop, Task, TaskState, DEFAULT_QUEUE,
    MAX_PAYLOAD_LEN,
};

use crate::output::{
    parse_duration, parse_positive_duration, parse_queue_name, print, print_json, CommandResult,
    Failure, Location, Outcome,
};

/// How long one pull waits before it looks again (a signal ends it sooner).
const PULL_WAIT: Duration = Duration::from_secs(60);

/// A call refused for a while ([`refused_for_a_while`]) is tried again
/// after these waits, doubling ([`Backoff`]), rather than stopping the pool.
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(50);
const MAX_RETRY_WAIT: Duration = Duration::from_secs(2);

/// Whether `err` refuses a call only for a while: the file busy, or a
/// PostgreSQL server restarting or a connection cut.
fn refused_for_a_while(err: &tq::Error) -> bool {
    matches!(err.kind(), ErrorKind::Busy | ErrorKind::Io)
}

/// The waits before each new try of a call refused for a while:
/// [`FIRST_RETRY_WAIT`], doubling up to [`MAX_RETRY_WAIT`].
struct Backoff(Duration);

impl Backoff {
    fn new() -> Backoff {
        Backoff(FIRST_RETRY_WAIT)
    }

    /// The wait before the next try (the one after waits twice as long).
    fn next_wait(&mut self) -> Duration {
        let wait = self.0;
        self.0 = (wait * 2).min(MAX_RETRY_WAIT);
        wait
    }
}

/// The longest pause between two looks at a running command.
const MAX_POLL: Duration = Duration::from_millis(50);

/// How much of a command's standard error is kept for the failure reason.
const TAIL_BYTES: usize = 4096;

/// How many of its last lines make the failure reason.
const TAIL_LINES: usize = 20;

/// Arguments of `tq work`.
#[derive(clap::Args)]
pub struct Args {
    /// The queue file or PostgreSQL URL; `-`: $TQ_DATABASE_URL.
    #[arg(value_parser = Location::parse)]
    file: Location,

    /// The queue to work.
    #[arg(long, short, default_value = DEFAULT_QUEUE, value_parser = parse_queue_name)]
    queue: String,

    /// How many commands run at once.
    #[arg(short = 'j', long = "jobs", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    jobs: u32,

    /// How long a task stays held without a heartbeat; it is extended every
    /// third of this while its command runs.
    #[arg(long, default_value = "30s", value_parser = parse_positive_duration)]
    lease: Duration,

    /// Kill a command that runs longer than this, and fail its task.
    #[arg(long, value_parser = parse_positive_duration)]
    timeout: Option<Duration>,

    /// Stop after taking this many tasks.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_tasks: Option<u64>,

    /// Stop when no task is ready, instead of waiting for more.
    #[arg(long, alias = "exit-when-empty")]
    until_empty: bool,

    /// Keep finished tasks as done (see `tq list --state done`, `tq purge`)
    /// instead of deleting them.
    #[arg(long)]
    keep_history: bool,

    /// Keep each command's standard output, one JSON text, as its task's
    /// result (see `tq wait`, `tq show`); a command that exits 0 with
    /// output that is not JSON fails its task.
    #[arg(long)]
    result: bool,

    /// The pause before a failed task is retried, doubling with each
    /// attempt (0s retries at once).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    retry_delay: Duration,

    /// The longest pause before a retry.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    retry_delay_max: Duration,

    /// The command to run for each task.
    #[arg(value_name = "COMMAND")]
    program: String,

    /// The command's arguments.
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    arguments: Vec<String>,
}

/// Runs `tq work`.
pub fn run(args: Args, json: bool) -> CommandResult {
    let queue = args.file.open_existing(&args.queue, |options| {
        options.keep_history(args.keep_history);
        options.retry_backoff(args.retry_delay, args.retry_delay_max.max(args.retry_delay))?;
        Ok(())
    })?;
    let mut pull = PullOptions::new();
    pull.lease(args.lease)?;
    if !args.until_empty {
        pull.wait(PULL_WAIT)?;
    }
    let mut signals = Signals::new([SIGINT, SIGTERM])
        .map_err(|err| Failure::new(format!("listening for signals: {err}")))?;
    let recovered = queue.recover()?;
    if recovered > 0 {
        eprintln!(
            "tq: took back {recovered} tasks in queue {:?} from workers that are gone",
            args.queue
        );
    }
    let pool = Pool {
        queue,
        args: &args,
        pull,
        bar: progress_bar(),
        stopping: AtomicBool::new(false),
        killing: AtomicBool::new(false),
        workers_done: AtomicBool::new(false),
        taken: AtomicU64::new(0),
        running: AtomicU64::new(0),
        tally: Tally::default(),
        error: Mutex::new(None),
    };
    let signal_handle = signals.handle();
    thread::scope(|scope| {
        scope.spawn(|| {
            for (count, _) in signals.forever().enumerate() {
                if count == 0 {
                    pool.stop_on_signal();
                } else {
                    pool.kill();
                }
            }
        });
        if !pool.bar.is_hidden() {
            scope.spawn(|| pool.show_progress());
        }
        let workers: Vec<_> = (0..args.jobs)
            .map(|_| scope.spawn(|| pool.work()))
            .collect();
        for worker in workers {
            if worker.join().is_err() {
                pool.fatal("a worker thread panicked".to_owned());
            }
        }
        pool.workers_done.store(true, Ordering::SeqCst);
        signal_handle.close();
    });
    pool.finish(json)
}

/// Counts of what happened to the tasks taken.
#[derive(Default)]
struct Tally {
    /// Finished: the command exited with status 0.
    done: AtomicU64,
    /// Failed, to be retried after a pause.
    failed: AtomicU64,
    /// Failed on their last attempt: now dead.
    dead: AtomicU64,
    /// Their lease was lost (taken back by `tq recover` or by another
    /// worker after it expired): the command was stopped, the task left.
    lost: AtomicU64,
    /// Their commands were killed by a second signal: left leased, for
    /// `tq recover`.
    killed: AtomicU64,
    /// Cancelled (`tq cancel`) while their command ran: the command was
    /// stopped, or had ended, and the task is over.
    cancelled: AtomicU64,
}

impl Tally {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::SeqCst);
    }

    fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::SeqCst)
    }
}

struct Pool<'a> {
    queue: Queue,
    args: &'a Args,
    pull: PullOptions,
    /// Progress on standard error when it is a terminal; hidden otherwise.
    bar: ProgressBar,
    /// No more pulls: a signal, `--max-tasks` reached, or an error.
    stopping: AtomicBool,
    /// A second signal: kill the running commands.
    killing: AtomicBool,
    workers_done: AtomicBool,
    /// Tasks taken so far (claimed, or about to be: see `reserve`).
    taken: AtomicU64,
    running: AtomicU64,
    tally: Tally,
    /// The first error that stopped the pool.
    error: Mutex<Option<String>>,
}

/// How a command's run ended.
enum Ended {
    /// The exit status, the tail of standard error, and with `--result`
    /// standard output (or why it could not be read whole).
    Exited(ExitStatus, String, Option<io::Result<Vec<u8>>>),
    TimedOut(Duration, String),
    LeaseLost,
    Killed,
    Cancelled,
}

/// A command started for a task, and what tq reads of it.
struct Running {
    child: Child,
    /// Its process group, which signals reach.
    group: libc::pid_t,
    /// The end of its standard error, for a failure's reason.
    tail: Arc<Mutex<Vec<u8>>>,
    /// Disconnected once its standard error is closed.
    closed: mpsc::Receiver<()>,
    /// Its standard output, when it is the task's result.
    output: Option<mpsc::Receiver<io::Result<Vec<u8>>>>,
}

/// How long a command whose task was cancelled has, after SIGTERM, to end
/// before SIGKILL.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

impl Pool<'_> {
    /// One worker: pull, run, repeat until told to stop or, with
    /// `--until-empty`, until no task is ready.
    fn work(&self) {
        let mut backoff = Backoff::new();
        while !self.stopping.load(Ordering::SeqCst) {
            if !self.reserve() {
                self.stop();
                break;
            }
            match self.queue.pull(&self.pull) {
                Ok(Some(task)) => {
                    backoff = Backoff::new();
                    self.run(task)
                }
                Ok(None) => {
                    self.taken.fetch_sub(1, Ordering::SeqCst);
                    if self.args.until_empty {
                        break;
                    }
                }
                Err(err) if refused_for_a_while(&err) => {
                    self.taken.fetch_sub(1, Ordering::SeqCst);
                    let wait = backoff.next_wait();
                    self.warn(format!(
                        "pulling a task: {err}; trying again in {} ms",
                        wait.as_millis()
                    ));
                    self.pause(wait);
                }
                Err(err) => {
                    self.taken.fetch_sub(1, Ordering::SeqCst);
                    if err.kind() != ErrorKind::Interrupted {
                        self.fatal(format!("pulling a task: {err}"));
                    }
                    break;
                }
            }
        }
    }

    /// Waits `wait`, or less once the pool stops.
    fn pause(&self, wait: Duration) {
        let until = Instant::now() + wait;
        while !self.stopping.load(Ordering::SeqCst) && Instant::now() < until {
            thread::sleep(MAX_POLL.min(until - Instant::now()));
        }
    }

    /// Counts a task about to be taken; false once `--max-tasks` are taken.
    fn reserve(&self) -> bool {
        let taken = self.taken.fetch_add(1, Ordering::SeqCst);
        if self.args.max_tasks.is_some_and(|max| taken >= max) {
            self.taken.fetch_sub(1, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Ends pulls, waiting ones included.
    fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.queue.interrupt();
    }

    fn stop_on_signal(&self) {
        self.stop();
        let running = self.running.load(Ordering::SeqCst);
        if running > 0 {
            self.warn(format!(
                "stopping: waiting for {running} running command{} (signal again to kill {})",
                plural(running),
                if running == 1 { "it" } else { "them" }
            ));
        }
    }

    fn kill(&self) {
        self.killing.store(true, Ordering::SeqCst);
        self.stop();
    }

    /// Stops the pool with an error, after the running commands end.
    fn fatal(&self, message: String) {
        let mut error = self
            .error
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        error.get_or_insert(message);
        drop(error);
        self.stop();
    }

    fn warn(&self, message: String) {
        self.bar.suspend(|| eprintln!("tq: {message}"));
    }

    /// Runs the command for `task`, then finishes or fails it.
    fn run(&self, task: Task) {
        self.running.fetch_add(1, Ordering::SeqCst);
        let ended = self.execute(&task);
        self.running.fetch_sub(1, Ordering::SeqCst);
        let id = task.id();
        match ended {
            Ok(Ended::Exited(status, _, output)) if status.success() => {
                let finished = match &output {
                    None => self.retrying(|| self.queue.finish(task.receipt())),
                    Some(Err(err)) => {
                        return self.fail(&task, format!("its output could not be read: {err}"))
                    }
                    Some(Ok(output)) => {
                        let text = String::from_utf8_lossy(output);
                        let result = Some(text.trim()).filter(|text| !text.is_empty());
                        self.retrying(|| {
                            self.queue
                                .finish_with_result(task.receipt(), result.unwrap_or("null"))
                        })
                    }
                };
                match finished {
                    Ok(()) => Tally::add(&self.tally.done),
                    Err(err)
                        if matches!(
                            err.kind(),
                            ErrorKind::InvalidJson | ErrorKind::InvalidArgument
                        ) =>
                    {
                        self.fail(&task, format!("its output is no result: {err}"))
                    }
                    Err(err) => self.lost_or_fatal(id, err),
                }
            }
            Ok(Ended::Exited(status, tail, _)) => {
                self.fail(&task, with_tail(describe(status), &tail))
            }
            Ok(Ended::TimedOut(limit, tail)) => self.fail(
                &task,
                with_tail(
                    format!("timed out after {}", humantime::format_duration(limit)),
                    &tail,
                ),
            ),
            Ok(Ended::LeaseLost) => {
                self.warn(format!(
                    "task {id}: lease lost while its command ran; the command was killed"
                ));
                Tally::add(&self.tally.lost);
            }
            Ok(Ended::Killed) => Tally::add(&self.tally.killed),
            Ok(Ended::Cancelled) => {
                self.warn(format!(
                    "task {id}: cancelled while its command ran; the command was stopped"
                ));
                Tally::add(&self.tally.cancelled);
            }
            Err(err) => {
                let reason = format!("could not run {:?}: {err}", self.args.program);
                self.fail(&task, reason.clone());
                self.fatal(reason);
            }
        }
    }

    fn fail(&self, task: &Task, reason: String) {
        match self.retrying(|| self.queue.fail(task.receipt(), &reason)) {
            Ok(Failed::Dead) => Tally::add(&self.tally.dead),
            Ok(Failed::RetryAt(_)) => Tally::add(&self.tally.failed),
            Err(err) => self.lost_or_fatal(task.id(), err),
        }
    }

    /// Makes `call`, a finish or fail, again while it is refused for a
    /// while (Busy, Io), for up to one lease: the task is still held.
    fn retrying<T>(&self, mut call: impl FnMut() -> tq::Result<T>) -> tq::Result<T> {
        let give_up = Instant::now() + self.args.lease;
        let mut backoff = Backoff::new();
        loop {
            match call() {
                Err(err) if refused_for_a_while(&err) && Instant::now() < give_up => {
                    let wait = backoff.next_wait();
                    self.warn(format!("{err}; trying again in {} ms", wait.as_millis()));
                    thread::sleep(wait);
                }
                outcome => return outcome,
            }
        }
    }

    /// A finish or fail that did not go through: a lost lease or a
    /// cancelled task is counted, anything else stops the pool.
    fn lost_or_fatal(&self, id: i64, err: tq::Error) {
        if err.kind() == ErrorKind::Cancelled {
            self.warn(format!("task {id}: cancelled while its command ran"));
            Tally::add(&self.tally.cancelled);
        } else if err.kind() == ErrorKind::NotHeld {
            self.warn(format!(
                "task {id}: its lease was lost before the command ended; \
                 another worker may run it again"
            ));
            Tally::add(&self.tally.lost);
        } else {
            self.fatal(format!("task {id}: {err}"));
        }
    }

    /// Starts the command with the task's payload on its standard input,
    /// and watches it and the task's cancellation.
    fn execute(&self, task: &Task) -> io::Result<Ended> {
        let mut child = Command::new(&self.args.program)
            .args(&self.args.arguments)
            .env("TQ_TASK_ID", task.id().to_string())
            .env("TQ_TASK_ATTEMPTS", task.attempts().to_string())
            .env("TQ_QUEUE", &self.args.queue)
            .stdin(Stdio::piped())
            .stdout(if self.args.result {
                Stdio::piped()
            } else {
                Stdio::inherit()
            })
            .stderr(Stdio::piped())
            // Its own process group: Ctrl-C at a terminal reaches tq only,
            // and a kill reaches the command's own children too.
            .process_group(0)
            .spawn()?;
        let group = child.id() as libc::pid_t;
        if let Some(mut stdin) = child.stdin.take() {
            let payload = task.payload().to_owned();
            // A command that does not read its input closes the pipe: that
            // write error is no concern of tq's.
            thread::spawn(move || stdin.write_all(payload.as_bytes()));
        }
        let tail = Arc::new(Mutex::new(Vec::new()));
        let (closed_sender, closed) = mpsc::channel::<()>();
        if let Some(stderr) = child.stderr.take() {
            let tail = Arc::clone(&tail);
            let bar = self.bar.clone();
            thread::spawn(move || {
                let _closed_when_done = closed_sender;
                copy_stderr(stderr, &tail, &bar);
            });
        }
        let output = child.stdout.take().map(|stdout| {
            let (sender, received) = mpsc::channel();
            thread::spawn(move || {
                let mut output = Vec::new();
                // One more byte than a result may have: too long is refused.
                let read = stdout
                    .take(MAX_PAYLOAD_LEN as u64 + 1)
                    .read_to_end(&mut output);
                let _ = sender.send(read.map(|_| output));
            });
            received
        });
        let watch_ended = CancelToken::new();
        let cancelled = AtomicBool::new(false);
        thread::scope(|scope| {
            scope.spawn(|| self.watch_cancellation(task, &watch_ended, &cancelled));
            let command = Running {
                child,
                group,
                tail,
                closed,
                output,
            };
            let ended = self.supervise(task, command, &cancelled);
            watch_ended.cancel();
            ended
        })
    }

    /// Sets `cancelled` as soon as the task's cancellation is recorded, so
    /// that the command is stopped at once rather than at the next
    /// heartbeat; returns when `done` is cancelled or the delivery ends.
    fn watch_cancellation(&self, task: &Task, done: &CancelToken, cancelled: &AtomicBool) {
        loop {
            match self
                .queue
                .wait_for_cancellation(task.receipt(), PULL_WAIT, Some(done))
            {
                Ok(None) => {}
                Ok(Some(Stop::Cancelled)) => return cancelled.store(true, Ordering::SeqCst),
                // The heartbeat reports a lost lease and the errors.
                Ok(Some(Stop::NotHeld)) | Err(_) => return,
            }
        }
    }

    /// Watches the running command: heartbeats (at once when `cancelled`
    /// is set), the timeout, a second signal.
    fn supervise(
        &self,
        task: &Task,
        command: Running,
        cancelled: &AtomicBool,
    ) -> io::Result<Ended> {
        let Running {
            mut child,
            group,
            tail,
            closed,
            output,
        } = command;
        let started = Instant::now();
        let beat_every = self.args.lease / 3;
        let mut next_beat = started + beat_every;
        let mut pause = Duration::from_millis(1);
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if self.killing.load(Ordering::SeqCst) {
                kill_group(group);
                child.wait()?;
                return Ok(Ended::Killed);
            }
            let now = Instant::now();
            if let Some(limit) = self.args.timeout {
                if now.duration_since(started) >= limit {
                    kill_group(group);
                    child.wait()?;
                    let _ = closed.recv_timeout(Duration::from_secs(1));
                    return Ok(Ended::TimedOut(limit, tail_text(&tail)));
                }
            }
            if cancelled.swap(false, Ordering::SeqCst) {
                // The heartbeat finds the cancellation and stops the command.
                next_beat = now;
            }
            if now >= next_beat {
                match self.queue.extend(task.receipt(), self.args.lease) {
                    Ok(()) => {}
                    Err(err) if err.kind() == ErrorKind::NotHeld => {
                        kill_group(group);
                        child.wait()?;
                        return Ok(Ended::LeaseLost);
                    }
                    Err(err) if err.kind() == ErrorKind::Cancelled => {
                        stop_group(group, &mut child)?;
                        return Ok(Ended::Cancelled);
                    }
                    Err(err) => {
                        self.warn(format!("task {}: extending its lease: {err}", task.id()))
                    }
                }
                next_beat = now + beat_every;
            }
            thread::sleep(pause);
            pause = (pause * 2).min(MAX_POLL);
        };
        // The rest of standard error, unless a process the command left
        // behind keeps it open; standard output likewise.
        let _ = closed.recv_timeout(Duration::from_secs(1));
        let output = output.map(|received| {
            received
                .recv_timeout(Duration::from_secs(1))
                .unwrap_or_else(|_| {
                    Err(io::Error::other(
                        "its standard output stayed open after it exited",
                    ))
                })
        });
        Ok(Ended::Exited(status, tail_text(&tail), output))
    }

    /// Keeps the progress bar's counts current until the workers are done.
    fn show_progress(&self) {
        while !self.workers_done.load(Ordering::SeqCst) {
            let tally = &self.tally;
            let done = Tally::get(&tally.done);
            let failed = Tally::get(&tally.failed) + Tally::get(&tally.dead);
            let processed = done + failed + Tally::get(&tally.lost) + Tally::get(&tally.cancelled);
            let running = self.running.load(Ordering::SeqCst);
            if let Ok(pending) = self.queue.count(TaskState::Pending) {
                self.bar.set_length(processed + running + pending);
            }
            self.bar.set_position(processed);
            self.bar
                .set_message(format!("{done} done, {failed} failed, {running} running"));
            thread::sleep(Duration::from_millis(200));
        }
        self.bar.finish_and_clear();
    }

    /// Prints the summary and says how the command ends.
    fn finish(&self, json: bool) -> CommandResult {
        let tally = &self.tally;
        if json {
            print_json(&json!({
                "done": Tally::get(&tally.done),
                "failed": Tally::get(&tally.failed),
                "dead": Tally::get(&tally.dead),
                "lost": Tally::get(&tally.lost),
                "killed": Tally::get(&tally.killed),
                "cancelled": Tally::get(&tally.cancelled),
            }))?;
        } else {
            let mut summary = format!(
                "{} done, {} failed (retried later), {} dead",
                Tally::get(&tally.done),
                Tally::get(&tally.failed),
                Tally::get(&tally.dead)
            );
            for (count, what) in [
                (Tally::get(&tally.lost), "lost their lease"),
                (Tally::get(&tally.killed), "killed"),
                (Tally::get(&tally.cancelled), "cancelled"),
            ] {
                if count > 0 {
                    summary.push_str(&format!(", {count} {what}"));
                }
            }
            print(summary)?;
        }
        let error = self
            .error
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(message) = error.as_ref() {
            return Err(Failure::new(message.clone()));
        }
        let killed = Tally::get(&tally.killed);
        if killed > 0 {
            return Err(Failure::new(format!(
                "stopped by a second signal: {killed} command{} killed, {} task{} left leased \
                 for `tq recover {}`",
                plural(killed),
                if killed == 1 { "its" } else { "their" },
                plural(killed),
                self.args.file
            )));
        }
        let stopped_by_signal = self.stopping.load(Ordering::SeqCst);
        if self.args.until_empty && self.taken.load(Ordering::SeqCst) == 0 && !stopped_by_signal {
            eprintln!("tq: no task ready in queue {:?}", self.args.queue);
            return Ok(Outcome::Nothing);
        }
        Ok(Outcome::Done)
    }
}

/// Copies a command's standard error to tq's, keeping its last bytes.
fn copy_stderr(mut stderr: impl Read, tail: &Mutex<Vec<u8>>, bar: &ProgressBar) {
    let mut buffer = [0; 8192];
    while let Ok(read) = stderr.read(&mut buffer) {
        if read == 0 {
            break;
        }
        let chunk = &buffer[..read];
        // tq's own standard error may be closed; the tail is still kept.
        bar.suspend(|| io::stderr().write_all(chunk).ok());
        let mut tail = tail.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        tail.extend_from_slice(chunk);
        let excess = tail.len().saturating_sub(TAIL_BYTES);
        tail.drain(..excess);
    }
}

/// The last lines of a command's standard error, trimmed.
fn tail_text(tail: &Mutex<Vec<u8>>) -> String {
    let tail = tail.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let text = String::from_utf8_lossy(&tail);
    let lines: Vec<&str> = text.trim_end().lines().collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..]
        .join("\n")
        .trim()
        .to_owned()
}

/// How a command ended, in words.
fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

/// `head`, followed by the command's standard error when it said anything.
fn with_tail(head: String, tail: &str) -> String {
    if tail.is_empty() {
        head
    } else {
        format!("{head}: {tail}")
    }
}

/// Sends SIGKILL to a command's process group (the command and what it
/// started). Its leader is not yet reaped, so the id still names it.
fn kill_group(group: libc::pid_t) {
    signal_group(group, libc::SIGKILL);
}

/// Sends `signal` to a command's process group.
fn signal_group(group: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe {
        libc::kill(-group, signal);
    }
}

/// Asks a command's process group to end (SIGTERM), and kills it if its
/// leader has not ended after [`CANCEL_GRACE`]; reaps the leader.
fn stop_group(group: libc::pid_t, child: &mut Child) -> io::Result<()> {
    signal_group(group, libc::SIGTERM);
    let deadline = Instant::now() + CANCEL_GRACE;
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        thread::sleep(Duration::from_millis(10));
    }
    kill_group(group);
    child.wait()?;
    Ok(())
}

fn plural(count: u64) -> &'static str {
    if count == 1 {
        ""
    } else {
        "s"
    }
}

/// A bar of tasks processed out of those known (processed, running and
/// pending) on standard error when it is a terminal; hidden otherwise.
fn progress_bar() -> ProgressBar {
    if !io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} {msg} ({elapsed})") {
        bar.set_style(style);
    }
    bar
}
