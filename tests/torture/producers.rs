//! Scenario 1: producers killed. Three producer processes, four threads
//! each, push unique payloads at `full`; the driver kills each with SIGKILL
//! at a random moment (a quarter of them within 10 ms of starting, during
//! open) and starts another, and a third of the processes instead die by
//! themselves at a random write or sync of SQLite's (the crash VFS), that
//! is inside a commit. The threads of a process share tq's group commit
//! (whether they share a handle or not), so a kill usually lands while
//! several pushes are in one transaction or waiting for the next.
//! Afterwards: every acknowledged push is stored exactly once with its
//! bytes, every push of unknown outcome at most once, nothing else is
//! stored, the file passes `integrity_check`, and the next open succeeds.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::checker::{verify_run, Expect};
use super::db::Target;
use super::harness::{child_args, now_ns, sleep_ms, spawn, Dir, Proc, Settings};
use super::history::History;

struct Slot {
    proc: Proc,
    label: String,
    kill_at: Instant,
}

#[test]
#[ignore = "torture test: make test-torture"]
fn producers_killed_at_random_moments_lose_no_acknowledged_push() {
    let settings = Settings::new("producers");
    let mut rng = settings.rng();
    let dir = Dir::new();
    let db = dir.file("queue.db");
    let history_dir = dir.sub("history");
    let driver = History::create(&history_dir, "driver");
    let phase = settings.duration(Duration::from_secs(20));
    let deadline = now_ns() + phase.as_nanos() as i64 + 60_000_000_000;

    let mut slots: Vec<Option<Slot>> = (0..3).map(|_| None).collect();
    let (mut started, mut killed, mut crashed) = (0, 0, 0);
    let begin = Instant::now();
    while begin.elapsed() < phase {
        for slot in &mut slots {
            if let Some(running) = slot {
                match running.proc.try_wait() {
                    // The crash VFS killed it inside a write or sync.
                    Some(None) => {
                        crashed += 1;
                        *slot = None;
                    }
                    Some(Some(code)) => {
                        panic!("producer {} exited with status {code}", running.label)
                    }
                    None => {}
                }
            }
            if let Some(running) = slot {
                if Instant::now() >= running.kill_at {
                    driver.info("kill", &format!("target={}", running.label));
                    running.proc.kill();
                    killed += 1;
                    *slot = None;
                }
            }
            if slot.is_none() {
                let label = format!("p{started}");
                started += 1;
                let mut args = child_args(&db, &history_dir, &label, rng.next(), deadline);
                args.extend([
                    ("threads", "4".into()),
                    ("shared", rng.range(0, 1).to_string()),
                    ("pad", rng.range(0, 2000).to_string()),
                ]);
                if rng.chance(0.33) {
                    let when = if rng.chance(0.5) { "after" } else { "before" };
                    args.push(("crash", format!("{}:{when}", rng.range(1, 400))));
                }
                let life = if rng.chance(0.25) {
                    rng.range(0, 10)
                } else {
                    rng.range(10, 500)
                };
                *slot = Some(Slot {
                    proc: spawn("producer", &args),
                    label,
                    kill_at: Instant::now() + Duration::from_millis(life),
                });
            }
        }
        sleep_ms(1);
    }
    for running in slots.iter_mut().flatten() {
        driver.info("kill", &format!("target={}", running.label));
        running.proc.kill();
    }

    let (histories, report) = verify_run(
        &Target::File(db.clone()),
        &history_dir,
        &Expect::default(),
        "producers",
    );
    let opens_cut = histories
        .ops
        .iter()
        .filter(|op| op.op == "open" && op.completed.is_none())
        .count();
    // Processes that died with several pushes in flight: group commits cut.
    let mut in_flight: HashMap<&str, usize> = HashMap::new();
    for op in histories
        .ops
        .iter()
        .filter(|op| op.op == "push" && op.completed.is_none())
    {
        *in_flight.entry(op.process.as_str()).or_default() += 1;
    }
    let groups_cut = in_flight.values().filter(|&&n| n > 1).count();
    println!(
        "[producers] {started} processes: {killed} killed by the driver, {crashed} by the crash VFS; \
         {opens_cut} opens cut short; {groups_cut} died with 2 to 4 pushes in flight"
    );
    assert!(
        groups_cut > 0,
        "no process died with several pushes in flight"
    );
    assert!(
        report.stats.pushed > 100,
        "too few pushes acknowledged to prove anything"
    );
    assert!(
        report.stats.pushed_unknown > 0,
        "no kill landed inside a push"
    );
}
