//! The checker every scenario shares: from the histories and the final
//! rows, the anomalies a queue must never show, named the way Jepsen's
//! queue checkers name them.
//!
//! A task is followed by the unique key in its payload. For each key the
//! checker counts the task's *copies*: its rows (pending, leased, done or
//! dead), plus (when finished tasks are deleted) its acknowledged
//! finishes, each of which removed one. Then:
//! - **lost**: a task whose push was acknowledged, or that was delivered,
//!   has no copy (unless a finish of unknown outcome may have removed it);
//! - **duplicated**: more than one copy (stored twice, or finished and
//!   still there), or two deliveries with one attempt number;
//! - **unexpected**: a row no push asked for, a failed push that was
//!   stored, a task stored under another id, with other bytes or in
//!   another queue, delivered through another queue's handle or past its
//!   attempts, dead before its last attempt, or a fail answering "dead"
//!   and "retry" the wrong way round;
//! - **ended twice**: two finishes of one task acknowledged, or a finish
//!   and a fail of one delivery;
//! - **stale**: a finish, fail or extend acknowledged after another
//!   delivery of the task had been handed out, or after its own delivery
//!   had ended;
//! - **resurrected**: a task delivered after its finish, or after a fail
//!   that made it dead, was acknowledged;
//! - **retried early**: a failed task delivered again before the time its
//!   fail answered;
//! - **overlapping leases**: a delivery handed out before the previous
//!   holder's lease could have run out, while that holder was alive. The
//!   lease runs from the pull for its length, or from the last
//!   acknowledged extend for the extend's length; a fail ends it;
//! - **busy**: a call answered "busy" (the busy timeout never ran out in
//!   these tests, so the caller should never see it);
//! - **errors**: any other error but "not held" (and, under network
//!   faults, "I/O": nothing committed; a call failed with "unknown
//!   outcome" is read as one cut short, which may have taken effect);
//! - **undrained**: tasks left pending or held after a drain;
//! - **delivered after cancel**: a task delivered by a pull invoked after
//!   a cancel of it returned (removed or requested);
//! - **cancel ignored**: after a cancel of a task returned, a finish, fail
//!   or extend of it accepted; a cancelled task finished, or stored in any
//!   state but cancelled (or still cancelling, unless drained); the holder
//!   of a task whose cancellation was requested not told `Cancelled` by
//!   its next call (unless a recovery or a claim may have ended the task
//!   after its lease could have run out, or a lost pull taken it from its
//!   holder before the cancel). A call told
//!   `Cancelled` with no cancel of its task invoked before it answered,
//!   and a cancel refused as of no task (or a done one) that no finish or
//!   cancel of the task invoked earlier explains, are errors;
//! - **over the rate** (when the scenario set a rate limit): more claims
//!   surely inside one window of the rate's period than it allows (see
//!   [`check_rate`]);
//! - **id given twice**: two acknowledged pushes answered with one task
//!   id (tq never gives an id again, even once its task is deleted);
//! - **over the limit** (when the scenario set a concurrency limit): more
//!   deliveries of one queue surely held at one instant than its limit,
//!   an extend accepted after its lease ran out counting as held again
//!   (see [`check_limit`]);
//! - **delivered past its limit** (for pushes that logged an expiry or a
//!   deadline): a delivery claimed by a pull invoked at or after the
//!   latest its task's deadline, or for a first delivery its expiry, can
//!   be (see limits.rs for where time is read);
//! - **ended before its limit**: a task dead with the last error "expired"
//!   or "deadline passed" though its push gave no such limit, or (expired)
//!   it was delivered, or no claim of its queue can have read the clock
//!   once the limit had passed (nor, for a deadline, a fail answered dead).
//!   Such a task is not "dead before its last attempt", and a fail may
//!   answer dead early when its task has a deadline.
//!
//! A task without history that a cancel (acknowledged, or of unknown
//! outcome) may have removed is counted cancelled, not lost. So pushed =
//! finished + dead + cancelled + remaining, for each queue.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::Path;

use tq::RateLimit;

use super::db::{Row, Target, CANCELLED, CANCELLING, DEAD, DONE, LEASED};
use super::history::{Histories, Operation, Outcome};

mod limits;

use limits::TaskLimits;

/// What a scenario allows.
#[derive(Default)]
pub struct Expect {
    /// Finished tasks are kept as done rows (a handle opened with history).
    pub keep_history: bool,
    /// A process's clock was shifted: a delivery before the previous
    /// lease's end is counted, not reported.
    pub early_redelivery_allowed: bool,
    /// The queue was drained: no task may remain pending or held.
    pub drained: bool,
    /// The connection to a PostgreSQL server was cut, stalled or ended:
    /// any call may fail with `Io` (the write was not committed) or
    /// `UnknownOutcome` (it may or may not have been), as tq documents.
    pub network_faults: bool,
    /// The rate limit of the queue every pull went to, checked on the
    /// claims.
    pub rate: Option<RateLimit>,
    /// The concurrency limit of every queue the pulls went to, checked on
    /// the deliveries surely held at once.
    pub limit: Option<usize>,
    /// The queue is on a PostgreSQL server, which may carry out a call
    /// sent by a process after the driver reaped it: the reaping bounds no
    /// call cut short (see limits.rs).
    pub on_server: bool,
}

#[derive(Default)]
pub struct Report {
    pub lost: Vec<String>,
    pub duplicated: Vec<String>,
    pub unexpected: Vec<String>,
    pub ended_twice: Vec<String>,
    pub stale: Vec<String>,
    pub resurrected: Vec<String>,
    pub retried_early: Vec<String>,
    pub overlapping: Vec<String>,
    pub busy: Vec<String>,
    pub errors: Vec<String>,
    pub undrained: Vec<String>,
    pub delivered_after_cancel: Vec<String>,
    pub cancel_ignored: Vec<String>,
    pub over_rate: Vec<String>,
    pub reused_ids: Vec<String>,
    pub over_limit: Vec<String>,
    pub past_limit: Vec<String>,
    pub ended_early: Vec<String>,
    pub stats: Stats,
    /// Per queue: tasks that existed, finished, dead, remaining.
    pub queues: BTreeMap<String, Balance>,
}

#[derive(Default, Debug)]
pub struct Stats {
    /// Pushes acknowledged, and of unknown outcome.
    pub pushed: usize,
    pub pushed_unknown: usize,
    /// Of the unknown pushes, those that took effect.
    pub pushed_unknown_stored: usize,
    pub deliveries: usize,
    pub redeliveries: usize,
    pub finished: usize,
    /// Tasks gone with only a finish of unknown outcome to explain it.
    pub finished_unknown: usize,
    /// Dead rows.
    pub dead: usize,
    /// Fails acknowledged, and of those the ones that made the task dead.
    pub failed: usize,
    pub failed_dead: usize,
    pub extended: usize,
    /// Finishes and fails refused as not held.
    pub not_held: usize,
    pub extends_refused: usize,
    pub remaining: usize,
    pub early_redeliveries: usize,
    /// Under network faults: calls failed with `Io`, and with
    /// `UnknownOutcome`.
    pub io_failures: usize,
    pub unknown_outcomes: usize,
    /// Cancels answered removed, requested, and refused (no such task, or
    /// a done one).
    pub cancels_removed: usize,
    pub cancels_requested: usize,
    pub cancels_refused: usize,
    /// Tasks gone or stored as cancelled.
    pub cancelled: usize,
    /// Finishes, fails and extends told `Cancelled`, and of them the
    /// holders' first calls after a cancel answered requested.
    pub told_cancelled: usize,
    pub holders_told: usize,
    /// The most claims surely inside one window of the rate's period.
    pub most_in_window: usize,
    /// The most deliveries of one queue surely held at one instant, when
    /// the scenario set a concurrency limit.
    pub most_held: usize,
    /// Dead rows whose last error is "expired", and "deadline passed".
    pub expired: usize,
    pub deadline_passed: usize,
    /// Deliveries past a limit, and tasks ended before one, counted rather
    /// than reported because a process's clock was shifted.
    pub limits_missed_by_shifted_clock: usize,
    /// Of the deliveries with a limit, the least time (ms) between the
    /// invoke of the pull and the latest the limit could be.
    pub closest_to_limit_ms: Option<i64>,
}

/// One queue's tasks: pushed (acknowledged, or of unknown outcome and
/// stored) = finished + dead + cancelled + remaining.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq)]
pub struct Balance {
    pub pushed: usize,
    pub finished: usize,
    pub dead: usize,
    pub cancelled: usize,
    pub remaining: usize,
}

impl Balance {
    pub fn holds(&self) -> bool {
        self.pushed == self.finished + self.dead + self.cancelled + self.remaining
    }
}

/// One delivery: a pull that returned a task.
struct Delivery<'a> {
    attempt: i64,
    pull: &'a Operation,
}

/// Calls that act on one delivery (finish, fail, extend), by task id.
type ByTask<'a> = BTreeMap<i64, Vec<&'a Operation>>;

pub fn check(histories: &Histories, rows: &[Row], expect: &Expect) -> Report {
    let mut report = Report::default();
    let kills = histories.kills();
    let reaped = if expect.on_server {
        HashMap::new()
    } else {
        histories.reaped()
    };
    let mut pushes: HashMap<&str, &Operation> = HashMap::new();
    let mut deliveries: BTreeMap<i64, Vec<Delivery>> = BTreeMap::new();
    let mut ends: ByTask = BTreeMap::new();
    let mut extends: ByTask = BTreeMap::new();
    let mut cancels: ByTask = BTreeMap::new();
    let network_ops;
    let ops = if expect.network_faults {
        network_ops = with_network_outcomes(&histories.ops, &mut report.stats);
        &network_ops
    } else {
        &histories.ops
    };

    for op in ops {
        let on_delivery = matches!(op.op.as_str(), "finish" | "fail" | "extend");
        match &op.outcome {
            Outcome::Fail(kind) if kind == "Busy" => report.busy.push(describe(op)),
            Outcome::Fail(kind) if kind == "Io" && expect.network_faults => {}
            Outcome::Fail(kind) if kind == "NotHeld" && op.op == "extend" => {
                report.stats.extends_refused += 1
            }
            Outcome::Fail(kind) if kind == "NotHeld" && on_delivery => report.stats.not_held += 1,
            // Both judged against the task's cancels (check_cancels).
            Outcome::Fail(kind) if kind == "Cancelled" && on_delivery => {
                report.stats.told_cancelled += 1
            }
            Outcome::Fail(kind) if kind == "InvalidArgument" && op.op == "cancel" => {
                report.stats.cancels_refused += 1
            }
            Outcome::Fail(_) if op.op == "push" => {} // judged with the push below
            Outcome::Fail(_) => report.errors.push(describe(op)),
            _ => {}
        }
        match op.op.as_str() {
            "push" => {
                let key = op.get("key").expect("a push names its key");
                assert!(
                    pushes.insert(key, op).is_none(),
                    "key {key} pushed twice: a harness bug"
                );
                for answer in ["duplicate", "merged"] {
                    if op.get(answer).is_some() {
                        report.unexpected.push(format!(
                            "{key} was answered as {answer}, but it has no unique key: {}",
                            describe(op)
                        ));
                    }
                }
            }
            "pull" if op.is_ok() => {
                if let Some(id) = op.num("id") {
                    let attempt = op.num("attempt").expect("a delivery has an attempt");
                    deliveries
                        .entry(id)
                        .or_default()
                        .push(Delivery { attempt, pull: op });
                }
            }
            "finish" | "fail" => ends.entry(task_of(op)).or_default().push(op),
            "extend" => extends.entry(task_of(op)).or_default().push(op),
            "cancel" => cancels.entry(task_of(op)).or_default().push(op),
            _ => {}
        }
        if op.is_ok() {
            match op.op.as_str() {
                "fail" => {
                    report.stats.failed += 1;
                    report.stats.failed_dead += usize::from(op.get("dead").is_some());
                }
                "extend" => report.stats.extended += 1,
                "cancel" if op.get("cancelled") == Some("requested") => {
                    report.stats.cancels_requested += 1
                }
                "cancel" => report.stats.cancels_removed += 1,
                _ => {}
            }
        }
    }

    check_ids(&pushes, &mut report);
    // Each task's key, from its push, its deliveries and its rows.
    let mut key_of_id: HashMap<i64, String> = HashMap::new();
    for op in pushes.values().filter(|op| op.is_ok()) {
        key_of_id.insert(
            op.num("id").expect("an acknowledged push has an id"),
            op.get("key").unwrap().to_owned(),
        );
    }
    for (id, list) in &deliveries {
        for delivery in list {
            let key = delivery.pull.get("key").unwrap_or("?");
            match key_of_id.get(id) {
                Some(known) if known != key => report.unexpected.push(format!(
                    "task {id} was pushed as {known} but delivered as {key} ({})",
                    describe(delivery.pull)
                )),
                Some(_) => {}
                None => {
                    key_of_id.insert(*id, key.to_owned());
                }
            }
        }
    }
    for row in rows {
        key_of_id.entry(row.id).or_insert_with(|| row.key.clone());
    }
    let mut ids_of_key: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (id, key) in &key_of_id {
        ids_of_key.entry(key.as_str()).or_default().push(*id);
    }
    let mut rows_of_key: BTreeMap<&str, Vec<&Row>> = BTreeMap::new();
    for row in rows {
        rows_of_key.entry(row.key.as_str()).or_default().push(row);
    }

    let mut keys: Vec<&str> = pushes
        .keys()
        .copied()
        .chain(rows_of_key.keys().copied())
        .collect();
    keys.sort();
    keys.dedup();
    let limits_of_id: HashMap<i64, TaskLimits> = key_of_id
        .iter()
        .filter_map(|(id, key)| Some((*id, TaskLimits::of(pushes.get(key.as_str())?, &reaped))))
        .collect();
    let mut index = Index {
        pushes,
        ids_of_key,
        rows_of_key,
        deliveries,
        ends,
        cancels,
        latest_claims: limits::latest_claims(ops, &reaped),
        reaped: &reaped,
    };
    for key in keys {
        check_key(key, &index, expect, &mut report);
    }
    for (id, list) in &mut index.deliveries {
        list.sort_by_key(|d| d.attempt);
        let calls = Calls {
            ends: index.ends.get(id).map_or(&[][..], Vec::as_slice),
            extends: extends.get(id).map_or(&[][..], Vec::as_slice),
        };
        let task_limits = limits_of_id.get(id);
        check_deliveries(*id, list, &calls, &kills, task_limits, expect, &mut report);
        if let Some(task_limits) = task_limits {
            limits::check_deliveries(*id, list, task_limits, expect, &mut report);
        }
        report.stats.deliveries += list.len();
        report.stats.redeliveries += list.iter().filter(|d| d.attempt > 1).count();
    }
    check_cancels(&index, &extends, ops, &mut report);
    if let Some(limit) = expect.rate {
        check_rate(ops, limit, &mut report);
    }
    if let Some(limit) = expect.limit {
        check_limit(ops, limit, &mut report);
    }
    report
}

/// Rule "id given twice": no two acknowledged pushes share an id. A task's
/// id names it for good (a `wait`, a dependency, a stored reference): tq
/// gives each push an id above every id it gave on the file, even once
/// the task holding it was deleted.
fn check_ids(pushes: &HashMap<&str, &Operation>, report: &mut Report) {
    let mut by_id: BTreeMap<i64, Vec<&Operation>> = BTreeMap::new();
    for op in pushes.values().filter(|op| op.is_ok()) {
        let id = op.num("id").expect("an acknowledged push has an id");
        by_id.entry(id).or_default().push(op);
    }
    for (id, mut given) in by_id.into_iter().filter(|(_, given)| given.len() > 1) {
        given.sort_by_key(|op| op.invoked);
        report.reused_ids.push(format!(
            "task id {id} was given to {} acknowledged pushes: {}",
            given.len(),
            given
                .iter()
                .map(|op| describe(op))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
}

/// The calls as the checker reads them under network faults: one failed
/// with `UnknownOutcome` may or may not have taken effect, as one cut short
/// by a crash, so it becomes of unknown outcome. Counts both kinds of
/// failure.
fn with_network_outcomes(ops: &[Operation], stats: &mut Stats) -> Vec<Operation> {
    ops.iter()
        .map(|op| {
            let mut op = op.clone();
            match &op.outcome {
                Outcome::Fail(kind) if kind == "Io" => stats.io_failures += 1,
                Outcome::Fail(kind) if kind == "UnknownOutcome" => {
                    stats.unknown_outcomes += 1;
                    op.outcome = Outcome::Unknown;
                }
                _ => {}
            }
            op
        })
        .collect()
}

fn task_of(op: &Operation) -> i64 {
    op.num("id").expect("a call on a delivery names its task")
}

fn attempt_of(op: &Operation) -> i64 {
    op.num("attempt")
        .expect("a call on a delivery names its attempt")
}

/// The histories and rows, indexed by key and by task id.
struct Index<'a> {
    pushes: HashMap<&'a str, &'a Operation>,
    ids_of_key: BTreeMap<&'a str, Vec<i64>>,
    rows_of_key: BTreeMap<&'a str, Vec<&'a Row>>,
    deliveries: BTreeMap<i64, Vec<Delivery<'a>>>,
    ends: ByTask<'a>,
    cancels: ByTask<'a>,
    /// The latest each queue's claims can have read the clock (Unix ms).
    latest_claims: HashMap<String, i64>,
    /// When the driver had reaped each process it killed (Unix ns).
    reaped: &'a HashMap<String, i64>,
}

fn check_key(key: &str, index: &Index, expect: &Expect, report: &mut Report) {
    let rows = index.rows_of_key.get(key).map_or(&[][..], Vec::as_slice);
    let Some(push) = index.pushes.get(key) else {
        for row in rows {
            report.unexpected.push(format!(
                "row {} with key {key}, which nobody pushed",
                row.id
            ));
        }
        return;
    };
    let queue = push.get("queue").expect("a push logs its queue");
    let ids = index.ids_of_key.get(key).map_or(&[][..], Vec::as_slice);
    let delivered: Vec<&Delivery> = ids
        .iter()
        .filter_map(|id| index.deliveries.get(id))
        .flatten()
        .collect();
    let task_ends: Vec<&Operation> = ids
        .iter()
        .filter_map(|id| index.ends.get(id))
        .flatten()
        .copied()
        .collect();
    let finishes = || task_ends.iter().filter(|op| op.op == "finish");
    let finished = finishes().filter(|op| op.is_ok()).count();
    let finish_unknown = finishes().any(|op| op.outcome == Outcome::Unknown);
    let failed_dead = task_ends
        .iter()
        .find(|op| op.op == "fail" && op.is_ok() && op.get("dead").is_some());
    let live = rows.iter().filter(|row| row.is_live()).count();
    let dead = rows.iter().filter(|row| row.state == DEAD).count();
    let done = rows.iter().filter(|row| row.state == DONE).count();
    let stored_cancelled = rows.iter().filter(|row| row.state == CANCELLED).count();
    let task_cancels: Vec<&Operation> = ids
        .iter()
        .filter_map(|id| index.cancels.get(id))
        .flatten()
        .copied()
        .collect();
    let cancel_answered = task_cancels.iter().find(|op| op.is_ok());
    let cancel_maybe = task_cancels.iter().any(|op| may_have_taken_effect(op));
    // Without history a finish deletes the row: it stands for the copy.
    let copies = rows.len() + if expect.keep_history { 0 } else { finished };

    // The bytes and the queue: what was stored and delivered is what was
    // pushed, where it was pushed.
    let sum: u64 = push
        .get("sum")
        .and_then(|s| s.parse().ok())
        .expect("a push logs its checksum");
    if let Some(id) = push.num("id") {
        for row in rows.iter().filter(|row| row.id != id) {
            report.unexpected.push(format!(
                "{key} was acknowledged as task {id} but stored as task {}",
                row.id
            ));
        }
    }
    for row in rows {
        if row.sum != sum {
            report.unexpected.push(format!(
                "task {} ({key}) is stored with other bytes than pushed",
                row.id
            ));
        }
        if row.queue != queue {
            report.unexpected.push(format!(
                "task {} ({key}) was pushed to queue {queue} but is stored in queue {}",
                row.id, row.queue
            ));
        }
        if row.state == DEAD && row.attempts != row.max_attempts && !limits::ended_for_limit(row) {
            report.unexpected.push(format!(
                "task {} ({key}) is dead after {} of its {} attempts",
                row.id, row.attempts, row.max_attempts
            ));
        }
    }
    for delivery in &delivered {
        if delivery.pull.get("sum").and_then(|s| s.parse().ok()) != Some(sum) {
            report.unexpected.push(format!(
                "{key} was delivered with other bytes: {}",
                describe(delivery.pull)
            ));
        }
        if delivery.pull.get("queue") != Some(queue) {
            report.unexpected.push(format!(
                "{key} was pushed to queue {queue} but delivered through another queue's handle: {}",
                describe(delivery.pull)
            ));
        }
    }

    let existed = push.is_ok() || !delivered.is_empty() || copies > 0;
    match &push.outcome {
        Outcome::Ok => report.stats.pushed += 1,
        Outcome::Unknown => {
            report.stats.pushed_unknown += 1;
            if existed {
                report.stats.pushed_unknown_stored += 1;
            }
        }
        Outcome::Fail(kind) => {
            // A failed commit may have reached the disk (README: "present
            // at most once"); any other failure stores nothing. On
            // PostgreSQL, `Io` says the commit was never sent.
            let allowed = if kind == "Io" && !expect.network_faults {
                1
            } else {
                0
            };
            if copies > allowed || !delivered.is_empty() {
                report.unexpected.push(format!(
                    "{key}: the push failed ({kind}) but the task was stored"
                ));
            }
            return;
        }
    }
    limits::check_rows(
        key,
        rows,
        &TaskLimits::of(push, index.reaped),
        index.latest_claims.get(queue).copied().unwrap_or(i64::MIN),
        task_ends
            .iter()
            .any(|op| limits::may_have_ended_for_deadline(op)),
        expect,
        report,
    );
    if finished > 1 {
        report
            .ended_twice
            .push(format!("{key}: {finished} finishes acknowledged"));
    }
    // Without history, a finish of unknown outcome may have deleted the
    // task, and so may a cancel, acknowledged or not; with history they
    // would have left a done or a cancelled row. A cancel acknowledged says
    // no finish took effect (the task would have been gone, or done).
    let gone_by_unknown_finish =
        finish_unknown && !expect.keep_history && cancel_answered.is_none();
    let gone_by_cancel = cancel_maybe && !expect.keep_history && !gone_by_unknown_finish;
    if copies == 0 && existed && !gone_by_unknown_finish && !gone_by_cancel {
        let why = if push.is_ok() {
            "acknowledged"
        } else {
            "delivered"
        };
        report.lost.push(format!(
            "{key} ({why}, task {:?}) is gone without a finish",
            push.num("id")
        ));
    }
    if copies > 1 {
        report.duplicated.push(format!(
            "{key}: {live} live rows, {dead} dead rows, {done} done rows, {finished} finishes acknowledged"
        ));
    }
    if done > 0 && finished == 0 && !finish_unknown {
        report
            .unexpected
            .push(format!("{key} is done, but no finish was called"));
    }
    for row in rows
        .iter()
        .filter(|row| matches!(row.state, CANCELLED | CANCELLING))
    {
        if !cancel_maybe {
            report.unexpected.push(format!(
                "{key} (task {}) is stored in state {}, but no cancel of it took effect",
                row.id, row.state
            ));
        }
    }
    if let Some(cancel) = cancel_answered {
        if finished > 0 {
            report.cancel_ignored.push(format!(
                "{key} was cancelled ({}), yet {finished} finishes of it were acknowledged",
                describe(cancel)
            ));
        }
        for row in rows
            .iter()
            .filter(|row| !matches!(row.state, CANCELLED | CANCELLING))
        {
            report.cancel_ignored.push(format!(
                "{key} was cancelled ({}), yet task {} is stored in state {}",
                describe(cancel),
                row.id,
                row.state
            ));
        }
    }
    if let Some(fail) = failed_dead {
        let ended = |row: &&&Row| row.state == DEAD || (row.state == CANCELLED && cancel_maybe);
        if let Some(row) = rows.iter().find(|row| !ended(row)) {
            report.unexpected.push(format!(
                "{key} was failed for good ({}), but is stored in state {}",
                describe(fail),
                row.state
            ));
        }
    }
    if copies == 0 && existed && gone_by_unknown_finish {
        report.stats.finished_unknown += 1;
    }
    let cancelled = stored_cancelled + usize::from(copies == 0 && existed && gone_by_cancel);
    report.stats.cancelled += cancelled;
    report.stats.finished += finished;
    report.stats.dead += dead;
    report.stats.remaining += live;
    if existed {
        let balance = report.queues.entry(queue.to_owned()).or_default();
        balance.pushed += 1;
        balance.finished += if expect.keep_history {
            done
        } else {
            finished + usize::from(copies == 0 && gone_by_unknown_finish)
        };
        balance.dead += dead;
        balance.cancelled += cancelled;
        balance.remaining += live;
    }
    if expect.drained {
        for row in rows.iter().filter(|row| row.is_live()) {
            let state = match row.state {
                LEASED => "held",
                CANCELLING => "held, its cancellation waiting",
                _ => "pending",
            };
            report
                .undrained
                .push(format!("{key} (task {}) is still {state}", row.id));
        }
    }
}

/// The calls on one task's deliveries.
struct Calls<'a> {
    /// Finishes and fails.
    ends: &'a [&'a Operation],
    extends: &'a [&'a Operation],
}

fn check_deliveries(
    id: i64,
    list: &[Delivery],
    calls: &Calls,
    kills: &HashMap<String, i64>,
    limits: Option<&TaskLimits>,
    expect: &Expect,
    report: &mut Report,
) {
    let accepted_ends = |attempt: i64| {
        calls
            .ends
            .iter()
            .filter(move |op| op.is_ok() && attempt_of(op) == attempt)
    };
    for delivery in list {
        if let Some(max) = delivery.pull.num("max") {
            if delivery.attempt > max {
                report.unexpected.push(format!(
                    "task {id} was delivered past its {max} attempts: {}",
                    describe(delivery.pull)
                ));
            }
        }
        let ended: Vec<_> = accepted_ends(delivery.attempt).collect();
        if ended.len() > 1 {
            report.ended_twice.push(format!(
                "task {id}: delivery {} was ended {} times: {}",
                delivery.attempt,
                ended.len(),
                ended
                    .iter()
                    .map(|op| describe(op))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for fail in ended.iter().filter(|op| op.op == "fail") {
            let Some(max) = delivery.pull.num("max") else {
                continue;
            };
            let last = delivery.attempt >= max;
            let dead = fail.get("dead").is_some();
            // A retry that would fall at or after the deadline ends the task.
            let dead_early = dead && limits.is_some_and(|l| l.deadline.is_some());
            if dead != last && !dead_early {
                report.unexpected.push(format!(
                    "task {id}: the fail of attempt {} of {max} answered {}",
                    delivery.attempt,
                    if last { "a retry" } else { "dead" }
                ));
            }
        }
    }
    for pair in list.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.attempt == b.attempt {
            report.duplicated.push(format!(
                "task {id}: two deliveries with attempt {}: {} and {}",
                a.attempt,
                describe(a.pull),
                describe(b.pull)
            ));
            continue;
        }
        let a_end_ms = lease_end_ms(a, calls);
        let b_claimed_ms = b.pull.completed.expect("a delivery completed") / 1_000_000;
        let holder_dead = kills
            .get(&a.pull.process)
            .is_some_and(|&t| t < b.pull.completed.unwrap());
        if b_claimed_ms < a_end_ms && !holder_dead {
            if expect.early_redelivery_allowed {
                report.stats.early_redeliveries += 1;
            } else {
                report.overlapping.push(format!(
                    "task {id}: attempt {} was handed out {} ms before attempt {}'s lease ended ({} then {})",
                    b.attempt,
                    a_end_ms - b_claimed_ms,
                    a.attempt,
                    describe(a.pull),
                    describe(b.pull)
                ));
            }
        }
        // tq makes a failed task ready at the time its fail answered: a
        // claim reads the clock no later than the pull's completion.
        for fail in accepted_ends(a.attempt).filter(|op| op.op == "fail") {
            if let Some(retry_at) = fail.num("retry_at") {
                if b_claimed_ms < retry_at {
                    report.retried_early.push(format!(
                        "task {id}: attempt {} came {} ms before the retry time its fail answered ({} then {})",
                        b.attempt,
                        retry_at - b_claimed_ms,
                        describe(fail),
                        describe(b.pull)
                    ));
                }
            }
        }
    }
    let accepted = calls
        .ends
        .iter()
        .chain(calls.extends)
        .filter(|op| op.is_ok());
    for call in accepted {
        let attempt = attempt_of(call);
        for later in list.iter().filter(|d| d.attempt > attempt) {
            if later.pull.completed.unwrap() < call.invoked {
                report.stale.push(format!(
                    "task {id}: attempt {attempt}'s {} was accepted after attempt {} was handed out ({} then {})",
                    call.op,
                    later.attempt,
                    describe(later.pull),
                    describe(call)
                ));
            }
        }
        for end in accepted_ends(attempt) {
            if end.completed.unwrap() < call.invoked {
                report.stale.push(format!(
                    "task {id}: attempt {attempt}'s {} was accepted after the delivery ended ({} then {})",
                    call.op,
                    describe(end),
                    describe(call)
                ));
            }
        }
    }
    let terminal = calls
        .ends
        .iter()
        .filter(|op| op.is_ok() && (op.op == "finish" || op.get("dead").is_some()));
    for end in terminal {
        for delivery in list
            .iter()
            .filter(|d| d.pull.invoked > end.completed.unwrap())
        {
            report.resurrected.push(format!(
                "task {id} was delivered again after its {}: {} then {}",
                if end.op == "finish" {
                    "finish"
                } else {
                    "fail for good"
                },
                describe(end),
                describe(delivery.pull)
            ));
        }
    }
}

/// The rules of cancellation (see the module's comment), task by task:
/// its cancels' answers against its deliveries and the calls on them.
fn check_cancels(index: &Index, extends: &ByTask, ops: &[Operation], report: &mut Report) {
    let none: &[&Operation] = &[];
    let ids: BTreeSet<i64> = index
        .cancels
        .keys()
        .chain(index.ends.keys())
        .chain(extends.keys())
        .copied()
        .collect();
    for id in ids {
        let cancels = index.cancels.get(&id).map_or(none, Vec::as_slice);
        let ends = index.ends.get(&id).map_or(none, Vec::as_slice);
        let task_extends = extends.get(&id).map_or(none, Vec::as_slice);
        let calls = Calls {
            ends,
            extends: task_extends,
        };
        let on_delivery: Vec<&Operation> = ends.iter().chain(task_extends).copied().collect();
        for told in on_delivery.iter().filter(|op| op.failed_with("Cancelled")) {
            let asked = cancels.iter().any(|cancel| {
                may_have_taken_effect(cancel) && cancel.invoked < told.completed.unwrap()
            });
            if !asked {
                report.errors.push(format!(
                    "task {id}: {} was told Cancelled, but no cancel of the task was invoked before",
                    describe(told)
                ));
            }
        }
        for refused in cancels
            .iter()
            .filter(|op| op.failed_with("InvalidArgument"))
        {
            let before = |op: &Operation| {
                may_have_taken_effect(op) && op.invoked < refused.completed.unwrap()
            };
            let finished = ends.iter().any(|op| op.op == "finish" && before(op));
            let cancelled = cancels.iter().any(|op| before(op));
            if !finished && !cancelled {
                report.errors.push(format!(
                    "task {id}: {} was refused, but no finish or cancel of the task was invoked before",
                    describe(refused)
                ));
            }
        }
        // The first cancel to return is the one every later call must heed.
        let Some(cancel) = cancels
            .iter()
            .filter(|op| op.is_ok())
            .min_by_key(|op| op.completed)
        else {
            continue;
        };
        let returned = cancel.completed.unwrap();
        let deliveries = index.deliveries.get(&id).map_or(&[][..], Vec::as_slice);
        for delivery in deliveries.iter().filter(|d| d.pull.invoked > returned) {
            report.delivered_after_cancel.push(format!(
                "task {id} was delivered by a pull invoked after its cancel returned: {} then {}",
                describe(cancel),
                describe(delivery.pull)
            ));
        }
        for call in on_delivery
            .iter()
            .filter(|op| op.is_ok() && op.invoked > returned)
        {
            report.cancel_ignored.push(format!(
                "task {id}: a {} was accepted after its cancel returned: {} then {}",
                call.op,
                describe(cancel),
                describe(call)
            ));
        }
        let requested = cancels
            .iter()
            .filter(|op| op.is_ok() && op.get("cancelled") == Some("requested"))
            .min_by_key(|op| op.completed);
        // The holder: the last delivery, none coming after a cancel.
        if let (Some(cancel), Some(holder)) = (requested, deliveries.last()) {
            check_holder_told(id, cancel, holder, &calls, ops, report);
        }
    }
}

/// Whether `op` is acknowledged or of unknown outcome.
fn may_have_taken_effect(op: &Operation) -> bool {
    !matches!(op.outcome, Outcome::Fail(_))
}

/// The holder of task `id` when `cancel` answered that its cancellation
/// was requested is told so (`Cancelled`) by its first call invoked after
/// that answer, unless it was told by a call that overlapped the cancel,
/// or the task may have been taken from it: by a recovery or a claim (a
/// pull of any queue, delivering or not: a claim ends a cancelled task
/// whose lease ran out) that can have read the clock once its lease could
/// have run out, or, before the cancel, by a pull lost with its process
/// (whose delivery the cancel then found).
fn check_holder_told(
    id: i64,
    cancel: &Operation,
    holder: &Delivery,
    calls: &Calls,
    ops: &[Operation],
    report: &mut Report,
) {
    let returned = cancel.completed.unwrap();
    let mut of_holder: Vec<&&Operation> = calls
        .ends
        .iter()
        .chain(calls.extends)
        .filter(|op| attempt_of(op) == holder.attempt)
        .collect();
    of_holder.sort_by_key(|op| op.invoked);
    let Some(first) = of_holder.iter().find(|op| op.invoked > returned) else {
        return;
    };
    if first.failed_with("Cancelled") {
        report.stats.holders_told += 1;
        return;
    }
    if !first.failed_with("NotHeld") {
        return; // Accepted (reported), of unknown outcome, or an error.
    }
    let told_before = of_holder
        .iter()
        .any(|op| op.failed_with("Cancelled") && op.invoked <= returned);
    let lease_end = lease_end_ms(holder, calls);
    let ended_after_lease = |op: &Operation| {
        op.invoked < first.completed.unwrap()
            && op.completed.map_or(i64::MAX, |at| at / 1_000_000) >= lease_end
    };
    let taken = ops.iter().any(|op| match (op.op.as_str(), &op.outcome) {
        ("recover" | "pull", Outcome::Ok | Outcome::Unknown) if ended_after_lease(op) => true,
        ("pull", Outcome::Unknown) => op.invoked < returned && lease_end <= returned / 1_000_000,
        _ => false,
    });
    if !told_before && !taken {
        report.cancel_ignored.push(format!(
            "task {id}: its holder was told NotHeld, not Cancelled, by its first call after its \
             cancel returned requested: {} then {} (delivered by {})",
            describe(cancel),
            describe(first),
            describe(holder.pull)
        ));
    }
}

/// Rule "over the rate": the claims surely inside one window of the rate's
/// period, against its limit (see control.rs for why this is sound). A
/// claim reads tq's clock, whole milliseconds, between its pull's invoke
/// and its completion: it lies between their milliseconds. A window from
/// the earliest instant a claim can have happened (its invoke) holds every
/// claim whose pull was invoked in it and completed before it ended.
fn check_rate(ops: &[Operation], limit: RateLimit, report: &mut Report) {
    let period = limit.per.as_millis() as i64;
    let mut claims: Vec<(i64, i64, &Operation)> = ops
        .iter()
        .filter(|op| op.op == "pull" && op.is_ok() && op.num("id").is_some())
        .map(|op| {
            let completed = op.completed.expect("an acknowledged pull completed");
            (op.invoked / 1_000_000, completed / 1_000_000, op)
        })
        .collect();
    claims.sort_by_key(|&(earliest, latest, _)| (earliest, latest));
    let allowed = limit.claims as usize;
    let mut most = 0;
    for (first, &(start, _, _)) in claims.iter().enumerate() {
        if first > 0 && claims[first - 1].0 == start {
            continue;
        }
        let end = start + period;
        let inside: Vec<&Operation> = claims[first..]
            .iter()
            .take_while(|&&(earliest, _, _)| earliest < end)
            .filter(|&&(_, latest, _)| latest < end)
            .map(|&(_, _, op)| op)
            .collect();
        most = most.max(inside.len());
        if inside.len() > allowed {
            let listed: Vec<String> = inside
                .iter()
                .take(allowed + 1)
                .map(|op| describe(op))
                .collect();
            report.over_rate.push(format!(
                "{} claims surely inside the {period} ms from {} ms, where the rate allows {allowed}: {}{}",
                inside.len(),
                start % 1_000_000,
                listed.join(", "),
                if inside.len() > allowed + 1 { ", ..." } else { "" }
            ));
        }
    }
    report.stats.most_in_window = most;
}

/// Rule "over the limit": at no instant more deliveries of one queue
/// surely held than its concurrency limit. A delivery is surely held from
/// its pull's answer until the earliest its lease can have run out (the
/// millisecond of the pull's invoke plus its lease: tq reads its clock
/// after the invoke), and again from the answer of each extend accepted
/// until that extend's invoke millisecond plus its lease, an extend
/// accepted after the lease ran out reviving it; the invoke of a finish
/// or fail of the delivery (accepted or not) ends it. Every interval so
/// counted lies inside the lease tq gave, so more of them at once than
/// the limit is a queue over its limit. A killed holder's lease holds
/// its slot until it can have run out too.
fn check_limit(ops: &[Operation], limit: usize, report: &mut Report) {
    let key = |op: &Operation| (task_of(op), attempt_of(op));
    fn ms(op: &Operation) -> i64 {
        (op.invoked / 1_000_000 + op.num("lease").expect("a pull or extend logs its lease"))
            * 1_000_000
    }
    let mut cut: HashMap<(i64, i64), i64> = HashMap::new();
    let mut extended: HashMap<(i64, i64), Vec<&Operation>> = HashMap::new();
    for op in ops {
        match op.op.as_str() {
            "finish" | "fail" => {
                let at = cut.entry(key(op)).or_insert(i64::MAX);
                *at = (*at).min(op.invoked);
            }
            "extend" if op.is_ok() => extended.entry(key(op)).or_default().push(op),
            _ => {}
        }
    }
    // Per queue: (instant, +1 or -1, the call that made the delivery held).
    let mut changes: BTreeMap<&str, Vec<(i64, i32, &Operation)>> = BTreeMap::new();
    for pull in ops
        .iter()
        .filter(|op| op.op == "pull" && op.is_ok() && op.num("id").is_some())
    {
        let delivery = key(pull);
        let end = cut.get(&delivery).copied().unwrap_or(i64::MAX);
        let mut spans = vec![(
            pull.completed.expect("a delivery completed"),
            ms(pull),
            pull,
        )];
        for extend in extended.get(&delivery).map_or(&[][..], Vec::as_slice) {
            let from = extend.completed.expect("an accepted extend completed");
            spans.push((from, ms(extend), *extend));
        }
        spans.sort_by_key(|&(from, to, _)| (from, to));
        // Merged, so that a delivery counts once at any instant.
        let mut merged: Vec<(i64, i64, &Operation)> = Vec::new();
        for (from, to, by) in spans {
            let to = to.min(end);
            if to <= from {
                continue;
            }
            match merged.last_mut() {
                Some(last) if from <= last.1 => last.1 = last.1.max(to),
                _ => merged.push((from, to, by)),
            }
        }
        let list = changes.entry(pull.get("queue").unwrap_or("")).or_default();
        for (from, to, by) in merged {
            list.push((from, 1, by));
            list.push((to, -1, by));
        }
    }
    let mut most = 0;
    for (queue, mut list) in changes {
        // At one instant, ends before starts: a slot freed may be taken at once.
        list.sort_by_key(|&(at, change, _)| (at, change));
        let mut held: Vec<&Operation> = Vec::new();
        for (at, change, by) in list {
            if change < 0 {
                if let Some(i) = held.iter().position(|op| std::ptr::eq(*op, by)) {
                    held.swap_remove(i);
                }
                continue;
            }
            held.push(by);
            most = most.max(held.len());
            if held.len() > limit && report.over_limit.len() < 20 {
                let mut calls: Vec<String> = held.iter().map(|op| describe(op)).collect();
                calls.sort();
                report.over_limit.push(format!(
                    "{} deliveries of queue {queue} surely held at {} ms, where its limit is {limit}, \
                     each since its pull or a later extend (after its lease could have run out): {}",
                    held.len(),
                    at / 1_000_000 % 1_000_000,
                    calls.join(", ")
                ));
            }
        }
    }
    report.stats.most_held = most;
}

/// The earliest time (Unix ms) delivery `a`'s lease can have ended. tq
/// reads the wall clock in milliseconds after each call's invoke record:
/// a lease ends no earlier than the invoke of the call that set it plus
/// its length. The last acknowledged extend sets it; an extend of unknown
/// outcome after that may have set it too; an acknowledged fail ended it,
/// and one of unknown outcome may have.
fn lease_end_ms(a: &Delivery, calls: &Calls) -> i64 {
    let set_by = |op: &Operation| {
        op.invoked / 1_000_000 + op.num("lease").expect("a pull or extend logs its lease")
    };
    let mut end = set_by(a.pull);
    let mut extends: Vec<&&Operation> = calls
        .extends
        .iter()
        .filter(|op| attempt_of(op) == a.attempt)
        .collect();
    extends.sort_by_key(|op| op.invoked);
    for extend in extends {
        match extend.outcome {
            Outcome::Ok => end = set_by(extend),
            Outcome::Unknown => end = end.min(set_by(extend)),
            Outcome::Fail(_) => {}
        }
    }
    for fail in calls.ends.iter().filter(|op| {
        op.op == "fail" && !matches!(op.outcome, Outcome::Fail(_)) && attempt_of(op) == a.attempt
    }) {
        end = end.min(fail.invoked / 1_000_000);
    }
    end
}

fn describe(op: &Operation) -> String {
    let outcome = match &op.outcome {
        Outcome::Ok => "ok".to_owned(),
        Outcome::Fail(kind) => format!("failed {kind}"),
        Outcome::Unknown => "unknown".to_owned(),
    };
    let mut fields: Vec<String> = [
        "id",
        "attempt",
        "key",
        "lease",
        "queue",
        "dead",
        "retry_at",
        "cancelled",
    ]
    .iter()
    .filter_map(|k| op.get(k).map(|v| format!("{k}={v}")))
    .collect();
    fields.sort();
    format!(
        "{} {} [{}] by {} at {} ms",
        op.op,
        outcome,
        fields.join(" "),
        op.process,
        op.invoked / 1_000_000 % 1_000_000
    )
}

impl Report {
    fn violations(&self) -> [(&'static str, &Vec<String>); 18] {
        [
            // First: one id given twice confuses every rule that follows
            // a task by its id.
            ("id given twice", &self.reused_ids),
            ("lost", &self.lost),
            ("duplicated", &self.duplicated),
            ("unexpected", &self.unexpected),
            ("ended twice", &self.ended_twice),
            ("stale", &self.stale),
            ("resurrected", &self.resurrected),
            ("retried early", &self.retried_early),
            ("overlapping leases", &self.overlapping),
            ("busy", &self.busy),
            ("errors", &self.errors),
            ("undrained", &self.undrained),
            ("delivered after cancel", &self.delivered_after_cancel),
            ("cancel ignored", &self.cancel_ignored),
            ("over the rate", &self.over_rate),
            ("over the limit", &self.over_limit),
            ("delivered past its limit", &self.past_limit),
            ("ended before its limit", &self.ended_early),
        ]
    }

    pub fn is_clean(&self) -> bool {
        self.violations().iter().all(|(_, list)| list.is_empty())
    }

    /// Panics with the report unless it found nothing.
    pub fn assert_clean(&self, context: &str) {
        assert!(
            self.is_clean(),
            "{context}: the checker found anomalies\n{self}"
        );
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        writeln!(
            f,
            "pushed {} acknowledged + {} unknown ({} of them stored) = finished {} + {} gone by a finish of \
             unknown outcome + dead {} + cancelled {} + remaining {}; {} deliveries ({} redeliveries, {} early by a shifted \
             clock); {} fails accepted ({} for good); {} extends accepted, {} refused; {} finishes and fails \
             refused as not held",
            s.pushed,
            s.pushed_unknown,
            s.pushed_unknown_stored,
            s.finished,
            s.finished_unknown,
            s.dead,
            s.cancelled,
            s.remaining,
            s.deliveries,
            s.redeliveries,
            s.early_redeliveries,
            s.failed,
            s.failed_dead,
            s.extended,
            s.extends_refused,
            s.not_held
        )?;
        if s.io_failures + s.unknown_outcomes > 0 {
            writeln!(
                f,
                "calls failed by network faults: {} with Io (nothing committed), {} with \
                 UnknownOutcome (read as of unknown outcome)",
                s.io_failures, s.unknown_outcomes
            )?;
        }
        let cancels = s.cancels_removed + s.cancels_requested + s.cancels_refused;
        if cancels > 0 {
            writeln!(
                f,
                "cancels: {} removed, {} requested, {} refused; {} tasks cancelled; {} calls told \
                 cancelled, {} of them holders' first after a requested cancel",
                s.cancels_removed,
                s.cancels_requested,
                s.cancels_refused,
                s.cancelled,
                s.told_cancelled,
                s.holders_told
            )?;
        }
        if s.most_in_window > 0 {
            writeln!(
                f,
                "at most {} claims surely inside one window of the rate",
                s.most_in_window
            )?;
        }
        if s.most_held > 0 {
            writeln!(
                f,
                "at most {} deliveries of one queue surely held at once",
                s.most_held
            )?;
        }
        if s.expired + s.deadline_passed + s.limits_missed_by_shifted_clock > 0 {
            writeln!(
                f,
                "dead for their limits: {} expired, {} past their deadline; {} deliveries past a \
                 limit or ends before one by a shifted clock; the closest pull to a limit invoked \
                 {} ms before it could be",
                s.expired,
                s.deadline_passed,
                s.limits_missed_by_shifted_clock,
                s.closest_to_limit_ms
                    .map_or_else(|| "-".to_owned(), |ms| ms.to_string())
            )?;
        }
        if self.queues.len() > 1 {
            for (queue, b) in &self.queues {
                writeln!(
                    f,
                    "  queue {queue}: pushed {} = finished {} + dead {} + cancelled {} + remaining {}",
                    b.pushed, b.finished, b.dead, b.cancelled, b.remaining
                )?;
            }
        }
        for (name, list) in self.violations() {
            if list.is_empty() {
                continue;
            }
            writeln!(f, "{name}: {}", list.len())?;
            for line in list.iter().take(10) {
                writeln!(f, "  {line}")?;
            }
            if list.len() > 10 {
                writeln!(f, "  ...")?;
            }
        }
        Ok(())
    }
}

/// The end of a run: a file passes `integrity_check` (PostgreSQL keeps
/// its own storage sound), the checker finds nothing, and the queue still
/// opens and works. Returns the histories and the report for the
/// scenario's own assertions.
pub fn verify_run(
    target: &Target,
    history_dir: &Path,
    expect: &Expect,
    context: &str,
) -> (Histories, Report) {
    if let Target::File(path) = target {
        assert_eq!(
            super::db::integrity(path),
            "ok",
            "{context}: integrity_check"
        );
    }
    let histories = Histories::read(history_dir);
    let report = check(&histories, &target.rows(), expect);
    println!("[{context}] {}", report.to_string().trim_end());
    report.assert_clean(context);
    super::roles::reopen_and_use(target)
        .unwrap_or_else(|err| panic!("{context}: the queue cannot be used after the run: {err}"));
    (histories, report)
}

/// After a drain: no task of `rows` may be left pending or held (its
/// cancellation waiting or not). Panics naming each one left.
pub fn assert_drained(rows: &[Row], context: &str) {
    let left: Vec<String> = rows
        .iter()
        .filter(|row| row.is_live())
        .map(|row| {
            let state = match row.state {
                LEASED => "held",
                CANCELLING => "held, its cancellation waiting",
                super::db::BLOCKED => "waiting for other tasks",
                _ => "pending",
            };
            format!("task {} ({}) is still {state}", row.id, row.key)
        })
        .collect();
    assert!(
        left.is_empty(),
        "{context}: the drain left {} tasks: {}{}",
        left.len(),
        left.iter().take(10).cloned().collect::<Vec<_>>().join("; "),
        if left.len() > 10 { "; ..." } else { "" }
    );
}
