//! A child forked while other threads of its parent are inside tq calls
//! never hangs: each of its calls succeeds or fails with the documented
//! `TQ_ERR_INVALID_ARGUMENT` naming the fork.
//!
//! The scenario runs in a fresh run of this test binary (`TQ_FORK_SCENARIO`
//! set), so that the only threads inside tq at fork() are the scenario's
//! own. It goes through the C ABI, so that every global lock is taken: the
//! live-object registry, the shared files, the bells, the connection slots
//! and, on PostgreSQL, the listeners and the pools.

mod common;

use std::ffi::{CStr, CString};
use std::process::Command;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{postgres_url, Scratch};
use tq::ffi::*;

/// Children forked per scenario.
const CHILDREN: usize = 300;

/// Threads busy in tq calls while the children are forked.
const BUSY_THREADS: usize = 8;

/// Children alive at once.
const AT_ONCE: usize = 4;

/// A child still running after this long is counted as hung and killed.
/// Far above what its three calls take, even under a loaded machine.
const CHILD_DEADLINE: Duration = Duration::from_secs(20);

/// What one call in a child got, packed into its exit status.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Outcome {
    Ok = 0,
    /// `TQ_ERR_INVALID_ARGUMENT` with a message that names the fork.
    ForkRefused = 1,
    Other = 2,
}

impl Outcome {
    fn of(status: tq_status) -> Outcome {
        if status == tq_status::TQ_OK {
            return Outcome::Ok;
        }
        // SAFETY: tq_last_error never returns NULL.
        let message = unsafe { CStr::from_ptr(tq_last_error()) }.to_bytes();
        if status == tq_status::TQ_ERR_INVALID_ARGUMENT
            && message.windows(4).any(|word| word == b"fork")
        {
            Outcome::ForkRefused
        } else {
            Outcome::Other
        }
    }

    fn from_code(code: i32) -> Outcome {
        match code {
            0 => Outcome::Ok,
            1 => Outcome::ForkRefused,
            _ => Outcome::Other,
        }
    }
}

/// Where a scenario's queues are: SQLite files in a directory, or schemas
/// on a PostgreSQL server.
#[derive(Clone)]
enum Place {
    Files(String),
    Server(String),
}

/// The path and options that open the queue `name` of `place`. The options
/// are returned as an address, so that threads can share them.
fn queue_of(place: &Place, name: &str) -> (CString, usize) {
    let options = tq_options_new();
    assert_eq!(
        tq_options_set_durability(options, tq_durability::TQ_DURABILITY_NORMAL as i32),
        tq_status::TQ_OK
    );
    let path = match place {
        Place::Files(dir) => format!("{dir}/{name}.db"),
        Place::Server(url) => {
            let schema = CString::new(format!("fork_{name}")).unwrap();
            assert_eq!(
                tq_options_set_postgres_schema(options, schema.as_ptr()),
                tq_status::TQ_OK
            );
            url.clone()
        }
    };
    (CString::new(path).unwrap(), options as usize)
}

fn open(path: &CString, options: usize) -> (tq_status, *mut tq_queue) {
    let mut queue = ptr::null_mut();
    let status = tq_open(path.as_ptr(), options as *const tq_options, &mut queue);
    (status, queue)
}

fn push(queue: *mut tq_queue) -> tq_status {
    let payload = b"1";
    tq_push(
        queue,
        payload.as_ptr().cast(),
        payload.len(),
        ptr::null(),
        ptr::null_mut(),
    )
}

/// Pushes, pulls, reads and finishes tasks on a shared handle.
fn work(queue: usize, stop: &AtomicBool) {
    let queue = queue as *mut tq_queue;
    let mut count = 0;
    while !stop.load(Ordering::Relaxed) {
        assert_eq!(push(queue), tq_status::TQ_OK);
        let mut task = ptr::null_mut();
        if tq_pull(queue, ptr::null(), &mut task) == tq_status::TQ_OK {
            assert!(tq_task_id(task) > 0);
            let mut len = 0;
            assert!(!tq_task_payload(task, &mut len).is_null());
            assert_eq!(tq_finish(queue, task), tq_status::TQ_OK);
            tq_task_free(task);
        }
        assert_eq!(tq_count(queue, 0, &mut count), tq_status::TQ_OK);
    }
}

/// Opens a queue of its own, pushes and closes it, over and over: every
/// open connects anew (no other handle keeps the queue open).
fn open_and_close(path: &CString, options: usize, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        let (status, queue) = open(path, options);
        assert_eq!(status, tq_status::TQ_OK);
        assert_eq!(push(queue), tq_status::TQ_OK);
        tq_close(queue);
    }
}

/// In the child: opens a new queue and pushes on it, then pushes on the
/// parent's handle; exits with what each call got. Only tq calls run
/// here, then `_exit`: nothing of the test harness.
fn child(path: &CString, options: usize, parent_queue: usize) -> ! {
    let (status, queue) = open(path, options);
    let opened = Outcome::of(status);
    let pushed = match opened {
        Outcome::Ok => Outcome::of(push(queue)),
        refused => refused,
    };
    let parent_pushed = Outcome::of(push(parent_queue as *mut tq_queue));
    let code = opened as i32 * 9 + pushed as i32 * 3 + parent_pushed as i32;
    // SAFETY: ends the child without running the parent's destructors.
    unsafe { libc::_exit(code) }
}

/// What the children got.
#[derive(Default, Debug)]
struct Tally {
    hung: usize,
    /// Open and push in the child both succeeded.
    worked: usize,
    /// Open or push in the child was refused with the fork error.
    refused: usize,
    /// Any call got an undocumented answer, or the parent's handle worked.
    wrong: usize,
}

impl Tally {
    fn record(&mut self, code: i32) {
        let (opened, pushed, parent_pushed) = (
            Outcome::from_code(code / 9),
            Outcome::from_code(code / 3 % 3),
            Outcome::from_code(code % 3),
        );
        if !(0..27).contains(&code)
            || opened == Outcome::Other
            || pushed == Outcome::Other
            || parent_pushed != Outcome::ForkRefused
        {
            self.wrong += 1;
        } else if opened == Outcome::Ok && pushed == Outcome::Ok {
            self.worked += 1;
        } else {
            self.refused += 1;
        }
    }
}

/// Waits for some of `children` (pid, deadline) to end, killing those past
/// their deadline, until at most `keep` are left.
fn reap(children: &mut Vec<(libc::pid_t, Instant)>, keep: usize, tally: &mut Tally) {
    while children.len() > keep {
        children.retain(|&(pid, deadline)| {
            let mut status = 0;
            // SAFETY: plain system calls on our own child.
            let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if done == pid {
                if libc::WIFEXITED(status) {
                    tally.record(libc::WEXITSTATUS(status));
                } else {
                    tally.wrong += 1;
                }
                return false;
            }
            if Instant::now() >= deadline {
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::waitpid(pid, &mut status, 0);
                }
                tally.hung += 1;
                return false;
            }
            true
        });
        thread::sleep(Duration::from_millis(1));
    }
}

/// The scenario: busy threads, children forked among them.
fn forked_amid_calls(place: &Place) {
    let (main_path, main_options) = queue_of(place, "main");
    let (status, main_queue) = open(&main_path, main_options);
    assert_eq!(status, tq_status::TQ_OK, "open the shared queue");
    let main_queue = main_queue as usize;
    // Made before forking: the children allocate as little as they can.
    // Each child opens a new file; on the server, one schema serves them
    // all (making a schema per child would only slow the test down).
    let child_queues: Vec<_> = (0..CHILDREN)
        .map(|i| match place {
            Place::Files(_) => queue_of(place, &format!("child{i}")),
            Place::Server(_) => queue_of(place, "children"),
        })
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..BUSY_THREADS)
        .map(|i| {
            let stop = Arc::clone(&stop);
            let place = place.clone();
            thread::spawn(move || {
                if i % 2 == 0 {
                    work(main_queue, &stop);
                } else {
                    let (path, options) = queue_of(&place, &format!("opener{i}"));
                    open_and_close(&path, options, &stop);
                }
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(200)); // every thread at work

    let mut tally = Tally::default();
    let mut children = Vec::new();
    for (path, options) in &child_queues {
        reap(&mut children, AT_ONCE - 1, &mut tally);
        // SAFETY: the child runs only tq calls and _exit (see `child`).
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            child(path, *options, main_queue);
        }
        children.push((pid, Instant::now() + CHILD_DEADLINE));
        thread::sleep(Duration::from_millis(2));
    }
    reap(&mut children, 0, &mut tally);

    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    println!("{CHILDREN} children forked amid {BUSY_THREADS} busy threads: {tally:?}");
    assert_eq!(tally.hung, 0, "children hung: {tally:?}");
    assert_eq!(
        tally.wrong, 0,
        "children got undocumented answers: {tally:?}"
    );
    // The parent's handle is unharmed.
    assert_eq!(push(main_queue as *mut tq_queue), tq_status::TQ_OK);
    tq_close(main_queue as *mut tq_queue);
    println!("scenario passed");
}

/// Runs the scenario named by `TQ_FORK_SCENARIO` when this binary is run
/// again by [`run_scenario`]; does nothing in a normal run.
#[test]
fn scenario() {
    let Ok(place) = std::env::var("TQ_FORK_SCENARIO") else {
        return;
    };
    let target = std::env::var("TQ_FORK_TARGET").unwrap();
    match place.as_str() {
        "files" => forked_amid_calls(&Place::Files(target)),
        "server" => forked_amid_calls(&Place::Server(target)),
        other => panic!("unknown scenario {other}"),
    }
}

fn run_scenario(place: &str, target: &str) {
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "scenario", "--nocapture", "--test-threads=1"])
        .env("TQ_FORK_SCENARIO", place)
        .env("TQ_FORK_TARGET", target)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success() && stdout.contains("scenario passed"),
        "the {place} scenario failed:\n{stdout}\n{stderr}"
    );
}

#[test]
fn sqlite_children_forked_amid_calls_never_hang() {
    let scratch = Scratch::new();
    run_scenario("files", scratch.path("").to_str().unwrap());
}

#[test]
fn postgres_children_forked_amid_calls_never_hang() {
    let Some(url) = postgres_url("postgres_children_forked_amid_calls_never_hang") else {
        return;
    };
    // Start from empty schemas: a queue left by an earlier run would only
    // grow.
    let mut client = common::postgres_client(&url);
    let schemas: Vec<String> = client
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'fork\\_%'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    for schema in schemas {
        client
            .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
            .unwrap();
    }
    run_scenario("server", &url);
}
