//! A task's time limits, its expiry and its deadline: how a push stores
//! them, why a claim ends a task past one, and how many a claim ends at
//! once. Both backends keep these rules.

use crate::error::{Error, Result};
use crate::options::TimeLimit;
use crate::store::NewTask;

/// A task's expiry or deadline: `at` on the engine's clock, and, when the
/// push gave it as a length after the push, that length, which a backend
/// with a clock of its own counts from there (as it does a delay).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limit {
    pub(crate) at: i64,
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) after: Option<i64>,
}

impl Limit {
    pub(crate) fn new(limit: TimeLimit, now: i64) -> Limit {
        match limit {
            TimeLimit::After(after) => {
                let after = after.as_millis() as i64;
                Limit {
                    at: now.saturating_add(after),
                    after: Some(after),
                }
            }
            TimeLimit::UnixMillis(at) => Limit { at, after: None },
        }
    }
}

/// Why a claim ended a task whose first delivery had not started by its
/// expiry: its `last_error` as a dead task.
pub(crate) const EXPIRED: &str = "expired";

/// Why a claim or a failure ended a task whose deadline passed before its
/// next delivery could start.
pub(crate) const DEADLINE_PASSED: &str = "deadline passed";

/// At most this many pending tasks whose expiry or deadline has passed are
/// ended per claim, so that one claim does not rewrite a large backlog in
/// one transaction; the next claim goes on, and meanwhile claims deliver
/// only the tasks within their limits. (PostgreSQL's `CLAIM` writes
/// it as a literal.)
pub(crate) const SWEEP_BATCH: usize = 1000;

/// Why a pending task whose next delivery may no longer start ends: it
/// expired if it was never delivered and its expiry (`expires_at`) has
/// passed by `now`; otherwise its deadline passed. (PostgreSQL's claim
/// states the same rule in SQL.)
pub(crate) fn limit_reason(attempts: u32, expires_at: Option<i64>, now: i64) -> &'static str {
    if attempts == 0 && expires_at.is_some_and(|at| at <= now) {
        EXPIRED
    } else {
        DEADLINE_PASSED
    }
}

/// Refuses a task that could never run: one not due at once whose expiry
/// or deadline comes no later than its run time. (A task due at once may
/// be pushed with a limit already passed: the first claim ends it.)
pub(crate) fn check_limits(task: &NewTask, now: i64) -> Result<()> {
    if task.run_at <= now {
        return Ok(());
    }
    for (limit, what) in [(task.expiry, "expiry"), (task.deadline, "deadline")] {
        if let Some(limit) = limit.filter(|limit| limit.at <= task.run_at) {
            return Err(Error::invalid_argument(format!(
                "the task's {what} ({} ms since the Unix epoch) is not after its run time \
                 ({} ms): it could never run",
                limit.at, task.run_at
            )));
        }
    }
    Ok(())
}
