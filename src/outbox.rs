//! Pushing and finishing inside the application's own transaction.
//!
//! An application that keeps its own tables in the queue's file can commit
//! a row and the task it implies together (the outbox pattern): either
//! both are stored or neither is. There is one mechanism, reached three
//! ways:
//! - from Rust, [`push`] and [`finish`] in a [`rusqlite`] transaction (the
//!   crate tq uses, re-exported as [`crate::rusqlite`], so both share one
//!   copy of SQLite);
//! - in SQL on a Rust connection, after [`install`]: `SELECT tq_push(...)`;
//! - in SQL on any program's own SQLite, through tq's loadable extension
//!   (`libtq_sqlite`, see `docs/guide.md`, "Transactions with your own tables"), which runs this module
//!   on the host's SQLite and calls [`install`] when loaded.
//!
//! The SQL functions:
//! - `tq_push(queue, payload)` and `tq_push(queue, payload, options)`
//!   store a task and return its id; `options` is a JSON object
//!   ([`PushOptions::from_json`]). A push under a unique key already held
//!   stores nothing and returns the id of the task holding it.
//! - `tq_finish(id, token)` and `tq_finish(id, token, keep_history)`
//!   complete a delivery by its receipt (the task's id and its delivery's
//!   token) and return the id; a delivery no longer held is an error.
//! - `tq_step_put(id, token, name, json)` records step `name` of the held task
//!   with its output (see [`crate::Queue::record_step`]) and returns 1, or
//!   0 when the step was already recorded (the first output is kept): the
//!   step's own writes and its record commit together, so it runs once.
//!
//! Each checks what [`crate::Queue::push`] and [`crate::Queue::finish`]
//! check and fails with tq's message, changing nothing. On a connection
//! [`install`] prepared, waiting workers of every process are woken just
//! after the commit that stores a task or frees one (see
//! `sqlite/commit_rings.rs`); a rollback wakes nobody.

use std::sync::Arc;

use rusqlite::functions::{Context, FunctionFlags};
use rusqlite::types::ValueRef;
use rusqlite::{Connection, Transaction};

use crate::clock::now_unix_ms;
use crate::error::{Error, ErrorKind, Result};
use crate::options::{check_queue_name, PushOptions, DEFAULT_MAX_ATTEMPTS, MAX_PAYLOAD_LEN};
use crate::queue::{check_items_named, check_json, check_payload};
use crate::sqlite::commit_rings::{self, Watch};
use crate::sqlite::finish::finish_one;
use crate::sqlite::push::push_all;
use crate::sqlite::{check_sqlite_version, enable_wal, ids, schema};
use crate::store::not_held;
use crate::store::{check_limits, NewTask};
use crate::task::{Pushed, Receipt};

/// Stores `payload` as a new task of the queue named `queue`, in the
/// caller's transaction `tx`: the task exists once `tx` commits, and never
/// if it rolls back. Answers as [`crate::Queue::push`] does; the task gets
/// [`DEFAULT_MAX_ATTEMPTS`] unless `options` says otherwise.
pub fn push(
    tx: &Transaction<'_>,
    queue: &str,
    payload: &str,
    options: &PushOptions,
) -> Result<Pushed> {
    push_on(tx, queue, payload, options)
}

/// Completes the delivery named by `receipt` in the caller's transaction
/// `tx`, so that the application's own writes and the completion commit
/// together. The task is deleted, or kept as done when `keep_history`.
/// Fails with [`crate::ErrorKind::NotHeld`] as [`crate::Queue::finish`] does.
pub fn finish(tx: &Transaction<'_>, receipt: Receipt, keep_history: bool) -> Result<()> {
    finish_on(tx, receipt, keep_history)
}

/// Records step `name` of the task held under `receipt` with `output` in
/// the caller's transaction `tx`, so that the step's own writes and its
/// record commit together. Answers as [`crate::Queue::record_step`] does.
pub fn record_step(
    tx: &Transaction<'_>,
    receipt: Receipt,
    name: &str,
    output: &str,
) -> Result<bool> {
    record_step_on(tx, receipt, name, output)
}

/// Prepares `conn`, a connection on a file, for pushes and finishes in its
/// own transactions: creates or upgrades tq's tables as
/// [`crate::Queue::open`] does (in WAL mode; only outside a transaction),
/// registers the SQL functions `tq_push`, `tq_finish` and `tq_step_put` (see the module's
/// docs), and makes its commits wake waiting workers. The functions may be
/// called only from top-level SQL, not from triggers or views, as SQLite
/// advises for functions that write. Fails on SQLite older than 3.51.3.
pub fn install(conn: &Connection) -> Result<()> {
    check_sqlite_version(rusqlite::version_number())?;
    let path = conn.path().filter(|path| !path.is_empty()).ok_or_else(|| {
        Error::invalid_argument("tq's functions need a database file, not an in-memory database")
    })?;
    prepare_schema(conn)?;
    let watch = commit_rings::watch(conn, path)?;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DIRECTONLY;
    // The functions own the watch: it ends when SQLite drops them, as the
    // connection closes.
    for arguments in [2, 3] {
        let owned = Arc::clone(&watch);
        conn.create_scalar_function("tq_push", arguments, flags, move |ctx| {
            let _owned: &Arc<Watch> = &owned;
            sql_result("tq_push", push_called(ctx))
        })?;
        let owned = Arc::clone(&watch);
        conn.create_scalar_function("tq_finish", arguments, flags, move |ctx| {
            let _owned: &Arc<Watch> = &owned;
            sql_result("tq_finish", finish_called(ctx))
        })?;
    }
    let owned = Arc::clone(&watch);
    conn.create_scalar_function("tq_step_put", 4, flags, move |ctx| {
        let _owned: &Arc<Watch> = &owned;
        sql_result("tq_step_put", step_called(ctx))
    })?;
    Ok(())
}

/// The entry point of tq's SQLite extension (`ext/sqlite`): binds this
/// build of tq to the host's SQLite through `api`, then runs [`install`]
/// on `db`.
///
/// # Safety
/// Called by SQLite's extension loader, with the arguments it passes.
#[cfg(feature = "sqlite-extension")]
pub unsafe fn load_extension(
    db: *mut rusqlite::ffi::sqlite3,
    error: *mut *mut std::ffi::c_char,
    api: *mut rusqlite::ffi::sqlite3_api_routines,
) -> std::ffi::c_int {
    fn init(conn: Connection) -> rusqlite::Result<bool> {
        install(&conn).map_err(|err| rusqlite::Error::UserFunctionError(err.message().into()))?;
        // Not kept loaded after the connection closes: each connection
        // loads it for itself.
        Ok(false)
    }
    // The version first, from the host's table itself: the binding refuses
    // a host older than its own headers without a message.
    // SAFETY: `api` is SQLite's table of functions, as the caller promises.
    let version = unsafe { api.as_ref() }
        .and_then(|api| api.libversion_number)
        .map_or(0, |libversion_number| unsafe { libversion_number() });
    if let Err(err) = check_sqlite_version(version) {
        // SAFETY: as the caller promises.
        unsafe { set_load_error(api, error, err.message()) };
        return rusqlite::ffi::SQLITE_ERROR;
    }
    // SAFETY: as the caller promises.
    unsafe { Connection::extension_init2(db, error, api, init) }
}

/// Hands SQLite's extension loader `message`, in memory from the host's
/// SQLite (which frees it).
#[cfg(feature = "sqlite-extension")]
unsafe fn set_load_error(
    api: *mut rusqlite::ffi::sqlite3_api_routines,
    error: *mut *mut std::ffi::c_char,
    message: &str,
) {
    // SAFETY: `api` is SQLite's table and `error` the loader's place.
    let Some(malloc) = (unsafe { api.as_ref() }).and_then(|api| api.malloc) else {
        return;
    };
    if error.is_null() {
        return;
    }
    let copy = unsafe { malloc(message.len() as std::ffi::c_int + 1) }.cast::<u8>();
    if !copy.is_null() {
        // SAFETY: `copy` has room for the message and its NUL.
        unsafe {
            std::ptr::copy_nonoverlapping(message.as_ptr(), copy, message.len());
            copy.add(message.len()).write(0);
            *error = copy.cast();
        }
    }
}

fn push_on(conn: &Connection, queue: &str, payload: &str, options: &PushOptions) -> Result<Pushed> {
    check_queue_name(queue)?;
    check_items_named(options, 0, "a single push")?;
    check_payload(payload, MAX_PAYLOAD_LEN)?;
    check_schema(conn)?;
    let now = now_unix_ms();
    let task = NewTask::new(payload, options, now, DEFAULT_MAX_ATTEMPTS);
    check_limits(&task, now)?;
    let pushed = in_savepoint(conn, || {
        push_all(conn, queue, std::slice::from_ref(&task), now)
    })?[0];
    if let Pushed::Stored(_) = pushed {
        commit_rings::note(conn, queue);
    }
    Ok(pushed)
}

fn finish_on(conn: &Connection, receipt: Receipt, keep_history: bool) -> Result<()> {
    check_schema(conn)?;
    let queue: Option<String> = conn
        .prepare_cached("SELECT queue FROM tq_tasks WHERE id = ?1")?
        .query_row([receipt.id()], |row| row.get(0))
        .ok();
    in_savepoint(conn, || {
        ids::deleting_unwatched(conn, || {
            if !finish_one(conn, receipt, now_unix_ms(), keep_history, None)? {
                return Err(not_held(receipt.id()));
            }
            Ok(())
        })
    })?;
    // A finish frees the tasks that waited for it, and its group's next.
    if let Some(queue) = queue {
        commit_rings::note(conn, &queue);
    }
    Ok(())
}

fn record_step_on(conn: &Connection, receipt: Receipt, name: &str, output: &str) -> Result<bool> {
    crate::events::check_own_step_name(name)?;
    check_json("step's output", output, MAX_PAYLOAD_LEN)?;
    check_schema(conn)?;
    in_savepoint(conn, || {
        crate::sqlite::steps::record(conn, receipt, name, output, now_unix_ms())
    })
}

/// Runs `body` so that it changes all or nothing, inside whatever
/// transaction `conn` is in (a push marks the tasks it waits for before
/// it finds, say, that its unique key is taken).
fn in_savepoint<T>(conn: &Connection, body: impl FnOnce() -> Result<T>) -> Result<T> {
    conn.prepare_cached("SAVEPOINT tq_outbox")?.execute([])?;
    match body() {
        Ok(value) => {
            conn.prepare_cached("RELEASE tq_outbox")?.execute([])?;
            Ok(value)
        }
        Err(err) => {
            conn.execute_batch("ROLLBACK TO tq_outbox; RELEASE tq_outbox")?;
            Err(err)
        }
    }
}

/// `tq_push(queue, payload[, options])`.
fn push_called(ctx: &Context<'_>) -> Result<i64> {
    let queue = text_argument(ctx, 0, "the queue")?;
    let payload = text_argument(ctx, 1, "the payload")?;
    let options = match ctx.len() {
        3 if ctx.get_raw(2) != ValueRef::Null => {
            PushOptions::from_json(text_argument(ctx, 2, "the options")?)?
        }
        _ => PushOptions::new(),
    };
    // SAFETY: the connection running the function, used only during it.
    let conn = unsafe { ctx.get_connection() }?;
    Ok(push_on(&conn, queue, payload, &options)?.id())
}

/// `tq_finish(id, token[, keep_history])`.
fn finish_called(ctx: &Context<'_>) -> Result<i64> {
    let id = integer_argument(ctx, 0, "the task id")?;
    let token = integer_argument(ctx, 1, "the delivery's token")?;
    let keep_history = ctx.len() == 3 && integer_argument(ctx, 2, "keep_history")? != 0;
    // SAFETY: the connection running the function, used only during it.
    let conn = unsafe { ctx.get_connection() }?;
    finish_on(&conn, Receipt::new(id, token), keep_history)?;
    Ok(id)
}

/// `tq_step_put(id, token, name, json)`: 1 once recorded, 0 when the step was
/// already.
fn step_called(ctx: &Context<'_>) -> Result<i64> {
    let id = integer_argument(ctx, 0, "the task id")?;
    let token = integer_argument(ctx, 1, "the delivery's token")?;
    let name = text_argument(ctx, 2, "the step name")?;
    let output = text_argument(ctx, 3, "the step's output")?;
    // SAFETY: the connection running the function, used only during it.
    let conn = unsafe { ctx.get_connection() }?;
    Ok(record_step_on(&conn, Receipt::new(id, token), name, output)? as i64)
}

fn text_argument<'a>(ctx: &'a Context<'_>, index: usize, what: &str) -> Result<&'a str> {
    match ctx.get_raw(index) {
        ValueRef::Text(text) => std::str::from_utf8(text)
            .map_err(|_| Error::invalid_argument(format!("{what} is not valid UTF-8"))),
        other => Err(Error::invalid_argument(format!(
            "{what} is a text, got {}",
            other.data_type()
        ))),
    }
}

/// An integer argument. A whole number stored as a real is taken too:
/// some drivers bind every number of their language as a real (Node.js's
/// better-sqlite3 binds a JavaScript number so), and ids below 2^53 are
/// exact as reals.
fn integer_argument(ctx: &Context<'_>, index: usize, what: &str) -> Result<i64> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    match ctx.get_raw(index) {
        ValueRef::Integer(n) => Ok(n),
        ValueRef::Real(x) if x.fract() == 0.0 && x.abs() <= EXACT => Ok(x as i64),
        other => Err(Error::invalid_argument(format!(
            "{what} is an integer, got {}",
            other.data_type()
        ))),
    }
}

/// An SQL function's answer: tq's error becomes the statement's, with the
/// function's name and tq's message.
fn sql_result<T>(function: &str, result: Result<T>) -> rusqlite::Result<T> {
    result.map_err(|err| {
        rusqlite::Error::UserFunctionError(format!("{function}: {}", err.message()).into())
    })
}

/// Creates or upgrades tq's tables, as [`crate::Queue::open`] does.
fn prepare_schema(conn: &Connection) -> Result<()> {
    let version = schema::version(conn)?;
    schema::check_supported(version)?;
    if version == schema::CURRENT_VERSION {
        return Ok(());
    }
    if !conn.is_autocommit() {
        return Err(Error::invalid_argument(
            "tq's tables must be created or upgraded first, which cannot be done inside \
             a transaction: load tq's functions on a connection outside one",
        ));
    }
    enable_wal(conn)?;
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match schema::migrate(conn) {
        Ok(()) => Ok(conn.execute_batch("COMMIT")?),
        Err(err) => {
            conn.execute_batch("ROLLBACK")?;
            Err(err)
        }
    }
}

fn check_schema(conn: &Connection) -> Result<()> {
    let version = schema::version(conn)?;
    if version != schema::CURRENT_VERSION {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            format!(
                "the file has tq schema version {version}, not {}: open it once with \
                 tq::Queue::open, which creates and upgrades tq's tables",
                schema::CURRENT_VERSION
            ),
        ));
    }
    Ok(())
}
