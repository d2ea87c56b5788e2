//! Several processes on one file: no task goes to two holders, a crashed
//! holder's tasks come back, a live holder's tasks do not, a handle is
//! refused after fork().
//!
//! Child processes are this test binary run again with `TQ_TEST_CHILD` set:
//! the `child_process` test then plays the role named there and exits. The
//! fork() scenarios run in such a child too: forking the test harness itself,
//! while other tests' threads may hold locks, could hang the forked process.

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{lease, push, Scratch};
use tq::{Durability, ErrorKind, OpenOptions, PullOptions, PushOptions, Queue, TaskState};

fn open(path: &str) -> Queue {
    Queue::open(path, OpenOptions::new().durability(Durability::Normal)).expect("open")
}

/// Runs a role in a child process: `worker` drains the queue and prints the
/// ids it finished; `crash` takes a task and exits without finishing it;
/// `hold` takes a task and keeps it until its standard input closes; `open`
/// only opens the queue and prints the outcome; `push` pushes one task
/// after a pause and prints its id.
#[test]
fn child_process() {
    let Ok(role) = std::env::var("TQ_TEST_CHILD") else {
        return; // Not a child: nothing to do in the parent's run.
    };
    let path = std::env::var("TQ_TEST_PATH").unwrap();
    if role == "open" {
        match Queue::open(&path, &OpenOptions::new()) {
            Ok(_) => println!("opened"),
            Err(err) => println!("refused: {:?}: {err}", err.kind()),
        }
        std::process::exit(0);
    }
    let queue = open(&path);
    match role.as_str() {
        "worker" => {
            let mut idle = 0;
            while idle < 20 {
                match queue.pull(&PullOptions::new()).unwrap() {
                    Some(task) => {
                        queue.finish(task.receipt()).unwrap();
                        println!("finished {}", task.id());
                        idle = 0;
                    }
                    None => {
                        idle += 1;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }
        "crash" | "hold" => {
            let task = queue
                .pull(&lease(600_000))
                .unwrap()
                .expect("a task to hold");
            println!("holding {}", task.id());
            if role == "hold" {
                std::io::stdin().read_to_end(&mut Vec::new()).unwrap();
            }
        }
        "push-many" => {
            // Eight threads push until killed, printing each acknowledged id.
            let queue = std::sync::Arc::new(
                Queue::open(&path, OpenOptions::new().durability(Durability::Full)).unwrap(),
            );
            let threads: Vec<_> = (0..8)
                .map(|t| {
                    let queue = std::sync::Arc::clone(&queue);
                    std::thread::spawn(move || {
                        for i in 0.. {
                            let id = push(&queue, &format!("[{t}, {i}]"));
                            println!("acknowledged {id}");
                        }
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
        }
        "push" => {
            std::thread::sleep(Duration::from_millis(300));
            println!("pushed {}", push(&queue, "\"from another process\""));
        }
        "fork-refused" => fork_refused(queue),
        "fork-parent-closes-first" => fork_parent_closes_first(queue),
        other => panic!("unknown child role {other}"),
    }
    // Exit without running destructors, as a crashed process would.
    std::process::exit(0);
}

fn spawn(role: &str, path: &str) -> Child {
    child_command(role, path)
        .spawn()
        .expect("spawn a child process")
}

fn child_command(role: &str, path: &str) -> Command {
    child_command_of(&std::env::current_exe().unwrap(), role, path)
}

/// As [`child_command`], running the test binary found at `exe`.
fn child_command_of(exe: &std::path::Path, role: &str, path: &str) -> Command {
    let mut command = common::child_command_of(exe, role);
    command
        .env("TQ_TEST_PATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    command
}

/// The task id the child prints after `prefix` (the test harness may have
/// printed on the same line before it).
fn read_id(child: &mut Child, prefix: &str) -> i64 {
    let stdout = child.stdout.as_mut().unwrap();
    let mut line = String::new();
    let mut reader = BufReader::new(stdout);
    loop {
        line.clear();
        assert!(
            reader.read_line(&mut line).unwrap() > 0,
            "child ended before '{prefix}'"
        );
        if let Some((_, id)) = line.split_once(prefix) {
            return id.trim().parse().unwrap();
        }
    }
}

#[test]
fn processes_draining_one_file_finish_each_task_exactly_once() {
    const TASKS: usize = 600;
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    let queue = open(&path);
    let pushed: HashSet<i64> = (0..TASKS).map(|i| push(&queue, &i.to_string())).collect();

    let children: Vec<Child> = (0..3).map(|_| spawn("worker", &path)).collect();
    let mut finished = Vec::new();
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
        let text = String::from_utf8(output.stdout).unwrap();
        finished.extend(text.lines().filter_map(|line| {
            line.split_once("finished ")
                .map(|(_, id)| id.trim().parse::<i64>().unwrap())
        }));
    }
    let distinct: HashSet<i64> = finished.iter().copied().collect();
    assert_eq!(finished.len(), TASKS, "every task finished once");
    assert_eq!(distinct, pushed, "exactly the pushed tasks");
    assert_eq!(
        queue.count(TaskState::Pending).unwrap() + queue.count(TaskState::Leased).unwrap(),
        0
    );
}

#[test]
fn tasks_of_a_crashed_process_are_recovered() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    let queue = open(&path);
    let id = push(&queue, "\"crashes\"");
    let mut child = spawn("crash", &path);
    assert_eq!(read_id(&mut child, "holding "), id);
    assert!(child.wait().unwrap().success());

    assert!(
        queue.pull(&PullOptions::new()).unwrap().is_none(),
        "still leased"
    );
    assert_eq!(queue.recover().unwrap(), 1);
    let task = queue.pull(&PullOptions::new()).unwrap().expect("recovered");
    assert_eq!(
        (task.id(), task.attempts()),
        (id, 2),
        "the crashed delivery counts"
    );
    assert_eq!(queue.recover().unwrap(), 0, "own live tasks are untouched");
}

#[test]
fn tasks_of_a_live_process_are_not_recovered_until_it_dies() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    let queue = open(&path);
    let id = push(&queue, "\"held\"");
    let mut child = spawn("hold", &path);
    assert_eq!(read_id(&mut child, "holding "), id);

    // A second process starting up and recovering, as the prototype did at
    // every start, must not take the live holder's task.
    assert_eq!(open(&path).recover().unwrap(), 0);
    assert_eq!(queue.count(TaskState::Leased).unwrap(), 1);

    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(queue.recover().unwrap(), 1);
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 1);
}

#[test]
fn a_push_from_another_process_wakes_a_waiting_pull() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    let queue = open(&path);
    let mut child = spawn("push", &path);
    let mut waiting = PullOptions::new();
    waiting.wait(Duration::from_secs(60)).unwrap();
    let started = std::time::Instant::now();
    let task = queue
        .pull(&waiting)
        .unwrap()
        .expect("woken by the other process's push");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "not by the timeout"
    );
    assert_eq!(task.id(), read_id(&mut child, "pushed "));
    assert!(child.wait().unwrap().success());
}

#[test]
fn a_task_that_crashes_every_worker_ends_dead() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    let queue = open(&path);
    let mut three = PushOptions::new();
    three.max_attempts(3).unwrap();
    let id = queue.push("\"poison\"", &three).unwrap().id();
    for crash in 1..=3 {
        let mut child = spawn("crash", &path);
        assert_eq!(read_id(&mut child, "holding "), id);
        assert!(child.wait().unwrap().success());
        assert_eq!(queue.recover().unwrap(), 1);
        let state = if crash < 3 {
            TaskState::Pending
        } else {
            TaskState::Dead
        };
        assert_eq!(queue.count(state).unwrap(), 1, "after crash {crash}");
    }
    let dead = queue.list(TaskState::Dead, 0, 1).unwrap();
    assert_eq!((dead[0].id(), dead[0].attempts()), (id, 3));
    assert_eq!(
        dead[0].last_error(),
        Some("the process holding delivery 3 died")
    );
    assert!(queue.pull(&PullOptions::new()).unwrap().is_none());
}

#[test]
fn a_crash_during_group_commits_loses_no_acknowledged_push() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    drop(open(&path));
    for round in 0..3 {
        let mut child = spawn("push-many", &path);
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(|line| line.ok())
                .filter_map(|line| {
                    line.split_once("acknowledged ")
                        .map(|(_, id)| id.trim().parse::<i64>().unwrap())
                })
                .collect::<Vec<i64>>()
        });
        std::thread::sleep(Duration::from_millis(300 + 100 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        let acknowledged = reader.join().unwrap();
        assert!(
            acknowledged.len() > 8,
            "round {round}: the child pushed while killed"
        );
        let queue = open(&path);
        let mut stored = HashSet::new();
        let mut after = 0;
        loop {
            let page = queue.list(TaskState::Pending, after, 1000).unwrap();
            stored.extend(page.iter().map(|task| task.id()));
            match page.last() {
                Some(last) => after = last.id(),
                None => break,
            }
        }
        let lost: Vec<_> = acknowledged
            .iter()
            .filter(|id| !stored.contains(id))
            .collect();
        assert!(
            lost.is_empty(),
            "round {round}: acknowledged but lost: {lost:?}"
        );
    }
}

/// Runs a fork() scenario in a fresh process and checks that it succeeded.
fn run_fork_scenario(role: &str) {
    let scratch = Scratch::new();
    let output = spawn(role, &scratch.queue_path())
        .wait_with_output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{role} failed:\n{stdout}");
    assert!(
        stdout.contains("scenario passed"),
        "{role} did not finish:\n{stdout}"
    );
}

/// Forks and runs `child` in the forked process; returns whether it exited
/// with status 0.
fn in_forked_child(child: impl FnOnce() -> bool, parent: impl FnOnce(libc::pid_t)) -> bool {
    // SAFETY: only this thread runs tq code in this process (see the module
    // comment); the child exits with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let ok = child();
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    parent(pid);
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

fn fork_refused(queue: Queue) {
    let path = std::env::var("TQ_TEST_PATH").unwrap();
    push(&queue, "1");
    let child_ok = in_forked_child(
        || {
            let refused = |err: Option<tq::Error>| {
                err.is_some_and(|e| {
                    e.kind() == ErrorKind::InvalidArgument && e.message().contains("fork")
                })
            };
            let mut ok = refused(queue.push("2", &Default::default()).err());
            ok &= refused(queue.pull(&PullOptions::new()).err());
            ok &= refused(queue.count(TaskState::Pending).err());
            // A handle opened in the child works.
            ok &= open(&path).count(TaskState::Pending).ok() == Some(1);
            ok
        },
        |_| {},
    );
    assert!(child_ok, "the child saw a wrong answer");
    // The parent's handle is unharmed.
    push(&queue, "3");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 2);
    println!("scenario passed");
}

fn fork_parent_closes_first(parent_queue: Queue) {
    let path = std::env::var("TQ_TEST_PATH").unwrap();
    push(&parent_queue, "\"from the parent\"");
    let (to_parent, to_child) = (pipe(), pipe());
    let mut parent_queue = Some(parent_queue);
    let child_ok = in_forked_child(
        || {
            let child_queue = open(&path);
            signal(to_parent[1]);
            wait_for(to_child[0]); // the parent has closed its handle
            child_queue
                .push("\"from the child\"", &Default::default())
                .is_ok()
        },
        |_| {
            wait_for(to_parent[0]);
            drop(parent_queue.take());
            signal(to_child[1]);
        },
    );
    assert!(child_ok, "the child's push failed");
    let after = open(&path);
    assert_eq!(
        after.count(TaskState::Pending).unwrap(),
        2,
        "the child's push was kept"
    );
    println!("scenario passed");
}

#[test]
fn a_handle_is_refused_in_a_child_after_fork() {
    run_fork_scenario("fork-refused");
}

#[test]
fn a_child_handle_keeps_its_writes_when_the_parent_closes_first() {
    run_fork_scenario("fork-parent-closes-first");
}

/// Blocks until one byte arrives on `fd`.
fn wait_for(fd: libc::c_int) {
    let mut byte = 0u8;
    assert_eq!(
        unsafe { libc::read(fd, (&mut byte as *mut u8).cast(), 1) },
        1
    );
}

fn signal(fd: libc::c_int) {
    assert_eq!(unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) }, 1);
}

fn pipe() -> [libc::c_int; 2] {
    let mut fds = [0; 2];
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    fds
}

/// What opening `path` gives a process that may not write there: as root
/// (who may write anywhere), a child running as user `nobody`.
fn open_without_write_permission(path: &str) -> String {
    // `nobody` may not be able to reach the test binary where it was built
    // (a checkout in a private directory): it runs a copy everyone can read.
    let copy = tempfile::tempdir().expect("a directory for the binary");
    let mut command = if unsafe { libc::geteuid() } == 0 {
        use std::os::unix::process::CommandExt;
        set_mode(copy.path(), 0o755);
        let exe = copy.path().join("tq-test");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).expect("copy the test binary");
        let mut command = child_command_of(&exe, "open", path);
        command.uid(65534).gid(65534);
        command
    } else {
        child_command("open", path)
    };
    let output = command.output().expect("run the child");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_read_only_file_or_directory_gives_an_io_error_and_is_left_untouched() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    push(&open(&path), "1");
    let dir = std::path::Path::new(&path).parent().unwrap().to_owned();
    let before = std::fs::read(&path).unwrap();
    set_mode(&dir, 0o555);
    set_mode(std::path::Path::new(&path), 0o444);

    let outcome = open_without_write_permission(&path);
    assert!(outcome.contains("refused: Io"), "read-only file: {outcome}");
    let new_file = dir.join("new.db");
    let outcome = open_without_write_permission(new_file.to_str().unwrap());
    assert!(
        outcome.contains("refused: Io"),
        "read-only directory: {outcome}"
    );

    set_mode(&dir, 0o755);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "byte-for-byte untouched"
    );
    assert!(!new_file.exists());
}
