//! Cancellation objects: how one thread ends the waits that others started
//! in pulls and in `tq_wait_cancellation`.

use super::objects::{borrow, free, hand_out_or_null};
use super::{guard, guard_or, tq_status};
use crate::wait::CancelToken;

/// Ends the wait of the pulls given it through `tq_pull_options_set_cancel`,
/// and of `tq_wait_cancellation`, from any thread (see `tq_cancel_trigger`).
pub struct tq_cancel(pub(super) CancelToken);

/// Cancellation: an object that ends waits from any thread
/// =======================================================
///
/// Creates a cancellation object.
///
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

/// Triggers a cancellation object.
///
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

/// Frees a cancellation object.
///
/// Frees a cancellation object from `tq_cancel_new`. NULL is a no-op; call
/// at most once per object. Options holding it keep working.
#[no_mangle]
pub extern "C" fn tq_cancel_free(cancel: *mut tq_cancel) {
    guard_or("tq_cancel_free", (), || free(cancel, "cancel"))
}
