//! What tq does with the file itself: foreign files, newer schemas, shared
//! application files, locks held by others.

mod common;

use std::fs;
use std::time::{Duration, Instant};

use common::{push, Scratch};
use rusqlite::Connection;
use tq::{Durability, ErrorKind, OpenOptions, PullOptions, PushOptions, Queue, TaskState};

fn side_files_exist(path: &str) -> bool {
    fs::metadata(format!("{path}-wal")).is_ok() || fs::metadata(format!("{path}-shm")).is_ok()
}

#[test]
fn a_file_that_is_not_a_database_is_refused_and_left_untouched() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    let text = "this is not a database\n".repeat(200);
    fs::write(&path, &text).unwrap();
    let err = Queue::open(&path, &OpenOptions::new())
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::NotADatabase, "{err}");
    assert!(err.message().contains(&path), "names the file: {err}");
    assert_eq!(fs::read_to_string(&path).unwrap(), text);
    assert!(!side_files_exist(&path));
}

#[test]
fn a_newer_schema_is_refused_and_left_untouched() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    push(&scratch.open(), "1");
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE tq_meta SET value = 99 WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
        conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
            .unwrap();
    }
    let before = fs::read(&path).unwrap();
    let err = Queue::open(&path, &OpenOptions::new())
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::NotADatabase);
    assert!(err.message().contains("99"), "{err}");
    assert_eq!(fs::read(&path).unwrap(), before, "byte-for-byte untouched");
}

#[test]
fn a_negative_schema_version_is_refused() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    push(&scratch.open(), "1");
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE tq_meta SET value = -5 WHERE key = 'schema_version'",
            [],
        )
        .unwrap();
    let err = Queue::open(&path, &OpenOptions::new())
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::NotADatabase, "{err}");
}

#[test]
fn a_tq_meta_table_without_a_version_is_refused() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE tq_meta (key TEXT PRIMARY KEY, value INTEGER)")
        .unwrap();
    let err = Queue::open(&path, &OpenOptions::new())
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::NotADatabase);
}

#[test]
fn tq_shares_an_application_file_without_touching_its_tables() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT);
             INSERT INTO orders (item) VALUES ('tea'), ('cake');
             CREATE TABLE tasks (name TEXT);
             CREATE TABLE meta (key TEXT);
             PRAGMA user_version = 7;",
        )
        .unwrap();
    }
    let queue = Queue::open(&path, &OpenOptions::new()).unwrap();
    push(&queue, "{\"order\": 1}");
    drop(queue);
    let conn = Connection::open(&path).unwrap();
    let items: Vec<String> = conn
        .prepare("SELECT item FROM orders ORDER BY id")
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(items, ["tea", "cake"]);
    let user_version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(
        user_version, 7,
        "PRAGMA user_version belongs to the application"
    );
    let tables: Vec<String> = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' \
             AND name NOT IN ('orders', 'tasks', 'meta', 'sqlite_sequence') ORDER BY name",
        )
        .unwrap()
        .query_map([], |row| row.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(tables.iter().all(|t| t.starts_with("tq_")), "{tables:?}");
}

#[test]
fn bad_paths_give_clear_errors() {
    let scratch = Scratch::new();
    let err = Queue::open("", &OpenOptions::new()).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    let err = Queue::open(":memory:", &OpenOptions::new()).err().unwrap();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("WAL"), "{err}");
    let missing_dir = scratch.path("no/such/dir/queue.db");
    let err = Queue::open(missing_dir.to_str().unwrap(), &OpenOptions::new())
        .err()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
    let dir = scratch.path("");
    let err = Queue::open(dir.to_str().unwrap(), &OpenOptions::new())
        .err()
        .unwrap();
    assert_eq!(err.kind(), ErrorKind::Io, "{err}");
}

#[test]
fn a_writer_holding_the_lock_past_the_busy_timeout_gives_busy_and_changes_nothing() {
    let scratch = Scratch::new();
    let mut options = OpenOptions::new();
    options.busy_timeout(Duration::from_millis(200)).unwrap();
    let queue = scratch.open_with(&options);
    push(&queue, "1");
    let task = queue.pull(&PullOptions::new()).unwrap().unwrap();

    let blocker = Connection::open(scratch.queue_path()).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = Instant::now();
    let err = queue.push("2", &PushOptions::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Busy, "{err}");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "waited the busy timeout first"
    );
    assert_eq!(
        queue.finish(task.receipt()).unwrap_err().kind(),
        ErrorKind::Busy
    );
    assert_eq!(
        queue.pull(&PullOptions::new()).unwrap_err().kind(),
        ErrorKind::Busy
    );
    assert_eq!(queue.recover().unwrap_err().kind(), ErrorKind::Busy);
    blocker.execute_batch("COMMIT").unwrap();

    assert_eq!(
        queue.count(TaskState::Pending).unwrap(),
        0,
        "the failed push stored nothing"
    );
    assert_eq!(
        queue.count(TaskState::Leased).unwrap(),
        1,
        "the failed finish changed nothing"
    );
    queue.finish(task.receipt()).unwrap();
    push(&queue, "2");
}

#[test]
fn a_writer_that_lets_go_within_the_busy_timeout_is_waited_for() {
    let scratch = Scratch::new();
    let queue = scratch.open();
    let blocker = Connection::open(scratch.queue_path()).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        blocker.execute_batch("COMMIT").unwrap();
    });
    push(&queue, "1");
    release.join().unwrap();
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
}

#[test]
fn opening_a_current_queue_file_writes_nothing() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    push(&scratch.open(), "1");
    let conn = Connection::open(&path).unwrap();
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
        .unwrap();
    let before = (
        fs::read(&path).unwrap(),
        fs::read(format!("{path}-wal")).unwrap(),
    );
    let queue = scratch.open();
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
    let after = (
        fs::read(&path).unwrap(),
        fs::read(format!("{path}-wal")).unwrap(),
    );
    assert!(
        before == after,
        "open and count wrote to the file or its WAL"
    );
}

#[test]
fn an_empty_file_becomes_a_new_queue() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    fs::write(&path, b"").unwrap();
    let queue = Queue::open(&path, &OpenOptions::new()).unwrap();
    push(&queue, "1");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
}

/// A damaged queue file gives NotADatabase, at open or at the first call
/// that reads the damage; never a panic, never another kind of answer. A
/// file refused at open is left as it was (later calls may have changed
/// the undamaged part legitimately first).
fn assert_refused_as_damaged(path: &str) {
    let before = fs::read(path).unwrap();
    let err = match Queue::open(path, &OpenOptions::new()) {
        Err(err) => {
            assert!(
                fs::read(path).unwrap() == before,
                "refused at open, yet changed"
            );
            err
        }
        Ok(queue) => {
            let drain = || -> tq::Result<u64> {
                for _ in 0..200 {
                    if let Some(task) = queue.pull(&PullOptions::new())? {
                        queue.finish(task.receipt())?;
                    }
                }
                queue.count(TaskState::Pending)
            };
            drain().expect_err("the damage was noticed")
        }
    };
    assert_eq!(err.kind(), ErrorKind::NotADatabase, "{err}");
}

fn damaged_copy(scratch: &Scratch, damage: impl FnOnce(&mut Vec<u8>)) -> String {
    let source = scratch.queue_path();
    {
        let queue = scratch.open();
        for i in 0..200 {
            push(
                &queue,
                &format!("{{\"n\": {i}, \"padding\": \"{}\"}}", "x".repeat(200)),
            );
        }
    }
    let conn = Connection::open(&source).unwrap();
    conn.pragma_update(None, "wal_checkpoint", "TRUNCATE")
        .unwrap();
    drop(conn);
    let mut bytes = fs::read(&source).unwrap();
    damage(&mut bytes);
    let path = scratch.path("damaged.db");
    fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn a_truncated_queue_file_is_refused() {
    let scratch = Scratch::new();
    let path = damaged_copy(&scratch, |bytes| bytes.truncate(bytes.len() / 2));
    assert_refused_as_damaged(&path);
}

#[test]
fn a_queue_file_with_overwritten_pages_is_refused() {
    let scratch = Scratch::new();
    let path = damaged_copy(&scratch, |bytes| {
        // The root page of the tasks' table and the page after it, which
        // every claim reads (a page picked by its place in the file may
        // belong to a table nothing here reads).
        let root: i64 = Connection::open(scratch.queue_path())
            .unwrap()
            .query_row(
                "SELECT rootpage FROM sqlite_schema WHERE name = 'tq_tasks'",
                [],
                |row| row.get(0),
            )
            .unwrap();
        let page_size = match u16::from_be_bytes([bytes[16], bytes[17]]) {
            1 => 65536,
            size => usize::from(size),
        };
        let start = (root as usize - 1) * page_size;
        bytes[start..start + 2 * page_size].fill(0xA5);
    });
    assert_refused_as_damaged(&path);
}

#[test]
fn a_waiting_pull_woken_by_a_write_that_readies_nothing_takes_no_write_lock() {
    let scratch = Scratch::new();
    let mut options = OpenOptions::new();
    options.busy_timeout(Duration::from_millis(100)).unwrap();
    let queue = scratch.open_with(&options);
    let other = Connection::open(scratch.queue_path()).unwrap();
    other.execute_batch("CREATE TABLE app (x)").unwrap();

    let mut wait = PullOptions::new();
    wait.wait(Duration::from_millis(1500)).unwrap();
    let waiter = std::thread::spawn(move || queue.pull(&wait));
    // Past the waiter's first, empty claim.
    std::thread::sleep(Duration::from_millis(200));
    // A commit that wakes the waiter but readies no task, then the write
    // lock held past the busy timeout: a waiter that claimed on every
    // wake-up would meet the lock and fail with busy.
    other
        .execute_batch("INSERT INTO app VALUES (1); BEGIN IMMEDIATE; INSERT INTO app VALUES (2)")
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    other.execute_batch("COMMIT").unwrap();
    let pulled = waiter.join().unwrap();
    assert!(matches!(pulled, Ok(None)), "{pulled:?}");
}

#[test]
fn a_queue_file_switched_out_of_wal_mode_opens_and_works() {
    // A copy made with VACUUM INTO, or a file another program set to a
    // rollback journal, is switched back at open.
    let scratch = Scratch::new();
    push(&scratch.open(), "1");
    let conn = Connection::open(scratch.queue_path()).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode = DELETE", [], |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    drop(conn);
    // At `full`, which flushes the WAL itself.
    let queue = scratch.open_with(OpenOptions::new().durability(Durability::Full));
    push(&queue, "2");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 2);
}
