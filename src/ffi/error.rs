//! Errors: the statuses tq returns, and the message of the thread's last
//! failed call, which says more.

use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};

use super::guard_or;
use crate::error::ErrorKind;

/// The outcome of a call. 0 is success, positive values are non-error
/// outcomes, negative values are errors (the thread's `tq_last_error()` then
/// says more). Values are never renumbered; a retired one stays reserved.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum tq_status {
    /// Success.
    TQ_OK = 0,
    /// `tq_pull` found no ready task (or `tq_oldest_ready_age_ms` no ready
    /// task to measure). Not an error.
    TQ_EMPTY = 1,
    /// `tq_push` with a unique key stored nothing: a task of the queue
    /// still holds the key, and its id was returned; or `tq_step_put`
    /// found the step already recorded, and kept its first output. Not an
    /// error.
    TQ_DUPLICATE = 2,
    /// `tq_push` with a unique key stored no new task: the pending task
    /// holding the key took the push's payload or run time, as the options
    /// asked (`tq_push_options_set_replace_pending`,
    /// `tq_push_options_set_debounce_ms`), and its id was returned. A
    /// status of its own, not `TQ_OK` (which means a new task) nor
    /// `TQ_DUPLICATE` (which means the push's payload was dropped). Only a
    /// push with one of those options returns it. Not an error.
    TQ_MERGED = 3,
    /// `tq_wait_for_event` or `tq_sleep` handed the task back to wait
    /// (its lease released, no attempt spent, its steps kept): the
    /// delivery is over; stop working on the task. Not an error.
    TQ_SUSPENDED = 4,
    /// `tq_wait_for_event`'s wait timed out before an event came (now or
    /// at an earlier delivery); the task is still held. Not an error.
    TQ_TIMEOUT = 5,
    /// A NULL or invalid pointer, bad UTF-8, an out-of-range option, or a
    /// handle used in a child process after `fork()`.
    TQ_ERR_INVALID_ARGUMENT = -1,
    /// The payload is not a JSON text; nothing was stored.
    TQ_ERR_INVALID_JSON = -2,
    /// The task's delivery is no longer current (its lease was recovered or
    /// taken by another worker), or it was already finished.
    TQ_ERR_NOT_HELD = -3,
    /// The file stayed locked by other writers past the busy timeout;
    /// nothing was done. The call may be tried again.
    TQ_ERR_BUSY = -4,
    /// The operating system refused: disk full, read-only file or
    /// directory, permissions, an I/O error. A write that fails this way may
    /// or may not have reached the disk.
    TQ_ERR_IO = -5,
    /// The file is not an SQLite database, is corrupt, or has a tq schema
    /// newer than this library; it was left untouched. (SQLite also reports
    /// an I/O error while reading the file's header as corruption.)
    TQ_ERR_NOT_A_DATABASE = -6,
    /// A bug in tq, including a caught panic. The handle remains usable.
    TQ_ERR_INTERNAL = -7,
    /// A pull's wait was ended by `tq_interrupt` on its handle or by its
    /// `tq_cancel`; no task was claimed.
    TQ_ERR_INTERRUPTED = -8,
    /// The write was committed but may not last, or may not have been
    /// committed: on an SQLite file at `TQ_DURABILITY_FULL`, flushing the
    /// committed write to the disk failed, so it may or may not survive a
    /// power loss (and this process then refuses writes to the file with
    /// `TQ_ERR_IO` until every handle on it is closed); on PostgreSQL, the
    /// connection to the server was lost while the write was being
    /// committed. Either way a push may or may not have stored its task.
    /// Look before trying again, or push with a unique key so a retry
    /// cannot duplicate.
    TQ_ERR_UNKNOWN_OUTCOME = -9,
    /// The task was cancelled (`tq_cancel_task`) while this delivery held
    /// it: the delivery is over, the task is now cancelled and is never
    /// delivered again. Stop working on it.
    TQ_ERR_CANCELLED = -10,
    /// The push would take the queue's pending tasks over its cap
    /// (`tq_set_max_pending`), and no room was made within its
    /// `tq_push_options_set_wait_for_room_ms`: nothing was stored (of a
    /// batch, no task). Pushing again later may succeed.
    TQ_ERR_FULL = -11,
}

impl From<ErrorKind> for tq_status {
    fn from(kind: ErrorKind) -> Self {
        match kind {
            ErrorKind::InvalidArgument => tq_status::TQ_ERR_INVALID_ARGUMENT,
            ErrorKind::InvalidJson => tq_status::TQ_ERR_INVALID_JSON,
            ErrorKind::NotHeld => tq_status::TQ_ERR_NOT_HELD,
            ErrorKind::Busy => tq_status::TQ_ERR_BUSY,
            ErrorKind::Io => tq_status::TQ_ERR_IO,
            ErrorKind::NotADatabase => tq_status::TQ_ERR_NOT_A_DATABASE,
            ErrorKind::Internal => tq_status::TQ_ERR_INTERNAL,
            ErrorKind::Interrupted => tq_status::TQ_ERR_INTERRUPTED,
            ErrorKind::UnknownOutcome => tq_status::TQ_ERR_UNKNOWN_OUTCOME,
            ErrorKind::Cancelled => tq_status::TQ_ERR_CANCELLED,
            ErrorKind::Full => tq_status::TQ_ERR_FULL,
        }
    }
}

thread_local! {
    /// The message of the last failed call on this thread.
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

/// Records `message` for `tq_last_error()`. During thread exit, once the
/// thread's storage is gone, the message is dropped rather than panicking
/// outside a guard.
pub(super) fn set_last_error(message: &str) {
    let message = CString::new(message.replace('\0', "\\0")).expect("NULs were replaced");
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = message);
}

/// Errors: the thread's last error message, and what each status means
/// ===================================================================
///
/// The message of the calling thread's last failed call.
///
/// Returns the message of the last failed call on the calling thread, or
/// `""` when no call on this thread has failed. Never NULL.
///
/// Ownership: the string belongs to tq and stays valid until the next
/// failed tq call on the same thread (a call that succeeds, including a
/// `_free` of a live object, leaves it alone). Thread safety: each thread
/// has its own message.
#[no_mangle]
pub extern "C" fn tq_last_error() -> *const c_char {
    guard_or("tq_last_error", c"".as_ptr(), || {
        LAST_ERROR
            .try_with(|last| last.borrow().as_ptr())
            .unwrap_or(c"".as_ptr())
    })
}

/// The description of a status.
///
/// Returns a static, human-readable description of `status` (any integer;
/// values tq does not know get `"unknown status"`). Never NULL.
///
/// Thread safety: may be called from any thread.
#[no_mangle]
pub extern "C" fn tq_status_str(status: i32) -> *const c_char {
    guard_or("tq_status_str", c"unknown status".as_ptr(), || {
        status_text(status).as_ptr().cast()
    })
}

fn status_text(status: i32) -> &'static CStr {
    match status {
        0 => c"ok",
        1 => c"empty: no task is ready",
        2 => c"duplicate: a task with this unique key is already queued",
        3 => c"merged: the pending task with this unique key took the push",
        4 => c"suspended: the task was handed back to wait; its delivery is over",
        5 => c"timeout: the wait for an event timed out",
        -1 => c"invalid argument",
        -2 => c"invalid JSON",
        -3 => c"not held: the delivery is no longer current",
        -4 => c"busy: the database stayed locked past the busy timeout",
        -5 => c"I/O error",
        -6 => c"not a tq database",
        -7 => c"internal error",
        -8 => c"interrupted: the wait for a task was ended",
        -9 => {
            c"unknown outcome: the flush to disk after the commit failed (SQLite), or the \
                connection was lost while committing (PostgreSQL); the write may or may not last"
        }
        -10 => c"cancelled: the task was cancelled while this delivery held it",
        -11 => c"full: the queue holds as many pending tasks as its cap allows",
        _ => c"unknown status",
    }
}
