//! `tq backup`: a consistent copy of a live queue file, taken while another
//! thread keeps pushing.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use common::Fixture;
use tq::{OpenOptions, PushOptions, Queue, TaskState};

const ACKNOWLEDGED: i64 = 500;

#[test]
fn a_backup_taken_during_pushes_holds_every_acknowledged_task_and_is_intact() {
    let fixture = Fixture::new();
    let queue = Queue::open(fixture.file(), &OpenOptions::new()).unwrap();
    let payloads: Vec<String> = (1..=ACKNOWLEDGED)
        .map(|n| format!("{{\"n\":{n}}}"))
        .collect();
    queue.push_batch(&payloads, &PushOptions::new()).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let pusher = {
        let (stop, file) = (stop.clone(), fixture.file().to_owned());
        thread::spawn(move || {
            let queue = Queue::open(&file, &OpenOptions::new()).unwrap();
            let mut pushed = 0u64;
            while !stop.load(Ordering::SeqCst) || pushed == 0 {
                queue.push("{\"late\":true}", &PushOptions::new()).unwrap();
                pushed += 1;
            }
            pushed
        })
    };
    let copy = fixture.path("copy.db");
    fixture
        .tq("backup", &[copy.to_str().unwrap()])
        .assert()
        .success();
    stop.store(true, Ordering::SeqCst);
    assert!(pusher.join().unwrap() > 0);

    let check = tq::rusqlite::Connection::open(&copy).unwrap();
    let integrity: String = check
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    drop(check);
    let copied = Queue::open(copy.to_str().unwrap(), &OpenOptions::new()).unwrap();
    let ids: Vec<i64> = copied
        .list(TaskState::Pending, 0, ACKNOWLEDGED as usize)
        .unwrap()
        .iter()
        .map(|task| task.id())
        .collect();
    assert_eq!(ids, (1..=ACKNOWLEDGED).collect::<Vec<_>>());
}

#[test]
fn a_backup_refuses_an_existing_destination_and_postgres() {
    let fixture = Fixture::new();
    fixture.push_numbers(1, "default", &[]);
    let taken = fixture.path("taken.db");
    std::fs::write(&taken, "keep me").unwrap();
    fixture
        .tq("backup", &[taken.to_str().unwrap()])
        .assert()
        .code(1)
        .stderr(predicates::str::contains("already exists"));
    assert_eq!(std::fs::read_to_string(&taken).unwrap(), "keep me");

    let output = assert_cmd::Command::cargo_bin("tq")
        .unwrap()
        .args([
            "backup",
            "postgres://alice:s3cret@127.0.0.1:1/db",
            "copy.db",
        ])
        .current_dir(fixture.dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(message.contains("pg_dump"), "{message}");
    assert!(!message.contains("s3cret"), "{message}");
    assert!(!fixture.path("copy.db").exists());
}
