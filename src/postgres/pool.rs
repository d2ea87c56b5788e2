//! Connections to the server: how one is made and set up ([`Connector`]),
//! and the pool of each handle ([`Pool`]).
//!
//! Design: `docs/internals.md`, "The PostgreSQL pool".

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use postgres::types::ToSql;
use postgres::{Client, GenericClient, Row, Statement, Transaction};

use crate::error::{Error, ErrorKind, Result};
use crate::options::{Durability, OpenOptions};

/// How long making a connection may take when the URL does not say
/// (`connect_timeout`): the server may be out of reach.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Makes connections to one server with the settings of one handle.
pub(super) struct Connector {
    config: postgres::Config,
    /// Run on each new connection: the session's durability, lock wait and
    /// history.
    setup: String,
    /// Where the server is, for messages (never the password).
    pub(super) place: String,
}

impl Connector {
    /// Reads `url` and the options that become session settings.
    pub(super) fn new(url: &str, options: &OpenOptions) -> Result<Connector> {
        let mut config = postgres::Config::from_str(url).map_err(|err| {
            Error::invalid_argument(format!("the PostgreSQL URL is not valid: {err}"))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        // libpq's way to keep a password out of the URL (and so out of
        // `ps` and shell histories); the `postgres` crate does not read it.
        if config.get_password().is_none() {
            if let Some(password) = std::env::var_os("PGPASSWORD") {
                config.password(password.as_encoded_bytes());
            }
        }
        if config.get_application_name().is_none() {
            config.application_name("tq");
        }
        check_tls(&config)?;
        let place = place_of(&config);
        // synchronous_commit is PostgreSQL's own durability: `off` acknowledges
        // a commit before its WAL reaches the disk, losing at most the last
        // few on a server crash, never corrupting anything.
        let synchronous_commit = match options.durability {
            Durability::Full => "on",
            Durability::Normal => "off",
        };
        // The busy timeout bounds waits for locks held by other sessions. 0
        // means "no limit" to PostgreSQL, so "fail at once" becomes 1 ms.
        let lock_timeout = options.busy_timeout.as_millis().max(1);
        // Read by the trigger that cancels the tasks waiting for a task
        // that ended (see `schema.rs`).
        let keep_history = if options.keep_history { "on" } else { "off" };
        // The schema's channel, which the same trigger notifies when it
        // makes a task ready (the name is letters, digits and '_').
        let channel = super::listener::channel(options.postgres.schema());
        // A prepared statement is planned once, for any values: left to
        // choose, the server plans a claim again at every call once the
        // table's statistics show a backlog, which costs more than running
        // it. tq's statements are written so that the plan for any values
        // looks rows up by index (see `claim.rs`).
        Ok(Connector {
            config,
            setup: format!(
                "SET synchronous_commit TO {synchronous_commit}; SET lock_timeout TO {lock_timeout}; \
                 SET plan_cache_mode TO force_generic_plan; SET tq.keep_history TO {keep_history}; \
                 SET tq.channel TO '{channel}'"
            ),
            place,
        })
    }

    /// The longest a connection attempt may take.
    pub(super) fn connect_timeout(&self) -> Duration {
        self.config
            .get_connect_timeout()
            .copied()
            .unwrap_or(CONNECT_TIMEOUT)
    }

    /// A new connection, set up.
    pub(super) fn connect(&self) -> Result<Client> {
        let mut client = self.open()?.map_err(|err| {
            let refused = err.code().is_some_and(refuses_the_url);
            let (kind, what) = if refused {
                (
                    ErrorKind::InvalidArgument,
                    "the server refused the connection",
                )
            } else {
                (ErrorKind::Io, "cannot connect")
            };
            Error::new(
                kind,
                format!(
                    "PostgreSQL at {}: {what}: {}",
                    self.place,
                    super::describe(&err)
                ),
            )
        })?;
        client.batch_execute(&self.setup)?;
        Ok(client)
    }

    #[cfg(not(feature = "postgres-tls"))]
    fn open(&self) -> Result<std::result::Result<Client, postgres::Error>> {
        Ok(self.config.connect(postgres::NoTls))
    }

    #[cfg(feature = "postgres-tls")]
    fn open(&self) -> Result<std::result::Result<Client, postgres::Error>> {
        if self.config.get_ssl_mode() == postgres::config::SslMode::Disable {
            return Ok(self.config.connect(postgres::NoTls));
        }
        let connector = native_tls::TlsConnector::new().map_err(|err| {
            Error::new(
                ErrorKind::Io,
                format!("cannot set up TLS for PostgreSQL at {}: {err}", self.place),
            )
        })?;
        Ok(self
            .config
            .connect(postgres_native_tls::MakeTlsConnector::new(connector)))
    }
}

/// Where `config` points, for messages: its hosts and ports, and the
/// database (never the password).
fn place_of(config: &postgres::Config) -> String {
    format!(
        "{}/{}",
        config
            .get_hosts()
            .iter()
            .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
            .map(|(host, port)| match host {
                postgres::config::Host::Tcp(name) => format!("{name}:{port}"),
                postgres::config::Host::Unix(path) => format!("{}:{port}", path.display()),
            })
            .collect::<Vec<_>>()
            .join(","),
        config.get_dbname().unwrap_or("")
    )
}

/// Without TLS support, a URL that demands TLS is refused rather than
/// connected in the clear.
#[cfg(not(feature = "postgres-tls"))]
fn check_tls(config: &postgres::Config) -> Result<()> {
    if config.get_ssl_mode() == postgres::config::SslMode::Require {
        return Err(Error::invalid_argument(
            "the URL asks for TLS (sslmode=require), but this libtq was built without TLS \
             support (cargo feature `postgres-tls`)",
        ));
    }
    Ok(())
}

#[cfg(feature = "postgres-tls")]
fn check_tls(_config: &postgres::Config) -> Result<()> {
    Ok(())
}

/// How long a pooled connection may sit idle before it is asked whether it
/// is alive (see [`Conn::lost`]).
const CHECK_AFTER_IDLE: Duration = Duration::from_millis(50);

/// A connection and the statements prepared on it.
pub(super) struct Conn {
    pub(super) client: Client,
    statements: HashMap<String, Statement>,
    /// When the connection last went back to the pool.
    idle_since: Instant,
    /// The longest wait for the answer to [`Conn::lost`]'s question.
    check_timeout: Duration,
}

/// Parameters of a statement.
pub(super) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// `sql` prepared on `client`, once per connection: a prepared statement
/// outlives the transaction it was prepared in.
fn prepare(
    client: &mut impl GenericClient,
    statements: &mut HashMap<String, Statement>,
    sql: &str,
) -> Result<Statement> {
    if let Some(statement) = statements.get(sql) {
        return Ok(statement.clone());
    }
    let statement = client.prepare(sql)?;
    statements.insert(sql.to_owned(), statement.clone());
    Ok(statement)
}

impl Conn {
    pub(super) fn new(client: Client, check_timeout: Duration) -> Conn {
        Conn {
            client,
            statements: HashMap::new(),
            idle_since: Instant::now(),
            check_timeout,
        }
    }

    /// Runs `sql` on its own (a read).
    pub(super) fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        let statement = prepare(&mut self.client, &mut self.statements, sql)?;
        Ok(self.client.query(&statement, params)?)
    }

    /// Whether the connection turned out lost. One idle for
    /// [`CHECK_AFTER_IDLE`] or longer is asked first, a round trip: the
    /// server may have ended the session meanwhile (a restart, an
    /// administrator), which only a read of the socket tells, and a write
    /// sent on it would be left with an unknown outcome. A connection used
    /// again sooner is not asked, as its caller is waiting on round trips.
    pub(super) fn lost(&mut self) -> bool {
        if self.client.is_closed() {
            return true;
        }
        if self.idle_since.elapsed() < CHECK_AFTER_IDLE {
            return false;
        }
        self.client.is_valid(self.check_timeout).is_err()
    }

    /// Runs `sql`, a write of one statement, as a transaction of its own:
    /// one round trip, as the server commits before it answers. A
    /// connection lost meanwhile leaves the outcome unknown.
    pub(super) fn write_one(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        let statement = prepare(&mut self.client, &mut self.statements, sql)?;
        self.client.query(&statement, params).map_err(committing)
    }

    /// Opens a transaction; fails only when the connection is lost.
    pub(super) fn begin(&mut self) -> std::result::Result<Tx<'_>, postgres::Error> {
        let Conn {
            client, statements, ..
        } = self;
        Ok(Tx {
            tx: client.transaction()?,
            statements,
        })
    }
}

/// A transaction on a pooled connection; rolled back unless committed.
pub(super) struct Tx<'a> {
    tx: Transaction<'a>,
    statements: &'a mut HashMap<String, Statement>,
}

impl Tx<'_> {
    pub(super) fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        let statement = prepare(&mut self.tx, self.statements, sql)?;
        Ok(self.tx.query(&statement, params)?)
    }

    pub(super) fn query_opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>> {
        let statement = prepare(&mut self.tx, self.statements, sql)?;
        Ok(self.tx.query_opt(&statement, params)?)
    }

    pub(super) fn execute(&mut self, sql: &str, params: Params<'_>) -> Result<u64> {
        let statement = prepare(&mut self.tx, self.statements, sql)?;
        Ok(self.tx.execute(&statement, params)?)
    }

    /// Commits. A connection lost now leaves the outcome unknown: the
    /// server may have committed before the answer was lost.
    pub(super) fn commit(self) -> Result<()> {
        self.tx.commit().map_err(committing)
    }
}

/// The error of a call that was committing: a lost connection leaves the
/// outcome unknown, as the server may have committed before the answer
/// was lost.
fn committing(err: postgres::Error) -> Error {
    if super::connection_lost(&err) {
        super::unknown_outcome(&err)
    } else {
        err.into()
    }
}

/// At most `size` connections, made when first needed and kept.
pub(super) struct Pool {
    pub(super) connector: Connector,
    size: usize,
    wait: Duration,
    state: Mutex<PoolState>,
    freed: Condvar,
}

#[derive(Default)]
struct PoolState {
    idle: Vec<Conn>,
    /// Connections idle or handed out.
    open: usize,
}

/// A connection out of the pool; it goes back when dropped, unless it broke.
pub(super) struct Pooled<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
}

impl Pool {
    pub(super) fn new(connector: Connector, size: usize, wait: Duration) -> Pool {
        Pool {
            connector,
            size,
            wait,
            state: Mutex::new(PoolState::default()),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, PoolState> {
        // A list and a count, each changed in one step: a panic cannot
        // leave them half-changed.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// An idle connection, a new one while the pool has room, or the first
    /// one given back within the busy timeout.
    pub(super) fn get(&self) -> Result<Pooled<'_>> {
        let deadline = Instant::now() + self.wait;
        let mut state = self.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(Pooled {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if state.open < self.size {
                state.open += 1;
                drop(state);
                return match self.connector.connect() {
                    Ok(client) => Ok(Pooled {
                        pool: self,
                        conn: Some(Conn::new(client, self.connector.connect_timeout())),
                    }),
                    Err(err) => {
                        self.lock().open -= 1;
                        self.freed.notify_one();
                        Err(err)
                    }
                };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::new(
                    ErrorKind::Busy,
                    format!(
                        "all {} connections of the pool stayed in use past the busy timeout \
                         (raise the pool size or the busy timeout)",
                        self.size
                    ),
                ));
            }
            state = self
                .freed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }

    /// Lets go of the idle connections without closing them (see
    /// `PostgresStore`'s `Drop`). Takes no lock: in a child after `fork()`,
    /// a thread of the parent may have held it, and `&mut self` shows that
    /// no thread of this process does. The list is forgotten whole, unread
    /// (such a thread may have been changing it).
    pub(super) fn forget_idle(&mut self) {
        let state = self
            .state
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::forget(std::mem::take(&mut state.idle));
    }

    /// How many connections the pool keeps at most.
    pub(super) fn size(&self) -> usize {
        self.size
    }
}

impl std::ops::Deref for Pooled<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        self.conn.as_ref().expect("present until dropped")
    }
}

impl std::ops::DerefMut for Pooled<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        self.conn.as_mut().expect("present until dropped")
    }
}

impl Drop for Pooled<'_> {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        conn.idle_since = Instant::now();
        let mut state = self.pool.lock();
        if conn.client.is_closed() {
            state.open -= 1;
        } else {
            state.idle.push(conn);
        }
        drop(state);
        self.pool.freed.notify_one();
    }
}

/// Whether a server's answer `code` to a connection refuses the URL for
/// good: its user, password or database. Anything else is a server out of
/// reach for a moment, like one that does not answer: starting up,
/// shutting down, recovering from a crash, or ending the new session
/// (`pg_terminate_backend`, a restart) before it was set up.
fn refuses_the_url(code: &postgres::error::SqlState) -> bool {
    use postgres::error::SqlState;
    code.code().starts_with("28")
        || *code == SqlState::INVALID_CATALOG_NAME
        || *code == SqlState::INSUFFICIENT_PRIVILEGE
}

#[cfg(test)]
mod tests {
    use super::super::test_server::server;
    use super::*;

    #[test]
    fn only_a_bad_user_password_or_database_refuses_the_url() {
        use postgres::error::SqlState;
        for code in [
            SqlState::INVALID_PASSWORD,
            SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
            SqlState::INVALID_CATALOG_NAME,
            SqlState::INSUFFICIENT_PRIVILEGE,
        ] {
            assert!(refuses_the_url(&code), "{code:?}");
        }
        // A restart or a terminated session is a server out of reach.
        for code in [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::TOO_MANY_CONNECTIONS,
            SqlState::CONNECTION_FAILURE,
        ] {
            assert!(!refuses_the_url(&code), "{code:?}");
        }
    }

    #[test]
    fn the_password_comes_from_pgpassword_when_the_url_has_none() {
        // No other test reads PGPASSWORD; the test server trusts every
        // connection, so a password set meanwhile changes nothing there.
        std::env::set_var("PGPASSWORD", "from-the-environment");
        let from_env = Connector::new("postgres://u@127.0.0.1/db", &OpenOptions::new());
        let from_url = Connector::new("postgres://u:in-the-url@127.0.0.1/db", &OpenOptions::new());
        std::env::remove_var("PGPASSWORD");
        let password = |connector: Result<Connector>| {
            connector.unwrap().config.get_password().map(<[u8]>::to_vec)
        };
        assert_eq!(password(from_env), Some(b"from-the-environment".to_vec()));
        assert_eq!(
            password(from_url),
            Some(b"in-the-url".to_vec()),
            "the URL wins"
        );
        let without = password(Connector::new(
            "postgres://u@127.0.0.1/db",
            &OpenOptions::new(),
        ));
        assert_eq!(without, None);
    }

    #[test]
    fn durability_and_busy_timeout_become_session_settings() {
        let Some(url) = server("durability_and_busy_timeout_become_session_settings") else {
            return;
        };
        for (durability, expected) in [
            (crate::Durability::Full, "on"),
            (crate::Durability::Normal, "off"),
        ] {
            let mut options = OpenOptions::new();
            options
                .durability(durability)
                .busy_timeout(std::time::Duration::ZERO)
                .unwrap();
            let connector = super::super::pool::Connector::new(&url, &options).unwrap();
            let mut client = connector.connect().unwrap();
            let setting = |client: &mut postgres::Client, name: &str| -> String {
                client
                    .query_one(&format!("SHOW {name}"), &[])
                    .unwrap()
                    .get(0)
            };
            assert_eq!(setting(&mut client, "synchronous_commit"), expected);
            assert_eq!(
                setting(&mut client, "lock_timeout"),
                "1ms",
                "0 is no limit there"
            );
        }
    }
}
