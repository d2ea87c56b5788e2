//! The queue handle: opening and closing it, ending the waits of its
//! pulls, and the settings of its queue (pause, limits) and of its file
//! (the write-ahead log).

use std::ffi::c_char;
use std::time::Duration;

use super::objects::{borrow, borrow_optional, free, hand_out};
use super::{
    guard, guard_or, out_pointer, saturate, tq_options, tq_status, utf8_string, write_optional,
};
use crate::error::{Error, ErrorKind};
use crate::options::OpenOptions;
use crate::queue::Queue;
use crate::task::{Pause, RateLimit};

/// A handle on one named queue in one file. Thread-safe: one handle may be
/// used from any number of threads at once.
pub struct tq_queue(pub(super) Queue);

/// The end of a pause that lasts until `tq_resume`, as `tq_paused_until`
/// reports it and `tq_pause` takes it.
pub const TQ_UNTIL_RESUMED: i64 = i64::MAX;

/// Queues: opening and closing a handle, and the settings of its queue
/// ===================================================================
///
/// Opens a queue.
///
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

/// Closes a queue handle.
///
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

/// Ends the waits of the handle's pulls.
///
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

/// Pauses the queue.
///
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

/// Resumes the queue.
///
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

/// When the queue's pause ends.
///
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

/// Limits how many tasks are leased at once.
///
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

/// Removes the concurrency limit.
///
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

/// The queue's concurrency limit.
///
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

/// Caps the queue's pending tasks.
///
/// Caps the handle's queue at `cap` pending tasks, for every process and
/// machine on its file (or PostgreSQL schema); 0 removes the cap. Pending
/// tasks are those pushed and neither delivered nor ended: ready, delayed,
/// waiting for other tasks or their group, waiting for a retry; leased
/// tasks do not count. A push that would take the count over the cap
/// stores nothing (of a batch, no task) and returns TQ_ERR_FULL, unless
/// `tq_push_options_set_wait_for_room_ms` lets it wait for room; a push
/// returning TQ_DUPLICATE adds nothing and is never refused. The check is
/// made inside the push's transaction, so the cap holds under any race.
/// Setting a cap removes no task: a queue over its new cap refuses pushes
/// until it drains below.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
/// TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_set_max_pending(queue: *mut tq_queue, cap: u64) -> tq_status {
    guard("tq_set_max_pending", || {
        unsafe { borrow(queue.cast_const(), "queue") }?
            .0
            .set_max_pending(Some(cap))?;
        Ok(tq_status::TQ_OK)
    })
}

/// The queue's cap on pending tasks.
///
/// Writes the cap on pending tasks of the handle's queue to `*out_cap`, or
/// 0 when it has none.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or `out_cap`),
/// TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_max_pending(queue: *const tq_queue, out_cap: *mut u64) -> tq_status {
    guard("tq_max_pending", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        if out_cap.is_null() {
            return Err(Error::invalid_argument("out_cap is NULL"));
        }
        let cap = queue.0.max_pending()?.unwrap_or(0);
        // SAFETY: checked non-NULL above; the caller provides room for one value.
        unsafe { out_cap.write(cap) };
        Ok(tq_status::TQ_OK)
    })
}

/// Caps the pending tasks of each fairness key.
///
/// Caps each fairness key of the handle's queue at `cap` pending tasks (as
/// `tq_set_max_pending` counts them), for every process on its file,
/// unless the key has a cap of its own (`tq_set_key_max_pending`); 0
/// removes this default. The tasks pushed without a key share the empty
/// key "", capped as any other. A push that would take a key over its cap
/// stores nothing (of a batch, no task, whatever its other keys) and
/// returns TQ_ERR_FULL, or waits for room as `tq_set_max_pending` says;
/// the other keys are not affected. A cap makes the queue fair, as a push
/// with a fairness key does. SQLite only: on PostgreSQL it returns
/// TQ_ERR_INVALID_ARGUMENT and changes nothing.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue; on PostgreSQL),
/// TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_set_max_pending_per_key(queue: *mut tq_queue, cap: u64) -> tq_status {
    guard("tq_set_max_pending_per_key", || {
        unsafe { borrow(queue.cast_const(), "queue") }?
            .0
            .set_max_pending_per_key(Some(cap))?;
        Ok(tq_status::TQ_OK)
    })
}

/// The default cap on the pending tasks of each fairness key.
///
/// Writes the default cap on the pending tasks of each fairness key of the
/// handle's queue (see `tq_set_max_pending_per_key`) to `*out_cap`, or 0
/// when it has none.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or `out_cap`; on
/// PostgreSQL), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_max_pending_per_key(queue: *const tq_queue, out_cap: *mut u64) -> tq_status {
    guard("tq_max_pending_per_key", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        if out_cap.is_null() {
            return Err(Error::invalid_argument("out_cap is NULL"));
        }
        let cap = queue.0.max_pending_per_key()?.unwrap_or(0);
        // SAFETY: checked non-NULL above; the caller provides room for one value.
        unsafe { out_cap.write(cap) };
        Ok(tq_status::TQ_OK)
    })
}

/// Caps the pending tasks of one fairness key.
///
/// Caps fairness key `key` of the handle's queue (UTF-8, NUL-terminated, up
/// to `TQ_MAX_UNIQUE_KEY_LEN` bytes; "" for the tasks pushed without one;
/// copied) at `cap` pending tasks, in place of the default of
/// `tq_set_max_pending_per_key`, higher or lower; 0 removes the key's own
/// cap, so that the default applies to it again. A cap makes the queue
/// fair. SQLite only: on PostgreSQL it returns TQ_ERR_INVALID_ARGUMENT and
/// changes nothing.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or key, a key too
/// long or not UTF-8; nothing changes), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_set_key_max_pending(
    queue: *mut tq_queue,
    key: *const c_char,
    cap: u64,
) -> tq_status {
    guard("tq_set_key_max_pending", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let key = unsafe { utf8_string(key, "key") }?;
        queue.0.set_key_max_pending(key, Some(cap))?;
        Ok(tq_status::TQ_OK)
    })
}

/// The cap in force on the pending tasks of one fairness key.
///
/// Writes the cap in force for fairness key `key` of the handle's queue to
/// `*out_cap`: its own (`tq_set_key_max_pending`), else the queue's default
/// (`tq_set_max_pending_per_key`), else 0.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, key or `out_cap`,
/// a key too long or not UTF-8; on PostgreSQL), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_key_max_pending(
    queue: *const tq_queue,
    key: *const c_char,
    out_cap: *mut u64,
) -> tq_status {
    guard("tq_key_max_pending", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        let key = unsafe { utf8_string(key, "key") }?;
        if out_cap.is_null() {
            return Err(Error::invalid_argument("out_cap is NULL"));
        }
        let cap = queue.0.key_max_pending(key)?.unwrap_or(0);
        // SAFETY: checked non-NULL above; the caller provides room for one value.
        unsafe { out_cap.write(cap) };
        Ok(tq_status::TQ_OK)
    })
}

/// Sets the weight of a fairness key.
///
/// Sets the weight of fairness key `key` of the handle's queue (UTF-8,
/// NUL-terminated, up to `TQ_MAX_UNIQUE_KEY_LEN` bytes; the empty key ""
/// stands for the tasks pushed without one; copied), for every process on
/// its file: `TQ_MIN_FAIR_WEIGHT` to `TQ_MAX_FAIR_WEIGHT`, default 1.
/// Among the keys with ready tasks, each gets deliveries in proportion to
/// its weight (see `tq_push_options_set_fair_key`). Setting a weight makes the queue fair,
/// as a push with a fairness key does. SQLite only: on PostgreSQL it
/// returns TQ_ERR_INVALID_ARGUMENT and changes nothing.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or key, a key too
/// long or not UTF-8, a weight out of range or not a number; nothing
/// changes), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_set_fair_weight(
    queue: *mut tq_queue,
    key: *const c_char,
    weight: f64,
) -> tq_status {
    guard("tq_set_fair_weight", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let key = unsafe { utf8_string(key, "key") }?;
        queue.0.set_fair_weight(key, weight)?;
        Ok(tq_status::TQ_OK)
    })
}

/// The weight of a fairness key.
///
/// Writes the weight of fairness key `key` of the handle's queue to
/// `*out_weight`: 1 unless one was set (see `tq_set_fair_weight`).
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, key or
/// `out_weight`, a key too long or not UTF-8; on PostgreSQL), TQ_ERR_BUSY,
/// TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_fair_weight(
    queue: *const tq_queue,
    key: *const c_char,
    out_weight: *mut f64,
) -> tq_status {
    guard("tq_fair_weight", || {
        let queue = unsafe { borrow(queue, "queue") }?;
        let key = unsafe { utf8_string(key, "key") }?;
        if out_weight.is_null() {
            return Err(Error::invalid_argument("out_weight is NULL"));
        }
        let weight = queue.0.fair_weight(key)?;
        // SAFETY: checked non-NULL above; the caller provides room for one value.
        unsafe { out_weight.write(weight) };
        Ok(tq_status::TQ_OK)
    })
}

/// Limits how many tasks are delivered in a window of time.
///
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

/// Removes the rate limit.
///
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

/// The queue's rate limit.
///
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

/// Checkpoints the write-ahead log.
///
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

/// The size of the write-ahead log.
///
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
