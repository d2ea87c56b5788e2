//! Push options: the options object of `tq_push`, `tq_push_batch` and
//! `tq_push_items`, used as every options object is (see
//! `open_options.rs`).

use std::time::Duration;

use std::ffi::c_char;

use super::objects::{borrow_mut, free, hand_out_or_null};
use super::{guard, guard_or, tq_status, utf8_string};
use crate::error::Error;
use crate::options::{ParentFailure, PushOptions};

/// Options for `tq_push`.
pub struct tq_push_options(pub(crate) PushOptions);

/// Push options: the options object of `tq_push` and its batch forms
/// =================================================================
///
/// Creates the options of a push.
///
/// Creates an options object for `tq_push` holding the defaults: the task
/// is ready at once, priority 0, the queue's maximum attempts, no unique key.
///
/// Ownership: the caller owns the result and frees it with
/// `tq_push_options_free`. Returns NULL only if tq failed internally.
#[no_mangle]
pub extern "C" fn tq_push_options_new() -> *mut tq_push_options {
    guard_or("tq_push_options_new", std::ptr::null_mut(), || {
        hand_out_or_null(tq_push_options(PushOptions::default()))
    })
}

/// Frees push options.
///
/// Frees an options object from `tq_push_options_new`. NULL is a no-op;
/// call at most once per object.
#[no_mangle]
pub extern "C" fn tq_push_options_free(options: *mut tq_push_options) {
    guard_or("tq_push_options_free", (), || free(options, "options"))
}

/// Delays the task.
///
/// The task becomes ready `delay_ms` milliseconds after the push (at most
/// one year). Replaces an earlier `tq_push_options_set_run_at_unix_ms`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_push_options_set_delay_ms(
    options: *mut tq_push_options,
    delay_ms: u64,
) -> tq_status {
    guard("tq_push_options_set_delay_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.delay(Duration::from_millis(delay_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Lets the push wait for room under the queue's cap.
///
/// When the queue is at its cap on pending tasks (`tq_set_max_pending`),
/// the push waits up to `wait_ms` milliseconds (at most one year; default
/// 0: not at all) for room instead of returning TQ_ERR_FULL at once: it
/// tries again when a task of the queue is delivered or ends (at once for
/// those of this process, within 50 ms for other processes'), and returns
/// TQ_ERR_FULL once the wait has passed, or TQ_ERR_INTERRUPTED after
/// `tq_interrupt` on its handle. Of a `tq_push_batch`, the batch waits
/// until all of it fits.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_push_options_set_wait_for_room_ms(
    options: *mut tq_push_options,
    wait_ms: u64,
) -> tq_status {
    guard("tq_push_options_set_wait_for_room_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.wait_for_room(Duration::from_millis(wait_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Makes the task ready at a time.
///
/// The task becomes ready at `unix_ms`, milliseconds since the Unix epoch
/// (a time in the past means at once). Replaces an earlier
/// `tq_push_options_set_delay_ms`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, negative time).
#[no_mangle]
pub extern "C" fn tq_push_options_set_run_at_unix_ms(
    options: *mut tq_push_options,
    unix_ms: i64,
) -> tq_status {
    guard("tq_push_options_set_run_at_unix_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.run_at_unix_ms(unix_ms)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Gives the task an expiry after the push.
///
/// The task's first delivery never starts once `after_ms` milliseconds
/// (1 ms to one year) have passed since the push: a pull that meets the
/// task then ends it as dead with the last error "expired" instead, and
/// takes the next task. Retries, once the first delivery started in time,
/// are not bound by it. A push whose run time (`tq_push_options_set_delay_ms`)
/// is not before its expiry fails with TQ_ERR_INVALID_ARGUMENT: the task
/// could never run. Replaces an earlier
/// `tq_push_options_set_expire_at_unix_ms`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_expire_after_ms(
    options: *mut tq_push_options,
    after_ms: u64,
) -> tq_status {
    guard("tq_push_options_set_expire_after_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.expire_after(Duration::from_millis(after_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Gives the task an expiry at a time.
///
/// As `tq_push_options_set_expire_after_ms`, at `unix_ms`, milliseconds
/// since the Unix epoch (a time already passed: the first pull that meets
/// the task ends it). Replaces an earlier
/// `tq_push_options_set_expire_after_ms`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, negative time).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_expire_at_unix_ms(
    options: *mut tq_push_options,
    unix_ms: i64,
) -> tq_status {
    guard("tq_push_options_set_expire_at_unix_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.expire_at_unix_ms(unix_ms)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Gives the task a deadline after the push.
///
/// No delivery of the task, first or retry, starts once `after_ms`
/// milliseconds (1 ms to one year) have passed since the push: a pull that
/// meets the task then ends it as dead with the last error "deadline
/// passed", and a `tq_fail` whose retry would fall at or after the
/// deadline ends it so at once. A delivery running when the deadline
/// passes runs to its end; its lease is renewed as any other. A push whose
/// run time is not before its deadline fails with
/// TQ_ERR_INVALID_ARGUMENT. Replaces an earlier
/// `tq_push_options_set_deadline_unix_ms`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_deadline_after_ms(
    options: *mut tq_push_options,
    after_ms: u64,
) -> tq_status {
    guard("tq_push_options_set_deadline_after_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.deadline_after(Duration::from_millis(after_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Gives the task a deadline at a time.
///
/// As `tq_push_options_set_deadline_after_ms`, at `unix_ms`, milliseconds
/// since the Unix epoch. Replaces an earlier
/// `tq_push_options_set_deadline_after_ms`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, negative time).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_deadline_unix_ms(
    options: *mut tq_push_options,
    unix_ms: i64,
) -> tq_status {
    guard("tq_push_options_set_deadline_unix_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.deadline_unix_ms(unix_ms)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Sets the task's priority.
///
/// Sets the task's priority: a ready task of higher priority is claimed
/// before any of lower priority; equal priorities come out in the order
/// they became ready. Any value; default 0.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options).
#[no_mangle]
pub extern "C" fn tq_push_options_set_priority(
    options: *mut tq_push_options,
    priority: i32,
) -> tq_status {
    guard("tq_push_options_set_priority", || {
        unsafe { borrow_mut(options, "options") }?
            .0
            .priority(priority);
        Ok(tq_status::TQ_OK)
    })
}

/// Sets how many deliveries the task gets.
///
/// Sets how many deliveries the task gets before a failure makes it dead
/// (at least 1), instead of the handle's default.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, 0).
#[no_mangle]
pub extern "C" fn tq_push_options_set_max_attempts(
    options: *mut tq_push_options,
    max_attempts: u32,
) -> tq_status {
    guard("tq_push_options_set_max_attempts", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.max_attempts(max_attempts)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Gives the task a unique key.
///
/// Gives the task a unique key: 1 to `TQ_MAX_UNIQUE_KEY_LEN` bytes of UTF-8
/// (NUL-terminated; copied), or NULL to remove the key and its window.
/// While a task with the key is pending or leased in the queue, `tq_push`
/// stores nothing and returns TQ_DUPLICATE with that task's id. Only
/// `tq_push` takes a unique key; `tq_push_batch` refuses one.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, empty, too
/// long or not UTF-8; the object is then unchanged).
#[no_mangle]
pub extern "C" fn tq_push_options_set_unique_key(
    options: *mut tq_push_options,
    key: *const c_char,
) -> tq_status {
    guard("tq_push_options_set_unique_key", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        if key.is_null() {
            options.0.clear_unique_key();
        } else {
            options.0.unique_key(unsafe { utf8_string(key, "key") }?)?;
        }
        Ok(tq_status::TQ_OK)
    })
}

/// Keeps the unique key reserved after the task is done.
///
/// Keeps the unique key reserved for `window_ms` milliseconds after the
/// task is done (at most one year; default 0: the key is free once the
/// task is done). Set the key first.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, no key set,
/// out of range).
#[no_mangle]
pub extern "C" fn tq_push_options_set_unique_for_ms(
    options: *mut tq_push_options,
    window_ms: u64,
) -> tq_status {
    guard("tq_push_options_set_unique_for_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        options.0.unique_for(Duration::from_millis(window_ms))?;
        Ok(tq_status::TQ_OK)
    })
}

/// Lets the push replace the payload of the pending task holding its key.
///
/// When `replace` is true, a `tq_push` under a unique key that a pending
/// task holds (ready, delayed, waiting for a retry or for other tasks, but
/// not delivered at the moment) gives that task this push's payload and
/// returns TQ_MERGED with its id: its next delivery carries the newest
/// payload. A task being delivered is never changed (its receipt and the
/// payload it was handed stay valid): the push then stores nothing and
/// returns TQ_DUPLICATE, as without this option. Needs a unique key;
/// refuses tasks to wait for and ordered groups (the push fails with
/// TQ_ERR_INVALID_ARGUMENT, storing nothing), and `tq_push_batch` refuses
/// it. Combines with `tq_push_options_set_debounce_ms`. Default false.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_replace_pending(
    options: *mut tq_push_options,
    replace: bool,
) -> tq_status {
    guard("tq_push_options_set_replace_pending", || {
        unsafe { borrow_mut(options, "options") }?
            .0
            .replace_pending(replace);
        Ok(tq_status::TQ_OK)
    })
}

/// Debounces the task held under the push's unique key.
///
/// A `tq_push` under a unique key that a pending task holds (as for
/// `tq_push_options_set_replace_pending`) moves that task's run time to
/// this push's own (now plus its delay, or its run-at time), but never
/// later than `max_ms` after that task was first pushed, and returns
/// TQ_MERGED with its id: a burst of pushes runs the task once, a delay
/// after the last push, and a steady stream still runs it within `max_ms`
/// of the first. The holder keeps its payload unless
/// `tq_push_options_set_replace_pending` is set too, and its priority,
/// attempts, expiry and deadline. A push that finds no holder stores its
/// task as usual. `max_ms` is 1 ms to one year; 0 removes the debounce
/// (the default). The same conflicts as replace_pending are refused.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_debounce_ms(
    options: *mut tq_push_options,
    max_ms: u64,
) -> tq_status {
    guard("tq_push_options_set_debounce_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        if max_ms == 0 {
            options.0.clear_debounce();
        } else {
            options.0.debounce(Duration::from_millis(max_ms))?;
        }
        Ok(tq_status::TQ_OK)
    })
}

/// Values for `tq_push_options_set_on_parent_failure`.
#[repr(C)]
pub enum tq_parent_failure {
    /// The default. When a task it waits for ends dead or cancelled, the
    /// waiting task is cancelled with a reason naming that task, and so in
    /// turn are the tasks waiting for it.
    TQ_PARENT_FAILURE_CANCEL = 0,
    /// A task it waits for ending dead or cancelled counts as finished.
    TQ_PARENT_FAILURE_RUN_ANYWAY = 1,
}

/// Makes the task wait for a stored task.
///
/// Makes the task wait for the stored task `id` too (besides those added
/// before): it is stored blocked (counted and listed as TQ_STATE_PENDING,
/// never pulled) until every task it waits for is done. `id` must name a
/// task of the same queue that is stored when the task is pushed: not yet
/// finished, or kept as history (a done one does not hold it back);
/// otherwise the push fails with TQ_ERR_INVALID_ARGUMENT and stores
/// nothing. At most `TQ_MAX_PARENTS` in all, items included.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, an id not
/// positive, too many).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_add_after(options: *mut tq_push_options, id: i64) -> tq_status {
    guard("tq_push_options_add_after", || {
        unsafe { borrow_mut(options, "options") }?.0.after(&[id])?;
        Ok(tq_status::TQ_OK)
    })
}

/// Makes an item wait for an earlier item of the same call.
///
/// Makes an item of `tq_push_items` wait for the earlier item at `index`
/// of the same call too, as `tq_push_options_add_after` does for a stored
/// task, so that a graph of tasks is stored in one call, all or none. Any
/// other push with such options fails with TQ_ERR_INVALID_ARGUMENT.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, too many).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_add_after_item(
    options: *mut tq_push_options,
    index: usize,
) -> tq_status {
    guard("tq_push_options_add_after_item", || {
        unsafe { borrow_mut(options, "options") }?
            .0
            .after_item(index)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Sets what the task does when a task it waits for fails.
///
/// Sets what the task does when a task it waits for ends dead or
/// cancelled: a `tq_parent_failure` value (a plain integer, so any other
/// value is an error rather than undefined behaviour). Default
/// `TQ_PARENT_FAILURE_CANCEL`.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, unknown value;
/// the object is then unchanged).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_on_parent_failure(
    options: *mut tq_push_options,
    policy: i32,
) -> tq_status {
    guard("tq_push_options_set_on_parent_failure", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        let policy = match policy {
            0 => ParentFailure::Cancel,
            1 => ParentFailure::RunAnyway,
            other => {
                return Err(Error::invalid_argument(format!(
                    "unknown parent failure policy {other}: use TQ_PARENT_FAILURE_CANCEL or \
                     TQ_PARENT_FAILURE_RUN_ANYWAY"
                )))
            }
        };
        options.0.on_parent_failure(policy);
        Ok(tq_status::TQ_OK)
    })
}

/// Files the task under a fairness key.
///
/// Files the task under fairness key `key` (a tenant, say): 1 to
/// `TQ_MAX_UNIQUE_KEY_LEN` bytes of UTF-8 (NUL-terminated; copied), or NULL
/// for none. Once a queue has a fairness key, its claims share their
/// deliveries between the keys with ready tasks in proportion to their
/// weights (`tq_set_fair_weight`, default 1), by turns: over any run of
/// deliveries in which keys i and j both have ready tasks, their counts
/// n_i and n_j satisfy |n_i / w_i - n_j / w_j| <= 1 / w_i + 1 / w_j. A key
/// with no ready task gives its turns to the others and banks no credit;
/// inside a key, tasks come in the usual order (priority, run time, push).
/// Tasks pushed without a key share the empty key "". SQLite only: on
/// PostgreSQL a push with a fairness key returns TQ_ERR_INVALID_ARGUMENT
/// and stores nothing.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, a key empty,
/// too long or not UTF-8; the object is then unchanged).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_fair_key(
    options: *mut tq_push_options,
    key: *const c_char,
) -> tq_status {
    guard("tq_push_options_set_fair_key", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        if key.is_null() {
            options.0.clear_fair_key();
        } else {
            options.0.fair_key(unsafe { utf8_string(key, "key") }?)?;
        }
        Ok(tq_status::TQ_OK)
    })
}

/// Puts the task in an ordered group.
///
/// Puts the task in the ordered group `key` of its queue: 1 to
/// `TQ_MAX_UNIQUE_KEY_LEN` bytes of UTF-8 (NUL-terminated; copied), or
/// NULL to take it out of any group. The tasks of one group are delivered
/// at most `max_at_once` at a time (1 to `TQ_MAX_GROUP_AT_ONCE`), in push
/// order when it is 1, while other groups proceed in parallel: the task
/// waits, as one added by `tq_push_options_add_after` with
/// `TQ_PARENT_FAILURE_RUN_ANYWAY` would, for the `max_at_once`-th most
/// recent unfinished task of the group, if any (listed by
/// `tq_task_waiting_for` while blocked, not by `tq_task_parents`). Tasks of
/// one group in one `tq_push_batch` or `tq_push_items` wait for each other
/// likewise, in order. A task of the group cancelled while it still waits
/// hands its place on: the tasks of the group waiting for it wait for the
/// task it waited for.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, a key empty,
/// too long or not UTF-8, `max_at_once` out of range; the object is then
/// unchanged).
/// Thread safety: not with other calls on the same options object.
#[no_mangle]
pub extern "C" fn tq_push_options_set_group(
    options: *mut tq_push_options,
    key: *const c_char,
    max_at_once: u32,
) -> tq_status {
    guard("tq_push_options_set_group", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        if key.is_null() {
            options.0.clear_group();
        } else {
            options
                .0
                .group(unsafe { utf8_string(key, "key") }?, max_at_once)?;
        }
        Ok(tq_status::TQ_OK)
    })
}
