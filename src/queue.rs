//! The engine's front: [`Queue`] checks arguments, reads the clock, guards
//! against use after `fork()`, and hands each operation to its storage
//! backend.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::de::IgnoredAny;

use crate::error::{Error, ErrorKind, Result};
use crate::options::{NotBefore, OpenOptions, PullOptions, PushOptions};
use crate::sqlite::SqliteStore;
use crate::store::Store;
use crate::task::{Receipt, Task, TaskState};

/// The largest payload any queue accepts, in bytes (SQLite's limit on one
/// value); [`OpenOptions::max_payload_len`] sets a queue's own limit.
pub const MAX_PAYLOAD_LEN: usize = 1_000_000_000;

/// A handle on one queue file. `Queue` is `Send + Sync`: share one handle
/// among threads (calls are ordered inside it) or open several; any number of
/// processes on one host may open the same file.
///
/// A handle belongs to the process that opened it: after `fork()`, every
/// call in the child fails with [`ErrorKind::InvalidArgument`]. The child
/// may open handles of its own; the first one it opens closes the child's
/// copies of its parent's connections, which releases nothing of the
/// parent's (see `sqlite/inherited.rs`).
pub struct Queue {
    store: Box<dyn Store>,
    opened_by_pid: u32,
    max_payload_len: usize,
}

impl Queue {
    /// Opens the queue in the SQLite file at `path`, creating the file and
    /// tq's tables as needed. The file may also hold the application's own
    /// tables; tq only touches tables named `tq_*`.
    ///
    /// Fails with [`ErrorKind::NotADatabase`] (leaving the file as it was)
    /// when it is not an SQLite database or carries a newer tq schema, and
    /// with [`ErrorKind::Io`] when it cannot be opened or created.
    pub fn open(path: &str, options: &OpenOptions) -> Result<Queue> {
        if path.is_empty() {
            return Err(Error::invalid_argument("the path is empty"));
        }
        let store = SqliteStore::open(path, options)?;
        Ok(Queue {
            store: Box::new(store),
            opened_by_pid: std::process::id(),
            max_payload_len: options.max_payload_len,
        })
    }

    /// Stores `payload`, which must be a JSON text, as a new pending task and
    /// returns its id. The bytes are stored exactly as given. Invalid JSON
    /// fails with [`ErrorKind::InvalidJson`], and a payload over the queue's
    /// limit with [`ErrorKind::InvalidArgument`]; either stores nothing.
    pub fn push(&self, payload: &str, options: &PushOptions) -> Result<i64> {
        let store = self.store()?;
        check_payload(payload, self.max_payload_len)?;
        let now = now_unix_ms();
        let run_at = match options.not_before {
            NotBefore::Now => now,
            NotBefore::Delay(delay) => now.saturating_add(delay.as_millis() as i64),
            NotBefore::UnixMillis(at) => at,
        };
        store.push(payload, now, run_at)
    }

    /// Claims the oldest ready task (by due time, then id; tasks pushed
    /// without delay come out in push order) under a lease, or returns
    /// `None` when no task is ready. A task whose lease expired is ready
    /// again. No two holders ever hold the same task at once.
    pub fn pull(&self, options: &PullOptions) -> Result<Option<Task>> {
        let store = self.store()?;
        let now = now_unix_ms();
        store.claim(now, now.saturating_add(options.lease.as_millis() as i64))
    }

    /// Completes the delivery named by `receipt`: the task is deleted, or
    /// kept as done on a handle opened with history. Succeeds as long as no
    /// one else has taken the task since (even past the lease's expiry);
    /// otherwise, or when the task was already finished, fails with
    /// [`ErrorKind::NotHeld`] and changes nothing.
    pub fn finish(&self, receipt: Receipt) -> Result<()> {
        self.store()?.finish(receipt, now_unix_ms())
    }

    /// Returns to pending every leased task whose lease expired or whose
    /// holder process no longer exists on this machine, and says how many.
    /// Tasks held by live processes (this one included) are untouched, so
    /// calling this at every start-up is safe with several processes.
    pub fn recover(&self) -> Result<u64> {
        self.store()?.recover(now_unix_ms())
    }

    /// How many tasks are in `state`. A leased task whose lease expired
    /// counts as leased until it is claimed again or recovered.
    pub fn count(&self, state: TaskState) -> Result<u64> {
        self.store()?.count(state)
    }

    /// Deletes the done tasks finished at least `older_than_ms` milliseconds
    /// ago and says how many (0 on a handle without history is normal).
    pub fn purge_done(&self, older_than_ms: u64) -> Result<u64> {
        let age = i64::try_from(older_than_ms)
            .map_err(|_| Error::invalid_argument("age out of range"))?;
        self.store()?.purge_done(now_unix_ms().saturating_sub(age))
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

/// Checks that `payload` is one JSON text of at most `limit` bytes.
fn check_payload(payload: &str, limit: usize) -> Result<()> {
    if payload.len() > limit {
        return Err(Error::invalid_argument(format!(
            "the payload is {} bytes; this queue's limit is {limit}",
            payload.len()
        )));
    }
    serde_json::from_str::<IgnoredAny>(payload)
        .map(|_| ())
        .map_err(|err| {
            Error::new(
                ErrorKind::InvalidJson,
                format!("the payload is not JSON: {err}"),
            )
        })
}

/// Wall-clock time in milliseconds since the Unix epoch: leases and due
/// times are compared across processes, so they use the shared clock.
fn now_unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as i64)
}
