//! The one connection per process and schema that shows this process is
//! alive and hears of new tasks.
//!
//! Its session holds the advisory lock `(lock space, holder id)` for as
//! long as it lives, and tasks claimed by the process carry that holder id:
//! [`super::tasks`]'s recover sees in `pg_locks` whether a holder's lock is
//! still held, so a process that died, or whose machine or connection did,
//! gives its tasks back at once, without waiting for their leases. The
//! same session `LISTEN`s on the schema's channel, which every write that
//! may make a task ready notifies: each notification rings the process's
//! bell and moves its change counter, waking its waiting pulls.
//!
//! A lost connection is made again by the listener's thread, with a new
//! holder id: the tasks claimed under the old one are then recoverable by
//! anyone, as those of a dead process are.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread;
use std::time::{Duration, Instant};

use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;

use super::pool::Connector;
use crate::error::{Error, ErrorKind, Result};
use crate::global_lock;
use crate::options::OpenOptions;
use crate::wait::Bell;

/// How often the listener's thread looks whether its handles are all gone.
const TICK: Duration = Duration::from_millis(100);

/// Waiters try to claim at least this often even when no notification
/// came: a claim may skip a ready task that another claim had locked for a
/// moment (`SKIP LOCKED`) without taking it, and nothing notifies then.
const NUDGE_EVERY: Duration = Duration::from_secs(1);

/// Longest pause between two tries to connect again.
const MAX_RECONNECT_PAUSE: Duration = Duration::from_secs(2);

/// Tries for a free holder id before giving up (ids are taken by other
/// schemas' holders only when their lock spaces collide).
const HOLDER_ID_TRIES: usize = 16;

/// The notification channel of schema `name`.
pub(super) fn channel(name: &str) -> String {
    format!("tq_{name}")
}

/// This process's listener on one schema, shared by its handles there.
pub(super) struct Listener {
    state: Arc<State>,
}

/// What the listener's thread shares with the handles.
struct State {
    bell: Arc<Bell>,
    /// Moved by every notification (see [`crate::store::Store::change_counter`]).
    changes: AtomicI64,
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

/// The listeners of this process, by URL and schema. (A B-tree rather than
/// a hash table, so that leak checkers see its nodes as reachable at exit.)
type Key = (String, String, u32);
static LISTENERS: Mutex<BTreeMap<Key, Weak<Listener>>> = Mutex::new(BTreeMap::new());

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
        {
            let mut listeners = global_lock::lock(&LISTENERS)?;
            listeners.retain(|_, listener| listener.strong_count() > 0);
            if let Some(listener) = listeners.get(&key).and_then(Weak::upgrade) {
                return Ok(listener);
            }
        }
        let state = Arc::new(State {
            bell: Arc::new(Bell::default()),
            changes: AtomicI64::new(0),
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
        // that one is used, and this one stops (once the lock is released),
        // its holder id never used.
        let existing = {
            let mut listeners = global_lock::lock(&LISTENERS)?;
            let existing = listeners.get(&key).and_then(Weak::upgrade);
            if existing.is_none() {
                listeners.insert(key, Arc::downgrade(&listener));
            }
            existing
        };
        Ok(existing.unwrap_or(listener))
    }

    pub(super) fn bell(&self) -> Arc<Bell> {
        Arc::clone(&self.state.bell)
    }

    /// A number moved by every notification on the schema.
    pub(super) fn changes(&self) -> i64 {
        self.state.changes.load(Ordering::SeqCst)
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

impl State {
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

    /// Wakes the process's waiters: something may have become ready.
    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
        self.bell.ring();
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// The listener's thread: connect, listen until the connection is lost,
/// connect again, until the last handle is gone.
fn run(state: &State, connector: &Connector, quoted: &str, channel: &str, lock_space: i32) {
    let mut pause = Duration::from_millis(50);
    while !state.stopped() {
        match connect(connector, quoted, channel, lock_space) {
            Ok((mut client, id)) => {
                pause = Duration::from_millis(50);
                state.set(Holder::Held(id));
                // Writes made while no one listened were not heard.
                state.changed();
                listen(&mut client, state);
                state.set(Holder::Connecting);
                state.changed();
            }
            Err(err) => {
                state.set(Holder::Failed(err));
                let until = Instant::now() + pause;
                while !state.stopped() && Instant::now() < until {
                    thread::sleep(TICK.min(pause));
                }
                pause = (pause * 2).min(MAX_RECONNECT_PAUSE);
            }
        }
    }
}

/// A new session that listens on `channel` and holds a holder lock.
fn connect(
    connector: &Connector,
    quoted: &str,
    channel: &str,
    lock_space: i32,
) -> Result<(Client, i32)> {
    let mut client = connector.connect()?;
    // Schema names are letters, digits and '_' (see options.rs).
    client.batch_execute(&format!("LISTEN \"{channel}\""))?;
    let next_id = format!("SELECT nextval('{quoted}.holder_ids')::int4");
    for _ in 0..HOLDER_ID_TRIES {
        let id: i32 = client.query_one(&next_id, &[])?.try_get(0)?;
        let locked: bool = client
            .query_one("SELECT pg_try_advisory_lock($1, $2)", &[&lock_space, &id])?
            .try_get(0)?;
        if locked {
            return Ok((client, id));
        }
    }
    Err(Error::new(
        ErrorKind::Internal,
        "found no free holder id for this process on the PostgreSQL server",
    ))
}

/// Turns notifications into wake-ups until the connection is lost or the
/// last handle is gone.
fn listen(client: &mut Client, state: &State) {
    let mut nudged = Instant::now();
    while !state.stopped() {
        let next = client.notifications().timeout_iter(TICK).next();
        match next {
            Ok(Some(_)) => state.changed(),
            Ok(None) if client.is_closed() => return,
            Ok(None) => {}
            Err(_) => return,
        }
        if nudged.elapsed() >= NUDGE_EVERY {
            nudged = Instant::now();
            state.changes.fetch_add(1, Ordering::SeqCst);
        }
    }
}
