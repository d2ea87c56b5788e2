//! Pushing: how tasks from C are checked and stored, one at a time or
//! several in one transaction.

use std::ffi::c_char;

use super::objects::{borrow, borrow_optional};
use super::{array, guard, non_null, tq_push_options, tq_queue, tq_status, write_optional};
use crate::error::{Error, Result};
use crate::options::{PushOptions, MAX_PAYLOAD_LEN};
use crate::queue::check_batch_options;
use crate::task::Pushed;

/// Pushing: storing new tasks
/// ==========================
///
/// Pushes a task.
///
/// Stores the JSON text `payload[0..len]` (UTF-8, no terminator needed) as
/// a new pending task, exactly as given, and writes its id to `*out_id`
/// when `out_id` is not NULL. `options` may be NULL for the defaults.
/// Returns once the task is stored at the handle's durability.
///
/// Returns TQ_OK, TQ_DUPLICATE (the options' unique key is held by a task
/// of the queue: nothing is stored, and `*out_id` is that task's id),
/// TQ_MERGED (the options replace or debounce the pending task holding
/// the key, `tq_push_options_set_replace_pending`, and it took the push:
/// `*out_id` is its id), or
/// TQ_ERR_INVALID_ARGUMENT (NULL queue or payload, bad
/// UTF-8, len over the handle's limit, `TQ_MAX_PAYLOAD_LEN` unless set with
/// `tq_options_set_max_payload_len`), TQ_ERR_INVALID_JSON, TQ_ERR_BUSY,
/// TQ_ERR_IO. On any error nothing is stored (for TQ_ERR_IO: unless the
/// disk took the write before failing).
///
/// Ownership: tq copies the payload; the caller keeps it.
/// Thread safety: any number of threads may push on one handle at once.
#[no_mangle]
pub extern "C" fn tq_push(
    queue: *mut tq_queue,
    payload: *const c_char,
    len: usize,
    options: *const tq_push_options,
    out_id: *mut i64,
) -> tq_status {
    guard("tq_push", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let payload = unsafe { payload_text(payload, len) }?;
        let defaults = PushOptions::default();
        let options = unsafe { borrow_optional(options, "options") }?.map_or(&defaults, |o| &o.0);
        let pushed = queue.0.push(payload, options)?;
        unsafe { write_optional(out_id, pushed.id()) };
        Ok(match pushed {
            Pushed::Stored(_) => tq_status::TQ_OK,
            Pushed::Duplicate(_) => tq_status::TQ_DUPLICATE,
            Pushed::Merged(_) => tq_status::TQ_MERGED,
        })
    })
}

/// Pushes several tasks with the same options, all or none.
///
/// Stores `count` JSON texts as new pending tasks in one transaction, in
/// order: all of them or none. `payloads[i]` points to `lens[i]` bytes of
/// UTF-8. `options` (may be NULL) applies to every task and must not have a
/// unique key. Writes the new ids to `out_ids[0..count]` when `out_ids` is
/// not NULL. `count` 0 stores nothing and succeeds.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_JSON or TQ_ERR_INVALID_ARGUMENT (a
/// NULL array or payload, bad UTF-8, a payload over the limit, a unique
/// key) with a message naming the index of the first bad payload;
/// TQ_ERR_BUSY, TQ_ERR_IO. On any error nothing is stored.
///
/// Ownership: tq copies the payloads. Thread safety: as `tq_push`.
#[no_mangle]
pub extern "C" fn tq_push_batch(
    queue: *mut tq_queue,
    payloads: *const *const c_char,
    lens: *const usize,
    count: usize,
    options: *const tq_push_options,
    out_ids: *mut i64,
) -> tq_status {
    guard("tq_push_batch", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let defaults = PushOptions::default();
        let options = unsafe { borrow_optional(options, "options") }?.map_or(&defaults, |o| &o.0);
        // In the order the engine checks: options, then each payload.
        check_batch_options(options)?;
        let pointers = unsafe { array(payloads, count, "payloads") }?;
        let lens = unsafe { array(lens, count, "lens") }?;
        let texts = pointers
            .iter()
            .zip(lens)
            .enumerate()
            // Each payload is checked whole (UTF-8, then JSON and length)
            // before the next, so the error is the first bad payload's.
            .map(|(index, (&pointer, &len))| {
                unsafe { payload_text(pointer, len) }
                    .and_then(|text| queue.0.check_payload(text).map(|()| text))
                    .map_err(|err| {
                        Error::new(err.kind(), format!("payload {index}: {}", err.message()))
                    })
            })
            .collect::<Result<Vec<&str>>>()?;
        let ids = queue.0.push_batch(&texts, options)?;
        if !out_ids.is_null() {
            // SAFETY: a non-NULL `out_ids` has room for `count` ids.
            unsafe { std::slice::from_raw_parts_mut(out_ids, count) }.copy_from_slice(&ids);
        }
        Ok(tq_status::TQ_OK)
    })
}

/// Pushes several tasks, each with its own options, all or none.
///
/// Stores `count` JSON texts as new tasks in one transaction, in order,
/// each with its own options, as `tq_push` would: all of them or none.
/// `payloads[i]` points to `lens[i]` bytes of UTF-8; `options[i]` may be
/// NULL for the defaults (`options` itself may be NULL for all defaults).
/// An item may wait for an earlier one (`tq_push_options_add_after_item`),
/// so a graph is stored whole; an item whose unique key a task holds
/// stores nothing, and an item waiting for it waits for that task. Writes
/// each item's id (new, or of the task holding its key) to
/// `out_ids[0..count]` when `out_ids` is not NULL. `count` 0 stores
/// nothing and succeeds.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_JSON or TQ_ERR_INVALID_ARGUMENT (a
/// NULL array or payload, bad UTF-8, a payload over the limit, an item
/// waiting for itself or a later one, a task to wait for that is not in
/// the queue, or that is dead or cancelled for an item to be cancelled
/// then) with a message naming the index of the first bad item;
/// TQ_ERR_BUSY, TQ_ERR_IO. On any error nothing is stored.
///
/// Ownership: tq copies the payloads and reads the options only during the
/// call. Thread safety: as `tq_push`.
#[no_mangle]
pub extern "C" fn tq_push_items(
    queue: *mut tq_queue,
    payloads: *const *const c_char,
    lens: *const usize,
    options: *const *const tq_push_options,
    count: usize,
    out_ids: *mut i64,
) -> tq_status {
    guard("tq_push_items", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let pointers = unsafe { array(payloads, count, "payloads") }?;
        let lens = unsafe { array(lens, count, "lens") }?;
        let options: &[*const tq_push_options] = if options.is_null() {
            &[]
        } else {
            unsafe { array(options, count, "options") }?
        };
        let items = (0..count)
            .map(|index| {
                let item = || -> Result<(&str, PushOptions)> {
                    // Checked whole, as tq_push_batch does, so the error
                    // is the first bad item's.
                    let payload = unsafe { payload_text(pointers[index], lens[index]) }?;
                    queue.0.check_payload(payload)?;
                    let item_options = match options.get(index) {
                        Some(&pointer) => unsafe { borrow_optional(pointer, "options") }?
                            .map_or_else(PushOptions::default, |o| o.0.clone()),
                        None => PushOptions::default(),
                    };
                    Ok((payload, item_options))
                };
                item().map_err(|err| {
                    Error::new(err.kind(), format!("item {index}: {}", err.message()))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let ids: Vec<i64> = queue
            .0
            .push_items(&items)?
            .into_iter()
            .map(Pushed::id)
            .collect();
        if !out_ids.is_null() {
            // SAFETY: a non-NULL `out_ids` has room for `count` ids.
            unsafe { std::slice::from_raw_parts_mut(out_ids, count) }.copy_from_slice(&ids);
        }
        Ok(tq_status::TQ_OK)
    })
}

/// A payload from C: `len` bytes of UTF-8 at `pointer`.
///
/// Safety: a non-NULL `pointer` points to `len` readable bytes.
pub(super) unsafe fn payload_text<'a>(pointer: *const c_char, len: usize) -> Result<&'a str> {
    let pointer = non_null(pointer, "payload")?;
    if len > MAX_PAYLOAD_LEN {
        return Err(Error::invalid_argument(format!(
            "payload length {len} is over the limit of {MAX_PAYLOAD_LEN} bytes"
        )));
    }
    // SAFETY: per the contract above.
    let bytes = unsafe { std::slice::from_raw_parts(pointer.cast::<u8>(), len) };
    std::str::from_utf8(bytes)
        .map_err(|err| Error::invalid_argument(format!("payload is not valid UTF-8: {err}")))
}
