//! Reads of tq's tables that the tq crate does not offer yet: which queues
//! a file holds, and how many tasks were ever pushed to it. Both read only,
//! on a read-only connection of their own, through the SQLite that tq is
//! built on (`tq::rusqlite`), so the process keeps one copy of SQLite.
//!
//! Open a [`Queue`](tq::Queue) on the file first: it checks that the file
//! is a tq queue file and brings its tables up to date.

use std::collections::BTreeSet;

use tq::rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::output::Failure;

/// tq's task states as stored: pending (0), leased (1), done (2), dead
/// (3) and waiting (4, pending but not yet due). Each has a partial index
/// that starts with the queue's name.
const STORED_STATES: [u8; 5] = [0, 1, 2, 3, 4];

/// A read-only look at a queue file's tables.
pub struct Peek {
    conn: Connection,
    path: String,
}

impl Peek {
    /// Opens `path` for reading.
    pub fn open(path: &str) -> Result<Peek, Failure> {
        if crate::output::is_postgres_url(path) {
            return Err(Failure::new(
                "`tq stats`, and `tq show` without --queue, read an SQLite queue file's \
                 tables directly: not available for a PostgreSQL URL (give `tq show` a --queue)",
            ));
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|err| Failure::new(format!("{path}: {err}")))?;
        Ok(Peek {
            conn,
            path: path.to_owned(),
        })
    }

    /// The names of the queues that have at least one task, sorted. Skips
    /// from name to name in each state's index, so it costs a few lookups
    /// per queue however many tasks there are.
    pub fn queue_names(&self) -> Result<Vec<String>, Failure> {
        let mut names = BTreeSet::new();
        for state in STORED_STATES {
            let sql = format!(
                "WITH RECURSIVE names(name) AS (
                     SELECT min(queue) FROM tq_tasks WHERE state = {state}
                     UNION ALL
                     SELECT (SELECT min(queue) FROM tq_tasks
                             WHERE state = {state} AND queue > names.name)
                     FROM names WHERE names.name IS NOT NULL)
                 SELECT name FROM names WHERE name IS NOT NULL"
            );
            let mut statement = self.conn.prepare(&sql).map_err(|err| self.failure(err))?;
            let rows = statement
                .query_map([], |row| row.get::<_, String>(0))
                .map_err(|err| self.failure(err))?;
            for name in rows {
                names.insert(name.map_err(|err| self.failure(err))?);
            }
        }
        Ok(names.into_iter().collect())
    }

    /// How many tasks were ever pushed to the file, in all its queues: task
    /// ids are drawn from a sequence that never goes back.
    pub fn pushed_total(&self) -> Result<u64, Failure> {
        let seq: Option<i64> = self
            .conn
            .query_row(
                "SELECT seq FROM sqlite_sequence WHERE name = 'tq_tasks'",
                [],
                |row| row.get(0),
            )
            .optional()
            .map_err(|err| self.failure(err))?;
        Ok(seq.unwrap_or(0).max(0) as u64)
    }

    fn failure(&self, err: tq::rusqlite::Error) -> Failure {
        Failure::new(format!("{}: reading tq's tables: {err}", self.path))
    }
}
