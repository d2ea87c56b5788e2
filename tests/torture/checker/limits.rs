//! The checker's rules of expiries and deadlines (see the module comment
//! of checker.rs): "delivered past its limit" and "ended before its
//! limit".
//!
//! Where time is read: tq reads its clock (whole Unix milliseconds) inside
//! each call, under the write lock, so after the call's invoke record and
//! before its completion record, both stamped with the same real clock.
//! A limit given as a length counts from the push's own reading, so it
//! lies between the push's invoke millisecond plus the length and its
//! completion millisecond plus the length; a limit given as a time is that
//! time. A claim's time is at least its pull's invoke millisecond; the
//! worker's record of the delivery comes after the claim returned, and may
//! be later than the claim's time by any amount (a pause, a swap), so it
//! bounds nothing from below. Hence the rules compare only bounds the
//! history proves:
//! - a delivery surely started at or after its limit when its pull was
//!   invoked at or after the latest the limit can be;
//! - a task surely ended before its limit when no claim of its queue can
//!   have read the clock at or after the earliest the limit can be: no
//!   pull of the queue completed (or, cut short, was reaped) at or after
//!   it; or when the time the row says it ended (`finished_at`, the
//!   claim's own reading) is before that earliest. A failure ends a task
//!   for its deadline when the retry would fall at or after it, which may
//!   be before it: a fail answering dead (or of unknown outcome) accounts
//!   for that.
//!
//! A call cut short by its process's death read the clock before the
//! driver reaped the process (the `reaped` event; the `kill` event, logged
//! before the signal, bounds nothing), unless a server carries it out
//! later: on PostgreSQL nothing bounds it ([`Expect::on_server`]).
//!
//! A process whose clock a scenario shifts reads another time than the
//! real one: there a breach of either rule is counted, not reported (as
//! early redeliveries are).

use std::collections::HashMap;

use super::super::db::{Row, DEAD};
use super::super::history::{Operation, Outcome};
use super::{describe, Delivery, Expect, Report};

/// Why a claim ends a task whose expiry passed before its first delivery
/// (tq's `store.rs`), and why a claim or a failure ends one whose
/// deadline passed.
pub const EXPIRED: &str = "expired";
pub const DEADLINE_PASSED: &str = "deadline passed";

/// Where a limit can lie on tq's clock, in Unix milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub earliest: i64,
    /// `i64::MAX` when unknown: a push of unknown outcome whose process the
    /// driver did not log as reaped.
    pub latest: i64,
}

/// A task's expiry and deadline, from the fields its push logged.
#[derive(Debug, Clone, Copy, Default)]
pub struct TaskLimits {
    pub expiry: Option<Span>,
    pub deadline: Option<Span>,
}

impl TaskLimits {
    /// The limits `push` logged (`NAME_after=MS` or `NAME_at=UNIX_MS`, for
    /// `expire` and `deadline`); `reaped` bounds the clock reading of a
    /// push cut short by its process's death. (The `kill` event does not:
    /// it is logged before the signal.)
    pub fn of(push: &Operation, reaped: &HashMap<String, i64>) -> TaskLimits {
        let ended = push
            .completed
            .or_else(|| reaped.get(&push.process).copied())
            .map(|ns| ns / 1_000_000);
        let span = |name: &str| -> Option<Span> {
            if let Some(at) = push.num(&format!("{name}_at")) {
                return Some(Span {
                    earliest: at,
                    latest: at,
                });
            }
            let after = push.num(&format!("{name}_after"))?;
            Some(Span {
                earliest: push.invoked / 1_000_000 + after,
                latest: ended.map_or(i64::MAX, |ms| ms + after),
            })
        };
        TaskLimits {
            expiry: span("expire"),
            deadline: span("deadline"),
        }
    }

    /// The latest time from which delivery `attempt` may not start: the
    /// deadline, and for the first delivery the expiry too.
    fn not_after(&self, attempt: i64) -> Option<i64> {
        let expiry = self.expiry.filter(|_| attempt == 1);
        [expiry, self.deadline]
            .into_iter()
            .flatten()
            .map(|span| span.latest)
            .min()
    }
}

/// The latest each queue's claims can have read the clock (Unix ms): the
/// completion of its last pull, or the reaping of a process killed inside
/// one (never, if it was not reaped).
pub fn latest_claims(ops: &[Operation], reaped: &HashMap<String, i64>) -> HashMap<String, i64> {
    let mut latest: HashMap<String, i64> = HashMap::new();
    for pull in ops.iter().filter(|op| op.op == "pull") {
        let at = match pull.outcome {
            Outcome::Fail(_) => continue,
            _ => pull
                .completed
                .or_else(|| reaped.get(&pull.process).copied())
                .map_or(i64::MAX, |ns| ns / 1_000_000),
        };
        let queue = pull.get("queue").unwrap_or("").to_owned();
        let entry = latest.entry(queue).or_insert(i64::MIN);
        *entry = (*entry).max(at);
    }
    latest
}

/// Rule "delivered past its limit": no delivery of task `id` starts once
/// its limit has passed (see the module's comment for the bound).
pub fn check_deliveries(
    id: i64,
    list: &[Delivery],
    limits: &TaskLimits,
    expect: &Expect,
    report: &mut Report,
) {
    for delivery in list {
        let Some(not_after) = limits.not_after(delivery.attempt) else {
            continue;
        };
        let started_no_earlier = delivery.pull.invoked / 1_000_000;
        if started_no_earlier < not_after {
            let margin = not_after - started_no_earlier;
            let closest = &mut report.stats.closest_to_limit_ms;
            *closest = Some(closest.unwrap_or(i64::MAX).min(margin));
            continue;
        }
        if expect.early_redelivery_allowed {
            report.stats.limits_missed_by_shifted_clock += 1;
            continue;
        }
        report.past_limit.push(format!(
            "task {id}: delivery {} was claimed by a pull invoked {} ms after the latest its {} \
             could be ({})",
            delivery.attempt,
            started_no_earlier - not_after,
            if delivery.attempt == 1 && limits.expiry.is_some() {
                "expiry or deadline"
            } else {
                "deadline"
            },
            describe(delivery.pull)
        ));
    }
}

/// Whether `fail` (an acknowledged dead answer, or of unknown outcome) may
/// have ended its task for its deadline.
pub fn may_have_ended_for_deadline(fail: &Operation) -> bool {
    fail.op == "fail"
        && match fail.outcome {
            Outcome::Ok => fail.get("dead").is_some(),
            Outcome::Unknown => true,
            Outcome::Fail(_) => false,
        }
}

/// Rule "ended before its limit", for the rows of one task: a row dead
/// for its expiry had one and was never delivered; a row dead for its
/// deadline had one; and, unless a fail may have ended it for its
/// deadline, its limit can have passed both by the last claim of its
/// queue (from the history) and by the time tq stamped it ended (its
/// claim's reading of the clock, from the row). Counts the rows ended so.
pub fn check_rows(
    key: &str,
    rows: &[&Row],
    limits: &TaskLimits,
    latest_claim: i64,
    ended_by_fail: bool,
    expect: &Expect,
    report: &mut Report,
) {
    for row in rows.iter().filter(|row| row.state == DEAD) {
        let (limit, name) = match row.last_error.as_deref() {
            Some(EXPIRED) => {
                report.stats.expired += 1;
                (limits.expiry, "expiry")
            }
            Some(DEADLINE_PASSED) => {
                report.stats.deadline_passed += 1;
                (limits.deadline, "deadline")
            }
            _ => continue,
        };
        let breach = match limit {
            None => "it was pushed without one".to_owned(),
            Some(_) if name == "expiry" && row.attempts > 0 => {
                format!("it was delivered {} times", row.attempts)
            }
            Some(_) if name == "deadline" && ended_by_fail => continue,
            Some(span) if span.earliest > latest_claim => format!(
                "its {name} was {} ms or later, and its queue's last claim was by {} ms",
                span.earliest % 1_000_000,
                latest_claim % 1_000_000
            ),
            Some(span) if row.finished_at.is_some_and(|at| at < span.earliest) => format!(
                "its {name} was {} ms or later, and it was stamped ended at {} ms",
                span.earliest % 1_000_000,
                row.finished_at.unwrap_or_default() % 1_000_000
            ),
            Some(_) => continue,
        };
        if expect.early_redelivery_allowed {
            report.stats.limits_missed_by_shifted_clock += 1;
            continue;
        }
        report.ended_early.push(format!(
            "{key} (task {}) is dead with the last error \"{}\", but {breach}",
            row.id,
            row.last_error.as_deref().unwrap_or("")
        ));
    }
}

/// Whether a dead row's last error names a limit, so that rule "ended
/// before its limit" judges it rather than its attempts.
pub fn ended_for_limit(row: &Row) -> bool {
    matches!(row.last_error.as_deref(), Some(EXPIRED | DEADLINE_PASSED))
}
