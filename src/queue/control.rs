//! Control of one queue and its tasks: cancelling a task, pausing the
//! queue, and its concurrency and rate limits.

use super::{cut_at_char_boundary, Queue, MAX_REASON_LEN};
use crate::clock::now_unix_ms;
use crate::error::{Error, Result};
use crate::options::check_lease;
use crate::task::{Cancelled, Pause, RateLimit, MAX_RATE_CLAIMS};

impl Queue {
    /// Cancels task `id` of this queue, keeping `reason` (cut to
    /// [`MAX_REASON_LEN`] bytes; empty for none) as its last error. A pending,
    /// delayed or dead task leaves the line at once; a leased one is never
    /// delivered again, and its holder learns of it at its next extend, finish,
    /// fail or snooze, which fail with
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled) (see
    /// [`Cancelled`]). If the holder never calls again (it was killed), the
    /// task ends once its lease has run out, at the next claim of any queue of
    /// the file or a [`Queue::recover`]: its ordered group and the tasks
    /// waiting for it then go on (kept as history when the handle that ends it
    /// keeps history). Cancelling a cancelled task again does nothing and says
    /// so again. Fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument),
    /// changing nothing, when the queue has no task `id` (a task cancelled on a
    /// handle without history is gone) or the task is done.
    pub fn cancel_task(&self, id: i64, reason: &str) -> Result<Cancelled> {
        let store = self.store()?;
        if reason.contains('\0') {
            return Err(Error::invalid_argument(
                "the cancellation reason contains a NUL byte (C callers could not read it back)",
            ));
        }
        let cancelled = store.cancel_task(
            id,
            cut_at_char_boundary(reason, MAX_REASON_LEN),
            now_unix_ms(),
        )?;
        // A pending task cancelled makes room under the queue's cap.
        self.room.ring();
        Ok(cancelled)
    }

    /// Cancels each of `ids`, as [`Queue::cancel_task`] does, and says how
    /// many it cancelled (or found cancelled already): ids this queue has
    /// no task of, and done tasks, are skipped. Up to 500 ids are cancelled
    /// in one transaction, all or none of them; a longer list goes in
    /// batches of 500, each committed before the next is tried (an error
    /// leaves the batches before it cancelled).
    pub fn cancel_many(&self, ids: &[i64], reason: &str) -> Result<u64> {
        let store = self.store()?;
        if reason.contains('\0') {
            return Err(Error::invalid_argument(
                "the cancellation reason contains a NUL byte (C callers could not read it back)",
            ));
        }
        let reason = cut_at_char_boundary(reason, MAX_REASON_LEN);
        let mut cancelled = 0;
        for batch in ids.chunks(super::maintain::IDS_BATCH) {
            cancelled += store.cancel_many(batch, reason, now_unix_ms())?;
        }
        if cancelled > 0 {
            self.room.ring();
        }
        Ok(cancelled)
    }

    /// Pauses this queue for every process on its file (or PostgreSQL schema),
    /// until [`Queue::resume`] or the time `pause` names: pulls find nothing
    /// meanwhile (a waiting pull keeps waiting, and takes a task once the pause
    /// ends), pushes are stored as usual. Pausing a paused queue replaces its
    /// pause. Fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for an
    /// end time not in the future.
    pub fn pause(&self, pause: Pause) -> Result<()> {
        let store = self.store()?;
        if let Pause::UntilUnixMs(until) = pause {
            if until <= now_unix_ms() {
                return Err(Error::invalid_argument(format!(
                    "a pause must end in the future, got {until} ms since the Unix epoch"
                )));
            }
        }
        store.set_pause(Some(pause))
    }

    /// Ends this queue's pause, if any, and wakes its waiting pulls in
    /// every process.
    pub fn resume(&self) -> Result<()> {
        self.store()?.set_pause(None)?;
        self.bell.ring();
        Ok(())
    }

    /// This queue's pause in force, or `None` when it is not paused.
    pub fn paused(&self) -> Result<Option<Pause>> {
        self.store()?.pause(now_unix_ms())
    }

    /// Limits this queue to `limit` tasks leased at once across every process
    /// and machine on its file (or PostgreSQL schema), or with `None` removes
    /// the limit. Claims take no more than the slots left, inside their
    /// transaction, so the limit holds under any race; a lease that expired,
    /// and a task recovered from a dead holder, hold no slot. Tasks already
    /// leased beyond a new, lower limit keep their leases. Fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a
    /// limit of 0.
    pub fn set_concurrency_limit(&self, limit: Option<u32>) -> Result<()> {
        let store = self.store()?;
        if limit == Some(0) {
            return Err(Error::invalid_argument(
                "a concurrency limit must be at least 1 (pause the queue to stop its claims)",
            ));
        }
        store.set_concurrency_limit(limit)?;
        self.bell.ring();
        Ok(())
    }

    /// Allows at most `limit.claims` deliveries of this queue in any window of
    /// length `limit.per`, across every process and machine on its file (or
    /// PostgreSQL schema), with no coordinator: each claim takes a slot of the
    /// queue's that was last used a window ago or more, inside its transaction,
    /// or claims nothing (a waiting pull waits for a slot). Windows are
    /// measured on the claims' times, whole milliseconds read once each claim
    /// holds the write lock (on PostgreSQL, the server's clock). Setting the
    /// rate in force again changes nothing, so every worker may declare it at
    /// start without granting a new burst; a changed rate keeps the most recent
    /// uses (as many as it has claims), and a new one starts with every slot
    /// free. `None` removes the limit. Fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for 0
    /// claims, more than [`MAX_RATE_CLAIMS`], or a window outside 1 ms to 366
    /// days.
    pub fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<()> {
        let store = self.store()?;
        if let Some(limit) = limit {
            if limit.claims == 0 || limit.claims > MAX_RATE_CLAIMS {
                return Err(Error::invalid_argument(format!(
                    "a rate limit allows 1 to {} claims per window, got {}",
                    MAX_RATE_CLAIMS, limit.claims
                )));
            }
            check_lease(limit.per).map_err(|_| {
                Error::invalid_argument(format!(
                    "a rate limit's window must be between 1 ms and 366 days, got {} ms",
                    limit.per.as_millis()
                ))
            })?;
        }
        store.set_rate_limit(limit)?;
        self.bell.ring();
        Ok(())
    }

    /// This queue's rate limit, or `None` when it has none.
    pub fn rate_limit(&self) -> Result<Option<RateLimit>> {
        self.store()?.rate_limit()
    }

    /// This queue's concurrency limit, or `None` when it has none.
    pub fn concurrency_limit(&self) -> Result<Option<u32>> {
        self.store()?.concurrency_limit()
    }
}
