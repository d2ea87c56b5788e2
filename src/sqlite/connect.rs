//! Opening a file: connecting, checking SQLite's version and the file,
//! WAL mode, the settings of every connection, and tq's tables migrated.

use std::time::Instant;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags};

use super::{ids, page, retry_busy, schema, write_transaction};
use crate::error::{Error, ErrorKind, Result};
use crate::options::OpenOptions;

/// The oldest SQLite accepted: 3.7.0 to 3.51.2 have a WAL race between
/// concurrent writers and checkpointers that can corrupt the database.
const MIN_SQLITE_VERSION: i32 = 3_051_003;

/// After a checkpoint, SQLite truncates the WAL back to this size, so one
/// burst of writes does not leave a large file behind.
const JOURNAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Prepared statements kept per connection: more than tq has.
const STATEMENT_CACHE: usize = 64;

/// Opens the connection, checks the file, and sets it up and migrates it
/// when needed. Opening a current tq file writes nothing to it. Returns the
/// file's shared page with it, for its turns (see `turns.rs`): a process
/// opening a file that others are busy writing must not be starved out of
/// its own set-up.
pub(super) fn connect(
    path: &str,
    options: &OpenOptions,
) -> Result<(Connection, Option<page::SharedPage>)> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags)
        .map_err(|e| with_context(e.into(), &format!("cannot open '{path}'")))?;
    configure(&mut conn, options)?;
    // One busy timeout for the whole set-up, however many waits it has.
    let deadline = Instant::now() + options.busy_timeout;

    // Read-only checks first: a refused file stays byte-for-byte as it was.
    let version = retry_busy(&conn, options.busy_timeout, deadline, schema::version)
        .map_err(|e| with_context(e, &format!("cannot use '{path}'")))?;
    schema::check_supported(version)?;

    // An in-memory or temporary database has no path, and no turns: it is
    // refused below, as it cannot be put in WAL mode.
    let page = conn
        .path()
        .filter(|resolved| !resolved.is_empty())
        .and_then(page::SharedPage::open);
    // Switching a new file to WAL and migrating it are writes: they wait for
    // a turn like every other write.
    let setup_turn = (version < schema::CURRENT_VERSION)
        .then_some(page.as_ref())
        .flatten()
        .map(|page| page.turns().wait(deadline));
    retry_busy(&conn, options.busy_timeout, deadline, enable_wal)?;
    if version < schema::CURRENT_VERSION {
        // A migration that fails for any reason but the disk or a lock met
        // tables tq did not leave that way.
        write_transaction(&conn, options.busy_timeout, deadline, schema::migrate).map_err(
            |err| match err.kind() {
                ErrorKind::Io | ErrorKind::Busy | ErrorKind::NotADatabase => err,
                _ => Error::new(
                    ErrorKind::NotADatabase,
                    format!(
                        "cannot upgrade tq's tables in '{path}' from version {version}: {} \
                         (they were changed outside tq)",
                        err.message()
                    ),
                ),
            },
        )?;
    }
    drop(setup_turn);
    Ok((conn, page))
}

/// The settings of every connection tq opens.
fn configure(conn: &mut Connection, options: &OpenOptions) -> Result<()> {
    conn.busy_timeout(options.busy_timeout)?;
    ids::watch_deletes(conn)?;
    // Room for every statement tq runs, so none is compiled twice.
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // One plan per statement, whatever values are bound: otherwise SQLite
    // compiles a statement again whenever a new time is bound to a range
    // test on an indexed column, as every claim does (a third of a
    // claim's work). tq's plans never depend on the values.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    // No memory map of the file: SQLite maps it read-only (unless built
    // with SQLITE_MMAP_READWRITE), but an I/O error on a mapped page, or
    // the file truncated under the map, kills the process with SIGBUS
    // where a read() returns an error tq can report.
    conn.pragma_update(None, "mmap_size", 0)?;
    Ok(())
}

/// Opens the reading connection on a file `connect` has checked and set up.
pub(super) fn connect_reader(path: &str, options: &OpenOptions) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = Connection::open_with_flags(path, flags)
        .map_err(|e| with_context(e.into(), &format!("cannot open '{path}'")))?;
    configure(&mut conn, options)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

pub(crate) fn check_sqlite_version(version: i32) -> Result<()> {
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

pub(crate) fn enable_wal(conn: &Connection) -> Result<()> {
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
    // NORMAL at either durability: at `full`, tq flushes the WAL itself once
    // the write lock is released (see `flush.rs`; through a VFS that does
    // not allow that, the writer is set to FULL there). Checkpoints flush at
    // NORMAL as at FULL.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
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
