//! tq as a SQLite loadable extension (`libtq_sqlite.so`): loaded into a
//! program's own SQLite connection, it adds the SQL functions `tq_push`
//! and `tq_finish`, so that the program stores a task, or finishes one, in
//! its own transaction. See `tq::outbox` and `docs/guide.md`.

use std::ffi::{c_char, c_int};

use tq::rusqlite::ffi;

/// The entry point SQLite's `sqlite3_load_extension` calls for a file named
/// `libtq_sqlite.so` (or `tq_sqlite.so`): creates or upgrades tq's tables
/// in the connection's file, registers the functions on the connection,
/// and makes its commits wake tq's waiting workers. Fails, with a message,
/// on SQLite older than 3.51.3 or inside a transaction when the tables
/// must be created.
///
/// # Safety
/// Called by SQLite with a live connection, a place for an error message
/// and its table of functions.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_tqsqlite_init(
    db: *mut ffi::sqlite3,
    error: *mut *mut c_char,
    api: *mut ffi::sqlite3_api_routines,
) -> c_int {
    // Catches a panic before it crosses into the host's SQLite.
    std::panic::catch_unwind(|| unsafe { tq::outbox::load_extension(db, error, api) })
        .unwrap_or(ffi::SQLITE_ERROR)
}
