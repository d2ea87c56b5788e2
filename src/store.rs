//! The narrow interface between the engine and a storage backend.
//!
//! [`crate::Queue`] checks arguments, reads the clock, guards against use
//! after `fork()` and waits; a backend only stores and claims. Times are
//! milliseconds since the Unix epoch, read once per call by the engine. The
//! SQLite backend uses the engine's time; a backend shared by several
//! machines (PostgreSQL) uses its server's clock instead, which is why
//! lengths (a lease, an age) are passed beside the time, and why times it
//! returns for the engine to wait on ([`Store::next_claimable`]) are translated
//! into the engine's clock. A backend serves one named queue of its store.

use std::time::Duration;

use crate::error::Error;
use crate::error::Result;
use crate::events::EventStore;
pub(crate) use crate::limits::{check_limits, limit_reason, Limit, DEADLINE_PASSED, SWEEP_BATCH};
use crate::merge::Merge;
use crate::options::{
    resolve_max_attempts, NotBefore, Parent, ParentFailure, PushOptions, RetryBackoff,
};
use crate::schedule::{slot_key, ScheduleInfo, StoredSchedule, SLOT_KEY_RESERVED};
use crate::task::{
    Cancelled, Delayed, Failed, Lease, Pause, Pushed, RateLimit, Receipt, Stop, Task, TaskInfo,
    TaskState, TaskTiming,
};
use crate::wait::Bell;

/// A task to store, checked by the engine. It owns its payload: the write
/// may be committed by another thread (see `group.rs`).
#[derive(Debug, Clone)]
pub(crate) struct NewTask {
    pub(crate) payload: String,
    pub(crate) run_at: i64,
    /// How long after the push `run_at` is, when the push gave a delay
    /// (0 for at once) rather than a time: a backend with a clock of its
    /// own counts it from there.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) delay: Option<i64>,
    pub(crate) priority: i32,
    pub(crate) max_attempts: u32,
    /// The unique key and how long (ms) it stays reserved once done.
    pub(crate) unique: Option<(String, i64)>,
    /// The tasks it waits for, each once; an item is an earlier one of
    /// the same push.
    pub(crate) after: Vec<Parent>,
    /// Whether a task it waits for ending dead or cancelled counts as
    /// finished ([`ParentFailure::RunAnyway`]) rather than cancelling it.
    pub(crate) run_anyway: bool,
    /// The ordered group's key and how many of its tasks run at once.
    pub(crate) group: Option<(String, u32)>,
    /// When its first delivery may no longer start ([`PushOptions::expire_after`]).
    pub(crate) expiry: Option<Limit>,
    /// When no delivery may start any more ([`PushOptions::deadline_after`]).
    pub(crate) deadline: Option<Limit>,
    /// What it does to the pending task holding its unique key, if one does.
    pub(crate) merge: Merge,
    /// Its fairness key ([`PushOptions::fair_key`]).
    pub(crate) fair_key: Option<String>,
}

impl NewTask {
    /// The task `options` describe, pushed at `now`; it gets
    /// `default_max_attempts` unless the options say otherwise.
    pub(crate) fn new(
        payload: &str,
        options: &PushOptions,
        now: i64,
        default_max_attempts: u32,
    ) -> NewTask {
        let delay = match options.not_before {
            NotBefore::Now => Some(0),
            NotBefore::Delay(delay) => Some(delay.as_millis() as i64),
            NotBefore::UnixMillis(_) => None,
        };
        let run_at = match options.not_before {
            NotBefore::UnixMillis(at) => at,
            _ => now.saturating_add(delay.unwrap_or(0)),
        };
        NewTask {
            payload: payload.to_owned(),
            run_at,
            delay,
            priority: options.priority,
            max_attempts: resolve_max_attempts(options.max_attempts, default_max_attempts),
            unique: options.unique.as_ref().map(|unique| {
                (
                    unique.key.clone(),
                    unique.reserved_after_done.as_millis() as i64,
                )
            }),
            after: options.after.iter().copied().collect(),
            run_anyway: options.on_parent_failure == ParentFailure::RunAnyway,
            group: options
                .group
                .as_ref()
                .map(|group| (group.key.clone(), group.max_at_once)),
            expiry: options.expiry.map(|limit| Limit::new(limit, now)),
            deadline: options.deadline.map(|limit| Limit::new(limit, now)),
            merge: options.merge,
            fair_key: options.fair_key.clone(),
        }
    }
}

#[cfg(test)]
impl NewTask {
    /// A task pushed at 0 with the default options, ready at once: the
    /// task of unit tests, which change what they test.
    pub(crate) fn ready(payload: &str) -> NewTask {
        NewTask::new(payload, &PushOptions::default(), 0, 3)
    }
}

/// The weight of a fairness key none was set for.
pub(crate) const DEFAULT_FAIR_WEIGHT: f64 = 1.0;

/// The fairness key of the tasks of a fair queue pushed without one.
pub(crate) const NO_FAIR_KEY: &str = "";

/// The pass of a fair queue's key of weight `weight` after its turn, which
/// started at `pass`: stride scheduling over deliveries. A claim serves,
/// among the active keys, the one with the smallest pass (then the
/// smallest key) that has a ready task, whose pass then moves on one
/// stride of `1 / weight`; the keys before it in line, with nothing
/// ready, forfeit the turn (their pass moves up to the served key's), and
/// a key made active again starts no lower than the smallest pass in line,
/// so no key banks credit while it is idle. Over a run of deliveries in
/// which keys i and j have ready tasks throughout, their counts n_i and n_j
/// then satisfy |n_i / w_i - n_j / w_j| <= 1 / w_i + 1 / w_j: each key's
/// pass stays within one stride above the pass the last turn started from.
pub(crate) fn fair_pass_after(pass: f64, weight: f64) -> f64 {
    pass + 1.0 / weight
}

/// The write-ahead log after a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checkpoint {
    /// The size of the `-wal` file afterwards, in bytes.
    pub wal_bytes: u64,
    /// False when a reader still used part of the log, which stays until
    /// the next checkpoint.
    pub complete: bool,
}

/// What a waiting pull reads of the store when it wakes (see
/// [`Store::look`]).
pub struct Look {
    /// The change counter ([`Store::change_counter`]).
    pub changes: i64,
    /// When a task of the queue can be claimed ([`Store::next_claimable`]).
    pub claimable: Option<i64>,
    /// The next slot of the queue's schedules ([`Store::next_schedule_slot`]).
    pub next_slot: Option<i64>,
}

/// What [`Store::finish_and_claim`] does when a delivery it is to finish
/// is no longer current.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IfNotHeld {
    /// Fails with `NotHeld`, finishing and claiming nothing: one finish
    /// and its next claim, whose error must mean nothing was done. Given
    /// with one receipt only.
    Refuse,
    /// Changes nothing for it, and finishes the others and claims anyway:
    /// a worker's batch, whose other tasks and free slots are its own.
    Skip,
}

/// What a storage backend does. Every method is one atomic operation: it
/// either happens whole or not at all, and it is safe to call from any
/// number of threads at once.
///
/// Every backend implements every method, in its `store.rs`, in the order
/// of this trait. A call about something a backend does not have (on
/// PostgreSQL, the calls about SQLite's write-ahead log: `checkpoint`,
/// `wal_size`) fails with `InvalidArgument`, changing nothing, and its
/// message says why the call means nothing there; it never pretends to
/// succeed.
pub(crate) trait Store: Send + Sync + EventStore {
    /// Stores the tasks, all or none, and says what happened to each.
    fn push(&self, tasks: Vec<NewTask>, now: i64) -> Result<Vec<Pushed>>;

    /// Claims up to `max` ready tasks (pending and due, or leased with a
    /// lease expired), best first, for this process for `lease` ms,
    /// counting an attempt for each. Empty when nothing is ready. `now` is
    /// when the pull began; the claim's own time (its rate slots, its
    /// leases' start, `claimed_at`) is read once it holds the write lock,
    /// so a claim that waited for the lock is not stamped in the past and a
    /// rate's window holds no more claims than the rate (on PostgreSQL, the
    /// time of its statements after the settings' lock). Every claim first
    /// ends, in every queue, the tasks cancelled while leased whose lease
    /// has run out (their holder is gone or will be told nothing more), so
    /// that their groups and dependents go on without a `recover`.
    fn claim(&self, max: usize, now: i64, lease: i64) -> Result<Vec<Task>>;

    /// Completes the deliveries named by `receipts`; says for each whether
    /// it was still current (and is now complete).
    fn finish(&self, receipts: &[Receipt], now: i64) -> Result<Vec<bool>>;

    /// Completes the delivery named by `receipt`, keeping the task as done
    /// with `result`: for `retention` ms from `now` on a handle without
    /// history, with the rest of its history otherwise. Also deletes some
    /// of the queue's tasks kept for a result whose time has passed. Says
    /// whether the delivery was current.
    fn finish_with_result(
        &self,
        receipt: Receipt,
        result: &str,
        now: i64,
        retention: i64,
    ) -> Result<bool>;

    /// Completes the deliveries named by `receipts` and claims up to `max`
    /// ready tasks (as [`Store::claim`] does), in one transaction; says
    /// for each receipt whether it was current (and is now complete). A
    /// receipt no longer current does what `if_not_held` says.
    fn finish_and_claim(
        &self,
        receipts: &[Receipt],
        if_not_held: IfNotHeld,
        now: i64,
        lease: i64,
        max: usize,
    ) -> Result<(Vec<bool>, Vec<Task>)>;

    /// Ends a delivery as failed: the task is retried after a pause drawn
    /// from `backoff`, or is dead once it used its attempts. `NotHeld` when
    /// the delivery is no longer current.
    fn fail(
        &self,
        receipt: Receipt,
        reason: &str,
        now: i64,
        backoff: &RetryBackoff,
    ) -> Result<Failed>;

    /// Moves the lease of a current delivery to `lease` ms after `now`,
    /// recording `progress` when given; `NotHeld` when the delivery is no
    /// longer current.
    fn extend(&self, receipt: Receipt, now: i64, lease: i64, progress: Option<&str>) -> Result<()>;

    /// Takes back every leased task whose lease expired by `now` or whose
    /// holder process is gone (pending again, or dead if that was its last
    /// attempt); returns how many.
    fn recover(&self, now: i64) -> Result<u64>;

    /// How many tasks are in `state`.
    fn count(&self, state: TaskState) -> Result<u64>;

    /// How many ordered groups of the queue have [`BLOCKED`] tasks: tasks
    /// waiting for their group's earlier ones (or for parents of their
    /// own). Read through the blocked tasks' index.
    fn groups_waiting(&self) -> Result<u64>;

    /// When the ready task that has been ready longest became ready.
    fn oldest_ready(&self, now: i64) -> Result<Option<i64>>;

    /// Task `id` of the queue, with its steps in the order they were
    /// recorded, if the queue has it.
    fn task(&self, id: i64) -> Result<Option<TaskInfo>>;

    /// In one snapshot: the queue's leased (and cancelling) tasks claimed at
    /// or after `since`, read through the index of leased tasks (as many
    /// as are held), and its done and dead tasks kept that ended at or
    /// after `since` with a claim time, read through their indexes on
    /// `(queue, finished_at)`, earliest end first. At most `limit` of each
    /// of those four kinds.
    fn timings_since(&self, since: i64, limit: usize) -> Result<Vec<TaskTiming>>;

    /// Up to `limit` tasks in `state` from where `from` says, by id.
    fn list(&self, state: TaskState, from: ListFrom, limit: usize) -> Result<Vec<TaskInfo>>;

    /// Up to `limit` of the queue's [`WAITING`] tasks due after `now` that
    /// are of `kind`, by run time then id, beyond `(run_at, id)` `after`
    /// (see [`delayed_condition`]; PostgreSQL reads the time on its own
    /// clock).
    fn list_delayed(
        &self,
        kind: Delayed,
        after: (i64, i64),
        now: i64,
        limit: usize,
    ) -> Result<Vec<TaskInfo>>;

    /// How many tasks [`Store::list_delayed`] would list, counting no
    /// further than `up_to`.
    fn count_delayed(&self, kind: Delayed, now: i64, up_to: u64) -> Result<u64>;

    /// Up to `limit` of the queue's leased (and cancelling) tasks with
    /// their holders, by holder then lease expiry: only task `only` when
    /// given.
    fn leases(&self, only: Option<i64>, limit: usize) -> Result<Vec<Lease>>;

    /// The task of the queue stored under the unique key `key`, if any.
    fn task_with_unique_key(&self, key: &str) -> Result<Option<TaskInfo>>;

    /// Makes dead tasks pending again with no attempts used, in one
    /// transaction: those of `ids` that are dead (the others skipped), or
    /// all of them when `None`; returns how many. A dead task of an ordered
    /// group, whose successors went ahead when it died, rejoins its group
    /// at the back of the line: it waits for the group's newest unfinished
    /// task, if any (one at a time whatever the group's K, which the
    /// task does not keep), so that the group still runs at most K at once.
    fn retry_dead(&self, ids: Option<&[i64]>, now: i64) -> Result<u64>;

    /// Deletes the tasks in `state` (done, dead or cancelled) that got
    /// there at least `older_than` ms before `now`; returns how many.
    fn purge(&self, state: TaskState, now: i64, older_than: i64) -> Result<u64>;

    /// Cancels task `id` of the queue with `reason` (see [`Cancelled`]):
    /// [`CANCELLED`] with history, deleted without, or, when leased,
    /// [`CANCELLING`] until its holder or a recovery ends it. Fails with
    /// `InvalidArgument`, changing nothing, when the queue has no task
    /// `id` or the task is done.
    fn cancel_task(&self, id: i64, reason: &str, now: i64) -> Result<Cancelled>;

    /// Cancels each of `ids`, as [`Store::cancel_task`] does, in one
    /// transaction, skipping the ids the queue has no task of and its done
    /// tasks; returns how many it cancelled (or found cancelled already).
    fn cancel_many(&self, ids: &[i64], reason: &str, now: i64) -> Result<u64>;

    /// Ends as cancelled the delivery named by `receipt` if its task's
    /// cancellation waits for it (the task is [`CANCELLING`] under that
    /// receipt), and says whether it did: asked after a write by the
    /// holder found its delivery not current.
    fn end_cancelled(&self, receipt: Receipt, now: i64) -> Result<bool>;

    /// Whether the delivery named by `receipt` is still current, and if
    /// so whether its task's cancellation waits for it (`Some(Cancelled)`);
    /// `Some(NotHeld)` when it is over. A read.
    fn delivery(&self, receipt: Receipt) -> Result<Option<Stop>>;

    /// The bell that a cancellation of a leased task of the queue rings in
    /// this process once it commits, in any process (see
    /// [`cancellations_channel`]), and how often a watcher must still look
    /// for the cancellations that rang nothing.
    fn cancellations(&self) -> Result<(std::sync::Arc<Bell>, Duration)>;

    /// Hands the task of a current delivery back to run `delay` ms after
    /// `now`, without counting the attempt; `NotHeld` when the delivery is
    /// no longer current.
    fn snooze(&self, receipt: Receipt, now: i64, delay: i64) -> Result<()>;

    /// Records step `name` of the task of the current delivery `receipt`
    /// with `output` at `now`, in one transaction: `true` once stored,
    /// `false` when the task already has a step of that name (the first
    /// output is kept); `NotHeld`, storing nothing, when the delivery is no
    /// longer current (leased under another token, cancelling, or ended).
    fn record_step(&self, receipt: Receipt, name: &str, output: &str, now: i64) -> Result<bool>;

    /// The output recorded for step `name` of task `id`, by any of its
    /// deliveries; `None` when none was. A read.
    fn step_output(&self, id: i64, name: &str) -> Result<Option<String>>;

    /// Deletes the steps of task `id` of the queue recorded after its step
    /// `name`, in one transaction, and returns how many; the answer of
    /// [`steps_to_clear`] for the task as found.
    fn clear_steps_after(&self, id: i64, name: &str) -> Result<u64>;

    /// Pauses the queue (every process's claims find nothing), or with
    /// `None` resumes it.
    fn set_pause(&self, pause: Option<Pause>) -> Result<()>;

    /// The queue's pause in force at `now`, if any.
    fn pause(&self, now: i64) -> Result<Option<Pause>>;

    /// Sets the queue's concurrency limit: at most `limit` tasks leased at
    /// once across every process (expired leases hold no slot), enforced
    /// inside each claim; `None` removes it.
    fn set_concurrency_limit(&self, limit: Option<u32>) -> Result<()>;

    /// The queue's concurrency limit, if any.
    fn concurrency_limit(&self) -> Result<Option<u32>>;

    /// Sets the queue's rate limit (checked by the engine), starting with
    /// every slot free; `None` removes it.
    fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<()>;

    /// The queue's rate limit, if any.
    fn rate_limit(&self) -> Result<Option<RateLimit>>;

    /// Sets the queue's cap on pending tasks, checked by every push inside
    /// its transaction (see [`full`]); `None` removes it.
    fn set_max_pending(&self, cap: Option<u64>) -> Result<()>;

    /// The queue's cap on pending tasks, if any.
    fn max_pending(&self) -> Result<Option<u64>>;

    /// Sets the default cap on the pending tasks of each fairness key of
    /// the queue, checked by every push inside its transaction; a cap makes
    /// the queue fair. `None` removes it.
    fn set_max_pending_per_key(&self, cap: Option<u64>) -> Result<()>;

    /// The default cap on the pending tasks of each fairness key, if any.
    fn max_pending_per_key(&self) -> Result<Option<u64>>;

    /// Sets fairness key `key`'s own cap on its pending tasks (checked by
    /// the engine), in place of the default; a cap makes the queue fair.
    /// `None` removes it, so that the default applies again.
    fn set_key_max_pending(&self, key: &str, cap: Option<u64>) -> Result<()>;

    /// The cap in force for fairness key `key`: its own, else the default.
    fn key_max_pending(&self, key: &str) -> Result<Option<u64>>;

    /// Sets the weight of fairness key `key` of the queue (checked by the
    /// engine), which makes the queue share its deliveries between keys
    /// (see [`fair_pass_after`]) from now on.
    fn set_fair_weight(&self, key: &str, weight: f64) -> Result<()>;

    /// The weight of fairness key `key` of the queue: [`DEFAULT_FAIR_WEIGHT`]
    /// unless one was set.
    fn fair_weight(&self, key: &str) -> Result<f64>;

    /// Copies the log into the database and truncates it.
    fn checkpoint(&self) -> Result<Checkpoint>;

    /// The size of the write-ahead log, in bytes.
    fn wal_size(&self) -> Result<u64>;

    /// The earliest time, not before `now`, when a task of the queue can be
    /// claimed without any other write: `now` when one is ready, else a
    /// delayed task's due time or a lease's expiry, on the engine's clock;
    /// `None` when the queue has nothing that will become claimable. A
    /// read: a waiting pull asks it before it takes the write lock.
    fn next_claimable(&self, now: i64) -> Result<Option<i64>>;

    /// A number that changes whenever another connection commits a write
    /// that may make a task ready.
    fn change_counter(&self) -> Result<i64>;

    /// In one read, when the backend can (a waiter's every wake-up costs
    /// this read): the change counter and, unless it equals `seen`, when a
    /// task can be claimed and the schedules' next slot, as of `now`.
    /// `None` when the counter equals `seen` (`seen` being `None` when
    /// the caller needs the whole look, whatever the counter).
    fn look(&self, now: i64, seen: Option<i64>) -> Result<Option<Look>> {
        let changes = self.change_counter()?;
        if seen == Some(changes) {
            return Ok(None);
        }
        Ok(Some(Look {
            changes,
            claimable: self.next_claimable(now)?,
            next_slot: self.next_schedule_slot(now)?,
        }))
    }

    /// Makes sure writes by other processes ring the bells of this
    /// process's waiters, when the backend can, and says how often a waiter
    /// must still look at [`Store::change_counter`] for the writes that
    /// ring nothing.
    fn watch_other_processes(&self) -> Duration {
        crate::wait::POLL_INTERVAL
    }

    /// The names of the queues of the store that hold at least one task,
    /// in any state, sorted.
    fn queue_names(&self) -> Result<Vec<String>>;

    /// The highest task id handed out in the store, in any queue (0 before
    /// the first push).
    fn last_id(&self) -> Result<i64>;

    /// Stores `schedule` in the queue with its first slot after `now`, as
    /// `put` says of a schedule of the same name.
    fn put_schedule(&self, schedule: &StoredSchedule, put: PutSchedule, now: i64) -> Result<()>;

    /// Deletes the schedule named `name`; says whether there was one.
    fn remove_schedule(&self, name: &str) -> Result<bool>;

    /// Pauses or resumes the schedule named `name`; says whether there was
    /// one. A resumed schedule goes on from its first slot at or after
    /// `now` (see [`crate::schedule::Timetable::slot_from`]).
    fn set_schedule_paused(&self, name: &str, paused: bool, now: i64) -> Result<bool>;

    /// The queue's schedules, by name.
    fn schedules(&self) -> Result<Vec<ScheduleInfo>>;

    /// In one transaction: enqueues the tasks of every slot due by `now`
    /// of the queue's schedules not paused (see [`due_tasks`]) and moves
    /// each schedule's next slot past `now`; returns how many tasks were
    /// stored. A concurrent call finds nothing left due.
    fn run_due_schedules(&self, now: i64) -> Result<u64>;

    /// The earliest next slot of the queue's schedules not paused, on the
    /// engine's clock; `None` without any. A read.
    fn next_schedule_slot(&self, now: i64) -> Result<Option<i64>>;

    /// The store's identity: the same for every handle on it, different
    /// for any other store. Receipts carry it, so that one from another
    /// store (whose ids and tokens may match an unrelated delivery here)
    /// is refused.
    fn store_id(&self) -> u128;
}

/// The name under which cancellations of leased tasks of `queue` ring
/// the holders watching for them ([`Store::cancellations`]): a bell, and a
/// wake word or notification, of its own, so that the queue's pushes and
/// finishes do not wake those watchers, nor cancellations its pulls. A
/// PostgreSQL notification's payload cannot hold NUL, so the name uses
/// U+0001; a queue whose name is this one would only share the wake-ups
/// (each costing a read).
pub(crate) fn cancellations_channel(queue: &str) -> String {
    format!("{queue}\u{1}cancellations")
}

// The states a task is stored in, the same in both backends. SQL keeps
// them as literals where a partial index needs the literal to match.

/// The stored `state` of a pending task that is due: in the index of ready
/// tasks, claimed in line.
pub(crate) const READY: i64 = 0;

/// The stored `state` of a task under lease.
pub(crate) const LEASED: i64 = 1;

/// The stored `state` of a finished task, kept as history.
pub(crate) const DONE: i64 = 2;

/// The stored `state` of a task whose attempts ran out.
pub(crate) const DEAD: i64 = 3;

/// The stored `state` of a pending task not yet due, made [`READY`] by a
/// claim once due.
pub(crate) const WAITING: i64 = 4;

/// The stored `state` of a cancelled task, kept as history.
pub(crate) const CANCELLED: i64 = 5;

/// The stored `state` of a leased task whose cancellation waits for its
/// holder: out of the index of live tasks, so never claimed, and counted
/// as leased until its holder or a recovery ends it as [`CANCELLED`].
pub(crate) const CANCELLING: i64 = 6;

/// The stored `state` of a task waiting for unfinished tasks: out of the
/// index of live tasks, so never claimed, and counted as pending. The last
/// of them to end makes it [`READY`] or [`WAITING`], in the same
/// transaction.
pub(crate) const BLOCKED: i64 = 7;

/// Every state a task is stored in; each has a partial index that starts
/// with the queue's name.
pub(crate) const STORED_STATES: [i64; 8] = [
    READY, LEASED, DONE, DEAD, WAITING, CANCELLED, CANCELLING, BLOCKED,
];

/// The visible state of a `stored` one. A state tq never writes means its
/// tables were changed outside tq: [`ErrorKind::NotADatabase`], as for any
/// other damage.
///
/// [`ErrorKind::NotADatabase`]: crate::ErrorKind::NotADatabase
pub(crate) fn visible_state(stored: i64) -> Result<TaskState> {
    match stored {
        READY | WAITING | BLOCKED => Ok(TaskState::Pending),
        LEASED | CANCELLING => Ok(TaskState::Leased),
        DONE => Ok(TaskState::Done),
        DEAD => Ok(TaskState::Dead),
        CANCELLED => Ok(TaskState::Cancelled),
        other => Err(Error::new(
            crate::ErrorKind::NotADatabase,
            format!("tq's tables were changed outside tq: a task in unknown state {other}"),
        )),
    }
}

/// Which steps of task `id` of `queue` a [`Store::clear_steps_after`] of
/// its step `name` deletes, the task found in the stored `state` (`None`:
/// not in the queue) with that step recorded as number `order` (`None`:
/// no such step): those recorded after number `order`. Refused, changing
/// nothing, for a task not in the queue, a leased one (its holder may be
/// running the steps: cancel it first, or wait for it to end) and a step
/// never recorded.
pub(crate) fn steps_to_clear(
    queue: &str,
    id: i64,
    name: &str,
    state: Option<i64>,
    order: Option<i64>,
) -> Result<i64> {
    match (state, order) {
        (None, _) => Err(Error::invalid_argument(format!(
            "queue '{queue}' has no task {id} whose steps could be cleared"
        ))),
        (Some(LEASED | CANCELLING), _) => Err(Error::invalid_argument(format!(
            "task {id} is held by a worker, which may be running its steps: clear them once \
             its delivery has ended"
        ))),
        (Some(_), None) => Err(Error::invalid_argument(format!(
            "task {id} has no step named '{name}' to clear the steps after"
        ))),
        (Some(_), Some(order)) => Ok(order),
    }
}

/// The error of a call on a delivery of task `id` that is no longer
/// current.
/// The answer to an extend of task `id`'s expired lease while queue
/// `queue` is at its concurrency `limit`: the lease held no slot once it
/// expired, a claim took the slot, and taking it back would put the queue
/// over its limit. Both backends refuse it so.
/// What storing a schedule does when the queue has one of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PutSchedule {
    /// Fails with `InvalidArgument`, changing nothing.
    Add,
    /// Overwrites it: its next slot computed afresh, no longer paused.
    Replace,
    /// Updates it and keeps its next slot while its timing (spec, time
    /// zone, catch-up) is unchanged, so that declaring a schedule at every
    /// start neither delays nor skips a slot; a new timing's next slot is
    /// computed afresh. A paused schedule stays paused.
    Upsert,
}

pub(crate) fn lease_slot_taken(id: i64, queue: &str, limit: i64) -> Error {
    Error::new(
        crate::ErrorKind::NotHeld,
        format!(
            "task {id} is no longer held: its lease expired and queue '{queue}' is at its \
             concurrency limit of {limit}, so the lease cannot be taken again"
        ),
    )
}

pub(crate) fn not_held(id: i64) -> Error {
    Error::new(
        crate::ErrorKind::NotHeld,
        format!(
            "task {id} is not held by this delivery: it was already finished or failed, \
             or its lease was recovered or taken by another worker"
        ),
    )
}

/// What the engine does about a delivery whose task is stored in `state`
/// (`None`: no task under that lease): go on while it is leased, stop as
/// cancelled once its cancellation waits for it, stop as not held
/// otherwise.
pub(crate) fn delivery_stop(state: Option<i64>) -> Option<Stop> {
    match state {
        Some(CANCELLING) => Some(Stop::Cancelled),
        Some(_) => None,
        None => Some(Stop::NotHeld),
    }
}

/// The claim order as a sort key: higher priority first, then the task
/// ready longest, then the task pushed first.
pub(crate) fn claim_order(
    priority: i32,
    run_at: i64,
    id: i64,
) -> (std::cmp::Reverse<i32>, i64, i64) {
    (std::cmp::Reverse(priority), run_at, id)
}

/// Puts claimed tasks in [`claim_order`]: RETURNING gives rows in the
/// order they were changed.
pub(crate) fn sort_claimed(tasks: &mut [Task]) {
    tasks.sort_by_key(|task| claim_order(task.priority, task.run_at_unix_ms, task.id()));
}

/// A reason as stored: none for an empty one.
pub(crate) fn stored_reason(reason: &str) -> Option<&str> {
    (!reason.is_empty()).then_some(reason)
}

/// The ids of the tasks `after` names, an item being the task stored (or
/// found by its unique key) for that earlier item of the same push.
pub(crate) fn parent_ids(after: &[Parent], earlier: &[Pushed]) -> Vec<i64> {
    let mut ids: Vec<i64> = after
        .iter()
        .map(|parent| match *parent {
            Parent::Task(id) => id,
            Parent::Item(index) => earlier[index].id(),
        })
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

/// Whether a task pushed to wait for task `parent` of `queue`, found in
/// the stored `state` (`None`: not stored in the queue), waits for it: yes
/// while it is unfinished; no once done, or once dead or cancelled when
/// `run_anyway`. Otherwise the push fails, storing nothing: a task not in
/// the queue cannot be waited for (dependencies stay within a queue, and
/// a finished task deleted is gone), and one dead or cancelled would
/// cancel the new task at once.
pub(crate) fn waits_for(
    queue: &str,
    parent: i64,
    state: Option<i64>,
    run_anyway: bool,
) -> Result<bool> {
    match state {
        None => Err(Error::invalid_argument(format!(
            "queue '{queue}' has no task {parent} to wait for: a task can wait only for \
             tasks of its own queue that are not finished, or finished and kept as history"
        ))),
        Some(DONE) => Ok(false),
        Some(DEAD | CANCELLED) if run_anyway => Ok(false),
        Some(state @ (DEAD | CANCELLED)) => Err(Error::invalid_argument(format!(
            "task {parent} is {}: a task waiting for it would be cancelled at once \
             (push it to run anyway, or retry task {parent} first)",
            if state == DEAD { "dead" } else { "cancelled" }
        ))),
        Some(_) => Ok(true),
    }
}

/// The stored states of an unfinished task (pending, blocked, leased or
/// cancelling), as an SQL condition the same in both backends: a task
/// pushed to an ordered group waits for one of these.
pub(crate) const UNFINISHED: &str = "state IN (0, 1, 4, 6, 7)";

/// The task a task pushed to group `$2` of queue `$1` waits for, `$3`
/// being how many of the group run at once minus one: the `$3 + 1`-th most
/// recent unfinished task of the group, found from the group's newest task
/// in its index (its finished tasks are mostly older than its unfinished
/// ones). No row when the group has fewer unfinished tasks: the task may
/// run at once. `tasks` names the table, `mark` starts a parameter.
pub(crate) fn group_predecessor_sql(tasks: &str, mark: char) -> String {
    format!(
        "SELECT id FROM {tasks} WHERE queue = {mark}1 AND group_key = {mark}2 AND {UNFINISHED}
         ORDER BY id DESC LIMIT 1 OFFSET {mark}3"
    )
}

/// `err`, from item `index` of a push of `count` tasks, saying which item
/// when there are several.
pub(crate) fn of_item(err: Error, index: usize, count: usize) -> Error {
    if count == 1 {
        return err;
    }
    Error::new(err.kind(), format!("item {index}: {}", err.message()))
}

/// Why a task waiting for `parent` was cancelled when `parent` ended
/// dead (`dead`) or cancelled.
pub(crate) fn cancelled_for(parent: i64, dead: bool) -> String {
    format!(
        "task {parent}, which it waited for, {}",
        if dead { "is dead" } else { "was cancelled" }
    )
}

/// When a new rate slot was last used, as stored: so long ago that it is
/// free in any window.
pub(crate) const NEVER_USED: i64 = i64::MIN / 2;

/// A pause until resumed, as stored: the end of time.
pub(crate) const UNTIL_RESUMED: i64 = i64::MAX;

/// A pause as stored (the time it ends, [`UNTIL_RESUMED`] for none).
pub(crate) fn pause_until(pause: Pause) -> i64 {
    match pause {
        Pause::UntilResumed => UNTIL_RESUMED,
        Pause::UntilUnixMs(until) => until,
    }
}

/// A pause in force read back (the time it ends, as stored).
pub(crate) fn stored_pause(until: i64) -> Pause {
    match until {
        UNTIL_RESUMED => Pause::UntilResumed,
        until => Pause::UntilUnixMs(until),
    }
}

/// Whether a task in the stored `state`, with `unique_until`, still holds
/// its unique key at `now`: pending (blocked too), leased (cancelling too,
/// while its holder runs it), or done and within its window.
pub(crate) fn holds_unique_key(state: i64, unique_until: Option<i64>, now: i64) -> bool {
    match state {
        READY | LEASED | WAITING | CANCELLING | BLOCKED => true,
        DONE => unique_until.is_some_and(|until| until > now),
        _ => false,
    }
}

/// The statement that merges a push into task `1`, the pending task
/// holding its unique key, as the push's [`Merge`] asks, and answers its id;
/// no row when the task is not pending, or is held by a delivery (stored
/// states READY, WAITING or BLOCKED only): a delivery's task is never
/// changed. Its parameters: `1` the task, `2` the new payload (NULL: keep
/// it), `3` the push's delay (NULL: the push gave a time), `4` the push's
/// run time, `5` the longest debounce in ms (NULL: keep the run time),
/// counted from the task's `created_at`, the time it was first pushed.
/// `now` is the time of the merge (`mark` followed by 6, or an SQL
/// expression on a backend with a clock of its own). A debounce makes the
/// task ready or waiting as its new run time says; a blocked task stays
/// blocked. Both backends run this text.
pub(crate) fn merge_sql(tasks: &str, mark: char, now: &str) -> String {
    let typed = |n: u32, ty: &str| match mark {
        '$' => format!("${n}::{ty}"),
        _ => format!("{mark}{n}"),
    };
    let (payload, delay, at, max) = (
        typed(2, "text"),
        typed(3, "int8"),
        typed(4, "int8"),
        typed(5, "int8"),
    );
    let wanted = format!("coalesce({now} + {delay}, {at})");
    let due = format!(
        "CASE WHEN {max} IS NULL THEN run_at \
              WHEN {wanted} < created_at + {max} THEN {wanted} ELSE created_at + {max} END"
    );
    format!(
        "UPDATE {tasks} SET payload = coalesce({payload}, payload), run_at = {due}, \
             state = CASE WHEN state = {BLOCKED} THEN {BLOCKED} WHEN {due} <= {now} \
                          THEN {READY} ELSE {WAITING} END \
         WHERE id = {mark}1 AND state IN ({READY}, {WAITING}, {BLOCKED}) RETURNING id"
    )
}

/// Where a page of tasks listed by id starts: after an id, oldest first
/// (`After(0)` for the first page), or before one, newest first
/// (`Before(i64::MAX)` for the first page).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListFrom {
    After(i64),
    Before(i64),
}

/// The error of a push refused because `queue`, holding `pending` pending
/// tasks, has room for fewer than the `adding` it would store under its
/// `cap`. Both backends and the SQL functions word it alike.
pub(crate) fn full(queue: &str, cap: u64, pending: u64, adding: u64) -> Error {
    Error::new(
        crate::ErrorKind::Full,
        format!(
            "queue '{queue}' is full: it holds {pending} pending tasks and its cap is {cap}, \
             so the {adding} this push would add do not fit (nothing was pushed)"
        ),
    )
}

/// Counts the pending tasks of queue `?1`/`$1` (see [`state_condition`]),
/// each pending state's up to `?2`/`$2`: a capped push needs to know only
/// whether there is room, and the count reads one index entry per task it
/// counts. One count per state, each a range of its own partial index: an
/// `OR` of the states would also gather the rows' ids to drop duplicates,
/// which made the count several times slower on SQLite.
pub(crate) fn pending_up_to_sql(tasks: &str, mark: char) -> String {
    let count = |state: i64| {
        format!(
            "(SELECT count(*) FROM (SELECT 1 FROM {tasks} WHERE queue = {mark}1 \
             AND state = {state} LIMIT {mark}2) AS capped)"
        )
    };
    format!(
        "SELECT {} + {} + {}",
        count(READY),
        count(WAITING),
        count(BLOCKED)
    )
}

/// The SQL condition on the stored `state` column of a visible state, the
/// same in both backends. Pending is ready (0), waiting (4) or [`BLOCKED`] (7), written as an
/// `OR` of equalities: each arm can use the partial index of its state,
/// which `state IN (0, 4)` matches in neither SQLite nor PostgreSQL (both
/// then scan the table). Leased is leased (1) or [`CANCELLING`] (6).
pub(crate) fn state_condition(state: TaskState) -> &'static str {
    match state {
        TaskState::Pending => "(state = 0 OR state = 4 OR state = 7)",
        TaskState::Leased => "(state = 1 OR state = 6)",
        TaskState::Done => "state = 2",
        TaskState::Dead => "state = 3",
        TaskState::Cancelled => "state = 5",
    }
}

/// The SQL condition that picks a queue's delayed tasks of `kind`, the
/// same in both backends, given how each names the time now and the
/// page's start (`after_run_at`, `after_id`): a range of the index of
/// [`WAITING`] tasks by run time, beyond now and the start, with the
/// attempts read from each task's row. A waiting task already due is in
/// effect ready (a claim makes it so), not delayed.
pub(crate) fn delayed_condition(
    kind: Delayed,
    now: &str,
    after_run_at: &str,
    after_id: &str,
) -> String {
    let attempts = match kind {
        Delayed::FirstAttempt => "attempts = 0",
        Delayed::Retry => "attempts > 0",
    };
    format!(
        "state = {WAITING} AND run_at > {now} AND (run_at, id) > ({after_run_at}, {after_id}) AND {attempts}"
    )
}

/// The tasks a schedule whose next slot is `next` enqueues at `now`, by its
/// catch-up policy, each under its slot's unique key and due at its slot;
/// and its next slot afterwards, the first after `now`. `None` for a
/// schedule whose stored timetable cannot be read (written over by another
/// program, or naming a time zone this build does not know): the backends
/// pause it rather than fail the pull driving it, and resuming it says why.
pub(crate) fn due_tasks(
    stored: &StoredSchedule,
    next: i64,
    now: i64,
) -> Result<Option<(Vec<NewTask>, i64)>> {
    let schedule = stored.schedule();
    let timetable = match schedule.timetable() {
        Ok(timetable) => timetable,
        Err(err) if err.kind() == crate::ErrorKind::InvalidArgument => return Ok(None),
        Err(err) => return Err(err),
    };
    let (slots, after) = timetable.due(next, now, schedule.catch_up)?;
    let tasks = slots
        .into_iter()
        .map(|slot| NewTask {
            payload: schedule.payload.clone(),
            run_at: slot,
            delay: None,
            priority: schedule.priority,
            max_attempts: stored.task_max_attempts(),
            unique: Some((slot_key(&schedule.name, slot), SLOT_KEY_RESERVED)),
            after: Vec::new(),
            run_anyway: false,
            group: None,
            expiry: None,
            deadline: None,
            merge: Merge::default(),
            fair_key: None,
        })
        .collect();
    Ok(Some((tasks, after)))
}
