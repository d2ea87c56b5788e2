//! Events and durable sleep at the boundary: sending an event, a held
//! task waiting for one, and a held task sleeping until a time.

use std::ffi::{c_char, CString};
use std::time::Duration;

use super::objects::{borrow, hand_out_string};
use super::{guard, out_pointer, tq_queue, tq_status, tq_task, utf8_string};
use crate::error::Error;
use crate::events::{Awaited, Slept};
use crate::DEFAULT_EVENT_RETENTION;

/// Events and durable sleep: a held task waits for a signal, or sleeps
/// ===================================================================
///
/// Sends an event under a key.
///
/// Sends an event under `key` (UTF-8, 1 to TQ_MAX_EVENT_KEY_LEN bytes)
/// with payload `json` (UTF-8 JSON, at most the handle's payload limit),
/// in one commit. When tasks of the queue wait for `key`
/// (`tq_wait_for_event`), the one that has waited longest takes it and is
/// ready at once (a blocked `tq_pull` in any process wakes up); the others
/// keep waiting for the next event. Otherwise the event is kept for
/// `retention_ms` (0: 7 days), behind any other kept under `key`: waits
/// take them in the order they were sent, one each. Stores in
/// `*out_task_id`, when it is not NULL, the id of the task that took the
/// event, or 0 when it was kept.
///
/// Returns TQ_OK, TQ_ERR_INVALID_JSON, TQ_ERR_INVALID_ARGUMENT (NULL
/// queue, key or json, bad UTF-8, a key or payload too long), TQ_ERR_BUSY,
/// TQ_ERR_IO. Only TQ_OK stores anything.
///
/// Ownership: `key` and `json` are only read during the call.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_signal(
    queue: *mut tq_queue,
    key: *const c_char,
    json: *const c_char,
    retention_ms: u64,
    out_task_id: *mut i64,
) -> tq_status {
    guard("tq_signal", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let key = unsafe { utf8_string(key, "key") }?;
        let json = unsafe { utf8_string(json, "json") }?;
        let retention = match retention_ms {
            0 => DEFAULT_EVENT_RETENTION,
            ms => Duration::from_millis(ms),
        };
        let woken = queue.0.signal_kept_for(key, json, retention)?;
        // SAFETY: a non-NULL `out_task_id` is writable per the contract.
        unsafe { super::write_optional(out_task_id, woken.unwrap_or(0)) };
        Ok(tq_status::TQ_OK)
    })
}

/// Waits for an event under a key, suspending the held task meanwhile.
///
/// Waits up to `timeout_ms` for an event under `key` for the task this
/// delivery holds. An event kept under `key` is taken at once: TQ_OK with
/// its payload in `*out_json`, and the task stays held. Otherwise the task
/// is suspended until an event comes or the timeout passes, spending no
/// attempt and keeping its steps: TQ_SUSPENDED, and the worker must stop
/// working on it (free it; its delivery is over). Its next delivery runs
/// the handler again, and the same call returns TQ_OK with the event's
/// payload, or TQ_TIMEOUT, as recorded among the task's steps
/// (`tq:event:KEY`, `tq:timeout:KEY`): every later call for `key` gives
/// the same answer. A `timeout_ms` of 0 never suspends.
///
/// Returns TQ_OK with `*out_json` set; TQ_TIMEOUT or TQ_SUSPENDED with
/// `*out_json` NULL; TQ_ERR_NOT_HELD when the delivery is no longer
/// current (or `task` was listed, not pulled); TQ_ERR_CANCELLED;
/// TQ_ERR_INVALID_ARGUMENT (NULL argument, bad UTF-8, a key too long);
/// TQ_ERR_BUSY, TQ_ERR_IO. An error changes nothing.
///
/// Ownership: the caller owns `*out_json` and frees it with
/// `tq_string_free`; `key` is only read during the call.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_wait_for_event(
    queue: *mut tq_queue,
    task: *const tq_task,
    key: *const c_char,
    timeout_ms: u64,
    out_json: *mut *mut c_char,
) -> tq_status {
    guard("tq_wait_for_event", || {
        let out = out_pointer(out_json, "out_json")?;
        // SAFETY: `out` is non-NULL and writable per the contract.
        unsafe { out.write(std::ptr::null_mut()) };
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        let key = unsafe { utf8_string(key, "key") }?;
        let awaited =
            queue
                .0
                .wait_for_event(task.receipt()?, key, Duration::from_millis(timeout_ms))?;
        let payload = match awaited {
            Awaited::Event(payload) => payload,
            Awaited::TimedOut => return Ok(tq_status::TQ_TIMEOUT),
            Awaited::Suspended => return Ok(tq_status::TQ_SUSPENDED),
        };
        let payload = CString::new(payload)
            .map_err(|_| Error::invalid_argument("the event's payload holds a NUL byte"))?;
        // SAFETY: as above.
        unsafe { out.write(hand_out_string(payload)?) };
        Ok(tq_status::TQ_OK)
    })
}

/// Sleeps the held task for a time, durably.
///
/// Sleeps the task this delivery holds for `duration_ms` from the first
/// call of the sleep named `name` (UTF-8, 1 to TQ_MAX_SLEEP_NAME_LEN
/// bytes), as `tq_sleep_until` does.
///
/// Returns as `tq_sleep_until` does.
///
/// Ownership: `name` is only read during the call.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_sleep(
    queue: *mut tq_queue,
    task: *const tq_task,
    name: *const c_char,
    duration_ms: u64,
) -> tq_status {
    guard("tq_sleep", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        let name = unsafe { utf8_string(name, "name") }?;
        let length = Duration::from_millis(duration_ms);
        Ok(slept_status(queue.0.sleep_for(
            task.receipt()?,
            name,
            length,
        )?))
    })
}

/// Sleeps the held task until a time, durably.
///
/// The sleep named `name` (UTF-8, 1 to TQ_MAX_SLEEP_NAME_LEN bytes) of
/// the task this delivery holds records its end, `unix_ms` (ms since the
/// Unix epoch), among the task's steps (`tq:sleep:NAME`) at its first
/// call; every later call reads it. Before the end, the task is suspended
/// until then, spending no attempt and keeping its steps: TQ_SUSPENDED,
/// and the worker must stop working on it (free it; its delivery is
/// over). Once the end has passed, the call returns TQ_OK and the task
/// stays held: the handler run again by the next delivery goes on past
/// the sleep.
///
/// Returns TQ_OK or TQ_SUSPENDED; TQ_ERR_NOT_HELD when the delivery is no
/// longer current (or `task` was listed, not pulled); TQ_ERR_CANCELLED;
/// TQ_ERR_INVALID_ARGUMENT (NULL argument, bad UTF-8, a name too long);
/// TQ_ERR_BUSY, TQ_ERR_IO. An error changes nothing.
///
/// Ownership: `name` is only read during the call.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_sleep_until(
    queue: *mut tq_queue,
    task: *const tq_task,
    name: *const c_char,
    unix_ms: i64,
) -> tq_status {
    guard("tq_sleep_until", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let task = unsafe { borrow(task, "task") }?;
        let name = unsafe { utf8_string(name, "name") }?;
        Ok(slept_status(queue.0.sleep_until(
            task.receipt()?,
            name,
            unix_ms,
        )?))
    })
}

fn slept_status(slept: Slept) -> tq_status {
    match slept {
        Slept::Over => tq_status::TQ_OK,
        Slept::Suspended => tq_status::TQ_SUSPENDED,
    }
}
