//! The tasks a worker holds: finishing (with a result, or with the next
//! claim in the same transaction), failing, extending a lease and snoozing.

use std::time::Duration;

use super::{
    check_json, check_receipt, cut_at_char_boundary, not_current, or_cancelled, stamped, Queue,
    MAX_REASON_LEN,
};
use crate::clock::now_unix_ms;
use crate::error::{Error, Result};
use crate::options::{check_delay, check_lease, PullOptions};
use crate::store::IfNotHeld;
use crate::task::{Failed, Receipt, Task};

impl Queue {
    /// Completes the delivery named by `receipt`: the task is deleted, or kept
    /// as done on a handle opened with history. Succeeds as long as no one else
    /// has taken the task since (even past the lease's expiry); otherwise, or
    /// when the task was already finished, fails with
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) and changes nothing. A
    /// task cancelled while the delivery held it ends as cancelled, and this
    /// fails, here and in every call that takes a receipt, with
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled). A receipt from
    /// another store (another file, or another PostgreSQL schema) fails, here
    /// and in every call that takes one, with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument).
    pub fn finish(&self, receipt: Receipt) -> Result<()> {
        let store = self.store()?;
        check_receipt(store, receipt)?;
        let held = store.finish(&[receipt], now_unix_ms())?;
        // A finish frees a slot of a concurrency limit.
        self.ring_task_ended();
        if !held[0] {
            return Err(not_current(store, receipt));
        }
        Ok(())
    }

    /// Completes the delivery named by `receipt`, as [`Queue::finish`] does,
    /// and keeps `result` (a JSON text, at most the payload limit) with the
    /// task, for any process to read ([`Queue::task`]) or wait for
    /// ([`Queue::wait_for`]): on a handle without history for
    /// [`OpenOptions::result_retention`](crate::OpenOptions::result_retention),
    /// with history as long as the done task. A result that is too long or not
    /// JSON fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) or
    /// [`ErrorKind::InvalidJson`](crate::ErrorKind::InvalidJson) and changes
    /// nothing: the task stays held.
    pub fn finish_with_result(&self, receipt: Receipt, result: &str) -> Result<()> {
        let store = self.store()?;
        check_json("result", result, self.max_payload_len)?;
        check_receipt(store, receipt)?;
        let held =
            store.finish_with_result(receipt, result, now_unix_ms(), self.result_retention)?;
        // A finish frees a slot of a concurrency limit, and ends a task
        // that may be waited for.
        self.ring_task_ended();
        if !held {
            return Err(not_current(store, receipt));
        }
        Ok(())
    }

    /// Completes the delivery named by `receipt` and claims the next ready task
    /// in the same transaction: a worker draining a backlog pays one commit
    /// (one flush at [`crate::Durability::Full`]) per task instead of two. It
    /// never waits: when it returns `None` (the finish done, no task ready),
    /// wait with [`Queue::pull`]. Options with a wait are refused, so that an
    /// error always means nothing was done. Fails with
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld), finishing and
    /// claiming nothing, when the delivery is no longer current (or
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled): see
    /// [`Queue::finish`]).
    pub fn finish_and_pull(&self, receipt: Receipt, options: &PullOptions) -> Result<Option<Task>> {
        let store = self.store()?;
        if !options.wait.is_zero() {
            return Err(Error::invalid_argument(
                "finish-and-pull does not wait: when it finds no task, wait with pull",
            ));
        }
        check_receipt(store, receipt)?;
        let lease = options.lease.as_millis() as i64;
        let (_, next) = store
            .finish_and_claim(&[receipt], IfNotHeld::Refuse, now_unix_ms(), lease, 1)
            .map_err(|err| or_cancelled(store, receipt, err))?;
        if next.is_empty() {
            // The slot it freed is not taken again, and the task may be
            // waited for.
            self.ring_task_ended();
        }
        Ok(stamped(store, next).pop())
    }

    /// Completes many deliveries and claims up to `max` ready tasks, in one
    /// transaction: a worker's finished tasks and the claims of its free
    /// handlers share one commit (one flush at [`crate::Durability::Full`]).
    /// Answers for each receipt what [`Queue::finish`] would have: `Ok` (now
    /// complete), or an error of kind
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) or
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled) for a delivery no
    /// longer current, which changes nothing and stops neither the rest nor the
    /// claim. Claims as [`Queue::pull_batch`] does, in its order, but never
    /// waits (options with a wait are refused); `max` 0 claims nothing.
    pub fn finish_and_pull_batch(
        &self,
        receipts: &[Receipt],
        options: &PullOptions,
        max: usize,
    ) -> Result<(Vec<Result<()>>, Vec<Task>)> {
        let store = self.store()?;
        if !options.wait.is_zero() {
            return Err(Error::invalid_argument(
                "finish-and-pull does not wait: when it finds no task, wait with pull",
            ));
        }
        for receipt in receipts {
            check_receipt(store, *receipt)?;
        }
        if receipts.is_empty() && max == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let lease = options.lease.as_millis() as i64;
        let now = now_unix_ms();
        let (held, next) = store.finish_and_claim(receipts, IfNotHeld::Skip, now, lease, max)?;
        if !receipts.is_empty() {
            self.ring_task_ended();
        }
        // The finishes are committed whatever the answers for those not
        // held say (reading them may fail, as any read).
        let finished = receipts
            .iter()
            .zip(held)
            .map(|(&receipt, held)| {
                if held {
                    Ok(())
                } else {
                    Err(not_current(store, receipt))
                }
            })
            .collect();
        Ok((finished, stamped(store, next)))
    }

    /// Completes many deliveries in one transaction and says, for each,
    /// whether it was still held (and is now complete); those not held
    /// change nothing, as with [`Queue::finish`].
    pub fn finish_batch(&self, receipts: &[Receipt]) -> Result<Vec<bool>> {
        let store = self.store()?;
        if receipts.is_empty() {
            return Ok(Vec::new());
        }
        for receipt in receipts {
            check_receipt(store, *receipt)?;
        }
        let held = store.finish(receipts, now_unix_ms())?;
        for (&receipt, _) in receipts.iter().zip(&held).filter(|(_, &held)| !held) {
            // The finishes are committed whatever this says: a task whose
            // cancellation waited for it that is not ended here is ended
            // by the next recovery.
            let _ = store.end_cancelled(receipt, now_unix_ms());
        }
        self.ring_task_ended();
        Ok(held)
    }

    /// Ends the delivery named by `receipt` as failed, keeping `reason` (cut to
    /// [`MAX_REASON_LEN`] bytes) as the task's last error. The task is retried
    /// after the queue's back-off ([`Failed::RetryAt`]), or, when this delivery
    /// was its last attempt, becomes dead ([`Failed::Dead`]). Fails with
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld), changing nothing,
    /// when the delivery is no longer current (or
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled): see
    /// [`Queue::finish`]), and with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) for a
    /// reason holding a NUL byte.
    pub fn fail(&self, receipt: Receipt, reason: &str) -> Result<Failed> {
        let store = self.store()?;
        if reason.contains('\0') {
            return Err(Error::invalid_argument(
                "the failure reason contains a NUL byte (C callers could not read it back)",
            ));
        }
        check_receipt(store, receipt)?;
        let failed = store
            .fail(
                receipt,
                cut_at_char_boundary(reason, MAX_REASON_LEN),
                now_unix_ms(),
                &self.retry_backoff,
            )
            .map_err(|err| or_cancelled(store, receipt, err))?;
        // A retry readies a task; either way, a slot of a limit is free.
        self.ring_task_ended();
        Ok(failed)
    }

    /// Renews the lease of a held task: it now expires `lease` from now (1 ms
    /// to one year). Fails with
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld), changing nothing,
    /// when the delivery is no longer current, and with
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled) when the task was
    /// cancelled: stop working on it (see [`Queue::finish`]). A lease that
    /// already expired may be renewed while nobody took the task, except on a
    /// queue at its concurrency limit: the expired lease held no slot, another
    /// claim may have taken it, and renewing would put the queue over its
    /// limit, so that answers [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld)
    /// too.
    pub fn extend(&self, receipt: Receipt, lease: Duration) -> Result<()> {
        let store = self.store()?;
        check_lease(lease)?;
        check_receipt(store, receipt)?;
        store
            .extend(receipt, now_unix_ms(), lease.as_millis() as i64, None)
            .map_err(|err| or_cancelled(store, receipt, err))
    }

    /// Renews the lease of a held task, as [`Queue::extend`] does, and records
    /// `progress` (a JSON text, at most the payload limit) with the task, for
    /// anyone to read ([`TaskInfo::progress`](crate::TaskInfo::progress)), the
    /// next delivery of the task included. Progress that is too long or not
    /// JSON fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument) or
    /// [`ErrorKind::InvalidJson`](crate::ErrorKind::InvalidJson) and changes
    /// nothing.
    pub fn extend_with_progress(
        &self,
        receipt: Receipt,
        lease: Duration,
        progress: &str,
    ) -> Result<()> {
        let store = self.store()?;
        check_lease(lease)?;
        check_json("progress", progress, self.max_payload_len)?;
        check_receipt(store, receipt)?;
        store
            .extend(
                receipt,
                now_unix_ms(),
                lease.as_millis() as i64,
                Some(progress),
            )
            .map_err(|err| or_cancelled(store, receipt, err))
    }

    /// Hands a held task back to run again `delay` from now (0 to 366 days),
    /// without counting this delivery as an attempt: for a worker that cannot
    /// do the task yet (a resource is busy, a limit of its own). The delivery
    /// ends, as with a finish. Fails with
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld), changing nothing,
    /// when the delivery is no longer current, and with
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled) when the task was
    /// cancelled meanwhile.
    pub fn snooze(&self, receipt: Receipt, delay: Duration) -> Result<()> {
        let store = self.store()?;
        check_delay(delay)?;
        check_receipt(store, receipt)?;
        store
            .snooze(receipt, now_unix_ms(), delay.as_millis() as i64)
            .map_err(|err| or_cancelled(store, receipt, err))?;
        // Ready again, or at least a slot of a limit free.
        self.ring_task_ended();
        Ok(())
    }
}
