//! Open options: the options object of `tq_open`.
//!
//! Options objects: `_new`, one setter per option, `_free`. An options
//! object is only read by the call it is passed to, so one may be reused
//! for many calls and freed right after the last. Setters must not run
//! concurrently with another use of the same object; distinct objects are
//! independent.

use std::time::Duration;

use std::ffi::c_char;

use super::objects::{borrow_mut, free, hand_out_or_null};
use super::{guard, guard_or, tq_status, utf8_string};
use crate::error::Error;
use crate::options::{Durability, OpenOptions};

/// Options for `tq_open`.
pub struct tq_options(pub(crate) OpenOptions);

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

/// Open options: the options object of `tq_open`
/// =============================================
///
/// Creates the options of `tq_open`.
///
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

/// Frees open options.
///
/// Frees an options object from `tq_options_new`. NULL is a no-op; call at
/// most once per object.
#[no_mangle]
pub extern "C" fn tq_options_free(options: *mut tq_options) {
    guard_or("tq_options_free", (), || free(options, "options"))
}

/// Chooses the queue.
///
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

/// Sets the durability.
///
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

/// Sets the busy timeout.
///
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

/// Keeps finished tasks as history, or not.
///
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

/// Sets how long a result is kept.
///
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

/// Sets the largest payload.
///
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

/// Sets how many deliveries each task gets.
///
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

/// Sets the pauses before retries.
///
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

/// Sets the size of the PostgreSQL connection pool.
///
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

/// Names the PostgreSQL schema.
///
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
