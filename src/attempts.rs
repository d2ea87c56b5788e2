//! Attempts: the deliveries of a task that ended without finishing it,
//! each kept with the task (its reason, holder, start, end and outcome),
//! the newest [`ATTEMPTS_KEPT`].
//!
//! Both backends record them the same way, in their schemas: a trigger on
//! the tasks table adds a row whenever a held delivery loses its lease
//! with a reason (a failure, a lease taken back, a cancellation ending
//! it), in the statement that ends it, and trims the task's oldest rows
//! beyond [`ATTEMPTS_KEPT`]. A finish never sets a reason, so the success
//! path fires no trigger; a snooze gives its attempt back and records
//! nothing. The rows go with their task, whichever statement deletes it.
//! The outcome codes below are the ones the triggers write.

use crate::error::{Error, ErrorKind, Result};

/// How many ended attempts a task keeps: the newest ones. A constant of
/// both schemas (SQLite's migration 16, PostgreSQL's 15).
pub const ATTEMPTS_KEPT: usize = 20;

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum AttemptOutcome {
    /// Its holder failed it ([`crate::Queue::fail`]), with a reason.
    Failed = 0,
    /// Its lease ran out before its holder finished, and tq took it back.
    LeaseExpired = 1,
    /// Its holder's process (or, on PostgreSQL, its session) was found
    /// gone, and tq took the task back.
    HolderDied = 2,
    /// The task was cancelled while held, and the delivery ended so.
    Cancelled = 3,
}

impl AttemptOutcome {
    /// The outcome a trigger stored as `code`. A code tq never writes
    /// means its tables were changed outside tq.
    pub(crate) fn from_stored(code: i64) -> Result<AttemptOutcome> {
        match code {
            0 => Ok(AttemptOutcome::Failed),
            1 => Ok(AttemptOutcome::LeaseExpired),
            2 => Ok(AttemptOutcome::HolderDied),
            3 => Ok(AttemptOutcome::Cancelled),
            _ => Err(Error::new(
                ErrorKind::NotADatabase,
                format!("an attempt has outcome {code}, which tq never writes"),
            )),
        }
    }

    /// Its name as `tq show` and the dashboard print it.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::LeaseExpired => "lease expired",
            AttemptOutcome::HolderDied => "holder died",
            AttemptOutcome::Cancelled => "cancelled",
        }
    }
}

/// One ended attempt of a task, as [`crate::Queue::task`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptInfo {
    pub(crate) attempt: u32,
    pub(crate) outcome: AttemptOutcome,
    pub(crate) reason: Option<String>,
    pub(crate) holder_id: Option<i64>,
    pub(crate) holder_pid: Option<i64>,
    pub(crate) started_at_unix_ms: Option<i64>,
    pub(crate) ended_at_unix_ms: i64,
}

impl AttemptInfo {
    /// Which delivery of the task it was (1 for the first; counted again
    /// from 1 after the task is retried from dead).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// How it ended.
    pub fn outcome(&self) -> AttemptOutcome {
        self.outcome
    }

    /// The reason it ended with: the one given to the failure, or the one
    /// tq wrote when it took the lease back or a cancellation ended it.
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// The id of the holder that had it (a process on SQLite, a
    /// connection on PostgreSQL; [`crate::Holder::id`]), if one was
    /// recorded.
    pub fn holder_id(&self) -> Option<i64> {
        self.holder_id
    }

    /// The process id of its holder, when known (SQLite only).
    pub fn holder_pid(&self) -> Option<i64> {
        self.holder_pid
    }

    /// When it was claimed, ms since the Unix epoch (the server's clock on
    /// PostgreSQL); `None` for a claim made before tq recorded claim times.
    pub fn started_at_unix_ms(&self) -> Option<i64> {
        self.started_at_unix_ms
    }

    /// When it ended, ms since the Unix epoch (the server's clock on
    /// PostgreSQL).
    pub fn ended_at_unix_ms(&self) -> i64 {
        self.ended_at_unix_ms
    }

    /// How long it lasted, in ms, when its start is known.
    pub fn duration_ms(&self) -> Option<i64> {
        self.started_at_unix_ms
            .map(|started| (self.ended_at_unix_ms - started).max(0))
    }
}
