//! The engine's front: [`Queue`] checks arguments, reads the clock, guards
//! against use after `fork()`, waits for tasks, and hands each operation to
//! its storage backend.

use std::sync::Arc;

use serde::de::IgnoredAny;

use crate::clock::now_unix_ms;
use crate::error::{Error, ErrorKind, Result};
use crate::location::Backend;
use crate::options::{OpenOptions, Parent, PushOptions, RetryBackoff};
use crate::sqlite::SqliteStore;
use crate::store::{check_limits, NewTask, Store};
use crate::task::{Pushed, Receipt, Task};
use crate::wait::{Bell, CancelToken};

mod control;
mod events;
mod fair;
mod finish;
mod inspect;
mod maintain;
mod pull;
mod room;
mod schedules;
mod steps;
mod watch;

pub use events::{DEFAULT_EVENT_RETENTION, MAX_EVENT_KEY_LEN, MAX_SLEEP_NAME_LEN};
pub use fair::{MAX_FAIR_WEIGHT, MIN_FAIR_WEIGHT};
pub use room::ROOM_POLL_INTERVAL;
use schedules::SlotCache;

/// The most tasks of each kind (leased, cancelling, done, dead) that one
/// call of [`Queue::timings_since`] returns.
pub const MAX_TIMINGS: usize = 10_000;

/// The longest failure reason kept, in bytes; a longer one is cut at a
/// character boundary.
pub const MAX_REASON_LEN: usize = 64 * 1024;

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
    /// Rung in this process when a task of this queue is delivered or
    /// ends: it wakes the pushes waiting for room under the queue's cap.
    room: Arc<Bell>,
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
        let (store, bell): (Box<dyn Store>, Arc<Bell>) = match Backend::of(path) {
            Backend::Postgres => open_postgres(path, options)?,
            Backend::Sqlite => {
                options.check_sqlite()?;
                let store = SqliteStore::open(path, options)?;
                let bell = Bell::for_queue(store.file_id(), &options.queue)?;
                (Box::new(store), bell)
            }
        };
        let room = room::room_bell(store.store_id(), &options.queue)?;
        Ok(Queue {
            bell,
            room,
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
    /// with that task's id, or, when the options ask it to replace or
    /// debounce a pending holder ([`PushOptions::replace_pending`],
    /// [`PushOptions::debounce`]), changes that task and answers
    /// [`Pushed::Merged`]. The bytes are stored exactly as given. Invalid
    /// JSON fails with [`ErrorKind::InvalidJson`], and a payload over the
    /// queue's limit with [`ErrorKind::InvalidArgument`]; either stores
    /// nothing.
    pub fn push(&self, payload: &str, options: &PushOptions) -> Result<Pushed> {
        let store = self.store()?;
        check_items_named(options, 0, "a single push")?;
        options.check_merge()?;
        check_payload(payload, self.max_payload_len)?;
        let pushed = self.push_with_room(store, options.wait_for_room, |now| {
            let task = NewTask::new(payload, options, now, self.max_attempts);
            check_limits(&task, now)?;
            Ok(vec![task])
        })?;
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
        let pushed = self.push_with_room(store, options.wait_for_room, |now| {
            let tasks: Vec<NewTask> = payloads
                .iter()
                .map(|payload| NewTask::new(payload.as_ref(), options, now, self.max_attempts))
                .collect();
            // One set of options: the first task stands for them all.
            check_limits(&tasks[0], now)?;
            Ok(tasks)
        })?;
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
                .and_then(|()| options.check_merge())
                .and_then(|()| check_payload(payload.as_ref(), self.max_payload_len))
                .map_err(|err| {
                    Error::new(err.kind(), format!("item {index}: {}", err.message()))
                })?;
        }
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let wait = items
            .iter()
            .map(|(_, options)| options.wait_for_room)
            .max()
            .unwrap_or_default();
        let pushed = self.push_with_room(store, wait, |now| {
            let tasks: Vec<NewTask> = items
                .iter()
                .map(|(payload, options)| {
                    NewTask::new(payload.as_ref(), options, now, self.max_attempts)
                })
                .collect();
            for (index, task) in tasks.iter().enumerate() {
                check_limits(task, now).map_err(|err| {
                    Error::new(err.kind(), format!("item {index}: {}", err.message()))
                })?;
            }
            Ok(tasks)
        })?;
        self.bell.ring();
        Ok(pushed)
    }

    /// Checks one payload as a push through this handle would (for the C
    /// ABI, which the SQLite extension's build leaves out).
    #[cfg(not(feature = "sqlite-extension"))]
    pub(crate) fn check_payload(&self, payload: &str) -> Result<()> {
        check_payload(payload, self.max_payload_len)
    }

    /// Ends every wait of a pull (or of a push waiting for room) on this
    /// handle with [`ErrorKind::Interrupted`], now and from then on (a pull
    /// still takes a task that is ready, a push still stores what fits):
    /// call it before stopping worker threads. Safe from any thread; pulls
    /// on other handles are not affected.
    pub fn interrupt(&self) {
        self.interrupted.cancel();
        self.bell.ring();
        self.room.ring();
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
    if options.merge.is_set() {
        return Err(Error::invalid_argument(
            "a batch stores new tasks only: push a task that replaces or debounces the holder \
             of its unique key on its own",
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
pub(crate) fn check_json(what: &str, text: &str, limit: usize) -> Result<()> {
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
