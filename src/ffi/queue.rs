//! The queue and task functions of the C ABI.

use std::ffi::{c_char, CStr, CString};

use super::objects::{borrow, borrow_optional, free, hand_out};
use super::{
    guard, guard_or, non_null, out_pointer, tq_options, tq_pull_options, tq_push_options,
    tq_status, write_optional,
};
use crate::error::{Error, ErrorKind};
use crate::options::{OpenOptions, PullOptions, PushOptions};
use crate::queue::{Queue, MAX_PAYLOAD_LEN};
use crate::task::{Receipt, TaskState};

/// A handle on one queue file. Thread-safe: one handle may be used from any
/// number of threads at once.
pub struct tq_queue(Queue);

/// One delivery of one task, owned by the caller of `tq_pull`. Reading it
/// from several threads at once is safe; freeing it is not.
pub struct tq_task {
    receipt: Receipt,
    attempts: u32,
    payload: CString,
}

/// Values for `tq_count`.
#[repr(C)]
pub enum tq_state {
    /// Waiting to be claimed (possibly not yet due).
    TQ_STATE_PENDING = 0,
    /// Claimed under a lease (possibly expired and not yet taken back).
    TQ_STATE_LEASED = 1,
    /// Finished and kept as history (handles opened with history).
    TQ_STATE_DONE = 2,
}

/// Opens the queue in the SQLite file at `path` (UTF-8), creating the file
/// and tq's `tq_*` tables as needed, and stores the handle in `*out`.
/// `options` may be NULL for the defaults; it is only read during the call.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL, empty or non-UTF-8
/// path, NULL out), TQ_ERR_NOT_A_DATABASE (not SQLite, corrupt, or a newer
/// tq schema; the file is left untouched), TQ_ERR_IO (cannot open or
/// create), TQ_ERR_BUSY. On error `*out` is set to NULL.
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
        let path = non_null(path, "path")?;
        // SAFETY: a non-NULL path is a NUL-terminated string per the contract.
        let path = unsafe { CStr::from_ptr(path) }
            .to_str()
            .map_err(|_| Error::invalid_argument("path is not valid UTF-8"))?;
        let defaults = OpenOptions::default();
        let options = unsafe { borrow_optional(options, "options") }?.map_or(&defaults, |o| &o.0);
        let queue = Queue::open(path, options)?;
        // SAFETY: as above.
        unsafe { out.write(hand_out(tq_queue(queue))) };
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
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or payload, bad
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
        let payload = non_null(payload, "payload")?;
        if len > MAX_PAYLOAD_LEN {
            return Err(Error::invalid_argument(format!(
                "payload length {len} is over the limit of {MAX_PAYLOAD_LEN} bytes"
            )));
        }
        // SAFETY: `payload` points to `len` readable bytes per the contract.
        let bytes = unsafe { std::slice::from_raw_parts(payload.cast::<u8>(), len) };
        let payload = std::str::from_utf8(bytes)
            .map_err(|err| Error::invalid_argument(format!("payload is not valid UTF-8: {err}")))?;
        let defaults = PushOptions::default();
        let options = unsafe { borrow_optional(options, "options") }?.map_or(&defaults, |o| &o.0);
        let id = queue.0.push(payload, options)?;
        unsafe { write_optional(out_id, id) };
        Ok(tq_status::TQ_OK)
    })
}

/// Claims the oldest ready task under a lease and stores it in `*out`: a
/// pending task that is due, or one whose lease expired. Its attempt count
/// goes up by one. No two holders ever hold the same task at once.
/// `options` may be NULL for the defaults (a 30 s lease).
///
/// Returns TQ_OK with `*out` set, TQ_EMPTY with `*out` NULL when no task is
/// ready, or TQ_ERR_INVALID_ARGUMENT (NULL queue or out), TQ_ERR_BUSY,
/// TQ_ERR_IO, TQ_ERR_NOT_A_DATABASE (the stored task is damaged).
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
        let receipt = task.receipt();
        let attempts = task.attempts();
        let payload = CString::new(task.payload).map_err(|_| {
            // Valid JSON has no NUL byte: this row was changed outside tq.
            Error::new(
                ErrorKind::NotADatabase,
                format!("task {} has a NUL byte in its payload", receipt.id()),
            )
        })?;
        // SAFETY: as above.
        unsafe {
            out.write(hand_out(tq_task {
                receipt,
                attempts,
                payload,
            }))
        };
        Ok(tq_status::TQ_OK)
    })
}

/// Returns the task's id (as returned by `tq_push`), or 0 when `task` is
/// NULL. Thread safety: safe on a task read by several threads.
#[no_mangle]
pub extern "C" fn tq_task_id(task: *const tq_task) -> i64 {
    guard_or("tq_task_id", 0, || match unsafe { borrow(task, "task") } {
        Ok(task) => task.receipt.id(),
        Err(err) => {
            super::fail(&err);
            0
        }
    })
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
        match unsafe { borrow(task, "task") } {
            Ok(task) => task.attempts,
            Err(err) => {
                super::fail(&err);
                0
            }
        }
    })
}

/// Frees a task from `tq_pull`. NULL is a no-op; call at most once per
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
/// recovered or taken by another worker: nothing changes),
/// TQ_ERR_INVALID_ARGUMENT (NULL queue or task), TQ_ERR_BUSY, TQ_ERR_IO.
///
/// Thread safety: any number of threads may finish on one handle at once.
#[no_mangle]
pub extern "C" fn tq_finish(queue: *mut tq_queue, task: *const tq_task) -> tq_status {
    guard("tq_finish", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        queue.0.finish(task.receipt)?;
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
        let state = match state {
            0 => TaskState::Pending,
            1 => TaskState::Leased,
            2 => TaskState::Done,
            other => {
                return Err(Error::invalid_argument(format!(
                    "unknown task state {other}"
                )))
            }
        };
        let count = queue.0.count(state)?;
        // SAFETY: non-NULL and writable per the contract.
        unsafe { out_count.write(saturate(count)) };
        Ok(tq_status::TQ_OK)
    })
}

/// Deletes the done tasks finished at least `older_than_ms` milliseconds
/// ago (0: all of them) and writes how many to `*out_purged` when it is not
/// NULL.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, age over
/// INT64_MAX), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_purge_done(
    queue: *mut tq_queue,
    older_than_ms: u64,
    out_purged: *mut i64,
) -> tq_status {
    guard("tq_purge_done", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let purged = queue.0.purge_done(older_than_ms)?;
        unsafe { write_optional(out_purged, saturate(purged)) };
        Ok(tq_status::TQ_OK)
    })
}

fn saturate(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
