//! The task object: what a pulled or listed task holds for C, its
//! accessors and its free, and the caller's array that the calls returning
//! several tasks fill.

use std::ffi::{c_char, CString};

use super::objects::{borrow, free, hand_out_all};
use super::{guard_or, out_pointer, write_optional};
use crate::attempts::AttemptOutcome;
use crate::error::{Error, ErrorKind, Result};
use crate::task::{Receipt, Task, TaskInfo, TaskState};

/// A task owned by the caller: one delivery from `tq_pull` or
/// `tq_pull_batch`, or a snapshot from `tq_list`, `tq_get_task` or
/// `tq_wait_task` (which is not held, so finishing it answers
/// TQ_ERR_NOT_HELD). Reading it from several threads
/// at once is safe; freeing it is not.
pub struct tq_task {
    /// Present for a delivery, absent for a listed task.
    pub(super) receipt: Option<Receipt>,
    pub(super) id: i64,
    state: TaskState,
    attempts: u32,
    max_attempts: u32,
    priority: i32,
    run_at_unix_ms: i64,
    /// A listed task's expiry and deadline (0: none); a delivery has neither.
    expires_at_unix_ms: i64,
    deadline_unix_ms: i64,
    last_error: Option<CString>,
    payload: CString,
    /// A snapshot's result and progress; a delivery has neither.
    result: Option<CString>,
    progress: Option<CString>,
    /// A delivery's parents; a listed task's tasks it still waits for.
    parents: Vec<i64>,
    waiting_for: Vec<i64>,
    /// A listed task's ordered group; a delivery has none.
    group: Option<CString>,
    /// A snapshot's steps, in recording order; a delivery and a task of
    /// a list have none.
    steps: Vec<StepText>,
    /// A snapshot's ended attempts, oldest first; a delivery and a task of
    /// a list have none.
    ended_attempts: Vec<AttemptText>,
}

/// An ended attempt as C reads it (0 for each time or holder unknown).
struct AttemptText {
    attempt: u32,
    outcome: AttemptOutcome,
    reason: Option<CString>,
    holder_id: i64,
    holder_pid: i64,
    started_at_unix_ms: i64,
    ended_at_unix_ms: i64,
}

/// A recorded step as C reads it.
struct StepText {
    name: CString,
    output: CString,
    recorded_at_unix_ms: i64,
}

impl tq_task {
    pub(super) fn delivered(task: Task) -> Result<tq_task> {
        Ok(tq_task {
            receipt: Some(task.receipt),
            id: task.receipt.id(),
            state: TaskState::Leased,
            attempts: task.attempts,
            max_attempts: task.max_attempts,
            priority: task.priority,
            run_at_unix_ms: task.run_at_unix_ms,
            expires_at_unix_ms: 0,
            deadline_unix_ms: 0,
            last_error: task
                .last_error
                .map(|text| c_text(task.receipt.id(), text))
                .transpose()?,
            payload: c_text(task.receipt.id(), task.payload)?,
            result: None,
            progress: None,
            parents: task.parents,
            waiting_for: Vec::new(),
            group: None,
            steps: Vec::new(),
            ended_attempts: Vec::new(),
        })
    }

    pub(super) fn listed(task: TaskInfo) -> Result<tq_task> {
        Ok(tq_task {
            receipt: None,
            id: task.id,
            state: task.state,
            attempts: task.attempts,
            max_attempts: task.max_attempts,
            priority: task.priority,
            run_at_unix_ms: task.run_at_unix_ms,
            expires_at_unix_ms: task.expires_at_unix_ms.unwrap_or(0),
            deadline_unix_ms: task.deadline_unix_ms.unwrap_or(0),
            last_error: task
                .last_error
                .map(|text| c_text(task.id, text))
                .transpose()?,
            payload: c_text(task.id, task.payload)?,
            result: task.result.map(|text| c_text(task.id, text)).transpose()?,
            progress: task
                .progress
                .map(|text| c_text(task.id, text))
                .transpose()?,
            parents: Vec::new(),
            waiting_for: task.waiting_for,
            group: task.group.map(|key| c_text(task.id, key)).transpose()?,
            steps: task
                .steps
                .into_iter()
                .map(|step| {
                    Ok(StepText {
                        name: c_text(task.id, step.name)?,
                        output: c_text(task.id, step.output)?,
                        recorded_at_unix_ms: step.recorded_at_unix_ms,
                    })
                })
                .collect::<Result<_>>()?,
            ended_attempts: task
                .ended_attempts
                .into_iter()
                .map(|attempt| {
                    Ok(AttemptText {
                        attempt: attempt.attempt,
                        outcome: attempt.outcome,
                        reason: attempt
                            .reason
                            .map(|text| c_text(task.id, text))
                            .transpose()?,
                        holder_id: attempt.holder_id.unwrap_or(0),
                        holder_pid: attempt.holder_pid.unwrap_or(0),
                        started_at_unix_ms: attempt.started_at_unix_ms.unwrap_or(0),
                        ended_at_unix_ms: attempt.ended_at_unix_ms,
                    })
                })
                .collect::<Result<_>>()?,
        })
    }

    /// The receipt of a delivery; a listed task has none and is not held.
    pub(super) fn receipt(&self) -> Result<Receipt> {
        self.receipt.ok_or_else(|| {
            Error::new(
                ErrorKind::NotHeld,
                format!("task {} was listed, not pulled: it is not held", self.id),
            )
        })
    }
}

/// Stored text as a C string. JSON and tq's own reasons have no NUL byte,
/// and reasons from callers are C strings: a NUL means the row was changed
/// outside tq.
fn c_text(id: i64, text: String) -> Result<CString> {
    CString::new(text).map_err(|_| {
        Error::new(
            ErrorKind::NotADatabase,
            format!("task {id} has a NUL byte in a stored text"),
        )
    })
}

/// Values for `tq_count`, `tq_list`, `tq_purge` and `tq_task_state`.
#[repr(C)]
pub enum tq_state {
    /// Waiting to be claimed (possibly not yet due).
    TQ_STATE_PENDING = 0,
    /// Claimed under a lease (possibly expired and not yet taken back).
    TQ_STATE_LEASED = 1,
    /// Finished and kept as history (handles opened with history).
    TQ_STATE_DONE = 2,
    /// Used up its attempts; kept with its last failure reason until
    /// retried (`tq_retry_dead`) or purged.
    TQ_STATE_DEAD = 3,
    /// Cancelled (`tq_cancel_task`); kept with its reason (handles opened
    /// with history) until purged.
    TQ_STATE_CANCELLED = 4,
}

/// A `tq_state` passed from C as a plain integer.
pub(super) fn task_state(state: i32) -> Result<TaskState> {
    match state {
        0 => Ok(TaskState::Pending),
        1 => Ok(TaskState::Leased),
        2 => Ok(TaskState::Done),
        3 => Ok(TaskState::Dead),
        4 => Ok(TaskState::Cancelled),
        other => Err(Error::invalid_argument(format!(
            "unknown task state {other}"
        ))),
    }
}

pub(super) fn state_value(state: TaskState) -> i32 {
    match state {
        TaskState::Pending => 0,
        TaskState::Leased => 1,
        TaskState::Done => 2,
        TaskState::Dead => 3,
        TaskState::Cancelled => 4,
    }
}

/// A caller's array of `max` task pointers and its count, for the calls
/// that return several tasks: emptied (all NULL, count 0) before any other
/// check, so that it is in a defined state whatever the outcome.
pub(super) struct TaskArray<'a> {
    slots: &'a mut [*mut tq_task],
    count: *mut usize,
}

impl TaskArray<'_> {
    /// Safety: a non-NULL `tasks` has room for `max` pointers, and a
    /// non-NULL `count` is writable, per the calls' contracts.
    pub(super) unsafe fn new<'a>(
        tasks: *mut *mut tq_task,
        max: usize,
        count: *mut usize,
    ) -> Result<TaskArray<'a>> {
        let count = out_pointer(count, "out_count")?;
        // SAFETY: per the contract above.
        unsafe { count.write(0) };
        let tasks = out_pointer(tasks, "out_tasks")?;
        // SAFETY: per the contract above.
        let slots = unsafe { std::slice::from_raw_parts_mut(tasks, max) };
        slots.fill(std::ptr::null_mut());
        Ok(TaskArray { slots, count })
    }

    /// Hands `tasks` (at most `max`) to the caller and sets the count.
    pub(super) fn fill(self, tasks: Vec<tq_task>) -> Result<()> {
        let count = tasks.len();
        for (slot, task) in self.slots.iter_mut().zip(hand_out_all(tasks)?) {
            *slot = task;
        }
        // SAFETY: checked writable in `new`.
        unsafe { self.count.write(count) };
        Ok(())
    }
}

/// Tasks: reading a task that tq handed out, and freeing it
/// ========================================================
///
/// The task's id.
///
/// Returns the task's id (as returned by `tq_push`), or 0 when `task` is
/// NULL. Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_id(task: *const tq_task) -> i64 {
    guard_or("tq_task_id", 0, || task_field(task, |task| task.id, 0))
}

/// The token of the task's delivery: with the task's id, it names the
/// delivery in SQL, as `tq_finish(id, token)` of tq's SQLite extension and
/// PostgreSQL's `tq.finish(id, token)` take it, to finish the task in the
/// application's own transaction.
///
/// Returns the token for a task from `tq_pull` or
/// `tq_pull_batch`, and 0 for a task that is not a delivery (from
/// `tq_list`, `tq_get_task` or `tq_wait_task`) or when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_token(task: *const tq_task) -> i64 {
    guard_or("tq_task_token", 0, || {
        task_field(task, |task| task.receipt.map_or(0, |r| r.token()), 0)
    })
}

/// The task's payload.
///
/// Returns the task's payload, the JSON text exactly as pushed, followed by
/// a NUL byte, and stores its length (without the NUL) in `*len` when `len`
/// is not NULL. Returns NULL (and length 0) when `task` is NULL.
///
/// Ownership: the text belongs to the task and lives until `tq_task_free`.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_payload(task: *const tq_task, len: *mut usize) -> *const c_char {
    guard_or("tq_task_payload", std::ptr::null(), || {
        let (text, length) = match unsafe { borrow(task, "task") } {
            Ok(task) => (task.payload.as_ptr(), task.payload.as_bytes().len()),
            Err(err) => {
                super::fail(&err);
                (std::ptr::null(), 0)
            }
        };
        unsafe { write_optional(len, length) };
        text
    })
}

/// How many times the task has been claimed.
///
/// Returns how many times the task has been claimed, this delivery
/// included: 1 on the first delivery. Returns 0 when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_attempts(task: *const tq_task) -> u32 {
    guard_or("tq_task_attempts", 0, || {
        task_field(task, |task| task.attempts, 0)
    })
}

/// The task's priority.
///
/// Returns the task's priority, or 0 when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_priority(task: *const tq_task) -> i32 {
    guard_or("tq_task_priority", 0, || {
        task_field(task, |task| task.priority, 0)
    })
}

/// How many deliveries the task gets.
///
/// Returns how many deliveries the task gets before a failure makes it
/// dead, or 0 when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_max_attempts(task: *const tq_task) -> u32 {
    guard_or("tq_task_max_attempts", 0, || {
        task_field(task, |task| task.max_attempts, 0)
    })
}

/// When the task became ready.
///
/// Returns when the task became (or becomes) ready, in milliseconds since
/// the Unix epoch, or 0 when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_run_at_unix_ms(task: *const tq_task) -> i64 {
    guard_or("tq_task_run_at_unix_ms", 0, || {
        task_field(task, |task| task.run_at_unix_ms, 0)
    })
}

/// The task's expiry.
///
/// Returns when the task's first delivery may no longer start
/// (`tq_push_options_set_expire_after_ms`), in milliseconds since the Unix
/// epoch, or 0 when it has none (a retry of the dead clears it), was
/// pulled rather than read by `tq_get_task`, `tq_wait_task` or `tq_list`,
/// or `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_expires_at_unix_ms(task: *const tq_task) -> i64 {
    guard_or("tq_task_expires_at_unix_ms", 0, || {
        task_field(task, |task| task.expires_at_unix_ms, 0)
    })
}

/// The task's deadline.
///
/// Returns when no delivery of the task may start any more
/// (`tq_push_options_set_deadline_after_ms`), in milliseconds since the
/// Unix epoch, or 0 when it has none (a retry of the dead clears it), was
/// pulled rather than read by `tq_get_task`, `tq_wait_task` or `tq_list`,
/// or `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_deadline_unix_ms(task: *const tq_task) -> i64 {
    guard_or("tq_task_deadline_unix_ms", 0, || {
        task_field(task, |task| task.deadline_unix_ms, 0)
    })
}

/// The task's state.
///
/// Returns the task's state (a `tq_state` value) when it was pulled
/// (TQ_STATE_LEASED) or listed, or -1 when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_state(task: *const tq_task) -> i32 {
    guard_or("tq_task_state", -1, || {
        task_field(task, |task| state_value(task.state), -1)
    })
}

/// Why the task's previous delivery ended.
///
/// Returns why the task's previous delivery ended (the reason given to
/// `tq_fail`, or tq's words for a lost lease or a dead holder), or NULL
/// when none did or `task` is NULL.
///
/// Ownership: the text belongs to the task and lives until `tq_task_free`.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_last_error(task: *const tq_task) -> *const c_char {
    guard_or("tq_task_last_error", std::ptr::null(), || {
        task_field(
            task,
            |task| optional_text(&task.last_error),
            std::ptr::null(),
        )
    })
}

/// The result the task was finished with.
///
/// Returns the JSON result the task's finish stored
/// (`tq_finish_with_result`), or NULL when it has none, was pulled rather
/// than read by `tq_get_task`, `tq_wait_task` or `tq_list`, or `task` is
/// NULL.
///
/// Ownership: the text belongs to the task and lives until `tq_task_free`.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_result(task: *const tq_task) -> *const c_char {
    guard_or("tq_task_result", std::ptr::null(), || {
        task_field(task, |task| optional_text(&task.result), std::ptr::null())
    })
}

/// The progress the task last recorded.
///
/// Returns the JSON progress the task's last heartbeat recorded
/// (`tq_extend_with_progress`), or NULL as `tq_task_result` does.
///
/// Ownership: the text belongs to the task and lives until `tq_task_free`.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_progress(task: *const tq_task) -> *const c_char {
    guard_or("tq_task_progress", std::ptr::null(), || {
        task_field(task, |task| optional_text(&task.progress), std::ptr::null())
    })
}

fn optional_text(text: &Option<CString>) -> *const c_char {
    text.as_ref().map_or(std::ptr::null(), |text| text.as_ptr())
}

/// The tasks a pulled task waited for.
///
/// Returns the ids of the tasks a pulled task was pushed to wait for
/// (`tq_push_options_add_after`), ascending, and stores how many in
/// `*out_count` (when not NULL): each has ended, so a worker may read
/// what they left. NULL with count 0 when there are none, for a listed
/// task, or when `task` is NULL.
///
/// Ownership: the array belongs to the task and lives until `tq_task_free`.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_parents(task: *const tq_task, out_count: *mut usize) -> *const i64 {
    guard_or("tq_task_parents", std::ptr::null(), || {
        ids_field(task, out_count, |task| &task.parents)
    })
}

/// The task's ordered group.
///
/// Returns the key of the ordered group a listed task was pushed to
/// (`tq_push_options_set_group`), or NULL when it has none, was pulled
/// rather than read by `tq_get_task`, `tq_wait_task` or `tq_list`, or
/// `task` is NULL.
///
/// Ownership: the text belongs to the task and lives until `tq_task_free`.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_group(task: *const tq_task) -> *const c_char {
    guard_or("tq_task_group", std::ptr::null(), || {
        task_field(task, |task| optional_text(&task.group), std::ptr::null())
    })
}

/// The tasks a listed task still waits for.
///
/// Returns the ids of the tasks a listed task still waits for, ascending
/// (empty unless it is pending and blocked), and stores how many in
/// `*out_count` (when not NULL). NULL with count 0 when there are none,
/// for a pulled task, or when `task` is NULL.
///
/// Ownership: the array belongs to the task and lives until `tq_task_free`.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_waiting_for(task: *const tq_task, out_count: *mut usize) -> *const i64 {
    guard_or("tq_task_waiting_for", std::ptr::null(), || {
        ids_field(task, out_count, |task| &task.waiting_for)
    })
}

/// How many steps a task read by `tq_get_task` lists.
///
/// Returns how many steps the task's deliveries recorded (`tq_step_put`),
/// as read by `tq_get_task` or `tq_wait_task`; 0 for a pulled task, a task
/// of `tq_list` (which reads no steps), or when `task` is NULL. Index
/// them from 0, in the order they were recorded, with
/// `tq_task_step_name`, `tq_task_step_output` and
/// `tq_task_step_recorded_at_unix_ms`.
///
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_step_count(task: *const tq_task) -> usize {
    guard_or("tq_task_step_count", 0, || {
        task_field(task, |task| task.steps.len(), 0)
    })
}

/// The name of a listed step.
///
/// Returns the name of step `index` (from 0, in recording order) of a task
/// read by `tq_get_task`, or NULL when `index` is not below
/// `tq_task_step_count` or `task` is NULL.
///
/// Ownership: the text belongs to the task and lives until `tq_task_free`.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_step_name(task: *const tq_task, index: usize) -> *const c_char {
    guard_or("tq_task_step_name", std::ptr::null(), || {
        step_field(task, index, |step| step.name.as_ptr(), std::ptr::null())
    })
}

/// The output of a listed step.
///
/// Returns the JSON output recorded for step `index` of a task read by
/// `tq_get_task`, or NULL as `tq_task_step_name` does.
///
/// Ownership: the text belongs to the task and lives until `tq_task_free`.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_step_output(task: *const tq_task, index: usize) -> *const c_char {
    guard_or("tq_task_step_output", std::ptr::null(), || {
        step_field(task, index, |step| step.output.as_ptr(), std::ptr::null())
    })
}

/// When a listed step was recorded.
///
/// Returns when step `index` of a task read by `tq_get_task` was recorded,
/// in milliseconds since the Unix epoch (the server's clock on
/// PostgreSQL), or 0 as `tq_task_step_name` returns NULL.
///
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_step_recorded_at_unix_ms(task: *const tq_task, index: usize) -> i64 {
    guard_or("tq_task_step_recorded_at_unix_ms", 0, || {
        step_field(task, index, |step| step.recorded_at_unix_ms, 0)
    })
}

/// A field of step `index` of a live task, or `fallback` (the error
/// recorded) when the task is not live or has no such step.
fn step_field<T: Copy>(
    task: *const tq_task,
    index: usize,
    field: impl FnOnce(&StepText) -> T,
    fallback: T,
) -> T {
    task_field(
        task,
        |task| match task.steps.get(index) {
            Some(step) => field(step),
            None => {
                super::fail(&Error::invalid_argument(format!(
                    "task {} lists {} steps: there is no step {index}",
                    task.id,
                    task.steps.len()
                )));
                fallback
            }
        },
        fallback,
    )
}

/// How an attempt ended, as `tq_task_attempt_outcome` returns it.
#[repr(C)]
pub enum tq_attempt_outcome {
    /// Its holder failed it (`tq_fail`).
    TQ_ATTEMPT_FAILED = 0,
    /// Its lease ran out before its holder finished, and tq took it back.
    TQ_ATTEMPT_LEASE_EXPIRED = 1,
    /// Its holder's process (on PostgreSQL, its session) was found gone.
    TQ_ATTEMPT_HOLDER_DIED = 2,
    /// The task was cancelled while held, and the delivery ended so.
    TQ_ATTEMPT_CANCELLED = 3,
}

/// How many ended attempts a task read by `tq_get_task` lists.
///
/// Returns how many of the task's deliveries ended without finishing it
/// (failed, lease taken back, cancelled while held) are kept with it: the
/// newest TQ_ATTEMPTS_KEPT, as read by `tq_get_task` or `tq_wait_task`; 0
/// for a pulled task, a task of `tq_list` (which reads none), or when
/// `task` is NULL. Index them from 0, oldest first, with the
/// `tq_task_attempt_*` calls.
///
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_attempt_count(task: *const tq_task) -> usize {
    guard_or("tq_task_attempt_count", 0, || {
        task_field(task, |task| task.ended_attempts.len(), 0)
    })
}

/// Which delivery a listed attempt was.
///
/// Returns the number of attempt `index` (from 0, oldest first) of a task
/// read by `tq_get_task`: 1 for the task's first delivery, counted again
/// from 1 after `tq_retry_dead`; 0 when `index` is not below
/// `tq_task_attempt_count` or `task` is NULL.
///
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_attempt_number(task: *const tq_task, index: usize) -> u32 {
    guard_or("tq_task_attempt_number", 0, || {
        attempt_field(task, index, |attempt| attempt.attempt, 0)
    })
}

/// How a listed attempt ended.
///
/// Returns how attempt `index` of a task read by `tq_get_task` ended (a
/// `tq_attempt_outcome` value), or -1 as `tq_task_attempt_number` returns 0.
///
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_attempt_outcome(task: *const tq_task, index: usize) -> i32 {
    guard_or("tq_task_attempt_outcome", -1, || {
        attempt_field(task, index, |attempt| attempt.outcome as i32, -1)
    })
}

/// Why a listed attempt ended.
///
/// Returns the reason attempt `index` of a task read by `tq_get_task`
/// ended with (the one given to `tq_fail`, or the one tq wrote when it
/// took the lease back or a cancellation ended it), or NULL when it has
/// none, `index` is not below `tq_task_attempt_count` or `task` is NULL.
///
/// Ownership: the text belongs to the task and lives until `tq_task_free`.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_attempt_reason(task: *const tq_task, index: usize) -> *const c_char {
    guard_or("tq_task_attempt_reason", std::ptr::null(), || {
        attempt_field(
            task,
            index,
            |attempt| {
                attempt
                    .reason
                    .as_ref()
                    .map_or(std::ptr::null(), |text| text.as_ptr())
            },
            std::ptr::null(),
        )
    })
}

/// Who held a listed attempt.
///
/// Returns the id of the holder of attempt `index` of a task read by
/// `tq_get_task` (a process on SQLite, a connection on PostgreSQL, as
/// `tq serve` shows holders), or 0 when unknown, `index` is not below
/// `tq_task_attempt_count` or `task` is NULL.
///
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_attempt_holder_id(task: *const tq_task, index: usize) -> i64 {
    guard_or("tq_task_attempt_holder_id", 0, || {
        attempt_field(task, index, |attempt| attempt.holder_id, 0)
    })
}

/// The process id of a listed attempt's holder.
///
/// Returns the process id of the holder of attempt `index` of a task read
/// by `tq_get_task` (SQLite only), or 0 when unknown (always on
/// PostgreSQL), `index` is not below `tq_task_attempt_count` or `task` is
/// NULL.
///
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_attempt_holder_pid(task: *const tq_task, index: usize) -> i64 {
    guard_or("tq_task_attempt_holder_pid", 0, || {
        attempt_field(task, index, |attempt| attempt.holder_pid, 0)
    })
}

/// When a listed attempt started.
///
/// Returns when attempt `index` of a task read by `tq_get_task` was
/// claimed, in milliseconds since the Unix epoch (the server's clock on
/// PostgreSQL), or 0 when unknown, `index` is not below
/// `tq_task_attempt_count` or `task` is NULL.
///
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_attempt_started_at_unix_ms(task: *const tq_task, index: usize) -> i64 {
    guard_or("tq_task_attempt_started_at_unix_ms", 0, || {
        attempt_field(task, index, |attempt| attempt.started_at_unix_ms, 0)
    })
}

/// When a listed attempt ended.
///
/// Returns when attempt `index` of a task read by `tq_get_task` ended, in
/// milliseconds since the Unix epoch (the server's clock on PostgreSQL),
/// or 0 when `index` is not below `tq_task_attempt_count` or `task` is
/// NULL. Its duration is this minus `tq_task_attempt_started_at_unix_ms`,
/// when that is not 0.
///
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_attempt_ended_at_unix_ms(task: *const tq_task, index: usize) -> i64 {
    guard_or("tq_task_attempt_ended_at_unix_ms", 0, || {
        attempt_field(task, index, |attempt| attempt.ended_at_unix_ms, 0)
    })
}

/// A field of attempt `index` of a live task, or `fallback` (the error
/// recorded) when the task is not live or has no such attempt.
fn attempt_field<T: Copy>(
    task: *const tq_task,
    index: usize,
    field: impl FnOnce(&AttemptText) -> T,
    fallback: T,
) -> T {
    task_field(
        task,
        |task| match task.ended_attempts.get(index) {
            Some(attempt) => field(attempt),
            None => {
                super::fail(&Error::invalid_argument(format!(
                    "task {} lists {} attempts: there is no attempt {index}",
                    task.id,
                    task.ended_attempts.len()
                )));
                fallback
            }
        },
        fallback,
    )
}

/// A list of ids of a live task for C: its start (NULL when empty), its
/// length stored in `*out_count` when not NULL.
fn ids_field(
    task: *const tq_task,
    out_count: *mut usize,
    ids: impl FnOnce(&tq_task) -> &Vec<i64>,
) -> *const i64 {
    let (pointer, count) = task_field(
        task,
        |task| {
            let ids = ids(task);
            if ids.is_empty() {
                (std::ptr::null(), 0)
            } else {
                (ids.as_ptr(), ids.len())
            }
        },
        (std::ptr::null(), 0),
    );
    unsafe { write_optional(out_count, count) };
    pointer
}

/// Reads a field of a live task, or records the error and returns
/// `fallback`.
fn task_field<T>(task: *const tq_task, field: impl FnOnce(&tq_task) -> T, fallback: T) -> T {
    match unsafe { borrow(task, "task") } {
        Ok(task) => field(task),
        Err(err) => {
            super::fail(&err);
            fallback
        }
    }
}

/// Frees a task.
///
/// Frees a task from `tq_pull`, `tq_pull_batch`, `tq_list`, `tq_get_task`
/// or `tq_wait_task`. NULL is a no-op; call at most once per
/// task. Freeing does not finish the task: an unfinished task becomes
/// ready again when its lease expires or its holder is recovered.
#[no_mangle]
pub extern "C" fn tq_task_free(task: *mut tq_task) {
    guard_or("tq_task_free", (), || free(task, "task"))
}
