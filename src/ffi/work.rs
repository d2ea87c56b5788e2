//! Working on tasks: how a worker claims tasks and ends or renews each
//! delivery (finish, fail, extend, snooze), one at a time or in batches.

use std::ffi::c_char;
use std::time::Duration;

use super::objects::{borrow, borrow_optional, hand_out};
use super::task::TaskArray;
use super::{
    array, guard, out_pointer, tq_cancel, tq_pull_options, tq_queue, tq_status, tq_task,
    utf8_string,
};
use crate::error::{Error, ErrorKind, Result};
use crate::options::PullOptions;
use crate::task::{Receipt, Stop};

/// Working: claiming tasks, then finishing, failing or renewing them
/// =================================================================
///
/// Claims the ready task first in line.
///
/// Claims the ready task first in line under a lease and stores it in
/// `*out`: the highest priority first, then the task ready longest (a
/// pending task that is due, or one whose lease expired). Its attempt count
/// goes up by one. No two holders ever hold the same task at once.
/// `options` may be NULL for the defaults (a 30 s lease, no waiting).
///
/// Returns TQ_OK with `*out` set, TQ_EMPTY with `*out` NULL when no task
/// was ready by the end of the options' wait, or TQ_ERR_INTERRUPTED (the
/// wait was ended by `tq_interrupt` or the options' `tq_cancel`),
/// TQ_ERR_INVALID_ARGUMENT (NULL queue or out), TQ_ERR_BUSY, TQ_ERR_IO,
/// TQ_ERR_NOT_A_DATABASE (the stored task is damaged).
///
/// Ownership: the caller owns `*out` and frees it with `tq_task_free`.
/// Thread safety: any number of threads may pull on one handle at once.
#[no_mangle]
pub extern "C" fn tq_pull(
    queue: *mut tq_queue,
    options: *const tq_pull_options,
    out: *mut *mut tq_task,
) -> tq_status {
    guard("tq_pull", || {
        let out = out_pointer(out, "out")?;
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { out.write(std::ptr::null_mut()) };
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let defaults = PullOptions::default();
        let options = unsafe { borrow_optional(options, "options") }?.map_or(&defaults, |o| &o.0);
        let Some(task) = queue.0.pull(options)? else {
            return Ok(tq_status::TQ_EMPTY);
        };
        let task = tq_task::delivered(task)?;
        // SAFETY: as above.
        unsafe { out.write(hand_out(task)?) };
        Ok(tq_status::TQ_OK)
    })
}

/// Claims several ready tasks at once.
///
/// Claims up to `max` ready tasks in one transaction, in the order
/// `tq_pull` would return them, waiting as `tq_pull` does when none is
/// ready. Stores them in `out_tasks[0..*out_count]`; the rest of
/// `out_tasks` is set to NULL. `out_tasks` has room for `max` pointers.
///
/// Returns TQ_OK with `*out_count` at least 1, TQ_EMPTY with `*out_count`
/// 0, or an error as `tq_pull` (with `*out_count` 0; `max` 0 is
/// TQ_ERR_INVALID_ARGUMENT).
///
/// Ownership: the caller owns each task and frees it with `tq_task_free`.
/// Thread safety: as `tq_pull`.
#[no_mangle]
pub extern "C" fn tq_pull_batch(
    queue: *mut tq_queue,
    options: *const tq_pull_options,
    max: usize,
    out_tasks: *mut *mut tq_task,
    out_count: *mut usize,
) -> tq_status {
    guard("tq_pull_batch", || {
        let out = unsafe { TaskArray::new(out_tasks, max, out_count) }?;
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let defaults = PullOptions::default();
        let options = unsafe { borrow_optional(options, "options") }?.map_or(&defaults, |o| &o.0);
        let tasks = queue
            .0
            .pull_batch(max, options)?
            .into_iter()
            .map(tq_task::delivered)
            .collect::<Result<Vec<_>>>()?;
        if tasks.is_empty() {
            return Ok(tq_status::TQ_EMPTY);
        }
        out.fill(tasks)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Finishes a delivery.
///
/// Completes this delivery of `task`: the task is deleted (or kept as done
/// on a handle opened with history). Succeeds as long as nobody else has
/// taken the task since it was pulled, even past its lease. The task may
/// have been pulled through another handle on the same file; it still must
/// be freed with `tq_task_free`.
///
/// Returns TQ_OK, or TQ_ERR_NOT_HELD (already finished, or the lease was
/// recovered or taken by another worker: nothing changes), TQ_ERR_CANCELLED
/// (the task was cancelled meanwhile: it ends as cancelled, not done),
/// TQ_ERR_INVALID_ARGUMENT (NULL queue or task; a task pulled from another
/// file or PostgreSQL schema), TQ_ERR_BUSY, TQ_ERR_IO.
///
/// Thread safety: any number of threads may finish on one handle at once.
#[no_mangle]
pub extern "C" fn tq_finish(queue: *mut tq_queue, task: *const tq_task) -> tq_status {
    guard("tq_finish", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        queue.0.finish(task.receipt()?)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Finishes a delivery and keeps a result.
///
/// Completes this delivery of `task` as `tq_finish` does, and keeps
/// `result` (UTF-8 JSON, at most the handle's payload limit) with the task
/// for any process to read (`tq_get_task`) or wait for (`tq_wait_task`):
/// on a handle without history for its result retention
/// (`tq_options_set_result_retention_ms`), with history as long as the
/// done task.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_JSON (nothing changes: the task stays
/// held), TQ_ERR_INVALID_ARGUMENT (NULL queue, task or result, not UTF-8,
/// longer than the payload limit: nothing changes), or an error as
/// `tq_finish`. `result` is only read during the call.
///
/// Thread safety: any number of threads may finish on one handle at once.
#[no_mangle]
pub extern "C" fn tq_finish_with_result(
    queue: *mut tq_queue,
    task: *const tq_task,
    result: *const c_char,
) -> tq_status {
    guard("tq_finish_with_result", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        let result = unsafe { utf8_string(result, "result") }?;
        queue.0.finish_with_result(task.receipt()?, result)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Finishes a delivery and claims the next task, in one commit.
///
/// Completes this delivery of `task` and claims the next ready task in the
/// same transaction, storing it in `*out`: a worker draining a backlog
/// pays one commit (one flush at TQ_DURABILITY_FULL) per task instead of
/// two. It never waits: on TQ_EMPTY, wait for the next task with `tq_pull`.
/// `options` (NULL for the defaults) sets the next task's lease and must
/// not set a wait. `task` must still be freed with `tq_task_free`.
///
/// Returns TQ_OK (finished, and `*out` set), TQ_EMPTY (finished; no task
/// ready, `*out` NULL), or, with nothing finished or claimed,
/// TQ_ERR_NOT_HELD (the delivery is no longer current), TQ_ERR_CANCELLED
/// (the task was cancelled meanwhile, and now ends as cancelled),
/// TQ_ERR_INVALID_ARGUMENT (NULL queue, task or out; options with a wait;
/// a task pulled from another file or PostgreSQL schema), TQ_ERR_BUSY,
/// TQ_ERR_IO.
///
/// Ownership: the caller owns `*out` and frees it with `tq_task_free`.
/// Thread safety: as `tq_pull`.
#[no_mangle]
pub extern "C" fn tq_finish_and_pull(
    queue: *mut tq_queue,
    task: *const tq_task,
    options: *const tq_pull_options,
    out: *mut *mut tq_task,
) -> tq_status {
    guard("tq_finish_and_pull", || {
        let out = out_pointer(out, "out")?;
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { out.write(std::ptr::null_mut()) };
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        let defaults = PullOptions::default();
        let options = unsafe { borrow_optional(options, "options") }?.map_or(&defaults, |o| &o.0);
        let Some(next) = queue.0.finish_and_pull(task.receipt()?, options)? else {
            return Ok(tq_status::TQ_EMPTY);
        };
        let next = tq_task::delivered(next)?;
        // SAFETY: as above.
        unsafe { out.write(hand_out(next)?) };
        Ok(tq_status::TQ_OK)
    })
}

/// Finishes several deliveries in one commit.
///
/// Completes `count` deliveries in one transaction. Writes, when
/// `out_statuses` is not NULL, TQ_OK or TQ_ERR_NOT_HELD to
/// `out_statuses[i]` for `tasks[i]`: a task not held changes nothing, as
/// with `tq_finish`, and does not stop the others (a task cancelled
/// meanwhile is reported not held, and ends as cancelled). The tasks must still be
/// freed with `tq_task_free`. `count` 0 succeeds.
///
/// Returns TQ_OK once the transaction committed (check `out_statuses`), or
/// TQ_ERR_INVALID_ARGUMENT (NULL queue or array, a NULL or freed task, a
/// task pulled from another file or PostgreSQL schema: nothing is
/// finished), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: as `tq_finish`.
#[no_mangle]
pub extern "C" fn tq_finish_batch(
    queue: *mut tq_queue,
    tasks: *const *mut tq_task,
    count: usize,
    out_statuses: *mut i32,
) -> tq_status {
    guard("tq_finish_batch", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let batch = unsafe { Deliveries::borrow(tasks, count) }?;
        let held = queue.0.finish_batch(&batch.receipts)?;
        let statuses = held.into_iter().map(|held| {
            if held {
                tq_status::TQ_OK
            } else {
                tq_status::TQ_ERR_NOT_HELD
            }
        });
        unsafe { batch.report(statuses, out_statuses) };
        Ok(tq_status::TQ_OK)
    })
}

/// Finishes several deliveries and claims tasks, in one commit.
///
/// Completes `count` deliveries and claims up to `max` ready tasks, as
/// `tq_pull_batch` does, in one transaction: a worker's finished tasks and
/// the claims of its free handlers share one commit (one flush at
/// TQ_DURABILITY_FULL). Writes, when `out_statuses` is not NULL, to
/// `out_statuses[i]` what `tq_finish` would have returned for `tasks[i]`:
/// TQ_OK, TQ_ERR_NOT_HELD, or TQ_ERR_CANCELLED (cancelled meanwhile: it now
/// ends as cancelled). A task not finished stops neither the others nor
/// the claim. It never waits: `options` (NULL for the defaults) sets the
/// new tasks' lease and must not set a wait. `count` 0 only claims; `max`
/// 0 only finishes, and `out_tasks` may then be NULL. The finished tasks
/// must still be freed with `tq_task_free`.
///
/// Returns, once the transaction committed, TQ_OK with `*out_count` at
/// least 1 or TQ_EMPTY with `*out_count` 0 (check `out_statuses`); or, with
/// nothing finished or claimed and `*out_count` 0,
/// TQ_ERR_INVALID_ARGUMENT (NULL queue, tasks or out_count; NULL
/// out_tasks with `max` above 0; a NULL or freed task; a task pulled from
/// another file or PostgreSQL schema; options with a wait), TQ_ERR_BUSY,
/// TQ_ERR_IO.
///
/// Ownership: the caller owns each task written to `out_tasks[0..max]`
/// and frees it with `tq_task_free`.
/// Thread safety: as `tq_pull`.
#[no_mangle]
pub extern "C" fn tq_finish_and_pull_batch(
    queue: *mut tq_queue,
    tasks: *const *mut tq_task,
    count: usize,
    out_statuses: *mut i32,
    options: *const tq_pull_options,
    max: usize,
    out_tasks: *mut *mut tq_task,
    out_count: *mut usize,
) -> tq_status {
    guard("tq_finish_and_pull_batch", || {
        let out = if max == 0 && out_tasks.is_null() {
            let out_count = out_pointer(out_count, "out_count")?;
            // SAFETY: non-NULL and writable per the contract.
            unsafe { out_count.write(0) };
            None
        } else {
            Some(unsafe { TaskArray::new(out_tasks, max, out_count) }?)
        };
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let batch = unsafe { Deliveries::borrow(tasks, count) }?;
        let defaults = PullOptions::default();
        let options = unsafe { borrow_optional(options, "options") }?.map_or(&defaults, |o| &o.0);
        let (finished, claimed) = queue
            .0
            .finish_and_pull_batch(&batch.receipts, options, max)?;
        let statuses = finished.iter().map(|finished| match finished {
            Ok(()) => tq_status::TQ_OK,
            Err(err) => tq_status::from(err.kind()),
        });
        unsafe { batch.report(statuses, out_statuses) };
        let claimed = claimed
            .into_iter()
            .map(tq_task::delivered)
            .collect::<Result<Vec<_>>>()?;
        match out {
            Some(out) if !claimed.is_empty() => {
                out.fill(claimed)?;
                Ok(tq_status::TQ_OK)
            }
            _ => Ok(tq_status::TQ_EMPTY),
        }
    })
}

/// The deliveries a batch call is given: the caller's tasks, and the
/// receipts of those that have one (a listed task has none).
struct Deliveries<'a> {
    tasks: Vec<&'a tq_task>,
    receipts: Vec<Receipt>,
}

impl Deliveries<'_> {
    /// Safety: a non-NULL `tasks` holds `count` pointers, per the calls'
    /// contracts.
    unsafe fn borrow<'a>(tasks: *const *mut tq_task, count: usize) -> Result<Deliveries<'a>> {
        let tasks = unsafe { array(tasks, count, "tasks") }?
            .iter()
            .enumerate()
            .map(|(index, &task)| unsafe { borrow(task.cast_const(), &format!("tasks[{index}]")) })
            .collect::<Result<Vec<&tq_task>>>()?;
        let receipts = tasks.iter().filter_map(|task| task.receipt).collect();
        Ok(Deliveries { tasks, receipts })
    }

    /// Writes, when `out_statuses` is not NULL, to `out_statuses[i]` the
    /// status of each task: the next of `statuses` (one per receipt) for a
    /// task with a receipt, TQ_ERR_NOT_HELD for a listed task.
    ///
    /// Safety: a non-NULL `out_statuses` has room for one value per task.
    unsafe fn report(&self, statuses: impl Iterator<Item = tq_status>, out_statuses: *mut i32) {
        if out_statuses.is_null() {
            return;
        }
        let mut of_receipts = statuses;
        let statuses: Vec<i32> = self
            .tasks
            .iter()
            .map(|task| match task.receipt {
                Some(_) => of_receipts.next().unwrap_or(tq_status::TQ_ERR_NOT_HELD) as i32,
                None => tq_status::TQ_ERR_NOT_HELD as i32,
            })
            .collect();
        // SAFETY: per the contract above.
        unsafe { std::slice::from_raw_parts_mut(out_statuses, statuses.len()) }
            .copy_from_slice(&statuses);
    }
}

/// Fails a delivery: the task is retried later, or dead.
///
/// Ends this delivery of `task` as failed, keeping `reason` (NUL-terminated
/// UTF-8, cut to `TQ_MAX_REASON_LEN` bytes; NULL or "" for none) as its last
/// error. The task is pending again after the handle's retry back-off, or,
/// when this delivery was its last attempt, dead. The task must still be
/// freed with `tq_task_free`.
///
/// Returns TQ_OK, or TQ_ERR_NOT_HELD (the delivery is no longer current:
/// nothing changes), TQ_ERR_CANCELLED (the task was cancelled meanwhile,
/// and now ends as cancelled), TQ_ERR_INVALID_ARGUMENT (NULL queue or task,
/// reason not UTF-8, a task pulled from another file or PostgreSQL schema),
/// TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: any number of threads may fail tasks on one handle at once.
#[no_mangle]
pub extern "C" fn tq_fail(
    queue: *mut tq_queue,
    task: *const tq_task,
    reason: *const c_char,
) -> tq_status {
    guard("tq_fail", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        let reason = if reason.is_null() {
            ""
        } else {
            unsafe { utf8_string(reason, "reason") }?
        };
        queue.0.fail(task.receipt()?, reason)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Renews a delivery's lease.
///
/// Renews the lease of a held task: it now expires `lease_ms` milliseconds
/// from now (1 ms to one year). Call it regularly while working on a long
/// task. A lease that already expired may be renewed while nobody took the
/// task, unless the queue is at its concurrency limit (the expired lease
/// held no slot, and another claim may have taken it).
///
/// Returns TQ_OK, or TQ_ERR_NOT_HELD (the lease was lost: stop working on
/// the task, another worker may have it), TQ_ERR_CANCELLED (the task was
/// cancelled: stop working on it; it ends as cancelled), TQ_ERR_INVALID_ARGUMENT (NULL
/// queue or task, out of range, a task pulled from another file or
/// PostgreSQL schema), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_extend(
    queue: *mut tq_queue,
    task: *const tq_task,
    lease_ms: u64,
) -> tq_status {
    guard("tq_extend", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        queue
            .0
            .extend(task.receipt()?, Duration::from_millis(lease_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Renews a delivery's lease and records progress.
///
/// Renews the lease of a held task as `tq_extend` does, and records
/// `progress` (UTF-8 JSON, at most the handle's payload limit) with it, for
/// anyone to read (`tq_get_task`, `tq_task_progress`), a later delivery of
/// the task included.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_JSON, TQ_ERR_INVALID_ARGUMENT (NULL
/// progress, not UTF-8, too long; nothing changes), or an error as
/// `tq_extend`. `progress` is only read during the call.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_extend_with_progress(
    queue: *mut tq_queue,
    task: *const tq_task,
    lease_ms: u64,
    progress: *const c_char,
) -> tq_status {
    guard("tq_extend_with_progress", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        let progress = unsafe { utf8_string(progress, "progress") }?;
        queue
            .0
            .extend_with_progress(task.receipt()?, Duration::from_millis(lease_ms), progress)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Hands a delivery back for later, without using an attempt.
///
/// Hands this delivery of `task` back: the task runs again `delay_ms`
/// milliseconds from now (0 to one year), and this delivery does not count
/// as an attempt. For a worker that cannot do the task yet. The task must
/// still be freed with `tq_task_free`.
///
/// Returns TQ_OK, or TQ_ERR_NOT_HELD (the delivery is no longer current:
/// nothing changes), TQ_ERR_CANCELLED (the task was cancelled meanwhile),
/// TQ_ERR_INVALID_ARGUMENT (NULL queue or task, delay out of range, a task
/// pulled from another file or PostgreSQL schema), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_snooze(
    queue: *mut tq_queue,
    task: *const tq_task,
    delay_ms: u64,
) -> tq_status {
    guard("tq_snooze", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        queue
            .0
            .snooze(task.receipt()?, Duration::from_millis(delay_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Waits for a reason to stop working on a held task.
///
/// Waits up to `timeout_ms` milliseconds (at most one year) for a reason
/// to stop working on the held `task`, so that a worker stops at once
/// rather than at its next `tq_extend`: run it on a thread beside the work.
/// It only reads, once at the start and then when a cancellation of the
/// queue is recorded in any process (about once a second as a safety net).
/// `cancel` (NULL for none) ends the wait early: trigger it when the work
/// is done.
///
/// Returns TQ_ERR_CANCELLED once the task's cancellation (`tq_cancel_task`)
/// is recorded: stop working; the delivery's next `tq_extend`, `tq_finish`,
/// `tq_fail` or `tq_snooze` returns TQ_ERR_CANCELLED and ends the task as
/// cancelled. TQ_ERR_NOT_HELD once the delivery is over (finished, failed,
/// snoozed, or its lease expired and the task was taken back; or `task`
/// was listed, not pulled). TQ_EMPTY when
/// the timeout passed first. TQ_ERR_INTERRUPTED when `cancel` was triggered
/// or `tq_interrupt` called on the handle. Or TQ_ERR_INVALID_ARGUMENT (NULL
/// queue or task, a task from another file or PostgreSQL schema, timeout
/// out of range, `cancel` not a live tq_cancel), TQ_ERR_BUSY, TQ_ERR_IO.
/// Nothing changes in any case.
///
/// Ownership: `task` and `cancel` stay the caller's and must stay alive
/// until the call returns.
/// Thread safety: may run concurrently with any other call, on the same
/// task too (the worker keeps using it meanwhile).
#[no_mangle]
pub extern "C" fn tq_wait_cancellation(
    queue: *const tq_queue,
    task: *const tq_task,
    timeout_ms: u64,
    cancel: *const tq_cancel,
) -> tq_status {
    guard("tq_wait_cancellation", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        let cancel = unsafe { borrow_optional(cancel, "cancel") }?;
        let stop = queue.0.wait_for_cancellation(
            task.receipt()?,
            Duration::from_millis(timeout_ms),
            cancel.map(|cancel| &cancel.0),
        )?;
        match stop {
            None => Ok(tq_status::TQ_EMPTY),
            Some(Stop::Cancelled) => Err(Error::new(
                ErrorKind::Cancelled,
                format!("task {} was cancelled while this delivery held it", task.id),
            )),
            Some(Stop::NotHeld) => Err(Error::new(
                ErrorKind::NotHeld,
                format!("this delivery of task {} is over", task.id),
            )),
        }
    })
}
