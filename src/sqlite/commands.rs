//! The writes that share a group commit (see [`crate::group`]): what each
//! asks ([`Op`]) and returns ([`Output`]), how a group runs in one
//! transaction, and how a lone write is submitted to it.

use rusqlite::Connection;

use super::claim::claim_for;
use super::finish::{extend_lease, fail_one, finish_all, finish_and_claim, finish_with_result};
use super::push::push_all;
use super::{flush, SharedFile, SqliteStore};
use crate::clock::now_unix_ms;
use crate::error::{Error, ErrorKind, Result};
use crate::holder::ProcessId;
use crate::options::RetryBackoff;
use crate::store::{IfNotHeld, NewTask};
use crate::task::{Failed, Pushed, Receipt, Task};

/// A write that may share a transaction with others (see `group.rs`).
pub(crate) enum Op {
    Push {
        queue: String,
        tasks: Vec<NewTask>,
        now: i64,
    },
    Claim(ClaimArgs),
    Finish {
        queue: String,
        receipts: Vec<Receipt>,
        now: i64,
        keep_history: bool,
    },
    FinishWithResult {
        queue: String,
        receipt: Receipt,
        result: String,
        now: i64,
        keep_history: bool,
        keep_until: i64,
    },
    FinishAndClaim {
        receipts: Vec<Receipt>,
        if_not_held: IfNotHeld,
        keep_history: bool,
        claim: ClaimArgs,
    },
    Fail {
        receipt: Receipt,
        reason: String,
        now: i64,
        backoff: RetryBackoff,
        keep_history: bool,
    },
    Extend {
        receipt: Receipt,
        now: i64,
        lease_expires_at: i64,
        progress: Option<String>,
    },
}

pub(crate) struct ClaimArgs {
    pub(super) queue: String,
    pub(super) max: usize,
    /// When the pull began: the claim's time is read again once it holds
    /// the write lock ([`ClaimArgs::time_under_lock`]).
    pub(super) now: i64,
    /// The lease's length, in ms.
    pub(super) lease: i64,
    /// For the tasks waiting for an expired last attempt buried as dead.
    pub(super) keep_history: bool,
}

impl ClaimArgs {
    /// The claim's time, read inside its transaction (never before the
    /// pull began), and when the leases it gives expire: a pull that waited
    /// for the write lock stamps its rate slots and starts its leases when
    /// it claims, not when it began (see `Store::claim`).
    pub(super) fn time_under_lock(&self) -> (i64, i64) {
        let now = self.now.max(now_unix_ms());
        (now, now.saturating_add(self.lease))
    }
}

/// What an [`Op`] returns.
pub(crate) enum Output {
    Pushed(Vec<Pushed>),
    Tasks(Vec<Task>),
    Held(Vec<bool>),
    HeldAndTasks(Vec<bool>, Vec<Task>),
    Failed(Failed),
    Extended,
}

/// Runs one operation in the caller's transaction. `holder` is this
/// process's row in `tq_holders` once known; the first claim records it.
// Long: one short arm per operation, each calling the file that does it.
fn run(conn: &Connection, op: Op, holder: &mut Option<i64>, process: &ProcessId) -> Result<Output> {
    match op {
        Op::Push { queue, tasks, now } => Ok(Output::Pushed(push_all(conn, &queue, &tasks, now)?)),
        Op::Claim(args) => Ok(Output::Tasks(claim_for(conn, &args, holder, process)?)),
        Op::Finish {
            queue,
            receipts,
            now,
            keep_history,
        } => Ok(Output::Held(finish_all(
            conn,
            &queue,
            &receipts,
            now,
            keep_history,
        )?)),
        Op::FinishWithResult {
            queue,
            receipt,
            result,
            now,
            keep_history,
            keep_until,
        } => Ok(Output::Held(vec![finish_with_result(
            conn,
            &queue,
            receipt,
            &result,
            now,
            keep_history,
            keep_until,
        )?])),
        Op::FinishAndClaim {
            receipts,
            if_not_held,
            keep_history,
            claim,
        } => {
            let (held, tasks) = finish_and_claim(
                conn,
                &receipts,
                if_not_held,
                keep_history,
                &claim,
                holder,
                process,
            )?;
            Ok(Output::HeldAndTasks(held, tasks))
        }
        Op::Fail {
            receipt,
            reason,
            now,
            backoff,
            keep_history,
        } => Ok(Output::Failed(fail_one(
            conn,
            receipt,
            &reason,
            now,
            &backoff,
            keep_history,
        )?)),
        Op::Extend {
            receipt,
            now,
            lease_expires_at,
            progress,
        } => {
            extend_lease(conn, receipt, now, lease_expires_at, progress.as_deref())?;
            Ok(Output::Extended)
        }
    }
}

/// The output of an operation that returns `Output::Tasks`, and so on: a
/// mismatch is a bug.
pub(super) fn wrong_output() -> Error {
    Error::new(
        ErrorKind::Internal,
        "a write returned the wrong kind of result",
    )
}

impl SqliteStore {
    pub(super) fn claim_args(&self, max: usize, now: i64, lease: i64) -> ClaimArgs {
        ClaimArgs {
            queue: self.queue.clone(),
            max,
            now,
            lease,
            keep_history: self.keep_history,
        }
    }

    /// Runs `op` in the next group commit (see [`crate::group`]); returns once
    /// it is durable.
    pub(super) fn submit(&self, op: Op) -> Result<Output> {
        if let Some(flusher) = &self.file.flusher {
            flusher.count_in();
        }
        self.file.group.submit(
            op,
            |ops| self.file.commit_group(ops),
            |commit| self.file.durable(commit),
        )
    }
}

impl SharedFile {
    /// Runs a group of operations in one write transaction, each in a
    /// savepoint of its own, so that one that fails leaves nothing behind
    /// and does not fail the others. If the transaction cannot start or
    /// commit, or SQLite rolls it back whole, every operation gets that
    /// error. Returns the results with the commit they wait for (see
    /// [`SharedFile::durable`]).
    pub(super) fn commit_group(&self, ops: Vec<Op>) -> (Vec<Result<Output>>, flush::CommitNumber) {
        let count = ops.len();
        // Counted out once committed (before the upkeep), or when the group
        // failed.
        let mut ended = self
            .flusher
            .as_ref()
            .map(|flusher| flusher.count_out(count));
        let outcome = self.with_writer(|conn| {
            let mut holder = self.holder_id.get().copied();
            let (results, commit) =
                self.transaction(conn, |conn| self.run_ops(conn, ops, &mut holder))?;
            let commit = match &self.flusher {
                Some(flusher) if results.iter().any(found_duplicate) => flusher.read_now(),
                _ => commit,
            };
            // Only once committed: a rolled-back registration never happened.
            if let Some(id) = holder {
                let _ = self.holder_id.set(id);
            }
            if let Some(mut ended) = ended.take() {
                ended.set_next_wait(commit);
            }
            self.wal_upkeep(conn);
            Ok((results, commit))
        });
        outcome.unwrap_or_else(|err| ((0..count).map(|_| Err(err.clone())).collect(), 0))
    }

    /// Runs the operations of a group in the transaction, each of several
    /// in a savepoint of its own (see [`SharedFile::run_in_savepoint`]).
    /// A lone operation needs no savepoint: its error rolls the whole
    /// transaction back instead.
    fn run_ops(
        &self,
        conn: &Connection,
        ops: Vec<Op>,
        holder: &mut Option<i64>,
    ) -> Result<Vec<Result<Output>>> {
        let count = ops.len();
        let results = ops
            .into_iter()
            .map(|op| -> Result<Result<Output>> {
                if count == 1 {
                    return Ok(run(conn, op, holder, &self.process));
                }
                self.run_in_savepoint(conn, op, holder)
            })
            .collect::<Result<Vec<_>>>()?;
        // A lone operation's error rolls the transaction back.
        if count == 1 {
            if let Some(Err(err)) = results.first() {
                return Err(err.clone());
            }
        }
        Ok(results)
    }

    /// Runs `op` in a savepoint, so that if it fails it leaves nothing
    /// behind and the rest of the group goes on. An outer error ends the
    /// whole group: SQLite rolled the transaction back, or the savepoint
    /// itself failed.
    fn run_in_savepoint(
        &self,
        conn: &Connection,
        op: Op,
        holder: &mut Option<i64>,
    ) -> Result<Result<Output>> {
        conn.prepare_cached("SAVEPOINT tq_write")?.execute([])?;
        let holder_before = *holder;
        let result = run(conn, op, holder, &self.process);
        if let Err(err) = &result {
            // On a full disk, an I/O error, lack of memory or
            // corruption, SQLite may have rolled back the whole
            // transaction: the group ends with that error.
            if conn.is_autocommit() {
                return Err(err.clone());
            }
            conn.prepare_cached("ROLLBACK TO tq_write")?.execute([])?;
            // A registration this operation made went with it.
            *holder = holder_before;
        }
        conn.prepare_cached("RELEASE tq_write")?.execute([])?;
        Ok(result)
    }
}

/// Whether `result` tells of a task holding a unique key, which another
/// process may have committed and not yet flushed.
fn found_duplicate(result: &Result<Output>) -> bool {
    matches!(result, Ok(Output::Pushed(pushed))
        if pushed.iter().any(|push| matches!(push, Pushed::Duplicate(_) | Pushed::Merged(_))))
}

#[cfg(test)]
mod tests {
    use rusqlite::params;

    use super::*;
    use crate::options::OpenOptions;

    #[test]
    fn a_claim_rolled_back_in_a_group_leaves_no_holder_id_behind() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("q.db");
        let store = SqliteStore::open(path.to_str().unwrap(), &OpenOptions::new()).unwrap();
        let task = |queue: &str| Op::Push {
            queue: queue.to_owned(),
            tasks: vec![NewTask::ready("1")],
            now: 1,
        };
        let (pushed, _) = store
            .file
            .commit_group(vec![task("refused"), task("default")]);
        assert!(pushed.iter().all(Result::is_ok));
        // Damage from outside tq: a trigger that refuses to lease the tasks
        // of one queue, so the claim fails after this process registered.
        Connection::open(&path)
            .unwrap()
            .execute_batch(
                "CREATE TRIGGER refuse BEFORE UPDATE OF state ON tq_tasks
                 WHEN old.queue = 'refused' BEGIN SELECT RAISE(ABORT, 'refused'); END;",
            )
            .unwrap();
        let claim = |queue: &str| {
            Op::Claim(ClaimArgs {
                queue: queue.to_owned(),
                max: 1,
                now: 1,
                lease: 1000,
                keep_history: false,
            })
        };
        let (claimed, _) = store
            .file
            .commit_group(vec![claim("refused"), claim("default")]);
        assert!(claimed[0].is_err());
        let Ok(Output::Tasks(tasks)) = &claimed[1] else {
            panic!("the second claim failed");
        };
        let holder_id = *store
            .file
            .holder_id
            .get()
            .expect("the claim recorded a holder");
        let (pid, leased_by): (Option<i64>, i64) = store
            .read(|conn| {
                Ok(conn.query_row(
                    "SELECT (SELECT pid FROM tq_holders WHERE id = ?1),
                            (SELECT holder_id FROM tq_tasks WHERE id = ?2)",
                    params![holder_id, tasks[0].id()],
                    |row| Ok((row.get(0)?, row.get(1)?)),
                )?)
            })
            .unwrap();
        assert_eq!(
            pid,
            Some(std::process::id() as i64),
            "the cached holder id names this process's row"
        );
        assert_eq!(leased_by, holder_id);
    }
}
