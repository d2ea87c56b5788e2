//! Reading a queue without changing it: counts, lists, one task, timings
//! and the queues of the file.

use std::time::Duration;

use super::{Queue, MAX_TIMINGS};
use crate::clock::now_unix_ms;
use crate::error::Result;
use crate::options::{check_text, MAX_UNIQUE_KEY_LEN};
use crate::store::ListFrom;
use crate::task::{Delayed, Lease, TaskInfo, TaskState, TaskTiming};

impl Queue {
    /// How many tasks of this queue are in `state`. A leased task whose
    /// lease expired counts as leased until it is claimed again or
    /// recovered.
    pub fn count(&self, state: TaskState) -> Result<u64> {
        self.store()?.count(state)
    }

    /// How many ordered groups of this queue have tasks waiting for their turn
    /// behind the group's earlier tasks
    /// ([`PushOptions::group`](crate::PushOptions::group)). Their tasks count
    /// as pending.
    pub fn groups_waiting(&self) -> Result<u64> {
        self.store()?.groups_waiting()
    }

    /// How long the task that has been ready longest has waited, or `None`
    /// when no task is ready.
    pub fn oldest_ready_age(&self) -> Result<Option<Duration>> {
        let now = now_unix_ms();
        let oldest = self.store()?.oldest_ready(now)?;
        Ok(
            oldest
                .map(|ready_at| Duration::from_millis(now.saturating_sub(ready_at).max(0) as u64)),
        )
    }

    /// A page of this queue's tasks in `state`: up to `limit` of them with
    /// ids above `after_id`, by id, oldest first. Start with `after_id` 0
    /// and pass the last id of each page to get the next. On SQLite a page
    /// reads the ids that follow `after_id` while the state's tasks are
    /// found among them, else the state's own indexes; it is a call for
    /// tools, not for a worker's loop.
    pub fn list(&self, state: TaskState, after_id: i64, limit: usize) -> Result<Vec<TaskInfo>> {
        self.store()?.list(state, ListFrom::After(after_id), limit)
    }

    /// A page of this queue's tasks in `state`, newest first: up to `limit`
    /// of them with ids below `before_id`. Start with `before_id`
    /// `i64::MAX` and pass the last id of each page to get the next. Reads
    /// as [`Queue::list`] does.
    pub fn list_newest_first(
        &self,
        state: TaskState,
        before_id: i64,
        limit: usize,
    ) -> Result<Vec<TaskInfo>> {
        self.store()?
            .list(state, ListFrom::Before(before_id), limit)
    }

    /// The task of this queue stored under the unique key `key` (see
    /// [`PushOptions::unique_key`](crate::PushOptions::unique_key)), if any:
    /// the task holding the key, or the last one given it, which keeps it once
    /// done or dead until a later push with the key takes it (a cancelled task
    /// gives it up). One index lookup.
    pub fn task_with_unique_key(&self, key: &str) -> Result<Option<TaskInfo>> {
        check_text("a unique key", key, MAX_UNIQUE_KEY_LEN)?;
        self.store()?.task_with_unique_key(key)
    }

    /// When this queue's tasks were due, claimed and finished, for the
    /// time they waited for a worker and ran ([`TaskTiming`]): the tasks
    /// leased now (or whose cancellation waits for their holder) whose
    /// last claim was at or after `since_unix_ms`, and the done and dead
    /// tasks still stored that ended at or after it. A monitor that calls
    /// it every few seconds sees each claim and each end once, if it
    /// counts only the times between its last call and this one.
    ///
    /// Only stored rows are seen: a task that was claimed and then went
    /// back to pending (failed with a retry left, snoozed, or taken back
    /// after its lease ran out) before the call is not, nor is a task
    /// finished on a handle without history and so deleted (nor cancelled
    /// ones), nor a task purged meanwhile. A claim made again overwrites
    /// the time of the one before. Tasks claimed by a tq older than this
    /// one have no claim time and are left out.
    ///
    /// Each kind (leased, cancelling, done, dead) holds at most
    /// [`MAX_TIMINGS`] tasks, the ended ones earliest end first, so a call
    /// stays cheap: a later call from the last end time seen reads on
    /// (the tasks that ended at that very time come again). It reads
    /// through the indexes of leased, done and dead tasks only, never the
    /// whole table. Times are the store's (the server's, on PostgreSQL),
    /// in milliseconds since the Unix epoch.
    pub fn timings_since(&self, since_unix_ms: i64) -> Result<Vec<TaskTiming>> {
        self.store()?.timings_since(since_unix_ms, MAX_TIMINGS)
    }

    /// Task `id` of this queue as it is now, with its result and progress;
    /// `None` when the queue has no such task (never pushed, or ended and
    /// not kept: see [`Queue::finish_with_result`]).
    pub fn task(&self, id: i64) -> Result<Option<TaskInfo>> {
        self.store()?.task(id)
    }

    /// Up to `limit` of this queue's delayed tasks of `kind`: pending
    /// tasks not yet due (neither ready nor waiting for other tasks),
    /// soonest first (by run time, then id), from just after the task
    /// whose run time and id are `after` (the last of the page before;
    /// `None` for the first page). A range of the index of delayed tasks,
    /// reading each task's row for its attempts: a page costs about its
    /// own tasks when most delayed tasks are of `kind`.
    pub fn list_delayed(
        &self,
        kind: Delayed,
        after: Option<(i64, i64)>,
        limit: usize,
    ) -> Result<Vec<TaskInfo>> {
        let after = after.unwrap_or((i64::MIN, i64::MIN));
        self.store()?
            .list_delayed(kind, after, now_unix_ms(), limit)
    }

    /// How many tasks [`Queue::list_delayed`] would list of `kind`, counting
    /// no further than `up_to` (the count reads each delayed task's row).
    pub fn count_delayed(&self, kind: Delayed, up_to: u64) -> Result<u64> {
        self.store()?.count_delayed(kind, now_unix_ms(), up_to)
    }

    /// Up to `limit` of this queue's leased tasks (those whose
    /// cancellation waits for their holder too), each with who holds it
    /// and until when, by holder then lease expiry; only task `only`'s
    /// lease when given. A leased task whose lease ran out is listed
    /// until it is claimed again or recovered. Read through the index of
    /// leased tasks: it costs about the queue's leased tasks.
    pub fn leases(&self, only: Option<i64>, limit: usize) -> Result<Vec<Lease>> {
        self.store()?.leases(only, limit)
    }

    /// The names of the queues in this handle's file (or PostgreSQL schema)
    /// that hold at least one task, in any state, sorted: a few index
    /// lookups per queue, however many tasks there are.
    pub fn queue_names(&self) -> Result<Vec<String>> {
        self.store()?.queue_names()
    }

    /// The highest task id handed out in this handle's file (or PostgreSQL
    /// schema), in any queue; 0 before the first push. Ids are never
    /// reused, so its growth counts the tasks pushed meanwhile. On
    /// PostgreSQL a push refused as a duplicate, or rolled back, uses an id
    /// too.
    pub fn last_id(&self) -> Result<i64> {
        self.store()?.last_id()
    }

    /// The size of the write-ahead log (`-wal` file), in bytes; refused, as
    /// [`Queue::checkpoint`] is, on PostgreSQL.
    pub fn wal_size(&self) -> Result<u64> {
        self.store()?.wal_size()
    }
}
