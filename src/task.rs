//! Tasks as the engine hands them out: one delivery ([`Task`]), or a stored
//! task seen from outside ([`TaskInfo`]); and what an operator sets for a
//! queue ([`Pause`], [`RateLimit`]).

use std::time::Duration;

use crate::attempts::AttemptInfo;

/// Proof of one delivery: the task id, the lease token drawn at claim
/// time, and the store (SQLite file, or PostgreSQL schema) it was claimed
/// from. Finishing with a receipt whose delivery is no longer current fails
/// with [`crate::ErrorKind::NotHeld`]; one from another store, with
/// [`crate::ErrorKind::InvalidArgument`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Receipt {
    pub(crate) id: i64,
    pub(crate) token: i64,
    /// The store's identity ([`crate::store::Store::store_id`]), set by the
    /// engine when it hands the task out.
    pub(crate) store: u128,
}

impl Receipt {
    /// The receipt of a delivery just claimed by a backend; the engine
    /// ties it to its store before handing it out.
    pub(crate) fn new(id: i64, token: i64) -> Receipt {
        Receipt {
            id,
            token,
            store: 0,
        }
    }

    /// The task's id.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The delivery's token: with the id, what names this delivery in SQL,
    /// to finish the task in the worker's own transaction (`tq_finish(id,
    /// token)` on SQLite, see [`crate::outbox`]; `tq.finish(id, token)` on
    /// PostgreSQL, see `docs/postgresql.md`).
    pub fn token(&self) -> i64 {
        self.token
    }
}

/// A claimed task, as returned by [`crate::Queue::pull`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task {
    pub(crate) receipt: Receipt,
    pub(crate) attempts: u32,
    pub(crate) max_attempts: u32,
    pub(crate) priority: i32,
    pub(crate) run_at_unix_ms: i64,
    pub(crate) last_error: Option<String>,
    pub(crate) payload: String,
    pub(crate) parents: Vec<i64>,
}

impl Task {
    /// The id given by [`crate::Queue::push`]; ids are never reused.
    pub fn id(&self) -> i64 {
        self.receipt.id
    }

    /// The JSON text exactly as pushed.
    pub fn payload(&self) -> &str {
        &self.payload
    }

    /// How many times the task has been claimed, this delivery included:
    /// 1 on the first delivery.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How many deliveries the task gets before a failure makes it dead.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The priority it was pushed with.
    pub fn priority(&self) -> i32 {
        self.priority
    }

    /// When it became ready, in milliseconds since the Unix epoch.
    pub fn run_at_unix_ms(&self) -> i64 {
        self.run_at_unix_ms
    }

    /// Why the previous delivery ended, when it failed or its lease was
    /// lost: the reason given to [`crate::Queue::fail`], or tq's own words.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// This delivery's receipt, for [`crate::Queue::finish`] and the other
    /// calls that act on a held task.
    pub fn receipt(&self) -> Receipt {
        self.receipt
    }

    /// The ids of the tasks it was pushed to wait for
    /// ([`crate::PushOptions::after`]), ascending: each has ended (done,
    /// or dead or cancelled for a task pushed to run anyway).
    pub fn parents(&self) -> &[i64] {
        &self.parents
    }
}

/// A stored task as [`crate::Queue::list`] shows it. It is not held: it is
/// a snapshot for monitoring and tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    pub(crate) id: i64,
    pub(crate) state: TaskState,
    pub(crate) attempts: u32,
    pub(crate) max_attempts: u32,
    pub(crate) priority: i32,
    pub(crate) run_at_unix_ms: i64,
    pub(crate) last_error: Option<String>,
    pub(crate) payload: String,
    pub(crate) result: Option<String>,
    pub(crate) progress: Option<String>,
    pub(crate) waiting_for: Vec<i64>,
    pub(crate) group: Option<String>,
    pub(crate) created_at_unix_ms: i64,
    pub(crate) claimed_at_unix_ms: Option<i64>,
    pub(crate) finished_at_unix_ms: Option<i64>,
    pub(crate) expires_at_unix_ms: Option<i64>,
    pub(crate) deadline_unix_ms: Option<i64>,
    pub(crate) steps: Vec<StepInfo>,
    pub(crate) ended_attempts: Vec<AttemptInfo>,
}

/// A step of a task as recorded ([`crate::Queue::record_step`]): its name,
/// its JSON output and when it was recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepInfo {
    pub(crate) name: String,
    pub(crate) output: String,
    pub(crate) recorded_at_unix_ms: i64,
}

impl StepInfo {
    /// The step's name, as the worker gave it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The JSON text the step recorded, exactly as given.
    pub fn output(&self) -> &str {
        &self.output
    }

    /// When it was recorded, in milliseconds since the Unix epoch (on the
    /// server's clock, on PostgreSQL).
    pub fn recorded_at_unix_ms(&self) -> i64 {
        self.recorded_at_unix_ms
    }
}

impl TaskInfo {
    /// The task's id.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// Its state when it was read.
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// How many times it has been claimed.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// How many deliveries it gets before a failure makes it dead.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// Its priority.
    pub fn priority(&self) -> i32 {
        self.priority
    }

    /// When it was or will be ready, in milliseconds since the Unix epoch.
    pub fn run_at_unix_ms(&self) -> i64 {
        self.run_at_unix_ms
    }

    /// Its expiry ([`crate::PushOptions::expire_after`]): the time, in
    /// milliseconds since the Unix epoch, from which its first delivery may
    /// no longer start; `None` if it has none (or a retry of the dead
    /// cleared it).
    pub fn expires_at_unix_ms(&self) -> Option<i64> {
        self.expires_at_unix_ms
    }

    /// Its deadline ([`crate::PushOptions::deadline_after`]): the time, in
    /// milliseconds since the Unix epoch, from which no delivery may start;
    /// `None` if it has none (or a retry of the dead cleared it).
    pub fn deadline_unix_ms(&self) -> Option<i64> {
        self.deadline_unix_ms
    }

    /// When it was pushed, in milliseconds since the Unix epoch.
    pub fn created_at_unix_ms(&self) -> i64 {
        self.created_at_unix_ms
    }

    /// When its last delivery was claimed, in milliseconds since the Unix
    /// epoch; `None` if it never was (or only before the file's schema
    /// kept claim times).
    pub fn claimed_at_unix_ms(&self) -> Option<i64> {
        self.claimed_at_unix_ms
    }

    /// When it ended done, dead or cancelled, in milliseconds since the
    /// Unix epoch; `None` until it has ended.
    pub fn finished_at_unix_ms(&self) -> Option<i64> {
        self.finished_at_unix_ms
    }

    /// Why its last delivery ended, if it failed or lost its lease.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The JSON text exactly as pushed.
    pub fn payload(&self) -> &str {
        &self.payload
    }

    /// The JSON result its finish stored
    /// ([`crate::Queue::finish_with_result`]), if any.
    pub fn result(&self) -> Option<&str> {
        self.result.as_deref()
    }

    /// The JSON progress its last heartbeat recorded
    /// ([`crate::Queue::extend_with_progress`]), if any: kept after the
    /// delivery ends, so a later delivery can see how far the last got.
    pub fn progress(&self) -> Option<&str> {
        self.progress.as_deref()
    }

    /// The steps its deliveries recorded ([`crate::Queue::record_step`]), in
    /// the order they were recorded. Only [`crate::Queue::task`] and
    /// [`crate::Queue::wait_for`] read them: a task in a list
    /// ([`crate::Queue::list`]) shows none.
    pub fn steps(&self) -> &[StepInfo] {
        &self.steps
    }

    /// Its deliveries that ended without finishing it (failed, lease taken
    /// back, cancelled while held), oldest first: the newest
    /// [`crate::ATTEMPTS_KEPT`]. Read as [`TaskInfo::steps`] are.
    pub fn ended_attempts(&self) -> &[AttemptInfo] {
        &self.ended_attempts
    }

    /// Whether it has ended: done, dead or cancelled.
    pub fn has_ended(&self) -> bool {
        matches!(
            self.state,
            TaskState::Done | TaskState::Dead | TaskState::Cancelled
        )
    }

    /// The ids of the tasks it still waits for, ascending: empty unless it
    /// is pending and blocked by tasks not yet ended.
    pub fn waiting_for(&self) -> &[i64] {
        &self.waiting_for
    }

    /// The key of the ordered group it was pushed to
    /// ([`crate::PushOptions::group`]), if any.
    pub fn group(&self) -> Option<&str> {
        self.group.as_deref()
    }
}

/// When a task was due, last claimed and, once done or dead, finished, as
/// [`crate::Queue::timings_since`] reads them: what the time it waited for
/// a worker and the time its last delivery ran are measured from. Times
/// are milliseconds since the Unix epoch, on the store's clock (the
/// server's, on PostgreSQL).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TaskTiming {
    pub(crate) id: i64,
    pub(crate) state: TaskState,
    pub(crate) attempts: u32,
    pub(crate) run_at_unix_ms: i64,
    pub(crate) claimed_at_unix_ms: i64,
    pub(crate) finished_at_unix_ms: Option<i64>,
}

impl TaskTiming {
    /// The task's id.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// [`TaskState::Leased`] (its delivery still running, or its
    /// cancellation waiting for it), [`TaskState::Done`] or
    /// [`TaskState::Dead`].
    pub fn state(&self) -> TaskState {
        self.state
    }

    /// Deliveries so far, the last one included: more than 1 when earlier
    /// ones failed or their lease ran out.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// When the task became due (pushed, or due again after a failure or
    /// a snooze).
    pub fn run_at_unix_ms(&self) -> i64 {
        self.run_at_unix_ms
    }

    /// When its last delivery was claimed.
    pub fn claimed_at_unix_ms(&self) -> i64 {
        self.claimed_at_unix_ms
    }

    /// When it ended done or dead; `None` while leased.
    pub fn finished_at_unix_ms(&self) -> Option<i64> {
        self.finished_at_unix_ms
    }

    /// How long it waited for a worker: from when it became due to its
    /// last claim (0 for a task claimed at once).
    pub fn waited(&self) -> Duration {
        millis(self.claimed_at_unix_ms.saturating_sub(self.run_at_unix_ms))
    }

    /// How long its last delivery ran, from its claim to its end; `None`
    /// while leased. A task buried dead when its lease ran out counts
    /// until it was buried.
    pub fn ran(&self) -> Option<Duration> {
        self.finished_at_unix_ms
            .map(|finished| millis(finished.saturating_sub(self.claimed_at_unix_ms)))
    }
}

/// `ms` milliseconds, 0 when negative.
fn millis(ms: i64) -> Duration {
    Duration::from_millis(ms.max(0) as u64)
}

/// A leased task of a queue, who holds it and until when: see
/// [`Queue::leases`](crate::Queue::leases).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub(crate) task_id: i64,
    pub(crate) holder: Holder,
    pub(crate) claimed_at_unix_ms: i64,
    pub(crate) expires_at_unix_ms: i64,
}

impl Lease {
    /// The leased task's id.
    pub fn task_id(&self) -> i64 {
        self.task_id
    }

    /// The process (SQLite) or connection (PostgreSQL) holding it.
    pub fn holder(&self) -> &Holder {
        &self.holder
    }

    /// When it was claimed, ms since the Unix epoch (the server's clock on
    /// PostgreSQL).
    pub fn claimed_at_unix_ms(&self) -> i64 {
        self.claimed_at_unix_ms
    }

    /// When its lease runs out unless extended, ms since the Unix epoch.
    pub fn expires_at_unix_ms(&self) -> i64 {
        self.expires_at_unix_ms
    }
}

/// Who holds leased tasks, as the store records it. On SQLite a holder is
/// a process, named by its id and its machine's boot; on PostgreSQL it is
/// a process's listening connection, which records when it was last seen
/// alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub(crate) id: i64,
    pub(crate) pid: Option<i64>,
    pub(crate) boot_id: Option<String>,
    pub(crate) seen_alive_at_unix_ms: Option<i64>,
}

impl Holder {
    /// The holder's number in the file (or schema): the same for every
    /// task it holds in any queue.
    pub fn id(&self) -> i64 {
        self.id
    }

    /// The holding process's id, on SQLite.
    pub fn pid(&self) -> Option<i64> {
        self.pid
    }

    /// The boot of the machine the process runs on (Linux's
    /// `/proc/sys/kernel/random/boot_id`), on SQLite: two holders with the
    /// same boot run on the same machine. Empty when it could not be read.
    pub fn boot_id(&self) -> Option<&str> {
        self.boot_id.as_deref()
    }

    /// When the holder last said it is alive (ms since the Unix epoch, on
    /// the server's clock), on PostgreSQL, once it has.
    pub fn seen_alive_at_unix_ms(&self) -> Option<i64> {
        self.seen_alive_at_unix_ms
    }
}

/// Which of a queue's delayed tasks (pending, not yet due) to list or
/// count: see [`Queue::list_delayed`](crate::Queue::list_delayed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Delayed {
    /// Never delivered: pushed with a delay or a run time in the future.
    FirstAttempt,
    /// Delivered before and due again later: waiting out the pause before
    /// a retry after a failure or a lost lease, or snoozed.
    Retry,
}

/// The state of a stored task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskState {
    /// Waiting to be claimed (possibly not yet due).
    Pending,
    /// Claimed under a lease (possibly expired, not yet taken back).
    Leased,
    /// Finished and kept as history (only on queues opened with history).
    Done,
    /// Used up its attempts: kept with its last failure reason until it is
    /// retried ([`crate::Queue::retry_dead`]) or purged.
    Dead,
    /// Cancelled ([`crate::Queue::cancel_task`]) and kept with its reason
    /// as history (only on queues opened with history), until purged.
    Cancelled,
}

/// What [`crate::Queue::cancel_task`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Cancelled {
    /// The task was pending, delayed or dead: it left the line at once
    /// (kept as [`TaskState::Cancelled`] on a handle with history, deleted
    /// otherwise), or it had been cancelled already.
    Removed,
    /// The task is leased: its holder learns of the cancellation at its
    /// next extend, finish, fail or snooze (which then fail with
    /// [`crate::ErrorKind::Cancelled`] and end the task as cancelled), and
    /// it is never delivered again, even when its lease expires.
    Requested,
}

/// Why a holder should stop working on its task, as
/// [`crate::Queue::wait_for_cancellation`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stop {
    /// The task's cancellation was recorded while this delivery held it:
    /// the delivery's next extend, finish, fail or snooze fails with
    /// [`crate::ErrorKind::Cancelled`] and ends the task as cancelled.
    Cancelled,
    /// The delivery is no longer current: finished, failed or snoozed
    /// through it, or its lease expired and the task was taken back.
    NotHeld,
}

/// A queue's rate limit ([`crate::Queue::set_rate_limit`]): at most
/// `claims` deliveries in any window of length `per`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RateLimit {
    /// Deliveries allowed per window: 1 to [`MAX_RATE_CLAIMS`].
    pub claims: u32,
    /// The window: 1 ms to 366 days.
    pub per: Duration,
}

/// The most deliveries a rate limit's window may allow (each is a row in
/// the file).
pub const MAX_RATE_CLAIMS: u32 = 100_000;

/// How long a queue is paused ([`crate::Queue::pause`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pause {
    /// Until [`crate::Queue::resume`].
    UntilResumed,
    /// Until this time, in milliseconds since the Unix epoch, or an
    /// earlier resume.
    UntilUnixMs(i64),
}

/// What a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pushed {
    /// Stored a new task with this id.
    Stored(i64),
    /// Stored nothing: a task with the same unique key, whose id this is,
    /// still holds the key.
    Duplicate(i64),
    /// Stored no new task: the pending task holding the unique key, whose
    /// id this is, took the push's payload or run time, as its options
    /// asked ([`crate::PushOptions::replace_pending`],
    /// [`crate::PushOptions::debounce`]).
    Merged(i64),
}

impl Pushed {
    /// The id of the new task, or of the existing one holding the key.
    pub fn id(self) -> i64 {
        match self {
            Pushed::Stored(id) | Pushed::Duplicate(id) | Pushed::Merged(id) => id,
        }
    }
}

/// What a failure did to the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Failed {
    /// It will be ready again at this time (milliseconds since the epoch).
    RetryAt(i64),
    /// It used its last attempt and is now dead.
    Dead,
}
