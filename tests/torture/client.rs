//! tq calls that write their own history: an invoke record before the call,
//! its outcome after. Payloads carry a unique key, by which the checker
//! follows each task from push to finish.

use std::time::Duration;

use tq::{
    Cancelled, Checkpoint, Failed, OpenOptions, PullOptions, PushOptions, Pushed, Queue, Task,
};

use super::history::{Call, History};

/// A push's expiry or deadline, as the push gives it.
#[derive(Debug, Clone, Copy)]
pub enum Limit {
    /// This many milliseconds after the push.
    After(i64),
    /// At this Unix time in milliseconds.
    At(i64),
}

impl Limit {
    /// The history's field for the limit `name` (`expire`, `deadline`),
    /// with a leading space.
    fn field(self, name: &str) -> String {
        match self {
            Limit::After(ms) => format!(" {name}_after={ms}"),
            Limit::At(unix_ms) => format!(" {name}_at={unix_ms}"),
        }
    }
}

/// A push's expiry (before its first delivery) and deadline (before any).
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    pub expiry: Option<Limit>,
    pub deadline: Option<Limit>,
}

/// One thread's view: a queue handle (possibly shared with other threads)
/// and the process's history.
pub struct Client<'a> {
    pub queue: &'a Queue,
    pub history: &'a History,
    pub thread: u32,
}

/// Opens `path`, logging the attempt (opening may be interrupted too).
pub fn open(
    history: &History,
    thread: u32,
    path: &str,
    options: &OpenOptions,
) -> tq::Result<Queue> {
    let call = history.invoke(thread, "open", "");
    match Queue::open(path, options) {
        Ok(queue) => {
            history.ok(call, "");
            Ok(queue)
        }
        Err(err) => {
            history.fail(call, &err);
            Err(err)
        }
    }
}

impl Client<'_> {
    /// `queue=NAME`: every call on a task logs the queue of its handle.
    fn queue_field(&self) -> String {
        format!("queue={}", self.queue.name())
    }

    /// Pushes the payload of `key` (padded with `pad` bytes).
    pub fn push(&self, key: &str, pad: usize) -> tq::Result<i64> {
        self.push_with(key, pad, None)
    }

    /// The same, the task getting `max_attempts` deliveries when given
    /// (the handle's setting otherwise).
    pub fn push_with(&self, key: &str, pad: usize, max_attempts: Option<u32>) -> tq::Result<i64> {
        let mut options = PushOptions::new();
        if let Some(max) = max_attempts {
            options.max_attempts(max).expect("a valid maximum");
        }
        self.push_options(key, pad, &options, max_attempts)
    }

    /// The same, with `options`, which set `max_attempts` when given.
    pub fn push_options(
        &self,
        key: &str,
        pad: usize,
        options: &PushOptions,
        max_attempts: Option<u32>,
    ) -> tq::Result<i64> {
        let payload = payload(key, pad);
        let mut fields = format!(
            "key={key} sum={} {}",
            checksum(&payload),
            self.queue_field()
        );
        if let Some(max) = max_attempts {
            fields += &format!(" max={max}");
        }
        let call = self.history.invoke(self.thread, "push", &fields);
        let result = self.queue.push(&payload, options);
        match &result {
            Ok(Pushed::Stored(id)) => self.history.ok(call, &format!("id={id}")),
            // No push here has a unique key: the checker reports this.
            Ok(Pushed::Duplicate(id)) => self.history.ok(call, &format!("id={id} duplicate=1")),
            // Nor asks for a merge: the checker reports this too.
            Ok(Pushed::Merged(id)) => self.history.ok(call, &format!("id={id} merged=1")),
            Err(err) => self.history.fail(call, err),
        }
        result.map(Pushed::id)
    }

    /// Pushes the payload of `key` with the expiry and deadline of
    /// `limits` (each logged as the push gave it: `expire_after=MS`,
    /// `expire_at=UNIX_MS`, `deadline_after=MS` or `deadline_at=UNIX_MS`),
    /// waiting up to `wait_for_room` for room under the queue's cap.
    pub fn push_limited(
        &self,
        key: &str,
        limits: &Limits,
        wait_for_room: Duration,
    ) -> tq::Result<i64> {
        let mut options = PushOptions::new();
        options
            .wait_for_room(wait_for_room)
            .expect("a valid wait for room");
        let mut logged = String::new();
        if let Some(limit) = limits.expiry {
            logged += &match limit {
                Limit::After(ms) => options.expire_after(Duration::from_millis(ms as u64)),
                Limit::At(unix_ms) => options.expire_at_unix_ms(unix_ms),
            }
            .map(|_| limit.field("expire"))
            .expect("a valid expiry");
        }
        if let Some(limit) = limits.deadline {
            logged += &match limit {
                Limit::After(ms) => options.deadline_after(Duration::from_millis(ms as u64)),
                Limit::At(unix_ms) => options.deadline_unix_ms(unix_ms),
            }
            .map(|_| limit.field("deadline"))
            .expect("a valid deadline");
        }
        let payload = payload(key, 0);
        let fields = format!(
            "key={key} sum={} {}{logged}",
            checksum(&payload),
            self.queue_field()
        );
        let call = self.history.invoke(self.thread, "push", &fields);
        let result = self.queue.push(&payload, &options);
        match &result {
            Ok(Pushed::Stored(id)) => self.history.ok(call, &format!("id={id}")),
            Ok(Pushed::Duplicate(id)) => self.history.ok(call, &format!("id={id} duplicate=1")),
            Ok(Pushed::Merged(id)) => self.history.ok(call, &format!("id={id} merged=1")),
            Err(err) => self.history.fail(call, err),
        }
        result.map(Pushed::id)
    }

    /// Pushes the items `(key, options)` in one `push_items` call, logged as
    /// one push per item: each invoked before the call and answered after
    /// it, with the item's id or the call's error (all or none are stored).
    pub fn push_items(&self, items: &[(String, PushOptions)]) -> tq::Result<Vec<i64>> {
        let payloads: Vec<(String, PushOptions)> = items
            .iter()
            .map(|(key, options)| (payload(key, 0), options.clone()))
            .collect();
        let calls: Vec<Call> = items
            .iter()
            .zip(&payloads)
            .map(|((key, _), (payload, _))| {
                let fields = format!("key={key} sum={} {}", checksum(payload), self.queue_field());
                self.history.invoke(self.thread, "push", &fields)
            })
            .collect();
        let result = self.queue.push_items(&payloads);
        match &result {
            Ok(pushed) => {
                for (call, pushed) in calls.into_iter().zip(pushed) {
                    match pushed {
                        Pushed::Stored(id) => self.history.ok(call, &format!("id={id}")),
                        Pushed::Duplicate(id) => {
                            self.history.ok(call, &format!("id={id} duplicate=1"))
                        }
                        Pushed::Merged(id) => self.history.ok(call, &format!("id={id} merged=1")),
                    }
                }
            }
            Err(err) => {
                for call in calls {
                    self.history.fail(call, err);
                }
            }
        }
        result.map(|pushed| pushed.into_iter().map(Pushed::id).collect())
    }

    /// Sets the rate limit of the handle's queue (logged as `set_rate`).
    pub fn set_rate_limit(&self, limit: tq::RateLimit) -> tq::Result<()> {
        let call = self.history.invoke(
            self.thread,
            "set_rate",
            &format!(
                "claims={} per={} {}",
                limit.claims,
                limit.per.as_millis(),
                self.queue_field()
            ),
        );
        let result = self.queue.set_rate_limit(Some(limit));
        self.log_unit(call, &result);
        result
    }

    /// Pulls under a lease of `lease_ms`; an empty queue is an `ok` with
    /// no id.
    pub fn pull(&self, lease_ms: u64) -> tq::Result<Option<Task>> {
        let call = self.history.invoke(
            self.thread,
            "pull",
            &format!("lease={lease_ms} {}", self.queue_field()),
        );
        let result = self.queue.pull(&lease(lease_ms));
        match &result {
            Ok(Some(task)) => self.history.ok(call, &delivery_fields(task, "")),
            Ok(None) => self.history.ok(call, ""),
            Err(err) => self.history.fail(call, err),
        }
        result
    }

    /// Finishes the delivery `task`; a delivery is named by task id and
    /// attempt number, which no other delivery of the task shares.
    pub fn finish(&self, task: &Task) -> tq::Result<()> {
        let call = self
            .history
            .invoke(self.thread, "finish", &self.names(task));
        let result = self.queue.finish(task.receipt());
        self.log_unit(call, &result);
        result
    }

    /// Finishes `task` and pulls the next under `lease_ms`, in one call
    /// (logged as `finish_pull`, read back as a finish and a pull).
    pub fn finish_and_pull(&self, task: &Task, lease_ms: u64) -> tq::Result<Option<Task>> {
        let call = self.history.invoke(
            self.thread,
            "finish_pull",
            &format!("{} lease={lease_ms}", self.names(task)),
        );
        let result = self.queue.finish_and_pull(task.receipt(), &lease(lease_ms));
        match &result {
            Ok(Some(next)) => self.history.ok(call, &delivery_fields(next, "next_")),
            Ok(None) => self.history.ok(call, ""),
            Err(err) => self.history.fail(call, err),
        }
        result
    }

    /// Ends the delivery `task` as failed: the answer is `dead=1`, or
    /// `retry_at=MS` (the Unix time from which it may be delivered again).
    pub fn fail(&self, task: &Task, reason: &str) -> tq::Result<Failed> {
        let call = self.history.invoke(self.thread, "fail", &self.names(task));
        let result = self.queue.fail(task.receipt(), reason);
        match &result {
            Ok(Failed::Dead) => self.history.ok(call, "dead=1"),
            Ok(Failed::RetryAt(at)) => self.history.ok(call, &format!("retry_at={at}")),
            Err(err) => self.history.fail(call, err),
        }
        result
    }

    /// Renews the lease of the delivery `task` to `lease_ms` from now.
    pub fn extend(&self, task: &Task, lease_ms: u64) -> tq::Result<()> {
        let call = self.history.invoke(
            self.thread,
            "extend",
            &format!("{} lease={lease_ms}", self.names(task)),
        );
        let result = self
            .queue
            .extend(task.receipt(), Duration::from_millis(lease_ms));
        self.log_unit(call, &result);
        result
    }

    /// Cancels task `id` of the handle's queue: the answer is
    /// `cancelled=removed` or `cancelled=requested`.
    pub fn cancel(&self, id: i64) -> tq::Result<Cancelled> {
        let call = self.history.invoke(
            self.thread,
            "cancel",
            &format!("id={id} {}", self.queue_field()),
        );
        let result = self.queue.cancel_task(id, "torture: cancelled");
        match &result {
            Ok(Cancelled::Removed) => self.history.ok(call, "cancelled=removed"),
            Ok(Cancelled::Requested) => self.history.ok(call, "cancelled=requested"),
            Err(err) => self.history.fail(call, err),
        }
        result
    }

    pub fn recover(&self) -> tq::Result<u64> {
        let call = self
            .history
            .invoke(self.thread, "recover", &self.queue_field());
        let result = self.queue.recover();
        match &result {
            Ok(n) => self.history.ok(call, &format!("n={n}")),
            Err(err) => self.history.fail(call, err),
        }
        result
    }

    /// Checkpoints the WAL: the answer is the WAL's size afterwards and
    /// whether the checkpoint was complete.
    pub fn checkpoint(&self) -> tq::Result<Checkpoint> {
        let call = self.history.invoke(self.thread, "checkpoint", "");
        let result = self.queue.checkpoint();
        match &result {
            Ok(done) => self.history.ok(
                call,
                &format!(
                    "wal={} complete={}",
                    done.wal_bytes,
                    u8::from(done.complete)
                ),
            ),
            Err(err) => self.history.fail(call, err),
        }
        result
    }

    /// The fields that name a delivery and the handle's queue.
    fn names(&self, task: &Task) -> String {
        format!(
            "id={} attempt={} {}",
            task.id(),
            task.attempts(),
            self.queue_field()
        )
    }

    fn log_unit(&self, call: Call, result: &tq::Result<()>) {
        match result {
            Ok(()) => self.history.ok(call, ""),
            Err(err) => self.history.fail(call, err),
        }
    }
}

fn lease(lease_ms: u64) -> PullOptions {
    let mut options = PullOptions::new();
    options
        .lease(Duration::from_millis(lease_ms))
        .expect("a valid lease");
    options
}

/// What a delivery answered, each field name after `prefix`.
fn delivery_fields(task: &Task, prefix: &str) -> String {
    format!(
        "{prefix}id={} {prefix}attempt={} {prefix}max={} {prefix}key={} {prefix}sum={}",
        task.id(),
        task.attempts(),
        task.max_attempts(),
        key_of(task.payload()),
        checksum(task.payload())
    )
}

/// The JSON payload of `key`: `{"key":KEY,"pad":"xxx..."}`.
pub fn payload(key: &str, pad: usize) -> String {
    format!("{{\"key\":\"{key}\",\"pad\":\"{}\"}}", "x".repeat(pad))
}

/// The key in a payload made by [`payload`] ("?" if there is none).
pub fn key_of(payload: &str) -> String {
    serde_json::from_str::<serde_json::Value>(payload)
        .ok()
        .and_then(|value| value.get("key")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// FNV-1a of the payload's bytes: the checker compares what was stored and
/// delivered with what was pushed, byte for byte, without logging payloads.
pub fn checksum(payload: &str) -> u64 {
    payload.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
