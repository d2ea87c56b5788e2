//! Helpers for tests that run the built `tq` binary on a queue file in a
//! temporary directory.

#![allow(dead_code)] // each test file uses its own part of these helpers

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

/// A temporary directory holding a queue file, `jobs.db`.
pub struct Fixture {
    pub dir: TempDir,
    pub file: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jobs.db");
        Fixture { dir, file }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn file(&self) -> &str {
        self.file.to_str().unwrap()
    }

    /// `tq SUBCOMMAND FILE ARGS...`, run in the fixture's directory.
    pub fn tq(&self, subcommand: &str, args: &[&str]) -> Command {
        let mut command = Command::cargo_bin("tq").unwrap();
        command
            .current_dir(self.dir.path())
            .arg(subcommand)
            .arg(self.file())
            .args(args)
            .env_remove("COLUMNS");
        command
    }

    /// Runs `tq SUBCOMMAND FILE ARGS... --json`, which must succeed, and
    /// parses its output.
    pub fn json(&self, subcommand: &str, args: &[&str]) -> Value {
        let output = self.tq(subcommand, args).arg("--json").output().unwrap();
        assert!(
            output.status.success(),
            "tq {subcommand} {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap_or_else(|err| {
            panic!(
                "tq {subcommand} printed no JSON ({err}): {}",
                String::from_utf8_lossy(&output.stdout)
            )
        })
    }

    /// Pushes `count` tasks `{"n": 1}` ... `{"n": count}` to `queue`.
    pub fn push_numbers(&self, count: usize, queue: &str, extra: &[&str]) {
        let lines: String = (1..=count).map(|n| format!("{{\"n\":{n}}}\n")).collect();
        self.tq("push", &["--queue", queue])
            .args(extra)
            .write_stdin(lines)
            .assert()
            .success();
    }

    /// The counts by state of `queue`, as `tq stats --json` shows them.
    pub fn counts(&self, queue: &str) -> Value {
        let stats = self.json("stats", &["--queue", queue]);
        stats["queues"][0].clone()
    }

    /// The ids of `queue`'s tasks in `state`.
    pub fn ids(&self, state: &str) -> Vec<i64> {
        let tasks = self.json("list", &["--state", state]);
        tasks
            .as_array()
            .unwrap()
            .iter()
            .map(|task| task["id"].as_i64().unwrap())
            .collect()
    }
}

/// Waits up to 20 s for `condition`.
pub fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// How many lines `path` has (0 when it does not exist).
pub fn line_count(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |text| text.lines().count())
}
