//! The writes that share a group commit (see [`crate::group`]): what each
//! asks ([`Op`]) and returns ([`Output`]), and how one runs ([`run`]).

use rusqlite::Connection;

use super::claim::claim_for;
use super::finish::{extend_lease, fail_one, finish_all, finish_and_claim, finish_with_result};
use super::push::push_all;
use super::SqliteStore;
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
pub(super) fn run(
    conn: &Connection,
    op: Op,
    holder: &mut Option<i64>,
    process: &ProcessId,
) -> Result<Output> {
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
            tasks: vec![NewTask {
                payload: "1".to_owned(),
                run_at: 0,
                delay: Some(0),
                priority: 0,
                max_attempts: 3,
                unique: None,
                after: Vec::new(),
                run_anyway: false,
                group: None,
            }],
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
