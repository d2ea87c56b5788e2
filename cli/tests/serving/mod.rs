//! Helpers for the tests of `tq serve`: a seeded queue file, and the built
//! `tq serve` running on it on a free loopback port.

#![allow(dead_code)] // each test file uses its own part of these helpers

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout, Command, Stdio};

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
    /// What the server printed at start.
    pub banner: Vec<String>,
    _stdout: BufReader<ChildStdout>,
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
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut banner = Vec::new();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        banner.push(line.trim_end().to_owned());
        let port = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|address| address.rsplit(':').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_owned();
        if !address.starts_with("127.") {
            for _ in 0..2 {
                let mut line = String::new();
                stdout.read_line(&mut line).unwrap();
                banner.push(line.trim_end().to_owned());
            }
        }
        Served {
            child,
            base: format!("http://127.0.0.1:{port}"),
            banner,
            _stdout: stdout,
        }
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
