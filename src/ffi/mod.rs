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

// One file per C object, declared in the order include/tq.h lists their
// functions (cbindgen follows these declarations; the comments keep
// rustfmt from sorting them).
// Errors: the statuses and the thread's last error message.
mod error;
// Versions: the library loaded at run time.
mod version;
// Queues: the handle, its life and its queue's settings.
mod queue;
// Locations: a path or URL as messages show it.
mod location;
// Pushing tasks.
mod push;
// Working on tasks: pull, finish, fail, extend, snooze.
mod work;
// Steps: checkpoints of a held task, and the strings tq hands out.
mod steps;
// Events and durable sleep: waits and sleeps of a held task.
mod events;
// Tasks: the task object and its accessors.
mod task;
// Managing tasks: outcomes, cancelling, counts, lists, retries, recovery.
mod admin;
// Open options: the options object of tq_open.
mod open_options;
// Push options.
mod push_options;
// Pull options.
mod pull_options;
// Cancellation objects, for pulls and tq_wait_cancellation.
mod cancel;
// Schedules: their options object, the calls, and listed schedules.
mod schedules;
// The registry of the objects handed to C; it exports nothing.
mod objects;

use std::any::Any;
use std::ffi::{c_char, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{Error, ErrorKind, Result};

pub use admin::*;
pub use cancel::*;
pub use error::*;
pub use events::*;
pub use location::*;
pub use open_options::*;
pub use pull_options::*;
pub use push::*;
pub use push_options::*;
pub use queue::*;
pub use schedules::*;
pub use steps::*;
pub use task::*;
pub use version::*;
pub use work::*;

use error::set_last_error;

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

fn saturate(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
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
}
