//! The SQLite backend: one file, WAL mode, one connection per handle.
//!
//! Threads sharing a handle are ordered by the handle's mutex, not by
//! SQLite's busy loop; processes sharing a file are ordered by SQLite's
//! write lock, which tq waits for with bounded back-off (see
//! [`SqliteStore::write`]). Every write path starts with `BEGIN IMMEDIATE`,
//! so a transaction never has to upgrade a read lock (which fails at once
//! in WAL mode, whatever the busy timeout).

mod inherited;
pub(crate) mod schema;
pub(crate) mod tasks;

pub(crate) use tasks::not_held;

use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, TryLockError};
use std::thread;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

use crate::error::{Error, ErrorKind, Result};
use crate::holder::ProcessId;
use crate::options::{Durability, OpenOptions};

/// The oldest SQLite accepted: 3.7.0 to 3.51.2 have a WAL race between
/// concurrent writers and checkpointers that can corrupt the database.
const MIN_SQLITE_VERSION: i32 = 3_051_003;

/// After a checkpoint, SQLite truncates the WAL back to this size, so one
/// burst of writes does not leave a large file behind.
const JOURNAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Prepared statements kept per connection: more than tq has.
const STATEMENT_CACHE: usize = 64;

/// Longest pause between two tries for the write lock.
const MAX_BACKOFF: Duration = Duration::from_millis(20);

/// A handle looks at the WAL's size once every this many commits...
const WAL_CHECK_EVERY: u64 = 256;

/// ...and when it has grown past this (SQLite's own checkpoints, run every
/// 4 MiB of log, could not restart it because readers were always using
/// it), runs a checkpoint that waits for those readers to move on.
const WAL_RESTART_SIZE: u64 = 16 * 1024 * 1024;

/// How long that checkpoint waits for readers before giving up until the
/// next check: short, because the writer waits with it.
const WAL_RESTART_WAIT: Duration = Duration::from_millis(100);

pub(crate) struct SqliteStore {
    /// The handle's connection; `None` once closed in a child after fork.
    slot: Arc<inherited::Slot>,
    busy_timeout: Duration,
    keep_history: bool,
    /// The named queue this handle works on.
    queue: String,
    /// The database file's path as SQLite resolved it.
    path: String,
    /// The file's device and inode numbers.
    file_id: (u64, u64),
    /// This process's row in `tq_holders`, recorded by its first claim.
    holder_id: OnceLock<i64>,
    process: ProcessId,
    commits: AtomicU64,
}

impl SqliteStore {
    /// Opens (creating if needed) the queue in the SQLite file at `path`.
    ///
    /// A file that is not an SQLite database, or carries a newer tq schema,
    /// is refused before anything is written to it.
    pub(crate) fn open(path: &str, options: &OpenOptions) -> Result<SqliteStore> {
        check_sqlite_version(rusqlite::version_number())?;
        // Before connecting: a new connection would join the lock records
        // of connections copied from a parent process (see inherited.rs).
        inherited::close_inherited()?;
        let conn = connect(path, options)?;
        let resolved = conn.path().unwrap_or(path).to_owned();
        // stat(), never open(): see SQLITE-NOTES on POSIX locks.
        let metadata = std::fs::metadata(&resolved)
            .map_err(|err| Error::new(ErrorKind::Io, format!("cannot stat '{resolved}': {err}")))?;
        Ok(SqliteStore {
            slot: inherited::register(conn)?,
            busy_timeout: options.busy_timeout,
            keep_history: options.keep_history,
            queue: options.queue.clone(),
            path: resolved,
            file_id: (metadata.dev(), metadata.ino()),
            holder_id: OnceLock::new(),
            process: ProcessId::current(),
            commits: AtomicU64::new(0),
        })
    }

    /// The file's device and inode numbers: handles on one file share them.
    pub(crate) fn file_id(&self) -> (u64, u64) {
        self.file_id
    }

    /// The size of the `-wal` file (0 when there is none), read with
    /// `stat()`.
    fn wal_file_size(&self) -> Result<u64> {
        match std::fs::metadata(format!("{}-wal", self.path)) {
            Ok(metadata) => Ok(metadata.len()),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(err) => Err(Error::new(
                ErrorKind::Io,
                format!("cannot stat the WAL of '{}': {err}", self.path),
            )),
        }
    }

    /// Keeps the WAL from growing without bound under readers that always
    /// overlap (see [`WAL_RESTART_SIZE`]). Best effort: a checkpoint that
    /// cannot finish now is tried again at a later check.
    fn wal_upkeep(&self, conn: &Connection) {
        if self.commits.fetch_add(1, Ordering::Relaxed) % WAL_CHECK_EVERY != WAL_CHECK_EVERY - 1 {
            return;
        }
        if self
            .wal_file_size()
            .map_or(true, |size| size < WAL_RESTART_SIZE)
        {
            return;
        }
        if conn.busy_timeout(WAL_RESTART_WAIT).is_ok() {
            let _ = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(()));
        }
        let _ = conn.busy_timeout(self.busy_timeout);
    }

    /// Runs `op` on the handle's connection. A panic in an earlier call may
    /// have left a transaction open; it is rolled back first so every call
    /// starts clean.
    fn with_connection<T>(&self, op: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let guard = self.slot.conn.lock().unwrap_or_else(|poisoned| {
            self.slot.conn.clear_poison();
            poisoned.into_inner()
        });
        let conn = guard.as_ref().ok_or_else(|| {
            Error::invalid_argument(
                "this handle's connection was closed in a child process after fork()",
            )
        })?;
        if !conn.is_autocommit() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        op(conn)
    }

    /// Runs `body` in one write transaction on the handle's connection
    /// (see [`write_transaction`]).
    fn write<T>(&self, body: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        self.with_connection(|conn| {
            let value = write_transaction(conn, self.busy_timeout, body)?;
            self.wal_upkeep(conn);
            Ok(value)
        })
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // A connection still locked here is mid-use by a thread that is
        // either misusing the handle or, in a child after fork(), does not
        // exist: closing it could fail half-way, so it is left open.
        if let Err(TryLockError::WouldBlock) = self.slot.conn.try_lock() {
            std::mem::forget(Arc::clone(&self.slot));
        }
    }
}

/// Runs `body` in one `BEGIN IMMEDIATE` transaction: committed when it
/// returns `Ok`, rolled back (leaving nothing behind) when it returns an
/// error or the commit fails. Only taking the write lock is retried, so
/// `body` runs at most once.
fn write_transaction<T>(
    conn: &Connection,
    busy_timeout: Duration,
    body: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    retry_busy(conn, busy_timeout, |conn| {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(())
    })?;
    let result = body(conn).and_then(|value| {
        conn.prepare_cached("COMMIT")?.execute([])?;
        Ok(value)
    });
    if result.is_err() && !conn.is_autocommit() {
        let _ = conn.execute_batch("ROLLBACK");
    }
    result
}

/// Runs `op`, trying again with growing pauses while it fails with "busy",
/// until `timeout` has passed. SQLite's own busy handler waits inside each
/// try; this loop also covers the answers it does not wait for (a WAL being
/// recovered by another connection).
fn retry_busy<T>(
    conn: &Connection,
    timeout: Duration,
    mut op: impl FnMut(&Connection) -> Result<T>,
) -> Result<T> {
    let deadline = Instant::now() + timeout;
    let mut backoff = Duration::from_millis(1);
    loop {
        match op(conn) {
            Err(err) if err.kind() == ErrorKind::Busy => {
                let now = Instant::now();
                if now >= deadline {
                    return Err(Error::new(
                        ErrorKind::Busy,
                        format!(
                            "the database stayed locked past the busy timeout ({} ms): {}",
                            timeout.as_millis(),
                            err.message()
                        ),
                    ));
                }
                thread::sleep(backoff.min(deadline - now));
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
            result => return result,
        }
    }
}

/// Opens the connection, checks the file, and sets it up and migrates it
/// when needed. Opening a current tq file writes nothing to it.
fn connect(path: &str, options: &OpenOptions) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| with_context(e.into(), &format!("cannot open '{path}'")))?;
    conn.busy_timeout(options.busy_timeout)?;
    // Room for every statement tq runs, so none is compiled twice.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // A stray pointer in the host process must not be able to write into
    // the file through a memory map.
    conn.pragma_update(None, "mmap_size", 0)?;

    // Read-only checks first: a refused file stays byte-for-byte as it was.
    let version = retry_busy(&conn, options.busy_timeout, schema::version)
        .map_err(|e| with_context(e, &format!("cannot use '{path}'")))?;
    schema::check_supported(version)?;

    retry_busy(&conn, options.busy_timeout, |conn| {
        enable_wal(conn, options.durability)
    })?;
    if version < schema::CURRENT_VERSION {
        write_transaction(&conn, options.busy_timeout, schema::migrate)?;
    }
    Ok(conn)
}

fn check_sqlite_version(version: i32) -> Result<()> {
    if version < MIN_SQLITE_VERSION {
        return Err(Error::new(
            ErrorKind::Internal,
            format!(
                "SQLite {version} is too old: tq needs 3.51.3 or later \
                 (earlier versions can corrupt a WAL database under concurrent writers)"
            ),
        ));
    }
    Ok(())
}

fn enable_wal(conn: &Connection, durability: Durability) -> Result<()> {
    let mut statement = conn.prepare("PRAGMA journal_mode = WAL")?;
    let mut rows = statement.query([])?;
    let mode: String = match rows.next()? {
        Some(row) => row.get(0)?,
        None => String::new(),
    };
    // The switch is committed when the statement runs to its end, after it
    // has answered: only stepping to the end reports a failed write.
    while rows.next()?.is_some() {}
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(Error::invalid_argument(format!(
            "tq needs a database file in WAL mode, but SQLite chose journal mode '{mode}' \
             (an in-memory or temporary database cannot hold a queue)"
        )));
    }
    let synchronous = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.pragma_update(None, "journal_size_limit", JOURNAL_SIZE_LIMIT)?;
    Ok(())
}

fn with_context(err: Error, context: &str) -> Error {
    Error::new(err.kind(), format!("{context}: {}", err.message()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_sqlite_older_than_3_51_3() {
        assert_eq!(
            check_sqlite_version(3_051_002).unwrap_err().kind(),
            ErrorKind::Internal
        );
        assert!(check_sqlite_version(3_051_003).is_ok());
        assert!(check_sqlite_version(rusqlite::version_number()).is_ok());
    }
}
