//! Options objects: `_new`, one setter per option, `_free`. An options
//! object is only read by the call it is passed to, so one may be reused
//! for many calls and freed right after the last. Setters must not run
//! concurrently with another use of the same object; distinct objects are
//! independent.

use std::time::Duration;

use super::objects::{borrow_mut, free, hand_out};
use super::{guard, guard_or, tq_status};
use crate::error::Error;
use crate::options::{Durability, OpenOptions, PullOptions, PushOptions};

/// Options for `tq_open`.
pub struct tq_options(pub(crate) OpenOptions);

/// Options for `tq_push`.
pub struct tq_push_options(pub(crate) PushOptions);

/// Options for `tq_pull`.
pub struct tq_pull_options(pub(crate) PullOptions);

/// Values for `tq_options_set_durability`.
#[repr(C)]
pub enum tq_durability {
    /// The default. A call returns only once its write is flushed to the
    /// disk: it survives a process crash and a power loss. One flush per
    /// commit (about 10,000 commits/s on a fast SSD).
    TQ_DURABILITY_FULL = 0,
    /// A write survives a process crash; a power loss or OS crash may lose
    /// the most recent commits, never corrupting the file. Several times
    /// faster than FULL.
    TQ_DURABILITY_NORMAL = 1,
}

/// Creates an options object for `tq_open` holding the defaults: durability
/// `TQ_DURABILITY_FULL`, a 5,000 ms busy timeout, no history, payloads up
/// to `TQ_MAX_PAYLOAD_LEN` bytes.
///
/// Ownership: the caller owns the result and frees it with
/// `tq_options_free`. Returns NULL only if tq failed internally.
#[no_mangle]
pub extern "C" fn tq_options_new() -> *mut tq_options {
    guard_or("tq_options_new", std::ptr::null_mut(), || {
        hand_out(tq_options(OpenOptions::default()))
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
/// done with their finish time (`tq_count`, `tq_purge_done`); when false
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

/// Creates an options object for `tq_push` holding the defaults: the task
/// is ready at once.
///
/// Ownership: the caller owns the result and frees it with
/// `tq_push_options_free`. Returns NULL only if tq failed internally.
#[no_mangle]
pub extern "C" fn tq_push_options_new() -> *mut tq_push_options {
    guard_or("tq_push_options_new", std::ptr::null_mut(), || {
        hand_out(tq_push_options(PushOptions::default()))
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

/// Creates an options object for `tq_pull` holding the defaults: a 30,000
/// ms lease.
///
/// Ownership: the caller owns the result and frees it with
/// `tq_pull_options_free`. Returns NULL only if tq failed internally.
#[no_mangle]
pub extern "C" fn tq_pull_options_new() -> *mut tq_pull_options {
    guard_or("tq_pull_options_new", std::ptr::null_mut(), || {
        hand_out(tq_pull_options(PullOptions::default()))
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
