//! Several processes on one file: no task goes to two holders, a crashed
//! holder's tasks come back, a live holder's tasks do not, a handle is
//! refused after fork().
//!
//! Child processes are this test binary run again with `TQ_TEST_CHILD` set:
//! the `child_process` test then plays the role named there and exits.

mod common;

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{lease, push, Scratch};
use tq::{Durability, ErrorKind, OpenOptions, PullOptions, Queue, TaskState};

fn open(path: &str) -> Queue {
    Queue::open(path, OpenOptions::new().durability(Durability::Normal)).expect("open")
}

/// Runs a role in a child process: `worker` drains the queue and prints the
/// ids it finished; `crash` takes a task and exits without finishing it;
/// `hold` takes a task and keeps it until its standard input closes.
#[test]
fn child_process() {
    let Ok(role) = std::env::var("TQ_TEST_CHILD") else {
        return; // Not a child: nothing to do in the parent's run.
    };
    let queue = open(&std::env::var("TQ_TEST_PATH").unwrap());
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
        other => panic!("unknown child role {other}"),
    }
    // Exit without running destructors, as a crashed process would.
    std::process::exit(0);
}

fn spawn(role: &str, path: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TQ_TEST_CHILD", role)
        .env("TQ_TEST_PATH", path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn a child process")
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
fn a_handle_is_refused_in_a_child_after_fork() {
    let scratch = Scratch::new();
    let path = scratch.queue_path();
    let queue = open(&path);
    push(&queue, "1");

    // SAFETY: the child only calls tq and exits with _exit.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let refused = |kind: Option<ErrorKind>| kind == Some(ErrorKind::InvalidArgument);
        let mut ok = refused(queue.push("2", &Default::default()).err().map(|e| e.kind()));
        ok &= queue.pull(&PullOptions::new()).err().is_some_and(|e| {
            e.kind() == ErrorKind::InvalidArgument && e.message().contains("fork")
        });
        ok &= refused(queue.count(TaskState::Pending).err().map(|e| e.kind()));
        // A new handle opened in the child works.
        ok &= open(&path).count(TaskState::Pending).ok() == Some(1);
        drop(queue); // leaves the parent's connection alone
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child saw a wrong answer"
    );
    // The parent's handle is unharmed.
    push(&queue, "3");
    assert_eq!(queue.count(TaskState::Pending).unwrap(), 2);
}
