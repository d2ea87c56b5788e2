//! Managing tasks from outside a delivery: reading and waiting for a
//! task's outcome, cancelling, counting, listing, retrying the dead,
//! purging and recovering.

use std::ffi::c_char;
use std::time::Duration;

use super::objects::{borrow, borrow_optional, hand_out};
use super::task::{state_value, task_state, TaskArray};
use super::{
    guard, out_pointer, saturate, tq_cancel, tq_queue, tq_status, tq_task, utf8_string,
    write_optional,
};
use crate::error::Result;
use crate::task::{Cancelled, TaskState};

/// Managing tasks: outcomes, cancelling, counts, lists, retries, recovery
/// ======================================================================
///
/// Reads a task by its id.
///
/// Reads task `id` of the queue as it is now, with its result and
/// progress, into `*out`.
///
/// Returns TQ_OK with `*out` set, TQ_EMPTY with `*out` NULL when the queue
/// has no such task (never pushed, or ended and not kept), or
/// TQ_ERR_INVALID_ARGUMENT (NULL queue or out), TQ_ERR_BUSY, TQ_ERR_IO.
///
/// Ownership: the caller owns `*out` and frees it with `tq_task_free`; it
/// is a snapshot, not held.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_get_task(
    queue: *const tq_queue,
    id: i64,
    out: *mut *mut tq_task,
) -> tq_status {
    guard("tq_get_task", || {
        let out = out_pointer(out, "out")?;
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { out.write(std::ptr::null_mut()) };
        let queue = unsafe { borrow(queue, "queue") }?;
        let Some(task) = queue.0.task(id)? else {
            return Ok(tq_status::TQ_EMPTY);
        };
        let task = tq_task::listed(task)?;
        // SAFETY: as above.
        unsafe { out.write(hand_out(task)?) };
        Ok(tq_status::TQ_OK)
    })
}

/// Waits for a task to end.
///
/// Waits up to `timeout_ms` milliseconds (0 to one year) for task `id` of
/// the queue to end, and stores it as it ended in `*out`: TQ_STATE_DONE
/// with its result (`tq_task_result`), TQ_STATE_DEAD or
/// TQ_STATE_CANCELLED with its reason (`tq_task_last_error`). A task that
/// has ended already answers at once. The wait only reads, and wakes when
/// the task ends through this process or, through another, by a write that
/// rings the queue's waiters (else it looks as often as a waiting
/// `tq_pull`). A task the wait saw not yet ended that then left the store
/// (finished without a result on a handle without history, cancelled
/// there, or purged) has ended too: it is stored as last seen, as
/// TQ_STATE_DONE without a result. `cancel`, when not NULL, ends the wait
/// once triggered (`tq_cancel_trigger`, from any thread), as it ends a
/// waiting `tq_pull`.
///
/// Returns TQ_OK with `*out` set, TQ_EMPTY with `*out` NULL when the
/// timeout passed first, TQ_ERR_INVALID_ARGUMENT (NULL queue or out,
/// timeout out of range, no task `id`, or one that ended without being
/// kept: on a handle without history, finish it with a result to wait for
/// it), TQ_ERR_INTERRUPTED (`cancel` triggered, or after `tq_interrupt`),
/// TQ_ERR_BUSY, TQ_ERR_IO.
///
/// Ownership: the caller owns `*out` and frees it with `tq_task_free`;
/// `cancel` is borrowed for the call and must outlive it.
/// Thread safety: any number of threads may wait on one handle at once.
#[no_mangle]
pub extern "C" fn tq_wait_task(
    queue: *const tq_queue,
    id: i64,
    timeout_ms: u64,
    cancel: *const tq_cancel,
    out: *mut *mut tq_task,
) -> tq_status {
    guard("tq_wait_task", || {
        let out = out_pointer(out, "out")?;
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { out.write(std::ptr::null_mut()) };
        let queue = unsafe { borrow(queue, "queue") }?;
        let cancel = unsafe { borrow_optional(cancel, "cancel") }?;
        let Some(task) = queue.0.wait_for(
            id,
            Duration::from_millis(timeout_ms),
            cancel.map(|cancel| &cancel.0),
        )?
        else {
            return Ok(tq_status::TQ_EMPTY);
        };
        let task = tq_task::listed(task)?;
        // SAFETY: as above.
        unsafe { out.write(hand_out(task)?) };
        Ok(tq_status::TQ_OK)
    })
}

/// Waits for a change that may end a wait for tasks.
///
/// Waits up to `timeout_ms` milliseconds (at most one year) for a change
/// that may end a wait for a task's outcome (`tq_wait_task`) or a
/// delivery (`tq_wait_cancellation`), so that one thread can wait for any
/// number of tasks: after each return, read again the tasks waited for
/// (`tq_wait_task` or `tq_wait_cancellation` with a zero timeout) and call
/// again with the mark it wrote. It wakes for a write to the queue in this
/// process, a cancellation recorded in any process, or a commit of another
/// process (seen as often as a waiting `tq_pull` sees one). It only reads.
///
/// `seen` is a mark written by an earlier call: a change since then returns
/// at once. To miss nothing, take a mark first (`timeout_ms` 0, any
/// `seen`), then read the tasks, then wait with the mark. `cancel` (NULL
/// for none) ends the wait early.
///
/// Returns TQ_OK with the mark now in `*out_mark` when something may have
/// changed (a cancellation returns even when the mark did not move), or
/// TQ_EMPTY with `*out_mark` = `seen` when the timeout passed first.
/// TQ_ERR_INTERRUPTED when `cancel` was triggered or `tq_interrupt` called
/// on the handle. Or TQ_ERR_INVALID_ARGUMENT (NULL queue or out_mark,
/// timeout out of range, `cancel` not a live tq_cancel), TQ_ERR_BUSY,
/// TQ_ERR_IO; `*out_mark` is then left as it was.
///
/// Ownership: `cancel` stays the caller's and must stay alive until the
/// call returns.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_wait_change(
    queue: *const tq_queue,
    seen: u64,
    timeout_ms: u64,
    cancel: *const tq_cancel,
    out_mark: *mut u64,
) -> tq_status {
    guard("tq_wait_change", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        let out_mark = out_pointer(out_mark, "out_mark")?;
        let cancel = unsafe { borrow_optional(cancel, "cancel") }?;
        let changed = queue.0.wait_for_change(
            seen,
            Duration::from_millis(timeout_ms),
            cancel.map(|cancel| &cancel.0),
        )?;
        // SAFETY: `out_mark` is non-NULL and writable per the contract.
        unsafe { out_mark.write(changed.unwrap_or(seen)) };
        Ok(match changed {
            Some(_) => tq_status::TQ_OK,
            None => tq_status::TQ_EMPTY,
        })
    })
}

/// Cancels a task by its id.
///
/// Cancels task `id` of the handle's queue, keeping `reason`
/// (NUL-terminated UTF-8, cut to `TQ_MAX_REASON_LEN` bytes; NULL or "" for
/// none) as its last error. A pending, delayed or dead task leaves the line
/// at once (kept as TQ_STATE_CANCELLED on a handle with history, deleted
/// otherwise) and `*out_state`, when not NULL, is set to
/// TQ_STATE_CANCELLED. A leased task is never delivered again; its holder
/// learns of it at its next `tq_extend`, `tq_finish`, `tq_fail` or
/// `tq_snooze`, which return TQ_ERR_CANCELLED; `*out_state` is then set to
/// TQ_STATE_LEASED. If the holder never calls again, the task ends as
/// cancelled once its lease has run out, at the next claim of any queue of
/// the file (or `tq_recover`). Cancelling a cancelled task again changes nothing and
/// reports the same.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, reason not
/// UTF-8, no task `id` in this queue, the task is done: nothing changes),
/// TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_cancel_task(
    queue: *mut tq_queue,
    id: i64,
    reason: *const c_char,
    out_state: *mut i32,
) -> tq_status {
    guard("tq_cancel_task", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let reason = if reason.is_null() {
            ""
        } else {
            unsafe { utf8_string(reason, "reason") }?
        };
        let state = match queue.0.cancel_task(id, reason)? {
            Cancelled::Removed => TaskState::Cancelled,
            Cancelled::Requested => TaskState::Leased,
        };
        unsafe { write_optional(out_state, state_value(state)) };
        Ok(tq_status::TQ_OK)
    })
}

/// Counts the tasks in a state.
///
/// Writes to `*out_count` how many tasks are in `state` (a `tq_state`
/// value, passed as a plain integer).
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out_count,
/// unknown state), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_count(queue: *const tq_queue, state: i32, out_count: *mut i64) -> tq_status {
    guard("tq_count", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        let out_count = out_pointer(out_count, "out_count")?;
        let count = queue.0.count(task_state(state)?)?;
        // SAFETY: non-NULL and writable per the contract.
        unsafe { out_count.write(saturate(count)) };
        Ok(tq_status::TQ_OK)
    })
}

/// Counts the ordered groups whose tasks wait for their turn.
///
/// Writes to `*out_count` how many ordered groups of the handle's queue
/// have tasks waiting for their turn behind the group's earlier tasks
/// (`tq_push_options_set_group`); those tasks count as TQ_STATE_PENDING.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out_count),
/// TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_groups_waiting(queue: *const tq_queue, out_count: *mut i64) -> tq_status {
    guard("tq_groups_waiting", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        let out_count = out_pointer(out_count, "out_count")?;
        let count = queue.0.groups_waiting()?;
        // SAFETY: non-NULL and writable per the contract.
        unsafe { out_count.write(saturate(count)) };
        Ok(tq_status::TQ_OK)
    })
}

/// How long the task ready longest has waited.
///
/// Writes to `*out_age_ms` how long, in milliseconds, the task of the
/// handle's queue that has been ready longest has waited.
///
/// Returns TQ_OK, TQ_EMPTY (no task is ready; `*out_age_ms` is 0), or
/// TQ_ERR_INVALID_ARGUMENT (NULL queue or out), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_oldest_ready_age_ms(
    queue: *const tq_queue,
    out_age_ms: *mut i64,
) -> tq_status {
    guard("tq_oldest_ready_age_ms", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        let out_age_ms = out_pointer(out_age_ms, "out_age_ms")?;
        // SAFETY: non-NULL and writable per the contract.
        unsafe { out_age_ms.write(0) };
        let Some(age) = queue.0.oldest_ready_age()? else {
            return Ok(tq_status::TQ_EMPTY);
        };
        unsafe { out_age_ms.write(saturate(age.as_millis() as u64)) };
        Ok(tq_status::TQ_OK)
    })
}

/// Lists a page of the tasks in a state.
///
/// Lists a page of the handle's queue's tasks in `state`: up to `max` of
/// them with ids above `after_id`, by id, stored in
/// `out_tasks[0..*out_count]` (the rest set to NULL). Start with `after_id`
/// 0 and pass the last id of each page to get the next; a page shorter
/// than `max` is the last. Listed tasks are snapshots, not held. A page
/// reads the table from `after_id` on: a call for tools, not for a worker's
/// loop.
///
/// Returns TQ_OK (`*out_count` may be 0), or TQ_ERR_INVALID_ARGUMENT (NULL
/// queue, out_tasks or out_count, unknown state), TQ_ERR_BUSY, TQ_ERR_IO.
///
/// Ownership: the caller owns each task and frees it with `tq_task_free`.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_list(
    queue: *const tq_queue,
    state: i32,
    after_id: i64,
    max: usize,
    out_tasks: *mut *mut tq_task,
    out_count: *mut usize,
) -> tq_status {
    guard("tq_list", || {
        let out = unsafe { TaskArray::new(out_tasks, max, out_count) }?;
        let queue = unsafe { borrow(queue, "queue") }?;
        let tasks = queue
            .0
            .list(task_state(state)?, after_id, max)?
            .into_iter()
            .map(tq_task::listed)
            .collect::<Result<Vec<_>>>()?;
        out.fill(tasks)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Retries a dead task.
///
/// Makes the dead task `id` of the handle's queue pending again, ready now,
/// with all its attempts ahead of it; a task of an ordered group waits,
/// behind its group's newest unfinished task, for its turn.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue; no dead task
/// `id` in this queue), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_retry_dead(queue: *mut tq_queue, id: i64) -> tq_status {
    guard("tq_retry_dead", || {
        unsafe { borrow(queue.cast_const(), "queue") }?
            .0
            .retry_dead(id)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Retries every dead task.
///
/// Makes every dead task of the handle's queue pending again, as
/// `tq_retry_dead` does, and writes how many to `*out_retried` when it is
/// not NULL.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
/// TQ_ERR_IO. Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_retry_all_dead(queue: *mut tq_queue, out_retried: *mut i64) -> tq_status {
    guard("tq_retry_all_dead", || {
        let retried = unsafe { borrow(queue.cast_const(), "queue") }?
            .0
            .retry_all_dead()?;
        unsafe { write_optional(out_retried, saturate(retried)) };
        Ok(tq_status::TQ_OK)
    })
}

/// Deletes ended tasks older than an age.
///
/// Deletes the handle's queue's tasks in `state` (TQ_STATE_DONE,
/// TQ_STATE_DEAD or TQ_STATE_CANCELLED) that got there at least `older_than_ms` milliseconds ago
/// (0: all of them), and writes how many to `*out_purged` when it is not
/// NULL.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, another state,
/// age over INT64_MAX), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_purge(
    queue: *mut tq_queue,
    state: i32,
    older_than_ms: u64,
    out_purged: *mut i64,
) -> tq_status {
    guard("tq_purge", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let purged = queue
            .0
            .purge(task_state(state)?, Duration::from_millis(older_than_ms))?;
        unsafe { write_optional(out_purged, saturate(purged)) };
        Ok(tq_status::TQ_OK)
    })
}

/// Brings back the tasks of expired leases and dead holders.
///
/// Returns to pending every leased task whose lease expired or whose holder
/// process no longer exists on this machine, and writes how many to
/// `*out_recovered` when it is not NULL. Tasks held by live processes, this
/// one included, are untouched: safe to call at every start-up.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
/// TQ_ERR_IO. Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_recover(queue: *mut tq_queue, out_recovered: *mut i64) -> tq_status {
    guard("tq_recover", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let recovered = queue.0.recover()?;
        unsafe { write_optional(out_recovered, saturate(recovered)) };
        Ok(tq_status::TQ_OK)
    })
}
