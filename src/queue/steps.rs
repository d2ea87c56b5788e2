//! Step checkpoints: a held task's named steps, each recorded once with
//! its JSON output, read by every later delivery instead of running the
//! step again.

use super::{check_json, check_receipt, or_cancelled, Queue};
use crate::clock::now_unix_ms;
use crate::error::Result;
use crate::events::check_own_step_name;
use crate::options::{check_text, MAX_STEP_NAME_LEN};
use crate::task::Receipt;

impl Queue {
    /// Records step `name` (1 to [`MAX_STEP_NAME_LEN`] bytes, no NUL, not
    /// starting with [`RESERVED_STEP_PREFIX`](crate::RESERVED_STEP_PREFIX)) of the
    /// held task with its `output` (a JSON text, at most the payload
    /// limit), in one commit, so that later deliveries of the task read it
    /// ([`Queue::step_output`]) rather than run the step again. Returns
    /// `true` once stored; `false` when the task already has a step of
    /// that name, whose first output is kept (first write wins: a step
    /// that ran twice is reported, never overwritten). Fails with
    /// [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) when the delivery
    /// is no longer current, with
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled) when the task
    /// was cancelled, and with
    /// [`ErrorKind::InvalidJson`](crate::ErrorKind::InvalidJson) or
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// for bad input; each stores nothing.
    pub fn record_step(&self, receipt: Receipt, name: &str, output: &str) -> Result<bool> {
        let store = self.store()?;
        check_own_step_name(name)?;
        check_json("step's output", output, self.max_payload_len)?;
        check_receipt(store, receipt)?;
        store
            .record_step(receipt, name, output, now_unix_ms())
            .map_err(|err| or_cancelled(store, receipt, err))
    }

    /// The output recorded for step `name` of the task of `receipt`, by
    /// this delivery or any earlier one; `None` when the step was never
    /// recorded (or was cleared, [`Queue::clear_steps_after`]). A read: it
    /// works for a delivery no longer current too.
    pub fn step_output(&self, receipt: Receipt, name: &str) -> Result<Option<String>> {
        let store = self.store()?;
        check_text("a step name", name, MAX_STEP_NAME_LEN)?;
        check_receipt(store, receipt)?;
        store.step_output(receipt.id, name)
    }

    /// Runs step `name` of the held task once: returns the output an
    /// earlier delivery recorded, without calling `run`; otherwise calls
    /// `run` and records what it returns ([`Queue::record_step`]) before
    /// returning it. An error of `run` is returned and nothing is
    /// recorded, so the step runs again at the next delivery. A step is
    /// exactly once only where its effect commits with its record; other
    /// effects are at least once (a worker may die between the two).
    pub fn step(
        &self,
        receipt: Receipt,
        name: &str,
        run: impl FnOnce() -> Result<String>,
    ) -> Result<String> {
        check_own_step_name(name)?;
        if let Some(output) = self.step_output(receipt, name)? {
            return Ok(output);
        }
        let output = run()?;
        if self.record_step(receipt, name, &output)? {
            return Ok(output);
        }
        // Recorded meanwhile by another thread of this delivery: the first
        // output stands.
        Ok(self.step_output(receipt, name)?.unwrap_or(output))
    }

    /// Deletes the steps of task `id` of this queue recorded after its step
    /// `name`, and returns how many, so that the next delivery runs them
    /// again ("retry from step `name`"); the steps up to `name` are kept.
    /// [`Queue::retry_dead`] keeps every step: clear before retrying.
    /// Fails with [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument),
    /// changing nothing, when the queue has no task `id`, when the task is
    /// held by a worker (leased or being cancelled), or when it has no step
    /// `name`.
    pub fn clear_steps_after(&self, id: i64, name: &str) -> Result<u64> {
        let store = self.store()?;
        check_text("a step name", name, MAX_STEP_NAME_LEN)?;
        store.clear_steps_after(id, name)
    }
}
