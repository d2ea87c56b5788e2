//! The final database, read with SQL directly rather than through tq, so
//! the checker sees every row as stored (held and done ones included):
//! with rusqlite from a file, or from a schema on a PostgreSQL server.
//! Opened only once every child has exited.

use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use tq::OpenOptions;

use super::client::{checksum, key_of};
use super::common::{postgres_client, postgres_url};
use super::harness::{child_args, Args};

/// Where a scenario's queue lives: a file, or a schema of its own on the
/// PostgreSQL server named by `TQ_TEST_POSTGRES_URL`.
pub enum Target {
    File(String),
    Postgres { url: String, schema: String },
}

impl Target {
    /// The server's schema `schema`, emptied of an earlier run's tables;
    /// `None`, saying that `test` is skipped, when no server is set.
    pub fn postgres(test: &str, schema: &str) -> Option<Target> {
        let url = postgres_url(test)?;
        postgres_client(&url)
            .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
            .expect("drop the scenario's schema");
        Some(Target::Postgres {
            url,
            schema: schema.to_owned(),
        })
    }

    /// What `Queue::open` takes: the file's path, or the server's URL.
    pub fn db(&self) -> &str {
        match self {
            Target::File(path) => path,
            Target::Postgres { url, .. } => url,
        }
    }

    /// `options` with the schema set, on PostgreSQL.
    pub fn options(&self, options: &OpenOptions) -> OpenOptions {
        let mut options = options.clone();
        if let Target::Postgres { schema, .. } = self {
            options
                .postgres_schema(schema)
                .expect("a valid schema name");
        }
        options
    }

    /// A child's common arguments (see [`child_args`]), plus `schema` on
    /// PostgreSQL.
    pub fn child_args(&self, history_dir: &Path, label: &str, seed: u64, deadline: i64) -> Args {
        let mut args = child_args(self.db(), history_dir, label, seed, deadline);
        if let Target::Postgres { schema, .. } = self {
            args.push(("schema", schema.clone()));
        }
        args
    }

    /// Every task row, ordered by id.
    pub fn rows(&self) -> Vec<Row> {
        match self {
            Target::File(path) => rows(path),
            Target::Postgres { url, schema } => postgres_rows(url, schema),
        }
    }
}

/// One row of `tq_tasks`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub id: i64,
    pub queue: String,
    /// See [`READY`] and the others.
    pub state: i64,
    pub attempts: i64,
    pub max_attempts: i64,
    pub last_error: Option<String>,
    /// When it was done or dead, on tq's clock (Unix ms).
    pub finished_at: Option<i64>,
    pub key: String,
    pub sum: u64,
}

/// The stored states (tq's `sqlite/claim.rs` and `store.rs`): pending and
/// due, leased, done, dead, pending but not yet due (a retry after its
/// back-off), cancelled (kept as history), leased with its
/// cancellation waiting for the holder, and waiting for other tasks (a
/// task's parents, or its ordered group's earlier tasks).
pub const READY: i64 = 0;
pub const LEASED: i64 = 1;
pub const DONE: i64 = 2;
pub const DEAD: i64 = 3;
pub const WAITING: i64 = 4;
pub const CANCELLED: i64 = 5;
pub const CANCELLING: i64 = 6;
pub const BLOCKED: i64 = 7;

impl Row {
    /// Pending (due or not, or waiting for other tasks) or leased (its
    /// cancellation waiting or not): not yet at its end.
    pub fn is_live(&self) -> bool {
        matches!(self.state, READY | LEASED | WAITING | CANCELLING | BLOCKED)
    }
}

fn connect(path: &str) -> Connection {
    Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE)
        .unwrap_or_else(|err| panic!("open {path} with SQLite: {err}"))
}

/// Every task row; none when tq's table does not exist yet (a file that
/// lost power before its schema was committed).
pub fn rows(path: &str) -> Vec<Row> {
    let conn = connect(path);
    let exists: bool = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tq_tasks'",
            [],
            |row| row.get(0),
        )
        .expect("read the schema");
    if !exists {
        return Vec::new();
    }
    let mut statement = conn
        .prepare(
            "SELECT id, queue, state, attempts, max_attempts, last_error, payload, finished_at
             FROM tq_tasks ORDER BY id",
        )
        .expect("prepare");
    let rows = statement
        .query_map([], |row| {
            let payload: String = row.get(6)?;
            Ok(Row {
                id: row.get(0)?,
                queue: row.get(1)?,
                state: row.get(2)?,
                attempts: row.get(3)?,
                max_attempts: row.get(4)?,
                last_error: row.get(5)?,
                finished_at: row.get(7)?,
                key: key_of(&payload),
                sum: checksum(&payload),
            })
        })
        .expect("query the tasks");
    rows.map(|row| row.expect("a task row")).collect()
}

/// Every row of the schema's `tasks` table (see tq's
/// `postgres/schema.rs`; the states are SQLite's).
fn postgres_rows(url: &str, schema: &str) -> Vec<Row> {
    let rows = postgres_client(url)
        .query(
            &format!(
                "SELECT id, queue, state::int8, attempts, max_attempts, last_error, payload,
                        finished_at
                 FROM \"{schema}\".tasks ORDER BY id"
            ),
            &[],
        )
        .expect("query the tasks");
    rows.iter()
        .map(|row| {
            let payload: String = row.get(6);
            Row {
                id: row.get(0),
                queue: row.get(1),
                state: row.get(2),
                attempts: row.get(3),
                max_attempts: row.get(4),
                last_error: row.get(5),
                finished_at: row.get(7),
                key: key_of(&payload),
                sum: checksum(&payload),
            }
        })
        .collect()
}

/// `PRAGMA integrity_check`'s answer: "ok" for a sound file.
pub fn integrity(path: &str) -> String {
    let conn = connect(path);
    let mut statement = conn.prepare("PRAGMA integrity_check").expect("prepare");
    let lines: Vec<String> = statement
        .query_map([], |row| row.get(0))
        .expect("integrity_check")
        .map(|line| line.expect("a line"))
        .collect();
    lines.join("; ")
}

/// The file's journal mode, its schema (type and name of each object, in
/// order) and its tq schema version rows.
pub fn layout(path: &str) -> (String, Vec<String>, Vec<i64>) {
    let conn = connect(path);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("journal_mode");
    let mut statement = conn
        .prepare("SELECT type || ' ' || name FROM sqlite_master ORDER BY type, name")
        .expect("prepare");
    let objects = statement
        .query_map([], |row| row.get(0))
        .expect("read the schema")
        .map(|name| name.expect("a name"))
        .collect();
    let mut statement = conn
        .prepare("SELECT value FROM tq_meta WHERE key = 'schema_version'")
        .expect("prepare");
    let versions = statement
        .query_map([], |row| row.get(0))
        .expect("read the version")
        .map(|version| version.expect("a version"))
        .collect();
    (mode, objects, versions)
}
