//! The one connection per process and schema that shows this process is
//! alive and hears of new tasks.
//!
//! Design: `docs/internals.md`, "The PostgreSQL listener".

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;

use super::pool::Connector;
use super::NOW_MS;
use crate::error::{Error, ErrorKind, Result};
use crate::options::OpenOptions;
use crate::registry::Registry;
use crate::wait::Bell;

/// How often the listener's thread looks whether its handles are all gone.
const TICK: Duration = Duration::from_millis(100);

/// Waiters try to claim at least this often even when no notification
/// came: a claim may skip a ready task that another claim had locked for a
/// moment (`SKIP LOCKED`) without taking it, and nothing notifies then.
/// One claim a second per idle waiter is cheap for the server, and a rare
/// skip then delays a task by a second at most (`bench/postgres.rs` runs
/// waiting pulls from 1 to 16 processes).
const NUDGE_EVERY: Duration = Duration::from_secs(1);

/// Longest pause between two tries to connect again, or to take the
/// holder lock again.
const MAX_RECONNECT_PAUSE: Duration = Duration::from_secs(2);

/// How often the listener refreshes its holder's `seen_alive_at`.
const HEARTBEAT_EVERY: Duration = Duration::from_secs(2);

/// How long a holder whose lock is free still counts as alive after its
/// last heartbeat. Its process connects again within a pause of at most
/// [`MAX_RECONNECT_PAUSE`] plus a connection attempt of at most 10 s (the
/// default `connect_timeout`), after a heartbeat at most
/// [`HEARTBEAT_EVERY`] old: 30 s leaves twice that margin.
pub(super) const GRACE: Duration = Duration::from_secs(30);

/// How long a new session waits to take this process's holder id again
/// before it takes a new one: the server releases the dead session's lock
/// once it notices the session is gone, which its TCP keepalives bound.
const RETAKE_FOR: Duration = Duration::from_secs(120);

/// The server-side TCP keepalives of the listener's session (seconds):
/// the server notices a vanished client within about a minute.
const SERVER_KEEPALIVES: &str = "SET tcp_keepalives_idle = 30; SET tcp_keepalives_interval = 10; \
    SET tcp_keepalives_count = 3";

/// Tries for a free holder id before giving up (ids are taken by other
/// schemas' holders only when their lock spaces collide).
const HOLDER_ID_TRIES: usize = 16;

/// The longest channel name PostgreSQL keeps whole (NAMEDATALEN - 1).
const MAX_CHANNEL_LEN: usize = 63;

/// The notification channel of schema `name`: `tq_{name}`, or, for a name
/// too long for that (61 to 63 bytes), its first bytes and a hash of the
/// whole name, so that the channel fits and differs by schema.
pub(super) fn channel(name: &str) -> String {
    let plain = format!("tq_{name}");
    if plain.len() <= MAX_CHANNEL_LEN {
        return plain;
    }
    // FNV-1a: stable across builds and platforms, unlike std's hashers.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    // Names are ASCII (see options.rs): any byte is a char boundary.
    let kept = MAX_CHANNEL_LEN - "tq__".len() - 16;
    format!("tq_{}_{hash:016x}", &name[..kept])
}

/// This process's listener on one schema, shared by its handles there.
pub(super) struct Listener {
    state: Arc<ListenerState>,
}

/// What wakes the waiters of one queue in this process.
#[derive(Default)]
pub(super) struct Waiters {
    pub(super) bell: Arc<Bell>,
    /// Moved by every notification for the queue (see
    /// [`crate::store::Store::change_counter`]).
    pub(super) changes: AtomicI64,
}

impl Waiters {
    fn wake(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
        self.bell.ring();
    }
}

/// What the listener's thread shares with the handles.
struct ListenerState {
    /// The waiters of each queue opened in this process, by name.
    queues: Mutex<BTreeMap<String, Arc<Waiters>>>,
    holder: Mutex<Holder>,
    holder_changed: Condvar,
    /// Set when the last handle is gone: the thread ends and its session
    /// with it, releasing the holder lock.
    stop: AtomicBool,
}

/// Where the listener's connection stands.
#[derive(Clone)]
enum Holder {
    Connecting,
    /// Connected, holding the lock of this holder id.
    Held(i32),
    /// The last try to connect failed so; the thread tries again.
    Failed(Error),
}

/// The listeners of this process, by URL, schema and process id.
type Key = (String, String, u32);
static LISTENERS: Registry<Key, Listener> = Registry::new();

impl Listener {
    /// The listener of this process on schema `name` at `url`, started if
    /// none runs; fails when its first connection cannot be made.
    pub(super) fn join(
        url: &str,
        name: &str,
        quoted: &str,
        lock_space: i32,
        options: &OpenOptions,
    ) -> Result<Arc<Listener>> {
        let key = (url.to_owned(), name.to_owned(), std::process::id());
        if let Some(listener) = LISTENERS.find(&key)? {
            return Ok(listener);
        }
        let state = Arc::new(ListenerState {
            queues: Mutex::new(BTreeMap::new()),
            holder: Mutex::new(Holder::Connecting),
            holder_changed: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let listener = Arc::new(Listener {
            state: Arc::clone(&state),
        });
        let connector = Connector::new(url, options)?;
        let quoted = quoted.to_owned();
        let channel = channel(name);
        thread::Builder::new()
            .name("tq-pg-listener".into())
            .spawn(move || run(&state, &connector, &quoted, &channel, lock_space))
            .map_err(|err| {
                Error::new(
                    ErrorKind::Io,
                    format!("cannot start the PostgreSQL listener thread: {err}"),
                )
            })?;
        // The first outcome decides the open: a server that takes the
        // pool's connection but not this one is not usable either. It is
        // waited for without the lock, so that other opens go on.
        listener.first_outcome()?;
        // One listener per key: if another thread started one meanwhile,
        // that one is used, and this one stops, its holder id never used.
        LISTENERS.adopt(key, listener)
    }

    /// The waiters of `queue` in this process: woken by notifications for
    /// that queue only.
    pub(super) fn waiters(&self, queue: &str) -> Arc<Waiters> {
        let mut queues = self.state.queues();
        Arc::clone(queues.entry(queue.to_owned()).or_default())
    }

    /// Waits for the first try to connect, and says how it went.
    fn first_outcome(&self) -> Result<()> {
        let mut holder = self.state.lock();
        loop {
            match &*holder {
                Holder::Held(_) => return Ok(()),
                Holder::Failed(err) => return Err(err.clone()),
                Holder::Connecting => {}
            }
            holder = self
                .state
                .holder_changed
                .wait(holder)
                .unwrap_or_else(|poisoned| poisoned.into_inner());
        }
    }

    /// This process's holder id, waiting up to `wait` while the listener
    /// connects again.
    pub(super) fn holder(&self, wait: Duration) -> Result<i32> {
        let deadline = Instant::now() + wait;
        let mut holder = self.state.lock();
        loop {
            let now = Instant::now();
            match &*holder {
                Holder::Held(id) => return Ok(*id),
                Holder::Failed(err) if now >= deadline => return Err(err.clone()),
                Holder::Connecting if now >= deadline => {
                    return Err(Error::new(
                        ErrorKind::Io,
                        "the connection that holds this process's lock on the PostgreSQL \
                         server was lost and is not back yet",
                    ))
                }
                _ => {}
            }
            holder = self
                .state
                .holder_changed
                .wait_timeout(holder, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
    }
}

impl ListenerState {
    fn lock(&self) -> MutexGuard<'_, Holder> {
        // One value replaced whole: a panic cannot leave it half-changed.
        self.holder
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn set(&self, holder: Holder) {
        *self.lock() = holder;
        self.holder_changed.notify_all();
    }

    fn queues(&self) -> MutexGuard<'_, BTreeMap<String, Arc<Waiters>>> {
        // Entries are only added, each whole: a panic cannot leave the map
        // half-changed.
        self.queues
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wakes the waiters of `queue`: a task of it may have become ready.
    fn changed(&self, queue: &str) {
        let waiters = self.queues().get(queue).cloned();
        if let Some(waiters) = waiters {
            waiters.wake();
        }
    }

    /// Wakes every waiter of the process: notifications may have been
    /// missed.
    fn all_changed(&self) {
        let queues: Vec<Arc<Waiters>> = self.queues().values().cloned().collect();
        for waiters in queues {
            waiters.wake();
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// The listener's thread: connect, listen until the connection is lost,
/// connect again under the same holder id, until the last handle is gone;
/// then delete the holder's row, so that its tasks come back at once.
fn run(state: &ListenerState, connector: &Connector, quoted: &str, channel: &str, lock_space: i32) {
    let holders = Holders { quoted, lock_space };
    let mut pause = Duration::from_millis(50);
    let mut previous = None;
    while !state.stopped() {
        match connect(connector, &holders, channel, previous, state) {
            Ok((mut client, id)) => {
                pause = Duration::from_millis(50);
                previous = Some(id);
                state.set(Holder::Held(id));
                // Writes made while no one listened were not heard.
                state.all_changed();
                listen(&mut client, &holders, id, state);
                if state.stopped() {
                    // Best effort: a row left behind only delays recovery
                    // by the grace period.
                    let _ = holders.forget(&mut client, id);
                    return;
                }
                state.set(Holder::Connecting);
                state.all_changed();
            }
            Err(err) => {
                state.set(Holder::Failed(err));
                sleep_unless_stopped(state, pause);
                pause = (pause * 2).min(MAX_RECONNECT_PAUSE);
            }
        }
    }
}

/// Sleeps for `pause`, or less when the last handle goes.
fn sleep_unless_stopped(state: &ListenerState, pause: Duration) {
    let until = Instant::now() + pause;
    while !state.stopped() && Instant::now() < until {
        thread::sleep(TICK.min(pause));
    }
}

/// The statements on holder locks and the `holders` table of one schema.
struct Holders<'a> {
    /// The schema's name, quoted for SQL.
    quoted: &'a str,
    lock_space: i32,
}

impl Holders<'_> {
    fn try_lock(&self, client: &mut Client, id: i32) -> Result<bool> {
        Ok(client
            .query_one(
                "SELECT pg_try_advisory_lock($1, $2)",
                &[&self.lock_space, &id],
            )?
            .try_get(0)?)
    }

    /// Records that holder `id` is alive now.
    fn heartbeat(&self, client: &mut Client, id: i32) -> Result<()> {
        client.execute(
            &format!(
                "INSERT INTO {}.holders (id, seen_alive_at) VALUES ($1, {NOW_MS})
                 ON CONFLICT (id) DO UPDATE SET seen_alive_at = excluded.seen_alive_at",
                self.quoted
            ),
            &[&id],
        )?;
        Ok(())
    }

    fn forget(&self, client: &mut Client, id: i32) -> Result<()> {
        client.execute(
            &format!("DELETE FROM {}.holders WHERE id = $1", self.quoted),
            &[&id],
        )?;
        Ok(())
    }
}

/// A new session that listens on `channel` and holds a holder lock: that
/// of `previous` when given and released within [`RETAKE_FOR`] (its
/// heartbeat kept fresh meanwhile), else a new one.
fn connect(
    connector: &Connector,
    holders: &Holders<'_>,
    channel: &str,
    previous: Option<i32>,
    state: &ListenerState,
) -> Result<(Client, i32)> {
    let mut client = connector.connect()?;
    client.batch_execute(SERVER_KEEPALIVES)?;
    // An idle listener must not be ended by the server (PostgreSQL 14 and
    // later have the setting).
    client.execute(
        "SELECT set_config('idle_session_timeout', '0', false)
         WHERE current_setting('server_version_num')::int >= 140000",
        &[],
    )?;
    // Schema names are letters, digits and '_' (see options.rs).
    client.batch_execute(&format!("LISTEN \"{channel}\""))?;
    if let Some(id) = previous {
        let deadline = Instant::now() + RETAKE_FOR;
        let mut pause = Duration::from_millis(50);
        while !state.stopped() && Instant::now() < deadline {
            holders.heartbeat(&mut client, id)?;
            if holders.try_lock(&mut client, id)? {
                return Ok((client, id));
            }
            sleep_unless_stopped(state, pause);
            pause = (pause * 2).min(MAX_RECONNECT_PAUSE);
        }
    }
    let next_id = format!("SELECT nextval('{}.holder_ids')::int4", holders.quoted);
    for _ in 0..HOLDER_ID_TRIES {
        let id: i32 = client.query_one(&next_id, &[])?.try_get(0)?;
        if holders.try_lock(&mut client, id)? {
            holders.heartbeat(&mut client, id)?;
            return Ok((client, id));
        }
    }
    Err(Error::new(
        ErrorKind::Internal,
        "found no free holder id for this process on the PostgreSQL server",
    ))
}

/// Turns notifications into wake-ups of the queue they name, and keeps the
/// holder's heartbeat, until the connection is lost or the last handle is
/// gone.
fn listen(client: &mut Client, holders: &Holders<'_>, id: i32, state: &ListenerState) {
    let mut nudged = Instant::now();
    let mut beat = Instant::now();
    while !state.stopped() {
        let next = client.notifications().timeout_iter(TICK).next();
        match next {
            Ok(Some(notification)) => state.changed(notification.payload()),
            Ok(None) if client.is_closed() => return,
            Ok(None) => {}
            Err(_) => return,
        }
        if nudged.elapsed() >= NUDGE_EVERY {
            nudged = Instant::now();
            for waiters in state.queues().values() {
                waiters.changes.fetch_add(1, Ordering::SeqCst);
            }
        }
        if beat.elapsed() >= HEARTBEAT_EVERY {
            beat = Instant::now();
            if holders.heartbeat(client, id).is_err() {
                return;
            }
        }
    }
}
