//! Helpers shared by the Rust integration tests.
#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;
use std::time::Duration;

use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue};

/// A fresh directory for one test's queue file, removed on drop.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("a temporary directory"),
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn queue_path(&self) -> String {
        self.path("queue.db")
            .to_str()
            .expect("UTF-8 temp path")
            .to_owned()
    }

    /// A queue at `normal` durability: the tests check behaviour, not flushes.
    pub fn open(&self) -> Queue {
        self.open_with(OpenOptions::new().durability(Durability::Normal))
    }

    pub fn open_with(&self, options: &OpenOptions) -> Queue {
        Queue::open(&self.queue_path(), options).expect("open the queue")
    }
}

pub fn push(queue: &Queue, payload: &str) -> i64 {
    queue.push(payload, &PushOptions::new()).expect("push").id()
}

pub fn lease(ms: u64) -> PullOptions {
    let mut options = PullOptions::new();
    options
        .lease(Duration::from_millis(ms))
        .expect("valid lease");
    options
}
