//! Options for opening a queue, pushing and pulling. Each setter checks its
//! value, so an options object never holds an out-of-range setting.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::merge::Merge;
use crate::wait::CancelToken;

/// The queue a handle works on unless [`OpenOptions::queue`] names another.
pub const DEFAULT_QUEUE: &str = "default";

/// How many deliveries a task gets unless its queue or its push says
/// otherwise ([`OpenOptions::max_attempts`], [`PushOptions::max_attempts`]).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 25;

/// How long a task finished with a result is kept for it, on a handle
/// without history, unless [`OpenOptions::result_retention`] says
/// otherwise: 7 days.
pub const DEFAULT_RESULT_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// The largest payload any queue accepts, in bytes (SQLite's limit on one
/// value); [`OpenOptions::max_payload_len`] sets a queue's own limit.
pub const MAX_PAYLOAD_LEN: usize = 1_000_000_000;

/// The longest queue name, in bytes.
pub const MAX_QUEUE_NAME_LEN: usize = 128;

/// The PostgreSQL schema tq's tables live in unless
/// [`OpenOptions::postgres_schema`] names another.
pub const DEFAULT_POSTGRES_SCHEMA: &str = "tq";

/// How many connections a PostgreSQL handle keeps at most unless
/// [`OpenOptions::pool_size`] says otherwise.
pub const DEFAULT_POOL_SIZE: usize = 4;

/// The largest connection pool a handle may have.
pub const MAX_POOL_SIZE: usize = 1024;

/// The longest unique key, in bytes.
pub const MAX_UNIQUE_KEY_LEN: usize = 1024;

/// The longest name of a step ([`crate::Queue::record_step`]), in bytes.
pub const MAX_STEP_NAME_LEN: usize = 1024;

/// Checks a name or key given by the caller: 1 to `max` bytes, no NUL (C
/// callers could not pass it back).
pub(crate) fn check_text(what: &str, text: &str, max: usize) -> Result<()> {
    if text.is_empty() || text.len() > max {
        return Err(Error::invalid_argument(format!(
            "{what} must be 1 to {max} bytes long, got {} bytes",
            text.len()
        )));
    }
    if text.contains('\0') {
        return Err(Error::invalid_argument(format!(
            "{what} contains a NUL byte"
        )));
    }
    Ok(())
}

/// Checks a lease length: 1 ms to one year.
pub(crate) fn check_lease(lease: Duration) -> Result<Duration> {
    check_duration("lease", lease, Duration::from_millis(1))
}

/// Checks a delay before a task runs: 0 to the longest duration.
pub(crate) fn check_delay(delay: Duration) -> Result<Duration> {
    check_duration("delay", delay, Duration::ZERO)
}

/// Checks the time of an expiry or deadline: not before 1970.
fn check_limit_time(what: &str, unix_ms: i64) -> Result<i64> {
    if unix_ms < 0 {
        return Err(Error::invalid_argument(format!(
            "{what} time must not be before 1970, got {unix_ms} ms"
        )));
    }
    Ok(unix_ms)
}

/// Checks a queue name: 1 to [`MAX_QUEUE_NAME_LEN`] bytes, no NUL.
pub(crate) fn check_queue_name(name: &str) -> Result<()> {
    check_text("a queue name", name, MAX_QUEUE_NAME_LEN)
}

/// The max attempts of a task, or of a schedule's tasks: the value its
/// options chose, else the handle's `default` ([`OpenOptions::max_attempts`]).
/// The one place the two meet: a pushed task
/// ([`crate::store::NewTask::new`]) and a stored schedule
/// ([`crate::schedule::Schedule::resolved`]) take their value from here, and
/// the backends store it as given.
pub(crate) fn resolve_max_attempts(chosen: Option<u32>, default: u32) -> u32 {
    chosen.unwrap_or(default)
}

pub(crate) fn check_max_attempts(max_attempts: u32) -> Result<u32> {
    if max_attempts == 0 {
        return Err(Error::invalid_argument(
            "max attempts must be at least 1 (the first delivery is an attempt)",
        ));
    }
    Ok(max_attempts)
}

/// How much a commit survives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Durability {
    /// Every write is flushed to the disk before the call returns: an
    /// acknowledged write survives a process crash and a power loss. Writes
    /// that arrive together share a flush, which tq runs on the WAL once the
    /// write lock is released, so that the next writes commit meanwhile
    /// (the durability of SQLite `synchronous=FULL` in WAL mode).
    #[default]
    Full,
    /// An acknowledged write survives a process crash; a power loss or OS
    /// crash may lose the most recent commits (never corrupts the file).
    /// Flushes only at checkpoints (SQLite `synchronous=NORMAL`).
    Normal,
}

/// The longest lease, delay or busy timeout accepted: one year.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

pub(crate) fn check_duration(what: &str, value: Duration, min: Duration) -> Result<Duration> {
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
    pub(crate) result_retention: Duration,
    pub(crate) max_payload_len: usize,
    pub(crate) queue: String,
    pub(crate) max_attempts: u32,
    pub(crate) retry_backoff: RetryBackoff,
    /// What only PostgreSQL takes.
    pub(crate) postgres: PostgresOptions,
}

/// The options of [`OpenOptions`] that only the PostgreSQL backend takes,
/// each `None` when not set, so that opening an SQLite file can refuse it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PostgresOptions {
    pool_size: Option<usize>,
    schema: Option<String>,
}

#[cfg(feature = "postgres")]
impl PostgresOptions {
    /// How many connections a handle's pool may hold.
    pub(crate) fn pool_size(&self) -> usize {
        self.pool_size.unwrap_or(DEFAULT_POOL_SIZE)
    }

    /// The schema tq's tables live in.
    pub(crate) fn schema(&self) -> &str {
        self.schema.as_deref().unwrap_or(DEFAULT_POSTGRES_SCHEMA)
    }
}

/// The pause before a failed task is retried: `min` after the first
/// failure, doubling with each further attempt up to `max`, each pause then
/// drawn at random between half of it and all of it, so that tasks failing
/// together do not come back together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryBackoff {
    pub(crate) min: Duration,
    pub(crate) max: Duration,
}

impl RetryBackoff {
    /// The pause before the retry that follows delivery number `attempts`
    /// (1 for the first), with the jitter drawn from `random`.
    pub(crate) fn pause(&self, attempts: u32, random: u64) -> Duration {
        let doublings = attempts.saturating_sub(1).min(63);
        let full = (self.min.as_millis() as u64)
            .saturating_mul(1u64 << doublings)
            .min(self.max.as_millis() as u64);
        Duration::from_millis(full - random % (full / 2 + 1))
    }
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            durability: Durability::Full,
            busy_timeout: Duration::from_secs(5),
            keep_history: false,
            result_retention: DEFAULT_RESULT_RETENTION,
            max_payload_len: MAX_PAYLOAD_LEN,
            queue: DEFAULT_QUEUE.to_owned(),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            retry_backoff: RetryBackoff {
                min: Duration::from_secs(1),
                max: Duration::from_secs(3600),
            },
            postgres: PostgresOptions::default(),
        }
    }
}

impl OpenOptions {
    /// Defaults: [`Durability::Full`], a 5 s busy timeout, no history,
    /// results kept for [`DEFAULT_RESULT_RETENTION`], the largest payload
    /// limit ([`MAX_PAYLOAD_LEN`]), the queue named [`DEFAULT_QUEUE`],
    /// [`DEFAULT_MAX_ATTEMPTS`] deliveries per task, and retries after 1 s
    /// doubling up to 1 hour.
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
    /// (see [`crate::Queue::purge`]); when false (the default) they are
    /// deleted.
    pub fn keep_history(&mut self, keep: bool) -> &mut Self {
        self.keep_history = keep;
        self
    }

    /// Sets how long a task finished with a result
    /// ([`crate::Queue::finish_with_result`]) through this handle is kept
    /// for its result when the handle keeps no history: 1 ms to one year,
    /// default [`DEFAULT_RESULT_RETENTION`]. Later finishes with a result
    /// delete the tasks whose time has passed. With history, a result stays
    /// with its done task until [`crate::Queue::purge`].
    pub fn result_retention(&mut self, retention: Duration) -> Result<&mut Self> {
        self.result_retention =
            check_duration("result retention", retention, Duration::from_millis(1))?;
        Ok(self)
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

    /// Chooses the queue this handle works on: one file holds any number of
    /// independent queues, each named by 1 to [`MAX_QUEUE_NAME_LEN`] bytes
    /// of UTF-8 (no NUL). Default [`DEFAULT_QUEUE`].
    pub fn queue(&mut self, name: &str) -> Result<&mut Self> {
        check_queue_name(name)?;
        self.queue = name.to_owned();
        Ok(self)
    }

    /// Sets how many deliveries a task pushed through this handle gets
    /// before a failure makes it dead (at least 1). A push may override it
    /// with [`PushOptions::max_attempts`].
    pub fn max_attempts(&mut self, max_attempts: u32) -> Result<&mut Self> {
        self.max_attempts = check_max_attempts(max_attempts)?;
        Ok(self)
    }

    /// Sets the pauses before retrying a failed task: `min` after the first
    /// failure, doubling with each attempt up to `max`, with random jitter
    /// taking up to half of each pause off. `min` may be 0 (retry at once);
    /// `max` must not be below `min`; both at most one year.
    pub fn retry_backoff(&mut self, min: Duration, max: Duration) -> Result<&mut Self> {
        let min = check_duration("the shortest retry pause", min, Duration::ZERO)?;
        let max = check_duration("the longest retry pause", max, Duration::ZERO)?;
        if max < min {
            return Err(Error::invalid_argument(format!(
                "the longest retry pause ({} ms) is shorter than the shortest ({} ms)",
                max.as_millis(),
                min.as_millis()
            )));
        }
        self.retry_backoff = RetryBackoff { min, max };
        Ok(self)
    }
}

impl OpenOptions {
    /// Sets how many connections to the PostgreSQL server a handle opened
    /// with these options keeps at most (1 to [`MAX_POOL_SIZE`]; default
    /// [`DEFAULT_POOL_SIZE`]): that many of its calls run at once, and
    /// further ones wait up to the busy timeout for a free connection. Each
    /// process also keeps one more connection, shared by its handles on one
    /// schema, to hear of new tasks and to show it is alive. An SQLite file
    /// has no pool: opening one with this set fails.
    pub fn pool_size(&mut self, size: usize) -> Result<&mut Self> {
        if size == 0 || size > MAX_POOL_SIZE {
            return Err(Error::invalid_argument(format!(
                "the pool size must be between 1 and {MAX_POOL_SIZE} connections, got {size}"
            )));
        }
        self.postgres.pool_size = Some(size);
        Ok(self)
    }

    /// Names the PostgreSQL schema that holds tq's tables (default
    /// [`DEFAULT_POSTGRES_SCHEMA`]): 1 to 63 bytes of ASCII letters, digits
    /// and `_`, not starting with a digit or `pg_`. tq creates it when
    /// missing. An SQLite file has no schemas: opening one with this set
    /// fails.
    pub fn postgres_schema(&mut self, name: &str) -> Result<&mut Self> {
        let valid = !name.is_empty()
            && name.len() <= 63
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !name.as_bytes()[0].is_ascii_digit()
            && !name.to_ascii_lowercase().starts_with("pg_");
        if !valid {
            return Err(Error::invalid_argument(format!(
                "'{name}' is not a schema name tq uses: 1 to 63 ASCII letters, digits and '_', \
                 not starting with a digit or 'pg_'"
            )));
        }
        self.postgres.schema = Some(name.to_owned());
        Ok(self)
    }

    /// Refuses the options that mean nothing for an SQLite file.
    pub(crate) fn check_sqlite(&self) -> Result<()> {
        if self.postgres.pool_size.is_some() {
            return Err(Error::invalid_argument(
                "a connection pool size applies to PostgreSQL only: an SQLite file has no pool",
            ));
        }
        if self.postgres.schema.is_some() {
            return Err(Error::invalid_argument(
                "a PostgreSQL schema applies to PostgreSQL only: an SQLite file has no schemas",
            ));
        }
        Ok(())
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

/// A time limit on a pushed task's deliveries ([`PushOptions::expire_after`],
/// [`PushOptions::deadline_after`] and their absolute forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeLimit {
    /// This long after the push.
    After(Duration),
    /// At this time, in milliseconds since the Unix epoch.
    UnixMillis(i64),
}

/// A push's unique key and how long it stays reserved after the task is done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UniqueKey {
    pub(crate) key: String,
    pub(crate) reserved_after_done: Duration,
}

/// The most tasks one task may wait for.
pub const MAX_PARENTS: usize = 10_000;

/// The most tasks of one ordered group delivered at once
/// ([`PushOptions::group`]).
pub const MAX_GROUP_AT_ONCE: u32 = 1_000;

/// A push's ordered group: its key and how many of its tasks may be
/// delivered at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Group {
    pub(crate) key: String,
    pub(crate) max_at_once: u32,
}

/// A task a push waits for: one stored already, or an earlier item of the
/// same [`crate::Queue::push_items`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum Parent {
    Task(i64),
    Item(usize),
}

/// What a waiting task does when a task it waits for ends dead or
/// cancelled ([`PushOptions::on_parent_failure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ParentFailure {
    /// The waiting task is cancelled, with a reason naming the task it
    /// waited for, and so are the tasks waiting for it, in turn.
    #[default]
    Cancel,
    /// The end counts as finished: the waiting task runs once every task
    /// it waits for has ended, however each ended.
    RunAnyway,
}

/// Options for [`crate::Queue::push`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushOptions {
    pub(crate) not_before: NotBefore,
    pub(crate) priority: i32,
    pub(crate) max_attempts: Option<u32>,
    pub(crate) unique: Option<UniqueKey>,
    pub(crate) after: BTreeSet<Parent>,
    pub(crate) on_parent_failure: ParentFailure,
    pub(crate) group: Option<Group>,
    pub(crate) expiry: Option<TimeLimit>,
    pub(crate) deadline: Option<TimeLimit>,
    pub(crate) wait_for_room: Duration,
    pub(crate) merge: Merge,
    pub(crate) fair_key: Option<String>,
}

impl PushOptions {
    /// Defaults: the task is ready at once, priority 0, the queue's maximum
    /// attempts, no unique key, no merge into the key's holder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the priority: a ready task of higher priority is claimed before
    /// any of lower priority; tasks of equal priority come out in the order
    /// they became ready. Any `i32`; default 0.
    pub fn priority(&mut self, priority: i32) -> &mut Self {
        self.priority = priority;
        self
    }

    /// Sets how many deliveries this task gets before a failure makes it
    /// dead (at least 1), instead of the queue's default.
    pub fn max_attempts(&mut self, max_attempts: u32) -> Result<&mut Self> {
        self.max_attempts = Some(check_max_attempts(max_attempts)?);
        Ok(self)
    }

    /// Gives the task a unique key (1 to [`MAX_UNIQUE_KEY_LEN`] bytes of
    /// UTF-8, no NUL): while a task with this key is pending or leased in
    /// the queue, pushing another stores nothing and answers
    /// [`crate::Pushed::Duplicate`] with the existing task's id.
    pub fn unique_key(&mut self, key: &str) -> Result<&mut Self> {
        check_text("a unique key", key, MAX_UNIQUE_KEY_LEN)?;
        let reserved_after_done = self
            .unique
            .as_ref()
            .map_or(Duration::ZERO, |unique| unique.reserved_after_done);
        self.unique = Some(UniqueKey {
            key: key.to_owned(),
            reserved_after_done,
        });
        Ok(self)
    }

    /// Lets the push wait up to `wait` (at most one year; default 0: not at
    /// all) for room when its queue is at its cap on pending tasks
    /// ([`crate::Queue::set_max_pending`]), instead of failing at once with
    /// [`ErrorKind::Full`](crate::ErrorKind::Full). The wait ends when a
    /// task of the queue is delivered or ends and the push then fits (at
    /// once for those of this process, within [`crate::ROOM_POLL_INTERVAL`]
    /// for others'), or fails with `Full` once `wait` has passed, or with
    /// [`ErrorKind::Interrupted`](crate::ErrorKind::Interrupted) at
    /// [`crate::Queue::interrupt`]. Of a [`crate::Queue::push_items`], the
    /// longest wait of its items counts.
    pub fn wait_for_room(&mut self, wait: Duration) -> Result<&mut Self> {
        self.wait_for_room = check_duration("the wait for room", wait, Duration::ZERO)?;
        Ok(self)
    }

    /// Keeps the unique key reserved for this long after the task is done
    /// (up to one year; default 0: free once done). Needs a unique key.
    pub fn unique_for(&mut self, window: Duration) -> Result<&mut Self> {
        let window = check_duration("the unique window", window, Duration::ZERO)?;
        match &mut self.unique {
            Some(unique) => unique.reserved_after_done = window,
            None => {
                return Err(Error::invalid_argument(
                    "a unique window needs a unique key: set the key first",
                ))
            }
        }
        Ok(self)
    }

    /// Removes the unique key (and its window).
    pub fn clear_unique_key(&mut self) -> &mut Self {
        self.unique = None;
        self
    }

    /// The task becomes ready this long after the push (up to one year).
    /// Replaces an earlier [`PushOptions::run_at_unix_ms`].
    pub fn delay(&mut self, delay: Duration) -> Result<&mut Self> {
        self.not_before = NotBefore::Delay(check_delay(delay)?);
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

    /// The task's first delivery never starts once this long after the
    /// push has passed (1 ms to one year): a claim that meets the task
    /// then ends it as dead with the reason `expired` instead (see
    /// `docs/guide.md`, "Expiry and deadlines"). Its retries, if its first
    /// delivery started in time, are not bound by it. Replaces an earlier
    /// [`PushOptions::expire_at_unix_ms`].
    pub fn expire_after(&mut self, after: Duration) -> Result<&mut Self> {
        let after = check_duration("the expiry", after, Duration::from_millis(1))?;
        self.expiry = Some(TimeLimit::After(after));
        Ok(self)
    }

    /// As [`PushOptions::expire_after`], at a time in milliseconds since
    /// the Unix epoch. Replaces an earlier [`PushOptions::expire_after`].
    pub fn expire_at_unix_ms(&mut self, unix_ms: i64) -> Result<&mut Self> {
        self.expiry = Some(TimeLimit::UnixMillis(check_limit_time("expiry", unix_ms)?));
        Ok(self)
    }

    /// No delivery of the task, first or retry, starts once this long
    /// after the push has passed (1 ms to one year): a claim that meets
    /// the task then ends it as dead with the reason `deadline passed`,
    /// and a failure whose retry would fall at or after it ends the task
    /// so at once. A delivery running when it passes runs to its end.
    /// Replaces an earlier [`PushOptions::deadline_unix_ms`].
    pub fn deadline_after(&mut self, after: Duration) -> Result<&mut Self> {
        let after = check_duration("the deadline", after, Duration::from_millis(1))?;
        self.deadline = Some(TimeLimit::After(after));
        Ok(self)
    }

    /// As [`PushOptions::deadline_after`], at a time in milliseconds since
    /// the Unix epoch. Replaces an earlier [`PushOptions::deadline_after`].
    pub fn deadline_unix_ms(&mut self, unix_ms: i64) -> Result<&mut Self> {
        self.deadline = Some(TimeLimit::UnixMillis(check_limit_time(
            "deadline", unix_ms,
        )?));
        Ok(self)
    }

    /// Makes the task wait for the tasks `ids` too (besides any named
    /// before): it is stored blocked, counted and listed as pending but
    /// never claimed, until each of them is done (see
    /// [`PushOptions::on_parent_failure`] for one that ends otherwise).
    /// Each must be a task of the same queue that is stored when the task
    /// is pushed: not yet finished, or kept as history (done ones do not
    /// hold the task back). At most [`MAX_PARENTS`] in all.
    pub fn after(&mut self, ids: &[i64]) -> Result<&mut Self> {
        if let Some(id) = ids.iter().find(|&&id| id <= 0) {
            return Err(Error::invalid_argument(format!(
                "a task to wait for is named by its id, which is positive, got {id}"
            )));
        }
        self.add_parents(ids.iter().map(|&id| Parent::Task(id)))
    }

    /// Makes an item of [`crate::Queue::push_items`] wait for the earlier
    /// item at `index` of the same call too, as [`PushOptions::after`]
    /// does for a stored task: a graph is stored in one call, all or none.
    pub fn after_item(&mut self, index: usize) -> Result<&mut Self> {
        self.add_parents([Parent::Item(index)])
    }

    /// Forgets the tasks and items named by [`PushOptions::after`] and
    /// [`PushOptions::after_item`].
    pub fn clear_after(&mut self) -> &mut Self {
        self.after.clear();
        self
    }

    /// What the task does when a task it waits for ends dead or cancelled;
    /// default [`ParentFailure::Cancel`].
    pub fn on_parent_failure(&mut self, policy: ParentFailure) -> &mut Self {
        self.on_parent_failure = policy;
        self
    }

    /// Puts the task in the ordered group `key` (1 to
    /// [`MAX_UNIQUE_KEY_LEN`] bytes of UTF-8, no NUL) of its queue, whose
    /// tasks are delivered at most `max_at_once` at a time (1 to
    /// [`MAX_GROUP_AT_ONCE`]), in push order when it is 1, while other
    /// groups proceed in parallel. The task waits, as it would for a task
    /// named by [`PushOptions::after`] with [`ParentFailure::RunAnyway`],
    /// for the `max_at_once`-th most recent unfinished task of the group,
    /// if there is one: that task ending in any way (a crashed holder's
    /// task taken back does not end it) lets the next run. The task it
    /// waits for so is listed by [`crate::TaskInfo::waiting_for`] while
    /// blocked, not by [`crate::Task::parents`], which lists the tasks
    /// named by `after`. Tasks of one group pushed in one call wait for
    /// each other likewise, in order. Pushes to one group should use the
    /// same `max_at_once`: each push counts with its own. A task of the
    /// group cancelled while it still waits hands its place on: the tasks
    /// of the group waiting for it wait for the task it waited for.
    pub fn group(&mut self, key: &str, max_at_once: u32) -> Result<&mut Self> {
        check_text("a group key", key, MAX_UNIQUE_KEY_LEN)?;
        if !(1..=MAX_GROUP_AT_ONCE).contains(&max_at_once) {
            return Err(Error::invalid_argument(format!(
                "a group delivers 1 to {MAX_GROUP_AT_ONCE} of its tasks at once, got {max_at_once}"
            )));
        }
        self.group = Some(Group {
            key: key.to_owned(),
            max_at_once,
        });
        Ok(self)
    }

    /// Takes the task out of its ordered group ([`PushOptions::group`]).
    pub fn clear_group(&mut self) -> &mut Self {
        self.group = None;
        self
    }

    /// Files the task under fairness key `key` (1 to
    /// [`MAX_UNIQUE_KEY_LEN`] bytes of UTF-8, no NUL), a tenant say. Once
    /// a queue has a fairness key, its claims share their deliveries
    /// between the keys with ready tasks in proportion to their weights
    /// ([`crate::Queue::set_fair_weight`]); the tasks pushed without one
    /// share the empty key `""`. See the guide, "Fair shares".
    pub fn fair_key(&mut self, key: &str) -> Result<&mut Self> {
        check_text("a fairness key", key, MAX_UNIQUE_KEY_LEN)?;
        self.fair_key = Some(key.to_owned());
        Ok(self)
    }

    /// Takes the task's fairness key away ([`PushOptions::fair_key`]).
    pub fn clear_fair_key(&mut self) -> &mut Self {
        self.fair_key = None;
        self
    }

    fn add_parents(&mut self, parents: impl IntoIterator<Item = Parent>) -> Result<&mut Self> {
        let mut after = self.after.clone();
        after.extend(parents);
        if after.len() > MAX_PARENTS {
            return Err(Error::invalid_argument(format!(
                "a task may wait for at most {MAX_PARENTS} tasks, got {}",
                after.len()
            )));
        }
        self.after = after;
        Ok(self)
    }
}

/// The keys of [`PushOptions::from_json`], each named after the setter of
/// `tq_push_options` it stands for.
pub const PUSH_OPTION_KEYS: &[&str] = &[
    "delay_ms",
    "run_at_unix_ms",
    "priority",
    "max_attempts",
    "unique_key",
    "unique_for_ms",
    "after",
    "on_parent_failure",
    "group",
    "group_max_at_once",
    "expire_after_ms",
    "expire_at_unix_ms",
    "deadline_after_ms",
    "deadline_unix_ms",
    "replace_pending",
    "debounce_max_ms",
    "fair_key",
];

impl PushOptions {
    /// Push options written as a JSON object, for pushes made in SQL (the
    /// SQLite extension's `tq_push(queue, payload, options)` and
    /// PostgreSQL's `tq.push`): `{"delay_ms": 5000, "unique_key": "order-7"}`.
    /// The keys are [`PUSH_OPTION_KEYS`]; `after` takes an array of task
    /// ids, `on_parent_failure` `"cancel"` or `"run_anyway"`, and
    /// `group_max_at_once` (default 1) needs `group`, `replace_pending`
    /// takes `true` or `false`, and `debounce_max_ms` sets
    /// [`PushOptions::debounce`]; a merge needs `unique_key` and refuses
    /// `after` and `group` ([`PushOptions::replace_pending`]). A key not known, a
    /// value of the wrong type or out of range is an error naming it.
    pub fn from_json(json: &str) -> Result<PushOptions> {
        let value: serde_json::Value = serde_json::from_str(json).map_err(|err| {
            Error::invalid_argument(format!("push options are not valid JSON: {err}"))
        })?;
        let serde_json::Value::Object(fields) = value else {
            return Err(Error::invalid_argument(
                "push options are a JSON object, such as {\"delay_ms\": 1000}",
            ));
        };
        if let Some(unknown) = fields
            .keys()
            .find(|key| !PUSH_OPTION_KEYS.contains(&key.as_str()))
        {
            return Err(Error::invalid_argument(format!(
                "unknown push option \"{unknown}\": the options are {}",
                PUSH_OPTION_KEYS.join(", ")
            )));
        }
        if fields.contains_key("delay_ms") && fields.contains_key("run_at_unix_ms") {
            return Err(Error::invalid_argument(
                "a push takes a delay or a run-at time, not both",
            ));
        }
        let mut options = PushOptions::new();
        if let Some(delay) = fields.get("delay_ms") {
            options.delay(Duration::from_millis(json_integer(delay, "delay_ms")?))?;
        }
        if let Some(at) = fields.get("run_at_unix_ms") {
            options.run_at_unix_ms(json_integer(at, "run_at_unix_ms")?)?;
        }
        if let Some(priority) = fields.get("priority") {
            options.priority(json_integer(priority, "priority")?);
        }
        if let Some(attempts) = fields.get("max_attempts") {
            options.max_attempts(json_integer(attempts, "max_attempts")?)?;
        }
        if let Some(key) = fields.get("unique_key") {
            options.unique_key(json_text(key, "unique_key")?)?;
        }
        if let Some(window) = fields.get("unique_for_ms") {
            options.unique_for(Duration::from_millis(json_integer(
                window,
                "unique_for_ms",
            )?))?;
        }
        options.limits_from_json(&fields)?;
        options.relations_from_json(&fields)?;
        options.merge_from_json(&fields)?;
        options.check_merge()?;
        Ok(options)
    }

    /// The options of [`PushOptions::from_json`] that bound when the task
    /// may start: its expiry and its deadline, each given one way only.
    fn limits_from_json(
        &mut self,
        fields: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        for (after, at, what) in [
            ("expire_after_ms", "expire_at_unix_ms", "an expiry"),
            ("deadline_after_ms", "deadline_unix_ms", "a deadline"),
        ] {
            if fields.contains_key(after) && fields.contains_key(at) {
                return Err(Error::invalid_argument(format!(
                    "a push takes {what} after the push ({after}) or at a time ({at}), not both"
                )));
            }
        }
        if let Some(after) = fields.get("expire_after_ms") {
            self.expire_after(Duration::from_millis(json_integer(
                after,
                "expire_after_ms",
            )?))?;
        }
        if let Some(at) = fields.get("expire_at_unix_ms") {
            self.expire_at_unix_ms(json_integer(at, "expire_at_unix_ms")?)?;
        }
        if let Some(after) = fields.get("deadline_after_ms") {
            self.deadline_after(Duration::from_millis(json_integer(
                after,
                "deadline_after_ms",
            )?))?;
        }
        if let Some(at) = fields.get("deadline_unix_ms") {
            self.deadline_unix_ms(json_integer(at, "deadline_unix_ms")?)?;
        }
        Ok(())
    }

    /// The options of [`PushOptions::from_json`] that tie the task to
    /// others: the tasks it waits for, its ordered group, and its
    /// fairness key.
    fn relations_from_json(
        &mut self,
        fields: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<()> {
        if let Some(after) = fields.get("after") {
            let ids = after
                .as_array()
                .ok_or_else(|| wrong_type("after", "an array of task ids"))?
                .iter()
                .map(|id| json_integer(id, "after"))
                .collect::<Result<Vec<i64>>>()?;
            self.after(&ids)?;
        }
        if let Some(policy) = fields.get("on_parent_failure") {
            self.on_parent_failure(match json_text(policy, "on_parent_failure")? {
                "cancel" => ParentFailure::Cancel,
                "run_anyway" => ParentFailure::RunAnyway,
                other => {
                    return Err(Error::invalid_argument(format!(
                        "on_parent_failure is \"cancel\" or \"run_anyway\", got \"{other}\""
                    )))
                }
            });
        }
        match (fields.get("group"), fields.get("group_max_at_once")) {
            (Some(group), at_once) => {
                let at_once = at_once.map_or(Ok(1), |n| json_integer(n, "group_max_at_once"))?;
                self.group(json_text(group, "group")?, at_once)?;
            }
            (None, Some(_)) => {
                return Err(Error::invalid_argument(
                    "group_max_at_once needs a group: set \"group\" too",
                ))
            }
            (None, None) => {}
        }
        if let Some(key) = fields.get("fair_key") {
            self.fair_key(json_text(key, "fair_key")?)?;
        }
        Ok(())
    }
}

/// The integer `value` of push option `key`, in `T`'s range.
fn json_integer<T: TryFrom<i64>>(value: &serde_json::Value, key: &str) -> Result<T> {
    value
        .as_i64()
        .and_then(|n| T::try_from(n).ok())
        .ok_or_else(|| wrong_type(key, "an integer in range"))
}

/// The string `value` of push option `key`.
fn json_text<'a>(value: &'a serde_json::Value, key: &str) -> Result<&'a str> {
    value.as_str().ok_or_else(|| wrong_type(key, "a string"))
}

fn wrong_type(key: &str, expected: &str) -> Error {
    Error::invalid_argument(format!("push option {key} takes {expected}"))
}

/// Options for [`crate::Queue::pull`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullOptions {
    pub(crate) lease: Duration,
    pub(crate) wait: Duration,
    pub(crate) cancel: Option<CancelToken>,
}

impl Default for PullOptions {
    fn default() -> Self {
        PullOptions {
            lease: Duration::from_secs(30),
            wait: Duration::ZERO,
            cancel: None,
        }
    }
}

impl PullOptions {
    /// Defaults: a 30 s lease, no waiting, no cancellation token.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a pull waits for a task when none is ready (up to one
    /// year; default 0: answer at once). The wait ends as soon as a task
    /// can be claimed, when [`crate::Queue::interrupt`] is called on the
    /// handle, or when the cancellation token is cancelled.
    pub fn wait(&mut self, wait: Duration) -> Result<&mut Self> {
        self.wait = check_duration("the wait", wait, Duration::ZERO)?;
        Ok(self)
    }

    /// Lets `token` end this pull's wait from another thread (see
    /// [`CancelToken::cancel`]); `None` removes it.
    pub fn cancel_token(&mut self, token: Option<CancelToken>) -> &mut Self {
        self.cancel = token;
        self
    }

    /// How long the claimed task stays held before it is ready again for
    /// others: 1 ms to one year.
    pub fn lease(&mut self, lease: Duration) -> Result<&mut Self> {
        self.lease = check_lease(lease)?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_pauses_double_up_to_the_limit_and_jitter_takes_at_most_half() {
        let backoff = RetryBackoff {
            min: Duration::from_millis(100),
            max: Duration::from_millis(1000),
        };
        let no_jitter = |attempts| backoff.pause(attempts, 0).as_millis();
        assert_eq!(
            [1, 2, 3, 4, 5, 60].map(no_jitter),
            [100, 200, 400, 800, 1000, 1000]
        );
        for random in [1, 77, 500, 501, u64::MAX] {
            let pause = backoff.pause(5, random).as_millis();
            assert!((500..=1000).contains(&pause), "{pause}");
        }
        assert_eq!(backoff.pause(5, 500).as_millis(), 500);
        let immediate = RetryBackoff {
            min: Duration::ZERO,
            max: Duration::ZERO,
        };
        assert_eq!(immediate.pause(3, u64::MAX), Duration::ZERO);
    }
}
