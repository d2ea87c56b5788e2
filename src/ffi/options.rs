//! Options objects: `_new`, one setter per option, `_free`. An options
//! object is only read by the call it is passed to, so one may be reused
//! for many calls and freed right after the last. Setters must not run
//! concurrently with another use of the same object; distinct objects are
//! independent.

use std::time::Duration;

use std::ffi::c_char;

use super::objects::{borrow, borrow_mut, borrow_optional, free, hand_out_or_null};
use super::{guard, guard_or, tq_status, utf8_string};
use crate::error::Error;
use crate::options::{Durability, OpenOptions, ParentFailure, PullOptions, PushOptions};
use crate::wait::CancelToken;

/// Options for `tq_open`.
pub struct tq_options(pub(crate) OpenOptions);

/// Options for `tq_push`.
pub struct tq_push_options(pub(crate) PushOptions);

/// Options for `tq_pull`.
pub struct tq_pull_options(pub(crate) PullOptions);

/// Ends the wait of the pulls given it through `tq_pull_options_set_cancel`,
/// and of `tq_wait_cancellation`, from any thread (see `tq_cancel_trigger`).
pub struct tq_cancel(pub(super) CancelToken);

/// Values for `tq_options_set_durability`.
#[repr(C)]
pub enum tq_durability {
    /// The default. A call returns only once its write is flushed to the
    /// disk: it survives a process crash and a power loss. Writes that
    /// arrive together share a flush, which runs while the next writes
    /// commit (about 10,000 flushes/s on a fast SSD).
    TQ_DURABILITY_FULL = 0,
    /// A write survives a process crash; a power loss or OS crash may lose
    /// the most recent commits, never corrupting the file. Several times
    /// faster than FULL.
    TQ_DURABILITY_NORMAL = 1,
}

/// Creates an options object for `tq_open` holding the defaults: durability
/// `TQ_DURABILITY_FULL`, a 5,000 ms busy timeout, no history, payloads up
/// to `TQ_MAX_PAYLOAD_LEN` bytes, the queue named "default", 25 attempts
/// per task, retries after 1,000 ms doubling up to 3,600,000 ms.
///
/// Ownership: the caller owns the result and frees it with
/// `tq_options_free`. Returns NULL only if tq failed internally.
#[no_mangle]
pub extern "C" fn tq_options_new() -> *mut tq_options {
    guard_or("tq_options_new", std::ptr::null_mut(), || {
        hand_out_or_null(tq_options(OpenOptions::default()))
    })
}

/// Frees an options object from `tq_options_new`. NULL is a no-op; call at
/// most once per object.
#[no_mangle]
pub extern "C" fn tq_options_free(options: *mut tq_options) {
    guard_or("tq_options_free", (), || free(options, "options"))
}

/// Sets the durability: `TQ_DURABILITY_FULL` or `TQ_DURABILITY_NORMAL` (a
/// plain integer, so any other value is an error rather than undefined
/// behaviour).
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, unknown value;
/// the object is then unchanged).
#[no_mangle]
pub extern "C" fn tq_options_set_durability(
    options: *mut tq_options,
    durability: i32,
) -> tq_status {
    guard("tq_options_set_durability", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        let durability = match durability {
            0 => Durability::Full,
            1 => Durability::Normal,
            other => {
                return Err(Error::invalid_argument(format!(
                    "unknown durability {other}: use TQ_DURABILITY_FULL or TQ_DURABILITY_NORMAL"
                )))
            }
        };
        options.0.durability(durability);
        Ok(tq_status::TQ_OK)
    })
}

/// Sets how long a call waits for other writers on the file before it
/// fails with TQ_ERR_BUSY, in milliseconds (0 fails at once; at most one
/// year). Default 5,000.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_options_set_busy_timeout_ms(
    options: *mut tq_options,
    timeout_ms: u64,
) -> tq_status {
    guard("tq_options_set_busy_timeout_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.busy_timeout(Duration::from_millis(timeout_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// When `keep` is true, tasks finished through this handle are kept as
/// done with their finish time (`tq_count`, `tq_purge`); when false
/// (the default) they are deleted.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options).
#[no_mangle]
pub extern "C" fn tq_options_set_keep_history(options: *mut tq_options, keep: bool) -> tq_status {
    guard("tq_options_set_keep_history", || {
        unsafe { borrow_mut(options, "options") }?
            .0
            .keep_history(keep);
        Ok(tq_status::TQ_OK)
    })
}

/// Sets how long a task finished with `tq_finish_with_result` through a
/// handle opened with these options is kept for its result, when the
/// handle keeps no history: 1 ms to one year (default 7 days). Later
/// finishes with a result delete the tasks whose time has passed; with
/// history, a result stays with its done task until `tq_purge`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_options_set_result_retention_ms(
    options: *mut tq_options,
    retention_ms: u64,
) -> tq_status {
    guard("tq_options_set_result_retention_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options
            .0
            .result_retention(Duration::from_millis(retention_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Sets the largest payload a handle opened with these options pushes, in
/// bytes: 1 to `TQ_MAX_PAYLOAD_LEN` (the default). A larger push fails with
/// TQ_ERR_INVALID_ARGUMENT and stores nothing.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_options_set_max_payload_len(
    options: *mut tq_options,
    limit: usize,
) -> tq_status {
    guard("tq_options_set_max_payload_len", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.max_payload_len(limit)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Sets how many connections to the PostgreSQL server a handle opened with
/// these options keeps at most: 1 to 1,024 (default 4). That many of its
/// calls run at once; further ones wait up to the busy timeout for a free
/// connection. For a `postgres://` URL only: `tq_open` of an SQLite file
/// with this set fails with TQ_ERR_INVALID_ARGUMENT.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_options_set_pool_size(options: *mut tq_options, size: u32) -> tq_status {
    guard("tq_options_set_pool_size", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.pool_size(size as usize)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Names the PostgreSQL schema that holds tq's tables (default "tq"): 1 to
/// 63 ASCII letters, digits and '_', not starting with a digit or "pg_".
/// tq creates it when missing. For a `postgres://` URL only: `tq_open` of
/// an SQLite file with this set fails with TQ_ERR_INVALID_ARGUMENT.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options or name, bad
/// UTF-8, a name tq does not accept; the object is then unchanged).
#[no_mangle]
pub extern "C" fn tq_options_set_postgres_schema(
    options: *mut tq_options,
    name: *const c_char,
) -> tq_status {
    guard("tq_options_set_postgres_schema", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        let name = unsafe { utf8_string(name, "name") }?;
        options.0.postgres_schema(name)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Creates an options object for `tq_push` holding the defaults: the task
/// is ready at once, priority 0, the queue's maximum attempts, no unique key.
///
/// Ownership: the caller owns the result and frees it with
/// `tq_push_options_free`. Returns NULL only if tq failed internally.
#[no_mangle]
pub extern "C" fn tq_push_options_new() -> *mut tq_push_options {
    guard_or("tq_push_options_new", std::ptr::null_mut(), || {
        hand_out_or_null(tq_push_options(PushOptions::default()))
    })
}

/// Frees an options object from `tq_push_options_new`. NULL is a no-op;
/// call at most once per object.
#[no_mangle]
pub extern "C" fn tq_push_options_free(options: *mut tq_push_options) {
    guard_or("tq_push_options_free", (), || free(options, "options"))
}

/// The task becomes ready `delay_ms` milliseconds after the push (at most
/// one year). Replaces an earlier `tq_push_options_set_run_at_unix_ms`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_push_options_set_delay_ms(
    options: *mut tq_push_options,
    delay_ms: u64,
) -> tq_status {
    guard("tq_push_options_set_delay_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.delay(Duration::from_millis(delay_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// The task becomes ready at `unix_ms`, milliseconds since the Unix epoch
/// (a time in the past means at once). Replaces an earlier
/// `tq_push_options_set_delay_ms`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, negative time).
#[no_mangle]
pub extern "C" fn tq_push_options_set_run_at_unix_ms(
    options: *mut tq_push_options,
    unix_ms: i64,
) -> tq_status {
    guard("tq_push_options_set_run_at_unix_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.run_at_unix_ms(unix_ms)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Values for `tq_push_options_set_on_parent_failure`.
#[repr(C)]
pub enum tq_parent_failure {
    /// The default. When a task it waits for ends dead or cancelled, the
    /// waiting task is cancelled with a reason naming that task, and so in
    /// turn are the tasks waiting for it.
    TQ_PARENT_FAILURE_CANCEL = 0,
    /// A task it waits for ending dead or cancelled counts as finished.
    TQ_PARENT_FAILURE_RUN_ANYWAY = 1,
}

/// Makes the task wait for the stored task `id` too (besides those added
/// before): it is stored blocked (counted and listed as TQ_STATE_PENDING,
/// never pulled) until every task it waits for is done. `id` must name a
/// task of the same queue that is stored when the task is pushed: not yet
/// finished, or kept as history (a done one does not hold it back);
/// otherwise the push fails with TQ_ERR_INVALID_ARGUMENT and stores
/// nothing. At most `TQ_MAX_PARENTS` in all, items included.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, an id not
/// positive, too many).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_add_after(options: *mut tq_push_options, id: i64) -> tq_status {
    guard("tq_push_options_add_after", || {
        unsafe { borrow_mut(options, "options") }?.0.after(&[id])?;
        Ok(tq_status::TQ_OK)
    })
}

/// Makes an item of `tq_push_items` wait for the earlier item at `index`
/// of the same call too, as `tq_push_options_add_after` does for a stored
/// task, so that a graph of tasks is stored in one call, all or none. Any
/// other push with such options fails with TQ_ERR_INVALID_ARGUMENT.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, too many).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_add_after_item(
    options: *mut tq_push_options,
    index: usize,
) -> tq_status {
    guard("tq_push_options_add_after_item", || {
        unsafe { borrow_mut(options, "options") }?
            .0
            .after_item(index)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Sets what the task does when a task it waits for ends dead or
/// cancelled: a `tq_parent_failure` value (a plain integer, so any other
/// value is an error rather than undefined behaviour). Default
/// `TQ_PARENT_FAILURE_CANCEL`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, unknown value;
/// the object is then unchanged).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_on_parent_failure(
    options: *mut tq_push_options,
    policy: i32,
) -> tq_status {
    guard("tq_push_options_set_on_parent_failure", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        let policy = match policy {
            0 => ParentFailure::Cancel,
            1 => ParentFailure::RunAnyway,
            other => {
                return Err(Error::invalid_argument(format!(
                    "unknown parent failure policy {other}: use TQ_PARENT_FAILURE_CANCEL or \
                     TQ_PARENT_FAILURE_RUN_ANYWAY"
                )))
            }
        };
        options.0.on_parent_failure(policy);
        Ok(tq_status::TQ_OK)
    })
}

/// Puts the task in the ordered group `key` of its queue: 1 to
/// `TQ_MAX_UNIQUE_KEY_LEN` bytes of UTF-8 (NUL-terminated; copied), or
/// NULL to take it out of any group. The tasks of one group are delivered
/// at most `max_at_once` at a time (1 to `TQ_MAX_GROUP_AT_ONCE`), in push
/// order when it is 1, while other groups proceed in parallel: the task
/// waits, as one added by `tq_push_options_add_after` with
/// `TQ_PARENT_FAILURE_RUN_ANYWAY` would, for the `max_at_once`-th most
/// recent unfinished task of the group, if any (listed by
/// `tq_task_waiting_for` while blocked, not by `tq_task_parents`). Tasks of
/// one group in one `tq_push_batch` or `tq_push_items` wait for each other
/// likewise, in order. A task of the group cancelled while it still waits
/// hands its place on: the tasks of the group waiting for it wait for the
/// task it waited for.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, a key empty,
/// too long or not UTF-8, `max_at_once` out of range; the object is then
/// unchanged).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_group(
    options: *mut tq_push_options,
    key: *const c_char,
    max_at_once: u32,
) -> tq_status {
    guard("tq_push_options_set_group", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        if key.is_null() {
            options.0.clear_group();
        } else {
            options
                .0
                .group(unsafe { utf8_string(key, "key") }?, max_at_once)?;
        }
        Ok(tq_status::TQ_OK)
    })
}

/// Creates an options object for `tq_pull` holding the defaults: a 30,000
/// ms lease, no waiting, no cancellation.
///
/// Ownership: the caller owns the result and frees it with
/// `tq_pull_options_free`. Returns NULL only if tq failed internally.
#[no_mangle]
pub extern "C" fn tq_pull_options_new() -> *mut tq_pull_options {
    guard_or("tq_pull_options_new", std::ptr::null_mut(), || {
        hand_out_or_null(tq_pull_options(PullOptions::default()))
    })
}

/// Frees an options object from `tq_pull_options_new`. NULL is a no-op;
/// call at most once per object.
#[no_mangle]
pub extern "C" fn tq_pull_options_free(options: *mut tq_pull_options) {
    guard_or("tq_pull_options_free", (), || free(options, "options"))
}

/// Sets the lease of a claimed task, in milliseconds (1 ms to one year):
/// past it, the task is ready again for other workers.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_pull_options_set_lease_ms(
    options: *mut tq_pull_options,
    lease_ms: u64,
) -> tq_status {
    guard("tq_pull_options_set_lease_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.lease(Duration::from_millis(lease_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Chooses the queue a handle works on: one file holds any number of
/// independent queues, each named by 1 to `TQ_MAX_QUEUE_NAME_LEN` bytes of
/// UTF-8 (NUL-terminated; copied). Default "default".
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options or name, empty,
/// too long or not UTF-8; the object is then unchanged).
#[no_mangle]
pub extern "C" fn tq_options_set_queue(options: *mut tq_options, name: *const c_char) -> tq_status {
    guard("tq_options_set_queue", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        let name = unsafe { utf8_string(name, "name") }?;
        options.0.queue(name)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Sets how many deliveries each task pushed through the handle gets before
/// a failure makes it dead (at least 1; default 25). A push may override it
/// with `tq_push_options_set_max_attempts`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, 0).
#[no_mangle]
pub extern "C" fn tq_options_set_max_attempts(
    options: *mut tq_options,
    max_attempts: u32,
) -> tq_status {
    guard("tq_options_set_max_attempts", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.max_attempts(max_attempts)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Sets the pauses before a failed task is retried: `min_ms` after the
/// first failure, doubling with each attempt up to `max_ms`, with random
/// jitter taking up to half off each pause. `min_ms` may be 0 (retry at
/// once); `max_ms` must not be below it; both at most one year. Default
/// 1,000 and 3,600,000.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_options_set_retry_backoff_ms(
    options: *mut tq_options,
    min_ms: u64,
    max_ms: u64,
) -> tq_status {
    guard("tq_options_set_retry_backoff_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options
            .0
            .retry_backoff(Duration::from_millis(min_ms), Duration::from_millis(max_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Sets the task's priority: a ready task of higher priority is claimed
/// before any of lower priority; equal priorities come out in the order
/// they became ready. Any value; default 0.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options).
#[no_mangle]
pub extern "C" fn tq_push_options_set_priority(
    options: *mut tq_push_options,
    priority: i32,
) -> tq_status {
    guard("tq_push_options_set_priority", || {
        unsafe { borrow_mut(options, "options") }?
            .0
            .priority(priority);
        Ok(tq_status::TQ_OK)
    })
}

/// Sets how many deliveries the task gets before a failure makes it dead
/// (at least 1), instead of the handle's default.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, 0).
#[no_mangle]
pub extern "C" fn tq_push_options_set_max_attempts(
    options: *mut tq_push_options,
    max_attempts: u32,
) -> tq_status {
    guard("tq_push_options_set_max_attempts", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.max_attempts(max_attempts)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Gives the task a unique key: 1 to `TQ_MAX_UNIQUE_KEY_LEN` bytes of UTF-8
/// (NUL-terminated; copied), or NULL to remove the key and its window.
/// While a task with the key is pending or leased in the queue, `tq_push`
/// stores nothing and returns TQ_DUPLICATE with that task's id. Only
/// `tq_push` takes a unique key; `tq_push_batch` refuses one.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, empty, too
/// long or not UTF-8; the object is then unchanged).
#[no_mangle]
pub extern "C" fn tq_push_options_set_unique_key(
    options: *mut tq_push_options,
    key: *const c_char,
) -> tq_status {
    guard("tq_push_options_set_unique_key", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        if key.is_null() {
            options.0.clear_unique_key();
        } else {
            options.0.unique_key(unsafe { utf8_string(key, "key") }?)?;
        }
        Ok(tq_status::TQ_OK)
    })
}

/// Keeps the unique key reserved for `window_ms` milliseconds after the
/// task is done (at most one year; default 0: the key is free once the
/// task is done). Set the key first.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, no key set,
/// out of range).
#[no_mangle]
pub extern "C" fn tq_push_options_set_unique_for_ms(
    options: *mut tq_push_options,
    window_ms: u64,
) -> tq_status {
    guard("tq_push_options_set_unique_for_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.unique_for(Duration::from_millis(window_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Sets how long `tq_pull` and `tq_pull_batch` wait for a task when none is
/// ready, in milliseconds (at most one year; default 0: answer at once).
/// A push to the queue ends the wait at once, from this process or another
/// (a write that rings nothing, as an outbox push, within about a second),
/// a delayed task at its due time. Waiting
/// uses no CPU to speak of.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_pull_options_set_wait_ms(
    options: *mut tq_pull_options,
    wait_ms: u64,
) -> tq_status {
    guard("tq_pull_options_set_wait_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.wait(Duration::from_millis(wait_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Lets `cancel` end the wait of pulls made with these options (NULL
/// removes it). The options keep their own reference: `cancel` may be freed
/// before them.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, `cancel` not a
/// live tq_cancel).
#[no_mangle]
pub extern "C" fn tq_pull_options_set_cancel(
    options: *mut tq_pull_options,
    cancel: *const tq_cancel,
) -> tq_status {
    guard("tq_pull_options_set_cancel", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        let cancel = unsafe { borrow_optional(cancel, "cancel") }?;
        options
            .0
            .cancel_token(cancel.map(|cancel| cancel.0.clone()));
        Ok(tq_status::TQ_OK)
    })
}

/// Creates a cancellation object, not yet triggered.
///
/// Ownership: the caller owns the result and frees it with
/// `tq_cancel_free`. Returns NULL only if tq failed internally.
#[no_mangle]
pub extern "C" fn tq_cancel_new() -> *mut tq_cancel {
    guard_or("tq_cancel_new", std::ptr::null_mut(), || {
        hand_out_or_null(tq_cancel(CancelToken::new()))
    })
}

/// Ends, with TQ_ERR_INTERRUPTED, the wait of every pull made with options
/// holding `cancel` and of every `tq_wait_cancellation` given it, now and
/// later: triggering is permanent, so use a new
/// object for each operation to cancel. A pull still takes a task that is
/// ready.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL or not a live tq_cancel).
/// Thread safety: safe from any thread, while pulls use it.
#[no_mangle]
pub extern "C" fn tq_cancel_trigger(cancel: *mut tq_cancel) -> tq_status {
    guard("tq_cancel_trigger", || {
        unsafe { borrow(cancel.cast_const(), "cancel") }?.0.cancel();
        Ok(tq_status::TQ_OK)
    })
}

/// Frees a cancellation object from `tq_cancel_new`. NULL is a no-op; call
/// at most once per object. Options holding it keep working.
#[no_mangle]
pub extern "C" fn tq_cancel_free(cancel: *mut tq_cancel) {
    guard_or("tq_cancel_free", (), || free(cancel, "cancel"))
}
