//! Scenario 10: periodic schedules driven with no leader. Several schedules
//! fall several times a second; four processes drive them (their pulls
//! drive due schedules, and they also call `run_due_schedules`), each
//! killed at random and replaced by one whose wall clock libfaketime
//! shifts forward or back by up to a few seconds, so the queue's clock
//! steps forward and back from one driver to the next. At the end, read
//! through tq from the tasks left (slot tasks stay as done while their
//! unique key is reserved): every slot of a schedule that runs each missed
//! slot, from its first to the one it would enqueue next, was enqueued
//! exactly once; the others enqueued only slots of their timetable, each
//! once. It also runs on PostgreSQL (`..._on_postgres`), where slots are
//! on the server's clock whatever the drivers' clocks say.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tq::{CatchUp, Durability, OpenOptions, Queue, Schedule, ScheduleSpec, TaskState};

use super::db::Target;
use super::harness::{now_ns, sleep_ms, spawn, spawn_with_clock, Dir, Proc, Settings};

/// The schedules: name, interval in ms (`None`: the cron expression
/// `* * * * * *`, each second), catch-up policy.
const SCHEDULES: [(&str, Option<u64>, CatchUp); 6] = [
    ("each-100", Some(100), CatchUp::Each(10_000)),
    ("each-170", Some(170), CatchUp::Each(10_000)),
    ("each-250", Some(250), CatchUp::Each(10_000)),
    ("each-second", None, CatchUp::Each(10_000)),
    ("one-130", Some(130), CatchUp::One),
    ("skip-90", Some(90), CatchUp::Skip),
];

/// The wall-clock shifts a new driver gets.
const CLOCKS: [&str; 6] = ["+0s", "+3s", "-3s", "+1s", "-2s", "+5s"];

const DRIVERS: usize = 4;

#[test]
#[ignore = "torture test: make test-torture"]
fn every_slot_is_enqueued_once_by_drivers_killed_and_clocks_stepped() {
    let dir = Dir::new();
    schedules(&dir, &Target::File(dir.file("queue.db")), "schedules");
}

#[test]
#[ignore = "torture test on PostgreSQL: make test-postgres"]
fn every_slot_is_enqueued_once_by_drivers_killed_and_clocks_stepped_on_postgres() {
    if let Some(target) = Target::postgres(
        "every_slot_is_enqueued_once_by_drivers_killed_and_clocks_stepped_on_postgres",
        "torture_schedules",
    ) {
        schedules(&Dir::new(), &target, "schedules-postgres");
    }
}

fn schedules(dir: &Dir, target: &Target, scenario: &str) {
    let settings = Settings::new(scenario);
    let mut rng = settings.rng();
    let phase = settings.duration(Duration::from_secs(12));
    let history_dir = dir.sub("history");
    let mut options = OpenOptions::new();
    options.durability(Durability::Normal);
    let queue = Queue::open(target.db(), &target.options(&options)).expect("open");
    for (name, interval, catch_up) in SCHEDULES {
        let spec = match interval {
            Some(ms) => ScheduleSpec::Every(Duration::from_millis(ms)),
            None => ScheduleSpec::Cron("* * * * * *".into()),
        };
        let mut schedule = Schedule::new(name, spec, &format!("\"{name}\"")).unwrap();
        schedule.catch_up(catch_up).unwrap();
        queue.add_schedule(&schedule).expect("add a schedule");
    }
    let first: BTreeMap<String, i64> = slots_next(&queue);

    let deadline = now_ns() + phase.as_nanos() as i64 + 60_000_000_000;
    let mut clocks_shifted = true;
    let mut start = |label: &str, rng: &mut super::harness::Rng| -> Proc {
        let mut args = target.child_args(&history_dir, label, rng.next(), deadline);
        args.push(("durability", "normal".into()));
        let clock = CLOCKS[rng.range(0, CLOCKS.len() as u64 - 1) as usize];
        match spawn_with_clock("schedule-driver", &args, clock) {
            Ok(proc) => proc,
            Err(reason) => {
                if clocks_shifted {
                    println!("[{scenario}] clocks not shifted: {reason}");
                    clocks_shifted = false;
                }
                spawn("schedule-driver", &args)
            }
        }
    };
    let mut drivers: Vec<(Proc, Instant)> = Vec::new();
    let (mut started, mut killed) = (0, 0);
    let begin = Instant::now();
    while begin.elapsed() < phase {
        drivers.retain_mut(|(proc, kill_at)| {
            if Instant::now() < *kill_at {
                return true;
            }
            proc.kill();
            killed += 1;
            false
        });
        while drivers.len() < DRIVERS {
            let proc = start(&format!("d{started}"), &mut rng);
            started += 1;
            let life = Duration::from_millis(rng.range(300, 2500));
            drivers.push((proc, Instant::now() + life));
        }
        sleep_ms(10);
    }
    for (proc, _) in &mut drivers {
        proc.kill();
        killed += 1;
    }
    println!("[{scenario}] {started} drivers started, {killed} killed");
    assert!(killed > DRIVERS, "too few drivers were killed");

    let next = slots_next(&queue);
    let tasks = slot_tasks(&queue);
    for (name, interval, catch_up) in SCHEDULES {
        let slots = tasks.get(name).cloned().unwrap_or_default();
        let (from, until) = (first[name], next[name]);
        let step = interval.map_or(1000, |ms| ms as i64);
        let mut seen = slots.clone();
        seen.dedup();
        assert_eq!(seen.len(), slots.len(), "{name}: a slot enqueued twice");
        for &slot in &slots {
            assert!(
                slot >= from && slot < until && (slot - from) % step == 0,
                "{name}: {slot} is not a slot between {from} and {until}"
            );
        }
        if matches!(catch_up, CatchUp::Each(_)) {
            let expected: Vec<i64> = (from..until).step_by(step as usize).collect();
            let missing: Vec<&i64> = expected.iter().filter(|s| !slots.contains(s)).collect();
            assert!(missing.is_empty(), "{name}: slots missed: {missing:?}");
        }
        assert!(!slots.is_empty(), "{name}: nothing enqueued");
        println!(
            "[{scenario}] {name}: {} slots enqueued, {} ms covered",
            slots.len(),
            until - from
        );
    }
}

/// Each schedule's next slot.
fn slots_next(queue: &Queue) -> BTreeMap<String, i64> {
    queue
        .schedules()
        .expect("list the schedules")
        .into_iter()
        .map(|info| (info.schedule().name().to_owned(), info.next_slot_unix_ms()))
        .collect()
}

/// The slots of the tasks in the queue (their due times), by schedule,
/// sorted.
fn slot_tasks(queue: &Queue) -> BTreeMap<String, Vec<i64>> {
    let mut slots: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for state in [TaskState::Pending, TaskState::Leased, TaskState::Done] {
        let mut after = 0;
        loop {
            let page = queue.list(state, after, 1000).expect("list");
            for task in &page {
                let name: String = serde_json::from_str(task.payload()).expect("a name");
                slots.entry(name).or_default().push(task.run_at_unix_ms());
            }
            match page.last() {
                Some(last) => after = last.id(),
                None => break,
            }
        }
    }
    for list in slots.values_mut() {
        list.sort_unstable();
    }
    slots
}
