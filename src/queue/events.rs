//! Events and durable sleep: a signal under a key, a held task waiting for
//! one (suspended meanwhile, its steps kept), and a held task sleeping
//! until a time. The outcomes are recorded as the task's steps, so that
//! the handler's code reads the same at every delivery.

use std::time::Duration;

use super::{check_json, check_receipt, or_cancelled, Queue};
use crate::clock::now_unix_ms;
use crate::error::Result;
use crate::events::{Awaited, SleepEnd, Slept};
use crate::options::check_text;
use crate::task::Receipt;

/// The longest key of an event, in bytes: the names of the steps that
/// record a wait's outcome (`tq:timeout:` and the key) then fit in the
/// longest step name.
pub const MAX_EVENT_KEY_LEN: usize = 1000;

/// The longest name of a sleep, in bytes.
pub const MAX_SLEEP_NAME_LEN: usize = 1000;

/// How long an event nobody waits for is kept unless its signal says
/// otherwise: 7 days.
pub const DEFAULT_EVENT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// A length in ms as the store takes it.
fn millis(length: Duration) -> i64 {
    i64::try_from(length.as_millis()).unwrap_or(i64::MAX)
}

impl Queue {
    /// Sends an event under `key` (1 to [`MAX_EVENT_KEY_LEN`] bytes, no
    /// NUL) with `payload` (a JSON text, at most the payload limit), kept
    /// for [`DEFAULT_EVENT_RETENTION`]; see [`Queue::signal_kept_for`].
    pub fn signal(&self, key: &str, payload: &str) -> Result<Option<i64>> {
        self.signal_kept_for(key, payload, DEFAULT_EVENT_RETENTION)
    }

    /// Sends an event under `key` with `payload`, in one commit: when tasks
    /// of the queue wait for `key`, the one that has waited longest takes
    /// it and is ready at once (a blocked pull in any process is woken),
    /// and its id is returned; the others keep waiting for the next event.
    /// Otherwise the event is kept for `retention`, behind any other kept
    /// under `key` (waits take them in the order they were sent, one
    /// each), and `None` is returned. Bad input fails with
    /// [`ErrorKind::InvalidArgument`](crate::ErrorKind::InvalidArgument)
    /// or [`ErrorKind::InvalidJson`](crate::ErrorKind::InvalidJson),
    /// storing nothing.
    pub fn signal_kept_for(
        &self,
        key: &str,
        payload: &str,
        retention: Duration,
    ) -> Result<Option<i64>> {
        let store = self.store()?;
        check_text("an event key", key, MAX_EVENT_KEY_LEN)?;
        check_json("event's payload", payload, self.max_payload_len)?;
        store.signal(key, payload, now_unix_ms(), millis(retention))
    }

    /// Waits up to `timeout` for an event under `key` for the held task.
    /// An event kept under `key` is taken at once: [`Awaited::Event`] with
    /// its payload, and the task stays held. Otherwise the task is
    /// suspended until an event comes or `timeout` passes, without
    /// spending an attempt and keeping its steps: [`Awaited::Suspended`],
    /// and the worker must stop working on it (its receipt is spent). The
    /// next delivery runs the handler again, and the same call answers
    /// [`Awaited::Event`] or [`Awaited::TimedOut`], as recorded among the
    /// task's steps (`tq:event:KEY` or `tq:timeout:KEY`): every later call
    /// for `key` gives the same answer. A zero `timeout` never suspends.
    /// Fails with [`ErrorKind::NotHeld`](crate::ErrorKind::NotHeld) or
    /// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled) when the
    /// delivery is not current, changing nothing.
    pub fn wait_for_event(
        &self,
        receipt: Receipt,
        key: &str,
        timeout: Duration,
    ) -> Result<Awaited> {
        let store = self.store()?;
        check_text("an event key", key, MAX_EVENT_KEY_LEN)?;
        check_receipt(store, receipt)?;
        store
            .wait_for_event(receipt, key, now_unix_ms(), millis(timeout))
            .map_err(|err| or_cancelled(store, receipt, err))
    }

    /// Sleeps the held task for `length` from the first call of the sleep
    /// named `name` (1 to [`MAX_SLEEP_NAME_LEN`] bytes, no NUL): see
    /// [`Queue::sleep_until`].
    pub fn sleep_for(&self, receipt: Receipt, name: &str, length: Duration) -> Result<Slept> {
        self.sleep(receipt, name, SleepEnd::After(millis(length)))
    }

    /// Sleeps the held task until `unix_ms` (ms since the Unix epoch): the
    /// sleep named `name` records its end among the task's steps
    /// (`tq:sleep:NAME`) at its first call, and every later call reads it.
    /// Before the end, the task is suspended until then, without spending
    /// an attempt and keeping its steps ([`Slept::Suspended`]: the worker
    /// must stop working on it); once it has passed, the call returns
    /// [`Slept::Over`] and the task stays held. Fails as
    /// [`Queue::wait_for_event`] does.
    pub fn sleep_until(&self, receipt: Receipt, name: &str, unix_ms: i64) -> Result<Slept> {
        self.sleep(receipt, name, SleepEnd::At(unix_ms))
    }

    fn sleep(&self, receipt: Receipt, name: &str, end: SleepEnd) -> Result<Slept> {
        let store = self.store()?;
        check_text("a sleep name", name, MAX_SLEEP_NAME_LEN)?;
        check_receipt(store, receipt)?;
        store
            .sleep(receipt, name, now_unix_ms(), end)
            .map_err(|err| or_cancelled(store, receipt, err))
    }
}
