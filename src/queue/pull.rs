//! Pulling: claiming ready tasks now, or waiting for one (on the bell, the
//! change counter, or the next task or lease coming due).

use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::options::PullOptions;
use crate::store::{Look, Store};
use crate::task::Task;
use crate::wait::Bell;

use super::schedules::{SLOT_CACHE_BUSY, SLOT_CACHE_IDLE};
use super::{stamped, Queue};
use crate::clock::now_unix_ms;

/// What a waiting pull (or [`Queue::wait_for`]) has seen of writes to its
/// queue: the bell's rings and the file's change counter, read together
/// so that a write after either one ends the next sleep.
#[derive(PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) rings: u64,
    pub(super) changes: i64,
}

impl Seen {
    pub(super) fn now(bell: &Bell, store: &dyn Store) -> Result<Seen> {
        Ok(Seen {
            rings: bell.rings(),
            changes: store.change_counter()?,
        })
    }
}

/// What a waiting pull saw when it woke, at `now` on the engine's clock.
struct Woken {
    seen: Seen,
    look: Look,
    now: i64,
}

/// When a waiting pull wakes by itself, `now` being the engine's clock:
/// at the sooner of a task becoming claimable and the schedules' next
/// slot, at least a millisecond from now.
fn wake_due(claimable: Option<i64>, next_slot: Option<i64>, now: i64) -> Option<Instant> {
    let wake = match (claimable, next_slot) {
        (Some(at), Some(slot)) => Some(at.min(slot)),
        (at, slot) => at.or(slot),
    };
    wake.map(|at| Instant::now() + Duration::from_millis(at.saturating_sub(now).max(1) as u64))
}

impl Queue {
    /// Claims the ready task first in line under a lease: highest priority
    /// first, then the one ready longest (tasks pushed without delay and of
    /// equal priority come out in push order). A task whose lease expired is
    /// ready again, and keeps its place. No two holders ever hold the same
    /// task at once.
    ///
    /// Returns `None` when no task is ready, after waiting up to the
    /// options' wait time for one; a wait ended by [`Queue::interrupt`] or
    /// the options' cancellation token fails with
    /// [`ErrorKind::Interrupted`].
    pub fn pull(&self, options: &PullOptions) -> Result<Option<Task>> {
        Ok(stamped(self.store()?, self.claim(1, options)?).pop())
    }

    /// Claims up to `max` ready tasks in one transaction, in the order
    /// [`Queue::pull`] would return them, waiting as `pull` does when none
    /// is ready. Empty only when none was ready by the end of the wait.
    pub fn pull_batch(&self, max: usize, options: &PullOptions) -> Result<Vec<Task>> {
        if max == 0 {
            return Err(Error::invalid_argument(
                "a batch pull needs room for at least one task",
            ));
        }
        Ok(stamped(self.store()?, self.claim(max, options)?))
    }

    /// Claims up to `max` ready tasks at once, first driving the queue's
    /// due schedules; returns them with the next slot of the schedules.
    /// The cached next slot is trusted up to [`SLOT_CACHE_BUSY`], so a
    /// worker that keeps finding tasks pays no read for schedules; one
    /// that finds none reads it again once [`SLOT_CACHE_IDLE`] old, and
    /// claims again if that enqueued a task.
    fn claim_now(
        &self,
        store: &dyn Store,
        max: usize,
        lease: i64,
    ) -> Result<(Vec<Task>, Option<i64>)> {
        let (next_slot, _) = self.drive_due_schedules(store, SLOT_CACHE_BUSY)?;
        let tasks = store.claim(max, now_unix_ms(), lease)?;
        if !tasks.is_empty() {
            // A delivered task is no longer pending: room under a cap.
            self.room.ring();
            return Ok((tasks, next_slot));
        }
        let (next_slot, stored) = self.drive_due_schedules(store, SLOT_CACHE_IDLE)?;
        if stored == 0 {
            return Ok((tasks, next_slot));
        }
        let tasks = store.claim(max, now_unix_ms(), lease)?;
        if !tasks.is_empty() {
            self.room.ring();
        }
        Ok((tasks, next_slot))
    }

    /// Tries to claim, then waits for a reason to try again: a ring of the
    /// bell (a write to the queue, in this process or another), a commit
    /// seen through the change counter (looked at as often as the backend
    /// says: see [`Store::watch_other_processes`]), or a delayed
    /// task or a lease coming due. A wake-up first asks, with a read,
    /// whether the queue has a task to claim now, and claims (a write,
    /// which waits for the write lock) only then: commits to other queues
    /// or tables of the file cost a waiter a read, not a transaction.
    fn claim(&self, max: usize, options: &PullOptions) -> Result<Vec<Task>> {
        let store = self.store()?;
        let lease = options.lease.as_millis() as i64;
        if options.wait.is_zero() {
            return Ok(self.claim_now(store, max, lease)?.0);
        }
        let deadline = Instant::now() + options.wait;
        let _watch = options.cancel.as_ref().map(|token| token.watch(&self.bell));
        let stopped = || {
            self.interrupted.is_cancelled()
                || options
                    .cancel
                    .as_ref()
                    .is_some_and(|token| token.is_cancelled())
        };
        let poll_interval = store.watch_other_processes();
        // Read before claiming or asking, so a write that lands between
        // them and the sleep still ends the sleep.
        let mut seen = Seen::now(&self.bell, store)?;
        let mut now = now_unix_ms();
        let mut claimable = Some(now);
        let mut next_slot = None;
        loop {
            if claimable.is_some_and(|at| at <= now) {
                let (tasks, slot) = self.claim_now(store, max, lease)?;
                next_slot = slot;
                if !tasks.is_empty() {
                    return Ok(tasks);
                }
                claimable = store.next_claimable(now)?.filter(|&at| at > now);
            }
            let due = wake_due(claimable, next_slot, now);
            let Some(woken) =
                self.sleep_until_woken(store, &seen, due, deadline, poll_interval, stopped)?
            else {
                return Ok(Vec::new());
            };
            (seen, now) = (woken.seen, woken.now);
            // A wake-up may come from a schedule written elsewhere: the
            // slot just read is the one to trust.
            self.slots.set(woken.look.next_slot, now);
            let (slot, stored) = self.drive_due_schedules(store, SLOT_CACHE_BUSY)?;
            next_slot = slot;
            claimable = if stored > 0 {
                Some(now)
            } else {
                woken.look.claimable
            };
        }
    }

    /// Sleeps until the bell rings, the change counter moves or `due`
    /// comes, and returns what it saw then, or `None` once `deadline`
    /// passes; it looks at the change counter every `poll_interval`. A
    /// wake-up that shows none of these sleeps again, so the caller claims
    /// only when something may have changed. Each wake-up is one read of
    /// the store ([`Store::look`]). A stop asked for is an
    /// [`ErrorKind::Interrupted`] error.
    fn sleep_until_woken(
        &self,
        store: &dyn Store,
        seen: &Seen,
        due: Option<Instant>,
        deadline: Instant,
        poll_interval: Duration,
        stopped: impl Fn() -> bool,
    ) -> Result<Option<Woken>> {
        loop {
            if stopped() {
                return Err(Error::new(
                    ErrorKind::Interrupted,
                    "the wait for a task was interrupted",
                ));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let until = deadline
                .min(now + poll_interval)
                .min(due.unwrap_or(deadline));
            self.bell.sleep(seen.rings, until, &stopped);
            if stopped() {
                continue;
            }
            let came_due = due.is_some_and(|due| Instant::now() >= due);
            // Rings first, then the store, as in `Seen::now`.
            let rings = self.bell.rings();
            let unless_changed = (rings == seen.rings && !came_due).then_some(seen.changes);
            let now = now_unix_ms();
            if let Some(look) = store.look(now, unless_changed)? {
                let seen = Seen {
                    rings,
                    changes: look.changes,
                };
                return Ok(Some(Woken { seen, look, now }));
            }
        }
    }
}
