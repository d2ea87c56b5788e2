//! The engine's front: [`Queue`] checks arguments, reads the clock, guards
//! against use after `fork()`, waits for tasks, and hands each operation to
//! its storage backend.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::de::IgnoredAny;

use crate::error::{Error, ErrorKind, Result};
use crate::options::{
    check_delay, check_duration, check_lease, check_text, OpenOptions, Parent, PullOptions,
    PushOptions, RetryBackoff, MAX_UNIQUE_KEY_LEN,
};
use crate::schedule::{Schedule, ScheduleInfo};
use crate::sqlite::SqliteStore;
use crate::store::{Checkpoint, IfNotHeld, ListFrom, Look, NewTask, PutSchedule, Store};
use crate::task::{
    Cancelled, Failed, Pause, Pushed, RateLimit, Receipt, Stop, Task, TaskInfo, TaskState,
    TaskTiming, MAX_RATE_CLAIMS,
};
use crate::wait::{Bell, CancelToken};

/// The largest payload any queue accepts, in bytes (SQLite's limit on one
/// value); [`OpenOptions::max_payload_len`] sets a queue's own limit.
pub const MAX_PAYLOAD_LEN: usize = 1_000_000_000;

/// The most tasks of each kind (leased, cancelling, done, dead) that one
/// call of [`Queue::timings_since`] returns.
pub const MAX_TIMINGS: usize = 10_000;

/// The longest failure reason kept, in bytes; a longer one is cut at a
/// character boundary.
pub const MAX_REASON_LEN: usize = 64 * 1024;

/// How often [`Queue::wait_for_change`], asleep on the queue's bell, looks
/// whether a cancellation rang the cancellations' bell: a cancellation then
/// reaches a watcher within this time, for a look at a counter in memory.
const CANCELLATIONS_LOOK: Duration = Duration::from_millis(20);

/// A handle on one named queue in one SQLite file, or in a PostgreSQL
/// database. `Queue` is `Send + Sync`: share one handle among threads
/// (calls are ordered inside it) or open several; any number of processes
/// on one host may open the same file, and any number of machines the same
/// PostgreSQL database.
///
/// A handle belongs to the process that opened it: after `fork()`, every
/// call in the child fails with [`ErrorKind::InvalidArgument`]. The child
/// may open handles of its own; the first one it opens closes the child's
/// copies of its parent's connections, which releases nothing of the
/// parent's (see `sqlite/inherited.rs`).
pub struct Queue {
    store: Box<dyn Store>,
    /// Rung by every write that may make a task of this queue ready: at
    /// once by those of this process, and through the backend by those of
    /// others.
    bell: Arc<Bell>,
    /// Cancelled by [`Queue::interrupt`]: it also rings the bells of the
    /// waits that watch it.
    interrupted: CancelToken,
    opened_by_pid: u32,
    max_payload_len: usize,
    max_attempts: u32,
    retry_backoff: RetryBackoff,
    /// How long a result is kept on a handle without history, in ms.
    result_retention: i64,
    name: String,
    /// The earliest next slot of the queue's schedules, as last read.
    slots: SlotCache,
}

impl Queue {
    /// Opens the queue named in `options` (default `"default"`) in the
    /// SQLite file at `path`, creating the file and tq's tables as needed.
    /// The file may also hold the application's own tables; tq only touches
    /// tables named `tq_*`.
    ///
    /// Fails with [`ErrorKind::NotADatabase`] (leaving the file as it was)
    /// when it is not an SQLite database or carries a newer tq schema, and
    /// with [`ErrorKind::Io`] when it cannot be opened or created.
    ///
    /// A `postgres://` or `postgresql://` URL opens the queue in that
    /// PostgreSQL database instead, in the schema named by
    /// [`OpenOptions::postgres_schema`] (default `tq`), creating or
    /// migrating it as needed; see the README's "Outgrowing one machine".
    pub fn open(path: &str, options: &OpenOptions) -> Result<Queue> {
        if path.is_empty() {
            return Err(Error::invalid_argument("the path is empty"));
        }
        let (store, bell): (Box<dyn Store>, Arc<Bell>) = if is_postgres_url(path) {
            open_postgres(path, options)?
        } else {
            options.check_sqlite()?;
            let store = SqliteStore::open(path, options)?;
            let bell = Bell::for_queue(store.file_id(), &options.queue)?;
            (Box::new(store), bell)
        };
        Ok(Queue {
            bell,
            store,
            interrupted: CancelToken::new(),
            opened_by_pid: std::process::id(),
            max_payload_len: options.max_payload_len,
            max_attempts: options.max_attempts,
            retry_backoff: options.retry_backoff,
            result_retention: options.result_retention.as_millis() as i64,
            name: options.queue.clone(),
            slots: SlotCache::default(),
        })
    }

    /// The name of the queue this handle works on.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Stores `payload`, which must be a JSON text, as a new pending task:
    /// [`Pushed::Stored`] with its id. With a unique key that a task of this
    /// queue still holds, stores nothing and answers [`Pushed::Duplicate`]
    /// with that task's id. The bytes are stored exactly as given. Invalid
    /// JSON fails with [`ErrorKind::InvalidJson`], and a payload over the
    /// queue's limit with [`ErrorKind::InvalidArgument`]; either stores
    /// nothing.
    pub fn push(&self, payload: &str, options: &PushOptions) -> Result<Pushed> {
        let store = self.store()?;
        check_items_named(options, 0, "a single push")?;
        check_payload(payload, self.max_payload_len)?;
        let now = now_unix_ms();
        let pushed = store.push(
            vec![NewTask::new(payload, options, now, self.max_attempts)],
            now,
        )?;
        self.bell.ring();
        Ok(pushed[0])
    }

    /// Stores every payload as a new task, in order, in one transaction:
    /// all or none. A payload that is not JSON or is over the limit fails
    /// the whole batch with an error naming its index, before anything is
    /// written. Returns the new ids, in order. A unique key names one task,
    /// so `options` must not have one here.
    pub fn push_batch<P: AsRef<str>>(
        &self,
        payloads: &[P],
        options: &PushOptions,
    ) -> Result<Vec<i64>> {
        let store = self.store()?;
        check_batch_options(options)?;
        for (index, payload) in payloads.iter().enumerate() {
            check_payload(payload.as_ref(), self.max_payload_len).map_err(|err| {
                Error::new(err.kind(), format!("payload {index}: {}", err.message()))
            })?;
        }
        if payloads.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_unix_ms();
        let tasks: Vec<NewTask> = payloads
            .iter()
            .map(|payload| NewTask::new(payload.as_ref(), options, now, self.max_attempts))
            .collect();
        let pushed = store.push(tasks, now)?;
        self.bell.ring();
        Ok(pushed.into_iter().map(Pushed::id).collect())
    }

    /// Stores each item (a payload and its own options) as
    /// [`Queue::push`] would, in order, in one transaction: all or none.
    /// An item may wait for an earlier item ([`PushOptions::after_item`]),
    /// so a graph of tasks is stored whole or not at all; cycles cannot be
    /// written. An item whose unique key a task holds stores nothing, and
    /// an item waiting for it waits for that task. A bad payload or
    /// option, or a task to wait for that cannot be waited for, fails the
    /// whole call with an error naming the item's index.
    pub fn push_items<P: AsRef<str>>(&self, items: &[(P, PushOptions)]) -> Result<Vec<Pushed>> {
        let store = self.store()?;
        for (index, (payload, options)) in items.iter().enumerate() {
            check_items_named(options, index, "an item")
                .and_then(|()| check_payload(payload.as_ref(), self.max_payload_len))
                .map_err(|err| {
                    Error::new(err.kind(), format!("item {index}: {}", err.message()))
                })?;
        }
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let now = now_unix_ms();
        let tasks = items
            .iter()
            .map(|(payload, options)| {
                NewTask::new(payload.as_ref(), options, now, self.max_attempts)
            })
            .collect();
        let pushed = store.push(tasks, now)?;
        self.bell.ring();
        Ok(pushed)
    }

    /// Checks one payload as a push through this handle would.
    pub(crate) fn check_payload(&self, payload: &str) -> Result<()> {
        check_payload(payload, self.max_payload_len)
    }

    /// Claims the ready task first in line under a lease: highest priority
    /// first, then the one ready longest (tasks pushed without delay and of
    /// equal priority come out in push order). A task whose lease expired is
    /// ready again, and keeps its place. No two holders ever hold the same
    /// task at once.
    ///
    /// Returns `None` when no task is ready, after waiting up to the
    /// options' wait time for one; a wait ended by [`Queue::interrupt`] or
    /// the options' cancellation token fails with
    /// [`ErrorKind::Interrupted`].
    pub fn pull(&self, options: &PullOptions) -> Result<Option<Task>> {
        Ok(stamped(self.store()?, self.claim(1, options)?).pop())
    }

    /// Claims up to `max` ready tasks in one transaction, in the order
    /// [`Queue::pull`] would return them, waiting as `pull` does when none
    /// is ready. Empty only when none was ready by the end of the wait.
    pub fn pull_batch(&self, max: usize, options: &PullOptions) -> Result<Vec<Task>> {
        if max == 0 {
            return Err(Error::invalid_argument(
                "a batch pull needs room for at least one task",
            ));
        }
        Ok(stamped(self.store()?, self.claim(max, options)?))
    }

    /// Adds `schedule` to this queue, its first slot after now (see
    /// [`ScheduleSpec`](crate::ScheduleSpec)); its tasks get this handle's
    /// max attempts unless the schedule says otherwise. Fails with
    /// [`ErrorKind::InvalidArgument`] when the queue already has a
    /// schedule of that name, with [`ErrorKind::InvalidJson`] for a payload
    /// that is not JSON (or over the queue's limit: `InvalidArgument`);
    /// each stores nothing.
    pub fn add_schedule(&self, schedule: &Schedule) -> Result<()> {
        self.put_schedule(schedule, PutSchedule::Add)
    }

    /// Adds `schedule`, or overwrites the schedule of the same name: its
    /// next slot is computed afresh from now, and it is no longer paused.
    /// Tasks already enqueued stay; a slot enqueued before keeps its
    /// unique key, so it is not enqueued twice. Fails as
    /// [`Queue::add_schedule`] does for the payload.
    pub fn replace_schedule(&self, schedule: &Schedule) -> Result<()> {
        self.put_schedule(schedule, PutSchedule::Replace)
    }

    /// Declares `schedule`, as an application does at every start: adds
    /// it, or updates the schedule of the same name (payload, priority,
    /// max attempts, timing) keeping its next slot while its timing (spec,
    /// time zone and catch-up) is unchanged, so that a restart neither
    /// pushes an `every` schedule's slot later nor skips a due slot. A
    /// changed timing's next slot is computed afresh from now; a paused
    /// schedule stays paused. Fails as [`Queue::add_schedule`] does for the
    /// payload.
    pub fn upsert_schedule(&self, schedule: &Schedule) -> Result<()> {
        self.put_schedule(schedule, PutSchedule::Upsert)
    }

    fn put_schedule(&self, schedule: &Schedule, put: PutSchedule) -> Result<()> {
        let store = self.store()?;
        check_payload(&schedule.payload, self.max_payload_len).map_err(|err| {
            Error::new(
                err.kind(),
                format!("schedule '{}': {}", schedule.name, err.message()),
            )
        })?;
        let mut schedule = schedule.clone();
        schedule.max_attempts.get_or_insert(self.max_attempts);
        store.put_schedule(&schedule, put, now_unix_ms())?;
        self.slots.forget();
        // Waiting pulls wake to bound their waits by the new slot.
        self.bell.ring();
        Ok(())
    }

    /// This queue's schedules, by name, with whether each is paused and
    /// its next slot.
    pub fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        self.store()?.schedules()
    }

    /// Deletes the schedule `name` of this queue; tasks it enqueued stay.
    /// Fails with [`ErrorKind::InvalidArgument`] when there is none.
    pub fn remove_schedule(&self, name: &str) -> Result<()> {
        let found = self.store()?.remove_schedule(name)?;
        self.slots.forget();
        self.found_schedule(name, found)
    }

    /// Pauses the schedule `name` of this queue: its slots are skipped
    /// until [`Queue::resume_schedule`]. Pausing a paused schedule does
    /// nothing. Fails with [`ErrorKind::InvalidArgument`] when there is
    /// none.
    pub fn pause_schedule(&self, name: &str) -> Result<()> {
        self.set_schedule_paused(name, true)
    }

    /// Resumes the schedule `name` of this queue: it goes on from its
    /// first slot at or after now (the slots that fell while it was paused
    /// are skipped, whatever its catch-up policy). Resuming a schedule not
    /// paused does nothing. Fails with [`ErrorKind::InvalidArgument`] when
    /// there is none, or when its stored timetable can no longer be read
    /// (a pull then paused it: replace it to mend it).
    pub fn resume_schedule(&self, name: &str) -> Result<()> {
        self.set_schedule_paused(name, false)?;
        self.bell.ring();
        Ok(())
    }

    fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<()> {
        let found = self
            .store()?
            .set_schedule_paused(name, paused, now_unix_ms())?;
        self.slots.forget();
        self.found_schedule(name, found)
    }

    fn found_schedule(&self, name: &str, found: bool) -> Result<()> {
        if !found {
            return Err(Error::invalid_argument(format!(
                "queue '{}' has no schedule named '{name}'",
                self.name
            )));
        }
        Ok(())
    }

    /// Enqueues the task of every due slot of this queue's schedules (by
    /// each one's catch-up policy) and says how many tasks it stored. Any
    /// number of handles, processes and machines may call it at once: each
    /// slot is enqueued exactly once, in the transaction that moves its
    /// schedule on, under the unique key `schedule:<name>:<slot ms>`.
    /// Pulls call it by themselves when a slot is due, so a worker needs no
    /// other scheduler; call it where nothing pulls.
    pub fn run_due_schedules(&self) -> Result<u64> {
        let store = self.store()?;
        let stored = store.run_due_schedules(now_unix_ms())?;
        self.slots.forget();
        if stored > 0 {
            self.bell.ring();
        }
        Ok(stored)
    }

    /// Claims up to `max` ready tasks at once, first driving the queue's
    /// due schedules; returns them with the next slot of the schedules.
    /// The cached next slot is trusted up to [`SLOT_CACHE_BUSY`], so a
    /// worker that keeps finding tasks pays no read for schedules; one
    /// that finds none reads it again once [`SLOT_CACHE_IDLE`] old, and
    /// claims again if that enqueued a task.
    fn claim_now(
        &self,
        store: &dyn Store,
        max: usize,
        lease: i64,
    ) -> Result<(Vec<Task>, Option<i64>)> {
        let (next_slot, _) = self.drive_due_schedules(store, SLOT_CACHE_BUSY)?;
        let tasks = store.claim(max, now_unix_ms(), lease)?;
        if !tasks.is_empty() {
            return Ok((tasks, next_slot));
        }
        let (next_slot, stored) = self.drive_due_schedules(store, SLOT_CACHE_IDLE)?;
        if stored == 0 {
            return Ok((tasks, next_slot));
        }
        Ok((store.claim(max, now_unix_ms(), lease)?, next_slot))
    }

    /// Drives the queue's due schedules when the next slot cached (read
    /// again when older than `max_age`, so that schedules written through
    /// other handles are seen) says one is due; returns the next slot, on
    /// the engine's clock, for a waiting pull to wake at, and how many
    /// tasks were stored.
    fn drive_due_schedules(&self, store: &dyn Store, max_age: i64) -> Result<(Option<i64>, u64)> {
        let now = now_unix_ms();
        let next = match self.slots.get(now, max_age) {
            Some(next) => next,
            None => self.slots.set(store.next_schedule_slot(now)?, now),
        };
        if next.is_none_or(|at| at > now) {
            return Ok((next, 0));
        }
        let stored = store.run_due_schedules(now)?;
        if stored > 0 {
            self.bell.ring();
        }
        Ok((self.slots.set(store.next_schedule_slot(now)?, now), stored))
    }

    /// Tries to claim, then waits for a reason to try again: a ring of the
    /// bell (a write to the queue, in this process or another), a commit
    /// seen through the change counter (looked at as often as the backend
    /// says: see [`Store::watch_other_processes`]), or a delayed
    /// task or a lease coming due. A wake-up first asks, with a read,
    /// whether the queue has a task to claim now, and claims (a write,
    /// which waits for the write lock) only then: commits to other queues
    /// or tables of the file cost a waiter a read, not a transaction.
    fn claim(&self, max: usize, options: &PullOptions) -> Result<Vec<Task>> {
        let store = self.store()?;
        let lease = options.lease.as_millis() as i64;
        if options.wait.is_zero() {
            return Ok(self.claim_now(store, max, lease)?.0);
        }
        let deadline = Instant::now() + options.wait;
        let _watch = options.cancel.as_ref().map(|token| token.watch(&self.bell));
        let stopped = || {
            self.interrupted.is_cancelled()
                || options
                    .cancel
                    .as_ref()
                    .is_some_and(|token| token.is_cancelled())
        };
        let poll_interval = store.watch_other_processes();
        // Read before claiming or asking, so a write that lands between
        // them and the sleep still ends the sleep.
        let mut seen = Seen::now(&self.bell, store)?;
        let mut now = now_unix_ms();
        let mut claimable = Some(now);
        let mut next_slot = None;
        loop {
            if claimable.is_some_and(|at| at <= now) {
                let (tasks, slot) = self.claim_now(store, max, lease)?;
                next_slot = slot;
                if !tasks.is_empty() {
                    return Ok(tasks);
                }
                claimable = store.next_claimable(now)?.filter(|&at| at > now);
            }
            let due = wake_due(claimable, next_slot, now);
            let Some(woken) =
                self.sleep_until_woken(store, &seen, due, deadline, poll_interval, stopped)?
            else {
                return Ok(Vec::new());
            };
            (seen, now) = (woken.seen, woken.now);
            // A wake-up may come from a schedule written elsewhere: the
            // slot just read is the one to trust.
            self.slots.set(woken.look.next_slot, now);
            let (slot, stored) = self.drive_due_schedules(store, SLOT_CACHE_BUSY)?;
            next_slot = slot;
            claimable = if stored > 0 {
                Some(now)
            } else {
                woken.look.claimable
            };
        }
    }

    /// Sleeps until the bell rings, the change counter moves or `due`
    /// comes, and returns what it saw then, or `None` once `deadline`
    /// passes; it looks at the change counter every `poll_interval`. A
    /// wake-up that shows none of these sleeps again, so the caller claims
    /// only when something may have changed. Each wake-up is one read of
    /// the store ([`Store::look`]). A stop asked for is an
    /// [`ErrorKind::Interrupted`] error.
    fn sleep_until_woken(
        &self,
        store: &dyn Store,
        seen: &Seen,
        due: Option<Instant>,
        deadline: Instant,
        poll_interval: Duration,
        stopped: impl Fn() -> bool,
    ) -> Result<Option<Woken>> {
        loop {
            if stopped() {
                return Err(Error::new(
                    ErrorKind::Interrupted,
                    "the wait for a task was interrupted",
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let until = deadline
                .min(now + poll_interval)
                .min(due.unwrap_or(deadline));
            self.bell.sleep(seen.rings, until, &stopped);
            if stopped() {
                continue;
            }
            let came_due = due.is_some_and(|due| Instant::now() >= due);
            // Rings first, then the store, as in `Seen::now`.
            let rings = self.bell.rings();
            let unless_changed = (rings == seen.rings && !came_due).then_some(seen.changes);
            let now = now_unix_ms();
            if let Some(look) = store.look(now, unless_changed)? {
                let seen = Seen {
                    rings,
                    changes: look.changes,
                };
                return Ok(Some(Woken { seen, look, now }));
            }
        }
    }

    /// Completes the delivery named by `receipt`: the task is deleted, or
    /// kept as done on a handle opened with history. Succeeds as long as no
    /// one else has taken the task since (even past the lease's expiry);
    /// otherwise, or when the task was already finished, fails with
    /// [`ErrorKind::NotHeld`] and changes nothing. A task cancelled while
    /// the delivery held it ends as cancelled, and this fails, here and in
    /// every call that takes a receipt, with [`ErrorKind::Cancelled`]. A
    /// receipt from another store (another file, or another PostgreSQL
    /// schema) fails, here and in every call that takes one, with
    /// [`ErrorKind::InvalidArgument`].
    pub fn finish(&self, receipt: Receipt) -> Result<()> {
        let store = self.store()?;
        check_receipt(store, receipt)?;
        let held = store.finish(&[receipt], now_unix_ms())?;
        // A finish frees a slot of a concurrency limit.
        self.bell.ring();
        if !held[0] {
            return Err(not_current(store, receipt));
        }
        Ok(())
    }

    /// Completes the delivery named by `receipt`, as [`Queue::finish`]
    /// does, and keeps `result` (a JSON text, at most the payload limit)
    /// with the task, for any process to read ([`Queue::task`]) or wait
    /// for ([`Queue::wait_for`]): on a handle without history for
    /// [`OpenOptions::result_retention`], with history as long as the done
    /// task. A result that is too long or not JSON fails with
    /// [`ErrorKind::InvalidArgument`] or [`ErrorKind::InvalidJson`] and
    /// changes nothing: the task stays held.
    pub fn finish_with_result(&self, receipt: Receipt, result: &str) -> Result<()> {
        let store = self.store()?;
        check_json("result", result, self.max_payload_len)?;
        check_receipt(store, receipt)?;
        let held =
            store.finish_with_result(receipt, result, now_unix_ms(), self.result_retention)?;
        // A finish frees a slot of a concurrency limit, and ends a task
        // that may be waited for.
        self.bell.ring();
        if !held {
            return Err(not_current(store, receipt));
        }
        Ok(())
    }

    /// Completes the delivery named by `receipt` and claims the next ready
    /// task in the same transaction: a worker draining a backlog pays one
    /// commit (one flush at [`crate::Durability::Full`]) per task instead
    /// of two. It never waits: when it returns `None` (the finish done, no
    /// task ready), wait with [`Queue::pull`]. Options with a wait are
    /// refused, so that an error always means nothing was done. Fails with
    /// [`ErrorKind::NotHeld`], finishing and claiming nothing, when the
    /// delivery is no longer current (or [`ErrorKind::Cancelled`]: see
    /// [`Queue::finish`]).
    pub fn finish_and_pull(&self, receipt: Receipt, options: &PullOptions) -> Result<Option<Task>> {
        let store = self.store()?;
        if !options.wait.is_zero() {
            return Err(Error::invalid_argument(
                "finish-and-pull does not wait: when it finds no task, wait with pull",
            ));
        }
        check_receipt(store, receipt)?;
        let lease = options.lease.as_millis() as i64;
        let (_, next) = store
            .finish_and_claim(&[receipt], IfNotHeld::Refuse, now_unix_ms(), lease, 1)
            .map_err(|err| or_cancelled(store, receipt, err))?;
        if next.is_empty() {
            // The slot it freed is not taken again, and the task may be
            // waited for.
            self.bell.ring();
        }
        Ok(stamped(store, next).pop())
    }

    /// Completes many deliveries and claims up to `max` ready tasks, in one
    /// transaction: a worker's finished tasks and the claims of its free
    /// handlers share one commit (one flush at
    /// [`crate::Durability::Full`]). Answers for each receipt what
    /// [`Queue::finish`] would have: `Ok` (now complete), or an error of
    /// kind [`ErrorKind::NotHeld`] or [`ErrorKind::Cancelled`] for a
    /// delivery no longer current, which changes nothing and stops neither
    /// the rest nor the claim. Claims as [`Queue::pull_batch`] does, in its
    /// order, but never waits (options with a wait are refused); `max` 0
    /// claims nothing.
    pub fn finish_and_pull_batch(
        &self,
        receipts: &[Receipt],
        options: &PullOptions,
        max: usize,
    ) -> Result<(Vec<Result<()>>, Vec<Task>)> {
        let store = self.store()?;
        if !options.wait.is_zero() {
            return Err(Error::invalid_argument(
                "finish-and-pull does not wait: when it finds no task, wait with pull",
            ));
        }
        for receipt in receipts {
            check_receipt(store, *receipt)?;
        }
        if receipts.is_empty() && max == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let lease = options.lease.as_millis() as i64;
        let now = now_unix_ms();
        let (held, next) = store.finish_and_claim(receipts, IfNotHeld::Skip, now, lease, max)?;
        if !receipts.is_empty() {
            self.bell.ring();
        }
        // The finishes are committed whatever the answers for those not
        // held say (reading them may fail, as any read).
        let finished = receipts
            .iter()
            .zip(held)
            .map(|(&receipt, held)| {
                if held {
                    Ok(())
                } else {
                    Err(not_current(store, receipt))
                }
            })
            .collect();
        Ok((finished, stamped(store, next)))
    }

    /// Completes many deliveries in one transaction and says, for each,
    /// whether it was still held (and is now complete); those not held
    /// change nothing, as with [`Queue::finish`].
    pub fn finish_batch(&self, receipts: &[Receipt]) -> Result<Vec<bool>> {
        let store = self.store()?;
        if receipts.is_empty() {
            return Ok(Vec::new());
        }
        for receipt in receipts {
            check_receipt(store, *receipt)?;
        }
        let held = store.finish(receipts, now_unix_ms())?;
        for (&receipt, _) in receipts.iter().zip(&held).filter(|(_, &held)| !held) {
            // The finishes are committed whatever this says: a task whose
            // cancellation waited for it that is not ended here is ended
            // by the next recovery.
            let _ = store.end_cancelled(receipt, now_unix_ms());
        }
        self.bell.ring();
        Ok(held)
    }

    /// Ends the delivery named by `receipt` as failed, keeping `reason`
    /// (cut to [`MAX_REASON_LEN`] bytes) as the task's last error. The task
    /// is retried after the queue's back-off ([`Failed::RetryAt`]), or,
    /// when this delivery was its last attempt, becomes dead
    /// ([`Failed::Dead`]). Fails with [`ErrorKind::NotHeld`], changing
    /// nothing, when the delivery is no longer current (or
    /// [`ErrorKind::Cancelled`]: see [`Queue::finish`]), and with
    /// [`ErrorKind::InvalidArgument`] for a reason holding a NUL byte.
    pub fn fail(&self, receipt: Receipt, reason: &str) -> Result<Failed> {
        let store = self.store()?;
        if reason.contains('\0') {
            return Err(Error::invalid_argument(
                "the failure reason contains a NUL byte (C callers could not read it back)",
            ));
        }
        check_receipt(store, receipt)?;
        let failed = store
            .fail(
                receipt,
                cut_at_char_boundary(reason, MAX_REASON_LEN),
                now_unix_ms(),
                &self.retry_backoff,
            )
            .map_err(|err| or_cancelled(store, receipt, err))?;
        // A retry readies a task; either way, a slot of a limit is free.
        self.bell.ring();
        Ok(failed)
    }

    /// Renews the lease of a held task: it now expires `lease` from now (1
    /// ms to one year). Fails with [`ErrorKind::NotHeld`], changing
    /// nothing, when the delivery is no longer current, and with
    /// [`ErrorKind::Cancelled`] when the task was cancelled: stop working
    /// on it (see [`Queue::finish`]). A lease that already expired may be
    /// renewed while nobody took the task, except on a queue at its
    /// concurrency limit: the expired lease held no slot, another claim may
    /// have taken it, and renewing would put the queue over its limit, so
    /// that answers [`ErrorKind::NotHeld`] too.
    pub fn extend(&self, receipt: Receipt, lease: Duration) -> Result<()> {
        let store = self.store()?;
        check_lease(lease)?;
        check_receipt(store, receipt)?;
        store
            .extend(receipt, now_unix_ms(), lease.as_millis() as i64, None)
            .map_err(|err| or_cancelled(store, receipt, err))
    }

    /// Renews the lease of a held task, as [`Queue::extend`] does, and
    /// records `progress` (a JSON text, at most the payload limit) with the
    /// task, for anyone to read ([`TaskInfo::progress`]), the next delivery
    /// of the task included. Progress that is too long or not JSON fails
    /// with [`ErrorKind::InvalidArgument`] or [`ErrorKind::InvalidJson`]
    /// and changes nothing.
    pub fn extend_with_progress(
        &self,
        receipt: Receipt,
        lease: Duration,
        progress: &str,
    ) -> Result<()> {
        let store = self.store()?;
        check_lease(lease)?;
        check_json("progress", progress, self.max_payload_len)?;
        check_receipt(store, receipt)?;
        store
            .extend(
                receipt,
                now_unix_ms(),
                lease.as_millis() as i64,
                Some(progress),
            )
            .map_err(|err| or_cancelled(store, receipt, err))
    }

    /// Hands a held task back to run again `delay` from now (0 to 366
    /// days), without counting this delivery as an attempt: for a worker
    /// that cannot do the task yet (a resource is busy, a limit of its
    /// own). The delivery ends, as with a finish. Fails with
    /// [`ErrorKind::NotHeld`], changing nothing, when the delivery is no
    /// longer current, and with [`ErrorKind::Cancelled`] when the task was
    /// cancelled meanwhile.
    pub fn snooze(&self, receipt: Receipt, delay: Duration) -> Result<()> {
        let store = self.store()?;
        check_delay(delay)?;
        check_receipt(store, receipt)?;
        store
            .snooze(receipt, now_unix_ms(), delay.as_millis() as i64)
            .map_err(|err| or_cancelled(store, receipt, err))?;
        // Ready again, or at least a slot of a limit free.
        self.bell.ring();
        Ok(())
    }

    /// Cancels task `id` of this queue, keeping `reason` (cut to
    /// [`MAX_REASON_LEN`] bytes; empty for none) as its last error. A
    /// pending, delayed or dead task leaves the line at once; a leased one
    /// is never delivered again, and its holder learns of it at its next
    /// extend, finish, fail or snooze, which fail with
    /// [`ErrorKind::Cancelled`] (see [`Cancelled`]). If the holder never
    /// calls again (it was killed), the task ends once its lease has run
    /// out, at the next claim of any queue of the file or a
    /// [`Queue::recover`]: its ordered group and the tasks waiting for it
    /// then go on (kept as history when the handle that ends it keeps
    /// history). Cancelling a cancelled
    /// task again does nothing and says so again. Fails with
    /// [`ErrorKind::InvalidArgument`], changing nothing, when the queue has
    /// no task `id` (a task cancelled on a handle without history is gone)
    /// or the task is done.
    pub fn cancel_task(&self, id: i64, reason: &str) -> Result<Cancelled> {
        let store = self.store()?;
        if reason.contains('\0') {
            return Err(Error::invalid_argument(
                "the cancellation reason contains a NUL byte (C callers could not read it back)",
            ));
        }
        store.cancel_task(
            id,
            cut_at_char_boundary(reason, MAX_REASON_LEN),
            now_unix_ms(),
        )
    }

    /// Pauses this queue for every process on its file (or PostgreSQL
    /// schema), until [`Queue::resume`] or the time `pause` names: pulls
    /// find nothing meanwhile (a waiting pull keeps waiting, and takes a
    /// task once the pause ends), pushes are stored as usual. Pausing a
    /// paused queue replaces its pause. Fails with
    /// [`ErrorKind::InvalidArgument`] for an end time not in the future.
    pub fn pause(&self, pause: Pause) -> Result<()> {
        let store = self.store()?;
        if let Pause::UntilUnixMs(until) = pause {
            if until <= now_unix_ms() {
                return Err(Error::invalid_argument(format!(
                    "a pause must end in the future, got {until} ms since the Unix epoch"
                )));
            }
        }
        store.set_pause(Some(pause))
    }

    /// Ends this queue's pause, if any, and wakes its waiting pulls in
    /// every process.
    pub fn resume(&self) -> Result<()> {
        self.store()?.set_pause(None)?;
        self.bell.ring();
        Ok(())
    }

    /// This queue's pause in force, or `None` when it is not paused.
    pub fn paused(&self) -> Result<Option<Pause>> {
        self.store()?.pause(now_unix_ms())
    }

    /// Limits this queue to `limit` tasks leased at once across every
    /// process and machine on its file (or PostgreSQL schema), or with
    /// `None` removes the limit. Claims take no more than the slots left,
    /// inside their transaction, so the limit holds under any race; a
    /// lease that expired, and a task recovered from a dead holder, hold
    /// no slot. Tasks already leased beyond a new, lower limit keep their
    /// leases. Fails with [`ErrorKind::InvalidArgument`] for a limit of 0.
    pub fn set_concurrency_limit(&self, limit: Option<u32>) -> Result<()> {
        let store = self.store()?;
        if limit == Some(0) {
            return Err(Error::invalid_argument(
                "a concurrency limit must be at least 1 (pause the queue to stop its claims)",
            ));
        }
        store.set_concurrency_limit(limit)?;
        self.bell.ring();
        Ok(())
    }

    /// Allows at most `limit.claims` deliveries of this queue in any window
    /// of length `limit.per`, across every process and machine on its file
    /// (or PostgreSQL schema), with no coordinator: each claim takes a
    /// slot of the queue's that was last used a window ago or more, inside
    /// its transaction, or claims nothing (a waiting pull waits for a slot).
    /// Windows are measured on the claims' times, whole milliseconds read
    /// once each claim holds the write lock (on PostgreSQL, the server's
    /// clock). Setting the rate in force again changes nothing, so every
    /// worker may declare it at start without granting a new burst; a
    /// changed rate keeps the most recent uses (as many as it has
    /// claims), and a new one starts with every slot free. `None` removes
    /// the limit.
    /// Fails with [`ErrorKind::InvalidArgument`] for 0 claims, more than
    /// [`MAX_RATE_CLAIMS`], or a window outside 1 ms to 366 days.
    pub fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<()> {
        let store = self.store()?;
        if let Some(limit) = limit {
            if limit.claims == 0 || limit.claims > MAX_RATE_CLAIMS {
                return Err(Error::invalid_argument(format!(
                    "a rate limit allows 1 to {} claims per window, got {}",
                    MAX_RATE_CLAIMS, limit.claims
                )));
            }
            check_lease(limit.per).map_err(|_| {
                Error::invalid_argument(format!(
                    "a rate limit's window must be between 1 ms and 366 days, got {} ms",
                    limit.per.as_millis()
                ))
            })?;
        }
        store.set_rate_limit(limit)?;
        self.bell.ring();
        Ok(())
    }

    /// This queue's rate limit, or `None` when it has none.
    pub fn rate_limit(&self) -> Result<Option<RateLimit>> {
        self.store()?.rate_limit()
    }

    /// This queue's concurrency limit, or `None` when it has none.
    pub fn concurrency_limit(&self) -> Result<Option<u32>> {
        self.store()?.concurrency_limit()
    }

    /// Takes back every leased task of this queue whose lease expired or
    /// whose holder process no longer exists on this machine, and says how
    /// many: each is pending again, or dead if that delivery was its last
    /// attempt. Tasks held by live processes (this one included) are
    /// untouched, so calling this at every start-up is safe with several
    /// processes. On PostgreSQL, a holder is gone when its session on the
    /// server ended (its process, machine or connection died), wherever it
    /// ran.
    pub fn recover(&self) -> Result<u64> {
        let recovered = self.store()?.recover(now_unix_ms())?;
        if recovered > 0 {
            self.bell.ring();
        }
        Ok(recovered)
    }

    /// How many tasks of this queue are in `state`. A leased task whose
    /// lease expired counts as leased until it is claimed again or
    /// recovered.
    pub fn count(&self, state: TaskState) -> Result<u64> {
        self.store()?.count(state)
    }

    /// How many ordered groups of this queue have tasks waiting for their
    /// turn behind the group's earlier tasks ([`PushOptions::group`]).
    /// Their tasks count as pending.
    pub fn groups_waiting(&self) -> Result<u64> {
        self.store()?.groups_waiting()
    }

    /// How long the task that has been ready longest has waited, or `None`
    /// when no task is ready.
    pub fn oldest_ready_age(&self) -> Result<Option<Duration>> {
        let now = now_unix_ms();
        let oldest = self.store()?.oldest_ready(now)?;
        Ok(
            oldest
                .map(|ready_at| Duration::from_millis(now.saturating_sub(ready_at).max(0) as u64)),
        )
    }

    /// A page of this queue's tasks in `state`: up to `limit` of them with
    /// ids above `after_id`, by id, oldest first. Start with `after_id` 0
    /// and pass the last id of each page to get the next. On SQLite a page
    /// reads the ids that follow `after_id` while the state's tasks are
    /// found among them, else the state's own indexes; it is a call for
    /// tools, not for a worker's loop.
    pub fn list(&self, state: TaskState, after_id: i64, limit: usize) -> Result<Vec<TaskInfo>> {
        self.store()?.list(state, ListFrom::After(after_id), limit)
    }

    /// A page of this queue's tasks in `state`, newest first: up to `limit`
    /// of them with ids below `before_id`. Start with `before_id`
    /// `i64::MAX` and pass the last id of each page to get the next. Reads
    /// as [`Queue::list`] does.
    pub fn list_newest_first(
        &self,
        state: TaskState,
        before_id: i64,
        limit: usize,
    ) -> Result<Vec<TaskInfo>> {
        self.store()?
            .list(state, ListFrom::Before(before_id), limit)
    }

    /// The task of this queue stored under the unique key `key` (see
    /// [`PushOptions::unique_key`]), if any: the task holding the key, or
    /// the last one given it, which keeps it once done or dead until a later
    /// push with the key takes it (a cancelled task gives it up). One index
    /// lookup.
    pub fn task_with_unique_key(&self, key: &str) -> Result<Option<TaskInfo>> {
        check_text("a unique key", key, MAX_UNIQUE_KEY_LEN)?;
        self.store()?.task_with_unique_key(key)
    }

    /// When this queue's tasks were due, claimed and finished, for the
    /// time they waited for a worker and ran ([`TaskTiming`]): the tasks
    /// leased now (or whose cancellation waits for their holder) whose
    /// last claim was at or after `since_unix_ms`, and the done and dead
    /// tasks still stored that ended at or after it. A monitor that calls
    /// it every few seconds sees each claim and each end once, if it
    /// counts only the times between its last call and this one.
    ///
    /// Only stored rows are seen: a task that was claimed and then went
    /// back to pending (failed with a retry left, snoozed, or taken back
    /// after its lease ran out) before the call is not, nor is a task
    /// finished on a handle without history and so deleted (nor cancelled
    /// ones), nor a task purged meanwhile. A claim made again overwrites
    /// the time of the one before. Tasks claimed by a tq older than this
    /// one have no claim time and are left out.
    ///
    /// Each kind (leased, cancelling, done, dead) holds at most
    /// [`MAX_TIMINGS`] tasks, the ended ones earliest end first, so a call
    /// stays cheap: a later call from the last end time seen reads on
    /// (the tasks that ended at that very time come again). It reads
    /// through the indexes of leased, done and dead tasks only, never the
    /// whole table. Times are the store's (the server's, on PostgreSQL),
    /// in milliseconds since the Unix epoch.
    pub fn timings_since(&self, since_unix_ms: i64) -> Result<Vec<TaskTiming>> {
        self.store()?.timings_since(since_unix_ms, MAX_TIMINGS)
    }

    /// Task `id` of this queue as it is now, with its result and progress;
    /// `None` when the queue has no such task (never pushed, or ended and
    /// not kept: see [`Queue::finish_with_result`]).
    pub fn task(&self, id: i64) -> Result<Option<TaskInfo>> {
        self.store()?.task(id)
    }

    /// Waits up to `timeout` (at most one year) for task `id` of this queue
    /// to end, and returns it as it ended: [`TaskState::Done`] with its
    /// result, [`TaskState::Dead`] or [`TaskState::Cancelled`] with its
    /// reason as last error; `None` when the timeout passed first. A task
    /// that has ended already answers at once. The wait only reads: it
    /// wakes when a write of this process, or one of another process that
    /// rings the queue's waiters, ends a task, else looks at the store as
    /// often as a waiting pull does (see [`Queue::pull`]). A task the wait
    /// found not yet ended and that then left the store (finished without
    /// a result on a handle without history, which deletes it, or cancelled
    /// there, or purged) has ended too: the wait returns it as it last saw
    /// it, as [`TaskState::Done`] without a result or end time (the store
    /// kept nothing of how it ended). Fails with
    /// [`ErrorKind::InvalidArgument`] when the queue has no task `id` when
    /// the wait begins, or it ended before without being kept (on a handle
    /// without history, finish it with a result to wait for it), and with
    /// [`ErrorKind::Interrupted`] when `cancel` is cancelled or after
    /// [`Queue::interrupt`].
    pub fn wait_for(
        &self,
        id: i64,
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<TaskInfo>> {
        let store = self.store()?;
        let timeout = check_duration("the wait", timeout, Duration::ZERO)?;
        let deadline = Instant::now() + timeout;
        let _watch = cancel.map(|token| token.watch(&self.bell));
        let stopped =
            || self.interrupted.is_cancelled() || cancel.is_some_and(|token| token.is_cancelled());
        let poll_interval = store.watch_other_processes();
        // Read before the task, so a write that lands between them and the
        // sleep still ends the sleep.
        let mut seen = Seen::now(&self.bell, store)?;
        let mut last_seen: Option<TaskInfo> = None;
        loop {
            match (store.task(id)?, last_seen.take()) {
                (Some(task), _) if task.has_ended() => return Ok(Some(task)),
                (Some(task), _) => last_seen = Some(task),
                // Gone since the last look: ended, and not kept.
                (None, Some(task)) => {
                    return Ok(Some(TaskInfo {
                        state: TaskState::Done,
                        result: None,
                        waiting_for: Vec::new(),
                        finished_at_unix_ms: None,
                        ..task
                    }))
                }
                (None, None) => {
                    return Err(Error::invalid_argument(format!(
                        "queue '{}' has no task {id} to wait for: it was never pushed, or it \
                         ended and was not kept (finish it with a result, or keep history)",
                        self.name
                    )))
                }
            }
            loop {
                if stopped() {
                    return Err(Error::new(
                        ErrorKind::Interrupted,
                        "the wait for a task's outcome was interrupted",
                    ));
                }
                let now = Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                self.bell
                    .sleep(seen.rings, deadline.min(now + poll_interval), stopped);
                let now_seen = Seen::now(&self.bell, store)?;
                if now_seen != seen {
                    seen = now_seen;
                    break;
                }
            }
        }
    }

    /// Waits up to `timeout` for a reason to stop working on the task of
    /// `receipt`: its cancellation ([`Stop::Cancelled`], by
    /// [`Queue::cancel_task`] in any process), or the delivery being over
    /// ([`Stop::NotHeld`]); `None` when the timeout passed first. A holder
    /// runs it beside its work (from another thread), to stop at once
    /// rather than at its next heartbeat. It only reads: once at the start,
    /// then when a cancellation of the queue rings (in this process at
    /// once, in others through the file's wake words or PostgreSQL's
    /// notifications), and about once a second as a safety net (every
    /// 20 ms on a file whose wake words this process could not map).
    ///
    /// Ends with [`ErrorKind::Interrupted`] when `cancel` is cancelled
    /// (typically when the work is done) or after [`Queue::interrupt`].
    /// Fails with [`ErrorKind::InvalidArgument`] for a receipt from
    /// another store.
    pub fn wait_for_cancellation(
        &self,
        receipt: Receipt,
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<Stop>> {
        let store = self.store()?;
        let timeout = check_duration("the wait", timeout, Duration::ZERO)?;
        check_receipt(store, receipt)?;
        let deadline = Instant::now() + timeout;
        let (bell, safety_net) = store.cancellations()?;
        let _watches = (
            self.interrupted.watch(&bell),
            cancel.map(|token| token.watch(&bell)),
        );
        let stopped =
            || self.interrupted.is_cancelled() || cancel.is_some_and(|token| token.is_cancelled());
        loop {
            if stopped() {
                return Err(Error::new(
                    ErrorKind::Interrupted,
                    "the wait for a cancellation was interrupted",
                ));
            }
            // Read before the delivery, so a cancellation that lands
            // between them and the sleep still ends the sleep.
            let rings = bell.rings();
            if let Some(stop) = store.delivery(receipt)? {
                return Ok(Some(stop));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            bell.sleep(rings, deadline.min(now + safety_net), stopped);
        }
    }

    /// Waits up to `timeout` for a change that may end a wait for a task's
    /// outcome or for a delivery's end, so that one thread can wait on
    /// behalf of many such waits and let each read its task again: a write
    /// to this queue in this process, a cancellation recorded in any
    /// process, or a commit seen through the change counter (looked at as
    /// often as a waiting pull does). Returns the queue's change mark then,
    /// or `None` when the timeout passed first.
    ///
    /// `seen` is a mark an earlier call returned: a change since then
    /// returns at once, so a caller that takes a mark (a call with a zero
    /// timeout), reads what it waits for, then waits with that mark misses
    /// nothing. A cancellation returns even when the mark did not move.
    /// Ends with [`ErrorKind::Interrupted`] when `cancel` is cancelled or
    /// after [`Queue::interrupt`].
    pub fn wait_for_change(
        &self,
        seen: u64,
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<u64>> {
        let store = self.store()?;
        let timeout = check_duration("the wait", timeout, Duration::ZERO)?;
        let deadline = Instant::now() + timeout;
        let poll_interval = store.watch_other_processes();
        let (cancellations, _) = store.cancellations()?;
        let cancellations_seen = cancellations.rings();
        let _watch = cancel.map(|token| token.watch(&self.bell));
        let interrupted =
            || self.interrupted.is_cancelled() || cancel.is_some_and(|token| token.is_cancelled());
        let cancellation_rang = || cancellations.rings() != cancellations_seen;
        let stopped = || interrupted() || cancellation_rang();
        // Both counters only grow, so their sum moves whenever either does.
        // Rings first, then the store, as in `Seen::now`.
        let mark_now = || -> Result<(u64, u64)> {
            let rings = self.bell.rings();
            Ok((rings, rings.wrapping_add(store.change_counter()? as u64)))
        };
        let (mut rings, mut mark) = mark_now()?;
        let mut looked = Instant::now();
        loop {
            if interrupted() {
                return Err(Error::new(
                    ErrorKind::Interrupted,
                    "the wait for a change was interrupted",
                ));
            }
            if mark != seen || cancellation_rang() {
                return Ok(Some(mark));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let next_look = looked + poll_interval;
            // Asleep on the queue's bell, it looks at the cancellations'
            // bell (rung in this process only) between naps.
            let nap_end = deadline.min(next_look).min(now + CANCELLATIONS_LOOK);
            self.bell.sleep(rings, nap_end, stopped);
            if self.bell.rings() != rings || Instant::now() >= next_look {
                (rings, mark) = mark_now()?;
                looked = Instant::now();
            }
        }
    }

    /// Makes the dead task `id` of this queue pending again, ready now,
    /// with all its attempts ahead of it; a task of an ordered group waits,
    /// behind its group's newest unfinished task, for its turn. Fails with
    /// [`ErrorKind::InvalidArgument`] when this queue has no dead task `id`.
    pub fn retry_dead(&self, id: i64) -> Result<()> {
        if self.store()?.retry_dead(Some(id), now_unix_ms())? == 0 {
            return Err(Error::invalid_argument(format!(
                "queue '{}' has no dead task {id}",
                self.name
            )));
        }
        self.bell.ring();
        Ok(())
    }

    /// Makes every dead task of this queue pending again, as
    /// [`Queue::retry_dead`] does, and says how many.
    pub fn retry_all_dead(&self) -> Result<u64> {
        let retried = self.store()?.retry_dead(None, now_unix_ms())?;
        if retried > 0 {
            self.bell.ring();
        }
        Ok(retried)
    }

    /// Deletes this queue's done, dead or cancelled tasks
    /// ([`TaskState::Done`], [`TaskState::Dead`] or [`TaskState::Cancelled`])
    /// that got there at least `older_than` ago, and
    /// says how many (0 done tasks on a handle without history is normal).
    pub fn purge(&self, state: TaskState, older_than: Duration) -> Result<u64> {
        let store = self.store()?;
        let age = i64::try_from(older_than.as_millis())
            .map_err(|_| Error::invalid_argument("age out of range"))?;
        store.purge(state, now_unix_ms(), age)
    }

    /// Copies the write-ahead log into the database and truncates it,
    /// waiting up to the busy timeout for readers to move on, and reports
    /// the log's size afterwards. tq also does this by itself when the log
    /// grows past 16 MiB; call it at quiet moments to keep the file small.
    /// A PostgreSQL queue has no log file of its own: there it fails with
    /// [`ErrorKind::InvalidArgument`].
    pub fn checkpoint(&self) -> Result<Checkpoint> {
        self.store()?.checkpoint()
    }

    /// The names of the queues in this handle's file (or PostgreSQL schema)
    /// that hold at least one task, in any state, sorted: a few index
    /// lookups per queue, however many tasks there are.
    pub fn queue_names(&self) -> Result<Vec<String>> {
        self.store()?.queue_names()
    }

    /// The highest task id handed out in this handle's file (or PostgreSQL
    /// schema), in any queue; 0 before the first push. Ids are never
    /// reused, so its growth counts the tasks pushed meanwhile. On
    /// PostgreSQL a push refused as a duplicate, or rolled back, uses an id
    /// too.
    pub fn last_id(&self) -> Result<i64> {
        self.store()?.last_id()
    }

    /// The size of the write-ahead log (`-wal` file), in bytes; refused, as
    /// [`Queue::checkpoint`] is, on PostgreSQL.
    pub fn wal_size(&self) -> Result<u64> {
        self.store()?.wal_size()
    }

    /// Ends every wait of a pull on this handle with
    /// [`ErrorKind::Interrupted`], now and from then on (a pull still takes
    /// a task that is ready): call it before stopping worker threads. Safe
    /// from any thread; pulls on other handles are not affected.
    pub fn interrupt(&self) {
        self.interrupted.cancel();
        self.bell.ring();
    }

    /// The backend, once the caller is known to be the process that opened
    /// the handle: SQLite connections must not be used across `fork()`.
    fn store(&self) -> Result<&dyn Store> {
        let pid = std::process::id();
        if pid != self.opened_by_pid {
            return Err(Error::invalid_argument(format!(
                "this handle was opened by process {} and cannot be used in process {pid} \
                 (after fork, open a new handle in the child)",
                self.opened_by_pid
            )));
        }
        Ok(self.store.as_ref())
    }
}

/// How long a pull that finds no task trusts the next slot its handle
/// read of the queue's schedules: a schedule written through another
/// handle is driven by this one's idle pulls within this time (ms).
const SLOT_CACHE_IDLE: i64 = 1000;

/// How long any pull trusts it (ms): even a worker that always finds a
/// task drives a schedule written elsewhere within this time.
const SLOT_CACHE_BUSY: i64 = 60_000;

/// A handle's cached earliest next slot of its queue's schedules, with
/// when it was read (both ms on the engine's clock).
struct SlotCache {
    next: AtomicI64,
    read_at: AtomicI64,
}

/// No slot at all, as cached.
const NO_SLOT: i64 = i64::MAX;

/// Never read, as cached.
const UNREAD: i64 = i64::MIN;

impl Default for SlotCache {
    fn default() -> Self {
        SlotCache {
            next: AtomicI64::new(NO_SLOT),
            read_at: AtomicI64::new(UNREAD),
        }
    }
}

impl SlotCache {
    /// The cached next slot (inner `None`: no schedule), or `None` when
    /// the cache must be read again at `now`, being `max_age` old.
    fn get(&self, now: i64, max_age: i64) -> Option<Option<i64>> {
        let read_at = self.read_at.load(Ordering::Acquire);
        if read_at == UNREAD || now < read_at || now - read_at >= max_age {
            return None;
        }
        let next = self.next.load(Ordering::Acquire);
        Some((next != NO_SLOT).then_some(next))
    }

    /// Caches `next`, read at `now`, and returns it.
    fn set(&self, next: Option<i64>, now: i64) -> Option<i64> {
        self.next.store(next.unwrap_or(NO_SLOT), Ordering::Release);
        self.read_at.store(now, Ordering::Release);
        next
    }

    /// Makes the next look read the store again.
    fn forget(&self) {
        self.read_at.store(UNREAD, Ordering::Release);
    }
}

/// Whether [`Queue::open`] takes `path` for a PostgreSQL database (a
/// `postgres://` or `postgresql://` URL, in any case) rather than an SQLite
/// file.
pub fn is_postgres_url(path: &str) -> bool {
    let lower = path.get(..13).unwrap_or(path).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

#[cfg(feature = "postgres")]
fn open_postgres(url: &str, options: &OpenOptions) -> Result<(Box<dyn Store>, Arc<Bell>)> {
    let store = crate::postgres::PostgresStore::open(url, options)?;
    let bell = store.bell();
    Ok((Box::new(store), bell))
}

#[cfg(not(feature = "postgres"))]
fn open_postgres(_url: &str, _options: &OpenOptions) -> Result<(Box<dyn Store>, Arc<Bell>)> {
    Err(Error::invalid_argument(
        "this libtq was built without PostgreSQL support (cargo feature `postgres`): \
         it opens SQLite files only",
    ))
}

/// Refuses options a batch cannot take: a unique key names one task.
/// `tasks`, their receipts tied to `store`.
fn stamped(store: &dyn Store, mut tasks: Vec<Task>) -> Vec<Task> {
    let id = store.store_id();
    for task in &mut tasks {
        task.receipt.store = id;
    }
    tasks
}

/// Refuses, before any SQL, a receipt handed out by another store: its id
/// and token could name an unrelated delivery in this one. Other queues of
/// the same store are fine.
/// Why a write by the holder of `receipt` found its delivery not current:
/// the task's cancellation waited for it ([`ErrorKind::Cancelled`], and the
/// task is now ended as cancelled), or it is simply not held.
fn not_current(store: &dyn Store, receipt: Receipt) -> Error {
    match store.end_cancelled(receipt, now_unix_ms()) {
        Ok(true) => Error::new(
            ErrorKind::Cancelled,
            format!(
                "task {} was cancelled while this delivery held it: it will not run again",
                receipt.id
            ),
        ),
        Ok(false) => crate::store::not_held(receipt.id),
        Err(err) => err,
    }
}

/// What a waiting pull (or [`Queue::wait_for`]) has seen of writes to its
/// queue: the bell's rings and the file's change counter, read together
/// so that a write after either one ends the next sleep.
#[derive(PartialEq, Eq)]
struct Seen {
    rings: u64,
    changes: i64,
}

impl Seen {
    fn now(bell: &Bell, store: &dyn Store) -> Result<Seen> {
        Ok(Seen {
            rings: bell.rings(),
            changes: store.change_counter()?,
        })
    }
}

/// What a waiting pull saw when it woke, at `now` on the engine's clock.
struct Woken {
    seen: Seen,
    look: Look,
    now: i64,
}

/// When a waiting pull wakes by itself, `now` being the engine's clock:
/// at the sooner of a task becoming claimable and the schedules' next
/// slot, at least a millisecond from now.
fn wake_due(claimable: Option<i64>, next_slot: Option<i64>, now: i64) -> Option<Instant> {
    let wake = match (claimable, next_slot) {
        (Some(at), Some(slot)) => Some(at.min(slot)),
        (at, slot) => at.or(slot),
    };
    wake.map(|at| Instant::now() + Duration::from_millis(at.saturating_sub(now).max(1) as u64))
}

/// `err`, or, when it says the delivery of `receipt` is not held, why.
fn or_cancelled(store: &dyn Store, receipt: Receipt, err: Error) -> Error {
    if err.kind() == ErrorKind::NotHeld {
        not_current(store, receipt)
    } else {
        err
    }
}

fn check_receipt(store: &dyn Store, receipt: Receipt) -> Result<()> {
    if receipt.store != store.store_id() {
        return Err(Error::invalid_argument(format!(
            "task {} came from another queue store (another SQLite file, or another \
             PostgreSQL schema or database): finish, fail or extend it through a handle on \
             the store it was pulled from",
            receipt.id
        )));
    }
    Ok(())
}

pub(crate) fn check_batch_options(options: &PushOptions) -> Result<()> {
    if options.unique.is_some() {
        return Err(Error::invalid_argument(
            "a unique key names one task: push tasks with unique keys one at a time",
        ));
    }
    check_items_named(options, 0, "a batch sharing its options")
}

/// Checks that the items `options` waits for come before item `index` of
/// its push, `what`.
pub(crate) fn check_items_named(options: &PushOptions, index: usize, what: &str) -> Result<()> {
    match options.after.iter().find_map(|parent| match *parent {
        Parent::Item(item) if item >= index => Some(item),
        _ => None,
    }) {
        Some(item) => Err(Error::invalid_argument(format!(
            "{what} at index {index} waits for item {item}: a task can wait only for an \
             earlier item of the same push_items"
        ))),
        None => Ok(()),
    }
}

/// The longest start of `text` of at most `max` bytes that ends at a
/// character boundary.
pub(crate) fn cut_at_char_boundary(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Checks that `payload` is one JSON text of at most `limit` bytes.
pub(crate) fn check_payload(payload: &str, limit: usize) -> Result<()> {
    check_json("payload", payload, limit)
}

/// Checks that `text`, the `what` (payload, result, progress), is one JSON
/// text of at most `limit` bytes.
fn check_json(what: &str, text: &str, limit: usize) -> Result<()> {
    if text.len() > limit {
        return Err(Error::invalid_argument(format!(
            "the {what} is {} bytes; this queue's limit is {limit}",
            text.len()
        )));
    }
    serde_json::from_str::<IgnoredAny>(text)
        .map(|_| ())
        .map_err(|err| {
            Error::new(
                ErrorKind::InvalidJson,
                format!("the {what} is not JSON: {err}"),
            )
        })
}

/// Wall-clock time in milliseconds since the Unix epoch: leases and due
/// times are compared across processes, so they use the shared clock.
pub(crate) fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_to_one_queue_does_not_ring_the_bell_of_another() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let path = path.to_str().unwrap();
        let open = |name: &str| {
            let mut options = OpenOptions::new();
            options.queue(name).unwrap();
            Queue::open(path, &options).unwrap()
        };
        let (a, b) = (open("a"), open("b"));
        let seen = a.bell.rings();
        b.push("1", &PushOptions::new()).unwrap();
        assert_eq!(a.bell.rings(), seen, "queue a's waiters were woken");
        let seen = b.bell.rings();
        b.push("2", &PushOptions::new()).unwrap();
        assert!(b.bell.rings() > seen, "queue b's waiters were not woken");
    }
}
