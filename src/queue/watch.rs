//! Waiting on a task or a queue: for a task to end, for its
//! cancellation, or for any change to the queue.

use std::time::{Duration, Instant};

use crate::error::{Error, ErrorKind, Result};
use crate::options::check_duration;
use crate::task::{Receipt, Stop, TaskInfo, TaskState};
use crate::wait::CancelToken;

use super::pull::Seen;
use super::{check_receipt, Queue};

/// How often [`Queue::wait_for_change`], asleep on the queue's bell, looks
/// whether a cancellation rang the cancellations' bell: a cancellation then
/// reaches a watcher within this time, for a look at a counter in memory.
const CANCELLATIONS_LOOK: Duration = Duration::from_millis(20);

impl Queue {
    /// Waits up to `timeout` (at most one year) for task `id` of this queue
    /// to end, and returns it as it ended: [`TaskState::Done`] with its
    /// result, [`TaskState::Dead`] or [`TaskState::Cancelled`] with its
    /// reason as last error; `None` when the timeout passed first. A task
    /// that has ended already answers at once. The wait only reads: it
    /// wakes when a write of this process, or one of another process that
    /// rings the queue's waiters, ends a task, else looks at the store as
    /// often as a waiting pull does (see [`Queue::pull`]). A task the wait
    /// found not yet ended and that then left the store (finished without
    /// a result on a handle without history, which deletes it, or cancelled
    /// there, or purged) has ended too: the wait returns it as it last saw
    /// it, as [`TaskState::Done`] without a result or end time (the store
    /// kept nothing of how it ended). Fails with
    /// [`ErrorKind::InvalidArgument`] when the queue has no task `id` when
    /// the wait begins, or it ended before without being kept (on a handle
    /// without history, finish it with a result to wait for it), and with
    /// [`ErrorKind::Interrupted`] when `cancel` is cancelled or after
    /// [`Queue::interrupt`].
    pub fn wait_for(
        &self,
        id: i64,
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<TaskInfo>> {
        let store = self.store()?;
        let timeout = check_duration("the wait", timeout, Duration::ZERO)?;
        let deadline = Instant::now() + timeout;
        let _watch = cancel.map(|token| token.watch(&self.bell));
        let stopped =
            || self.interrupted.is_cancelled() || cancel.is_some_and(|token| token.is_cancelled());
        let poll_interval = store.watch_other_processes();
        // Read before the task, so a write that lands between them and the
        // sleep still ends the sleep.
        let mut seen = Seen::now(&self.bell, store)?;
        let mut last_seen: Option<TaskInfo> = None;
        loop {
            match (store.task(id)?, last_seen.take()) {
                (Some(task), _) if task.has_ended() => return Ok(Some(task)),
                (Some(task), _) => last_seen = Some(task),
                // Gone since the last look: ended, and not kept.
                (None, Some(task)) => {
                    return Ok(Some(TaskInfo {
                        state: TaskState::Done,
                        result: None,
                        waiting_for: Vec::new(),
                        finished_at_unix_ms: None,
                        ..task
                    }))
                }
                (None, None) => {
                    return Err(Error::invalid_argument(format!(
                        "queue '{}' has no task {id} to wait for: it was never pushed, or it \
                         ended and was not kept (finish it with a result, or keep history)",
                        self.name
                    )))
                }
            }
            loop {
                if stopped() {
                    return Err(Error::new(
                        ErrorKind::Interrupted,
                        "the wait for a task's outcome was interrupted",
                    ));
                }
                let now = Instant::now();
                if now >= deadline {
                    return Ok(None);
                }
                self.bell
                    .sleep(seen.rings, deadline.min(now + poll_interval), stopped);
                let now_seen = Seen::now(&self.bell, store)?;
                if now_seen != seen {
                    seen = now_seen;
                    break;
                }
            }
        }
    }

    /// Waits up to `timeout` for a reason to stop working on the task of
    /// `receipt`: its cancellation ([`Stop::Cancelled`], by
    /// [`Queue::cancel_task`] in any process), or the delivery being over
    /// ([`Stop::NotHeld`]); `None` when the timeout passed first. A holder
    /// runs it beside its work (from another thread), to stop at once
    /// rather than at its next heartbeat. It only reads: once at the start,
    /// then when a cancellation of the queue rings (in this process at
    /// once, in others through the file's wake words or PostgreSQL's
    /// notifications), and about once a second as a safety net (every
    /// 20 ms on a file whose wake words this process could not map).
    ///
    /// Ends with [`ErrorKind::Interrupted`] when `cancel` is cancelled
    /// (typically when the work is done) or after [`Queue::interrupt`].
    /// Fails with [`ErrorKind::InvalidArgument`] for a receipt from
    /// another store.
    pub fn wait_for_cancellation(
        &self,
        receipt: Receipt,
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<Stop>> {
        let store = self.store()?;
        let timeout = check_duration("the wait", timeout, Duration::ZERO)?;
        check_receipt(store, receipt)?;
        let deadline = Instant::now() + timeout;
        let (bell, safety_net) = store.cancellations()?;
        let _watches = (
            self.interrupted.watch(&bell),
            cancel.map(|token| token.watch(&bell)),
        );
        let stopped =
            || self.interrupted.is_cancelled() || cancel.is_some_and(|token| token.is_cancelled());
        loop {
            if stopped() {
                return Err(Error::new(
                    ErrorKind::Interrupted,
                    "the wait for a cancellation was interrupted",
                ));
            }
            // Read before the delivery, so a cancellation that lands
            // between them and the sleep still ends the sleep.
            let rings = bell.rings();
            if let Some(stop) = store.delivery(receipt)? {
                return Ok(Some(stop));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            bell.sleep(rings, deadline.min(now + safety_net), stopped);
        }
    }

    /// Waits up to `timeout` for a change that may end a wait for a task's
    /// outcome or for a delivery's end, so that one thread can wait on
    /// behalf of many such waits and let each read its task again: a write
    /// to this queue in this process, a cancellation recorded in any
    /// process, or a commit seen through the change counter (looked at as
    /// often as a waiting pull does). Returns the queue's change mark then,
    /// or `None` when the timeout passed first.
    ///
    /// `seen` is a mark an earlier call returned: a change since then
    /// returns at once, so a caller that takes a mark (a call with a zero
    /// timeout), reads what it waits for, then waits with that mark misses
    /// nothing. A cancellation returns even when the mark did not move.
    /// Ends with [`ErrorKind::Interrupted`] when `cancel` is cancelled or
    /// after [`Queue::interrupt`].
    pub fn wait_for_change(
        &self,
        seen: u64,
        timeout: Duration,
        cancel: Option<&CancelToken>,
    ) -> Result<Option<u64>> {
        let store = self.store()?;
        let timeout = check_duration("the wait", timeout, Duration::ZERO)?;
        let deadline = Instant::now() + timeout;
        let poll_interval = store.watch_other_processes();
        let (cancellations, _) = store.cancellations()?;
        let cancellations_seen = cancellations.rings();
        let _watch = cancel.map(|token| token.watch(&self.bell));
        let interrupted =
            || self.interrupted.is_cancelled() || cancel.is_some_and(|token| token.is_cancelled());
        let cancellation_rang = || cancellations.rings() != cancellations_seen;
        let stopped = || interrupted() || cancellation_rang();
        // Both counters only grow, so their sum moves whenever either does.
        // Rings first, then the store, as in `Seen::now`.
        let mark_now = || -> Result<(u64, u64)> {
            let rings = self.bell.rings();
            Ok((rings, rings.wrapping_add(store.change_counter()? as u64)))
        };
        let (mut rings, mut mark) = mark_now()?;
        let mut looked = Instant::now();
        loop {
            if interrupted() {
                return Err(Error::new(
                    ErrorKind::Interrupted,
                    "the wait for a change was interrupted",
                ));
            }
            if mark != seen || cancellation_rang() {
                return Ok(Some(mark));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let next_look = looked + poll_interval;
            // Asleep on the queue's bell, it looks at the cancellations'
            // bell (rung in this process only) between naps.
            let nap_end = deadline.min(next_look).min(now + CANCELLATIONS_LOOK);
            self.bell.sleep(rings, nap_end, stopped);
            if self.bell.rings() != rings || Instant::now() >= next_look {
                (rings, mark) = mark_now()?;
                looked = Instant::now();
            }
        }
    }
}
