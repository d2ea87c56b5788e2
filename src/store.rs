//! The narrow interface between the engine and a storage backend.
//!
//! [`crate::Queue`] checks arguments, reads the clock, guards against use
//! after `fork()` and waits; a backend only stores and claims. Times are
//! milliseconds since the Unix epoch, read once per call by the engine, so a
//! backend never consults a clock of its own. A backend serves one named
//! queue of its file.

use crate::error::Result;
use crate::options::{NotBefore, PushOptions, RetryBackoff};
use crate::task::{Failed, Pushed, Receipt, Task, TaskInfo, TaskState};

/// A task to store, checked by the engine. It owns its payload: the write
/// may be committed by another thread (see `sqlite/group.rs`).
#[derive(Debug, Clone)]
pub(crate) struct NewTask {
    pub(crate) payload: String,
    pub(crate) run_at: i64,
    pub(crate) priority: i32,
    pub(crate) max_attempts: u32,
    /// The unique key and how long (ms) it stays reserved once done.
    pub(crate) unique: Option<(String, i64)>,
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
        let run_at = match options.not_before {
            NotBefore::Now => now,
            NotBefore::Delay(delay) => now.saturating_add(delay.as_millis() as i64),
            NotBefore::UnixMillis(at) => at,
        };
        NewTask {
            payload: payload.to_owned(),
            run_at,
            priority: options.priority,
            max_attempts: options.max_attempts.unwrap_or(default_max_attempts),
            unique: options.unique.as_ref().map(|unique| {
                (
                    unique.key.clone(),
                    unique.reserved_after_done.as_millis() as i64,
                )
            }),
        }
    }
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

/// What a storage backend does. Every method is one atomic operation: it
/// either happens whole or not at all, and it is safe to call from any
/// number of threads at once.
pub(crate) trait Store: Send + Sync {
    /// Stores the tasks, all or none, and says what happened to each.
    fn push(&self, tasks: Vec<NewTask>, now: i64) -> Result<Vec<Pushed>>;

    /// Claims up to `max` ready tasks (pending and due at `now`, or leased
    /// with a lease expired at `now`), best first, for this process until
    /// `lease_expires_at`, counting an attempt for each. Empty when nothing
    /// is ready.
    fn claim(&self, max: usize, now: i64, lease_expires_at: i64) -> Result<Vec<Task>>;

    /// Completes the deliveries named by `receipts`; says for each whether
    /// it was still current (and is now complete).
    fn finish(&self, receipts: &[Receipt], now: i64) -> Result<Vec<bool>>;

    /// Completes the delivery named by `receipt` and claims the next ready
    /// task, in one transaction; `NotHeld`, changing nothing, when the
    /// delivery is no longer current.
    fn finish_and_claim(
        &self,
        receipt: Receipt,
        now: i64,
        lease_expires_at: i64,
    ) -> Result<Option<Task>>;

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

    /// Moves the lease of a current delivery to `lease_expires_at`;
    /// `NotHeld` when the delivery is no longer current.
    fn extend(&self, receipt: Receipt, lease_expires_at: i64) -> Result<()>;

    /// Takes back every leased task whose lease expired by `now` or whose
    /// holder process is gone (pending again, or dead if that was its last
    /// attempt); returns how many.
    fn recover(&self, now: i64) -> Result<u64>;

    /// How many tasks are in `state`.
    fn count(&self, state: TaskState) -> Result<u64>;

    /// When the ready task that has been ready longest became ready.
    fn oldest_ready(&self, now: i64) -> Result<Option<i64>>;

    /// Up to `limit` tasks in `state` with ids above `after_id`, by id.
    fn list(&self, state: TaskState, after_id: i64, limit: usize) -> Result<Vec<TaskInfo>>;

    /// Makes dead tasks pending again with no attempts used: the one with
    /// `id`, or all of them; returns how many.
    fn retry_dead(&self, id: Option<i64>, now: i64) -> Result<u64>;

    /// Deletes the tasks in `state` (done or dead) that got there at or
    /// before `before`; returns how many.
    fn purge(&self, state: TaskState, before: i64) -> Result<u64>;

    /// Copies the log into the database and truncates it.
    fn checkpoint(&self) -> Result<Checkpoint>;

    /// The size of the write-ahead log, in bytes.
    fn wal_size(&self) -> Result<u64>;

    /// The earliest time after `now` when a task becomes claimable without
    /// any write: a delayed task's due time or a lease's expiry.
    fn next_due(&self, now: i64) -> Result<Option<i64>>;

    /// A number that changes whenever another connection commits to the file.
    fn change_counter(&self) -> Result<i64>;
}
