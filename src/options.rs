//! Options for opening a queue, pushing and pulling. Each setter checks its
//! value, so an options object never holds an out-of-range setting.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::queue::MAX_PAYLOAD_LEN;

/// How much a commit survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every commit is flushed to the disk before the call returns: an
    /// acknowledged write survives a process crash and a power loss. Costs
    /// one flush per commit (SQLite `synchronous=FULL` in WAL mode).
    #[default]
    Full,
    /// An acknowledged write survives a process crash; a power loss or OS
    /// crash may lose the most recent commits (never corrupts the file).
    /// Flushes only at checkpoints (SQLite `synchronous=NORMAL`).
    Normal,
}

/// The longest lease or busy timeout accepted: one year.
const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

fn check_duration(what: &str, value: Duration, min: Duration) -> Result<Duration> {
    if value < min || value > MAX_DURATION {
        return Err(Error::invalid_argument(format!(
            "{what} must be between {} ms and {} ms, got {} ms",
            min.as_millis(),
            MAX_DURATION.as_millis(),
            value.as_millis()
        )));
    }
    Ok(value)
}

/// Options for [`crate::Queue::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    pub(crate) durability: Durability,
    pub(crate) busy_timeout: Duration,
    pub(crate) keep_history: bool,
    pub(crate) max_payload_len: usize,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            durability: Durability::Full,
            busy_timeout: Duration::from_secs(5),
            keep_history: false,
            max_payload_len: MAX_PAYLOAD_LEN,
        }
    }
}

impl OpenOptions {
    /// Defaults: [`Durability::Full`], a 5 s busy timeout, no history, the
    /// largest payload limit ([`MAX_PAYLOAD_LEN`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the durability of every commit made through this handle.
    pub fn durability(&mut self, durability: Durability) -> &mut Self {
        self.durability = durability;
        self
    }

    /// Sets how long a call may wait for other writers before it fails with
    /// [`crate::ErrorKind::Busy`]: 0 ms (fail at once) to one year.
    pub fn busy_timeout(&mut self, timeout: Duration) -> Result<&mut Self> {
        self.busy_timeout = check_duration("busy timeout", timeout, Duration::ZERO)?;
        Ok(self)
    }

    /// When true, finished tasks are kept as `done` with their finish time
    /// (see [`crate::Queue::purge_done`]); when false (the default) they are
    /// deleted.
    pub fn keep_history(&mut self, keep: bool) -> &mut Self {
        self.keep_history = keep;
        self
    }
}

impl OpenOptions {
    /// Sets the largest payload this handle pushes, in bytes: 1 to
    /// [`MAX_PAYLOAD_LEN`]. A larger push fails with
    /// [`crate::ErrorKind::InvalidArgument`] and stores nothing.
    pub fn max_payload_len(&mut self, limit: usize) -> Result<&mut Self> {
        if limit == 0 || limit > MAX_PAYLOAD_LEN {
            return Err(Error::invalid_argument(format!(
                "the payload limit must be between 1 and {MAX_PAYLOAD_LEN} bytes, got {limit}"
            )));
        }
        self.max_payload_len = limit;
        Ok(self)
    }
}

/// When a pushed task first becomes ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum NotBefore {
    #[default]
    Now,
    /// This long after the push.
    Delay(Duration),
    /// At this time, in milliseconds since the Unix epoch.
    UnixMillis(i64),
}

/// Options for [`crate::Queue::push`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushOptions {
    pub(crate) not_before: NotBefore,
}

impl PushOptions {
    /// Defaults: the task is ready at once.
    pub fn new() -> Self {
        Self::default()
    }

    /// The task becomes ready this long after the push (up to one year).
    /// Replaces an earlier [`PushOptions::run_at_unix_ms`].
    pub fn delay(&mut self, delay: Duration) -> Result<&mut Self> {
        self.not_before = NotBefore::Delay(check_duration("delay", delay, Duration::ZERO)?);
        Ok(self)
    }

    /// The task becomes ready at this time, in milliseconds since the Unix
    /// epoch (a time in the past means at once). Replaces an earlier
    /// [`PushOptions::delay`].
    pub fn run_at_unix_ms(&mut self, unix_ms: i64) -> Result<&mut Self> {
        if unix_ms < 0 {
            return Err(Error::invalid_argument(format!(
                "run-at time must not be before 1970, got {unix_ms} ms"
            )));
        }
        self.not_before = NotBefore::UnixMillis(unix_ms);
        Ok(self)
    }
}

/// Options for [`crate::Queue::pull`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullOptions {
    pub(crate) lease: Duration,
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            lease: Duration::from_secs(30),
        }
    }
}

impl PullOptions {
    /// Defaults: a 30 s lease.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long the claimed task stays held before it is ready again for
    /// others: 1 ms to one year.
    pub fn lease(&mut self, lease: Duration) -> Result<&mut Self> {
        self.lease = check_duration("lease", lease, Duration::from_millis(1))?;
        Ok(self)
    }
}
