//! The C ABI: a thin layer that checks pointers, converts, catches panics,
//! records the thread's last error, and calls the engine.
//!
//! Every exported function wraps its body in `guard` (status-returning
//! functions) or `guard_or` (accessors), so no panic crosses into C.
//! Pointers from C are reached only through `objects.rs`, which allocates
//! every object handed to C, checks each pointer passed back (NULL, freed,
//! wrong type) and frees it once.
#![allow(non_camel_case_types)]
// Exported functions are called from C, where `unsafe fn` means nothing;
// each states its pointer contract in its doc comment instead.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

mod location;
mod objects;
mod options;
mod queue;
mod schedules;

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, ErrorKind, Result};

pub use location::*;
pub use options::*;
pub use queue::*;
pub use schedules::*;

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
    /// still holds the key, and its id was returned. Not an error.
    TQ_DUPLICATE = 2,
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
fn set_last_error(message: &str) {
    let message = CString::new(message.replace('\0', "\\0")).expect("NULs were replaced");
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = message);
}

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
        _ => c"unknown status",
    }
}

/// Returns the library's version as "MAJOR.MINOR.PATCH", a static string.
/// Compare with the header's `TQ_VERSION` to detect a mismatch.
///
/// Thread safety: may be called from any thread.
#[no_mangle]
pub extern "C" fn tq_version() -> *const c_char {
    guard_or("tq_version", c"".as_ptr(), || {
        concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
    })
}

/// Returns the library's version as MAJOR * 10000 + MINOR * 100 + PATCH,
/// the same encoding as the header's `TQ_VERSION_NUMBER`.
///
/// Thread safety: may be called from any thread.
#[no_mangle]
pub extern "C" fn tq_version_number() -> u32 {
    const fn parse(digits: &str) -> u32 {
        let bytes = digits.as_bytes();
        let mut value = 0;
        let mut i = 0;
        while i < bytes.len() {
            value = value * 10 + (bytes[i] - b'0') as u32;
            i += 1;
        }
        value
    }
    const NUMBER: u32 = parse(env!("CARGO_PKG_VERSION_MAJOR")) * 10_000
        + parse(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + parse(env!("CARGO_PKG_VERSION_PATCH"));
    guard_or("tq_version_number", 0, || NUMBER)
}

/// Runs the body of the status-returning exported `function`: a returned
/// error becomes its status with the message recorded for
/// `tq_last_error()`, and a panic becomes `TQ_ERR_INTERNAL`.
fn guard(function: &str, body: impl FnOnce() -> Result<tq_status>) -> tq_status {
    let body = || {
        inject_panic(function);
        body()
    };
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(status)) => status,
        Ok(Err(err)) => fail(&err),
        Err(panic) => fail(&panic_error(function, panic)),
    }
}

/// Runs the body of the exported `function` that returns a value rather
/// than a status: a panic returns `fallback`, with the message recorded.
fn guard_or<T>(function: &str, fallback: T, body: impl FnOnce() -> T) -> T {
    let body = || {
        inject_panic(function);
        body()
    };
    catch_unwind(AssertUnwindSafe(body)).unwrap_or_else(|panic| {
        fail(&panic_error(function, panic));
        fallback
    })
}

/// With the test-only `panic-injection` feature, panics when the
/// `TQ_INJECT_PANIC` environment variable names `function` (or is `*`), so
/// tests can check that every exported function catches panics.
#[cfg(feature = "panic-injection")]
fn inject_panic(function: &str) {
    if std::env::var("TQ_INJECT_PANIC").is_ok_and(|target| target == function || target == "*") {
        panic!("injected panic");
    }
}

#[cfg(not(feature = "panic-injection"))]
fn inject_panic(_function: &str) {}

fn fail(err: &Error) -> tq_status {
    set_last_error(err.message());
    err.kind().into()
}

fn panic_error(function: &str, panic: Box<dyn Any + Send>) -> Error {
    let what = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic without a message");
    Error::new(
        ErrorKind::Internal,
        format!("internal error in {function}: {what}"),
    )
}

/// A caller's buffer (a path, a payload), or an error naming the argument
/// when it is NULL.
fn non_null<T>(ptr: *const T, name: &str) -> Result<*const T> {
    if ptr.is_null() {
        return Err(Error::invalid_argument(format!("{name} is NULL")));
    }
    Ok(ptr)
}

/// A NUL-terminated UTF-8 string from C, or an error naming the argument
/// when it is NULL or not UTF-8.
///
/// Safety: a non-NULL `ptr` points to a NUL-terminated string that lives
/// through the call, as every function's contract requires.
unsafe fn utf8_string<'a>(ptr: *const c_char, name: &str) -> Result<&'a str> {
    let ptr = non_null(ptr, name)?;
    // SAFETY: per the contract above.
    unsafe { CStr::from_ptr(ptr) }
        .to_str()
        .map_err(|_| Error::invalid_argument(format!("{name} is not valid UTF-8")))
}

/// A caller's array of `count` elements, or an error naming the argument
/// when it is NULL (an empty array may be NULL).
///
/// Safety: a non-NULL `ptr` points to `count` readable elements.
unsafe fn array<'a, T>(ptr: *const T, count: usize, name: &str) -> Result<&'a [T]> {
    if count == 0 {
        return Ok(&[]);
    }
    let ptr = non_null(ptr, name)?;
    // SAFETY: per the contract above.
    Ok(unsafe { std::slice::from_raw_parts(ptr, count) })
}

/// A required out-pointer, or an error naming the argument when it is NULL.
fn out_pointer<T>(ptr: *mut T, name: &str) -> Result<*mut T> {
    non_null(ptr.cast_const(), name).map(<*const T>::cast_mut)
}

/// Stores `value` through an optional out-pointer.
unsafe fn write_optional<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: a non-NULL out-pointer is writable per the caller's contract.
        unsafe { out.write(value) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last_error() -> String {
        // SAFETY: tq_last_error never returns NULL.
        unsafe { std::ffi::CStr::from_ptr(tq_last_error()) }
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[test]
    fn a_panic_becomes_the_internal_error_status_with_its_message() {
        assert_eq!(
            guard("tq_test", || panic!("boom")),
            tq_status::TQ_ERR_INTERNAL
        );
        assert!(last_error().contains("tq_test: boom"), "{}", last_error());
        assert_eq!(
            guard_or("tq_test", 7, || panic!("{}", String::from("bang"))),
            7
        );
        assert!(last_error().contains("bang"), "{}", last_error());
    }

    #[test]
    fn errors_become_their_status_and_messages_are_per_thread() {
        let status = guard("tq_test", || {
            Err(Error::new(ErrorKind::Busy, "locked\0here"))
        });
        assert_eq!(status, tq_status::TQ_ERR_BUSY);
        assert_eq!(
            last_error(),
            "locked\\0here",
            "an inner NUL cannot cut the message"
        );
        let other_thread = std::thread::spawn(last_error).join().unwrap();
        assert_eq!(other_thread, "");
        assert_eq!(
            guard("tq_test", || Ok(tq_status::TQ_EMPTY)),
            tq_status::TQ_EMPTY
        );
        assert_eq!(
            last_error(),
            "locked\\0here",
            "a success keeps the last failure's message"
        );
    }

    #[test]
    fn version_number_matches_the_version_string() {
        let parts: Vec<u32> = crate::VERSION
            .split('.')
            .map(|p| p.parse().unwrap())
            .collect();
        assert_eq!(
            tq_version_number(),
            parts[0] * 10_000 + parts[1] * 100 + parts[2]
        );
    }
}
