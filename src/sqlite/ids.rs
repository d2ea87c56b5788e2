//! Task ids: given in order, each one more than the last, and never given
//! twice, even once the task that had it is deleted.
//!
//! SQLite's `AUTOINCREMENT` keeps that promise by writing the last id given
//! to `sqlite_sequence` on every insert: one more page in every push's
//! commit, and about a fifth of a push's time at `normal` durability. tq
//! instead gives one more than the largest id in the table, which can only
//! repeat an id once the task with the largest id is deleted. So every
//! write transaction notes the largest task id it deleted, and before its
//! next push and before it commits, if that id is above every id left in
//! the table, it raises the floor kept in `tq_meta` (key `task_id_floor`)
//! to it; a push takes the next id above both. The floor is written only
//! by a transaction that deletes the newest task. A finish in the application's own transaction
//! ([`crate::outbox`]), on a connection tq does not watch, compares the
//! newest id before and after instead.

use std::cell::Cell;

use rusqlite::config::DbConfig;
use rusqlite::hooks::Action;
use rusqlite::Connection;

use crate::error::Result;

/// The id of the task a push stores: one more than the largest id in the
/// table and than the floor. A macro, for `concat!`.
macro_rules! next_task_id {
    () => {
        "max(coalesce((SELECT max(id) FROM tq_tasks), 0),
             coalesce((SELECT value FROM tq_meta WHERE key = 'task_id_floor'), 0)) + 1"
    };
}
pub(crate) use next_task_id;

thread_local! {
    /// The largest task id deleted by the write transaction this thread
    /// runs (0: none). SQLite calls the update hook on the thread running
    /// the statement, which is the one inside that transaction.
    static NEWEST_DELETED: Cell<i64> = const { Cell::new(0) };
}

/// Makes `conn` note every task it deletes (see the module's docs). Set on
/// every connection tq opens.
pub(crate) fn watch_deletes(conn: &mut Connection) -> Result<()> {
    conn.update_hook(Some(|action, _db: &str, table: &str, rowid| {
        if action == Action::SQLITE_DELETE && table == "tq_tasks" {
            NEWEST_DELETED.with(|newest| newest.set(newest.get().max(rowid)));
        }
    }))?;
    Ok(())
}

/// Forgets what an earlier transaction on this thread deleted: called as a
/// write transaction begins.
pub(crate) fn begin() {
    NEWEST_DELETED.with(|newest| newest.set(0));
}

/// Raises the floor if this transaction deleted the newest task so far:
/// called before each push (a push after the deletion in the same
/// transaction must not take the deleted id) and just before the commit.
/// The note is kept until the transaction ends, not taken: a rollback to a
/// savepoint (a failed operation of a group commit) can undo a raise made
/// inside it while the deletion, made before it, stays; the raise before
/// the commit then makes it again. A deletion undone by such a rollback
/// may raise the floor needlessly, which only skips ids.
pub(crate) fn settle_deletions(conn: &Connection) -> Result<()> {
    let deleted = NEWEST_DELETED.with(Cell::get);
    if deleted == 0 || newest(conn)?.is_some_and(|newest| newest > deleted) {
        return Ok(());
    }
    raise_floor(conn, deleted)
}

/// Runs `body`, which may delete tasks but pushes none, in a transaction
/// of a connection tq did not open and so does not watch (the
/// application's, in [`crate::outbox`]): if the newest task is gone after
/// it, raises the floor to that task's id.
pub(crate) fn deleting_unwatched<T>(
    conn: &Connection,
    body: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let before = newest(conn)?;
    let value = body()?;
    if let Some(before) = before {
        if newest(conn)?.is_none_or(|after| after < before) {
            raise_floor(conn, before)?;
        }
    }
    Ok(value)
}

/// The largest task id in the table.
fn newest(conn: &Connection) -> Result<Option<i64>> {
    Ok(conn
        .prepare_cached("SELECT max(id) FROM tq_tasks")?
        .query_row([], |row| row.get(0))?)
}

fn raise_floor(conn: &Connection, deleted: i64) -> Result<()> {
    conn.prepare_cached(
        "UPDATE tq_meta SET value = ?1 WHERE key = 'task_id_floor' AND value < ?1",
    )?
    .execute([deleted])?;
    Ok(())
}

/// The largest task id ever given in the file: 0 before the first push.
pub(crate) fn last_given(conn: &Connection) -> Result<i64> {
    let next: i64 = conn
        .prepare_cached(concat!("SELECT ", next_task_id!()))?
        .query_row([], |row| row.get(0))?;
    Ok(next - 1)
}

/// Schema version 11: moves the last id `AUTOINCREMENT` gave to the floor,
/// and drops `AUTOINCREMENT` from `tq_tasks`. SQLite cannot alter a
/// column, and copying the table would rewrite every task: the keyword is
/// removed from the table's stored definition instead, as SQLite documents
/// for changes that leave the stored rows as they are ("Making Other Kinds
/// Of Table Schema Changes"), and the schema's version is raised so that
/// every connection reads the definition again. A connection in defensive
/// mode (which some builds of SQLite set on every connection) refuses such
/// an edit: the mode is lifted for it and set back after.
pub(crate) fn drop_autoincrement(conn: &Connection) -> Result<()> {
    let defensive = conn.db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE)?;
    if defensive {
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, false)?;
    }
    let edited = edit_out_autoincrement(conn);
    if defensive {
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_DEFENSIVE, true)?;
    }
    edited
}

fn edit_out_autoincrement(conn: &Connection) -> Result<()> {
    conn.execute(
        "INSERT INTO tq_meta (key, value)
         VALUES ('task_id_floor',
                 coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'tq_tasks'), 0))
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [],
    )?;
    conn.execute("DELETE FROM sqlite_sequence WHERE name = 'tq_tasks'", [])?;
    let schema_version: i64 = conn.query_row("PRAGMA schema_version", [], |row| row.get(0))?;
    conn.pragma_update(None, "writable_schema", true)?;
    let edited = conn
        .execute(
            "UPDATE sqlite_schema SET sql = replace(sql, ' AUTOINCREMENT', '')
             WHERE type = 'table' AND name = 'tq_tasks'",
            [],
        )
        .and_then(|_| conn.pragma_update(None, "schema_version", schema_version + 1));
    let closed = conn.pragma_update(None, "writable_schema", false);
    edited?;
    closed?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::super::push::push_one;
    use super::super::{schema, write_transaction};
    use super::*;
    use crate::options::PushOptions;
    use crate::store::NewTask;

    fn push(conn: &Connection) -> i64 {
        conn.prepare_cached(concat!(
            "INSERT INTO tq_tasks (id, state, payload, created_at, run_at) VALUES (",
            next_task_id!(),
            ", 0, '1', 0, 0) RETURNING id"
        ))
        .unwrap()
        .query_row([], |row| row.get(0))
        .unwrap()
    }

    /// A new in-memory file, watched as tq watches its connections.
    fn watched_file() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        watch_deletes(&mut conn).unwrap();
        in_transaction(&conn, schema::migrate);
        conn
    }

    fn in_transaction<T>(conn: &Connection, body: impl FnOnce(&Connection) -> Result<T>) -> T {
        let timeout = Duration::from_secs(1);
        write_transaction(conn, timeout, Instant::now() + timeout, body).unwrap()
    }

    #[test]
    fn a_task_pushed_and_deleted_in_one_transaction_keeps_its_id_from_the_next() {
        let conn = watched_file();
        let kept = in_transaction(&conn, |conn| Ok(push(conn)));
        let gone = in_transaction(&conn, |conn| {
            let id = push(conn);
            conn.execute("DELETE FROM tq_tasks WHERE id = ?1", [id])?;
            Ok(id)
        });
        assert_eq!(gone, kept + 1);
        assert_eq!(last_given(&conn).unwrap(), gone);
        assert_eq!(in_transaction(&conn, |conn| Ok(push(conn))), gone + 1);
    }

    #[test]
    fn a_push_after_the_newest_task_is_deleted_in_one_transaction_takes_a_new_id() {
        let conn = watched_file();
        let newest = in_transaction(&conn, |conn| Ok(push(conn)));
        // As a group commit may run a finish, then a push.
        let next = in_transaction(&conn, |conn| {
            conn.execute("DELETE FROM tq_tasks WHERE id = ?1", [newest])?;
            let task = NewTask::new("1", &PushOptions::new(), 0, 25);
            Ok(push_one(conn, "default", &task, &[], 0)?.id())
        });
        assert_eq!(next, newest + 1);
    }

    #[test]
    fn a_push_undone_by_its_savepoint_after_the_newest_task_is_deleted_keeps_the_id_given() {
        let conn = watched_file();
        let newest = in_transaction(&conn, |conn| Ok(push(conn)));
        // As a group commit may run a finish, then a batch whose first item
        // is stored (raising the floor) and whose second fails, so that its
        // savepoint is rolled back.
        in_transaction(&conn, |conn| {
            conn.execute("DELETE FROM tq_tasks WHERE id = ?1", [newest])?;
            conn.execute_batch("SAVEPOINT tq_write")?;
            let task = NewTask::new("1", &PushOptions::new(), 0, 25);
            push_one(conn, "default", &task, &[], 0)?;
            conn.execute_batch("ROLLBACK TO tq_write; RELEASE tq_write")?;
            Ok(())
        });
        assert_eq!(last_given(&conn).unwrap(), newest);
        assert_eq!(in_transaction(&conn, |conn| Ok(push(conn))), newest + 1);
    }

    #[test]
    fn deleting_older_tasks_leaves_the_floor_alone() {
        let conn = watched_file();
        let first = in_transaction(&conn, |conn| Ok(push(conn)));
        in_transaction(&conn, |conn| Ok(push(conn)));
        in_transaction(&conn, |conn| {
            conn.execute("DELETE FROM tq_tasks WHERE id = ?1", [first])?;
            Ok(())
        });
        let floor: i64 = conn
            .query_row(
                "SELECT value FROM tq_meta WHERE key = 'task_id_floor'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        assert_eq!(floor, 0, "written only when the newest task goes");
    }
}
