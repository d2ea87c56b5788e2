//! Helpers for the tests of `tq serve`: a seeded queue file, and the built
//! `tq serve` running on it on a free loopback port.

#![allow(dead_code)] // each test file uses its own part of these helpers

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::Duration;

use tempfile::TempDir;
use tq::{OpenOptions, PullOptions, PushOptions, Queue};

/// The reason the seeded dead task died of.
pub const DEAD_REASON: &str = "exit status 3: no such customer";

/// A queue file with, in `emails`, 1 dead task (id 1) and 3 pending tasks
/// (ids 2 to 4), and in `default` 2 pending tasks (ids 5 and 6).
pub struct Seeded {
    pub dir: TempDir,
    pub file: String,
}

impl Seeded {
    pub fn new() -> Seeded {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jobs.db").to_str().unwrap().to_owned();
        let emails = open(&file, "emails");
        let mut once = PushOptions::new();
        once.max_attempts(1).unwrap();
        emails
            .push(
                "{\"to\":\"gone@example.com\",\"template\":\"welcome\"}",
                &once,
            )
            .unwrap();
        let task = emails.pull(&PullOptions::new()).unwrap().unwrap();
        emails.fail(task.receipt(), DEAD_REASON).unwrap();
        for n in 2..=4 {
            emails
                .push(
                    &format!("{{\"to\":\"user{n}@example.com\"}}"),
                    &PushOptions::new(),
                )
                .unwrap();
        }
        let default = open(&file, "default");
        default.push("{\"n\":1}", &PushOptions::new()).unwrap();
        default.push("{\"n\":2}", &PushOptions::new()).unwrap();
        Seeded { dir, file }
    }

    pub fn queue(&self, name: &str) -> Queue {
        open(&self.file, name)
    }
}

pub fn open(file: &str, queue: &str) -> Queue {
    let mut options = OpenOptions::new();
    options.queue(queue).unwrap();
    Queue::open(file, &options).unwrap()
}

/// `tq serve FILE --listen ADDRESS ARGS...` running until dropped.
pub struct Served {
    child: Child,
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub base: String,
    /// The port listened on.
    pub port: u16,
    /// What the server printed at start.
    pub banner: Vec<String>,
    /// The token every request needs: the one given with `--token`, or the
    /// one the server made up and printed; `None` when it needs none.
    pub token: Option<String>,
}

impl Served {
    /// Serves `file` on a free loopback port.
    pub fn start(file: &str, args: &[&str]) -> Served {
        Served::listening(file, "127.0.0.1:0", args)
    }

    /// Serves `file` on `address`; requests go to 127.0.0.1 and its port.
    pub fn listening(file: &str, address: &str, args: &[&str]) -> Served {
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("tq"))
            .args(["serve", file, "--listen", address])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // Lines are read on a thread of their own, so that a token that is
        // expected but never printed fails the test instead of hanging it.
        let lines = read_lines(child.stdout.take().unwrap());
        // Made first, so that a failure below stops the server.
        let mut served = Served {
            child,
            base: String::new(),
            port: 0,
            banner: Vec::new(),
            token: None,
        };
        let next_line = || {
            lines
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("tq serve printed no more lines"))
        };
        let line = next_line();
        served.banner.push(line.clone());
        served.port = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|address| address.rsplit(':').next())
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        let given = args
            .iter()
            .position(|arg| *arg == "--token")
            .map(|at| args[at + 1].to_owned());
        // Beyond loopback, or with actions allowed, a token is made up
        // unless one is given: it is printed on two more lines.
        let made_up =
            given.is_none() && (!address.starts_with("127.") || args.contains(&"--allow-actions"));
        served.token = given;
        if made_up {
            served.banner.push(next_line());
            served.banner.push(next_line());
            let token = served
                .banner
                .iter()
                .find_map(|line| line.strip_prefix("access token (shown once): "))
                .unwrap_or_else(|| panic!("no token printed: {:?}", served.banner))
                .to_owned();
            served.token = Some(token);
        }
        served.base = format!("http://127.0.0.1:{}", served.port);
        served
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The lines `stdout` gives, as they come.
fn read_lines(stdout: ChildStdout) -> Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}
