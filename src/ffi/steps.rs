//! Step checkpoints at the boundary: recording a held task's step,
//! reading one back, the strings that reading hands out, and clearing the
//! steps after a named one.

use std::ffi::{c_char, CString};

use super::objects::{borrow, free_string, hand_out_string};
use super::{guard, guard_or, out_pointer, tq_queue, tq_status, tq_task, utf8_string};
use crate::error::Error;

/// Steps: checkpoints that a later delivery of a task reads back
/// =============================================================
///
/// Records a step of a held task.
///
/// Records step `name` (UTF-8, 1 to TQ_MAX_STEP_NAME_LEN bytes) of the task this delivery
/// holds with its output `json` (UTF-8 JSON, at most the handle's payload
/// limit), in one commit that checks the delivery is still current. Every
/// later delivery of the task reads it back with `tq_step_get` instead of
/// running the step again.
///
/// Returns TQ_OK once stored; TQ_DUPLICATE when the task already has a
/// step of that name, whose first output is kept (first write wins);
/// TQ_ERR_NOT_HELD when the delivery is no longer current (or `task` was
/// listed, not pulled); TQ_ERR_CANCELLED when the task was cancelled;
/// TQ_ERR_INVALID_JSON; TQ_ERR_INVALID_ARGUMENT (NULL argument, bad UTF-8,
/// a name or output too long); TQ_ERR_BUSY, TQ_ERR_IO. Only TQ_OK stores
/// anything.
///
/// Ownership: `name` and `json` are only read during the call.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_step_put(
    queue: *mut tq_queue,
    task: *const tq_task,
    name: *const c_char,
    json: *const c_char,
) -> tq_status {
    guard("tq_step_put", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        let name = unsafe { utf8_string(name, "name") }?;
        let json = unsafe { utf8_string(json, "json") }?;
        Ok(if queue.0.record_step(task.receipt()?, name, json)? {
            tq_status::TQ_OK
        } else {
            tq_status::TQ_DUPLICATE
        })
    })
}

/// Reads a recorded step of a task.
///
/// Reads the output recorded for step `name` of `task` (a delivery from
/// `tq_pull`, current or not) by this delivery or any earlier one, into
/// `*out_json`.
///
/// Returns TQ_OK with `*out_json` set, TQ_EMPTY with `*out_json` NULL
/// when the step was never recorded (or was cleared), or
/// TQ_ERR_INVALID_ARGUMENT (NULL argument, bad UTF-8, a listed task),
/// TQ_ERR_BUSY, TQ_ERR_IO.
///
/// Ownership: the caller owns `*out_json` and frees it with
/// `tq_string_free`.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_step_get(
    queue: *const tq_queue,
    task: *const tq_task,
    name: *const c_char,
    out_json: *mut *mut c_char,
) -> tq_status {
    guard("tq_step_get", || {
        let out = out_pointer(out_json, "out_json")?;
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { out.write(std::ptr::null_mut()) };
        let queue = unsafe { borrow(queue, "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        let name = unsafe { utf8_string(name, "name") }?;
        let receipt = task.receipt.ok_or_else(|| {
            Error::invalid_argument("task was listed, not pulled: read its steps with tq_get_task")
        })?;
        let Some(output) = queue.0.step_output(receipt, name)? else {
            return Ok(tq_status::TQ_EMPTY);
        };
        let output = CString::new(output)
            .map_err(|_| Error::invalid_argument("the step's output holds a NUL byte"))?;
        // SAFETY: as above.
        unsafe { out.write(hand_out_string(output)?) };
        Ok(tq_status::TQ_OK)
    })
}

/// Frees a string from tq.
///
/// Frees a string tq handed to the caller (`tq_step_get`). NULL is a
/// no-op; call at most once per string. A pointer that is not a live
/// string from tq is left alone, and says so in `tq_last_error`.
///
/// Ownership: the string is tq's to free, never `free()`'s.
/// Thread safety: may run on any thread, once no other uses the string.
#[no_mangle]
pub extern "C" fn tq_string_free(text: *mut c_char) {
    guard_or("tq_string_free", (), || free_string(text))
}

/// Clears the steps recorded after a named step, for a retry.
///
/// Deletes the steps of task `id` of the queue recorded after its step
/// `name`, so that its next delivery runs them again ("retry from step
/// `name`"); the steps up to `name` are kept. `tq_retry_dead` keeps every
/// step: clear them first. Stores how many were deleted in `*out_cleared`
/// when it is not NULL.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or name, bad
/// UTF-8, no task `id` in the queue, a task held by a worker, no step
/// `name`; nothing changes), TQ_ERR_BUSY, TQ_ERR_IO.
///
/// Ownership: `name` is only read during the call.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_clear_steps_after(
    queue: *mut tq_queue,
    id: i64,
    name: *const c_char,
    out_cleared: *mut u64,
) -> tq_status {
    guard("tq_clear_steps_after", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let name = unsafe { utf8_string(name, "name") }?;
        let cleared = queue.0.clear_steps_after(id, name)?;
        // SAFETY: a non-NULL `out_cleared` is writable per the contract.
        unsafe { super::write_optional(out_cleared, cleared) };
        Ok(tq_status::TQ_OK)
    })
}
