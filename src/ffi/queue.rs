//! The queue and task functions of the C ABI.

use std::ffi::{c_char, CString};
use std::time::Duration;

use super::objects::{borrow, borrow_optional, free, hand_out, hand_out_all};
use super::{
    array, guard, guard_or, non_null, out_pointer, tq_cancel, tq_options, tq_pull_options,
    tq_push_options, tq_status, utf8_string, write_optional,
};
use crate::error::{Error, ErrorKind, Result};
use crate::options::{OpenOptions, PullOptions, PushOptions};
use crate::queue::{check_batch_options, Queue, MAX_PAYLOAD_LEN};
use crate::task::{Cancelled, Pause, Pushed, RateLimit, Receipt, Stop, Task, TaskInfo, TaskState};

/// A handle on one named queue in one file. Thread-safe: one handle may be
/// used from any number of threads at once.
pub struct tq_queue(pub(super) Queue);

/// A task owned by the caller: one delivery from `tq_pull` or
/// `tq_pull_batch`, or a snapshot from `tq_list`, `tq_get_task` or
/// `tq_wait_task` (which is not held, so finishing it answers
/// TQ_ERR_NOT_HELD). Reading it from several threads
/// at once is safe; freeing it is not.
pub struct tq_task {
    /// Present for a delivery, absent for a listed task.
    receipt: Option<Receipt>,
    id: i64,
    state: TaskState,
    attempts: u32,
    max_attempts: u32,
    priority: i32,
    run_at_unix_ms: i64,
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
}

impl tq_task {
    fn delivered(task: Task) -> Result<tq_task> {
        Ok(tq_task {
            receipt: Some(task.receipt),
            id: task.receipt.id(),
            state: TaskState::Leased,
            attempts: task.attempts,
            max_attempts: task.max_attempts,
            priority: task.priority,
            run_at_unix_ms: task.run_at_unix_ms,
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
        })
    }

    fn listed(task: TaskInfo) -> Result<tq_task> {
        Ok(tq_task {
            receipt: None,
            id: task.id,
            state: task.state,
            attempts: task.attempts,
            max_attempts: task.max_attempts,
            priority: task.priority,
            run_at_unix_ms: task.run_at_unix_ms,
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
        })
    }

    /// The receipt of a delivery; a listed task has none and is not held.
    fn receipt(&self) -> Result<Receipt> {
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

/// The end of a pause that lasts until `tq_resume`, as `tq_paused_until`
/// reports it and `tq_pause` takes it.
pub const TQ_UNTIL_RESUMED: i64 = i64::MAX;

/// A `tq_state` passed from C as a plain integer.
fn task_state(state: i32) -> Result<TaskState> {
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

fn state_value(state: TaskState) -> i32 {
    match state {
        TaskState::Pending => 0,
        TaskState::Leased => 1,
        TaskState::Done => 2,
        TaskState::Dead => 3,
        TaskState::Cancelled => 4,
    }
}

/// Opens the queue in the SQLite file at `path` (UTF-8), creating the file
/// and tq's `tq_*` tables as needed, and stores the handle in `*out`.
/// `options` may be NULL for the defaults; it is only read during the call.
/// A `path` that is a `postgres://` or `postgresql://` URL opens the queue
/// in that PostgreSQL database instead, creating or migrating tq's schema.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL, empty or non-UTF-8
/// path, NULL out, an option that means nothing for this kind of store, a
/// URL this library cannot open), TQ_ERR_NOT_A_DATABASE (not SQLite,
/// corrupt, or a newer tq schema; the file or schema is left untouched),
/// TQ_ERR_IO (cannot open or create, cannot reach the server),
/// TQ_ERR_BUSY. On error `*out` is set to NULL.
///
/// Ownership: the caller owns the handle and frees it with `tq_close`.
/// Thread safety: may be called from any thread; the handle may then be
/// used from any number of threads at once, in the process that opened it.
#[no_mangle]
pub extern "C" fn tq_open(
    path: *const c_char,
    options: *const tq_options,
    out: *mut *mut tq_queue,
) -> tq_status {
    guard("tq_open", || {
        let out = out_pointer(out, "out")?;
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { out.write(std::ptr::null_mut()) };
        let path = unsafe { utf8_string(path, "path") }?;
        let defaults = OpenOptions::default();
        let options = unsafe { borrow_optional(options, "options") }?.map_or(&defaults, |o| &o.0);
        let queue = Queue::open(path, options)?;
        // SAFETY: as above.
        unsafe { out.write(hand_out(tq_queue(queue))?) };
        Ok(tq_status::TQ_OK)
    })
}

/// Closes a handle from `tq_open` and frees it. NULL is a no-op; call at
/// most once per handle, after every other call on it has returned. Tasks
/// pulled through the handle stay valid (free them with `tq_task_free`) and
/// may be finished through another handle.
///
/// In a child process after `fork()`, closing the parent's handle closes
/// only the child's copy of its connection and releases nothing of the
/// parent's.
#[no_mangle]
pub extern "C" fn tq_close(queue: *mut tq_queue) {
    guard_or("tq_close", (), || free(queue, "queue"))
}

/// Stores the JSON text `payload[0..len]` (UTF-8, no terminator needed) as
/// a new pending task, exactly as given, and writes its id to `*out_id`
/// when `out_id` is not NULL. `options` may be NULL for the defaults.
/// Returns once the task is stored at the handle's durability.
///
/// Returns TQ_OK, TQ_DUPLICATE (the options' unique key is held by a task
/// of the queue: nothing is stored, and `*out_id` is that task's id), or
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
        })
    })
}

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

/// A caller's array of `max` task pointers and its count, for the calls
/// that return several tasks: emptied (all NULL, count 0) before any other
/// check, so that it is in a defined state whatever the outcome.
struct TaskArray<'a> {
    slots: &'a mut [*mut tq_task],
    count: *mut usize,
}

impl TaskArray<'_> {
    /// Safety: a non-NULL `tasks` has room for `max` pointers, and a
    /// non-NULL `count` is writable, per the calls' contracts.
    unsafe fn new<'a>(
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
    fn fill(self, tasks: Vec<tq_task>) -> Result<()> {
        let count = tasks.len();
        for (slot, task) in self.slots.iter_mut().zip(hand_out_all(tasks)?) {
            *slot = task;
        }
        // SAFETY: checked writable in `new`.
        unsafe { self.count.write(count) };
        Ok(())
    }
}

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

/// Returns the task's id (as returned by `tq_push`), or 0 when `task` is
/// NULL. Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_id(task: *const tq_task) -> i64 {
    guard_or("tq_task_id", 0, || task_field(task, |task| task.id, 0))
}

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

/// Returns how many times the task has been claimed, this delivery
/// included: 1 on the first delivery. Returns 0 when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_attempts(task: *const tq_task) -> u32 {
    guard_or("tq_task_attempts", 0, || {
        task_field(task, |task| task.attempts, 0)
    })
}

/// Returns the task's priority, or 0 when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_priority(task: *const tq_task) -> i32 {
    guard_or("tq_task_priority", 0, || {
        task_field(task, |task| task.priority, 0)
    })
}

/// Returns how many deliveries the task gets before a failure makes it
/// dead, or 0 when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_max_attempts(task: *const tq_task) -> u32 {
    guard_or("tq_task_max_attempts", 0, || {
        task_field(task, |task| task.max_attempts, 0)
    })
}

/// Returns when the task became (or becomes) ready, in milliseconds since
/// the Unix epoch, or 0 when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_run_at_unix_ms(task: *const tq_task) -> i64 {
    guard_or("tq_task_run_at_unix_ms", 0, || {
        task_field(task, |task| task.run_at_unix_ms, 0)
    })
}

/// Returns the task's state (a `tq_state` value) when it was pulled
/// (TQ_STATE_LEASED) or listed, or -1 when `task` is NULL.
/// Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_state(task: *const tq_task) -> i32 {
    guard_or("tq_task_state", -1, || {
        task_field(task, |task| state_value(task.state), -1)
    })
}

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

/// Frees a task from `tq_pull`, `tq_pull_batch`, `tq_list`, `tq_get_task`
/// or `tq_wait_task`. NULL is a no-op; call at most once per
/// task. Freeing does not finish the task: an unfinished task becomes
/// ready again when its lease expires or its holder is recovered.
#[no_mangle]
pub extern "C" fn tq_task_free(task: *mut tq_task) {
    guard_or("tq_task_free", (), || free(task, "task"))
}

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

/// Pauses the handle's queue for every process on its file (or PostgreSQL
/// schema) until `tq_resume` or `until_unix_ms` (milliseconds since the
/// Unix epoch; TQ_UNTIL_RESUMED for no end): pulls find nothing meanwhile
/// (waiting pulls keep waiting and take a task once the pause ends);
/// pushes are stored as usual. A new pause replaces the one in force.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, an end not in
/// the future), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_pause(queue: *mut tq_queue, until_unix_ms: i64) -> tq_status {
    guard("tq_pause", || {
        let pause = match until_unix_ms {
            TQ_UNTIL_RESUMED => Pause::UntilResumed,
            until => Pause::UntilUnixMs(until),
        };
        unsafe { borrow(queue.cast_const(), "queue") }?
            .0
            .pause(pause)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Ends the pause of the handle's queue, if any, and wakes its waiting
/// pulls in every process.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
/// TQ_ERR_IO. Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_resume(queue: *mut tq_queue) -> tq_status {
    guard("tq_resume", || {
        unsafe { borrow(queue.cast_const(), "queue") }?.0.resume()?;
        Ok(tq_status::TQ_OK)
    })
}

/// Writes to `*out_until_unix_ms` when the pause of the handle's queue in
/// force ends (TQ_UNTIL_RESUMED for no end), or 0 when it is not paused.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or
/// `out_until_unix_ms`), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_paused_until(
    queue: *const tq_queue,
    out_until_unix_ms: *mut i64,
) -> tq_status {
    guard("tq_paused_until", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        if out_until_unix_ms.is_null() {
            return Err(Error::invalid_argument("out_until_unix_ms is NULL"));
        }
        let until = match queue.0.paused()? {
            None => 0,
            Some(Pause::UntilResumed) => TQ_UNTIL_RESUMED,
            Some(Pause::UntilUnixMs(until)) => until,
        };
        // SAFETY: checked non-NULL above; the caller provides room for one value.
        unsafe { out_until_unix_ms.write(until) };
        Ok(tq_status::TQ_OK)
    })
}

/// Limits the handle's queue to `limit` tasks leased at once (at least 1)
/// across every process and machine on its file (or PostgreSQL schema),
/// enforced inside each claim so that it holds under any race; expired
/// leases and tasks recovered from dead holders hold no slot. Tasks leased
/// beyond a new, lower limit keep their leases.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, a limit of 0:
/// use `tq_clear_concurrency_limit`, or `tq_pause` to stop claims),
/// TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_set_concurrency_limit(queue: *mut tq_queue, limit: u32) -> tq_status {
    guard("tq_set_concurrency_limit", || {
        unsafe { borrow(queue.cast_const(), "queue") }?
            .0
            .set_concurrency_limit(Some(limit))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Allows at most `claims` deliveries of the handle's queue (1 to 100,000)
/// in any window of `per_ms` milliseconds (1 ms to 366 days), across every
/// process and machine on its file (or PostgreSQL schema), without a
/// coordinator: each claim takes a slot last used a window ago or more,
/// inside its transaction, or claims nothing (waiting pulls wait for a
/// slot). Windows are measured on the claims' times, read once each claim
/// holds the write lock, in whole milliseconds. Setting the rate in force
/// again changes nothing (every worker may declare it at start without
/// granting a new burst); a changed rate keeps the most recent uses, and a
/// new one starts with every slot free.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, values out of
/// range), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_set_rate_limit(queue: *mut tq_queue, claims: u32, per_ms: u64) -> tq_status {
    guard("tq_set_rate_limit", || {
        unsafe { borrow(queue.cast_const(), "queue") }?
            .0
            .set_rate_limit(Some(RateLimit {
                claims,
                per: Duration::from_millis(per_ms),
            }))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Removes the rate limit of the handle's queue, if any.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
/// TQ_ERR_IO. Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_clear_rate_limit(queue: *mut tq_queue) -> tq_status {
    guard("tq_clear_rate_limit", || {
        unsafe { borrow(queue.cast_const(), "queue") }?
            .0
            .set_rate_limit(None)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Writes the rate limit of the handle's queue to `*out_claims` and
/// `*out_per_ms`, or 0 to both when it has none.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out-pointer),
/// TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_rate_limit(
    queue: *const tq_queue,
    out_claims: *mut u32,
    out_per_ms: *mut u64,
) -> tq_status {
    guard("tq_rate_limit", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        if out_claims.is_null() || out_per_ms.is_null() {
            return Err(Error::invalid_argument("out_claims or out_per_ms is NULL"));
        }
        let (claims, per_ms) = queue
            .0
            .rate_limit()?
            .map_or((0, 0), |limit| (limit.claims, limit.per.as_millis() as u64));
        // SAFETY: checked non-NULL above; the caller provides room for one value each.
        unsafe {
            out_claims.write(claims);
            out_per_ms.write(per_ms);
        }
        Ok(tq_status::TQ_OK)
    })
}

/// Removes the concurrency limit of the handle's queue, if any.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
/// TQ_ERR_IO. Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_clear_concurrency_limit(queue: *mut tq_queue) -> tq_status {
    guard("tq_clear_concurrency_limit", || {
        unsafe { borrow(queue.cast_const(), "queue") }?
            .0
            .set_concurrency_limit(None)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Writes the concurrency limit of the handle's queue to `*out_limit`, or
/// 0 when it has none.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or `out_limit`),
/// TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_concurrency_limit(queue: *const tq_queue, out_limit: *mut u32) -> tq_status {
    guard("tq_concurrency_limit", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        if out_limit.is_null() {
            return Err(Error::invalid_argument("out_limit is NULL"));
        }
        let limit = queue.0.concurrency_limit()?.unwrap_or(0);
        // SAFETY: checked non-NULL above; the caller provides room for one value.
        unsafe { out_limit.write(limit) };
        Ok(tq_status::TQ_OK)
    })
}

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

/// Copies the file's write-ahead log into the database and truncates it,
/// waiting up to the busy timeout for readers to move on, and writes the
/// log's size afterwards to `*out_wal_bytes` when it is not NULL. tq also
/// checkpoints by itself when the log grows past 16 MiB; call this at quiet
/// moments to keep the files small.
///
/// Returns TQ_OK, or TQ_ERR_BUSY (a reader still used the log: part of it
/// remains; the size is still written), TQ_ERR_INVALID_ARGUMENT (NULL
/// queue; a PostgreSQL queue, which has no log file of tq's own),
/// TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_checkpoint(queue: *mut tq_queue, out_wal_bytes: *mut i64) -> tq_status {
    guard("tq_checkpoint", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let checkpoint = queue.0.checkpoint()?;
        unsafe { write_optional(out_wal_bytes, saturate(checkpoint.wal_bytes)) };
        if !checkpoint.complete {
            return Err(Error::new(
                ErrorKind::Busy,
                "a reader was still using the write-ahead log: it was only partly checkpointed",
            ));
        }
        Ok(tq_status::TQ_OK)
    })
}

/// Writes the size of the file's write-ahead log (`-wal` file), in bytes,
/// to `*out_wal_bytes`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out; a
/// PostgreSQL queue), TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_wal_size(queue: *const tq_queue, out_wal_bytes: *mut i64) -> tq_status {
    guard("tq_wal_size", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        let out_wal_bytes = out_pointer(out_wal_bytes, "out_wal_bytes")?;
        let size = queue.0.wal_size()?;
        // SAFETY: non-NULL and writable per the contract.
        unsafe { out_wal_bytes.write(saturate(size)) };
        Ok(tq_status::TQ_OK)
    })
}

/// Ends, with TQ_ERR_INTERRUPTED, the wait of every pull on this handle,
/// now and from then on (a pull still takes a task that is ready). To stop
/// worker threads: `tq_interrupt`, join them, then `tq_close`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue).
/// Thread safety: safe from any thread, while other threads wait in pulls.
#[no_mangle]
pub extern "C" fn tq_interrupt(queue: *mut tq_queue) -> tq_status {
    guard("tq_interrupt", || {
        unsafe { borrow(queue.cast_const(), "queue") }?
            .0
            .interrupt();
        Ok(tq_status::TQ_OK)
    })
}

fn saturate(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
