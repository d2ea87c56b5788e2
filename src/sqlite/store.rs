//! The SQLite backend as the engine sees it: `impl Store for SqliteStore`,
//! its methods in the order of the trait, each handing its work to the
//! file that answers for it (`push.rs`, `claim.rs`, `finish.rs`, ...).

use std::sync::Arc;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension};

use super::commands::{wrong_output, Op, Output};
use super::{
    attempts, cancel, claim, fair, finish, ids, list, recover, schedules, settings, steps,
    SqliteStore,
};
use crate::error::{Error, Result};
use crate::options::RetryBackoff;
use crate::schedule::{ScheduleInfo, StoredSchedule};
use crate::store::{
    cancellations_channel, delivery_stop, not_held, stored_pause, stored_reason, Checkpoint,
    IfNotHeld, ListFrom, Look, NewTask, PutSchedule, Store,
};
use crate::task::{
    Cancelled, Delayed, Failed, Lease, Pause, Pushed, RateLimit, Receipt, Stop, Task, TaskInfo,
    TaskState, TaskTiming,
};
use crate::wait::Bell;

impl Store for SqliteStore {
    // Push

    fn push(&self, tasks: Vec<NewTask>, now: i64) -> Result<Vec<Pushed>> {
        match self.submit(Op::Push {
            queue: self.queue.clone(),
            tasks,
            now,
        })? {
            Output::Pushed(pushed) => {
                self.ring_other_processes();
                Ok(pushed)
            }
            _ => Err(wrong_output()),
        }
    }

    // Claim

    fn claim(&self, max: usize, now: i64, lease: i64) -> Result<Vec<Task>> {
        match self.submit(Op::Claim(self.claim_args(max, now, lease)))? {
            Output::Tasks(tasks) => Ok(tasks),
            _ => Err(wrong_output()),
        }
    }

    // Finish, fail, extend

    fn finish(&self, receipts: &[Receipt], now: i64) -> Result<Vec<bool>> {
        match self.submit(Op::Finish {
            queue: self.queue.clone(),
            receipts: receipts.to_vec(),
            now,
            keep_history: self.keep_history,
        })? {
            Output::Held(held) => {
                // A finish frees a slot of a concurrency limit.
                self.ring_other_processes();
                Ok(held)
            }
            _ => Err(wrong_output()),
        }
    }

    fn finish_with_result(
        &self,
        receipt: Receipt,
        result: &str,
        now: i64,
        retention: i64,
    ) -> Result<bool> {
        match self.submit(Op::FinishWithResult {
            queue: self.queue.clone(),
            receipt,
            result: result.to_owned(),
            now,
            keep_history: self.keep_history,
            keep_until: now.saturating_add(retention),
        })? {
            Output::Held(held) => {
                // Waiters for the task's outcome, and a slot of a limit.
                self.ring_other_processes();
                Ok(held[0])
            }
            _ => Err(wrong_output()),
        }
    }

    fn finish_and_claim(
        &self,
        receipts: &[Receipt],
        if_not_held: IfNotHeld,
        now: i64,
        lease: i64,
        max: usize,
    ) -> Result<(Vec<bool>, Vec<Task>)> {
        match self.submit(Op::FinishAndClaim {
            receipts: receipts.to_vec(),
            if_not_held,
            keep_history: self.keep_history,
            claim: self.claim_args(max, now, lease),
        })? {
            Output::HeldAndTasks(held, tasks) => {
                if held.iter().filter(|&&held| held).count() > tasks.len() {
                    // Slots of a concurrency limit were freed, not taken again.
                    self.ring_other_processes();
                }
                Ok((held, tasks))
            }
            _ => Err(wrong_output()),
        }
    }

    fn fail(
        &self,
        receipt: Receipt,
        reason: &str,
        now: i64,
        backoff: &RetryBackoff,
    ) -> Result<Failed> {
        match self.submit(Op::Fail {
            receipt,
            reason: reason.to_owned(),
            now,
            backoff: *backoff,
            keep_history: self.keep_history,
        })? {
            Output::Failed(failed) => {
                // A retry readies a task; either way, a slot of a limit is free.
                self.ring_other_processes();
                Ok(failed)
            }
            _ => Err(wrong_output()),
        }
    }

    fn extend(&self, receipt: Receipt, now: i64, lease: i64, progress: Option<&str>) -> Result<()> {
        match self.submit(Op::Extend {
            receipt,
            now,
            lease_expires_at: now.saturating_add(lease),
            progress: progress.map(str::to_owned),
        })? {
            Output::Extended => Ok(()),
            _ => Err(wrong_output()),
        }
    }

    // Recover

    fn recover(&self, now: i64) -> Result<u64> {
        let recovered = self.write(|conn| {
            recover::recover(
                conn,
                &self.queue,
                &self.file.process,
                now,
                self.keep_history,
            )
        })?;
        if recovered > 0 {
            self.ring_other_processes();
        }
        Ok(recovered)
    }

    // Look at a queue

    fn count(&self, state: TaskState) -> Result<u64> {
        let sql = list::count_sql(state);
        let count: i64 = self.read(|conn| {
            Ok(conn
                .prepare_cached(&sql)?
                .query_row([&self.queue], |row| row.get(0))?)
        })?;
        Ok(count as u64)
    }

    fn groups_waiting(&self) -> Result<u64> {
        let count = self.read(|conn| list::groups_waiting(conn, &self.queue))?;
        Ok(count as u64)
    }

    fn oldest_ready(&self, now: i64) -> Result<Option<i64>> {
        self.read(|conn| list::oldest_ready(conn, &self.queue, now))
    }

    fn task(&self, id: i64) -> Result<Option<TaskInfo>> {
        self.read(|conn| {
            let Some(mut task) = list::task(conn, &self.queue, id)? else {
                return Ok(None);
            };
            task.steps = steps::of_task(conn, id)?;
            task.ended_attempts = attempts::of_task(conn, id)?;
            Ok(Some(task))
        })
    }

    fn timings_since(&self, since: i64, limit: usize) -> Result<Vec<TaskTiming>> {
        self.read(|conn| list::timings_since(conn, &self.queue, since, limit))
    }

    fn list(&self, state: TaskState, from: ListFrom, limit: usize) -> Result<Vec<TaskInfo>> {
        self.read(|conn| list::list(conn, &self.queue, state, from, limit))
    }

    fn list_delayed(
        &self,
        kind: Delayed,
        after: (i64, i64),
        now: i64,
        limit: usize,
    ) -> Result<Vec<TaskInfo>> {
        self.read(|conn| list::list_delayed(conn, &self.queue, kind, after, now, limit))
    }

    fn count_delayed(&self, kind: Delayed, now: i64, up_to: u64) -> Result<u64> {
        self.read(|conn| list::count_delayed(conn, &self.queue, kind, now, up_to))
    }

    fn leases(&self, only: Option<i64>, limit: usize) -> Result<Vec<Lease>> {
        self.read(|conn| list::leases(conn, &self.queue, only, limit))
    }

    fn task_with_unique_key(&self, key: &str) -> Result<Option<TaskInfo>> {
        self.read(|conn| list::task_with_unique_key(conn, &self.queue, key))
    }

    // Retry and purge

    fn retry_dead(&self, ids: Option<&[i64]>, now: i64) -> Result<u64> {
        let retried = self.write(|conn| finish::retry_dead(conn, &self.queue, ids, now))?;
        if retried > 0 {
            self.ring_other_processes();
        }
        Ok(retried)
    }

    fn purge(&self, state: TaskState, now: i64, older_than: i64) -> Result<u64> {
        let before = now.saturating_sub(older_than);
        let sql = match state {
            TaskState::Done => {
                "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 2 AND finished_at <= ?2"
            }
            TaskState::Dead => {
                "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 3 AND finished_at <= ?2"
            }
            TaskState::Cancelled => {
                "DELETE FROM tq_tasks WHERE queue = ?1 AND state = 5 AND finished_at <= ?2"
            }
            TaskState::Pending | TaskState::Leased => {
                return Err(Error::invalid_argument(
                    "only done, dead and cancelled tasks can be purged",
                ))
            }
        };
        self.write(|conn| {
            Ok(conn
                .prepare_cached(sql)?
                .execute(params![self.queue, before])? as u64)
        })
    }

    // Cancel

    fn cancel_task(&self, id: i64, reason: &str, now: i64) -> Result<Cancelled> {
        let reason = stored_reason(reason);
        let cancelled = self.write(|conn| {
            cancel::cancel_task(conn, &self.queue, id, reason, now, self.keep_history)
        })?;
        if cancelled == Cancelled::Requested {
            self.ring_cancellation()?;
        }
        Ok(cancelled)
    }

    fn cancel_many(&self, ids: &[i64], reason: &str, now: i64) -> Result<u64> {
        let reason = stored_reason(reason);
        let (cancelled, requested) = self.write(|conn| {
            let (mut cancelled, mut requested) = (0, false);
            for &id in ids {
                match cancel::cancel_task(conn, &self.queue, id, reason, now, self.keep_history) {
                    Ok(outcome) => {
                        cancelled += 1;
                        requested |= outcome == Cancelled::Requested;
                    }
                    // Refused before any write: the task is skipped.
                    Err(err) if err.kind() == crate::ErrorKind::InvalidArgument => {}
                    Err(err) => return Err(err),
                }
            }
            Ok((cancelled, requested))
        })?;
        if requested {
            self.ring_cancellation()?;
        }
        Ok(cancelled)
    }

    fn end_cancelled(&self, receipt: Receipt, now: i64) -> Result<bool> {
        self.write(|conn| cancel::end_cancelled(conn, receipt, now, self.keep_history))
            .inspect(|&ended| {
                if ended {
                    self.ring_other_processes();
                }
            })
    }

    fn delivery(&self, receipt: Receipt) -> Result<Option<Stop>> {
        let state: Option<i64> = self.read(|conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT state FROM tq_tasks
                     WHERE id = ?1 AND lease_token = ?2 AND (state = 1 OR state = 6)",
                )?
                .query_row(params![receipt.id, receipt.token], |row| row.get(0))
                .optional()?)
        })?;
        Ok(delivery_stop(state))
    }

    fn cancellations(&self) -> Result<(Arc<Bell>, Duration)> {
        let channel = cancellations_channel(&self.queue);
        let bell = Bell::for_queue(self.file.file_id, &channel)?;
        let safety_net = match &self.file.page {
            Some(page) if self.file.watcher.start(page, self.file.file_id, &channel) => {
                super::wake::safety_net()
            }
            _ => crate::wait::POLL_INTERVAL,
        };
        Ok((bell, safety_net))
    }

    // Snooze

    fn snooze(&self, receipt: Receipt, now: i64, delay: i64) -> Result<()> {
        let run_at = now.saturating_add(delay);
        let snoozed = self.write(|conn| finish::snooze(conn, receipt, now, run_at))?;
        if snoozed == 0 {
            return Err(not_held(receipt.id));
        }
        self.ring_other_processes();
        Ok(())
    }

    // Steps

    fn record_step(&self, receipt: Receipt, name: &str, output: &str, now: i64) -> Result<bool> {
        self.write(|conn| steps::record(conn, receipt, name, output, now))
    }

    fn step_output(&self, id: i64, name: &str) -> Result<Option<String>> {
        self.read(|conn| steps::output(conn, id, name))
    }

    fn clear_steps_after(&self, id: i64, name: &str) -> Result<u64> {
        self.write(|conn| steps::clear_after(conn, &self.queue, id, name))
    }

    // Pause and limits

    fn set_pause(&self, pause: Option<Pause>) -> Result<()> {
        self.write(|conn| settings::set_pause(conn, &self.queue, pause))?;
        if pause.is_none() {
            self.ring_other_processes();
        }
        Ok(())
    }

    fn pause(&self, now: i64) -> Result<Option<Pause>> {
        self.read(|conn| Ok(settings::paused_until(conn, &self.queue, now)?.map(stored_pause)))
    }

    fn set_concurrency_limit(&self, limit: Option<u32>) -> Result<()> {
        self.write(|conn| settings::set_concurrency_limit(conn, &self.queue, limit))?;
        // A higher limit, or none, may let waiters claim.
        self.ring_other_processes();
        Ok(())
    }

    fn concurrency_limit(&self) -> Result<Option<u32>> {
        self.read(|conn| settings::concurrency_limit(conn, &self.queue))
    }

    fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<()> {
        let changed = self.write(|conn| settings::set_rate_limit(conn, &self.queue, limit))?;
        if changed {
            self.ring_other_processes();
        }
        Ok(())
    }

    fn rate_limit(&self) -> Result<Option<RateLimit>> {
        self.read(|conn| settings::rate_limit_of(conn, &self.queue))
    }

    fn set_max_pending(&self, cap: Option<u64>) -> Result<()> {
        self.write(|conn| settings::set_max_pending(conn, &self.queue, cap))
    }

    fn max_pending(&self) -> Result<Option<u64>> {
        self.read(|conn| settings::max_pending(conn, &self.queue))
    }

    fn set_max_pending_per_key(&self, cap: Option<u64>) -> Result<()> {
        self.write(|conn| fair::set_max_pending_per_key(conn, &self.queue, cap))
    }

    fn max_pending_per_key(&self) -> Result<Option<u64>> {
        self.read(|conn| fair::max_pending_per_key(conn, &self.queue))
    }

    fn set_key_max_pending(&self, key: &str, cap: Option<u64>) -> Result<()> {
        self.write(|conn| fair::set_key_max_pending(conn, &self.queue, key, cap))
    }

    fn key_max_pending(&self, key: &str) -> Result<Option<u64>> {
        self.read(|conn| fair::key_max_pending(conn, &self.queue, key))
    }

    fn set_fair_weight(&self, key: &str, weight: f64) -> Result<()> {
        self.write(|conn| fair::set_weight(conn, &self.queue, key, weight))
    }

    fn fair_weight(&self, key: &str) -> Result<f64> {
        self.read(|conn| fair::weight(conn, &self.queue, key))
    }

    // The file

    fn checkpoint(&self) -> Result<Checkpoint> {
        let busy = self.file.checkpoint()?;
        Ok(Checkpoint {
            wal_bytes: self.wal_size()?,
            complete: !busy,
        })
    }

    fn wal_size(&self) -> Result<u64> {
        self.file.wal_file_size()
    }

    // Waiting

    fn next_claimable(&self, now: i64) -> Result<Option<i64>> {
        self.read(|conn| claim::next_claimable(conn, &self.queue, now))
    }

    fn change_counter(&self) -> Result<i64> {
        self.read(data_version)
    }

    fn look(&self, now: i64, seen: Option<i64>) -> Result<Option<Look>> {
        self.read(|conn| {
            let changes = data_version(conn)?;
            if seen == Some(changes) {
                return Ok(None);
            }
            Ok(Some(Look {
                changes,
                claimable: claim::next_claimable(conn, &self.queue, now)?,
                next_slot: schedules::next_slot(conn, &self.queue)?,
            }))
        })
    }

    fn watch_other_processes(&self) -> Duration {
        // Rarely with the watcher (see `wake.rs`), often without.
        match &self.file.page {
            Some(page)
                if self
                    .file
                    .watcher
                    .start(page, self.file.file_id, &self.queue) =>
            {
                super::wake::safety_net()
            }
            _ => crate::wait::POLL_INTERVAL,
        }
    }

    // The whole file's queues and ids

    fn queue_names(&self) -> Result<Vec<String>> {
        self.read(list::queue_names)
    }

    fn last_id(&self) -> Result<i64> {
        self.read(ids::last_given)
    }

    // Schedules

    fn put_schedule(&self, schedule: &StoredSchedule, put: PutSchedule, now: i64) -> Result<()> {
        self.write(|conn| schedules::put(conn, &self.queue, schedule, put, now))?;
        // A waiter's wait may now end sooner, at the first slot.
        self.ring_other_processes();
        Ok(())
    }

    fn remove_schedule(&self, name: &str) -> Result<bool> {
        self.write(|conn| schedules::remove(conn, &self.queue, name))
    }

    fn set_schedule_paused(&self, name: &str, paused: bool, now: i64) -> Result<bool> {
        let found =
            self.write(|conn| schedules::set_paused(conn, &self.queue, name, paused, now))?;
        if found && !paused {
            self.ring_other_processes();
        }
        Ok(found)
    }

    fn schedules(&self) -> Result<Vec<ScheduleInfo>> {
        self.read(|conn| schedules::list(conn, &self.queue))
    }

    fn run_due_schedules(&self, now: i64) -> Result<u64> {
        let stored = self.write(|conn| schedules::run_due(conn, &self.queue, now))?;
        if stored > 0 {
            self.ring_other_processes();
        }
        Ok(stored)
    }

    fn next_schedule_slot(&self, _now: i64) -> Result<Option<i64>> {
        self.read(|conn| schedules::next_slot(conn, &self.queue))
    }

    // Identity

    fn store_id(&self) -> u128 {
        let (device, inode) = self.file_id();
        (u128::from(device) << 64) | u128::from(inode)
    }
}

/// The file's change counter as `conn` sees it ([`Store::change_counter`]).
fn data_version(conn: &Connection) -> Result<i64> {
    Ok(conn
        .prepare_cached("PRAGMA data_version")?
        .query_row([], |row| row.get(0))?)
}
