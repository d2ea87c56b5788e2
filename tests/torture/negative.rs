//! The checker's own tests: each anomaly it names must be found in a
//! history or database made to show it, and a sound one must pass.
//! Otherwise a torture run that passes would prove nothing. (The power-loss
//! check has its end-to-end negative test in power_loss.rs: a disk that
//! ignores syncs.)

use rusqlite::Connection;
use tq::OpenOptions;

use super::checker::{check, Expect, Report};
use super::client::{self, checksum, payload, Client};
use super::db::{self, Row, DEAD, LEASED, READY, WAITING};
use super::harness::Dir;
use super::history::{Event, Histories, History, Operation, Outcome};
use super::model::{self, Durable, Run};

const MS: i64 = 1_000_000;

fn push(key: &str, id: i64, at_ms: i64) -> Operation {
    push_to("default", key, id, at_ms)
}

/// A push of a task that gets `max` deliveries.
fn push_max(key: &str, id: i64, max: i64) -> Operation {
    let sum = checksum(&payload(key, 0));
    Operation::new(
        "p",
        "push",
        id * MS,
        Outcome::Ok,
        &format!("key={key} sum={sum} id={id} queue=default max={max}"),
    )
}

fn push_to(queue: &str, key: &str, id: i64, at_ms: i64) -> Operation {
    let sum = checksum(&payload(key, 0));
    Operation::new(
        "p",
        "push",
        at_ms * MS,
        Outcome::Ok,
        &format!("key={key} sum={sum} id={id} queue={queue}"),
    )
}

/// A delivery of task `id` (key `k{id}`, 25 attempts, the default queue).
fn pull(process: &str, id: i64, attempt: i64, lease: i64, at_ms: i64) -> Operation {
    delivered(process, id, attempt, 25, lease, at_ms, "default")
}

fn delivered(
    process: &str,
    id: i64,
    attempt: i64,
    max: i64,
    lease: i64,
    at_ms: i64,
    queue: &str,
) -> Operation {
    let sum = checksum(&payload(&format!("k{id}"), 0));
    Operation::new(
        process,
        "pull",
        at_ms * MS,
        Outcome::Ok,
        &format!(
            "lease={lease} queue={queue} id={id} attempt={attempt} max={max} key=k{id} sum={sum}"
        ),
    )
}

fn finish(process: &str, id: i64, attempt: i64, at_ms: i64, outcome: Outcome) -> Operation {
    Operation::new(
        process,
        "finish",
        at_ms * MS,
        outcome,
        &format!("id={id} attempt={attempt}"),
    )
}

/// An accepted fail answering `answer` (`dead=1` or `retry_at=MS`).
fn fail(process: &str, id: i64, attempt: i64, at_ms: i64, answer: &str) -> Operation {
    Operation::new(
        process,
        "fail",
        at_ms * MS,
        Outcome::Ok,
        &format!("id={id} attempt={attempt} {answer}"),
    )
}

fn extend(
    process: &str,
    id: i64,
    attempt: i64,
    lease: i64,
    at_ms: i64,
    outcome: Outcome,
) -> Operation {
    Operation::new(
        process,
        "extend",
        at_ms * MS,
        outcome,
        &format!("id={id} attempt={attempt} lease={lease}"),
    )
}

/// Task `id` stored in the default queue with 25 attempts.
fn row(id: i64, state: i64, attempts: i64) -> Row {
    let key = format!("k{id}");
    Row {
        id,
        queue: "default".to_owned(),
        state,
        attempts,
        max_attempts: 25,
        last_error: None,
        finished_at: None,
        sum: checksum(&payload(&key, 0)),
        key,
    }
}

fn run(ops: Vec<Operation>, events: Vec<Event>, rows: &[Row]) -> Report {
    check(&Histories { ops, events }, rows, &Expect::default())
}

#[test]
fn a_sound_history_passes() {
    let report = run(
        vec![
            push("k1", 1, 0),
            push("k2", 2, 1),
            pull("a", 1, 1, 100, 2),
            // Attempt 1's lease ended at 102 ms: attempt 2 comes after.
            pull("b", 1, 2, 100, 150),
            finish("a", 1, 1, 160, Outcome::Fail("NotHeld".into())),
            finish("b", 1, 2, 170, Outcome::Ok),
        ],
        Vec::new(),
        &[row(2, 0, 0)],
    );
    assert!(report.is_clean(), "{report}");
    assert_eq!(
        (
            report.stats.finished,
            report.stats.remaining,
            report.stats.not_held
        ),
        (1, 1, 1)
    );
}

#[test]
fn an_acknowledged_push_missing_from_the_database_is_lost() {
    let report = run(vec![push("k1", 1, 0)], Vec::new(), &[]);
    assert_eq!(report.lost.len(), 1, "{report}");
}

#[test]
fn a_push_of_unknown_outcome_may_be_missing_but_not_doubled() {
    let unknown = Operation::new(
        "p",
        "push",
        0,
        Outcome::Unknown,
        &format!("key=k1 sum={} queue=default", checksum(&payload("k1", 0))),
    );
    assert!(run(vec![unknown.clone()], Vec::new(), &[]).is_clean());
    assert!(run(vec![unknown.clone()], Vec::new(), &[row(1, 0, 0)]).is_clean());
    let report = run(vec![unknown], Vec::new(), &[row(1, 0, 0), row(1, 0, 0)]);
    assert_eq!(report.duplicated.len(), 1, "{report}");
}

#[test]
fn a_task_stored_twice_or_never_pushed_or_with_other_bytes_is_caught() {
    let twice = run(
        vec![push("k1", 1, 0)],
        Vec::new(),
        &[row(1, 0, 0), row(1, 0, 0)],
    );
    assert_eq!(twice.duplicated.len(), 1, "{twice}");
    let stranger = run(vec![], Vec::new(), &[row(7, 0, 0)]);
    assert_eq!(stranger.unexpected.len(), 1, "{stranger}");
    let mut changed = row(1, 0, 0);
    changed.sum ^= 1;
    let report = run(vec![push("k1", 1, 0)], Vec::new(), &[changed]);
    assert_eq!(report.unexpected.len(), 1, "{report}");
}

#[test]
fn two_accepted_finishes_and_a_stale_finish_are_caught() {
    let report = run(
        vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 100, 1),
            pull("b", 1, 2, 100, 200),
            finish("a", 1, 1, 300, Outcome::Ok),
            finish("b", 1, 2, 310, Outcome::Ok),
        ],
        Vec::new(),
        &[],
    );
    assert_eq!(report.ended_twice.len(), 1, "{report}");
    assert_eq!(report.stale.len(), 1, "{report}");
}

#[test]
fn a_delivery_after_the_finish_is_a_resurrection() {
    let report = run(
        vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 100, 1),
            finish("a", 1, 1, 10, Outcome::Ok),
            pull("b", 1, 2, 100, 500),
        ],
        Vec::new(),
        &[row(1, 1, 2)],
    );
    assert_eq!(report.resurrected.len(), 1, "{report}");
}

#[test]
fn a_delivery_inside_a_live_holders_lease_overlaps_unless_the_holder_was_killed() {
    let ops = || {
        vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 1_000, 1),
            pull("b", 1, 2, 1_000, 100),
        ]
    };
    let report = run(ops(), Vec::new(), &[row(1, 1, 2)]);
    assert_eq!(report.overlapping.len(), 1, "{report}");
    let killed = vec![Event::new(50 * MS, "kill", "target=a")];
    let report = run(ops(), killed, &[row(1, 1, 2)]);
    assert!(report.is_clean(), "{report}");
}

#[test]
fn busy_and_other_errors_reaching_a_caller_are_reported() {
    let busy = Operation::new("a", "pull", 0, Outcome::Fail("Busy".into()), "lease=100");
    let io = Operation::new("a", "recover", 0, Outcome::Fail("Io".into()), "");
    let report = run(vec![busy, io], Vec::new(), &[]);
    assert_eq!((report.busy.len(), report.errors.len()), (1, 1), "{report}");
}

#[test]
fn a_fail_or_an_extend_accepted_after_another_delivery_is_stale() {
    let report = run(
        vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 100, 1),
            pull("b", 1, 2, 100, 200),
            fail("a", 1, 1, 300, "retry_at=1000"),
            extend("a", 1, 1, 100, 310, Outcome::Ok),
        ],
        Vec::new(),
        &[row(1, LEASED, 2)],
    );
    // Both came after attempt 2 was handed out; the extend also after the
    // fail had ended its delivery.
    assert_eq!(report.stale.len(), 3, "{report}");
}

#[test]
fn an_extend_or_a_finish_accepted_after_the_delivery_failed_is_stale() {
    let report = run(
        vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 100, 1),
            fail("a", 1, 1, 10, "retry_at=5000"),
            extend("a", 1, 1, 100, 20, Outcome::Ok),
            finish("a", 1, 1, 30, Outcome::Ok),
        ],
        Vec::new(),
        &[],
    );
    assert_eq!(report.stale.len(), 2, "{report}");
    assert_eq!(report.ended_twice.len(), 1, "{report}");
}

#[test]
fn an_accepted_extend_moves_the_end_of_the_lease() {
    let ops = |extended: Outcome, rival_at: i64| {
        vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 100, 0),
            // The lease now ends at 80 + 100 ms.
            extend("a", 1, 1, 100, 80, extended),
            pull("b", 1, 2, 100, rival_at),
            finish("b", 1, 2, rival_at + 5, Outcome::Ok),
            finish("a", 1, 1, 300, Outcome::Fail("NotHeld".into())),
        ]
    };
    let inside = run(ops(Outcome::Ok, 150), Vec::new(), &[]);
    assert_eq!(inside.overlapping.len(), 1, "{inside}");
    let after = run(ops(Outcome::Ok, 200), Vec::new(), &[]);
    assert!(after.is_clean(), "{after}");
    // Refused, the extend changed nothing: the lease ended at 100 ms.
    let refused = run(ops(Outcome::Fail("NotHeld".into()), 150), Vec::new(), &[]);
    assert!(refused.is_clean(), "{refused}");
    assert_eq!(refused.stats.extends_refused, 1);
}

#[test]
fn a_task_that_used_its_attempts_is_counted_dead() {
    let max = |process, attempt, at_ms| delivered(process, 1, attempt, 2, 100, at_ms, "default");
    let mut dead = row(1, DEAD, 2);
    dead.max_attempts = 2;
    let report = run(
        vec![
            push("k1", 1, 0),
            max("a", 1, 1),
            fail("a", 1, 1, 10, "retry_at=50"),
            max("b", 2, 60),
            fail("b", 1, 2, 70, "dead=1"),
        ],
        Vec::new(),
        std::slice::from_ref(&dead),
    );
    assert!(report.is_clean(), "{report}");
    assert_eq!((report.stats.dead, report.stats.failed_dead), (1, 1));
    let balance = report.queues["default"];
    assert_eq!((balance.pushed, balance.dead), (1, 1));
    assert!(balance.holds());
}

#[test]
fn dead_too_early_retried_too_early_or_delivered_past_its_attempts_is_caught() {
    let max = |process, attempt, at_ms| delivered(process, 1, attempt, 2, 100, at_ms, "default");
    let mut early = row(1, DEAD, 1);
    early.max_attempts = 2;
    let report = run(
        vec![
            push("k1", 1, 0),
            max("a", 1, 1),
            fail("a", 1, 1, 10, "dead=1"),
        ],
        Vec::new(),
        &[early],
    );
    // The fail's answer and the row both say dead after 1 of 2 attempts.
    assert_eq!(report.unexpected.len(), 2, "{report}");

    let mut waiting = row(1, WAITING, 1);
    waiting.max_attempts = 2;
    let report = run(
        vec![
            push("k1", 1, 0),
            max("a", 1, 1),
            fail("a", 1, 1, 10, "retry_at=500"),
            max("b", 2, 60),
            max("c", 3, 700),
        ],
        Vec::new(),
        &[waiting],
    );
    assert_eq!(report.retried_early.len(), 1, "{report}");
    assert_eq!(report.unexpected.len(), 1, "{report}");
}

#[test]
fn a_delivery_after_a_fail_for_good_is_a_resurrection() {
    let mut dead = row(1, DEAD, 1);
    dead.max_attempts = 1;
    let report = run(
        vec![
            push("k1", 1, 0),
            delivered("a", 1, 1, 1, 100, 1, "default"),
            fail("a", 1, 1, 10, "dead=1"),
            delivered("b", 1, 2, 1, 100, 50, "default"),
        ],
        Vec::new(),
        &[dead],
    );
    assert_eq!(report.resurrected.len(), 1, "{report}");
}

#[test]
fn a_task_stored_or_delivered_in_another_queue_is_caught() {
    let mut moved = row(1, READY, 1);
    moved.queue = "b".to_owned();
    let report = run(
        vec![
            push_to("a", "k1", 1, 0),
            delivered("w", 1, 1, 25, 100, 1, "b"),
        ],
        Vec::new(),
        &[moved],
    );
    assert_eq!(report.unexpected.len(), 2, "{report}");
}

#[test]
fn a_finish_and_pull_is_read_as_a_finish_and_a_pull() {
    let dir = Dir::new();
    let history_dir = dir.sub("history");
    let history = History::create(&history_dir, "w");
    let call = history.invoke(0, "finish_pull", "id=1 attempt=1 queue=q lease=100");
    history.ok(
        call,
        "next_id=2 next_attempt=1 next_max=25 next_key=k2 next_sum=7",
    );
    let refused = history.invoke(0, "finish_pull", "id=3 attempt=1 queue=q lease=100");
    history.fail(refused, &tq::Error::new(tq::ErrorKind::NotHeld, "not held"));
    let read = Histories::read(&history_dir);
    let ops: Vec<(&str, Option<i64>, bool)> = read
        .ops
        .iter()
        .map(|op| (op.op.as_str(), op.num("id"), op.is_ok()))
        .collect();
    assert_eq!(
        ops,
        [
            ("finish", Some(1), true),
            ("pull", Some(2), true),
            ("finish", Some(3), false)
        ]
    );
    assert_eq!(read.ops[1].get("key"), Some("k2"));
    assert_eq!(read.ops[1].get("lease"), Some("100"));
}

/// A real queue, then its file broken behind tq's back: one acknowledged
/// task deleted, another copied. The checker must find both.
#[test]
fn a_database_changed_behind_tqs_back_is_caught() {
    let dir = Dir::new();
    let db = dir.file("queue.db");
    let history_dir = dir.sub("history");
    {
        let history = History::create(&history_dir, "p");
        let queue = client::open(&history, 0, &db, &OpenOptions::new()).expect("open");
        let client = Client {
            queue: &queue,
            history: &history,
            thread: 0,
        };
        for n in 0..10 {
            client.push(&format!("k{n}"), 0).expect("push");
        }
    }
    let histories = Histories::read(&history_dir);
    assert!(check(&histories, &db::rows(&db), &Expect::default()).is_clean());
    let conn = Connection::open(&db).expect("open");
    conn.execute_batch(
        "DELETE FROM tq_tasks WHERE id = 3;
         INSERT INTO tq_tasks (state, payload, created_at, run_at)
             SELECT state, payload, created_at, run_at FROM tq_tasks WHERE id = 5;",
    )
    .expect("break the file");
    let report = check(&histories, &db::rows(&db), &Expect::default());
    assert_eq!(
        (report.lost.len(), report.duplicated.len()),
        (1, 1),
        "{report}"
    );
}

/// The power-loss model: a hole (a commit lost before one kept) is never
/// a prefix; a lost suffix is one at `normal` but not at `full`.
#[test]
fn the_power_loss_model_accepts_a_lost_suffix_only_at_normal_and_never_a_hole() {
    let ops: Vec<Operation> = (1..=5).map(|id| push(&format!("k{id}"), id, id)).collect();
    let runs = |durable| {
        vec![Run {
            ops: ops.iter().collect(),
            durable,
        }]
    };
    let rows = |ids: &[i64]| -> Vec<Row> { ids.iter().map(|&id| row(id, 0, 0)).collect() };
    assert!(model::check(&runs(Durable::All), &rows(&[1, 2, 3, 4, 5]), false).is_ok());
    let suffix = rows(&[1, 2, 3]);
    let kept =
        model::check(&runs(Durable::Prefix), &suffix, false).expect("a lost suffix at normal");
    assert_eq!((kept[0].kept, kept[0].acked), (3, 5));
    let full = model::check(&runs(Durable::All), &suffix, false).unwrap_err();
    assert!(full.contains("lost: task 4"), "{full}");
    let hole = model::check(&runs(Durable::Prefix), &rows(&[1, 2, 4, 5]), false).unwrap_err();
    assert!(hole.contains("lost: task 3"), "{hole}");
}

/// At `normal`, a checkpoint that answered complete flushed every commit
/// before it: a state without one of them is no longer a valid prefix.
#[test]
fn the_power_loss_model_keeps_what_a_checkpoint_flushed_at_normal() {
    let mut ops: Vec<Operation> = (1..=3).map(|id| push(&format!("k{id}"), id, id)).collect();
    ops.push(Operation::new(
        "p",
        "checkpoint",
        4 * MS,
        Outcome::Ok,
        "wal=0 complete=1",
    ));
    ops.extend((4..=5).map(|id| push(&format!("k{id}"), id, id + 1)));
    let runs = vec![Run {
        ops: ops.iter().collect(),
        durable: Durable::Prefix,
    }];
    let rows = |ids: &[i64]| -> Vec<Row> { ids.iter().map(|&id| row(id, READY, 0)).collect() };
    assert!(model::check(&runs, &rows(&[1, 2, 3]), false).is_ok());
    let lost = model::check(&runs, &rows(&[1, 2]), false).unwrap_err();
    assert!(lost.contains("lost: task 3"), "{lost}");
}

/// The model follows a fail to waiting (its back-off outlasts the run)
/// or, on the last attempt, to dead, and recover makes a gone run's last
/// attempt dead.
#[test]
fn the_power_loss_model_follows_fails_and_recovers_to_dead() {
    let first = [
        push_max("k1", 1, 1),
        push_max("k2", 2, 2),
        push_max("k3", 3, 1),
        delivered("p", 1, 1, 1, 3_600_000, 10, "default"),
        fail("p", 1, 1, 11, "dead=1"),
        delivered("p", 2, 1, 2, 3_600_000, 12, "default"),
        fail("p", 2, 1, 13, "retry_at=99999999"),
        delivered("p", 3, 1, 1, 3_600_000, 14, "default"),
    ];
    let second = [Operation::new("q", "recover", 20 * MS, Outcome::Ok, "n=1")];
    let runs = vec![
        Run {
            ops: first.iter().collect(),
            durable: Durable::All,
        },
        Run {
            ops: second.iter().collect(),
            durable: Durable::All,
        },
    ];
    let stored = |k2_state| vec![row(1, DEAD, 1), row(2, k2_state, 1), row(3, DEAD, 1)];
    assert!(model::check(&runs, &stored(WAITING), false).is_ok());
    assert!(model::check(&runs, &stored(READY), false).is_err());
    let wrong = [
        push_max("k1", 1, 2),
        delivered("p", 1, 1, 2, 3_600_000, 10, "default"),
        fail("p", 1, 1, 11, "dead=1"),
    ];
    let runs = vec![Run {
        ops: wrong.iter().collect(),
        durable: Durable::All,
    }];
    let why = model::check(&runs, &[row(1, DEAD, 1)], false).unwrap_err();
    assert!(why.contains("fail of task 1 answered dead"), "{why}");
}

fn failed_push(key: &str, outcome: Outcome) -> Operation {
    let sum = checksum(&payload(key, 0));
    Operation::new(
        "p",
        "push",
        0,
        outcome,
        &format!("key={key} sum={sum} queue=default"),
    )
}

fn run_with_network_faults(ops: Vec<Operation>, rows: &[Row]) -> Report {
    let expect = Expect {
        network_faults: true,
        ..Expect::default()
    };
    check(
        &Histories {
            ops,
            events: Vec::new(),
        },
        rows,
        &expect,
    )
}

#[test]
fn under_network_faults_calls_may_fail_with_io_or_an_unknown_outcome() {
    let unknown = || Outcome::Fail("UnknownOutcome".into());
    let io = || Outcome::Fail("Io".into());
    let report = run_with_network_faults(
        vec![
            // Pushes of unknown outcome: k1 was stored, k2 was not.
            failed_push("k1", unknown()),
            failed_push("k2", unknown()),
            failed_push("k4", io()),
            // A finish of unknown outcome that did remove its task.
            push("k3", 3, 0),
            pull("a", 3, 1, 100, 1),
            finish("a", 3, 1, 2, unknown()),
            Operation::new("a", "pull", 3 * MS, io(), "lease=100 queue=default"),
            Operation::new("r", "recover", 4 * MS, unknown(), "queue=default"),
        ],
        &[row(1, READY, 0)],
    );
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.stats.pushed_unknown_stored, 1, "{report}");
    assert_eq!(report.stats.finished_unknown, 1, "{report}");
    assert_eq!(
        (report.stats.io_failures, report.stats.unknown_outcomes),
        (2, 4),
        "{report}"
    );
}

#[test]
fn under_network_faults_a_stored_io_push_and_any_other_error_are_reported() {
    // TQ_ERR_IO from PostgreSQL means the commit was never sent.
    let report = run_with_network_faults(
        vec![
            failed_push("k1", Outcome::Fail("Io".into())),
            Operation::new(
                "a",
                "pull",
                MS,
                Outcome::Fail("InvalidArgument".into()),
                "lease=100 queue=default",
            ),
        ],
        &[row(1, READY, 0)],
    );
    assert_eq!(
        (report.unexpected.len(), report.errors.len()),
        (1, 1),
        "{report}"
    );
}

#[test]
fn a_fail_of_unknown_outcome_may_have_ended_its_lease() {
    // The fail's answer was lost, but it was committed: the task came
    // back after its back-off, inside the lease the fail had ended.
    let report = run_with_network_faults(
        vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 10_000, 1),
            Operation::new(
                "a",
                "fail",
                10 * MS,
                Outcome::Fail("UnknownOutcome".into()),
                "id=1 attempt=1 queue=default",
            ),
            pull("b", 1, 2, 10_000, 100),
        ],
        &[row(1, LEASED, 2)],
    );
    assert!(report.is_clean(), "{report}");
}

/// A cancel of task `id` at `at_ms`: `answer` is `removed` or `requested`
/// when acknowledged, empty otherwise.
fn cancel(id: i64, at_ms: i64, outcome: Outcome, answer: &str) -> Operation {
    let mut fields = format!("id={id} queue=default");
    if !answer.is_empty() {
        fields += &format!(" cancelled={answer}");
    }
    Operation::new("c", "cancel", at_ms * MS, outcome, &fields)
}

#[test]
fn cancelled_tasks_are_counted_cancelled_and_their_holders_told() {
    let report = run(
        vec![
            push("k1", 1, 0),
            push("k2", 2, 0),
            push("k3", 3, 0),
            // Pending: removed at once.
            cancel(1, 5, Outcome::Ok, "removed"),
            // Held: requested; the holder learns it at its next call.
            pull("a", 2, 1, 1_000, 10),
            cancel(2, 20, Outcome::Ok, "requested"),
            finish("a", 2, 1, 30, Outcome::Fail("Cancelled".into())),
            // Finished first, then refused.
            pull("a", 3, 1, 1_000, 40),
            finish("a", 3, 1, 50, Outcome::Ok),
            cancel(3, 60, Outcome::Fail("InvalidArgument".into()), ""),
            // Cancelled already: refused.
            cancel(1, 70, Outcome::Fail("InvalidArgument".into()), ""),
        ],
        Vec::new(),
        &[],
    );
    assert!(report.is_clean(), "{report}");
    let s = &report.stats;
    assert_eq!(
        (
            s.cancels_removed,
            s.cancels_requested,
            s.cancels_refused,
            s.cancelled,
            s.holders_told,
            s.finished
        ),
        (1, 1, 2, 2, 1, 1)
    );
    let balance = report.queues["default"];
    assert_eq!((balance.cancelled, balance.finished), (2, 1));
    assert!(balance.holds());
}

#[test]
fn a_delivery_after_a_cancel_returned_is_caught() {
    let report = run(
        vec![
            push("k1", 1, 0),
            cancel(1, 5, Outcome::Ok, "removed"),
            pull("a", 1, 1, 1_000, 10),
        ],
        Vec::new(),
        &[row(1, LEASED, 1)],
    );
    assert_eq!(report.delivered_after_cancel.len(), 1, "{report}");
    // Stored as held though cancelled.
    assert_eq!(report.cancel_ignored.len(), 1, "{report}");
}

#[test]
fn a_finish_accepted_after_a_cancel_returned_is_caught() {
    let report = run(
        vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 1_000, 1),
            cancel(1, 10, Outcome::Ok, "requested"),
            extend("a", 1, 1, 1_000, 20, Outcome::Ok),
            finish("a", 1, 1, 30, Outcome::Ok),
        ],
        Vec::new(),
        &[],
    );
    // The extend and the finish accepted, and a cancelled task finished.
    assert_eq!(report.cancel_ignored.len(), 3, "{report}");
}

#[test]
fn a_holder_told_not_held_after_a_requested_cancel_is_caught_unless_a_recovery_or_claim_may_have_ended_it(
) {
    let ops = |recover_at_ms: Option<i64>| {
        let mut ops = vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 100, 1),
            cancel(1, 10, Outcome::Ok, "requested"),
            finish("a", 1, 1, 200, Outcome::Fail("NotHeld".into())),
        ];
        ops.extend(recover_at_ms.map(|at_ms| {
            Operation::new("b", "recover", at_ms * MS, Outcome::Ok, "n=1 queue=default")
        }));
        ops
    };
    let report = run(ops(None), Vec::new(), &[]);
    assert_eq!(report.cancel_ignored.len(), 1, "{report}");
    // Before the lease ran out (at 101 ms), a recovery leaves it alone.
    let report = run(ops(Some(50)), Vec::new(), &[]);
    assert_eq!(report.cancel_ignored.len(), 1, "{report}");
    let report = run(ops(Some(150)), Vec::new(), &[]);
    assert!(report.is_clean(), "{report}");
    // Nor may a claim, of any queue, once the lease could have run out: it
    // ends a cancelled task whose lease ran out.
    let mut with_claim = ops(None);
    with_claim.push(Operation::new(
        "b",
        "pull",
        150 * MS,
        Outcome::Ok,
        "lease=100 queue=other",
    ));
    let report = run(with_claim, Vec::new(), &[]);
    assert!(report.is_clean(), "{report}");
    let mut too_early = ops(None);
    too_early.push(Operation::new(
        "b",
        "pull",
        50 * MS,
        Outcome::Ok,
        "lease=100 queue=other",
    ));
    let report = run(too_early, Vec::new(), &[]);
    assert_eq!(report.cancel_ignored.len(), 1, "{report}");
}

#[test]
fn told_cancelled_without_a_cancel_or_refused_without_a_reason_is_an_error() {
    let report = run(
        vec![
            push("k1", 1, 0),
            push("k2", 2, 0),
            pull("a", 1, 1, 1_000, 1),
            finish("a", 1, 1, 10, Outcome::Fail("Cancelled".into())),
            cancel(2, 20, Outcome::Fail("InvalidArgument".into()), ""),
        ],
        Vec::new(),
        &[row(1, LEASED, 1), row(2, READY, 0)],
    );
    assert_eq!(report.errors.len(), 2, "{report}");
}

#[test]
fn claims_surely_inside_one_window_beyond_the_rate_are_caught() {
    let expect = Expect {
        rate: Some(tq::RateLimit {
            claims: 2,
            per: std::time::Duration::from_millis(100),
        }),
        ..Expect::default()
    };
    let claims = |third_at_ms, third_took_ms| {
        let mut third = pull("c", 3, 1, 1_000, third_at_ms);
        third.completed = Some((third_at_ms + third_took_ms) * MS);
        vec![
            push("k1", 1, 0),
            push("k2", 2, 0),
            push("k3", 3, 0),
            pull("a", 1, 1, 1_000, 10),
            pull("b", 2, 1, 1_000, 20),
            third,
        ]
    };
    let rows = [row(1, LEASED, 1), row(2, LEASED, 1), row(3, LEASED, 1)];
    let histories = |ops| Histories {
        ops,
        events: Vec::new(),
    };
    let report = check(&histories(claims(109, 0)), &rows, &expect);
    assert_eq!(report.over_rate.len(), 1, "{report}");
    assert_eq!(report.stats.most_in_window, 3);
    // A window from 10 ms ends before 110 ms: the third claim may be outside.
    let report = check(&histories(claims(110, 0)), &rows, &expect);
    assert!(report.is_clean(), "{report}");
    // Invoked inside the window but answered after it: it may have claimed
    // after the window.
    let report = check(&histories(claims(50, 70)), &rows, &expect);
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.stats.most_in_window, 2);
}

#[test]
fn an_id_given_to_two_acknowledged_pushes_is_caught() {
    // k1 is finished (deleted, without history), then k2 gets its id.
    let sum2 = checksum(&payload("k2", 0));
    let report = run(
        vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 1_000, 1),
            finish("a", 1, 1, 2, Outcome::Ok),
            Operation::new(
                "p",
                "push",
                3 * MS,
                Outcome::Ok,
                &format!("key=k2 sum={sum2} id=1 queue=default"),
            ),
        ],
        Vec::new(),
        &[],
    );
    assert_eq!(report.reused_ids.len(), 1, "{report}");
    // Distinct ids pass.
    let report = run(
        vec![push("k1", 1, 0), push("k2", 2, 3)],
        Vec::new(),
        &[row(1, READY, 0), row(2, READY, 0)],
    );
    assert!(report.is_clean(), "{report}");
}

#[test]
fn an_extend_reviving_an_expired_lease_over_the_limit_is_caught() {
    let expect = Expect {
        limit: Some(1),
        ..Expect::default()
    };
    // Limit 1: a's lease runs out at 100 ms, b claims the slot at 150 ms,
    // then a's late extend is accepted at 200 ms.
    let ops = |extend_outcome: Outcome| {
        vec![
            push("k1", 1, 0),
            push("k2", 2, 0),
            pull("a", 1, 1, 100, 0),
            pull("b", 2, 1, 1_000, 150),
            extend("a", 1, 1, 1_000, 200, extend_outcome),
            finish("a", 1, 1, 300, Outcome::Ok),
            finish("b", 2, 1, 400, Outcome::Ok),
        ]
    };
    let histories = |ops| Histories {
        ops,
        events: Vec::new(),
    };
    let report = check(&histories(ops(Outcome::Ok)), &[], &expect);
    assert_eq!(report.over_limit.len(), 1, "{report}");
    assert_eq!(report.stats.most_held, 2);
    // Refused, the late extend revives nothing.
    let report = check(
        &histories(ops(Outcome::Fail("NotHeld".into()))),
        &[],
        &expect,
    );
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.stats.most_held, 1);
    // Two deliveries whose leases meet only after the first can have run
    // out are never surely held at once.
    let report = check(
        &histories(vec![
            push("k1", 1, 0),
            push("k2", 2, 0),
            pull("a", 1, 1, 100, 0),
            pull("b", 2, 1, 1_000, 100),
            finish("b", 2, 1, 400, Outcome::Ok),
        ]),
        &[row(1, LEASED, 1)],
        &expect,
    );
    assert!(report.over_limit.is_empty(), "{report}");
}

#[test]
fn a_task_left_with_its_cancellation_waiting_after_a_drain_is_undrained() {
    let expect = Expect {
        drained: true,
        ..Expect::default()
    };
    let histories = Histories {
        ops: vec![
            push("k1", 1, 0),
            pull("a", 1, 1, 100, 1),
            cancel(1, 10, Outcome::Ok, "requested"),
        ],
        events: vec![Event::new(20 * MS, "kill", "target=a")],
    };
    let report = check(&histories, &[row(1, db::CANCELLING, 1)], &expect);
    assert_eq!(report.undrained.len(), 1, "{report}");
    assert!(
        report.undrained[0].contains("cancellation waiting"),
        "{report}"
    );
    // A task waiting for another is not drained either.
    let report = check(
        &Histories {
            ops: vec![push("k2", 2, 0)],
            events: Vec::new(),
        },
        &[row(2, db::BLOCKED, 0)],
        &expect,
    );
    assert_eq!(report.undrained.len(), 1, "{report}");
}

#[test]
#[should_panic(expected = "is still held, its cancellation waiting")]
fn assert_drained_names_a_task_left_cancelling() {
    super::checker::assert_drained(&[row(1, db::CANCELLING, 1)], "negative");
}

/// A push of task `id` (key `k{id}`, the default queue) invoked at `at_ms`
/// and acknowledged 1 ms later, with the history's fields of its limits
/// (`deadline_after=100`...).
fn push_limited(id: i64, at_ms: i64, limits: &str) -> Operation {
    let key = format!("k{id}");
    let sum = checksum(&payload(&key, 0));
    let mut op = Operation::new(
        "p",
        "push",
        at_ms * MS,
        Outcome::Ok,
        &format!("key={key} sum={sum} id={id} queue=default {limits}"),
    );
    op.completed = Some((at_ms + 1) * MS);
    op
}

/// Task 1 dead with the last error `reason` after `attempts` deliveries.
fn dead_for(reason: &str, attempts: i64) -> Row {
    let mut dead = row(1, DEAD, attempts);
    dead.last_error = Some(reason.to_owned());
    dead
}

/// A claim that delivered nothing, invoked at `at_ms`.
fn empty_pull(at_ms: i64) -> Operation {
    Operation::new(
        "w",
        "pull",
        at_ms * MS,
        Outcome::Ok,
        "lease=100 queue=default",
    )
}

#[test]
fn a_delivery_claimed_once_its_limit_surely_passed_is_caught() {
    // Task 1 pushed at 0 ms with `limits`, delivered at each (attempt, ms)
    // of `pulls` under 20 ms leases, its last delivery finished.
    let case = |limits: &str, pulls: &[(i64, i64)]| {
        let mut ops = vec![push_limited(1, 0, limits)];
        for &(attempt, at) in pulls {
            ops.push(pull("w", 1, attempt, 20, at));
        }
        let &(attempt, at) = pulls.last().expect("a delivery");
        ops.push(finish("w", 1, attempt, at + 1, Outcome::Ok));
        run(ops, Vec::new(), &[])
    };
    // Read between 0 and 1 ms, the push's deadline is 100 or 101 ms: a
    // pull invoked at 101 ms claimed at or after it, one at 100 ms may not.
    let late = case("deadline_after=100", &[(1, 101)]);
    assert_eq!(late.past_limit.len(), 1, "{late}");
    assert!(case("deadline_after=100", &[(1, 100)]).is_clean());
    // A deadline bounds every delivery, an expiry only the first.
    let retried = case("deadline_at=500", &[(1, 10), (2, 500)]);
    assert_eq!(retried.past_limit.len(), 1, "{retried}");
    assert!(case("deadline_at=500", &[(1, 10), (2, 499)]).is_clean());
    let first = case("expire_at=100", &[(1, 100)]);
    assert_eq!(first.past_limit.len(), 1, "{first}");
    assert!(case("expire_at=100", &[(1, 99), (2, 200)]).is_clean());
    // A process with a shifted clock claims by its own time: counted.
    let shifted = check(
        &Histories {
            ops: vec![
                push_limited(1, 0, "deadline_after=100"),
                pull("w", 1, 1, 20, 101),
                finish("w", 1, 1, 102, Outcome::Ok),
            ],
            events: Vec::new(),
        },
        &[],
        &Expect {
            early_redelivery_allowed: true,
            ..Expect::default()
        },
    );
    assert!(shifted.is_clean(), "{shifted}");
    assert_eq!(shifted.stats.limits_missed_by_shifted_clock, 1);
    // A push cut short by its process's death read the clock before the
    // driver reaped the process; the kill's event, logged before the
    // signal, bounds nothing.
    let mut cut = push_limited(1, 0, "expire_after=100");
    (cut.outcome, cut.completed) = (Outcome::Unknown, None);
    let ops = vec![
        cut,
        pull("w", 1, 1, 20, 160),
        finish("w", 1, 1, 161, Outcome::Ok),
    ];
    let event = |op: &str, at_ms: i64| vec![Event::new(at_ms * MS, op, "target=p")];
    let report = run(ops.clone(), event("reaped", 50), &[]);
    assert_eq!(report.past_limit.len(), 1, "{report}");
    assert!(run(ops.clone(), event("reaped", 70), &[]).is_clean());
    assert!(run(ops.clone(), event("kill", 50), &[]).is_clean());
    // A server may carry the push out after its process was reaped.
    let on_server = Expect {
        on_server: true,
        ..Expect::default()
    };
    let histories = Histories {
        ops,
        events: event("reaped", 50),
    };
    assert!(check(&histories, &[], &on_server).is_clean());
}

#[test]
fn a_task_dead_for_a_limit_it_had_not_or_that_cannot_have_passed_is_caught() {
    // Expired at 100 or 101 ms: a claim completed at 100 ms or later can
    // have ended it, one completed before cannot.
    let report = run(
        vec![push_limited(1, 0, "expire_after=100"), empty_pull(100)],
        Vec::new(),
        &[dead_for("expired", 0)],
    );
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.stats.expired, 1);
    let early = run(
        vec![push_limited(1, 0, "expire_after=100"), empty_pull(99)],
        Vec::new(),
        &[dead_for("expired", 0)],
    );
    assert_eq!(early.ended_early.len(), 1, "{early}");
    // The row's own stamp of its end (the claim's reading of the clock).
    let stamped = |at_ms: i64| {
        let mut dead = dead_for("expired", 0);
        dead.finished_at = Some(at_ms);
        run(
            vec![push_limited(1, 0, "expire_after=100"), empty_pull(500)],
            Vec::new(),
            &[dead],
        )
    };
    assert!(stamped(100).is_clean());
    let report = stamped(99);
    assert_eq!(report.ended_early.len(), 1, "{report}");
    // No expiry pushed, or an expiry after a delivery: never "expired".
    let without = run(
        vec![push_limited(1, 0, "deadline_after=100"), empty_pull(200)],
        Vec::new(),
        &[dead_for("expired", 0)],
    );
    assert_eq!(without.ended_early.len(), 1, "{without}");
    let delivered = run(
        vec![
            push_limited(1, 0, "expire_after=100"),
            pull("w", 1, 1, 20, 10),
            empty_pull(200),
        ],
        Vec::new(),
        &[dead_for("expired", 1)],
    );
    assert_eq!(delivered.ended_early.len(), 1, "{delivered}");
    // A fail whose retry would fall past the deadline ends the task before
    // it passes, answering dead before the last attempt; without a
    // deadline that answer and that death are both anomalies.
    let failed = |limits: &str| {
        run(
            vec![
                push_limited(1, 0, limits),
                pull("w", 1, 1, 20, 10),
                fail("w", 1, 1, 20, "dead=1"),
            ],
            Vec::new(),
            &[dead_for("deadline passed", 1)],
        )
    };
    let report = failed("deadline_after=100");
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.stats.deadline_passed, 1);
    let report = failed("expire_after=100");
    assert_eq!(
        (report.ended_early.len(), report.unexpected.len()),
        (1, 1),
        "{report}"
    );
}

#[test]
fn a_commit_over_the_cap_is_caught_by_the_watch_and_a_stored_refused_push_by_the_checker() {
    use super::bounded::CapWatch;
    use tq::{PullOptions, PushOptions, Queue};

    // Pushes four tasks into a queue capped at 3, pulls one, pushes one
    // more, all watched against `watched`; returns the watch and the
    // pushes refused.
    let pushes = |watched: u64| {
        let dir = Dir::new();
        let path = dir.file("capped.db");
        let queue = Queue::open(&path, &OpenOptions::new()).expect("open");
        queue.set_max_pending(Some(3)).expect("cap");
        CapWatch::install(&path, watched);
        let push = |n: i32| queue.push(&payload(&format!("k{n}"), 0), &PushOptions::new());
        let mut refused = (0..4).filter(|&n| push(n).is_err()).count();
        queue
            .pull(&PullOptions::new())
            .expect("pull")
            .expect("a task");
        refused += usize::from(push(4).is_err());
        (CapWatch::read(&path), refused)
    };
    let (watch, refused) = pushes(3);
    assert!(watch.breaches.is_empty(), "{:?}", watch.breaches);
    assert_eq!((watch.most, refused), (3, 1));
    // Watched against a cap of 2, the same commits are over it: the third
    // push, and the push after the pull.
    let (watch, _) = pushes(2);
    assert_eq!(watch.breaches.len(), 2, "{:?}", watch.breaches);
    // A push refused as full stores nothing.
    let report = run(
        vec![failed_push("k1", Outcome::Fail("Full".into()))],
        Vec::new(),
        &[row(1, READY, 0)],
    );
    assert_eq!(report.unexpected.len(), 1, "{report}");
    assert!(run(
        vec![failed_push("k1", Outcome::Fail("Full".into()))],
        Vec::new(),
        &[]
    )
    .is_clean());
}
