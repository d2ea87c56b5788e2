//! Pull options: the options object of `tq_pull`, `tq_pull_batch` and the
//! calls that finish and pull, used as every options object is (see
//! `open_options.rs`).

use std::time::Duration;

use super::objects::{borrow_mut, borrow_optional, free, hand_out_or_null};
use super::{guard, guard_or, tq_cancel, tq_status};
use crate::options::PullOptions;

/// Options for `tq_pull`.
pub struct tq_pull_options(pub(crate) PullOptions);

/// Pull options: the options object of `tq_pull` and its batch forms
/// =================================================================
///
/// Creates the options of a pull.
///
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

/// Frees pull options.
///
/// Frees an options object from `tq_pull_options_new`. NULL is a no-op;
/// call at most once per object.
#[no_mangle]
pub extern "C" fn tq_pull_options_free(options: *mut tq_pull_options) {
    guard_or("tq_pull_options_free", (), || free(options, "options"))
}

/// Sets the lease.
///
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

/// Sets how long a pull waits for a task.
///
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

/// Lets a cancellation object end the pulls' wait.
///
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
