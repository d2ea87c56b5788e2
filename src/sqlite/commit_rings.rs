//! Waking the workers of other processes when the application's own
//! connection commits tasks it pushed (see [`crate::outbox`]).
//!
//! A push in the application's transaction cannot ring the wake words at
//! once: the task is not visible until that transaction commits, and does
//! not exist if it rolls back. So a push notes its queue here, keyed by
//! the connection, and SQLite's WAL hook, which runs on that connection
//! just after each commit, once the write lock is released, rings every
//! queue noted since the last commit. Its rollback hook forgets them.
//!
//! A connection has one WAL hook, which SQLite also uses for its automatic
//! checkpoints: the hook set here checkpoints as SQLite's own does, after
//! a commit leaves the WAL at the connection's `wal_autocheckpoint` pages
//! or more. Setting `wal_autocheckpoint` later replaces the hook, and
//! with it the wake-ups (waiting workers then find the tasks by their
//! one-second safety net).

use std::collections::{BTreeSet, HashMap};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use rusqlite::{ffi, Connection};

use super::page::SharedPage;
use crate::error::Result;

/// What one watched connection rings at its next commit.
struct Watched {
    /// The wake words of the connection's file: `None` where shared memory
    /// cannot be mapped (waiters then rely on their safety net).
    page: Option<SharedPage>,
    /// The queues pushed to since the last commit or rollback.
    noted: BTreeSet<String>,
    /// The connection's `wal_autocheckpoint` when it was watched.
    autocheckpoint_pages: c_int,
    /// Which [`Watch`] this is: a connection watched again is watched by
    /// the newest, and the older one dropping leaves it.
    serial: u64,
}

/// Watched connections by their handle's address. A handle is only a key
/// here, never followed: its entry goes when [`Watch`] drops, which the
/// connection's SQL functions own, so before the handle is freed.
fn watched() -> MutexGuard<'static, HashMap<usize, Watched>> {
    static WATCHED: OnceLock<Mutex<HashMap<usize, Watched>>> = OnceLock::new();
    WATCHED
        .get_or_init(Mutex::default)
        .lock()
        // Each change is one insert, removal or assignment.
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A watched connection: unwatched when dropped. Owned by the SQL
/// functions [`crate::outbox::install`] registers, which SQLite drops when
/// the connection closes.
pub(crate) struct Watch {
    handle: usize,
    serial: u64,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut watched = watched();
        if watched
            .get(&self.handle)
            .is_some_and(|watched| watched.serial == self.serial)
        {
            watched.remove(&self.handle);
        }
    }
}

/// Makes `conn`, a connection on the tq file at `path`, ring the wake
/// words at each commit for the queues [`note`]d in it.
pub(crate) fn watch(conn: &Connection, path: &str) -> Result<Arc<Watch>> {
    let autocheckpoint_pages: c_int =
        conn.query_row("PRAGMA wal_autocheckpoint", [], |row| row.get(0))?;
    // SAFETY: the handle of a live connection; the hooks take no pointer
    // they would follow (the rollback hook's argument is only a key).
    let handle = unsafe { conn.handle() };
    static SERIALS: AtomicU64 = AtomicU64::new(0);
    let serial = SERIALS.fetch_add(1, Ordering::Relaxed);
    watched().insert(
        handle as usize,
        Watched {
            page: SharedPage::open(path),
            noted: BTreeSet::new(),
            autocheckpoint_pages,
            serial,
        },
    );
    unsafe {
        ffi::sqlite3_wal_hook(handle, Some(after_commit), std::ptr::null_mut());
        ffi::sqlite3_rollback_hook(handle, Some(after_rollback), handle.cast());
    }
    Ok(Arc::new(Watch {
        handle: handle as usize,
        serial,
    }))
}

/// Notes that `conn`'s transaction pushed to, or freed a task of, `queue`:
/// rung at its commit. Nothing for a connection not watched.
pub(crate) fn note(conn: &Connection, queue: &str) {
    // SAFETY: only used as a key.
    let handle = unsafe { conn.handle() } as usize;
    if let Some(watched) = watched().get_mut(&handle) {
        if !watched.noted.contains(queue) {
            watched.noted.insert(queue.to_owned());
        }
    }
}

/// The WAL hook: SQLite calls it on the committing connection after the
/// commit, with the write lock released.
unsafe extern "C" fn after_commit(
    _: *mut c_void,
    db: *mut ffi::sqlite3,
    schema: *const c_char,
    wal_pages: c_int,
) -> c_int {
    let checkpoint = {
        let mut watched = watched();
        let Some(watched) = watched.get_mut(&(db as usize)) else {
            return ffi::SQLITE_OK;
        };
        if let Some(page) = &watched.page {
            for queue in &watched.noted {
                page.wake_words().ring(queue);
            }
        }
        watched.noted.clear();
        watched.autocheckpoint_pages > 0 && wal_pages >= watched.autocheckpoint_pages
    };
    if checkpoint {
        // What SQLite's own hook does; a checkpoint that cannot run now
        // (a reader, a writer) is tried again after a later commit.
        // SAFETY: SQLite passes the committing connection and the name of
        // the database the commit wrote, valid during the call.
        unsafe { ffi::sqlite3_wal_checkpoint(db, schema) };
    }
    ffi::SQLITE_OK
}

/// The rollback hook: what the transaction noted did not happen.
unsafe extern "C" fn after_rollback(handle: *mut c_void) {
    if let Some(watched) = watched().get_mut(&(handle as usize)) {
        watched.noted.clear();
    }
}
