//! The `tq` command: inspect, repair and work a tq queue file from the
//! shell. Each subcommand lives in its own module; `output` holds what they
//! share (opening a file, tables, JSON, errors).

mod admin;
mod backup;
mod control;
mod list;
mod output;
mod push;
mod sample;
mod schedule;
mod serve;
mod stats;
mod work;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

use output::{Failure, Outcome};

const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  done
  1  error (the message is on standard error)
  2  usage error (a bad option or argument)
  3  nothing to do: `work --until-empty` found no task, `retry --all-dead` found no dead task

Every command takes the queue file (or a postgres:// URL) first; `-`
stands for $TQ_DATABASE_URL, which keeps a password out of `ps` and the
shell's history (`stats`, `list`, `purge`, `recover`, `checkpoint`: the
file may be left out too). Messages never show a URL's password. Commands
that act on one queue take --queue NAME (default: \"default\") and name it
in what they print; `stats`, `show`, `wait` and `recover` look at every
queue in the file unless --queue is given.";

/// Inspect, repair and work a tq queue file.
#[derive(Parser)]
#[command(name = "tq", after_help = EXIT_STATUS_HELP)]
struct Cli {
    /// Print JSON for scripts instead of tables and sentences.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Count tasks by state in each queue, with the oldest ready task's age
    /// and the size of the write-ahead log.
    #[command(after_help = "\
Examples:
  tq stats jobs.db
  tq stats jobs.db --queue emails --json
  tq stats jobs.db --watch 2s     # refresh every 2 s, with pushed/finished/dead rates")]
    Stats(stats::Args),

    /// Push one task given as an argument, or one task per line of
    /// standard input.
    #[command(after_help = "\
Standard input is pushed in batches (--batch lines each), each batch all or
nothing; blank lines are skipped. A line that is not JSON stops the import
with its line number; the batches before it stay stored.

Examples:
  tq push jobs.db '{\"file\": \"a.mp4\"}'
  tq push jobs.db '{\"invoice\": 1042}' --unique-key invoice:1042 --priority 10
  tq push jobs.db '{\"report\": \"daily\"}' --after 17 18   # once tasks 17 and 18 are done
  tq push jobs.db '{\"order\": 7}' --group customer:42      # one at a time per customer
  tq push jobs.db --delay 10m < tasks.jsonl
  ls *.wav | jq -R -c '{file: .}' | tq push jobs.db")]
    Push(push::Args),

    /// Show a page of tasks in one state.
    #[command(after_help = "\
Examples:
  tq list jobs.db --state dead
  tq list jobs.db --state pending --limit 100 --after 4200
  tq list jobs.db --state dead --json | jq -r '.[].id'")]
    List(list::ListArgs),

    /// Show one task whole: its state, attempts, last failure, payload,
    /// progress and result.
    #[command(after_help = "\
Examples:
  tq show jobs.db 42
  tq show jobs.db 42 --json | jq .payload")]
    Show(list::ShowArgs),

    /// Wait for a task to end, and show it as it ended.
    #[command(after_help = "\
Exit status 0 when the task is done (its result, if its worker stored one,
is shown), 1 when it ended dead or cancelled, 3 when the timeout passed
first. A task finished without a result by a worker that keeps no history
is deleted at once: a wait begun later has nothing to wait for, and tq
says so; a wait begun before shows it done, without a result, once it is
gone (as it does a task cancelled or purged meanwhile without history).

Examples:
  tq wait jobs.db 42
  tq wait jobs.db 42 --timeout 10m --json | jq .result")]
    Wait(list::WaitArgs),

    /// Put dead tasks back to pending, with all their attempts ahead of them.
    #[command(after_help = "\
Examples:
  tq retry jobs.db 17 23
  tq retry jobs.db --all-dead --queue emails")]
    Retry(admin::RetryArgs),

    /// Cancel tasks: out of line at once, or, when leased, never delivered
    /// again.
    #[command(after_help = "\
A pending, delayed or dead task leaves the line at once (kept as cancelled,
with the reason, by workers that keep history). A leased task is never
delivered again; the worker holding it is told at once if it watches for
it, else at its next heartbeat or finish (`tq work` watches, and stops the
command at once: SIGTERM, then SIGKILL 10 s later). A done
task cannot be cancelled.

Examples:
  tq cancel jobs.db 17 23 --reason 'customer closed the account'
  tq cancel jobs.db 42 --queue emails")]
    Cancel(control::CancelArgs),

    /// Pause a queue for every worker: pulls find nothing, pushes are kept.
    #[command(after_help = "\
Workers waiting for a task keep waiting and go on once the queue is resumed
(or its pause runs out). The pause is stored in the file, so it holds for
every process and survives restarts.

Examples:
  tq pause jobs.db --queue emails
  tq pause jobs.db --for 30m")]
    Pause(control::PauseArgs),

    /// Limit how many tasks of a queue are leased at once, or claimed per
    /// window, by every worker.
    #[command(after_help = "\
The limit holds across every process and machine on the file (or
PostgreSQL schema), checked inside each claim. A worker whose lease expired
holds no slot; tasks already leased beyond a lower limit keep their leases.

A rate limit allows at most CLAIMS deliveries in any window, across every
worker, with no coordinator; a worker finds nothing while the window's
claims are spent.

Examples:
  tq limit jobs.db 4 --queue api-calls
  tq limit jobs.db --rate 10/1s --queue api-calls
  tq limit jobs.db --max-pending-per-key 1000 --queue reports
  tq limit jobs.db --none --queue api-calls")]
    Limit(control::LimitArgs),

    /// Set or show the weight of a fairness key of a queue.
    #[command(after_help = "\
A queue whose pushes name fairness keys (tq push --fair-key) shares its
deliveries between the keys with ready tasks, in proportion to their
weights (default 1). Setting a weight, or a key's cap on its pending
tasks (--max-pending), makes the queue fair. SQLite only.

Examples:
  tq weight jobs.db tenant:7 2 --queue reports
  tq weight jobs.db tenant:7 --max-pending 5000 --queue reports
  tq weight jobs.db tenant:7 --queue reports")]
    Weight(control::WeightArgs),

    /// Send an event under a key: the task that has waited longest for it
    /// takes it, or it is kept for the first task that waits.
    #[command(after_help = "\
Examples:
  tq signal jobs.db payment:42 '{\"amount\": 10}'
  tq signal jobs.db approval:7 true --queue reviews --retention 1d")]
    Signal(control::SignalArgs),

    /// Resume a paused queue.
    #[command(after_help = "\
Example:
  tq resume jobs.db --queue emails")]
    Resume(control::ResumeArgs),

    /// Periodic schedules: add, list, rm, pause, resume.
    #[command(
        subcommand,
        after_help = "\
A schedule enqueues a task at each slot of a cron expression or interval,
exactly once however many workers run; workers enqueue due slots by
themselves.

Examples:
  tq schedule add jobs.db nightly '{\"report\": \"daily\"}' --cron '0 2 * * *' --tz Europe/Paris
  tq schedule list jobs.db
  tq schedule pause jobs.db nightly"
    )]
    Schedule(schedule::Command),

    /// Delete old done tasks, or dead or cancelled tasks.
    #[command(after_help = "\
Done tasks are kept only by workers that keep history (`tq work --keep-history`).

Examples:
  tq purge jobs.db --done-older-than 7d
  tq purge jobs.db --dead --older-than 30d
  tq purge jobs.db --dead
  tq purge jobs.db --cancelled --older-than 7d")]
    Purge(admin::PurgeArgs),

    /// Take back tasks whose lease expired or whose worker process is gone.
    #[command(after_help = "\
Tasks held by live processes are untouched, so this is safe at any time.
Without --queue every queue of the file is looked at; each one's count is
printed.

Examples:
  tq recover jobs.db
  tq recover jobs.db --queue emails")]
    Recover(admin::RecoverArgs),

    /// Copy the write-ahead log into the database and truncate it.
    #[command(after_help = "\
A good call at a quiet moment. Copying the file is no backup, even after a
checkpoint (a commit during the copy tears it): use `tq backup`.

Example:
  tq checkpoint jobs.db")]
    Checkpoint(admin::FileArgs),

    /// Copy a queue file in use into a new file, consistently.
    #[command(after_help = "\
The copy holds every task acknowledged before the backup began, whatever
producers and workers do meanwhile (SQLite's VACUUM INTO, in one read
transaction), and is flushed to the disk. DEST must not exist. Copying the
file with cp is no backup: a commit during the copy tears it, and commits
still in the -wal file are missing. For PostgreSQL, use pg_dump.

Example:
  tq backup jobs.db /backups/jobs-$(date +%F).db")]
    Backup(backup::Args),

    /// Run a command for each task, with N workers in parallel.
    #[command(after_help = "\
Each task's payload goes to the command's standard input, and its id and
attempt number to TQ_TASK_ID and TQ_TASK_ATTEMPTS (TQ_QUEUE names the
queue). Exit status 0 finishes the task; anything else fails it with the
status and the last lines of the command's standard error as the reason,
and the task is retried after a back-off or, after its last attempt, dead.
The lease is extended while the command runs. Tasks of workers that died
are recovered at start. At the end a summary goes to standard output (with
--json, its last line; the commands' own output goes there too, unless
--result keeps each command's output, one JSON text, as its task's result:
see `tq wait`).

Ctrl-C (or SIGTERM) stops taking tasks and waits for the running commands;
a second one kills them and leaves their tasks to `tq recover`. Commands
run in their own process group, so Ctrl-C at a terminal reaches only tq.

Examples:
  tq work jobs.db -j 4 -- sh -c 'ffmpeg -nostdin -i \"$(jq -r .file)\" \"out/$TQ_TASK_ID.opus\"'
  tq work jobs.db --until-empty --timeout 10m -- ./process-one.sh
  tq work jobs.db --result -- sh -c 'jq -c \"{pages: .pages}\"'
  tq work jobs.db -j 8 --max-tasks 1000 --lease 2m -- python3 handle.py")]
    Work(work::Args),

    /// Serve a web dashboard, a JSON API and Prometheus metrics for the file.
    #[command(after_help = "\
Pages: / (every queue, updating itself), /queues/NAME (tasks by state),
/queues/NAME/dead (dead tasks by reason), /tasks/ID. JSON: /api/queues,
/api/queues/NAME/tasks?state=&after=&limit=, /api/tasks/ID?queue=. Metrics:
/metrics. The dashboard is read-only unless --allow-actions is given; each
action is a POST with the page's CSRF token, refused from other sites.
Allowing actions, or listening beyond loopback, requires a token (--token,
or one made up and printed once). Read-only on loopback without --token,
any local process can read every page and payload. Pages never show the
database's password.

Examples:
  tq serve jobs.db
  tq serve jobs.db --allow-actions
  tq serve jobs.db --listen 0.0.0.0:7070 --token \"$(cat token.txt)\"")]
    Serve(serve::Args),
}

fn main() -> ExitCode {
    let version = format!("{} (library {})", env!("CARGO_PKG_VERSION"), tq::VERSION);
    let matches = Cli::command().version(version).get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    let result = match cli.command {
        Command::Stats(args) => stats::run(args, cli.json),
        Command::Push(args) => push::run(args, cli.json),
        Command::List(args) => list::run_list(args, cli.json),
        Command::Show(args) => list::run_show(args, cli.json),
        Command::Wait(args) => list::run_wait(args, cli.json),
        Command::Retry(args) => admin::run_retry(args, cli.json),
        Command::Cancel(args) => control::run_cancel(args, cli.json),
        Command::Pause(args) => control::run_pause(args, cli.json),
        Command::Resume(args) => control::run_resume(args, cli.json),
        Command::Limit(args) => control::run_limit(args, cli.json),
        Command::Weight(args) => control::run_weight(args, cli.json),
        Command::Signal(args) => control::run_signal(args, cli.json),
        Command::Schedule(command) => schedule::run(command, cli.json),
        Command::Purge(args) => admin::run_purge(args, cli.json),
        Command::Recover(args) => admin::run_recover(args, cli.json),
        Command::Checkpoint(args) => admin::run_checkpoint(args, cli.json),
        Command::Backup(args) => backup::run(args, cli.json),
        Command::Work(args) => work::run(args, cli.json),
        Command::Serve(args) => serve::run(args),
    };
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Nothing) => ExitCode::from(3),
        // A reader that stopped reading (`tq list ... | head`) is no error.
        Err(Failure::ClosedOutput) => ExitCode::SUCCESS,
        Err(Failure::Message(message)) => {
            eprintln!("tq: {message}");
            ExitCode::FAILURE
        }
    }
}
