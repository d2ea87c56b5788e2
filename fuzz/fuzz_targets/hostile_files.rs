//! Hostile queue files: tq must answer every call on them with a result or
//! an error, and never panic, crash or hang.
//!
//! Once per process small valid queues are built: one with tq itself (two
//! named queues; pending tasks of several priorities, delayed, scheduled,
//! leased, expired, done, dead, waiting for a retry, holding unique keys,
//! one payload larger than a page), whose bytes are copied twice: while
//! open (a one-page main file and the `-wal` holding every commit) and
//! after close (one checkpointed file); and one in the schema tq 0.1 wrote
//! (version 1), which opening migrates. The input picks a copy, may first
//! change it through SQL (rows of tq's tables set to values of any type,
//! rows inserted or deleted, indexes, tables or the schema version dropped
//! or altered, triggers added, the journal mode or page size changed: what
//! a damaged or foreign file can hold that byte edits rarely reach), then
//! edits its bytes (overwrite bytes, set one byte, zero a page, truncate,
//! append, or replace it all), does the same or not to the `-wal` (or drops
//! it, or supplies one of its own), writes the files into a fresh directory
//! and opens one of its queues (through the Rust API or the C ABI, with a
//! 100 ms busy timeout). If that succeeds it runs a few operations: pull
//! and pull_batch (short and long leases, with or without a wait), finish,
//! finish_batch, fail, extend, push (with or without a unique key),
//! push_batch, count, list, recover, retry_dead, retry_all_dead, purge,
//! oldest_ready_age, checkpoint, reopen.
//!
//! Every call must return; a panic inside tq (libFuzzer aborts on any
//! panic, even one caught by the C ABI's guard), an SQLite abort, a
//! sanitizer report or a timeout is a finding. An error must carry a
//! message. With `TQ_FUZZ_NO_INTERNAL` set, an `Internal` error (tq's
//! status for its own bugs) is a finding too: a damaged file should get
//! `NotADatabase` (see README.md for the cases known to break this).
#![no_main]

use std::ffi::{CStr, CString};
use std::fs;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use arbitrary::{Arbitrary, Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use tq::ffi::{self, tq_queue, tq_status, tq_task};
use tq::rusqlite;
use tq::{Durability, ErrorKind, OpenOptions, PullOptions, PushOptions, Queue, Receipt, TaskState};
use tq_fuzz::{trace, Scratch};

/// SQLite's default page size, which the template files use.
const PAGE: usize = 4096;
const MAX_EDITS: usize = 8;
const MAX_OPS: usize = 12;
const MAX_SQL_EDITS: usize = 4;
const BUSY_TIMEOUT_MS: u64 = 100;
/// The template's second queue (the first is tq's default).
const OTHER_QUEUE: &str = "other";

// ---------------------------------------------------------------------------
// The templates

struct Template {
    db: Vec<u8>,
    wal: Option<Vec<u8>>,
}

/// [0]: copied while open (main file and `-wal`); [1]: after close; [2]: a
/// file in tq 0.1's schema.
fn templates() -> &'static [Template; 3] {
    static TEMPLATES: OnceLock<[Template; 3]> = OnceLock::new();
    TEMPLATES.get_or_init(|| {
        let dir = Scratch::get("hostile_files").root().join("template");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("template directory");
        let read = |name: &str| fs::read(dir.join(name)).ok();

        let queue = build_template(&dir.join("queue.db"));
        let open_copy = Template {
            db: read("queue.db").expect("the main file"),
            wal: read("queue.db-wal"),
        };
        drop(queue);
        let closed_copy = Template {
            db: read("queue.db").expect("the main file"),
            wal: read("queue.db-wal").filter(|wal| !wal.is_empty()),
        };

        let old = dir.join("old.db");
        build_version_1(&old);
        let old_copy = Template {
            db: read("old.db").expect("the old file"),
            wal: read("old.db-wal").filter(|wal| !wal.is_empty()),
        };
        let _ = fs::remove_dir_all(&dir);
        [open_copy, closed_copy, old_copy]
    })
}

/// Fills a queue file with a task in every state and returns the open
/// handle on its default queue (the caller copies the files while it is open).
fn build_template(path: &Path) -> Queue {
    let path = path.to_str().expect("UTF-8 path");
    let mut options = OpenOptions::new();
    options
        .durability(Durability::Normal)
        .keep_history(true)
        .max_attempts(2)
        .unwrap()
        .retry_backoff(Duration::from_secs(3600), Duration::from_secs(7200))
        .unwrap();
    let queue = Queue::open(path, &options).expect("open the template queue");
    let long = pull_options(false);
    let short = pull_options(true);
    let push = |payload: &str, options: &PushOptions| queue.push(payload, options).unwrap().id();
    // Each task is pulled right after its push, while no other is ready.
    let pulled = |id: i64, options: &PullOptions| {
        let task = queue.pull(options).unwrap().expect("a ready task");
        assert_eq!(
            task.id(),
            id,
            "the template's pulls take the task just pushed"
        );
        task
    };

    let mut once = PushOptions::new();
    once.max_attempts(1).unwrap();
    let dead = push("{\"dies\":true}", &once);
    let failed = queue.fail(pulled(dead, &long).receipt(), "boom").unwrap();
    assert_eq!(failed, tq::Failed::Dead);
    let retried = push("{\"retry\":1}", &PushOptions::new());
    queue
        .fail(pulled(retried, &long).receipt(), "try again later")
        .unwrap();
    let mut reserved = PushOptions::new();
    reserved
        .unique_key("invoice:2")
        .unwrap()
        .unique_for(Duration::from_secs(86_400))
        .unwrap();
    let done_reserved = push("{\"invoice\":2}", &reserved);
    queue
        .finish(pulled(done_reserved, &long).receipt())
        .unwrap();
    let done = push("{\"n\":1}", &PushOptions::new());
    queue.finish(pulled(done, &long).receipt()).unwrap();
    let held = push("{\"held\":true}", &PushOptions::new());
    let _held = pulled(held, &long);
    let expired = push("{\"expired\":true}", &PushOptions::new());
    let _expired = pulled(expired, &short);

    for (payload, priority) in [
        (
            "{\"job\":\"resize\",\"file\":\"a.png\",\"sizes\":[64,128]}",
            0,
        ),
        ("[1,2.5,-3e7,true,false,null]", 5),
        ("\"caf\u{e9} \\u00e9 \\ud83d\\ude00\"", -3),
        ("{\"n\":4}", i32::MAX),
    ] {
        let mut options = PushOptions::new();
        options.priority(priority);
        push(payload, &options);
    }
    let big = format!("{{\"blob\":\"{}\"}}", "x".repeat(6000));
    push(&big, &PushOptions::new());
    let mut delayed = PushOptions::new();
    delayed.delay(Duration::from_secs(3600)).unwrap();
    push("{\"later\":true}", &delayed);
    let mut scheduled = PushOptions::new();
    scheduled.run_at_unix_ms(1_000).unwrap();
    push("{\"early\":1}", &scheduled);
    let mut unique = PushOptions::new();
    unique.unique_key("invoice:1").unwrap();
    push("{\"invoice\":1}", &unique);

    let mut other_options = options.clone();
    other_options.queue(OTHER_QUEUE).unwrap();
    let other = Queue::open(path, &other_options).expect("open the second queue");
    other.push("{\"other\":1}", &PushOptions::new()).unwrap();
    other.push("{\"other\":2}", &PushOptions::new()).unwrap();
    other
        .pull(&long)
        .unwrap()
        .expect("a task of the second queue");
    queue
}

/// The schema tq 0.1 wrote (version 1), with a pending, a delayed, a
/// leased and a done task, in WAL mode as tq left it.
fn build_version_1(path: &Path) {
    let conn = rusqlite::Connection::open(path).expect("create the old file");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         CREATE TABLE tq_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
         CREATE TABLE tq_holders (
             id INTEGER PRIMARY KEY, boot_id TEXT NOT NULL, pid_namespace TEXT NOT NULL,
             pid INTEGER NOT NULL, start_time INTEGER NOT NULL,
             UNIQUE (boot_id, pid_namespace, pid, start_time));
         CREATE TABLE tq_tasks (
             id INTEGER PRIMARY KEY AUTOINCREMENT, state INTEGER NOT NULL, payload TEXT NOT NULL,
             created_at INTEGER NOT NULL, run_at INTEGER NOT NULL,
             attempts INTEGER NOT NULL DEFAULT 0, lease_token INTEGER, lease_expires_at INTEGER,
             holder_id INTEGER, finished_at INTEGER);
         CREATE INDEX tq_tasks_ready  ON tq_tasks (run_at, id)       WHERE state = 0;
         CREATE INDEX tq_tasks_leased ON tq_tasks (lease_expires_at) WHERE state = 1;
         CREATE INDEX tq_tasks_done   ON tq_tasks (finished_at)      WHERE state = 2;
         INSERT INTO tq_meta VALUES ('schema_version', 1);
         INSERT INTO tq_holders VALUES (1, 'a boot', 'pid:[4026531836]', 4242, 17);
         INSERT INTO tq_tasks (state, payload, created_at, run_at, attempts, lease_token,
                               lease_expires_at, holder_id, finished_at) VALUES
             (0, '{\"due\":1}', 1000, 1000, 0, NULL, NULL, NULL, NULL),
             (0, '\"later\"', 1000, 32503680000000, 0, NULL, NULL, NULL, NULL),
             (1, '[\"held\"]', 1000, 1000, 1, 77, 2000, 1, NULL),
             (2, '{\"done\":true}', 1000, 1000, 1, NULL, NULL, NULL, 3000);
         PRAGMA wal_checkpoint(TRUNCATE);",
    )
    .expect("write the old schema");
}

// ---------------------------------------------------------------------------
// The input

#[derive(Debug)]
struct Input {
    base: Base,
    sql: Vec<SqlEdit>,
    db: Vec<Edit>,
    wal: WalPlan,
    api: Api,
    keep_history: bool,
    other_queue: bool,
    ops: Vec<HostileOp>,
}

impl<'a> Arbitrary<'a> for Input {
    fn arbitrary(u: &mut Unstructured<'a>) -> Result<Self> {
        let base = u.arbitrary()?;
        let api = u.arbitrary()?;
        let keep_history = u.arbitrary()?;
        let other_queue = u.arbitrary()?;
        let mut ops = Vec::new();
        for _ in 0..u.int_in_range(0..=MAX_OPS)? {
            ops.push(u.arbitrary()?);
        }
        let mut sql = Vec::new();
        if u.ratio(1, 2)? {
            for _ in 0..u.int_in_range(1..=MAX_SQL_EDITS)? {
                sql.push(u.arbitrary()?);
            }
        }
        let wal = u.arbitrary()?;
        let mut db = Vec::new();
        while !u.is_empty() && db.len() < MAX_EDITS {
            db.push(u.arbitrary()?);
        }
        Ok(Input {
            base,
            sql,
            db,
            wal,
            api,
            keep_history,
            other_queue,
            ops,
        })
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
/// Which template copy the input starts from.
enum Base {
    Open,
    Closed,
    Version1,
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Rust,
    C,
}

#[derive(Arbitrary, Debug)]
enum WalPlan {
    /// The template's `-wal` as it is (none for the closed copies).
    Template,
    /// No `-wal` file.
    Absent,
    /// The template's `-wal`, edited.
    Edited(Vec<Edit>),
    /// A `-wal` of the input's bytes.
    Raw(Vec<u8>),
}

/// A place in a file: a page and an offset in it, wrapped into the file.
#[derive(Arbitrary, Debug, Clone, Copy)]
struct Offset {
    page: u8,
    within: u16,
}

impl Offset {
    fn resolve(self, len: usize) -> usize {
        let at = self.page as usize * PAGE + self.within as usize;
        if at <= len {
            at
        } else {
            at % (len + 1)
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Edit {
    Overwrite {
        at: Offset,
        bytes: Vec<u8>,
    },
    Byte {
        at: Offset,
        value: u8,
    },
    /// A big-endian 32-bit value, as SQLite writes its counts and sizes.
    U32 {
        at: Offset,
        value: u32,
    },
    ZeroPage {
        page: u8,
    },
    Truncate {
        at: Offset,
    },
    Append(Vec<u8>),
    Replace(Vec<u8>),
}

fn apply(edits: &[Edit], file: &mut Vec<u8>) {
    for edit in edits.iter().take(MAX_EDITS) {
        match edit {
            Edit::Overwrite { at, bytes } => {
                let at = at.resolve(file.len());
                let end = (at + bytes.len()).min(file.len());
                file.splice(at..end, bytes.iter().copied());
            }
            Edit::Byte { at, value } => {
                let at = at.resolve(file.len());
                if at < file.len() {
                    file[at] = *value;
                } else {
                    file.push(*value);
                }
            }
            Edit::U32 { at, value } => {
                let at = at.resolve(file.len());
                let bytes = value.to_be_bytes();
                let end = (at + 4).min(file.len());
                file.splice(at..end, bytes);
            }
            Edit::ZeroPage { page } => {
                let start = (*page as usize * PAGE).min(file.len());
                let end = (start + PAGE).min(file.len());
                file[start..end].fill(0);
            }
            Edit::Truncate { at } => file.truncate(at.resolve(file.len())),
            Edit::Append(bytes) => file.extend_from_slice(bytes),
            Edit::Replace(bytes) => *file = bytes.clone(),
        }
    }
}

/// A change made through SQL to the copy before its bytes are edited.
#[derive(Arbitrary, Debug)]
#[allow(clippy::large_enum_variant)] // decoded once per input: size does not matter
enum SqlEdit {
    /// Sets one column of the `row`-th row (by key, wrapped) of a table.
    Set {
        table: Table,
        row: u8,
        column: u8,
        value: SqlValue,
    },
    /// Inserts a row of a table with any values (into tq_tasks: its
    /// columns of version 1; the others get their defaults).
    Insert {
        table: Table,
        values: [SqlValue; 9],
    },
    Delete {
        table: Table,
        row: u8,
    },
    /// One of the statements in `STATEMENTS`.
    Statement(u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Table {
    Tasks,
    Holders,
    Meta,
    Sequence,
}

impl Table {
    /// The table's name, its key column, and its columns (the version 1
    /// file lacks the later ones of tq_tasks: setting them fails there).
    fn shape(self) -> (&'static str, &'static str, &'static [&'static str]) {
        match self {
            Table::Tasks => (
                "tq_tasks",
                "id",
                &[
                    "state",
                    "payload",
                    "created_at",
                    "run_at",
                    "attempts",
                    "lease_token",
                    "lease_expires_at",
                    "holder_id",
                    "finished_at",
                    "id",
                    "queue",
                    "priority",
                    "max_attempts",
                    "last_error",
                    "unique_key",
                    "unique_for",
                    "unique_until",
                ],
            ),
            Table::Holders => (
                "tq_holders",
                "id",
                &["boot_id", "pid_namespace", "pid", "start_time", "id"],
            ),
            Table::Meta => ("tq_meta", "key", &["value", "key"]),
            Table::Sequence => ("sqlite_sequence", "name", &["seq", "name"]),
        }
    }
}

#[derive(Arbitrary, Debug)]
enum SqlValue {
    Null,
    Small(i8),
    /// 0, 1, -1, the ends of i64, i32 and u32, 2^53...
    Edge(u8),
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

const EDGES: [i64; 12] = [
    0,
    1,
    -1,
    2,
    i64::MIN,
    i64::MAX,
    i32::MIN as i64,
    i32::MAX as i64,
    u32::MAX as i64,
    u32::MAX as i64 + 1,
    1 << 53,
    -(1 << 53),
];

impl SqlValue {
    fn to_sql(&self) -> rusqlite::types::Value {
        use rusqlite::types::Value;
        match self {
            SqlValue::Null => Value::Null,
            SqlValue::Small(v) => Value::Integer(i64::from(*v)),
            SqlValue::Edge(k) => Value::Integer(EDGES[*k as usize % EDGES.len()]),
            SqlValue::Int(v) => Value::Integer(*v),
            SqlValue::Real(v) => Value::Real(*v),
            SqlValue::Text(v) => Value::Text(v.clone()),
            SqlValue::Blob(v) => Value::Blob(v.clone()),
        }
    }
}

/// Statements that change the schema, the rows in bulk, or the file's
/// settings.
const STATEMENTS: &[&str] = &[
    "DROP INDEX tq_tasks_ready",
    "DROP INDEX tq_tasks_leased",
    "DROP INDEX tq_tasks_live",
    "DROP INDEX tq_tasks_done",
    "DROP INDEX tq_tasks_waiting",
    "DROP INDEX tq_tasks_dead",
    "DROP INDEX tq_tasks_unique",
    "DROP INDEX tq_tasks_reserved",
    "DROP TABLE tq_tasks",
    "DROP TABLE tq_holders",
    "DROP TABLE tq_meta",
    "DELETE FROM tq_meta",
    "DELETE FROM sqlite_sequence",
    "UPDATE tq_meta SET value = 1",
    "UPDATE tq_meta SET value = 2",
    "DROP TABLE tq_tasks; CREATE VIEW tq_tasks AS SELECT 1 AS id",
    "DROP TABLE tq_holders; CREATE TABLE tq_holders (id INTEGER PRIMARY KEY, x)",
    "ALTER TABLE tq_tasks RENAME TO tq_old",
    "ALTER TABLE tq_tasks ADD COLUMN extra TEXT NOT NULL DEFAULT 'x'",
    "ALTER TABLE tq_tasks ADD COLUMN queue TEXT",
    "ALTER TABLE tq_tasks RENAME COLUMN payload TO body",
    "DROP INDEX tq_tasks_reserved; ALTER TABLE tq_tasks DROP COLUMN unique_until",
    "CREATE TRIGGER tq_t1 BEFORE INSERT ON tq_tasks BEGIN SELECT RAISE(ABORT, 'refused'); END",
    "CREATE TRIGGER tq_t2 AFTER UPDATE ON tq_tasks BEGIN DELETE FROM tq_tasks; END",
    "CREATE TRIGGER tq_t3 AFTER DELETE ON tq_tasks BEGIN INSERT INTO tq_tasks (state, payload, created_at, run_at) VALUES (0, '{}', 0, 0); END",
    "CREATE TRIGGER tq_t4 BEFORE UPDATE ON tq_tasks BEGIN SELECT RAISE(IGNORE); END",
    "CREATE TRIGGER tq_t5 AFTER INSERT ON tq_holders BEGIN DELETE FROM tq_holders; END",
    "UPDATE tq_tasks SET payload = payload || char(0) || 'x'",
    "UPDATE tq_tasks SET payload = CAST(payload AS BLOB)",
    "UPDATE tq_tasks SET last_error = 'a' || char(0) || 'b'",
    "UPDATE tq_tasks SET last_error = x'ff00'",
    "UPDATE tq_tasks SET state = 1, lease_expires_at = 0, lease_token = NULL, holder_id = 424242",
    "UPDATE tq_tasks SET state = 1, lease_expires_at = NULL",
    "UPDATE tq_tasks SET state = 4, run_at = 0",
    "UPDATE tq_tasks SET state = 3, finished_at = NULL",
    "UPDATE tq_tasks SET state = 2, unique_key = NULL, unique_until = 0",
    "UPDATE tq_tasks SET state = 7",
    "UPDATE tq_tasks SET attempts = 4294967295",
    "UPDATE tq_tasks SET attempts = max_attempts, state = 1, lease_expires_at = 0",
    "UPDATE tq_tasks SET max_attempts = 0",
    "UPDATE tq_tasks SET priority = 'high'",
    "UPDATE tq_tasks SET priority = 4294967296",
    "UPDATE tq_tasks SET queue = 'other'",
    "UPDATE tq_tasks SET unique_for = -1, unique_key = 'k' || id",
    "UPDATE tq_tasks SET run_at = 9223372036854775807",
    "UPDATE tq_holders SET pid = 1, start_time = 0",
    "UPDATE tq_holders SET boot_id = 'another boot'",
    "UPDATE sqlite_sequence SET seq = 9223372036854775807",
    "INSERT INTO tq_meta VALUES ('other', 1)",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA user_version = 7",
    "PRAGMA page_size = 512; VACUUM",
    "PRAGMA auto_vacuum = FULL; VACUUM",
    "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = 'CREATE TABLE tq_tasks (id)' WHERE name = 'tq_tasks'",
    "PRAGMA writable_schema = ON; UPDATE sqlite_master SET rootpage = 2 WHERE name = 'tq_tasks_ready'",
    "PRAGMA writable_schema = ON; UPDATE sqlite_master SET rootpage = 2 WHERE name = 'tq_tasks_live'",
    "UPDATE tq_tasks SET lease_expires_at = 0",
    "PRAGMA writable_schema = ON; DELETE FROM sqlite_master WHERE type = 'index'",
    "CREATE TABLE app (x); INSERT INTO app VALUES (randomblob(5000))",
];

/// Runs `edits` on the queue file at `path` (with its `-wal`, if any), and
/// closes it: every edit that SQLite refuses is skipped.
fn apply_sql(path: &Path, edits: &[SqlEdit]) {
    let Ok(conn) = rusqlite::Connection::open(path) else {
        return;
    };
    for edit in edits {
        let result = match edit {
            SqlEdit::Set {
                table,
                row,
                column,
                value,
            } => {
                let (name, key, columns) = table.shape();
                let column = columns[*column as usize % columns.len()];
                conn.execute(
                    &format!(
                        "UPDATE {name} SET {column} = ?1 WHERE {key} = \
                         (SELECT {key} FROM {name} ORDER BY {key} LIMIT 1 \
                         OFFSET ?2 % max(1, (SELECT count(*) FROM {name})))"
                    ),
                    rusqlite::params![value.to_sql(), row],
                )
            }
            SqlEdit::Insert { table, values } => {
                let values = values.iter().map(SqlValue::to_sql);
                match table {
                    Table::Tasks => conn.execute(
                        "INSERT INTO tq_tasks (state, payload, created_at, run_at, attempts, \
                         lease_token, lease_expires_at, holder_id, finished_at) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                        rusqlite::params_from_iter(values),
                    ),
                    Table::Holders => conn.execute(
                        "INSERT INTO tq_holders (boot_id, pid_namespace, pid, start_time) \
                         VALUES (?1, ?2, ?3, ?4)",
                        rusqlite::params_from_iter(values.take(4)),
                    ),
                    Table::Meta => conn.execute(
                        "INSERT INTO tq_meta (key, value) VALUES (?1, ?2)",
                        rusqlite::params_from_iter(values.take(2)),
                    ),
                    Table::Sequence => conn.execute(
                        "INSERT INTO sqlite_sequence (name, seq) VALUES (?1, ?2)",
                        rusqlite::params_from_iter(values.take(2)),
                    ),
                }
            }
            SqlEdit::Delete { table, row } => {
                let (name, key, _) = table.shape();
                conn.execute(
                    &format!(
                        "DELETE FROM {name} WHERE {key} = \
                         (SELECT {key} FROM {name} ORDER BY {key} LIMIT 1 \
                         OFFSET ?1 % max(1, (SELECT count(*) FROM {name})))"
                    ),
                    [row],
                )
            }
            SqlEdit::Statement(k) => conn
                .execute_batch(STATEMENTS[*k as usize % STATEMENTS.len()])
                .map(|()| 0),
        };
        trace(edit, &result);
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum HostileOp {
    /// Pull with a 1 ms lease (expires at once) or a one-hour one, waiting
    /// up to 2 ms for a task or not.
    Pull {
        short: bool,
        wait: bool,
    },
    /// Pull up to `max` (1 to 4) at once.
    PullBatch {
        short: bool,
        max: u8,
    },
    /// Finish the task pulled or listed `back` tasks ago (wrapped).
    Finish {
        back: u8,
    },
    /// Finish the last `n` (1 to 4) tasks pulled or listed, in one batch.
    FinishBatch {
        n: u8,
    },
    Fail {
        back: u8,
    },
    Extend {
        back: u8,
        short: bool,
    },
    Count {
        state: u8,
    },
    /// List up to 4 tasks in a state with ids above `after`.
    List {
        state: u8,
        after: i8,
    },
    Recover,
    Push {
        which: u8,
        unique: bool,
    },
    PushBatch {
        n: u8,
    },
    RetryDead {
        id: i8,
    },
    RetryAllDead,
    Purge {
        dead: bool,
        all: bool,
    },
    OldestReadyAge,
    Checkpoint,
    /// Close the handle and open the file again.
    Reopen,
}

const PUSHES: [&str; 4] = ["{}", "[\"again\",1]", "\"\\u0000\"", "{\"k\":[{}]}"];
/// The template's unique keys and a new one.
const KEYS: [&str; 3] = ["invoice:1", "invoice:2", "invoice:3"];

// ---------------------------------------------------------------------------
// Running the operations: every call just has to return.

enum Handle {
    Rust(Queue),
    C(*mut tq_queue),
}

/// A pulled task (its receipt, or the C task), or a C task from a list.
enum Token {
    Rust(Receipt),
    C(*mut tq_task),
}

struct Session {
    path: String,
    api: Api,
    keep_history: bool,
    other_queue: bool,
    handle: Option<Handle>,
    tokens: Vec<Token>,
}

impl Session {
    fn open(&mut self) {
        self.close();
        let queue = if self.other_queue {
            OTHER_QUEUE
        } else {
            tq::DEFAULT_QUEUE
        };
        self.handle = match self.api {
            Api::Rust => {
                let mut options = OpenOptions::new();
                options
                    .durability(Durability::Normal)
                    .keep_history(self.keep_history)
                    .busy_timeout(Duration::from_millis(BUSY_TIMEOUT_MS))
                    .unwrap()
                    .queue(queue)
                    .unwrap();
                let result = Queue::open(&self.path, &options);
                check("open", &result.as_ref().map(drop).map_err(Clone::clone));
                result.ok().map(Handle::Rust)
            }
            Api::C => {
                let options = ffi::tq_options_new();
                assert!(!options.is_null());
                ffi::tq_options_set_durability(options, 1);
                ffi::tq_options_set_keep_history(options, self.keep_history);
                ffi::tq_options_set_busy_timeout_ms(options, BUSY_TIMEOUT_MS);
                let name = CString::new(queue).unwrap();
                ffi::tq_options_set_queue(options, name.as_ptr());
                let path = CString::new(self.path.as_str()).unwrap();
                let mut queue = std::ptr::null_mut();
                let status = ffi::tq_open(path.as_ptr(), options, &mut queue);
                ffi::tq_options_free(options);
                check_status("tq_open", status);
                if status == tq_status::TQ_OK {
                    assert!(!queue.is_null(), "tq_open: TQ_OK and NULL");
                    Some(Handle::C(queue))
                } else {
                    assert!(queue.is_null(), "tq_open failed but set a handle");
                    None
                }
            }
        };
    }

    fn close(&mut self) {
        if let Some(Handle::C(queue)) = self.handle.take() {
            ffi::tq_close(queue);
        }
    }

    /// The token `back` places from the newest, if any.
    fn token(&self, back: u8) -> Option<&Token> {
        let n = self.tokens.len();
        (n > 0).then(|| &self.tokens[n - 1 - back as usize % n])
    }

    fn run(&mut self, op: HostileOp) {
        match &self.handle {
            Some(Handle::Rust(queue)) => {
                let new_tokens = run_rust(queue, op, &self.tokens);
                self.tokens.extend(new_tokens.into_iter().map(Token::Rust));
            }
            Some(Handle::C(queue)) => {
                let queue = *queue;
                match op {
                    HostileOp::Reopen => {}
                    HostileOp::Finish { back } | HostileOp::Fail { back } => {
                        let Some(Token::C(task)) = self.token(back) else {
                            return;
                        };
                        let status = match op {
                            HostileOp::Finish { .. } => ffi::tq_finish(queue, *task),
                            _ => ffi::tq_fail(queue, *task, c"hostile".as_ptr()),
                        };
                        check_status(op, status);
                    }
                    HostileOp::Extend { back, short } => {
                        let Some(Token::C(task)) = self.token(back) else {
                            return;
                        };
                        check_status(op, ffi::tq_extend(queue, *task, lease_ms(short)));
                    }
                    HostileOp::FinishBatch { n } => {
                        let n = (usize::from(n) % 4 + 1).min(self.tokens.len());
                        let tasks: Vec<*mut tq_task> = self.tokens[self.tokens.len() - n..]
                            .iter()
                            .map(|token| match token {
                                Token::C(task) => *task,
                                Token::Rust(_) => unreachable!("one API per session"),
                            })
                            .collect();
                        let mut statuses = vec![0; n];
                        let status =
                            ffi::tq_finish_batch(queue, tasks.as_ptr(), n, statuses.as_mut_ptr());
                        check_status(op, status);
                    }
                    _ => {
                        let new_tasks = run_c(queue, op);
                        self.tokens.extend(new_tasks.into_iter().map(Token::C));
                    }
                }
            }
            None => return,
        }
        if let HostileOp::Reopen = op {
            self.open();
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.close();
        for token in &self.tokens {
            if let Token::C(task) = token {
                ffi::tq_task_free(*task);
            }
        }
    }
}

/// Runs `op` through the Rust API and returns the receipts of the tasks it
/// pulled.
fn run_rust(queue: &Queue, op: HostileOp, tokens: &[Token]) -> Vec<Receipt> {
    let receipt = |back: u8| {
        let n = tokens.len();
        match (n > 0).then(|| &tokens[n - 1 - back as usize % n]) {
            Some(Token::Rust(receipt)) => Some(*receipt),
            _ => None,
        }
    };
    let mut pulled = Vec::new();
    match op {
        HostileOp::Pull { short, wait } => {
            let mut options = pull_options(short);
            if wait {
                options.wait(Duration::from_millis(2)).unwrap();
            }
            let result = queue.pull(&options);
            check(op, &result);
            if let Ok(Some(task)) = result {
                std::hint::black_box((task.payload().len(), task.last_error()));
                pulled.push(task.receipt());
            }
        }
        HostileOp::PullBatch { short, max } => {
            let result = queue.pull_batch(usize::from(max % 4) + 1, &pull_options(short));
            check(op, &result);
            pulled.extend(result.into_iter().flatten().map(|task| task.receipt()));
        }
        HostileOp::Finish { back } => {
            if let Some(receipt) = receipt(back) {
                check(op, &queue.finish(receipt));
            }
        }
        HostileOp::FinishBatch { n } => {
            let n = (usize::from(n) % 4 + 1).min(tokens.len());
            let receipts: Vec<Receipt> = (0..n as u8).filter_map(receipt).collect();
            check(op, &queue.finish_batch(&receipts));
        }
        HostileOp::Fail { back } => {
            if let Some(receipt) = receipt(back) {
                check(op, &queue.fail(receipt, "hostile"));
            }
        }
        HostileOp::Extend { back, short } => {
            if let Some(receipt) = receipt(back) {
                let lease = Duration::from_millis(lease_ms(short));
                check(op, &queue.extend(receipt, lease));
            }
        }
        HostileOp::Count { state } => check(op, &queue.count(task_state(state))),
        HostileOp::List { state, after } => {
            let result = queue.list(task_state(state), i64::from(after), 4);
            check(op, &result);
        }
        HostileOp::Recover => check(op, &queue.recover()),
        HostileOp::Push { which, unique } => {
            let (payload, options) = push_options(which, unique);
            check(op, &queue.push(payload, &options));
        }
        HostileOp::PushBatch { n } => {
            let payloads = &PUSHES[..usize::from(n) % PUSHES.len() + 1];
            check(op, &queue.push_batch(payloads, &PushOptions::new()));
        }
        HostileOp::RetryDead { id } => check(op, &queue.retry_dead(i64::from(id))),
        HostileOp::RetryAllDead => check(op, &queue.retry_all_dead()),
        HostileOp::Purge { dead, all } => {
            let state = if dead {
                TaskState::Dead
            } else {
                TaskState::Done
            };
            check(
                op,
                &queue.purge(state, Duration::from_millis(purge_age_ms(all))),
            );
        }
        HostileOp::OldestReadyAge => check(op, &queue.oldest_ready_age()),
        HostileOp::Checkpoint => {
            check(op, &queue.checkpoint());
            check(op, &queue.wal_size());
        }
        HostileOp::Reopen => {}
    }
    pulled
}

/// Runs `op` through the C ABI and returns the tasks it pulled or listed
/// (the operations on earlier tasks are in `Session::run`).
fn run_c(queue: *mut tq_queue, op: HostileOp) -> Vec<*mut tq_task> {
    let mut tasks = Vec::new();
    match op {
        HostileOp::Pull { short, wait } => {
            let options = c_pull_options(short);
            if wait {
                ffi::tq_pull_options_set_wait_ms(options, 2);
            }
            let mut task = std::ptr::null_mut();
            let status = ffi::tq_pull(queue, options, &mut task);
            ffi::tq_pull_options_free(options);
            check_status(op, status);
            if status == tq_status::TQ_OK {
                assert!(!task.is_null(), "tq_pull: TQ_OK and NULL");
                tasks.push(task);
            } else {
                assert!(task.is_null(), "tq_pull failed but set a task");
            }
        }
        HostileOp::PullBatch { short, max } => {
            let options = c_pull_options(short);
            let max = usize::from(max % 4) + 1;
            let mut out = vec![std::ptr::null_mut(); max];
            let mut n = usize::MAX;
            let status = ffi::tq_pull_batch(queue, options, max, out.as_mut_ptr(), &mut n);
            ffi::tq_pull_options_free(options);
            check_status(op, status);
            assert!(n <= max, "tq_pull_batch: {n} tasks for room for {max}");
            assert!(
                out[n..].iter().all(|task| task.is_null()),
                "tq_pull_batch left a pointer past the count"
            );
            tasks.extend(&out[..n]);
        }
        HostileOp::Count { state } => {
            let mut n = 0;
            check_status(op, ffi::tq_count(queue, i32::from(state % 4), &mut n));
        }
        HostileOp::List { state, after } => {
            let mut out = [std::ptr::null_mut(); 4];
            let mut n = usize::MAX;
            let status = ffi::tq_list(
                queue,
                i32::from(state % 4),
                i64::from(after),
                out.len(),
                out.as_mut_ptr(),
                &mut n,
            );
            check_status(op, status);
            assert!(n <= out.len(), "tq_list: {n} tasks for room for 4");
            tasks.extend(&out[..n]);
        }
        HostileOp::Recover => check_status(op, ffi::tq_recover(queue, std::ptr::null_mut())),
        HostileOp::Push { which, unique } => {
            let payload = PUSHES[which as usize % PUSHES.len()];
            let options = ffi::tq_push_options_new();
            if unique {
                let key = CString::new(KEYS[which as usize % KEYS.len()]).unwrap();
                ffi::tq_push_options_set_unique_key(options, key.as_ptr());
            }
            let status = ffi::tq_push(
                queue,
                payload.as_ptr().cast(),
                payload.len(),
                options,
                std::ptr::null_mut(),
            );
            ffi::tq_push_options_free(options);
            check_status(op, status);
        }
        HostileOp::PushBatch { n } => {
            let payloads = &PUSHES[..usize::from(n) % PUSHES.len() + 1];
            let pointers: Vec<*const std::ffi::c_char> =
                payloads.iter().map(|p| p.as_ptr().cast()).collect();
            let lens: Vec<usize> = payloads.iter().map(|p| p.len()).collect();
            let status = ffi::tq_push_batch(
                queue,
                pointers.as_ptr(),
                lens.as_ptr(),
                payloads.len(),
                std::ptr::null(),
                std::ptr::null_mut(),
            );
            check_status(op, status);
        }
        HostileOp::RetryDead { id } => check_status(op, ffi::tq_retry_dead(queue, i64::from(id))),
        HostileOp::RetryAllDead => {
            check_status(op, ffi::tq_retry_all_dead(queue, std::ptr::null_mut()))
        }
        HostileOp::Purge { dead, all } => {
            let state = if dead { 3 } else { 2 };
            let status = ffi::tq_purge(queue, state, purge_age_ms(all), std::ptr::null_mut());
            check_status(op, status);
        }
        HostileOp::OldestReadyAge => {
            let mut age = 0;
            check_status(op, ffi::tq_oldest_ready_age_ms(queue, &mut age));
        }
        HostileOp::Checkpoint => {
            let mut bytes = 0;
            check_status(op, ffi::tq_checkpoint(queue, &mut bytes));
            check_status(op, ffi::tq_wal_size(queue, &mut bytes));
        }
        HostileOp::Finish { .. }
        | HostileOp::FinishBatch { .. }
        | HostileOp::Fail { .. }
        | HostileOp::Extend { .. }
        | HostileOp::Reopen => unreachable!("run by Session::run"),
    }
    for &task in &tasks {
        read_c_task(task);
    }
    tasks
}

/// Reads every field of a task handed to C: each must be there, and its
/// texts NUL-terminated without an inner NUL.
fn read_c_task(task: *mut tq_task) {
    let mut len = 0;
    let text = ffi::tq_task_payload(task, &mut len);
    assert!(
        !text.is_null(),
        "tq_task_payload: NULL for a task tq handed out"
    );
    // SAFETY: tq promises `len` bytes and a NUL.
    let bytes = unsafe { std::slice::from_raw_parts(text.cast::<u8>(), len + 1) };
    assert_eq!(bytes[len], 0, "payload not NUL-terminated");
    assert_eq!(
        unsafe { CStr::from_ptr(text) }.to_bytes().len(),
        len,
        "a payload handed to C has an inner NUL"
    );
    let last_error = ffi::tq_task_last_error(task);
    if !last_error.is_null() {
        std::hint::black_box(unsafe { CStr::from_ptr(last_error) });
    }
    let state = ffi::tq_task_state(task);
    assert!((0..=3).contains(&state), "tq_task_state: {state}");
    std::hint::black_box((
        ffi::tq_task_id(task),
        ffi::tq_task_attempts(task),
        ffi::tq_task_max_attempts(task),
        ffi::tq_task_priority(task),
        ffi::tq_task_run_at_unix_ms(task),
    ));
}

fn lease_ms(short: bool) -> u64 {
    if short {
        1
    } else {
        3_600_000
    }
}

fn pull_options(short: bool) -> PullOptions {
    let mut options = PullOptions::new();
    options
        .lease(Duration::from_millis(lease_ms(short)))
        .unwrap();
    options
}

fn c_pull_options(short: bool) -> *mut ffi::tq_pull_options {
    let options = ffi::tq_pull_options_new();
    assert!(!options.is_null());
    ffi::tq_pull_options_set_lease_ms(options, lease_ms(short));
    options
}

fn push_options(which: u8, unique: bool) -> (&'static str, PushOptions) {
    let mut options = PushOptions::new();
    if unique {
        options
            .unique_key(KEYS[which as usize % KEYS.len()])
            .unwrap();
    }
    (PUSHES[which as usize % PUSHES.len()], options)
}

fn purge_age_ms(all: bool) -> u64 {
    if all {
        0
    } else {
        3_600_000
    }
}

fn task_state(state: u8) -> TaskState {
    match state % 4 {
        0 => TaskState::Pending,
        1 => TaskState::Leased,
        2 => TaskState::Done,
        _ => TaskState::Dead,
    }
}

/// Whether `TQ_FUZZ_NO_INTERNAL` is set: an `Internal` error is then a
/// finding.
fn no_internal() -> bool {
    static NO_INTERNAL: OnceLock<bool> = OnceLock::new();
    *NO_INTERNAL.get_or_init(|| std::env::var_os("TQ_FUZZ_NO_INTERNAL").is_some())
}

/// Checks a Rust API result: an error carries a message (and is not
/// `Internal`, when asked).
fn check<T: std::fmt::Debug>(what: impl std::fmt::Debug, result: &tq::Result<T>) {
    trace(&what, result);
    if let Err(err) = result {
        assert!(
            !err.message().is_empty(),
            "{what:?}: {:?} without a message",
            err.kind()
        );
        if no_internal() && err.kind() == ErrorKind::Internal {
            panic!(
                "{what:?}: Internal error on a hostile file: {}",
                err.message()
            );
        }
    }
}

/// Checks a C status: an error comes with a message from `tq_last_error()`
/// (and is not `TQ_ERR_INTERNAL`, when asked).
fn check_status(what: impl std::fmt::Debug, status: tq_status) {
    if (status as i32) < 0 {
        let message = unsafe { CStr::from_ptr(ffi::tq_last_error()) };
        trace(&what, &(status, message));
        assert!(
            !message.to_bytes().is_empty(),
            "{what:?}: {status:?} without a message from tq_last_error()"
        );
        if no_internal() && status == tq_status::TQ_ERR_INTERNAL {
            panic!("{what:?}: TQ_ERR_INTERNAL on a hostile file: {message:?}");
        }
    } else {
        trace(&what, &status);
    }
}

fn write(path: &Path, bytes: &[u8]) {
    fs::write(path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

fuzz_target!(|input: Input| {
    trace("input", &input);
    let template = &templates()[input.base as usize];
    let scratch = Scratch::get("hostile_files");
    let dir = scratch.fresh();
    let db_path = dir.join("queue.db");
    let wal_path = dir.join("queue.db-wal");

    let (mut db, base_wal) = if input.sql.is_empty() {
        (template.db.clone(), template.wal.clone())
    } else {
        // Through SQL first, on a copy of the template, then read back.
        write(&db_path, &template.db);
        if let Some(wal) = &template.wal {
            write(&wal_path, wal);
        }
        apply_sql(&db_path, &input.sql);
        let db = fs::read(&db_path).unwrap_or_default();
        let wal = fs::read(&wal_path).ok().filter(|wal| !wal.is_empty());
        let _ = fs::remove_file(&wal_path);
        let _ = fs::remove_file(dir.join("queue.db-shm"));
        (db, wal)
    };
    apply(&input.db, &mut db);
    write(&db_path, &db);
    let wal = match &input.wal {
        WalPlan::Template => base_wal,
        WalPlan::Absent => None,
        WalPlan::Edited(edits) => {
            let mut wal = base_wal.unwrap_or_default();
            apply(edits, &mut wal);
            Some(wal)
        }
        WalPlan::Raw(bytes) => Some(bytes.clone()),
    };
    if let Some(wal) = &wal {
        write(&wal_path, wal);
    }

    {
        let mut session = Session {
            path: db_path.to_str().expect("UTF-8 path").to_owned(),
            api: input.api,
            keep_history: input.keep_history,
            other_queue: input.other_queue,
            handle: None,
            tokens: Vec::new(),
        };
        session.open();
        for op in &input.ops {
            session.run(*op);
        }
    }
    scratch.clean();
});
