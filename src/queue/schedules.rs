//! Schedules: adding, replacing and removing them, and the cache of the
//! next slot through which pulls drive the due ones.

use std::sync::atomic::{AtomicI64, Ordering};

use super::{check_payload, Queue};
use crate::clock::now_unix_ms;
use crate::error::{Error, Result};
use crate::schedule::{Schedule, ScheduleInfo};
use crate::store::{PutSchedule, Store};

/// How long a pull that finds no task trusts the next slot its handle
/// read of the queue's schedules: a schedule written through another
/// handle is driven by this one's idle pulls within this time (ms).
pub(super) const SLOT_CACHE_IDLE: i64 = 1000;

/// How long any pull trusts it (ms): even a worker that always finds a
/// task drives a schedule written elsewhere within this time.
pub(super) const SLOT_CACHE_BUSY: i64 = 60_000;

/// A handle's cached earliest next slot of its queue's schedules, with
/// when it was read (both ms on the engine's clock).
pub(super) struct SlotCache {
    next: AtomicI64,
    read_at: AtomicI64,
}

/// No slot at all, as cached.
const NO_SLOT: i64 = i64::MAX;

/// Never read, as cached.
const UNREAD: i64 = i64::MIN;

impl Default for SlotCache {
    fn default() -> Self {
        SlotCache {
            next: AtomicI64::new(NO_SLOT),
            read_at: AtomicI64::new(UNREAD),
        }
    }
}

impl SlotCache {
    /// The cached next slot (inner `None`: no schedule), or `None` when
    /// the cache must be read again at `now`, being `max_age` old.
    pub(super) fn get(&self, now: i64, max_age: i64) -> Option<Option<i64>> {
        let read_at = self.read_at.load(Ordering::Acquire);
        if read_at == UNREAD || now < read_at || now - read_at >= max_age {
            return None;
        }
        let next = self.next.load(Ordering::Acquire);
        Some((next != NO_SLOT).then_some(next))
    }

    /// Caches `next`, read at `now`, and returns it.
    pub(super) fn set(&self, next: Option<i64>, now: i64) -> Option<i64> {
        self.next.store(next.unwrap_or(NO_SLOT), Ordering::Release);
        self.read_at.store(now, Ordering::Release);
        next
    }

    /// Makes the next look read the store again.
    pub(super) fn forget(&self) {
        self.read_at.store(UNREAD, Ordering::Release);
    }
}

impl Queue {
    /// Adds `schedule` to this queue, its first slot after now (see
    /// [`ScheduleSpec`](crate::ScheduleSpec)); its tasks get this handle's max
    /// attempts unless the schedule says otherwise. Fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// the queue already has a schedule of that name, with
    /// [`ErrorKind::InvalidJson`](crate::ErrorKind::InvalidJson) for a payload
    /// that is not JSON (or over the queue's limit: `InvalidArgument`); each
    /// stores nothing.
    pub fn add_schedule(&self, schedule: &Schedule) -> Result<()> {
        self.put_schedule(schedule, PutSchedule::Add)
    }

    /// Adds `schedule`, or overwrites the schedule of the same name: its
    /// next slot is computed afresh from now, and it is no longer paused.
    /// Tasks already enqueued stay; a slot enqueued before keeps its
    /// unique key, so it is not enqueued twice. Fails as
    /// [`Queue::add_schedule`] does for the payload.
    pub fn replace_schedule(&self, schedule: &Schedule) -> Result<()> {
        self.put_schedule(schedule, PutSchedule::Replace)
    }

    /// Declares `schedule`, as an application does at every start: adds
    /// it, or updates the schedule of the same name (payload, priority,
    /// max attempts, timing) keeping its next slot while its timing (spec,
    /// time zone and catch-up) is unchanged, so that a restart neither
    /// pushes an `every` schedule's slot later nor skips a due slot. A
    /// changed timing's next slot is computed afresh from now; a paused
    /// schedule stays paused. Fails as [`Queue::add_schedule`] does for the
    /// payload.
    pub fn upsert_schedule(&self, schedule: &Schedule) -> Result<()> {
        self.put_schedule(schedule, PutSchedule::Upsert)
    }

    fn put_schedule(&self, schedule: &Schedule, put: PutSchedule) -> Result<()> {
        let store = self.store()?;
        check_payload(&schedule.payload, self.max_payload_len).map_err(|err| {
            Error::new(
                err.kind(),
                format!("schedule '{}': {}", schedule.name, err.message()),
            )
        })?;
        let stored = schedule.resolved(self.max_attempts);
        store.put_schedule(&stored, put, now_unix_ms())?;
        self.slots.forget();
        // Waiting pulls wake to bound their waits by the new slot.
        self.bell.ring();
        Ok(())
    }

    /// This queue's schedules, by name, with whether each is paused and
    /// its next slot.
    pub fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        self.store()?.schedules()
    }

    /// Deletes the schedule `name` of this queue; tasks it enqueued stay. Fails
    /// with [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// when there is none.
    pub fn remove_schedule(&self, name: &str) -> Result<()> {
        let found = self.store()?.remove_schedule(name)?;
        self.slots.forget();
        self.found_schedule(name, found)
    }

    /// Pauses the schedule `name` of this queue: its slots are skipped until
    /// [`Queue::resume_schedule`]. Pausing a paused schedule does nothing.
    /// Fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// there is none.
    pub fn pause_schedule(&self, name: &str) -> Result<()> {
        self.set_schedule_paused(name, true)
    }

    /// Resumes the schedule `name` of this queue: it goes on from its first
    /// slot at or after now (the slots that fell while it was paused are
    /// skipped, whatever its catch-up policy). Resuming a schedule not paused
    /// does nothing. Fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) when
    /// there is none, or when its stored timetable can no longer be read (a
    /// pull then paused it: replace it to mend it).
    pub fn resume_schedule(&self, name: &str) -> Result<()> {
        self.set_schedule_paused(name, false)?;
        self.bell.ring();
        Ok(())
    }

    fn set_schedule_paused(&self, name: &str, paused: bool) -> Result<()> {
        let found = self
            .store()?
            .set_schedule_paused(name, paused, now_unix_ms())?;
        self.slots.forget();
        self.found_schedule(name, found)
    }

    fn found_schedule(&self, name: &str, found: bool) -> Result<()> {
        if !found {
            return Err(Error::invalid_argument(format!(
                "queue '{}' has no schedule named '{name}'",
                self.name
            )));
        }
        Ok(())
    }

    /// Enqueues the task of every due slot of this queue's schedules (by
    /// each one's catch-up policy) and says how many tasks it stored. Any
    /// number of handles, processes and machines may call it at once: each
    /// slot is enqueued exactly once, in the transaction that moves its
    /// schedule on, under the unique key `schedule:<name>:<slot ms>`.
    /// Pulls call it by themselves when a slot is due, so a worker needs no
    /// other scheduler; call it where nothing pulls.
    pub fn run_due_schedules(&self) -> Result<u64> {
        let store = self.store()?;
        let stored = store.run_due_schedules(now_unix_ms())?;
        self.slots.forget();
        if stored > 0 {
            self.bell.ring();
        }
        Ok(stored)
    }

    /// Drives the queue's due schedules when the next slot cached (read
    /// again when older than `max_age`, so that schedules written through
    /// other handles are seen) says one is due; returns the next slot, on
    /// the engine's clock, for a waiting pull to wake at, and how many
    /// tasks were stored.
    pub(super) fn drive_due_schedules(
        &self,
        store: &dyn Store,
        max_age: i64,
    ) -> Result<(Option<i64>, u64)> {
        let now = now_unix_ms();
        let next = match self.slots.get(now, max_age) {
            Some(next) => next,
            None => self.slots.set(store.next_schedule_slot(now)?, now),
        };
        if next.is_none_or(|at| at > now) {
            return Ok((next, 0));
        }
        let stored = store.run_due_schedules(now)?;
        if stored > 0 {
            self.bell.ring();
        }
        Ok((self.slots.set(store.next_schedule_slot(now)?, now), stored))
    }
}
