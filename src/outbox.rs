//! Pushing and finishing inside the application's own transaction.
//!
//! An application that keeps its own tables in the queue's file can commit
//! a row and the task it implies together (the outbox pattern): open the
//! file with [`rusqlite`] (the same crate tq uses, re-exported as
//! [`crate::rusqlite`], so both share one copy of SQLite), start a
//! transaction, write its rows, call [`push`], and commit. Either both are
//! stored or neither is. The file must have been opened once with
//! [`crate::Queue::open`], which creates tq's tables.
//!
//! Such a push rings nothing: waiting pulls see the new task when they next
//! look at the file's change counter, within about a second (every 20 ms
//! in a process without the shared page of `sqlite/wake.rs`).

use rusqlite::Transaction;

use crate::clock::now_unix_ms;
use crate::error::{Error, ErrorKind, Result};
use crate::options::{check_queue_name, PushOptions, DEFAULT_MAX_ATTEMPTS, MAX_PAYLOAD_LEN};
use crate::queue::{check_items_named, check_payload};
use crate::sqlite::finish::finish_one;
use crate::sqlite::push::push_one;
use crate::sqlite::{ids, schema};
use crate::store::not_held;
use crate::store::NewTask;
use crate::task::{Pushed, Receipt};

/// Stores `payload` as a new task of the queue named `queue`, in the
/// caller's transaction `tx`: the task exists once `tx` commits, and never
/// if it rolls back. Answers as [`crate::Queue::push`] does; the task gets
/// [`DEFAULT_MAX_ATTEMPTS`] unless `options` says otherwise.
pub fn push(
    tx: &Transaction<'_>,
    queue: &str,
    payload: &str,
    options: &PushOptions,
) -> Result<Pushed> {
    check_queue_name(queue)?;
    check_items_named(options, 0, "a single push")?;
    check_payload(payload, MAX_PAYLOAD_LEN)?;
    check_schema(tx)?;
    let now = now_unix_ms();
    let task = NewTask::new(payload, options, now, DEFAULT_MAX_ATTEMPTS);
    push_one(tx, queue, &task, &[], now)
}

/// Completes the delivery named by `receipt` in the caller's transaction
/// `tx`, so that the application's own writes and the completion commit
/// together. The task is deleted, or kept as done when `keep_history`.
/// Fails with [`crate::ErrorKind::NotHeld`] as [`crate::Queue::finish`] does.
pub fn finish(tx: &Transaction<'_>, receipt: Receipt, keep_history: bool) -> Result<()> {
    check_schema(tx)?;
    ids::deleting_unwatched(tx, || {
        if !finish_one(tx, receipt, now_unix_ms(), keep_history, None)? {
            return Err(not_held(receipt.id()));
        }
        Ok(())
    })
}

fn check_schema(tx: &Transaction<'_>) -> Result<()> {
    let version = schema::version(tx)?;
    if version != schema::CURRENT_VERSION {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "the file has tq schema version {version}, not {}: open it once with \
                 tq::Queue::open, which creates and upgrades tq's tables",
                schema::CURRENT_VERSION
            ),
        ));
    }
    Ok(())
}
