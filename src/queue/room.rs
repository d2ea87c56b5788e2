//! Bounded queues: a cap on a queue's pending tasks, and on each fairness
//! key's, and pushes that wait for room under them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::fair::check_fair_key;
use super::Queue;
use crate::clock::now_unix_ms;
use crate::error::{Error, ErrorKind, Result};
use crate::store::{NewTask, Store};
use crate::task::Pushed;
use crate::wait::Bell;

/// How often a push waiting for room tries again when nothing in this
/// process rings for it: the deliveries and ends of other processes (and
/// machines) are not heard, so they make room for a waiting push within
/// this time. A retry costs the waiting push one write transaction.
pub const ROOM_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// The bell rung in this process whenever a task of queue `queue` of store
/// `store_id` is delivered or ends, which may make room under its cap.
/// Apart from the bell of pulls, so that deliveries do not wake them.
pub(super) fn room_bell(store_id: u128, queue: &str) -> Result<Arc<Bell>> {
    let file = ((store_id >> 64) as u64, store_id as u64);
    Bell::for_queue(file, &format!("{queue}\u{1}room"))
}

impl Queue {
    /// Caps this queue at `cap` pending tasks, for every process and
    /// machine on its file (or PostgreSQL schema), or with `None` (or 0)
    /// removes the cap. Pending tasks are those pushed and neither
    /// delivered nor ended: ready, delayed, waiting for the tasks they wait
    /// for or for their group, and waiting to be retried; leased tasks do
    /// not count. A push that would take the count over the cap fails
    /// whole with [`ErrorKind::Full`], storing nothing, unless its
    /// [`crate::PushOptions::wait_for_room`] lets it wait; a push answered
    /// [`Pushed::Duplicate`] adds nothing and is never refused. The check
    /// is made inside the push's transaction, so the cap holds under any
    /// race. Setting a cap removes no task: a queue already over it refuses
    /// pushes until it drains below. Only pushes are refused: tasks a
    /// schedule enqueues, a retry of a dead task and a lease recovered
    /// count, but are never refused.
    pub fn set_max_pending(&self, cap: Option<u64>) -> Result<()> {
        let store = self.store()?;
        store.set_max_pending(cap.filter(|&cap| cap > 0))?;
        // A higher cap, or none, may let waiting pushes in.
        self.room.ring();
        Ok(())
    }

    /// This queue's cap on pending tasks, or `None` when it has none.
    pub fn max_pending(&self) -> Result<Option<u64>> {
        self.store()?.max_pending()
    }

    /// Caps each fairness key of this queue at `cap` pending tasks (see
    /// [`Queue::set_max_pending`] for what counts), for every process and
    /// machine on its file, unless the key has a cap of its own
    /// ([`Queue::set_key_max_pending`]); `None` (or 0) removes the default.
    /// The tasks pushed without a key share the empty key `""`, which is
    /// capped as any other. A push that would take a key over its cap fails
    /// whole with [`ErrorKind::Full`], as one over the queue's cap does,
    /// and may wait for room likewise; the other keys are not affected.
    /// Setting a cap makes the queue fair, as a push with a fairness key
    /// does. Fairness keys, and so their caps, are SQLite's only for now.
    pub fn set_max_pending_per_key(&self, cap: Option<u64>) -> Result<()> {
        self.store()?
            .set_max_pending_per_key(cap.filter(|&cap| cap > 0))?;
        self.room.ring();
        Ok(())
    }

    /// The default cap on the pending tasks of each fairness key of this
    /// queue, or `None` when it has none.
    pub fn max_pending_per_key(&self) -> Result<Option<u64>> {
        self.store()?.max_pending_per_key()
    }

    /// Caps fairness key `key` of this queue (`""`: the tasks pushed
    /// without one) at `cap` pending tasks, in place of the default of
    /// [`Queue::set_max_pending_per_key`], higher or lower; `None` (or 0)
    /// removes the key's own cap, so that the default applies to it again.
    pub fn set_key_max_pending(&self, key: &str, cap: Option<u64>) -> Result<()> {
        check_fair_key(key)?;
        self.store()?
            .set_key_max_pending(key, cap.filter(|&cap| cap > 0))?;
        self.room.ring();
        Ok(())
    }

    /// The cap in force for fairness key `key` of this queue: its own, else
    /// the queue's default for every key; `None` when neither is set.
    pub fn key_max_pending(&self, key: &str) -> Result<Option<u64>> {
        check_fair_key(key)?;
        self.store()?.key_max_pending(key)
    }

    /// Stores the tasks `tasks_at(now)` describes, and when the queue is
    /// full waits up to `wait` for room (see
    /// [`crate::PushOptions::wait_for_room`]), trying again whenever a task
    /// of the queue is delivered or ends in this process, and every
    /// [`ROOM_POLL_INTERVAL`] for the other processes. Each try reads the
    /// clock again, so a delay counts from the push that stores the task.
    pub(super) fn push_with_room(
        &self,
        store: &dyn Store,
        wait: Duration,
        tasks_at: impl Fn(i64) -> Result<Vec<NewTask>>,
    ) -> Result<Vec<Pushed>> {
        let deadline = Instant::now() + wait;
        let stopped = || self.interrupted.is_cancelled();
        loop {
            // Read before trying, so a ring while the push runs is not missed.
            let seen = self.room.rings();
            let now = now_unix_ms();
            let err = match store.push(tasks_at(now)?, now) {
                Err(err) if err.kind() == ErrorKind::Full => err,
                other => return other,
            };
            if Instant::now() >= deadline {
                return Err(err);
            }
            self.room.sleep(
                seen,
                deadline.min(Instant::now() + ROOM_POLL_INTERVAL),
                stopped,
            );
            if stopped() {
                return Err(Error::new(
                    ErrorKind::Interrupted,
                    format!("the wait for room in the queue was interrupted: {err}"),
                ));
            }
        }
    }

    /// Wakes whoever waits for what the end or the delivery of a task of
    /// this queue may bring: the pulls (an end frees the tasks that waited
    /// for it) and the pushes waiting for room.
    pub(super) fn ring_task_ended(&self) {
        self.bell.ring();
        self.room.ring();
    }
}
