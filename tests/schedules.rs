//! Periodic schedules: adding, replacing, listing, pausing and removing
//! them, and every due slot enqueued exactly once, on both backends.

#[macro_use]
mod common;

use std::collections::BTreeSet;
use std::thread;
use std::time::{Duration, Instant};

use common::{pull, waiting, Scratch};
use tq::{CatchUp, ErrorKind, Queue, Schedule, ScheduleSpec, TaskState};

fn every(name: &str, ms: u64, payload: &str) -> Schedule {
    Schedule::new(
        name,
        ScheduleSpec::Every(Duration::from_millis(ms)),
        payload,
    )
    .unwrap()
}

/// Every task pending in the queue, taken: its payload and due time.
fn drain(queue: &Queue) -> Vec<(String, i64)> {
    let mut tasks = Vec::new();
    while let Some(task) = queue.pull(&tq::PullOptions::new()).unwrap() {
        tasks.push((task.payload().to_owned(), task.run_at_unix_ms()));
        queue.finish(task.receipt()).unwrap();
    }
    tasks
}

/// The slots of `payload` among `tasks`, checked to be distinct.
fn slots_of(tasks: &[(String, i64)], payload: &str) -> Vec<i64> {
    let slots: Vec<i64> = tasks
        .iter()
        .filter(|(p, _)| p == payload)
        .map(|&(_, slot)| slot)
        .collect();
    let distinct: BTreeSet<i64> = slots.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        slots.len(),
        "a slot enqueued twice: {slots:?}"
    );
    distinct.into_iter().collect()
}

fn schedules_are_added_listed_replaced_and_removed(scratch: Scratch) {
    let queue = scratch.open();
    let mut nightly = Schedule::new(
        "nightly",
        ScheduleSpec::Cron("0 2 * * *".into()),
        r#"{"job":1}"#,
    )
    .unwrap();
    nightly
        .time_zone("Europe/Paris")
        .unwrap()
        .priority(5)
        .max_attempts(3)
        .unwrap()
        .catch_up(CatchUp::Each(4))
        .unwrap();
    queue.add_schedule(&nightly).unwrap();
    queue.add_schedule(&every("often", 60_000, "2")).unwrap();
    let listed = queue.schedules().unwrap();
    assert_eq!(
        listed
            .iter()
            .map(|info| info.schedule().name())
            .collect::<Vec<_>>(),
        ["nightly", "often"]
    );
    let stored = listed[0].schedule();
    assert_eq!(stored.spec(), &ScheduleSpec::Cron("0 2 * * *".into()));
    assert_eq!(stored.time_zone_name(), "Europe/Paris");
    assert_eq!(stored.payload(), r#"{"job":1}"#);
    assert_eq!(stored.task_priority(), 5);
    assert_eq!(stored.task_max_attempts(), Some(3));
    assert_eq!(stored.catch_up_policy(), CatchUp::Each(4));
    assert!(!listed[0].paused());
    assert!(listed[0].next_slot_unix_ms() > common::now_ms());
    assert_eq!(
        listed[1].schedule().task_max_attempts(),
        Some(tq::DEFAULT_MAX_ATTEMPTS),
        "the adding handle's default is stored"
    );
    assert_eq!(
        listed[1].schedule().spec(),
        &ScheduleSpec::Every(Duration::from_secs(60))
    );

    let err = queue.add_schedule(&every("often", 1000, "3")).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("'often'"), "{}", err.message());
    queue.replace_schedule(&every("often", 1000, "3")).unwrap();
    let listed = queue.schedules().unwrap();
    assert_eq!(listed[1].schedule().payload(), "3");
    queue.replace_schedule(&every("new", 1000, "4")).unwrap();
    assert_eq!(queue.schedules().unwrap().len(), 3);

    queue.remove_schedule("nightly").unwrap();
    let err = queue.remove_schedule("nightly").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(queue.schedules().unwrap().len(), 2);
    // Another queue of the same store has schedules of its own.
    let mut options = tq::OpenOptions::new();
    options.queue("other").unwrap();
    let other = scratch.open_with(&options);
    assert!(other.schedules().unwrap().is_empty());
    other.add_schedule(&every("often", 1000, "5")).unwrap();
    assert_eq!(queue.schedules().unwrap().len(), 2);
}

fn bad_input_is_refused_and_stores_nothing(scratch: Scratch) {
    let queue = scratch.open();
    let err = queue
        .add_schedule(&every("bad", 1000, "not json"))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidJson);
    assert!(err.message().contains("'bad'"), "{}", err.message());
    let err = Schedule::new("cron", ScheduleSpec::Cron("every day".into()), "1").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("'every day'"), "{}", err.message());
    let mut schedule = Schedule::new("tz", ScheduleSpec::Cron("@hourly".into()), "1").unwrap();
    let err = schedule.time_zone("Europe/Atlantis").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("'Europe/Atlantis'"));
    assert_eq!(
        queue.pause_schedule("missing").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        queue.resume_schedule("missing").unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert!(queue.schedules().unwrap().is_empty());
    assert_eq!(queue.run_due_schedules().unwrap(), 0);
}

fn pulls_enqueue_each_slot_once_at_its_time(scratch: Scratch) {
    let queue = scratch.open();
    let mut schedule = every("tick", 100, r#""tick""#);
    schedule.catch_up(CatchUp::Each(1000)).unwrap();
    queue.add_schedule(&schedule).unwrap();
    let first = queue.schedules().unwrap()[0].next_slot_unix_ms();
    let mut tasks = Vec::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(1050) {
        if let Some(task) = queue.pull(&waiting(200)).unwrap() {
            tasks.push((task.payload().to_owned(), task.run_at_unix_ms()));
            queue.finish(task.receipt()).unwrap();
        }
    }
    tasks.extend(drain(&queue));
    let slots = slots_of(&tasks, r#""tick""#);
    assert!(slots.len() >= 8, "{} slots in about a second", slots.len());
    assert_eq!(slots[0], first);
    for pair in slots.windows(2) {
        assert_eq!(pair[1] - pair[0], 100, "slot missed: {slots:?}");
    }
}

fn a_waiting_pull_wakes_at_the_next_slot(scratch: Scratch) {
    let queue = scratch.open();
    queue
        .add_schedule(&every("soon", 300, r#""soon""#))
        .unwrap();
    let started = Instant::now();
    let task = queue
        .pull(&waiting(10_000))
        .unwrap()
        .expect("the slot's task");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_millis(1500),
        "waited {waited:?} for a slot 300 ms away"
    );
    assert_eq!(task.payload(), r#""soon""#);
    // Added through another handle, while this one waits.
    let other = scratch.open();
    let waiter = thread::spawn(move || {
        let started = Instant::now();
        let task = queue.pull(&waiting(10_000)).unwrap();
        (
            task.map(|task| task.payload().to_owned()),
            started.elapsed(),
        )
    });
    thread::sleep(Duration::from_millis(100));
    other.remove_schedule("soon").unwrap();
    other
        .add_schedule(&every("later", 400, r#""later""#))
        .unwrap();
    let (payload, waited) = waiter.join().unwrap();
    assert_eq!(payload.as_deref(), Some(r#""later""#));
    assert!(waited < Duration::from_millis(3000), "waited {waited:?}");
}

fn missed_slots_follow_the_catch_up_policy(scratch: Scratch) {
    let queue = scratch.open();
    for (name, policy) in [
        ("skip", CatchUp::Skip),
        ("one", CatchUp::One),
        ("each", CatchUp::Each(3)),
        ("all", CatchUp::Each(1000)),
    ] {
        let mut schedule = every(name, 100, &format!("\"{name}\""));
        schedule.catch_up(policy).unwrap();
        queue.add_schedule(&schedule).unwrap();
    }
    // No one drives the schedules meanwhile (counting does not).
    thread::sleep(Duration::from_millis(750));
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 0);
    let ran = common::now_ms();
    let stored = queue.run_due_schedules().unwrap();
    let schedules = queue.schedules().unwrap();
    for info in &schedules {
        // So that the pulls draining the queue enqueue no more.
        queue.pause_schedule(info.schedule().name()).unwrap();
    }
    let tasks = drain(&queue);
    assert_eq!(stored as usize, tasks.len());
    assert_eq!(slots_of(&tasks, r#""skip""#).len(), 1, "within the grace");
    assert_eq!(slots_of(&tasks, r#""one""#).len(), 1);
    let each = slots_of(&tasks, r#""each""#);
    let all = slots_of(&tasks, r#""all""#);
    assert_eq!(each.len(), 3);
    assert!(all.len() >= 6, "{all:?}");
    for slots in [&each, &all] {
        for pair in slots.windows(2) {
            assert_eq!(pair[1] - pair[0], 100, "{slots:?}");
        }
    }
    // The slots enqueued are the latest, and each schedule goes on after
    // them, from its anchor.
    for info in schedules {
        let name = info.schedule().name();
        let slots = slots_of(&tasks, &format!("\"{name}\""));
        let last = slots[slots.len() - 1];
        assert_eq!(info.next_slot_unix_ms(), last + 100, "{name}");
        assert!(info.next_slot_unix_ms() > ran, "{name}: a due slot left");
    }
}

fn a_paused_schedule_skips_its_slots_until_resumed(scratch: Scratch) {
    let queue = scratch.open();
    let mut schedule = every("paused", 100, "1");
    schedule.catch_up(CatchUp::Each(1000)).unwrap();
    queue.add_schedule(&schedule).unwrap();
    queue.pause_schedule("paused").unwrap();
    queue.pause_schedule("paused").unwrap();
    assert!(queue.schedules().unwrap()[0].paused());
    thread::sleep(Duration::from_millis(400));
    assert_eq!(queue.run_due_schedules().unwrap(), 0);
    assert!(pull(&queue).is_none());
    queue.resume_schedule("paused").unwrap();
    let info = &queue.schedules().unwrap()[0];
    assert!(!info.paused());
    assert!(
        info.next_slot_unix_ms() >= common::now_ms() - 5,
        "the slots that fell while paused are skipped"
    );
    thread::sleep(Duration::from_millis(250));
    let stored = queue.run_due_schedules().unwrap();
    assert!((1..=3).contains(&stored), "{stored} tasks after 250 ms");
}

/// Writes `spec` over the stored timetable of schedule `name`, as another
/// program or a damaged file could.
fn damage_spec(scratch: &Scratch, name: &str, spec: &str) {
    let changed = match scratch.server() {
        Some(server) => common::postgres_client(&server.url)
            .execute(
                &format!(
                    "UPDATE \"{}\".schedules SET spec = $1 WHERE name = $2",
                    server.schema
                ),
                &[&spec, &name],
            )
            .unwrap(),
        None => tq::rusqlite::Connection::open(scratch.queue_path())
            .unwrap()
            .execute(
                "UPDATE tq_schedules SET spec = ?1 WHERE name = ?2",
                [spec, name],
            )
            .unwrap() as u64,
    };
    assert_eq!(changed, 1);
}

fn a_schedule_stored_damaged_is_paused_and_pulls_go_on(scratch: Scratch) {
    let queue = scratch.open();
    queue.add_schedule(&every("damaged", 50, "1")).unwrap();
    queue.add_schedule(&every("sound", 50, "2")).unwrap();
    damage_spec(&scratch, "damaged", "not a timetable");
    thread::sleep(Duration::from_millis(120));
    common::push(&queue, "3");
    // Pulls drive the due schedules: the sound one still enqueues.
    let payloads: BTreeSet<String> = std::iter::from_fn(|| pull(&queue))
        .map(|task| task.payload().to_owned())
        .collect();
    assert_eq!(payloads, BTreeSet::from(["2".to_owned(), "3".to_owned()]));
    let schedules = queue.schedules().unwrap();
    assert!(schedules[0].paused(), "the damaged one is paused");
    assert!(!schedules[1].paused());
    let err = queue.resume_schedule("damaged").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(queue.schedules().unwrap()[0].paused());
    // Replacing it with a sound one mends it.
    queue.replace_schedule(&every("damaged", 50, "1")).unwrap();
    assert!(!queue.schedules().unwrap()[0].paused());
}

fn handles_racing_to_drive_enqueue_each_slot_once(scratch: Scratch) {
    let queue = scratch.open();
    let mut schedule = every("race", 20, r#""race""#);
    schedule.catch_up(CatchUp::Each(1000)).unwrap();
    queue.add_schedule(&schedule).unwrap();
    let handles: Vec<Queue> = (0..4).map(|_| scratch.open()).collect();
    let stored: u64 = thread::scope(|scope| {
        let drivers: Vec<_> = handles
            .iter()
            .map(|handle| {
                scope.spawn(move || {
                    let mut stored = 0;
                    let started = Instant::now();
                    while started.elapsed() < Duration::from_millis(1000) {
                        stored += handle.run_due_schedules().unwrap();
                    }
                    stored
                })
            })
            .collect();
        drivers
            .into_iter()
            .map(|driver| driver.join().unwrap())
            .sum()
    });
    queue.remove_schedule("race").unwrap();
    let tasks = drain(&queue);
    let slots = slots_of(&tasks, r#""race""#);
    assert_eq!(stored as usize, slots.len());
    assert!(slots.len() >= 30, "{} slots", slots.len());
    for pair in slots.windows(2) {
        assert_eq!(pair[1] - pair[0], 20, "slot missed: {slots:?}");
    }
}

/// An application declares its schedules at every start: declaring one
/// again unchanged keeps its next slot (a restart neither delays an
/// interval nor skips a due slot); a new payload keeps it too; a new timing
/// starts afresh; a pause stays.
fn upsert_declares_a_schedule_and_keeps_its_next_slot(scratch: Scratch) {
    let queue = scratch.open();
    let next_slot = |queue: &Queue| {
        let listed = queue.schedules().unwrap();
        assert_eq!(listed.len(), 1);
        (listed[0].next_slot_unix_ms(), listed[0].paused())
    };
    queue
        .upsert_schedule(&every("hourly", 3_600_000, "1"))
        .unwrap();
    let (first, _) = next_slot(&queue);
    thread::sleep(Duration::from_millis(20));
    let restarted = scratch.open();
    restarted
        .upsert_schedule(&every("hourly", 3_600_000, "1"))
        .unwrap();
    assert_eq!(
        next_slot(&restarted),
        (first, false),
        "declared again: same slot"
    );
    restarted
        .upsert_schedule(&every("hourly", 3_600_000, "2"))
        .unwrap();
    assert_eq!(
        next_slot(&restarted),
        (first, false),
        "a new payload keeps the slot"
    );
    assert_eq!(restarted.schedules().unwrap()[0].schedule().payload(), "2");
    restarted.pause_schedule("hourly").unwrap();
    restarted
        .upsert_schedule(&every("hourly", 3_600_000, "2"))
        .unwrap();
    assert_eq!(next_slot(&restarted), (first, true), "a pause stays");
    restarted
        .upsert_schedule(&every("hourly", 7_200_000, "2"))
        .unwrap();
    let (changed, paused) = next_slot(&restarted);
    assert!(changed > first, "a new interval starts afresh from now");
    assert!(paused);
    // Replace, by contrast, computes the slot afresh every time.
    thread::sleep(Duration::from_millis(20));
    restarted
        .replace_schedule(&every("hourly", 7_200_000, "2"))
        .unwrap();
    assert!(next_slot(&restarted).0 > changed);
}

on_both_backends!(
    upsert_declares_a_schedule_and_keeps_its_next_slot,
    schedules_are_added_listed_replaced_and_removed,
    bad_input_is_refused_and_stores_nothing,
    pulls_enqueue_each_slot_once_at_its_time,
    a_waiting_pull_wakes_at_the_next_slot,
    missed_slots_follow_the_catch_up_policy,
    a_paused_schedule_skips_its_slots_until_resumed,
    a_schedule_stored_damaged_is_paused_and_pulls_go_on,
    handles_racing_to_drive_enqueue_each_slot_once,
);
