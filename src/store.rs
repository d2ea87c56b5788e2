//! The narrow interface between the engine and a storage backend.
//!
//! [`crate::Queue`] checks arguments, reads the clock and guards against use
//! after `fork()`; a backend only stores and claims. Times are milliseconds
//! since the Unix epoch, read once per call by the engine, so a backend never
//! consults a clock of its own.

use crate::error::Result;
use crate::task::{Receipt, Task, TaskState};

/// What a storage backend does. Every method is one atomic operation: it
/// either happens whole or not at all, and it is safe to call from any
/// number of threads at once.
pub(crate) trait Store: Send + Sync {
    /// Stores a pending task, ready from `run_at`, and returns its new id.
    fn push(&self, payload: &str, now: i64, run_at: i64) -> Result<i64>;

    /// Claims the oldest ready task (pending and due at `now`, or leased
    /// with a lease expired at `now`) for this process until
    /// `lease_expires_at`, counting the attempt. `None` when nothing is
    /// ready.
    fn claim(&self, now: i64, lease_expires_at: i64) -> Result<Option<Task>>;

    /// Completes the delivery named by `receipt`; fails with `NotHeld` when
    /// it is no longer current.
    fn finish(&self, receipt: Receipt, now: i64) -> Result<()>;

    /// Returns to pending every leased task whose lease expired by `now` or
    /// whose holder process is gone; returns how many.
    fn recover(&self, now: i64) -> Result<u64>;

    /// How many tasks are in `state`.
    fn count(&self, state: TaskState) -> Result<u64>;

    /// Deletes done tasks finished before `finished_before`; returns how many.
    fn purge_done(&self, finished_before: i64) -> Result<u64>;
}
