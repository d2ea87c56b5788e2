//! Scenario 5: zombie workers and clock jumps. A worker takes a task and is
//! stopped (SIGSTOP) past its lease; another worker (the driver) takes the
//! task and finishes it; the first resumes, extends its lease (a late
//! heartbeat) and finishes: both "not held", and the done row keeps the
//! first finish's time. A stopped worker whose task nobody took may still
//! extend and finish it.
//!
//! The same with the stopped process's wall clock shifted by libfaketime:
//! shifted forward, its lease lasts longer for everyone else (the rival
//! waits); shifted back, its lease has run out at once (an early
//! redelivery). A worker whose clock is ahead takes a task whose lease has
//! not run out (early redelivery); one whose clock is behind waits longer
//! for a task whose lease has. In every case at most one finish succeeds.

use std::time::{Duration, Instant};

use tq::{OpenOptions, Task};

use super::checker::{verify_run, Expect};
use super::client::{self, Client};
use super::db::Target;
use super::harness::{child_args, now_ns, repeat, sleep_ms, spawn, spawn_with_clock, Dir, Proc};
use super::history::{Histories, History, Operation};

const LEASE_MS: i64 = 400;

/// One run: a queue with history kept, one task, the driver as the rival
/// worker, and a `clock-worker` child.
struct Run {
    dir: Dir,
    db: String,
    history_dir: std::path::PathBuf,
    rival: History,
    queue: tq::Queue,
}

impl Run {
    fn new() -> Run {
        let dir = Dir::new();
        let db = dir.file("queue.db");
        let history_dir = dir.sub("history");
        let rival = History::create(&history_dir, "rival");
        let mut options = OpenOptions::new();
        options.keep_history(true);
        let queue = client::open(&rival, 0, &db, &options).expect("open");
        let run = Run {
            dir,
            db,
            history_dir,
            rival,
            queue,
        };
        run.client().push("task", 0).expect("push");
        run
    }

    fn client(&self) -> Client<'_> {
        Client {
            queue: &self.queue,
            history: &self.rival,
            thread: 0,
        }
    }

    /// Starts the child, its clock shifted by `clock` ("+2s") if given.
    fn child(
        &self,
        clock: Option<&str>,
        lease_ms: i64,
        pull_for_ms: u64,
        stop: bool,
    ) -> Result<Proc, String> {
        let mut args = child_args(
            &self.db,
            &self.history_dir,
            "child",
            1,
            now_ns() + 60_000_000_000,
        );
        args.extend([
            ("keep_history", "1".into()),
            ("lease", lease_ms.to_string()),
            ("pull_for", pull_for_ms.to_string()),
            ("stop", u8::from(stop).to_string()),
        ]);
        match clock {
            None => Ok(spawn("clock-worker", &args)),
            Some(offset) => spawn_with_clock("clock-worker", &args, offset),
        }
    }

    fn child_history(&self) -> Histories {
        Histories::read_process(&self.history_dir, "child")
    }

    /// The child's wall clock minus the real one, in ms.
    fn child_clock_offset(&self) -> i64 {
        let history = self.child_history();
        let clock = history
            .events
            .iter()
            .find(|e| e.op == "clock")
            .expect("the child logs its clock");
        let number = |key| clock.get(key).unwrap().parse::<i64>().unwrap();
        number("wall_ms") - number("real_ms")
    }

    /// The driver pulls until it gets the task (up to 20 s).
    fn take(&self, lease_ms: i64) -> Task {
        let begin = Instant::now();
        loop {
            if let Some(task) = self.client().pull(lease_ms as u64).expect("pull") {
                return task;
            }
            assert!(
                begin.elapsed() < Duration::from_secs(20),
                "the task never came back"
            );
            sleep_ms(5);
        }
    }

    fn finished_at(&self) -> Option<i64> {
        let conn = rusqlite::Connection::open(&self.db).expect("open");
        conn.query_row("SELECT finished_at FROM tq_tasks", [], |row| row.get(0))
            .expect("the task's row")
    }

    fn verify(self, context: &str, early_redelivery_allowed: bool) -> Histories {
        drop(self.queue);
        let expect = Expect {
            keep_history: true,
            early_redelivery_allowed,
            drained: true,
            ..Expect::default()
        };
        let (histories, _) = verify_run(
            &Target::File(self.db.clone()),
            &self.history_dir,
            &expect,
            context,
        );
        drop(self.dir);
        histories
    }
}

fn only<'a>(histories: &'a Histories, process: &str, op: &str) -> Vec<&'a Operation> {
    histories
        .ops
        .iter()
        .filter(|o| o.process == process && o.op == op)
        .collect()
}

/// A child takes the task with clock `clock` and stops; the driver takes
/// it once the child's lease has run out (as the driver's clock sees it),
/// finishes it, and resumes the child, whose extend and finish must be
/// refused.
/// Returns how long the driver waited, in ms after the child's pull.
fn zombie(
    clock: Option<&str>,
    context: &str,
    early_redelivery_allowed: bool,
) -> Result<i64, String> {
    let run = Run::new();
    // A clock behind the driver's sees the task due only that much later.
    let child = run.child(clock, LEASE_MS, 15_000, true)?;
    assert!(
        child.wait_stopped(Duration::from_secs(20)),
        "{context}: the child never held the task"
    );
    if let Some(offset) = clock {
        check_shift(run.child_clock_offset(), offset)?;
    }
    let task = run.take(10_000);
    run.client().finish(&task).expect("the driver's finish");
    let finished_at = run.finished_at();
    child.signal(libc::SIGCONT);
    let mut child = child;
    assert_eq!(
        child.wait_timeout(Duration::from_secs(20)).unwrap(),
        Some(0)
    );
    assert_eq!(
        run.finished_at(),
        finished_at,
        "{context}: the refused finish changed the row"
    );
    let histories = run.verify(context, early_redelivery_allowed);
    for op in ["extend", "finish"] {
        let calls = only(&histories, "child", op);
        assert_eq!(calls.len(), 1);
        assert!(
            calls[0].failed_with("NotHeld"),
            "{context}: the zombie's {op}: {:?}",
            calls[0].outcome
        );
    }
    let delivered = histories.delivered();
    let pulled = delivered
        .iter()
        .find(|op| op.process == "child")
        .unwrap()
        .invoked;
    let taken = delivered.iter().find(|op| op.process == "rival").unwrap();
    Ok(taken.completed.unwrap() / 1_000_000 - pulled / 1_000_000)
}

/// Fails with a reason when libfaketime did not shift the child's clock
/// by about `offset` (for example "+2s").
fn check_shift(measured_ms: i64, offset: &str) -> Result<(), String> {
    let seconds: i64 = offset
        .trim_end_matches('s')
        .parse()
        .expect("an offset in seconds");
    if (measured_ms - seconds * 1000).abs() > 1000 {
        return Err(format!(
            "libfaketime shifted the clock by {measured_ms} ms, not {offset}"
        ));
    }
    Ok(())
}

#[test]
#[ignore = "torture test: make test-torture"]
fn a_stopped_worker_cannot_finish_a_task_taken_since() {
    for _ in repeat("zombie") {
        let waited = zombie(None, "zombie", false).expect("no clock shift");
        assert!(
            waited >= LEASE_MS,
            "the task was taken {waited} ms after the pull, inside the lease"
        );
    }
}

#[test]
#[ignore = "torture test: make test-torture"]
fn a_stopped_worker_whose_task_nobody_took_may_still_finish() {
    for _ in repeat("zombie-untaken") {
        let run = Run::new();
        let mut child = run.child(None, LEASE_MS, 5_000, true).unwrap();
        assert!(
            child.wait_stopped(Duration::from_secs(20)),
            "the child never held the task"
        );
        sleep_ms(LEASE_MS as u64 + 200);
        child.signal(libc::SIGCONT);
        assert_eq!(
            child.wait_timeout(Duration::from_secs(20)).unwrap(),
            Some(0)
        );
        let histories = run.verify("zombie-untaken", false);
        for op in ["extend", "finish"] {
            assert!(
                only(&histories, "child", op)[0].is_ok(),
                "the expired but untaken delivery could not {op}"
            );
        }
    }
}

#[test]
#[ignore = "torture test: make test-torture"]
fn clock_jumps_never_let_two_finishes_succeed() {
    for _ in repeat("clock") {
        // Forward: the stopped holder's lease ends later for everyone else.
        let waited = match zombie(Some("+2s"), "clock-zombie-forward", false) {
            Ok(waited) => waited,
            Err(reason) => {
                println!("[clock] SKIPPED: {reason}");
                return;
            }
        };
        assert!(
            waited >= 2_000 + LEASE_MS,
            "forward: taken after {waited} ms, before the shifted lease ended"
        );

        // Backward: the stopped holder's lease has run out when it is taken.
        let waited = zombie(Some("-5s"), "clock-zombie-backward", true).unwrap();
        assert!(waited < LEASE_MS, "backward: the rival waited {waited} ms");

        // A worker whose clock is ahead takes a task whose lease still runs
        // and finishes it; the holder's finish is then refused.
        let run = Run::new();
        let held = run.take(30_000);
        let mut thief = run.child(Some("+60s"), 1_000, 3_000, false).unwrap();
        assert_eq!(
            thief.wait_timeout(Duration::from_secs(20)).unwrap(),
            Some(0)
        );
        let refused = run.client().finish(&held).unwrap_err();
        assert_eq!(refused.kind(), tq::ErrorKind::NotHeld);
        let histories = run.verify("clock-ahead", true);
        assert!(
            only(&histories, "child", "finish")[0].is_ok(),
            "the early redelivery's finish"
        );

        // A worker whose clock is behind does not take a task whose lease has
        // run out in real time: it only waits longer.
        let run = Run::new();
        let held = run.take(300);
        let mut laggard = run.child(Some("-30s"), 1_000, 1_500, false).unwrap();
        assert_eq!(
            laggard.wait_timeout(Duration::from_secs(20)).unwrap(),
            Some(0)
        );
        let pulls = only(&run.child_history(), "child", "pull").len();
        assert!(
            run.child_history().delivered().is_empty(),
            "the laggard took the task"
        );
        run.client()
            .finish(&held)
            .expect("nobody took the task: its holder finishes");
        run.verify("clock-behind", false);
        println!("[clock] forward, backward, ahead and behind: one finish each; the laggard pulled {pulls} times in vain");
    }
}
