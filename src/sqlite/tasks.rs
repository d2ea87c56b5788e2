//! Every statement on tasks: push, claim, finish, recover, counts, purge.
//! This is where a task is claimed ([`SqliteStore::claim`]).
//!
//! States are stored as integers (0 pending, 1 leased, 2 done) and written
//! as literals in the SQL so that SQLite can use the partial index of each
//! state (see `schema.rs`).

use rusqlite::{params, Connection, OptionalExtension};

use super::SqliteStore;
use crate::error::{Error, ErrorKind, Result};
use crate::holder::{Liveness, ProcessId};
use crate::store::Store;
use crate::task::{Receipt, Task, TaskState};

/// Records `process` in `tq_holders` (once per process) and returns its row id.
fn register_holder(conn: &Connection, process: &ProcessId) -> Result<i64> {
    let id = conn
        .prepare_cached(
            "INSERT INTO tq_holders (boot_id, pid_namespace, pid, start_time)
             VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT DO UPDATE SET pid = excluded.pid
             RETURNING id",
        )?
        .query_row(
            params![
                process.boot_id,
                process.pid_namespace,
                process.pid,
                process.start_time
            ],
            |row| row.get(0),
        )?;
    Ok(id)
}

/// Puts every leased task matching `condition` back to pending. Its attempt
/// stays counted: it was claimed.
const RELEASE: &str = "UPDATE tq_tasks
    SET state = 0, lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
    WHERE state = 1 AND ";

/// The pending task due first: one lookup in the ready index, whose order
/// is the claim order.
const DUE_FIRST: &str = "SELECT run_at, id FROM tq_tasks
    WHERE state = 0 AND run_at <= ?1 ORDER BY run_at, id LIMIT 1";

/// The leased task whose lease expired first: one lookup in the lease index.
const EXPIRED_FIRST: &str = "SELECT run_at, id FROM tq_tasks
    WHERE state = 1 AND lease_expires_at <= ?1 ORDER BY lease_expires_at LIMIT 1";

/// Takes the chosen task under a new lease and counts the attempt. The
/// lease token is drawn here, so each delivery has a receipt of its own.
const TAKE: &str = "UPDATE tq_tasks
    SET state = 1, attempts = attempts + 1, lease_token = random(),
        lease_expires_at = ?2, holder_id = ?3
    WHERE id = ?1
    RETURNING id, lease_token, attempts, payload";

/// The task to deliver next, if any: of the pending task due first and the
/// leased task whose lease expired first, the older by due time, so a task
/// whose holder vanished keeps its place in line. Only that task changes
/// hands: another expired lease stays with its holder, who may still finish
/// it. (Two lookups and a comparison here run faster than one statement
/// merging them, which SQLite plans with a sort.)
fn next_ready(conn: &Connection, now: i64) -> Result<Option<i64>> {
    let candidate = |sql: &str| -> Result<Option<(i64, i64)>> {
        Ok(conn
            .prepare_cached(sql)?
            .query_row([now], |row| Ok((row.get(0)?, row.get(1)?)))
            .optional()?)
    };
    let due = candidate(DUE_FIRST)?;
    let expired = candidate(EXPIRED_FIRST)?;
    Ok(due.into_iter().chain(expired).min().map(|(_, id)| id))
}

impl Store for SqliteStore {
    fn push(&self, payload: &str, now: i64, run_at: i64) -> Result<i64> {
        self.write(|conn| {
            conn.prepare_cached(
                "INSERT INTO tq_tasks (state, payload, created_at, run_at) VALUES (0, ?1, ?2, ?3)",
            )?
            .execute(params![payload, now, run_at])?;
            Ok(conn.last_insert_rowid())
        })
    }

    fn claim(&self, now: i64, lease_expires_at: i64) -> Result<Option<Task>> {
        let (task, holder_id) = self.write(|conn| {
            // This process is recorded as a holder by its first claim, so
            // opening a queue writes nothing.
            let holder_id = match self.holder_id.get() {
                Some(&id) => id,
                None => register_holder(conn, &self.process)?,
            };
            let Some(id) = next_ready(conn, now)? else {
                return Ok((None, holder_id));
            };
            let task = conn.prepare_cached(TAKE)?.query_row(
                params![id, lease_expires_at, holder_id],
                |row| {
                    Ok(Task {
                        receipt: Receipt {
                            id: row.get(0)?,
                            token: row.get(1)?,
                        },
                        attempts: row.get(2)?,
                        payload: row.get(3)?,
                    })
                },
            )?;
            Ok((Some(task), holder_id))
        })?;
        // Only once committed: a rolled-back registration never happened.
        let _ = self.holder_id.set(holder_id);
        Ok(task)
    }

    fn finish(&self, receipt: Receipt, now: i64) -> Result<()> {
        let changed = self.write(|conn| {
            let changed = if self.keep_history {
                conn.prepare_cached(
                    "UPDATE tq_tasks
                     SET state = 2, finished_at = ?3,
                         lease_token = NULL, lease_expires_at = NULL, holder_id = NULL
                     WHERE id = ?1 AND state = 1 AND lease_token = ?2",
                )?
                .execute(params![receipt.id, receipt.token, now])?
            } else {
                conn.prepare_cached(
                    "DELETE FROM tq_tasks WHERE id = ?1 AND state = 1 AND lease_token = ?2",
                )?
                .execute(params![receipt.id, receipt.token])?
            };
            Ok(changed)
        })?;
        if changed == 0 {
            return Err(Error::new(
                ErrorKind::NotHeld,
                format!(
                    "task {} is not held by this delivery: it was already finished, \
                     or its lease was recovered or taken by another worker",
                    receipt.id
                ),
            ));
        }
        Ok(())
    }

    fn recover(&self, now: i64) -> Result<u64> {
        self.write(|conn| {
            let dead = dead_holders(conn, &self.process)?;
            let dead_json = serde_json::to_string(&dead).expect("a list of integers serializes");
            let recovered = conn
                .prepare_cached(&format!(
                    "{RELEASE} (lease_expires_at <= ?1
                                OR holder_id IN (SELECT value FROM json_each(?2)))"
                ))?
                .execute(params![now, dead_json])?;
            conn.prepare_cached(
                "DELETE FROM tq_holders WHERE id IN (SELECT value FROM json_each(?1))",
            )?
            .execute([dead_json])?;
            Ok(recovered as u64)
        })
    }

    fn count(&self, state: TaskState) -> Result<u64> {
        let sql = match state {
            TaskState::Pending => "SELECT count(*) FROM tq_tasks WHERE state = 0",
            TaskState::Leased => "SELECT count(*) FROM tq_tasks WHERE state = 1",
            TaskState::Done => "SELECT count(*) FROM tq_tasks WHERE state = 2",
        };
        let count: i64 = self.with_connection(|conn| {
            Ok(conn.prepare_cached(sql)?.query_row([], |row| row.get(0))?)
        })?;
        Ok(count as u64)
    }

    fn purge_done(&self, finished_before: i64) -> Result<u64> {
        self.write(|conn| {
            let purged = conn
                .prepare_cached("DELETE FROM tq_tasks WHERE state = 2 AND finished_at <= ?1")?
                .execute([finished_before])?;
            Ok(purged as u64)
        })
    }
}

/// The recorded holders whose process is gone.
fn dead_holders(conn: &Connection, observer: &ProcessId) -> Result<Vec<i64>> {
    let mut statement =
        conn.prepare_cached("SELECT id, boot_id, pid_namespace, pid, start_time FROM tq_holders")?;
    let holders = statement.query_map([], |row| {
        Ok((
            row.get::<_, i64>(0)?,
            ProcessId {
                boot_id: row.get(1)?,
                pid_namespace: row.get(2)?,
                pid: row.get(3)?,
                start_time: row.get(4)?,
            },
        ))
    })?;
    let mut dead = Vec::new();
    for holder in holders {
        let (id, process) = holder?;
        if process.liveness(observer) == Liveness::Dead {
            dead.push(id);
        }
    }
    Ok(dead)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The query plan of `sql` (its parameters left unbound), one line per step.
    fn plan(conn: &Connection, sql: &str) -> String {
        let mut statement = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let mut rows = statement.raw_query();
        let mut steps = Vec::new();
        while let Some(row) = rows.next().unwrap() {
            steps.push(row.get::<_, String>(3).unwrap());
        }
        steps.join("\n")
    }

    #[test]
    fn claim_recover_and_purge_are_index_lookups() {
        let conn = Connection::open_in_memory().unwrap();
        super::super::schema::migrate(&conn).unwrap();
        for (sql, index) in [
            (DUE_FIRST, "tq_tasks_ready"),
            (EXPIRED_FIRST, "tq_tasks_leased"),
            (
                &format!("{RELEASE} lease_expires_at <= 1"),
                "tq_tasks_leased",
            ),
            (
                "DELETE FROM tq_tasks WHERE state = 2 AND finished_at <= 1",
                "tq_tasks_done",
            ),
        ] {
            let plan = plan(&conn, sql);
            assert!(plan.contains(index), "{sql}: {plan}");
            assert!(!plan.contains("TEMP B-TREE"), "{sql} sorts: {plan}");
        }
        let take = plan(&conn, TAKE);
        assert!(take.contains("INTEGER PRIMARY KEY"), "{take}");
    }
}
