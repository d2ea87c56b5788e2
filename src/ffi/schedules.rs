//! The periodic schedules of the C ABI: an options object describing a
//! schedule, the calls that add, replace, pause, resume and remove one,
//! the call that drives the due ones, and listed schedules.

use std::ffi::{c_char, CString};
use std::time::Duration;

use super::objects::{borrow, borrow_mut, free, hand_out_all, hand_out_or_null};
use super::push::payload_text;
use super::queue::tq_queue;
use super::{guard, guard_or, out_pointer, tq_status, utf8_string, write_optional};
use crate::error::{Error, ErrorKind, Result};
use crate::schedule::{CatchUp, Schedule, ScheduleInfo, ScheduleSpec};

/// What `tq_schedule_add` and `tq_schedule_replace` store besides the
/// schedule's name and payload: when its slots fall (required: a cron
/// expression or an interval), its time zone, the push options of its
/// tasks, and its catch-up policy.
pub struct tq_schedule_options {
    spec: Option<ScheduleSpec>,
    time_zone: Option<String>,
    priority: i32,
    max_attempts: Option<u32>,
    catch_up: CatchUp,
}

/// A schedule listed by `tq_schedules`, owned by the caller. Reading it
/// from several threads at once is safe; freeing it is not.
pub struct tq_schedule {
    name: CString,
    /// The cron expression; none for an interval.
    cron: Option<CString>,
    every_ms: u64,
    time_zone: CString,
    payload: CString,
    priority: i32,
    max_attempts: u32,
    catch_up: CatchUp,
    paused: bool,
    next_slot_unix_ms: i64,
}

/// Values for `tq_schedule_options_set_catch_up` and
/// `tq_schedule_catch_up`: what the slots that came due while no handle
/// drove a schedule become when one next does.
#[repr(C)]
pub enum tq_catch_up {
    /// The latest due slot runs if it came due at most a minute ago;
    /// the others are skipped.
    TQ_CATCH_UP_SKIP = 0,
    /// The latest due slot runs, however late: one run for all missed.
    /// The default.
    TQ_CATCH_UP_ONE = 1,
    /// Every due slot runs, the latest `limit` of them, in slot order.
    TQ_CATCH_UP_EACH = 2,
}

impl tq_schedule {
    fn listed(info: ScheduleInfo) -> Result<tq_schedule> {
        let max_attempts = info.schedule.task_max_attempts();
        let schedule = info.schedule.into_schedule();
        let name = schedule.name.clone();
        let text = |text: String| {
            CString::new(text).map_err(|_| {
                Error::new(
                    ErrorKind::NotADatabase,
                    format!("schedule '{name}' has a NUL byte in a stored text"),
                )
            })
        };
        let (cron, every_ms) = match &schedule.spec {
            ScheduleSpec::Cron(expression) => (Some(text(expression.clone())?), 0),
            ScheduleSpec::Every(interval) => (None, interval.as_millis() as u64),
        };
        Ok(tq_schedule {
            cron,
            every_ms,
            time_zone: text(schedule.time_zone.clone())?,
            payload: text(schedule.payload.clone())?,
            priority: schedule.priority,
            max_attempts,
            catch_up: schedule.catch_up,
            paused: info.paused,
            next_slot_unix_ms: info.next_slot,
            name: text(schedule.name)?,
        })
    }
}

/// Schedules: periodic tasks, their options object, and listed schedules
/// =====================================================================
///
/// Creates schedule options.
///
/// Creates a schedule options object with no spec yet (set one with
/// `tq_schedule_options_set_cron` or `tq_schedule_options_set_every_ms`),
/// the time zone UTC, priority 0, the adding handle's max attempts, and
/// TQ_CATCH_UP_ONE.
///
/// Ownership: the caller owns the result and frees it with
/// `tq_schedule_options_free`. Returns NULL only if tq failed internally.
/// Thread safety: as every options object (see `tq_options_new`).
#[no_mangle]
pub extern "C" fn tq_schedule_options_new() -> *mut tq_schedule_options {
    guard_or("tq_schedule_options_new", std::ptr::null_mut(), || {
        hand_out_or_null(tq_schedule_options {
            spec: None,
            time_zone: None,
            priority: 0,
            max_attempts: None,
            catch_up: CatchUp::default(),
        })
    })
}

/// Frees schedule options.
///
/// Frees an object from `tq_schedule_options_new`. NULL is a no-op; call
/// at most once per object.
#[no_mangle]
pub extern "C" fn tq_schedule_options_free(options: *mut tq_schedule_options) {
    guard_or("tq_schedule_options_free", (), || free(options, "options"))
}

/// Makes the slots those of a cron expression.
///
/// The schedule's slots are those of the cron `expression`: five fields
/// (minute, hour, day of month, month, day of week) or six (seconds
/// first), or an alias such as "@daily", read in the schedule's time zone.
/// Replaces an earlier spec.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options or expression,
/// bad UTF-8, an expression that does not parse, named in the message; the
/// object is then unchanged).
#[no_mangle]
pub extern "C" fn tq_schedule_options_set_cron(
    options: *mut tq_schedule_options,
    expression: *const c_char,
) -> tq_status {
    guard("tq_schedule_options_set_cron", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        let expression = unsafe { utf8_string(expression, "expression") }?;
        let spec = ScheduleSpec::Cron(expression.to_owned());
        Schedule::new("check", spec.clone(), "")?;
        options.spec = Some(spec);
        Ok(tq_status::TQ_OK)
    })
}

/// Makes the slots fall at an interval.
///
/// The schedule's slots fall every `interval_ms` milliseconds (1 ms to 366
/// days), the first one interval after it is added. Replaces an earlier
/// spec.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, out of range).
#[no_mangle]
pub extern "C" fn tq_schedule_options_set_every_ms(
    options: *mut tq_schedule_options,
    interval_ms: u64,
) -> tq_status {
    guard("tq_schedule_options_set_every_ms", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        let spec = ScheduleSpec::Every(Duration::from_millis(interval_ms));
        Schedule::new("check", spec.clone(), "")?;
        options.spec = Some(spec);
        Ok(tq_status::TQ_OK)
    })
}

/// Sets the time zone of the cron expression.
///
/// Reads the cron expression in the IANA time zone `name` (such as
/// "Europe/Paris"; default "UTC"). Only a cron schedule takes a zone other
/// than UTC: adding an interval with one fails.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options or name, bad
/// UTF-8, an unknown zone, named in the message).
#[no_mangle]
pub extern "C" fn tq_schedule_options_set_time_zone(
    options: *mut tq_schedule_options,
    name: *const c_char,
) -> tq_status {
    guard("tq_schedule_options_set_time_zone", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        let name = unsafe { utf8_string(name, "name") }?;
        Schedule::new("check", ScheduleSpec::Cron("@daily".into()), "")?.time_zone(name)?;
        options.time_zone = Some(name.to_owned());
        Ok(tq_status::TQ_OK)
    })
}

/// Sets the priority of the schedule's tasks.
///
/// Sets the priority of the schedule's tasks (higher first; default 0).
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options).
#[no_mangle]
pub extern "C" fn tq_schedule_options_set_priority(
    options: *mut tq_schedule_options,
    priority: i32,
) -> tq_status {
    guard("tq_schedule_options_set_priority", || {
        unsafe { borrow_mut(options, "options") }?.priority = priority;
        Ok(tq_status::TQ_OK)
    })
}

/// Sets how many deliveries the schedule's tasks get.
///
/// Sets how many deliveries each of the schedule's tasks gets (at least 1;
/// default the adding handle's).
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, 0).
#[no_mangle]
pub extern "C" fn tq_schedule_options_set_max_attempts(
    options: *mut tq_schedule_options,
    max_attempts: u32,
) -> tq_status {
    guard("tq_schedule_options_set_max_attempts", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        crate::options::check_max_attempts(max_attempts)?;
        options.max_attempts = Some(max_attempts);
        Ok(tq_status::TQ_OK)
    })
}

/// Sets the catch-up policy.
///
/// Sets the catch-up policy: a `tq_catch_up` value (a plain integer, so any
/// other value is an error rather than undefined behaviour), and for
/// TQ_CATCH_UP_EACH the most slots run at once, 1 to 10,000 (`limit` is
/// ignored for the others).
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL options, unknown
/// policy, limit out of range; the object is then unchanged).
#[no_mangle]
pub extern "C" fn tq_schedule_options_set_catch_up(
    options: *mut tq_schedule_options,
    policy: i32,
    limit: u32,
) -> tq_status {
    guard("tq_schedule_options_set_catch_up", || {
        let options = unsafe { borrow_mut(options, "options") }?;
        let catch_up = match policy {
            0 => CatchUp::Skip,
            1 => CatchUp::One,
            2 => CatchUp::Each(limit),
            other => {
                return Err(Error::invalid_argument(format!(
                    "unknown catch-up policy {other}: use TQ_CATCH_UP_SKIP, TQ_CATCH_UP_ONE \
                     or TQ_CATCH_UP_EACH"
                )))
            }
        };
        Schedule::new("check", ScheduleSpec::Cron("@daily".into()), "")?.catch_up(catch_up)?;
        options.catch_up = catch_up;
        Ok(tq_status::TQ_OK)
    })
}

/// The schedule `options` describe, named `name`, enqueueing `payload`.
fn schedule(name: &str, payload: &str, options: &tq_schedule_options) -> Result<Schedule> {
    let spec = options.spec.clone().ok_or_else(|| {
        Error::invalid_argument(
            "the schedule options have no spec: set a cron expression or an interval",
        )
    })?;
    let mut schedule = Schedule::new(name, spec, payload)?;
    if let Some(time_zone) = &options.time_zone {
        schedule.time_zone(time_zone)?;
    }
    schedule
        .priority(options.priority)
        .catch_up(options.catch_up)?;
    if let Some(max_attempts) = options.max_attempts {
        schedule.max_attempts(max_attempts)?;
    }
    Ok(schedule)
}

fn put(
    function: &str,
    queue: *mut tq_queue,
    name: *const c_char,
    payload: *const c_char,
    len: usize,
    options: *const tq_schedule_options,
    call: fn(&crate::Queue, &crate::Schedule) -> Result<()>,
) -> tq_status {
    guard(function, || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let name = unsafe { utf8_string(name, "name") }?;
        let payload = unsafe { payload_text(payload, len) }?;
        let options = unsafe { borrow(options, "options") }?;
        let schedule = schedule(name, payload, options)?;
        call(&queue.0, &schedule)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Adds a schedule.
///
/// Adds to the handle's queue the schedule `name` (1 to 200 bytes of
/// UTF-8) that enqueues `payload` (`len` bytes of UTF-8, a JSON text) at
/// every slot of `options`, its first slot after now. Each slot is
/// enqueued exactly once however many processes drive the queue's
/// schedules (see `tq_run_due_schedules`), as a task with the unique key
/// `schedule:<name>:<slot ms>` due at the slot's time.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue, name, payload or
/// options; options with no spec; a bad name; a name the queue already
/// has; a time zone on an interval), TQ_ERR_INVALID_JSON, TQ_ERR_BUSY,
/// TQ_ERR_IO. On any error nothing is stored.
///
/// Ownership: tq copies what it keeps; the caller keeps its arguments.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_schedule_add(
    queue: *mut tq_queue,
    name: *const c_char,
    payload: *const c_char,
    len: usize,
    options: *const tq_schedule_options,
) -> tq_status {
    put(
        "tq_schedule_add",
        queue,
        name,
        payload,
        len,
        options,
        crate::Queue::add_schedule,
    )
}

/// Adds or overwrites a schedule.
///
/// As `tq_schedule_add`, but a schedule of the same name is overwritten:
/// its next slot is computed afresh from now and it is no longer paused.
/// Tasks already enqueued stay, and a slot enqueued before is not enqueued
/// again (its unique key stays reserved for a day after its task is done).
///
/// Returns as `tq_schedule_add`, without the error for a taken name.
/// Ownership and thread safety: as `tq_schedule_add`.
#[no_mangle]
pub extern "C" fn tq_schedule_replace(
    queue: *mut tq_queue,
    name: *const c_char,
    payload: *const c_char,
    len: usize,
    options: *const tq_schedule_options,
) -> tq_status {
    put(
        "tq_schedule_replace",
        queue,
        name,
        payload,
        len,
        options,
        crate::Queue::replace_schedule,
    )
}

/// Adds or updates a schedule, keeping its next slot.
///
/// Declares a schedule, as an application does at every start: as
/// `tq_schedule_add`, but a schedule of the same name is updated (payload,
/// priority, max attempts, timing) and keeps its next slot while its timing
/// (spec, time zone, catch-up) is unchanged, so that a restart neither
/// delays an interval's slot nor skips a due slot. A changed timing's next
/// slot is computed afresh from now; a paused schedule stays paused.
///
/// Returns as `tq_schedule_add`, without the error for a taken name.
/// Ownership and thread safety: as `tq_schedule_add`.
#[no_mangle]
pub extern "C" fn tq_schedule_upsert(
    queue: *mut tq_queue,
    name: *const c_char,
    payload: *const c_char,
    len: usize,
    options: *const tq_schedule_options,
) -> tq_status {
    put(
        "tq_schedule_upsert",
        queue,
        name,
        payload,
        len,
        options,
        crate::Queue::upsert_schedule,
    )
}

fn by_name(
    function: &str,
    queue: *mut tq_queue,
    name: *const c_char,
    call: fn(&crate::Queue, &str) -> Result<()>,
) -> tq_status {
    guard(function, || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let name = unsafe { utf8_string(name, "name") }?;
        call(&queue.0, name)?;
        Ok(tq_status::TQ_OK)
    })
}

/// Removes a schedule.
///
/// Deletes the schedule `name` of the handle's queue; the tasks it
/// enqueued stay.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue or name, bad
/// UTF-8, no such schedule), TQ_ERR_BUSY, TQ_ERR_IO.
/// Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_schedule_remove(queue: *mut tq_queue, name: *const c_char) -> tq_status {
    by_name(
        "tq_schedule_remove",
        queue,
        name,
        crate::Queue::remove_schedule,
    )
}

/// Pauses a schedule.
///
/// Pauses the schedule `name` of the handle's queue: its slots are skipped
/// until `tq_schedule_resume`. Pausing a paused schedule does nothing.
///
/// Returns as `tq_schedule_remove`. Thread safety: may run concurrently
/// with any other call.
#[no_mangle]
pub extern "C" fn tq_schedule_pause(queue: *mut tq_queue, name: *const c_char) -> tq_status {
    by_name(
        "tq_schedule_pause",
        queue,
        name,
        crate::Queue::pause_schedule,
    )
}

/// Resumes a schedule.
///
/// Resumes the schedule `name` of the handle's queue: it goes on from its
/// first slot at or after now (slots that fell while it was paused are
/// skipped, whatever its catch-up policy).
///
/// Returns as `tq_schedule_remove`. Thread safety: may run concurrently
/// with any other call.
#[no_mangle]
pub extern "C" fn tq_schedule_resume(queue: *mut tq_queue, name: *const c_char) -> tq_status {
    by_name(
        "tq_schedule_resume",
        queue,
        name,
        crate::Queue::resume_schedule,
    )
}

/// Enqueues the tasks of the due slots.
///
/// Enqueues the task of every due slot of the handle's queue's schedules
/// (by each one's catch-up policy) and writes how many tasks it stored to
/// `*out_enqueued` when it is not NULL. Any number of handles, processes
/// and machines may call it at once: each slot is enqueued once, in the
/// transaction that moves its schedule on. `tq_pull` and `tq_pull_batch`
/// call it by themselves when a slot is due (and a waiting pull wakes at
/// the next slot), so a worker needs no other scheduler.
///
/// Returns TQ_OK, or TQ_ERR_INVALID_ARGUMENT (NULL queue), TQ_ERR_BUSY,
/// TQ_ERR_IO. Thread safety: may run concurrently with any other call.
#[no_mangle]
pub extern "C" fn tq_run_due_schedules(queue: *mut tq_queue, out_enqueued: *mut i64) -> tq_status {
    guard("tq_run_due_schedules", || {
        let queue = unsafe { borrow(queue.cast_const(), "queue") }?;
        let stored = queue.0.run_due_schedules()?;
        unsafe { write_optional(out_enqueued, stored as i64) };
        Ok(tq_status::TQ_OK)
    })
}

/// Lists a page of the queue's schedules.
///
/// Lists the handle's queue's schedules by name: up to `max` of them with
/// names after `after_name` (NULL or "" to start), stored in
/// `out_schedules[0..*out_count]` (the rest set to NULL). Pass the last
/// name of a page to get the next; a page shorter than `max` is the last.
///
/// Returns TQ_OK (`*out_count` may be 0), or TQ_ERR_INVALID_ARGUMENT (NULL
/// queue, out_schedules or out_count; bad UTF-8), TQ_ERR_BUSY, TQ_ERR_IO.
///
/// Ownership: the caller owns each schedule and frees it with
/// `tq_schedule_free`. Thread safety: may run concurrently with any other
/// call.
#[no_mangle]
pub extern "C" fn tq_schedules(
    queue: *const tq_queue,
    after_name: *const c_char,
    max: usize,
    out_schedules: *mut *mut tq_schedule,
    out_count: *mut usize,
) -> tq_status {
    guard("tq_schedules", || {
        let count = out_pointer(out_count, "out_count")?;
        // SAFETY: checked non-NULL; writable per the contract.
        unsafe { count.write(0) };
        let out = out_pointer(out_schedules, "out_schedules")?;
        // SAFETY: room for `max` pointers per the contract.
        let slots = unsafe { std::slice::from_raw_parts_mut(out, max) };
        slots.fill(std::ptr::null_mut());
        let queue = unsafe { borrow(queue, "queue") }?;
        let after = if after_name.is_null() {
            ""
        } else {
            unsafe { utf8_string(after_name, "after_name") }?
        };
        let listed = queue
            .0
            .schedules()?
            .into_iter()
            .filter(|info| info.schedule().name.as_str() > after)
            .take(max)
            .map(tq_schedule::listed)
            .collect::<Result<Vec<_>>>()?;
        let listed = hand_out_all(listed)?;
        let listed_count = listed.len();
        for (slot, schedule) in slots.iter_mut().zip(listed) {
            *slot = schedule;
        }
        // SAFETY: as above.
        unsafe { count.write(listed_count) };
        Ok(tq_status::TQ_OK)
    })
}

/// Frees a listed schedule.
///
/// Frees a schedule from `tq_schedules`. NULL is a no-op; call at most
/// once per schedule.
#[no_mangle]
pub extern "C" fn tq_schedule_free(schedule: *mut tq_schedule) {
    guard_or("tq_schedule_free", (), || free(schedule, "schedule"))
}

/// Reads a field of a live schedule, or records the error and returns
/// `fallback`.
fn field<T>(schedule: *const tq_schedule, read: impl FnOnce(&tq_schedule) -> T, fallback: T) -> T {
    match unsafe { borrow(schedule, "schedule") } {
        Ok(schedule) => read(schedule),
        Err(err) => {
            super::fail(&err);
            fallback
        }
    }
}

/// The schedule's name.
///
/// Returns the schedule's name, or NULL when `schedule` is NULL.
///
/// Ownership: the text belongs to the schedule and lives until
/// `tq_schedule_free`. Thread safety: safe on a schedule read by several
/// threads.
#[no_mangle]
pub extern "C" fn tq_schedule_name(schedule: *const tq_schedule) -> *const c_char {
    guard_or("tq_schedule_name", std::ptr::null(), || {
        field(schedule, |s| s.name.as_ptr(), std::ptr::null())
    })
}

/// The schedule's cron expression.
///
/// Returns the schedule's cron expression, or NULL for an interval (see
/// `tq_schedule_every_ms`) or when `schedule` is NULL.
///
/// Ownership and thread safety: as `tq_schedule_name`.
#[no_mangle]
pub extern "C" fn tq_schedule_cron(schedule: *const tq_schedule) -> *const c_char {
    guard_or("tq_schedule_cron", std::ptr::null(), || {
        field(
            schedule,
            |s| {
                s.cron
                    .as_ref()
                    .map_or(std::ptr::null(), |text| text.as_ptr())
            },
            std::ptr::null(),
        )
    })
}

/// The schedule's interval.
///
/// Returns the schedule's interval in milliseconds, or 0 for a cron
/// schedule or when `schedule` is NULL. Thread safety: safe on a schedule
/// read by several threads.
#[no_mangle]
pub extern "C" fn tq_schedule_every_ms(schedule: *const tq_schedule) -> u64 {
    guard_or("tq_schedule_every_ms", 0, || {
        field(schedule, |s| s.every_ms, 0)
    })
}

/// The time zone of the schedule's cron expression.
///
/// Returns the IANA name of the time zone the schedule's cron expression
/// is read in, or NULL when `schedule` is NULL.
///
/// Ownership and thread safety: as `tq_schedule_name`.
#[no_mangle]
pub extern "C" fn tq_schedule_time_zone(schedule: *const tq_schedule) -> *const c_char {
    guard_or("tq_schedule_time_zone", std::ptr::null(), || {
        field(schedule, |s| s.time_zone.as_ptr(), std::ptr::null())
    })
}

/// The payload of the schedule's tasks.
///
/// Returns the payload of the schedule's tasks, NUL-terminated, and stores
/// its length (without the NUL) in `*len` when `len` is not NULL; NULL
/// (and length 0) when `schedule` is NULL.
///
/// Ownership and thread safety: as `tq_schedule_name`.
#[no_mangle]
pub extern "C" fn tq_schedule_payload(
    schedule: *const tq_schedule,
    len: *mut usize,
) -> *const c_char {
    guard_or("tq_schedule_payload", std::ptr::null(), || {
        let (text, length) = field(
            schedule,
            |s| (s.payload.as_ptr(), s.payload.as_bytes().len()),
            (std::ptr::null(), 0),
        );
        unsafe { write_optional(len, length) };
        text
    })
}

/// The priority of the schedule's tasks.
///
/// Returns the priority of the schedule's tasks, or 0 when `schedule` is
/// NULL. Thread safety: safe on a schedule read by several threads.
#[no_mangle]
pub extern "C" fn tq_schedule_priority(schedule: *const tq_schedule) -> i32 {
    guard_or("tq_schedule_priority", 0, || {
        field(schedule, |s| s.priority, 0)
    })
}

/// How many deliveries the schedule's tasks get.
///
/// Returns the max attempts of the schedule's tasks, or 0 when `schedule`
/// is NULL. Thread safety: safe on a schedule read by several threads.
#[no_mangle]
pub extern "C" fn tq_schedule_max_attempts(schedule: *const tq_schedule) -> u32 {
    guard_or("tq_schedule_max_attempts", 0, || {
        field(schedule, |s| s.max_attempts, 0)
    })
}

/// The schedule's catch-up policy.
///
/// Returns the schedule's catch-up policy (a `tq_catch_up` value), or -1
/// when `schedule` is NULL; with TQ_CATCH_UP_EACH, `*out_limit` (when not
/// NULL) gets its bound, else 1. Thread safety: safe on a schedule read by
/// several threads.
#[no_mangle]
pub extern "C" fn tq_schedule_catch_up(schedule: *const tq_schedule, out_limit: *mut u32) -> i32 {
    guard_or("tq_schedule_catch_up", -1, || {
        let (policy, limit) = field(
            schedule,
            |s| match s.catch_up {
                CatchUp::Skip => (0, 1),
                CatchUp::One => (1, 1),
                CatchUp::Each(limit) => (2, limit),
            },
            (-1, 0),
        );
        unsafe { write_optional(out_limit, limit) };
        policy
    })
}

/// Whether the schedule is paused.
///
/// Returns whether the schedule is paused (false when `schedule` is NULL).
/// Thread safety: safe on a schedule read by several threads.
#[no_mangle]
pub extern "C" fn tq_schedule_paused(schedule: *const tq_schedule) -> bool {
    guard_or("tq_schedule_paused", false, || {
        field(schedule, |s| s.paused, false)
    })
}

/// The schedule's next slot.
///
/// Returns the schedule's next slot not yet enqueued, in milliseconds since
/// the Unix epoch (on PostgreSQL, on the server's clock), or 0 when
/// `schedule` is NULL. Thread safety: safe on a schedule read by several
/// threads.
#[no_mangle]
pub extern "C" fn tq_schedule_next_slot_unix_ms(schedule: *const tq_schedule) -> i64 {
    guard_or("tq_schedule_next_slot_unix_ms", 0, || {
        field(schedule, |s| s.next_slot_unix_ms, 0)
    })
}
