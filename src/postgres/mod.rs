//! The PostgreSQL backend: a queue in a schema of a PostgreSQL database,
//! shared by any number of processes on any number of machines.
//!
//! Design: `docs/internals.md`, "The PostgreSQL backend".

mod attempts;
mod cancel;
mod claim;
mod events;
mod fair;
mod finish;
mod list;
mod listener;
mod pool;
mod push;
mod recover;
mod schedules;
mod schema;
mod settings;
mod sql_functions;
mod steps;
mod store;
#[cfg(test)]
mod test_server;

use std::sync::Arc;

use postgres::error::SqlState;
use postgres::Row;

use crate::error::{Error, ErrorKind, Result};
use crate::group::Group;
use crate::options::OpenOptions;
use crate::store::cancellations_channel;
use crate::task::{Receipt, Task};
use crate::wait::Bell;
use listener::{Listener, Waiters};
use pool::{Conn, Connector, Params, Pool, Tx};

/// A handle on one named queue in one PostgreSQL schema.
pub(crate) struct PostgresStore {
    pool: Pool,
    listener: Arc<Listener>,
    /// The waiters of this handle's queue in this process.
    waiters: Arc<Waiters>,
    /// The holders in this process watching for cancellations of the
    /// queue's leased tasks (see [`crate::store::cancellations_channel`]).
    cancellations: Arc<Waiters>,
    /// The schema's identity, drawn when it was created: receipts carry it.
    store_id: i64,
    /// The schema's name, quoted for SQL.
    schema: String,
    /// The notification channel of the schema.
    channel: String,
    /// The first key of the schema's advisory locks (see [`lock_space`]).
    lock_space: i32,
    queue: String,
    keep_history: bool,
    /// This handle's queue was seen with a concurrency limit (by a claim,
    /// or by setting one): its finishes then notify, for the waiters whose
    /// claims found no slot.
    limited: std::sync::atomic::AtomicBool,
    /// This handle's queue was seen fair (by a claim, or by a push or
    /// weight that made it so): its claims serve its keys in turn.
    fair: std::sync::atomic::AtomicBool,
    /// The busy timeout: the longest wait for this process's holder lock
    /// while its connection is made again.
    wait: std::time::Duration,
    opened_by_pid: u32,
    /// The claims (their size and lease) made at once by this handle's
    /// threads, run as one statement.
    claims: Group<(usize, i64), Vec<Task>>,
    /// The finishes made at once by this handle's threads, run as one
    /// statement.
    finishes: Group<Vec<Receipt>, Vec<bool>>,
    /// The finish-and-claims made at once by this handle's threads, run as
    /// one transaction.
    finish_and_claims: Group<finish::FinishAndClaim, (Vec<bool>, Vec<Task>)>,
}

impl Drop for PostgresStore {
    /// In a child after `fork()`, the pool's connections are the parent's
    /// sockets: closing them would send the server a goodbye that ends the
    /// parent's sessions. The child leaves them alone.
    fn drop(&mut self) {
        if std::process::id() != self.opened_by_pid {
            self.pool.forget_idle();
        }
    }
}

impl PostgresStore {
    /// Connects to the database at `url`, creates or migrates tq's schema,
    /// and joins (or starts) this process's listener on it.
    pub(crate) fn open(url: &str, options: &OpenOptions) -> Result<PostgresStore> {
        let name = options.postgres.schema();
        let connector = Connector::new(url, options)?;
        let pool = Pool::new(
            connector,
            options.postgres.pool_size(),
            options.busy_timeout,
        );
        let lock_space = lock_space(name);
        // Names are checked to be letters, digits and '_' (see options.rs),
        // so quoting cannot be escaped.
        let schema = format!("\"{name}\"");
        let store_id = {
            let mut conn = pool.get()?;
            schema::migrate(&mut conn.client, name, &schema, lock_space)?
        };
        let listener = Listener::join(url, name, &schema, lock_space, options)?;
        Ok(PostgresStore {
            pool,
            waiters: listener.waiters(&options.queue),
            cancellations: listener.waiters(&cancellations_channel(&options.queue)),
            listener,
            store_id,
            channel: listener::channel(name),
            schema,
            lock_space,
            queue: options.queue.clone(),
            keep_history: options.keep_history,
            limited: std::sync::atomic::AtomicBool::new(false),
            fair: std::sync::atomic::AtomicBool::new(false),
            wait: options.busy_timeout,
            opened_by_pid: std::process::id(),
            claims: Group::default(),
            finishes: Group::default(),
            finish_and_claims: Group::default(),
        })
    }

    /// The bell that this process's waiters on the queue sleep on.
    pub(crate) fn bell(&self) -> Arc<Bell> {
        Arc::clone(&self.waiters.bell)
    }

    /// `template` with `@.` naming tq's schema and `NOW_MS` the server's
    /// time in milliseconds since the Unix epoch.
    fn sql(&self, template: &str) -> String {
        template
            .replace("@.", &format!("{}.", self.schema))
            .replace("NOW_MS", NOW_MS)
            .replace("RANDOM_TOKEN", claim::RANDOM_TOKEN)
    }

    /// Runs `body` in a transaction of its own and commits it. A pooled
    /// connection found lost when the transaction begins (nothing sent yet)
    /// is replaced; one lost later ends the call, as the module's
    /// documentation says.
    fn write<T>(&self, mut body: impl FnMut(&mut Tx<'_>) -> Result<T>) -> Result<T> {
        let mut stale = 0;
        loop {
            let mut conn = self.pool.get()?;
            let mut tx = match conn.begin() {
                Ok(tx) => tx,
                Err(err) if connection_lost(&err) && stale < self.pool.size() => {
                    stale += 1;
                    continue;
                }
                Err(err) => return Err(err.into()),
            };
            let value = body(&mut tx)?;
            tx.commit()?;
            return Ok(value);
        }
    }

    /// Runs `sql`, a write of one statement, as a transaction of its own
    /// on a pooled connection: one round trip. A pooled connection seen
    /// lost before the statement is sent (nothing was) is replaced.
    fn write_one(&self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        let mut stale = 0;
        loop {
            let mut conn = self.pool.get()?;
            if !conn.lost() {
                return conn.write_one(sql, params);
            }
            if stale == self.pool.size() {
                return Err(Error::new(
                    ErrorKind::Io,
                    "the connections to the PostgreSQL server were lost before the call was \
                     sent (nothing was committed; it may be tried again)",
                ));
            }
            stale += 1;
        }
    }

    /// Runs `body`, a read, on a pooled connection; when the connection
    /// turns out to be lost, again on another one.
    fn read<T>(&self, mut body: impl FnMut(&mut Conn) -> Result<T>) -> Result<T> {
        let mut stale = 0;
        loop {
            let mut conn = self.pool.get()?;
            match body(&mut conn) {
                Err(_) if conn.client.is_closed() && stale < self.pool.size() => stale += 1,
                result => return result,
            }
        }
    }
}

/// The server's clock, in milliseconds since the Unix epoch, read once per
/// statement.
pub(super) const NOW_MS: &str = "(floor(extract(epoch FROM statement_timestamp()) * 1000)::int8)";

/// The first key of the schema's advisory locks: the migration lock is
/// `(space, 0)` and a holder's `(space, holder id)`, so schemas in one
/// database have locks of their own. A hash of the name, kept positive (it
/// is compared with `pg_locks.classid`, an unsigned oid).
fn lock_space(name: &str) -> i32 {
    // FNV-1a: stable across builds and platforms, unlike std's hashers.
    let mut hash: u32 = 0x811c_9dc5;
    for byte in format!("tq:{name}").bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    (hash & 0x7fff_ffff) as i32
}

/// The error's message: the server's own words when it has them.
fn describe(err: &postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{}: {} ({})", db.severity(), db.message(), db.code().code()),
        None => match std::error::Error::source(err) {
            Some(source) => format!("{err}: {source}"),
            None => err.to_string(),
        },
    }
}

/// Whether the connection was lost (closed, broken, or ended by the server).
fn connection_lost(err: &postgres::Error) -> bool {
    if err.is_closed() {
        return true;
    }
    match err.code() {
        Some(code) => {
            *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::IDLE_SESSION_TIMEOUT
                || code.code().starts_with("08")
        }
        None => std::error::Error::source(err).is_some_and(|source| source.is::<std::io::Error>()),
    }
}

impl From<postgres::Error> for Error {
    fn from(err: postgres::Error) -> Self {
        if connection_lost(&err) {
            return Error::new(
                ErrorKind::Io,
                format!(
                    "the connection to the PostgreSQL server was lost before the call committed \
                     (nothing was committed; it may be tried again): {}",
                    describe(&err)
                ),
            );
        }
        if let Some(error) = raised_by_tq(&err) {
            return error;
        }
        // A value of a type tq never wrote: the tables were changed outside tq.
        let text = err.to_string();
        if text.starts_with("error deserializing column") || text.starts_with("invalid column") {
            return Error::new(
                ErrorKind::NotADatabase,
                format!("tq's tables were changed outside tq: {}", describe(&err)),
            );
        }
        let kind = match err.code() {
            Some(code)
                if *code == SqlState::LOCK_NOT_AVAILABLE
                    || *code == SqlState::T_R_SERIALIZATION_FAILURE
                    || *code == SqlState::T_R_DEADLOCK_DETECTED
                    || *code == SqlState::TOO_MANY_CONNECTIONS =>
            {
                ErrorKind::Busy
            }
            // tq reads only its own tables: one missing, or missing a
            // column, was changed outside tq.
            Some(code)
                if *code == SqlState::UNDEFINED_TABLE
                    || *code == SqlState::UNDEFINED_COLUMN
                    || *code == SqlState::UNDEFINED_OBJECT =>
            {
                return Error::new(
                    ErrorKind::NotADatabase,
                    format!("tq's tables were changed outside tq: {}", describe(&err)),
                );
            }
            Some(code)
                if *code == SqlState::DISK_FULL
                    || *code == SqlState::IO_ERROR
                    || *code == SqlState::INSUFFICIENT_PRIVILEGE
                    || *code == SqlState::READ_ONLY_SQL_TRANSACTION
                    || *code == SqlState::OUT_OF_MEMORY
                    || code.code().starts_with("53") =>
            {
                ErrorKind::Io
            }
            Some(code) if *code == SqlState::PROGRAM_LIMIT_EXCEEDED => ErrorKind::InvalidArgument,
            _ => ErrorKind::Internal,
        };
        Error::new(kind, format!("postgres: {}", describe(&err)))
    }
}

/// The error that tq's SQL functions (migrations 10 and 11 in `schema.rs`) raised,
/// with their message and the kind their SQLSTATE stands for; `None` for
/// any other error. Only those functions raise errors of their own (a
/// PL/pgSQL `RAISE`) in tq's statements.
fn raised_by_tq(err: &postgres::Error) -> Option<Error> {
    let db = err.as_db_error()?;
    if db.routine() != Some("exec_stmt_raise") {
        return None;
    }
    let kind = match db.code() {
        code if *code == SqlState::INVALID_PARAMETER_VALUE => ErrorKind::InvalidArgument,
        code if *code == SqlState::INVALID_TEXT_REPRESENTATION => ErrorKind::InvalidJson,
        code if *code == SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE => ErrorKind::NotHeld,
        code if *code == SqlState::T_R_SERIALIZATION_FAILURE => ErrorKind::Busy,
        code if *code == SqlState::CONFIGURATION_LIMIT_EXCEEDED => ErrorKind::Full,
        _ => return None,
    };
    Some(Error::new(kind, db.message()))
}

/// The error for a write whose commit was sent but whose answer was lost.
fn unknown_outcome(err: &postgres::Error) -> Error {
    Error::new(
        ErrorKind::UnknownOutcome,
        format!(
            "the connection to the PostgreSQL server was lost while the write was being \
             committed: it may or may not have been committed ({})",
            describe(err)
        ),
    )
}

/// The refusal of a call about SQLite's write-ahead log.
fn no_wal_file() -> Error {
    Error::invalid_argument(
        "the PostgreSQL backend has no WAL file of tq's own (the server manages its log): \
         checkpoint and WAL size mean nothing there",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_spaces_are_positive_and_differ_by_schema() {
        let names = ["tq", "tq2", "jobs", "a", "b"];
        let spaces: std::collections::HashSet<i32> = names.iter().map(|n| lock_space(n)).collect();
        assert_eq!(spaces.len(), names.len());
        assert!(spaces.iter().all(|&space| space >= 0));
        assert_eq!(lock_space("tq"), lock_space("tq"));
    }

    #[test]
    fn a_commit_whose_connection_is_lost_has_an_unknown_outcome() {
        use std::io::Write;
        let Ok(url) = std::env::var("TQ_TEST_POSTGRES_URL") else {
            let _ = writeln!(
                std::io::stderr(),
                "skipped a_commit_whose_connection_is_lost_has_an_unknown_outcome: \
                 TQ_TEST_POSTGRES_URL is not set (`make test-postgres` sets it)"
            );
            return;
        };
        let connector = Connector::new(&url, &OpenOptions::new()).unwrap();
        let mut client = connector.connect().unwrap();
        let pid: i32 = client
            .query_one("SELECT pg_backend_pid()", &[])
            .unwrap()
            .get(0);
        let mut conn = Conn::new(client, connector.connect_timeout());
        let mut tx = conn.begin().unwrap();
        tx.query("SELECT 1", &[]).unwrap();
        connector
            .connect()
            .unwrap()
            .execute("SELECT pg_terminate_backend($1)", &[&pid])
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let err = tx.commit().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnknownOutcome, "{err}");
        assert!(err.message().contains("may or may not"), "{err}");
    }
}
