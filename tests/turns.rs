//! The turns' shared page against hostile or broken files: nothing beside
//! the database is kept for it, so nothing planted or emptied there can
//! crash a process or make it write elsewhere; a file planted at the page's
//! own path is refused.
//!
//! The scenarios that used to crash a process (SIGBUS) run in a child
//! process, this test binary run again with `TQ_TEST_CHILD` set, so that a
//! crash is reported as a failure.

mod common;

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{push, Scratch};
use tq::{Durability, OpenOptions, PullOptions, Queue, TaskState};

/// Where tq keeps the turns of the database file at `db`.
fn page_path(db: &str) -> PathBuf {
    let db = std::fs::metadata(db).expect("the database exists");
    PathBuf::from(format!("/dev/shm/tq-turns-{:x}-{:x}", db.dev(), db.ino()))
}

/// The file 0.2 kept beside the database.
fn old_turn_file(db: &str) -> PathBuf {
    PathBuf::from(format!("{db}-tqturn"))
}

/// Pushes a task, then pulls and finishes one: the queue works.
fn round_trip(queue: &Queue) {
    let pending = queue.count(TaskState::Pending).unwrap();
    push(queue, "\"round trip\"");
    let task = queue.pull(&PullOptions::new()).unwrap().expect("a task");
    queue.finish(task.receipt()).unwrap();
    assert_eq!(queue.count(TaskState::Pending).unwrap(), pending);
}

/// Plays the role named by `TQ_TEST_CHILD` on the file `TQ_TEST_PATH`,
/// printing "scenario passed" at the end.
#[test]
fn child_process() {
    let Ok(role) = std::env::var("TQ_TEST_CHILD") else {
        return; // Not a child: nothing to do in the parent's run.
    };
    let path = std::env::var("TQ_TEST_PATH").unwrap();
    let open = |busy_ms| {
        let mut options = OpenOptions::new();
        options
            .durability(Durability::Normal)
            .busy_timeout(Duration::from_millis(busy_ms))
            .unwrap();
        Queue::open(&path, &options).expect("open")
    };
    let queue = open(5000);
    match role.as_str() {
        "empty-old-turn-file" => {
            push(&queue, "1");
            // `: > jobs.db-tqturn`, then a `cp` of something else onto it.
            std::fs::File::create(old_turn_file(&path)).unwrap();
            push(&queue, "2");
            std::fs::write(old_turn_file(&path), [0xa5; 100]).unwrap();
            push(&queue, "3");
            assert_eq!(queue.count(TaskState::Pending).unwrap(), 3);
        }
        "truncate-page-in-use" => {
            push(&queue, "1");
            let page = page_path(&path);
            std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&page)
                .expect("the turns' page exists while the queue is open");
            // Another handle on the file (another busy timeout: its own
            // connection and turns) opens it as a new process would.
            let other = open(4000);
            round_trip(&other);
            push(&other, "2");
            assert_eq!(other.count(TaskState::Pending).unwrap(), 2);
        }
        _ => panic!("unknown role {role}"),
    }
    println!("scenario passed");
    // Without dropping `queue`, whose page is truncated under it.
    std::process::exit(0);
}

fn run_child(role: &str, path: &str) {
    let output = common::child_command(role)
        .env("TQ_TEST_PATH", path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("scenario passed"),
        "{role}: {}\n{stdout}\n{stderr}",
        output.status
    );
}

#[test]
fn emptying_or_overwriting_the_old_turn_file_does_not_crash() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    run_child("empty-old-turn-file", &path);
    assert_eq!(scratch.open().count(TaskState::Pending).unwrap(), 3);
}

#[test]
fn the_turns_are_kept_in_shared_memory_and_removed_with_the_last_handle() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    let queue = scratch.open();
    round_trip(&queue);
    assert!(!old_turn_file(&path).exists(), "a file beside the database");
    let page = page_path(&path);
    assert!(page.exists(), "no page at {page:?}");
    drop(queue);
    assert!(!page.exists(), "{page:?} left behind");
}

#[test]
fn a_page_truncated_in_use_is_refused_by_the_next_opener_and_rebuilt_later() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    drop(scratch.open());
    run_child("truncate-page-in-use", &path);
    // The child left its truncated page; the next opener alone rebuilds it.
    let queue = scratch.open();
    round_trip(&queue);
    assert_eq!(
        std::fs::metadata(page_path(&path)).unwrap().len(),
        4096,
        "not rebuilt"
    );
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 2);
}

/// A file with known bytes, to check that tq leaves it untouched.
fn precious(dir: &Path) -> (PathBuf, Vec<u8>) {
    let target = dir.join("precious");
    let bytes = b"precious bytes, not a turn file".to_vec();
    std::fs::write(&target, &bytes).unwrap();
    (target, bytes)
}

#[test]
fn a_symlink_at_the_old_turn_path_is_not_followed() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    let (target, bytes) = precious(&scratch.path(""));
    std::os::unix::fs::symlink(&target, old_turn_file(&path)).unwrap();
    round_trip(&scratch.open());
    assert_eq!(std::fs::read(&target).unwrap(), bytes);
}

#[test]
fn a_symlink_at_the_page_path_is_refused_and_not_followed() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    drop(scratch.open());
    let (target, bytes) = precious(&scratch.path(""));
    let page = page_path(&path);
    std::os::unix::fs::symlink(&target, &page).unwrap();
    let queue = scratch.open();
    round_trip(&queue);
    drop(queue);
    let planted = std::fs::symlink_metadata(&page).map(|m| m.file_type().is_symlink());
    std::fs::remove_file(&page).unwrap();
    assert_eq!(std::fs::read(&target).unwrap(), bytes);
    assert!(planted.unwrap(), "the planted symlink was replaced");
}

#[test]
fn a_page_planted_by_another_user_is_refused_and_untouched() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        let _ = writeln!(
            std::io::stderr(),
            "skipped a_page_planted_by_another_user_is_refused_and_untouched: \
             needs root to give a file to another user"
        );
        return;
    }
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    drop(scratch.open());
    let page = page_path(&path);
    let planted = vec![0x5a; 4096];
    std::fs::write(&page, &planted).unwrap();
    std::os::unix::fs::chown(&page, Some(54321), Some(54321)).unwrap();
    let queue = scratch.open();
    round_trip(&queue);
    drop(queue);
    let found = std::fs::read(&page);
    std::fs::remove_file(&page).unwrap();
    assert_eq!(found.unwrap(), planted);
}
