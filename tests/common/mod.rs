//! Helpers shared by the Rust integration tests.
#![allow(dead_code, unused_macros)] // each test binary uses its own subset

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tq::{Durability, OpenOptions, PullOptions, PushOptions, Queue};

/// This test binary run again to play `role`: it runs only its
/// `child_process` test, which reads the role from `TQ_TEST_CHILD`, plays
/// it and exits (each test binary with children has one).
pub fn child_command(role: &str) -> Command {
    child_command_of(&std::env::current_exe().expect("the test binary"), role)
}

/// As [`child_command`], running the test binary found at `exe`.
pub fn child_command_of(exe: &Path, role: &str) -> Command {
    let mut command = Command::new(exe);
    command
        .args([
            "--exact",
            "child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("TQ_TEST_CHILD", role);
    command
}

/// A fresh directory for one test's queue file, removed on drop; on
/// PostgreSQL, a fresh schema of its own instead.
pub struct Scratch {
    dir: tempfile::TempDir,
    postgres: Option<Postgres>,
}

/// The server and the schema of a test on PostgreSQL.
pub struct Postgres {
    pub url: String,
    pub schema: String,
}

/// The URL of the PostgreSQL server the tests use, from
/// `TQ_TEST_POSTGRES_URL`; when unset, says on the terminal (past the test
/// harness's capture) that `test` is skipped, and why.
pub fn postgres_url(test: &str) -> Option<String> {
    match std::env::var("TQ_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "skipped {test}: TQ_TEST_POSTGRES_URL is not set (`make test-postgres` \
                 starts a server and sets it)"
            );
            None
        }
    }
}

/// A direct connection to the test server, beside tq.
pub fn postgres_client(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("connect to the test server")
}

/// A schema name of at most 63 bytes for `test`, distinct per test.
fn schema_name(test: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in test.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let short: String = test
        .rsplit("::")
        .next()
        .unwrap_or(test)
        .chars()
        .take(40)
        .collect();
    format!("t_{short}_{hash:08x}")
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dir: tempfile::tempdir().expect("a temporary directory"),
            postgres: None,
        }
    }

    /// A scratch for a file, in a temporary directory (the test's name
    /// unused: `on_both_backends!` gives every constructor one).
    pub fn sqlite(_test: &str) -> Option<Scratch> {
        Some(Scratch::new())
    }

    /// A scratch on the PostgreSQL test server, in an empty schema named
    /// after `test`; `None` (saying why) when no server is set.
    pub fn postgres(test: &str) -> Option<Scratch> {
        let url = postgres_url(test)?;
        let schema = schema_name(test);
        postgres_client(&url)
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .expect("drop the test's schema");
        Some(Scratch {
            dir: tempfile::tempdir().expect("a temporary directory"),
            postgres: Some(Postgres { url, schema }),
        })
    }

    /// The server and schema, on PostgreSQL.
    pub fn server(&self) -> Option<&Postgres> {
        self.postgres.as_ref()
    }

    /// The options that open this scratch's queue: the schema on
    /// PostgreSQL, nothing more on SQLite.
    pub fn options(&self, options: &OpenOptions) -> OpenOptions {
        let mut options = options.clone();
        if let Some(server) = &self.postgres {
            options
                .postgres_schema(&server.schema)
                .expect("a valid schema name");
        }
        options
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The queue's file, or the server's URL on PostgreSQL.
    pub fn queue_path(&self) -> String {
        if let Some(server) = &self.postgres {
            return server.url.clone();
        }
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
        Queue::open(&self.queue_path(), &self.options(options)).expect("open the queue")
    }
}

pub fn push(queue: &Queue, payload: &str) -> i64 {
    queue.push(payload, &PushOptions::new()).expect("push").id()
}

/// A pull that does not wait: the task, or `None` when none is ready.
pub fn pull(queue: &Queue) -> Option<tq::Task> {
    queue.pull(&PullOptions::new()).expect("pull")
}

/// Pull options that wait up to `ms` milliseconds.
pub fn waiting(ms: u64) -> PullOptions {
    let mut options = PullOptions::new();
    options.wait(Duration::from_millis(ms)).expect("valid wait");
    options
}

/// Milliseconds since the Unix epoch, the clock tq stores.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as i64
}

pub fn lease(ms: u64) -> PullOptions {
    let mut options = PullOptions::new();
    options
        .lease(Duration::from_millis(ms))
        .expect("valid lease");
    options
}

/// Runs each named test, a `fn(Scratch)`, on every backend: as
/// `sqlite::NAME` on a file, and as `postgres::NAME` in a schema of its own
/// on the server named by `TQ_TEST_POSTGRES_URL` (skipped, saying so, when
/// it is not set). The backends are listed here once: a module name, and
/// the `Scratch` constructor that makes a queue's place on it.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        on_backends! {
            tests: [$($name),*],
            backends: [sqlite: sqlite, postgres: postgres],
        }
    };
}

/// `on_both_backends!`'s expansion: one module of tests per backend.
macro_rules! on_backends {
    (tests: $tests:tt, backends: [$($module:ident: $scratch:ident),*],) => {
        $( on_backend!($module, $scratch, $tests); )*
    };
}

/// The tests of one backend, each given the scratch its constructor makes
/// (none: skipped, the constructor having said why).
macro_rules! on_backend {
    ($module:ident, $scratch:ident, [$($name:ident),*]) => {
        mod $module {
            $(
                #[test]
                fn $name() {
                    if let Some(scratch) = crate::common::Scratch::$scratch(concat!(
                        module_path!(),
                        "::",
                        stringify!($name)
                    )) {
                        super::$name(scratch);
                    }
                }
            )*
        }
    };
}
